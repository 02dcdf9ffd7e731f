//! A Rust client for tidelake: [`Client`] runs SQL, bulk ingest (with row kinds) and every
//! administrative action; [`Subscriber`] follows changelogs. The messages of
//! `proto/tidelake.proto` are declared here once; the server uses these declarations too.
//!
//! Subscriptions: open a DoGet
//! with a `ChangelogTicket` and receive the table's changes batch by batch, each with the snapshot
//! it belongs to. [`Subscriber`] reconnects after transport failures and resumes after the last
//! completed snapshot (skipping rows of a snapshot it had partly delivered), so nothing is lost
//! or repeated.

use std::time::Duration;

pub mod client;
pub use client::{Client, IngestMode, IngestOptions};

use arrow_array::RecordBatch;
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::Ticket;
use futures::StreamExt;
use prost::Message;
use tonic::transport::{Channel, Endpoint};

/// `tidelake.StartMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum StartMode {
    StartDefault = 0,
    Latest = 1,
    LatestFull = 2,
    FromSnapshot = 3,
    FromSnapshotFull = 4,
    FromTimestamp = 5,
    CompactedFull = 6,
}

/// `tidelake.ChangelogTicket`: what to subscribe to and where to start.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChangelogTicket {
    #[prost(string, tag = "1")]
    pub table: String,
    #[prost(enumeration = "StartMode", tag = "2")]
    pub start: i32,
    #[prost(int64, tag = "3")]
    pub snapshot_id: i64,
    #[prost(int64, tag = "4")]
    pub timestamp_millis: i64,
    #[prost(string, tag = "5")]
    pub consumer_id: String,
    #[prost(int64, tag = "6")]
    pub end_snapshot_id: i64,
    #[prost(int64, tag = "7")]
    pub end_timestamp_millis: i64,
    #[prost(string, repeated, tag = "8")]
    pub columns: Vec<String>,
    #[prost(string, tag = "9")]
    pub filter: String,
    #[prost(int64, tag = "10")]
    pub heartbeat_millis: i64,
    #[prost(enumeration = "SchemaChangeMode", tag = "11")]
    pub schema_change: i32,
}

/// `tidelake.SchemaChangeMode`: how a subscription announces that the table's schema changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SchemaChangeMode {
    /// A new schema message in the stream (arrow-rs, Java and Go readers take it).
    SchemaMessage = 0,
    /// The stream ends after the last snapshot of the old schema with a `schema_changed`
    /// progress; resubscribing from the next snapshot gives the new schema. For readers that
    /// cannot take a second schema message (pyarrow's, which blocks on it).
    EndStream = 1,
}

/// `tidelake.ChangelogProgress`, the `app_metadata` of every message of a subscription.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChangelogProgress {
    #[prost(int64, tag = "1")]
    pub snapshot_id: i64,
    #[prost(bool, tag = "2")]
    pub complete: bool,
    #[prost(bool, tag = "3")]
    pub heartbeat: bool,
    /// On a schema message: the rows of `snapshot_id` and later have this new schema.
    #[prost(bool, tag = "4")]
    pub schema_changed: bool,
}

/// The `google.protobuf.Any` type URL a changelog ticket is wrapped with.
pub const TICKET_TYPE_URL: &str = "type.googleapis.com/tidelake.ChangelogTicket";

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// The DoGet ticket bytes of a changelog ticket.
pub fn encode_ticket(t: &ChangelogTicket) -> Vec<u8> {
    Any {
        type_url: TICKET_TYPE_URL.to_string(),
        value: t.encode_to_vec(),
    }
    .encode_to_vec()
}

/// The first column of change rows: `+I`, `-U`, `+U` or `-D`.
pub const ROW_KIND_COLUMN: &str = "_row_kind";

/// Errors of this client.
#[derive(Debug)]
pub enum Error {
    /// The server refused the request (bad ticket, unknown table, expired snapshot, ...).
    Status(tonic::Status),
    /// The connection could not be made.
    Transport(tonic::transport::Error),
    /// The server sent something this client cannot read.
    Protocol(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Status(s) => write!(f, "{}: {}", s.code(), s.message()),
            Error::Transport(e) => write!(f, "transport: {e}"),
            Error::Protocol(m) => write!(f, "protocol: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Whether reconnecting may help (the server went away, or the network did).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Status(s) => matches!(
                s.code(),
                tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Internal
            ),
            Error::Transport(_) => true,
            Error::Protocol(_) => false,
        }
    }
}

/// Change rows of one snapshot: `_row_kind` first, then the table's columns.
#[derive(Debug, Clone)]
pub struct Changes {
    pub snapshot_id: i64,
    pub batch: RecordBatch,
}

fn basic_auth(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

/// Progress inside a snapshot whose end has not arrived yet.
#[derive(Debug, Clone, Copy)]
struct InProgress {
    snapshot_id: i64,
    /// Rows of it handed to the caller.
    delivered: usize,
    /// Rows of it received on the current connection.
    received: usize,
}

/// A changelog subscription that survives reconnects.
#[derive(Debug)]
pub struct Subscriber {
    endpoint: String,
    authorization: String,
    ticket: ChangelogTicket,
    /// The last snapshot whose changes were all delivered.
    pub last_completed: Option<i64>,
    in_progress: Option<InProgress>,
    stream: Option<FlightDataDecoder>,
    /// Reconnect attempts in a row before giving up (0 = never reconnect).
    pub max_retries: u32,
}

impl Subscriber {
    /// A subscriber for `ticket` on `endpoint` (`http://host:port`); nothing is sent until
    /// [`Subscriber::next`].
    pub fn new(endpoint: &str, user: &str, password: &str, ticket: ChangelogTicket) -> Self {
        Self {
            endpoint: endpoint.to_string(),
            authorization: basic_auth(user, password),
            ticket,
            last_completed: None,
            in_progress: None,
            stream: None,
            max_retries: 10,
        }
    }

    /// The ticket that resumes where this subscriber stands.
    fn resume_ticket(&self) -> ChangelogTicket {
        let mut ticket = self.ticket.clone();
        let full_start = matches!(
            StartMode::try_from(ticket.start),
            Ok(StartMode::StartDefault
                | StartMode::LatestFull
                | StartMode::FromSnapshotFull
                | StartMode::CompactedFull)
        );
        match (self.last_completed, self.in_progress) {
            (Some(done), _) => {
                ticket.start = StartMode::FromSnapshot as i32;
                ticket.snapshot_id = done + 1;
            }
            // Inside the first snapshot: ask for that very snapshot again.
            (None, Some(p)) => {
                ticket.start = if full_start && ticket.consumer_id.is_empty() {
                    StartMode::FromSnapshotFull as i32
                } else {
                    StartMode::FromSnapshot as i32
                };
                ticket.snapshot_id = p.snapshot_id;
            }
            (None, None) => {}
        }
        ticket
    }

    async fn connect(&mut self) -> Result<FlightDataDecoder, Error> {
        let channel: Channel = Endpoint::from_shared(self.endpoint.clone())
            .map_err(Error::Transport)?
            .connect()
            .await
            .map_err(Error::Transport)?;
        let mut client = FlightServiceClient::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let mut request = tonic::Request::new(Ticket {
            ticket: encode_ticket(&self.resume_ticket()).into(),
        });
        let value = self
            .authorization
            .parse()
            .map_err(|_| Error::Protocol("credentials are not a valid header".into()))?;
        request.metadata_mut().insert("authorization", value);
        let response = client.do_get(request).await.map_err(Error::Status)?;
        let messages = response
            .into_inner()
            .map(|r| r.map_err(|s| arrow_flight::error::FlightError::Tonic(Box::new(s))));
        if let Some(p) = self.in_progress.as_mut() {
            p.received = 0;
        }
        Ok(FlightDataDecoder::new(messages))
    }

    /// The next change rows; `None` when a bounded subscription has ended. Heartbeats and
    /// snapshot ends only advance [`Subscriber::last_completed`].
    pub async fn next(&mut self) -> Option<Result<Changes, Error>> {
        let mut failures = 0u32;
        loop {
            if self.stream.is_none() {
                match self.connect().await {
                    Ok(s) => self.stream = Some(s),
                    Err(e) if e.is_transient() && failures < self.max_retries => {
                        failures += 1;
                        tokio::time::sleep(Duration::from_millis(50 << failures.min(6))).await;
                        continue;
                    }
                    Err(e) => return Some(Err(e)),
                }
            }
            let stream = self.stream.as_mut()?;
            let message = match stream.next().await {
                None => return None,
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    self.stream = None;
                    let e = match e {
                        arrow_flight::error::FlightError::Tonic(s) => Error::Status(*s),
                        other => Error::Protocol(other.to_string()),
                    };
                    if e.is_transient() && failures < self.max_retries {
                        failures += 1;
                        tokio::time::sleep(Duration::from_millis(50 << failures.min(6))).await;
                        continue;
                    }
                    return Some(Err(e));
                }
            };
            let DecodedPayload::RecordBatch(batch) = message.payload else {
                continue;
            };
            let progress = match ChangelogProgress::decode(message.inner.app_metadata.as_ref()) {
                Ok(p) => p,
                Err(e) => return Some(Err(Error::Protocol(format!("bad progress: {e}")))),
            };
            if progress.complete {
                if !progress.heartbeat || self.last_completed.is_none() {
                    self.last_completed = Some(progress.snapshot_id);
                }
                self.in_progress = None;
                continue;
            }
            let p = match self.in_progress {
                Some(p) if p.snapshot_id == progress.snapshot_id => p,
                _ => InProgress {
                    snapshot_id: progress.snapshot_id,
                    delivered: 0,
                    received: 0,
                },
            };
            let len = batch.num_rows();
            // Rows before `delivered` were handed out before a reconnect.
            let skip = p.delivered.saturating_sub(p.received).min(len);
            self.in_progress = Some(InProgress {
                snapshot_id: p.snapshot_id,
                delivered: p.delivered.max(p.received + len),
                received: p.received + len,
            });
            if skip == len {
                continue;
            }
            return Some(Ok(Changes {
                snapshot_id: progress.snapshot_id,
                batch: batch.slice(skip, len - skip),
            }));
        }
    }
}

/// Administrative Flight actions (`DoAction`): each takes one request message as its body and
/// returns one `Result` whose body is the result message (see `proto/tidelake.proto`).
pub mod admin {
    /// `tidelake.CompactRequest` (action `tidelake.compact`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CompactRequest {
        #[prost(string, tag = "1")]
        pub table: String,
        /// Everything into the max level (drops deletes) instead of what the picker selects.
        #[prost(bool, tag = "2")]
        pub full: bool,
        /// Partition filter, `key=value` each.
        #[prost(string, repeated, tag = "3")]
        pub partitions: Vec<String>,
        /// Stream `OperationProgress` results before the result (all `Any`-wrapped).
        #[prost(bool, tag = "10")]
        pub report_progress: bool,
    }

    /// `tidelake.CompactResult`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CompactResult {
        #[prost(int64, tag = "1")]
        pub buckets_compacted: i64,
        #[prost(int64, tag = "2")]
        pub files_before: i64,
        #[prost(int64, tag = "3")]
        pub files_after: i64,
        /// The COMPACT snapshot (0 when nothing needed compacting).
        #[prost(int64, tag = "4")]
        pub snapshot_id: i64,
    }

    /// `tidelake.ExpireSnapshotsRequest` (action `tidelake.expire_snapshots`); unset fields take
    /// the table's options.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExpireSnapshotsRequest {
        #[prost(string, tag = "1")]
        pub table: String,
        #[prost(int64, optional, tag = "2")]
        pub retain_min: Option<i64>,
        #[prost(int64, optional, tag = "3")]
        pub retain_max: Option<i64>,
        /// A Paimon duration (`1 h`, `30 min`).
        #[prost(string, optional, tag = "4")]
        pub older_than: Option<String>,
        #[prost(bool, tag = "10")]
        pub report_progress: bool,
    }

    /// `tidelake.ExpireChangelogsRequest` (action `tidelake.expire_changelogs`): long-lived
    /// changelogs (a decoupled changelog lifecycle). Unset limits keep everything, as in Paimon.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExpireChangelogsRequest {
        #[prost(string, tag = "1")]
        pub table: String,
        #[prost(int64, optional, tag = "2")]
        pub retain_max: Option<i64>,
        #[prost(int64, optional, tag = "3")]
        pub retain_min: Option<i64>,
        /// A duration (`1 h`): changelogs younger than this are kept.
        #[prost(string, optional, tag = "4")]
        pub older_than: Option<String>,
        #[prost(int64, optional, tag = "5")]
        pub max_deletes: Option<i64>,
        /// Remove every long-lived changelog (all must be older than the earliest snapshot).
        #[prost(bool, tag = "6")]
        pub delete_all: bool,
        #[prost(bool, tag = "10")]
        pub report_progress: bool,
    }

    /// `tidelake.RemoveOrphanFilesRequest` (action `tidelake.remove_orphan_files`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RemoveOrphanFilesRequest {
        #[prost(string, tag = "1")]
        pub table: String,
        /// Only files older than this (default `1 d`).
        #[prost(string, optional, tag = "2")]
        pub older_than: Option<String>,
        /// Delete them; without it the result only lists them (dry run).
        #[prost(bool, tag = "3")]
        pub delete: bool,
        #[prost(bool, tag = "10")]
        pub report_progress: bool,
    }

    /// `tidelake.CleanupResult`: what an expiry, orphan removal, tag deletion or rollback removed.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CleanupResult {
        #[prost(int64, repeated, tag = "1")]
        pub snapshots: Vec<i64>,
        #[prost(string, repeated, tag = "2")]
        pub files: Vec<String>,
    }

    /// `tidelake.TagRequest` (actions `tidelake.create_tag`, `tidelake.delete_tag`,
    /// `tidelake.list_tags`, `tidelake.rollback`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TagRequest {
        #[prost(string, tag = "1")]
        pub table: String,
        /// The tag (create, delete, rollback to a tag).
        #[prost(string, tag = "2")]
        pub tag: String,
        /// The snapshot (create: default latest; rollback to a snapshot).
        #[prost(int64, optional, tag = "3")]
        pub snapshot_id: Option<i64>,
    }

    /// `tidelake.Tag`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tag {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(int64, tag = "2")]
        pub snapshot_id: i64,
        #[prost(int64, tag = "3")]
        pub time_millis: i64,
    }

    /// `tidelake.TagList` (result of `tidelake.list_tags` and `tidelake.create_tag`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TagList {
        #[prost(message, repeated, tag = "1")]
        pub tags: Vec<Tag>,
    }

    /// `tidelake.AlterTableRequest` (action `tidelake.alter_table`): the changes as the SQL after
    /// `ALTER TABLE <table>` (`ADD COLUMN c INT`, `RENAME COLUMN a TO b`, `SET ('k' = 'v')`, ...).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AlterTableRequest {
        #[prost(string, tag = "1")]
        pub table: String,
        #[prost(string, tag = "2")]
        pub changes: String,
    }

    /// `tidelake.TableInfoRequest` (actions `tidelake.table_info`; `tidelake.alter_table`
    /// answers with the table's info after the change).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TableInfoRequest {
        #[prost(string, tag = "1")]
        pub table: String,
    }

    /// `tidelake.BucketInfo`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BucketInfo {
        /// Partition path (`dt=2024-01-01`), empty for unpartitioned tables.
        #[prost(string, tag = "1")]
        pub partition: String,
        #[prost(int32, tag = "2")]
        pub bucket: i32,
        #[prost(int64, tag = "3")]
        pub files: i64,
        #[prost(int64, tag = "4")]
        pub sorted_runs: i64,
        #[prost(int64, tag = "5")]
        pub rows: i64,
        #[prost(int64, tag = "6")]
        pub bytes: i64,
    }

    /// `tidelake.TableInfo`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TableInfo {
        #[prost(string, tag = "1")]
        pub table: String,
        /// The current `schema-N` file's JSON.
        #[prost(string, tag = "2")]
        pub schema_json: String,
        #[prost(int64, tag = "3")]
        pub schema_id: i64,
        #[prost(int64, tag = "4")]
        pub latest_snapshot_id: i64,
        #[prost(message, repeated, tag = "5")]
        pub buckets: Vec<BucketInfo>,
        #[prost(int64, tag = "6")]
        pub total_rows: i64,
        #[prost(int64, tag = "7")]
        pub total_bytes: i64,
    }

    /// `tidelake.OperationProgress`: where a long operation (compact, expire_snapshots,
    /// remove_orphan_files) stands. Streamed, `Any`-wrapped, when the request asks for progress.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OperationProgress {
        /// Names the operation for `tidelake.cancel`.
        #[prost(string, tag = "1")]
        pub operation_id: String,
        #[prost(string, tag = "2")]
        pub phase: String,
        #[prost(int64, tag = "3")]
        pub done: i64,
        /// 0 while unknown.
        #[prost(int64, tag = "4")]
        pub total: i64,
        #[prost(int64, tag = "5")]
        pub files: i64,
        #[prost(int64, tag = "6")]
        pub bytes: i64,
    }

    /// `tidelake.OperationRequest` (actions `tidelake.cancel`, `tidelake.list_operations`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OperationRequest {
        /// The operation to cancel; for listing, empty.
        #[prost(string, tag = "1")]
        pub operation_id: String,
    }

    /// `tidelake.OperationInfo`: one running operation.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OperationInfo {
        #[prost(string, tag = "1")]
        pub operation_id: String,
        /// The action, e.g. `tidelake.compact`.
        #[prost(string, tag = "2")]
        pub action: String,
        #[prost(string, tag = "3")]
        pub table: String,
        #[prost(string, tag = "4")]
        pub user: String,
        #[prost(int64, tag = "5")]
        pub started_millis: i64,
        #[prost(message, optional, tag = "6")]
        pub progress: Option<OperationProgress>,
        /// Cancel was asked; it stops at its next safe point.
        #[prost(bool, tag = "7")]
        pub cancelling: bool,
    }

    /// `tidelake.OperationList` (result of `list_operations` and `cancel`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OperationList {
        #[prost(message, repeated, tag = "1")]
        pub operations: Vec<OperationInfo>,
    }

    /// The `google.protobuf.Any` type URL of a tidelake message (`"OperationProgress"` ->
    /// `type.googleapis.com/tidelake.OperationProgress`).
    pub fn type_url(message: &str) -> String {
        format!("type.googleapis.com/tidelake.{message}")
    }
}
