//! Audit lines for access denials (issue 17), at most [`PER_WINDOW`] per [`WINDOW`]: a client
//! that provokes denials in a loop must not be able to flood the log, so the excess is counted
//! and reported in one line when the next window opens. Logons and tree connects are audited
//! where they happen (conn/event_loop.rs, logon_guard.rs, handlers/tree_connect.rs).

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use smbq_wire::{Command, NtStatus};

use crate::handlers::Ctx;

const WINDOW: Duration = Duration::from_secs(10);
const PER_WINDOW: u32 = 50;

#[derive(Debug)]
pub(crate) struct DenialLog {
    state: Mutex<(Instant, u32, u64)>,
}

impl Default for DenialLog {
    fn default() -> Self {
        Self {
            state: Mutex::new((Instant::now(), 0, 0)),
        }
    }
}

impl DenialLog {
    /// Whether this denial gets its own line now; logs the count of suppressed ones when a
    /// window ends.
    fn admit(&self, now: Instant) -> bool {
        let mut s = self.state.lock();
        let (start, logged, suppressed) = &mut *s;
        if now.duration_since(*start) >= WINDOW {
            if *suppressed > 0 {
                tracing::warn!(
                    target: crate::AUDIT,
                    event = "access_denied",
                    suppressed = *suppressed,
                    "access denials not logged one by one in the last window"
                );
            }
            *start = now;
            *logged = 0;
            *suppressed = 0;
        }
        if *logged < PER_WINDOW {
            *logged += 1;
            true
        } else {
            *suppressed += 1;
            false
        }
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
        assert_eq!(log.state.lock().2, 30);
        assert!(log.admit(t0 + WINDOW));
        assert_eq!(log.state.lock().2, 0);
    }
}
