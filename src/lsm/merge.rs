//! Merging records with equal keys: sorts by (key, sequence fields, sequence number) and reduces
//! each key's records with the merge engine.
//!
//! - deduplicate: the last record wins; if it retracts (-U/-D) the key is gone.
//! - first-row: the first added record wins.
//!
//! The writer keeps the winning retraction when it spills (older files below may still hold the
//! key); readers drop it.

use arrow::array::{AsArray, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::{Int64Type, Int8Type};
use arrow::row::{RowConverter, Rows, SortField};
use snafu::ResultExt;

use crate::error::{ArrowSnafu, Result, UnsupportedSnafu};
use crate::spec::{MergeEngine, RowKind};

/// How to merge one bucket's records.
#[derive(Debug, Clone)]
pub struct MergeSpec {
    /// Number of `_KEY_` columns at the start of the batch.
    pub key_count: usize,
    /// Columns (indices into the file layout) of `sequence.field`, ordered before the sequence number.
    pub sequence_columns: Vec<usize>,
    pub engine: MergeEngine,
    /// Keep a winning retraction (writer spills) instead of dropping the key (reads).
    pub keep_retracts: bool,
}

fn rows_of(batch: &RecordBatch, cols: &[usize], what: &str) -> Result<Rows> {
    let fields = cols
        .iter()
        .map(|&c| SortField::new(batch.column(c).data_type().clone()))
        .collect();
    let conv = RowConverter::new(fields).context(ArrowSnafu {
        context: format!("{what} row encoding"),
    })?;
    let arrays: Vec<_> = cols
        .iter()
        .map(|&c| std::sync::Arc::clone(batch.column(c)))
        .collect();
    conv.convert_columns(&arrays).context(ArrowSnafu {
        context: format!("{what} row encoding"),
    })
}

/// The key as integers when it is a single INT/BIGINT column without sequence fields: sorting
/// plain integers is several times faster than comparing encoded rows.
fn int_key(batch: &RecordBatch, spec: &MergeSpec) -> Option<Vec<i64>> {
    if spec.key_count != 1 || !spec.sequence_columns.is_empty() || batch.column(0).null_count() > 0
    {
        return None;
    }
    let col = batch.column(0);
    match col.data_type() {
        arrow::datatypes::DataType::Int64 => {
            Some(col.as_primitive::<Int64Type>().values().to_vec())
        }
        arrow::datatypes::DataType::Int32 => Some(
            col.as_primitive::<arrow::datatypes::Int32Type>()
                .values()
                .iter()
                .map(|v| *v as i64)
                .collect(),
        ),
        _ => None,
    }
}

/// Row indices sorted by (key, sequence number), and the end of each run of equal keys.
fn sort_by_int_key(keys: &[i64], seq: &[i64]) -> (Vec<u32>, Vec<usize>) {
    let mut order: Vec<(i64, i64, u32)> = (0..keys.len())
        .map(|i| (keys[i], seq[i], i as u32))
        .collect();
    order.sort_unstable();
    let mut ends = Vec::new();
    for i in 1..order.len() {
        if order[i].0 != order[i - 1].0 {
            ends.push(i);
        }
    }
    ends.push(order.len());
    (order.into_iter().map(|(_, _, i)| i).collect(), ends)
}

/// Row indices sorted by (key, sequence fields, sequence number) for any key type.
fn sort_by_rows(
    batch: &RecordBatch,
    spec: &MergeSpec,
    seq: &[i64],
) -> Result<(Vec<u32>, Vec<usize>)> {
    let keys = rows_of(batch, &(0..spec.key_count).collect::<Vec<_>>(), "key")?;
    let order = if spec.sequence_columns.is_empty() {
        None
    } else {
        Some(rows_of(batch, &spec.sequence_columns, "sequence field")?)
    };
    let mut idx: Vec<u32> = (0..batch.num_rows() as u32).collect();
    idx.sort_unstable_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        keys.row(a)
            .cmp(&keys.row(b))
            .then_with(|| match &order {
                Some(o) => o.row(a).cmp(&o.row(b)),
                None => std::cmp::Ordering::Equal,
            })
            .then_with(|| seq[a].cmp(&seq[b]))
    });
    let mut ends = Vec::new();
    for i in 1..idx.len() {
        if keys.row(idx[i] as usize) != keys.row(idx[i - 1] as usize) {
            ends.push(i);
        }
    }
    ends.push(idx.len());
    Ok((idx, ends))
}

/// Merges `runs` (any number of batches, in any order, each in data-file layout) into one batch
/// sorted by key with one record per surviving key.
pub fn merge_runs(runs: &[RecordBatch], spec: &MergeSpec) -> Result<Option<RecordBatch>> {
    let Some(first) = runs.first() else {
        return Ok(None);
    };
    let batch = if runs.len() == 1 {
        first.clone()
    } else {
        concat_batches(&first.schema(), runs).context(ArrowSnafu {
            context: "concatenating sorted runs",
        })?
    };
    if batch.num_rows() == 0 {
        return Ok(None);
    }
    let k = spec.key_count;
    let seq = batch.column(k).as_primitive::<Int64Type>().values();
    let kinds = batch.column(k + 1).as_primitive::<Int8Type>().values();
    let (idx, group_ends) = match int_key(&batch, spec) {
        Some(keys) => sort_by_int_key(&keys, seq),
        None => sort_by_rows(&batch, spec, seq)?,
    };
    let is_retract = |i: usize| RowKind::from_byte(kinds[i]).is_some_and(|k| k.is_retract());
    let mut out: Vec<u32> = Vec::with_capacity(idx.len());
    let mut start = 0;
    for &end in &group_ends {
        let group = &idx[start..end];
        let winner = match spec.engine {
            MergeEngine::Deduplicate => group.last().copied(),
            MergeEngine::FirstRow => group.iter().copied().find(|&i| !is_retract(i as usize)),
            other => {
                return UnsupportedSnafu {
                    message: format!("merge-engine '{}' is not supported yet", other.name()),
                }
                .fail()
            }
        };
        if let Some(w) = winner {
            if spec.keep_retracts || !is_retract(w as usize) {
                out.push(w);
            }
        }
        start = end;
    }
    if out.is_empty() {
        return Ok(None);
    }
    let indices = UInt32Array::from(out);
    let merged = take_record_batch(&batch, &indices).context(ArrowSnafu {
        context: "selecting merged rows",
    })?;
    Ok(Some(merged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, Int8Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn run(rows: &[(i64, i64, i8, &str)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("_KEY_id", DataType::Int64, false),
            Field::new("_SEQUENCE_NUMBER", DataType::Int64, false),
            Field::new("_VALUE_KIND", DataType::Int8, false),
            Field::new("v", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int8Array::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
            ],
        )
        .unwrap()
    }

    fn values(b: &Option<RecordBatch>) -> Vec<(i64, String)> {
        let Some(b) = b else { return vec![] };
        let k = b.column(0).as_primitive::<Int64Type>();
        let v = b.column(3).as_string::<i32>();
        (0..b.num_rows())
            .map(|i| (k.value(i), v.value(i).to_string()))
            .collect()
    }

    #[test]
    fn deduplicate_keeps_last_and_drops_deleted_keys() {
        let spec = MergeSpec {
            key_count: 1,
            sequence_columns: vec![],
            engine: MergeEngine::Deduplicate,
            keep_retracts: false,
        };
        let a = run(&[(1, 0, 0, "a"), (2, 1, 0, "b"), (3, 2, 0, "c")]);
        let b = run(&[(2, 4, 3, "b"), (1, 3, 2, "a2"), (4, 5, 0, "d")]);
        let merged = merge_runs(&[b.clone(), a.clone()], &spec).unwrap();
        assert_eq!(
            values(&merged),
            vec![(1, "a2".into()), (3, "c".into()), (4, "d".into())]
        );
        let keep = MergeSpec {
            keep_retracts: true,
            ..spec
        };
        assert_eq!(values(&merge_runs(&[a, b], &keep).unwrap()).len(), 4);
    }

    #[test]
    fn integer_fast_path_orders_like_row_encoding() {
        let mut rows = Vec::new();
        let mut x: u64 = 7;
        for seq in 0..500 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            rows.push((((x >> 33) % 40) as i64 - 20, seq, 0i8, "v"));
        }
        let batch = run(&rows);
        let spec = MergeSpec {
            key_count: 1,
            sequence_columns: vec![],
            engine: MergeEngine::Deduplicate,
            keep_retracts: false,
        };
        let seq = batch.column(1).as_primitive::<Int64Type>().values();
        let keys = int_key(&batch, &spec).unwrap();
        assert_eq!(
            sort_by_int_key(&keys, seq),
            sort_by_rows(&batch, &spec, seq).unwrap()
        );
    }

    #[test]
    fn first_row_keeps_first() {
        let spec = MergeSpec {
            key_count: 1,
            sequence_columns: vec![],
            engine: MergeEngine::FirstRow,
            keep_retracts: false,
        };
        let merged = merge_runs(
            &[run(&[(1, 5, 0, "late")]), run(&[(1, 1, 0, "early")])],
            &spec,
        )
        .unwrap();
        assert_eq!(values(&merged), vec![(1, "early".into())]);
    }
}
