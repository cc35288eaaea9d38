//! [`FileStates`] behind the [`OpenState`] door: each verb decides under the file's part
//! lock (see the module docs of [`super`]), returning what must happen as [`Effects`].

use std::time::Instant;

use smbq_vfs::RelPath;
use smbq_wire::NtStatus;
use tokio::sync::Notify;

use super::lease::{Granted, LeaseAsk, LeaseKey};
use super::oplock::{Level, Owner};
use super::{FileKey, FileStates, FileView, LastClose, Layout, NewOpen, OpenRequest};
use crate::open_state::{
    Ack, Acked, Below, BreakWait, Change, Effects, Fact, LockOp, Moved, OpenState, Queries,
    Restored, Undelivered, WaitToken,
};

impl<L: Layout> OpenState for FileStates<L> {
    fn contend(
        &self,
        key: FileKey,
        intent: &OpenRequest<'_>,
        now: Instant,
    ) -> Result<Effects, NtStatus> {
        let (oplocks, leases, breaking) = self.oplock_check(key, intent, now)?;
        let wait = oplocks.wait || leases.wait;
        Ok(Effects {
            oplock_breaks: oplocks.notices,
            lease_breaks: leases.notices,
            wait: wait.then_some(WaitToken { key }),
            // A disconnected durable open will never acknowledge a break started before its
            // connection went: it is purged rather than waited for.
            purge: breaking,
            // A break that timed out here or in the wait before (`break_wait`) changed
            // these opens' leases: their persistent records follow.
            recorded: leases.recorded,
            ..Effects::default()
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

    fn on_change(&self, key: FileKey, change: Change<'_>, now: Instant) -> Effects {
        match change {
            Change::Write { by } | Change::SetSize { by } => {
                let ((oplock_breaks, lease_breaks), recorded) = self.break_for_write(key, by, now);
                Effects {
                    oplock_breaks,
                    lease_breaks,
                    recorded,
                    ..Effects::default()
                }
            }
            Change::Rename { by } => {
                let c = self.lease_break_handles(key, by, now);
                Effects {
                    lease_breaks: c.notices,
                    wait: c.wait.then_some(WaitToken { key }),
                    recorded: c.recorded,
                    ..Effects::default()
                }
            }
            Change::Renamed { open_id, to } => {
                let opens = self.update_opens_listing(key, |m| match to {
                    Moved::Path(path) => m.set_path(path),
                    Moved::Stream(stream) => m.move_open(open_id, stream),
                    Moved::Under { ref from, ref to } => {
                        if let Some(path) = m.path().rebase(from, to) {
                            m.set_path(path);
                        }
                    }
                });
                Effects::recording(true, opens)
            }
            Change::Disposition { pending, parent } => {
                let opens =
                    self.update_opens_listing(key, |m| m.mark_delete(key.stream, pending, parent));
                Effects::recording(true, opens)
            }
            Change::InDirectory { except } => {
                let (lease_breaks, recorded) = self.break_for_child_change(key, except, now);
                Effects {
                    lease_breaks,
                    recorded,
                    ..Effects::default()
                }
            }
            Change::Fact(Fact::Allocation(size)) => {
                self.set_allocation(key, size);
                Effects::default()
            }
            Change::Fact(Fact::ChangeTime { ctime, value }) => {
                self.set_change_time(key, ctime, value);
                Effects::default()
            }
            Change::Deleted => {
                FileStates::deleted(self, key);
                Effects::default()
            }
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
            LockOp::Unlock => {
                let r = self.unlock(key, owner, offset, length);
                (r, Effects::recording(r.is_ok(), vec![owner]))
            }
            LockOp::Lock { exclusive } | LockOp::Retry { exclusive } => {
                let breaks = matches!(op, LockOp::Lock { .. }).then_some(now);
                let lock = (offset, length, exclusive);
                let (r, (oplock_breaks, lease_breaks), expired) =
                    self.lock_breaking(key, owner, lock, breaks);
                let mut fx = Effects {
                    oplock_breaks,
                    lease_breaks,
                    ..Effects::recording(r.is_ok(), vec![owner])
                };
                for o in expired {
                    if !fx.recorded.contains(&o) {
                        fx.recorded.push(o);
                    }
                }
                (r, fx)
            }
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
                Ok((
                    Acked::Oplock(level),
                    Effects::recording(true, vec![open_id]),
                ))
            }
            Ack::Lease { lease, state } => {
                let (state, next, opens) = self.lease_acknowledge_listing(lease, state, now)?;
                let fx = Effects {
                    lease_breaks: next.into_iter().collect(),
                    recorded: opens,
                    ..Effects::default()
                };
                Ok((Acked::Lease(state), fx))
            }
        }
    }

    fn undeliverable(&self, what: Undelivered<'_>) {
        match what {
            Undelivered::Oplock { key, open_id } => self.oplock_undeliverable(key, open_id),
            Undelivered::Lease(notice) => self.lease_undeliverable(notice),
            Undelivered::LeaseWithheld(notice) => self.lease_withheld(notice),
            Undelivered::Open { key, open_id } => self.complete_breaks(key, open_id),
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

    fn unheard_breaks(&self, key: FileKey, open_id: u64) -> Effects {
        let mut fx = Effects::default();
        match self.caching_of(key, open_id).1 {
            Some((lease, _)) => fx.lease_breaks.extend(self.break_in_progress(key, &lease)),
            None => fx
                .oplock_breaks
                .extend(self.oplock_break_in_progress(key, open_id)),
        }
        fx
    }

    fn restore(&self, key: FileKey, open_id: u64, held: Restored<'_>) -> Result<(), String> {
        if !self.restore_caching(key, open_id, held.oplock, (held.lease, held.is_dir)) {
            return Err("its lease key is another file's".into());
        }
        for &(offset, length, exclusive) in held.locks {
            self.try_lock(key, open_id, offset, length, exclusive)
                .map_err(|s| format!("its lock no longer fits ({s:?})"))?;
        }
        Ok(())
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

    fn query(&self, key: FileKey, look: &mut dyn FnMut(FileView<'_>)) {
        self.view(key, look)
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
        self.view(key, |v| v.delete_pending())
    }

    fn lease_opens(&self, lease: &LeaseKey) -> Vec<u64> {
        FileStates::lease_opens(self, lease)
    }

    fn check(&self, key: FileKey, access: u32, share_access: u32) -> Result<(), NtStatus> {
        self.view(key, |v| v.check(access, share_access))
    }

    fn any_open_below(&self, dir: &RelPath, except: FileKey) -> bool {
        FileStates::any_open_below(self, dir, except)
    }

    fn lease_elsewhere(&self, lease: &LeaseKey, key: FileKey) -> bool {
        FileStates::lease_elsewhere(self, lease, key)
    }

    fn any_dir_leases(&self) -> bool {
        FileStates::any_dir_leases(self)
    }

    fn opens_below(
        &self,
        dir: &RelPath,
        except: FileKey,
        which: Below,
    ) -> Option<Vec<(FileKey, Vec<u64>)>> {
        FileStates::opens_below(self, dir, except, which)
    }
}
