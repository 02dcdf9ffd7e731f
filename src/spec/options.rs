//! Table options (`CoreOptions`): the typed view over a schema's string map, with Paimon's defaults.

use std::collections::BTreeMap;

/// How rows of a table are assigned to buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketMode {
    /// `bucket` = N > 0: hash of the bucket key modulo N.
    Fixed(i32),
    /// `bucket` = -1 on an append table: everything in bucket 0, no ordering.
    Unaware,
    /// `bucket` = -1 on a primary-key table (dynamic buckets; not supported yet).
    Dynamic,
    /// `bucket` = -2 (postpone; not supported yet).
    Postpone,
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
    pub fn parse(v: &str) -> Result<Self, String> {
        Ok(match v.trim().to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "input" => Self::Input,
            "lookup" => Self::Lookup,
            "full-compaction" => Self::FullCompaction,
            other => {
                return Err(format!(
                    "unknown changelog-producer '{other}' (expected none, input, lookup or full-compaction)"
                ))
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

    /// The raw `bucket` option (default -1).
    pub fn bucket(&self) -> Result<i32, String> {
        match self.get(BUCKET) {
            None => Ok(-1),
            Some(v) => v
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|b| *b > 0 || *b == -1 || *b == -2)
                .ok_or_else(|| {
                    format!("option 'bucket' must be a positive number, -1 or -2, got '{v}'")
                }),
        }
    }

    pub fn bucket_mode(&self, primary_key_table: bool) -> Result<BucketMode, String> {
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

    pub fn merge_engine(&self) -> Result<MergeEngine, String> {
        Ok(match self.get(MERGE_ENGINE).unwrap_or("deduplicate") {
            "deduplicate" => MergeEngine::Deduplicate,
            "partial-update" => MergeEngine::PartialUpdate,
            "aggregation" => MergeEngine::Aggregation,
            "first-row" => MergeEngine::FirstRow,
            other => return Err(format!("unknown merge-engine '{other}'")),
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

    /// Rows a bucket writer buffers before it spills a level-0 file (tidelake's own option; Paimon
    /// sizes the buffer in bytes with `write-buffer-size`).
    pub fn write_buffer_rows(&self) -> usize {
        self.get(WRITE_BUFFER_ROWS)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000)
    }

    /// Target size of data files in bytes (`128 mb` default, as Paimon for PK tables).
    pub fn target_file_size(&self) -> u64 {
        self.get(TARGET_FILE_SIZE)
            .and_then(parse_memory_size)
            .unwrap_or(128 << 20)
    }

    pub fn commit_max_retries(&self) -> u32 {
        self.get(COMMIT_MAX_RETRIES)
            .and_then(|v| v.parse().ok())
            .unwrap_or(10)
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
