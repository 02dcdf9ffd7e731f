//! Streaming merge of sorted runs with bounded memory: each run is consumed batch by batch, and
//! records are merged in key ranges that every run has fully buffered.
//!
//! Each step takes the smallest "last key" among the runs' current batches as a cut: every record
//! with a key up to the cut is already in memory (runs are sorted with each key at most once), so
//! those prefixes are merged with [`merge_sorted_slices`] and emitted, and the run that set the cut moves
//! to its next batch. Memory holds one batch per run plus one merged chunk, whatever the data size.

use arrow::array::RecordBatch;
use arrow::row::{RowConverter, Rows};

use super::{encode_keys, key_converter, merge_sorted_slices, MergeSpec};
use crate::error::Result;

/// A sorted run as a stream of batches in the data-file layout, sorted by key, keys unique.
pub type RunStream = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

struct Cursor {
    /// Position of the run in the caller's list.
    run: usize,
    stream: RunStream,
    batch: RecordBatch,
    keys: Rows,
    pos: usize,
}

/// Pulls the next non-empty batch of a run.
fn next_cursor(
    run: usize,
    mut stream: RunStream,
    conv: &RowConverter,
    k: usize,
) -> Result<Option<Cursor>> {
    for batch in stream.by_ref() {
        let batch = batch?;
        if batch.num_rows() > 0 {
            let keys = encode_keys(conv, &batch, k)?;
            return Ok(Some(Cursor {
                run,
                stream,
                batch,
                keys,
                pos: 0,
            }));
        }
    }
    Ok(None)
}

/// Merges `runs` and hands merged chunks (sorted by key, one record per key) to `sink`.
pub fn merge_streams(
    runs: Vec<RunStream>,
    spec: &MergeSpec,
    mut sink: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    stream_chunks(runs, spec.key_count, |chunk| {
        let slices: Vec<RecordBatch> = chunk.iter().map(|(_, b)| b.clone()).collect();
        match merge_sorted_slices(&slices, spec)? {
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
    let mut conv: Option<RowConverter> = None;
    let mut cursors: Vec<Cursor> = Vec::new();
    for (run, stream) in runs.into_iter().enumerate() {
        let mut stream = stream;
        // The converter is built from the first batch's key types and shared so rows compare.
        let first = loop {
            match stream.next() {
                Some(b) => {
                    let b = b?;
                    if b.num_rows() > 0 {
                        break Some(b);
                    }
                }
                None => break None,
            }
        };
        let Some(batch) = first else { continue };
        if conv.is_none() {
            conv = Some(key_converter(
                batch.columns()[..k].iter().map(|c| c.data_type()),
            )?);
        }
        let c = conv.as_ref().ok_or_else(|| {
            crate::error::InternalSnafu {
                message: "no converter".to_string(),
            }
            .build()
        })?;
        let keys = encode_keys(c, &batch, k)?;
        cursors.push(Cursor {
            run,
            stream,
            batch,
            keys,
            pos: 0,
        });
    }
    let Some(conv) = conv else { return Ok(()) };
    while !cursors.is_empty() {
        // The cut: the smallest last key among current batches.
        let cut_at = (0..cursors.len())
            .min_by(|&a, &b| {
                let ka = cursors[a].keys.row(cursors[a].batch.num_rows() - 1);
                let kb = cursors[b].keys.row(cursors[b].batch.num_rows() - 1);
                ka.cmp(&kb)
            })
            .unwrap_or(0);
        let cut = cursors[cut_at]
            .keys
            .row(cursors[cut_at].batch.num_rows() - 1)
            .owned();
        let mut chunk = Vec::with_capacity(cursors.len());
        let mut exhausted = Vec::new();
        for (i, c) in cursors.iter_mut().enumerate() {
            let n = c.batch.num_rows();
            // Rows up to the cut (keys are sorted and unique within a run).
            let (mut lo, mut hi) = (c.pos, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if c.keys.row(mid) <= cut.row() {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
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
            if let Some(next) = next_cursor(c.run, c.stream, &conv, k)? {
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
    use arrow::datatypes::Int64Type;
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
            runs.push(rows.chunks(37).map(batch).collect());
        }
        let all: Vec<RecordBatch> = runs.iter().flatten().cloned().collect();
        let expected = super::super::merge_runs(&all, &spec).unwrap().unwrap();
        let streams: Vec<RunStream> = runs
            .into_iter()
            .map(|r| Box::new(r.into_iter().map(Ok)) as RunStream)
            .collect();
        let mut out = Vec::new();
        merge_streams(streams, &spec, |b| {
            out.push(b);
            Ok(())
        })
        .unwrap();
        let got = arrow::compute::concat_batches(&expected.schema(), &out).unwrap();
        assert_eq!(got.num_rows(), expected.num_rows());
        let keys = |b: &RecordBatch| b.column(0).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(keys(&got), keys(&expected));
        assert_eq!(
            got.column(3).as_string::<i32>(),
            expected.column(3).as_string::<i32>()
        );
    }
}
