//! Streaming writes: a DoPut whose descriptor is a `tidelake.StreamingWrite` feeds one table's
//! bucket writers for as long as the stream lives, commits by a policy (rows, time, the
//! producer's request, the end of the stream) under the producer's own commit user, and
//! acknowledges each commit with a PutResult once its snapshots are durable. The protocol is
//! documented in `proto/tidelake.proto` (StreamingWrite, WritePosition, WriteAck).
//!
//! This module owns the protocol's state machine ([`Stream`]) and the pure deciders it runs on
//! ([`commit_due`], [`check_position`], [`next_identifier`]). The one-stream-per-(table, commit
//! user) places are the tenant's registry (`super::tenant::streams`); fencing across servers is
//! the committer's ([`crate::table::TableCommit::commit_fenced`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_flight::sql::Any;
use arrow_flight::{FlightData, PutResult};
use futures::{Stream as FuturesStream, StreamExt};
use prost::Message;
use tidelake_client::proto::{StreamingWrite, WriteAck, WriteKind, WritePosition};
use tonic::Status;

use crate::catalog::{Catalog, Identifier};
use crate::error::ErrorKind;
use crate::sql::{Role, SqlSession};
use crate::table::{CommitOutcome, Table, TableCommit, TableWrite, WriteOptions};

use super::audit::AuditNote;
use super::call::{AdmissionPermit, Call, Responses, Shutdown};
use super::ipc::{checked_flight_data, FlightDataIn};
use super::status::{status, to_status};

/// The `google.protobuf.Any` type URL of a streaming write's descriptor command.
pub const TYPE_URL: &str = "type.googleapis.com/tidelake.StreamingWrite";

/// The row-kind column of CHANGES streams when the descriptor names none.
pub const DEFAULT_ROW_KIND_COLUMN: &str = "_row_kind";

/// Longest commit user accepted (it is stored in every snapshot).
const MAX_COMMIT_USER: usize = 256;

/// The streaming write a descriptor's command asks for, when it is one (`None`: another command).
pub fn parse_command(any: &Any) -> Option<Result<StreamingWrite, Status>> {
    (any.type_url == TYPE_URL).then(|| {
        StreamingWrite::decode(any.value.as_ref())
            .map_err(|e| invalid(format!("malformed StreamingWrite: {e}")))
    })
}

fn invalid(message: impl Into<String>) -> Status {
    status(ErrorKind::InvalidArgument, message.into())
}

/// When a stream commits: after this many uncommitted rows, and/or once the oldest uncommitted
/// row is this old.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub every_rows: u64,
    pub every: Option<Duration>,
}

/// Whether a commit is due: there are uncommitted rows, and the producer asked, or enough rows
/// are uncommitted, or the oldest of them is old enough (`age`).
pub fn commit_due(policy: &Policy, pending_rows: u64, age: Duration, asked: bool) -> bool {
    pending_rows > 0
        && (asked
            || (policy.every_rows > 0 && pending_rows >= policy.every_rows)
            || policy.every.is_some_and(|t| age >= t))
}

/// A position the stream's state no longer allows (the producer must resume elsewhere).
fn stale(message: String) -> crate::error::Error {
    crate::error::of_kind(ErrorKind::FailedPrecondition, message)
}

/// Checks a batch's position against the last durable identifier and the last position of the
/// stream: it must be above the first (a restarted producer resumes after what is durable) and
/// not below the second (positions grow; several batches may share one).
pub fn check_position(
    position: i64,
    last_durable: Option<i64>,
    last_position: Option<i64>,
) -> crate::error::Result<()> {
    if position < 0 {
        return Err(stale(format!(
            "position {position} is negative; positions are 0 or more"
        )));
    }
    if let Some(d) = last_durable.filter(|d| position <= *d) {
        return Err(stale(format!(
            "position {position} is not after the last durable identifier {d}; resume after it"
        )));
    }
    if let Some(p) = last_position.filter(|p| position < *p) {
        return Err(stale(format!(
            "position {position} goes back (the previous batch had {p}); positions must grow"
        )));
    }
    Ok(())
}

/// The identifier of the next commit: the last position when positions advanced since the last
/// commit, else one above the last durable identifier (1 when none is known). `None` when that
/// would overflow (the commit user made batch commits, whose identifier is `i64::MAX`).
pub fn next_identifier(last_position: Option<i64>, last_durable: Option<i64>) -> Option<i64> {
    let counted = match last_durable {
        Some(d) => d.checked_add(1)?,
        None => 1,
    };
    Some(match last_position {
        Some(p) if last_durable.is_none_or(|d| p > d) => p,
        _ => counted,
    })
}

/// What a stream was opened with, checked.
#[derive(Debug)]
pub struct Opened {
    pub id: Identifier,
    pub table: Table,
    pub commit_user: String,
    pub options: WriteOptions,
    /// CHANGES: the column that must be in every batch.
    pub kind_column: Option<String>,
    pub policy: Policy,
}

/// Checks a StreamingWrite against the caller's role and the table it names.
pub async fn open(
    catalog: &Catalog,
    database: &str,
    role: Role,
    cmd: StreamingWrite,
) -> Result<Opened, Status> {
    let name = cmd.table.trim();
    if name.is_empty() {
        return Err(invalid("StreamingWrite.table is empty"));
    }
    let id = if name.contains('.') {
        Identifier::parse(name).map_err(to_status)?
    } else {
        Identifier::new(database, name)
    };
    role.require(Role::Writer, "a streaming write")
        .map_err(to_status)?;
    let commit_user = cmd.commit_user.clone();
    if commit_user.trim().is_empty() {
        return Err(invalid(format!(
            "streaming write into {id}: commit_user is required (the producer's stable identity)"
        )));
    }
    if commit_user.len() > MAX_COMMIT_USER || commit_user.chars().any(char::is_control) {
        return Err(invalid(format!(
            "streaming write into {id}: commit_user must be at most {MAX_COMMIT_USER} bytes without control characters"
        )));
    }
    let kind = WriteKind::try_from(cmd.kind).map_err(|_| {
        invalid(format!(
            "streaming write into {id}: unknown kind {}",
            cmd.kind
        ))
    })?;
    let table = catalog.load_table(&id).await.map_err(to_status)?;
    let keyed = !table.schema().primary_keys.is_empty();
    let kind_column = match kind {
        WriteKind::Append if keyed => {
            return Err(invalid(format!(
                "streaming write into {id}: the table has a primary key; use UPSERT or CHANGES"
            )))
        }
        WriteKind::Upsert if !keyed => {
            return Err(invalid(format!(
                "streaming write into {id}: UPSERT needs a primary-key table; use APPEND"
            )))
        }
        WriteKind::Append | WriteKind::Upsert => None,
        WriteKind::Changes => Some(match cmd.row_kind_column.trim() {
            "" => DEFAULT_ROW_KIND_COLUMN.to_string(),
            c => c.to_string(),
        }),
    };
    let policy = Policy {
        every_rows: cmd.every_rows,
        every: (cmd.every_ms > 0).then(|| Duration::from_millis(cmd.every_ms)),
    };
    Ok(Opened {
        id,
        table,
        commit_user,
        options: WriteOptions {
            row_kind_column: kind_column.clone(),
        },
        kind_column,
        policy,
    })
}

/// One stream's state between messages.
struct Stream {
    id: Identifier,
    commit_user: String,
    kind_column: Option<String>,
    policy: Policy,
    write: TableWrite,
    commit: TableCommit,
    /// The last identifier durable for the commit user (the resume answer, then each ack's).
    last_durable: Option<i64>,
    /// The snapshot after which every snapshot of the commit user is another stream's.
    since: i64,
    last_position: Option<i64>,
    pending_rows: u64,
    oldest_pending: Option<Instant>,
    /// The call's audit note: acknowledged rows are counted there.
    note: Arc<AuditNote>,
}

/// A PutResult carrying `ack`.
fn put_result(ack: &WriteAck) -> PutResult {
    PutResult {
        app_metadata: ack.encode_to_vec().into(),
    }
}

impl Stream {
    /// `status` with the table and the last durable identifier appended, as every error that
    /// ends a stream carries them.
    fn ending(&self, s: Status) -> Status {
        let durable = self.last_durable.unwrap_or(-1);
        super::status::with_context(
            &s,
            &format!(
                "streaming write into {} (commit user '{}'): last durable identifier {durable}",
                self.id, self.commit_user
            ),
        )
    }

    /// Validates one batch (its position, its row-kind column) and hands it to the writers.
    /// Returns whether the batch asked for a commit.
    async fn take(&mut self, batch: RecordBatch, metadata: &[u8]) -> Result<bool, Status> {
        let position = if metadata.is_empty() {
            None
        } else {
            Some(WritePosition::decode(metadata).map_err(|e| {
                invalid(format!(
                    "a batch's app_metadata is not a WritePosition: {e}"
                ))
            })?)
        };
        let at = position.as_ref().and_then(|p| p.position);
        if let Some(at) = at {
            check_position(at, self.last_durable, self.last_position).map_err(to_status)?;
        }
        if let Some(c) = &self.kind_column {
            if batch.schema().column_with_name(c).is_none() {
                return Err(invalid(format!(
                    "a CHANGES batch has no row-kind column '{c}'"
                )));
            }
        }
        let rows = batch.num_rows() as u64;
        // Every row of the batch is checked before any reaches a bucket writer.
        self.write.write(&batch).await.map_err(to_status)?;
        if at.is_some() {
            self.last_position = at;
        }
        if rows > 0 {
            self.pending_rows += rows;
            self.oldest_pending.get_or_insert_with(Instant::now);
        }
        Ok(position.is_some_and(|p| p.commit))
    }

    fn due(&self, asked: bool) -> bool {
        let age = self.oldest_pending.map_or(Duration::ZERO, |t| t.elapsed());
        commit_due(&self.policy, self.pending_rows, age, asked)
    }

    /// When the time policy makes the next commit due.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        let every = self.policy.every?;
        let oldest = self.oldest_pending?;
        Some(tokio::time::Instant::from_std(oldest + every))
    }

    /// Commits what is pending and returns its ack (sent only now: the snapshots are durable).
    async fn commit(&mut self) -> Result<WriteAck, Status> {
        let started = Instant::now();
        let identifier =
            next_identifier(self.last_position, self.last_durable).ok_or_else(|| {
                status(
                    ErrorKind::FailedPrecondition,
                    format!(
                    "commit user '{}' made batch commits; give the stream a commit user of its own",
                    self.commit_user
                ),
                )
            })?;
        let messages = self.write.prepare_commit().await.map_err(to_status)?;
        let committed = self
            .commit
            .commit_fenced(messages, identifier, self.since)
            .await
            .map_err(to_status)?;
        if let CommitOutcome::AlreadyCommitted(s) = committed.outcome {
            return Err(status(
                ErrorKind::FailedPrecondition,
                format!("identifier {identifier} is already committed (snapshot {s})"),
            ));
        }
        if let Some(last) = committed.snapshots.last() {
            self.since = *last;
        }
        let rows = std::mem::take(&mut self.pending_rows);
        self.oldest_pending = None;
        self.last_durable = Some(identifier);
        let m = crate::metrics::metrics();
        m.stream_acks.inc();
        m.stream_rows.inc_by(rows);
        m.stream_ack_seconds
            .observe(started.elapsed().as_secs_f64());
        self.note.add_rows(rows);
        Ok(WriteAck {
            identifier,
            snapshot_ids: committed.snapshots,
            rows,
            resume: false,
            latest_snapshot_id: self.since,
        })
    }
}

/// What ends a stream's wait for its next message.
enum Next {
    Message(Option<Result<arrow_flight::decode::DecodedFlightData, FlightError>>),
    Due,
    Shutdown,
}

/// Runs an opened stream: the resume answer, then batches, commits and acks, sent into `out`.
/// Returns when the stream ends; its error (if any) is the last item sent.
pub async fn run(
    opened: Opened,
    input: impl FuturesStream<Item = Result<FlightData, FlightError>> + Send + Unpin + 'static,
    out: tokio::sync::mpsc::Sender<Result<PutResult, Status>>,
    mut shutdown: Shutdown,
    note: Arc<AuditNote>,
    places: impl Send,
) {
    let Opened {
        id,
        table,
        commit_user,
        options,
        kind_column,
        policy,
    } = opened;
    let state = match table.last_committed(&commit_user).await {
        Ok(s) => s,
        Err(e) => {
            drop(places);
            let _ = out.send(Err(to_status(e))).await;
            return;
        }
    };
    let write = match table.new_write(options) {
        Ok(w) => w,
        Err(e) => {
            drop(places);
            let _ = out.send(Err(to_status(e))).await;
            return;
        }
    };
    let mut s = Stream {
        commit: table.new_commit(commit_user.clone()),
        id,
        commit_user,
        kind_column,
        policy,
        write,
        last_durable: state.identifier,
        since: state.latest,
        last_position: None,
        pending_rows: 0,
        oldest_pending: None,
        note,
    };
    let resume = WriteAck {
        identifier: state.identifier.unwrap_or(-1),
        snapshot_ids: state.snapshot.into_iter().collect(),
        rows: 0,
        resume: true,
        latest_snapshot_id: state.latest,
    };
    if out.send(Ok(put_result(&resume))).await.is_err() {
        let _ = s.write.close().await;
        return;
    }
    let mut decoder = FlightDataDecoder::new(input);
    let outcome: Result<(), Status> = loop {
        let deadline = s.deadline();
        let next = tokio::select! {
            biased;
            _ = shutdown.requested() => Next::Shutdown,
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => Next::Due,
            m = decoder.next() => Next::Message(m),
        };
        let asked = match next {
            Next::Due => false,
            Next::Shutdown => {
                // Graceful: what is pending is committed and acknowledged first.
                let ended = status(
                    ErrorKind::Unavailable,
                    "the server is shutting down; reconnect and resume after the last durable identifier",
                );
                break match s.commit_pending(&out).await {
                    Ok(()) => Err(ended),
                    Err(e) => Err(e),
                };
            }
            Next::Message(None) => {
                // The producer half-closed: the last commit, then OK.
                break s.commit_pending(&out).await;
            }
            Next::Message(Some(Err(e))) => break Err(flight_status(e)),
            Next::Message(Some(Ok(data))) => match data.payload {
                DecodedPayload::RecordBatch(batch) => {
                    match s.take(batch, &data.inner.app_metadata).await {
                        Ok(asked) => asked,
                        Err(e) => break Err(e),
                    }
                }
                // A schema message (the first, or a new one) or nothing: no rows.
                DecodedPayload::Schema(_) | DecodedPayload::None => {
                    if data.inner.app_metadata.is_empty() {
                        continue;
                    }
                    // An empty message may still ask for a commit.
                    match WritePosition::decode(data.inner.app_metadata.as_ref()) {
                        Ok(p) => p.commit,
                        Err(e) => {
                            break Err(invalid(format!(
                                "a message's app_metadata is not a WritePosition: {e}"
                            )))
                        }
                    }
                }
            },
        };
        if s.due(asked) {
            match s.commit().await {
                Ok(ack) => {
                    if out.send(Ok(put_result(&ack))).await.is_err() {
                        break Ok(());
                    }
                }
                Err(e) => break Err(e),
            }
        }
    };
    // Rows not acknowledged are dropped with the files they were spilled to.
    let status = outcome.err().map(|e| s.ending(e));
    if let Err(e) = s.write.close().await {
        tracing::warn!(table = %s.id, error = %e, "could not remove a stream's uncommitted files");
    }
    // The stream's places are free before its producer hears the end, so it can reopen at once.
    drop(places);
    if let Some(st) = status {
        let _ = out.send(Err(st)).await;
    }
}

impl Stream {
    /// Commits and acknowledges what is pending, if anything.
    async fn commit_pending(
        &mut self,
        out: &tokio::sync::mpsc::Sender<Result<PutResult, Status>>,
    ) -> Result<(), Status> {
        if self.pending_rows == 0 {
            return Ok(());
        }
        let ack = self.commit().await?;
        let _ = out.send(Ok(put_result(&ack))).await;
        Ok(())
    }
}

/// The status of a stream's failed input: the producer's own cancellation or transport error,
/// or a message arrow could not decode.
fn flight_status(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(s) => *s,
        other => invalid(format!(
            "a message of the stream could not be decoded: {other}"
        )),
    }
}

/// The PutResult stream of a DoPut.
pub type PutStream = Responses<PutResult>;

/// Serves a streaming write: checks it, takes its places (a `max_streams` slot, the (table,
/// commit user) one), gives back the DoPut's `permit` (a stream that lives for hours holds a
/// `max_streams` place instead of a statement slot) and runs the stream on its own task (on the
/// work thread the call runs on). The stream ends when the producer ends it, on an error, or
/// when the call's shutdown signal is requested (after committing what is pending).
pub async fn serve(
    call: &Call,
    session: &SqlSession,
    permit: AdmissionPermit,
    input: FlightDataIn,
    cmd: StreamingWrite,
) -> Result<PutStream, Status> {
    let tenant = &call.principal.tenant;
    call.set_object(|| format!("stream {}", cmd.table.trim()));
    let opened = open(
        tenant.engine.catalog(),
        &session.database,
        session.role,
        cmd,
    )
    .await?;
    call.set_object(|| format!("stream {}", opened.id));
    let stream_slot = tenant.open_stream().map_err(to_status)?;
    let place = tenant
        .writers
        .open(&opened.id.to_string(), &opened.commit_user)
        .map_err(|since| {
            status(
                ErrorKind::FailedPrecondition,
                format!(
                    "commit user '{}' is streaming into {} on this server (for {} s); one stream per table and commit user",
                    opened.commit_user,
                    opened.id,
                    since.as_secs()
                ),
            )
        })?;
    drop(permit);
    let input = checked_flight_data(input.map(|r| r.map_err(|s| FlightError::Tonic(Box::new(s)))));
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let open = crate::metrics::GaugeGuard::new(&crate::metrics::metrics().write_streams);
    let (shutdown, note) = (call.shutdown().clone(), Arc::clone(call.note()));
    tokio::spawn(async move {
        // Held until the stream's cleanup is done.
        run(
            opened,
            Box::pin(input),
            tx,
            shutdown,
            note,
            (stream_slot, place, open),
        )
        .await;
    });
    let stream: PutStream = Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_are_due_by_rows_time_or_request_and_never_empty() {
        let p = Policy {
            every_rows: 100,
            every: Some(Duration::from_millis(1000)),
        };
        assert!(!commit_due(&p, 0, Duration::from_secs(5), true));
        assert!(!commit_due(&p, 99, Duration::from_millis(999), false));
        assert!(commit_due(&p, 100, Duration::ZERO, false));
        assert!(commit_due(&p, 1, Duration::from_millis(1000), false));
        assert!(commit_due(&p, 1, Duration::ZERO, true));
        let never = Policy {
            every_rows: 0,
            every: None,
        };
        assert!(!commit_due(&never, u64::MAX, Duration::MAX, false));
        assert!(commit_due(&never, 1, Duration::ZERO, true));
    }

    #[test]
    fn positions_resume_after_the_durable_one_and_never_go_back() {
        assert!(check_position(5, None, None).is_ok());
        assert!(check_position(5, Some(4), None).is_ok());
        let e = check_position(4, Some(4), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
        let e = e.to_string();
        assert!(e.contains("last durable identifier 4"), "{e}");
        assert!(check_position(7, Some(4), Some(7)).is_ok());
        let e = check_position(6, Some(4), Some(7)).unwrap_err().to_string();
        assert!(e.contains("goes back"), "{e}");
        assert!(check_position(-1, None, None).is_err());
    }

    #[test]
    fn identifiers_follow_positions_else_count_from_the_durable_one() {
        assert_eq!(next_identifier(None, None), Some(1));
        assert_eq!(next_identifier(None, Some(41)), Some(42));
        assert_eq!(next_identifier(Some(100), Some(41)), Some(100));
        // Positions did not advance since the last commit: counted.
        assert_eq!(next_identifier(Some(100), Some(100)), Some(101));
        assert_eq!(next_identifier(Some(0), None), Some(0));
        assert_eq!(next_identifier(None, Some(i64::MAX)), None);
    }
}
