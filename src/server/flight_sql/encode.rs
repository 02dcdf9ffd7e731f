//! What the Flight SQL handlers send: schemas and batches in the plain types every client reads,
//! encoded batch by batch, and FlightInfo for statements and metadata commands.

use super::*;

/// The plain (non-view) equivalent of a type: JDBC before 19 cannot read view types.
pub(super) fn plain_type(t: &DataType) -> DataType {
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

pub(super) fn plain_field(f: &FieldRef) -> FieldRef {
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
pub(super) fn conform(
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

pub(super) fn batch_stream(batch: RecordBatch) -> DoGetStream {
    let schema = batch.schema();
    encode_stream(schema, stream::iter([Ok(batch)]).boxed())
}

pub(super) fn ipc_schema(schema: &Schema) -> std::result::Result<bytes::Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: arrow::error::ArrowError| {
            crate::server::status::status(ErrorKind::Internal, e.to_string())
        })?;
    Ok(bytes)
}

pub(super) fn flight_info(
    schema: &Schema,
    ticket: bytes::Bytes,
    descriptor: FlightDescriptor,
) -> std::result::Result<FlightInfo, Status> {
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| crate::server::status::status(ErrorKind::Internal, e.to_string()))?
        .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
        .with_descriptor(descriptor);
    Ok(info)
}

/// FlightInfo of a metadata command: its ticket is the command itself (as an `Any`).
pub(super) fn metadata_info(
    schema: &Schema,
    cmd: arrow_flight::sql::Any,
    descriptor: FlightDescriptor,
) -> std::result::Result<FlightInfo, Status> {
    flight_info(schema, cmd.encode_to_vec().into(), descriptor)
}
