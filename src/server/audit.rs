//! The audit log: one structured line per RPC, written by the gate when the call's response has
//! ended (or was dropped: CANCELLED): time, tenant, subject, issuer, method, object, gRPC status,
//! the refusal reason of a refused call, rows, bytes out, duration and peer. Never a password, a
//! token, SQL text or a bound parameter value: a statement is named by the first 8 hex digits of
//! its SHA-256 (for correlation), ingest, subscriptions and actions by their table or name.
//!
//! Without `[audit] file` the lines go to the log as events of target `audit` (shown with
//! `TIDELAKE_LOG=warn,audit=info`); with it, one thread appends them as JSON lines to the file
//! (a bounded queue in between: when it is full, lines are dropped and counted, never waited on).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sha2::Digest;

use crate::error::Result;

/// Lines the file writer may fall behind by before lines are dropped.
const QUEUE: usize = 65_536;

/// What the doors add to a call's audit line (found in the request's extensions).
#[derive(Debug, Default)]
pub struct AuditNote {
    object: Mutex<Option<String>>,
    rows: AtomicU64,
}

impl AuditNote {
    /// What the call is about (`statement #1a2b3c4d`, `ingest db.t`, `action tidelake.compact db.t`).
    pub fn set_object(&self, object: String) {
        *self.object.lock().unwrap_or_else(|e| e.into_inner()) = Some(object);
    }

    pub fn add_rows(&self, rows: u64) {
        self.rows.fetch_add(rows, Ordering::Relaxed);
    }

    fn object(&self) -> Option<String> {
        self.object
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The object of a statement: `statement #` and the first 8 hex digits of SHA-256 of its text.
pub fn statement_object(sql: &str) -> String {
    let digest = sha2::Sha256::digest(sql.as_bytes());
    format!("statement #{}", hex::encode(&digest[..4]))
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub time: String,
    pub tenant: Option<String>,
    pub subject: Option<String>,
    pub issuer: Option<String>,
    pub method: String,
    pub object: Option<String>,
    /// The gRPC code name (`OK`, `UNAUTHENTICATED`, ...), never the message.
    pub status: &'static str,
    /// Why the gate refused the call (`invalid bearer token: token expired`, ...).
    pub auth: Option<String>,
    pub rows: u64,
    pub bytes_out: u64,
    pub duration_ms: u64,
    pub peer: Option<String>,
}

impl Record {
    /// The record of a call to `method` from `peer`, begun now; who made it is filled in once
    /// the call's credentials are resolved ([`Self::identify`]).
    pub fn begin(method: String, peer: Option<String>) -> Self {
        Self {
            time: now_rfc3339(),
            tenant: None,
            subject: None,
            issuer: None,
            method,
            object: None,
            status: "UNKNOWN",
            auth: None,
            rows: 0,
            bytes_out: 0,
            duration_ms: 0,
            peer,
        }
    }

    /// Who made the call.
    pub fn identify(&mut self, p: &super::principal::Principal) {
        self.tenant = Some(p.tenant.name.clone());
        self.subject = Some(p.subject.clone());
        self.issuer = Some(p.issuer.to_string());
    }

    /// The record of a call, finished with what its note says.
    pub fn finish(mut self, note: &AuditNote) -> Self {
        self.object = self.object.or_else(|| note.object());
        self.rows = note.rows.load(Ordering::Relaxed);
        self
    }
}

/// The gRPC code name of a numeric `grpc-status`.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Now as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    chrono::DateTime::from_timestamp_millis(millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Where audit lines go.
#[derive(Debug, Clone)]
pub struct Audit {
    file: Option<SyncSender<String>>,
    dropped: Arc<AtomicU64>,
}

impl Audit {
    /// Lines as log events of target `audit`.
    pub fn to_log() -> Self {
        Self {
            file: None,
            dropped: Arc::default(),
        }
    }

    /// Lines appended to `path` (created if missing) by a thread of their own.
    #[allow(clippy::disallowed_methods)] // Opened once, at start-up; written on its own thread.
    pub fn to_file(path: &str) -> Result<Self> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| {
                crate::error::InvalidArgumentSnafu {
                    message: format!("config: [audit] file {path}: {e}"),
                }
                .build()
            })?;
        let (tx, rx) = sync_channel::<String>(QUEUE);
        let shown = path.to_string();
        std::thread::Builder::new()
            .name("tidelake-audit".into())
            .spawn(move || {
                for line in rx {
                    if let Err(e) = file.write_all(line.as_bytes()) {
                        tracing::error!(path = %shown, error = %e, "writing the audit log");
                    }
                }
                let _ = file.flush();
            })
            .map_err(|e| {
                crate::error::InternalSnafu {
                    message: format!("starting the audit writer: {e}"),
                }
                .build()
            })?;
        Ok(Self {
            file: Some(tx),
            dropped: Arc::default(),
        })
    }

    /// Writes the line of one finished call, and counts it in `tidelake_requests_total{code}`.
    /// Every call is also one log line at info: the audit event itself when the audit goes to
    /// the log, else a short `request` event (the full line is in the audit file).
    pub fn write(&self, r: &Record) {
        crate::metrics::metrics()
            .requests
            .get_or_create(&[("code", r.status)])
            .inc();
        if self.file.is_some() {
            tracing::info!(
                target: "request",
                method = %r.method,
                status = r.status,
                tenant = r.tenant.as_deref().unwrap_or(""),
                duration_ms = r.duration_ms,
            );
        }
        match &self.file {
            None => tracing::info!(
                target: "audit",
                tenant = r.tenant.as_deref().unwrap_or(""),
                subject = r.subject.as_deref().unwrap_or(""),
                issuer = r.issuer.as_deref().unwrap_or(""),
                method = %r.method,
                object = r.object.as_deref().unwrap_or(""),
                status = r.status,
                auth = r.auth.as_deref().unwrap_or(""),
                rows = r.rows,
                bytes_out = r.bytes_out,
                duration_ms = r.duration_ms,
                peer = r.peer.as_deref().unwrap_or(""),
            ),
            Some(tx) => {
                let mut line = serde_json::to_string(r).unwrap_or_default();
                line.push('\n');
                if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                    tx.try_send(line)
                {
                    let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                    if n.is_power_of_two() {
                        tracing::warn!(dropped = n, "the audit log falls behind; lines dropped");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_named_by_a_hash_and_records_are_json() {
        let o = statement_object("SELECT 'secret-param-4242'");
        assert!(
            o.starts_with("statement #") && o.len() == "statement #".len() + 8,
            "{o}"
        );
        assert!(!o.contains("secret"));
        assert_eq!(o, statement_object("SELECT 'secret-param-4242'"));
        let note = AuditNote::default();
        note.add_rows(3);
        note.add_rows(4);
        note.set_object(o.clone());
        let r = Record {
            time: now_rfc3339(),
            tenant: Some("acme".into()),
            subject: Some("alice".into()),
            issuer: Some("tidelake".into()),
            method: "DoGet".into(),
            object: None,
            status: code_name(tonic::Code::Ok),
            auth: None,
            rows: 0,
            bytes_out: 10,
            duration_ms: 1,
            peer: None,
        }
        .finish(&note);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["rows"], 7);
        assert_eq!(v["object"], o);
        assert_eq!(v["status"], "OK");
        assert!(r.time.ends_with('Z') && r.time.len() == 24, "{}", r.time);
    }

    #[test]
    fn a_file_sink_appends_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log").display().to_string();
        let audit = Audit::to_file(&path).unwrap();
        let note = AuditNote::default();
        for method in ["Handshake", "DoGet"] {
            let r = Record {
                time: now_rfc3339(),
                tenant: None,
                subject: None,
                issuer: None,
                method: method.into(),
                object: None,
                status: "OK",
                auth: None,
                rows: 0,
                bytes_out: 0,
                duration_ms: 0,
                peer: None,
            };
            audit.write(&r.finish(&note));
        }
        drop(audit);
        // The writer thread drains the queue once every sender is gone.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            #[allow(clippy::disallowed_methods)]
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() == 2 {
                let methods: Vec<String> = text
                    .lines()
                    .map(|l| {
                        serde_json::from_str::<serde_json::Value>(l).unwrap()["method"].to_string()
                    })
                    .collect();
                assert_eq!(methods, ["\"Handshake\"", "\"DoGet\""]);
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{text}");
            std::hint::spin_loop();
        }
    }
}
