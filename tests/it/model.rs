//! Property test: random upserts, deletes, buffer spills, writer restarts and commits on a
//! primary-key table (fixed buckets, dynamic buckets of two keys each, postpone buckets moved
//! by a compaction after each commit, or cross-partition keys whose rows move between partitions;
//! with or without deletion vectors), each read (latest and every earlier snapshot) compared with
//! a BTreeMap model. A nested column (ARRAY<BIGINT>, given
//! with Arrow's own item name) rides along through spills, merges and compactions.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int32Array, Int64Array, Int64Builder, ListBuilder, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use proptest::prelude::*;
use serde_json::Value;
use tidelake::io::FileIo;
use tidelake::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::{Catalog, Identifier, TableDefinition};

use crate::common::{rows, sorted};

#[derive(Debug, Clone)]
enum Op {
    /// Rows of one batch: (id, part, value, is_delete).
    Write(Vec<(i32, i32, i64, bool)>),
    Commit,
    /// Drop the writer (after committing) and start a new one: sequence numbers are restored.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec((0..12i32, 0..2i32, any::<i64>(), prop::bool::weighted(0.25)), 1..6).prop_map(Op::Write),
        2 => Just(Op::Commit),
        1 => Just(Op::Restart),
    ]
}

/// The nested value of `v`: NULL, or up to three numbers from it.
fn tags_of(v: i64) -> Option<Vec<i64>> {
    (v % 5 != 0).then(|| (0..v.rem_euclid(4)).map(|i| v.wrapping_add(i)).collect())
}

fn input_batch(rows: &[(i32, i32, i64, bool)]) -> RecordBatch {
    let mut tags = ListBuilder::new(Int64Builder::new());
    for r in rows {
        match tags_of(r.2) {
            Some(t) => {
                tags.values().append_slice(&t);
                tags.append(true);
            }
            None => tags.append(false),
        }
    }
    let tags: ArrayRef = Arc::new(tags.finish());
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("part", DataType::Int32, false),
        Field::new("v", DataType::Int64, true),
        Field::new("note", DataType::Utf8, true),
        Field::new("tags", tags.data_type().clone(), true),
        Field::new("op", DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| {
                (r.2 % 3 != 0).then(|| format!("note for {} is long enough", r.2))
            }))),
            tags,
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| {
                if r.3 {
                    "-D"
                } else {
                    "+U"
                }
            }))),
        ],
    )
    .unwrap()
}

type Model = BTreeMap<(i32, i32), i64>;

fn model_rows(m: &Model) -> Vec<Vec<Value>> {
    sorted(
        m.iter()
            .map(|((id, part), v)| {
                let note = if v % 3 != 0 {
                    Value::from(format!("note for {v} is long enough"))
                } else {
                    Value::Null
                };
                let tags = tags_of(*v).map_or(Value::Null, Value::from);
                vec![
                    Value::from(*id),
                    Value::from(*part),
                    Value::from(*v),
                    note,
                    tags,
                ]
            })
            .collect(),
    )
}

/// Folds one written row into the model: keyed by (id, part), or by id alone when `cross` (a
/// key lives in one partition: a row elsewhere moves it, a delete removes it wherever it is).
fn fold(m: &mut Model, (id, part, v, delete): (i32, i32, i64, bool), cross: bool) {
    if cross {
        m.retain(|(i, _), _| *i != id);
    } else {
        m.remove(&(id, part));
    }
    if !delete {
        m.insert((id, part), v);
    }
}

async fn run(
    ops: Vec<Op>,
    spill_rows: usize,
    buckets: i32,
    deletion_vectors: bool,
    cross: bool,
) -> Result<(), TestCaseError> {
    let buckets = if cross { -1 } else { buckets };
    let catalog = Catalog::new(FileIo::memory());
    let id = Identifier::new("db", "t");
    let def = TableDefinition {
        columns: TableDefinition::parse_columns(
            "id INT NOT NULL, part INT NOT NULL, v BIGINT, note STRING, tags ARRAY<BIGINT>",
        )
        .unwrap(),
        primary_keys: if cross {
            vec!["id".into()]
        } else {
            vec!["id".into(), "part".into()]
        },
        partition_keys: vec!["part".into()],
        // -1: dynamic buckets, two keys each, so keys spread over many buckets. -2: postpone
        // buckets (moved by a compaction after each commit, into 2 buckets).
        options: [
            ("bucket".to_string(), buckets.to_string()),
            ("write-buffer-rows".to_string(), spill_rows.to_string()),
            ("dynamic-bucket.target-row-num".to_string(), "2".to_string()),
            ("postpone.default-bucket-num".to_string(), "2".to_string()),
            (
                "deletion-vectors.enabled".to_string(),
                deletion_vectors.to_string(),
            ),
        ]
        .into_iter()
        .collect(),
        comment: None,
        column_comments: Default::default(),
    };
    let table = catalog.create_table(&id, &def, false).await.unwrap();
    let opts = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let mut writer = table.new_write(opts.clone()).unwrap();
    writer.set_wait_compaction(true);
    let committer = table.new_commit("model-test");
    let mut pending: Model = Model::new();
    let mut committed: Model = Model::new();
    let mut history: Vec<(i64, Model)> = Vec::new();
    for op in ops.into_iter().chain([Op::Commit]) {
        match op {
            Op::Write(rows) => {
                writer.write(&input_batch(&rows)).await.unwrap();
                for r in rows {
                    fold(&mut pending, r, cross);
                }
            }
            Op::Commit | Op::Restart => {
                let messages = writer.prepare_commit().await.unwrap();
                let outcome = committer
                    .commit(messages, BATCH_COMMIT_IDENTIFIER, None)
                    .await
                    .unwrap();
                if buckets == -2 {
                    // Postpone: the commit only stages; batch reads still see the moved rows
                    // until a compaction moves the staged ones.
                    if let Some(sid) = outcome.snapshot_id() {
                        history.push((sid, committed.clone()));
                    }
                    table.compact(false, vec![]).await.unwrap();
                }
                committed = pending.clone();
                let sid = match buckets {
                    -2 => table.snapshot_manager().latest_id().await.unwrap(),
                    _ => outcome.snapshot_id(),
                };
                if let Some(sid) = sid {
                    history.push((sid, committed.clone()));
                }
                let latest = sorted(rows(
                    &table
                        .read_all(SnapshotSelector::Latest, None)
                        .await
                        .unwrap(),
                ));
                prop_assert_eq!(latest, model_rows(&committed));
                if matches!(op, Op::Restart) {
                    let mut next = table.new_write(opts.clone()).unwrap();
                    next.set_wait_compaction(true);
                    std::mem::replace(&mut writer, next).close().await.unwrap();
                }
            }
        }
    }
    for (sid, state) in &history {
        let at = sorted(rows(
            &table
                .read_all(SnapshotSelector::Id(*sid), None)
                .await
                .unwrap(),
        ));
        prop_assert_eq!(at, model_rows(state), "snapshot {}", sid);
    }
    // A projection returns the same rows restricted to the projected columns.
    let projected = table
        .read_all(
            SnapshotSelector::Latest,
            Some(&["v".to_string(), "id".to_string()]),
        )
        .await
        .unwrap();
    let mut got: Vec<(i64, i32)> = rows(&projected)
        .iter()
        .map(|r| (r[0].as_i64().unwrap(), r[1].as_i64().unwrap() as i32))
        .collect();
    let mut want: Vec<(i64, i32)> = committed.iter().map(|((id, _), v)| (*v, *id)).collect();
    got.sort_unstable();
    want.sort_unstable();
    prop_assert_eq!(got, want);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn primary_key_table_matches_btreemap_model(
        ops in prop::collection::vec(op(), 1..40),
        spill_rows in prop_oneof![Just(1usize), Just(3), Just(7), Just(1000)],
        buckets in prop_oneof![Just(-2i32), Just(-1i32), 1..4i32],
        deletion_vectors in any::<bool>(),
        cross in prop::bool::weighted(0.3),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops, spill_rows, buckets, deletion_vectors, cross))?;
    }
}
