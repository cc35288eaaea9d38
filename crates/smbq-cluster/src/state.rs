//! The open state of a cluster node: this node's own table, asked first, and etcd for what
//! crosses nodes (crate::store). Every verb not named here is the local table's alone.
//!
//! - **Admission** (MS-FSA 2.1.5.1.2): the local table admits against this node's opens,
//!   then etcd against every other node's (DELETE_PENDING, SHARING_VIOLATION); a refusal
//!   there takes the local admission back.
//! - **Caching:** an open may cache (an oplock, a lease with a state) only while no other node
//!   has the file open; its record says so. Another node's admission then asks this node to
//!   break it (crate::breaks) and waits for the acknowledgment, as one server does.
//! - **Byte-range locks** (MS-FSA 2.1.5.7): local first, then against other nodes' locks.
//! - **Delete-pending** (MS-FSA 2.1.5.15.3, 2.1.5.4): set in etcd; the file is unlinked by
//!   whichever node closes its last open in the cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smbq_server::file_state::lease::{Granted, LeaseAsk, LeaseKey};
use smbq_server::file_state::oplock::{Level, Owner};
use smbq_server::file_state::{FileKey, FileView, LastClose, NewOpen, OpenRequest};
use smbq_server::open_state::{
    Ack, Acked, Below, BreakWait, Change, Changes as _, Effects, LockOp, OpenState, Queries as _,
    Restored, Undelivered, WaitToken,
};
use smbq_vfs::RelPath;
use smbq_wire::NtStatus;
use tokio::sync::Notify;

use crate::Cluster;
use crate::budget::Budget;
use crate::remote::RemoteView;
use crate::store::{Admitted, BREAK_WAIT};

pub(crate) struct ClusterState {
    cluster: Arc<Cluster>,
    local: Arc<dyn OpenState>,
    /// Other nodes' locks, for READ and WRITE (crate::remote).
    remote: Arc<RemoteView>,
    /// This node's opens admitted in etcd: when, and whether alone (they may cache). One
    /// entry per open, gone at its release.
    admitted: Mutex<HashMap<(FileKey, u64), Admitted>>,
    /// The records this node holds in etcd, capped (crate::budget).
    budget: Budget,
    /// Persistent opens being held here again (admitted, their locks not yet in the local
    /// table): READ and WRITE meet their holds' locks until the table has them.
    restoring: Mutex<std::collections::HashSet<(FileKey, u64)>>,
}

/// How long an admitted open waits for this node's view to reach its admission.
pub(crate) const VIEW_WAIT: Duration = Duration::from_secs(2);

impl ClusterState {
    pub(crate) fn new(
        cluster: Arc<Cluster>,
        local: Arc<dyn OpenState>,
        remote: Arc<RemoteView>,
        max_records: usize,
    ) -> ClusterState {
        ClusterState {
            cluster,
            local,
            remote,
            admitted: Mutex::default(),
            budget: Budget::new(max_records),
            restoring: Mutex::default(),
        }
    }

    fn restoring(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<(FileKey, u64)>> {
        self.restoring.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn admitted(&self) -> std::sync::MutexGuard<'_, HashMap<(FileKey, u64), Admitted>> {
        self.admitted.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes open `open_id`'s records in etcd once etcd takes it.
    fn release_later(&self, key: FileKey, open_id: u64) {
        self.cluster.retry_later("release", move |s| async move {
            s.release(key, open_id, (false, false), None)
                .await
                .map(|_| ())
        });
    }

    /// Grants what `grant` says with caching if open `open_id` may cache, and without
    /// otherwise: MS-SMB2 3.3.5.9.8 across nodes. It may while no other node had the file
    /// open at its admission and no other node asked for a break since (under the gate, so
    /// a break request is either seen here or breaks what this grants).
    fn granting<T>(&self, key: FileKey, open_id: u64, grant: impl FnOnce(bool) -> T) -> T {
        let admitted = self.admitted().get(&(key, open_id)).copied();
        let _gate = self.remote.gate.lock().unwrap_or_else(|e| e.into_inner());
        let may = admitted.is_some_and(|a| a.alone && !self.remote.contended_since(key, a.rev));
        grant(may)
    }
}

impl ClusterState {
    /// Whether another node has a file open below `dir`; when etcd cannot say, yes (a
    /// directory rename is refused rather than move files from under another node's opens).
    /// A file made delete-pending here, or no longer so, for the other nodes. The door
    /// cannot refuse it (the local table decided); a failure is logged and the mark is carried
    /// at close instead (`release` records it for the other nodes).
    fn share_delete_pending(&self, key: FileKey, pending: bool) {
        let r = self
            .cluster
            .decide(move |s| async move { s.set_delete_pending(key, pending).await });
        if let Err(e) = r {
            tracing::warn!(status = ?e, "delete-pending not shared with the other nodes");
        }
    }

    /// A renamed open's record in etcd follows the local table, for other nodes' directory
    /// renames (`any_open_below`).
    fn share_path(&self, key: FileKey, open_id: u64) {
        let Some(path) = self.local.path(key) else {
            return;
        };
        let path = path.to_string();
        let r = self.cluster.decide(move |s| {
            let path = path.clone();
            async move { s.set_path(key, open_id, path).await }
        });
        if let Err(e) = r {
            tracing::warn!(status = ?e, "renamed open's path not shared with the other nodes");
        }
    }

    /// A deleted file's mark and its closing open's record would refuse a later file that
    /// gets the same inode number: they go from etcd, now or once etcd takes it.
    fn forget(&self, key: FileKey) {
        let r = self
            .cluster
            .decide(move |s| async move { s.forget(key).await });
        if r.is_err() {
            self.cluster
                .retry_later("forget", move |s| async move { s.forget(key).await });
        }
    }

    fn remote_open_below(&self, dir: &RelPath, except: FileKey) -> bool {
        let dir = dir.to_string();
        self.cluster
            .decide(move |s| {
                let dir = dir.clone();
                async move { s.any_open_below(dir, except).await }
            })
            .unwrap_or(true)
    }
}

impl OpenState for ClusterState {
    fn contend(
        &self,
        key: FileKey,
        intent: &OpenRequest<'_>,
        now: Instant,
    ) -> Result<Effects, NtStatus> {
        self.local.contend(key, intent, now)
    }

    fn admit(&self, key: FileKey, new: &NewOpen<'_>) -> Result<(), NtStatus> {
        if !self.budget.take() {
            tracing::warn!("open refused: this node holds [cluster] max_records in etcd");
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        // An open held here again is marked before the local table has it: from then until
        // its locks are restored, READ and WRITE meet its hold's locks (Self::check_io). Marked
        // after the admission, a READ in between (an etcd round trip) went through the range.
        if new.restoring {
            self.restoring().insert((key, new.open_id));
        }
        if let Err(e) = self.local.admit(key, new) {
            self.restoring().remove(&(key, new.open_id));
            self.budget.give_back();
            return Err(e);
        }
        let (id, path) = (new.open_id, new.path.to_string());
        let modes = (new.checked, new.access, new.share_access);
        let restoring = new.restoring;
        let admitted = self.cluster.decide_within(BREAK_WAIT, move |s| {
            let path = path.clone();
            async move { s.admit(key, id, modes, (path, restoring)).await }
        });
        let r = match admitted {
            // Every lock taken on another node before this admission is in view before the
            // open's first READ or WRITE (crate::remote).
            Ok(a) if self.remote.wait_applied(a.rev, VIEW_WAIT) => {
                self.admitted().insert((key, id), a);
                Ok(())
            }
            Ok(a) => {
                let gone = self.cluster.decide(move |s| async move {
                    s.release(key, id, (false, false), Some(a)).await
                });
                if gone.is_err() {
                    self.release_later(key, id);
                }
                Err(NtStatus::SERVER_UNAVAILABLE)
            }
            Err(NtStatus::SERVER_UNAVAILABLE) => {
                // It may have been recorded before the time ran out.
                self.release_later(key, id);
                Err(NtStatus::SERVER_UNAVAILABLE)
            }
            Err(e) => Err(e),
        };
        if r.is_err() {
            // Not admitted after all: nothing of it may stay here either.
            let _ = self.local.release(key, new.open_id, false, None);
            self.restoring().remove(&(key, new.open_id));
            self.budget.give_back();
        }
        r
    }

    /// MS-SMB2 3.3.5.9.8: the oplock of the local table's rules, if this node may cache the
    /// file at all (no other node has it open; crate::store::Store::may_cache).
    fn grant_oplock(
        &self,
        key: FileKey,
        open_id: u64,
        requested: Level,
        stat_only: bool,
        owner: Owner,
    ) -> Level {
        self.granting(key, open_id, |may| {
            let level = if may { requested } else { Level::None };
            self.local
                .grant_oplock(key, open_id, level, stat_only, owner)
        })
    }

    /// A lease as the local table grants it, if this node may cache the file; otherwise a
    /// lease with no caching (MS-SMB2 3.3.5.9.8 lets the server grant less than asked).
    /// Directory leases cache nothing here: changes made through other nodes do not break
    /// them.
    fn grant_lease(
        &self,
        key: FileKey,
        open: (u64, u64),
        ask: &LeaseAsk,
        dir_and_size: (bool, u64),
    ) -> Option<Granted> {
        self.granting(key, open.0, |may| {
            let cache = may && !dir_and_size.0;
            let ask = LeaseAsk {
                requested: if cache { ask.requested } else { 0 },
                ..*ask
            };
            self.local.grant_lease(key, open, &ask, dir_and_size)
        })
    }

    /// The local table decides; delete-pending, a rename and a deletion are also told to
    /// the other nodes (through etcd).
    fn on_change(&self, key: FileKey, change: Change<'_>, now: Instant) -> Effects {
        match change {
            Change::Disposition { pending, .. } => {
                let fx = self.local.on_change(key, change, now);
                self.share_delete_pending(key, pending);
                fx
            }
            Change::Renamed { open_id, .. } => {
                let fx = self.local.on_change(key, change, now);
                self.share_path(key, open_id);
                fx
            }
            Change::Deleted => {
                let fx = self.local.on_change(key, change, now);
                self.forget(key);
                fx
            }
            other => self.local.on_change(key, other, now),
        }
    }

    fn on_lock(
        &self,
        key: FileKey,
        owner: u64,
        range: (u64, u64),
        op: LockOp,
        now: Instant,
    ) -> (Result<(), NtStatus>, Effects) {
        let (r, fx) = self.local.on_lock(key, owner, range, op, now);
        if r.is_err() {
            return (r, fx);
        }
        let exclusive = match op {
            LockOp::Lock { exclusive } | LockOp::Retry { exclusive } => exclusive,
            LockOp::Unlock => {
                // Unlocked here already: the record follows, now or later.
                self.budget.unlocked(key, owner);
                let r = self
                    .cluster
                    .decide(move |s| async move { s.unlock(key, owner, range).await });
                if r.is_err() {
                    self.cluster.retry_later("unlock", move |s| async move {
                        s.unlock(key, owner, range).await
                    });
                }
                return (Ok(()), fx);
            }
        };
        let lock = (range.0, range.1, exclusive);
        let r = if self.budget.take() {
            let r = self
                .cluster
                .decide(move |s| async move { s.lock(key, owner, lock).await });
            match r {
                // A close meanwhile already gave its locks back: this one with them.
                Ok(()) if self.admitted().contains_key(&(key, owner)) => {
                    self.budget.locked(key, owner)
                }
                _ => self.budget.give_back(),
            }
            r
        } else {
            tracing::warn!("lock refused: this node holds [cluster] max_records in etcd");
            Err(NtStatus::INSUFFICIENT_RESOURCES)
        };
        if r.is_err() {
            // Refused elsewhere: the local grant is taken back (its breaks stand, as for a
            // refused lock: MS-FSA 2.1.5.7 breaks before the conflict check).
            let _ = self.local.on_lock(key, owner, range, LockOp::Unlock, now);
        }
        (r, fx)
    }

    /// Another node has the file open: its client reads what this node flushed.
    fn shared_elsewhere(&self, key: FileKey) -> bool {
        self.remote.opened_elsewhere(key)
    }

    fn acknowledge(&self, ack: Ack<'_>, now: Instant) -> Result<(Acked, Effects), NtStatus> {
        self.local.acknowledge(ack, now)
    }

    fn undeliverable(&self, what: Undelivered<'_>) {
        self.local.undeliverable(what)
    }

    /// The local close, then etcd's: a file delete-pending here whose other opens are on
    /// other nodes stays for them (the last of them deletes it); a file another node made
    /// delete-pending is deleted here when this was its last open anywhere.
    fn release(
        &self,
        key: FileKey,
        open_id: u64,
        delete_on_close: bool,
        parent: Option<[u8; 16]>,
    ) -> Option<LastClose> {
        let last = self.local.release(key, open_id, delete_on_close, parent);
        self.restoring().remove(&(key, open_id));
        if self.local.open_count_any(key) == 0 {
            self.remote.forget(key);
        }
        let pending = delete_on_close || last.as_ref().is_some_and(|l| l.delete);
        let admitted = self.admitted().remove(&(key, open_id));
        self.budget.released(key, open_id, admitted.is_some());
        // This node unlinks the file only on its local table's last close of it.
        let unlinks = last.is_some();
        let r = self.cluster.decide(move |s| async move {
            s.release(key, open_id, (pending, unlinks), admitted).await
        });
        let last_anywhere = match r {
            Ok(released) => released.last.then_some(released.delete_pending),
            Err(e) => {
                // Recorded later (`release_later`); meanwhile the file is not deleted under
                // another node's open that this node cannot see.
                tracing::warn!(status = ?e, "close not yet recorded in etcd");
                self.release_later(key, open_id);
                None
            }
        };
        let l = last?;
        match last_anywhere {
            // The last open in the cluster: delete-pending anywhere means delete now.
            Some(pending_anywhere) => Some(LastClose {
                delete: l.delete || pending_anywhere,
                ..l
            }),
            // Other nodes' opens keep the file (etcd holds its delete-pending mark for them);
            // here it is no longer open, so this table forgets it.
            None if l.delete => {
                self.local.deleted(key);
                Some(LastClose { delete: false, ..l })
            }
            None => Some(l),
        }
    }

    fn reclaim(
        &self,
        key: FileKey,
        open: (u64, u64),
        lease_epoch: Option<u16>,
        away: &dyn Fn(u64) -> bool,
    ) {
        self.local.reclaim(key, open, lease_epoch, away)
    }

    fn unheard_breaks(&self, key: FileKey, open_id: u64) -> Effects {
        self.local.unheard_breaks(key, open_id)
    }

    /// A persistent open held again (after this node's restart, or taken over from a node
    /// that died; crate::ca): admitted already, it caches only if alone in the cluster, as
    /// at a grant, and its locks are recorded for the other nodes' LOCKs and I/O.
    fn restore(&self, key: FileKey, open_id: u64, held: Restored<'_>) -> Result<(), String> {
        let alone = self
            .admitted()
            .get(&(key, open_id))
            .is_some_and(|a| a.alone);
        let held = if alone {
            held
        } else {
            Restored {
                oplock: (Level::None, held.oplock.1),
                lease: held.lease.map(|(k, _, epoch)| (k, 0, epoch)),
                ..held
            }
        };
        let restored = self.local.restore(key, open_id, held);
        self.restoring().remove(&(key, open_id));
        restored?;
        for &lock in held.locks {
            if !self.budget.take() {
                return Err("this node holds [cluster] max_records in etcd".into());
            }
            let r = self
                .cluster
                .decide(move |s| async move { s.lock(key, open_id, lock).await });
            if let Err(e) = r {
                self.budget.give_back();
                return Err(format!("its lock at {} is not granted ({e:?})", lock.0));
            }
            self.budget.locked(key, open_id);
        }
        Ok(())
    }

    fn break_wait(&self, token: WaitToken, now: Instant) -> BreakWait {
        self.local.break_wait(token, now)
    }

    fn changed(&self, key: FileKey) -> &Notify {
        self.local.changed(key)
    }

    fn query(&self, key: FileKey, look: &mut dyn FnMut(FileView<'_>)) {
        self.local.query(key, look)
    }

    fn check_io(
        &self,
        key: FileKey,
        owner: u64,
        range: (u64, u64),
        write: bool,
    ) -> Result<(), NtStatus> {
        self.local.check_io(key, owner, range, write)?;
        // MS-FSA 2.1.4.10 against other nodes' locks, from this node's view: no etcd here.
        // A persistent hold of an open in this node's own table was checked just above
        // (unless the open is still being held here again, its locks not yet in the table).
        let local = |id: u64| {
            id == owner
                || (self.local.open_ids(key).contains(&id)
                    && !self.restoring().contains(&(key, id)))
        };
        if self.remote.io_conflict(key, range, write, local) {
            return Err(NtStatus::FILE_LOCK_CONFLICT);
        }
        Ok(())
    }

    /// Here, or on another node as this node's watch has seen it (no etcd round trip per
    /// query; an admission asks etcd itself).
    fn delete_pending(&self, key: FileKey) -> bool {
        self.local.delete_pending(key) || self.remote.delete_pending(key)
    }

    fn lease_opens(&self, lease: &LeaseKey) -> Vec<u64> {
        self.local.lease_opens(lease)
    }

    fn check(&self, key: FileKey, access: u32, share_access: u32) -> Result<(), NtStatus> {
        self.local.check(key, access, share_access)?;
        self.cluster
            .decide(move |s| async move { s.check(key, access, share_access).await })
    }

    fn any_open_below(&self, dir: &RelPath, except: FileKey) -> bool {
        self.local.any_open_below(dir, except) || self.remote_open_below(dir, except)
    }

    fn lease_elsewhere(&self, lease: &LeaseKey, key: FileKey) -> bool {
        self.local.lease_elsewhere(lease, key)
    }

    fn any_dir_leases(&self) -> bool {
        self.local.any_dir_leases()
    }

    fn opens_below(
        &self,
        dir: &RelPath,
        except: FileKey,
        which: Below,
    ) -> Option<Vec<(FileKey, Vec<u64>)>> {
        // Opens below on another node are of no kind a rename may move along.
        if self.remote_open_below(dir, except) {
            return None;
        }
        self.local.opens_below(dir, except, which)
    }
}
