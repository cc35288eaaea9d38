//! Open file descriptors, the server's one resource the kernel caps per process: every open a
//! client holds is a descriptor, and so is every durable or persistent open kept for a client
//! that is away (`max_durable_opens`). Past the limit an open fails with
//! STATUS_TOO_MANY_OPENED_FILES. At start the server raises its soft limit to the hard one
//! (as Samba's smbd does), and says so when the hard limit is below what its own bounds
//! allow to be kept, so that an operator learns it from the log, not from a client.

use smbq_proto::Limits;

/// Descriptors kept beyond the durable and persistent opens: sockets, the listeners, the
/// stores, the share roots, and the opens of connected clients.
const HEADROOM: u64 = 4096;

/// Raises the soft RLIMIT_NOFILE to the hard limit; warns when the hard limit is below
/// `max_durable_opens` plus [`HEADROOM`]. Returns the limit now in force (`None`: none).
pub fn raise(limits: &Limits) -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    let mut soft = now.current;
    // Linux caps the hard limit at fs.nr_open, so it is never infinite here (None).
    if let (Some(cur), Some(max)) = (now.current, now.maximum)
        && cur < max
    {
        let raised = Rlimit {
            current: Some(max),
            maximum: Some(max),
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => soft = Some(max),
            Err(e) => tracing::warn!(error = %e, "could not raise the open file limit"),
        }
    }
    let kept = u64::try_from(limits.max_durable_opens).unwrap_or(u64::MAX);
    let wanted = kept.saturating_add(HEADROOM);
    match soft {
        Some(n) if n < wanted => tracing::warn!(
            limit = n,
            max_durable_opens = kept,
            "the open file limit (RLIMIT_NOFILE) is below max_durable_opens + {HEADROOM}: \
             opens past it fail with STATUS_TOO_MANY_OPENED_FILES; raise LimitNOFILE \
             (systemd) or `ulimit -Hn`"
        ),
        _ => tracing::info!(limit = soft, "open file limit"),
    }
    soft
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The soft limit ends at the hard one, whatever it was before.
    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let was = getrlimit(Resource::Nofile);
        let Some(hard) = was.maximum else {
            // No hard limit: nothing to raise to, and nothing lowered.
            assert_eq!(raise(&Limits::default()), was.current);
            return;
        };
        // One below: the other tests of this process keep all but one descriptor meanwhile.
        let lowered = Rlimit {
            current: Some(hard.saturating_sub(1)),
            maximum: Some(hard),
        };
        setrlimit(Resource::Nofile, lowered).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(raise(&Limits::default()), Some(hard));
        assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
    }
}
