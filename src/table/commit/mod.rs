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
//!                    │        created        exists                error (ambiguous)
//!                    │           ▼               ▼                    ▼
//!                    │     LATEST hint     read snapshot-(N+1) back: ours (a retried put
//!                    │       done          that had landed)? yes ─► done, no ─► retry
//!                    └──── backoff, retry ◄──────┘
//! ```
//!
//! Exactly-once: a commit with an explicit identifier is skipped when the newest snapshot of the
//! same commit user already carries an identifier at least as large (Paimon's `filterCommitted`).
//!
//! Dynamic-bucket writers' new HASH index files go into a new index manifest per attempt (the
//! latest one's entries with each bucket's new file in place of its old one); a partition whose
//! HASH files another writer changed since the writer loaded them is a final conflict.
//!
//! This file holds the IO and the retry loop; every decision the loop takes on what it read
//! (conflict, overwritten files, the next snapshot, an ambiguous publish, the backoff) is a pure
//! function in [`decide`]. The retry decision reads [`crate::error::Error::is_retryable`] and lives
//! only there.

mod checks;
mod decide;
mod index;
mod message;

use bytes::Bytes;
use snafu::ResultExt;

use super::Table;
use index::IndexChanges;
pub use message::CommitMessage;

use crate::error::{ConflictSnafu, ErrorKind, JsonSnafu, Result};
use crate::manifest::FileNamer;
use crate::schema::layout::TableLayout;
use crate::spec::binary_row::Datum;
use crate::spec::index_manifest::{self, IndexFileMeta, HASH_INDEX};
use crate::spec::manifest::{FileKind, ManifestEntry, ManifestFileMeta};
use crate::spec::options::ROW_TRACKING;
use crate::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use crate::spec::DataFileMeta;
use crate::spec::{CommitKind, CoreOptions, Snapshot};
pub(crate) use decide::validate_overwrite;
use decide::{Changes, ListRef, Published};

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
        Ok(self
            .commit_with(messages, identifier, overwrite, None)
            .await?
            .outcome)
    }

    /// Commits `messages` for a streaming writer whose previous commit (or whose start, when it
    /// has not committed yet) is snapshot `since`: every snapshot of this commit user after `since`
    /// is another writer's, and finding one on the snapshot a commit builds on fails it with
    /// [`crate::error::Error::Fenced`] before anything is published. The check and the
    /// conditional put of the next snapshot make it atomic: no two streams of one commit user
    /// both commit after the same snapshot.
    pub async fn commit_fenced(
        &self,
        messages: Vec<CommitMessage>,
        identifier: i64,
        since: i64,
    ) -> Result<Committed> {
        self.commit_with(messages, identifier, None, Some(since))
            .await
    }

    async fn commit_with(
        &self,
        messages: Vec<CommitMessage>,
        identifier: i64,
        overwrite: Option<Overwrite>,
        mut fence: Option<i64>,
    ) -> Result<Committed> {
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
        let index = IndexChanges::of(&messages);
        let vectors = IndexChanges::vectors(&messages);
        let changelog = entries(|m| &m.changelog_files, FileKind::Add);
        let compact_changelog = entries(|m| &m.compact_changelog, FileKind::Add);
        let mut compaction = entries(|m| &m.compact_before, FileKind::Delete);
        compaction.extend(entries(|m| &m.compact_after, FileKind::Add));
        let mut snapshots = Vec::new();
        if adds.is_empty()
            && overwrite.is_none()
            && compaction.is_empty()
            && index.is_none()
            && vectors.is_none()
        {
            return Ok(Committed {
                outcome: CommitOutcome::Empty,
                snapshots,
            });
        }
        if identifier != BATCH_COMMIT_IDENTIFIER {
            let latest = self.table.snapshot_manager().latest().await?;
            if let (Some(since), Some(l)) = (fence, latest.as_ref()) {
                self.check_fence(since, l).await?;
            }
            if let Some(id) = self.find_committed(latest.as_ref(), identifier).await? {
                return Ok(Committed {
                    outcome: CommitOutcome::AlreadyCommitted(id),
                    snapshots,
                });
            }
        }
        // At most two snapshots per commit: the new data (APPEND or OVERWRITE), then the
        // compaction (COMPACT), both with the same identifier.
        let mut outcome = CommitOutcome::Empty;
        // Index files go with the new data; without any (a compaction's deletion vectors, as
        // Paimon commits them), with the COMPACT snapshot.
        let appends = !adds.is_empty() || overwrite.is_some();
        if appends {
            let kind = if overwrite.is_some() {
                CommitKind::Overwrite
            } else {
                CommitKind::Append
            };
            outcome = match self
                .try_commit(
                    kind,
                    adds,
                    changelog,
                    Replaces {
                        overwrite: overwrite.as_ref(),
                        index: index.as_ref(),
                        vectors: None,
                        key_base: messages.iter().filter_map(|m| m.key_index_base).min(),
                    },
                    identifier,
                    fence,
                )
                .await
            {
                Ok(o) => o,
                Err(e) => {
                    if e.kind() == ErrorKind::Conflict {
                        // Nothing of this commit was published: its files are garbage.
                        // Nor was the compaction that would have followed it.
                        self.remove_unpublished(&messages, Unpublished::Compaction)
                            .await;
                        self.remove_unpublished(&messages, Unpublished::NewData)
                            .await;
                    }
                    return Err(e);
                }
            };
            if let CommitOutcome::Committed(id) = outcome {
                snapshots.push(id);
                fence = fence.map(|_| id);
            }
        }
        if !compaction.is_empty() || (!appends && index.is_some()) || vectors.is_some() {
            outcome = match self
                .try_commit(
                    CommitKind::Compact,
                    compaction,
                    compact_changelog,
                    Replaces {
                        overwrite: None,
                        index: index.as_ref().filter(|_| !appends),
                        vectors: vectors.as_ref(),
                        key_base: None,
                    },
                    identifier,
                    fence,
                )
                .await
            {
                Ok(o) => {
                    if let CommitOutcome::Committed(id) = o {
                        snapshots.push(id);
                    }
                    o
                }
                // The new data is committed; a compaction that lost to a concurrent one is only
                // work to redo later. Its files were never published.
                Err(e) if outcome != CommitOutcome::Empty && e.kind() == ErrorKind::Conflict => {
                    tracing::warn!(table = %self.table.identifier(), error = %e, "compaction not committed");
                    self.remove_unpublished(&messages, Unpublished::Compaction)
                        .await;
                    outcome
                }
                Err(e) => {
                    if e.kind() == ErrorKind::Conflict {
                        self.remove_unpublished(&messages, Unpublished::Compaction)
                            .await;
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
                let expiry =
                    super::maintenance::expire_changelogs::ChangelogExpiry::Retain(retention);
                if let Err(e) = self.table.expire_changelogs_with(expiry, &op).await {
                    tracing::warn!(table = %self.table.identifier(), error = %e, "changelog expiry failed");
                }
            }
        }
        Ok(Committed { outcome, snapshots })
    }

    /// Deletes the files of `messages` that `which` names (outputs of a commit that was not
    /// published): the new data with its index files, or a compaction's outputs with its
    /// deletion vectors.
    async fn remove_unpublished(&self, messages: &[CommitMessage], which: Unpublished) {
        let mm = self.table.manifest_manager();
        for m in messages {
            let (files, index): ([&Vec<DataFileMeta>; 2], Vec<&IndexFileMeta>) = match which {
                Unpublished::NewData => (
                    [&m.new_files, &m.changelog_files],
                    m.index_files.iter().collect(),
                ),
                Unpublished::Compaction => (
                    [&m.compact_after, &m.compact_changelog],
                    m.vectors.iter().filter_map(|v| v.file.as_ref()).collect(),
                ),
            };
            if let Ok(dir) = self.table.bucket_dir(&m.partition, m.bucket) {
                for f in files.into_iter().flatten() {
                    let _ = self
                        .table
                        .io()
                        .delete(&format!("{dir}/{}", f.file_name))
                        .await;
                }
            }
            for f in index {
                let _ = self.table.io().delete(&mm.index_path(f)).await;
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
        replaces: Replaces<'_>,
        identifier: i64,
        fence: Option<i64>,
    ) -> Result<CommitOutcome> {
        let Replaces {
            overwrite,
            index,
            vectors,
            key_base,
        } = replaces;
        let index = IndexChanges::and(index, vectors);
        let table = &self.table;
        let started = std::time::Instant::now();
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
            let rows: i64 = changelog.iter().map(|e| e.file.row_count).sum();
            Some((mm.write_manifest_list(&self.namer, &[m]).await?, rows))
        };
        loop {
            let latest = sm.latest().await?;
            if let (Some(since), Some(l)) = (fence, latest.as_ref()) {
                self.check_fence(since, l).await?;
            }
            if let (Some(base), Some(l)) = (key_base, latest.as_ref()) {
                self.check_keys_unmoved(base, l).await?;
            }
            let live = match &latest {
                Some(s) if kind == CommitKind::Compact || overwrite.is_some() => {
                    mm.live_entries(s).await?
                }
                _ => vec![],
            };
            if kind == CommitKind::Compact {
                let key_types = layout
                    .is_primary_key_table()
                    .then_some(layout.key_types.as_slice());
                let mut conflict = decide::check_compaction(&live, &adds, key_types)?;
                if let (None, Some(v)) = (&conflict, vectors) {
                    let current = match &latest {
                        Some(s) => mm.index_entries(s).await?,
                        None => vec![],
                    };
                    let after = crate::manifest::fold_entries(live.iter().chain(&adds).cloned());
                    conflict = decide::check_vectors(&current, &after, &v.vector_bases);
                }
                if let Some(conflict) = conflict {
                    crate::metrics::metrics().commit_conflicts.inc();
                    return ConflictSnafu {
                        table: table.identifier().to_string(),
                        message: conflict.to_string(),
                    }
                    .fail();
                }
            }
            let deletes = match overwrite {
                Some(ow) => decide::overwritten(
                    live,
                    ow,
                    &layout.schema.partition_keys,
                    &layout.partition_types,
                )?,
                None => vec![],
            };
            // Row-tracking tables: new files take row ids from the base's nextRowId, so their
            // manifest is this attempt's own.
            let row_tracking = kind != CommitKind::Compact
                && CoreOptions::new(&layout.schema.options).flag(ROW_TRACKING);
            let (attempt_adds, next_row_id) = if row_tracking {
                let start = latest.as_ref().and_then(|s| s.next_row_id).unwrap_or(0);
                let next_id = latest.as_ref().map_or(1, |s| s.id + 1);
                let (assigned, next) = decide::assign_row_ids(&adds, start, next_id);
                if let Some(m) = adds_manifest.take() {
                    let _ = table.io().delete(&mm.path(&m.file_name)).await;
                }
                (std::borrow::Cow::Owned(assigned), Some(next))
            } else {
                (std::borrow::Cow::Borrowed(&adds), None)
            };
            let mut lists = self
                .write_lists(
                    &layout,
                    latest.as_ref(),
                    &attempt_adds,
                    &deletes,
                    &mut adds_manifest,
                )
                .await?;
            let index_manifest = match &index {
                Some(ix) => match self.write_index(ix, latest.as_ref()).await {
                    Ok(name) => {
                        lists.written.push(name.clone());
                        Some(name)
                    }
                    Err(e) => {
                        // Final: nothing this commit wrote will be published.
                        let ours = lists
                            .written
                            .iter()
                            .chain(adds_manifest.as_ref().map(|m| &m.file_name))
                            .chain(changelog_list.as_ref().map(|((l, _), _)| l));
                        for name in ours {
                            let _ = table.io().delete(&mm.path(name)).await;
                        }
                        return Err(e);
                    }
                },
                None => None,
            };
            let snapshot = decide::next_snapshot(
                latest.as_ref(),
                Changes {
                    kind,
                    schema_id: layout.schema.id,
                    base: lists.base.clone(),
                    delta: lists.delta.clone(),
                    changelog: changelog_list.clone(),
                    delta_records: decide::delta_records(&adds, &deletes),
                    index_manifest,
                    commit_user: self.commit_user.clone(),
                    identifier,
                    now_millis: table.clock().now_millis(),
                    uuid: uuid::Uuid::new_v4().to_string(),
                    next_row_id,
                },
            );
            let next_id = snapshot.id;
            let path = sm.snapshot_path(next_id);
            let json = serde_json::to_vec_pretty(&snapshot).context(JsonSnafu { path })?;
            let published = publish(table, &snapshot, Bytes::from(json)).await?;
            if published == Published::Ours {
                crate::metrics::metrics()
                    .commit_seconds
                    .observe(started.elapsed().as_secs_f64());
                return Ok(CommitOutcome::Committed(next_id));
            }
            // This attempt's files are garbage now; only the ADD manifest is reused.
            for name in &lists.written {
                let _ = table.io().delete(&mm.path(name)).await;
            }
            attempt += 1;
            if attempt > self.max_retries {
                crate::metrics::metrics().commit_conflicts.inc();
                return ConflictSnafu {
                    table: table.identifier().to_string(),
                    message: format!(
                        "gave up after {attempt} attempts: other committers kept taking snapshot ids (last tried {next_id}){}",
                        if published == Published::Lost { "" } else { " after storage errors" }
                    ),
                }
                .fail();
            }
            crate::metrics::metrics().commit_retries.inc();
            tokio::time::sleep(decide::backoff(attempt)).await;
        }
    }

    /// The index manifest of an attempt on `latest`: its live index files with the new ones in
    /// place of those they replace. A partition whose HASH files another writer changed since
    /// this one loaded them is a conflict: both may have put one new key into two buckets.
    async fn write_index(&self, ix: &IndexChanges, latest: Option<&Snapshot>) -> Result<String> {
        let mm = self.table.manifest_manager();
        let current = match latest {
            Some(s) => mm.index_entries(s).await?,
            None => vec![],
        };
        for (partition, base) in &ix.bases {
            let now: Vec<(i32, String)> = current
                .iter()
                .filter(|e| &e.partition == partition && e.file.index_type == HASH_INDEX)
                .map(|e| (e.bucket, e.file.file_name.clone()))
                .collect();
            if !decide::base_unchanged(base, &now) {
                crate::metrics::metrics().commit_conflicts.inc();
                return ConflictSnafu {
                    table: self.table.identifier().to_string(),
                    message: format!(
                        "another writer assigned dynamic buckets to new keys of partition {} since this write began; write again",
                        self.table.partition_display(partition)
                    ),
                }
                .fail();
            }
        }
        let combined = index_manifest::combine(current, ix.entries.clone());
        mm.write_index_manifest(&self.namer, &combined).await
    }

    /// Writes the manifests and lists of one attempt on `latest`: the base (the previous base and
    /// delta, merged into one manifest when there are too many) and the delta (an overwrite's
    /// DELETEs, then the ADDs, whose manifest is written once and reused by every attempt).
    async fn write_lists(
        &self,
        layout: &TableLayout,
        latest: Option<&Snapshot>,
        adds: &[ManifestEntry],
        deletes: &[ManifestEntry],
        adds_manifest: &mut Option<ManifestFileMeta>,
    ) -> Result<AttemptLists> {
        let mm = self.table.manifest_manager();
        let write = |entries: Vec<ManifestEntry>| {
            let mm = mm.clone();
            async move {
                mm.write_manifest(
                    &self.namer,
                    &entries,
                    &layout.partition_types,
                    layout.schema.id,
                )
                .await
            }
        };
        let mut written: Vec<String> = Vec::new();
        let mut base_metas: Vec<ManifestFileMeta> = Vec::new();
        if let Some(prev) = latest {
            base_metas.extend(mm.read_manifest_list(&prev.base_manifest_list).await?);
            base_metas.extend(mm.read_manifest_list(&prev.delta_manifest_list).await?);
        }
        if decide::merge_base(base_metas.len()) {
            let mut entries = Vec::new();
            for m in &base_metas {
                entries.extend(mm.read_manifest(&m.file_name).await?);
            }
            let merged = write(crate::manifest::fold_entries(entries)).await?;
            written.push(merged.file_name.clone());
            base_metas = vec![merged];
        }
        let mut delta_metas = Vec::new();
        if !deletes.is_empty() {
            let m = write(deletes.to_vec()).await?;
            written.push(m.file_name.clone());
            delta_metas.push(m);
        }
        if !adds.is_empty() {
            if adds_manifest.is_none() {
                *adds_manifest = Some(write(adds.to_vec()).await?);
            }
            delta_metas.extend(adds_manifest.clone());
        }
        let base = mm.write_manifest_list(&self.namer, &base_metas).await?;
        let delta = mm.write_manifest_list(&self.namer, &delta_metas).await?;
        written.extend([base.0.clone(), delta.0.clone()]);
        Ok(AttemptLists {
            base,
            delta,
            written,
        })
    }

    /// The newest snapshot of this commit user whose identifier is at least `identifier`.
    async fn find_committed(
        &self,
        latest: Option<&Snapshot>,
        identifier: i64,
    ) -> Result<Option<i64>> {
        let newest = newest_of(&self.table, latest, &self.commit_user).await?;
        Ok(newest
            .filter(|s| s.commit_identifier >= identifier)
            .map(|s| s.id))
    }
}

/// Which files of a commit's messages were not published.
#[derive(Debug, Clone, Copy)]
enum Unpublished {
    NewData,
    Compaction,
}

/// What a commit replaces besides adding files: an overwrite's files and the index files its new
/// ones take the place of.
#[derive(Debug, Default, Clone, Copy)]
struct Replaces<'a> {
    overwrite: Option<&'a Overwrite>,
    index: Option<&'a IndexChanges>,
    /// A compaction's new deletion-vector files, checked against their bases.
    vectors: Option<&'a IndexChanges>,
    /// A cross-partition writer's key index base ([`CommitMessage::key_index_base`]).
    key_base: Option<i64>,
}

/// Snapshot `id` read back after an ambiguous publish, with a few retries of transient read
/// errors: until the file answers, whether the snapshot is ours stays unknown.
async fn read_back(sm: &crate::snapshot::SnapshotManager, id: i64) -> Result<Option<Snapshot>> {
    let mut attempt = 0;
    loop {
        match sm.try_snapshot(id).await {
            Err(e) if e.is_retryable() && attempt < 3 => {
                attempt += 1;
                tokio::time::sleep(decide::backoff(attempt)).await;
            }
            other => return other,
        }
    }
}

/// What a fenced commit produced: how it ended, and the snapshots it published (APPEND, then
/// COMPACT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub outcome: CommitOutcome,
    pub snapshots: Vec<i64>,
}

/// The newest retained snapshot of `commit_user`, walking back from `latest` (Paimon's
/// `filterCommitted` walk). An expired one is not found.
async fn newest_of(
    table: &Table,
    latest: Option<&Snapshot>,
    commit_user: &str,
) -> Result<Option<Snapshot>> {
    let Some(latest) = latest else {
        return Ok(None);
    };
    let sm = table.snapshot_manager();
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
        if s.commit_user == commit_user {
            return Ok(Some(s));
        }
        id -= 1;
    }
    Ok(None)
}

/// Where a commit user stands in a table: its newest retained snapshot's commit identifier and
/// id, and the table's latest snapshot id when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitUserState {
    /// The last durable commit identifier of the commit user (`None`: nothing retained).
    pub identifier: Option<i64>,
    /// The snapshot holding it.
    pub snapshot: Option<i64>,
    /// The table's latest snapshot at the time (0: none).
    pub latest: i64,
}

impl Table {
    /// The last commit identifier durable for `commit_user`, read from the snapshots as Paimon's
    /// exactly-once restore does. Snapshot expiry can remove it: then nothing is known.
    pub async fn last_committed(&self, commit_user: &str) -> Result<CommitUserState> {
        let latest = self.snapshot_manager().latest().await?;
        let newest = newest_of(self, latest.as_ref(), commit_user).await?;
        Ok(CommitUserState {
            identifier: newest.as_ref().map(|s| s.commit_identifier),
            snapshot: newest.as_ref().map(|s| s.id),
            latest: latest.map_or(0, |s| s.id),
        })
    }
}

/// The manifest lists of one commit attempt, and every file it wrote that a lost attempt leaves
/// as garbage.
#[derive(Debug)]
struct AttemptLists {
    base: ListRef,
    delta: ListRef,
    written: Vec<String>,
}

/// Puts `snapshot` under its id, its file holding `json`, and says whose the id is afterwards:
/// the one publish of the crate, for commits made here and for snapshots a REST client wrote
/// the files of. A taken id or an ambiguous storage error is settled by reading the snapshot
/// back (ours by uuid). Once the snapshot is ours, what follows every publish follows.
async fn publish(table: &Table, snapshot: &Snapshot, json: Bytes) -> Result<Published> {
    let sm = table.snapshot_manager();
    let id = snapshot.id;
    let published = match table
        .io()
        .write_if_absent(&sm.snapshot_path(id), json)
        .await
    {
        Ok(true) => Published::Ours,
        Ok(false) => decide::resolve_taken(read_back(&sm, id).await, snapshot)?,
        // Ambiguous: the put may have landed. The snapshot file decides.
        Err(e) => decide::resolve_publish(e, read_back(&sm, id).await, snapshot)?,
    };
    if published == Published::Ours {
        after_publish(table, id, snapshot.commit_kind).await;
    }
    Ok(published)
}

/// Publishes a snapshot a client wrote the files of (the REST catalog's commit), its file holding
/// `json` as the client sent it. `Ok(true)` once it is durable; `Ok(false)` when the id is
/// another committer's or a retryable storage error left nothing behind (the client retries on
/// the new latest). The caller has validated the snapshot against the latest one.
pub async fn publish_written(table: &Table, snapshot: &Snapshot, json: Bytes) -> Result<bool> {
    Ok(publish(table, snapshot, json).await? == Published::Ours)
}

/// What follows a snapshot published from this process: the commit counted, `LATEST` hinted
/// (and `EARLIEST` for a table's first snapshot), subscriptions woken.
async fn after_publish(table: &Table, id: i64, kind: CommitKind) {
    crate::metrics::metrics()
        .commits
        .get_or_create(&[("kind", kind.as_str())])
        .inc();
    let sm = table.snapshot_manager();
    sm.write_latest_hint(id).await;
    super::changes::notify_commit();
    if id == 1 {
        sm.write_earliest_hint(1).await;
    }
}
