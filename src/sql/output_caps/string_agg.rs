//! `string_agg` with its output capped. DataFusion's accumulators join each group's values with
//! the delimiter as rows arrive (or, with DISTINCT or ORDER BY, all at once when evaluated), and
//! the memory pool sees the joined strings only after a whole batch: one batch of rows with a long
//! delimiter (or one evaluation) could allocate gigabytes before anything stops it. The wrapper
//! counts what each group's result will hold (its values' bytes and one delimiter between each
//! two) before the inner accumulator sees the rows, and refuses a group past
//! [`MAX_FUNCTION_OUTPUT_BYTES`] with ResourceExhausted. With DISTINCT, repeated values count
//! each time they arrive (the count is an upper bound of the result).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, GenericListArray, OffsetSizeTrait};
use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::expr::{
    AggregateFunction, AggregateFunctionParams, WindowFunctionParams,
};
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, Expr, GroupsAccumulator,
    Operator, ReversedUDAF, SetMonotonicity, Signature, StatisticsArgs,
};
use datafusion::physical_expr::expressions::Literal;

use super::MAX_FUNCTION_OUTPUT_BYTES;

/// The name of the function this module caps.
pub(super) const NAME: &str = "string_agg";

/// `f` wrapped with its output cap, when it is `string_agg`.
pub(super) fn capped(f: &Arc<AggregateUDF>) -> Option<Arc<AggregateUDF>> {
    (f.name() == NAME).then(|| {
        Arc::new(AggregateUDF::new_from_impl(CappedStringAgg {
            inner: Arc::clone(f),
        }))
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CappedStringAgg {
    inner: Arc<AggregateUDF>,
}

/// The delimiter's length in bytes (a NULL delimiter is empty; DataFusion refuses any other
/// expression than a string literal, so anything else is left to it).
fn delimiter_len(args: &AccumulatorArgs<'_>) -> u128 {
    args.exprs
        .get(1)
        .and_then(|e| e.downcast_ref::<Literal>())
        .and_then(|l| l.value().try_as_str().map(|s| s.map_or(0, str::len)))
        .unwrap_or(0) as u128
}

/// The byte length of each row's string in `array` (`None` for a null), for string arrays and
/// for lists of strings (an ORDER BY or DISTINCT state: each element counts as a value).
fn value_lengths(array: &dyn Array) -> Vec<Vec<u128>> {
    fn strings(a: &dyn Array) -> Vec<Option<u128>> {
        match a.data_type() {
            DataType::Utf8 => a.as_string::<i32>().iter().map(len).collect(),
            DataType::LargeUtf8 => a.as_string::<i64>().iter().map(len).collect(),
            DataType::Utf8View => a.as_string_view().iter().map(len).collect(),
            _ => vec![None; a.len()],
        }
    }
    fn len(s: Option<&str>) -> Option<u128> {
        s.map(|s| s.len() as u128)
    }
    fn elements<O: OffsetSizeTrait>(list: &GenericListArray<O>) -> Vec<Vec<u128>> {
        (0..list.len())
            .map(|i| match list.is_null(i) {
                true => vec![],
                false => strings(list.value(i).as_ref())
                    .into_iter()
                    .flatten()
                    .collect(),
            })
            .collect()
    }
    match array.data_type() {
        DataType::List(_) => elements(array.as_list::<i32>()),
        DataType::LargeList(_) => elements(array.as_list::<i64>()),
        _ => strings(array)
            .into_iter()
            .map(|l| l.into_iter().collect())
            .collect(),
    }
}

/// What one group's result will hold so far (pure counting; see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Projected {
    bytes: u128,
    has_value: bool,
}

impl Projected {
    /// Adds a value of `len` bytes; refuses when the result would outgrow the cap.
    fn add(&mut self, len: u128, delimiter: u128) -> Result<()> {
        self.bytes += len + if self.has_value { delimiter } else { 0 };
        self.has_value = true;
        if self.bytes > MAX_FUNCTION_OUTPUT_BYTES {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{NAME} would produce a value of {} bytes or more (its values and delimiters so \
                 far), more than the limit of {MAX_FUNCTION_OUTPUT_BYTES} bytes per value",
                self.bytes
            )));
        }
        Ok(())
    }
}

/// Counts the rows of `values[0]` (kept by `filter`) into `groups[index(row)]`.
fn count_rows(
    values: &[ArrayRef],
    filter: Option<&BooleanArray>,
    delimiter: u128,
    mut group_of: impl FnMut(usize) -> usize,
    groups: &mut [Projected],
) -> Result<()> {
    let Some(first) = values.first() else {
        return Ok(());
    };
    for (row, lens) in value_lengths(first.as_ref()).into_iter().enumerate() {
        if filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
            continue;
        }
        let group = group_of(row);
        if let Some(g) = groups.get_mut(group) {
            for len in lens {
                g.add(len, delimiter)?;
            }
        }
    }
    Ok(())
}

struct CappedAccumulator {
    inner: Box<dyn Accumulator>,
    delimiter: u128,
    projected: Projected,
}

impl std::fmt::Debug for CappedAccumulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CappedAccumulator")
            .field("inner", &self.inner)
            .field("projected", &self.projected)
            .finish()
    }
}

#[warn(clippy::missing_trait_methods)]
impl Accumulator for CappedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let mut one = [self.projected];
        count_rows(values, None, self.delimiter, |_| 0, &mut one)?;
        self.projected = one[0];
        self.inner.update_batch(values)
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.inner.evaluate()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        // What is handed on is counted again where it is merged.
        self.projected = Projected::default();
        self.inner.state()
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let mut one = [self.projected];
        count_rows(states, None, self.delimiter, |_| 0, &mut one)?;
        self.projected = one[0];
        self.inner.merge_batch(states)
    }
    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)
    }
    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}

struct CappedGroups {
    inner: Box<dyn GroupsAccumulator>,
    delimiter: u128,
    projected: Vec<Projected>,
}

impl CappedGroups {
    fn count(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        if self.projected.len() < total_num_groups {
            self.projected
                .resize(total_num_groups, Projected::default());
        }
        count_rows(
            values,
            filter,
            self.delimiter,
            |row| group_indices.get(row).copied().unwrap_or(usize::MAX),
            &mut self.projected,
        )
    }
}

#[warn(clippy::missing_trait_methods)]
impl GroupsAccumulator for CappedGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.count(values, group_indices, opt_filter, total_num_groups)?;
        self.inner
            .update_batch(values, group_indices, opt_filter, total_num_groups)
    }
    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        emit_to.take_needed(&mut self.projected);
        self.inner.evaluate(emit_to)
    }
    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        emit_to.take_needed(&mut self.projected);
        self.inner.state(emit_to)
    }
    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.count(values, group_indices, None, total_num_groups)?;
        self.inner
            .merge_batch(values, group_indices, total_num_groups)
    }
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        // Each row becomes its own state: counted where the states are merged.
        self.inner.convert_to_state(values, opt_filter)
    }
    fn size(&self) -> usize {
        self.inner.size() + self.projected.capacity() * std::mem::size_of::<Projected>()
    }
}

#[warn(clippy::missing_trait_methods)]
impl AggregateUDFImpl for CappedStringAgg {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn schema_name(&self, p: &AggregateFunctionParams) -> Result<String> {
        self.inner.inner().schema_name(p)
    }
    fn human_display(&self, p: &AggregateFunctionParams) -> Result<String> {
        self.inner.inner().human_display(p)
    }
    fn window_function_schema_name(&self, p: &WindowFunctionParams) -> Result<String> {
        self.inner.inner().window_function_schema_name(p)
    }
    fn display_name(&self, p: &AggregateFunctionParams) -> Result<String> {
        self.inner.inner().display_name(p)
    }
    fn window_function_display_name(&self, p: &WindowFunctionParams) -> Result<String> {
        self.inner.inner().window_function_display_name(p)
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, t: &[DataType]) -> Result<DataType> {
        self.inner.inner().return_type(t)
    }
    fn return_field(&self, f: &[FieldRef]) -> Result<FieldRef> {
        self.inner.inner().return_field(f)
    }
    fn is_nullable(&self) -> bool {
        self.inner.inner().is_nullable()
    }
    fn accumulator(&self, args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CappedAccumulator {
            delimiter: delimiter_len(&args),
            inner: self.inner.inner().accumulator(args)?,
            projected: Projected::default(),
        }))
    }
    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        self.inner.inner().state_fields(args)
    }
    fn groups_accumulator_supported(&self, args: AccumulatorArgs<'_>) -> bool {
        self.inner.inner().groups_accumulator_supported(args)
    }
    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(CappedGroups {
            delimiter: delimiter_len(&args),
            inner: self.inner.inner().create_groups_accumulator(args)?,
            projected: Vec::new(),
        }))
    }
    fn create_sliding_accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CappedAccumulator {
            delimiter: delimiter_len(&args),
            inner: self.inner.inner().create_sliding_accumulator(args)?,
            projected: Projected::default(),
        }))
    }
    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> Result<Option<Arc<dyn AggregateUDFImpl>>> {
        // Re-wrapped, or the cap would be lost.
        let inner = Arc::clone(self.inner.inner()).with_beneficial_ordering(beneficial_ordering)?;
        Ok(inner.map(|i| {
            Arc::new(CappedStringAgg {
                inner: Arc::new(AggregateUDF::new_from_shared_impl(i)),
            }) as Arc<dyn AggregateUDFImpl>
        }))
    }
    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.inner().order_sensitivity()
    }
    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        self.inner.inner().simplify()
    }
    fn simplify_expr_op_literal(
        &self,
        f: &AggregateFunction,
        arg: &Expr,
        op: Operator,
        lit: &Expr,
        arg_is_left: bool,
    ) -> Result<Option<Expr>> {
        self.inner
            .inner()
            .simplify_expr_op_literal(f, arg, op, lit, arg_is_left)
    }
    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.inner().reverse_expr() {
            ReversedUDAF::Reversed(r) => capped(&r)
                .map(ReversedUDAF::Reversed)
                .unwrap_or(ReversedUDAF::Reversed(r)),
            other => other,
        }
    }
    fn coerce_types(&self, t: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.inner().coerce_types(t)
    }
    fn is_descending(&self) -> Option<bool> {
        self.inner.inner().is_descending()
    }
    fn value_from_stats(&self, a: &StatisticsArgs<'_>) -> Option<ScalarValue> {
        self.inner.inner().value_from_stats(a)
    }
    fn default_value(&self, t: &DataType) -> Result<ScalarValue> {
        self.inner.inner().default_value(t)
    }
    fn supports_null_handling_clause(&self) -> bool {
        self.inner.inner().supports_null_handling_clause()
    }
    fn supports_within_group_clause(&self) -> bool {
        self.inner.inner().supports_within_group_clause()
    }
    fn documentation(&self) -> Option<&Documentation> {
        self.inner.inner().documentation()
    }
    fn set_monotonicity(&self, t: &DataType) -> SetMonotonicity {
        self.inner.inner().set_monotonicity(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, ListBuilder, StringArray, StringBuilder};

    #[test]
    fn a_group_is_refused_once_its_values_and_delimiters_pass_the_cap() {
        let mut g = Projected::default();
        g.add(10, 1_000).unwrap();
        assert_eq!(g.bytes, 10, "no delimiter before the first value");
        g.add(5, 1_000).unwrap();
        assert_eq!(g.bytes, 1_015);
        let mut big = Projected::default();
        let err = (0..)
            .try_for_each(|_| big.add(0, 1 << 20))
            .unwrap_err()
            .to_string();
        assert!(err.contains("string_agg would produce"), "{err}");
        assert!(big.bytes > MAX_FUNCTION_OUTPUT_BYTES);
        assert!(big.bytes <= MAX_FUNCTION_OUTPUT_BYTES + (1 << 20));
    }

    #[test]
    fn rows_are_counted_per_group_with_nulls_and_filtered_rows_left_out() {
        let values: ArrayRef = Arc::new(StringArray::from(vec![
            Some("ab"),
            None,
            Some("cde"),
            Some("f"),
        ]));
        let filter = BooleanArray::from(vec![true, true, true, false]);
        let groups_of = [0, 0, 0, 1];
        let mut groups = vec![Projected::default(); 2];
        count_rows(&[values], Some(&filter), 2, |r| groups_of[r], &mut groups).unwrap();
        // "ab" + ", " + "cde"; the filtered "f" is not counted.
        assert_eq!(groups[0].bytes, 7);
        assert_eq!(groups[1], Projected::default());
        // A list state (ORDER BY or DISTINCT) counts each element; a row of other types nothing.
        let mut list = ListBuilder::new(StringBuilder::new());
        list.values().append_value("abc");
        list.values().append_null();
        list.values().append_value("de");
        list.append(true);
        list.append(false);
        let list: ArrayRef = Arc::new(list.finish());
        assert_eq!(value_lengths(list.as_ref()), vec![vec![3, 2], vec![]]);
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        assert_eq!(value_lengths(ints.as_ref()), vec![Vec::<u128>::new()]);
    }
}
