//! Paimon's logical data types as they appear in `schema-N` files (`"BIGINT NOT NULL"`,
//! `"DECIMAL(10, 2)"`, `"TIMESTAMP(3) WITH LOCAL TIME ZONE"`), and their Arrow equivalents.
//!
//! Plain data: parsing, printing and mapping only. Nested types (ARRAY/MAP/ROW) are not supported yet
//! and are rejected with a clear error when a schema names them.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, TimeUnit};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Length Paimon prints as `STRING` / `BYTES` (VARCHAR / VARBINARY of maximal length).
pub const MAX_LENGTH: u32 = i32::MAX as u32;

/// The root of a Paimon type, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TypeRoot {
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    Decimal { precision: u8, scale: u8 },
    Char(u32),
    VarChar(u32),
    Binary(u32),
    VarBinary(u32),
    Date,
    Time(u8),
    Timestamp(u8),
    LocalZonedTimestamp(u8),
}

/// A Paimon data type: a root plus nullability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataType {
    pub root: TypeRoot,
    pub nullable: bool,
}

impl DataType {
    pub fn new(root: TypeRoot, nullable: bool) -> Self {
        Self { root, nullable }
    }

    pub fn with_nullable(self, nullable: bool) -> Self {
        Self { nullable, ..self }
    }

    /// Whether values of this type are stored inline in a BinaryRow's fixed 8-byte slot.
    pub fn is_fixed_length(&self) -> bool {
        match self.root {
            TypeRoot::Decimal { precision, .. } => precision <= 18,
            TypeRoot::Timestamp(p) | TypeRoot::LocalZonedTimestamp(p) => p <= 3,
            TypeRoot::Char(_)
            | TypeRoot::VarChar(_)
            | TypeRoot::Binary(_)
            | TypeRoot::VarBinary(_) => false,
            _ => true,
        }
    }

    pub fn is_string(&self) -> bool {
        matches!(self.root, TypeRoot::Char(_) | TypeRoot::VarChar(_))
    }

    /// The Arrow type tidelake reads and writes for this Paimon type.
    pub fn to_arrow(&self) -> ArrowType {
        match self.root {
            TypeRoot::Boolean => ArrowType::Boolean,
            TypeRoot::TinyInt => ArrowType::Int8,
            TypeRoot::SmallInt => ArrowType::Int16,
            TypeRoot::Int => ArrowType::Int32,
            TypeRoot::BigInt => ArrowType::Int64,
            TypeRoot::Float => ArrowType::Float32,
            TypeRoot::Double => ArrowType::Float64,
            TypeRoot::Decimal { precision, scale } => ArrowType::Decimal128(precision, scale as i8),
            TypeRoot::Char(_) | TypeRoot::VarChar(_) => ArrowType::Utf8,
            TypeRoot::Binary(_) | TypeRoot::VarBinary(_) => ArrowType::Binary,
            TypeRoot::Date => ArrowType::Date32,
            TypeRoot::Time(_) => ArrowType::Time32(TimeUnit::Millisecond),
            TypeRoot::Timestamp(p) => ArrowType::Timestamp(time_unit(p), None),
            TypeRoot::LocalZonedTimestamp(p) => {
                ArrowType::Timestamp(time_unit(p), Some(Arc::from("UTC")))
            }
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
            _ => return None,
        };
        Some(DataType::new(root, nullable))
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
        match self.root {
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

impl FromStr for DataType {
    type Err = TypeParseError;

    /// Parses Paimon's type syntax; also accepts the common SQL aliases (INTEGER, VARCHAR, TEXT, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || TypeParseError(format!("unsupported or malformed type '{s}'"));
        let mut t = s.trim().to_ascii_uppercase();
        let mut nullable = true;
        if let Some(rest) = t.strip_suffix("NOT NULL") {
            nullable = false;
            t = rest.trim_end().to_string();
        } else if let Some(rest) = t.strip_suffix(" NULL") {
            t = rest.trim_end().to_string();
        }
        let mut ltz = false;
        for suffix in ["WITH LOCAL TIME ZONE", "WITH LOCAL TIMEZONE"] {
            if let Some(rest) = t.strip_suffix(suffix) {
                ltz = true;
                t = rest.trim_end().to_string();
            }
        }
        let (name, args) = match t.find('(') {
            Some(open) => {
                let close = t.rfind(')').ok_or_else(err)?;
                if close < open || !t[close + 1..].trim().is_empty() {
                    return Err(err());
                }
                let args = t[open + 1..close]
                    .split(',')
                    .map(|a| a.trim().parse::<u32>().map_err(|_| err()))
                    .collect::<Result<Vec<_>, _>>()?;
                (t[..open].trim().to_string(), args)
            }
            None => (t.trim().to_string(), vec![]),
        };
        let arg = |i: usize, default: u32| args.get(i).copied().unwrap_or(default);
        let small = |v: u32| u8::try_from(v).map_err(|_| err());
        let root = match (name.as_str(), ltz) {
            ("BOOLEAN" | "BOOL", false) => TypeRoot::Boolean,
            ("TINYINT", false) => TypeRoot::TinyInt,
            ("SMALLINT", false) => TypeRoot::SmallInt,
            ("INT" | "INTEGER", false) => TypeRoot::Int,
            ("BIGINT", false) => TypeRoot::BigInt,
            ("FLOAT" | "REAL", false) => TypeRoot::Float,
            ("DOUBLE" | "DOUBLE PRECISION", false) => TypeRoot::Double,
            ("DECIMAL" | "NUMERIC" | "DEC", false) => {
                let precision = small(arg(0, 10))?;
                let scale = small(arg(1, 0))?;
                if precision == 0 || precision > 38 || scale > precision {
                    return Err(err());
                }
                TypeRoot::Decimal { precision, scale }
            }
            ("STRING" | "TEXT", false) => TypeRoot::VarChar(MAX_LENGTH),
            ("VARCHAR", false) => TypeRoot::VarChar(arg(0, MAX_LENGTH)),
            ("CHAR", false) => TypeRoot::Char(arg(0, 1)),
            ("BYTES", false) => TypeRoot::VarBinary(MAX_LENGTH),
            ("VARBINARY", false) => TypeRoot::VarBinary(arg(0, MAX_LENGTH)),
            ("BINARY", false) => TypeRoot::Binary(arg(0, 1)),
            ("DATE", false) => TypeRoot::Date,
            ("TIME", false) => TypeRoot::Time(small(arg(0, 0))?),
            ("TIMESTAMP", false) => TypeRoot::Timestamp(small(arg(0, 6))?),
            ("TIMESTAMP", true) => TypeRoot::LocalZonedTimestamp(small(arg(0, 6))?),
            ("TIMESTAMP_LTZ", false) => TypeRoot::LocalZonedTimestamp(small(arg(0, 6))?),
            _ => return Err(err()),
        };
        if let TypeRoot::Timestamp(p) | TypeRoot::LocalZonedTimestamp(p) | TypeRoot::Time(p) = root
        {
            if p > 9 {
                return Err(err());
            }
        }
        Ok(DataType { root, nullable })
    }
}

impl Serialize for DataType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DataType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        match value {
            serde_json::Value::String(s) => s.parse().map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "nested type {other} is not supported yet"
            ))),
        }
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
}
