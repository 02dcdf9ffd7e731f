//! Compaction: continuous writes keep the LSM tree in shape, full compaction leaves one run at the
//! top level, results read the same in tidelake and pypaimon, and first-row tables show their rows
//! once compacted.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tidelake::lsm::levels::sorted_runs;
use tidelake::spec::CommitKind;
use tidelake::table::{SnapshotSelector, WriteOptions};

use crate::common::{batch, paimon_rows, read_rows, sorted, Scratch};

async fn runs_per_bucket(table: &tidelake::Table) -> Vec<usize> {
    let plan = table.new_scan().all_levels().plan().await.unwrap();
    plan.splits
        .iter()
        .map(|s| sorted_runs(&s.files).len())
        .collect()
}

#[tokio::test]
async fn continuous_writes_with_compaction_stay_correct_and_bounded() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, v BIGINT, tag STRING",
            &["id"],
            &[],
            &[("bucket", "2"), ("write-buffer-rows", "50")],
        )
        .await;
    let mut model: BTreeMap<i64, (i64, String)> = BTreeMap::new();
    let mut x: u64 = 42;
    let mut writer = t.new_write(WriteOptions::default()).unwrap();
    let commit = t.new_commit("continuous");
    let mut max_runs = 0;
    for c in 0..60i64 {
        let mut rows = Vec::new();
        for _ in 0..120 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let id = ((x >> 33) % 500) as i64;
            let tag = format!("c{c}");
            model.insert(id, (c, tag.clone()));
            rows.push(json!({"id": id, "v": c, "tag": tag}));
        }
        writer.write(&batch(&t, &rows)).await.unwrap();
        commit
            .commit(writer.prepare_commit().await.unwrap(), c + 1, None)
            .await
            .unwrap();
        let runs = runs_per_bucket(&t).await;
        max_runs = max_runs.max(runs.iter().copied().max().unwrap_or(0));
        assert!(
            runs.iter().all(|&r| r <= 8),
            "sorted runs above the stop trigger: {runs:?}"
        );
    }
    let want: Vec<Vec<Value>> = sorted(
        model
            .iter()
            .map(|(id, (v, tag))| vec![json!(id), json!(v), json!(tag)])
            .collect(),
    );
    assert_eq!(read_rows(&t, None).await, want);
    let sm = t.snapshot_manager();
    let mut compacts = 0;
    for id in sm.list_ids().await.unwrap() {
        if sm.snapshot(id).await.unwrap().commit_kind == CommitKind::Compact {
            compacts += 1;
        }
    }
    assert!(compacts > 0, "compaction ran");
    let files = t.new_scan().plan().await.unwrap().file_count();
    assert!(files <= 2 * 8, "live files stay bounded: {files}");
    assert!(max_runs >= 2);
    // pypaimon reads the compacted table (levels > 0, COMPACT snapshots) the same way.
    assert_eq!(paimon_rows(s.path(), "db.t", None), want);

    // A full compaction leaves one sorted run per bucket, at the top level, with no deletes.
    let report = t.compact(true, vec![]).await.unwrap();
    assert!(report.snapshot_id.is_some());
    let plan = t.new_scan().plan().await.unwrap();
    for split in &plan.splits {
        let runs = sorted_runs(&split.files);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].level, 5);
    }
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), "db.t", None), want);
    // Nothing left to do: no new snapshot.
    assert_eq!(t.compact(true, vec![]).await.unwrap().snapshot_id, None);
}

#[tokio::test]
async fn full_compaction_drops_deletes_and_keeps_time_travel() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "1"), ("write-only", "true")],
        )
        .await;
    let opts = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let kinds = |rows: &[Value]| crate::common::batch_with_kinds(&t, rows);
    t.write_batches(
        &[kinds(&[
            json!({"id": 1, "v": "a", "op": "+I"}),
            json!({"id": 2, "v": "b", "op": "+I"}),
        ])],
        opts.clone(),
        None,
    )
    .await
    .unwrap();
    t.write_batches(
        &[kinds(&[
            json!({"id": 2, "v": "b", "op": "-D"}),
            json!({"id": 3, "v": "c", "op": "+I"}),
        ])],
        opts.clone(),
        None,
    )
    .await
    .unwrap();
    let before = read_rows(&t, None).await;
    let report = t.compact(true, vec![]).await.unwrap();
    assert_eq!(report.files_before, 2);
    let files = t.new_scan().plan().await.unwrap();
    let meta = &files.splits[0].files[0];
    assert_eq!(
        meta.delete_row_count,
        Some(0),
        "deletes dropped at the top level"
    );
    assert_eq!(meta.row_count, 2);
    assert_eq!(read_rows(&t, None).await, before);
    assert_eq!(
        read_rows(&t, Some(1)).await.len(),
        2,
        "snapshot 1 still reads its files"
    );
    let snap = t.snapshot_manager().latest().await.unwrap().unwrap();
    assert_eq!(snap.commit_kind, CommitKind::Compact);
    assert_eq!(snap.total_record_count, Some(2));
}

#[tokio::test]
async fn first_row_rows_appear_after_compaction() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.f",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("merge-engine", "first-row"),
                ("write-only", "true"),
            ],
        )
        .await;
    crate::common::write_rows(
        &t,
        &[
            json!({"id": 1, "v": "first1"}),
            json!({"id": 2, "v": "first2"}),
        ],
    )
    .await;
    crate::common::write_rows(
        &t,
        &[
            json!({"id": 1, "v": "late"}),
            json!({"id": 3, "v": "first3"}),
        ],
    )
    .await;
    // As in Paimon, level-0 files are invisible to batch reads of first-row tables.
    assert_eq!(read_rows(&t, None).await, Vec::<Vec<Value>>::new());
    t.compact(true, vec![]).await.unwrap();
    let want = vec![
        vec![json!(1), json!("first1")],
        vec![json!(2), json!("first2")],
        vec![json!(3), json!("first3")],
    ];
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), "db.f", None), want);
    // The old snapshot is still readable.
    assert!(t
        .read_all(SnapshotSelector::Id(2), None)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn append_tables_compact_small_files_in_order() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.a",
            "id BIGINT NOT NULL, v STRING",
            &[],
            &[],
            &[("bucket", "1"), ("bucket-key", "id")],
        )
        .await;
    for i in 0..7 {
        let rows = [
            json!({"id": 2 * i, "v": "x"}),
            json!({"id": 2 * i + 1, "v": "y"}),
        ];
        crate::common::write_rows(&t, &rows).await;
    }
    // The commit that brings the fifth small file compacts them into one, keeping sequence order.
    let plan = t.new_scan().plan().await.unwrap();
    assert_eq!(
        plan.file_count(),
        3,
        "one compacted file and the two written after it"
    );
    let compacted = plan.splits[0]
        .files
        .iter()
        .find(|f| f.file_source == Some(1))
        .unwrap();
    assert_eq!(
        (
            compacted.min_sequence_number,
            compacted.max_sequence_number,
            compacted.row_count
        ),
        (0, 9, 10)
    );
    let rows = crate::common::rows(&t.read_all(SnapshotSelector::Latest, None).await.unwrap());
    let ids: Vec<i64> = rows.iter().map(|r| r[0].as_i64().unwrap()).collect();
    assert_eq!(ids, (0..14).collect::<Vec<_>>(), "append order kept");
    assert_eq!(paimon_rows(s.path(), "db.a", None).len(), 14);

    // Bucket-unaware tables are compacted on demand only (as by Paimon's dedicated job).
    let u = s.create("db.u", "id BIGINT NOT NULL", &[], &[], &[]).await;
    for i in 0..6 {
        crate::common::write_rows(&u, &[json!({"id": i})]).await;
    }
    assert_eq!(u.new_scan().plan().await.unwrap().file_count(), 6);
    u.compact(true, vec![]).await.unwrap();
    assert_eq!(u.new_scan().plan().await.unwrap().file_count(), 1);
    assert_eq!(read_rows(&u, None).await.len(), 6);
}

#[tokio::test]
async fn a_losing_compactor_gives_up_cleanly() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "1"), ("write-only", "true")],
        )
        .await;
    for i in 0..3 {
        crate::common::write_rows(&t, &[json!({"id": i, "v": "x"})]).await;
    }
    // Two compactors start from the same snapshot; the second one's inputs are gone when it commits.
    let (a, b) = tokio::join!(t.compact(true, vec![]), t.compact(true, vec![]));
    let outcomes = [a.is_ok(), b.is_ok()];
    assert!(outcomes.contains(&true), "{a:?} {b:?}");
    if let Some(err) = [a, b].into_iter().find_map(Result::err) {
        assert_eq!(err.kind(), tidelake::ErrorKind::Conflict, "{err}");
        assert!(err.to_string().contains("no longer live"), "{err}");
    }
    assert_eq!(read_rows(&t, None).await.len(), 3);
    // No unpublished output stays behind: every data file on disk is live or was live before.
    let mut on_disk = 0;
    for e in std::fs::read_dir(s.dir.path().join("db.db/t/bucket-0")).unwrap() {
        let _ = e.unwrap();
        on_disk += 1;
    }
    assert!(on_disk <= 3 + 1, "{on_disk} data files on disk");
}

#[tokio::test]
async fn a_long_commit_window_stalls_for_compaction_and_leaves_no_transient_files() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, v BIGINT",
            &["id"],
            &[],
            &[("bucket", "1"), ("write-buffer-rows", "10")],
        )
        .await;
    let mut w = t.new_write(WriteOptions::default()).unwrap();
    w.set_wait_compaction(true);
    let mut model = BTreeMap::new();
    for b in 0..40i64 {
        let rows: Vec<Value> = (0..10)
            .map(|i| json!({"id": (b * 7 + i) % 60, "v": b}))
            .collect();
        for r in &rows {
            model.insert(r["id"].as_i64().unwrap(), b);
        }
        w.write(&batch(&t, &rows)).await.unwrap();
    }
    let messages = w.prepare_commit().await.unwrap();
    let m = &messages[0];
    assert_eq!(m.new_files.len(), 40, "one level-0 file per spill");
    assert!(
        !m.compact_after.is_empty(),
        "the writer compacted while writing"
    );
    t.new_commit("long")
        .commit(messages, 1, None)
        .await
        .unwrap();
    let runs = runs_per_bucket(&t).await;
    assert!(runs[0] <= 8, "{runs:?}");
    let want: Vec<Vec<Value>> = sorted(
        model
            .iter()
            .map(|(k, v)| vec![json!(k), json!(v)])
            .collect(),
    );
    assert_eq!(read_rows(&t, None).await, want);
    // Outputs compacted again before the commit were deleted, not left as orphans.
    assert_eq!(
        t.remove_orphan_files(i64::MAX, true).await.unwrap().files,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_long_lived_writer_survives_compactions_by_another_job() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, v BIGINT",
            &["id"],
            &[],
            &[("bucket", "1"), ("write-buffer-rows", "5")],
        )
        .await;
    let mut w = t.new_write(WriteOptions::default()).unwrap();
    let commit = t.new_commit("writer");
    let mut model = BTreeMap::new();
    for c in 0..30i64 {
        let rows: Vec<Value> = (0..12)
            .map(|i| json!({"id": (c * 5 + i) % 40, "v": c}))
            .collect();
        for r in &rows {
            model.insert(r["id"].as_i64().unwrap(), c);
        }
        w.write(&batch(&t, &rows)).await.unwrap();
        commit
            .commit(w.prepare_commit().await.unwrap(), c + 1, None)
            .await
            .unwrap();
        if c % 4 == 3 {
            // A dedicated compaction job rewrites everything the writer believes is live.
            t.compact(true, vec![]).await.unwrap();
        }
    }
    let want: Vec<Vec<Value>> = sorted(
        model
            .iter()
            .map(|(k, v)| vec![json!(k), json!(v)])
            .collect(),
    );
    assert_eq!(read_rows(&t, None).await, want);
    assert!(runs_per_bucket(&t).await[0] <= 8);
}

/// Every file under the table directory (relative paths), sorted.
fn files_under(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_compaction_reports_progress_and_leaves_the_table_as_it_was() {
    use tidelake::error::ErrorKind;
    use tidelake::table::progress::Operation;
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, v BIGINT",
            &["id"],
            &[],
            &[("bucket", "16"), ("write-only", "true")],
        )
        .await;
    for c in 0..3i64 {
        let rows: Vec<Value> = (0..400).map(|id| json!({"id": id, "v": c})).collect();
        t.write_batches(&[batch(&t, &rows)], WriteOptions::default(), None)
            .await
            .unwrap();
    }
    let root = s.dir.path().join("db.db/t");
    let before = files_under(&root);
    let latest = t.snapshot_manager().latest_id().await.unwrap();

    // Cancelled after its first bucket: an error naming the table, nothing committed, every file
    // it wrote removed.
    let op = Operation::new();
    let mut progress = op.watch();
    let watcher = op.clone();
    let cancel = tokio::spawn(async move {
        while progress.changed().await.is_ok() {
            if progress.borrow().done >= 1 && progress.borrow().phase == "compacting buckets" {
                watcher.cancel();
                return;
            }
        }
    });
    let err = t.compact_with(true, vec![], &op).await.unwrap_err();
    cancel.await.unwrap();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert!(
        err.to_string().contains("compaction of db.t was cancelled"),
        "{err}"
    );
    let p = op.progress();
    assert_eq!((p.phase.as_str(), p.total), ("compacting buckets", 16));
    assert!(p.done >= 1 && p.done < 16, "{p:?}");
    assert_eq!(t.snapshot_manager().latest_id().await.unwrap(), latest);
    assert_eq!(files_under(&root), before);

    // Run to its end, it counts every bucket and commits.
    let op = Operation::new();
    let report = t.compact_with(true, vec![], &op).await.unwrap();
    assert_eq!(report.buckets_compacted, 16);
    let p = op.progress();
    assert_eq!((p.phase.as_str(), p.done, p.total), ("committing", 1, 1));
    assert!(p.files >= 16 && p.bytes > 0, "{p:?}");
    let rows = read_rows(&t, None).await;
    assert_eq!(rows.len(), 400);
    assert!(rows.iter().all(|r| r[1] == json!(2)));
}

#[tokio::test]
async fn cancelled_expiry_and_orphan_removal_change_nothing() {
    use tidelake::error::ErrorKind;
    use tidelake::snapshot::expire::Retention;
    use tidelake::table::progress::Operation;
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id BIGINT, v BIGINT",
            &[],
            &[],
            &[("snapshot.num-retained.max", "100")],
        )
        .await;
    for c in 0..4i64 {
        t.write_batches(
            &[batch(&t, &[json!({"id": c, "v": c})])],
            WriteOptions::default(),
            None,
        )
        .await
        .unwrap();
    }
    let root = s.dir.path().join("db.db/t");
    let before = files_under(&root);
    let op = Operation::new();
    op.cancel();
    let retention = Retention {
        min_retained: 1,
        max_retained: 1,
        ..t.retention().unwrap()
    };
    let err = t
        .expire_snapshots_with(Some(retention), &op)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    let err = t
        .remove_orphan_files_with(i64::MAX, false, &op)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert_eq!(files_under(&root), before);
    // Not cancelled, the same expiry reports its phases and removes snapshots 1..3.
    let op = Operation::new();
    let report = t.expire_snapshots_with(Some(retention), &op).await.unwrap();
    assert_eq!(report.snapshots, vec![1, 2, 3]);
    assert_eq!(op.progress().phase, "deleting files");
    assert_eq!(op.progress().done, op.progress().total);
}
