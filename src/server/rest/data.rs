//! What a Paimon client needs to work on a table's files itself: data credentials for an
//! `s3://` warehouse (`GET …/token`, from [`DataTokens`]) and the table's partitions with their
//! statistics (`GET …/partitions`, folded from the latest snapshot's manifests).

use std::collections::BTreeMap;

use serde_json::json;

use super::wire::{location, ok, page, Query};
use super::RestError;
use crate::catalog::Catalog;
use crate::error::ErrorKind;
use crate::io::sts::{session_name, Access, DataTokens};
use crate::server::auth::Principal;
use crate::sql::Role;
use crate::table::Table;

/// `GET …/token`: keys for the table's prefix only, read-only unless the principal may write.
pub(super) async fn token(
    tokens: Option<&DataTokens>,
    principal: &Principal,
    catalog: &Catalog,
    table: &Table,
) -> Result<axum::response::Response, RestError> {
    let Some(tokens) = tokens else {
        return Err(RestError::new(
            ErrorKind::Unsupported,
            format!(
                "table '{}': this catalog hands out no data credentials ([rest] data_token_role_arn is not set); use the storage's own credentials",
                table.identifier()
            ),
        ));
    };
    let access = if principal.role >= Role::Writer {
        Access::Write
    } else {
        Access::Read
    };
    let uri = location(catalog, table.path());
    let session = session_name(&principal.tenant.name, &principal.subject);
    let (options, expires_at_millis) = tokens.issue(&uri, access, &session).await?;
    ok(json!({"token": options, "expiresAtMillis": expires_at_millis}))
}

/// One partition's statistics, as Paimon's `Partition` names them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct PartitionStats {
    pub(super) spec: Vec<(String, String)>,
    pub(super) record_count: i64,
    pub(super) file_size_in_bytes: i64,
    pub(super) file_count: i64,
    pub(super) last_file_creation_time: i64,
    pub(super) buckets: std::collections::BTreeSet<i32>,
}

/// The partition's name for listing and patterns: `k1=v1/k2=v2`.
fn partition_name(spec: &[(String, String)]) -> String {
    spec.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("/")
}

/// Folds live files (`(spec, rows, bytes, created millis, bucket)`) into per-partition
/// statistics, keyed by partition name. Pure, so it is tested.
pub(super) fn fold_partitions(
    files: impl IntoIterator<Item = (Vec<(String, String)>, i64, i64, Option<i64>, i32)>,
) -> BTreeMap<String, PartitionStats> {
    let mut out: BTreeMap<String, PartitionStats> = BTreeMap::new();
    for (spec, rows, bytes, created, bucket) in files {
        let stats = out.entry(partition_name(&spec)).or_default();
        stats.record_count += rows;
        stats.file_size_in_bytes += bytes;
        stats.file_count += 1;
        stats.last_file_creation_time = stats.last_file_creation_time.max(created.unwrap_or(0));
        stats.buckets.insert(bucket);
        if stats.spec.is_empty() {
            stats.spec = spec;
        }
    }
    out
}

/// `GET …/partitions`: the latest snapshot's partitions (paged by name, `partitionNamePattern`
/// matched against `k=v/…`). An unpartitioned table has none.
pub(super) async fn partitions(
    table: &Table,
    q: &Query,
) -> Result<axum::response::Response, RestError> {
    let snapshot = table.snapshot_manager().latest().await?;
    let entries = match &snapshot {
        Some(s) if !table.schema().partition_keys.is_empty() => {
            table.manifest_manager().live_entries(s).await?
        }
        _ => vec![],
    };
    let mut files = Vec::with_capacity(entries.len());
    for e in &entries {
        files.push((
            table.partition_spec(&e.partition)?,
            e.file.row_count,
            e.file.file_size,
            e.file.creation_time,
            e.bucket,
        ));
    }
    let mut folded = fold_partitions(files);
    let names: Vec<String> = folded.keys().cloned().collect();
    let (names, next) = page(
        names,
        q.get("partitionNamePattern"),
        q.get("pageToken"),
        q.max_results()?,
    );
    let listed: Vec<serde_json::Value> = names
        .iter()
        .filter_map(|n| folded.remove(n))
        .map(|p| {
            let spec: BTreeMap<String, String> = p.spec.into_iter().collect();
            json!({
                "spec": spec,
                "recordCount": p.record_count,
                "fileSizeInBytes": p.file_size_in_bytes,
                "fileCount": p.file_count,
                "lastFileCreationTime": p.last_file_creation_time,
                "totalBuckets": p.buckets.len(),
                "done": false,
            })
        })
        .collect();
    ok(json!({"partitions": listed, "nextPageToken": next}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dt: &str, h: &str) -> Vec<(String, String)> {
        vec![("dt".into(), dt.into()), ("h".into(), h.into())]
    }

    #[test]
    fn files_fold_into_their_partitions() {
        let folded = fold_partitions([
            (spec("2024-01-01", "1"), 10, 100, Some(5), 0),
            (spec("2024-01-01", "1"), 5, 50, Some(9), 1),
            (spec("2024-01-01", "1"), 1, 1, None, 1),
            (spec("2024-01-02", "0"), 7, 70, Some(3), 0),
        ]);
        assert_eq!(
            folded.keys().collect::<Vec<_>>(),
            ["dt=2024-01-01/h=1", "dt=2024-01-02/h=0"]
        );
        let first = &folded["dt=2024-01-01/h=1"];
        assert_eq!(
            (
                first.record_count,
                first.file_size_in_bytes,
                first.file_count,
                first.last_file_creation_time,
                first.buckets.len()
            ),
            (16, 151, 3, 9, 2)
        );
        assert_eq!(first.spec, spec("2024-01-01", "1"));
        assert!(fold_partitions(Vec::new()).is_empty());
    }
}
