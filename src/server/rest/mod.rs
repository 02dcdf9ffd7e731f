//! `[rest] listen`: Paimon's REST catalog API (`metastore = rest`) over HTTP on its own port, so
//! pypaimon, Flink and Spark use tidelake as their catalog. axum on the server's runtime.
//!
//! Every request, `/v1/config` included, carries `Authorization: Bearer <token>`: the tokens the
//! Flight side accepts (a minted one, or an identity provider's JWT), resolved by the same
//! [`Authenticator`]. The principal's tenant is its one catalog: `/v1/config` hands out the
//! tenant's name as the `prefix` every other path starts with; another tenant's prefix is 403, an
//! unknown one 404. Readers read; writers also commit; DDL needs admin.
//!
//! This module owns the HTTP side: routing ([`route`]), credentials, roles, body limits, and the
//! one mapping from tidelake errors to HTTP statuses and Paimon's error body
//! `{message, code, resourceType, resourceName}` ([`http_status`]), and an audit line per request
//! (`REST <METHOD> <resource>`, its table or database, the HTTP reason phrase). The catalog work
//! is routed in [`dispatch`] to one file per resource.

mod catalog;
mod commit;
mod data;
mod dispatch;
mod history;
pub(crate) mod route;
mod tables;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::net::TcpListener;

use super::audit::{Audit, Record};
use super::auth::{Authenticator, Principal};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::io::sts::DataTokens;
use crate::runtime::WorkPool;
use route::{Route, Routed};

/// `[rest]`: Paimon's REST catalog API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestConfig {
    /// Where the REST catalog is served, e.g. `127.0.0.1:8181` (port 0: any free port, printed).
    pub listen: String,
    /// Data credentials (`GET …/token`) for `s3://` warehouses: the role STS issues them for,
    /// each scoped to one table's prefix. Without it clients bring their own storage keys.
    pub data_token_role_arn: Option<String>,
    /// Their lifetime (900 to 43200; default 3600).
    pub data_token_seconds: Option<u64>,
    /// STS's endpoint (default `AWS_ENDPOINT_URL_STS`, else the S3 endpoint when set, else
    /// AWS's regional STS).
    pub sts_endpoint: Option<String>,
}

impl RestConfig {
    /// The data-token settings, if any (a lifetime or an STS endpoint without a role is refused).
    pub(crate) fn data_tokens(&self) -> Result<Option<crate::io::sts::DataTokenOptions>> {
        match &self.data_token_role_arn {
            Some(role_arn) => Ok(Some(crate::io::sts::DataTokenOptions {
                role_arn: role_arn.clone(),
                seconds: self.data_token_seconds,
                sts_endpoint: self.sts_endpoint.clone(),
            })),
            None if self.data_token_seconds.is_some() || self.sts_endpoint.is_some() => invalid!(
                "config: [rest] data_token_seconds and sts_endpoint need data_token_role_arn"
            ),
            None => Ok(None),
        }
    }
}

/// Largest request body accepted (a create-table schema or a commit's snapshot is a few KiB;
/// statistics of many partitions more): larger is 413.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Whether the request's `Content-Length` says its body is over [`MAX_BODY_BYTES`]. An
/// unreadable length is left to the body read, which stops at the limit anyway.
fn declared_too_large(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
}

/// How long one request may take before it is answered 503.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The HTTP status of an error kind: the one mapping of the REST side.
pub(crate) fn http_status(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::AlreadyExists | ErrorKind::Conflict | ErrorKind::Fenced => StatusCode::CONFLICT,
        ErrorKind::InvalidArgument | ErrorKind::OutOfRange => StatusCode::BAD_REQUEST,
        ErrorKind::FailedPrecondition => StatusCode::CONFLICT,
        ErrorKind::Unsupported => StatusCode::NOT_IMPLEMENTED,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        ErrorKind::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::Cancelled | ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A failed request: Paimon's error body with the status as its `code`.
#[derive(Debug)]
pub(crate) struct RestError {
    status: StatusCode,
    message: String,
    resource_type: Option<&'static str>,
    resource_name: Option<String>,
}

impl RestError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            status: http_status(kind),
            message: super::status::bounded_message(&message.into()),
            resource_type: None,
            resource_name: None,
        }
    }

    fn with_status(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            resource_type: None,
            resource_name: None,
        }
    }

    /// Names the resource a 404 or 409 is about (`DATABASE`, `TABLE`, `SNAPSHOT`, …): Paimon's
    /// clients tell "no such table" from "no snapshot yet" by it.
    pub(crate) fn about(mut self, resource_type: &'static str, name: impl Into<String>) -> Self {
        self.resource_type = Some(resource_type);
        self.resource_name = Some(name.into());
        self
    }
}

impl From<Error> for RestError {
    fn from(e: Error) -> Self {
        let kind = e.kind();
        if kind == ErrorKind::Internal {
            tracing::error!(error = ?e, "internal error (REST catalog)");
        }
        RestError::new(kind, e.to_string())
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "message": self.message,
            "code": self.status.as_u16(),
            "resourceType": self.resource_type,
            "resourceName": self.resource_name,
        });
        json_response(self.status, &body)
    }
}

pub(crate) fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// What every handler gets: the server's authenticator (and through it the tenants), and where
/// audit lines go.
#[derive(Clone)]
struct RestState {
    auth: Arc<Authenticator>,
    audit: Audit,
    /// The work slots Flight calls take too: a REST request holds one of its user's.
    work: WorkPool,
    /// Data credentials for `s3://` tables (`[rest] data_token_role_arn`).
    tokens: Option<Arc<DataTokens>>,
}

/// Serves the REST catalog on `listener` until `stop` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    auth: Arc<Authenticator>,
    audit: Audit,
    work: WorkPool,
    tokens: Option<Arc<DataTokens>>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let router = axum::Router::new().fallback(handle).with_state(RestState {
        auth,
        audit,
        work,
        tokens,
    });
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(e) = axum::serve(listener, service)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::warn!(error = %e, "the REST catalog endpoint stopped");
    }
}

/// Answers one request and writes its audit line (as the gate does for Flight calls: who, what,
/// the status, never the token or the body).
async fn handle(
    axum::extract::State(state): axum::extract::State<RestState>,
    request: Request<Body>,
) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.to_string());
    let mut record = Record::begin(format!("REST {method}"), peer);
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, answer(&state, request, &mut record)).await;
    let response = match answer {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => e.into_response(),
        Err(_) => RestError::with_status(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{method} {path}: no answer within {REQUEST_TIMEOUT:?}"),
        )
        .into_response(),
    };
    record.status = response.status().canonical_reason().unwrap_or("HTTP");
    record.duration_ms = started.elapsed().as_millis() as u64;
    state.audit.write(&record);
    response
}

async fn answer(
    state: &RestState,
    request: Request<Body>,
    record: &mut Record,
) -> Result<Response, RestError> {
    let (parts, body) = request.into_parts();
    let resolved = match state.auth.resolve(parts.headers.get(AUTHORIZATION)).await {
        Ok(r) => r,
        Err(e) => {
            record.auth = Some(e.to_string());
            // 401 for refused credentials; the authenticator's other failures keep their kind.
            return Err(RestError::from(e));
        }
    };
    let principal = resolved.principal;
    record.identify(&principal);
    let routed = route::parse(parts.uri.path());
    if let Some(r) = &routed {
        record.method = format!("REST {} {}", parts.method, r.route.kind());
        record.object = r.route.object();
    }
    let Some(Routed { prefix, route }) = routed else {
        return Err(RestError::with_status(
            StatusCode::NOT_FOUND,
            format!("no such resource: {} {}", parts.method, parts.uri.path()),
        ));
    };
    if let Some(prefix) = &prefix {
        check_prefix(state, &principal, prefix)?;
    }
    check_role(&principal, &parts.method, &route)?;
    let too_large = |what: &str| {
        RestError::with_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over {MAX_BODY_BYTES} bytes ({what})"),
        )
    };
    let body = match parts.method {
        // A declared length over the limit is refused before a byte of the body is read, so a
        // client that sent `Expect: 100-continue` gets its 413 without sending the body.
        Method::POST | Method::PUT if declared_too_large(&parts.headers) => {
            return Err(too_large("declared"))
        }
        Method::POST | Method::PUT => axum::body::to_bytes(body, MAX_BODY_BYTES)
            .await
            .map_err(|_| too_large("or cut short"))?,
        _ => Default::default(),
    };
    let query = parts.uri.query().unwrap_or("").to_string();
    // As a Flight statement: a slot of the tenant's, then one of the user's share of the work
    // threads; the catalog work runs there, off the threads that serve connections.
    let tenant = principal
        .tenant
        .admit_statement()
        .await
        .map_err(RestError::from)?;
    let admission = state.work.admit(&principal.admission_key()).await;
    let tokens = state.tokens.clone();
    let method = parts.method;
    state
        .work
        .run(
            Some(admission),
            async move {
                let _tenant = tenant;
                dispatch::dispatch(&principal, tokens.as_deref(), &method, route, &query, &body)
                    .await
            },
            |p| RestError::new(ErrorKind::Internal, p.to_string()),
        )
        .await
}

/// A prefix names a catalog: the principal's tenant's, or it is refused (403 for another
/// tenant's, 404 for one that does not exist).
fn check_prefix(state: &RestState, principal: &Principal, prefix: &str) -> Result<(), RestError> {
    if prefix == principal.tenant.name {
        return Ok(());
    }
    if state.auth.tenants().get(prefix).is_some() {
        return Err(RestError::new(
            ErrorKind::PermissionDenied,
            format!(
                "catalog '{prefix}' belongs to another tenant; '{}' may use only '{}'",
                principal.subject, principal.tenant.name
            ),
        ));
    }
    Err(
        RestError::new(ErrorKind::NotFound, format!("no catalog '{prefix}'"))
            .about("CATALOG", prefix),
    )
}

/// Readers read; writers may also commit data; everything else that changes the catalog (DDL,
/// tags, branches, rollback) needs admin.
fn check_role(principal: &Principal, method: &Method, route: &Route) -> Result<(), RestError> {
    let needed = route::required_role(method, route);
    if principal.role >= needed {
        return Ok(());
    }
    Err(RestError::new(
        ErrorKind::PermissionDenied,
        format!(
            "'{}' has the {} role: {method} {} needs the {} role",
            principal.subject,
            principal.role.name(),
            route_name(route),
            needed.name()
        ),
    ))
}

fn route_name(route: &Route) -> String {
    match route {
        Route::Config => "config".into(),
        Route::Databases => "databases".into(),
        Route::Database(d) => format!("database '{d}'"),
        Route::Tables(d) => format!("the tables of '{d}'"),
        Route::Table(d, t) => format!("table '{d}.{t}'"),
        Route::RenameTable => "rename".into(),
        Route::Commit(d, t) => format!("a commit to '{d}.{t}'"),
        Route::Snapshot(d, t) => format!("the snapshot of '{d}.{t}'"),
        Route::Rollback(d, t) => format!("a rollback of '{d}.{t}'"),
        Route::Tags(d, t, None) => format!("the tags of '{d}.{t}'"),
        Route::Tags(d, t, Some(tag)) => format!("tag '{tag}' of '{d}.{t}'"),
        Route::Token(d, t) => format!("data credentials of '{d}.{t}'"),
        Route::Partitions(d, t) => format!("the partitions of '{d}.{t}'"),
        Route::TableResource(d, t, what) => format!("{} of '{d}.{t}'", what.join("/")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_length_over_the_limit_is_too_large() {
        let with = |v: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert(axum::http::header::CONTENT_LENGTH, v.parse().unwrap());
            h
        };
        assert!(!declared_too_large(&axum::http::HeaderMap::new()));
        assert!(!declared_too_large(&with(&MAX_BODY_BYTES.to_string())));
        assert!(declared_too_large(&with(&(MAX_BODY_BYTES + 1).to_string())));
        assert!(declared_too_large(&with("18446744073709551615")));
        // Unreadable: left to the body read, which stops at the limit.
        assert!(!declared_too_large(&with("-1")));
        assert!(!declared_too_large(&with("99999999999999999999999")));
    }

    #[test]
    fn every_kind_has_one_status() {
        assert_eq!(http_status(ErrorKind::NotFound), StatusCode::NOT_FOUND);
        assert_eq!(http_status(ErrorKind::AlreadyExists), StatusCode::CONFLICT);
        assert_eq!(
            http_status(ErrorKind::InvalidArgument),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            http_status(ErrorKind::Unauthenticated),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            http_status(ErrorKind::PermissionDenied),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            http_status(ErrorKind::Internal),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
