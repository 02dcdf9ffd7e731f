//! The schema manager: the versioned `schema/schema-N` files of one table, and schema evolution
//! (`change`): the next version is written with create-if-absent, so concurrent ALTERs never
//! overwrite each other. `layout` derives what a schema version implies for rows (keys,
//! buckets, merge engine, file schema); a schema change is valid only if its layout is.

pub mod change;
pub mod layout;

pub use layout::TableLayout;

use bytes::Bytes;
use snafu::ResultExt;

use crate::error::{ConflictSnafu, CorruptSnafu, JsonSnafu, NotFoundSnafu, Result};
use crate::io::FileIo;
use crate::spec::TableSchema;

/// Reads and creates the schema files of the table at `table_path`.
#[derive(Debug, Clone)]
pub struct SchemaManager {
    io: FileIo,
    table_path: String,
}

impl SchemaManager {
    pub fn new(io: FileIo, table_path: impl Into<String>) -> Self {
        Self {
            io,
            table_path: table_path.into(),
        }
    }

    fn dir(&self) -> String {
        format!("{}/schema", self.table_path)
    }

    pub fn schema_path(&self, id: i64) -> String {
        format!("{}/schema/schema-{id}", self.table_path)
    }

    /// Schema ids present, sorted numerically.
    pub async fn list_ids(&self) -> Result<Vec<i64>> {
        self.io.list_numbered(&self.dir(), "schema-").await
    }

    /// The newest schema, or `None` when the table has none (it does not exist). The directory
    /// is listed once per table and warehouse handle; after that the id last seen is probed (it
    /// must still exist, and the ids after it are taken while they exist: other servers' ALTERs),
    /// so loading a table for a query costs no listing.
    pub async fn latest(&self) -> Result<Option<TableSchema>> {
        let dir = self.dir();
        if let Some(known) = self.io.hint(&dir) {
            if let Some(mut version) = self.io.version(&self.schema_path(known)).await? {
                let mut id = known;
                while let Some(v) = self.io.version(&self.schema_path(id + 1)).await? {
                    (id, version) = (id + 1, v);
                }
                self.io.set_hint(&dir, id);
                let path = self.schema_path(id);
                let bytes = self.io.read_version(&path, &version).await?;
                return Ok(Some(self.parse(id, &path, &bytes)?));
            }
        }
        match self.list_ids().await?.last() {
            Some(id) => {
                self.io.set_hint(&dir, *id);
                Ok(Some(self.schema(*id).await?))
            }
            None => {
                self.io.forget_hint(&dir);
                Ok(None)
            }
        }
    }

    pub async fn schema(&self, id: i64) -> Result<TableSchema> {
        let path = self.schema_path(id);
        let bytes = match self.io.read_immutable(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => {
                return NotFoundSnafu {
                    message: format!("schema {id} not found at {path}"),
                }
                .fail()
            }
            Err(e) => return Err(e),
        };
        self.parse(id, &path, &bytes)
    }

    /// Schema `id` from the bytes of its file at `path`.
    fn parse(&self, id: i64, path: &str, bytes: &[u8]) -> Result<TableSchema> {
        let schema: TableSchema = match serde_json::from_slice(bytes) {
            Ok(s) => s,
            Err(e) => return Err(e).context(JsonSnafu { path }),
        };
        if schema.id != id {
            return CorruptSnafu {
                path,
                message: format!("contains schema id {}", schema.id),
            }
            .fail();
        }
        Ok(schema)
    }

    /// Applies `changes` to the latest schema and writes the result as the next version; a
    /// concurrent change that took the id first makes it retry on top of that one. Returns the
    /// new schema. `table` names the table in errors.
    pub async fn commit(
        &self,
        table: &str,
        changes: &[change::SchemaChange],
        now_millis: i64,
    ) -> Result<TableSchema> {
        for _ in 0..20 {
            let Some(latest) = self.latest().await? else {
                return NotFoundSnafu {
                    message: format!("table '{table}' does not exist"),
                }
                .fail();
            };
            let next = change::apply(&latest, table, changes, now_millis)?;
            if self.create(&next).await? {
                return Ok(next);
            }
        }
        ConflictSnafu {
            table: table.to_string(),
            message: "other schema changes kept taking the next schema id".to_string(),
        }
        .fail()
    }

    /// Writes `schema` as `schema-<id>` if no such file exists; `Ok(false)` if it already did.
    pub async fn create(&self, schema: &TableSchema) -> Result<bool> {
        let path = self.schema_path(schema.id);
        let json = serde_json::to_vec_pretty(schema).context(JsonSnafu { path: &path })?;
        self.io.write_if_absent(&path, Bytes::from(json)).await
    }
}
