//! Snapshot expiry (Paimon's `ExpireSnapshotsImpl`): which snapshots go is decided by
//! [`crate::snapshot::expire::expire_until`] over their commit times, the retention and the
//! consumers; what goes with them by [`plan`] over what they name.
//!
//! ```text
//!  load: ids and times ─► end (pure) ─► SnapshotFiles of EARLIEST..=end, what end and tags hold
//!  plan: data files the earliest snapshot's commit removed
//!        for id in EARLIEST..end: [changelog-id kept] ─► snapshot-id ─► data files commit id+1 removed
//!        EARLIEST = end ─► changelog files ─► manifests and lists ─► index files
//! ```
//!
//! A data file that commit `id` removed was live only in snapshots before `id`: it goes right
//! after `snapshot-(id-1)`, so a stop between two snapshots leaves only the files of the last one
//! deleted, which the next run's reading of its earliest delta takes. Files the kept snapshot
//! `end` or a tag still reads are never planned. A run stopped after its last snapshot file and
//! before `EARLIEST` is rewritten leaves that hint below the earliest snapshot: the next run then
//! deletes what the earliest snapshot's commit removed even when nothing else expires.

use std::collections::{BTreeMap, BTreeSet};

use super::arguments::{at_least_one, duration_millis, max_not_below_min};
use super::plan::{CleanupReport, Plan, Step};
use super::references::{DataFile, FileLayout, Held, SnapshotFiles};
use crate::error::Result;
use crate::snapshot::expire::{expire_until, Retention};
use crate::spec::manifest::FileKind;
use crate::spec::ChangelogProducer;
use crate::table::progress::Operation;
use crate::table::Table;

/// Snapshot expiry; unset fields take the table's retention options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireSnapshots {
    pub retain_max: Option<i64>,
    pub retain_min: Option<i64>,
    /// A duration: snapshots younger than this are kept.
    pub older_than: Option<String>,
    /// At most this many snapshots go in one run.
    pub max_deletes: Option<i64>,
}

impl ExpireSnapshots {
    /// What can be checked without the table's options.
    pub(super) fn check(&self) -> Result<()> {
        at_least_one("retain_max", self.retain_max)?;
        at_least_one("retain_min", self.retain_min)?;
        at_least_one("max_deletes", self.max_deletes)?;
        if let (Some(max), Some(min)) = (self.retain_max, self.retain_min) {
            max_not_below_min(max, min)?;
        }
        if let Some(v) = &self.older_than {
            duration_millis("older_than", v)?;
        }
        Ok(())
    }

    /// The retention this request asks for, over the table's `base` (pure).
    pub fn retention(&self, base: Retention) -> Result<Retention> {
        self.check()?;
        let r = Retention {
            max_retained: self.retain_max.unwrap_or(base.max_retained),
            min_retained: self.retain_min.unwrap_or(base.min_retained),
            expire_limit: self.max_deletes.unwrap_or(base.expire_limit),
            time_retained_millis: match &self.older_than {
                Some(v) => duration_millis("older_than", v)?,
                None => base.time_retained_millis,
            },
        };
        max_not_below_min(r.max_retained, r.min_retained)?;
        Ok(r)
    }
}

/// What the expiry of snapshots `[earliest, end)` decides over.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpiryInput {
    pub earliest: i64,
    /// The first snapshot kept.
    pub end: i64,
    /// Snapshots `earliest..=end` with what they name.
    pub snapshots: BTreeMap<i64, SnapshotFiles>,
    /// What snapshot `end` and the tags hold.
    pub held: Held,
    /// Changelogs outlive their snapshots (the table's own expiry with a decoupled lifecycle).
    pub decoupled: bool,
    /// The table has a changelog producer (its changelogs are changelog files, not its appends).
    pub produces: bool,
    /// The `EARLIEST` hint names a snapshot before `earliest`: a run stopped between its last
    /// snapshot deletion and its hint, before deleting what the earliest snapshot's commit
    /// removed. Those files are planned even when nothing expires.
    pub unfinished: bool,
}

/// The steps that expire snapshots `[earliest, end)` (pure; see the module doc for the order).
pub fn plan(input: &ExpiryInput, layout: &impl FileLayout, what: &str) -> Result<Plan> {
    let mut plan = Plan::new(what, "deleting files");
    let ExpiryInput {
        earliest,
        end,
        ref snapshots,
        ref held,
        decoupled,
        produces,
        unfinished,
    } = *input;
    if end < earliest || (end == earliest && !unfinished) {
        return Ok(plan);
    }
    // Each doomed data file, with the snapshot whose delta removed it.
    let mut doomed: BTreeMap<DataFile, i64> = BTreeMap::new();
    for (id, s) in snapshots.range(earliest..=end) {
        // A delta that is gone was removed by a run killed before its snapshot files went.
        for e in s.delta.iter().flatten() {
            match e.kind {
                // Kept changelogs of a table without a producer are its appended files.
                FileKind::Delete if decoupled && !produces && e.appended => {}
                FileKind::Delete => {
                    doomed.insert(e.file.clone(), *id);
                }
                FileKind::Add => {
                    doomed.remove(&e.file);
                }
            }
        }
    }
    doomed.retain(|f, _| !held.files.contains(f));
    let mut removed_by: BTreeMap<i64, BTreeSet<DataFile>> = BTreeMap::new();
    for (file, id) in doomed {
        removed_by.entry(id).or_default().insert(file);
    }
    let expiring = || snapshots.range(earliest..end).map(|(_, s)| s);
    // Changelog files belong to their snapshot alone: they go with it, unless they outlive it.
    let changelog_files: BTreeSet<DataFile> = expiring()
        .filter(|_| !decoupled)
        .flat_map(|s| s.changelog.iter().flatten().map(|e| e.file.clone()))
        .collect();
    let mut keep = held.manifests.clone();
    // Kept changelogs keep their changelog manifests, and without a producer their data
    // manifests (which list the appended files) too.
    if decoupled {
        for s in expiring() {
            let lists = if produces {
                vec![s.snapshot.changelog_manifest_list.as_ref()]
            } else {
                vec![
                    Some(&s.snapshot.base_manifest_list),
                    Some(&s.snapshot.delta_manifest_list),
                ]
            };
            for list in lists.into_iter().flatten() {
                keep.insert(list.clone());
                keep.extend(s.manifests_of(list).into_iter().flatten().cloned());
            }
        }
    }
    let manifests: BTreeSet<&String> = expiring()
        .flat_map(SnapshotFiles::metadata_files)
        .filter(|m| !keep.contains(*m))
        .collect();
    // Index files (dynamic buckets' HASH files) of the expiring snapshots that nothing kept lists.
    let mut index_manifests_seen = BTreeSet::new();
    let index_files: BTreeSet<&String> = expiring()
        .filter(|s| {
            s.snapshot
                .index_manifest
                .as_ref()
                .is_some_and(|n| index_manifests_seen.insert(n.clone()))
        })
        .flat_map(|s| s.index_files.iter().flatten())
        .filter(|p| !held.index_files.contains(*p))
        .collect();

    let delete_data = |plan: &mut Plan, files: Option<BTreeSet<DataFile>>| -> Result<()> {
        for f in files.into_iter().flatten() {
            plan.push(Step::delete(layout.data_path(&f)?));
        }
        Ok(())
    };
    // What the earliest snapshot's commit removed was live only in snapshots already gone.
    delete_data(&mut plan, removed_by.remove(&earliest))?;
    // Snapshot files oldest first, each followed by the data files only it (and those before
    // it) could read: wherever this stops, the snapshots left are a contiguous range whose
    // files are all still there.
    for id in earliest..end {
        if decoupled {
            if let Some(s) = snapshots.get(&id) {
                plan.push(Step::KeepChangelog(Box::new(s.snapshot.clone())));
            }
        }
        plan.push(Step::DeleteSnapshot(id));
        delete_data(&mut plan, removed_by.remove(&(id + 1)))?;
    }
    plan.push(Step::EarliestHint(end));
    // Nothing can reach these any more (left over by a stop, they are orphans: no remaining
    // manifest names them).
    delete_data(&mut plan, Some(changelog_files))?;
    for m in manifests {
        plan.push(Step::delete(layout.manifest_path(m)));
    }
    for path in index_files {
        plan.push(Step::delete(path.clone()));
    }
    Ok(plan)
}

impl Table {
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
        match self.plan_expiry(retention, op).await? {
            Some(plan) => plan.execute(self, op).await,
            None => Ok(CleanupReport::default()),
        }
    }

    /// The plan of [`Table::expire_snapshots_with`] (`None`: nothing expires); reads only.
    pub async fn plan_expiry(
        &self,
        retention: Option<Retention>,
        op: &Operation,
    ) -> Result<Option<Plan>> {
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
        let (earliest, hint) = sm.earliest_and_hint().await?;
        let (Some(earliest), Some(latest)) = (earliest, sm.latest_id().await?) else {
            return Ok(None);
        };
        // A hint below the earliest snapshot: an earlier run stopped before it finished (only a
        // hint that is there counts: a branch's or a fast-forwarded table's may be missing).
        let unfinished = hint.is_some_and(|h| h < earliest);
        let end = match self
            .expiry_end(&retention, earliest, latest, op, &what)
            .await?
        {
            Some(end) => end,
            None if unfinished => earliest,
            None => return Ok(None),
        };
        let mut input = ExpiryInput {
            earliest,
            end,
            decoupled,
            produces,
            unfinished,
            ..Default::default()
        };
        op.phase("reading manifests", (end - earliest + 1) as u64);
        for id in earliest..=end {
            op.check(&what)?;
            op.advance(0, 0);
            input
                .snapshots
                .insert(id, SnapshotFiles::load(self, sm.snapshot(id).await?).await?);
        }
        let end_snapshot = match input.snapshots.get(&end) {
            Some(s) => s.snapshot.clone(),
            None => sm.snapshot(end).await?,
        };
        input.held.hold(self, &end_snapshot).await?;
        for (_, t) in self.protecting_tags().await? {
            input.held.hold(self, &t).await?;
        }
        // The last point where stopping changes nothing.
        op.check(&what)?;
        plan(&input, self, &what).map(Some)
    }

    /// The first snapshot `retention` keeps, when it expires any (`None`: it expires none).
    async fn expiry_end(
        &self,
        retention: &Retention,
        earliest: i64,
        latest: i64,
        op: &Operation,
        what: &str,
    ) -> Result<Option<i64>> {
        let sm = self.snapshot_manager();
        if latest - earliest < retention.min_retained {
            return Ok(None);
        }
        // Cheap exit for the common case after a commit: nothing beyond the count limit and the
        // oldest snapshot's successor is still within the retention time.
        if latest - retention.max_retained < earliest {
            let next = sm.snapshot(earliest + 1).await?;
            if self.clock().now_millis() - retention.time_retained_millis <= next.time_millis {
                return Ok(None);
            }
        }
        // Commit times of the snapshots the decision can touch.
        let last_needed = latest.min(earliest + retention.expire_limit + 1);
        let mut times = Vec::new();
        op.phase("reading snapshots", (last_needed - earliest + 1) as u64);
        for id in earliest..=last_needed {
            op.check(what)?;
            op.advance(0, 0);
            times.push(sm.snapshot(id).await?.time_millis);
        }
        let end = expire_until(
            earliest,
            &times,
            self.clock().now_millis(),
            retention,
            self.min_consumer().await?,
        );
        Ok((end > earliest).then_some(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_arguments_override_the_table_retention_and_are_never_clamped() {
        let base = Retention {
            min_retained: 10,
            max_retained: 100,
            time_retained_millis: 3_600_000,
            expire_limit: 50,
        };
        assert_eq!(ExpireSnapshots::default().retention(base).unwrap(), base);
        let r = ExpireSnapshots {
            retain_max: Some(20),
            retain_min: Some(2),
            older_than: Some("30 min".into()),
            max_deletes: Some(5),
        }
        .retention(base)
        .unwrap();
        assert_eq!(
            r,
            Retention {
                min_retained: 2,
                max_retained: 20,
                time_retained_millis: 1_800_000,
                expire_limit: 5,
            }
        );
        let err = |e: ExpireSnapshots| e.retention(base).unwrap_err().to_string();
        let zero_max = ExpireSnapshots {
            retain_max: Some(0),
            ..Default::default()
        };
        assert_eq!(err(zero_max), "retain_max must be at least 1 (got 0)");
        let zero_min = ExpireSnapshots {
            retain_min: Some(0),
            ..Default::default()
        };
        assert_eq!(err(zero_min), "retain_min must be at least 1 (got 0)");
        // retain_max 5 with the table's retain_min of 10.
        let below = ExpireSnapshots {
            retain_max: Some(5),
            ..Default::default()
        };
        assert_eq!(
            err(below),
            "retain_max (5) must not be below retain_min (10)"
        );
        let bad_age = ExpireSnapshots {
            older_than: Some("soon".into()),
            ..Default::default()
        };
        assert!(err(bad_age).contains("invalid duration 'soon'"));
    }
}
