//! A tenant's long operations (compaction, snapshot and changelog expiry, orphan-file removal)
//! running on this server: registered by the door that starts them (the `tidelake.*` admin
//! actions), listed by `tidelake.list_operations`, cancelled by `tidelake.cancel`. Each tenant
//! owns one registry ([`super::Tenant::operations`]), so a caller sees and cancels only its own
//! tenant's operations.
//!
//! An operation stays listed until its task has stopped: the task holds its [`Registration`],
//! and dropping that removes the entry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tidelake_client::admin::{OperationInfo, OperationList, OperationProgress};

use crate::error::{ErrorKind, Result};
use crate::table::progress::{Operation, Progress};
use crate::table::Table;

/// One registered operation.
#[derive(Debug)]
struct Running {
    info: OperationInfo,
    op: Operation,
}

/// The long operations this server runs for one tenant, by id.
#[derive(Debug, Default)]
pub struct Operations {
    running: Mutex<HashMap<String, Running>>,
}

/// An operation's place in [`Operations`], held by its task: the operation stays listed until
/// it has stopped.
#[derive(Debug)]
pub struct Registration {
    ops: Arc<Operations>,
    id: String,
    op: Operation,
}

impl Registration {
    /// The operation's id (what `tidelake.cancel` names).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The operation: its progress and its cancellation.
    pub fn operation(&self) -> &Operation {
        &self.op
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.ops.lock().remove(&self.id);
    }
}

/// The progress of operation `id` as the `OperationProgress` message.
pub fn progress_message(id: &str, p: &Progress) -> OperationProgress {
    OperationProgress {
        operation_id: id.to_string(),
        phase: p.phase.clone(),
        done: p.done as i64,
        total: p.total as i64,
        files: p.files as i64,
        bytes: p.bytes as i64,
    }
}

impl Operations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new operation `action` on `table` started by `user`; it is listed until the
    /// returned registration is dropped.
    pub fn register(self: &Arc<Self>, action: &str, table: &Table, user: &str) -> Registration {
        let id = uuid::Uuid::new_v4().to_string();
        let op = Operation::new();
        op.report_phase("starting");
        let info = OperationInfo {
            operation_id: id.clone(),
            action: action.to_string(),
            table: table.identifier().to_string(),
            user: user.to_string(),
            started_millis: table.clock().now_millis(),
            ..Default::default()
        };
        self.lock().insert(
            id.clone(),
            Running {
                info,
                op: op.clone(),
            },
        );
        Registration {
            ops: Arc::clone(self),
            id,
            op,
        }
    }

    fn info(r: &Running) -> OperationInfo {
        OperationInfo {
            progress: Some(progress_message(&r.info.operation_id, &r.op.progress())),
            cancelling: r.op.is_cancelled(),
            ..r.info.clone()
        }
    }

    /// The running operations, oldest first.
    pub fn list(&self) -> OperationList {
        let mut operations: Vec<_> = self.lock().values().map(Self::info).collect();
        operations.sort_by(|a, b| {
            (a.started_millis, &a.operation_id).cmp(&(b.started_millis, &b.operation_id))
        });
        OperationList { operations }
    }

    /// Cancels operation `id` (it stops at its next safe point); its description, or NotFound.
    pub fn cancel(&self, id: &str) -> Result<OperationInfo> {
        let running = self.lock();
        let Some(r) = running.get(id) else {
            return Err(crate::error::of_kind(
                ErrorKind::NotFound,
                format!("no running operation '{id}' (it may have finished)"),
            ));
        };
        r.op.cancel();
        Ok(Self::info(r))
    }
}
