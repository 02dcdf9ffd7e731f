//! `[metrics] listen`: the Prometheus scrape endpoint, `GET /metrics` on its own HTTP port (axum
//! on the server's runtime), serving `crate::metrics` as OpenMetrics text. Anything else is 404.
//! It carries no table data and takes no credentials, so it belongs on an address only the
//! monitoring network reaches (the default in the docs is loopback).

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use tokio::net::TcpListener;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The router of the endpoint.
fn router() -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        get(|| async {
            (
                [(CONTENT_TYPE, OPENMETRICS)],
                crate::metrics::metrics().render(),
            )
        }),
    )
}

/// Serves the endpoint on `listener` until `stop` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    if let Err(e) = axum::serve(listener, router())
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::warn!(error = %e, "the metrics endpoint stopped");
    }
}
