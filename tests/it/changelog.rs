//! Changelog producers against the table itself: for each producer and merge engine Paimon
//! supports, random upserts and deletes (with spills, long-lived writers and separate compaction
//! jobs), then a bounded subscription from snapshot 1 folded into a map must equal a batch read of
//! the same snapshot. Exact producers are also checked as a state machine (Paimon's
//! `validateFullChangelog`): `+I` only for absent keys, `-U` immediately followed by `+U` of the
//! same key, `-U`/`-D` carrying the current value.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::Value;
use tidelake::table::changes::{ChangeEvent, StartMode, StreamOptions, Subscription};
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::Table;

use crate::common::{rows, Scratch};

/// A small deterministic generator (the cases must be reproducible from their seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Engine {
    Deduplicate,
    PartialUpdate,
    Aggregation,
    FirstRow,
}

fn options(producer: &str, engine: Engine) -> Vec<(&'static str, String)> {
    let mut o = vec![
        ("bucket", "2".to_string()),
        ("changelog-producer", producer.to_string()),
        // Small buffers: several level-0 files per commit, compactions inside a commit window.
        ("write-buffer-rows", "7".to_string()),
    ];
    match engine {
        Engine::Deduplicate => {}
        Engine::PartialUpdate => {
            o.push(("merge-engine", "partial-update".into()));
            o.push(("partial-update.remove-record-on-delete", "true".into()));
        }
        Engine::Aggregation => {
            o.push(("merge-engine", "aggregation".into()));
            o.push(("fields.n.aggregate-function", "sum".into()));
            o.push(("fields.s.aggregate-function", "last_value".into()));
            o.push(("aggregation.remove-record-on-delete", "true".into()));
        }
        Engine::FirstRow => o.push(("merge-engine", "first-row".into())),
    }
    o
}

type Row = (i64, Option<i64>, Option<String>);

fn batch(rows: &[(&str, Row)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("n", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("op", DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1 .0))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1 .1))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1 .2.clone()))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        ],
    )
    .unwrap()
}

/// One commit's worth of changes. Deduplicate tables get a complete changelog (what the `input`
/// producer expects): updates as `-U` old / `+U` new, deletes with the old row.
fn changes(
    rng: &mut Rng,
    engine: Engine,
    current: &mut BTreeMap<i64, Row>,
) -> Vec<(&'static str, Row)> {
    let mut out = Vec::new();
    for _ in 0..1 + rng.next(12) {
        let id = rng.next(20) as i64;
        let n = (rng.next(5) > 0).then(|| rng.next(100) as i64);
        let s = (rng.next(5) > 0).then(|| ["a", "b", "c"][rng.next(3) as usize].to_string());
        let delete = engine != Engine::FirstRow && rng.next(4) == 0;
        match (delete, current.get(&id).cloned()) {
            (true, Some(old)) => {
                current.remove(&id);
                out.push(("-D", old));
            }
            (true, None) => {}
            (false, Some(old)) => {
                let new = (id, n, s);
                if engine == Engine::Deduplicate {
                    out.push(("-U", old));
                    out.push(("+U", new.clone()));
                } else {
                    out.push(("+I", new.clone()));
                }
                current.insert(id, new);
            }
            (false, None) => {
                let new = (id, n, s);
                out.push(("+I", new.clone()));
                current.insert(id, new);
            }
        }
    }
    out
}

/// Commits one `+I` row with key `id` as a batch job.
async fn insert_one(table: &Table, id: i64) {
    table
        .write_batches(
            &[batch(&[("+I", (id, Some(id), None))])],
            WriteOptions {
                row_kind_column: Some("op".into()),
            },
            None,
        )
        .await
        .unwrap();
}

/// Writes random commits: batch jobs, a long-lived writer with several commits, separate
/// compaction jobs.
async fn write_history(table: &Table, engine: Engine, seed: u64) {
    let mut rng = Rng(seed);
    let mut current = BTreeMap::new();
    let opts = || WriteOptions {
        row_kind_column: Some("op".into()),
    };
    for round in 0..12 {
        match rng.next(4) {
            0 => {
                // A long-lived writer: several commits with growing identifiers.
                let mut w = table.new_write(opts()).unwrap();
                let commit = table.new_commit(format!("writer-{seed}-{round}"));
                for ident in 0..3 {
                    let c = changes(&mut rng, engine, &mut current);
                    if !c.is_empty() {
                        w.write(&batch(&c)).await.unwrap();
                    }
                    let messages = w.prepare_commit().await.unwrap();
                    commit.commit(messages, ident, None).await.unwrap();
                }
                w.close().await.unwrap();
            }
            1 => {
                table.compact(rng.next(2) == 0, vec![]).await.unwrap();
            }
            _ => {
                let c = changes(&mut rng, engine, &mut current);
                if !c.is_empty() {
                    table
                        .write_batches(&[batch(&c)], opts(), None)
                        .await
                        .unwrap();
                }
            }
        }
    }
}

/// Reads every change from snapshot 1 to the latest and folds it, checking the state machine when
/// `exact`. Returns the folded rows (sorted by key) and the number of change rows per kind.
async fn fold_changelog(table: &Table, exact: bool) -> (Vec<Vec<Value>>, BTreeMap<String, usize>) {
    let latest = table.snapshot_manager().latest_id().await.unwrap().unwrap();
    let opts = StreamOptions {
        start: StartMode::FromSnapshot(1),
        end_snapshot: Some(latest),
        ..Default::default()
    };
    let mut sub = Subscription::start(table.clone(), opts, Duration::from_secs(60))
        .await
        .unwrap();
    let mut state: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut pending_before: Option<String> = None;
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    let mut completed = Vec::new();
    while let Some(event) = sub.next().await {
        match event.unwrap() {
            ChangeEvent::Rows { snapshot_id, batch } => {
                for row in rows(&[batch]) {
                    let kind = row[0].as_str().unwrap().to_string();
                    *count.entry(kind.clone()).or_default() += 1;
                    let key = row[1].to_string();
                    let value = row[1..].to_vec();
                    let ctx = format!("snapshot {snapshot_id}, {kind} {value:?}");
                    if let Some(k) = pending_before.take() {
                        assert!(
                            exact && kind == "+U" && k == key,
                            "-U not followed by its +U: {ctx}"
                        );
                    }
                    match kind.as_str() {
                        "+I" => {
                            if exact {
                                assert!(!state.contains_key(&key), "+I of a present key: {ctx}");
                            }
                            state.insert(key, value);
                        }
                        "+U" => {
                            state.insert(key, value);
                        }
                        "-U" | "-D" => {
                            if exact {
                                assert_eq!(
                                    state.get(&key),
                                    Some(&value),
                                    "{kind} must carry the current value: {ctx}"
                                );
                            }
                            if kind == "-U" {
                                assert!(exact, "a none-producer stream has no -U: {ctx}");
                                pending_before = Some(key.clone());
                            }
                            state.remove(&key);
                        }
                        other => panic!("unknown row kind {other}"),
                    }
                }
            }
            ChangeEvent::Completed { snapshot_id } => completed.push(snapshot_id),
            ChangeEvent::Idle { .. } => {}
            ChangeEvent::SchemaChanged { .. } => panic!("no ALTER in this history"),
        }
    }
    assert!(pending_before.is_none(), "stream ended after a -U");
    assert_eq!(
        completed,
        (1..=latest).collect::<Vec<_>>(),
        "every snapshot completes once, in order"
    );
    let mut folded: Vec<Vec<Value>> = state.into_values().collect();
    folded.sort_by_key(|r| r[0].as_i64());
    (folded, count)
}

async fn check(producer: &str, engine: Engine) {
    for seed in [1u64, 7, 42] {
        let s = Scratch::new();
        let opts = options(producer, engine);
        let opts: Vec<(&str, &str)> = opts.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let table = s
            .create(
                "db.t",
                "id BIGINT NOT NULL, n BIGINT, s STRING",
                &["id"],
                &[],
                &opts,
            )
            .await;
        write_history(&table, engine, seed).await;
        let exact = producer != "none";
        let (folded, changes) = fold_changelog(&table, exact).await;
        let mut expected = rows(
            &table
                .read_all(SnapshotSelector::Latest, None)
                .await
                .unwrap(),
        );
        expected.sort_by_key(|r| r[0].as_i64());
        assert_eq!(
            folded, expected,
            "{producer}/{engine:?} seed {seed}: the folded changelog ({changes:?}) differs from the table"
        );
        let n = |k: &str| changes.get(k).copied().unwrap_or(0);
        assert!(
            n("+I") > 0,
            "{producer}/{engine:?} seed {seed}: no inserts: {changes:?}"
        );
        if engine != Engine::FirstRow {
            assert!(
                n("-D") > 0,
                "{producer}/{engine:?} seed {seed}: no deletes: {changes:?}"
            );
            if exact {
                assert!(
                    n("-U") > 0,
                    "{producer}/{engine:?} seed {seed}: no updates: {changes:?}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn none_producer_streams_merged_deltas() {
    check("none", Engine::Deduplicate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_producer_keeps_input_changes() {
    check("input", Engine::Deduplicate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_producer_every_engine() {
    for engine in [
        Engine::Deduplicate,
        Engine::PartialUpdate,
        Engine::Aggregation,
        Engine::FirstRow,
    ] {
        check("lookup", engine).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_compaction_producer_every_engine() {
    for engine in [
        Engine::Deduplicate,
        Engine::PartialUpdate,
        Engine::Aggregation,
    ] {
        check("full-compaction", engine).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_tables_stream_appended_rows_in_order() {
    let s = Scratch::new();
    let table = s
        .create(
            "db.log",
            "id BIGINT NOT NULL, s STRING",
            &[],
            &[],
            &[("bucket", "-1")],
        )
        .await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
    ]));
    for c in 0..5i64 {
        let b = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(c * 10..c * 10 + 10)),
                Arc::new(StringArray::from_iter_values(
                    (0..10).map(|i| format!("r{i}")),
                )),
            ],
        )
        .unwrap();
        table
            .write_batches(&[b], WriteOptions::default(), None)
            .await
            .unwrap();
    }
    let opts = StreamOptions {
        start: StartMode::FromSnapshot(2),
        end_snapshot: Some(5),
        projection: Some(vec!["id".into()]),
        ..Default::default()
    };
    let mut sub = Subscription::start(table.clone(), opts, Duration::from_secs(60))
        .await
        .unwrap();
    let mut ids = Vec::new();
    while let Some(e) = sub.next().await {
        if let ChangeEvent::Rows { batch, .. } = e.unwrap() {
            assert_eq!(batch.num_columns(), 2);
            for r in rows(&[batch]) {
                assert_eq!(r[0], Value::from("+I"));
                ids.push(r[1].as_i64().unwrap());
            }
        }
    }
    assert_eq!(ids, (10..50).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_follows_new_commits_and_its_consumer_resumes() {
    let s = Scratch::new();
    let table = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, n BIGINT, s STRING",
            &["id"],
            &[],
            &[("bucket", "1"), ("changelog-producer", "input")],
        )
        .await;
    let write = |id: i64| insert_one(&table, id);
    write(0).await;
    let opts = StreamOptions {
        start: StartMode::Latest,
        consumer_id: Some("c1".into()),
        ..Default::default()
    };
    let mut sub = Subscription::start(table.clone(), opts.clone(), Duration::from_millis(100))
        .await
        .unwrap();
    // The start position, then (idle) a heartbeat: both name the last completed snapshot.
    for _ in 0..2 {
        match sub.next().await.unwrap().unwrap() {
            ChangeEvent::Idle { last_completed } => assert_eq!(last_completed, 1),
            other => panic!("expected a heartbeat, got {other:?}"),
        }
    }
    write(1).await;
    let mut got = Vec::new();
    while got.len() < 2 {
        match sub.next().await.unwrap().unwrap() {
            ChangeEvent::Rows { snapshot_id, batch } => {
                got.push((snapshot_id, rows(&[batch])[0][1].as_i64().unwrap()))
            }
            ChangeEvent::Completed { snapshot_id } => got.push((snapshot_id, -1)),
            ChangeEvent::Idle { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, vec![(2, 1), (2, -1)]);
    drop(sub);
    // Progress is recorded right after the snapshot was handed over.
    let path = format!("{}/db.db/t/consumer/consumer-c1", s.path());
    let mut next = Value::Null;
    for _ in 0..100 {
        if let Ok(text) = std::fs::read_to_string(&path) {
            next = serde_json::from_str::<Value>(&text).unwrap()["nextSnapshot"].clone();
            if next == 3 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(next, Value::from(3));
    // A new subscription with the same consumer resumes at snapshot 3, whatever its start mode.
    write(2).await;
    let mut sub = Subscription::start(table.clone(), opts, Duration::from_secs(60))
        .await
        .unwrap();
    // First the position (snapshot 2 done), then snapshot 3's rows.
    match sub.next().await.unwrap().unwrap() {
        ChangeEvent::Idle { last_completed } => assert_eq!(last_completed, 2),
        other => panic!("expected the start position, got {other:?}"),
    }
    match sub.next().await.unwrap().unwrap() {
        ChangeEvent::Rows { snapshot_id, batch } => {
            assert_eq!(snapshot_id, 3);
            assert_eq!(rows(&[batch])[0][1], Value::from(2));
        }
        other => panic!("expected snapshot 3's rows, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_start_names_the_earliest_snapshot() {
    let s = Scratch::new();
    let table = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, n BIGINT, s STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("changelog-producer", "input"),
                ("snapshot.num-retained.min", "1"),
                ("snapshot.num-retained.max", "2"),
            ],
        )
        .await;
    for id in 0..5 {
        insert_one(&table, id).await;
    }
    let opts = StreamOptions {
        start: StartMode::FromSnapshot(1),
        ..Default::default()
    };
    let err = Subscription::start(table.clone(), opts, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), tidelake::ErrorKind::OutOfRange);
    let sm = table.snapshot_manager();
    let earliest = sm.earliest_id().await.unwrap().unwrap();
    assert!(earliest > 1);
    assert!(
        err.to_string()
            .contains(&format!("earliest available snapshot is {earliest}")),
        "{err}"
    );
    // Expired snapshots took their changelog files with them.
    let mut retained = 0;
    for id in earliest..=sm.latest_id().await.unwrap().unwrap() {
        retained += sm
            .snapshot(id)
            .await
            .unwrap()
            .changelog_manifest_list
            .is_some() as usize;
    }
    let bucket = std::fs::read_dir(format!("{}/db.db/t/bucket-0", s.path())).unwrap();
    let changelogs = bucket
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("changelog-")
        })
        .count();
    assert_eq!(changelogs, retained);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_keeps_what_a_live_consumer_needs_and_drops_abandoned_ones() {
    // A manual clock: the consumer is abandoned by moving time, not by sleeping.
    let clock = tidelake::clock::Clock::manual(tidelake::clock::system_millis());
    let mut s = Scratch::new();
    s.catalog = s.catalog.clone().with_clock(clock.clone());
    let table = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, n BIGINT, s STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("write-only", "true"),
                ("snapshot.num-retained.min", "1"),
                ("snapshot.num-retained.max", "2"),
                ("consumer.expiration-time", "2s"),
            ],
        )
        .await;
    let write = |id: i64| {
        let table = table.clone();
        async move {
            insert_one(&table, id).await;
            table.expire_snapshots(None).await.unwrap();
        }
    };
    write(0).await;
    table.consumer_manager().record("slow", 1).await.unwrap();
    for id in 1..6 {
        write(id).await;
    }
    let sm = table.snapshot_manager();
    assert_eq!(
        sm.earliest_id().await.unwrap(),
        Some(1),
        "the consumer still needs snapshot 1"
    );
    // The consumer reads on: expiry follows it.
    table.consumer_manager().record("slow", 4).await.unwrap();
    write(6).await;
    assert_eq!(sm.earliest_id().await.unwrap(), Some(4));
    // Abandoned: its file is older than consumer.expiration-time, so it no longer holds snapshots.
    assert!(clock.advance(2200));
    write(7).await;
    assert_eq!(sm.earliest_id().await.unwrap(), Some(7));
    assert_eq!(
        table
            .consumer_manager()
            .next_snapshot("slow")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_holds_back_its_own_reading() {
    let s = Scratch::new();
    let table = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, n BIGINT, s STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("changelog-producer", "input"),
                ("write-only", "true"),
            ],
        )
        .await;
    for id in 0..20 {
        insert_one(&table, id).await;
    }
    let opts = StreamOptions {
        start: StartMode::FromSnapshot(1),
        consumer_id: Some("slow".into()),
        ..Default::default()
    };
    let mut sub = Subscription::start(table.clone(), opts, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(matches!(
        sub.next().await,
        Some(Ok(ChangeEvent::Idle { .. }))
    ));
    // The subscriber stops reading: the subscription reads at most a few events ahead.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let next = table
        .consumer_manager()
        .next_snapshot("slow")
        .await
        .unwrap()
        .unwrap_or(1);
    assert!(next <= 3, "read ahead to snapshot {next} without a reader");
    // Reading on delivers everything.
    let mut ids = Vec::new();
    while ids.len() < 20 {
        if let ChangeEvent::Rows { batch, .. } = sub.next().await.unwrap().unwrap() {
            ids.extend(rows(&[batch]).into_iter().map(|r| r[1].as_i64().unwrap()));
        }
    }
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_announces_a_schema_change_and_follows_its_columns_by_field_id() {
    use tidelake::schema::change::SchemaChange;
    let s = Scratch::new();
    let table = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, n BIGINT, s STRING",
            &["id"],
            &[],
            &[("bucket", "1"), ("changelog-producer", "input")],
        )
        .await;
    insert_one(&table, 1).await;
    let opts = StreamOptions {
        start: StartMode::Latest,
        projection: Some(vec!["id".into(), "n".into()]),
        ..Default::default()
    };
    let mut sub = Subscription::start(table.clone(), opts, Duration::from_secs(60))
        .await
        .unwrap();
    let mut next = async || sub.next().await.unwrap().unwrap();
    assert!(matches!(
        next().await,
        ChangeEvent::Idle { last_completed: 1 }
    ));
    insert_one(&table, 2).await;
    match next().await {
        ChangeEvent::Rows { snapshot_id, batch } => {
            assert_eq!(snapshot_id, 2);
            assert_eq!(
                rows(&[batch]),
                vec![vec![Value::from("+I"), 2.into(), 2.into()]]
            );
        }
        other => panic!("expected snapshot 2's rows, got {other:?}"),
    }
    assert!(matches!(
        next().await,
        ChangeEvent::Completed { snapshot_id: 2 }
    ));
    // Rename the projected column and add one: the projection follows `n` by its field id.
    let id = tidelake::Identifier::parse("db.t").unwrap();
    let changes = [
        SchemaChange::RenameColumn {
            name: "n".into(),
            new_name: "m".into(),
        },
        SchemaChange::AddColumn {
            name: "x".into(),
            data_type: "INT".parse().unwrap(),
            comment: None,
            position: None,
        },
    ];
    let altered = s.catalog.alter_table(&id, &changes).await.unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("op", DataType::Utf8, false),
        Field::new("id", DataType::Int64, false),
        Field::new("m", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("x", DataType::Int32, true),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["+I"])),
            Arc::new(Int64Array::from(vec![3])),
            Arc::new(Int64Array::from(vec![30])),
            Arc::new(StringArray::from(vec![None::<&str>])),
            Arc::new(arrow::array::Int32Array::from(vec![7])),
        ],
    )
    .unwrap();
    altered
        .write_batches(
            &[b],
            WriteOptions {
                row_kind_column: Some("op".into()),
            },
            None,
        )
        .await
        .unwrap();
    match next().await {
        ChangeEvent::SchemaChanged {
            snapshot_id,
            schema,
        } => {
            assert_eq!(snapshot_id, 3);
            let names: Vec<_> = schema.fields().iter().map(|f| f.name().clone()).collect();
            assert_eq!(names, ["_row_kind", "id", "m"]);
        }
        other => panic!("expected the schema change, got {other:?}"),
    }
    match next().await {
        ChangeEvent::Rows { snapshot_id, batch } => {
            assert_eq!(snapshot_id, 3);
            assert_eq!(batch.schema().field(2).name(), "m");
            assert_eq!(
                rows(&[batch]),
                vec![vec![Value::from("+I"), 3.into(), 30.into()]]
            );
        }
        other => panic!("expected snapshot 3's rows, got {other:?}"),
    }
    // A subscription opened after the change still sends each snapshot in the schema it was
    // committed with, and announces the change on the way.
    let opts = StreamOptions {
        start: StartMode::FromSnapshot(2),
        end_snapshot: Some(3),
        ..Default::default()
    };
    let mut sub = Subscription::start(altered, opts, Duration::from_secs(60))
        .await
        .unwrap();
    let names = |s: &arrow::datatypes::SchemaRef| -> Vec<String> {
        s.fields().iter().map(|f| f.name().clone()).collect()
    };
    assert_eq!(names(&sub.schema()), ["_row_kind", "id", "n", "s"]);
    let mut got = Vec::new();
    while let Some(e) = sub.next().await {
        match e.unwrap() {
            ChangeEvent::Rows { batch, .. } => got.extend(rows(&[batch])),
            ChangeEvent::SchemaChanged {
                snapshot_id,
                schema,
            } => got.push(vec![snapshot_id.into(), names(&schema).join(" ").into()]),
            _ => {}
        }
    }
    assert_eq!(
        got,
        vec![
            vec![Value::from("+I"), 2.into(), 2.into(), Value::Null],
            vec![3.into(), "_row_kind id m s x".into()],
            vec![
                Value::from("+I"),
                3.into(),
                30.into(),
                Value::Null,
                7.into()
            ],
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoupled_changelogs_outlive_snapshots_and_expire_on_their_own() {
    use tidelake::error::ErrorKind;
    use tidelake::table::maintenance::{ChangelogExpiry, ExpireChangelogs};
    use tidelake::table::progress::Operation;
    for producer in ["input", "none"] {
        let s = Scratch::new();
        let table = s
            .create(
                "db.t",
                "id BIGINT NOT NULL, n BIGINT, s STRING",
                &["id"],
                &[],
                &[
                    ("bucket", "1"),
                    ("changelog-producer", producer),
                    ("num-sorted-run.compaction-trigger", "100"),
                    ("snapshot.num-retained.min", "1"),
                    ("snapshot.num-retained.max", "2"),
                    ("changelog.num-retained.max", "100"),
                ],
            )
            .await;
        assert!(table.changelogs_decoupled().unwrap());
        for id in 1..=6 {
            insert_one(&table, id).await;
        }
        // Snapshots 5 and 6 remain; 1..4 live on as changelogs.
        let sm = table.snapshot_manager();
        assert_eq!(sm.list_ids().await.unwrap(), vec![5, 6], "{producer}");
        let cm = table.changelog_manager();
        assert_eq!(cm.list_ids().await.unwrap(), vec![1, 2, 3, 4], "{producer}");
        let read_from = |from: i64| {
            let table = table.clone();
            async move {
                let opts = StreamOptions {
                    start: StartMode::FromSnapshot(from),
                    end_snapshot: Some(6),
                    ..Default::default()
                };
                let mut sub = Subscription::start(table, opts, Duration::from_secs(60)).await?;
                let mut ids = Vec::new();
                while let Some(e) = sub.next().await {
                    if let ChangeEvent::Rows { batch, .. } = e? {
                        for r in rows(&[batch]) {
                            assert_eq!(r[0], Value::from("+I"));
                            ids.push(r[1].as_i64().unwrap());
                        }
                    }
                }
                Ok::<_, tidelake::Error>(ids)
            }
        };
        assert_eq!(read_from(1).await.unwrap(), (1..=6).collect::<Vec<_>>());
        // Everything kept is referenced: no orphans.
        let orphans = table.remove_orphan_files(i64::MAX, true).await.unwrap();
        assert_eq!(orphans.files, Vec::<String>::new(), "{producer}");

        // Keep the changelogs of the last 4 snapshot ids (3..6): 1 and 2 go.
        let op = Operation::new();
        let r = ExpireChangelogs {
            retain_max: Some(4),
            ..Default::default()
        }
        .expiry()
        .unwrap();
        let report = table.expire_changelogs_with(r, &op).await.unwrap();
        assert_eq!(report.snapshots, vec![1, 2], "{producer}");
        let err = read_from(1).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OutOfRange);
        assert!(
            err.to_string()
                .contains("the earliest available snapshot is 3"),
            "{err}"
        );
        assert_eq!(read_from(3).await.unwrap(), vec![3, 4, 5, 6]);
        // Nothing asked: nothing expires (Paimon's procedure defaults).
        let none = ExpireChangelogs::default().expiry().unwrap();
        let report = table.expire_changelogs_with(none, &op).await.unwrap();
        assert!(report.snapshots.is_empty());
        // All of them; the table still reads whole and nothing is orphaned.
        let report = table
            .expire_changelogs_with(ChangelogExpiry::All, &op)
            .await
            .unwrap();
        assert_eq!(report.snapshots, vec![3, 4], "{producer}");
        assert!(cm.list_ids().await.unwrap().is_empty());
        let orphans = table.remove_orphan_files(i64::MAX, true).await.unwrap();
        assert_eq!(orphans.files, Vec::<String>::new(), "{producer}");
        let all = crate::common::read_rows(&table, None).await;
        assert_eq!(all.len(), 6, "{producer}");
        assert_eq!(read_from(5).await.unwrap(), vec![5, 6]);
    }
}

/// The changelog rows of snapshot `id` alone (schema announcements left out).
async fn snapshot_changes(table: &Table, id: i64) -> Vec<Vec<Value>> {
    let opts = StreamOptions {
        start: StartMode::FromSnapshot(id),
        end_snapshot: Some(id),
        ..Default::default()
    };
    let mut sub = Subscription::start(table.clone(), opts, Duration::from_secs(60))
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(e) = sub.next().await {
        if let ChangeEvent::Rows { batch, .. } = e.unwrap() {
            got.extend(rows(&[batch]));
        }
    }
    got
}

/// The `lookup` producer finds the before images in lookup files (`table::lookup`): a lookup file
/// is built once and kept for the next commits; after a column is added, the rows written before
/// are looked up in the new layout (the new column null in the before image).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_files_serve_later_commits_and_follow_a_schema_change() {
    use tidelake::schema::change::SchemaChange;
    let s = Scratch::new();
    let table = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, n BIGINT, s STRING",
            &["id"],
            &[],
            &[("bucket", "1"), ("changelog-producer", "lookup")],
        )
        .await;
    let lookups = |source: &'static str| {
        tidelake::metrics::metrics()
            .lookup_files
            .get_or_create(&[("source", source)])
            .get()
    };
    let write = |t: &Table, b: RecordBatch| {
        let t = t.clone();
        async move {
            t.write_batches(
                &[b],
                WriteOptions {
                    row_kind_column: Some("op".into()),
                },
                None,
            )
            .await
            .unwrap();
        }
    };
    // Snapshot 1 (and its compaction into the max level): 200 keys. The compaction keeps what it
    // wrote as the max level file's lookup file.
    let first: Vec<(&str, Row)> = (0..200)
        .map(|i| ("+I", (i, Some(i), Some("a".to_string()))))
        .collect();
    let written = lookups("written");
    write(&table, batch(&first)).await;
    assert!(
        lookups("written") > written,
        "a compaction into a level above 0 keeps its output's lookup file"
    );
    // Each later commit looks its keys up in the max level's file: kept, not decoded again.
    let kept = lookups("kept");
    write(&table, batch(&[("+I", (5, Some(50), Some("b".into())))])).await;
    assert!(
        lookups("kept") > kept,
        "the first lookup finds the file the compaction kept"
    );
    let kept = lookups("kept");
    write(&table, batch(&[("+I", (150, Some(1500), None))])).await;
    assert!(
        lookups("kept") > kept,
        "the next commit uses the kept lookup file"
    );
    let latest = table.snapshot_manager().latest_id().await.unwrap().unwrap();
    assert_eq!(
        snapshot_changes(&table, latest).await,
        vec![
            vec![Value::from("-U"), 150.into(), 150.into(), "a".into()],
            vec![Value::from("+U"), 150.into(), 1500.into(), Value::Null],
        ]
    );
    // A new column: old rows are looked up in the new layout.
    let id = tidelake::Identifier::parse("db.t").unwrap();
    let altered = s
        .catalog
        .alter_table(
            &id,
            &[SchemaChange::AddColumn {
                name: "x".into(),
                data_type: "INT".parse().unwrap(),
                comment: None,
                position: None,
            }],
        )
        .await
        .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("op", DataType::Utf8, false),
        Field::new("id", DataType::Int64, false),
        Field::new("n", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("x", DataType::Int32, true),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["+I", "+I"])),
            Arc::new(Int64Array::from(vec![7, 5])),
            Arc::new(Int64Array::from(vec![70, 500])),
            Arc::new(StringArray::from(vec![Some("c"), None])),
            Arc::new(arrow::array::Int32Array::from(vec![7, 5])),
        ],
    )
    .unwrap();
    write(&altered, b).await;
    let latest = altered
        .snapshot_manager()
        .latest_id()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        snapshot_changes(&altered, latest).await,
        vec![
            vec![
                Value::from("-U"),
                5.into(),
                50.into(),
                "b".into(),
                Value::Null
            ],
            vec![
                Value::from("+U"),
                5.into(),
                500.into(),
                Value::Null,
                5.into()
            ],
            vec![
                Value::from("-U"),
                7.into(),
                7.into(),
                "a".into(),
                Value::Null
            ],
            vec![Value::from("+U"), 7.into(), 70.into(), "c".into(), 7.into()],
        ]
    );
    let mut all = rows(
        &altered
            .read_all(SnapshotSelector::Latest, None)
            .await
            .unwrap(),
    );
    all.sort_by_key(|r| r[0].as_i64());
    assert_eq!(all.len(), 200);
    assert_eq!(all[5], vec![5.into(), 500.into(), Value::Null, 5.into()]);
}
