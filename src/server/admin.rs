//! Administrative Flight actions (`DoAction` type `tidelake.<name>`, request and result messages
//! of `proto/tidelake.proto`, generated in `tidelake_client::admin`): compaction, snapshot expiry,
//! orphan-file removal, tags, rollback, ALTER TABLE and table info. Each calls the same table
//! operations as the `CALL sys.*` procedures and the CLI.
//!
//! Long operations (compact, expire_snapshots, expire_changelogs, remove_orphan_files) run as
//! tasks registered in the caller's tenant's [`Operations`] (the registry is the tenant's, this
//! module only uses it): `tidelake.list_operations` lists them, `tidelake.cancel` or the caller
//! ending its call cancels them, and with `report_progress` the call streams their progress.
//!
//! This module owns the action messages' decoding, the role each action needs, and the running
//! of one action; the dispatcher (`super::service`) hands it every `tidelake.*` action.

use crate::error::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::sql::Any;
use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt};
use prost::Message;
use tidelake_client::admin::{
    type_url, AlterTableRequest, Branch, BranchList, BranchRequest, BucketInfo, CleanupResult,
    CompactRequest, CompactResult, ExpireChangelogsRequest, ExpireSnapshotsRequest, OperationList,
    OperationRequest, RemoveOrphanFilesRequest, TableInfo, TableInfoRequest, Tag, TagList,
    TagRequest,
};
use tonic::Status;

use super::status::{invalid, to_status};
use super::tenant::operations::{progress_message, Operations};
use crate::catalog::Identifier;
use crate::sql::{Role, SqlEngine, SqlSession};
use crate::table::maintenance::CleanupReport;
use crate::table::maintenance::{
    key_value, rollback_target, Compact, CreateTag, ExpireChangelogs, ExpireSnapshots, Outcome,
    RemoveOrphans, Request,
};
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
    ("tidelake.create_branch", "BranchRequest -> BranchList: create a branch, empty or from a tag (read and write it as <table>$branch_<name>)"),
    ("tidelake.delete_branch", "BranchRequest -> BranchList: delete branches (comma-separated)"),
    ("tidelake.fast_forward", "BranchRequest -> BranchList: make main what the branch is"),
    ("tidelake.list_branches", "BranchRequest -> BranchList: the table's branches"),
    ("tidelake.alter_table", "AlterTableRequest -> TableInfo: apply ALTER TABLE changes (SQL after 'ALTER TABLE <t>')"),
    ("tidelake.table_info", "TableInfoRequest -> TableInfo: schema, latest snapshot, files, sorted runs, rows and bytes per bucket"),
    ("tidelake.list_operations", "OperationRequest -> OperationList: the long operations running (compactions, expiries, orphan removals) and their progress"),
    ("tidelake.cancel", "OperationRequest -> OperationList: cancel a running operation by id (it stops at its next safe point and fails with CANCELLED)"),
];

/// Held by the call: when the call ends before the operation (the caller cancelled it or went
/// away), the operation is cancelled.
struct CancelOnDrop(Operation);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
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
    let op = reg.operation().clone();
    let id = reg.id().to_string();
    let guard = CancelOnDrop(op.clone());
    let task = work(op.clone());
    let handle = tokio::spawn(async move {
        let out = task.await;
        drop(reg);
        out
    });
    let joined = |r: Result<Result<Vec<u8>, Status>, tokio::task::JoinError>| {
        r.map_err(|e| {
            super::status::status(ErrorKind::Internal, format!("operation task failed: {e}"))
        })?
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

/// A `BranchList` result.
fn branch_list(list: Vec<crate::table::branch::BranchInfo>) -> Vec<u8> {
    BranchList {
        branches: list
            .into_iter()
            .map(|b| Branch {
                name: b.name,
                create_time_millis: b.create_time_millis,
            })
            .collect(),
    }
    .encode_to_vec()
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

/// A table's summary (`crate::table::maintenance::summary`) as the `TableInfo` message.
pub async fn table_info(table: &Table) -> crate::error::Result<TableInfo> {
    let s = crate::table::maintenance::summary(table).await?;
    Ok(TableInfo {
        table: s.table,
        schema_json: s.schema_json,
        schema_id: s.schema_id,
        latest_snapshot_id: s.latest_snapshot_id,
        buckets: s
            .buckets
            .into_iter()
            .map(|b| BucketInfo {
                partition: b.partition,
                bucket: b.bucket,
                files: b.files,
                sorted_runs: b.sorted_runs,
                rows: b.rows,
                bytes: b.bytes,
            })
            .collect(),
        total_rows: s.total_rows,
        total_bytes: s.total_bytes,
    })
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
        "table_info" | "list_tags" | "list_branches" | "list_operations" => Role::Reader,
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
            let info = caller
                .operations
                .cancel(&req.operation_id)
                .map_err(to_status)?;
            Ok(one(OperationList {
                operations: vec![info],
            }
            .encode_to_vec()))
        }),
        _ => run_known(engine, caller.session, name, body).await.map(one),
    })
}

/// A long action's request, as the maintenance core's [`Request`]: the table it names, whether
/// the caller wants progress, and the request.
fn long_request(name: &str, body: &[u8]) -> Result<(String, bool, Request), Status> {
    Ok(match name {
        "compact" => {
            let req: CompactRequest = decode(body, "CompactRequest")?;
            let partitions = req
                .partitions
                .iter()
                .map(|p| key_value(p, "partition"))
                .collect::<crate::error::Result<_>>()
                .map_err(to_status)?;
            let compact = Compact {
                full: req.full,
                partitions,
            };
            (req.table, req.report_progress, Request::Compact(compact))
        }
        "expire_snapshots" => {
            let req: ExpireSnapshotsRequest = decode(body, "ExpireSnapshotsRequest")?;
            let expire = ExpireSnapshots {
                retain_max: req.retain_max,
                retain_min: req.retain_min,
                older_than: req.older_than,
                max_deletes: None,
            };
            (
                req.table,
                req.report_progress,
                Request::ExpireSnapshots(expire),
            )
        }
        "expire_changelogs" => {
            let req: ExpireChangelogsRequest = decode(body, "ExpireChangelogsRequest")?;
            let expire = ExpireChangelogs {
                retain_max: req.retain_max,
                retain_min: req.retain_min,
                older_than: req.older_than,
                max_deletes: req.max_deletes,
                delete_all: req.delete_all,
            };
            (
                req.table,
                req.report_progress,
                Request::ExpireChangelogs(expire),
            )
        }
        _ => {
            let req: RemoveOrphanFilesRequest = decode(body, "RemoveOrphanFilesRequest")?;
            let remove = RemoveOrphans {
                older_than: req.older_than,
                dry_run: !req.delete,
            };
            (
                req.table,
                req.report_progress,
                Request::RemoveOrphans(remove),
            )
        }
    })
}

/// Compaction, expiry and orphan removal: registered, cancellable, optionally reporting progress.
async fn run_long(
    engine: &SqlEngine,
    caller: &Caller<'_>,
    name: &str,
    body: &[u8],
) -> Result<ResultStream, Status> {
    let (table_name, report, request) = long_request(name, body)?;
    request.validate().map_err(to_status)?;
    let id = identifier(caller.session, &table_name)?;
    let table = engine.catalog().load_table(&id).await.map_err(to_status)?;
    let result = match request {
        Request::Compact(_) => "CompactResult",
        _ => "CleanupResult",
    };
    let t = table.clone();
    let work: Work = Box::new(move |op: Operation| -> Task {
        Box::pin(async move {
            match request.run(&t, &op).await.map_err(to_status)? {
                Outcome::Compacted(r) => Ok(CompactResult {
                    buckets_compacted: r.buckets_compacted as i64,
                    files_before: r.files_before as i64,
                    files_after: r.files_after as i64,
                    snapshot_id: r.snapshot_id.unwrap_or(0),
                }
                .encode_to_vec()),
                other => Ok(cleanup(other.cleanup())),
            }
        })
    });
    long_operation(
        caller,
        &format!("tidelake.{name}"),
        &table,
        report,
        result,
        work,
    )
    .await
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
            let request = match name {
                "list_tags" => return tags(&table).await,
                "create_tag" => Request::CreateTag(CreateTag {
                    name: req.tag,
                    snapshot_id: req.snapshot_id,
                }),
                "delete_tag" => Request::DeleteTag { name: req.tag },
                _ => Request::Rollback(
                    rollback_target(req.snapshot_id, Some(req.tag)).map_err(to_status)?,
                ),
            };
            let outcome = request
                .run(&table, &Operation::new())
                .await
                .map_err(to_status)?;
            match outcome {
                Outcome::Tagged(_) => tags(&table).await,
                other => Ok(cleanup(other.cleanup())),
            }
        }
        "create_branch" | "delete_branch" | "fast_forward" | "list_branches" => {
            let req: BranchRequest = decode(body, "BranchRequest")?;
            let table = load(&req.table).await?;
            let request = match name {
                "list_branches" => {
                    let list = table.branches().await.map_err(to_status)?;
                    return Ok(branch_list(list));
                }
                "create_branch" => Request::CreateBranch {
                    name: req.branch,
                    from_tag: req.from_tag.filter(|t| !t.trim().is_empty()),
                },
                "delete_branch" => Request::DeleteBranches {
                    names: req
                        .branch
                        .split(',')
                        .map(|b| b.trim().to_string())
                        .filter(|b| !b.is_empty())
                        .collect(),
                },
                _ => Request::FastForward { name: req.branch },
            };
            match request.run(&table, &Operation::new()).await {
                Ok(Outcome::Branches(list)) => Ok(branch_list(list)),
                Ok(_) => Ok(branch_list(table.branches().await.map_err(to_status)?)),
                Err(e) => Err(to_status(e)),
            }
        }
        "alter_table" => {
            let req: AlterTableRequest = decode(body, "AlterTableRequest")?;
            let id = identifier(session, &req.table)?;
            let altered = engine
                .alter_table_with(session, &id, &req.changes)
                .await
                .map_err(to_status)?;
            // After a RENAME TO the old name is gone; report the table under its new name.
            Ok(table_info(&altered)
                .await
                .map_err(to_status)?
                .encode_to_vec())
        }
        "table_info" => {
            let req: TableInfoRequest = decode(body, "TableInfoRequest")?;
            let table = load(&req.table).await?;
            Ok(table_info(&table).await.map_err(to_status)?.encode_to_vec())
        }
        other => Err(super::status::status(
            ErrorKind::Unsupported,
            format!("action tidelake.{other}"),
        )),
    }
}
