//! Schema evolution against a model: random interleavings of upserts, schema changes (add, drop,
//! rename, widen, reorder), full compactions and writer restarts on a primary-key table. The
//! model keeps each key's values by field id; after every step a read of the table (through a
//! freshly loaded handle at the latest schema) must equal the model seen through the current
//! schema: renamed columns keep their values, dropped ones vanish, added ones are NULL for old
//! rows, widened ones keep their numbers.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use proptest::prelude::*;
use serde_json::Value;
use tidelake::schema::change::{ColumnMove, SchemaChange};
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::Identifier;

use crate::common::{rows, Scratch};

#[derive(Debug, Clone)]
enum Op {
    /// Upserts of (key, seed) pairs; values derive from the seed per column.
    Write(Vec<(i64, i64)>),
    Add {
        text: bool,
        first: bool,
    },
    Drop(usize),
    Rename(usize),
    Widen(usize),
    MoveFirst(usize),
    Compact,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            5 => prop::collection::vec((0..12i64, 0..1000i64), 1..6).prop_map(Op::Write),
            2 => (any::<bool>(), any::<bool>()).prop_map(|(text, first)| Op::Add { text, first }),
            1 => (0..8usize).prop_map(Op::Drop),
            1 => (0..8usize).prop_map(Op::Rename),
            1 => (0..8usize).prop_map(Op::Widen),
            1 => (0..8usize).prop_map(Op::MoveFirst),
            1 => Just(Op::Compact),
        ],
        1..25,
    )
}

/// A value column of the model's current schema.
#[derive(Debug, Clone)]
struct Col {
    id: i32,
    name: String,
    /// "INT", "BIGINT" or "STRING".
    ty: &'static str,
}

#[derive(Debug, Default)]
struct Model {
    /// Value columns in schema order (the key `id` is not listed; it stays where it is placed).
    cols: Vec<Col>,
    /// Position of the key among all columns.
    key_pos: usize,
    next_id: i32,
    next_name: usize,
    rows: BTreeMap<i64, BTreeMap<i32, Value>>,
}

impl Model {
    fn value(col: &Col, seed: i64) -> Value {
        match col.ty {
            "STRING" => Value::from(format!("s{}", seed + col.id as i64)),
            _ => Value::from(seed * 10 + col.id as i64),
        }
    }

    /// The expected rows: every column in schema order, absent values as NULL.
    fn expected(&self) -> Vec<Vec<Value>> {
        self.rows
            .iter()
            .map(|(k, vals)| {
                let mut row: Vec<Value> = self
                    .cols
                    .iter()
                    .map(|c| vals.get(&c.id).cloned().unwrap_or(Value::Null))
                    .collect();
                row.insert(self.key_pos, Value::from(*k));
                row
            })
            .collect()
    }

    fn batch(&self, writes: &[(i64, i64)]) -> RecordBatch {
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for c in &self.cols {
            let (f, a): (Field, ArrayRef) = match c.ty {
                "STRING" => (
                    Field::new(&c.name, DataType::Utf8, true),
                    Arc::new(StringArray::from_iter_values(
                        writes
                            .iter()
                            .map(|(_, s)| Self::value(c, *s).as_str().unwrap().to_string()),
                    )),
                ),
                "INT" => (
                    Field::new(&c.name, DataType::Int32, true),
                    Arc::new(Int32Array::from_iter_values(
                        writes
                            .iter()
                            .map(|(_, s)| Self::value(c, *s).as_i64().unwrap() as i32),
                    )),
                ),
                _ => (
                    Field::new(&c.name, DataType::Int64, true),
                    Arc::new(Int64Array::from_iter_values(
                        writes
                            .iter()
                            .map(|(_, s)| Self::value(c, *s).as_i64().unwrap()),
                    )),
                ),
            };
            fields.push(f);
            columns.push(a);
        }
        fields.push(Field::new("id", DataType::Int64, false));
        columns.push(Arc::new(Int64Array::from_iter_values(
            writes.iter().map(|(k, _)| *k),
        )));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }
}

async fn run(ops: Vec<Op>) {
    let s = Scratch::new();
    s.create(
        "db.t",
        "id BIGINT NOT NULL, a INT, b STRING",
        &["id"],
        &[],
        &[("bucket", "2"), ("write-buffer-rows", "4")],
    )
    .await;
    let id = Identifier::parse("db.t").unwrap();
    let mut m = Model {
        cols: vec![
            Col {
                id: 1,
                name: "a".into(),
                ty: "INT",
            },
            Col {
                id: 2,
                name: "b".into(),
                ty: "STRING",
            },
        ],
        key_pos: 0,
        next_id: 3,
        ..Default::default()
    };
    for (step, op) in ops.into_iter().enumerate() {
        let mut changes = Vec::new();
        match &op {
            Op::Write(writes) => {
                let table = s.catalog.load_table(&id).await.unwrap();
                let mut w: Vec<(i64, i64)> = Vec::new();
                for (k, seed) in writes {
                    w.retain(|(x, _)| x != k);
                    w.push((*k, *seed));
                }
                table
                    .write_batches(&[m.batch(&w)], WriteOptions::default(), None)
                    .await
                    .unwrap();
                for (k, seed) in w {
                    let vals = m
                        .cols
                        .iter()
                        .map(|c| (c.id, Model::value(c, seed)))
                        .collect();
                    m.rows.insert(k, vals);
                }
            }
            Op::Add { text, first } => {
                m.next_name += 1;
                let col = Col {
                    id: m.next_id,
                    name: format!("c{}", m.next_name),
                    ty: if *text { "STRING" } else { "INT" },
                };
                m.next_id += 1;
                changes.push(SchemaChange::AddColumn {
                    name: col.name.clone(),
                    data_type: col.ty.parse().unwrap(),
                    comment: None,
                    position: first.then_some(ColumnMove::First),
                });
                if *first {
                    m.cols.insert(0, col);
                    m.key_pos += 1;
                } else {
                    m.cols.push(col);
                }
            }
            Op::Drop(i) if m.cols.len() > 1 => {
                let j = i % m.cols.len();
                let c = m.cols.remove(j);
                if j < m.key_pos {
                    m.key_pos -= 1;
                }
                changes.push(SchemaChange::DropColumn { name: c.name });
            }
            Op::Rename(i) if !m.cols.is_empty() => {
                let n = m.cols.len();
                m.next_name += 1;
                let new_name = format!("r{}", m.next_name);
                let c = &mut m.cols[i % n];
                changes.push(SchemaChange::RenameColumn {
                    name: c.name.clone(),
                    new_name: new_name.clone(),
                });
                c.name = new_name;
            }
            Op::Widen(i) => {
                if let Some(c) = m.cols.iter_mut().filter(|c| c.ty == "INT").nth(*i) {
                    c.ty = "BIGINT";
                    changes.push(SchemaChange::UpdateColumnType {
                        name: c.name.clone(),
                        data_type: "BIGINT".parse().unwrap(),
                    });
                }
            }
            Op::MoveFirst(i) if !m.cols.is_empty() => {
                let j = i % m.cols.len();
                let c = m.cols.remove(j);
                changes.push(SchemaChange::UpdateColumnPosition {
                    name: c.name.clone(),
                    position: ColumnMove::First,
                });
                m.cols.insert(0, c);
                // The key moves right only if the column was after it.
                if j >= m.key_pos {
                    m.key_pos += 1;
                }
            }
            Op::Compact => {
                let table = s.catalog.load_table(&id).await.unwrap();
                table.compact(true, vec![]).await.unwrap();
            }
            _ => {}
        }
        if !changes.is_empty() {
            s.catalog.alter_table(&id, &changes).await.unwrap();
        }
        let table = s.catalog.load_table(&id).await.unwrap();
        let got = rows(
            &table
                .read_all(SnapshotSelector::Latest, None)
                .await
                .unwrap(),
        );
        let mut got = got;
        got.sort_by_key(|r| r[m.key_pos].as_i64());
        assert_eq!(got, m.expected(), "after step {step}: {op:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn reads_follow_schema_changes(ops in ops()) {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(ops));
    }
}
