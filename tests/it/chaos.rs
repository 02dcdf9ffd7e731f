//! A chaos object store (every request may fail before it is made, fail after it landed, time
//! out, or list stale), and a model test that runs the commit, compaction, expiry, orphan
//! removal, tag, rollback, consumer and changelog paths through it: no acknowledged commit is
//! lost, no read returns wrong rows, and no retained snapshot or tag points at a missing file.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use serde_json::{json, Value};
use tidelake::io::FileIo;
use tidelake::table::maintenance::RollbackTarget;
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::{Catalog, Identifier, Table, TableDefinition};

/// What one request suffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// Fails before anything happens.
    Before,
    /// Happens, then the answer is lost.
    Landed,
    /// Waits, then fails as a timeout (having happened for writes, half the time).
    Timeout,
}

/// An in-memory store that injects faults with a seeded generator while `on`.
#[derive(Debug)]
pub(crate) struct ChaosStore {
    inner: Arc<InMemory>,
    on: AtomicBool,
    state: AtomicU64,
    /// Per mille of requests that fail.
    rate: u64,
    /// The last puts: a listing may leave them out (S3's listings lag behind writes).
    recent: Mutex<VecDeque<String>>,
    pub(crate) injected: AtomicU64,
}

impl std::fmt::Display for ChaosStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChaosStore")
    }
}

fn fail<T>(why: &'static str) -> object_store::Result<T> {
    Err(object_store::Error::Generic {
        store: "chaos",
        source: why.into(),
    })
}

impl ChaosStore {
    pub(crate) fn new(inner: Arc<InMemory>, seed: u64, rate: u64) -> Arc<Self> {
        Arc::new(Self {
            inner,
            on: AtomicBool::new(false),
            state: AtomicU64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            rate,
            recent: Mutex::new(VecDeque::new()),
            injected: AtomicU64::new(0),
        })
    }

    fn next(&self) -> u64 {
        // xorshift64*, advanced atomically so concurrent requests draw distinct numbers.
        let mut x = self.state.load(Ordering::SeqCst);
        loop {
            let mut y = x;
            y ^= y >> 12;
            y ^= y << 25;
            y ^= y >> 27;
            match self
                .state
                .compare_exchange(x, y, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return y.wrapping_mul(0x2545_F491_4F6C_DD1D),
                Err(now) => x = now,
            }
        }
    }

    fn fault(&self) -> Fault {
        if !self.on.load(Ordering::SeqCst) {
            return Fault::None;
        }
        let r = self.next();
        if r % 1000 >= self.rate {
            return Fault::None;
        }
        self.injected.fetch_add(1, Ordering::SeqCst);
        match (r / 1000) % 3 {
            0 => Fault::Before,
            1 => Fault::Landed,
            _ => Fault::Timeout,
        }
    }

    async fn timeout() {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

#[async_trait::async_trait]
impl ObjectStore for ChaosStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let fault = self.fault();
        if fault == Fault::Before {
            return fail("connection reset before the request");
        }
        let r = self.inner.put_opts(location, payload, opts).await?;
        {
            let mut recent = self.recent.lock().unwrap();
            recent.push_back(location.to_string());
            if recent.len() > 8 {
                recent.pop_front();
            }
        }
        match fault {
            Fault::Landed => fail("connection reset after the put landed"),
            Fault::Timeout => {
                Self::timeout().await;
                fail("the put timed out (it landed)")
            }
            _ => Ok(r),
        }
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if self.fault() == Fault::Before {
            return fail("connection reset before the upload");
        }
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        match self.fault() {
            Fault::None => self.inner.get_opts(location, options).await,
            Fault::Timeout => {
                Self::timeout().await;
                fail("the get timed out")
            }
            _ => fail("connection reset during the get"),
        }
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // Each delete decided alone: before (kept), landed or timed out (deleted, error).
        let faults: Vec<Fault> = (0..64).map(|_| self.fault()).collect();
        let inner = Arc::clone(&self.inner);
        locations
            .enumerate()
            .then(move |(i, loc)| {
                let inner = Arc::clone(&inner);
                let fault = faults[i % faults.len()];
                async move {
                    let loc = loc?;
                    if fault == Fault::Before {
                        return fail("connection reset before the delete");
                    }
                    let one = futures::stream::iter([Ok(loc)]).boxed();
                    let r = inner.delete_stream(one).next().await;
                    match fault {
                        Fault::None => r.unwrap_or_else(|| fail("no delete result")),
                        _ => fail("the delete's answer was lost (it happened)"),
                    }
                }
            })
            .boxed()
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match self.fault() {
            Fault::None => self.inner.list(prefix),
            Fault::Before => futures::stream::iter([fail("the listing failed")]).boxed(),
            // A stale listing: the latest puts are not in it yet.
            _ => {
                let hidden: Vec<String> = self.recent.lock().unwrap().iter().cloned().collect();
                self.inner
                    .list(prefix)
                    .filter(move |m| {
                        let stale = m
                            .as_ref()
                            .is_ok_and(|m| hidden.contains(&m.location.to_string()));
                        futures::future::ready(!stale)
                    })
                    .boxed()
            }
        }
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        match self.fault() {
            Fault::None => self.inner.list_with_delimiter(prefix).await,
            Fault::Before => fail("the listing failed"),
            _ => {
                let hidden: Vec<String> = self.recent.lock().unwrap().iter().cloned().collect();
                let mut r = self.inner.list_with_delimiter(prefix).await?;
                r.objects
                    .retain(|m| !hidden.contains(&m.location.to_string()));
                Ok(r)
            }
        }
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        match self.fault() {
            Fault::None => self.inner.copy_opts(from, to, options).await,
            Fault::Before => fail("connection reset before the copy"),
            _ => {
                self.inner.copy_opts(from, to, options).await?;
                fail("the copy's answer was lost (it happened)")
            }
        }
    }
}

type Model = BTreeMap<i64, String>;

fn model_rows(m: &Model) -> Vec<Vec<Value>> {
    crate::common::sorted(m.iter().map(|(k, v)| vec![json!(k), json!(v)]).collect())
}

/// The table through a fresh FileIo on the inner store: no faults, no caches.
async fn clean(inner: &Arc<InMemory>, id: &Identifier) -> Table {
    Catalog::new(FileIo::from_store(Arc::clone(inner) as _, "memory://"))
        .load_table(id)
        .await
        .unwrap()
}

/// Every retained snapshot and every tag reads whole; the latest equals the model.
async fn check(inner: &Arc<InMemory>, id: &Identifier, model: &Model, step: usize, op: &str) {
    let t = clean(inner, id).await;
    let sm = t.snapshot_manager();
    let (Some(earliest), Some(latest)) = (
        sm.earliest_id().await.unwrap(),
        sm.latest_id().await.unwrap(),
    ) else {
        assert!(
            model.is_empty(),
            "step {step} ({op}): no snapshot, model {model:?}"
        );
        return;
    };
    // Every retained snapshot's manifests read and its data files exist; the newest ones read.
    let mm = t.manifest_manager();
    for s in earliest..=latest {
        let snapshot = match sm.try_snapshot(s).await {
            Ok(Some(snapshot)) => snapshot,
            other => panic!("step {step} ({op}): snapshot {s} of {earliest}..={latest}: {other:?}"),
        };
        let entries = mm.live_entries(&snapshot).await.unwrap_or_else(|e| {
            panic!("step {step} ({op}): snapshot {s}'s manifests do not read: {e}")
        });
        for e in entries {
            let path = format!(
                "{}/{}",
                t.bucket_dir(&e.partition, e.bucket).unwrap(),
                e.file.file_name
            );
            assert!(
                t.io().exists(&path).await.unwrap(),
                "step {step} ({op}): snapshot {s} points at a missing file {path}"
            );
        }
        if s + 3 > latest {
            if let Err(e) = t.read_all(SnapshotSelector::Id(s), None).await {
                panic!(
                    "step {step} ({op}): snapshot {s} of {earliest}..={latest} does not read: {e}"
                );
            }
        }
    }
    for (name, s) in t.list_tags().await.unwrap() {
        if let Err(e) = t.read_all(SnapshotSelector::Tag(name.clone()), None).await {
            panic!(
                "step {step} ({op}): tag {name} (snapshot {}) does not read: {e}",
                s.id
            );
        }
    }
    let got = crate::common::read_rows(&t, None).await;
    assert_eq!(
        got,
        model_rows(model),
        "step {step} ({op}): the latest snapshot differs from the model"
    );
}

async fn run_chaos(seed: u64, steps: usize) -> (u64, usize, usize) {
    let inner = Arc::new(InMemory::new());
    let chaos = ChaosStore::new(Arc::clone(&inner), seed, 60);
    let catalog = Catalog::new(FileIo::from_store(Arc::clone(&chaos) as _, "memory://"));
    catalog.create_database("db", true).await.unwrap();
    let id = Identifier::new("db", "t");
    let def = TableDefinition {
        columns: TableDefinition::parse_columns("id BIGINT NOT NULL, v STRING").unwrap(),
        primary_keys: vec!["id".into()],
        options: [
            ("bucket", "2"),
            ("changelog-producer", "input"),
            ("snapshot.num-retained.min", "2"),
            ("snapshot.num-retained.max", "5"),
            ("commit.max-retries", "30"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        ..Default::default()
    };
    catalog.create_table(&id, &def, false).await.unwrap();
    let mut model = Model::new();
    let mut tags: BTreeMap<String, Model> = BTreeMap::new();
    let mut rng = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut draw = |n: u64| {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) % n
    };
    let (mut acked, mut failed) = (0usize, 0usize);
    chaos.on.store(true, Ordering::SeqCst);
    for step in 0..steps {
        // A table handle per step, as a server loads one per statement.
        let table = match catalog.load_table(&id).await {
            Ok(t) => t,
            Err(_) => continue,
        };
        let pick = draw(100);
        let op;
        if pick < 55 {
            op = "commit";
            let identifier = step as i64 + 1;
            let mut rows = Vec::new();
            let mut next = model.clone();
            for _ in 0..(1 + draw(4)) {
                let k = draw(30) as i64;
                if draw(5) == 0 {
                    rows.push(json!({"id": k, "v": "", "op": "-D"}));
                    next.remove(&k);
                } else {
                    let v = format!("s{step}");
                    rows.push(json!({"id": k, "v": v, "op": "+I"}));
                    next.insert(k, v);
                }
            }
            let options = WriteOptions {
                row_kind_column: Some("op".into()),
            };
            let result = async {
                let mut w = table.new_write(options)?;
                let written = async {
                    w.write(&crate::common::batch_with_kinds(&table, &rows))
                        .await?;
                    let messages = w.prepare_commit().await?;
                    table
                        .new_commit("w")
                        .commit(messages, identifier, None)
                        .await
                }
                .await;
                let _ = w.close().await;
                written
            }
            .await;
            match result {
                Ok(_) => {
                    acked += 1;
                    model = next;
                }
                Err(_) => {
                    failed += 1;
                    // Ambiguous: the snapshots decide whether it landed.
                    let state = clean(&inner, &id).await.last_committed("w").await.unwrap();
                    if state.identifier == Some(identifier) {
                        model = next;
                    }
                }
            }
        } else if pick < 65 {
            op = "compact";
            let _ = table.compact(draw(2) == 0, vec![]).await;
        } else if pick < 73 {
            op = "expire";
            let _ = table.expire_snapshots(None).await;
        } else if pick < 78 {
            op = "orphans";
            let _ = table.remove_orphan_files(i64::MAX, false).await;
        } else if pick < 84 {
            op = "tag";
            let name = format!("t{step}");
            let landed = table.create_tag(&name, None).await.is_ok()
                || clean(&inner, &id)
                    .await
                    .list_tags()
                    .await
                    .unwrap()
                    .iter()
                    .any(|(n, _)| n == &name);
            if landed {
                // The tag names the latest snapshot, which holds the model (reads are checked).
                tags.insert(name, model.clone());
            }
        } else if pick < 88 {
            op = "delete tag";
            if let Some(name) = tags.keys().next().cloned() {
                // Refused or not, the tag is gone when the clean listing lacks it.
                let deleted = table.delete_tag(&name).await.is_ok()
                    || !clean(&inner, &id)
                        .await
                        .list_tags()
                        .await
                        .unwrap()
                        .iter()
                        .any(|(n, _)| n == &name);
                if deleted {
                    tags.remove(&name);
                }
            }
        } else if pick < 92 {
            op = "rollback";
            if let Some((name, state)) = tags.iter().last().map(|(n, s)| (n.clone(), s.clone())) {
                if table
                    .rollback_to(RollbackTarget::Tag(name.clone()))
                    .await
                    .is_err()
                {
                    // An interrupted rollback may stop at a snapshot between the two states (it
                    // removes the newest first, each removal leaving a committed state); what was
                    // left must read, and the operator's rerun finishes it.
                    chaos.on.store(false, Ordering::SeqCst);
                    let t = clean(&inner, &id).await;
                    let sm = t.snapshot_manager();
                    let latest = sm.latest_id().await.unwrap();
                    if let Some(l) = latest {
                        t.read_all(SnapshotSelector::Id(l), None).await.unwrap();
                    }
                    t.rollback_to(RollbackTarget::Tag(name)).await.unwrap();
                    chaos.on.store(true, Ordering::SeqCst);
                }
                model = state;
            }
        } else if pick < 96 {
            op = "consumer";
            if let Ok(Some(latest)) = table.snapshot_manager().latest_id().await {
                let _ = table.consumer_manager().record("c", latest).await;
            }
        } else {
            op = "changelog";
            if let Ok(Some(latest)) = table.snapshot_manager().latest_id().await {
                let from = table
                    .snapshot_manager()
                    .earliest_id()
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or(latest);
                let _ = tidelake::table::changes::collect_range(table.clone(), None, from, latest)
                    .await;
            }
        }
        // A read through the faulty store fails or returns the truth, never something else.
        if let Ok(t) = catalog.load_table(&id).await {
            if let Ok(batches) = t.read_all(SnapshotSelector::Latest, None).await {
                let got = crate::common::sorted(crate::common::rows(&batches));
                assert_eq!(
                    got,
                    model_rows(&model),
                    "step {step} ({op}): a read under faults returned wrong rows"
                );
            }
        }
        chaos.on.store(false, Ordering::SeqCst);
        check(&inner, &id, &model, step, op).await;
        chaos.on.store(true, Ordering::SeqCst);
    }
    chaos.on.store(false, Ordering::SeqCst);
    // What the faults left behind is orphans only: removing them changes nothing.
    let t = clean(&inner, &id).await;
    t.remove_orphan_files(i64::MAX, false).await.unwrap();
    check(&inner, &id, &model, steps, "final orphan removal").await;
    (chaos.injected.load(Ordering::SeqCst), acked, failed)
}

#[tokio::test]
async fn faults_on_every_request_lose_no_acknowledged_commit_and_break_no_snapshot() {
    let steps: usize = std::env::var("TIDELAKE_CHAOS_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    for seed in [1u64, 2, 3] {
        let (injected, acked, failed) = run_chaos(seed, steps).await;
        eprintln!("chaos seed {seed}: {steps} steps, {injected} faults injected, {acked} commits acknowledged, {failed} failed");
        assert!(
            injected > 0 && acked > 0 && failed > 0,
            "seed {seed}: the faults did not bite"
        );
    }
}
