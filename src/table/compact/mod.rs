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

mod output;

use output::OutputFiles;

use super::commit::CommitMessage;
use super::data_file::{self, RunFile};
use super::deletion_vectors::{BucketVectors, Marks, OldCopies};
use super::lookup::{self, LookupSource};
use super::progress::Operation;
use super::Table;
use crate::error::{InternalSnafu, Result};
use crate::lsm::compaction::changelog::chunk_changelog;
use crate::lsm::compaction::{pick, pick_full, PickerOptions, RunSize};
use crate::lsm::levels::{sorted_runs, LevelSortedRun};
use crate::lsm::merge::stream::{stream_chunks, RunStream};
use crate::lsm::merge::{merge_runs, merge_sorted_slices};
use crate::manifest::FileNamer;
use crate::schema::layout::TableLayout;
use crate::spec::binary_row::Datum;
use crate::spec::options::DELETION_VECTORS;
use crate::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use crate::spec::{ChangelogProducer, CoreOptions, DataFileMeta};

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
pub fn picker_options(opts: &crate::spec::TableOptions) -> PickerOptions {
    PickerOptions {
        max_size_amplification_percent: opts.max_size_amplification_percent,
        size_ratio: opts.size_ratio,
        run_trigger: opts.compaction_trigger.max(1),
        max_level: opts.num_levels as i32 - 1,
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
        let target = layout.options.target_file_size;
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

/// What a writer's compaction must achieve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Force {
    /// Every level-0 file up into level 1 or above (the `lookup` producer's changelog comes from
    /// these compactions; Paimon's `ForceUpLevel0Compaction`).
    Level0,
    /// Everything into the max level (the `full-compaction` producer).
    Full,
}

/// The compaction a bucket needs now, with `force` raising the picker's choice.
pub(crate) fn plan_forced(
    layout: &TableLayout,
    files: &[DataFileMeta],
    opts: &PickerOptions,
    force: Option<Force>,
) -> Option<(Vec<DataFileMeta>, i32)> {
    match force {
        None => plan(layout, files, opts, false),
        Some(Force::Full) => plan(layout, files, opts, true),
        Some(Force::Level0) => {
            let runs = sorted_runs(files);
            let l0 = runs.iter().take_while(|r| r.level == 0).count();
            if l0 == 0 || !layout.is_primary_key_table() {
                return plan(layout, files, opts, false);
            }
            // The universal picker's choice when it already takes every level-0 file.
            if let Some((inputs, level)) = plan(layout, files, opts, false) {
                if level > 0 && inputs.iter().filter(|f| f.level == 0).count() == l0 {
                    return Some((inputs, level));
                }
            }
            let (take, level) = match runs.get(l0) {
                None => (l0, opts.max_level),
                Some(r) if r.level > 1 => (l0, r.level - 1),
                Some(r) => (l0 + 1, r.level),
            };
            let inputs = runs[..take]
                .iter()
                .flat_map(|r| r.files.iter().cloned())
                .collect();
            Some((inputs, level))
        }
    }
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
    /// The bucket's deletion vectors before the compaction (`deletion-vectors.enabled`): inputs
    /// are read without their deleted rows, and the old copies of the keys it rewrites are
    /// marked in the files above the output level instead of merged on read.
    pub(crate) vectors: Option<&'a BucketVectors>,
}

/// Which changelog a compaction produces (`changelog-producer` = `lookup` or `full-compaction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompactionChangelog {
    /// Level-0 inputs against what levels above 0 held (`row_deduplicate`: equal values emit
    /// nothing).
    Lookup { row_deduplicate: bool },
    /// Everything against what the max level held.
    Full,
}

/// The changelog a compaction into `output_level` must produce, if any.
fn compaction_changelog(
    layout: &TableLayout,
    inputs: &[DataFileMeta],
    output_level: i32,
) -> Option<CompactionChangelog> {
    if !layout.is_primary_key_table() {
        return None;
    }
    let opts = CoreOptions::new(&layout.schema.options);
    match ChangelogProducer::of(&opts) {
        ChangelogProducer::Lookup if output_level > 0 && inputs.iter().any(|f| f.level == 0) => {
            Some(CompactionChangelog::Lookup {
                row_deduplicate: layout.options.changelog_row_deduplicate,
            })
        }
        ChangelogProducer::FullCompaction
            if output_level == picker_options(&layout.options).max_level =>
        {
            Some(CompactionChangelog::Full)
        }
        _ => None,
    }
}

/// What a compaction wrote: the new data files and, for changelog producers that derive the
/// changelog at compaction, its changelog files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rewritten {
    pub(crate) files: Vec<DataFileMeta>,
    pub(crate) changelog: Vec<DataFileMeta>,
    /// Rows of files above the output level whose keys the outputs now hold (deletion-vector
    /// tables): the positions to mark deleted.
    pub(crate) marks: Marks,
}

/// The files above level 0 that a compaction does not rewrite and whose keys overlap those of its
/// level-0 inputs: where the old copies of those keys are.
fn lookup_candidates(
    layout: &TableLayout,
    all_files: &[DataFileMeta],
    inputs: &[DataFileMeta],
) -> Vec<DataFileMeta> {
    let l0: Vec<&DataFileMeta> = inputs.iter().filter(|f| f.level == 0).collect();
    let kt = &layout.key_types;
    let min = l0
        .iter()
        .map(|f| &f.min_key)
        .min_by(|a, b| data_file::compare_keys(a, b, kt));
    let max = l0
        .iter()
        .map(|f| &f.max_key)
        .max_by(|a, b| data_file::compare_keys(a, b, kt));
    let (Some(lo), Some(hi)) = (min, max) else {
        return vec![];
    };
    all_files
        .iter()
        .filter(|f| f.level > 0)
        .filter(|f| {
            !inputs
                .iter()
                .any(|i| i.file_name == f.file_name && i.level == f.level)
        })
        .filter(|f| {
            data_file::compare_keys(&f.max_key, lo, kt).is_ge()
                && data_file::compare_keys(&f.min_key, hi, kt).is_le()
        })
        .cloned()
        .collect()
}

/// Rewrites the job's inputs into its output level; returns the new files, written and durable but
/// not committed.
pub(crate) async fn rewrite(
    table: &Table,
    layout: &Arc<TableLayout>,
    namer: &FileNamer,
    job: BucketCompaction<'_>,
) -> Result<Rewritten> {
    let BucketCompaction {
        partition,
        bucket,
        all_files,
        inputs,
        output_level,
        vectors,
    } = job;
    let started = std::time::Instant::now();
    let dir = table.bucket_dir(partition, bucket)?;
    let pk = layout.is_primary_key_table();
    // Deletes can go only when no older data lies below the output level; with deletion vectors
    // the older copies below are marked deleted instead, so they go at every level above 0.
    let drop_delete = output_level != 0
        && (vectors.is_some() || output_level >= highest_level(&sorted_runs(all_files)));
    let changelog = compaction_changelog(layout, inputs, output_level);
    // Deletion vectors: a key of a level-0 input may have its old copy in a level above the
    // output (Paimon's lookup); that copy is merged in and marked deleted.
    let dv_lookup =
        vectors.is_some() && pk && output_level > 0 && inputs.iter().any(|f| f.level == 0);
    // Lookup: the before image of a key may lie in higher levels the compaction does not rewrite;
    // those files (the ones overlapping the level-0 inputs' keys) are read alongside.
    let lookup_files: Vec<DataFileMeta> =
        if dv_lookup || matches!(changelog, Some(CompactionChangelog::Lookup { .. })) {
            lookup_candidates(layout, all_files, inputs)
        } else {
            vec![]
        };
    let input_bytes: i64 = inputs.iter().map(|f| f.file_size).sum();
    let input_rows: i64 = inputs.iter().map(|f| f.row_count).sum();
    let lookup_rows: i64 = lookup_files.iter().map(|f| f.row_count).sum();
    let lookup_count = lookup_files.len();
    let first_seq = inputs
        .iter()
        .map(|f| f.min_sequence_number)
        .min()
        .unwrap_or(0);
    let target = layout.options.target_file_size;
    let rows_per_file =
        ((target as f64 / (input_bytes.max(1) as f64 / input_rows.max(1) as f64)) as usize).max(1);
    let names_for = |prefix: &str, rows: i64| -> Vec<String> {
        (0..(rows as usize / rows_per_file + 2))
            .map(|_| namer.next(prefix, super::data_file::data_suffix(layout)))
            .collect()
    };
    let outputs = OutputFiles {
        layout: Arc::clone(layout),
        io: table.io().clone(),
        clock: table.clock().clone(),
        handle: tokio::runtime::Handle::current(),
        dir: dir.clone(),
        // Output never has more rows than input, so this many names suffice.
        names: names_for("data-", input_rows).into_iter(),
        level: output_level,
        rows_per_file,
        append_first_seq: (!pk).then_some(first_seq),
        pending: vec![],
        pending_rows: 0,
        written: vec![],
        keep_lookup: pk
            && output_level > 0
            && (vectors.is_some()
                || ChangelogProducer::of(&CoreOptions::new(&layout.schema.options))
                    == ChangelogProducer::Lookup),
    };
    // A changelog has at most two records per key read.
    let changelog_outputs = changelog.map(|_| OutputFiles {
        names: names_for("changelog-", 2 * (input_rows + lookup_rows)).into_iter(),
        level: 0,
        append_first_seq: None,
        ..outputs.clone_empty()
    });
    let layout = Arc::clone(layout);
    let io = table.io().clone();
    let handle = tokio::runtime::Handle::current();
    table
        .load_file_schemas(inputs.iter().chain(&lookup_files))
        .await?;
    // Each file with the rows its deletion vector marks (left out when read); lookup files also
    // with their ordinal, so that the rows read from them carry where they sit.
    let lookup_names: Vec<String> = lookup_files.iter().map(|f| f.file_name.clone()).collect();
    let run_file = |f: &DataFileMeta, positioned: bool| -> Result<RunFile> {
        Ok(RunFile {
            file: table.file_ref(&dir, f)?,
            deleted: vectors.and_then(|v| v.of(&f.file_name)).cloned(),
            ordinal: if positioned && dv_lookup {
                lookup_names
                    .iter()
                    .position(|n| *n == f.file_name)
                    .map(|i| i as u32)
            } else {
                None
            },
        })
    };
    // Runs in key order; each run's files are read one at a time.
    let mut runs: Vec<Vec<RunFile>> = Vec::new();
    let mut run_levels: Vec<i32> = Vec::new();
    if !pk {
        // Append files are concatenated oldest first.
        let mut files: Vec<&DataFileMeta> = inputs.iter().collect();
        files.sort_by_key(|f| (f.min_sequence_number, f.max_sequence_number));
        runs.push(
            files
                .iter()
                .map(|f| run_file(f, false))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    // Runs of the inputs first, then the lookup-only runs.
    let mut input_runs = 0;
    if pk {
        let input_ordered = data_file::key_ordered_runs(inputs, &layout.key_types);
        input_runs = input_ordered.len();
        for (i, files) in input_ordered
            .into_iter()
            .chain(data_file::key_ordered_runs(
                &lookup_files,
                &layout.key_types,
            ))
            .enumerate()
        {
            run_levels.push(files.first().map(|f| f.level).unwrap_or(0));
            runs.push(
                files
                    .iter()
                    .map(|f| run_file(f, i >= input_runs))
                    .collect::<Result<Vec<_>>>()?,
            );
        }
    }
    let max_level = picker_options(&layout.options).max_level;
    // The runs above level 0 that the compaction only looks keys up in are read through the
    // lookup index: only the rows with a key of a level-0 input, found by binary search.
    let lookup = (pk && !lookup_files.is_empty()).then(|| LookupSource {
        handle: handle.clone(),
        io: io.clone(),
        schema: Arc::clone(&layout.file_schema),
        positioned: data_file::with_position_column(&layout.file_schema),
    });
    let task = move || -> Result<Rewritten> {
        let mut outputs = outputs;
        let mut changelog_outputs = changelog_outputs;
        let schema = Arc::clone(&layout.file_schema);
        let positioned = data_file::with_position_column(&schema);
        let read = |files: Vec<RunFile>| {
            data_file::vector_run_stream(
                handle.clone(),
                io.clone(),
                Arc::clone(&schema),
                Arc::clone(&positioned),
                files,
            )
        };
        let streams: Vec<RunStream> = match &lookup {
            None => runs.into_iter().map(read).collect(),
            Some(source) => {
                // Level-0 inputs are read first: their keys are what is looked up.
                let loaded: Vec<std::result::Result<Vec<RecordBatch>, Vec<RunFile>>> = runs
                    .into_iter()
                    .enumerate()
                    .map(|(i, files)| {
                        if i < input_runs && run_levels.get(i) == Some(&0) {
                            read(files).collect::<Result<Vec<_>>>().map(Ok)
                        } else {
                            Ok(Err(files))
                        }
                    })
                    .collect::<Result<_>>()?;
                let level0: Vec<RecordBatch> = loaded
                    .iter()
                    .flat_map(|r| r.iter().flatten())
                    .cloned()
                    .collect();
                let keys = Arc::new(lookup::distinct_keys(&level0, layout.key_types.len())?);
                loaded
                    .into_iter()
                    .enumerate()
                    .map(|(i, run)| match run {
                        Ok(batches) => Box::new(batches.into_iter().map(Ok)) as RunStream,
                        Err(files) if i >= input_runs => {
                            source.run_stream(files, Arc::clone(&keys))
                        }
                        Err(files) => read(files),
                    })
                    .collect()
            }
        };
        if !pk {
            // Append inputs are given in sequence order; keep it.
            for b in streams.into_iter().flatten() {
                outputs.accept(b?)?;
            }
            return Ok(Rewritten {
                files: outputs.finish()?,
                changelog: vec![],
                marks: Marks::new(),
            });
        }
        let all: Vec<usize> = (0..layout.schema.fields.len()).collect();
        let spec = layout.merge_spec(&all, !drop_delete);
        let read_spec = layout.merge_spec(&all, false);
        let (is_old, row_deduplicate): (Vec<bool>, bool) = match changelog {
            Some(CompactionChangelog::Lookup { row_deduplicate }) => {
                (run_levels.iter().map(|l| *l > 0).collect(), row_deduplicate)
            }
            Some(CompactionChangelog::Full) => {
                (run_levels.iter().map(|l| *l == max_level).collect(), true)
            }
            None => (vec![], true),
        };
        let mut marks = Marks::new();
        let mut old_copies = dv_lookup
            .then(|| OldCopies::new(&schema, spec.key_count, input_runs))
            .transpose()?;
        stream_chunks(streams, spec.key_count, |chunk| {
            // With deletion vectors, the old copies of the keys rewritten join the merge (they
            // are older than every input) and are marked deleted where they are.
            let cleaned;
            let chunk = match old_copies.as_mut() {
                Some(o) => {
                    cleaned = o.take(chunk, &lookup_names, &mut marks)?;
                    &cleaned[..]
                }
                None => chunk,
            };
            let slices: Vec<RecordBatch> = chunk
                .iter()
                .filter(|(run, _)| *run < input_runs || dv_lookup)
                .map(|(_, b)| b.clone())
                .collect();
            // One slice per sorted run (keys unique and ascending in each) is what the walk of
            // `merge_sorted_slices` needs; the old copies of a deletion-vector lookup are merged
            // by sorting.
            let merged = if old_copies.is_some() {
                merge_runs(&slices, &spec)?
            } else {
                merge_sorted_slices(&slices, &spec)?
            };
            if let Some(merged) = merged {
                outputs.accept(merged)?;
            }
            if let Some(out) = changelog_outputs.as_mut() {
                if let Some(changes) = chunk_changelog(chunk, &is_old, &read_spec, row_deduplicate)?
                {
                    out.accept(changes)?;
                }
            }
            Ok(())
        })?;
        Ok(Rewritten {
            files: outputs.finish()?,
            changelog: match changelog_outputs {
                Some(c) => c.finish()?,
                None => vec![],
            },
            marks,
        })
    };
    let rewritten = tokio::task::spawn_blocking(task).await.map_err(|e| {
        InternalSnafu {
            message: format!("compaction task: {e}"),
        }
        .build()
    })??;
    let m = crate::metrics::metrics();
    m.compactions.inc();
    m.compaction_seconds
        .observe(started.elapsed().as_secs_f64());
    tracing::debug!(
        table = %table.identifier(),
        bucket,
        inputs = inputs.len(),
        input_rows,
        lookup_files = lookup_count,
        lookup_rows,
        output_level,
        outputs = rewritten.files.len(),
        marked_files = rewritten.marks.len(),
        ms = started.elapsed().as_millis() as u64,
        "compaction"
    );
    Ok(rewritten)
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
        self.compact_with(full, partition_filter, &Operation::new())
            .await
    }

    /// [`Table::compact`] reporting its progress (one unit per bucket) to `op`. Cancelled, it
    /// removes the files it wrote and commits nothing.
    pub async fn compact_with(
        &self,
        full: bool,
        partition_filter: Vec<(String, Datum)>,
        op: &Operation,
    ) -> Result<CompactReport> {
        let layout = self.layout()?;
        // A mode tidelake cannot write, it cannot compact either (row ids).
        layout.check_compactable(&self.identifier().to_string())?;
        if layout.bucket_mode == crate::spec::BucketMode::Postpone {
            return self.compact_postpone(full, partition_filter, op).await;
        }
        op.phase("planning", 0);
        let plan_ = self
            .new_scan()
            .partition_filter(partition_filter)
            .all_levels()
            .plan()
            .await?;
        let opts = picker_options(&layout.options);
        let namer = FileNamer::default();
        // Tables that look up older levels at compaction (deletion vectors, the `lookup`
        // producer) always move level 0 up, as Paimon's ForceUpLevel0Compaction does.
        let force = if full {
            Some(Force::Full)
        } else if layout.deletion_vectors()
            || layout.changelog_producer == ChangelogProducer::Lookup
        {
            Some(Force::Level0)
        } else {
            None
        };
        // Deletion vectors: each bucket's, as of the planned snapshot, go into its compaction.
        let dv = CoreOptions::new(&layout.schema.options).flag(DELETION_VECTORS);
        let index = match (&plan_.snapshot, dv) {
            (Some(s), true) => Some((s.id, self.manifest_manager().index_entries(s).await?)),
            _ => None,
        };
        let mut messages: Vec<CommitMessage> = Vec::new();
        let mut report = CompactReport::default();
        let total_buckets = layout.total_buckets();
        let jobs: Vec<_> = plan_
            .splits
            .into_iter()
            .filter_map(|split| {
                let (inputs, level) = plan_forced(&layout, &split.files, &opts, force)?;
                Some((split, inputs, level))
            })
            .collect();
        op.phase("compacting buckets", jobs.len() as u64);
        let what = format!("compaction of {}", self.identifier());
        for (split, inputs, level) in jobs {
            if let Err(e) = op.check(&what) {
                self.discard_rewritten(&messages).await;
                return Err(e);
            }
            let (partition, bucket, files) = (split.partition, split.bucket, split.files);
            let vectors = match &index {
                Some((id, entries)) => {
                    match self
                        .bucket_vectors(*id, entries, &partition, bucket, &files)
                        .await
                    {
                        Ok(v) => Some(v),
                        Err(e) => {
                            self.discard_rewritten(&messages).await;
                            return Err(e);
                        }
                    }
                }
                None => None,
            };
            let job = BucketCompaction {
                partition: &partition,
                bucket,
                all_files: &files,
                inputs: &inputs,
                output_level: level,
                vectors: vectors.as_ref(),
            };
            let written = match rewrite(self, &layout, &namer, job).await {
                Ok(out) => match &vectors {
                    Some(v) => self
                        .write_vectors(&namer, &v.after(&inputs, &out.marks))
                        .await
                        .map(|change| (out, Some(change))),
                    None => Ok((out, None)),
                },
                Err(e) => Err(e),
            };
            let (out, change) = match written {
                Ok(w) => w,
                Err(e) => {
                    self.discard_rewritten(&messages).await;
                    return Err(e);
                }
            };
            report.buckets_compacted += 1;
            report.files_before += inputs.len();
            report.files_after += out.files.len();
            let written = out.files.iter().chain(&out.changelog);
            op.advance(
                written.clone().count() as u64,
                written.map(|f| f.file_size.max(0) as u64).sum(),
            );
            messages.push(CommitMessage {
                compact_before: inputs,
                compact_after: out.files,
                compact_changelog: out.changelog,
                vectors: change,
                ..CommitMessage::empty(partition, bucket, total_buckets)
            });
        }
        if messages.is_empty() {
            return Ok(report);
        }
        if let Err(e) = op.check(&what) {
            self.discard_rewritten(&messages).await;
            return Err(e);
        }
        op.phase("committing", 1);
        let outcome = self
            .new_commit(uuid::Uuid::new_v4().to_string())
            .commit(messages, BATCH_COMMIT_IDENTIFIER, None)
            .await?;
        report.snapshot_id = outcome.snapshot_id();
        op.advance(0, 0);
        Ok(report)
    }

    /// Removes the uncommitted outputs of compactions that will not be committed (best effort:
    /// what is left is an orphan that `remove_orphan_files` finds).
    pub(super) async fn discard_rewritten(&self, messages: &[CommitMessage]) {
        for m in messages {
            let Ok(dir) = self.bucket_dir(&m.partition, m.bucket) else {
                continue;
            };
            let index = m
                .vectors
                .iter()
                .filter_map(|v| v.file.as_ref())
                .map(|f| self.manifest_manager().index_path(f));
            let data = m
                .compact_after
                .iter()
                .chain(&m.compact_changelog)
                .map(|f| format!("{dir}/{}", f.file_name));
            for path in data.chain(index) {
                if let Err(e) = self.io().delete(&path).await {
                    tracing::warn!(%path, error = %e, "could not remove an uncommitted compaction output");
                }
            }
        }
    }
}
