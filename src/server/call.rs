//! The per-call context of a Flight call: who makes it, what its audit line says, the slot it
//! was admitted with, and the server's shutdown signal. One home for what used to travel as loose
//! request extensions.
//!
//! ```text
//!  gate ──► request extensions: Principal, Arc<AuditNote>, MintedToken (after a password)
//!  service (dispatch) ──► Call { principal, note, shutdown } + AdmissionPermit ──► handler
//! ```
//!
//! The gate (`super::gate`) resolves the principal and opens the audit note; the dispatcher
//! (`super::service`) turns them into a [`Call`] with [`Call::begin`], which needs the server's
//! [`Shutdown`]: a call without one cannot be made (a compile error, not a default), so a long
//! stream (a subscription, a streaming write) always ends when the server stops. Handlers get
//! the `Call` as an argument; none reads request extensions.
//!
//! An [`AdmissionPermit`] is typed: a call holds it while it works, a streaming write gives it
//! back once its stream is open (the stream holds a `max_streams` place instead).

use std::pin::Pin;
use std::sync::Arc;

use futures::stream::Stream;
use tokio::sync::OwnedSemaphorePermit;
use tonic::{Request, Status};

use super::audit::AuditNote;
use super::principal::Principal;
use super::status::status;
use crate::error::ErrorKind;
use crate::metrics::GaugeGuard;
use crate::runtime::Admission;

/// A token minted for this call (Basic credentials in the header): the gate puts it into the
/// request, and the Handshake returns it in its payload too.
#[derive(Debug, Clone)]
pub struct MintedToken(pub String);

/// The server's shutdown signal: requested once the server starts draining, or once the server
/// is gone (its sender dropped). There is no default: whoever serves a call must be given it.
#[derive(Debug, Clone)]
pub struct Shutdown(tokio::sync::watch::Receiver<bool>);

/// A stream of a call's response messages.
pub type Responses<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

impl Shutdown {
    /// The signal `receiver` carries (true: shutting down).
    pub fn new(receiver: tokio::sync::watch::Receiver<bool>) -> Self {
        Self(receiver)
    }

    /// Resolves once shutdown is requested (at once if it already was).
    pub async fn requested(&mut self) {
        // An error means the sender is gone: the server is gone too.
        let _ = self.0.wait_for(|stopping| *stopping).await;
    }

    /// `stream`, ended with `ended()` once shutdown is requested: for streams that never end by
    /// themselves (subscriptions).
    pub fn ends<T: Send + 'static>(
        &self,
        stream: Responses<T>,
        ended: fn() -> Status,
    ) -> Responses<T> {
        use futures::StreamExt;
        Box::pin(futures::stream::unfold(
            (stream, self.clone(), false),
            move |(mut stream, mut shutdown, done)| async move {
                if done {
                    return None;
                }
                // Some(item) from the stream, or None once shutting down.
                let next = tokio::select! {
                    biased;
                    _ = shutdown.requested() => None,
                    item = stream.next() => Some(item),
                };
                match next {
                    None => Some((Err(ended()), (stream, shutdown, true))),
                    Some(item) => item.map(|item| (item, (stream, shutdown, false))),
                }
            },
        ))
    }
}

/// What a call was admitted with: its tenant's statement slot (when the tenant has a limit), its
/// share of the work slots, and its place in `tidelake_active_statements`. Dropping it gives all
/// of them back.
#[derive(Debug)]
pub struct AdmissionPermit {
    admission: Admission,
    held: Held,
}

/// The part of an [`AdmissionPermit`] a call's response holds while it streams (the work slot
/// goes with the work).
#[derive(Debug)]
pub struct Held {
    _tenant: Option<OwnedSemaphorePermit>,
    _active: GaugeGuard,
}

impl AdmissionPermit {
    /// A permit of `admission` and the tenant's slot; counts one active statement until dropped.
    pub fn new(admission: Admission, tenant: Option<OwnedSemaphorePermit>) -> Self {
        Self {
            admission,
            held: Held {
                _tenant: tenant,
                _active: GaugeGuard::new(&crate::metrics::metrics().active_statements),
            },
        }
    }

    /// The work slot (for the work pool) and what the response holds.
    pub fn split(self) -> (Admission, Held) {
        (self.admission, self.held)
    }
}

/// `stream`, holding `held` as long as it lives.
pub fn holding<T: Send + 'static, H: Send + 'static>(
    stream: Responses<T>,
    held: H,
) -> Responses<T> {
    use futures::StreamExt;
    Box::pin(stream.map(move |item| {
        let _held = &held;
        item
    }))
}

/// The context of one authenticated Flight call.
#[derive(Debug, Clone)]
pub struct Call {
    /// Who makes the call (resolved by the gate).
    pub principal: Principal,
    note: Arc<AuditNote>,
    shutdown: Shutdown,
}

/// The audit note the gate put into `req` (a fresh one, written nowhere, when there is none).
pub fn note<T>(req: &Request<T>) -> Arc<AuditNote> {
    req.extensions()
        .get::<Arc<AuditNote>>()
        .cloned()
        .unwrap_or_default()
}

impl Call {
    /// The context of `req`: the principal and note the gate put into it, and the server's
    /// `shutdown`. Unauthenticated when the gate resolved no principal.
    pub fn begin<T>(req: &Request<T>, shutdown: &Shutdown) -> Result<Self, Status> {
        let principal = req
            .extensions()
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| status(ErrorKind::Unauthenticated, "request was not authenticated"))?;
        Ok(Self {
            principal,
            note: note(req),
            shutdown: shutdown.clone(),
        })
    }

    /// Records what the call is about in its audit line.
    pub fn set_object(&self, object: impl FnOnce() -> String) {
        self.note.set_object(object());
    }

    /// Counts rows the call read or wrote in its audit line.
    pub fn add_rows(&self, rows: u64) {
        self.note.add_rows(rows);
    }

    /// The call's audit note (for a response stream that counts rows as they go).
    pub fn note(&self) -> &Arc<AuditNote> {
        &self.note
    }

    /// The server's shutdown signal.
    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn a_stream_ends_with_the_status_when_shutdown_is_requested() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let shutdown = Shutdown::new(rx);
        let forever: Responses<u32> = Box::pin(futures::stream::pending());
        let unavailable = || status(ErrorKind::Unavailable, "stopping");
        let mut s = shutdown.ends(forever, unavailable);
        tx.send(true).unwrap();
        let end = s.next().await.unwrap().unwrap_err();
        assert_eq!(end.code(), tonic::Code::Unavailable);
        assert!(s.next().await.is_none());
        // A server gone (its sender dropped) counts as shutting down.
        let (tx, rx) = tokio::sync::watch::channel(false);
        let never: Responses<u32> = Box::pin(futures::stream::pending());
        let mut s = Shutdown::new(rx).ends(never, unavailable);
        drop(tx);
        assert!(s.next().await.unwrap().is_err());
    }

    #[test]
    fn a_request_without_a_principal_is_refused() {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let req = Request::new(());
        let e = Call::begin(&req, &Shutdown::new(rx)).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert_eq!(e.message(), "request was not authenticated");
    }
}
