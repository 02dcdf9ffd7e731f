//! Functions whose output size comes from an argument's *value* rather than from the size of
//! their input are wrapped: before the wrapped function allocates anything, the wrapper computes
//! how many bytes the call would produce for the whole batch and refuses more than
//! [`MAX_FUNCTION_OUTPUT_BYTES`] with ResourceExhausted. DataFusion sizes these outputs up front
//! and outside its memory pool, so without the cap `repeat('x', 1e9)` or `array_repeat(1, 1e9)`
//! takes gigabytes (or aborts the process), and a statement busy in one call cannot be stopped
//! by its timeout.
//!
//! `string_agg`, the one aggregate whose output can outgrow what the memory pool sees (a
//! delimiter per row), is wrapped by [`string_agg`]: each group's result is counted as rows
//! arrive.
//!
//! Which functions those are is decided per function over the list DataFusion registers, not by
//! hand: every registered function is in [`CAPPED`], in [`TYPE_SIZED`] (its output type comes
//! from an argument, and a fixed-size type that large is refused while planning), or in the
//! `inventory` of functions whose output is bounded by their input (fixed-size results,
//! substrings and rearrangements, element-wise arithmetic, sums of their arguments; aggregates
//! and windows whose state DataFusion's memory pool tracks; table functions that stream in
//! batches) or not capped yet, each with the reason. Its test fails on any function in none of
//! them, so a DataFusion upgrade that adds one is classified before it ships.
//!
//! The wrapped functions are volatile: they are never folded into a constant while planning
//! (planning stays cheap) and are evaluated per batch, where a constant result is counted once
//! per row it is broadcast to. Negative lengths, which mean the empty string, are clamped to 0
//! before the call (arrow's padding kernels would size a buffer from them).

use std::sync::Arc;

use arrow::array::{AsArray, Int64Array};
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

use bound::{check_type_width, output_bound};

mod bound;
mod string_agg;
// Only its test reads the inventory.
#[cfg(test)]
mod inventory;

/// Most bytes one call of a capped function may produce for one batch.
pub const MAX_FUNCTION_OUTPUT_BYTES: u128 = 64 * 1024 * 1024;

/// Functions whose output grows with an argument's value (a count, a length, a range's bounds) or
/// multiplies an argument (a replacement or separator per match or element); each has a bound in
/// [`output_bound`] checked before the call.
pub(crate) const CAPPED: &[&str] = &[
    "repeat",
    "lpad",
    "rpad",
    "replace",
    "regexp_replace",
    "concat_ws",
    "array_repeat",
    "array_resize",
    "array_replace",
    "array_replace_n",
    "array_replace_all",
    "array_to_string",
    "range",
    "generate_series",
];

/// Casts whose target type is an argument: a fixed-size type (`FixedSizeBinary(n)`,
/// `FixedSizeList(.., n)`) is allocated at its full width for every row, nulls included, so a
/// type wider than a batch's share of [`MAX_FUNCTION_OUTPUT_BYTES`] is refused while planning.
pub(crate) const TYPE_SIZED: &[&str] = &[
    "arrow_cast",
    "arrow_try_cast",
    "cast_to_type",
    "try_cast_to_type",
];

/// `f` wrapped with its output cap, when it is one of [`CAPPED`] or [`TYPE_SIZED`].
pub(crate) fn capped(f: &Arc<ScalarUDF>) -> Option<Arc<ScalarUDF>> {
    let name = f.name();
    (CAPPED.contains(&name) || TYPE_SIZED.contains(&name)).then(|| {
        let mut signature = f.signature().clone();
        // A cast is checked while planning and keeps its volatility (it becomes a plain CAST).
        if CAPPED.contains(&name) {
            signature.volatility = Volatility::Volatile;
        }
        Arc::new(ScalarUDF::new_from_impl(Capped {
            inner: Arc::clone(f),
            signature,
        }))
    })
}

/// The session's scalar functions with the capped ones in place of the originals.
pub(crate) fn cap_functions(
    builder: &mut datafusion::execution::session_state::SessionStateBuilder,
) {
    for f in builder.scalar_functions().iter_mut().flatten() {
        if let Some(capped) = capped(f) {
            *f = capped;
        }
    }
    for f in builder.aggregate_functions().iter_mut().flatten() {
        if let Some(capped) = string_agg::capped(f) {
            *f = capped;
        }
    }
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
        let field = self.inner.inner().return_field_from_args(a)?;
        let name = self.inner.name();
        if TYPE_SIZED.contains(&name) {
            check_type_width(name, field.data_type())?;
        }
        Ok(field)
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
