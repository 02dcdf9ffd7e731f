//! Concurrent committers on one table: snapshot ids stay contiguous, no commit is lost or doubled,
//! and the final rows are exactly what the committers were told succeeded. Also exactly-once
//! commits per (commit user, identifier).

use std::collections::BTreeSet;

use serde_json::json;
use tidelake::table::{CommitOutcome, SnapshotSelector, WriteOptions};

use crate::common::{batch, rows, Scratch};

const COMMITTERS: usize = 8;
const COMMITS_EACH: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_committers_on_one_table() {
    let s = Scratch::new();
    for (name, pk) in [("db.append_t", &[][..]), ("db.pk_t", &["id"][..])] {
        let opts: &[(&str, &str)] = if pk.is_empty() {
            &[("commit.max-retries", "200"), ("write-only", "true")]
        } else {
            &[
                ("bucket", "3"),
                ("commit.max-retries", "200"),
                ("write-only", "true"),
            ]
        };
        let table = s
            .create(name, "id BIGINT NOT NULL, who INT, n INT", pk, &[], opts)
            .await;
        let mut tasks = Vec::new();
        for c in 0..COMMITTERS {
            let table = table.clone();
            tasks.push(tokio::spawn(async move {
                let mut acked = Vec::new();
                let commit = table.new_commit(format!("committer-{c}"));
                for i in 0..COMMITS_EACH {
                    let mut w = table.new_write(WriteOptions::default()).unwrap();
                    let id = (c * 100 + i) as i64;
                    let rows = vec![
                        json!({"id": id, "who": c, "n": i}),
                        json!({"id": id + 50, "who": c, "n": i}),
                    ];
                    w.write(&batch(&table, &rows)).await.unwrap();
                    let outcome = commit
                        .commit(w.prepare_commit().await.unwrap(), i as i64 + 1, None)
                        .await
                        .unwrap();
                    let CommitOutcome::Committed(sid) = outcome else {
                        panic!("unexpected {outcome:?}")
                    };
                    acked.push((sid, id));
                }
                acked
            }));
        }
        let mut acked = Vec::new();
        for t in tasks {
            acked.extend(t.await.unwrap());
        }
        let sm = table.snapshot_manager();
        let ids = sm.list_ids().await.unwrap();
        let n = (COMMITTERS * COMMITS_EACH) as i64;
        assert_eq!(
            ids,
            (1..=n).collect::<Vec<_>>(),
            "{name}: contiguous snapshot ids"
        );
        let acked_ids: BTreeSet<i64> = acked.iter().map(|(sid, _)| *sid).collect();
        assert_eq!(
            acked_ids.len(),
            n as usize,
            "{name}: every commit got its own snapshot"
        );
        let mut users = BTreeSet::new();
        for id in &ids {
            let snap = sm.snapshot(*id).await.unwrap();
            assert!(
                users.insert((snap.commit_user.clone(), snap.commit_identifier)),
                "{name}: doubled commit"
            );
            assert_eq!(
                snap.total_record_count,
                Some(2 * id),
                "{name}: record count of snapshot {id}"
            );
        }
        let got: BTreeSet<i64> = rows(
            &table
                .read_all(SnapshotSelector::Latest, None)
                .await
                .unwrap(),
        )
        .iter()
        .map(|r| r[0].as_i64().unwrap())
        .collect();
        let want: BTreeSet<i64> = acked.iter().flat_map(|(_, id)| [*id, id + 50]).collect();
        assert_eq!(
            got, want,
            "{name}: rows are the union of acknowledged commits"
        );
        assert_eq!(got.len(), 2 * n as usize);
    }
}

#[tokio::test]
async fn a_commit_identifier_is_applied_once() {
    let s = Scratch::new();
    let table = s
        .create(
            "db.t",
            "id BIGINT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "2")],
        )
        .await;
    let commit = table.new_commit("stream-job-1");
    let mut w = table.new_write(WriteOptions::default()).unwrap();
    w.write(&batch(&table, &[json!({"id": 1, "v": "a"})]))
        .await
        .unwrap();
    let messages = w.prepare_commit().await.unwrap();
    let first = commit.commit(messages.clone(), 7, None).await.unwrap();
    assert_eq!(first, CommitOutcome::Committed(1));
    // A restarted job replays the same committable: nothing new is committed.
    let again = table
        .new_commit("stream-job-1")
        .commit(messages.clone(), 7, None)
        .await
        .unwrap();
    assert_eq!(again, CommitOutcome::AlreadyCommitted(1));
    let older = table
        .new_commit("stream-job-1")
        .commit(messages.clone(), 3, None)
        .await
        .unwrap();
    assert_eq!(older, CommitOutcome::AlreadyCommitted(1));
    // Another user with the same identifier is independent.
    let other = table
        .new_commit("stream-job-2")
        .commit(vec![], 7, None)
        .await
        .unwrap();
    assert_eq!(other, CommitOutcome::Empty);
    assert_eq!(table.snapshot_manager().list_ids().await.unwrap(), vec![1]);
    let next = commit.commit(messages, 8, None).await.unwrap();
    assert_eq!(next, CommitOutcome::Committed(2));
}

#[tokio::test]
async fn ambiguous_snapshot_puts_are_resolved_by_reading_back() {
    let store =
        crate::faults::FaultyStore::new(std::sync::Arc::new(object_store::memory::InMemory::new()));
    let io = tidelake::io::FileIo::from_store(std::sync::Arc::clone(&store) as _, "flaky://");
    let catalog = tidelake::Catalog::new(io);
    let def = tidelake::TableDefinition {
        columns: tidelake::TableDefinition::parse_columns("id BIGINT NOT NULL, v STRING").unwrap(),
        ..Default::default()
    };
    let table = catalog
        .create_table(&tidelake::Identifier::new("db", "t"), &def, false)
        .await
        .unwrap();
    let write = |id: i64| {
        let table = table.clone();
        async move {
            table
                .write_batches(
                    &[batch(&table, &[json!({"id": id, "v": "x"})])],
                    WriteOptions::default(),
                    None,
                )
                .await
                .unwrap()
        }
    };
    // The put fails before storing: the committer retries and lands snapshot 1.
    store
        .snapshot_fault
        .store(1, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(write(1).await, CommitOutcome::Committed(1));
    // The put stores the snapshot but the acknowledgement is lost: reading it back shows the
    // commit landed, so it is not committed a second time as snapshot 3.
    store
        .snapshot_fault
        .store(2, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(write(2).await, CommitOutcome::Committed(2));
    // The put lands, the client's retry is refused because the file exists: the id is taken by
    // our own snapshot, which is kept (its manifests too), not committed again as snapshot 4.
    store
        .snapshot_fault
        .store(3, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(write(3).await, CommitOutcome::Committed(3));
    assert_eq!(
        table.snapshot_manager().list_ids().await.unwrap(),
        vec![1, 2, 3]
    );
    let got: BTreeSet<i64> = rows(
        &table
            .read_all(SnapshotSelector::Latest, None)
            .await
            .unwrap(),
    )
    .iter()
    .map(|r| r[0].as_i64().unwrap())
    .collect();
    assert_eq!(got, BTreeSet::from([1, 2, 3]));
}
