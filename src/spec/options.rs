//! Table options: [`TableOptions`], the one typed and validated set every reader of options
//! uses (Paimon's names and defaults), parsed once per schema version (by
//! [`TableLayout`](crate::schema::TableLayout), so a malformed value is refused at CREATE and
//! ALTER with the option named); and [`CoreOptions`], the accessors over the raw string map that
//! the parse and the layout read. Options that change what a table's files mean and that tidelake
//! does not implement yet ([`UNIMPLEMENTED`]) are refused, on create and alter and on every read
//! and write of a table that carries them: a silently wrong answer is worse than a refusal.

use std::collections::BTreeMap;

use crate::error::{invalid_argument, Error, Result, UnsupportedSnafu};

/// How rows of a table are assigned to buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketMode {
    /// `bucket` = N > 0: hash of the bucket key modulo N.
    Fixed(i32),
    /// `bucket` = -1 on an append table: everything in bucket 0, no ordering.
    Unaware,
    /// `bucket` = -1 on a primary-key table (dynamic buckets, assigned per key hash).
    Dynamic,
    /// `bucket` = -2 on a primary-key table (postpone): writers stage rows in `bucket-postpone/`,
    /// a compaction moves them into fixed buckets.
    Postpone,
}

/// `dynamic-bucket.*` options of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicOptions {
    /// `dynamic-bucket.target-row-num` (2,000,000): hashes per bucket before a new one opens.
    pub target_row_num: u64,
    /// `dynamic-bucket.max-buckets` (-1: unbounded).
    pub max_buckets: i32,
}

impl Default for DynamicOptions {
    fn default() -> Self {
        Self {
            target_row_num: 2_000_000,
            max_buckets: -1,
        }
    }
}

/// The merge engine of a primary-key table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeEngine {
    Deduplicate,
    PartialUpdate,
    Aggregation,
    FirstRow,
}

impl MergeEngine {
    pub fn name(&self) -> &'static str {
        match self {
            MergeEngine::Deduplicate => "deduplicate",
            MergeEngine::PartialUpdate => "partial-update",
            MergeEngine::Aggregation => "aggregation",
            MergeEngine::FirstRow => "first-row",
        }
    }
}

/// How a primary-key table produces its changelog (`changelog-producer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangelogProducer {
    /// No changelog files: streaming reads see the merged delta of each APPEND snapshot.
    None,
    /// The writer's input records, unmerged, in changelog files at each flush.
    Input,
    /// Compactions of level-0 files compare each key with its value in higher levels.
    Lookup,
    /// Full compactions compare each key with its value in the max level.
    FullCompaction,
}

impl ChangelogProducer {
    pub fn parse(v: &str) -> Result<Self> {
        Ok(match v.trim().to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "input" => Self::Input,
            "lookup" => Self::Lookup,
            "full-compaction" => Self::FullCompaction,
            other => {
                return Err(invalid_argument(format!(
                    "unknown changelog-producer '{other}' (expected none, input, lookup or full-compaction)"
                )))
            }
        })
    }

    /// The producer of a table (`none` when unset or unparsable; tables are validated on create).
    pub fn of(opts: &CoreOptions<'_>) -> Self {
        opts.get(CHANGELOG_PRODUCER)
            .and_then(|v| Self::parse(v).ok())
            .unwrap_or(Self::None)
    }
}

pub const CHANGELOG_PRODUCER: &str = "changelog-producer";
pub const BUCKET: &str = "bucket";
pub const BUCKET_KEY: &str = "bucket-key";
pub const FILE_FORMAT: &str = "file.format";
pub const MERGE_ENGINE: &str = "merge-engine";
pub const SEQUENCE_FIELD: &str = "sequence.field";
pub const ROWKIND_FIELD: &str = "rowkind.field";
pub const PARTITION_DEFAULT_NAME: &str = "partition.default-name";
pub const WRITE_BUFFER_ROWS: &str = "write-buffer-rows";
pub const TARGET_FILE_SIZE: &str = "target-file-size";
pub const COMMIT_MAX_RETRIES: &str = "commit.max-retries";
pub const IGNORE_DELETE: &str = "ignore-delete";

/// Typed accessors over a table's options.
#[derive(Debug, Clone)]
pub struct CoreOptions<'a> {
    map: &'a BTreeMap<String, String>,
}

impl<'a> CoreOptions<'a> {
    pub fn new(map: &'a BTreeMap<String, String>) -> Self {
        Self { map }
    }

    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.map.get(key).map(String::as_str)
    }

    /// A boolean option that is on when it says `true` (any case).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// The raw `bucket` option (default -1).
    pub fn bucket(&self) -> Result<i32> {
        match self.get(BUCKET) {
            None => Ok(-1),
            Some(v) => v
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|b| *b > 0 || *b == -1 || *b == -2)
                .ok_or_else(|| {
                    invalid_argument(format!(
                        "option 'bucket' must be a positive number, -1 or -2, got '{v}'"
                    ))
                }),
        }
    }

    pub fn bucket_mode(&self, primary_key_table: bool) -> Result<BucketMode> {
        Ok(match self.bucket()? {
            -2 => BucketMode::Postpone,
            -1 if primary_key_table => BucketMode::Dynamic,
            -1 => BucketMode::Unaware,
            n => BucketMode::Fixed(n),
        })
    }

    pub fn bucket_key(&self) -> Option<Vec<String>> {
        self.get(BUCKET_KEY).map(split_list)
    }

    pub fn merge_engine(&self) -> Result<MergeEngine> {
        Ok(match self.get(MERGE_ENGINE).unwrap_or("deduplicate") {
            "deduplicate" => MergeEngine::Deduplicate,
            "partial-update" => MergeEngine::PartialUpdate,
            "aggregation" => MergeEngine::Aggregation,
            "first-row" => MergeEngine::FirstRow,
            other => return Err(invalid_argument(format!("unknown merge-engine '{other}'"))),
        })
    }

    pub fn file_format(&self) -> &'a str {
        self.get(FILE_FORMAT).unwrap_or("parquet")
    }

    pub fn sequence_fields(&self) -> Vec<String> {
        self.get(SEQUENCE_FIELD).map(split_list).unwrap_or_default()
    }

    pub fn rowkind_field(&self) -> Option<&'a str> {
        self.get(ROWKIND_FIELD)
    }

    pub fn ignore_delete(&self) -> bool {
        self.get(IGNORE_DELETE)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    pub fn partition_default_name(&self) -> &'a str {
        self.get(PARTITION_DEFAULT_NAME)
            .unwrap_or("__DEFAULT_PARTITION__")
    }

    /// `partition.legacy-name` (default true): how partition values are rendered in paths.
    pub fn partition_legacy_name(&self) -> bool {
        !self
            .get("partition.legacy-name")
            .is_some_and(|v| v.eq_ignore_ascii_case("false"))
    }
}

/// `row-tracking.enabled`: append tables whose rows carry `_ROW_ID`s assigned at commit.
pub const ROW_TRACKING: &str = "row-tracking.enabled";
/// `data-evolution.enabled` (on row-tracking tables): later writes may hold only some columns of
/// rows already written, in files covering the same row ids ([`crate::table::data_evolution`]).
pub const DATA_EVOLUTION: &str = "data-evolution.enabled";
/// `deletion-vectors.enabled`: rows of files above level 0 deleted through index files, written
/// by the compactions that rewrite their keys (so batch reads need not merge).
pub const DELETION_VECTORS: &str = "deletion-vectors.enabled";
/// `deletion-vectors.merge-on-read`: batch reads merge level 0 too (not supported yet).
pub const DV_MERGE_ON_READ: &str = "deletion-vectors.merge-on-read";

/// `deletion-vectors.bitmap64`: vectors in the 64-bit (Iceberg-compatible) layout.
pub const DV_BITMAP64: &str = "deletion-vectors.bitmap64";
/// `deletion-vectors.modifiable`: allows turning deletion vectors on or off on an existing table.
pub const DV_MODIFIABLE: &str = "deletion-vectors.modifiable";

/// Options that change what a table's files mean, and that tidelake does not implement yet:
/// (key, the value that switches it on (`*`: any), what it is). A table carrying one is refused.
pub const UNIMPLEMENTED: &[(&str, &str, &str)] = &[
    (
        "index-file-in-data-file-dir",
        "true",
        "index files kept in the bucket directories",
    ),
    ("blob-field", "*", "BYTES columns kept as BLOB"),
    (
        "blob-descriptor-field",
        "*",
        "BLOB columns kept inline as descriptors of bytes elsewhere",
    ),
    (
        "blob-view-field",
        "*",
        "BLOB columns viewed from another table",
    ),
];
/// `blob-as-descriptor` (false): BLOB columns read as serialized `BlobDescriptor`s (the `.blob`
/// file, offset and length of each value) instead of the bytes.
pub const BLOB_AS_DESCRIPTOR: &str = "blob-as-descriptor";

/// `file.compression.per.level`: codecs of the files of some LSM levels (`0:lz4,1:zstd`).
pub const FILE_COMPRESSION_PER_LEVEL: &str = "file.compression.per.level";

pub use super::file_format::{
    FileCompression, FileFormat, FILE_COMPRESSION, FILE_COMPRESSION_ZSTD_LEVEL,
};

/// Every option tidelake reads, typed, with Paimon's defaults. Parsed by [`TableOptions::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOptions {
    /// `write-only`: writers never compact or expire (a separate job does).
    pub write_only: bool,
    /// `write-buffer-rows` (tidelake's own; 1,000,000).
    pub write_buffer_rows: usize,
    /// `target-file-size` in bytes (128 mb).
    pub target_file_size: u64,
    /// `commit.max-retries` (10).
    pub commit_max_retries: u32,
    /// `num-sorted-run.compaction-trigger` (5).
    pub compaction_trigger: usize,
    /// `num-sorted-run.stop-trigger` (compaction trigger + 3): writers wait for compaction above it.
    pub stop_trigger: usize,
    /// `num-levels` (compaction trigger + 1, at least 2).
    pub num_levels: usize,
    /// `compaction.max-size-amplification-percent` (200).
    pub max_size_amplification_percent: u64,
    /// `compaction.size-ratio` (1).
    pub size_ratio: u64,
    /// `full-compaction.delta-commits` (1): for the full-compaction changelog producer.
    pub full_compaction_delta_commits: u64,
    /// `changelog-producer.row-deduplicate`.
    pub changelog_row_deduplicate: bool,
    /// `snapshot.num-retained.min` (10).
    pub snapshot_min_retained: i64,
    /// `snapshot.num-retained.max` (Integer.MAX_VALUE).
    pub snapshot_max_retained: i64,
    /// `snapshot.time-retained` in ms (1 h).
    pub snapshot_time_retained_millis: i64,
    /// `snapshot.expire.limit` (50).
    pub snapshot_expire_limit: i64,
    /// `changelog.num-retained.min` (the snapshot one when unset).
    pub changelog_min_retained: Option<i64>,
    /// `changelog.num-retained.max`.
    pub changelog_max_retained: Option<i64>,
    /// `changelog.time-retained` in ms.
    pub changelog_time_retained_millis: Option<i64>,
    /// `consumer.expiration-time` in ms (consumers never expire when unset).
    pub consumer_expiration_millis: Option<i64>,
    /// `dynamic-bucket.target-row-num` (2,000,000) and `dynamic-bucket.max-buckets` (-1).
    pub dynamic: DynamicOptions,
    /// `lookup.cache-max-memory-size` (256 mb): the memory a cross-partition table's key index
    /// keeps of its pages (Paimon's bound of the same local key-value state).
    pub lookup_cache_bytes: u64,
    /// `postpone.*`: how many buckets a postpone table's compaction moves a partition's rows into.
    pub postpone: PostponeOptions,
    /// `data-file.thin-mode` (false): primary-key files are written without their `_KEY_`
    /// columns, the keys being the value columns of the same names (readers take them from there).
    pub thin_mode: bool,
    /// `data-evolution.enabled` (false): a row's columns may be spread over several files that
    /// cover the same row ids, read back together by row id.
    pub data_evolution: bool,
    /// `blob-as-descriptor` (false): BLOB values read as Paimon's serialized descriptors.
    pub blob_as_descriptor: bool,
    /// `file.format` (parquet): the format new data files are written in; none for a format
    /// tidelake does not write (its files are refused on read, writing the table is refused).
    pub format: Option<FileFormat>,
    /// `file.compression` and `file.compression.zstd-level` (zstd at level 1).
    pub compression: FileCompression,
    /// `file.compression.per.level`: the codec of the files of these levels, by level.
    pub compression_per_level: BTreeMap<i32, FileCompression>,
}

impl TableOptions {
    /// The codec of a file written at LSM `level` (pure).
    pub fn compression_at(&self, level: i32) -> FileCompression {
        self.compression_per_level
            .get(&level)
            .copied()
            .unwrap_or(self.compression)
    }
}

/// `file.compression.per.level` (`level:codec` pairs, comma-separated), each codec at `zstd_level`
/// where it is zstd (pure).
fn per_level(v: Option<&str>, zstd_level: Option<&str>) -> Result<BTreeMap<i32, FileCompression>> {
    let mut out = BTreeMap::new();
    for pair in v.map(split_list).unwrap_or_default() {
        let parsed = pair.split_once(':').and_then(|(l, c)| {
            let level = l.trim().parse::<i32>().ok().filter(|l| *l >= 0)?;
            Some((level, c.trim()))
        });
        let Some((level, codec)) = parsed else {
            return Err(Reader::bad(
                FILE_COMPRESSION_PER_LEVEL,
                v.unwrap_or_default(),
                "level:codec pairs such as '0:lz4,1:zstd'",
            ));
        };
        out.insert(level, FileCompression::parse(Some(codec), zstd_level)?);
    }
    Ok(out)
}

/// `postpone.*` options of a table (`bucket` = -2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostponeOptions {
    /// `postpone.default-bucket-num`: buckets of a partition that has none yet.
    pub default_bucket_num: Option<i32>,
    /// `postpone.target-row-num-per-bucket`: estimate the count from rows (wins over size).
    pub target_row_num: Option<i64>,
    /// `postpone.target-size-per-bucket` (1 gb): estimate the count from file bytes.
    pub target_size: u64,
}

impl Default for PostponeOptions {
    fn default() -> Self {
        Self {
            default_bucket_num: None,
            target_row_num: None,
            target_size: 1 << 30,
        }
    }
}

impl Default for TableOptions {
    fn default() -> Self {
        match Self::parse(&BTreeMap::new()) {
            Ok(o) => o,
            Err(e) => unreachable!("the defaults are valid: {e}"),
        }
    }
}

/// Parses Paimon durations: `1 h`, `30 min`, `10 s`, `500 ms`, `2 d` (a bare number is millis).
pub fn parse_duration_millis(v: &str) -> Option<i64> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: i64 = num.parse().ok()?;
    let mult = match unit.trim() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1000,
        "min" | "m" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// A retention duration (table option or expiry argument): a Paimon duration, not negative.
pub fn retention_millis(text: &str) -> Option<i64> {
    parse_duration_millis(text).filter(|ms| *ms >= 0)
}

/// Paimon's rule for every retention pair (table options and expiry arguments alike): the
/// maximum kept must not be below the minimum kept. `(name, value)` of each, as the error names
/// them.
pub fn retained_in_order(max: (&str, i64), min: (&str, i64)) -> Result<()> {
    if max.1 < min.1 {
        return Err(invalid_argument(format!(
            "{} ({}) must not be below {} ({})",
            max.0, max.1, min.0, min.1
        )));
    }
    Ok(())
}

/// The options of one map, read with the error naming the option.
struct Reader<'a>(&'a BTreeMap<String, String>);

impl Reader<'_> {
    fn raw(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.trim())
    }

    fn bad(key: &str, v: &str, want: &str) -> Error {
        invalid_argument(format!("option '{key}' must be {want}, got '{v}'"))
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.raw(key) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(Self::bad(key, v, "true or false")),
        }
    }

    /// A whole number of at least `min`.
    fn count(&self, key: &str, min: i64) -> Result<Option<i64>> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) => match v.parse::<i64>() {
                Ok(n) if n >= min => Ok(Some(n)),
                _ => Err(Self::bad(
                    key,
                    v,
                    &format!("a whole number of at least {min}"),
                )),
            },
        }
    }

    fn duration(&self, key: &str) -> Result<Option<i64>> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) => match retention_millis(v) {
                Some(ms) => Ok(Some(ms)),
                None => Err(Self::bad(key, v, "a duration such as '1 h' or '30 min'")),
            },
        }
    }

    fn memory(&self, key: &str) -> Result<Option<u64>> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) => match parse_memory_size(v) {
                Some(n) if n > 0 => Ok(Some(n)),
                _ => Err(Self::bad(key, v, "a memory size such as '128 mb'")),
            },
        }
    }
}

impl TableOptions {
    /// The first option of `map` that switches on a mode tidelake does not implement, as the
    /// refusal's message.
    pub fn unimplemented(map: &BTreeMap<String, String>) -> Option<String> {
        UNIMPLEMENTED.iter().find_map(|(key, on, what)| {
            map.get(*key)
                .filter(|v| *on == "*" || v.trim().eq_ignore_ascii_case(on))
                .map(|v| {
                    format!("option '{key}' = '{v}' ({what}) is not supported by tidelake yet")
                })
        })
    }

    /// Parses and validates `map` (Paimon's `SchemaValidation` rules for what tidelake reads);
    /// the error names the option. An unimplemented mode ([`TableOptions::unimplemented`]) is an
    /// error too.
    pub fn parse(map: &BTreeMap<String, String>) -> Result<Self> {
        if let Some(message) = Self::unimplemented(map) {
            return UnsupportedSnafu { message }.fail();
        }
        let r = Reader(map);
        let compaction_trigger = r
            .count("num-sorted-run.compaction-trigger", 1)?
            .unwrap_or(5) as usize;
        let stop_trigger = r
            .count("num-sorted-run.stop-trigger", 1)?
            .map_or(compaction_trigger + 3, |n| n as usize)
            .max(compaction_trigger);
        let num_levels = r
            .count("num-levels", 2)?
            .map_or((compaction_trigger + 1).max(2), |n| n as usize);
        let snapshot_min_retained = r.count("snapshot.num-retained.min", 1)?.unwrap_or(10);
        let snapshot_max_retained = r
            .count("snapshot.num-retained.max", 1)?
            .unwrap_or(i32::MAX as i64);
        retained_in_order(
            ("option 'snapshot.num-retained.max'", snapshot_max_retained),
            ("'snapshot.num-retained.min'", snapshot_min_retained),
        )?;
        let changelog_min_retained = r.count("changelog.num-retained.min", 1)?;
        let changelog_max_retained = r.count("changelog.num-retained.max", 1)?;
        let (cmin, cmax) = (
            changelog_min_retained.unwrap_or(snapshot_min_retained),
            changelog_max_retained.unwrap_or(snapshot_max_retained),
        );
        retained_in_order(
            ("option 'changelog.num-retained.max'", cmax),
            ("'changelog.num-retained.min'", cmin),
        )?;
        Ok(Self {
            write_only: r.flag("write-only", false)?,
            write_buffer_rows: r.count(WRITE_BUFFER_ROWS, 1)?.unwrap_or(1_000_000) as usize,
            target_file_size: r.memory(TARGET_FILE_SIZE)?.unwrap_or(128 << 20),
            lookup_cache_bytes: r
                .memory("lookup.cache-max-memory-size")?
                .unwrap_or(256 << 20),
            commit_max_retries: r
                .count(COMMIT_MAX_RETRIES, 0)?
                .unwrap_or(10)
                .min(u32::MAX as i64) as u32,
            compaction_trigger,
            stop_trigger,
            num_levels,
            max_size_amplification_percent: r
                .count("compaction.max-size-amplification-percent", 0)?
                .unwrap_or(200) as u64,
            size_ratio: r.count("compaction.size-ratio", 0)?.unwrap_or(1) as u64,
            full_compaction_delta_commits: r.count("full-compaction.delta-commits", 1)?.unwrap_or(1)
                as u64,
            changelog_row_deduplicate: r.flag("changelog-producer.row-deduplicate", false)?,
            snapshot_min_retained,
            snapshot_max_retained,
            snapshot_time_retained_millis: r
                .duration("snapshot.time-retained")?
                .unwrap_or(3_600_000),
            snapshot_expire_limit: r.count("snapshot.expire.limit", 1)?.unwrap_or(50),
            changelog_min_retained,
            changelog_max_retained,
            changelog_time_retained_millis: r.duration("changelog.time-retained")?,
            consumer_expiration_millis: r.duration("consumer.expiration-time")?,
            dynamic: DynamicOptions {
                target_row_num: r
                    .count("dynamic-bucket.target-row-num", 1)?
                    .unwrap_or(2_000_000) as u64,
                max_buckets: match r.raw("dynamic-bucket.max-buckets") {
                    None => -1,
                    Some(v) => match v.parse::<i32>() {
                        Ok(n) if n == -1 || n >= 1 => n,
                        _ => {
                            return Err(Reader::bad(
                                "dynamic-bucket.max-buckets",
                                v,
                                "-1 (no limit) or a positive number",
                            ))
                        }
                    },
                },
            },
            postpone: PostponeOptions {
                default_bucket_num: r
                    .count("postpone.default-bucket-num", 1)?
                    .map(|n| n.min(i32::MAX as i64) as i32),
                target_row_num: r.count("postpone.target-row-num-per-bucket", 1)?,
                target_size: r
                    .memory("postpone.target-size-per-bucket")?
                    .unwrap_or(1 << 30),
            },
            thin_mode: r.flag("data-file.thin-mode", false)?,
            data_evolution: r.flag(DATA_EVOLUTION, false)?,
            blob_as_descriptor: r.flag(BLOB_AS_DESCRIPTOR, false)?,
            format: FileFormat::parse(r.raw(FILE_FORMAT).unwrap_or("parquet")),
            compression: FileCompression::parse(
                r.raw(FILE_COMPRESSION),
                r.raw(FILE_COMPRESSION_ZSTD_LEVEL),
            )?,
            compression_per_level: per_level(
                r.raw(FILE_COMPRESSION_PER_LEVEL),
                r.raw(FILE_COMPRESSION_ZSTD_LEVEL),
            )?,
        })
    }
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Parses Paimon memory sizes such as `128 mb`, `64MB`, `1 gb`, `1024`.
pub fn parse_memory_size(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult = match unit.trim() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kibibytes" => 1 << 10,
        "m" | "mb" | "mebibytes" => 1 << 20,
        "g" | "gb" | "gibibytes" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<TableOptions> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TableOptions::parse(&map)
    }

    #[test]
    fn typed_options_take_paimon_defaults() {
        let o = TableOptions::default();
        assert_eq!(o.compaction_trigger, 5);
        assert_eq!(o.stop_trigger, 8);
        assert_eq!(o.num_levels, 6);
        assert_eq!(o.snapshot_min_retained, 10);
        assert_eq!(o.snapshot_max_retained, i32::MAX as i64);
        assert_eq!(o.snapshot_time_retained_millis, 3_600_000);
        assert_eq!(o.target_file_size, 128 << 20);
        assert!(!o.write_only);
        let o = parse(&[
            ("num-sorted-run.compaction-trigger", "3"),
            ("snapshot.time-retained", "30 min"),
            ("write-only", "TRUE"),
        ])
        .unwrap();
        assert_eq!((o.stop_trigger, o.num_levels), (6, 4));
        assert_eq!(o.snapshot_time_retained_millis, 1_800_000);
        assert!(o.write_only);
    }

    #[test]
    fn malformed_values_are_refused_with_the_option_named() {
        for (k, v, want) in [
            (
                "num-sorted-run.stop-trigger",
                "many",
                "a whole number of at least 1",
            ),
            (
                "snapshot.num-retained.min",
                "0",
                "a whole number of at least 1",
            ),
            ("snapshot.time-retained", "soon", "a duration"),
            ("write-only", "yes", "true or false"),
            ("target-file-size", "big", "a memory size"),
        ] {
            let e = parse(&[(k, v)]).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument);
            let e = e.to_string();
            assert!(e.starts_with(&format!("option '{k}' must be")), "{e}");
            assert!(e.contains(want) && e.contains(&format!("got '{v}'")), "{e}");
        }
        let e = parse(&[
            ("snapshot.num-retained.min", "5"),
            ("snapshot.num-retained.max", "2"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "option 'snapshot.num-retained.max' (2) must not be below 'snapshot.num-retained.min' (5)"
            ),
            "{e}"
        );
    }

    #[test]
    fn file_compression_takes_paimons_names_and_zstd_levels() {
        let c = |codec: Option<&str>, level: Option<&str>| FileCompression::parse(codec, level);
        assert_eq!(c(None, None).unwrap(), FileCompression::Zstd(1));
        assert_eq!(
            c(Some("ZSTD"), Some("9")).unwrap(),
            FileCompression::Zstd(9)
        );
        assert_eq!(c(None, Some("22")).unwrap(), FileCompression::Zstd(22));
        for (name, want) in [
            ("none", FileCompression::None),
            ("uncompressed", FileCompression::None),
            ("snappy", FileCompression::Snappy),
            ("lz4", FileCompression::Lz4),
            ("LZ4_RAW", FileCompression::Lz4Raw),
            ("gzip", FileCompression::Gzip),
            ("zlib", FileCompression::Gzip),
            ("brotli", FileCompression::Brotli),
            ("lzo", FileCompression::Lzo),
        ] {
            assert_eq!(c(Some(name), None).unwrap(), want, "{name}");
        }
        for (codec, level) in [(Some("zip"), None), (None, Some("0")), (None, Some("23"))] {
            let e = c(codec, level).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument);
        }
        // Through the table's options, with codecs per level.
        let opts = parse(&[
            ("file.compression", "snappy"),
            ("file.compression.per.level", "0:lz4, 3:zstd"),
            ("file.compression.zstd-level", "5"),
        ])
        .unwrap();
        assert_eq!(opts.compression_at(0), FileCompression::Lz4);
        assert_eq!(opts.compression_at(1), FileCompression::Snappy);
        assert_eq!(opts.compression_at(3), FileCompression::Zstd(5));
        for bad in ["0", "x:zstd", "-1:zstd", "0:zip"] {
            let e = parse(&[("file.compression.per.level", bad)]).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn unimplemented_table_modes_are_refused_by_name() {
        for (k, on, _) in UNIMPLEMENTED {
            let e = parse(&[(k, "true")]).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Unsupported);
            let e = e.to_string();
            assert!(e.contains(&format!("option '{k}' = 'true'")), "{e}");
            assert!(e.contains("not supported by tidelake yet"), "{e}");
            // Switched off, it changes nothing; a key refused whatever its value stays refused.
            assert_eq!(parse(&[(k, "false")]).is_ok(), *on != "*", "{k}");
        }
        assert!(parse(&[("blob-field", "picture")]).is_err());
    }

    #[test]
    fn defaults_and_parsing() {
        let mut m = BTreeMap::new();
        let o = CoreOptions::new(&m);
        assert_eq!(o.bucket().unwrap(), -1);
        assert_eq!(o.merge_engine().unwrap(), MergeEngine::Deduplicate);
        m.insert("bucket".into(), "0".into());
        assert!(CoreOptions::new(&m).bucket().is_err());
        assert_eq!(parse_memory_size("128 mb"), Some(128 << 20));
        assert_eq!(parse_memory_size("x"), None);
    }
}
