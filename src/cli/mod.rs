//! Pieces of the `tidelake` command that are not the engine: input files, printing, the bench.

pub(crate) mod bench;
pub(crate) mod cross_bench;
pub(crate) mod input;
pub(crate) mod maintenance;
pub(crate) mod output;
pub(crate) mod point_bench;
pub(crate) mod progress;

/// The CLI's error: any displayable error, printed as one line.
pub(crate) type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// `KEY=VALUE` arguments (partitions, options); `what` names them in the error.
pub(crate) fn key_values(pairs: &[String], what: &str) -> Result<Vec<(String, String)>> {
    Ok(pairs
        .iter()
        .map(|p| tidelake::table::maintenance::key_value(p, what))
        .collect::<tidelake::Result<_>>()?)
}
