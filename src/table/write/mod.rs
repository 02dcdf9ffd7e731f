//! Writing rows into a table: validation against the schema ([`conform`]), routing of each row
//! to its (partition, bucket) ([`route`]), one [`bucket::BucketWriter`] per bucket (a sorted write
//! buffer for primary-key tables, a plain buffer for append tables, its live files, its files
//! since the last commit and its compaction), spills to level-0 Parquet files, and the commit
//! messages that [`super::commit::TableCommit`] turns into a snapshot. This file holds the policy
//! over the buckets: when to spill, when to compact and wait, what a commit carries.
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

use arrow::array::{AsArray, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
use snafu::ResultExt;

use super::commit::CommitMessage;
use super::compact::{self, Force};
use super::Table;
use crate::error::{invalid, ArrowSnafu, InternalSnafu, Result};
use crate::lsm::levels::Levels;
use crate::manifest::FileNamer;
use crate::schema::layout::TableLayout;
use crate::spec::index_manifest::IndexManifestEntry;
use crate::spec::{BucketMode, ChangelogProducer, CommitKind, DataFileMeta};
use crate::table::deletion_vectors::{bucket_file, BucketVectors};

mod bucket;
mod conform;
mod cross;
mod dynamic;
mod dynamic_index;
mod route;

use dynamic_index::DynamicIndex;

use bucket::{BucketWriter, Shared, VectorSlot};

use crate::spec::partition::BucketId;

/// What a writer learned about one bucket from the snapshot it started from.
#[derive(Debug)]
struct Restored {
    /// -1 for a bucket with no files: its first row takes sequence number 0.
    max_sequence: i64,
    files: Vec<DataFileMeta>,
}

impl Default for Restored {
    fn default() -> Self {
        Self {
            max_sequence: -1,
            files: vec![],
        }
    }
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
    shared: Shared,
    options: WriteOptions,
    buckets: HashMap<BucketId, BucketWriter>,
    /// What the snapshot the writer started from holds of buckets that have no writer yet; none
    /// until the first write.
    restored: Option<HashMap<BucketId, Restored>>,
    /// The snapshot the writers' live files were last read from.
    live_as_of: Option<i64>,
    /// Whether `prepare_commit` waits for one compaction round (batch writes) or takes only what
    /// has finished (long-lived writers).
    wait_compaction: bool,
    /// Dynamic-bucket tables: the key-hash index, loaded per partition on first sight.
    dynamic: Option<DynamicIndex>,
    /// Cross-partition tables: the key index, opened at the first write.
    cross: Option<cross::CrossIndex>,
    /// Deletion-vector tables: the snapshot new bucket writers read their vectors from (id and
    /// index entries; none for a table without snapshots).
    vectors_of: Option<(i64, Arc<Vec<IndexManifestEntry>>)>,
    /// An overwrite's writer: the buckets it writes start empty (their files are being replaced),
    /// as Paimon's `ignorePreviousFiles` writers do.
    ignore_previous: bool,
    /// How the data files this writer spills are named: (prefix, suffix).
    file_name: (String, &'static str),
    /// The partitions a postpone table's move writes (the only ones restored); none: all.
    only_partitions: Option<std::collections::HashSet<Vec<u8>>>,
    /// Whether the compaction round at commit rewrites each touched bucket fully.
    force_full: bool,
}

impl TableWrite {
    pub(crate) fn new(table: Table, options: WriteOptions) -> Result<Self> {
        let layout = table.layout()?;
        layout.check_writable(&table.identifier().to_string())?;
        let file_name = data_file_name(&layout);
        if let Some(col) = &options.row_kind_column {
            if layout.schema.field(col).is_some() {
                return invalid!(
                    "row-kind column '{col}' is a column of table {}; name a column that only the input has",
                    table.identifier()
                );
            }
        }
        Ok(Self {
            shared: Shared {
                table,
                layout,
                namer: Arc::new(FileNamer::default()),
            },
            options,
            buckets: HashMap::new(),
            restored: None,
            live_as_of: None,
            wait_compaction: false,
            dynamic: None,
            cross: None,
            vectors_of: None,
            ignore_previous: false,
            file_name,
            only_partitions: None,
            force_full: false,
        })
    }

    /// The writer that moves a postpone table's staged rows of `partitions` into `buckets` fixed
    /// buckets (Paimon's postpone compaction writes through a copy of the table with `bucket` =
    /// N): it restores those partitions' real buckets, continues their sequence numbers and
    /// compacts them (fully, if `full`) before every commit.
    pub(crate) fn for_postpone_move(
        table: Table,
        buckets: i32,
        partitions: std::collections::HashSet<Vec<u8>>,
        full: bool,
    ) -> Result<Self> {
        let mut layout = table.layout()?.as_ref().clone();
        layout.bucket_mode = BucketMode::Fixed(buckets);
        let mut w = Self::new(table, WriteOptions::default())?;
        w.shared.layout = Arc::new(layout);
        w.file_name = data_file_name(&w.shared.layout);
        w.only_partitions = Some(partitions);
        w.force_full = full;
        w.wait_compaction = true;
        Ok(w)
    }

    fn layout(&self) -> &TableLayout {
        &self.shared.layout
    }

    fn table(&self) -> &Table {
        &self.shared.table
    }

    /// The Arrow schema callers write (the table's columns).
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.layout().arrow_schema)
    }

    /// Whether writers of this table compact beside writing. Bucket-unaware append tables are
    /// compacted by a separate job in Paimon, never by writers; `write-only` leaves it to one.
    /// Postpone buckets are staging: only the compaction that moves them compacts.
    fn compacts(&self) -> bool {
        !self.layout().options.write_only
            && !matches!(
                self.layout().bucket_mode,
                BucketMode::Unaware | BucketMode::Postpone
            )
    }

    /// Validates `batch` and buffers its rows; may spill full buffers to data files.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let (values, kinds) = conform::conform(
            self.layout(),
            self.table().identifier(),
            self.options.row_kind_column.as_deref(),
            batch,
        )?;
        self.write_conformed(values, kinds).await
    }

    /// Buffers rows already in the table's columns, with their row kinds (`kinds` none: all
    /// inserts): rows read back from the table's own files.
    pub(crate) async fn write_conformed(
        &mut self,
        mut values: RecordBatch,
        mut kinds: Option<arrow::array::Int8Array>,
    ) -> Result<()> {
        if values.num_rows() == 0 {
            return Ok(());
        }
        let mut groups = route::route(self.layout(), &values)?;
        if self.restored.is_none() {
            self.restored = Some(self.restore().await?);
        }
        if self.dynamic.is_some() {
            groups = self.assign_dynamic(&values, groups).await?;
        } else if self.layout().cross_partition && self.layout().bucket_mode == BucketMode::Dynamic
        {
            (values, kinds, groups) = self.assign_cross(values, kinds, groups).await?;
        }
        // One bucket takes every row, in input order: no copy needed.
        let single = groups.len() == 1 && groups[0].1.len() == values.num_rows();
        for (id, rows) in groups {
            let indices = UInt32Array::from(rows);
            let part = if single {
                values.clone()
            } else {
                take_record_batch(&values, &indices).context(ArrowSnafu {
                    context: "routing rows",
                })?
            };
            let part_kinds = match &kinds {
                Some(k) if single => Some(k.clone()),
                Some(k) => Some(
                    arrow::compute::take(k, &indices, None)
                        .context(ArrowSnafu {
                            context: "routing row kinds",
                        })?
                        .as_primitive::<arrow::datatypes::Int8Type>()
                        .clone(),
                ),
                None => None,
            };
            let writer = self.writer(&id);
            writer.add(part, part_kinds)?;
            if writer.buffered_rows() >= self.layout().options.write_buffer_rows {
                self.spill(std::slice::from_ref(&id)).await?;
                // After a flush: collect a finished compaction, wait above the stop trigger,
                // start the next one in the background.
                self.after_flush(&id).await?;
            }
        }
        Ok(())
    }

    /// Spills every buffer and returns the files written since the last call, per bucket.
    /// Nothing is visible to readers until the messages are committed.
    pub async fn prepare_commit(&mut self) -> Result<Vec<CommitMessage>> {
        let ids: Vec<BucketId> = self.buckets.keys().cloned().collect();
        self.spill(&ids).await?;
        let total_buckets = self.layout().total_buckets();
        let mut messages: Vec<CommitMessage> = Vec::new();
        for (BucketId { partition, bucket }, w) in self.buckets.iter_mut() {
            if !w.has_work() {
                continue;
            }
            let (new_files, changelog_files) = w.take_pending();
            messages.push(CommitMessage {
                new_files,
                changelog_files,
                ..CommitMessage::empty(partition.clone(), *bucket, total_buckets)
            });
        }
        self.write_grown_indexes(&mut messages, total_buckets)
            .await?;
        if let Some(base) = self.take_cross_base() {
            for m in &mut messages {
                m.key_index_base = Some(base);
            }
        }
        messages.sort_by(|a, b| (&a.partition, a.bucket).cmp(&(&b.partition, b.bucket)));
        self.compact_touched(&mut messages).await?;
        messages.retain(|m| !m.is_empty());
        Ok(messages)
    }

    /// Makes the writer one of an overwrite: the buckets it writes are taken as empty (only their
    /// sequence numbers carry on), so nothing it compacts is a file the overwrite deletes.
    pub fn ignore_previous_files(&mut self) {
        self.ignore_previous = true;
    }

    /// Makes `prepare_commit` wait for a compaction round (what batch jobs want: every commit
    /// leaves the tree compacted) instead of collecting only finished background compactions.
    pub fn set_wait_compaction(&mut self, wait: bool) {
        self.wait_compaction = wait;
    }

    /// Ends the writer: waits for background compactions and deletes every file it wrote that was
    /// not handed out by `prepare_commit` (nothing it leaves behind can become an orphan).
    pub async fn close(mut self) -> Result<()> {
        for (id, w) in std::mem::take(&mut self.buckets) {
            let doomed = w.discard(&self.shared).await?;
            self.shared.delete(&id, &doomed).await?;
        }
        Ok(())
    }

    /// The writer of a bucket, created over what the restored snapshot holds of it.
    fn writer(&mut self, id: &BucketId) -> &mut BucketWriter {
        let restored = &mut self.restored;
        let layout = &self.shared.layout;
        let ignore_previous = self.ignore_previous;
        let vectors = match &self.vectors_of {
            _ if !layout.deletion_vectors() => VectorSlot::Off,
            // The bucket's old vectors are of files being replaced; the commit still checks them.
            Some((_, entries)) if ignore_previous => VectorSlot::Loaded(Arc::new(BucketVectors {
                base: bucket_file(entries, &id.partition, id.bucket)
                    .map(|e| e.file.file_name.clone()),
                ..Default::default()
            })),
            Some((snapshot, entries)) => VectorSlot::Unloaded(*snapshot, Arc::clone(entries)),
            None => VectorSlot::Loaded(Default::default()),
        };
        self.buckets.entry(id.clone()).or_insert_with(|| {
            let r = restored
                .as_mut()
                .and_then(|r| r.remove(id))
                .unwrap_or_default();
            let files = if ignore_previous { vec![] } else { r.files };
            BucketWriter::new(
                layout,
                id.clone(),
                r.max_sequence + 1,
                Levels::new(files),
                vectors,
            )
        })
    }

    /// Spills the buffers of `ids`: merging and Parquet encoding run on the blocking pool, one
    /// task per bucket, and the files are written concurrently.
    async fn spill(&mut self, ids: &[BucketId]) -> Result<()> {
        // Postpone files are no changelog: the compaction that moves them writes it.
        let with_changelog = self.layout().changelog_producer == ChangelogProducer::Input
            && self.layout().bucket_mode != BucketMode::Postpone;
        let mut jobs = Vec::new();
        for id in ids {
            let Some(job) = self
                .buckets
                .get_mut(id)
                .and_then(|w| w.take_spill(with_changelog))
            else {
                continue;
            };
            let dir = self.table().bucket_dir(&id.partition, id.bucket)?;
            let names = (
                self.shared.namer.next(&self.file_name.0, self.file_name.1),
                self.shared.namer.next(
                    "changelog-",
                    super::data_file::data_suffix(&self.shared.layout),
                ),
            );
            jobs.push((id.clone(), dir, names, job));
        }
        let files = jobs
            .into_iter()
            .map(|(id, dir, (name, changelog_name), job)| {
                let layout = Arc::clone(&self.shared.layout);
                let io = self.table().io().clone();
                let now = self.table().clock().now_millis();
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
            if let Some(w) = self.buckets.get_mut(&id) {
                w.spilled(data, changelog);
            }
        }
        Ok(())
    }

    /// Highest sequence number and live files per bucket in the latest snapshot; for
    /// dynamic-bucket tables also the HASH index entries.
    async fn restore(&mut self) -> Result<HashMap<BucketId, Restored>> {
        let mut restored: HashMap<BucketId, Restored> = HashMap::new();
        if self.layout().bucket_mode == BucketMode::Postpone {
            // Paimon's postpone writers ignore previous files: each starts at sequence number 0,
            // and the compaction that moves the rows orders them by file, not by sequence.
            return Ok(restored);
        }
        if self.layout().bucket_mode == BucketMode::Dynamic && !self.layout().cross_partition {
            self.dynamic = Some(DynamicIndex {
                options: self.layout().options.dynamic,
                ..Default::default()
            });
        }
        let Some(snapshot) = self.table().snapshot_manager().latest().await? else {
            return Ok(restored);
        };
        if self.dynamic.is_some() || self.layout().deletion_vectors() {
            let entries = self
                .shared
                .table
                .manifest_manager()
                .index_entries(&snapshot)
                .await?;
            if self.layout().deletion_vectors() {
                self.vectors_of = Some((snapshot.id, Arc::new(entries.clone())));
            }
            if let Some(d) = self.dynamic.as_mut() {
                d.entries = entries;
            }
        }
        self.live_as_of = Some(snapshot.id);
        let total = self.layout().total_buckets();
        for e in self
            .table()
            .manifest_manager()
            .live_entries(&snapshot)
            .await?
        {
            if let Some(only) = &self.only_partitions {
                if e.bucket < 0 || !only.contains(&e.partition) {
                    continue;
                }
            }
            if total > 0 && e.total_buckets > 0 && e.total_buckets != total {
                return invalid!(
                    "table {} has files written with {} buckets but its schema says {total}; rescaling is not supported",
                    self.table().identifier(),
                    e.total_buckets
                );
            }
            let slot = restored
                .entry(BucketId::new(e.partition, e.bucket))
                .or_default();
            slot.max_sequence = slot.max_sequence.max(e.file.max_sequence_number);
            slot.files.push(e.file);
        }
        Ok(restored)
    }

    /// One compaction round over the buckets this commit touched, as Paimon's batch writers do
    /// before committing: whatever the universal picker selects is rewritten now and committed as
    /// the COMPACT snapshot that follows the APPEND one.
    async fn compact_touched(&mut self, messages: &mut [CommitMessage]) -> Result<()> {
        if !self.compacts() || messages.is_empty() {
            return Ok(());
        }
        // Changelog producers that derive the changelog at compaction make every commit wait for
        // it (Paimon's `lookup-wait`), so the changelog follows each commit.
        // Deletion vectors come from the same forced compactions (Paimon forces lookup for them).
        let force = match self.layout().changelog_producer {
            _ if self.force_full => Some(Force::Full),
            _ if self.layout().deletion_vectors() => Some(Force::Level0),
            ChangelogProducer::Lookup => Some(Force::Level0),
            ChangelogProducer::FullCompaction => {
                let every = self.layout().options.full_compaction_delta_commits;
                self.full_compaction_due(every)
                    .await?
                    .then_some(Force::Full)
            }
            _ => None,
        };
        let wait = self.wait_compaction || force.is_some();
        for m in messages.iter() {
            if let Some(w) = self
                .buckets
                .get_mut(&BucketId::new(m.partition.clone(), m.bucket))
            {
                w.finish_compaction(&self.shared, wait).await?;
            }
        }
        self.refresh_live(messages).await?;
        for m in messages.iter_mut() {
            let Some(w) = self
                .buckets
                .get_mut(&BucketId::new(m.partition.clone(), m.bucket))
            else {
                continue;
            };
            w.start_compaction(&self.shared, force);
            if wait {
                w.finish_compaction(&self.shared, true).await?;
            }
            let open = w.window().clone();
            m.vectors = w.commit_vectors(&self.shared, &open).await?;
            let window = w.take_window();
            m.compact_before = window.before;
            m.compact_after = window.after;
            m.compact_changelog = window.changelog;
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
        let sm = self.table().snapshot_manager();
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
    /// picking ([`Levels::rebase`]).
    async fn refresh_live(&mut self, messages: &[CommitMessage]) -> Result<()> {
        let sm = self.table().snapshot_manager();
        let Some(latest) = sm.latest_id().await? else {
            return Ok(());
        };
        // An overwrite's buckets start empty whatever was committed meanwhile.
        if self.live_as_of == Some(latest) || self.ignore_previous {
            // Nothing was committed since the view was built: it is accurate.
            return Ok(());
        }
        let snapshot = sm.snapshot(latest).await?;
        self.live_as_of = Some(latest);
        if self.layout().deletion_vectors() {
            let entries = Arc::new(
                self.table()
                    .manifest_manager()
                    .index_entries(&snapshot)
                    .await?,
            );
            for m in messages {
                if let Some(w) = self
                    .buckets
                    .get_mut(&BucketId::new(m.partition.clone(), m.bucket))
                {
                    w.rebase_vectors(latest, &entries);
                }
            }
            // `vectors_of` stays the restored snapshot's: a bucket writer created later takes
            // its files from that snapshot, and its vectors must come from the same one.
        }
        let mut committed: HashMap<BucketId, Vec<DataFileMeta>> = HashMap::new();
        for e in self
            .table()
            .manifest_manager()
            .live_entries(&snapshot)
            .await?
        {
            if messages
                .iter()
                .any(|m| m.partition == e.partition && m.bucket == e.bucket)
            {
                committed
                    .entry(BucketId::new(e.partition, e.bucket))
                    .or_default()
                    .push(e.file);
            }
        }
        for m in messages {
            let id = BucketId::new(m.partition.clone(), m.bucket);
            let Some(w) = self.buckets.get_mut(&id) else {
                continue;
            };
            let window = w.window();
            let added: Vec<DataFileMeta> =
                m.new_files.iter().chain(&window.after).cloned().collect();
            let levels = Levels::rebase(
                committed.remove(&id).unwrap_or_default(),
                &window.before,
                &added,
            );
            w.set_levels(levels);
        }
        Ok(())
    }

    /// After a bucket's flush: collects a finished compaction; for primary-key tables, above
    /// `num-sorted-run.stop-trigger` sorted runs waits for one (back-pressure, not an error);
    /// starts the next one in the background.
    async fn after_flush(&mut self, id: &BucketId) -> Result<()> {
        if !self.compacts() {
            return Ok(());
        }
        let stop = {
            let opts = compact::picker_options(&self.layout().options);
            self.layout().options.stop_trigger.max(opts.run_trigger)
        };
        let pk = self.layout().is_primary_key_table();
        let Some(w) = self.buckets.get_mut(id) else {
            return Ok(());
        };
        w.finish_compaction(&self.shared, false).await?;
        crate::metrics::metrics()
            .sorted_runs_max
            .set(w.sorted_run_count() as i64);
        if !pk {
            // Append tables compact at commit only.
            return Ok(());
        }
        if w.sorted_run_count() > stop {
            crate::metrics::metrics().write_stalls.inc();
            if !w.is_compacting() {
                w.start_compaction(&self.shared, None);
            }
            w.finish_compaction(&self.shared, true).await?;
        }
        w.start_compaction(&self.shared, None);
        Ok(())
    }
}

/// (prefix, suffix) of the data files a writer of `layout` spills: `data-<uuid>-<n>.<format>`
/// (the table's `file.format`, see [`super::data_file::data_suffix`]), or in a postpone bucket
/// Paimon's `data--u-<commit user>-s-<write id>-w-<uuid>-<n>.avro`, whose prefix tells the
/// compaction which files one writer wrote (it reads them in creation order). Avro unless a
/// column has no Avro form, as Paimon's postpone writer decides.
fn data_file_name(layout: &TableLayout) -> (String, &'static str) {
    if layout.bucket_mode != BucketMode::Postpone {
        return ("data-".to_string(), super::data_file::data_suffix(layout));
    }
    let user = uuid::Uuid::new_v4();
    let write_id = (user.as_u128() as u32) & 0x7fff_ffff;
    let suffix = if super::avro_file::convertible(layout) {
        crate::spec::options::FileFormat::Avro.suffix()
    } else {
        ".parquet"
    };
    (format!("data--u-{user}-s-{write_id}-w-"), suffix)
}
