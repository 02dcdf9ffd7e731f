//! The decoupled changelog lifecycle (Paimon's `changelog.num-retained.min/max` and
//! `changelog.time-retained`, each defaulting to its `snapshot.*` counterpart). When a table keeps
//! its changelogs longer than its snapshots, the table's own snapshot expiry writes each expired
//! snapshot's metadata to `changelog/changelog-<id>` and keeps its changelog manifests and files
//! (without a changelog producer: its data manifests and appended files). Streaming reads follow
//! those ids like snapshots. Their expiry follows Paimon's `ExpireChangelogImpl`: counts relative
//! to the latest snapshot, the changelog's own commit time, live consumers, and never the newest
//! kept changelog.
//!
//! ```text
//!  load: which changelogs go (ids, times, consumers) ─► SnapshotFiles of each, what the next
//!        changelog, the earliest snapshot and the tags hold
//!  plan: for id in EARLIEST..end: changelog-id ─► its files, manifests and lists
//!        ─► changelog EARLIEST = end [─► hints removed, when all go]
//! ```
//!
//! Each changelog goes before its files, so a stop in between leaves only orphans.

use std::collections::BTreeSet;

use super::arguments::{at_least_one, duration_millis, max_not_below_min};
use super::plan::{CleanupReport, Plan, Step};
use super::references::{FileLayout, Held, SnapshotFiles};
use crate::error::{invalid, Result};
use crate::spec::manifest::FileKind;
use crate::table::progress::Operation;
use crate::table::Table;

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

/// Expiry of long-lived changelogs. As Paimon's procedure, unset limits keep everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireChangelogs {
    pub retain_max: Option<i64>,
    pub retain_min: Option<i64>,
    pub older_than: Option<String>,
    pub max_deletes: Option<i64>,
    /// Remove every long-lived changelog (consumers are not asked).
    pub delete_all: bool,
}

impl ExpireChangelogs {
    /// The expiry this request asks for (pure).
    pub fn expiry(&self) -> Result<ChangelogExpiry> {
        if self.delete_all {
            return Ok(ChangelogExpiry::All);
        }
        let r = ChangelogRetention {
            min_retained: at_least_one("retain_min", self.retain_min)?.unwrap_or(1),
            max_retained: at_least_one("retain_max", self.retain_max)?.unwrap_or(i64::MAX),
            time_retained_millis: match &self.older_than {
                Some(v) => duration_millis("older_than", v)?,
                None => i64::MAX,
            },
            max_deletes: at_least_one("max_deletes", self.max_deletes)?.unwrap_or(i64::MAX),
        };
        max_not_below_min(r.max_retained, r.min_retained)?;
        Ok(ChangelogExpiry::Retain(r))
    }
}

/// What the expiry of changelogs `[earliest, end)` decides over.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangelogInput {
    pub earliest: i64,
    pub end: i64,
    /// The changelogs of `earliest..end` that exist, with what they name.
    pub changelogs: Vec<SnapshotFiles>,
    /// What the next changelog, the earliest snapshot and the tags hold.
    pub held: Held,
    /// Every changelog goes: the hints go too.
    pub all: bool,
}

/// The steps that expire changelogs `[earliest, end)` (pure).
pub fn plan(input: &ChangelogInput, layout: &impl FileLayout, what: &str) -> Result<Plan> {
    let mut plan = Plan::new(what, "deleting changelogs");
    if input.end <= input.earliest {
        return Ok(plan);
    }
    let mut gone = input.held.manifests.clone();
    for c in &input.changelogs {
        let mut doomed = BTreeSet::new();
        let lists: Vec<&String> = match &c.snapshot.changelog_manifest_list {
            // With a producer: its changelog files, which belong to it alone.
            Some(list) => {
                for e in c.changelog.iter().flatten() {
                    if e.kind == FileKind::Add {
                        doomed.insert(&e.file);
                    }
                }
                vec![list]
            }
            // Without: the appended files its commit replaced (tags may still read them).
            None => {
                for e in c.delta.iter().flatten() {
                    if e.kind == FileKind::Delete && !input.held.files.contains(&e.file) {
                        doomed.insert(&e.file);
                    }
                }
                vec![
                    &c.snapshot.delta_manifest_list,
                    &c.snapshot.base_manifest_list,
                ]
            }
        };
        plan.push(Step::DeleteChangelog(c.id()));
        for f in doomed {
            plan.push(Step::delete(layout.data_path(f)?));
        }
        for list in lists {
            let Some(manifests) = c.manifests_of(list) else {
                continue;
            };
            if gone.contains(list) {
                continue;
            }
            for m in manifests {
                if gone.insert(m.clone()) {
                    plan.push(Step::delete(layout.manifest_path(m)));
                }
            }
            plan.push(Step::delete(layout.manifest_path(list)));
            gone.insert(list.clone());
        }
    }
    plan.push(Step::ChangelogEarliestHint(input.end));
    if input.all {
        plan.push(Step::RemoveChangelogHints);
    }
    Ok(plan)
}

impl Table {
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

    /// Expires long-lived changelogs as `expiry` asks; the report lists the changelog ids removed
    /// (as `snapshots`) and the files deleted.
    pub async fn expire_changelogs_with(
        &self,
        expiry: ChangelogExpiry,
        op: &Operation,
    ) -> Result<CleanupReport> {
        match self.plan_changelog_expiry(expiry, op).await? {
            Some(plan) => plan.execute(self, op).await,
            None => Ok(CleanupReport::default()),
        }
    }

    /// The plan of [`Table::expire_changelogs_with`] (`None`: nothing expires); reads only.
    pub async fn plan_changelog_expiry(
        &self,
        expiry: ChangelogExpiry,
        op: &Operation,
    ) -> Result<Option<Plan>> {
        let what = format!("changelog expiry of {}", self.identifier());
        let cm = self.changelog_manager();
        let (earliest, end, all) = match expiry {
            ChangelogExpiry::Retain(r) => match self.changelogs_beyond(r, op, &what).await? {
                Some((earliest, end)) => (earliest, end, false),
                None => return Ok(None),
            },
            ChangelogExpiry::All => {
                let (Some(earliest_cl), Some(latest_cl)) =
                    (cm.earliest_id().await?, cm.latest_id().await?)
                else {
                    return Ok(None);
                };
                if let Some(earliest) = self.snapshot_manager().earliest_id().await? {
                    if latest_cl >= earliest {
                        return invalid!(
                            "the latest changelog ({latest_cl}) of {} is not older than its earliest snapshot ({earliest})",
                            self.identifier()
                        );
                    }
                }
                (earliest_cl, latest_cl + 1, true)
            }
        };
        if end <= earliest {
            return Ok(None);
        }
        let mut input = ChangelogInput {
            earliest,
            end,
            all,
            ..Default::default()
        };
        // What the next changelog, the earliest snapshot and the tags still use.
        if let Some(c) = cm.try_snapshot(end).await? {
            input.held.hold_lists(self, &c).await?;
        }
        let sm = self.snapshot_manager();
        if let Some(id) = sm.earliest_id().await? {
            input.held.hold_lists(self, &sm.snapshot(id).await?).await?;
        }
        for (_, t) in self.protecting_tags().await? {
            input.held.hold(self, &t).await?;
        }
        for id in earliest..end {
            if let Some(c) = cm.try_snapshot(id).await? {
                input.changelogs.push(SnapshotFiles::load(self, c).await?);
            }
        }
        op.check(&what)?;
        plan(&input, self, &what).map(Some)
    }

    /// The changelogs a retention expires, `[earliest, end)` (`None`: none).
    async fn changelogs_beyond(
        &self,
        r: ChangelogRetention,
        op: &Operation,
        what: &str,
    ) -> Result<Option<(i64, i64)>> {
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
            return Ok(None);
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
            return Ok(None);
        }
        let older_than = self
            .clock()
            .now_millis()
            .saturating_sub(r.time_retained_millis);
        op.phase("reading changelogs", (max_exclusive - min + 1) as u64);
        let mut end = max_exclusive;
        for id in min..=max_exclusive {
            op.check(what)?;
            op.advance(0, 0);
            if let Some(c) = cm.try_snapshot(id).await? {
                if older_than <= c.time_millis {
                    end = id;
                    break;
                }
            }
        }
        Ok(Some((earliest_cl, end)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changelog_expiry_keeps_everything_unless_told() {
        assert_eq!(
            ExpireChangelogs::default().expiry().unwrap(),
            ChangelogExpiry::Retain(ChangelogRetention {
                min_retained: 1,
                max_retained: i64::MAX,
                time_retained_millis: i64::MAX,
                max_deletes: i64::MAX,
            })
        );
        let all = ExpireChangelogs {
            delete_all: true,
            retain_max: Some(0),
            ..Default::default()
        };
        assert_eq!(all.expiry().unwrap(), ChangelogExpiry::All);
        let crossed = ExpireChangelogs {
            retain_max: Some(1),
            retain_min: Some(2),
            ..Default::default()
        };
        assert_eq!(
            crossed.expiry().unwrap_err().to_string(),
            "retain_max (1) must not be below retain_min (2)"
        );
    }
}
