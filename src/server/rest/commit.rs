//! Snapshots and commits of the REST catalog: `GET …/snapshot` answers the latest snapshot file,
//! `POST …/commit` stores a snapshot a client wrote the files of, once it is validated, through
//! the commit module's one publish (`crate::table::commit::publish_written`: the same
//! write-if-absent, read-back and after-publish effects as Flight's commits).

use axum::response::Response;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

use super::tables::{created_at, table_id};
use super::wire::{ok, parse_body};
use super::RestError;
use crate::catalog::Catalog;
use crate::error::ErrorKind;
use crate::spec::Snapshot;
use crate::table::Table;

/// `GET …/snapshot`: the latest snapshot as its file has it, or 404 `SNAPSHOT` before the first
/// commit.
pub(super) async fn latest_snapshot(table: &Table) -> Result<Response, RestError> {
    let sm = table.snapshot_manager();
    let Some(latest) = sm.latest().await? else {
        return Err(RestError::new(
            ErrorKind::NotFound,
            format!("table '{}' has no snapshot yet", table.identifier()),
        )
        .about("SNAPSHOT", table.identifier().to_string()));
    };
    let path = sm.snapshot_path(latest.id);
    let raw = table.io().read(&path).await?;
    let snapshot: Value = serde_json::from_slice(&raw).map_err(|e| {
        RestError::new(
            ErrorKind::Internal,
            format!("table '{}': {path}: {e}", table.identifier()),
        )
    })?;
    // The live files' statistics (the folded manifests are cached per snapshot).
    let files = table.manifest_manager().live_entries(&latest).await?;
    let bytes: i64 = files.iter().map(|e| e.file.file_size).sum();
    let last_file = files
        .iter()
        .filter_map(|e| e.file.creation_time)
        .max()
        .unwrap_or(latest.time_millis);
    ok(json!({
        "snapshot": {
            "snapshot": snapshot,
            "recordCount": latest.total_record_count.unwrap_or(0),
            "fileSizeInBytes": bytes,
            "fileCount": files.len(),
            "lastFileCreationTime": last_file,
        }
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitRequest {
    #[serde(default)]
    table_id: Option<String>,
    #[serde(default)]
    base_snapshot_uuid: Option<String>,
    snapshot: Value,
}

/// Why a client's snapshot cannot be stored as sent (`None`: it can), given the table's latest
/// snapshot (whose uuid the client based it on) and which of its files exist.
pub(crate) fn invalid_snapshot(
    snapshot: &Snapshot,
    latest: Option<&Snapshot>,
    schema_known: bool,
    missing_files: &[String],
) -> Option<String> {
    let expected = latest.map_or(1, |l| l.id + 1);
    if snapshot.id != expected {
        return Some(format!(
            "snapshot {} does not follow the latest snapshot (the next id is {expected})",
            snapshot.id
        ));
    }
    if !schema_known {
        return Some(format!(
            "snapshot {} names schema {}, which the table does not have",
            snapshot.id, snapshot.schema_id
        ));
    }
    if !missing_files.is_empty() {
        return Some(format!(
            "snapshot {} names manifest files that do not exist: {}",
            snapshot.id,
            missing_files.join(", ")
        ));
    }
    None
}

/// `POST …/commit`: stores the client's snapshot as sent, once it is the next one after the
/// snapshot it was based on; a lost race (another committer, Flight's included, took the id or
/// moved the table on) is `success: false`, and the client retries on the new latest.
pub(super) async fn commit(
    catalog: &Catalog,
    table: &Table,
    body: &[u8],
) -> Result<Response, RestError> {
    let req: CommitRequest = parse_body(body)?;
    let name = table.identifier().to_string();
    if let Some(id) = &req.table_id {
        if *id != table_id(catalog, table, created_at(table).await) {
            return Err(RestError::new(
                ErrorKind::NotFound,
                format!("table '{name}' was dropped and created again since the client loaded it (table id {id})"),
            )
            .about("TABLE", name));
        }
    }
    let snapshot: Snapshot = serde_json::from_value(req.snapshot.clone()).map_err(|e| {
        RestError::new(
            ErrorKind::InvalidArgument,
            format!("table '{name}': malformed snapshot: {e}"),
        )
    })?;
    let sm = table.snapshot_manager();
    let latest = sm.latest().await?;
    if latest.as_ref().and_then(|l| l.uuid.as_deref()) != req.base_snapshot_uuid.as_deref() {
        return ok(json!({"success": false}));
    }
    let schema_known = table
        .schema_manager()
        .list_ids()
        .await?
        .contains(&snapshot.schema_id);
    let mm = table.manifest_manager();
    let mut missing = Vec::new();
    let lists = [
        Some(&snapshot.base_manifest_list),
        Some(&snapshot.delta_manifest_list),
        snapshot.changelog_manifest_list.as_ref(),
        snapshot.index_manifest.as_ref(),
    ];
    for file in lists.into_iter().flatten() {
        if !crate::spec::identifier::is_path_safe(file)
            || !table.io().exists(&mm.path(file)).await?
        {
            missing.push(file.clone());
        }
    }
    if let Some(why) = invalid_snapshot(&snapshot, latest.as_ref(), schema_known, &missing) {
        return Err(RestError::new(
            ErrorKind::InvalidArgument,
            format!("table '{name}': {why}"),
        ));
    }
    let json = serde_json::to_vec_pretty(&req.snapshot)
        .map_err(|e| RestError::new(ErrorKind::Internal, format!("table '{name}': {e}")))?;
    if !crate::table::commit::publish_written(table, &snapshot, Bytes::from(json)).await? {
        return ok(json!({"success": false}));
    }
    tracing::info!(table = %name, snapshot = snapshot.id, "committed through the REST catalog");
    ok(json!({"success": true}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_stored_only_as_the_next_with_its_files() {
        let snap = |id: i64| -> Snapshot {
            serde_json::from_value(json!({
                "version": 3, "id": id, "schemaId": 0, "baseManifestList": "b",
                "deltaManifestList": "d", "commitUser": "u", "commitIdentifier": 1,
                "commitKind": "APPEND", "timeMillis": 1
            }))
            .unwrap()
        };
        assert_eq!(invalid_snapshot(&snap(1), None, true, &[]), None);
        assert_eq!(invalid_snapshot(&snap(3), Some(&snap(2)), true, &[]), None);
        assert!(invalid_snapshot(&snap(2), None, true, &[])
            .unwrap()
            .contains("next id is 1"));
        assert!(invalid_snapshot(&snap(5), Some(&snap(2)), true, &[]).is_some());
        assert!(invalid_snapshot(&snap(1), None, false, &[])
            .unwrap()
            .contains("schema 0"));
        assert!(invalid_snapshot(&snap(1), None, true, &["b".into()])
            .unwrap()
            .contains("do not exist: b"));
    }
}
