//! Reading planned splits: data files decoded with projection, primary-key splits merged with the
//! table's merge engine, results streamed split by split.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use snafu::ResultExt;

use super::data_file;
use super::evolution::FileRef;
use super::scan::{Plan, Split};
use super::Table;
use crate::error::{invalid, ArrowSnafu, InternalSnafu, Result};
use crate::lsm::merge::stream::merge_streams;
use crate::schema::layout::TableLayout;
use crate::spec::deletion_vector::DeletionVector;
use crate::spec::options::{DELETION_VECTORS, DV_MERGE_ON_READ};
use crate::spec::{CoreOptions, Snapshot};

mod evolved;
mod top_n;
mod top_pages;
pub use top_n::TopKey;

/// Reads splits of one table with a projection.
#[derive(Debug, Clone)]
pub struct TableRead {
    table: Table,
    layout: Arc<TableLayout>,
    /// Projected column positions in the table schema.
    projection: Vec<usize>,
    /// The projected table columns (what data files are read into).
    output_schema: SchemaRef,
    /// Whether a leading `rowkind` column (`+I`, `+U`, ...) is added (the audit log).
    row_kind: bool,
    /// Whether trailing `_ROW_ID` and `_SEQUENCE_NUMBER` columns are added (row-tracking tables).
    row_tracking: bool,
    /// `deletion-vectors.enabled`: batch reads skip level 0 and read every other file without
    /// merging, leaving out the rows its deletion vector marks.
    deletion_vectors: bool,
    /// `deletion-vectors.merge-on-read`: level 0 is read too, merged with the other levels
    /// (their marked rows left out), so rows not yet compacted up are seen.
    dv_merge_on_read: bool,
    /// A test rows may be dropped by while files are decoded (reads without merging only).
    row_predicate: Option<Arc<dyn super::RowPredicate>>,
}

/// The index of the snapshot a deletion-vector read reads: its entries are decoded once, by the
/// first split that needs them, for every split of the read.
#[derive(Debug)]
struct DvIndex {
    snapshot: Snapshot,
    entries: tokio::sync::OnceCell<Vec<crate::spec::index_manifest::IndexManifestEntry>>,
}

/// Paimon's row-tracking columns (`SpecialFields`), added after the table's columns.
pub const ROW_ID_COLUMN: &str = "_ROW_ID";
pub const ROW_SEQUENCE_COLUMN: &str = "_SEQUENCE_NUMBER";

/// `schema` with the two row-tracking columns after it (`nullable`: as read from data files,
/// where a row whose id is still the file's lazily assigned one has none).
fn with_row_tracking_columns(schema: &SchemaRef, nullable: bool) -> SchemaRef {
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    for name in [ROW_ID_COLUMN, ROW_SEQUENCE_COLUMN] {
        fields.push(Arc::new(arrow::datatypes::Field::new(
            name,
            arrow::datatypes::DataType::Int64,
            nullable,
        )));
    }
    Arc::new(arrow::datatypes::Schema::new(fields))
}

/// `batch` (rows `start..` of one data file) without the rows `dv` marks deleted.
fn drop_deleted(batch: &RecordBatch, dv: &DeletionVector, start: i64) -> Result<RecordBatch> {
    let keep: arrow::array::BooleanArray = (0..batch.num_rows())
        .map(|i| Some(!dv.is_deleted(start as u64 + i as u64)))
        .collect();
    arrow::compute::filter_record_batch(batch, &keep).context(ArrowSnafu {
        context: "applying a deletion vector",
    })
}

/// Fills the row-tracking columns of a batch read from one data file: a value the file stores
/// wins, otherwise `_ROW_ID` is the file's `_FIRST_ROW_ID` plus the row's position in the file and
/// `_SEQUENCE_NUMBER` the file's max sequence number (the snapshot that wrote it), as Paimon's
/// `DataFileRecordReader` assigns them.
fn assign_row_tracking(
    schema: &SchemaRef,
    batch: &RecordBatch,
    file: &crate::spec::DataFileMeta,
    position: i64,
) -> Result<RecordBatch> {
    use arrow::array::{Array, AsArray, Int64Array};
    use arrow::datatypes::Int64Type;
    let n = batch.num_columns();
    let stored_ids = batch.column(n - 2).as_primitive::<Int64Type>();
    let stored_seq = batch.column(n - 1).as_primitive::<Int64Type>();
    let ids = (0..batch.num_rows())
        .map(|i| {
            if stored_ids.is_valid(i) {
                return Ok(stored_ids.value(i));
            }
            match file
                .first_row_id
                .and_then(|first| first.checked_add(position + i as i64))
            {
                Some(id) => Ok(id),
                None => crate::error::InternalSnafu {
                    message: format!(
                        "data file {} of a row-tracking table stores no _ROW_ID and has no usable _FIRST_ROW_ID ({:?})",
                        file.file_name, file.first_row_id
                    ),
                }
                .fail(),
            }
        })
        .collect::<Result<Int64Array>>()?;
    let seq: Int64Array = (0..batch.num_rows())
        .map(|i| {
            Some(if stored_seq.is_valid(i) {
                stored_seq.value(i)
            } else {
                file.max_sequence_number
            })
        })
        .collect();
    let mut cols = batch.columns()[..n - 2].to_vec();
    cols.push(Arc::new(ids));
    cols.push(Arc::new(seq));
    RecordBatch::try_new(Arc::clone(schema), cols).context(ArrowSnafu {
        context: "adding row ids",
    })
}

/// Whether a primary-key split holds final rows, each key once: one sorted run above level 0
/// without retractions (typically after a full compaction).
fn is_raw(split: &Split) -> bool {
    let first_level = split.files.first().map(|f| f.level).unwrap_or(0);
    split
        .files
        .iter()
        .all(|f| f.level > 0 && f.level == first_level && f.delete_row_count == Some(0))
}

/// The first `n` columns of `merged` (the merge kept the projected columns first), as
/// `output_schema`.
fn merged_output(merged: &RecordBatch, n: usize, output_schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = merged.columns()[..n].to_vec();
    let opts = arrow::array::RecordBatchOptions::new().with_row_count(Some(merged.num_rows()));
    RecordBatch::try_new_with_options(Arc::clone(output_schema), columns, &opts).context(
        ArrowSnafu {
            context: "merged rows",
        },
    )
}

/// `batch` with an `_SEQUENCE_NUMBER` column inserted at `at`, as `schema`: the rows of a run
/// whose sequence numbers were not decoded ([`crate::lsm::levels::disjoint_run_sequences`]), all
/// at that run's one number.
fn with_sequence(
    schema: &SchemaRef,
    batch: RecordBatch,
    at: usize,
    numbers: &mut data_file::ConstantColumn<arrow::datatypes::Int64Type>,
) -> Result<RecordBatch> {
    let mut columns = batch.columns().to_vec();
    columns.insert(at, numbers.column(batch.num_rows()));
    RecordBatch::try_new(Arc::clone(schema), columns).context(ArrowSnafu {
        context: "a run's sequence numbers",
    })
}

/// `schema` with a leading non-null `rowkind` string column.
pub fn with_row_kind_column(schema: &SchemaRef) -> SchemaRef {
    let mut fields = vec![Arc::new(arrow::datatypes::Field::new(
        ROW_KIND_COLUMN,
        arrow::datatypes::DataType::Utf8,
        false,
    ))];
    fields.extend(schema.fields().iter().cloned());
    Arc::new(arrow::datatypes::Schema::new(fields))
}

/// Name of the row-kind column of audit-log reads.
pub const ROW_KIND_COLUMN: &str = "rowkind";

/// Prepends the row kinds (as `+I`/`-U`/`+U`/`-D` strings) to `batch`.
fn prepend_kinds(
    schema: &SchemaRef,
    batch: &RecordBatch,
    kinds: Option<&arrow::array::Int8Array>,
) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let strings: arrow::array::StringArray = (0..n)
        .map(|i| {
            let k = kinds.map(|k| k.value(i)).unwrap_or(0);
            Some(
                crate::spec::RowKind::from_byte(k)
                    .unwrap_or(crate::spec::RowKind::Insert)
                    .short_string(),
            )
        })
        .collect();
    let mut cols: Vec<arrow::array::ArrayRef> = vec![Arc::new(strings)];
    cols.extend(batch.columns().iter().cloned());
    RecordBatch::try_new(Arc::clone(schema), cols).context(ArrowSnafu {
        context: "adding row kinds",
    })
}

/// Positions in the table schema of the named columns (`None`: every column).
pub(crate) fn resolve_projection(
    table: &Table,
    layout: &TableLayout,
    projection: Option<&[String]>,
) -> Result<Vec<usize>> {
    match projection {
        None => Ok((0..layout.schema.fields.len()).collect()),
        Some(cols) => cols
            .iter()
            .map(|c| match layout.schema.field_index(c) {
                Some(i) => Ok(i),
                None => invalid!("table {} has no column '{c}'", table.identifier()),
            })
            .collect(),
    }
}

impl TableRead {
    /// `projection`: column names to return, in that order (`None` = all columns).
    pub(crate) fn new(table: Table, projection: Option<&[String]>) -> Result<Self> {
        let layout = table.layout()?;
        let projection = resolve_projection(&table, &layout, projection)?;
        let options = CoreOptions::new(&layout.schema.options);
        let deletion_vectors = options.flag(DELETION_VECTORS);
        // Merge-on-read applies only to primary-key tables (append files are all level 0).
        let dv_merge_on_read =
            deletion_vectors && options.flag(DV_MERGE_ON_READ) && layout.is_primary_key_table();
        let output_schema = Arc::new(layout.arrow_schema.project(&projection).context(
            ArrowSnafu {
                context: "projecting the schema",
            },
        )?);
        Ok(Self {
            table,
            layout,
            projection,
            deletion_vectors,
            dv_merge_on_read,
            output_schema,
            row_kind: false,
            row_tracking: false,
            row_predicate: None,
        })
    }

    /// Whether a split of this read may be a part of a file ([`Split::rows`]): the read neither
    /// merges nor counts positions within files (an append table's plain rows).
    pub fn reads_file_parts(&self) -> bool {
        !self.layout.is_primary_key_table()
            && !self.layout.options.data_evolution
            && !self.row_tracking
            && !self.deletion_vectors
            && !self.row_kind
    }

    /// Lets the read drop the rows `predicate` rejects while it decodes files, before the columns
    /// the predicate does not read are decoded for them. Inexact: only reads without merging (append
    /// tables, compacted primary-key splits) apply it, so the caller still filters.
    pub fn with_row_predicate(mut self, predicate: Arc<dyn super::RowPredicate>) -> Self {
        self.row_predicate = Some(predicate);
        self
    }

    /// Adds trailing `_ROW_ID` and `_SEQUENCE_NUMBER` columns (Paimon's `$row_tracking`); only a
    /// row-tracking table has them.
    pub fn with_row_tracking(mut self) -> Result<Self> {
        let options = crate::spec::CoreOptions::new(&self.layout.schema.options);
        if !options.flag(crate::spec::options::ROW_TRACKING) {
            return invalid!(
                "table {} does not track rows: set 'row-tracking.enabled' = 'true' when creating it to read _ROW_ID",
                self.table.identifier()
            );
        }
        self.row_tracking = true;
        Ok(self)
    }

    /// Makes a deletion-vector primary-key table's read merge every level, level 0 included
    /// (the rows as of the snapshot, before a compaction moved level 0 up), as merge-on-read
    /// tables always do.
    pub(crate) fn merging_every_level(mut self) -> Self {
        self.dv_merge_on_read |= self.deletion_vectors && self.layout.is_primary_key_table();
        self
    }

    /// Adds a leading `rowkind` column with each row's kind (Paimon's `$audit_log`).
    pub fn with_row_kind(mut self) -> Self {
        self.row_kind = true;
        self
    }

    pub fn schema(&self) -> SchemaRef {
        if self.row_kind {
            with_row_kind_column(&self.output_schema)
        } else if self.row_tracking {
            with_row_tracking_columns(&self.output_schema, false)
        } else {
            Arc::clone(&self.output_schema)
        }
    }

    /// Streams the rows of `plan`: two splits are read at a time, each file by file and merged
    /// range by range, with at most two merged batches per split waiting for the consumer (a slow
    /// consumer slows the reading; memory stays bounded whatever the table size).
    pub fn stream(&self, plan: Plan) -> BoxStream<'static, Result<RecordBatch>> {
        self.stream_with(plan, false)
    }

    /// [`Self::stream`] with splits one after the other: the same plan always yields the same
    /// rows in the same order (changelog subscribers resume inside a snapshot by row count).
    pub fn stream_in_order(&self, plan: Plan) -> BoxStream<'static, Result<RecordBatch>> {
        self.stream_with(plan, true)
    }

    fn stream_with(&self, plan: Plan, ordered: bool) -> BoxStream<'static, Result<RecordBatch>> {
        let this = self.clone();
        // Splits that need no merging are read file by file, in order, with the next file decoded
        // while the current one streams: both readers stay busy even when one bucket holds
        // everything (bucket-unaware append tables).
        let layout = Arc::clone(&self.layout);
        let row_kind = self.row_kind;
        // Row groups are skipped by the first key column's statistics when the plan was pruned
        // by a key range (primary-key tables, whose files are sorted by key).
        let filter = match (&plan.key_range, layout.key_indices.first()) {
            (Some(range), Some(&k)) => Some(Arc::new(data_file::RowGroupFilter {
                column: format!("_KEY_{}", layout.schema.fields[k].name),
                ty: layout.key_types[0].clone(),
                range: range.clone(),
            })),
            _ => None,
        };
        // Deletion vectors: positions count rows within a file, so no row group is skipped.
        let dv = self.deletion_vectors;
        let filter = filter.filter(|_| !dv);
        let snapshot = plan.snapshot.clone().filter(|_| dv).map(|snapshot| {
            Arc::new(DvIndex {
                snapshot,
                entries: tokio::sync::OnceCell::new(),
            })
        });
        let mor = self.dv_merge_on_read;
        let parts = plan.splits.into_iter().map(move |mut split| {
            if dv && !mor && layout.is_primary_key_table() {
                // Level 0 is not yet compacted against the levels above (Paimon's batch reads of
                // deletion-vector primary-key tables skip it; append files are all level 0).
                split.files.retain(|f| f.level > 0);
            }
            let unmerged =
                !layout.is_primary_key_table() || (dv && !mor) || (!row_kind && is_raw(&split));
            if !(unmerged && split.files.len() > 1) {
                return this.split_stream(split, filter.clone(), snapshot.clone());
            }
            // File by file in order (append order is kept), the next file decoded meanwhile; a
            // data-evolution table's files row-id group by row-id group.
            let files: Vec<Split> = if layout.options.data_evolution {
                match super::data_evolution::group_splits(&split) {
                    Ok(groups) => groups,
                    Err(e) => {
                        let e = e.at(this.table.identifier().to_string());
                        return stream::once(async move { Err(e) }).boxed();
                    }
                }
            } else {
                split
                    .files
                    .iter()
                    .map(|f| Split {
                        partition: split.partition.clone(),
                        bucket: split.bucket,
                        files: vec![f.clone()],
                        rows: None,
                    })
                    .collect()
            };
            let (reader, filter, snapshot) = (this.clone(), filter.clone(), snapshot.clone());
            stream::iter(files)
                .map(move |one| {
                    futures::future::ready(reader.split_stream(
                        one,
                        filter.clone(),
                        snapshot.clone(),
                    ))
                })
                .buffered(2)
                .flatten()
                .boxed()
        });
        if ordered {
            stream::iter(parts).flatten().boxed()
        } else {
            stream::iter(parts).flatten_unordered(2).boxed()
        }
    }

    /// Reads every row of `plan` into memory.
    pub async fn collect(&self, plan: Plan) -> Result<Vec<RecordBatch>> {
        self.stream(plan).try_collect().await
    }

    /// The rows of one split as a stream, produced by a blocking task.
    fn split_stream(
        &self,
        split: Split,
        filter: Option<Arc<data_file::RowGroupFilter>>,
        dv_index: Option<Arc<DvIndex>>,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(2);
        match self.split_task(split, tx.clone(), filter, dv_index) {
            Ok(task) => {
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = task() {
                        let _ = tx.blocking_send(Err(e));
                    }
                });
            }
            Err(e) => {
                let _ = tx.try_send(Err(e));
            }
        }
        stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .boxed()
    }

    /// Prepares the blocking work that reads (and for primary-key tables merges) one split.
    fn split_task(
        &self,
        split: Split,
        tx: tokio::sync::mpsc::Sender<Result<RecordBatch>>,
        filter: Option<Arc<data_file::RowGroupFilter>>,
        dv_index: Option<Arc<DvIndex>>,
    ) -> Result<Box<dyn FnOnce() -> Result<()> + Send + 'static>> {
        let dir = self.table.bucket_dir(&split.partition, split.bucket)?;
        if self.layout.options.data_evolution && super::data_evolution::needs_assembly(&split.files)
        {
            return self.evolved_task(split, &dir, tx, dv_index);
        }
        let layout = Arc::clone(&self.layout);
        // One sorted run above level 0 without retractions holds final rows, each key once (after
        // a full compaction, typically): it is read without merging, as Paimon's raw-convertible
        // splits are. So are the files of a deletion-vector table (above level 0, keys once).
        let raw =
            (is_raw(&split) && !self.row_kind) || (self.deletion_vectors && !self.dv_merge_on_read);
        let pk = layout.is_primary_key_table() && !raw;
        // PK tables read the system columns plus projected and sequence-field columns.
        let (file_target, value_cols): (SchemaRef, Vec<usize>) = if pk {
            let offset = layout.value_offset();
            let mut cols: Vec<usize> = (0..offset).collect();
            // Engines that build rows merge every column; the projection is applied afterwards.
            let mut values: Vec<usize> = if layout.merge_config.needs_all_columns() {
                (0..layout.schema.fields.len()).collect()
            } else {
                self.projection.clone()
            };
            // A projected key column is read once: the merge keeps its `_KEY_` copy, which
            // holds the same values.
            if !layout.merge_config.needs_all_columns() {
                values.retain(|v| !layout.key_indices.contains(v));
            }
            for &s in &layout.sequence_field_indices {
                if !values.contains(&s) {
                    values.push(s);
                }
            }
            cols.extend(values.iter().map(|v| v + offset));
            let schema = Arc::new(layout.file_schema.project(&cols).context(ArrowSnafu {
                context: "projecting",
            })?);
            (schema, values)
        } else if self.row_tracking {
            // Files may store the row ids of rows that moved (read as NULL where they do not).
            (
                with_row_tracking_columns(&self.output_schema, true),
                self.projection.clone(),
            )
        } else {
            (Arc::clone(&self.output_schema), self.projection.clone())
        };
        if split.rows.is_some() && !self.reads_file_parts() {
            return InternalSnafu {
                message: format!(
                    "a part of a data file of {} was planned for a read that needs it whole",
                    self.table.identifier()
                ),
            }
            .fail();
        }
        let file_ref = |f: &crate::spec::DataFileMeta| {
            self.table.file_ref(&dir, f).map(|mut r| {
                r.part = split.rows.clone();
                r
            })
        };
        // Row ids and deletion vectors count rows within each file: such reads keep one run per
        // file.
        let tracked: Option<(SchemaRef, Vec<crate::spec::DataFileMeta>)> =
            ((self.row_tracking || self.deletion_vectors) && !pk)
                .then(|| (self.schema(), split.files.clone()));
        // Merge-on-read of a deletion-vector table: every run is read without its marked rows.
        let merged_vectors = (pk && self.dv_merge_on_read).then(|| split.files.clone());
        let row_tracking = self.row_tracking;
        let manifests = self.table.manifest_manager();
        let (dv_partition, dv_bucket) = (split.partition.clone(), split.bucket);
        // A primary-key split's sorted runs, newest first, each in key order.
        let ordered = if pk {
            data_file::key_ordered_runs(&split.files, &layout.key_types)
        } else {
            Vec::new()
        };
        let runs: Vec<Vec<FileRef>> = if pk {
            ordered
                .iter()
                .map(|run| run.iter().map(file_ref).collect::<Result<Vec<_>>>())
                .collect::<Result<Vec<_>>>()?
        } else if tracked.is_some() {
            split
                .files
                .iter()
                .map(|f| Ok(vec![file_ref(f)?]))
                .collect::<Result<Vec<_>>>()?
        } else {
            vec![split
                .files
                .iter()
                .map(file_ref)
                .collect::<Result<Vec<_>>>()?]
        };
        let k = layout.key_indices.len();
        let spec = pk.then(|| layout.merge_spec(&value_cols, false));
        // Rows are tested while decoding only where each file row is an output row as it is.
        let predicate = self
            .row_predicate
            .clone()
            .filter(|_| !pk && tracked.is_none() && !self.row_kind);
        let output_schema = Arc::clone(&self.output_schema);
        let kind_schema = self.row_kind.then(|| self.schema());
        // Where each projected column sits among the merged columns.
        let out_cols: Vec<usize> = self
            .projection
            .iter()
            .filter_map(|p| {
                value_cols
                    .iter()
                    .position(|v| v == p)
                    .map(|i| k + 2 + i)
                    .or_else(|| layout.key_indices.iter().position(|c| c == p))
            })
            .collect();
        // What the merge keeps: the projected columns, then the row kind for the audit log.
        let merged_cols: Vec<usize> = out_cols
            .iter()
            .copied()
            .chain(self.row_kind.then_some(k + 1))
            .collect();
        let n_out = out_cols.len();
        // Runs whose sequence ranges are disjoint are ordered by those ranges alone: each run's
        // rows take its largest number and the column is not decoded (the runs are then read as
        // `unsequenced`). Sequence fields compare before the number, so they keep it.
        let unsequenced: Option<(Vec<i64>, SchemaRef)> =
            (pk && merged_vectors.is_none() && layout.sequence_field_indices.is_empty())
                .then(|| crate::lsm::levels::disjoint_run_sequences(&ordered))
                .flatten()
                .map(|numbers| {
                    let mut fields: Vec<_> = file_target.fields().iter().cloned().collect();
                    fields.remove(k);
                    (numbers, Arc::new(arrow::datatypes::Schema::new(fields)))
                });
        let io = self.table.io().clone();
        let handle = tokio::runtime::Handle::current();
        let cancelled = || {
            InternalSnafu {
                message: "read cancelled".to_string(),
            }
            .build()
        };
        Ok(Box::new(move || -> Result<()> {
            let load_vectors = |files: &[crate::spec::DataFileMeta]| {
                let names = files.iter().map(|f| f.file_name.as_str()).collect();
                let at = (&dv_partition[..], dv_bucket);
                load_vectors(&handle, &manifests, dv_index.as_deref(), at, &names)
            };
            if let (Some(files), Some(spec)) = (&merged_vectors, &spec) {
                let vectors = load_vectors(files)?;
                let positioned = data_file::with_position_column(&file_target);
                let mut streams = Vec::new();
                for (run, metas) in runs.into_iter().zip(&ordered) {
                    let run_files = run
                        .into_iter()
                        .zip(metas)
                        .map(|(file, meta)| {
                            Ok(data_file::RunFile {
                                file,
                                deleted: vectors
                                    .get(&meta.file_name)
                                    .map(|dv| {
                                        dv.positions_32(&meta.file_name)
                                            .map_err(|e| e.at(&meta.file_name))
                                    })
                                    .transpose()?,
                                ordinal: None,
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    streams.push(data_file::vector_run_stream(
                        handle.clone(),
                        io.clone(),
                        Arc::clone(&file_target),
                        Arc::clone(&positioned),
                        run_files,
                    ));
                }
                return merge_streams(streams, spec, Some(&merged_cols), None, |merged| {
                    let batch = merged_output(&merged, n_out, &output_schema)?;
                    tx.blocking_send(Ok(batch)).map_err(|_| cancelled())
                });
            }
            let streams = runs.into_iter().enumerate().map(|(run, files)| {
                let sequence = unsequenced
                    .as_ref()
                    .and_then(|(numbers, target)| Some((*numbers.get(run)?, target)));
                let stream = data_file::run_stream(
                    handle.clone(),
                    io.clone(),
                    Arc::clone(sequence.map_or(&file_target, |(_, target)| target)),
                    files,
                    filter.clone(),
                    predicate.clone(),
                );
                match sequence {
                    Some((seq, _)) => {
                        let schema = Arc::clone(&file_target);
                        // Grown to the largest batch seen: a point query reads a few rows.
                        let mut numbers = data_file::ConstantColumn::new(seq);
                        Box::new(stream.map(move |b| {
                            b.and_then(|b| with_sequence(&schema, b, k, &mut numbers))
                        })) as crate::lsm::merge::stream::RunStream
                    }
                    None => stream,
                }
            });
            if let Some((schema, files)) = &tracked {
                let vectors = load_vectors(files)?;
                for (file, stream) in files.iter().zip(streams) {
                    let dv = vectors.get(&file.file_name);
                    let mut position = 0i64;
                    for batch in stream {
                        let batch = batch.and_then(|b| {
                            let start = position;
                            position += b.num_rows() as i64;
                            // Row ids by position in the file, then the deleted rows left out.
                            let b = match (&kind_schema, row_tracking) {
                                (Some(ks), _) => prepend_kinds(ks, &b, None)?,
                                (None, true) => assign_row_tracking(schema, &b, file, start)?,
                                (None, false) => b,
                            };
                            match dv {
                                Some(dv) => drop_deleted(&b, dv, start),
                                None => Ok(b),
                            }
                        });
                        tx.blocking_send(batch).map_err(|_| cancelled())?;
                    }
                }
                return Ok(());
            }
            let Some(spec) = spec else {
                for batch in streams.flatten() {
                    let batch = match (&kind_schema, batch) {
                        (Some(ks), Ok(b)) => prepend_kinds(ks, &b, None),
                        (_, b) => b,
                    };
                    tx.blocking_send(batch).map_err(|_| cancelled())?;
                }
                return Ok(());
            };
            // Runs read at one sequence number each are merged by their ranks, out of key order
            // across them: a read promises no order.
            let ranks = unsequenced.as_ref().map(|(numbers, _)| &numbers[..]);
            merge_streams(
                streams.collect(),
                &spec,
                Some(&merged_cols),
                ranks,
                |merged| {
                    let batch = merged_output(&merged, n_out, &output_schema)?;
                    let batch = match &kind_schema {
                        Some(ks) => {
                            let kinds = merged
                                .column(n_out)
                                .as_any()
                                .downcast_ref::<arrow::array::Int8Array>()
                                .cloned();
                            prepend_kinds(ks, &batch, kinds.as_ref())?
                        }
                        None => batch,
                    };
                    tx.blocking_send(Ok(batch)).map_err(|_| cancelled())
                },
            )
        }))
    }
}

/// The deletion vectors of the files `names` in bucket `at` (partition, bucket) of the snapshot
/// `index` reads (none without an index: the read keeps every row); the index's entries are
/// decoded once per read.
fn load_vectors(
    handle: &tokio::runtime::Handle,
    manifests: &crate::manifest::ManifestManager,
    index: Option<&DvIndex>,
    at: (&[u8], i32),
    names: &std::collections::HashSet<&str>,
) -> Result<HashMap<String, DeletionVector>> {
    let Some(index) = index else {
        return Ok(HashMap::new());
    };
    handle.block_on(async {
        let entries = index
            .entries
            .get_or_try_init(|| manifests.index_entries(&index.snapshot))
            .await?;
        manifests
            .deletion_vectors(index.snapshot.id, entries, at.0, at.1, Some(names))
            .await
    })
}
