//! tidelake's integration tests: one binary (each extra test binary would re-link the tree).

// Tests prepare and inspect warehouses directly on disk; blocking there is fine.
#![allow(clippy::disallowed_methods)]

mod bad_input;
mod branches;
mod changelog;
mod chaos;
mod codecs;
mod common;
mod compaction;
mod concurrency;
mod crash;
mod cross_partition;
mod data_evolution;
mod deletion_vectors;
mod dynamic;
mod engines;
mod evolution;
mod faults;
mod fixtures;
mod flight;
mod formats;
mod interop;
mod lifecycle;
mod model;
mod nested;
mod paimon_rust;
mod parsers;
mod postpone;
mod s3;
mod sql;
mod sql_filters;
