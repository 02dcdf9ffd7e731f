//! Manifest files and manifest lists: the Avro records Paimon reads (`_VERSION` 2), as plain structs
//! plus their conversion to and from Avro values.
//!
//! Writers emit Java's field list, order and record names; readers resolve fields by name, skip
//! unknown ones and treat absent optional ones as null, so files from Java and pypaimon both decode.

use apache_avro::types::Value;
use apache_avro::Schema;

use crate::error::Malformed;
use std::sync::OnceLock;

/// The only `_VERSION` Paimon accepts in manifest records.
pub const MANIFEST_FORMAT_VERSION: i32 = 2;

/// Min/max BinaryRows and null counts over a set of columns (Paimon's `SimpleStats`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SimpleStats {
    pub min_values: Vec<u8>,
    pub max_values: Vec<u8>,
    pub null_counts: Vec<Option<i64>>,
}

impl SimpleStats {
    /// Stats over no columns (arity-0 rows), as written when stats are disabled.
    pub fn empty() -> Self {
        let empty = super::binary_row::empty_row();
        Self {
            min_values: empty.clone(),
            max_values: empty,
            null_counts: vec![],
        }
    }
}

/// Whether a data file is new input or the output of a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSource {
    Append = 0,
    Compact = 1,
}

/// One data (or changelog) file and its statistics (Paimon's `DataFileMeta`).
#[derive(Debug, Clone, PartialEq)]
pub struct DataFileMeta {
    pub file_name: String,
    pub file_size: i64,
    pub row_count: i64,
    pub min_key: Vec<u8>,
    pub max_key: Vec<u8>,
    pub key_stats: SimpleStats,
    pub value_stats: SimpleStats,
    pub min_sequence_number: i64,
    pub max_sequence_number: i64,
    pub schema_id: i64,
    pub level: i32,
    pub extra_files: Vec<String>,
    /// Local time of creation as epoch milliseconds.
    pub creation_time: Option<i64>,
    pub delete_row_count: Option<i64>,
    pub embedded_file_index: Option<Vec<u8>>,
    pub file_source: Option<i32>,
    pub value_stats_cols: Option<Vec<String>>,
    pub external_path: Option<String>,
    pub first_row_id: Option<i64>,
    pub write_cols: Option<Vec<String>>,
}

#[cfg(test)]
impl DataFileMeta {
    /// A one-row file named `name` at `level` whose single BIGINT key spans `[min, max]`: the
    /// fixture of the planning and commit unit tests.
    pub(crate) fn for_test(name: &str, level: i32, min: i64, max: i64) -> Self {
        use super::binary_row::{serialize, Datum};
        Self {
            file_name: name.into(),
            file_size: 1,
            row_count: 1,
            min_key: serialize(&[Datum::BigInt(min)]),
            max_key: serialize(&[Datum::BigInt(max)]),
            key_stats: SimpleStats::empty(),
            value_stats: SimpleStats::empty(),
            min_sequence_number: 0,
            max_sequence_number: 0,
            schema_id: 0,
            level,
            extra_files: vec![],
            creation_time: None,
            delete_row_count: Some(0),
            embedded_file_index: None,
            file_source: None,
            value_stats_cols: None,
            external_path: None,
            first_row_id: None,
            write_cols: None,
        }
    }
}

/// ADD or DELETE of a file in a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Add = 0,
    Delete = 1,
}

impl FileKind {
    /// The kind a `_KIND` field holds (0 ADD, 1 DELETE), in manifests and index manifests alike.
    pub(super) fn from_avro(v: i32) -> Result<Self, Malformed> {
        match v {
            0 => Ok(FileKind::Add),
            1 => Ok(FileKind::Delete),
            k => Err(Malformed(format!("unknown _KIND {k}"))),
        }
    }
}

/// One record of a manifest file (Paimon's `ManifestEntry`).
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestEntry {
    pub kind: FileKind,
    /// Serialized BinaryRow of the partition values.
    pub partition: Vec<u8>,
    pub bucket: i32,
    pub total_buckets: i32,
    pub file: DataFileMeta,
}

/// What identifies one version of a file across ADD/DELETE entries.
pub type FileIdentifier = (Vec<u8>, i32, i32, String);

impl ManifestEntry {
    pub fn identifier(&self) -> FileIdentifier {
        (
            self.partition.clone(),
            self.bucket,
            self.file.level,
            self.file.file_name.clone(),
        )
    }
}

/// One record of a manifest list (Paimon's `ManifestFileMeta`).
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestFileMeta {
    pub file_name: String,
    pub file_size: i64,
    pub num_added_files: i64,
    pub num_deleted_files: i64,
    pub partition_stats: SimpleStats,
    pub schema_id: i64,
    pub min_bucket: Option<i32>,
    pub max_bucket: Option<i32>,
    pub min_level: Option<i32>,
    pub max_level: Option<i32>,
}

const STATS_FIELDS: &str = r#"[
  {"name": "_MIN_VALUES", "type": "bytes"},
  {"name": "_MAX_VALUES", "type": "bytes"},
  {"name": "_NULL_COUNTS", "type": ["null", {"type": "array", "items": ["null", "long"]}], "default": null}]"#;

/// Avro schema of manifest files, as Java writes it.
pub fn manifest_entry_schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let json = format!(
            r#"{{"type": "record", "name": "record", "namespace": "org.apache.paimon.avro.generated", "fields": [
  {{"name": "_VERSION", "type": "int"}},
  {{"name": "_KIND", "type": "int"}},
  {{"name": "_PARTITION", "type": "bytes"}},
  {{"name": "_BUCKET", "type": "int"}},
  {{"name": "_TOTAL_BUCKETS", "type": "int"}},
  {{"name": "_FILE", "type": {{"type": "record", "name": "record__FILE", "fields": [
    {{"name": "_FILE_NAME", "type": "string"}},
    {{"name": "_FILE_SIZE", "type": "long"}},
    {{"name": "_ROW_COUNT", "type": "long"}},
    {{"name": "_MIN_KEY", "type": "bytes"}},
    {{"name": "_MAX_KEY", "type": "bytes"}},
    {{"name": "_KEY_STATS", "type": {{"type": "record", "name": "record__FILE__KEY_STATS", "fields": {STATS_FIELDS}}}}},
    {{"name": "_VALUE_STATS", "type": {{"type": "record", "name": "record__FILE__VALUE_STATS", "fields": {STATS_FIELDS}}}}},
    {{"name": "_MIN_SEQUENCE_NUMBER", "type": "long"}},
    {{"name": "_MAX_SEQUENCE_NUMBER", "type": "long"}},
    {{"name": "_SCHEMA_ID", "type": "long"}},
    {{"name": "_LEVEL", "type": "int"}},
    {{"name": "_EXTRA_FILES", "type": {{"type": "array", "items": "string"}}}},
    {{"name": "_CREATION_TIME", "type": ["null", {{"type": "long", "logicalType": "timestamp-millis"}}], "default": null}},
    {{"name": "_DELETE_ROW_COUNT", "type": ["null", "long"], "default": null}},
    {{"name": "_EMBEDDED_FILE_INDEX", "type": ["null", "bytes"], "default": null}},
    {{"name": "_FILE_SOURCE", "type": ["null", "int"], "default": null}},
    {{"name": "_VALUE_STATS_COLS", "type": ["null", {{"type": "array", "items": "string"}}], "default": null}},
    {{"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": null}},
    {{"name": "_FIRST_ROW_ID", "type": ["null", "long"], "default": null}},
    {{"name": "_WRITE_COLS", "type": ["null", {{"type": "array", "items": "string"}}], "default": null}}
  ]}}}}
]}}"#
        );
        // The schema is a constant of this file; a failure here is caught by the unit tests.
        Schema::parse_str(&json).expect("manifest entry schema is valid")
    })
}

/// Avro schema of manifest lists, as Java writes it.
pub fn manifest_file_meta_schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let json = format!(
            r#"{{"type": "record", "name": "record", "namespace": "org.apache.paimon.avro.generated", "fields": [
  {{"name": "_VERSION", "type": "int"}},
  {{"name": "_FILE_NAME", "type": "string"}},
  {{"name": "_FILE_SIZE", "type": "long"}},
  {{"name": "_NUM_ADDED_FILES", "type": "long"}},
  {{"name": "_NUM_DELETED_FILES", "type": "long"}},
  {{"name": "_PARTITION_STATS", "type": {{"type": "record", "name": "record__PARTITION_STATS", "fields": {STATS_FIELDS}}}}},
  {{"name": "_SCHEMA_ID", "type": "long"}},
  {{"name": "_MIN_BUCKET", "type": ["null", "int"], "default": null}},
  {{"name": "_MAX_BUCKET", "type": ["null", "int"], "default": null}},
  {{"name": "_MIN_LEVEL", "type": ["null", "int"], "default": null}},
  {{"name": "_MAX_LEVEL", "type": ["null", "int"], "default": null}},
  {{"name": "_MIN_ROW_ID", "type": ["null", "long"], "default": null}},
  {{"name": "_MAX_ROW_ID", "type": ["null", "long"], "default": null}}
]}}"#
        );
        Schema::parse_str(&json).expect("manifest list schema is valid")
    })
}

// ---------------------------------------------------------------------------------------------
// Avro object-container files

fn zstd_codec() -> apache_avro::Codec {
    // Paimon's default manifest.compression is zstd at level 1.
    apache_avro::Codec::Zstandard(apache_avro::ZstandardSettings::new(1))
}

pub(super) fn encode_file(
    schema: &Schema,
    values: impl Iterator<Item = Value>,
) -> crate::error::Result<Vec<u8>> {
    // Our own values against our own schema: a failure is a bug.
    let internal = |e: apache_avro::Error| {
        crate::error::InternalSnafu {
            message: format!("encoding an Avro file of {}: {e}", schema_name(schema)),
        }
        .build()
    };
    let mut w =
        apache_avro::Writer::with_codec(schema, Vec::new(), zstd_codec()).map_err(internal)?;
    for v in values {
        w.append_value(v).map_err(internal)?;
    }
    w.into_inner().map_err(internal)
}

fn schema_name(schema: &Schema) -> String {
    match schema {
        Schema::Record(r) => r.name.name().to_string(),
        _ => "values".to_string(),
    }
}

pub(super) fn decode_file<T>(
    bytes: &[u8],
    f: impl Fn(&Value) -> Result<T, Malformed>,
) -> Result<Vec<T>, Malformed> {
    let reader =
        apache_avro::Reader::new(bytes).map_err(|e| Malformed(format!("not an Avro file: {e}")))?;
    reader
        .map(|v| {
            v.map_err(|e| Malformed(format!("Avro decode error: {e}")))
                .and_then(|v| f(&v))
        })
        .collect()
}

/// Encodes a manifest file (zstd, Java's schema).
pub fn encode_manifest(entries: &[ManifestEntry]) -> crate::error::Result<Vec<u8>> {
    encode_file(
        manifest_entry_schema(),
        entries.iter().map(ManifestEntry::to_avro),
    )
}

/// Decodes a manifest file written by any Paimon implementation.
pub fn decode_manifest(bytes: &[u8]) -> Result<Vec<ManifestEntry>, Malformed> {
    decode_file(bytes, ManifestEntry::from_avro)
}

/// Encodes a manifest list (zstd, Java's schema).
pub fn encode_manifest_list(metas: &[ManifestFileMeta]) -> crate::error::Result<Vec<u8>> {
    encode_file(
        manifest_file_meta_schema(),
        metas.iter().map(ManifestFileMeta::to_avro),
    )
}

/// Decodes a manifest list written by any Paimon implementation.
pub fn decode_manifest_list(bytes: &[u8]) -> Result<Vec<ManifestFileMeta>, Malformed> {
    decode_file(bytes, ManifestFileMeta::from_avro)
}

// ---------------------------------------------------------------------------------------------
// Avro value conversion

pub(super) fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
    match v {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(v) => Value::Union(1, Box::new(f(v))),
    }
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().map(|s| Value::String(s.clone())).collect())
}

pub(super) fn rec(fields: Vec<(&str, Value)>) -> Value {
    Value::Record(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

impl SimpleStats {
    fn to_avro(&self) -> Value {
        rec(vec![
            ("_MIN_VALUES", Value::Bytes(self.min_values.clone())),
            ("_MAX_VALUES", Value::Bytes(self.max_values.clone())),
            (
                "_NULL_COUNTS",
                opt(Some(&self.null_counts), |c| {
                    Value::Array(c.iter().map(|n| opt(*n, Value::Long)).collect())
                }),
            ),
        ])
    }

    fn from_avro(v: &Value) -> Result<Self, Malformed> {
        let r = Record::new(v, "stats")?;
        Ok(Self {
            min_values: r.bytes("_MIN_VALUES")?,
            max_values: r.bytes("_MAX_VALUES")?,
            null_counts: match r.get("_NULL_COUNTS") {
                None => vec![],
                Some(Value::Array(items)) => {
                    items.iter().map(as_opt_long).collect::<Result<_, _>>()?
                }
                Some(other) => {
                    return Err(Malformed(format!("_NULL_COUNTS: unexpected {other:?}")))
                }
            },
        })
    }
}

impl ManifestEntry {
    pub fn to_avro(&self) -> Value {
        let f = &self.file;
        let file = rec(vec![
            ("_FILE_NAME", Value::String(f.file_name.clone())),
            ("_FILE_SIZE", Value::Long(f.file_size)),
            ("_ROW_COUNT", Value::Long(f.row_count)),
            ("_MIN_KEY", Value::Bytes(f.min_key.clone())),
            ("_MAX_KEY", Value::Bytes(f.max_key.clone())),
            ("_KEY_STATS", f.key_stats.to_avro()),
            ("_VALUE_STATS", f.value_stats.to_avro()),
            ("_MIN_SEQUENCE_NUMBER", Value::Long(f.min_sequence_number)),
            ("_MAX_SEQUENCE_NUMBER", Value::Long(f.max_sequence_number)),
            ("_SCHEMA_ID", Value::Long(f.schema_id)),
            ("_LEVEL", Value::Int(f.level)),
            ("_EXTRA_FILES", strings(&f.extra_files)),
            (
                "_CREATION_TIME",
                opt(f.creation_time, Value::TimestampMillis),
            ),
            ("_DELETE_ROW_COUNT", opt(f.delete_row_count, Value::Long)),
            (
                "_EMBEDDED_FILE_INDEX",
                opt(f.embedded_file_index.clone(), Value::Bytes),
            ),
            ("_FILE_SOURCE", opt(f.file_source, Value::Int)),
            (
                "_VALUE_STATS_COLS",
                opt(f.value_stats_cols.as_deref(), strings),
            ),
            (
                "_EXTERNAL_PATH",
                opt(f.external_path.clone(), Value::String),
            ),
            ("_FIRST_ROW_ID", opt(f.first_row_id, Value::Long)),
            ("_WRITE_COLS", opt(f.write_cols.as_deref(), strings)),
        ]);
        rec(vec![
            ("_VERSION", Value::Int(MANIFEST_FORMAT_VERSION)),
            ("_KIND", Value::Int(self.kind as i32)),
            ("_PARTITION", Value::Bytes(self.partition.clone())),
            ("_BUCKET", Value::Int(self.bucket)),
            ("_TOTAL_BUCKETS", Value::Int(self.total_buckets)),
            ("_FILE", file),
        ])
    }

    pub fn from_avro(v: &Value) -> Result<Self, Malformed> {
        let r = Record::new(v, "manifest entry")?;
        check_version(&r)?;
        let f = Record::new(r.req("_FILE")?, "_FILE")?;
        let file = DataFileMeta {
            file_name: f.string("_FILE_NAME")?,
            file_size: f.long("_FILE_SIZE")?,
            row_count: f.long("_ROW_COUNT")?,
            min_key: f.bytes("_MIN_KEY")?,
            max_key: f.bytes("_MAX_KEY")?,
            key_stats: SimpleStats::from_avro(f.req("_KEY_STATS")?)?,
            value_stats: SimpleStats::from_avro(f.req("_VALUE_STATS")?)?,
            min_sequence_number: f.long("_MIN_SEQUENCE_NUMBER")?,
            max_sequence_number: f.long("_MAX_SEQUENCE_NUMBER")?,
            schema_id: f.long("_SCHEMA_ID")?,
            level: f.int("_LEVEL")?,
            extra_files: f.opt_strings("_EXTRA_FILES")?.unwrap_or_default(),
            creation_time: f.opt_long("_CREATION_TIME")?,
            delete_row_count: f.opt_long("_DELETE_ROW_COUNT")?,
            embedded_file_index: f.opt_bytes("_EMBEDDED_FILE_INDEX")?,
            file_source: f.opt_int("_FILE_SOURCE")?,
            value_stats_cols: f.opt_strings("_VALUE_STATS_COLS")?,
            external_path: f.opt_string("_EXTERNAL_PATH")?,
            first_row_id: f.opt_long("_FIRST_ROW_ID")?,
            write_cols: f.opt_strings("_WRITE_COLS")?,
        };
        let kind = FileKind::from_avro(r.int("_KIND")?)?;
        Ok(Self {
            kind,
            partition: r.bytes("_PARTITION")?,
            bucket: r.int("_BUCKET")?,
            total_buckets: r.opt_int("_TOTAL_BUCKETS")?.unwrap_or(-1),
            file,
        })
    }
}

impl ManifestFileMeta {
    pub fn to_avro(&self) -> Value {
        rec(vec![
            ("_VERSION", Value::Int(MANIFEST_FORMAT_VERSION)),
            ("_FILE_NAME", Value::String(self.file_name.clone())),
            ("_FILE_SIZE", Value::Long(self.file_size)),
            ("_NUM_ADDED_FILES", Value::Long(self.num_added_files)),
            ("_NUM_DELETED_FILES", Value::Long(self.num_deleted_files)),
            ("_PARTITION_STATS", self.partition_stats.to_avro()),
            ("_SCHEMA_ID", Value::Long(self.schema_id)),
            ("_MIN_BUCKET", opt(self.min_bucket, Value::Int)),
            ("_MAX_BUCKET", opt(self.max_bucket, Value::Int)),
            ("_MIN_LEVEL", opt(self.min_level, Value::Int)),
            ("_MAX_LEVEL", opt(self.max_level, Value::Int)),
            ("_MIN_ROW_ID", opt(None, Value::Long)),
            ("_MAX_ROW_ID", opt(None, Value::Long)),
        ])
    }

    pub fn from_avro(v: &Value) -> Result<Self, Malformed> {
        let r = Record::new(v, "manifest list entry")?;
        check_version(&r)?;
        Ok(Self {
            file_name: r.string("_FILE_NAME")?,
            file_size: r.long("_FILE_SIZE")?,
            num_added_files: r.long("_NUM_ADDED_FILES")?,
            num_deleted_files: r.long("_NUM_DELETED_FILES")?,
            partition_stats: SimpleStats::from_avro(r.req("_PARTITION_STATS")?)?,
            schema_id: r.long("_SCHEMA_ID")?,
            min_bucket: r.opt_int("_MIN_BUCKET")?,
            max_bucket: r.opt_int("_MAX_BUCKET")?,
            min_level: r.opt_int("_MIN_LEVEL")?,
            max_level: r.opt_int("_MAX_LEVEL")?,
        })
    }
}

fn check_version(r: &Record<'_>) -> Result<(), Malformed> {
    match r.int("_VERSION")? {
        MANIFEST_FORMAT_VERSION => Ok(()),
        1 => Err(Malformed(
            "manifest _VERSION 1 is no longer supported; recreate the table".into(),
        )),
        v => Err(Malformed(format!(
            "unsupported manifest _VERSION {v} (expected 2)"
        ))),
    }
}

/// A decoded Avro record with by-name field access.
pub(super) struct Record<'a> {
    fields: &'a [(String, Value)],
    what: &'static str,
}

fn unwrap_union(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => inner,
        other => other,
    }
}

fn as_opt_long(v: &Value) -> Result<Option<i64>, Malformed> {
    match unwrap_union(v) {
        Value::Null => Ok(None),
        Value::Long(l) | Value::TimestampMillis(l) | Value::TimestampMicros(l) => Ok(Some(*l)),
        Value::Int(i) => Ok(Some(*i as i64)),
        other => Err(Malformed(format!("expected long, found {other:?}"))),
    }
}

impl<'a> Record<'a> {
    pub(super) fn new(v: &'a Value, what: &'static str) -> Result<Self, Malformed> {
        match unwrap_union(v) {
            Value::Record(fields) => Ok(Self { fields, what }),
            other => Err(Malformed(format!(
                "{what}: expected a record, found {other:?}"
            ))),
        }
    }

    pub(super) fn get(&self, name: &str) -> Option<&'a Value> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| unwrap_union(v))
            .filter(|v| !matches!(v, Value::Null))
    }

    pub(super) fn req(&self, name: &str) -> Result<&'a Value, Malformed> {
        self.get(name)
            .ok_or_else(|| Malformed(format!("{}: missing field {name}", self.what)))
    }

    pub(super) fn long(&self, name: &str) -> Result<i64, Malformed> {
        self.opt_long(name)?
            .ok_or_else(|| Malformed(format!("{}: missing field {name}", self.what)))
    }

    pub(super) fn opt_long(&self, name: &str) -> Result<Option<i64>, Malformed> {
        self.get(name)
            .map(as_opt_long)
            .transpose()
            .map(Option::flatten)
            .map_err(|e| Malformed(format!("{}.{name}: {e}", self.what)))
    }

    pub(super) fn int(&self, name: &str) -> Result<i32, Malformed> {
        self.opt_int(name)?
            .ok_or_else(|| Malformed(format!("{}: missing field {name}", self.what)))
    }

    pub(super) fn opt_int(&self, name: &str) -> Result<Option<i32>, Malformed> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i)),
            Some(other) => Err(Malformed(format!(
                "{}.{name}: expected int, found {other:?}",
                self.what
            ))),
        }
    }

    pub(super) fn bytes(&self, name: &str) -> Result<Vec<u8>, Malformed> {
        self.opt_bytes(name)?
            .ok_or_else(|| Malformed(format!("{}: missing field {name}", self.what)))
    }

    pub(super) fn opt_bytes(&self, name: &str) -> Result<Option<Vec<u8>>, Malformed> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bytes(b)) | Some(Value::Fixed(_, b)) => Ok(Some(b.clone())),
            Some(other) => Err(Malformed(format!(
                "{}.{name}: expected bytes, found {other:?}",
                self.what
            ))),
        }
    }

    pub(super) fn string(&self, name: &str) -> Result<String, Malformed> {
        self.opt_string(name)?
            .ok_or_else(|| Malformed(format!("{}: missing field {name}", self.what)))
    }

    pub(super) fn opt_string(&self, name: &str) -> Result<Option<String>, Malformed> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(Malformed(format!(
                "{}.{name}: expected string, found {other:?}",
                self.what
            ))),
        }
    }

    pub(super) fn opt_strings(&self, name: &str) -> Result<Option<Vec<String>>, Malformed> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match unwrap_union(i) {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(Malformed(format!(
                        "{}.{name}: expected string, found {other:?}",
                        self.what
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(Malformed(format!(
                "{}.{name}: expected array, found {other:?}",
                self.what
            ))),
        }
    }

    pub(super) fn opt_ints(&self, name: &str) -> Result<Option<Vec<i32>>, Malformed> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match unwrap_union(i) {
                    Value::Int(n) => Ok(*n),
                    other => Err(Malformed(format!(
                        "{}.{name}: expected int, found {other:?}",
                        self.what
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(Malformed(format!(
                "{}.{name}: expected array, found {other:?}",
                self.what
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_entry() -> ManifestEntry {
        ManifestEntry {
            kind: FileKind::Add,
            partition: super::super::binary_row::empty_row(),
            bucket: 1,
            total_buckets: 2,
            file: DataFileMeta {
                file_name: "data-x-0.parquet".into(),
                file_size: 10,
                row_count: 3,
                min_key: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                max_key: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                key_stats: SimpleStats {
                    null_counts: vec![Some(0)],
                    ..SimpleStats::empty()
                },
                value_stats: SimpleStats::empty(),
                min_sequence_number: 0,
                max_sequence_number: 2,
                schema_id: 0,
                level: 0,
                extra_files: vec![],
                creation_time: Some(1_700_000_000_000),
                delete_row_count: Some(1),
                embedded_file_index: None,
                file_source: Some(0),
                value_stats_cols: Some(vec![]),
                external_path: None,
                first_row_id: None,
                write_cols: None,
            },
        }
    }

    #[test]
    fn entry_round_trips_through_avro() {
        let e = sample_entry();
        let bytes = encode_manifest(std::slice::from_ref(&e)).unwrap();
        assert_eq!(decode_manifest(&bytes).unwrap(), vec![e]);
        assert!(decode_manifest(&bytes[..bytes.len() / 2]).is_err());
    }

    #[test]
    fn rejects_other_versions() {
        let mut v = sample_entry().to_avro();
        if let Value::Record(fields) = &mut v {
            fields[0].1 = Value::Int(1);
        }
        assert!(ManifestEntry::from_avro(&v)
            .unwrap_err()
            .0
            .contains("recreate"));
    }
}
