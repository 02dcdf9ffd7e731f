//! Storage access for everything under a warehouse root: reads, listings, durable writes and the
//! write-once primitive commits rely on.
//!
//! Paths handed to [`FileIo`] are relative to the warehouse root and use `/`. Object stores are
//! reached through `object_store`; on a local directory writes bypass it so they can be made
//! durable: the bytes go to a temporary file that is fsynced, then renamed (overwrite) or
//! hard-linked (create-if-absent) into place, and the directory is fsynced.

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

/// Handle to a warehouse's storage; cheap to clone.
#[derive(Debug, Clone)]
pub struct FileIo {
    store: Arc<dyn ObjectStore>,
    /// Set for local directories: the absolute root, used for durable writes.
    local_root: Option<PathBuf>,
    uri: String,
}

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

    /// Opens a warehouse: `memory://` for an in-memory store, `file:///abs/dir` or a plain path
    /// for a local directory (created if missing).
    pub fn open(uri: &str) -> Result<Self> {
        if uri == "memory://" || uri == "memory:" {
            return Ok(Self {
                store: Arc::new(InMemory::new()),
                local_root: None,
                uri: uri.into(),
            });
        }
        let path = if let Some(rest) = uri.strip_prefix("file://") {
            PathBuf::from(rest)
        } else if uri.contains("://") {
            return InvalidArgumentSnafu {
                message: format!(
                    "unsupported warehouse URI '{uri}' (use a directory or memory://)"
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
        Ok(Self {
            store: Arc::new(store),
            uri: root.display().to_string(),
            local_root: Some(root),
        })
    }

    /// A warehouse on any `object_store` implementation (S3, a test double, ...). Writes rely on
    /// the store's own durability and its `PutMode::Create` for write-once files.
    pub fn from_store(store: Arc<dyn ObjectStore>, uri: impl Into<String>) -> Self {
        Self {
            store,
            local_root: None,
            uri: uri.into(),
        }
    }

    /// A fresh in-memory warehouse (tests).
    pub fn memory() -> Self {
        Self {
            store: Arc::new(InMemory::new()),
            local_root: None,
            uri: "memory://".into(),
        }
    }

    /// The warehouse location as given (absolute for local directories).
    pub fn uri(&self) -> &str {
        &self.uri
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
        Ok(res.objects.into_iter().map(status).collect())
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
        Ok(objects.into_iter().map(status).collect())
    }

    /// Deletes a file; a missing file is not an error.
    pub async fn delete(&self, path: &str) -> Result<()> {
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
            self.store
                .copy_if_not_exists(&src, &dst)
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

fn status(o: object_store::ObjectMeta) -> FileStatus {
    FileStatus {
        path: o.location.to_string(),
        size: o.size,
        last_modified_millis: o.last_modified.timestamp_millis(),
    }
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
