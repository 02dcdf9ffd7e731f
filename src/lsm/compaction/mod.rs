//! Compaction of one bucket, as pure functions (no IO; the caller rewrites the files): choosing
//! what to compact, Paimon's universal compaction over sorted runs ([`picker`]), and the changelog
//! a compaction produces for the `lookup` and `full-compaction` producers ([`changelog`]).

pub mod changelog;
pub mod picker;

pub use picker::{pick, pick_full, CompactUnit, PickerOptions, RunSize};
