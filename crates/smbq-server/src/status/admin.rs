//! What an administrator may do through `smbq status` (issue 17): end a session, close an
//! open. Both are logged by the caller with who asked.

use std::time::SystemTime;

use super::{Protection, SessionShown};
use crate::Server;

impl Server {
    /// Records what session `session_id` was established with, for status reports.
    pub fn session_protection(&self, session_id: u64, p: Protection, encrypt_required: bool) {
        if let Some(st) = self.existing_session(session_id) {
            let mut shown = st.shown.lock();
            let started = shown.as_ref().map_or_else(SystemTime::now, |s| s.started);
            *shown = Some(SessionShown {
                protection: p,
                encrypt_required,
                started,
            });
        }
    }

    /// Ends session `id` as a LOGOFF would, except that its durable opens are closed too (an
    /// administrator who ends a session wants its files released). Its connections stay;
    /// their next request on it gets USER_SESSION_DELETED and the client may log on again.
    /// False when no such session is live. Blocking: a file deleted on close is removed here.
    pub fn kill_session(&self, id: u64) -> bool {
        if self.sessions.get(id).is_none_or(|r| r.has_ended()) {
            return false;
        }
        self.session_ended(id);
        true
    }

    /// Closes open `id` (its volatile FileId) as a CLOSE would: share modes, locks and its
    /// oplock or lease go, and its client's next request on it gets FILE_CLOSED. A parked
    /// durable open is closed too. False when there is no such open. Blocking like
    /// [`kill_session`](Self::kill_session).
    pub fn close_file(&self, id: u64) -> bool {
        if self.close_open_by_id(id).is_some() {
            return true;
        }
        match self.durable_store().take(id) {
            Some(p) => {
                self.close_parked_now(&p.open);
                true
            }
            None => false,
        }
    }
}
