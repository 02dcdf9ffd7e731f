//! The inventory of DataFusion's functions: besides the ones [`super::CAPPED`] and
//! [`super::TYPE_SIZED`] wrap, every function the session registers is listed here with why its
//! output cannot outgrow its input, or in [`NOT_YET_CAPPED`] with why it can. The test below fails
//! on a registered function in none of the lists, so a DataFusion upgrade that adds one is
//! classified before it ships.

/// Scalar functions whose output is bounded by their input: fixed-size results, a choice among
/// or a part of their arguments, element-wise arithmetic, a constant factor of their input
/// (case mapping, hex, base64, number formatting) or the sum of their arguments (concat,
/// make_array, array_concat). `regexp_match` returns one match's groups, whose number the regex
/// compiler's size limit bounds. `array_transform` calls a lambda whose own functions are capped.
pub(super) const BOUNDED_BY_INPUT: &[&str] = &[
    // core
    "nullif",
    "nvl",
    "nvl2",
    "coalesce",
    "greatest",
    "least",
    "overlay",
    "arrow_typeof",
    "arrow_field",
    "arrow_metadata",
    "with_metadata",
    "named_struct",
    "struct",
    "get_field",
    "union_extract",
    "union_tag",
    "version",
    "input_file_name",
    "file_row_index",
    // strings
    "ascii",
    "bit_length",
    "btrim",
    "chr",
    "concat",
    "ends_with",
    "levenshtein",
    "lower",
    "ltrim",
    "octet_length",
    "rtrim",
    "split_part",
    "starts_with",
    "to_hex",
    "upper",
    "uuid",
    "contains",
    "character_length",
    "find_in_set",
    "initcap",
    "left",
    "reverse",
    "right",
    "strpos",
    "substr",
    "substr_index",
    "translate",
    // regular expressions
    "regexp_count",
    "regexp_match",
    "regexp_instr",
    "regexp_like",
    // dates and times
    "current_date",
    "current_time",
    "date_bin",
    "date_part",
    "date_trunc",
    "from_unixtime",
    "make_date",
    "make_time",
    "now",
    "to_char",
    "to_date",
    "to_local_time",
    "to_time",
    "to_unixtime",
    "to_timestamp",
    "to_timestamp_seconds",
    "to_timestamp_millis",
    "to_timestamp_micros",
    "to_timestamp_nanos",
    // math
    "abs",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cbrt",
    "ceil",
    "cos",
    "cosh",
    "cot",
    "degrees",
    "exp",
    "factorial",
    "floor",
    "gcd",
    "isnan",
    "iszero",
    "lcm",
    "ln",
    "log",
    "log2",
    "log10",
    "nanvl",
    "pi",
    "power",
    "radians",
    "random",
    "signum",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "round",
    "trunc",
    // encoding and hashes
    "encode",
    "decode",
    "digest",
    "md5",
    "sha224",
    "sha256",
    "sha384",
    "sha512",
    // arrays and maps
    "array_compact",
    "string_to_array",
    "array_dims",
    "cardinality",
    "array_ndims",
    "array_append",
    "array_prepend",
    "array_concat",
    "array_except",
    "array_element",
    "array_pop_back",
    "array_pop_front",
    "array_slice",
    "array_any_value",
    "make_array",
    "array_has",
    "array_has_all",
    "array_has_any",
    "empty",
    "array_length",
    "array_normalize",
    "array_add",
    "array_avg",
    "array_product",
    "array_scale",
    "array_subtract",
    "array_sum",
    "cosine_distance",
    "inner_product",
    "array_distance",
    "flatten",
    "array_max",
    "array_min",
    "array_sort",
    "array_reverse",
    "array_distinct",
    "array_intersect",
    "array_union",
    "arrays_zip",
    "array_position",
    "array_positions",
    "array_remove",
    "array_remove_all",
    "array_remove_n",
    "map",
    "map_entries",
    "map_extract",
    "map_keys",
    "map_values",
    // higher-order
    "array_any_match",
    "array_filter",
    "array_first",
    "array_transform",
];

/// Aggregates bounded by their input: fixed-size states, or states (array_agg, median,
/// percentiles) that DataFusion's memory pool accounts for.
pub(super) const BOUNDED_AGGREGATES: &[&str] = &[
    "any_value",
    "array_agg",
    "first_value",
    "last_value",
    "covar_samp",
    "covar_pop",
    "corr",
    "sum",
    "max",
    "min",
    "median",
    "count",
    "regr_slope",
    "regr_intercept",
    "regr_count",
    "regr_r2",
    "regr_avgx",
    "regr_avgy",
    "regr_sxx",
    "regr_syy",
    "regr_sxy",
    "var",
    "var_pop",
    "stddev",
    "stddev_pop",
    "approx_median",
    "approx_distinct",
    "approx_percentile_cont",
    "approx_percentile_cont_with_weight",
    "percentile_cont",
    "bit_and",
    "bit_or",
    "bit_xor",
    "bool_and",
    "bool_or",
    "avg",
    "grouping",
    "nth_value",
];

/// Window functions: each yields one value of its input (or a number) per row.
pub(super) const BOUNDED_WINDOWS: &[&str] = &[
    "cume_dist",
    "row_number",
    "lead",
    "lag",
    "rank",
    "dense_rank",
    "percent_rank",
    "ntile",
    "first_value",
    "last_value",
    "nth_value",
];

/// Table functions that produce their rows in batches as they are read: memory stays one batch,
/// and the statement timeout stops a long series.
pub(super) const STREAMED_TABLE_FUNCTIONS: &[&str] = &["generate_series", "range"];

/// Aggregates wrapped with a cap of their own (`super::string_agg`).
pub(super) const CAPPED_AGGREGATES: &[&str] = &[super::string_agg::NAME];

/// Functions whose output can outgrow their input and that are not capped yet, with why.
pub(super) const NOT_YET_CAPPED: &[(&str, &str)] = &[];

#[cfg(test)]
mod tests {
    use super::super::{cap_functions, CAPPED, TYPE_SIZED};
    use super::*;
    use datafusion::logical_expr::Volatility;

    /// Every function the session registers is classified: a DataFusion upgrade that adds one
    /// fails here until someone decides whether its output can outgrow its input.
    #[test]
    fn every_registered_function_is_classified() {
        use datafusion::execution::session_state::SessionStateBuilder;
        let mut builder = SessionStateBuilder::new().with_default_features();
        cap_functions(&mut builder);
        let state = builder.build();
        let mut unclassified = Vec::new();
        let known_scalar = |n: &str| {
            CAPPED.contains(&n)
                || TYPE_SIZED.contains(&n)
                || BOUNDED_BY_INPUT.contains(&n)
                || NOT_YET_CAPPED.iter().any(|(f, _)| *f == n)
        };
        for f in state.scalar_functions().values() {
            if !known_scalar(f.name()) {
                unclassified.push(format!("scalar {}", f.name()));
            }
            // Each capped function is the wrapped one (volatile, so never folded while planning).
            if CAPPED.contains(&f.name()) {
                assert_eq!(
                    f.signature().volatility,
                    Volatility::Volatile,
                    "{}",
                    f.name()
                );
            }
        }
        for f in state.higher_order_functions().values() {
            if !known_scalar(f.name()) {
                unclassified.push(format!("higher-order {}", f.name()));
            }
        }
        for f in state.aggregate_functions().values() {
            let n = f.name();
            if !BOUNDED_AGGREGATES.contains(&n)
                && !CAPPED_AGGREGATES.contains(&n)
                && !NOT_YET_CAPPED.iter().any(|(g, _)| *g == n)
            {
                unclassified.push(format!("aggregate {n}"));
            }
        }
        for f in state.window_functions().values() {
            if !BOUNDED_WINDOWS.contains(&f.name()) {
                unclassified.push(format!("window {}", f.name()));
            }
        }
        for f in state.table_functions().values() {
            if !STREAMED_TABLE_FUNCTIONS.contains(&f.name()) {
                unclassified.push(format!("table {}", f.name()));
            }
        }
        unclassified.sort();
        unclassified.dedup();
        assert!(
            unclassified.is_empty(),
            "functions neither capped nor known to be bounded by their input (add each to a \
             list in sql/output_caps/inventory.rs): {unclassified:?}"
        );
        // Every capped name is one the session has (a rename upstream would drop the cap).
        for n in CAPPED_AGGREGATES {
            assert!(
                state.aggregate_functions().contains_key(*n),
                "{n} is not registered"
            );
        }
        for n in CAPPED.iter().chain(TYPE_SIZED) {
            assert!(
                state.scalar_functions().contains_key(*n),
                "{n} is not registered"
            );
        }
    }
}
