//! Changelog of a compaction (Paimon's `lookup` and `full-compaction` producers): for every key of
//! a key range, what readers saw before the compaction against what they see after it, as `+I`,
//! `-U`/`+U` or `-D` records.
//!
//! A compaction chunk holds every record of its keys, tagged by sorted run. Runs are *old* (their
//! merged records are the "before" image: levels above 0 for `lookup`, the max level for
//! `full-compaction`) or *new* (records not yet in any changelog). "After" merges every run.
//! Only keys with new records change; with `row-deduplicate` off, such a key emits `-U`/`+U`
//! even when its value did not change.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int8Array, RecordBatch};
use arrow::compute::interleave;
use arrow::row::{RowConverter, Rows, SortField};
use snafu::ResultExt;

use crate::error::{ArrowSnafu, Result};
use crate::lsm::merge::{merge_runs, MergeSpec};
use crate::spec::RowKind;

/// Encodes columns `cols` of `batch` as comparable rows.
fn rows(batch: &RecordBatch, cols: std::ops::Range<usize>, what: &str) -> Result<Rows> {
    let fields = cols
        .clone()
        .map(|c| SortField::new(batch.column(c).data_type().clone()))
        .collect();
    let conv = RowConverter::new(fields).context(ArrowSnafu {
        context: format!("{what} row encoding"),
    })?;
    conv.convert_columns(&batch.columns()[cols])
        .context(ArrowSnafu {
            context: format!("{what} row encoding"),
        })
}

/// The changelog records of one chunk (`is_old[run]` says whether a run holds the before image),
/// sorted by key. `spec` must drop retractions (read semantics).
pub fn chunk_changelog(
    chunk: &[(usize, RecordBatch)],
    is_old: &[bool],
    spec: &MergeSpec,
    row_deduplicate: bool,
) -> Result<Option<RecordBatch>> {
    let Some((_, first)) = chunk.first() else {
        return Ok(None);
    };
    let schema = first.schema();
    let pick = |old: Option<bool>| -> Vec<RecordBatch> {
        chunk
            .iter()
            .filter(|(run, _)| old.is_none_or(|o| is_old.get(*run).copied().unwrap_or(false) == o))
            .map(|(_, b)| b.clone())
            .collect()
    };
    let new_slices = pick(Some(false));
    if new_slices.iter().all(|b| b.num_rows() == 0) {
        return Ok(None);
    }
    let empty = || RecordBatch::new_empty(Arc::clone(&schema));
    let before = merge_runs(&pick(Some(true)), spec)?.unwrap_or_else(empty);
    let after = merge_runs(&pick(None), spec)?.unwrap_or_else(empty);
    let k = spec.key_count;
    let n_cols = schema.fields().len();
    // Keys with new records (only they can change).
    let mut touched: HashSet<Vec<u8>> = HashSet::new();
    for b in &new_slices {
        let keys = rows(b, 0..k, "key")?;
        touched.extend(keys.iter().map(|r| r.as_ref().to_vec()));
    }
    // One converter for both sides so their keys compare.
    let both = arrow::compute::concat_batches(&schema, [&before, &after]).context(ArrowSnafu {
        context: "changelog images",
    })?;
    let keys = rows(&both, 0..k, "key")?;
    let values = rows(&both, k + 2..n_cols, "value")?;
    let nb = before.num_rows();
    let (mut i, mut j) = (0usize, 0usize);
    let mut out: Vec<(usize, usize, RowKind)> = Vec::new();
    while i < nb || j < after.num_rows() {
        let order = match (i < nb, j < after.num_rows()) {
            (true, true) => keys.row(i).cmp(&keys.row(nb + j)),
            (true, false) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                out.push((0, i, RowKind::Delete));
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push((1, j, RowKind::Insert));
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let changed = values.row(i) != values.row(nb + j);
                if changed || (!row_deduplicate && touched.contains(keys.row(i).as_ref())) {
                    out.push((0, i, RowKind::UpdateBefore));
                    out.push((1, j, RowKind::UpdateAfter));
                }
                i += 1;
                j += 1;
            }
        }
    }
    if out.is_empty() {
        return Ok(None);
    }
    let source: Vec<(usize, usize)> = out.iter().map(|(s, r, _)| (*s, *r)).collect();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(n_cols);
    for c in 0..n_cols {
        if c == k + 1 {
            columns.push(Arc::new(Int8Array::from_iter_values(
                out.iter().map(|(_, _, kind)| *kind as i8),
            )));
            continue;
        }
        columns.push(
            interleave(
                &[before.column(c).as_ref(), after.column(c).as_ref()],
                &source,
            )
            .context(ArrowSnafu {
                context: "assembling changelog records",
            })?,
        );
    }
    let batch = RecordBatch::try_new(schema, columns).context(ArrowSnafu {
        context: "changelog records",
    })?;
    Ok(Some(batch))
}
