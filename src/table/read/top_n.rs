//! Late materialization of `ORDER BY … LIMIT n`: the sort columns of every row are decoded
//! first, file by file, keeping the best `n` with where they sit (file, row); then the other
//! columns are decoded for those `n` rows only. This is what lets a top-N cost about what a scan
//! of its sort columns costs. Only reads without merging qualify (append tables, and primary-key
//! splits whose files hold final rows), since a row's position must be the row.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::{lexsort_to_indices, take_record_batch, SortColumn, SortOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::stream::{self, BoxStream, StreamExt};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;
use snafu::ResultExt;

use super::top_pages;
use super::{is_raw, TableRead};
use crate::error::{ArrowSnafu, Result};
use crate::table::data_file;
use crate::table::evolution::FileRef;
use crate::table::scan::Plan;

/// A sort key of a top-N read: a column of the read's output and its order.
#[derive(Debug, Clone, PartialEq)]
pub struct TopKey {
    pub column: String,
    pub options: SortOptions,
}

/// Names of the position columns added after the keys.
const FILE_COLUMN: &str = "_TOP_FILE";
const ROW_COLUMN: &str = "_TOP_ROW";

impl TableRead {
    /// The rows of `plan` that are first by `keys` (`n` of them, fewer in a smaller plan; among
    /// ties, any), read late: the key columns of every row, then the other columns of those rows
    /// only. Their order is not the sort's: the caller sorts them. None when the plan's rows need
    /// merging, or a key is not an output column: the caller then reads everything. `skipped`
    /// counts the pages of the first key left unread.
    pub fn top_n_stream(
        &self,
        plan: Plan,
        keys: &[TopKey],
        n: usize,
        skipped: Arc<AtomicUsize>,
    ) -> Option<BoxStream<'static, Result<RecordBatch>>> {
        let unmerged = !self.row_kind
            && !self.row_tracking
            && !self.deletion_vectors
            && (!self.layout.is_primary_key_table() || plan.splits.iter().all(is_raw));
        if !unmerged || keys.is_empty() {
            return None;
        }
        let fields = keys
            .iter()
            .map(|k| self.output_schema.field_with_name(&k.column).ok().cloned())
            .collect::<Option<Vec<_>>>()?;
        // Nested keys (structs, lists, maps) are left to DataFusion's own sort.
        if fields.iter().any(|f| f.data_type().is_nested()) {
            return None;
        }
        let key_schema = Arc::new(Schema::new(fields));
        let this = self.clone();
        let keys = keys.to_vec();
        Some(
            stream::once(async move { this.top_n_rows(plan, key_schema, keys, n, skipped).await })
                .flat_map(|r| match r {
                    Ok(batches) => stream::iter(batches.into_iter().map(Ok)).boxed(),
                    Err(e) => stream::once(async move { Err(e) }).boxed(),
                })
                .boxed(),
        )
    }

    /// The work of [`Self::top_n_stream`]: the pages of the first key that can hold a winner
    /// ([`top_pages`], by the page indexes of local Parquet files); then each file's best rows
    /// from those pages on a blocking thread of its own (two at a time, so a partition with more
    /// files than another still keeps a core busy for each), merged; then the winners' rows,
    /// file by file.
    async fn top_n_rows(
        self,
        plan: Plan,
        key_schema: SchemaRef,
        keys: Vec<TopKey>,
        n: usize,
        skipped: Arc<AtomicUsize>,
    ) -> Result<Vec<RecordBatch>> {
        let mut files: Vec<FileRef> = Vec::new();
        for split in &plan.splits {
            let dir = self.table.bucket_dir(&split.partition, split.bucket)?;
            for f in &split.files {
                let mut file = self.table.file_ref(&dir, f)?;
                file.part = split.rows.clone();
                files.push(file);
            }
        }
        if n == 0 || files.is_empty() {
            return Ok(Vec::new());
        }
        let files = Arc::new(files);
        let (io, first) = (self.table.io().clone(), keys[0].clone());
        let target = key_schema.field(0).data_type().clone();
        let opened = {
            let files = Arc::clone(&files);
            tokio::task::spawn_blocking(move || {
                files
                    .iter()
                    .map(|f| open_pages(&io, f, &first, &target))
                    .collect::<Result<Vec<_>>>()
            })
        };
        let opened = joined(opened.await)?;
        let bounds: Vec<_> = opened
            .iter()
            .map(|o| o.as_ref().and_then(|o| o.bounds.clone()))
            .collect();
        let chosen = top_pages::choose(
            &bounds,
            n,
            keys[0].options.descending,
            keys[0].options.nulls_first,
        );
        skipped.fetch_add(
            chosen
                .iter()
                .flatten()
                .map(|c| c.iter().filter(|k| !**k).count())
                .sum(),
            Ordering::Relaxed,
        );
        let handle = tokio::runtime::Handle::current();
        let mut per_file = stream::iter(opened.into_iter().zip(chosen).enumerate())
            .map(|(i, (opened, chosen))| {
                let (io, files, handle) =
                    (self.table.io().clone(), Arc::clone(&files), handle.clone());
                let (key_schema, keys) = (Arc::clone(&key_schema), keys.clone());
                tokio::task::spawn_blocking(move || {
                    let mut best = Best::new(&key_schema, &keys, n);
                    let file = &files[i];
                    // The chosen pages of a local Parquet file; any other file whole.
                    let (batches, positions): (data_file::Batches, _) = match opened {
                        Some(opened) => {
                            let groups = opened.groups.clone();
                            let (builder, positions) = opened.builder(chosen.as_deref());
                            let decoded = data_file::decode_built(
                                &file.path,
                                builder,
                                BATCH_ROWS,
                                &key_schema,
                                Some(&groups),
                                file.columns.as_ref(),
                            )?;
                            (Box::new(decoded), positions)
                        }
                        None => (
                            data_file::load_lazily(&handle, &io, file, &key_schema, None)?,
                            None,
                        ),
                    };
                    let mut row = 0usize;
                    for batch in batches {
                        let batch = batch?;
                        let len = batch.num_rows();
                        let at = match &positions {
                            Some(p) => UInt64Array::from(
                                p.get(row..row + len).unwrap_or_default().to_vec(),
                            ),
                            None => UInt64Array::from_iter_values(row as u64..(row + len) as u64),
                        };
                        if at.len() != len {
                            return crate::error::InternalSnafu {
                                message: format!(
                                    "{}: top-N read: more rows than selected",
                                    file.path
                                ),
                            }
                            .fail();
                        }
                        best.offer(&batch, i as u32, at)?;
                        row += len;
                    }
                    Ok(best.rows)
                })
            })
            .buffer_unordered(2);
        let mut best = Best::new(&key_schema, &keys, n);
        while let Some(kept) = per_file.next().await {
            if let Some(kept) = joined(kept)? {
                best.offer_positioned(kept)?;
            }
        }
        drop(per_file);
        let (io, output_schema) = (self.table.io().clone(), Arc::clone(&self.output_schema));
        let winners = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            for (file, rows) in best.by_file() {
                out.extend(crate::table::row_filter::load_rows(
                    &handle,
                    &io,
                    &files[file as usize],
                    &output_schema,
                    &rows,
                )?);
            }
            Ok(out)
        });
        joined(winners.await)
    }
}

/// Rows per batch of the key columns' read.
const BATCH_ROWS: usize = 64 * 1024;

/// A local Parquet file of a top-N read, opened with its page index.
struct Opened {
    file: bytes::Bytes,
    meta: ArrowReaderMetadata,
    /// The row groups of the file's part (all of them for a whole file).
    groups: Vec<usize>,
    /// The first key's pages in those groups; none when unknown.
    bounds: Option<Vec<top_pages::PageBound>>,
}

impl Opened {
    /// A reader of the part's rows in the pages `chosen` keeps (all: none), and where each row
    /// it yields sits in the part (none: in order from 0).
    fn builder(
        self,
        chosen: Option<&[bool]>,
    ) -> (
        ParquetRecordBatchReaderBuilder<bytes::Bytes>,
        Option<Vec<u64>>,
    ) {
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(self.file, self.meta)
            .with_row_groups(self.groups);
        let (Some(chosen), Some(pages)) = (chosen, &self.bounds) else {
            return (builder, None);
        };
        let mut selectors = Vec::with_capacity(pages.len());
        let mut positions = Vec::new();
        let mut first = 0u64;
        for (page, keep) in pages.iter().zip(chosen) {
            if *keep {
                selectors.push(RowSelector::select(page.rows));
                positions.extend(first..first + page.rows as u64);
            } else {
                selectors.push(RowSelector::skip(page.rows));
            }
            first += page.rows as u64;
        }
        (
            builder.with_row_selection(RowSelection::from(selectors)),
            Some(positions),
        )
    }
}

/// `file` opened with its page index and the first key's page bounds, when it is a local
/// Parquet file; none otherwise (it is then read whole, as any file).
fn open_pages(
    io: &crate::io::FileIo,
    file: &FileRef,
    first: &TopKey,
    target: &DataType,
) -> Result<Option<Opened>> {
    let Some(local) = data_file::local_file(io, &file.path) else {
        return Ok(None);
    };
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
    let meta = data_file::decode::load_metadata(&file.path, &local, options)?;
    let md = meta.metadata();
    let groups = match &file.part {
        Some(part) => data_file::part_groups(md, part),
        None => (0..md.num_row_groups()).collect(),
    };
    let bounds = data_file::name_in_file(file.columns.as_ref(), &first.column).and_then(|name| {
        top_pages::page_bounds(
            md,
            meta.schema(),
            &groups,
            &name,
            target,
            first.options.descending,
        )
    });
    Ok(Some(Opened {
        file: local,
        meta,
        groups,
        bounds,
    }))
}

/// The outcome of a blocking task (a task that panicked is an internal error).
fn joined<T>(r: std::result::Result<Result<T>, tokio::task::JoinError>) -> Result<T> {
    r.unwrap_or_else(|e| {
        crate::error::InternalSnafu {
            message: format!("top-N read: {e}"),
        }
        .fail()
    })
}

/// The best `n` rows seen so far: their key columns, then the file and row they come from.
struct Best {
    schema: SchemaRef,
    options: Vec<SortOptions>,
    n: usize,
    rows: Option<RecordBatch>,
}

impl Best {
    fn new(key_schema: &SchemaRef, keys: &[TopKey], n: usize) -> Self {
        let mut fields: Vec<Field> = key_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(FILE_COLUMN, DataType::UInt32, false));
        fields.push(Field::new(ROW_COLUMN, DataType::UInt64, false));
        Self {
            schema: Arc::new(Schema::new(fields)),
            options: keys.iter().map(|k| k.options).collect(),
            n,
            rows: None,
        }
    }

    /// Takes the rows of `batch` (key columns; rows `rows` of file `file`) that belong among the
    /// best.
    fn offer(&mut self, batch: &RecordBatch, file: u32, rows: UInt64Array) -> Result<()> {
        let len = batch.num_rows();
        if len == 0 {
            return Ok(());
        }
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        columns.push(Arc::new(UInt32Array::from(vec![file; len])));
        columns.push(Arc::new(rows));
        let offered =
            RecordBatch::try_new(Arc::clone(&self.schema), columns).with_context(|_| {
                ArrowSnafu {
                    context: "top-N read: positioning rows",
                }
            })?;
        self.offer_positioned(offered)
    }

    /// [`Self::offer`] for rows that carry their position columns already (another `Best`'s).
    fn offer_positioned(&mut self, offered: RecordBatch) -> Result<()> {
        let context = || "top-N read: keeping the best rows".to_string();
        // Most rows of a large read cannot enter once n are kept: they are dropped before sorting.
        let offered = match self.contenders(offered.column(0))? {
            Some(keep) => arrow::compute::filter_record_batch(&offered, &keep)
                .with_context(|_| ArrowSnafu { context: context() })?,
            None => offered,
        };
        if offered.num_rows() == 0 {
            return Ok(());
        }
        let all = match self.rows.take() {
            Some(kept) => arrow::compute::concat_batches(&self.schema, [&kept, &offered])
                .with_context(|_| ArrowSnafu { context: context() })?,
            None => offered,
        };
        let sort: Vec<SortColumn> = self
            .options
            .iter()
            .enumerate()
            .map(|(i, o)| SortColumn {
                values: Arc::clone(all.column(i)),
                options: Some(*o),
            })
            .collect();
        let indices = lexsort_to_indices(&sort, Some(self.n))
            .with_context(|_| ArrowSnafu { context: context() })?;
        self.rows = Some(
            take_record_batch(&all, &indices)
                .with_context(|_| ArrowSnafu { context: context() })?,
        );
        Ok(())
    }

    /// Which of `values` (the first key's) sort before or with the last kept row, once `n` rows
    /// are kept; none when every row may enter. Only the first key is compared: rows tied on it
    /// are kept for the sort to decide.
    fn contenders(&self, values: &ArrayRef) -> Result<Option<arrow::array::BooleanArray>> {
        let (Some(kept), Some(first)) = (&self.rows, self.options.first()) else {
            return Ok(None);
        };
        if kept.num_rows() < self.n {
            return Ok(None);
        }
        let context = || "top-N read: comparing with the last kept row".to_string();
        let last = kept.column(0).slice(kept.num_rows() - 1, 1);
        if last.is_null(0) {
            // A null last: with nulls first only nulls can tie; with nulls last anything enters.
            return first
                .nulls_first
                .then(|| arrow::compute::is_null(values))
                .transpose()
                .with_context(|_| ArrowSnafu { context: context() });
        }
        let bar = arrow::array::Scalar::new(last);
        let before = if first.descending {
            arrow::compute::kernels::cmp::gt_eq(values, &bar)
        } else {
            arrow::compute::kernels::cmp::lt_eq(values, &bar)
        }
        .with_context(|_| ArrowSnafu { context: context() })?;
        // Null values compare as null: kept when nulls sort first, dropped otherwise.
        if first.nulls_first && values.null_count() > 0 {
            let nulls = arrow::compute::is_null(values)
                .with_context(|_| ArrowSnafu { context: context() })?;
            return Ok(Some(
                arrow::compute::or_kleene(&before, &nulls)
                    .with_context(|_| ArrowSnafu { context: context() })?,
            ));
        }
        Ok(Some(before))
    }

    /// The kept rows' positions, by file (ascending within each).
    fn by_file(&self) -> BTreeMap<u32, Vec<u64>> {
        let mut out: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        if let Some(rows) = &self.rows {
            let k = self.options.len();
            let files = rows.column(k).as_any().downcast_ref::<UInt32Array>();
            let positions = rows.column(k + 1).as_any().downcast_ref::<UInt64Array>();
            if let (Some(files), Some(positions)) = (files, positions) {
                for (f, r) in files.values().iter().zip(positions.values()) {
                    out.entry(*f).or_default().push(*r);
                }
            }
        }
        for rows in out.values_mut() {
            rows.sort_unstable();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Float64Array};
    use arrow::datatypes::Float64Type;

    fn keys_of(values: Vec<Option<f64>>) -> (SchemaRef, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Float64, true)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Float64Array::from(values))],
        )
        .unwrap();
        (schema, batch)
    }

    #[test]
    fn the_best_rows_are_kept_across_batches_and_files_with_their_positions() {
        let desc = SortOptions {
            descending: true,
            nulls_first: false,
        };
        let keys = vec![TopKey {
            column: "v".into(),
            options: desc,
        }];
        let (schema, a) = keys_of(vec![Some(1.0), Some(9.0), None, Some(5.0)]);
        let (_, b) = keys_of(vec![Some(7.0), Some(8.0)]);
        let (_, c) = keys_of(vec![Some(2.0), Some(10.0)]);
        let mut best = Best::new(&schema, &keys, 3);
        best.offer(&a, 0, UInt64Array::from_iter_values(0..4))
            .unwrap();
        best.offer(&b, 0, UInt64Array::from_iter_values(4..6))
            .unwrap();
        best.offer(&c, 1, UInt64Array::from_iter_values(0..2))
            .unwrap();
        let kept = best.rows.as_ref().unwrap();
        let v: Vec<f64> = kept
            .column(0)
            .as_primitive::<Float64Type>()
            .values()
            .to_vec();
        assert_eq!(v, vec![10.0, 9.0, 8.0]);
        let by_file = best.by_file();
        assert_eq!(by_file[&0], vec![1, 5]);
        assert_eq!(by_file[&1], vec![1]);
        // Nulls first: the null row is among the best.
        let mut best = Best::new(
            &schema,
            &[TopKey {
                column: "v".into(),
                options: SortOptions {
                    descending: true,
                    nulls_first: true,
                },
            }],
            2,
        );
        best.offer(&a, 0, UInt64Array::from_iter_values(0..4))
            .unwrap();
        assert_eq!(best.by_file()[&0], vec![1, 2]);
    }
}
