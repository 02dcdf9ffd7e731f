//! The bound of each capped function: the most bytes a call can produce for a batch, computed
//! from its arguments before the function runs (exact for `repeat`, `replace` and `range`,
//! an upper bound for the rest). Pure functions over the call's arguments.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ColumnarValue;

use super::MAX_FUNCTION_OUTPUT_BYTES;

fn str_at(v: &ColumnarValue, i: usize) -> Option<&str> {
    match v {
        ColumnarValue::Scalar(s) => s.try_as_str().flatten(),
        ColumnarValue::Array(a) if a.is_null(i) => None,
        ColumnarValue::Array(a) => match a.data_type() {
            DataType::Utf8 => Some(a.as_string::<i32>().value(i)),
            DataType::LargeUtf8 => Some(a.as_string::<i64>().value(i)),
            DataType::Utf8View => Some(a.as_string_view().value(i)),
            _ => None,
        },
    }
}

fn int_at(v: &ColumnarValue, i: usize) -> Option<i64> {
    match v {
        ColumnarValue::Scalar(ScalarValue::Int64(n)) => *n,
        ColumnarValue::Array(a) => a
            .as_primitive_opt::<Int64Type>()
            .and_then(|a| a.is_valid(i).then(|| a.value(i))),
        _ => None,
    }
}

/// Rows in a batch the width of a fixed-size type is counted for (DataFusion's default batch
/// size): a cast is refused while planning, before the batch size of its statement is known.
const TYPE_WIDTH_ROWS: u128 = 8192;

/// The bytes one row of `t` takes however it is filled (nulls included): the width of
/// fixed-size types, 8 bytes for the offsets of variable-size ones.
fn fixed_width(t: &DataType) -> u128 {
    match t {
        DataType::FixedSizeBinary(n) => (*n).max(0) as u128,
        DataType::FixedSizeList(f, n) => (*n).max(0) as u128 * fixed_width(f.data_type()),
        DataType::Struct(fields) => fields.iter().map(|f| fixed_width(f.data_type())).sum(),
        DataType::Union(fields, _) => {
            fields
                .iter()
                .map(|(_, f)| fixed_width(f.data_type()))
                .sum::<u128>()
                + 5
        }
        other => other.primitive_width().unwrap_or(8) as u128,
    }
}

/// ResourcesExhausted when a batch of `t` would take more than [`MAX_FUNCTION_OUTPUT_BYTES`].
pub(super) fn check_type_width(name: &str, t: &DataType) -> Result<()> {
    let need = fixed_width(t).saturating_mul(TYPE_WIDTH_ROWS);
    if need > MAX_FUNCTION_OUTPUT_BYTES {
        return Err(datafusion::error::DataFusionError::ResourcesExhausted(
            format!(
                "{name} to {t} would produce {need} bytes for {TYPE_WIDTH_ROWS} rows, more than \
             the limit of {MAX_FUNCTION_OUTPUT_BYTES} bytes per batch"
            ),
        ));
    }
    Ok(())
}

/// An argument as an array (a scalar as one row, converted once per call).
struct Column {
    array: ArrayRef,
    scalar: bool,
}

impl Column {
    fn of(v: &ColumnarValue) -> Option<Self> {
        Some(match v {
            ColumnarValue::Scalar(s) => Self {
                array: s.to_array().ok()?,
                scalar: true,
            },
            ColumnarValue::Array(a) => Self {
                array: Arc::clone(a),
                scalar: false,
            },
        })
    }

    /// Row `i` of the batch: the one value of a scalar, `None` when null or out of range.
    fn row(&self, i: usize) -> Option<usize> {
        let i = if self.scalar { 0 } else { i };
        (i < self.array.len() && self.array.is_valid(i)).then_some(i)
    }

    /// The bytes of row `i`.
    fn bytes(&self, i: usize) -> u128 {
        self.row(i).map_or(0, |i| {
            self.array
                .slice(i, 1)
                .to_data()
                .get_slice_memory_size()
                .map_or(u128::from(u64::MAX), |n| n as u128)
        })
    }

    /// The elements of the list at row `i`.
    fn list(&self, i: usize) -> Option<ArrayRef> {
        let i = self.row(i)?;
        let a = &self.array;
        match a.data_type() {
            DataType::List(_) => Some(a.as_list::<i32>().value(i)),
            DataType::LargeList(_) => Some(a.as_list::<i64>().value(i)),
            DataType::FixedSizeList(_, _) => Some(a.as_fixed_size_list().value(i)),
            _ => None,
        }
    }

    /// Row `i` as nanoseconds since the epoch (days of a date, units of a timestamp), or as the
    /// integer it is.
    fn instant(&self, i: usize) -> Option<i128> {
        use arrow::datatypes::TimeUnit;
        const DAY: i128 = 86_400_000_000_000;
        let i = self.row(i)?;
        let a = &self.array;
        let int = || -> Option<i128> {
            let c = arrow::compute::cast(&a.slice(i, 1), &DataType::Int64).ok()?;
            c.as_primitive_opt::<Int64Type>()
                .map(|c| i128::from(c.value(0)))
        };
        Some(match a.data_type() {
            DataType::Date32 => int()? * DAY,
            DataType::Date64 => int()? * 1_000_000,
            DataType::Timestamp(unit, _) => {
                int()?
                    * match unit {
                        TimeUnit::Second => 1_000_000_000,
                        TimeUnit::Millisecond => 1_000_000,
                        TimeUnit::Microsecond => 1_000,
                        TimeUnit::Nanosecond => 1,
                    }
            }
            DataType::Int64 => int()?,
            _ => return None,
        })
    }

    /// The shortest row `i` can be as a range's step, in the unit of [`Self::instant`]: an
    /// integer as it is; an interval at 28 days a month and 23 hours a day (a day is shorter
    /// across a time-zone change), and 1 ns when its parts have different signs (they may
    /// cancel out).
    fn shortest_step(&self, i: usize) -> Option<u128> {
        use arrow::datatypes::{IntervalMonthDayNanoType, IntervalUnit};
        const HOUR: u128 = 3_600_000_000_000;
        let i = self.row(i)?;
        let a = &self.array;
        match a.data_type() {
            DataType::Int64 => Some(u128::from(
                a.as_primitive::<Int64Type>().value(i).unsigned_abs(),
            )),
            DataType::Interval(IntervalUnit::MonthDayNano) => {
                let s = a.as_primitive::<IntervalMonthDayNanoType>().value(i);
                let parts = [
                    i128::from(s.months),
                    i128::from(s.days),
                    i128::from(s.nanoseconds),
                ];
                if !(parts.iter().all(|&p| p >= 0) || parts.iter().all(|&p| p <= 0)) {
                    return Some(1);
                }
                Some(
                    parts[0].unsigned_abs() * 28 * 23 * HOUR
                        + parts[1].unsigned_abs() * 23 * HOUR
                        + parts[2].unsigned_abs(),
                )
            }
            _ => None,
        }
    }
}

/// The number of values under `a`, nested lists flattened (as `array_to_string` writes them).
fn leaf_count(a: &dyn Array) -> u128 {
    match a.data_type() {
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            let o = l.value_offsets();
            let (start, end) = (o[0].max(0) as usize, o[l.len()].max(0) as usize);
            leaf_count(l.values().slice(start, end.saturating_sub(start)).as_ref())
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            let o = l.value_offsets();
            let (start, end) = (o[0].max(0) as usize, o[l.len()].max(0) as usize);
            leaf_count(l.values().slice(start, end.saturating_sub(start)).as_ref())
        }
        DataType::FixedSizeList(_, _) => {
            let l = a.as_fixed_size_list();
            (0..l.len()).map(|i| leaf_count(l.value(i).as_ref())).sum()
        }
        _ => a.len() as u128,
    }
}

/// The most elements `range` / `generate_series` makes for row `i` (start 0 and step 1 when
/// not given).
fn range_len(args: &[Column], i: usize) -> u128 {
    let (start, stop, step) = match args {
        [stop] => (Some(0), stop.instant(i), Some(1)),
        [start, stop] => (start.instant(i), stop.instant(i), Some(1)),
        [start, stop, step, ..] => (start.instant(i), stop.instant(i), step.shortest_step(i)),
        [] => return 0,
    };
    match (start, stop, step) {
        (Some(a), Some(b), Some(s)) => (a - b).unsigned_abs() / s.max(1) + 1,
        _ => 0,
    }
}

/// The most bytes `name(args)` produces over `rows` rows (exact for `repeat` and `replace`).
pub(super) fn output_bound(name: &str, args: &[ColumnarValue], rows: usize) -> u128 {
    let all_scalar = args.iter().all(|v| matches!(v, ColumnarValue::Scalar(_)));
    let arg = |i: usize| args.get(i);
    // The functions over lists and ranges read their arguments as arrays.
    let columns: Vec<Column> =
        if name.starts_with("array_") || name == "range" || name == "generate_series" {
            let columns: Option<Vec<Column>> = args.iter().map(Column::of).collect();
            columns.unwrap_or_default()
        } else {
            Vec::new()
        };
    let mut total: u128 = 0;
    for i in 0..if all_scalar { 1 } else { rows } {
        let s = arg(0).and_then(|v| str_at(v, i));
        let len = |x: Option<&str>| x.map_or(0, |x| x.len() as u128);
        let count = |k: usize| arg(k).and_then(|v| int_at(v, i)).unwrap_or(0).max(0) as u128;
        let bytes = |k: usize| columns.get(k).map_or(0, |c| c.bytes(i));
        let list = || columns.first().and_then(|c| c.list(i));
        let row = match name {
            "repeat" => match (s, arg(1).and_then(|v| int_at(v, i))) {
                (Some(s), Some(n)) => s.len() as u128 * n.max(0) as u128,
                _ => 0,
            },
            "lpad" | "rpad" => {
                // `n` characters, each at most as wide as the widest character of the fill
                // (or of the string, when it is cut), four bytes at most.
                let n = arg(1).and_then(|v| int_at(v, i)).unwrap_or(0).max(0) as u128;
                let fill = match arg(2) {
                    Some(v) => str_at(v, i),
                    None => Some(" "),
                };
                let widest = |x: Option<&str>| {
                    x.and_then(|x| x.chars().map(char::len_utf8).max())
                        .unwrap_or(1) as u128
                };
                n * widest(fill).max(widest(s))
            }
            "replace" => {
                let (from, to) = (
                    arg(1).and_then(|v| str_at(v, i)),
                    arg(2).and_then(|v| str_at(v, i)),
                );
                match (s, from, to) {
                    (Some(s), Some(f), Some(t)) if !f.is_empty() => {
                        let k = s.matches(f).count() as u128;
                        s.len() as u128 - k * f.len() as u128 + k * t.len() as u128
                    }
                    _ => len(s),
                }
            }
            "regexp_replace" => {
                // Each of at most len+1 matches becomes the replacement, whose group references
                // expand to at most the matched text: len + (2 len + 1) * |replacement|.
                let r = len(arg(2).and_then(|v| str_at(v, i)));
                len(s) + (2 * len(s) + 1) * r
            }
            "concat_ws" => {
                // The separator between every two of the other arguments.
                let rest: u128 = (1..args.len())
                    .map(|k| len(arg(k).and_then(|v| str_at(v, i))))
                    .sum();
                rest + len(s) * (args.len().saturating_sub(2) as u128)
            }
            // `count` copies of the element, each with its offset.
            "array_repeat" => count(1).saturating_mul(bytes(0).saturating_add(8)),
            // The list, then up to `size` copies of the fill value (or of an element's width).
            "array_resize" => {
                let fill = if args.len() > 2 { bytes(2) } else { 16 };
                bytes(0).saturating_add(count(1).saturating_mul(fill.max(16).saturating_add(8)))
            }
            // The list with up to `n` of its elements replaced by `to`.
            "array_replace" | "array_replace_n" | "array_replace_all" => {
                let n = match name {
                    "array_replace" => 1,
                    "array_replace_n" => count(3).min(list().map_or(0, |l| l.len() as u128)),
                    _ => list().map_or(0, |l| l.len() as u128),
                };
                bytes(0).saturating_add(n.saturating_mul(bytes(2).saturating_add(8)))
            }
            // Every value under the list, formatted (40 bytes at most for a number or a date,
            // a string as it is), each with the separator and the null text.
            "array_to_string" => {
                let leaves = list().map_or(0, |l| leaf_count(l.as_ref()));
                let sep = len(arg(1).and_then(|v| str_at(v, i)));
                let null = len(arg(2).and_then(|v| str_at(v, i)));
                bytes(0).saturating_add(leaves.saturating_mul(40 + sep + null))
            }
            // Eight bytes an element.
            "range" | "generate_series" => range_len(&columns, i).saturating_mul(8),
            _ => 0,
        };
        total = total.saturating_add(row);
    }
    if all_scalar {
        // A constant result is broadcast to every row of the batch.
        total.saturating_mul(rows.max(1) as u128)
    } else {
        total
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::Int64Array;

    use super::*;

    fn s(v: &str) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::Utf8(Some(v.to_string())))
    }
    fn n(v: i64) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::Int64(Some(v)))
    }

    #[test]
    fn bounds_follow_the_arguments() {
        assert_eq!(output_bound("repeat", &[s("ab"), n(3)], 1), 6);
        // A constant result is counted once per row it is broadcast to.
        assert_eq!(output_bound("repeat", &[s("ab"), n(3)], 8192), 6 * 8192);
        assert_eq!(output_bound("repeat", &[s("x"), n(-5)], 1), 0);
        assert_eq!(
            output_bound("repeat", &[s("x"), n(1_000_000_000)], 1),
            1_000_000_000
        );
        assert_eq!(output_bound("lpad", &[s("a"), n(10)], 1), 10);
        assert_eq!(output_bound("rpad", &[s("a"), n(10), s("é")], 1), 20);
        assert_eq!(
            output_bound("replace", &[s("aXbXc"), s("X"), s("123")], 1),
            9
        );
        assert!(output_bound("regexp_replace", &[s("abc"), s(""), s("zz")], 1) >= 3 + 4 * 2);
        let counts =
            ColumnarValue::Array(Arc::new(Int64Array::from(vec![Some(2), None, Some(-1)])));
        let strs = ColumnarValue::Array(Arc::new(arrow::array::StringArray::from(vec![
            "abc", "d", "e",
        ])));
        assert_eq!(output_bound("repeat", &[strs, counts], 3), 6);
    }

    fn list(values: Vec<i64>) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::List(Arc::new(
            arrow::array::ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(
                values.into_iter().map(Some).collect::<Vec<_>>(),
            )]),
        )))
    }

    #[test]
    fn list_and_range_bounds_follow_the_arguments() {
        let one = output_bound("array_repeat", &[n(1), n(3)], 1);
        assert!((3 * 8..=3 * 64).contains(&one), "{one}");
        assert!(
            output_bound("array_repeat", &[n(1), n(1_000_000_000)], 1) > MAX_FUNCTION_OUTPUT_BYTES
        );
        assert!(output_bound("array_repeat", &[s("x"), n(-3)], 1) == 0);
        assert!(
            output_bound("array_resize", &[list(vec![1, 2]), n(1_000_000_000)], 1)
                > MAX_FUNCTION_OUTPUT_BYTES
        );
        assert!(output_bound("array_resize", &[list(vec![1, 2]), n(4)], 1) < 1024);
        let big = s(&"x".repeat(1 << 20));
        let many = list((0..100).collect());
        assert!(
            output_bound("array_replace_all", &[many.clone(), n(1), big.clone()], 1) >= 100 << 20
        );
        assert!(output_bound("array_replace", &[many.clone(), n(1), big.clone()], 1) < 2 << 20);
        assert!(output_bound("array_to_string", &[many, big], 1) >= 99 << 20);
        assert_eq!(output_bound("range", &[n(0), n(10)], 1), 11 * 8);
        assert_eq!(
            output_bound("generate_series", &[n(1), n(10), n(3)], 1),
            4 * 8
        );
        assert!(output_bound("range", &[n(0), n(i64::MAX)], 1) > MAX_FUNCTION_OUTPUT_BYTES);
        let sep = s(&"-".repeat(1000));
        assert_eq!(
            output_bound("concat_ws", &[sep, s("a"), s("b"), s("c")], 1),
            2003
        );
    }

    #[test]
    fn fixed_size_types_are_sized_per_row() {
        use arrow::datatypes::Field;
        assert!(check_type_width("arrow_cast", &DataType::Int64).is_ok());
        assert!(check_type_width("arrow_cast", &DataType::FixedSizeBinary(16)).is_ok());
        let wide = DataType::FixedSizeBinary(2_000_000_000);
        let e = check_type_width("arrow_cast", &wide)
            .unwrap_err()
            .to_string();
        assert!(e.contains("arrow_cast") && e.contains("limit"), "{e}");
        let nested = DataType::FixedSizeList(
            Arc::new(Field::new("item", DataType::Int64, true)),
            1_000_000,
        );
        assert!(check_type_width("arrow_try_cast", &nested).is_err());
    }
}
