//! Where [`FileStates`](super::FileStates)' decisions meet the network: break notifications go
//! to the **session** owning the open, on whichever of its channels is alive (MS-SMB2 3.3.4.6:
//! "any connection in Session.ChannelList"), and a CREATE waits here for the acknowledgments.
//! A break nobody can receive completes at once instead of holding the CREATE for its
//! timeout.

use std::time::Instant;

use smbq_wire::create::OplockLevel;
use smbq_wire::oplock_break::OplockBreak;
use smbq_wire::{Command, NtStatus, Writer};
use tokio_util::sync::CancellationToken;

use super::oplock::{Admission, BreakNotice, Level, Owner, PendingBreaks, is_stat_open};
use super::{FileKey, OpenRequest};
use crate::Server;
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
                self.files().oplock_undeliverable(n.key, n.open_id);
            }
        }
    }

    /// Before a CREATE admits an open to the existing file `key`: breaks the oplocks and
    /// leases it conflicts with (MS-FSA 2.1.5.1.2) and says whether the CREATE must wait for
    /// them ([`Admission::MustWait`]); DELETE_PENDING is reported before any break
    /// (smbtorture smb2.oplock.doc). Blocking-safe (no awaits).
    pub(crate) fn oplock_before_open(&self, key: FileKey, open: &OpenRequest<'_>) -> Admission {
        let now = Instant::now();
        match self.files().oplock_check(key, open, now) {
            Err(status) => Admission::Conflict(status),
            Ok((oplocks, leases)) => {
                self.send_breaks(&oplocks.notices);
                self.send_lease_breaks(&leases.notices);
                if oplocks.wait || leases.wait {
                    // A disconnected durable open will never acknowledge a break started
                    // before its connection went: it is purged rather than waited for.
                    for id in self.files().breaking_opens(key) {
                        self.purge_parked(id);
                    }
                    Admission::MustWait(PendingBreaks { key })
                } else {
                    Admission::Granted
                }
            }
        }
    }

    /// Waits until the `pending` breaks are acknowledged, their holders closed, or
    /// [`BREAK_TIMEOUT`](super::oplock::BREAK_TIMEOUT) passed.
    pub(crate) async fn oplock_wait(
        &self,
        pending: PendingBreaks,
        cancel: &CancellationToken,
    ) -> Result<(), NtStatus> {
        let key = pending.key;
        let changed = &self.files().shard(key).changed;
        loop {
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let Some(until) = self.files().oplock_pending_until(key, Instant::now()) else {
                // A holder that closed and is deleting the file: the CREATE runs again once
                // the name is free (FileStates::deleted wakes it).
                if self.files().deleting(key) {
                    tokio::select! {
                        _ = &mut notified => continue,
                        _ = cancel.cancelled() => return Err(NtStatus::CANCELLED),
                    }
                }
                return Ok(());
            };
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = cancel.cancelled() => return Err(NtStatus::CANCELLED),
            }
        }
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
            .files()
            .oplock_grant(f.key, open.volatile(), req, stat_only, owner);
        OplockLevel(level.to_wire())
    }

    /// A WRITE, LOCK or SET_INFO size change on `key` through open `writer` breaks every
    /// level II oplock on it and every other lease key's read caching (MS-FSA 2.1.4.12).
    pub(crate) fn oplock_break_level2(&self, key: FileKey, writer: u64) {
        let (oplocks, leases) = self.files().break_for_write(key, writer, Instant::now());
        self.send_breaks(&oplocks);
        self.send_lease_breaks(&leases);
    }

    /// An OPLOCK_BREAK acknowledgment for `open_id` of `key`; wakes the CREATEs waiting on it.
    pub(crate) fn oplock_acknowledge(
        &self,
        key: FileKey,
        open_id: u64,
        acked: u8,
    ) -> Result<Level, NtStatus> {
        self.files().oplock_acknowledge(key, open_id, acked)
    }
}
