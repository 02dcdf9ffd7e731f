//! Scan planning: which snapshot, which files, grouped into splits of one (partition, bucket).
//! Pure selection over manifest entries once they are read; no data file is opened here.

use std::collections::BTreeMap;

use super::Table;
use crate::error::{invalid, NotFoundSnafu, Result};
use crate::spec::binary_row::{self, Datum};
use crate::spec::{DataFileMeta, MergeEngine, Snapshot};

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
}

type Bound = Option<(Datum, bool)>;

/// Bounds on the first primary-key column (value, inclusive).
#[derive(Debug, Clone)]
pub struct KeyRange {
    lower: Bound,
    upper: Bound,
}

impl KeyRange {
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
        }
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
        let keys = &layout.schema.partition_keys;
        let mut filter: Vec<(usize, &Datum)> = Vec::new();
        for (k, v) in &self.partition_filter {
            match keys.iter().position(|p| p == k) {
                Some(i) => filter.push((i, v)),
                None => {
                    return invalid!("table {}: '{k}' is not a partition key", table.identifier())
                }
            }
        }
        // First-row tables (like Paimon's batch scans) only show compacted files.
        let skip_level0 = !self.all_levels
            && layout.is_primary_key_table()
            && layout.merge_engine == MergeEngine::FirstRow;
        // The hash of the bucket key, when one bucket holds every wanted row.
        let bucket_hash = match (&self.bucket_key, layout.bucket_mode) {
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
        let mut groups: BTreeMap<(Vec<u8>, i32), Vec<DataFileMeta>> = BTreeMap::new();
        for e in table.manifest_manager().live_entries(&snapshot).await? {
            if skip_level0 && e.file.level == 0 {
                continue;
            }
            if let Some(h) = bucket_hash {
                if e.total_buckets > 0 && binary_row::bucket_of(h, e.total_buckets) != e.bucket {
                    continue;
                }
            }
            if let (Some(range), true) = (&self.key_range, layout.is_primary_key_table()) {
                let first = |row: &[u8]| {
                    binary_row::deserialize(row, &layout.key_types)
                        .ok()
                        .and_then(|mut v| (!v.is_empty()).then(|| v.swap_remove(0)))
                };
                if let (Some(min), Some(max)) = (first(&e.file.min_key), first(&e.file.max_key)) {
                    if !range.overlaps(&min, &max) {
                        continue;
                    }
                }
            }
            if !filter.is_empty() {
                let values = binary_row::deserialize(&e.partition, &layout.partition_types)
                    .map_err(|err| {
                        crate::error::CorruptSnafu {
                            path: format!("{} snapshot {}", table.identifier(), snapshot.id),
                            message: format!("partition row: {err}"),
                        }
                        .build()
                    })?;
                let keep = filter.iter().all(|(i, v)| {
                    values
                        .get(*i)
                        .is_some_and(|x| x.compare(v) == Some(std::cmp::Ordering::Equal))
                });
                if !keep {
                    continue;
                }
            }
            groups
                .entry((e.partition, e.bucket))
                .or_default()
                .push(e.file);
        }
        let splits: Vec<Split> = groups
            .into_iter()
            .map(|((partition, bucket), files)| Split {
                partition,
                bucket,
                files,
            })
            .collect();
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

/// The snapshot `selector` names (`None`: the table has no snapshot yet).
pub(crate) async fn resolve_snapshot(
    table: &Table,
    selector: &SnapshotSelector,
) -> Result<Option<Snapshot>> {
    let sm = table.snapshot_manager();
    let snapshot = match selector {
        SnapshotSelector::Tag(name) => Some(
            crate::snapshot::tag::TagManager::new(
                table.io().clone(),
                table.path(),
                table.identifier().to_string(),
            )
            .get(name)
            .await?,
        ),
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
