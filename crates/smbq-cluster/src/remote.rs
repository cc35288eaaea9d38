//! What this node knows of other nodes' byte-range locks, so that READ and WRITE check them
//! (MS-FSA 2.1.4.10) without asking etcd. The watch (crate::watch) keeps it: it loads every
//! lock at start and then applies each change in revision order. A node that has a file open
//! says which revision of it it has seen (`f/FILE/k/NODE`), and a LOCK on another node is
//! granted only once it has (crate::store::Store::lock); a node that opens a file waits
//! until its view has reached its own admission.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use smbq_server::file_state::FileKey;
use smbq_server::file_state::byte_range::io_conflict;

/// A lock of another node: its etcd key, and (offset, length, exclusive).
type Held = (String, (u64, u64, bool));

/// A persistent open's hold (crate::ca): the open's id, and its locks.
pub(crate) type HoldLocks = (u64, Vec<(u64, u64, bool)>);

/// What the watch's full read found (crate::watch), for [`RemoteView::reset`].
#[derive(Default)]
pub(crate) struct Loaded {
    /// Other nodes' locks.
    pub locks: Vec<(FileKey, Held)>,
    /// Other nodes' open records (their keys).
    pub opens: Vec<(FileKey, String)>,
    /// Delete-pending files.
    pub pending: HashSet<FileKey>,
    /// Persistent opens' holds, every node's: (file, key, the open and its locks).
    pub holds: Vec<(FileKey, String, HoldLocks)>,
}

#[derive(Default)]
pub(crate) struct RemoteView {
    locks: Mutex<HashMap<FileKey, Vec<Held>>>,
    /// Other nodes' open records (their etcd keys), by file: this node flushes what it
    /// writes to such a file before answering (smbq-server's crate::stable).
    opens: Mutex<HashMap<FileKey, HashSet<String>>>,
    /// Persistent opens' holds (crate::ca), this node's own too, by file and key. READ and
    /// WRITE meet their locks, but an open never its own: a hold says what its open locked
    /// also while no node holds the open (its node died, and its lock keys went with its
    /// lease, until another node takes it over and records them again), and while the open
    /// moves to a node (its hold names the node before that node's own tables have it).
    holds: Mutex<HashMap<FileKey, HashMap<String, HoldLocks>>>,
    /// Files delete-pending in etcd (`f/FILE/dp`), for queries (FileStandardInformation):
    /// an admission still asks etcd itself.
    pending: Mutex<HashSet<FileKey>>,
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

    fn opens(&self) -> std::sync::MutexGuard<'_, HashMap<FileKey, HashSet<String>>> {
        self.opens.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn holds(&self) -> std::sync::MutexGuard<'_, HashMap<FileKey, HashMap<String, HoldLocks>>> {
        self.holds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts again from a full read at revision `rev`.
    pub(crate) fn reset(&self, loaded: Loaded, rev: i64) {
        let mut map = self.locks();
        map.clear();
        for (f, held) in loaded.locks {
            map.entry(f).or_default().push(held);
        }
        drop(map);
        let mut map = self.opens();
        map.clear();
        for (f, key) in loaded.opens {
            map.entry(f).or_default().insert(key);
        }
        drop(map);
        let mut map = self.holds();
        map.clear();
        for (f, key, hold) in loaded.holds {
            map.entry(f).or_default().insert(key, hold);
        }
        drop(map);
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = loaded.pending;
        self.applied.store(rev, Ordering::Release);
    }

    /// `f`'s delete-pending mark came or went.
    pub(crate) fn mark(&self, f: FileKey, pending: bool) {
        let mut set = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending {
            set.insert(f);
        } else {
            set.remove(&f);
        }
    }

    /// Whether `f` is delete-pending on some node, as far as the watch has seen.
    pub(crate) fn delete_pending(&self, f: FileKey) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&f)
    }

    /// Another node's open of `f`, by its record's key, came or went.
    pub(crate) fn other_open(&self, f: FileKey, key: &str, put: bool) {
        let mut map = self.opens();
        if put {
            map.entry(f).or_default().insert(key.to_owned());
        } else if let Some(set) = map.get_mut(&f) {
            set.remove(key);
            if set.is_empty() {
                map.remove(&f);
            }
        }
    }

    /// Whether another node has `f` open.
    pub(crate) fn opened_elsewhere(&self, f: FileKey) -> bool {
        self.opens().contains_key(&f)
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

    /// Persistent hold `key` of `f` was written (with its open and locks) or went (`None`).
    pub(crate) fn hold(&self, f: FileKey, key: &str, hold: Option<HoldLocks>) {
        let mut map = self.holds();
        match hold {
            Some(h) => {
                map.entry(f).or_default().insert(key.to_owned(), h);
            }
            None => {
                if let Some(set) = map.get_mut(&f) {
                    set.remove(key);
                    if set.is_empty() {
                        map.remove(&f);
                    }
                }
            }
        }
    }

    /// Whether a READ or WRITE of `range` conflicts (MS-FSA 2.1.4.10) with another node's
    /// lock on `f`, or with a lock in the hold of a persistent open that `local` does not
    /// name (`local(id)`: the open is the one asking, or this node's own table has it, whose
    /// check is exact). A hold of another node's open may lag behind its unlock (it is
    /// written after the lock keys), refusing a little more than it must for a moment.
    /// I/O of no bytes conflicts with nothing, as on one server.
    pub(crate) fn io_conflict(
        &self,
        f: FileKey,
        (offset, length): (u64, u64),
        write: bool,
        local: impl Fn(u64) -> bool,
    ) -> bool {
        if length == 0 {
            return false;
        }
        let meets = |held: &(u64, u64, bool)| io_conflict(*held, offset, length, write);
        if self
            .locks()
            .get(&f)
            .is_some_and(|l| l.iter().any(|(_, held)| meets(held)))
        {
            return true;
        }
        let holders: Vec<u64> = match self.holds().get(&f) {
            None => return false,
            Some(h) => h
                .values()
                .filter(|(_, locks)| locks.iter().any(meets))
                .map(|(open, _)| *open)
                .collect(),
        };
        holders.into_iter().any(|open| !local(open))
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
        let loaded = Loaded {
            locks: vec![(F, ("a".into(), (0, 10, false)))],
            ..Loaded::default()
        };
        v.reset(loaded, 5);
        let none = |_| false;
        assert!(
            !v.io_conflict(F, (2, 0), true, none),
            "no bytes, no conflict"
        );
        assert!(
            !v.io_conflict(F, (0, 4), false, none),
            "a shared lock lets others read"
        );
        assert!(v.io_conflict(F, (0, 4), true, none));
        v.put(F, "b".into(), (100, 1, true));
        assert!(v.io_conflict(F, (100, 1), false, none));
        assert!(!v.io_conflict(FileKey { stream: 1, ..F }, (100, 1), false, none));
        v.remove(F, "a");
        v.remove(F, "b");
        assert!(!v.io_conflict(F, (0, 200), true, none));
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

    #[test]
    fn another_nodes_opens_are_seen_until_the_last_goes() {
        let v = RemoteView::default();
        let loaded = Loaded {
            opens: vec![(F, "o/b/1".into())],
            pending: HashSet::from([F]),
            ..Loaded::default()
        };
        v.reset(loaded, 3);
        assert!(v.delete_pending(F));
        v.mark(F, false);
        assert!(!v.delete_pending(F));
        v.mark(F, true);
        assert!(v.opened_elsewhere(F));
        v.other_open(F, "o/c/2", true);
        v.other_open(F, "o/b/1", false);
        assert!(v.opened_elsewhere(F), "node c still has it");
        v.other_open(F, "o/c/2", false);
        assert!(!v.opened_elsewhere(F));
        assert!(!v.opened_elsewhere(FileKey { ino: 3, ..F }));
        v.other_open(F, "o/c/2", true);
        v.reset(Loaded::default(), 4);
        assert!(!v.opened_elsewhere(F), "a full read starts over");
        assert!(!v.delete_pending(F));
    }

    #[test]
    fn a_persistent_holds_locks_meet_every_open_but_those_checked_here() {
        let v = RemoteView::default();
        let loaded = Loaded {
            holds: vec![(F, "p/7".into(), (7, vec![(0, 10, true)]))],
            ..Loaded::default()
        };
        v.reset(loaded, 3);
        let none = |_| false;
        let seven = |id| id == 7;
        assert!(
            v.io_conflict(F, (0, 4), false, none),
            "another open meets it"
        );
        assert!(
            !v.io_conflict(F, (0, 4), true, seven),
            "not when its open is the one asking, or in this node's table"
        );
        assert!(!v.io_conflict(F, (10, 4), true, none), "outside the lock");
        // Its open unlocked: the hold is written again without the lock.
        v.hold(F, "p/7", Some((7, Vec::new())));
        assert!(!v.io_conflict(F, (0, 4), true, none));
        v.hold(F, "p/7", Some((7, vec![(0, 10, false)])));
        assert!(
            !v.io_conflict(F, (0, 4), false, none),
            "a shared lock lets others read"
        );
        assert!(v.io_conflict(F, (0, 4), true, none));
        v.hold(F, "p/7", None);
        assert!(!v.io_conflict(F, (0, 4), true, none), "the hold went");
    }
}
