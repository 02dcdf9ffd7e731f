//! Reading DataFusion's logical expressions where tidelake acts on them: a filter's AND
//! conjuncts, comparisons of a column with a literal, and literals as Paimon datums. The table
//! scan turns these into partition, bucket and key-range pushdown (`super::provider`),
//! `$changelog` into snapshot bounds (`super::system::changelog`), point queries into key
//! lookups (`super::point`) and INSERT into static partition values (`super::dml`). Pure
//! functions over borrowed expressions; what they do not recognise they leave to DataFusion.

use arrow::array::Array;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use crate::spec::binary_row::Datum;
use crate::spec::datum::datum_at;

/// The conjuncts of `e` (`a AND (b AND c)` gives `a`, `b`, `c`), appended to `out`.
pub(crate) fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            split_and(left, out);
            split_and(right, out);
        }
        other => out.push(other),
    }
}

/// `col <op> literal` or `literal <op> col` (the operator flipped so the column is on the left).
pub(crate) fn column_op_literal(e: &Expr) -> Option<(&str, Operator, &ScalarValue)> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return None;
    };
    match (left.as_ref(), right.as_ref()) {
        (Expr::Column(c), Expr::Literal(v, _)) => Some((c.name.as_str(), *op, v)),
        (Expr::Literal(v, _), Expr::Column(c)) => Some((c.name.as_str(), op.swap()?, v)),
        _ => None,
    }
}

/// `value` as a datum of type `ty` (cast as DataFusion would), or `None` when it does not cast;
/// a null literal is [`Datum::Null`].
pub(crate) fn scalar_to_datum(value: &ScalarValue, ty: &crate::spec::DataType) -> Option<Datum> {
    let array = value.to_array().ok()?;
    let target = ty.to_arrow();
    let array = if array.data_type() == &target {
        array
    } else {
        arrow::compute::cast(&array, &target).ok()?
    };
    if array.is_null(0) {
        return Some(Datum::Null);
    }
    datum_at(array.as_ref(), 0, ty).ok()
}
