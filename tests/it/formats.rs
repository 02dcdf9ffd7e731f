//! Data file formats besides Parquet. ORC (`file.format = orc`): tables pypaimon writes in ORC
//! are read, merged and compacted; tables created with `'file.format' = 'orc'` get ORC files that
//! pyarrow's ORC reader and pypaimon read; a table whose format changed reads each file by its own
//! format; a damaged ORC file is refused naming it, and nothing changes. Avro
//! (`file.format = avro`): written, compacted, and read by fastavro and pypaimon.

use serde_json::{json, Value};
use tidelake::sql::SqlEngine;
use tidelake::table::SnapshotSelector;
use tidelake::Identifier;

use crate::common::{files_under, paimon, paimon_rows, read_rows, sql, Scratch};

/// The data files (name suffix `ext`) under a table's directory, as paths.
fn files_with(dir: &std::path::Path, ext: &str) -> Vec<std::path::PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|f| f.ends_with(&format!(".{ext}")))
        .map(|f| dir.join(f))
        .collect()
}

/// A SQL engine over `s` with the database `db`.
async fn engine(s: &Scratch) -> SqlEngine {
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    sql(&engine, "CREATE DATABASE db").await.unwrap();
    engine
}

async fn load(s: &Scratch, name: &str) -> tidelake::Table {
    s.catalog
        .load_table(&Identifier::parse(name).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn orc_tables_pypaimon_writes_read_merge_and_compact_as_pypaimon_reads_them() {
    let s = Scratch::new();
    paimon(&[
        "create",
        s.path(),
        "db.o",
        &json!({"columns": [["id", "int64", false], ["v", "string", true], ["d", "float64", true],
                            ["n", "int32", true], ["ok", "bool", true], ["day", "date32", true],
                            ["at", "timestamp_us", true], ["price", "decimal_10_2", true],
                            ["raw", "binary", true], ["tags", "list<int64>", true],
                            ["attrs", "map<string,int64>", true],
                            ["pt", "struct<a:int64,b:string>", true]],
                "primary_keys": ["id"], "options": {"bucket": "2", "file.format": "orc"}})
        .to_string(),
    ]);
    let row = |id: i64, v: &str| {
        json!({"id": id, "v": v, "d": id as f64 / 4.0, "n": id * 3, "ok": id % 2 == 0,
               "day": 19_000 + id, "at": 1_700_000_000_000_000i64 + id, "price": format!("{id}.25"),
               "raw": "00ff10", "tags": [id, id + 1], "attrs": {"x": id, "y": null},
               "pt": {"a": id, "b": v}})
    };
    let first: Vec<Value> = (1..=40).map(|i| row(i, "one")).collect();
    paimon(&["write", s.path(), "db.o", &Value::Array(first).to_string()]);
    // The second commit replaces some keys and adds others: a merged read of two runs.
    let mut second: Vec<Value> = (30..=60).map(|i| row(i, "two")).collect();
    second.push(json!({"id": 61, "v": null}));
    paimon(&["write", s.path(), "db.o", &Value::Array(second).to_string()]);
    let dir = std::path::Path::new(s.path()).join("db.db/o");
    assert!(!files_with(&dir, "orc").is_empty());
    assert!(files_with(&dir, "parquet").is_empty());

    let t = load(&s, "db.o").await;
    let ours = read_rows(&t, None).await;
    assert_eq!(ours.len(), 61);
    assert_eq!(ours, paimon_rows(s.path(), "db.o", None));
    // Every snapshot, and a projection and a filter through SQL.
    assert_eq!(
        read_rows(&t, Some(1)).await,
        paimon_rows(s.path(), "db.o", Some(1))
    );
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let picked = sql(
        &engine,
        "SELECT v, id FROM db.o WHERE id BETWEEN 29 AND 31 ORDER BY id",
    )
    .await
    .unwrap();
    assert_eq!(
        picked,
        vec![
            vec![json!("one"), json!(29)],
            vec![json!("two"), json!(30)],
            vec![json!("two"), json!(31)]
        ]
    );

    // Compaction rewrites the ORC runs. DECIMAL and the nested columns are beyond the ORC
    // writer, so the compacted files are Parquet, which every Paimon reader takes by extension.
    sql(&engine, "CALL sys.compact('db.o')").await.unwrap();
    let t = load(&s, "db.o").await;
    assert_eq!(read_rows(&t, None).await, ours);
    assert_eq!(paimon_rows(s.path(), "db.o", None), ours);
}

#[tokio::test]
async fn tables_created_as_orc_get_orc_files_that_pyarrow_and_pypaimon_read() {
    let s = Scratch::new();
    let engine = engine(&s).await;
    sql(
        &engine,
        "CREATE TABLE db.w (id BIGINT NOT NULL, v STRING, d DOUBLE, day DATE, at TIMESTAMP(6), \
         ltz TIMESTAMP_LTZ(3), small SMALLINT, PRIMARY KEY (id) NOT ENFORCED) \
         WITH ('bucket' = '1', 'file.format' = 'orc', 'file.compression' = 'snappy')",
    )
    .await
    .unwrap();
    sql(
        &engine,
        "INSERT INTO db.w VALUES (1, 'a', 0.5, DATE '2024-02-29', TIMESTAMP '2024-02-29 10:11:12.123456', \
         TIMESTAMP '2024-02-29 10:11:12.123', 7), (2, NULL, NULL, NULL, NULL, NULL, NULL), \
         (3, 'c', -1.5, DATE '1969-12-31', TIMESTAMP '2200-12-31 23:59:59.999999', \
         TIMESTAMP '1900-01-01 00:00:00', -3)",
    )
    .await
    .unwrap();
    sql(&engine, "UPDATE db.w SET v = 'b' WHERE id = 2")
        .await
        .unwrap();
    sql(&engine, "DELETE FROM db.w WHERE id = 1").await.unwrap();
    sql(&engine, "INSERT INTO db.w (id, v) VALUES (4, 'd')")
        .await
        .unwrap();

    let dir = std::path::Path::new(s.path()).join("db.db/w");
    let orc = files_with(&dir, "orc");
    assert!(orc.len() >= 3, "{orc:?}");
    assert!(files_with(&dir, "parquet").is_empty());
    // pyarrow's ORC reader decodes every file we wrote, in the codec the table names.
    let paths: Vec<&str> = orc.iter().map(|p| p.to_str().unwrap()).collect();
    let mut args = vec!["check-orc"];
    args.extend(&paths);
    let checked = paimon(&args);
    for (name, file) in checked.as_object().unwrap() {
        assert_eq!(file["compression"], json!("SNAPPY"), "{name}");
        assert!(file["rows"].as_u64().unwrap() > 0, "{name}");
        let columns = file["columns"].as_array().unwrap();
        assert_eq!(columns[0], json!("_KEY_id"), "{name}");
        assert!(columns.contains(&json!("ltz")), "{name}");
    }

    let t = load(&s, "db.w").await;
    let ours = read_rows(&t, None).await;
    assert_eq!(ours.len(), 3);
    assert_eq!(ours, paimon_rows(s.path(), "db.w", None));

    // A full compaction leaves one ORC file, read the same by both.
    sql(&engine, "CALL sys.compact('db.w')").await.unwrap();
    let t = load(&s, "db.w").await;
    assert_eq!(read_rows(&t, None).await, ours);
    assert_eq!(paimon_rows(s.path(), "db.w", None), ours);
    let live = sql(&engine, "SELECT file_path FROM db.w$files")
        .await
        .unwrap();
    assert!(!live.is_empty());
    for f in &live {
        assert!(f[0].as_str().unwrap().ends_with(".orc"), "{f:?}");
    }
}

#[tokio::test]
async fn a_table_whose_format_changed_reads_each_file_by_its_own_format() {
    let s = Scratch::new();
    let engine = engine(&s).await;
    sql(
        &engine,
        "CREATE TABLE db.m (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED) \
         WITH ('bucket' = '1')",
    )
    .await
    .unwrap();
    sql(
        &engine,
        "INSERT INTO db.m VALUES (1, 'p'), (2, 'p'), (3, 'p')",
    )
    .await
    .unwrap();
    sql(&engine, "ALTER TABLE db.m SET ('file.format' = 'orc')")
        .await
        .unwrap();
    sql(&engine, "INSERT INTO db.m VALUES (2, 'o'), (4, 'o')")
        .await
        .unwrap();
    // pypaimon writes into it too, in the table's format now (ORC).
    paimon(&[
        "write",
        s.path(),
        "db.m",
        &json!([{"id": 3, "v": "py"}, {"id": 5, "v": "py"}]).to_string(),
    ]);
    let dir = std::path::Path::new(s.path()).join("db.db/m");
    assert_eq!(files_with(&dir, "parquet").len(), 1);
    assert_eq!(files_with(&dir, "orc").len(), 2);
    let want = vec![
        vec![json!(1), json!("p")],
        vec![json!(2), json!("o")],
        vec![json!(3), json!("py")],
        vec![json!(4), json!("o")],
        vec![json!(5), json!("py")],
    ];
    let t = load(&s, "db.m").await;
    assert_eq!(read_rows(&t, None).await, want);
    assert_eq!(paimon_rows(s.path(), "db.m", None), want);
    let got = sql(&engine, "SELECT id, v FROM db.m WHERE id = 2")
        .await
        .unwrap();
    assert_eq!(got, vec![vec![json!(2), json!("o")]]);
}

#[tokio::test]
async fn a_damaged_orc_file_is_refused_naming_it_and_changes_nothing() {
    let s = Scratch::new();
    let engine = engine(&s).await;
    sql(
        &engine,
        "CREATE TABLE db.d (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED) \
         WITH ('bucket' = '1', 'file.format' = 'orc')",
    )
    .await
    .unwrap();
    sql(&engine, "INSERT INTO db.d VALUES (1, 'a'), (2, 'b')")
        .await
        .unwrap();
    let dir = std::path::Path::new(s.path()).join("db.db/d");
    let [file] = files_with(&dir, "orc").try_into().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let name = file.file_name().unwrap().to_str().unwrap().to_string();

    let t = load(&s, "db.d").await;
    let latest = t.snapshot_manager().latest_id().await.unwrap();
    let err = t
        .read_all(SnapshotSelector::Latest, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&name), "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");
    let err = sql(&engine, "SELECT * FROM db.d").await.unwrap_err();
    assert!(err.to_string().contains(&name), "{err}");
    // A write that must read the file (an update) fails the same way and commits nothing.
    let err = sql(&engine, "UPDATE db.d SET v = 'x' WHERE id = 1")
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&name), "{err}");
    let t = load(&s, "db.d").await;
    assert_eq!(t.snapshot_manager().latest_id().await.unwrap(), latest);
    // Put back, it reads again.
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(read_rows(&t, None).await.len(), 2);
}

#[tokio::test]
async fn orc_tables_refuse_what_orc_cannot_hold_before_anything_is_written() {
    let s = Scratch::new();
    let engine = engine(&s).await;
    for (opts, says) in [
        (
            "'file.format' = 'orc', 'file.compression' = 'brotli'",
            "brotli",
        ),
        ("'file.format' = 'lance'", "'file.format' = 'lance'"),
    ] {
        let err = sql(
            &engine,
            &format!("CREATE TABLE db.bad (id BIGINT NOT NULL, v STRING) WITH ({opts})"),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), tidelake::ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains(says), "{err}");
        assert!(err.to_string().contains("db.bad"), "{err}");
        assert!(s
            .catalog
            .load_table(&Identifier::parse("db.bad").unwrap())
            .await
            .is_err());
    }
}

#[tokio::test]
async fn tables_created_as_avro_get_avro_files_that_fastavro_and_pypaimon_read() {
    let s = Scratch::new();
    let engine = engine(&s).await;
    for (name, keyed) in [("db.ak", true), ("db.aa", false)] {
        let (key, bucket) = if keyed {
            (", PRIMARY KEY (id) NOT ENFORCED", "1")
        } else {
            ("", "-1")
        };
        sql(
            &engine,
            &format!(
                "CREATE TABLE {name} (id BIGINT NOT NULL, v STRING, d DOUBLE, day DATE{key}) \
                 WITH ('bucket' = '{bucket}', 'file.format' = 'avro')"
            ),
        )
        .await
        .unwrap();
        sql(
            &engine,
            &format!(
                "INSERT INTO {name} VALUES (1, 'a', 0.5, DATE '2024-02-29'), (2, NULL, NULL, NULL)"
            ),
        )
        .await
        .unwrap();
        sql(
            &engine,
            &format!("INSERT INTO {name} VALUES (3, 'c', 1.5, NULL)"),
        )
        .await
        .unwrap();
        let dir = std::path::Path::new(s.path()).join(name.replace('.', ".db/"));
        let avro = files_with(&dir, "avro");
        assert_eq!(avro.len(), 2, "{avro:?}");
        assert!(files_with(&dir, "parquet").is_empty());
        let paths: Vec<&str> = avro.iter().map(|p| p.to_str().unwrap()).collect();
        let mut args = vec!["check-avro"];
        args.extend(&paths);
        let counts = paimon(&args);
        let total: u64 = counts
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(total, 3, "{counts}");

        let t = load(&s, name).await;
        let ours = read_rows(&t, None).await;
        assert_eq!(ours.len(), 3);
        assert_eq!(ours, paimon_rows(s.path(), name, None));
        if keyed {
            sql(&engine, &format!("CALL sys.compact('{name}')"))
                .await
                .unwrap();
            let t = load(&s, name).await;
            assert_eq!(read_rows(&t, None).await, ours);
            assert_eq!(paimon_rows(s.path(), name, None), ours);
            let live = sql(&engine, &format!("SELECT file_path FROM {name}$files"))
                .await
                .unwrap();
            assert_eq!(live.len(), 1);
            assert!(live[0][0].as_str().unwrap().ends_with(".avro"), "{live:?}");
        }
    }
}

#[tokio::test]
async fn a_large_orc_file_is_scanned_in_parts_that_add_up_to_it() {
    let s = Scratch::new();
    let engine = engine(&s).await;
    sql(
        &engine,
        "CREATE TABLE db.big (id BIGINT NOT NULL, v STRING) WITH ('file.format' = 'orc')",
    )
    .await
    .unwrap();
    // 700k rows in one file: three stripes, read as parts by the scan's partitions.
    sql(
        &engine,
        "INSERT INTO db.big SELECT value, CAST(value % 7 AS VARCHAR) FROM generate_series(0, 699999)",
    )
    .await
    .unwrap();
    let dir = std::path::Path::new(s.path()).join("db.db/big");
    assert_eq!(files_with(&dir, "orc").len(), 1);
    let got = sql(
        &engine,
        "SELECT count(*), count(DISTINCT id), sum(id), min(id), max(id), count(v) FROM db.big",
    )
    .await
    .unwrap();
    assert_eq!(
        got,
        vec![vec![
            json!(700_000),
            json!(700_000),
            json!(244_999_650_000i64),
            json!(0),
            json!(699_999),
            json!(700_000)
        ]]
    );
}
