//! Reading input files (Parquet, CSV with a header, JSON lines) into batches shaped for a table,
//! shaped by the table writer that validates every row.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType as ArrowType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tidelake::Table;

use super::Result;

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
                .map_err(|e| format!("{shown}: {}", csv_column_named(&e.to_string(), &names)))?
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

/// How many rows of each change kind `column` holds, as ` (2 inserts, 1 delete)` after the row
/// count (upserts, retractions and deletes are not all "loaded" rows).
pub(crate) fn row_kind_counts(batches: &[RecordBatch], column: &str) -> Result<String> {
    let (mut upserts, mut retractions, mut deletes) = (0usize, 0usize, 0usize);
    for b in batches {
        let Some(kinds) = b.column_by_name(column) else {
            return Err(format!("the input has no row-kind column '{column}'").into());
        };
        let kinds = arrow::compute::cast(kinds, &ArrowType::Utf8)
            .map_err(|e| format!("row-kind column '{column}': {e}"))?;
        let kinds = kinds
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .ok_or_else(|| format!("row-kind column '{column}' is not text"))?;
        for k in kinds.iter().flatten() {
            match k.trim() {
                "-D" => deletes += 1,
                "-U" => retractions += 1,
                _ => upserts += 1,
            }
        }
    }
    let mut parts = vec![format!("{upserts} insert(s) or update(s)")];
    if retractions > 0 {
        parts.push(format!("{retractions} retraction(s)"));
    }
    if deletes > 0 {
        parts.push(format!("{deletes} delete(s)"));
    }
    Ok(format!(" ({})", parts.join(", ")))
}

/// arrow's CSV errors name a column by its index (`for column 2`); the header's name says more.
fn csv_column_named(message: &str, names: &[String]) -> String {
    const MARK: &str = "for column ";
    let Some(at) = message.find(MARK) else {
        return message.to_string();
    };
    let digits_at = at + MARK.len();
    let digits: String = message[digits_at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    match digits.parse::<usize>().ok().and_then(|i| names.get(i)) {
        Some(name) => format!(
            "{}for column '{name}'{}",
            &message[..at],
            &message[digits_at + digits.len()..]
        ),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::csv_column_named;

    #[test]
    fn csv_errors_name_the_column() {
        let names = vec!["id".to_string(), "v".to_string(), "n".to_string()];
        assert_eq!(
            csv_column_named(
                "Parser error: Error while parsing value 'abc' as type 'Int64' for column 2 at line 3",
                &names
            ),
            "Parser error: Error while parsing value 'abc' as type 'Int64' for column 'n' at line 3"
        );
        assert_eq!(csv_column_named("other", &names), "other");
        assert_eq!(
            csv_column_named("x for column 9 y", &names),
            "x for column 9 y"
        );
    }
}
