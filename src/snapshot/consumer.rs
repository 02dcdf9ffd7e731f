//! Consumers (Paimon's `consumer/consumer-<id>`): a streaming reader's progress, `{"nextSnapshot":
//! N}`. Snapshot expiry keeps every snapshot a live consumer has not read; a consumer whose file
//! was not updated within `consumer.expiration-time` is abandoned and removed.

use bytes::Bytes;

use crate::error::{invalid, Result};
use crate::io::FileIo;

/// Reads and writes the consumers of one table.
#[derive(Debug, Clone)]
pub struct ConsumerManager {
    io: FileIo,
    table_path: String,
}

/// A consumer id must be usable as a file name.
pub fn validate_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && id != "."
        && id != "..";
    if !ok {
        return invalid!(
            "consumer id '{id}' must be 1-200 characters of letters, digits, '-', '_' or '.'"
        );
    }
    Ok(())
}

impl ConsumerManager {
    pub fn new(io: FileIo, table_path: impl Into<String>) -> Self {
        Self {
            io,
            table_path: table_path.into(),
        }
    }

    fn dir(&self) -> String {
        format!("{}/consumer", self.table_path)
    }

    fn path(&self, id: &str) -> String {
        format!("{}/consumer-{id}", self.dir())
    }

    /// The next snapshot consumer `id` reads, if it exists.
    pub async fn next_snapshot(&self, id: &str) -> Result<Option<i64>> {
        validate_id(id)?;
        match self.io.read(&self.path(id)).await {
            Ok(bytes) => Ok(parse(&bytes)),
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Records that consumer `id` reads `next` next.
    pub async fn record(&self, id: &str, next: i64) -> Result<()> {
        validate_id(id)?;
        let body = serde_json::json!({ "nextSnapshot": next }).to_string();
        self.io.write(&self.path(id), Bytes::from(body)).await
    }

    /// The lowest `nextSnapshot` of live consumers; consumers idle longer than `expiration_millis`
    /// are removed first.
    pub async fn min_next_snapshot(
        &self,
        now_millis: i64,
        expiration_millis: Option<i64>,
    ) -> Result<Option<i64>> {
        let mut min: Option<i64> = None;
        for f in self.io.list(&self.dir()).await? {
            if !f.name().starts_with("consumer-") {
                continue;
            }
            if let Some(exp) = expiration_millis {
                if f.last_modified_millis + exp < now_millis {
                    tracing::info!(path = %f.path, "removing expired consumer");
                    self.io.delete(&f.path).await?;
                    continue;
                }
            }
            let next = match self.io.read(&f.path).await {
                Ok(bytes) => parse(&bytes),
                Err(e) if e.kind() == crate::error::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            };
            if let Some(n) = next {
                min = Some(min.map_or(n, |m| m.min(n)));
            }
        }
        Ok(min)
    }
}

fn parse(bytes: &[u8]) -> Option<i64> {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v.get("nextSnapshot").and_then(|n| n.as_i64()))
}
