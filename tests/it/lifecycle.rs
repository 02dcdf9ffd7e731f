//! Snapshot lifecycle: expiry keeps what retained snapshots, tags and consumers need; tags pin
//! files; rollback restores an old state; orphan removal finds what crashed writers leave.

use serde_json::{json, Value};
use tidelake::table::maintenance::RollbackTarget;
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::ErrorKind;

use crate::common::{batch, paimon_rows, read_rows, Scratch};

async fn commit_rows(t: &tidelake::Table, c: i64) {
    let rows: Vec<Value> = (0..3)
        .map(|i| json!({"id": (c * 2 + i) % 7, "v": format!("c{c}")}))
        .collect();
    t.write_batches(&[batch(t, &rows)], WriteOptions::default(), None)
        .await
        .unwrap();
}

/// Every file under the table that no snapshot or tag references (there must be none).
async fn leaked(t: &tidelake::Table) -> Vec<String> {
    t.remove_orphan_files(i64::MAX, true).await.unwrap().files
}

#[tokio::test]
async fn expiry_keeps_retained_snapshots_tags_and_no_garbage() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[
                ("bucket", "2"),
                ("snapshot.num-retained.min", "3"),
                ("snapshot.time-retained", "0 ms"),
            ],
        )
        .await;
    let mut states = Vec::new();
    for c in 0..12 {
        commit_rows(&t, c).await;
        let latest = t.snapshot_manager().latest_id().await.unwrap().unwrap();
        states.push((latest, read_rows(&t, None).await));
        if c == 4 {
            t.create_tag("keep", None).await.unwrap();
        }
    }
    let sm = t.snapshot_manager();
    let ids = sm.list_ids().await.unwrap();
    assert_eq!(ids.len(), 3, "expired automatically after commits: {ids:?}");
    assert_eq!(sm.earliest_id().await.unwrap(), ids.first().copied());
    for (id, rows) in &states {
        if ids.contains(id) {
            assert_eq!(&read_rows(&t, Some(*id)).await, rows);
        } else {
            let err = t
                .read_all(SnapshotSelector::Id(*id), None)
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound);
            assert!(
                err.to_string()
                    .contains(&format!("snapshots {} to ", ids[0])),
                "{err}"
            );
        }
    }
    // The tag still reads the state it pinned, although its snapshot expired.
    let tag_snapshot = t.list_tags().await.unwrap()[0].1.id;
    let tagged = states
        .iter()
        .find(|(id, _)| *id == tag_snapshot)
        .unwrap()
        .1
        .clone();
    let got = crate::common::sorted(crate::common::rows(
        &t.read_all(SnapshotSelector::Tag("keep".into()), None)
            .await
            .unwrap(),
    ));
    assert_eq!(got, tagged);
    assert_eq!(leaked(&t).await, Vec::<String>::new());
    assert_eq!(
        paimon_rows(s.path(), "db.t", None),
        states.last().unwrap().1
    );

    // Deleting the tag frees its files; nothing leaks.
    let report = t.delete_tag("keep").await.unwrap();
    assert!(!report.files.is_empty());
    assert_eq!(leaked(&t).await, Vec::<String>::new());
    let err = t.delete_tag("keep").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = t.create_tag("x", Some(999)).await.unwrap_err();
    assert!(err.to_string().contains("#999"), "{err}");
}

#[tokio::test]
async fn rollback_restores_an_old_state_and_writing_goes_on() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "2")],
        )
        .await;
    for c in 0..6 {
        commit_rows(&t, c).await;
    }
    t.create_tag("at3", Some(3)).await.unwrap();
    t.create_tag("at5", Some(5)).await.unwrap();
    let at3 = read_rows(&t, Some(3)).await;
    let at4 = read_rows(&t, Some(4)).await;
    t.rollback_to(RollbackTarget::Snapshot(4)).await.unwrap();
    let sm = t.snapshot_manager();
    assert_eq!(sm.list_ids().await.unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(read_rows(&t, None).await, at4);
    let tags: Vec<String> = t
        .list_tags()
        .await
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        tags,
        vec!["at3".to_string()],
        "tags after the target are removed"
    );
    assert_eq!(leaked(&t).await, Vec::<String>::new());
    assert_eq!(paimon_rows(s.path(), "db.t", None), at4);

    t.rollback_to(RollbackTarget::Tag("at3".into()))
        .await
        .unwrap();
    assert_eq!(read_rows(&t, None).await, at3);
    commit_rows(&t, 9).await;
    assert_eq!(
        sm.latest_id().await.unwrap(),
        Some(4),
        "writing continues after the rolled-back id"
    );
    assert_eq!(leaked(&t).await, Vec::<String>::new());
    let err = t
        .rollback_to(RollbackTarget::Snapshot(42))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = t
        .rollback_to(RollbackTarget::Tag("nope".into()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "Tag 'nope' doesn't exist in table {}.",
            t.identifier()
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_tag_restored_after_its_snapshot_expired_reads_and_leaves_no_orphan_error() {
    // The tag's snapshot names a changelog list; expiry took it (a tag holds no changelog), so
    // the snapshot the rollback publishes again names a list that is gone.
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("changelog-producer", "input"),
                ("snapshot.num-retained.min", "1"),
                ("snapshot.num-retained.max", "1"),
                ("snapshot.time-retained", "0 ms"),
            ],
        )
        .await;
    commit_rows(&t, 0).await;
    commit_rows(&t, 1).await;
    let tagged = t.create_tag("old", None).await.unwrap();
    assert!(tagged.changelog_manifest_list.is_some());
    let at_tag = read_rows(&t, None).await;
    for c in 2..5 {
        commit_rows(&t, c).await;
    }
    let sm = t.snapshot_manager();
    assert!(
        sm.try_snapshot(tagged.id).await.unwrap().is_none(),
        "expired"
    );
    t.rollback_to(RollbackTarget::Tag("old".into()))
        .await
        .unwrap();
    assert_eq!(sm.list_ids().await.unwrap(), vec![tagged.id]);
    let list = tagged.changelog_manifest_list.as_ref().unwrap();
    let gone = std::path::Path::new(s.path()).join(format!("db.db/t/manifest/{list}"));
    assert!(
        !gone.exists(),
        "{gone:?} went with the snapshot's first life"
    );
    assert_eq!(read_rows(&t, None).await, at_tag);
    assert_eq!(leaked(&t).await, Vec::<String>::new());
    t.remove_orphan_files(i64::MAX, false).await.unwrap();
    assert_eq!(read_rows(&t, None).await, at_tag);
    commit_rows(&t, 7).await;
    assert_eq!(leaked(&t).await, Vec::<String>::new());
    assert_eq!(
        paimon_rows(s.path(), "db.t", None),
        read_rows(&t, None).await
    );
}

#[tokio::test]
async fn orphan_removal_cleans_up_after_a_crashed_writer() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.t",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "2")],
        )
        .await;
    commit_rows(&t, 0).await;
    let before = read_rows(&t, None).await;
    // A writer that wrote data files and died before committing.
    let mut w = t.new_write(WriteOptions::default()).unwrap();
    w.write(&batch(&t, &[json!({"id": 100, "v": "lost"})]))
        .await
        .unwrap();
    let lost = w.prepare_commit().await.unwrap();
    drop(w);
    let lost_files: Vec<String> = lost
        .iter()
        .flat_map(|m| m.new_files.iter().map(|f| f.file_name.clone()))
        .collect();
    assert!(!lost_files.is_empty());
    // Too young to be an orphan yet (a writer may still commit it).
    assert!(t
        .remove_orphan_files(0, true)
        .await
        .unwrap()
        .files
        .is_empty());
    let dry = t.remove_orphan_files(i64::MAX, true).await.unwrap();
    assert_eq!(dry.files.len(), lost_files.len());
    assert!(dry
        .files
        .iter()
        .all(|f| lost_files.iter().any(|l| f.ends_with(l))));
    // Dry run deleted nothing; the real run does, and the table is unchanged.
    assert_eq!(
        t.remove_orphan_files(i64::MAX, true)
            .await
            .unwrap()
            .files
            .len(),
        lost_files.len()
    );
    t.remove_orphan_files(i64::MAX, false).await.unwrap();
    assert!(leaked(&t).await.is_empty());
    assert_eq!(read_rows(&t, None).await, before);
    assert_eq!(paimon_rows(s.path(), "db.t", None), before);
}

#[tokio::test]
async fn time_retention_and_orphan_age_follow_the_table_clock() {
    // A manual clock: snapshots grow old and orphans grow stale by moving time, not by waiting.
    const MINUTE: i64 = 60_000;
    let start = tidelake::clock::system_millis();
    let clock = tidelake::clock::Clock::manual(start);
    let mut s = Scratch::new();
    s.catalog = s.catalog.clone().with_clock(clock.clone());
    let t = s
        .create(
            "db.t",
            "id INT NOT NULL, v STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("snapshot.num-retained.min", "1"),
                ("snapshot.num-retained.max", "100"),
                ("snapshot.time-retained", "1 h"),
            ],
        )
        .await;
    let sm = t.snapshot_manager();
    for c in 0..3 {
        commit_rows(&t, c).await;
    }
    let old = sm.latest_id().await.unwrap().unwrap();
    clock.advance(30 * MINUTE);
    for c in 3..5 {
        commit_rows(&t, c).await;
    }
    assert_eq!(
        sm.earliest_id().await.unwrap(),
        Some(1),
        "nothing is an hour old yet"
    );
    // The first snapshots are now 75 minutes old, the later ones 45. Paimon's rule
    // (ExpireSnapshotsImpl): a snapshot goes once the one after it is older than the retention,
    // so the next commit's expiry removes all but the last of the old ones.
    clock.advance(45 * MINUTE);
    let state = read_rows(&t, None).await;
    commit_rows(&t, 5).await;
    assert_eq!(sm.earliest_id().await.unwrap(), Some(old));
    assert_eq!(sm.snapshot(old).await.unwrap().time_millis, start);
    assert_eq!(
        sm.snapshot(old + 1).await.unwrap().time_millis,
        start + 30 * MINUTE,
        "snapshot times are the table clock's"
    );
    assert_ne!(read_rows(&t, None).await, state);

    // A file no snapshot lists, written now by the real clock: an orphan only once it is older
    // than `older_than` by the table's clock.
    let stray = format!("{}/db.db/t/bucket-0/data-stray.parquet", s.path());
    std::fs::write(&stray, b"left by a crashed writer").unwrap();
    let op = tidelake::table::progress::Operation::new();
    let remove = || {
        tidelake::table::maintenance::Request::RemoveOrphans(
            tidelake::table::maintenance::RemoveOrphans {
                older_than: Some("1 d".into()),
                dry_run: false,
            },
        )
        .run(&t, &op)
    };
    assert!(remove().await.unwrap().cleanup().files.is_empty());
    assert!(std::path::Path::new(&stray).exists());
    clock.advance(2 * 24 * 60 * MINUTE);
    let removed = remove().await.unwrap().cleanup().files;
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(
        removed[0].ends_with("bucket-0/data-stray.parquet"),
        "{removed:?}"
    );
    assert!(!std::path::Path::new(&stray).exists());
}
