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
use crate::lsm::merge::stream::{merge_streams, RunStream};
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
    // Output never has more rows than input, so this many names suffice.
    let names: Vec<String> = (0..(input_rows as usize / rows_per_file + 2))
        .map(|_| namer.next("data-", ".parquet"))
        .collect();
    let layout = Arc::clone(layout);
    let io = table.io().clone();
    let handle = tokio::runtime::Handle::current();
    // Runs in key order; each run's files are read one at a time.
    let mut runs: Vec<Vec<String>> = Vec::new();
    if !pk {
        // Append files are concatenated oldest first.
        let mut files: Vec<&DataFileMeta> = inputs.iter().collect();
        files.sort_by_key(|f| (f.min_sequence_number, f.max_sequence_number));
        runs.push(
            files
                .iter()
                .map(|f| format!("{dir}/{}", f.file_name))
                .collect(),
        );
    }
    if pk {
        for files in data_file::key_ordered_runs(inputs, &layout.key_types) {
            runs.push(
                files
                    .into_iter()
                    .map(|f| format!("{dir}/{}", f.file_name))
                    .collect(),
            );
        }
    }
    let task = move || -> Result<Vec<DataFileMeta>> {
        let mut names = names.into_iter();
        let mut written = Vec::new();
        let mut pending: Vec<RecordBatch> = Vec::new();
        let mut pending_rows = 0usize;
        let mut offset = 0i64;
        // Encodes and writes one output file from the pending rows.
        let mut flush = |pending: &mut Vec<RecordBatch>, pending_rows: &mut usize| -> Result<()> {
            if *pending_rows == 0 {
                return Ok(());
            }
            let batch =
                concat_batches(&layout.file_schema, pending.iter()).context(ArrowSnafu {
                    context: "assembling a compaction output",
                })?;
            pending.clear();
            let n = *pending_rows as i64;
            *pending_rows = 0;
            let name = names.next().ok_or_else(|| {
                InternalSnafu {
                    message: "ran out of file names".to_string(),
                }
                .build()
            })?;
            // Append files are renumbered from the first input's sequence number, keeping order.
            let seq = (!pk).then(|| (first_seq + offset, first_seq + offset + n - 1));
            offset += n;
            let (bytes, meta) = data_file::encode(
                &layout,
                &batch,
                name,
                output_level,
                seq,
                FileSource::Compact,
                now_millis(),
            )?;
            handle.block_on(io.write(&format!("{dir}/{}", meta.file_name), bytes))?;
            written.push(meta);
            Ok(())
        };
        let mut accept = |batch: RecordBatch,
                          pending: &mut Vec<RecordBatch>,
                          pending_rows: &mut usize|
         -> Result<()> {
            let mut start = 0;
            while start < batch.num_rows() {
                let take = (rows_per_file - *pending_rows).min(batch.num_rows() - start);
                pending.push(batch.slice(start, take));
                *pending_rows += take;
                start += take;
                if *pending_rows >= rows_per_file {
                    flush(pending, pending_rows)?;
                }
            }
            Ok(())
        };
        let read_file = |path: &String| -> Result<Vec<RecordBatch>> {
            let bytes = handle.block_on(io.read(path))?;
            data_file::decode(path, bytes, &layout.file_schema)
        };
        if pk {
            let streams: Vec<RunStream> = runs
                .into_iter()
                .map(|files| {
                    data_file::run_stream(
                        handle.clone(),
                        io.clone(),
                        Arc::clone(&layout.file_schema),
                        files,
                        None,
                    )
                })
                .collect();
            let all: Vec<usize> = (0..layout.schema.fields.len()).collect();
            let spec = layout.merge_spec(&all, !drop_delete);
            merge_streams(streams, &spec, |b| {
                accept(b, &mut pending, &mut pending_rows)
            })?;
        } else {
            // Append inputs are given in sequence order; keep it.
            for path in runs.iter().flatten() {
                for b in read_file(path)? {
                    accept(b, &mut pending, &mut pending_rows)?;
                }
            }
        }
        flush(&mut pending, &mut pending_rows)?;
        Ok(written)
    };
    tokio::task::spawn_blocking(task).await.map_err(|e| {
        InternalSnafu {
            message: format!("compaction task: {e}"),
        }
        .build()
    })?
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
