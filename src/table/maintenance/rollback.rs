//! Rollback to a snapshot or a tag: later snapshots, later tags and the files only they
//! referenced go; readers see the old state.
//!
//! ```text
//!  load: target, later snapshots (newest first), what target and the remaining tags hold
//!  plan: snapshot-latest .. snapshot-(target+1), newest first ─► [target restored] ─► LATEST =
//!        target ─► later tags ─► data files later commits added ─► their manifests ─► [EARLIEST]
//! ```
//!
//! Snapshots go newest first, so each removal leaves a committed state and no reader can reach
//! a file that is about to go. A tag that outlived its snapshot is restored as the only snapshot,
//! but only once the later ones are gone: restored first, it would leave a gap below them, and a
//! rollback stopped there would hide them from its rerun (the latest is found by probing up from
//! the hint) until a new commit filled the gap and brought them back.

use std::collections::BTreeSet;

use super::plan::{CleanupReport, Plan, Step};
use super::references::{FileLayout, Held, SnapshotFiles};
use crate::error::{invalid, Result};
use crate::spec::manifest::FileKind;
use crate::spec::Snapshot;
use crate::table::progress::Operation;
use crate::table::Table;

/// What to roll back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackTarget {
    Snapshot(i64),
    Tag(String),
}

/// What a rollback asks for, from a door's two optional arguments: exactly one must be given.
pub fn rollback_target(snapshot_id: Option<i64>, tag: Option<String>) -> Result<RollbackTarget> {
    match (snapshot_id, tag.filter(|t| !t.trim().is_empty())) {
        (Some(id), None) => Ok(RollbackTarget::Snapshot(id)),
        (None, Some(tag)) => Ok(RollbackTarget::Tag(tag)),
        (Some(_), Some(_)) => invalid!("rollback takes a snapshot id or a tag, not both"),
        (None, None) => invalid!("rollback needs a snapshot id or a tag"),
    }
}

/// What a rollback decides over.
#[derive(Debug, Clone, PartialEq)]
pub struct RollbackInput {
    pub target: Snapshot,
    /// The target's snapshot file is gone (a tag outlived it): it is published again.
    pub restore: bool,
    /// The snapshots after the target that exist, newest first.
    pub later: Vec<SnapshotFiles>,
    /// What the target and the remaining tags hold.
    pub held: Held,
    /// Tags on snapshots after the target.
    pub later_tags: Vec<String>,
    /// The lowest snapshot id listed before the rollback.
    pub first_listed: Option<i64>,
}

/// The steps of a rollback (pure; the module doc gives the order).
pub fn plan(input: &RollbackInput, layout: &impl FileLayout, what: &str) -> Result<Plan> {
    let mut plan = Plan::new(what, "deleting files");
    let target = input.target.id;
    let mut files = BTreeSet::new();
    let mut manifests = BTreeSet::new();
    for s in &input.later {
        for e in s.delta.iter().flatten() {
            if e.kind == FileKind::Add && !input.held.files.contains(&e.file) {
                files.insert(e.file.clone());
            }
        }
        manifests.extend(
            s.metadata_files()
                .filter(|m| !input.held.manifests.contains(*m)),
        );
        plan.push(Step::DeleteSnapshot(s.id()));
    }
    if input.restore {
        plan.push(Step::Restore(Box::new(input.target.clone())));
    }
    plan.push(Step::LatestHint(target));
    for name in &input.later_tags {
        plan.push(Step::DeleteTag(name.clone()));
    }
    for f in &files {
        plan.push(Step::delete(layout.data_path(f)?));
    }
    for m in manifests {
        plan.push(Step::delete(layout.manifest_path(m)));
    }
    if input.restore || input.first_listed == Some(target) {
        plan.push(Step::EarliestHint(target));
    }
    Ok(plan)
}

impl Table {
    /// Rolls the table back to a snapshot or tag: later snapshots, later tags, and the files only
    /// they referenced are removed; readers see the old state.
    pub async fn rollback_to(&self, target: RollbackTarget) -> Result<CleanupReport> {
        let plan = self.plan_rollback(target).await?;
        plan.execute(self, &Operation::new()).await
    }

    /// The plan of [`Table::rollback_to`]; reads only.
    pub async fn plan_rollback(&self, target: RollbackTarget) -> Result<Plan> {
        let what = format!("rollback of {}", self.full_name());
        let sm = self.snapshot_manager();
        let tags = self.tag_manager();
        let target = match &target {
            RollbackTarget::Snapshot(id) => sm.snapshot(*id).await?,
            RollbackTarget::Tag(name) => tags.get(name).await?,
        };
        let target_id = target.id;
        let restore = sm.try_snapshot(target_id).await?.is_none();
        let latest = match sm.latest_id().await? {
            Some(latest) => latest,
            // Everything later is gone (a stopped rollback's rerun): only the restore is left.
            None if restore => target_id,
            None => return invalid!("table {} has no snapshots to roll back", self.identifier()),
        };
        let all_tags = tags.list().await?;
        // A later tag a branch was made from keeps that branch's files: it cannot go.
        for (name, s) in all_tags.iter().filter(|(_, s)| s.id > target_id) {
            self.refuse_if_branch_base(name, s.id).await?;
        }
        let mut held = Held::default();
        held.hold(self, &target).await?;
        let mut later_tags = Vec::new();
        for (name, s) in &all_tags {
            if s.id > target_id {
                later_tags.push(name.clone());
            } else {
                held.hold(self, s).await?;
            }
        }
        let mut later = Vec::new();
        for id in (target_id + 1..=latest).rev() {
            if let Some(s) = sm.try_snapshot(id).await? {
                later.push(SnapshotFiles::load(self, s).await?);
            }
        }
        let input = RollbackInput {
            target,
            restore,
            later,
            held,
            later_tags,
            first_listed: sm.list_ids().await?.first().copied(),
        };
        plan(&input, self, &what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_takes_exactly_one_target() {
        assert_eq!(
            rollback_target(Some(3), None).unwrap(),
            RollbackTarget::Snapshot(3)
        );
        assert_eq!(
            rollback_target(None, Some("t".into())).unwrap(),
            RollbackTarget::Tag("t".into())
        );
        assert!(rollback_target(Some(3), Some("t".into())).is_err());
        assert!(rollback_target(None, Some(" ".into())).is_err());
    }
}
