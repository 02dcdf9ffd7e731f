//! Crash safety: a writer that dies between any two storage writes of a commit (data file,
//! manifest, manifest lists, snapshot, hint) leaves a table that reads either the old or the new
//! state, never a mix; orphan removal takes the leftovers and writing goes on.
//!
//! The "death" is injected: after N successful puts every storage call of the dying writer fails,
//! then the table is reopened on the surviving storage.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::json;
use tidelake::io::FileIo;
use tidelake::table::WriteOptions;
use tidelake::{Catalog, Identifier, TableDefinition};

use crate::common::{batch, read_rows};

#[tokio::test]
async fn a_writer_killed_between_commit_steps_never_leaves_a_mix() {
    let mut outcomes = std::collections::BTreeSet::new();
    for crash_after in 0..8 {
        let inner = Arc::new(object_store::memory::InMemory::new());
        let survivor = FileIo::from_store(Arc::clone(&inner) as _, "memory://");
        let catalog = Catalog::new(survivor.clone());
        let def = TableDefinition {
            columns: TableDefinition::parse_columns("id INT NOT NULL, v STRING").unwrap(),
            primary_keys: vec!["id".into()],
            options: [("bucket", "1"), ("commit.max-retries", "0")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let id = Identifier::new("db", "t");
        let t = catalog.create_table(&id, &def, false).await.unwrap();
        crate::common::write_rows(
            &t,
            &[json!({"id": 1, "v": "old"}), json!({"id": 2, "v": "old"})],
        )
        .await;
        let old = read_rows(&t, None).await;

        let dying = crate::faults::FaultyStore::new(Arc::clone(&inner));
        let doomed = Catalog::new(FileIo::from_store(Arc::clone(&dying) as _, "memory://"))
            .load_table(&id)
            .await
            .unwrap();
        dying.puts_left.store(crash_after, Ordering::SeqCst);
        let new_rows = [json!({"id": 2, "v": "new"}), json!({"id": 3, "v": "new"})];
        let result = doomed
            .write_batches(&[batch(&doomed, &new_rows)], WriteOptions::default(), None)
            .await;

        // Reopen on what survived.
        let t = catalog.load_table(&id).await.unwrap();
        let rows = read_rows(&t, None).await;
        let new = vec![
            vec![json!(1), json!("old")],
            vec![json!(2), json!("new")],
            vec![json!(3), json!("new")],
        ];
        assert!(
            rows == old || rows == new,
            "crash after {crash_after} puts: {rows:?}"
        );
        if result.is_ok() {
            assert_eq!(rows, new, "an acknowledged commit is durable");
        }
        outcomes.insert(rows == new);
        // Leftovers of the dead writer are orphans; removing them changes nothing visible.
        t.remove_orphan_files(i64::MAX, false).await.unwrap();
        assert!(t
            .remove_orphan_files(i64::MAX, true)
            .await
            .unwrap()
            .files
            .is_empty());
        assert_eq!(read_rows(&t, None).await, rows);
        // Writing goes on.
        crate::common::write_rows(&t, &[json!({"id": 9, "v": "after"})]).await;
        assert_eq!(read_rows(&t, None).await.len(), rows.len() + 1);
    }
    assert_eq!(
        outcomes.len(),
        2,
        "both the old and the new state were observed across crash points"
    );
}

/// The same with a real process: the CLI's `load` is killed (aborted) before each of its puts in
/// turn, then the table is reopened by another process.
#[tokio::test]
async fn a_cli_load_killed_at_each_step_leaves_old_or_new_state() {
    let exe = env!("CARGO_BIN_EXE_tidelake");
    let mut seen_new = false;
    let mut seen_old = false;
    for crash_after in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let wh = dir.path().join("wh");
        let run = |args: &[&str], crash: Option<i64>| {
            let mut cmd = std::process::Command::new(exe);
            cmd.current_dir(dir.path())
                .arg("--warehouse")
                .arg(&wh)
                .args(args);
            if let Some(n) = crash {
                cmd.env("TIDELAKE_CRASH_AFTER_PUTS", n.to_string());
            }
            cmd.output().unwrap()
        };
        assert!(run(
            &[
                "create-table",
                "db.t",
                "--schema",
                "id INT NOT NULL, v STRING",
                "--primary-key",
                "id",
                "--option",
                "bucket=2"
            ],
            None
        )
        .status
        .success());
        let old_csv = dir.path().join("old.csv");
        std::fs::write(&old_csv, "id,v\n1,old\n2,old\n").unwrap();
        assert!(run(&["load", "db.t", old_csv.to_str().unwrap()], None)
            .status
            .success());
        let new_csv = dir.path().join("new.csv");
        std::fs::write(&new_csv, "id,v\n2,new\n3,new\n").unwrap();
        let out = run(
            &["load", "db.t", new_csv.to_str().unwrap()],
            Some(crash_after),
        );
        let catalog = tidelake::Catalog::open(wh.to_str().unwrap()).unwrap();
        let t = catalog
            .load_table(&Identifier::new("db", "t"))
            .await
            .unwrap();
        let rows = read_rows(&t, None).await;
        let old = vec![vec![json!(1), json!("old")], vec![json!(2), json!("old")]];
        let new = vec![
            vec![json!(1), json!("old")],
            vec![json!(2), json!("new")],
            vec![json!(3), json!("new")],
        ];
        assert!(
            rows == old || rows == new,
            "killed after {crash_after} puts: {rows:?}"
        );
        if out.status.success() {
            assert_eq!(rows, new, "an acknowledged load is durable");
        }
        seen_new |= rows == new;
        seen_old |= rows == old;
        t.remove_orphan_files(i64::MAX, false).await.unwrap();
        assert_eq!(read_rows(&t, None).await, rows);
        assert!(
            run(&["load", "db.t", old_csv.to_str().unwrap()], None)
                .status
                .success(),
            "writing goes on"
        );
    }
    assert!(
        seen_old && seen_new,
        "both outcomes observed across kill points"
    );
}
