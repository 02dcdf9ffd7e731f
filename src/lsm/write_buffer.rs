//! The sorted write buffer of one primary-key bucket: assigns sequence numbers in arrival order,
//! holds records until a spill, and hands out one merged, key-sorted batch per spill (a level-0
//! sorted run in which every key appears once).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, Int8Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use snafu::ResultExt;

use super::merge::{merge_runs, MergeSpec};
use crate::error::{ArrowSnafu, Result};

#[derive(Debug)]
pub struct WriteBuffer {
    file_schema: SchemaRef,
    key_indices: Vec<usize>,
    spec: MergeSpec,
    batches: Vec<RecordBatch>,
    rows: usize,
    next_sequence: i64,
}

impl WriteBuffer {
    /// `key_indices` are the positions of the trimmed primary key among the value columns;
    /// `next_sequence` continues after the highest sequence number already in the bucket.
    pub fn new(
        file_schema: SchemaRef,
        key_indices: Vec<usize>,
        spec: MergeSpec,
        next_sequence: i64,
    ) -> Self {
        Self {
            file_schema,
            key_indices,
            spec: MergeSpec {
                keep_retracts: true,
                ..spec
            },
            batches: vec![],
            rows: 0,
            next_sequence,
        }
    }

    pub fn buffered_rows(&self) -> usize {
        self.rows
    }

    pub fn next_sequence(&self) -> i64 {
        self.next_sequence
    }

    /// Adds rows (table columns, in schema order) with their row kinds; sequence numbers are
    /// assigned in row order.
    pub fn add(&mut self, values: &RecordBatch, kinds: Int8Array) -> Result<()> {
        let n = values.num_rows();
        if n == 0 {
            return Ok(());
        }
        let seq = Int64Array::from_iter_values(self.next_sequence..self.next_sequence + n as i64);
        let mut columns: Vec<ArrayRef> = self
            .key_indices
            .iter()
            .map(|&i| Arc::clone(values.column(i)))
            .collect();
        columns.push(Arc::new(seq));
        columns.push(Arc::new(kinds));
        columns.extend(values.columns().iter().cloned());
        let batch =
            RecordBatch::try_new(Arc::clone(&self.file_schema), columns).context(ArrowSnafu {
                context: "building write-buffer batch",
            })?;
        self.batches.push(batch);
        self.rows += n;
        self.next_sequence += n as i64;
        Ok(())
    }

    /// Drains the buffer; merging the drained records into a sorted run is left to
    /// [`PendingRun::merge`] so that CPU work can run off the writer's task.
    pub fn take_run(&mut self) -> Option<PendingRun> {
        if self.batches.is_empty() {
            return None;
        }
        self.rows = 0;
        Some(PendingRun {
            batches: std::mem::take(&mut self.batches),
            spec: self.spec.clone(),
        })
    }
}

/// Records drained from a [`WriteBuffer`], not yet sorted and merged.
#[derive(Debug)]
pub struct PendingRun {
    batches: Vec<RecordBatch>,
    spec: MergeSpec,
}

impl PendingRun {
    /// One merged batch sorted by key, each key once (`None` when nothing survives).
    pub fn merge(self) -> Result<Option<RecordBatch>> {
        merge_runs(&self.batches, &self.spec)
    }

    /// Every record sorted by key, unmerged (the `input` producer's changelog).
    pub fn sorted(&self) -> Result<Option<RecordBatch>> {
        super::merge::sort_records(&self.batches, &self.spec)
    }
}
