//! Decoding data files: a Parquet file's row groups and columns (by name, as the file's schema
//! version calls them) into batches of a table's layout, cast where the writer chose another
//! representation and null where the file has no such column; ORC and Avro files whole (each
//! file by its own format, named by its extension). Local Parquet files are mapped, not read. Every read strategy (whole files, the page
//! cache, row filters, late materialization) decodes through here; this module knows none of
//! them.

use std::ops::Range;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Int8Type, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use snafu::ResultExt;

pub(crate) use super::conform::{file_names, name_in_file, Decoded};
use super::parts::groups_starting_in;
use super::row_kind::{constant_kind, ConstantColumn};
use crate::error::{ParquetSnafu, Result};
use crate::spec::options::FileFormat;
use crate::spec::VALUE_KIND;
use crate::table::evolution::{FileColumns, FileRef};
use crate::table::key_filter::RowGroupFilter;

/// Whether the data file at `path` is Parquet, which is read by ranges and row groups; files of
/// other formats are read whole (pure).
pub(crate) fn is_parquet(path: &str) -> bool {
    FileFormat::of_file(path) == FileFormat::Parquet
}

/// Batches of one data file.
pub(crate) type Batches = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// Decodes a Parquet data file into batches of `target`: columns are found by name, missing ones
/// read as null, and types are cast where the writer chose another representation (e.g.
/// `large_string`).
pub fn decode(path: &str, bytes: Bytes, target: &SchemaRef) -> Result<Vec<RecordBatch>> {
    decode_filtered(path, bytes, target, None, None, None)
}

/// The bytes of the file behind `path` (relative to a local warehouse's root) when it is a
/// Parquet file there, mapped into memory for the read; none otherwise (then the caller reads
/// through the store, which reports any error).
///
/// Mapped, not read: a read decodes straight from the page cache, without copying each column
/// chunk into a buffer of its own first (a tenth of a scan's time went to that copy). The mapping
/// lives as long as the read's batches refer to it.
pub(crate) fn local_file(io: &crate::io::FileIo, path: &str) -> Option<Bytes> {
    if !is_parquet(path) {
        return None;
    }
    mapped(io, path)
}

/// The bytes of the data file behind `path`: mapped where the warehouse is local (see
/// [`local_file`]), else fetched through the store.
pub(crate) fn file_bytes(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    path: &str,
) -> Result<Bytes> {
    match mapped(io, path) {
        Some(bytes) => Ok(bytes),
        None => handle.block_on(io.read_data(path)),
    }
}

/// The bytes of the local file behind `path`, of any format, mapped into memory (see
/// [`local_file`]); none where the warehouse is not local.
fn mapped(io: &crate::io::FileIo, path: &str) -> Option<Bytes> {
    if path.contains("://") {
        return None;
    }
    let file = io.open_local(path)?;
    // SAFETY: data files are immutable once written and uniquely named: nothing of ours
    // truncates or rewrites one (expiry unlinks it, which leaves a mapping intact). A file cut
    // short by hand under a running read is the one way to a fault here.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    Some(Bytes::from_owner(map))
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
    let format = FileFormat::of_file(path);
    if format == FileFormat::Orc {
        return super::orc_file::decode(path, bytes, target, columns, part);
    }
    if format != FileFormat::Parquet && part.is_some() {
        return crate::error::InternalSnafu {
            message: format!("{path}: a {format:?} data file is read whole, not by parts"),
        }
        .fail();
    }
    if format == FileFormat::Avro {
        let file_name_of = |name: &str| name_in_file(columns, name);
        crate::metrics::metrics()
            .bytes_read
            .inc_by(bytes.len() as u64);
        let out = crate::table::avro_file::decode(&bytes, target, &file_name_of)
            .map_err(|e| e.at(path))?;
        let rows: usize = out.iter().map(|b| b.num_rows()).sum();
        crate::metrics::metrics().rows_read.inc_by(rows as u64);
        return Ok(out);
    }
    decode_parquet(path, bytes, target, filter, columns, part)
}

/// Decodes the Parquet file `reader` reads (whole bytes, or a local file read by ranges) into
/// batches of `target`.
pub(crate) fn decode_parquet<R: parquet::file::reader::ChunkReader + 'static>(
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
/// A Parquet file's footer with the Arrow schema embedded in it. arrow-ipc panics on some damaged
/// embedded schemas (`Type NONE not supported`) instead of failing: that panic is one error
/// naming the file, as any other damage.
pub(crate) fn load_metadata<R: parquet::file::reader::ChunkReader>(
    path: &str,
    reader: &R,
    options: parquet::arrow::arrow_reader::ArrowReaderOptions,
) -> Result<parquet::arrow::arrow_reader::ArrowReaderMetadata> {
    let load = std::panic::AssertUnwindSafe(|| {
        parquet::arrow::arrow_reader::ArrowReaderMetadata::load(reader, options)
    });
    match std::panic::catch_unwind(load) {
        Ok(md) => md.context(ParquetSnafu { path }),
        Err(_) => crate::error::CorruptSnafu {
            path,
            message: "the Arrow schema in its Parquet footer cannot be read",
        }
        .fail(),
    }
}

pub(crate) fn open_parquet<R: parquet::file::reader::ChunkReader + 'static>(
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
    let metadata = load_metadata(path, &reader, options)?;
    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, metadata);
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
pub(crate) fn part_groups(
    md: &parquet::file::metadata::ParquetMetaData,
    part: &Range<u64>,
) -> Vec<usize> {
    groups_starting_in(md.row_groups().iter().map(|g| g.num_rows()), part)
}

/// Decodes what `builder` selects (row groups, rows) into batches of `target` of at most
/// `batch_rows` rows, lazily; `groups` are the row groups it selects (all: none), for the
/// bytes-read metric.
pub(crate) fn decode_built<R: parquet::file::reader::ChunkReader + 'static>(
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

/// The root positions (sorted, each once) of the target's columns in a file of schema `file`.
pub(crate) fn file_roots(
    file: &SchemaRef,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
) -> Vec<usize> {
    let mut roots: Vec<usize> = file_names(file, target, columns)
        .into_iter()
        .flatten()
        .filter_map(|n| file.fields().iter().position(|ff| ff.name() == &n))
        .collect();
    roots.sort_unstable();
    roots.dedup();
    roots
}

/// [`decode_built`] without counting the bytes read (the caller counts them).
pub(crate) fn decode_projected<R: parquet::file::reader::ChunkReader + 'static>(
    path: &str,
    builder: ParquetRecordBatchReaderBuilder<R>,
    batch_rows: usize,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
) -> Result<Decoded> {
    let names = file_names(builder.schema(), target, columns);
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
    Ok(Decoded::new(path, Box::new(reader), target, names, kind))
}

/// The compressed bytes of the column chunks of `roots` (root column positions) in `groups` (all:
/// none): what a projected read fetches.
pub(crate) fn projected_bytes(
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

/// One file's batches, decoded as they are taken where the file is a local Parquet file (a scan
/// holds one batch per run, not a whole file); otherwise fetched and decoded whole.
pub(crate) fn read_lazily(
    handle: &tokio::runtime::Handle,
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
) -> Result<Batches> {
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
    // Mapped where local: a fresh copy of a whole file cost more in page faults than decoding it.
    let bytes = file_bytes(handle, io, &file.path)?;
    if FileFormat::of_file(&file.path) == FileFormat::Orc {
        let decoded = super::orc_file::open(
            &file.path,
            bytes,
            target,
            file.columns.as_ref(),
            file.part.as_ref(),
        )?;
        return Ok(Box::new(decoded));
    }
    let batches = decode_filtered(
        &file.path,
        bytes,
        target,
        None,
        file.columns.as_ref(),
        file.part.as_ref(),
    )?;
    Ok(Box::new(batches.into_iter().map(Ok)))
}
