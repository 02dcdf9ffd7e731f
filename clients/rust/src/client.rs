//! [`Client`]: one authenticated connection to a tidelake server for everything but
//! subscriptions: SQL through Flight SQL (queries into record batches, updates into counts), bulk
//! ingest with row kinds (append, upsert, delete, apply a changelog), and every administrative
//! action as a typed method (`proto/tidelake.proto`). [`Client::subscribe`] opens a
//! [`Subscriber`] with the same credentials.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{
    Any, CommandStatementIngest, TableDefinitionOptions, TableExistsOption, TableNotExistOption,
};
use arrow_flight::Action;
use futures::{StreamExt, TryStreamExt};
use prost::Message;
use tonic::transport::{Channel, Endpoint};

use crate::admin::*;
use crate::{ChangelogTicket, Error, Subscriber};

impl From<FlightError> for Error {
    fn from(e: FlightError) -> Self {
        match e {
            FlightError::Tonic(s) => Error::Status(*s),
            other => Error::Protocol(other.to_string()),
        }
    }
}

/// What an ingest does when the table exists or not (Flight SQL's table definition options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IngestMode {
    /// Append to an existing table (NotFound if there is none).
    #[default]
    Append,
    /// Create the table (AlreadyExists if there is one).
    Create,
    /// Replace the table's rows (and, when the definition differs, the table).
    Replace,
    /// Create the table if needed, then append.
    CreateOrAppend,
}

/// How to ingest: the mode, and for tables it creates, their definition.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    pub mode: IngestMode,
    pub primary_key: Vec<String>,
    pub partition_keys: Vec<String>,
    /// Paimon table options (`bucket`, `merge-engine`, `changelog-producer`, ...).
    pub options: Vec<(String, String)>,
    /// A string column of row kinds (`+I`, `-U`, `+U`, `-D`), not stored.
    pub row_kind_column: Option<String>,
}

/// An authenticated connection (a Flight SQL session with its current database).
#[derive(Debug, Clone)]
pub struct Client {
    sql: FlightSqlServiceClient<Channel>,
    endpoint: String,
    user: String,
    password: String,
}

impl Client {
    /// Connects to `endpoint` (`http://host:port`) and logs in (Basic handshake; the bearer
    /// token the server returns is sent with every later call).
    pub async fn connect(endpoint: &str, user: &str, password: &str) -> Result<Self, Error> {
        let channel = Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| Error::Protocol(format!("bad endpoint '{endpoint}': {e}")))?
            .connect()
            .await
            .map_err(Error::Transport)?;
        let mut sql = FlightSqlServiceClient::new(channel);
        sql.handshake(user, password).await.map_err(|e| match e {
            arrow_flight::error::FlightError::Tonic(s) => Error::Status(*s),
            other => Error::Status(tonic::Status::unauthenticated(other.to_string())),
        })?;
        Ok(Self {
            sql,
            endpoint: endpoint.to_string(),
            user: user.to_string(),
            password: password.to_string(),
        })
    }

    /// Runs a query; its rows.
    pub async fn query(&mut self, sql: &str) -> Result<Vec<RecordBatch>, Error> {
        let info = self.sql.execute(sql.to_string(), None).await?;
        let mut out = Vec::new();
        for endpoint in info.endpoint {
            let Some(ticket) = endpoint.ticket else {
                continue;
            };
            let stream = self.sql.do_get(ticket).await?;
            let batches: Vec<RecordBatch> = stream.try_collect().await?;
            out.extend(batches);
        }
        Ok(out)
    }

    /// Runs DDL or DML; the number of rows written.
    pub async fn execute(&mut self, sql: &str) -> Result<i64, Error> {
        Ok(self.sql.execute_update(sql.to_string(), None).await?)
    }

    /// Writes `batches` into `table` (`db.t` or `t`) as one commit; the number of rows.
    pub async fn ingest(
        &mut self,
        table: &str,
        batches: Vec<RecordBatch>,
        opts: &IngestOptions,
    ) -> Result<i64, Error> {
        let (schema, table) = match table.split_once('.') {
            Some((db, t)) => (Some(db.to_string()), t.to_string()),
            None => (None, table.to_string()),
        };
        let (if_not_exist, if_exists) = match opts.mode {
            IngestMode::Append => (TableNotExistOption::Fail, TableExistsOption::Append),
            IngestMode::Create => (TableNotExistOption::Create, TableExistsOption::Fail),
            IngestMode::Replace => (TableNotExistOption::Create, TableExistsOption::Replace),
            IngestMode::CreateOrAppend => (TableNotExistOption::Create, TableExistsOption::Append),
        };
        let mut options: HashMap<String, String> = opts.options.iter().cloned().collect();
        if !opts.primary_key.is_empty() {
            options.insert("primary-key".into(), opts.primary_key.join(","));
        }
        if !opts.partition_keys.is_empty() {
            options.insert("partition-keys".into(), opts.partition_keys.join(","));
        }
        if let Some(c) = &opts.row_kind_column {
            options.insert("row-kind-column".into(), c.clone());
        }
        let command = CommandStatementIngest {
            table_definition_options: Some(TableDefinitionOptions {
                if_not_exist: if_not_exist as i32,
                if_exists: if_exists as i32,
            }),
            table,
            schema,
            catalog: None,
            temporary: false,
            transaction_id: None,
            options,
        };
        let stream = futures::stream::iter(batches.into_iter().map(Ok));
        Ok(self.sql.execute_ingest(command, stream).await?)
    }

    /// Applies change rows (a `_row_kind` column of `+I`/`-U`/`+U`/`-D`, then the table's
    /// columns), e.g. a changelog read from another table: one commit.
    pub async fn apply_changes(
        &mut self,
        table: &str,
        batches: Vec<RecordBatch>,
    ) -> Result<i64, Error> {
        let opts = IngestOptions {
            row_kind_column: Some(crate::ROW_KIND_COLUMN.to_string()),
            ..Default::default()
        };
        self.ingest(table, batches, &opts).await
    }

    /// Opens a streaming write into `table` (`db.t` or `t`) with rows of `schema` (the table's
    /// columns; for [`crate::WriteKind::Changes`] also the row-kind column). See
    /// [`crate::StreamWriter`].
    pub async fn writer(
        &mut self,
        table: &str,
        schema: arrow_schema::SchemaRef,
        opts: &crate::WriterOptions,
    ) -> Result<crate::StreamWriter, Error> {
        crate::StreamWriter::open(&mut self.sql, table, schema, opts).await
    }

    /// A changelog subscription with this client's credentials (its own connection).
    pub fn subscribe(&self, ticket: ChangelogTicket) -> Subscriber {
        Subscriber::new(&self.endpoint, &self.user, &self.password, ticket)
    }

    /// Runs action `tidelake.<name>` with `request`; the result bodies.
    async fn action_bodies(
        &mut self,
        name: &str,
        request: &impl Message,
    ) -> Result<Vec<arrow_flight::Result>, Error> {
        let action = Action {
            r#type: format!("tidelake.{name}"),
            body: request.encode_to_vec().into(),
        };
        let results = self.sql.do_action(action).await?;
        results.try_collect().await.map_err(Error::Status)
    }

    /// Runs action `tidelake.<name>`, which answers with one `R`.
    async fn action<R: Message + Default>(
        &mut self,
        name: &str,
        request: &impl Message,
    ) -> Result<R, Error> {
        let bodies = self.action_bodies(name, request).await?;
        let [body] = bodies.as_slice() else {
            return Err(Error::Protocol(format!(
                "tidelake.{name} sent {} results, expected one",
                bodies.len()
            )));
        };
        R::decode(body.body.as_ref()).map_err(|e| Error::Protocol(format!("tidelake.{name}: {e}")))
    }

    /// Runs a long action with `report_progress` set: calls `progress` with each report, returns
    /// the result. The operation is cancelled if this future is dropped.
    async fn action_with_progress<R: Message + Default>(
        &mut self,
        name: &str,
        request: &impl Message,
        mut progress: impl FnMut(&OperationProgress),
    ) -> Result<R, Error> {
        let action = Action {
            r#type: format!("tidelake.{name}"),
            body: request.encode_to_vec().into(),
        };
        let mut results = self.sql.do_action(action).await?;
        let progress_url = type_url("OperationProgress");
        while let Some(r) = results.next().await {
            let r = r.map_err(Error::Status)?;
            let any = Any::decode(r.body.as_ref())
                .map_err(|e| Error::Protocol(format!("tidelake.{name}: {e}")))?;
            if any.type_url == progress_url {
                let p = OperationProgress::decode(any.value.as_ref())
                    .map_err(|e| Error::Protocol(format!("tidelake.{name}: {e}")))?;
                progress(&p);
            } else {
                return R::decode(any.value.as_ref())
                    .map_err(|e| Error::Protocol(format!("tidelake.{name}: {e}")));
            }
        }
        Err(Error::Protocol(format!(
            "tidelake.{name} ended without a result"
        )))
    }

    /// Compacts a table (`full`: everything into the max level).
    pub async fn compact(&mut self, req: CompactRequest) -> Result<CompactResult, Error> {
        self.action("compact", &req).await
    }

    /// [`Client::compact`] reporting its progress.
    pub async fn compact_with_progress(
        &mut self,
        mut req: CompactRequest,
        progress: impl FnMut(&OperationProgress),
    ) -> Result<CompactResult, Error> {
        req.report_progress = true;
        self.action_with_progress("compact", &req, progress).await
    }

    pub async fn expire_snapshots(
        &mut self,
        req: ExpireSnapshotsRequest,
    ) -> Result<CleanupResult, Error> {
        self.action("expire_snapshots", &req).await
    }

    /// Expires long-lived changelogs (a decoupled changelog lifecycle); unset limits keep all.
    pub async fn expire_changelogs(
        &mut self,
        req: ExpireChangelogsRequest,
    ) -> Result<CleanupResult, Error> {
        self.action("expire_changelogs", &req).await
    }

    /// Lists (or, with `delete`, removes) files no snapshot or tag uses.
    pub async fn remove_orphan_files(
        &mut self,
        req: RemoveOrphanFilesRequest,
    ) -> Result<CleanupResult, Error> {
        self.action("remove_orphan_files", &req).await
    }

    /// Tags a snapshot (the latest when `snapshot_id` is `None`); the table's tags.
    pub async fn create_tag(
        &mut self,
        table: &str,
        tag: &str,
        snapshot_id: Option<i64>,
    ) -> Result<TagList, Error> {
        let req = TagRequest {
            table: table.into(),
            tag: tag.into(),
            snapshot_id,
        };
        self.action("create_tag", &req).await
    }

    pub async fn delete_tag(&mut self, table: &str, tag: &str) -> Result<CleanupResult, Error> {
        let req = TagRequest {
            table: table.into(),
            tag: tag.into(),
            snapshot_id: None,
        };
        self.action("delete_tag", &req).await
    }

    pub async fn list_tags(&mut self, table: &str) -> Result<TagList, Error> {
        let req = TagRequest {
            table: table.into(),
            ..Default::default()
        };
        self.action("list_tags", &req).await
    }

    /// Rolls back to a snapshot id or a tag (exactly one of them).
    pub async fn rollback(
        &mut self,
        table: &str,
        snapshot_id: Option<i64>,
        tag: Option<&str>,
    ) -> Result<CleanupResult, Error> {
        let req = TagRequest {
            table: table.into(),
            tag: tag.unwrap_or_default().into(),
            snapshot_id,
        };
        self.action("rollback", &req).await
    }

    /// Applies ALTER TABLE changes (the SQL after `ALTER TABLE <table>`); the table afterwards.
    pub async fn alter_table(&mut self, table: &str, changes: &str) -> Result<TableInfo, Error> {
        let req = AlterTableRequest {
            table: table.into(),
            changes: changes.into(),
        };
        self.action("alter_table", &req).await
    }

    pub async fn table_info(&mut self, table: &str) -> Result<TableInfo, Error> {
        let req = TableInfoRequest {
            table: table.into(),
        };
        self.action("table_info", &req).await
    }

    /// The long operations running on the server.
    pub async fn list_operations(&mut self) -> Result<Vec<OperationInfo>, Error> {
        let list: OperationList = self
            .action("list_operations", &OperationRequest::default())
            .await?;
        Ok(list.operations)
    }

    /// Cancels a running operation (it stops at its next safe point).
    pub async fn cancel(&mut self, operation_id: &str) -> Result<OperationInfo, Error> {
        let req = OperationRequest {
            operation_id: operation_id.into(),
        };
        let list: OperationList = self.action("cancel", &req).await?;
        list.operations
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("tidelake.cancel named no operation".into()))
    }
}
