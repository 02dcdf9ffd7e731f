//! Statement tickets and prepared-statement handles: self-contained (SQL, bound parameters,
//! owner), so any request is served without server-side statement state; and the checked
//! decoding of parameter batches.

use super::*;

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
    pub(super) fn encode(&self) -> bytes::Bytes {
        serde_json::to_vec(self).unwrap_or_default().into()
    }

    pub(super) fn decode(bytes: &[u8], principal: &Principal) -> std::result::Result<Self, Status> {
        let h: Handle = serde_json::from_slice(bytes)
            .map_err(|_| invalid("malformed statement handle or ticket"))?;
        if h.user != principal.user {
            return Err(crate::server::status::status(
                ErrorKind::PermissionDenied,
                "this statement handle belongs to another user",
            ));
        }
        Ok(h)
    }

    /// The bound parameter rows (one set of values per row).
    pub(super) fn param_rows(&self) -> std::result::Result<Vec<Vec<ScalarValue>>, Status> {
        let Some(p) = &self.params else {
            return Ok(vec![]);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(p)
            .map_err(|_| invalid("malformed parameters in statement handle"))?;
        // The handle came from the client: its stream is checked before arrow sizes anything.
        crate::server::ipc::check_ipc_stream(&bytes)
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

pub(super) fn encode_params(
    batches: &[RecordBatch],
) -> std::result::Result<Option<String>, Status> {
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
pub(super) fn checked_flight_data(
    input: impl Stream<Item = std::result::Result<arrow_flight::FlightData, FlightError>>
        + Send
        + 'static,
) -> impl Stream<Item = std::result::Result<arrow_flight::FlightData, FlightError>> + Send + 'static
{
    let mut schema: Option<Schema> = None;
    input.map(move |r| {
        let fd = r?;
        if let Some(s) = crate::server::ipc::check_flight_data(&fd, schema.as_ref())
            .map_err(FlightError::DecodeError)?
        {
            schema = Some(s);
        }
        Ok(fd)
    })
}
