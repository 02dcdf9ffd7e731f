//! Partitions and their buckets: the id of one (partition, bucket), and partition paths,
//! `escape(key)=escape(value)/` per partition key, as Paimon's `PartitionPathUtils` writes them.

use super::binary_row::Datum;

/// One bucket of one partition, as manifests name it: the partition's serialized BinaryRow and
/// the bucket number. Ordered by partition bytes, then bucket (the order writers and changelog
/// reads visit buckets in).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketId {
    pub partition: Vec<u8>,
    pub bucket: i32,
}

impl BucketId {
    pub fn new(partition: Vec<u8>, bucket: i32) -> Self {
        Self { partition, bucket }
    }
}

fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\u{01}'
            ..='\u{1F}'
                | '"'
                | '#'
                | '%'
                | '\''
                | '*'
                | '/'
                | ':'
                | '='
                | '?'
                | '\\'
                | '\u{7F}'
                | '{'
                | '}'
                | '['
                | ']'
                | '^'
    )
}

/// Escapes a path component: the characters Paimon escapes become `%XX` (uppercase hex).
pub fn escape_path_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if needs_escape(c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Reverses [`escape_path_name`].
pub fn unescape_path_name(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How partition values become path strings.
#[derive(Debug, Clone, Copy)]
pub struct PartitionNaming<'a> {
    /// `partition.default-name`, used for null and blank values.
    pub default_name: &'a str,
    /// `partition.legacy-name` (Paimon's default, true): values are rendered as their internal
    /// representation's `toString()` (DATE as days since the epoch, TIMESTAMP as ISO
    /// `LocalDateTime`); false renders them as a cast to STRING (`2024-01-01`).
    pub legacy: bool,
}

/// Each partition key with its value as text (the default name for a null or blank value), as
/// Paimon's catalogs list partitions.
pub fn partition_spec(
    keys: &[String],
    values: &[Datum],
    naming: PartitionNaming<'_>,
) -> Vec<(String, String)> {
    keys.iter()
        .zip(values)
        .map(|(k, v)| {
            let rendered = value_string(v, naming.legacy);
            let rendered = if rendered.trim().is_empty() {
                naming.default_name.to_string()
            } else {
                rendered
            };
            (k.clone(), rendered)
        })
        .collect()
}

/// The relative directory of a partition (`dt=2024-01-01/hr=10/`), or `""` when unpartitioned.
pub fn partition_path(keys: &[String], values: &[Datum], naming: PartitionNaming<'_>) -> String {
    let mut path = String::new();
    for (k, v) in partition_spec(keys, values, naming) {
        path.push_str(&escape_path_name(&k));
        path.push('=');
        path.push_str(&escape_path_name(&v));
        path.push('/');
    }
    path
}

/// A partition value as Paimon's partition computer renders it (empty for null).
pub fn value_string(v: &Datum, legacy: bool) -> String {
    match v {
        Datum::Null => String::new(),
        Datum::Float(f) => java_floating(*f as f64, true),
        Datum::Double(f) => java_floating(*f, false),
        Datum::Date(days) if legacy => days.to_string(),
        Datum::Time(millis) if legacy => millis.to_string(),
        Datum::Timestamp { millis, nanos, .. } if legacy => java_local_date_time(*millis, *nanos),
        other => other.to_string(),
    }
}

/// Java's `LocalDateTime.toString()`: minutes always, seconds when non-zero, then the fraction in
/// groups of three digits.
fn java_local_date_time(millis: i64, nanos_of_milli: i32) -> String {
    let secs = millis.div_euclid(1000);
    let nanos = (millis.rem_euclid(1000) as u32) * 1_000_000 + nanos_of_milli as u32;
    let Some(t) = arrow::temporal_conversions::timestamp_s_to_datetime(secs) else {
        return millis.to_string();
    };
    let mut s = t.format("%Y-%m-%dT%H:%M").to_string();
    let sec = secs.rem_euclid(60);
    if sec != 0 || nanos != 0 {
        s.push_str(&format!(":{sec:02}"));
    }
    if nanos != 0 {
        if nanos.is_multiple_of(1_000_000) {
            s.push_str(&format!(".{:03}", nanos / 1_000_000));
        } else if nanos.is_multiple_of(1000) {
            s.push_str(&format!(".{:06}", nanos / 1000));
        } else {
            s.push_str(&format!(".{nanos:09}"));
        }
    }
    s
}

/// Java's `Float.toString` / `Double.toString` for finite values: plain between 1e-3 and 1e7
/// (always with a fraction digit), computerized scientific notation (`1.0E10`) outside.
fn java_floating(v: f64, single: bool) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let shortest = if single {
        format!("{}", v as f32)
    } else {
        format!("{v}")
    };
    let abs = v.abs();
    if v == 0.0 || (1e-3..1e7).contains(&abs) {
        if shortest.contains('.') {
            shortest
        } else {
            format!("{shortest}.0")
        }
    } else {
        let sci = if single {
            format!("{:e}", v as f32)
        } else {
            format!("{v:e}")
        };
        let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exp}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_paimon() {
        assert_eq!(escape_path_name("a/b:c=d"), "a%2Fb%3Ac%3Dd");
        assert_eq!(unescape_path_name("a%2Fb%3Ac%3Dd"), "a/b:c=d");
        assert_eq!(
            unescape_path_name("%é%2"),
            "%é%2",
            "malformed escapes stay as they are"
        );
        let naming = PartitionNaming {
            default_name: "__D__",
            legacy: true,
        };
        let dt = |v: Datum| partition_path(&["dt".into()], &[v], naming);
        assert_eq!(dt(Datum::String("2024-01-01".into())), "dt=2024-01-01/");
        assert_eq!(dt(Datum::Null), "dt=__D__/");
        assert_eq!(dt(Datum::String(" ".into())), "dt=__D__/");
        assert_eq!(dt(Datum::String("a/b".into())), "dt=a%2Fb/");
    }

    #[test]
    fn renders_values_like_java() {
        assert_eq!(value_string(&Datum::Date(19000), true), "19000");
        assert_eq!(value_string(&Datum::Date(19000), false), "2022-01-08");
        let ts = |millis, nanos| Datum::Timestamp {
            millis,
            nanos,
            precision: 6,
        };
        assert_eq!(
            value_string(&ts(1_700_000_000_000, 0), true),
            "2023-11-14T22:13:20"
        );
        assert_eq!(
            value_string(&ts(1_699_999_980_000, 0), true),
            "2023-11-14T22:13"
        );
        assert_eq!(
            value_string(&ts(1_700_000_000_123, 0), true),
            "2023-11-14T22:13:20.123"
        );
        assert_eq!(
            value_string(&ts(1_700_000_000_123, 456_000), true),
            "2023-11-14T22:13:20.123456"
        );
        assert_eq!(value_string(&Datum::Double(1.0), true), "1.0");
        assert_eq!(value_string(&Datum::Double(1.5e10), true), "1.5E10");
        assert_eq!(value_string(&Datum::Float(0.25), true), "0.25");
        assert_eq!(value_string(&Datum::Boolean(true), true), "true");
    }
}
