//! The manifest manager: reads and writes a table's Avro manifest files and manifest lists, and
//! folds them into the set of live files of a snapshot.
//!
//! A snapshot's files are `base ⊕ delta`: the entries of every manifest in the base list, then the
//! delta list, applied in order (ADD inserts a file, DELETE removes the same file identifier).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{CorruptSnafu, ErrorKind, NotFoundSnafu, Result};
use crate::io::FileIo;
use crate::spec::binary_row::{self, Datum};
use crate::spec::index_manifest::{
    decode_hashes, decode_index_manifest, encode_hashes, encode_index_manifest, IndexFileMeta,
    IndexManifestEntry,
};
use crate::spec::manifest::{
    decode_manifest, decode_manifest_list, encode_manifest, encode_manifest_list, FileIdentifier,
    FileKind, ManifestEntry, ManifestFileMeta, SimpleStats,
};
use crate::spec::{DataType, Snapshot};

/// A process-wide cache of manifest entries, weighed by [`entries_weight`], of `bytes` in all.
type EntriesCache = moka::sync::Cache<String, Arc<Vec<ManifestEntry>>>;

fn entries_cache(bytes: u64) -> EntriesCache {
    moka::sync::Cache::builder()
        .weigher(|_, entries: &Arc<Vec<ManifestEntry>>| entries_weight(entries))
        .max_capacity(bytes)
        .build()
}

/// Decoded manifests of every warehouse this process reads, by storage handle and path (256 MiB).
fn decoded_manifests() -> &'static EntriesCache {
    static CACHE: std::sync::OnceLock<EntriesCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| entries_cache(256 << 20))
}

/// The folded live files of recent snapshots (the last few per table matter: readers plan
/// against the latest), 64 MiB.
fn live_files() -> &'static EntriesCache {
    static CACHE: std::sync::OnceLock<EntriesCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| entries_cache(64 << 20))
}

/// An estimate of the memory `entries` take, for the caches' weighers.
fn entries_weight(entries: &[ManifestEntry]) -> u32 {
    let bytes: usize = entries
        .iter()
        .map(|e| {
            256 + e.partition.len()
                + e.file.file_name.len()
                + e.file.min_key.len()
                + e.file.max_key.len()
                + e.file.key_stats.min_values.len()
                + e.file.key_stats.max_values.len()
                + e.file.value_stats.min_values.len()
                + e.file.value_stats.max_values.len()
        })
        .sum();
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// Unique names for the files one writer or committer creates: `<prefix><uuid>-<n>`.
#[derive(Debug)]
pub struct FileNamer {
    uuid: String,
    counter: AtomicU64,
}

impl Default for FileNamer {
    fn default() -> Self {
        Self {
            uuid: uuid::Uuid::new_v4().to_string(),
            counter: AtomicU64::new(0),
        }
    }
}

impl FileNamer {
    pub fn next(&self, prefix: &str, suffix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}{}-{n}{suffix}", self.uuid)
    }
}

#[derive(Debug, Clone)]
pub struct ManifestManager {
    io: FileIo,
    table_path: String,
}

impl ManifestManager {
    pub fn new(io: FileIo, table_path: impl Into<String>) -> Self {
        Self {
            io,
            table_path: table_path.into(),
        }
    }

    pub fn path(&self, name: &str) -> String {
        format!("{}/manifest/{name}", self.table_path)
    }

    async fn read_file(&self, name: &str) -> Result<(String, Bytes)> {
        let path = self.path(name);
        // Manifest and manifest-list names are unique (a UUID each): cached.
        match self.io.read_immutable(&path).await {
            Ok(b) => Ok((path, b)),
            Err(e) if e.kind() == ErrorKind::NotFound => NotFoundSnafu {
                message: format!("manifest file {path} is missing"),
            }
            .fail(),
            Err(e) => Err(e),
        }
    }

    pub async fn read_manifest_list(&self, name: &str) -> Result<Vec<ManifestFileMeta>> {
        let (path, bytes) = self.read_file(name).await?;
        decode_manifest_list(&bytes).map_err(|e| e.at(path))
    }

    pub async fn read_manifest(&self, name: &str) -> Result<Vec<ManifestEntry>> {
        Ok(self.read_manifest_shared(name).await?.as_ref().clone())
    }

    /// A manifest's entries, decoded once per process while the metadata cache is on: a
    /// manifest's name is unique and its content never changes, and decoding (Avro, zstd) is
    /// much of what planning a point query costs. Keyed by the storage handle: a catalog opened
    /// with other credentials reads for itself.
    async fn read_manifest_shared(&self, name: &str) -> Result<Arc<Vec<ManifestEntry>>> {
        let path = self.path(name);
        let key = format!("{}\u{0}{path}", self.io.instance());
        let cache = self.io.caches_metadata().then(decoded_manifests);
        if let Some(hit) = cache.and_then(|c| c.get(&key)) {
            return Ok(hit);
        }
        let (path, bytes) = self.read_file(name).await?;
        let entries = Arc::new(decode_manifest(&bytes).map_err(|e| e.at(path))?);
        if let Some(c) = cache {
            c.insert(key, Arc::clone(&entries));
        }
        Ok(entries)
    }

    /// Entries of every manifest in the list, in list order.
    pub async fn read_entries_of_list(&self, list_name: &str) -> Result<Vec<ManifestEntry>> {
        let metas = self.read_manifest_list(list_name).await?;
        let reads = metas
            .iter()
            .map(|m| self.read_manifest_shared(&m.file_name));
        let per_file = futures::future::try_join_all(reads).await?;
        Ok(per_file
            .iter()
            .flat_map(|entries| entries.iter().cloned())
            .collect())
    }

    /// The live data files of `snapshot` (base then delta, folded).
    pub async fn live_entries(&self, snapshot: &Snapshot) -> Result<Vec<ManifestEntry>> {
        Ok(self.live_entries_shared(snapshot).await?.as_ref().clone())
    }

    /// [`ManifestManager::live_entries`], folded once per process while the metadata cache is
    /// on: the two manifest lists a snapshot names are unique and never change, so neither do
    /// its live files. A point query plans against a warm snapshot without decoding anything.
    pub async fn live_entries_shared(
        &self,
        snapshot: &Snapshot,
    ) -> Result<Arc<Vec<ManifestEntry>>> {
        let key = format!(
            "{}\u{0}{}\u{0}{}\u{0}{}",
            self.io.instance(),
            self.table_path,
            snapshot.base_manifest_list,
            snapshot.delta_manifest_list
        );
        let cache = self.io.caches_metadata().then(live_files);
        if let Some(hit) = cache.and_then(|c| c.get(&key)) {
            return Ok(hit);
        }
        let (base, delta) = futures::future::try_join(
            self.read_entries_of_list(&snapshot.base_manifest_list),
            self.read_entries_of_list(&snapshot.delta_manifest_list),
        )
        .await?;
        let live = Arc::new(fold_entries(base.into_iter().chain(delta)));
        if let Some(c) = cache {
            c.insert(key, Arc::clone(&live));
        }
        Ok(live)
    }

    /// Writes one manifest holding `entries` and describes it for a manifest list.
    pub async fn write_manifest(
        &self,
        namer: &FileNamer,
        entries: &[ManifestEntry],
        partition_types: &[DataType],
        schema_id: i64,
    ) -> Result<ManifestFileMeta> {
        let name = namer.next("manifest-", "");
        let path = self.path(&name);
        let bytes = encode_manifest(entries)?;
        let size = bytes.len() as i64;
        self.io.write(&path, Bytes::from(bytes)).await?;
        let added = entries.iter().filter(|e| e.kind == FileKind::Add).count() as i64;
        Ok(ManifestFileMeta {
            file_name: name,
            file_size: size,
            num_added_files: added,
            num_deleted_files: entries.len() as i64 - added,
            partition_stats: partition_stats(entries, partition_types, &path)?,
            schema_id,
            min_bucket: entries.iter().map(|e| e.bucket).min(),
            max_bucket: entries.iter().map(|e| e.bucket).max(),
            min_level: entries.iter().map(|e| e.file.level).min(),
            max_level: entries.iter().map(|e| e.file.level).max(),
        })
    }

    /// Writes a manifest list; returns its name and size.
    pub async fn write_manifest_list(
        &self,
        namer: &FileNamer,
        metas: &[ManifestFileMeta],
    ) -> Result<(String, i64)> {
        let name = namer.next("manifest-list-", "");
        let path = self.path(&name);
        let bytes = encode_manifest_list(metas)?;
        let size = bytes.len() as i64;
        self.io.write(&path, Bytes::from(bytes)).await?;
        Ok((name, size))
    }
}

impl ManifestManager {
    /// Where an index file lives: its own path when it has one, else `<table>/index/<name>`.
    pub fn index_path(&self, file: &IndexFileMeta) -> String {
        match &file.external_path {
            Some(p) => p.clone(),
            None => format!("{}/index/{}", self.table_path, file.file_name),
        }
    }

    /// The live index files of `snapshot` (none when it has no index manifest).
    pub async fn index_entries(&self, snapshot: &Snapshot) -> Result<Vec<IndexManifestEntry>> {
        let Some(name) = &snapshot.index_manifest else {
            return Ok(vec![]);
        };
        let (path, bytes) = self.read_file(name).await?;
        decode_index_manifest(&bytes).map_err(|e| e.at(path))
    }

    /// Writes an index manifest holding `entries`; returns its name.
    pub async fn write_index_manifest(
        &self,
        namer: &FileNamer,
        entries: &[IndexManifestEntry],
    ) -> Result<String> {
        let name = namer.next("index-manifest-", "");
        let path = self.path(&name);
        let bytes = encode_index_manifest(entries)?;
        self.io.write(&path, Bytes::from(bytes)).await?;
        Ok(name)
    }

    /// The deletion vectors of `files` (all when `None`) of one partition's bucket, by data file name, from the
    /// index `entries` of snapshot `snapshot_id` (Paimon keeps one `DELETION_VECTORS` file per
    /// bucket; an index file that is missing or unreadable fails the read naming it: reading on
    /// without it would return deleted rows).
    pub async fn deletion_vectors(
        &self,
        snapshot_id: i64,
        entries: &[IndexManifestEntry],
        partition: &[u8],
        bucket: i32,
        files: Option<&std::collections::HashSet<&str>>,
    ) -> Result<std::collections::HashMap<String, crate::spec::deletion_vector::DeletionVector>>
    {
        use crate::spec::index_manifest::DELETION_VECTORS_INDEX;
        let mut out = std::collections::HashMap::new();
        for entry in entries {
            if entry.partition != partition
                || entry.bucket != bucket
                || entry.file.index_type != DELETION_VECTORS_INDEX
            {
                continue;
            }
            let path = self.index_path(&entry.file);
            let bytes = match self.io.read_immutable(&path).await {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    return NotFoundSnafu {
                        message: format!(
                            "deletion-vector file {path} of snapshot {snapshot_id} is missing"
                        ),
                    }
                    .fail()
                }
                Err(e) => return Err(e),
            };
            for meta in entry.file.dv_ranges.iter().flatten() {
                if files.is_some_and(|f| !f.contains(meta.data_file.as_str())) {
                    continue;
                }
                let dv =
                    crate::spec::deletion_vector::read(&bytes, meta).map_err(|e| e.at(&path))?;
                out.insert(meta.data_file.clone(), dv);
            }
        }
        Ok(out)
    }

    /// Writes an index file described by `meta` (its name decides where).
    pub async fn write_index_file(&self, meta: &IndexFileMeta, bytes: Vec<u8>) -> Result<()> {
        self.io
            .write(&self.index_path(meta), Bytes::from(bytes))
            .await
    }

    /// The key hashes of a HASH index file.
    pub async fn read_hash_index(&self, file: &IndexFileMeta) -> Result<Vec<i32>> {
        let path = self.index_path(file);
        // Index file names are unique: cached like manifests.
        let bytes = match self.io.read_immutable(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return NotFoundSnafu {
                    message: format!("index file {path} is missing"),
                }
                .fail()
            }
            Err(e) => return Err(e),
        };
        decode_hashes(&bytes).map_err(|e| e.at(path))
    }

    /// Writes a HASH index file of `hashes`; returns its description.
    pub async fn write_hash_index(
        &self,
        namer: &FileNamer,
        hashes: &[i32],
    ) -> Result<IndexFileMeta> {
        let meta = IndexFileMeta::hash(namer.next("index-", ""), hashes.len());
        self.io
            .write(&self.index_path(&meta), Bytes::from(encode_hashes(hashes)))
            .await?;
        Ok(meta)
    }
}

/// Applies ADD/DELETE entries in order and returns the files that remain (in first-ADD order).
pub fn fold_entries(entries: impl IntoIterator<Item = ManifestEntry>) -> Vec<ManifestEntry> {
    let mut live: HashMap<FileIdentifier, usize> = HashMap::new();
    let mut slots: Vec<Option<ManifestEntry>> = Vec::new();
    for e in entries {
        let id = e.identifier();
        match e.kind {
            FileKind::Add => {
                live.insert(id, slots.len());
                slots.push(Some(e));
            }
            FileKind::Delete => {
                if let Some(i) = live.remove(&id) {
                    slots[i] = None;
                }
            }
        }
    }
    slots.into_iter().flatten().collect()
}

/// Min/max over the partitions of `entries`, field by field, with null counts.
fn partition_stats(
    entries: &[ManifestEntry],
    types: &[DataType],
    path: &str,
) -> Result<SimpleStats> {
    if types.is_empty() || entries.is_empty() {
        let mut s = SimpleStats::empty();
        if !types.is_empty() {
            s = SimpleStats {
                min_values: binary_row::serialize(&vec![Datum::Null; types.len()]),
                max_values: binary_row::serialize(&vec![Datum::Null; types.len()]),
                null_counts: vec![Some(0); types.len()],
            };
        }
        return Ok(s);
    }
    let mut mins: Vec<Datum> = vec![Datum::Null; types.len()];
    let mut maxs: Vec<Datum> = vec![Datum::Null; types.len()];
    let mut nulls = vec![0i64; types.len()];
    for e in entries {
        let values = binary_row::deserialize(&e.partition, types).map_err(|err| {
            CorruptSnafu {
                path,
                message: format!("partition row: {err}"),
            }
            .build()
        })?;
        for (i, v) in values.into_iter().enumerate() {
            if v.is_null() {
                nulls[i] += 1;
                continue;
            }
            if mins[i].is_null() || v.compare(&mins[i]) == Some(std::cmp::Ordering::Less) {
                mins[i] = v.clone();
            }
            if maxs[i].is_null() || v.compare(&maxs[i]) == Some(std::cmp::Ordering::Greater) {
                maxs[i] = v;
            }
        }
    }
    Ok(SimpleStats {
        min_values: binary_row::serialize(&mins),
        max_values: binary_row::serialize(&maxs),
        null_counts: nulls.into_iter().map(Some).collect(),
    })
}
