//! Statements that change a table's rows: `INSERT [OVERWRITE]`, and for primary-key tables
//! `UPDATE` and `DELETE`, written as `-U`/`+U`/`-D` rows through the table's merge engine. Each
//! statement is one atomic commit; on any error nothing is committed and the files already
//! written are removed. UPDATE and DELETE find their rows with a query built from their own
//! statement tree (never from SQL text). `CREATE` and `DROP` are in `super::ddl`, `ALTER` in
//! `super::alter`, `CALL` in `super::call`.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::CastOptions;
use arrow::datatypes::{Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, BinaryOperator, Delete, Expr, FromTable, Ident, Insert, SelectItem, SetExpr,
    Statement, TableFactor, TableObject, TableWithJoins, Update, Value,
};
use futures::StreamExt;

use super::{dialect, object_name_parts, SqlEngine, SqlSession};
use crate::catalog::Identifier;
use crate::error::{invalid, Result};
use crate::spec::binary_row::Datum;
use crate::spec::MergeEngine;
use crate::table::{Overwrite, Table, WriteOptions};

/// The input-only column carrying row kinds of UPDATE and DELETE writes.
const KIND_COLUMN: &str = "__tidelake_row_kind";

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
        let Some(datum) = super::expr::scalar_to_datum(&scalar, &field.data_type) else {
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

/// The single table an UPDATE or DELETE targets.
fn target_table(
    engine: &SqlEngine,
    session: &SqlSession,
    twj: &TableWithJoins,
) -> Result<Identifier> {
    if !twj.joins.is_empty() {
        return invalid!("UPDATE/DELETE with joins is not supported");
    }
    match &twj.relation {
        TableFactor::Table { name, .. } => engine.identifier(session, name),
        other => invalid!("UPDATE/DELETE target '{other}' must be a table"),
    }
}

/// `SELECT <projection> FROM <target> [WHERE <selection>]` as a statement tree made of the
/// UPDATE's or DELETE's own nodes: nothing the user wrote is printed and parsed again.
fn select_rows(
    target: &TableWithJoins,
    projection: Vec<SelectItem>,
    selection: Option<Expr>,
) -> Result<DFStatement> {
    // The parser's SELECT, so that every clause not set here has its empty form.
    let unexpected = || {
        Err(super::internal(
            "the parser's SELECT has an unexpected shape".into(),
        ))
    };
    let DFStatement::Statement(mut stmt) = dialect::parse_one("SELECT 1")? else {
        return unexpected();
    };
    let Statement::Query(query) = stmt.as_mut() else {
        return unexpected();
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return unexpected();
    };
    select.projection = projection;
    select.from = vec![target.clone()];
    select.selection = selection;
    Ok(DFStatement::Statement(stmt))
}

/// A table column as a select item.
fn column(name: &str) -> SelectItem {
    SelectItem::UnnamedExpr(Expr::Identifier(Ident::with_quote('"', name)))
}

/// Refuses UPDATE/DELETE where the merge engine would not apply them as asked.
fn check_row_level(table: &Table, what: &str) -> Result<Arc<crate::table::TableLayout>> {
    let layout = table.layout()?;
    let id = table.identifier();
    if layout.options.data_evolution {
        return crate::error::UnsupportedSnafu {
            message: format!(
                "{what} of the data-evolution table {id} (files of only the changed columns, by row id) is not supported by tidelake yet"
            ),
        }
        .fail();
    }
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
/// (new) for deduplicate tables, and as `+U` for partial-update tables. Keys are fixed, and so
/// are partitions, except on cross-partition tables, whose rows the writer then moves.
pub(super) async fn update(
    engine: &SqlEngine,
    session: &SqlSession,
    u: Update,
    params: &[ScalarValue],
) -> Result<i64> {
    if u.from.is_some() || u.returning.is_some() || u.limit.is_some() {
        return invalid!("UPDATE ... FROM / RETURNING / LIMIT is not supported");
    }
    let id = target_table(engine, session, &u.table)?;
    let table = engine.catalog().load_table(&id).await?;
    let layout = check_row_level(&table, "UPDATE")?;
    let schema = &layout.schema;
    let mut assigned: Vec<(usize, Expr)> = Vec::new();
    for a in &u.assignments {
        let AssignmentTarget::ColumnName(col) = &a.target else {
            return invalid!("UPDATE of a column tuple is not supported");
        };
        let name = object_name_parts(col)?.pop().unwrap_or_default();
        let Some(i) = schema.field_index(&name) else {
            return invalid!("table {id} has no column '{name}'");
        };
        // A cross-partition table's key moves between partitions: its partition may change.
        let moves =
            layout.cross_partition && layout.bucket_mode == crate::spec::BucketMode::Dynamic;
        if schema.primary_keys.contains(&name) || (schema.partition_keys.contains(&name) && !moves)
        {
            return invalid!("table {id}: UPDATE cannot change key column '{name}' (primary and partition keys are fixed; delete and insert instead)");
        }
        assigned.push((i, a.value.clone()));
    }
    // The old row, then each assigned value under a name of its own.
    let mut projection: Vec<SelectItem> = schema.fields.iter().map(|f| column(&f.name)).collect();
    for (k, (_, e)) in assigned.iter().enumerate() {
        projection.push(SelectItem::ExprWithAlias {
            expr: Expr::Nested(Box::new(e.clone())),
            alias: Ident::with_quote('"', format!("__new_{k}")),
        });
    }
    let stmt = select_rows(&u.table, projection, u.selection.clone())?;
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
    let id = target_table(engine, session, twj)?;
    let table = engine.catalog().load_table(&id).await?;
    let layout = check_row_level(&table, "DELETE")?;
    let projection = layout
        .schema
        .fields
        .iter()
        .map(|f| column(&f.name))
        .collect();
    let stmt = select_rows(twj, projection, d.selection.clone())?;
    let out = engine.query(session, stmt, params).await?;
    let rows = out.stream.map(|r| r.and_then(|b| with_kind(&b, "-D")));
    table.write_stream(rows.boxed(), kind_options(), None).await
}
