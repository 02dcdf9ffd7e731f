//! The Flight SQL handlers: statements, prepared statements, metadata calls and bulk ingest,
//! thin adapters over [`SqlEngine`] and the catalog. Authentication happens in the service
//! wrapper ([`super::service`]), which puts the caller's [`Principal`] into each request.
//!
//! Tickets and prepared-statement handles are self-contained (SQL, bound parameters, owner), so
//! any request can be served without server-side statement state (`tickets`). What is sent is
//! built in `encode`; bulk ingest lives in `ingest`; this file holds the dispatch of every Flight
//! SQL call and the statement and metadata handlers.

use crate::error::ErrorKind;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use arrow::ipc::writer::IpcWriteOptions;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::sql::metadata::{SqlInfoData, XdbcTypeInfoData};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetCrossReference,
    CommandGetDbSchemas, CommandGetExportedKeys, CommandGetImportedKeys, CommandGetPrimaryKeys,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandGetXdbcTypeInfo,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, CommandStatementIngest,
    CommandStatementQuery, CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt,
    SqlInfo, TableExistsOption, TableNotExistOption, TicketStatementQuery,
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

use super::auth::{Authenticator, Principal};
use super::ipc::checked_flight_data;
use super::metadata;
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

type DoGetStream = std::pin::Pin<
    Box<dyn Stream<Item = std::result::Result<arrow_flight::FlightData, Status>> + Send>,
>;

/// The caller, as put into the request by the service wrapper.
pub(crate) fn principal<T>(req: &Request<T>) -> std::result::Result<Principal, Status> {
    req.extensions().get::<Principal>().cloned().ok_or_else(|| {
        super::status::status(ErrorKind::Unauthenticated, "request was not authenticated")
    })
}

/// Records what `req`'s call is about in its audit line (when the gate put a note there).
pub(crate) fn audit_object<T>(req: &Request<T>, object: impl FnOnce() -> String) {
    if let Some(note) = req.extensions().get::<Arc<super::audit::AuditNote>>() {
        note.set_object(object());
    }
}

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

    fn session<T>(&self, req: &Request<T>) -> std::result::Result<(Principal, SqlSession), Status> {
        let p = principal(req)?;
        let s = self.auth.session(&p);
        Ok((p, s))
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
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        if let Some(n) = handle.count {
            let batch = RecordBatch::try_new(
                crate::sql::count_schema(),
                vec![Arc::new(arrow::array::Int64Array::from(vec![n]))],
            )
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
            return Ok(Response::new(batch_stream(batch)));
        }
        let params = handle.param_rows()?.into_iter().next().unwrap_or_default();
        let out = engine
            .execute(session, &handle.sql, &params)
            .await
            .map_err(to_status)?;
        if out.kind == StatementKind::Update {
            // A ticket for an update whose FlightInfo was not requested first (raw clients).
            return Ok(Response::new(encode_stream(out.schema, out.stream)));
        }
        let schema = plain_schema(&out.schema);
        Ok(Response::new(encode_stream(schema, out.stream)))
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
        cmd: arrow_flight::sql::Command,
    ) -> std::result::Result<SchemaRef, Status> {
        use arrow_flight::sql::Command;
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

    async fn read_params(
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<Vec<RecordBatch>, Status> {
        let batches: Vec<RecordBatch> = FlightRecordBatchStream::new_from_flight_data(
            checked_flight_data(request.into_inner().map_err(FlightError::from)),
        )
        .try_collect()
        .await
        .map_err(|e| invalid(format!("parameters: {e}")))?;
        Ok(batches.into_iter().filter(|b| b.num_rows() > 0).collect())
    }
}

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
        // Handled by the service wrapper before it reaches here.
        Err(super::status::status(
            ErrorKind::Internal,
            "handshake is handled by the service",
        ))
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let (p, session) = self.session(&request)?;
        if query.transaction_id.is_some() {
            return Err(super::status::status(
                ErrorKind::Unsupported,
                "transactions are not supported",
            ));
        }
        audit_object(&request, || super::audit::statement_object(&query.query));
        let handle = Handle::new(query.query);
        let info = self
            .statement_info(handle, &p, &session, request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let (p, session) = self.session(&request)?;
        let handle = self.prepared(&cmd.prepared_statement_handle, &p)?;
        let info = self
            .statement_info(handle, &p, &session, request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let (p, session) = self.session(&request)?;
        let handle = Handle::open(&ticket.statement_handle, seal::Kind::Ticket, &p, &self.auth)?;
        audit_object(&request, || super::audit::statement_object(&handle.sql));
        Self::run_ticket(&p.tenant.engine, handle, &session).await
    }

    async fn do_get_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let (p, session) = self.session(&request)?;
        let handle = self.prepared(&cmd.prepared_statement_handle, &p)?;
        Self::run_ticket(&p.tenant.engine, handle, &session).await
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        metadata_info(&schema, &query, request)
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let p = principal(&request)?;
        let mut b = query.into_builder();
        b.append(p.tenant.engine.catalog_name());
        let batch = b
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(Response::new(batch_stream(batch)))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        metadata_info(&schema, &query, request)
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let p = principal(&request)?;
        let engine = &p.tenant.engine;
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
        Ok(Response::new(batch_stream(batch)))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        metadata_info(&schema, &query, request)
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let p = principal(&request)?;
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
        Ok(Response::new(batch_stream(batch)))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        metadata_info(&schema, &query, request)
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let mut b = query.into_builder();
        b.append(TABLE_TYPE);
        let batch = b
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(Response::new(batch_stream(batch)))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        metadata_info(&self.sql_info.schema(), &query, request)
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let batch = query
            .into_builder(&self.sql_info)
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(Response::new(batch_stream(batch)))
    }

    async fn get_flight_info_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        metadata_info(&metadata::primary_keys_schema(), &query, request)
    }

    async fn do_get_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let (p, session) = self.session(&request)?;
        Self::check_catalog(&p, query.catalog.as_deref())?;
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
        Ok(Response::new(batch_stream(batch)))
    }

    async fn get_flight_info_exported_keys(
        &self,
        query: CommandGetExportedKeys,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        metadata_info(&metadata::foreign_keys_schema(), &query, request)
    }

    async fn do_get_exported_keys(
        &self,
        _query: CommandGetExportedKeys,
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        Ok(Response::new(batch_stream(RecordBatch::new_empty(
            metadata::foreign_keys_schema(),
        ))))
    }

    async fn get_flight_info_imported_keys(
        &self,
        query: CommandGetImportedKeys,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        metadata_info(&metadata::foreign_keys_schema(), &query, request)
    }

    async fn do_get_imported_keys(
        &self,
        _query: CommandGetImportedKeys,
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        Ok(Response::new(batch_stream(RecordBatch::new_empty(
            metadata::foreign_keys_schema(),
        ))))
    }

    async fn get_flight_info_cross_reference(
        &self,
        query: CommandGetCrossReference,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        metadata_info(&metadata::foreign_keys_schema(), &query, request)
    }

    async fn do_get_cross_reference(
        &self,
        _query: CommandGetCrossReference,
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        Ok(Response::new(batch_stream(RecordBatch::new_empty(
            metadata::foreign_keys_schema(),
        ))))
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder(&self.xdbc).schema();
        metadata_info(&schema, &query, request)
    }

    async fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let batch = query
            .into_builder(&self.xdbc)
            .build()
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        Ok(Response::new(batch_stream(batch)))
    }

    async fn do_put_fallback(
        &self,
        request: Request<PeekableFlightDataStream>,
        message: arrow_flight::sql::Any,
    ) -> std::result::Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoPutStream>,
        Status,
    > {
        match super::streaming::parse_command(&message) {
            Some(cmd) => super::streaming::serve(&self.auth, request, cmd?).await,
            None => Err(super::status::status(
                ErrorKind::Unsupported,
                format!("DoPut: unknown command {}", message.type_url),
            )),
        }
    }

    async fn do_put_statement_update(
        &self,
        ticket: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        let (p, session) = self.session(&request)?;
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

    async fn do_put_statement_ingest(
        &self,
        ticket: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        let note = request
            .extensions()
            .get::<Arc<super::audit::AuditNote>>()
            .cloned();
        let n = self.ingest(ticket, request).await?;
        if let Some(note) = note {
            note.add_rows(u64::try_from(n).unwrap_or(0));
        }
        Ok(n)
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<DoPutPreparedStatementResult, Status> {
        let p = principal(&request)?;
        let mut handle = self.prepared(&query.prepared_statement_handle, &p)?;
        let params = Self::read_params(request).await?;
        handle.params = encode_params(&params)?;
        handle.count = None;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.seal(seal::Kind::Handle, &p, &self.auth)),
        })
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        let (p, session) = self.session(&request)?;
        let mut handle = self.prepared(&query.prepared_statement_handle, &p)?;
        let params = Self::read_params(request).await?;
        if !params.is_empty() {
            handle.params = encode_params(&params)?;
        }
        Self::run_update(&p.tenant.engine, &handle, &session).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> std::result::Result<ActionCreatePreparedStatementResult, Status> {
        let p = principal(&request)?;
        if query.transaction_id.is_some() {
            return Err(super::status::status(
                ErrorKind::Unsupported,
                "transactions are not supported",
            ));
        }
        Ok(self.prepare(&p, query.query).await?.0)
    }

    async fn do_action_close_prepared_statement(
        &self,
        _query: ActionClosePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> std::result::Result<(), Status> {
        // Handles hold no server state.
        Ok(())
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
