//! QUIC and TCP raced the way browsers race HTTP/3 and HTTP/2 (Happy Eyeballs, RFC 8305's
//! idea applied to transports): QUIC starts at once, TCP after a short head start or as soon
//! as QUIC has failed, and the first to connect is used. A server without QUIC, or with QUIC
//! on another port, then costs the head start instead of the whole QUIC handshake timeout.
//!
//! QUIC usually wins when it works: its handshake (one round trip) finishes before TCP has
//! even started plus done its own. A certificate the client does not trust ends the race
//! with that error instead of falling back to TCP (see `connect::is_trust_error`).

use std::future::Future;
use std::time::Duration;

use smbq_transport::QuicConnectError;

use super::exit::CliError;

/// How the race ended well.
#[derive(Debug)]
pub enum Won<C> {
    Quic(C),
    /// TCP connected first; `quic` says why QUIC did not, when it had already failed (else it
    /// was still trying).
    Tcp {
        conn: C,
        quic: Option<QuicConnectError>,
    },
}

/// How the race ended badly.
#[derive(Debug)]
pub enum Lost {
    /// QUIC failed in a way that must not fall back (an untrusted certificate).
    Fatal(QuicConnectError),
    /// Both failed.
    Both(QuicConnectError, CliError),
}

/// Runs `quic` at once and `tcp` after `head_start` (or when QUIC fails, if sooner); the
/// first success wins and the other attempt is dropped. `fatal` picks the QUIC errors that end
/// the race at once.
pub async fn race<C>(
    quic: impl Future<Output = Result<C, QuicConnectError>>,
    tcp: impl Future<Output = Result<C, CliError>>,
    head_start: Duration,
    fatal: impl Fn(&QuicConnectError) -> bool,
) -> Result<Won<C>, Lost> {
    tokio::pin!(quic);
    // Not polled (so not started) until its turn.
    tokio::pin!(tcp);
    let mut quic_err: Option<QuicConnectError> = None;
    tokio::select! {
        r = &mut quic => match r {
            Ok(c) => return Ok(Won::Quic(c)),
            Err(e) if fatal(&e) => return Err(Lost::Fatal(e)),
            Err(e) => quic_err = Some(e),
        },
        () = tokio::time::sleep(head_start) => {}
    }
    let mut tcp_err: Option<CliError> = None;
    loop {
        match (quic_err.take(), tcp_err.take()) {
            (Some(q), Some(t)) => return Err(Lost::Both(q, t)),
            (Some(q), None) => {
                // QUIC is out; TCP alone decides.
                return match (&mut tcp).await {
                    Ok(conn) => Ok(Won::Tcp {
                        conn,
                        quic: Some(q),
                    }),
                    Err(t) => Err(Lost::Both(q, t)),
                };
            }
            (None, Some(t)) => {
                return match (&mut quic).await {
                    Ok(c) => Ok(Won::Quic(c)),
                    Err(e) if fatal(&e) => Err(Lost::Fatal(e)),
                    Err(q) => Err(Lost::Both(q, t)),
                };
            }
            (None, None) => {
                tokio::select! {
                    // A QUIC connection that completes in the same instant is preferred.
                    biased;
                    r = &mut quic => match r {
                        Ok(c) => return Ok(Won::Quic(c)),
                        Err(e) if fatal(&e) => return Err(Lost::Fatal(e)),
                        Err(e) => quic_err = Some(e),
                    },
                    r = &mut tcp => match r {
                        Ok(conn) => return Ok(Won::Tcp { conn, quic: None }),
                        Err(t) => tcp_err = Some(t),
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_cli::exit::Code;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::time::{Instant, sleep};

    const HEAD: Duration = Duration::from_millis(250);

    async fn quic_after(
        d: Duration,
        r: Result<&'static str, QuicConnectError>,
    ) -> Result<&'static str, QuicConnectError> {
        sleep(d).await;
        r
    }

    async fn tcp_after(
        d: Duration,
        ok: bool,
        started: Arc<AtomicBool>,
    ) -> Result<&'static str, CliError> {
        started.store(true, Ordering::SeqCst);
        sleep(d).await;
        if ok {
            Ok("tcp")
        } else {
            Err(CliError::new(Code::Connection, "TCP refused"))
        }
    }

    fn trust(e: &QuicConnectError) -> bool {
        matches!(e, QuicConnectError::CertificateUntrusted(_))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn working_quic_wins_and_tcp_never_starts() {
        let started = Arc::new(AtomicBool::new(false));
        let r = race(
            quic_after(ms(30), Ok("quic")),
            tcp_after(ms(1), true, started.clone()),
            HEAD,
            trust,
        )
        .await;
        assert!(matches!(r, Ok(Won::Quic("quic"))), "{r:?}");
        assert!(!started.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn silent_quic_costs_only_the_head_start() {
        let t0 = Instant::now();
        let started = Arc::new(AtomicBool::new(false));
        let r = race(
            quic_after(ms(10_000), Err(QuicConnectError::Timeout)),
            tcp_after(ms(1), true, started),
            HEAD,
            trust,
        )
        .await;
        assert!(
            matches!(
                r,
                Ok(Won::Tcp {
                    conn: "tcp",
                    quic: None
                })
            ),
            "{r:?}"
        );
        assert_eq!(t0.elapsed(), HEAD + ms(1));
    }

    #[tokio::test(start_paused = true)]
    async fn failed_quic_starts_tcp_at_once() {
        let t0 = Instant::now();
        let r = race(
            quic_after(ms(5), Err(QuicConnectError::Refused("no".into()))),
            tcp_after(ms(1), true, Arc::default()),
            HEAD,
            trust,
        )
        .await;
        assert!(
            matches!(
                r,
                Ok(Won::Tcp {
                    quic: Some(QuicConnectError::Refused(_)),
                    ..
                })
            ),
            "{r:?}"
        );
        assert_eq!(t0.elapsed(), ms(6));
    }

    #[tokio::test(start_paused = true)]
    async fn slow_quic_still_beats_slower_tcp() {
        // QUIC answers after the head start but before TCP connects.
        let r = race(
            quic_after(ms(300), Ok("quic")),
            tcp_after(ms(100), true, Arc::default()),
            HEAD,
            trust,
        )
        .await;
        assert!(matches!(r, Ok(Won::Quic(_))), "{r:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn untrusted_certificate_never_falls_back() {
        for at in [ms(5), ms(400)] {
            let r = race(
                quic_after(at, Err(QuicConnectError::CertificateUntrusted("x".into()))),
                tcp_after(ms(500), true, Arc::default()),
                HEAD,
                trust,
            )
            .await;
            assert!(matches!(r, Err(Lost::Fatal(_))), "{r:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn both_failing_reports_both() {
        let r = race(
            quic_after(ms(1_000), Err(QuicConnectError::Timeout)),
            tcp_after(ms(1), false, Arc::default()),
            HEAD,
            trust,
        )
        .await;
        assert!(
            matches!(r, Err(Lost::Both(QuicConnectError::Timeout, _))),
            "{r:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failed_tcp_leaves_quic_to_finish() {
        let r = race(
            quic_after(ms(1_000), Ok("quic")),
            tcp_after(ms(1), false, Arc::default()),
            HEAD,
            trust,
        )
        .await;
        assert!(matches!(r, Ok(Won::Quic(_))), "{r:?}");
    }
}
