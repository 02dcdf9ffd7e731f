//! Decoded pages of point reads, shared by every read of the process: a primary-key lookup
//! decodes the one page of each file its key can be in (Parquet pages, zstd) and keeps it, so the
//! next lookup in that page only compares keys. Data files are immutable and uniquely named, so a
//! page never goes stale; entries are keyed by storage handle ([`crate::io::FileIo::instance`]),
//! path, and what the page was decoded into (the target columns as named in the file, and their
//! types).
//!
//! Two caches, both on only while the metadata cache is ([`crate::io::FileIo::caches_metadata`]):
//! - each file's *key pages*: the row range and the key column's bounds of every page, from the
//!   page index (a few dozen bytes per page), so a lookup finds its pages without opening the file;
//! - the decoded pages themselves, weighed by their memory ([`PAGE_BYTES`] in all).
//!
//! Only reads that select at most [`MAX_PAGES`] pages of a file go through here; scans read as
//! before and leave the caches alone.

use std::sync::{Arc, OnceLock};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::reader::ChunkReader;

use super::data_file::decode::{decode_built, name_in_file};
use super::evolution::FileRef;
use super::key_filter::{KeyPage, RowGroupFilter};
use crate::error::Result;

/// Pages one read may take from the cache (a point lookup needs one, a page boundary two).
pub(crate) const MAX_PAGES: usize = 2;

/// Memory the decoded pages may take, in all.
pub(crate) const PAGE_BYTES: u64 = 256 << 20;

/// The pages of one file by one key column; `None` when the file has no page index for it.
type KeyPages = Option<Arc<Vec<KeyPage>>>;

fn key_pages() -> &'static moka::sync::Cache<String, KeyPages> {
    static CACHE: OnceLock<moka::sync::Cache<String, KeyPages>> = OnceLock::new();
    CACHE.get_or_init(|| {
        moka::sync::Cache::builder()
            .weigher(|k: &String, v: &KeyPages| {
                let pages = v.as_ref().map_or(0, |p| p.len());
                u32::try_from(k.len() + 64 * pages).unwrap_or(u32::MAX)
            })
            .max_capacity(32 << 20)
            .build()
    })
}

fn decoded_pages() -> &'static moka::sync::Cache<String, Arc<Vec<RecordBatch>>> {
    static CACHE: OnceLock<moka::sync::Cache<String, Arc<Vec<RecordBatch>>>> = OnceLock::new();
    CACHE.get_or_init(|| {
        moka::sync::Cache::builder()
            .weigher(|k: &String, v: &Arc<Vec<RecordBatch>>| {
                let bytes: usize = v.iter().map(|b| b.get_array_memory_size()).sum();
                u32::try_from(k.len() + bytes).unwrap_or(u32::MAX)
            })
            .max_capacity(PAGE_BYTES)
            .build()
    })
}

/// The selection of rows `[first, first + rows)` of a file of `total` rows. Pure.
fn selection(first: usize, rows: usize, total: usize) -> RowSelection {
    let mut s = Vec::with_capacity(3);
    if first > 0 {
        s.push(RowSelector::skip(first));
    }
    s.push(RowSelector::select(rows));
    let rest = total.saturating_sub(first + rows);
    if rest > 0 {
        s.push(RowSelector::skip(rest));
    }
    RowSelection::from(s)
}

/// What `target` decodes from a file (its columns as named in the file, with their types): part
/// of a decoded page's key.
fn decoded_as(file: &FileRef, target: &SchemaRef) -> String {
    let mut s = String::new();
    for f in target.fields() {
        let name = name_in_file(file.columns.as_ref(), f.name());
        s.push_str(&format!("{}={:?}:{};", f.name(), name, f.data_type()));
    }
    s
}

/// The rows of the pages of `file` that may hold a key `filter` keeps, decoded into `target`,
/// from the cache or decoded now (and kept); `None` when this read is not one the cache serves
/// (the cache is off, the file has no page index, or more than [`MAX_PAGES`] pages qualify).
/// `open` opens the file for reading (called at most once).
pub(crate) fn read<R: ChunkReader + Clone + 'static>(
    io: &crate::io::FileIo,
    file: &FileRef,
    target: &SchemaRef,
    filter: &RowGroupFilter,
    open: impl FnOnce() -> Result<R>,
) -> Result<Option<Vec<RecordBatch>>> {
    if !io.caches_metadata() {
        return Ok(None);
    }
    let file_key = format!("{}\u{0}{}", io.instance(), file.path);
    let pages_key = format!("{file_key}\u{0}{}", filter.column);
    // The file, opened with its page index, once at most.
    let mut slot: Option<(R, ArrowReaderMetadata)> = None;
    let mut open = Some(open);
    let pages = match key_pages().get(&pages_key) {
        Some(p) => p,
        None => {
            let (_, md) = opened(&mut slot, &mut open, &file.path)?;
            let md = md.metadata();
            let p = filter
                .key_pages(md, &(0..md.num_row_groups()).collect::<Vec<_>>())
                .map(Arc::new);
            key_pages().insert(pages_key, p.clone());
            p
        }
    };
    let Some(pages) = pages else {
        return Ok(None);
    };
    let wanted: Vec<&KeyPage> = pages.iter().filter(|p| filter.wants(p)).collect();
    if wanted.len() > MAX_PAGES {
        return Ok(None);
    }
    let total: usize = pages.iter().map(|p| p.rows).sum();
    let decoded = decoded_as(file, target);
    let mut out = Vec::new();
    for page in wanted {
        let key = format!("{file_key}\u{0}{decoded}\u{0}{}", page.first_row);
        if let Some(hit) = decoded_pages().get(&key) {
            out.extend(hit.iter().cloned());
            continue;
        }
        let (reader, md) = opened(&mut slot, &mut open, &file.path)?;
        let groups = filter.select(md.metadata());
        let builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(reader.clone(), md.clone())
                .with_row_selection(selection(page.first_row, page.rows, total));
        // Batches of the page's rows: buffers no larger than the page (the cache weighs them).
        let batches = decode_built(
            &file.path,
            builder,
            page.rows.max(1),
            target,
            groups.as_deref(),
            file.columns.as_ref(),
        )?
        .collect::<Result<Vec<_>>>()?;
        decoded_pages().insert(key, Arc::new(batches.clone()));
        out.extend(batches);
    }
    Ok(Some(out))
}

/// The file in `slot`, opened (with its page index) by `open` on first use.
fn opened<'a, R: ChunkReader, F: FnOnce() -> Result<R>>(
    slot: &'a mut Option<(R, ArrowReaderMetadata)>,
    open: &mut Option<F>,
    path: &str,
) -> Result<&'a (R, ArrowReaderMetadata)> {
    let internal = || {
        crate::error::InternalSnafu {
            message: format!("{path}: opened twice for one read"),
        }
        .build()
    };
    if slot.is_none() {
        let reader = open.take().ok_or_else(internal)?()?;
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let md = super::data_file::decode::load_metadata(path, &reader, options)?;
        *slot = Some((reader, md));
    }
    slot.as_ref().ok_or_else(internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::binary_row::Datum;

    fn wanted<'a>(pages: &'a [KeyPage], filter: &RowGroupFilter) -> Vec<&'a KeyPage> {
        pages.iter().filter(|p| filter.wants(p)).collect()
    }

    fn page(first_row: usize, rows: usize, min: i64, max: i64) -> KeyPage {
        KeyPage {
            first_row,
            rows,
            bounds: Some((Datum::BigInt(min), Datum::BigInt(max))),
        }
    }

    fn point(k: i64) -> RowGroupFilter {
        RowGroupFilter {
            column: "_KEY_id".into(),
            ty: crate::spec::DataType::new(crate::spec::TypeRoot::BigInt, false),
            range: crate::table::scan::KeyRange::new(
                Some((Datum::BigInt(k), true)),
                Some((Datum::BigInt(k), true)),
            ),
        }
    }

    #[test]
    fn a_key_wants_the_pages_whose_bounds_hold_it() {
        let pages = vec![page(0, 10, 0, 9), page(10, 10, 9, 20), page(20, 5, 21, 30)];
        let firsts = |k| -> Vec<usize> {
            wanted(&pages, &point(k))
                .iter()
                .map(|p| p.first_row)
                .collect()
        };
        assert_eq!(firsts(5), vec![0]);
        assert_eq!(firsts(9), vec![0, 10], "a key on a page boundary");
        assert_eq!(firsts(25), vec![20]);
        assert!(firsts(31).is_empty());
        let unbounded = vec![KeyPage {
            first_row: 0,
            rows: 3,
            bounds: None,
        }];
        assert_eq!(wanted(&unbounded, &point(1)).len(), 1);
    }

    #[test]
    fn a_page_is_selected_by_its_rows() {
        let rows = |s: RowSelection| -> Vec<(bool, usize)> {
            s.iter().map(|r| (r.skip, r.row_count)).collect()
        };
        assert_eq!(rows(selection(0, 10, 25)), vec![(false, 10), (true, 15)]);
        assert_eq!(
            rows(selection(10, 10, 25)),
            vec![(true, 10), (false, 10), (true, 5)]
        );
        assert_eq!(rows(selection(20, 5, 25)), vec![(true, 20), (false, 5)]);
    }
}
