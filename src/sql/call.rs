//! `CALL sys.<procedure>(...)`: Paimon's procedure names and parameters, positional or named
//! (`name => value`), parsed into the maintenance core's [`crate::table::maintenance::Request`]
//! and run there. Only the translation lives here; validation and defaults are the core's.

use datafusion::sql::sqlparser::ast::{Expr, Value};

use super::{object_name_parts, SqlEngine, SqlSession};
use crate::catalog::Identifier;
use crate::error::{invalid, Result};

/// The procedures `CALL sys.<name>(...)` knows, each with its parameters in positional order
/// (Paimon's names; named arguments `name => value` may be given in any order).
const PROCEDURES: &[(&str, &[&str])] = &[
    ("compact", &["table", "compact_strategy", "partitions"]),
    (
        "expire_snapshots",
        &[
            "table",
            "retain_max",
            "retain_min",
            "older_than",
            "max_deletes",
        ],
    ),
    (
        "expire_changelogs",
        &[
            "table",
            "retain_max",
            "retain_min",
            "older_than",
            "max_deletes",
            "delete_all",
        ],
    ),
    ("remove_orphan_files", &["table", "older_than", "dry_run"]),
    ("create_tag", &["table", "tag", "snapshot_id"]),
    ("delete_tag", &["table", "tag"]),
    ("rollback_to", &["table", "snapshot_or_tag"]),
    ("create_branch", &["table", "branch", "tag"]),
    ("delete_branch", &["table", "branch"]),
    ("fast_forward", &["table", "branch"]),
    ("reset_options", &["table"]),
];

fn unknown_procedure(name: &str) -> Result<i64> {
    let names: Vec<String> = PROCEDURES.iter().map(|(p, _)| format!("sys.{p}")).collect();
    invalid!(
        "unknown procedure '{name}'; procedures are {}",
        names.join(", ")
    )
}

/// The literal arguments of one `CALL`, by parameter name.
struct CallArgs {
    proc: String,
    named: std::collections::HashMap<String, Option<String>>,
    /// Positional arguments past the declared parameters (`reset_options`' keys).
    rest: Vec<Option<String>>,
}

impl CallArgs {
    fn parse(
        proc: &str,
        params: &[&str],
        f: &datafusion::sql::sqlparser::ast::Function,
    ) -> Result<Self> {
        use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
        let list = match &f.args {
            FunctionArguments::None => &vec![],
            FunctionArguments::List(l) => &l.args,
            FunctionArguments::Subquery(_) => return invalid!("CALL arguments must be literals"),
        };
        let literal = |e: &FunctionArgExpr| -> Result<Option<String>> {
            match e {
                FunctionArgExpr::Expr(Expr::Value(v)) => match &v.value {
                    Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                        Ok(Some(s.clone()))
                    }
                    Value::Number(n, _) => Ok(Some(n.clone())),
                    Value::Boolean(b) => Ok(Some(b.to_string())),
                    Value::Null => Ok(None),
                    other => invalid!("CALL argument '{other}' must be a string or a number"),
                },
                other => invalid!("CALL argument '{other}' must be a literal"),
            }
        };
        let mut args = CallArgs {
            proc: proc.to_string(),
            named: Default::default(),
            rest: vec![],
        };
        let mut position = 0;
        for a in list {
            let (name, value) = match a {
                FunctionArg::Unnamed(e) => {
                    let value = literal(e)?;
                    let Some(name) = params.get(position) else {
                        args.rest.push(value);
                        continue;
                    };
                    position += 1;
                    (name.to_string(), value)
                }
                FunctionArg::Named { name, arg, .. }
                | FunctionArg::ExprNamed {
                    arg,
                    name: Expr::Identifier(name),
                    ..
                } => {
                    let name = name.value.to_ascii_lowercase();
                    if !params.contains(&name.as_str()) {
                        return invalid!(
                            "sys.{proc} has no parameter '{name}'; its parameters are {}",
                            params.join(", ")
                        );
                    }
                    (name, literal(arg)?)
                }
                other => return invalid!("CALL argument '{other}' must be a literal"),
            };
            if args.named.insert(name.clone(), value).is_some() {
                return invalid!("sys.{proc}: argument '{name}' is given twice");
            }
        }
        Ok(args)
    }

    fn text(&self, name: &str) -> Option<String> {
        self.named.get(name).cloned().flatten()
    }

    fn required(&self, name: &str) -> Result<String> {
        match self.text(name) {
            Some(v) => Ok(v),
            None => invalid!("sys.{}: argument '{name}' is required", self.proc),
        }
    }

    fn number(&self, name: &str) -> Result<Option<i64>> {
        match self.text(name) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<i64>() {
                Ok(n) => Ok(Some(n)),
                Err(_) => invalid!("sys.{}: {name} '{v}' is not a number", self.proc),
            },
        }
    }

    fn flag(&self, name: &str, default: bool) -> Result<bool> {
        match self.text(name) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => invalid!("sys.{}: {name} '{v}' is neither true nor false", self.proc),
            },
        }
    }
}

/// `CALL sys.<procedure>(...)`: the arguments parsed into the maintenance core's request and run
/// there. Returns the procedure's count (buckets compacted, snapshots expired, files removed).
pub(super) async fn call(
    engine: &SqlEngine,
    session: &SqlSession,
    f: datafusion::sql::sqlparser::ast::Function,
) -> Result<i64> {
    use crate::table::maintenance::{
        Compact, CreateTag, ExpireChangelogs, ExpireSnapshots, RemoveOrphans, Request,
    };
    let name = object_name_parts(&f.name)?;
    let (proc, params) = match name.as_slice() {
        [sys, p] if sys.eq_ignore_ascii_case("sys") => {
            match PROCEDURES.iter().find(|(n, _)| n.eq_ignore_ascii_case(p)) {
                Some(found) => *found,
                None => return unknown_procedure(&f.name.to_string()),
            }
        }
        _ => return unknown_procedure(&f.name.to_string()),
    };
    let args = CallArgs::parse(proc, params, &f)?;
    let table_name = args.required("table")?;
    let id = match table_name.split('.').collect::<Vec<_>>().as_slice() {
        [t] => Identifier::new(session.database.clone(), t.to_string()),
        [d, t] => Identifier::new(d.to_string(), t.to_string()),
        _ => return invalid!("sys.{proc}: invalid table name '{table_name}'"),
    };
    let request = match proc {
        // Paimon's batch compaction: a full compaction unless 'minor' is asked for.
        "compact" => Request::Compact(Compact {
            full: match args.text("compact_strategy") {
                Some(s) => Compact::strategy(&s)?,
                None => true,
            },
            partitions: match args.text("partitions") {
                Some(list) => list
                    .split(',')
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| crate::table::maintenance::key_value(p, "partition"))
                    .collect::<Result<_>>()?,
                None => vec![],
            },
        }),
        "expire_snapshots" => Request::ExpireSnapshots(ExpireSnapshots {
            retain_max: args.number("retain_max")?,
            retain_min: args.number("retain_min")?,
            older_than: args.text("older_than"),
            max_deletes: args.number("max_deletes")?,
        }),
        "expire_changelogs" => Request::ExpireChangelogs(ExpireChangelogs {
            retain_max: args.number("retain_max")?,
            retain_min: args.number("retain_min")?,
            older_than: args.text("older_than"),
            max_deletes: args.number("max_deletes")?,
            delete_all: args.flag("delete_all", false)?,
        }),
        "remove_orphan_files" => Request::RemoveOrphans(RemoveOrphans {
            older_than: args.text("older_than"),
            dry_run: args.flag("dry_run", true)?,
        }),
        "create_tag" => Request::CreateTag(CreateTag {
            name: args.required("tag")?,
            snapshot_id: args.number("snapshot_id")?,
        }),
        "delete_tag" => Request::DeleteTag {
            name: args.required("tag")?,
        },
        "create_branch" => Request::CreateBranch {
            name: args.required("branch")?,
            // Flink's procedure takes a blank tag for an empty branch.
            from_tag: args.text("tag").filter(|t| !t.trim().is_empty()),
        },
        "delete_branch" => Request::DeleteBranches {
            names: args
                .required("branch")?
                .split(',')
                .map(|b| b.trim().to_string())
                .filter(|b| !b.is_empty())
                .collect(),
        },
        "fast_forward" => Request::FastForward {
            name: args.required("branch")?,
        },
        "rollback_to" => {
            let to = args.required("snapshot_or_tag")?;
            Request::Rollback(match to.trim().parse::<i64>() {
                Ok(id) => crate::table::maintenance::RollbackTarget::Snapshot(id),
                Err(_) => crate::table::maintenance::RollbackTarget::Tag(to),
            })
        }
        _ => {
            // reset_options: every argument after the table is an option key.
            let changes: Vec<crate::schema::change::SchemaChange> = args
                .rest
                .iter()
                .flatten()
                .map(|k| crate::schema::change::SchemaChange::RemoveOption { key: k.clone() })
                .collect();
            engine.catalog().load_table(&id).await?;
            if !changes.is_empty() {
                engine.catalog().alter_table(&id, &changes).await?;
            }
            return Ok(0);
        }
    };
    request.validate()?;
    let table = engine.catalog().load_table(&id).await?;
    let op = crate::table::progress::Operation::new();
    let outcome = request.clone().run(&table, &op).await?;
    Ok(match request {
        // Tag procedures write no rows.
        Request::CreateTag(_)
        | Request::DeleteTag { .. }
        | Request::Rollback(_)
        | Request::CreateBranch { .. }
        | Request::DeleteBranches { .. }
        | Request::FastForward { .. } => 0,
        _ => outcome.count(&request),
    })
}
