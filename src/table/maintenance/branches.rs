//! Branch operations, as Paimon's `FileSystemBranchManager` does them (the layout, and reading a
//! branch, are [`crate::table::branch`]'s):
//!
//! ```text
//!  create_branch(b)          copy main's schemas 0..=latest into branch-b/schema
//!  create_branch(b, tag)     copy the tag (into branch-b/tag), its snapshot, schemas 0..=its schema
//!  delete_branch(b)          the branch directory goes; files only it used become orphans
//!  fast_forward(b)           a plan: main's hints ─► main's snapshots >= b's earliest ─► their
//!                            tags ─► main's schemas >= that snapshot's ─► b's snapshots,
//!                            schemas and tags copied in
//! ```
//!
//! Files a branch shares with main stay protected as in Paimon: a branch made from a tag shares
//! that tag's snapshot, which main's tag keeps from expiry (and which tidelake refuses to delete
//! while a branch holds it); orphan removal counts the files of every branch.

use super::plan::{Plan, Step};
use crate::error::{invalid, AlreadyExistsSnafu, ErrorKind, InternalSnafu, NotFoundSnafu, Result};
use crate::spec::identifier::validate_name;
use crate::table::branch::{validate_branch_name, MAIN_BRANCH};
use crate::table::progress::Operation;
use crate::table::Table;

/// What fast-forwarding main to a branch decides over (paths relative to the warehouse).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastForward {
    /// Main's directory (the table root) and the branch's.
    pub main: String,
    pub branch: String,
    /// The branch's earliest snapshot, and that snapshot's schema.
    pub earliest: i64,
    pub schema_from: i64,
    /// Main's snapshot and schema ids, and its tags with their snapshot ids.
    pub main_snapshots: Vec<i64>,
    pub main_schemas: Vec<i64>,
    pub main_tags: Vec<(String, i64)>,
    /// The branch's snapshot, schema and tag files, as (directory, file name).
    pub branch_files: Vec<(&'static str, String)>,
}

/// The steps of a fast-forward (pure; the module doc gives the order).
pub fn plan_fast_forward(input: &FastForward, what: &str) -> Plan {
    let mut plan = Plan::new(what, "fast-forwarding");
    let main = &input.main;
    // Main's hints first: a reader that finds none lists the directory (the branch's are not
    // copied: main keeps its snapshots below the branch's earliest).
    for hint in ["LATEST", "EARLIEST"] {
        plan.push(Step::delete(format!("{main}/snapshot/{hint}")));
    }
    for id in input
        .main_snapshots
        .iter()
        .filter(|id| **id >= input.earliest)
    {
        plan.push(Step::DeleteSnapshot(*id));
    }
    for (tag, _) in input
        .main_tags
        .iter()
        .filter(|(_, id)| *id >= input.earliest)
    {
        plan.push(Step::DeleteTag(tag.clone()));
    }
    for id in input
        .main_schemas
        .iter()
        .filter(|id| **id >= input.schema_from)
    {
        plan.push(Step::delete(format!("{main}/schema/schema-{id}")));
    }
    for (dir, file) in &input.branch_files {
        plan.push(Step::CopyFile {
            from: format!("{}/{dir}/{file}", input.branch),
            to: format!("{main}/{dir}/{file}"),
        });
    }
    plan.push(Step::ForgetHint(format!("{main}/snapshot")));
    plan.push(Step::ForgetHint(format!("{main}/schema")));
    plan
}

impl Table {
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
            return AlreadyExistsSnafu {
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
                    NotFoundSnafu {
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
            Err(e) if e.kind() == ErrorKind::NotFound => {
                bytes::Bytes::from(serde_json::to_vec_pretty(&snapshot).map_err(|e| {
                    InternalSnafu {
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
        validate_name("branch", name)?;
        if !self.branch_exists(name).await? {
            return NotFoundSnafu {
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
        let plan = self.plan_fast_forward(name).await?;
        plan.execute(self, &Operation::new()).await.map(|_| ())
    }

    /// The plan of [`Table::fast_forward`]; reads only.
    pub async fn plan_fast_forward(&self, name: &str) -> Result<Plan> {
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
            return NotFoundSnafu {
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
        let io = self.io();
        let main = self.meta_path();
        let main_tags: Vec<(String, i64)> = self
            .tag_manager()
            .list()
            .await?
            .into_iter()
            .map(|(t, s)| (t, s.id))
            .collect();
        // Another branch's base tag cannot go (this branch's comes back with its tags).
        for (tag, id) in main_tags.iter().filter(|(_, id)| *id >= earliest) {
            let path = format!("{}/tag/tag-{tag}", branch.meta_path());
            if !io.exists(&path).await? {
                self.refuse_if_branch_base(tag, *id).await?;
            }
        }
        let from = branch.meta_path();
        let mut branch_files = Vec::new();
        for (dir, prefix) in [
            ("snapshot", "snapshot-"),
            ("schema", "schema-"),
            ("tag", "tag-"),
        ] {
            for f in io.list(&format!("{from}/{dir}")).await? {
                if f.name().starts_with(prefix) {
                    branch_files.push((dir, f.name().to_string()));
                }
            }
        }
        let input = FastForward {
            branch: from,
            earliest,
            schema_from: bsm.snapshot(earliest).await?.schema_id,
            main_snapshots: self.snapshot_manager().list_ids().await?,
            main_schemas: io
                .list_numbered(&format!("{main}/schema"), "schema-")
                .await?,
            main_tags,
            branch_files,
            main,
        };
        Ok(plan_fast_forward(
            &input,
            &format!("fast-forward of {} to branch {name}", self.identifier()),
        ))
    }

    /// Refuses to remove tag `tag` (on snapshot `snapshot_id`) of this handle's branch when it is
    /// a branch's base: on main, a branch made from it (its tag directory holds the same tag) reads
    /// the tag's files; on a branch, the tag is the one it was made from (main holds it too).
    pub(crate) async fn refuse_if_branch_base(&self, tag: &str, snapshot_id: i64) -> Result<()> {
        let holders: Vec<String> = match self.branch() {
            Some(b) => {
                let shared = format!("{}/tag/tag-{tag}", self.path());
                let same = match self.io().read(&shared).await {
                    Ok(bytes) => serde_json::from_slice::<crate::spec::Snapshot>(&bytes)
                        .is_ok_and(|s| s.id == snapshot_id),
                    Err(e) if e.kind() == ErrorKind::NotFound => false,
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
    fn fast_forward_removes_main_from_the_branch_point_before_copying() {
        let input = FastForward {
            main: "w/t".into(),
            branch: "w/t/branch/branch-b".into(),
            earliest: 3,
            schema_from: 1,
            main_snapshots: vec![1, 2, 3, 4],
            main_schemas: vec![0, 1],
            main_tags: vec![("old".into(), 2), ("new".into(), 4)],
            branch_files: vec![
                ("snapshot", "snapshot-3".into()),
                ("schema", "schema-1".into()),
            ],
        };
        let plan = plan_fast_forward(&input, "ff");
        assert_eq!(
            plan.steps,
            vec![
                Step::delete("w/t/snapshot/LATEST"),
                Step::delete("w/t/snapshot/EARLIEST"),
                Step::DeleteSnapshot(3),
                Step::DeleteSnapshot(4),
                Step::DeleteTag("new".into()),
                Step::delete("w/t/schema/schema-1"),
                Step::CopyFile {
                    from: "w/t/branch/branch-b/snapshot/snapshot-3".into(),
                    to: "w/t/snapshot/snapshot-3".into(),
                },
                Step::CopyFile {
                    from: "w/t/branch/branch-b/schema/schema-1".into(),
                    to: "w/t/schema/schema-1".into(),
                },
                Step::ForgetHint("w/t/snapshot".into()),
                Step::ForgetHint("w/t/schema".into()),
            ]
        );
    }
}
