//! Merging the records of equal keys: sort by (key, sequence fields, sequence number), then reduce
//! each key's records with the table's merge engine.
//!
//! As in Paimon, a key with a single record is returned as it is (its own row kind, no engine
//! checks); only two or more records go through the engine. The writer keeps a winning
//! retraction when it spills (older files below may still hold the key); reads drop it.

mod aggregate;
pub mod config;
mod deduplicate;
mod first_row;
mod partial_update;
mod ranked;
mod sorted;
pub mod stream;

pub use config::{AggFunction, AggSpec, MergeConfig, SequenceGroup};
pub use sorted::merge_sorted_slices;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int8Array, RecordBatch, UInt32Array};
use arrow::compute::SortOptions;
use arrow::compute::{concat_batches, interleave, take_record_batch};
use arrow::datatypes::{Int64Type, Int8Type};
use arrow::row::{RowConverter, Rows, SortField};
use snafu::ResultExt;

use crate::error::{ArrowSnafu, Result};
use crate::spec::binary_row::Datum;
use crate::spec::datum::{datum_at, datums_to_array};
use crate::spec::{MergeEngine, RowKind};

/// How to merge one bucket's records.
#[derive(Debug, Clone)]
pub struct MergeSpec {
    /// Number of `_KEY_` columns at the start of the batch.
    pub key_count: usize,
    /// Columns (indices into the batch) of `sequence.field`, compared before the sequence number.
    pub sequence_columns: Vec<usize>,
    pub config: Arc<MergeConfig>,
    /// Keep a winning retraction (writer spills, compaction above the lowest data) instead of
    /// dropping the key (reads).
    pub keep_retracts: bool,
}

impl MergeSpec {
    pub fn engine(&self) -> MergeEngine {
        self.config.engine
    }
}

/// One key's records (row indices into the merged batch, oldest first).
pub(crate) struct GroupInput<'a> {
    batch: &'a RecordBatch,
    rows: &'a [u32],
    kinds: &'a [i8],
    value_offset: usize,
    config: &'a MergeConfig,
}

impl GroupInput<'_> {
    fn kind(&self, row: u32) -> RowKind {
        RowKind::from_byte(self.kinds[row as usize]).unwrap_or(RowKind::Insert)
    }

    fn is_retract(&self, row: u32) -> bool {
        self.kind(row).is_retract()
    }

    /// The table-column values of one record (engines that need them read every column).
    fn values(&self, row: u32) -> Result<Vec<Datum>> {
        (0..self.config.types.len())
            .map(|i| {
                datum_at(
                    self.batch.column(self.value_offset + i).as_ref(),
                    row as usize,
                    &self.config.types[i],
                )
            })
            .collect()
    }
}

/// What a merge engine made of one key.
#[derive(Debug)]
pub(crate) enum Merged {
    /// An existing record, unchanged.
    Row(u32),
    /// A new record: key and sequence number from `base`, with this kind and these values.
    Built {
        base: u32,
        kind: RowKind,
        values: Vec<Datum>,
    },
    /// The key disappears.
    Nothing,
}

/// A converter of keys of these column types (in key order) to Arrow's row encoding: rows from one
/// converter compare as the keys do, across batches.
pub(crate) fn key_converter<'a>(
    types: impl IntoIterator<Item = &'a arrow::datatypes::DataType>,
) -> Result<RowConverter> {
    let fields = types
        .into_iter()
        .map(|t| SortField::new(t.clone()))
        .collect();
    RowConverter::new(fields).context(ArrowSnafu {
        context: "key row encoding",
    })
}

/// The first `k` columns of `batch` (its key) in `conv`'s row encoding.
pub(crate) fn encode_keys(conv: &RowConverter, batch: &RecordBatch, k: usize) -> Result<Rows> {
    conv.convert_columns(&batch.columns()[..k])
        .context(ArrowSnafu {
            context: "key row encoding",
        })
}

fn rows_of(batch: &RecordBatch, cols: &[usize], what: &str) -> Result<Rows> {
    rows_with(batch, cols, None, what)
}

fn rows_with(
    batch: &RecordBatch,
    cols: &[usize],
    options: Option<SortOptions>,
    what: &str,
) -> Result<Rows> {
    let fields = cols
        .iter()
        .map(|&c| match options {
            Some(o) => SortField::new_with_options(batch.column(c).data_type().clone(), o),
            None => SortField::new(batch.column(c).data_type().clone()),
        })
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
    // Stable sort (driftsort) finds the ascending runs the input is made of (each sorted run's
    // slice, concatenated) and merges them: O(n log runs) for a merge of sorted runs.
    order.sort();
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
        // NULL sequence values are the oldest in both orders.
        let options = SortOptions {
            descending: spec.config.sequence_descending,
            nulls_first: true,
        };
        Some(rows_with(
            batch,
            &spec.sequence_columns,
            Some(options),
            "sequence field",
        )?)
    };
    let mut idx: Vec<u32> = (0..batch.num_rows() as u32).collect();
    // Stable, as above: the runs' slices are ascending already, and equal records keep their
    // order.
    idx.sort_by(|&a, &b| {
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
    let value_offset = k + 2;
    let config = &spec.config;
    let mut picked: Vec<u32> = Vec::with_capacity(group_ends.len());
    let mut built: Vec<(usize, RowKind, Vec<Datum>)> = Vec::new();
    let mut kinds_out: Vec<i8> = Vec::with_capacity(group_ends.len());
    let mut start = 0;
    for &end in &group_ends {
        let rows = &idx[start..end];
        start = end;
        let g = GroupInput {
            batch: &batch,
            rows,
            kinds,
            value_offset,
            config,
        };
        let merged = if rows.len() == 1 {
            Merged::Row(rows[0])
        } else {
            match config.engine {
                MergeEngine::Deduplicate => deduplicate::merge(&g, config.ignore_delete),
                MergeEngine::FirstRow => first_row::merge(&g, config.ignore_delete)?,
                MergeEngine::PartialUpdate => partial_update::merge(&g, config)?,
                MergeEngine::Aggregation => aggregate::merge(&g, config)?,
            }
        };
        match merged {
            Merged::Nothing => {}
            Merged::Row(r) => {
                if spec.keep_retracts || !g.is_retract(r) {
                    picked.push(r);
                    kinds_out.push(kinds[r as usize]);
                }
            }
            Merged::Built { base, kind, values } => {
                if spec.keep_retracts || !kind.is_retract() {
                    built.push((picked.len(), kind, values));
                    picked.push(base);
                    kinds_out.push(kind as i8);
                }
            }
        }
    }
    if picked.is_empty() {
        return Ok(None);
    }
    let indices = UInt32Array::from(picked);
    let taken = take_record_batch(&batch, &indices).context(ArrowSnafu {
        context: "selecting merged rows",
    })?;
    if built.is_empty() {
        return Ok(Some(taken));
    }
    // Replace the value columns (and kinds) of built rows: interleave the taken column with a
    // column of the built values.
    let n = taken.num_rows();
    let mut columns: Vec<ArrayRef> = taken.columns().to_vec();
    columns[k + 1] = Arc::new(Int8Array::from(kinds_out));
    let mut source: Vec<(usize, usize)> = (0..n).map(|i| (0, i)).collect();
    for (j, (pos, _, _)) in built.iter().enumerate() {
        source[*pos] = (1, j);
    }
    for i in 0..config.types.len() {
        let col = value_offset + i;
        let values: Vec<Datum> = built.iter().map(|(_, _, v)| v[i].clone()).collect();
        let fresh = datums_to_array(taken.column(col).data_type(), &values)?;
        columns[col] = interleave(&[taken.column(col).as_ref(), fresh.as_ref()], &source).context(
            ArrowSnafu {
                context: "assembling merged rows",
            },
        )?;
    }
    let merged = RecordBatch::try_new(taken.schema(), columns).context(ArrowSnafu {
        context: "merged rows",
    })?;
    Ok(Some(merged))
}

/// Every record of `runs` sorted by (key, sequence fields, sequence number), nothing merged: the
/// layout of an `input` changelog file (each key's changes in the order they were written).
pub fn sort_records(runs: &[RecordBatch], spec: &MergeSpec) -> Result<Option<RecordBatch>> {
    let Some(first) = runs.first() else {
        return Ok(None);
    };
    let batch = concat_batches(&first.schema(), runs).context(ArrowSnafu {
        context: "concatenating changelog records",
    })?;
    if batch.num_rows() == 0 {
        return Ok(None);
    }
    let seq = batch
        .column(spec.key_count)
        .as_primitive::<Int64Type>()
        .values();
    let (idx, _) = match int_key(&batch, spec) {
        Some(keys) => sort_by_int_key(&keys, seq),
        None => sort_by_rows(&batch, spec, seq)?,
    };
    let sorted = take_record_batch(&batch, &UInt32Array::from(idx)).context(ArrowSnafu {
        context: "sorting changelog records",
    })?;
    Ok(Some(sorted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    /// `b` (a [`run`]) with its BIGINT key written as the strings `key` makes of it.
    pub(super) fn string_keyed(b: &RecordBatch, key: impl Fn(i64) -> String) -> RecordBatch {
        let keys: StringArray = b
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|k| Some(key(*k)))
            .collect();
        let mut fields: Vec<_> = b.schema().fields().iter().cloned().collect();
        fields[0] = Arc::new(Field::new("_KEY_id", DataType::Utf8, false));
        let mut columns = b.columns().to_vec();
        columns[0] = Arc::new(keys);
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn merge_spec(engine: &str, keep_retracts: bool) -> MergeSpec {
        let json = format!(
            r#"{{"id":0,"fields":[{{"id":0,"name":"id","type":"BIGINT NOT NULL"}},{{"id":1,"name":"v","type":"STRING"}}],
               "highestFieldId":1,"primaryKeys":["id"],"options":{{"bucket":"1","merge-engine":"{engine}"}}}}"#
        );
        let schema: crate::spec::TableSchema = serde_json::from_str(&json).unwrap();
        MergeSpec {
            key_count: 1,
            sequence_columns: vec![],
            config: Arc::new(MergeConfig::from_schema(&schema).unwrap()),
            keep_retracts,
        }
    }
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    /// A batch in the data-file layout: (key, sequence number, kind, value).
    pub(super) fn run(rows: &[(i64, i64, i8, &str)]) -> RecordBatch {
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
        let spec = merge_spec("deduplicate", false);
        let a = run(&[(1, 0, 0, "a"), (2, 1, 0, "b"), (3, 2, 0, "c")]);
        let b = run(&[(2, 4, 3, "b"), (1, 3, 2, "a2"), (4, 5, 0, "d")]);
        let merged = merge_runs(&[b.clone(), a.clone()], &spec).unwrap();
        assert_eq!(
            values(&merged),
            vec![(1, "a2".into()), (3, "c".into()), (4, "d".into())]
        );
        let keep = merge_spec("deduplicate", true);
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
        let spec = merge_spec("deduplicate", false);
        let seq = batch.column(1).as_primitive::<Int64Type>().values();
        let keys = int_key(&batch, &spec).unwrap();
        assert_eq!(
            sort_by_int_key(&keys, seq),
            sort_by_rows(&batch, &spec, seq).unwrap()
        );
    }

    #[test]
    fn first_row_keeps_first() {
        let spec = merge_spec("first-row", false);
        let merged = merge_runs(
            &[run(&[(1, 5, 0, "late")]), run(&[(1, 1, 0, "early")])],
            &spec,
        )
        .unwrap();
        assert_eq!(values(&merged), vec![(1, "early".into())]);
    }
}
