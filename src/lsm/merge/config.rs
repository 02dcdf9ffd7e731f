//! What a table's options say about merging records of one key: the engine, delete handling,
//! sequence fields, partial-update sequence groups and per-field aggregate functions. Built once per
//! schema and validated with Paimon's rules, so a table Paimon would reject is rejected here too.

use crate::error::{invalid_argument, Result};
use std::collections::BTreeMap;

use crate::spec::{CoreOptions, DataType, MergeEngine, TableSchema, TypeRoot};

/// An aggregate function by its Paimon name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunction {
    /// Primary-key columns: always the input.
    PrimaryKey,
    Sum,
    Product,
    Min,
    Max,
    LastValue,
    LastNonNullValue,
    FirstValue,
    FirstNonNullValue,
    ListAgg,
    BoolAnd,
    BoolOr,
}

/// Paimon's aggregate functions that tidelake does not implement: a table using one is refused as
/// Unsupported (a valid table tidelake cannot serve yet), not as a mistake.
const PAIMON_ONLY: &[&str] = &[
    "collect",
    "merge_map",
    "merge_map_with_keytime",
    "nested_update",
    "nested_partial_update",
    "hll_sketch",
    "theta_sketch",
    "rbm32",
    "rbm64",
];

impl AggFunction {
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name.trim() {
            "sum" => Self::Sum,
            "product" => Self::Product,
            "min" => Self::Min,
            "max" => Self::Max,
            "last_value" => Self::LastValue,
            "last_non_null_value" => Self::LastNonNullValue,
            "first_value" => Self::FirstValue,
            "first_non_null_value" | "first_not_null_value" => Self::FirstNonNullValue,
            "listagg" => Self::ListAgg,
            "bool_and" => Self::BoolAnd,
            "bool_or" => Self::BoolOr,
            "count" => return Err(invalid_argument(
                "aggregate function 'count' does not exist in Paimon (it was removed because it \
                            cannot be retracted correctly); use 'sum' over a column of 1s",
            )),
            other if PAIMON_ONLY.contains(&other) => {
                return crate::error::UnsupportedSnafu {
                    message: format!(
                        "Paimon's aggregate function '{other}' is not supported by tidelake yet"
                    ),
                }
                .fail()
            }
            other => {
                return Err(invalid_argument(format!(
                    "unknown aggregate function '{other}'"
                )))
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::PrimaryKey => "primary-key",
            Self::Sum => "sum",
            Self::Product => "product",
            Self::Min => "min",
            Self::Max => "max",
            Self::LastValue => "last_value",
            Self::LastNonNullValue => "last_non_null_value",
            Self::FirstValue => "first_value",
            Self::FirstNonNullValue => "first_non_null_value",
            Self::ListAgg => "listagg",
            Self::BoolAnd => "bool_and",
            Self::BoolOr => "bool_or",
        }
    }
}

/// One column's aggregate function and its options.
#[derive(Debug, Clone, PartialEq)]
pub struct AggSpec {
    pub function: AggFunction,
    /// `fields.<f>.ignore-retract`: retractions leave the value unchanged.
    pub ignore_retract: bool,
    /// `fields.<f>.list-agg-delimiter` (default `,`).
    pub delimiter: String,
    /// `fields.<f>.distinct` (listagg).
    pub distinct: bool,
}

fn numeric(ty: &DataType) -> bool {
    matches!(
        ty.root,
        TypeRoot::TinyInt
            | TypeRoot::SmallInt
            | TypeRoot::Int
            | TypeRoot::BigInt
            | TypeRoot::Float
            | TypeRoot::Double
            | TypeRoot::Decimal { .. }
    )
}

impl AggSpec {
    /// The type checks Paimon's aggregator factories make.
    pub fn validate(&self, field: &str, ty: &DataType) -> Result<()> {
        let t = ty.clone().with_nullable(true);
        match self.function {
            AggFunction::Sum if !numeric(ty) => {
                Err(invalid_argument(format!("Data type for sum column must be 'NumericType' but was '{t}'.")))
            }
            AggFunction::Product if !numeric(ty) => {
                Err(invalid_argument(format!("Data type for product column must be 'NumericType' but was '{t}'.")))
            }
            AggFunction::ListAgg if !MergeConfig::is_unbounded_string(ty) => Err(invalid_argument(format!(
                "Data type for list agg column '{field}' must be STRING (unbounded VARCHAR), but was '{t}'."
            ))),
            AggFunction::BoolAnd if ty.root != TypeRoot::Boolean => {
                Err(invalid_argument(format!("Data type for bool and column must be 'BooleanType' but was '{t}'.")))
            }
            AggFunction::BoolOr if ty.root != TypeRoot::Boolean => {
                Err(invalid_argument(format!("Data type for bool or column must be 'BooleanType' but was '{t}'.")))
            }
            _ => Ok(()),
        }
    }
}

/// A partial-update sequence group: `fields.<seq,...>.sequence-group = <field,...>`.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceGroup {
    /// Positions (in the table's columns) of the fields that order this group.
    pub sequence_fields: Vec<usize>,
    /// Positions of the fields the group protects.
    pub fields: Vec<usize>,
    /// Whether a -D newer than the group removes the whole row
    /// (`partial-update.remove-record-on-sequence-group` names one of its sequence fields).
    pub remove_record_on_delete: bool,
}

/// The merge configuration of one schema version.
#[derive(Debug, Clone)]
pub struct MergeConfig {
    pub engine: MergeEngine,
    pub ignore_delete: bool,
    /// Types of the table's columns, in schema order.
    pub types: Vec<DataType>,
    pub names: Vec<String>,
    /// `sequence.field` positions, compared before the sequence number.
    pub sequence_fields: Vec<usize>,
    pub sequence_descending: bool,
    /// `partial-update.remove-record-on-delete` / `aggregation.remove-record-on-delete`.
    pub remove_record_on_delete: bool,
    pub groups: Vec<SequenceGroup>,
    /// For each column: the sequence group protecting it, if any.
    pub group_of_field: Vec<Option<usize>>,
    /// For each column: its aggregate function (aggregation engine: every column; partial-update:
    /// only grouped columns with a configured function).
    pub aggregators: Vec<Option<AggSpec>>,
}

fn fail<T>(message: impl Into<String>) -> Result<T> {
    Err(invalid_argument(message))
}

/// A valid table that uses what tidelake does not implement yet.
fn unsupported<T>(message: impl Into<String>) -> Result<T> {
    crate::error::UnsupportedSnafu {
        message: message.into(),
    }
    .fail()
}

impl MergeConfig {
    pub fn from_schema(schema: &TableSchema) -> Result<Self> {
        let opts = CoreOptions::new(&schema.options);
        let engine = opts.merge_engine()?;
        let names: Vec<String> = schema.fields.iter().map(|f| f.name.clone()).collect();
        let types: Vec<DataType> = schema.fields.iter().map(|f| f.data_type.clone()).collect();
        let position = |name: &str| names.iter().position(|n| n == name);
        let pk: Vec<usize> = schema
            .primary_keys
            .iter()
            .filter_map(|k| position(k))
            .collect();
        let flag = |key: &str| {
            opts.get(key)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        };
        let ignore_delete = [
            "ignore-delete",
            "first-row.ignore-delete",
            "deduplicate.ignore-delete",
            "partial-update.ignore-delete",
        ]
        .iter()
        .any(|k| flag(k));

        let mut sequence_fields = Vec::new();
        for f in opts.sequence_fields() {
            let Some(p) = position(&f) else {
                return fail(format!(
                    "Sequence field: '{f}' can not be found in table schema."
                ));
            };
            if sequence_fields.contains(&p) {
                return fail(format!("Sequence field '{f}' is defined repeatedly."));
            }
            sequence_fields.push(p);
        }
        let sequence_descending = match opts.get("sequence.field.sort-order") {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("ascending") => false,
            Some(v) if v.eq_ignore_ascii_case("descending") => true,
            Some(v) => {
                return fail(format!(
                    "sequence.field.sort-order must be ascending or descending, got '{v}'"
                ))
            }
        };
        if engine == MergeEngine::FirstRow && !sequence_fields.is_empty() {
            return fail("Do not support use sequence field on FIRST_ROW merge engine.");
        }
        if let Some(&p) = sequence_fields.iter().find(|&&p| types[p].is_nested()) {
            return fail(format!(
                "Sequence field '{}' has the nested type {}; a sequence field is a number or a timestamp.",
                names[p], types[p]
            ));
        }
        if matches!(
            engine,
            MergeEngine::PartialUpdate | MergeEngine::Aggregation
        ) {
            if let Some(p) = (0..types.len()).find(|&p| types[p].is_nested()) {
                return unsupported(format!(
                    "the {} merge engine does not take nested columns yet in tidelake ('{}' is {}); \
                     deduplicate and first-row do",
                    engine.name(),
                    names[p],
                    types[p]
                ));
            }
        }

        // Every `fields.<name>.<option>` must name a column.
        let mut field_options: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut group_options: Vec<(String, String, String)> = Vec::new();
        for (k, v) in &schema.options {
            let Some(rest) = k.strip_prefix("fields.") else {
                continue;
            };
            if rest == "default-aggregate-function" {
                continue;
            }
            if let Some(seq) = rest.strip_suffix(".sequence-group") {
                group_options.push((k.clone(), seq.to_string(), v.clone()));
                continue;
            }
            let Some((field, option)) = rest.split_once('.') else {
                continue;
            };
            if position(field).is_none() {
                return fail(format!("Field {field} can not be found in table schema."));
            }
            field_options
                .entry(field.to_string())
                .or_default()
                .insert(option.to_string(), v.clone());
        }
        let default_function = opts
            .get("fields.default-aggregate-function")
            .map(str::to_string);
        let spec_for = |i: usize, function: AggFunction| -> Result<AggSpec> {
            let o = field_options.get(&names[i]);
            let get = |k: &str| o.and_then(|m| m.get(k)).map(String::as_str);
            let spec = AggSpec {
                function,
                ignore_retract: get("ignore-retract")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                delimiter: get("list-agg-delimiter").unwrap_or(",").to_string(),
                distinct: get("distinct").is_some_and(|v| v.eq_ignore_ascii_case("true")),
            };
            spec.validate(&names[i], &types[i])?;
            Ok(spec)
        };
        let named_function = |i: usize| -> Option<String> {
            field_options
                .get(&names[i])
                .and_then(|m| m.get("aggregate-function"))
                .cloned()
                .or_else(|| default_function.clone())
        };

        let mut groups = Vec::new();
        let mut group_of_field = vec![None; names.len()];
        let mut aggregators: Vec<Option<AggSpec>> = vec![None; names.len()];
        let mut remove_record_on_delete = false;
        match engine {
            MergeEngine::PartialUpdate => {
                remove_record_on_delete = flag("partial-update.remove-record-on-delete");
                let remove_on_group: Vec<String> = opts
                    .get("partial-update.remove-record-on-sequence-group")
                    .map(|v| {
                        v.split(',')
                            .map(|s| s.trim().to_string())
                            .filter(|s| !s.is_empty())
                            .collect()
                    })
                    .unwrap_or_default();
                for (key, seq, protected) in &group_options {
                    let mut seq_pos = Vec::new();
                    let mut fields = Vec::new();
                    for (list, out) in [
                        (seq.as_str(), &mut seq_pos),
                        (protected.as_str(), &mut fields),
                    ] {
                        for f in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                            let Some(p) = position(f) else {
                                return fail(format!("Field {f} can not be found in table schema"));
                            };
                            if pk.contains(&p) {
                                return fail(format!(
                                    "The sequence-group '{key}' contains primary key field '{f}', which is not allowed. \
                                     Primary key columns cannot be put in sequence-group."
                                ));
                            }
                            out.push(p);
                        }
                    }
                    let g = groups.len();
                    for &p in seq_pos.iter().chain(&fields) {
                        if let Some(other) = group_of_field[p] {
                            if other != g {
                                return fail(format!(
                                    "Field {} is defined repeatedly by multiple groups: {key}",
                                    names[p]
                                ));
                            }
                        }
                        group_of_field[p] = Some(g);
                    }
                    let remove = seq_pos.iter().any(|&p| remove_on_group.contains(&names[p]));
                    groups.push(SequenceGroup {
                        sequence_fields: seq_pos,
                        fields,
                        remove_record_on_delete: remove,
                    });
                }
                for f in &remove_on_group {
                    let in_group = groups
                        .iter()
                        .any(|g| g.sequence_fields.iter().any(|&p| names[p] == *f));
                    if !in_group {
                        return fail(format!(
                            "field '{f}' defined in 'partial-update.remove-record-on-sequence-group' option must be part of sequence groups"
                        ));
                    }
                }
                let conflict = |a: &str, b: &str| {
                    format!("{a} and {b} have conflicting behavior so should not be enabled at the same time.")
                };
                if ignore_delete && remove_record_on_delete {
                    return fail(conflict(
                        "ignore-delete",
                        "partial-update.remove-record-on-delete",
                    ));
                }
                if ignore_delete && !remove_on_group.is_empty() {
                    return fail(conflict(
                        "ignore-delete",
                        "partial-update.remove-record-on-sequence-group",
                    ));
                }
                if !groups.is_empty() && remove_record_on_delete {
                    return fail(conflict(
                        "sequence-group",
                        "partial-update.remove-record-on-delete",
                    ));
                }
                for i in 0..names.len() {
                    let is_group_seq = groups.iter().any(|g| g.sequence_fields.contains(&i));
                    if is_group_seq || pk.contains(&i) {
                        continue;
                    }
                    let Some(name) = named_function(i) else {
                        continue;
                    };
                    let function = AggFunction::parse(&name)?;
                    if function != AggFunction::LastNonNullValue && group_of_field[i].is_none() {
                        return fail(format!(
                            "Must use sequence group for aggregation functions but not found for field {}.",
                            names[i]
                        ));
                    }
                    // Aggregators only act when sequence groups exist (Paimon ignores them otherwise).
                    if !groups.is_empty() {
                        aggregators[i] = Some(spec_for(i, function)?);
                    }
                }
            }
            MergeEngine::Aggregation => {
                remove_record_on_delete = flag("aggregation.remove-record-on-delete");
                for i in 0..names.len() {
                    let function = if sequence_fields.contains(&i) {
                        if field_options
                            .get(&names[i])
                            .is_some_and(|m| m.contains_key("aggregate-function"))
                        {
                            return fail(format!(
                                "Should not define aggregation on sequence field: '{}'.",
                                names[i]
                            ));
                        }
                        AggFunction::LastValue
                    } else if pk.contains(&i) {
                        AggFunction::PrimaryKey
                    } else {
                        match named_function(i) {
                            Some(n) => AggFunction::parse(&n)?,
                            None => AggFunction::LastNonNullValue,
                        }
                    };
                    let spec = spec_for(i, function)?;
                    if remove_record_on_delete && spec.ignore_retract {
                        return fail(format!(
                            "aggregation.remove-record-on-delete and fields.{}.ignore-retract have conflicting behavior so should not be enabled at the same time.",
                            names[i]
                        ));
                    }
                    aggregators[i] = Some(spec);
                }
            }
            MergeEngine::Deduplicate | MergeEngine::FirstRow => {}
        }
        Ok(Self {
            engine,
            ignore_delete,
            types,
            names,
            sequence_fields,
            sequence_descending,
            remove_record_on_delete,
            groups,
            group_of_field,
            aggregators,
        })
    }

    /// Whether merging needs every value column (projection cannot be pushed into the merge).
    pub fn needs_all_columns(&self) -> bool {
        matches!(
            self.engine,
            MergeEngine::PartialUpdate | MergeEngine::Aggregation
        )
    }

    pub(crate) fn is_unbounded_string(ty: &DataType) -> bool {
        matches!(ty.root, TypeRoot::VarChar(crate::spec::types::MAX_LENGTH))
    }
}
