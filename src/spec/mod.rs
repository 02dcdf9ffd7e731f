//! On-disk format types of Apache Paimon: plain data and codecs (JSON, Avro values, BinaryRow),
//! no IO. Everything else converts from these; they never reach out.

pub mod binary_row;
pub mod datum;
pub mod deletion_vector;
pub mod file_format;
pub mod identifier;
pub mod index_manifest;
pub mod manifest;
pub mod options;
pub mod partition;
pub mod schema;
pub mod snapshot;
pub mod types;

pub use binary_row::Datum;
pub use manifest::{DataFileMeta, FileKind, ManifestEntry, ManifestFileMeta, SimpleStats};
pub use options::TableOptions;
pub use options::{BucketMode, ChangelogProducer, CoreOptions, MergeEngine};

/// The bucket number of postpone-mode files (`bucket` = -2), kept in `bucket-postpone/`.
pub const POSTPONE_BUCKET: i32 = -2;
pub use schema::{DataField, TableSchema};
pub use snapshot::{CommitKind, Snapshot};
pub use types::{DataType, TypeRoot};

/// Row kinds as stored in `_VALUE_KIND` and the first byte of a BinaryRow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowKind {
    Insert = 0,
    UpdateBefore = 1,
    UpdateAfter = 2,
    Delete = 3,
}

impl RowKind {
    pub fn from_byte(b: i8) -> Option<RowKind> {
        Some(match b {
            0 => RowKind::Insert,
            1 => RowKind::UpdateBefore,
            2 => RowKind::UpdateAfter,
            3 => RowKind::Delete,
            _ => return None,
        })
    }

    /// Parses `+I`, `-U`, `+U`, `-D`.
    pub fn from_short_string(s: &str) -> Option<RowKind> {
        Some(match s.trim() {
            "+I" => RowKind::Insert,
            "-U" => RowKind::UpdateBefore,
            "+U" => RowKind::UpdateAfter,
            "-D" => RowKind::Delete,
            _ => return None,
        })
    }

    pub fn short_string(&self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// -U and -D retract a key; +I and +U add it.
    pub fn is_retract(&self) -> bool {
        matches!(self, RowKind::UpdateBefore | RowKind::Delete)
    }
}

/// Column names of the system fields in primary-key data files.
pub const KEY_FIELD_PREFIX: &str = "_KEY_";
pub const SEQUENCE_NUMBER: &str = "_SEQUENCE_NUMBER";
pub const VALUE_KIND: &str = "_VALUE_KIND";
/// Parquet field ids of the system fields (Java's `SpecialFields`).
pub const KEY_FIELD_ID_START: i32 = i32::MAX / 2;
pub const SEQUENCE_NUMBER_FIELD_ID: i32 = i32::MAX - 1;
pub const VALUE_KIND_FIELD_ID: i32 = i32::MAX - 2;
