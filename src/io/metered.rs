//! An object store that counts its requests by kind, with their latency, into the process's
//! metrics (`tidelake_object_store_requests_total{op}`), and keeps a count per warehouse that
//! benchmarks and tests read ([`FileIo::requests`](super::FileIo::requests)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::metrics::metrics;

/// `inner`, metered.
#[derive(Debug)]
pub(crate) struct MeteredStore {
    inner: Arc<dyn ObjectStore>,
    pub(crate) requests: Arc<AtomicU64>,
}

impl MeteredStore {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            requests: Arc::default(),
        }
    }

    fn record(&self, op: &'static str, started: Instant) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        metrics().store_request(op, started.elapsed());
    }
}

impl std::fmt::Display for MeteredStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Metered({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for MeteredStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let started = Instant::now();
        let r = self.inner.put_opts(location, payload, opts).await;
        self.record("put", started);
        r
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let started = Instant::now();
        let r = self.inner.put_multipart_opts(location, opts).await;
        self.record("put_multipart", started);
        r
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let op = if options.head { "head" } else { "get" };
        let started = Instant::now();
        let r = self.inner.get_opts(location, options).await;
        self.record(op, started);
        r
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        let started = Instant::now();
        let r = self.inner.get_ranges(location, ranges).await;
        self.record("get_ranges", started);
        r
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let requests = Arc::clone(&self.requests);
        self.inner
            .delete_stream(locations)
            .inspect(move |_| {
                requests.fetch_add(1, Ordering::Relaxed);
                metrics()
                    .store_requests
                    .get_or_create(&[("op", "delete")])
                    .inc();
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        metrics()
            .store_requests
            .get_or_create(&[("op", "list")])
            .inc();
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let started = Instant::now();
        let r = self.inner.list_with_delimiter(prefix).await;
        self.record("list", started);
        r
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let started = Instant::now();
        let r = self.inner.copy_opts(from, to, options).await;
        self.record("copy", started);
        r
    }
}
