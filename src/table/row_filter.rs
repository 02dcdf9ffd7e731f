//! Late materialization: reads of Parquet data files that decode some columns for fewer rows.
//!
//! - A row predicate is applied while a file is decoded: the columns it reads are decoded first,
//!   row group by row group, and the other columns only for the rows it keeps (pages without a
//!   kept row are skipped, not decompressed). A predicate is inexact: it may only drop rows that
//!   cannot be part of the answer, and the caller filters again, so a file it cannot be applied to
//!   (a column it reads is missing, or stored under another type) is simply read whole. It is asked
//!   again for each row group, because the predicates that pay off are dynamic: a top-N's bar
//!   rises as the scan goes.
//! - [`load_rows`] decodes chosen rows of a file (a top-N's winners, `table::read::top_n`).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::{
    ArrowPredicateFn, ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    RowFilter, RowSelection, RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::reader::ChunkReader;
use snafu::ResultExt;

use super::data_file::decode::{
    self, decode_projected, file_roots, name_in_file, projected_bytes, Decoded,
};
use super::evolution::FileColumns;
use super::evolution::FileRef;
use crate::error::{ArrowSnafu, ParquetSnafu, Result};

/// A test on rows, evaluated over the columns it names.
pub trait RowPredicate: Send + Sync + std::fmt::Debug {
    /// The table columns the test reads, by name.
    fn columns(&self) -> &[String];
    /// Whether each row of `batch` (the columns of [`Self::columns`], in that order, with the
    /// table's types) may be kept; null counts as not kept.
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray>;
    /// Whether the test can reject anything now (a dynamic filter before its first bar cannot):
    /// while it cannot, rows are read without it, one batch's worth at a time, so the bar the
    /// first batches set applies to the rest.
    fn is_active(&self) -> bool {
        true
    }
}

/// Rows per batch of a filtered read (as the unfiltered reads).
const BATCH_ROWS: usize = 64 * 1024;

/// The batches of the Parquet file `reader` reads, in `target`'s layout, with `predicate` applied
/// as a row filter in each row group; none when the predicate cannot be applied to this file.
pub(crate) fn open<R: ChunkReader + Clone + 'static>(
    path: &str,
    reader: R,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
    part: Option<&Range<u64>>,
    predicate: &Arc<dyn RowPredicate>,
) -> Result<Option<FilteredRead<R>>> {
    let meta = decode::load_metadata(path, &reader, ArrowReaderOptions::new())?;
    let groups: Vec<usize> = match part {
        Some(p) => decode::part_groups(meta.metadata(), p),
        None => (0..meta.metadata().num_row_groups()).collect(),
    };
    let Some((test_roots, file_names, test_schema)) =
        test_columns(meta.schema(), target, columns, predicate.columns())
    else {
        return Ok(None);
    };
    // What the read decodes, counted once for the file.
    crate::metrics::metrics().bytes_read.inc_by(projected_bytes(
        meta.metadata(),
        &file_roots(meta.schema(), target, columns),
        Some(&groups),
    ));
    Ok(Some(FilteredRead {
        path: path.to_string(),
        groups: groups.into_iter().map(|g| (g, 0)).collect(),
        reader,
        meta,
        target: Arc::clone(target),
        columns: columns.cloned(),
        predicate: Arc::clone(predicate),
        test_roots,
        file_names: Arc::new(file_names),
        test_schema,
        current: None,
    }))
}

/// Where the columns `names` are in a file of schema `file` (root positions, sorted), their names
/// there, and the schema the predicate sees; none unless each is in the file with the target's
/// type. Pure.
fn test_columns(
    file: &SchemaRef,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
    names: &[String],
) -> Option<(Vec<usize>, Vec<String>, SchemaRef)> {
    let mut roots = Vec::with_capacity(names.len());
    let mut file_names = Vec::with_capacity(names.len());
    let mut fields = Vec::with_capacity(names.len());
    for name in names {
        let field = target.field_with_name(name).ok()?;
        let in_file = name_in_file(columns, name)?;
        let root = file
            .fields()
            .iter()
            .position(|f| f.name() == &in_file && f.data_type() == field.data_type())?;
        roots.push(root);
        file_names.push(in_file);
        fields.push(field.clone());
    }
    roots.sort_unstable();
    roots.dedup();
    Some((roots, file_names, Arc::new(Schema::new(fields))))
}

/// A file read row group by row group, each with the predicate as its row filter.
pub(crate) struct FilteredRead<R> {
    path: String,
    /// The row groups (and the row to start at in each) still to read.
    groups: VecDeque<(usize, usize)>,
    reader: R,
    meta: ArrowReaderMetadata,
    target: SchemaRef,
    columns: Option<FileColumns>,
    predicate: Arc<dyn RowPredicate>,
    /// Root columns of the file the predicate reads.
    test_roots: Vec<usize>,
    /// Their names in the file, in the predicate's order.
    file_names: Arc<Vec<String>>,
    /// The predicate's columns under the table's names.
    test_schema: SchemaRef,
    current: Option<Decoded>,
}

impl<R: ChunkReader + Clone + 'static> FilteredRead<R> {
    /// The decoder of row group `group` from row `from` on, its rows tested by the predicate as
    /// it is now; while the predicate is inactive, only one batch's rows, untested (the rest of
    /// the group is put back in front).
    fn open_group(&mut self, group: usize, from: usize) -> Result<Decoded> {
        let rows = usize::try_from(self.meta.metadata().row_group(group).num_rows()).unwrap_or(0);
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.reader.clone(),
            self.meta.clone(),
        )
        .with_row_groups(vec![group]);
        let active = self.predicate.is_active();
        let take = if active {
            rows - from
        } else {
            BATCH_ROWS.min(rows - from)
        };
        if from + take < rows {
            self.groups.push_front((group, from + take));
        }
        let mut builder = if from > 0 || take < rows {
            let selectors = [
                RowSelector::skip(from),
                RowSelector::select(take),
                RowSelector::skip(rows - from - take),
            ];
            builder.with_row_selection(RowSelection::from(
                selectors
                    .into_iter()
                    .filter(|s| s.row_count > 0)
                    .collect::<Vec<_>>(),
            ))
        } else {
            builder
        };
        if active {
            let mask = ProjectionMask::roots(builder.parquet_schema(), self.test_roots.clone());
            let (predicate, names, schema) = (
                Arc::clone(&self.predicate),
                Arc::clone(&self.file_names),
                Arc::clone(&self.test_schema),
            );
            let test = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
                let columns = names
                    .iter()
                    .map(|n| {
                        batch.column_by_name(n).cloned().ok_or_else(|| {
                            ArrowError::SchemaError(format!("row filter: no column {n}"))
                        })
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
                // Carried whole, so its class survives Parquet's reader.
                predicate
                    .evaluate(&batch)
                    .map_err(|e| ArrowError::ExternalError(Box::new(e)))
            });
            builder = builder.with_row_filter(RowFilter::new(vec![Box::new(test)]));
        }
        decode_projected(
            &self.path,
            builder,
            BATCH_ROWS,
            &self.target,
            self.columns.as_ref(),
        )
    }
}

impl<R: ChunkReader + Clone + 'static> Iterator for FilteredRead<R> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some(batch) = self.current.as_mut().and_then(Iterator::next) {
                return Some(batch);
            }
            let (group, from) = self.groups.pop_front()?;
            match self.open_group(group, from) {
                Ok(decoded) => self.current = Some(decoded),
                Err(e) => {
                    self.groups.clear();
                    return Some(Err(e));
                }
            }
        }
    }
}

/// [`decode::read_lazily`] with `predicate` tested in each row group of a Parquet file (a local one read
/// by ranges, any other fetched whole); a file it cannot be applied to is read whole.
pub(super) fn load_tested(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
    predicate: &Arc<dyn RowPredicate>,
) -> Result<decode::Batches> {
    if !decode::is_parquet(&file.path) {
        return decode::read_lazily(handle, io, file, target);
    }
    /// The file `reader` reads, tested where the predicate applies, else whole.
    fn tested<R: ChunkReader + Clone + Send + 'static>(
        file: &FileRef,
        reader: R,
        target: &SchemaRef,
        predicate: &Arc<dyn RowPredicate>,
    ) -> Result<decode::Batches> {
        let (path, columns, part) = (&file.path, file.columns.as_ref(), file.part.as_ref());
        Ok(
            match open(path, reader.clone(), target, columns, part, predicate)? {
                Some(read) => Box::new(read),
                None => Box::new(decode::open_parquet(
                    path, reader, target, None, columns, part,
                )?),
            },
        )
    }
    match decode::local_file(io, &file.path) {
        Some(local) => tested(file, local, target, predicate),
        None => {
            let bytes = handle.block_on(io.read_data(&file.path))?;
            tested(file, bytes, target, predicate)
        }
    }
}

/// The rows at `rows` (positions in the file, or in its part, ascending, unique) of one data
/// file, in `target`'s layout: only the pages holding them are decompressed (a local file is read
/// by ranges).
pub(crate) fn load_rows(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
    rows: &[u64],
) -> Result<Vec<RecordBatch>> {
    fn chosen<R: parquet::file::reader::ChunkReader + 'static>(
        file: &FileRef,
        reader: R,
        target: &SchemaRef,
        rows: &[u64],
    ) -> Result<Vec<RecordBatch>> {
        let (path, columns) = (&file.path, file.columns.as_ref());
        let mut builder =
            ParquetRecordBatchReaderBuilder::try_new(reader).context(ParquetSnafu { path })?;
        // A part reads as if the file held its row groups only.
        let total = match &file.part {
            Some(part) => {
                let md = builder.metadata();
                let groups = decode::part_groups(md, part);
                let total: i64 = groups.iter().map(|&g| md.row_group(g).num_rows()).sum();
                builder = builder.with_row_groups(groups);
                usize::try_from(total).unwrap_or(0)
            }
            None => usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0),
        };
        let ranges = rows
            .iter()
            .map(|&r| r as usize)
            .filter(|&r| r < total)
            .map(|r| r..r + 1);
        let selection =
            parquet::arrow::arrow_reader::RowSelection::from_consecutive_ranges(ranges, total);
        decode_projected(
            path,
            builder.with_row_selection(selection),
            BATCH_ROWS,
            target,
            columns,
        )?
        .collect()
    }
    if !decode::is_parquet(&file.path) {
        // ORC and Avro files are decoded whole (never by parts); the rows are taken from them.
        let all = decode::read_lazily(handle, io, file, target)?.collect::<Result<Vec<_>>>()?;
        let batch = arrow::compute::concat_batches(target, &all).context(ArrowSnafu {
            context: format!("{}: joining batches", file.path),
        })?;
        let indices = arrow::array::UInt64Array::from(rows.to_vec());
        let taken = arrow::compute::take_record_batch(&batch, &indices).context(ArrowSnafu {
            context: format!("{}: taking rows", file.path),
        })?;
        return Ok(vec![taken]);
    }
    match decode::local_file(io, &file.path) {
        Some(local) => chosen(file, local, target, rows),
        None => {
            let bytes = handle.block_on(io.read_data(&file.path))?;
            chosen(file, bytes, target, rows)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type};
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    /// Keeps rows whose `v` is at least a bar that can be raised while a read runs.
    #[derive(Debug, Default)]
    struct AtLeast {
        columns: Vec<String>,
        bar: AtomicI64,
        calls: AtomicUsize,
        inactive: std::sync::atomic::AtomicBool,
    }

    impl RowPredicate for AtLeast {
        fn columns(&self) -> &[String] {
            &self.columns
        }

        fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let bar = self.bar.load(Ordering::SeqCst);
            let v = batch.column(0).as_primitive::<Int64Type>();
            Ok(v.iter().map(|x| x.map(|x| x >= bar)).collect())
        }

        fn is_active(&self) -> bool {
            !self.inactive.load(Ordering::SeqCst)
        }
    }

    /// A Parquet file of `id` 0..3000 and `v = id`, in row groups of 1000 rows.
    fn file() -> (bytes::Bytes, SchemaRef) {
        let target = schema(&[("id", DataType::Int64), ("v", DataType::Int64)]);
        let ids: Vec<i64> = (0..3000).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&target),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(Int64Array::from(ids)),
            ],
        )
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .build();
        let mut buf = Vec::new();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(&mut buf, Arc::clone(&target), Some(props))
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        (bytes::Bytes::from(buf), target)
    }

    #[test]
    fn rows_are_tested_with_the_bar_of_the_moment_row_group_by_row_group() {
        let (bytes, target) = file();
        let at_least = Arc::new(AtLeast {
            columns: vec!["v".into()],
            bar: AtomicI64::new(i64::MIN),
            ..Default::default()
        });
        let predicate: Arc<dyn RowPredicate> = Arc::<AtLeast>::clone(&at_least);
        let mut read = open("f.parquet", bytes, &target, None, None, &predicate)
            .unwrap()
            .expect("applies");
        // The first row group is read under the opening bar: all of it.
        let first = read.next().unwrap().unwrap();
        assert_eq!(first.num_rows(), 1000);
        assert_eq!(first.schema(), target);
        // Raised between row groups: the next ones keep only rows at or above it, both columns.
        at_least.bar.store(2990, Ordering::SeqCst);
        let rest: Vec<RecordBatch> = read.map(|b| b.unwrap()).collect();
        let ids: Vec<i64> = rest
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(ids, (2990..3000).collect::<Vec<_>>());
        let vs: Vec<i64> = rest
            .iter()
            .flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(vs, ids);
        assert!(at_least.calls.load(Ordering::SeqCst) >= 3);
    }

    #[test]
    fn the_parts_of_a_file_read_each_row_once() {
        let (bytes, target) = file();
        let ids = |batches: Vec<RecordBatch>| -> Vec<i64> {
            batches
                .iter()
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect()
        };
        // Row groups start at 0, 1000 and 2000: a part takes those starting in its range.
        let parts = [0..1500, 1500..2500, 2500..u64::MAX];
        let predicate: Arc<dyn RowPredicate> = Arc::new(AtLeast {
            columns: vec!["v".into()],
            bar: AtomicI64::new(500),
            ..Default::default()
        });
        let mut tested = Vec::new();
        let mut plain = Vec::new();
        for part in &parts {
            let read = open(
                "f.parquet",
                bytes.clone(),
                &target,
                None,
                Some(part),
                &predicate,
            )
            .unwrap()
            .expect("applies");
            tested.push(ids(read.map(|b| b.unwrap()).collect()));
            let read =
                decode::open_parquet("f.parquet", bytes.clone(), &target, None, None, Some(part))
                    .unwrap();
            plain.push(ids(read.map(|b| b.unwrap()).collect()));
        }
        assert_eq!(plain[0], (0..2000).collect::<Vec<_>>());
        assert_eq!(plain[1], (2000..3000).collect::<Vec<_>>());
        assert!(plain[2].is_empty(), "no row group starts in the last part");
        assert_eq!(tested.concat(), (500..3000).collect::<Vec<_>>());
    }

    #[test]
    fn an_inactive_predicate_is_not_evaluated() {
        let (bytes, target) = file();
        let at_least = Arc::new(AtLeast {
            columns: vec!["v".into()],
            bar: AtomicI64::new(2500),
            inactive: true.into(),
            ..Default::default()
        });
        let predicate: Arc<dyn RowPredicate> = Arc::<AtLeast>::clone(&at_least);
        let mut read = open("f.parquet", bytes, &target, None, None, &predicate)
            .unwrap()
            .expect("applies");
        assert_eq!(read.next().unwrap().unwrap().num_rows(), 1000);
        assert_eq!(at_least.calls.load(Ordering::SeqCst), 0);
        at_least.inactive.store(false, Ordering::SeqCst);
        let rest: usize = read.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rest, 500);
        assert!(at_least.calls.load(Ordering::SeqCst) > 0);
    }

    #[test]
    fn a_file_without_the_tested_column_is_not_filtered() {
        let (bytes, _) = file();
        let target = schema(&[("id", DataType::Int64), ("w", DataType::Int64)]);
        let predicate: Arc<dyn RowPredicate> = Arc::new(AtLeast {
            columns: vec!["w".into()],
            ..Default::default()
        });
        assert!(open("f.parquet", bytes, &target, None, None, &predicate)
            .unwrap()
            .is_none());
    }

    fn schema(fields: &[(&str, DataType)]) -> SchemaRef {
        Arc::new(Schema::new(
            fields
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect::<Vec<_>>(),
        ))
    }

    #[test]
    fn test_columns_are_found_by_name_and_type() {
        let target = schema(&[("id", DataType::Int64), ("v", DataType::Float64)]);
        let file = schema(&[("v", DataType::Float64), ("id", DataType::Int64)]);
        let (roots, names, s) = test_columns(&file, &target, None, &["v".into()]).unwrap();
        assert_eq!(roots, vec![0]);
        assert_eq!(names, vec!["v".to_string()]);
        assert_eq!(s.field(0).name(), "v");
        let (roots, _, _) = test_columns(&file, &target, None, &["id".into(), "v".into()]).unwrap();
        assert_eq!(roots, vec![0, 1]);
        // Missing from the file, stored under another type, or not a table column: not applied.
        let narrow = schema(&[("id", DataType::Int64)]);
        assert!(test_columns(&narrow, &target, None, &["v".into()]).is_none());
        let other = schema(&[("v", DataType::Float32)]);
        assert!(test_columns(&other, &target, None, &["v".into()]).is_none());
        assert!(test_columns(&file, &target, None, &["w".into()]).is_none());
    }
}
