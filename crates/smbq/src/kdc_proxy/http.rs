//! The HTTPS listener: TLS (rustls, the QUIC certificate), then hyper's HTTP/1 server with one
//! route, `POST /KdcProxy` (MS-KKDCP 3.2.5).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use smbq_server::AUDIT;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::Settings;
use super::forward::{ForwardError, forward};

/// MS-KKDCP 2.1: the media type of requests and responses.
const KERBEROS: &str = "application/kerberos";
/// Client addresses remembered for the rate limit; past this, old windows are dropped first.
const MAX_TRACKED: usize = 16 * 1024;

pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("[kdc_proxy]: listening on {addr}: {e}"))
}

/// The TLS side: TLS 1.3 and 1.2, HTTP/1.1 by ALPN, the certificate SMB over QUIC serves.
fn tls(certs: Arc<smbq_transport::CertStore>) -> Result<tokio_rustls::TlsAcceptor, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
}

/// Requests per client address in the current minute.
struct RateLimit {
    per_minute: u32,
    seen: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl RateLimit {
    fn allow(&self, ip: IpAddr, now: Instant) -> bool {
        let mut seen = self.seen.lock();
        if seen.len() >= MAX_TRACKED && !seen.contains_key(&ip) {
            seen.retain(|_, (start, _)| now.duration_since(*start) < Duration::from_secs(60));
            if seen.len() >= MAX_TRACKED {
                return false;
            }
        }
        let (start, count) = seen.entry(ip).or_insert((now, 0));
        if now.duration_since(*start) >= Duration::from_secs(60) {
            *start = now;
            *count = 0;
        }
        *count += 1;
        *count <= self.per_minute
    }
}

struct Proxy {
    settings: Settings,
    limit: RateLimit,
}

fn reply(code: StatusCode, ctype: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(ctype),
    );
    r
}

fn refuse(code: StatusCode, peer: IpAddr, why: &str) -> Response<Full<Bytes>> {
    warn!(target: AUDIT, event = "kdc_proxy", result = "refused", peer = %peer, status = code.as_u16(), reason = why, "KDC proxy request refused");
    reply(code, "text/plain", format!("{why}\n").into_bytes())
}

impl Proxy {
    async fn handle(&self, req: Request<Incoming>, peer: IpAddr) -> Response<Full<Bytes>> {
        if req.uri().path() != "/KdcProxy" {
            return reply(
                StatusCode::NOT_FOUND,
                "text/plain",
                b"see /KdcProxy\n".to_vec(),
            );
        }
        if req.method() != Method::POST {
            return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", Vec::new());
        }
        if !self.limit.allow(peer, Instant::now()) {
            return refuse(StatusCode::TOO_MANY_REQUESTS, peer, "too many requests");
        }
        let body = match Limited::new(req.into_body(), self.settings.max_message)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(_) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, peer, "request too large"),
        };
        let msg = match smbq_auth::kkdcp::decode_request(&body) {
            Ok(m) => m,
            Err(e) => return refuse(StatusCode::BAD_REQUEST, peer, &e.to_string()),
        };
        let Some(kdcs) = self.settings.realms.get(&msg.realm) else {
            let why = format!("realm {} is not served here", msg.realm);
            return refuse(StatusCode::FORBIDDEN, peer, &why);
        };
        let answer = forward(
            kdcs,
            msg.kerb_message,
            self.settings.max_message,
            self.settings.timeout,
        )
        .await;
        match answer {
            Ok(framed) => {
                info!(target: AUDIT, event = "kdc_proxy", result = "forwarded", peer = %peer, realm = %msg.realm, bytes_in = msg.kerb_message.len(), bytes_out = framed.len(), "KDC proxy request forwarded");
                reply(
                    StatusCode::OK,
                    KERBEROS,
                    smbq_auth::kkdcp::encode_response(&framed),
                )
            }
            Err(ForwardError::TooLarge(n)) => {
                let why = format!("the KDC answered {n} bytes, over the limit");
                refuse(StatusCode::BAD_GATEWAY, peer, &why)
            }
            Err(ForwardError::Unreachable(e)) => {
                let why = format!("no KDC of {} answered: {e}", msg.realm);
                refuse(StatusCode::SERVICE_UNAVAILABLE, peer, &why)
            }
        }
    }
}

/// Serves the proxy until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    settings: Settings,
    certs: Arc<smbq_transport::CertStore>,
    shutdown: smbq_server::conn::Shutdown,
) {
    let acceptor = match tls(certs) {
        Ok(a) => a,
        Err(e) => {
            warn!("[kdc_proxy]: TLS setup failed: {e}");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let timeout = settings.timeout + Duration::from_secs(5);
    let proxy = Arc::new(Proxy {
        limit: RateLimit {
            per_minute: settings.per_client_per_minute,
            seen: Mutex::new(HashMap::new()),
        },
        settings,
    });
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = shutdown.cancelled() => return,
        };
        let Ok((stream, peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (acceptor, proxy) = (acceptor.clone(), proxy.clone());
        tokio::spawn(async move {
            let exchange = async {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let proxy = proxy.clone();
                    async move { Ok::<_, std::convert::Infallible>(proxy.handle(req, peer.ip()).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(5))
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            };
            let _ = tokio::time::timeout(timeout, exchange).await;
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_counts_per_address_per_minute() {
        let limit = RateLimit {
            per_minute: 2,
            seen: Mutex::new(HashMap::new()),
        };
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let t = Instant::now();
        assert!(limit.allow(a, t) && limit.allow(a, t));
        assert!(!limit.allow(a, t), "third in the minute");
        assert!(limit.allow(b, t), "another address has its own count");
        assert!(limit.allow(a, t + Duration::from_secs(61)), "a new minute");
    }
}
