//! Branches, as Paimon's `FileSystemBranchManager` lays them out: a branch is a directory
//! `<table>/branch/branch-<name>` with its own `snapshot/`, `schema/`, `tag/`, `changelog/` and
//! `consumer/`; manifests, index files and data files stay shared under the table root (their
//! names are unique), so a branch costs no copy of data. This module addresses branches (names,
//! directories, handles on them, `t$branch_b`); creating, deleting and fast-forwarding them are
//! maintenance operations ([`crate::table::maintenance::branches`]).

use super::Table;
use crate::error::{invalid, Result};
use crate::spec::identifier::validate_name;

/// The branch every table has: the table root itself.
pub const MAIN_BRANCH: &str = "main";
/// What a branch's directory is called under `<table>/branch/`.
const BRANCH_DIR_PREFIX: &str = "branch-";
pub use crate::spec::identifier::{split_branch, BRANCH_SUFFIX};

/// Paimon's rules for a new branch's name (`BranchManager.validateBranch`), with tidelake's rule
/// for names that become directories.
pub fn validate_branch_name(name: &str) -> Result<()> {
    if name == MAIN_BRANCH {
        return invalid!("Branch name 'main' is the default branch and cannot be used.");
    }
    if name.trim().is_empty() {
        return invalid!("Branch name '{name}' is blank.");
    }
    if name.chars().all(|c| c.is_ascii_digit()) {
        return invalid!("Branch name cannot be pure numeric string but is '{name}'.");
    }
    validate_name("branch", name)
}

/// The directory of `branch` of the table at `table_path` (main: the table root).
pub(crate) fn branch_path(table_path: &str, branch: Option<&str>) -> String {
    match branch {
        None => table_path.to_string(),
        Some(MAIN_BRANCH) => table_path.to_string(),
        Some(b) => format!("{table_path}/branch/{BRANCH_DIR_PREFIX}{b}"),
    }
}

/// A branch as `$branches` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInfo {
    pub name: String,
    /// When its first schema file was written (epoch ms).
    pub create_time_millis: i64,
}

impl Table {
    /// The branch this handle reads and writes (`None`: main).
    pub fn branch(&self) -> Option<&str> {
        self.inner.branch.as_deref()
    }

    /// The table's name with its branch (`db.orders$branch_dev`), as errors name it.
    pub fn full_name(&self) -> String {
        match self.branch() {
            Some(b) => format!("{}{BRANCH_SUFFIX}{b}", self.identifier()),
            None => self.identifier().to_string(),
        }
    }

    /// Where this handle's snapshots, schemas, tags, changelogs and consumers live.
    pub(crate) fn meta_path(&self) -> String {
        branch_path(self.path(), self.branch())
    }

    pub(crate) fn branch_dir(&self, name: &str) -> String {
        branch_path(self.path(), Some(name))
    }

    /// Whether branch `name` exists (it has a schema).
    pub async fn branch_exists(&self, name: &str) -> Result<bool> {
        if name == MAIN_BRANCH {
            return Ok(true);
        }
        Ok(!self
            .io()
            .list(&format!("{}/schema", self.branch_dir(name)))
            .await?
            .is_empty())
    }

    /// The table's branches besides main, by name.
    pub async fn branches(&self) -> Result<Vec<BranchInfo>> {
        let mut out = Vec::new();
        for dir in self
            .io()
            .list_dirs(&format!("{}/branch", self.path()))
            .await?
        {
            let Some(name) = dir.strip_prefix(BRANCH_DIR_PREFIX) else {
                continue;
            };
            let schemas = self
                .io()
                .list(&format!("{}/schema", self.branch_dir(name)))
                .await?;
            let Some(created) = schemas.iter().map(|f| f.last_modified_millis).min() else {
                continue;
            };
            out.push(BranchInfo {
                name: name.to_string(),
                create_time_millis: created,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// This table on branch `name` (main: the table root), at the branch's latest schema.
    pub async fn on_branch(&self, name: &str) -> Result<Table> {
        let branch = (name != MAIN_BRANCH).then(|| name.to_string());
        let sm = crate::schema::SchemaManager::new(
            self.io().clone(),
            branch_path(self.path(), branch.as_deref()),
        );
        match sm.latest().await? {
            Some(schema) => Ok(Table::new_on(
                self.io().clone(),
                self.identifier().clone(),
                self.path().to_string(),
                branch,
                schema,
                self.clock().clone(),
            )),
            None => crate::error::NotFoundSnafu {
                message: format!(
                    "Branch {name} of table {} does not exist",
                    self.identifier()
                ),
            }
            .fail(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_follow_paimons_rules_and_stay_in_their_directory() {
        for (bad, needle) in [
            ("main", "default branch"),
            ("  ", "blank"),
            ("123", "pure numeric"),
            ("a/b", "invalid branch name"),
            ("..", "invalid branch name"),
            ("x$y", "invalid branch name"),
        ] {
            let e = validate_branch_name(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        validate_branch_name("dev-1_x").unwrap();
        validate_branch_name("1a").unwrap();
    }

    #[test]
    fn names_address_branches() {
        assert_eq!(split_branch("orders$branch_dev"), Some(("orders", "dev")));
        assert_eq!(split_branch("orders"), None);
        assert_eq!(split_branch("orders$snapshots"), None);
        assert_eq!(split_branch("orders$branch_"), None);
        assert_eq!(split_branch("orders$branch_dev$snapshots"), None);
        assert_eq!(
            branch_path("w/db.db/t", Some("dev")),
            "w/db.db/t/branch/branch-dev"
        );
        assert_eq!(branch_path("w/db.db/t", Some("main")), "w/db.db/t");
        assert_eq!(branch_path("w/db.db/t", None), "w/db.db/t");
    }
}
