//! Deletion-vector tables (`deletion-vectors.enabled`) as Paimon writes them: a batch read skips
//! level 0 and reads every other file without merging, leaving out the rows the bucket's
//! `DELETION_VECTORS` index file marks, in either bitmap format; pypaimon reads the same rows.
//! The first tables here are laid out by hand (a compacted file, a level-0 file, and index files
//! committed as Paimon's compaction commits them); the later ones tidelake writes itself, each
//! commit compacting level 0 up and marking the old copies of the keys it rewrote.

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

/// A deletion-vector primary-key table `id BIGINT NOT NULL, v STRING` with `options` besides.
async fn dv_table(s: &Scratch, name: &str, options: &[(&str, &str)]) -> tidelake::Table {
    let mut all = vec![("deletion-vectors.enabled", "true")];
    all.extend_from_slice(options);
    s.create(name, "id BIGINT NOT NULL, v STRING", &["id"], &[], &all)
        .await
}

/// The bucket's deletion-vector file in the latest snapshot of `t` (one bucket).
async fn vector_file(t: &tidelake::Table) -> tidelake::spec::index_manifest::IndexManifestEntry {
    let snapshot = t.snapshot_manager().latest().await.unwrap().unwrap();
    t.manifest_manager()
        .index_entries(&snapshot)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.file.index_type == DELETION_VECTORS_INDEX)
        .expect("a vector file")
}

/// What a deletion-vector table's latest snapshot holds: (files per level, DV files, marked rows).
async fn layout_of(t: &tidelake::Table) -> (Vec<i32>, usize, u64) {
    let plan = t.new_scan().all_levels().plan().await.unwrap();
    let mut levels: Vec<i32> = plan
        .splits
        .iter()
        .flat_map(|s| s.files.iter().map(|f| f.level))
        .collect();
    levels.sort_unstable();
    let snapshot = t.snapshot_manager().latest().await.unwrap().unwrap();
    let entries = t.manifest_manager().index_entries(&snapshot).await.unwrap();
    let dv: Vec<_> = entries
        .iter()
        .filter(|e| e.file.index_type == DELETION_VECTORS_INDEX)
        .collect();
    let marked = dv
        .iter()
        .flat_map(|e| e.file.dv_ranges.iter().flatten())
        .map(|r| r.cardinality.unwrap_or(0) as u64)
        .sum();
    (levels, dv.len(), marked)
}

fn kinds(rows: &[(i64, &str, &str)]) -> Vec<Value> {
    rows.iter()
        .map(|(id, v, op)| json!({"id": id, "v": v, "op": op}))
        .collect()
}

/// tidelake writes deletion-vector tables as Paimon does: every commit compacts level 0 up, the
/// old copies of the keys it rewrote are marked in the bucket's vector file, and batch reads
/// (tidelake's and pypaimon's) are raw scans that see exactly the model's rows.
#[tokio::test]
async fn commits_mark_replaced_rows_and_pypaimon_reads_them() {
    let s = Scratch::new();
    let name = "db.dvw";
    let t = dv_table(&s, name, &[("bucket", "2")]).await;
    let mut model: std::collections::BTreeMap<i64, String> = Default::default();
    let check = |model: &std::collections::BTreeMap<i64, String>| {
        sorted(
            model
                .iter()
                .map(|(k, v)| vec![json!(k), json!(v)])
                .collect(),
        )
    };
    let opts = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let steps: Vec<Vec<(i64, &str, &str)>> = vec![
        (1..=60).map(|i| (i, "a", "+I")).collect(),
        (10..=30).map(|i| (i, "b", "+U")).collect(),
        (40..=50)
            .map(|i| (i, "", "-D"))
            .chain([(200, "z", "+I")])
            .collect(),
        (25..=45).map(|i| (i, "c", "+U")).collect(),
        vec![
            (1, "", "-D"),
            (2, "d", "+U"),
            (2, "e", "+U"),
            (3, "", "-D"),
            (3, "f", "+I"),
        ],
    ];
    let mut most_marked = 0;
    for (i, step) in steps.iter().enumerate() {
        let b = crate::common::batch_with_kinds(&t, &kinds(step));
        t.write_batches(&[b], opts.clone(), None).await.unwrap();
        for (id, v, op) in step {
            if *op == "-D" {
                model.remove(id);
            } else {
                model.insert(*id, v.to_string());
            }
        }
        let (levels, dv_files, marked) = layout_of(&t).await;
        assert!(!levels.contains(&0), "step {i}: level 0 left: {levels:?}");
        if i > 0 {
            // Upserts and deletes of existing keys mark their old copies (a compaction that
            // rewrites a marked file drops its marks).
            assert!(dv_files > 0, "step {i}");
        }
        most_marked = most_marked.max(marked);
        assert_eq!(read_rows(&t, None).await, check(&model), "step {i}");
    }
    assert!(most_marked >= 10, "{most_marked}");
    assert_eq!(paimon_rows(s.path(), name, None), check(&model));
    // pypaimon writes in turn, to level 0 (which batch reads skip until a compaction moves it
    // up).
    let py_rows = json!([{"id": 5, "v": "py5"}, {"id": 300, "v": "py300"}]).to_string();
    crate::common::paimon(&["write", s.path(), name, &py_rows]);
    assert_eq!(paimon_rows(s.path(), name, None), check(&model));
    // A compaction (as Paimon's dedicated compaction job) moves every level-0 file up.
    t.compact(false, vec![]).await.unwrap();
    assert!(!layout_of(&t).await.0.contains(&0));
    model.insert(5, "py5".into());
    model.insert(300, "py300".into());
    write_rows(&t, &rows(&[301], "t")).await;
    model.insert(301, "t301".into());
    assert_eq!(read_rows(&t, None).await, check(&model));
    assert_eq!(paimon_rows(s.path(), name, None), check(&model));
    // A point query sees one row per key.
    let engine = tidelake::sql::SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let session = tidelake::sql::SqlSession::default();
    let out = engine
        .execute(&session, "SELECT v FROM db.dvw WHERE id = 30", &[])
        .await
        .unwrap();
    assert_eq!(
        crate::common::rows(&out.collect().await.unwrap()),
        [[json!("c")]]
    );
    // A full compaction rewrites everything: no row is marked any more (an empty vector file
    // replaces each bucket's, as Paimon writes it), and the rows stay.
    t.compact(true, vec![]).await.unwrap();
    let (_, _, marked) = layout_of(&t).await;
    assert_eq!(marked, 0);
    assert_eq!(read_rows(&t, None).await, check(&model));
    assert_eq!(paimon_rows(s.path(), name, None), check(&model));
    // Expiry down to one snapshot leaves exactly the vector files the snapshot lists.
    let mut next = t.schema().as_ref().clone();
    next.id += 1;
    for (k, v) in [
        ("snapshot.num-retained.min", "1"),
        ("snapshot.num-retained.max", "1"),
    ] {
        next.options.insert(k.into(), v.into());
    }
    assert!(t.schema_manager().create(&next).await.unwrap());
    let t = s
        .catalog
        .load_table(&Identifier::parse(name).unwrap())
        .await
        .unwrap();
    write_rows(&t, &rows(&[7], "g")).await;
    model.insert(7, "g7".into());
    assert_eq!(read_rows(&t, None).await, check(&model));
    let snapshot = t.snapshot_manager().latest().await.unwrap().unwrap();
    let listed: std::collections::BTreeSet<String> = t
        .manifest_manager()
        .index_entries(&snapshot)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file.file_name)
        .collect();
    let on_disk: std::collections::BTreeSet<String> =
        std::fs::read_dir(format!("{}/db.db/dvw/index", s.path()))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
    assert_eq!(on_disk, listed);
}

/// Partial-update and aggregation tables with deletion vectors merge the old copy of a key into
/// its new one at compaction (Paimon's PersistValueAndPosProcessor), then mark the old copy.
#[tokio::test]
async fn engines_that_build_rows_merge_the_old_copy_in() {
    let s = Scratch::new();
    let pu = s
        .create(
            "db.pu",
            "id BIGINT NOT NULL, a STRING, b STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("deletion-vectors.enabled", "true"),
                ("merge-engine", "partial-update"),
            ],
        )
        .await;
    write_rows(
        &pu,
        &[json!({"id": 1, "a": "a1"}), json!({"id": 2, "a": "a2"})],
    )
    .await;
    write_rows(&pu, &[json!({"id": 1, "b": "b1"})]).await;
    write_rows(
        &pu,
        &[json!({"id": 2, "b": "b2"}), json!({"id": 3, "b": "b3"})],
    )
    .await;
    let want = sorted(vec![
        vec![json!(1), json!("a1"), json!("b1")],
        vec![json!(2), json!("a2"), json!("b2")],
        vec![json!(3), Value::Null, json!("b3")],
    ]);
    assert_eq!(read_rows(&pu, None).await, want);
    assert_eq!(paimon_rows(s.path(), "db.pu", None), want);
    assert!(layout_of(&pu).await.2 >= 2);

    let agg = s
        .create(
            "db.agg",
            "id BIGINT NOT NULL, n BIGINT, m BIGINT",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("deletion-vectors.enabled", "true"),
                ("merge-engine", "aggregation"),
                ("fields.n.aggregate-function", "sum"),
                ("fields.m.aggregate-function", "max"),
            ],
        )
        .await;
    for round in 1..=4i64 {
        let rows: Vec<Value> = (1..=3)
            .map(|id| json!({"id": id, "n": id * round, "m": (round * 7) % 5}))
            .collect();
        write_rows(&agg, &rows).await;
    }
    // n: id * (1 + 2 + 3 + 4); m: max of 2, 4, 1, 3.
    let want = sorted(
        (1..=3)
            .map(|id: i64| vec![json!(id), json!(id * 10), json!(4)])
            .collect(),
    );
    assert_eq!(read_rows(&agg, None).await, want);
    assert_eq!(paimon_rows(s.path(), "db.agg", None), want);
}

/// The newcomer's table with deletion vectors, through SQL: dynamic buckets (Paimon's default),
/// INSERT, UPDATE and DELETE; each statement's commit leaves nothing at level 0.
#[tokio::test]
async fn sql_statements_on_a_dynamic_bucket_deletion_vector_table() {
    let s = Scratch::new();
    let engine = tidelake::sql::SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let session = tidelake::sql::SqlSession::default();
    let run = |sql: &'static str| {
        let engine = engine.clone();
        let session = session.clone();
        async move {
            let out = engine.execute(&session, sql, &[]).await.unwrap();
            crate::common::rows(&out.collect().await.unwrap())
        }
    };
    run("CREATE DATABASE db").await;
    run("CREATE TABLE db.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('deletion-vectors.enabled' = 'true')").await;
    run("INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')").await;
    run("UPDATE db.t SET v = 'bb' WHERE id = 2").await;
    run("DELETE FROM db.t WHERE id = 3").await;
    run("INSERT INTO db.t VALUES (4, 'dd'), (5, 'e')").await;
    let got = run("SELECT id, v FROM db.t ORDER BY id").await;
    let want: Vec<Vec<Value>> = [(1, "a"), (2, "bb"), (4, "dd"), (5, "e")]
        .iter()
        .map(|(i, v)| vec![json!(i), json!(v)])
        .collect();
    assert_eq!(got, want);
    let t = s
        .catalog
        .load_table(&Identifier::new("db", "t"))
        .await
        .unwrap();
    let (levels, dv_files, marked) = layout_of(&t).await;
    assert!(!levels.contains(&0), "{levels:?}");
    assert!(dv_files >= 1 && marked >= 3, "{dv_files} {marked}");
    assert_eq!(paimon_rows(s.path(), "db.t", None), sorted(want));
    // An overwrite's rows are compacted up at once: readers see them, not the replaced ones.
    run("INSERT OVERWRITE db.t VALUES (9, 'z'), (2, 'y')").await;
    let got = run("SELECT id, v FROM db.t ORDER BY id").await;
    let want = vec![vec![json!(2), json!("y")], vec![json!(9), json!("z")]];
    assert_eq!(got, want);
    assert_eq!(paimon_rows(s.path(), "db.t", None), want);
}

/// A corrupt deletion-vector file of a table tidelake writes: the next write fails naming the
/// table and the file and commits nothing; the read fails the same way (never returning rows the
/// file deletes); snapshots before it still read.
#[tokio::test]
async fn a_corrupt_vector_file_fails_the_write_naming_it_and_changes_nothing() {
    let s = Scratch::new();
    let name = "db.dvc";
    let t = dv_table(&s, name, &[("bucket", "1")]).await;
    write_rows(&t, &rows(&[1, 2, 3, 4], "a")).await;
    write_rows(&t, &rows(&[2, 3], "b")).await;
    let good = t.snapshot_manager().latest_id().await.unwrap().unwrap();
    let entry = vector_file(&t).await;
    let expect = sorted(vec![
        vec![json!(1), json!("a1")],
        vec![json!(2), json!("b2")],
        vec![json!(3), json!("b3")],
        vec![json!(4), json!("a4")],
    ]);
    assert_eq!(read_rows(&t, None).await, expect);
    let path = format!("{}/db.db/dvc/index/{}", s.path(), entry.file.file_name);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[6] ^= 0xff; // the first vector's magic number
    std::fs::write(&path, &bytes).unwrap();
    // A fresh catalog: nothing cached of the file (index files are immutable by name).
    let t = tidelake::Catalog::open(s.path())
        .unwrap()
        .load_table(&Identifier::parse(name).unwrap())
        .await
        .unwrap();
    let before = t.snapshot_manager().list_ids().await.unwrap();
    let e = t
        .write_batches(
            &[batch(&t, &rows(&[3], "c"))],
            WriteOptions::default(),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains(&entry.file.file_name) && e.to_string().contains("magic"),
        "{e}"
    );
    assert_eq!(t.snapshot_manager().list_ids().await.unwrap(), before);
    let e = t
        .read_all(tidelake::table::SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains(&entry.file.file_name), "{e}");
    // The first write's snapshots had no vectors yet: they still read.
    let first = t
        .snapshot_manager()
        .list_ids()
        .await
        .unwrap()
        .into_iter()
        .rev()
        .find(|id| *id < good - 1)
        .unwrap();
    assert_eq!(read_rows(&t, Some(first)).await, want(&[1, 2, 3, 4]));
}

/// `deletion-vectors.bitmap64`: tidelake writes Paimon's 64-bit (Iceberg-compatible) vectors,
/// and reads them back (pypaimon reads only 32-bit ones).
#[tokio::test]
async fn sixty_four_bit_vectors_are_written_when_asked_for() {
    let s = Scratch::new();
    let t = dv_table(
        &s,
        "db.dv64",
        &[("bucket", "1"), ("deletion-vectors.bitmap64", "true")],
    )
    .await;
    write_rows(&t, &rows(&[1, 2, 3, 4, 5], "a")).await;
    write_rows(&t, &rows(&[6], "a")).await;
    write_rows(&t, &rows(&[2, 4], "b")).await;
    let entry = vector_file(&t).await;
    let path = format!("{}/db.db/dv64/index/{}", s.path(), entry.file.file_name);
    let bytes = std::fs::read(&path).unwrap();
    let range = &entry.file.dv_ranges.as_ref().unwrap()[0];
    // The magic, little-endian, and a listed length covering the whole record.
    let at = range.offset as usize;
    assert_eq!(&bytes[at + 4..at + 8], &1_681_511_377i32.to_le_bytes());
    let size = i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!(range.length, size + 8);
    let got = read_rows(&t, None).await;
    let mut want = want(&[1, 3, 5, 6]);
    want.push(vec![json!(2), json!("b2")]);
    want.push(vec![json!(4), json!("b4")]);
    assert_eq!(got, sorted(want));
}

/// `deletion-vectors.merge-on-read`: batch reads merge level 0 with the other levels (their
/// marked rows left out), so a write-only table's rows are seen before any compaction, and after
/// one the vectors still hide the old copies.
#[tokio::test]
async fn merge_on_read_sees_level_0_and_honours_the_vectors() {
    let s = Scratch::new();
    let t = dv_table(
        &s,
        "db.mor",
        &[
            ("bucket", "1"),
            ("deletion-vectors.merge-on-read", "true"),
            ("write-only", "true"),
        ],
    )
    .await;
    write_rows(&t, &rows(&[1, 2, 3], "a")).await;
    write_rows(&t, &rows(&[2], "b")).await;
    let (levels, _, _) = layout_of(&t).await;
    assert_eq!(levels, [0, 0]);
    let mut want = want(&[1, 3]);
    want.push(vec![json!(2), json!("b2")]);
    let want = sorted(want);
    assert_eq!(read_rows(&t, None).await, want);
    // A compaction moves level 0 up; deleting 2 and compacting again marks its old copy (the
    // delete itself is dropped), and merge-on-read must leave the marked row out.
    t.compact(false, vec![]).await.unwrap();
    assert!(!layout_of(&t).await.0.contains(&0));
    assert_eq!(read_rows(&t, None).await, want);
    let b = crate::common::batch_with_kinds(&t, &kinds(&[(2, "", "-D")]));
    t.write_batches(
        &[b],
        WriteOptions {
            row_kind_column: Some("op".into()),
        },
        None,
    )
    .await
    .unwrap();
    t.compact(false, vec![]).await.unwrap();
    let (levels, dv_files, marked) = layout_of(&t).await;
    assert!(
        !levels.contains(&0) && dv_files == 1 && marked == 1,
        "{levels:?} {marked}"
    );
    assert_eq!(
        read_rows(&t, None).await,
        crate::deletion_vectors::want(&[1, 3])
    );
    write_rows(&t, &rows(&[3], "c")).await;
    let mut want2 = crate::deletion_vectors::want(&[1]);
    want2.push(vec![json!(3), json!("c3")]);
    assert_eq!(read_rows(&t, None).await, sorted(want2));
}
