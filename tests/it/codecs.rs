//! Parquet codecs: a table's `file.compression` (and `file.compression.zstd-level`) is the codec
//! of every file tidelake writes into it, and files in any codec Paimon or pyarrow writes are read.
//! pypaimon is the second implementation both ways: it reads ours and writes its own into the same
//! table. What is not read yet (Paimon's aggregate functions tidelake lacks) is refused
//! as Unsupported in one line naming the table and the file or feature.

use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::json;

use crate::common::{definition, paimon, paimon_rows, read_rows, sorted, Scratch};
use tidelake::table::SnapshotSelector;

/// The codecs of every column chunk of every data file under `dir`.
fn codecs_under(dir: &std::path::Path) -> Vec<Compression> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(codecs_under(&p));
        } else if p.extension().is_some_and(|x| x == "parquet") {
            let reader = SerializedFileReader::new(std::fs::File::open(&p).unwrap()).unwrap();
            for rg in reader.metadata().row_groups() {
                out.extend(rg.columns().iter().map(|c| c.compression()));
            }
        }
    }
    out
}

#[tokio::test]
async fn each_codec_is_written_as_the_table_says_and_read_both_ways() {
    let s = Scratch::new();
    for (name, codec, level, want) in [
        ("gz", "gzip", None, "GZIP"),
        ("br", "brotli", None, "BROTLI"),
        ("sn", "snappy", None, "SNAPPY"),
        ("l4", "lz4", None, "LZ4"),
        ("l4r", "LZ4_RAW", None, "LZ4_RAW"),
        ("no", "none", None, "UNCOMPRESSED"),
        ("zs", "zstd", Some("9"), "ZSTD"),
    ] {
        let table = format!("db.{name}");
        let mut opts = vec![("bucket", "1"), ("file.compression", codec)];
        if let Some(l) = level {
            opts.push(("file.compression.zstd-level", l));
        }
        let t = s
            .create(&table, "id BIGINT NOT NULL, v STRING", &["id"], &[], &opts)
            .await;
        crate::common::write_rows(
            &t,
            &[json!({"id": 1, "v": "a"}), json!({"id": 2, "v": "b"})],
        )
        .await;
        let dir = std::path::Path::new(s.path()).join(format!("db.db/{name}"));
        let ours = codecs_under(&dir);
        assert!(!ours.is_empty());
        for c in &ours {
            assert!(
                format!("{c:?}").starts_with(want),
                "{table}: a column chunk in {c:?}, the table says {codec}"
            );
        }
        // pypaimon reads ours, writes its own (in the table's codec) on top; each reads both.
        paimon(&[
            "write",
            s.path(),
            &table,
            &json!([{"id": 2, "v": "b-py"}, {"id": 3, "v": "c-py"}]).to_string(),
        ]);
        // pypaimon wrote its file in the table's codec too: tidelake reads another writer's.
        let all = codecs_under(&dir);
        assert!(all.len() > ours.len(), "{table}: pypaimon added a file");
        for c in &all {
            assert!(
                format!("{c:?}").starts_with(want),
                "{table}: pypaimon wrote a column chunk in {c:?}"
            );
        }
        let want_rows = sorted(vec![
            vec![json!(1), json!("a")],
            vec![json!(2), json!("b-py")],
            vec![json!(3), json!("c-py")],
        ]);
        assert_eq!(read_rows(&t, None).await, want_rows, "{table}");
        assert_eq!(paimon_rows(s.path(), &table, None), want_rows, "{table}");
        // A compaction rewrites both writers' files in the table's codec.
        t.compact(true, vec![]).await.unwrap();
        assert_eq!(read_rows(&t, None).await, want_rows, "{table} compacted");
    }
}

#[tokio::test]
async fn a_codec_that_cannot_be_written_is_refused_on_create_naming_the_option() {
    let s = Scratch::new();
    for (opts, kind, says) in [
        (
            vec![("file.compression", "lzo")],
            tidelake::ErrorKind::Unsupported,
            "there is no LZO writer",
        ),
        (
            vec![("file.compression", "zip")],
            tidelake::ErrorKind::InvalidArgument,
            "option 'file.compression' must be one of",
        ),
        (
            vec![("file.compression.zstd-level", "99")],
            tidelake::ErrorKind::InvalidArgument,
            "a zstd level from 1 to 22",
        ),
    ] {
        let def = definition("id BIGINT NOT NULL", &["id"], &[], &opts);
        let err = s
            .catalog
            .create_table(&tidelake::Identifier::parse("db.bad").unwrap(), &def, false)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), kind, "{opts:?}: {err}");
        assert!(err.to_string().contains(says), "{opts:?}: {err}");
        assert!(s
            .catalog
            .load_table(&tidelake::Identifier::parse("db.bad").unwrap())
            .await
            .is_err());
    }
}

#[tokio::test]
async fn tables_tidelake_cannot_read_yet_are_refused_naming_what_and_where() {
    let s = Scratch::new();
    // A Paimon aggregate function tidelake lacks, on a nested column.
    paimon(&[
        "create",
        s.path(),
        "db.nested_agg",
        &json!({"columns": [["id", "int64", false], ["v", "list<struct<a:int64,b:string>>", true]],
                "primary_keys": ["id"],
                "options": {"bucket": "1", "merge-engine": "aggregation",
                            "fields.v.aggregate-function": "nested_update",
                            "fields.v.nested-key": "a"}})
        .to_string(),
    ]);
    let err = match s
        .catalog
        .load_table(&tidelake::Identifier::parse("db.nested_agg").unwrap())
        .await
    {
        Ok(t) => t
            .read_all(SnapshotSelector::Latest, None)
            .await
            .unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(err.kind(), tidelake::ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("db.nested_agg"), "{err}");
}

/// The codec of each live file of `t`, with its LSM level.
async fn live_codecs(s: &Scratch, t: &tidelake::Table, name: &str) -> Vec<(i32, String)> {
    let plan = t.new_scan().plan().await.unwrap();
    let mut out = Vec::new();
    for split in &plan.splits {
        for f in &split.files {
            let path = std::path::Path::new(s.path())
                .join(format!("db.db/{name}/bucket-{}", split.bucket))
                .join(&f.file_name);
            let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            for rg in reader.metadata().row_groups() {
                for c in rg.columns() {
                    out.push((f.level, format!("{:?}", c.compression())));
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn files_take_the_codec_of_their_level() {
    let s = Scratch::new();
    let t = s
        .create(
            "db.lv",
            "id BIGINT NOT NULL, v STRING",
            &["id"],
            &[],
            &[
                ("bucket", "1"),
                ("file.compression", "zstd"),
                ("file.compression.per.level", "0:snappy"),
            ],
        )
        .await;
    crate::common::write_rows(&t, &[json!({"id": 1, "v": "a"})]).await;
    crate::common::write_rows(&t, &[json!({"id": 2, "v": "b"})]).await;
    let level0 = live_codecs(&s, &t, "lv").await;
    assert!(!level0.is_empty());
    assert!(
        level0.iter().all(|(l, c)| *l == 0 && c == "SNAPPY"),
        "{level0:?}"
    );
    t.compact(true, vec![]).await.unwrap();
    let compacted = live_codecs(&s, &t, "lv").await;
    assert!(!compacted.is_empty());
    assert!(
        compacted
            .iter()
            .all(|(l, c)| *l > 0 && c.starts_with("ZSTD")),
        "{compacted:?}"
    );
    assert_eq!(
        paimon_rows(s.path(), "db.lv", None),
        sorted(vec![vec![json!(1), json!("a")], vec![json!(2), json!("b")]])
    );
}
