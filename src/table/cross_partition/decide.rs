//! What a cross-partition upsert does with one row, as Paimon's `GlobalIndexAssigner` and its
//! `ExistingProcessor`s decide, and which bucket of a partition a new key goes to (Paimon's
//! `BucketAssigner` with one assigner). Pure.
//!
//! Row kinds are not looked at, as in Paimon: a `-D` of a key that lives in another partition
//! moves like any row (its retraction deletes the old copy; the `-D` then deletes nothing in the
//! new partition).

use std::collections::BTreeMap;

use crate::spec::MergeEngine;

/// Where a key lives: (partition id, bucket).
pub(crate) type Place = (u32, i32);

/// What the merge engine does with a key that arrives in another partition than the one it
/// lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnMoved {
    /// `deduplicate`: the old copy is deleted, the row written in its new partition
    /// (`DeleteExistingProcessor`).
    Move,
    /// `partial-update`, `aggregation`: the row is merged into the old copy, in the old partition
    /// (`UseOldExistingProcessor`); the key does not move.
    IntoOld,
    /// `first-row`: the first row stays, the new one is dropped (`SkipNewExistingProcessor`).
    Drop,
}

impl OnMoved {
    pub(crate) fn of(engine: MergeEngine) -> Self {
        match engine {
            MergeEngine::Deduplicate => OnMoved::Move,
            MergeEngine::PartialUpdate | MergeEngine::Aggregation => OnMoved::IntoOld,
            MergeEngine::FirstRow => OnMoved::Drop,
        }
    }
}

/// Where one row goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// The key is new: a bucket of the row's partition is picked for it.
    New,
    /// The key lives in the row's partition, in this bucket.
    Stay(i32),
    /// The key lives elsewhere: a retraction (the row as `-D`, in the old partition) goes to the
    /// old place, then the row is written in its own partition as a new key.
    Move { from: Place },
    /// The row goes to the old place with its partition columns set to the old partition's.
    IntoOld(Place),
    /// The row is not written.
    Drop,
}

/// The action for a row of partition `partition` whose key lives at `existing`.
pub(crate) fn decide(existing: Option<Place>, partition: u32, on_moved: OnMoved) -> Action {
    match existing {
        None => Action::New,
        Some((p, b)) if p == partition => Action::Stay(b),
        Some(from) => match on_moved {
            OnMoved::Move => Action::Move { from },
            OnMoved::IntoOld => Action::IntoOld(from),
            OnMoved::Drop => Action::Drop,
        },
    }
}

/// The bucket of a partition a new key goes to, given the partition's keys per bucket: the first
/// bucket below `target` keys, else the smallest bucket id not in use.
pub(crate) fn pick_bucket(counts: &BTreeMap<i32, u64>, target: u64) -> i32 {
    if let Some((&b, _)) = counts.iter().find(|(_, &n)| n < target) {
        return b;
    }
    (0..)
        .find(|b| !counts.contains_key(b))
        .expect("a free bucket id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_stays_in_its_partition_and_moves_by_merge_engine() {
        assert_eq!(decide(None, 3, OnMoved::Move), Action::New);
        assert_eq!(decide(Some((3, 7)), 3, OnMoved::Drop), Action::Stay(7));
        assert_eq!(
            decide(Some((1, 2)), 3, OnMoved::Move),
            Action::Move { from: (1, 2) }
        );
        assert_eq!(
            decide(Some((1, 2)), 3, OnMoved::IntoOld),
            Action::IntoOld((1, 2))
        );
        assert_eq!(decide(Some((1, 2)), 3, OnMoved::Drop), Action::Drop);
        assert_eq!(OnMoved::of(MergeEngine::Deduplicate), OnMoved::Move);
        assert_eq!(OnMoved::of(MergeEngine::PartialUpdate), OnMoved::IntoOld);
        assert_eq!(OnMoved::of(MergeEngine::Aggregation), OnMoved::IntoOld);
        assert_eq!(OnMoved::of(MergeEngine::FirstRow), OnMoved::Drop);
    }

    #[test]
    fn new_keys_fill_the_first_bucket_below_target_then_open_the_smallest_free_one() {
        let mut counts = BTreeMap::new();
        assert_eq!(pick_bucket(&counts, 2), 0);
        counts.insert(0, 2);
        assert_eq!(pick_bucket(&counts, 2), 1);
        counts.insert(1, 1);
        assert_eq!(pick_bucket(&counts, 2), 1);
        counts.insert(1, 2);
        counts.insert(3, 0);
        assert_eq!(pick_bucket(&counts, 2), 3, "a bucket below target first");
        counts.insert(3, 2);
        assert_eq!(pick_bucket(&counts, 2), 2, "then the smallest unused id");
    }
}
