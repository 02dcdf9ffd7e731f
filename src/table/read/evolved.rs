//! Reading one row-id group of a data-evolution table: the files that cover the same row ids
//! (a full file, then column-only files of later updates) decoded side by side, each into only
//! the columns it provides ([`crate::table::data_evolution::plan_group`]), zipped row by row
//! ([`Aligned`]), then given their row ids and sequence number and stripped of the rows the
//! anchor's deletion vector marks. A BLOB column comes from the group's `.blob` files instead,
//! each row from the newest file that holds it ([`blob_file::column`]; the group's files are
//! read whole, once).
//!
//! ```text
//!  A (id, a, b, c)   rows 0..3 ─┐
//!  U1 (b)            rows 0..3 ─┼─ zip ─► id a ← A, b ← U1, c ← U3 ─► _ROW_ID 0.., DV of A
//!  U3 (c)            rows 0..3 ─┘
//! ```

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, Int64Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Schema, SchemaRef};
use snafu::ResultExt;

use super::{load_vectors, prepend_kinds, DvIndex, TableRead};
use crate::error::{ArrowSnafu, CorruptSnafu, InternalSnafu, Malformed, Result};
use crate::spec::deletion_vector::DeletionVector;
use crate::spec::DataFileMeta;
use crate::table::data_evolution::plan_group;
use crate::table::data_file::{self, blob_file, name_in_file};
use crate::table::evolution::{FileColumns, FileRef};
use crate::table::scan::Split;
use crate::table::Table;

/// Rows a group without any file to decode (only row ids or NULL columns asked for) is cut into.
const METADATA_BATCH_ROWS: i64 = 8192;

/// A `.blob` file of a group: where it is, how its schema version names columns, its metadata.
pub(super) struct BlobFile {
    pub(super) path: String,
    /// The file's full location (warehouse root included), as descriptors name it.
    pub(super) uri: String,
    pub(super) columns: Option<FileColumns>,
    pub(super) meta: DataFileMeta,
}

/// Where an output column of a group comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    /// A decoded file (position in `sources`), at this column of its batches.
    File(usize, usize),
    /// A BLOB column's `.blob` files (position in `blobs`).
    Blob(usize),
    /// No file wrote it: NULL.
    Null,
}

/// How one group is read: which files are decoded, into which columns, and where each output
/// column comes from.
pub(super) struct GroupRead {
    /// The files decoded, each with the columns it provides (current names and types).
    sources: Vec<(FileRef, SchemaRef)>,
    /// For each BLOB column read: its `.blob` files (path, uri, first row id, max sequence number).
    blobs: Vec<Vec<(String, String, i64, i64)>>,
    /// BLOB values read as Paimon's serialized descriptors (`blob-as-descriptor`).
    descriptors: bool,
    /// Each output column's origin.
    columns: Vec<Column>,
    /// The group's row ids.
    rows: Range<i64>,
    /// The rows' sequence number (the newest file's).
    sequence: i64,
    /// The file whose deletion vector applies (the oldest).
    pub(super) anchor: String,
    /// For messages: the group's file names.
    names: Vec<String>,
}

impl GroupRead {
    /// Plans the read of `files` (one row-id group's normal files, in manifest order, each with
    /// its [`FileRef`]) and `blobs` (its `.blob` files) for the columns of `output`; a BLOB column
    /// is one of Arrow type `LargeBinary`.
    pub(super) fn plan(
        files: &[DataFileMeta],
        refs: Vec<FileRef>,
        blobs: &[BlobFile],
        output: &SchemaRef,
        descriptors: bool,
    ) -> Result<Self> {
        let mut names: Vec<String> = files.iter().map(|f| f.file_name.clone()).collect();
        names.extend(blobs.iter().map(|b| b.meta.file_name.clone()));
        let is_blob = |column: &str| {
            output
                .field_with_name(column)
                .is_ok_and(|f| *f.data_type() == arrow::datatypes::DataType::LargeBinary)
        };
        // A file holds a column if its schema version had it and, for a column-only file, its
        // `writeCols` list the column under that version's name. BLOB columns are in `.blob`
        // files only.
        let wrote = |f: &DataFileMeta, column: &str| {
            let Some(r) = files
                .iter()
                .position(|g| g.file_name == f.file_name)
                .map(|i| &refs[i])
            else {
                return false;
            };
            !is_blob(column)
                && match name_in_file(r.columns.as_ref(), column) {
                    None => false,
                    Some(in_file) => f
                        .write_cols
                        .as_ref()
                        .is_none_or(|cols| cols.contains(&in_file)),
                }
        };
        let wanted: Vec<(&str, bool)> = output
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.is_nullable() || is_blob(f.name())))
            .collect();
        let group: Vec<&DataFileMeta> = files.iter().collect();
        let plan = plan_group(&group, &wanted, wrote).map_err(|e| e.at(names.join(", ")))?;
        let mut sources: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut blob_columns: Vec<Vec<(String, String, i64, i64)>> = Vec::new();
        let mut columns = Vec::with_capacity(wanted.len());
        for (out, from) in plan.columns.iter().enumerate() {
            let (name, _) = wanted[out];
            if is_blob(name) {
                let mut of_column = Vec::new();
                for b in blobs {
                    let holds = name_in_file(b.columns.as_ref(), name).is_some_and(|in_file| {
                        b.meta.write_cols.as_ref().and_then(|c| c.first()) == Some(&in_file)
                    });
                    if holds {
                        let first = b.meta.first_row_id.ok_or_else(|| {
                            Malformed(format!("BLOB file {} has no first row id", b.path))
                                .at(b.path.clone())
                        })?;
                        of_column.push((
                            b.path.clone(),
                            b.uri.clone(),
                            first,
                            b.meta.max_sequence_number,
                        ));
                    }
                }
                blob_columns.push(of_column);
                columns.push(Column::Blob(blob_columns.len() - 1));
                continue;
            }
            columns.push(match from {
                None => Column::Null,
                Some(file) => {
                    let at = match sources.iter().position(|(f, _)| f == file) {
                        Some(at) => at,
                        None => {
                            sources.push((*file, Vec::new()));
                            sources.len() - 1
                        }
                    };
                    sources[at].1.push(out);
                    Column::File(at, sources[at].1.len() - 1)
                }
            });
        }
        let sources = sources
            .into_iter()
            .map(|(file, outs)| {
                let fields: Vec<_> = outs.iter().map(|&o| output.field(o).clone()).collect();
                (refs[file].clone(), Arc::new(Schema::new(fields)))
            })
            .collect();
        Ok(Self {
            sources,
            blobs: blob_columns,
            descriptors,
            columns,
            rows: plan.rows,
            sequence: plan.sequence,
            anchor: names[plan.anchor].clone(),
            names,
        })
    }

    /// The values of each BLOB column read, for the whole group.
    fn blob_columns(
        &self,
        handle: &tokio::runtime::Handle,
        io: &crate::io::FileIo,
    ) -> Result<Vec<ArrayRef>> {
        self.blobs
            .iter()
            .map(|files| {
                let bytes = files
                    .iter()
                    .map(|(path, _, _, _)| data_file::file_bytes(handle, io, path))
                    .collect::<Result<Vec<_>>>()?;
                let sources: Vec<blob_file::BlobSource<'_>> = files
                    .iter()
                    .zip(&bytes)
                    .map(|((_, uri, first, seq), bytes)| blob_file::BlobSource {
                        path: uri,
                        bytes,
                        first_row_id: *first,
                        max_sequence_number: *seq,
                    })
                    .collect();
                let column =
                    blob_file::column(&self.rows, &sources, self.descriptors).map_err(|e| {
                        let paths: Vec<&str> =
                            files.iter().map(|(p, _, _, _)| p.as_str()).collect();
                        e.at(paths.join(", "))
                    })?;
                Ok(Arc::new(column) as ArrayRef)
            })
            .collect()
    }

    /// Reads the group, handing each assembled batch to `send`: the output columns, then
    /// `_ROW_ID` and `_SEQUENCE_NUMBER` when `schema` has them, without the rows `dv` marks.
    pub(super) fn run(
        self,
        handle: &tokio::runtime::Handle,
        io: &crate::io::FileIo,
        schema: &SchemaRef,
        dv: Option<&DeletionVector>,
        mut send: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let tracking = schema.fields().len() == self.columns.len() + 2;
        let total = self.rows.end - self.rows.start;
        let blobs = self.blob_columns(handle, io)?;
        let mut assemble = |slices: &[RecordBatch], position: i64, n: usize| -> Result<()> {
            let mut cols: Vec<ArrayRef> = self
                .columns
                .iter()
                .zip(schema.fields())
                .map(|(from, field)| match *from {
                    Column::File(s, c) => Arc::clone(slices[s].column(c)),
                    Column::Blob(b) => blobs[b].slice(position as usize, n),
                    Column::Null => new_null_array(field.data_type(), n),
                })
                .collect();
            if tracking {
                let first = self.rows.start + position;
                cols.push(Arc::new(Int64Array::from_iter_values(
                    (0..n as i64).map(|i| first + i),
                )));
                cols.push(Arc::new(Int64Array::from_value(self.sequence, n)));
            }
            let batch = RecordBatch::try_new_with_options(
                Arc::clone(schema),
                cols,
                &RecordBatchOptions::new().with_row_count(Some(n)),
            )
            .context(ArrowSnafu {
                context: "assembling a data-evolution row group",
            })?;
            let batch = match dv {
                Some(dv) => super::drop_deleted(&batch, dv, position)?,
                None => batch,
            };
            if batch.num_rows() == 0 {
                return Ok(());
            }
            send(batch)
        };
        if self.sources.is_empty() {
            let mut position = 0;
            while position < total {
                let n = (total - position).min(METADATA_BATCH_ROWS);
                assemble(&[], position, n as usize)?;
                position += n;
            }
            return Ok(());
        }
        let streams: Vec<_> = self
            .sources
            .iter()
            .map(|(file, target)| {
                data_file::run_stream(
                    handle.clone(),
                    io.clone(),
                    Arc::clone(target),
                    vec![file.clone()],
                    None,
                    None,
                )
            })
            .collect();
        let mut position = 0i64;
        for slices in Aligned::new(streams) {
            let slices = match slices {
                Ok(slices) => slices,
                Err(Misaligned::Source(e)) => return Err(e),
                Err(Misaligned::Ended(i)) => {
                    let (file, _) = &self.sources[i];
                    return Err(self.mismatch(format!(
                        "{} ends before the others, after {position} rows",
                        file.path
                    )));
                }
            };
            let n = slices.first().map_or(0, |b| b.num_rows());
            assemble(&slices, position, n)?;
            position += n as i64;
        }
        if position != total {
            return Err(self.mismatch(format!(
                "they hold {position} rows where their metadata says {total}"
            )));
        }
        Ok(())
    }

    fn mismatch(&self, what: impl std::fmt::Display) -> crate::error::Error {
        CorruptSnafu {
            path: self.names.join(", "),
            message: format!(
                "the data files of row ids {:?} cannot be read together: {what}",
                self.rows
            ),
        }
        .build()
    }
}

impl TableRead {
    /// The blocking work that reads one row-id group of a data-evolution table whose files must
    /// be read together ([`evolved`]).
    pub(super) fn evolved_task(
        &self,
        split: Split,
        dir: &str,
        tx: tokio::sync::mpsc::Sender<Result<RecordBatch>>,
        dv_index: Option<Arc<DvIndex>>,
    ) -> Result<Box<dyn FnOnce() -> Result<()> + Send + 'static>> {
        let (blob_metas, normal): (Vec<_>, Vec<_>) = split
            .files
            .iter()
            .cloned()
            .partition(|f| crate::table::data_evolution::is_blob_file(&f.file_name));
        let refs = normal
            .iter()
            .map(|f| self.table.file_ref(dir, f))
            .collect::<Result<Vec<_>>>()?;
        let blobs = blob_metas
            .into_iter()
            .map(|meta| {
                let path = Table::data_path(dir, &meta);
                let uri = if path.contains("://") {
                    path.clone()
                } else {
                    format!("{}/{path}", self.table.io().uri().trim_end_matches('/'))
                };
                Ok(BlobFile {
                    uri,
                    columns: self.table.file_columns(&meta, &path)?,
                    path,
                    meta,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let descriptors = self.layout.options.blob_as_descriptor;
        let group = GroupRead::plan(&normal, refs, &blobs, &self.output_schema, descriptors)?;
        let schema = if self.row_tracking {
            self.schema()
        } else {
            Arc::clone(&self.output_schema)
        };
        let kind_schema = self.row_kind.then(|| self.schema());
        let manifests = self.table.manifest_manager();
        let io = self.table.io().clone();
        let handle = tokio::runtime::Handle::current();
        Ok(Box::new(move || -> Result<()> {
            let anchor = std::collections::HashSet::from([group.anchor.as_str()]);
            let at = (&split.partition[..], split.bucket);
            let vectors = load_vectors(&handle, &manifests, dv_index.as_deref(), at, &anchor)?;
            let dv = vectors.get(&group.anchor);
            group.run(&handle, &io, &schema, dv, |batch| {
                let batch = match &kind_schema {
                    Some(ks) => prepend_kinds(ks, &batch, None)?,
                    None => batch,
                };
                tx.blocking_send(Ok(batch)).map_err(|_| {
                    InternalSnafu {
                        message: "read cancelled".to_string(),
                    }
                    .build()
                })
            })
        }))
    }
}

/// Several sources of batches zipped row by row: each step yields one slice of every source, all
/// of the same length (the fewest rows any source's current batch has left). A source that ends
/// before the others is an error, not a shorter row.
pub(crate) struct Aligned<I> {
    sources: Vec<I>,
    current: Vec<Option<(RecordBatch, usize)>>,
}

impl<I> Aligned<I> {
    pub(crate) fn new(sources: Vec<I>) -> Self {
        let current = sources.iter().map(|_| None).collect();
        Self { sources, current }
    }
}

/// Why [`Aligned`] stopped short.
#[derive(Debug)]
pub(crate) enum Misaligned {
    /// A source failed.
    Source(crate::error::Error),
    /// This source (by position) ended while others had rows left.
    Ended(usize),
}

impl<I: Iterator<Item = Result<RecordBatch>>> Iterator for Aligned<I> {
    type Item = std::result::Result<Vec<RecordBatch>, Misaligned>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut ended = Vec::new();
        for (i, source) in self.sources.iter_mut().enumerate() {
            loop {
                match &self.current[i] {
                    Some((b, at)) if *at < b.num_rows() => break,
                    _ => {}
                }
                match source.next() {
                    Some(Ok(b)) => self.current[i] = Some((b, 0)),
                    Some(Err(e)) => return Some(Err(Misaligned::Source(e))),
                    None => {
                        self.current[i] = None;
                        ended.push(i);
                        break;
                    }
                }
            }
        }
        if ended.len() == self.sources.len() {
            return None;
        }
        if !ended.is_empty() {
            return Some(Err(Misaligned::Ended(ended[0])));
        }
        let n = self
            .current
            .iter()
            .flatten()
            .map(|(b, at)| b.num_rows() - at)
            .min()
            .unwrap_or(0);
        let slices = self
            .current
            .iter_mut()
            .flatten()
            .map(|(b, at)| {
                let s = b.slice(*at, n);
                *at += n;
                s
            })
            .collect();
        Some(Ok(slices))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int32Array};
    use arrow::datatypes::{DataType, Field, Int32Type};

    fn batch(values: &[i32]) -> Result<RecordBatch> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
        Ok(
            RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(values.to_vec()))])
                .unwrap(),
        )
    }

    fn values(b: &RecordBatch) -> Vec<i32> {
        b.column(0).as_primitive::<Int32Type>().values().to_vec()
    }

    #[test]
    fn sources_cut_differently_are_zipped_row_by_row() {
        let a = vec![batch(&[1, 2, 3]), batch(&[4, 5])];
        let b = vec![batch(&[10]), batch(&[20, 30, 40, 50])];
        let steps: Vec<Vec<Vec<i32>>> = Aligned::new(vec![a.into_iter(), b.into_iter()])
            .map(|s| s.unwrap().iter().map(values).collect())
            .collect();
        assert_eq!(
            steps,
            vec![
                vec![vec![1], vec![10]],
                vec![vec![2, 3], vec![20, 30]],
                vec![vec![4, 5], vec![40, 50]],
            ]
        );
    }

    #[test]
    fn a_source_that_ends_early_is_an_error_and_empty_batches_are_skipped() {
        let a = vec![batch(&[1, 2, 3])];
        let b = vec![batch(&[]), batch(&[10, 20])];
        let mut zip = Aligned::new(vec![a.into_iter(), b.into_iter()]);
        assert_eq!(zip.next().unwrap().unwrap().len(), 2);
        assert!(matches!(zip.next(), Some(Err(Misaligned::Ended(1)))));
        let none: Vec<std::vec::IntoIter<Result<RecordBatch>>> = vec![vec![].into_iter()];
        assert!(Aligned::new(none).next().is_none());
    }
}
