//! Committing: turning commit messages into a new snapshot, exactly once, against concurrent
//! committers.
//!
//! ```text
//!  messages ──► read latest snapshot N ──► already committed? ──yes──► done (its id)
//!                    ▲                           │ no
//!                    │                           ▼
//!                    │            delta entries (ADD new files; DELETE overwritten ones)
//!                    │            delta manifest + list, base list = N's base + delta
//!                    │                           ▼
//!                    │              create snapshot-(N+1) if absent
//!                    │           ┌───────────────┼────────────────────┐
//!                    │        created        exists (lost race)    error (ambiguous)
//!                    │           ▼               │                    ▼
//!                    │     LATEST hint           │         read snapshot-(N+1) back: ours?
//!                    │       done                │            yes ─► done, no ─► retry
//!                    └──── backoff, retry ◄──────┘
//! ```
//!
//! Exactly-once: a commit with an explicit identifier is skipped when the newest snapshot of the
//! same commit user already carries an identifier at least as large (Paimon's `filterCommitted`).
//! The retry decision reads [`crate::error::Error::is_retryable`] and lives only here.

use std::collections::HashSet;
use std::time::Duration;

use super::write::CommitMessage;
use super::Table;
use crate::error::{ConflictSnafu, ErrorKind, Result};
use crate::manifest::FileNamer;
use crate::spec::binary_row::{self, Datum};
use crate::spec::manifest::{FileIdentifier, FileKind, ManifestEntry, ManifestFileMeta};
use crate::spec::snapshot::{BATCH_COMMIT_IDENTIFIER, SNAPSHOT_VERSION};
use crate::spec::DataFileMeta;
use crate::spec::{CommitKind, Snapshot};

/// Manifests at which the base manifest list is compacted into one manifest
/// (Paimon's `manifest.merge-min-count`).
const MANIFEST_MERGE_MIN_COUNT: usize = 30;

/// What an overwrite replaces.
#[derive(Debug, Clone, PartialEq)]
pub enum Overwrite {
    /// Every file of the table.
    Table,
    /// Files of partitions whose values equal these (a subset of partition keys may be given).
    Partitions(Vec<(String, Datum)>),
}

/// How a commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// A new snapshot with this id holds the commit.
    Committed(i64),
    /// The same (commit user, identifier) was committed before, in this snapshot or earlier.
    AlreadyCommitted(i64),
    /// Nothing to commit (no files and no overwrite).
    Empty,
}

impl CommitOutcome {
    pub fn snapshot_id(&self) -> Option<i64> {
        match self {
            CommitOutcome::Committed(id) | CommitOutcome::AlreadyCommitted(id) => Some(*id),
            CommitOutcome::Empty => None,
        }
    }
}

/// Commits for one commit user. Cheap; create one per writer session.
#[derive(Debug)]
pub struct TableCommit {
    table: Table,
    commit_user: String,
    namer: FileNamer,
    max_retries: u32,
}

impl TableCommit {
    pub(crate) fn new(table: Table, commit_user: String) -> Self {
        // An invalid schema fails the commit itself (it needs the layout); the default is moot then.
        let max_retries = table.table_options().map_or(10, |o| o.commit_max_retries);
        Self {
            table,
            commit_user,
            namer: FileNamer::default(),
            max_retries,
        }
    }

    pub fn commit_user(&self) -> &str {
        &self.commit_user
    }

    /// Commits `messages` as one APPEND (or OVERWRITE) snapshot. Returns after the snapshot file is
    /// durable. `identifier` must grow per commit user; batch jobs pass [`BATCH_COMMIT_IDENTIFIER`].
    pub async fn commit(
        &self,
        messages: Vec<CommitMessage>,
        identifier: i64,
        overwrite: Option<Overwrite>,
    ) -> Result<CommitOutcome> {
        let entries = |files: fn(&CommitMessage) -> &Vec<DataFileMeta>,
                       kind: FileKind|
         -> Vec<ManifestEntry> {
            messages
                .iter()
                .flat_map(|m| {
                    files(m).iter().map(move |f| ManifestEntry {
                        kind,
                        partition: m.partition.clone(),
                        bucket: m.bucket,
                        total_buckets: m.total_buckets,
                        file: f.clone(),
                    })
                })
                .collect()
        };
        let adds = entries(|m| &m.new_files, FileKind::Add);
        let changelog = entries(|m| &m.changelog_files, FileKind::Add);
        let compact_changelog = entries(|m| &m.compact_changelog, FileKind::Add);
        let mut compaction = entries(|m| &m.compact_before, FileKind::Delete);
        compaction.extend(entries(|m| &m.compact_after, FileKind::Add));
        if adds.is_empty() && overwrite.is_none() && compaction.is_empty() {
            return Ok(CommitOutcome::Empty);
        }
        if identifier != BATCH_COMMIT_IDENTIFIER {
            let latest = self.table.snapshot_manager().latest().await?;
            if let Some(id) = self.find_committed(latest.as_ref(), identifier).await? {
                return Ok(CommitOutcome::AlreadyCommitted(id));
            }
        }
        // At most two snapshots per commit: the new data (APPEND or OVERWRITE), then the
        // compaction (COMPACT), both with the same identifier.
        let mut outcome = CommitOutcome::Empty;
        if !adds.is_empty() || overwrite.is_some() {
            let kind = if overwrite.is_some() {
                CommitKind::Overwrite
            } else {
                CommitKind::Append
            };
            outcome = self
                .try_commit(kind, adds, changelog, overwrite.as_ref(), identifier)
                .await?;
        }
        if !compaction.is_empty() {
            outcome = match self
                .try_commit(
                    CommitKind::Compact,
                    compaction,
                    compact_changelog,
                    None,
                    identifier,
                )
                .await
            {
                Ok(o) => o,
                // The new data is committed; a compaction that lost to a concurrent one is only
                // work to redo later. Its files were never published.
                Err(e) if outcome != CommitOutcome::Empty && e.kind() == ErrorKind::Conflict => {
                    tracing::warn!(table = %self.table.identifier(), error = %e, "compaction not committed");
                    self.remove_unpublished(&messages).await;
                    outcome
                }
                Err(e) => {
                    if e.kind() == ErrorKind::Conflict {
                        self.remove_unpublished(&messages).await;
                    }
                    return Err(e);
                }
            };
        }
        // Snapshot expiry follows each commit, as in Paimon (not for write-only writers, whose
        // maintenance a separate job owns). Failures are logged: the commit itself stands.
        // The commit stands whatever follows: nothing after it may turn it into an error.
        let write_only = self.table.table_options().map_or(true, |o| o.write_only);
        if !write_only && matches!(outcome, CommitOutcome::Committed(_)) {
            if let Err(e) = self.table.expire_snapshots(None).await {
                tracing::warn!(table = %self.table.identifier(), error = %e, "snapshot expiry failed");
            }
            if let (Ok(true), Ok(retention)) = (
                self.table.changelogs_decoupled(),
                self.table.changelog_retention(),
            ) {
                let op = super::progress::Operation::new();
                let expiry = super::changelog_lifecycle::ChangelogExpiry::Retain(retention);
                if let Err(e) = self.table.expire_changelogs_with(expiry, &op).await {
                    tracing::warn!(table = %self.table.identifier(), error = %e, "changelog expiry failed");
                }
            }
        }
        Ok(outcome)
    }

    /// Deletes the outputs of a compaction that was not committed.
    async fn remove_unpublished(&self, messages: &[CommitMessage]) {
        for m in messages {
            if let Ok(dir) = self.table.bucket_dir(&m.partition, m.bucket) {
                for f in m.compact_after.iter().chain(&m.compact_changelog) {
                    let _ = self
                        .table
                        .io()
                        .delete(&format!("{dir}/{}", f.file_name))
                        .await;
                }
            }
        }
    }

    /// Publishes one snapshot of `kind` holding `fixed` (plus, for an overwrite, DELETEs of the
    /// overwritten files as of the snapshot it builds on), retrying lost races.
    async fn try_commit(
        &self,
        kind: CommitKind,
        fixed: Vec<ManifestEntry>,
        changelog: Vec<ManifestEntry>,
        overwrite: Option<&Overwrite>,
        identifier: i64,
    ) -> Result<CommitOutcome> {
        let table = &self.table;
        let layout = table.layout()?;
        let sm = table.snapshot_manager();
        let mm = table.manifest_manager();
        let adds = fixed;
        let mut attempt = 0u32;
        // The manifest of ADDs does not depend on the base, so retries reuse it.
        let mut adds_manifest: Option<ManifestFileMeta> = None;
        // The changelog's manifest list does not depend on the base either.
        let changelog_list = if changelog.is_empty() {
            None
        } else {
            let m = mm
                .write_manifest(
                    &self.namer,
                    &changelog,
                    &layout.partition_types,
                    layout.schema.id,
                )
                .await?;
            Some(mm.write_manifest_list(&self.namer, &[m]).await?)
        };
        let changelog_rows: i64 = changelog.iter().map(|e| e.file.row_count).sum();
        loop {
            let latest = sm.latest().await?;
            if kind == CommitKind::Compact {
                check_compaction(&self.table, latest.as_ref(), &adds).await?;
            }
            let next_id = latest.as_ref().map(|s| s.id + 1).unwrap_or(1);

            // Base: the previous snapshot's base + delta manifests, compacted when too many.
            let mut base_metas: Vec<ManifestFileMeta> = Vec::new();
            if let Some(prev) = &latest {
                base_metas.extend(mm.read_manifest_list(&prev.base_manifest_list).await?);
                base_metas.extend(mm.read_manifest_list(&prev.delta_manifest_list).await?);
            }
            let mut deletes: Vec<ManifestEntry> = Vec::new();
            if let (Some(ow), Some(prev)) = (overwrite, &latest) {
                for e in mm.live_entries(prev).await? {
                    if overwrite_matches(
                        ow,
                        &e.partition,
                        &layout.schema.partition_keys,
                        &layout.partition_types,
                    )? {
                        deletes.push(ManifestEntry {
                            kind: FileKind::Delete,
                            ..e
                        });
                    }
                }
            }
            let mut attempt_files: Vec<String> = Vec::new();
            if base_metas.len() >= MANIFEST_MERGE_MIN_COUNT {
                let mut entries = Vec::new();
                for m in &base_metas {
                    entries.extend(mm.read_manifest(&m.file_name).await?);
                }
                let live = crate::manifest::fold_entries(entries);
                let merged = mm
                    .write_manifest(
                        &self.namer,
                        &live,
                        &layout.partition_types,
                        layout.schema.id,
                    )
                    .await?;
                attempt_files.push(merged.file_name.clone());
                base_metas = vec![merged];
            }
            let mut delta_metas = Vec::new();
            if !deletes.is_empty() {
                let m = mm
                    .write_manifest(
                        &self.namer,
                        &deletes,
                        &layout.partition_types,
                        layout.schema.id,
                    )
                    .await?;
                attempt_files.push(m.file_name.clone());
                delta_metas.push(m);
            }
            if !adds.is_empty() {
                if adds_manifest.is_none() {
                    adds_manifest = Some(
                        mm.write_manifest(
                            &self.namer,
                            &adds,
                            &layout.partition_types,
                            layout.schema.id,
                        )
                        .await?,
                    );
                }
                delta_metas.extend(adds_manifest.clone());
            }
            let (base_list, base_size) = mm.write_manifest_list(&self.namer, &base_metas).await?;
            let (delta_list, delta_size) =
                mm.write_manifest_list(&self.namer, &delta_metas).await?;
            let rows_of = |kind: FileKind| -> i64 {
                adds.iter()
                    .chain(&deletes)
                    .filter(|e| e.kind == kind)
                    .map(|e| e.file.row_count)
                    .sum()
            };
            let (added_rows, deleted_rows) = (rows_of(FileKind::Add), rows_of(FileKind::Delete));
            let delta_records = added_rows - deleted_rows;
            let snapshot = Snapshot {
                version: SNAPSHOT_VERSION,
                id: next_id,
                schema_id: layout.schema.id,
                base_manifest_list: base_list.clone(),
                base_manifest_list_size: Some(base_size),
                delta_manifest_list: delta_list.clone(),
                delta_manifest_list_size: Some(delta_size),
                changelog_manifest_list: changelog_list.as_ref().map(|l| l.0.clone()),
                changelog_manifest_list_size: changelog_list.as_ref().map(|l| l.1),
                index_manifest: latest.as_ref().and_then(|s| s.index_manifest.clone()),
                commit_user: self.commit_user.clone(),
                commit_identifier: identifier,
                commit_kind: kind,
                time_millis: self
                    .table
                    .clock()
                    .now_millis()
                    .max(latest.as_ref().map(|s| s.time_millis).unwrap_or(0)),
                total_record_count: Some(
                    latest
                        .as_ref()
                        .and_then(|s| s.total_record_count)
                        .unwrap_or(0)
                        + delta_records,
                ),
                delta_record_count: Some(delta_records),
                changelog_record_count: changelog_list.as_ref().map(|_| changelog_rows),
                watermark: latest.as_ref().and_then(|s| s.watermark),
                statistics: None,
                properties: None,
                next_row_id: None,
                uuid: Some(uuid::Uuid::new_v4().to_string()),
                writer_version: Some(format!("tidelake-{}", env!("CARGO_PKG_VERSION"))),
            };
            let lost = match sm.try_publish(&snapshot).await {
                Ok(true) => {
                    self.after_publish(next_id).await;
                    return Ok(CommitOutcome::Committed(next_id));
                }
                Ok(false) => true,
                Err(e) => {
                    // Ambiguous: the put may have landed. The snapshot file decides.
                    match sm.try_snapshot(next_id).await {
                        Ok(Some(s)) if s.uuid == snapshot.uuid => {
                            self.after_publish(next_id).await;
                            return Ok(CommitOutcome::Committed(next_id));
                        }
                        Ok(Some(_)) => true,
                        _ if e.is_retryable() => false,
                        _ => return Err(e),
                    }
                }
            };
            // This attempt's files are garbage now; only the ADD manifest is reused.
            for name in attempt_files.iter().chain([&base_list, &delta_list]) {
                let _ = table.io().delete(&mm.path(name)).await;
            }
            attempt += 1;
            if attempt > self.max_retries {
                return ConflictSnafu {
                    table: table.identifier().to_string(),
                    message: format!(
                        "gave up after {attempt} attempts: other committers kept taking snapshot ids (last tried {next_id}){}",
                        if lost { "" } else { " after storage errors" }
                    ),
                }
                .fail();
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
    }

    /// Hints after a successful publish: `LATEST` always, `EARLIEST` for a table's first snapshot.
    async fn after_publish(&self, id: i64) {
        let sm = self.table.snapshot_manager();
        sm.write_latest_hint(id).await;
        super::changelog::notify_commit();
        if id == 1 {
            sm.write_earliest_hint(1).await;
        }
    }

    /// The newest snapshot of this commit user whose identifier is at least `identifier`.
    async fn find_committed(
        &self,
        latest: Option<&Snapshot>,
        identifier: i64,
    ) -> Result<Option<i64>> {
        let Some(latest) = latest else {
            return Ok(None);
        };
        let sm = self.table.snapshot_manager();
        let earliest = sm.earliest_id().await?.unwrap_or(1);
        let mut id = latest.id;
        while id >= earliest {
            let s = if id == latest.id {
                latest.clone()
            } else {
                match sm.try_snapshot(id).await? {
                    Some(s) => s,
                    None => break, // expired concurrently
                }
            };
            if s.commit_user == self.commit_user {
                return Ok((s.commit_identifier >= identifier).then_some(s.id));
            }
            id -= 1;
        }
        Ok(None)
    }
}

/// A compaction may only delete files that are still live: another compactor (or an overwrite)
/// may have replaced them since it started. Conflicts are final, as in Paimon.
async fn check_compaction(
    table: &Table,
    latest: Option<&Snapshot>,
    entries: &[ManifestEntry],
) -> Result<()> {
    let live_entries = match latest {
        Some(s) => table.manifest_manager().live_entries(s).await?,
        None => vec![],
    };
    let live: HashSet<FileIdentifier> =
        live_entries.iter().map(ManifestEntry::identifier).collect();
    let conflict = |message: String| {
        ConflictSnafu {
            table: table.identifier().to_string(),
            message,
        }
        .fail()
    };
    for e in entries.iter().filter(|e| e.kind == FileKind::Delete) {
        if !live.contains(&e.identifier()) {
            return conflict(format!(
                "file deletion conflict: compaction input {} (bucket {}, level {}) is no longer live; give up committing",
                e.file.file_name, e.bucket, e.file.level
            ));
        }
    }
    // The result must keep every level >= 1 one sorted run: no two files with overlapping keys.
    let layout = table.layout()?;
    if layout.is_primary_key_table() {
        let result =
            crate::manifest::fold_entries(live_entries.into_iter().chain(entries.iter().cloned()));
        if let Some((a, b)) = overlapping_files(&result, &layout.key_types)? {
            return conflict(format!("LSM conflicts detected: files {a} and {b} overlap in one level; give up committing"));
        }
    }
    Ok(())
}

/// A file's key range: min key, max key, file name.
type KeyRange<'a> = (Vec<Datum>, Vec<Datum>, &'a str);

/// Two files of one (partition, bucket, level >= 1) whose key ranges overlap (or touch), if any.
pub(crate) fn overlapping_files(
    files: &[ManifestEntry],
    key_types: &[crate::spec::DataType],
) -> Result<Option<(String, String)>> {
    use std::cmp::Ordering;
    let decode = |bytes: &[u8], name: &str| {
        binary_row::deserialize(bytes, key_types).map_err(|e| {
            crate::error::CorruptSnafu {
                path: name.to_string(),
                message: format!("key range: {e}"),
            }
            .build()
        })
    };
    let cmp = |a: &[Datum], b: &[Datum]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.compare(y).unwrap_or(Ordering::Equal))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    let mut groups: std::collections::BTreeMap<(&[u8], i32, i32), Vec<KeyRange<'_>>> =
        std::collections::BTreeMap::new();
    for e in files.iter().filter(|e| e.file.level >= 1) {
        let min = decode(&e.file.min_key, &e.file.file_name)?;
        let max = decode(&e.file.max_key, &e.file.file_name)?;
        groups
            .entry((&e.partition, e.bucket, e.file.level))
            .or_default()
            .push((min, max, &e.file.file_name));
    }
    for ranges in groups.values_mut() {
        ranges.sort_by(|a, b| cmp(&a.0, &b.0));
        for pair in ranges.windows(2) {
            if cmp(&pair[0].1, &pair[1].0) != Ordering::Less {
                return Ok(Some((pair[0].2.to_string(), pair[1].2.to_string())));
            }
        }
    }
    Ok(None)
}

fn backoff(attempt: u32) -> Duration {
    let base = 10u64.saturating_mul(1 << attempt.min(7)).min(1000);
    let jitter = (uuid::Uuid::new_v4().as_u128() % (base as u128 + 1)) as u64;
    Duration::from_millis(base / 2 + jitter)
}

fn overwrite_matches(
    ow: &Overwrite,
    partition: &[u8],
    keys: &[String],
    types: &[crate::spec::DataType],
) -> Result<bool> {
    match ow {
        Overwrite::Table => Ok(true),
        Overwrite::Partitions(spec) => {
            let values = binary_row::deserialize(partition, types).map_err(|e| {
                crate::error::InternalSnafu {
                    message: format!("partition row in manifest: {e}"),
                }
                .build()
            })?;
            Ok(spec.iter().all(|(k, v)| {
                keys.iter().position(|x| x == k).is_some_and(|i| {
                    values.get(i).and_then(|x| x.compare(v)) == Some(std::cmp::Ordering::Equal)
                })
            }))
        }
    }
}

/// Checks an overwrite spec names partition keys only, each once.
pub(crate) fn validate_overwrite(ow: &Overwrite, keys: &[String], table: &str) -> Result<()> {
    if let Overwrite::Partitions(spec) = ow {
        let mut seen = HashSet::new();
        for (k, _) in spec {
            if !keys.contains(k) {
                return crate::error::invalid!("table {table}: '{k}' is not a partition key");
            }
            if !seen.insert(k) {
                return crate::error::invalid!("table {table}: partition key '{k}' given twice");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, level: i32, min: i64, max: i64) -> ManifestEntry {
        ManifestEntry {
            kind: FileKind::Add,
            partition: binary_row::empty_row(),
            bucket: 0,
            total_buckets: 1,
            file: DataFileMeta::for_test(name, level, min, max),
        }
    }

    #[test]
    fn detects_overlapping_files_in_one_level() {
        let types = vec!["BIGINT NOT NULL".parse().unwrap()];
        let ok = vec![
            entry("a", 1, 0, 9),
            entry("b", 1, 10, 19),
            entry("c", 2, 5, 15),
            entry("d", 0, 0, 100),
        ];
        assert_eq!(overlapping_files(&ok, &types).unwrap(), None);
        let touching = vec![entry("a", 1, 0, 10), entry("b", 1, 10, 19)];
        assert_eq!(
            overlapping_files(&touching, &types).unwrap(),
            Some(("a".into(), "b".into()))
        );
        let negative = vec![entry("a", 3, -20, -5), entry("b", 3, -10, 3)];
        assert!(overlapping_files(&negative, &types).unwrap().is_some());
    }
}
