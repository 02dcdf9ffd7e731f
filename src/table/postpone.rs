//! Postpone buckets (`bucket` = -2): the compaction that moves the rows writers staged in
//! `bucket-postpone/` into fixed buckets, as Paimon's postpone compaction does. Per partition it
//! decides the bucket count ([`bucket_count`], Paimon's `PostponeBucketNumResolver`), reads the
//! staged files in the order they were written, routes every row by the fixed-bucket hash,
//! writes it through the ordinary bucket writers (new sequence numbers after the bucket's own,
//! the bucket compacted), and commits one COMPACT snapshot: the staged files deleted, the real
//! buckets' files added with `_TOTAL_BUCKETS` = N.

use std::collections::{BTreeMap, HashSet};

use arrow::array::AsArray;
use arrow::datatypes::Int8Type;

use super::commit::CommitMessage;
use super::compact::CompactReport;
use super::progress::Operation;
use super::scan::Pruning;
use super::write::TableWrite;
use super::Table;
use crate::error::{invalid, InternalSnafu, Result};
use crate::spec::binary_row::Datum;
use crate::spec::options::PostponeOptions;
use crate::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use crate::spec::{DataFileMeta, POSTPONE_BUCKET};

/// What a partition holds when its staged rows are moved.
#[derive(Debug, Default)]
struct PartitionFiles {
    /// The staged files, in manifest order.
    staged: Vec<DataFileMeta>,
    /// `_TOTAL_BUCKETS` of the partition's real-bucket files.
    real_buckets: Option<i32>,
}

/// The bucket count a partition's staged rows move into (Paimon's `PostponeBucketNumResolver`):
/// the count its real buckets already have, else `postpone.default-bucket-num`, else an estimate
/// from the staged rows (`postpone.target-row-num-per-bucket`) or bytes
/// (`postpone.target-size-per-bucket`), at least 1. Pure.
pub(crate) fn bucket_count(
    existing: Option<i32>,
    options: &PostponeOptions,
    staged_rows: i64,
    staged_bytes: i64,
) -> i32 {
    if let Some(n) = existing.filter(|n| *n > 0) {
        return n;
    }
    if let Some(n) = options.default_bucket_num {
        return n;
    }
    let (amount, per_bucket) = match options.target_row_num {
        Some(rows) => (staged_rows.max(0) as u64, rows.max(1) as u64),
        None => (staged_bytes.max(0) as u64, options.target_size.max(1)),
    };
    amount.div_ceil(per_bucket).clamp(1, i32::MAX as u64) as i32
}

/// The order a partition's staged files are moved in: by creation time, then as the manifests
/// list them (a writer's files are created in the order it wrote them). Pure.
pub(crate) fn move_order(files: &mut [DataFileMeta]) {
    files.sort_by_key(|f| f.creation_time.unwrap_or(i64::MIN));
}

impl Table {
    /// [`Table::compact_with`] of a postpone table: moves the staged rows of the partitions
    /// `partition_filter` keeps into fixed buckets, one COMPACT snapshot. Real buckets of
    /// partitions without staged rows are left as they are.
    pub(crate) async fn compact_postpone(
        &self,
        full: bool,
        partition_filter: Vec<(String, Datum)>,
        op: &Operation,
    ) -> Result<CompactReport> {
        let layout = self.layout()?;
        op.phase("planning", 0);
        let scan = self
            .new_scan()
            .partition_filter(partition_filter)
            .all_levels()
            .with_postpone();
        let pruning = Pruning::new(self.identifier(), &layout, &scan)?;
        let mut report = CompactReport::default();
        let Some(snapshot) = self.snapshot_manager().latest().await? else {
            return Ok(report);
        };
        let mut partitions: BTreeMap<Vec<u8>, PartitionFiles> = BTreeMap::new();
        for e in self.manifest_manager().live_entries(&snapshot).await? {
            let keep = pruning
                .keeps(&e)
                .map_err(|m| m.at(format!("{} snapshot {}", self.identifier(), snapshot.id)))?;
            if !keep {
                continue;
            }
            let p = partitions.entry(e.partition.clone()).or_default();
            if e.bucket == POSTPONE_BUCKET {
                p.staged.push(e.file);
            } else if e.bucket >= 0 && e.total_buckets > 0 {
                match p.real_buckets {
                    Some(n) if n != e.total_buckets => {
                        return invalid!(
                            "table {}: partition {} has files of {n} and of {} buckets; the postpone compaction needs one count",
                            self.identifier(),
                            self.partition_display(&e.partition),
                            e.total_buckets
                        );
                    }
                    _ => p.real_buckets = Some(e.total_buckets),
                }
            }
        }
        partitions.retain(|_, p| !p.staged.is_empty());
        if partitions.is_empty() {
            return Ok(report);
        }
        // One writer per bucket count: it routes rows with that count's fixed-bucket hash.
        let mut by_count: BTreeMap<i32, Vec<Vec<u8>>> = BTreeMap::new();
        for (partition, p) in partitions.iter_mut() {
            move_order(&mut p.staged);
            let rows = p.staged.iter().map(|f| f.row_count).sum();
            let bytes = p.staged.iter().map(|f| f.file_size).sum();
            let n = bucket_count(p.real_buckets, &layout.options.postpone, rows, bytes);
            by_count.entry(n).or_default().push(partition.clone());
        }
        let staged: usize = partitions.values().map(|p| p.staged.len()).sum();
        op.phase("moving postpone files", staged as u64);
        let what = format!("compaction of {}", self.identifier());
        let mut messages: Vec<CommitMessage> = Vec::new();
        let mut transient: Vec<(Vec<u8>, i32, DataFileMeta)> = Vec::new();
        for (n, group) in by_count {
            let moved = self
                .move_group(n, &group, &partitions, full, op, &what)
                .await;
            match moved {
                Ok((m, t)) => {
                    messages.extend(m);
                    transient.extend(t);
                }
                Err(e) => {
                    self.discard_moved(&messages, &transient).await;
                    return Err(e);
                }
            }
        }
        // Buckets the staged rows moved into; the staged files are the files before.
        report.buckets_compacted = messages.len();
        report.files_after = messages.iter().map(|m| m.compact_after.len()).sum();
        for (partition, p) in partitions {
            report.files_before += p.staged.len();
            messages.push(CommitMessage {
                compact_before: p.staged,
                ..CommitMessage::empty(partition, POSTPONE_BUCKET, POSTPONE_BUCKET)
            });
        }
        if let Err(e) = op.check(&what) {
            self.discard_moved(&messages, &transient).await;
            return Err(e);
        }
        op.phase("committing", 1);
        let outcome = self
            .new_commit(uuid::Uuid::new_v4().to_string())
            .commit(messages.clone(), BATCH_COMMIT_IDENTIFIER, None)
            .await;
        match outcome {
            Ok(outcome) => {
                report.snapshot_id = outcome.snapshot_id();
                // Files the same round wrote and compacted away were never committed.
                self.discard_moved(&[], &transient).await;
                op.advance(0, 0);
                Ok(report)
            }
            Err(e) => {
                self.discard_moved(&messages, &transient).await;
                Err(e)
            }
        }
    }

    /// Moves the staged files of `group` (partitions of `n` buckets) through one writer; returns
    /// its messages as compactions, and the files it wrote and compacted away in the same round.
    async fn move_group(
        &self,
        n: i32,
        group: &[Vec<u8>],
        partitions: &BTreeMap<Vec<u8>, PartitionFiles>,
        full: bool,
        op: &Operation,
        what: &str,
    ) -> Result<(Vec<CommitMessage>, Vec<(Vec<u8>, i32, DataFileMeta)>)> {
        let layout = self.layout()?;
        let only: HashSet<Vec<u8>> = group.iter().cloned().collect();
        let mut w = TableWrite::for_postpone_move(self.clone(), n, only, full)?;
        let k = layout.key_indices.len();
        let files: Vec<&DataFileMeta> = group
            .iter()
            .filter_map(|p| partitions.get(p))
            .flat_map(|p| &p.staged)
            .collect();
        self.load_file_schemas(files.iter().copied()).await?;
        for partition in group {
            let Some(p) = partitions.get(partition) else {
                continue;
            };
            let dir = self.bucket_dir(partition, POSTPONE_BUCKET)?;
            for f in &p.staged {
                op.check(what)?;
                let file = self.file_ref(&dir, f)?;
                let bytes = self.io().read_data(&file.path).await?;
                let target = std::sync::Arc::clone(&layout.file_schema);
                let path = file.path.clone();
                let batches = tokio::task::spawn_blocking(move || {
                    super::data_file::decode_filtered(
                        &path,
                        bytes,
                        &target,
                        None,
                        file.columns.as_ref(),
                        None,
                    )
                })
                .await
                .map_err(|e| {
                    InternalSnafu {
                        message: format!("reading a postpone file: {e}"),
                    }
                    .build()
                })??;
                for b in batches {
                    let kinds = b.column(k + 1).as_primitive::<Int8Type>().clone();
                    let values = b.project(&((k + 2)..b.num_columns()).collect::<Vec<_>>());
                    let values = values.map_err(|e| {
                        InternalSnafu {
                            message: format!("{}: {e}", file.path),
                        }
                        .build()
                    })?;
                    let values = values
                        .with_schema(std::sync::Arc::clone(&layout.arrow_schema))
                        .map_err(|e| {
                            InternalSnafu {
                                message: format!("{}: {e}", file.path),
                            }
                            .build()
                        })?;
                    w.write_conformed(values, Some(kinds)).await?;
                }
                op.advance(1, f.file_size.max(0) as u64);
            }
        }
        let mut messages = w.prepare_commit().await?;
        w.close().await?;
        let mut transient = Vec::new();
        for m in &mut messages {
            let written: HashSet<String> =
                m.new_files.iter().map(|f| f.file_name.clone()).collect();
            let (gone, before): (Vec<_>, Vec<_>) = std::mem::take(&mut m.compact_before)
                .into_iter()
                .partition(|f| written.contains(&f.file_name));
            let gone_names: HashSet<&str> = gone.iter().map(|f| f.file_name.as_str()).collect();
            let mut after: Vec<DataFileMeta> = std::mem::take(&mut m.new_files)
                .into_iter()
                .filter(|f| !gone_names.contains(f.file_name.as_str()))
                .collect();
            after.append(&mut m.compact_after);
            m.compact_before = before;
            m.compact_after = after;
            m.compact_changelog.append(&mut m.changelog_files);
            transient.extend(gone.into_iter().map(|f| (m.partition.clone(), m.bucket, f)));
        }
        Ok((messages, transient))
    }

    /// Removes what a move wrote that is not committed (best effort: what is left is an orphan
    /// that `remove_orphan_files` finds).
    async fn discard_moved(
        &self,
        messages: &[CommitMessage],
        transient: &[(Vec<u8>, i32, DataFileMeta)],
    ) {
        self.discard_rewritten(messages).await;
        for (partition, bucket, f) in transient {
            let Ok(dir) = self.bucket_dir(partition, *bucket) else {
                continue;
            };
            let path = format!("{dir}/{}", f.file_name);
            if let Err(e) = self.io().delete(&path).await {
                tracing::warn!(%path, error = %e, "could not remove an uncommitted postpone move output");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_the_partitions_then_the_default_then_an_estimate() {
        let mut o = PostponeOptions::default();
        assert_eq!(bucket_count(Some(4), &o, 10, 10), 4);
        assert_eq!(bucket_count(None, &o, 10, 10), 1);
        assert_eq!(bucket_count(None, &o, 10, (3 << 30) + 1), 4);
        o.target_row_num = Some(100);
        assert_eq!(bucket_count(None, &o, 250, 1 << 40), 3);
        assert_eq!(bucket_count(None, &o, 0, 0), 1);
        o.default_bucket_num = Some(8);
        assert_eq!(bucket_count(None, &o, 250, 1 << 40), 8);
        assert_eq!(bucket_count(Some(2), &o, 250, 1 << 40), 2);
    }

    #[test]
    fn staged_files_move_in_creation_order_then_manifest_order() {
        let f = |name: &str, t: i64| {
            let mut f = DataFileMeta::for_test(name, 0, 0, 0);
            f.creation_time = Some(t);
            f
        };
        let mut files = vec![f("c", 5), f("a", 3), f("b", 5), f("d", 1)];
        move_order(&mut files);
        let names: Vec<&str> = files.iter().map(|f| f.file_name.as_str()).collect();
        assert_eq!(names, ["d", "a", "c", "b"]);
    }
}
