//! Dynamic-bucket tables (`bucket` = -1 on a primary-key table, Paimon's default): keys are
//! assigned to buckets through the HASH index files, shared with pypaimon 2.1.0 in both
//! directions (a key keeps the bucket whichever writer gave it first), new buckets open past
//! `dynamic-bucket.target-row-num`, two writers adding keys to one partition at once do not both
//! commit, and expiry and orphan removal keep exactly the index files that snapshots list. Postpone
//! tables (`bucket` = -2) that pypaimon writes read as Paimon's batch reads do.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use tidelake::error::ErrorKind;
use tidelake::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use tidelake::table::WriteOptions;
use tidelake::Identifier;

use crate::common::{batch, paimon, paimon_rows, read_rows, sorted, write_rows, Scratch};

fn rows(ids: impl IntoIterator<Item = i64>, dt: &str, v: &str) -> Vec<Value> {
    ids.into_iter()
        .map(|id| json!({"id": id, "dt": dt, "v": format!("{v}{id}")}))
        .collect()
}

/// The bucket directories of one partition that hold data files.
fn buckets_on_disk(s: &Scratch, table: &str, partition: &str) -> BTreeSet<String> {
    let (db, t) = table.split_once('.').unwrap();
    let dir = std::path::Path::new(s.path()).join(format!("{db}.db/{t}/{partition}"));
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("bucket-"))
        .collect()
}

fn index_files(s: &Scratch, table: &str) -> BTreeSet<String> {
    let (db, t) = table.split_once('.').unwrap();
    let dir = std::path::Path::new(s.path()).join(format!("{db}.db/{t}/index"));
    match std::fs::read_dir(dir) {
        Ok(d) => d
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// A dynamic-bucket table (no `bucket` option) keyed on (id, dt), partitioned by dt.
async fn create(s: &Scratch, name: &str, opts: &[(&str, &str)]) -> tidelake::Table {
    s.create(
        name,
        "id BIGINT NOT NULL, dt STRING NOT NULL, v STRING",
        &["id", "dt"],
        &["dt"],
        opts,
    )
    .await
}

#[tokio::test]
async fn keys_keep_their_bucket_across_tidelake_and_pypaimon() {
    let s = Scratch::new();
    let name = "db.dyn";
    let t = create(&s, name, &[("dynamic-bucket.target-row-num", "3")]).await;
    let mut first = rows(1..=10, "d1", "a");
    first.extend(rows(1..=4, "d2", "a"));
    write_rows(&t, &first).await;
    // Three keys per bucket: 10 keys open four buckets, 4 keys two.
    assert_eq!(buckets_on_disk(&s, name, "dt=d1").len(), 4);
    assert_eq!(buckets_on_disk(&s, name, "dt=d2").len(), 2);
    // Upserts of known keys stay in their bucket; a new key fills the bucket with room.
    write_rows(&t, &[rows([5], "d1", "b"), rows([11], "d1", "b")].concat()).await;
    assert_eq!(buckets_on_disk(&s, name, "dt=d1").len(), 4);

    // pypaimon refuses to write a dynamic table whose buckets lack HASH files, and would put a
    // key it cannot find into a new bucket: the reads below see one row per key.
    paimon(&[
        "write",
        s.path(),
        name,
        &json!([{"id": 2, "dt": "d1", "v": "py2"}, {"id": 12, "dt": "d1", "v": "py12"},
                {"id": 3, "dt": "d2", "v": "py3"}])
        .to_string(),
    ]);
    // And tidelake finds the bucket pypaimon gave a new key.
    write_rows(&t, &rows([12, 1], "d1", "c")).await;

    let mut want: Vec<Vec<Value>> = Vec::new();
    for id in 1..=12i64 {
        let v = match id {
            1 | 12 => format!("c{id}"),
            2 => "py2".into(),
            5 | 11 => format!("b{id}"),
            _ => format!("a{id}"),
        };
        want.push(vec![json!(id), json!("d1"), json!(v)]);
    }
    for id in 1..=4i64 {
        let v = if id == 3 {
            "py3".into()
        } else {
            format!("a{id}")
        };
        want.push(vec![json!(id), json!("d2"), json!(v)]);
    }
    let want = sorted(want);
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), name, None), want);
    for id in t.snapshot_manager().list_ids().await.unwrap() {
        assert_eq!(
            paimon_rows(s.path(), name, Some(id)),
            read_rows(&t, Some(id)).await,
            "{name} snapshot {id}"
        );
    }
}

#[tokio::test]
async fn tidelake_writes_into_a_pypaimon_dynamic_table() {
    let s = Scratch::new();
    let spec = json!({"columns": [["id", "int64", false], ["v", "string", true]],
                      "primary_keys": ["id"], "options": {"dynamic-bucket.target-row-num": "2"}});
    paimon(&["create", s.path(), "db.theirs", &spec.to_string()]);
    paimon(&[
        "write",
        s.path(),
        "db.theirs",
        &json!([{"id": 1, "v": "p1"}, {"id": 2, "v": "p2"}, {"id": 3, "v": "p3"}]).to_string(),
    ]);
    let t = s
        .catalog
        .load_table(&Identifier::new("db", "theirs"))
        .await
        .unwrap();
    write_rows(
        &t,
        &[
            json!({"id": 3, "v": "t3"}),
            json!({"id": 1, "v": "t1"}),
            json!({"id": 4, "v": "t4"}),
        ],
    )
    .await;
    let want = sorted(vec![
        vec![json!(1), json!("t1")],
        vec![json!(2), json!("p2")],
        vec![json!(3), json!("t3")],
        vec![json!(4), json!("t4")],
    ]);
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), "db.theirs", None), want);
}

#[tokio::test]
async fn two_writers_adding_keys_to_one_partition_do_not_both_commit() {
    let s = Scratch::new();
    let t = create(&s, "db.race", &[]).await;
    write_rows(&t, &rows([1], "d1", "a")).await;
    let mut a = t.new_write(WriteOptions::default()).unwrap();
    let mut b = t.new_write(WriteOptions::default()).unwrap();
    a.write(&batch(&t, &rows([7], "d1", "a"))).await.unwrap();
    b.write(&batch(&t, &rows([7, 8], "d1", "b"))).await.unwrap();
    // Another partition's keys do not conflict.
    let mut c = t.new_write(WriteOptions::default()).unwrap();
    c.write(&batch(&t, &rows([7], "d2", "c"))).await.unwrap();
    let (ma, mb, mc) = (
        a.prepare_commit().await.unwrap(),
        b.prepare_commit().await.unwrap(),
        c.prepare_commit().await.unwrap(),
    );
    t.new_commit("a")
        .commit(ma, BATCH_COMMIT_IDENTIFIER, None)
        .await
        .unwrap();
    let before = read_rows(&t, None).await;
    let err = t
        .new_commit("b")
        .commit(mb, BATCH_COMMIT_IDENTIFIER, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("db.race") && msg.contains("dt=d1"), "{msg}");
    assert_eq!(
        read_rows(&t, None).await,
        before,
        "the refused commit changed nothing"
    );
    t.new_commit("c")
        .commit(mc, BATCH_COMMIT_IDENTIFIER, None)
        .await
        .unwrap();
    for w in [a, b, c] {
        w.close().await.unwrap();
    }
    let want = sorted(vec![
        vec![json!(1), json!("d1"), json!("a1")],
        vec![json!(7), json!("d1"), json!("a7")],
        vec![json!(7), json!("d2"), json!("c7")],
    ]);
    assert_eq!(read_rows(&t, None).await, want);
    // The refused writer's files were removed: orphan removal finds nothing of it.
    let report = t.remove_orphan_files(i64::MAX, true).await.unwrap();
    assert!(report.files.is_empty(), "{:?}", report.files);
}

#[tokio::test]
async fn expiry_and_orphan_removal_keep_the_listed_index_files() {
    let s = Scratch::new();
    let name = "db.exp";
    let t = create(
        &s,
        name,
        &[
            ("snapshot.num-retained.min", "1"),
            ("snapshot.num-retained.max", "2"),
        ],
    )
    .await;
    for i in 0..5i64 {
        write_rows(&t, &rows([i], "d1", "a")).await;
    }
    let sm = t.snapshot_manager();
    let ids = sm.list_ids().await.unwrap();
    assert!(ids.len() <= 3, "expired down to the retained: {ids:?}");
    // Every index file on disk is one a retained snapshot lists, and reads still work.
    let mut listed = BTreeSet::new();
    for id in &ids {
        let snap = sm.snapshot(*id).await.unwrap();
        for e in t.manifest_manager().index_entries(&snap).await.unwrap() {
            listed.insert(e.file.file_name);
        }
    }
    assert_eq!(index_files(&s, name), listed);
    assert_eq!(read_rows(&t, None).await.len(), 5);
    // A stray index file is an orphan; the listed ones are not.
    let stray = std::path::Path::new(s.path()).join("db.db/exp/index/index-stray-0");
    std::fs::write(&stray, [0u8; 4]).unwrap();
    let report = t.remove_orphan_files(i64::MAX, false).await.unwrap();
    let removed: Vec<&str> = report
        .files
        .iter()
        .filter_map(|f| f.rsplit('/').next())
        .collect();
    assert_eq!(removed, ["index-stray-0"]);
    assert_eq!(index_files(&s, name), listed);
    assert_eq!(read_rows(&t, None).await.len(), 5);
}

#[tokio::test]
async fn a_pypaimon_postpone_table_reads_as_paimon_batch_reads() {
    let s = Scratch::new();
    let spec = json!({"columns": [["id", "int64", false], ["v", "string", true]],
                      "primary_keys": ["id"], "options": {"bucket": "-2"}});
    paimon(&["create", s.path(), "db.later", &spec.to_string()]);
    paimon(&[
        "write",
        s.path(),
        "db.later",
        &json!([{"id": 1, "v": "p1"}, {"id": 2, "v": "p2"}]).to_string(),
    ]);
    let dir = std::path::Path::new(s.path()).join("db.db/later/bucket-postpone");
    assert!(
        dir.is_dir(),
        "pypaimon writes postpone files to bucket-postpone/"
    );
    let t = s
        .catalog
        .load_table(&Identifier::new("db", "later"))
        .await
        .unwrap();
    // Until a compaction moves them into real buckets, batch reads (Java's and pypaimon's) do
    // not show postpone rows.
    assert!(read_rows(&t, None).await.is_empty());
    assert_eq!(
        paimon_rows(s.path(), "db.later", None),
        read_rows(&t, None).await
    );
    // tidelake's writes stage rows the same way (tests/it/postpone.rs moves them).
    write_rows(&t, &[json!({"id": 3, "v": "t3"})]).await;
    assert!(read_rows(&t, None).await.is_empty());
}

#[tokio::test]
async fn a_corrupt_hash_index_fails_the_write_naming_the_file_and_changes_nothing() {
    let s = Scratch::new();
    let t = create(&s, "db.bad", &[]).await;
    write_rows(&t, &rows([1, 2], "d1", "a")).await;
    let name = index_files(&s, "db.bad").into_iter().next().unwrap();
    let path = std::path::Path::new(s.path()).join(format!("db.db/bad/index/{name}"));
    std::fs::write(&path, [0u8, 0, 1]).unwrap();
    let before = t.snapshot_manager().latest_id().await.unwrap();
    let err = t
        .write_batches(
            &[batch(&t, &rows([3], "d1", "b"))],
            WriteOptions::default(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Internal, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("db.db/bad/index/{name}")) && msg.contains("3 bytes"),
        "{msg}"
    );
    assert_eq!(t.snapshot_manager().latest_id().await.unwrap(), before);
    // Another partition has no index to read: its writes go on.
    write_rows(&t, &rows([3], "d2", "b")).await;
}

#[tokio::test]
async fn a_long_writer_drops_idle_partition_indexes_and_reloads_them() {
    let s = Scratch::new();
    let t = create(&s, "db.long", &[("dynamic-bucket.target-row-num", "2")]).await;
    let mut w = t.new_write(WriteOptions::default()).unwrap();
    let commit = t.new_commit("long");
    let mut id = 0;
    for (ids, dt) in [([1, 2, 3], "d1"), ([1, 2, 3], "d2"), ([3, 4, 5], "d1")] {
        w.write(&batch(&t, &rows(ids, dt, dt))).await.unwrap();
        id += 1;
        let m = w.prepare_commit().await.unwrap();
        commit.commit(m, id, None).await.unwrap();
    }
    w.close().await.unwrap();
    // d1's index was dropped while d2 was written and reloaded from the latest snapshot: key 3
    // stayed in its bucket (one row), and 4 and 5 filled buckets after it.
    let want = sorted(
        [
            rows([1, 2], "d1", "d1"),
            rows([3, 4, 5], "d1", "d1"),
            rows([1, 2, 3], "d2", "d2"),
        ]
        .concat()
        .into_iter()
        .map(|r| vec![r["id"].clone(), r["dt"].clone(), r["v"].clone()])
        .collect(),
    );
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(buckets_on_disk(&s, "db.long", "dt=d1").len(), 3);
    assert_eq!(paimon_rows(s.path(), "db.long", None), want);
}
