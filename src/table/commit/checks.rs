//! What a commit checks about the snapshots committed since its writer began, before it
//! builds on the latest one: a streaming writer's fence (no other stream of its commit user
//! committed meanwhile) and a cross-partition writer's key index (no other writer added data
//! meanwhile). The IO walks the snapshots; [`moves_keys`] decides.

use super::TableCommit;
use crate::error::{ConflictSnafu, Result};
use crate::spec::{CommitKind, Snapshot};

/// Whether a snapshot of this kind (`None`: gone) may have placed keys a cross-partition writer's
/// index does not know: new data, or unknown.
pub(super) fn moves_keys(kind: Option<CommitKind>) -> bool {
    matches!(
        kind,
        None | Some(CommitKind::Append) | Some(CommitKind::Overwrite)
    )
}

impl TableCommit {
    /// Fails with [`crate::error::Error::Fenced`] when a snapshot after `since`, up to `latest`,
    /// belongs to this commit user (expired ones are skipped: they cannot be told apart).
    pub(super) async fn check_fence(&self, since: i64, latest: &Snapshot) -> Result<()> {
        let sm = self.table.snapshot_manager();
        let earliest = sm.earliest_id().await?.unwrap_or(1);
        let mut id = latest.id;
        while id > since && id >= earliest {
            let s = if id == latest.id {
                Some(latest.clone())
            } else {
                sm.try_snapshot(id).await?
            };
            if let Some(s) = s.filter(|s| s.commit_user == self.commit_user) {
                return crate::error::FencedSnafu {
                    table: self.table.identifier().to_string(),
                    commit_user: self.commit_user.clone(),
                    snapshot: s.id,
                }
                .fail();
            }
            id -= 1;
        }
        Ok(())
    }

    /// Fails with a conflict when a snapshot after `base`, up to `latest`, added or replaced data
    /// (another writer's APPEND or OVERWRITE, or one that expired meanwhile): the keys of a
    /// cross-partition writer were placed by an index that did not know them.
    pub(super) async fn check_keys_unmoved(&self, base: i64, latest: &Snapshot) -> Result<()> {
        let sm = self.table.snapshot_manager();
        for id in base + 1..=latest.id {
            let s = if id == latest.id {
                Some(latest.clone())
            } else {
                sm.try_snapshot(id).await?
            };
            let kind = s.as_ref().map(|s| s.commit_kind);
            if moves_keys(kind) {
                crate::metrics::metrics().commit_conflicts.inc();
                return ConflictSnafu {
                    table: self.table.identifier().to_string(),
                    message: format!(
                        "snapshot {id} ({}) was committed by another writer since this cross-partition write placed its keys (on snapshot {base}); one writer at a time, write again",
                        kind.map_or("expired", |k| k.as_str())
                    ),
                }
                .fail();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_data_or_a_lost_snapshot_can_move_keys() {
        assert!(moves_keys(Some(CommitKind::Append)));
        assert!(moves_keys(Some(CommitKind::Overwrite)));
        assert!(moves_keys(None));
        assert!(!moves_keys(Some(CommitKind::Compact)));
        assert!(!moves_keys(Some(CommitKind::Analyze)));
    }
}
