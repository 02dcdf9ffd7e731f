//! The decisions of a commit, as pure functions over values already read: whether a compaction
//! still applies to the latest snapshot ([`check_compaction`], a typed [`Conflict`]), which files
//! an overwrite replaces ([`overwritten`]), the snapshot that follows the previous one
//! ([`next_snapshot`]), what an ambiguous publish means ([`resolve_publish`]) and how long to wait
//! before the next attempt ([`backoff`]). The loop that reads, writes and retries is in the parent.

use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use super::Overwrite;
use crate::error::{Error, Result};
use crate::spec::binary_row::{self, Datum};
use crate::spec::manifest::{FileIdentifier, FileKind, ManifestEntry};
use crate::spec::snapshot::SNAPSHOT_VERSION;
use crate::spec::{CommitKind, DataType, Snapshot};

/// Why a compaction cannot be committed on the latest snapshot. Final, as in Paimon: the
/// compaction's work is dropped (its files removed), never retried on the new base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// An input was replaced meanwhile (by another compactor or an overwrite).
    InputGone {
        file: String,
        bucket: i32,
        level: i32,
    },
    /// The result would hold two files with overlapping keys in one level >= 1.
    Overlap { a: String, b: String },
    /// The bucket's deletion vectors changed since the compaction read them.
    VectorsChanged {
        bucket: i32,
        base: Option<String>,
        now: Option<String>,
    },
    /// A new deletion vector marks rows of a file that is no longer live.
    VectorOfGoneFile { file: String, bucket: i32 },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::InputGone { file, bucket, level } => write!(
                f,
                "file deletion conflict: compaction input {file} (bucket {bucket}, level {level}) is no longer live; give up committing"
            ),
            Conflict::Overlap { a, b } => write!(
                f,
                "LSM conflicts detected: files {a} and {b} overlap in one level; give up committing"
            ),
            Conflict::VectorsChanged { bucket, base, now } => write!(
                f,
                "deletion vector conflict: bucket {bucket}'s deletion-vector file is {} but the compaction read {}; give up committing",
                now.as_deref().unwrap_or("none"),
                base.as_deref().unwrap_or("none")
            ),
            Conflict::VectorOfGoneFile { file, bucket } => write!(
                f,
                "deletion vector conflict: the compaction marks rows of {file} (bucket {bucket}), which is no longer live; give up committing"
            ),
        }
    }
}

/// Whether a compaction's `changes` (DELETEs of its inputs, ADDs of its outputs) still apply to
/// the `live` entries of the latest snapshot. `key_types` is given for primary-key tables, whose
/// levels >= 1 must each stay one sorted run.
pub(crate) fn check_compaction(
    live: &[ManifestEntry],
    changes: &[ManifestEntry],
    key_types: Option<&[DataType]>,
) -> Result<Option<Conflict>> {
    let live_ids: HashSet<FileIdentifier> = live.iter().map(ManifestEntry::identifier).collect();
    if let Some(e) = changes
        .iter()
        .find(|e| e.kind == FileKind::Delete && !live_ids.contains(&e.identifier()))
    {
        return Ok(Some(Conflict::InputGone {
            file: e.file.file_name.clone(),
            bucket: e.bucket,
            level: e.file.level,
        }));
    }
    let Some(key_types) = key_types else {
        return Ok(None);
    };
    let result = crate::manifest::fold_entries(live.iter().chain(changes).cloned());
    Ok(overlapping_files(&result, key_types)?.map(|(a, b)| Conflict::Overlap { a, b }))
}

/// A compaction's new deletion-vector file of one bucket and the bucket's file it was derived
/// from.
#[derive(Debug, Clone)]
pub(crate) struct VectorsBase {
    pub(crate) partition: Vec<u8>,
    pub(crate) bucket: i32,
    pub(crate) base: Option<String>,
    pub(crate) file: Option<crate::spec::index_manifest::IndexFileMeta>,
}

/// Whether new deletion-vector files still apply to the latest snapshot: each bucket's current
/// file (in `index`) must be the one its new file was derived from (else marks another
/// compactor made would be lost), and every data file a new vector marks must be live in `after`
/// (the latest live files with the compaction applied).
pub(crate) fn check_vectors(
    index: &[crate::spec::index_manifest::IndexManifestEntry],
    after: &[ManifestEntry],
    changes: &[VectorsBase],
) -> Option<Conflict> {
    for c in changes {
        let now = crate::table::deletion_vectors::bucket_file(index, &c.partition, c.bucket)
            .map(|e| e.file.file_name.clone());
        if now != c.base {
            return Some(Conflict::VectorsChanged {
                bucket: c.bucket,
                base: c.base.clone(),
                now,
            });
        }
        let live: HashSet<&str> = after
            .iter()
            .filter(|e| e.partition == c.partition && e.bucket == c.bucket)
            .map(|e| e.file.file_name.as_str())
            .collect();
        if let Some(gone) = c
            .file
            .iter()
            .flat_map(|f| f.dv_ranges.iter().flatten())
            .find(|r| !live.contains(r.data_file.as_str()))
        {
            return Some(Conflict::VectorOfGoneFile {
                file: gone.data_file.clone(),
                bucket: c.bucket,
            });
        }
    }
    None
}

/// A file's key range: min key, max key, file name.
type KeyRange<'a> = (Vec<Datum>, Vec<Datum>, &'a str);

/// Two files of one (partition, bucket, level >= 1) whose key ranges overlap (or touch), if any.
pub(crate) fn overlapping_files(
    files: &[ManifestEntry],
    key_types: &[DataType],
) -> Result<Option<(String, String)>> {
    use std::cmp::Ordering;
    let decode = |bytes: &[u8], name: &str| {
        binary_row::deserialize(bytes, key_types).map_err(|e| {
            crate::error::CorruptSnafu {
                path: name.to_string(),
                message: format!("key range: {e}"),
            }
            .build()
        })
    };
    let cmp = |a: &[Datum], b: &[Datum]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.compare(y).unwrap_or(Ordering::Equal))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    let mut groups: std::collections::BTreeMap<(&[u8], i32, i32), Vec<KeyRange<'_>>> =
        std::collections::BTreeMap::new();
    for e in files.iter().filter(|e| e.file.level >= 1) {
        let min = decode(&e.file.min_key, &e.file.file_name)?;
        let max = decode(&e.file.max_key, &e.file.file_name)?;
        groups
            .entry((&e.partition, e.bucket, e.file.level))
            .or_default()
            .push((min, max, &e.file.file_name));
    }
    for ranges in groups.values_mut() {
        ranges.sort_by(|a, b| cmp(&a.0, &b.0));
        for pair in ranges.windows(2) {
            if cmp(&pair[0].1, &pair[1].0) != Ordering::Less {
                return Ok(Some((pair[0].2.to_string(), pair[1].2.to_string())));
            }
        }
    }
    Ok(None)
}

/// The DELETE entries an overwrite puts into the snapshot it builds on `live`.
pub(crate) fn overwritten(
    live: Vec<ManifestEntry>,
    ow: &Overwrite,
    partition_keys: &[String],
    partition_types: &[DataType],
) -> Result<Vec<ManifestEntry>> {
    let mut deletes = Vec::new();
    for e in live {
        if overwrite_matches(ow, &e.partition, partition_keys, partition_types)? {
            deletes.push(ManifestEntry {
                kind: FileKind::Delete,
                ..e
            });
        }
    }
    Ok(deletes)
}

fn overwrite_matches(
    ow: &Overwrite,
    partition: &[u8],
    keys: &[String],
    types: &[DataType],
) -> Result<bool> {
    match ow {
        Overwrite::Table => Ok(true),
        Overwrite::Partitions(spec) => {
            let values = binary_row::deserialize(partition, types).map_err(|e| {
                crate::error::InternalSnafu {
                    message: format!("partition row in manifest: {e}"),
                }
                .build()
            })?;
            Ok(spec.iter().all(|(k, v)| {
                keys.iter().position(|x| x == k).is_some_and(|i| {
                    values.get(i).and_then(|x| x.compare(v)) == Some(std::cmp::Ordering::Equal)
                })
            }))
        }
    }
}

/// Checks an overwrite spec names partition keys only, each once.
pub(crate) fn validate_overwrite(ow: &Overwrite, keys: &[String], table: &str) -> Result<()> {
    if let Overwrite::Partitions(spec) = ow {
        let mut seen = HashSet::new();
        for (k, _) in spec {
            if !keys.contains(k) {
                return crate::error::invalid!("table {table}: '{k}' is not a partition key");
            }
            if !seen.insert(k) {
                return crate::error::invalid!("table {table}: partition key '{k}' given twice");
            }
        }
    }
    Ok(())
}

/// Manifests at which the base manifest list is compacted into one manifest
/// (Paimon's `manifest.merge-min-count`).
const MANIFEST_MERGE_MIN_COUNT: usize = 30;

/// Whether a base of `manifests` manifests is merged into one before the next snapshot.
pub(crate) fn merge_base(manifests: usize) -> bool {
    manifests >= MANIFEST_MERGE_MIN_COUNT
}

/// Rows a delta adds minus rows it deletes.
pub(crate) fn delta_records(adds: &[ManifestEntry], deletes: &[ManifestEntry]) -> i64 {
    adds.iter()
        .chain(deletes)
        .map(|e| match e.kind {
            FileKind::Add => e.file.row_count,
            FileKind::Delete => -e.file.row_count,
        })
        .sum()
}

/// A manifest list as a snapshot names it: file name and size.
pub(crate) type ListRef = (String, i64);

/// What a commit attempt brings to the snapshot it builds.
#[derive(Debug, Clone)]
pub(crate) struct Changes {
    pub(crate) kind: CommitKind,
    pub(crate) schema_id: i64,
    pub(crate) base: ListRef,
    pub(crate) delta: ListRef,
    /// The changelog's manifest list and its row count.
    pub(crate) changelog: Option<(ListRef, i64)>,
    /// Rows added minus rows deleted by the delta.
    pub(crate) delta_records: i64,
    /// A new index manifest (dynamic buckets' new HASH files); `None` keeps the previous one.
    pub(crate) index_manifest: Option<String>,
    pub(crate) commit_user: String,
    pub(crate) identifier: i64,
    pub(crate) now_millis: i64,
    pub(crate) uuid: String,
    /// The row id the next new row takes after this commit (row-tracking tables); `None`
    /// carries the previous snapshot's forward.
    pub(crate) next_row_id: Option<i64>,
}

/// The snapshot that follows `previous` with `changes`: the next id, time never going backwards,
/// the record count carried forward, and what the commit does not touch (index manifest,
/// watermark) kept.
pub(crate) fn next_snapshot(previous: Option<&Snapshot>, changes: Changes) -> Snapshot {
    let Changes {
        kind,
        schema_id,
        base,
        delta,
        changelog,
        delta_records,
        index_manifest,
        commit_user,
        identifier,
        now_millis,
        uuid,
        next_row_id,
    } = changes;
    Snapshot {
        version: SNAPSHOT_VERSION,
        id: previous.map_or(1, |s| s.id + 1),
        schema_id,
        base_manifest_list: base.0,
        base_manifest_list_size: Some(base.1),
        delta_manifest_list: delta.0,
        delta_manifest_list_size: Some(delta.1),
        changelog_manifest_list: changelog.as_ref().map(|(l, _)| l.0.clone()),
        changelog_manifest_list_size: changelog.as_ref().map(|(l, _)| l.1),
        index_manifest: index_manifest.or_else(|| previous.and_then(|s| s.index_manifest.clone())),
        commit_user,
        commit_identifier: identifier,
        commit_kind: kind,
        time_millis: now_millis.max(previous.map_or(0, |s| s.time_millis)),
        total_record_count: Some(
            previous.and_then(|s| s.total_record_count).unwrap_or(0) + delta_records,
        ),
        delta_record_count: Some(delta_records),
        changelog_record_count: changelog.map(|(_, rows)| rows),
        watermark: previous.and_then(|s| s.watermark),
        statistics: None,
        properties: None,
        // Carried forward: row-tracking tables (written by Paimon and pypaimon) number new rows
        // from it, and Java writes it into every snapshot.
        next_row_id: next_row_id.or_else(|| previous.and_then(|s| s.next_row_id)),
        uuid: Some(uuid),
        writer_version: Some(format!("tidelake-{}", env!("CARGO_PKG_VERSION"))),
    }
}

/// Row ids and sequence numbers of a row-tracking table's new files, as Paimon's commit assigns
/// them (`RowTrackingCommitUtils`): each appended file without a first row id takes the next
/// `row_count` ids from `start` (the latest snapshot's `nextRowId`), and its rows' sequence
/// number is the snapshot that commits them. Returns the entries and the next free row id.
pub(crate) fn assign_row_ids(
    adds: &[ManifestEntry],
    start: i64,
    snapshot_id: i64,
) -> (Vec<ManifestEntry>, i64) {
    let mut next = start;
    let out = adds
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let appended = e.kind == FileKind::Add
                && e.file.file_source.unwrap_or(0)
                    == crate::spec::manifest::FileSource::Append as i32;
            if appended {
                e.file.min_sequence_number = snapshot_id;
                e.file.max_sequence_number = snapshot_id;
                if e.file.first_row_id.is_none() {
                    e.file.first_row_id = Some(next);
                    next += e.file.row_count;
                }
            }
            e
        })
        .collect();
    (out, next)
}

/// How a publish attempt ended.
#[derive(Debug, PartialEq)]
pub(crate) enum Published {
    /// Our snapshot is the one under its id.
    Ours,
    /// Another committer took the id: build on the new latest and try again.
    Lost,
    /// The storage failed in a way worth retrying; nothing of ours was published.
    Retry,
}

/// What a failed snapshot put means, from the snapshot file read back under its id (the put may
/// have landed before the error): ours by uuid, someone else's, or absent (retry if the error is
/// retryable, else it is the answer). A failed read-back leaves it unknown: that error is the
/// answer, and our files are kept, since the snapshot may be ours.
pub(crate) fn resolve_publish(
    error: Error,
    read_back: Result<Option<Snapshot>>,
    ours: &Snapshot,
) -> Result<Published> {
    match read_back? {
        Some(s) if same_snapshot(&s, ours) => Ok(Published::Ours),
        Some(_) => Ok(Published::Lost),
        None if error.is_retryable() => Ok(Published::Retry),
        None => Err(error),
    }
}

/// What "the id is taken" means, from the snapshot read back under it: an object store's client
/// retries a put whose first attempt landed but timed out, and the retry is refused because the
/// file exists, so a taken id can be our own snapshot. Ours by uuid; anyone else's is a lost race
/// (also when it is gone again: expiry or a rollback removed it). A failed read is the answer: our
/// files are kept, since the snapshot may be ours.
pub(crate) fn resolve_taken(
    read_back: Result<Option<Snapshot>>,
    ours: &Snapshot,
) -> Result<Published> {
    match read_back? {
        Some(s) if same_snapshot(&s, ours) => Ok(Published::Ours),
        _ => Ok(Published::Lost),
    }
}

/// Whether the snapshot read back under an id is `ours`: the same uuid. A snapshot without one
/// (a REST client may send it so) cannot be told apart from another client's: never ours.
fn same_snapshot(read_back: &Snapshot, ours: &Snapshot) -> bool {
    ours.uuid.is_some() && read_back.uuid == ours.uuid
}

/// The wait before retry `attempt` (1-based): exponential from 10 ms, capped at one second, with
/// half of it jittered so racing committers spread out.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let base = 10u64.saturating_mul(1 << attempt.min(7)).min(1000);
    let jitter = (uuid::Uuid::new_v4().as_u128() % (base as u128 + 1)) as u64;
    Duration::from_millis(base / 2 + jitter)
}

/// Whether a commit whose partition's index base was `base` may replace index files on a table
/// whose latest snapshot holds `latest` for that partition (both (bucket, file name)): only if no
/// other writer changed them meanwhile.
pub(crate) fn base_unchanged(base: &[(i32, String)], latest: &[(i32, String)]) -> bool {
    let a: std::collections::BTreeSet<&(i32, String)> = base.iter().collect();
    let b: std::collections::BTreeSet<&(i32, String)> = latest.iter().collect();
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DataFileMeta;

    fn entry(name: &str, level: i32, min: i64, max: i64) -> ManifestEntry {
        ManifestEntry {
            kind: FileKind::Add,
            partition: binary_row::empty_row(),
            bucket: 0,
            total_buckets: 1,
            file: DataFileMeta::for_test(name, level, min, max),
        }
    }

    fn delete(e: &ManifestEntry) -> ManifestEntry {
        ManifestEntry {
            kind: FileKind::Delete,
            ..e.clone()
        }
    }

    fn key_types() -> Vec<DataType> {
        vec!["BIGINT NOT NULL".parse().unwrap()]
    }

    #[test]
    fn row_ids_continue_from_the_latest_snapshot_in_file_order() {
        let mut a = entry("a", 0, 0, 0);
        a.file.row_count = 3;
        a.file.file_source = Some(0);
        let mut b = entry("b", 0, 0, 0);
        b.file.row_count = 2;
        b.file.file_source = Some(0);
        // A file that already has ids (rewritten by a compaction) keeps them.
        let mut c = entry("c", 0, 0, 0);
        c.file.first_row_id = Some(1);
        c.file.file_source = Some(1);
        let (out, next) = assign_row_ids(&[a, b, c], 10, 7);
        let ids: Vec<Option<i64>> = out.iter().map(|e| e.file.first_row_id).collect();
        assert_eq!(ids, [Some(10), Some(13), Some(1)]);
        assert_eq!(next, 15);
        assert_eq!(
            (
                out[0].file.min_sequence_number,
                out[0].file.max_sequence_number
            ),
            (7, 7)
        );
        assert_eq!(out[2].file.max_sequence_number, 0);
    }

    #[test]
    fn deletion_vectors_commit_only_on_their_base_and_live_files() {
        use crate::spec::index_manifest::{DeletionVectorMeta, IndexFileMeta, IndexManifestEntry};
        let dv_file = |name: &str, marked: &[&str]| IndexFileMeta {
            index_type: crate::spec::index_manifest::DELETION_VECTORS_INDEX.into(),
            file_name: name.into(),
            file_size: 1,
            row_count: marked.len() as i64,
            dv_ranges: Some(
                marked
                    .iter()
                    .map(|f| DeletionVectorMeta {
                        data_file: f.to_string(),
                        offset: 1,
                        length: 1,
                        cardinality: Some(1),
                    })
                    .collect(),
            ),
            external_path: None,
            global_index: None,
        };
        let index = vec![IndexManifestEntry {
            kind: FileKind::Add,
            partition: binary_row::empty_row(),
            bucket: 0,
            file: dv_file("index-1", &["a"]),
        }];
        let live = vec![entry("a", 5, 0, 9), entry("b", 5, 10, 19)];
        let change = |base: Option<&str>, marked: &[&str]| VectorsBase {
            partition: binary_row::empty_row(),
            bucket: 0,
            base: base.map(String::from),
            file: Some(dv_file("index-2", marked)),
        };
        assert_eq!(
            check_vectors(&index, &live, &[change(Some("index-1"), &["a", "b"])]),
            None
        );
        // Another compactor replaced the bucket's vectors since.
        assert!(matches!(
            check_vectors(&index, &live, &[change(None, &["b"])]),
            Some(Conflict::VectorsChanged { .. })
        ));
        // A marked file was rewritten meanwhile.
        assert_eq!(
            check_vectors(&index, &live[..1], &[change(Some("index-1"), &["b"])]),
            Some(Conflict::VectorOfGoneFile {
                file: "b".into(),
                bucket: 0
            })
        );
        // A compaction that changed no vector still checks its base.
        let unchanged = VectorsBase {
            file: None,
            ..change(Some("index-0"), &[])
        };
        assert!(check_vectors(&index, &live, &[unchanged]).is_some());
    }

    #[test]
    fn detects_overlapping_files_in_one_level() {
        let types = key_types();
        let ok = vec![
            entry("a", 1, 0, 9),
            entry("b", 1, 10, 19),
            entry("c", 2, 5, 15),
            entry("d", 0, 0, 100),
        ];
        assert_eq!(overlapping_files(&ok, &types).unwrap(), None);
        let touching = vec![entry("a", 1, 0, 10), entry("b", 1, 10, 19)];
        assert_eq!(
            overlapping_files(&touching, &types).unwrap(),
            Some(("a".into(), "b".into()))
        );
        let negative = vec![entry("a", 3, -20, -5), entry("b", 3, -10, 3)];
        assert!(overlapping_files(&negative, &types).unwrap().is_some());
    }

    #[test]
    fn a_compaction_applies_while_its_inputs_are_live_and_its_output_fits() {
        let live = vec![
            entry("a", 0, 0, 9),
            entry("b", 0, 5, 20),
            entry("c", 5, 30, 40),
        ];
        let changes = vec![delete(&live[0]), delete(&live[1]), entry("x", 5, 0, 20)];
        let types = key_types();
        assert_eq!(
            check_compaction(&live, &changes, Some(&types)).unwrap(),
            None
        );
    }

    #[test]
    fn a_compaction_whose_input_was_replaced_conflicts_naming_the_input() {
        let live = vec![entry("b", 0, 5, 20)];
        let gone = entry("a", 0, 0, 9);
        let changes = vec![delete(&gone), entry("x", 5, 0, 20)];
        let conflict = check_compaction(&live, &changes, None).unwrap().unwrap();
        assert_eq!(
            conflict,
            Conflict::InputGone {
                file: "a".into(),
                bucket: 0,
                level: 0
            }
        );
        assert!(conflict
            .to_string()
            .starts_with("file deletion conflict: compaction input a"));
        // The same name at another level is another entry: still gone.
        let live = vec![entry("a", 3, 0, 9)];
        assert!(check_compaction(&live, &changes, None).unwrap().is_some());
    }

    #[test]
    fn a_compaction_whose_output_overlaps_a_level_conflicts_for_key_tables_only() {
        let live = vec![entry("a", 0, 0, 9), entry("c", 5, 5, 40)];
        let changes = vec![delete(&live[0]), entry("x", 5, 0, 9)];
        let types = key_types();
        assert_eq!(
            check_compaction(&live, &changes, Some(&types)).unwrap(),
            Some(Conflict::Overlap {
                a: "x".into(),
                b: "c".into()
            })
        );
        assert_eq!(check_compaction(&live, &changes, None).unwrap(), None);
    }

    #[test]
    fn an_overwrite_deletes_the_matching_partitions_only() {
        let types: Vec<DataType> = vec!["STRING NOT NULL".parse().unwrap()];
        let keys = vec!["dt".to_string()];
        let in_part = |dt: &str, name: &str| ManifestEntry {
            partition: binary_row::serialize(&[Datum::String(dt.into())]),
            ..entry(name, 0, 0, 0)
        };
        let live = vec![in_part("x", "a"), in_part("y", "b"), in_part("x", "c")];
        let ow = Overwrite::Partitions(vec![("dt".into(), Datum::String("x".into()))]);
        let deletes = overwritten(live.clone(), &ow, &keys, &types).unwrap();
        let names: Vec<_> = deletes.iter().map(|e| e.file.file_name.as_str()).collect();
        assert_eq!(names, vec!["a", "c"]);
        assert!(deletes.iter().all(|e| e.kind == FileKind::Delete));
        assert_eq!(
            overwritten(live, &Overwrite::Table, &keys, &types)
                .unwrap()
                .len(),
            3
        );
    }

    fn changes(kind: CommitKind, delta_records: i64, now: i64) -> Changes {
        Changes {
            kind,
            schema_id: 2,
            base: ("base".into(), 10),
            delta: ("delta".into(), 20),
            changelog: None,
            delta_records,
            index_manifest: None,
            commit_user: "u".into(),
            identifier: 7,
            now_millis: now,
            uuid: "id".into(),
            next_row_id: None,
        }
    }

    #[test]
    fn the_first_snapshot_is_one_and_the_next_carries_counts_time_and_untouched_fields() {
        let first = next_snapshot(None, changes(CommitKind::Append, 5, 1000));
        assert_eq!(
            (first.id, first.total_record_count, first.time_millis),
            (1, Some(5), 1000)
        );
        assert_eq!(first.changelog_manifest_list, None);
        assert_eq!(first.changelog_record_count, None);
        let mut prev = first.clone();
        prev.index_manifest = Some("index-1".into());
        prev.watermark = Some(42);
        // A clock that went backwards does not move snapshot time backwards.
        let mut c = changes(CommitKind::Compact, -2, 900);
        c.changelog = Some((("changelog".into(), 30), 4));
        let next = next_snapshot(Some(&prev), c);
        assert_eq!(next.id, 2);
        assert_eq!(next.time_millis, 1000);
        assert_eq!(
            (next.total_record_count, next.delta_record_count),
            (Some(3), Some(-2))
        );
        assert_eq!(next.index_manifest.as_deref(), Some("index-1"));
        let mut c = changes(CommitKind::Append, 1, 2000);
        c.index_manifest = Some("index-2".into());
        assert_eq!(
            next_snapshot(Some(&prev), c).index_manifest.as_deref(),
            Some("index-2"),
            "a new index manifest replaces the previous one"
        );
        assert_eq!(next.watermark, Some(42));
        assert_eq!(next.changelog_manifest_list.as_deref(), Some("changelog"));
        assert_eq!(
            (
                next.changelog_manifest_list_size,
                next.changelog_record_count
            ),
            (Some(30), Some(4))
        );
        assert_eq!(
            (next.commit_kind, next.commit_identifier, next.schema_id),
            (CommitKind::Compact, 7, 2)
        );
    }

    #[test]
    fn a_taken_id_holding_our_snapshot_is_ours() {
        let ours = next_snapshot(None, changes(CommitKind::Append, 1, 1));
        let mut theirs = ours.clone();
        theirs.uuid = Some("other".into());
        let unavailable = || crate::error::of_kind(crate::error::ErrorKind::Unavailable, "timeout");
        assert_eq!(
            resolve_taken(Ok(Some(ours.clone())), &ours).unwrap(),
            Published::Ours
        );
        assert_eq!(
            resolve_taken(Ok(Some(theirs)), &ours).unwrap(),
            Published::Lost
        );
        assert_eq!(resolve_taken(Ok(None), &ours).unwrap(), Published::Lost);
        assert!(resolve_taken(Err(unavailable()), &ours).is_err());
        // A client's snapshot without a uuid (REST) is never taken for ours, even by another
        // uuid-less one.
        let mut anonymous = ours.clone();
        anonymous.uuid = None;
        assert_eq!(
            resolve_taken(Ok(Some(anonymous.clone())), &anonymous).unwrap(),
            Published::Lost
        );
        assert_eq!(
            resolve_publish(unavailable(), Ok(Some(anonymous.clone())), &anonymous).unwrap(),
            Published::Lost
        );
    }

    #[test]
    fn an_ambiguous_publish_is_decided_by_the_snapshot_read_back() {
        let ours = next_snapshot(None, changes(CommitKind::Append, 1, 1));
        let mut theirs = ours.clone();
        theirs.uuid = Some("other".into());
        let unavailable = || crate::error::of_kind(crate::error::ErrorKind::Unavailable, "timeout");
        let invalid = || crate::error::of_kind(crate::error::ErrorKind::InvalidArgument, "bad");
        assert_eq!(
            resolve_publish(unavailable(), Ok(Some(ours.clone())), &ours).unwrap(),
            Published::Ours
        );
        assert_eq!(
            resolve_publish(invalid(), Ok(Some(theirs)), &ours).unwrap(),
            Published::Lost
        );
        assert_eq!(
            resolve_publish(unavailable(), Ok(None), &ours).unwrap(),
            Published::Retry
        );
        // The put may have landed: nothing may be retried or removed until the file answers.
        assert!(resolve_publish(unavailable(), Err(unavailable()), &ours).is_err());
        assert!(resolve_publish(invalid(), Ok(None), &ours).is_err());
    }

    #[test]
    fn delta_records_count_deleted_rows_against_added_ones() {
        let mut a = entry("a", 0, 0, 0);
        a.file.row_count = 10;
        let mut b = entry("b", 0, 0, 0);
        b.file.row_count = 4;
        assert_eq!(delta_records(&[a.clone()], &[delete(&b)]), 6);
        // A compaction's changes: DELETE of the inputs and ADD of the outputs in one list.
        assert_eq!(delta_records(&[delete(&a), b], &[]), -6);
        assert!(!merge_base(29) && merge_base(30));
    }

    #[test]
    fn backoff_grows_to_a_cap_with_jitter() {
        let ms = |attempt| backoff(attempt).as_millis() as u64;
        assert!((10..=30).contains(&ms(1)), "{}", ms(1));
        assert!((40..=120).contains(&ms(3)), "{}", ms(3));
        for attempt in [7, 10, 30, u32::MAX] {
            assert!((500..=1500).contains(&ms(attempt)), "{}", ms(attempt));
        }
    }

    #[test]
    fn a_base_changed_by_another_writer_is_seen() {
        let base = vec![(0, "a".to_string()), (1, "b".to_string())];
        let same = vec![(1, "b".to_string()), (0, "a".to_string())];
        assert!(base_unchanged(&base, &same));
        assert!(!base_unchanged(&base, &[(0, "a".into()), (1, "c".into())]));
        assert!(!base_unchanged(&base, &[(0, "a".into())]));
        assert!(!base_unchanged(&[], &[(2, "z".into())]));
    }
}
