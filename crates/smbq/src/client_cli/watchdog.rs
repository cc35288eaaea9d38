//! Notices a connection that stopped answering without closing (a TCP peer that vanished, a
//! NAT that dropped the flow): commands mark progress, and a timer fails the command when
//! none was made for too long. The client library has no per-request timeout of its own.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::exit::{CliError, Code};

static START: OnceLock<Instant> = OnceLock::new();
/// Milliseconds after START of the last progress. Passwords are asked for before the
/// timer starts, so waiting on the person at the keyboard never counts.
static LAST: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> u64 {
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Something happened: the clock starts over.
pub fn touch() {
    LAST.store(now_ms(), Ordering::Relaxed);
}

/// Whether `last` is more than `limit` ago at `now` (all in ms).
fn stalled(last: u64, now: u64, limit: u64) -> bool {
    now.saturating_sub(last) > limit
}

/// Resolves when no progress was made for `limit`.
pub async fn expired(limit: Duration) -> CliError {
    touch();
    let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    let tick = (limit / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        if stalled(LAST.load(Ordering::Relaxed), now_ms(), limit_ms) {
            return CliError::new(
                Code::Connection,
                format!(
                    "connection stalled: no progress for {} s (--timeout)",
                    limit.as_secs_f64()
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_arithmetic() {
        assert!(!stalled(1000, 1500, 1000));
        assert!(stalled(1000, 2001, 1000));
        // A touch racing the check (last after now) is not a stall.
        assert!(!stalled(3000, 2000, 10));
    }
}
