//! Tags: creating one pins a snapshot (`tag/tag-<name>`); deleting one is a plan, because the
//! files only the tag kept (its snapshot expired meanwhile) go with it.
//!
//! ```text
//!  delete_tag: load (tag, other tags, earliest snapshot) ─► plan:
//!              tag-<name> ─► data files only it read ─► manifests only it named
//! ```
//!
//! A tag on a snapshot that still exists, or shared by another tag, frees nothing. On a branch
//! the tag file alone goes: a branch's tag may pin files main uses too, and orphan removal,
//! which sees every branch, takes what no one uses.

use std::collections::BTreeSet;

use super::plan::{CleanupReport, Plan, Step};
use super::references::{FileLayout, Held};
use crate::error::{NotFoundSnafu, Result};
use crate::spec::Snapshot;
use crate::table::progress::Operation;
use crate::table::Table;

/// A tag on a snapshot (the latest when unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateTag {
    pub name: String,
    pub snapshot_id: Option<i64>,
}

/// What deleting tag `name` decides over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagDeletion {
    pub name: String,
    /// Only the tag file goes: the tag is on a branch, its snapshot is still there, or another
    /// tag pins the same snapshot.
    pub frees_nothing: bool,
    /// What the tag's snapshot reads.
    pub tagged: Held,
    /// What the other tags and the earliest snapshot hold.
    pub held: Held,
}

/// The steps that delete a tag (pure): the tag file, then what only it kept.
pub fn plan(input: &TagDeletion, layout: &impl FileLayout, what: &str) -> Result<Plan> {
    let mut plan = Plan::new(what, "deleting files");
    plan.push(Step::DeleteTag(input.name.clone()));
    if input.frees_nothing {
        return Ok(plan);
    }
    let files: BTreeSet<_> = input
        .tagged
        .files
        .iter()
        .filter(|f| !input.held.files.contains(*f))
        .collect();
    for f in files {
        plan.push(Step::delete(layout.data_path(f)?));
    }
    let manifests: BTreeSet<_> = input
        .tagged
        .manifests
        .iter()
        .filter(|m| !input.held.manifests.contains(*m))
        .collect();
    for m in manifests {
        plan.push(Step::delete(layout.manifest_path(m)));
    }
    Ok(plan)
}

impl Table {
    /// Tags `snapshot_id` (or the latest snapshot) as `name`.
    pub async fn create_tag(&self, name: &str, snapshot_id: Option<i64>) -> Result<Snapshot> {
        let sm = self.snapshot_manager();
        let snapshot = match snapshot_id {
            Some(id) => sm.try_snapshot(id).await?.ok_or_else(|| {
                NotFoundSnafu {
                    message: format!(
                        "Cannot create tag because given snapshot #{id} doesn't exist."
                    ),
                }
                .build()
            })?,
            None => sm.latest().await?.ok_or_else(|| {
                NotFoundSnafu {
                    message: "Cannot create tag because latest snapshot doesn't exist.".to_string(),
                }
                .build()
            })?,
        };
        self.tag_manager().create(name, &snapshot).await?;
        Ok(snapshot)
    }

    pub async fn list_tags(&self) -> Result<Vec<(String, Snapshot)>> {
        self.tag_manager().list().await
    }

    /// Deletes a tag; if its snapshot has expired and no other tag pins it, the files only it
    /// held are deleted too.
    pub async fn delete_tag(&self, name: &str) -> Result<CleanupReport> {
        let plan = self.plan_tag_deletion(name).await?;
        plan.execute(self, &Operation::new()).await
    }

    /// The plan of [`Table::delete_tag`]; reads only.
    pub async fn plan_tag_deletion(&self, name: &str) -> Result<Plan> {
        let what = format!("deletion of tag '{name}' of {}", self.full_name());
        // A branch made from the tag reads its snapshot's files: the tag keeps them from expiry.
        let tagged = self.tag_manager().get(name).await?;
        self.refuse_if_branch_base(name, tagged.id).await?;
        let sm = self.snapshot_manager();
        let others: Vec<Snapshot> = self
            .tag_manager()
            .list()
            .await?
            .into_iter()
            .filter(|(n, _)| n != name)
            .map(|(_, s)| s)
            .collect();
        let mut input = TagDeletion {
            name: name.to_string(),
            frees_nothing: self.branch().is_some()
                || sm.try_snapshot(tagged.id).await?.is_some()
                || others.iter().any(|s| s.id == tagged.id),
            ..Default::default()
        };
        if !input.frees_nothing {
            // Keep whatever the remaining tags and the earliest snapshot use.
            let earliest = match sm.earliest_id().await? {
                Some(id) => Some(sm.snapshot(id).await?),
                None => None,
            };
            for s in others.iter().chain(earliest.as_ref()) {
                input.held.hold(self, s).await?;
            }
            input.tagged.hold(self, &tagged).await?;
        }
        plan(&input, self, &what)
    }
}
