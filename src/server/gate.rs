//! The gate: one tower layer in front of every RPC. It resolves the caller's [`Principal`] from
//! the request headers before any body is read (a refused call never costs a DoPut decode), puts
//! it into the request's extensions with the call's audit note (and the minted token of a call
//! that came with a password), from which the dispatcher makes the call's context
//! (`super::call`), and adds the minted token to the response.
//!
//! A Handshake without an `authorization` header passes through: its credentials are in the
//! payload, which the service checks.
//!
//! Health checks (`grpc.health.v1`) pass without credentials and without an audit line.
//!
//! The gate also writes each call's audit line (`super::audit`): at once for a refused call,
//! else when the response body ends (the gRPC status is read from its trailers, or from the
//! headers of a trailers-only answer) or is dropped (CANCELLED).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::audit::{code_name, Audit, AuditNote, Record};
use super::auth::Authenticator;
use super::call::MintedToken;
use super::principal::Principal;

/// The layer (`Server::builder().layer(GateLayer::new(auth))`).
#[derive(Debug, Clone)]
pub struct GateLayer {
    auth: Arc<Authenticator>,
    audit: Audit,
}

impl GateLayer {
    pub fn new(auth: Arc<Authenticator>, audit: Audit) -> Self {
        Self { auth, audit }
    }
}

impl<S> tower_layer::Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            auth: Arc::clone(&self.auth),
            audit: self.audit.clone(),
        }
    }
}

/// The service the layer wraps around tonic's routes.
#[derive(Debug, Clone)]
pub struct Gate<S> {
    inner: S,
    auth: Arc<Authenticator>,
    audit: Audit,
}

/// The RPC a request path names (`/arrow.flight.protocol.FlightService/DoGet` → `DoGet`).
pub fn method_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The health service's path prefix: open to load balancers and orchestrators, which hold no
/// credentials (it tells only whether the server serves).
const HEALTH: &str = "/grpc.health.v1.Health/";

/// Whether the gate lets a request through without resolving a principal first.
fn passes_unresolved(path: &str, has_authorization: bool) -> bool {
    path.starts_with(HEALTH) || (method_of(path) == "Handshake" && !has_authorization)
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S, B, R> tower_service::Service<http::Request<B>> for Gate<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: http_body::Body + Default + Unpin + Send + 'static,
{
    type Response = http::Response<AuditedBody<R>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<http::Response<AuditedBody<R>>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The clone that was polled ready serves this call; a fresh clone stays for the next.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let auth = Arc::clone(&self.auth);
        let audit = self.audit.clone();
        Box::pin(async move {
            let started = std::time::Instant::now();
            let method = method_of(req.uri().path()).to_string();
            let note = Arc::new(AuditNote::default());
            req.extensions_mut().insert(Arc::clone(&note));
            let mut record = Record::begin(method.clone(), peer_of(req.extensions()));
            let header = req.headers().get(http::header::AUTHORIZATION).cloned();
            if req.uri().path().starts_with(HEALTH) {
                // Probes every few seconds from each load balancer: not audited.
                return Ok(inner.call(req).await?.map(AuditedBody::done));
            }
            if passes_unresolved(req.uri().path(), header.is_some()) {
                let resp = inner.call(req).await?;
                return Ok(audited(resp, record, note, audit, started));
            }
            let resolved = match auth.resolve(header.as_ref()).await {
                Ok(r) => r,
                Err(e) => {
                    let status = super::status::to_status(e);
                    // Refusal messages are a fixed vocabulary; they never carry the token.
                    record.status = code_name(status.code());
                    record.auth = Some(status.message().to_string());
                    record.duration_ms = started.elapsed().as_millis() as u64;
                    audit.write(&record.finish(&note));
                    return Ok(status.into_http::<R>().map(AuditedBody::done));
                }
            };
            record.identify(&resolved.principal);
            // A Handshake answers with a token: the minted one, or the bearer token it came with.
            let answer = resolved.minted.clone().or_else(|| {
                (method == "Handshake")
                    .then(|| header.as_ref().and_then(bearer_of))
                    .flatten()
            });
            req.extensions_mut().insert::<Principal>(resolved.principal);
            if let Some(t) = &answer {
                req.extensions_mut().insert(MintedToken(t.clone()));
            }
            let mut resp = inner.call(req).await?;
            if let Some(value) = resolved
                .minted
                .and_then(|t| http::HeaderValue::try_from(format!("Bearer {t}")).ok())
            {
                resp.headers_mut()
                    .insert(http::header::AUTHORIZATION, value);
            }
            Ok(audited(resp, record, note, audit, started))
        })
    }
}

/// The peer address tonic recorded for the connection (plain TCP or TLS).
fn peer_of(ext: &http::Extensions) -> Option<String> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    ext.get::<TcpConnectInfo>()
        .or_else(|| {
            ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                .map(|t| t.get_ref())
        })
        .and_then(|c| c.remote_addr())
        .map(|a| a.to_string())
}

fn audited<R>(
    resp: http::Response<R>,
    record: Record,
    note: Arc<AuditNote>,
    audit: Audit,
    started: std::time::Instant,
) -> http::Response<AuditedBody<R>> {
    // A trailers-only answer (an error before any message) has its status in the headers.
    let status = resp
        .headers()
        .get("grpc-status")
        .map(|v| code_name(tonic::Code::from_bytes(v.as_bytes())));
    resp.map(|inner| AuditedBody {
        inner,
        pending: Some(Pending {
            record,
            note,
            audit,
            started,
        }),
        bytes: 0,
        status,
    })
}

struct Pending {
    record: Record,
    note: Arc<AuditNote>,
    audit: Audit,
    started: std::time::Instant,
}

/// A response body that writes the call's audit line when it ends or is dropped; frames pass
/// through untouched.
pub struct AuditedBody<R> {
    inner: R,
    pending: Option<Pending>,
    bytes: u64,
    status: Option<&'static str>,
}

impl<R> std::fmt::Debug for AuditedBody<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditedBody").finish_non_exhaustive()
    }
}

impl<R> AuditedBody<R> {
    /// A body whose call was audited already.
    fn done(inner: R) -> Self {
        Self {
            inner,
            pending: None,
            bytes: 0,
            status: None,
        }
    }

    fn finish(&mut self, fallback: &'static str) {
        if let Some(p) = self.pending.take() {
            let mut r = p.record.finish(&p.note);
            r.status = self.status.unwrap_or(fallback);
            r.bytes_out = self.bytes;
            r.duration_ms = p.started.elapsed().as_millis() as u64;
            p.audit.write(&r);
        }
    }
}

impl<R> Drop for AuditedBody<R> {
    fn drop(&mut self) {
        self.finish("CANCELLED");
    }
}

impl<R: http_body::Body + Unpin> http_body::Body for AuditedBody<R> {
    type Data = R::Data;
    type Error = R::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<R::Data>, R::Error>>> {
        use bytes::Buf;
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    self.bytes += d.remaining() as u64;
                }
                if let Some(t) = frame.trailers_ref() {
                    if let Some(v) = t.get("grpc-status") {
                        self.status = Some(code_name(tonic::Code::from_bytes(v.as_bytes())));
                    }
                }
            }
            Poll::Ready(Some(Err(_))) => self.finish("INTERNAL"),
            Poll::Ready(None) => self.finish("OK"),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn bearer_of(v: &http::HeaderValue) -> Option<String> {
    let v = v.to_str().ok()?;
    let (scheme, rest) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::auth::password::Credential;
    use crate::server::auth::{AuthOptions, User};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower_service::Service;

    #[test]
    fn methods_and_pass_through() {
        assert_eq!(
            method_of("/arrow.flight.protocol.FlightService/DoGet"),
            "DoGet"
        );
        let flight = "/arrow.flight.protocol.FlightService/";
        assert!(passes_unresolved(&format!("{flight}Handshake"), false));
        assert!(!passes_unresolved(&format!("{flight}Handshake"), true));
        assert!(!passes_unresolved(&format!("{flight}DoPut"), false));
        assert!(passes_unresolved("/grpc.health.v1.Health/Check", false));
        assert!(passes_unresolved("/grpc.health.v1.Health/Watch", true));
        assert!(!passes_unresolved("/grpc.health.v1.HealthX/Check", false));
    }

    #[tokio::test]
    async fn refused_calls_never_reach_the_service() {
        let users = HashMap::from([(
            "bob".to_string(),
            User {
                credential: Credential::Plain("pw".into()),
                role: crate::sql::Role::Admin,
                tenant: crate::sql::CATALOG_NAME.into(),
            },
        )]);
        let tenants = Arc::new(crate::server::tenant::Tenants::in_memory());
        let auth = Arc::new(Authenticator::new(users, AuthOptions::default(), tenants).unwrap());
        let reached = Arc::new(AtomicUsize::new(0));
        let inner = Echo(Arc::clone(&reached));
        let mut gate = GateLayer::new(auth, Audit::to_log()).layer_service(inner);
        let call = |path: &str, authorization: Option<String>| {
            let mut b = http::Request::builder().uri(format!("http://x{path}"));
            if let Some(a) = authorization {
                b = b.header("authorization", a);
            }
            b.body(()).unwrap()
        };
        // No credentials: refused with a gRPC status, the service never runs.
        let resp = gate.call(call("/s/DoPut", None)).await.unwrap();
        assert_eq!(resp.headers()["grpc-status"], "16");
        assert_eq!(reached.load(Ordering::SeqCst), 0);
        // A payload handshake passes unresolved.
        let resp = gate.call(call("/s/Handshake", None)).await.unwrap();
        assert_eq!(body(resp).await, "");
        assert_eq!(reached.load(Ordering::SeqCst), 1);
        // Basic in the header: resolved, and the minted token comes back in the header.
        use base64::Engine;
        let basic = base64::engine::general_purpose::STANDARD.encode("bob:pw");
        let resp = gate
            .call(call("/s/GetFlightInfo", Some(format!("Basic {basic}"))))
            .await
            .unwrap();
        let minted = resp.headers()["authorization"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(minted.starts_with("Bearer "), "{minted}");
        assert_eq!(body(resp).await, "bob");
        // That token alone is enough on the next call, and no new one is minted.
        let resp = gate.call(call("/s/DoGet", Some(minted))).await.unwrap();
        assert!(resp.headers().get("authorization").is_none());
        assert_eq!(body(resp).await, "bob");
    }

    /// The text of a response body.
    async fn body(resp: http::Response<AuditedBody<tonic::body::Body>>) -> String {
        use http_body::Body as _;
        let mut b = resp.into_body();
        let mut out = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut b).poll_frame(cx)).await {
            if let Ok(d) = frame.unwrap().into_data() {
                out.extend_from_slice(&d);
            }
        }
        String::from_utf8(out).unwrap()
    }

    /// Answers with the principal's subject, counting the calls that reach it.
    #[derive(Clone)]
    struct Echo(Arc<AtomicUsize>);

    impl Service<http::Request<()>> for Echo {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<http::Response<tonic::body::Body>, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<()>) -> Self::Future {
            self.0.fetch_add(1, Ordering::SeqCst);
            let who = req
                .extensions()
                .get::<Principal>()
                .map(|p| p.subject.clone())
                .unwrap_or_default();
            std::future::ready(Ok(http::Response::new(tonic::body::Body::new(who))))
        }
    }

    trait LayerExt {
        fn layer_service<S>(self, s: S) -> Gate<S>;
    }
    impl LayerExt for GateLayer {
        fn layer_service<S>(self, s: S) -> Gate<S> {
            tower_layer::Layer::layer(&self, s)
        }
    }
}
