//! The gate: one tower layer in front of every RPC. It resolves the caller's [`Principal`] from
//! the request headers before any body is read (a refused call never costs a DoPut decode), puts
//! it into the request's extensions for every door to take, and adds the minted token to the
//! response of a call that came with a password.
//!
//! A Handshake without an `authorization` header passes through: its credentials are in the
//! payload, which the service checks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::auth::{Authenticator, Principal};

/// A token minted for this call (Basic credentials in the header); the Handshake returns it in
/// its payload too.
#[derive(Debug, Clone)]
pub struct MintedToken(pub String);

/// The layer (`Server::builder().layer(GateLayer::new(auth))`).
#[derive(Debug, Clone)]
pub struct GateLayer {
    auth: Arc<Authenticator>,
}

impl GateLayer {
    pub fn new(auth: Arc<Authenticator>) -> Self {
        Self { auth }
    }
}

impl<S> tower_layer::Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            auth: Arc::clone(&self.auth),
        }
    }
}

/// The service the layer wraps around tonic's routes.
#[derive(Debug, Clone)]
pub struct Gate<S> {
    inner: S,
    auth: Arc<Authenticator>,
}

/// The RPC a request path names (`/arrow.flight.protocol.FlightService/DoGet` → `DoGet`).
pub fn method_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether the gate lets a request through without resolving a principal first.
fn passes_unresolved(method: &str, has_authorization: bool) -> bool {
    method == "Handshake" && !has_authorization
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
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<http::Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The clone that was polled ready serves this call; a fresh clone stays for the next.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let auth = Arc::clone(&self.auth);
        Box::pin(async move {
            let method = method_of(req.uri().path()).to_string();
            let header = req.headers().get(http::header::AUTHORIZATION).cloned();
            if passes_unresolved(&method, header.is_some()) {
                return inner.call(req).await;
            }
            let resolved = match auth.resolve(header.as_ref()).await {
                Ok(r) => r,
                Err(status) => return Ok(status.into_http()),
            };
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
            Ok(resp)
        })
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
        assert!(passes_unresolved("Handshake", false));
        assert!(!passes_unresolved("Handshake", true));
        assert!(!passes_unresolved("DoPut", false));
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
        let mut gate = GateLayer::new(auth).layer_service(inner);
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
        assert_eq!(resp.body(), "");
        assert_eq!(reached.load(Ordering::SeqCst), 1);
        // Basic in the header: resolved, and the minted token comes back in the header.
        use base64::Engine;
        let basic = base64::engine::general_purpose::STANDARD.encode("bob:pw");
        let resp = gate
            .call(call("/s/GetFlightInfo", Some(format!("Basic {basic}"))))
            .await
            .unwrap();
        assert_eq!(resp.body(), "bob");
        let minted = resp.headers()["authorization"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(minted.starts_with("Bearer "), "{minted}");
        // That token alone is enough on the next call, and no new one is minted.
        let resp = gate.call(call("/s/DoGet", Some(minted))).await.unwrap();
        assert_eq!(resp.body(), "bob");
        assert!(resp.headers().get("authorization").is_none());
    }

    /// Answers with the principal's subject, counting the calls that reach it.
    #[derive(Clone)]
    struct Echo(Arc<AtomicUsize>);

    impl Service<http::Request<()>> for Echo {
        type Response = http::Response<String>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<http::Response<String>, Self::Error>>;

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
            std::future::ready(Ok(http::Response::new(who)))
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
