//! Paimon's logical data types as they appear in `schema-N` files (`"BIGINT NOT NULL"`,
//! `"DECIMAL(10, 2)"`, `"TIMESTAMP(3) WITH LOCAL TIME ZONE"`), and their Arrow equivalents.
//!
//! Plain data: parsing, printing and mapping only. Nested types (ARRAY, MAP, MULTISET, ROW) are
//! written in schema files as JSON objects, as Paimon's `DataTypeJsonParser` reads them
//! (`{"type":"ARRAY","element":"INT"}`, `{"type":"MAP","key":..,"value":..}`,
//! `{"type":"ROW","fields":[{"id":..,"name":..,"type":..}]}`), and in SQL and `--schema` as
//! `ARRAY<INT>`, `MAP<STRING, INT>`, `ROW<k STRING, v DOUBLE>`. In Arrow and Parquet they are laid
//! out as Paimon's `ParquetSchemaConverter` does: a three-level list with `element`, a map of
//! `key_value` entries with a required `key`, a struct; a MULTISET is a map to INT NOT NULL counts.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, TimeUnit};
use arrow::datatypes::{Field, Fields};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod parse;
pub(crate) use parse::{split_top_level, MAX_NESTING};

/// Length Paimon prints as `STRING` / `BYTES` (VARCHAR / VARBINARY of maximal length).
pub const MAX_LENGTH: u32 = i32::MAX as u32;

/// The root of a Paimon type, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypeRoot {
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Char(u32),
    VarChar(u32),
    Binary(u32),
    VarBinary(u32),
    Date,
    Time(u8),
    Timestamp(u8),
    LocalZonedTimestamp(u8),
    Array(Box<DataType>),
    Multiset(Box<DataType>),
    Map(Box<DataType>, Box<DataType>),
    Row(Vec<DataField>),
    /// Semi-structured data in the Parquet Variant binary encoding: a `value` and a `metadata`
    /// byte array (pypaimon 2.1 and Paimon 1.1+ write it unshredded as that group).
    Variant,
    /// Paimon 2.0's multimodal bytes: kept in `.blob` files of their own beside the row's other
    /// columns (data-evolution tables only), read as Arrow `LargeBinary` as pypaimon does.
    Blob,
}

/// One column of a table. `id` is stable across renames; data files are mapped to columns by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataField {
    pub id: i32,
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: DataType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A Paimon data type: a root plus nullability.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DataType {
    pub root: TypeRoot,
    pub nullable: bool,
}

impl DataType {
    pub fn new(root: TypeRoot, nullable: bool) -> Self {
        Self { root, nullable }
    }

    /// A type built from parts, with Paimon's rules on nested types checked (map keys are not
    /// nested, a ROW's field names are unique).
    pub fn checked(root: TypeRoot, nullable: bool) -> Result<Self, TypeParseError> {
        check_nested(&root)?;
        Ok(Self { root, nullable })
    }

    pub fn with_nullable(self, nullable: bool) -> Self {
        Self { nullable, ..self }
    }

    /// ARRAY, MULTISET, MAP, ROW or VARIANT: a value column only (never a key, a partition or a
    /// bucket key), without min/max statistics.
    pub fn is_nested(&self) -> bool {
        matches!(
            self.root,
            TypeRoot::Array(_)
                | TypeRoot::Multiset(_)
                | TypeRoot::Map(..)
                | TypeRoot::Row(_)
                | TypeRoot::Variant
        )
    }

    /// Whether the type is BLOB or holds one (`ARRAY<BLOB>`, `MAP<STRING, BLOB>`, ...).
    pub fn holds_blob(&self) -> bool {
        match &self.root {
            TypeRoot::Blob => true,
            TypeRoot::Array(e) | TypeRoot::Multiset(e) => e.holds_blob(),
            TypeRoot::Map(k, v) => k.holds_blob() || v.holds_blob(),
            TypeRoot::Row(fields) => fields.iter().any(|f| f.data_type.holds_blob()),
            _ => false,
        }
    }

    pub fn is_string(&self) -> bool {
        matches!(self.root, TypeRoot::Char(_) | TypeRoot::VarChar(_))
    }

    /// The Arrow type tidelake reads and writes for this Paimon type.
    pub fn to_arrow(&self) -> ArrowType {
        match &self.root {
            TypeRoot::Boolean => ArrowType::Boolean,
            TypeRoot::TinyInt => ArrowType::Int8,
            TypeRoot::SmallInt => ArrowType::Int16,
            TypeRoot::Int => ArrowType::Int32,
            TypeRoot::BigInt => ArrowType::Int64,
            TypeRoot::Float => ArrowType::Float32,
            TypeRoot::Double => ArrowType::Float64,
            &TypeRoot::Decimal { precision, scale } => {
                ArrowType::Decimal128(precision, scale as i8)
            }
            TypeRoot::Char(_) | TypeRoot::VarChar(_) => ArrowType::Utf8,
            TypeRoot::Binary(_) | TypeRoot::VarBinary(_) => ArrowType::Binary,
            TypeRoot::Date => ArrowType::Date32,
            TypeRoot::Time(_) => ArrowType::Time32(TimeUnit::Millisecond),
            &TypeRoot::Timestamp(p) => ArrowType::Timestamp(time_unit(p), None),
            &TypeRoot::LocalZonedTimestamp(p) => {
                ArrowType::Timestamp(time_unit(p), Some(Arc::from("UTC")))
            }
            TypeRoot::Array(element) => ArrowType::List(Arc::new(Field::new(
                "element",
                element.to_arrow(),
                element.nullable,
            ))),
            TypeRoot::Multiset(element) => map_type(element, &DataType::new(TypeRoot::Int, false)),
            TypeRoot::Map(key, value) => map_type(key, value),
            TypeRoot::Row(fields) => ArrowType::Struct(
                fields
                    .iter()
                    .map(|f| Field::new(&f.name, f.data_type.to_arrow(), f.data_type.nullable))
                    .collect::<Fields>(),
            ),
            TypeRoot::Variant => ArrowType::Struct(variant_fields()),
            TypeRoot::Blob => ArrowType::LargeBinary,
        }
    }

    /// The Paimon type for an Arrow type, as pypaimon maps pyarrow schemas.
    pub fn from_arrow(ty: &ArrowType, nullable: bool) -> Option<DataType> {
        let root = match ty {
            ArrowType::Boolean => TypeRoot::Boolean,
            ArrowType::Int8 => TypeRoot::TinyInt,
            ArrowType::Int16 => TypeRoot::SmallInt,
            ArrowType::Int32 => TypeRoot::Int,
            ArrowType::Int64 => TypeRoot::BigInt,
            ArrowType::Float32 => TypeRoot::Float,
            ArrowType::Float64 => TypeRoot::Double,
            ArrowType::Decimal128(p, s) if *s >= 0 => TypeRoot::Decimal {
                precision: *p,
                scale: *s as u8,
            },
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
                TypeRoot::VarChar(MAX_LENGTH)
            }
            ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView => {
                TypeRoot::VarBinary(MAX_LENGTH)
            }
            ArrowType::Date32 => TypeRoot::Date,
            ArrowType::Time32(_) | ArrowType::Time64(_) => TypeRoot::Time(0),
            ArrowType::Timestamp(unit, tz) => {
                let p = match unit {
                    TimeUnit::Second => 0,
                    TimeUnit::Millisecond => 3,
                    TimeUnit::Microsecond => 6,
                    TimeUnit::Nanosecond => 9,
                };
                if tz.is_some() {
                    TypeRoot::LocalZonedTimestamp(p)
                } else {
                    TypeRoot::Timestamp(p)
                }
            }
            ArrowType::List(item) | ArrowType::LargeList(item) => TypeRoot::Array(Box::new(
                DataType::from_arrow(item.data_type(), item.is_nullable())?,
            )),
            ArrowType::Map(entries, _) => match entries.data_type() {
                ArrowType::Struct(kv) if kv.len() == 2 => TypeRoot::Map(
                    Box::new(DataType::from_arrow(kv[0].data_type(), false)?),
                    Box::new(DataType::from_arrow(
                        kv[1].data_type(),
                        kv[1].is_nullable(),
                    )?),
                ),
                _ => return None,
            },
            ArrowType::Struct(fields) if *fields == variant_fields() => TypeRoot::Variant,
            ArrowType::Struct(fields) => TypeRoot::Row(
                fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        Some(DataField {
                            id: i as i32,
                            name: f.name().clone(),
                            data_type: DataType::from_arrow(f.data_type(), f.is_nullable())?,
                            description: None,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        };
        DataType::checked(root, nullable).ok()
    }

    /// Gives every field nested in this type a fresh id from `highest` (incremented first, so it
    /// stays the highest id given), depth first, a ROW's fields in order and each field's own
    /// nested fields before the next: ids are unique across the whole schema, as Paimon requires.
    pub fn reassign_nested_ids(&mut self, highest: &mut i32) {
        match &mut self.root {
            TypeRoot::Array(e) | TypeRoot::Multiset(e) => e.reassign_nested_ids(highest),
            TypeRoot::Map(k, v) => {
                k.reassign_nested_ids(highest);
                v.reassign_nested_ids(highest);
            }
            TypeRoot::Row(fields) => {
                for f in fields {
                    *highest += 1;
                    f.id = *highest;
                    f.data_type.reassign_nested_ids(highest);
                }
            }
            _ => {}
        }
    }

    /// Whether two types are the same but for nullability and the ids and comments of nested
    /// fields (an ingest naming a table's columns again, built from Arrow without ids).
    pub fn same_shape(&self, other: &DataType) -> bool {
        match (&self.root, &other.root) {
            (TypeRoot::Array(a), TypeRoot::Array(b))
            | (TypeRoot::Multiset(a), TypeRoot::Multiset(b)) => a.same_shape(b),
            (TypeRoot::Map(k1, v1), TypeRoot::Map(k2, v2)) => {
                k1.same_shape(k2) && v1.same_shape(v2)
            }
            (TypeRoot::Row(a), TypeRoot::Row(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| x.name == y.name && x.data_type.same_shape(&y.data_type))
            }
            (a, b) => a == b,
        }
    }

    /// The highest field id nested in this type (`None` for a type without ROW fields).
    pub fn highest_nested_id(&self) -> Option<i32> {
        match &self.root {
            TypeRoot::Array(e) | TypeRoot::Multiset(e) => e.highest_nested_id(),
            TypeRoot::Map(k, v) => k.highest_nested_id().max(v.highest_nested_id()),
            TypeRoot::Row(fields) => fields
                .iter()
                .map(|f| Some(f.id).max(f.data_type.highest_nested_id()))
                .max()
                .flatten(),
            _ => None,
        }
    }

    /// Paimon's JSON form: a string for an atomic type, an object for a nested one.
    fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let name = |n: &str| {
            if self.nullable {
                n.to_string()
            } else {
                format!("{n} NOT NULL")
            }
        };
        match &self.root {
            TypeRoot::Array(e) => json!({"type": name("ARRAY"), "element": e.to_json()}),
            TypeRoot::Multiset(e) => json!({"type": name("MULTISET"), "element": e.to_json()}),
            TypeRoot::Map(k, v) => {
                json!({"type": name("MAP"), "key": k.to_json(), "value": v.to_json()})
            }
            TypeRoot::Row(fields) => {
                let fields: Vec<serde_json::Value> = fields
                    .iter()
                    .map(|f| {
                        let mut o =
                            json!({"id": f.id, "name": f.name, "type": f.data_type.to_json()});
                        if let Some(d) = &f.description {
                            o["description"] = json!(d);
                        }
                        o
                    })
                    .collect();
                json!({"type": name("ROW"), "fields": fields})
            }
            _ => serde_json::Value::String(self.to_string()),
        }
    }

    /// Reads Paimon's JSON form (see [`DataType::to_json`]).
    fn from_json(value: &serde_json::Value) -> Result<DataType, TypeParseError> {
        let obj = match value {
            serde_json::Value::String(s) => return s.parse(),
            serde_json::Value::Object(o) => o,
            other => return Err(TypeParseError(format!("malformed type {other}"))),
        };
        let bad = || TypeParseError(format!("malformed nested type {value}"));
        let ty = obj.get("type").and_then(|t| t.as_str()).ok_or_else(bad)?;
        let (name, nullable) = split_nullability(ty.trim());
        let part = |key: &str| DataType::from_json(obj.get(key).ok_or_else(bad)?).map(Box::new);
        let root = match name.to_ascii_uppercase().as_str() {
            "ARRAY" => TypeRoot::Array(part("element")?),
            "MULTISET" => TypeRoot::Multiset(part("element")?),
            "MAP" => TypeRoot::Map(part("key")?, part("value")?),
            "ROW" => {
                let fields = obj
                    .get("fields")
                    .and_then(|f| f.as_array())
                    .ok_or_else(bad)?;
                TypeRoot::Row(
                    fields
                        .iter()
                        .map(|f| {
                            let o = f.as_object().ok_or_else(bad)?;
                            Ok(DataField {
                                id: o
                                    .get("id")
                                    .and_then(|i| i.as_i64())
                                    .and_then(|i| i32::try_from(i).ok())
                                    .ok_or_else(bad)?,
                                name: o
                                    .get("name")
                                    .and_then(|n| n.as_str())
                                    .ok_or_else(bad)?
                                    .to_string(),
                                data_type: DataType::from_json(o.get("type").ok_or_else(bad)?)?,
                                description: o
                                    .get("description")
                                    .and_then(|d| d.as_str())
                                    .map(str::to_string),
                            })
                        })
                        .collect::<Result<Vec<_>, TypeParseError>>()?,
                )
            }
            _ => return Err(TypeParseError(format!("unsupported nested type '{ty}'"))),
        };
        // What a schema file says is taken as Paimon wrote it; Paimon's rules on nested types
        // are checked where types are declared (DDL, `--schema`, Arrow input).
        Ok(DataType { root, nullable })
    }
}

/// The Arrow form of VARIANT, as pypaimon exposes it and Paimon's `ParquetSchemaConverter` lays it
/// out: `struct<value binary NOT NULL, metadata binary NOT NULL>`, in that order.
pub fn variant_fields() -> Fields {
    Fields::from(vec![
        Field::new("value", ArrowType::Binary, false),
        Field::new("metadata", ArrowType::Binary, false),
    ])
}

/// An Arrow map of `key_value` entries with a required key, as Paimon lays out MAP and MULTISET.
fn map_type(key: &DataType, value: &DataType) -> ArrowType {
    let entries = Field::new(
        "key_value",
        ArrowType::Struct(Fields::from(vec![
            Field::new("key", key.to_arrow(), false),
            Field::new("value", value.to_arrow(), value.nullable),
        ])),
        false,
    );
    ArrowType::Map(Arc::new(entries), false)
}

/// Paimon's rules on nested types: a map key (and a multiset element, its key) is never nested,
/// and a ROW's field names are unique.
fn check_nested(root: &TypeRoot) -> Result<(), TypeParseError> {
    match root {
        TypeRoot::Map(key, _) | TypeRoot::Multiset(key) if key.is_nested() => Err(TypeParseError(
            format!("a map key or multiset element cannot be the nested type {key}"),
        )),
        TypeRoot::Row(fields) => {
            let mut names = std::collections::HashSet::new();
            match fields.iter().find(|f| !names.insert(f.name.as_str())) {
                Some(f) => Err(TypeParseError(format!(
                    "ROW field '{}' appears twice",
                    f.name
                ))),
                None if fields.is_empty() => {
                    Err(TypeParseError("a ROW needs at least one field".to_string()))
                }
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// `"X NOT NULL"` -> (`"X"`, false); `"X NULL"` and `"X"` -> (`"X"`, true).
fn split_nullability(s: &str) -> (&str, bool) {
    let upper = s.to_ascii_uppercase();
    if upper.ends_with("NOT NULL") {
        let rest = s[..s.len() - "NOT NULL".len()].trim_end();
        (rest, false)
    } else if upper.ends_with(" NULL") {
        (s[..s.len() - " NULL".len()].trim_end(), true)
    } else {
        (s, true)
    }
}

fn time_unit(precision: u8) -> TimeUnit {
    match precision {
        0..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            TypeRoot::Boolean => f.write_str("BOOLEAN")?,
            TypeRoot::TinyInt => f.write_str("TINYINT")?,
            TypeRoot::SmallInt => f.write_str("SMALLINT")?,
            TypeRoot::Int => f.write_str("INT")?,
            TypeRoot::BigInt => f.write_str("BIGINT")?,
            TypeRoot::Float => f.write_str("FLOAT")?,
            TypeRoot::Double => f.write_str("DOUBLE")?,
            TypeRoot::Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})")?,
            TypeRoot::Char(n) => write!(f, "CHAR({n})")?,
            TypeRoot::VarChar(MAX_LENGTH) => f.write_str("STRING")?,
            TypeRoot::VarChar(n) => write!(f, "VARCHAR({n})")?,
            TypeRoot::Binary(n) => write!(f, "BINARY({n})")?,
            TypeRoot::VarBinary(MAX_LENGTH) => f.write_str("BYTES")?,
            TypeRoot::VarBinary(n) => write!(f, "VARBINARY({n})")?,
            TypeRoot::Date => f.write_str("DATE")?,
            TypeRoot::Time(p) => write!(f, "TIME({p})")?,
            TypeRoot::Timestamp(p) => write!(f, "TIMESTAMP({p})")?,
            TypeRoot::LocalZonedTimestamp(p) => write!(f, "TIMESTAMP({p}) WITH LOCAL TIME ZONE")?,
            TypeRoot::Array(e) => write!(f, "ARRAY<{e}>")?,
            TypeRoot::Multiset(e) => write!(f, "MULTISET<{e}>")?,
            TypeRoot::Map(k, v) => write!(f, "MAP<{k}, {v}>")?,
            TypeRoot::Row(fields) => {
                f.write_str("ROW<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{}` {}", field.name.replace('`', "``"), field.data_type)?;
                    if let Some(d) = &field.description {
                        write!(f, " COMMENT '{}'", d.replace('\'', "''"))?;
                    }
                }
                f.write_str(">")?;
            }
            TypeRoot::Variant => f.write_str("VARIANT")?,
            TypeRoot::Blob => f.write_str("BLOB")?,
        }
        if !self.nullable {
            f.write_str(" NOT NULL")?;
        }
        Ok(())
    }
}

/// Why a type string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeParseError(pub String);

impl fmt::Display for TypeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TypeParseError {}

impl Serialize for DataType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for DataType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        DataType::from_json(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_paimon_type_strings() {
        for s in [
            "BIGINT NOT NULL",
            "STRING",
            "DECIMAL(10, 2)",
            "TIMESTAMP(3) WITH LOCAL TIME ZONE",
            "TIMESTAMP(6)",
            "BYTES",
            "VARCHAR(20) NOT NULL",
            "DATE",
            "TINYINT",
            "BOOLEAN",
        ] {
            let t: DataType = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
    }

    #[test]
    fn rejects_garbage() {
        assert!("BIGINTEGER".parse::<DataType>().is_err());
        assert!("DECIMAL(50, 2)".parse::<DataType>().is_err());
        assert!("VARCHAR(x)".parse::<DataType>().is_err());
    }

    #[test]
    fn parses_and_prints_nested_types() {
        let t: DataType = "ARRAY<ROW<k STRING, v DOUBLE NOT NULL>> NOT NULL"
            .parse()
            .unwrap();
        assert!(!t.nullable && t.is_nested());
        assert_eq!(
            t.to_string(),
            "ARRAY<ROW<`k` STRING, `v` DOUBLE NOT NULL>> NOT NULL"
        );
        assert_eq!(t.to_string().parse::<DataType>().unwrap(), t);
        let m: DataType = "map<string, decimal(10, 2)>".parse().unwrap();
        assert_eq!(m.to_string(), "MAP<STRING, DECIMAL(10, 2)>");
        let r: DataType = "STRUCT<`a b`: INT, c ARRAY<INT> COMMENT 'it''s'>"
            .parse()
            .unwrap();
        let TypeRoot::Row(fields) = &r.root else {
            panic!("{r:?}")
        };
        assert_eq!(fields[0].name, "a b");
        assert_eq!(fields[1].description.as_deref(), Some("it's"));
        assert_eq!(r.to_string().parse::<DataType>().unwrap(), r);
    }

    #[test]
    fn refuses_bad_nested_types_without_panicking() {
        for bad in [
            "ARRAY<>",
            "ARRAY<INT, INT>",
            "MAP<INT>",
            "MAP<ARRAY<INT>, INT>",
            "MULTISET<ROW<a INT>>",
            "ROW<a INT, a STRING>",
            "ROW<>",
            "ARRAY<INT",
            "ARRAY<INT>>",
            "ROW<a>",
            "ROW<`a INT>",
            "LIST<INT>",
        ] {
            assert!(bad.parse::<DataType>().is_err(), "{bad}");
        }
        let deep = format!("{}INT{}", "ARRAY<".repeat(10_000), ">".repeat(10_000));
        let e = deep.parse::<DataType>().unwrap_err();
        assert!(e.0.contains("nests deeper"), "{e}");
    }

    #[test]
    fn nested_types_use_paimons_json_form() {
        let java = r#"{"type":"ROW NOT NULL","fields":[{"id":3,"name":"tags","type":{"type":"ARRAY","element":"STRING NOT NULL"}},{"id":4,"name":"m","type":{"type":"MAP","key":"STRING NOT NULL","value":"BIGINT"},"description":"d"},{"id":5,"name":"s","type":{"type":"MULTISET","element":"INT"}}]}"#;
        let t: DataType = serde_json::from_str(java).unwrap();
        assert_eq!(t.highest_nested_id(), Some(5));
        let back: serde_json::Value = serde_json::to_value(&t).unwrap();
        assert_eq!(
            back,
            serde_json::from_str::<serde_json::Value>(java).unwrap()
        );
        // pypaimon adds a "nullable" key; it is ignored.
        let py = r#"{"type": "ARRAY", "element": "INT", "nullable": true}"#;
        assert_eq!(
            serde_json::from_str::<DataType>(py).unwrap().to_string(),
            "ARRAY<INT>"
        );
        assert!(serde_json::from_str::<DataType>(r#"{"type":"MAP","key":"INT"}"#).is_err());
        assert!(serde_json::from_str::<DataType>(
            r#"{"type":"ROW","fields":[{"name":"a","type":"INT"}]}"#
        )
        .is_err());
    }

    #[test]
    fn nested_types_map_to_arrow_as_paimon_lays_them_out_in_parquet() {
        let t: DataType = "ROW<a ARRAY<INT NOT NULL>, m MAP<STRING, BIGINT>, s MULTISET<STRING>>"
            .parse()
            .unwrap();
        let arrow = t.to_arrow();
        let ArrowType::Struct(fields) = &arrow else {
            panic!("{arrow}")
        };
        let ArrowType::List(element) = fields[0].data_type() else {
            panic!()
        };
        assert_eq!(
            (element.name().as_str(), element.is_nullable()),
            ("element", false)
        );
        let ArrowType::Map(entries, false) = fields[1].data_type() else {
            panic!()
        };
        assert_eq!(entries.name(), "key_value");
        let ArrowType::Map(counts, _) = fields[2].data_type() else {
            panic!()
        };
        let ArrowType::Struct(kv) = counts.data_type() else {
            panic!()
        };
        assert_eq!(kv[1].data_type(), &ArrowType::Int32);
        // Back from Arrow, a multiset reads as the map it is stored as.
        let back = DataType::from_arrow(&arrow, true).unwrap();
        // Arrow map keys are never null, so they come back NOT NULL (as pypaimon maps them).
        assert_eq!(back.to_string(), "ROW<`a` ARRAY<INT NOT NULL>, `m` MAP<STRING NOT NULL, BIGINT>, `s` MAP<STRING NOT NULL, INT NOT NULL>>");
    }

    #[test]
    fn nested_field_ids_are_given_depth_first_after_the_highest() {
        let mut t: DataType = "ROW<a ROW<x INT, y INT>, b ARRAY<ROW<z INT>>>"
            .parse()
            .unwrap();
        let mut highest = 6;
        t.reassign_nested_ids(&mut highest);
        assert_eq!(highest, 11);
        let TypeRoot::Row(f) = &t.root else { panic!() };
        assert_eq!((f[0].id, f[1].id), (7, 10));
        assert_eq!(t.highest_nested_id(), Some(11));
    }
}
