//! Printing rows (table, JSON lines, CSV) and snapshot listings.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, GenericListArray, MapArray, OffsetSizeTrait, RecordBatch, StructArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tidelake::Table;

use super::Result;
use crate::OutputFormat;

/// Keeps the first `limit` rows.
pub(crate) fn limit(batches: Vec<RecordBatch>, limit: usize) -> Vec<RecordBatch> {
    let mut left = limit;
    let mut out = Vec::new();
    for b in batches {
        if left == 0 {
            break;
        }
        let n = b.num_rows().min(left);
        out.push(b.slice(0, n));
        left -= n;
    }
    out
}

pub(crate) fn print(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: OutputFormat,
) -> Result<()> {
    let stdout = std::io::stdout();
    match format {
        OutputFormat::Table => {
            if batches.is_empty() {
                let empty = RecordBatch::new_empty(std::sync::Arc::clone(schema));
                println!("{}", arrow::util::pretty::pretty_format_batches(&[empty])?);
            } else {
                println!("{}", arrow::util::pretty::pretty_format_batches(batches)?);
            }
        }
        OutputFormat::Jsonl => {
            // NULLs are written (a map's NULL value is an entry like any other).
            let mut w = arrow::json::WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, arrow::json::writer::LineDelimited>(stdout.lock());
            for b in batches {
                w.write(&json_ready(b)?)?;
            }
            w.finish()?;
        }
        OutputFormat::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(stdout.lock());
            if batches.is_empty() {
                w.write(&RecordBatch::new_empty(std::sync::Arc::clone(schema)))?;
            }
            for b in batches {
                w.write(b)?;
            }
        }
    }
    Ok(())
}

/// `batch` with every map whose keys are not strings, at any depth, as a list of
/// `{"key": …, "value": …}` objects: a JSON object's keys are strings (pure).
fn json_ready(batch: &RecordBatch) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    let columns: Vec<ArrayRef> = batch.columns().iter().map(json_column).collect();
    let fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

fn json_column(array: &ArrayRef) -> ArrayRef {
    match array.data_type() {
        DataType::Map(_, _) => {
            let map = array.as_map();
            let entries = map.entries();
            let (keys, values) = (
                json_column(entries.column(0)),
                json_column(entries.column(1)),
            );
            let string_keys = matches!(
                keys.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            );
            let kv = StructArray::from(vec![
                (
                    Arc::new(Field::new(
                        if string_keys { "keys" } else { "key" },
                        keys.data_type().clone(),
                        false,
                    )),
                    keys,
                ),
                (
                    Arc::new(Field::new(
                        if string_keys { "values" } else { "value" },
                        values.data_type().clone(),
                        true,
                    )),
                    values,
                ),
            ]);
            let nulls = map.nulls().cloned();
            if string_keys {
                let field = Arc::new(Field::new("entries", kv.data_type().clone(), false));
                Arc::new(MapArray::new(
                    field,
                    map.offsets().clone(),
                    kv,
                    nulls,
                    false,
                ))
            } else {
                let field = Arc::new(Field::new("item", kv.data_type().clone(), false));
                Arc::new(GenericListArray::<i32>::new(
                    field,
                    map.offsets().clone(),
                    Arc::new(kv),
                    nulls,
                ))
            }
        }
        DataType::List(_) => json_list::<i32>(array.as_list::<i32>()),
        DataType::LargeList(_) => json_list::<i64>(array.as_list::<i64>()),
        DataType::Struct(fields) => {
            let s = array.as_struct();
            let columns: Vec<ArrayRef> = s.columns().iter().map(json_column).collect();
            let fields: Vec<Field> = fields
                .iter()
                .zip(&columns)
                .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
                .collect();
            Arc::new(StructArray::new(fields.into(), columns, s.nulls().cloned()))
        }
        _ => Arc::clone(array),
    }
}

fn json_list<O: OffsetSizeTrait>(list: &GenericListArray<O>) -> ArrayRef {
    let values = json_column(list.values());
    let field = Arc::new(Field::new("item", values.data_type().clone(), true));
    Arc::new(GenericListArray::<O>::new(
        field,
        list.offsets().clone(),
        values,
        list.nulls().cloned(),
    ))
}

pub(crate) async fn print_snapshots(table: &Table) -> Result<()> {
    let sm = table.snapshot_manager();
    println!(
        "{:>6}  {:<9}  {:<24}  {:>12}  {:>12}  commit user",
        "id", "kind", "time (UTC)", "total rows", "delta rows"
    );
    for id in sm.list_ids().await? {
        let s = sm.snapshot(id).await?;
        let time = arrow::temporal_conversions::timestamp_ms_to_datetime(s.time_millis)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
            .unwrap_or_else(|| s.time_millis.to_string());
        println!(
            "{:>6}  {:<9}  {:<24}  {:>12}  {:>12}  {}",
            s.id,
            s.commit_kind.to_string(),
            time,
            s.total_record_count
                .map(|v| v.to_string())
                .unwrap_or_default(),
            s.delta_record_count
                .map(|v| v.to_string())
                .unwrap_or_default(),
            s.commit_user
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Builder, MapBuilder, StringBuilder};

    fn jsonl(batch: &RecordBatch) -> String {
        let mut w = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow::json::writer::LineDelimited>(Vec::new());
        w.write(&json_ready(batch).unwrap()).unwrap();
        w.finish().unwrap();
        String::from_utf8(w.into_inner()).unwrap()
    }

    #[test]
    fn maps_keep_null_values_and_non_string_keys_become_pairs() {
        let mut by_name = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        by_name.keys().append_value("x");
        by_name.values().append_value(1);
        by_name.keys().append_value("y");
        by_name.values().append_null();
        by_name.append(true).unwrap();
        let mut by_id = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
        by_id.keys().append_value(7);
        by_id.values().append_null();
        by_id.append(true).unwrap();
        let a: ArrayRef = Arc::new(by_name.finish());
        let b: ArrayRef = Arc::new(by_id.finish());
        let batch = RecordBatch::try_from_iter([("m", a), ("n", b)]).unwrap();
        assert_eq!(
            jsonl(&batch),
            "{\"m\":{\"x\":1,\"y\":null},\"n\":[{\"key\":7,\"value\":null}]}\n"
        );
    }
}
