//! A Rust client for tidelake: [`Client`] runs SQL, bulk ingest (with row kinds) and every
//! administrative action; [`Subscriber`] follows changelogs. The messages of
//! `proto/tidelake.proto` are generated from it into [`proto`] (committed code, see there) and
//! re-exported here and in [`admin`]; the server uses them too.
//!
//! Subscriptions: open a DoGet
//! with a `ChangelogTicket` and receive the table's changes batch by batch, each with the snapshot
//! it belongs to. [`Subscriber`] reconnects after transport failures and resumes after the last
//! completed snapshot (skipping rows of a snapshot it had partly delivered), so nothing is lost
//! or repeated.

use std::time::Duration;

pub mod client;
pub mod writer;
pub use client::{Client, IngestMode, IngestOptions};
pub use proto::{WriteAck, WriteKind};
pub use writer::{StreamWriter, WriterOptions};

use arrow_array::RecordBatch;
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::Any;
use arrow_flight::Ticket;
use futures::StreamExt;
use prost::Message;
use tonic::transport::{Channel, Endpoint};

/// The messages of `proto/tidelake.proto` (package `tidelake`), generated from it by
/// `tools/protogen` (protox + prost-build) into `src/generated/tidelake.rs`, which is committed so
/// that building needs no protobuf compiler. Regenerate with `bash scripts/gen-proto.sh`; the
/// changelog messages are re-exported at the crate root, the admin actions' in [`admin`].
pub mod proto {
    include!("generated/tidelake.rs");
}

pub use proto::{ChangelogProgress, ChangelogTicket, SchemaChangeMode, StartMode};

/// The `google.protobuf.Any` type URL a changelog ticket is wrapped with.
pub const TICKET_TYPE_URL: &str = "type.googleapis.com/tidelake.ChangelogTicket";

/// The DoGet ticket bytes of a changelog ticket.
pub fn encode_ticket(t: &ChangelogTicket) -> Vec<u8> {
    Any {
        type_url: TICKET_TYPE_URL.to_string(),
        value: t.encode_to_vec().into(),
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
    pub use super::proto::{
        AlterTableRequest, Branch, BranchList, BranchRequest, BucketInfo, CleanupResult,
        CompactRequest, CompactResult, ExpireChangelogsRequest, ExpireSnapshotsRequest,
        OperationInfo, OperationList, OperationProgress, OperationRequest,
        RemoveOrphanFilesRequest, TableInfo, TableInfoRequest, Tag, TagList, TagRequest,
    };

    /// The `google.protobuf.Any` type URL of a tidelake message (`"OperationProgress"` ->
    /// `type.googleapis.com/tidelake.OperationProgress`).
    pub fn type_url(message: &str) -> String {
        format!("type.googleapis.com/tidelake.{message}")
    }
}

#[cfg(test)]
mod tests {
    use super::admin::{CompactRequest, ExpireSnapshotsRequest, OperationInfo, OperationProgress};
    use super::*;

    /// The generated messages keep the wire format the hand-declared ones had (and the Python
    /// client's test of the same ticket, tests/python/test_changelog.py, expects).
    #[test]
    fn a_changelog_ticket_encodes_as_before() {
        let ticket = ChangelogTicket {
            table: "x".into(),
            start: StartMode::FromSnapshot as i32,
            snapshot_id: 300,
            schema_change: SchemaChangeMode::EndStream as i32,
            ..Default::default()
        };
        assert_eq!(
            encode_ticket(&ticket),
            b"\x0a\x2ctype.googleapis.com/tidelake.ChangelogTicket\x12\x0a\x0a\x01x\x10\x03\x18\xac\x02\x58\x01"
        );
        let progress = ChangelogProgress::decode(&b"\x08\x07\x10\x01\x18\x01\x20\x01"[..]).unwrap();
        assert_eq!(
            (
                progress.snapshot_id,
                progress.complete,
                progress.heartbeat,
                progress.schema_changed
            ),
            (7, true, true, true)
        );
    }

    #[test]
    fn admin_messages_keep_their_field_numbers() {
        let compact = CompactRequest {
            table: "t".into(),
            full: true,
            partitions: vec!["p=1".into()],
            report_progress: true,
        };
        assert_eq!(
            compact.encode_to_vec(),
            b"\x0a\x01t\x10\x01\x1a\x03p=1\x50\x01"
        );
        // `optional` fields are sent when set, even to their default.
        let expire = ExpireSnapshotsRequest {
            retain_min: Some(0),
            older_than: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(expire.encode_to_vec(), b"\x10\x00\x22\x00");
        let info = OperationInfo {
            progress: Some(OperationProgress {
                done: 2,
                ..Default::default()
            }),
            cancelling: true,
            ..Default::default()
        };
        assert_eq!(info.encode_to_vec(), b"\x32\x02\x18\x02\x38\x01");
    }
}
