//! One core for every maintenance operation: a typed request per operation (compaction, snapshot
//! and changelog expiry, orphan removal, tags, rollback, branches), each with its validation and defaults in
//! one place. The three doors only translate:
//!
//! ```text
//!  tidelake compact|expire|...  (src/main.rs)  ─┐
//!  CALL sys.compact(...)        (sql/dml.rs)    ├─► Request ──validate──► Request::run(table, op) ──► Outcome
//!  DoAction tidelake.compact    (server/admin)  ─┘        (pure)                                   (printed / encoded)
//! ```
//!
//! The retention numbers follow Paimon's `ExpireSnapshotsImpl` and `SchemaValidation`: a count
//! below 1 is refused (Paimon's `snapshot.num-retained.min should be at least 1`), and so is a
//! `retain_max` below `retain_min` (never silently clamped). Durations are Paimon's (`1 h`, `30 min`).

use super::changelog_lifecycle::{ChangelogExpiry, ChangelogRetention};
use super::compact::CompactReport;
use super::lifecycle::{CleanupReport, RollbackTarget};
use super::progress::Operation;
use super::Table;
use crate::error::{invalid, Result};
use crate::snapshot::expire::Retention;
use crate::spec::Snapshot;

/// The age below which `remove_orphan_files` keeps a file unless told otherwise (Paimon's default:
/// a writer may still be about to commit it).
pub const DEFAULT_ORPHAN_AGE: &str = "1 d";

/// `text` as a Paimon duration in milliseconds; `what` names the argument in the error.
pub fn duration_millis(what: &str, text: &str) -> Result<i64> {
    match crate::spec::options::retention_millis(text) {
        Some(ms) => Ok(ms),
        None => invalid!("{what}: invalid duration '{text}' (use e.g. '1 h', '30 min', '10 s')"),
    }
}

/// `KEY=VALUE` (a partition or an option argument); `what` names it in the error.
pub fn key_value(text: &str, what: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => invalid!("{what} '{text}' must look like KEY=VALUE"),
    }
}

/// A count argument that must be at least 1.
fn at_least_one(what: &str, v: Option<i64>) -> Result<Option<i64>> {
    match v {
        Some(n) if n < 1 => invalid!("{what} must be at least 1 (got {n})"),
        other => Ok(other),
    }
}

/// The table options' rule, for the arguments ([`crate::spec::options::retained_in_order`]).
fn max_not_below_min(max: i64, min: i64) -> Result<()> {
    crate::spec::options::retained_in_order(("retain_max", max), ("retain_min", min))
        .map_err(|message| crate::error::InvalidArgumentSnafu { message }.build())
}

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
    fn check(&self) -> Result<()> {
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

/// A tag on a snapshot (the latest when unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateTag {
    pub name: String,
    pub snapshot_id: Option<i64>,
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
            Request::CreateTag(t) if t.name.trim().is_empty() => {
                invalid!("create_tag needs a tag name")
            }
            Request::DeleteTag { name } if name.trim().is_empty() => {
                invalid!("delete_tag needs a tag name")
            }
            Request::CreateBranch { name, .. } => super::branch::validate_branch_name(name),
            Request::DeleteBranches { names } if names.is_empty() => {
                invalid!("delete_branch needs a branch name")
            }
            Request::FastForward { name } if name.trim().is_empty() => {
                invalid!("fast_forward needs a branch name")
            }
            _ => Ok(()),
        }
    }

    /// Runs the operation on `table`, reporting progress to (and cancelled through) `op`.
    pub async fn run(self, table: &Table, op: &Operation) -> Result<Outcome> {
        self.validate()?;
        Ok(match self {
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
        })
    }
}

/// One bucket's files, as `tidelake info` and the `tidelake.table_info` action show them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketSummary {
    /// The partition's directory (`dt=2024-01-01`), empty for an unpartitioned table.
    pub partition: String,
    pub bucket: i32,
    pub files: i64,
    pub sorted_runs: i64,
    pub rows: i64,
    pub bytes: i64,
}

/// Schema, latest snapshot and per-bucket file statistics of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSummary {
    pub table: String,
    pub schema_json: String,
    pub schema_id: i64,
    /// 0 when the table has no snapshot.
    pub latest_snapshot_id: i64,
    pub buckets: Vec<BucketSummary>,
    pub total_rows: i64,
    pub total_bytes: i64,
}

/// The summary of `table` at its latest snapshot.
pub async fn summary(table: &Table) -> Result<TableSummary> {
    let plan = table.new_scan().all_levels().plan().await?;
    let schema_json = serde_json::to_string_pretty(table.schema().as_ref()).map_err(|e| {
        crate::error::InternalSnafu {
            message: format!("encoding the schema of {}: {e}", table.identifier()),
        }
        .build()
    })?;
    let mut out = TableSummary {
        table: table.identifier().to_string(),
        schema_json,
        schema_id: table.schema().id,
        latest_snapshot_id: plan.snapshot.as_ref().map_or(0, |s| s.id),
        ..Default::default()
    };
    let root = format!("{}/", table.path());
    for split in plan.splits {
        let dir = table.bucket_dir(&split.partition, split.bucket)?;
        let partition = dir
            .strip_prefix(&root)
            .unwrap_or(&dir)
            .trim_end_matches(&format!("bucket-{}", split.bucket))
            .trim_end_matches('/')
            .to_string();
        let b = BucketSummary {
            partition,
            bucket: split.bucket,
            files: split.files.len() as i64,
            sorted_runs: crate::lsm::levels::sorted_runs(&split.files).len() as i64,
            rows: split.files.iter().map(|f| f.row_count).sum(),
            bytes: split.files.iter().map(|f| f.file_size).sum(),
        };
        out.total_rows += b.rows;
        out.total_bytes += b.bytes;
        out.buckets.push(b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Retention {
        Retention {
            min_retained: 10,
            max_retained: 100,
            time_retained_millis: 3_600_000,
            expire_limit: 50,
        }
    }

    #[test]
    fn unset_expiry_arguments_keep_the_table_retention() {
        let r = ExpireSnapshots::default().retention(base()).unwrap();
        assert_eq!(r, base());
    }

    #[test]
    fn expiry_arguments_override_the_table_retention() {
        let r = ExpireSnapshots {
            retain_max: Some(20),
            retain_min: Some(2),
            older_than: Some("30 min".into()),
            max_deletes: Some(5),
        }
        .retention(base())
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
    }

    #[test]
    fn counts_below_one_and_max_below_min_are_refused_not_clamped() {
        let err = |e: ExpireSnapshots| e.retention(base()).unwrap_err().to_string();
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

    #[test]
    fn validation_without_the_table_checks_only_what_the_request_says() {
        // retain_max 5 is fine on its own; only the table's retain_min can refuse it.
        let r = Request::ExpireSnapshots(ExpireSnapshots {
            retain_max: Some(5),
            ..Default::default()
        });
        assert!(r.validate().is_ok());
        let crossed = Request::ExpireSnapshots(ExpireSnapshots {
            retain_max: Some(2),
            retain_min: Some(3),
            ..Default::default()
        });
        assert!(crossed.validate().is_err());
        let unnamed = Request::CreateTag(CreateTag::default());
        assert_eq!(
            unnamed.validate().unwrap_err().to_string(),
            "create_tag needs a tag name"
        );
    }

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

    #[test]
    fn compaction_strategy_and_key_values() {
        assert!(Compact::strategy("FULL").unwrap());
        assert!(!Compact::strategy("minor").unwrap());
        assert_eq!(
            Compact::strategy("sideways").unwrap_err().to_string(),
            "compaction mode 'sideways' is neither 'full' nor 'minor'"
        );
        assert_eq!(
            key_value(" dt = 2024-01-01 ", "partition").unwrap(),
            ("dt".to_string(), "2024-01-01".to_string())
        );
        assert!(key_value("=1", "partition").is_err());
        assert!(key_value("dt", "partition").is_err());
    }
}
