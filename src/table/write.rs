//! Writing rows into a table: validation against the schema, routing of each row to its
//! (partition, bucket), one writer per bucket (a sorted write buffer for primary-key tables, a
//! plain buffer for append tables), spills to level-0 Parquet files, and the commit messages that
//! [`super::commit::TableCommit`] turns into a snapshot.
//!
//! A batch is validated completely before any of it is buffered, so a bad batch changes nothing.
//!
//! Compaction runs beside writing: after each spill the universal picker may start one background
//! compaction per bucket; finished ones are collected at the next spill or `prepare_commit` and
//! committed as the COMPACT snapshot after the APPEND one. Above `num-sorted-run.stop-trigger`
//! sorted runs the writer waits for the running compaction (back-pressure). Batch writes
//! (`Table::write_batches`) wait for one round per commit; long-lived writers do not and must be
//! ended with [`TableWrite::close`].

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int8Array, RecordBatch, UInt32Array};
use arrow::compute::{cast, concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType as ArrowType, SchemaRef};
use snafu::ResultExt;

use super::compact::{Force, Rewritten};
use super::data_file;
use super::Table;
use crate::error::{invalid, ArrowSnafu, InternalSnafu, Result};
use crate::lsm::{PendingRun, WriteBuffer};
use crate::manifest::FileNamer;
use crate::schema::layout::{write_field, TableLayout};
use crate::spec::binary_row::{self, BinaryRowWriter};
use crate::spec::manifest::FileSource;
use crate::spec::{BucketMode, ChangelogProducer, CommitKind, DataFileMeta, MergeEngine, RowKind};

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
        }
    }

    fn is_empty(&self) -> bool {
        self.new_files.is_empty()
            && self.changelog_files.is_empty()
            && self.compact_before.is_empty()
            && self.compact_after.is_empty()
            && self.compact_changelog.is_empty()
    }
}

type BucketId = (Vec<u8>, i32);

#[derive(Debug)]
enum BucketWriter {
    Kv(WriteBuffer),
    Append {
        batches: Vec<RecordBatch>,
        rows: usize,
        next_sequence: i64,
    },
}

/// Buffered rows of one bucket on their way to a data file.
#[derive(Debug)]
enum SpillJob {
    /// Records to merge, and whether their unmerged records also go to a changelog file.
    Kv(PendingRun, bool),
    /// Appended batches and the sequence numbers they take.
    Append(Vec<RecordBatch>, (i64, i64)),
}

/// An encoded spill: the data file and, for the `input` producer, its changelog file.
type Spilled = (
    Option<(bytes::Bytes, DataFileMeta)>,
    Option<(bytes::Bytes, DataFileMeta)>,
);

impl SpillJob {
    /// Merges (or concatenates) and encodes; CPU only.
    fn encode(
        self,
        layout: &TableLayout,
        name: String,
        changelog_name: String,
        now_millis: i64,
    ) -> Result<Spilled> {
        let (batch, range) = match self {
            SpillJob::Kv(run, with_changelog) => {
                let changelog = match with_changelog.then(|| run.sorted()).transpose()?.flatten() {
                    Some(b) => Some(data_file::encode(
                        layout,
                        &b,
                        changelog_name,
                        0,
                        None,
                        FileSource::Append,
                        now_millis,
                    )?),
                    None => None,
                };
                let data = match run.merge()? {
                    Some(b) => Some(data_file::encode(
                        layout,
                        &b,
                        name,
                        0,
                        None,
                        FileSource::Append,
                        now_millis,
                    )?),
                    None => None,
                };
                return Ok((data, changelog));
            }
            SpillJob::Append(batches, range) => (
                Some(
                    concat_batches(&layout.arrow_schema, &batches).context(ArrowSnafu {
                        context: "concatenating appended rows",
                    })?,
                ),
                Some(range),
            ),
        };
        match batch {
            Some(b) => Ok((
                Some(data_file::encode(
                    layout,
                    &b,
                    name,
                    0,
                    range,
                    FileSource::Append,
                    now_millis,
                )?),
                None,
            )),
            None => Ok((None, None)),
        }
    }
}

/// A compaction running beside the writer.
#[derive(Debug)]
struct RunningCompaction {
    inputs: Vec<DataFileMeta>,
    task: tokio::task::JoinHandle<Result<Rewritten>>,
}

/// Compactions of one bucket since the last commit: inputs, outputs, changelog files.
#[derive(Debug, Default)]
struct Compacted {
    before: Vec<DataFileMeta>,
    after: Vec<DataFileMeta>,
    changelog: Vec<DataFileMeta>,
}

/// Options of one writer session.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// A column of the input (not of the table) holding `+I`/`-U`/`+U`/`-D` per row; it is removed
    /// before the rows are stored.
    pub row_kind_column: Option<String>,
}

/// Buffers and spills rows of one table; not shared between tasks (one writer per bucket).
#[derive(Debug)]
pub struct TableWrite {
    table: Table,
    layout: Arc<TableLayout>,
    options: WriteOptions,
    namer: Arc<FileNamer>,
    writers: HashMap<BucketId, BucketWriter>,
    /// Highest sequence number per bucket in the snapshot the writer started from.
    restored: Option<HashMap<BucketId, i64>>,
    /// Live files per bucket (restored ones, then this writer's spills and compactions), the
    /// input of compaction picking.
    live: HashMap<BucketId, Vec<DataFileMeta>>,
    /// The snapshot the `live` view was last read from.
    live_as_of: Option<i64>,
    /// `write-only`: never compact (a separate job does).
    write_only: bool,
    /// Compactions done since the last commit, per bucket.
    compacted: HashMap<BucketId, Compacted>,
    /// At most one compaction per bucket runs in the background.
    running: HashMap<BucketId, RunningCompaction>,
    /// Whether `prepare_commit` waits for one compaction round (batch writes) or takes only what
    /// has finished (long-lived writers).
    wait_compaction: bool,
    pending: HashMap<BucketId, Vec<DataFileMeta>>,
    /// Changelog files of the `input` producer written since the last commit.
    pending_changelog: HashMap<BucketId, Vec<DataFileMeta>>,
    spill_rows: usize,
    producer: ChangelogProducer,
}

impl TableWrite {
    pub(crate) fn new(table: Table, options: WriteOptions) -> Result<Self> {
        let layout = table.layout()?;
        layout.check_writable(&table.identifier().to_string())?;
        if let Some(col) = &options.row_kind_column {
            if layout.schema.field(col).is_some() {
                return invalid!(
                    "row-kind column '{col}' is a column of table {}; name a column that only the input has",
                    table.identifier()
                );
            }
        }
        let spill_rows = layout.options.write_buffer_rows;
        let layout_producer = layout.changelog_producer;
        let write_only = layout.options.write_only;
        Ok(Self {
            table,
            layout,
            options,
            namer: Arc::new(FileNamer::default()),
            writers: HashMap::new(),
            restored: None,
            live: HashMap::new(),
            live_as_of: None,
            write_only,
            compacted: HashMap::new(),
            running: HashMap::new(),
            wait_compaction: false,
            pending: HashMap::new(),
            pending_changelog: HashMap::new(),
            spill_rows,
            producer: layout_producer,
        })
    }

    /// The Arrow schema callers write (the table's columns).
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.layout.arrow_schema)
    }

    /// Validates `batch` and buffers its rows; may spill full buffers to data files.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let (values, kinds) = self.conform(batch)?;
        if values.num_rows() == 0 {
            return Ok(());
        }
        let groups = self.route(&values)?;
        if self.restored.is_none() {
            let (sequences, live) = self.restore().await?;
            self.restored = Some(sequences);
            self.live = live;
        }
        let single = groups.len() == 1;
        for ((partition, bucket), rows) in groups {
            let indices = UInt32Array::from(rows);
            // All rows in one bucket (in order): no copy needed.
            let part = if single {
                values.clone()
            } else {
                take_record_batch(&values, &indices).context(ArrowSnafu {
                    context: "routing rows",
                })?
            };
            let id = (partition, bucket);
            let writer = self.writer(&id);
            match writer {
                BucketWriter::Kv(buf) => {
                    let k = match &kinds {
                        Some(k) => arrow::compute::take(k, &indices, None)
                            .context(ArrowSnafu {
                                context: "routing row kinds",
                            })?
                            .as_primitive::<arrow::datatypes::Int8Type>()
                            .clone(),
                        None => Int8Array::from(vec![RowKind::Insert as i8; part.num_rows()]),
                    };
                    buf.add(&part, k)?;
                }
                BucketWriter::Append { batches, rows, .. } => {
                    *rows += part.num_rows();
                    batches.push(part);
                }
            }
            let full = match self.writers.get(&id) {
                Some(BucketWriter::Kv(b)) => b.buffered_rows() >= self.spill_rows,
                Some(BucketWriter::Append { rows, .. }) => *rows >= self.spill_rows,
                None => false,
            };
            if full {
                self.spill(std::slice::from_ref(&id)).await?;
                // After a flush: collect a finished compaction, wait above the stop trigger,
                // start the next one in the background.
                self.finish_compaction(&id, false).await?;
                self.stall_if_needed(&id).await?;
            }
        }
        Ok(())
    }

    /// Spills every buffer and returns the files written since the last call, per bucket.
    /// Nothing is visible to readers until the messages are committed.
    pub async fn prepare_commit(&mut self) -> Result<Vec<CommitMessage>> {
        let ids: Vec<BucketId> = self.writers.keys().cloned().collect();
        self.spill(&ids).await?;
        let total_buckets = self.layout.total_buckets();
        let mut messages: Vec<CommitMessage> = self
            .pending
            .drain()
            .map(|((partition, bucket), new_files)| CommitMessage {
                new_files,
                ..CommitMessage::empty(partition, bucket, total_buckets)
            })
            .collect();
        // Buckets with compaction work but no new files also get a message.
        let ids: Vec<BucketId> = self
            .running
            .keys()
            .chain(self.compacted.keys())
            .chain(self.pending_changelog.keys())
            .cloned()
            .collect();
        for id in ids {
            if !messages
                .iter()
                .any(|m| m.partition == id.0 && m.bucket == id.1)
            {
                messages.push(CommitMessage::empty(id.0, id.1, total_buckets));
            }
        }
        for m in messages.iter_mut() {
            if let Some(files) = self
                .pending_changelog
                .remove(&(m.partition.clone(), m.bucket))
            {
                m.changelog_files = files;
            }
        }
        messages.sort_by(|a, b| (&a.partition, a.bucket).cmp(&(&b.partition, b.bucket)));
        self.compact_touched(&mut messages).await?;
        messages.retain(|m| !m.is_empty());
        Ok(messages)
    }

    /// Makes `prepare_commit` wait for a compaction round (what batch jobs want: every commit
    /// leaves the tree compacted) instead of collecting only finished background compactions.
    pub fn set_wait_compaction(&mut self, wait: bool) {
        self.wait_compaction = wait;
    }

    /// Ends the writer: waits for background compactions and deletes every file it wrote that was
    /// not handed out by `prepare_commit` (nothing it leaves behind can become an orphan).
    pub async fn close(mut self) -> Result<()> {
        let ids: Vec<BucketId> = self.running.keys().cloned().collect();
        for id in ids {
            self.finish_compaction(&id, true).await?;
        }
        let mut doomed: Vec<(BucketId, DataFileMeta)> = Vec::new();
        for (id, c) in std::mem::take(&mut self.compacted) {
            doomed.extend(c.after.into_iter().map(|f| (id.clone(), f)));
            doomed.extend(c.changelog.into_iter().map(|f| (id.clone(), f)));
        }
        for (id, files) in std::mem::take(&mut self.pending)
            .into_iter()
            .chain(std::mem::take(&mut self.pending_changelog))
        {
            doomed.extend(files.into_iter().map(|f| (id.clone(), f)));
        }
        for (id, f) in doomed {
            self.table
                .io()
                .delete(&format!(
                    "{}/{}",
                    self.table.bucket_dir(&id.0, id.1)?,
                    f.file_name
                ))
                .await?;
        }
        Ok(())
    }

    fn writer(&mut self, id: &BucketId) -> &mut BucketWriter {
        let next = self
            .restored
            .as_ref()
            .and_then(|r| r.get(id))
            .map(|s| s + 1)
            .unwrap_or(0);
        let layout = &self.layout;
        self.writers.entry(id.clone()).or_insert_with(|| {
            if layout.is_primary_key_table() {
                BucketWriter::Kv(WriteBuffer::new(
                    Arc::clone(&layout.file_schema),
                    layout.key_indices.clone(),
                    layout.merge_spec(&(0..layout.schema.fields.len()).collect::<Vec<_>>(), true),
                    next,
                ))
            } else {
                BucketWriter::Append {
                    batches: vec![],
                    rows: 0,
                    next_sequence: next,
                }
            }
        })
    }

    /// Spills the buffers of `ids`: merging and Parquet encoding run on the blocking pool, one
    /// task per bucket, and the files are written concurrently.
    async fn spill(&mut self, ids: &[BucketId]) -> Result<()> {
        let mut jobs = Vec::new();
        for id in ids {
            let job = match self.writers.get_mut(id) {
                Some(BucketWriter::Kv(buf)) => buf
                    .take_run()
                    .map(|run| SpillJob::Kv(run, self.producer == ChangelogProducer::Input)),
                Some(BucketWriter::Append {
                    batches,
                    rows,
                    next_sequence,
                }) if !batches.is_empty() => {
                    let n = *rows as i64;
                    let range = (*next_sequence, *next_sequence + n - 1);
                    *next_sequence += n;
                    *rows = 0;
                    Some(SpillJob::Append(std::mem::take(batches), range))
                }
                _ => None,
            };
            if let Some(job) = job {
                let dir = self.table.bucket_dir(&id.0, id.1)?;
                let names = (
                    self.namer.next("data-", ".parquet"),
                    self.namer.next("changelog-", ".parquet"),
                );
                jobs.push((id.clone(), dir, names, job));
            }
        }
        let files = jobs
            .into_iter()
            .map(|(id, dir, (name, changelog_name), job)| {
                let layout = Arc::clone(&self.layout);
                let io = self.table.io().clone();
                let now = self.table.clock().now_millis();
                async move {
                    let (data, changelog) = tokio::task::spawn_blocking(move || {
                        job.encode(&layout, name, changelog_name, now)
                    })
                    .await
                    .map_err(|e| {
                        InternalSnafu {
                            message: format!("spill task: {e}"),
                        }
                        .build()
                    })??;
                    let mut written = (None, None);
                    if let Some((bytes, meta)) = data {
                        io.write(&format!("{dir}/{}", meta.file_name), bytes)
                            .await?;
                        written.0 = Some(meta);
                    }
                    if let Some((bytes, meta)) = changelog {
                        io.write(&format!("{dir}/{}", meta.file_name), bytes)
                            .await?;
                        written.1 = Some(meta);
                    }
                    Ok::<_, crate::error::Error>((id, written))
                }
            });
        for (id, (data, changelog)) in futures::future::try_join_all(files).await? {
            if let Some(meta) = data {
                if self.restored.is_some() {
                    self.live.entry(id.clone()).or_default().push(meta.clone());
                }
                self.pending.entry(id.clone()).or_default().push(meta);
            }
            if let Some(meta) = changelog {
                self.pending_changelog.entry(id).or_default().push(meta);
            }
        }
        Ok(())
    }

    /// Highest sequence number and live files per bucket in the latest snapshot.
    async fn restore(
        &mut self,
    ) -> Result<(HashMap<BucketId, i64>, HashMap<BucketId, Vec<DataFileMeta>>)> {
        let mut max: HashMap<BucketId, i64> = HashMap::new();
        let mut live: HashMap<BucketId, Vec<DataFileMeta>> = HashMap::new();
        let Some(snapshot) = self.table.snapshot_manager().latest().await? else {
            return Ok((max, live));
        };
        self.live_as_of = Some(snapshot.id);
        let total = self.layout.total_buckets();
        for e in self
            .table
            .manifest_manager()
            .live_entries(&snapshot)
            .await?
        {
            if total > 0 && e.total_buckets > 0 && e.total_buckets != total {
                return invalid!(
                    "table {} has files written with {} buckets but its schema says {total}; rescaling is not supported",
                    self.table.identifier(),
                    e.total_buckets
                );
            }
            let slot = max.entry((e.partition.clone(), e.bucket)).or_insert(-1);
            *slot = (*slot).max(e.file.max_sequence_number);
            live.entry((e.partition, e.bucket))
                .or_default()
                .push(e.file);
        }
        Ok((max, live))
    }

    /// One compaction round over the buckets this commit touched, as Paimon's batch writers do
    /// before committing: whatever the universal picker selects is rewritten now and committed as
    /// the COMPACT snapshot that follows the APPEND one.
    async fn compact_touched(&mut self, messages: &mut [CommitMessage]) -> Result<()> {
        if self.write_only || self.layout.bucket_mode == BucketMode::Unaware || messages.is_empty()
        {
            return Ok(());
        }
        // Changelog producers that derive the changelog at compaction make every commit wait for
        // it (Paimon's `lookup-wait`), so the changelog follows each commit.
        let force = match self.producer {
            ChangelogProducer::Lookup => Some(Force::Level0),
            ChangelogProducer::FullCompaction => {
                let every = self.layout.options.full_compaction_delta_commits;
                self.full_compaction_due(every)
                    .await?
                    .then_some(Force::Full)
            }
            _ => None,
        };
        let wait = self.wait_compaction || force.is_some();
        for m in messages.iter() {
            let id = (m.partition.clone(), m.bucket);
            self.finish_compaction(&id, wait).await?;
        }
        self.refresh_live(messages).await?;
        for m in messages.iter_mut() {
            let id = (m.partition.clone(), m.bucket);
            self.start_compaction(&id, force)?;
            if wait {
                self.finish_compaction(&id, true).await?;
            }
            if let Some(c) = self.compacted.remove(&id) {
                m.compact_before = c.before;
                m.compact_after = c.after;
                m.compact_changelog = c.changelog;
            }
        }
        Ok(())
    }

    /// Whether the commit being prepared is the `every`-th since the last full compaction
    /// (`full-compaction.delta-commits`). Counted over committed snapshots, so that batch jobs,
    /// each with a writer of its own, count too: APPEND snapshots after the newest COMPACT
    /// snapshot that carries a changelog (a full compaction's).
    async fn full_compaction_due(&self, every: u64) -> Result<bool> {
        if every <= 1 {
            return Ok(true);
        }
        let sm = self.table.snapshot_manager();
        let (Some(latest), Some(earliest)) = (sm.latest_id().await?, sm.earliest_id().await?)
        else {
            return Ok(false);
        };
        let mut appends = 0u64;
        let mut id = latest;
        while id >= earliest && appends + 1 < every {
            match sm.try_snapshot(id).await? {
                Some(s)
                    if s.commit_kind == CommitKind::Compact
                        && s.changelog_manifest_list.is_some() =>
                {
                    break
                }
                Some(s) if s.commit_kind == CommitKind::Append => appends += 1,
                _ => {}
            }
            id -= 1;
        }
        Ok(appends + 1 >= every)
    }

    /// Re-reads the live files of the buckets in `messages` from the latest snapshot, so that what
    /// another compactor committed (or a compaction of ours that was dropped) is seen before
    /// picking: live = committed files, minus inputs of this window's compactions, plus this
    /// window's new files and compaction outputs.
    async fn refresh_live(&mut self, messages: &[CommitMessage]) -> Result<()> {
        let sm = self.table.snapshot_manager();
        let Some(latest) = sm.latest_id().await? else {
            return Ok(());
        };
        if self.live_as_of == Some(latest) {
            // Nothing was committed since the view was built: it is accurate.
            return Ok(());
        }
        let snapshot = sm.snapshot(latest).await?;
        self.live_as_of = Some(latest);
        let mut committed: HashMap<BucketId, Vec<DataFileMeta>> = HashMap::new();
        for e in self
            .table
            .manifest_manager()
            .live_entries(&snapshot)
            .await?
        {
            if messages
                .iter()
                .any(|m| m.partition == e.partition && m.bucket == e.bucket)
            {
                committed
                    .entry((e.partition, e.bucket))
                    .or_default()
                    .push(e.file);
            }
        }
        let same =
            |a: &DataFileMeta, b: &DataFileMeta| a.file_name == b.file_name && a.level == b.level;
        for m in messages {
            let id = (m.partition.clone(), m.bucket);
            let (before, after) = self
                .compacted
                .get(&id)
                .map(|c| (c.before.clone(), c.after.clone()))
                .unwrap_or_default();
            let mut files: Vec<DataFileMeta> = committed
                .remove(&id)
                .unwrap_or_default()
                .into_iter()
                .filter(|f| !before.iter().any(|b| same(b, f)))
                .collect();
            for f in m.new_files.iter().chain(&after) {
                if !files.iter().any(|x| same(x, f)) && !before.iter().any(|b| same(b, f)) {
                    files.push(f.clone());
                }
            }
            self.live.insert(id, files);
        }
        Ok(())
    }

    /// Starts the compaction the picker selects (raised by `force`) for a bucket, unless one is
    /// running.
    fn start_compaction(&mut self, id: &BucketId, force: Option<Force>) -> Result<()> {
        // Bucket-unaware append tables are compacted by a separate job in Paimon, never by writers.
        if self.write_only
            || self.layout.bucket_mode == BucketMode::Unaware
            || self.running.contains_key(id)
        {
            return Ok(());
        }
        let opts = super::compact::picker_options(&self.layout.options);
        let files = self.live.entry(id.clone()).or_default().clone();
        let Some((inputs, level)) = super::compact::plan_forced(&self.layout, &files, &opts, force)
        else {
            return Ok(());
        };
        let (table, layout, namer) = (
            self.table.clone(),
            Arc::clone(&self.layout),
            Arc::clone(&self.namer),
        );
        let (partition, bucket, job_inputs) = (id.0.clone(), id.1, inputs.clone());
        let task = tokio::spawn(async move {
            let job = super::compact::BucketCompaction {
                partition: &partition,
                bucket,
                all_files: &files,
                inputs: &job_inputs,
                output_level: level,
            };
            super::compact::rewrite(&table, &layout, &namer, job).await
        });
        self.running
            .insert(id.clone(), RunningCompaction { inputs, task });
        Ok(())
    }

    /// Applies a bucket's running compaction if it has finished (or, with `wait`, once it has).
    /// Outputs of an earlier compaction in the same commit window that are compacted again never
    /// reach a snapshot: they are netted out and deleted.
    async fn finish_compaction(&mut self, id: &BucketId, wait: bool) -> Result<()> {
        match self.running.get(id) {
            Some(r) if wait || r.task.is_finished() => {}
            _ => return Ok(()),
        }
        let Some(RunningCompaction { inputs, task }) = self.running.remove(id) else {
            return Ok(());
        };
        let Rewritten {
            files: after,
            changelog,
        } = task.await.map_err(|e| {
            InternalSnafu {
                message: format!("compaction task: {e}"),
            }
            .build()
        })??;
        let same =
            |a: &DataFileMeta, b: &DataFileMeta| a.file_name == b.file_name && a.level == b.level;
        let files = self.live.entry(id.clone()).or_default();
        files.retain(|f| !inputs.iter().any(|i| same(i, f)));
        files.extend(after.iter().cloned());
        let acc = self.compacted.entry(id.clone()).or_default();
        acc.changelog.extend(changelog);
        for input in inputs {
            if let Some(pos) = acc.after.iter().position(|a| same(a, &input)) {
                // Written and replaced within this window: it was never committed.
                acc.after.remove(pos);
                let path = format!(
                    "{}/{}",
                    self.table.bucket_dir(&id.0, id.1)?,
                    input.file_name
                );
                self.table.io().delete(&path).await?;
            } else {
                acc.before.push(input);
            }
        }
        acc.after.extend(after);
        Ok(())
    }

    /// Sorted runs of a bucket above `num-sorted-run.stop-trigger` make the writer wait for a
    /// compaction (back-pressure, not an error).
    async fn stall_if_needed(&mut self, id: &BucketId) -> Result<()> {
        if !self.layout.is_primary_key_table() || self.write_only {
            return Ok(());
        }
        let opts = super::compact::picker_options(&self.layout.options);
        let stop = self.layout.options.stop_trigger.max(opts.run_trigger);
        let runs =
            crate::lsm::levels::sorted_runs(self.live.get(id).map(Vec::as_slice).unwrap_or(&[]))
                .len();
        if runs > stop {
            if !self.running.contains_key(id) {
                self.start_compaction(id, None)?;
            }
            self.finish_compaction(id, true).await?;
        }
        self.start_compaction(id, None)
    }

    /// Checks `batch` against the schema; returns it as the table's columns plus row kinds.
    fn conform(&self, batch: &RecordBatch) -> Result<(RecordBatch, Option<Int8Array>)> {
        let table = self.table.identifier();
        let schema = &self.layout.schema;
        let input = batch.schema();
        for f in input.fields() {
            let is_kind_col = self.options.row_kind_column.as_deref() == Some(f.name().as_str());
            if !is_kind_col && schema.field(f.name()).is_none() {
                return invalid!("table {table} has no column '{}'", f.name());
            }
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields.len());
        for (field, target) in schema.fields.iter().zip(self.layout.arrow_schema.fields()) {
            let col = match batch.column_by_name(&field.name) {
                Some(c) => conform_column(c, target.data_type()).map_err(|m| {
                    crate::error::InvalidArgumentSnafu {
                        message: format!("table {table}, column '{}': {m}", field.name),
                    }
                    .build()
                })?,
                None if field.data_type.nullable => {
                    arrow::array::new_null_array(target.data_type(), batch.num_rows())
                }
                None => {
                    return invalid!(
                        "table {table}: column '{}' is NOT NULL and missing from the input",
                        field.name
                    )
                }
            };
            if !field.data_type.nullable && col.null_count() > 0 {
                let what = if schema.primary_keys.contains(&field.name) {
                    "primary key column"
                } else {
                    "NOT NULL column"
                };
                return invalid!(
                    "table {table}: {what} '{}' has {} null value(s)",
                    field.name,
                    col.null_count()
                );
            }
            columns.push(col);
        }
        let values = RecordBatch::try_new(Arc::clone(&self.layout.arrow_schema), columns).context(
            ArrowSnafu {
                context: format!("table {table}: input does not match the schema"),
            },
        )?;

        let kind_col = match (
            &self.options.row_kind_column,
            self.layout.rowkind_field_index,
        ) {
            (Some(name), _) => Some((name.clone(), batch.column_by_name(name).cloned())),
            (None, Some(i)) => Some((
                schema.fields[i].name.clone(),
                Some(Arc::clone(values.column(i))),
            )),
            (None, None) => None,
        };
        let Some((name, col)) = kind_col else {
            return Ok((values, None));
        };
        let Some(col) = col else {
            return invalid!("table {table}: row-kind column '{name}' is missing from the input");
        };
        let strings = cast(&col, &ArrowType::Utf8).map_err(|_| {
            crate::error::InvalidArgumentSnafu {
                message: format!("table {table}: row-kind column '{name}' must be a string column"),
            }
            .build()
        })?;
        let strings = strings.as_string::<i32>();
        let mut kinds = Vec::with_capacity(strings.len());
        for i in 0..strings.len() {
            let kind = if strings.is_null(i) {
                None
            } else {
                RowKind::from_short_string(strings.value(i))
            };
            match kind {
                Some(k) => kinds.push(k),
                None => {
                    let shown = if strings.is_null(i) {
                        "NULL"
                    } else {
                        strings.value(i)
                    };
                    return invalid!("table {table}: row {i} has row kind '{shown}' in column '{name}'; expected +I, -U, +U or -D");
                }
            }
        }
        let has_retract = kinds.iter().any(RowKind::is_retract);
        if has_retract && !self.layout.is_primary_key_table() {
            return invalid!("table {table} is an append table; it cannot take -U/-D rows");
        }
        if has_retract && self.layout.ignore_delete {
            let keep = arrow::array::BooleanArray::from(
                kinds.iter().map(|k| !k.is_retract()).collect::<Vec<_>>(),
            );
            let values = filter_record_batch(&values, &keep).context(ArrowSnafu {
                context: "dropping deletes",
            })?;
            let kinds: Vec<i8> = kinds
                .iter()
                .filter(|k| !k.is_retract())
                .map(|k| *k as i8)
                .collect();
            return Ok((values, Some(Int8Array::from(kinds))));
        }
        if has_retract && self.layout.merge_engine == MergeEngine::FirstRow {
            return invalid!("table {table} uses merge-engine first-row, which does not accept -U/-D rows (set 'ignore-delete' = 'true' to drop them)");
        }
        let kinds = Int8Array::from(kinds.iter().map(|k| *k as i8).collect::<Vec<_>>());
        Ok((values, Some(kinds)))
    }

    /// Groups row indices by (serialized partition, bucket).
    fn route(&self, values: &RecordBatch) -> Result<Vec<(BucketId, Vec<u32>)>> {
        let layout = &self.layout;
        let n = values.num_rows();
        let mut w = BinaryRowWriter::default();
        let mut partitions: Vec<Vec<u8>> = Vec::new();
        let mut partition_of_row: Vec<u32> = vec![0; n];
        if layout.partition_indices.is_empty() {
            partitions.push(binary_row::empty_row());
        } else {
            let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
            for (i, slot) in partition_of_row.iter_mut().enumerate() {
                w.reset(layout.partition_indices.len());
                for (pos, (&c, ty)) in layout
                    .partition_indices
                    .iter()
                    .zip(&layout.partition_types)
                    .enumerate()
                {
                    write_field(&mut w, pos, values.column(c), i, ty)?;
                }
                let bytes = w.serialized();
                let next = seen.len() as u32;
                let id = *seen.entry(bytes.clone()).or_insert_with(|| {
                    partitions.push(bytes);
                    next
                });
                *slot = id;
            }
        }
        let num_buckets = match layout.bucket_mode {
            BucketMode::Fixed(num) => num as usize,
            _ => 1,
        };
        // Dense [partition][bucket] groups: no hashing per row.
        let mut groups: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); num_buckets]; partitions.len()];
        if num_buckets == 1 && partitions.len() == 1 {
            groups[0][0] = (0..n as u32).collect();
        } else if let BucketMode::Fixed(num) = layout.bucket_mode {
            let types: Vec<_> = layout
                .bucket_key_indices
                .iter()
                .map(|&i| layout.schema.fields[i].data_type)
                .collect();
            for (i, &p) in partition_of_row.iter().enumerate() {
                w.reset(types.len());
                for (pos, (&c, ty)) in layout.bucket_key_indices.iter().zip(&types).enumerate() {
                    write_field(&mut w, pos, values.column(c), i, ty)?;
                }
                let bucket = binary_row::bucket_of(w.hash_code(), num);
                groups[p as usize][bucket as usize].push(i as u32);
            }
        } else {
            for (i, &p) in partition_of_row.iter().enumerate() {
                groups[p as usize][0].push(i as u32);
            }
        }
        let mut out = Vec::new();
        for (p, buckets) in groups.into_iter().enumerate() {
            for (b, rows) in buckets.into_iter().enumerate() {
                if !rows.is_empty() {
                    out.push(((partitions[p].clone(), b as i32), rows));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// Casts an input column to the table's type when that cannot lose information; anything else is
/// a schema mismatch.
fn conform_column(col: &ArrayRef, target: &ArrowType) -> std::result::Result<ArrayRef, String> {
    use ArrowType::*;
    let from = col.data_type();
    if from == target {
        return Ok(Arc::clone(col));
    }
    let safe = match (from, target) {
        (Null, _) => true,
        (Int8, Int16 | Int32 | Int64) | (Int16, Int32 | Int64) | (Int32, Int64) => true,
        (UInt8, Int16 | Int32 | Int64) | (UInt16, Int32 | Int64) | (UInt32, Int64) => true,
        (Float32, Float64) => true,
        (Utf8View | LargeUtf8, Utf8) | (BinaryView | LargeBinary, Binary) => true,
        (Dictionary(_, v), t) => v.as_ref() == t,
        (Timestamp(_, a), Timestamp(_, b)) => a.is_some() == b.is_some(),
        (Decimal128(p, s), Decimal128(tp, ts)) => {
            s <= ts && (*p as i16 - *s as i16) <= (*tp as i16 - *ts as i16)
        }
        (Int8 | Int16 | Int32 | Int64, Decimal128(_, _)) => true,
        _ => false,
    };
    if !safe {
        return Err(format!("has type {from}, the table expects {target}"));
    }
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow::compute::cast_with_options(col, target, &options)
        .map_err(|e| format!("cannot convert {from} to {target}: {e}"))
}
