//! A table at a glance, as `tidelake info` and the `tidelake.table_info` action show it: its
//! schema, latest snapshot, and the files, sorted runs, rows and bytes of each bucket. Read only.

use crate::error::Result;
use crate::table::Table;

/// One bucket's files, as `tidelake info` and the `tidelake.table_info` action show them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketSummary {
    /// The partition's directory (`dt=2024-01-01`), empty for an unpartitioned table.
    pub partition: String,
    pub bucket: i32,
    pub files: i64,
    pub sorted_runs: i64,
    pub rows: i64,
    pub bytes: i64,
}

/// Schema, latest snapshot and per-bucket file statistics of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSummary {
    pub table: String,
    pub schema_json: String,
    pub schema_id: i64,
    /// 0 when the table has no snapshot.
    pub latest_snapshot_id: i64,
    pub buckets: Vec<BucketSummary>,
    pub total_rows: i64,
    pub total_bytes: i64,
}

/// The summary of `table` at its latest snapshot.
pub async fn summary(table: &Table) -> Result<TableSummary> {
    let plan = table.new_scan().all_levels().plan().await?;
    let schema_json = serde_json::to_string_pretty(table.schema().as_ref()).map_err(|e| {
        crate::error::InternalSnafu {
            message: format!("encoding the schema of {}: {e}", table.identifier()),
        }
        .build()
    })?;
    let mut out = TableSummary {
        table: table.identifier().to_string(),
        schema_json,
        schema_id: table.schema().id,
        latest_snapshot_id: plan.snapshot.as_ref().map_or(0, |s| s.id),
        ..Default::default()
    };
    let root = format!("{}/", table.path());
    for split in plan.splits {
        let dir = table.bucket_dir(&split.partition, split.bucket)?;
        let partition = dir
            .strip_prefix(&root)
            .unwrap_or(&dir)
            .trim_end_matches(&format!("bucket-{}", split.bucket))
            .trim_end_matches('/')
            .to_string();
        let b = BucketSummary {
            partition,
            bucket: split.bucket,
            files: split.files.len() as i64,
            sorted_runs: crate::lsm::levels::sorted_runs(&split.files).len() as i64,
            rows: split.files.iter().map(|f| f.row_count).sum(),
            bytes: split.files.iter().map(|f| f.file_size).sum(),
        };
        out.total_rows += b.rows;
        out.total_bytes += b.bytes;
        out.buckets.push(b);
    }
    Ok(out)
}
