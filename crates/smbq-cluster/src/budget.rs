//! How many records this node holds in etcd: one per admitted open and one per byte-range
//! lock, capped (`[cluster] max_records`). etcd's space is shared by every node, and once its
//! quota is spent it refuses every write, for every node: the clients of one node may not
//! fill it. Past the cap an open or a lock gets STATUS_INSUFFICIENT_RESOURCES, as when the
//! local table's own limits are reached.

use std::collections::HashMap;
use std::sync::Mutex;

use smbq_server::file_state::FileKey;

pub(crate) struct Budget {
    max: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// Records held or being written.
    total: usize,
    /// Lock records of each open, so that its close gives them all back.
    locks: HashMap<(FileKey, u64), usize>,
}

impl Budget {
    pub(crate) fn new(max: usize) -> Budget {
        Budget {
            max,
            held: Mutex::default(),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Room for one more record: taken now, or `false` at the cap.
    pub(crate) fn take(&self) -> bool {
        let mut h = self.held();
        if h.total >= self.max {
            return false;
        }
        h.total += 1;
        true
    }

    /// A record taken with [`Self::take`] was not written after all.
    pub(crate) fn give_back(&self) {
        let mut h = self.held();
        h.total = h.total.saturating_sub(1);
    }

    /// The record taken last is a lock of open `owner`.
    pub(crate) fn locked(&self, key: FileKey, owner: u64) {
        *self.held().locks.entry((key, owner)).or_default() += 1;
    }

    /// A lock record of `owner` went.
    pub(crate) fn unlocked(&self, key: FileKey, owner: u64) {
        let mut h = self.held();
        if let Some(n) = h.locks.get_mut(&(key, owner)) {
            *n -= 1;
            if *n == 0 {
                h.locks.remove(&(key, owner));
            }
            h.total = h.total.saturating_sub(1);
        }
    }

    /// Open `owner` closed: its own record (when `admitted`) and its locks' go.
    pub(crate) fn released(&self, key: FileKey, owner: u64, admitted: bool) {
        let mut h = self.held();
        let locks = h.locks.remove(&(key, owner)).unwrap_or(0);
        h.total = h.total.saturating_sub(locks + usize::from(admitted));
    }

    #[cfg(test)]
    fn total(&self) -> usize {
        self.held().total
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
    fn opens_and_locks_count_against_the_cap_and_closes_give_them_back() {
        let b = Budget::new(3);
        assert!(b.take(), "the open's record");
        assert!(b.take());
        b.locked(F, 7);
        assert!(b.take());
        b.locked(F, 7);
        assert!(!b.take(), "at the cap");
        b.unlocked(F, 7);
        assert_eq!(b.total(), 2);
        assert!(b.take());
        b.give_back();
        // An unlock of a lock this budget never counted changes nothing.
        b.unlocked(F, 8);
        assert_eq!(b.total(), 2);
        b.released(F, 7, true);
        assert_eq!(b.total(), 0, "the open and its remaining lock");
        assert!(b.take() && b.take() && b.take());
    }
}
