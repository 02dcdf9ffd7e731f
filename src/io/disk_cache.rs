//! The optional local disk cache of data files for object-store warehouses
//! (`[storage] data_cache_dir`, bounded by `data_cache_mb`). Data files are written once under
//! unique names, so a cached copy is never stale. Each file is kept as one local file named by
//! the SHA-256 of its warehouse and path; an index in memory (moka, weighed by bytes) decides what
//! stays, and deletes the local copy of what it evicts. The directory is emptied at start (what a
//! previous process left is not in the index).

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use sha2::Digest;

/// The cache, shared by the clones of one warehouse's [`super::FileIo`].
pub(crate) struct DiskCache {
    dir: PathBuf,
    index: moka::sync::Cache<String, u64>,
}

impl std::fmt::Debug for DiskCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

// The cache's own directory: created and emptied at start-up, one small file operation per
// insert or eviction (inserts run on the blocking pool).
#[allow(clippy::disallowed_methods)]
impl DiskCache {
    /// A cache in `dir` (created, emptied) holding at most `capacity` bytes.
    pub(crate) fn open(dir: &std::path::Path, capacity: u64) -> std::io::Result<Arc<Self>> {
        std::fs::create_dir_all(dir)?;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::remove_file(entry.path())?;
            }
        }
        let evict_dir = dir.to_path_buf();
        let index = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .weigher(|_: &String, size: &u64| u32::try_from(*size).unwrap_or(u32::MAX))
            .eviction_listener(move |key: Arc<String>, _size, cause| {
                // A replaced entry's file is the new copy (same name): keep it.
                if cause != moka::notification::RemovalCause::Replaced {
                    let _ = std::fs::remove_file(evict_dir.join(key.as_str()));
                }
            })
            .build();
        Ok(Arc::new(Self {
            dir: dir.to_path_buf(),
            index,
        }))
    }

    /// The local name of `path` of the warehouse `uri`.
    pub(crate) fn key(uri: &str, path: &str) -> String {
        let mut h = sha2::Sha256::new();
        h.update(uri.as_bytes());
        h.update([0]);
        h.update(path.as_bytes());
        hex::encode(h.finalize())
    }

    /// The cached copy under `key`, if the index holds it and the file is still there.
    pub(crate) fn get(&self, key: &str) -> Option<Bytes> {
        self.index.get(key)?;
        match std::fs::read(self.dir.join(key)) {
            Ok(b) => Some(Bytes::from(b)),
            Err(_) => {
                self.index.invalidate(key);
                None
            }
        }
    }

    /// Keeps `bytes` under `key` (written to a temporary file, then renamed, so a reader never
    /// sees a partial copy). Failures only mean the file is not cached.
    pub(crate) fn put(&self, key: &str, bytes: &[u8]) {
        let tmp = self
            .dir
            .join(format!(".{key}.{}.tmp", uuid::Uuid::new_v4().simple()));
        if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, self.dir.join(key)).is_ok()
        {
            self.index.insert(key.to_string(), bytes.len() as u64);
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Bytes the index holds (after its pending evictions ran).
    #[cfg(test)]
    fn weighed(&self) -> u64 {
        self.index.run_pending_tasks();
        self.index.weighted_size()
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_served_and_the_bound_holds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("left-over"), b"old").unwrap();
        let cache = DiskCache::open(dir.path(), 10_000).unwrap();
        assert!(!dir.path().join("left-over").exists());
        let key = DiskCache::key("s3://b/wh", "db.db/t/bucket-0/data-1.parquet");
        assert_ne!(
            key,
            DiskCache::key("s3://b/other", "db.db/t/bucket-0/data-1.parquet")
        );
        assert!(cache.get(&key).is_none());
        cache.put(&key, b"parquet bytes");
        assert_eq!(
            cache.get(&key).unwrap(),
            Bytes::from_static(b"parquet bytes")
        );
        // A copy deleted behind the cache's back is a miss, not an error.
        std::fs::remove_file(dir.path().join(&key)).unwrap();
        assert!(cache.get(&key).is_none());
        // Far more than the bound: what is kept, in the index and on disk, stays within it.
        for i in 0..40 {
            cache.put(&DiskCache::key("s3://b/wh", &format!("f{i}")), &[7u8; 1000]);
        }
        assert!(cache.weighed() <= 10_000, "{}", cache.weighed());
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(on_disk <= 10_000, "{on_disk} bytes on disk");
    }
}
