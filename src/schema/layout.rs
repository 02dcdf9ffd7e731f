//! What a table's schema implies for rows: partition, bucket-key and primary-key columns, the
//! physical schema of its data files, and the extraction of BinaryRows from Arrow rows.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};

use crate::error::{InvalidArgumentSnafu, Result, UnsupportedSnafu};
use crate::lsm::{MergeConfig, MergeSpec};
pub use crate::spec::datum::{datum_at, write_field};
use crate::spec::{
    BucketMode, ChangelogProducer, CoreOptions, DataType, MergeEngine, TableOptions, TableSchema,
    KEY_FIELD_ID_START, KEY_FIELD_PREFIX, SEQUENCE_NUMBER, SEQUENCE_NUMBER_FIELD_ID, VALUE_KIND,
    VALUE_KIND_FIELD_ID,
};

/// Derived, immutable facts about one schema version of a table.
#[derive(Debug, Clone)]
pub struct TableLayout {
    pub changelog_producer: ChangelogProducer,
    pub schema: Arc<TableSchema>,
    /// The table's columns as Arrow (what users read and write).
    pub arrow_schema: SchemaRef,
    pub partition_indices: Vec<usize>,
    pub partition_types: Vec<DataType>,
    /// Trimmed primary key (PK minus partition keys): the `_KEY_` columns.
    pub key_indices: Vec<usize>,
    pub key_types: Vec<DataType>,
    pub bucket_key_indices: Vec<usize>,
    pub bucket_mode: BucketMode,
    /// Paimon's cross-partition update (`TableSchema.crossPartitionUpdate`): a primary key that
    /// lacks a partition key. With `bucket` = -1 (Paimon's KEY_DYNAMIC) a key lives in one
    /// partition at a time, found through the writer's key index (`table::cross_partition`).
    pub cross_partition: bool,
    /// The whole primary key's columns (the key of the cross-partition index).
    pub primary_key_indices: Vec<usize>,
    pub merge_engine: MergeEngine,
    pub merge_config: Arc<MergeConfig>,
    pub sequence_field_indices: Vec<usize>,
    pub rowkind_field_index: Option<usize>,
    pub ignore_delete: bool,
    /// Every other option this schema version sets, typed and validated.
    pub options: TableOptions,
    /// Physical schema of data files: `_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`, columns (PK
    /// tables) or just the columns (append tables).
    pub file_schema: SchemaRef,
}

impl TableLayout {
    pub fn new(schema: Arc<TableSchema>) -> Result<Self> {
        let opts = CoreOptions::new(&schema.options);
        let invalid = |message: String| InvalidArgumentSnafu { message }.build();
        // A mode tidelake does not implement is Unsupported (the table exists, tidelake cannot
        // serve it yet); any other bad option is the request's mistake.
        if let Some(message) = TableOptions::unimplemented(&schema.options) {
            return UnsupportedSnafu { message }.fail();
        }
        let options = TableOptions::parse(&schema.options)?;
        let index_of = |name: &str| -> Result<usize> {
            schema.field_index(name).ok_or_else(|| {
                invalid(format!(
                    "column '{name}' named by the schema does not exist"
                ))
            })
        };
        let partition_indices = schema
            .partition_keys
            .iter()
            .map(|k| index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let key_indices = schema
            .trimmed_primary_keys()
            .iter()
            .map(|k| index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let pk = schema.is_primary_key_table();
        let bucket_mode = opts.bucket_mode(pk)?;
        let bucket_key_indices = match opts.bucket_key() {
            Some(keys) => keys
                .iter()
                .map(|k| index_of(k))
                .collect::<Result<Vec<_>>>()?,
            None => key_indices.clone(),
        };
        let sequence_field_indices = opts
            .sequence_fields()
            .iter()
            .map(|k| index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let rowkind_field_index = opts.rowkind_field().map(index_of).transpose()?;
        // Paimon's SchemaValidation.validateRowTracking.
        if options.data_evolution && !opts.flag(crate::spec::options::ROW_TRACKING) {
            return Err(invalid(
                "Data evolution config must enabled with row-tracking.enabled".to_string(),
            ));
        }
        if opts.flag(crate::spec::options::ROW_TRACKING) {
            if pk {
                return Err(invalid(
                    "Cannot define primary-key for row tracking table.".to_string(),
                ));
            }
            if bucket_mode != BucketMode::Unaware {
                return Err(invalid(
                    "Cannot define bucket for row tracking table, it only support bucket = -1"
                        .to_string(),
                ));
            }
        }
        // Paimon's SchemaValidation: keys are compared, hashed and kept in BinaryRows, which a
        // nested value is not.
        let primary_key_indices = schema
            .primary_keys
            .iter()
            .map(|k| index_of(k))
            .collect::<Result<Vec<_>>>()?;
        for (role, indices) in [
            ("primary key", &primary_key_indices),
            ("partition key", &partition_indices),
            ("bucket key", &bucket_key_indices),
        ] {
            if let Some(f) = indices
                .iter()
                .map(|&i| &schema.fields[i])
                .find(|f| f.data_type.is_nested() || f.data_type.holds_blob())
            {
                let kind = if f.data_type.is_nested() {
                    "nested type"
                } else {
                    "type"
                };
                return Err(invalid(format!(
                    "the {role} column '{}' has the {kind} {}; keys must be atomic types",
                    f.name, f.data_type
                )));
            }
        }
        // BLOB columns (Paimon 2.0's multimodal tables): top-level columns of data-evolution
        // tables, kept in `.blob` files (SchemaValidation.validateBlob*).
        for f in &schema.fields {
            if !f.data_type.holds_blob() {
                continue;
            }
            if !options.data_evolution {
                return Err(invalid(
                    "Data evolution config must enabled for table with BLOB, ARRAY<BLOB> or MAP<X, BLOB> type column."
                        .to_string(),
                ));
            }
            if f.data_type.root != crate::spec::types::TypeRoot::Blob {
                return UnsupportedSnafu {
                    message: format!(
                        "column '{}' of type {}: a BLOB inside an ARRAY, MAP or ROW is not supported by tidelake yet",
                        f.name, f.data_type
                    ),
                }
                .fail();
            }
        }
        let merge_engine = opts.merge_engine()?;
        let cross_partition = pk
            && schema
                .partition_keys
                .iter()
                .any(|p| !schema.primary_keys.contains(p));
        // Paimon's SchemaValidation: a sequence field cannot order a key's rows across partitions.
        if cross_partition && !sequence_field_indices.is_empty() {
            return Err(invalid(format!(
                "You can not use sequence.field in cross partition update case (Primary key constraint '[{}]' not include all partition fields '[{}]').",
                schema.primary_keys.join(", "),
                schema.partition_keys.join(", ")
            )));
        }
        let changelog_producer = match opts.get(crate::spec::options::CHANGELOG_PRODUCER) {
            Some(v) => ChangelogProducer::parse(v)?,
            None => ChangelogProducer::None,
        };
        // Paimon's SchemaValidation.validateForDeletionVectors.
        if opts.flag(crate::spec::options::DELETION_VECTORS) {
            if !matches!(
                changelog_producer,
                ChangelogProducer::None | ChangelogProducer::Input | ChangelogProducer::Lookup
            ) {
                return Err(invalid(
                    "Deletion vectors mode is only supported for NONE/INPUT/LOOKUP changelog producer now."
                        .to_string(),
                ));
            }
            if merge_engine == MergeEngine::FirstRow {
                return Err(invalid(
                    "First row merge engine does not need deletion vectors because there is no deletion of old data in this merge engine."
                        .to_string(),
                ));
            }
        }
        // Paimon's SchemaValidation rules.
        if !pk && changelog_producer != ChangelogProducer::None {
            return Err(invalid(
                "changelog-producer needs a primary key; append tables stream their appended rows"
                    .to_string(),
            ));
        }
        if merge_engine == MergeEngine::FirstRow
            && !matches!(
                changelog_producer,
                ChangelogProducer::None | ChangelogProducer::Lookup
            )
        {
            return Err(invalid(
                "merge-engine first-row supports changelog-producer none or lookup only"
                    .to_string(),
            ));
        }
        let fields: Vec<Field> = schema
            .fields
            .iter()
            .map(|f| arrow_field(&f.name, &f.data_type, f.id))
            .collect();
        let arrow_schema = Arc::new(Schema::new(fields.clone()));
        let file_schema = if pk {
            let mut file_fields: Vec<Field> = key_indices
                .iter()
                .map(|&i| {
                    let f = &schema.fields[i];
                    arrow_field(
                        &format!("{KEY_FIELD_PREFIX}{}", f.name),
                        &f.data_type,
                        KEY_FIELD_ID_START + f.id,
                    )
                })
                .collect();
            file_fields.push(with_id(
                Field::new(SEQUENCE_NUMBER, ArrowType::Int64, false),
                SEQUENCE_NUMBER_FIELD_ID,
            ));
            file_fields.push(with_id(
                Field::new(VALUE_KIND, ArrowType::Int8, false),
                VALUE_KIND_FIELD_ID,
            ));
            file_fields.extend(fields);
            Arc::new(Schema::new(file_fields))
        } else {
            Arc::clone(&arrow_schema)
        };
        Ok(Self {
            partition_types: partition_indices
                .iter()
                .map(|&i| schema.fields[i].data_type.clone())
                .collect(),
            key_types: key_indices
                .iter()
                .map(|&i| schema.fields[i].data_type.clone())
                .collect(),
            partition_indices,
            key_indices,
            bucket_key_indices,
            bucket_mode,
            cross_partition,
            primary_key_indices,
            merge_engine,
            changelog_producer,
            merge_config: Arc::new(MergeConfig::from_schema(&schema)?),
            sequence_field_indices,
            rowkind_field_index,
            ignore_delete: opts.ignore_delete(),
            options,
            arrow_schema,
            file_schema,
            schema,
        })
    }

    pub fn is_primary_key_table(&self) -> bool {
        self.schema.is_primary_key_table()
    }

    /// Number of system columns before the value columns in a data file.
    pub fn value_offset(&self) -> usize {
        if self.is_primary_key_table() {
            self.key_indices.len() + 2
        } else {
            0
        }
    }

    /// Bucket count written into manifest entries (`_TOTAL_BUCKETS`).
    pub fn total_buckets(&self) -> i32 {
        match self.bucket_mode {
            BucketMode::Fixed(n) => n,
            BucketMode::Postpone => crate::spec::POSTPONE_BUCKET,
            _ => -1,
        }
    }

    /// The merge spec of this table's files: system columns plus `value_cols` (positions of table
    /// columns present in the batch, in order). Engines that build rows need every column.
    pub fn merge_spec(&self, value_cols: &[usize], keep_retracts: bool) -> MergeSpec {
        let k = self.key_indices.len();
        MergeSpec {
            key_count: k,
            sequence_columns: self
                .sequence_field_indices
                .iter()
                .filter_map(|s| value_cols.iter().position(|v| v == s).map(|p| k + 2 + p))
                .collect(),
            config: Arc::clone(&self.merge_config),
            keep_retracts,
        }
    }

    /// A layout of a schema given as Paimon's schema JSON (tests).
    #[cfg(test)]
    pub(crate) fn from_json(schema: &str) -> Self {
        let schema: TableSchema = serde_json::from_str(schema).expect("a schema JSON");
        Self::new(Arc::new(schema)).expect("a valid schema")
    }

    /// Whether the table keeps deletion vectors (`deletion-vectors.enabled`): compactions mark
    /// the old copies of keys they rewrite instead of leaving them to merging reads.
    pub fn deletion_vectors(&self) -> bool {
        CoreOptions::new(&self.schema.options).flag(crate::spec::options::DELETION_VECTORS)
    }

    /// Checks that tidelake can compact this table: what it can write, but row-tracking tables
    /// (their compacted files would have to carry each row's id).
    pub fn check_compactable(&self, table: &str) -> Result<()> {
        self.check_writable(table)?;
        if CoreOptions::new(&self.schema.options).flag(crate::spec::options::ROW_TRACKING) {
            return UnsupportedSnafu {
                message: format!(
                    "compacting table {table}: row tracking (row-tracking.enabled: the compacted files would have to store _ROW_ID) is not supported yet"
                ),
            }
            .fail();
        }
        Ok(())
    }

    /// Checks that tidelake can write this table; reading has fewer restrictions.
    pub fn check_writable(&self, table: &str) -> Result<()> {
        let unsupported = |what: &str| {
            UnsupportedSnafu {
                message: format!("writing table {table}: {what} is not supported yet"),
            }
            .fail()
        };
        if let Some(f) = self.schema.fields.iter().find(|f| f.data_type.holds_blob()) {
            return unsupported(&format!(
                "the BLOB column '{}' (writing .blob files; tidelake reads them)",
                f.name
            ));
        }
        if self.cross_partition && self.bucket_mode == BucketMode::Postpone {
            return unsupported(
                "a postpone-bucket table (bucket = -2) whose primary key lacks a partition key (cross-partition upserts need bucket = -1)",
            );
        }
        if let Some(ttl) = self.schema.options.get(CROSS_PARTITION_INDEX_TTL) {
            return unsupported(&format!(
                "'{CROSS_PARTITION_INDEX_TTL}' = '{ttl}' (forgetting keys of the cross-partition index, which writes them twice once they return; reading is not affected)"
            ));
        }
        let format = match self.options.format {
            Some(f) => f,
            None => {
                let named = CoreOptions::new(&self.schema.options).file_format();
                return unsupported(&format!(
                    "'file.format' = '{named}' (tidelake writes parquet, orc and avro)"
                ));
            }
        };
        use crate::spec::options::FileCompression;
        let codecs = || {
            std::iter::once(&self.options.compression)
                .chain(self.options.compression_per_level.values())
        };
        if format == crate::spec::options::FileFormat::Orc
            && codecs().any(|c| *c == FileCompression::Brotli)
        {
            return unsupported(
                "'file.compression' = 'brotli' for ORC files (ORC's codecs are zlib, snappy, lz4, zstd and none)",
            );
        }
        if codecs().any(|c| *c == FileCompression::Lzo) {
            return unsupported(
                "'file.compression' = 'lzo' (LZO files are read, but there is no LZO writer; \
                 choose zstd, snappy, lz4, lz4_raw, gzip, brotli or none)",
            );
        }
        Ok(())
    }
}

/// `cross-partition-upsert.index-ttl`: Paimon forgets index entries older than this (and then
/// writes a returning key a second time); tidelake keeps every key, so it refuses to write such a
/// table rather than answer differently.
pub const CROSS_PARTITION_INDEX_TTL: &str = "cross-partition-upsert.index-ttl";

fn with_id(f: Field, id: i32) -> Field {
    f.with_metadata(HashMap::from([(
        "PARQUET:field_id".to_string(),
        id.to_string(),
    )]))
}

fn arrow_field(name: &str, ty: &DataType, id: i32) -> Field {
    with_id(Field::new(name, ty.to_arrow(), ty.nullable), id)
}
