//! Conforming a data file's batches to a table's layout, whatever format decoded them: each
//! target column found by its name in the file (as the file's schema version called it, a thin
//! file's keys in their value columns), cast where the writer chose another type, NULL where the
//! file has none.

use std::sync::Arc;

use arrow::array::{new_null_array, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int8Type, SchemaRef};
use snafu::ResultExt;

use super::row_kind::ConstantColumn;
use crate::error::{ArrowSnafu, Malformed, Result};
use crate::spec::KEY_FIELD_PREFIX;
use crate::table::evolution::FileColumns;

/// The name a target column has in a file written under another schema version (none: the file
/// has no such column, which reads as NULL).
pub(crate) fn name_in_file(columns: Option<&FileColumns>, name: &str) -> Option<String> {
    match columns.and_then(|c| c.get(name)) {
        Some(mapped) => mapped.clone(),
        None => Some(name.to_string()),
    }
}

/// Each target column's name in a file of schema `file` (`None`: not in it, read as NULL). A key
/// column (`_KEY_<k>`) that a thin file lacks (Paimon's `data-file.thin-mode`; paimon-rust writes
/// no others) is read from its value column `<k>`, as Java's `FormatReaderMapping.trimKeyFields`
/// does.
pub(crate) fn file_names(
    file: &SchemaRef,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
) -> Vec<Option<String>> {
    let has = |n: &str| file.fields().iter().any(|f| f.name() == n);
    target
        .fields()
        .iter()
        .map(|f| {
            let name = name_in_file(columns, f.name());
            if name.as_deref().is_some_and(has) {
                return name;
            }
            match f.name().strip_prefix(KEY_FIELD_PREFIX) {
                Some(k) => name_in_file(columns, k).filter(|v| has(v)).or(name),
                None => name,
            }
        })
        .collect()
}

/// A format's decoder of one file: its batches, in the file's own columns and types.
pub(crate) type FileReader =
    Box<dyn Iterator<Item = std::result::Result<RecordBatch, arrow::error::ArrowError>> + Send>;

/// A data file's batches in a table's layout, decoded as they are taken: columns are found by
/// their name in the file, cast where the file chose another type, and null where it has none.
pub(crate) struct Decoded {
    path: String,
    reader: FileReader,
    target: SchemaRef,
    /// Each target column's name in the file (none: not in the file).
    names: Vec<Option<String>>,
    /// The row kind and its target position, where the file holds one value in every row.
    kind: Option<(usize, ConstantColumn<Int8Type>)>,
}

impl Decoded {
    /// The batches `reader` decodes from the file at `path`, conformed to `target`, whose columns
    /// are called `names` in the file; `kind`: a row kind filled in rather than decoded.
    pub(crate) fn new(
        path: &str,
        reader: FileReader,
        target: &SchemaRef,
        names: Vec<Option<String>>,
        kind: Option<(usize, ConstantColumn<Int8Type>)>,
    ) -> Self {
        Decoded {
            path: path.to_string(),
            reader,
            target: Arc::clone(target),
            names,
            kind,
        }
    }

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
                    Some(c) if super::shredded::is_shredded(c.data_type()) => match f.data_type() {
                        DataType::Struct(fields) => super::shredded::unshred(c, fields)
                            .map_err(|e| Malformed(e).within(f.name()).at(&self.path)),
                        _ => Err(Malformed(
                            "a shredded VARIANT where the table has no VARIANT".into(),
                        )
                        .within(f.name())
                        .at(&self.path)),
                    },
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
