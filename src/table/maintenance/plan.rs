//! A deleting operation's plan: the steps it will take, in the order that keeps the table
//! readable, decided before anything is deleted; and the one executor that takes them.
//!
//! Every planner in this folder loads what it needs (async, read only), decides in a pure
//! function, and returns a [`Plan`]. The plan *is* the dry run ([`Plan::report`]); executing it
//! ([`Plan::execute`]) takes the steps one by one and stops at the first error. The order of the
//! steps is the crash-safety argument, and it is the same in every plan:
//!
//! ```text
//!  entry points first            snapshot-N, changelog-N, tag-T files (readers start there)
//!     ──► hints                  EARLIEST / LATEST rewritten (hints only: readers verify them)
//!        ──► what they held      data files, changelog files, manifests, manifest lists,
//!                                index files: only those no remaining entry point reaches
//! ```
//!
//! A file is deleted only after every entry point that could reach it is gone, so stopping after
//! any prefix of the steps (a kill, a storage error) leaves every remaining snapshot, changelog
//! and tag complete; what a prefix can leave behind are files nothing references (orphans, which
//! orphan removal takes), and the next run plans again from what remains. Expiry interleaves:
//! each snapshot file is followed by the data files only it and older ones could read, so the
//! remaining snapshots stay a contiguous range (`maintenance/tests.rs` checks every prefix of
//! every plan against a model table).

use crate::error::{ConflictSnafu, Result};
use crate::spec::Snapshot;
use crate::table::progress::Operation;
use crate::table::Table;

/// One action of a plan. Paths are relative to the warehouse, as [`crate::io::FileIo`] takes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Writes an expiring snapshot's metadata as long-lived changelog `changelog-<id>` (and the
    /// changelog `LATEST` hint), before the snapshot goes.
    KeepChangelog(Box<Snapshot>),
    /// Deletes `snapshot-<id>` of the handle's branch.
    DeleteSnapshot(i64),
    /// Deletes long-lived changelog `changelog-<id>`.
    DeleteChangelog(i64),
    /// Deletes tag file `tag-<name>` of the handle's branch.
    DeleteTag(String),
    /// Publishes a tag's snapshot again as `snapshot-<id>` (a rollback to a tag that outlived its
    /// snapshot); a different snapshot under that id is a conflict.
    Restore(Box<Snapshot>),
    /// Rewrites the snapshot `EARLIEST` hint.
    EarliestHint(i64),
    /// Rewrites the snapshot `LATEST` hint.
    LatestHint(i64),
    /// Rewrites the changelog `EARLIEST` hint.
    ChangelogEarliestHint(i64),
    /// Removes the changelog hints (every changelog is gone).
    RemoveChangelogHints,
    /// Deletes a data, changelog, index or manifest file (or any file of the table's metadata);
    /// `bytes` is its size when a listing told it.
    DeleteFile { path: String, bytes: Option<u64> },
    /// Copies a file (branch creation and fast-forward).
    CopyFile { from: String, to: String },
    /// Forgets the cached hint of a directory whose files another step replaced.
    ForgetHint(String),
}

impl Step {
    /// A file deletion without a known size.
    pub fn delete(path: impl Into<String>) -> Self {
        Step::DeleteFile {
            path: path.into(),
            bytes: None,
        }
    }
}

/// What an expiry, rollback, tag deletion or orphan removal did (or, planned only, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Snapshot (or, for changelog expiry, changelog) ids removed.
    pub snapshots: Vec<i64>,
    /// Files deleted (or, for a dry run, that would be), relative to the warehouse.
    pub files: Vec<String>,
}

/// Whether an executor may stop between two steps when cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stopping {
    /// Once started, the steps run to the end (cancellation was checked while planning).
    #[default]
    AfterPlanning,
    /// Between any two steps: each step stands on its own (orphan removal).
    BetweenSteps,
}

/// The steps of one deleting operation, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// What the operation is, for errors ("snapshot expiry of db.t").
    pub what: String,
    pub steps: Vec<Step>,
    pub stopping: Stopping,
    /// The progress phase the executor reports.
    pub phase: &'static str,
}

impl Plan {
    pub fn new(what: impl Into<String>, phase: &'static str) -> Self {
        Self {
            what: what.into(),
            phase,
            ..Default::default()
        }
    }

    pub fn push(&mut self, step: Step) {
        self.steps.push(step);
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// What executing the plan reports: the dry run.
    pub fn report(&self) -> CleanupReport {
        report_of(&self.steps)
    }

    /// Takes the steps in order on `table`, reporting progress to `op`. Stops at the first
    /// error (what ran stays done: the order keeps the table readable) and, for
    /// [`Stopping::BetweenSteps`], when `op` is cancelled.
    pub async fn execute(&self, table: &Table, op: &Operation) -> Result<CleanupReport> {
        op.phase(self.phase, self.steps.len() as u64);
        let sm = table.snapshot_manager();
        let cm = table.changelog_manager();
        let io = table.io();
        let mut report = CleanupReport::default();
        for step in &self.steps {
            if self.stopping == Stopping::BetweenSteps {
                op.check(&self.what)?;
            }
            let mut bytes = 0;
            match step {
                Step::KeepChangelog(s) => {
                    cm.write_changelog(s).await?;
                    cm.write_latest_hint(s.id).await;
                }
                Step::DeleteSnapshot(id) => sm.delete(*id).await?,
                Step::DeleteChangelog(id) => cm.delete(*id).await?,
                Step::DeleteTag(name) => {
                    table.tag_manager().delete(name).await?;
                }
                Step::Restore(s) => restore(table, s).await?,
                Step::EarliestHint(id) => sm.write_earliest_hint(*id).await,
                Step::LatestHint(id) => sm.write_latest_hint(*id).await,
                Step::ChangelogEarliestHint(id) => cm.write_earliest_hint(*id).await,
                Step::RemoveChangelogHints => {
                    for hint in ["EARLIEST", "LATEST"] {
                        let path = format!("{}/changelog/{hint}", table.meta_path());
                        if let Err(e) = io.delete(&path).await {
                            tracing::warn!(%path, error = %e, "could not remove a changelog hint");
                        }
                    }
                }
                Step::DeleteFile { path, bytes: size } => {
                    io.delete(path).await?;
                    bytes = size.unwrap_or(0);
                }
                Step::CopyFile { from, to } => {
                    let content = io.read(from).await?;
                    io.write(to, content).await?;
                }
                Step::ForgetHint(dir) => io.forget_hint(dir),
            }
            record(&mut report, step);
            // Every step but forgetting a cached hint writes or deletes one file.
            op.advance(u64::from(!matches!(step, Step::ForgetHint(_))), bytes);
        }
        Ok(report)
    }
}

/// Adds what `step` removed to `report`.
fn record(report: &mut CleanupReport, step: &Step) {
    match step {
        Step::DeleteSnapshot(id) | Step::DeleteChangelog(id) => report.snapshots.push(*id),
        Step::DeleteFile { path, .. } => report.files.push(path.clone()),
        _ => {}
    }
}

fn report_of(steps: &[Step]) -> CleanupReport {
    let mut report = CleanupReport::default();
    for step in steps {
        record(&mut report, step);
    }
    report
}

/// Publishes `s` again under its id, unless that id was taken meanwhile by another snapshot
/// (this rollback's own earlier, lost answer is the same snapshot and counts as done).
async fn restore(table: &Table, s: &Snapshot) -> Result<()> {
    let sm = table.snapshot_manager();
    if sm.try_publish(s).await? {
        return Ok(());
    }
    let now = sm.try_snapshot(s.id).await?;
    if now.is_none_or(|n| n.uuid != s.uuid) {
        return ConflictSnafu {
            table: table.identifier().to_string(),
            message: format!(
                "snapshot {} was committed while rolling back to it; roll back again",
                s.id
            ),
        }
        .fail();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_of_a_plan_is_its_dry_run() {
        let mut plan = Plan::new("test", "deleting files");
        plan.push(Step::DeleteSnapshot(3));
        plan.push(Step::EarliestHint(4));
        plan.push(Step::delete("w/t/bucket-0/data-1.parquet"));
        plan.push(Step::DeleteChangelog(2));
        plan.push(Step::DeleteTag("t".into()));
        assert_eq!(
            plan.report(),
            CleanupReport {
                snapshots: vec![3, 2],
                files: vec!["w/t/bucket-0/data-1.parquet".into()],
            }
        );
    }
}
