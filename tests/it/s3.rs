//! Warehouses on S3, against moto's S3 server (scripts/test.sh starts it and exports its address
//! as `TIDELAKE_TEST_S3_ENDPOINT`): tables written and read back, several independent
//! committers (as several servers would be) on one table with contiguous snapshot ids, no
//! listing on the hot path, directory markers ignored, and the start-up probe's one-line errors.

use std::collections::BTreeSet;
use std::io::{Read, Write};

use serde_json::json;
use tidelake::io::{FileIo, StorageOptions};
use tidelake::table::{CommitOutcome, SnapshotSelector, WriteOptions};
use tidelake::{Catalog, Identifier, TableDefinition};

use crate::common::{batch, rows};

/// moto's address; the tests need it (they are not skipped without it).
pub(crate) fn endpoint() -> String {
    std::env::var("TIDELAKE_TEST_S3_ENDPOINT").expect(
        "TIDELAKE_TEST_S3_ENDPOINT is not set: run the tests through scripts/test.sh, which starts moto's S3 server",
    )
}

pub(crate) fn storage() -> StorageOptions {
    StorageOptions {
        endpoint: Some(endpoint()),
        access_key_id: Some("testing".into()),
        secret_access_key: Some("testing".into()),
        allow_http: Some(true),
        max_retries: Some(1),
        retry_timeout_seconds: Some(5),
        ..Default::default()
    }
}

/// Sends one unsigned HTTP/1.1 request to moto (it does not check signatures) and returns the
/// status code.
fn http(method: &str, path: &str, body: &[u8]) -> u16 {
    let url = url::Url::parse(&endpoint()).unwrap();
    let addr = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// A new bucket with a unique name.
pub(crate) fn bucket() -> String {
    let name = format!("it-{}", uuid::Uuid::new_v4().simple());
    assert_eq!(
        http("PUT", &format!("/{name}"), b""),
        200,
        "create bucket {name}"
    );
    name
}

fn definition(columns: &str, pk: &[&str], options: &[(&str, &str)]) -> TableDefinition {
    TableDefinition {
        columns: TableDefinition::parse_columns(columns).unwrap(),
        primary_keys: pk.iter().map(|s| s.to_string()).collect(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

/// A fresh bucket with table `db.t` (`columns`, primary key `pk`, `options`) on `s3://B/wh`,
/// and `commits` commits of `rows(commit)` each.
async fn seeded(
    columns: &str,
    pk: &[&str],
    options: &[(&str, &str)],
    commits: i64,
    rows_of: impl Fn(i64) -> Vec<serde_json::Value>,
) -> (String, Catalog, tidelake::table::Table) {
    let uri = format!("s3://{}/wh", bucket());
    let catalog = Catalog::open_with(&uri, &storage()).unwrap();
    catalog.create_database("db", false).await.unwrap();
    let table = catalog
        .create_table(
            &Identifier::new("db", "t"),
            &definition(columns, pk, options),
            false,
        )
        .await
        .unwrap();
    for c in 0..commits {
        table
            .write_batches(&[batch(&table, &rows_of(c))], WriteOptions::default(), None)
            .await
            .unwrap();
    }
    (uri, catalog, table)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_on_s3_is_written_read_and_listed_without_directory_markers() {
    let uri = format!("s3://{}/lake/wh", bucket());
    let catalog = Catalog::open_with(&uri, &storage()).unwrap();
    assert_eq!(catalog.io().uri(), uri);
    catalog.io().probe(true).await.unwrap();
    catalog.create_database("db", false).await.unwrap();
    let table = catalog
        .create_table(
            &Identifier::new("db", "t"),
            &definition("id BIGINT NOT NULL, v STRING", &["id"], &[("bucket", "2")]),
            false,
        )
        .await
        .unwrap();
    for round in 0..3 {
        let rows_in: Vec<_> = (0..10)
            .map(|i| json!({"id": i, "v": format!("r{round}")}))
            .collect();
        let out = table
            .write_batches(&[batch(&table, &rows_in)], WriteOptions::default(), None)
            .await
            .unwrap();
        assert_eq!(out, CommitOutcome::Committed(round + 1));
    }
    // A second catalog (another server) sees the same table and the last values.
    let other = Catalog::open_with(&uri, &storage()).unwrap();
    let t2 = other.load_table(&Identifier::new("db", "t")).await.unwrap();
    let got = rows(&t2.read_all(SnapshotSelector::Latest, None).await.unwrap());
    assert_eq!(got.len(), 10);
    assert!(got.iter().all(|r| r[1] == json!("r2")), "{got:?}");
    // Zero-byte directory markers (pyarrow leaves them) are neither tables nor files.
    let b = uri.trim_start_matches("s3://").split('/').next().unwrap();
    assert_eq!(http("PUT", &format!("/{b}/lake/wh/db.db/"), b""), 200);
    assert_eq!(
        http("PUT", &format!("/{b}/lake/wh/db.db/t/snapshot/"), b""),
        200
    );
    assert_eq!(
        other.list_tables("db").await.unwrap(),
        vec!["t".to_string()]
    );
    let names: BTreeSet<String> = other
        .io()
        .list("db.db/t/snapshot")
        .await
        .unwrap()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    for want in ["LATEST", "snapshot-1", "snapshot-2", "snapshot-3"] {
        assert!(names.contains(want), "{names:?}");
    }
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("snapshot-") || n.ends_with("EST")),
        "a marker listed as a file: {names:?}"
    );
    assert_eq!(
        t2.snapshot_manager().list_ids().await.unwrap(),
        vec![1, 2, 3]
    );
}

/// Four committers, each with its own connection pool to the store (as four servers would
/// have), append to one table at once: every commit lands once, ids are contiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn committers_with_their_own_clients_land_contiguous_snapshots() {
    const COMMITTERS: i64 = 4;
    const EACH: i64 = 3;
    let uri = format!("s3://{}/wh", bucket());
    let first = Catalog::open_with(&uri, &storage()).unwrap();
    first.create_database("db", false).await.unwrap();
    first
        .create_table(
            &Identifier::new("db", "t"),
            &definition(
                "id BIGINT NOT NULL, who BIGINT",
                &[],
                &[("commit.max-retries", "100"), ("write-only", "true")],
            ),
            false,
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for c in 0..COMMITTERS {
        let uri = uri.clone();
        tasks.push(tokio::spawn(async move {
            let catalog = Catalog::open_with(&uri, &storage()).unwrap();
            let table = catalog
                .load_table(&Identifier::new("db", "t"))
                .await
                .unwrap();
            let mut acked = Vec::new();
            for i in 0..EACH {
                let id = c * 100 + i;
                let out = table
                    .write_batches(
                        &[batch(&table, &[json!({"id": id, "who": c})])],
                        WriteOptions::default(),
                        None,
                    )
                    .await
                    .unwrap();
                let CommitOutcome::Committed(sid) = out else {
                    panic!("{out:?}")
                };
                acked.push((sid, id));
            }
            acked
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    let table = first.load_table(&Identifier::new("db", "t")).await.unwrap();
    let n = COMMITTERS * EACH;
    assert_eq!(
        table.snapshot_manager().list_ids().await.unwrap(),
        (1..=n).collect::<Vec<_>>()
    );
    let sids: BTreeSet<i64> = acked.iter().map(|(s, _)| *s).collect();
    assert_eq!(sids.len() as i64, n, "each commit its own snapshot");
    assert_eq!(table.snapshot_manager().latest_id().await.unwrap(), Some(n));
    let got: BTreeSet<i64> = rows(
        &table
            .read_all(SnapshotSelector::Latest, None)
            .await
            .unwrap(),
    )
    .iter()
    .map(|r| r[0].as_i64().unwrap())
    .collect();
    assert_eq!(got, acked.iter().map(|(_, id)| *id).collect());
}

#[tokio::test]
async fn the_latest_snapshot_is_found_by_probing_past_a_stale_hint() {
    let (_, catalog, table) = seeded("id BIGINT NOT NULL", &[], &[], 4, |i| {
        vec![json!({"id": i})]
    })
    .await;
    let sm = table.snapshot_manager();
    // A crash (or another server) left the hint two commits behind.
    catalog
        .io()
        .write("db.db/t/snapshot/LATEST", bytes::Bytes::from("2"))
        .await
        .unwrap();
    assert_eq!(sm.latest_id().await.unwrap(), Some(4));
    // A hint naming a snapshot that is gone (all of them rolled back past it) falls back to
    // the listing.
    catalog
        .io()
        .write("db.db/t/snapshot/LATEST", bytes::Bytes::from("9"))
        .await
        .unwrap();
    assert_eq!(sm.latest_id().await.unwrap(), Some(4));
}

#[tokio::test]
async fn an_unusable_warehouse_is_one_error_naming_it() {
    // A bucket that does not exist.
    let uri = "s3://no-such-bucket-here/wh";
    let io = FileIo::open_with(uri, &storage()).unwrap();
    let e = io.probe(true).await.unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "warehouse {uri} is not usable: the bucket does not exist (S3 said NoSuchBucket"
        )),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    // An endpoint nobody listens on: refused quickly, not a hang.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let options = StorageOptions {
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        ..storage()
    };
    let started = std::time::Instant::now();
    let io = FileIo::open_with("s3://lake/wh", &options).unwrap();
    let e = io.probe(false).await.unwrap_err().to_string();
    assert!(
        e.contains("s3://lake/wh") && e.contains("listing it failed"),
        "{e}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    // Not a bucket name at all.
    let e = FileIo::open_with("s3://Bad_Bucket/x", &storage())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an S3 bucket name"), "{e}");
}

/// Two servers start a full compaction of the same bucket at once: at most one COMPACT snapshot
/// lands on each base, the loser's output files are removed, and the rows are unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compactions_from_two_servers_conflict_cleanly() {
    let (uri, first, _) = seeded(
        "id BIGINT NOT NULL, v STRING",
        &["id"],
        &[("bucket", "1"), ("write-only", "true")],
        4,
        |round| {
            (0..20)
                .map(|i| json!({"id": i, "v": format!("r{round}")}))
                .collect()
        },
    )
    .await;
    let compactors: Vec<_> = (0..2)
        .map(|_| {
            let uri = uri.clone();
            tokio::spawn(async move {
                let catalog = Catalog::open_with(&uri, &storage()).unwrap();
                let t = catalog
                    .load_table(&Identifier::new("db", "t"))
                    .await
                    .unwrap();
                t.compact(true, vec![]).await
            })
        })
        .collect();
    let mut won = 0;
    for c in compactors {
        match c.await.unwrap() {
            Ok(report) => won += usize::from(report.snapshot_id.is_some()),
            Err(e) => assert_eq!(e.kind(), tidelake::error::ErrorKind::Conflict, "{e}"),
        }
    }
    assert!(won >= 1, "one compaction lands");
    let table = first.load_table(&Identifier::new("db", "t")).await.unwrap();
    let got = rows(
        &table
            .read_all(SnapshotSelector::Latest, None)
            .await
            .unwrap(),
    );
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|r| r[1] == json!("r3")), "{got:?}");
    // Every data file in the bucket is referenced by a snapshot: the loser left nothing behind.
    let mut referenced = BTreeSet::new();
    for id in table.snapshot_manager().list_ids().await.unwrap() {
        let plan = table
            .new_scan()
            .snapshot(SnapshotSelector::Id(id))
            .all_levels()
            .plan()
            .await
            .unwrap();
        for s in plan.splits {
            referenced.extend(s.files.into_iter().map(|f| f.file_name));
        }
    }
    let present: BTreeSet<String> = first
        .io()
        .list("db.db/t/bucket-0")
        .await
        .unwrap()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    assert_eq!(present, referenced);
}

/// What loading a table and planning a read of its latest snapshot costs in object-store
/// requests, `rounds` times over, on a fresh handle with the given metadata cache.
async fn planning_requests(uri: &str, cache_mb: u64, rounds: u64) -> (u64, u64) {
    let options = StorageOptions {
        metadata_cache_mb: Some(cache_mb),
        ..storage()
    };
    let catalog = Catalog::open_with(uri, &options).unwrap();
    let plan = || async {
        let t = catalog
            .load_table(&Identifier::new("db", "t"))
            .await
            .unwrap();
        t.new_scan().plan().await.unwrap()
    };
    let first = catalog.io().requests();
    assert!(!plan().await.splits.is_empty());
    let warm = catalog.io().requests();
    for _ in 0..rounds {
        plan().await;
    }
    ((warm - first), (catalog.io().requests() - warm) / rounds)
}

/// A repeated query re-reads no metadata file: with the cache, planning again costs the
/// `LATEST` hint and HEAD probes only, and never a listing.
#[tokio::test]
async fn warm_planning_reads_no_metadata_file_again() {
    let (uri, _, _) = seeded(
        "id BIGINT NOT NULL, v STRING",
        &["id"],
        &[("bucket", "2")],
        3,
        |i| vec![json!({"id": i, "v": "x"})],
    )
    .await;
    let (cold, cached) = planning_requests(&uri, 64, 5).await;
    let (_, uncached) = planning_requests(&uri, 0, 5).await;
    // Schema: HEAD of the known id and of the next; snapshot: GET LATEST, HEAD of the next id
    // and of the hinted one. Nothing else.
    assert_eq!(
        cached, 5,
        "warm planning requests (cold: {cold}, uncached: {uncached})"
    );
    // Without the cache, the schema, the snapshot, both manifest lists and the manifests are
    // read every time.
    assert!(
        uncached >= cached + 4,
        "cached {cached}, uncached {uncached}"
    );
}

/// With `data_cache_dir`, a second read of the same files fetches no data file from the store;
/// without it, every read does.
#[tokio::test]
async fn the_disk_cache_serves_data_files_again() {
    let (uri, _, _) = seeded("id BIGINT NOT NULL, v STRING", &[], &[], 4, |i| {
        vec![json!({"id": i, "v": "x"})]
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let reads = |cache: Option<String>| {
        let uri = uri.clone();
        async move {
            let options = StorageOptions {
                data_cache_dir: cache,
                ..storage()
            };
            let c = Catalog::open_with(&uri, &options).unwrap();
            let t = c.load_table(&Identifier::new("db", "t")).await.unwrap();
            let mut costs = Vec::new();
            for _ in 0..2 {
                let before = c.io().requests();
                let got = rows(&t.read_all(SnapshotSelector::Latest, None).await.unwrap());
                assert_eq!(got.len(), 4);
                costs.push(c.io().requests() - before);
            }
            costs
        }
    };
    let uncached = reads(None).await;
    let cached = reads(Some(dir.path().display().to_string())).await;
    // The first reads cost the same (metadata and the four data files); warm, the metadata is
    // cached either way, and the four data files are fetched again only without the disk cache.
    assert_eq!(cached[0], uncached[0], "{cached:?} {uncached:?}");
    assert_eq!(uncached[1], cached[1] + 4, "{cached:?} {uncached:?}");
    let own = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(std::fs::read_dir(own).unwrap().count(), 4);
}
