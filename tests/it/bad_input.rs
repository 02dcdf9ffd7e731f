//! Bad input gets a clear error naming the object, and changes nothing.

use std::process::Command;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::json;
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::{ErrorKind, Identifier};

use crate::common::{batch, copy_dir, read_rows, Scratch};

fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in walk(dir) {
        out.push(e.strip_prefix(dir).unwrap().display().to_string());
    }
    out.sort();
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

async fn table_with_data(s: &Scratch) -> tidelake::Table {
    let t = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, name STRING",
            &["id"],
            &[],
            &[("bucket", "2")],
        )
        .await;
    crate::common::write_rows(
        &t,
        &[json!({"id": 1, "name": "a"}), json!({"id": 2, "name": "b"})],
    )
    .await;
    crate::common::write_rows(&t, &[json!({"id": 3, "name": "c"})]).await;
    t
}

#[tokio::test]
async fn wrong_types_and_missing_keys_are_rejected_without_a_commit() {
    let s = Scratch::new();
    let t = table_with_data(&s).await;
    let before_rows = read_rows(&t, None).await;
    let before_files = listing(s.dir.path());

    let wrong = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(StringArray::from(vec!["x"])),
            Arc::new(StringArray::from(vec!["y"])),
        ],
    )
    .unwrap();
    let err = t
        .write_batches(&[wrong], WriteOptions::default(), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.to_string().contains("column 'id'") && err.to_string().contains("db.t"),
        "{err}"
    );

    let null_key = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![Some(9), None])),
            Arc::new(StringArray::from(vec!["y", "z"])),
        ],
    )
    .unwrap();
    let err = t
        .write_batches(&[null_key], WriteOptions::default(), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("primary key column 'id'"), "{err}");

    // A good batch followed by a bad one: the whole write is refused.
    let good = batch(&t, &[json!({"id": 10, "name": "ok"})]);
    let unknown = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("nope", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![5])),
            Arc::new(StringArray::from(vec!["y"])),
        ],
    )
    .unwrap();
    let err = t
        .write_batches(&[good, unknown], WriteOptions::default(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no column 'nope'"), "{err}");

    let err = t
        .write_batches(
            &[batch(&t, &[json!({"id": 4, "name": "x"})])],
            WriteOptions {
                row_kind_column: Some("op".into()),
            },
            None,
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("row-kind column 'op' is missing"),
        "{err}"
    );

    assert_eq!(read_rows(&t, None).await, before_rows);
    assert_eq!(t.snapshot_manager().list_ids().await.unwrap(), vec![1, 2]);
    assert_eq!(
        listing(s.dir.path()),
        before_files,
        "no file written for refused input"
    );
}

#[tokio::test]
async fn invalid_row_kinds_are_rejected() {
    let s = Scratch::new();
    let t = s
        .create("db.a", "id BIGINT NOT NULL, op STRING", &[], &[], &[])
        .await;
    let kind_schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("kind", DataType::Utf8, true),
    ]));
    let b = RecordBatch::try_new(
        std::sync::Arc::clone(&kind_schema),
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["-D"])),
        ],
    )
    .unwrap();
    let err = t
        .write_batches(
            &[b],
            WriteOptions {
                row_kind_column: Some("kind".into()),
            },
            None,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("append table"), "{err}");
    let b = RecordBatch::try_new(
        kind_schema,
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["upsert"])),
        ],
    )
    .unwrap();
    let err = t
        .write_batches(
            &[b],
            WriteOptions {
                row_kind_column: Some("kind".into()),
            },
            None,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("'upsert'"), "{err}");
    assert!(t.snapshot_manager().list_ids().await.unwrap().is_empty());
}

#[tokio::test]
async fn unknown_tables_and_snapshots_are_not_found() {
    let s = Scratch::new();
    let t = table_with_data(&s).await;
    let err = s
        .catalog
        .load_table(&Identifier::new("db", "missing"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("db.missing"), "{err}");
    let err = t.read_all(SnapshotSelector::Id(9), None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(
        err.to_string().contains("snapshot 9")
            && err.to_string().contains("snapshots 1 to 2 exist"),
        "{err}"
    );
    let err = t
        .read_all(SnapshotSelector::Latest, Some(&["nope".to_string()]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no column 'nope'"), "{err}");
}

#[tokio::test]
async fn truncated_snapshot_and_corrupt_manifest_name_the_file_and_block_commits() {
    let s = Scratch::new();
    table_with_data(&s).await;
    let table_dir = s.dir.path().join("db.db/t");

    // Truncated snapshot file.
    let broken = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), broken.path());
    let snap = broken.path().join("db.db/t/snapshot/snapshot-2");
    let content = std::fs::read(&snap).unwrap();
    std::fs::write(&snap, &content[..content.len() / 2]).unwrap();
    let catalog = tidelake::Catalog::open(broken.path().to_str().unwrap()).unwrap();
    let t = catalog
        .load_table(&Identifier::new("db", "t"))
        .await
        .unwrap();
    let before = listing(broken.path());
    let err = t
        .read_all(SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("snapshot/snapshot-2"), "{err}");
    assert_eq!(err.kind(), ErrorKind::Internal);
    let err = t
        .write_batches(
            &[batch(&t, &[json!({"id": 7, "name": "z"})])],
            WriteOptions::default(),
            None,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("snapshot-2"), "{err}");
    // The older snapshot still reads; only the refused write's data file may be new.
    assert_eq!(read_rows(&t, Some(1)).await.len(), 2);
    let after = listing(broken.path());
    assert!(
        after
            .iter()
            .filter(|f| !before.contains(f))
            .all(|f| f.ends_with(".parquet")),
        "{after:?}"
    );
    assert!(!after.iter().any(|f| f.ends_with("snapshot-3")));

    // Corrupt manifest.
    let broken = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), broken.path());
    let manifest = std::fs::read_dir(table_dir.join("manifest"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with("manifest-") && !n.starts_with("manifest-list-"))
        .unwrap();
    std::fs::write(
        broken.path().join("db.db/t/manifest").join(&manifest),
        b"Obj\x01garbage",
    )
    .unwrap();
    let catalog = tidelake::Catalog::open(broken.path().to_str().unwrap()).unwrap();
    let t = catalog
        .load_table(&Identifier::new("db", "t"))
        .await
        .unwrap();
    let err = t
        .read_all(SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&manifest), "{err}");
    assert_eq!(err.kind(), ErrorKind::Internal);
}

/// A read command on a mistyped local warehouse says which path is missing and creates nothing;
/// `create-table` creates the warehouse.
#[test]
fn cli_read_commands_do_not_create_a_mistyped_warehouse() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("wherehouse");
    let exe = env!("CARGO_BIN_EXE_tidelake");
    for args in [&["tables"][..], &["snapshots", "db.t"], &["scan", "db.t"]] {
        let out = Command::new(exe)
            .arg("--warehouse")
            .arg(&missing)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains("wherehouse") && err.contains("does not exist"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!missing.exists(), "{args:?} created the warehouse");
    }
    let out = Command::new(exe)
        .arg("--warehouse")
        .arg(&missing)
        .args(["create-table", "db.t", "--schema", "id BIGINT"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(missing.is_dir());
}

#[test]
fn cli_reports_one_line_and_commits_nothing_on_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    let exe = env!("CARGO_BIN_EXE_tidelake");
    let run = |args: &[&str]| {
        Command::new(exe)
            .arg("--warehouse")
            .arg(&wh)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        "create-table",
        "db.t",
        "--schema",
        "id BIGINT NOT NULL, name STRING, dt STRING",
        "--primary-key",
        "id,dt",
        "--partition-keys",
        "dt",
        "--option",
        "bucket=2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let good = dir.path().join("good.csv");
    std::fs::write(
        &good,
        "id,name,dt,op\n1,a,2024-01-01,+I\n2,b,2024-01-02,+I\n",
    )
    .unwrap();
    let out = run(&[
        "load",
        "db.t",
        good.to_str().unwrap(),
        "--row-kind-column",
        "op",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "id,name,dt,op\n3,c,2024-01-01,+I\nnot-a-number,d,2024-01-01,+I\n",
    )
    .unwrap();
    let out = run(&[
        "load",
        "db.t",
        bad.to_str().unwrap(),
        "--row-kind-column",
        "op",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("bad.csv"),
        "{stderr}"
    );
    let out = run(&["scan", "db.t", "--format", "csv"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        3,
        "header + the two good rows"
    );
    let out = run(&["snapshots", "db.t"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        2,
        "header + one snapshot"
    );
    let out = run(&["scan", "db.nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("db.nope"));
}

/// Options that change what a table's files mean and that tidelake does not implement are refused
/// at CREATE and ALTER with the option named, and a table that carries one (written by another
/// engine) is refused on read and on write instead of answering wrong rows.
#[tokio::test]
async fn unimplemented_table_modes_are_refused_not_ignored() {
    let s = Scratch::new();
    let engine = tidelake::sql::SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let session = tidelake::sql::SqlSession::default();
    s.catalog.create_database("default", true).await.unwrap();
    for key in ["index-file-in-data-file-dir"] {
        let sql = format!(
            "CREATE TABLE dv (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1', '{key}' = 'true')"
        );
        let e = engine
            .execute_update(&session, &sql, &[])
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains(&format!("option '{key}' = 'true'")),
            "{key}: {e}"
        );
        assert!(s
            .catalog
            .load_table(&Identifier::parse("default.dv").unwrap())
            .await
            .is_err());
    }
    let t = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "1")],
        )
        .await;
    t.write_batches(
        &[batch(&t, &[json!({"id": 1, "v": "a"})])],
        WriteOptions::default(),
        None,
    )
    .await
    .unwrap();
    let e = engine
        .execute_update(
            &session,
            "ALTER TABLE db.t SET TBLPROPERTIES ('index-file-in-data-file-dir' = 'true')",
            &[],
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("'index-file-in-data-file-dir'"),
        "{e}"
    );
    assert_eq!(
        t.schema_manager().list_ids().await.unwrap(),
        vec![0],
        "no new schema"
    );
    // A schema written by another engine that turns data evolution on.
    let mut next = t.schema().as_ref().clone();
    next.id = 1;
    next.options
        .insert("index-file-in-data-file-dir".into(), "true".into());
    assert!(t.schema_manager().create(&next).await.unwrap());
    let id = Identifier::parse("db.t").unwrap();
    let loaded = s.catalog.load_table(&id).await.unwrap();
    let e = loaded
        .read_all(SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("table db.t")
            && e.to_string().contains("'index-file-in-data-file-dir'"),
        "{e}"
    );
    let written = loaded
        .write_batches(
            &[batch(&t, &[json!({"id": 2, "v": "b"})])],
            WriteOptions::default(),
            None,
        )
        .await;
    assert_eq!(written.unwrap_err().kind(), ErrorKind::Unsupported);
    let Err(e) = engine.execute(&session, "SELECT * FROM db.t", &[]).await else {
        panic!("a query of db.t must be refused");
    };
    assert!(
        e.to_string().contains("'index-file-in-data-file-dir'"),
        "{e}"
    );
}
