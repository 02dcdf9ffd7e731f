//! A compaction's output files (data or changelog): rows gathered up to the target file size,
//! encoded, written, and (for tables that look keys up above level 0) kept as lookup files.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use snafu::ResultExt;

use crate::error::{ArrowSnafu, InternalSnafu, Result};
use crate::schema::layout::TableLayout;
use crate::spec::manifest::FileSource;
use crate::spec::DataFileMeta;
use crate::table::data_file;

/// Files of one compaction output (data or changelog): rows are gathered up to the target file
/// size, encoded and written.
pub(super) struct OutputFiles {
    pub(super) layout: Arc<TableLayout>,
    pub(super) io: crate::io::FileIo,
    pub(super) clock: crate::clock::Clock,
    pub(super) handle: tokio::runtime::Handle,
    pub(super) dir: String,
    pub(super) names: std::vec::IntoIter<String>,
    pub(super) level: i32,
    pub(super) rows_per_file: usize,
    /// Append outputs are renumbered from this sequence number, keeping order.
    pub(super) append_first_seq: Option<i64>,
    pub(super) pending: Vec<RecordBatch>,
    pub(super) pending_rows: usize,
    pub(super) written: Vec<DataFileMeta>,
    /// Whether each output is also kept as its lookup file (tables whose compactions look keys
    /// up in the levels above 0, for the files written there).
    pub(super) keep_lookup: bool,
}

impl OutputFiles {
    pub(super) fn accept(&mut self, batch: RecordBatch) -> Result<()> {
        let mut start = 0;
        while start < batch.num_rows() {
            let take = (self.rows_per_file - self.pending_rows).min(batch.num_rows() - start);
            self.pending.push(batch.slice(start, take));
            self.pending_rows += take;
            start += take;
            if self.pending_rows >= self.rows_per_file {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending_rows == 0 {
            return Ok(());
        }
        let batch =
            concat_batches(&self.layout.file_schema, self.pending.iter()).context(ArrowSnafu {
                context: "assembling a compaction output",
            })?;
        self.pending.clear();
        let n = self.pending_rows as i64;
        self.pending_rows = 0;
        let name = self.names.next().ok_or_else(|| {
            InternalSnafu {
                message: "ran out of file names".to_string(),
            }
            .build()
        })?;
        let seq = self.append_first_seq.map(|first| {
            self.append_first_seq = Some(first + n);
            (first, first + n - 1)
        });
        let (bytes, meta) = data_file::encode(
            &self.layout,
            &batch,
            name,
            self.level,
            seq,
            FileSource::Compact,
            self.clock.now_millis(),
        )?;
        let path = format!("{}/{}", self.dir, meta.file_name);
        self.handle.block_on(self.io.write(&path, bytes))?;
        if self.keep_lookup {
            super::lookup::keep_written(&self.io, &path, &batch);
        }
        self.written.push(meta);
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<Vec<DataFileMeta>> {
        self.flush()?;
        Ok(self.written)
    }
}

impl OutputFiles {
    /// A writer with the same destination and sizing and nothing written.
    pub(super) fn clone_empty(&self) -> Self {
        Self {
            layout: Arc::clone(&self.layout),
            io: self.io.clone(),
            clock: self.clock.clone(),
            handle: self.handle.clone(),
            dir: self.dir.clone(),
            names: Vec::new().into_iter(),
            level: self.level,
            rows_per_file: self.rows_per_file,
            append_first_seq: self.append_first_seq,
            pending: vec![],
            pending_rows: 0,
            written: vec![],
            // Changelog files are never looked up in.
            keep_lookup: false,
        }
    }
}
