//! Merging a chunk of runs that each carry one sequence number, distinct across runs (a read of
//! runs with disjoint sequence ranges, `crate::lsm::levels::disjoint_run_sequences`): a key's
//! newest record is then the one in its newest run, so no key needs to be grouped and the
//! survivors need not come out in key order. Reads, which promise no order, use it; compaction
//! and changelog keep [`super::sorted`]'s ordered walk.

use std::cmp::Reverse;
use std::sync::Arc;

use arrow::array::{
    downcast_primitive_array, Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray,
    RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow::buffer::{BooleanBuffer, ScalarBuffer};
use arrow::compute::take;
use arrow::datatypes::Int8Type;
use snafu::ResultExt;

use super::sorted::{int_keys, is_retract, project};
use super::MergeSpec;
use crate::error::{ArrowSnafu, Result};
use crate::spec::MergeEngine;

/// Merges one chunk of a streaming merge whose slices each hold one run's records at a single
/// sequence number, `ranks[slice]`, distinct across slices (a read of runs with disjoint sequence
/// ranges): a key's newest record is then the one in its highest-ranked slice. So a record
/// survives unless it is a retraction or a higher-ranked slice holds its key (with
/// `ignore-delete`, holds it as a non-retraction), and no key needs to be grouped: the slices are
/// visited from the highest rank down, their keys marked in a bitmap over the chunk's key span.
/// Each slice's survivors come out as one batch of `columns` (all: `None`), without a copy where
/// all of a slice survives: in key order within a batch, in no order across batches, so only
/// reads that need no key order use it.
///
/// `None` where ranks do not decide (sequence fields, engines other than `deduplicate`, retractions
/// kept), the key is not one INT or BIGINT column, or the keys are too sparse for a bitmap (its
/// span over 64 bits per row): [`super::sorted::merge_sorted_slices`] merges those.
pub(super) fn merge_ranked(
    slices: &[RecordBatch],
    ranks: &[i64],
    spec: &MergeSpec,
    columns: Option<&[usize]>,
) -> Result<Option<Vec<RecordBatch>>> {
    let decides = spec.sequence_columns.is_empty()
        && spec.config.engine == MergeEngine::Deduplicate
        && !spec.keep_retracts
        && spec.key_count == 1;
    if !decides {
        return Ok(None);
    }
    let Some(keys) = slices.iter().map(int_keys).collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let Some(bits) = key_span(&keys) else {
        return Ok(None);
    };
    let k = spec.key_count;
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_unstable_by_key(|&s| Reverse(ranks[s]));
    let mut seen = KeySet::new(bits);
    let mut out = Vec::with_capacity(slices.len());
    for (i, &s) in order.iter().enumerate() {
        let kinds = slices[s].column(k + 1).as_primitive::<Int8Type>().values();
        let (live, kept) = seen.unshadowed(&keys[s], kinds);
        if i + 1 < order.len() {
            seen.insert(&keys[s], kinds, spec.config.ignore_delete);
        }
        if kept == 0 {
            continue;
        }
        let slice = match columns {
            Some(cols) => project(&slices[s], cols)?,
            None => slices[s].clone(),
        };
        out.push(if kept == keys[s].len() {
            slice
        } else if slice.num_columns() == 0 {
            let opts = RecordBatchOptions::new().with_row_count(Some(kept));
            RecordBatch::try_new_with_options(slice.schema(), vec![], &opts).context(
                ArrowSnafu {
                    context: "counting a run's newest records",
                },
            )?
        } else {
            keep_live(&slice, &live, kept)?
        });
    }
    Ok(Some(out))
}

/// The rows of `batch` whose bit is set in `live` (`kept` of them). Most rows survive, in short
/// stretches: primitive columns without nulls are gathered word by word of the bitmap, whole
/// words at once; others by position with `take`, which beats copying the stretches one by one.
fn keep_live(batch: &RecordBatch, live: &[u64], kept: usize) -> Result<RecordBatch> {
    let context = || "keeping a run's newest records";
    let mut rows: Option<UInt32Array> = None;
    let columns = batch
        .columns()
        .iter()
        .map(|column| {
            if column.null_count() == 0 {
                let gathered = downcast_primitive_array!(
                    column => Some(gather_words(column, live, kept)),
                    _ => None
                );
                if let Some(gathered) = gathered {
                    return Ok(gathered);
                }
            }
            let rows = rows.get_or_insert_with(|| {
                let bits = BooleanBuffer::new(live.to_vec().into(), 0, batch.num_rows());
                UInt32Array::from_iter_values(bits.set_indices().map(|r| r as u32))
            });
            take(column, rows, None).context(ArrowSnafu { context: context() })
        })
        .collect::<Result<Vec<_>>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(kept));
    RecordBatch::try_new_with_options(batch.schema(), columns, &opts)
        .context(ArrowSnafu { context: context() })
}

/// The values of `array` (no nulls) whose bit is set in `live`, `kept` of them. Each value is
/// stored at the next free slot, which advances only where its bit is set: no branch per row, and
/// no copy but the stores (a word's survivors copied out of a buffer cost a `memmove` call each).
fn gather_words<T: ArrowPrimitiveType>(
    array: &PrimitiveArray<T>,
    live: &[u64],
    kept: usize,
) -> ArrayRef {
    // A word's 64 slots past the last kept value may be written before they are dropped.
    let mut out: Vec<T::Native> = Vec::with_capacity(kept + 64);
    let slots = out.spare_capacity_mut();
    let mut filled = 0usize;
    for (values, &word) in array.values().chunks(64).zip(live) {
        let Some(next) = slots.get_mut(filled..filled + 64) else {
            break;
        };
        let (mut n, mut bits) = (0usize, word);
        for &v in values {
            // n <= the value's position < 64: the mask only lets the bound check go.
            next[n & 63].write(v);
            n += (bits & 1) as usize;
            bits >>= 1;
        }
        filled += n;
    }
    let filled = filled.min(kept);
    // SAFETY: each of the first `filled` slots was written: a slot is written before the count of
    // filled slots passes it, and `filled` is within the capacity of `kept + 64`.
    unsafe { out.set_len(filled) };
    Arc::new(PrimitiveArray::<T>::new(out.into(), None).with_data_type(array.data_type().clone()))
}

/// The smallest key of sorted slices and how many bits a bitmap over their key span takes, if
/// that is at most 64 per row. Pure.
fn key_span(keys: &[ScalarBuffer<i64>]) -> Option<(i64, usize)> {
    let lo = keys.iter().filter_map(|k| k.first()).min()?;
    let hi = keys.iter().filter_map(|k| k.last()).max()?;
    let rows: usize = keys.iter().map(|k| k.len()).sum();
    let span = usize::try_from(hi.checked_sub(*lo)?).ok()?.checked_add(1)?;
    (span <= rows.saturating_mul(64)).then_some((*lo, span))
}

/// A set of integer keys within a known span, as one bit per key.
struct KeySet {
    lo: i64,
    words: Vec<u64>,
}

impl KeySet {
    fn new((lo, span): (i64, usize)) -> Self {
        KeySet {
            lo,
            words: vec![0; span.div_ceil(64)],
        }
    }

    /// The bit of `key` (within the span): its word and position.
    fn at(&self, key: i64) -> (usize, u32) {
        let offset = key.wrapping_sub(self.lo) as u64;
        ((offset >> 6) as usize, (offset & 63) as u32)
    }

    /// Which rows are neither retractions nor in the set (a bit per row, 64 to a word), and how
    /// many.
    fn unshadowed(&self, keys: &[i64], kinds: &[i8]) -> (Vec<u64>, usize) {
        let mut live = Vec::with_capacity(keys.len().div_ceil(64));
        let mut kept = 0;
        // Most slices hold no retraction: their rows are decided by the set alone.
        let inserts_only = !kinds.iter().any(|&k| is_retract(k));
        for (keys, kinds) in keys.chunks(64).zip(kinds.chunks(64)) {
            let mut word = 0u64;
            if inserts_only {
                for (i, &key) in keys.iter().enumerate() {
                    word |= self.absent(key) << i;
                }
            } else {
                for (i, (&key, &kind)) in keys.iter().zip(kinds).enumerate() {
                    word |= (self.absent(key) & u64::from(!is_retract(kind))) << i;
                }
            }
            kept += word.count_ones() as usize;
            live.push(word);
        }
        (live, kept)
    }

    /// 1 where `key` is not in the set, else 0.
    fn absent(&self, key: i64) -> u64 {
        let (w, b) = self.at(key);
        !(self.words[w] >> b) & 1
    }

    /// Adds the keys of `keys` (only of non-retractions with `skip_retracts`).
    fn insert(&mut self, keys: &[i64], kinds: &[i8], skip_retracts: bool) {
        for (&key, &kind) in keys.iter().zip(kinds) {
            let (w, b) = self.at(key);
            self.words[w] |= u64::from(!(skip_retracts && is_retract(kind))) << b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsm::merge::sorted::merge_sorted_slices;
    use crate::lsm::merge::sorted::tests::{inserts_only, random_runs, rows, spec};
    use arrow::datatypes::Int64Type;
    use std::sync::Arc;

    /// `batch` with every record at sequence number `seq`.
    fn at_sequence(batch: &RecordBatch, seq: i64) -> RecordBatch {
        let mut columns = batch.columns().to_vec();
        columns[1] = Arc::new(arrow::array::Int64Array::from_value(seq, batch.num_rows()));
        RecordBatch::try_new(batch.schema(), columns).unwrap()
    }

    #[test]
    fn ranked_runs_merge_as_the_walk_does() {
        for seed in 0..40u64 {
            let n = 1 + (seed as usize % 5);
            let mut runs = random_runs(seed, n);
            if seed % 3 == 0 {
                runs[0] = inserts_only(&runs[0]);
            }
            // Each run at one number, ranked in an order of its own.
            let ranks: Vec<i64> = (0..n)
                .map(|r| ((r + seed as usize) % n) as i64 * 10)
                .collect();
            let runs: Vec<RecordBatch> = runs
                .iter()
                .zip(&ranks)
                .map(|(b, &r)| at_sequence(b, r))
                .collect();
            for ignore in [false, true] {
                let spec = spec("deduplicate", false, ignore);
                let parts = merge_ranked(&runs, &ranks, &spec, None).unwrap().unwrap();
                let mut got: Vec<_> = parts.iter().flat_map(|b| rows(&Some(b.clone()))).collect();
                got.sort();
                assert_eq!(
                    got,
                    rows(&merge_sorted_slices(&runs, &spec).unwrap()),
                    "seed {seed}, ignore_delete {ignore}"
                );
                // Each part is one run's survivors, in key order.
                for part in &parts {
                    let keys = part.column(0).as_primitive::<Int64Type>().values();
                    assert!(keys.windows(2).all(|w| w[0] < w[1]), "seed {seed}");
                }
                // A projection keeps its columns in its order.
                let projected = merge_ranked(&runs, &ranks, &spec, Some(&[3, 0]))
                    .unwrap()
                    .unwrap();
                let names: Vec<String> = projected
                    .iter()
                    .flat_map(|b| {
                        b.schema()
                            .fields()
                            .iter()
                            .map(|f| f.name().clone())
                            .collect::<Vec<_>>()
                    })
                    .collect();
                assert!(
                    names.chunks(2).all(|c| c == ["v", "_KEY_id"]),
                    "seed {seed}"
                );
                let count: usize = projected.iter().map(|b| b.num_rows()).sum();
                assert_eq!(count, got.len(), "seed {seed}");
                // No column at all: the survivors are counted.
                let counted = merge_ranked(&runs, &ranks, &spec, Some(&[]))
                    .unwrap()
                    .unwrap();
                let count: usize = counted.iter().map(|b| b.num_rows()).sum();
                assert_eq!(count, got.len(), "seed {seed}");
            }
        }
    }

    #[test]
    fn ranks_do_not_decide_sparse_keys_other_engines_or_kept_retractions() {
        let runs = vec![
            at_sequence(
                &super::super::tests::run(&[(0, 0, 0, "a"), (1 << 40, 0, 0, "b")]),
                2,
            ),
            at_sequence(&super::super::tests::run(&[(0, 0, 0, "c")]), 1),
        ];
        let ranks = [2, 1];
        let none = |spec: &MergeSpec| merge_ranked(&runs, &ranks, spec, None).unwrap().is_none();
        assert!(
            none(&spec("deduplicate", false, false)),
            "a span of 2^40 keys"
        );
        let dense = &runs[1..];
        let decided = |spec: &MergeSpec| merge_ranked(dense, &ranks[1..], spec, None).unwrap();
        assert!(decided(&spec("deduplicate", false, false)).is_some());
        assert!(decided(&spec("deduplicate", true, false)).is_none());
        assert!(decided(&spec("first-row", false, false)).is_none());
    }

    #[test]
    fn a_key_span_fits_sixty_four_bits_a_row() {
        let keys = |v: &[i64]| ScalarBuffer::from(v.to_vec());
        assert_eq!(key_span(&[keys(&[5, 9]), keys(&[7])]), Some((5, 5)));
        assert_eq!(key_span(&[keys(&[0, 127])]), Some((0, 128)));
        assert_eq!(key_span(&[keys(&[0, 128])]), None);
        assert_eq!(key_span(&[keys(&[i64::MIN, i64::MAX])]), None);
        assert_eq!(key_span(&[keys(&[]), keys(&[-3])]), Some((-3, 1)));
        assert_eq!(key_span(&[keys(&[])]), None);
    }

    #[test]
    fn gathering_by_words_keeps_what_a_filter_keeps() {
        use arrow::array::{BooleanArray, TimestampMicrosecondArray};
        let mut x = 11u64;
        for rows in [0usize, 1, 63, 64, 65, 200, 640] {
            let values =
                TimestampMicrosecondArray::from_iter_values((0..rows as i64).map(|v| v * 3))
                    .with_timezone("UTC");
            // Words all kept, none kept and mixed.
            let live: Vec<u64> = (0..rows.div_ceil(64))
                .map(|w| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let bits = match w % 3 {
                        0 => u64::MAX,
                        1 => 0,
                        _ => x,
                    };
                    let tail = rows - w * 64;
                    if tail < 64 {
                        bits & ((1u64 << tail) - 1)
                    } else {
                        bits
                    }
                })
                .collect();
            let kept = live.iter().map(|w| w.count_ones() as usize).sum();
            let mask = BooleanArray::from(BooleanBuffer::new(live.clone().into(), 0, rows));
            let expected = arrow::compute::filter(&values, &mask).unwrap();
            let got = gather_words(&values, &live, kept);
            assert_eq!(got.as_ref(), expected.as_ref(), "{rows} rows");
        }
    }
}
