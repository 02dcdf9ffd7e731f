//! Cross-partition upserts (Paimon's KEY_DYNAMIC bucket mode: `bucket` = -1 and a primary key
//! that lacks a partition key): the key index that says which partition and bucket each key
//! lives in, so a key that arrives in another partition is deleted from the old one (or merged
//! into it, by merge engine; see [`decide`]).
//!
//! The index is Paimon's `GlobalIndexAssigner` state: full primary key (as a BinaryRow) →
//! (partition, bucket), with each bucket's key count for the assignment of new keys. It is kept
//! on local disk in an embedded B-tree store (redb; its page cache is bounded), one file per
//! table under the process's local directory (`[storage] lookup_dir`), so it outlives writers and
//! restarts; its page cache is the table's `lookup.cache-max-memory-size` (256 mb), as Paimon
//! bounds the same state. It only ever reflects committed snapshots:
//!
//! ```text
//!  at snapshot A ──sync──► latest L:  A == L            nothing to do
//!                                     A < L, A intact   catch up: the keys of the files each
//!                                                       APPEND/OVERWRITE in (A, L] added
//!                                     otherwise         rebuild: every key of L, merged
//!  (rolled back, expired, missing, unreadable)
//! ```
//!
//! Keys are never removed (as in Paimon): the entry of a deleted key still names the partition
//! its deletion went to, which is harmless (a later move retracts a key that is not there).
//! Writers keep what they assign in memory until their commit is synced back; a commit whose
//! index was overtaken by another writer's APPEND or OVERWRITE is a conflict (Paimon supports one
//! writer of such a table at a time; tidelake refuses the second instead of writing a key twice).

mod decide;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use futures::{StreamExt, TryStreamExt};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use sha2::Digest;
use snafu::ResultExt;

pub(crate) use decide::{decide, pick_bucket, Action, OnMoved, Place};

use super::{Plan, SnapshotSelector, Split, Table};
use crate::error::{LocalIoSnafu, Result};
use crate::schema::layout::{write_field, TableLayout};
use crate::spec::binary_row::BinaryRowWriter;
use crate::spec::manifest::FileKind;
use crate::spec::{CommitKind, Snapshot};

const KEYS: TableDefinition<'_, &[u8], u64> = TableDefinition::new("keys");
const PARTITIONS: TableDefinition<'_, u32, &[u8]> = TableDefinition::new("partitions");
const COUNTS: TableDefinition<'_, u64, u64> = TableDefinition::new("counts");
const META: TableDefinition<'_, &str, &str> = TableDefinition::new("meta");

/// Beyond this many snapshots behind, the index is rebuilt instead of caught up.
const MAX_CATCH_UP: i64 = 1000;
/// Changed places kept in memory before they are written to the store (about 64 bytes each).
const FLUSH_KEYS: usize = 1 << 20;
/// Indexes kept open (and warm) by the process when no writer holds them.
const KEEP_OPEN: usize = 32;

/// The snapshot an index reflects, known by more than its id (a rolled-back or recreated table
/// reuses ids).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct At {
    id: i64,
    time_millis: i64,
    commit_user: String,
    identifier: i64,
    /// The key layout: the primary key's columns and types.
    key: String,
}

impl At {
    fn of(s: &Snapshot, key: &str) -> Self {
        Self {
            id: s.id,
            time_millis: s.time_millis,
            commit_user: s.commit_user.clone(),
            identifier: s.commit_identifier,
            key: key.to_string(),
        }
    }
}

/// One table's key index.
pub(crate) struct KeyIndex {
    /// Where it is kept (for messages): a file, or `memory`.
    file: String,
    db: redb::Database,
    at: Option<At>,
    partitions: Vec<Vec<u8>>,
    partition_ids: HashMap<Vec<u8>, u32>,
    /// How many of `partitions` are stored.
    stored_partitions: usize,
    counts: HashMap<u32, BTreeMap<i32, u64>>,
    /// Places changed since the last flush, newer than the store's: a B-tree rewrites a page per
    /// key it changes, so changes are gathered here and written in key order once they are many
    /// ([`FLUSH_KEYS`]; the cost of an upsert then stays flat as the table grows).
    recent: HashMap<Vec<u8>, Place>,
    /// The snapshots applied since the last flush.
    unflushed_snapshots: i64,
}

impl std::fmt::Debug for KeyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyIndex")
            .field("file", &self.file)
            .field("at", &self.at.as_ref().map(|a| a.id))
            .finish()
    }
}

/// A table's index, shared by the writers of the process.
pub(crate) type SharedIndex = Arc<tokio::sync::Mutex<KeyIndex>>;

fn store_error<E: std::error::Error + Send + Sync + 'static>(
    file: &str,
) -> impl FnOnce(E) -> crate::error::Error + '_ {
    move |e| {
        Err::<(), _>(std::io::Error::other(e))
            .context(LocalIoSnafu {
                path: format!("key index {file}"),
            })
            .unwrap_err()
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: the next [`open`] reopens the index from its file (as a restarted process would).
    static FORGET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What names a table's indexes in the process and on disk: the warehouse and the table's path.
fn table_name(io: &crate::io::FileIo, path: &str) -> String {
    format!("{}|{path}", io.uri())
}

/// The directory of a table's index files (one per branch).
fn table_dir(io: &crate::io::FileIo, path: &str) -> PathBuf {
    let digest = hex::encode(&sha2::Sha256::digest(table_name(io, path).as_bytes())[..16]);
    super::lookup::local_dir().join("key-index").join(digest)
}

/// Forgets the indexes of the table at `path` (dropped): closed in this process and their files
/// removed, so a table later created at the same path starts from nothing.
pub(crate) fn forget(io: &crate::io::FileIo, path: &str) {
    let prefix = format!("{}|", table_name(io, path));
    if let Some(open) = OPEN.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        open.retain(|name, _| !name.starts_with(&prefix));
    }
    if io.local_root().is_some() || io.is_remote() {
        #[allow(clippy::disallowed_methods)] // a few small files, once per dropped table
        let _ = std::fs::remove_dir_all(table_dir(io, path));
    }
}

/// The open index of `table` (opened, or created empty, on first use).
/// The indexes open in the process, by table and branch.
static OPEN: Mutex<Option<HashMap<String, SharedIndex>>> = Mutex::new(None);

pub(crate) fn open(table: &Table) -> Result<SharedIndex> {
    let io = table.io();
    let memory = !io.is_remote() && io.local_root().is_none();
    let branch = table.branch().unwrap_or("main");
    let name = if memory {
        format!("memory:{}:{}|{branch}", io.instance(), table.path())
    } else {
        format!("{}|{branch}", table_name(io, table.path()))
    };
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    let open = open.get_or_insert_with(HashMap::new);
    #[cfg(test)]
    if FORGET.with(|f| f.replace(false)) {
        open.remove(&name);
    }
    if let Some(index) = open.get(&name) {
        return Ok(Arc::clone(index));
    }
    if open.len() >= KEEP_OPEN {
        open.retain(|_, index| Arc::strong_count(index) > 1);
    }
    let cache = table.table_options()?.lookup_cache_bytes;
    let file = (!memory).then(|| table_dir(io, table.path()).join(format!("{branch}.redb")));
    let index = Arc::new(tokio::sync::Mutex::new(KeyIndex::open(
        file,
        usize::try_from(cache).unwrap_or(usize::MAX),
    )?));
    open.insert(name, Arc::clone(&index));
    Ok(index)
}

impl KeyIndex {
    /// The index kept in `file` (`None`: in memory).
    fn open(file: Option<PathBuf>, cache_bytes: usize) -> Result<Self> {
        let mut builder = redb::Builder::new();
        builder.set_cache_size(cache_bytes);
        let in_memory = |builder: &redb::Builder| {
            builder
                .create_with_backend(redb::backends::InMemoryBackend::new())
                .map_err(store_error("memory"))
        };
        let Some(file) = file else {
            return Self::load("memory".into(), in_memory(&builder)?);
        };
        let dir = file.parent().map(PathBuf::from).unwrap_or_default();
        let shown = file.display().to_string();
        let created = {
            use std::os::unix::fs::DirBuilderExt;
            #[allow(clippy::disallowed_methods)] // once per table and process, before any write
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
        };
        let db = created
            .map_err(|e| e.to_string())
            .and_then(|()| match builder.create(&file) {
                Ok(db) => Ok(db),
                // Held by another process on this machine: this one keeps its own in memory.
                Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err("in use".into()),
                Err(e) => {
                    // Unreadable (torn, or of another format): it is only a cache of the table.
                    tracing::warn!(file = %shown, error = %e, "key index rebuilt");
                    #[allow(clippy::disallowed_methods)]
                    let _ = std::fs::remove_file(&file);
                    builder.create(&file).map_err(|e| e.to_string())
                }
            });
        match db {
            Ok(db) => match Self::load(shown.clone(), db) {
                Ok(index) => Ok(index),
                Err(e) => {
                    tracing::warn!(file = %shown, error = %e, "key index kept in memory");
                    Self::load("memory".into(), in_memory(&builder)?)
                }
            },
            Err(e) => {
                tracing::warn!(file = %shown, error = %e, "key index kept in memory");
                Self::load("memory".into(), in_memory(&builder)?)
            }
        }
    }

    /// Reads what the store holds besides the keys.
    fn load(file: String, db: redb::Database) -> Result<Self> {
        let mut index = Self {
            file,
            db,
            at: None,
            partitions: vec![],
            partition_ids: HashMap::new(),
            stored_partitions: 0,
            counts: HashMap::new(),
            recent: HashMap::new(),
            unflushed_snapshots: 0,
        };
        let txn = index.db.begin_read().map_err(store_error(&index.file))?;
        let at = match txn.open_table(META) {
            Ok(meta) => meta
                .get("at")
                .map_err(store_error(&index.file))?
                .and_then(|v| serde_json::from_str::<At>(v.value()).ok()),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(store_error(&index.file)(e)),
        };
        let Some(at) = at else {
            return Ok(index);
        };
        let parts = txn
            .open_table(PARTITIONS)
            .map_err(store_error(&index.file))?;
        for (i, entry) in parts.iter().map_err(store_error(&index.file))?.enumerate() {
            let (id, bytes) = entry.map_err(store_error(&index.file))?;
            if id.value() as usize != i {
                // Not dense: start over.
                return Ok(index);
            }
            index.intern(bytes.value());
        }
        index.stored_partitions = index.partitions.len();
        let counts = txn.open_table(COUNTS).map_err(store_error(&index.file))?;
        for entry in counts.iter().map_err(store_error(&index.file))? {
            let (place, n) = entry.map_err(store_error(&index.file))?;
            let (p, b) = unpack(place.value());
            index.counts.entry(p).or_default().insert(b, n.value());
        }
        index.at = Some(at);
        Ok(index)
    }

    /// The id of a partition (assigned on first sight).
    pub(crate) fn intern(&mut self, partition: &[u8]) -> u32 {
        if let Some(&id) = self.partition_ids.get(partition) {
            return id;
        }
        let id = self.partitions.len() as u32;
        self.partitions.push(partition.to_vec());
        self.partition_ids.insert(partition.to_vec(), id);
        id
    }

    /// The partition (serialized BinaryRow) of an id from [`Self::intern`].
    pub(crate) fn partition(&self, id: u32) -> &[u8] {
        &self.partitions[id as usize]
    }

    /// Keys per bucket of a partition, as of the synced snapshot.
    pub(crate) fn counts(&self, partition: u32) -> BTreeMap<i32, u64> {
        self.counts.get(&partition).cloned().unwrap_or_default()
    }

    /// Where each key lives, as of the synced snapshot.
    pub(crate) fn lookup(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Place>>> {
        let mut out: Vec<Option<Place>> =
            keys.iter().map(|k| self.recent.get(k).copied()).collect();
        let txn = self.db.begin_read().map_err(store_error(&self.file))?;
        let table = match txn.open_table(KEYS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(out),
            Err(e) => return Err(store_error(&self.file)(e)),
        };
        // In key order: consecutive lookups walk neighbouring pages.
        let mut order: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
        order.sort_unstable_by(|&a, &b| keys[a].cmp(&keys[b]));
        for i in order {
            out[i] = table
                .get(keys[i].as_slice())
                .map_err(store_error(&self.file))?
                .map(|v| unpack(v.value()));
        }
        Ok(out)
    }

    /// Brings the index to the table's latest snapshot and returns that snapshot's id (`None`: the
    /// table has no snapshot).
    pub(crate) async fn sync(&mut self, table: &Table) -> Result<Option<i64>> {
        let layout = table.layout()?;
        let key = key_layout(&layout);
        let sm = table.snapshot_manager();
        let Some(latest) = sm.latest().await? else {
            if self.at.is_some() {
                self.clear()?;
            }
            return Ok(None);
        };
        let target = At::of(&latest, &key);
        if self.at.as_ref() == Some(&target) {
            return Ok(Some(latest.id));
        }
        // Catch up when every snapshot since the synced one is still there, unchanged.
        let mut between: Option<Vec<Snapshot>> = None;
        if let Some(at) = self
            .at
            .clone()
            .filter(|a| a.id < latest.id && latest.id - a.id <= MAX_CATCH_UP && a.key == key)
        {
            let same = sm.try_snapshot(at.id).await?.map(|s| At::of(&s, &key));
            if same.as_ref() == Some(&at) {
                let mut all = Vec::new();
                for id in at.id + 1..latest.id {
                    match sm.try_snapshot(id).await? {
                        Some(s) => all.push(s),
                        None => break,
                    }
                }
                if all.len() as i64 == latest.id - at.id - 1 {
                    all.push(latest.clone());
                    between = Some(all);
                }
            }
        }
        match between {
            Some(snapshots) => {
                for s in snapshots {
                    let started = std::time::Instant::now();
                    let rows = match s.commit_kind {
                        CommitKind::Append | CommitKind::Overwrite => {
                            added_keys(table, &layout, &s).await?
                        }
                        _ => vec![],
                    };
                    let (keys, read) = (rows.len(), started.elapsed());
                    self.apply(rows, Some(&At::of(&s, &key)))?;
                    tracing::debug!(table = %table.identifier(), snapshot = s.id, keys, read_ms = read.as_millis() as u64, apply_ms = (started.elapsed() - read).as_millis() as u64, "key index caught up");
                }
            }
            None => self.rebuild(table, &layout, &latest, &key).await?,
        }
        Ok(Some(latest.id))
    }

    /// Replaces the index by every key of `snapshot`, split by split.
    async fn rebuild(
        &mut self,
        table: &Table,
        layout: &TableLayout,
        snapshot: &Snapshot,
        key: &str,
    ) -> Result<()> {
        self.clear()?;
        let plan = table
            .new_scan()
            .snapshot(SnapshotSelector::Id(snapshot.id))
            .all_levels()
            .plan()
            .await?;
        let started = std::time::Instant::now();
        let mut keys = 0usize;
        let reads = futures::stream::iter(plan.splits.into_iter().map(|split| {
            let (table, layout, snapshot) = (table.clone(), layout.clone(), snapshot.clone());
            async move { split_keys(&table, &layout, &snapshot, split).await }
        }))
        .buffered(2);
        futures::pin_mut!(reads);
        while let Some(rows) = reads.try_next().await? {
            keys += rows.len();
            self.apply(rows, None)?;
        }
        // Only now is the index whole: an interrupted rebuild starts over.
        self.apply(vec![], Some(&At::of(snapshot, key)))?;
        self.flush()?;
        tracing::info!(table = %table.identifier(), snapshot = snapshot.id, keys, seconds = started.elapsed().as_secs_f64(), "key index built");
        Ok(())
    }

    /// Empties the index.
    fn clear(&mut self) -> Result<()> {
        let txn = self.db.begin_write().map_err(store_error(&self.file))?;
        txn.delete_table(KEYS).map_err(store_error(&self.file))?;
        txn.delete_table(PARTITIONS)
            .map_err(store_error(&self.file))?;
        txn.delete_table(COUNTS).map_err(store_error(&self.file))?;
        txn.delete_table(META).map_err(store_error(&self.file))?;
        txn.commit().map_err(store_error(&self.file))?;
        self.at = None;
        self.recent.clear();
        self.unflushed_snapshots = 0;
        self.partitions.clear();
        self.partition_ids.clear();
        self.stored_partitions = 0;
        self.counts.clear();
        Ok(())
    }

    /// Moves keys to the places they were found in, and records the index as at `at` (`None`: a
    /// rebuild in progress, not synced to anything). Kept in memory until there are enough to
    /// write ([`Self::flush`]).
    fn apply(&mut self, rows: Vec<(Vec<u8>, Vec<u8>, i32)>, at: Option<&At>) -> Result<()> {
        let changed: Vec<(Vec<u8>, Place)> = rows
            .into_iter()
            .map(|(k, p, b)| (k, (self.intern(&p), b)))
            .collect();
        let keys: Vec<Vec<u8>> = changed.iter().map(|(k, _)| k.clone()).collect();
        let old = self.lookup(&keys)?;
        for ((k, place), old) in changed.into_iter().zip(old) {
            if old == Some(place) {
                continue;
            }
            if let Some((p, b)) = old {
                if let Some(n) = self.counts.get_mut(&p).and_then(|c| c.get_mut(&b)) {
                    *n = n.saturating_sub(1);
                }
            }
            *self
                .counts
                .entry(place.0)
                .or_default()
                .entry(place.1)
                .or_default() += 1;
            self.recent.insert(k, place);
        }
        self.at = at.cloned();
        self.unflushed_snapshots += 1;
        if self.recent.len() >= FLUSH_KEYS || self.unflushed_snapshots >= MAX_CATCH_UP / 2 {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the places changed since the last flush, the partitions and the counts, with the
    /// snapshot they make the index as of, in one durable transaction (a crash keeps the store as
    /// of the previous flush, which a sync then catches up from).
    fn flush(&mut self) -> Result<()> {
        let file = self.file.clone();
        let mut recent: Vec<(Vec<u8>, Place)> =
            std::mem::take(&mut self.recent).into_iter().collect();
        recent.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let txn = self.db.begin_write().map_err(store_error(&file))?;
        {
            let mut keys = txn.open_table(KEYS).map_err(store_error(&file))?;
            for (k, place) in &recent {
                keys.insert(k.as_slice(), pack(*place))
                    .map_err(store_error(&file))?;
            }
            let mut parts = txn.open_table(PARTITIONS).map_err(store_error(&file))?;
            for id in self.stored_partitions..self.partitions.len() {
                parts
                    .insert(id as u32, self.partitions[id].as_slice())
                    .map_err(store_error(&file))?;
            }
            let mut counts = txn.open_table(COUNTS).map_err(store_error(&file))?;
            for (&p, buckets) in &self.counts {
                for (&b, &n) in buckets {
                    counts.insert(pack((p, b)), n).map_err(store_error(&file))?;
                }
            }
            let mut meta = txn.open_table(META).map_err(store_error(&file))?;
            match &self.at {
                None => {
                    meta.remove("at").map_err(store_error(&file))?;
                }
                Some(at) => {
                    let json = serde_json::to_string(at).unwrap_or_default();
                    meta.insert("at", json.as_str())
                        .map_err(store_error(&file))?;
                }
            }
        }
        txn.commit().map_err(store_error(&file))?;
        self.stored_partitions = self.partitions.len();
        self.unflushed_snapshots = 0;
        Ok(())
    }
}

impl Drop for KeyIndex {
    /// A closed index keeps what it learned (best effort: what is lost is caught up again).
    fn drop(&mut self) {
        if !self.recent.is_empty() || self.unflushed_snapshots > 0 {
            if let Err(e) = self.flush() {
                tracing::warn!(file = %self.file, error = %e, "key index not flushed");
            }
        }
    }
}

fn pack((partition, bucket): Place) -> u64 {
    (u64::from(partition) << 32) | u64::from(bucket as u32)
}

fn unpack(v: u64) -> Place {
    ((v >> 32) as u32, v as u32 as i32)
}

/// The primary key's names and types: an index of another key layout is rebuilt.
fn key_layout(layout: &TableLayout) -> String {
    layout
        .primary_key_indices
        .iter()
        .map(|&i| {
            let f = &layout.schema.fields[i];
            format!("{} {}", f.name, f.data_type)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Serialized BinaryRows of the primary key of rows of `columns` (the key's columns, in key
/// order).
pub(crate) fn key_bytes(
    layout: &TableLayout,
    columns: &[&arrow::array::ArrayRef],
    rows: impl Iterator<Item = usize>,
) -> Result<Vec<Vec<u8>>> {
    let types: Vec<_> = layout
        .primary_key_indices
        .iter()
        .map(|&i| &layout.schema.fields[i].data_type)
        .collect();
    let mut w = BinaryRowWriter::default();
    rows.map(|r| {
        w.reset(types.len());
        for (pos, (c, ty)) in columns.iter().zip(&types).enumerate() {
            write_field(&mut w, pos, c, r, ty)?;
        }
        Ok(w.serialized())
    })
    .collect()
}

/// The keys the files of an APPEND or OVERWRITE snapshot added, with their places: the live rows
/// of each bucket's new files (a deletion moves nothing).
async fn added_keys(
    table: &Table,
    layout: &TableLayout,
    snapshot: &Snapshot,
) -> Result<Vec<(Vec<u8>, Vec<u8>, i32)>> {
    let entries = table
        .manifest_manager()
        .read_entries_of_list(&snapshot.delta_manifest_list)
        .await?;
    // The files of one bucket are merged: a row a later file of the same commit retracts (a key
    // that came and left within it) places nothing.
    let mut buckets: BTreeMap<(Vec<u8>, i32), Vec<crate::spec::DataFileMeta>> = BTreeMap::new();
    for e in entries.into_iter().filter(|e| e.kind == FileKind::Add) {
        buckets
            .entry((e.partition, e.bucket))
            .or_default()
            .push(e.file);
    }
    let mut out = Vec::new();
    for ((partition, bucket), files) in buckets {
        let split = Split {
            partition,
            bucket,
            files,
            rows: None,
        };
        out.extend(split_keys(table, layout, snapshot, split).await?);
    }
    Ok(out)
}

/// The keys of one split's live rows (merged over its files: a key whose last row deletes it is
/// not there), with the split's place.
async fn split_keys(
    table: &Table,
    layout: &TableLayout,
    snapshot: &Snapshot,
    split: Split,
) -> Result<Vec<(Vec<u8>, Vec<u8>, i32)>> {
    let names: Vec<String> = layout
        .primary_key_indices
        .iter()
        .map(|&i| layout.schema.fields[i].name.clone())
        .collect();
    let read = table.new_read(Some(&names))?.merging_every_level();
    let (partition, bucket) = (split.partition.clone(), split.bucket);
    let batches: Vec<RecordBatch> = read
        .collect(Plan {
            snapshot: Some(snapshot.clone()),
            splits: vec![split],
            key_range: None,
        })
        .await?;
    let mut out = Vec::new();
    for b in &batches {
        let columns: Vec<&arrow::array::ArrayRef> = b.columns().iter().collect();
        for k in key_bytes(layout, &columns, 0..b.num_rows())? {
            out.push((k, partition.clone(), bucket));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, TableDefinition};
    use crate::spec::identifier::Identifier;
    use arrow::array::{Int64Array, StringArray};

    fn rows(t: &Table, ids: &[i64], dt: &str) -> RecordBatch {
        RecordBatch::try_new(
            t.arrow_schema().unwrap(),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(vec![dt; ids.len()])),
            ],
        )
        .unwrap()
    }

    #[tokio::test]
    async fn the_index_is_kept_on_disk_and_caught_up_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(dir.path().to_str().unwrap()).unwrap();
        let def = TableDefinition {
            columns: TableDefinition::parse_columns("id BIGINT NOT NULL, dt STRING NOT NULL")
                .unwrap(),
            primary_keys: vec!["id".into()],
            partition_keys: vec!["dt".into()],
            ..Default::default()
        };
        let t = catalog
            .create_table(&Identifier::new("db", "t"), &def, false)
            .await
            .unwrap();
        let write = |ids: &'static [i64], dt: &'static str| {
            let t = t.clone();
            async move {
                t.write_batches(&[rows(&t, ids, dt)], Default::default(), None)
                    .await
                    .unwrap()
            }
        };
        write(&[1, 2, 3], "a").await;
        write(&[2], "b").await;
        // The second write synced the index to snapshot 1; closing it writes it to its file.
        let index = open(&t).unwrap();
        assert!(index.lock().await.file.ends_with(".redb"), "kept in a file");
        FORGET.with(|f| f.set(true));
        drop(index);
        let shared = open(&t).unwrap();
        let mut index = shared.lock().await;
        assert_eq!(
            index.at.as_ref().map(|a| a.id),
            Some(1),
            "reloaded as it was"
        );
        // Catching up reads snapshot 2 only: key 2 moved to b, the others stay in a.
        assert_eq!(index.sync(&t).await.unwrap(), Some(2));
        let layout = t.layout().unwrap();
        let ids: arrow::array::ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3, 4]));
        let keys = key_bytes(&layout, &[&ids], 0..4).unwrap();
        let found = index.lookup(&keys).unwrap();
        let a = index.partition_ids[&crate::spec::binary_row::serialize(&[
            crate::spec::binary_row::Datum::String("a".into()),
        ])];
        let b = index.partition_ids[&crate::spec::binary_row::serialize(&[
            crate::spec::binary_row::Datum::String("b".into()),
        ])];
        assert_eq!(found, vec![Some((a, 0)), Some((b, 0)), Some((a, 0)), None]);
        assert_eq!(index.counts(a), BTreeMap::from([(0, 2)]));
        assert_eq!(index.counts(b), BTreeMap::from([(0, 1)]));
        // Dropping the table removes its index: a new table at the same path starts empty.
        drop(index);
        drop(shared);
        let dir = table_dir(t.io(), t.path());
        assert!(dir.join("main.redb").exists());
        catalog
            .drop_table(&Identifier::new("db", "t"), false)
            .await
            .unwrap();
        assert!(!dir.exists(), "{} removed", dir.display());
        let t = catalog
            .create_table(&Identifier::new("db", "t"), &def, false)
            .await
            .unwrap();
        assert!(open(&t).unwrap().lock().await.at.is_none());
    }
}
