//! Compaction of a table's buckets: choose sorted runs with the universal picker (or all of them
//! for a full compaction), merge them with the table's merge engine and rewrite them into the
//! output level, then commit the change as a COMPACT snapshot.
//!
//! ```text
//!  live files of a bucket ─► sorted runs ─► pick (pure) ─► read + merge + write outputs
//!                                                             │
//!            CommitMessage{compact_before: inputs, compact_after: outputs} ─► COMPACT snapshot
//! ```
//!
//! Merged records keep their sequence numbers; retractions are dropped only when nothing older
//! can lie below the output level. Append tables concatenate small files in sequence order.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use snafu::ResultExt;

use super::data_file;
use super::layout::TableLayout;
use super::write::CommitMessage;
use super::Table;
use crate::catalog::now_millis;
use crate::error::{ArrowSnafu, InternalSnafu, Result};
use crate::lsm::compaction::{pick, pick_full, PickerOptions, RunSize};
use crate::lsm::levels::{sorted_runs, LevelSortedRun};
use crate::lsm::merge_runs;
use crate::manifest::FileNamer;
use crate::spec::binary_row::Datum;
use crate::spec::manifest::FileSource;
use crate::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use crate::spec::{CoreOptions, DataFileMeta};

/// Minimum number of small files before an append bucket is compacted (`compaction.min.file-num`).
const APPEND_MIN_FILE_NUM: usize = 5;

/// What a compaction run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    pub buckets_compacted: usize,
    pub files_before: usize,
    pub files_after: usize,
    pub snapshot_id: Option<i64>,
}

/// The picker options of a table.
pub fn picker_options(opts: &CoreOptions<'_>) -> PickerOptions {
    let num = |k: &str, d: u64| {
        opts.get(k)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(d)
    };
    let trigger = num("num-sorted-run.compaction-trigger", 5) as usize;
    let levels = num("num-levels", trigger as u64 + 1).max(2);
    PickerOptions {
        max_size_amplification_percent: num("compaction.max-size-amplification-percent", 200),
        size_ratio: num("compaction.size-ratio", 1),
        run_trigger: trigger.max(1),
        max_level: levels as i32 - 1,
    }
}

/// The compaction a bucket needs now (`full`: everything into the max level).
pub(crate) fn plan(
    layout: &TableLayout,
    files: &[DataFileMeta],
    opts: &PickerOptions,
    full: bool,
) -> Option<(Vec<DataFileMeta>, i32)> {
    if !layout.is_primary_key_table() {
        // Append buckets: concatenate the small files once there are enough (all of them for full).
        let target = CoreOptions::new(&layout.schema.options).target_file_size();
        let small: Vec<DataFileMeta> = files
            .iter()
            .filter(|f| (f.file_size as u64) < target * 7 / 10)
            .cloned()
            .collect();
        let enough = if full {
            small.len() >= 2
        } else {
            small.len() >= APPEND_MIN_FILE_NUM
        };
        return enough.then_some((small, 0));
    }
    let runs = sorted_runs(files);
    let sizes: Vec<RunSize> = runs
        .iter()
        .map(|r| RunSize {
            level: r.level,
            size: r.total_size(),
        })
        .collect();
    let unit = if full {
        pick_full(&sizes, opts)
    } else {
        pick(&sizes, opts)
    }?;
    let inputs: Vec<DataFileMeta> = runs[..unit.runs]
        .iter()
        .flat_map(|r| r.files.iter().cloned())
        .collect();
    // A single file already at the output level needs nothing, unless it holds deletes to drop.
    if let [only] = inputs.as_slice() {
        if only.level == unit.output_level && only.delete_row_count == Some(0) {
            return None;
        }
    }
    Some((inputs, unit.output_level))
}

fn highest_level(runs: &[LevelSortedRun]) -> i32 {
    runs.iter().map(|r| r.level).max().unwrap_or(-1)
}

/// One bucket's compaction: which of its files go into which level.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BucketCompaction<'a> {
    pub(crate) partition: &'a [u8],
    pub(crate) bucket: i32,
    /// Every live file of the bucket (decides whether deletes can be dropped).
    pub(crate) all_files: &'a [DataFileMeta],
    pub(crate) inputs: &'a [DataFileMeta],
    pub(crate) output_level: i32,
}

/// Rewrites the job's inputs into its output level; returns the new files, written and durable but
/// not committed.
pub(crate) async fn rewrite(
    table: &Table,
    layout: &Arc<TableLayout>,
    namer: &FileNamer,
    job: BucketCompaction<'_>,
) -> Result<Vec<DataFileMeta>> {
    let BucketCompaction {
        partition,
        bucket,
        all_files,
        inputs,
        output_level,
    } = job;
    let dir = table.bucket_dir(partition, bucket)?;
    let reads = inputs.iter().map(|f| {
        let path = format!("{dir}/{}", f.file_name);
        let io = table.io().clone();
        async move { io.read(&path).await.map(|b| (path, b)) }
    });
    let fetched = futures::future::try_join_all(reads).await?;
    let pk = layout.is_primary_key_table();
    // Deletes can go only when no older data lies below the output level.
    let drop_delete = output_level != 0 && output_level >= highest_level(&sorted_runs(all_files));
    let input_bytes: i64 = inputs.iter().map(|f| f.file_size).sum();
    let input_rows: i64 = inputs.iter().map(|f| f.row_count).sum();
    let first_seq = inputs
        .iter()
        .map(|f| f.min_sequence_number)
        .min()
        .unwrap_or(0);
    let target = CoreOptions::new(&layout.schema.options).target_file_size();
    let rows_per_file =
        ((target as f64 / (input_bytes.max(1) as f64 / input_rows.max(1) as f64)) as usize).max(1);
    let layout = Arc::clone(layout);
    let names: Vec<String> = (0..(input_rows as usize / rows_per_file + 1))
        .map(|_| namer.next("data-", ".parquet"))
        .collect();
    let encoded =
        tokio::task::spawn_blocking(move || -> Result<Vec<(bytes::Bytes, DataFileMeta)>> {
            let mut batches: Vec<RecordBatch> = Vec::new();
            for (path, bytes) in fetched {
                batches.extend(data_file::decode(&path, bytes, &layout.file_schema)?);
            }
            let merged = if pk {
                let all: Vec<usize> = (0..layout.schema.fields.len()).collect();
                merge_runs(&batches, &layout.merge_spec(&all, !drop_delete))?
            } else if batches.is_empty() {
                None
            } else {
                // Append files were given in sequence order; keep it.
                Some(
                    concat_batches(&layout.file_schema, &batches).context(ArrowSnafu {
                        context: "concatenating files",
                    })?,
                )
            };
            let Some(merged) = merged else {
                return Ok(vec![]);
            };
            let mut out = Vec::new();
            let mut names = names.into_iter();
            let mut offset = 0;
            while offset < merged.num_rows() {
                let n = rows_per_file.min(merged.num_rows() - offset);
                let chunk = merged.slice(offset, n);
                let name = names.next().ok_or_else(|| {
                    InternalSnafu {
                        message: "ran out of file names".to_string(),
                    }
                    .build()
                })?;
                let seq = (!pk).then(|| {
                    (
                        first_seq + offset as i64,
                        first_seq + (offset + n) as i64 - 1,
                    )
                });
                out.push(data_file::encode(
                    &layout,
                    &chunk,
                    name,
                    output_level,
                    seq,
                    FileSource::Compact,
                    now_millis(),
                )?);
                offset += n;
            }
            Ok(out)
        })
        .await
        .map_err(|e| {
            InternalSnafu {
                message: format!("compaction task: {e}"),
            }
            .build()
        })??;
    let mut metas = Vec::with_capacity(encoded.len());
    let writes = encoded.into_iter().map(|(bytes, meta)| {
        let path = format!("{dir}/{}", meta.file_name);
        let io = table.io().clone();
        async move { io.write(&path, bytes).await.map(|_| meta) }
    });
    metas.extend(futures::future::try_join_all(writes).await?);
    Ok(metas)
}

impl Table {
    /// Compacts the latest snapshot's buckets (those in the partitions matching `partition_filter`)
    /// and commits one COMPACT snapshot. `full`: every bucket into its max level (all deletes
    /// dropped); otherwise only buckets the universal picker selects.
    pub async fn compact(
        &self,
        full: bool,
        partition_filter: Vec<(String, Datum)>,
    ) -> Result<CompactReport> {
        let layout = self.layout()?;
        let plan_ = self
            .new_scan()
            .partition_filter(partition_filter)
            .all_levels()
            .plan()
            .await?;
        let opts = picker_options(&self.options());
        let namer = FileNamer::default();
        let mut messages = Vec::new();
        let mut report = CompactReport::default();
        let total_buckets = layout.total_buckets();
        for split in plan_.splits {
            let (partition, bucket, files) = (split.partition, split.bucket, split.files);
            let Some((inputs, level)) = plan(&layout, &files, &opts, full) else {
                continue;
            };
            let job = BucketCompaction {
                partition: &partition,
                bucket,
                all_files: &files,
                inputs: &inputs,
                output_level: level,
            };
            let after = rewrite(self, &layout, &namer, job).await?;
            report.buckets_compacted += 1;
            report.files_before += inputs.len();
            report.files_after += after.len();
            messages.push(CommitMessage {
                partition,
                bucket,
                total_buckets,
                new_files: vec![],
                compact_before: inputs,
                compact_after: after,
            });
        }
        if messages.is_empty() {
            return Ok(report);
        }
        let outcome = self
            .new_commit(uuid::Uuid::new_v4().to_string())
            .commit(messages, BATCH_COMMIT_IDENTIFIER, None)
            .await?;
        report.snapshot_id = outcome.snapshot_id();
        Ok(report)
    }
}
