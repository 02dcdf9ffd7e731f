//! Data files: encoding one sorted run (or a chunk of appended rows) as Parquet (Avro for a
//! postpone bucket's files, see `avro_file`) with its `DataFileMeta` statistics, and decoding
//! files back into batches of an expected schema.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type, Int8Type, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use snafu::ResultExt;

use super::evolution::{FileColumns, FileRef};
pub(crate) use super::key_filter::RowGroupFilter;
use crate::error::{ArrowSnafu, ParquetSnafu, Result};
use crate::schema::layout::{datum_at, TableLayout};
use crate::spec::binary_row::{self, Datum};
pub(crate) use parquet_writer::{encode_parquet, EXACT_BOUNDS_KEY, ROW_GROUP_ROWS};

mod parquet_writer;
mod row_kind;
use crate::spec::manifest::{DataFileMeta, FileSource, SimpleStats};
use crate::spec::VALUE_KIND;
use row_kind::constant_kind;
pub(crate) use row_kind::ConstantColumn;

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
    let buf = if file_name.ends_with(AVRO_SUFFIX) {
        super::avro_file::encode(layout, batch).map_err(|message| {
            crate::error::InternalSnafu {
                message: format!("writing the Avro data file {file_name}: {message}"),
            }
            .build()
        })?
    } else {
        encode_parquet(batch, &file_name)?
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

/// The suffix of Avro data files (Paimon's postpone buckets); every other data file is Parquet.
pub(crate) const AVRO_SUFFIX: &str = ".avro";

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

/// Decodes a Parquet data file into batches of `target`: columns are found by name, missing ones
/// read as null, and types are cast where the writer chose another representation (e.g.
/// `large_string`).
pub fn decode(path: &str, bytes: Bytes, target: &SchemaRef) -> Result<Vec<RecordBatch>> {
    decode_filtered(path, bytes, target, None, None, None)
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
    let fetch = || handle.block_on(io.read_data(&file.path));
    let cacheable = filter.filter(|_| {
        !file.path.ends_with(AVRO_SUFFIX) && io.caches_metadata() && file.part.is_none()
    });
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

/// The bytes of the file behind `path` (relative to a local warehouse's root) when it is a
/// Parquet file there, mapped into memory for the read; none otherwise (then the caller reads
/// through the store, which reports any error).
///
/// Mapped, not read: a read decodes straight from the page cache, without copying each column
/// chunk into a buffer of its own first (a tenth of a scan's time went to that copy). The mapping
/// lives as long as the read's batches refer to it.
pub(super) fn local_file(io: &crate::io::FileIo, path: &str) -> Option<Bytes> {
    if path.ends_with(AVRO_SUFFIX) || path.contains("://") {
        return None;
    }
    let file = io.open_local(path)?;
    // SAFETY: data files are immutable once written and uniquely named: nothing of ours
    // truncates or rewrites one (expiry unlinks it, which leaves a mapping intact). A file cut
    // short by hand under a running read is the one way to a fault here.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    Some(Bytes::from_owner(map))
}

/// The name a target column has in a file written under another schema version (none: the file
/// has no such column, which reads as NULL).
pub(super) fn name_in_file(columns: Option<&FileColumns>, name: &str) -> Option<String> {
    match columns.and_then(|c| c.get(name)) {
        Some(mapped) => mapped.clone(),
        None => Some(name.to_string()),
    }
}

/// [`decode`], reading only the row groups `filter` keeps (and of those, the ones in `part`).
pub(crate) fn decode_filtered(
    path: &str,
    bytes: Bytes,
    target: &SchemaRef,
    filter: Option<&RowGroupFilter>,
    columns: Option<&FileColumns>,
    part: Option<&Range<u64>>,
) -> Result<Vec<RecordBatch>> {
    if path.ends_with(AVRO_SUFFIX) {
        if part.is_some() {
            return crate::error::InternalSnafu {
                message: format!("{path}: an Avro data file is read whole, not by parts"),
            }
            .fail();
        }
        let file_name_of = |name: &str| name_in_file(columns, name);
        crate::metrics::metrics()
            .bytes_read
            .inc_by(bytes.len() as u64);
        let out = super::avro_file::decode(&bytes, target, &file_name_of).map_err(|message| {
            crate::error::CorruptSnafu {
                path: path.to_string(),
                message,
            }
            .build()
        })?;
        let rows: usize = out.iter().map(|b| b.num_rows()).sum();
        crate::metrics::metrics().rows_read.inc_by(rows as u64);
        return Ok(out);
    }
    decode_parquet(path, bytes, target, filter, columns, part)
}

/// Decodes the Parquet file `reader` reads (whole bytes, or a local file read by ranges) into
/// batches of `target`.
fn decode_parquet<R: parquet::file::reader::ChunkReader + 'static>(
    path: &str,
    reader: R,
    target: &SchemaRef,
    filter: Option<&RowGroupFilter>,
    columns: Option<&FileColumns>,
    part: Option<&Range<u64>>,
) -> Result<Vec<RecordBatch>> {
    open_parquet(path, reader, target, filter, columns, part)?.collect()
}

/// [`decode_parquet`], one batch at a time: what the file's row groups decode into is held only
/// until the caller takes it.
pub(super) fn open_parquet<R: parquet::file::reader::ChunkReader + 'static>(
    path: &str,
    reader: R,
    target: &SchemaRef,
    filter: Option<&RowGroupFilter>,
    columns: Option<&FileColumns>,
    part: Option<&Range<u64>>,
) -> Result<Decoded> {
    // The page index is read only when pages may be skipped.
    let options = parquet::arrow::arrow_reader::ArrowReaderOptions::new().with_page_index_policy(
        parquet::file::metadata::PageIndexPolicy::from(filter.is_some()),
    );
    let mut builder = ParquetRecordBatchReaderBuilder::try_new_with_options(reader, options)
        .context(ParquetSnafu { path })?;
    let mut groups = part.map(|p| part_groups(builder.metadata(), p));
    if let Some(f) = filter {
        if let Some(mut selected) = f.select(builder.metadata()) {
            if let Some(in_part) = &groups {
                selected.retain(|g| in_part.contains(g));
            }
            if let Some(rows) = f.pages(builder.metadata(), &selected) {
                builder = builder.with_row_selection(rows);
            }
            groups = Some(selected);
        }
    }
    if let Some(g) = &groups {
        builder = builder.with_row_groups(g.clone());
    }
    decode_built(path, builder, 64 * 1024, target, groups.as_deref(), columns)
}

/// The row groups of a file's part: those whose first row is in `part`. Pure.
pub(super) fn part_groups(
    md: &parquet::file::metadata::ParquetMetaData,
    part: &Range<u64>,
) -> Vec<usize> {
    groups_starting_in(md.row_groups().iter().map(|g| g.num_rows()), part)
}

/// The positions of the groups (of these row counts, in file order) whose first row is in
/// `part`. Pure.
fn groups_starting_in(rows: impl Iterator<Item = i64>, part: &Range<u64>) -> Vec<usize> {
    let mut first = 0u64;
    let mut out = Vec::new();
    for (g, n) in rows.enumerate() {
        if part.contains(&first) {
            out.push(g);
        }
        first += n.max(0) as u64;
    }
    out
}

/// Decodes what `builder` selects (row groups, rows) into batches of `target` of at most
/// `batch_rows` rows, lazily; `groups` are the row groups it selects (all: none), for the
/// bytes-read metric.
pub(super) fn decode_built<R: parquet::file::reader::ChunkReader + 'static>(
    path: &str,
    builder: ParquetRecordBatchReaderBuilder<R>,
    batch_rows: usize,
    target: &SchemaRef,
    groups: Option<&[usize]>,
    columns: Option<&FileColumns>,
) -> Result<Decoded> {
    crate::metrics::metrics().bytes_read.inc_by(projected_bytes(
        builder.metadata(),
        &file_roots(builder.schema(), target, columns),
        groups,
    ));
    decode_projected(path, builder, batch_rows, target, columns)
}

/// The root positions (sorted) of the target's columns in a file of schema `file`.
pub(super) fn file_roots(
    file: &SchemaRef,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
) -> Vec<usize> {
    let mut roots: Vec<usize> = target
        .fields()
        .iter()
        .filter_map(|f| name_in_file(columns, f.name()))
        .filter_map(|n| file.fields().iter().position(|ff| ff.name() == &n))
        .collect();
    roots.sort_unstable();
    roots
}

/// [`decode_built`] without counting the bytes read (the caller counts them).
pub(super) fn decode_projected<R: parquet::file::reader::ChunkReader + 'static>(
    path: &str,
    builder: ParquetRecordBatchReaderBuilder<R>,
    batch_rows: usize,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
) -> Result<Decoded> {
    let names: Vec<Option<String>> = target
        .fields()
        .iter()
        .map(|f| name_in_file(columns, f.name()))
        .collect();
    let mut roots = file_roots(builder.schema(), target, columns);
    // A row kind that every row holds is filled in, not decoded.
    let kind = target
        .fields()
        .iter()
        .position(|f| f.name() == VALUE_KIND && f.data_type() == &DataType::Int8)
        .and_then(|at| {
            let name = names[at].as_deref()?;
            let leaf = builder
                .parquet_schema()
                .columns()
                .iter()
                .position(|c| c.path().parts() == [name])?;
            let value = constant_kind(builder.metadata(), leaf)?;
            let root = builder.schema().index_of(name).ok()?;
            roots.retain(|&r| r != root);
            Some((at, ConstantColumn::<Int8Type>::new(value)))
        });
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(batch_rows)
        .build()
        .context(ParquetSnafu { path })?;
    Ok(Decoded {
        path: path.to_string(),
        reader,
        target: Arc::clone(target),
        names,
        kind,
    })
}

/// A Parquet file's batches in a table's layout, decoded as they are taken: columns are found by
/// their name in the file, cast where the file chose another type, and null where it has none.
pub(crate) struct Decoded {
    path: String,
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    target: SchemaRef,
    /// Each target column's name in the file (none: not in the file).
    names: Vec<Option<String>>,
    /// The row kind and its target position, where the file holds one value in every row.
    kind: Option<(usize, ConstantColumn<Int8Type>)>,
}

impl Decoded {
    fn conform(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let mut kind = self.kind.as_mut().map(|(at, k)| (*at, k.column(n)));
        let columns = self
            .target
            .fields()
            .iter()
            .zip(&self.names)
            .enumerate()
            .map(|(i, (f, name))| match kind.take_if(|(at, _)| *at == i) {
                Some((_, kinds)) => Ok(kinds),
                None => match name.as_deref().and_then(|n| batch.column_by_name(n)) {
                    Some(c) if c.data_type() == f.data_type() => Ok(Arc::clone(c)),
                    Some(c) => cast(c, f.data_type()).context(ArrowSnafu {
                        context: format!("{}: column {}", self.path, f.name()),
                    }),
                    None => Ok(new_null_array(f.data_type(), n)),
                },
            })
            .collect::<Result<Vec<_>>>()?;
        let opts = arrow::array::RecordBatchOptions::new().with_row_count(Some(n));
        let batch = RecordBatch::try_new_with_options(Arc::clone(&self.target), columns, &opts)
            .context(ArrowSnafu {
                context: format!("{}: does not match the table schema", self.path),
            })?;
        crate::metrics::metrics().rows_read.inc_by(n as u64);
        Ok(batch)
    }
}

impl Iterator for Decoded {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        let batch = self.reader.next()?.context(ArrowSnafu {
            context: format!("reading {}", self.path),
        });
        Some(batch.and_then(|b| self.conform(b)))
    }
}

/// The compressed bytes of the column chunks of `roots` (root column positions) in `groups` (all:
/// none): what a projected read fetches.
pub(super) fn projected_bytes(
    md: &parquet::file::metadata::ParquetMetaData,
    roots: &[usize],
    groups: Option<&[usize]>,
) -> u64 {
    let schema = md.file_metadata().schema_descr();
    let groups: Vec<usize> = match groups {
        Some(g) => g.to_vec(),
        None => (0..md.num_row_groups()).collect(),
    };
    let mut total = 0u64;
    for g in groups {
        let rg = md.row_group(g);
        for (leaf, chunk) in rg.columns().iter().enumerate() {
            if roots.contains(&schema.get_column_root_idx(leaf)) {
                total += chunk.compressed_size().max(0) as u64;
            }
        }
    }
    total
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

/// Batches of one data file.
pub(super) type Batches = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// [`load`], decoding a local Parquet file as the batches are taken (a scan holds one batch per
/// run, not a whole file); a filtered read (cached pages) or a fetched file is loaded whole.
pub(crate) fn load_lazily(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
    filter: Option<&RowGroupFilter>,
) -> Result<Batches> {
    if filter.is_none() {
        if let Some(local) = local_file(io, &file.path) {
            let decoded = open_parquet(
                &file.path,
                local,
                target,
                None,
                file.columns.as_ref(),
                file.part.as_ref(),
            )?;
            return Ok(Box::new(decoded));
        }
    }
    Ok(Box::new(
        load(handle, io, file, target, filter)?.into_iter().map(Ok),
    ))
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
