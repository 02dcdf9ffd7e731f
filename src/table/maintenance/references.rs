//! What holds a table's files: the loading half of every deleting plan. Snapshots, long-lived
//! changelogs and tags are entry points; each names manifest lists, the lists name manifests, and
//! the manifests' entries name data and changelog files (index manifests name index files). The
//! planners decide over what this module loads, and never read storage themselves.
//!
//! Loading is tolerant where a killed run may already have removed something (an expiring
//! snapshot's lists and manifests: missing means "already gone") and strict where the answer
//! decides what stays (what a kept snapshot or tag holds: a failed read stops the operation
//! before it deletes anything).

use std::collections::HashSet;

use crate::error::{ErrorKind, Result};
use crate::snapshot::consumer::ConsumerManager;
use crate::snapshot::expire::Retention;
use crate::snapshot::tag::TagManager;
use crate::spec::manifest::{FileKind, FileSource, ManifestEntry};
use crate::spec::Snapshot;
use crate::table::Table;

/// A data or changelog file, as manifest entries name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DataFile {
    /// The partition's BinaryRow.
    pub partition: Vec<u8>,
    pub bucket: i32,
    pub name: String,
}

impl DataFile {
    fn of(e: &ManifestEntry) -> Self {
        Self {
            partition: e.partition.clone(),
            bucket: e.bucket,
            name: e.file.file_name.clone(),
        }
    }
}

/// One manifest entry, as the planners need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: FileKind,
    pub file: DataFile,
    /// Written as new input (not by a compaction).
    pub appended: bool,
}

impl Entry {
    fn of(e: &ManifestEntry) -> Self {
        let append = FileSource::Append as i32;
        Self {
            kind: e.kind,
            file: DataFile::of(e),
            appended: e.file.file_source.unwrap_or(append) == append,
        }
    }
}

/// Where a table's files live, for the planners (a table; a model in tests).
pub trait FileLayout {
    /// The path of a data or changelog file.
    fn data_path(&self, file: &DataFile) -> Result<String>;
    /// The path of a manifest, manifest list or index manifest.
    fn manifest_path(&self, name: &str) -> String;
}

impl FileLayout for Table {
    fn data_path(&self, file: &DataFile) -> Result<String> {
        Ok(format!(
            "{}/{}",
            self.bucket_dir(&file.partition, file.bucket)?,
            file.name
        ))
    }

    fn manifest_path(&self, name: &str) -> String {
        self.manifest_manager().path(name)
    }
}

/// `Ok(None)` for a file that is not there (a cleanup a killed run already did).
pub(crate) fn present<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A snapshot (or long-lived changelog) with what it names, as far as it is still there.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotFiles {
    pub snapshot: Snapshot,
    /// Its manifest lists (base, delta, then changelog), each with the manifests it names
    /// (`None`: the list is gone).
    pub lists: Vec<(String, Option<Vec<String>>)>,
    /// The entries of its delta list (`None`: gone).
    pub delta: Option<Vec<Entry>>,
    /// The entries of its changelog list (`None`: it has none, or it is gone).
    pub changelog: Option<Vec<Entry>>,
    /// The index files its index manifest lists (`None`: it has none, or it is gone).
    pub index_files: Option<Vec<String>>,
}

impl SnapshotFiles {
    /// Reads what `snapshot` names; missing lists and manifests are `None`, not errors.
    pub async fn load(table: &Table, snapshot: Snapshot) -> Result<Self> {
        let mm = table.manifest_manager();
        let mut lists = Vec::new();
        for list in snapshot.manifest_lists() {
            let names = present(mm.read_manifest_list(list).await)?
                .map(|metas| metas.into_iter().map(|m| m.file_name).collect());
            lists.push((list.clone(), names));
        }
        let entries = |r: Option<Vec<ManifestEntry>>| r.map(|v| v.iter().map(Entry::of).collect());
        let delta = entries(present(
            mm.read_entries_of_list(&snapshot.delta_manifest_list).await,
        )?);
        let changelog = match &snapshot.changelog_manifest_list {
            Some(list) => entries(present(mm.read_entries_of_list(list).await)?),
            None => None,
        };
        let index_files = match &snapshot.index_manifest {
            Some(_) => present(mm.index_entries(&snapshot).await)?
                .map(|v| v.iter().map(|e| mm.index_path(&e.file)).collect()),
            None => None,
        };
        Ok(Self {
            snapshot,
            lists,
            delta,
            changelog,
            index_files,
        })
    }

    pub fn id(&self) -> i64 {
        self.snapshot.id
    }

    /// Its metadata files that are still named: the lists, the manifests of those still there,
    /// and its index manifest.
    pub fn metadata_files(&self) -> impl Iterator<Item = &String> {
        self.lists
            .iter()
            .flat_map(|(list, names)| std::iter::once(list).chain(names.iter().flatten()))
            .chain(self.snapshot.index_manifest.as_ref())
    }

    /// The manifests `list` (one of this snapshot's) names, if it is still there.
    pub fn manifests_of(&self, list: &str) -> Option<&[String]> {
        self.lists
            .iter()
            .find(|(l, _)| l == list)
            .and_then(|(_, names)| names.as_deref())
    }
}

/// What the snapshots, changelogs and tags that stay keep: nothing here may be deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub files: HashSet<DataFile>,
    /// Manifest lists, manifests and index manifests.
    pub manifests: HashSet<String>,
    /// Index file paths.
    pub index_files: HashSet<String>,
}

impl Held {
    /// Adds what a batch read of `s` needs: its live data files, its data manifest lists and
    /// their manifests (strict: a kept snapshot that cannot be read stops the operation), its
    /// index manifest and index files. Not its changelog: a snapshot's changelog list, manifests
    /// and files go when the snapshot expires, even when a tag pins it, as in Paimon (whose
    /// `FileDeletionBase.manifestSkippingSet` holds data and index manifests only).
    pub async fn hold(&mut self, table: &Table, s: &Snapshot) -> Result<()> {
        let mm = table.manifest_manager();
        self.files.extend(
            mm.live_entries(s)
                .await?
                .iter()
                .map(DataFile::of)
                .collect::<Vec<_>>(),
        );
        for list in [&s.base_manifest_list, &s.delta_manifest_list] {
            self.manifests.insert(list.clone());
            for m in mm.read_manifest_list(list).await? {
                self.manifests.insert(m.file_name);
            }
        }
        self.manifests.extend(s.index_manifest.clone());
        if s.index_manifest.is_some() {
            if let Some(entries) = present(mm.index_entries(s).await)? {
                self.index_files
                    .extend(entries.iter().map(|e| mm.index_path(&e.file)));
            }
        }
        Ok(())
    }

    /// Holds only the lists of `s` and the manifests of those still there (a changelog with a
    /// producer kept no data lists: they went with its snapshot).
    pub async fn hold_lists(&mut self, table: &Table, s: &Snapshot) -> Result<()> {
        let mm = table.manifest_manager();
        for list in [&s.base_manifest_list, &s.delta_manifest_list] {
            self.manifests.insert(list.clone());
            if let Some(metas) = present(mm.read_manifest_list(list).await)? {
                self.manifests
                    .extend(metas.into_iter().map(|m| m.file_name));
            }
        }
        Ok(())
    }
}

impl Table {
    /// The manager of this branch's tags.
    pub(crate) fn tag_manager(&self) -> TagManager {
        TagManager::new(self.io().clone(), self.meta_path(), self.full_name())
    }

    /// The tags whose files expiry keeps: this branch's, and on a branch main's too (Paimon
    /// expires a branch with main's tags: a branch made from a tag shares its files).
    pub(crate) async fn protecting_tags(&self) -> Result<Vec<(String, Snapshot)>> {
        let mut tags = self.tag_manager().list().await?;
        if self.branch().is_some() {
            let main = TagManager::new(
                self.io().clone(),
                self.path(),
                self.identifier().to_string(),
            );
            tags.extend(main.list().await?);
        }
        Ok(tags)
    }

    /// Retention from the table's options, with Paimon's defaults.
    pub fn retention(&self) -> Result<Retention> {
        let o = self.table_options()?;
        Ok(Retention {
            min_retained: o.snapshot_min_retained,
            max_retained: o.snapshot_max_retained,
            time_retained_millis: o.snapshot_time_retained_millis,
            expire_limit: o.snapshot_expire_limit,
        })
    }

    /// The table's consumers.
    pub fn consumer_manager(&self) -> ConsumerManager {
        ConsumerManager::new(self.io().clone(), self.meta_path())
    }

    /// The lowest snapshot a live consumer still needs.
    pub(crate) async fn min_consumer(&self) -> Result<Option<i64>> {
        let expiration = self.table_options()?.consumer_expiration_millis;
        self.consumer_manager()
            .min_next_snapshot(self.clock().now_millis(), expiration)
            .await
    }
}
