//! Streaming reads: the changes each snapshot brings, where a subscription starts (Paimon's
//! `scan.mode`), and subscriptions that follow a table's commits, recording progress for a
//! consumer id.
//!
//! ```text
//!  start position ─► [full snapshot as +I] ─► changes(next) ─► changes(next + 1) ─► ...
//!                                                 │ not committed yet
//!                                                 ▼
//!                        wait: a commit in this process wakes it, else poll the warehouse
//! ```
//!
//! What a snapshot's changes are depends on the table:
//! - a primary-key table with a changelog producer: the snapshot's changelog files, as written
//!   (`input` at APPEND snapshots, `lookup`/`full-compaction` at COMPACT snapshots);
//! - a primary-key table without one (`none`): the APPEND snapshot's new files merged per bucket,
//!   each key once (`+I`, `+U` or `-D`; no before images);
//! - an append table: the APPEND snapshot's new files, `+I`, in sequence order.
//!
//! OVERWRITE snapshots bring no changes (Paimon's `streaming-read-overwrite` = false).
//! The rows of a snapshot always come in the same order, so a subscriber can resume inside one.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int8Type, Schema, SchemaRef};
use futures::stream::{self, BoxStream, StreamExt};
use snafu::ResultExt;
use tokio::sync::{mpsc, watch};

use super::data_file;
use super::evolution::FileRef;
use super::scan::SnapshotSelector;
use super::Table;
use crate::error::{invalid, ArrowSnafu, InternalSnafu, OutOfRangeSnafu, Result};
use crate::lsm::merge::stream::merge_streams;
use crate::schema::layout::TableLayout;
use crate::spec::partition::BucketId;
use crate::spec::{ChangelogProducer, CommitKind, DataFileMeta, FileKind, RowKind, Snapshot};

/// Name of the row-kind column of changelog reads.
pub const ROW_KIND_COLUMN: &str = "_row_kind";

/// How often a waiting subscription looks for snapshots committed by other processes.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The same on an object store, where each poll is a request (other servers' commits are seen
/// within it; this server's own commits wake subscriptions at once).
const REMOTE_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Where a subscription starts (Paimon's `scan.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartMode {
    /// The consumer's position when it has one, else [`StartMode::LatestFull`].
    #[default]
    Default,
    /// Only snapshots committed after the start.
    Latest,
    /// The latest snapshot as `+I` rows, then the changes of later ones.
    LatestFull,
    /// The changes of this snapshot and every later one.
    FromSnapshot(i64),
    /// This snapshot as `+I` rows, then the changes of later ones.
    FromSnapshotFull(i64),
    /// The changes of snapshots committed at or after this time (milliseconds).
    FromTimestamp(i64),
    /// The latest COMPACT snapshot (else the latest) as `+I` rows, then later changes.
    CompactedFull,
}

/// Options of one subscription.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    pub start: StartMode,
    /// Progress is recorded in `consumer/consumer-<id>` and resumed from it.
    pub consumer_id: Option<String>,
    /// Bounded: end after this snapshot.
    pub end_snapshot: Option<i64>,
    /// Bounded: end after the last snapshot committed at or before this time.
    pub end_timestamp_millis: Option<i64>,
    /// Columns after `_row_kind` (`None`: all).
    pub projection: Option<Vec<String>>,
}

/// Where a subscription starts: an optional snapshot read in full, then the first snapshot whose
/// changes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartPosition {
    pub full: Option<i64>,
    pub next: i64,
}

static COMMITS: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);

/// Wakes subscriptions of this process after a commit.
pub(crate) fn notify_commit() {
    COMMITS.send_modify(|n| *n = n.wrapping_add(1));
}

impl Table {
    /// Snapshot `id`, or the long-lived changelog kept for it after it expired.
    pub async fn snapshot_or_changelog(&self, id: i64) -> Result<Option<Snapshot>> {
        match self.snapshot_manager().try_snapshot(id).await? {
            Some(s) => Ok(Some(s)),
            None => self.changelog_manager().try_snapshot(id).await,
        }
    }

    /// The oldest id whose changes can still be read: the earliest long-lived changelog, else
    /// the earliest snapshot.
    pub async fn earliest_readable_id(&self) -> Result<Option<i64>> {
        match self.changelog_manager().earliest_id().await? {
            Some(id) => Ok(Some(id)),
            None => self.snapshot_manager().earliest_id().await,
        }
    }
}

/// Reads the changes of one table's snapshots with a projection.
#[derive(Debug, Clone)]
pub struct ChangelogReader {
    table: Table,
    layout: Arc<TableLayout>,
    projection: Vec<usize>,
    projection_names: Vec<String>,
    /// Field ids of the requested columns (`None`: all), to follow them across schema changes.
    projected_ids: Option<Vec<i32>>,
    schema: SchemaRef,
}

/// A unit of a snapshot's changes: files of one bucket read in order, or merged.
enum Unit {
    /// Files read as they are (changelog files, appended files).
    Raw(Vec<FileRef>),
    /// Sorted runs merged into one record per key (`none` producer).
    Merge(Vec<Vec<FileRef>>),
}

impl ChangelogReader {
    pub fn new(table: Table, columns: Option<&[String]>) -> Result<Self> {
        let layout = table.layout()?;
        let projection = super::read::resolve_projection(&table, &layout, columns)?;
        let mut fields = vec![Arc::new(Field::new(ROW_KIND_COLUMN, DataType::Utf8, false))];
        fields.extend(
            projection
                .iter()
                .map(|&i| Arc::new(layout.arrow_schema.field(i).clone())),
        );
        let projection_names = projection
            .iter()
            .map(|&i| layout.schema.fields[i].name.clone())
            .collect();
        let projected_ids = columns.map(|_| {
            projection
                .iter()
                .map(|&i| layout.schema.fields[i].id)
                .collect()
        });
        Ok(Self {
            table,
            layout,
            projection,
            projection_names,
            projected_ids,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    /// The id of the schema rows are read with.
    pub fn schema_id(&self) -> i64 {
        self.layout.schema.id
    }

    /// A reader of the same columns (followed by field id: renamed ones under their new name,
    /// dropped ones gone; with no projection, added ones too) through schema `schema_id`.
    pub async fn evolve(&self, schema_id: i64) -> Result<Self> {
        let t = &self.table;
        let schema = t.schema_manager().schema(schema_id).await?;
        let table = Table::new_on(
            t.io().clone(),
            t.identifier().clone(),
            t.path().to_string(),
            t.branch().map(String::from),
            schema,
            t.clock().clone(),
        );
        let names = match &self.projected_ids {
            None => None,
            Some(ids) => {
                let layout = table.layout()?;
                Some(
                    ids.iter()
                        .filter_map(|id| layout.schema.fields.iter().find(|f| f.id == *id))
                        .map(|f| f.name.clone())
                        .collect::<Vec<_>>(),
                )
            }
        };
        let mut reader = Self::new(table, names.as_deref())?;
        reader.projected_ids = self.projected_ids.clone();
        Ok(reader)
    }

    /// `_row_kind` followed by the projected columns.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Resolves where a subscription with `opts` starts. A consumer with recorded progress wins
    /// over the start mode, as in Paimon.
    pub async fn start_position(&self, opts: &StreamOptions) -> Result<StartPosition> {
        let sm = self.table.snapshot_manager();
        if let Some(id) = &opts.consumer_id {
            if let Some(next) = self.table.consumer_manager().next_snapshot(id).await? {
                self.check_retained(next).await?;
                return Ok(StartPosition { full: None, next });
            }
        }
        let latest = sm.latest_id().await?;
        let earliest = self.table.earliest_readable_id().await?;
        let pos = match opts.start {
            StartMode::Latest => StartPosition {
                full: None,
                next: latest.map_or(1, |l| l + 1),
            },
            StartMode::Default | StartMode::LatestFull => StartPosition {
                full: latest,
                next: latest.map_or(1, |l| l + 1),
            },
            StartMode::FromSnapshot(id) => {
                if id < 1 {
                    return invalid!("start snapshot must be at least 1, got {id}");
                }
                self.check_retained(id).await?;
                StartPosition {
                    full: None,
                    next: id,
                }
            }
            StartMode::FromSnapshotFull(id) => {
                if sm.try_snapshot(id).await?.is_none() {
                    self.check_retained(id).await?;
                    return crate::error::NotFoundSnafu {
                        message: format!(
                            "table {} has no snapshot {id} yet (latest is {})",
                            self.table.identifier(),
                            latest.map_or("none".to_string(), |l| l.to_string())
                        ),
                    }
                    .fail();
                }
                StartPosition {
                    full: Some(id),
                    next: id + 1,
                }
            }
            StartMode::FromTimestamp(t) => {
                // The first snapshot committed at or after `t` (Paimon starts after the newest
                // snapshot earlier than `t`).
                let before = sm.snapshot_at_or_before(t.saturating_sub(1)).await?;
                StartPosition {
                    full: None,
                    next: match before {
                        Some(s) => s.id + 1,
                        None => earliest.unwrap_or(1),
                    },
                }
            }
            StartMode::CompactedFull => {
                let mut found = latest;
                if let (Some(l), Some(e)) = (latest, earliest) {
                    let mut id = l;
                    while id >= e {
                        match sm.try_snapshot(id).await? {
                            Some(s) if s.commit_kind == CommitKind::Compact => {
                                found = Some(id);
                                break;
                            }
                            _ => id -= 1,
                        }
                    }
                }
                StartPosition {
                    full: found,
                    next: found.map_or(1, |f| f + 1),
                }
            }
        };
        Ok(pos)
    }

    /// Fails when snapshot `id` has expired, naming the earliest one available.
    async fn check_retained(&self, id: i64) -> Result<()> {
        if let Some(earliest) = self.table.earliest_readable_id().await? {
            if id < earliest && self.table.snapshot_or_changelog(id).await?.is_none() {
                return OutOfRangeSnafu {
                    message: format!(
                        "snapshot {id} of table {} has expired; the earliest available snapshot is {earliest}",
                        self.table.identifier()
                    ),
                }
                .fail();
            }
        }
        Ok(())
    }

    /// Every row of snapshot `id` as `+I`, in a stable order.
    pub async fn full(&self, id: i64) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let plan = self
            .table
            .new_scan()
            .snapshot(SnapshotSelector::Id(id))
            .plan()
            .await?;
        let read = self.table.new_read(Some(&self.projection_names))?;
        let schema = self.schema();
        Ok(read
            .stream_in_order(plan)
            .map(move |b| {
                let b = b?;
                let kinds: ArrayRef = Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                    RowKind::Insert.short_string(),
                    b.num_rows(),
                )));
                let mut cols = vec![kinds];
                cols.extend(b.columns().iter().cloned());
                RecordBatch::try_new(Arc::clone(&schema), cols).context(ArrowSnafu {
                    context: "full snapshot rows",
                })
            })
            .boxed())
    }

    /// The changes `snapshot` brings, in a stable order.
    pub async fn changes(
        &self,
        snapshot: &Snapshot,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let layout = &self.layout;
        let mm = self.table.manifest_manager();
        let pk = layout.is_primary_key_table();
        let producer = layout.changelog_producer;
        let entries = if pk && producer != ChangelogProducer::None {
            match &snapshot.changelog_manifest_list {
                Some(list) => mm.read_entries_of_list(list).await?,
                None => vec![],
            }
        } else if snapshot.commit_kind == CommitKind::Append {
            mm.read_entries_of_list(&snapshot.delta_manifest_list)
                .await?
        } else {
            vec![]
        };
        // A data-evolution update rewrites columns of rows already streamed: not a list of new
        // rows, and Paimon defines no changes for it.
        if layout.options.data_evolution {
            if let Some(e) = entries
                .iter()
                .find(|e| e.kind == FileKind::Add && e.file.write_cols.is_some())
            {
                return crate::error::UnsupportedSnafu {
                    message: format!(
                        "table {}: snapshot {} updates columns of rows already written (data file {} holds only {}); streaming the changes of a data-evolution table's updates is not supported",
                        self.table.identifier(),
                        snapshot.id,
                        e.file.file_name,
                        e.file.write_cols.as_deref().unwrap_or_default().join(", ")
                    ),
                }
                .fail();
            }
        }
        // Per (partition, bucket), in manifest order.
        let mut groups: Vec<(BucketId, Vec<DataFileMeta>)> = Vec::new();
        for e in entries.into_iter().filter(|e| e.kind == FileKind::Add) {
            let id = BucketId::new(e.partition.clone(), e.bucket);
            match groups.iter_mut().find(|(g, _)| *g == id) {
                Some((_, files)) => files.push(e.file),
                None => groups.push((id, vec![e.file])),
            }
        }
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        self.table
            .load_file_schemas(groups.iter().flat_map(|(_, files)| files.iter()))
            .await?;
        let mut units = Vec::with_capacity(groups.len());
        for (BucketId { partition, bucket }, mut files) in groups {
            let dir = self.table.bucket_dir(&partition, bucket)?;
            let file_ref = |f: &DataFileMeta| self.table.file_ref(&dir, f);
            if pk && producer == ChangelogProducer::None {
                units.push(Unit::Merge(
                    data_file::key_ordered_runs(&files, &layout.key_types)
                        .iter()
                        .map(|run| run.iter().map(file_ref).collect::<Result<Vec<_>>>())
                        .collect::<Result<Vec<_>>>()?,
                ));
            } else {
                if !pk {
                    files.sort_by_key(|f| (f.min_sequence_number, f.max_sequence_number));
                }
                units.push(Unit::Raw(
                    files.iter().map(file_ref).collect::<Result<Vec<_>>>()?,
                ));
            }
        }
        Ok(self.read_units(units))
    }

    /// Reads `units` on a blocking task, two batches ahead of the consumer.
    fn read_units(&self, units: Vec<Unit>) -> BoxStream<'static, Result<RecordBatch>> {
        if units.is_empty() {
            return stream::empty().boxed();
        }
        let (tx, rx) = mpsc::channel::<Result<RecordBatch>>(2);
        let errors = tx.clone();
        let layout = Arc::clone(&self.layout);
        let io = self.table.io().clone();
        let handle = tokio::runtime::Handle::current();
        let schema = self.schema();
        let projection = self.projection.clone();
        let task = move || -> Result<()> {
            let pk = layout.is_primary_key_table();
            let k = layout.key_indices.len();
            let value_offset = if pk { k + 2 } else { 0 };
            let convert = |b: &RecordBatch, merged: bool| -> Result<RecordBatch> {
                let n = b.num_rows();
                let kinds: StringArray = if pk {
                    let raw = b.column(k + 1).as_primitive::<Int8Type>();
                    (0..n)
                        .map(|i| {
                            let kind = RowKind::from_byte(raw.value(i)).unwrap_or(RowKind::Insert);
                            // Merged deltas have no before images: a winning -U is a removal.
                            let kind = if merged && kind == RowKind::UpdateBefore {
                                RowKind::Delete
                            } else {
                                kind
                            };
                            Some(kind.short_string())
                        })
                        .collect()
                } else {
                    StringArray::from_iter_values(std::iter::repeat_n(
                        RowKind::Insert.short_string(),
                        n,
                    ))
                };
                let mut cols: Vec<ArrayRef> = vec![Arc::new(kinds)];
                cols.extend(
                    projection
                        .iter()
                        .map(|&p| Arc::clone(b.column(value_offset + p))),
                );
                RecordBatch::try_new(Arc::clone(&schema), cols).context(ArrowSnafu {
                    context: "changelog rows",
                })
            };
            let send = |b: Result<RecordBatch>| -> Result<()> {
                tx.blocking_send(b).map_err(|_| {
                    InternalSnafu {
                        message: "changelog read cancelled".to_string(),
                    }
                    .build()
                })
            };
            for unit in units {
                match unit {
                    Unit::Raw(files) => {
                        for file in files {
                            for b in
                                data_file::load(&handle, &io, &file, &layout.file_schema, None)?
                            {
                                send(convert(&b, false))?;
                            }
                        }
                    }
                    Unit::Merge(runs) => {
                        let streams = data_file::run_streams(&handle, &io, &layout, runs);
                        let all: Vec<usize> = (0..layout.schema.fields.len()).collect();
                        let spec = layout.merge_spec(&all, true);
                        merge_streams(streams, &spec, None, None, |merged| {
                            send(convert(&merged, true))
                        })?;
                    }
                }
            }
            Ok(())
        };
        tokio::task::spawn_blocking(move || {
            if let Err(e) = task() {
                let _ = errors.blocking_send(Err(e));
            }
        });
        stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .boxed()
    }
}

/// What a subscription delivers.
#[derive(Debug)]
pub enum ChangeEvent {
    /// Change rows of a snapshot (more may follow for the same snapshot).
    Rows {
        snapshot_id: i64,
        batch: RecordBatch,
    },
    /// Every row of the snapshot was delivered.
    Completed { snapshot_id: i64 },
    /// Nothing new for a heartbeat interval; `last_completed` is the last completed snapshot.
    Idle { last_completed: i64 },
    /// Snapshot `snapshot_id` was written with a newer schema: its rows, and all that follow,
    /// have `schema` (`_row_kind`, then the columns as that schema names them).
    SchemaChanged { snapshot_id: i64, schema: SchemaRef },
}

/// A running subscription: events arrive through a bounded channel, so a slow receiver slows the
/// reading (never more than a few batches are buffered). Dropping it stops the reading at its
/// next step (a consumer's progress for a delivered snapshot is still recorded).
#[derive(Debug)]
pub struct Subscription {
    schema: SchemaRef,
    rx: mpsc::Receiver<Result<ChangeEvent>>,
}

impl Subscription {
    /// Starts following `table`. Fails at once for a bad start (unknown column, expired
    /// snapshot); later failures arrive as an `Err` event.
    pub async fn start(table: Table, opts: StreamOptions, heartbeat: Duration) -> Result<Self> {
        if let Some(id) = &opts.consumer_id {
            crate::snapshot::consumer::validate_id(id)?;
        }
        let mut reader = ChangelogReader::new(table, opts.projection.as_deref())?;
        let pos = reader.start_position(&opts).await?;
        // Every snapshot is sent in the schema it was committed with: a start before the latest
        // ALTER begins with the older schema and announces the changes as it passes them.
        let first = pos.full.unwrap_or(pos.next);
        if let Some(s) = reader
            .table()
            .snapshot_manager()
            .try_snapshot(first)
            .await?
        {
            if s.schema_id != reader.schema_id() {
                reader = reader.evolve(s.schema_id).await?;
            }
        }
        let schema = reader.schema();
        let (tx, rx) = mpsc::channel(2);
        tokio::spawn(async move {
            let result = follow(reader, pos, &opts, heartbeat, &tx).await;
            if let Err(e) = result {
                let _ = tx.send(Err(e)).await;
            }
        });
        Ok(Self { schema, rx })
    }

    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The next event; `None` once a bounded subscription has ended.
    pub async fn next(&mut self) -> Option<Result<ChangeEvent>> {
        self.rx.recv().await
    }
}

/// The subscription loop; returns when bounded and done, or when the receiver is gone.
async fn follow(
    reader: ChangelogReader,
    pos: StartPosition,
    opts: &StreamOptions,
    heartbeat: Duration,
    tx: &mpsc::Sender<Result<ChangeEvent>>,
) -> Result<()> {
    let mut reader = reader;
    let table = reader.table().clone();
    let consumers = &table.consumer_manager();
    let mut commits = COMMITS.subscribe();
    let closed = || {
        InternalSnafu {
            message: "subscriber went away".to_string(),
        }
        .build()
    };
    let done = |id: i64| opts.end_snapshot.is_some_and(|end| id > end);
    let mut last_completed = pos.next - 1;
    let mut last_sent = Instant::now();
    let deliver = |snapshot_id: i64, mut rows: BoxStream<'static, Result<RecordBatch>>| async move {
        while let Some(b) = rows.next().await {
            let batch = b?;
            if batch.num_rows() > 0 {
                tx.send(Ok(ChangeEvent::Rows { snapshot_id, batch }))
                    .await
                    .map_err(|_| closed())?;
            }
        }
        tx.send(Ok(ChangeEvent::Completed { snapshot_id }))
            .await
            .map_err(|_| closed())?;
        if let Some(id) = &opts.consumer_id {
            consumers.record(id, snapshot_id + 1).await?;
        }
        Ok::<_, crate::error::Error>(())
    };
    // Tell the subscriber where it stands before anything happens, so that a reconnect before
    // the first change resumes from this position instead of a later "latest".
    if pos.full.is_none() {
        tx.send(Ok(ChangeEvent::Idle {
            last_completed: pos.next - 1,
        }))
        .await
        .map_err(|_| closed())?;
    }
    if let Some(id) = pos.full {
        if done(id) {
            return Ok(());
        }
        deliver(id, reader.full(id).await?).await?;
        last_completed = id;
    }
    let mut next = pos.next;
    let lag = crate::metrics::Lag::new();
    // The latest id seen when catching up (read once per catch-up, not per snapshot).
    let mut behind: Option<i64> = None;
    // Other servers' commits are found by polling; on an object store each poll is a request.
    let poll = if table.io().is_remote() {
        REMOTE_POLL_INTERVAL
    } else {
        POLL_INTERVAL
    };
    loop {
        if done(next) {
            return Ok(());
        }
        // Mark what has been seen before looking, so a commit in between still wakes the wait.
        commits.borrow_and_update();
        match table.snapshot_or_changelog(next).await? {
            Some(s) => {
                if opts.end_timestamp_millis.is_some_and(|t| s.time_millis > t) {
                    return Ok(());
                }
                let latest = match behind {
                    Some(l) if l >= next => l,
                    _ => table.snapshot_manager().latest_id().await?.unwrap_or(next),
                };
                behind = Some(latest);
                lag.set(latest - next);
                // A newer schema replaces the subscription's, announced before the rows.
                if s.schema_id > reader.schema_id() {
                    reader = reader.evolve(s.schema_id).await?;
                    tx.send(Ok(ChangeEvent::SchemaChanged {
                        snapshot_id: next,
                        schema: reader.schema(),
                    }))
                    .await
                    .map_err(|_| closed())?;
                }
                deliver(next, reader.changes(&s).await?).await?;
                last_completed = next;
                last_sent = Instant::now();
                next += 1;
            }
            None => {
                lag.set(0);
                behind = None;
                reader.check_retained(next).await?;
                if opts
                    .end_timestamp_millis
                    .is_some_and(|t| reader.table().clock().now_millis() > t)
                {
                    return Ok(());
                }
                let until_heartbeat = heartbeat.saturating_sub(last_sent.elapsed());
                tokio::select! {
                    _ = tx.closed() => return Ok(()),
                    _ = commits.changed() => {}
                    _ = tokio::time::sleep(poll.min(until_heartbeat)) => {}
                }
                if last_sent.elapsed() >= heartbeat {
                    tx.send(Ok(ChangeEvent::Idle { last_completed }))
                        .await
                        .map_err(|_| closed())?;
                    last_sent = Instant::now();
                }
            }
        }
    }
}

/// Reads the changes of snapshots `from..=to` (those retained) into memory, each row tagged with
/// its snapshot id (the `$changelog` system table).
pub async fn collect_range(
    table: Table,
    projection: Option<&[String]>,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, RecordBatch)>> {
    let reader = ChangelogReader::new(table, projection)?;
    let table = reader.table().clone();
    let mut out = Vec::new();
    for id in from..=to {
        let Some(s) = table.snapshot_or_changelog(id).await? else {
            continue;
        };
        let mut rows = reader.changes(&s).await?;
        while let Some(b) = rows.next().await {
            let b = b?;
            if b.num_rows() > 0 {
                out.push((id, b));
            }
        }
    }
    Ok(out)
}

/// The string kinds of a changelog batch (its first column).
pub fn row_kinds(batch: &RecordBatch) -> Vec<&str> {
    let col = batch.column(0).as_string::<i32>();
    (0..col.len()).map(|i| col.value(i)).collect()
}
