//! The sessions of each client, as its ClientGuid names it (MS-SMB2 3.3.1.7
//! Connection.ClientGuid), in the order they were established: where a lease break goes.
//!
//! A lease belongs to the client, not to a session or a connection (MS-SMB2 3.3.1.11: the
//! lease table is per ClientGuid; a Lease Break Notification carries SessionId 0). Windows
//! sends it on the client's first connection, even when the lease's only open came through
//! another one: smbtorture's `smb2.lease.v2_complex1` (written against Windows in 2014, Samba
//! commit 45c98b8069f; the connection check is skipped only for Samba targets, commit
//! a9d46264ab3) expects the break of a lease opened on the second connection on the first.
//! So a break goes to the oldest live session of the client **of the same user** as the
//! open's session: a ClientGuid is only what a client claims, and another account presenting
//! the same one must not receive, and so withhold, someone else's breaks.

use std::collections::HashMap;

use parking_lot::Mutex;

/// ClientGuid → its sessions, oldest first. Bounded by the live sessions: a session is added
/// when established and removed when it ends.
#[derive(Default)]
pub(crate) struct Clients {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<[u8; 16], Vec<u64>>,
    client_of: HashMap<u64, [u8; 16]>,
}

impl Clients {
    /// Session `session_id` was established (or bound) on a connection of client `guid`.
    pub(crate) fn add(&self, guid: [u8; 16], session_id: u64) {
        let mut g = self.inner.lock();
        if g.client_of.contains_key(&session_id) {
            return;
        }
        g.client_of.insert(session_id, guid);
        g.sessions.entry(guid).or_default().push(session_id);
    }

    /// Session `session_id` ended.
    pub(crate) fn remove(&self, session_id: u64) {
        let mut g = self.inner.lock();
        let Some(guid) = g.client_of.remove(&session_id) else {
            return;
        };
        if let Some(list) = g.sessions.get_mut(&guid) {
            list.retain(|s| *s != session_id);
            if list.is_empty() {
                g.sessions.remove(&guid);
            }
        }
    }

    /// The sessions of client `guid`, oldest first.
    pub(crate) fn sessions_of(&self, guid: &[u8; 16]) -> Vec<u64> {
        self.inner
            .lock()
            .sessions
            .get(guid)
            .cloned()
            .unwrap_or_default()
    }

    /// How many sessions are known (tests: nothing is left behind).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().client_of.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_kept_per_client_oldest_first_and_forgotten_when_they_end() {
        let c = Clients::default();
        c.add([1; 16], 10);
        c.add([2; 16], 11);
        c.add([1; 16], 12);
        c.add([1; 16], 10); // a second channel of the same session
        assert_eq!(c.sessions_of(&[1; 16]), vec![10, 12]);
        assert_eq!(c.sessions_of(&[2; 16]), vec![11]);
        c.remove(10);
        assert_eq!(c.sessions_of(&[1; 16]), vec![12]);
        c.remove(11);
        c.remove(12);
        c.remove(12);
        assert!(c.sessions_of(&[1; 16]).is_empty());
        assert_eq!(c.len(), 0);
        assert!(c.inner.lock().sessions.is_empty());
    }
}
