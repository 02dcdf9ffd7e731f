//! The Flight SQL handlers: statements, prepared statements, metadata calls and bulk ingest,
//! thin adapters over [`SqlEngine`] and the catalog. Authentication happens in the service
//! wrapper ([`super::service`]), which puts the caller's [`Principal`] into each request.
//!
//! Tickets and prepared-statement handles are self-contained (SQL, bound parameters, owner), so
//! any request can be served without server-side statement state.

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
use super::metadata;
use super::status::{invalid, to_status};
use crate::catalog::{Identifier, TableDefinition};
use crate::error::Result;
use crate::sql::{Role, SqlEngine, SqlSession, StatementKind, CATALOG_NAME};
use crate::table::{Overwrite, WriteOptions};

/// Largest FlightData message the server sends (batches are split to fit).
pub const MAX_FLIGHT_DATA: usize = 2 * 1024 * 1024;

/// The only table type.
pub const TABLE_TYPE: &str = "TABLE";

type DoGetStream = std::pin::Pin<
    Box<dyn Stream<Item = std::result::Result<arrow_flight::FlightData, Status>> + Send>,
>;

/// A statement ticket or prepared-statement handle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Handle {
    /// The user the handle was issued to; nobody else may use it.
    pub(crate) user: String,
    pub(crate) sql: String,
    /// Bound parameters as a base64 Arrow IPC stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) params: Option<String>,
    /// The count of an update already executed (updates run when their FlightInfo is requested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) count: Option<i64>,
}

impl Handle {
    fn encode(&self) -> bytes::Bytes {
        serde_json::to_vec(self).unwrap_or_default().into()
    }

    fn decode(bytes: &[u8], principal: &Principal) -> std::result::Result<Self, Status> {
        let h: Handle = serde_json::from_slice(bytes)
            .map_err(|_| invalid("malformed statement handle or ticket"))?;
        if h.user != principal.user {
            return Err(super::status::status(
                ErrorKind::PermissionDenied,
                "this statement handle belongs to another user",
            ));
        }
        Ok(h)
    }

    /// The bound parameter rows (one set of values per row).
    fn param_rows(&self) -> std::result::Result<Vec<Vec<ScalarValue>>, Status> {
        let Some(p) = &self.params else {
            return Ok(vec![]);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(p)
            .map_err(|_| invalid("malformed parameters in statement handle"))?;
        // The handle came from the client: its stream is checked before arrow sizes anything.
        super::ipc::check_ipc_stream(&bytes)
            .map_err(|e| invalid(format!("malformed parameters: {e}")))?;
        let reader = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
            .map_err(|e| invalid(format!("malformed parameters: {e}")))?;
        let mut rows = Vec::new();
        for b in reader {
            let b = b.map_err(|e| invalid(format!("malformed parameters: {e}")))?;
            for r in 0..b.num_rows() {
                let row = b
                    .columns()
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, r))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| invalid(format!("parameter: {e}")))?;
                rows.push(row);
            }
        }
        Ok(rows)
    }
}

fn encode_params(batches: &[RecordBatch]) -> std::result::Result<Option<String>, Status> {
    let Some(first) = batches.first() else {
        return Ok(None);
    };
    let mut buf = Vec::new();
    {
        let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut buf, &first.schema())
            .map_err(|e| invalid(format!("parameters: {e}")))?;
        for b in batches {
            w.write(b)
                .map_err(|e| invalid(format!("parameters: {e}")))?;
        }
        w.finish()
            .map_err(|e| invalid(format!("parameters: {e}")))?;
    }
    Ok(Some(base64::engine::general_purpose::STANDARD.encode(buf)))
}

/// `input` with every message checked by [`super::ipc`] before arrow decodes it.
fn checked_flight_data(
    input: impl Stream<Item = std::result::Result<arrow_flight::FlightData, FlightError>>
        + Send
        + 'static,
) -> impl Stream<Item = std::result::Result<arrow_flight::FlightData, FlightError>> + Send + 'static
{
    let mut schema: Option<Schema> = None;
    input.map(move |r| {
        let fd = r?;
        if let Some(s) =
            super::ipc::check_flight_data(&fd, schema.as_ref()).map_err(FlightError::DecodeError)?
        {
            schema = Some(s);
        }
        Ok(fd)
    })
}

/// The caller, as put into the request by the service wrapper.
pub(crate) fn principal<T>(req: &Request<T>) -> std::result::Result<Principal, Status> {
    req.extensions().get::<Principal>().cloned().ok_or_else(|| {
        super::status::status(ErrorKind::Unauthenticated, "request was not authenticated")
    })
}

/// The plain (non-view) equivalent of a type: JDBC before 19 cannot read view types.
fn plain_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::ListView(f) | DataType::List(f) => DataType::List(plain_field(f)),
        DataType::LargeListView(f) | DataType::LargeList(f) => DataType::LargeList(plain_field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(plain_field(f), *n),
        DataType::Struct(fs) => DataType::Struct(fs.iter().map(plain_field).collect()),
        DataType::Map(f, sorted) => DataType::Map(plain_field(f), *sorted),
        DataType::Dictionary(_, v) => plain_type(v),
        other => other.clone(),
    }
}

fn plain_field(f: &FieldRef) -> FieldRef {
    Arc::new(
        Field::new(f.name(), plain_type(f.data_type()), f.is_nullable())
            .with_metadata(f.metadata().clone()),
    )
}

/// The schema clients see: plain types, the query's nullability.
pub(crate) fn plain_schema(s: &Schema) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        s.fields().iter().map(plain_field).collect::<Vec<_>>(),
        s.metadata().clone(),
    ))
}

/// `batch` relabelled to `schema` (casting view types), so every message matches FlightInfo.
fn conform(
    batch: RecordBatch,
    schema: &SchemaRef,
) -> std::result::Result<RecordBatch, FlightError> {
    let cols: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(Arc::clone(c))
            } else {
                arrow::compute::cast(c, f.data_type())
            }
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(FlightError::Arrow)?;
    let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(Arc::clone(schema), cols, &opts).map_err(FlightError::Arrow)
}

/// Encodes a stream of batches as FlightData, batch by batch (never collected).
pub(crate) fn encode_stream(
    schema: SchemaRef,
    batches: BoxStream<'static, Result<RecordBatch>>,
) -> DoGetStream {
    let target = Arc::clone(&schema);
    let input = batches.map(move |r| match r {
        Ok(b) => conform(b, &target),
        Err(e) => Err(FlightError::Tonic(Box::new(to_status(e)))),
    });
    let encoded = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .with_max_flight_data_size(MAX_FLIGHT_DATA)
        .build(input)
        .map_err(Status::from);
    Box::pin(encoded)
}

fn batch_stream(batch: RecordBatch) -> DoGetStream {
    let schema = batch.schema();
    encode_stream(schema, stream::iter([Ok(batch)]).boxed())
}

fn ipc_schema(schema: &Schema) -> std::result::Result<bytes::Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: arrow::error::ArrowError| {
            super::status::status(ErrorKind::Internal, e.to_string())
        })?;
    Ok(bytes)
}

fn flight_info(
    schema: &Schema,
    ticket: bytes::Bytes,
    descriptor: FlightDescriptor,
) -> std::result::Result<FlightInfo, Status> {
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?
        .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
        .with_descriptor(descriptor);
    Ok(info)
}

/// The Flight SQL side of tidelake.
pub struct TidelakeFlightSql {
    pub(crate) engine: SqlEngine,
    pub(crate) auth: Arc<Authenticator>,
    sql_info: SqlInfoData,
    xdbc: XdbcTypeInfoData,
}

impl std::fmt::Debug for TidelakeFlightSql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TidelakeFlightSql")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl TidelakeFlightSql {
    pub fn new(engine: SqlEngine, auth: Arc<Authenticator>) -> Self {
        Self {
            engine,
            auth,
            sql_info: metadata::sql_info(),
            xdbc: metadata::xdbc_types(),
        }
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
        session: &SqlSession,
        descriptor: FlightDescriptor,
    ) -> std::result::Result<FlightInfo, Status> {
        let first = handle.param_rows()?.into_iter().next().unwrap_or_default();
        let (kind, schema, _) = self
            .engine
            .describe_with(session, &handle.sql, &first)
            .await
            .map_err(to_status)?;
        let schema = match kind {
            StatementKind::Update => {
                handle.count = Some(self.run_update(&handle, session).await?);
                crate::sql::count_schema()
            }
            StatementKind::Query => plain_schema(&schema),
        };
        let ticket = TicketStatementQuery {
            statement_handle: handle.encode(),
        }
        .as_any()
        .encode_to_vec();
        flight_info(&schema, ticket.into(), descriptor)
    }

    /// Runs an update once per bound parameter row (once without parameters).
    async fn run_update(
        &self,
        handle: &Handle,
        session: &SqlSession,
    ) -> std::result::Result<i64, Status> {
        let rows = handle.param_rows()?;
        self.engine
            .execute_update_many(session, &handle.sql, &rows)
            .await
            .map_err(to_status)
    }

    async fn run_ticket(
        &self,
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
        let out = self
            .engine
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
        let (kind, schema, params) = self
            .engine
            .describe(&session, &query)
            .await
            .map_err(to_status)?;
        let handle = Handle {
            user: principal.user.clone(),
            sql: query,
            params: None,
            count: None,
        };
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
                prepared_statement_handle: handle.encode(),
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
                Handle::decode(&p.prepared_statement_handle, principal)?.sql
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
        let (kind, schema, _) = self
            .engine
            .describe(&session, &sql)
            .await
            .map_err(to_status)?;
        Ok(match kind {
            StatementKind::Query => plain_schema(&schema),
            StatementKind::Update => crate::sql::count_schema(),
        })
    }

    async fn all_tables(&self, databases: &[String]) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for db in databases {
            for t in self.engine.catalog().list_tables(db).await? {
                out.push((db.clone(), t));
            }
        }
        Ok(out)
    }

    fn check_catalog(catalog: Option<&str>) -> std::result::Result<(), Status> {
        match catalog {
            None | Some("") => Ok(()),
            Some(c) if c == CATALOG_NAME => Ok(()),
            Some(c) => Err(super::status::status(
                ErrorKind::NotFound,
                format!("unknown catalog '{c}'; the catalog is '{CATALOG_NAME}'"),
            )),
        }
    }

    /// Bulk ingest: streams the batches into one writer and commits once at the end.
    async fn ingest(
        &self,
        cmd: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        let (_, session) = self.session(&request)?;
        Self::check_catalog(cmd.catalog.as_deref())?;
        if cmd.temporary {
            return Err(super::status::status(
                ErrorKind::Unsupported,
                "temporary tables are not supported",
            ));
        }
        if cmd.transaction_id.is_some() {
            return Err(super::status::status(
                ErrorKind::Unsupported,
                "transactions are not supported",
            ));
        }
        let database = cmd
            .schema
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or(session.database.clone());
        let id = Identifier::new(database, cmd.table.clone());
        let opts = cmd.table_definition_options.unwrap_or_default();
        let if_not_exist = TableNotExistOption::try_from(opts.if_not_exist)
            .unwrap_or(TableNotExistOption::Unspecified);
        let if_exists =
            TableExistsOption::try_from(opts.if_exists).unwrap_or(TableExistsOption::Unspecified);
        let mut batches = FlightRecordBatchStream::new_from_flight_data(checked_flight_data(
            request.into_inner().map_err(FlightError::from),
        ));
        // The first batch (or the end) makes the stream's schema known.
        let first = batches
            .next()
            .await
            .transpose()
            .map_err(|e| invalid(format!("ingest into {id}: {e}")))?;
        let Some(schema) = batches.schema().cloned() else {
            return Err(invalid(format!(
                "ingest into {id}: the stream has no schema"
            )));
        };
        let catalog = self.engine.catalog();
        let exists = match catalog.load_table(&id).await {
            Ok(_) => true,
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => false,
            Err(e) => return Err(to_status(e)),
        };
        let mut row_kind_column = None;
        let mut def = TableDefinition::default();
        for (k, v) in &cmd.options {
            let list = || {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
            };
            match k.as_str() {
                "primary-key" | "tidelake.primary-key" => def.primary_keys = list(),
                "partition-keys" | "tidelake.partition-keys" => def.partition_keys = list(),
                "row-kind-column" | "tidelake.row-kind-column" => row_kind_column = Some(v.clone()),
                _ => {
                    def.options.insert(k.clone(), v.clone());
                }
            }
        }
        let mut overwrite = None;
        if exists {
            match if_exists {
                TableExistsOption::Append => {}
                TableExistsOption::Replace => overwrite = Some(Overwrite::Table),
                _ => {
                    return Err(super::status::status(
                        ErrorKind::AlreadyExists,
                        format!("table '{id}' already exists"),
                    ))
                }
            }
        } else if if_not_exist != TableNotExistOption::Create {
            return Err(super::status::status(
                ErrorKind::NotFound,
                format!("table '{id}' does not exist"),
            ));
        }
        if !exists || overwrite.is_some() {
            let mut columns = Vec::new();
            for f in schema.fields() {
                if Some(f.name()) == row_kind_column.as_ref() {
                    continue;
                }
                let nullable = f.is_nullable() && !def.primary_keys.contains(f.name());
                let Some(ty) =
                    crate::spec::DataType::from_arrow(&plain_type(f.data_type()), nullable)
                else {
                    return Err(invalid(format!(
                        "ingest into {id}: column '{}' has type {} which Paimon tables cannot store",
                        f.name(),
                        f.data_type()
                    )));
                };
                columns.push((f.name().clone(), ty));
            }
            def.columns = columns;
        }
        if !exists
            && !catalog
                .database_exists(&id.database)
                .await
                .map_err(to_status)?
        {
            return Err(super::status::status(
                ErrorKind::NotFound,
                format!("database '{}' does not exist", id.database),
            ));
        }
        // A new table, or a replacement whose definition differs, is written into a staging
        // table first and renamed into place once the data is committed: a failed ingest leaves
        // no table behind and the replaced one untouched.
        let staged = if !exists {
            true
        } else if overwrite.is_some() {
            let table = catalog.load_table(&id).await.map_err(to_status)?;
            !same_definition(table.schema(), &def)
        } else {
            false
        };
        let needed = if staged {
            (Role::Admin, "an ingest that creates or redefines a table")
        } else {
            (Role::Writer, "ingest")
        };
        session
            .role
            .require(needed.0, needed.1)
            .map_err(to_status)?;
        let ident = id.to_string();
        let rest = batches.map(move |r| {
            r.map_err(|e| {
                crate::error::InvalidArgumentSnafu {
                    message: format!("ingest into {ident}: {e}"),
                }
                .build()
            })
        });
        let all = stream::iter(first.map(Ok)).chain(rest).boxed();
        let options = WriteOptions { row_kind_column };
        if !staged {
            let table = catalog.load_table(&id).await.map_err(to_status)?;
            return table
                .write_stream(all, options, overwrite)
                .await
                .map_err(to_status);
        }
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let staging = Identifier::new(id.database.clone(), format!("_tidelake_ingest_{tag}"));
        let table = catalog
            .create_table(&staging, &def, false)
            .await
            .map_err(to_status)?;
        let written = match table.write_stream(all, options, None).await {
            Ok(n) => n,
            Err(e) => {
                drop_staging(catalog, &staging).await;
                return Err(to_status(e));
            }
        };
        if !exists {
            if let Err(e) = catalog.rename_table(&staging, &id).await {
                drop_staging(catalog, &staging).await;
                return Err(to_status(e));
            }
            return Ok(written);
        }
        // Replace: the old table steps aside, the new one takes its name, the old one goes.
        let old = Identifier::new(id.database.clone(), format!("_tidelake_replaced_{tag}"));
        if let Err(e) = catalog.rename_table(&id, &old).await {
            drop_staging(catalog, &staging).await;
            return Err(to_status(e));
        }
        if let Err(e) = catalog.rename_table(&staging, &id).await {
            if let Err(back) = catalog.rename_table(&old, &id).await {
                tracing::error!(table = %id, error = %back, "could not restore a replaced table");
            }
            drop_staging(catalog, &staging).await;
            return Err(to_status(e));
        }
        drop_staging(catalog, &old).await;
        Ok(written)
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

/// FlightInfo of a metadata command: its ticket is the command itself (as an `Any`).
fn metadata_info<C: ProstMessageExt>(
    schema: &Schema,
    cmd: &C,
    request: Request<FlightDescriptor>,
) -> std::result::Result<Response<FlightInfo>, Status> {
    let ticket = cmd.as_any().encode_to_vec().into();
    Ok(Response::new(flight_info(
        schema,
        ticket,
        request.into_inner(),
    )?))
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
        let handle = Handle {
            user: p.user,
            sql: query.query,
            params: None,
            count: None,
        };
        let info = self
            .statement_info(handle, &session, request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let (p, session) = self.session(&request)?;
        let handle = Handle::decode(&cmd.prepared_statement_handle, &p)?;
        let info = self
            .statement_info(handle, &session, request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let (p, session) = self.session(&request)?;
        let handle = Handle::decode(&ticket.statement_handle, &p)?;
        self.run_ticket(handle, &session).await
    }

    async fn do_get_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let (p, session) = self.session(&request)?;
        let handle = Handle::decode(&cmd.prepared_statement_handle, &p)?;
        self.run_ticket(handle, &session).await
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
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let mut b = query.into_builder();
        b.append(CATALOG_NAME);
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
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let wanted = query.catalog.clone();
        let mut b = query.into_builder();
        if wanted.as_deref().is_none_or(|c| c == CATALOG_NAME) {
            for db in self
                .engine
                .catalog()
                .list_databases()
                .await
                .map_err(to_status)?
            {
                b.append(CATALOG_NAME, db);
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
        _request: Request<Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let include_schema = query.include_schema;
        let wanted = query.catalog.clone();
        let mut b = query.into_builder();
        if wanted.as_deref().is_none_or(|c| c == CATALOG_NAME) {
            let catalog = self.engine.catalog();
            let dbs = catalog.list_databases().await.map_err(to_status)?;
            for (db, t) in self.all_tables(&dbs).await.map_err(to_status)? {
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
                b.append(CATALOG_NAME, &db, &t, TABLE_TYPE, &schema)
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
        let (_, session) = self.session(&request)?;
        Self::check_catalog(query.catalog.as_deref())?;
        let db = query
            .db_schema
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or(session.database);
        let id = Identifier::new(db.clone(), query.table.clone());
        let keys = match self.engine.catalog().load_table(&id).await {
            Ok(t) => t.schema().primary_keys.clone(),
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => vec![],
            Err(e) => return Err(to_status(e)),
        };
        let batch = metadata::primary_keys_batch(CATALOG_NAME, &db, &query.table, &keys)
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

    async fn do_put_statement_update(
        &self,
        ticket: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        let (_, session) = self.session(&request)?;
        if ticket.transaction_id.is_some() {
            return Err(super::status::status(
                ErrorKind::Unsupported,
                "transactions are not supported",
            ));
        }
        self.engine
            .execute_update(&session, &ticket.query, &[])
            .await
            .map_err(to_status)
    }

    async fn do_put_statement_ingest(
        &self,
        ticket: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        self.ingest(ticket, request).await
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<DoPutPreparedStatementResult, Status> {
        let p = principal(&request)?;
        let mut handle = Handle::decode(&query.prepared_statement_handle, &p)?;
        let params = Self::read_params(request).await?;
        handle.params = encode_params(&params)?;
        handle.count = None;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.encode()),
        })
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        let (p, session) = self.session(&request)?;
        let mut handle = Handle::decode(&query.prepared_statement_handle, &p)?;
        let params = Self::read_params(request).await?;
        if !params.is_empty() {
            handle.params = encode_params(&params)?;
        }
        self.run_update(&handle, &session).await
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
            super::service::SESSION_ACTIONS
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

/// Whether a table already has the definition an ingest asks for: the same column names and types
/// (nullability aside: NOT NULL columns stay so, and a null in them fails the write) and, where
/// the request names them, the same keys and options.
fn same_definition(schema: &crate::spec::TableSchema, def: &TableDefinition) -> bool {
    let columns = schema.fields.len() == def.columns.len()
        && schema
            .fields
            .iter()
            .zip(&def.columns)
            .all(|(a, (n, t))| &a.name == n && a.data_type.root == t.root);
    let keys = (def.primary_keys.is_empty() || def.primary_keys == schema.primary_keys)
        && (def.partition_keys.is_empty() || def.partition_keys == schema.partition_keys);
    let options = def
        .options
        .iter()
        .all(|(k, v)| schema.options.get(k) == Some(v));
    columns && keys && options
}

/// Removes a staging (or replaced) table of an ingest, logging what cannot be removed (an orphan
/// directory an operator can delete).
async fn drop_staging(catalog: &crate::catalog::Catalog, id: &Identifier) {
    if let Err(e) = catalog.drop_table(id, true).await {
        tracing::warn!(table = %id, error = %e, "could not remove an ingest's staging table");
    }
}
