//! The lifecycle of a table's snapshots: expiry, tags, rollback, and removal of orphan files.
//!
//! Every deleting path first decides, reading only, then removes the *entry points* (snapshot,
//! changelog or tag files) and only then the manifests and data files behind them. A crash (kill -9)
//! at any instant therefore leaves every remaining snapshot, changelog and tag complete: what it
//! can leave behind are files nothing references, which orphan removal takes, and the next run
//! carries on from the remaining snapshots.
//!
//! ```text
//!  expiry:   plan (read) ──► snapshot-E..snapshot-(end-1) deleted, oldest first (the range
//!                            stays contiguous) ──► EARLIEST = end ──► data files ──► manifests
//!  rollback: plan (read) ──► LATEST = target ──► snapshots newest first ──► later tags ──► files
//!  tags:     tag file ──► files only it held
//! ```
//!
//! A file is deleted only when no remaining snapshot, tag or long-lived changelog can reference
//! it. Manifests an earlier (killed) run already removed are skipped, so expiry also recovers
//! tables damaged by a crash of older versions, which deleted files before snapshots.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::progress::Operation;
use super::Table;
use crate::error::{invalid, ErrorKind, NotFoundSnafu, Result};
use crate::snapshot::expire::{expire_until, Retention};
use crate::snapshot::tag::TagManager;
use crate::spec::manifest::{FileKind, FileSource, ManifestEntry};
use crate::spec::{ChangelogProducer, Snapshot};

/// What an expiry, rollback or orphan removal did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Snapshot ids removed.
    pub snapshots: Vec<i64>,
    /// Files deleted (or, for a dry run, that would be), relative to the warehouse.
    pub files: Vec<String>,
}

/// What to roll back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackTarget {
    Snapshot(i64),
    Tag(String),
}

/// `Ok(None)` for a file that is not there (a cleanup a killed run already did).
fn present<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Table {
    /// The tags whose files expiry keeps: this branch's, and on a branch main's too (Paimon
    /// expires a branch with main's tags: a branch made from a tag shares its files).
    pub(crate) async fn protecting_tags(&self) -> Result<Vec<(String, Snapshot)>> {
        let mut tags = self.tag_manager().list().await?;
        if self.branch().is_some() {
            let main = TagManager::new(
                self.io().clone(),
                self.path(),
                self.identifier().to_string(),
            );
            tags.extend(main.list().await?);
        }
        Ok(tags)
    }

    pub(crate) fn tag_manager(&self) -> TagManager {
        TagManager::new(self.io().clone(), self.meta_path(), self.full_name())
    }

    /// Retention from the table's options, with Paimon's defaults.
    pub fn retention(&self) -> Result<Retention> {
        let o = self.table_options()?;
        Ok(Retention {
            min_retained: o.snapshot_min_retained,
            max_retained: o.snapshot_max_retained,
            time_retained_millis: o.snapshot_time_retained_millis,
            expire_limit: o.snapshot_expire_limit,
        })
    }

    /// The table's consumers.
    pub fn consumer_manager(&self) -> crate::snapshot::consumer::ConsumerManager {
        crate::snapshot::consumer::ConsumerManager::new(self.io().clone(), self.meta_path())
    }

    pub(crate) async fn min_consumer(&self) -> Result<Option<i64>> {
        let expiration = self.table_options()?.consumer_expiration_millis;
        self.consumer_manager()
            .min_next_snapshot(self.clock().now_millis(), expiration)
            .await
    }

    /// Data files a snapshot can read (partition, bucket, name) and the manifest files it uses.
    pub(crate) async fn references(
        &self,
        s: &Snapshot,
    ) -> Result<(HashSet<(Vec<u8>, i32, String)>, HashSet<String>)> {
        let files = self
            .manifest_manager()
            .live_entries(s)
            .await?
            .into_iter()
            .map(|e| (e.partition, e.bucket, e.file.file_name))
            .collect();
        let manifests = self.manifests_of(s, false).await?.into_iter().collect();
        Ok((files, manifests))
    }

    /// The manifest lists of `s` and the manifests they name; with `tolerate_missing`, a list
    /// that is gone (a cleanup a killed run already did) names nothing.
    async fn manifests_of(&self, s: &Snapshot, tolerate_missing: bool) -> Result<Vec<String>> {
        let mm = self.manifest_manager();
        let mut out = Vec::new();
        for list in [
            Some(&s.base_manifest_list),
            Some(&s.delta_manifest_list),
            s.changelog_manifest_list.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            out.push(list.clone());
            let read = mm.read_manifest_list(list).await;
            let metas = if tolerate_missing {
                present(read)?.unwrap_or_default()
            } else {
                read?
            };
            out.extend(metas.into_iter().map(|m| m.file_name));
        }
        // The index manifest lives beside the manifests and goes with them.
        out.extend(s.index_manifest.clone());
        Ok(out)
    }

    /// The paths of the index files `s` lists (none when its index manifest is gone: a cleanup a
    /// killed run already did).
    async fn index_files_of(&self, s: &Snapshot) -> Result<HashSet<String>> {
        let mm = self.manifest_manager();
        Ok(present(mm.index_entries(s).await)?
            .unwrap_or_default()
            .iter()
            .map(|e| mm.index_path(&e.file))
            .collect())
    }

    /// Lists and manifests of an expiring snapshot `s` that `keep` does not hold.
    async fn unreferenced_manifests(
        &self,
        s: &Snapshot,
        keep: &HashSet<String>,
    ) -> Result<Vec<String>> {
        let mut out: Vec<String> = self
            .manifests_of(s, true)
            .await?
            .into_iter()
            .filter(|m| !keep.contains(m))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn delete_data_files(
        &self,
        files: &BTreeSet<(Vec<u8>, i32, String)>,
        report: &mut CleanupReport,
        op: &Operation,
    ) -> Result<()> {
        for (partition, bucket, name) in files {
            let path = format!("{}/{name}", self.bucket_dir(partition, *bucket)?);
            self.io().delete(&path).await?;
            report.files.push(path);
            op.advance(1, 0);
        }
        Ok(())
    }

    /// Expires old snapshots by the table's retention options (or `retention`); deletes the files
    /// only they referenced. Tags and consumers keep what they need.
    pub async fn expire_snapshots(&self, retention: Option<Retention>) -> Result<CleanupReport> {
        self.expire_snapshots_with(retention, &Operation::new())
            .await
    }

    /// [`Table::expire_snapshots`] reporting progress to `op`. It can be cancelled while it reads
    /// snapshots and manifests, before it deletes anything; the deletions then run to the end.
    pub async fn expire_snapshots_with(
        &self,
        retention: Option<Retention>,
        op: &Operation,
    ) -> Result<CleanupReport> {
        let what = format!("snapshot expiry of {}", self.identifier());
        // Paimon's expire_snapshots procedures never keep changelogs; the table's own expiry does
        // when its changelog retention outlasts its snapshot retention.
        let decoupled = retention.is_none() && self.changelogs_decoupled()?;
        let produces = self.layout()?.changelog_producer != ChangelogProducer::None;
        let retention = match retention {
            Some(r) => r,
            None => self.retention()?,
        };
        let sm = self.snapshot_manager();
        let mut report = CleanupReport::default();
        let (Some(earliest), Some(latest)) = (sm.earliest_id().await?, sm.latest_id().await?)
        else {
            return Ok(report);
        };
        if latest - earliest < retention.min_retained {
            return Ok(report);
        }
        // Cheap exit for the common case after a commit: nothing beyond the count limit and the
        // oldest snapshot's successor is still within the retention time.
        if latest - retention.max_retained < earliest {
            let next = sm.snapshot(earliest + 1).await?;
            if self.clock().now_millis() - retention.time_retained_millis <= next.time_millis {
                return Ok(report);
            }
        }
        // Commit times of the snapshots the decision can touch.
        let last_needed = latest.min(earliest + retention.expire_limit + 1);
        let mut snapshots: HashMap<i64, Snapshot> = HashMap::new();
        let mut times = Vec::new();
        op.phase("reading snapshots", (last_needed - earliest + 1) as u64);
        for id in earliest..=last_needed {
            op.check(&what)?;
            op.advance(0, 0);
            let s = sm.snapshot(id).await?;
            times.push(s.time_millis);
            snapshots.insert(id, s);
        }
        let end = expire_until(
            earliest,
            &times,
            self.clock().now_millis(),
            &retention,
            self.min_consumer().await?,
        );
        if end <= earliest {
            return Ok(report);
        }
        let end_snapshot = match snapshots.get(&end) {
            Some(s) => s.clone(),
            None => sm.snapshot(end).await?,
        };
        let tags = self.protecting_tags().await?;
        let mut tag_files = HashSet::new();
        let mut keep_manifests = HashSet::new();
        for (_, t) in &tags {
            let (files, manifests) = self.references(t).await?;
            tag_files.extend(files);
            keep_manifests.extend(manifests);
        }
        keep_manifests.extend(self.references(&end_snapshot).await?.1);

        // Data files removed by the commits from the first expired snapshot up to `end` were live
        // only in expired snapshots (unless a tag holds them or a later entry re-adds them). The
        // earliest snapshot's own removals were live only in its predecessor, which is gone: a run
        // killed after deleting that snapshot file left them, and this run takes them.
        let mm = self.manifest_manager();
        // Each doomed file, with the snapshot whose delta removed it: it goes right after the
        // snapshot before that one, so a kill between two snapshots leaves only the files of the
        // last one deleted, which the next run's reading of its earliest delta takes.
        let mut doomed: BTreeMap<(Vec<u8>, i32, String), i64> = BTreeMap::new();
        op.phase("reading manifests", (end - earliest + 1) as u64);
        for id in earliest..=end {
            op.check(&what)?;
            op.advance(0, 0);
            let s = match snapshots.get(&id) {
                Some(s) => s.clone(),
                None => sm.snapshot(id).await?,
            };
            let Some(entries) = present(mm.read_entries_of_list(&s.delta_manifest_list).await)?
            else {
                // Removed by a run that was killed before its snapshot files went.
                continue;
            };
            for e in entries {
                let key = (e.partition.clone(), e.bucket, e.file.file_name.clone());
                // Kept changelogs of a table without a producer are its appended files.
                let append = FileSource::Append as i32;
                let appended = e.file.file_source.unwrap_or(append) == append;
                match e.kind {
                    FileKind::Delete if decoupled && !produces && appended => {}
                    FileKind::Delete => {
                        doomed.insert(key, id);
                    }
                    FileKind::Add => {
                        doomed.remove(&key);
                    }
                }
            }
        }
        let live_in_end: HashSet<_> = self.references(&end_snapshot).await?.0;
        doomed.retain(|k, _| !tag_files.contains(k) && !live_in_end.contains(k));
        let mut removed_by: BTreeMap<i64, BTreeSet<(Vec<u8>, i32, String)>> = BTreeMap::new();
        for (key, id) in doomed {
            removed_by.entry(id).or_default().insert(key);
        }
        // Changelog files belong to their snapshot alone: they go with it, unless they outlive it.
        let mut changelog_files = BTreeSet::new();
        for id in (earliest..end).filter(|_| !decoupled) {
            if let Some(list) = snapshots
                .get(&id)
                .and_then(|s| s.changelog_manifest_list.clone())
            {
                for e in present(mm.read_entries_of_list(&list).await)?.unwrap_or_default() {
                    changelog_files.insert((e.partition, e.bucket, e.file.file_name));
                }
            }
        }
        let mut manifests = BTreeSet::new();
        // Kept changelogs keep their changelog manifests, and without a producer their data
        // manifests (which list the appended files) too.
        if decoupled {
            for id in earliest..end {
                let Some(s) = snapshots.get(&id) else {
                    continue;
                };
                let lists = if produces {
                    vec![s.changelog_manifest_list.as_ref()]
                } else {
                    vec![Some(&s.base_manifest_list), Some(&s.delta_manifest_list)]
                };
                for list in lists.into_iter().flatten() {
                    keep_manifests.insert(list.clone());
                    for m in present(mm.read_manifest_list(list).await)?.unwrap_or_default() {
                        keep_manifests.insert(m.file_name);
                    }
                }
            }
        }
        for id in earliest..end {
            let s = match snapshots.get(&id) {
                Some(s) => s.clone(),
                None => continue,
            };
            manifests.extend(self.unreferenced_manifests(&s, &keep_manifests).await?);
        }
        // Index files (dynamic buckets' HASH files) of the expiring snapshots that no kept
        // snapshot or tag lists.
        let mut keep_index = self.index_files_of(&end_snapshot).await?;
        for (_, t) in &tags {
            keep_index.extend(self.index_files_of(t).await?);
        }
        let mut index_files = BTreeSet::new();
        let mut index_manifests_seen = HashSet::new();
        for id in earliest..end {
            let Some(s) = snapshots.get(&id) else {
                continue;
            };
            if s.index_manifest
                .as_ref()
                .is_some_and(|n| index_manifests_seen.insert(n.clone()))
            {
                index_files.extend(
                    self.index_files_of(s)
                        .await?
                        .into_iter()
                        .filter(|p| !keep_index.contains(p)),
                );
            }
        }
        // The last point where stopping changes nothing.
        op.check(&what)?;
        let doomed_count: usize = removed_by.values().map(BTreeSet::len).sum();
        op.phase(
            "deleting files",
            (doomed_count + changelog_files.len() + manifests.len() + index_files.len()) as u64
                + (end - earliest) as u64,
        );
        // What the earliest snapshot's commit removed was live only in snapshots already gone.
        if let Some(files) = removed_by.remove(&earliest) {
            self.delete_data_files(&files, &mut report, op).await?;
        }
        // Snapshot files oldest first, each followed by the data files only it (and those before
        // it) could read: whenever this stops, the snapshots left are a contiguous range whose
        // files are all still there.
        let changelogs = self.changelog_manager();
        for id in earliest..end {
            if decoupled {
                if let Some(s) = snapshots.get(&id) {
                    changelogs.write_changelog(s).await?;
                    changelogs.write_latest_hint(id).await;
                }
            }
            sm.delete(id).await?;
            report.snapshots.push(id);
            op.advance(1, 0);
            if let Some(files) = removed_by.remove(&(id + 1)) {
                self.delete_data_files(&files, &mut report, op).await?;
            }
        }
        sm.write_earliest_hint(end).await;
        // Nothing can reach these any more (left over by a kill, they are orphans: no remaining
        // manifest names them).
        self.delete_data_files(&changelog_files, &mut report, op)
            .await?;
        for m in manifests {
            let path = mm.path(&m);
            self.io().delete(&path).await?;
            report.files.push(path);
            op.advance(1, 0);
        }
        for path in index_files {
            self.io().delete(&path).await?;
            report.files.push(path);
            op.advance(1, 0);
        }
        Ok(report)
    }

    /// Tags `snapshot_id` (or the latest snapshot) as `name`.
    pub async fn create_tag(&self, name: &str, snapshot_id: Option<i64>) -> Result<Snapshot> {
        let sm = self.snapshot_manager();
        let snapshot = match snapshot_id {
            Some(id) => match sm.try_snapshot(id).await? {
                Some(s) => s,
                None => {
                    return NotFoundSnafu {
                        message: format!(
                            "Cannot create tag because given snapshot #{id} doesn't exist."
                        ),
                    }
                    .fail()
                }
            },
            None => match sm.latest().await? {
                Some(s) => s,
                None => {
                    return NotFoundSnafu {
                        message: "Cannot create tag because latest snapshot doesn't exist."
                            .to_string(),
                    }
                    .fail()
                }
            },
        };
        self.tag_manager().create(name, &snapshot).await?;
        Ok(snapshot)
    }

    pub async fn list_tags(&self) -> Result<Vec<(String, Snapshot)>> {
        self.tag_manager().list().await
    }

    /// Deletes a tag; if its snapshot has expired and no other tag pins it, the files only it
    /// held are deleted too.
    pub async fn delete_tag(&self, name: &str) -> Result<CleanupReport> {
        // A branch made from the tag reads its snapshot's files: the tag keeps them from expiry.
        let tagged = self.tag_manager().get(name).await?;
        self.refuse_if_branch_base(name, tagged.id).await?;
        let snapshot = self.tag_manager().delete(name).await?;
        if self.branch().is_some() {
            // A branch's tag may pin files main uses too: orphan removal, which sees every
            // branch, removes what no one uses.
            return Ok(CleanupReport::default());
        }
        let mut report = CleanupReport::default();
        let sm = self.snapshot_manager();
        let others = self.tag_manager().list().await?;
        if sm.try_snapshot(snapshot.id).await?.is_some()
            || others.iter().any(|(_, s)| s.id == snapshot.id)
        {
            return Ok(report);
        }
        // Keep whatever the remaining tags and the earliest snapshot use.
        let mut keep_files = HashSet::new();
        let mut keep_manifests = HashSet::new();
        let earliest = match sm.earliest_id().await? {
            Some(id) => Some(sm.snapshot(id).await?),
            None => None,
        };
        for s in others.iter().map(|(_, s)| s).chain(earliest.as_ref()) {
            let (f, m) = self.references(s).await?;
            keep_files.extend(f);
            keep_manifests.extend(m);
        }
        let (files, manifests) = self.references(&snapshot).await?;
        let doomed: BTreeSet<_> = files
            .into_iter()
            .filter(|f| !keep_files.contains(f))
            .collect();
        self.delete_data_files(&doomed, &mut report, &Operation::new())
            .await?;
        for m in manifests
            .into_iter()
            .filter(|m| !keep_manifests.contains(m))
        {
            let path = self.manifest_manager().path(&m);
            self.io().delete(&path).await?;
            report.files.push(path);
        }
        Ok(report)
    }

    /// Rolls the table back to a snapshot or tag: later snapshots, later tags, and the files only
    /// they referenced are removed; readers see the old state.
    pub async fn rollback_to(&self, target: RollbackTarget) -> Result<CleanupReport> {
        let sm = self.snapshot_manager();
        let tags = self.tag_manager();
        let target_snapshot = match &target {
            RollbackTarget::Snapshot(id) => sm.snapshot(*id).await?,
            RollbackTarget::Tag(name) => tags.get(name).await?,
        };
        let target_id = target_snapshot.id;
        // A tag that outlived its snapshot is restored as the only snapshot, but only once the
        // later ones are gone: restored first, it would leave a gap below them, and a rollback
        // interrupted there would hide them from its rerun (the latest is found by probing up from
        // the hint) until a new commit filled the gap and brought them back.
        let restore = sm.try_snapshot(target_id).await?.is_none();
        let latest = match sm.latest_id().await? {
            Some(latest) => latest,
            // Everything later is gone (an interrupted rollback's rerun): only the restore is left.
            None if restore => target_id,
            None => return invalid!("table {} has no snapshots to roll back", self.identifier()),
        };
        let mut report = CleanupReport::default();
        let all_tags = tags.list().await?;
        // A later tag a branch was made from keeps that branch's files: it cannot go.
        for (name, s) in all_tags.iter().filter(|(_, s)| s.id > target_id) {
            self.refuse_if_branch_base(name, s.id).await?;
        }
        let remaining_tags: Vec<(String, Snapshot)> = all_tags
            .into_iter()
            .filter(|(_, s)| s.id <= target_id)
            .collect();
        let (mut keep_files, mut keep_manifests) = self.references(&target_snapshot).await?;
        for (_, t) in &remaining_tags {
            let (f, m) = self.references(t).await?;
            keep_files.extend(f);
            keep_manifests.extend(m);
        }
        let mm = self.manifest_manager();
        let mut doomed_files = BTreeSet::new();
        let mut doomed_manifests = BTreeSet::new();
        let mut later = Vec::new();
        for id in (target_id + 1..=latest).rev() {
            let Some(s) = sm.try_snapshot(id).await? else {
                continue;
            };
            for e in mm.read_entries_of_list(&s.delta_manifest_list).await? {
                if e.kind == FileKind::Add {
                    let key = (e.partition.clone(), e.bucket, e.file.file_name.clone());
                    if !keep_files.contains(&key) {
                        doomed_files.insert(key);
                    }
                }
            }
            doomed_manifests.extend(self.unreferenced_manifests(&s, &keep_manifests).await?);
            later.push(id);
        }
        // Snapshots first (newest first), so no reader can reach a file that is about to go;
        // each removal leaves a committed state.
        for id in &later {
            sm.delete(*id).await?;
            report.snapshots.push(*id);
        }
        if restore && !sm.try_publish(&target_snapshot).await? {
            // Taken meanwhile: by this rollback's lost answer, or by a concurrent committer.
            let now = sm.try_snapshot(target_id).await?;
            if now.is_none_or(|s| s.uuid != target_snapshot.uuid) {
                return crate::error::ConflictSnafu {
                    table: self.identifier().to_string(),
                    message: format!(
                        "snapshot {target_id} was committed while rolling back to it; roll back again"
                    ),
                }
                .fail();
            }
        }
        sm.write_latest_hint(target_id).await;
        for (name, s) in tags.list().await? {
            if s.id > target_id {
                tags.delete(&name).await?;
            }
        }
        self.delete_data_files(&doomed_files, &mut report, &Operation::new())
            .await?;
        for m in doomed_manifests {
            let path = mm.path(&m);
            self.io().delete(&path).await?;
            report.files.push(path);
        }
        if sm.earliest_id().await?.is_some_and(|e| e > target_id)
            || sm.list_ids().await?.first() == Some(&target_id)
        {
            sm.write_earliest_hint(target_id).await;
        }
        Ok(report)
    }

    /// The snapshots of this handle's branch that hold files: every snapshot up to the latest,
    /// its tags, and its long-lived changelogs (whose data lists may be gone: their names go into
    /// `changelog_lists`).
    async fn referenced_snapshots(
        &self,
        snapshots: &mut Vec<Snapshot>,
        changelog_lists: &mut HashSet<String>,
    ) -> Result<()> {
        let sm = self.snapshot_manager();
        // A listing may lag behind the newest puts (S3): the ids up to the latest one, found by
        // probing from the LATEST hint, are read whether listed or not, so no file of a snapshot
        // the listing missed is taken for an orphan.
        let listed = sm.list_ids().await?;
        let latest = sm.latest_id().await?;
        let ids: std::collections::BTreeSet<i64> = match (listed.first(), latest) {
            (Some(first), Some(l)) => listed.iter().copied().chain(*first..=l).collect(),
            (None, Some(l)) => (sm.earliest_id().await?.unwrap_or(1)..=l).collect(),
            _ => listed.iter().copied().collect(),
        };
        for id in ids {
            match sm.try_snapshot(id).await {
                Ok(Some(s)) => snapshots.push(s),
                Ok(None) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        snapshots.extend(self.tag_manager().list().await?.into_iter().map(|(_, s)| s));
        // Long-lived changelogs hold their manifests and files like snapshots (the data lists
        // of a changelog with a producer went with its snapshot: missing is fine there).
        let cm = self.changelog_manager();
        for id in cm.list_ids().await? {
            if let Some(c) = cm.try_snapshot(id).await? {
                changelog_lists.insert(c.base_manifest_list.clone());
                changelog_lists.insert(c.delta_manifest_list.clone());
                snapshots.push(c);
            }
        }
        Ok(())
    }

    /// Files under the table that no snapshot or tag references and that are older than
    /// `older_than_millis` (epoch ms): what crashed writers and lost commits leave behind.
    /// With `dry_run` nothing is deleted.
    pub async fn remove_orphan_files(
        &self,
        older_than_millis: i64,
        dry_run: bool,
    ) -> Result<CleanupReport> {
        self.remove_orphan_files_with(older_than_millis, dry_run, &Operation::new())
            .await
    }

    /// [`Table::remove_orphan_files`] reporting progress to `op`; cancelled, it stops between two
    /// files (those deleted stay deleted: each was an orphan).
    pub async fn remove_orphan_files_with(
        &self,
        older_than_millis: i64,
        dry_run: bool,
        op: &Operation,
    ) -> Result<CleanupReport> {
        let what = format!("orphan-file removal of {}", self.identifier());
        op.phase("reading snapshots", 0);
        // Files are shared by every branch of the table: what any of them uses is kept, whichever
        // branch this handle is on (a branch without a schema stops the removal, as in Paimon).
        let main = match self.branch() {
            Some(_) => self.on_branch(super::branch::MAIN_BRANCH).await?,
            None => self.clone(),
        };
        let mut snapshots = Vec::new();
        let mut changelog_lists = HashSet::new();
        main.referenced_snapshots(&mut snapshots, &mut changelog_lists)
            .await?;
        for b in main.branches().await? {
            main.on_branch(&b.name)
                .await?
                .referenced_snapshots(&mut snapshots, &mut changelog_lists)
                .await?;
        }
        let mm = self.manifest_manager();
        let mut used_manifests: HashSet<String> = HashSet::new();
        let mut used_index: HashSet<String> = HashSet::new();
        let mut lists = Vec::new();
        for s in &snapshots {
            if let Some(name) = &s.index_manifest {
                if used_manifests.insert(name.clone()) {
                    used_index.extend(self.index_files_of(s).await?);
                }
            }
            for l in [
                Some(&s.base_manifest_list),
                Some(&s.delta_manifest_list),
                s.changelog_manifest_list.as_ref(),
            ]
            .into_iter()
            .flatten()
            {
                if used_manifests.insert(l.clone()) {
                    lists.push(l.clone());
                }
            }
        }
        let mut manifests = Vec::new();
        op.phase("reading manifest lists", lists.len() as u64);
        for l in &lists {
            op.check(&what)?;
            op.advance(0, 0);
            if changelog_lists.contains(l) && !self.io().exists(&mm.path(l)).await? {
                continue;
            }
            for m in mm.read_manifest_list(l).await? {
                if used_manifests.insert(m.file_name.clone()) {
                    manifests.push(m.file_name);
                }
            }
        }
        // A data file is used if any entry (ADD or DELETE) of any manifest names it.
        let mut used_files: HashSet<String> = HashSet::new();
        op.phase("reading manifests", manifests.len() as u64);
        for m in &manifests {
            op.check(&what)?;
            op.advance(0, 0);
            used_files.extend(
                mm.read_manifest(m)
                    .await?
                    .into_iter()
                    .map(|e: ManifestEntry| e.file.file_name),
            );
        }
        let mut report = CleanupReport::default();
        let root = format!("{}/", self.path());
        op.phase("listing files", 0);
        let listed = self.io().list_recursive(self.path()).await?;
        op.phase(
            if dry_run {
                "checking files"
            } else {
                "deleting orphan files"
            },
            listed.len() as u64,
        );
        for f in listed {
            op.check(&what)?;
            op.advance(0, 0);
            if f.last_modified_millis >= older_than_millis {
                continue;
            }
            let rel = f.path.strip_prefix(&root).unwrap_or(&f.path);
            let name = f.name();
            let top = rel.split('/').next().unwrap_or("");
            let orphan = match top {
                "schema" | "tag" | "consumer" | "branch" | "statistics" => false,
                // Every index file a kept index manifest lists is used.
                "index" => name.starts_with("index-") && !used_index.contains(&f.path),
                "changelog" => name.starts_with('.'),
                "snapshot" => name.starts_with('.'),
                "manifest" => !used_manifests.contains(name),
                _ => {
                    let data = name.starts_with("data-") || name.starts_with("changelog-");
                    (data && !used_files.contains(name))
                        || (name.starts_with('.') && name.ends_with(".tmp"))
                }
            };
            if orphan {
                if !dry_run {
                    self.io().delete(&f.path).await?;
                    op.count(1, f.size);
                }
                report.files.push(f.path.clone());
            }
        }
        report.files.sort();
        Ok(report)
    }
}
