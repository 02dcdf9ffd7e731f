//! Storage access for everything under a warehouse root: reads, listings, durable writes and the
//! write-once primitive commits rely on.
//!
//! Paths handed to [`FileIo`] are relative to the warehouse root and use `/`. Object stores are
//! reached through `object_store` (`s3://` warehouses: [`s3`]); on a local directory writes bypass
//! it so they can be made durable: the bytes go to a temporary file that is fsynced, then renamed
//! (overwrite) or hard-linked (create-if-absent) into place, and the directory is fsynced.
//!
//! Listings skip zero-byte "directory marker" objects (`db.db/`, which pyarrow and so pypaimon
//! leave on object stores): they are neither files nor tables.

mod disk_cache;
mod inline;
mod metered;
pub mod s3;
pub mod sts;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use snafu::ResultExt;

use crate::error::{InvalidArgumentSnafu, LocalIoSnafu, Result, StorageSnafu};
pub use s3::StorageOptions;

/// A file found by a listing.
#[derive(Debug, Clone)]
pub struct FileStatus {
    /// Path relative to the warehouse root.
    pub path: String,
    pub size: u64,
    /// Last modification, epoch milliseconds.
    pub last_modified_millis: i64,
}

impl FileStatus {
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// Handle to a warehouse's storage; cheap to clone (clones share the store, its request count
/// and the metadata cache).
#[derive(Debug, Clone)]
pub struct FileIo {
    store: Arc<dyn ObjectStore>,
    /// Set for local directories: the absolute root, used for durable writes.
    local_root: Option<PathBuf>,
    uri: String,
    /// Requests made to the store (all clones).
    requests: Arc<std::sync::atomic::AtomicU64>,
    /// Files that never change once written ([`FileIo::read_immutable`]), bounded by bytes.
    cache: Option<moka::future::Cache<String, Bytes>>,
    /// The newest id last seen per versioned directory (a table's `schema/`): where probing
    /// starts instead of a listing ([`FileIo::hint`]).
    hints: Arc<std::sync::Mutex<std::collections::HashMap<String, i64>>>,
    /// Object stores only, when configured: local copies of data files ([`FileIo::read_data`]).
    data_cache: Option<Arc<disk_cache::DiskCache>>,
    /// Unique per handle (shared by its clones): what process-wide caches of decoded metadata
    /// key on, so that a handle never sees what another read with other credentials.
    instance: u64,
}

/// The next [`FileIo::instance`].
static NEXT_INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The metadata cache's size when `[storage] metadata_cache_mb` does not say.
pub const DEFAULT_METADATA_CACHE_MB: u64 = 64;

/// The data-file disk cache's size when `[storage] data_cache_dir` is set and
/// `data_cache_mb` does not say.
pub const DEFAULT_DATA_CACHE_MB: u64 = 1024;

impl FileIo {
    /// Opens a warehouse that must exist already: a local directory that is missing is an
    /// error naming it (a mistyped path for a read is never silently created).
    pub fn open_existing(uri: &str) -> Result<Self> {
        let local = uri.strip_prefix("file://").unwrap_or(uri);
        if !uri.contains("://") || uri.starts_with("file://") {
            let path = std::path::Path::new(local);
            if !path.is_dir() {
                return crate::error::NotFoundSnafu {
                    message: format!(
                        "warehouse {} does not exist (no such directory)",
                        path.display()
                    ),
                }
                .fail();
            }
        }
        Self::open(uri)
    }

    /// Opens a warehouse: `memory://` for an in-memory store, `s3://BUCKET/PREFIX` (settings from
    /// the AWS environment variables), `file:///abs/dir` or a plain path for a local directory
    /// (created if missing).
    pub fn open(uri: &str) -> Result<Self> {
        Self::open_with(uri, &StorageOptions::default())
    }

    /// [`FileIo::open`] with `[storage]` settings for object stores.
    pub fn open_with(uri: &str, storage: &StorageOptions) -> Result<Self> {
        let cache_mb = storage
            .metadata_cache_mb
            .unwrap_or(DEFAULT_METADATA_CACHE_MB);
        if let Some(location) = s3::S3Location::parse(uri) {
            let location = location?;
            let store = s3::store(&location, storage)?;
            let mut io = Self::assemble(store, None, location.uri(), cache_mb);
            if let Some(dir) = &storage.data_cache_dir {
                let mb = storage.data_cache_mb.unwrap_or(DEFAULT_DATA_CACHE_MB);
                // One subdirectory per warehouse (tenants share the setting), bounded each.
                let own =
                    std::path::Path::new(dir).join(&disk_cache::DiskCache::key(&io.uri, "")[..16]);
                let cache =
                    disk_cache::DiskCache::open(&own, mb * 1024 * 1024).context(LocalIoSnafu {
                        path: format!("[storage] data_cache_dir {dir}"),
                    })?;
                io.data_cache = Some(cache);
            }
            return Ok(io);
        }
        if uri == "memory://" || uri == "memory:" {
            return Ok(Self::memory());
        }
        let path = if let Some(rest) = uri.strip_prefix("file://") {
            PathBuf::from(rest)
        } else if uri.contains("://") {
            return InvalidArgumentSnafu {
                message: format!(
                    "unsupported warehouse URI '{uri}' (use a directory, s3://BUCKET/PREFIX or memory://)"
                ),
            }
            .fail();
        } else {
            PathBuf::from(uri)
        };
        create_dir_all(&path)?;
        let root = path.canonicalize().context(LocalIoSnafu {
            path: path.display().to_string(),
        })?;
        let store = LocalFileSystem::new_with_prefix(&root).context(StorageSnafu {
            path: root.display().to_string(),
        })?;
        let uri = root.display().to_string();
        Ok(Self::assemble(Arc::new(store), Some(root), uri, cache_mb))
    }

    fn assemble(
        store: Arc<dyn ObjectStore>,
        local_root: Option<PathBuf>,
        uri: String,
        cache_mb: u64,
    ) -> Self {
        let metered = metered::MeteredStore::new(store);
        let requests = Arc::clone(&metered.requests);
        let cache = (cache_mb > 0).then(|| {
            moka::future::Cache::builder()
                .max_capacity(cache_mb * 1024 * 1024)
                .weigher(|k: &String, v: &Bytes| {
                    u32::try_from(k.len() + v.len()).unwrap_or(u32::MAX)
                })
                .build()
        });
        Self {
            store: Arc::new(metered),
            local_root,
            uri,
            requests,
            instance: NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cache,
            hints: Arc::default(),
            data_cache: None,
        }
    }

    /// A warehouse on any `object_store` implementation (S3, a test double, ...). Writes rely on
    /// the store's own durability and its `PutMode::Create` for write-once files.
    pub fn from_store(store: Arc<dyn ObjectStore>, uri: impl Into<String>) -> Self {
        Self::assemble(store, None, uri.into(), DEFAULT_METADATA_CACHE_MB)
    }

    /// A fresh in-memory warehouse (tests).
    pub fn memory() -> Self {
        Self::assemble(
            Arc::new(InMemory::new()),
            None,
            "memory://".into(),
            DEFAULT_METADATA_CACHE_MB,
        )
    }

    /// Requests made to the store so far (by this handle and its clones): what a call costs on
    /// an object store, for benchmarks and tests.
    pub fn requests(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reads a file that never changes once written (a manifest, a manifest list, a schema or a
    /// snapshot file), from the metadata cache when it holds it. Writes and deletes through this
    /// handle drop the path from the cache (a rollback or a dropped table's files).
    pub async fn read_immutable(&self, path: &str) -> Result<Bytes> {
        self.read_cached(path, path.to_string()).await
    }

    /// Reads `path` through the metadata cache, under `key`.
    async fn read_cached(&self, path: &str, key: String) -> Result<Bytes> {
        let Some(cache) = &self.cache else {
            return self.read(path).await;
        };
        if let Some(b) = cache.get(&key).await {
            return Ok(b);
        }
        let bytes = self.read(path).await?;
        cache.insert(key, bytes.clone()).await;
        Ok(bytes)
    }

    /// What identifies the content at `path` now (size, modification time and ETag from one
    /// HEAD), or `None` when nothing is there. Files that are written once but whose name can be
    /// reused (a dropped and re-created table's `schema-0`) are read through
    /// [`FileIo::read_version`] under it.
    pub async fn version(&self, path: &str) -> Result<Option<String>> {
        if let Some(version) = self.inline_version(path) {
            return version;
        }
        let p = Self::store_path(path)?;
        match self.store.head(&p).await {
            Ok(m) => Ok(Some(format!(
                "{}:{}:{}",
                m.size,
                m.last_modified.timestamp_millis(),
                m.e_tag.unwrap_or_default()
            ))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e).context(StorageSnafu { path }),
        }
    }

    /// Reads `path` as it was when [`FileIo::version`] said `version`, from the cache when it
    /// holds that version.
    pub async fn read_version(&self, path: &str, version: &str) -> Result<Bytes> {
        self.read_cached(path, format!("{path}\0{version}")).await
    }

    /// The newest id last seen in the versioned directory `dir` (only a starting point: callers
    /// check it still exists and probe past it).
    pub fn hint(&self, dir: &str) -> Option<i64> {
        self.hints.lock().ok()?.get(dir).copied()
    }

    pub fn set_hint(&self, dir: &str, id: i64) {
        if let Ok(mut h) = self.hints.lock() {
            h.insert(dir.to_string(), id);
        }
    }

    pub fn forget_hint(&self, dir: &str) {
        if let Ok(mut h) = self.hints.lock() {
            h.remove(dir);
        }
    }

    /// Reads a data file (written once under a unique name): on an object store with
    /// `[storage] data_cache_dir`, from its local copy when there is one, else fetched and kept.
    pub async fn read_data(&self, path: &str) -> Result<Bytes> {
        let Some(cache) = &self.data_cache else {
            return self.read(path).await;
        };
        let key = disk_cache::DiskCache::key(&self.uri, path);
        let (c, k) = (Arc::clone(cache), key.clone());
        if let Some(b) = blocking(path, move || Ok(c.get(&k))).await? {
            return Ok(b);
        }
        let bytes = self.read(path).await?;
        let (c, b) = (Arc::clone(cache), bytes.clone());
        blocking(path, move || {
            c.put(&key, &b);
            Ok(())
        })
        .await?;
        Ok(bytes)
    }

    async fn forget(&self, path: &str) {
        if let Some(cache) = &self.cache {
            cache.invalidate(path).await;
        }
    }

    /// Whether immutable metadata read through this handle is cached (`[cache]` not disabled).
    pub fn caches_metadata(&self) -> bool {
        self.cache.is_some()
    }

    /// This handle's identity (shared by its clones), for caches of decoded metadata.
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// The warehouse location as given (absolute for local directories).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Whether the warehouse is on an object store reached over the network (not a local
    /// directory, not memory).
    pub fn is_remote(&self) -> bool {
        self.local_root.is_none() && self.uri != "memory://"
    }

    /// Checks that the warehouse can be listed and, with `write`, written, so that an
    /// unreachable endpoint, refused credentials, a missing bucket or a read-only one is one
    /// error naming the warehouse at start-up. Nothing is left behind.
    pub async fn probe(&self, write: bool) -> Result<()> {
        if !self.is_remote() {
            return Ok(());
        }
        let unusable = |doing: &str, e: object_store::Error| {
            let (what, detail) = s3::explain(doing, &e.to_string());
            crate::error::of_kind(
                crate::error::ErrorKind::Unavailable,
                format!("warehouse {} is not usable: {what} ({detail})", self.uri),
            )
        };
        if let Err(e) = self.store.list_with_delimiter(None).await {
            return Err(unusable("listing it failed", e));
        }
        if write {
            let p = Self::store_path(&format!(".tidelake-probe-{}", uuid::Uuid::new_v4()))?;
            if let Err(e) = self.store.put(&p, PutPayload::from_static(b"probe")).await {
                return Err(unusable("writing to it failed", e));
            }
            if let Err(e) = self.store.delete(&p).await {
                return Err(unusable("deleting from it failed", e));
            }
        }
        Ok(())
    }

    /// The file at `path` (relative to a local warehouse's root) opened for reading, for readers
    /// that fetch only the byte ranges they need (Parquet footers and column chunks). Blocking:
    /// call it from a blocking task. None on an object store, for a path with `..` or an
    /// absolute one, or when the file cannot be opened (the caller then reads through the store,
    /// which reports the error).
    pub fn open_local(&self, path: &str) -> Option<std::fs::File> {
        #[allow(clippy::disallowed_methods)] // blocking by contract (see above)
        std::fs::File::open(self.local_path(path)?).ok()
    }

    /// Where `path` (relative to the root) is on a local warehouse's disk: `None` on an object
    /// store, and for a path with `..` or an absolute one.
    fn local_path(&self, path: &str) -> Option<PathBuf> {
        let root = self.local_root.as_ref()?;
        let relative = std::path::Path::new(path);
        relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
            .then(|| root.join(relative))
    }

    /// The canonical root of a local warehouse.
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.local_root.as_deref()
    }

    /// Whether `path` (relative to the root) stays inside the root once symlinks are followed:
    /// its deepest existing ancestor, canonicalized, must lie under the canonical root. Always
    /// true for object stores (keys have no links).
    pub fn confined(&self, path: &str) -> bool {
        let Some(root) = &self.local_root else {
            return true;
        };
        let mut p = root.join(path);
        loop {
            if let Ok(real) = p.canonicalize() {
                return real.starts_with(root);
            }
            if !p.pop() {
                return false;
            }
        }
    }

    fn store_path(path: &str) -> Result<StorePath> {
        StorePath::parse(path).map_err(|e| {
            InvalidArgumentSnafu {
                message: format!("invalid storage path '{path}': {e}"),
            }
            .build()
        })
    }

    pub async fn read(&self, path: &str) -> Result<Bytes> {
        if let Some(read) = self.inline_read(path) {
            return read;
        }
        let p = Self::store_path(path)?;
        let got = self.store.get(&p).await.context(StorageSnafu { path })?;
        got.bytes().await.context(StorageSnafu { path })
    }

    pub async fn exists(&self, path: &str) -> Result<bool> {
        let p = Self::store_path(path)?;
        match self.store.head(&p).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e).context(StorageSnafu { path }),
        }
    }

    /// Writes (or replaces) a file; returns once the bytes are durable.
    pub async fn write(&self, path: &str, data: Bytes) -> Result<()> {
        self.put(path, data, false).await.map(|_| ())
    }

    /// Creates a file only if none exists at `path`: `Ok(true)` if this call created it,
    /// `Ok(false)` if the file already existed (nothing written). Durable on return.
    pub async fn write_if_absent(&self, path: &str, data: Bytes) -> Result<bool> {
        self.put(path, data, true).await
    }

    async fn put(&self, path: &str, data: Bytes, create: bool) -> Result<bool> {
        crash_point();
        self.forget(path).await;
        if let Some(root) = &self.local_root {
            let target = root.join(path);
            return blocking(path, move || durable_local_put(&target, &data, create)).await;
        }
        let p = Self::store_path(path)?;
        let opts = PutOptions {
            mode: if create {
                PutMode::Create
            } else {
                PutMode::Overwrite
            },
            ..Default::default()
        };
        match self
            .store
            .put_opts(&p, PutPayload::from_bytes(data), opts)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) if create => Ok(false),
            Err(e) => Err(e).context(StorageSnafu { path }),
        }
    }

    /// Files directly inside `dir` (not recursive).
    pub async fn list(&self, dir: &str) -> Result<Vec<FileStatus>> {
        let p = Self::store_path(dir)?;
        let res = match self.store.list_with_delimiter(Some(&p)).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(vec![]),
            Err(e) => return Err(e).context(StorageSnafu { path: dir }),
        };
        Ok(files(res.objects, dir))
    }

    /// Ids of the files `<prefix><id>` directly inside `dir` (e.g. `snapshot-12`), sorted
    /// numerically; other names are ignored.
    pub async fn list_numbered(&self, dir: &str, prefix: &str) -> Result<Vec<i64>> {
        let mut ids: Vec<i64> = self
            .list(dir)
            .await?
            .iter()
            .filter_map(|f| f.name().strip_prefix(prefix)?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Names of the directories directly inside `dir`.
    pub async fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        let p = if dir.is_empty() {
            None
        } else {
            Some(Self::store_path(dir)?)
        };
        let res = match self.store.list_with_delimiter(p.as_ref()).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(vec![]),
            Err(e) => return Err(e).context(StorageSnafu { path: dir }),
        };
        // A directory that is a symlink out of the root is not listed (it could name another
        // tenant's tables).
        Ok(res
            .common_prefixes
            .into_iter()
            .filter(|p| self.confined(p.as_ref()))
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    /// Every file under `dir`, recursively.
    pub async fn list_recursive(&self, dir: &str) -> Result<Vec<FileStatus>> {
        let p = Self::store_path(dir)?;
        let objects: Vec<_> = match self.store.list(Some(&p)).try_collect().await {
            Ok(o) => o,
            Err(object_store::Error::NotFound { .. }) => return Ok(vec![]),
            Err(e) => return Err(e).context(StorageSnafu { path: dir }),
        };
        Ok(files(objects, dir))
    }

    /// Deletes a file; a missing file is not an error.
    pub async fn delete(&self, path: &str) -> Result<()> {
        self.forget(path).await;
        let p = Self::store_path(path)?;
        match self.store.delete(&p).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e).context(StorageSnafu { path }),
        }
    }

    /// Moves everything under `from` to `to` (which must not exist): one directory rename on a
    /// local warehouse, a copy of each object then the deletion of the originals on object stores.
    pub async fn rename_dir(&self, from: &str, to: &str) -> Result<()> {
        if let Some(root) = &self.local_root {
            let (src, dst) = (root.join(from), root.join(to));
            return blocking(from, move || rename_local_dir(&src, &dst)).await;
        }
        let files = self.list_recursive(from).await?;
        for f in &files {
            let rel = f.path.strip_prefix(from).unwrap_or(&f.path);
            let target = format!("{to}{rel}");
            let (src, dst) = (Self::store_path(&f.path)?, Self::store_path(&target)?);
            // S3 has no copy-if-absent without extra configuration; the target is checked to
            // be free before a rename starts.
            self.store
                .copy(&src, &dst)
                .await
                .context(StorageSnafu { path: &target })?;
        }
        for f in &files {
            self.delete(&f.path).await?;
        }
        Ok(())
    }

    /// Deletes everything under `dir`.
    pub async fn delete_dir(&self, dir: &str) -> Result<()> {
        for f in self.list_recursive(dir).await? {
            self.delete(&f.path).await?;
        }
        if let Some(root) = &self.local_root {
            let target = root.join(dir);
            blocking(dir, move || remove_dir_all_if_exists(&target)).await?;
        }
        Ok(())
    }
}

/// Fault injection for crash tests: with `TIDELAKE_CRASH_AFTER_PUTS=N` in the environment the
/// process exits at once (status 137, no unwinding and none of tidelake's cleanup, like a kill)
/// when it is about to make its put number N+1. Unset, this costs one `OnceLock` read per put.
fn crash_point() {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::OnceLock;
    static LIMIT: OnceLock<Option<i64>> = OnceLock::new();
    static PUTS: AtomicI64 = AtomicI64::new(0);
    let limit = LIMIT.get_or_init(|| {
        std::env::var("TIDELAKE_CRASH_AFTER_PUTS")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(limit) = limit {
        if PUTS.fetch_add(1, Ordering::Relaxed) >= *limit {
            std::process::exit(137);
        }
    }
}

/// Runs blocking filesystem work for `path` off the async workers.
async fn blocking<T: Send + 'static>(
    path: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| {
            crate::error::InternalSnafu {
                message: format!("filesystem task for {path}: {e}"),
            }
            .build()
        })?
        .context(LocalIoSnafu { path })
}

/// The files of a listing of `dir`, without directory markers: a zero-byte object `d/` lists as
/// `d` (object_store drops the trailing `/`), so an empty object whose path is `dir` itself or
/// the parent of another listed path is a marker, not a file.
fn files(objects: Vec<object_store::ObjectMeta>, dir: &str) -> Vec<FileStatus> {
    let dir = dir.trim_end_matches('/');
    let parents: std::collections::HashSet<&str> = objects
        .iter()
        .filter_map(|o| o.location.as_ref().rsplit_once('/').map(|(p, _)| p))
        .collect();
    let marker = |o: &object_store::ObjectMeta| {
        let p = o.location.as_ref();
        o.size == 0 && (p == dir || p.is_empty() || parents.contains(p))
    };
    objects
        .iter()
        .filter(|o| !marker(o))
        .map(|o| FileStatus {
            path: o.location.to_string(),
            size: o.size,
            last_modified_millis: o.last_modified.timestamp_millis(),
        })
        .collect()
}

// Blocking filesystem code runs only inside spawn_blocking (see `put` and `delete_dir`), or once at
// start-up in `open`.
#[allow(clippy::disallowed_methods)]
fn create_dir_all(path: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(path).context(LocalIoSnafu {
        path: path.display().to_string(),
    })
}

#[allow(clippy::disallowed_methods)] // the blocking pool runs it; a directory rename is one syscall
fn rename_local_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    if to.exists() {
        // Only an empty leftover directory may be replaced.
        std::fs::remove_dir(to)?;
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::rename(from, to)
}

#[allow(clippy::disallowed_methods)]
fn remove_dir_all_if_exists(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[allow(clippy::disallowed_methods)]
fn durable_local_put(target: &std::path::Path, data: &[u8], create: bool) -> std::io::Result<bool> {
    use std::io::Write;
    let dir = target
        .parent()
        .ok_or_else(|| std::io::Error::other("path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    if create && target.exists() {
        return Ok(false);
    }
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        drop(f);
        let created = if create {
            match std::fs::hard_link(&tmp, target) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(e),
            }
        } else {
            std::fs::rename(&tmp, target)?;
            true
        };
        std::fs::File::open(dir)?.sync_all()?;
        Ok(created)
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_markers_are_not_files() {
        let meta = |p: &str, size: u64| object_store::ObjectMeta {
            location: StorePath::parse(p).unwrap(),
            last_modified: chrono::DateTime::from_timestamp_millis(0).unwrap(),
            size,
            e_tag: None,
            version: None,
        };
        let listed = vec![
            meta("db.db/t/snapshot", 0),
            meta("db.db/t/snapshot/LATEST", 1),
            meta("db.db/t/bucket-0", 0),
            meta("db.db/t/bucket-0/data-1.parquet", 10),
            meta("db.db/t/empty-but-real", 0),
        ];
        let names: Vec<String> = files(listed.clone(), "db.db/t")
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(
            names,
            [
                "db.db/t/snapshot/LATEST",
                "db.db/t/bucket-0/data-1.parquet",
                "db.db/t/empty-but-real"
            ]
        );
        let here = files(listed[..2].to_vec(), "db.db/t/snapshot/");
        assert_eq!(here.len(), 1);
    }

    #[tokio::test]
    async fn write_if_absent_is_write_once() {
        let dir = tempfile::tempdir().unwrap();
        for io in [
            FileIo::memory(),
            FileIo::open(dir.path().to_str().unwrap()).unwrap(),
        ] {
            assert!(io
                .write_if_absent("t/snapshot/snapshot-1", Bytes::from("a"))
                .await
                .unwrap());
            assert!(!io
                .write_if_absent("t/snapshot/snapshot-1", Bytes::from("b"))
                .await
                .unwrap());
            assert_eq!(
                io.read("t/snapshot/snapshot-1").await.unwrap(),
                Bytes::from("a")
            );
            io.write("t/snapshot/LATEST", Bytes::from("1"))
                .await
                .unwrap();
            io.write("t/snapshot/LATEST", Bytes::from("2"))
                .await
                .unwrap();
            let mut names: Vec<_> = io
                .list("t/snapshot")
                .await
                .unwrap()
                .iter()
                .map(|f| f.name().to_string())
                .collect();
            names.sort();
            assert_eq!(names, vec!["LATEST", "snapshot-1"]);
            assert_eq!(io.list_dirs("").await.unwrap(), vec!["t"]);
            io.delete_dir("t").await.unwrap();
            assert!(!io.exists("t/snapshot/LATEST").await.unwrap());
        }
    }
}
