//! Printing rows (table, JSON lines, CSV) and snapshot listings.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
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
            let mut w = arrow::json::LineDelimitedWriter::new(stdout.lock());
            for b in batches {
                w.write(b)?;
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
