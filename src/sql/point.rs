//! Point queries by primary key, answered without DataFusion: `SELECT <columns | *> FROM t
//! WHERE k1 = v1 AND k2 = v2 ...` where the equalities name every primary-key column of a
//! primary-key table exactly once (values are literals or `?` / `$n` parameters). Such a query
//! reads one bucket of one partition, only the files and pages whose key range holds the key, and
//! keeps the rows whose key matches: the same answer DataFusion gives, without logical and
//! physical planning on every execution of a prepared statement.
//!
//! Anything else (another clause, an expression, a literal whose type is not the column's, a
//! NULL, a system table or time travel) is not a point query, and DataFusion plans it as before.
//! [`shape`] is the pure decider; [`PointQuery::resolve`] checks the shape against the table.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, Scalar};
use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Ident, ObjectName, SelectItem, SetExpr, Statement, TableFactor,
    UnaryOperator, Value,
};
use futures::StreamExt;

use super::expr::scalar_to_datum;
use super::provider::parse_table_name;
use crate::error::{ArrowSnafu, Result};
use crate::spec::binary_row::Datum;
use crate::table::{SnapshotSelector, Table};
use snafu::ResultExt;

/// The right-hand side of a key equality, as written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    /// A number as written (`42`, `-7`, `1.5`).
    Number(String),
    String(String),
    Boolean(bool),
    /// A positional parameter, 0-based (`$1` is 0).
    Param(usize),
}

/// A query of the point-query shape, before its names are checked against a table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shape {
    pub(crate) table: ObjectName,
    /// `(column, output name)`; `None` is `*`.
    pub(crate) columns: Option<Vec<(String, String)>>,
    /// `(column, value)` for each equality of the WHERE clause.
    pub(crate) equalities: Vec<(String, Operand)>,
}

/// The point-query shape of `stmt`, if it has it. Pure: names are normalized as DataFusion
/// normalizes them (unquoted ones lowercased) but not checked against any table.
pub(crate) fn shape(stmt: &DFStatement) -> Option<Shape> {
    let DFStatement::Statement(s) = stmt else {
        return None;
    };
    let Statement::Query(query) = s.as_ref() else {
        return None;
    };
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    let TableFactor::Table { name, alias, .. } = &from.relation else {
        return None;
    };
    // A plain name with at most an alias: no joins, table arguments, hints or versions.
    let plain = match alias {
        None => name.to_string(),
        Some(a) => format!("{name} {a}"),
    };
    if !from.joins.is_empty() || from.to_string() != plain {
        return None;
    }
    let selection = select.selection.as_ref()?;
    // Any clause beyond SELECT, FROM and WHERE (DISTINCT, GROUP BY, ORDER BY, LIMIT, joins,
    // table arguments, a WITH ...) shows in the statement's text: it must read back as exactly
    // these three parts.
    let projection: Vec<String> = select.projection.iter().map(|p| p.to_string()).collect();
    let canonical = format!(
        "SELECT {} FROM {from} WHERE {selection}",
        projection.join(", ")
    );
    if query.to_string() != canonical {
        return None;
    }
    // Qualifiers a column may carry: the alias, else the table's last name part.
    let qualifier = match alias {
        Some(a) if !a.columns.is_empty() || a.at.is_some() => return None,
        Some(a) => normalize(&a.name),
        None => match name.0.last()?.as_ident() {
            Some(i) => normalize(i),
            None => return None,
        },
    };
    let column = |e: &Expr| -> Option<String> {
        match e {
            Expr::Identifier(i) => Some(normalize(i)),
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [q, c] if normalize(q) == qualifier => Some(normalize(c)),
                _ => None,
            },
            _ => None,
        }
    };
    let columns = match select.projection.as_slice() {
        [SelectItem::Wildcard(options)] if options.to_string().is_empty() => None,
        items => Some(
            items
                .iter()
                .map(|item| match item {
                    SelectItem::UnnamedExpr(e) => column(e).map(|c| (c.clone(), c)),
                    SelectItem::ExprWithAlias { expr, alias } => {
                        column(expr).map(|c| (c, normalize(alias)))
                    }
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?,
        ),
    };
    let mut conjuncts = Vec::new();
    split_and(selection, &mut conjuncts);
    let equalities = conjuncts
        .into_iter()
        .map(|e| {
            let Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } = e
            else {
                return None;
            };
            match (column(left), column(right)) {
                (Some(c), None) => Some((c, operand(right)?)),
                (None, Some(c)) => Some((c, operand(left)?)),
                _ => None,
            }
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Shape {
        table: name.clone(),
        columns,
        equalities,
    })
}

fn normalize(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            split_and(left, out);
            split_and(right, out);
        }
        Expr::Nested(inner) => split_and(inner, out),
        other => out.push(other),
    }
}

fn operand(e: &Expr) -> Option<Operand> {
    match e {
        Expr::Nested(inner) => operand(inner),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match operand(expr)? {
            Operand::Number(n) if !n.starts_with('-') => Some(Operand::Number(format!("-{n}"))),
            _ => None,
        },
        Expr::Value(v) => match &v.value {
            Value::Number(n, false) => Some(Operand::Number(n.clone())),
            Value::SingleQuotedString(s) => Some(Operand::String(s.clone())),
            Value::Boolean(b) => Some(Operand::Boolean(*b)),
            Value::Placeholder(p) => {
                let n: usize = p.strip_prefix('$')?.parse().ok()?;
                n.checked_sub(1).map(Operand::Param)
            }
            _ => None,
        },
        _ => None,
    }
}

/// The value of `operand` as a `ty` scalar, when it is one without a lossy conversion: integers
/// for integer columns, numbers for floating-point columns, strings for string columns, booleans
/// for boolean columns, and parameters of the column's type (integers of another width when they
/// fit). Anything else is left to DataFusion's coercion rules. Pure.
pub(crate) fn key_value(
    operand: &Operand,
    ty: &ArrowType,
    params: &[ScalarValue],
) -> Option<ScalarValue> {
    let value = match operand {
        Operand::Number(n) if ty.is_integer() => ScalarValue::Int64(Some(n.parse().ok()?)),
        Operand::Number(n) if ty.is_floating() => {
            if n.contains(['e', 'E']) {
                return None;
            }
            ScalarValue::Float64(Some(n.parse().ok()?))
        }
        Operand::String(s) if matches!(ty, ArrowType::Utf8 | ArrowType::LargeUtf8) => {
            ScalarValue::Utf8(Some(s.clone()))
        }
        Operand::Boolean(b) if ty == &ArrowType::Boolean => ScalarValue::Boolean(Some(*b)),
        Operand::Param(i) => {
            let v = params.get(*i)?;
            let from = v.data_type();
            let same_family = from == *ty
                || (from.is_integer() && ty.is_integer())
                || (matches!(
                    from,
                    ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
                ) && matches!(ty, ArrowType::Utf8 | ArrowType::LargeUtf8));
            if !same_family {
                return None;
            }
            v.clone()
        }
        _ => return None,
    };
    if value.is_null() {
        return None;
    }
    // Integers that do not fit the column's width fail the cast (no wrapping).
    let value = value.cast_to(ty).ok()?;
    (!value.is_null()).then_some(value)
}

/// Statements this long or longer are not remembered in [`shapes`].
const MAX_REMEMBERED_SQL: usize = 4096;

/// The shapes of statements seen to be point queries, by their text ([`describe_known`],
/// [`answer_known`]): a prepared statement's
/// GetFlightInfo and DoGet, called for every execution, skip parsing. The shape is a pure
/// function of the text (names are resolved against the caller's catalog afterwards), so one
/// process-wide map serves every tenant.
fn shapes() -> &'static moka::sync::Cache<String, Arc<Shape>> {
    static CACHE: std::sync::OnceLock<moka::sync::Cache<String, Arc<Shape>>> =
        std::sync::OnceLock::new();
    CACHE.get_or_init(|| moka::sync::Cache::new(4096))
}

/// The result and parameter schemas of `sql` if it was seen to be of a point query's shape
/// before and is a point query of the caller's table, without parsing it again.
pub(super) async fn describe_known(
    engine: &super::SqlEngine,
    session: &super::SqlSession,
    sql: &str,
) -> Result<Option<(SchemaRef, SchemaRef)>> {
    let Some(shape) = shapes().get(sql) else {
        return Ok(None);
    };
    Ok(PointQuery::resolve(engine, session, &shape)
        .await?
        .and_then(|point| Some((point.schema(), point.parameter_schema()?))))
}

/// `stmt` (the text `sql`) as a point query by primary key, if it is one.
pub(super) async fn query(
    engine: &super::SqlEngine,
    session: &super::SqlSession,
    sql: &str,
    stmt: &DFStatement,
) -> Result<Option<PointQuery>> {
    let Some(shape) = shape(stmt) else {
        return Ok(None);
    };
    let shape = Arc::new(shape);
    if sql.len() < MAX_REMEMBERED_SQL {
        shapes().insert(sql.to_string(), Arc::clone(&shape));
    }
    PointQuery::resolve(engine, session, &shape).await
}

/// The rows of a point query read directly (no planning), if `stmt` (the text `sql`) is one
/// whose key `params` complete exactly.
pub(super) async fn answer(
    engine: &super::SqlEngine,
    session: &super::SqlSession,
    sql: &str,
    stmt: &DFStatement,
    params: &[ScalarValue],
) -> Result<Option<super::SqlOutput>> {
    let Some(point) = query(engine, session, sql, stmt).await? else {
        return Ok(None);
    };
    answer_resolved(point, params).await
}

/// [`answer`] for a statement seen to be of a point query's shape before, without parsing it
/// again.
pub(super) async fn answer_known(
    engine: &super::SqlEngine,
    session: &super::SqlSession,
    sql: &str,
    params: &[ScalarValue],
) -> Result<Option<super::SqlOutput>> {
    let Some(shape) = shapes().get(sql) else {
        return Ok(None);
    };
    let Some(point) = PointQuery::resolve(engine, session, &shape).await? else {
        return Ok(None);
    };
    answer_resolved(point, params).await
}

async fn answer_resolved(
    point: PointQuery,
    params: &[ScalarValue],
) -> Result<Option<super::SqlOutput>> {
    let Some(batches) = point.run(params).await? else {
        return Ok(None);
    };
    crate::metrics::metrics().point_queries.inc();
    Ok(Some(super::SqlOutput {
        kind: super::StatementKind::Query,
        schema: point.schema(),
        stream: futures::stream::iter(batches.into_iter().map(Ok)).boxed(),
    }))
}

/// A point query checked against its table: what to read and how to answer.
#[derive(Debug)]
pub(crate) struct PointQuery {
    table: Table,
    /// `(column, output name)` in output order.
    columns: Vec<(String, String)>,
    /// `(column, value as written)` for every primary-key column.
    key: Vec<(String, Operand)>,
    schema: SchemaRef,
}

impl PointQuery {
    /// The point query `shape` names, if its table is a primary-key table it can read directly
    /// and its equalities are exactly its primary key; `None` leaves the query to DataFusion
    /// (which also reports any error in it).
    pub(crate) async fn resolve(
        engine: &super::SqlEngine,
        session: &super::SqlSession,
        shape: &Shape,
    ) -> Result<Option<Self>> {
        let Ok(id) = engine.identifier(session, &shape.table) else {
            return Ok(None);
        };
        let Ok(name) = parse_table_name(&id.table) else {
            return Ok(None);
        };
        if name.system.is_some() || name.selector != SnapshotSelector::Latest {
            return Ok(None);
        }
        let id = crate::catalog::Identifier::new(id.database.clone(), name.table);
        // A missing table or any other error: DataFusion reports it the way it always has.
        let Ok(table) = engine.catalog().load_table(&id).await else {
            return Ok(None);
        };
        let layout = table.layout()?;
        let schema = &layout.schema;
        if !layout.is_primary_key_table() {
            return Ok(None);
        }
        let mut keys: Vec<&str> = shape.equalities.iter().map(|(c, _)| c.as_str()).collect();
        keys.sort_unstable();
        let mut primary: Vec<&str> = schema.primary_keys.iter().map(String::as_str).collect();
        primary.sort_unstable();
        if keys != primary {
            return Ok(None);
        }
        let columns = match &shape.columns {
            None => schema
                .fields
                .iter()
                .map(|f| (f.name.clone(), f.name.clone()))
                .collect(),
            Some(columns) => columns.clone(),
        };
        // DataFusion refuses two outputs of one name; let it say so.
        let mut names: Vec<&str> = columns.iter().map(|(_, out)| out.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Ok(None);
        }
        let mut fields = Vec::with_capacity(columns.len());
        for (column, out) in &columns {
            let Ok(i) = layout.arrow_schema.index_of(column) else {
                return Ok(None);
            };
            fields.push(layout.arrow_schema.field(i).clone().with_name(out));
        }
        Ok(Some(Self {
            table,
            columns,
            key: shape.equalities.clone(),
            schema: Arc::new(Schema::new(fields)),
        }))
    }

    /// The result's schema (DataFusion's for the same query).
    pub(crate) fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The parameters (`$1`, ...) typed by the key columns they are compared with, as DataFusion
    /// infers them; `None` when a parameter number is skipped or used twice with two types.
    pub(crate) fn parameter_schema(&self) -> Option<SchemaRef> {
        let arrow = &self.table.layout().ok()?.arrow_schema;
        let mut params: Vec<(usize, ArrowType)> = Vec::new();
        for (column, operand) in &self.key {
            if let Operand::Param(i) = operand {
                let ty = arrow.field_with_name(column).ok()?.data_type().clone();
                match params.iter().find(|(j, _)| j == i) {
                    Some((_, t)) if *t != ty => return None,
                    Some(_) => {}
                    None => params.push((*i, ty)),
                }
            }
        }
        params.sort_by_key(|(i, _)| *i);
        if params.iter().enumerate().any(|(n, (i, _))| n != *i) {
            return None;
        }
        Some(Arc::new(Schema::new(
            params
                .into_iter()
                .map(|(i, t)| Field::new(format!("${}", i + 1), t, true))
                .collect::<Vec<_>>(),
        )))
    }

    /// Reads the row with the key `params` complete; `None` when a value is not one the fast
    /// path compares exactly (DataFusion then runs the query).
    pub(crate) async fn run(&self, params: &[ScalarValue]) -> Result<Option<Vec<RecordBatch>>> {
        let layout = self.table.layout()?;
        let schema = &layout.schema;
        let mut values: Vec<(String, ScalarValue, Datum)> = Vec::with_capacity(self.key.len());
        for (column, operand) in &self.key {
            let Some(field) = schema.field(column) else {
                return Ok(None);
            };
            let ty = field.data_type.to_arrow();
            let Some(value) = key_value(operand, &ty, params) else {
                return Ok(None);
            };
            let Some(datum) = scalar_to_datum(&value, &field.data_type) else {
                return Ok(None);
            };
            values.push((column.clone(), value, datum));
        }
        let datum_of = |name: &str| {
            values
                .iter()
                .find(|(c, _, _)| c == name)
                .map(|(_, _, d)| d.clone())
        };
        let partitions = schema
            .partition_keys
            .iter()
            .map(|p| datum_of(p).map(|d| (p.clone(), d)))
            .collect::<Option<Vec<_>>>();
        let bucket_key = layout
            .bucket_key_indices
            .iter()
            .map(|&i| datum_of(&schema.fields[i].name))
            .collect::<Option<Vec<_>>>();
        let (Some(partitions), Some(bucket_key)) = (partitions, bucket_key) else {
            return Ok(None);
        };
        let mut scan = self.table.new_scan().partition_filter(partitions);
        if !bucket_key.is_empty() {
            scan = scan.bucket_key(bucket_key);
        }
        if let Some(first) = layout
            .key_indices
            .first()
            .and_then(|&i| datum_of(&schema.fields[i].name))
        {
            scan = scan.key_range(Some((first.clone(), true)), Some((first, true)));
        }
        let plan = scan.plan().await?;
        // Read the output columns and the key columns (to keep only the key's row).
        let mut names: Vec<String> = self.columns.iter().map(|(c, _)| c.clone()).collect();
        for (c, _, _) in &values {
            if !names.contains(c) {
                names.push(c.clone());
            }
        }
        let read = self.table.new_read(Some(&names))?;
        let batches = read.collect(plan).await?;
        let mut out = Vec::new();
        for batch in batches {
            let mut keep: Option<BooleanArray> = None;
            for (c, value, _) in &values {
                let Some(col) = batch.column_by_name(c) else {
                    return Ok(None);
                };
                let eq = equal(col, value)?;
                keep = Some(match keep {
                    None => eq,
                    Some(k) => arrow::compute::and(&k, &eq).context(ArrowSnafu {
                        context: "matching a point query's key",
                    })?,
                });
            }
            let Some(keep) = keep else {
                return Ok(None);
            };
            if keep.true_count() == 0 {
                continue;
            }
            let kept = arrow::compute::filter_record_batch(&batch, &keep).context(ArrowSnafu {
                context: "keeping a point query's row",
            })?;
            let columns = (0..self.columns.len())
                .map(|i| Arc::clone(kept.column(i)))
                .collect::<Vec<ArrayRef>>();
            out.push(
                RecordBatch::try_new(self.schema(), columns).context(ArrowSnafu {
                    context: "building a point query's result",
                })?,
            );
        }
        Ok(Some(out))
    }
}

fn equal(col: &ArrayRef, value: &ScalarValue) -> Result<BooleanArray> {
    let value = value.to_array().map_err(|e| {
        crate::error::InternalSnafu {
            message: format!("point query key: {e}"),
        }
        .build()
    })?;
    arrow::compute::kernels::cmp::eq(col, &Scalar::new(value)).context(ArrowSnafu {
        context: "comparing a point query's key",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Option<Shape> {
        shape(&super::super::dialect::parse_one(sql).unwrap())
    }

    #[test]
    fn the_shape_is_select_from_where_key_equalities_only() {
        let s = parse("SELECT * FROM t WHERE id = 42").unwrap();
        assert_eq!(s.table.to_string(), "t");
        assert_eq!(s.columns, None);
        assert_eq!(
            s.equalities,
            vec![("id".into(), Operand::Number("42".into()))]
        );

        let s = parse("select A, t.b AS \"B\" FROM db.t WHERE (id = ?) AND 'x' = Name").unwrap();
        assert_eq!(
            s.columns,
            Some(vec![("a".into(), "a".into()), ("b".into(), "B".into())])
        );
        assert_eq!(
            s.equalities,
            vec![
                ("id".into(), Operand::Param(0)),
                ("name".into(), Operand::String("x".into()))
            ]
        );
        let s = parse("SELECT x.v FROM t AS x WHERE x.id = -7 AND k = $2").unwrap();
        assert_eq!(
            s.equalities,
            vec![
                ("id".into(), Operand::Number("-7".into())),
                ("k".into(), Operand::Param(1))
            ]
        );
    }

    #[test]
    fn anything_beyond_the_shape_is_left_to_datafusion() {
        for sql in [
            "SELECT * FROM t",
            "SELECT DISTINCT * FROM t WHERE id = 1",
            "SELECT * FROM t WHERE id = 1 LIMIT 1",
            "SELECT * FROM t WHERE id = 1 ORDER BY v",
            "SELECT v FROM t WHERE id = 1 GROUP BY v",
            "SELECT * FROM t WHERE id = 1 OR id = 2",
            "SELECT * FROM t WHERE id > 1",
            "SELECT * FROM t WHERE id = 1 + 1",
            "SELECT * FROM t WHERE id = NULL",
            "SELECT * FROM t WHERE id = v",
            "SELECT * FROM t, u WHERE id = 1",
            "SELECT * FROM t JOIN u ON t.id = u.id WHERE id = 1",
            "SELECT * FROM t(1) WHERE id = 1",
            "SELECT * FROM t AS x (a, b) WHERE id = 1",
            "SELECT count(*) FROM t WHERE id = 1",
            "SELECT v + 1 FROM t WHERE id = 1",
            "SELECT u.v FROM t WHERE id = 1",
            "SELECT *, v FROM t WHERE id = 1",
            "WITH w AS (SELECT 1) SELECT * FROM t WHERE id = 1",
            "SELECT * FROM t WHERE id = 1 UNION SELECT * FROM t WHERE id = 2",
            "SELECT * FROM (SELECT * FROM t) WHERE id = 1",
            "SELECT * FROM t WHERE id = CAST(1 AS INT)",
            "SELECT * FROM t WHERE id = 1 AND id IN (1)",
            "INSERT INTO t VALUES (1)",
        ] {
            assert_eq!(parse(sql), None, "{sql}");
        }
    }

    #[test]
    fn key_values_are_exact_or_left_to_datafusion() {
        let n = |s: &str| Operand::Number(s.into());
        assert_eq!(
            key_value(&n("42"), &ArrowType::Int32, &[]),
            Some(ScalarValue::Int32(Some(42)))
        );
        // Out of the column's range, fractional, or of another kind: DataFusion decides.
        assert_eq!(key_value(&n("3000000000"), &ArrowType::Int32, &[]), None);
        assert_eq!(key_value(&n("1.5"), &ArrowType::Int64, &[]), None);
        assert_eq!(key_value(&n("1"), &ArrowType::Utf8, &[]), None);
        assert_eq!(key_value(&n("1e3"), &ArrowType::Float64, &[]), None);
        assert_eq!(
            key_value(&Operand::String("7".into()), &ArrowType::Int64, &[]),
            None
        );
        assert_eq!(
            key_value(&n("2.5"), &ArrowType::Float64, &[]),
            Some(ScalarValue::Float64(Some(2.5)))
        );
        let p = Operand::Param(0);
        assert_eq!(
            key_value(&p, &ArrowType::Int32, &[ScalarValue::Int64(Some(5))]),
            Some(ScalarValue::Int32(Some(5)))
        );
        assert_eq!(
            key_value(&p, &ArrowType::Int32, &[ScalarValue::Int64(Some(1 << 40))]),
            None
        );
        assert_eq!(
            key_value(&p, &ArrowType::Int64, &[ScalarValue::Float64(Some(5.0))]),
            None
        );
        assert_eq!(
            key_value(&p, &ArrowType::Int64, &[ScalarValue::Int64(None)]),
            None
        );
        assert_eq!(key_value(&Operand::Param(1), &ArrowType::Int64, &[]), None);
        assert_eq!(
            key_value(
                &p,
                &ArrowType::Utf8,
                &[ScalarValue::Utf8View(Some("a".into()))]
            ),
            Some(ScalarValue::Utf8(Some("a".into())))
        );
    }
}
