//! Where the owners' decisions meet the rest of the server. The per-file state
//! ([`crate::file_state`]), the durable store ([`crate::durable`]) and the change-notify hub
//! ([`crate::notify`]) decide; they never reach back into [`crate::Server`]. What they decide
//! (breaks to send to a session, opens to purge or park, notify events to report, directory
//! leases to break) is carried out here, after the handler that asked.

mod breaks;
mod dir_leases;
mod leases;
mod locks;
mod notify;
mod parking;
mod resilient;

use std::cell::RefCell;
use std::future::Future;

use crate::Server;
use crate::open_state::{Effects, Queries as _, WaitToken};

tokio::task_local! {
    /// What the running request's handler left to carry out once its answer is out.
    static AFTER_ANSWER: RefCell<Effects>;
}

/// Runs a request's handler (`f`), keeping what it hands to [`Server::after_answer`] for the
/// connection to carry out after it has queued the answer (crate::conn).
pub(crate) async fn answering_first<F: Future>(f: F) -> (F::Output, Effects) {
    AFTER_ANSWER
        .scope(RefCell::new(Effects::default()), async {
            let out = f.await;
            let after = AFTER_ANSWER.with(|a| a.take());
            (out, after)
        })
        .await
}

impl Server {
    /// Carries out what an [`OpenState`](crate::open_state::OpenState) verb decided: the
    /// breaks go to their sessions, the disconnected durable opens that can no longer answer
    /// are purged, and the persistent opens whose state changed are written to the store
    /// (crate::persist) before the handler answers. Returns the wait the request must make,
    /// if any ([`Self::oplock_wait`]).
    pub(crate) fn apply(&self, fx: Effects) -> Option<WaitToken> {
        self.send_breaks(&fx.oplock_breaks);
        self.send_lease_breaks(&fx.lease_breaks);
        for id in fx.purge {
            self.purge_parked(id);
        }
        self.persist_opens(&fx.recorded);
        for key in fx.flush {
            self.flush_file(key);
        }
        fx.wait
    }

    /// Puts what this server's opens of `key` wrote on stable storage ([`Effects::flush`]):
    /// another server is taking the file over. A failure is logged; the other server's
    /// client may then read older data, as after a crash of this one.
    fn flush_file(&self, key: crate::file_state::FileKey) {
        for id in self.open_state().open_ids(key) {
            let Some(open) = self.lookup_open(id) else {
                continue;
            };
            if let Some(f) = open.file()
                && let Err(e) = f.file.fdatasync()
            {
                tracing::warn!(error = %e, "flush for another node failed");
            }
        }
    }

    /// Carries out effects an open-state implementation decided outside any request here: a
    /// cluster node's breaks for an open on another node (smbq-cluster). The wait, if any, is
    /// the caller's to make (`open_state::break_wait`).
    pub fn apply_effects(&self, fx: Effects) {
        let _ = self.apply(fx);
    }

    /// Breaks a request causes that need not wait (the directory leases a change inside the
    /// directory breaks) go out after its answer, as Samba sends them: a CLOSE that deletes
    /// the file answers first, then the directory's leases break (smbtorture
    /// smb2.dirlease.unlink_different_*: a client that holds several of them hears the second
    /// break while it acknowledges the first), and a rename answers before its directory's
    /// leases break (smb2.dirlease.rename). Outside a request task (tests, the admin socket,
    /// a blocking thread) they go at once.
    pub(crate) fn after_answer(&self, fx: Effects) {
        if fx.is_empty() {
            return;
        }
        if fx.wait.is_some() {
            self.apply(fx);
            return;
        }
        // Records are written before the answer, whatever the breaks wait for.
        let mut fx = fx;
        self.persist_opens(&std::mem::take(&mut fx.recorded));
        let mut fx = Some(fx);
        let _ = AFTER_ANSWER.try_with(|a| {
            if let Some(f) = fx.take() {
                a.borrow_mut().merge(f);
            }
        });
        if let Some(fx) = fx {
            self.apply(fx);
        }
    }
}
