//! The index files of a commit: a writer's new HASH files (with the HASH files it assigned
//! buckets from) and a compaction's deletion-vector files (with the vector file each derives
//! from), as the commit loop writes them into the index manifest and checks them.

use super::decide;
use super::CommitMessage;
use crate::spec::index_manifest::IndexManifestEntry;
use crate::spec::manifest::FileKind;

/// The index files a commit adds (HASH files of dynamic buckets, or a compaction's deletion
/// vectors) and, per partition, the HASH files its writer assigned from: (bucket, file name).
#[derive(Debug)]
pub(super) struct IndexChanges {
    pub(super) entries: Vec<IndexManifestEntry>,
    pub(super) bases: std::collections::BTreeMap<Vec<u8>, Vec<(i32, String)>>,
    /// Per new deletion-vector file: the bucket's file it was derived from.
    pub(super) vector_bases: Vec<decide::VectorsBase>,
}

impl IndexChanges {
    pub(super) fn of(messages: &[CommitMessage]) -> Option<Self> {
        let entries: Vec<IndexManifestEntry> = messages
            .iter()
            .flat_map(|m| {
                m.index_files.iter().map(|f| IndexManifestEntry {
                    kind: FileKind::Add,
                    partition: m.partition.clone(),
                    bucket: m.bucket,
                    file: f.clone(),
                })
            })
            .collect();
        let bases = messages
            .iter()
            .filter_map(|m| Some((m.partition.clone(), m.index_base.clone()?)))
            .collect();
        (!entries.is_empty()).then_some(Self {
            entries,
            bases,
            vector_bases: vec![],
        })
    }

    /// The deletion-vector files of the compactions in `messages`.
    pub(super) fn vectors(messages: &[CommitMessage]) -> Option<Self> {
        let (entries, vector_bases) = messages
            .iter()
            .filter_map(|m| {
                let v = m.vectors.as_ref()?;
                let entry = v.file.as_ref().map(|file| IndexManifestEntry {
                    kind: FileKind::Add,
                    partition: m.partition.clone(),
                    bucket: m.bucket,
                    file: file.clone(),
                });
                let base = decide::VectorsBase {
                    partition: m.partition.clone(),
                    bucket: m.bucket,
                    base: v.base.clone(),
                    file: v.file.clone(),
                };
                Some((entry, base))
            })
            .unzip::<_, _, Vec<_>, Vec<_>>();
        let entries: Vec<IndexManifestEntry> = entries.into_iter().flatten().collect();
        (!vector_bases.is_empty()).then_some(Self {
            entries,
            bases: Default::default(),
            vector_bases,
        })
    }

    /// `self` and `other` in one.
    pub(super) fn and(a: Option<&Self>, b: Option<&Self>) -> Option<Self> {
        let mut out: Option<Self> = None;
        for x in [a, b].into_iter().flatten() {
            let o = out.get_or_insert_with(|| Self {
                entries: vec![],
                bases: Default::default(),
                vector_bases: vec![],
            });
            o.entries.extend(x.entries.iter().cloned());
            o.bases
                .extend(x.bases.iter().map(|(k, v)| (k.clone(), v.clone())));
            o.vector_bases.extend(x.vector_bases.iter().cloned());
        }
        // Only checks, no file: the index manifest stays as it is.
        out.filter(|o| !o.entries.is_empty())
    }
}
