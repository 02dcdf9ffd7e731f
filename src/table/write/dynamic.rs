//! Dynamic-bucket assignment (`bucket` = -1 on primary-key tables): which bucket a key goes to,
//! as Paimon's `HashBucketAssigner` decides with one assigner. A key is known by the hash of its
//! trimmed primary key; a hash seen before (in the table's HASH index files or earlier in this
//! writer) keeps its bucket, so a key never lives in two buckets; a new hash goes to the first
//! bucket with fewer than `dynamic-bucket.target-row-num` hashes, else to a new bucket (the
//! smallest unused id), else, once `dynamic-bucket.max-buckets` exist, to an existing one picked
//! by the hash. Pure: the writer reads the index files and writes the buckets that grew.
//!
//! Concurrent writers are kept apart at commit: each partition's HASH files as this writer loaded
//! them are its base, and a commit whose partition's HASH files changed meanwhile is a conflict
//! (two writers could have put one new key into two buckets).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::error::Malformed;

pub(crate) use crate::spec::options::DynamicOptions;

/// Paimon's bound on bucket ids (`Short.MAX_VALUE`): ids are below it.
const MAX_BUCKET_ID: i32 = i16::MAX as i32;

/// One bucket's hashes: all of them in first-seen order, whether any is new since the last
/// commit, and the index file they were loaded from (or last written to).
#[derive(Debug, Default, Clone)]
struct Bucket {
    hashes: Vec<i32>,
    grew: bool,
    file: Option<String>,
}

/// The buckets of one partition and the bucket of every hash in them.
#[derive(Debug, Default)]
pub(crate) struct PartitionIndex {
    bucket_of: HashMap<i32, i32>,
    buckets: BTreeMap<i32, Bucket>,
    /// Buckets below the target: where new hashes go first.
    open: BTreeSet<i32>,
    /// Whether a key was assigned since the last [`PartitionIndex::take_touched`].
    touched: bool,
}

/// A bucket whose hashes grew: everything it holds now, for one new HASH index file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrownBucket {
    pub(crate) bucket: i32,
    pub(crate) hashes: Vec<i32>,
}

impl PartitionIndex {
    /// The index of a partition from its HASH files: (bucket, file name, hashes). Two files of one
    /// bucket, or a hash in two buckets, is a corrupt index (the message says which).
    pub(crate) fn load(
        files: Vec<(i32, String, Vec<i32>)>,
        options: &DynamicOptions,
    ) -> Result<Self, Malformed> {
        let mut index = Self::default();
        for (bucket, file, hashes) in files {
            if let Some(b) = index.buckets.get(&bucket) {
                return Err(Malformed(format!(
                    "bucket {bucket} has two HASH index files: {} and {file}",
                    b.file.as_deref().unwrap_or("?")
                )));
            }
            for &h in &hashes {
                if let Some(other) = index.bucket_of.insert(h, bucket) {
                    if other != bucket {
                        return Err(Malformed(format!(
                            "key hash {h} is in bucket {other} and in bucket {bucket} ({file})"
                        )));
                    }
                }
            }
            if (hashes.len() as u64) < options.target_row_num {
                index.open.insert(bucket);
            }
            index.buckets.insert(
                bucket,
                Bucket {
                    hashes,
                    grew: false,
                    file: Some(file),
                },
            );
        }
        Ok(index)
    }

    /// The bucket of a key hash, assigning one to a hash not seen before.
    pub(crate) fn assign(&mut self, hash: i32, options: &DynamicOptions) -> i32 {
        self.touched = true;
        if let Some(&b) = self.bucket_of.get(&hash) {
            return b;
        }
        let bucket = match self.open.first() {
            Some(&b) => b,
            None => {
                let limit = if options.max_buckets > 0 {
                    options.max_buckets.min(MAX_BUCKET_ID)
                } else {
                    MAX_BUCKET_ID
                };
                match (0..limit).find(|b| !self.buckets.contains_key(b)) {
                    Some(b) => b,
                    // Every bucket is full and no new one may open: an existing one takes it.
                    None => {
                        let ids: Vec<i32> = self.buckets.keys().copied().collect();
                        ids[hash.unsigned_abs() as usize % ids.len()]
                    }
                }
            }
        };
        let b = self.buckets.entry(bucket).or_default();
        b.hashes.push(hash);
        b.grew = true;
        if (b.hashes.len() as u64) < options.target_row_num {
            self.open.insert(bucket);
        } else {
            self.open.remove(&bucket);
        }
        self.bucket_of.insert(hash, bucket);
        bucket
    }

    /// The index files of this partition as last loaded or written: (bucket, file name).
    pub(crate) fn base(&self) -> Vec<(i32, String)> {
        self.buckets
            .iter()
            .filter_map(|(b, x)| x.file.clone().map(|f| (*b, f)))
            .collect()
    }

    /// The buckets that grew since the last call, with all their hashes; they count as unchanged
    /// from then on.
    pub(crate) fn take_grown(&mut self) -> Vec<GrownBucket> {
        self.buckets
            .iter_mut()
            .filter(|(_, b)| b.grew)
            .map(|(bucket, b)| {
                b.grew = false;
                GrownBucket {
                    bucket: *bucket,
                    hashes: b.hashes.clone(),
                }
            })
            .collect()
    }

    /// Whether keys were assigned here since the last call (a writer drops the indexes of
    /// partitions it stopped writing, as Paimon's assigner does at each commit).
    pub(crate) fn take_touched(&mut self) -> bool {
        std::mem::take(&mut self.touched)
    }

    /// Records the file a grown bucket was written to: the base of the next commit.
    pub(crate) fn written(&mut self, bucket: i32, file: String) {
        if let Some(b) = self.buckets.get_mut(&bucket) {
            b.file = Some(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(target: u64, max: i32) -> DynamicOptions {
        DynamicOptions {
            target_row_num: target,
            max_buckets: max,
        }
    }

    #[test]
    fn new_hashes_fill_a_bucket_then_open_the_next() {
        let o = opts(2, -1);
        let mut p = PartitionIndex::default();
        assert_eq!(
            [10, 11, 12, 10, 13, 11].map(|h| p.assign(h, &o)),
            [0, 0, 1, 0, 1, 0]
        );
        let grown = p.take_grown();
        assert_eq!(
            grown,
            vec![
                GrownBucket {
                    bucket: 0,
                    hashes: vec![10, 11]
                },
                GrownBucket {
                    bucket: 1,
                    hashes: vec![12, 13]
                }
            ]
        );
        assert!(
            p.take_grown().is_empty(),
            "taken buckets count as unchanged"
        );
        assert!(p.take_touched());
        assert!(!p.take_touched(), "untouched since the last call");
        p.assign(10, &o);
        assert!(p.take_touched(), "a known key touches it too");
    }

    #[test]
    fn loaded_hashes_keep_their_bucket_and_gaps_are_reused() {
        let o = opts(2, -1);
        let mut p = PartitionIndex::load(
            vec![(1, "i1".into(), vec![5, 6]), (3, "i3".into(), vec![7])],
            &o,
        )
        .unwrap();
        assert_eq!(p.assign(6, &o), 1);
        assert_eq!(p.assign(7, &o), 3);
        // Bucket 3 has room; after it fills, the lowest free id (0) opens.
        assert_eq!(p.assign(8, &o), 3);
        assert_eq!(p.assign(9, &o), 0);
        assert_eq!(p.base(), vec![(1, "i1".into()), (3, "i3".into())]);
        p.take_grown();
        p.written(0, "i0".into());
        p.written(3, "i3b".into());
        assert_eq!(
            p.base(),
            vec![(0, "i0".into()), (1, "i1".into()), (3, "i3b".into())]
        );
    }

    #[test]
    fn at_the_bucket_limit_an_existing_bucket_takes_new_hashes() {
        let o = opts(1, 2);
        let mut p = PartitionIndex::default();
        assert_eq!(p.assign(1, &o), 0);
        assert_eq!(p.assign(2, &o), 1);
        let b = p.assign(3, &o);
        assert!(b == 0 || b == 1);
        assert_eq!(p.assign(3, &o), b, "then it stays there");
    }

    #[test]
    fn a_corrupt_index_is_refused() {
        let o = DynamicOptions::default();
        let two_files =
            PartitionIndex::load(vec![(0, "a".into(), vec![1]), (0, "b".into(), vec![2])], &o);
        assert!(two_files.unwrap_err().0.contains("two HASH index files"));
        let two_buckets =
            PartitionIndex::load(vec![(0, "a".into(), vec![1]), (1, "b".into(), vec![1])], &o);
        assert!(two_buckets
            .unwrap_err()
            .0
            .contains("in bucket 0 and in bucket 1"));
    }
}
