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

    /// Parses `db.table`.
    pub fn parse(s: &str) -> Result<Self> {
        match s.split_once('.') {
            Some((db, t)) if !db.is_empty() && !t.is_empty() && !t.contains('.') => {
                let id = Self::new(db, t);
                validate_name("database", &id.database)?;
                validate_name("table", &id.table)?;
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
