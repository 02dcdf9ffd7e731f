//! paimon-rust (`pypaimon-rust` 0.4 from PyPI) as a further implementation of the format. Its
//! primary-key files are thin (no `_KEY_` columns, Paimon's `data-file.thin-mode`): tidelake reads
//! their keys from the value columns, as Java's `FormatReaderMapping.trimKeyFields` does, merges
//! them with its own files, compacts them, and paimon-rust and pypaimon read the result. Under
//! `data-file.thin-mode` tidelake writes thin files itself, which both read.

use serde_json::{json, Value};

use crate::common::{paimon_rows, read_rows, sorted, Scratch};

/// Runs `tests/interop/paimon_rust_io.py` and parses its JSON output.
fn paimon_rust(args: &[&str]) -> Value {
    crate::common::interop("paimon_rust_io.py", args)
}

#[tokio::test]
async fn thin_primary_key_files_of_paimon_rust_read_merge_and_compact() {
    let s = Scratch::new();
    let name = "db.thin";
    let t = s
        .create(
            name,
            "id BIGINT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "2")],
        )
        .await;
    crate::common::write_rows(
        &t,
        &[json!({"id": 1, "v": "a"}), json!({"id": 2, "v": "b"})],
    )
    .await;
    paimon_rust(&[
        "write",
        s.path(),
        name,
        &json!([{"id": 2, "v": "b-rs"}, {"id": 3, "v": null}, {"id": 4, "v": "d-rs"}]).to_string(),
    ]);
    // Its files are thin; ours are not.
    let files = paimon_rust(&["files", s.path(), name]);
    let thin = files
        .as_object()
        .unwrap()
        .values()
        .filter(|cols| !cols.as_array().unwrap().contains(&json!("_KEY_id")))
        .count();
    assert!(thin > 0, "paimon-rust wrote no thin file: {files}");
    crate::common::write_rows(&t, &[json!({"id": 4, "v": "d"})]).await;
    let want = sorted(vec![
        vec![json!(1), json!("a")],
        vec![json!(2), json!("b-rs")],
        vec![json!(3), json!(null)],
        vec![json!(4), json!("d")],
    ]);
    assert_eq!(read_rows(&t, None).await, want);
    // A point query and a key range read the keys of thin files too.
    let engine = tidelake::sql::SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let session = tidelake::sql::SqlSession::default();
    for (sql, rows) in [
        (
            "SELECT v FROM db.thin WHERE id = 2",
            vec![vec![json!("b-rs")]],
        ),
        (
            "SELECT v FROM db.thin WHERE id = 3",
            vec![vec![json!(null)]],
        ),
        (
            "SELECT id FROM db.thin WHERE id >= 2 AND id < 4 ORDER BY id",
            vec![vec![json!(2)], vec![json!(3)]],
        ),
    ] {
        let out = engine
            .execute(&session, sql, &[])
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(crate::common::rows(&out), rows, "{sql}");
    }
    assert_eq!(paimon_rows(s.path(), name, None), want);
    t.compact(true, vec![]).await.unwrap();
    assert_eq!(read_rows(&t, None).await, want);
    let theirs = paimon_rust(&["read", s.path(), name]);
    let got: Vec<Vec<Value>> = theirs["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().clone())
        .collect();
    assert_eq!(sorted(got), want);
    assert_eq!(paimon_rows(s.path(), name, None), want);
}

#[tokio::test]
async fn thin_files_written_under_data_file_thin_mode_are_read_by_paimon_rust_and_pypaimon() {
    let s = Scratch::new();
    let name = "db.ours";
    let t = s
        .create(
            name,
            "id BIGINT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "2"), ("data-file.thin-mode", "true")],
        )
        .await;
    crate::common::write_rows(
        &t,
        &[
            json!({"id": 1, "v": "a"}),
            json!({"id": 2, "v": "b"}),
            json!({"id": 3, "v": "c"}),
        ],
    )
    .await;
    crate::common::write_rows(
        &t,
        &[json!({"id": 2, "v": "b2"}), json!({"id": 4, "v": null})],
    )
    .await;
    // Every file is thin: the key is only in its value column.
    let files = paimon_rust(&["files", s.path(), name]);
    let files = files.as_object().unwrap();
    assert!(files.len() >= 2, "{files:?}");
    for (file, cols) in files {
        let cols = cols.as_array().unwrap();
        assert!(!cols.contains(&json!("_KEY_id")), "{file}: {cols:?}");
        assert!(cols.contains(&json!("id")), "{file}: {cols:?}");
    }
    let want = sorted(vec![
        vec![json!(1), json!("a")],
        vec![json!(2), json!("b2")],
        vec![json!(3), json!("c")],
        vec![json!(4), json!(null)],
    ]);
    assert_eq!(read_rows(&t, None).await, want);
    let theirs = |wh: &str| -> Vec<Vec<Value>> {
        let out = paimon_rust(&["read", wh, name]);
        sorted(
            out["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_array().unwrap().clone())
                .collect(),
        )
    };
    assert_eq!(theirs(s.path()), want);
    assert_eq!(paimon_rows(s.path(), name, None), want);
    // Compaction writes thin files too, and everyone reads the same.
    t.compact(true, vec![]).await.unwrap();
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(theirs(s.path()), want);
    assert_eq!(paimon_rows(s.path(), name, None), want);
    let files = paimon_rust(&["files", s.path(), name]);
    for (file, cols) in files.as_object().unwrap() {
        assert!(
            !cols.as_array().unwrap().contains(&json!("_KEY_id")),
            "{file}"
        );
    }
}
