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

/// A table in memory with `commits` small upserts into one bucket (so compactions delete files),
/// its `input` changelog kept per snapshot, and the rows every snapshot showed.
async fn history(
    inner: &Arc<object_store::memory::InMemory>,
    commits: i64,
    extra: &[(&str, &str)],
) -> (Catalog, Vec<(i64, Vec<Vec<serde_json::Value>>)>) {
    let catalog = Catalog::new(FileIo::from_store(Arc::clone(inner) as _, "memory://"));
    let mut options: std::collections::BTreeMap<String, String> = [
        ("bucket", "1"),
        ("changelog-producer", "input"),
        ("num-sorted-run.compaction-trigger", "2"),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    options
        .entry("snapshot.num-retained.min".into())
        .or_insert("1000".into());
    let def = TableDefinition {
        columns: TableDefinition::parse_columns("id INT NOT NULL, v STRING").unwrap(),
        primary_keys: vec!["id".into()],
        options,
        ..Default::default()
    };
    let id = Identifier::new("db", "t");
    let t = catalog.create_table(&id, &def, false).await.unwrap();
    for c in 0..commits {
        let rows: Vec<_> = (0..3)
            .map(|i| json!({"id": (c * 2 + i) % 5, "v": format!("c{c}")}))
            .collect();
        crate::common::write_rows(&t, &rows).await;
    }
    let sm = t.snapshot_manager();
    let mut states = Vec::new();
    for id in sm.list_ids().await.unwrap() {
        states.push((id, read_rows(&t, Some(id)).await));
    }
    (catalog, states)
}

/// Every snapshot from EARLIEST to LATEST reads exactly what it read before.
async fn every_retained_snapshot_reads(
    t: &tidelake::Table,
    states: &[(i64, Vec<Vec<serde_json::Value>>)],
    context: &str,
) {
    let sm = t.snapshot_manager();
    let (earliest, latest) = (
        sm.earliest_id().await.unwrap().unwrap(),
        sm.latest_id().await.unwrap().unwrap(),
    );
    assert_eq!(
        sm.list_ids().await.unwrap(),
        (earliest..=latest).collect::<Vec<_>>(),
        "{context}: snapshot ids are contiguous"
    );
    for id in earliest..=latest {
        let expected = &states.iter().find(|(s, _)| *s == id).unwrap().1;
        let got = t
            .read_all(tidelake::table::SnapshotSelector::Id(id), None)
            .await
            .unwrap_or_else(|e| panic!("{context}: snapshot {id} no longer reads: {e}"));
        assert_eq!(
            &crate::common::sorted(crate::common::rows(&got)),
            expected,
            "{context}: snapshot {id}"
        );
    }
}

/// A deleting operation of the lifecycle, run on a table.
#[derive(Debug, Clone, Copy)]
enum Cleanup {
    Expire,
    Rollback(i64),
}

impl Cleanup {
    async fn run(self, t: &tidelake::Table) -> tidelake::Result<()> {
        use tidelake::snapshot::expire::Retention;
        use tidelake::table::maintenance::RollbackTarget;
        let retention = Retention {
            min_retained: 3,
            max_retained: 3,
            time_retained_millis: 0,
            expire_limit: 1000,
        };
        match self {
            Cleanup::Expire => t.expire_snapshots(Some(retention)).await.map(|_| ()),
            Cleanup::Rollback(id) => t
                .rollback_to(RollbackTarget::Snapshot(id))
                .await
                .map(|_| ()),
        }
    }
}

/// Kills `op` before each of its deletes in turn (on copies of one history). After each kill,
/// every remaining snapshot reads completely, running `op` again finishes the job, and what is
/// left over is only orphans: removing them gives exactly what a clean run leaves.
async fn killed_at_each_delete(op: impl Fn(&[i64]) -> Cleanup) -> usize {
    let base = Arc::new(object_store::memory::InMemory::new());
    let (_, states) = history(&base, 14, &[]).await;
    assert!(
        states.len() >= 16,
        "compactions made snapshots: {}",
        states.len()
    );
    let ids: Vec<i64> = states.iter().map(|(id, _)| *id).collect();
    let op = op(&ids);
    let open = |store: Arc<dyn object_store::ObjectStore>| async move {
        Catalog::new(FileIo::from_store(store, "memory://"))
            .load_table(&Identifier::new("db", "t"))
            .await
            .unwrap()
    };
    let reference = Arc::new(base.fork());
    let t = open(Arc::clone(&reference) as _).await;
    op.run(&t).await.unwrap();
    t.remove_orphan_files(i64::MAX, false).await.unwrap();
    let clean = files_of(&reference).await;
    let clean_ids = t.snapshot_manager().list_ids().await.unwrap();

    let mut crashed = 0;
    for crash_after in 0.. {
        let inner = Arc::new(base.fork());
        let dying = crate::faults::FaultyStore::new(Arc::clone(&inner));
        let doomed = open(Arc::clone(&dying) as _).await;
        dying.deletes_left.store(crash_after, Ordering::SeqCst);
        let result = op.run(&doomed).await;
        let context = format!("{op:?} killed before delete {}", crash_after + 1);
        let t = open(Arc::clone(&inner) as _).await;
        every_retained_snapshot_reads(&t, &states, &context).await;
        // The next run finishes what the killed one began.
        op.run(&t).await.unwrap();
        every_retained_snapshot_reads(&t, &states, &context).await;
        assert_eq!(
            t.snapshot_manager().list_ids().await.unwrap(),
            clean_ids,
            "{context}"
        );
        // Leftovers are orphans: removing them gives what a clean run leaves.
        t.remove_orphan_files(i64::MAX, false).await.unwrap();
        every_retained_snapshot_reads(&t, &states, &context).await;
        assert_eq!(files_of(&inner).await, clean, "{context}");
        if result.is_ok() {
            break;
        }
        crashed += 1;
    }
    crashed
}

#[tokio::test]
async fn an_expiry_killed_at_each_delete_leaves_every_snapshot_readable() {
    let crashed = killed_at_each_delete(|_| Cleanup::Expire).await;
    assert!(
        crashed > 10,
        "the expiry was killed at each of its deletes ({crashed})"
    );
}

#[tokio::test]
async fn a_rollback_killed_at_each_delete_leaves_every_snapshot_readable() {
    let crashed = killed_at_each_delete(|ids| Cleanup::Rollback(ids[ids.len() - 6])).await;
    assert!(
        crashed > 5,
        "the rollback was killed at each of its deletes ({crashed})"
    );
}

/// Paths of every file in a store, with hints (rewritten freely) left out.
async fn files_of(store: &object_store::memory::InMemory) -> Vec<String> {
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    let mut out: Vec<String> = store
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    out.retain(|p| !p.ends_with("/LATEST") && !p.ends_with("/EARLIEST"));
    out.sort();
    out
}
