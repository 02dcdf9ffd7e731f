//! Helpers shared by the integration tests: scratch warehouses, rows as JSON values, and the
//! pypaimon driver.

use std::path::PathBuf;
use std::process::Command;

use arrow::array::RecordBatch;
use serde_json::Value;
use tidelake::{Catalog, Identifier, Table, TableDefinition};

/// A catalog over a fresh temporary directory (removed on drop).
pub(crate) struct Scratch {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) catalog: Catalog,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(dir.path().to_str().unwrap()).unwrap();
        Self { dir, catalog }
    }

    pub(crate) fn path(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    pub(crate) async fn create(
        &self,
        name: &str,
        columns: &str,
        pk: &[&str],
        part: &[&str],
        opts: &[(&str, &str)],
    ) -> Table {
        let def = definition(columns, pk, part, opts);
        self.catalog
            .create_table(&Identifier::parse(name).unwrap(), &def, false)
            .await
            .unwrap()
    }
}

/// A table definition from a column list (`id BIGINT NOT NULL, v STRING`), keys and options.
pub(crate) fn definition(
    columns: &str,
    pk: &[&str],
    part: &[&str],
    opts: &[(&str, &str)],
) -> TableDefinition {
    TableDefinition {
        columns: TableDefinition::parse_columns(columns).unwrap(),
        primary_keys: pk.iter().map(|s| s.to_string()).collect(),
        partition_keys: part.iter().map(|s| s.to_string()).collect(),
        options: opts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        comment: None,
        column_comments: Default::default(),
    }
}

/// Rows of `batches` as JSON values in column order (nulls explicit).
pub(crate) fn rows(batches: &[RecordBatch]) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for b in batches {
        // Decimals compare as exact text, temporal values as integers, binaries as hex: the same
        // forms tests/interop/paimon_io.py prints for pypaimon's side.
        let columns = b.columns().iter().map(comparable).collect::<Vec<_>>();
        let fields: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .zip(&columns)
            .map(|(f, c)| arrow::datatypes::Field::new(f.name(), c.data_type().clone(), true))
            .collect();
        let b = &RecordBatch::try_new(
            std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
            columns,
        )
        .unwrap();
        let mut buf = Vec::new();
        {
            let mut w = arrow::json::WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, arrow::json::writer::LineDelimited>(&mut buf);
            w.write(b).unwrap();
            w.finish().unwrap();
        }
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        for line in String::from_utf8(buf).unwrap().lines() {
            let v: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
            out.push(
                names
                    .iter()
                    .map(|n| normalize(v.get(n).cloned().unwrap_or(Value::Null)))
                    .collect(),
            );
        }
    }
    out
}

fn comparable(c: &arrow::array::ArrayRef) -> arrow::array::ArrayRef {
    use arrow::array::{Array, AsArray, StringArray};
    use arrow::datatypes::DataType as T;
    match c.data_type() {
        T::Decimal128(..) => arrow::compute::cast(c, &T::Utf8).unwrap(),
        T::Timestamp(..) => arrow::compute::cast(c, &T::Int64).unwrap(),
        T::Date32 => arrow::compute::cast(c, &T::Int32).unwrap(),
        T::LargeBinary => comparable(&arrow::compute::cast(c, &T::Binary).unwrap()),
        T::Binary => {
            let b = c.as_binary::<i32>();
            let hex = |v: &[u8]| v.iter().map(|x| format!("{x:02x}")).collect::<String>();
            std::sync::Arc::new(StringArray::from_iter(
                (0..b.len()).map(|i| (!b.is_null(i)).then(|| hex(b.value(i)))),
            ))
        }
        _ => std::sync::Arc::clone(c),
    }
}

/// Numbers compare by value: integral floats and integers are the same row value.
pub(crate) fn normalize(v: Value) -> Value {
    match &v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap();
            if f.fract() == 0.0 && f.abs() < 1e15 {
                Value::from(f as i64)
            } else {
                v
            }
        }
        _ => v,
    }
}

pub(crate) fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by_key(|r| serde_json::to_string(r).unwrap());
    rows
}

pub(crate) async fn read_rows(table: &Table, snapshot: Option<i64>) -> Vec<Vec<Value>> {
    let sel = match snapshot {
        Some(id) => tidelake::table::SnapshotSelector::Id(id),
        None => tidelake::table::SnapshotSelector::Latest,
    };
    sorted(rows(&table.read_all(sel, None).await.unwrap()))
}

/// The Python interpreter with pypaimon 2.1 (`scripts/setup-python.sh` creates it).
pub(crate) fn python() -> PathBuf {
    if let Ok(p) = std::env::var("TIDELAKE_PYTHON") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        p.exists(),
        "no Python with pypaimon: run `bash scripts/setup-python.sh` (or set TIDELAKE_PYTHON)"
    );
    p
}

/// Runs `tests/interop/paimon_io.py` (pypaimon) and parses its JSON output.
pub(crate) fn paimon(args: &[&str]) -> Value {
    interop("paimon_io.py", args)
}

/// Runs the interop script `tests/interop/<script>` and parses its JSON output.
pub(crate) fn interop(script: &str, args: &[&str]) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script);
    let out = Command::new(python())
        .arg(path)
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{script} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "bad JSON from {script} ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// pypaimon's rows of a table (sorted, normalized).
pub(crate) fn paimon_rows(wh: &str, table: &str, snapshot: Option<i64>) -> Vec<Vec<Value>> {
    let s = snapshot.map(|s| s.to_string());
    let mut args = vec!["read", wh, table];
    if let Some(s) = &s {
        args.push("--snapshot");
        args.push(s);
    }
    let v = paimon(&args);
    sorted(
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .cloned()
                    .map(normalize)
                    .collect()
            })
            .collect(),
    )
}

/// The golden fixtures written by pypaimon 2.1 (kept in the repository, `tests/fixtures/paimon-2.1`;
/// `TIDELAKE_FIXTURES` points elsewhere).
pub(crate) fn fixtures_dir() -> PathBuf {
    match std::env::var("TIDELAKE_FIXTURES") {
        Ok(p) => PathBuf::from(p),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/paimon-2.1"),
    }
}

/// Copies a directory tree (fixtures are read-only; tests that write work on a copy).
pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
            let mut perm = std::fs::metadata(&target).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&target, perm).unwrap();
        }
    }
}

/// A batch from JSON rows with the table's Arrow schema.
pub(crate) fn batch(table: &Table, json_rows: &[Value]) -> RecordBatch {
    batch_with_schema(table.arrow_schema().unwrap(), json_rows)
}

/// Writes JSON rows as one batch commit; returns the snapshot it made.
pub(crate) async fn write_rows(table: &Table, json_rows: &[Value]) -> Option<i64> {
    table
        .write_batches(
            &[batch(table, json_rows)],
            tidelake::table::WriteOptions::default(),
            None,
        )
        .await
        .unwrap()
        .snapshot_id()
}

/// A batch from JSON rows with the table's columns plus an `op` column of row kinds (+I/-U/+U/-D),
/// for writes with `WriteOptions { row_kind_column: Some("op".into()) }`.
pub(crate) fn batch_with_kinds(table: &Table, json_rows: &[Value]) -> RecordBatch {
    let mut fields: Vec<arrow::datatypes::Field> = table
        .arrow_schema()
        .unwrap()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(arrow::datatypes::Field::new(
        "op",
        arrow::datatypes::DataType::Utf8,
        false,
    ));
    batch_with_schema(
        std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
        json_rows,
    )
}

pub(crate) fn batch_with_schema(
    schema: arrow::datatypes::SchemaRef,
    json_rows: &[Value],
) -> RecordBatch {
    let mut dec = arrow::json::ReaderBuilder::new(schema)
        .build_decoder()
        .unwrap();
    dec.serialize(json_rows).unwrap();
    dec.flush().unwrap().unwrap()
}

/// Runs one SQL statement as the default session and returns its rows as JSON values.
pub(crate) async fn sql(
    engine: &tidelake::sql::SqlEngine,
    statement: &str,
) -> tidelake::error::Result<Vec<Vec<Value>>> {
    let out = engine
        .execute(&tidelake::sql::SqlSession::default(), statement, &[])
        .await?;
    Ok(rows(&out.collect().await?))
}

/// Every file under `dir`, relative to it.
pub(crate) fn files_under(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out
}
