//! Audit lines for access denials and tree connects (issue 17), each at most so many per
//! [`WINDOW`]: a client that provokes them in a loop must not be able to flood the log, so the
//! excess is counted and reported in one line when the next window opens. Logons are audited
//! where they happen (conn/event_loop.rs; failures rate-limited by logon_guard.rs), tree
//! connects in handlers/tree_connect.rs.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use smbq_wire::{Command, NtStatus};

use crate::handlers::Ctx;

const WINDOW: Duration = Duration::from_secs(10);
const PER_WINDOW: u32 = 50;
/// Tree connects are routine (a client makes one per share it uses), so more of them pass.
const TREE_CONNECTS_PER_WINDOW: u32 = 200;

/// Lines of one kind of audit event, at most `per_window` per [`WINDOW`].
#[derive(Debug)]
pub struct AuditWindow {
    event: &'static str,
    per_window: u32,
    state: Mutex<(Instant, u32, u64)>,
}

impl AuditWindow {
    pub fn new(event: &'static str, per_window: u32) -> Self {
        Self {
            event,
            per_window,
            state: Mutex::new((Instant::now(), 0, 0)),
        }
    }

    /// For TREE_CONNECT's audit line.
    pub(crate) fn tree_connects() -> Self {
        Self::new("tree_connect", TREE_CONNECTS_PER_WINDOW)
    }

    /// Whether this event gets its own line now; logs the count of suppressed ones when a
    /// window ends.
    pub fn admit(&self, now: Instant) -> bool {
        let mut s = self.state.lock();
        let (start, logged, suppressed) = &mut *s;
        if now.duration_since(*start) >= WINDOW {
            if *suppressed > 0 {
                tracing::warn!(
                    target: crate::AUDIT,
                    event = self.event,
                    suppressed = *suppressed,
                    "audit events not logged one by one in the last window"
                );
            }
            *start = now;
            *logged = 0;
            *suppressed = 0;
        }
        if *logged < self.per_window {
            *logged += 1;
            true
        } else {
            *suppressed += 1;
            false
        }
    }
}

/// Access denials, at most [`PER_WINDOW`] lines per window.
#[derive(Debug)]
pub(crate) struct DenialLog(AuditWindow);

impl Default for DenialLog {
    fn default() -> Self {
        Self(AuditWindow::new("access_denied", PER_WINDOW))
    }
}

impl DenialLog {
    fn admit(&self, now: Instant) -> bool {
        self.0.admit(now)
    }

    /// Audits an ACCESS_DENIED answer to `ctx`'s request.
    pub(crate) fn denied(&self, ctx: &Ctx<'_>, status: NtStatus) {
        let command = ctx.req.command();
        // TREE_CONNECT has its own audit line (handlers/tree_connect.rs).
        if status != NtStatus::ACCESS_DENIED
            || command == Command::TREE_CONNECT
            || !self.admit(Instant::now())
        {
            return;
        }
        let file = match &ctx.open {
            Some(o) => o.path().to_string(),
            None if command == Command::CREATE => {
                smbq_wire::create::CreateRequest::decode(&ctx.req.msg)
                    .ok()
                    .and_then(|c| c.name_string().ok())
                    .unwrap_or_default()
            }
            None => String::new(),
        };
        tracing::warn!(
            target: crate::AUDIT,
            event = "access_denied",
            command = ?command,
            share = ctx.tree.as_ref().map_or("", |t| t.share.name()),
            file = %file,
            session = ctx.view.id,
            user = %ctx.view.identity.user,
            peer = %ctx.conn.peer,
            "access denied"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_cap_per_window_then_a_fresh_window() {
        let log = DenialLog::default();
        let t0 = Instant::now();
        let admitted = (0..PER_WINDOW + 30).filter(|_| log.admit(t0)).count();
        assert_eq!(admitted, PER_WINDOW as usize);
        assert_eq!(log.0.state.lock().2, 30);
        assert!(log.admit(t0 + WINDOW));
        assert_eq!(log.0.state.lock().2, 0);
    }
}
