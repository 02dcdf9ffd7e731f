//! An in-memory object store with injected faults, for the commit-protocol and crash tests.

use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::Arc;

use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

#[derive(Debug)]
pub(crate) struct FaultyStore {
    pub(crate) inner: Arc<InMemory>,
    /// The next create-if-absent put of a snapshot file: 1 = fails before storing, 2 = stores and
    /// then fails (a lost acknowledgement), 3 = stores and then answers "already exists" (an S3
    /// client's retry of a put whose first attempt landed); reset after one use.
    pub(crate) snapshot_fault: AtomicU8,
    /// Puts left before every call fails, as if the writer process died; negative = never.
    pub(crate) puts_left: Arc<AtomicI64>,
    /// Deletes left before every call fails (a process killed inside expiry, rollback or orphan
    /// removal); negative = never.
    pub(crate) deletes_left: Arc<AtomicI64>,
}

impl FaultyStore {
    pub(crate) fn new(inner: Arc<InMemory>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            snapshot_fault: AtomicU8::new(0),
            puts_left: Arc::new(AtomicI64::new(-1)),
            deletes_left: Arc::new(AtomicI64::new(-1)),
        })
    }

    fn dead(&self) -> bool {
        is_dead(&self.puts_left, &self.deletes_left)
    }

    fn fail<T>(why: &'static str) -> object_store::Result<T> {
        Err(object_store::Error::Generic {
            store: "faulty",
            source: why.into(),
        })
    }
}

fn is_dead(puts_left: &AtomicI64, deletes_left: &AtomicI64) -> bool {
    puts_left.load(Ordering::SeqCst) == 0 || deletes_left.load(Ordering::SeqCst) == 0
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultyStore")
    }
}

#[async_trait::async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if self.dead() {
            return Self::fail("the writer process died");
        }
        if location.as_ref().contains("/snapshot/snapshot-") && matches!(opts.mode, PutMode::Create)
        {
            match self.snapshot_fault.swap(0, Ordering::SeqCst) {
                1 => return Self::fail("connection reset"),
                2 => {
                    self.inner.put_opts(location, payload, opts).await?;
                    return Self::fail("connection reset");
                }
                3 => {
                    self.inner.put_opts(location, payload, opts).await?;
                    return Err(object_store::Error::AlreadyExists {
                        path: location.to_string(),
                        source: "412 Precondition Failed on the retried put".into(),
                    });
                }
                _ => {}
            }
        }
        let r = self.inner.put_opts(location, payload, opts).await;
        if self.puts_left.load(Ordering::SeqCst) > 0 {
            self.puts_left.fetch_sub(1, Ordering::SeqCst);
        }
        r
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if self.dead() {
            return Self::fail("the writer process died");
        }
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if self.dead() {
            return Self::fail("the writer process died");
        }
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        use futures::StreamExt;
        let inner = Arc::clone(&self.inner);
        let (puts_left, deletes_left) =
            (Arc::clone(&self.puts_left), Arc::clone(&self.deletes_left));
        // One delete at a time, each counted against the process's remaining life.
        locations
            .then(move |loc| {
                let inner = Arc::clone(&inner);
                let (puts_left, deletes_left) = (Arc::clone(&puts_left), Arc::clone(&deletes_left));
                async move {
                    let loc = loc?;
                    if is_dead(&puts_left, &deletes_left) {
                        return Self::fail("the process died");
                    }
                    let one = futures::stream::iter([Ok(loc)]).boxed();
                    let r = inner.delete_stream(one).next().await;
                    if deletes_left.load(Ordering::SeqCst) > 0 {
                        deletes_left.fetch_sub(1, Ordering::SeqCst);
                    }
                    r.unwrap_or_else(|| Self::fail("no delete result"))
                }
            })
            .boxed()
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        if self.dead() {
            return Self::fail("the writer process died");
        }
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
