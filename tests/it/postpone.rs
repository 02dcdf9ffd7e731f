//! Postpone-bucket tables (`bucket` = -2): tidelake's writers stage rows in `bucket-postpone/` as
//! Paimon's do (Avro KeyValue files named `data--u-<user>-s-<id>-w-<uuid>-<n>.avro`, manifest
//! bucket and total buckets -2, sequence numbers from 0), batch reads do not see them, and a
//! compaction moves them into fixed buckets in the order they were written, as one COMPACT
//! snapshot. pypaimon 2.1.0 stages rows in the same table and reads what the compaction moved.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tidelake::error::ErrorKind;
use tidelake::spec::{CommitKind, POSTPONE_BUCKET};
use tidelake::table::WriteOptions;

use crate::common::{batch_with_kinds, paimon, paimon_rows, read_rows, sorted, Scratch};

async fn postpone_table(s: &Scratch, name: &str, opts: &[(&str, &str)]) -> tidelake::Table {
    let mut o = vec![("bucket", "-2")];
    o.extend_from_slice(opts);
    s.create(
        name,
        "id BIGINT NOT NULL, dt STRING NOT NULL, v STRING",
        &["id", "dt"],
        &["dt"],
        &o,
    )
    .await
}

/// Rows of (id, dt, v, op).
fn step(rows: &[(i64, &str, &str, &str)]) -> Vec<Value> {
    rows.iter()
        .map(|(id, dt, v, op)| json!({"id": id, "dt": dt, "v": v, "op": op}))
        .collect()
}

type Model = BTreeMap<(i64, String), String>;

fn apply(model: &mut Model, rows: &[(i64, &str, &str, &str)]) {
    for (id, dt, v, op) in rows {
        if *op == "-D" {
            model.remove(&(*id, dt.to_string()));
        } else {
            model.insert((*id, dt.to_string()), v.to_string());
        }
    }
}

fn expected(model: &Model) -> Vec<Vec<Value>> {
    sorted(
        model
            .iter()
            .map(|((id, dt), v)| vec![json!(id), json!(dt), json!(v)])
            .collect(),
    )
}

/// (bucket, total buckets, file name) of every live file of the latest snapshot.
async fn live(t: &tidelake::Table) -> Vec<(i32, i32, String)> {
    let s = t.snapshot_manager().latest().await.unwrap().unwrap();
    let mut out: Vec<_> = t
        .manifest_manager()
        .live_entries(&s)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.bucket, e.total_buckets, e.file.file_name))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn staged_rows_are_invisible_until_a_compaction_moves_them_into_fixed_buckets() {
    let s = Scratch::new();
    let name = "db.later";
    let t = postpone_table(&s, name, &[("postpone.default-bucket-num", "3")]).await;
    let opts = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let steps: Vec<Vec<(i64, &str, &str, &str)>> = vec![
        (1..=40).map(|i| (i, "d1", "a", "+I")).collect(),
        (20..=30)
            .map(|i| (i, "d1", "b", "+U"))
            .chain((1..=5).map(|i| (i, "d2", "x", "+I")))
            .collect(),
        vec![
            (1, "d1", "", "-D"),
            (2, "d1", "c", "+U"),
            (2, "d1", "d", "+U"),
            (3, "d2", "", "-D"),
        ],
    ];
    let mut model = Model::new();
    for rows in &steps {
        let b = batch_with_kinds(&t, &step(rows));
        t.write_batches(&[b], opts.clone(), None).await.unwrap();
        apply(&mut model, rows);
    }
    // Staged: Paimon's names and manifest fields, Avro that fastavro reads, nothing visible.
    let files = live(&t).await;
    assert!(files
        .iter()
        .all(|(b, total, _)| *b == POSTPONE_BUCKET && *total == POSTPONE_BUCKET));
    for (_, _, f) in &files {
        assert!(
            f.starts_with("data--u-")
                && f.contains("-s-")
                && f.contains("-w-")
                && f.ends_with(".avro"),
            "{f}"
        );
    }
    let staged: Vec<String> = ["dt=d1", "dt=d2"]
        .iter()
        .flat_map(|p| {
            let dir =
                std::path::Path::new(s.path()).join(format!("db.db/later/{p}/bucket-postpone"));
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path().to_string_lossy().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(staged.len(), files.len());
    let mut args = vec!["check-avro"];
    args.extend(staged.iter().map(String::as_str));
    let counts = paimon(&args);
    let staged_rows: u64 = counts
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(staged_rows >= 40, "{counts}");
    assert!(read_rows(&t, None).await.is_empty());
    assert!(paimon_rows(s.path(), name, None).is_empty());

    let report = t.compact(false, vec![]).await.unwrap();
    let snap = t.snapshot_manager().latest().await.unwrap().unwrap();
    assert_eq!(snap.commit_kind, CommitKind::Compact);
    assert_eq!(report.snapshot_id, Some(snap.id));
    let moved = live(&t).await;
    assert!(
        moved
            .iter()
            .all(|(b, total, f)| (0..3).contains(b) && *total == 3 && f.ends_with(".parquet")),
        "{moved:?}"
    );
    assert_eq!(read_rows(&t, None).await, expected(&model));
    assert_eq!(paimon_rows(s.path(), name, None), expected(&model));

    // Later writes stage again and move into the same three buckets, after the moved rows.
    let more = vec![
        (2, "d1", "e", "+U"),
        (4, "d1", "", "-D"),
        (7, "d2", "y", "+I"),
    ];
    let b = batch_with_kinds(&t, &step(&more));
    t.write_batches(&[b], opts.clone(), None).await.unwrap();
    apply(&mut model, &more);
    assert_ne!(
        read_rows(&t, None).await,
        expected(&model),
        "staged, not yet visible"
    );
    t.compact(true, vec![]).await.unwrap();
    assert!(live(&t)
        .await
        .iter()
        .all(|(b, total, _)| *b >= 0 && *total == 3));
    assert_eq!(read_rows(&t, None).await, expected(&model));
    assert_eq!(paimon_rows(s.path(), name, None), expected(&model));
    // Nothing left to move: no snapshot.
    let before = t.snapshot_manager().latest_id().await.unwrap();
    assert_eq!(t.compact(false, vec![]).await.unwrap().snapshot_id, None);
    assert_eq!(t.snapshot_manager().latest_id().await.unwrap(), before);
}

#[tokio::test]
async fn pypaimon_and_tidelake_stage_rows_in_turn_and_the_later_writer_wins() {
    let s = Scratch::new();
    let name = "db.turns";
    let t = postpone_table(&s, name, &[]).await;
    let mut model = Model::new();
    let py = |rows: &[(i64, &str, &str)]| {
        let rows: Vec<Value> = rows
            .iter()
            .map(|(id, dt, v)| json!({"id": id, "dt": dt, "v": v}))
            .collect();
        paimon(&["write", s.path(), name, &json!(rows).to_string()]);
    };
    py(&[(1, "d1", "py1"), (2, "d1", "py2"), (3, "d2", "py3")]);
    for (id, dt, v) in [(1, "d1", "py1"), (2, "d1", "py2"), (3, "d2", "py3")] {
        model.insert((id, dt.into()), v.into());
    }
    let opts = WriteOptions {
        row_kind_column: Some("op".into()),
    };
    let ours = vec![
        (2, "d1", "t2", "+U"),
        (3, "d2", "", "-D"),
        (4, "d1", "t4", "+I"),
    ];
    let b = batch_with_kinds(&t, &step(&ours));
    t.write_batches(&[b], opts, None).await.unwrap();
    apply(&mut model, &ours);
    py(&[(4, "d1", "py4")]);
    model.insert((4, "d1".into()), "py4".into());
    assert!(read_rows(&t, None).await.is_empty());
    t.compact(false, vec![]).await.unwrap();
    // No `postpone.default-bucket-num`: the estimate from the staged bytes is one bucket.
    assert!(live(&t)
        .await
        .iter()
        .all(|(b, total, _)| *b == 0 && *total == 1));
    assert_eq!(read_rows(&t, None).await, expected(&model));
    assert_eq!(paimon_rows(s.path(), name, None), expected(&model));
}

#[tokio::test]
async fn a_corrupt_staged_file_fails_the_compaction_naming_it_and_changes_nothing() {
    let s = Scratch::new();
    let name = "db.bad";
    let t = postpone_table(&s, name, &[]).await;
    crate::common::write_rows(&t, &[json!({"id": 1, "dt": "d1", "v": "a"})]).await;
    let (_, _, file) = live(&t).await.remove(0);
    let path =
        std::path::Path::new(s.path()).join(format!("db.db/bad/dt=d1/bucket-postpone/{file}"));
    std::fs::write(&path, b"Obj\x01garbage").unwrap();
    let before = t.snapshot_manager().latest_id().await.unwrap();
    let err = t.compact(false, vec![]).await.unwrap_err();
    assert!(err.to_string().contains(&file), "{err}");
    assert_eq!(t.snapshot_manager().latest_id().await.unwrap(), before);
    let dirs: Vec<String> =
        std::fs::read_dir(std::path::Path::new(s.path()).join("db.db/bad/dt=d1"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
    assert_eq!(
        dirs,
        ["bucket-postpone"],
        "nothing written outside the staging bucket"
    );
}

#[tokio::test]
async fn append_tables_cannot_postpone() {
    let s = Scratch::new();
    let err = s
        .catalog
        .create_table(
            &tidelake::Identifier::new("db", "app"),
            &crate::common::definition("id BIGINT, v STRING", &[], &[], &[("bucket", "-2")]),
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("primary key"), "{err}");
}
