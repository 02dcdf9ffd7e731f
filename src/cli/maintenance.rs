//! The maintenance commands of the `tidelake` command (compact, expire, expire-changelogs, tag,
//! branch, rollback, orphans): each builds the maintenance core's request
//! ([`tidelake::table::maintenance::Request`], the same as `CALL sys.*`, the Flight actions and the
//! REST catalog build), runs it with a progress bar (Ctrl-C cancels it) and prints what it did.

use clap::Subcommand;
use tidelake::table::maintenance::{self, Outcome, Request};
use tidelake::{Catalog, Identifier};

use super::Result;

#[derive(Debug, Subcommand)]
pub(crate) enum TagAction {
    /// Tag a snapshot (the latest by default).
    Create {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The tag's name.
        name: String,
        /// The snapshot id.
        #[arg(long)]
        snapshot_id: Option<i64>,
    },
    List {
        /// The table, as DATABASE.TABLE.
        table: String,
    },
    Delete {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The tag's name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum BranchAction {
    /// Create a branch, empty (with the table's schemas) or from a tag.
    Create {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The branch's name.
        name: String,
        /// The tag whose snapshot becomes the branch's first.
        #[arg(long)]
        from_tag: Option<String>,
    },
    List {
        /// The table, as DATABASE.TABLE.
        table: String,
    },
    /// Delete branches (comma-separated names).
    Delete {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The branches' names, comma-separated.
        names: String,
    },
    /// Make main what the branch is.
    FastForward {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The branch's name.
        name: String,
    },
}

/// The maintenance commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Maintenance {
    /// Compact a table: what the universal picker selects, or everything with --full.
    Compact {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// Rewrite every bucket into one sorted run at the top level (drops deletes).
        #[arg(long)]
        full: bool,
        /// Only partitions with KEY=VALUE (repeatable).
        #[arg(long = "partition", value_name = "KEY=VALUE")]
        partitions: Vec<String>,
    },
    /// Expire snapshots by the table's retention options (overridable here).
    Expire {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// Keep at least this many snapshots (default: the table's snapshot.num-retained.min).
        #[arg(long)]
        retain_min: Option<i64>,
        /// Keep at most this many snapshots (default: the table's snapshot.num-retained.max).
        #[arg(long)]
        retain_max: Option<i64>,
        /// Keep snapshots younger than this, e.g. `1 h`, `30 min`, `0 ms`.
        #[arg(long)]
        older_than: Option<String>,
        /// Expire at most this many snapshots in this run.
        #[arg(long)]
        max_deletes: Option<i64>,
    },
    /// Expire long-lived changelogs (a decoupled changelog lifecycle); unset limits keep all.
    ExpireChangelogs {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// Keep at most this many changelogs (unset: no count limit).
        #[arg(long)]
        retain_max: Option<i64>,
        /// Keep at least this many changelogs (unset: 1).
        #[arg(long)]
        retain_min: Option<i64>,
        /// e.g. `1 h`: younger changelogs are kept.
        #[arg(long)]
        older_than: Option<String>,
        /// Expire at most this many in this run.
        #[arg(long)]
        max_deletes: Option<i64>,
        /// Remove every long-lived changelog.
        #[arg(long)]
        delete_all: bool,
    },
    /// Create, list or delete tags.
    Tag {
        #[command(subcommand)]
        action: TagAction,
    },
    /// Create, list, delete or fast-forward branches (read and write one as `db.t$branch_<name>`).
    Branch {
        #[command(subcommand)]
        action: BranchAction,
    },
    /// Roll a table back to a snapshot or a tag.
    Rollback {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The snapshot id.
        #[arg(long, conflicts_with = "tag", required_unless_present = "tag")]
        snapshot_id: Option<i64>,
        /// The tag.
        #[arg(long)]
        tag: Option<String>,
    },
    /// Remove files no snapshot or tag references (dry run unless --delete).
    Orphans {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// Only files older than this (default `1 d`).
        #[arg(long, default_value = "1 d")]
        older_than: String,
        /// Delete the files (without it, only list them).
        #[arg(long)]
        delete: bool,
    },
}

impl Maintenance {
    /// Runs the command on the warehouse's `catalog`.
    pub(crate) async fn run(self, catalog: Catalog) -> Result<()> {
        match self {
            Maintenance::Compact {
                table,
                full,
                partitions,
            } => {
                let request = Request::Compact(maintenance::Compact {
                    full,
                    partitions: super::key_values(&partitions, "partition")?,
                });
                let (id, outcome) = maintain(&catalog, &table, request).await?;
                if let Outcome::Compacted(report) = outcome {
                    match report.snapshot_id {
                        Some(s) => println!(
                            "compacted {} bucket(s) of {id}: {} files rewritten into {}; snapshot {s}",
                            report.buckets_compacted, report.files_before, report.files_after
                        ),
                        None => println!("{id} needs no compaction"),
                    }
                }
            }
            Maintenance::ExpireChangelogs {
                table,
                retain_max,
                retain_min,
                older_than,
                max_deletes,
                delete_all,
            } => {
                let request = Request::ExpireChangelogs(maintenance::ExpireChangelogs {
                    retain_max,
                    retain_min,
                    older_than,
                    max_deletes,
                    delete_all,
                });
                let (id, outcome) = maintain(&catalog, &table, request).await?;
                println!("{}", expired(&id, &outcome.cleanup(), "changelog"));
            }
            Maintenance::Expire {
                table,
                retain_min,
                retain_max,
                older_than,
                max_deletes,
            } => {
                let request = Request::ExpireSnapshots(maintenance::ExpireSnapshots {
                    retain_max,
                    retain_min,
                    older_than,
                    max_deletes,
                });
                let (id, outcome) = maintain(&catalog, &table, request).await?;
                println!("{}", expired(&id, &outcome.cleanup(), "snapshot"));
            }
            Maintenance::Tag { action } => match action {
                TagAction::Create {
                    table,
                    name,
                    snapshot_id,
                } => {
                    let request = Request::CreateTag(maintenance::CreateTag {
                        name: name.clone(),
                        snapshot_id,
                    });
                    let (id, outcome) = maintain(&catalog, &table, request).await?;
                    if let Outcome::Tagged(s) = outcome {
                        println!("tagged snapshot {} of {id} as '{name}'", s.id);
                    }
                }
                TagAction::List { table } => {
                    let t = catalog.load_table(&Identifier::parse(&table)?).await?;
                    for (name, s) in t.list_tags().await? {
                        println!("{name}\t{}\t{}", s.id, s.commit_kind);
                    }
                }
                TagAction::Delete { table, name } => {
                    let request = Request::DeleteTag { name: name.clone() };
                    let (id, outcome) = maintain(&catalog, &table, request).await?;
                    println!(
                        "deleted tag '{name}' of {id} ({} file(s) removed)",
                        outcome.cleanup().files.len()
                    );
                }
            },
            Maintenance::Branch { action } => {
                let (table, request) = match action {
                    BranchAction::Create {
                        table,
                        name,
                        from_tag,
                    } => (
                        table,
                        Request::CreateBranch {
                            name,
                            from_tag: from_tag.filter(|t| !t.trim().is_empty()),
                        },
                    ),
                    BranchAction::Delete { table, names } => (
                        table,
                        Request::DeleteBranches {
                            names: names
                                .split(',')
                                .map(|b| b.trim().to_string())
                                .filter(|b| !b.is_empty())
                                .collect(),
                        },
                    ),
                    BranchAction::FastForward { table, name } => {
                        (table, Request::FastForward { name })
                    }
                    BranchAction::List { table } => {
                        let t = catalog.load_table(&Identifier::parse(&table)?).await?;
                        for b in t.branches().await? {
                            println!("{}\t{}", b.name, b.create_time_millis);
                        }
                        return Ok(());
                    }
                };
                let what = request.name();
                let (id, outcome) = maintain(&catalog, &table, request).await?;
                if let Outcome::Branches(list) = outcome {
                    let names: Vec<&str> = list.iter().map(|b| b.name.as_str()).collect();
                    println!("{what} on {id}: branches now [{}]", names.join(", "));
                }
            }
            Maintenance::Rollback {
                table,
                snapshot_id,
                tag,
            } => {
                let request = Request::Rollback(maintenance::rollback_target(snapshot_id, tag)?);
                let (id, outcome) = maintain(&catalog, &table, request).await?;
                let report = outcome.cleanup();
                println!(
                    "rolled back {id}: removed snapshot(s) {:?} and {} file(s)",
                    report.snapshots,
                    report.files.len()
                );
            }
            Maintenance::Orphans {
                table,
                older_than,
                delete,
            } => {
                let request = Request::RemoveOrphans(maintenance::RemoveOrphans {
                    older_than: Some(older_than),
                    dry_run: !delete,
                });
                let (_, outcome) = maintain(&catalog, &table, request).await?;
                let report = outcome.cleanup();
                for f in &report.files {
                    println!("{f}");
                }
                let verb = if delete {
                    "deleted"
                } else {
                    "would delete (dry run; pass --delete)"
                };
                println!("{verb} {} orphan file(s)", report.files.len());
            }
        }
        Ok(())
    }
}

/// What an expiry of `kind` (snapshot or changelog) did to table `id`, counted as its progress
/// bar counts (each expired snapshot or changelog is a file too).
fn expired(
    id: &Identifier,
    report: &tidelake::table::maintenance::CleanupReport,
    kind: &str,
) -> String {
    let (entries, others) = (report.snapshots.len(), report.files.len());
    format!(
        "expired {entries} {kind}(s) {:?} of {id}, deleted {} file(s): {entries} {kind} file(s) and {others} data, changelog or manifest file(s)",
        report.snapshots,
        entries + others
    )
}

/// Runs one maintenance request on `table` with a progress bar (Ctrl-C cancels it).
async fn maintain(
    catalog: &Catalog,
    table: &str,
    request: Request,
) -> Result<(Identifier, Outcome)> {
    request.validate()?;
    let id = Identifier::parse(table)?;
    let t = catalog.load_table(&id).await?;
    let op = tidelake::table::progress::Operation::new();
    let outcome = super::progress::run(&op, request.run(&t, &op)).await?;
    Ok((id, outcome))
}
