//! Statements that change tables: `CREATE TABLE` (to a [`TableDefinition`]), `INSERT [OVERWRITE]`,
//! and for primary-key tables `UPDATE` and `DELETE`, written as `-U`/`+U`/`-D` rows through the
//! table's merge engine. Each statement is one atomic commit; on any error nothing is committed
//! and the files already written are removed.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::CastOptions;
use arrow::datatypes::{Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, BinaryOperator, ColumnOption, CreateTable, Delete, Expr, FromTable,
    HiveDistributionStyle, Ident, Insert, SqlOption, Statement, TableConstraint, TableFactor,
    TableObject, Update, Value,
};
use futures::StreamExt;

use super::{dialect, object_name_parts, SqlEngine, SqlSession};
use crate::catalog::{Identifier, TableDefinition};
use crate::error::{invalid, Result};
use crate::spec::binary_row::Datum;
use crate::spec::MergeEngine;
use crate::table::{Overwrite, Table, WriteOptions};

/// The input-only column carrying row kinds of UPDATE and DELETE writes.
const KIND_COLUMN: &str = "__tidelake_row_kind";

/// `CREATE TABLE` to a table definition; returns it with the `IF NOT EXISTS` flag.
pub(super) fn table_definition(ct: &CreateTable) -> Result<(TableDefinition, bool)> {
    if ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
        return invalid!("CREATE TABLE ... AS / LIKE / CLONE is not supported");
    }
    if ct.or_replace {
        return invalid!("CREATE OR REPLACE TABLE is not supported; drop the table first");
    }
    let mut def = TableDefinition::default();
    for c in &ct.columns {
        let mut not_null = false;
        let mut comment = None;
        for o in &c.options {
            match &o.option {
                ColumnOption::NotNull => not_null = true,
                ColumnOption::Null => {}
                ColumnOption::PrimaryKey(_) => {
                    not_null = true;
                    def.primary_keys.push(c.name.value.clone());
                }
                ColumnOption::Comment(text) => comment = Some(text.clone()),
                other => return invalid!("column '{}': option '{other}' is not supported", c.name),
            }
        }
        let ty = column_type(&c.name.value, &c.data_type, not_null)?;
        if let Some(comment) = comment {
            def.column_comments.insert(c.name.value.clone(), comment);
        }
        def.columns.push((c.name.value.clone(), ty));
    }
    for constraint in &ct.constraints {
        match constraint {
            TableConstraint::PrimaryKey(pk) => {
                for col in &pk.columns {
                    match &col.column.expr {
                        Expr::Identifier(i) => def.primary_keys.push(i.value.clone()),
                        other => {
                            return invalid!("PRIMARY KEY expects column names, got '{other}'")
                        }
                    }
                }
            }
            other => return invalid!("constraint '{other}' is not supported"),
        }
    }
    // Primary-key columns are NOT NULL, as in Paimon.
    for (name, ty) in def.columns.iter_mut() {
        if def.primary_keys.contains(name) {
            *ty = (*ty).with_nullable(false);
        }
    }
    if let HiveDistributionStyle::PARTITIONED { columns } = &ct.hive_distribution {
        def.partition_keys = columns.iter().map(|c| c.name.value.clone()).collect();
    }
    if let Some(p) = &ct.partition_by {
        return invalid!("use PARTITIONED BY (columns), not PARTITION BY {p}");
    }
    let options: &[SqlOption] = match &ct.table_options {
        datafusion::sql::sqlparser::ast::CreateTableOptions::None => &[],
        datafusion::sql::sqlparser::ast::CreateTableOptions::With(o)
        | datafusion::sql::sqlparser::ast::CreateTableOptions::Options(o)
        | datafusion::sql::sqlparser::ast::CreateTableOptions::TableProperties(o) => o,
        datafusion::sql::sqlparser::ast::CreateTableOptions::Plain(o) => o,
    };
    def.options.extend(key_values(options)?);
    if let Some(c) = &ct.comment {
        def.comment = Some(match c {
            datafusion::sql::sqlparser::ast::CommentDef::WithEq(s)
            | datafusion::sql::sqlparser::ast::CommentDef::WithoutEq(s) => s.clone(),
        });
    }
    Ok((def, ct.if_not_exists))
}

/// A column's Paimon type from its SQL type.
pub(super) fn column_type(
    name: &str,
    sql: &datafusion::sql::sqlparser::ast::DataType,
    not_null: bool,
) -> Result<crate::spec::DataType> {
    let ty = paimon_type_name(&sql.to_string());
    let text = if not_null {
        format!("{ty} NOT NULL")
    } else {
        ty
    };
    text.parse().map_err(|e| {
        crate::error::InvalidArgumentSnafu {
            message: format!("column '{name}': {e}"),
        }
        .build()
    })
}

/// `'key' = 'value'` options (WITH, TBLPROPERTIES) as strings.
pub(super) fn key_values(options: &[SqlOption]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for o in options {
        match o {
            SqlOption::KeyValue { key, value } => {
                let v = match value {
                    Expr::Value(v) => match &v.value {
                        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
                        Value::Number(n, _) => n.clone(),
                        Value::Boolean(b) => b.to_string(),
                        other => other.to_string(),
                    },
                    Expr::Identifier(i) => i.value.clone(),
                    other => other.to_string(),
                };
                out.push((key.value.clone(), v));
            }
            other => {
                return invalid!("table option '{other}' is not supported; use 'key' = 'value'")
            }
        }
    }
    Ok(out)
}

/// SQL type spellings to Paimon's.
fn paimon_type_name(sql: &str) -> String {
    let upper = sql.trim().to_ascii_uppercase();
    match upper.as_str() {
        "TEXT" => "STRING".into(),
        "INTEGER" => "INT".into(),
        "BOOL" => "BOOLEAN".into(),
        "REAL" => "FLOAT".into(),
        "DOUBLE PRECISION" => "DOUBLE".into(),
        "BYTEA" | "BLOB" => "BYTES".into(),
        _ => upper,
    }
}

fn table_of_object(obj: &TableObject) -> Result<&datafusion::sql::sqlparser::ast::ObjectName> {
    match obj {
        TableObject::TableName(n) => Ok(n),
        other => invalid!("INSERT into '{other}' is not supported"),
    }
}

/// `INSERT [OVERWRITE] t [PARTITION (k = v, ...)] [(cols)] VALUES ... | SELECT ...`.
pub(super) async fn insert(
    engine: &SqlEngine,
    session: &SqlSession,
    ins: Insert,
    param_rows: &[Vec<ScalarValue>],
) -> Result<i64> {
    if ins.on.is_some() || ins.returning.is_some() || ins.or.is_some() {
        return invalid!("INSERT ... ON CONFLICT / RETURNING / OR is not supported");
    }
    let id = engine.identifier(session, table_of_object(&ins.table)?)?;
    let table = engine.catalog().load_table(&id).await?;
    let layout = table.layout()?;
    let Some(source) = ins.source else {
        return invalid!("INSERT into {id} needs VALUES or a SELECT");
    };
    // Static partition values (`PARTITION (dt = '2024-01-01')`).
    let mut statics: Vec<(String, Datum)> = Vec::new();
    for e in ins.partitioned.iter().flatten() {
        let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = e
        else {
            return invalid!("PARTITION expects key = value pairs, got '{e}'");
        };
        let key = match left.as_ref() {
            Expr::Identifier(i) => i.value.clone(),
            other => return invalid!("PARTITION expects a partition key, got '{other}'"),
        };
        if !layout.schema.partition_keys.contains(&key) {
            return invalid!("table {id}: '{key}' is not a partition key");
        }
        let field = layout
            .schema
            .field(&key)
            .expect("partition key is a column");
        let scalar = match right.as_ref() {
            Expr::Value(v) => match &v.value {
                Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                    ScalarValue::Utf8(Some(s.clone()))
                }
                Value::Number(n, _) => ScalarValue::Utf8(Some(n.clone())),
                other => return invalid!("PARTITION value '{other}' is not supported"),
            },
            other => return invalid!("PARTITION value '{other}' must be a literal"),
        };
        let Some(datum) = super::provider::scalar_to_datum(&scalar, &field.data_type) else {
            return invalid!(
                "table {id}: '{right}' is not a valid {} value for partition key '{key}'",
                field.data_type
            );
        };
        statics.push((key, datum));
    }
    let targets: Vec<String> = if ins.columns.is_empty() {
        layout
            .schema
            .fields
            .iter()
            .map(|f| f.name.clone())
            .filter(|n| !statics.iter().any(|(k, _)| k == n))
            .collect()
    } else {
        let mut cols = Vec::new();
        for c in &ins.columns {
            let name = object_name_parts(c)?.pop().unwrap_or_default();
            if layout.schema.field(&name).is_none() {
                return invalid!("table {id} has no column '{name}'");
            }
            cols.push(name);
        }
        cols
    };
    let overwrite = ins.overwrite.then(|| {
        if statics.is_empty() {
            Overwrite::Table
        } else {
            Overwrite::Partitions(statics.clone())
        }
    });
    // One source query per parameter row, all written by one writer and committed once.
    let source = DFStatement::Statement(Box::new(Statement::Query(source)));
    let ident = id.to_string();
    let width = targets.len();
    let arrow_schema = Arc::clone(&layout.arrow_schema);
    let outputs = futures::stream::iter(param_rows.to_vec())
        .then(move |params| {
            let stmt = source.clone();
            async move { engine.query(session, stmt, &params).await }
        })
        .map(move |r| match r {
            Ok(out) if out.schema.fields().len() == width => out.stream,
            Ok(out) => futures::stream::once(futures::future::ready(invalid!(
                "INSERT into {ident} has {width} target column(s) but the query produces {}",
                out.schema.fields().len()
            )))
            .boxed(),
            Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
        })
        .flatten();
    let name = id.to_string();
    let shaped = outputs.map(move |r| {
        let b = r?;
        shape(&name, &arrow_schema, &b, &targets, &statics)
    });
    table
        .write_stream(shaped.boxed(), WriteOptions::default(), overwrite)
        .await
}

/// Casts the query's columns to the table's types under the target names and adds static
/// partition values; columns not named stay absent (the writer fills NULLs or refuses).
fn shape(
    table: &str,
    table_schema: &arrow::datatypes::SchemaRef,
    b: &RecordBatch,
    targets: &[String],
    statics: &[(String, Datum)],
) -> Result<RecordBatch> {
    let n = b.num_rows();
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    let opts = CastOptions {
        safe: false,
        ..Default::default()
    };
    for (i, name) in targets.iter().enumerate() {
        let ty = table_schema
            .field_with_name(name)
            .map(|f| f.data_type().clone())
            .map_err(|_| {
                crate::error::InvalidArgumentSnafu {
                    message: format!("table {table} has no column '{name}'"),
                }
                .build()
            })?;
        let col = arrow::compute::cast_with_options(b.column(i), &ty, &opts).map_err(|e| {
            crate::error::InvalidArgumentSnafu {
                message: format!(
                    "table {table}, column '{name}': cannot store {} values as {ty}: {e}",
                    b.column(i).data_type()
                ),
            }
            .build()
        })?;
        fields.push(Field::new(name, ty, true));
        cols.push(col);
    }
    for (name, d) in statics {
        let ty = table_schema
            .field_with_name(name)
            .map(|f| f.data_type().clone())
            .unwrap_or(arrow::datatypes::DataType::Null);
        cols.push(crate::spec::datum::datums_to_array(
            &ty,
            &vec![d.clone(); n],
        )?);
        fields.push(Field::new(name, ty, true));
    }
    let opts = arrow::array::RecordBatchOptions::new().with_row_count(Some(n));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), cols, &opts).map_err(|e| {
        crate::error::InvalidArgumentSnafu {
            message: format!("table {table}: {e}"),
        }
        .build()
    })
}

/// The single table an UPDATE or DELETE targets, with its SQL text (alias included).
fn target_relation(
    engine: &SqlEngine,
    session: &SqlSession,
    twj: &datafusion::sql::sqlparser::ast::TableWithJoins,
) -> Result<(Identifier, String)> {
    if !twj.joins.is_empty() {
        return invalid!("UPDATE/DELETE with joins is not supported");
    }
    match &twj.relation {
        TableFactor::Table { name, .. } => {
            Ok((engine.identifier(session, name)?, twj.relation.to_string()))
        }
        other => invalid!("UPDATE/DELETE target '{other}' must be a table"),
    }
}

/// Refuses UPDATE/DELETE where the merge engine would not apply them as asked.
fn check_row_level(table: &Table, what: &str) -> Result<Arc<crate::table::TableLayout>> {
    let layout = table.layout()?;
    let id = table.identifier();
    if !layout.is_primary_key_table() {
        return crate::error::UnsupportedSnafu {
            message: format!("{what} needs a primary-key table; {id} is an append table"),
        }
        .fail();
    }
    let cfg = &layout.merge_config;
    let refuse = |why: String| {
        crate::error::UnsupportedSnafu {
            message: format!("{what} on {id}: {why}"),
        }
        .fail()
    };
    if what == "DELETE" && layout.ignore_delete {
        return refuse("the table sets 'ignore-delete', so deletes would be dropped".into());
    }
    match layout.merge_engine {
        MergeEngine::Deduplicate => Ok(layout),
        MergeEngine::FirstRow => refuse("the first-row merge engine keeps the first row".into()),
        MergeEngine::PartialUpdate if what == "DELETE" => {
            if cfg.remove_record_on_delete {
                Ok(layout)
            } else {
                refuse("partial-update tables take deletes only with 'partial-update.remove-record-on-delete' = 'true'".into())
            }
        }
        MergeEngine::PartialUpdate => Ok(layout),
        MergeEngine::Aggregation if what == "DELETE" && cfg.remove_record_on_delete => Ok(layout),
        MergeEngine::Aggregation => refuse(
            "aggregation tables fold rows; write the change as an INSERT (or set 'aggregation.remove-record-on-delete' for DELETE)".into(),
        ),
    }
}

fn kind_options() -> WriteOptions {
    WriteOptions {
        row_kind_column: Some(KIND_COLUMN.to_string()),
    }
}

fn quoted(name: &str) -> String {
    Ident::with_quote('"', name).to_string()
}

fn kinds_column(kind: &str, n: usize) -> ArrayRef {
    Arc::new(StringArray::from(vec![kind; n]))
}

fn with_kind(b: &RecordBatch, kind: &str) -> Result<RecordBatch> {
    let mut fields: Vec<Field> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(Field::new(
        KIND_COLUMN,
        arrow::datatypes::DataType::Utf8,
        false,
    ));
    let mut cols = b.columns().to_vec();
    cols.push(kinds_column(kind, b.num_rows()));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(|e| {
        crate::error::InternalSnafu {
            message: format!("adding row kinds: {e}"),
        }
        .build()
    })
}

/// `UPDATE t SET c = e, ... [WHERE p]`: each matching row is written as `-U` (old) and `+U`
/// (new) for deduplicate tables, and as `+U` for partial-update tables.
pub(super) async fn update(
    engine: &SqlEngine,
    session: &SqlSession,
    u: Update,
    params: &[ScalarValue],
) -> Result<i64> {
    if u.from.is_some() || u.returning.is_some() || u.limit.is_some() {
        return invalid!("UPDATE ... FROM / RETURNING / LIMIT is not supported");
    }
    let (id, relation) = target_relation(engine, session, &u.table)?;
    let table = engine.catalog().load_table(&id).await?;
    let layout = check_row_level(&table, "UPDATE")?;
    let schema = &layout.schema;
    let mut assigned: Vec<(usize, String)> = Vec::new();
    for a in &u.assignments {
        let AssignmentTarget::ColumnName(col) = &a.target else {
            return invalid!("UPDATE of a column tuple is not supported");
        };
        let name = object_name_parts(col)?.pop().unwrap_or_default();
        let Some(i) = schema.field_index(&name) else {
            return invalid!("table {id} has no column '{name}'");
        };
        if schema.primary_keys.contains(&name) || schema.partition_keys.contains(&name) {
            return invalid!("table {id}: UPDATE cannot change key column '{name}' (primary and partition keys are fixed; delete and insert instead)");
        }
        assigned.push((i, a.value.to_string()));
    }
    let mut select: Vec<String> = schema.fields.iter().map(|f| quoted(&f.name)).collect();
    for (k, (_, e)) in assigned.iter().enumerate() {
        select.push(format!("({e}) AS {}", quoted(&format!("__new_{k}"))));
    }
    let mut sql = format!("SELECT {} FROM {relation}", select.join(", "));
    if let Some(w) = &u.selection {
        sql.push_str(&format!(" WHERE {w}"));
    }
    let stmt = dialect::parse_one(&sql)?;
    let out = engine.query(session, stmt, params).await?;
    let n = schema.fields.len();
    let arrow_schema = Arc::clone(&layout.arrow_schema);
    let emit_before = layout.merge_engine == MergeEngine::Deduplicate;
    let table_name = id.to_string();
    let rows = out
        .stream
        .map(move |r| -> Result<Vec<Result<RecordBatch>>> {
            let b = r?;
            let old = b.project(&(0..n).collect::<Vec<_>>()).map_err(|e| {
                crate::error::InternalSnafu {
                    message: format!("UPDATE rows: {e}"),
                }
                .build()
            })?;
            let mut cols = old.columns().to_vec();
            let opts = CastOptions {
                safe: false,
                ..Default::default()
            };
            for (k, (i, _)) in assigned.iter().enumerate() {
                let ty = arrow_schema.field(*i).data_type();
                cols[*i] =
                    arrow::compute::cast_with_options(b.column(n + k), ty, &opts).map_err(|e| {
                        crate::error::InvalidArgumentSnafu {
                            message: format!(
                                "table {table_name}, column '{}': {e}",
                                arrow_schema.field(*i).name()
                            ),
                        }
                        .build()
                    })?;
            }
            let fields: Vec<Field> = arrow_schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect();
            let new = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(|e| {
                crate::error::InvalidArgumentSnafu {
                    message: format!("table {table_name}: {e}"),
                }
                .build()
            })?;
            let mut outs = Vec::new();
            if emit_before {
                outs.push(with_kind(&old, "-U"));
            }
            outs.push(with_kind(&new, "+U"));
            Ok(outs)
        })
        .flat_map(|r| match r {
            Ok(v) => futures::stream::iter(v),
            Err(e) => futures::stream::iter(vec![Err(e)]),
        });
    let written = table
        .write_stream(rows.boxed(), kind_options(), None)
        .await?;
    Ok(if emit_before { written / 2 } else { written })
}

/// `DELETE FROM t [WHERE p]`: each matching row is written as `-D`.
pub(super) async fn delete(
    engine: &SqlEngine,
    session: &SqlSession,
    d: Delete,
    params: &[ScalarValue],
) -> Result<i64> {
    if d.using.is_some() || d.returning.is_some() || d.limit.is_some() || !d.tables.is_empty() {
        return invalid!("DELETE ... USING / RETURNING / LIMIT is not supported");
    }
    let from = match &d.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    let [twj] = from.as_slice() else {
        return invalid!("DELETE names exactly one table");
    };
    let (id, relation) = target_relation(engine, session, twj)?;
    let table = engine.catalog().load_table(&id).await?;
    let layout = check_row_level(&table, "DELETE")?;
    let cols: Vec<String> = layout
        .schema
        .fields
        .iter()
        .map(|f| quoted(&f.name))
        .collect();
    let mut sql = format!("SELECT {} FROM {relation}", cols.join(", "));
    if let Some(w) = &d.selection {
        sql.push_str(&format!(" WHERE {w}"));
    }
    let stmt = dialect::parse_one(&sql)?;
    let out = engine.query(session, stmt, params).await?;
    let rows = out.stream.map(|r| r.and_then(|b| with_kind(&b, "-D")));
    table.write_stream(rows.boxed(), kind_options(), None).await
}

/// The procedures `CALL sys.<name>(...)` knows, each with its parameters in positional order
/// (Paimon's names; named arguments `name => value` may be given in any order).
const PROCEDURES: &[(&str, &[&str])] = &[
    ("compact", &["table", "compact_strategy", "partitions"]),
    (
        "expire_snapshots",
        &[
            "table",
            "retain_max",
            "retain_min",
            "older_than",
            "max_deletes",
        ],
    ),
    (
        "expire_changelogs",
        &[
            "table",
            "retain_max",
            "retain_min",
            "older_than",
            "max_deletes",
            "delete_all",
        ],
    ),
    ("remove_orphan_files", &["table", "older_than", "dry_run"]),
    ("create_tag", &["table", "tag", "snapshot_id"]),
    ("delete_tag", &["table", "tag"]),
    ("rollback_to", &["table", "snapshot_or_tag"]),
    ("reset_options", &["table"]),
];

fn unknown_procedure(name: &str) -> Result<i64> {
    let names: Vec<String> = PROCEDURES.iter().map(|(p, _)| format!("sys.{p}")).collect();
    invalid!(
        "unknown procedure '{name}'; procedures are {}",
        names.join(", ")
    )
}

/// The literal arguments of one `CALL`, by parameter name.
struct CallArgs {
    proc: String,
    named: std::collections::HashMap<String, Option<String>>,
    /// Positional arguments past the declared parameters (`reset_options`' keys).
    rest: Vec<Option<String>>,
}

impl CallArgs {
    fn parse(
        proc: &str,
        params: &[&str],
        f: &datafusion::sql::sqlparser::ast::Function,
    ) -> Result<Self> {
        use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
        let list = match &f.args {
            FunctionArguments::None => &vec![],
            FunctionArguments::List(l) => &l.args,
            FunctionArguments::Subquery(_) => return invalid!("CALL arguments must be literals"),
        };
        let literal = |e: &FunctionArgExpr| -> Result<Option<String>> {
            match e {
                FunctionArgExpr::Expr(Expr::Value(v)) => match &v.value {
                    Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                        Ok(Some(s.clone()))
                    }
                    Value::Number(n, _) => Ok(Some(n.clone())),
                    Value::Boolean(b) => Ok(Some(b.to_string())),
                    Value::Null => Ok(None),
                    other => invalid!("CALL argument '{other}' must be a string or a number"),
                },
                other => invalid!("CALL argument '{other}' must be a literal"),
            }
        };
        let mut args = CallArgs {
            proc: proc.to_string(),
            named: Default::default(),
            rest: vec![],
        };
        let mut position = 0;
        for a in list {
            let (name, value) = match a {
                FunctionArg::Unnamed(e) => {
                    let value = literal(e)?;
                    let Some(name) = params.get(position) else {
                        args.rest.push(value);
                        continue;
                    };
                    position += 1;
                    (name.to_string(), value)
                }
                FunctionArg::Named { name, arg, .. }
                | FunctionArg::ExprNamed {
                    arg,
                    name: Expr::Identifier(name),
                    ..
                } => {
                    let name = name.value.to_ascii_lowercase();
                    if !params.contains(&name.as_str()) {
                        return invalid!(
                            "sys.{proc} has no parameter '{name}'; its parameters are {}",
                            params.join(", ")
                        );
                    }
                    (name, literal(arg)?)
                }
                other => return invalid!("CALL argument '{other}' must be a literal"),
            };
            if args.named.insert(name.clone(), value).is_some() {
                return invalid!("sys.{proc}: argument '{name}' is given twice");
            }
        }
        Ok(args)
    }

    fn text(&self, name: &str) -> Option<String> {
        self.named.get(name).cloned().flatten()
    }

    fn required(&self, name: &str) -> Result<String> {
        match self.text(name) {
            Some(v) => Ok(v),
            None => invalid!("sys.{}: argument '{name}' is required", self.proc),
        }
    }

    fn number(&self, name: &str) -> Result<Option<i64>> {
        match self.text(name) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<i64>() {
                Ok(n) => Ok(Some(n)),
                Err(_) => invalid!("sys.{}: {name} '{v}' is not a number", self.proc),
            },
        }
    }

    fn flag(&self, name: &str, default: bool) -> Result<bool> {
        match self.text(name) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => invalid!("sys.{}: {name} '{v}' is neither true nor false", self.proc),
            },
        }
    }
}

/// `CALL sys.<procedure>(...)`: the arguments parsed into the maintenance core's request and run
/// there. Returns the procedure's count (buckets compacted, snapshots expired, files removed).
pub(super) async fn call(
    engine: &SqlEngine,
    session: &SqlSession,
    f: datafusion::sql::sqlparser::ast::Function,
) -> Result<i64> {
    use crate::table::maintenance::{
        Compact, CreateTag, ExpireChangelogs, ExpireSnapshots, RemoveOrphans, Request,
    };
    let name = object_name_parts(&f.name)?;
    let (proc, params) = match name.as_slice() {
        [sys, p] if sys.eq_ignore_ascii_case("sys") => {
            match PROCEDURES.iter().find(|(n, _)| n.eq_ignore_ascii_case(p)) {
                Some(found) => *found,
                None => return unknown_procedure(&f.name.to_string()),
            }
        }
        _ => return unknown_procedure(&f.name.to_string()),
    };
    let args = CallArgs::parse(proc, params, &f)?;
    let table_name = args.required("table")?;
    let id = match table_name.split('.').collect::<Vec<_>>().as_slice() {
        [t] => Identifier::new(session.database.clone(), t.to_string()),
        [d, t] => Identifier::new(d.to_string(), t.to_string()),
        _ => return invalid!("sys.{proc}: invalid table name '{table_name}'"),
    };
    let request = match proc {
        // Paimon's batch compaction: a full compaction unless 'minor' is asked for.
        "compact" => Request::Compact(Compact {
            full: match args.text("compact_strategy") {
                Some(s) => Compact::strategy(&s)?,
                None => true,
            },
            partitions: match args.text("partitions") {
                Some(list) => list
                    .split(',')
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| crate::table::maintenance::key_value(p, "partition"))
                    .collect::<Result<_>>()?,
                None => vec![],
            },
        }),
        "expire_snapshots" => Request::ExpireSnapshots(ExpireSnapshots {
            retain_max: args.number("retain_max")?,
            retain_min: args.number("retain_min")?,
            older_than: args.text("older_than"),
            max_deletes: args.number("max_deletes")?,
        }),
        "expire_changelogs" => Request::ExpireChangelogs(ExpireChangelogs {
            retain_max: args.number("retain_max")?,
            retain_min: args.number("retain_min")?,
            older_than: args.text("older_than"),
            max_deletes: args.number("max_deletes")?,
            delete_all: args.flag("delete_all", false)?,
        }),
        "remove_orphan_files" => Request::RemoveOrphans(RemoveOrphans {
            older_than: args.text("older_than"),
            dry_run: args.flag("dry_run", true)?,
        }),
        "create_tag" => Request::CreateTag(CreateTag {
            name: args.required("tag")?,
            snapshot_id: args.number("snapshot_id")?,
        }),
        "delete_tag" => Request::DeleteTag {
            name: args.required("tag")?,
        },
        "rollback_to" => {
            let to = args.required("snapshot_or_tag")?;
            Request::Rollback(match to.trim().parse::<i64>() {
                Ok(id) => crate::table::lifecycle::RollbackTarget::Snapshot(id),
                Err(_) => crate::table::lifecycle::RollbackTarget::Tag(to),
            })
        }
        _ => {
            // reset_options: every argument after the table is an option key.
            let changes: Vec<crate::schema::change::SchemaChange> = args
                .rest
                .iter()
                .flatten()
                .map(|k| crate::schema::change::SchemaChange::RemoveOption { key: k.clone() })
                .collect();
            engine.catalog().load_table(&id).await?;
            if !changes.is_empty() {
                engine.catalog().alter_table(&id, &changes).await?;
            }
            return Ok(0);
        }
    };
    request.validate()?;
    let table = engine.catalog().load_table(&id).await?;
    let op = crate::table::progress::Operation::new();
    let outcome = request.clone().run(&table, &op).await?;
    Ok(match request {
        // Tag procedures write no rows.
        Request::CreateTag(_) | Request::DeleteTag { .. } | Request::Rollback(_) => 0,
        _ => outcome.count(&request),
    })
}
