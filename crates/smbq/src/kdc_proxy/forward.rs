//! Forwarding one framed KDC message to the realm's KDCs over TCP (RFC 4120 section 7.2.2:
//! a 4-byte big-endian length, then the message) and reading the framed answer.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why no answer came back.
#[derive(Debug)]
pub enum ForwardError {
    /// No KDC of the realm could be reached or answered in time.
    Unreachable(String),
    /// A KDC answered with more than the configured maximum.
    TooLarge(usize),
}

/// A KDC that does not accept the connection in this long is skipped for the next one.
const CONNECT: Duration = Duration::from_secs(3);

/// Tries each KDC in turn; the first complete answer wins. `budget` bounds them all
/// together, and each connection attempt gets at most [`CONNECT`] of it, so a dead first
/// KDC leaves time for the second.
pub async fn forward(
    kdcs: &[String],
    framed: &[u8],
    max: usize,
    budget: Duration,
) -> Result<Vec<u8>, ForwardError> {
    let deadline = tokio::time::Instant::now() + budget;
    let mut last = String::from("no KDC configured");
    for kdc in kdcs {
        match tokio::time::timeout_at(deadline, exchange(kdc, framed, max)).await {
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(ForwardError::TooLarge(n))) => return Err(ForwardError::TooLarge(n)),
            Ok(Err(ForwardError::Unreachable(e))) => last = format!("{kdc}: {e}"),
            Err(_) => {
                last = format!("{kdc}: no answer within {budget:?}");
                break;
            }
        }
    }
    Err(ForwardError::Unreachable(last))
}

async fn exchange(kdc: &str, framed: &[u8], max: usize) -> Result<Vec<u8>, ForwardError> {
    let io = |e: std::io::Error| ForwardError::Unreachable(e.to_string());
    let mut s = tokio::time::timeout(CONNECT, TcpStream::connect(kdc))
        .await
        .map_err(|_| ForwardError::Unreachable(format!("no connection within {CONNECT:?}")))?
        .map_err(io)?;
    s.write_all(framed).await.map_err(io)?;
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).await.map_err(io)?;
    let len = u32::from_be_bytes(prefix) as usize;
    if len == 0 {
        return Err(ForwardError::Unreachable("an empty answer".into()));
    }
    // The high bit is reserved for a length extension no KDC uses (RFC 4120 7.2.2).
    if len > max {
        return Err(ForwardError::TooLarge(len));
    }
    let mut answer = Vec::with_capacity(4 + len);
    answer.extend_from_slice(&prefix);
    answer.resize(4 + len, 0);
    if let Some(body) = answer.get_mut(4..) {
        s.read_exact(body).await.map_err(io)?;
    }
    Ok(answer)
}
