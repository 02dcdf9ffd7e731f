//! Reading data files written under older schemas: each file's `schemaId` names the schema it was
//! written with, and its columns are matched to the current schema by field id.
//!
//! ```text
//!  current column (id 7, "total" BIGINT) ──id──► file schema 2: id 7 is "amount" INT
//!      read "amount", cast INT -> BIGINT, call it "total"
//!  current column (id 9, "note")          ──id──► absent in schema 2: NULLs
//!  file column of a dropped id            ──────► not read
//! ```
//!
//! Key columns (`_KEY_*`) and system columns never change (primary keys cannot be renamed or
//! retyped), so only value columns are mapped. Schemas are loaded once per table handle, before
//! the (blocking) reads that need them.

use std::collections::HashMap;
use std::sync::Arc;

use super::Table;
use crate::error::{InternalSnafu, Result};
use crate::spec::{DataFileMeta, TableSchema};

/// For one file: current column name -> the column's name in the file (`None`: not in the file,
/// read as NULL). Columns not listed keep their names.
pub(crate) type FileColumns = Arc<HashMap<String, Option<String>>>;

/// A data file to read, with how its columns map to the current schema.
#[derive(Debug, Clone)]
pub(crate) struct FileRef {
    pub(crate) path: String,
    pub(crate) columns: Option<FileColumns>,
    /// Read only this part of the file ([`super::scan::Split::rows`]): its rows are those of the
    /// row groups that start in the range, and a position counts from the part's first row.
    pub(crate) part: Option<std::ops::Range<u64>>,
}

/// The format of a data file tidelake cannot read on its own, by its name's extension (pure):
/// `.blob` files are read only beside the other files of their row ids (a data-evolution read of
/// the table's current rows; `read/evolved.rs`), never as rows of their own.
fn unread_format(file_name: &str) -> Option<&'static str> {
    if file_name.ends_with(".blob") {
        Some("BLOB")
    } else if file_name.ends_with(".lance") {
        Some("Lance")
    } else {
        None
    }
}

/// The mapping of files written with `old` to `current` (`None` when nothing differs).
fn mapping(current: &TableSchema, old: &TableSchema) -> Option<FileColumns> {
    let by_id: HashMap<i32, &str> = old.fields.iter().map(|f| (f.id, f.name.as_str())).collect();
    let mut map = HashMap::new();
    for f in &current.fields {
        match by_id.get(&f.id) {
            Some(name) if *name == f.name => {}
            Some(name) => {
                map.insert(f.name.clone(), Some(name.to_string()));
            }
            None => {
                map.insert(f.name.clone(), None);
            }
        }
    }
    // Renamed primary keys: their `_KEY_` columns carry the old name in old files.
    for k in current.trimmed_primary_keys() {
        let Some(f) = current.field(&k) else { continue };
        if let Some(old_name) = by_id.get(&f.id).filter(|n| **n != k) {
            map.insert(format!("_KEY_{k}"), Some(format!("_KEY_{old_name}")));
        }
    }
    // A current name that an old, different column had must not pick that column up.
    for f in &old.fields {
        let renamed_away = current
            .fields
            .iter()
            .all(|c| c.id != f.id || c.name != f.name);
        if renamed_away && current.field(&f.name).is_some() && !map.contains_key(&f.name) {
            map.insert(f.name.clone(), None);
        }
    }
    (!map.is_empty()).then(|| Arc::new(map))
}

impl Table {
    /// Loads the schemas `files` were written with (once per table handle).
    pub(crate) async fn load_file_schemas<'a>(
        &self,
        files: impl IntoIterator<Item = &'a DataFileMeta>,
    ) -> Result<()> {
        let current = self.schema().id;
        let mut wanted: Vec<i64> = files
            .into_iter()
            .map(|f| f.schema_id)
            .filter(|id| *id != current)
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        for id in wanted {
            if self
                .file_columns_cache()
                .lock()
                .map(|c| c.contains_key(&id))
                .unwrap_or(false)
            {
                continue;
            }
            let old = self.schema_manager().schema(id).await?;
            let map = mapping(self.schema(), &old);
            if let Ok(mut c) = self.file_columns_cache().lock() {
                c.insert(id, map);
            }
        }
        Ok(())
    }

    /// How a data file's columns map to the current schema; its schema must have been loaded by
    /// [`Table::load_file_schemas`].
    pub(crate) fn file_ref(&self, dir: &str, file: &DataFileMeta) -> Result<FileRef> {
        // Every data file read goes through here: one refusal for the formats not read yet.
        if let Some(format) = unread_format(&file.file_name) {
            return crate::error::UnsupportedSnafu {
                message: format!(
                    "table {}: data file {} is in the {format} format; reading {format} data \
                     files here (only a table's rows read them) is not supported by tidelake yet",
                    self.identifier(),
                    file.file_name
                ),
            }
            .fail();
        }
        let path = Self::data_path(dir, file);
        Ok(FileRef {
            columns: self.file_columns(file, &path)?,
            path,
            part: None,
        })
    }

    /// Where a data file of bucket directory `dir` is.
    pub(crate) fn data_path(dir: &str, file: &DataFileMeta) -> String {
        match &file.external_path {
            Some(p) => p.clone(),
            None => format!("{dir}/{}", file.file_name),
        }
    }

    /// How the columns of `file` (at `path`) map to the current schema; its schema must have
    /// been loaded by [`Table::load_file_schemas`].
    pub(crate) fn file_columns(
        &self,
        file: &DataFileMeta,
        path: &str,
    ) -> Result<Option<FileColumns>> {
        if file.schema_id == self.schema().id {
            return Ok(None);
        }
        let columns = self
            .file_columns_cache()
            .lock()
            .ok()
            .and_then(|c| c.get(&file.schema_id).cloned());
        match columns {
            Some(columns) => Ok(columns),
            None => InternalSnafu {
                message: format!(
                    "schema {} of {path} was not loaded before reading it",
                    file.schema_id
                ),
            }
            .fail(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(json_fields: &str, id: i64) -> TableSchema {
        serde_json::from_str(&format!(
            r#"{{"version":3,"id":{id},"fields":[{json_fields}],"highestFieldId":9,"timeMillis":0}}"#
        ))
        .unwrap()
    }

    #[test]
    fn maps_renamed_added_and_reused_names() {
        let old = schema(
            r#"{"id":0,"name":"id","type":"INT"},{"id":1,"name":"a","type":"INT"},{"id":2,"name":"b","type":"INT"}"#,
            0,
        );
        // a renamed to c, b dropped, a new column named a (id 3), d added (id 4).
        let current = schema(
            r#"{"id":0,"name":"id","type":"INT"},{"id":1,"name":"c","type":"BIGINT"},{"id":3,"name":"a","type":"INT"},{"id":4,"name":"d","type":"INT"}"#,
            1,
        );
        let m = mapping(&current, &old).unwrap();
        assert_eq!(m.get("c"), Some(&Some("a".to_string())));
        assert_eq!(
            m.get("a"),
            Some(&None),
            "the new 'a' must not read the old 'a'"
        );
        assert_eq!(m.get("d"), Some(&None));
        assert_eq!(m.get("id"), None);
        assert!(mapping(&old, &old).is_none());
    }
}
