//! The `/metrics` endpoint: hyper's HTTP/1 server on the configured address. Read-only, no
//! request body read, at most a few scrapes at once, each bounded in time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// Scrapes served at once; others wait in the listen backlog.
const MAX_SCRAPERS: usize = 8;
/// A scraper gets this long for its whole exchange.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// What prometheus-client encodes; Prometheus asks for it in its Accept header. Others get
/// the classic text format (super::text_format).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("metrics: listening on {addr}: {e}"))
}

fn answer(registry: &Registry, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |code: StatusCode, ctype: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = code;
        if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    if req.uri().path() != "/metrics" {
        return reply(StatusCode::NOT_FOUND, "text/plain", "see /metrics\n".into());
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", String::new());
    }
    let wants_openmetrics = req
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, registry) {
        Ok(()) if wants_openmetrics => reply(StatusCode::OK, OPENMETRICS, body),
        Ok(()) => reply(
            StatusCode::OK,
            super::text_format::CONTENT_TYPE,
            super::text_format::from_openmetrics(&body),
        ),
        Err(_) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            String::new(),
        ),
    }
}

/// Serves `/metrics` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    shutdown: smbq_server::conn::Shutdown,
) {
    crate::accept_loop::serve(listener, MAX_SCRAPERS, shutdown, |stream, _| {
        let registry = registry.clone();
        async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let r = answer(&registry, &req);
                async move { Ok::<_, std::convert::Infallible>(r) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(EXCHANGE_TIMEOUT, conn).await;
        }
    })
    .await;
}
