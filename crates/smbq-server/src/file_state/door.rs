//! [`FileStates`] behind the [`OpenState`] door: each verb is one step under the file's shard
//! lock (see the module docs of [`super`]), returning what must happen as [`Effects`].

use std::time::Instant;

use smbq_vfs::RelPath;
use smbq_wire::NtStatus;
use tokio::sync::Notify;

use super::lease::{Granted, LeaseAsk, LeaseKey};
use super::oplock::{Level, Owner};
use super::{FileKey, FileStates, LastClose, NewOpen, OpenRequest};
use crate::open_state::{
    Ack, Acked, BreakWait, Effects, LockOp, OpenState, Undelivered, WaitToken,
};

impl OpenState for FileStates {
    fn contend(
        &self,
        key: FileKey,
        intent: &OpenRequest<'_>,
        now: Instant,
    ) -> Result<Effects, NtStatus> {
        let (oplocks, leases) = self.oplock_check(key, intent, now)?;
        let wait = oplocks.wait || leases.wait;
        Ok(Effects {
            oplock_breaks: oplocks.notices,
            lease_breaks: leases.notices,
            wait: wait.then_some(WaitToken { key }),
            // A disconnected durable open will never acknowledge a break started before its
            // connection went: it is purged rather than waited for.
            purge: if wait {
                self.breaking_opens(key)
            } else {
                Vec::new()
            },
        })
    }

    fn admit(&self, key: FileKey, new: &NewOpen<'_>) -> Result<(), NtStatus> {
        self.admit_checking(key, new)
    }

    fn grant_oplock(
        &self,
        key: FileKey,
        open_id: u64,
        requested: Level,
        stat_only: bool,
        owner: Owner,
    ) -> Level {
        self.oplock_grant(key, open_id, requested, stat_only, owner)
    }

    fn grant_lease(
        &self,
        key: FileKey,
        (open_id, session_id): (u64, u64),
        ask: &LeaseAsk,
        dir_and_size: (bool, u64),
    ) -> Option<Granted> {
        self.lease_grant(key, open_id, session_id, ask, dir_and_size)
    }

    fn on_write(&self, key: FileKey, by: u64, now: Instant) -> Effects {
        let (oplock_breaks, lease_breaks) = self.break_for_write(key, by, now);
        Effects {
            oplock_breaks,
            lease_breaks,
            ..Effects::default()
        }
    }

    fn on_lock(
        &self,
        key: FileKey,
        owner: u64,
        (offset, length): (u64, u64),
        op: LockOp,
        now: Instant,
    ) -> (Result<(), NtStatus>, Effects) {
        match op {
            LockOp::Unlock => (self.unlock(key, owner, offset, length), Effects::default()),
            LockOp::Lock { exclusive } => {
                let fx = self.on_write(key, owner, now);
                (self.try_lock(key, owner, offset, length, exclusive), fx)
            }
        }
    }

    fn on_rename(&self, key: FileKey, by: u64, now: Instant) -> Effects {
        let c = self.lease_break_handles(key, by, now);
        Effects {
            lease_breaks: c.notices,
            wait: c.wait.then_some(WaitToken { key }),
            ..Effects::default()
        }
    }

    fn acknowledge(&self, ack: Ack<'_>, now: Instant) -> Result<(Acked, Effects), NtStatus> {
        match ack {
            Ack::Oplock {
                key,
                open_id,
                level,
            } => {
                let level = self.oplock_acknowledge(key, open_id, level)?;
                Ok((Acked::Oplock(level), Effects::default()))
            }
            Ack::Lease { lease, state } => {
                let (state, next) = self.lease_acknowledge(lease, state, now)?;
                let fx = Effects {
                    lease_breaks: next.into_iter().collect(),
                    ..Effects::default()
                };
                Ok((Acked::Lease(state), fx))
            }
        }
    }

    fn undeliverable(&self, what: Undelivered<'_>) {
        match what {
            Undelivered::Oplock { key, open_id } => self.oplock_undeliverable(key, open_id),
            Undelivered::Lease(lease) => self.lease_undeliverable(lease),
            Undelivered::LeaseWithheld(lease) => self.lease_withheld(lease),
        }
    }

    fn release(
        &self,
        key: FileKey,
        open_id: u64,
        delete_on_close: bool,
        parent: Option<[u8; 16]>,
    ) -> Option<LastClose> {
        FileStates::release(self, key, open_id, delete_on_close, parent)
    }

    fn deleted(&self, key: FileKey) {
        FileStates::deleted(self, key)
    }

    fn reclaim(
        &self,
        key: FileKey,
        (open_id, session_id): (u64, u64),
        lease_epoch: Option<u16>,
        away: &dyn Fn(u64) -> bool,
    ) {
        self.rebind(key, open_id, session_id);
        let Some(epoch) = lease_epoch else { return };
        let partners = self.lease_partners(key, open_id);
        if partners.iter().all(|p| *p == open_id || away(*p)) {
            self.reacquire_lease(key, open_id, epoch);
        }
    }

    fn break_wait(&self, token: WaitToken, now: Instant) -> BreakWait {
        match self.oplock_pending_until(token.key, now) {
            Some(until) => BreakWait::Until(until),
            None if self.deleting(token.key) => BreakWait::Deleting,
            None => BreakWait::Done,
        }
    }

    fn changed(&self, key: FileKey) -> &Notify {
        &self.shard(key).changed
    }

    fn check_io(
        &self,
        key: FileKey,
        owner: u64,
        (offset, length): (u64, u64),
        write: bool,
    ) -> Result<(), NtStatus> {
        FileStates::check_io(self, key, owner, offset, length, write)
    }

    fn delete_pending(&self, key: FileKey) -> bool {
        FileStates::delete_pending(self, key)
    }

    fn open_count_any(&self, key: FileKey) -> usize {
        FileStates::open_count_any(self, key)
    }

    fn caching_of(&self, key: FileKey, open_id: u64) -> (Level, Option<(LeaseKey, Granted)>) {
        FileStates::caching_of(self, key, open_id)
    }

    fn breaking_opens(&self, key: FileKey) -> Vec<u64> {
        FileStates::breaking_opens(self, key)
    }

    fn lease_opens(&self, lease: &LeaseKey) -> Vec<u64> {
        FileStates::lease_opens(self, lease)
    }

    fn path(&self, key: FileKey) -> Option<RelPath> {
        FileStates::path(self, key)
    }
}
