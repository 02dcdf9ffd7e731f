//! Comparisons of a column with a literal that the table scan applies itself (`WHERE v < 0.01
//! AND k > 500000`): DataFusion pushes a `FilterExec`'s conjuncts into the scan, the scan takes
//! those it decides exactly as DataFusion would, and the `FilterExec` goes (or keeps only the
//! others).
//!
//! - The test runs on the scan's output batches, after any merge, so it holds for every kind of
//!   table (a value column of a primary-key table is tested on the merged row, as the filter above
//!   did).
//! - Semantics are DataFusion's own: arrow's comparison kernels for integer, decimal, temporal and
//!   string columns (what DataFusion calls), and for floating-point columns the total order on values
//!   with `-0.0` read as `+0.0` (DataFusion normalizes both sides before the same kernels). That
//!   float test is one pass computing the order key of each value, where DataFusion scans the
//!   column for `-0.0` first and then compares.
//! - A null value (or a null literal) fails the test, as a null predicate drops the row.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, Scalar};
use arrow::buffer::BooleanBuffer;
use arrow::compute::filter_record_batch;
use arrow::compute::kernels::cmp;
use arrow::datatypes::{DataType, Float32Type, Float64Type, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::PhysicalExpr;
use snafu::ResultExt;

use crate::error::{internal, ArrowSnafu, Result};

/// `column <op> literal` over the scan's output, `op` one of `=`, `!=`, `<`, `<=`, `>`, `>=`.
#[derive(Debug, Clone)]
pub(crate) struct ColumnTest {
    column: usize,
    name: String,
    op: Operator,
    literal: ScalarValue,
}

impl std::fmt::Display for ColumnTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.name, self.op, self.literal)
    }
}

impl ColumnTest {
    /// The test `expr` is, over a scan yielding `schema`: a comparison of one of its primitive or
    /// string columns with a literal of the column's very type (either side); none for anything
    /// else.
    pub(crate) fn of(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<Self> {
        let binary = expr.downcast_ref::<BinaryExpr>()?;
        let (column, op, literal) = match (
            binary.left().downcast_ref::<Column>(),
            binary.right().downcast_ref::<Literal>(),
        ) {
            (Some(c), Some(l)) => (c, *binary.op(), l),
            _ => {
                let c = binary.right().downcast_ref::<Column>()?;
                let l = binary.left().downcast_ref::<Literal>()?;
                (c, binary.op().swap()?, l)
            }
        };
        if !matches!(
            op,
            Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
        ) {
            return None;
        }
        let field = schema.fields().get(column.index())?;
        let ty = field.data_type();
        let comparable = (ty.is_primitive() && !matches!(ty, DataType::Float16))
            || matches!(
                ty,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            );
        if field.name() != column.name() || !comparable || literal.value().data_type() != *ty {
            return None;
        }
        Some(ColumnTest {
            column: column.index(),
            name: column.name().to_string(),
            op,
            literal: literal.value().clone(),
        })
    }

    /// Which rows of `batch` pass (a null value does not).
    fn mask(&self, batch: &RecordBatch) -> Result<BooleanBuffer> {
        let values = batch
            .columns()
            .get(self.column)
            .ok_or_else(|| internal(format!("no column {} to test {self}", self.column)))?;
        let mistyped = || {
            internal(format!(
                "column {} is {}, not as tested by {self}",
                self.column,
                values.data_type()
            ))
        };
        let tested = match self.literal {
            ScalarValue::Float64(Some(l)) => Some(float_test(
                values
                    .as_primitive_opt::<Float64Type>()
                    .ok_or_else(mistyped)?
                    .values(),
                self.op,
                f64_key(l),
                |v| f64_key(*v),
            )),
            ScalarValue::Float32(Some(l)) => Some(float_test(
                values
                    .as_primitive_opt::<Float32Type>()
                    .ok_or_else(mistyped)?
                    .values(),
                self.op,
                f32_key(l),
                |v| f32_key(*v),
            )),
            _ if self.literal.is_null() => return Ok(BooleanBuffer::new_unset(batch.num_rows())),
            _ => None,
        };
        let passed = match tested {
            Some(bits) => bits,
            None => {
                let literal = Scalar::new(
                    self.literal
                        .to_array()
                        .map_err(|e| internal(format!("the literal of {self}: {e}")))?,
                );
                let result = compare(values, self.op, &literal).context(ArrowSnafu {
                    context: format!("testing {self}"),
                })?;
                let passed = result.values().clone();
                match result.nulls() {
                    Some(n) => &passed & n.inner(),
                    None => passed,
                }
            }
        };
        Ok(match values.nulls() {
            Some(n) => &passed & n.inner(),
            None => passed,
        })
    }
}

/// `batch` without the rows that fail any of `tests`. Once few rows are left, the batch is cut
/// to them before the next test, which then tests only those.
pub(crate) fn apply(tests: &[ColumnTest], batch: RecordBatch) -> Result<RecordBatch> {
    let cut = |batch: &RecordBatch, keep: BooleanBuffer| {
        filter_record_batch(batch, &BooleanArray::new(keep, None)).context(ArrowSnafu {
            context: "cutting a batch to the rows that passed the scan's tests",
        })
    };
    let mut batch = batch;
    let mut keep: Option<BooleanBuffer> = None;
    for test in tests {
        let passed = test.mask(&batch)?;
        let both = match keep.take() {
            Some(k) => &k & &passed,
            None => passed,
        };
        let kept = both.count_set_bits();
        if kept == 0 {
            return Ok(batch.slice(0, 0));
        }
        if kept == batch.num_rows() {
            continue;
        }
        if kept < batch.num_rows() / 8 {
            batch = cut(&batch, both)?;
        } else {
            keep = Some(both);
        }
    }
    match keep {
        Some(k) => cut(&batch, k),
        None => Ok(batch),
    }
}

/// Arrow's comparison kernel for `op`, as DataFusion applies it.
fn compare(
    values: &ArrayRef,
    op: Operator,
    literal: &Scalar<ArrayRef>,
) -> Result<BooleanArray, arrow::error::ArrowError> {
    match op {
        Operator::Eq => cmp::eq(values, literal),
        Operator::NotEq => cmp::neq(values, literal),
        Operator::Lt => cmp::lt(values, literal),
        Operator::LtEq => cmp::lt_eq(values, literal),
        Operator::Gt => cmp::gt(values, literal),
        _ => cmp::gt_eq(values, literal),
    }
}

/// `key(value) <op> literal` for each value: one pass, 64 rows to a word.
fn float_test<T, K: Ord + Copy>(
    values: &[T],
    op: Operator,
    literal: K,
    key: impl Fn(&T) -> K + Copy,
) -> BooleanBuffer {
    match op {
        Operator::Eq => words(values, |v| key(v) == literal),
        Operator::NotEq => words(values, |v| key(v) != literal),
        Operator::Lt => words(values, |v| key(v) < literal),
        Operator::LtEq => words(values, |v| key(v) <= literal),
        Operator::Gt => words(values, |v| key(v) > literal),
        _ => words(values, |v| key(v) >= literal),
    }
}

/// `test` of each value as a bitmap, built from whole words of 64 values (a loop of fixed length
/// with no bound check, which the compiler vectorizes).
fn words<T>(values: &[T], test: impl Fn(&T) -> bool) -> BooleanBuffer {
    let word = |chunk: &[T]| {
        chunk
            .iter()
            .enumerate()
            .fold(0u64, |w, (i, v)| w | (u64::from(test(v)) << i))
    };
    let chunks = values.chunks_exact(64);
    let tail = word(chunks.remainder());
    let mut bits: Vec<u64> = chunks.map(word).collect();
    bits.push(tail);
    BooleanBuffer::new(bits.into(), 0, values.len())
}

/// The key whose integer order is `f64::total_cmp`'s, with `-0.0` as `+0.0`. Pure.
fn f64_key(v: f64) -> i64 {
    let bits = v.to_bits() as i64;
    let bits = if bits == i64::MIN { 0 } else { bits };
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// [`f64_key`] for `f32`. Pure.
fn f32_key(v: f32) -> i32 {
    let bits = v.to_bits() as i32;
    let bits = if bits == i32::MIN { 0 } else { bits };
    bits ^ (((bits >> 31) as u32) >> 1) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Float64Array, Int32Array, Int64Array};
    use arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{binary, col, lit};

    const OPS: [Operator; 6] = [
        Operator::Eq,
        Operator::NotEq,
        Operator::Lt,
        Operator::LtEq,
        Operator::Gt,
        Operator::GtEq,
    ];

    /// Odd floats: both zeros, both infinities, NaNs of either sign and payload, nulls.
    fn floats() -> Vec<Option<f64>> {
        let mut v = vec![
            Some(0.0),
            Some(-0.0),
            Some(f64::INFINITY),
            Some(f64::NEG_INFINITY),
            Some(f64::NAN),
            Some(-f64::NAN),
            Some(f64::from_bits(0x7ff8_0000_0000_0001)),
            Some(f64::MIN_POSITIVE),
            Some(-f64::MIN_POSITIVE),
            Some(f64::MAX),
            Some(f64::MIN),
            None,
        ];
        let mut x = 5u64;
        for _ in 0..200 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            v.push(Some(((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 4.0));
        }
        v
    }

    /// Each test as the scan applies it against DataFusion's own evaluation of the same
    /// predicate, over `batch`, for each literal and operator, the literal on either side.
    fn check(batch: &RecordBatch, literals: &[ScalarValue]) {
        let schema = batch.schema();
        for literal in literals {
            for op in OPS {
                for literal_first in [false, true] {
                    let (l, r) = (col("x", &schema).unwrap(), lit(literal.clone()));
                    let (l, r) = if literal_first { (r, l) } else { (l, r) };
                    let op_written = if literal_first {
                        op.swap().unwrap()
                    } else {
                        op
                    };
                    let expr = binary(l, op_written, r, &schema).unwrap();
                    let test = ColumnTest::of(&expr, &schema).expect("a column test");
                    let kept = apply(std::slice::from_ref(&test), batch.clone()).unwrap();
                    let truth = expr
                        .evaluate(batch)
                        .unwrap()
                        .into_array(batch.num_rows())
                        .unwrap();
                    let truth = filter_record_batch(batch, truth.as_boolean()).unwrap();
                    assert_eq!(kept, truth, "{test}");
                }
            }
        }
    }

    #[test]
    fn float_tests_decide_as_datafusion_does() {
        let values = floats();
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, true)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Float64Array::from(values.clone()))])
                .unwrap();
        let literals: Vec<ScalarValue> = values
            .iter()
            .take(12)
            .chain([Some(0.01), Some(-1.5)].iter())
            .map(|v| ScalarValue::Float64(*v))
            .collect();
        check(&batch, &literals);

        let narrow: Vec<Option<f32>> = values.iter().map(|v| v.map(|v| v as f32)).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float32, true)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Float32Array::from(narrow.clone()))])
                .unwrap();
        let literals: Vec<ScalarValue> = narrow
            .iter()
            .take(12)
            .map(|v| ScalarValue::Float32(*v))
            .collect();
        check(&batch, &literals);
    }

    #[test]
    fn integer_tests_decide_as_datafusion_does() {
        let values: Vec<Option<i64>> = (-70..70)
            .map(|v| (v % 9 != 0).then_some(v * 3))
            .chain([Some(i64::MIN), Some(i64::MAX)])
            .collect();
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values))]).unwrap();
        let literals: Vec<ScalarValue> = [Some(0), Some(-3), Some(30), Some(i64::MIN), None]
            .into_iter()
            .map(ScalarValue::Int64)
            .collect();
        check(&batch, &literals);
    }

    #[test]
    fn string_tests_decide_as_datafusion_does() {
        let values = vec![
            Some("b"),
            None,
            Some(""),
            Some("ab"),
            Some("b "),
            Some("é"),
            Some("B"),
        ];
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Utf8, true)]));
        let column = Arc::new(arrow::array::StringArray::from(values.clone()));
        let batch = RecordBatch::try_new(schema, vec![column]).unwrap();
        let literals: Vec<ScalarValue> = values
            .iter()
            .map(|v| ScalarValue::Utf8(v.map(str::to_string)))
            .collect();
        check(&batch, &literals);
    }

    #[test]
    fn only_a_column_against_a_literal_of_its_type_is_taken() {
        let schema = Schema::new(vec![
            Field::new("x", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        let x = col("x", &schema).unwrap();
        let s = col("s", &schema).unwrap();
        let taken = |e: Arc<dyn PhysicalExpr>| ColumnTest::of(&e, &schema).is_some();
        let int = |v| lit(ScalarValue::Int32(Some(v)));
        assert!(taken(
            binary(Arc::clone(&x), Operator::Lt, int(3), &schema).unwrap()
        ));
        // Another literal type, another operator, another column type, two columns.
        let wide = lit(ScalarValue::Int64(Some(3)));
        assert!(!taken(Arc::new(BinaryExpr::new(
            Arc::clone(&x),
            Operator::Lt,
            wide
        ))));
        assert!(!taken(
            binary(Arc::clone(&x), Operator::Plus, int(3), &schema).unwrap()
        ));
        let text = lit(ScalarValue::LargeUtf8(Some("a".into())));
        assert!(!taken(Arc::new(BinaryExpr::new(s, Operator::Eq, text))));
        assert!(!taken(
            binary(Arc::clone(&x), Operator::Eq, x, &schema).unwrap()
        ));
        // Several tests: the rows that pass all.
        let batch = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![
                Arc::new(Int32Array::from(vec![1, 5, 9, 4])),
                Arc::new(arrow::array::StringArray::from(vec!["a", "b", "c", "d"])),
            ],
        )
        .unwrap();
        let x = col("x", &schema).unwrap();
        let tests = |of: &[(Operator, i32)]| -> Vec<ColumnTest> {
            of.iter()
                .map(|&(op, v)| {
                    let e = binary(Arc::clone(&x), op, int(v), &schema).unwrap();
                    ColumnTest::of(&e, &schema).unwrap()
                })
                .collect()
        };
        let kept = apply(&tests(&[(Operator::Gt, 2), (Operator::Lt, 9)]), batch).unwrap();
        assert_eq!(
            kept.column(1)
                .as_string::<i32>()
                .iter()
                .flatten()
                .collect::<Vec<_>>(),
            ["b", "d"]
        );
        // A first test that leaves few rows: the next tests only those.
        let many = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![
                Arc::new(Int32Array::from_iter_values(0..200)),
                Arc::new(arrow::array::StringArray::from_iter_values(
                    (0..200).map(|v| v.to_string()),
                )),
            ],
        )
        .unwrap();
        let few_left = tests(&[(Operator::Lt, 10), (Operator::Gt, 3), (Operator::NotEq, 7)]);
        let kept = apply(&few_left, many).unwrap();
        let values: Vec<i32> = kept
            .column(0)
            .as_primitive::<arrow::datatypes::Int32Type>()
            .values()
            .to_vec();
        assert_eq!(values, [4, 5, 6, 8, 9]);
    }
}
