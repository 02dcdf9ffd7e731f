//! The Flight SQL handlers: statements, prepared statements, metadata calls and bulk ingest,
//! thin adapters over [`SqlEngine`] and the catalog, one method per Flight SQL command (named
//! after the command and its RPC, e.g. `do_put_statement_update`). The dispatcher
//! (`super::service`) decodes each request, matches its command and calls the handler with
//! the call's context ([`Call`]: principal, audit note); no handler reads request extensions.
//!
//! Tickets and prepared-statement handles are self-contained (SQL, bound parameters, owner), so
//! any request can be served without server-side statement state (`tickets`). What is sent is
//! built in `encode`; bulk ingest lives in `ingest`; this file holds the statement and metadata
//! handlers, and the little that arrow-flight's `FlightSqlService` still answers (ListActions,
//! the Flight SQL actions tidelake does not implement).

use crate::error::ErrorKind;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use arrow::ipc::writer::IpcWriteOptions;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::sql::metadata::{SqlInfoData, XdbcTypeInfoData};
use arrow_flight::sql::server::FlightSqlService;
use arrow_flight::sql::{
    ActionCreatePreparedStatementResult, Command, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetPrimaryKeys, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandGetXdbcTypeInfo, CommandPreparedStatementQuery, CommandPreparedStatementUpdate,
    CommandStatementIngest, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TableExistsOption, TableNotExistOption,
    TicketStatementQuery,
};
use arrow_flight::{
    ActionType, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse,
    IpcMessage, SchemaAsIpc, Ticket,
};
use base64::Engine;
use datafusion::common::ScalarValue;
use futures::stream::{self, BoxStream, Stream, StreamExt, TryStreamExt};
use prost::Message;
use serde::{Deserialize, Serialize};
use tonic::{Request, Response, Status, Streaming};

use super::auth::Authenticator;
use super::call::Call;
use super::ipc::{checked_flight_data, FlightDataIn};
use super::metadata;
use super::principal::Principal;
use super::seal;
use super::status::{invalid, to_status};
use crate::catalog::{Identifier, TableDefinition};
use crate::error::Result;
use crate::sql::{Role, SqlEngine, SqlSession, StatementKind};
use crate::table::{Overwrite, WriteOptions};

mod encode;
mod ingest;
mod tickets;

use encode::{batch_stream, flight_info, ipc_schema, metadata_info, plain_type};
pub(crate) use encode::{encode_stream, plain_schema};
use tickets::encode_params;
pub(crate) use tickets::Handle;

/// Largest FlightData message the server sends (batches are split to fit).
pub const MAX_FLIGHT_DATA: usize = 2 * 1024 * 1024;

/// The only table type.
pub const TABLE_TYPE: &str = "TABLE";

/// The FlightData a DoGet streams.
pub(crate) type DoGetStream = super::call::Responses<arrow_flight::FlightData>;

/// The Flight SQL side of tidelake.
pub struct TidelakeFlightSql {
    pub(crate) auth: Arc<Authenticator>,
    sql_info: SqlInfoData,
    xdbc: XdbcTypeInfoData,
}

impl std::fmt::Debug for TidelakeFlightSql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TidelakeFlightSql").finish_non_exhaustive()
    }
}

impl TidelakeFlightSql {
    pub fn new(auth: Arc<Authenticator>) -> Self {
        Self {
            auth,
            sql_info: metadata::sql_info(),
            xdbc: metadata::xdbc_types(),
        }
    }

    /// The prepared-statement handle in `bytes`, if it was sealed for `p`.
    fn prepared(&self, bytes: &[u8], p: &Principal) -> std::result::Result<Handle, Status> {
        Handle::open(bytes, seal::Kind::Handle, p, &self.auth)
    }

    /// The caller and its session (current database, role).
    fn session<'c>(&self, call: &'c Call) -> (&'c Principal, SqlSession) {
        (&call.principal, self.auth.session(&call.principal))
    }

    /// FlightInfo for a statement: queries are planned; updates run now (once) and their count
    /// travels in the ticket.
    async fn statement_info(
        &self,
        mut handle: Handle,
        principal: &Principal,
        session: &SqlSession,
        descriptor: FlightDescriptor,
    ) -> std::result::Result<FlightInfo, Status> {
        let first = handle.param_rows()?.into_iter().next().unwrap_or_default();
        let engine = &principal.tenant.engine;
        let (kind, schema, _) = engine
            .describe_with(session, &handle.sql, &first)
            .await
            .map_err(to_status)?;
        let schema = match kind {
            StatementKind::Update => {
                handle.count = Some(Self::run_update(engine, &handle, session).await?);
                crate::sql::count_schema()
            }
            StatementKind::Query => plain_schema(&schema),
        };
        let ticket = TicketStatementQuery {
            statement_handle: handle.seal(seal::Kind::Ticket, principal, &self.auth),
        }
        .as_any()
        .encode_to_vec();
        flight_info(&schema, ticket.into(), descriptor)
    }

    /// Runs an update once per bound parameter row (once without parameters).
    async fn run_update(
        engine: &SqlEngine,
        handle: &Handle,
        session: &SqlSession,
    ) -> std::result::Result<i64, Status> {
        let rows = handle.param_rows()?;
        engine
            .execute_update_many(session, &handle.sql, &rows)
            .await
            .map_err(to_status)
    }

    async fn run_ticket(
        engine: &SqlEngine,
        handle: Handle,
        session: &SqlSession,
    ) -> std::result::Result<DoGetStream, Status> {
        if let Some(n) = handle.count {
            let batch = RecordBatch::try_new(
                crate::sql::count_schema(),
                vec![Arc::new(arrow::array::Int64Array::from(vec![n]))],
            )
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
            return Ok(batch_stream(batch));
        }
        let params = handle.param_rows()?.into_iter().next().unwrap_or_default();
        let out = engine
            .execute(session, &handle.sql, &params)
            .await
            .map_err(to_status)?;
        if out.kind == StatementKind::Update {
            // A ticket for an update whose FlightInfo was not requested first (raw clients).
            return Ok(encode_stream(out.schema, out.stream));
        }
        let schema = plain_schema(&out.schema);
        Ok(encode_stream(schema, out.stream))
    }

    /// Prepares a statement; also says whether it is an update (JDBC reads `is_update`).
    pub(crate) async fn prepare(
        &self,
        principal: &Principal,
        query: String,
    ) -> std::result::Result<(ActionCreatePreparedStatementResult, bool), Status> {
        let session = self.auth.session(principal);
        let (kind, schema, params) = principal
            .tenant
            .engine
            .describe(&session, &query)
            .await
            .map_err(to_status)?;
        let handle = Handle::new(query);
        let is_update = kind == StatementKind::Update;
        // JDBC treats an empty dataset schema as "this is an update"; it binds an update's
        // parameters by their schema.
        let (dataset_schema, parameter_schema) = if is_update {
            let params = if params.fields().is_empty() {
                bytes::Bytes::new()
            } else {
                ipc_schema(&params)?
            };
            (bytes::Bytes::new(), params)
        } else {
            (ipc_schema(&plain_schema(&schema))?, ipc_schema(&params)?)
        };
        Ok((
            ActionCreatePreparedStatementResult {
                prepared_statement_handle: handle.seal(seal::Kind::Handle, principal, &self.auth),
                dataset_schema,
                parameter_schema,
            },
            is_update,
        ))
    }

    /// The schema a command's DoGet streams (Flight's GetSchema).
    pub(crate) async fn command_schema(
        &self,
        principal: &Principal,
        cmd: Command,
    ) -> std::result::Result<SchemaRef, Status> {
        let session = self.auth.session(principal);
        let sql = match cmd {
            Command::CommandStatementQuery(q) => q.query,
            Command::CommandPreparedStatementQuery(p) => {
                self.prepared(&p.prepared_statement_handle, principal)?.sql
            }
            Command::CommandGetCatalogs(c) => return Ok(c.into_builder().schema()),
            Command::CommandGetDbSchemas(c) => return Ok(c.into_builder().schema()),
            Command::CommandGetTables(c) => return Ok(c.into_builder().schema()),
            Command::CommandGetTableTypes(c) => return Ok(c.into_builder().schema()),
            Command::CommandGetSqlInfo(_) => return Ok(self.sql_info.schema()),
            Command::CommandGetPrimaryKeys(_) => return Ok(metadata::primary_keys_schema()),
            Command::CommandGetExportedKeys(_)
            | Command::CommandGetImportedKeys(_)
            | Command::CommandGetCrossReference(_) => return Ok(metadata::foreign_keys_schema()),
            other => {
                return Err(super::status::status(
                    ErrorKind::Unsupported,
                    format!("GetSchema is not available for {}", other.type_url()),
                ))
            }
        };
        let (kind, schema, _) = principal
            .tenant
            .engine
            .describe(&session, &sql)
            .await
            .map_err(to_status)?;
        Ok(match kind {
            StatementKind::Query => plain_schema(&schema),
            StatementKind::Update => crate::sql::count_schema(),
        })
    }

    async fn all_tables(
        catalog: &crate::catalog::Catalog,
        databases: &[String],
    ) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for db in databases {
            for t in catalog.list_tables(db).await? {
                out.push((db.clone(), t));
            }
        }
        Ok(out)
    }

    /// NotFound unless `catalog` (when given) is the principal's; the same answer whether or
    /// not another tenant has that name.
    fn check_catalog(p: &Principal, catalog: Option<&str>) -> std::result::Result<(), Status> {
        let own = p.tenant.engine.catalog_name();
        match catalog {
            None | Some("") => Ok(()),
            Some(c) if c == own => Ok(()),
            Some(c) => Err(super::status::status(
                ErrorKind::NotFound,
                format!("unknown catalog '{c}'; the catalog is '{own}'"),
            )),
        }
    }

    async fn read_params(input: FlightDataIn) -> std::result::Result<Vec<RecordBatch>, Status> {
        let batches: Vec<RecordBatch> = FlightRecordBatchStream::new_from_flight_data(
            checked_flight_data(input.map_err(FlightError::from)),
        )
        .try_collect()
        .await
        .map_err(|e| invalid(format!("parameters: {e}")))?;
        Ok(batches.into_iter().filter(|b| b.num_rows() > 0).collect())
    }
}

/// The handlers, one per Flight SQL command, each called by the dispatcher (`super::service`)
/// with the call's context; named after the command and the RPC it arrives with.
impl TidelakeFlightSql {
    pub(crate) async fn get_flight_info_statement(
        &self,
        call: &Call,
        query: CommandStatementQuery,
        descriptor: FlightDescriptor,
    ) -> std::result::Result<FlightInfo, Status> {
        let (p, session) = self.session(call);
        if query.transaction_id.is_some() {
            return Err(super::status::status(
                ErrorKind::Unsupported,
                "transactions are not supported",
            ));
        }
        call.set_object(|| super::audit::statement_object(&query.query));
        let handle = Handle::new(query.query);
        self.statement_info(handle, p, &session, descriptor).await
    }

    pub(crate) async fn get_flight_info_prepared_statement(
        &self,
        call: &Call,
        cmd: CommandPreparedStatementQuery,
        descriptor: FlightDescriptor,
    ) -> std::result::Result<FlightInfo, Status> {
        let (p, session) = self.session(call);
        let handle = self.prepared(&cmd.prepared_statement_handle, p)?;
        self.statement_info(handle, p, &session, descriptor).await
    }

    /// FlightInfo of a metadata command (catalogs, schemas, tables, table types, SqlInfo, keys,
    /// XDBC types): its ticket is the command itself; the schema is the one its DoGet streams.
    pub(crate) fn get_flight_info_metadata(
        &self,
        cmd: Command,
        descriptor: FlightDescriptor,
    ) -> std::result::Result<FlightInfo, Status> {
        let schema = match &cmd {
            Command::CommandGetCatalogs(c) => c.into_builder().schema(),
            Command::CommandGetDbSchemas(c) => c.clone().into_builder().schema(),
            Command::CommandGetTables(c) => c.clone().into_builder().schema(),
            Command::CommandGetTableTypes(c) => c.into_builder().schema(),
            Command::CommandGetSqlInfo(_) => self.sql_info.schema(),
            Command::CommandGetPrimaryKeys(_) => metadata::primary_keys_schema(),
            Command::CommandGetExportedKeys(_)
            | Command::CommandGetImportedKeys(_)
            | Command::CommandGetCrossReference(_) => metadata::foreign_keys_schema(),
            Command::CommandGetXdbcTypeInfo(c) => c.into_builder(&self.xdbc).schema(),
            other => {
                return Err(super::status::status(
                    ErrorKind::Unsupported,
                    format!(
                        "get_flight_info: The defined request is invalid: {}",
                        other.type_url()
                    ),
                ))
            }
        };
        metadata_info(&schema, cmd.into_any(), descriptor)
    }

    pub(crate) async fn do_get_statement(
        &self,
        call: &Call,
        ticket: TicketStatementQuery,
    ) -> std::result::Result<DoGetStream, Status> {
        let (p, session) = self.session(call);
        let handle = Handle::open(&ticket.statement_handle, seal::Kind::Ticket, p, &self.auth)?;
        call.set_object(|| super::audit::statement_object(&handle.sql));
        Self::run_ticket(&p.tenant.engine, handle, &session).await
    }

    pub(crate) async fn do_get_prepared_statement(
        &self,
        call: &Call,
        cmd: CommandPreparedStatementQuery,
    ) -> std::result::Result<DoGetStream, Status> {
        let (p, session) = self.session(call);
        let handle = self.prepared(&cmd.prepared_statement_handle, p)?;
        Self::run_ticket(&p.tenant.engine, handle, &session).await
    }

    pub(crate) fn do_get_catalogs(
        &self,
        call: &Call,
        query: CommandGetCatalogs,
    ) -> std::result::Result<DoGetStream, Status> {
        let mut b = query.into_builder();
        b.append(call.principal.tenant.engine.catalog_name());
        let batch = b
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(batch_stream(batch))
    }

    pub(crate) async fn do_get_schemas(
        &self,
        call: &Call,
        query: CommandGetDbSchemas,
    ) -> std::result::Result<DoGetStream, Status> {
        let engine = &call.principal.tenant.engine;
        let wanted = query.catalog.clone();
        let mut b = query.into_builder();
        if wanted.as_deref().is_none_or(|c| c == engine.catalog_name()) {
            for db in engine.catalog().list_databases().await.map_err(to_status)? {
                b.append(engine.catalog_name(), db);
            }
        }
        let batch = b
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(batch_stream(batch))
    }

    pub(crate) async fn do_get_tables(
        &self,
        call: &Call,
        query: CommandGetTables,
    ) -> std::result::Result<DoGetStream, Status> {
        let p = &call.principal;
        let name = p.tenant.engine.catalog_name();
        let include_schema = query.include_schema;
        let wanted = query.catalog.clone();
        let mut b = query.into_builder();
        if wanted.as_deref().is_none_or(|c| c == name) {
            let catalog = p.tenant.engine.catalog();
            let dbs = catalog.list_databases().await.map_err(to_status)?;
            for (db, t) in Self::all_tables(catalog, &dbs).await.map_err(to_status)? {
                let schema = if include_schema {
                    match catalog
                        .load_table(&Identifier::new(db.clone(), t.clone()))
                        .await
                    {
                        Ok(table) => table.arrow_schema().map_err(to_status)?.as_ref().clone(),
                        // Dropped meanwhile.
                        Err(_) => continue,
                    }
                } else {
                    Schema::empty()
                };
                b.append(name, &db, &t, TABLE_TYPE, &schema)
                    .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
            }
        }
        let batch = b
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(batch_stream(batch))
    }

    pub(crate) fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
    ) -> std::result::Result<DoGetStream, Status> {
        let mut b = query.into_builder();
        b.append(TABLE_TYPE);
        let batch = b
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(batch_stream(batch))
    }

    pub(crate) fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
    ) -> std::result::Result<DoGetStream, Status> {
        let batch = query
            .into_builder(&self.sql_info)
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(batch_stream(batch))
    }

    pub(crate) async fn do_get_primary_keys(
        &self,
        call: &Call,
        query: CommandGetPrimaryKeys,
    ) -> std::result::Result<DoGetStream, Status> {
        let (p, session) = self.session(call);
        Self::check_catalog(p, query.catalog.as_deref())?;
        let db = query
            .db_schema
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or(session.database);
        let id = Identifier::new(db.clone(), query.table.clone());
        let keys = match p.tenant.engine.catalog().load_table(&id).await {
            Ok(t) => t.schema().primary_keys.clone(),
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => vec![],
            Err(e) => return Err(to_status(e)),
        };
        let batch =
            metadata::primary_keys_batch(p.tenant.engine.catalog_name(), &db, &query.table, &keys)
                .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(batch_stream(batch))
    }

    /// Exported keys, imported keys and cross references: always empty (Paimon has no foreign
    /// keys).
    pub(crate) fn do_get_foreign_keys(&self) -> DoGetStream {
        batch_stream(RecordBatch::new_empty(metadata::foreign_keys_schema()))
    }

    pub(crate) fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
    ) -> std::result::Result<DoGetStream, Status> {
        let batch = query
            .into_builder(&self.xdbc)
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(batch_stream(batch))
    }

    pub(crate) async fn do_put_statement_update(
        &self,
        call: &Call,
        ticket: CommandStatementUpdate,
    ) -> std::result::Result<i64, Status> {
        let (p, session) = self.session(call);
        if ticket.transaction_id.is_some() {
            return Err(super::status::status(
                ErrorKind::Unsupported,
                "transactions are not supported",
            ));
        }
        p.tenant
            .engine
            .execute_update(&session, &ticket.query, &[])
            .await
            .map_err(to_status)
    }

    pub(crate) async fn do_put_statement_ingest(
        &self,
        call: &Call,
        ticket: CommandStatementIngest,
        input: FlightDataIn,
    ) -> std::result::Result<i64, Status> {
        let n = self.ingest(call, ticket, input).await?;
        call.add_rows(u64::try_from(n).unwrap_or(0));
        Ok(n)
    }

    pub(crate) async fn do_put_prepared_statement_query(
        &self,
        call: &Call,
        query: CommandPreparedStatementQuery,
        input: FlightDataIn,
    ) -> std::result::Result<DoPutPreparedStatementResult, Status> {
        let p = &call.principal;
        let mut handle = self.prepared(&query.prepared_statement_handle, p)?;
        let params = Self::read_params(input).await?;
        handle.params = encode_params(&params)?;
        handle.count = None;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.seal(seal::Kind::Handle, p, &self.auth)),
        })
    }

    pub(crate) async fn do_put_prepared_statement_update(
        &self,
        call: &Call,
        query: CommandPreparedStatementUpdate,
        input: FlightDataIn,
    ) -> std::result::Result<i64, Status> {
        let (p, session) = self.session(call);
        let mut handle = self.prepared(&query.prepared_statement_handle, p)?;
        let params = Self::read_params(input).await?;
        if !params.is_empty() {
            handle.params = encode_params(&params)?;
        }
        Self::run_update(&p.tenant.engine, &handle, &session).await
    }
}

/// What arrow-flight's own Flight SQL layer still answers for the dispatcher: ListActions (the
/// Flight SQL actions, then tidelake's) and the Flight SQL actions tidelake does not implement
/// (transactions, savepoints, Substrait plans, CancelQuery: Unimplemented). Every command the
/// server serves is dispatched by `super::service` to the handlers above, never through this
/// trait's defaults.
#[tonic::async_trait]
impl FlightSqlService for TidelakeFlightSql {
    type FlightService = TidelakeFlightSql;

    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> std::result::Result<
        Response<
            std::pin::Pin<
                Box<dyn Stream<Item = std::result::Result<HandshakeResponse, Status>> + Send>,
            >,
        >,
        Status,
    > {
        // Handled by the service before it reaches here.
        Err(super::status::status(
            ErrorKind::Internal,
            "handshake is handled by the service",
        ))
    }

    async fn list_custom_actions(&self) -> Option<Vec<std::result::Result<ActionType, Status>>> {
        Some(
            super::session::SESSION_ACTIONS
                .iter()
                .chain(super::admin::ADMIN_ACTIONS)
                .map(|(name, description)| {
                    Ok(ActionType {
                        r#type: name.to_string(),
                        description: description.to_string(),
                    })
                })
                .collect(),
        )
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
