//! Streaming merge of sorted runs with bounded memory: each run is consumed batch by batch, and
//! records are merged in key ranges that every run has fully buffered.
//!
//! Each step takes the smallest "last key" among the runs' current batches as a cut: every record
//! with a key up to the cut is already in memory (runs are sorted with each key at most once), so
//! those prefixes are merged with [`merge_sorted_slices`] and emitted, and the run that set the cut moves
//! to its next batch. Memory holds one batch per run plus one merged chunk, whatever the data size.

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use arrow::row::{OwnedRow, RowConverter, Rows};

use super::ranked::merge_ranked;
use super::sorted::{int_keys, merge_sorted_columns};
use super::{encode_keys, key_converter, MergeSpec};
use crate::error::Result;

/// A sorted run as a stream of batches in the data-file layout, sorted by key, keys unique.
pub type RunStream = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// A batch's keys as the cuts compare them: one BIGINT or INT key column as integers, any other
/// key in Arrow's row encoding (from one converter, so rows of different runs compare).
enum Keys {
    Ints(arrow::buffer::ScalarBuffer<i64>),
    Rows(Rows),
}

/// How a stream's keys are compared: decided by the key's types, the same for every run.
enum KeyOrder {
    Ints,
    Rows(RowConverter),
}

impl KeyOrder {
    fn of(batch: &RecordBatch, k: usize) -> Result<Self> {
        let key = &batch.columns()[..k];
        Ok(match key {
            [c] if matches!(c.data_type(), DataType::Int64 | DataType::Int32) => KeyOrder::Ints,
            _ => KeyOrder::Rows(key_converter(key.iter().map(|c| c.data_type()))?),
        })
    }

    fn keys(&self, batch: &RecordBatch, k: usize) -> Result<Keys> {
        match self {
            KeyOrder::Rows(conv) => Ok(Keys::Rows(encode_keys(conv, batch, k)?)),
            KeyOrder::Ints => int_keys(batch).map(Keys::Ints).ok_or_else(|| {
                crate::error::InvalidArgumentSnafu {
                    message: "a primary-key column of a data file holds NULL".to_string(),
                }
                .build()
            }),
        }
    }
}

/// The key a step cuts at.
enum Cut {
    Int(i64),
    Row(OwnedRow),
}

impl Keys {
    fn cut(&self, row: usize) -> Cut {
        match self {
            Keys::Ints(v) => Cut::Int(v[row]),
            Keys::Rows(r) => Cut::Row(r.row(row).owned()),
        }
    }

    /// The first row at or after `from` whose key is above `cut` (keys ascending).
    fn after(&self, from: usize, n: usize, cut: &Cut) -> usize {
        match (self, cut) {
            (Keys::Ints(v), Cut::Int(c)) => from + v[from..n].partition_point(|k| k <= c),
            (Keys::Rows(r), Cut::Row(c)) => {
                let (mut lo, mut hi) = (from, n);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if r.row(mid) <= c.row() {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
            // One order for all runs: never mixed.
            _ => from,
        }
    }
}

/// Orders the last keys of two batches.
fn compare_last(a: &Keys, an: usize, b: &Keys, bn: usize) -> std::cmp::Ordering {
    match (a, b) {
        (Keys::Ints(x), Keys::Ints(y)) => x[an - 1].cmp(&y[bn - 1]),
        (Keys::Rows(x), Keys::Rows(y)) => x.row(an - 1).cmp(&y.row(bn - 1)),
        _ => std::cmp::Ordering::Equal,
    }
}

struct Cursor {
    /// Position of the run in the caller's list.
    run: usize,
    stream: RunStream,
    batch: RecordBatch,
    keys: Keys,
    pos: usize,
}

/// The first non-empty batch of `stream`, if any.
fn first_batch(stream: &mut RunStream) -> Result<Option<RecordBatch>> {
    for batch in stream.by_ref() {
        let batch = batch?;
        if batch.num_rows() > 0 {
            return Ok(Some(batch));
        }
    }
    Ok(None)
}

/// Pulls the next non-empty batch of a run.
fn next_cursor(
    run: usize,
    mut stream: RunStream,
    order: &KeyOrder,
    k: usize,
) -> Result<Option<Cursor>> {
    match first_batch(&mut stream)? {
        Some(batch) => Ok(Some(Cursor {
            run,
            keys: order.keys(&batch, k)?,
            stream,
            batch,
            pos: 0,
        })),
        None => Ok(None),
    }
}

/// Merges `runs` and hands merged chunks (one record per key) to `sink`: all columns of the
/// data-file layout, or only `columns` (in that order). Chunks come in key order, each sorted by
/// key, unless `ranks` gives each run's one sequence number (runs of disjoint sequence ranges,
/// read without their own numbers): then a chunk may come as several batches, each sorted, which
/// a read that needs no key order takes ([`merge_ranked`]).
pub fn merge_streams(
    runs: Vec<RunStream>,
    spec: &MergeSpec,
    columns: Option<&[usize]>,
    ranks: Option<&[i64]>,
    mut sink: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    stream_chunks(runs, spec.key_count, |chunk| {
        let slices: Vec<RecordBatch> = chunk.iter().map(|(_, b)| b.clone()).collect();
        if let Some(ranks) = ranks {
            let ranked: Vec<i64> = chunk.iter().map(|(run, _)| ranks[*run]).collect();
            if let Some(parts) = merge_ranked(&slices, &ranked, spec, columns)? {
                return parts.into_iter().try_for_each(&mut sink);
            }
        }
        match merge_sorted_columns(&slices, spec, columns)? {
            Some(merged) => sink(merged),
            None => Ok(()),
        }
    })
}

/// Walks `runs` in key ranges that every run has fully buffered and hands each range to `sink`
/// unmerged, as (run index, slice) pairs: every record of a key arrives in one call.
pub fn stream_chunks(
    runs: Vec<RunStream>,
    k: usize,
    mut sink: impl FnMut(&[(usize, RecordBatch)]) -> Result<()>,
) -> Result<()> {
    let mut order: Option<KeyOrder> = None;
    let mut cursors: Vec<Cursor> = Vec::new();
    for (run, mut stream) in runs.into_iter().enumerate() {
        let Some(batch) = first_batch(&mut stream)? else {
            continue;
        };
        // The order is decided by the first batch's key types and shared so keys compare.
        let order = match &mut order {
            Some(o) => &*o,
            None => order.insert(KeyOrder::of(&batch, k)?),
        };
        cursors.push(Cursor {
            run,
            keys: order.keys(&batch, k)?,
            stream,
            batch,
            pos: 0,
        });
    }
    let Some(order) = order else { return Ok(()) };
    while !cursors.is_empty() {
        // The cut: the smallest last key among current batches.
        let cut_at = (0..cursors.len())
            .min_by(|&a, &b| {
                let (ca, cb) = (&cursors[a], &cursors[b]);
                compare_last(&ca.keys, ca.batch.num_rows(), &cb.keys, cb.batch.num_rows())
            })
            .unwrap_or(0);
        let cut = cursors[cut_at]
            .keys
            .cut(cursors[cut_at].batch.num_rows() - 1);
        let mut chunk = Vec::with_capacity(cursors.len());
        let mut exhausted = Vec::new();
        for (i, c) in cursors.iter_mut().enumerate() {
            let n = c.batch.num_rows();
            // Rows up to the cut (keys are sorted and unique within a run).
            let lo = c.keys.after(c.pos, n, &cut);
            if lo > c.pos {
                chunk.push((c.run, c.batch.slice(c.pos, lo - c.pos)));
                c.pos = lo;
            }
            if c.pos == n {
                exhausted.push(i);
            }
        }
        sink(&chunk)?;
        for i in exhausted.into_iter().rev() {
            let c = cursors.swap_remove(i);
            if let Some(next) = next_cursor(c.run, c.stream, &order, k)? {
                cursors.push(next);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use std::sync::Arc;

    fn batch(rows: &[(i64, i64)]) -> RecordBatch {
        let labels: Vec<String> = rows.iter().map(|r| format!("{}@{}", r.0, r.1)).collect();
        let full: Vec<(i64, i64, i8, &str)> = rows
            .iter()
            .zip(&labels)
            .map(|(r, l)| (r.0, r.1, 0, l.as_str()))
            .collect();
        super::super::tests::run(&full)
    }

    #[test]
    fn streaming_merge_equals_merging_everything_at_once() {
        for strings in [false, true] {
            streaming_merge_agrees(strings);
        }
    }

    fn streaming_merge_agrees(strings: bool) {
        let json = r#"{"id":0,"fields":[{"id":0,"name":"id","type":"BIGINT NOT NULL"},{"id":1,"name":"v","type":"STRING"}],
               "highestFieldId":1,"primaryKeys":["id"],"options":{"bucket":"1"}}"#;
        let schema: crate::spec::TableSchema = serde_json::from_str(json).unwrap();
        let spec = MergeSpec {
            key_count: 1,
            sequence_columns: vec![],
            config: Arc::new(super::super::MergeConfig::from_schema(&schema).unwrap()),
            keep_retracts: false,
        };
        let mut x: u64 = 3;
        let mut runs: Vec<Vec<RecordBatch>> = Vec::new();
        let mut seq = 0;
        for _ in 0..4 {
            let mut keys: Vec<i64> = (0..300)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % 1000) as i64
                })
                .collect();
            keys.sort_unstable();
            keys.dedup();
            let rows: Vec<(i64, i64)> = keys
                .iter()
                .map(|k| {
                    seq += 1;
                    (*k, seq)
                })
                .collect();
            // Uneven batch sizes.
            runs.push(
                rows.chunks(37)
                    .map(batch)
                    .map(|b| {
                        if strings {
                            // Zero-padded: the same order, compared as rows.
                            super::super::tests::string_keyed(&b, |k| format!("{k:08}"))
                        } else {
                            b
                        }
                    })
                    .collect(),
            );
        }
        let all: Vec<RecordBatch> = runs.iter().flatten().cloned().collect();
        let expected = super::super::merge_runs(&all, &spec).unwrap().unwrap();
        let streams: Vec<RunStream> = runs
            .into_iter()
            .map(|r| Box::new(r.into_iter().map(Ok)) as RunStream)
            .collect();
        let mut out = Vec::new();
        merge_streams(streams, &spec, None, None, |b| {
            out.push(b);
            Ok(())
        })
        .unwrap();
        let got = arrow::compute::concat_batches(&expected.schema(), &out).unwrap();
        assert_eq!(got.num_rows(), expected.num_rows());
        let keys = |b: &RecordBatch| {
            arrow::util::pretty::pretty_format_columns("k", &[Arc::clone(b.column(0))])
                .unwrap()
                .to_string()
        };
        assert_eq!(keys(&got), keys(&expected));
        assert_eq!(
            got.column(3).as_string::<i32>(),
            expected.column(3).as_string::<i32>()
        );
    }
}
