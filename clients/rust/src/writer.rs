//! [`StreamWriter`]: a streaming write (`proto/tidelake.proto`, `StreamingWrite`): one DoPut that
//! stays open, feeds a table's bucket writers, commits by a policy under the producer's commit
//! user and acknowledges each commit ([`WriteAck`]) once it is durable. A restarted producer
//! opens a writer with the same commit user and reads its source after
//! [`StreamWriter::resume_position`].

use arrow_array::RecordBatch;
use arrow_flight::sql::Any;
use arrow_flight::{FlightData, FlightDescriptor, PutResult, SchemaAsIpc};
use futures::channel::mpsc;
use futures::{FutureExt, SinkExt, StreamExt};
use prost::Message;

use crate::proto::{StreamingWrite, WriteAck, WriteKind, WritePosition};
use crate::Error;

/// The `google.protobuf.Any` type URL of a streaming write's descriptor command.
pub const STREAMING_WRITE_TYPE_URL: &str = "type.googleapis.com/tidelake.StreamingWrite";

/// What a streaming write is into, and when it commits.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// The producer's stable identity (required).
    pub commit_user: String,
    pub kind: WriteKind,
    /// CHANGES: the row-kind column (default `_row_kind`).
    pub row_kind_column: Option<String>,
    /// Commit after this many uncommitted rows (0: not by rows).
    pub every_rows: u64,
    /// Commit once the oldest uncommitted row is this many milliseconds old (0: not by time).
    pub every_ms: u64,
}

impl WriterOptions {
    pub fn new(commit_user: impl Into<String>, kind: WriteKind) -> Self {
        Self {
            commit_user: commit_user.into(),
            kind,
            row_kind_column: None,
            every_rows: 0,
            every_ms: 0,
        }
    }
}

/// An open streaming write. [`StreamWriter::close`] commits what is pending and returns the
/// last acks; dropping the writer ends the stream the same way, without waiting.
pub struct StreamWriter {
    tx: Option<mpsc::Sender<FlightData>>,
    acks: tonic::Streaming<PutResult>,
    schema: arrow_schema::SchemaRef,
    resume: Option<i64>,
    latest_snapshot_id: i64,
}

impl std::fmt::Debug for StreamWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamWriter")
            .field("resume", &self.resume)
            .finish_non_exhaustive()
    }
}

fn decode_ack(r: PutResult) -> Result<WriteAck, Error> {
    WriteAck::decode(r.app_metadata.as_ref())
        .map_err(|e| Error::Protocol(format!("a PutResult is not a WriteAck: {e}")))
}

/// The DoPut descriptor command of a streaming write into `table`.
pub fn encode_command(table: &str, opts: &WriterOptions) -> Vec<u8> {
    let cmd = StreamingWrite {
        table: table.to_string(),
        kind: opts.kind as i32,
        row_kind_column: opts.row_kind_column.clone().unwrap_or_default(),
        commit_user: opts.commit_user.clone(),
        every_rows: opts.every_rows,
        every_ms: opts.every_ms,
    };
    Any {
        type_url: STREAMING_WRITE_TYPE_URL.to_string(),
        value: cmd.encode_to_vec().into(),
    }
    .encode_to_vec()
}

impl StreamWriter {
    /// Opens the stream on `sql`'s connection: sends the descriptor and `schema`, and reads the
    /// server's first answer (the commit user's last durable identifier).
    pub(crate) async fn open(
        sql: &mut arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel>,
        table: &str,
        schema: arrow_schema::SchemaRef,
        opts: &WriterOptions,
    ) -> Result<Self, Error> {
        let (mut tx, rx) = mpsc::channel::<FlightData>(2);
        let options = arrow_ipc::writer::IpcWriteOptions::default();
        let mut first: FlightData = SchemaAsIpc::new(&schema, &options).into();
        first.flight_descriptor = Some(FlightDescriptor::new_cmd(encode_command(table, opts)));
        tx.send(first)
            .await
            .map_err(|e| Error::Protocol(format!("cannot queue the first message: {e}")))?;
        let mut acks = sql.do_put(rx).await?;
        let resume = match acks.next().await {
            Some(r) => decode_ack(r.map_err(Error::Status)?)?,
            None => {
                return Err(Error::Protocol(
                    "the stream ended before its resume answer".into(),
                ))
            }
        };
        if !resume.resume {
            return Err(Error::Protocol(
                "the first answer is not a resume answer".into(),
            ));
        }
        Ok(Self {
            tx: Some(tx),
            acks,
            schema,
            resume: (resume.identifier >= 0).then_some(resume.identifier),
            latest_snapshot_id: resume.latest_snapshot_id,
        })
    }

    /// The last identifier durable for the commit user when the writer opened (`None`: nothing).
    pub fn resume_position(&self) -> Option<i64> {
        self.resume
    }

    /// The table's newest snapshot when the writer opened (0: none).
    pub fn latest_snapshot_id(&self) -> i64 {
        self.latest_snapshot_id
    }

    /// Sends `batch` (the writer's schema); `position` is the source position after it (it must
    /// grow), `commit` asks for a commit after it. Waits while the server is behind (flow
    /// control); an error means the stream ended: [`Self::next_ack`] then returns its status.
    pub async fn write(
        &mut self,
        batch: &RecordBatch,
        position: Option<i64>,
        commit: bool,
    ) -> Result<(), Error> {
        let tx = self
            .tx
            .as_mut()
            .ok_or_else(|| Error::Protocol("the writer is closed".into()))?;
        let mut messages =
            arrow_flight::utils::batches_to_flight_data(&self.schema, vec![batch.clone()])
                .map_err(|e| Error::Protocol(format!("cannot encode a batch: {e}")))?;
        // The first message is the schema, sent once when the stream opened.
        messages.remove(0);
        if position.is_some() || commit {
            if let Some(last) = messages.last_mut() {
                last.app_metadata = WritePosition { position, commit }.encode_to_vec().into();
            }
        }
        for m in messages {
            if tx.send(m).await.is_err() {
                return Err(self.ended().await);
            }
        }
        Ok(())
    }

    /// Asks for a commit now of what is pending (an empty batch carrying the request).
    pub async fn commit(&mut self, position: Option<i64>) -> Result<(), Error> {
        let empty = RecordBatch::new_empty(self.schema.clone());
        self.write(&empty, position, true).await
    }

    /// The next acknowledgement, waiting for it; `None` once the stream ended cleanly.
    pub async fn next_ack(&mut self) -> Option<Result<WriteAck, Error>> {
        match self.acks.next().await? {
            Ok(r) => Some(decode_ack(r)),
            Err(s) => Some(Err(Error::Status(s))),
        }
    }

    /// The acknowledgements already received, without waiting.
    pub fn try_acks(&mut self) -> Result<Vec<WriteAck>, Error> {
        let mut out = Vec::new();
        while let Some(item) = self.acks.next().now_or_never().flatten() {
            out.push(decode_ack(item.map_err(Error::Status)?)?);
        }
        Ok(out)
    }

    /// The error the stream ended with (after a failed send).
    async fn ended(&mut self) -> Error {
        while let Some(item) = self.acks.next().await {
            if let Err(s) = item {
                return Error::Status(s);
            }
        }
        Error::Protocol("the server ended the stream".into())
    }

    /// Ends the stream: the server commits what is pending; returns the acks not taken yet, or
    /// the status the stream ended with.
    pub async fn close(mut self) -> Result<Vec<WriteAck>, Error> {
        self.tx = None;
        let mut out = Vec::new();
        while let Some(ack) = self.next_ack().await {
            out.push(ack?);
        }
        Ok(out)
    }
}
