//! Administrative Flight actions (`DoAction` type `tidelake.<name>`, request and result messages
//! of `proto/tidelake.proto`, declared in `tidelake_client::admin`): compaction, snapshot expiry,
//! orphan-file removal, tags, rollback, ALTER TABLE and table info. Each calls the same table
//! operations as the `CALL sys.*` procedures and the CLI.
//!
//! Long operations (compact, expire_snapshots, remove_orphan_files) run as tasks registered in
//! [`Operations`]: `tidelake.list_operations` lists them, `tidelake.cancel` or the caller ending
//! its call cancels them, and with `report_progress` the call streams their progress.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_flight::sql::Any;
use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt};
use prost::Message;
use tidelake_client::admin::{
    type_url, AlterTableRequest, BucketInfo, CleanupResult, CompactRequest, CompactResult,
    ExpireChangelogsRequest, ExpireSnapshotsRequest, OperationInfo, OperationList,
    OperationProgress, OperationRequest, RemoveOrphanFilesRequest, TableInfo, TableInfoRequest,
    Tag, TagList, TagRequest,
};
use tonic::Status;

use super::status::{invalid, to_status};
use crate::catalog::{now_millis, Identifier};
use crate::sql::{Role, SqlEngine, SqlSession};
use crate::table::changelog_lifecycle::ChangelogExpiry;
use crate::table::lifecycle::{parse_duration_millis, CleanupReport, RollbackTarget};
use crate::table::progress::{Operation, Progress};
use crate::table::Table;

/// The results of one action call.
pub type ResultStream = BoxStream<'static, Result<arrow_flight::Result, Status>>;

/// How often a progress-reporting call looks for news.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The actions (name, description) ListActions reports.
pub const ADMIN_ACTIONS: &[(&str, &str)] = &[
    ("tidelake.compact", "CompactRequest -> CompactResult: compact a table's buckets (full: everything into the max level)"),
    ("tidelake.expire_snapshots", "ExpireSnapshotsRequest -> CleanupResult: expire snapshots by count and age"),
    ("tidelake.expire_changelogs", "ExpireChangelogsRequest -> CleanupResult: expire long-lived changelogs (decoupled changelog lifecycle) by count and age, or all"),
    ("tidelake.remove_orphan_files", "RemoveOrphanFilesRequest -> CleanupResult: list (or, with delete, remove) files no snapshot or tag uses"),
    ("tidelake.create_tag", "TagRequest -> TagList: tag a snapshot (default: the latest)"),
    ("tidelake.delete_tag", "TagRequest -> CleanupResult: delete a tag and the files only it kept"),
    ("tidelake.list_tags", "TagRequest -> TagList: the table's tags"),
    ("tidelake.rollback", "TagRequest -> CleanupResult: roll the table back to a snapshot or tag"),
    ("tidelake.alter_table", "AlterTableRequest -> TableInfo: apply ALTER TABLE changes (SQL after 'ALTER TABLE <t>')"),
    ("tidelake.table_info", "TableInfoRequest -> TableInfo: schema, latest snapshot, files, sorted runs, rows and bytes per bucket"),
    ("tidelake.list_operations", "OperationRequest -> OperationList: the long operations running (compactions, expiries, orphan removals) and their progress"),
    ("tidelake.cancel", "OperationRequest -> OperationList: cancel a running operation by id (it stops at its next safe point and fails with CANCELLED)"),
];

/// One registered operation.
#[derive(Debug)]
struct Running {
    info: OperationInfo,
    op: Operation,
}

/// The long operations this server runs, by id.
#[derive(Debug, Default)]
pub struct Operations {
    running: Mutex<HashMap<String, Running>>,
}

/// An operation's place in [`Operations`], held by its task: the operation stays listed until
/// it has stopped.
struct Registration {
    ops: Arc<Operations>,
    id: String,
    op: Operation,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.ops.lock().remove(&self.id);
    }
}

/// Held by the call: when the call ends before the operation (the caller cancelled it or went
/// away), the operation is cancelled.
struct CancelOnDrop(Operation);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn progress_message(id: &str, p: &Progress) -> OperationProgress {
    OperationProgress {
        operation_id: id.to_string(),
        phase: p.phase.clone(),
        done: p.done as i64,
        total: p.total as i64,
        files: p.files as i64,
        bytes: p.bytes as i64,
    }
}

impl Operations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(self: &Arc<Self>, action: &str, table: &Table, user: &str) -> Registration {
        let id = uuid::Uuid::new_v4().to_string();
        let op = Operation::new();
        op.report_phase("starting");
        let info = OperationInfo {
            operation_id: id.clone(),
            action: action.to_string(),
            table: table.identifier().to_string(),
            user: user.to_string(),
            started_millis: now_millis(),
            ..Default::default()
        };
        self.lock().insert(
            id.clone(),
            Running {
                info,
                op: op.clone(),
            },
        );
        Registration {
            ops: Arc::clone(self),
            id,
            op,
        }
    }

    fn info(r: &Running) -> OperationInfo {
        OperationInfo {
            progress: Some(progress_message(&r.info.operation_id, &r.op.progress())),
            cancelling: r.op.is_cancelled(),
            ..r.info.clone()
        }
    }

    /// The running operations, oldest first.
    pub fn list(&self) -> OperationList {
        let mut operations: Vec<_> = self.lock().values().map(Self::info).collect();
        operations.sort_by(|a, b| {
            (a.started_millis, &a.operation_id).cmp(&(b.started_millis, &b.operation_id))
        });
        OperationList { operations }
    }

    /// Cancels operation `id`; its description, or NotFound.
    pub fn cancel(&self, id: &str) -> Result<OperationInfo, Status> {
        let running = self.lock();
        let r = running.get(id).ok_or_else(|| {
            Status::not_found(format!(
                "no running operation '{id}' (it may have finished)"
            ))
        })?;
        r.op.cancel();
        Ok(Self::info(r))
    }
}

/// `message` as the body of a progress-reporting call: an `Any`.
fn any_body(name: &str, message: &impl Message) -> arrow_flight::Result {
    arrow_flight::Result {
        body: Any {
            type_url: type_url(name),
            value: message.encode_to_vec().into(),
        }
        .encode_to_vec()
        .into(),
    }
}

/// A long operation's running body, and the body given its [`Operation`].
type Task = BoxFuture<'static, Result<Vec<u8>, Status>>;
type Work = Box<dyn FnOnce(Operation) -> Task + Send>;

/// Runs `work` as a registered operation: its one result, or (with `report`) its progress then
/// its result, `Any`-wrapped with `result_name`.
async fn long_operation(
    caller: &Caller<'_>,
    action: &str,
    table: &Table,
    report: bool,
    result_name: &'static str,
    work: Work,
) -> Result<ResultStream, Status> {
    let reg = caller.operations.register(action, table, caller.user);
    let op = reg.op.clone();
    let id = reg.id.clone();
    let guard = CancelOnDrop(op.clone());
    let task = work(op.clone());
    let handle = tokio::spawn(async move {
        let out = task.await;
        drop(reg);
        out
    });
    let joined = |r: Result<Result<Vec<u8>, Status>, tokio::task::JoinError>| {
        r.map_err(|e| Status::internal(format!("operation task failed: {e}")))?
    };
    if !report {
        // Awaited here: if the caller goes away this future is dropped, and `reg` with it.
        let body = joined(handle.await)?;
        drop(guard);
        return Ok(stream::iter([Ok(arrow_flight::Result { body: body.into() })]).boxed());
    }
    struct State {
        guard: CancelOnDrop,
        id: String,
        handle: Option<tokio::task::JoinHandle<Result<Vec<u8>, Status>>>,
        last: Option<Progress>,
    }
    let state = State {
        guard,
        id,
        handle: Some(handle),
        last: None,
    };
    Ok(stream::unfold(state, move |mut st| async move {
        let mut handle = st.handle.take()?;
        let progress = |st: &mut State| {
            let p = st.guard.0.progress();
            let changed = st.last.as_ref() != Some(&p);
            st.last = Some(p.clone());
            changed.then(|| Ok(any_body("OperationProgress", &progress_message(&st.id, &p))))
        };
        if st.last.is_none() {
            // The first message names the operation at once.
            let first = progress(&mut st);
            st.handle = Some(handle);
            return Some((stream::iter(first.into_iter().collect::<Vec<_>>()), st));
        }
        let items = tokio::select! {
            r = &mut handle => {
                let mut items: Vec<_> = progress(&mut st).into_iter().collect();
                items.push(joined(r).map(|body| arrow_flight::Result {
                    body: Any { type_url: type_url(result_name), value: body.into() }
                        .encode_to_vec()
                        .into(),
                }));
                items
            }
            _ = tokio::time::sleep(PROGRESS_INTERVAL) => {
                st.handle = Some(handle);
                progress(&mut st).into_iter().collect()
            }
        };
        Some((stream::iter(items), st))
    })
    .flatten()
    .boxed())
}

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

/// Who asks, and where operations are registered.
#[derive(Debug)]
pub struct Caller<'a> {
    pub session: &'a SqlSession,
    pub user: &'a str,
    pub operations: &'a Arc<Operations>,
}

/// Runs admin action `action` (None: not an admin action); returns its results.
pub async fn run(
    engine: &SqlEngine,
    caller: &Caller<'_>,
    action: &str,
    body: &[u8],
) -> Option<Result<ResultStream, Status>> {
    let name = action.strip_prefix("tidelake.")?;
    if !ADMIN_ACTIONS.iter().any(|(a, _)| *a == action) {
        return None;
    }
    // Reading is for every user; changing something is for admins.
    let needed = match name {
        "table_info" | "list_tags" | "list_operations" => Role::Reader,
        _ => Role::Admin,
    };
    if let Err(e) = caller.session.role.require(needed, action) {
        return Some(Err(to_status(e)));
    }
    let one = |body: Vec<u8>| -> ResultStream {
        stream::iter([Ok(arrow_flight::Result { body: body.into() })]).boxed()
    };
    Some(match name {
        "compact" | "expire_snapshots" | "expire_changelogs" | "remove_orphan_files" => {
            run_long(engine, caller, name, body).await
        }
        "list_operations" => decode::<OperationRequest>(body, "OperationRequest")
            .map(|_| one(caller.operations.list().encode_to_vec())),
        "cancel" => decode::<OperationRequest>(body, "OperationRequest").and_then(|req| {
            if req.operation_id.is_empty() {
                return Err(invalid("cancel needs an operation_id"));
            }
            let info = caller.operations.cancel(&req.operation_id)?;
            Ok(one(OperationList {
                operations: vec![info],
            }
            .encode_to_vec()))
        }),
        _ => run_known(engine, caller.session, name, body).await.map(one),
    })
}

/// Compaction, expiry and orphan removal: registered, cancellable, optionally reporting progress.
async fn run_long(
    engine: &SqlEngine,
    caller: &Caller<'_>,
    name: &str,
    body: &[u8],
) -> Result<ResultStream, Status> {
    let catalog = engine.catalog();
    let load = |table: &str| {
        let id = identifier(caller.session, table);
        async move { catalog.load_table(&id?).await.map_err(to_status) }
    };
    let action = format!("tidelake.{name}");
    // Each arm loads its table and packs the work; one call below runs it.
    let (table, report, result, work): (Table, bool, &'static str, Work) = match name {
        "compact" => {
            let req: CompactRequest = decode(body, "CompactRequest")?;
            let table = load(&req.table).await?;
            let filter = partition_filter(&table, &req)?;
            let (t, full) = (table.clone(), req.full);
            let work: Work = Box::new(move |op: Operation| -> Task {
                Box::pin(async move {
                    let r = t.compact_with(full, filter, &op).await.map_err(to_status)?;
                    Ok(CompactResult {
                        buckets_compacted: r.buckets_compacted as i64,
                        files_before: r.files_before as i64,
                        files_after: r.files_after as i64,
                        snapshot_id: r.snapshot_id.unwrap_or(0),
                    }
                    .encode_to_vec())
                })
            });
            (table, req.report_progress, "CompactResult", work)
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
            let t = table.clone();
            let work: Work = Box::new(move |op: Operation| -> Task {
                Box::pin(async move {
                    let report = t.expire_snapshots_with(Some(r), &op).await;
                    Ok(cleanup(report.map_err(to_status)?))
                })
            });
            (table, req.report_progress, "CleanupResult", work)
        }
        "expire_changelogs" => {
            let req: ExpireChangelogsRequest = decode(body, "ExpireChangelogsRequest")?;
            let table = load(&req.table).await?;
            let older_than = req.older_than.as_deref().map(duration).transpose()?;
            let expiry = ChangelogExpiry::from_arguments(
                req.retain_max,
                req.retain_min,
                older_than,
                req.max_deletes,
                req.delete_all,
            );
            let t = table.clone();
            let work: Work = Box::new(move |op: Operation| -> Task {
                Box::pin(async move {
                    let report = t.expire_changelogs_with(expiry, &op).await;
                    Ok(cleanup(report.map_err(to_status)?))
                })
            });
            (table, req.report_progress, "CleanupResult", work)
        }
        _ => {
            let req: RemoveOrphanFilesRequest = decode(body, "RemoveOrphanFilesRequest")?;
            let table = load(&req.table).await?;
            let older_than = now_millis() - duration(req.older_than.as_deref().unwrap_or("1 d"))?;
            let (t, dry_run) = (table.clone(), !req.delete);
            let work: Work = Box::new(move |op: Operation| -> Task {
                Box::pin(async move {
                    let report = t.remove_orphan_files_with(older_than, dry_run, &op).await;
                    Ok(cleanup(report.map_err(to_status)?))
                })
            });
            (table, req.report_progress, "CleanupResult", work)
        }
    };
    long_operation(caller, &action, &table, report, result, work).await
}

/// A compact request's `key=value` partitions as a partition filter of `table`.
fn partition_filter(
    table: &Table,
    req: &CompactRequest,
) -> Result<Vec<(String, crate::spec::binary_row::Datum)>, Status> {
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
    Ok(filter)
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
