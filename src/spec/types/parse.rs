//! Paimon's type syntax as text (`BIGINT NOT NULL`, `DECIMAL(10, 2)`, `ARRAY<ROW<k STRING, v DOUBLE>>`),
//! with the common SQL aliases: the parser behind `DataType::from_str`. Pure.

use std::str::FromStr;

use super::{check_nested, split_nullability, DataType, TypeParseError, TypeRoot, MAX_LENGTH};
use crate::spec::schema::DataField;

/// How deep types may nest in a type string (user input: bounded so parsing cannot exhaust the
/// stack; Paimon's own tables nest a few levels).
pub(crate) const MAX_NESTING: usize = 32;

impl FromStr for DataType {
    type Err = TypeParseError;

    /// Parses Paimon's type syntax; also accepts the common SQL aliases (INTEGER, VARCHAR, TEXT,
    /// STRUCT, ...) and nested types (`ARRAY<ROW<k STRING, v DOUBLE>>`, `MAP<STRING, INT>`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_type(s, 0)
    }
}

fn parse_type(s: &str, depth: usize) -> Result<DataType, TypeParseError> {
    let err = || TypeParseError(format!("unsupported or malformed type '{}'", s.trim()));
    let (body, nullable) = split_nullability(s.trim());
    let Some(open) = body.find('<') else {
        return parse_atomic(body, nullable).ok_or_else(err);
    };
    if depth >= MAX_NESTING {
        return Err(TypeParseError(format!(
            "type '{}' nests deeper than {MAX_NESTING} levels",
            s.trim()
        )));
    }
    let inner = body[open + 1..].strip_suffix('>').ok_or_else(err)?;
    let parts = split_top_level(inner).ok_or_else(err)?;
    let one = |parts: &[&str]| match parts {
        [p] => parse_type(p, depth + 1).map(Box::new),
        _ => Err(err()),
    };
    let root = match body[..open].trim().to_ascii_uppercase().as_str() {
        "ARRAY" => TypeRoot::Array(one(&parts)?),
        "MULTISET" => TypeRoot::Multiset(one(&parts)?),
        "MAP" => match parts[..] {
            [k, v] => TypeRoot::Map(
                Box::new(parse_type(k, depth + 1)?),
                Box::new(parse_type(v, depth + 1)?),
            ),
            _ => return Err(err()),
        },
        "ROW" | "STRUCT" => TypeRoot::Row(
            parts
                .iter()
                .enumerate()
                .map(|(i, p)| parse_row_field(p, i as i32, depth + 1).ok_or_else(err)?)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        _ => return Err(err()),
    };
    check_nested(&root)?;
    Ok(DataType { root, nullable })
}

/// `name TYPE [COMMENT 'text']` or `name: TYPE`; the name may be quoted with backticks or double
/// quotes. The id is a placeholder: the catalog gives nested fields their ids.
fn parse_row_field(s: &str, id: i32, depth: usize) -> Option<Result<DataField, TypeParseError>> {
    let s = s.trim();
    let (name, rest) = match s.chars().next()? {
        q @ ('`' | '"') => {
            let mut name = String::new();
            let mut chars = s[1..].char_indices().peekable();
            let end = loop {
                let (i, c) = chars.next()?;
                if c == q {
                    if chars.peek().map(|&(_, c)| c) == Some(q) {
                        chars.next();
                        name.push(q);
                        continue;
                    }
                    break i + 2;
                }
                name.push(c);
            };
            (name, &s[end..])
        }
        _ => {
            let end = s.find(|c: char| c.is_whitespace() || c == ':')?;
            (s[..end].to_string(), &s[end..])
        }
    };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let (ty, description) = match find_comment(rest) {
        Some((ty, comment)) => (ty, Some(comment)),
        None => (rest, None),
    };
    if name.is_empty() {
        return None;
    }
    Some(parse_type(ty, depth).map(|data_type| DataField {
        id,
        name,
        data_type,
        description,
    }))
}

/// Splits `TYPE COMMENT 'text'` (outside brackets) into the type and the unquoted comment.
fn find_comment(s: &str) -> Option<(&str, String)> {
    let upper = s.to_ascii_uppercase();
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            c if c.is_whitespace() && depth == 0 => {
                let after = upper[i..].trim_start();
                if let Some(q) = after.strip_prefix("COMMENT") {
                    let q = q.trim_start();
                    let start = s.len() - q.len();
                    let quoted = s[start..].strip_prefix('\'')?.strip_suffix('\'')?;
                    return Some((&s[..i], quoted.replace("''", "'")));
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits at the commas outside `<>`, `()` and quotes (`None` when brackets do not balance).
pub(crate) fn split_top_level(s: &str) -> Option<Vec<&str>> {
    let mut parts = vec![];
    let mut depth = 0i32;
    let mut quote = None;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '`' | '"' | '\'') => quote = Some(c),
            (None, '<' | '(') => depth += 1,
            (None, '>' | ')') => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            (None, ',') if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 || quote.is_some() {
        return None;
    }
    parts.push(&s[start..]);
    Some(parts)
}

/// An atomic type name with its parameters (`DECIMAL(10, 2)`, `TIMESTAMP(3) WITH LOCAL TIME ZONE`).
fn parse_atomic(s: &str, nullable: bool) -> Option<DataType> {
    let mut t = s.trim().to_ascii_uppercase();
    let mut ltz = false;
    for suffix in ["WITH LOCAL TIME ZONE", "WITH LOCAL TIMEZONE"] {
        if let Some(rest) = t.strip_suffix(suffix) {
            ltz = true;
            t = rest.trim_end().to_string();
        }
    }
    let (name, args) = match t.find('(') {
        Some(open) => {
            let close = t.rfind(')')?;
            if close < open || !t[close + 1..].trim().is_empty() {
                return None;
            }
            let args = t[open + 1..close]
                .split(',')
                .map(|a| a.trim().parse::<u32>().ok())
                .collect::<Option<Vec<_>>>()?;
            (t[..open].trim().to_string(), args)
        }
        None => (t.trim().to_string(), vec![]),
    };
    let arg = |i: usize, default: u32| args.get(i).copied().unwrap_or(default);
    let small = |v: u32| u8::try_from(v).ok();
    let root = match (name.as_str(), ltz) {
        ("BOOLEAN" | "BOOL", false) => TypeRoot::Boolean,
        ("VARIANT", false) => TypeRoot::Variant,
        ("BLOB", false) => TypeRoot::Blob,
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
                return None;
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
        _ => return None,
    };
    if let TypeRoot::Timestamp(p) | TypeRoot::LocalZonedTimestamp(p) | TypeRoot::Time(p) = root {
        if p > 9 {
            return None;
        }
    }
    Some(DataType { root, nullable })
}
