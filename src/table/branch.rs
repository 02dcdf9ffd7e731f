//! Branches, as Paimon's `FileSystemBranchManager` lays them out: a branch is a directory
//! `<table>/branch/branch-<name>` with its own `snapshot/`, `schema/`, `tag/`, `changelog/` and
//! `consumer/`; manifests, index files and data files stay shared under the table root (their
//! names are unique), so a branch costs no copy of data.
//!
//! ```text
//!  create_branch(b)          copy main's schemas 0..=latest into branch-b/schema
//!  create_branch(b, tag)     copy the tag (into branch-b/tag), its snapshot, schemas 0..=its schema
//!  write/read `t$branch_b`   the branch's snapshots, over the shared files
//!  fast_forward(b)           main loses snapshots >= b's earliest (schemas, tags likewise) and
//!                            takes b's snapshots, hints, schemas and tags
//!  delete_branch(b)          the branch directory goes; files only it used become orphans
//! ```
//!
//! Files a branch shares with main stay protected as in Paimon: a branch made from a tag shares
//! that tag's snapshot, which main's tag keeps from expiry (and which tidelake refuses to delete
//! while a branch holds it); orphan removal counts the files of every branch.

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

    fn branch_dir(&self, name: &str) -> String {
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

    /// Copies schema files `0..=last` of this handle's branch into branch `name` (those that
    /// exist: Paimon's `copySchemasToBranch`).
    async fn copy_schemas(&self, name: &str, last: i64) -> Result<()> {
        let from = format!("{}/schema", self.meta_path());
        let to = format!("{}/schema", self.branch_dir(name));
        for id in self.io().list_numbered(&from, "schema-").await? {
            if id > last {
                continue;
            }
            let bytes = self.io().read(&format!("{from}/schema-{id}")).await?;
            self.io().write(&format!("{to}/schema-{id}"), bytes).await?;
        }
        Ok(())
    }

    /// Creates branch `name`: empty (with the current schemas), or from tag `from_tag` (its
    /// snapshot becomes the branch's first). Creating a branch that exists is an error.
    pub async fn create_branch(&self, name: &str, from_tag: Option<&str>) -> Result<()> {
        validate_branch_name(name)?;
        if self.branch_exists(name).await? {
            return crate::error::AlreadyExistsSnafu {
                message: format!("Branch name '{name}' already exists."),
            }
            .fail();
        }
        let Some(tag) = from_tag else {
            let latest = *self
                .schema_manager()
                .list_ids()
                .await?
                .last()
                .ok_or_else(|| {
                    crate::error::NotFoundSnafu {
                        message: format!("table {} has no schema", self.full_name()),
                    }
                    .build()
                })?;
            return self.copy_schemas(name, latest).await;
        };
        let tags = self.tag_manager();
        let snapshot = tags.get(tag).await?;
        let dir = self.branch_dir(name);
        let tag_bytes = self.io().read(&tags.path(tag)).await?;
        self.io()
            .write(&format!("{dir}/tag/tag-{tag}"), tag_bytes)
            .await?;
        // The tag's snapshot as the branch's first: main's file while it lives, else the tag's
        // own copy of it (the snapshot expired; the tag kept it).
        let snapshot_file = format!("{}/snapshot/snapshot-{}", self.meta_path(), snapshot.id);
        let bytes = match self.io().read(&snapshot_file).await {
            Ok(b) => b,
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => {
                bytes::Bytes::from(serde_json::to_vec_pretty(&snapshot).map_err(|e| {
                    crate::error::InternalSnafu {
                        message: format!("encoding snapshot {}: {e}", snapshot.id),
                    }
                    .build()
                })?)
            }
            Err(e) => return Err(e),
        };
        self.io()
            .write(&format!("{dir}/snapshot/snapshot-{}", snapshot.id), bytes)
            .await?;
        // Schemas last: a branch exists once it has one.
        self.copy_schemas(name, snapshot.schema_id).await
    }

    /// Deletes branch `name` and its snapshots, schemas and tags. The files only it used are
    /// left for orphan removal, as in Paimon.
    pub async fn delete_branch(&self, name: &str) -> Result<()> {
        if name == MAIN_BRANCH || name.trim().is_empty() {
            return invalid!("Branch name '{name}' cannot be deleted: it is the table itself.");
        }
        crate::spec::identifier::validate_name("branch", name)?;
        if !self.branch_exists(name).await? {
            return crate::error::NotFoundSnafu {
                message: format!("Branch name '{name}' doesn't exist."),
            }
            .fail();
        }
        self.io().delete_dir(&self.branch_dir(name)).await
    }

    /// Makes main what branch `name` is (Paimon's `fastForward`): main's snapshots from the
    /// branch's earliest on, its schemas from that snapshot's schema on and its tags on those
    /// snapshots are deleted, then the branch's snapshots (with their hints), schemas and tags
    /// are copied in. The branch stays.
    pub async fn fast_forward(&self, name: &str) -> Result<()> {
        if name == MAIN_BRANCH {
            return invalid!("Branch name 'main' do not use in fast-forward.");
        }
        if self.branch().is_some() {
            return invalid!(
                "fast-forward moves main: call it on table {}, not on a branch",
                self.identifier()
            );
        }
        validate_name("branch", name)?;
        if !self.branch_exists(name).await? {
            return crate::error::NotFoundSnafu {
                message: format!("Branch name '{name}' doesn't exist."),
            }
            .fail();
        }
        let branch = self.on_branch(name).await?;
        let bsm = branch.snapshot_manager();
        let Some(earliest) = bsm.earliest_id().await? else {
            return invalid!(
                "Cannot fast forward branch {name}, because it does not have snapshot."
            );
        };
        let schema_from = bsm.snapshot(earliest).await?.schema_id;
        let io = self.io();
        let main = self.meta_path();
        let tags = self.tag_manager();
        let doomed: Vec<String> = tags
            .list()
            .await?
            .into_iter()
            .filter(|(_, s)| s.id >= earliest)
            .map(|(t, _)| t)
            .collect();
        // Another branch's base tag cannot go (this branch's comes back with its tags).
        for tag in &doomed {
            let path = format!("{}/tag/tag-{tag}", branch.meta_path());
            if !io.exists(&path).await? {
                let id = tags.get(tag).await?.id;
                self.refuse_if_branch_base(tag, id).await?;
            }
        }
        // Main's hints first: a reader that finds none lists the directory (the branch's are
        // not copied: main keeps its snapshots below the branch's earliest).
        for hint in ["LATEST", "EARLIEST"] {
            let _ = io.delete(&format!("{main}/snapshot/{hint}")).await;
        }
        for id in self.snapshot_manager().list_ids().await? {
            if id >= earliest {
                io.delete(&format!("{main}/snapshot/snapshot-{id}")).await?;
            }
        }
        for tag in &doomed {
            io.delete(&tags.path(tag)).await?;
        }
        for id in io
            .list_numbered(&format!("{main}/schema"), "schema-")
            .await?
        {
            if id >= schema_from {
                io.delete(&format!("{main}/schema/schema-{id}")).await?;
            }
        }
        let from = branch.meta_path();
        for (dir, prefix) in [
            ("snapshot", "snapshot-"),
            ("schema", "schema-"),
            ("tag", "tag-"),
        ] {
            for f in io.list(&format!("{from}/{dir}")).await? {
                let file = f.name().to_string();
                if !file.starts_with(prefix) {
                    continue;
                }
                let bytes = io.read(&f.path).await?;
                io.write(&format!("{main}/{dir}/{file}"), bytes).await?;
            }
        }
        io.forget_hint(&format!("{main}/snapshot"));
        io.forget_hint(&format!("{main}/schema"));
        Ok(())
    }

    /// Refuses to remove tag `tag` (on snapshot `snapshot_id`) of this handle's branch when it is
    /// a branch's base: on main, a branch made from it (its tag directory holds the same tag) reads
    /// the tag's files; on a branch, the tag is the one it was made from (main holds it too).
    pub(crate) async fn refuse_if_branch_base(&self, tag: &str, snapshot_id: i64) -> Result<()> {
        let holders: Vec<String> = match self.branch() {
            Some(b) => {
                let main = self.path();
                let shared = format!("{main}/tag/tag-{tag}");
                let same = match self.io().read(&shared).await {
                    Ok(bytes) => serde_json::from_slice::<crate::spec::Snapshot>(&bytes)
                        .is_ok_and(|s| s.id == snapshot_id),
                    Err(e) if e.kind() == crate::error::ErrorKind::NotFound => false,
                    Err(e) => return Err(e),
                };
                if same {
                    vec![b.to_string()]
                } else {
                    vec![]
                }
            }
            None => {
                let mut out = Vec::new();
                for b in self.branches().await? {
                    let path = format!("{}/tag/tag-{tag}", self.branch_dir(&b.name));
                    if self.io().exists(&path).await? {
                        out.push(b.name);
                    }
                }
                out
            }
        };
        if holders.is_empty() {
            return Ok(());
        }
        invalid!(
            "Tag '{tag}' of table {} is the base of branch {}; delete the branch first",
            self.full_name(),
            holders.join(", ")
        )
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
