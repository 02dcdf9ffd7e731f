//! The table handle: one table's files, and the entry points to write, commit, plan and read it.
//!
//! ```text
//!  TableWrite ──prepare_commit──► CommitMessage* ──TableCommit::commit──► snapshot-N
//!  ScanBuilder ──plan──► Plan{snapshot, splits} ──TableRead──► RecordBatch stream
//! ```

pub(crate) mod avro_file;
pub mod branch;
pub mod changes;
pub mod commit;
pub mod compact;
pub(crate) mod cross_partition;
pub(crate) mod data_evolution;
pub mod data_file;
pub(crate) mod deletion_vectors;
pub(crate) mod evolution;
pub(crate) mod key_filter;
pub mod lookup;
pub mod maintenance;
pub(crate) mod page_cache;
pub(crate) mod postpone;
pub mod progress;
pub mod read;
pub mod row_filter;
pub mod scan;
pub mod write;

use std::sync::{Arc, OnceLock};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

pub use crate::schema::layout::TableLayout;
pub use commit::{
    CommitMessage, CommitOutcome, CommitUserState, Committed, Overwrite, TableCommit,
};
pub use deletion_vectors::VectorsChange;
pub use read::TableRead;
pub use row_filter::RowPredicate;
pub use scan::{Plan, ScanBuilder, SnapshotSelector, Split};
pub use write::{TableWrite, WriteOptions};

use crate::clock::Clock;
use crate::error::{CorruptSnafu, Result};
use crate::io::FileIo;
use crate::manifest::ManifestManager;
use crate::schema::SchemaManager;
use crate::snapshot::SnapshotManager;
use crate::spec::binary_row;
use crate::spec::identifier::Identifier;
use crate::spec::partition::{partition_path, partition_spec, PartitionNaming};
use crate::spec::snapshot::BATCH_COMMIT_IDENTIFIER;
use crate::spec::{CoreOptions, TableSchema};

/// A loaded table at one schema version; cheap to clone.
#[derive(Debug, Clone)]
pub struct Table {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    io: FileIo,
    identifier: Identifier,
    path: String,
    /// The branch this handle reads and writes (`None`: main).
    branch: Option<String>,
    schema: Arc<TableSchema>,
    clock: Clock,
    layout: OnceLock<std::result::Result<Arc<TableLayout>, (crate::error::ErrorKind, String)>>,
    /// Column mappings of older schemas' data files, by schema id (see `evolution`).
    file_columns: std::sync::Mutex<std::collections::HashMap<i64, Option<evolution::FileColumns>>>,
}

impl Table {
    pub(crate) fn new(
        io: FileIo,
        identifier: Identifier,
        path: String,
        schema: TableSchema,
        clock: Clock,
    ) -> Self {
        Self::new_on(io, identifier, path, None, schema, clock)
    }

    /// A handle on `branch` (`None`: main) of the table at `path`.
    pub(crate) fn new_on(
        io: FileIo,
        identifier: Identifier,
        path: String,
        branch: Option<String>,
        schema: TableSchema,
        clock: Clock,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                io,
                identifier,
                path,
                branch,
                schema: Arc::new(schema),
                clock,
                layout: OnceLock::new(),
                file_columns: Default::default(),
            }),
        }
    }

    /// The clock this table's commits and retention read.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    pub fn identifier(&self) -> &Identifier {
        &self.inner.identifier
    }

    /// The table as time travel to `selector` sees it: with the schema that snapshot was
    /// committed with (as Paimon reads it), so dropped columns come back and renamed ones have
    /// their old names.
    pub async fn as_of(&self, selector: &SnapshotSelector) -> Result<Table> {
        if *selector == SnapshotSelector::Latest {
            return Ok(self.clone());
        }
        let Some(snapshot) = scan::resolve_snapshot(self, selector).await? else {
            return Ok(self.clone());
        };
        if snapshot.schema_id == self.schema().id {
            return Ok(self.clone());
        }
        let schema = self.schema_manager().schema(snapshot.schema_id).await?;
        Ok(Table::new_on(
            self.io().clone(),
            self.identifier().clone(),
            self.path().to_string(),
            self.inner.branch.clone(),
            schema,
            self.clock().clone(),
        ))
    }

    pub(crate) fn file_columns_cache(
        &self,
    ) -> &std::sync::Mutex<std::collections::HashMap<i64, Option<evolution::FileColumns>>> {
        &self.inner.file_columns
    }

    /// Path of the table directory relative to the warehouse root.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    pub fn io(&self) -> &FileIo {
        &self.inner.io
    }

    pub fn schema(&self) -> &Arc<TableSchema> {
        &self.inner.schema
    }

    pub fn options(&self) -> CoreOptions<'_> {
        CoreOptions::new(&self.inner.schema.options)
    }

    /// The table's columns as an Arrow schema.
    pub fn arrow_schema(&self) -> Result<SchemaRef> {
        Ok(Arc::clone(&self.layout()?.arrow_schema))
    }

    /// Derived facts about the schema; an invalid schema file is reported on first use.
    /// A table using a mode tidelake does not implement (an option of
    /// [`UNIMPLEMENTED`](crate::spec::options::UNIMPLEMENTED)) is refused as Unsupported, naming
    /// the table and the option; any other invalid schema is a corrupt file.
    pub fn layout(&self) -> Result<Arc<TableLayout>> {
        let r = self.inner.layout.get_or_init(|| {
            TableLayout::new(Arc::clone(&self.inner.schema))
                .map(Arc::new)
                .map_err(|e| (e.kind(), e.to_string()))
        });
        match r {
            Ok(l) => Ok(Arc::clone(l)),
            Err((crate::error::ErrorKind::Unsupported, message)) => {
                crate::error::UnsupportedSnafu {
                    message: format!("table {}: {message}", self.inner.identifier),
                }
                .fail()
            }
            Err((_, message)) => CorruptSnafu {
                path: format!(
                    "{}/schema/schema-{}",
                    self.meta_path(),
                    self.inner.schema.id
                ),
                message: message.clone(),
            }
            .fail(),
        }
    }

    /// The table's typed options.
    pub fn table_options(&self) -> Result<crate::spec::TableOptions> {
        Ok(self.layout()?.options.clone())
    }

    /// The snapshots of this handle's branch.
    pub fn snapshot_manager(&self) -> SnapshotManager {
        SnapshotManager::new(self.inner.io.clone(), self.meta_path())
    }

    /// The long-lived changelogs (`changelog/changelog-<id>`) of this handle's branch.
    pub fn changelog_manager(&self) -> SnapshotManager {
        SnapshotManager::changelogs(self.inner.io.clone(), self.meta_path())
    }

    /// The schemas of this handle's branch.
    pub fn schema_manager(&self) -> SchemaManager {
        SchemaManager::new(self.inner.io.clone(), self.meta_path())
    }

    pub fn manifest_manager(&self) -> ManifestManager {
        ManifestManager::new(self.inner.io.clone(), self.inner.path.clone())
    }

    /// Directory of one bucket's data files, relative to the warehouse root (postpone-mode files,
    /// bucket -2, are in `bucket-postpone`).
    pub fn bucket_dir(&self, partition: &[u8], bucket: i32) -> Result<String> {
        let dir = self.partition_dir(partition)?;
        Ok(match bucket {
            crate::spec::POSTPONE_BUCKET => format!("{}/{dir}bucket-postpone", self.inner.path),
            b => format!("{}/{dir}bucket-{b}", self.inner.path),
        })
    }

    /// A partition as errors name it: its directory (`dt=2024-01-01/`), or `(unpartitioned)`.
    pub fn partition_display(&self, partition: &[u8]) -> String {
        match self.partition_dir(partition) {
            Ok(d) if d.is_empty() => "(unpartitioned)".into(),
            Ok(d) => d.trim_end_matches('/').to_string(),
            Err(_) => format!("{partition:?}"),
        }
    }

    /// A partition as Paimon's catalogs list it: each partition key with its value as text.
    pub fn partition_spec(&self, partition: &[u8]) -> Result<Vec<(String, String)>> {
        self.with_partition(partition, partition_spec)
    }

    /// The relative directory of a partition, ending in `/` (empty when unpartitioned).
    fn partition_dir(&self, partition: &[u8]) -> Result<String> {
        self.with_partition(partition, partition_path)
    }

    /// `render` of a partition row's values, named as this table's options say.
    fn with_partition<T>(
        &self,
        partition: &[u8],
        render: impl FnOnce(&[String], &[binary_row::Datum], PartitionNaming<'_>) -> T,
    ) -> Result<T> {
        let layout = self.layout()?;
        let values = binary_row::deserialize(partition, &layout.partition_types).map_err(|e| {
            CorruptSnafu {
                path: self.inner.path.clone(),
                message: format!("partition row: {e}"),
            }
            .build()
        })?;
        let opts = self.options();
        let naming = PartitionNaming {
            default_name: opts.partition_default_name(),
            legacy: opts.partition_legacy_name(),
        };
        Ok(render(&layout.schema.partition_keys, &values, naming))
    }

    pub fn new_write(&self, options: WriteOptions) -> Result<TableWrite> {
        TableWrite::new(self.clone(), options)
    }

    /// A committer for `commit_user` (one per writer job; a random one for batch writes).
    pub fn new_commit(&self, commit_user: impl Into<String>) -> TableCommit {
        TableCommit::new(self.clone(), commit_user.into())
    }

    pub fn new_scan(&self) -> ScanBuilder {
        ScanBuilder::new(self.clone())
    }

    pub fn new_read(&self, projection: Option<&[String]>) -> Result<TableRead> {
        TableRead::new(self.clone(), projection)
    }

    /// Writes `batches` and commits them as one snapshot (batch job semantics): nothing is
    /// committed unless every batch is valid.
    pub async fn write_batches(
        &self,
        batches: &[RecordBatch],
        options: WriteOptions,
        overwrite: Option<Overwrite>,
    ) -> Result<CommitOutcome> {
        use futures::StreamExt;
        let stream = futures::stream::iter(batches.iter().cloned().map(Ok)).boxed();
        Ok(self.write_and_commit(stream, options, overwrite).await?.1)
    }

    /// Writes every batch of `batches` and commits them as one snapshot (a batch job: nothing is
    /// committed unless every batch is valid, and the files of a failed job are removed).
    /// Returns the number of rows written.
    pub async fn write_stream(
        &self,
        batches: futures::stream::BoxStream<'_, Result<RecordBatch>>,
        options: WriteOptions,
        overwrite: Option<Overwrite>,
    ) -> Result<i64> {
        Ok(self.write_and_commit(batches, options, overwrite).await?.0)
    }

    async fn write_and_commit(
        &self,
        mut batches: futures::stream::BoxStream<'_, Result<RecordBatch>>,
        options: WriteOptions,
        overwrite: Option<Overwrite>,
    ) -> Result<(i64, CommitOutcome)> {
        use futures::StreamExt;
        if let Some(ow) = &overwrite {
            commit::validate_overwrite(
                ow,
                &self.schema().partition_keys,
                &self.identifier().to_string(),
            )?;
        }
        let mut w = self.new_write(options)?;
        w.set_wait_compaction(true);
        if overwrite.is_some() {
            w.ignore_previous_files();
        }
        let mut count = 0i64;
        let written: Result<()> = async {
            while let Some(b) = batches.next().await {
                let b = b?;
                count += b.num_rows() as i64;
                w.write(&b).await?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = written {
            let _ = w.close().await;
            return Err(e);
        }
        let committed = async {
            let messages = w.prepare_commit().await?;
            self.new_commit(uuid::Uuid::new_v4().to_string())
                .commit(messages, BATCH_COMMIT_IDENTIFIER, overwrite)
                .await
        }
        .await;
        let closed = w.close().await;
        let outcome = committed?;
        closed?;
        Ok((count, outcome))
    }

    /// Types `KEY=VALUE` partition arguments (of the CLI, `CALL sys.*` and the Flight actions):
    /// each key must be a partition key, each value a valid value of its type.
    pub fn partition_values(
        &self,
        pairs: &[(String, String)],
    ) -> Result<Vec<(String, binary_row::Datum)>> {
        let schema = self.schema();
        pairs
            .iter()
            .map(|(k, v)| {
                let k = k.trim();
                let field = schema
                    .field(k)
                    .filter(|_| schema.partition_keys.iter().any(|p| p == k));
                let Some(field) = field else {
                    return crate::error::invalid!(
                        "'{k}' is not a partition key of table {}",
                        self.identifier()
                    );
                };
                let value = crate::spec::datum::datum_from_text(v.trim(), &field.data_type)
                    .map_err(|e| {
                        crate::error::InvalidArgumentSnafu {
                            message: format!("table {}, partition {k}: {e}", self.identifier()),
                        }
                        .build()
                    })?;
                Ok((k.to_string(), value))
            })
            .collect()
    }

    /// Reads the whole table at `selector` with an optional projection.
    pub async fn read_all(
        &self,
        selector: SnapshotSelector,
        projection: Option<&[String]>,
    ) -> Result<Vec<RecordBatch>> {
        let plan = self.new_scan().snapshot(selector).plan().await?;
        self.new_read(projection)?.collect(plan).await
    }
}
