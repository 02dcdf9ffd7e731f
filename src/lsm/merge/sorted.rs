//! Merging a streaming merge's chunk without sorting it: each slice comes from one sorted run
//! (keys ascending, each at most once), so a k-way walk over the slices' integer keys finds each
//! key's records, and one `interleave` per column copies the winners out. [`merge_runs`] would
//! concatenate the slices, sort every record and `take` the winners: two copies and a sort.
//!
//! The walk covers the common case, a `deduplicate` table keyed by one INT or BIGINT column
//! without sequence fields; everything else goes to [`merge_runs`].

use std::borrow::Cow;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::interleave;
use arrow::datatypes::{DataType, Int32Type, Int64Type, Int8Type};
use snafu::ResultExt;

use super::{merge_runs, MergeSpec};
use crate::error::{ArrowSnafu, Result};
use crate::spec::{MergeEngine, RowKind};

/// One slice's columns the walk reads.
pub(crate) struct SliceKeys<'a> {
    pub(crate) keys: Cow<'a, [i64]>,
    pub(crate) seq: &'a [i64],
    pub(crate) kinds: &'a [i8],
}

fn is_retract(kind: i8) -> bool {
    RowKind::from_byte(kind).is_some_and(|k| k.is_retract())
}

/// A key's records seen so far: the newest (sequence number, then slice), and the newest that is
/// not a retraction.
#[derive(Debug, Clone, Copy)]
struct Group {
    key: i64,
    records: u32,
    newest: (i64, usize, usize),
    newest_added: Option<(i64, usize, usize)>,
}

impl Group {
    fn new(key: i64) -> Self {
        Group {
            key,
            records: 0,
            newest: (i64::MIN, 0, 0),
            newest_added: None,
        }
    }

    fn add(&mut self, slices: &[SliceKeys<'_>], s: usize, row: usize) {
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
        slices: &[SliceKeys<'_>],
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

/// The keys of the slices `members`, in order, each with its records: a k-way walk over the
/// slices' next keys.
fn groups(slices: &[SliceKeys<'_>], members: &[usize]) -> Vec<Group> {
    let len: Vec<usize> = members.iter().map(|&s| slices[s].keys.len()).collect();
    let mut pos = vec![0usize; members.len()];
    // Each member's next key; i64::MAX once it is exhausted (`pos` tells that from a real MAX).
    let head = |m: usize, p: usize| slices[members[m]].keys.get(p).copied().unwrap_or(i64::MAX);
    let mut heads: Vec<i64> = (0..members.len()).map(|m| head(m, 0)).collect();
    let mut out = Vec::with_capacity(len.iter().sum());
    loop {
        // The smallest head (its member) and the second smallest.
        let (mut first, mut k0, mut k1) = (None, i64::MAX, i64::MAX);
        for m in 0..members.len() {
            if pos[m] == len[m] {
                continue;
            }
            let h = heads[m];
            if first.is_none() || h < k0 {
                k1 = if first.is_some() { k0 } else { k1 };
                (first, k0) = (Some(m), h);
            } else if h < k1 {
                k1 = h;
            }
        }
        let Some(m0) = first else { break };
        if k0 < k1 {
            // Only this member holds the keys below the next member's head.
            let s = members[m0];
            let keys = &slices[s].keys;
            let mut p = pos[m0];
            while p < len[m0] && keys[p] < k1 {
                let mut g = Group::new(keys[p]);
                g.add(slices, s, p);
                out.push(g);
                p += 1;
            }
            pos[m0] = p;
            heads[m0] = head(m0, p);
            continue;
        }
        let mut g = Group::new(k0);
        for m in 0..members.len() {
            if pos[m] < len[m] && heads[m] == k0 {
                g.add(slices, members[m], pos[m]);
                pos[m] += 1;
                heads[m] = head(m, pos[m]);
            }
        }
        out.push(g);
    }
    out
}

/// The surviving record of each key, as (slice, row), in key order: the newest record (highest
/// sequence number; on a tie the later slice), or with `ignore_delete` the newest that is not a
/// retraction (a key's single record wins as it is). A winning retraction is kept only with
/// `keep_retracts`.
///
/// The largest slice (the run of the highest level, typically) is walked in one tight loop: the
/// others are grouped first, and its rows between their keys pass as single records.
pub(crate) fn winners(
    slices: &[SliceKeys<'_>],
    ignore_delete: bool,
    keep_retracts: bool,
) -> Vec<(usize, usize)> {
    let Some(base) = (0..slices.len()).max_by_key(|&s| slices[s].keys.len()) else {
        return Vec::new();
    };
    let others: Vec<usize> = (0..slices.len()).filter(|&s| s != base).collect();
    let (keys, kinds) = (&slices[base].keys, slices[base].kinds);
    let mut out = Vec::with_capacity(keys.len() + others.len());
    let mut p = 0;
    let pass = |out: &mut Vec<(usize, usize)>, p: usize| {
        if keep_retracts || !is_retract(kinds[p]) {
            out.push((base, p));
        }
    };
    for mut g in groups(slices, &others) {
        while p < keys.len() && keys[p] < g.key {
            pass(&mut out, p);
            p += 1;
        }
        if p < keys.len() && keys[p] == g.key {
            g.add(slices, base, p);
            p += 1;
        }
        out.extend(g.winner(slices, ignore_delete, keep_retracts));
    }
    while p < keys.len() {
        pass(&mut out, p);
        p += 1;
    }
    out
}

/// The slice's key as integers, when the walk applies to it.
fn int_keys(batch: &RecordBatch) -> Option<Cow<'_, [i64]>> {
    let col = batch.column(0);
    if col.null_count() > 0 {
        return None;
    }
    match col.data_type() {
        DataType::Int64 => Some(Cow::Borrowed(col.as_primitive::<Int64Type>().values())),
        DataType::Int32 => Some(Cow::Owned(
            col.as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|v| *v as i64)
                .collect(),
        )),
        _ => None,
    }
}

/// Merges one chunk of a streaming merge: `slices` are each from a different sorted run (sorted
/// by key, unique keys), all in the data-file layout.
pub fn merge_sorted_slices(
    slices: &[RecordBatch],
    spec: &MergeSpec,
) -> Result<Option<RecordBatch>> {
    let walkable = spec.key_count == 1
        && spec.sequence_columns.is_empty()
        && spec.config.engine == MergeEngine::Deduplicate;
    let keys: Option<Vec<Cow<'_, [i64]>>> = walkable
        .then(|| slices.iter().map(int_keys).collect())
        .flatten();
    let Some(keys) = keys else {
        return merge_runs(slices, spec);
    };
    let k = spec.key_count;
    let inputs: Vec<SliceKeys<'_>> = slices
        .iter()
        .zip(keys)
        .map(|(b, keys)| SliceKeys {
            keys,
            seq: b.column(k).as_primitive::<Int64Type>().values(),
            kinds: b.column(k + 1).as_primitive::<Int8Type>().values(),
        })
        .collect();
    let picked = winners(&inputs, spec.config.ignore_delete, spec.keep_retracts);
    if picked.is_empty() {
        return Ok(None);
    }
    // A single slice that survives whole is returned as it is.
    if slices.len() == 1 && picked.len() == slices[0].num_rows() {
        return Ok(Some(slices[0].clone()));
    }
    let schema = slices[0].schema();
    let columns = (0..schema.fields().len())
        .map(|c| {
            let sources: Vec<&dyn Array> = slices.iter().map(|b| b.column(c).as_ref()).collect();
            interleave(&sources, &picked).context(ArrowSnafu {
                context: "assembling merged rows",
            })
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let merged = RecordBatch::try_new(schema, columns).context(ArrowSnafu {
        context: "merged rows",
    })?;
    Ok(Some(merged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;

    /// Random sorted runs with unique keys, overlapping sequence numbers and some retractions.
    fn random_runs(seed: u64, runs: usize) -> Vec<RecordBatch> {
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

    fn spec(engine: &str, keep_retracts: bool, ignore_delete: bool) -> MergeSpec {
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

    fn rows(b: &Option<RecordBatch>) -> Vec<(i64, i64, i8, String)> {
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

    #[test]
    fn the_walk_agrees_with_sorting_everything() {
        for seed in 0..20 {
            let runs = random_runs(seed, 1 + (seed as usize % 6));
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
