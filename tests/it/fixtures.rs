//! Golden tables written by pypaimon 2.1 (`tests/fixtures/paimon-2.1`, kept in the repository): every
//! table read at every snapshot equals `EXPECTED.md`, and every manifest file decodes and re-encodes losslessly;
//! the tables of `modes/` (nested types, dynamic and postpone buckets) read as pypaimon reads them.

use std::collections::BTreeMap;

use serde_json::Value;
use tidelake::spec::manifest::{
    decode_manifest, decode_manifest_list, encode_manifest, encode_manifest_list,
};
use tidelake::{Catalog, ErrorKind, Identifier};

use crate::common::{fixtures_dir, read_rows, sorted};

/// Expected rows per table and snapshot, parsed from EXPECTED.md.
pub(crate) type Expected = BTreeMap<String, BTreeMap<i64, Vec<Vec<Value>>>>;

pub(crate) fn expected() -> Expected {
    let text = std::fs::read_to_string(fixtures_dir().join("EXPECTED.md")).expect("EXPECTED.md");
    let mut out: Expected = BTreeMap::new();
    let mut table: Option<String> = None;
    let mut snapshot: Option<i64> = None;
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("## ") {
            table = Some(t.trim().to_string());
            snapshot = None;
        } else if let Some(rest) = line.strip_prefix("- snapshot ") {
            let id: i64 = rest.split_whitespace().next().unwrap().parse().unwrap();
            snapshot = Some(id);
            out.entry(table.clone().unwrap())
                .or_default()
                .entry(id)
                .or_default();
        } else if line.starts_with("- ") {
            snapshot = None;
        } else if let (Some(row), Some(t), Some(s)) =
            (line.trim_start().strip_prefix("- ("), &table, snapshot)
        {
            let row = parse_tuple(row.trim_end().strip_suffix(')').unwrap());
            out.get_mut(t).unwrap().get_mut(&s).unwrap().push(row);
        }
    }
    out
}

/// Parses the inside of a Python tuple repr: ints, floats, quoted strings, None, True/False.
fn parse_tuple(s: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            ' ' | ',' => i += 1,
            q @ ('\'' | '"') => {
                let mut j = i + 1;
                let mut v = String::new();
                while chars[j] != q {
                    if chars[j] == '\\' {
                        j += 1;
                    }
                    v.push(chars[j]);
                    j += 1;
                }
                out.push(Value::String(v));
                i = j + 1;
            }
            _ => {
                let mut j = i;
                while j < chars.len() && chars[j] != ',' {
                    j += 1;
                }
                let tok = chars[i..j].iter().collect::<String>();
                let tok = tok.trim();
                out.push(match tok {
                    "None" => Value::Null,
                    "True" => Value::Bool(true),
                    "False" => Value::Bool(false),
                    t if t.contains('.') => {
                        crate::common::normalize(Value::from(t.parse::<f64>().unwrap()))
                    }
                    t => Value::from(t.parse::<i64>().unwrap()),
                });
                i = j;
            }
        }
    }
    out
}

#[tokio::test]
async fn every_fixture_snapshot_reads_as_expected() {
    let expected = expected();
    assert_eq!(expected.len(), 8, "all eight fixture tables parsed");
    let catalog = Catalog::open(fixtures_dir().join("warehouse").to_str().unwrap()).unwrap();
    let mut tables = catalog.list_tables("fx").await.unwrap();
    tables.sort();
    assert_eq!(tables, expected.keys().cloned().collect::<Vec<_>>());
    let mut checked = 0;
    for (name, snapshots) in &expected {
        let table = catalog
            .load_table(&Identifier::new("fx", name))
            .await
            .unwrap();
        for (id, rows) in snapshots {
            match name.as_str() {
                // Batch reads of first-row tables skip level 0 (CoreOptions.batchScanSkipLevel0), and
                // pypaimon never compacts: Paimon returns no rows here (see EXPECTED.md's note).
                "pk_first" => {
                    assert_eq!(read_rows(&table, Some(*id)).await, Vec::<Vec<Value>>::new())
                }
                _ => assert_eq!(
                    read_rows(&table, Some(*id)).await,
                    sorted(rows.clone()),
                    "{name} snapshot {id}"
                ),
            }
            checked += 1;
        }
        // The latest snapshot is what a read without a snapshot id shows.
        let latest = *snapshots.keys().last().unwrap();
        assert_eq!(
            table.snapshot_manager().latest_id().await.unwrap(),
            Some(latest)
        );
    }
    assert_eq!(checked, 23);
}

#[tokio::test]
async fn time_travel_by_timestamp_picks_the_snapshot_of_that_time() {
    let catalog = Catalog::open(fixtures_dir().join("warehouse").to_str().unwrap()).unwrap();
    let table = catalog
        .load_table(&Identifier::new("fx", "pk_dedup"))
        .await
        .unwrap();
    let sm = table.snapshot_manager();
    let s2 = sm.snapshot(2).await.unwrap();
    let at = table
        .read_all(
            tidelake::table::SnapshotSelector::TimestampMillis(s2.time_millis),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        sorted(crate::common::rows(&at)),
        read_rows(&table, Some(2)).await
    );
    let before = table
        .read_all(tidelake::table::SnapshotSelector::TimestampMillis(0), None)
        .await
        .unwrap_err();
    assert_eq!(before.kind(), ErrorKind::NotFound);
}

#[test]
fn every_fixture_manifest_round_trips_through_our_codec() {
    let mut files = 0;
    for table in std::fs::read_dir(fixtures_dir().join("warehouse/fx.db")).unwrap() {
        let dir = table.unwrap().path().join("manifest");
        for f in std::fs::read_dir(dir).unwrap() {
            let path = f.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let bytes = std::fs::read(&path).unwrap();
            if name.starts_with("manifest-list-") {
                let metas = decode_manifest_list(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(
                    decode_manifest_list(&encode_manifest_list(&metas).unwrap()).unwrap(),
                    metas,
                    "{name}"
                );
            } else if name.starts_with("manifest-") {
                let entries = decode_manifest(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(!entries.is_empty(), "{name}");
                assert_eq!(
                    decode_manifest(&encode_manifest(&entries).unwrap()).unwrap(),
                    entries,
                    "{name}"
                );
            }
            files += 1;
        }
    }
    assert!(files >= 40, "found {files} manifest files");
}

/// The golden tables of issue 17's modes and types (`make_mode_fixtures.py`: nested types,
/// dynamic buckets, postpone buckets, row tracking), read at every snapshot by tidelake and by
/// pypaimon alike.
#[tokio::test]
async fn every_mode_fixture_snapshot_reads_as_pypaimon_reads_it() {
    let wh = fixtures_dir().join("modes");
    let catalog = Catalog::open(wh.to_str().unwrap()).unwrap();
    let mut tables = catalog.list_tables("mx").await.unwrap();
    tables.sort();
    assert_eq!(
        tables,
        [
            "dynamic",
            "nested",
            "nested_append",
            "postpone",
            "row_tracking"
        ]
    );
    let mut rows_seen = 0;
    for name in &tables {
        let table = catalog
            .load_table(&Identifier::new("mx", name))
            .await
            .unwrap();
        for id in table.snapshot_manager().list_ids().await.unwrap() {
            let ours = read_rows(&table, Some(id)).await;
            let full = format!("mx.{name}");
            assert_eq!(
                ours,
                crate::common::paimon_rows(wh.to_str().unwrap(), &full, Some(id)),
                "{full} snapshot {id}"
            );
            rows_seen += ours.len();
        }
    }
    // nested 4 + 5, nested_append 3, dynamic 6 + 8, postpone 0 (until compaction),
    // row_tracking 2 + 3.
    assert_eq!(rows_seen, 31);
}

/// A row-tracking table pypaimon wrote reads (above); tidelake's appends continue its row ids
/// (assigned at commit from the latest `nextRowId`, as Paimon's commit does) and pypaimon's next
/// write continues from tidelake's; compaction is refused (row ids would have to be stored) and
/// the refusal changes nothing.
#[tokio::test]
async fn row_tracking_tables_are_read_and_written_continuing_row_ids() {
    let dir = tempfile::tempdir().unwrap();
    crate::common::copy_dir(&fixtures_dir().join("modes"), dir.path());
    let catalog = Catalog::open(dir.path().to_str().unwrap()).unwrap();
    let id = Identifier::new("mx", "row_tracking");
    let table = catalog.load_table(&id).await.unwrap();
    let before = table.snapshot_manager().list_ids().await.unwrap();
    let rows = read_rows(&table, None).await;
    let e = table.compact(true, vec![]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("row tracking"), "{e}");
    assert_eq!(table.snapshot_manager().list_ids().await.unwrap(), before);
    assert_eq!(read_rows(&table, None).await, rows);

    // `$row_tracking`: the row ids pypaimon's commits assigned (0.. in commit order) and the
    // snapshot that wrote each row, at every snapshot; a table without row tracking has none.
    let engine = tidelake::sql::SqlEngine::new(catalog.clone(), Default::default()).unwrap();
    let session = tidelake::sql::SqlSession::default();
    let query = |sql: String| {
        let (engine, session) = (&engine, &session);
        async move {
            let out = engine.execute(session, &sql, &[]).await?;
            out.collect().await
        }
    };
    let got = crate::common::rows(
        &query(
            "SELECT id, \"_ROW_ID\", \"_SEQUENCE_NUMBER\", v FROM mx.row_tracking$row_tracking ORDER BY id"
                .into(),
        )
        .await
        .unwrap(),
    );
    let want: Vec<Vec<Value>> = [(1, 0, 1, "a"), (2, 1, 1, "b"), (3, 2, 2, "c")]
        .iter()
        .map(|(id, row, seq, v)| vec![(*id).into(), (*row).into(), (*seq).into(), (*v).into()])
        .collect();
    assert_eq!(got, want);
    let first = crate::common::rows(
        &query("SELECT \"_ROW_ID\" FROM mx.row_tracking$row_tracking VERSION AS OF 1".into())
            .await
            .unwrap(),
    );
    assert_eq!(
        sorted(first),
        vec![vec![Value::from(0)], vec![Value::from(1)]]
    );
    let e = query("SELECT * FROM mx.dynamic$row_tracking".into())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("does not track rows"), "{e}");

    // tidelake appends: the ids go on from pypaimon's nextRowId (3), the rows' sequence number is
    // the snapshot that committed them.
    let sid = table
        .write_batches(
            &[crate::common::batch(
                &table,
                &[
                    serde_json::json!({"id": 4, "v": "d"}),
                    serde_json::json!({"id": 5, "v": "e"}),
                ],
            )],
            tidelake::table::WriteOptions::default(),
            None,
        )
        .await
        .unwrap()
        .snapshot_id()
        .unwrap();
    let latest = table.snapshot_manager().snapshot(sid).await.unwrap();
    assert_eq!(latest.next_row_id, Some(5));
    let tracked = |q: &'static str| {
        let query = &query;
        async move { crate::common::rows(&query(q.into()).await.unwrap()) }
    };
    let q = "SELECT id, \"_ROW_ID\", \"_SEQUENCE_NUMBER\" FROM mx.row_tracking$row_tracking WHERE id >= 3 ORDER BY id";
    let ids = |rows: &[(i64, i64, i64)]| -> Vec<Vec<Value>> {
        rows.iter()
            .map(|(a, b, c)| vec![(*a).into(), (*b).into(), (*c).into()])
            .collect()
    };
    assert_eq!(
        tracked(q).await,
        ids(&[(3, 2, 2), (4, 3, sid), (5, 4, sid)])
    );
    let all = crate::common::paimon_rows(dir.path().to_str().unwrap(), "mx.row_tracking", None);
    assert_eq!(all.len(), 5, "{all:?}");
    // pypaimon's next write continues from tidelake's nextRowId.
    crate::common::paimon(&[
        "write",
        dir.path().to_str().unwrap(),
        "mx.row_tracking",
        r#"[{"id": 6, "v": "f"}]"#,
    ]);
    let got = tracked("SELECT \"_ROW_ID\" FROM mx.row_tracking$row_tracking WHERE id = 6").await;
    assert_eq!(got, [[Value::from(5)]]);

    let def = |pk: &[&str]| {
        crate::common::definition(
            "id BIGINT NOT NULL, v STRING",
            pk,
            &[],
            &[("row-tracking.enabled", "true")],
        )
    };
    let e = catalog
        .create_table(&Identifier::new("mx", "rt_pk"), &def(&["id"]), false)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Cannot define primary-key for row tracking table"),
        "{e}"
    );
    // A row-tracking table tidelake creates numbers its rows from 0, commit after commit.
    let t = catalog
        .create_table(&Identifier::new("mx", "rt_new"), &def(&[]), false)
        .await
        .unwrap();
    for batch in [[1, 2], [3, 4]] {
        let rows: Vec<Value> = batch
            .iter()
            .map(|i| serde_json::json!({"id": i, "v": "x"}))
            .collect();
        crate::common::write_rows(&t, &rows).await;
    }
    let got = tracked(
        "SELECT id, \"_ROW_ID\", \"_SEQUENCE_NUMBER\" FROM mx.rt_new$row_tracking ORDER BY id",
    )
    .await;
    assert_eq!(got, ids(&[(1, 0, 1), (2, 1, 1), (3, 2, 2), (4, 3, 2)]));
    assert_eq!(
        crate::common::paimon_rows(dir.path().to_str().unwrap(), "mx.rt_new", None).len(),
        4
    );
}
