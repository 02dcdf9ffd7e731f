//! tidelake: a streaming lakehouse server keeping tables in the Apache Paimon format.
//!
//! Layers, top to bottom (arrows point down only; the engine never imports the server):
//!
//! ```text
//!  main.rs, cli/   the `tidelake` command (its maintenance commands build the core's requests)
//!  server/      `tidelake serve`: four doors over one engine, every call resolved to a Principal
//!               {tenant, subject, roles} first (auth/: passwords, minted tokens, identity
//!               providers' JWTs; tenant/: each tenant's catalog, limits and registries)
//!    ├ Flight SQL   service.rs dispatches; flight_sql/ (statements, tickets, encoding, bulk
//!    │              ingest), metadata; one Status mapping (status.rs), IPC checks (ipc.rs)
//!    ├ plain Flight changelog subscriptions (subscription.rs), streaming writes (streaming.rs),
//!    │              admin actions (admin.rs: maintenance requests, tracked operations)
//!    ├ REST         rest/: Paimon's REST catalog over HTTP (dispatch.rs routes by resource)
//!    └ HTTP         Prometheus metrics; audit lines for every door (audit.rs)
//!  sql/         DataFusion: per-tenant sessions, providers and the scan operator, statements
//!               (dml, ddl, call, alter, show), system tables, limits on size, depth and output
//!  catalog/     databases and tables of a warehouse
//!  table/       write/ (conform, route, one BucketWriter per bucket) · commit/ (the one publish,
//!               a retry loop over pure deciders; CommitMessage is its input) · scan planning
//!               (pure pruning) · merged read · changes.rs: each snapshot's changes and subscriptions ·
//!               maintenance/: one Request per operation for every door, each deleting
//!               operation a pure plan run by one executor
//!  lsm/         per-bucket sorted write buffer, Levels, merge engines (sync, no IO)
//!  schema/      versioned schema files, schema evolution, and the layout a schema implies
//!  snapshot/ manifest/   managers of the versioned files of one table
//!  io/          storage access, durable writes, the write-once primitive, caches, STS
//!  spec/        on-disk format types and codecs, the typed table options (no IO)
//!  error.rs     the one error type, classed once by kind (decoders' Malformed becomes Corrupt,
//!               checks' Refusal InvalidArgument, where the caller names the file or request)
//!  clock.rs     the engine's clock (system or manual, injected through the catalog)
//!  metrics.rs   the Prometheus registry every layer counts into
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
