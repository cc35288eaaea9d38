//! Where lease decisions meet the network: LEASE_BREAK notifications (MS-SMB2 3.3.4.7) go to
//! the session of the lease's latest open, on whichever of its channels is alive; a break
//! nobody can receive completes at once. The grant after admission and the acknowledgment
//! (MS-SMB2 3.3.5.22.2) are looked up here for the handlers.

use std::time::Instant;

use smbq_wire::create_context::lease_state::WRITE_CACHING;
use smbq_wire::oplock_break::{LeaseBreakNotification, lease_break_flags};
use smbq_wire::{Command, NtStatus, Writer};

use crate::Server;
use crate::file_state::FileKey;
use crate::file_state::lease::{Granted, LeaseAsk, LeaseBreakNotice, LeaseKey};
use crate::file_state::oplock::Admission;
use crate::open_state::{Ack, Acked, Changes as _, Undelivered};
use crate::push::Push;
use crate::tables::Open;

impl Server {
    /// Sends lease break notifications (MS-SMB2 2.2.23.2) to the lease owners' sessions.
    pub(crate) fn send_lease_breaks(&self, notices: &[LeaseBreakNotice]) {
        for n in notices {
            let mut w = Writer::new();
            LeaseBreakNotification {
                new_epoch: n.epoch,
                flags: if n.ack_required {
                    lease_break_flags::ACK_REQUIRED
                } else {
                    0
                },
                lease_key: n.key.key,
                current_lease_state: n.current,
                new_lease_state: n.new,
                ..Default::default()
            }
            .encode(&mut w);
            let body = w.into_vec();
            let to = |session_id| Push::Notification {
                session_id,
                command: Command::OPLOCK_BREAK,
                body: body.clone(),
            };
            tracing::debug!(
                current = n.current,
                new = n.new,
                ack = n.ack_required,
                "lease break"
            );
            // The client's first session of the holder's user hears it (crate::clients), or
            // the holder's own session.
            let first = self.lease_break_session(&n.key.client_guid, n.session_id);
            let delivered = (first != n.session_id && self.push_to_session(first, to(first)))
                || self.push_to_session(n.session_id, to(n.session_id));
            if !delivered {
                // The lease's disconnected durable opens cannot answer: they are purged. A
                // persistent open's break waits for its client (crate::durable::persistent).
                let state = self.open_state();
                let opens = state.lease_opens(&n.key);
                if n.ack_required && self.durable_store().lease_waits_for_client(&opens) {
                    state.undeliverable(Undelivered::LeaseWithheld(n));
                    continue;
                }
                if n.ack_required {
                    for id in opens {
                        self.purge_parked(id);
                    }
                }
                state.undeliverable(Undelivered::Lease(n));
            }
        }
    }

    /// The lease an admitted open gets (MS-SMB2 3.3.5.9.8 / 3.3.5.9.11); `None` when none is
    /// granted: for a directory on a connection without directory leasing, and for a key
    /// that went to another file meanwhile. A directory's lease never caches writes (Windows
    /// Server 2022 drops W rather than failing, as Samba notes; crate::file_state::dir_lease).
    /// `size`: the file's size after the open, for the byte-range lock rule
    /// ([`super::lease::Opener::byte_range_locked`]).
    pub(crate) fn lease_grant(
        &self,
        open: &Open,
        ask: &LeaseAsk,
        dir_leasing: bool,
        size: u64,
    ) -> Option<Granted> {
        let f = open.file()?;
        if f.is_dir && !dir_leasing {
            return None;
        }
        let mut ask = *ask;
        if f.is_dir {
            ask.requested &= !WRITE_CACHING;
        }
        self.open_state().grant_lease(
            f.key,
            (open.volatile(), open.session_id),
            &ask,
            (f.is_dir, size),
        )
    }

    /// Before a rename of `key`'s file through open `by`: breaks the handle caching of the
    /// other keys' leases and says whether the rename must wait for the acknowledgments
    /// (`Server::oplock_wait`).
    pub(crate) fn lease_handles_before_rename(&self, key: FileKey, by: u64) -> Admission {
        let fx = self.open_state().on_rename(key, by, Instant::now());
        super::breaks::admission(self.apply(fx))
    }

    /// A LEASE_BREAK acknowledgment from the lease's client (MS-SMB2 3.3.5.22.2); wakes the
    /// CREATEs waiting for it.
    pub(crate) fn lease_acknowledge(&self, lease: &LeaseKey, acked: u32) -> Result<u32, NtStatus> {
        let ack = Ack::Lease {
            lease,
            state: acked,
        };
        let (acked, fx) = self.open_state().acknowledge(ack, Instant::now())?;
        let _ = self.apply(fx);
        match acked {
            Acked::Lease(state) => Ok(state),
            Acked::Oplock(_) => Err(NtStatus::INTERNAL_ERROR),
        }
    }
}
