//! The snapshot manager: `snapshot/snapshot-N` files of one table and the `LATEST` / `EARLIEST`
//! hints. The same manager, over `changelog/changelog-N`, keeps the long-lived changelogs of a
//! decoupled changelog lifecycle (Paimon's `ChangelogManager`: expired snapshots' metadata kept
//! for their changelog files, in the snapshot's JSON).
//!
//! Hints are only hints (pypaimon never writes `EARLIEST`; a crash or another server's commit can
//! leave `LATEST` stale): the latest id is found by probing the ids after the hint until one is
//! missing; only without a usable hint does the directory listing decide, parsed and sorted
//! numerically. On object stores a listing is the slow, paged request, so the hot path never lists.

pub mod consumer;
pub mod expire;
pub mod tag;

use bytes::Bytes;
use snafu::ResultExt;

use crate::error::{CorruptSnafu, ErrorKind, JsonSnafu, NotFoundSnafu, Result};
use crate::io::FileIo;
use crate::spec::Snapshot;

/// How many ids past the `LATEST` hint are probed before the directory is listed instead.
pub const MAX_PROBES: usize = 32;

#[derive(Debug, Clone)]
pub struct SnapshotManager {
    io: FileIo,
    table_path: String,
    /// `snapshot` or `changelog`: the directory, and the file prefix with a `-`.
    kind: &'static str,
}

impl SnapshotManager {
    pub fn new(io: FileIo, table_path: impl Into<String>) -> Self {
        Self {
            io,
            table_path: table_path.into(),
            kind: "snapshot",
        }
    }

    /// The manager of a table's long-lived changelogs (`changelog/changelog-N`).
    pub fn changelogs(io: FileIo, table_path: impl Into<String>) -> Self {
        Self {
            io,
            table_path: table_path.into(),
            kind: "changelog",
        }
    }

    fn dir(&self) -> String {
        format!("{}/{}", self.table_path, self.kind)
    }

    pub fn snapshot_path(&self, id: i64) -> String {
        format!("{}/{}/{}-{id}", self.table_path, self.kind, self.kind)
    }

    /// Snapshot ids present, sorted numerically (`snapshot-10` after `snapshot-9`).
    pub async fn list_ids(&self) -> Result<Vec<i64>> {
        self.io
            .list_numbered(&self.dir(), &format!("{}-", self.kind))
            .await
    }

    /// Writes (or rewrites) long-lived changelog `s` (its snapshot's JSON).
    pub async fn write_changelog(&self, s: &Snapshot) -> Result<()> {
        let path = self.snapshot_path(s.id);
        let json = serde_json::to_vec_pretty(s).context(JsonSnafu { path: &path })?;
        self.io.write(&path, Bytes::from(json)).await
    }

    /// The id a hint file names: `None` when it is missing or unreadable as an id (a torn or
    /// foreign hint is only a hint); a failed read is an error, not a reason to fall back on a
    /// listing that may lag behind the newest puts.
    async fn read_hint(&self, name: &str) -> Result<Option<i64>> {
        let bytes = match self.io.read(&format!("{}/{name}", self.dir())).await {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|v| *v > 0))
    }

    /// The newest snapshot id, or `None` for a table without snapshots. No listing when the hint
    /// is right or a few commits behind: from the `LATEST` hint the next ids are probed (one HEAD
    /// each) until one is missing, as Paimon's hint lookup does; the directory is listed only when
    /// there is no hint, or it names a snapshot that is gone, or more than [`MAX_PROBES`] commits
    /// landed after it.
    pub async fn latest_id(&self) -> Result<Option<i64>> {
        Ok(self.find_latest().await?.map(|(id, _)| id))
    }

    /// [`Self::latest_id`], with the version ([`FileIo::version`]) of the snapshot file when the
    /// probes saw it.
    async fn find_latest(&self) -> Result<Option<(i64, Option<String>)>> {
        if let Some(hint) = self.read_hint("LATEST").await? {
            let mut newest: Option<(i64, String)> = None;
            let mut id = hint;
            let mut ended = false;
            for _ in 0..MAX_PROBES {
                match self.io.version(&self.snapshot_path(id + 1)).await? {
                    Some(v) => {
                        id += 1;
                        newest = Some((id, v));
                    }
                    None => {
                        ended = true;
                        break;
                    }
                }
            }
            if ended {
                if let Some((id, v)) = newest {
                    return Ok(Some((id, Some(v))));
                }
                // Nothing follows the hint; it counts only if its snapshot is there (a rollback
                // or an expiry can leave a hint naming a deleted one).
                if let Some(v) = self.io.version(&self.snapshot_path(hint)).await? {
                    return Ok(Some((hint, Some(v))));
                }
            }
        }
        // A listing may lag behind the newest puts: what follows its last id is probed too.
        let Some(mut id) = self.list_ids().await?.last().copied() else {
            return Ok(None);
        };
        let mut version = None;
        while let Some(v) = self.io.version(&self.snapshot_path(id + 1)).await? {
            id += 1;
            version = Some(v);
        }
        Ok(Some((id, version)))
    }

    /// The oldest snapshot id still present.
    pub async fn earliest_id(&self) -> Result<Option<i64>> {
        Ok(self.earliest_and_hint().await?.0)
    }

    /// The oldest snapshot id still present, and what the `EARLIEST` hint says (unverified), from
    /// one read of the hint.
    pub async fn earliest_and_hint(&self) -> Result<(Option<i64>, Option<i64>)> {
        let hint = self.read_hint("EARLIEST").await?;
        if let Some(hint) = hint {
            if self.io.exists(&self.snapshot_path(hint)).await?
                && (hint == 1 || !self.io.exists(&self.snapshot_path(hint - 1)).await?)
            {
                return Ok((Some(hint), Some(hint)));
            }
        }
        Ok((self.list_ids().await?.first().copied(), hint))
    }

    /// The newest snapshot. Its file is read under the version the probes saw, so a snapshot id
    /// that another server rolled back and committed again is never answered from the cache.
    pub async fn latest(&self) -> Result<Option<Snapshot>> {
        match self.find_latest().await? {
            Some((id, Some(version))) => {
                let path = self.snapshot_path(id);
                match self.io.read_version(&path, &version).await {
                    Ok(bytes) => Ok(Some(self.parse(id, &path, &bytes)?)),
                    // Expired between the probe and the read: look again.
                    Err(e) if e.kind() == ErrorKind::NotFound => match self.latest_id().await? {
                        Some(id) => Ok(Some(self.snapshot(id).await?)),
                        None => Ok(None),
                    },
                    Err(e) => Err(e),
                }
            }
            Some((id, None)) => Ok(Some(self.snapshot(id).await?)),
            None => Ok(None),
        }
    }

    /// Reads snapshot `id`; a missing one is `NotFound` naming the range that does exist.
    pub async fn snapshot(&self, id: i64) -> Result<Snapshot> {
        let path = self.snapshot_path(id);
        match self.try_snapshot(id).await? {
            Some(s) => Ok(s),
            None => {
                let ids = self.list_ids().await?;
                let range = match (ids.first(), ids.last()) {
                    (Some(a), Some(b)) if a == b => format!("only {} {a} exists", self.kind),
                    (Some(a), Some(b)) => format!("{}s {a} to {b} exist", self.kind),
                    _ => format!("the table has no {}s", self.kind),
                };
                NotFoundSnafu {
                    message: format!("{} {id} not found at {path} ({range})", self.kind),
                }
                .fail()
            }
        }
    }

    /// Reads snapshot `id`, `None` if the file does not exist.
    pub async fn try_snapshot(&self, id: i64) -> Result<Option<Snapshot>> {
        let path = self.snapshot_path(id);
        // Snapshot files are written once (a rollback deletes them through the same handle,
        // which drops them from the cache): cached.
        let bytes = match self.io.read_immutable(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(self.parse(id, &path, &bytes)?))
    }

    /// Snapshot `id` from the bytes of its file at `path`.
    fn parse(&self, id: i64, path: &str, bytes: &[u8]) -> Result<Snapshot> {
        let snapshot: Snapshot = serde_json::from_slice(bytes).context(JsonSnafu { path })?;
        if snapshot.id != id {
            return CorruptSnafu {
                path,
                message: format!("contains snapshot id {}", snapshot.id),
            }
            .fail();
        }
        Ok(snapshot)
    }

    /// The newest snapshot committed at or before `millis`, if any.
    pub async fn snapshot_at_or_before(&self, millis: i64) -> Result<Option<Snapshot>> {
        let ids = self.list_ids().await?;
        // Commit times grow with ids; binary search, then confirm by reading.
        let (mut lo, mut hi) = (0usize, ids.len());
        let mut found = None;
        while lo < hi {
            let mid = (lo + hi) / 2;
            let s = self.snapshot(ids[mid]).await?;
            if s.time_millis <= millis {
                found = Some(s);
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(found)
    }

    /// Publishes `snapshot` as `snapshot-<id>` if that id is free. `Ok(true)` when this call created
    /// it (durable on return), `Ok(false)` when another committer holds the id.
    pub async fn try_publish(&self, snapshot: &Snapshot) -> Result<bool> {
        let path = self.snapshot_path(snapshot.id);
        let json = serde_json::to_vec_pretty(snapshot).context(JsonSnafu { path: &path })?;
        self.io.write_if_absent(&path, Bytes::from(json)).await
    }

    /// Best-effort rewrite of the `LATEST` hint; failures are tolerated (readers verify hints).
    pub async fn write_latest_hint(&self, id: i64) {
        let path = format!("{}/LATEST", self.dir());
        if let Err(e) = self.io.write(&path, Bytes::from(id.to_string())).await {
            tracing::warn!(%path, error = %e, "could not update the LATEST hint");
        }
    }

    /// Deletes snapshot file `id` (expiry and rollback only).
    pub async fn delete(&self, id: i64) -> Result<()> {
        self.io.delete(&self.snapshot_path(id)).await
    }

    pub async fn write_earliest_hint(&self, id: i64) {
        let path = format!("{}/EARLIEST", self.dir());
        if let Err(e) = self.io.write(&path, Bytes::from(id.to_string())).await {
            tracing::warn!(%path, error = %e, "could not update the EARLIEST hint");
        }
    }
}
