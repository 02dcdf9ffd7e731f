//! Administrative Flight actions (`DoAction` type `tidelake.<name>`, request and result messages
//! of `proto/tidelake.proto`, declared in `tidelake_client::admin`): compaction, snapshot expiry,
//! orphan-file removal, tags, rollback, ALTER TABLE and table info. Each calls the same table
//! operations as the `CALL sys.*` procedures and the CLI.

use prost::Message;
use tidelake_client::admin::{
    AlterTableRequest, BucketInfo, CleanupResult, CompactRequest, CompactResult,
    ExpireSnapshotsRequest, RemoveOrphanFilesRequest, TableInfo, TableInfoRequest, Tag, TagList,
    TagRequest,
};
use tonic::Status;

use super::status::{invalid, to_status};
use crate::catalog::{now_millis, Identifier};
use crate::sql::{SqlEngine, SqlSession};
use crate::table::lifecycle::{parse_duration_millis, CleanupReport, RollbackTarget};
use crate::table::Table;

/// The actions (name, description) ListActions reports.
pub const ADMIN_ACTIONS: &[(&str, &str)] = &[
    ("tidelake.compact", "CompactRequest -> CompactResult: compact a table's buckets (full: everything into the max level)"),
    ("tidelake.expire_snapshots", "ExpireSnapshotsRequest -> CleanupResult: expire snapshots by count and age"),
    ("tidelake.remove_orphan_files", "RemoveOrphanFilesRequest -> CleanupResult: list (or, with delete, remove) files no snapshot or tag uses"),
    ("tidelake.create_tag", "TagRequest -> TagList: tag a snapshot (default: the latest)"),
    ("tidelake.delete_tag", "TagRequest -> CleanupResult: delete a tag and the files only it kept"),
    ("tidelake.list_tags", "TagRequest -> TagList: the table's tags"),
    ("tidelake.rollback", "TagRequest -> CleanupResult: roll the table back to a snapshot or tag"),
    ("tidelake.alter_table", "AlterTableRequest -> TableInfo: apply ALTER TABLE changes (SQL after 'ALTER TABLE <t>')"),
    ("tidelake.table_info", "TableInfoRequest -> TableInfo: schema, latest snapshot, files, sorted runs, rows and bytes per bucket"),
];

fn decode<M: Message + Default>(body: &[u8], what: &str) -> Result<M, Status> {
    M::decode(body).map_err(|e| invalid(format!("malformed {what}: {e}")))
}

fn identifier(session: &SqlSession, name: &str) -> Result<Identifier, Status> {
    let name = name.trim();
    if name.is_empty() {
        return Err(invalid("the request names no table"));
    }
    if name.contains('.') {
        Identifier::parse(name).map_err(to_status)
    } else {
        Ok(Identifier::new(session.database.clone(), name))
    }
}

fn cleanup(r: CleanupReport) -> Vec<u8> {
    CleanupResult {
        snapshots: r.snapshots,
        files: r.files,
    }
    .encode_to_vec()
}

fn duration(v: &str) -> Result<i64, Status> {
    parse_duration_millis(v)
        .ok_or_else(|| invalid(format!("invalid duration '{v}' (use e.g. '1 h', '30 min')")))
}

async fn tags(table: &Table) -> Result<Vec<u8>, Status> {
    let tags = table.list_tags().await.map_err(to_status)?;
    Ok(TagList {
        tags: tags
            .into_iter()
            .map(|(name, s)| Tag {
                name,
                snapshot_id: s.id,
                time_millis: s.time_millis,
            })
            .collect(),
    }
    .encode_to_vec())
}

/// Schema, latest snapshot and per-bucket file statistics of a table.
pub async fn table_info(table: &Table) -> crate::error::Result<TableInfo> {
    let plan = table.new_scan().all_levels().plan().await?;
    let mut info = TableInfo {
        table: table.identifier().to_string(),
        schema_json: serde_json::to_string_pretty(table.schema().as_ref()).map_err(|e| {
            crate::error::InternalSnafu {
                message: format!("encoding the schema of {}: {e}", table.identifier()),
            }
            .build()
        })?,
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
        let b = BucketInfo {
            partition,
            bucket: split.bucket,
            files: split.files.len() as i64,
            sorted_runs: crate::lsm::levels::sorted_runs(&split.files).len() as i64,
            rows: split.files.iter().map(|f| f.row_count).sum(),
            bytes: split.files.iter().map(|f| f.file_size).sum(),
        };
        info.total_rows += b.rows;
        info.total_bytes += b.bytes;
        info.buckets.push(b);
    }
    Ok(info)
}

/// Runs admin action `action` (None: not an admin action); returns the result body.
pub async fn run(
    engine: &SqlEngine,
    session: &SqlSession,
    action: &str,
    body: &[u8],
) -> Option<Result<Vec<u8>, Status>> {
    let name = action.strip_prefix("tidelake.")?;
    if !ADMIN_ACTIONS.iter().any(|(a, _)| *a == action) {
        return None;
    }
    Some(run_known(engine, session, name, body).await)
}

async fn run_known(
    engine: &SqlEngine,
    session: &SqlSession,
    name: &str,
    body: &[u8],
) -> Result<Vec<u8>, Status> {
    let catalog = engine.catalog();
    let load = |table: &str| {
        let id = identifier(session, table);
        async move { catalog.load_table(&id?).await.map_err(to_status) }
    };
    match name {
        "compact" => {
            let req: CompactRequest = decode(body, "CompactRequest")?;
            let table = load(&req.table).await?;
            let mut filter = Vec::new();
            for p in &req.partitions {
                let Some((k, v)) = p.split_once('=') else {
                    return Err(invalid(format!("partition '{p}' is not key=value")));
                };
                let k = k.trim();
                let field = table
                    .schema()
                    .field(k)
                    .filter(|_| table.schema().partition_keys.iter().any(|p| p == k))
                    .ok_or_else(|| {
                        invalid(format!(
                            "'{k}' is not a partition key of table {}",
                            req.table
                        ))
                    })?;
                let value = datafusion::common::ScalarValue::Utf8(Some(v.trim().to_string()));
                let datum = crate::sql::scalar_to_datum(&value, &field.data_type)
                    .ok_or_else(|| invalid(format!("'{v}' is not a valid {}", field.data_type)))?;
                filter.push((k.to_string(), datum));
            }
            let r = table.compact(req.full, filter).await.map_err(to_status)?;
            Ok(CompactResult {
                buckets_compacted: r.buckets_compacted as i64,
                files_before: r.files_before as i64,
                files_after: r.files_after as i64,
                snapshot_id: r.snapshot_id.unwrap_or(0),
            }
            .encode_to_vec())
        }
        "expire_snapshots" => {
            let req: ExpireSnapshotsRequest = decode(body, "ExpireSnapshotsRequest")?;
            let table = load(&req.table).await?;
            let mut r = table.retention();
            if let Some(v) = req.retain_min {
                r.min_retained = v.max(1);
            }
            if let Some(v) = req.retain_max {
                r.max_retained = v.max(1);
            }
            if let Some(v) = &req.older_than {
                r.time_retained_millis = duration(v)?;
            }
            let report = table.expire_snapshots(Some(r)).await.map_err(to_status)?;
            Ok(cleanup(report))
        }
        "remove_orphan_files" => {
            let req: RemoveOrphanFilesRequest = decode(body, "RemoveOrphanFilesRequest")?;
            let table = load(&req.table).await?;
            let age = duration(req.older_than.as_deref().unwrap_or("1 d"))?;
            let report = table
                .remove_orphan_files(now_millis() - age, !req.delete)
                .await
                .map_err(to_status)?;
            Ok(cleanup(report))
        }
        "create_tag" | "delete_tag" | "list_tags" | "rollback" => {
            let req: TagRequest = decode(body, "TagRequest")?;
            let table = load(&req.table).await?;
            match name {
                "create_tag" => {
                    if req.tag.is_empty() {
                        return Err(invalid("create_tag needs a tag name"));
                    }
                    table
                        .create_tag(&req.tag, req.snapshot_id)
                        .await
                        .map_err(to_status)?;
                    tags(&table).await
                }
                "delete_tag" => Ok(cleanup(
                    table.delete_tag(&req.tag).await.map_err(to_status)?,
                )),
                "list_tags" => tags(&table).await,
                _ => {
                    let target = match (req.snapshot_id, req.tag.is_empty()) {
                        (Some(id), true) => RollbackTarget::Snapshot(id),
                        (None, false) => RollbackTarget::Tag(req.tag),
                        _ => {
                            return Err(invalid("rollback needs a snapshot id or a tag, not both"))
                        }
                    };
                    Ok(cleanup(table.rollback_to(target).await.map_err(to_status)?))
                }
            }
        }
        "alter_table" => {
            let req: AlterTableRequest = decode(body, "AlterTableRequest")?;
            let id = identifier(session, &req.table)?;
            let sql = format!("ALTER TABLE {} {}", quoted(&id), req.changes);
            engine
                .execute_update(session, &sql, &[])
                .await
                .map_err(to_status)?;
            // After a RENAME TO the old name is gone; report what the statement left.
            let table = match catalog.load_table(&id).await {
                Ok(t) => t,
                Err(_) => return Ok(TableInfo::default().encode_to_vec()),
            };
            Ok(table_info(&table).await.map_err(to_status)?.encode_to_vec())
        }
        "table_info" => {
            let req: TableInfoRequest = decode(body, "TableInfoRequest")?;
            let table = load(&req.table).await?;
            Ok(table_info(&table).await.map_err(to_status)?.encode_to_vec())
        }
        other => Err(Status::unimplemented(format!("action tidelake.{other}"))),
    }
}

/// `"db"."t"`, so names survive the SQL parser unchanged.
fn quoted(id: &Identifier) -> String {
    format!(
        "\"{}\".\"{}\"",
        id.database.replace('"', "\"\""),
        id.table.replace('"', "\"\"")
    )
}
