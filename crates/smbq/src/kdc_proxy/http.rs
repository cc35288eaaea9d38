//! The HTTPS listener: TLS (rustls, the QUIC certificate), then hyper's HTTP/1 server with one
//! route, `POST /KdcProxy` (MS-KKDCP 3.2.5).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use smbq_server::AUDIT;
use smbq_server::admission::address_key as client_key;
use tokio::net::TcpListener;
use tracing::{info, warn};

use super::Settings;
use super::forward::{ForwardError, forward};

/// MS-KKDCP 2.1: the media type of requests and responses.
const KERBEROS: &str = "application/kerberos";
/// Client addresses remembered for the rate limit; past this, the table starts over (a flood
/// of distinct addresses gains nothing by it but a fresh count each).
const MAX_TRACKED: usize = 16 * 1024;
/// Connections one client address (an IPv6 /64) may hold at once.
const PER_ADDRESS: usize = 4;
/// Time for the TLS handshake, before any request is read.
const HANDSHAKE: Duration = Duration::from_secs(5);

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
        let key = client_key(ip);
        let mut seen = self.seen.lock();
        if seen.len() >= MAX_TRACKED && !seen.contains_key(&key) {
            seen.retain(|_, (start, _)| now.duration_since(*start) < Duration::from_secs(60));
            if seen.len() >= MAX_TRACKED {
                seen.clear();
            }
        }
        let (start, count) = seen.entry(key).or_insert((now, 0));
        if now.duration_since(*start) >= Duration::from_secs(60) {
            *start = now;
            *count = 0;
        }
        *count += 1;
        *count <= self.per_minute
    }
}

/// Connections held per client address.
#[derive(Default)]
struct Holders(Mutex<HashMap<IpAddr, usize>>);

/// One held connection, given back on drop.
struct Held<'a>(&'a Holders, IpAddr);

impl Holders {
    fn take(&self, ip: IpAddr) -> Option<Held<'_>> {
        let key = client_key(ip);
        let mut m = self.0.lock();
        let n = m.entry(key).or_insert(0);
        if *n >= PER_ADDRESS {
            return None;
        }
        *n += 1;
        Some(Held(self, key))
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut m = self.0.0.lock();
        if let Some(n) = m.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

struct Proxy {
    settings: Settings,
    limit: RateLimit,
    holders: Holders,
    /// Refusals get lines of their own up to a rate, then a count (smbq_server::audit).
    refusals: smbq_server::audit::AuditWindow,
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

impl Proxy {
    /// A refusal: logged (within the rate), and answered with `public`, which says no more
    /// than the client may know (a KDC's address or an OS error is for the log only).
    fn refuse(
        &self,
        code: StatusCode,
        peer: IpAddr,
        why: &str,
        public: &str,
    ) -> Response<Full<Bytes>> {
        if self.refusals.admit(Instant::now()) {
            warn!(target: AUDIT, event = "kdc_proxy", result = "refused", peer = %peer, status = code.as_u16(), reason = why, "KDC proxy request refused");
        }
        reply(code, "text/plain", format!("{public}\n").into_bytes())
    }
}

/// The request body, or None when it is over `max`. An oversized body is still read (and
/// dropped) up to [`DRAIN_MAX`] bytes for up to [`DRAIN_TIME`], so the client has sent it
/// all and reads the 413 instead of a reset: closing a socket with unread data resets the
/// connection, and the client's send fails before it sees the answer.
async fn read_body(mut body: Incoming, max: usize) -> Option<Bytes> {
    let mut got = Vec::new();
    let mut over = false;
    let mut drained = 0usize;
    let deadline = tokio::time::Instant::now() + DRAIN_TIME;
    loop {
        let next = if over {
            match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(f) => f,
                Err(_) => return None,
            }
        } else {
            body.frame().await
        };
        let Some(Ok(frame)) = next else {
            return (!over).then(|| Bytes::from(got));
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if over {
            drained += data.len();
            if drained > DRAIN_MAX {
                return None;
            }
        } else if got.len() + data.len() > max {
            over = true;
            drained = got.len() + data.len();
            got = Vec::new();
        } else {
            got.extend_from_slice(&data);
        }
    }
}

/// How much of an oversized request is read and dropped, and for how long, before the 413.
const DRAIN_MAX: usize = 4 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(2);

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
            let why = "too many requests";
            return self.refuse(StatusCode::TOO_MANY_REQUESTS, peer, why, why);
        }
        let body = match read_body(req.into_body(), self.settings.max_message).await {
            Some(b) => b,
            None => {
                let why = "request too large";
                return self.refuse(StatusCode::PAYLOAD_TOO_LARGE, peer, why, why);
            }
        };
        let msg = match smbq_auth::kkdcp::decode_request(&body) {
            Ok(m) => m,
            Err(e) => {
                let why = e.to_string();
                return self.refuse(StatusCode::BAD_REQUEST, peer, &why, &why);
            }
        };
        // Realm names are case-sensitive in Kerberos (RFC 4120 section 6.1).
        let Some(kdcs) = self.settings.realms.get(&msg.realm) else {
            let why = format!("realm {} is not served here", msg.realm);
            return self.refuse(StatusCode::FORBIDDEN, peer, &why, &why);
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
                self.refuse(
                    StatusCode::BAD_GATEWAY,
                    peer,
                    &why,
                    "the KDC's answer is too large",
                )
            }
            Err(ForwardError::Unreachable(e)) => {
                let why = format!("no KDC of {} answered: {e}", msg.realm);
                let public = "no KDC of the realm answered";
                self.refuse(StatusCode::SERVICE_UNAVAILABLE, peer, &why, public)
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
    let slots = settings.max_connections;
    let timeout = settings.timeout + Duration::from_secs(5);
    let proxy = Arc::new(Proxy {
        limit: RateLimit {
            per_minute: settings.per_client_per_minute,
            seen: Mutex::new(HashMap::new()),
        },
        settings,
        holders: Holders::default(),
        refusals: smbq_server::audit::AuditWindow::new("kdc_proxy", 50),
    });
    crate::accept_loop::serve(listener, slots, shutdown, |stream, peer: SocketAddr| {
        let (acceptor, proxy) = (acceptor.clone(), proxy.clone());
        async move {
            // A client holding several connections open (a stalled handshake is enough)
            // takes its own slots only.
            let Some(_held) = proxy.holders.take(peer.ip()) else {
                return;
            };
            let exchange = async {
                let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await
                else {
                    return;
                };
                let proxy = proxy.clone();
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let proxy = proxy.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(proxy.handle(req, peer.ip()).await)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(5))
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            };
            let _ = tokio::time::timeout(timeout, exchange).await;
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_count_by_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(
            client_key(a),
            client_key("2001:db8:1:3::1".parse().unwrap())
        );
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(client_key(mapped), IpAddr::from([10, 0, 0, 1]));
    }

    #[test]
    fn connections_per_address_are_capped_and_given_back() {
        let h = Holders::default();
        let ip = IpAddr::from([10, 0, 0, 1]);
        let held: Vec<_> = (0..PER_ADDRESS).map(|_| h.take(ip).unwrap()).collect();
        assert!(h.take(ip).is_none());
        assert!(h.take(IpAddr::from([10, 0, 0, 2])).is_some());
        drop(held);
        assert!(h.take(ip).is_some());
        assert!(h.0.lock().len() <= 1);
    }

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
