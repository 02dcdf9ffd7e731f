//! Branches (`<table>$branch_<name>`) as Paimon's branch manager lays them out: created empty or
//! from a tag, read and written through SQL while main goes its own way, listed in `$branches`,
//! fast-forwarded into main and deleted; pypaimon reads every branch and main after the
//! fast-forward; orphan removal keeps what any branch uses; bad requests change nothing.

use serde_json::{json, Value};
use tidelake::sql::SqlEngine;
use tidelake::Identifier;

use crate::common::{files_under, paimon_rows, sql, Scratch};

fn pairs(p: &[(i64, &str)]) -> Vec<Vec<Value>> {
    p.iter().map(|(i, v)| vec![json!(i), json!(v)]).collect()
}

#[tokio::test]
async fn branches_are_created_written_fast_forwarded_and_deleted() {
    let s = Scratch::new();
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let run = |q: &'static str| {
        let engine = engine.clone();
        async move { sql(&engine, q).await.unwrap_or_else(|e| panic!("{q}: {e}")) }
    };
    run("CREATE DATABASE db").await;
    run("CREATE TABLE db.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
        .await;
    run("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')").await;
    run("CALL sys.create_tag('db.t', 'v1')").await;
    run("INSERT INTO db.t VALUES (3, 'c')").await;
    run("CALL sys.create_branch('db.t', 'empty')").await;
    run("CALL sys.create_branch('db.t', 'dev', 'v1')").await;

    // Paimon's layout: the branch has the tag, its snapshot and the schemas up to it.
    let t = s
        .catalog
        .load_table(&Identifier::new("db", "t"))
        .await
        .unwrap();
    let tagged = t.list_tags().await.unwrap()[0].1.id;
    let root = std::path::Path::new(s.path()).join("db.db/t");
    let dev = files_under(&root.join("branch/branch-dev"));
    for f in [
        format!("snapshot/snapshot-{tagged}"),
        "tag/tag-v1".to_string(),
        "schema/schema-0".to_string(),
    ] {
        assert!(dev.contains(&f), "{f} not in {dev:?}");
    }
    assert_eq!(
        files_under(&root.join("branch/branch-empty")),
        ["schema/schema-0".to_string()].into()
    );

    // Reads: the tag's rows on dev, nothing on the empty branch, main unchanged.
    assert_eq!(
        run("SELECT id, v FROM db.t$branch_dev ORDER BY id").await,
        pairs(&[(1, "a"), (2, "b")])
    );
    assert_eq!(
        run("SELECT count(*) FROM db.t$branch_empty").await,
        [[json!(0)]]
    );
    // Writes to a branch leave main alone, and main's writes leave the branch alone.
    run("INSERT INTO db.t$branch_dev VALUES (2, 'bb'), (4, 'd')").await;
    run("DELETE FROM db.t$branch_dev WHERE id = 1").await;
    run("INSERT INTO db.t$branch_empty VALUES (9, 'z')").await;
    run("INSERT INTO db.t VALUES (5, 'e')").await;
    let dev_rows = pairs(&[(2, "bb"), (4, "d")]);
    let main_rows = pairs(&[(1, "a"), (2, "b"), (3, "c"), (5, "e")]);
    assert_eq!(
        run("SELECT id, v FROM db.t$branch_dev ORDER BY id").await,
        dev_rows
    );
    assert_eq!(run("SELECT id, v FROM db.t ORDER BY id").await, main_rows);
    assert_eq!(
        run("SELECT id, v FROM db.t$branch_empty").await,
        pairs(&[(9, "z")])
    );
    // A branch's schema is its own: altering it leaves main's alone.
    run("ALTER TABLE db.t$branch_empty ADD COLUMN note STRING").await;
    assert_eq!(
        run("SELECT * FROM db.t$branch_empty").await,
        [[json!(9), json!("z"), Value::Null]]
    );
    assert_eq!(
        run("SELECT * FROM db.t WHERE id = 1").await,
        pairs(&[(1, "a")])
    );
    // pypaimon reads each branch as tidelake wrote it.
    assert_eq!(paimon_rows(s.path(), "db.t$branch_dev", None), dev_rows);
    assert_eq!(paimon_rows(s.path(), "db.t", None), main_rows);
    // System tables of a branch, and the table's branches.
    let snaps = run("SELECT count(*) FROM db.t$branch_dev$snapshots").await;
    assert!(snaps[0][0].as_i64().unwrap() >= 2, "{snaps:?}");
    assert_eq!(
        run("SELECT branch_name FROM db.t$branches ORDER BY branch_name").await,
        [[json!("dev")], [json!("empty")]]
    );

    // Orphan removal keeps every file a branch uses (the branches' commits share the table's
    // manifest and bucket directories).
    let before = files_under(&root);
    let report = t.remove_orphan_files(i64::MAX, false).await.unwrap();
    assert!(report.files.is_empty(), "{:?}", report.files);
    assert_eq!(files_under(&root), before);

    // The tag dev was made from keeps dev's files from expiry: it cannot go while dev is there.
    let e = sql(&engine, "CALL sys.delete_tag('db.t', 'v1')")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("base of branch dev"), "{e}");

    // A second branch, from a later tag: main cannot roll back past that tag, nor fast-forward
    // over it, and the branch cannot drop its copy of the tag (all would free files it reads).
    run("CALL sys.create_tag('db.t', 'v2')").await;
    run("CALL sys.create_branch('db.t', 'late', 'v2')").await;
    let snapshot_files = files_under(&root);
    for q in [
        format!("CALL sys.rollback_to('db.t', {tagged})"),
        "CALL sys.fast_forward('db.t', 'dev')".to_string(),
        "CALL sys.delete_tag('db.t$branch_late', 'v2')".to_string(),
        "CALL sys.delete_tag('db.t', 'v2')".to_string(),
    ] {
        let e = sql(&engine, &q).await.unwrap_err();
        assert!(e.to_string().contains("base of branch late"), "{q}: {e}");
    }
    assert_eq!(files_under(&root), snapshot_files);
    assert_eq!(run("SELECT id, v FROM db.t ORDER BY id").await, main_rows);
    run("CALL sys.delete_branch('db.t', 'late')").await;
    run("CALL sys.delete_tag('db.t', 'v2')").await;

    // Bad requests are refused and change nothing.
    let snapshot_files = files_under(&root);
    for (q, needle) in [
        ("CALL sys.create_branch('db.t', 'main')", "default branch"),
        ("CALL sys.create_branch('db.t', '123')", "pure numeric"),
        ("CALL sys.create_branch('db.t', 'dev')", "already exists"),
        (
            "CALL sys.create_branch('db.t', 'x/y')",
            "invalid branch name",
        ),
        (
            "CALL sys.create_branch('db.t', 'new', 'nope')",
            "doesn't exist",
        ),
        ("CALL sys.delete_branch('db.t', 'nope')", "doesn't exist"),
        (
            "CALL sys.delete_branch('db.t', 'main')",
            "cannot be deleted",
        ),
        ("CALL sys.fast_forward('db.t', 'nope')", "doesn't exist"),
        (
            "CALL sys.fast_forward('db.t', 'main')",
            "do not use in fast-forward",
        ),
        ("SELECT * FROM db.t$branch_nope", "does not exist"),
        ("DROP TABLE db.t$branch_dev", "branch table"),
    ] {
        let e = sql(&engine, q).await.unwrap_err();
        assert!(e.to_string().contains(needle), "{q}: {e}");
    }
    assert_eq!(files_under(&root), snapshot_files);

    // Fast-forward: main becomes dev (its snapshots from the tag's on replaced by dev's).
    run("CALL sys.fast_forward('db.t', 'dev')").await;
    assert_eq!(run("SELECT id, v FROM db.t ORDER BY id").await, dev_rows);
    assert_eq!(paimon_rows(s.path(), "db.t", None), dev_rows);
    // Main goes on from there; snapshot ids stay contiguous.
    run("INSERT INTO db.t VALUES (6, 'f')").await;
    let t = s
        .catalog
        .load_table(&Identifier::new("db", "t"))
        .await
        .unwrap();
    let ids = t.snapshot_manager().list_ids().await.unwrap();
    assert_eq!(
        ids,
        (ids[0]..=*ids.last().unwrap()).collect::<Vec<_>>(),
        "{ids:?}"
    );
    assert_eq!(
        run("SELECT id, v FROM db.t ORDER BY id").await,
        pairs(&[(2, "bb"), (4, "d"), (6, "f")])
    );

    // Deleting branches (a comma-separated list) leaves main as it is.
    run("CALL sys.delete_branch('db.t', 'dev,empty')").await;
    assert!(run("SELECT branch_name FROM db.t$branches")
        .await
        .is_empty());
    assert!(!root.join("branch/branch-dev").exists());
    assert_eq!(
        run("SELECT id, v FROM db.t ORDER BY id").await,
        pairs(&[(2, "bb"), (4, "d"), (6, "f")])
    );
    run("CALL sys.delete_tag('db.t', 'v1')").await;
}
