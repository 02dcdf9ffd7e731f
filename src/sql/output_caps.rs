//! Functions whose output size comes from an argument's *value* (`repeat(s, n)`, `lpad(s, n)`,
//! `rpad(s, n)`) or multiplies its input (`replace`, `regexp_replace`) are wrapped: before the
//! wrapped function allocates anything, the wrapper computes how many bytes the call would
//! produce for the whole batch and refuses more than [`MAX_FUNCTION_OUTPUT_BYTES`] with
//! ResourceExhausted. DataFusion sizes these outputs up front and outside its memory pool, so
//! without the cap `repeat('x', 1e9)` takes gigabytes (or aborts the process).
//!
//! The wrapped functions are volatile: they are never folded into a constant while planning
//! (planning stays cheap) and are evaluated per batch, where a constant result is counted once
//! per row it is broadcast to. Negative lengths, which mean the empty string, are clamped to 0
//! before the call (arrow's padding kernels would size a buffer from them).

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array};
use arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{ExprSchema, Result, ScalarValue};
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::preimage::PreimageResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExpressionPlacement, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, StructFieldMapping, Volatility,
};

/// Most bytes one call of a capped function may produce for one batch.
pub const MAX_FUNCTION_OUTPUT_BYTES: u128 = 64 * 1024 * 1024;

/// The functions wrapped.
pub(crate) const CAPPED: &[&str] = &["repeat", "lpad", "rpad", "replace", "regexp_replace"];

/// `f` wrapped with its output cap, when it is one of [`CAPPED`].
pub(crate) fn capped(f: &Arc<ScalarUDF>) -> Option<Arc<ScalarUDF>> {
    CAPPED.contains(&f.name()).then(|| {
        let mut signature = f.signature().clone();
        signature.volatility = Volatility::Volatile;
        Arc::new(ScalarUDF::new_from_impl(Capped {
            inner: Arc::clone(f),
            signature,
        }))
    })
}

/// A plain DataFusion context (for expressions outside statements, such as subscription
/// filters) with the capped functions in place of the originals.
pub fn capped_context() -> datafusion::prelude::SessionContext {
    let ctx = datafusion::prelude::SessionContext::new();
    let wrapped: Vec<_> = ctx
        .state()
        .scalar_functions()
        .values()
        .filter_map(capped)
        .collect();
    for f in wrapped {
        // Registering under an existing name replaces that function.
        ctx.register_udf(f.as_ref().clone());
    }
    ctx
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Capped {
    inner: Arc<ScalarUDF>,
    signature: Signature,
}

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

/// The most bytes `name(args)` produces over `rows` rows (exact for `repeat` and `replace`).
fn output_bound(name: &str, args: &[ColumnarValue], rows: usize) -> u128 {
    let all_scalar = args.iter().all(|v| matches!(v, ColumnarValue::Scalar(_)));
    let arg = |i: usize| args.get(i);
    let mut total: u128 = 0;
    for i in 0..if all_scalar { 1 } else { rows } {
        let s = arg(0).and_then(|v| str_at(v, i));
        let len = |x: Option<&str>| x.map_or(0, |x| x.len() as u128);
        total += match name {
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
            _ => 0,
        };
    }
    if all_scalar {
        // A constant result is broadcast to every row of the batch.
        total * rows.max(1) as u128
    } else {
        total
    }
}

/// `n` of `lpad`/`rpad` with negative lengths (which mean "") clamped to 0.
fn clamp_lengths(mut args: ScalarFunctionArgs) -> ScalarFunctionArgs {
    if let Some(n) = args.args.get_mut(1) {
        match n {
            ColumnarValue::Scalar(ScalarValue::Int64(Some(v))) if *v < 0 => *v = 0,
            ColumnarValue::Array(a) => {
                if let Some(ints) = a.as_primitive_opt::<Int64Type>() {
                    let clamped: Int64Array = ints.unary(|v| v.max(0));
                    *a = Arc::new(clamped);
                }
            }
            _ => {}
        }
    }
    args
}

#[warn(clippy::missing_trait_methods)]
impl ScalarUDFImpl for Capped {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    #[allow(deprecated)] // delegated as is
    fn display_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.inner().display_name(args)
    }
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.inner().schema_name(args)
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, t: &[DataType]) -> Result<DataType> {
        self.inner.inner().return_type(t)
    }
    fn return_field_from_args(&self, a: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        self.inner.inner().return_field_from_args(a)
    }
    #[allow(deprecated)] // delegated as is
    fn is_nullable(&self, a: &[Expr], s: &dyn ExprSchema) -> bool {
        self.inner.inner().is_nullable(a, s)
    }
    fn is_strict(&self) -> bool {
        self.inner.inner().is_strict()
    }
    fn with_updated_config(&self, c: &ConfigOptions) -> Option<ScalarUDF> {
        // Re-wrapped, or the cap would be lost.
        let updated = Arc::new(self.inner.inner().with_updated_config(c)?);
        capped(&updated).map(|f| f.as_ref().clone())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.inner.name();
        let args = if matches!(name, "lpad" | "rpad") {
            clamp_lengths(args)
        } else {
            args
        };
        let need = output_bound(name, &args.args, args.number_rows);
        if need > MAX_FUNCTION_OUTPUT_BYTES {
            return Err(datafusion::error::DataFusionError::ResourcesExhausted(
                format!(
                    "{name} would produce {need} bytes for {} rows, more than the limit of \
                 {MAX_FUNCTION_OUTPUT_BYTES} bytes per batch",
                    args.number_rows
                ),
            ));
        }
        self.inner.inner().invoke_with_args(args)
    }
    fn simplify(&self, a: Vec<Expr>, i: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.inner().simplify(a, i)
    }
    fn preimage(&self, a: &[Expr], l: &Expr, i: &SimplifyContext) -> Result<PreimageResult> {
        self.inner.inner().preimage(a, l, i)
    }
    fn short_circuits(&self) -> bool {
        self.inner.inner().short_circuits()
    }
    fn conditional_arguments<'a>(&self, a: &'a [Expr]) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.inner().conditional_arguments(a)
    }
    fn evaluate_bounds(&self, i: &[&Interval]) -> Result<Interval> {
        self.inner.inner().evaluate_bounds(i)
    }
    fn propagate_constraints(
        &self,
        i: &Interval,
        c: &[&Interval],
    ) -> Result<Option<Vec<Interval>>> {
        self.inner.inner().propagate_constraints(i, c)
    }
    fn output_ordering(&self, p: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.inner().output_ordering(p)
    }
    fn preserves_lex_ordering(&self, p: &[ExprProperties]) -> Result<bool> {
        self.inner.inner().preserves_lex_ordering(p)
    }
    fn strictly_order_preserving(&self, p: &[ExprProperties]) -> Result<bool> {
        self.inner.inner().strictly_order_preserving(p)
    }
    fn coerce_types(&self, t: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.inner().coerce_types(t)
    }
    fn struct_field_mapping(&self, l: &[Option<ScalarValue>]) -> Option<StructFieldMapping> {
        self.inner.inner().struct_field_mapping(l)
    }
    fn documentation(&self) -> Option<&Documentation> {
        self.inner.inner().documentation()
    }
    fn placement(&self, a: &[ExpressionPlacement]) -> ExpressionPlacement {
        self.inner.inner().placement(a)
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn negative_pad_lengths_are_clamped() {
        let counts = ColumnarValue::Array(Arc::new(Int64Array::from(vec![-3, 4])));
        let args = ScalarFunctionArgs {
            args: vec![s("a"), counts, s(" ")],
            arg_fields: vec![],
            number_rows: 2,
            return_field: Arc::new(arrow::datatypes::Field::new("x", DataType::Utf8, true)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        let out = clamp_lengths(args);
        let ColumnarValue::Array(a) = &out.args[1] else {
            panic!("an array")
        };
        assert_eq!(a.as_primitive::<Int64Type>().values().to_vec(), vec![0, 4]);
    }
}
