//! Orphan removal: files under the table that no snapshot, tag or long-lived changelog of any
//! branch references and that are older than a cutoff: what crashed writers, lost commits and
//! stopped maintenance leave behind.
//!
//! ```text
//!  load: every entry point of every branch ─► their lists ─► their manifests (used names)
//!        ─► the table's files, listed ─► plan (pure): each old file that nothing uses
//! ```
//!
//! The dry run is the plan. Executed, it may stop between any two files (each deletion stands on
//! its own). Metadata that is not a snapshot's (schemas, tags, consumers, branches, statistics)
//! is never an orphan.

use std::collections::{BTreeSet, HashSet};

use super::arguments::duration_millis;
use super::plan::{CleanupReport, Plan, Step, Stopping};
use crate::error::{ErrorKind, Result};
use crate::io::FileStatus;
use crate::spec::Snapshot;
use crate::table::branch::MAIN_BRANCH;
use crate::table::progress::Operation;
use crate::table::Table;

/// The age below which `remove_orphan_files` keeps a file unless told otherwise (Paimon's default:
/// a writer may still be about to commit it).
pub const DEFAULT_ORPHAN_AGE: &str = "1 d";

/// Removal of files nothing references.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoveOrphans {
    /// Only files older than this duration ([`DEFAULT_ORPHAN_AGE`] when unset).
    pub older_than: Option<String>,
    /// List only, delete nothing.
    pub dry_run: bool,
}

impl RemoveOrphans {
    /// The modification time (epoch ms) below which an orphan is removed, at `now` (pure).
    pub fn cutoff_millis(&self, now: i64) -> Result<i64> {
        let age = self.older_than.as_deref().unwrap_or(DEFAULT_ORPHAN_AGE);
        Ok(now.saturating_sub(duration_millis("older_than", age)?))
    }
}

/// What the files in use are called.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Used {
    /// Manifest lists, manifests and index manifests, by name.
    pub manifests: HashSet<String>,
    /// Index files, by path.
    pub index_files: HashSet<String>,
    /// Data and changelog files, by name (any entry, ADD or DELETE, of any used manifest).
    pub files: HashSet<String>,
}

/// Whether `file` (at `rel`, relative to the table root) is an orphan (pure).
pub fn is_orphan(rel: &str, file: &FileStatus, used: &Used) -> bool {
    let name = file.name();
    let top = rel.split('/').next().unwrap_or("");
    match top {
        "schema" | "tag" | "consumer" | "branch" | "statistics" => false,
        // Every index file a kept index manifest lists is used.
        "index" => name.starts_with("index-") && !used.index_files.contains(&file.path),
        "changelog" | "snapshot" => name.starts_with('.'),
        "manifest" => !used.manifests.contains(name),
        _ => {
            let data = name.starts_with("data-") || name.starts_with("changelog-");
            (data && !used.files.contains(name))
                || (name.starts_with('.') && name.ends_with(".tmp"))
        }
    }
}

/// The steps that remove the orphans among `listed` (pure): those older than `cutoff_millis`
/// that nothing uses, by path.
pub fn plan(
    root: &str,
    listed: &[FileStatus],
    used: &Used,
    cutoff_millis: i64,
    what: &str,
) -> Plan {
    let mut plan = Plan::new(what, "deleting orphan files");
    plan.stopping = Stopping::BetweenSteps;
    let prefix = format!("{root}/");
    let mut orphans: Vec<&FileStatus> = listed
        .iter()
        .filter(|f| f.last_modified_millis < cutoff_millis)
        .filter(|f| is_orphan(f.path.strip_prefix(&prefix).unwrap_or(&f.path), f, used))
        .collect();
    orphans.sort_by(|a, b| a.path.cmp(&b.path));
    for f in orphans {
        plan.push(Step::DeleteFile {
            path: f.path.clone(),
            bytes: Some(f.size),
        });
    }
    plan
}

impl Table {
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
        let plan = self.plan_orphan_removal(older_than_millis, op).await?;
        if dry_run {
            return Ok(plan.report());
        }
        plan.execute(self, op).await
    }

    /// The plan of [`Table::remove_orphan_files_with`]; reads only.
    pub async fn plan_orphan_removal(
        &self,
        older_than_millis: i64,
        op: &Operation,
    ) -> Result<Plan> {
        let what = format!("orphan-file removal of {}", self.identifier());
        op.phase("reading snapshots", 0);
        // Files are shared by every branch of the table: what any of them uses is kept, whichever
        // branch this handle is on (a branch without a schema stops the removal, as in Paimon).
        let main = match self.branch() {
            Some(_) => self.on_branch(MAIN_BRANCH).await?,
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
        let mut used = Used::default();
        let mut lists = Vec::new();
        for s in &snapshots {
            if let Some(name) = &s.index_manifest {
                if used.manifests.insert(name.clone()) {
                    if let Some(entries) = super::references::present(mm.index_entries(s).await)? {
                        used.index_files
                            .extend(entries.iter().map(|e| mm.index_path(&e.file)));
                    }
                }
            }
            for l in s.manifest_lists() {
                if used.manifests.insert(l.clone()) {
                    lists.push(l.clone());
                }
            }
        }
        let mut manifests = Vec::new();
        op.phase("reading manifest lists", lists.len() as u64);
        for l in &lists {
            op.check(&what)?;
            op.advance(0, 0);
            let metas = match mm.read_manifest_list(l).await {
                Ok(metas) => metas,
                // A changelog list that is gone names nothing (see `referenced_snapshots`).
                Err(e) if e.kind() == ErrorKind::NotFound && changelog_lists.contains(l) => {
                    continue
                }
                Err(e) => return Err(e),
            };
            for m in metas {
                if used.manifests.insert(m.file_name.clone()) {
                    manifests.push(m.file_name);
                }
            }
        }
        op.phase("reading manifests", manifests.len() as u64);
        for m in &manifests {
            op.check(&what)?;
            op.advance(0, 0);
            used.files.extend(
                mm.read_manifest(m)
                    .await?
                    .into_iter()
                    .map(|e| e.file.file_name),
            );
        }
        op.phase("listing files", 0);
        let listed = self.io().list_recursive(self.path()).await?;
        // Deciding is quick; the phase is reported so a dry run's progress ends complete.
        op.phase("checking files", listed.len() as u64);
        for _ in &listed {
            op.check(&what)?;
            op.advance(0, 0);
        }
        Ok(plan(self.path(), &listed, &used, older_than_millis, &what))
    }

    /// The snapshots of this handle's branch that hold files: every snapshot up to the latest,
    /// its tags (without their changelog), and its long-lived changelogs. The lists that may be
    /// gone go into `changelog_lists`: every snapshot's changelog list (a snapshot restored from
    /// a tag names one that went when it first expired, as Paimon's `OrphanFilesClean` allows),
    /// and a long-lived changelog's data lists (they went with its snapshot).
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
        let ids: BTreeSet<i64> = match (listed.first(), latest) {
            (Some(first), Some(l)) => listed.iter().copied().chain(*first..=l).collect(),
            (None, Some(l)) => (sm.earliest_id().await?.unwrap_or(1)..=l).collect(),
            _ => listed.iter().copied().collect(),
        };
        for id in ids {
            match sm.try_snapshot(id).await {
                Ok(Some(s)) => {
                    // A snapshot a rollback published again from a tag names the changelog list
                    // its first life had, which expiry took (a tag does not keep it).
                    changelog_lists.extend(s.changelog_manifest_list.clone());
                    snapshots.push(s);
                }
                Ok(None) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        // A tag holds what a batch read of it needs, not its snapshot's changelog (expiry takes
        // that, as Paimon's does: `Held::hold`).
        for (_, mut tag) in self.tag_manager().list().await? {
            tag.changelog_manifest_list = None;
            snapshots.push(tag);
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, age: i64) -> FileStatus {
        FileStatus {
            path: path.to_string(),
            size: 10,
            last_modified_millis: age,
        }
    }

    #[test]
    fn orphans_are_old_unused_files_and_never_metadata_of_record() {
        let used = Used {
            manifests: ["manifest-a".to_string()].into(),
            index_files: ["w/t/index/index-1".to_string()].into(),
            files: ["data-used.parquet".to_string()].into(),
        };
        let listed = vec![
            file("w/t/bucket-0/data-used.parquet", 0),
            file("w/t/bucket-0/data-lost.parquet", 0),
            file("w/t/bucket-0/data-new.parquet", 100),
            file("w/t/bucket-0/.data-x.parquet.tmp", 0),
            file("w/t/manifest/manifest-a", 0),
            file("w/t/manifest/manifest-b", 0),
            file("w/t/index/index-1", 0),
            file("w/t/index/index-2", 0),
            file("w/t/schema/schema-0", 0),
            file("w/t/tag/tag-x", 0),
            file("w/t/snapshot/snapshot-1", 0),
            file("w/t/snapshot/.snapshot-2.tmp", 0),
            file("w/t/branch/branch-b/snapshot/snapshot-1", 0),
        ];
        let plan = plan("w/t", &listed, &used, 50, "test");
        assert_eq!(plan.stopping, Stopping::BetweenSteps);
        assert_eq!(
            plan.report().files,
            vec![
                "w/t/bucket-0/.data-x.parquet.tmp",
                "w/t/bucket-0/data-lost.parquet",
                "w/t/index/index-2",
                "w/t/manifest/manifest-b",
                "w/t/snapshot/.snapshot-2.tmp",
            ]
        );
    }

    #[test]
    fn orphan_cutoff_defaults_to_one_day() {
        let day = 86_400_000;
        assert_eq!(
            RemoveOrphans::default().cutoff_millis(10 * day).unwrap(),
            9 * day
        );
        let r = RemoveOrphans {
            older_than: Some("0 ms".into()),
            dry_run: true,
        };
        assert_eq!(r.cutoff_millis(5).unwrap(), 5);
        let bad = RemoveOrphans {
            older_than: Some("-1 h".into()),
            dry_run: false,
        };
        assert!(bad.cutoff_millis(5).is_err());
    }
}
