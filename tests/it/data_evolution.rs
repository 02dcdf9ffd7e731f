//! Data-evolution tables (`data-evolution.enabled` on row-tracking append tables), written by
//! pypaimon: column updates by row id (files holding only the updated columns over the same row
//! ids), deletes by row id (deletion vectors of each group's oldest file), a column added between
//! them. tidelake reads every snapshot as pypaimon does, with the rows' ids and sequence numbers,
//! through SQL projections and filters; appends to the table and pypaimon reads them; streaming
//! an update is refused by name.

use serde_json::{json, Value};
use tidelake::sql::SqlEngine;
use tidelake::Identifier;

use crate::common::{paimon, paimon_rows, read_rows, sql, Scratch};

/// pypaimon's data-evolution table `db.de` (id, a, b, c; d added later), in six snapshots:
/// 1-2 appends, 3 an update of b for row ids 1 and 3, 4 a delete of row ids 0 and 4, 5 an
/// append after `d` was added, 6 an update of c and d for row id 2.
fn pypaimon_table(s: &Scratch) {
    let wh = s.path();
    paimon(&[
        "create",
        wh,
        "db.de",
        &json!({"columns": [["id", "int64", true], ["a", "string", true], ["b", "int64", true],
                            ["c", "float64", true]],
                "options": {"row-tracking.enabled": "true", "data-evolution.enabled": "true",
                            "deletion-vectors.enabled": "true"}})
        .to_string(),
    ]);
    let write = |rows: Value| paimon(&["write", wh, "db.de", &rows.to_string()]);
    write(
        json!([{"id": 1, "a": "x", "b": 10, "c": 1.5}, {"id": 2, "a": "y", "b": 20, "c": 2.5},
                 {"id": 3, "a": "z", "b": 30, "c": 3.5}]),
    );
    write(json!([{"id": 4, "a": "p", "b": 40, "c": 4.5}, {"id": 5, "a": "q", "b": 50, "c": 5.5}]));
    let update = |cols: Value| paimon(&["update-by-row-id", wh, "db.de", &cols.to_string()]);
    update(json!({"_ROW_ID": [1, 3], "b": [200, 400]}));
    paimon(&["delete-by-row-id", wh, "db.de", "[0, 4]"]);
    paimon(&["add-column", wh, "db.de", "d", "STRING"]);
    write(json!([{"id": 6, "a": "r", "b": 60, "c": 6.5, "d": "dd"}]));
    update(json!({"_ROW_ID": [2], "c": [22.0], "d": ["d2"]}));
}

async fn load(s: &Scratch) -> tidelake::Table {
    s.catalog
        .load_table(&Identifier::parse("db.de").unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn pypaimon_column_updates_and_deletes_by_row_id_read_as_pypaimon_reads_them() {
    let s = Scratch::new();
    pypaimon_table(&s);
    let t = load(&s).await;
    for snapshot in 1..=6 {
        // pypaimon reads an old snapshot with that snapshot's schema, before d was added.
        let width = if snapshot < 5 { 4 } else { 5 };
        let ours: Vec<Vec<Value>> = read_rows(&t, Some(snapshot))
            .await
            .into_iter()
            .map(|r| r[..width].to_vec())
            .collect();
        assert_eq!(
            ours,
            paimon_rows(s.path(), "db.de", Some(snapshot)),
            "snapshot {snapshot}"
        );
    }
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    // Each column from the newest file that wrote it; row ids and sequence numbers by group.
    let rows = sql(
        &engine,
        "SELECT id, a, b, c, d, \"_ROW_ID\", \"_SEQUENCE_NUMBER\" FROM \"db\".\"de$row_tracking\" ORDER BY id",
    )
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            vec![
                json!(2),
                json!("y"),
                json!(200),
                json!(2.5),
                Value::Null,
                json!(1),
                json!(6)
            ],
            vec![
                json!(3),
                json!("z"),
                json!(30),
                json!(22),
                json!("d2"),
                json!(2),
                json!(6)
            ],
            vec![
                json!(4),
                json!("p"),
                json!(400),
                json!(4.5),
                Value::Null,
                json!(3),
                json!(3)
            ],
            vec![
                json!(6),
                json!("r"),
                json!(60),
                json!(6.5),
                json!("dd"),
                json!(5),
                json!(5)
            ],
        ]
    );
    // Projections that read one file of a group, none (a count), and a filter on an updated column.
    let ids = sql(&engine, "SELECT b FROM db.de WHERE b > 100 ORDER BY b")
        .await
        .unwrap();
    assert_eq!(ids, vec![vec![json!(200)], vec![json!(400)]]);
    let count = sql(&engine, "SELECT count(*) FROM db.de").await.unwrap();
    assert_eq!(count, vec![vec![json!(4)]]);
    let only_d = sql(
        &engine,
        "SELECT d FROM db.de WHERE d IS NOT NULL ORDER BY d",
    )
    .await
    .unwrap();
    assert_eq!(only_d, vec![vec![json!("d2")], vec![json!("dd")]]);

    // UPDATE (column files by row id) is not written yet: refused by name, nothing changes.
    let e = sql(&engine, "UPDATE db.de SET b = 0 WHERE id = 2")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), tidelake::ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("data-evolution table db.de"), "{e}");
    assert_eq!(read_rows(&t, None).await.len(), 4);

    // tidelake appends to the table; pypaimon reads the new rows with their row ids.
    sql(&engine, "INSERT INTO db.de VALUES (7, 's', 70, 7.5, 'e')")
        .await
        .unwrap();
    let t = load(&s).await;
    let ours = read_rows(&t, None).await;
    assert_eq!(ours.len(), 5);
    assert_eq!(ours, paimon_rows(s.path(), "db.de", None));
    let last = sql(
        &engine,
        "SELECT \"_ROW_ID\" FROM \"db\".\"de$row_tracking\" WHERE id = 7",
    )
    .await
    .unwrap();
    assert_eq!(last, vec![vec![json!(6)]]);
}

#[tokio::test]
async fn streaming_a_column_update_is_refused_by_name_and_appends_stream() {
    let s = Scratch::new();
    pypaimon_table(&s);
    let t = load(&s).await;
    use tidelake::table::changes::collect_range;
    let appended = collect_range(t.clone(), None, 2, 2).await.unwrap();
    let rows: usize = appended.iter().map(|(_, b)| b.num_rows()).sum();
    assert_eq!(rows, 2);
    let e = collect_range(t.clone(), None, 3, 3).await.unwrap_err();
    assert_eq!(e.kind(), tidelake::ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("db.de") && e.to_string().contains("snapshot 3"),
        "{e}"
    );
}

#[tokio::test]
async fn data_evolution_without_row_tracking_is_refused_at_create() {
    let s = Scratch::new();
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    sql(&engine, "CREATE DATABASE db").await.unwrap();
    let e = sql(
        &engine,
        "CREATE TABLE db.x (id BIGINT, v STRING) WITH ('data-evolution.enabled' = 'true')",
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), tidelake::ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("row-tracking.enabled"), "{e}");
    assert!(s
        .catalog
        .load_table(&Identifier::parse("db.x").unwrap())
        .await
        .is_err());
}

/// pypaimon's multimodal table `db.blob` (id, name, img BLOB): two appends, then img updated for
/// row id 1 (a partial `.blob` file of two rows, row 0 absent).
fn pypaimon_blob_table(s: &Scratch, options: Value) {
    let wh = s.path();
    paimon(&[
        "create",
        wh,
        "db.blob",
        &json!({"columns": [["id", "int64", true], ["name", "string", true],
                            ["img", "large_binary", true]],
                "options": options})
        .to_string(),
    ]);
    let write = |rows: Value| paimon(&["write", wh, "db.blob", &rows.to_string()]);
    write(
        json!([{"id": 1, "name": "a", "img": "010203"}, {"id": 2, "name": "b", "img": null},
                 {"id": 3, "name": "c", "img": hex("hello blob")}]),
    );
    write(json!([{"id": 4, "name": "d", "img": hex("fourth")}]));
    let update = json!({"_ROW_ID": [1], "img": [hex("UPDATED")]});
    paimon(&["update-by-row-id", wh, "db.blob", &update.to_string()]);
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn blob_columns_read_from_their_blob_files_as_pypaimon_reads_them() {
    let s = Scratch::new();
    pypaimon_blob_table(
        &s,
        json!({"row-tracking.enabled": "true", "data-evolution.enabled": "true"}),
    );
    let t = s
        .catalog
        .load_table(&Identifier::parse("db.blob").unwrap())
        .await
        .unwrap();
    let dir = std::path::Path::new(s.path()).join("db.db/blob");
    assert!(crate::common::files_under(&dir)
        .iter()
        .any(|f| f.ends_with(".blob")));
    for snapshot in 1..=3 {
        assert_eq!(
            read_rows(&t, Some(snapshot)).await,
            paimon_rows(s.path(), "db.blob", Some(snapshot)),
            "snapshot {snapshot}"
        );
    }
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let rows = sql(
        &engine,
        "SELECT id, img, \"_ROW_ID\" FROM \"db\".\"blob$row_tracking\" ORDER BY id",
    )
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            vec![json!(1), json!("010203"), json!(0)],
            vec![json!(2), json!(hex("UPDATED")), json!(1)],
            vec![json!(3), json!(hex("hello blob")), json!(2)],
            vec![json!(4), json!(hex("fourth")), json!(3)],
        ]
    );
    // Writing a BLOB column is refused by name; nothing changes.
    let e = sql(&engine, "INSERT INTO db.blob VALUES (5, 'e', NULL)")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), tidelake::ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("'img'"), "{e}");
    assert_eq!(read_rows(&t, None).await.len(), 4);
}

#[tokio::test]
async fn blob_columns_read_as_descriptors_name_the_blob_file() {
    let s = Scratch::new();
    pypaimon_blob_table(
        &s,
        json!({"row-tracking.enabled": "true", "data-evolution.enabled": "true",
               "blob-as-descriptor": "true"}),
    );
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let rows = sql(&engine, "SELECT id, img FROM db.blob WHERE id = 4")
        .await
        .unwrap();
    // Version 2, "BLOBDESC" backwards (little-endian), then the file's path, offset and length.
    let hex_value = rows[0][1].as_str().unwrap().to_string();
    let bytes: Vec<u8> = (0..hex_value.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex_value[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(&bytes[..9], b"\x02CSEDBOLB");
    let uri_len = i32::from_le_bytes(bytes[9..13].try_into().unwrap()) as usize;
    let uri = std::str::from_utf8(&bytes[13..13 + uri_len]).unwrap();
    assert!(
        uri.ends_with(".blob") && uri.contains("db.db/blob/bucket-0/"),
        "{uri}"
    );
    let tail = &bytes[13 + uri_len..];
    assert_eq!(i64::from_le_bytes(tail[8..16].try_into().unwrap()), 6);
    let file = std::fs::read(uri.trim_start_matches("file://")).expect(uri);
    let offset = i64::from_le_bytes(tail[..8].try_into().unwrap()) as usize;
    assert_eq!(&file[offset..offset + 6], b"fourth");
}

#[tokio::test]
async fn blob_columns_only_in_data_evolution_tables_and_never_nested() {
    let s = Scratch::new();
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    sql(&engine, "CREATE DATABASE db").await.unwrap();
    let dir = std::path::Path::new(s.path()).join("db.db");
    let write_schema = |name: &str, ty: &str, options: &str| {
        let d = dir.join(name).join("schema");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("schema-0"),
            format!(
                r#"{{"version": 3, "id": 0, "fields": [
                {{"id": 0, "name": "id", "type": "BIGINT NOT NULL"}},
                {{"id": 1, "name": "picture", "type": "{ty}"}}],
                "highestFieldId": 1, "partitionKeys": [], "primaryKeys": [],
                "options": {options}, "timeMillis": 0}}"#
            ),
        )
        .unwrap();
    };
    let de = r#"{"row-tracking.enabled": "true", "data-evolution.enabled": "true"}"#;
    write_schema("plain", "BLOB", "{}");
    write_schema("nested", "ARRAY<BLOB>", de);
    write_schema(
        "inline",
        "BYTES",
        &de.replace('}', r#", "blob-field": "picture"}"#),
    );
    for (name, kind, words) in [
        (
            // Another engine's schema that breaks Paimon's rules is a corrupt schema file.
            "plain",
            tidelake::ErrorKind::Internal,
            "schema-0: Data evolution",
        ),
        ("nested", tidelake::ErrorKind::Unsupported, "'picture'"),
        ("inline", tidelake::ErrorKind::Unsupported, "'blob-field'"),
    ] {
        let Err(e) = engine
            .execute(
                &Default::default(),
                &format!("SELECT * FROM db.{name}"),
                &[],
            )
            .await
        else {
            panic!("db.{name} must be refused");
        };
        assert_eq!(e.kind(), kind, "{name}: {e}");
        assert!(e.to_string().contains(words), "{name}: {e}");
    }
}

/// A damaged `.blob` file, and a column file gone from its row-id group, are refused naming the
/// file; the table's other groups and the metadata stay as they were.
#[tokio::test]
async fn a_damaged_blob_file_or_a_missing_column_file_is_refused_naming_it() {
    let s = Scratch::new();
    pypaimon_blob_table(
        &s,
        json!({"row-tracking.enabled": "true", "data-evolution.enabled": "true"}),
    );
    let dir = std::path::Path::new(s.path()).join("db.db/blob/bucket-0");
    let blobs: Vec<String> = crate::common::files_under(&dir)
        .into_iter()
        .filter(|f| f.ends_with(".blob"))
        .collect();
    assert_eq!(blobs.len(), 3);
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    // Each blob file damaged in turn: one flipped byte inside its first record's payload or CRC.
    for name in &blobs {
        let path = dir.join(name);
        let good = std::fs::read(&path).unwrap();
        let mut bad = good.clone();
        bad[5] ^= 0x41;
        std::fs::write(&path, &bad).unwrap();
        let e = sql(&engine, "SELECT id, img FROM db.blob")
            .await
            .unwrap_err();
        assert!(e.to_string().contains(name.as_str()), "{name}: {e}");
        std::fs::write(&path, &good).unwrap();
    }
    assert_eq!(
        sql(&engine, "SELECT count(img) FROM db.blob")
            .await
            .unwrap(),
        vec![vec![json!(4)]]
    );
    // A column file of the update gone: the read of its group fails naming it.
    let s2 = Scratch::new();
    pypaimon_table(&s2);
    let t = load(&s2).await;
    let plan = t.new_scan().plan().await.unwrap();
    let update = plan.splits[0]
        .files
        .iter()
        .find(|f| f.write_cols.as_deref() == Some(&["b".to_string()][..]))
        .unwrap()
        .file_name
        .clone();
    let path = std::path::Path::new(s2.path())
        .join("db.db/de/bucket-0")
        .join(&update);
    std::fs::remove_file(&path).unwrap();
    let engine = SqlEngine::new(s2.catalog.clone(), Default::default()).unwrap();
    let e = sql(&engine, "SELECT b FROM db.de").await.unwrap_err();
    assert!(e.to_string().contains(&update), "{e}");
    // A projection that does not need it still reads.
    let ids = sql(&engine, "SELECT id FROM db.de ORDER BY id")
        .await
        .unwrap();
    assert_eq!(ids.len(), 4);
}
