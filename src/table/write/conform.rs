//! Validation of what a writer is given: an input batch checked against the table's schema and
//! turned into the table's columns (with the lossless casts only) and the row kind of each row.
//! Pure: a batch that fails here has changed nothing.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int8Array, RecordBatch};
use arrow::compute::{cast, filter_record_batch};
use arrow::datatypes::DataType as ArrowType;
use snafu::ResultExt;

use crate::error::{invalid, ArrowSnafu, InvalidArgumentSnafu, Refusal, Result};
use crate::schema::layout::TableLayout;
use crate::spec::identifier::Identifier;
use crate::spec::{MergeEngine, RowKind};

/// Checks `batch` against the schema of `table`; returns it as the table's columns plus the row
/// kinds (none when every row is an insert). `row_kind_column` names an input-only column of
/// `+I`/`-U`/`+U`/`-D` strings.
pub(super) fn conform(
    layout: &TableLayout,
    table: &Identifier,
    row_kind_column: Option<&str>,
    batch: &RecordBatch,
) -> Result<(RecordBatch, Option<Int8Array>)> {
    let schema = &layout.schema;
    for f in batch.schema().fields() {
        let is_kind_col = row_kind_column == Some(f.name().as_str());
        if !is_kind_col && schema.field(f.name()).is_none() {
            return invalid!("table {table} has no column '{}'", f.name());
        }
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields.len());
    for (field, target) in schema.fields.iter().zip(layout.arrow_schema.fields()) {
        let col = match batch.column_by_name(&field.name) {
            Some(c) => conform_column(c, target.data_type())
                .map_err(|r| r.of(format_args!("table {table}, column '{}'", field.name)))?,
            None if field.data_type.nullable => {
                arrow::array::new_null_array(target.data_type(), batch.num_rows())
            }
            None => {
                return invalid!(
                    "table {table}: column '{}' is NOT NULL and missing from the input",
                    field.name
                )
            }
        };
        if !field.data_type.nullable && col.null_count() > 0 {
            let what = if schema.primary_keys.contains(&field.name) {
                "primary key column"
            } else {
                "NOT NULL column"
            };
            return invalid!(
                "table {table}: {what} '{}' has {} null value(s)",
                field.name,
                col.null_count()
            );
        }
        columns.push(col);
    }
    // The user's batch: Arrow's refusal is an InvalidArgument, not one of tidelake's invariants.
    let values = RecordBatch::try_new(Arc::clone(&layout.arrow_schema), columns).map_err(|e| {
        InvalidArgumentSnafu {
            message: format!("table {table}: input does not match the schema: {e}"),
        }
        .build()
    })?;

    let kind_col = match (row_kind_column, layout.rowkind_field_index) {
        (Some(name), _) => Some((name.to_string(), batch.column_by_name(name).cloned())),
        (None, Some(i)) => Some((
            schema.fields[i].name.clone(),
            Some(Arc::clone(values.column(i))),
        )),
        (None, None) => None,
    };
    let Some((name, col)) = kind_col else {
        return Ok((values, None));
    };
    let Some(col) = col else {
        return invalid!("table {table}: row-kind column '{name}' is missing from the input");
    };
    let kinds = row_kinds(&col, &name).map_err(|r| r.of(format_args!("table {table}")))?;
    let has_retract = kinds.iter().any(RowKind::is_retract);
    if has_retract && !layout.is_primary_key_table() {
        return invalid!("table {table} is an append table; it cannot take -U/-D rows");
    }
    if has_retract && layout.ignore_delete {
        let keep = BooleanArray::from(kinds.iter().map(|k| !k.is_retract()).collect::<Vec<_>>());
        let values = filter_record_batch(&values, &keep).context(ArrowSnafu {
            context: "dropping deletes",
        })?;
        let kinds: Vec<i8> = kinds
            .iter()
            .filter(|k| !k.is_retract())
            .map(|k| *k as i8)
            .collect();
        return Ok((values, Some(Int8Array::from(kinds))));
    }
    if has_retract && layout.merge_engine == MergeEngine::FirstRow {
        return invalid!("table {table} uses merge-engine first-row, which does not accept -U/-D rows (set 'ignore-delete' = 'true' to drop them)");
    }
    let kinds = Int8Array::from(kinds.iter().map(|k| *k as i8).collect::<Vec<_>>());
    Ok((values, Some(kinds)))
}

/// The row kinds the string column `name` spells; the error names the first row that spells none.
fn row_kinds(col: &ArrayRef, name: &str) -> std::result::Result<Vec<RowKind>, Refusal> {
    let strings = cast(col, &ArrowType::Utf8)
        .map_err(|_| Refusal(format!("row-kind column '{name}' must be a string column")))?;
    let strings = strings.as_string::<i32>();
    (0..strings.len())
        .map(|i| {
            let text = (!strings.is_null(i)).then(|| strings.value(i));
            text.and_then(RowKind::from_short_string).ok_or_else(|| {
                Refusal(format!(
                    "row {i} has row kind '{}' in column '{name}'; expected +I, -U, +U or -D",
                    text.unwrap_or("NULL")
                ))
            })
        })
        .collect()
}

/// Casts an input column to the table's type when that cannot lose information; anything else is
/// a schema mismatch.
pub(super) fn conform_column(
    col: &ArrayRef,
    target: &ArrowType,
) -> std::result::Result<ArrayRef, Refusal> {
    let from = col.data_type();
    if from == target {
        return Ok(Arc::clone(col));
    }
    if !lossless(from, target) {
        return Err(Refusal(format!(
            "has type {from}, the table expects {target}"
        )));
    }
    if let Some(why) = forbidden_nulls(col.as_ref(), target) {
        return Err(Refusal(why));
    }
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow::compute::cast_with_options(col, target, &options)
        .map_err(|e| Refusal(format!("cannot convert {from} to {target}: {e}")))
}

/// Whether every value of Arrow type `from` converts to `target` without loss. Nested types
/// convert element by element; the names of a list's item and a map's entries may differ (Arrow
/// writers call them `item` and `entries`, Paimon `element` and `key_value`), a struct's fields
/// must be the table's, in its order.
fn lossless(from: &ArrowType, target: &ArrowType) -> bool {
    use ArrowType::*;
    if from == target {
        return true;
    }
    match (from, target) {
        (Null, _) => true,
        (Int8, Int16 | Int32 | Int64) | (Int16, Int32 | Int64) | (Int32, Int64) => true,
        (UInt8, Int16 | Int32 | Int64) | (UInt16, Int32 | Int64) | (UInt32, Int64) => true,
        (Float32, Float64) => true,
        (Utf8View | LargeUtf8, Utf8) | (BinaryView | LargeBinary, Binary) => true,
        (Dictionary(_, v), t) => v.as_ref() == t,
        (Timestamp(_, a), Timestamp(_, b)) => a.is_some() == b.is_some(),
        (Decimal128(p, s), Decimal128(tp, ts)) => {
            s <= ts && (*p as i16 - *s as i16) <= (*tp as i16 - *ts as i16)
        }
        (Int8 | Int16 | Int32 | Int64, Decimal128(_, _)) => true,
        (List(a) | LargeList(a), List(b)) => lossless(a.data_type(), b.data_type()),
        (Map(a, _), Map(b, _)) => match (a.data_type(), b.data_type()) {
            (Struct(x), Struct(y)) if x.len() == 2 && y.len() == 2 => {
                lossless(x[0].data_type(), y[0].data_type())
                    && lossless(x[1].data_type(), y[1].data_type())
            }
            _ => false,
        },
        (Struct(x), Struct(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(a, b)| a.name() == b.name() && lossless(a.data_type(), b.data_type()))
        }
        _ => false,
    }
}

/// Why `col` cannot take the nested `target` type: a null where the target's item, key or field
/// is NOT NULL (checked before casting, which would refuse it less clearly).
fn forbidden_nulls(col: &dyn Array, target: &ArrowType) -> Option<String> {
    use ArrowType::*;
    let check = |child: &dyn Array, field: &arrow::datatypes::Field, what: &str| {
        if !field.is_nullable() && child.null_count() > 0 {
            return Some(format!(
                "a {what} is NULL where the table's type is NOT NULL"
            ));
        }
        forbidden_nulls(child, field.data_type())
    };
    // The part of a list's or map's children that this (perhaps sliced) column spans.
    fn spanned<O: arrow::array::OffsetSizeTrait>(
        offsets: &[O],
        child: &arrow::array::ArrayRef,
    ) -> arrow::array::ArrayRef {
        let (first, last) = (offsets[0].as_usize(), offsets[offsets.len() - 1].as_usize());
        child.slice(first, last - first)
    }
    match (target, col.data_type()) {
        (List(item), List(_) | LargeList(_)) => {
            let items = match col.as_list_opt::<i32>() {
                Some(list) => spanned(list.value_offsets(), list.values()),
                None => {
                    let list = col.as_list::<i64>();
                    spanned(list.value_offsets(), list.values())
                }
            };
            check(items.as_ref(), item, "list item")
        }
        (Map(entries, _), Map(..)) => {
            let Struct(kv) = entries.data_type() else {
                return None;
            };
            let map = col.as_map();
            let entries: arrow::array::ArrayRef = Arc::new(map.entries().clone());
            let entries = spanned(map.value_offsets(), &entries);
            let entries = entries.as_struct();
            check(entries.column(0).as_ref(), &kv[0], "map key")
                .or_else(|| check(entries.column(1).as_ref(), &kv[1], "map value"))
        }
        (Struct(fields), Struct(_)) => {
            let s = col.as_struct();
            fields.iter().zip(s.columns()).find_map(|(f, child)| {
                // A field's nulls under a NULL struct are not values.
                let masked = match (s.nulls(), child.nulls()) {
                    (Some(parent), Some(own)) => own
                        .inner()
                        .iter()
                        .zip(parent.inner().iter())
                        .any(|(v, p)| p && !v),
                    (None, Some(own)) => own.null_count() > 0,
                    _ => false,
                };
                if !f.is_nullable() && masked {
                    return Some(format!(
                        "struct field '{}' is NULL where the table's type is NOT NULL",
                        f.name()
                    ));
                }
                forbidden_nulls(child.as_ref(), f.data_type())
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    fn layout(options: &str) -> TableLayout {
        TableLayout::from_json(&format!(
            r#"{{"version":3,"id":0,"fields":[{{"id":0,"name":"id","type":"BIGINT NOT NULL"}},
            {{"id":1,"name":"v","type":"STRING"}}],"highestFieldId":1,"partitionKeys":[],
            "primaryKeys":["id"],"options":{{"bucket":"1"{options}}},"timeMillis":1}}"#
        ))
    }

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, c)| Field::new(*n, c.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, c)| c).collect(),
        )
        .unwrap()
    }

    fn t() -> Identifier {
        Identifier::new("db", "t")
    }

    fn ids(v: &[i32]) -> ArrayRef {
        Arc::new(Int32Array::from(v.to_vec()))
    }

    fn strings(v: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(v.to_vec()))
    }

    #[test]
    fn widens_losslessly_and_fills_a_missing_nullable_column_with_nulls() {
        let (values, kinds) =
            conform(&layout(""), &t(), None, &batch(vec![("id", ids(&[1, 2]))])).unwrap();
        assert!(kinds.is_none());
        assert_eq!(
            values
                .column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values(),
            &[1, 2]
        );
        assert_eq!(values.column(1).null_count(), 2);
    }

    #[test]
    fn refuses_narrowing_unknown_columns_missing_keys_and_null_keys_naming_the_column() {
        let l = layout("");
        let narrow = batch(vec![(
            "id",
            Arc::new(StringArray::from(vec!["1"])) as ArrayRef,
        )]);
        let e = conform(&l, &t(), None, &narrow).unwrap_err().to_string();
        assert!(
            e.contains("column 'id': has type Utf8, the table expects Int64"),
            "{e}"
        );
        let unknown = batch(vec![("id", ids(&[1])), ("w", ids(&[1]))]);
        let e = conform(&l, &t(), None, &unknown).unwrap_err().to_string();
        assert!(e.contains("table db.t has no column 'w'"), "{e}");
        let missing = batch(vec![("v", strings(&[Some("a")]))]);
        let e = conform(&l, &t(), None, &missing).unwrap_err().to_string();
        assert!(e.contains("'id' is NOT NULL and missing"), "{e}");
        let null_key = batch(vec![(
            "id",
            Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef,
        )]);
        let e = conform(&l, &t(), None, &null_key).unwrap_err().to_string();
        assert!(
            e.contains("primary key column 'id' has 1 null value(s)"),
            "{e}"
        );
    }

    #[test]
    fn reads_row_kinds_from_an_input_only_column_and_names_a_bad_row() {
        let l = layout("");
        let b = batch(vec![
            ("id", ids(&[1, 2])),
            ("op", strings(&[Some("+I"), Some("-D")])),
        ]);
        let (values, kinds) = conform(&l, &t(), Some("op"), &b).unwrap();
        assert_eq!(values.num_columns(), 2);
        assert_eq!(
            kinds.unwrap().values(),
            &[RowKind::Insert as i8, RowKind::Delete as i8]
        );
        let bad = batch(vec![
            ("id", ids(&[1, 2])),
            ("op", strings(&[Some("+I"), None])),
        ]);
        let e = conform(&l, &t(), Some("op"), &bad).unwrap_err().to_string();
        assert!(
            e.contains("row 1 has row kind 'NULL' in column 'op'; expected +I, -U, +U or -D"),
            "{e}"
        );
        let e = conform(&l, &t(), Some("op"), &batch(vec![("id", ids(&[1]))]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("row-kind column 'op' is missing"), "{e}");
    }

    #[test]
    fn ignore_delete_drops_retractions_and_first_row_refuses_them() {
        let b = batch(vec![
            ("id", ids(&[1, 2, 3])),
            ("op", strings(&[Some("+I"), Some("-D"), Some("+U")])),
        ]);
        let (values, kinds) =
            conform(&layout(r#","ignore-delete":"true""#), &t(), Some("op"), &b).unwrap();
        assert_eq!(values.num_rows(), 2);
        assert_eq!(kinds.unwrap().len(), 2);
        let e = conform(
            &layout(r#","merge-engine":"first-row""#),
            &t(),
            Some("op"),
            &b,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("first-row, which does not accept -U/-D rows"),
            "{e}"
        );
    }

    #[test]
    fn lossless_casts_only() {
        let i32s = ids(&[1]);
        assert!(conform_column(&i32s, &ArrowType::Int64).is_ok());
        assert!(conform_column(&i32s, &ArrowType::Int16).is_err());
        assert!(conform_column(&i32s, &ArrowType::Decimal128(12, 2)).is_ok());
        let d = Arc::new(
            arrow::array::Decimal128Array::from(vec![12345])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ) as ArrayRef;
        assert!(conform_column(&d, &ArrowType::Decimal128(12, 3)).is_ok());
        assert!(conform_column(&d, &ArrowType::Decimal128(10, 3)).is_err());
        let f = Arc::new(arrow::array::Float64Array::from(vec![1.5])) as ArrayRef;
        assert!(conform_column(&f, &ArrowType::Float32).is_err());
    }
}
