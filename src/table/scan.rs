//! Scan planning: which snapshot, which files, grouped into splits of one (partition, bucket).
//! `plan()` resolves the snapshot and reads its manifests; what it keeps of them is decided by
//! [`Pruning`], pure predicates over the entries (unit-tested below). No data file is opened here.

use std::collections::BTreeMap;

use super::Table;
use crate::error::{invalid, Malformed, NotFoundSnafu, Result};
use crate::spec::binary_row::{self, Datum};
use crate::spec::{DataFileMeta, ManifestEntry, MergeEngine, Snapshot};

/// Which version of the table to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SnapshotSelector {
    #[default]
    Latest,
    Id(i64),
    /// The newest snapshot committed at or before this time (epoch milliseconds).
    TimestampMillis(i64),
    /// The snapshot a tag pins.
    Tag(String),
}

/// The files of one (partition, bucket) to be read (and merged) together.
#[derive(Debug, Clone)]
pub struct Split {
    pub partition: Vec<u8>,
    pub bucket: i32,
    pub files: Vec<DataFileMeta>,
    /// A part of its one file: only the Parquet row groups whose first row is in this range are
    /// read (reads without merging, positions or row ids, so the parts of a large file can go to
    /// several cores). `None`: the files whole.
    pub rows: Option<std::ops::Range<u64>>,
}

/// A planned read: the snapshot it reads and its splits.
#[derive(Debug, Clone)]
pub struct Plan {
    pub snapshot: Option<Snapshot>,
    pub splits: Vec<Split>,
    /// The key range the files were pruned by; readers may skip row groups outside it too.
    pub key_range: Option<KeyRange>,
}

impl Plan {
    pub fn file_count(&self) -> usize {
        self.splits.iter().map(|s| s.files.len()).sum()
    }
}

/// Builds a [`Plan`].
#[derive(Debug, Clone)]
pub struct ScanBuilder {
    table: Table,
    selector: SnapshotSelector,
    partition_filter: Vec<(String, Datum)>,
    all_levels: bool,
    /// Bounds on the first primary-key column (value, inclusive): files whose key range lies
    /// outside are skipped.
    key_range: Option<KeyRange>,
    /// Values of every bucket-key column (bucket-key order): only their bucket is read.
    bucket_key: Option<Vec<Datum>>,
    /// Keeps a postpone table's staged files too (batch reads skip them).
    postpone: bool,
}

pub(crate) type Bound = Option<(Datum, bool)>;

/// Bounds on the first primary-key column (value, inclusive).
#[derive(Debug, Clone)]
pub struct KeyRange {
    lower: Bound,
    upper: Bound,
}

impl KeyRange {
    #[cfg(test)]
    pub(crate) fn new(lower: Bound, upper: Bound) -> Self {
        Self { lower, upper }
    }

    /// The bounds (value, inclusive).
    pub(crate) fn bounds(&self) -> (&Bound, &Bound) {
        (&self.lower, &self.upper)
    }

    /// Whether a file or row group whose first key column spans `[min, max]` may hold a key in
    /// range.
    pub(crate) fn overlaps(&self, min: &Datum, max: &Datum) -> bool {
        use std::cmp::Ordering::*;
        let above_lower = match &self.lower {
            None => true,
            Some((v, incl)) => match max.compare(v) {
                Some(Greater) => true,
                Some(Equal) => *incl,
                Some(Less) => false,
                None => true,
            },
        };
        let below_upper = match &self.upper {
            None => true,
            Some((v, incl)) => match min.compare(v) {
                Some(Less) => true,
                Some(Equal) => *incl,
                Some(Greater) => false,
                None => true,
            },
        };
        above_lower && below_upper
    }
}

impl ScanBuilder {
    pub(crate) fn new(table: Table) -> Self {
        Self {
            table,
            selector: SnapshotSelector::Latest,
            partition_filter: vec![],
            all_levels: false,
            key_range: None,
            bucket_key: None,
            postpone: false,
        }
    }

    /// Keeps the files a postpone table's writers staged in `bucket-postpone/` (what its
    /// compaction moves; batch reads, as Paimon's, do not see them).
    pub(crate) fn with_postpone(mut self) -> Self {
        self.postpone = true;
        self
    }

    /// Plans every live file, including level 0 of first-row tables (which batch reads skip).
    pub fn all_levels(mut self) -> Self {
        self.all_levels = true;
        self
    }

    pub fn snapshot(mut self, selector: SnapshotSelector) -> Self {
        self.selector = selector;
        self
    }

    /// Keeps only partitions whose `key` equals `value` (one entry per key; ANDed).
    pub fn partition_filter(mut self, filter: Vec<(String, Datum)>) -> Self {
        self.partition_filter = filter;
        self
    }

    /// Keeps only files that may hold a row whose first primary-key column lies within the bounds
    /// (`(value, inclusive)`); primary-key tables only, ignored otherwise. Rows outside the range
    /// may still be returned (callers filter them).
    pub fn key_range(mut self, lower: Bound, upper: Bound) -> Self {
        self.key_range = Some(KeyRange { lower, upper });
        self
    }

    /// Reads only the bucket that rows with these bucket-key values (one per bucket-key column,
    /// in bucket-key order) hash to; fixed-bucket tables only, ignored otherwise.
    pub fn bucket_key(mut self, values: Vec<Datum>) -> Self {
        self.bucket_key = Some(values);
        self
    }

    /// Resolves the snapshot and lists its files, pruned by partition.
    pub async fn plan(&self) -> Result<Plan> {
        let table = &self.table;
        let snapshot = resolve_snapshot(table, &self.selector).await?;
        let Some(snapshot) = snapshot else {
            return Ok(Plan {
                snapshot: None,
                splits: vec![],
                key_range: None,
            });
        };
        let layout = table.layout()?;
        let pruning = Pruning::new(table.identifier(), &layout, self)?;
        let entries = table
            .manifest_manager()
            .live_entries_shared(&snapshot)
            .await?;
        let splits = pruning
            .splits(entries.iter())
            .map_err(|e| e.at(format!("{} snapshot {}", table.identifier(), snapshot.id)))?;
        // Files written under older schemas are read through their own schema.
        table
            .load_file_schemas(splits.iter().flat_map(|s: &Split| s.files.iter()))
            .await?;
        Ok(Plan {
            snapshot: Some(snapshot),
            splits,
            key_range: self
                .key_range
                .clone()
                .filter(|_| layout.is_primary_key_table()),
        })
    }
}

/// What a scan keeps of a snapshot's live files: pure predicates over manifest entries
/// (partition values, bucket, level, key range), decided from the entries' own metadata.
#[derive(Debug, Clone)]
pub(crate) struct Pruning {
    /// (partition column position, wanted value), ANDed.
    partition: Vec<(usize, Datum)>,
    partition_types: Vec<crate::spec::DataType>,
    /// First-row tables (like Paimon's batch scans) show only compacted files.
    skip_level0: bool,
    /// The bucket-key hash, when one bucket holds every wanted row.
    bucket_hash: Option<i32>,
    /// Postpone-bucket tables (`bucket` = -2): like Paimon's batch scans, only rows a compaction
    /// moved into real buckets are read, not the files still in `bucket-postpone`.
    real_buckets_only: bool,
    /// Bounds on the first primary-key column, and the key columns' types to decode file bounds.
    key_range: Option<(KeyRange, Vec<crate::spec::DataType>)>,
}

impl Pruning {
    /// The pruning `scan` asks of `table` (of `layout`); a filter key that is not a partition key
    /// is the request's mistake.
    pub(crate) fn new(
        table: &impl std::fmt::Display,
        layout: &crate::schema::TableLayout,
        scan: &ScanBuilder,
    ) -> Result<Self> {
        let keys = &layout.schema.partition_keys;
        let mut partition = Vec::new();
        for (k, v) in &scan.partition_filter {
            match keys.iter().position(|p| p == k) {
                Some(i) => partition.push((i, v.clone())),
                None => return invalid!("table {table}: '{k}' is not a partition key"),
            }
        }
        let pk = layout.is_primary_key_table();
        let bucket_hash = match (&scan.bucket_key, layout.bucket_mode) {
            (Some(values), crate::spec::BucketMode::Fixed(_))
                if values.len() == layout.bucket_key_indices.len() && !values.is_empty() =>
            {
                let mut w = binary_row::BinaryRowWriter::default();
                w.reset(values.len());
                for (i, v) in values.iter().enumerate() {
                    w.write_datum(i, v);
                }
                Some(w.hash_code())
            }
            _ => None,
        };
        Ok(Self {
            partition,
            partition_types: layout.partition_types.clone(),
            skip_level0: !scan.all_levels && pk && layout.merge_engine == MergeEngine::FirstRow,
            bucket_hash,
            real_buckets_only: layout.bucket_mode == crate::spec::BucketMode::Postpone
                && !scan.postpone,
            key_range: scan
                .key_range
                .clone()
                .filter(|_| pk)
                .map(|r| (r, layout.key_types.clone())),
        })
    }

    /// Whether entry `e` may hold a wanted row; an error says which partition row is undecodable.
    pub(crate) fn keeps(&self, e: &ManifestEntry) -> std::result::Result<bool, Malformed> {
        if self.skip_level0 && e.file.level == 0 {
            return Ok(false);
        }
        if self.real_buckets_only && e.bucket < 0 {
            return Ok(false);
        }
        if let Some(h) = self.bucket_hash {
            if e.total_buckets > 0 && binary_row::bucket_of(h, e.total_buckets) != e.bucket {
                return Ok(false);
            }
        }
        if let Some((range, key_types)) = &self.key_range {
            let first = |row: &[u8]| {
                binary_row::deserialize(row, key_types)
                    .ok()
                    .and_then(|mut v| (!v.is_empty()).then(|| v.swap_remove(0)))
            };
            // Files without decodable bounds are kept: pruning may only skip what cannot match.
            if let (Some(min), Some(max)) = (first(&e.file.min_key), first(&e.file.max_key)) {
                if !range.overlaps(&min, &max) {
                    return Ok(false);
                }
            }
        }
        if !self.partition.is_empty() {
            let values = binary_row::deserialize(&e.partition, &self.partition_types)
                .map_err(|err| Malformed(format!("partition row: {err}")))?;
            let keep = self.partition.iter().all(|(i, v)| {
                values
                    .get(*i)
                    .is_some_and(|x| x.compare(v) == Some(std::cmp::Ordering::Equal))
            });
            if !keep {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The kept entries grouped into splits of one (partition, bucket), in that order, files in
    /// the order the manifests list them.
    pub(crate) fn splits<'a>(
        &self,
        entries: impl IntoIterator<Item = &'a ManifestEntry>,
    ) -> std::result::Result<Vec<Split>, Malformed> {
        let mut groups: BTreeMap<(&[u8], i32), Vec<DataFileMeta>> = BTreeMap::new();
        for e in entries {
            if self.keeps(e)? {
                groups
                    .entry((&e.partition, e.bucket))
                    .or_default()
                    .push(e.file.clone());
            }
        }
        Ok(groups
            .into_iter()
            .map(|((partition, bucket), files)| Split {
                partition: partition.to_vec(),
                bucket,
                files,
                rows: None,
            })
            .collect())
    }
}

/// The snapshot `selector` names (`None`: the table has no snapshot yet).
pub(crate) async fn resolve_snapshot(
    table: &Table,
    selector: &SnapshotSelector,
) -> Result<Option<Snapshot>> {
    let sm = table.snapshot_manager();
    let snapshot = match selector {
        SnapshotSelector::Tag(name) => Some(table.tag_manager().get(name).await?),
        SnapshotSelector::Latest => sm.latest().await?,
        SnapshotSelector::Id(id) => Some(sm.snapshot(*id).await?),
        SnapshotSelector::TimestampMillis(t) => match sm.snapshot_at_or_before(*t).await? {
            Some(s) => Some(s),
            None => {
                return NotFoundSnafu {
                    message: format!(
                        "table {} has no snapshot at or before timestamp {t}",
                        table.identifier()
                    ),
                }
                .fail()
            }
        },
    };
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::TableLayout;
    use crate::spec::manifest::FileKind;

    fn layout(options: &str) -> TableLayout {
        TableLayout::from_json(&format!(
            r#"{{"version":3,"id":0,"fields":[{{"id":0,"name":"id","type":"BIGINT NOT NULL"}},
            {{"id":1,"name":"v","type":"STRING"}},{{"id":2,"name":"dt","type":"STRING NOT NULL"}}],
            "highestFieldId":2,"partitionKeys":["dt"],"primaryKeys":["id","dt"],
            "options":{{"bucket":"2"{options}}},"timeMillis":1}}"#
        ))
    }

    fn entry(dt: &str, bucket: i32, level: i32, keys: (i64, i64)) -> ManifestEntry {
        ManifestEntry {
            kind: FileKind::Add,
            partition: binary_row::serialize(&[Datum::String(dt.into())]),
            bucket,
            total_buckets: 2,
            file: DataFileMeta::for_test(
                &format!("data-{dt}-{bucket}-{level}-{}.parquet", keys.0),
                level,
                keys.0,
                keys.1,
            ),
        }
    }

    fn scan() -> ScanBuilder {
        let dir = crate::io::FileIo::memory();
        let schema = layout("").schema.as_ref().clone();
        ScanBuilder::new(Table::new(
            dir,
            crate::spec::identifier::Identifier::new("db", "t"),
            "db.db/t".into(),
            schema,
            crate::clock::Clock::system(),
        ))
    }

    fn names(splits: &[Split]) -> Vec<(i32, usize)> {
        splits.iter().map(|s| (s.bucket, s.files.len())).collect()
    }

    #[test]
    fn partition_filters_keep_only_their_partition_and_name_bad_keys() {
        let l = layout("");
        let s = scan().partition_filter(vec![("dt".into(), Datum::String("a".into()))]);
        let p = Pruning::new(&"t", &l, &s).unwrap();
        assert!(p.keeps(&entry("a", 0, 0, (1, 5))).unwrap());
        assert!(!p.keeps(&entry("b", 0, 0, (1, 5))).unwrap());
        let bad = scan().partition_filter(vec![("v".into(), Datum::String("a".into()))]);
        let e = Pruning::new(&"t", &l, &bad).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument);
        assert_eq!(e.to_string(), "table t: 'v' is not a partition key");
        let mut broken = entry("a", 0, 0, (1, 5));
        broken.partition = vec![1, 2, 3];
        assert!(p.keeps(&broken).unwrap_err().0.starts_with("partition row"));
    }

    #[test]
    fn key_ranges_skip_files_entirely_outside_and_keep_the_rest() {
        let l = layout("");
        let s = scan().key_range(
            Some((Datum::BigInt(10), true)),
            Some((Datum::BigInt(20), false)),
        );
        let p = Pruning::new(&"t", &l, &s).unwrap();
        assert!(
            p.keeps(&entry("a", 0, 0, (1, 10))).unwrap(),
            "touches the inclusive lower bound"
        );
        assert!(
            !p.keeps(&entry("a", 0, 0, (20, 30))).unwrap(),
            "starts at the exclusive upper bound"
        );
        assert!(!p.keeps(&entry("a", 0, 0, (1, 9))).unwrap());
        assert!(p.keeps(&entry("a", 0, 0, (15, 16))).unwrap());
        let mut unknown = entry("a", 0, 0, (1, 2));
        unknown.file.min_key.clear();
        assert!(p.keeps(&unknown).unwrap(), "undecodable bounds are kept");
    }

    #[test]
    fn a_bucket_key_reads_one_bucket_and_first_row_tables_skip_level_0() {
        let l = layout("");
        let s = scan().bucket_key(vec![Datum::BigInt(7)]);
        let p = Pruning::new(&"t", &l, &s).unwrap();
        let kept: Vec<i32> = (0..2)
            .filter(|b| p.keeps(&entry("a", *b, 0, (1, 9))).unwrap())
            .collect();
        assert_eq!(kept.len(), 1, "exactly one bucket holds key 7: {kept:?}");
        let first_row = layout(r#","merge-engine":"first-row""#);
        let p = Pruning::new(&"t", &first_row, &scan()).unwrap();
        assert!(!p.keeps(&entry("a", 0, 0, (1, 2))).unwrap());
        assert!(p.keeps(&entry("a", 0, 1, (1, 2))).unwrap());
        let p = Pruning::new(&"t", &first_row, &scan().all_levels()).unwrap();
        assert!(p.keeps(&entry("a", 0, 0, (1, 2))).unwrap());
    }

    #[test]
    fn splits_group_by_partition_and_bucket_in_order() {
        let p = Pruning::new(&"t", &layout(""), &scan()).unwrap();
        let splits = p
            .splits(&[
                entry("b", 1, 0, (1, 2)),
                entry("a", 1, 0, (1, 2)),
                entry("a", 0, 0, (1, 2)),
                entry("a", 1, 1, (3, 4)),
            ])
            .unwrap();
        assert_eq!(names(&splits), vec![(0, 1), (1, 2), (1, 1)]);
        assert_eq!(splits[1].files[0].level, 0, "manifest order within a split");
    }
}
