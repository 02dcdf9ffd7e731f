//! Avro data files, as Paimon writes a postpone bucket's (`bucket` = -2, `bucket-postpone/`):
//! the file's row type converted as Paimon's `AvroSchemaConverter` does (top record
//! `org.apache.paimon.avro.generated.record`, a nested row named `<parent>_<field>`, a nullable
//! type as `["null", T]` with default null, TINYINT and SMALLINT as `int`, DECIMAL as bytes with the
//! `decimal` logical type, TIMESTAMP(p ≤ 3) as `timestamp-millis`, p ≤ 6 as `timestamp-micros`, the
//! local-zoned kinds as `local-timestamp-*`, a MAP with string keys as an Avro map and any other
//! MAP or MULTISET as an array of `{key, value}` records). Types Avro cannot hold (TIME above
//! millisecond, timestamps above microsecond precision) make the table keep its own format, as
//! Paimon's postpone writer does ([`convertible`]).
//!
//! Encoding and decoding work row by row through `apache_avro::Value`; these files are a staging
//! area that a compaction moves into real buckets, not a scan path.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::types::Value;
use apache_avro::Decimal;
use arrow::array::{
    make_array, Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Decimal128Array, Float32Array,
    Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, ListArray, MapArray, RecordBatch,
    RecordBatchOptions, StringArray, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{
    DataType as ArrowType, Date32Type, Decimal128Type, FieldRef, Fields, Float32Type, Float64Type,
    Int16Type, Int32Type, Int64Type, Int8Type, SchemaRef, Time32MillisecondType, TimeUnit,
};
use serde_json::json;

use crate::error::{Malformed, Result};
use crate::schema::layout::TableLayout;
use crate::spec::types::{DataType, TypeRoot};
use crate::spec::{KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND};

/// The name Paimon gives the top record of every Avro file it writes.
const ROW_NAME: &str = "org.apache.paimon.avro.generated.record";

/// Rows per decoded batch.
const BATCH_ROWS: usize = 64 * 1024;

/// The row type of a data file of `layout`: `_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND` and the
/// columns (primary-key tables), or the columns.
fn file_row(layout: &TableLayout) -> Vec<(String, DataType)> {
    let mut row = Vec::new();
    if layout.is_primary_key_table() {
        for (&i, ty) in layout.key_indices.iter().zip(&layout.key_types) {
            let name = format!("{KEY_FIELD_PREFIX}{}", layout.schema.fields[i].name);
            row.push((name, ty.clone()));
        }
        row.push((
            SEQUENCE_NUMBER.to_string(),
            DataType::new(TypeRoot::BigInt, false),
        ));
        row.push((
            VALUE_KIND.to_string(),
            DataType::new(TypeRoot::TinyInt, false),
        ));
    }
    row.extend(
        layout
            .schema
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.data_type.clone())),
    );
    row
}

/// Whether every column of `layout`'s files has an Avro form (else Paimon keeps the table's format).
pub(crate) fn convertible(layout: &TableLayout) -> bool {
    file_row(layout)
        .iter()
        .all(|(name, ty)| avro_type(ty, name).is_some())
}

/// The Avro schema (JSON) of a record of `fields`, named `row_name`.
fn record_schema(fields: &[(String, DataType)], row_name: &str) -> Option<serde_json::Value> {
    let fields = fields
        .iter()
        .map(|(name, ty)| {
            let t = avro_type(ty, &format!("{row_name}_{name}"))?;
            Some(if ty.nullable {
                json!({"name": name, "type": t, "default": null})
            } else {
                json!({"name": name, "type": t})
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(json!({"type": "record", "name": row_name, "fields": fields}))
}

/// Paimon's `AvroSchemaConverter.convertToSchema` for one type; none where Avro has no form.
fn avro_type(ty: &DataType, row_name: &str) -> Option<serde_json::Value> {
    let t = match &ty.root {
        TypeRoot::Boolean => json!("boolean"),
        TypeRoot::TinyInt | TypeRoot::SmallInt | TypeRoot::Int => json!("int"),
        TypeRoot::BigInt => json!("long"),
        TypeRoot::Float => json!("float"),
        TypeRoot::Double => json!("double"),
        TypeRoot::Char(_) | TypeRoot::VarChar(_) => json!("string"),
        TypeRoot::Binary(_) | TypeRoot::VarBinary(_) => json!("bytes"),
        &TypeRoot::Decimal { precision, scale } => {
            json!({"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale})
        }
        TypeRoot::Date => json!({"type": "int", "logicalType": "date"}),
        TypeRoot::Time(p) if *p <= 3 => json!({"type": "int", "logicalType": "time-millis"}),
        TypeRoot::Time(_) => return None,
        TypeRoot::Timestamp(p) => match p {
            0..=3 => json!({"type": "long", "logicalType": "timestamp-millis"}),
            4..=6 => json!({"type": "long", "logicalType": "timestamp-micros"}),
            _ => return None,
        },
        TypeRoot::LocalZonedTimestamp(p) => match p {
            0..=3 => json!({"type": "long", "logicalType": "local-timestamp-millis"}),
            4..=6 => json!({"type": "long", "logicalType": "local-timestamp-micros"}),
            _ => return None,
        },
        TypeRoot::Array(element) => {
            json!({"type": "array", "items": avro_type(element, row_name)?})
        }
        TypeRoot::Map(key, value) if key.is_string() => {
            json!({"type": "map", "values": avro_type(value, row_name)?})
        }
        TypeRoot::Map(key, value) => array_map(key, value, row_name)?,
        TypeRoot::Multiset(element) => {
            let count = DataType::new(TypeRoot::Int, false);
            if element.is_string() {
                json!({"type": "map", "values": avro_type(&count, row_name)?})
            } else {
                array_map(element, &count, row_name)?
            }
        }
        // Paimon's converter has no VARIANT: such a table's postpone files stay Parquet.
        // BLOB values live in `.blob` files, never in a row format's file.
        TypeRoot::Variant | TypeRoot::Blob => return None,
        TypeRoot::Row(fields) => {
            let fields: Vec<(String, DataType)> = fields
                .iter()
                .map(|f| (f.name.clone(), f.data_type.clone()))
                .collect();
            record_schema(&fields, row_name)?
        }
    };
    Some(if ty.nullable { json!(["null", t]) } else { t })
}

/// A map whose keys are not strings: an array of `{key, value}` records (Paimon's "array map").
fn array_map(key: &DataType, value: &DataType, row_name: &str) -> Option<serde_json::Value> {
    // The key never has a default, even when nullable (Java's `noDefault()`).
    let key = json!({"name": "key", "type": avro_type(key, &format!("{row_name}_key"))?});
    let value_type = avro_type(value, &format!("{row_name}_value"))?;
    let value = if value.nullable {
        json!({"name": "value", "type": value_type, "default": null})
    } else {
        json!({"name": "value", "type": value_type})
    };
    let record = json!({"type": "record", "name": row_name, "fields": [key, value]});
    Some(json!({"type": "array", "items": record, "logicalType": "map"}))
}

/// Encodes `batch` (in `layout`'s file layout) as an Avro object-container file (zstd).
/// A failure to encode a batch the table's layout declared convertible ([`convertible`]): a bug.
fn bug(message: String) -> crate::error::Error {
    crate::error::InternalSnafu {
        message: format!("encoding an Avro data file: {message}"),
    }
    .build()
}

pub(crate) fn encode(layout: &TableLayout, batch: &RecordBatch) -> Result<Vec<u8>> {
    let row = file_row(layout);
    let schema_json = record_schema(&row, ROW_NAME)
        .ok_or_else(|| bug("a column type has no Avro form".to_string()))?;
    let schema = apache_avro::Schema::parse(&schema_json).map_err(|e| bug(e.to_string()))?;
    let codec = apache_avro::Codec::Zstandard(apache_avro::ZstandardSettings::new(1));
    let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec)
        .map_err(|e| bug(e.to_string()))?;
    for i in 0..batch.num_rows() {
        let fields = row
            .iter()
            .zip(batch.columns())
            .map(|((name, ty), col)| Ok((name.clone(), to_value(col.as_ref(), i, ty)?)))
            .collect::<Result<Vec<_>>>()?;
        w.append_value(Value::Record(fields))
            .map_err(|e| bug(e.to_string()))?;
    }
    w.into_inner().map_err(|e| bug(e.to_string()))
}

/// One value of `col` at `i`, of Paimon type `ty`, wrapped in the nullable union where it is one.
fn to_value(col: &dyn Array, i: usize, ty: &DataType) -> Result<Value> {
    if col.is_null(i) {
        return if ty.nullable {
            Ok(Value::Union(0, Box::new(Value::Null)))
        } else {
            Err(bug(format!("a null in a NOT NULL column of type {ty}")))
        };
    }
    let v = match &ty.root {
        TypeRoot::Boolean => Value::Boolean(col.as_boolean().value(i)),
        TypeRoot::TinyInt => Value::Int(col.as_primitive::<Int8Type>().value(i) as i32),
        TypeRoot::SmallInt => Value::Int(col.as_primitive::<Int16Type>().value(i) as i32),
        TypeRoot::Int => Value::Int(col.as_primitive::<Int32Type>().value(i)),
        TypeRoot::BigInt => Value::Long(col.as_primitive::<Int64Type>().value(i)),
        TypeRoot::Float => Value::Float(col.as_primitive::<Float32Type>().value(i)),
        TypeRoot::Double => Value::Double(col.as_primitive::<Float64Type>().value(i)),
        TypeRoot::Decimal { .. } => {
            let unscaled = col.as_primitive::<Decimal128Type>().value(i);
            Value::Decimal(Decimal::from(minimal_be_bytes(unscaled)))
        }
        TypeRoot::Char(_) | TypeRoot::VarChar(_) => {
            Value::String(col.as_string::<i32>().value(i).to_string())
        }
        TypeRoot::Binary(_) | TypeRoot::VarBinary(_) => {
            Value::Bytes(col.as_binary::<i32>().value(i).to_vec())
        }
        TypeRoot::Date => Value::Date(col.as_primitive::<Date32Type>().value(i)),
        TypeRoot::Time(_) => {
            Value::TimeMillis(col.as_primitive::<Time32MillisecondType>().value(i))
        }
        TypeRoot::Timestamp(p) => {
            let v = timestamp_at(col, i)?;
            if *p <= 3 {
                Value::TimestampMillis(v)
            } else {
                Value::TimestampMicros(v)
            }
        }
        TypeRoot::LocalZonedTimestamp(p) => {
            let v = timestamp_at(col, i)?;
            if *p <= 3 {
                Value::LocalTimestampMillis(v)
            } else {
                Value::LocalTimestampMicros(v)
            }
        }
        TypeRoot::Array(element) => {
            let items = col.as_list::<i32>().value(i);
            Value::Array(
                (0..items.len())
                    .map(|j| to_value(items.as_ref(), j, element))
                    .collect::<Result<_, _>>()?,
            )
        }
        TypeRoot::Map(key, value) => map_value(col, i, key, value)?,
        TypeRoot::Multiset(element) => {
            map_value(col, i, element, &DataType::new(TypeRoot::Int, false))?
        }
        TypeRoot::Variant | TypeRoot::Blob => return Err(bug(format!("{ty} has no Avro form"))),
        TypeRoot::Row(fields) => {
            let s = col.as_struct();
            Value::Record(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| Ok((f.name.clone(), to_value(c.as_ref(), i, &f.data_type)?)))
                    .collect::<Result<_>>()?,
            )
        }
    };
    Ok(if ty.nullable {
        Value::Union(1, Box::new(v))
    } else {
        v
    })
}

fn map_value(col: &dyn Array, i: usize, key: &DataType, value: &DataType) -> Result<Value> {
    let entries = col.as_map().value(i);
    let (keys, values) = (entries.column(0), entries.column(1));
    if key.is_string() {
        let keys = keys.as_string::<i32>();
        let mut m = HashMap::with_capacity(keys.len());
        for j in 0..keys.len() {
            m.insert(
                keys.value(j).to_string(),
                to_value(values.as_ref(), j, value)?,
            );
        }
        return Ok(Value::Map(m));
    }
    Ok(Value::Array(
        (0..keys.len())
            .map(|j| {
                Ok(Value::Record(vec![
                    ("key".to_string(), to_value(keys.as_ref(), j, key)?),
                    ("value".to_string(), to_value(values.as_ref(), j, value)?),
                ]))
            })
            .collect::<Result<_>>()?,
    ))
}

fn timestamp_at(col: &dyn Array, i: usize) -> Result<i64> {
    use arrow::datatypes::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    Ok(match col.data_type() {
        ArrowType::Timestamp(TimeUnit::Second, _) => {
            col.as_primitive::<TimestampSecondType>().value(i)
        }
        ArrowType::Timestamp(TimeUnit::Millisecond, _) => {
            col.as_primitive::<TimestampMillisecondType>().value(i)
        }
        ArrowType::Timestamp(TimeUnit::Microsecond, _) => {
            col.as_primitive::<TimestampMicrosecondType>().value(i)
        }
        ArrowType::Timestamp(TimeUnit::Nanosecond, _) => {
            col.as_primitive::<TimestampNanosecondType>().value(i)
        }
        other => return Err(bug(format!("expected a timestamp column, found {other}"))),
    })
}

/// Java's `BigInteger.toByteArray()`: the shortest big-endian two's complement.
fn minimal_be_bytes(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        if (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    bytes[start..].to_vec()
}

/// Decodes an Avro data file into batches of `target`: columns are found by name (`name_of` maps
/// a target column to its name in the file; none or a missing column reads as NULL).
pub(crate) fn decode(
    bytes: &[u8],
    target: &SchemaRef,
    name_of: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<RecordBatch>, Malformed> {
    let reader =
        apache_avro::Reader::new(bytes).map_err(|e| Malformed(format!("not an Avro file: {e}")))?;
    let mut records = Vec::new();
    for v in reader {
        match v.map_err(|e| Malformed(format!("Avro decode error: {e}")))? {
            Value::Record(fields) => records.push(fields),
            other => return Err(Malformed(format!("expected a record, found {other:?}"))),
        }
    }
    let mut out = Vec::new();
    for chunk in records.chunks(BATCH_ROWS) {
        let columns = target
            .fields()
            .iter()
            .map(|f| {
                let values: Vec<&Value> = match name_of(f.name()) {
                    Some(name) => chunk.iter().map(|r| field(r, &name)).collect(),
                    None => vec![&Value::Null; chunk.len()],
                };
                from_values(&values, f.data_type())
                    .map_err(|e| Malformed(format!("column {}: {e}", f.name())))
            })
            .collect::<Result<Vec<_>, Malformed>>()?;
        let opts = RecordBatchOptions::new().with_row_count(Some(chunk.len()));
        out.push(
            RecordBatch::try_new_with_options(Arc::clone(target), columns, &opts)
                .map_err(|e| Malformed(format!("does not match the table schema: {e}")))?,
        );
    }
    Ok(out)
}

/// The value of field `name` of a record (null when the record has no such field).
fn field<'a>(record: &'a [(String, Value)], name: &str) -> &'a Value {
    record
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| plain(v))
        .unwrap_or(&Value::Null)
}

/// A value without its union wrapper.
fn plain(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => plain(inner),
        v => v,
    }
}

fn nulls(values: &[&Value]) -> Option<NullBuffer> {
    let valid: Vec<bool> = values.iter().map(|v| !matches!(v, Value::Null)).collect();
    let buffer = NullBuffer::from(valid);
    (buffer.null_count() > 0).then_some(buffer)
}

fn wrong(v: &Value, ty: &ArrowType) -> Malformed {
    Malformed(format!("an Avro value {v:?} cannot be read as {ty}"))
}

fn long_of(v: &Value) -> Option<i64> {
    match v {
        Value::Int(x) | Value::Date(x) | Value::TimeMillis(x) => Some(*x as i64),
        Value::Long(x)
        | Value::TimeMicros(x)
        | Value::TimestampMillis(x)
        | Value::TimestampMicros(x)
        | Value::TimestampNanos(x)
        | Value::LocalTimestampMillis(x)
        | Value::LocalTimestampMicros(x)
        | Value::LocalTimestampNanos(x) => Some(*x),
        _ => None,
    }
}

/// Builds an Arrow array of type `ty` from Avro values (already unwrapped from their unions).
fn from_values(values: &[&Value], ty: &ArrowType) -> Result<ArrayRef, Malformed> {
    macro_rules! collect {
        ($f:expr) => {
            values
                .iter()
                .map(|v| match v {
                    Value::Null => Ok(None),
                    v => $f(v).map(Some).ok_or_else(|| wrong(v, ty)),
                })
                .collect::<Result<Vec<_>, Malformed>>()?
        };
    }
    let array: ArrayRef = match ty {
        ArrowType::Null => Arc::new(arrow::array::NullArray::new(values.len())),
        ArrowType::Boolean => Arc::new(BooleanArray::from(collect!(|v: &Value| match v {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }))),
        ArrowType::Int8 => Arc::new(Int8Array::from(collect!(
            |v: &Value| long_of(v).map(|x| x as i8)
        ))),
        ArrowType::Int16 => Arc::new(Int16Array::from(collect!(
            |v: &Value| long_of(v).map(|x| x as i16)
        ))),
        ArrowType::Int32 => Arc::new(Int32Array::from(collect!(
            |v: &Value| long_of(v).map(|x| x as i32)
        ))),
        ArrowType::Int64 => Arc::new(Int64Array::from(collect!(long_of))),
        ArrowType::Float32 => Arc::new(Float32Array::from(collect!(|v: &Value| match v {
            Value::Float(x) => Some(*x),
            Value::Double(x) => Some(*x as f32),
            _ => None,
        }))),
        ArrowType::Float64 => Arc::new(Float64Array::from(collect!(|v: &Value| match v {
            Value::Double(x) => Some(*x),
            Value::Float(x) => Some(*x as f64),
            _ => None,
        }))),
        ArrowType::Utf8 => {
            let mut out: Vec<Option<&str>> = Vec::with_capacity(values.len());
            for v in values {
                out.push(match v {
                    Value::Null => None,
                    Value::String(s) => Some(s.as_str()),
                    v => return Err(wrong(v, ty)),
                });
            }
            Arc::new(StringArray::from(out))
        }
        ArrowType::Binary => {
            let mut out: Vec<Option<&[u8]>> = Vec::with_capacity(values.len());
            for v in values {
                out.push(match v {
                    Value::Null => None,
                    Value::Bytes(b) | Value::Fixed(_, b) => Some(b.as_slice()),
                    v => return Err(wrong(v, ty)),
                });
            }
            Arc::new(BinaryArray::from(out))
        }
        &ArrowType::Decimal128(precision, scale) => {
            let unscaled = collect!(|v: &Value| match v {
                Value::Decimal(d) => Vec::<u8>::try_from(d).ok().and_then(|b| from_be_bytes(&b)),
                Value::Bytes(b) | Value::Fixed(_, b) => from_be_bytes(b),
                _ => None,
            });
            Arc::new(
                Decimal128Array::from(unscaled)
                    .with_precision_and_scale(precision, scale)
                    .map_err(|e| Malformed(e.to_string()))?,
            )
        }
        ArrowType::Date32 | ArrowType::Time32(_) => {
            let ints = Int32Array::from(collect!(|v: &Value| long_of(v).map(|x| x as i32)));
            retype(&ints, ty)?
        }
        ArrowType::Timestamp(..) | ArrowType::Time64(_) => {
            retype(&Int64Array::from(collect!(long_of)), ty)?
        }
        ArrowType::List(element) => {
            let mut lengths = Vec::with_capacity(values.len());
            let mut children: Vec<&Value> = Vec::new();
            for v in values {
                match v {
                    Value::Null => lengths.push(0),
                    Value::Array(items) => {
                        lengths.push(items.len());
                        children.extend(items.iter().map(plain));
                    }
                    v => return Err(wrong(v, ty)),
                }
            }
            let child = from_values(&children, element.data_type())?;
            Arc::new(
                ListArray::try_new(
                    Arc::clone(element),
                    OffsetBuffer::from_lengths(lengths),
                    child,
                    nulls(values),
                )
                .map_err(|e| Malformed(e.to_string()))?,
            )
        }
        ArrowType::Struct(fields) => {
            let mut records: Vec<Option<&[(String, Value)]>> = Vec::with_capacity(values.len());
            for v in values {
                match v {
                    Value::Null => records.push(None),
                    Value::Record(r) => records.push(Some(r)),
                    v => return Err(wrong(v, ty)),
                }
            }
            struct_of(fields, &records, nulls(values))?
        }
        ArrowType::Map(entries, sorted) => {
            let ArrowType::Struct(kv) = entries.data_type() else {
                return Err(Malformed(format!("map entries of {ty} are not a struct")));
            };
            let mut lengths = Vec::with_capacity(values.len());
            let mut pairs: Vec<(Value, &Value)> = Vec::new();
            for v in values {
                match v {
                    Value::Null => lengths.push(0),
                    Value::Map(m) => {
                        let mut items: Vec<(&String, &Value)> = m.iter().collect();
                        items.sort_by(|a, b| a.0.cmp(b.0));
                        lengths.push(items.len());
                        pairs.extend(
                            items
                                .into_iter()
                                .map(|(k, v)| (Value::String(k.clone()), plain(v))),
                        );
                    }
                    Value::Array(items) => {
                        lengths.push(items.len());
                        for item in items {
                            let Value::Record(r) = plain(item) else {
                                return Err(wrong(item, ty));
                            };
                            pairs.push((field(r, "key").clone(), field(r, "value")));
                        }
                    }
                    v => return Err(wrong(v, ty)),
                }
            }
            let keys: Vec<&Value> = pairs.iter().map(|(k, _)| k).collect();
            let vals: Vec<&Value> = pairs.iter().map(|(_, v)| *v).collect();
            let columns = vec![
                from_values(&keys, kv[0].data_type())?,
                from_values(&vals, kv[1].data_type())?,
            ];
            let entries_array = StructArray::try_new(kv.clone(), columns, None)
                .map_err(|e| Malformed(e.to_string()))?;
            Arc::new(
                MapArray::try_new(
                    Arc::clone(entries),
                    OffsetBuffer::from_lengths(lengths),
                    entries_array,
                    nulls(values),
                    *sorted,
                )
                .map_err(|e| Malformed(e.to_string()))?,
            )
        }
        other => return Err(Malformed(format!("Avro data files cannot hold {other}"))),
    };
    Ok(array)
}

fn struct_of(
    fields: &Fields,
    records: &[Option<&[(String, Value)]>],
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef, Malformed> {
    let columns = fields
        .iter()
        .map(|f: &FieldRef| {
            let values: Vec<&Value> = records
                .iter()
                .map(|r| r.map(|r| field(r, f.name())).unwrap_or(&Value::Null))
                .collect();
            from_values(&values, f.data_type())
        })
        .collect::<Result<Vec<_>, Malformed>>()?;
    Ok(Arc::new(
        StructArray::try_new(fields.clone(), columns, nulls)
            .map_err(|e| Malformed(e.to_string()))?,
    ))
}

/// The same values under another type of the same width (Int32 as Date32, Int64 as Timestamp).
fn retype(array: &dyn Array, ty: &ArrowType) -> Result<ArrayRef, Malformed> {
    let data = array
        .to_data()
        .into_builder()
        .data_type(ty.clone())
        .build()
        .map_err(|e| Malformed(e.to_string()))?;
    Ok(make_array(data))
}

/// A big-endian two's complement of at most 16 bytes as an i128.
fn from_be_bytes(b: &[u8]) -> Option<i128> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let fill = if b[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - b.len()..].copy_from_slice(b);
    Some(i128::from_be_bytes(full))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_bytes_are_javas_shortest_form() {
        for (v, bytes) in [
            (0i128, vec![0u8]),
            (127, vec![0x7f]),
            (128, vec![0x00, 0x80]),
            (-1, vec![0xff]),
            (-128, vec![0x80]),
            (-129, vec![0xff, 0x7f]),
        ] {
            assert_eq!(minimal_be_bytes(v), bytes, "{v}");
            assert_eq!(from_be_bytes(&bytes), Some(v));
        }
        assert_eq!(from_be_bytes(&minimal_be_bytes(i128::MIN)), Some(i128::MIN));
    }

    #[test]
    fn every_type_round_trips_through_an_avro_file() {
        let layout = TableLayout::from_json(
            r#"{"version":3,"id":0,"fields":[
            {"id":0,"name":"id","type":"BIGINT NOT NULL"},
            {"id":1,"name":"b","type":"BOOLEAN"},{"id":2,"name":"t","type":"TINYINT"},
            {"id":3,"name":"s","type":"SMALLINT"},{"id":4,"name":"i","type":"INT"},
            {"id":5,"name":"f","type":"FLOAT"},{"id":6,"name":"d","type":"DOUBLE"},
            {"id":7,"name":"dec","type":"DECIMAL(20, 3)"},{"id":8,"name":"str","type":"STRING"},
            {"id":9,"name":"day","type":"DATE"},{"id":10,"name":"ts","type":"TIMESTAMP(6)"},
            {"id":11,"name":"ltz","type":"TIMESTAMP(3) WITH LOCAL TIME ZONE"},
            {"id":12,"name":"arr","type":{"type":"ARRAY","element":"INT"}},
            {"id":13,"name":"m","type":{"type":"MAP","key":"STRING NOT NULL","value":"BIGINT"}},
            {"id":14,"name":"im","type":{"type":"MAP","key":"INT NOT NULL","value":"STRING"}},
            {"id":15,"name":"r","type":{"type":"ROW","fields":[{"id":16,"name":"x","type":"INT"},
              {"id":17,"name":"y","type":{"type":"ARRAY","element":"STRING"}}]}}],
            "highestFieldId":17,"partitionKeys":[],"primaryKeys":["id"],
            "options":{"bucket":"-2"},"timeMillis":1}"#,
        );
        assert!(convertible(&layout));
        let lines = [
            r#"{"_KEY_id":1,"_SEQUENCE_NUMBER":0,"_VALUE_KIND":0,"id":1,"b":true,"t":-3,"s":300,
              "i":-70000,"f":1.5,"d":-2.25,"dec":"-12345678901234567.891","str":"héllo","day":19000,
              "ts":"2024-01-02T03:04:05.123456","ltz":"2024-01-02T03:04:05.123Z","arr":[1,null,3],
              "m":{"a":1,"b":null},"im":{"7":"seven","-1":null},"r":{"x":5,"y":["p",null]}}"#,
            r#"{"_KEY_id":2,"_SEQUENCE_NUMBER":1,"_VALUE_KIND":3,"id":2}"#,
            r#"{"_KEY_id":3,"_SEQUENCE_NUMBER":2,"_VALUE_KIND":2,"id":3,"arr":[],"m":{},
              "r":{"x":null,"y":null}}"#,
        ]
        .join("\n");
        let batch = arrow::json::ReaderBuilder::new(Arc::clone(&layout.file_schema))
            .build(std::io::Cursor::new(lines))
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let bytes = encode(&layout, &batch).unwrap();
        let name_of = |n: &str| Some(n.to_string());
        let back = decode(&bytes, &layout.file_schema, &name_of).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0], batch);
        // A column the file lacks reads as null; a corrupt file is an error.
        let none = |n: &str| (n != "str").then(|| n.to_string());
        let back = decode(&bytes, &layout.file_schema, &none).unwrap();
        assert_eq!(back[0].column_by_name("str").unwrap().null_count(), 3);
        assert!(decode(b"Obj\x01junk", &layout.file_schema, &name_of).is_err());
    }

    #[test]
    fn nested_types_take_paimons_avro_forms() {
        let ty: DataType = "ROW<a INT, m MAP<INT, STRING>>".parse().unwrap();
        let schema = avro_type(&ty, ROW_NAME).unwrap();
        let expected = json!(["null", {"type": "record", "name": ROW_NAME, "fields": [
            {"name": "a", "type": ["null", "int"], "default": null},
            {"name": "m", "type": ["null", {"type": "array", "logicalType": "map", "items":
                {"type": "record", "name": format!("{ROW_NAME}_m"), "fields": [
                    {"name": "key", "type": ["null", "int"]},
                    {"name": "value", "type": ["null", "string"], "default": null}]}}],
             "default": null}]}]);
        assert_eq!(schema, expected);
        let ts9: DataType = "TIMESTAMP(9)".parse().unwrap();
        assert!(avro_type(&ts9, ROW_NAME).is_none());
    }
}
