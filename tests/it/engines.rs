//! Property tests per merge engine: random writes (with retractions where the engine takes them),
//! buffer spills, writer restarts and commits, folded into a BTreeMap model with Paimon's
//! semantics; every snapshot read is compared with the model.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use proptest::prelude::*;
use serde_json::Value;
use tidelake::io::FileIo;
use tidelake::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::{Catalog, Identifier, TableDefinition};

use crate::common::{rows, sorted};

/// One input row: key, a (nullable) number, a (nullable) text, a flag, and whether it retracts.
#[derive(Debug, Clone)]
struct In {
    id: i64,
    n: Option<i64>,
    s: Option<String>,
    b: Option<bool>,
    kind: &'static str,
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<In>),
    Commit,
    Restart,
    /// Commit, then a full compaction by a separate job (the writer is recreated after it).
    FullCompact,
    /// Roll back to the n-th oldest snapshot still present (uncommitted writes are dropped).
    Rollback(usize),
}

fn input(kinds: &'static [&'static str]) -> impl Strategy<Value = In> {
    (
        0..8i64,
        prop::option::weighted(0.8, -50..50i64),
        prop::option::weighted(0.8, "[a-c]{0,2}"),
        prop::option::weighted(0.8, any::<bool>()),
        prop::sample::select(kinds),
    )
        .prop_map(|(id, n, s, b, kind)| In { id, n, s, b, kind })
}

fn ops(kinds: &'static [&'static str]) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            6 => prop::collection::vec(input(kinds), 1..6).prop_map(Op::Write),
            2 => Just(Op::Commit),
            1 => Just(Op::Restart),
            1 => Just(Op::FullCompact),
            1 => (0..3usize).prop_map(Op::Rollback),
        ],
        1..30,
    )
}

fn unique_keys_per_write(ops: Vec<Op>) -> Vec<Op> {
    ops.into_iter()
        .map(|op| match op {
            Op::Write(rows) => {
                let mut seen = std::collections::BTreeSet::new();
                Op::Write(rows.into_iter().filter(|r| seen.insert(r.id)).collect())
            }
            other => other,
        })
        .collect()
}

fn batch(rows: &[In]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("n", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("op", DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.n))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.s.clone()))),
            Arc::new(BooleanArray::from_iter(rows.iter().map(|r| r.b))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.kind))),
        ],
    )
    .unwrap()
}

/// The model: one entry per key, folded with the engine's rules. `count` is the number of records
/// merged into the entry (a lone retraction is dropped; merged ones produce a row).
#[derive(Debug, Clone, Default)]
struct Entry {
    n: Option<i64>,
    s: Option<String>,
    b: Option<bool>,
    count: usize,
    retract: bool,
    /// Aggregation: every record of the key, oldest first.
    records: Vec<In>,
}

type Model = BTreeMap<i64, Entry>;

#[derive(Debug, Clone, Copy)]
enum Engine {
    Deduplicate,
    PartialUpdate,
    /// n: sum, s: listagg (ignore-retract), b: bool_or (ignore-retract).
    Aggregation,
}

fn fold(engine: Engine, model: &mut Model, r: &In) {
    let retract = r.kind == "-D" || r.kind == "-U";
    match engine {
        Engine::Deduplicate => {
            model.insert(
                r.id,
                Entry {
                    n: r.n,
                    s: r.s.clone(),
                    b: r.b,
                    count: 1,
                    retract,
                    records: vec![],
                },
            );
        }
        Engine::PartialUpdate => {
            // remove-record-on-delete: -D takes the row's place (with its own values); -U is ignored.
            let e = model.entry(r.id).or_default();
            if r.kind == "-D" {
                *e = Entry {
                    n: r.n,
                    s: r.s.clone(),
                    b: r.b,
                    count: e.count + 1,
                    retract: true,
                    records: vec![],
                };
            } else {
                e.n = r.n.or(e.n);
                e.s = r.s.clone().or(e.s.take());
                e.b = r.b.or(e.b);
                e.count += 1;
                e.retract = false;
            }
        }
        Engine::Aggregation => {
            // A key's records are kept; the read folds them (see `aggregate`).
            model.entry(r.id).or_default().records.push(r.clone());
        }
    }
}

/// Paimon's aggregation of one key: a lone record is returned as it is; two or more are folded
/// into an empty accumulator (n: sum, s: listagg skipping blanks, b: bool_or; retractions only
/// touch the sum).
fn aggregate(records: &[In]) -> Entry {
    if let [r] = records {
        return Entry {
            n: r.n,
            s: r.s.clone(),
            b: r.b,
            count: 1,
            retract: r.kind.starts_with('-'),
            records: vec![],
        };
    }
    let mut e = Entry {
        count: records.len(),
        ..Default::default()
    };
    let blank = |x: &Option<String>| x.as_deref().is_none_or(|v| v.trim().is_empty());
    for r in records {
        if r.kind.starts_with('-') {
            e.n = match (e.n, r.n) {
                (None, x) => x.map(|v| -v),
                (a, None) => a,
                (Some(a), Some(b)) => Some(a - b),
            };
            continue;
        }
        e.n = match (e.n, r.n) {
            (None, x) => x,
            (a, None) => a,
            (Some(a), Some(b)) => Some(a + b),
        };
        if !blank(&r.s) {
            e.s = if blank(&e.s) {
                r.s.clone()
            } else {
                Some(format!(
                    "{},{}",
                    e.s.as_ref().unwrap(),
                    r.s.as_ref().unwrap()
                ))
            };
        }
        e.b = match (e.b, r.b) {
            (None, x) => x,
            (a, None) => a,
            (Some(a), Some(b)) => Some(a || b),
        };
    }
    e
}

/// Shapes a generated row like real change data, where Paimon's result does not depend on how
/// records happened to be grouped by spills and compactions: aggregation retracts only keys that
/// exist (a lone retraction is dropped by a compaction into the top level), and partial-update
/// deletes carry no values (a delete's values survive into a following insert in the same merge).
fn realistic(engine: Engine, model: &Model, mut r: In) -> In {
    match engine {
        Engine::Aggregation
            if r.kind.starts_with('-') && model.get(&r.id).is_none_or(|e| e.records.is_empty()) =>
        {
            r.kind = "+I";
        }
        Engine::PartialUpdate if r.kind == "-D" => {
            r.n = None;
            r.s = None;
            r.b = None;
        }
        _ => {}
    }
    r
}

fn expected(engine: Engine, model: &Model) -> Vec<Vec<Value>> {
    let folded: Model = match engine {
        Engine::Aggregation => model
            .iter()
            .map(|(k, e)| (*k, aggregate(&e.records)))
            .collect(),
        _ => model.clone(),
    };
    sorted(
        folded
            .iter()
            .filter(|(_, e)| e.count > 0 && !e.retract)
            .map(|(id, e)| {
                vec![
                    Value::from(*id),
                    e.n.map(Value::from).unwrap_or(Value::Null),
                    e.s.clone().map(Value::from).unwrap_or(Value::Null),
                    e.b.map(Value::from).unwrap_or(Value::Null),
                ]
            })
            .collect(),
    )
}

async fn run(
    engine: Engine,
    options: &[(&str, &str)],
    ops: Vec<Op>,
    spill_rows: usize,
) -> Result<(), TestCaseError> {
    run_with(engine, options, ops, spill_rows, true).await
}

/// `wait`: commits wait for a compaction round (deterministic) or take only finished background
/// compactions (timing varies; the rows must not).
async fn run_with(
    engine: Engine,
    options: &[(&str, &str)],
    ops: Vec<Op>,
    spill_rows: usize,
    wait: bool,
) -> Result<(), TestCaseError> {
    let catalog = Catalog::new(FileIo::memory());
    let mut opts: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    opts.insert("bucket".into(), "2".into());
    // Expiry after every commit keeps the last 3 snapshots.
    opts.insert("snapshot.num-retained.min".into(), "3".into());
    opts.insert("snapshot.time-retained".into(), "0 ms".into());
    opts.insert("write-buffer-rows".into(), spill_rows.to_string());
    let def = TableDefinition {
        columns: TableDefinition::parse_columns(
            "id BIGINT NOT NULL, n BIGINT, s STRING, b BOOLEAN",
        )
        .unwrap(),
        primary_keys: vec!["id".into()],
        options: opts,
        ..Default::default()
    };
    let table = catalog
        .create_table(&Identifier::new("db", "t"), &def, false)
        .await
        .unwrap();
    let wopts = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let new_writer = || {
        let mut w = table.new_write(wopts.clone()).unwrap();
        w.set_wait_compaction(wait);
        w
    };
    let mut writer = new_writer();
    let committer = table.new_commit("engine-test");
    let mut pending = Model::new();
    let mut history: Vec<(i64, Model)> = Vec::new();
    let mut abandoned: Vec<String> = Vec::new();
    for op in ops.into_iter().chain([Op::Commit]) {
        match op {
            Op::Write(rows) => {
                let mut written = Vec::with_capacity(rows.len());
                for r in rows {
                    let r = realistic(engine, &pending, r);
                    fold(engine, &mut pending, &r);
                    written.push(r);
                }
                writer.write(&batch(&written)).await.unwrap();
            }
            Op::Commit | Op::Restart | Op::FullCompact => {
                // Every snapshot a commit creates (APPEND, then maybe COMPACT) shows the same rows.
                let sm = table.snapshot_manager();
                let before = sm.latest_id().await.unwrap().unwrap_or(0);
                let messages = writer.prepare_commit().await.unwrap();
                committer
                    .commit(messages, BATCH_COMMIT_IDENTIFIER, None)
                    .await
                    .unwrap();
                if matches!(op, Op::FullCompact) {
                    table.compact(true, vec![]).await.unwrap();
                }
                let after = sm.latest_id().await.unwrap().unwrap_or(0);
                for sid in before + 1..=after {
                    history.push((sid, pending.clone()));
                }
                if !matches!(op, Op::Commit) {
                    std::mem::replace(&mut writer, new_writer())
                        .close()
                        .await
                        .unwrap();
                }
            }
            Op::Rollback(n) => {
                let ids = table.snapshot_manager().list_ids().await.unwrap();
                let Some(&target) = ids.get(n) else { continue };
                // The writer's uncommitted files are abandoned, as by a crash: orphans.
                for m in writer.prepare_commit().await.unwrap() {
                    abandoned.extend(
                        m.new_files
                            .iter()
                            .chain(&m.compact_after)
                            .map(|f| f.file_name.clone()),
                    );
                }
                std::mem::replace(&mut writer, new_writer())
                    .close()
                    .await
                    .unwrap();
                table
                    .rollback_to(tidelake::table::maintenance::RollbackTarget::Snapshot(
                        target,
                    ))
                    .await
                    .unwrap();
                history.retain(|(sid, _)| *sid <= target);
                pending = history
                    .iter()
                    .rev()
                    .find(|(sid, _)| *sid == target)
                    .map(|(_, m)| m.clone())
                    .unwrap_or_default();
            }
        }
    }
    // The last writer ends: running compactions finish and their uncommitted outputs go.
    writer.close().await.unwrap();
    let present = table.snapshot_manager().list_ids().await.unwrap();
    prop_assert!(
        present.len() <= 3,
        "expiry keeps 3 snapshots: {:?}",
        present
    );
    // Nothing leaks: every file is referenced by a snapshot, but for abandoned writes.
    let orphans = table
        .remove_orphan_files(i64::MAX, true)
        .await
        .unwrap()
        .files;
    let unexpected: Vec<&String> = orphans
        .iter()
        .filter(|o| !abandoned.iter().any(|a| o.ends_with(a.as_str())))
        .collect();
    prop_assert!(unexpected.is_empty(), "leaked files: {:?}", unexpected);
    for (sid, state) in &history {
        match table.read_all(SnapshotSelector::Id(*sid), None).await {
            Ok(batches) => prop_assert_eq!(
                sorted(rows(&batches)),
                expected(engine, state),
                "snapshot {}",
                sid
            ),
            Err(e) => {
                prop_assert!(
                    !present.contains(sid),
                    "snapshot {} is present but unreadable: {}",
                    sid,
                    e
                );
                prop_assert_eq!(e.kind(), tidelake::ErrorKind::NotFound);
            }
        }
    }
    Ok(())
}

fn block_on<F: std::future::Future<Output = Result<(), TestCaseError>>>(
    f: F,
) -> Result<(), TestCaseError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn deduplicate_matches_model(ops in ops(&["+I", "+U", "-U", "-D"]), spill in prop_oneof![Just(1usize), Just(4), Just(1000)]) {
        block_on(run(Engine::Deduplicate, &[], ops, spill))?;
    }

    #[test]
    fn partial_update_matches_model(ops in ops(&["+I", "+U"]), spill in prop_oneof![Just(1usize), Just(4), Just(1000)]) {
        block_on(run(Engine::PartialUpdate, &[("merge-engine", "partial-update")], ops, spill))?;
    }

    // Deletes: Paimon's partial-update lets an add that follows a -D in the same merge build on
    // the -D's values, so a -D absorbed by a write buffer does not delete older files' fields.
    // Keeping each key once per spill (one batch per spill, keys unique in a batch) makes the
    // merge grouping the same as the model's. No -U: a merge starting with -U takes its values.
    #[test]
    fn partial_update_deletes_match_model(ops in ops(&["+I", "+U", "+I", "-D"]).prop_map(unique_keys_per_write)) {
        block_on(run(Engine::PartialUpdate, &[("merge-engine", "partial-update"), ("partial-update.remove-record-on-delete", "true")], ops, 1))?;
    }

    #[test]
    fn deduplicate_with_background_compaction_matches_model(ops in ops(&["+I", "+U", "-U", "-D"]), spill in prop_oneof![Just(1usize), Just(4)]) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(run_with(Engine::Deduplicate, &[], ops, spill, false))?;
    }

    #[test]
    fn aggregation_matches_model(ops in ops(&["+I", "+U", "+I", "-U", "-D"]), spill in prop_oneof![Just(1usize), Just(4), Just(1000)]) {
        block_on(run(Engine::Aggregation, &[
            ("merge-engine", "aggregation"),
            ("fields.n.aggregate-function", "sum"),
            ("fields.s.aggregate-function", "listagg"),
            ("fields.s.ignore-retract", "true"),
            ("fields.b.aggregate-function", "bool_or"),
            ("fields.b.ignore-retract", "true"),
        ], ops, spill))?;
    }
}

async fn one_by_one(table: &tidelake::Table, rows: &[Value]) {
    for r in rows {
        table
            .write_batches(
                &[crate::common::batch(table, std::slice::from_ref(r))],
                WriteOptions::default(),
                None,
            )
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn partial_update_sequence_groups_order_fields_independently() {
    let s = crate::common::Scratch::new();
    let t = s
        .create(
            "db.pu",
            "id INT NOT NULL, a INT, g1 INT, b STRING, g2 INT, c INT",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("merge-engine", "partial-update"),
                ("fields.g1.sequence-group", "a"),
                ("fields.g2.sequence-group", "b,c"),
                ("fields.c.aggregate-function", "sum"),
            ],
        )
        .await;
    use serde_json::json;
    one_by_one(
        &t,
        &[
            json!({"id": 1, "a": 1, "g1": 1, "b": "x", "g2": 1, "c": 10}),
            // Older g1: `a` keeps its value; all-null g2: the group is skipped (c not summed).
            json!({"id": 1, "a": 2, "g1": 0, "b": null, "g2": null, "c": 5}),
            // Newer groups overwrite, NULLs included; c is summed.
            json!({"id": 1, "a": null, "g1": 2, "b": "y", "g2": 2, "c": 1}),
        ],
    )
    .await;
    let want = vec![vec![
        json!(1),
        Value::Null,
        json!(2),
        json!("y"),
        json!(2),
        json!(11),
    ]];
    assert_eq!(crate::common::read_rows(&t, None).await, want);
    // Reads of an older snapshot merge only what existed then.
    assert_eq!(
        crate::common::read_rows(&t, Some(1)).await,
        vec![vec![
            json!(1),
            json!(1),
            json!(1),
            json!("x"),
            json!(1),
            json!(10)
        ]]
    );

    // A configuration Paimon rejects is rejected at creation.
    let def = TableDefinition {
        columns: TableDefinition::parse_columns("id INT NOT NULL, a INT").unwrap(),
        primary_keys: vec!["id".into()],
        options: [
            ("bucket", "1"),
            ("merge-engine", "partial-update"),
            ("fields.a.aggregate-function", "sum"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        ..Default::default()
    };
    let err = s
        .catalog
        .create_table(&Identifier::new("db", "bad"), &def, false)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Must use sequence group for aggregation functions"),
        "{err}"
    );
}

#[tokio::test]
async fn partial_update_rejects_deletes_by_default_and_aggregation_unsupported_retractions() {
    let s = crate::common::Scratch::new();
    use serde_json::json;
    let t = s
        .create(
            "db.pu",
            "id INT NOT NULL, a INT",
            &["id"],
            &[],
            &[("bucket", "1"), ("merge-engine", "partial-update")],
        )
        .await;
    one_by_one(&t, &[json!({"id": 1, "a": 1})]).await;
    let opts = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let del = crate::common::batch_with_kinds(&t, &[json!({"id": 1, "a": 1, "op": "-D"})]);
    t.write_batches(&[del], opts.clone(), None).await.unwrap();
    // The lone -D is stored; the merge of +I and -D fails as Paimon's does.
    let err = t
        .read_all(SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Partial update can not accept delete records"),
        "{err}"
    );
    assert!(!err.to_string().contains('\n'), "one line: {err}");
    assert_eq!(err.kind(), tidelake::ErrorKind::InvalidArgument);

    let t = s
        .create(
            "db.agg",
            "id INT NOT NULL, a INT",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("merge-engine", "aggregation"),
                ("fields.a.aggregate-function", "max"),
            ],
        )
        .await;
    one_by_one(&t, &[json!({"id": 1, "a": 1}), json!({"id": 1, "a": 7})]).await;
    assert_eq!(
        crate::common::read_rows(&t, None).await,
        vec![vec![json!(1), json!(7)]]
    );
    let retract = crate::common::batch_with_kinds(&t, &[json!({"id": 1, "a": 7, "op": "-U"})]);
    t.write_batches(&[retract], opts, None).await.unwrap();
    let err = t
        .read_all(SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Aggregate function 'max' does not support retraction"),
        "{err}"
    );
}

#[tokio::test]
async fn sequence_field_decides_the_winner() {
    let s = crate::common::Scratch::new();
    use serde_json::json;
    let t = s
        .create(
            "db.seq",
            "id INT NOT NULL, v STRING, ts BIGINT",
            &["id"],
            &[],
            &[("bucket", "1"), ("sequence.field", "ts")],
        )
        .await;
    one_by_one(
        &t,
        &[
            json!({"id": 1, "v": "a", "ts": 5}),
            json!({"id": 1, "v": "b", "ts": 3}),
        ],
    )
    .await;
    assert_eq!(
        crate::common::read_rows(&t, None).await,
        vec![vec![json!(1), json!("a"), json!(5)]]
    );
    // NULL is the oldest sequence value.
    one_by_one(&t, &[json!({"id": 1, "v": "c", "ts": null})]).await;
    assert_eq!(
        crate::common::read_rows(&t, None).await,
        vec![vec![json!(1), json!("a"), json!(5)]]
    );
    // A tie goes to the later write; a projection without the sequence field still merges by it.
    one_by_one(&t, &[json!({"id": 1, "v": "d", "ts": 5})]).await;
    let v = t
        .read_all(SnapshotSelector::Latest, Some(&["v".to_string()]))
        .await
        .unwrap();
    assert_eq!(rows(&v), vec![vec![json!("d")]]);
}
