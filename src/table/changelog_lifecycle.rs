//! The decoupled changelog lifecycle (Paimon's `changelog.num-retained.min/max` and
//! `changelog.time-retained`, each defaulting to its `snapshot.*` counterpart). When a table keeps
//! its changelogs longer than its snapshots, the table's own snapshot expiry writes each expired
//! snapshot's metadata to `changelog/changelog-<id>` and keeps its changelog manifests and files
//! (without a changelog producer: its data manifests and appended files). Streaming reads follow
//! those ids like snapshots. [`Table::expire_changelogs_with`] removes them by Paimon's
//! `ExpireChangelogImpl` rules: counts relative to the latest snapshot, the changelog's own commit
//! time, live consumers, and never the newest kept changelog.

use std::collections::HashSet;

use super::lifecycle::CleanupReport;
use super::progress::Operation;
use super::Table;
use crate::error::{invalid, Result};
use crate::snapshot::SnapshotManager;
use crate::spec::manifest::FileKind;
use crate::spec::Snapshot;

/// How long changelogs are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangelogRetention {
    pub min_retained: i64,
    pub max_retained: i64,
    pub time_retained_millis: i64,
    /// At most this many changelogs go per run (`snapshot.expire.limit`).
    pub max_deletes: i64,
}

/// What an `expire_changelogs` call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangelogExpiry {
    /// Those beyond a retention.
    Retain(ChangelogRetention),
    /// Every long-lived changelog (Paimon's `delete_all`); consumers are not asked.
    All,
}

impl ChangelogExpiry {
    /// The expiry an `expire_changelogs` call's arguments ask for. As Paimon's procedure, the
    /// retention starts from "keep everything", not from the table's options: only the given
    /// limits expire anything.
    pub fn from_arguments(
        retain_max: Option<i64>,
        retain_min: Option<i64>,
        older_than_millis: Option<i64>,
        max_deletes: Option<i64>,
        delete_all: bool,
    ) -> Self {
        if delete_all {
            return Self::All;
        }
        Self::Retain(ChangelogRetention {
            min_retained: retain_min.unwrap_or(1).max(1),
            max_retained: retain_max.unwrap_or(i64::MAX).max(1),
            time_retained_millis: older_than_millis.unwrap_or(i64::MAX),
            max_deletes: max_deletes.unwrap_or(i64::MAX).max(1),
        })
    }
}

impl Table {
    /// The manager of `changelog/changelog-<id>`.
    pub fn changelog_manager(&self) -> SnapshotManager {
        SnapshotManager::changelogs(self.io().clone(), self.meta_path())
    }

    /// The table's changelog retention options (each defaults to its `snapshot.*` counterpart).
    pub fn changelog_retention(&self) -> Result<ChangelogRetention> {
        let o = self.table_options()?;
        Ok(ChangelogRetention {
            min_retained: o.changelog_min_retained.unwrap_or(o.snapshot_min_retained),
            max_retained: o.changelog_max_retained.unwrap_or(o.snapshot_max_retained),
            time_retained_millis: o
                .changelog_time_retained_millis
                .unwrap_or(o.snapshot_time_retained_millis),
            max_deletes: o.snapshot_expire_limit,
        })
    }

    /// Whether changelogs outlive snapshots: some changelog retention exceeds its snapshot one.
    pub fn changelogs_decoupled(&self) -> Result<bool> {
        let (c, s) = (self.changelog_retention()?, self.retention()?);
        Ok(c.max_retained > s.max_retained
            || c.time_retained_millis > s.time_retained_millis
            || c.min_retained > s.min_retained)
    }

    /// Snapshot `id`, or the long-lived changelog kept for it after it expired.
    pub async fn snapshot_or_changelog(&self, id: i64) -> Result<Option<Snapshot>> {
        match self.snapshot_manager().try_snapshot(id).await? {
            Some(s) => Ok(Some(s)),
            None => self.changelog_manager().try_snapshot(id).await,
        }
    }

    /// The oldest id whose changes can still be read: the earliest long-lived changelog, else
    /// the earliest snapshot.
    pub async fn earliest_readable_id(&self) -> Result<Option<i64>> {
        match self.changelog_manager().earliest_id().await? {
            Some(id) => Ok(Some(id)),
            None => self.snapshot_manager().earliest_id().await,
        }
    }

    /// Expires long-lived changelogs as `expiry` asks; the report lists the changelog ids removed
    /// (as `snapshots`) and the files deleted.
    pub async fn expire_changelogs_with(
        &self,
        expiry: ChangelogExpiry,
        op: &Operation,
    ) -> Result<CleanupReport> {
        match expiry {
            ChangelogExpiry::Retain(r) => self.expire_changelogs_retaining(r, op).await,
            ChangelogExpiry::All => self.expire_all_changelogs(op).await,
        }
    }

    async fn expire_changelogs_retaining(
        &self,
        retention: ChangelogRetention,
        op: &Operation,
    ) -> Result<CleanupReport> {
        let r = retention;
        if r.max_retained < r.min_retained {
            return invalid!(
                "retain_max ({}) must not be below retain_min ({})",
                r.max_retained,
                r.min_retained
            );
        }
        let sm = self.snapshot_manager();
        let cm = self.changelog_manager();
        let (Some(latest), Some(_), Some(earliest_cl), Some(latest_cl)) = (
            sm.latest_id().await?,
            sm.earliest_id().await?,
            cm.earliest_id().await?,
            cm.latest_id().await?,
        ) else {
            return Ok(CleanupReport::default());
        };
        let min = latest
            .saturating_sub(r.max_retained.saturating_sub(1))
            .max(earliest_cl);
        let mut max_exclusive = latest - r.min_retained + 1;
        if let Some(c) = self.min_consumer().await? {
            max_exclusive = max_exclusive.min(c);
        }
        max_exclusive = max_exclusive
            .min(earliest_cl.saturating_add(r.max_deletes))
            .min(latest_cl);
        if max_exclusive <= earliest_cl {
            return Ok(CleanupReport::default());
        }
        let older_than = self
            .clock()
            .now_millis()
            .saturating_sub(r.time_retained_millis);
        op.phase("reading changelogs", (max_exclusive - min + 1) as u64);
        let what = format!("changelog expiry of {}", self.identifier());
        let mut end = max_exclusive;
        for id in min..=max_exclusive {
            op.check(&what)?;
            op.advance(0, 0);
            if let Some(c) = cm.try_snapshot(id).await? {
                if older_than <= c.time_millis {
                    end = id;
                    break;
                }
            }
        }
        self.expire_changelogs_until(earliest_cl, end, op).await
    }

    /// Removes every long-lived changelog; they must all be older than the earliest snapshot.
    async fn expire_all_changelogs(&self, op: &Operation) -> Result<CleanupReport> {
        let cm = self.changelog_manager();
        let (Some(earliest_cl), Some(latest_cl)) = (cm.earliest_id().await?, cm.latest_id().await?)
        else {
            return Ok(CleanupReport::default());
        };
        if let Some(earliest) = self.snapshot_manager().earliest_id().await? {
            if latest_cl >= earliest {
                return invalid!(
                    "the latest changelog ({latest_cl}) of {} is not older than its earliest snapshot ({earliest})",
                    self.identifier()
                );
            }
        }
        let report = self
            .expire_changelogs_until(earliest_cl, latest_cl + 1, op)
            .await?;
        for hint in ["EARLIEST", "LATEST"] {
            let path = format!("{}/changelog/{hint}", self.meta_path());
            if let Err(e) = self.io().delete(&path).await {
                tracing::warn!(%path, error = %e, "could not remove a changelog hint");
            }
        }
        Ok(report)
    }

    /// Deletes changelogs `[earliest, end)` with the files and manifests only they hold.
    async fn expire_changelogs_until(
        &self,
        earliest: i64,
        end: i64,
        op: &Operation,
    ) -> Result<CleanupReport> {
        let mut report = CleanupReport::default();
        if end <= earliest {
            return Ok(report);
        }
        let what = format!("changelog expiry of {}", self.identifier());
        let cm = self.changelog_manager();
        let mm = self.manifest_manager();
        // What later changelogs, the earliest snapshot and tags still use.
        let mut keep_manifests = HashSet::new();
        let mut keep_files = HashSet::new();
        let mut holders: Vec<Snapshot> = Vec::new();
        if let Some(c) = cm.try_snapshot(end).await? {
            holders.push(c);
        }
        if let Some(id) = self.snapshot_manager().earliest_id().await? {
            holders.push(self.snapshot_manager().snapshot(id).await?);
        }
        for s in &holders {
            for list in [&s.base_manifest_list, &s.delta_manifest_list] {
                keep_manifests.insert(list.clone());
                // A changelog with a producer keeps no data lists (they went with its snapshot).
                if !self.io().exists(&mm.path(list)).await? {
                    continue;
                }
                for m in mm.read_manifest_list(list).await? {
                    keep_manifests.insert(m.file_name);
                }
            }
        }
        for (_, t) in self.protecting_tags().await? {
            let (files, manifests) = self.references(&t).await?;
            keep_files.extend(files);
            keep_manifests.extend(manifests);
        }
        op.check(&what)?;
        op.phase("deleting changelogs", (end - earliest) as u64);
        for id in earliest..end {
            let Some(c) = cm.try_snapshot(id).await? else {
                continue;
            };
            let mut doomed = std::collections::BTreeSet::new();
            let lists: Vec<&String> = match &c.changelog_manifest_list {
                Some(list) => {
                    for e in mm.read_entries_of_list(list).await? {
                        if e.kind == FileKind::Add {
                            doomed.insert((e.partition, e.bucket, e.file.file_name));
                        }
                    }
                    vec![list]
                }
                None => {
                    for e in mm.read_entries_of_list(&c.delta_manifest_list).await? {
                        let key = (e.partition, e.bucket, e.file.file_name);
                        if e.kind == FileKind::Delete && !keep_files.contains(&key) {
                            doomed.insert(key);
                        }
                    }
                    vec![&c.delta_manifest_list, &c.base_manifest_list]
                }
            };
            let mut paths = Vec::new();
            for (partition, bucket, name) in &doomed {
                paths.push(format!("{}/{name}", self.bucket_dir(partition, *bucket)?));
            }
            for list in lists {
                if keep_manifests.contains(list) || !self.io().exists(&mm.path(list)).await? {
                    continue;
                }
                for m in mm.read_manifest_list(list).await? {
                    if keep_manifests.insert(m.file_name.clone()) {
                        paths.push(mm.path(&m.file_name));
                    }
                }
                paths.push(mm.path(list));
                keep_manifests.insert(list.clone());
            }
            // The changelog goes before its files, so a kill in between leaves only orphans.
            cm.delete(id).await?;
            report.snapshots.push(id);
            for path in paths {
                self.io().delete(&path).await?;
                report.files.push(path);
            }
            op.advance(1, 0);
        }
        cm.write_earliest_hint(end).await;
        Ok(report)
    }
}
