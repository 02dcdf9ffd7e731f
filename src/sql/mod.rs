//! SQL over DataFusion: parsing (with time travel), the warehouse as a DataFusion catalog, and
//! tidelake's own handling of every statement that changes something (DDL, INSERT, UPDATE,
//! DELETE). DataFusion plans and runs queries only; its own DDL/DML, `COPY`, external tables and
//! URL tables are never reachable, so user SQL cannot touch anything outside the warehouse.
//!
//! ```text
//!  sql ──parse_one──► Statement ──classify──► Query  ──DataFusion──► stream of batches
//!                                        └──► Update ──ddl / dml──► count (one row)
//! ```

mod alter;
mod call;
mod ddl;
mod dialect;
pub(crate) use dialect::object_name_parts;
mod dml;
mod error;
use error::from_df;
mod expr;
pub mod limits;
pub mod output_caps;
mod point;
mod provider;
mod scan_exec;
mod scan_filter;
mod show;
mod system;

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::execution::context::SQLOptions;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::prelude::{DataFrame, SessionConfig};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{ObjectName, Statement};
use futures::stream::{self, BoxStream, StreamExt};

use crate::catalog::{Catalog, Identifier};
use crate::error::{invalid, Error, ErrorKind, Result};

/// The catalog name clients see.
pub const CATALOG_NAME: &str = "tidelake";

/// Resource limits applied to every statement.
#[derive(Debug, Clone, Default)]
pub struct SqlLimits {
    /// Memory DataFusion may use for sorts, joins and aggregations, shared by the statements
    /// running at once (spilling is off: over the limit, a statement fails with
    /// ResourceExhausted).
    pub memory_limit_bytes: Option<usize>,
    /// Wall-clock limit of a statement, result streaming included.
    pub query_timeout: Option<Duration>,
}

/// What a user may do. Each role includes the ones before it: a reader runs queries and
/// subscribes to changelogs; a writer also runs INSERT, UPDATE, DELETE and appends by bulk
/// ingest; an admin also runs DDL (CREATE, DROP, ALTER), `CALL sys.*` procedures, ingests that
/// create or redefine tables, and the administrative Flight actions that change something.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Default,
    serde::Deserialize,
    serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Reader,
    Writer,
    #[default]
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Admin => "admin",
        }
    }

    /// PermissionDenied unless this role includes `needed`.
    pub fn require(self, needed: Role, what: &str) -> Result<()> {
        if self >= needed {
            return Ok(());
        }
        crate::error::SqlSnafu {
            message: format!(
                "{what} needs the {} role; this user has the {} role",
                needed.name(),
                self.name()
            ),
            kind: ErrorKind::PermissionDenied,
        }
        .fail()
    }
}

/// Per-connection state: the current database (Flight SQL's "schema") and the user's role.
#[derive(Debug, Clone)]
pub struct SqlSession {
    pub database: String,
    pub role: Role,
}

impl Default for SqlSession {
    fn default() -> Self {
        Self {
            database: "default".to_string(),
            role: Role::Admin,
        }
    }
}

/// Whether a statement returns rows (a query) or a count of changed rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    Query,
    Update,
}

/// A statement's result: its schema, then its batches as they are produced.
pub struct SqlOutput {
    pub kind: StatementKind,
    pub schema: SchemaRef,
    pub stream: BoxStream<'static, Result<RecordBatch>>,
}

impl std::fmt::Debug for SqlOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlOutput")
            .field("kind", &self.kind)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl SqlOutput {
    /// Collects every batch (tests, the CLI and small results).
    pub async fn collect(self) -> Result<Vec<RecordBatch>> {
        use futures::TryStreamExt;
        self.stream.try_collect().await
    }
}

/// The schema of an update's result: one row, `count`.
pub fn count_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "count",
        ArrowType::Int64,
        false,
    )]))
}

fn count_output(n: i64) -> Result<SqlOutput> {
    let schema = count_schema();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from(vec![n]))],
    )
    .map_err(|e| internal(format!("count batch: {e}")))?;
    Ok(rows_output(StatementKind::Update, batch))
}

fn rows_output(kind: StatementKind, batch: RecordBatch) -> SqlOutput {
    SqlOutput {
        kind,
        schema: batch.schema(),
        stream: stream::iter([Ok(batch)]).boxed(),
    }
}

fn internal(message: String) -> Error {
    crate::error::InternalSnafu { message }.build()
}

/// The error of a statement that ran past its timeout.
pub fn timeout_error(limit: Duration) -> Error {
    crate::error::SqlSnafu {
        message: format!("statement exceeded the query timeout of {limit:?}"),
        kind: ErrorKind::ResourceExhausted,
    }
    .build()
}

/// `out` ending with [`timeout_error`] at `deadline`.
fn with_deadline(out: SqlOutput, deadline: tokio::time::Instant, limit: Duration) -> SqlOutput {
    SqlOutput {
        stream: crate::runtime::with_deadline(out.stream, deadline, move || timeout_error(limit)),
        ..out
    }
}

/// Runs SQL against one warehouse; shared by every connection.
#[derive(Clone)]
pub struct SqlEngine {
    catalog: Catalog,
    /// The one catalog SQL names (`tidelake`, or the tenant's name).
    catalog_name: Arc<str>,
    state: SessionState,
    limits: SqlLimits,
}

impl std::fmt::Debug for SqlEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlEngine")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl SqlEngine {
    /// An engine whose catalog is `tidelake`.
    pub fn new(catalog: Catalog, limits: SqlLimits) -> Result<Self> {
        Self::named(catalog, limits, CATALOG_NAME)
    }

    /// An engine whose one catalog is `catalog_name` (a tenant's name); no other is registered.
    pub fn named(catalog: Catalog, limits: SqlLimits, catalog_name: &str) -> Result<Self> {
        let mut config = SessionConfig::new()
            .with_information_schema(false)
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema(catalog_name, "default");
        {
            let o = config.options_mut();
            // Plain string types everywhere (JDBC < 19 cannot read view types).
            o.sql_parser.map_string_types_to_utf8view = false;
            o.execution.parquet.schema_force_view_types = false;
        }
        // No spill files: statements never write outside the warehouse, and one over its memory
        // limit fails instead of filling the local disk.
        let mut runtime = RuntimeEnvBuilder::new().with_disk_manager_builder(
            datafusion::execution::disk_manager::DiskManagerBuilder::default()
                .with_mode(datafusion::execution::disk_manager::DiskManagerMode::Disabled),
        );
        if let Some(limit) = limits.memory_limit_bytes {
            runtime = runtime.with_memory_limit(limit, 1.0);
        }
        let runtime = runtime.build_arc().map_err(from_df)?;
        let mut builder = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(scan_exec::TopNIntoScan));
        output_caps::cap_functions(&mut builder);
        let state = builder.build();
        let table_functions = Arc::new(state.table_functions().keys().cloned().collect());
        state.catalog_list().register_catalog(
            catalog_name.to_string(),
            Arc::new(provider::WarehouseCatalog {
                catalog: catalog.clone(),
                table_functions,
            }),
        );
        Ok(Self {
            catalog,
            catalog_name: Arc::from(catalog_name),
            state,
            limits,
        })
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The name SQL and Flight SQL know the catalog by.
    pub fn catalog_name(&self) -> &str {
        &self.catalog_name
    }

    fn state_for(&self, session: &SqlSession) -> SessionState {
        let mut state = self.state.clone();
        state.config_mut().options_mut().catalog.default_schema = session.database.clone();
        state
    }

    /// Classifies `sql` without running it.
    pub fn kind(&self, sql: &str) -> Result<StatementKind> {
        classify(&dialect::parse_one(sql)?)
    }

    /// The result schema of `sql` (queries are planned, not run) and its parameter types.
    pub async fn describe(
        &self,
        session: &SqlSession,
        sql: &str,
    ) -> Result<(StatementKind, SchemaRef, SchemaRef)> {
        self.describe_with(session, sql, &[]).await
    }

    /// [`Self::describe`] with parameters bound (a result type may depend on them, as in
    /// `SELECT $1`). Planning runs under the query timeout.
    pub async fn describe_with(
        &self,
        session: &SqlSession,
        sql: &str,
        bound: &[ScalarValue],
    ) -> Result<(StatementKind, SchemaRef, SchemaRef)> {
        match self.limits.query_timeout {
            Some(limit) => tokio::time::timeout(limit, self.describe_untimed(session, sql, bound))
                .await
                .unwrap_or_else(|_| Err(timeout_error(limit))),
            None => self.describe_untimed(session, sql, bound).await,
        }
    }

    async fn describe_untimed(
        &self,
        session: &SqlSession,
        sql: &str,
        bound: &[ScalarValue],
    ) -> Result<(StatementKind, SchemaRef, SchemaRef)> {
        if let Some((schema, params)) = point::describe_known(self, session, sql).await? {
            return Ok((StatementKind::Query, schema, params));
        }
        let stmt = dialect::parse_one(sql)?;
        let kind = classify(&stmt)?;
        if kind == StatementKind::Update {
            let params = self.update_parameters(session, stmt).await;
            return Ok((kind, count_schema(), params));
        }
        if let Some(out) = show::metadata_statement(self, session, &stmt).await? {
            return Ok((kind, out.schema, Arc::new(Schema::empty())));
        }
        if let Some(point) = point::query(self, session, sql, &stmt).await? {
            if let Some(params) = point.parameter_schema() {
                return Ok((kind, point.schema(), params));
            }
        }
        let state = self.state_for(session);
        let plan = state.statement_to_plan(stmt).await.map_err(from_df)?;
        verify_query(&plan)?;
        let param_schema = parameter_schema(plan.get_parameter_types().map_err(from_df)?);
        let plan = if bound.is_empty() {
            plan
        } else {
            plan.with_param_values(ParamValues::from(bound.to_vec()))
                .map_err(from_df)?
        };
        Ok((
            kind,
            Arc::new(plan.schema().as_arrow().clone()),
            param_schema,
        ))
    }

    /// The parameters of an INSERT, UPDATE or DELETE (`?` / `$n`), typed by the columns they
    /// meet, as the Flight SQL JDBC driver needs them to bind; empty for other updates, and when
    /// the statement cannot be planned here (executing it reports why).
    async fn update_parameters(&self, session: &SqlSession, stmt: DFStatement) -> SchemaRef {
        let dml = matches!(&stmt, DFStatement::Statement(s)
            if matches!(**s, Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)));
        if !dml {
            return Arc::new(Schema::empty());
        }
        let state = self.state_for(session);
        match state.statement_to_plan(stmt).await {
            Ok(plan) => match plan.get_parameter_types() {
                Ok(types) => parameter_schema(types),
                Err(_) => Arc::new(Schema::empty()),
            },
            Err(_) => Arc::new(Schema::empty()),
        }
    }

    /// The limits every statement runs under.
    pub fn limits(&self) -> &SqlLimits {
        &self.limits
    }

    /// Runs one statement with positional parameters (`$1`, `$2`, ...). The query timeout
    /// covers planning as well as producing the result.
    pub async fn execute(
        &self,
        session: &SqlSession,
        sql: &str,
        params: &[ScalarValue],
    ) -> Result<SqlOutput> {
        let Some(limit) = self.limits.query_timeout else {
            return self.execute_untimed(session, sql, params).await;
        };
        let deadline = tokio::time::Instant::now() + limit;
        match tokio::time::timeout_at(deadline, self.execute_untimed(session, sql, params)).await {
            Ok(out) => Ok(with_deadline(out?, deadline, limit)),
            Err(_) => Err(timeout_error(limit)),
        }
    }

    async fn execute_untimed(
        &self,
        session: &SqlSession,
        sql: &str,
        params: &[ScalarValue],
    ) -> Result<SqlOutput> {
        if let Some(out) = point::answer_known(self, session, sql, params).await? {
            return Ok(out);
        }
        let stmt = dialect::parse_one(sql)?;
        let out = match classify(&stmt)? {
            StatementKind::Query => match show::metadata_statement(self, session, &stmt).await? {
                Some(out) => out,
                None => match point::answer(self, session, sql, &stmt, params).await? {
                    Some(out) => out,
                    None => self.query(session, stmt, params).await?,
                },
            },
            StatementKind::Update => {
                let DFStatement::Statement(s) = stmt else {
                    return internal_unreachable();
                };
                let n = self.update(session, *s, params).await?;
                count_output(n)?
            }
        };
        Ok(out)
    }

    /// Applies the changes `changes` (the text after `ALTER TABLE <t>`: `ADD COLUMN c INT`,
    /// `SET ('k' = 'v')`, `RENAME TO t2`, ...) to table `id`, as ALTER TABLE does; the table's name
    /// is never put into SQL text. Returns the table afterwards (renamed, under its new name).
    pub async fn alter_table_with(
        &self,
        session: &SqlSession,
        id: &Identifier,
        changes: &str,
    ) -> Result<crate::table::Table> {
        session.role.require(Role::Admin, "ALTER TABLE")?;
        let alteration = alter::parse_alteration(changes)?;
        alter::apply(self, session, id, alteration).await
    }

    /// Runs an update and returns its count (a query is refused).
    pub async fn execute_update(
        &self,
        session: &SqlSession,
        sql: &str,
        params: &[ScalarValue],
    ) -> Result<i64> {
        let stmt = dialect::parse_one(sql)?;
        match (classify(&stmt)?, stmt) {
            (StatementKind::Update, DFStatement::Statement(s)) => {
                self.update(session, *s, params).await
            }
            _ => invalid!("'{sql}' is a query, not an update; run it as a query"),
        }
    }

    /// Runs an update once per parameter row. An INSERT is one commit for all rows (a batch of
    /// `executemany` is atomic); other statements commit per row.
    pub async fn execute_update_many(
        &self,
        session: &SqlSession,
        sql: &str,
        param_rows: &[Vec<ScalarValue>],
    ) -> Result<i64> {
        if param_rows.is_empty() {
            return self.execute_update(session, sql, &[]).await;
        }
        let stmt = dialect::parse_one(sql)?;
        match (classify(&stmt)?, stmt) {
            (StatementKind::Update, DFStatement::Statement(s)) => match *s {
                Statement::Insert(ins) => {
                    session.role.require(Role::Writer, "INSERT")?;
                    dml::insert(self, session, ins, param_rows).await
                }
                other => {
                    let mut total = 0;
                    for params in param_rows {
                        total += self.update(session, other.clone(), params).await?;
                    }
                    Ok(total)
                }
            },
            _ => invalid!("'{sql}' is a query, not an update; run it as a query"),
        }
    }

    /// Plans and starts a query with DataFusion (no DDL, DML or statements allowed).
    async fn query(
        &self,
        session: &SqlSession,
        stmt: DFStatement,
        params: &[ScalarValue],
    ) -> Result<SqlOutput> {
        let state = self.state_for(session);
        let mut plan = state.statement_to_plan(stmt).await.map_err(from_df)?;
        verify_query(&plan)?;
        if !params.is_empty() {
            plan = plan
                .with_param_values(ParamValues::from(params.to_vec()))
                .map_err(from_df)?;
        }
        let schema = Arc::new(plan.schema().as_arrow().clone());
        let df = DataFrame::new(state, plan);
        let stream = df.execute_stream().await.map_err(from_df)?;
        Ok(SqlOutput {
            kind: StatementKind::Query,
            schema,
            stream: stream.map(|r| r.map_err(from_df)).boxed(),
        })
    }

    /// `name` resolved against the session's database (`t`, `db.t` or `tidelake.db.t`).
    fn identifier(&self, session: &SqlSession, name: &ObjectName) -> Result<Identifier> {
        let parts = object_name_parts(name)?;
        match parts.as_slice() {
            [t] => Ok(Identifier::new(session.database.clone(), t.clone())),
            [d, t] => Ok(Identifier::new(d.clone(), t.clone())),
            [c, d, t] if **c == *self.catalog_name => Ok(Identifier::new(d.clone(), t.clone())),
            [c, _, _] => invalid!(
                "unknown catalog '{c}'; the catalog is '{}'",
                self.catalog_name
            ),
            _ => invalid!("invalid table name '{name}'"),
        }
    }

    /// A database name from `db` or `tidelake.db`.
    fn database_name(&self, name: &ObjectName) -> Result<String> {
        let parts = object_name_parts(name)?;
        match parts.as_slice() {
            [d] => Ok(d.clone()),
            [c, d] if **c == *self.catalog_name => Ok(d.clone()),
            _ => invalid!("invalid database name '{name}'"),
        }
    }

    /// DDL and DML; returns the number of rows written (0 for DDL).
    async fn update(
        &self,
        session: &SqlSession,
        stmt: Statement,
        params: &[ScalarValue],
    ) -> Result<i64> {
        let (needed, what) = match &stmt {
            Statement::Insert(_) => (Role::Writer, "INSERT"),
            Statement::Update(_) => (Role::Writer, "UPDATE"),
            Statement::Delete(_) => (Role::Writer, "DELETE"),
            Statement::Call(_) => (Role::Admin, "CALL"),
            Statement::AlterTable(_) => (Role::Admin, "ALTER TABLE"),
            Statement::Comment { .. } => (Role::Admin, "COMMENT ON"),
            Statement::Drop { .. } => (Role::Admin, "DROP"),
            _ => (Role::Admin, "CREATE"),
        };
        session.role.require(needed, what)?;
        match stmt {
            Statement::CreateTable(ct) => ddl::create_table(self, session, &ct).await,
            Statement::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                ..
            } => ddl::drop(self, session, object_type, if_exists, &names, cascade).await,
            Statement::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => ddl::create_schema(self, schema_name, if_not_exists).await,
            Statement::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => {
                let db = self.database_name(&db_name)?;
                ddl::create_database(self, &db, if_not_exists).await
            }
            Statement::Insert(ins) => {
                dml::insert(self, session, ins, std::slice::from_ref(&params.to_vec())).await
            }
            Statement::Update(u) => dml::update(self, session, u, params).await,
            Statement::Delete(d) => dml::delete(self, session, d, params).await,
            Statement::Call(f) => call::call(self, session, f).await,
            Statement::AlterTable(a) => alter::alter_table(self, session, a).await,
            Statement::Comment {
                object_type,
                object_name,
                comment,
                if_exists,
            } => {
                alter::comment_on(self, session, object_type, &object_name, comment, if_exists)
                    .await
            }
            other => invalid!("statement not supported: {other}"),
        }
    }
}

fn internal_unreachable<T>() -> Result<T> {
    Err(internal("update statement is not a SQL statement".into()))
}

fn verify_query(plan: &datafusion::logical_expr::LogicalPlan) -> Result<()> {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
        .verify_plan(plan)
        .map_err(|e| {
            crate::error::SqlSnafu {
                message: format!("not allowed: {}", e.strip_backtrace()),
                kind: ErrorKind::PermissionDenied,
            }
            .build()
        })
}

/// Parameter types by name (`$1`, `$2`, ...) as a schema in position order; an untyped
/// parameter is Null.
fn parameter_schema(types: std::collections::HashMap<String, Option<ArrowType>>) -> SchemaRef {
    let mut params: Vec<(String, ArrowType)> = types
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or(ArrowType::Null)))
        .collect();
    params.sort_by_key(|(k, _)| k.trim_start_matches('$').parse::<u64>().unwrap_or(u64::MAX));
    Arc::new(Schema::new(
        params
            .into_iter()
            .map(|(k, t)| Field::new(k, t, true))
            .collect::<Vec<_>>(),
    ))
}

fn classify(stmt: &DFStatement) -> Result<StatementKind> {
    let denied = |what: &str| {
        crate::error::SqlSnafu {
            message: format!(
                "{what} is not allowed: tidelake reads and writes only the tables of its warehouse"
            ),
            kind: ErrorKind::PermissionDenied,
        }
        .fail()
    };
    match stmt {
        DFStatement::CreateExternalTable(_) => denied("CREATE EXTERNAL TABLE"),
        DFStatement::CopyTo(_) => denied("COPY"),
        DFStatement::Reset(_) => denied("RESET"),
        DFStatement::Explain(_) => Ok(StatementKind::Query),
        DFStatement::Statement(s) => match s.as_ref() {
            Statement::Query(_)
            | Statement::ShowTables { .. }
            | Statement::ShowDatabases { .. }
            | Statement::ShowSchemas { .. }
            | Statement::ExplainTable { .. }
            | Statement::Explain { .. } => Ok(StatementKind::Query),
            Statement::CreateTable(ct) => {
                // The parser keeps `LOCATION '...'` with the Hive formats, not in `location`.
                let hive_location = ct
                    .hive_formats
                    .as_ref()
                    .is_some_and(|h| h.location.is_some());
                if ct.external || ct.location.is_some() || hive_location {
                    return denied("CREATE TABLE with a LOCATION");
                }
                Ok(StatementKind::Update)
            }
            Statement::CreateDatabase {
                location,
                managed_location,
                ..
            } if location.is_some() || managed_location.is_some() => {
                denied("CREATE DATABASE with a LOCATION")
            }
            Statement::Insert(_)
            | Statement::Update(_)
            | Statement::Delete(_)
            | Statement::Drop { .. }
            | Statement::CreateSchema { .. }
            | Statement::CreateDatabase { .. }
            | Statement::AlterTable(_)
            | Statement::Comment { .. }
            | Statement::Call(_) => Ok(StatementKind::Update),
            Statement::Copy { .. } => denied("COPY"),
            other => crate::error::SqlSnafu {
                message: format!(
                    "statement not supported: {}",
                    other.to_string().chars().take(60).collect::<String>()
                ),
                kind: ErrorKind::Unsupported,
            }
            .fail(),
        },
    }
}
