//! The lookup index of a primary-key table's levels above 0 (Paimon's lookup levels): where a
//! compaction that moves level 0 up (the `lookup` changelog producer, deletion vectors) finds the
//! old copies of the keys it rewrites without reading the levels above whole.
//!
//! Each data file looked up gets a *lookup file*: the file's rows decoded into the table's current
//! file layout, in the data file's order (sorted by key), so a row's position is its position in
//! the data file (what a deletion vector marks). A lookup file is an uncompressed Arrow IPC file
//! on local disk, mapped into memory and read in place: a lookup touches only the pages its keys
//! are in, and the operating system's page cache keeps what is used often. The files are bounded
//! in all ([`LookupLimits::disk_bytes`]); an index in memory (moka, weighed by file size) decides
//! which stay and deletes the others (a mapping in use stays valid until its last reader is done).
//!
//! What is not kept is rebuilt from the data file. Data files are immutable and uniquely named, so a
//! lookup file never goes stale; lookup files are keyed by storage handle, path and the layout the
//! rows were decoded into (a schema change makes new ones).
//!
//! A lookup takes the sorted, distinct keys of the compaction's level-0 inputs and gives each
//! file's rows with one of those keys: one binary search per key, `O(keys × log rows)`, so the
//! cost of a commit follows what it writes, not the size of the table.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arrow::array::{ArrayRef, Int64Array, RecordBatch, UInt32Array};
use arrow::buffer::Buffer;
use arrow::compute::SortOptions;
use arrow::datatypes::{ArrowPrimitiveType, SchemaRef};
use arrow::error::ArrowError;
use arrow::row::{RowConverter, SortField};
use sha2::Digest;
use snafu::ResultExt;

use super::data_file::RunFile;
use super::evolution::FileRef;
use super::key_filter::gallop;
use crate::error::{ArrowSnafu, LocalIoSnafu, Result};
use crate::lsm::merge::stream::RunStream;

/// Where lookup files are kept and how much of them (`[storage] lookup_dir`, `lookup_disk_mb`).
#[derive(Debug, Clone)]
pub struct LookupLimits {
    /// The directory under which this process keeps its lookup files (in `lookup-PID`); `None`:
    /// `tidelake-lookup` under the system's temporary directory.
    pub dir: Option<PathBuf>,
    pub disk_bytes: u64,
}

/// Default bound of the lookup files of a process.
pub const DEFAULT_LOOKUP_DISK_MB: u64 = 8192;

impl Default for LookupLimits {
    fn default() -> Self {
        Self {
            dir: None,
            disk_bytes: DEFAULT_LOOKUP_DISK_MB << 20,
        }
    }
}

static LIMITS: OnceLock<LookupLimits> = OnceLock::new();

/// Sets where the process keeps lookup files; only the first call counts, and only before the
/// first lookup (a server calls it at start). `false` when it came too late.
pub fn configure(limits: LookupLimits) -> bool {
    LIMITS.set(limits).is_ok()
}

/// The directory local files of the process go under (`[storage] lookup_dir`, or
/// `tidelake-lookup` under the system's temporary directory): lookup files and key indexes.
pub(crate) fn local_dir() -> PathBuf {
    let l = LIMITS.get_or_init(LookupLimits::default);
    match &l.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join("tidelake-lookup"),
    }
}

/// The process's lookup files: its directory and the index of what is kept there.
struct Store {
    dir: PathBuf,
    files: moka::sync::Cache<String, Kept>,
}

/// A kept lookup file: its rows (read in place) and its size on disk.
#[derive(Clone)]
struct Kept {
    rows: Arc<RecordBatch>,
    bytes: u64,
}

/// The store, opened at first use (its directory made and emptied, those of processes that are
/// gone removed); `None` when the directory cannot be made (lookups then rebuild every time).
fn store() -> Option<&'static Store> {
    static STORE: OnceLock<Option<Store>> = OnceLock::new();
    STORE
        .get_or_init(|| {
            let l = LIMITS.get_or_init(LookupLimits::default);
            let parent = local_dir();
            let dir = parent.join(format!("lookup-{}", std::process::id()));
            match Store::open(&parent, &dir, l.disk_bytes) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "no lookup files: compactions read the levels they look keys up in");
                    None
                }
            }
        })
        .as_ref()
}

// The store's own directory: made, emptied and written by this process only, on the blocking
// pool (compactions run there).
#[allow(clippy::disallowed_methods)]
impl Store {
    fn open(parent: &Path, dir: &Path, capacity: u64) -> std::io::Result<Self> {
        if let Ok(entries) = std::fs::read_dir(parent) {
            for e in entries.flatten() {
                let alive = |pid: u32| Path::new(&format!("/proc/{pid}")).exists();
                if left_over(&e.file_name().to_string_lossy(), alive) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(parent)?;
        // Lookup files hold table rows: only this user may list or read them (the parent may be
        // a shared temporary directory).
        {
            use std::os::unix::fs::{DirBuilderExt, MetadataExt};
            std::fs::DirBuilder::new().mode(0o700).create(dir)?;
            // A parent of another user (or a link) could have our directory swapped for theirs.
            let (p, d) = (
                std::fs::symlink_metadata(parent)?,
                std::fs::symlink_metadata(dir)?,
            );
            if p.file_type().is_symlink() || p.uid() != d.uid() {
                let _ = std::fs::remove_dir(dir);
                return Err(std::io::Error::other(format!(
                    "{} is a link or belongs to another user",
                    parent.display()
                )));
            }
        }
        let evict_dir = dir.to_path_buf();
        let files = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .weigher(|_: &String, kept: &Kept| u32::try_from(kept.bytes).unwrap_or(u32::MAX))
            .eviction_listener(move |key: Arc<String>, _, cause| {
                // A replaced entry's file is the new copy (same name): keep it.
                if cause != moka::notification::RemovalCause::Replaced {
                    let _ = std::fs::remove_file(evict_dir.join(key.as_str()));
                }
            })
            .build();
        Ok(Self {
            dir: dir.to_path_buf(),
            files,
        })
    }

    /// Writes `rows` as the lookup file `key` (a temporary file, then renamed) and maps it.
    fn keep(&self, key: &str, rows: &RecordBatch) -> Result<Arc<RecordBatch>> {
        let path = self.dir.join(key);
        let shown = path.display().to_string();
        let bytes = to_ipc(rows).context(ArrowSnafu {
            context: format!("encoding the lookup file {shown}"),
        })?;
        let tmp = self
            .dir
            .join(format!(".{key}.{}.tmp", uuid::Uuid::new_v4().simple()));
        let written = std::fs::write(&tmp, &bytes).and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).context(LocalIoSnafu { path: shown });
        }
        let file = std::fs::File::open(&path).context(LocalIoSnafu { path: &shown })?;
        // SAFETY: the file is this process's own: written whole above under a fresh name in a
        // directory only this process uses, and never written again. Deleting it (an eviction)
        // leaves the mapping valid until its last reader drops it.
        let map = unsafe { memmap2::Mmap::map(&file) }.context(LocalIoSnafu { path: &shown })?;
        let mapped = Arc::new(
            from_ipc(
                Buffer::from(bytes::Bytes::from_owner(map)),
                rows.schema_ref(),
            )
            .context(ArrowSnafu {
                context: format!("mapping the lookup file {shown}"),
            })?,
        );
        self.files.insert(
            key.to_string(),
            Kept {
                rows: Arc::clone(&mapped),
                bytes: bytes.len() as u64,
            },
        );
        Ok(mapped)
    }
}

/// Whether `name` is the lookup directory of a process that is gone. Pure apart from `alive`.
fn left_over(name: &str, alive: impl Fn(u32) -> bool) -> bool {
    name.strip_prefix("lookup-")
        .and_then(|pid| pid.parse::<u32>().ok())
        .is_some_and(|pid| pid != std::process::id() && !alive(pid))
}

/// The sorted, distinct keys (the first `key_count` columns) of `batches`, as key columns.
pub(crate) fn distinct_keys(batches: &[RecordBatch], key_count: usize) -> Result<Vec<ArrayRef>> {
    let Some(first) = batches.first() else {
        return Ok(vec![]);
    };
    let context = || "sorting the keys to look up".to_string();
    let columns: Vec<ArrayRef> = (0..key_count)
        .map(|c| {
            let parts: Vec<&dyn arrow::array::Array> =
                batches.iter().map(|b| b.column(c).as_ref()).collect();
            arrow::compute::concat(&parts)
        })
        .collect::<std::result::Result<_, _>>()
        .with_context(|_| ArrowSnafu { context: context() })?;
    let conv = RowConverter::new(
        first.columns()[..key_count]
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect(),
    )
    .with_context(|_| ArrowSnafu { context: context() })?;
    let rows = conv
        .convert_columns(&columns)
        .with_context(|_| ArrowSnafu { context: context() })?;
    let mut order: Vec<u32> = (0..rows.num_rows() as u32).collect();
    order.sort_unstable_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize)));
    order.dedup_by(|a, b| rows.row(*a as usize) == rows.row(*b as usize));
    let indices = UInt32Array::from(order);
    columns
        .iter()
        .map(|c| arrow::compute::take(c.as_ref(), &indices, None))
        .collect::<std::result::Result<_, _>>()
        .with_context(|_| ArrowSnafu { context: context() })
}

/// The rows of `file` (sorted by its first `keys.len()` columns, each key once) whose key is one of
/// `keys` (sorted, distinct), in order: a galloping search per key from where the last one ended
/// ([`matching_by`]), on the values themselves for one integer or string key column.
pub(crate) fn matching_rows(file: &RecordBatch, keys: &[ArrayRef]) -> Result<Vec<u32>> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DataType, Int32Type, Int64Type};
    let (n, wanted) = (file.num_rows(), keys.first().map_or(0, |k| k.len()));
    if n == 0 || wanted == 0 {
        return Ok(vec![]);
    }
    fn values<T: ArrowPrimitiveType>(rows: &ArrayRef, keys: &ArrayRef) -> Vec<u32>
    where
        T::Native: Ord,
    {
        let (rows, keys) = (
            rows.as_primitive::<T>().values(),
            keys.as_primitive::<T>().values(),
        );
        matching_by(rows.len(), keys.len(), |r, k| rows[r].cmp(&keys[k]))
    }
    if let [key] = keys {
        let col = file.column(0);
        if col.null_count() == 0 && key.null_count() == 0 && col.data_type() == key.data_type() {
            match col.data_type() {
                DataType::Int64 => return Ok(values::<Int64Type>(col, key)),
                DataType::Int32 => return Ok(values::<Int32Type>(col, key)),
                DataType::Utf8 => {
                    let (rows, keys) = (col.as_string::<i32>(), key.as_string::<i32>());
                    return Ok(matching_by(n, wanted, |r, k| {
                        rows.value(r).cmp(keys.value(k))
                    }));
                }
                _ => {}
            }
        }
    }
    let comparators = keys
        .iter()
        .enumerate()
        .map(|(c, k)| {
            arrow::array::make_comparator(
                file.column(c).as_ref(),
                k.as_ref(),
                SortOptions::default(),
            )
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .context(ArrowSnafu {
            context: "comparing keys to look up",
        })?;
    Ok(matching_by(n, wanted, |row, key| {
        comparators
            .iter()
            .map(|c| c(row, key))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    }))
}

/// The rows (of `n`, sorted) equal by `order(row, key)` to one of `wanted` keys (sorted,
/// distinct), in order. Pure.
fn matching_by(
    n: usize,
    wanted: usize,
    order: impl Fn(usize, usize) -> std::cmp::Ordering,
) -> Vec<u32> {
    let mut found = Vec::new();
    let mut from = 0usize;
    for key in 0..wanted {
        let lo = from + gallop(from..n, |row| order(row, key).is_lt());
        if lo == n {
            break;
        }
        if order(lo, key).is_eq() {
            found.push(lo as u32);
            from = lo + 1;
        } else {
            from = lo;
        }
    }
    found
}

/// Lookup files of one compaction: what they were decoded into and from which storage.
#[derive(Clone)]
pub(crate) struct LookupSource {
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) io: crate::io::FileIo,
    /// The table's file layout (every row is decoded into it).
    pub(crate) schema: SchemaRef,
    /// `schema` with the position column ([`super::data_file::with_position_column`]).
    pub(crate) positioned: SchemaRef,
}

impl LookupSource {
    /// The lookup file of `file`: kept, or built from the data file (and kept).
    fn rows(&self, file: &RunFile) -> Result<Arc<RecordBatch>> {
        let key = lookup_key(&self.io, &file.file, &self.schema);
        let m = crate::metrics::metrics();
        let store = store();
        if let Some(hit) = store.and_then(|s| s.files.get(&key)) {
            m.lookup_files.get_or_create(&[("source", "kept")]).inc();
            return Ok(hit.rows);
        }
        m.lookup_files.get_or_create(&[("source", "built")]).inc();
        let batches =
            super::data_file::load(&self.handle, &self.io, &file.file, &self.schema, None)?;
        let rows = arrow::compute::concat_batches(&self.schema, &batches).with_context(|_| {
            ArrowSnafu {
                context: format!("{}: building its lookup file", file.file.path),
            }
        })?;
        if let Some(s) = store {
            match s.keep(&key, &rows) {
                Ok(mapped) => return Ok(mapped),
                Err(e) => {
                    tracing::warn!(path = %file.file.path, error = %e, "lookup file not kept")
                }
            }
        }
        Ok(Arc::new(rows))
    }

    /// `file`'s live rows whose key is one of `keys`, with the position column when the file has
    /// an ordinal (the rows [`super::data_file::vector_run_stream`] would give, but only those).
    fn matches(&self, file: &RunFile, keys: &[ArrayRef]) -> Result<RecordBatch> {
        let rows = self.rows(file)?;
        let mut found = matching_rows(&rows, keys)?;
        if let Some(deleted) = &file.deleted {
            found.retain(|p| !deleted.contains(*p));
        }
        let context = || format!("{}: taking the rows looked up", file.file.path);
        let indices = UInt32Array::from(found);
        let mut columns: Vec<ArrayRef> = rows
            .columns()
            .iter()
            .map(|c| arrow::compute::take(c.as_ref(), &indices, None))
            .collect::<std::result::Result<_, _>>()
            .with_context(|_| ArrowSnafu { context: context() })?;
        let schema = match file.ordinal {
            None => Arc::clone(&self.schema),
            Some(ordinal) => {
                let at = (ordinal as i64) << 32;
                columns.push(Arc::new(Int64Array::from_iter_values(
                    indices.values().iter().map(|p| at | *p as i64),
                )));
                Arc::clone(&self.positioned)
            }
        };
        RecordBatch::try_new(schema, columns).with_context(|_| ArrowSnafu { context: context() })
    }

    /// A sorted run of lookup files as a stream of the rows whose key is one of `keys`.
    pub(crate) fn run_stream(&self, files: Vec<RunFile>, keys: Arc<Vec<ArrayRef>>) -> RunStream {
        let source = self.clone();
        Box::new(
            files
                .into_iter()
                .map(move |f| source.matches(&f, &keys))
                .filter(|b| b.as_ref().map_or(true, |b| b.num_rows() > 0)),
        )
    }
}

/// The name of a data file's lookup file. The storage handle and the path name the data file (two
/// stores in memory may hold the same path); the layout and the file's column mapping name what
/// it is decoded into.
fn lookup_key(io: &crate::io::FileIo, file: &FileRef, schema: &SchemaRef) -> String {
    let mut h = sha2::Sha256::new();
    h.update(io.instance().to_le_bytes());
    h.update(io.uri().as_bytes());
    h.update([0]);
    h.update(file.path.as_bytes());
    h.update([0]);
    h.update(format!("{:?}{:?}", schema.fields(), file.columns).as_bytes());
    hex::encode(h.finalize())
}

/// Keeps `rows`, just written by a compaction as the data file `path` in the table's current file
/// layout, as that file's lookup file: the next compaction that looks keys up in it finds it kept
/// instead of decoding the file again (a compaction's large outputs are what the following
/// commits look up in). Best effort: without a store, or when it cannot write, nothing is kept.
pub(crate) fn keep_written(io: &crate::io::FileIo, path: &str, rows: &RecordBatch) {
    let Some(store) = store() else {
        return;
    };
    let file = FileRef {
        path: path.to_string(),
        columns: None,
        part: None,
    };
    let key = lookup_key(io, &file, rows.schema_ref());
    match store.keep(&key, rows) {
        Ok(_) => {
            crate::metrics::metrics()
                .lookup_files
                .get_or_create(&[("source", "written")])
                .inc();
        }
        Err(e) => tracing::warn!(path, error = %e, "lookup file not kept"),
    }
}

fn to_ipc(rows: &RecordBatch) -> std::result::Result<Vec<u8>, ArrowError> {
    let mut w = arrow::ipc::writer::FileWriter::try_new(Vec::new(), rows.schema_ref())?;
    w.write(rows)?;
    w.finish()?;
    w.into_inner()
}

/// The rows of an Arrow IPC file in `buffer`, read in place (no copy of aligned buffers); an
/// error unless they have `schema`'s fields.
fn from_ipc(buffer: Buffer, schema: &SchemaRef) -> std::result::Result<RecordBatch, ArrowError> {
    use arrow::ipc::reader::{read_footer_length, FileDecoder};
    let invalid = |m: &str| ArrowError::IpcError(format!("lookup file: {m}"));
    let trailer = buffer
        .len()
        .checked_sub(10)
        .ok_or_else(|| invalid("too short"))?;
    let tail: [u8; 10] = buffer[trailer..]
        .try_into()
        .map_err(|_| invalid("no trailer"))?;
    let footer_len = read_footer_length(tail)?;
    let footer_start = trailer
        .checked_sub(footer_len)
        .ok_or_else(|| invalid("footer out of range"))?;
    let footer = arrow::ipc::root_as_footer(&buffer[footer_start..trailer])
        .map_err(|e| invalid(&e.to_string()))?;
    let fb_schema = footer.schema().ok_or_else(|| invalid("no schema"))?;
    let found = arrow::ipc::convert::fb_to_schema(fb_schema);
    if found.fields() != schema.fields() {
        return Err(invalid("another layout"));
    }
    let decoder =
        FileDecoder::new(Arc::clone(schema), footer.version()).with_require_alignment(false);
    let mut batches = Vec::new();
    for block in footer.recordBatches().iter().flatten() {
        let len = block.bodyLength() as usize + block.metaDataLength() as usize;
        let offset = usize::try_from(block.offset()).map_err(|_| invalid("bad block"))?;
        if offset.checked_add(len).is_none_or(|end| end > buffer.len()) {
            return Err(invalid("block out of range"));
        }
        if let Some(b) = decoder.read_record_batch(block, &buffer.slice_with_length(offset, len))? {
            batches.push(b);
        }
    }
    match batches.len() {
        1 => Ok(batches.remove(0)),
        _ => arrow::compute::concat_batches(schema, &batches),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    fn batch(a: &[i32], b: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Utf8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(a.to_vec())),
                Arc::new(StringArray::from(b.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn distinct_keys_are_sorted_once_each() {
        let keys = distinct_keys(
            &[
                batch(&[3, 1, 3], &["x", "y", "x"]),
                batch(&[1, 2], &["y", "z"]),
            ],
            2,
        )
        .unwrap();
        let a: Vec<i32> = keys[0]
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap()
            .values()
            .to_vec();
        let b: Vec<&str> = keys[1]
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .iter()
            .map(|s| s.unwrap())
            .collect();
        assert_eq!(a, vec![1, 2, 3]);
        assert_eq!(b, vec!["y", "z", "x"]);
        assert!(distinct_keys(&[], 1).unwrap().is_empty());
    }

    #[test]
    fn matching_rows_finds_each_wanted_key_present() {
        // Sorted by (a, b), each key once.
        let file = batch(&[1, 1, 2, 4, 4, 7], &["a", "c", "b", "a", "b", "z"]);
        let keys = distinct_keys(
            &[batch(
                &[0, 1, 4, 4, 5, 7, 9],
                &["q", "c", "a", "c", "a", "z", "a"],
            )],
            2,
        )
        .unwrap();
        assert_eq!(matching_rows(&file, &keys).unwrap(), vec![1, 3, 5]);
        // Every key, none, and a file with no rows.
        let all = distinct_keys(std::slice::from_ref(&file), 2).unwrap();
        assert_eq!(matching_rows(&file, &all).unwrap(), vec![0, 1, 2, 3, 4, 5]);
        let none = distinct_keys(&[batch(&[3, 8], &["a", "a"])], 2).unwrap();
        assert!(matching_rows(&file, &none).unwrap().is_empty());
        assert!(matching_rows(&file.slice(0, 0), &all).unwrap().is_empty());
    }

    #[test]
    fn matching_rows_agrees_with_a_set_on_many_keys() {
        let file_keys: Vec<i32> = (0..5000).map(|i| i * 3).collect();
        let names: Vec<&str> = file_keys.iter().map(|_| "v").collect();
        let file = batch(&file_keys, &names);
        let wanted: Vec<i32> = (0..4000).map(|i| (i * 7919) % 16000).collect();
        let wanted_names: Vec<&str> = wanted.iter().map(|_| "v").collect();
        let keys = distinct_keys(&[batch(&wanted, &wanted_names)], 2).unwrap();
        let got = matching_rows(&file, &keys).unwrap();
        assert_eq!(got, positions_of(&file_keys, &wanted));
    }

    /// Where the keys of `wanted` are in `file_keys`, by a set.
    fn positions_of<T: Ord + Copy>(file_keys: &[T], wanted: &[T]) -> Vec<u32> {
        let set: std::collections::BTreeSet<T> = wanted.iter().copied().collect();
        (0u32..)
            .zip(file_keys)
            .filter(|(_, k)| set.contains(k))
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn one_key_column_is_matched_on_its_values() {
        use arrow::array::{Int64Array, StringArray};
        let file_keys: Vec<i64> = (0..5000).map(|i| i * 3).collect();
        let wanted: Vec<i64> = (0..4000).map(|i| (i * 7919) % 16000).collect();
        let expected = positions_of(&file_keys, &wanted);
        let one = |col: ArrayRef| {
            let schema = Arc::new(Schema::new(vec![Field::new(
                "k",
                col.data_type().clone(),
                false,
            )]));
            RecordBatch::try_new(schema, vec![col]).unwrap()
        };
        // BIGINT, INT and (zero-padded, so sorted alike) STRING keys.
        let as_strings = |v: &[i64]| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(
                v.iter().map(|k| format!("{k:08}")),
            ))
        };
        let as_ints = |v: &[i64]| -> ArrayRef {
            Arc::new(Int32Array::from_iter_values(v.iter().map(|k| *k as i32)))
        };
        let as_longs = |v: &[i64]| -> ArrayRef { Arc::new(Int64Array::from(v.to_vec())) };
        for make in [
            &as_longs as &dyn Fn(&[i64]) -> ArrayRef,
            &as_ints,
            &as_strings,
        ] {
            let file = one(make(&file_keys));
            let keys = distinct_keys(&[one(make(&wanted))], 1).unwrap();
            assert_eq!(matching_rows(&file, &keys).unwrap(), expected);
        }
    }

    #[test]
    fn lookup_files_round_trip_through_ipc() {
        let rows = batch(&[1, 2], &["a", "b"]);
        let bytes = to_ipc(&rows).unwrap();
        let back = from_ipc(Buffer::from(bytes.clone()), rows.schema_ref()).unwrap();
        assert_eq!(back, rows);
        let other = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, false)]));
        assert!(from_ipc(Buffer::from(bytes.clone()), &other).is_err());
        // A damaged file is an error, not a panic.
        for cut in [0, 5, bytes.len() / 2, bytes.len() - 1] {
            assert!(from_ipc(Buffer::from(bytes[..cut].to_vec()), rows.schema_ref()).is_err());
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)]
    fn the_store_is_private_keeps_mapped_files_and_clears_left_overs() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        // Above Linux's largest pid: a process that is gone.
        let gone = parent.path().join("lookup-4194305");
        std::fs::create_dir_all(&gone).unwrap();
        std::fs::write(gone.join("f"), b"old rows").unwrap();
        let dir = parent.path().join(format!("lookup-{}", std::process::id()));
        let store = Store::open(parent.path(), &dir, 1 << 20).unwrap();
        assert!(!gone.exists());
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let rows = batch(&[1, 2, 3], &["a", "b", "c"]);
        let kept = store.keep("k", &rows).unwrap();
        assert_eq!(*kept, rows);
        assert_eq!(*store.files.get("k").unwrap().rows, rows);
        assert!(dir.join("k").exists());
        // A parent that is a link is refused (lookups then rebuild instead).
        let link = parent.path().join("link");
        std::os::unix::fs::symlink(parent.path(), &link).unwrap();
        assert!(Store::open(&link, &link.join("lookup-1"), 1 << 20).is_err());
    }

    #[test]
    fn only_the_directories_of_gone_processes_are_left_over() {
        let me = std::process::id();
        assert!(left_over("lookup-1234567", |_| false));
        assert!(!left_over("lookup-1234567", |_| true));
        assert!(!left_over(&format!("lookup-{me}"), |_| false));
        assert!(!left_over("lookup-x", |_| false));
        assert!(!left_over("data", |_| false));
    }
}
