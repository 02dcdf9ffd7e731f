//! The I/O side of dynamic buckets in a writer: loading a partition's HASH index files (once, on
//! first sight), routing rows through the pure assigner of [`super::dynamic`], and writing the
//! HASH file of every bucket whose keys grew into that bucket's commit message.

use std::collections::HashMap;

use arrow::array::RecordBatch;

use super::dynamic::{DynamicOptions, PartitionIndex};
use super::{route, BucketId, TableWrite};
use crate::error::{CorruptSnafu, Result};
use crate::spec::index_manifest::{IndexManifestEntry, HASH_INDEX};
use crate::table::commit::CommitMessage;

/// What a writer of a dynamic-bucket table knows of its HASH index.
#[derive(Debug, Default)]
pub(super) struct DynamicIndex {
    pub(super) options: DynamicOptions,
    /// The HASH entries of the snapshot the writer started from (or last reread).
    pub(super) entries: Vec<IndexManifestEntry>,
    /// Whether `entries` may be older than this writer's own commits: true once a partition's
    /// index was dropped, which is then reloaded from the latest snapshot.
    pub(super) stale: bool,
    pub(super) partitions: HashMap<Vec<u8>, PartitionIndex>,
}

impl TableWrite {
    /// Splits each partition's rows of a dynamic-bucket table by the bucket of their key hash.
    pub(super) async fn assign_dynamic(
        &mut self,
        values: &RecordBatch,
        groups: Vec<(BucketId, Vec<u32>)>,
    ) -> Result<Vec<(BucketId, Vec<u32>)>> {
        let hashes = route::key_hashes(self.layout(), values)?;
        let mut out = Vec::new();
        for (BucketId { partition, .. }, rows) in groups {
            self.load_partition_index(&partition).await?;
            let Some(d) = self.dynamic.as_mut() else {
                break;
            };
            let options = d.options;
            let Some(index) = d.partitions.get_mut(&partition) else {
                continue;
            };
            let mut by_bucket: std::collections::BTreeMap<i32, Vec<u32>> = Default::default();
            for r in rows {
                let b = index.assign(hashes[r as usize], &options);
                by_bucket.entry(b).or_default().push(r);
            }
            out.extend(
                by_bucket
                    .into_iter()
                    .map(|(b, rows)| (BucketId::new(partition.clone(), b), rows)),
            );
        }
        Ok(out)
    }

    /// Loads the HASH files of `partition` (once). A bucket holding data without a HASH file
    /// could get a key twice: refused, as pypaimon does.
    async fn load_partition_index(&mut self, partition: &[u8]) -> Result<()> {
        let Some(d) = self.dynamic.as_ref() else {
            return Ok(());
        };
        if d.partitions.contains_key(partition) {
            return Ok(());
        }
        let mm = self.table().manifest_manager();
        if d.stale {
            let latest = self.table().snapshot_manager().latest().await?;
            let entries = match &latest {
                Some(s) => mm.index_entries(s).await?,
                None => vec![],
            };
            if let Some(d) = self.dynamic.as_mut() {
                d.entries = entries;
                d.stale = false;
            }
        }
        let Some(d) = self.dynamic.as_ref() else {
            return Ok(());
        };
        let files: Vec<&IndexManifestEntry> = d
            .entries
            .iter()
            .filter(|e| e.partition == partition && e.file.index_type == HASH_INDEX)
            .collect();
        let reads = files.iter().map(|e| {
            let mm = mm.clone();
            async move {
                let hashes = mm.read_hash_index(&e.file).await?;
                Ok::<_, crate::error::Error>((e.bucket, e.file.file_name.clone(), hashes))
            }
        });
        let loaded = futures::future::try_join_all(reads).await?;
        let table = self.table().identifier().to_string();
        let shown = self.table().partition_display(partition);
        let unindexed = self.restored.iter().flatten().find(|(id, r)| {
            id.partition == *partition
                && !r.files.is_empty()
                && !loaded.iter().any(|(x, _, _)| *x == id.bucket)
        });
        if let Some((BucketId { bucket: b, .. }, _)) = unindexed {
            return CorruptSnafu {
                path: self.table().path().to_string(),
                message: format!(
                    "dynamic-bucket table {table}: bucket {b} of partition {shown} holds data files but no HASH index file, so a key could be written to two buckets"
                ),
            }
            .fail();
        }
        let index = PartitionIndex::load(loaded, &d.options).map_err(|m| {
            m.within(format_args!(
                "dynamic-bucket index of table {table}, partition {shown}"
            ))
            .at(self.table().path())
        })?;
        if let Some(d) = self.dynamic.as_mut() {
            d.partitions.insert(partition.to_vec(), index);
        }
        Ok(())
    }

    /// Writes a new HASH file for every dynamic bucket whose keys grew and puts it in that
    /// bucket's message, with the partition's index base.
    pub(super) async fn write_grown_indexes(
        &mut self,
        messages: &mut Vec<CommitMessage>,
        total_buckets: i32,
    ) -> Result<()> {
        let Some(d) = self.dynamic.as_mut() else {
            return Ok(());
        };
        let mm = self.shared.table.manifest_manager();
        for (partition, index) in d.partitions.iter_mut() {
            let grown = index.take_grown();
            if grown.is_empty() {
                continue;
            }
            let base = index.base();
            for g in grown {
                let meta = mm.write_hash_index(&self.shared.namer, &g.hashes).await?;
                index.written(g.bucket, meta.file_name.clone());
                let slot = match messages
                    .iter()
                    .position(|m| &m.partition == partition && m.bucket == g.bucket)
                {
                    Some(i) => i,
                    None => {
                        messages.push(CommitMessage::empty(
                            partition.clone(),
                            g.bucket,
                            total_buckets,
                        ));
                        messages.len() - 1
                    }
                };
                messages[slot].index_files.push(meta);
                messages[slot].index_base = Some(base.clone());
            }
        }
        // Memory stays bounded over a long stream: indexes of partitions this commit did not
        // write are dropped (reloaded from the latest snapshot if they come back).
        let before = d.partitions.len();
        d.partitions.retain(|_, index| index.take_touched());
        d.stale |= d.partitions.len() < before;
        Ok(())
    }
}
