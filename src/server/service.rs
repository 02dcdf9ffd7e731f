//! The Flight service tonic serves, behind the gate (`super::gate`) that resolved each call's
//! principal, and the one place every request kind is dispatched from: each RPC decodes what it
//! was sent and matches it to the handler that serves it, so where a call lands is read here.
//!
//! ```text
//!  DoGet      ChangelogTicket              -> subscription::subscribe (no deadline)
//!             TicketStatementQuery, CommandPreparedStatementQuery, CommandGet*
//!                                          -> flight_sql::do_get_* (a statement, deadline)
//!  DoPut      tidelake.StreamingWrite      -> streaming::serve (gives its slot back once open)
//!             CommandStatementUpdate, CommandStatementIngest, CommandPreparedStatement*
//!                                          -> flight_sql::do_put_*
//!  DoAction   CreatePreparedStatement, ClosePreparedStatement -> flight_sql
//!             SetSessionOptions, GetSessionOptions, CloseSession, CancelFlightInfo -> session
//!             tidelake.*                   -> admin::run
//!             other Flight SQL actions     -> arrow-flight's answers (Unimplemented)
//!  GetFlightInfo, PollFlightInfo, GetSchema: Flight SQL commands -> flight_sql
//!  Handshake, ListActions, ListFlights: answered here (ListActions by arrow-flight's list)
//! ```
//!
//! Each call's context ([`Call`]: principal, audit note, shutdown) is made once here and handed
//! to the handler. Authentication and the cheap calls are answered on the IO runtime; every call
//! that plans, reads, writes or maintains a table runs on its own work thread ([`WorkPool`]),
//! admitted per user with an [`AdmissionPermit`], its errors bounded ([`bounded`]) and a
//! statement's stream ended at its deadline.

use crate::error::ErrorKind;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest, Any, Command,
    DoPutUpdateResult, ProstMessageExt,
};
use arrow_flight::{
    Action, BasicAuth, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo, HandshakeRequest,
    HandshakeResponse, PollInfo, PutResult, SchemaAsIpc, SchemaResult, Ticket,
};
use futures::stream::{self, StreamExt};
use prost::Message;
use tidelake_client::proto::StreamingWrite;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::auth::Authenticator;
use super::call::{self, holding, AdmissionPermit, Call, MintedToken, Responses, Shutdown};
use super::flight_sql::TidelakeFlightSql;
use super::ipc::FlightDataIn;
use super::principal::Principal;
use super::status::{bounded, status, to_status};
use super::subscription::{self, ChangelogTicket};
use super::{admin, session, streaming};
use crate::runtime::{with_deadline, Panicked, WorkPool};

/// The authenticated Flight service.
#[derive(Debug, Clone)]
pub struct TidelakeService {
    sql: Arc<TidelakeFlightSql>,
    auth: Arc<Authenticator>,
    work: WorkPool,
    /// Requested when the server starts shutting down: streams that never end by themselves
    /// (subscriptions, streaming writes) end then.
    shutdown: Shutdown,
}

/// When a statement ends, and with which status.
#[derive(Debug, Clone)]
struct Deadline {
    at: tokio::time::Instant,
    status: Status,
}

/// What a DoGet's ticket asks for.
#[derive(Debug)]
enum Get {
    /// A changelog subscription.
    Subscribe(ChangelogTicket),
    /// A Flight SQL statement ticket or metadata command.
    Sql(Command),
}

impl Get {
    fn of(ticket: &[u8]) -> Result<Self, Status> {
        if let Some(t) = subscription::parse_ticket(ticket) {
            return t.map(Get::Subscribe).map_err(bounded);
        }
        Ok(Get::Sql(flight_sql_command(ticket, "ticket")?))
    }
}

/// What a DoPut's descriptor (in its first message) asks for.
#[derive(Debug)]
enum Put {
    /// A streaming write.
    Stream(StreamingWrite),
    /// A Flight SQL update, ingest or prepared-statement parameters.
    Sql(Command),
}

impl Put {
    fn of(first: Option<&Result<FlightData, Status>>) -> Result<Self, Status> {
        let first = match first {
            None => return Err(invalid("DoPut: the stream has no message")),
            Some(Err(s)) => return Err(s.clone()),
            Some(Ok(first)) => first,
        };
        let Some(descriptor) = &first.flight_descriptor else {
            return Err(invalid("DoPut: the first message has no descriptor"));
        };
        let any = Any::decode(descriptor.cmd.as_ref())
            .map_err(|e| invalid(format!("DoPut: malformed descriptor command: {e}")))?;
        if let Some(cmd) = streaming::parse_command(&any) {
            return cmd.map(Put::Stream);
        }
        Command::try_from(any)
            .map(Put::Sql)
            .map_err(|e| invalid(format!("DoPut: malformed descriptor command: {e}")))
    }
}

fn invalid(message: impl Into<String>) -> Status {
    status(ErrorKind::InvalidArgument, message)
}

/// The Flight SQL command in `bytes` (an `Any`), named `what` in errors.
fn flight_sql_command(bytes: &[u8], what: &str) -> Result<Command, Status> {
    let any = Any::decode(bytes).map_err(|e| invalid(format!("malformed {what}: {e}")))?;
    Command::try_from(any).map_err(|e| invalid(format!("malformed {what}: {e}")))
}

/// The status of a command an RPC does not serve (as arrow-flight words it).
fn not_served(rpc: &str, cmd: &Command) -> Status {
    status(
        ErrorKind::Unsupported,
        format!("{rpc}: The defined request is invalid: {}", cmd.type_url()),
    )
}

/// `stream`, adding the rows of each record batch message to the call's audit note.
fn count_rows(stream: Responses<FlightData>, call: &Call) -> Responses<FlightData> {
    let note = Arc::clone(call.note());
    Box::pin(stream.map(move |item| {
        if let Ok(data) = &item {
            let rows = arrow::ipc::root_as_message(&data.data_header)
                .ok()
                .and_then(|m| m.header_as_record_batch())
                .map_or(0, |b| b.length());
            note.add_rows(u64::try_from(rows).unwrap_or(0));
        }
        item
    }))
}

fn panic_status(p: Panicked) -> Status {
    status(ErrorKind::Internal, p.to_string())
}

/// The PutResult of a DoPut that changed `record_count` rows.
fn update_result(record_count: i64) -> Responses<PutResult> {
    one_put(&DoPutUpdateResult { record_count })
}

fn one_put<M: Message>(m: &M) -> Responses<PutResult> {
    let r = PutResult {
        app_metadata: m.encode_to_vec().into(),
    };
    Box::pin(stream::iter([Ok(r)]))
}

fn one_result<M: Message>(m: &M) -> Response<Responses<arrow_flight::Result>> {
    let r = arrow_flight::Result {
        body: m.encode_to_vec().into(),
    };
    Response::new(Box::pin(stream::iter([Ok(r)])))
}

impl TidelakeService {
    /// The service over `sql`, running work on `work`; `shutdown` ends long streams.
    pub fn new(sql: TidelakeFlightSql, work: WorkPool, shutdown: Shutdown) -> Self {
        let auth = Arc::clone(&sql.auth);
        Self {
            sql: Arc::new(sql),
            auth,
            work,
            shutdown,
        }
    }

    /// The context of `req` (Unauthenticated when the gate resolved no principal).
    fn call<T>(&self, req: &Request<T>) -> Result<Call, Status> {
        Call::begin(req, &self.shutdown)
    }

    /// When a statement of `p`'s started now must end, and the status it ends with (no limit
    /// without a configured timeout).
    fn statement_deadline(p: &Principal) -> Option<Deadline> {
        p.tenant.engine.limits().query_timeout.map(|t| Deadline {
            at: tokio::time::Instant::now() + t,
            status: to_status(crate::sql::timeout_error(t)),
        })
    }

    /// A work slot for the caller (its tenant's, then its own share of the server's), waiting
    /// at most until `deadline`.
    async fn admit(
        &self,
        call: &Call,
        deadline: Option<&Deadline>,
    ) -> Result<AdmissionPermit, Status> {
        let p = &call.principal;
        let key = p.admission_key();
        let admit = async {
            let tenant = p.tenant.admit_statement().await.map_err(to_status)?;
            let admission = self.work.admit(&key).await;
            Ok::<_, Status>(AdmissionPermit::new(admission, tenant))
        };
        match deadline {
            None => admit.await,
            Some(d) => tokio::time::timeout_at(d.at, admit)
                .await
                .map_err(|_| d.status.clone())?,
        }
    }

    /// Runs a unary call's work on a work thread, holding `permit` until it is done.
    async fn on_work<T, F>(&self, permit: AdmissionPermit, fut: F) -> Result<T, Status>
    where
        F: std::future::Future<Output = Result<T, Status>> + Send + 'static,
        T: Send + 'static,
    {
        let (admission, _held) = permit.split();
        self.work
            .run(Some(admission), fut, panic_status)
            .await
            .map_err(bounded)
    }

    /// Runs a streaming call's work on a work thread: its stream is made and driven there and
    /// forwarded, ending at `deadline`; `permit` (when there is one) is held as long as it.
    async fn on_work_stream<T, F>(
        &self,
        permit: Option<AdmissionPermit>,
        deadline: Option<Deadline>,
        fut: F,
    ) -> Result<Responses<T>, Status>
    where
        F: std::future::Future<Output = Result<Responses<T>, Status>> + Send + 'static,
        T: Send + 'static,
    {
        let started = async move { Ok::<((), _), Status>(((), fut.await?)) };
        let (admission, held) = match permit.map(AdmissionPermit::split) {
            Some((a, h)) => (Some(a), Some(h)),
            None => (None, None),
        };
        let ((), stream) = self
            .work
            .run_stream(admission, started, panic_status)
            .await
            .map_err(bounded)?;
        let stream = match deadline {
            Some(d) => with_deadline(stream, d.at, move || d.status.clone()),
            None => stream,
        };
        Ok(holding(Box::pin(stream.map(|r| r.map_err(bounded))), held))
    }

    /// A changelog subscription: it mostly waits, so it takes no statement slot and has no
    /// deadline; it holds a subscription slot of its tenant, and ends at shutdown.
    async fn subscribe(
        &self,
        call: Call,
        ticket: ChangelogTicket,
    ) -> Result<Responses<FlightData>, Status> {
        call.set_object(|| format!("subscribe {}", ticket.table));
        let tenant = Arc::clone(&call.principal.tenant);
        let permit = tenant.open_subscription().map_err(to_status)?;
        let open = crate::metrics::GaugeGuard::new(&crate::metrics::metrics().subscriptions);
        let database = self.auth.session(&call.principal).database;
        let stream = self
            .on_work_stream(None, None, async move {
                let catalog = tenant.engine.catalog();
                let stream = subscription::subscribe(catalog, &database, ticket).await?;
                Ok(Box::pin(stream) as Responses<FlightData>)
            })
            .await?;
        let unavailable = || {
            status(
                ErrorKind::Unavailable,
                "the server is shutting down; subscribe again to resume from the last progress",
            )
        };
        let stream = call.shutdown().ends(stream, unavailable);
        // The tenant's subscription slot is held as long as the stream is.
        Ok(holding(stream, (permit, open)))
    }

    /// GetFlightInfo of a Flight SQL command: statements are planned (updates run), metadata
    /// commands answered with their schema.
    async fn flight_info(
        &self,
        call: Call,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let cmd = flight_sql_command(&descriptor.cmd, "descriptor command")?;
        let permit = self.admit(&call, None).await?;
        let sql = Arc::clone(&self.sql);
        self.on_work(permit, async move {
            match cmd {
                Command::CommandStatementQuery(q) => {
                    sql.get_flight_info_statement(&call, q, descriptor).await
                }
                Command::CommandPreparedStatementQuery(q) => {
                    sql.get_flight_info_prepared_statement(&call, q, descriptor)
                        .await
                }
                metadata => sql.get_flight_info_metadata(metadata, descriptor),
            }
        })
        .await
    }
}

/// The Handshake's answer: the token in the payload and in the `authorization` response header
/// (where ADBC and JDBC read it).
fn handshake_answer(token: String) -> Response<Responses<HandshakeResponse>> {
    let answer = HandshakeResponse {
        protocol_version: 0,
        payload: token.clone().into_bytes().into(),
    };
    let mut resp = Response::new(Box::pin(stream::iter([Ok(answer)])) as Responses<_>);
    if let Ok(v) = MetadataValue::try_from(format!("Bearer {token}")) {
        resp.metadata_mut().insert("authorization", v);
    }
    resp
}

#[tonic::async_trait]
impl FlightService for TidelakeService {
    type HandshakeStream = Responses<HandshakeResponse>;
    type ListFlightsStream = Responses<FlightInfo>;
    type DoGetStream = Responses<FlightData>;
    type DoPutStream = Responses<PutResult>;
    type DoActionStream = Responses<arrow_flight::Result>;
    type ListActionsStream = <TidelakeFlightSql as FlightService>::ListActionsStream;
    type DoExchangeStream = <TidelakeFlightSql as FlightService>::DoExchangeStream;

    async fn handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        // Basic or Bearer in the header: the gate resolved it and left the token to answer with.
        if let Some(MintedToken(token)) = request.extensions().get::<MintedToken>().cloned() {
            return Ok(handshake_answer(token));
        }
        // Credentials in the handshake payload (Flight's BasicAuth message).
        let note = call::note(&request);
        let mut s = request.into_inner();
        let no_credentials = || {
            status(
                ErrorKind::Unauthenticated,
                "no credentials in the handshake",
            )
        };
        let first = s.next().await.ok_or_else(no_credentials)??;
        let basic = BasicAuth::decode(first.payload.as_ref()).map_err(|_| no_credentials())?;
        note.set_object(format!("login {}", basic.username));
        let resolved = self
            .auth
            .login(&basic.username, &basic.password)
            .await
            .map_err(to_status)?;
        let token = resolved.minted.unwrap_or_default();
        Ok(handshake_answer(token))
    }

    async fn list_flights(
        &self,
        _request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        // Tables are reached through Flight SQL; there are no standing flights to list.
        Ok(Response::new(
            Box::pin(stream::empty()) as Self::ListFlightsStream
        ))
    }

    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let call = self.call(&request)?;
        let info = self.flight_info(call, request.into_inner()).await?;
        Ok(Response::new(info))
    }

    async fn poll_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        // Queries are planned synchronously: the first poll is already complete.
        let call = self.call(&request)?;
        let info = self.flight_info(call, request.into_inner()).await?;
        let poll = PollInfo {
            info: Some(info),
            flight_descriptor: None,
            progress: Some(1.0),
            expiration_time: None,
        };
        Ok(Response::new(poll))
    }

    async fn get_schema(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        let call = self.call(&request)?;
        let any = Any::decode(request.get_ref().cmd.as_ref())
            .map_err(|_| invalid("descriptor is not a Flight SQL command"))?;
        let cmd = Command::try_from(any).map_err(|e| invalid(e.to_string()))?;
        let permit = self.admit(&call, None).await?;
        let sql = Arc::clone(&self.sql);
        let schema = self
            .on_work(permit, async move {
                sql.command_schema(&call.principal, cmd).await
            })
            .await?;
        let result: SchemaResult =
            SchemaAsIpc::new(&schema, &arrow::ipc::writer::IpcWriteOptions::default())
                .try_into()
                .map_err(|e: arrow::error::ArrowError| {
                    status(ErrorKind::Internal, e.to_string())
                })?;
        Ok(Response::new(result))
    }

    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        let call = self.call(&request)?;
        let cmd = match Get::of(&request.get_ref().ticket)? {
            Get::Subscribe(ticket) => {
                return Ok(Response::new(self.subscribe(call, ticket).await?))
            }
            Get::Sql(cmd) => cmd,
        };
        let deadline = Self::statement_deadline(&call.principal);
        let permit = self.admit(&call, deadline.as_ref()).await?;
        let (sql, on) = (Arc::clone(&self.sql), call.clone());
        let stream = self
            .on_work_stream(Some(permit), deadline, async move {
                let call = &on;
                match cmd {
                    Command::TicketStatementQuery(t) => sql.do_get_statement(call, t).await,
                    Command::CommandPreparedStatementQuery(c) => {
                        sql.do_get_prepared_statement(call, c).await
                    }
                    Command::CommandGetCatalogs(c) => sql.do_get_catalogs(call, c),
                    Command::CommandGetDbSchemas(c) => sql.do_get_schemas(call, c).await,
                    Command::CommandGetTables(c) => sql.do_get_tables(call, c).await,
                    Command::CommandGetTableTypes(c) => sql.do_get_table_types(c),
                    Command::CommandGetSqlInfo(c) => sql.do_get_sql_info(c),
                    Command::CommandGetPrimaryKeys(c) => sql.do_get_primary_keys(call, c).await,
                    Command::CommandGetExportedKeys(_)
                    | Command::CommandGetImportedKeys(_)
                    | Command::CommandGetCrossReference(_) => Ok(sql.do_get_foreign_keys()),
                    Command::CommandGetXdbcTypeInfo(c) => sql.do_get_xdbc_type_info(c),
                    other => Err(not_served("do_get", &other)),
                }
            })
            .await?;
        Ok(Response::new(count_rows(stream, &call)))
    }

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let call = self.call(&request)?;
        let permit = self.admit(&call, None).await?;
        let threads = self.work.limits().threads_per_call;
        let (sql, session) = (Arc::clone(&self.sql), self.auth.session(&call.principal));
        // The descriptor is in the first message, which is peeked (not consumed: it may carry
        // the first batch) on the work thread the call runs on.
        let started = async move {
            let mut input = request.into_inner().peekable();
            let put = Put::of(std::pin::Pin::new(&mut input).peek().await)?;
            let input: FlightDataIn = Box::pin(input);
            let results = match put {
                // Gives the permit back once the stream is open.
                Put::Stream(cmd) => streaming::serve(&call, &session, permit, input, cmd).await?,
                Put::Sql(cmd) => {
                    let results = match cmd {
                        Command::CommandStatementUpdate(c) => {
                            update_result(sql.do_put_statement_update(&call, c).await?)
                        }
                        Command::CommandStatementIngest(c) => {
                            update_result(sql.do_put_statement_ingest(&call, c, input).await?)
                        }
                        Command::CommandPreparedStatementQuery(c) => {
                            one_put(&sql.do_put_prepared_statement_query(&call, c, input).await?)
                        }
                        Command::CommandPreparedStatementUpdate(c) => update_result(
                            sql.do_put_prepared_statement_update(&call, c, input)
                                .await?,
                        ),
                        other => {
                            return Err(status(
                                ErrorKind::Unsupported,
                                format!("DoPut: unknown command {}", other.type_url()),
                            ))
                        }
                    };
                    // The slot is held as long as the answer is.
                    holding(results, permit)
                }
            };
            Ok::<_, Status>(((), results))
        };
        let ((), stream) = self
            .work
            .run_stream_on(threads, None, started, panic_status)
            .await
            .map_err(bounded)?;
        Ok(Response::new(Box::pin(stream.map(|r| r.map_err(bounded)))))
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let call = self.call(&request)?;
        let action = request.get_ref();
        call.set_object(|| format!("action {}", action.r#type));
        let resp = match action.r#type.as_str() {
            "CreatePreparedStatement" => {
                let malformed = || invalid("malformed CreatePreparedStatement");
                let any = Any::decode(action.body.as_ref()).map_err(|_| malformed())?;
                let cmd: ActionCreatePreparedStatementRequest = any
                    .unpack()
                    .map_err(|e| invalid(e.to_string()))?
                    .ok_or_else(malformed)?;
                if cmd.transaction_id.is_some() {
                    return Err(status(
                        ErrorKind::Unsupported,
                        "transactions are not supported",
                    ));
                }
                call.set_object(|| super::audit::statement_object(&cmd.query));
                let permit = self.admit(&call, None).await?;
                let sql = Arc::clone(&self.sql);
                let caller = call.principal.clone();
                let (result, is_update) = self
                    .on_work(permit, async move { sql.prepare(&caller, cmd.query).await })
                    .await?;
                // arrow-flight 59 does not generate `optional bool is_update = 4`; JDBC reads it.
                let mut value = result.encode_to_vec();
                if is_update {
                    value.extend_from_slice(&[0x20, 0x01]);
                }
                let any = Any {
                    type_url: arrow_flight::sql::ActionCreatePreparedStatementResult::type_url()
                        .to_string(),
                    value: value.into(),
                };
                one_result(&any)
            }
            "ClosePreparedStatement" => {
                let malformed = || invalid("malformed ClosePreparedStatement");
                let any = Any::decode(action.body.as_ref()).map_err(|_| malformed())?;
                let _: ActionClosePreparedStatementRequest = any
                    .unpack()
                    .map_err(|e| invalid(e.to_string()))?
                    .ok_or_else(malformed)?;
                // Handles hold no server state.
                Response::new(Box::pin(stream::empty()) as Responses<_>)
            }
            name @ ("SetSessionOptions" | "GetSessionOptions" | "CloseSession"
            | "CancelFlightInfo") => {
                let result = session::act(&self.auth, &call.principal, name, &action.body).await?;
                Response::new(Box::pin(stream::iter([Ok(result)])) as Responses<_>)
            }
            name if name.starts_with("tidelake.") => {
                let permit = self.admit(&call, None).await?;
                let session = self.auth.session(&call.principal);
                let tenant = Arc::clone(&call.principal.tenant);
                let (name, body, user) = (
                    name.to_string(),
                    action.body.clone(),
                    call.principal.subject.clone(),
                );
                let stream = self
                    .on_work_stream(Some(permit), None, async move {
                        let caller = admin::Caller {
                            session: &session,
                            user: &user,
                            operations: &tenant.operations,
                        };
                        match admin::run(&tenant.engine, &caller, &name, &body).await {
                            Some(results) => results,
                            None => Err(status(
                                ErrorKind::Unsupported,
                                format!("unknown action '{name}'"),
                            )),
                        }
                    })
                    .await?;
                Response::new(stream)
            }
            // Flight SQL's other actions (transactions, savepoints, Substrait plans, CancelQuery)
            // and unknown names: arrow-flight's answers.
            _ => FlightService::do_action(self.sql.as_ref(), request).await?,
        };
        Ok(resp)
    }

    async fn list_actions(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        FlightService::list_actions(self.sql.as_ref(), request).await
    }

    async fn do_exchange(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        FlightService::do_exchange(self.sql.as_ref(), request).await
    }
}
