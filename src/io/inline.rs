//! Local warehouse reads made right where they are asked for, without object_store's hop to a
//! blocking thread and back: only on a work thread ([`crate::runtime::on_work_thread`]), where a
//! `stat` or the read of a small metadata file costs microseconds, while the hop costs a point
//! query several context switches per file. [`FileIo::version`] and [`FileIo::read`] take this
//! route when it applies; each request is counted where the store's are.

use bytes::Bytes;
use snafu::ResultExt;

use super::FileIo;
use crate::error::{LocalIoSnafu, Result};

impl FileIo {
    /// [`FileIo::version`] by `stat`, when the inline route applies.
    pub(super) fn inline_version(&self, path: &str) -> Option<Result<Option<String>>> {
        let local = self.inline_path(path)?;
        let started = std::time::Instant::now();
        let meta = std::fs::metadata(&local);
        self.record_inline("head", started);
        Some(match meta {
            Ok(m) if m.is_file() => Ok(Some(local_version(&m))),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).context(LocalIoSnafu { path }),
        })
    }

    /// [`FileIo::read`] by a blocking read, when the inline route applies.
    pub(super) fn inline_read(&self, path: &str) -> Option<Result<Bytes>> {
        let local = self.inline_path(path)?;
        let started = std::time::Instant::now();
        #[allow(clippy::disallowed_methods)] // on a work thread only (see the module doc)
        let read = std::fs::read(&local);
        self.record_inline("get", started);
        Some(read.map(Bytes::from).context(LocalIoSnafu { path }))
    }

    fn inline_path(&self, path: &str) -> Option<std::path::PathBuf> {
        if !crate::runtime::on_work_thread() {
            return None;
        }
        self.local_path(path)
    }

    /// Counts an inline request where the store's requests are counted: this handle's count
    /// and `tidelake_object_store_requests_total{op}`.
    fn record_inline(&self, op: &'static str, started: std::time::Instant) {
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::metrics::metrics().store_request(op, started.elapsed());
    }
}

/// [`FileIo::version`] of a local file from its metadata: the string the local store's HEAD
/// gives (size, modification millis, and its ETag of inode, modification micros and size), so
/// a version seen either way names the same cache entry.
fn local_version(m: &std::fs::Metadata) -> String {
    let modified = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    let inode = std::os::unix::fs::MetadataExt::ino(m);
    let size = m.len();
    format!(
        "{size}:{}:{inode:x}-{:x}-{size:x}",
        modified.as_millis(),
        modified.as_micros()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_work_thread_reads_local_files_inline_as_the_store_would() {
        let dir = tempfile::tempdir().unwrap();
        let io = FileIo::open(dir.path().to_str().unwrap()).unwrap();
        io.write("t/snapshot/LATEST", Bytes::from_static(b"7"))
            .await
            .unwrap();
        let through_store = (
            io.version("t/snapshot/LATEST").await.unwrap(),
            io.version("t/snapshot/snapshot-8").await.unwrap(),
            io.version("t/snapshot").await.unwrap(),
        );
        let before = io.requests();
        let pool = crate::runtime::WorkPool::default();
        let inline = {
            let io = io.clone();
            pool.run(
                None,
                async move {
                    assert!(crate::runtime::on_work_thread());
                    let v = (
                        io.version("t/snapshot/LATEST").await?,
                        io.version("t/snapshot/snapshot-8").await?,
                        io.version("t/snapshot").await?,
                    );
                    let read = io.read("t/snapshot/LATEST").await?;
                    let missing = io.read("t/snapshot/snapshot-8").await.map_err(|e| e.kind());
                    Ok((v, read, missing))
                },
                |p| crate::error::of_kind(crate::error::ErrorKind::Internal, p.to_string()),
            )
            .await
            .unwrap()
        };
        assert!(through_store.0.is_some());
        assert_eq!(inline.0, through_store, "one version string either way");
        assert_eq!(inline.1, Bytes::from_static(b"7"));
        assert_eq!(inline.2, Err(crate::error::ErrorKind::NotFound));
        assert_eq!(io.requests() - before, 5, "inline reads count as requests");
    }
}
