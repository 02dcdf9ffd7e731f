//! Deletion-vector tables (`deletion-vectors.enabled`) as Paimon writes them: a batch read skips
//! level 0 and reads every other file without merging, leaving out the rows the bucket's
//! `DELETION_VECTORS` index file marks, in either bitmap format; pypaimon reads the same rows.
//! tidelake does not write deletion vectors yet, so the table here is laid out by hand: a
//! compacted file, a level-0 file, and index files committed as Paimon's compaction commits them.

use serde_json::{json, Value};
use tidelake::error::ErrorKind;
use tidelake::spec::deletion_vector::write_32;
use tidelake::spec::index_manifest::{DeletionVectorMeta, IndexFileMeta, DELETION_VECTORS_INDEX};
use tidelake::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use tidelake::table::{CommitMessage, WriteOptions};
use tidelake::Identifier;

use crate::common::{batch, paimon_rows, read_rows, sorted, write_rows, Scratch};

fn rows(ids: &[i64], v: &str) -> Vec<Value> {
    ids.iter()
        .map(|id| json!({"id": id, "v": format!("{v}{id}")}))
        .collect()
}

fn want(ids: &[i64]) -> Vec<Vec<Value>> {
    sorted(
        ids.iter()
            .map(|id| vec![json!(id), json!(format!("a{id}"))])
            .collect(),
    )
}

/// Writes an index file under the table's `index/` and commits it for bucket 0.
async fn commit_index(
    s: &Scratch,
    t: &tidelake::Table,
    n: usize,
    bytes: Vec<u8>,
    metas: Vec<DeletionVectorMeta>,
) -> String {
    let name = format!("index-dvtest-{n}");
    let dir = format!("{}/db.db/dv/index", s.path());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(format!("{dir}/{name}"), &bytes).unwrap();
    let partition = t.new_scan().plan().await.unwrap().splits[0]
        .partition
        .clone();
    let mut message = CommitMessage::empty(partition, 0, 1);
    message.index_files = vec![IndexFileMeta {
        index_type: DELETION_VECTORS_INDEX.into(),
        file_name: name.clone(),
        file_size: bytes.len() as i64,
        row_count: metas.len() as i64,
        dv_ranges: Some(metas),
        external_path: None,
        global_index: None,
    }];
    t.new_commit("dv-test")
        .commit(vec![message], BATCH_COMMIT_IDENTIFIER, None)
        .await
        .unwrap();
    format!("{dir}/{name}")
}

#[tokio::test]
async fn deleted_rows_are_left_out_as_paimon_and_pypaimon_read_them() {
    let s = Scratch::new();
    let name = "db.dv";
    let t = s
        .create(
            name,
            "id BIGINT NOT NULL, v STRING",
            &["id"],
            &[],
            &[("bucket", "1")],
        )
        .await;
    write_rows(&t, &rows(&[1, 2, 3, 4, 5, 6], "a")).await;
    t.compact(true, vec![]).await.unwrap();
    // Not yet compacted: Paimon's batch reads of deletion-vector tables do not see level 0.
    write_rows(&t, &rows(&[2, 7], "b")).await;
    let plan = t.new_scan().plan().await.unwrap();
    let top = plan.splits[0]
        .files
        .iter()
        .find(|f| f.level > 0)
        .unwrap()
        .clone();
    // Another engine turns deletion vectors on (Paimon creates such tables with it on).
    let mut next = t.schema().as_ref().clone();
    next.id = 1;
    next.options
        .insert("deletion-vectors.enabled".into(), "true".into());
    assert!(t.schema_manager().create(&next).await.unwrap());
    let id = Identifier::parse(name).unwrap();
    let t = s.catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&t, None).await, want(&[1, 2, 3, 4, 5, 6]));

    // ids 2 and 5 sit at positions 1 and 4 of the compacted file (sorted by key).
    let (bytes, metas) = write_32(&[(top.file_name.clone(), [1u32, 4].into_iter().collect())]);
    commit_index(&s, &t, 0, bytes, metas).await;
    let deleted = want(&[1, 3, 4, 6]);
    assert_eq!(read_rows(&t, None).await, deleted);
    assert_eq!(paimon_rows(s.path(), name, None), deleted);
    // Point queries find nothing of a deleted row.
    let engine = tidelake::sql::SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let session = tidelake::sql::SqlSession::default();
    let out = engine
        .execute(&session, "SELECT v FROM db.dv WHERE id = 5", &[])
        .await
        .unwrap();
    assert!(out
        .collect()
        .await
        .unwrap()
        .iter()
        .all(|b| b.num_rows() == 0));
    let out = engine
        .execute(&session, "SELECT v FROM db.dv WHERE id = 4", &[])
        .await
        .unwrap();
    assert_eq!(
        crate::common::rows(&out.collect().await.unwrap()),
        [[json!("a4")]]
    );

    // A 64-bit vector (deletion-vectors.bitmap64, Iceberg's layout) replaces the bucket's file.
    let mut tm = roaring::RoaringTreemap::new();
    tm.insert(0);
    let mut body = 1_681_511_377i32.to_le_bytes().to_vec();
    tm.serialize_into(&mut body).unwrap();
    let mut bytes = vec![1u8];
    bytes.extend_from_slice(&(body.len() as i32).to_be_bytes());
    bytes.extend_from_slice(&body);
    bytes.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    let meta = DeletionVectorMeta {
        data_file: top.file_name.clone(),
        offset: 1,
        length: body.len() as i32 + 8,
        cardinality: Some(1),
    };
    commit_index(&s, &t, 1, bytes, vec![meta]).await;
    assert_eq!(read_rows(&t, None).await, want(&[2, 3, 4, 5, 6]));
    // Earlier snapshots keep their own vectors.
    let latest = t.snapshot_manager().latest_id().await.unwrap().unwrap();
    assert_eq!(read_rows(&t, Some(latest - 1)).await, deleted);

    // tidelake does not write deletion vectors yet: writes and compactions are refused and
    // change nothing.
    let before = t.snapshot_manager().list_ids().await.unwrap();
    let e = t
        .write_batches(
            &[batch(&t, &rows(&[9], "c"))],
            WriteOptions::default(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("deletion vectors"), "{e}");
    assert_eq!(
        t.compact(true, vec![]).await.unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    assert_eq!(t.snapshot_manager().list_ids().await.unwrap(), before);

    // A corrupt or missing vector fails the read naming the file; it never reads deleted rows.
    let (mut bytes, metas) = write_32(&[(top.file_name.clone(), [2u32].into_iter().collect())]);
    bytes[6] ^= 0xff; // the magic number
    let corrupt = commit_index(&s, &t, 2, bytes, metas).await;
    let e = t
        .read_all(tidelake::table::SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal, "{e}");
    assert!(
        corrupt.ends_with("db.db/dv/index/index-dvtest-2")
            && e.to_string().contains("db.db/dv/index/index-dvtest-2")
            && e.to_string().contains("invalid magic number"),
        "{e}"
    );
    let (bytes, metas) = write_32(&[(top.file_name.clone(), [2u32].into_iter().collect())]);
    let missing = commit_index(&s, &t, 3, bytes, metas).await;
    std::fs::remove_file(&missing).unwrap();
    let e = t
        .read_all(tidelake::table::SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("index-dvtest-3"), "{e}");
    // The snapshots before them still read.
    assert_eq!(read_rows(&t, Some(latest)).await, want(&[2, 3, 4, 5, 6]));
}

#[tokio::test]
async fn paimons_rules_for_deletion_vector_options_are_kept() {
    let s = Scratch::new();
    let def = |opts: &[(&str, &str)]| {
        crate::common::definition("id BIGINT NOT NULL, v STRING", &["id"], &[], opts)
    };
    for (i, (opts, needle)) in [
        (
            vec![
                ("deletion-vectors.enabled", "true"),
                ("merge-engine", "first-row"),
                ("bucket", "1"),
            ],
            "First row merge engine does not need deletion vectors",
        ),
        (
            vec![
                ("deletion-vectors.enabled", "true"),
                ("changelog-producer", "full-compaction"),
                ("bucket", "1"),
            ],
            "only supported for NONE/INPUT/LOOKUP changelog producer",
        ),
        (
            vec![("deletion-vectors.enabled", "true"), ("bucket", "1")],
            "deletion vectors (deletion-vectors.enabled",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let id = Identifier::new("db", format!("t{i}"));
        let e = s
            .catalog
            .create_table(&id, &def(&opts), false)
            .await
            .unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
        assert!(s.catalog.load_table(&id).await.is_err());
    }
}

/// Append tables may carry deletion vectors too (Paimon's DELETE on append tables): their files
/// are all level 0 and all read, each without the rows its vector marks.
#[tokio::test]
async fn an_append_table_keeps_its_level_0_files_and_leaves_out_deleted_rows() {
    let s = Scratch::new();
    let name = "db.dv";
    let t = s
        .create(name, "id BIGINT NOT NULL, v STRING", &[], &[], &[])
        .await;
    write_rows(&t, &rows(&[1, 2, 3], "a")).await;
    write_rows(&t, &rows(&[4, 5], "a")).await;
    let mut next = t.schema().as_ref().clone();
    next.id = 1;
    next.options
        .insert("deletion-vectors.enabled".into(), "true".into());
    assert!(t.schema_manager().create(&next).await.unwrap());
    let t = s
        .catalog
        .load_table(&Identifier::parse(name).unwrap())
        .await
        .unwrap();
    let files = t.new_scan().plan().await.unwrap().splits[0].files.clone();
    let first = files.iter().find(|f| f.row_count == 3).unwrap();
    // Appended in order: id 2 is row 1 of the first file.
    let (bytes, metas) = write_32(&[(first.file_name.clone(), [1u32].into_iter().collect())]);
    commit_index(&s, &t, 0, bytes, metas).await;
    let want = want(&[1, 3, 4, 5]);
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), name, None), want);
}
