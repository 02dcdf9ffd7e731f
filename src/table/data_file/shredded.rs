//! Shredded VARIANT columns (the Parquet variant shredding layout pypaimon writes under
//! `variant.shreddingSchema`, as do Java Paimon and Spark): a `struct<metadata, value,
//! typed_value>` whose object keys may sit in typed columns of their own. A read gives the
//! unshredded form, `struct<value, metadata>`, the same bytes' meaning as if nothing had been
//! shredded; the rebuilding itself is arrow-rs's `unshred_variant`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, StructArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Fields, TimeUnit};
use parquet_variant_compute::{unshred_variant, VariantArray};

/// Whether a file's column has the shredded layout: a struct with `metadata` and `typed_value`
/// (writers put no annotation on it; the names are the mark, as pypaimon's reader takes them).
pub(crate) fn is_shredded(ty: &DataType) -> bool {
    matches!(ty, DataType::Struct(f)
        if f.find("metadata").is_some() && f.find("typed_value").is_some())
}

/// The unshredded form of the shredded column `column`, in `target`'s struct fields (`value`
/// and `metadata`, both binary). A row whose value and typed value are both missing is the
/// variant null (`00`); a NULL row stays NULL.
pub(crate) fn unshred(column: &ArrayRef, target: &Fields) -> Result<ArrayRef, String> {
    let spec = spec_units(column.data_type());
    let column = if &spec == column.data_type() {
        Arc::clone(column)
    } else {
        cast(column, &spec).map_err(|e| format!("shredded VARIANT: {e}"))?
    };
    let variants =
        VariantArray::try_new(column.as_ref()).map_err(|e| format!("shredded VARIANT: {e}"))?;
    let whole = unshred_variant(&variants).map_err(|e| format!("shredded VARIANT: {e}"))?;
    let whole: StructArray = whole.into_inner();
    let nulls = column.nulls().cloned();
    let part = |name: &str| -> Result<ArrayRef, String> {
        let c = whole
            .column_by_name(name)
            .ok_or_else(|| format!("shredded VARIANT: no {name} after unshredding"))?;
        cast(c, &DataType::Binary).map_err(|e| format!("shredded VARIANT: {e}"))
    };
    let value = part("value")?;
    let metadata = part("metadata")?;
    let value = {
        let value = value.as_binary::<i32>();
        let mut out = BinaryBuilder::with_capacity(value.len(), value.values().len());
        for i in 0..value.len() {
            match (
                nulls.as_ref().is_some_and(|n| n.is_null(i)),
                value.is_null(i),
            ) {
                (true, _) => out.append_null(),
                (false, true) => out.append_value([0u8]),
                (false, false) => out.append_value(value.value(i)),
            }
        }
        Arc::new(out.finish()) as ArrayRef
    };
    let columns = target
        .iter()
        .map(|f| match f.name().as_str() {
            "value" => Ok(Arc::clone(&value)),
            "metadata" => Ok(Arc::clone(&metadata)),
            other => Err(format!("shredded VARIANT: no field {other}")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    StructArray::try_new(target.clone(), columns, nulls)
        .map(|s| Arc::new(s) as ArrayRef)
        .map_err(|e| format!("shredded VARIANT: {e}"))
}

/// `ty` with the typed values the shredding spec does not allow but writers use (pypaimon's
/// `TIMESTAMP(0..3)` in seconds or milliseconds, `TIME` as milliseconds) in the spec's
/// microseconds, which hold them exactly (pure).
fn spec_units(ty: &DataType) -> DataType {
    match ty {
        DataType::Timestamp(TimeUnit::Second | TimeUnit::Millisecond, tz) => {
            DataType::Timestamp(TimeUnit::Microsecond, tz.clone())
        }
        DataType::Time32(_) => DataType::Time64(TimeUnit::Microsecond),
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| f.as_ref().clone().with_data_type(spec_units(f.data_type())))
                .collect::<Fields>(),
        ),
        DataType::List(f) => DataType::List(Arc::new(
            f.as_ref().clone().with_data_type(spec_units(f.data_type())),
        )),
        DataType::LargeList(f) => DataType::LargeList(Arc::new(
            f.as_ref().clone().with_data_type(spec_units(f.data_type())),
        )),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;

    /// A shredded column whose one key `at` is typed `at_type`.
    fn shredded_with(at_type: DataType) -> DataType {
        let key = DataType::Struct(Fields::from(vec![
            Field::new("value", DataType::Binary, true),
            Field::new("typed_value", at_type, true),
        ]));
        DataType::Struct(Fields::from(vec![
            Field::new("metadata", DataType::Binary, false),
            Field::new("value", DataType::Binary, true),
            Field::new(
                "typed_value",
                DataType::Struct(Fields::from(vec![Field::new("at", key, false)])),
                true,
            ),
        ]))
    }

    #[test]
    fn only_units_outside_the_spec_change() {
        let ms = shredded_with(DataType::Timestamp(TimeUnit::Millisecond, None));
        let us = shredded_with(DataType::Timestamp(TimeUnit::Microsecond, None));
        assert!(is_shredded(&ms));
        assert_eq!(spec_units(&ms), us);
        assert_eq!(spec_units(&us), us);
        let time = shredded_with(DataType::Time32(TimeUnit::Millisecond));
        assert_eq!(
            spec_units(&time),
            shredded_with(DataType::Time64(TimeUnit::Microsecond))
        );
        let plain = DataType::Struct(crate::spec::types::variant_fields());
        assert!(!is_shredded(&plain));
        assert_eq!(spec_units(&plain), plain);
    }
}
