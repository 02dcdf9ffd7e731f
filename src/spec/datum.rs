//! Values of Paimon types moving between Arrow arrays and [`Datum`]s: reading one cell, writing
//! one BinaryRow field straight from an array, and building an array from values.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryBuilder, BooleanArray, BooleanBuilder,
    Date32Array, Date32Builder, Decimal128Array, Decimal128Builder, Float32Array, Float32Builder,
    Float64Array, Float64Builder, Int16Array, Int16Builder, Int32Array, Int32Builder, Int64Array,
    Int64Builder, Int8Array, Int8Builder, StringArray, StringBuilder, Time32MillisecondArray,
    Time32MillisecondBuilder, TimestampMicrosecondBuilder, TimestampMillisecondBuilder,
    TimestampNanosecondBuilder,
};
use arrow::datatypes::{
    DataType as ArrowType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};

use super::binary_row::{BinaryRowWriter, Datum};
use super::types::{DataType, TypeRoot};
use crate::error::{InvalidArgumentSnafu, Result};

/// Parses `text` as a value of Paimon type `ty` (as a SQL cast from a string would: `42`,
/// `2024-01-31`, `true`); used for `KEY=VALUE` partition arguments.
pub fn datum_from_text(text: &str, ty: &DataType) -> Result<Datum> {
    let input: ArrayRef = Arc::new(StringArray::from(vec![text]));
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let bad = |why: String| {
        InvalidArgumentSnafu {
            message: format!("'{text}' is not a valid {ty}: {why}"),
        }
        .build()
    };
    let cast = arrow::compute::cast_with_options(&input, &ty.to_arrow(), &options)
        .map_err(|e| bad(e.to_string()))?;
    datum_at(cast.as_ref(), 0, ty).map_err(|e| bad(e.to_string()))
}

/// Reads row `i` of `array` (of Paimon type `ty`) as a [`Datum`].
pub fn datum_at(array: &dyn Array, i: usize, ty: &DataType) -> Result<Datum> {
    if array.is_null(i) {
        return Ok(Datum::Null);
    }
    let mismatch = || {
        InvalidArgumentSnafu {
            message: format!(
                "column of Arrow type {} cannot hold Paimon type {ty}",
                array.data_type()
            ),
        }
        .build()
    };
    macro_rules! get {
        ($t:ty) => {
            array
                .as_any()
                .downcast_ref::<$t>()
                .ok_or_else(mismatch)?
                .value(i)
        };
    }
    Ok(match &ty.root {
        TypeRoot::Boolean => Datum::Boolean(get!(BooleanArray)),
        TypeRoot::TinyInt => Datum::TinyInt(get!(Int8Array)),
        TypeRoot::SmallInt => Datum::SmallInt(get!(Int16Array)),
        TypeRoot::Int => Datum::Int(get!(Int32Array)),
        TypeRoot::BigInt => Datum::BigInt(get!(Int64Array)),
        TypeRoot::Float => Datum::Float(get!(Float32Array)),
        TypeRoot::Double => Datum::Double(get!(Float64Array)),
        &TypeRoot::Decimal { precision, scale } => Datum::Decimal {
            unscaled: get!(Decimal128Array),
            precision,
            scale,
        },
        TypeRoot::Char(_) | TypeRoot::VarChar(_) => Datum::String(get!(StringArray).to_string()),
        TypeRoot::Binary(_) | TypeRoot::VarBinary(_) => Datum::Bytes(get!(BinaryArray).to_vec()),
        TypeRoot::Date => Datum::Date(get!(Date32Array)),
        TypeRoot::Time(_) => Datum::Time(get!(Time32MillisecondArray)),
        &TypeRoot::Timestamp(p) | &TypeRoot::LocalZonedTimestamp(p) => {
            let (millis, nanos) = match array.data_type() {
                ArrowType::Timestamp(TimeUnit::Second, _) => (
                    array.as_primitive::<TimestampSecondType>().value(i) * 1000,
                    0,
                ),
                ArrowType::Timestamp(TimeUnit::Millisecond, _) => {
                    (array.as_primitive::<TimestampMillisecondType>().value(i), 0)
                }
                ArrowType::Timestamp(TimeUnit::Microsecond, _) => {
                    let v = array.as_primitive::<TimestampMicrosecondType>().value(i);
                    (v.div_euclid(1000), (v.rem_euclid(1000) * 1000) as i32)
                }
                ArrowType::Timestamp(TimeUnit::Nanosecond, _) => {
                    let v = array.as_primitive::<TimestampNanosecondType>().value(i);
                    (v.div_euclid(1_000_000), v.rem_euclid(1_000_000) as i32)
                }
                _ => return Err(mismatch()),
            };
            Datum::Timestamp {
                millis,
                nanos,
                precision: p,
            }
        }
        TypeRoot::Array(_)
        | TypeRoot::Multiset(_)
        | TypeRoot::Map(..)
        | TypeRoot::Row(_)
        | TypeRoot::Variant
        | TypeRoot::Blob => {
            return InvalidArgumentSnafu {
                message: format!(
                "a value of the nested type {ty} cannot be a key, a partition value or a literal"
            ),
            }
            .fail()
        }
    })
}

/// Builds an array of Arrow type `ty` from values of the matching Paimon type.
pub fn datums_to_array(ty: &ArrowType, values: &[Datum]) -> Result<ArrayRef> {
    let bad = |d: &Datum| {
        InvalidArgumentSnafu {
            message: format!("value {d:?} does not fit Arrow type {ty}"),
        }
        .fail()
    };
    macro_rules! build {
        ($builder:expr, $pat:pat => $val:expr) => {{
            let mut b = $builder;
            for d in values {
                match d {
                    Datum::Null => b.append_null(),
                    $pat => b.append_value($val),
                    other => return bad(other),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    Ok(match ty {
        ArrowType::Boolean => build!(BooleanBuilder::new(), Datum::Boolean(v) => *v),
        ArrowType::Int8 => build!(Int8Builder::new(), Datum::TinyInt(v) => *v),
        ArrowType::Int16 => build!(Int16Builder::new(), Datum::SmallInt(v) => *v),
        ArrowType::Int32 => build!(Int32Builder::new(), Datum::Int(v) => *v),
        ArrowType::Int64 => build!(Int64Builder::new(), Datum::BigInt(v) => *v),
        ArrowType::Float32 => build!(Float32Builder::new(), Datum::Float(v) => *v),
        ArrowType::Float64 => build!(Float64Builder::new(), Datum::Double(v) => *v),
        ArrowType::Decimal128(p, s) => {
            let b = Decimal128Builder::new()
                .with_precision_and_scale(*p, *s)
                .map_err(|e| {
                    InvalidArgumentSnafu {
                        message: format!("decimal type: {e}"),
                    }
                    .build()
                })?;
            build!(b, Datum::Decimal { unscaled, .. } => *unscaled)
        }
        ArrowType::Utf8 => build!(StringBuilder::new(), Datum::String(v) => v),
        ArrowType::Binary => build!(BinaryBuilder::new(), Datum::Bytes(v) => v),
        ArrowType::Date32 => build!(Date32Builder::new(), Datum::Date(v) => *v),
        ArrowType::Time32(TimeUnit::Millisecond) => {
            build!(Time32MillisecondBuilder::new(), Datum::Time(v) => *v)
        }
        ArrowType::Timestamp(unit, tz) => {
            let a: ArrayRef = match unit {
                TimeUnit::Millisecond => {
                    build!(TimestampMillisecondBuilder::new(), Datum::Timestamp { millis, .. } => *millis)
                }
                TimeUnit::Microsecond => build!(TimestampMicrosecondBuilder::new(),
                    Datum::Timestamp { millis, nanos, .. } => millis * 1000 + (*nanos as i64) / 1000),
                _ => build!(TimestampNanosecondBuilder::new(),
                    Datum::Timestamp { millis, nanos, .. } => millis * 1_000_000 + *nanos as i64),
            };
            match tz {
                Some(_) => arrow::compute::cast(&a, ty).map_err(|e| {
                    InvalidArgumentSnafu {
                        message: format!("timestamp zone: {e}"),
                    }
                    .build()
                })?,
                None => a,
            }
        }
        other => {
            return InvalidArgumentSnafu {
                message: format!("cannot build values of Arrow type {other}"),
            }
            .fail()
        }
    })
}

/// Writes field `pos` of `w` from row `i` of `array`, without allocating for fixed-size types.
pub fn write_field(
    w: &mut BinaryRowWriter,
    pos: usize,
    array: &ArrayRef,
    i: usize,
    ty: &DataType,
) -> Result<()> {
    if array.is_null(i) {
        w.set_null(pos);
        return Ok(());
    }
    match &ty.root {
        TypeRoot::BigInt => {
            if let Some(a) = array.as_any().downcast_ref::<Int64Array>() {
                w.write_i64(pos, a.value(i));
                return Ok(());
            }
        }
        TypeRoot::Int => {
            if let Some(a) = array.as_any().downcast_ref::<Int32Array>() {
                w.write_i32(pos, a.value(i));
                return Ok(());
            }
        }
        TypeRoot::Char(_) | TypeRoot::VarChar(_) => {
            if let Some(a) = array.as_any().downcast_ref::<StringArray>() {
                w.write_bytes(pos, a.value(i).as_bytes());
                return Ok(());
            }
        }
        _ => {}
    }
    let d = datum_at(array.as_ref(), i, ty)?;
    w.write_datum(pos, &d);
    Ok(())
}
