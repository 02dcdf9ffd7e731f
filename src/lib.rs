//! tidelake: a streaming lakehouse server keeping tables in the Apache Paimon format.
//!
//! Layers, top to bottom (arrows point down only; the engine never imports the server):
//!
//! ```text
//!  main.rs (CLI)
//!  server/      Flight SQL service: auth, one Status mapping (status.rs), IPC checks; handlers by
//!               kind in flight_sql/ (statements, tickets, encoding, ingest), admin actions; calls
//!               run on work threads
//!  sql/         DataFusion: statements (dml, call, alter, show), limits on their size and depth,
//!               capped functions
//!  catalog/     databases and tables of a warehouse
//!  table/       write/ (conform, route, one BucketWriter per bucket) · commit/ (retry loop over
//!               pure deciders) · scan planning (pure pruning) · merged read ·
//!               maintenance.rs: the one core the CLI, CALL sys.* and the admin actions share
//!  lsm/         per-bucket sorted write buffer, Levels, merge engines (sync, no IO)
//!  schema/      versioned schema files, schema evolution, and the layout a schema implies
//!  snapshot/ manifest/   managers of the versioned files of one table
//!  io/          storage access, durable writes, the write-once primitive
//!  spec/        on-disk format types and codecs, the typed table options (no IO)
//!  clock.rs     the engine's clock (system or manual, injected through the catalog)
//!  runtime.rs   the IO runtime and the work threads (the only place that builds runtimes)
//! ```

pub mod catalog;
pub mod clock;
pub mod error;
pub mod io;
pub mod lsm;
pub mod manifest;
pub mod metrics;
pub mod runtime;
pub mod schema;
pub mod server;
pub mod snapshot;
pub mod spec;
pub mod sql;
pub mod table;

pub use catalog::{Catalog, Identifier, TableDefinition};
pub use error::{Error, ErrorKind, Result};
pub use table::Table;
