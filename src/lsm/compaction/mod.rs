//! Choosing what to compact in one bucket: Paimon's universal compaction over sorted runs, as pure
//! functions of the runs' levels and sizes (no IO; the caller rewrites the files).

pub mod picker;

pub use picker::{pick, pick_full, CompactUnit, PickerOptions, RunSize};
