//! The HTTP endpoint on `metrics_listen`: `/metrics` (Prometheus), `/healthz` (the
//! process answers) and `/readyz` (new milter connections are being taken).
//!
//! Ours rather than the Prometheus exporter's listener, which answers every path with
//! the metrics; `/metrics` sends what that listener sent (same body, `text/plain`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::health::Health;
use super::listen::{Socket, ACCEPT_PAUSE};

/// Serves the endpoint on `listener` for as long as the runtime runs. Without `metrics`
/// (no recorder installed) `/metrics` answers 404.
///
/// At most `max_connections` (`metrics_max_connections`) are served at once; one more
/// is closed at once. The endpoint shares the process's file descriptors with the
/// milter connections, and probes or scrapers must never take the MTA's.
pub async fn serve(
    listener: TcpListener,
    metrics: Option<PrometheusHandle>,
    health: Arc<Health>,
    max_connections: usize,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                let open = max_connections - slots.available_permits();
                if super::listen::accept_failed(Socket::Http, &e, open) {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            crate::milter::metrics::http_connection_refused();
            crate::milter::throttle::HTTP_REFUSED.hit(|| {
                format!(
                    "{peer}: {max_connections} open, metrics_max_connections = {max_connections}"
                )
            });
            continue;
        };
        let metrics = metrics.clone();
        let health = health.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| {
                let metrics = metrics.clone();
                let health = health.clone();
                async move { Ok::<_, Infallible>(respond(&req, metrics, &health).await) }
            });
            // A client that never finishes its request does not keep a task for ever.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn respond(
    req: &Request<Incoming>,
    metrics: Option<PrometheusHandle>,
    health: &Health,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only\n".into());
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => {
            let (code, body) = health.readiness();
            text(code, body)
        }
        "/metrics" => {
            // The socket gauge as of this scrape.
            let _ = health.socket_state();
            match metrics {
                // Rendering walks every series: off the runtime's worker threads.
                Some(h) => match tokio::task::spawn_blocking(move || h.render()).await {
                    Ok(body) => text(StatusCode::OK, body),
                    Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, String::new()),
                },
                None => text(StatusCode::NOT_FOUND, "no metrics recorder\n".into()),
            }
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "/metrics, /healthz or /readyz\n".into(),
        ),
    }
}

fn text(code: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}
