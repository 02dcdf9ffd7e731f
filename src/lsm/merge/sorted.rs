//! Merging a streaming merge's chunk without sorting it: each slice comes from one sorted run
//! (keys ascending, each at most once), so a k-way walk over the slices' keys finds each key's
//! records, and one `interleave` per column copies the winners out. [`merge_runs`] would
//! concatenate the slices, sort every record and `take` the winners: two copies and a sort.
//!
//! The walk covers `deduplicate` tables without sequence fields, whatever their key: one INT or
//! BIGINT column is walked as integers, any other key (strings, several columns) as Arrow's row
//! encoding, which orders keys as the streaming merge cuts them. Other engines go to
//! [`merge_runs`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions};
use arrow::buffer::ScalarBuffer;
use arrow::compute::interleave;
use arrow::datatypes::{DataType, Int32Type, Int64Type, Int8Type};
use arrow::row::Row;
use snafu::ResultExt;

use super::{merge_runs, MergeSpec};
use crate::error::{ArrowSnafu, Result};
use crate::spec::{MergeEngine, RowKind};

/// One slice's columns the walk reads; `K` is how a key compares (an integer, or an encoded row).
pub(crate) struct SliceKeys<'a, K> {
    pub(crate) keys: &'a [K],
    pub(crate) seq: &'a [i64],
    pub(crate) kinds: &'a [i8],
}

pub(super) fn is_retract(kind: i8) -> bool {
    RowKind::from_byte(kind).is_some_and(|k| k.is_retract())
}

/// A key's records seen so far: the newest (sequence number, then slice), and the newest that is
/// not a retraction.
#[derive(Debug, Clone, Copy)]
struct Group<K> {
    key: K,
    records: u32,
    newest: (i64, usize, usize),
    newest_added: Option<(i64, usize, usize)>,
}

impl<K: Copy> Group<K> {
    fn new(key: K) -> Self {
        Group {
            key,
            records: 0,
            newest: (i64::MIN, 0, 0),
            newest_added: None,
        }
    }

    fn add(&mut self, slices: &[SliceKeys<'_, K>], s: usize, row: usize) {
        let at = (slices[s].seq[row], s, row);
        if self.records == 0 || at >= self.newest {
            self.newest = at;
        }
        if !is_retract(slices[s].kinds[row]) && self.newest_added.is_none_or(|n| at >= n) {
            self.newest_added = Some(at);
        }
        self.records += 1;
    }

    /// The surviving record, if any.
    fn winner(
        &self,
        slices: &[SliceKeys<'_, K>],
        ignore_delete: bool,
        keep_retracts: bool,
    ) -> Option<(usize, usize)> {
        // As in Paimon, a key's single record passes without the merge function.
        let (_, s, row) = if ignore_delete && self.records > 1 {
            self.newest_added?
        } else {
            self.newest
        };
        (keep_retracts || !is_retract(slices[s].kinds[row])).then_some((s, row))
    }
}

/// The first position at or after `from` whose key is not below `key` (`keys` ascending). Pure.
fn below<K: Ord + Copy>(keys: &[K], from: usize, key: K) -> usize {
    let mut p = from;
    while p < keys.len() && keys[p] < key {
        p += 1;
    }
    p
}

/// The surviving record of each key, as (slice, row), in key order: the newest record (highest
/// sequence number; on a tie the later slice), or with `ignore_delete` the newest that is not a
/// retraction (a key's single record wins as it is). A winning retraction is kept only with
/// `keep_retracts`.
///
/// The largest slice (the run of the highest level, typically) is the base: the other slices'
/// next keys are kept in a heap (a key costs a few comparisons however many runs there are), and
/// the base's rows below the smallest of them pass in one stretch, without a group or a heap
/// operation. A slice whose next keys lie below every other slice's head is walked without the
/// heap too.
pub(crate) fn winners<K: Ord + Copy>(
    slices: &[SliceKeys<'_, K>],
    ignore_delete: bool,
    keep_retracts: bool,
) -> Vec<(usize, usize)> {
    let Some(base) = (0..slices.len()).max_by_key(|&s| slices[s].keys.len()) else {
        return Vec::new();
    };
    let (keys, kinds) = (slices[base].keys, slices[base].kinds);
    // Whether the base's rows pass without a look at their kinds.
    let clean = keep_retracts || !kinds.iter().any(|&k| is_retract(k));
    let pass = |out: &mut Vec<(usize, usize)>, rows: std::ops::Range<usize>| {
        if clean {
            out.extend(rows.map(|r| (base, r)));
        } else {
            out.extend(rows.filter(|&r| !is_retract(kinds[r])).map(|r| (base, r)));
        }
    };
    // Closes the group of key `g.key`: the base's rows below it pass first, and the base's
    // record of the key, if any, joins the group.
    let close = |out: &mut Vec<(usize, usize)>, mut g: Group<K>, p: &mut usize| {
        let (start, end) = (*p, below(keys, *p, g.key));
        pass(out, start..end);
        *p = end;
        if end < keys.len() && keys[end] == g.key {
            g.add(slices, base, end);
            *p += 1;
        }
        out.extend(g.winner(slices, ignore_delete, keep_retracts));
    };
    let mut out = Vec::with_capacity(slices.iter().map(|s| s.keys.len()).sum());
    let mut pos = vec![0usize; slices.len()];
    let mut heads: BinaryHeap<Reverse<(K, usize)>> = (0..slices.len())
        .filter(|&s| s != base)
        .filter_map(|s| slices[s].keys.first().map(|&k| Reverse((k, s))))
        .collect();
    let mut p = 0;
    while let Some(Reverse((k0, s0))) = heads.pop() {
        let next = heads.peek().map(|Reverse((k, _))| *k);
        if next == Some(k0) {
            // Several slices hold this key.
            let mut g = Group::new(k0);
            let mut s = s0;
            loop {
                g.add(slices, s, pos[s]);
                pos[s] += 1;
                if let Some(&k) = slices[s].keys.get(pos[s]) {
                    heads.push(Reverse((k, s)));
                }
                match heads.peek() {
                    Some(&Reverse((k, other))) if k == k0 => {
                        heads.pop();
                        s = other;
                    }
                    _ => break,
                }
            }
            close(&mut out, g, &mut p);
            continue;
        }
        // Only this slice (and perhaps the base) holds its keys below the next slice's head.
        let run = slices[s0].keys;
        let mut q = pos[s0];
        while q < run.len() && next.is_none_or(|n| run[q] < n) {
            let mut g = Group::new(run[q]);
            g.add(slices, s0, q);
            close(&mut out, g, &mut p);
            q += 1;
        }
        pos[s0] = q;
        if let Some(&k) = run.get(q) {
            heads.push(Reverse((k, s0)));
        }
    }
    pass(&mut out, p..keys.len());
    out
}

/// What the walk reads of each slice: `keys`, and its sequence numbers and row kinds (the columns
/// after the `k` key columns).
fn slice_keys<'a, K>(
    slices: &'a [RecordBatch],
    k: usize,
    keys: Vec<&'a [K]>,
) -> Vec<SliceKeys<'a, K>> {
    slices
        .iter()
        .zip(keys)
        .map(|(b, keys)| SliceKeys {
            keys,
            seq: b.column(k).as_primitive::<Int64Type>().values(),
            kinds: b.column(k + 1).as_primitive::<Int8Type>().values(),
        })
        .collect()
}

/// Each slice's key columns (the first `k`) in Arrow's row encoding, from one converter so that
/// rows of different slices compare.
fn key_rows(slices: &[RecordBatch], k: usize) -> Result<Vec<arrow::row::Rows>> {
    let conv = super::key_converter(slices[0].columns()[..k].iter().map(|c| c.data_type()))?;
    slices
        .iter()
        .map(|b| super::encode_keys(&conv, b, k))
        .collect()
}

/// How many leading bytes every encoded key of the slices shares: those of the smallest and the
/// largest key (each slice is sorted, so its first and last rows). Pure.
fn shared_prefix(slices: &[arrow::row::Rows]) -> usize {
    let ends = slices.iter().filter(|r| r.num_rows() > 0);
    let lo = ends.clone().map(|r| r.row(0)).min();
    let hi = ends.map(|r| r.row(r.num_rows() - 1)).max();
    match (lo, hi) {
        (Some(lo), Some(hi)) => {
            let (lo, hi): (&[u8], &[u8]) = (lo.as_ref(), hi.as_ref());
            lo.iter().zip(hi).take_while(|(a, b)| a == b).count()
        }
        _ => 0,
    }
}

/// The eight bytes of an encoded key after its first `skip` (zero-padded), as a number that orders
/// as they do. Among keys that share their first `skip` bytes, (this word, the key) orders as the
/// key does, and most comparisons end at the word. Pure.
fn word_after(row: Row<'_>, skip: usize) -> u64 {
    let bytes: &[u8] = row.as_ref();
    let rest = bytes.get(skip..).unwrap_or(&[]);
    let mut word = [0u8; 8];
    let n = rest.len().min(8);
    word[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(word)
}

/// A batch's key as integers: one INT or BIGINT column without NULL (the walk and the streaming
/// merge's cuts compare such keys as numbers).
pub(super) fn int_keys(batch: &RecordBatch) -> Option<ScalarBuffer<i64>> {
    let col = batch.column(0);
    if col.null_count() > 0 {
        return None;
    }
    match col.data_type() {
        DataType::Int64 => Some(col.as_primitive::<Int64Type>().values().clone()),
        DataType::Int32 => Some(
            col.as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|v| *v as i64)
                .collect(),
        ),
        _ => None,
    }
}

/// Merges one chunk of a streaming merge: `slices` are each from a different sorted run (sorted
/// by key, unique keys), all in the data-file layout.
pub fn merge_sorted_slices(
    slices: &[RecordBatch],
    spec: &MergeSpec,
) -> Result<Option<RecordBatch>> {
    merge_sorted_columns(slices, spec, None)
}

/// [`merge_sorted_slices`], keeping only `columns` (positions in the data-file layout, in this
/// order; all: `None`) of the merged rows: a read copies only the columns it returns.
pub(super) fn merge_sorted_columns(
    slices: &[RecordBatch],
    spec: &MergeSpec,
    columns: Option<&[usize]>,
) -> Result<Option<RecordBatch>> {
    let walkable =
        spec.sequence_columns.is_empty() && spec.config.engine == MergeEngine::Deduplicate;
    if !walkable || slices.is_empty() {
        return match (merge_runs(slices, spec)?, columns) {
            (Some(merged), Some(cols)) => project(&merged, cols).map(Some),
            (merged, _) => Ok(merged),
        };
    }
    let k = spec.key_count;
    let (ignore_delete, keep) = (spec.config.ignore_delete, spec.keep_retracts);
    let ints: Option<Vec<ScalarBuffer<i64>>> = (k == 1)
        .then(|| slices.iter().map(int_keys).collect())
        .flatten();
    let picked = match ints {
        Some(ints) => {
            let keys = ints.iter().map(|c| &c[..]).collect();
            winners(&slice_keys(slices, k, keys), ignore_delete, keep)
        }
        None => {
            let encoded = key_rows(slices, k)?;
            let skip = shared_prefix(&encoded);
            let rows: Vec<Vec<(u64, Row<'_>)>> = encoded
                .iter()
                .map(|r| r.iter().map(|row| (word_after(row, skip), row)).collect())
                .collect();
            let keys = rows.iter().map(|r| &r[..]).collect();
            winners(&slice_keys(slices, k, keys), ignore_delete, keep)
        }
    };
    if picked.is_empty() {
        return Ok(None);
    }
    // A single slice that survives whole is returned as it is.
    if slices.len() == 1 && picked.len() == slices[0].num_rows() {
        return match columns {
            Some(cols) => project(&slices[0], cols).map(Some),
            None => Ok(Some(slices[0].clone())),
        };
    }
    let all: Vec<usize>;
    let (schema, cols) = match columns {
        Some(cols) => (
            Arc::new(slices[0].schema().project(cols).context(ArrowSnafu {
                context: "projecting merged rows",
            })?),
            cols,
        ),
        None => {
            all = (0..slices[0].num_columns()).collect();
            (slices[0].schema(), &all[..])
        }
    };
    let assembled = cols
        .iter()
        .map(|&c| {
            let sources: Vec<&dyn Array> = slices.iter().map(|b| b.column(c).as_ref()).collect();
            interleave(&sources, &picked).context(ArrowSnafu {
                context: "assembling merged rows",
            })
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(picked.len()));
    let merged =
        RecordBatch::try_new_with_options(schema, assembled, &opts).context(ArrowSnafu {
            context: "merged rows",
        })?;
    Ok(Some(merged))
}

/// `columns` of `batch`, in that order (none: the row count alone).
pub(super) fn project(batch: &RecordBatch, columns: &[usize]) -> Result<RecordBatch> {
    let schema = Arc::new(batch.schema().project(columns).context(ArrowSnafu {
        context: "projecting merged rows",
    })?);
    let picked = columns
        .iter()
        .map(|&c| Arc::clone(batch.column(c)))
        .collect();
    let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(schema, picked, &opts).context(ArrowSnafu {
        context: "projecting merged rows",
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use arrow::array::StringArray;
    use arrow::row::{RowConverter, SortField};

    /// Random sorted runs with unique keys, overlapping sequence numbers and some retractions.
    pub(in crate::lsm::merge) fn random_runs(seed: u64, runs: usize) -> Vec<RecordBatch> {
        let mut x = seed;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut seq = 0;
        (0..runs)
            .map(|_| {
                let mut keys: Vec<i64> = (0..200).map(|_| (next() % 300) as i64).collect();
                keys.sort_unstable();
                keys.dedup();
                let labels: Vec<String> = keys.iter().map(|k| format!("{k}@{seq}")).collect();
                let rows: Vec<(i64, i64, i8, &str)> = keys
                    .iter()
                    .zip(&labels)
                    .map(|(k, l)| {
                        seq += 1;
                        // Kinds: +I, -U, +U, -D.
                        (*k, seq, (next() % 4) as i8, l.as_str())
                    })
                    .collect();
                super::super::tests::run(&rows)
            })
            .collect()
    }

    pub(in crate::lsm::merge) fn spec(
        engine: &str,
        keep_retracts: bool,
        ignore_delete: bool,
    ) -> MergeSpec {
        let json = format!(
            r#"{{"id":0,"fields":[{{"id":0,"name":"id","type":"BIGINT NOT NULL"}},{{"id":1,"name":"v","type":"STRING"}}],
               "highestFieldId":1,"primaryKeys":["id"],"options":{{"bucket":"1","merge-engine":"{engine}",
               "ignore-delete":"{ignore_delete}"}}}}"#
        );
        let schema: crate::spec::TableSchema = serde_json::from_str(&json).unwrap();
        MergeSpec {
            key_count: 1,
            sequence_columns: vec![],
            config: std::sync::Arc::new(super::super::MergeConfig::from_schema(&schema).unwrap()),
            keep_retracts,
        }
    }

    pub(in crate::lsm::merge) fn rows(b: &Option<RecordBatch>) -> Vec<(i64, i64, i8, String)> {
        let Some(b) = b else { return vec![] };
        let (k, s) = (b.column(0).as_primitive::<Int64Type>(), b.column(1));
        let (kinds, v) = (b.column(2).as_primitive::<Int8Type>(), b.column(3));
        let s = s.as_primitive::<Int64Type>();
        let v: &StringArray = v.as_string::<i32>();
        (0..b.num_rows())
            .map(|i| {
                (
                    k.value(i),
                    s.value(i),
                    kinds.value(i),
                    v.value(i).to_string(),
                )
            })
            .collect()
    }

    /// `batch` with every record an insert.
    pub(in crate::lsm::merge) fn inserts_only(batch: &RecordBatch) -> RecordBatch {
        let mut columns = batch.columns().to_vec();
        columns[2] = std::sync::Arc::new(arrow::array::Int8Array::from(vec![0; batch.num_rows()]));
        RecordBatch::try_new(batch.schema(), columns).unwrap()
    }

    #[test]
    fn the_walk_agrees_with_sorting_everything() {
        for seed in 0..40 {
            let mut runs = random_runs(seed, 1 + (seed as usize % 6));
            if seed >= 20 {
                // The base (the largest slice) without retractions passes its rows in stretches.
                let largest = (0..runs.len()).max_by_key(|&r| runs[r].num_rows()).unwrap();
                runs[largest] = inserts_only(&runs[largest]);
            }
            // The slices arrive in any run order.
            let mut shuffled = runs.clone();
            shuffled.rotate_left(seed as usize % runs.len());
            for (keep, ignore) in [(false, false), (true, false), (false, true), (true, true)] {
                let spec = spec("deduplicate", keep, ignore);
                assert_eq!(
                    rows(&merge_sorted_slices(&shuffled, &spec).unwrap()),
                    rows(&merge_runs(&runs, &spec).unwrap()),
                    "seed {seed}, keep_retracts {keep}, ignore_delete {ignore}"
                );
            }
        }
    }

    #[test]
    fn below_finds_the_end_of_a_stretch() {
        for len in 0..40usize {
            let keys: Vec<i64> = (0..len as i64).map(|k| k * 2).collect();
            for from in 0..=len {
                for key in -1..=(2 * len as i64 + 1) {
                    let want = from + keys[from..].iter().take_while(|k| **k < key).count();
                    assert_eq!(
                        below(&keys, from, key),
                        want,
                        "len {len}, from {from}, key {key}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_projected_merge_keeps_only_its_columns_in_their_order() {
        for seed in 0..10 {
            let runs = random_runs(seed, 1 + (seed as usize % 4));
            for engine in ["deduplicate", "first-row"] {
                let spec = spec(engine, false, engine == "first-row");
                let full = merge_sorted_slices(&runs, &spec).unwrap();
                for cols in [vec![3, 2], vec![0], vec![]] {
                    let got = merge_sorted_columns(&runs, &spec, Some(&cols)).unwrap();
                    let want = full.as_ref().map(|b| b.project(&cols).unwrap());
                    assert_eq!(
                        got.as_ref().map(|b| (b.num_rows(), b.columns().to_vec())),
                        want.as_ref().map(|b| (b.num_rows(), b.columns().to_vec())),
                        "seed {seed}, {engine}, columns {cols:?}"
                    );
                }
            }
        }
    }

    /// `runs` with their integer key turned into a string (`u7`, `u10`, …: a common prefix and
    /// different lengths), each re-sorted by the string.
    fn string_keyed(runs: &[RecordBatch]) -> Vec<RecordBatch> {
        runs.iter()
            .map(|b| {
                let b = super::super::tests::string_keyed(b, |k| format!("u{k}"));
                let order = arrow::compute::sort_to_indices(b.column(0), None, None).unwrap();
                arrow::compute::take_record_batch(&b, &order).unwrap()
            })
            .collect()
    }

    #[test]
    fn the_walk_over_encoded_keys_agrees_with_sorting_everything() {
        for seed in 0..20 {
            let runs = string_keyed(&random_runs(seed, 1 + (seed as usize % 6)));
            let mut shuffled = runs.clone();
            shuffled.rotate_left(seed as usize % runs.len());
            for (keep, ignore) in [(false, false), (true, false), (false, true), (true, true)] {
                let spec = spec("deduplicate", keep, ignore);
                let (got, want) = (
                    merge_sorted_slices(&shuffled, &spec).unwrap(),
                    merge_runs(&runs, &spec).unwrap(),
                );
                let text = |b: &Option<RecordBatch>| {
                    b.as_ref().map(|b| {
                        arrow::util::pretty::pretty_format_batches(std::slice::from_ref(b))
                            .unwrap()
                            .to_string()
                    })
                };
                assert_eq!(
                    text(&got),
                    text(&want),
                    "seed {seed}, keep_retracts {keep}, ignore_delete {ignore}"
                );
            }
        }
    }

    #[test]
    fn encoded_keys_compare_by_the_word_after_their_shared_prefix() {
        let conv = RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
        let keys = StringArray::from(vec!["user-0001", "user-0001a", "user-0002", "user-1"]);
        let rows = conv
            .convert_columns(&[std::sync::Arc::new(keys) as ArrayRef])
            .unwrap();
        let skip = shared_prefix(std::slice::from_ref(&rows));
        assert_eq!(skip, 6, "the row's validity byte and `user-`");
        let keyed: Vec<(u64, Row<'_>)> = rows.iter().map(|r| (word_after(r, skip), r)).collect();
        for pair in keyed.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].1 < pair[1].1);
        }
        assert_eq!(word_after(rows.row(0), 1000), 0, "past the end: zeros");
    }

    #[test]
    fn the_largest_and_smallest_keys_are_keys_like_any_other() {
        let (max, min) = (i64::MAX, i64::MIN);
        let a = super::super::tests::run(&[(min, 1, 0, "a"), (5, 2, 0, "a"), (max, 3, 0, "a")]);
        let b = super::super::tests::run(&[(max, 4, 0, "b")]);
        let c = super::super::tests::run(&[(min, 0, 0, "c"), (6, 5, 3, "c")]);
        for slices in [
            vec![a.clone(), b.clone(), c.clone()],
            vec![b.clone(), a.clone()],
        ] {
            for keep in [false, true] {
                let spec = spec("deduplicate", keep, false);
                assert_eq!(
                    rows(&merge_sorted_slices(&slices, &spec).unwrap()),
                    rows(&merge_runs(&slices, &spec).unwrap())
                );
            }
        }
        let spec = spec("deduplicate", false, false);
        let merged = rows(&merge_sorted_slices(&[a, b, c], &spec).unwrap());
        let keys: Vec<(i64, &str)> = merged.iter().map(|r| (r.0, r.3.as_str())).collect();
        assert_eq!(keys, vec![(min, "a"), (5, "a"), (max, "b")]);
    }

    #[test]
    fn other_engines_and_a_whole_slice_pass_through() {
        let runs = random_runs(7, 3);
        let spec_fr = spec("first-row", false, true);
        assert_eq!(
            rows(&merge_sorted_slices(&runs, &spec_fr).unwrap()),
            rows(&merge_runs(&runs, &spec_fr).unwrap())
        );
        let only = super::super::tests::run(&[(1, 1, 0, "a"), (2, 2, 2, "b")]);
        let merged = merge_sorted_slices(
            std::slice::from_ref(&only),
            &spec("deduplicate", false, false),
        )
        .unwrap()
        .unwrap();
        // No copy: the same buffers.
        assert_eq!(merged.column(3).to_data(), only.column(3).to_data());
        assert!(std::ptr::eq(
            merged.column(0).to_data().buffers()[0].as_ptr(),
            only.column(0).to_data().buffers()[0].as_ptr()
        ));
    }
}
