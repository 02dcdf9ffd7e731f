//! Changelog subscriptions over plain Flight: a DoGet whose ticket is a `ChangelogTicket`
//! (`proto/tidelake.proto`) opens a long-lived stream of the table's changes, batch by batch,
//! each FlightData carrying a `ChangelogProgress` in its `app_metadata`.
//!
//! The stream is pulled by tonic as the client reads: a slow client slows only its own
//! subscription (the subscription buffers two events), never the server's memory.

use crate::error::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};
use arrow_flight::sql::Any;
use arrow_flight::{FlightData, SchemaAsIpc};
use datafusion::common::DFSchema;
use datafusion::physical_expr::PhysicalExpr;
use futures::stream::{self, Stream, StreamExt};
use prost::Message;
use tonic::Status;

use super::status::{invalid, to_status};
use crate::catalog::{Catalog, Identifier};
use crate::table::changes::{self, ChangeEvent, StreamOptions, Subscription};

// The messages of `proto/tidelake.proto`, generated once in the Rust client crate.
pub use tidelake_client::{
    ChangelogProgress, ChangelogTicket, SchemaChangeMode, StartMode, TICKET_TYPE_URL,
};

/// Largest IPC message body a batch is cut to (clients' default limits are 4 MiB and up).
const MAX_MESSAGE_BYTES: usize = 2 * 1024 * 1024;

/// The changelog ticket in DoGet ticket bytes, if they hold one.
pub fn parse_ticket(bytes: &[u8]) -> Option<Result<ChangelogTicket, Status>> {
    let any = Any::decode(bytes).ok()?;
    if any.type_url != TICKET_TYPE_URL {
        return None;
    }
    Some(
        ChangelogTicket::decode(any.value.as_ref())
            .map_err(|e| invalid(format!("malformed ChangelogTicket: {e}"))),
    )
}

/// The library's stream options for a ticket.
fn stream_options(t: &ChangelogTicket) -> Result<StreamOptions, Status> {
    use changes::StartMode as S;
    let mode = StartMode::try_from(t.start)
        .map_err(|_| invalid(format!("unknown start mode {}", t.start)))?;
    let start = match mode {
        StartMode::StartDefault => S::Default,
        StartMode::Latest => S::Latest,
        StartMode::LatestFull => S::LatestFull,
        StartMode::FromSnapshot => S::FromSnapshot(t.snapshot_id),
        StartMode::FromSnapshotFull => S::FromSnapshotFull(t.snapshot_id),
        StartMode::FromTimestamp => S::FromTimestamp(t.timestamp_millis),
        StartMode::CompactedFull => S::CompactedFull,
    };
    if matches!(mode, StartMode::FromSnapshot | StartMode::FromSnapshotFull) && t.snapshot_id < 1 {
        return Err(invalid(format!(
            "start mode {mode:?} needs snapshot_id >= 1, got {}",
            t.snapshot_id
        )));
    }
    let positive = |v: i64| (v > 0).then_some(v);
    Ok(StreamOptions {
        start,
        consumer_id: (!t.consumer_id.is_empty()).then(|| t.consumer_id.clone()),
        end_snapshot: positive(t.end_snapshot_id),
        end_timestamp_millis: positive(t.end_timestamp_millis),
        // With a filter every column is read; the projection is applied after filtering.
        projection: (!t.columns.is_empty() && t.filter.trim().is_empty())
            .then(|| t.columns.clone()),
    })
}

/// A compiled row filter and the columns kept after it.
struct RowFilter {
    predicate: Option<Arc<dyn PhysicalExpr>>,
    /// Output columns (indices into the read schema) and their schema.
    keep: Option<(Vec<usize>, SchemaRef)>,
    /// Field ids of the ticket's columns, to follow them across schema changes.
    keep_ids: Vec<Option<String>>,
}

/// A field's Paimon field id, as the read schema carries it.
fn field_id(schema: &SchemaRef, i: usize) -> Option<String> {
    schema.field(i).metadata().get("PARQUET:field_id").cloned()
}

impl RowFilter {
    fn new(t: &ChangelogTicket, read_schema: &SchemaRef) -> Result<Self, Status> {
        Self::compile(t, read_schema, &t.columns)
    }

    /// The same filter and columns over the schema a subscription moved to at `snapshot_id`.
    /// A filter that no longer compiles (it names a dropped or renamed column) ends the stream.
    fn evolve(
        &self,
        t: &ChangelogTicket,
        read_schema: &SchemaRef,
        snapshot_id: i64,
    ) -> Result<Self, Status> {
        let columns: Vec<String> = self
            .keep_ids
            .iter()
            .zip(&t.columns)
            .filter_map(|(id, name)| match id {
                Some(id) => (1..read_schema.fields().len())
                    .find(|&i| field_id(read_schema, i).as_ref() == Some(id))
                    .map(|i| read_schema.field(i).name().clone()),
                None => Some(name.clone()),
            })
            .collect();
        Self::compile(t, read_schema, &columns).map_err(|s| {
            super::status::status(
                ErrorKind::FailedPrecondition,
                format!(
                    "table {} changed its schema at snapshot {snapshot_id}: {}",
                    t.table,
                    s.message()
                ),
            )
        })
    }

    fn compile(
        t: &ChangelogTicket,
        read_schema: &SchemaRef,
        columns: &[String],
    ) -> Result<Self, Status> {
        if t.filter.trim().is_empty() {
            return Ok(Self {
                predicate: None,
                keep: None,
                keep_ids: vec![],
            });
        }
        crate::sql::limits::check_filter(&t.filter).map_err(to_status)?;
        let df_schema = DFSchema::try_from(read_schema.as_ref().clone())
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        let ctx = crate::sql::output_caps::capped_context();
        let bad =
            |e: datafusion::error::DataFusionError| invalid(format!("filter '{}': {e}", t.filter));
        let expr = ctx.parse_sql_expr(&t.filter, &df_schema).map_err(bad)?;
        let predicate = ctx.create_physical_expr(expr, &df_schema).map_err(bad)?;
        let keep = if t.columns.is_empty() {
            None
        } else {
            let mut idx = vec![0];
            for c in columns {
                match read_schema.index_of(c) {
                    Ok(i) if i > 0 => idx.push(i),
                    _ => return Err(invalid(format!("table {} has no column '{c}'", t.table))),
                }
            }
            let schema = Arc::new(
                read_schema
                    .project(&idx)
                    .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?,
            );
            Some((idx, schema))
        };
        let keep_ids = match &keep {
            Some((idx, _)) => idx[1..].iter().map(|&i| field_id(read_schema, i)).collect(),
            None => vec![],
        };
        Ok(Self {
            predicate: Some(predicate),
            keep,
            keep_ids,
        })
    }

    fn output_schema(&self, read_schema: &SchemaRef) -> SchemaRef {
        match &self.keep {
            Some((_, s)) => Arc::clone(s),
            None => Arc::clone(read_schema),
        }
    }

    fn apply(&self, batch: RecordBatch) -> Result<RecordBatch, Status> {
        let Some(p) = &self.predicate else {
            return Ok(batch);
        };
        let mask = p
            .evaluate(&batch)
            .and_then(|v| v.into_array(batch.num_rows()))
            .map_err(|e| invalid(format!("filter: {e}")))?;
        let mask = mask
            .as_boolean_opt()
            .ok_or_else(|| invalid("the filter is not a boolean expression"))?;
        let kept = filter_record_batch(&batch, mask)
            .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string()))?;
        match &self.keep {
            Some((idx, _)) => kept
                .project(idx)
                .map_err(|e| super::status::status(ErrorKind::Internal, e.to_string())),
            None => Ok(kept),
        }
    }
}

/// Encodes batches with their progress as FlightData (no dictionaries: schemas are plain).
struct Encoder {
    generator: IpcDataGenerator,
    tracker: DictionaryTracker,
    options: IpcWriteOptions,
    context: IpcWriteContext,
}

impl Encoder {
    fn batch(
        &mut self,
        batch: &RecordBatch,
        progress: &ChangelogProgress,
    ) -> Result<Vec<FlightData>, Status> {
        let metadata = bytes::Bytes::from(progress.encode_to_vec());
        let rows = batch.num_rows();
        // Large batches are cut so that no message exceeds the limit.
        let bytes = batch.get_array_memory_size().max(1);
        let per_message = if bytes > MAX_MESSAGE_BYTES && rows > 1 {
            (rows * MAX_MESSAGE_BYTES / bytes).max(1)
        } else {
            rows.max(1)
        };
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            let len = per_message.min(rows - start);
            let part = batch.slice(start, len);
            let (_, data) = self
                .generator
                .encode(&part, &mut self.tracker, &self.options, &mut self.context)
                .map_err(|e| {
                    super::status::status(ErrorKind::Internal, format!("encoding changes: {e}"))
                })?;
            out.push(FlightData::from(data).with_app_metadata(metadata.clone()));
            start += len;
            if start >= rows {
                break;
            }
        }
        Ok(out)
    }
}

/// Opens the subscription a ticket asks for and returns its FlightData stream. Bad tickets,
/// unknown tables and expired start snapshots fail here, before any data.
pub async fn subscribe(
    catalog: &Catalog,
    database: &str,
    ticket: ChangelogTicket,
) -> Result<impl Stream<Item = Result<FlightData, Status>> + Send + 'static, Status> {
    let name = ticket.table.trim();
    if name.is_empty() {
        return Err(invalid("ChangelogTicket.table is empty"));
    }
    let id = if name.contains('.') {
        Identifier::parse(name).map_err(to_status)?
    } else {
        Identifier::new(database, name)
    };
    let opts = stream_options(&ticket)?;
    let heartbeat = Duration::from_millis(match ticket.heartbeat_millis {
        0 => 1000,
        n => n.clamp(50, 3_600_000) as u64,
    });
    // Checked before the subscription starts: its task may record a consumer's progress at once.
    let end_on_schema_change = SchemaChangeMode::try_from(ticket.schema_change).map_err(|_| {
        invalid(format!(
            "unknown schema change mode {}",
            ticket.schema_change
        ))
    })? == SchemaChangeMode::EndStream;
    let table = catalog.load_table(&id).await.map_err(to_status)?;
    let sub = Subscription::start(table, opts, heartbeat)
        .await
        .map_err(to_status)?;
    let read_schema = sub.schema();
    let filter = RowFilter::new(&ticket, &read_schema)?;
    let schema = filter.output_schema(&read_schema);
    let options = IpcWriteOptions::default();
    let schema_message = FlightData::from(SchemaAsIpc::new(&schema, &options));
    let encoder = Encoder {
        generator: IpcDataGenerator::default(),
        tracker: DictionaryTracker::new(false),
        options,
        context: IpcWriteContext::default(),
    };
    let empty = RecordBatch::new_empty(Arc::clone(&schema));
    let events = stream::unfold(
        (Some(sub), filter, encoder, empty, ticket),
        move |(sub, mut filter, mut encoder, mut empty, ticket)| async move {
            let mut sub = sub?;
            let event = sub.next().await?;
            let mut ended = false;
            let messages = match event {
                Ok(ChangeEvent::SchemaChanged { snapshot_id, .. }) if end_on_schema_change => {
                    ended = true;
                    let progress = ChangelogProgress {
                        snapshot_id: snapshot_id - 1,
                        complete: true,
                        heartbeat: false,
                        schema_changed: true,
                    };
                    encoder.batch(&empty, &progress)
                }
                Ok(ChangeEvent::SchemaChanged {
                    snapshot_id,
                    schema: read_schema,
                }) => filter.evolve(&ticket, &read_schema, snapshot_id).map(|f| {
                    filter = f;
                    let schema = filter.output_schema(&read_schema);
                    empty = RecordBatch::new_empty(Arc::clone(&schema));
                    let progress = ChangelogProgress {
                        snapshot_id,
                        complete: false,
                        heartbeat: false,
                        schema_changed: true,
                    };
                    vec![
                        FlightData::from(SchemaAsIpc::new(&schema, &encoder.options))
                            .with_app_metadata(progress.encode_to_vec()),
                    ]
                }),
                Err(e) => Err(to_status(e)),
                Ok(ChangeEvent::Rows { snapshot_id, batch }) => filter.apply(batch).and_then(|b| {
                    if b.num_rows() == 0 {
                        return Ok(vec![]);
                    }
                    let progress = ChangelogProgress {
                        snapshot_id,
                        complete: false,
                        heartbeat: false,
                        schema_changed: false,
                    };
                    encoder.batch(&b, &progress)
                }),
                Ok(ChangeEvent::Completed { snapshot_id }) => {
                    let progress = ChangelogProgress {
                        snapshot_id,
                        complete: true,
                        heartbeat: false,
                        schema_changed: false,
                    };
                    encoder.batch(&empty, &progress)
                }
                Ok(ChangeEvent::Idle { last_completed }) => {
                    let progress = ChangelogProgress {
                        snapshot_id: last_completed,
                        complete: true,
                        heartbeat: true,
                        schema_changed: false,
                    };
                    encoder.batch(&empty, &progress)
                }
            };
            let items: Vec<Result<FlightData, Status>> = match messages {
                Ok(m) => m.into_iter().map(Ok).collect(),
                Err(s) => vec![Err(s)],
            };
            let sub = (!ended).then_some(sub);
            Some((stream::iter(items), (sub, filter, encoder, empty, ticket)))
        },
    )
    .flatten();
    Ok(stream::iter([Ok(schema_message)]).chain(events))
}
