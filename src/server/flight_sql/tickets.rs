//! Statement tickets and prepared-statement handles: self-contained (SQL, bound parameters, the
//! count of an update already run) and sealed for their principal (`crate::server::seal`), so
//! any server of the deployment serves them without statement state.

use super::*;

/// A statement ticket or prepared-statement handle, as sealed inside the bytes the client holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Handle {
    pub(crate) sql: String,
    /// Bound parameters as a base64 Arrow IPC stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) params: Option<String>,
    /// The count of an update already executed (updates run when their FlightInfo is requested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) count: Option<i64>,
}

fn owner(p: &Principal) -> seal::Owner<'_> {
    seal::Owner {
        tenant: &p.tenant.name,
        issuer: &p.issuer,
        subject: &p.subject,
    }
}

impl Handle {
    pub(crate) fn new(sql: String) -> Self {
        Self {
            sql,
            params: None,
            count: None,
        }
    }

    /// The opaque bytes handed to `principal`: a DoGet ticket or a prepared-statement handle.
    pub(crate) fn seal(
        &self,
        kind: seal::Kind,
        principal: &Principal,
        auth: &Authenticator,
    ) -> bytes::Bytes {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let exp =
            crate::server::auth::token::unix_now().saturating_add(auth.ticket_ttl().as_secs());
        seal::seal(auth.keys().ticket_key(), kind, owner(principal), exp, &json).into()
    }

    /// The handle in `bytes`, if this deployment sealed it of `kind` for `principal` and it has
    /// not expired.
    pub(crate) fn open(
        bytes: &[u8],
        kind: seal::Kind,
        principal: &Principal,
        auth: &Authenticator,
    ) -> std::result::Result<Self, Status> {
        let what = match kind {
            seal::Kind::Ticket => "ticket",
            seal::Kind::Handle => "prepared statement",
        };
        let now = crate::server::auth::token::unix_now();
        let json = seal::open(auth.keys().ticket_key(), kind, owner(principal), now, bytes)
            .map_err(|r| {
                let (code, message) = match (r, kind) {
                    (seal::Refused::NotOurs, _) => (
                        ErrorKind::Unauthenticated,
                        format!("not a {what} this deployment issued"),
                    ),
                    (seal::Refused::Expired, seal::Kind::Ticket) => (
                        ErrorKind::Unauthenticated,
                        "ticket expired; request a new FlightInfo".to_string(),
                    ),
                    (seal::Refused::Expired, seal::Kind::Handle) => (
                        ErrorKind::Unauthenticated,
                        "prepared statement expired; prepare it again".to_string(),
                    ),
                    (seal::Refused::OtherOwner, _) => (
                        ErrorKind::PermissionDenied,
                        format!("this {what} belongs to another principal"),
                    ),
                };
                crate::server::status::status(code, message)
            })?;
        serde_json::from_slice(json).map_err(|_| invalid(format!("malformed {what}")))
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
