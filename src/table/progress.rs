//! Progress and cancellation of long table operations (compaction, snapshot expiry, orphan-file
//! removal). The caller makes an [`Operation`], passes it to the `*_with` method, watches its
//! [`Progress`] (the latest report wins: a progress bar needs no history) and may cancel it from
//! anywhere. Operations check for cancellation only where stopping leaves the table as it was:
//! a cancelled compaction removes the files it wrote and commits nothing; expiry stops before it
//! deletes anything; orphan removal stops between files (each deletion stands on its own).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::error::{CancelledSnafu, Result};

/// Where a long operation stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// What it is doing now ("compacting", "reading manifests", "deleting files", ...).
    pub phase: String,
    /// Units of the phase done, and their total (0 when not known yet).
    pub done: u64,
    pub total: u64,
    /// Files written or deleted so far, and their bytes.
    pub files: u64,
    pub bytes: u64,
}

#[derive(Debug)]
struct Inner {
    cancelled: AtomicBool,
    progress: watch::Sender<Progress>,
}

/// A handle on one running operation, shared between it and whoever watches or cancels it.
#[derive(Debug, Clone)]
pub struct Operation {
    inner: Arc<Inner>,
}

impl Default for Operation {
    fn default() -> Self {
        Self::new()
    }
}

impl Operation {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                progress: watch::channel(Progress::default()).0,
            }),
        }
    }

    /// Asks the operation to stop at its next safe point; it then fails with `Cancelled`.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A receiver of the progress reports.
    pub fn watch(&self) -> watch::Receiver<Progress> {
        self.inner.progress.subscribe()
    }

    /// The latest report.
    pub fn progress(&self) -> Progress {
        self.inner.progress.borrow().clone()
    }

    /// Fails with `Cancelled` ("`what` was cancelled: ...") once cancel was asked.
    pub(crate) fn check(&self, what: &str) -> Result<()> {
        if self.is_cancelled() {
            let p = self.progress();
            return CancelledSnafu {
                message: format!(
                    "{what} was cancelled during '{}' ({} of {} done)",
                    p.phase, p.done, p.total
                ),
            }
            .fail();
        }
        Ok(())
    }

    /// Names what is happening before the operation's own phases begin.
    pub fn report_phase(&self, phase: &str) {
        self.phase(phase, 0);
    }

    /// Starts a phase of `total` units.
    pub(crate) fn phase(&self, phase: &str, total: u64) {
        self.inner.progress.send_modify(|p| {
            p.phase = phase.to_string();
            p.done = 0;
            p.total = total;
        });
    }

    /// One more unit done, having written or deleted `files` files of `bytes` bytes.
    pub(crate) fn advance(&self, files: u64, bytes: u64) {
        self.inner.progress.send_modify(|p| {
            p.done += 1;
            p.files += files;
            p.bytes += bytes;
        });
    }
}
