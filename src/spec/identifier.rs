//! A table's name, `database.table`, and the rules a name must follow (it becomes a directory).

use std::fmt;

use crate::error::{InvalidArgumentSnafu, Result};

/// `database.table`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identifier {
    pub database: String,
    pub table: String,
}

impl Identifier {
    pub fn new(database: impl Into<String>, table: impl Into<String>) -> Self {
        Self {
            database: database.into(),
            table: table.into(),
        }
    }

    /// Parses `db.table`, or `db.table$branch_<name>` (a branch of the table).
    pub fn parse(s: &str) -> Result<Self> {
        match s.split_once('.') {
            Some((db, t)) if !db.is_empty() && !t.is_empty() && !t.contains('.') => {
                let id = Self::new(db, t);
                validate_name("database", &id.database)?;
                match split_branch(&id.table) {
                    Some((table, branch)) => {
                        validate_name("table", table)?;
                        validate_name("branch", branch)?;
                    }
                    None => validate_name("table", &id.table)?,
                }
                Ok(id)
            }
            _ => InvalidArgumentSnafu {
                message: format!("expected DATABASE.TABLE, got '{s}'"),
            }
            .fail(),
        }
    }
}

impl fmt::Display for Identifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.database, self.table)
    }
}

/// How a table name addresses a branch: `orders$branch_dev`.
pub const BRANCH_SUFFIX: &str = "$branch_";

/// A table name split into the table and the branch it names (`orders$branch_dev`); `None` for
/// a name without a branch.
pub fn split_branch(table: &str) -> Option<(&str, &str)> {
    let (t, b) = table.split_once(BRANCH_SUFFIX)?;
    (!t.is_empty() && !b.is_empty() && !b.contains('$')).then_some((t, b))
}

/// Whether a name read from a request can name a directory under the warehouse root without
/// leaving it: no separators, NUL or control characters, not `.`-led (no `..`). Narrower than
/// [`validate_name`] allows on creation, so tables other engines made (e.g. with spaces) load.
pub fn is_path_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c == '%' || c.is_control())
}

pub(crate) fn validate_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        InvalidArgumentSnafu {
            message: format!("invalid {what} name '{name}': use letters, digits, '_' and '-'"),
        }
        .fail()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_unsafe_names() {
        for bad in [
            "", ".", "..", "../beta", "a/b", "a\\b", "a\0b", ".hidden", "%2e%2e", "a\nb",
        ] {
            assert!(!is_path_safe(bad), "{bad:?}");
        }
        for good in ["orders", "my table", "t-1", "데이터", "a.b"] {
            assert!(is_path_safe(good), "{good:?}");
        }
        assert!(validate_name("table", "../x").is_err());
    }

    #[test]
    fn a_branch_of_a_table_parses_and_nothing_else_after_a_dollar() {
        assert_eq!(
            Identifier::parse("db.t$branch_dev").unwrap().table,
            "t$branch_dev"
        );
        for bad in [
            "db.t$snapshots",
            "db.t$branch_",
            "db.t$branch_a$b",
            "db.$branch_x",
            "db.t$branch_../x",
        ] {
            assert!(Identifier::parse(bad).is_err(), "{bad}");
        }
    }
}
