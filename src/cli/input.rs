//! Reading input files (Parquet, CSV with a header, JSON lines) into batches shaped for a table,
//! and typing `KEY=VALUE` partition arguments.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tidelake::spec::binary_row::Datum;
use tidelake::spec::{DataType, TypeRoot};
use tidelake::Table;

use crate::anyhow_like::Result;

/// Reads `path` whole; every row is validated later by the table writer.
// The CLI reads its input file synchronously before any async work starts on it.
#[allow(clippy::disallowed_methods)]
pub(crate) fn read_file(
    path: &Path,
    format: Option<&str>,
    table: &Table,
    row_kind: Option<&str>,
) -> Result<Vec<RecordBatch>> {
    let shown = path.display();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let format = format.map(str::to_ascii_lowercase).unwrap_or(ext);
    let file = File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let table_schema = table.arrow_schema()?;
    let schema_for = |names: &[String]| -> Result<Arc<Schema>> {
        let mut fields = Vec::new();
        for n in names {
            if Some(n.as_str()) == row_kind {
                fields.push(Field::new(n, ArrowType::Utf8, true));
            } else {
                match table_schema.field_with_name(n) {
                    Ok(f) => fields.push(f.as_ref().clone().with_nullable(true)),
                    Err(_) => {
                        return Err(format!(
                            "{shown}: column '{n}' is not a column of table {}",
                            table.identifier()
                        )
                        .into())
                    }
                }
            }
        }
        Ok(Arc::new(Schema::new(fields)))
    };
    let batches = match format.as_str() {
        "parquet" | "pq" => {
            let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                .map_err(|e| format!("{shown}: not a readable Parquet file: {e}"))?
                .build()
                .map_err(|e| format!("{shown}: {e}"))?;
            reader
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| format!("{shown}: {e}"))?
        }
        "csv" => {
            let mut header = String::new();
            BufReader::new(File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?)
                .read_line(&mut header)
                .map_err(|e| format!("{shown}: {e}"))?;
            let names: Vec<String> = header
                .trim_end()
                .split(',')
                .map(|s| s.trim().trim_matches('"').to_string())
                .collect();
            let schema = schema_for(&names)?;
            let reader = arrow::csv::ReaderBuilder::new(schema)
                .with_header(true)
                .build(file)
                .map_err(|e| format!("{shown}: {e}"))?;
            reader
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| format!("{shown}: {e}"))?
        }
        "json" | "jsonl" | "ndjson" => {
            let mut names: Vec<String> = table_schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            if let Some(k) = row_kind {
                names.push(k.to_string());
            }
            let schema = schema_for(&names)?;
            let reader = arrow::json::ReaderBuilder::new(schema)
                .with_strict_mode(true)
                .build(BufReader::new(file))
                .map_err(|e| format!("{shown}: {e}"))?;
            reader
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| format!("{shown}: {e}"))?
        }
        other => {
            return Err(format!(
                "{shown}: unknown input format '{other}' (use parquet, csv or jsonl)"
            )
            .into())
        }
    };
    Ok(batches)
}

/// Types `KEY=VALUE` partition arguments with the partition columns' types.
pub(crate) fn typed_partition_values(
    table: &Table,
    pairs: &[(String, String)],
) -> Result<Vec<(String, Datum)>> {
    let schema = table.schema();
    pairs
        .iter()
        .map(|(k, v)| {
            if !schema.partition_keys.contains(k) {
                return Err(format!(
                    "'{k}' is not a partition key of table {}",
                    table.identifier()
                )
                .into());
            }
            let field = schema.field(k).ok_or_else(|| format!("no column '{k}'"))?;
            Ok((
                k.clone(),
                parse_datum(v, &field.data_type).map_err(|e| format!("partition {k}: {e}"))?,
            ))
        })
        .collect()
}

fn parse_datum(s: &str, ty: &DataType) -> std::result::Result<Datum, String> {
    let bad = || format!("'{s}' is not a valid {ty}");
    Ok(match ty.root {
        TypeRoot::Boolean => Datum::Boolean(s.parse().map_err(|_| bad())?),
        TypeRoot::TinyInt => Datum::TinyInt(s.parse().map_err(|_| bad())?),
        TypeRoot::SmallInt => Datum::SmallInt(s.parse().map_err(|_| bad())?),
        TypeRoot::Int => Datum::Int(s.parse().map_err(|_| bad())?),
        TypeRoot::BigInt => Datum::BigInt(s.parse().map_err(|_| bad())?),
        TypeRoot::Float => Datum::Float(s.parse().map_err(|_| bad())?),
        TypeRoot::Double => Datum::Double(s.parse().map_err(|_| bad())?),
        TypeRoot::Char(_) | TypeRoot::VarChar(_) => Datum::String(s.to_string()),
        TypeRoot::Date => {
            let d = chrono_date(s).ok_or_else(bad)?;
            Datum::Date(d)
        }
        _ => {
            return Err(format!(
                "partition values of type {ty} cannot be given on the command line yet"
            ))
        }
    })
}

fn chrono_date(s: &str) -> Option<i32> {
    let arr = arrow::compute::cast(
        &arrow::array::StringArray::from(vec![s]),
        &ArrowType::Date32,
    )
    .ok()?;
    let d = arr.as_any().downcast_ref::<arrow::array::Date32Array>()?;
    (d.null_count() == 0).then(|| d.value(0))
}
