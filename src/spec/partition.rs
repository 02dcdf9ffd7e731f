//! Partition paths: `escape(key)=escape(value)/` per partition key, as Paimon's
//! `PartitionPathUtils` writes them.

use super::binary_row::Datum;

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
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The relative directory of a partition (`dt=2024-01-01/hr=10/`), or `""` when unpartitioned.
pub fn partition_path(keys: &[String], values: &[Datum], default_name: &str) -> String {
    let mut path = String::new();
    for (k, v) in keys.iter().zip(values) {
        let rendered = match v {
            Datum::Null => default_name.to_string(),
            Datum::String(s) if s.is_empty() => default_name.to_string(),
            other => other.to_string(),
        };
        path.push_str(&escape_path_name(k));
        path.push('=');
        path.push_str(&escape_path_name(&rendered));
        path.push('/');
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_paimon() {
        assert_eq!(escape_path_name("a/b:c=d"), "a%2Fb%3Ac%3Dd");
        assert_eq!(unescape_path_name("a%2Fb%3Ac%3Dd"), "a/b:c=d");
        assert_eq!(
            partition_path(
                &["dt".into()],
                &[Datum::String("2024-01-01".into())],
                "__D__"
            ),
            "dt=2024-01-01/"
        );
        assert_eq!(
            partition_path(&["dt".into()], &[Datum::Null], "__D__"),
            "dt=__D__/"
        );
    }
}
