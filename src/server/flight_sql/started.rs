//! Queries started when their FlightInfo is asked for. A client asks for a query's FlightInfo and
//! then, one round trip later, for its ticket's stream: a query begun at the first call has its
//! first batches under way by the second. The ticket still carries the whole statement, so a
//! DoGet that finds nothing here (on another server of the deployment, after the wait, or a
//! second time) runs it as before.
//!
//! A started query holds at most a few batches until its DoGet comes; one that is not fetched
//! within [`WAIT`], or that [`WAITING`] newer ones push out, is dropped, which cancels it. Only
//! queries are started early (updates already run at their FlightInfo), and a query has no
//! effect to run twice.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::*;

/// How long a started query waits for its DoGet.
const WAIT: Duration = Duration::from_secs(30);

/// How many started queries may wait at once on a server.
const WAITING: u64 = 64;

/// Batches a started query produces ahead of its DoGet.
const AHEAD: usize = 2;

/// A started query's schema and batches, once planned; or why it could not be.
type Begun = Result<(SchemaRef, mpsc::Receiver<Result<RecordBatch>>)>;

/// One started query waiting for its DoGet.
struct Waiting {
    /// Whose query it is (tenant, issuer and subject).
    owner: String,
    begun: std::sync::Mutex<Option<oneshot::Receiver<Begun>>>,
}

/// The queries of this server that wait for their DoGet, by the number their ticket carries.
pub(crate) struct Started {
    waiting: moka::sync::Cache<u64, Arc<Waiting>>,
}

/// The owner of `p`'s queries, as one string.
pub(super) fn owner_key(p: &Principal) -> String {
    format!("{}\u{0}{}\u{0}{}", p.tenant.name, p.issuer, p.subject)
}

impl Started {
    pub(crate) fn new() -> Self {
        Started {
            waiting: moka::sync::Cache::builder()
                .max_capacity(WAITING)
                .time_to_live(WAIT)
                .build(),
        }
    }

    /// Starts `sql` with `params` for `owner` and returns the number its ticket carries; none if
    /// no number could be drawn (the query then runs at its DoGet).
    pub(crate) fn start(
        &self,
        engine: SqlEngine,
        session: SqlSession,
        sql: String,
        params: Vec<ScalarValue>,
        owner: String,
    ) -> Option<u64> {
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).ok()?;
        let id = u64::from_le_bytes(id);
        let (begun_tx, begun_rx) = oneshot::channel();
        tokio::spawn(async move {
            let out = match engine.execute(&session, &sql, &params).await {
                Ok(out) => out,
                Err(e) => {
                    let _ = begun_tx.send(Err(e));
                    return;
                }
            };
            let (tx, rx) = mpsc::channel(AHEAD);
            if begun_tx.send(Ok((out.schema, rx))).is_err() {
                return;
            }
            let mut batches = out.stream;
            // Ends when the batches do or when the waiting query or its DoGet is dropped.
            while let Some(batch) = batches.next().await {
                if tx.send(batch).await.is_err() {
                    return;
                }
            }
        });
        let waiting = Waiting {
            owner,
            begun: std::sync::Mutex::new(Some(begun_rx)),
        };
        self.waiting.insert(id, Arc::new(waiting));
        Some(id)
    }

    /// The schema and batches of started query `id`, if it waits here for `owner`; it is then no
    /// longer waiting.
    pub(crate) async fn take(&self, id: u64, owner: &str) -> Option<Begun> {
        let waiting = self.waiting.get(&id).filter(|w| w.owner == owner)?;
        self.waiting.invalidate(&id);
        let begun = waiting.begun.lock().ok()?.take()?;
        begun.await.ok()
    }
}

/// The batches of a started query, as a stream.
pub(super) fn receiver_stream(
    rx: mpsc::Receiver<Result<RecordBatch>>,
) -> BoxStream<'static, Result<RecordBatch>> {
    stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
    .boxed()
}
