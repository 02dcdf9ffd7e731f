//! `snapshot/snapshot-N`: one committed version of a table (Paimon's `Snapshot`, JSON, version 3).
//! Null fields are omitted on write and unknown fields ignored on read, as Jackson does in Paimon.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Snapshot file format version tidelake writes.
pub const SNAPSHOT_VERSION: i32 = 3;

/// The commit identifier batch writers use (Java's `Long.MAX_VALUE`).
pub const BATCH_COMMIT_IDENTIFIER: i64 = i64::MAX;

/// What produced a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CommitKind {
    Append,
    Compact,
    Overwrite,
    Analyze,
}

impl CommitKind {
    /// The name Paimon writes (`APPEND`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            CommitKind::Append => "APPEND",
            CommitKind::Compact => "COMPACT",
            CommitKind::Overwrite => "OVERWRITE",
            CommitKind::Analyze => "ANALYZE",
        }
    }
}

impl fmt::Display for CommitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The content of one `snapshot-N` file; field order follows Java's serializer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub version: i32,
    pub id: i64,
    pub schema_id: i64,
    pub base_manifest_list: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_manifest_list_size: Option<i64>,
    pub delta_manifest_list: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_manifest_list_size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_manifest_list: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_manifest_list_size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_manifest: Option<String>,
    pub commit_user: String,
    pub commit_identifier: i64,
    pub commit_kind: CommitKind,
    pub time_millis: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_record_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_record_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_record_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_row_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_version: Option<String>,
}

impl Snapshot {
    /// The manifest lists it names: base, delta, then changelog (when it has one).
    pub fn manifest_lists(&self) -> impl Iterator<Item = &String> {
        [&self.base_manifest_list, &self.delta_manifest_list]
            .into_iter()
            .chain(self.changelog_manifest_list.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_omits_nulls() {
        let json = r#"{"version":3,"id":2,"schemaId":0,"baseManifestList":"a","deltaManifestList":"b",
          "totalRecordCount":4,"deltaRecordCount":2,"commitUser":"u","commitIdentifier":9223372036854775807,
          "commitKind":"APPEND","timeMillis":1,"someFutureField":{"x":1}}"#;
        let s: Snapshot = serde_json::from_str(json).unwrap();
        assert_eq!(s.commit_identifier, BATCH_COMMIT_IDENTIFIER);
        assert_eq!(s.commit_kind, CommitKind::Append);
        let back = serde_json::to_string(&s).unwrap();
        assert!(!back.contains("null"), "{back}");
        assert!(back.starts_with(r#"{"version":3,"id":2,"schemaId":0"#));
    }
}
