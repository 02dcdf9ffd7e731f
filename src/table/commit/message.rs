//! A commit's input: what one writer (or compaction) did to one (partition, bucket) since the
//! last commit. Writers produce these ([`crate::table::write`], [`crate::table::compact`],
//! postponed buckets); [`super::TableCommit`] turns a set of them into manifests and a snapshot.

use crate::spec::index_manifest::IndexFileMeta;
use crate::spec::DataFileMeta;
use crate::table::deletion_vectors::VectorsChange;

/// New files of one (partition, bucket), produced by a writer for one commit.
#[derive(Debug, Clone)]
pub struct CommitMessage {
    pub partition: Vec<u8>,
    pub bucket: i32,
    pub total_buckets: i32,
    pub new_files: Vec<DataFileMeta>,
    /// Changelog files of the new data (`changelog-producer` = `input`).
    pub changelog_files: Vec<DataFileMeta>,
    /// Files a compaction replaced (at their old levels) and the files it wrote.
    pub compact_before: Vec<DataFileMeta>,
    pub compact_after: Vec<DataFileMeta>,
    /// Changelog files a compaction produced (`lookup` and `full-compaction` producers).
    pub compact_changelog: Vec<DataFileMeta>,
    /// New index files of this bucket (a dynamic bucket's HASH file, replacing the previous one).
    pub index_files: Vec<IndexFileMeta>,
    /// The HASH files of this partition the writer assigned buckets from, (bucket, file name),
    /// when it added index files: the commit checks no other writer changed them meanwhile.
    pub index_base: Option<Vec<(i32, String)>>,
    /// A cross-partition writer's: the snapshot its key index was synced to before it placed
    /// the keys of this commit; another writer's APPEND or OVERWRITE since is a conflict.
    pub key_index_base: Option<i64>,
    /// A compaction's new deletion-vector file of this bucket (`deletion-vectors.enabled`),
    /// committed with the COMPACT snapshot, and the file it replaces.
    pub vectors: Option<VectorsChange>,
}

impl CommitMessage {
    /// A message of one bucket with nothing in it yet.
    pub fn empty(partition: Vec<u8>, bucket: i32, total_buckets: i32) -> Self {
        Self {
            partition,
            bucket,
            total_buckets,
            new_files: vec![],
            changelog_files: vec![],
            compact_before: vec![],
            compact_after: vec![],
            compact_changelog: vec![],
            index_files: vec![],
            index_base: None,
            key_index_base: None,
            vectors: None,
        }
    }

    /// Nothing to commit: no file added, replaced or indexed.
    pub(crate) fn is_empty(&self) -> bool {
        self.new_files.is_empty()
            && self.changelog_files.is_empty()
            && self.compact_before.is_empty()
            && self.compact_after.is_empty()
            && self.compact_changelog.is_empty()
            && self.index_files.is_empty()
            && self.vectors.is_none()
    }
}
