//! Data files: encoding one sorted run (or a chunk of appended rows) as Parquet, ORC
//! ([`orc_file`]) or Avro (`avro_file`: a postpone bucket's files, or `file.format = avro`) with
//! its `DataFileMeta` statistics, and reading
//! files back into batches of an expected schema: whole, by key range through the page cache
//! ([`super::page_cache`]), tested row by row ([`super::row_filter`]), or as sorted runs with
//! their deletion vectors. The decoding itself, which those strategies share, is [`decode`].

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, Int8Type, SchemaRef};
use bytes::Bytes;
use snafu::ResultExt;

use super::evolution::FileRef;
pub(crate) use super::key_filter::RowGroupFilter;
use crate::error::{ArrowSnafu, Result};
use crate::schema::layout::{datum_at, TableLayout};
use crate::spec::binary_row::{self, Datum};
use crate::spec::manifest::{DataFileMeta, FileSource, SimpleStats};
use crate::spec::options::FileFormat;
pub(crate) use parquet_writer::{encode_parquet, EXACT_BOUNDS_KEY, ROW_GROUP_ROWS};

pub(crate) mod blob_file;
mod conform;
pub mod decode;
mod orc_file;
mod parquet_writer;
pub(crate) mod parts;
mod row_kind;
mod shredded;

pub use decode::decode;
pub(crate) use decode::{
    decode_built, decode_filtered, decode_parquet, file_bytes, is_parquet, local_file,
    name_in_file, part_groups, read_lazily, Batches,
};
pub(crate) use row_kind::ConstantColumn;

/// The extension of the data files a writer of `layout` writes: the table's `file.format` where
/// its writer encodes every column of the layout, Parquet otherwise (every Paimon reader takes
/// each file's format from its extension, so a table may mix them) (pure).
pub(crate) fn data_suffix(layout: &TableLayout) -> &'static str {
    let format = match layout.options.format {
        Some(FileFormat::Orc) if orc_file::writable(&layout.file_schema) => FileFormat::Orc,
        Some(FileFormat::Avro) if super::avro_file::convertible(layout) => FileFormat::Avro,
        _ => FileFormat::Parquet,
    };
    format.suffix()
}

/// The columns of `batch` (in the table's file layout) a Parquet or ORC file holds: all of them,
/// or without the `_KEY_` columns under `data-file.thin-mode` (every key column is a value
/// column of the same name, which readers take the key from, as Java's `trimKeyFields` does).
/// Avro files (a postpone bucket's) keep Paimon's full KeyValue record.
fn stored(layout: &TableLayout, batch: &RecordBatch) -> Result<RecordBatch> {
    let k = layout.key_indices.len();
    if !layout.options.thin_mode || k == 0 {
        return Ok(batch.clone());
    }
    batch
        .project(&(k..batch.num_columns()).collect::<Vec<_>>())
        .context(ArrowSnafu {
            context: "dropping the key columns of a thin data file",
        })
}

/// Encodes `batch` (in the table's file layout, sorted by key for PK tables) as a Parquet file.
pub fn encode(
    layout: &TableLayout,
    batch: &RecordBatch,
    file_name: String,
    level: i32,
    sequence_range: Option<(i64, i64)>,
    source: FileSource,
    now_millis: i64,
) -> Result<(Bytes, DataFileMeta)> {
    if batch.num_rows() == 0 {
        return crate::error::InternalSnafu {
            message: format!("refusing to write the empty data file {file_name}"),
        }
        .fail();
    }
    let compression = layout.options.compression_at(level);
    let buf = match FileFormat::of_file(&file_name) {
        FileFormat::Avro => super::avro_file::encode(layout, batch)?,
        FileFormat::Orc => orc_file::encode(&stored(layout, batch)?, &file_name, compression)?,
        FileFormat::Parquet => encode_parquet(&stored(layout, batch)?, &file_name, compression)?,
    };

    let n = batch.num_rows();
    let (min_key, max_key, key_stats, min_seq, max_seq, deletes) = if layout.is_primary_key_table()
    {
        let k = layout.key_indices.len();
        let key_row = |i: usize| -> Result<Vec<Datum>> {
            (0..k)
                .map(|c| datum_at(batch.column(c).as_ref(), i, &layout.key_types[c]))
                .collect()
        };
        let mut mins = Vec::with_capacity(k);
        let mut maxs = Vec::with_capacity(k);
        let mut nulls = Vec::with_capacity(k);
        for c in 0..k {
            let (mn, mx) = column_min_max(batch.column(c), &layout.key_types[c])?;
            mins.push(mn);
            maxs.push(mx);
            nulls.push(Some(batch.column(c).null_count() as i64));
        }
        let seq = batch.column(k).as_primitive::<Int64Type>();
        let kinds = batch.column(k + 1).as_primitive::<Int8Type>();
        let deletes = kinds.values().iter().filter(|&&v| v == 1 || v == 3).count() as i64;
        (
            binary_row::serialize(&key_row(0)?),
            binary_row::serialize(&key_row(n - 1)?),
            SimpleStats {
                min_values: binary_row::serialize(&mins),
                max_values: binary_row::serialize(&maxs),
                null_counts: nulls,
            },
            arrow::compute::min(seq).unwrap_or(0),
            arrow::compute::max(seq).unwrap_or(0),
            Some(deletes),
        )
    } else {
        let (lo, hi) = sequence_range.unwrap_or((0, 0));
        (
            binary_row::empty_row(),
            binary_row::empty_row(),
            SimpleStats::empty(),
            lo,
            hi,
            Some(0),
        )
    };
    let m = crate::metrics::metrics();
    m.rows_written.inc_by(n as u64);
    m.bytes_written.inc_by(buf.len() as u64);
    let meta = DataFileMeta {
        file_size: buf.len() as i64,
        file_name,
        row_count: n as i64,
        min_key,
        max_key,
        key_stats,
        // Value statistics are not written yet (allowed: it only disables value-based skipping).
        value_stats: SimpleStats::empty(),
        min_sequence_number: min_seq,
        max_sequence_number: max_seq,
        schema_id: layout.schema.id,
        level,
        extra_files: vec![],
        creation_time: Some(now_millis),
        delete_row_count: deletes,
        embedded_file_index: None,
        file_source: Some(source as i32),
        value_stats_cols: Some(vec![]),
        external_path: None,
        first_row_id: None,
        write_cols: None,
    };
    Ok((Bytes::from(buf), meta))
}

/// Min and max of a column, as Datums (Null when every value is null).
fn column_min_max(array: &ArrayRef, ty: &crate::spec::DataType) -> Result<(Datum, Datum)> {
    let mut min = Datum::Null;
    let mut max = Datum::Null;
    for i in 0..array.len() {
        if array.is_null(i) {
            continue;
        }
        let d = datum_at(array.as_ref(), i, ty)?;
        if min.is_null() || d.compare(&min) == Some(std::cmp::Ordering::Less) {
            min = d.clone();
        }
        if max.is_null() || d.compare(&max) == Some(std::cmp::Ordering::Greater) {
            max = d;
        }
    }
    Ok((min, max))
}

/// Reads and decodes one data file (written under any schema version) into batches of `target`. A Parquet file of a local warehouse
/// is read by ranges: its footer and only the column chunks `target` needs (in the row groups
/// `filter` keeps), each into a buffer of its own. Any other file is fetched whole first (object
/// stores: one request, and the local data cache).
pub(crate) fn load(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
    filter: Option<&RowGroupFilter>,
) -> Result<Vec<RecordBatch>> {
    let batches = load_selected(handle, io, file, target, filter)?;
    match filter {
        Some(f) => batches.into_iter().map(|b| f.keep_in_range(b)).collect(),
        None => Ok(batches),
    }
}

/// [`load`] before the rows outside `filter`'s key range are dropped: the pages a short key
/// range selects come from the process's page cache ([`super::page_cache`]).
fn load_selected(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
    filter: Option<&RowGroupFilter>,
) -> Result<Vec<RecordBatch>> {
    let fetch = || decode::file_bytes(handle, io, &file.path);
    let cacheable =
        filter.filter(|_| is_parquet(&file.path) && io.caches_metadata() && file.part.is_none());
    let (columns, part) = (file.columns.as_ref(), file.part.as_ref());
    match (local_file(io, &file.path), cacheable) {
        (Some(local), Some(f)) => {
            let reader = local.clone();
            match super::page_cache::read(io, file, target, f, move || Ok(reader))? {
                Some(batches) => Ok(batches),
                None => decode_parquet(&file.path, local, target, filter, columns, part),
            }
        }
        (Some(local), None) => decode_parquet(&file.path, local, target, filter, columns, part),
        (None, Some(f)) => {
            // The whole file is fetched at most once: for the cache's miss, or for this read.
            let mut fetched: Option<Bytes> = None;
            let cached = super::page_cache::read(io, file, target, f, || {
                let bytes = fetch()?;
                fetched = Some(bytes.clone());
                Ok(bytes)
            })?;
            if let Some(batches) = cached {
                return Ok(batches);
            }
            let bytes = match fetched {
                Some(bytes) => bytes,
                None => fetch()?,
            };
            decode_filtered(&file.path, bytes, target, filter, columns, part)
        }
        (None, None) => decode_filtered(&file.path, fetch()?, target, filter, columns, part),
    }
}

/// Each sorted run (files in key order) as a stream of whole rows in the file layout.
pub(crate) fn run_streams(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    layout: &crate::schema::layout::TableLayout,
    runs: Vec<Vec<FileRef>>,
) -> Vec<crate::lsm::merge::stream::RunStream> {
    runs.into_iter()
        .map(|files| {
            run_stream(
                handle.clone(),
                io.clone(),
                Arc::clone(&layout.file_schema),
                files,
                None,
                None,
            )
        })
        .collect()
}

/// A sorted run read file by file (one file's batches in memory at a time); `predicate`, where
/// given, is applied while each file is decoded ([`super::row_filter`]).
pub(crate) fn run_stream(
    handle: tokio::runtime::Handle,
    io: crate::io::FileIo,
    schema: arrow::datatypes::SchemaRef,
    files: Vec<FileRef>,
    filter: Option<Arc<RowGroupFilter>>,
    predicate: Option<Arc<dyn super::row_filter::RowPredicate>>,
) -> crate::lsm::merge::stream::RunStream {
    Box::new(files.into_iter().flat_map(move |file| {
        let read = match &predicate {
            Some(p) if filter.is_none() => {
                super::row_filter::load_tested(&handle, &io, &file, &schema, p)
            }
            _ => load_lazily(&handle, &io, &file, &schema, filter.as_deref()),
        };
        match read {
            Ok(batches) => batches,
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }))
}

/// [`load`], decoding a local Parquet file as the batches are taken (a scan holds one batch per
/// run, not a whole file); a filtered read (cached pages) or a fetched file is loaded whole.
pub(crate) fn load_lazily(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
    filter: Option<&RowGroupFilter>,
) -> Result<Batches> {
    match filter {
        None => read_lazily(handle, io, file, target),
        Some(_) => Ok(Box::new(
            load(handle, io, file, target, filter)?.into_iter().map(Ok),
        )),
    }
}

/// A data file of a compaction's sorted run: the rows its deletion vector marks are left out, and
/// with an ordinal every row read carries where it sits ([`with_position_column`]).
#[derive(Debug, Clone)]
pub(crate) struct RunFile {
    pub(crate) file: FileRef,
    pub(crate) deleted: Option<roaring::RoaringBitmap>,
    pub(crate) ordinal: Option<u32>,
}

/// Name of the trailing column of positioned reads: `ordinal << 32 | row position in the file`.
const POSITION_COLUMN: &str = "_POSITION";

/// `schema` with the trailing position column of positioned reads.
pub(crate) fn with_position_column(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    fields.push(Arc::new(arrow::datatypes::Field::new(
        POSITION_COLUMN,
        arrow::datatypes::DataType::Int64,
        false,
    )));
    Arc::new(arrow::datatypes::Schema::new(fields))
}

/// Rows `start..` of `file` as read into `batch`: without its deleted rows, and with the position
/// column (in `positioned`) when the file has an ordinal.
fn keep_live_rows(
    batch: RecordBatch,
    file: &RunFile,
    start: u64,
    positioned: &SchemaRef,
) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let batch = match file.ordinal {
        None => batch,
        Some(ordinal) => {
            if start + n as u64 > u32::MAX as u64 {
                return crate::error::UnsupportedSnafu {
                    message: format!(
                        "data file {} has more rows than a deletion vector can address",
                        file.file.path
                    ),
                }
                .fail();
            }
            let at = (ordinal as i64) << 32;
            let positions = arrow::array::Int64Array::from_iter_values(
                (0..n as i64).map(|i| at | (start as i64 + i)),
            );
            let mut cols = batch.columns().to_vec();
            cols.push(Arc::new(positions));
            RecordBatch::try_new(Arc::clone(positioned), cols).context(ArrowSnafu {
                context: format!("{}: adding row positions", file.file.path),
            })?
        }
    };
    let Some(deleted) = &file.deleted else {
        return Ok(batch);
    };
    let keep: arrow::array::BooleanArray = (0..n as u64)
        .map(|i| Some(u32::try_from(start + i).map_or(true, |p| !deleted.contains(p))))
        .collect();
    arrow::compute::filter_record_batch(&batch, &keep).context(ArrowSnafu {
        context: format!("{}: applying its deletion vector", file.file.path),
    })
}

/// A sorted run of [`RunFile`]s read file by file, in `schema` (`positioned` for files with an
/// ordinal).
pub(crate) fn vector_run_stream(
    handle: tokio::runtime::Handle,
    io: crate::io::FileIo,
    schema: SchemaRef,
    positioned: SchemaRef,
    files: Vec<RunFile>,
) -> crate::lsm::merge::stream::RunStream {
    Box::new(files.into_iter().flat_map(move |file| {
        let batches = match load_lazily(&handle, &io, &file.file, &schema, None) {
            Ok(bs) => bs,
            Err(e) => return Box::new(std::iter::once(Err(e))) as Batches,
        };
        let positioned = Arc::clone(&positioned);
        let mut start = 0u64;
        Box::new(batches.map(move |b| {
            let b = b?;
            let at = start;
            start += b.num_rows() as u64;
            keep_live_rows(b, &file, at, &positioned)
        }))
    }))
}

/// Orders two serialized keys by their values.
pub(crate) fn compare_keys(
    a: &[u8],
    b: &[u8],
    types: &[crate::spec::DataType],
) -> std::cmp::Ordering {
    use crate::spec::binary_row::deserialize;
    match (deserialize(a, types), deserialize(b, types)) {
        (Ok(x), Ok(y)) => x
            .iter()
            .zip(&y)
            .map(|(p, q)| p.compare(q).unwrap_or(std::cmp::Ordering::Equal))
            .find(|o| *o != std::cmp::Ordering::Equal)
            .unwrap_or(std::cmp::Ordering::Equal),
        _ => a.cmp(b),
    }
}

/// A bucket's files as sorted runs (newest first) whose files are in key order, for streaming
/// merges.
pub(crate) fn key_ordered_runs(
    files: &[DataFileMeta],
    key_types: &[crate::spec::DataType],
) -> Vec<Vec<DataFileMeta>> {
    crate::lsm::levels::sorted_runs(files)
        .into_iter()
        .map(|run| {
            let mut files = run.files;
            if run.level > 0 {
                files.sort_by(|a, b| compare_keys(&a.min_key, &b.min_key, key_types));
            }
            files
        })
        .collect()
}
