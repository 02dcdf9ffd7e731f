//! What an Arrow IPC message from a client may claim. Every count, length and offset in a
//! message's header (body length, buffer offsets and lengths, the uncompressed length in front
//! of a compressed buffer, row counts, node lengths and null counts, variadic buffer counts) is
//! checked against the bytes that actually arrived *before* arrow decodes the message, because
//! arrow's decoder sizes allocations and slices from them (a 4 EiB claim aborts the process; a
//! negative length panics). Used for DoPut streams (ingest, bound parameters) and for the IPC
//! stream of parameters a statement handle carries.
//!
//! A message passes when every buffer lies inside its body and every array's buffers are large
//! enough for the lengths its nodes claim; arrow's own validation (on by default) then checks
//! the values (offsets inside value buffers, UTF-8, dictionary keys).
//!
//! This module owns these checks and the checked stream of a DoPut's messages
//! ([`checked_flight_data`]); it imports nothing of the server.

use crate::error::Refusal;
use std::collections::VecDeque;

use arrow::datatypes::{DataType, Schema, UnionMode};
use arrow::ipc::{self, BodyCompressionMethod, CompressionType, MessageHeader, MetadataVersion};
use arrow_flight::error::FlightError;
use arrow_flight::FlightData;

/// Most bytes a message's buffers may decompress to, in total.
pub const MAX_DECOMPRESSED_BYTES: i64 = 1024 * 1024 * 1024;

/// Rows a message may claim beyond what its bytes can hold (arrays of type Null, or a batch
/// with no columns, have no buffers at all).
const FREE_ROWS: i64 = 64 * 1024;

/// Checks one FlightData message; `schema` is the stream's schema once its Schema message came.
/// A Schema message's schema is returned (decoded once, here).
pub(crate) fn check_flight_data(
    fd: &FlightData,
    schema: Option<&Schema>,
) -> Result<Option<Schema>, Refusal> {
    if fd.data_header.is_empty() {
        return if fd.data_body.is_empty() {
            Ok(None)
        } else {
            Err(Refusal("a message body without a header".into()))
        };
    }
    check_message(&fd.data_header, &fd.data_body, schema)
}

/// Decodes a Schema message's schema, refusing (instead of panicking on) malformed ones.
fn decode_schema(header: &[u8]) -> Result<Schema, Refusal> {
    let msg =
        ipc::root_as_message(header).map_err(|e| Refusal(format!("malformed IPC message: {e}")))?;
    let fb = msg
        .header_as_schema()
        .ok_or_else(|| Refusal("a Schema message without a schema".into()))?;
    // arrow's schema conversion panics on some malformed inputs (unknown type ids).
    std::panic::catch_unwind(|| ipc::convert::fb_to_schema(fb))
        .map_err(|_| Refusal("malformed schema in an IPC message".into()))
}

fn check_message(
    header: &[u8],
    body: &[u8],
    schema: Option<&Schema>,
) -> Result<Option<Schema>, Refusal> {
    let msg =
        ipc::root_as_message(header).map_err(|e| Refusal(format!("malformed IPC message: {e}")))?;
    let claimed = msg.bodyLength();
    if claimed < 0 || claimed as u64 > body.len() as u64 {
        return Err(Refusal(format!(
            "the IPC message claims a body of {claimed} bytes; {} arrived",
            body.len()
        )));
    }
    let v4 = msg.version() < MetadataVersion::V5;
    match msg.header_type() {
        MessageHeader::NONE => Ok(None),
        MessageHeader::Schema => decode_schema(header).map(Some),
        MessageHeader::RecordBatch => {
            let rb = msg
                .header_as_record_batch()
                .ok_or_else(|| Refusal("no record batch".into()))?;
            let s = schema.ok_or_else(|| Refusal("a record batch before the schema".into()))?;
            let types: Vec<&DataType> = s.fields().iter().map(|f| f.data_type()).collect();
            check_batch(rb, body, &types, v4).map(|()| None)
        }
        MessageHeader::DictionaryBatch => {
            let d = msg
                .header_as_dictionary_batch()
                .ok_or_else(|| Refusal("no dictionary batch".into()))?;
            let rb = d
                .data()
                .ok_or_else(|| Refusal("a dictionary batch without data".into()))?;
            let s = schema.ok_or_else(|| Refusal("a dictionary batch before the schema".into()))?;
            let value = dictionary_value_type(s, d.id())
                .ok_or_else(|| Refusal("an unknown dictionary id".into()))?;
            check_batch(rb, body, &[&value], v4).map(|()| None)
        }
        other => Err(Refusal(format!("unsupported IPC message type {other:?}"))),
    }
}

/// The value type of dictionary `id` (ids are assigned in field order, depth first).
fn dictionary_value_type(schema: &Schema, id: i64) -> Option<DataType> {
    fn walk(t: &DataType, next: &mut i64, id: i64) -> Option<DataType> {
        match t {
            DataType::Dictionary(_, v) => {
                if *next == id {
                    return Some(v.as_ref().clone());
                }
                *next += 1;
                walk(v, next, id)
            }
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => walk(f.data_type(), next, id),
            DataType::Struct(fs) => fs.iter().find_map(|f| walk(f.data_type(), next, id)),
            DataType::Union(fs, _) => fs.iter().find_map(|(_, f)| walk(f.data_type(), next, id)),
            DataType::RunEndEncoded(r, v) => {
                walk(r.data_type(), next, id).or_else(|| walk(v.data_type(), next, id))
            }
            _ => None,
        }
    }
    let mut next = 0;
    schema
        .fields()
        .iter()
        .find_map(|f| walk(f.data_type(), &mut next, id))
}

fn check_batch(
    rb: ipc::RecordBatch<'_>,
    body: &[u8],
    types: &[&DataType],
    v4: bool,
) -> Result<(), Refusal> {
    let nodes = rb
        .nodes()
        .ok_or_else(|| Refusal("a record batch without field nodes".into()))?;
    let bufs = rb
        .buffers()
        .ok_or_else(|| Refusal("a record batch without buffers".into()))?;
    let compressed = match rb.compression() {
        None => false,
        Some(c)
            if c.method() == BodyCompressionMethod::BUFFER
                && matches!(
                    c.codec(),
                    CompressionType::LZ4_FRAME | CompressionType::ZSTD
                ) =>
        {
            true
        }
        Some(_) => return Err(Refusal("unsupported IPC compression".into())),
    };
    // The length of each buffer once decompressed.
    let mut sizes = Vec::with_capacity(bufs.len());
    let mut total: i64 = 0;
    for b in bufs.iter() {
        let (off, len) = (b.offset(), b.length());
        let end = off.checked_add(len);
        if off < 0 || len < 0 || end.is_none_or(|e| e as u64 > body.len() as u64) {
            return Err(Refusal(format!(
                "an IPC buffer at offset {off} of {len} bytes lies outside the {}-byte body",
                body.len()
            )));
        }
        let size = if !compressed || len == 0 {
            len
        } else {
            let s = &body[off as usize..(off + len) as usize];
            let prefix: [u8; 8] = s.get(..8).and_then(|p| p.try_into().ok()).ok_or_else(|| {
                Refusal("a compressed IPC buffer shorter than its length prefix".into())
            })?;
            match i64::from_le_bytes(prefix) {
                -1 => len - 8,
                n if (0..=MAX_DECOMPRESSED_BYTES).contains(&n) => n,
                n => {
                    return Err(Refusal(format!(
                        "a compressed IPC buffer claims {n} bytes uncompressed (the limit is \
                         {MAX_DECOMPRESSED_BYTES})"
                    )))
                }
            }
        };
        total = total.saturating_add(size);
        sizes.push(size);
    }
    if total > MAX_DECOMPRESSED_BYTES {
        return Err(Refusal(format!(
            "an IPC message decompresses to {total} bytes, more than {MAX_DECOMPRESSED_BYTES}"
        )));
    }
    // Every array needs at least one bit per row, but for Null arrays and empty batches.
    let max_len = total.saturating_mul(8).saturating_add(FREE_ROWS);
    if !(0..=max_len).contains(&rb.length()) {
        return Err(Refusal(format!(
            "an IPC record batch claims {} rows, more than its {total} bytes can hold",
            rb.length()
        )));
    }
    let mut variadic = VecDeque::new();
    for c in rb.variadicBufferCounts().into_iter().flatten() {
        if c < 0 || c as usize > bufs.len() {
            return Err(Refusal(format!("an IPC variadic buffer count of {c}")));
        }
        variadic.push_back(c);
    }
    let mut walk = Walk {
        nodes: nodes.iter().copied().collect::<Vec<_>>().into_iter(),
        sizes: sizes.into_iter(),
        variadic,
        v4,
        max_len,
    };
    for t in types {
        walk.field(t)?;
    }
    if !walk.variadic.is_empty() {
        return Err(Refusal(
            "more IPC variadic buffer counts than view arrays".into(),
        ));
    }
    Ok(())
}

/// Walks the field nodes and buffers in the order arrow's reader consumes them.
struct Walk {
    nodes: std::vec::IntoIter<ipc::FieldNode>,
    sizes: std::vec::IntoIter<i64>,
    variadic: VecDeque<i64>,
    v4: bool,
    max_len: i64,
}

impl Walk {
    fn buffer(&mut self) -> Result<i64, Refusal> {
        self.sizes
            .next()
            .ok_or_else(|| Refusal("an IPC record batch with too few buffers".into()))
    }

    fn field(&mut self, t: &DataType) -> Result<(), Refusal> {
        use DataType::*;
        let n = self
            .nodes
            .next()
            .ok_or_else(|| Refusal("an IPC record batch with too few field nodes".into()))?;
        let (len, nulls) = (n.length(), n.null_count());
        if !(0..=self.max_len).contains(&len) || !(0..=len).contains(&nulls) {
            return Err(Refusal(format!(
                "an IPC field node claims {len} values with {nulls} nulls"
            )));
        }
        let validity = |bytes: i64| {
            if nulls > 0 && bytes < (len + 7) / 8 {
                Err(Refusal(format!(
                    "an IPC validity buffer of {bytes} bytes for {len} values"
                )))
            } else {
                Ok(())
            }
        };
        match t {
            Null => {}
            Utf8 | Binary | LargeUtf8 | LargeBinary => {
                validity(self.buffer()?)?;
                self.buffer()?;
                self.buffer()?;
            }
            Utf8View | BinaryView => {
                let count = self
                    .variadic
                    .pop_front()
                    .ok_or_else(|| Refusal("a missing variadic buffer count".into()))?;
                validity(self.buffer()?)?;
                for _ in 0..=count {
                    self.buffer()?;
                }
            }
            List(f) | LargeList(f) | Map(f, _) => {
                validity(self.buffer()?)?;
                self.buffer()?;
                self.field(f.data_type())?;
            }
            ListView(f) | LargeListView(f) => {
                validity(self.buffer()?)?;
                self.buffer()?;
                self.buffer()?;
                self.field(f.data_type())?;
            }
            FixedSizeList(f, _) => {
                validity(self.buffer()?)?;
                self.field(f.data_type())?;
            }
            Struct(fs) => {
                validity(self.buffer()?)?;
                for f in fs {
                    self.field(f.data_type())?;
                }
            }
            RunEndEncoded(r, v) => {
                self.field(r.data_type())?;
                self.field(v.data_type())?;
            }
            Union(fs, mode) => {
                if self.v4 {
                    self.buffer()?;
                }
                if self.buffer()? < len {
                    return Err(Refusal(
                        "an IPC union type-id buffer shorter than its length".into(),
                    ));
                }
                if *mode == UnionMode::Dense && self.buffer()? < len.saturating_mul(4) {
                    return Err(Refusal(
                        "an IPC union offsets buffer shorter than its length".into(),
                    ));
                }
                for (_, f) in fs.iter() {
                    self.field(f.data_type())?;
                }
            }
            // Primitives, Boolean, FixedSizeBinary, decimals, temporals, dictionary keys.
            _ => {
                validity(self.buffer()?)?;
                self.buffer()?;
            }
        }
        Ok(())
    }
}

/// Checks an Arrow IPC *stream* (the format of `StreamWriter`) message by message, framing it
/// here so that no length from it sizes anything before it is checked.
pub(crate) fn check_ipc_stream(bytes: &[u8]) -> Result<(), Refusal> {
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    let mut pos = 0usize;
    let mut schema: Option<Schema> = None;
    loop {
        let Some(mut w) = word(pos) else {
            return if pos == bytes.len() {
                Ok(())
            } else {
                Err(Refusal("a truncated IPC stream".into()))
            };
        };
        pos += 4;
        if w == 0xFFFF_FFFF {
            w = word(pos).ok_or_else(|| Refusal("a truncated IPC stream".into()))?;
            pos += 4;
        }
        if w == 0 {
            return Ok(());
        }
        let meta_len = i32::try_from(w)
            .map_err(|_| Refusal("a negative IPC metadata length".into()))?
            as usize;
        let header = bytes
            .get(pos..pos.saturating_add(meta_len))
            .ok_or_else(|| Refusal("a truncated IPC message header".into()))?;
        pos += meta_len;
        let msg = ipc::root_as_message(header)
            .map_err(|e| Refusal(format!("malformed IPC message: {e}")))?;
        let body_len = usize::try_from(msg.bodyLength())
            .map_err(|_| Refusal("a negative IPC body length".into()))?;
        let body = bytes
            .get(pos..pos.saturating_add(body_len))
            .ok_or_else(|| Refusal("an IPC message body longer than the stream".into()))?;
        pos += body_len;
        if let Some(s) = check_message(header, body, schema.as_ref())? {
            schema = Some(s);
        }
    }
}

/// A DoPut's messages as they arrive from the client (the descriptor's message first).
pub type FlightDataIn = futures::stream::BoxStream<'static, Result<FlightData, tonic::Status>>;

/// `input` with every message checked ([`check_flight_data`]) before arrow decodes it: what
/// every DoPut handler reads its client's messages through.
pub(crate) fn checked_flight_data(
    input: impl futures::Stream<Item = Result<FlightData, FlightError>> + Send + 'static,
) -> impl futures::Stream<Item = Result<FlightData, FlightError>> + Send + 'static {
    let mut schema: Option<Schema> = None;
    futures::StreamExt::map(input, move |r| {
        let fd = r?;
        if let Some(s) =
            check_flight_data(&fd, schema.as_ref()).map_err(|r| FlightError::DecodeError(r.0))?
        {
            schema = Some(s);
        }
        Ok(fd)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::Field;
    use arrow_flight::encode::FlightDataEncoderBuilder;
    use futures::TryStreamExt;

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
                Arc::new(StringArray::from(vec![Some("a"), Some("bb"), None])),
            ],
        )
        .unwrap()
    }

    async fn messages() -> Vec<FlightData> {
        FlightDataEncoderBuilder::new()
            .build(futures::stream::iter([Ok(batch())]))
            .try_collect()
            .await
            .unwrap()
    }

    /// A copy of `fd` whose header has `patch` applied to its bytes at the field found by `find`.
    fn with_header(fd: &FlightData, header: Vec<u8>) -> FlightData {
        FlightData {
            data_header: header.into(),
            ..fd.clone()
        }
    }

    #[tokio::test]
    async fn honest_messages_pass() {
        let msgs = messages().await;
        let schema = batch().schema();
        assert_eq!(
            check_flight_data(&msgs[0], None).unwrap().as_ref(),
            Some(schema.as_ref())
        );
        for m in &msgs[1..] {
            assert_eq!(check_flight_data(m, Some(&schema)).unwrap(), None);
        }
        let mut buf = Vec::new();
        {
            let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut buf, &schema).unwrap();
            w.write(&batch()).unwrap();
            w.finish().unwrap();
        }
        check_ipc_stream(&buf).unwrap();
    }

    #[tokio::test]
    async fn lies_about_sizes_are_refused() {
        let msgs = messages().await;
        let schema = batch().schema();
        let data = &msgs[1];
        // A body shorter than the header says.
        let short = FlightData {
            data_body: data.data_body.slice(..data.data_body.len() / 2),
            ..data.clone()
        };
        assert!(check_flight_data(&short, Some(&schema)).is_err());
        // Every 8-byte-aligned i64 in the header replaced by a huge and by a negative value:
        // whichever field it hits (body length, offset, length, row count, node length), the
        // message is either refused or still consistent; never does checking panic.
        let header = data.data_header.to_vec();
        let mut refused = 0;
        for at in (0..header.len().saturating_sub(8)).step_by(4) {
            for v in [i64::MAX / 2, -8, 1 << 40] {
                let mut h = header.clone();
                h[at..at + 8].copy_from_slice(&v.to_le_bytes());
                if check_flight_data(&with_header(data, h), Some(&schema)).is_err() {
                    refused += 1;
                }
            }
        }
        assert!(refused > 10, "{refused}");
        // A truncated or garbage stream.
        assert!(check_ipc_stream(&[0xFF, 0xFF, 0xFF, 0xFF, 0x10, 0, 0, 0, 1]).is_err());
        assert!(check_ipc_stream(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
    }
}
