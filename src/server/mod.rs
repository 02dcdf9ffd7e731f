//! `tidelake serve`: the Arrow Flight SQL server (and, on its own port, the Paimon REST catalog).
//! This file owns the configuration, start-up, and graceful shutdown (on SIGINT/SIGTERM new calls
//! are refused and in-flight calls, commits included, finish; long streams end with Unavailable).
//!
//! ```text
//!  tonic ──► gate (principal, audit line) ──► service (one dispatch: each request kind to its
//!            handler, with the call's context) ──► flight_sql / streaming / changelog / admin /
//!            session ──► SqlEngine / Catalog / Table
//! ```
//!
//! The modules form layers; each imports only modules below it (no import cycle):
//!
//! ```text
//!  mod.rs        config, start-up, shutdown
//!  service       the dispatch of every Flight RPC and request kind
//!  gate          one principal per RPC, the audit line of each call
//!  rest/         the Paimon REST catalog (its own routing and dispatch)
//!  flight_sql    Flight SQL handlers   streaming  streaming writes   changelog  subscriptions
//!  admin         tidelake.* actions    session    session actions
//!  call          the per-call context: Call, AdmissionPermit, Shutdown, MintedToken
//!  auth/         credentials -> Principal (tokens, issuers, passwords, sessions)
//!  audit  seal  ipc  metadata  status  tls
//!  principal     who calls: {tenant, subject, issuer, role}
//!  tenant/       a tenant's engine, limits and registries (operations, streams)
//! ```

pub mod admin;
pub mod audit;
pub mod auth;
pub mod call;
pub mod flight_sql;
pub mod gate;
pub mod ipc;
pub mod metadata;
mod metrics_http;
pub mod principal;
pub mod rest;
pub mod seal;
pub mod service;
pub mod session;
pub mod status;
pub mod streaming;
pub mod subscription;
pub mod tenant;
pub mod tls;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use serde::Deserialize;
use snafu::IntoError;
use tokio::net::TcpListener;

use crate::error::{invalid, Result};
use crate::sql::{Role, SqlLimits, CATALOG_NAME};

/// Largest gRPC message accepted or sent (DoPut batches arrive whole).
pub const MAX_MESSAGE_SIZE: usize = 256 * 1024 * 1024;

/// How long shutdown waits for in-flight calls before it stops anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// `--config FILE` (TOML).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub warehouse: Option<String>,
    pub listen: Option<String>,
    #[serde(default)]
    pub users: Vec<UserConfig>,
    #[serde(default)]
    pub query: QueryConfig,
    #[serde(default)]
    pub ingest: IngestConfig,
    #[serde(default)]
    pub auth: auth::AuthConfig,
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
    pub tls: Option<TlsConfig>,
    pub audit: Option<AuditConfig>,
    /// `[storage]`: how `s3://` warehouses are reached (over the AWS environment variables).
    #[serde(default)]
    pub storage: crate::io::StorageOptions,
    pub metrics: Option<MetricsConfig>,
    pub rest: Option<rest::RestConfig>,
}

/// `[metrics]`: the Prometheus endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where `GET /metrics` is served, e.g. `127.0.0.1:9464` (port 0: any free port, printed).
    pub listen: String,
}

/// `[audit]`: where the audit lines go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// JSON lines appended here; without it, log events of target `audit`.
    pub file: String,
}

/// `[tls]`: serve the Flight port over TLS.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM).
    pub cert_file: String,
    /// Its private key (PEM).
    pub key_file: String,
    /// With it, clients must present a certificate this CA signed (mTLS).
    pub client_ca_file: Option<String>,
}

/// `[[tenants]]`: a namespace with its own warehouse, catalog and limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Also its catalog's name.
    pub name: String,
    /// Its warehouse (default `<warehouse>/tenants/<name>`).
    pub warehouse: Option<String>,
    /// Statements running at once (default 16); as many more wait, beyond that ResourceExhausted.
    pub max_concurrent_statements: Option<usize>,
    /// Memory its running statements share (default `[query] memory_limit_mb`).
    pub memory_limit_mb: Option<usize>,
    /// Wall-clock limit of its statements (default `[query] timeout_seconds`).
    pub statement_timeout_seconds: Option<u64>,
    /// Changelog subscriptions open at once (default 64).
    pub max_subscriptions: Option<usize>,
    /// Streaming writes open at once (default `[ingest] max_streams`).
    pub max_streams: Option<usize>,
}

/// `[auth]`, defined beside the authenticator it configures.
pub use auth::AuthConfig;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    /// An argon2 PHC string (`tidelake hash-password` prints one).
    pub password_hash: Option<String>,
    /// Refused with a message that says what to write instead (plaintext is never kept).
    pub password: Option<String>,
    /// `reader`, `writer` or `admin` (the default).
    #[serde(default)]
    pub role: Role,
    /// The tenant the user belongs to: required when tenants are configured, else absent.
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryConfig {
    /// Memory the running statements share for sorts, joins and aggregations.
    pub memory_limit_mb: Option<usize>,
    /// Wall-clock limit of a statement.
    pub timeout_seconds: Option<u64>,
    /// Calls that plan, read, write or maintain tables running at once, in all (default 64);
    /// more wait for a slot.
    pub max_concurrent: Option<usize>,
    /// The same for one user (default 8), so one user's many queries leave room for others.
    pub max_concurrent_per_user: Option<usize>,
}

/// `[ingest]`: streaming writes (DoPut with a `tidelake.StreamingWrite` descriptor).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    /// Streaming writes open at once, per tenant (default 256; `[[tenants]] max_streams`
    /// overrides it for one tenant). A stream holds no statement slot.
    pub max_streams: Option<usize>,
}

/// Default of `[ingest] max_streams`.
pub const DEFAULT_MAX_STREAMS: usize = 256;

impl ServerConfig {
    /// Parses the config file at `path`; relative paths in it are relative to the file's
    /// directory (not to the directory the server was started in).
    pub fn parse(text: &str, path: &str) -> Result<Self> {
        let mut config: Self = toml::from_str(text).map_err(|e| {
            crate::error::InvalidArgumentSnafu {
                message: format!("config {path}: {e}"),
            }
            .build()
        })?;
        let base = std::path::Path::new(path)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        config.warehouse = config.warehouse.map(|w| relative_to(base, &w));
        config.auth.signing_key_file = config.auth.signing_key_file.map(|f| relative_to(base, &f));
        config.storage.data_cache_dir =
            config.storage.data_cache_dir.map(|d| relative_to(base, &d));
        config.storage.lookup_dir = config.storage.lookup_dir.map(|d| relative_to(base, &d));
        if let Some(a) = &mut config.audit {
            a.file = relative_to(base, &a.file);
        }
        if let Some(t) = &mut config.tls {
            t.cert_file = relative_to(base, &t.cert_file);
            t.key_file = relative_to(base, &t.key_file);
            t.client_ca_file = t.client_ca_file.take().map(|f| relative_to(base, &f));
        }
        for i in &mut config.auth.issuers {
            i.jwks_file = i.jwks_file.take().map(|f| relative_to(base, &f));
        }
        for t in &mut config.tenants {
            t.warehouse = t.warehouse.take().map(|w| relative_to(base, &w));
        }
        Ok(config)
    }
}

/// `value` (a path, or a URL such as `file:///…` or `s3://…`, left as it is) joined to `base`
/// when it is a relative path.
fn relative_to(base: &std::path::Path, value: &str) -> String {
    let path = std::path::Path::new(value);
    if value.contains("://") || path.is_absolute() || base.as_os_str().is_empty() {
        return value.to_string();
    }
    base.join(path).to_string_lossy().into_owned()
}

/// Everything `serve` needs, resolved.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub warehouse: String,
    pub listen: String,
    pub users: HashMap<String, auth::User>,
    pub auth: auth::AuthOptions,
    /// Empty: the one implicit tenant `tidelake` on the warehouse root.
    pub tenants: Vec<tenant::TenantOptions>,
    /// TLS on the Flight port (`[tls]`).
    pub tls: Option<tls::TlsOptions>,
    /// The audit log's file (`[audit] file`); without it, log events of target `audit`.
    pub audit_file: Option<String>,
    /// `[storage]`: object-store settings of every warehouse served.
    pub storage: crate::io::StorageOptions,
    /// `[metrics] listen`: the Prometheus endpoint's address.
    pub metrics_listen: Option<String>,
    /// `[rest] listen`: the REST catalog's address.
    pub rest_listen: Option<String>,
    /// `[rest] data_token_*`: data credentials the REST catalog hands out for `s3://` tables.
    pub rest_data_tokens: Option<crate::io::sts::DataTokenOptions>,
    pub limits: SqlLimits,
    pub work: crate::runtime::WorkLimits,
    /// `[ingest] max_streams`: the implicit tenant's limit, and the default of configured ones.
    pub max_streams: usize,
}

impl ServeOptions {
    /// Users from the config, else one from `TIDELAKE_USER`/`TIDELAKE_PASSWORD` (a generated
    /// password, printed once, when the password is unset).
    pub fn resolve(
        config: ServerConfig,
        warehouse: Option<String>,
        listen: Option<String>,
    ) -> Result<Self> {
        let mut users: HashMap<String, auth::User> = HashMap::new();
        for u in &config.users {
            if u.name.is_empty() || u.name.contains(':') {
                return invalid!("config: invalid user name '{}'", u.name);
            }
            let credential = match (&u.password_hash, &u.password) {
                (_, Some(_)) => {
                    return invalid!(
                        "config: user '{}': a plaintext `password` is not accepted; set password_hash to what `tidelake hash-password` prints",
                        u.name
                    )
                }
                (Some(phc), None) => auth::password::Credential::hash(&u.name, phc)?,
                (None, None) => {
                    return invalid!("config: user '{}' has no password_hash", u.name)
                }
            };
            let tenant = match (&u.tenant, config.tenants.is_empty()) {
                (None, true) => CATALOG_NAME.to_string(),
                (Some(t), false) => t.clone(),
                (None, false) => {
                    return invalid!(
                        "config: user '{}' needs a tenant (tenants are configured)",
                        u.name
                    )
                }
                (Some(_), true) => {
                    return invalid!(
                        "config: user '{}' names a tenant, but no [[tenants]] are configured",
                        u.name
                    )
                }
            };
            let user = auth::User {
                credential,
                role: u.role,
                tenant,
            };
            if users.insert(u.name.clone(), user).is_some() {
                return invalid!("config: user '{}' is listed twice", u.name);
            }
        }
        if users.is_empty() {
            let user = std::env::var("TIDELAKE_USER")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "tidelake".to_string());
            let password = match std::env::var("TIDELAKE_PASSWORD")
                .ok()
                .filter(|s| !s.is_empty())
            {
                Some(p) => p,
                None => {
                    let p = uuid::Uuid::new_v4().simple().to_string();
                    eprintln!("tidelake: generated password for user '{user}': {p}");
                    p
                }
            };
            let credential = auth::password::Credential::Plain(password);
            users.insert(
                user,
                auth::User {
                    credential,
                    role: Role::Admin,
                    tenant: CATALOG_NAME.to_string(),
                },
            );
        }
        let auth = auth::AuthOptions::from_config(&config.auth)?;
        let limits = SqlLimits {
            memory_limit_bytes: config.query.memory_limit_mb.map(|m| m * 1024 * 1024),
            query_timeout: config.query.timeout_seconds.map(Duration::from_secs),
        };
        let defaults = crate::runtime::WorkLimits::default();
        let work = crate::runtime::WorkLimits {
            max_concurrent: config
                .query
                .max_concurrent
                .unwrap_or(defaults.max_concurrent),
            max_concurrent_per_user: config
                .query
                .max_concurrent_per_user
                .unwrap_or(defaults.max_concurrent_per_user),
            ..defaults
        };
        let warehouse = warehouse
            .or(config.warehouse)
            .unwrap_or_else(|| "./warehouse".to_string());
        let tenants = config
            .tenants
            .iter()
            .map(|t| tenant::TenantOptions {
                name: t.name.clone(),
                warehouse: t
                    .warehouse
                    .clone()
                    .unwrap_or_else(|| tenant::default_warehouse(&warehouse, &t.name)),
                limits: SqlLimits {
                    memory_limit_bytes: t
                        .memory_limit_mb
                        .or(config.query.memory_limit_mb)
                        .map(|m| m * 1024 * 1024),
                    query_timeout: t
                        .statement_timeout_seconds
                        .or(config.query.timeout_seconds)
                        .map(Duration::from_secs),
                },
                max_concurrent_statements: Some(t.max_concurrent_statements.unwrap_or(16)),
                max_subscriptions: Some(t.max_subscriptions.unwrap_or(64)),
                max_streams: Some(
                    t.max_streams
                        .or(config.ingest.max_streams)
                        .unwrap_or(DEFAULT_MAX_STREAMS),
                ),
            })
            .collect();
        let tls = match &config.tls {
            Some(t) => Some(tls::TlsOptions::read(
                &t.cert_file,
                &t.key_file,
                t.client_ca_file.as_deref(),
            )?),
            None => None,
        };
        Ok(Self {
            work,
            tenants,
            tls,
            audit_file: config.audit.map(|a| a.file),
            storage: config.storage,
            metrics_listen: config.metrics.map(|m| m.listen),
            rest_data_tokens: match &config.rest {
                Some(r) => r.data_tokens()?,
                None => None,
            },
            rest_listen: config.rest.map(|r| r.listen),
            max_streams: config.ingest.max_streams.unwrap_or(DEFAULT_MAX_STREAMS),
            warehouse,
            listen: listen
                .or(config.listen)
                .unwrap_or_else(|| "127.0.0.1:50051".to_string()),
            users,
            auth,
            limits,
        })
    }
}

/// Runs the server until SIGINT/SIGTERM; prints `tidelake listening on ADDR` once bound.
pub async fn serve(options: ServeOptions) -> Result<()> {
    let addr = resolve_listen(&options.listen).await?;
    let io_err = |e: std::io::Error| {
        crate::error::LocalIoSnafu {
            path: format!("listen address {addr}"),
        }
        .into_error(e)
    };
    // Everything the config names (tenants' warehouses, users' tenants, keys, issuers) is opened
    // and checked before the listening line: a misconfigured server never announces itself.
    let opened = open(&options).await?;
    let listener = TcpListener::bind(addr).await.map_err(io_err)?;
    let bound = listener.local_addr().map_err(io_err)?;
    let metrics = match &options.metrics_listen {
        Some(m) => Some(bind_side_port(m, "[metrics] listen").await?),
        None => None,
    };
    let rest = match &options.rest_listen {
        Some(r) => Some(bind_side_port(r, "[rest] listen").await?),
        None => None,
    };
    let data_tokens = match &options.rest_data_tokens {
        Some(t) => Some(Arc::new(crate::io::sts::DataTokens::new(
            t,
            &options.storage,
        )?)),
        None => None,
    };
    let (auth, audit, work) = (Arc::clone(&opened.0), opened.1.clone(), opened.2.clone());
    let (metrics_stop, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    let (rest_stop, rest_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = run_opened(listener, &options, opened, shutdown_signal()?);
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "tidelake listening on {bound}");
        if let Some((_, local)) = &metrics {
            let _ = writeln!(out, "tidelake metrics on http://{local}/metrics");
        }
        if let Some((_, local)) = &rest {
            let _ = writeln!(out, "tidelake REST catalog on http://{local}");
        }
        let _ = out.flush();
    }
    tracing::info!(%bound, warehouse = %options.warehouse, "serving Arrow Flight SQL");
    // The metrics endpoint outlives the drain (a scrape during it shows the draining server).
    let metrics = metrics.map(|(l, _)| {
        tokio::spawn(metrics_http::serve(l, async move {
            let _ = metrics_stopped.await;
        }))
    });
    let rest = rest.map(|(l, _)| {
        tokio::spawn(rest::serve(l, auth, audit, work, data_tokens, async move {
            let _ = rest_stopped.await;
        }))
    });
    let served = server.await;
    let _ = rest_stop.send(());
    if let Some(task) = rest {
        let _ = task.await;
    }
    let _ = metrics_stop.send(());
    if let Some(task) = metrics {
        let _ = task.await;
    }
    served
}

/// Binds a side port (`[metrics]`, `[rest]`): its listener and the address it got.
async fn bind_side_port(listen: &str, what: &str) -> Result<(TcpListener, SocketAddr)> {
    let at = resolve_listen(listen).await?;
    let err = |e: std::io::Error| {
        crate::error::LocalIoSnafu {
            path: format!("{what} {at}"),
        }
        .into_error(e)
    };
    let l = TcpListener::bind(at).await.map_err(err)?;
    let local = l.local_addr().map_err(err)?;
    Ok((l, local))
}

/// Serves on `listener` until `shutdown` completes, then lets in-flight calls finish (at most
/// [`SHUTDOWN_GRACE`]).
pub async fn run(
    listener: TcpListener,
    options: &ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let opened = open(options).await?;
    run_opened(listener, options, opened, shutdown).await
}

/// The tenants (each warehouse opened, its `default` database created) and who may call; the
/// TLS identity checked.
async fn open(
    options: &ServeOptions,
) -> Result<(
    Arc<auth::Authenticator>,
    audit::Audit,
    crate::runtime::WorkPool,
)> {
    if let Some(t) = &options.tls {
        builder(Some(t))?;
    }
    let audit = match &options.audit_file {
        Some(f) => audit::Audit::to_file(f)?,
        None => audit::Audit::to_log(),
    };
    let s = &options.storage;
    crate::table::lookup::configure(crate::table::lookup::LookupLimits {
        dir: s.lookup_dir.as_ref().map(std::path::PathBuf::from),
        disk_bytes: s
            .lookup_disk_mb
            .unwrap_or(crate::table::lookup::DEFAULT_LOOKUP_DISK_MB)
            << 20,
    });
    let mut tenants = tenant::Tenants::open(
        &options.tenants,
        &options.warehouse,
        &options.limits,
        &options.storage,
    )?;
    tenants.limit_implicit_streams(options.max_streams);
    let tenants = Arc::new(tenants);
    tenants.prepare().await?;
    let auth = Arc::new(auth::Authenticator::new(
        options.users.clone(),
        options.auth.clone(),
        tenants,
    )?);
    // One pool of work slots for the Flight and REST sides: a user's limit holds across both.
    Ok((auth, audit, crate::runtime::WorkPool::new(options.work)))
}

async fn run_opened(
    listener: TcpListener,
    options: &ServeOptions,
    opened: (
        Arc<auth::Authenticator>,
        audit::Audit,
        crate::runtime::WorkPool,
    ),
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let (auth, audit, work) = opened;
    let flight_sql = flight_sql::TidelakeFlightSql::new(Arc::clone(&auth));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // grpc.health.v1: SERVING now that the warehouses are open; NOT_SERVING while draining.
    let (mut health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<FlightServiceServer<service::TidelakeService>>()
        .await;
    let service = FlightServiceServer::new(service::TidelakeService::new(
        flight_sql,
        work,
        call::Shutdown::new(stop_rx.clone()),
    ))
    .max_decoding_message_size(MAX_MESSAGE_SIZE)
    .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let mut wait_stop = stop_rx.clone();
    let server = builder(options.tls.as_ref())?
        .layer(gate::GateLayer::new(auth, audit))
        .add_service(health_service)
        .add_service(service)
        .serve_with_incoming_shutdown(accept_nodelay(listener), async move {
            let _ = wait_stop.wait_for(|s| *s).await;
        });
    let server_err = |e: tonic::transport::Error| {
        crate::error::InternalSnafu {
            message: format!("server: {e}"),
        }
        .build()
    };
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return r.map_err(server_err),
        _ = shutdown => {}
    }
    tracing::info!("shutting down: finishing in-flight calls");
    drain_health(&mut health).await;
    let _ = stop_tx.send(true);
    match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
        Ok(r) => r.map_err(server_err)?,
        Err(_) => tracing::warn!("calls still running after {SHUTDOWN_GRACE:?}; stopping"),
    }
    drop(stop_rx);
    Ok(())
}

/// The transport: TCP_NODELAY, keepalive, HTTP/2 limits (header lists of 16 KiB, 256 streams per
/// connection, a bound on streams reset before they are accepted), and TLS when configured.
fn builder(tls: Option<&tls::TlsOptions>) -> Result<tonic::transport::Server> {
    let b = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_max_header_list_size(16 * 1024)
        .max_concurrent_streams(256)
        .http2_max_pending_accept_reset_streams(Some(64));
    match tls {
        None => Ok(b),
        Some(t) => b.tls_config(t.server_config()).map_err(|e| {
            crate::error::InvalidArgumentSnafu {
                message: format!("config: [tls]: {e}"),
            }
            .build()
        }),
    }
}

/// Tells health watchers the server is draining (NOT_SERVING), then ends their Watch streams, which
/// would otherwise hold the graceful shutdown open.
async fn drain_health(health: &mut tonic_health::server::HealthReporter) {
    use tonic::server::NamedService;
    let flight = <FlightServiceServer<service::TidelakeService> as NamedService>::NAME;
    for name in ["", flight] {
        health
            .set_service_status(name, tonic_health::ServingStatus::NotServing)
            .await;
    }
    // Long enough for a Watch stream to send the change before it is closed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for name in ["", flight] {
        health.clear_service_status(name).await;
    }
}

/// Resolves `--listen` (an address such as `127.0.0.1:50051`, or a host name such as
/// `localhost:0`) to the first address it names.
async fn resolve_listen(listen: &str) -> Result<SocketAddr> {
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let refused = || {
        invalid!("--listen: '{listen}' is not an address like 127.0.0.1:50051 or localhost:50051")
    };
    if !listen.contains(':') {
        return refused();
    }
    match tokio::net::lookup_host(listen).await {
        Ok(mut addrs) => match addrs.next() {
            Some(addr) => Ok(addr),
            None => refused(),
        },
        Err(_) => refused(),
    }
}

/// The accepted connections of `listener`, each with `TCP_NODELAY` set. tonic's builder option
/// `tcp_nodelay` applies only to listeners it binds itself, so a listener handed in must set it on
/// every accepted socket; without it a unary response waits for the client's delayed ACK (~40 ms).
fn accept_nodelay(
    listener: TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use futures::StreamExt;
    tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
        let conn = conn?;
        conn.set_nodelay(true)?;
        Ok(conn)
    })
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called (before the
/// listening line is printed), so a signal sent right after start-up is never missed.
#[cfg(unix)]
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send> {
    use tokio::signal::unix::{signal, SignalKind};
    let install = |kind: SignalKind| {
        signal(kind).map_err(|e| {
            crate::error::LocalIoSnafu {
                path: "signal handler".to_string(),
            }
            .into_error(e)
        })
    };
    let mut term = install(SignalKind::terminate())?;
    let mut int = install(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
    })
}

#[cfg(not(unix))]
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's example file is a valid config (every key it shows exists), and every
    /// section of the config is in it.
    #[test]
    fn the_configuration_reference_parses() {
        let doc = include_str!("../../docs/configuration.md");
        let start = doc.find("```toml\n").expect("a toml block") + "```toml\n".len();
        let block = &doc[start..start + doc[start..].find("```").unwrap()];
        let c = ServerConfig::parse(block, "docs/tidelake.toml").unwrap();
        assert_eq!(c.storage.metadata_cache_mb, Some(64));
        assert_eq!(c.metrics.unwrap().listen, "127.0.0.1:9464");
        for section in [
            "[[users]]",
            "[auth]",
            "[[auth.issuers]]",
            "[[tenants]]",
            "[tls]",
            "[audit]",
            "[query]",
            "[storage]",
            "[metrics]",
            "[rest]",
        ] {
            assert!(block.contains(section), "{section} is not in the reference");
        }
    }

    #[test]
    fn config_paths_are_relative_to_the_config_file() {
        let c = ServerConfig::parse("warehouse = \"wh\"", "/etc/tidelake/tidelake.toml").unwrap();
        assert_eq!(c.warehouse.as_deref(), Some("/etc/tidelake/wh"));
        let c = ServerConfig::parse("warehouse = \"/data/wh\"", "/etc/tidelake/t.toml").unwrap();
        assert_eq!(c.warehouse.as_deref(), Some("/data/wh"));
        let c = ServerConfig::parse("warehouse = \"memory://\"", "conf/t.toml").unwrap();
        assert_eq!(c.warehouse.as_deref(), Some("memory://"));
        // A config in the current directory: the path stays as written.
        let c = ServerConfig::parse("warehouse = \"wh\"", "t.toml").unwrap();
        assert_eq!(c.warehouse.as_deref(), Some("wh"));
        let e = ServerConfig::parse("warehous = 1", "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("config t.toml:"), "{e}");
    }

    #[tokio::test]
    async fn every_accepted_connection_has_tcp_nodelay() {
        use futures::StreamExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = Box::pin(accept_nodelay(listener));
        for _ in 0..3 {
            let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
            let accepted = incoming.next().await.unwrap().unwrap();
            assert!(
                accepted.nodelay().unwrap(),
                "accepted socket lacks TCP_NODELAY"
            );
        }
    }

    #[tokio::test]
    async fn listen_takes_addresses_and_host_names() {
        assert_eq!(
            resolve_listen("127.0.0.1:7").await.unwrap(),
            "127.0.0.1:7".parse::<SocketAddr>().unwrap()
        );
        assert!(resolve_listen("localhost:0")
            .await
            .unwrap()
            .ip()
            .is_loopback());
        let err = resolve_listen("nonsense").await.unwrap_err().to_string();
        assert!(err.contains("--listen: 'nonsense'"), "{err}");
    }
}
