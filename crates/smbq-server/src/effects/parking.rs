//! How opens enter and leave the durable store: a lost connection parks its sessions'
//! durable opens and closes the rest (MS-SMB2 3.3.7.1); a timer closes an open its client did
//! not come back for (3.3.2.4 Durable Open Scavenger Timer); a break that can no longer be
//! delivered purges the open instead of holding the file (smbtorture smb2.durable-open.oplock,
//! as Windows does).

use std::sync::Arc;
use std::time::Instant;

use crate::Server;
use crate::open_state::{Queries as _, Undelivered};
use crate::tables::Open;

impl Server {
    /// Session `session_id` lost its connection (or a reconnect named it as its
    /// PreviousSessionId): it ends like [`session_ended`](Self::session_ended), except that
    /// its durable opens are parked for their clients instead of closed.
    pub fn session_lost(&self, session_id: u64) {
        self.end_session(session_id, true);
    }

    /// Moves a durable open out of the live tables into the store; false (nothing changed)
    /// for an open that is not durable or does not fit the store's limits.
    pub(crate) fn park_open(&self, id: u64) -> bool {
        let Some(open) = self.lookup_open(id) else {
            return false;
        };
        let Some(grant) = open.durable.lock().clone() else {
            return false;
        };
        // An open whose oplock or lease is being broken can no longer acknowledge: another
        // open waits for it, so it is closed now rather than kept (as a purge would). A
        // resilient open is kept anyway, its break completed here (MS-SMB2 3.3.7.1); a
        // persistent one is kept as it is, its break waiting for its client
        // (crate::durable::persistent).
        if let Some(f) = open.file()
            && !grant.persistent
            && self.open_state().breaking_opens(f.key).contains(&id)
        {
            if !grant.resilient {
                return false;
            }
            self.open_state().undeliverable(Undelivered::Open {
                key: f.key,
                open_id: id,
            });
        }
        let timeout = grant.timeout;
        let limits = self.limits();
        let caps = (limits.max_durable_opens, limits.max_durable_opens_per_user);
        // The slot stays reserved: the id keys the open's share mode, locks and oplock.
        if let Some(slot) = self.opens.write().get_mut(id) {
            *slot = None;
        }
        if let Some(s) = self.existing_session(open.session_id) {
            s.remove_open(id);
        }
        match self.durable.park(open, grant, Instant::now(), caps) {
            Ok(generation) => {
                // What it holds as its client left it (crate::persist).
                if let Some(p) = self.durable.parked_open(id) {
                    self.persist(&p);
                }
                tracing::info!(
                    open = id,
                    timeout_s = timeout.as_secs(),
                    "durable open kept for its client"
                );
                self.arm_scavenger(id, generation, timeout);
                true
            }
            Err(refused) => {
                let (open, why) = *refused;
                tracing::info!(open = id, ?why, "durable open closed: the store is full");
                self.install_open(open);
                false
            }
        }
    }

    /// Closes the parked open `id` when its timeout passes, if it is still that parking.
    fn arm_scavenger(&self, id: u64, generation: u64, after: std::time::Duration) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let me = self.me.clone();
        rt.spawn(async move {
            tokio::time::sleep(after).await;
            let Some(srv) = me.upgrade() else {
                return;
            };
            // Closing may unlink a delete-on-close file.
            let _ = tokio::task::spawn_blocking(move || {
                if let Some(p) = srv.durable.take_expired(id, generation, Instant::now()) {
                    tracing::info!(open = id, "durable open timed out");
                    srv.close_parked(&p.open);
                }
            })
            .await;
        });
    }

    /// Closes the parked open `id` now (another open needs its oplock or lease broken and
    /// its client cannot hear the break); false if `id` is not parked.
    /// A parked resilient open is not closed: its break completes at once instead (MS-SMB2
    /// 3.3.4.6; it keeps its share mode and locks for its timeout, as Windows does); true
    /// then too. Nor is a parked persistent open: its break waits for its client
    /// (crate::durable::persistent); true.
    pub(crate) fn purge_parked(&self, id: u64) -> bool {
        if self.durable.is_persistent(id) {
            return true;
        }
        if let Some(open) = self.durable.resilient(id) {
            if let Some(f) = open.file() {
                self.open_state().undeliverable(Undelivered::Open {
                    key: f.key,
                    open_id: id,
                });
            }
            return true;
        }
        match self.durable.take(id) {
            Some(p) => {
                tracing::info!(open = id, "durable open purged by a conflicting open");
                self.close_parked(&p.open);
                true
            }
            None => false,
        }
    }

    pub(crate) fn durable_store(&self) -> &crate::durable::DurableStore {
        &self.durable
    }

    /// Closes an open taken out of the store.
    pub(crate) fn close_parked_now(&self, open: &Arc<Open>) {
        self.close_parked(open);
    }

    /// Releases what a parked open holds (share mode, locks, oplock, lease, delete-on-close)
    /// and frees its id.
    fn close_parked(&self, open: &Arc<Open>) {
        self.apply(self.release_open(open));
        self.cancel_reservation(open.volatile());
    }

    /// Durable opens waiting for their clients.
    pub fn parked_opens(&self) -> usize {
        self.durable.len()
    }

    /// Open ids in use (live, reserved by a CREATE in progress, or kept for a parked open).
    #[cfg(test)]
    pub(crate) fn open_slots_in_use(&self) -> usize {
        self.opens.read().len()
    }
}
