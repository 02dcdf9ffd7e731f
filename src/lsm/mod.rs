//! The per-bucket LSM core: the sorted write buffer and the merge of sorted runs with the table's
//! merge engine. Synchronous and CPU-bound: it works on `RecordBatch`es already in memory, never
//! awaits, and does no IO.
//!
//! Batches here are in the data-file layout of primary-key tables:
//! `[_KEY_k1..kn][_SEQUENCE_NUMBER][_VALUE_KIND][value columns...]`.

pub mod compaction;
pub mod levels;
pub mod merge;
pub mod write_buffer;

pub use merge::{merge_runs, MergeConfig, MergeSpec};
pub use write_buffer::{PendingRun, WriteBuffer};
