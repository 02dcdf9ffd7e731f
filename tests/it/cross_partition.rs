//! Cross-partition upserts (`bucket` = -1 and a primary key without the partition key, Paimon's
//! KEY_DYNAMIC mode): a key lives in one partition at a time. Under `deduplicate` a key that
//! arrives in another partition is deleted from the old one; `partial-update` merges it into the
//! old partition, `first-row` keeps the first. The key index survives writers, is rebuilt after
//! a rollback, and a second concurrent writer is refused. pypaimon reads what tidelake writes.

use serde_json::{json, Value};
use tidelake::error::ErrorKind;
use tidelake::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use tidelake::table::WriteOptions;

use crate::common::{batch, paimon_rows, read_rows, write_rows, Scratch};

async fn create(s: &Scratch, name: &str, opts: &[(&str, &str)]) -> tidelake::Table {
    s.create(
        name,
        "id BIGINT NOT NULL, dt STRING NOT NULL, v STRING, n BIGINT",
        &["id"],
        &["dt"],
        opts,
    )
    .await
}

fn row(id: i64, dt: &str, v: Option<&str>, n: Option<i64>) -> Value {
    json!({"id": id, "dt": dt, "v": v, "n": n})
}

fn expect(rows: &[(i64, &str, Option<&str>, Option<i64>)]) -> Vec<Vec<Value>> {
    let mut out: Vec<Vec<Value>> = rows
        .iter()
        .map(|(id, dt, v, n)| vec![json!(id), json!(dt), json!(v), json!(n)])
        .collect();
    out.sort_by_key(|r| r[0].as_i64());
    out
}

async fn latest(t: &tidelake::Table) -> Vec<Vec<Value>> {
    let mut rows = read_rows(t, None).await;
    rows.sort_by_key(|r| r[0].as_i64());
    rows
}

/// The bucket directories of one partition that hold files.
fn buckets(s: &Scratch, table: &str, partition: &str) -> usize {
    let (db, t) = table.split_once('.').unwrap();
    let dir = std::path::Path::new(s.path()).join(format!("{db}.db/{t}/{partition}"));
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("bucket-")
            })
            .count()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_key_lives_in_one_partition_and_moves_with_its_latest_row() {
    let s = Scratch::new();
    let name = "db.cross";
    let t = create(&s, name, &[("dynamic-bucket.target-row-num", "3")]).await;
    let first: Vec<Value> = (1..=6).map(|i| row(i, "a", Some("one"), Some(i))).collect();
    write_rows(&t, &first).await;
    assert_eq!(buckets(&s, name, "dt=a"), 2, "three keys per bucket");
    // 2 and 4 move to b, 6 is deleted from c (it lives in a), 7 is new in b; a batch moves 5
    // to b and back to a, and 3 to c and then b.
    let kinds = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let second = [
        (2, "b", "+I"),
        (4, "b", "+U"),
        (6, "c", "-D"),
        (7, "b", "+I"),
        (5, "b", "+I"),
        (3, "c", "+I"),
        (5, "a", "+U"),
        (3, "b", "+I"),
    ];
    let rows: Vec<Value> = second
        .iter()
        .map(|(id, dt, op)| json!({"id": id, "dt": dt, "v": "two", "n": id * 10, "op": op}))
        .collect();
    t.write_batches(&[crate::common::batch_with_kinds(&t, &rows)], kinds, None)
        .await
        .unwrap();
    let want = expect(&[
        (1, "a", Some("one"), Some(1)),
        (2, "b", Some("two"), Some(20)),
        (3, "b", Some("two"), Some(30)),
        (4, "b", Some("two"), Some(40)),
        (5, "a", Some("two"), Some(50)),
        (7, "b", Some("two"), Some(70)),
    ]);
    assert_eq!(latest(&t).await, want);
    // A new writer (a new statement) finds the keys where the last one left them; pypaimon
    // reads the same rows.
    write_rows(&t, &[row(2, "a", Some("three"), None)]).await;
    let mut want = want;
    want[1] = vec![json!(2), json!("a"), json!("three"), Value::Null];
    assert_eq!(latest(&t).await, want);
    let mut theirs = paimon_rows(s.path(), name, None);
    theirs.sort_by_key(|r| r[0].as_i64());
    assert_eq!(theirs, want);
    // Compaction keeps one row per key.
    t.compact(true, vec![]).await.unwrap();
    assert_eq!(latest(&t).await, want);
}

#[tokio::test]
async fn partial_update_merges_into_the_old_partition_and_first_row_keeps_the_first() {
    let s = Scratch::new();
    let p = create(&s, "db.partial", &[("merge-engine", "partial-update")]).await;
    write_rows(&p, &[row(1, "a", Some("x"), None)]).await;
    write_rows(
        &p,
        &[row(1, "b", None, Some(5)), row(2, "b", None, Some(6))],
    )
    .await;
    assert_eq!(
        latest(&p).await,
        expect(&[(1, "a", Some("x"), Some(5)), (2, "b", None, Some(6))])
    );
    let f = create(&s, "db.first", &[("merge-engine", "first-row")]).await;
    write_rows(&f, &[row(1, "a", Some("x"), None)]).await;
    write_rows(
        &f,
        &[row(1, "b", Some("y"), Some(5)), row(2, "b", None, None)],
    )
    .await;
    // Batch reads of first-row tables see compacted rows only (level 0 is skipped, as in Paimon).
    f.compact(true, vec![]).await.unwrap();
    assert_eq!(
        latest(&f).await,
        expect(&[(1, "a", Some("x"), None), (2, "b", None, None)])
    );
}

#[tokio::test]
async fn the_index_is_rebuilt_after_a_rollback_and_a_second_writer_is_refused() {
    let s = Scratch::new();
    let t = create(&s, "db.rb", &[]).await;
    write_rows(&t, &[row(1, "a", Some("x"), None)]).await;
    write_rows(&t, &[row(1, "b", Some("y"), None)]).await;
    // Back to snapshot 1: the key is in a again, and the index (at snapshot 2) must not say b.
    t.rollback_to(tidelake::table::maintenance::RollbackTarget::Snapshot(1))
        .await
        .unwrap();
    write_rows(&t, &[row(1, "c", Some("z"), None)]).await;
    assert_eq!(latest(&t).await, expect(&[(1, "c", Some("z"), None)]));

    // Two writers place keys at once: the second commit is a conflict and changes nothing.
    let mut w1 = t.new_write(WriteOptions::default()).unwrap();
    let mut w2 = t.new_write(WriteOptions::default()).unwrap();
    w1.write(&batch(&t, &[row(1, "d", Some("w1"), None)]))
        .await
        .unwrap();
    w2.write(&batch(&t, &[row(1, "e", Some("w2"), None)]))
        .await
        .unwrap();
    let m1 = w1.prepare_commit().await.unwrap();
    let m2 = w2.prepare_commit().await.unwrap();
    t.new_commit("one")
        .commit(m1, BATCH_COMMIT_IDENTIFIER, None)
        .await
        .unwrap();
    let e = t
        .new_commit("two")
        .commit(m2, BATCH_COMMIT_IDENTIFIER, None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains("cross-partition"), "{e}");
    assert_eq!(latest(&t).await, expect(&[(1, "d", Some("w1"), None)]));
}

#[tokio::test]
async fn cross_partition_layouts_paimon_refuses_are_refused() {
    let s = Scratch::new();
    let def = crate::common::definition(
        "id BIGINT NOT NULL, dt STRING NOT NULL, n BIGINT",
        &["id"],
        &["dt"],
        &[("sequence.field", "n")],
    );
    let e = s
        .catalog
        .create_table(&tidelake::Identifier::parse("db.seq").unwrap(), &def, false)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("You can not use sequence.field in cross partition update case"),
        "{e}"
    );
    let def = crate::common::definition(
        "id BIGINT NOT NULL, dt STRING NOT NULL, n BIGINT",
        &["id"],
        &["dt"],
        &[("cross-partition-upsert.index-ttl", "1 d")],
    );
    let e = s
        .catalog
        .create_table(&tidelake::Identifier::parse("db.ttl").unwrap(), &def, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("cross-partition-upsert.index-ttl"),
        "{e}"
    );
}

#[tokio::test]
async fn keys_move_out_of_deletion_vector_tables() {
    let s = Scratch::new();
    let t = create(
        &s,
        "db.dv",
        &[
            ("deletion-vectors.enabled", "true"),
            ("dynamic-bucket.target-row-num", "2"),
        ],
    )
    .await;
    write_rows(&t, &[row(0, "a", Some("x"), None)]).await;
    write_rows(&t, &[row(10, "a", Some("x"), None)]).await;
    write_rows(&t, &[row(10, "b", Some("y"), None)]).await;
    assert_eq!(
        latest(&t).await,
        expect(&[(0, "a", Some("x"), None), (10, "b", Some("y"), None)])
    );
}
