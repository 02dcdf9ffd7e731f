//! Nested types (ARRAY, MAP, ROW; MULTISET in schemas; VARIANT): value columns laid out in Parquet as
//! Paimon lays them out, their fields given ids in the schema as Paimon gives them, shared with
//! pypaimon 2.1.0 in both directions; keys of nested types and nested NOT NULL violations are
//! refused with nothing changed.

use serde_json::{json, Value};
use tidelake::error::ErrorKind;
use tidelake::table::WriteOptions;
use tidelake::Identifier;

use crate::common::{paimon, paimon_rows, read_rows, sorted, write_rows, Scratch};

const COLUMNS: &str = "id BIGINT NOT NULL, tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, \
                       point ROW<x DOUBLE, y DOUBLE>, items ARRAY<ROW<k STRING, v DOUBLE>>";

fn row(id: i64, tag: &str) -> Value {
    json!({
        "id": id,
        "tags": [tag, format!("{tag}{id}")],
        "attrs": {"n": id, "m": id * 10},
        "point": {"x": id as f64 + 0.5, "y": -(id as f64)},
        "items": [{"k": format!("k{id}"), "v": 1.25}, {"k": null, "v": null}],
    })
}

fn as_row(v: &Value) -> Vec<Value> {
    ["id", "tags", "attrs", "point", "items"]
        .iter()
        .map(|c| v[c].clone())
        .collect()
}

#[tokio::test]
async fn nested_columns_round_trip_and_pypaimon_reads_every_snapshot() {
    let s = Scratch::new();
    let name = "db.nested";
    let t = s
        .create(name, COLUMNS, &["id"], &[], &[("bucket", "2")])
        .await;
    // The schema file holds Paimon's JSON form, with ids unique across nested fields.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{}/db.db/nested/schema/schema-0", s.path())).unwrap(),
    )
    .unwrap();
    assert_eq!(
        schema["fields"][1]["type"],
        json!({"type": "ARRAY", "element": "STRING"})
    );
    assert_eq!(
        schema["fields"][3]["type"]["fields"][1],
        json!({"id": 5, "name": "y", "type": "DOUBLE"})
    );
    assert_eq!(schema["highestFieldId"], json!(8));

    let first: Vec<Value> = (1..=4).map(|i| row(i, "a")).collect();
    write_rows(&t, &first).await;
    let mut second = vec![row(2, "b"), row(5, "b")];
    second[0]["attrs"] = json!(null);
    second[0]["items"] = json!([]);
    write_rows(&t, &second).await;

    let want = sorted(
        [
            row(1, "a"),
            second[0].clone(),
            row(3, "a"),
            row(4, "a"),
            row(5, "b"),
        ]
        .iter()
        .map(as_row)
        .collect(),
    );
    assert_eq!(read_rows(&t, None).await, want);
    for id in t.snapshot_manager().list_ids().await.unwrap() {
        assert_eq!(
            paimon_rows(s.path(), name, Some(id)),
            read_rows(&t, Some(id)).await,
            "{name} snapshot {id}"
        );
    }
    // Compaction rewrites nested columns too.
    t.compact(true, vec![]).await.unwrap();
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), name, None), want);
}

#[tokio::test]
async fn tidelake_reads_and_upserts_a_table_pypaimon_made_with_nested_types() {
    let s = Scratch::new();
    let name = "db.py_nested";
    let spec = json!({"columns": [["id", "int64", false], ["tags", "list<string>", true],
                                  ["attrs", "map<string,int64>", true],
                                  ["point", "struct<x:float64,y:float64>", true],
                                  ["items", "list<struct<k:string,v:float64>>", true]],
                      "primary_keys": ["id"], "options": {"bucket": "1"}});
    paimon(&["create", s.path(), name, &spec.to_string()]);
    let first: Vec<Value> = (1..=3).map(|i| row(i, "py")).collect();
    paimon(&[
        "write",
        s.path(),
        name,
        &Value::Array(first.clone()).to_string(),
    ]);

    let t = s
        .catalog
        .load_table(&Identifier::parse(name).unwrap())
        .await
        .unwrap();
    let want: Vec<Vec<Value>> = sorted(first.iter().map(as_row).collect());
    assert_eq!(read_rows(&t, None).await, want);

    write_rows(&t, &[row(3, "tl"), row(4, "tl")]).await;
    let want = sorted(
        [row(1, "py"), row(2, "py"), row(3, "tl"), row(4, "tl")]
            .iter()
            .map(as_row)
            .collect(),
    );
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), name, None), want);
    // And pypaimon writes after tidelake.
    paimon(&["write", s.path(), name, &json!([row(1, "py2")]).to_string()]);
    let mut want = want;
    want[0] = as_row(&row(1, "py2"));
    assert_eq!(read_rows(&t, None).await, want);
}

#[tokio::test]
async fn nested_keys_partitions_and_engines_are_refused_naming_the_column() {
    let s = Scratch::new();
    let def = crate::common::definition;
    for (i, (d, needle)) in [
        (
            def(
                "k ARRAY<INT> NOT NULL, v INT",
                &["k"],
                &[],
                &[("bucket", "1")],
            ),
            "primary key column 'k' has the nested type ARRAY<INT>",
        ),
        (
            def("id INT, p ROW<a INT>", &[], &["p"], &[]),
            "partition key column 'p'",
        ),
        (
            def(
                "id INT NOT NULL, m MAP<STRING, INT>",
                &["id"],
                &[],
                &[("bucket", "1"), ("merge-engine", "partial-update")],
            ),
            "partial-update merge engine does not take nested columns",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let id = Identifier::parse(&format!("db.bad{i}")).unwrap();
        let e = s.catalog.create_table(&id, &d, false).await.unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
        assert!(
            s.catalog.load_table(&id).await.is_err(),
            "nothing was created for {id}"
        );
    }
    for bad in [
        "id INT, m MAP<ARRAY<INT>, INT>",
        "id INT, r ROW<a INT, a INT>",
        "id ARRAY<INT",
    ] {
        assert!(
            tidelake::catalog::TableDefinition::parse_columns(bad).is_err(),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn a_null_in_a_not_null_nested_field_is_refused_and_changes_nothing() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.strict",
            "id BIGINT NOT NULL, xs ARRAY<INT NOT NULL>, r ROW<a INT NOT NULL, b STRING>",
            &["id"],
            &[],
            &[("bucket", "1")],
        )
        .await;
    write_rows(
        &t,
        &[json!({"id": 1, "xs": [1, 2], "r": {"a": 1, "b": "x"}})],
    )
    .await;
    let before = read_rows(&t, None).await;
    // A nullable input type holding a NULL where the table says NOT NULL.
    let schema =
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
            arrow::datatypes::Field::new(
                "xs",
                arrow::datatypes::DataType::List(std::sync::Arc::new(
                    arrow::datatypes::Field::new("item", arrow::datatypes::DataType::Int32, true),
                )),
                true,
            ),
        ]));
    let bad = crate::common::batch_with_schema(schema, &[json!({"id": 2, "xs": [3, null]})]);
    let e = t
        .write_batches(&[bad], WriteOptions::default(), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("column 'xs'"), "{e}");
    let loose_struct = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new(
            "r",
            arrow::datatypes::DataType::Struct(
                vec![
                    arrow::datatypes::Field::new("a", arrow::datatypes::DataType::Int32, true),
                    arrow::datatypes::Field::new("b", arrow::datatypes::DataType::Utf8, true),
                ]
                .into(),
            ),
            true,
        ),
    ]));
    let also_bad = crate::common::batch_with_schema(
        loose_struct,
        &[json!({"id": 3, "r": {"a": null, "b": "y"}})],
    );
    let e = t
        .write_batches(&[also_bad], WriteOptions::default(), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("struct field 'a' is NULL"), "{e}");
    assert_eq!(read_rows(&t, None).await, before);
    assert_eq!(t.snapshot_manager().list_ids().await.unwrap(), vec![1]);
    // A pyarrow-style list (item named "item", nullable) without nulls is taken; wider items
    // than the table's are not.
    let list_of = |item: arrow::datatypes::DataType| {
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
            arrow::datatypes::Field::new(
                "xs",
                arrow::datatypes::DataType::List(std::sync::Arc::new(
                    arrow::datatypes::Field::new("item", item, true),
                )),
                true,
            ),
        ]))
    };
    let wide = crate::common::batch_with_schema(
        list_of(arrow::datatypes::DataType::Int64),
        &[json!({"id": 2, "xs": [3, 4]})],
    );
    let e = t
        .write_batches(&[wide], WriteOptions::default(), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("the table expects"), "{e}");
    let ok = crate::common::batch_with_schema(
        list_of(arrow::datatypes::DataType::Int32),
        &[json!({"id": 2, "xs": [3, 4]})],
    );
    t.write_batches(&[ok], WriteOptions::default(), None)
        .await
        .unwrap();
    let mut want = before;
    want.push(vec![json!(2), json!([3, 4]), Value::Null]);
    assert_eq!(read_rows(&t, None).await, sorted(want));
}

/// Writes the rows `read` holds (`id BIGINT, v VARIANT`) back into `t` under ids shifted by
/// `by`, as tidelake writes them (unshredded).
async fn write_back_shifted(t: &tidelake::Table, read: &arrow::array::RecordBatch, by: i64) {
    use arrow::array::{AsArray, Int64Array};
    let ids: Int64Array = read
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>()
        .iter()
        .map(|id| id.map(|id| id + by))
        .collect();
    let copy = arrow::array::RecordBatch::try_new(
        read.schema(),
        vec![
            std::sync::Arc::new(ids),
            std::sync::Arc::clone(read.column(1)),
        ],
    )
    .unwrap();
    t.write_batches(&[copy], WriteOptions::default(), None)
        .await
        .unwrap();
}

/// pypaimon's decoding of each row's VARIANT (`id, v`), by id (JSON null for SQL NULL).
fn pypaimon_variants(wh: &str, name: &str) -> std::collections::BTreeMap<i64, Value> {
    paimon_rows(wh, name, None)
        .iter()
        .map(|r| {
            let v = r[1]
                .as_str()
                .map(|text| serde_json::from_str::<Value>(text).unwrap())
                .unwrap_or(Value::Null);
            (r[0].as_i64().unwrap(), v)
        })
        .collect()
}

/// Shredded VARIANT (pypaimon 2.1 with `variant.shreddingSchema`: the Parquet variant shredding
/// layout, `metadata`, `value` and `typed_value`, some keys of an object in typed columns of their
/// own): tidelake reads the values whole, as the unshredded form gives them; pypaimon decodes the
/// copies tidelake writes back to the values pypaimon wrote, whatever was shredded.
#[tokio::test]
async fn shredded_variant_values_read_as_the_unshredded_form_gives_them() {
    let s = Scratch::new();
    let shred = json!({"type": "ROW", "fields": [{"id": 0, "name": "v", "type": {"type": "ROW", "fields": [
        {"id": 0, "name": "a", "type": "BIGINT"},
        {"id": 1, "name": "s", "type": "STRING"},
        {"id": 2, "name": "d", "type": "DOUBLE"},
        {"id": 3, "name": "at", "type": "TIMESTAMP(3)"},
        {"id": 4, "name": "o", "type": {"type": "ROW", "fields": [
            {"id": 0, "name": "x", "type": "BIGINT"}, {"id": 1, "name": "y", "type": "STRING"}]}}]}}]});
    let values = [
        json!({"a": 1, "s": "hello", "d": 2.5, "o": {"x": 7, "y": "yy"}}),
        json!({"a": 300, "extra": "e", "zz": [1, {"k": "v"}], "o": {"x": 8, "more": 1.5}}),
        json!({"s": "only s"}),
        json!({"o": "not an object", "a": -1099511627776i64}),
        json!(42),
        json!("a string"),
        json!([1, "two", {"a": 3}]),
        json!({}),
        json!({"zzz": 1}),
        json!({"s": "x".repeat(70)}),
        Value::Null,
    ];
    for (name, pk) in [("db.shk", true), ("db.sha", false)] {
        let mut spec = json!({"columns": [["id", "int64", false], ["v", "variant", true]],
                              "options": {"bucket": if pk { "1" } else { "-1" },
                                          "variant.shreddingSchema": shred.to_string()}});
        if pk {
            spec["primary_keys"] = json!(["id"]);
        }
        paimon(&["create", s.path(), name, &spec.to_string()]);
        let rows: Vec<Value> = values
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"id": i as i64 + 1, "v": v}))
            .collect();
        paimon(&["write", s.path(), name, &Value::Array(rows).to_string()]);
        let t = s
            .catalog
            .load_table(&Identifier::parse(name).unwrap())
            .await
            .unwrap();
        let read = t
            .read_all(tidelake::table::SnapshotSelector::Latest, None)
            .await
            .unwrap();
        let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
        assert_eq!(read.num_rows(), values.len(), "{name}");
        // tidelake writes what it read under ids 101.., unshredded; pypaimon decodes both.
        write_back_shifted(&t, &read, 100).await;
        let decoded = pypaimon_variants(s.path(), name);
        assert_eq!(decoded.len(), 2 * values.len(), "{name}");
        for (i, want) in values.iter().enumerate() {
            let id = i as i64 + 1;
            assert_eq!(&decoded[&id], want, "{name}: pypaimon's own value {id}");
            assert_eq!(
                &decoded[&(id + 100)],
                want,
                "{name}: tidelake's copy of {id}"
            );
        }
    }
}

/// VARIANT (pypaimon 2.1 writes it unshredded: `struct<value binary, metadata binary>` in Parquet,
/// value first as Paimon's `ParquetSchemaConverter` lays it out): tidelake reads pypaimon's values
/// byte for byte, writes them back, and pypaimon decodes what tidelake wrote to the same values. A
/// VARIANT key is refused; SQL DDL declares it.
#[tokio::test]
async fn variant_values_are_shared_with_pypaimon_byte_for_byte() {
    use arrow::array::{Array, AsArray};
    let s = Scratch::new();
    let name = "db.var";
    let spec = json!({"columns": [["id", "int64", false], ["v", "variant", true]],
                      "primary_keys": ["id"], "options": {"bucket": "1"}});
    paimon(&["create", s.path(), name, &spec.to_string()]);
    let values = [
        json!({"a": 1, "b": [true, "x"]}),
        json!([1, 2.5]),
        json!("s"),
        Value::Null,
    ];
    let rows: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"id": i as i64 + 1, "v": v}))
        .collect();
    paimon(&["write", s.path(), name, &Value::Array(rows).to_string()]);
    let t = s
        .catalog
        .load_table(&Identifier::parse(name).unwrap())
        .await
        .unwrap();
    let v_type = &t.schema().field("v").unwrap().data_type;
    assert_eq!(v_type.to_string(), "VARIANT");
    let read = t
        .read_all(tidelake::table::SnapshotSelector::Latest, None)
        .await
        .unwrap();
    let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
    assert_eq!(read.num_rows(), 4);
    let v = read.column(1).as_struct();
    assert_eq!(v.column_names(), ["value", "metadata"]);
    assert_eq!(v.null_count(), 1);
    // tidelake writes the same values under ids 11..14.
    write_back_shifted(&t, &read, 10).await;
    let decoded = pypaimon_variants(s.path(), name);
    assert_eq!(decoded.len(), 8);
    for (i, want) in values.iter().enumerate() {
        let id = i as i64 + 1;
        assert_eq!(&decoded[&id], want, "pypaimon's own value {id}");
        assert_eq!(&decoded[&(id + 10)], want, "tidelake's copy of {id}");
    }
    // A VARIANT key is refused; SQL declares the type.
    let e = s
        .catalog
        .create_table(
            &Identifier::parse("db.vkey").unwrap(),
            &crate::common::definition(
                "k VARIANT NOT NULL, v INT",
                &["k"],
                &[],
                &[("bucket", "1")],
            ),
            false,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("VARIANT"), "{e}");
    let engine = tidelake::sql::SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let session = tidelake::sql::SqlSession::default();
    engine
        .execute(
            &session,
            "CREATE TABLE db.v2 (id BIGINT NOT NULL, v VARIANT, PRIMARY KEY (id)) WITH ('bucket' = '1')",
            &[],
        )
        .await
        .unwrap();
    let t2 = s
        .catalog
        .load_table(&Identifier::parse("db.v2").unwrap())
        .await
        .unwrap();
    assert_eq!(
        t2.schema().field("v").unwrap().data_type.to_string(),
        "VARIANT"
    );
}

/// `tidelake scan --format jsonl` keeps a map's NULL values and writes a map whose keys are not
/// strings as a list of `{"key", "value"}` objects (JSON object keys are strings).
#[tokio::test]
async fn the_cli_prints_maps_with_null_values_and_any_key_type_as_json() {
    use arrow::array::{ArrayRef, Int32Builder, Int64Array, MapBuilder, StringBuilder};
    let s = Scratch::new();
    let t = s
        .create(
            "db.m",
            "id BIGINT NOT NULL, by_name MAP<STRING, INT>, by_id MAP<INT, STRING>",
            &["id"],
            &[],
            &[("bucket", "1")],
        )
        .await;
    let mut by_name = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
    by_name.keys().append_value("x");
    by_name.values().append_value(1);
    by_name.keys().append_value("y");
    by_name.values().append_null();
    by_name.append(true).unwrap();
    let mut by_id = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
    by_id.keys().append_value(7);
    by_id.values().append_null();
    by_id.keys().append_value(8);
    by_id.values().append_value("a");
    by_id.append(true).unwrap();
    let batch = arrow::array::RecordBatch::try_from_iter([
        (
            "id",
            std::sync::Arc::new(Int64Array::from(vec![1])) as ArrayRef,
        ),
        ("by_name", std::sync::Arc::new(by_name.finish()) as ArrayRef),
        ("by_id", std::sync::Arc::new(by_id.finish()) as ArrayRef),
    ])
    .unwrap();
    t.write_batches(&[batch], WriteOptions::default(), None)
        .await
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidelake"))
        .arg("--warehouse")
        .arg(s.path())
        .args(["scan", "db.m", "--format", "jsonl"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        line,
        json!({
            "id": 1,
            "by_name": {"x": 1, "y": null},
            "by_id": [{"key": 7, "value": null}, {"key": 8, "value": "a"}],
        })
    );
}
