//! The index manifest (`manifest/index-manifest-*`, named by a snapshot's `indexManifest`) and the
//! HASH index files it lists: Paimon's Avro records (`_VERSION` 1) as plain structs, their
//! conversion to and from Avro values, the byte layout of a HASH file (big-endian int32 key
//! hashes) and how a commit's new index files combine with the previous list. Pure.
//!
//! An index manifest holds the complete list of live index files, every entry an ADD; a new file
//! for a (partition, bucket, index type) replaces the previous one (Java's `BucketedCombiner`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use apache_avro::types::Value;
use apache_avro::Schema;

use super::manifest::{decode_file, encode_file, opt, rec, FileKind, Record};
use crate::error::Malformed;

/// The only `_VERSION` of index manifest records.
pub const INDEX_MANIFEST_VERSION: i32 = 1;
/// The index type of dynamic-bucket key hashes.
pub const HASH_INDEX: &str = "HASH";
/// The index type of deletion-vector files.
pub const DELETION_VECTORS_INDEX: &str = "DELETION_VECTORS";

/// Where one data file's deletion vector sits in a deletion-vector index file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionVectorMeta {
    pub data_file: String,
    pub offset: i32,
    pub length: i32,
    pub cardinality: Option<i64>,
}

/// A global index's range and column (Paimon 1.4+), kept as read so a rewritten list loses nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalIndexMeta {
    pub row_range_start: i64,
    pub row_range_end: i64,
    pub index_field_id: i32,
    pub extra_field_ids: Option<Vec<i32>>,
    pub index_meta: Option<Vec<u8>>,
    pub source_meta: Option<Vec<u8>>,
}

/// One index file (Paimon's `IndexFileMeta`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFileMeta {
    pub index_type: String,
    pub file_name: String,
    pub file_size: i64,
    pub row_count: i64,
    pub dv_ranges: Option<Vec<DeletionVectorMeta>>,
    pub external_path: Option<String>,
    pub global_index: Option<GlobalIndexMeta>,
}

impl IndexFileMeta {
    /// A HASH index file holding `rows` key hashes.
    pub fn hash(file_name: String, rows: usize) -> Self {
        Self {
            index_type: HASH_INDEX.into(),
            file_name,
            file_size: 4 * rows as i64,
            row_count: rows as i64,
            dv_ranges: None,
            external_path: None,
            global_index: None,
        }
    }
}

/// One entry of an index manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexManifestEntry {
    pub kind: FileKind,
    pub partition: Vec<u8>,
    pub bucket: i32,
    pub file: IndexFileMeta,
}

/// The previous live index files with `added` applied: an added file replaces the file of the same
/// (partition, bucket, type) for bucketed index types, DELETE entries remove theirs first; global
/// index types are keyed by file name. All entries of the result are ADDs, ordered by partition,
/// bucket and type.
pub fn combine(
    previous: Vec<IndexManifestEntry>,
    changes: Vec<IndexManifestEntry>,
) -> Vec<IndexManifestEntry> {
    type Key = (Vec<u8>, i32, String, String);
    let key = |e: &IndexManifestEntry| -> Key {
        let by_name =
            e.file.index_type != HASH_INDEX && e.file.index_type != DELETION_VECTORS_INDEX;
        let name = if by_name {
            e.file.file_name.clone()
        } else {
            String::new()
        };
        (
            e.partition.clone(),
            e.bucket,
            e.file.index_type.clone(),
            name,
        )
    };
    let mut live: BTreeMap<Key, IndexManifestEntry> =
        previous.into_iter().map(|e| (key(&e), e)).collect();
    let (deletes, adds): (Vec<_>, Vec<_>) = changes
        .into_iter()
        .partition(|e| e.kind == FileKind::Delete);
    for d in &deletes {
        live.remove(&key(d));
    }
    for a in adds {
        live.insert(key(&a), a);
    }
    live.into_values().collect()
}

// ---------------------------------------------------------------------------------------------
// HASH index files

/// The bytes of a HASH index file: each hash as a big-endian int32, in the order given.
pub fn encode_hashes(hashes: &[i32]) -> Vec<u8> {
    hashes.iter().flat_map(|h| h.to_be_bytes()).collect()
}

/// The hashes of a HASH index file; a length that is not a multiple of 4 is corrupt.
pub fn decode_hashes(bytes: &[u8]) -> Result<Vec<i32>, Malformed> {
    if !bytes.len().is_multiple_of(4) {
        return Err(Malformed(format!(
            "a HASH index file holds 4-byte hashes, but it is {} bytes long",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// Avro

/// Java's index manifest schema (`IndexManifestEntry.SCHEMA` with its format identifier).
pub fn index_manifest_schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let json = r#"{"type":"record","name":"record","namespace":"org.apache.paimon.avro.generated","fields":[
 {"name":"_VERSION","type":"int"},
 {"name":"_KIND","type":"int"},
 {"name":"_PARTITION","type":"bytes"},
 {"name":"_BUCKET","type":"int"},
 {"name":"_INDEX_TYPE","type":"string"},
 {"name":"_FILE_NAME","type":"string"},
 {"name":"_FILE_SIZE","type":"long"},
 {"name":"_ROW_COUNT","type":"long"},
 {"name":"_DELETIONS_VECTORS_RANGES","type":["null",{"type":"array","items":["null",
    {"type":"record","name":"record__DELETIONS_VECTORS_RANGES","fields":[
      {"name":"f0","type":"string"},
      {"name":"f1","type":"int"},
      {"name":"f2","type":"int"},
      {"name":"_CARDINALITY","type":["null","long"],"default":null}]}]}],"default":null},
 {"name":"_EXTERNAL_PATH","type":["null","string"],"default":null},
 {"name":"_GLOBAL_INDEX","type":["null",
    {"type":"record","name":"record__GLOBAL_INDEX","fields":[
      {"name":"_ROW_RANGE_START","type":"long"},
      {"name":"_ROW_RANGE_END","type":"long"},
      {"name":"_INDEX_FIELD_ID","type":"int"},
      {"name":"_EXTRA_FIELD_IDS","type":["null",{"type":"array","items":"int"}],"default":null},
      {"name":"_INDEX_META","type":["null","bytes"],"default":null},
      {"name":"_SOURCE_META","type":["null","bytes"],"default":null}]}],"default":null}
]}"#;
        Schema::parse_str(json).expect("index manifest schema is valid")
    })
}

/// Encodes an index manifest (zstd, Java's schema).
pub fn encode_index_manifest(entries: &[IndexManifestEntry]) -> crate::error::Result<Vec<u8>> {
    encode_file(
        index_manifest_schema(),
        entries.iter().map(IndexManifestEntry::to_avro),
    )
}

/// Decodes an index manifest written by any Paimon implementation.
pub fn decode_index_manifest(bytes: &[u8]) -> Result<Vec<IndexManifestEntry>, Malformed> {
    decode_file(bytes, IndexManifestEntry::from_avro)
}

impl IndexManifestEntry {
    fn to_avro(&self) -> Value {
        let f = &self.file;
        let ranges = f.dv_ranges.as_ref().map(|rs| {
            Value::Array(
                rs.iter()
                    .map(|r| {
                        opt(Some(r), |r| {
                            rec(vec![
                                ("f0", Value::String(r.data_file.clone())),
                                ("f1", Value::Int(r.offset)),
                                ("f2", Value::Int(r.length)),
                                ("_CARDINALITY", opt(r.cardinality, Value::Long)),
                            ])
                        })
                    })
                    .collect(),
            )
        });
        let global = f.global_index.as_ref().map(|g| {
            rec(vec![
                ("_ROW_RANGE_START", Value::Long(g.row_range_start)),
                ("_ROW_RANGE_END", Value::Long(g.row_range_end)),
                ("_INDEX_FIELD_ID", Value::Int(g.index_field_id)),
                (
                    "_EXTRA_FIELD_IDS",
                    opt(g.extra_field_ids.as_ref(), |ids| {
                        Value::Array(ids.iter().map(|i| Value::Int(*i)).collect())
                    }),
                ),
                ("_INDEX_META", opt(g.index_meta.clone(), Value::Bytes)),
                ("_SOURCE_META", opt(g.source_meta.clone(), Value::Bytes)),
            ])
        });
        rec(vec![
            ("_VERSION", Value::Int(INDEX_MANIFEST_VERSION)),
            ("_KIND", Value::Int(self.kind as i32)),
            ("_PARTITION", Value::Bytes(self.partition.clone())),
            ("_BUCKET", Value::Int(self.bucket)),
            ("_INDEX_TYPE", Value::String(f.index_type.clone())),
            ("_FILE_NAME", Value::String(f.file_name.clone())),
            ("_FILE_SIZE", Value::Long(f.file_size)),
            ("_ROW_COUNT", Value::Long(f.row_count)),
            ("_DELETIONS_VECTORS_RANGES", opt(ranges, |v| v)),
            (
                "_EXTERNAL_PATH",
                opt(f.external_path.clone(), Value::String),
            ),
            ("_GLOBAL_INDEX", opt(global, |v| v)),
        ])
    }

    fn from_avro(v: &Value) -> Result<Self, Malformed> {
        let r = Record::new(v, "index manifest entry")?;
        match r.int("_VERSION")? {
            INDEX_MANIFEST_VERSION => {}
            v => {
                return Err(Malformed(format!(
                    "unsupported index manifest _VERSION {v} (expected 1)"
                )))
            }
        }
        let kind = FileKind::from_avro(r.int("_KIND")?)?;
        let dv_ranges = match r.get("_DELETIONS_VECTORS_RANGES") {
            None => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|i| {
                        let d = Record::new(i, "deletion vector range")?;
                        Ok(DeletionVectorMeta {
                            data_file: d.string("f0")?,
                            offset: d.int("f1")?,
                            length: d.int("f2")?,
                            cardinality: d.opt_long("_CARDINALITY")?,
                        })
                    })
                    .collect::<Result<Vec<_>, Malformed>>()?,
            ),
            Some(other) => {
                return Err(Malformed(format!(
                    "_DELETIONS_VECTORS_RANGES: unexpected {other:?}"
                )))
            }
        };
        let global_index = match r.get("_GLOBAL_INDEX") {
            None => None,
            Some(g) => {
                let g = Record::new(g, "global index")?;
                Some(GlobalIndexMeta {
                    row_range_start: g.long("_ROW_RANGE_START")?,
                    row_range_end: g.long("_ROW_RANGE_END")?,
                    index_field_id: g.int("_INDEX_FIELD_ID")?,
                    extra_field_ids: g.opt_ints("_EXTRA_FIELD_IDS")?,
                    index_meta: g.opt_bytes("_INDEX_META")?,
                    source_meta: g.opt_bytes("_SOURCE_META")?,
                })
            }
        };
        Ok(Self {
            kind,
            partition: r.bytes("_PARTITION")?,
            bucket: r.int("_BUCKET")?,
            file: IndexFileMeta {
                index_type: r.string("_INDEX_TYPE")?,
                file_name: r.string("_FILE_NAME")?,
                file_size: r.long("_FILE_SIZE")?,
                row_count: r.long("_ROW_COUNT")?,
                dv_ranges,
                external_path: r.opt_string("_EXTERNAL_PATH")?,
                global_index,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::binary_row::empty_row;

    fn hash_entry(bucket: i32, name: &str) -> IndexManifestEntry {
        IndexManifestEntry {
            kind: FileKind::Add,
            partition: empty_row(),
            bucket,
            file: IndexFileMeta::hash(name.into(), 3),
        }
    }

    #[test]
    fn entries_round_trip_through_avro() {
        let mut dv = hash_entry(1, "index-dv-0");
        dv.file.index_type = DELETION_VECTORS_INDEX.into();
        dv.file.dv_ranges = Some(vec![DeletionVectorMeta {
            data_file: "data-a-0.parquet".into(),
            offset: 1,
            length: 22,
            cardinality: Some(2),
        }]);
        let mut global = hash_entry(0, "index-g-0");
        global.file.index_type = "btree".into();
        global.file.global_index = Some(GlobalIndexMeta {
            row_range_start: 0,
            row_range_end: 9,
            index_field_id: 3,
            extra_field_ids: Some(vec![4]),
            index_meta: None,
            source_meta: Some(vec![1, 2]),
        });
        let entries = vec![hash_entry(0, "index-h-0"), dv, global];
        let bytes = encode_index_manifest(&entries).unwrap();
        assert_eq!(decode_index_manifest(&bytes).unwrap(), entries);
        assert!(decode_index_manifest(&bytes[..bytes.len() / 2]).is_err());
    }

    #[test]
    fn a_new_file_replaces_its_bucket_and_deletes_go_first() {
        let prev = vec![hash_entry(0, "a"), hash_entry(1, "b")];
        let out = combine(prev.clone(), vec![hash_entry(1, "c")]);
        let names: Vec<_> = out.iter().map(|e| e.file.file_name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        let mut del = hash_entry(0, "a");
        del.kind = FileKind::Delete;
        let out = combine(prev, vec![hash_entry(0, "d"), del]);
        let names: Vec<_> = out.iter().map(|e| e.file.file_name.as_str()).collect();
        assert_eq!(names, ["d", "b"]);
    }

    #[test]
    fn hash_files_are_big_endian_ints() {
        assert_eq!(
            encode_hashes(&[1, -1]),
            vec![0, 0, 0, 1, 255, 255, 255, 255]
        );
        assert_eq!(
            decode_hashes(&encode_hashes(&[7, i32::MIN])).unwrap(),
            vec![7, i32::MIN]
        );
        assert!(decode_hashes(&[0, 0, 1]).unwrap_err().0.contains("3 bytes"));
    }
}
