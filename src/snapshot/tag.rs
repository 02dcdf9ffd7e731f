//! Tags: named, pinned snapshots in `tag/tag-<name>` (the snapshot's JSON). A tag keeps its files
//! alive through snapshot expiry and can be read, rolled back to, and deleted.

use bytes::Bytes;
use snafu::ResultExt;

use crate::error::{invalid, AlreadyExistsSnafu, ErrorKind, JsonSnafu, NotFoundSnafu, Result};
use crate::io::FileIo;
use crate::spec::Snapshot;

#[derive(Debug, Clone)]
pub struct TagManager {
    io: FileIo,
    table_path: String,
    /// The table's name, for errors.
    table: String,
}

impl TagManager {
    /// The tags of the table at `table_path`, named `table` in errors.
    pub fn new(io: FileIo, table_path: impl Into<String>, table: impl Into<String>) -> Self {
        Self {
            io,
            table_path: table_path.into(),
            table: table.into(),
        }
    }

    /// The file of tag `name`.
    pub fn path(&self, name: &str) -> String {
        format!("{}/tag/tag-{name}", self.table_path)
    }

    fn validate(name: &str) -> Result<()> {
        if name.trim().is_empty() {
            return invalid!("Tag name shouldn't be blank.");
        }
        if name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return invalid!(
                "invalid tag name '{name}': it must not contain '/' or start with '.'"
            );
        }
        Ok(())
    }

    /// Creates tag `name` pinning `snapshot`; an existing tag is an error.
    pub async fn create(&self, name: &str, snapshot: &Snapshot) -> Result<()> {
        Self::validate(name)?;
        let path = self.path(name);
        let json = serde_json::to_vec_pretty(snapshot).context(JsonSnafu { path: &path })?;
        if !self.io.write_if_absent(&path, Bytes::from(json)).await? {
            return AlreadyExistsSnafu {
                message: format!("Tag '{name}' already exists."),
            }
            .fail();
        }
        Ok(())
    }

    /// The snapshot a tag pins.
    pub async fn get(&self, name: &str) -> Result<Snapshot> {
        Self::validate(name)?;
        let path = self.path(name);
        let bytes = match self.io.read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return NotFoundSnafu {
                    message: format!("Tag '{name}' doesn't exist in table {}.", self.table),
                }
                .fail()
            }
            Err(e) => return Err(e),
        };
        serde_json::from_slice(&bytes).context(JsonSnafu { path })
    }

    /// All tags with their snapshots, sorted by snapshot id then name.
    pub async fn list(&self) -> Result<Vec<(String, Snapshot)>> {
        let mut tags = Vec::new();
        for f in self.io.list(&format!("{}/tag", self.table_path)).await? {
            if let Some(name) = f.name().strip_prefix("tag-") {
                tags.push((name.to_string(), self.get(name).await?));
            }
        }
        tags.sort_by(|a, b| (a.1.id, &a.0).cmp(&(b.1.id, &b.0)));
        Ok(tags)
    }

    /// Removes the tag file only (the caller cleans files nothing else references).
    pub async fn delete(&self, name: &str) -> Result<Snapshot> {
        let snapshot = self.get(name).await?;
        self.io.delete(&self.path(name)).await?;
        Ok(snapshot)
    }
}
