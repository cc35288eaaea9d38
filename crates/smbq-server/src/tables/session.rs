//! What the server keeps per authenticated session (the engine owns the session itself):
//! its tree connects and the ids of its opens (MS-SMB2 3.3.1.8 TreeConnectTable, OpenTable).

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

use super::slab::GenSlab;
use super::tree::Tree;
use crate::security::Token;

/// TreeIds are 32 bits: 16 of generation, 16 of index (index 0xFFFF is never used, so the
/// reserved TreeId 0xFFFFFFFF cannot be produced).
const TREE_INDEX_BITS: u32 = 16;

#[derive(Debug)]
pub struct SessionState {
    pub id: u64,
    trees: Mutex<GenSlab<Arc<Tree>>>,
    opens: Mutex<HashSet<u64>>,
    /// Set by `end_opens` under the `opens` lock.
    ended: std::sync::atomic::AtomicBool,
    max_opens: usize,
    /// The session's security token, with the identity it was computed for (a
    /// re-authentication may only keep the same user, but the cache never assumes it).
    token: Mutex<Option<CachedToken>>,
    /// The last opens CLOSEd, with the CLOSE's MessageId (at most [`RECENT_CLOSES`]): a
    /// request sent before that CLOSE but run after it is answered as if it had run first.
    closed_recently: Mutex<std::collections::VecDeque<(u64, u64)>>,
    /// One server-side copy at a time per session: a copy that cannot go through
    /// copy_file_range holds a 1 MiB buffer on a blocking thread, which the request's small
    /// credit charge does not pay for, so concurrency is bounded here instead (sessions are
    /// bounded per connection).
    copies: tokio::sync::Semaphore,
    /// What `smbq status` shows of it (crate::status), set when it is established.
    pub(crate) shown: Mutex<Option<crate::status::SessionShown>>,
    /// Its account's Unix user, looked up at its first request on a per-user share
    /// (crate::unix_identity); a session's user never changes.
    pub(crate) unix: std::sync::OnceLock<Option<Arc<crate::unix_identity::UnixIdentity>>>,
}

/// A computed token, with the identity and Unix uid (per-user shares) it was computed for.
type CachedToken = (smbq_auth::Identity, Option<u32>, Arc<Token>);

/// How many CLOSEs a session remembers for [`SessionState::closed_after`].
const RECENT_CLOSES: usize = 32;

fn slab_to_tree_id(id: u64) -> u32 {
    (((id >> 32) as u32) << TREE_INDEX_BITS) | (id as u32 & 0xFFFF)
}

fn tree_id_to_slab(id: u32) -> u64 {
    (u64::from(id >> TREE_INDEX_BITS) << 32) | u64::from(id & 0xFFFF)
}

impl SessionState {
    pub fn new(id: u64, max_trees: usize, max_opens: usize) -> Self {
        let max_trees = u32::try_from(max_trees).unwrap_or(u32::MAX).min(0xFFFE);
        Self {
            id,
            trees: Mutex::new(GenSlab::with_generations(max_trees, 0xFFFF)),
            opens: Mutex::new(HashSet::new()),
            ended: std::sync::atomic::AtomicBool::new(false),
            max_opens,
            token: Mutex::new(None),
            closed_recently: Mutex::new(std::collections::VecDeque::new()),
            copies: tokio::sync::Semaphore::new(1),
            shown: Mutex::new(None),
            unix: std::sync::OnceLock::new(),
        }
    }

    /// Waits for the session's one server-side copy slot (see the field); `None` only if the
    /// semaphore was closed, which never happens.
    pub async fn copy_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.copies.acquire().await.ok()
    }

    /// A CLOSE with MessageId `close_mid` of open `volatile` is starting.
    pub fn note_closing(&self, volatile: u64, close_mid: u64) {
        let mut r = self.closed_recently.lock();
        if r.len() >= RECENT_CLOSES {
            r.pop_front();
        }
        r.push_back((volatile, close_mid));
    }

    /// Whether open `volatile` was closed by a CLOSE sent after the request `mid`.
    pub fn closed_after(&self, volatile: u64, mid: u64) -> bool {
        self.closed_recently
            .lock()
            .iter()
            .any(|&(v, c)| v == volatile && c > mid)
    }

    /// Adds a tree built by `make` from its new id; `None` when the session has too many.
    pub fn add_tree(&self, make: impl FnOnce(u32) -> Tree) -> Option<Arc<Tree>> {
        let mut trees = self.trees.lock();
        let id = trees.insert_with(|id| Arc::new(make(slab_to_tree_id(id))))?;
        trees.get(id).cloned()
    }

    pub fn tree(&self, id: u32) -> Option<Arc<Tree>> {
        self.trees.lock().get(tree_id_to_slab(id)).cloned()
    }

    pub fn remove_tree(&self, id: u32) -> Option<Arc<Tree>> {
        self.trees.lock().remove(tree_id_to_slab(id))
    }

    /// The session's trees now, for `smbq status`.
    pub fn trees(&self) -> Vec<Arc<Tree>> {
        self.trees.lock().iter().map(|(_, t)| t.clone()).collect()
    }

    pub fn take_trees(&self) -> Vec<Arc<Tree>> {
        let mut trees = self.trees.lock();
        let ids: Vec<u64> = trees.iter().map(|(id, _)| id).collect();
        ids.into_iter().filter_map(|id| trees.remove(id)).collect()
    }

    /// Records a new open; false when the per-session limit is reached.
    pub fn add_open(&self, open_id: u64) -> bool {
        let mut opens = self.opens.lock();
        if self.ended.load(std::sync::atomic::Ordering::Acquire) || opens.len() >= self.max_opens {
            return false;
        }
        opens.insert(open_id)
    }

    /// The session ends: no open is added from now on (a CREATE still running for it, e.g.
    /// one that outlived its channel, closes what it made), and the opens it has are returned
    /// for closing. Under the opens lock, so no open slips in between.
    pub fn end_opens(&self) -> Vec<u64> {
        let opens = self.opens.lock();
        self.ended.store(true, std::sync::atomic::Ordering::Release);
        opens.iter().copied().collect()
    }

    pub fn remove_open(&self, open_id: u64) {
        self.opens.lock().remove(&open_id);
    }

    pub fn open_ids(&self) -> Vec<u64> {
        self.opens.lock().iter().copied().collect()
    }

    /// The token for `id` (see [`Token::for_identity`]).
    /// The session's token; `unix` is the Unix user a request on a per-user share acts as
    /// (crate::unix_identity), which the token then names instead of the server's user.
    pub fn token(
        &self,
        id: &smbq_auth::Identity,
        server_guid: &[u8; 16],
        unix: Option<&crate::unix_identity::UnixIdentity>,
    ) -> Arc<Token> {
        let mut cache = self.token.lock();
        let uid = unix.map(|u| u.uid);
        if let Some((who, cached_uid, t)) = cache.as_ref()
            && who == id
            && *cached_uid == uid
        {
            return t.clone();
        }
        let t = Arc::new(match unix {
            Some(u) => Token::for_unix_user(id, server_guid, u),
            None => Token::for_identity(id, server_guid),
        });
        *cache = Some((id.clone(), uid, t.clone()));
        t
    }

    pub fn open_count(&self) -> usize {
        self.opens.lock().len()
    }
}

#[cfg(test)]
mod recent_close_tests {
    use super::*;

    /// A session remembers a bounded number of CLOSEs, newest kept: a client closing
    /// thousands of handles grows nothing.
    #[test]
    fn recent_closes_are_bounded_and_ordered_by_message_id() {
        let s = SessionState::new(1, 4, 4);
        for v in 0..1000u64 {
            s.note_closing(v, 10_000 + v);
        }
        assert_eq!(s.closed_recently.lock().len(), RECENT_CLOSES);
        assert!(!s.closed_after(0, 1), "the oldest was forgotten");
        assert!(s.closed_after(999, 10_998), "sent before the CLOSE");
        assert!(!s.closed_after(999, 11_000), "sent after the CLOSE");
    }
}
