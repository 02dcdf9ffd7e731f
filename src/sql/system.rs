//! Paimon's system tables, read as `<table>$<name>`: `snapshots`, `schemas`, `options`, `files`,
//! `manifests`, `tags` and `branches`, each built in memory from the table's metadata when a
//! statement names it. `$changelog` reads the table's changes as they are asked for
//! ([`changelog`]); `audit_log` and `row_tracking` are scans of the table itself (see the
//! provider).

pub(crate) mod changelog;

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::TableProvider;

use crate::error::{invalid, Result};
use crate::spec::binary_row;
use crate::spec::snapshot::Snapshot;
use crate::table::{SnapshotSelector, Table};

/// The names `<table>$<name>` accepts.
pub(crate) const SYSTEM_TABLES: &[&str] = &[
    "snapshots",
    "schemas",
    "options",
    "files",
    "manifests",
    "tags",
    "branches",
    "audit_log",
    "changelog",
    "row_tracking",
];

pub(crate) async fn provider(
    table: &Table,
    kind: &str,
    selector: &SnapshotSelector,
) -> Result<Arc<dyn TableProvider>> {
    let batch = match kind {
        "snapshots" => snapshots(table).await?,
        "schemas" => schemas(table).await?,
        "options" => options(table)?,
        "files" => files(table, selector).await?,
        "manifests" => manifests(table, selector).await?,
        "tags" => tags(table).await?,
        "branches" => branches(table).await?,
        other => {
            return invalid!(
                "table {} has no system table '{other}'; system tables are: {}",
                table.identifier(),
                SYSTEM_TABLES.join(", ")
            )
        }
    };
    mem_table(batch.schema(), batch)
}

/// A small in-memory table: one system table's batch.
fn mem_table(schema: SchemaRef, batch: RecordBatch) -> Result<Arc<dyn TableProvider>> {
    let t = datafusion::datasource::MemTable::try_new(schema, vec![vec![batch]]).map_err(|e| {
        crate::error::InternalSnafu {
            message: format!("building an in-memory table: {e}"),
        }
        .build()
    })?;
    Ok(Arc::new(t))
}

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, None)
}

fn batch(fields: Vec<(&str, DataType, bool)>, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|(n, t, null)| Field::new(n, t, null))
            .collect::<Vec<_>>(),
    ));
    RecordBatch::try_new(schema, columns).map_err(|e| {
        crate::error::InternalSnafu {
            message: format!("building a system table: {e}"),
        }
        .build()
    })
}

fn strings<I: IntoIterator<Item = Option<String>>>(v: I) -> ArrayRef {
    Arc::new(v.into_iter().collect::<StringArray>())
}

fn longs<I: IntoIterator<Item = Option<i64>>>(v: I) -> ArrayRef {
    Arc::new(v.into_iter().collect::<Int64Array>())
}

async fn all_snapshots(table: &Table) -> Result<Vec<Snapshot>> {
    let sm = table.snapshot_manager();
    let mut out = Vec::new();
    for id in sm.list_ids().await? {
        // A snapshot expired between listing and reading is skipped.
        if let Some(s) = sm.try_snapshot(id).await? {
            out.push(s);
        }
    }
    Ok(out)
}

async fn snapshots(table: &Table) -> Result<RecordBatch> {
    let s = all_snapshots(table).await?;
    batch(
        vec![
            ("snapshot_id", DataType::Int64, false),
            ("schema_id", DataType::Int64, false),
            ("commit_user", DataType::Utf8, false),
            ("commit_identifier", DataType::Int64, false),
            ("commit_kind", DataType::Utf8, false),
            ("commit_time", ts_type(), false),
            ("base_manifest_list", DataType::Utf8, false),
            ("delta_manifest_list", DataType::Utf8, false),
            ("changelog_manifest_list", DataType::Utf8, true),
            ("total_record_count", DataType::Int64, true),
            ("delta_record_count", DataType::Int64, true),
            ("changelog_record_count", DataType::Int64, true),
            ("watermark", DataType::Int64, true),
        ],
        vec![
            longs(s.iter().map(|x| Some(x.id))),
            longs(s.iter().map(|x| Some(x.schema_id))),
            strings(s.iter().map(|x| Some(x.commit_user.clone()))),
            longs(s.iter().map(|x| Some(x.commit_identifier))),
            strings(s.iter().map(|x| Some(x.commit_kind.to_string()))),
            Arc::new(TimestampMillisecondArray::from(
                s.iter().map(|x| x.time_millis).collect::<Vec<_>>(),
            )),
            strings(s.iter().map(|x| Some(x.base_manifest_list.clone()))),
            strings(s.iter().map(|x| Some(x.delta_manifest_list.clone()))),
            strings(s.iter().map(|x| x.changelog_manifest_list.clone())),
            longs(s.iter().map(|x| x.total_record_count)),
            longs(s.iter().map(|x| x.delta_record_count)),
            longs(s.iter().map(|x| x.changelog_record_count)),
            longs(s.iter().map(|x| x.watermark)),
        ],
    )
}

async fn schemas(table: &Table) -> Result<RecordBatch> {
    let sm = table.schema_manager();
    let mut all = Vec::new();
    for id in sm.list_ids().await? {
        all.push(sm.schema(id).await?);
    }
    let json = |v: &dyn erased::Json| v.json();
    batch(
        vec![
            ("schema_id", DataType::Int64, false),
            ("fields", DataType::Utf8, false),
            ("partition_keys", DataType::Utf8, false),
            ("primary_keys", DataType::Utf8, false),
            ("options", DataType::Utf8, false),
            ("comment", DataType::Utf8, true),
            ("update_time", ts_type(), false),
        ],
        vec![
            longs(all.iter().map(|s| Some(s.id))),
            strings(all.iter().map(|s| Some(json(&s.fields)))),
            strings(all.iter().map(|s| Some(json(&s.partition_keys)))),
            strings(all.iter().map(|s| Some(json(&s.primary_keys)))),
            strings(all.iter().map(|s| Some(json(&s.options)))),
            strings(all.iter().map(|s| s.comment.clone())),
            Arc::new(TimestampMillisecondArray::from(
                all.iter().map(|s| s.time_millis).collect::<Vec<_>>(),
            )),
        ],
    )
}

mod erased {
    /// JSON rendering of schema parts.
    pub(super) trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_default()
        }
    }
}

fn options(table: &Table) -> Result<RecordBatch> {
    let opts = &table.schema().options;
    batch(
        vec![
            ("key", DataType::Utf8, false),
            ("value", DataType::Utf8, false),
        ],
        vec![
            strings(opts.keys().map(|k| Some(k.clone()))),
            strings(opts.values().map(|v| Some(v.clone()))),
        ],
    )
}

async fn snapshot_of(table: &Table, selector: &SnapshotSelector) -> Result<Option<Snapshot>> {
    Ok(table
        .new_scan()
        .snapshot(selector.clone())
        .plan()
        .await?
        .snapshot)
}

fn render_row(row: &[u8], types: &[crate::spec::DataType]) -> String {
    match binary_row::deserialize(row, types) {
        Ok(values) => {
            let parts: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            format!("[{}]", parts.join(", "))
        }
        Err(_) => String::from("[?]"),
    }
}

async fn files(table: &Table, selector: &SnapshotSelector) -> Result<RecordBatch> {
    let layout = table.layout()?;
    let entries = match snapshot_of(table, selector).await? {
        Some(s) => table.manifest_manager().live_entries(&s).await?,
        None => vec![],
    };
    let mut paths = Vec::with_capacity(entries.len());
    for e in &entries {
        paths.push(Some(format!(
            "{}/{}",
            table.bucket_dir(&e.partition, e.bucket)?,
            e.file.file_name
        )));
    }
    batch(
        vec![
            ("partition", DataType::Utf8, false),
            ("bucket", DataType::Int32, false),
            ("file_path", DataType::Utf8, false),
            ("file_format", DataType::Utf8, false),
            ("schema_id", DataType::Int64, false),
            ("level", DataType::Int32, false),
            ("record_count", DataType::Int64, false),
            ("file_size_in_bytes", DataType::Int64, false),
            ("min_key", DataType::Utf8, false),
            ("max_key", DataType::Utf8, false),
            ("min_sequence_number", DataType::Int64, false),
            ("max_sequence_number", DataType::Int64, false),
            ("creation_time", ts_type(), true),
            ("delete_row_count", DataType::Int64, true),
        ],
        vec![
            strings(
                entries
                    .iter()
                    .map(|e| Some(render_row(&e.partition, &layout.partition_types))),
            ),
            Arc::new(
                entries
                    .iter()
                    .map(|e| Some(e.bucket))
                    .collect::<Int32Array>(),
            ),
            strings(paths),
            strings(entries.iter().map(|e| {
                Some(
                    std::path::Path::new(&e.file.file_name)
                        .extension()
                        .map(|x| x.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                )
            })),
            longs(entries.iter().map(|e| Some(e.file.schema_id))),
            Arc::new(
                entries
                    .iter()
                    .map(|e| Some(e.file.level))
                    .collect::<Int32Array>(),
            ),
            longs(entries.iter().map(|e| Some(e.file.row_count))),
            longs(entries.iter().map(|e| Some(e.file.file_size))),
            strings(
                entries
                    .iter()
                    .map(|e| Some(render_row(&e.file.min_key, &layout.key_types))),
            ),
            strings(
                entries
                    .iter()
                    .map(|e| Some(render_row(&e.file.max_key, &layout.key_types))),
            ),
            longs(entries.iter().map(|e| Some(e.file.min_sequence_number))),
            longs(entries.iter().map(|e| Some(e.file.max_sequence_number))),
            Arc::new(
                entries
                    .iter()
                    .map(|e| e.file.creation_time)
                    .collect::<TimestampMillisecondArray>(),
            ),
            longs(entries.iter().map(|e| e.file.delete_row_count)),
        ],
    )
}

async fn manifests(table: &Table, selector: &SnapshotSelector) -> Result<RecordBatch> {
    let mut metas = Vec::new();
    if let Some(s) = snapshot_of(table, selector).await? {
        let mm = table.manifest_manager();
        metas.extend(mm.read_manifest_list(&s.base_manifest_list).await?);
        metas.extend(mm.read_manifest_list(&s.delta_manifest_list).await?);
    }
    batch(
        vec![
            ("file_name", DataType::Utf8, false),
            ("file_size", DataType::Int64, false),
            ("num_added_files", DataType::Int64, false),
            ("num_deleted_files", DataType::Int64, false),
            ("schema_id", DataType::Int64, false),
        ],
        vec![
            strings(metas.iter().map(|m| Some(m.file_name.clone()))),
            longs(metas.iter().map(|m| Some(m.file_size))),
            longs(metas.iter().map(|m| Some(m.num_added_files))),
            longs(metas.iter().map(|m| Some(m.num_deleted_files))),
            longs(metas.iter().map(|m| Some(m.schema_id))),
        ],
    )
}

/// Paimon's `$branches`: each branch's name and when it was created.
async fn branches(table: &Table) -> Result<RecordBatch> {
    let branches = table.branches().await?;
    batch(
        vec![
            ("branch_name", DataType::Utf8, false),
            ("create_time", ts_type(), false),
        ],
        vec![
            strings(branches.iter().map(|b| Some(b.name.clone()))),
            Arc::new(TimestampMillisecondArray::from(
                branches
                    .iter()
                    .map(|b| b.create_time_millis)
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}

async fn tags(table: &Table) -> Result<RecordBatch> {
    let tags = table.list_tags().await?;
    batch(
        vec![
            ("tag_name", DataType::Utf8, false),
            ("snapshot_id", DataType::Int64, false),
            ("schema_id", DataType::Int64, false),
            ("commit_time", ts_type(), false),
            ("record_count", DataType::Int64, true),
        ],
        vec![
            strings(tags.iter().map(|(n, _)| Some(n.clone()))),
            longs(tags.iter().map(|(_, s)| Some(s.id))),
            longs(tags.iter().map(|(_, s)| Some(s.schema_id))),
            Arc::new(TimestampMillisecondArray::from(
                tags.iter().map(|(_, s)| s.time_millis).collect::<Vec<_>>(),
            )),
            longs(tags.iter().map(|(_, s)| s.total_record_count)),
        ],
    )
}
