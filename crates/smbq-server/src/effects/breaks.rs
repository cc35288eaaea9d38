//! Where break decisions meet the network: oplock break notifications go to the **session**
//! owning the open, on whichever of its channels is alive (MS-SMB2 3.3.4.6: "any connection
//! in Session.ChannelList"), and a request waits here for the acknowledgments. A break nobody
//! can receive completes at once instead of holding the CREATE for its timeout.

use std::time::Instant;

use smbq_wire::create::OplockLevel;
use smbq_wire::oplock_break::OplockBreak;
use smbq_wire::{Command, NtStatus, Writer};
use tokio_util::sync::CancellationToken;

use crate::Server;
use crate::file_state::oplock::{Admission, BreakNotice, Level, Owner, is_stat_open};
use crate::file_state::{FileKey, OpenRequest};
use crate::open_state::{self, Ack, Acked, Changes as _, Undelivered, WaitToken};
use crate::push::Push;
use crate::tables::Open;

impl Server {
    /// Sends break notifications (MS-SMB2 2.2.23.1) to the sessions holding the opens.
    pub(crate) fn send_breaks(&self, notices: &[BreakNotice]) {
        for n in notices {
            let mut w = Writer::new();
            OplockBreak {
                oplock_level: n.level.to_wire(),
                file_id: n.file_id,
            }
            .encode(&mut w);
            let push = Push::Notification {
                session_id: n.session_id,
                command: Command::OPLOCK_BREAK,
                body: w.into_vec(),
            };
            tracing::debug!(open = n.open_id, level = ?n.level, "oplock break");
            if !self.push_to_session(n.session_id, push) {
                // A disconnected durable open cannot answer: it is purged, not waited for.
                if n.ack_required && self.purge_parked(n.open_id) {
                    continue;
                }
                self.open_state().undeliverable(Undelivered::Oplock {
                    key: n.key,
                    open_id: n.open_id,
                });
            }
        }
    }

    /// Before a CREATE admits an open to the existing file `key`: breaks the oplocks and
    /// leases it conflicts with (MS-FSA 2.1.5.1.2) and says whether the CREATE must wait for
    /// them ([`Admission::MustWait`]); DELETE_PENDING is reported before any break
    /// (smbtorture smb2.oplock.doc). Blocking-safe (no awaits).
    pub(crate) fn oplock_before_open(&self, key: FileKey, open: &OpenRequest<'_>) -> Admission {
        match self.open_state().contend(key, open, Instant::now()) {
            Err(status) => Admission::Conflict(status),
            Ok(fx) => admission(self.apply(fx)),
        }
    }

    /// Waits until the breaks `token` stands for are acknowledged, their holders closed, or
    /// [`BREAK_TIMEOUT`](crate::file_state::oplock::BREAK_TIMEOUT) passed.
    pub(crate) async fn oplock_wait(
        &self,
        token: WaitToken,
        cancel: &CancellationToken,
    ) -> Result<(), NtStatus> {
        open_state::break_wait(self.open_state(), token, cancel).await
    }

    /// Before a WRITE through open `by` of `key`, or what writes like one (a copy or clone
    /// into the file, a zeroed range): the breaks it forces go out (MS-FSA 2.1.4.12.2).
    pub(crate) fn before_write(&self, key: FileKey, by: u64) {
        self.apply(self.open_state().on_write(key, by, Instant::now()));
    }

    /// The oplock an admitted disk open gets (MS-SMB2 3.3.5.9.8); recorded for later breaks,
    /// which go to the open's session. Directories get none (oplocks are for files;
    /// directory caching needs leases). An open that overwrote the file is a data open
    /// whatever its access (smbtorture exclusive5).
    pub(crate) fn oplock_grant(
        &self,
        open: &Open,
        requested: OplockLevel,
        overwrote: bool,
    ) -> OplockLevel {
        let Some(f) = open.file() else {
            return OplockLevel::NONE;
        };
        let Some(req) = Level::from_wire(requested.0).filter(|_| !f.is_dir) else {
            return OplockLevel::NONE;
        };
        let owner = Owner {
            session_id: open.session_id,
            file_id: open.file_id,
        };
        let stat_only = is_stat_open(open.granted) && !overwrote;
        let level = self
            .open_state()
            .grant_oplock(f.key, open.volatile(), req, stat_only, owner);
        OplockLevel(level.to_wire())
    }

    /// An OPLOCK_BREAK acknowledgment for `open_id` of `key`; wakes the CREATEs waiting on it.
    pub(crate) fn oplock_acknowledge(
        &self,
        key: FileKey,
        open_id: u64,
        acked: u8,
    ) -> Result<Level, NtStatus> {
        let ack = Ack::Oplock {
            key,
            open_id,
            level: acked,
        };
        let (acked, fx) = self.open_state().acknowledge(ack, Instant::now())?;
        let _ = self.apply(fx);
        match acked {
            Acked::Oplock(level) => Ok(level),
            Acked::Lease(_) => Err(NtStatus::INTERNAL_ERROR),
        }
    }
}

/// What a CREATE does after its breaks were sent.
pub(super) fn admission(wait: Option<WaitToken>) -> Admission {
    match wait {
        Some(token) => Admission::MustWait(token),
        None => Admission::Granted,
    }
}
