//! Filters the table scan decides itself (`sql::scan_filter`), against DataFusion's answers.

use datafusion::prelude::SessionContext;

use crate::sql::{answers_as_datafusion, engine_with_default_db, explain, mirror, render, run};

/// Comparisons of a column with a literal are decided by the scan (the filter above goes), with
/// DataFusion's answers: odd floats (both zeros, NaNs, infinities, nulls), integers, a value
/// column of a key table tested on the merged row (an older version that passed does not come
/// back), several tests at once, and a top-N over a filtered scan, which must not read late by
/// the sort keys alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_decided_by_the_scan_answer_as_datafusion_does() {
    let (_s, engine) = engine_with_default_db().await;
    run(
        &engine,
        "CREATE TABLE f (id BIGINT NOT NULL, v DOUBLE, k INT, PRIMARY KEY (id)) \
         WITH ('bucket' = '1', 'write-only' = 'true')",
    )
    .await;
    let odd = [
        "0.0",
        "-0.0",
        "CAST('NaN' AS DOUBLE)",
        "-CAST('NaN' AS DOUBLE)",
        "CAST('inf' AS DOUBLE)",
        "CAST('-inf' AS DOUBLE)",
        "NULL",
        "0.01",
        "0.5",
        "-2.5",
    ];
    let values: Vec<String> = (0..200i64)
        .map(|id| {
            let k = if id % 11 == 0 {
                "NULL".to_string()
            } else {
                (id % 37).to_string()
            };
            format!("({id}, {}, {k})", odd[id as usize % odd.len()])
        })
        .collect();
    run(
        &engine,
        &format!("INSERT INTO f VALUES {}", values.join(", ")),
    )
    .await;
    // Updated rows: their older versions (v = 0.5) would pass `v < 1.0`; the newest do not.
    run(&engine, "UPDATE f SET v = 7.0 WHERE id % 10 = 8").await;
    let ctx = SessionContext::new();
    mirror(&engine, &ctx, "f").await;
    let queries = [
        "SELECT id FROM f WHERE v < 1.0 ORDER BY id",
        "SELECT id FROM f WHERE v >= 0.0 ORDER BY id",
        "SELECT id FROM f WHERE v = -0.0 ORDER BY id",
        "SELECT id FROM f WHERE 0.0 <> v ORDER BY id",
        "SELECT id FROM f WHERE v > CAST('inf' AS DOUBLE) ORDER BY id",
        "SELECT id FROM f WHERE v <= CAST('-inf' AS DOUBLE) ORDER BY id",
        "SELECT id FROM f WHERE v = CAST('NaN' AS DOUBLE) ORDER BY id",
        "SELECT count(*), sum(k) FROM f WHERE v < 0.01 AND k > 5",
        "SELECT id, k FROM f WHERE k <= 3 AND id > 100 AND v <> 0.5 ORDER BY id",
        "SELECT id FROM f WHERE v < 1.0 AND id % 3 = 0 ORDER BY id",
        "SELECT id FROM f WHERE k = NULL",
    ];
    for sql in queries {
        answers_as_datafusion(&engine, &ctx, sql).await;
    }
    let plan = explain(&engine, "SELECT id FROM f WHERE v < 1.0 AND k > 5").await;
    assert!(plan.contains("filters=[v < 1, k > 5]"), "{plan}");
    assert!(!plan.contains("FilterExec"), "{plan}");
    // What the scan does not decide stays in a filter above it.
    let plan = explain(&engine, "SELECT id FROM f WHERE v < 1.0 AND id % 3 = 0").await;
    assert!(
        plan.contains("filters=[v < 1]") && plan.contains("FilterExec"),
        "{plan}"
    );
    // Strings: arrow's kernels, as DataFusion applies them.
    run(&engine, "CREATE TABLE t (id BIGINT NOT NULL, s STRING)").await;
    run(
        &engine,
        "INSERT INTO t VALUES (1, 'b'), (2, NULL), (3, ''), (4, 'ab'), (5, 'B'), (6, 'é'), (7, 'b ')",
    )
    .await;
    mirror(&engine, &ctx, "t").await;
    for sql in [
        "SELECT id FROM t WHERE s = 'b' ORDER BY id",
        "SELECT id FROM t WHERE s > 'a' ORDER BY id",
        "SELECT id FROM t WHERE '' <> s ORDER BY id",
        "SELECT id FROM t WHERE s <= 'b' AND s LIKE '%b%' ORDER BY id",
    ] {
        answers_as_datafusion(&engine, &ctx, sql).await;
    }
    let plan = explain(&engine, "SELECT id FROM t WHERE s > 'a'").await;
    assert!(
        plan.contains("filters=[s > a]") && !plan.contains("FilterExec"),
        "{plan}"
    );
    // One partition: the sort sits right on the scan. Read late by `v` alone, the two largest
    // would be rows the filter drops.
    run(&engine, "CREATE TABLE one (id BIGINT NOT NULL, v DOUBLE)").await;
    run(
        &engine,
        "INSERT INTO one VALUES (1, 0.5), (2, 2.5), (3, 1.5), (4, 3.5)",
    )
    .await;
    let sql = "SELECT id FROM one WHERE v < 2.0 ORDER BY v DESC LIMIT 2";
    let rows = render(&run(&engine, sql).await);
    assert_eq!(rows, vec![vec!["3".to_string()], vec!["1".to_string()]]);
}
