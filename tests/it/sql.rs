//! SQL behaviour as data: every `tests/slt/*.slt` file runs against a fresh warehouse through
//! [`SqlEngine`] (the engine `tidelake serve` and `tidelake sql` use), plus checks the files cannot
//! express: point queries read only the files whose key range holds the key, and pypaimon reads
//! what SQL wrote.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use sqllogictest::{DBOutput, DefaultColumnType};
use tidelake::sql::{SqlEngine, SqlSession, StatementKind};
use tidelake::Catalog;

use crate::common::Scratch;

struct Db {
    engine: SqlEngine,
    session: SqlSession,
    _scratch: Arc<Scratch>,
}

#[derive(Debug)]
struct DbError(String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

fn column_type(t: &DataType) -> DefaultColumnType {
    match t {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => DefaultColumnType::Integer,
        DataType::Float32 | DataType::Float64 | DataType::Decimal128(_, _) => {
            DefaultColumnType::FloatingPoint
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DefaultColumnType::Text,
        _ => DefaultColumnType::Any,
    }
}

pub(crate) fn render(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let fmts: Vec<ArrayFormatter<'_>> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).expect("formattable"))
            .collect();
        for r in 0..b.num_rows() {
            rows.push(
                fmts.iter()
                    .map(|f| {
                        let s = f.value(r).to_string();
                        if s.is_empty() {
                            "(empty)".to_string()
                        } else {
                            s
                        }
                    })
                    .collect(),
            );
        }
    }
    rows
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for Db {
    type Error = DbError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, DbError> {
        // `USE db` switches the session's database (as Flight's SetSessionOptions does).
        if let Some(db) = sql.trim().strip_prefix("USE ") {
            self.session.database = db.trim().trim_end_matches(';').to_string();
            return Ok(DBOutput::StatementComplete(0));
        }
        let out = self
            .engine
            .execute(&self.session, sql, &[])
            .await
            .map_err(|e| DbError(e.to_string()))?;
        let kind = out.kind;
        let schema = Arc::clone(&out.schema);
        let batches = out.collect().await.map_err(|e| DbError(e.to_string()))?;
        match kind {
            StatementKind::Update => {
                let rows = render(&batches);
                let n = rows
                    .first()
                    .and_then(|r| r.first())
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                Ok(DBOutput::StatementComplete(n))
            }
            StatementKind::Query => Ok(DBOutput::Rows {
                types: schema
                    .fields()
                    .iter()
                    .map(|f| column_type(f.data_type()))
                    .collect(),
                rows: render(&batches),
            }),
        }
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "tidelake"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

fn slt_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slt_files() {
    let mut files: Vec<_> = std::fs::read_dir(slt_dir())
        .expect("tests/slt")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "expected the .slt files, found {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let scratch = Arc::new(Scratch::new());
        let catalog = Catalog::open(scratch.path()).unwrap();
        catalog.create_database("default", true).await.unwrap();
        let engine = SqlEngine::new(catalog, Default::default()).unwrap();
        let mut runner = sqllogictest::Runner::new(move || {
            let engine = engine.clone();
            let scratch = Arc::clone(&scratch);
            async move {
                Ok(Db {
                    engine,
                    session: SqlSession::default(),
                    _scratch: scratch,
                })
            }
        });
        if let Err(e) = runner.run_file_async(file).await {
            failures.push(format!("{}: {e}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

pub(crate) async fn run(engine: &SqlEngine, sql: &str) -> Vec<RecordBatch> {
    let out = engine
        .execute(&SqlSession::default(), sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    out.collect().await.unwrap()
}

/// A fresh warehouse with database `default`, and an engine over it.
pub(crate) async fn engine_with_default_db() -> (Scratch, SqlEngine) {
    let s = Scratch::new();
    s.catalog.create_database("default", true).await.unwrap();
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    (s, engine)
}

/// `table`'s rows as they read now, registered under its name in `ctx` (a DataFusion session
/// over memory), so queries can be checked against DataFusion's own answers; how many rows.
pub(crate) async fn mirror(engine: &SqlEngine, ctx: &SessionContext, table: &str) -> usize {
    let all = run(engine, &format!("SELECT * FROM {table}")).await;
    let rows = all.iter().map(RecordBatch::num_rows).sum();
    let copy = MemTable::try_new(all[0].schema(), vec![all]).unwrap();
    ctx.register_table(table, Arc::new(copy)).unwrap();
    rows
}

/// Asserts that `sql` answers as DataFusion does over the tables mirrored in `ctx`.
pub(crate) async fn answers_as_datafusion(engine: &SqlEngine, ctx: &SessionContext, sql: &str) {
    let want = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    assert_eq!(render(&run(engine, sql).await), render(&want), "{sql}");
}

/// The plan DataFusion runs for `sql`, as EXPLAIN prints it.
pub(crate) async fn explain(engine: &SqlEngine, sql: &str) -> String {
    render(&run(engine, &format!("EXPLAIN ANALYZE {sql}")).await)
        .into_iter()
        .map(|r| r.join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A large file of an append table is read in parts (whole row groups each) spread over the
/// partitions, and every query answers as DataFusion does over all the rows: no row is read twice
/// or left out, and a top-N reads its winners back by their position in the part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_are_read_in_parts_and_answer_as_datafusion_does() {
    use arrow::array::{Float64Array, Int64Array, StringArray};
    let (s, engine) = engine_with_default_db().await;
    run(
        &engine,
        "CREATE TABLE big (id BIGINT NOT NULL, v DOUBLE, s STRING)",
    )
    .await;
    let table = s
        .catalog
        .load_table(&tidelake::Identifier::new("default", "big"))
        .await
        .unwrap();
    // One file of 700k rows (three row groups), then a small one; `v` in quarters, so sums are
    // exact in any order.
    for (start, n) in [(0i64, 700_000i64), (700_000, 1_000)] {
        let ids: Vec<i64> = (start..start + n).collect();
        let batch = RecordBatch::try_new(
            table.arrow_schema().unwrap(),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(Float64Array::from_iter(ids.iter().map(|i| {
                    (i % 13 != 0).then(|| ((i * 7919) % 1_000_003) as f64 / 4.0)
                }))),
                Arc::new(StringArray::from_iter_values(
                    ids.iter().map(|i| format!("s{}", i % 101)),
                )),
            ],
        )
        .unwrap();
        table
            .write_batches(&[batch], tidelake::table::WriteOptions::default(), None)
            .await
            .unwrap();
    }
    let ctx = SessionContext::new();
    assert_eq!(mirror(&engine, &ctx, "big").await, 701_000);
    let queries = [
        "SELECT count(*), sum(id), count(v), sum(v), count(DISTINCT s) FROM big",
        "SELECT s, count(*), min(id), max(v) FROM big GROUP BY s ORDER BY s",
        "SELECT id, v, s FROM big ORDER BY v DESC, id LIMIT 9",
        "SELECT id, v, s FROM big ORDER BY v DESC NULLS LAST, id LIMIT 9",
        "SELECT id, s FROM big ORDER BY v, id LIMIT 5",
        "SELECT id, s FROM big ORDER BY id DESC LIMIT 4",
        "SELECT id, v FROM big ORDER BY v DESC NULLS LAST, id LIMIT 40",
        "SELECT count(*), sum(v) FROM big WHERE v < 1000.0 AND id > 1000",
    ];
    for sql in queries {
        answers_as_datafusion(&engine, &ctx, sql).await;
    }
    // With two cores or more the big file is cut into its three row groups; the small one stays
    // whole. With one, nothing is cut.
    let plan = explain(&engine, "SELECT id FROM big ORDER BY v DESC LIMIT 3").await;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    assert_eq!(cores > 1, plan.contains("file_parts=3,"), "{plan}");
    assert!(plan.contains("top_n_rows="), "{plan}");
    // Only the pages whose bounds can hold a winner are decoded: not so with nulls first, as
    // every page of `v` may hold nulls.
    let skipped = |plan: &str| -> usize {
        let at = plan.find("top_n_pages_skipped=").expect(plan) + "top_n_pages_skipped=".len();
        plan[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .expect(plan)
    };
    let plan = explain(
        &engine,
        "SELECT id FROM big ORDER BY v DESC NULLS LAST LIMIT 3",
    )
    .await;
    assert!(skipped(&plan) > 30, "{plan}");
    let plan = explain(&engine, "SELECT id FROM big ORDER BY v DESC LIMIT 3").await;
    assert_eq!(skipped(&plan), 0, "{plan}");
    // A scan of one partition reads late too (DataFusion puts nothing between it and the sort).
    run(&engine, "CREATE TABLE one (id BIGINT NOT NULL, v DOUBLE)").await;
    run(
        &engine,
        "INSERT INTO one VALUES (1, 0.5), (2, 2.5), (3, 1.5)",
    )
    .await;
    let sql = "SELECT id FROM one ORDER BY v DESC LIMIT 2";
    let plan = explain(&engine, sql).await;
    assert!(plan.contains("partitions=1"), "{plan}");
    assert!(plan.contains("top_n_rows="), "{plan}");
    let rows = render(&run(&engine, sql).await);
    assert_eq!(rows, vec![vec!["2".to_string()], vec!["3".to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_query_reads_only_files_holding_the_key() {
    let (s, engine) = engine_with_default_db().await;
    run(
        &engine,
        "CREATE TABLE p (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1', 'write-only' = 'true')",
    )
    .await;
    // Four commits with disjoint key ranges: four level-0 files in one bucket.
    for k in 0..4 {
        let values: Vec<String> = (0..100)
            .map(|i| format!("({}, 'v{}')", k * 1000 + i, k * 1000 + i))
            .collect();
        run(
            &engine,
            &format!("INSERT INTO p VALUES {}", values.join(", ")),
        )
        .await;
    }
    let table = s
        .catalog
        .load_table(&tidelake::Identifier::new("default", "p"))
        .await
        .unwrap();
    let all = table.new_scan().plan().await.unwrap();
    assert_eq!(all.file_count(), 4);
    let lower = Some((tidelake::spec::binary_row::Datum::BigInt(2050), true));
    let upper = Some((tidelake::spec::binary_row::Datum::BigInt(2050), true));
    let pruned = table
        .new_scan()
        .key_range(lower, upper)
        .plan()
        .await
        .unwrap();
    assert_eq!(
        pruned.file_count(),
        1,
        "only the file whose key range holds 2050"
    );
    // Through SQL: the answer is right, and the scan produced only the key's row (of the one
    // file read, the rows of other keys are dropped before merging).
    let rows = render(&run(&engine, "SELECT v FROM p WHERE id = 2050").await);
    assert_eq!(rows, vec![vec!["v2050".to_string()]]);
    let plan = explain(&engine, "SELECT v FROM p WHERE id = 2050").await;
    // The scan counts only rows it reads late; the operator right above it counts what it produced.
    let lines: Vec<&str> = plan.lines().collect();
    let scan = lines
        .iter()
        .position(|l| l.contains("TableScanExec"))
        .unwrap_or_else(|| panic!("no scan in plan:\n{plan}"));
    assert!(
        scan > 0 && lines[scan - 1].contains("output_rows=1,"),
        "{plan}"
    );
    // A range over two files.
    let rows = run(
        &engine,
        "SELECT count(*) FROM p WHERE id >= 1050 AND id < 2010",
    )
    .await;
    assert_eq!(render(&rows), vec![vec!["60".to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pypaimon_reads_what_sql_writes() {
    let s = Scratch::new();
    let engine = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    for sql in [
        "CREATE DATABASE shop",
        "CREATE TABLE shop.orders (id BIGINT NOT NULL, item STRING, qty INT, dt STRING, PRIMARY KEY (id, dt)) PARTITIONED BY (dt) WITH ('bucket' = '2')",
        "INSERT INTO shop.orders VALUES (1, 'apple', 3, '2024-01-01'), (2, 'pear', 5, '2024-01-01'), (3, 'fig', 1, '2024-01-02')",
        "UPDATE shop.orders SET qty = qty + 10 WHERE item = 'pear'",
        "DELETE FROM shop.orders WHERE id = 3",
        "INSERT INTO shop.orders (id, item, dt) VALUES (4, 'kiwi', '2024-01-02')",
    ] {
        run(&engine, sql).await;
    }
    let ours = render(
        &run(
            &engine,
            "SELECT id, item, qty, dt FROM shop.orders ORDER BY id",
        )
        .await,
    );
    assert_eq!(
        ours,
        vec![
            vec!["1", "apple", "3", "2024-01-01"],
            vec!["2", "pear", "15", "2024-01-01"],
            vec!["4", "kiwi", "NULL", "2024-01-02"],
        ]
        .into_iter()
        .map(|r| r.into_iter().map(String::from).collect::<Vec<_>>())
        .collect::<Vec<_>>()
    );
    let theirs = crate::common::paimon_rows(s.path(), "shop.orders", None);
    let table = s
        .catalog
        .load_table(&tidelake::Identifier::new("shop", "orders"))
        .await
        .unwrap();
    assert_eq!(theirs, crate::common::read_rows(&table, None).await);
    assert_eq!(theirs.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_and_timeout_stop_statements() {
    let s = Scratch::new();
    s.catalog.create_database("default", true).await.unwrap();
    let session = SqlSession::default();
    // A sort of 2M rows needs far more than 1 MiB.
    let small = SqlEngine::new(
        s.catalog.clone(),
        tidelake::sql::SqlLimits {
            memory_limit_bytes: Some(1024 * 1024),
            query_timeout: None,
        },
    )
    .unwrap();
    let sort = "SELECT value FROM generate_series(1, 2000000) ORDER BY value DESC";
    let err = match small.execute(&session, sort, &[]).await {
        Ok(out) => out.collect().await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(
        err.kind(),
        tidelake::error::ErrorKind::ResourceExhausted,
        "{err}"
    );
    // The same statement fits without the limit.
    let roomy = SqlEngine::new(s.catalog.clone(), Default::default()).unwrap();
    let out = roomy.execute(&session, sort, &[]).await.unwrap();
    let n: usize = out
        .collect()
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(n, 2_000_000);
    // A statement that outlives the timeout fails with ResourceExhausted and says why.
    let hasty = SqlEngine::new(
        s.catalog.clone(),
        tidelake::sql::SqlLimits {
            memory_limit_bytes: None,
            query_timeout: Some(std::time::Duration::from_millis(1)),
        },
    )
    .unwrap();
    // (A count(*) would be answered from statistics; the sum has to visit all 9M pairs.)
    let slow = "SELECT sum(a.value * b.value) FROM generate_series(1, 3000) a \
                CROSS JOIN generate_series(1, 3000) b";
    let err = match hasty.execute(&session, slow, &[]).await {
        Ok(out) => out.collect().await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(err.kind(), tidelake::error::ErrorKind::ResourceExhausted);
    assert!(err.to_string().contains("timeout"), "{err}");
}

/// Functions whose output size comes from an argument's value are stopped before they allocate
/// it (`sql::output_caps`): under a 256 MiB memory limit and a 3 s timeout, each statement fails
/// at once with one line naming the function and the limit, instead of growing the process by
/// gigabytes past both. Within the cap the same functions answer as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_sized_by_an_argument_are_refused_before_they_allocate() {
    let s = Scratch::new();
    s.catalog.create_database("default", true).await.unwrap();
    let session = SqlSession::default();
    let limit = std::time::Duration::from_secs(3);
    let engine = SqlEngine::new(
        s.catalog.clone(),
        tidelake::sql::SqlLimits {
            memory_limit_bytes: Some(256 * 1024 * 1024),
            query_timeout: Some(limit),
        },
    )
    .unwrap();
    for (sql, function) in [
        ("SELECT array_repeat(1, 1000000000)", "array_repeat"),
        (
            "SELECT cardinality(array_repeat('x', 400000000))",
            "array_repeat",
        ),
        (
            "SELECT array_repeat(1, v) FROM (VALUES (3), (1000000000)) AS t(v)",
            "array_repeat",
        ),
        ("SELECT array_resize([1, 2], 1000000000, 7)", "array_resize"),
        ("SELECT range(0, 1000000000000)", "range"),
        (
            "SELECT generate_series(1, 1000000000000, 1)",
            "generate_series",
        ),
        (
            "SELECT array_to_string(range(0, 100000), repeat('-', 10000))",
            "array_to_string",
        ),
        (
            "SELECT arrow_cast(NULL, 'FixedSizeBinary(2000000000)')",
            "arrow_cast",
        ),
    ] {
        let started = std::time::Instant::now();
        let err = match engine.execute(&session, sql, &[]).await {
            Ok(out) => out.collect().await.unwrap_err(),
            Err(e) => e,
        };
        let message = err.to_string();
        assert_eq!(
            err.kind(),
            tidelake::error::ErrorKind::ResourceExhausted,
            "{sql}: {message}"
        );
        assert!(
            message.contains(function) && message.contains("limit of"),
            "{sql}: {message}"
        );
        assert!(!message.contains('\n'), "{sql}: one line, got {message}");
        assert!(
            started.elapsed() < limit,
            "{sql}: took {:?}",
            started.elapsed()
        );
    }
    let out = engine
        .execute(
            &session,
            "SELECT array_repeat(1, 3) AS a, range(0, 3) AS r, array_resize([1], 2, 9) AS z",
            &[],
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let formatted = arrow::util::pretty::pretty_format_batches(&out)
        .unwrap()
        .to_string();
    assert!(formatted.contains("[1, 1, 1]"), "{formatted}");
    assert!(formatted.contains("[0, 1, 2]"), "{formatted}");
    assert!(formatted.contains("[1, 9]"), "{formatted}");
}

/// `string_agg` joins a delimiter per row, outside the memory pool's sight until a batch is done:
/// a result past the cap is refused as the rows arrive, grouped or not, ordered or not; within
/// it, answers are DataFusion's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_agg_is_refused_before_its_delimiters_outgrow_the_cap() {
    let (_s, engine) = engine_with_default_db().await;
    let session = SqlSession::default();
    let delimiter = "-".repeat(1000);
    for shape in [
        format!("SELECT string_agg(CAST(value AS VARCHAR), '{delimiter}') FROM generate_series(1, 100000)"),
        format!(
            "SELECT value % 2, string_agg(CAST(value AS VARCHAR), '{delimiter}') \
             FROM generate_series(1, 200000) GROUP BY value % 2"
        ),
        format!(
            "SELECT string_agg(CAST(value AS VARCHAR), '{delimiter}' ORDER BY value DESC) \
             FROM generate_series(1, 100000)"
        ),
    ] {
        let err = match engine.execute(&session, &shape, &[]).await {
            Ok(out) => out.collect().await.unwrap_err(),
            Err(e) => e,
        };
        let message = err.to_string();
        assert_eq!(
            err.kind(),
            tidelake::error::ErrorKind::ResourceExhausted,
            "{message}"
        );
        assert!(
            message.contains("string_agg") && message.contains("limit of"),
            "{message}"
        );
    }
    let out = engine
        .execute(
            &session,
            "SELECT string_agg(CAST(value AS VARCHAR), ',') AS a, \
             string_agg(CAST(value AS VARCHAR), ';' ORDER BY value DESC) AS d \
             FROM generate_series(1, 3)",
            &[],
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let formatted = arrow::util::pretty::pretty_format_batches(&out)
        .unwrap()
        .to_string();
    assert!(formatted.contains("1,2,3"), "{formatted}");
    assert!(formatted.contains("3;2;1"), "{formatted}");
}

/// Point queries by primary key are read directly (`sql::point`), without DataFusion, from pages
/// the process keeps decoded (`table::page_cache`); their answers, schemas and parameter types
/// must be DataFusion's for the same query. The reference is the query with `id + 0` and a
/// `LIMIT`: not a point query, and no key range to push down, so DataFusion filters a full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_queries_answer_as_datafusion_does() {
    use datafusion::common::ScalarValue;
    let (_s, engine) = engine_with_default_db().await;
    let session = SqlSession::default();
    run(
        &engine,
        "CREATE TABLE pq (region STRING NOT NULL, id BIGINT NOT NULL, k INT NOT NULL, v STRING, n INT, \
         PRIMARY KEY (region, id, k)) PARTITIONED BY (region) WITH ('bucket' = '2', 'write-only' = 'true')",
    )
    .await;
    // Overlapping commits left uncompacted (several files per bucket), updates and deletes.
    for round in 0..4 {
        let values: Vec<String> = (0..60)
            .map(|i| {
                let region = if i % 3 == 0 { "eu" } else { "us" };
                format!(
                    "('{region}', {}, {}, 'r{round}', {})",
                    i * 7 % 40,
                    i % 2,
                    round * 100 + i
                )
            })
            .collect();
        run(
            &engine,
            &format!("INSERT INTO pq VALUES {}", values.join(", ")),
        )
        .await;
    }
    run(&engine, "DELETE FROM pq WHERE id = 14 AND k = 0").await;
    run(&engine, "UPDATE pq SET v = 'updated' WHERE id = 21").await;

    let before = tidelake::metrics::metrics().point_queries.get();
    let mut direct = 0;
    let full_scan = |sql: &str| format!("{} LIMIT 100", sql.replace("id = ", "id + 0 = "));
    for round in 0..2 {
        if round == 1 {
            // The pages kept so far were decoded under the old schema; the next reads are not.
            run(&engine, "ALTER TABLE pq RENAME COLUMN v TO v2").await;
            run(&engine, "ALTER TABLE pq ADD COLUMN z INT").await;
            run(&engine, "UPDATE pq SET z = 5 WHERE id = 7").await;
        }
        let v = if round == 0 { "v" } else { "v2" };
        for region in ["eu", "us", "none"] {
            for id in [0i64, 7, 14, 21, 35, 39, 99] {
                for k in [0, 1] {
                    let key = format!("region = '{region}' AND id = {id} AND k = {k}");
                    for select in ["*".to_string(), format!("{v} AS value, pq.id, n")] {
                        let sql = format!("SELECT {select} FROM pq WHERE {key}");
                        let planned = full_scan(&sql);
                        assert_eq!(
                            render(&run(&engine, &sql).await),
                            render(&run(&engine, &planned).await),
                            "{sql}"
                        );
                        direct += 1;
                        let (_, fast, _) = engine.describe(&session, &sql).await.unwrap();
                        let (_, slow, _) = engine.describe(&session, &planned).await.unwrap();
                        assert_eq!(fast, slow, "{sql}");
                    }
                    // Bound parameters, in another order than the key's.
                    let sql = "SELECT * FROM pq WHERE k = $3 AND id = $2 AND region = $1";
                    let params = [
                        ScalarValue::Utf8(Some(region.into())),
                        ScalarValue::Int64(Some(id)),
                        ScalarValue::Int32(Some(k)),
                    ];
                    let fast = engine.execute(&session, sql, &params).await.unwrap();
                    let slow = engine
                        .execute(&session, &full_scan(sql), &params)
                        .await
                        .unwrap();
                    assert_eq!(
                        render(&fast.collect().await.unwrap()),
                        render(&slow.collect().await.unwrap()),
                        "{sql} with {region}, {id}, {k}"
                    );
                    direct += 1;
                }
            }
        }
    }
    let (_, _, fast) = engine
        .describe(
            &session,
            "SELECT * FROM pq WHERE k = $3 AND id = $2 AND region = $1",
        )
        .await
        .unwrap();
    let (_, _, slow) = engine
        .describe(
            &session,
            "SELECT * FROM pq WHERE k = $3 AND id = $2 AND region = $1 LIMIT 1",
        )
        .await
        .unwrap();
    assert_eq!(fast, slow);
    // Every query above was answered directly (other tests may add to the count, never less).
    assert!(tidelake::metrics::metrics().point_queries.get() - before >= direct);
    // Not the whole key, or not exact: DataFusion answers, with its own rules.
    let rows = render(&run(&engine, "SELECT count(*) FROM pq WHERE id = 21").await);
    assert_eq!(rows, vec![vec!["2".to_string()]]);
    let rows = render(
        &run(
            &engine,
            "SELECT v2 FROM pq WHERE region = 'us' AND id = 21.0 AND k = 1",
        )
        .await,
    );
    assert_eq!(rows, vec![vec!["updated".to_string()]]);
    let rows = run(
        &engine,
        "SELECT v2 FROM pq WHERE region = 'us' AND id = 21.5 AND k = 1",
    )
    .await;
    assert!(render(&rows).is_empty());
    // Time travel and system tables are not read directly; the answer is still the key's row.
    let key = "WHERE region = 'eu' AND id = 21 AND k = 1";
    let then = format!("SELECT v FROM pq FOR SYSTEM_TIME AS OF 1 {key}");
    assert_eq!(
        render(&run(&engine, &then).await),
        vec![vec!["r0".to_string()]]
    );
    let audit = format!("SELECT v2 FROM \"pq$audit_log\" {key}");
    assert_eq!(
        render(&run(&engine, &audit).await),
        render(&run(&engine, &format!("{audit} LIMIT 9")).await)
    );
    // Errors are DataFusion's: an unknown column or table.
    for bad in [
        "SELECT nope FROM pq WHERE region = 'us' AND id = 1 AND k = 1",
        "SELECT id, id FROM pq WHERE region = 'us' AND id = 1 AND k = 1",
        "SELECT * FROM nope WHERE id = 1",
    ] {
        assert!(engine.execute(&session, bad, &[]).await.is_err(), "{bad}");
    }
}

/// `ORDER BY … LIMIT n` over a table scan is read late (the sort columns first, the other
/// columns for the winners) or with TopK's dynamic filter as a row predicate; either way the
/// answer is DataFusion's over all the rows in memory. Append files written under two schema
/// versions, nulls, strings, offsets, and primary-key tables before (merged: not read late) and
/// after a full compaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_n_answers_as_datafusion_does_over_all_rows() {
    let (_s, engine) = engine_with_default_db().await;
    run(
        &engine,
        "CREATE TABLE ap (id BIGINT NOT NULL, v DOUBLE, s STRING)",
    )
    .await;
    run(
        &engine,
        "CREATE TABLE pk (id BIGINT NOT NULL, v DOUBLE, s STRING, PRIMARY KEY (id)) \
         WITH ('bucket' = '2', 'write-only' = 'true')",
    )
    .await;
    // Four commits per table (a file each at least), some v null, ids unique per round.
    for round in 0..4i64 {
        let values: Vec<String> = (0..300i64)
            .map(|i| {
                let id = round * 1000 + i;
                let v = if i % 17 == 0 {
                    "NULL".to_string()
                } else {
                    format!("{}", (id * 7919 % 1009) as f64 / 7.0)
                };
                format!("({id}, {v}, 's{}')", (id * 31) % 97)
            })
            .collect();
        for t in ["ap", "pk"] {
            let sql = format!("INSERT INTO {t} (id, v, s) VALUES {}", values.join(", "));
            run(&engine, &sql).await;
        }
        if round == 1 {
            run(&engine, "ALTER TABLE ap ADD COLUMN w INT").await;
        }
    }
    // Rows of the new schema: only they have a `w`.
    let values: Vec<String> = (0..200i64)
        .map(|i| format!("({}, {}.5, 'w', {})", 9000 + i, i % 13, i % 50))
        .collect();
    run(
        &engine,
        &format!("INSERT INTO ap (id, v, s, w) VALUES {}", values.join(", ")),
    )
    .await;
    // Updates in the key table: its older files hold superseded rows.
    run(&engine, "UPDATE pk SET v = 1000.0 + id WHERE id % 10 = 3").await;
    let queries = [
        "SELECT * FROM {t} ORDER BY v DESC, id LIMIT 7",
        "SELECT id, v FROM {t} ORDER BY v ASC NULLS FIRST, id LIMIT 5",
        "SELECT id, s FROM {t} ORDER BY s, id DESC LIMIT 10",
        "SELECT id FROM {t} ORDER BY id DESC LIMIT 3",
        "SELECT v, id FROM {t} ORDER BY v DESC NULLS LAST, id LIMIT 5 OFFSET 3",
        "SELECT id, v FROM {t} ORDER BY v + 1 DESC, id LIMIT 4",
        "SELECT id, v FROM {t} WHERE id % 2 = 0 ORDER BY v, id LIMIT 6",
        "SELECT * FROM {t} ORDER BY id LIMIT 5000",
    ];
    let mut late = 0;
    for (t, compacted) in [("ap", false), ("pk", false), ("pk", true)] {
        if compacted {
            run(&engine, "CALL sys.compact('pk', 'full')").await;
        }
        let ctx = SessionContext::new();
        mirror(&engine, &ctx, t).await;
        let extra = if t == "ap" {
            vec!["SELECT id, w FROM ap ORDER BY w DESC NULLS LAST, id LIMIT 8"]
        } else {
            vec![]
        };
        for q in queries.iter().copied().chain(extra) {
            let sql = q.replace("{t}", t);
            let want = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            assert_eq!(
                render(&run(&engine, &sql).await),
                render(&want),
                "{sql} ({t}, compacted: {compacted})"
            );
            if explain(&engine, &sql).await.contains("top_n_rows=") {
                late += 1;
            }
        }
        // Read late where the rows need no merging and the sort is by columns: each of the two
        // partitions yields its best 3 at most.
        let plan = explain(
            &engine,
            &format!("SELECT id FROM {t} ORDER BY v DESC LIMIT 3"),
        )
        .await;
        assert!(plan.contains("top_n=3 by [v]"), "{plan}");
        let merged = t == "pk" && !compacted;
        assert_eq!(!merged, plan.contains("top_n_rows="), "{plan}");
    }
    // Six of eight queries sort by columns, on the append table and the compacted one.
    assert!(late >= 12, "{late} queries were read late");
    // Nested keys are sorted by DataFusion itself.
    run(
        &engine,
        "CREATE TABLE nest (id BIGINT NOT NULL, tags ARRAY<STRING>)",
    )
    .await;
    run(
        &engine,
        "INSERT INTO nest VALUES (1, make_array('b')), (2, make_array('a', 'z')), (3, NULL), (4, make_array('a'))",
    )
    .await;
    let sql = "SELECT id FROM nest ORDER BY tags, id LIMIT 2";
    let rows = render(&run(&engine, sql).await);
    assert_eq!(rows, vec![vec!["4".to_string()], vec!["2".to_string()]]);
    assert!(!explain(&engine, sql).await.contains("top_n_rows="));
}
