//! What this node knows of other nodes' byte-range locks, so that READ and WRITE check them
//! (MS-FSA 2.1.4.10) without asking etcd. The watch (crate::watch) keeps it: it loads every
//! lock at start and then applies each change in revision order. A node that has a file open
//! says which revision of it it has seen (`f/FILE/k/NODE`), and a LOCK on another node is
//! granted only once it has (crate::store::Store::lock); a node that opens a file waits
//! until its view has reached its own admission.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use smbq_server::file_state::FileKey;
use smbq_server::file_state::byte_range::io_conflict;

/// A lock of another node: its etcd key, and (offset, length, exclusive).
type Held = (String, (u64, u64, bool));

#[derive(Default)]
pub(crate) struct RemoteView {
    locks: Mutex<HashMap<FileKey, Vec<Held>>>,
    /// The etcd revision up to which every change is applied.
    applied: AtomicI64,
    /// Files another node asked this node to break caching on, with the revision of the
    /// last request, while this node has them open (crate::breaks).
    contended: Mutex<HashMap<FileKey, i64>>,
    /// Held by a caching grant (decide, then grant) and by a break request's start (note it,
    /// then break), so a grant either sees the request or is broken by it (crate::state).
    pub(crate) gate: Mutex<()>,
}

impl RemoteView {
    fn locks(&self) -> std::sync::MutexGuard<'_, HashMap<FileKey, Vec<Held>>> {
        self.locks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts again from a full read at revision `rev`.
    pub(crate) fn reset(&self, all: Vec<(FileKey, Held)>, rev: i64) {
        let mut map = self.locks();
        map.clear();
        for (f, held) in all {
            map.entry(f).or_default().push(held);
        }
        drop(map);
        self.applied.store(rev, Ordering::Release);
    }

    pub(crate) fn put(&self, f: FileKey, key: String, lock: (u64, u64, bool)) {
        self.locks().entry(f).or_default().push((key, lock));
    }

    pub(crate) fn remove(&self, f: FileKey, key: &str) {
        let mut map = self.locks();
        if let Some(list) = map.get_mut(&f) {
            list.retain(|(k, _)| k != key);
            if list.is_empty() {
                map.remove(&f);
            }
        }
    }

    /// Every change up to `rev` is applied.
    pub(crate) fn advance(&self, rev: i64) {
        self.applied.fetch_max(rev, Ordering::AcqRel);
    }

    /// Whether a READ or WRITE of `range` conflicts with another node's lock on `f`.
    pub(crate) fn io_conflict(
        &self,
        f: FileKey,
        (offset, length): (u64, u64),
        write: bool,
    ) -> bool {
        self.locks().get(&f).is_some_and(|l| {
            l.iter()
                .any(|(_, held)| io_conflict(*held, offset, length, write))
        })
    }

    /// A break request for `f` at revision `rev` is being carried out (under `gate`).
    pub(crate) fn contended_at(&self, f: FileKey, rev: i64) {
        let mut map = self.contended.lock().unwrap_or_else(|e| e.into_inner());
        let at = map.entry(f).or_default();
        *at = (*at).max(rev);
    }

    /// Whether a break request for `f` came after revision `rev` (under `gate`).
    pub(crate) fn contended_since(&self, f: FileKey, rev: i64) -> bool {
        let map = self.contended.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&f).is_some_and(|at| *at > rev)
    }

    /// This node no longer has `f` open: what it noted about requests for it goes.
    pub(crate) fn forget(&self, f: FileKey) {
        let mut map = self.contended.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&f);
    }

    /// Waits (blocking, briefly) until the changes up to `rev` are applied; whether they are.
    pub(crate) fn wait_applied(&self, rev: i64, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut pause = Duration::from_micros(200);
        while self.applied.load(Ordering::Acquire) < rev {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: FileKey = FileKey {
        dev: 1,
        ino: 2,
        stream: 0,
    };

    #[test]
    fn io_meets_the_locks_in_view_until_they_go() {
        let v = RemoteView::default();
        v.reset(vec![(F, ("a".into(), (0, 10, false)))], 5);
        assert!(
            !v.io_conflict(F, (0, 4), false),
            "a shared lock lets others read"
        );
        assert!(v.io_conflict(F, (0, 4), true));
        v.put(F, "b".into(), (100, 1, true));
        assert!(v.io_conflict(F, (100, 1), false));
        assert!(!v.io_conflict(FileKey { stream: 1, ..F }, (100, 1), false));
        v.remove(F, "a");
        v.remove(F, "b");
        assert!(!v.io_conflict(F, (0, 200), true));
        assert!(v.wait_applied(5, Duration::ZERO));
        assert!(!v.wait_applied(6, Duration::from_millis(5)));
        v.advance(7);
        assert!(v.wait_applied(6, Duration::ZERO));
    }

    #[test]
    fn a_break_request_after_an_admission_is_seen_until_forgotten() {
        let v = RemoteView::default();
        assert!(!v.contended_since(F, 10));
        v.contended_at(F, 12);
        v.contended_at(F, 11);
        assert!(v.contended_since(F, 10));
        assert!(
            !v.contended_since(F, 12),
            "a request before the admission is no news"
        );
        v.forget(F);
        assert!(!v.contended_since(F, 10));
    }
}
