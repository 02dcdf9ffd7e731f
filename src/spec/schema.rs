//! `schema/schema-N`: a table's columns, keys and options at one schema version
//! (Paimon's `TableSchema`, JSON written by `SchemaSerializer`, current version 3).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::types::DataField;

/// Schema file format version tidelake writes.
pub const SCHEMA_VERSION: i32 = 3;

/// The content of one `schema-N` file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableSchema {
    #[serde(default = "default_version")]
    pub version: i32,
    pub id: i64,
    pub fields: Vec<DataField>,
    pub highest_field_id: i32,
    #[serde(default)]
    pub partition_keys: Vec<String>,
    #[serde(default)]
    pub primary_keys: Vec<String>,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default)]
    pub time_millis: i64,
}

fn default_version() -> i32 {
    1
}

impl TableSchema {
    pub fn field(&self, name: &str) -> Option<&DataField> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// Primary key fields minus partition keys: the `_KEY_` columns of data files and the default
    /// bucket key (Paimon's `trimmedPrimaryKeys`).
    pub fn trimmed_primary_keys(&self) -> Vec<String> {
        self.primary_keys
            .iter()
            .filter(|k| !self.partition_keys.contains(k))
            .cloned()
            .collect()
    }

    pub fn is_primary_key_table(&self) -> bool {
        !self.primary_keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_pypaimon_schema_with_null_comment() {
        let json = r#"{"version":3,"id":0,"fields":[{"id":0,"name":"id","type":"BIGINT NOT NULL"},
            {"id":1,"name":"name","type":"STRING"}],"highestFieldId":1,"partitionKeys":[],
            "primaryKeys":["id"],"options":{"bucket":"2"},"comment":null,"timeMillis":1}"#;
        let s: TableSchema = serde_json::from_str(json).unwrap();
        assert_eq!(s.trimmed_primary_keys(), vec!["id".to_string()]);
        assert!(!s.fields[0].data_type.nullable);
        let back = serde_json::to_string(&s).unwrap();
        assert!(
            !back.contains("comment"),
            "Java omits a null comment: {back}"
        );
    }
}
