//! Maintenance: every operation that changes a table's history rather than its rows
//! (compaction's requests, snapshot and changelog expiry, orphan removal, tags, rollback,
//! branches), one typed [`Request`] per operation, checked in one place and run by one core
//! whichever door asked:
//!
//! ```text
//!  tidelake compact|expire|...   (src/main.rs)         ─┐
//!  CALL sys.compact(...)         (sql/call.rs)          │
//!  DoAction tidelake.compact     (server/admin.rs)      ├─► Request ─validate─► run ─► Outcome
//!  REST …/tags, rollback, branches (server/rest/)      ─┘            (pure)     │   (printed /
//!                                                                               │    encoded)
//!                                          after_change: subscribers woken, metrics counted
//! ```
//!
//! Each deleting operation is a file of its own, made the same way: load (async, reads only),
//! decide in a pure `plan` function, then [`plan::Plan::execute`]; the dry run is the plan.
//! [`plan`] states the order that keeps every remaining snapshot readable wherever a run stops,
//! and `tests.rs` checks it on a model table for every prefix of every plan.
//!
//! ```text
//!  references.rs         what holds files (loading, tolerant of a stopped run's leftovers)
//!  plan.rs               Step, Plan, the executor, CleanupReport
//!  expire_snapshots.rs   expire_changelogs.rs   rollback.rs   orphans.rs   tags.rs   branches.rs
//!  arguments.rs          durations, KEY=VALUE, Paimon's counting rules
//!  summary.rs            the read-only table summary
//! ```

pub mod arguments;
pub mod branches;
pub mod expire_changelogs;
pub mod expire_snapshots;
pub mod orphans;
pub mod plan;
pub mod references;
pub mod rollback;
pub mod summary;
pub mod tags;
#[cfg(test)]
mod tests;

pub use arguments::{duration_millis, key_value};
pub use expire_changelogs::{ChangelogExpiry, ChangelogRetention, ExpireChangelogs};
pub use expire_snapshots::ExpireSnapshots;
pub use orphans::{RemoveOrphans, DEFAULT_ORPHAN_AGE};
pub use plan::{CleanupReport, Plan, Step};
pub use rollback::{rollback_target, RollbackTarget};
pub use summary::{summary, BucketSummary, TableSummary};
pub use tags::CreateTag;

use super::compact::CompactReport;
use super::progress::Operation;
use super::Table;
use crate::error::{invalid, Result};
use crate::spec::Snapshot;

/// Compaction of the latest snapshot's buckets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compact {
    /// Every bucket into one sorted run at the max level (deletes dropped); otherwise only what
    /// the universal picker selects.
    pub full: bool,
    /// `KEY=VALUE` partition filters (none: every partition).
    pub partitions: Vec<(String, String)>,
}

impl Compact {
    /// Paimon's `compact_strategy` argument: `full` or `minor`.
    pub fn strategy(text: &str) -> Result<bool> {
        match text.trim().to_ascii_lowercase().as_str() {
            "full" => Ok(true),
            "minor" => Ok(false),
            _ => invalid!("compaction mode '{text}' is neither 'full' nor 'minor'"),
        }
    }
}

/// One maintenance operation on one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Compact(Compact),
    ExpireSnapshots(ExpireSnapshots),
    ExpireChangelogs(ExpireChangelogs),
    RemoveOrphans(RemoveOrphans),
    CreateTag(CreateTag),
    DeleteTag {
        name: String,
    },
    Rollback(RollbackTarget),
    /// A branch, empty or from a tag.
    CreateBranch {
        name: String,
        from_tag: Option<String>,
    },
    /// Branches by name (Paimon's procedure takes a comma-separated list).
    DeleteBranches {
        names: Vec<String>,
    },
    /// Main becomes what the branch is.
    FastForward {
        name: String,
    },
}

/// What an operation did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Compacted(CompactReport),
    Cleaned(CleanupReport),
    Tagged(Box<Snapshot>),
    /// The table's branches after a branch operation.
    Branches(Vec<super::branch::BranchInfo>),
}

impl Outcome {
    /// The cleanup report of an expiry, orphan removal, tag deletion or rollback (empty for the
    /// others).
    pub fn cleanup(self) -> CleanupReport {
        match self {
            Outcome::Cleaned(r) => r,
            _ => CleanupReport::default(),
        }
    }

    /// One number for `CALL` results: buckets compacted, snapshots or changelogs expired, files
    /// removed, or the tagged snapshot's id.
    pub fn count(&self, request: &Request) -> i64 {
        match (self, request) {
            (Outcome::Compacted(r), _) => r.buckets_compacted as i64,
            (Outcome::Tagged(s), _) => s.id,
            (Outcome::Branches(b), _) => b.len() as i64,
            (Outcome::Cleaned(r), Request::RemoveOrphans(_)) => r.files.len() as i64,
            (Outcome::Cleaned(r), _) => r.snapshots.len() as i64,
        }
    }
}

impl Request {
    /// The operation's name, as the procedures and actions spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Compact(_) => "compact",
            Request::ExpireSnapshots(_) => "expire_snapshots",
            Request::ExpireChangelogs(_) => "expire_changelogs",
            Request::RemoveOrphans(_) => "remove_orphan_files",
            Request::CreateTag(_) => "create_tag",
            Request::DeleteTag { .. } => "delete_tag",
            Request::Rollback(_) => "rollback",
            Request::CreateBranch { .. } => "create_branch",
            Request::DeleteBranches { .. } => "delete_branch",
            Request::FastForward { .. } => "fast_forward",
        }
    }

    /// Checks the request without touching storage: what `run` would refuse before reading.
    pub fn validate(&self) -> Result<()> {
        match self {
            Request::ExpireSnapshots(e) => e.check(),
            Request::ExpireChangelogs(e) => e.expiry().map(|_| ()),
            Request::RemoveOrphans(r) => r.cutoff_millis(0).map(|_| ()),
            Request::CreateTag(t) => arguments::named("create_tag", "tag", &t.name),
            Request::DeleteTag { name } => arguments::named("delete_tag", "tag", name),
            Request::Rollback(RollbackTarget::Tag(name)) => {
                arguments::named("rollback", "tag", name)
            }
            Request::CreateBranch { name, .. } => super::branch::validate_branch_name(name),
            Request::DeleteBranches { names } if names.is_empty() => {
                invalid!("delete_branch needs a branch name")
            }
            Request::DeleteBranches { .. } => Ok(()),
            Request::FastForward { name } => arguments::named("fast_forward", "branch", name),
            Request::Compact(_) | Request::Rollback(RollbackTarget::Snapshot(_)) => Ok(()),
        }
    }

    /// Runs the operation on `table`, reporting progress to (and cancelled through) `op`; then
    /// the effects every door shares ([`after_change`]).
    pub async fn run(self, table: &Table, op: &Operation) -> Result<Outcome> {
        self.validate()?;
        let name = self.name();
        let moves_history = matches!(self, Request::Rollback(_) | Request::FastForward { .. });
        let outcome = match self {
            Request::Compact(c) => {
                let filter = table.partition_values(&c.partitions)?;
                Outcome::Compacted(table.compact_with(c.full, filter, op).await?)
            }
            Request::ExpireSnapshots(e) => {
                let retention = e.retention(table.retention()?)?;
                Outcome::Cleaned(table.expire_snapshots_with(Some(retention), op).await?)
            }
            Request::ExpireChangelogs(e) => {
                Outcome::Cleaned(table.expire_changelogs_with(e.expiry()?, op).await?)
            }
            Request::RemoveOrphans(r) => {
                let cutoff = r.cutoff_millis(table.clock().now_millis())?;
                Outcome::Cleaned(
                    table
                        .remove_orphan_files_with(cutoff, r.dry_run, op)
                        .await?,
                )
            }
            Request::CreateTag(t) => {
                Outcome::Tagged(Box::new(table.create_tag(&t.name, t.snapshot_id).await?))
            }
            Request::DeleteTag { name } => Outcome::Cleaned(table.delete_tag(&name).await?),
            Request::Rollback(target) => Outcome::Cleaned(table.rollback_to(target).await?),
            Request::CreateBranch { name, from_tag } => {
                table.create_branch(&name, from_tag.as_deref()).await?;
                Outcome::Branches(table.branches().await?)
            }
            Request::DeleteBranches { names } => {
                for name in &names {
                    table.delete_branch(name).await?;
                }
                Outcome::Branches(table.branches().await?)
            }
            Request::FastForward { name } => {
                table.fast_forward(&name).await?;
                Outcome::Branches(table.branches().await?)
            }
        };
        after_change(name, moves_history);
        Ok(outcome)
    }
}

/// What follows every successful maintenance operation, whichever door asked: it is counted,
/// and when it moved the table's history (a rollback, a fast-forward) this process's
/// subscriptions are woken to look at the new latest snapshot. (Commits do the same in
/// [`crate::table::commit`]; caches need nothing: every file a plan deletes is forgotten by
/// [`crate::io::FileIo::delete`], and a fast-forward's plan forgets the hints it replaced.)
fn after_change(operation: &'static str, moves_history: bool) {
    crate::metrics::metrics()
        .maintenance
        .get_or_create(&[("operation", operation)])
        .inc();
    if moves_history {
        super::changes::notify_commit();
    }
}
