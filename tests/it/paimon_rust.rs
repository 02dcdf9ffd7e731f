//! paimon-rust (`pypaimon-rust` 0.4 from PyPI) as a further implementation of the format. Its
//! primary-key files are thin (no `_KEY_` columns, Paimon's `data-file.thin-mode`): tidelake reads
//! their keys from the value columns, as Java's `FormatReaderMapping.trimKeyFields` does, merges
//! them with its own files, compacts them, and paimon-rust and pypaimon read the result.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{paimon_rows, python, read_rows, sorted, Scratch};

/// Runs `tests/interop/paimon_rust_io.py` and parses its JSON output.
fn paimon_rust(args: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/paimon_rust_io.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "paimon-rust {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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
