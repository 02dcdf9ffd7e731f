//! The Flight service tonic serves, behind the gate ([`super::gate`]) that resolved each call's
//! principal: it hands Flight SQL commands to
//! [`TidelakeFlightSql`] and answers itself what arrow-flight's Flight SQL layer leaves
//! unimplemented (Handshake, GetSchema, PollFlightInfo, session options, CancelFlightInfo, and
//! the `is_update` field of prepared statements that JDBC reads).

use crate::error::ErrorKind;
use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::{ActionCreatePreparedStatementRequest, Any, Command, ProstMessageExt};
use arrow_flight::{
    Action, BasicAuth, CancelFlightInfoResult, CancelStatus, Criteria, Empty, FlightData,
    FlightDescriptor, FlightInfo, HandshakeRequest, HandshakeResponse, PollInfo, SchemaAsIpc,
    SchemaResult, Ticket,
};
use futures::stream::{self, Stream, StreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::audit::AuditNote;
use super::auth::{Authenticator, Principal};
use super::flight_sql::TidelakeFlightSql;
use super::gate::MintedToken;
use super::session::{
    self, CloseSessionResult, GetSessionOptionsResult, OptionValue, SetSessionOptionError,
    SetSessionOptionsRequest, SetSessionOptionsResult,
};
use super::status::{bounded, to_status};
use super::streaming::{Releasable, Shutdown};
use crate::runtime::{with_deadline, Admission, Panicked, WorkPool};

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The authenticated Flight service. Authentication and the cheap calls (Handshake, session
/// options, ListActions) are answered on the IO runtime; every call that plans, reads, writes
/// or maintains a table runs on its own work thread ([`WorkPool`]), admitted per user, with
/// its errors bounded ([`bounded`]) and a statement's stream ended at its deadline.
#[derive(Debug, Clone)]
pub struct TidelakeService {
    sql: Arc<TidelakeFlightSql>,
    auth: Arc<Authenticator>,
    work: WorkPool,
    /// Turns true when the server starts shutting down (streams that never end by themselves,
    /// subscriptions, end then).
    shutdown: tokio::sync::watch::Receiver<bool>,
}

/// When a statement ends, and with which status.
#[derive(Debug, Clone)]
struct Deadline {
    at: tokio::time::Instant,
    status: Status,
}

/// What a call holds while it runs: its tenant's statement slot (when the tenant has a limit)
/// and its work admission.
#[derive(Debug)]
struct Slot {
    admission: Admission,
    tenant: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Counts the statement in `tidelake_active_statements` while held.
    active: crate::metrics::GaugeGuard,
}

/// What a running statement holds: its tenant's slot and its place in the active count.
type Held = Option<(
    Option<tokio::sync::OwnedSemaphorePermit>,
    crate::metrics::GaugeGuard,
)>;

impl Slot {
    fn split(slot: Option<Slot>) -> (Option<Admission>, Held) {
        match slot {
            Some(s) => (Some(s.admission), Some((s.tenant, s.active))),
            None => (None, None),
        }
    }
}

/// `stream`, adding the rows of each record batch message to the call's audit note.
fn count_rows(
    stream: BoxStream<FlightData>,
    note: Option<Arc<AuditNote>>,
) -> BoxStream<FlightData> {
    let Some(note) = note else {
        return stream;
    };
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
    super::status::status(ErrorKind::Internal, p.to_string())
}

type Head = tonic::metadata::MetadataMap;

impl TidelakeService {
    pub fn new(sql: TidelakeFlightSql, work: WorkPool) -> Self {
        let auth = Arc::clone(&sql.auth);
        Self {
            sql: Arc::new(sql),
            auth,
            work,
            shutdown: tokio::sync::watch::channel(false).1,
        }
    }

    /// Ends open subscriptions when `shutdown` turns true (see [`until_shutdown`]).
    pub fn with_shutdown(mut self, shutdown: tokio::sync::watch::Receiver<bool>) -> Self {
        self.shutdown = shutdown;
        self
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
    async fn admit<T>(
        &self,
        req: &Request<T>,
        deadline: Option<&Deadline>,
    ) -> Result<Slot, Status> {
        let p = Self::principal(req)?;
        let key = p.admission_key();
        let admit = async {
            let tenant = p.tenant.admit_statement().await?;
            let admission = self.work.admit(&key).await;
            let active =
                crate::metrics::GaugeGuard::new(&crate::metrics::metrics().active_statements);
            Ok::<Slot, Status>(Slot {
                admission,
                tenant,
                active,
            })
        };
        match deadline {
            None => admit.await,
            Some(d) => tokio::time::timeout_at(d.at, admit)
                .await
                .map_err(|_| d.status.clone())?,
        }
    }

    /// Runs a unary call's work on a work thread.
    async fn on_work<T, F>(&self, slot: Option<Slot>, fut: F) -> Result<T, Status>
    where
        F: std::future::Future<Output = Result<T, Status>> + Send + 'static,
        T: Send + 'static,
    {
        let (admission, _tenant) = Slot::split(slot);
        self.work
            .run(admission, fut, panic_status)
            .await
            .map_err(bounded)
    }

    /// Runs a streaming call's work on a work thread: the response's metadata comes back, its
    /// stream is driven there and forwarded, ending at `deadline`.
    async fn on_work_stream<T, S, F>(
        &self,
        slot: Option<Slot>,
        deadline: Option<Deadline>,
        fut: F,
    ) -> Result<Response<BoxStream<T>>, Status>
    where
        F: std::future::Future<Output = Result<Response<S>, Status>> + Send + 'static,
        S: Stream<Item = Result<T, Status>> + Send + 'static,
        T: Send + 'static,
    {
        let started = async move {
            let (head, stream, _extensions) = fut.await?.into_parts();
            Ok::<(Head, S), Status>((head, stream))
        };
        let (admission, tenant) = Slot::split(slot);
        let (head, stream) = self
            .work
            .run_stream(admission, started, panic_status)
            .await
            .map_err(bounded)?;
        let stream = match deadline {
            Some(d) => with_deadline(stream, d.at, move || d.status.clone()),
            None => stream,
        };
        // The tenant's slot is held as long as the stream is.
        let stream: BoxStream<T> = Box::pin(stream.map(move |r| {
            let _held = &tenant;
            r.map_err(bounded)
        }));
        Ok(Response::from_parts(
            head,
            stream,
            tonic::Extensions::default(),
        ))
    }

    fn principal<T>(req: &Request<T>) -> Result<Principal, Status> {
        super::flight_sql::principal(req)
    }
}

/// `stream`, ended with Unavailable once `shutdown` turns true (or its sender is gone): a
/// subscription never ends by itself, and a client retries Unavailable (against this server once
/// it is back, or another one), resuming from its last progress.
fn until_shutdown<T: Send + 'static>(
    stream: BoxStream<T>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> BoxStream<T> {
    use futures::StreamExt;
    let unavailable = || {
        super::status::status(
            ErrorKind::Unavailable,
            "the server is shutting down; subscribe again to resume from the last progress",
        )
    };
    Box::pin(futures::stream::unfold(
        (stream, shutdown, false),
        move |(mut stream, mut shutdown, ended)| async move {
            if ended {
                return None;
            }
            // Some(item) from the stream, or None once shutting down.
            let next = tokio::select! {
                biased;
                _ = shutdown.wait_for(|stopping| *stopping) => None,
                item = stream.next() => Some(item),
            };
            match next {
                None => Some((Err(unavailable()), (stream, shutdown, true))),
                Some(item) => item.map(|item| (item, (stream, shutdown, false))),
            }
        },
    ))
}

/// The Handshake's answer: the token in the payload and in the `authorization` response header
/// (where ADBC and JDBC read it).
fn handshake_answer(token: String) -> Response<BoxStream<HandshakeResponse>> {
    let answer = HandshakeResponse {
        protocol_version: 0,
        payload: token.clone().into_bytes().into(),
    };
    let mut resp = Response::new(Box::pin(stream::iter([Ok(answer)])) as BoxStream<_>);
    if let Ok(v) = MetadataValue::try_from(format!("Bearer {token}")) {
        resp.metadata_mut().insert("authorization", v);
    }
    resp
}

fn one_result<M: Message>(m: &M) -> Response<BoxStream<arrow_flight::Result>> {
    let r = arrow_flight::Result {
        body: m.encode_to_vec().into(),
    };
    Response::new(Box::pin(stream::iter([Ok(r)])))
}

#[tonic::async_trait]
impl FlightService for TidelakeService {
    type HandshakeStream = BoxStream<HandshakeResponse>;
    type ListFlightsStream = BoxStream<FlightInfo>;
    type DoGetStream = <TidelakeFlightSql as FlightService>::DoGetStream;
    type DoPutStream = <TidelakeFlightSql as FlightService>::DoPutStream;
    type DoActionStream = BoxStream<arrow_flight::Result>;
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
        let request_note = request.extensions().get::<Arc<AuditNote>>().cloned();
        let mut s = request.into_inner();
        let no_credentials = || {
            super::status::status(
                ErrorKind::Unauthenticated,
                "no credentials in the handshake",
            )
        };
        let first = s.next().await.ok_or_else(no_credentials)??;
        let basic = BasicAuth::decode(first.payload.as_ref()).map_err(|_| no_credentials())?;
        if let Some(note) = request_note.as_ref() {
            note.set_object(format!("login {}", basic.username));
        }
        let resolved = self.auth.login(&basic.username, &basic.password).await?;
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
        let admission = self.admit(&request, None).await?;
        let sql = Arc::clone(&self.sql);
        let resp = self
            .on_work(Some(admission), async move {
                FlightService::get_flight_info(sql.as_ref(), request).await
            })
            .await?;
        Ok(resp)
    }

    async fn poll_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        // Queries are planned synchronously: the first poll is already complete.
        let admission = self.admit(&request, None).await?;
        let sql = Arc::clone(&self.sql);
        let info = self
            .on_work(Some(admission), async move {
                FlightService::get_flight_info(sql.as_ref(), request).await
            })
            .await?
            .into_inner();
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
        let principal = Self::principal(&request)?;
        let any = Any::decode(request.get_ref().cmd.as_ref()).map_err(|_| {
            super::status::status(
                ErrorKind::InvalidArgument,
                "descriptor is not a Flight SQL command",
            )
        })?;
        let cmd = Command::try_from(any)
            .map_err(|e| super::status::status(ErrorKind::InvalidArgument, e.to_string()))?;
        let admission = self.admit(&request, None).await?;
        let sql = Arc::clone(&self.sql);
        let schema = self
            .on_work(Some(admission), async move {
                sql.command_schema(&principal, cmd).await
            })
            .await?;
        let result: SchemaResult =
            SchemaAsIpc::new(&schema, &arrow::ipc::writer::IpcWriteOptions::default())
                .try_into()
                .map_err(|e: arrow::error::ArrowError| {
                    super::status::status(ErrorKind::Internal, e.to_string())
                })?;
        Ok(Response::new(result))
    }

    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        if let Some(ticket) = super::changelog::parse_ticket(&request.get_ref().ticket) {
            // A subscription mostly waits: it takes no statement slot, and has no deadline.
            let ticket = ticket.map_err(bounded)?;
            super::flight_sql::audit_object(&request, || format!("subscribe {}", ticket.table));
            let principal = Self::principal(&request)?;
            let permit = principal.tenant.open_subscription()?;
            let open = crate::metrics::GaugeGuard::new(&crate::metrics::metrics().subscriptions);
            let database = self.auth.session(&principal).database;
            let tenant = Arc::clone(&principal.tenant);
            let resp = self
                .on_work_stream(None, None, async move {
                    let catalog = tenant.engine.catalog();
                    let stream = super::changelog::subscribe(catalog, &database, ticket).await?;
                    Ok(Response::new(stream))
                })
                .await?;
            let resp = resp.map(|stream| {
                let stream = until_shutdown(stream, self.shutdown.clone());
                // The tenant's subscription slot is held as long as the stream is.
                Box::pin(stream.map(move |item| {
                    let _held = (&permit, &open);
                    item
                })) as BoxStream<_>
            });
            return Ok(resp);
        }
        let deadline = Self::statement_deadline(&Self::principal(&request)?);
        let admission = self.admit(&request, deadline.as_ref()).await?;
        let note = request.extensions().get::<Arc<AuditNote>>().cloned();
        let sql = Arc::clone(&self.sql);
        let resp = self
            .on_work_stream(Some(admission), deadline, async move {
                FlightService::do_get(sql.as_ref(), request).await
            })
            .await?;
        Ok(resp.map(|s| count_rows(s, note)))
    }

    async fn do_put(
        &self,
        mut request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        // The descriptor is in the first message, which only the Flight SQL dispatcher reads: a
        // streaming write (its fallback) gives the statement slot back through `Releasable`.
        let admission = self.admit(&request, None).await?;
        let threads = self.work.limits().threads_per_call;
        let slot = Releasable(Arc::new(std::sync::Mutex::new(Some(Box::new(admission)))));
        request.extensions_mut().insert(slot.clone());
        request
            .extensions_mut()
            .insert(Shutdown(self.shutdown.clone()));
        let sql = Arc::clone(&self.sql);
        let started = async move {
            let (head, stream, _extensions) = FlightService::do_put(sql.as_ref(), request)
                .await?
                .into_parts();
            Ok::<_, Status>((head, stream))
        };
        let (head, stream) = self
            .work
            .run_stream_on(threads, None, started, panic_status)
            .await
            .map_err(bounded)?;
        let stream: Self::DoPutStream = Box::pin(stream.map(move |r| {
            // The slot is held as long as the stream is, unless released.
            let _held = &slot;
            r.map_err(bounded)
        }));
        Ok(Response::from_parts(
            head,
            stream,
            tonic::Extensions::default(),
        ))
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let principal = Self::principal(&request)?;
        let action = request.get_ref();
        super::flight_sql::audit_object(&request, || format!("action {}", action.r#type));
        let resp = match action.r#type.as_str() {
            "CreatePreparedStatement" => {
                let any = Any::decode(action.body.as_ref()).map_err(|_| {
                    super::status::status(
                        ErrorKind::InvalidArgument,
                        "malformed CreatePreparedStatement",
                    )
                })?;
                let cmd: ActionCreatePreparedStatementRequest = any
                    .unpack()
                    .map_err(|e| super::status::status(ErrorKind::InvalidArgument, e.to_string()))?
                    .ok_or_else(|| {
                        super::status::status(
                            ErrorKind::InvalidArgument,
                            "malformed CreatePreparedStatement",
                        )
                    })?;
                if cmd.transaction_id.is_some() {
                    return Err(super::status::status(
                        ErrorKind::Unsupported,
                        "transactions are not supported",
                    ));
                }
                super::flight_sql::audit_object(&request, || {
                    super::audit::statement_object(&cmd.query)
                });
                let admission = self.admit(&request, None).await?;
                let (sql, caller) = (Arc::clone(&self.sql), principal.clone());
                let (result, is_update) = self
                    .on_work(Some(admission), async move {
                        sql.prepare(&caller, cmd.query).await
                    })
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
            "SetSessionOptions" => {
                let req = SetSessionOptionsRequest::decode(action.body.as_ref()).map_err(|_| {
                    super::status::status(
                        ErrorKind::InvalidArgument,
                        "malformed SetSessionOptionsRequest",
                    )
                })?;
                let mut result = SetSessionOptionsResult::default();
                for (name, value) in req.session_options {
                    let text = match value.option_value {
                        Some(OptionValue::StringValue(s)) => Some(s),
                        _ => None,
                    };
                    let error = match (name.as_str(), text) {
                        ("catalog", Some(c))
                            if c == principal.tenant.engine.catalog_name() || c.is_empty() =>
                        {
                            None
                        }
                        ("schema", Some(db)) => {
                            match principal.tenant.engine.catalog().database_exists(&db).await {
                                Ok(true) => {
                                    self.auth.set_database(&principal, db);
                                    None
                                }
                                Ok(false) => Some(session::INVALID_VALUE),
                                Err(e) => return Err(to_status(e)),
                            }
                        }
                        ("catalog" | "schema", _) => Some(session::INVALID_VALUE),
                        _ => Some(session::INVALID_NAME),
                    };
                    if let Some(value) = error {
                        result.errors.insert(name, SetSessionOptionError { value });
                    }
                }
                one_result(&result)
            }
            "GetSessionOptions" => {
                let s = self.auth.session(&principal);
                let mut result = GetSessionOptionsResult::default();
                result.session_options.insert(
                    "catalog".into(),
                    session::string_value(principal.tenant.engine.catalog_name()),
                );
                result
                    .session_options
                    .insert("schema".into(), session::string_value(s.database));
                one_result(&result)
            }
            "CloseSession" => {
                self.auth.close(&principal);
                one_result(&CloseSessionResult { status: 1 })
            }
            "CancelFlightInfo" => one_result(&CancelFlightInfoResult::new(CancelStatus::Cancelled)),
            name if name.starts_with("tidelake.") => {
                let admission = self.admit(&request, None).await?;
                let session = self.auth.session(&principal);
                let tenant = Arc::clone(&principal.tenant);
                let (name, body, user) = (
                    name.to_string(),
                    action.body.clone(),
                    principal.subject.clone(),
                );
                self.on_work_stream(Some(admission), None, async move {
                    let caller = super::admin::Caller {
                        session: &session,
                        user: &user,
                        operations: &tenant.operations,
                    };
                    match super::admin::run(&tenant.engine, &caller, &name, &body).await {
                        Some(results) => Ok(Response::new(results?)),
                        None => Err(super::status::status(
                            ErrorKind::Unsupported,
                            format!("unknown action '{name}'"),
                        )),
                    }
                })
                .await?
            }
            _ => FlightService::do_action(self.sql.as_ref(), request).await?,
        };
        Ok(resp)
    }

    async fn list_actions(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        let resp = FlightService::list_actions(self.sql.as_ref(), request).await?;
        Ok(resp)
    }

    async fn do_exchange(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        let resp = FlightService::do_exchange(self.sql.as_ref(), request).await?;
        Ok(resp)
    }
}
