//! Pieces of the `tidelake` command that are not the engine: input files, printing, the bench.

pub(crate) mod bench;
pub(crate) mod input;
pub(crate) mod output;
pub(crate) mod point_bench;
pub(crate) mod progress;
