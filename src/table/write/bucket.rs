//! One bucket's writer: its buffer of rows not yet spilled, its view of the bucket's live files
//! ([`Levels`]), the files written since the last commit, and the one compaction that may run
//! beside it. Everything a bucket owns is here, so a bucket is one value in the table writer's
//! map; [`CompactionWindow::absorb`] and [`Levels::apply`] are the pure bookkeeping.

use std::sync::Arc;

use arrow::array::{Int8Array, RecordBatch};
use arrow::compute::concat_batches;
use snafu::ResultExt;

use super::BucketId;
use crate::error::{ArrowSnafu, InternalSnafu, Result};
use crate::lsm::levels::{same_file, Levels};
use crate::lsm::{PendingRun, WriteBuffer};
use crate::manifest::FileNamer;
use crate::schema::layout::TableLayout;
use crate::spec::index_manifest::IndexManifestEntry;
use crate::spec::manifest::FileSource;
use crate::spec::{DataFileMeta, RowKind};
use crate::table::compact::{self, Force, Rewritten};
use crate::table::data_file;
use crate::table::deletion_vectors::{BucketVectors, Marks, VectorsChange};
use crate::table::Table;

/// What every bucket writer of one table shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) table: Table,
    pub(super) layout: Arc<TableLayout>,
    pub(super) namer: Arc<FileNamer>,
}

impl Shared {
    fn path(&self, id: &BucketId, file: &DataFileMeta) -> Result<String> {
        Ok(format!(
            "{}/{}",
            self.table.bucket_dir(&id.partition, id.bucket)?,
            file.file_name
        ))
    }

    /// Deletes files this writer wrote that no snapshot will ever list.
    pub(super) async fn delete(&self, id: &BucketId, files: &[DataFileMeta]) -> Result<()> {
        for f in files {
            self.table.io().delete(&self.path(id, f)?).await?;
        }
        Ok(())
    }
}

/// Rows not yet spilled.
#[derive(Debug)]
enum Buffer {
    /// Primary-key tables: a sorted write buffer.
    Kv(WriteBuffer),
    /// Append tables: batches as they came, and the sequence number the next row takes.
    Append {
        batches: Vec<RecordBatch>,
        rows: usize,
        next_sequence: i64,
    },
}

/// Buffered rows of one bucket on their way to a data file.
#[derive(Debug)]
pub(super) enum SpillJob {
    /// Records to merge, and whether their unmerged records also go to a changelog file.
    Kv(PendingRun, bool),
    /// Appended batches and the sequence numbers they take.
    Append(Vec<RecordBatch>, (i64, i64)),
}

/// An encoded spill: the data file and, for the `input` producer, its changelog file.
pub(super) type Spilled = (
    Option<(bytes::Bytes, DataFileMeta)>,
    Option<(bytes::Bytes, DataFileMeta)>,
);

impl SpillJob {
    /// Merges (or concatenates) and encodes; CPU only.
    pub(super) fn encode(
        self,
        layout: &TableLayout,
        name: String,
        changelog_name: String,
        now_millis: i64,
    ) -> Result<Spilled> {
        let file = |batch: &RecordBatch, name: String, range| {
            data_file::encode(
                layout,
                batch,
                name,
                0,
                range,
                FileSource::Append,
                now_millis,
            )
        };
        match self {
            SpillJob::Kv(run, with_changelog) => {
                let changelog = match with_changelog.then(|| run.sorted()).transpose()?.flatten() {
                    Some(b) => Some(file(&b, changelog_name, None)?),
                    None => None,
                };
                let data = match run.merge()? {
                    Some(b) => Some(file(&b, name, None)?),
                    None => None,
                };
                Ok((data, changelog))
            }
            SpillJob::Append(batches, range) => {
                let batch = concat_batches(&layout.arrow_schema, &batches).context(ArrowSnafu {
                    context: "concatenating appended rows",
                })?;
                Ok((Some(file(&batch, name, Some(range))?), None))
            }
        }
    }
}

/// A bucket's deletion vectors as its writer knows them (`deletion-vectors.enabled` tables).
#[derive(Debug, Clone)]
pub(super) enum VectorSlot {
    /// The table has none.
    Off,
    /// Not read yet: those of the snapshot (id, index entries) the writer's view of the bucket's
    /// files was read from, with this writer's compaction window on top.
    Unloaded(i64, Arc<Vec<IndexManifestEntry>>),
    Loaded(Arc<BucketVectors>),
}

/// A compaction running beside the writer; it ends with the vectors it started from.
#[derive(Debug)]
struct RunningCompaction {
    inputs: Vec<DataFileMeta>,
    task: tokio::task::JoinHandle<Result<(Rewritten, Option<Arc<BucketVectors>>)>>,
}

/// Compactions of one bucket since the last commit: the committed files they replaced, the files
/// they wrote, the changelog files they produced and the rows they marked deleted.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct CompactionWindow {
    pub(super) before: Vec<DataFileMeta>,
    pub(super) after: Vec<DataFileMeta>,
    pub(super) changelog: Vec<DataFileMeta>,
    pub(super) marks: Marks,
}

impl CompactionWindow {
    fn is_empty(&self) -> bool {
        self.before.is_empty()
            && self.after.is_empty()
            && self.changelog.is_empty()
            && self.marks.is_empty()
    }

    /// Adds a finished compaction. An input that an earlier compaction of this window wrote was
    /// never committed: it leaves `after` instead of joining `before`, and is returned, to be
    /// deleted (no snapshot will ever list it). Marks on any input go (its rows were rewritten).
    pub(super) fn absorb(
        &mut self,
        inputs: Vec<DataFileMeta>,
        outputs: Vec<DataFileMeta>,
        changelog: Vec<DataFileMeta>,
        marks: Marks,
    ) -> Vec<DataFileMeta> {
        let mut never_committed = Vec::new();
        for input in inputs {
            self.marks.remove(&input.file_name);
            match self.after.iter().position(|a| same_file(a, &input)) {
                Some(pos) => never_committed.push(self.after.remove(pos)),
                None => self.before.push(input),
            }
        }
        self.after.extend(outputs);
        self.changelog.extend(changelog);
        for (file, positions) in marks {
            *self.marks.entry(file).or_default() |= positions;
        }
        never_committed
    }
}

/// The vectors of a bucket read from the snapshot of `slot` (`live`: the files of the writer's
/// view, which are as of that snapshot plus `window`), with `window`'s compactions applied.
async fn load_vectors(
    table: &Table,
    id: &BucketId,
    slot: VectorSlot,
    live: &[DataFileMeta],
    window: &CompactionWindow,
) -> Result<Option<Arc<BucketVectors>>> {
    match slot {
        VectorSlot::Off => Ok(None),
        VectorSlot::Loaded(v) => Ok(Some(v)),
        VectorSlot::Unloaded(snapshot, entries) => {
            let live: Vec<DataFileMeta> = live.iter().chain(&window.before).cloned().collect();
            let v = table
                .bucket_vectors(snapshot, &entries, &id.partition, id.bucket, &live)
                .await?;
            Ok(Some(Arc::new(v.after(&window.before, &window.marks))))
        }
    }
}

/// The writer of one (partition, bucket).
#[derive(Debug)]
pub(super) struct BucketWriter {
    id: BucketId,
    buffer: Buffer,
    /// The bucket's live files (restored, then this writer's spills and compactions): what
    /// compaction picks from.
    levels: Levels,
    /// Data files spilled since the last commit.
    pending: Vec<DataFileMeta>,
    /// Changelog files of the `input` producer spilled since the last commit.
    pending_changelog: Vec<DataFileMeta>,
    window: CompactionWindow,
    /// At most one compaction per bucket runs in the background.
    running: Option<RunningCompaction>,
    vectors: VectorSlot,
}

impl BucketWriter {
    /// A writer whose rows take sequence numbers from `next_sequence`, over the live `levels`.
    pub(super) fn new(
        layout: &TableLayout,
        id: BucketId,
        next_sequence: i64,
        levels: Levels,
        vectors: VectorSlot,
    ) -> Self {
        let buffer = if layout.is_primary_key_table() {
            Buffer::Kv(WriteBuffer::new(
                Arc::clone(&layout.file_schema),
                layout.key_indices.clone(),
                layout.merge_spec(&(0..layout.schema.fields.len()).collect::<Vec<_>>(), true),
                next_sequence,
            ))
        } else {
            Buffer::Append {
                batches: vec![],
                rows: 0,
                next_sequence,
            }
        };
        Self {
            id,
            buffer,
            levels,
            pending: vec![],
            pending_changelog: vec![],
            window: CompactionWindow::default(),
            running: None,
            vectors,
        }
    }

    /// Buffers rows of this bucket (`kinds` none: all inserts).
    pub(super) fn add(&mut self, rows: RecordBatch, kinds: Option<Int8Array>) -> Result<()> {
        match &mut self.buffer {
            Buffer::Kv(buf) => {
                let kinds = kinds.unwrap_or_else(|| {
                    Int8Array::from(vec![RowKind::Insert as i8; rows.num_rows()])
                });
                buf.add(&rows, kinds)
            }
            Buffer::Append {
                batches, rows: n, ..
            } => {
                *n += rows.num_rows();
                batches.push(rows);
                Ok(())
            }
        }
    }

    pub(super) fn buffered_rows(&self) -> usize {
        match &self.buffer {
            Buffer::Kv(b) => b.buffered_rows(),
            Buffer::Append { rows, .. } => *rows,
        }
    }

    /// Takes the buffered rows as a spill job (none when nothing is buffered).
    pub(super) fn take_spill(&mut self, with_changelog: bool) -> Option<SpillJob> {
        match &mut self.buffer {
            Buffer::Kv(buf) => buf.take_run().map(|run| SpillJob::Kv(run, with_changelog)),
            Buffer::Append {
                batches,
                rows,
                next_sequence,
            } if !batches.is_empty() => {
                let n = *rows as i64;
                let range = (*next_sequence, *next_sequence + n - 1);
                *next_sequence += n;
                *rows = 0;
                Some(SpillJob::Append(std::mem::take(batches), range))
            }
            Buffer::Append { .. } => None,
        }
    }

    /// Records the files a spill wrote.
    pub(super) fn spilled(&mut self, data: Option<DataFileMeta>, changelog: Option<DataFileMeta>) {
        if let Some(meta) = data {
            self.levels.add(meta.clone());
            self.pending.push(meta);
        }
        self.pending_changelog.extend(changelog);
    }

    /// Whether the next commit has anything of this bucket's (or may have, once a running
    /// compaction finishes).
    pub(super) fn has_work(&self) -> bool {
        !self.pending.is_empty()
            || !self.pending_changelog.is_empty()
            || !self.window.is_empty()
            || self.running.is_some()
    }

    /// Hands out the spilled files for a commit message: (data files, changelog files).
    pub(super) fn take_pending(&mut self) -> (Vec<DataFileMeta>, Vec<DataFileMeta>) {
        (
            std::mem::take(&mut self.pending),
            std::mem::take(&mut self.pending_changelog),
        )
    }

    /// Hands out the compactions finished since the last commit.
    pub(super) fn take_window(&mut self) -> CompactionWindow {
        std::mem::take(&mut self.window)
    }

    pub(super) fn window(&self) -> &CompactionWindow {
        &self.window
    }

    pub(super) fn sorted_run_count(&self) -> usize {
        self.levels.sorted_runs().len()
    }

    pub(super) fn is_compacting(&self) -> bool {
        self.running.is_some()
    }

    pub(super) fn set_levels(&mut self, levels: Levels) {
        self.levels = levels;
    }

    /// Starts the compaction the picker selects (raised by `force`), unless one is running.
    pub(super) fn start_compaction(&mut self, shared: &Shared, force: Option<Force>) {
        if self.running.is_some() {
            return;
        }
        let opts = compact::picker_options(&shared.layout.options);
        let files = self.levels.files().to_vec();
        let Some((inputs, level)) = compact::plan_forced(&shared.layout, &files, &opts, force)
        else {
            return;
        };
        let (table, layout, namer) = (
            shared.table.clone(),
            Arc::clone(&shared.layout),
            Arc::clone(&shared.namer),
        );
        let (id, job_inputs) = (self.id.clone(), inputs.clone());
        let (slot, window) = (self.vectors.clone(), self.window.clone());
        let task = tokio::spawn(async move {
            let vectors = load_vectors(&table, &id, slot, &files, &window).await?;
            let job = compact::BucketCompaction {
                partition: &id.partition,
                bucket: id.bucket,
                all_files: &files,
                inputs: &job_inputs,
                output_level: level,
                vectors: vectors.as_deref(),
            };
            let out = compact::rewrite(&table, &layout, &namer, job).await?;
            Ok((out, vectors))
        });
        self.running = Some(RunningCompaction { inputs, task });
    }

    /// Applies the running compaction if it has finished (or, with `wait`, once it has). Outputs
    /// of an earlier compaction in the same commit window that are compacted again never reach
    /// a snapshot: they are netted out and deleted.
    pub(super) async fn finish_compaction(&mut self, shared: &Shared, wait: bool) -> Result<()> {
        match &self.running {
            Some(r) if wait || r.task.is_finished() => {}
            _ => return Ok(()),
        }
        let Some(RunningCompaction { inputs, task }) = self.running.take() else {
            return Ok(());
        };
        let (
            Rewritten {
                files,
                changelog,
                marks,
            },
            vectors,
        ) = task.await.map_err(|e| {
            InternalSnafu {
                message: format!("compaction task: {e}"),
            }
            .build()
        })??;
        if let Some(v) = vectors {
            self.vectors = VectorSlot::Loaded(Arc::new(v.after(&inputs, &marks)));
        }
        let (levels, _replaced) = self.levels.apply(&inputs, &files);
        self.levels = levels;
        let never_committed = self.window.absorb(inputs, files, changelog, marks);
        shared.delete(&self.id, &never_committed).await
    }

    /// The deletion-vector change of a commit whose compactions of this bucket are `window`
    /// (none without compactions or vectors): the new file when the vectors changed (written
    /// now), and the base the commit checks. The writer then takes the new file as its base.
    pub(super) async fn commit_vectors(
        &mut self,
        shared: &Shared,
        window: &CompactionWindow,
    ) -> Result<Option<VectorsChange>> {
        if matches!(self.vectors, VectorSlot::Off) || window.is_empty() {
            return Ok(None);
        }
        let slot = self.vectors.clone();
        let Some(v) =
            load_vectors(&shared.table, &self.id, slot, self.levels.files(), window).await?
        else {
            return Ok(None);
        };
        let change = shared.table.write_vectors(&shared.namer, &v).await?;
        let base = change
            .file
            .as_ref()
            .map(|f| f.file_name.clone())
            .or(v.base.clone());
        self.vectors = VectorSlot::Loaded(Arc::new(BucketVectors {
            base,
            vectors: v.vectors.clone(),
            modified: false,
        }));
        Ok(Some(change))
    }

    /// Points the vectors at snapshot `snapshot` (index `entries`) when the bucket's file there
    /// is not the one they were derived from (another writer's commit, or this one's lost);
    /// they are read again, with the open window on top, when next needed.
    pub(super) fn rebase_vectors(&mut self, snapshot: i64, entries: &Arc<Vec<IndexManifestEntry>>) {
        let now = crate::table::deletion_vectors::bucket_file(
            entries,
            &self.id.partition,
            self.id.bucket,
        )
        .map(|e| &e.file.file_name);
        let stale = match &self.vectors {
            VectorSlot::Off => false,
            VectorSlot::Unloaded(..) => true,
            VectorSlot::Loaded(v) => v.base.as_ref() != now,
        };
        if stale {
            self.vectors = VectorSlot::Unloaded(snapshot, Arc::clone(entries));
        }
    }

    /// Ends the writer: waits for its compaction and returns every file it wrote that was not
    /// handed out for a commit (the caller deletes them).
    pub(super) async fn discard(mut self, shared: &Shared) -> Result<Vec<DataFileMeta>> {
        self.finish_compaction(shared, true).await?;
        let CompactionWindow {
            after, changelog, ..
        } = self.window;
        Ok(after
            .into_iter()
            .chain(changelog)
            .chain(self.pending)
            .chain(self.pending_changelog)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, level: i32) -> DataFileMeta {
        DataFileMeta::for_test(name, level, 0, 0)
    }

    fn names(files: &[DataFileMeta]) -> Vec<&str> {
        files.iter().map(|f| f.file_name.as_str()).collect()
    }

    #[test]
    fn a_window_lists_committed_inputs_and_nets_out_its_own_recompacted_outputs() {
        let mut w = CompactionWindow::default();
        // First compaction: committed a, b -> x (level 5), with a changelog file.
        // It marks rows of the committed level-5 files d and e.
        let marks = |f: &[&str]| -> Marks {
            f.iter()
                .map(|n| (n.to_string(), [1u32].into_iter().collect()))
                .collect()
        };
        let gone = w.absorb(
            vec![file("a", 0), file("b", 0)],
            vec![file("x", 5)],
            vec![file("cl1", 0)],
            marks(&["d", "e"]),
        );
        assert!(gone.is_empty());
        // Second: committed c and e and our own uncommitted x -> y; it marks d and f.
        let gone = w.absorb(
            vec![file("c", 0), file("x", 5), file("e", 5)],
            vec![file("y", 5)],
            vec![],
            marks(&["d", "f"]),
        );
        assert_eq!(names(&gone), vec!["x"]);
        assert_eq!(names(&w.before), vec!["a", "b", "c", "e"]);
        assert_eq!(names(&w.after), vec!["y"]);
        assert_eq!(names(&w.changelog), vec!["cl1"]);
        // The marks of a rewritten file (e) go with it; the others add up.
        assert_eq!(
            w.marks.keys().map(String::as_str).collect::<Vec<_>>(),
            ["d", "f"]
        );
    }

    #[test]
    fn an_output_moved_to_another_level_is_a_committed_input_of_its_old_level() {
        let mut w = CompactionWindow {
            after: vec![file("x", 3)],
            ..Default::default()
        };
        // "x" at level 0 is a different (committed) entry from our "x" at level 3.
        let gone = w.absorb(vec![file("x", 0)], vec![], vec![], Marks::new());
        assert!(gone.is_empty());
        assert_eq!(names(&w.before), vec!["x"]);
        assert_eq!(names(&w.after), vec!["x"]);
    }
}
