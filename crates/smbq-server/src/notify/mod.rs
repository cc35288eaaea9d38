//! Change notification state (MS-SMB2 3.3.5.19, MS-FSA 2.1.5.11 FsRtlNotifyFilterReportChange
//! and 2.1.4.17 change notify): one watch per directory open, started by the first
//! CHANGE_NOTIFY on it. The completion filter, WATCH_TREE and the buffer size of that first
//! request stay with the watch until the open closes (smbtorture smb2.notify.mask-change,
//! valid-req). Changes that arrive while no request waits are buffered, up to that size; past
//! it the buffer is dropped and the next request gets STATUS_NOTIFY_ENUM_DIR.
//!
//! Only changes made through this server are seen (the hooks in `crate::effects`, notify.rs); changes made
//! directly on the server's disk are not watched. A WATCH_TREE watch sees a change below a
//! subdirectory only where its session may list each directory on the way (`visible.rs`,
//! applied as the request answers, as the watcher).
//!
//! No IO: handlers wait on the `oneshot` a [`NotifyHub::request`] hands back.

pub(crate) mod visible;

use std::collections::{HashMap, HashSet, VecDeque};

use parking_lot::Mutex;
use smbq_vfs::RelPath;
use smbq_wire::change_notify::NotifyAction;
use tokio::sync::oneshot;

/// One FILE_NOTIFY_INFORMATION entry (MS-FSCC 2.7.1): `name` is relative to the watched
/// directory, `\`-separated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub action: NotifyAction,
    pub name: String,
}

/// How a waiting (or immediately answered) CHANGE_NOTIFY completes.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Changes(Vec<Change>),
    /// STATUS_NOTIFY_ENUM_DIR: the changes did not fit; the client must re-read the directory.
    EnumDir,
    /// STATUS_NOTIFY_CLEANUP: the open was closed (CLOSE, TREE_DISCONNECT, LOGOFF).
    Cleanup,
    /// STATUS_DELETE_PENDING: the watched directory is being deleted.
    DeletePending,
}

/// What [`NotifyHub::request`] gives a CHANGE_NOTIFY: wait on `rx`; `id` lets a cancelled
/// request withdraw ([`NotifyHub::forget`]).
#[derive(Debug)]
pub struct Start {
    pub id: u64,
    pub rx: oneshot::Receiver<Outcome>,
    /// Changes (or an overflow) are buffered: call [`NotifyHub::flush`] after letting
    /// requests sent just before this one arrive, so the first sent gets them.
    pub ready: bool,
}

/// The parameters of one CHANGE_NOTIFY request (MS-SMB2 2.2.35) on a directory open.
#[derive(Clone, Debug)]
pub struct WatchSpec {
    /// The share's name, lower-cased (events of other shares never match).
    pub share: String,
    pub dir: RelPath,
    pub filter: u32,
    pub tree: bool,
    pub buffer: u32,
    /// The request's MessageId: requests on one open are answered in the order the client
    /// sent them, whichever task reached the hub first (smbtorture smb2.notify.mask-change).
    pub seq: u64,
}

/// One file-system change as the hooks report it.
#[derive(Clone, Debug)]
pub struct Event<'a> {
    pub path: &'a RelPath,
    /// A named stream of `path` (`file:stream` in the reported name).
    pub stream: Option<&'a str>,
    pub action: NotifyAction,
    /// The CompletionFilter bits this change matches (MS-FSA 2.1.5.11: a watch sees it when
    /// they intersect its filter).
    pub filter: u32,
}

struct Waiter {
    id: u64,
    seq: u64,
    buffer: u32,
    tx: oneshot::Sender<Outcome>,
}

struct Watch {
    share: String,
    /// Lower-cased components of the watched directory.
    dir: Vec<String>,
    filter: u32,
    tree: bool,
    max_buffer: u32,
    pending: Vec<Change>,
    pending_bytes: usize,
    overflow: bool,
    /// Buffered changes (or an overflow) a request found on arrival, held for the first
    /// request in send order (see [`Start::ready`]); changes after it are buffered meanwhile.
    held: Option<Vec<Change>>,
    held_overflow: bool,
    waiters: VecDeque<Waiter>,
}

#[derive(Default)]
struct Inner {
    /// By the open's volatile id.
    watches: HashMap<u64, Watch>,
    /// Opens that renamed their (non-directory) file: closing them reports the attribute
    /// change Windows shows on the new name (smbtorture smb2.notify.mask-change).
    renamed: HashSet<u64>,
    /// Requests registered by the connection's loop as they arrived, before their tasks ran
    /// ([`NotifyHub::request_early`]), by (open, MessageId). At most one per request in flight,
    /// and gone with the open.
    early: HashMap<(u64, u64), Start>,
    next_waiter: u64,
}

#[derive(Default)]
pub struct NotifyHub {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for NotifyHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyHub")
            .field("watches", &self.inner.lock().watches.len())
            .finish()
    }
}

fn lower_components(p: &RelPath) -> Vec<String> {
    p.components().map(str::to_lowercase).collect()
}

/// Bytes one entry takes in the response, padded to the next entry (MS-FSCC 2.7.1).
fn entry_len(c: &Change) -> usize {
    let n = 12 + 2 * c.name.encode_utf16().count();
    (n + 3) & !3
}

/// The exact length `smbq_wire::change_notify::encode_notify_entries` produces.
pub fn encoded_len(changes: &[Change]) -> usize {
    let padded: usize = changes.iter().map(entry_len).sum();
    match changes.last() {
        Some(last) => padded - entry_len(last) + 12 + 2 * last.name.encode_utf16().count(),
        None => 0,
    }
}

/// The outcome for a request of `buffer` bytes given `changes`.
fn fit(changes: Vec<Change>, buffer: u32) -> Outcome {
    if encoded_len(&changes) > buffer as usize {
        Outcome::EnumDir
    } else {
        Outcome::Changes(changes)
    }
}

impl Watch {
    /// The name `ev` has relative to this watch, if the watch sees it.
    fn relative(&self, share: &str, ev: &Event<'_>) -> Option<String> {
        if self.share != share || ev.filter & self.filter == 0 {
            return None;
        }
        let comps: Vec<&str> = ev.path.components().collect();
        let depth = self.dir.len();
        // The watched directory itself is never reported (smbtorture smb2.notify.basedir).
        if comps.len() <= depth || (!self.tree && comps.len() != depth + 1) {
            return None;
        }
        let under = comps
            .iter()
            .zip(&self.dir)
            .all(|(c, d)| c.to_lowercase() == *d);
        if !under {
            return None;
        }
        let mut name = comps.get(depth..)?.join("\\");
        if let Some(s) = ev.stream {
            name.push(':');
            name.push_str(s);
        }
        Some(name)
    }

    fn deliver(&mut self, changes: Vec<Change>) {
        if self.held.is_some() || self.held_overflow {
            for c in changes {
                self.buffer(c);
            }
            return;
        }
        while let Some(w) = self.waiters.pop_front() {
            if w.tx.is_closed() {
                continue;
            }
            let mut all = std::mem::take(&mut self.pending);
            self.pending_bytes = 0;
            all.extend(changes);
            if let Err(Outcome::Changes(back)) = w.tx.send(fit(all, w.buffer)) {
                // The waiter went away at this very moment: keep the changes.
                for c in back {
                    self.buffer(c);
                }
            }
            return;
        }
        for c in changes {
            self.buffer(c);
        }
    }

    fn buffer(&mut self, c: Change) {
        if self.overflow {
            return;
        }
        // Consecutive identical records say nothing more (a write followed by a time change
        // is one MODIFIED; smbtorture smb2.notify.valid-req counts them so).
        if self.pending.last() == Some(&c) {
            return;
        }
        self.pending_bytes += entry_len(&c);
        self.pending.push(c);
        if self.pending_bytes > self.max_buffer as usize {
            self.pending.clear();
            self.pending_bytes = 0;
            self.overflow = true;
        }
    }

    fn finish_all(&mut self, how: impl Fn() -> Outcome) {
        for w in self.waiters.drain(..) {
            let _ = w.tx.send(how());
        }
    }
}

impl NotifyHub {
    pub fn new() -> Self {
        Self::default()
    }

    /// A CHANGE_NOTIFY on directory open `open_id`: answered at once from buffered changes,
    /// or queued behind earlier requests on the same open.
    pub fn request(&self, open_id: u64, spec: &WatchSpec) -> Start {
        let mut inner = self.inner.lock();
        inner.next_waiter = inner.next_waiter.wrapping_add(1);
        let id = inner.next_waiter;
        let w = inner.watches.entry(open_id).or_insert_with(|| Watch {
            share: spec.share.clone(),
            dir: lower_components(&spec.dir),
            filter: spec.filter,
            tree: spec.tree,
            max_buffer: spec.buffer,
            pending: Vec::new(),
            pending_bytes: 0,
            overflow: false,
            held: None,
            held_overflow: false,
            waiters: VecDeque::new(),
        });
        if w.overflow {
            w.overflow = false;
            w.held_overflow = true;
        } else if !w.pending.is_empty() {
            let changes = std::mem::take(&mut w.pending);
            w.pending_bytes = 0;
            w.held.get_or_insert_with(Vec::new).extend(changes);
        }
        let ready = w.held.is_some() || w.held_overflow;
        let (tx, rx) = oneshot::channel();
        let at = w.waiters.partition_point(|x| x.seq <= spec.seq);
        w.waiters.insert(
            at,
            Waiter {
                id,
                seq: spec.seq,
                buffer: spec.buffer,
                tx,
            },
        );
        Start { id, rx, ready }
    }

    /// [`NotifyHub::request`] made by the connection's loop when the request arrives
    /// (crate::dispatch::before_task), so a change made after the client sent it is this
    /// request's even when its task starts late on a busy machine (smbtorture
    /// smb2.notify.mask-change expects one change per request). Its task takes it with
    /// [`NotifyHub::take_early`].
    pub fn request_early(&self, open_id: u64, spec: &WatchSpec) {
        let start = self.request(open_id, spec);
        self.inner.lock().early.insert((open_id, spec.seq), start);
    }

    /// The registration the loop made for request `seq` on the open, if it did.
    pub fn take_early(&self, open_id: u64, seq: u64) -> Option<Start> {
        self.inner.lock().early.remove(&(open_id, seq))
    }

    /// A request whose task ended without taking its early registration (it failed before
    /// waiting) withdraws it, so changes do not go to a request nobody answers.
    pub fn abandon_early(&self, open_id: u64, seq: u64) {
        if let Some(start) = self.take_early(open_id, seq) {
            if self.forget(open_id, start.id) {
                return;
            }
            // It had been answered: the changes it was given go back to the buffer, first.
            let mut rx = start.rx;
            if let Ok(Outcome::Changes(back)) = rx.try_recv()
                && let Some(w) = self.inner.lock().watches.get_mut(&open_id)
            {
                for c in back.into_iter().rev() {
                    w.pending_bytes += entry_len(&c);
                    w.pending.insert(0, c);
                }
            }
        }
    }

    /// Hands buffered changes (or the overflow) to the first request waiting on the open.
    pub fn flush(&self, open_id: u64) {
        let mut inner = self.inner.lock();
        let Some(w) = inner.watches.get_mut(&open_id) else {
            return;
        };
        if w.held_overflow {
            while let Some(x) = w.waiters.pop_front() {
                if x.tx.send(Outcome::EnumDir).is_ok() {
                    w.held_overflow = false;
                    break;
                }
            }
        } else if let Some(held) = w.held.take() {
            let mut held = Some(held);
            while let Some(x) = w.waiters.pop_front() {
                let Some(h) = held.take() else { break };
                match x.tx.send(fit(h, x.buffer)) {
                    Ok(()) => break,
                    Err(Outcome::Changes(back)) => held = Some(back),
                    Err(_) => break,
                }
            }
            if let Some(mut back) = held {
                // Nobody took them: they stay first in the buffer.
                back.append(&mut w.pending);
                w.pending_bytes = back.iter().map(entry_len).sum();
                w.pending = back;
            }
        }
        if !w.held_overflow && !w.pending.is_empty() && !w.waiters.is_empty() {
            w.deliver(Vec::new());
        }
    }

    /// A cancelled request withdraws; false when it had already been completed.
    pub fn forget(&self, open_id: u64, waiter: u64) -> bool {
        let mut inner = self.inner.lock();
        let Some(w) = inner.watches.get_mut(&open_id) else {
            return false;
        };
        let before = w.waiters.len();
        w.waiters.retain(|x| x.id != waiter);
        w.waiters.len() != before
    }

    /// Reports changes that happened together (a rename's old and new names reach a waiting
    /// request in one response).
    pub fn report(&self, share: &str, events: &[Event<'_>]) {
        let mut inner = self.inner.lock();
        for w in inner.watches.values_mut() {
            let changes: Vec<Change> = events
                .iter()
                .filter_map(|ev| {
                    w.relative(share, ev).map(|name| Change {
                        action: ev.action,
                        name,
                    })
                })
                .collect();
            if !changes.is_empty() {
                w.deliver(changes);
            }
        }
    }

    /// The open is closing: its waiting requests complete with STATUS_NOTIFY_CLEANUP.
    /// Returns whether the open had renamed its file (see `Inner::renamed`).
    pub fn closed(&self, open_id: u64) -> bool {
        let mut inner = self.inner.lock();
        if let Some(mut w) = inner.watches.remove(&open_id) {
            w.finish_all(|| Outcome::Cleanup);
        }
        inner.early.retain(|(open, _), _| *open != open_id);
        inner.renamed.remove(&open_id)
    }

    /// The directory `dir` became delete-pending: requests waiting on watches of it complete
    /// with STATUS_DELETE_PENDING (smbtorture smb2.notify.rmdir1-4).
    pub fn delete_pending(&self, share: &str, dir: &RelPath) {
        let comps = lower_components(dir);
        let mut inner = self.inner.lock();
        for w in inner.watches.values_mut() {
            if w.share == share && w.dir == comps {
                w.finish_all(|| Outcome::DeletePending);
            }
        }
    }

    /// The directory `from` on `share` is now `to`: watches on it or on a directory below it
    /// follow it. A watch belongs to a directory open, not to a name (MS-SMB2 3.3.5.19), and
    /// the open moves with its directory, so its later changes are those under the new name.
    pub fn moved(&self, share: &str, from: &RelPath, to: &RelPath) {
        let (from, to) = (lower_components(from), lower_components(to));
        let mut inner = self.inner.lock();
        for w in inner.watches.values_mut() {
            if w.share == share && w.dir.starts_with(&from) {
                let below = w.dir.split_off(from.len());
                w.dir = to.iter().cloned().chain(below).collect();
            }
        }
    }

    pub fn mark_renamed(&self, open_id: u64) {
        self.inner.lock().renamed.insert(open_id);
    }

    /// The opens with a watch and how many CHANGE_NOTIFY requests wait on each, with the
    /// watch's filter and whether it covers the subtree.
    pub fn watches(&self) -> Vec<(u64, usize, u32, bool)> {
        let inner = self.inner.lock();
        inner
            .watches
            .iter()
            .map(|(id, w)| (*id, w.waiters.len(), w.filter, w.tree))
            .collect()
    }

    pub fn watch_count(&self) -> usize {
        self.inner.lock().watches.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_wire::change_notify::completion_filter as cf;

    fn p(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    fn spec(dir: &str, filter: u32, tree: bool, buffer: u32) -> WatchSpec {
        WatchSpec {
            share: "share".into(),
            dir: p(dir),
            filter,
            tree,
            buffer,
            seq: 0,
        }
    }

    fn ev(path: &RelPath, action: NotifyAction, filter: u32) -> Event<'_> {
        Event {
            path,
            stream: None,
            action,
            filter,
        }
    }

    fn added(name: &str) -> Change {
        Change {
            action: NotifyAction::ADDED,
            name: name.into(),
        }
    }

    fn wait(s: Start) -> (u64, oneshot::Receiver<Outcome>) {
        assert!(!s.ready, "answered at once");
        (s.id, s.rx)
    }

    fn ready(hub: &NotifyHub, open: u64, s: Start) -> Outcome {
        assert!(s.ready, "waits");
        let mut rx = s.rx;
        hub.flush(open);
        rx.try_recv().unwrap()
    }

    #[test]
    fn watches_follow_a_moved_directory() {
        let hub = NotifyHub::new();
        let on_b = spec("a/B", cf::FILE_NAME, false, 1000);
        let on_ab = spec("ab", cf::FILE_NAME, false, 1000);
        let (_, mut rx_b) = wait(hub.request(1, &on_b));
        let (_, mut rx_ab) = wait(hub.request(2, &on_ab));
        // "a" becomes "x/y": the watch below it follows; "ab" only shares a prefix of letters.
        hub.moved("share", &p("A"), &p("x/y"));
        let old = p("a/b/f");
        hub.report("share", &[ev(&old, NotifyAction::ADDED, cf::FILE_NAME)]);
        assert!(
            rx_b.try_recv().is_err(),
            "the old name is no longer watched"
        );
        let new = p("x/y/b/f");
        hub.report("share", &[ev(&new, NotifyAction::ADDED, cf::FILE_NAME)]);
        assert_eq!(rx_b.try_recv().unwrap(), Outcome::Changes(vec![added("f")]));
        let other = p("ab/g");
        hub.report("share", &[ev(&other, NotifyAction::ADDED, cf::FILE_NAME)]);
        assert_eq!(
            rx_ab.try_recv().unwrap(),
            Outcome::Changes(vec![added("g")])
        );
        // Another share's move changes nothing here.
        hub.moved("other", &p("x"), &p("z"));
        let (_, mut rx_b) = wait(hub.request(1, &on_b));
        let again = p("x/y/b/h");
        hub.report("share", &[ev(&again, NotifyAction::ADDED, cf::FILE_NAME)]);
        assert_eq!(rx_b.try_recv().unwrap(), Outcome::Changes(vec![added("h")]));
    }

    #[test]
    fn waiting_request_gets_the_first_change_then_later_ones_are_buffered() {
        let hub = NotifyHub::new();
        let s = spec("d", cf::FILE_NAME, false, 1000);
        let (_, mut rx) = wait(hub.request(1, &s));
        let a = p("d/a");
        hub.report("share", &[ev(&a, NotifyAction::ADDED, cf::FILE_NAME)]);
        assert_eq!(rx.try_recv().unwrap(), Outcome::Changes(vec![added("a")]));
        let b = p("d/b");
        hub.report("share", &[ev(&b, NotifyAction::ADDED, cf::FILE_NAME)]);
        hub.report("share", &[ev(&b, NotifyAction::REMOVED, cf::FILE_NAME)]);
        match ready(&hub, 1, hub.request(1, &s)) {
            Outcome::Changes(v) => {
                assert_eq!(v.len(), 2);
                assert_eq!(v[1].action, NotifyAction::REMOVED);
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn an_early_request_abandoned_by_its_task_gives_back_its_place_and_changes() {
        let hub = NotifyHub::new();
        let at = |seq| WatchSpec {
            seq,
            ..spec("d", cf::FILE_NAME, false, 1000)
        };
        hub.request_early(1, &at(5));
        let a = p("d/a");
        hub.report("share", &[ev(&a, NotifyAction::ADDED, cf::FILE_NAME)]);
        hub.abandon_early(1, 5);
        assert_eq!(
            ready(&hub, 1, hub.request(1, &at(6))),
            Outcome::Changes(vec![added("a")])
        );
        hub.request_early(1, &at(7));
        assert_eq!(hub.watches()[0].1, 1);
        hub.abandon_early(1, 7);
        assert_eq!(hub.watches()[0].1, 0, "withdrawn");
        // Taken by its task, it is that task's; the open's close ends what is left.
        hub.request_early(1, &at(8));
        let (_, mut rx) = wait(hub.take_early(1, 8).unwrap());
        hub.abandon_early(1, 8);
        assert_eq!(
            hub.watches()[0].1,
            1,
            "a taken registration is not withdrawn"
        );
        hub.request_early(1, &at(9));
        assert!(!hub.closed(1));
        assert_eq!(rx.try_recv().unwrap(), Outcome::Cleanup);
        assert!(hub.take_early(1, 9).is_none());
    }

    #[test]
    fn filter_depth_share_and_base_directory_decide_what_is_seen() {
        let hub = NotifyHub::new();
        let (_, mut flat) = wait(hub.request(1, &spec("d", cf::DIR_NAME, false, 1000)));
        let (_, mut deep) = wait(hub.request(2, &spec("D", cf::DIR_NAME, true, 1000)));
        let (_, mut root) = wait(hub.request(3, &spec("", cf::ATTRIBUTES, true, 1000)));
        let sub = p("d/x/y");
        let base = p("d");
        // Wrong filter for 1 and 2, the base directory itself for 3's sibling check below.
        hub.report("share", &[ev(&sub, NotifyAction::ADDED, cf::FILE_NAME)]);
        hub.report("other", &[ev(&sub, NotifyAction::ADDED, cf::DIR_NAME)]);
        hub.report("share", &[ev(&sub, NotifyAction::ADDED, cf::DIR_NAME)]);
        assert!(flat.try_recv().is_err(), "non-recursive sees only children");
        assert_eq!(
            deep.try_recv().unwrap(),
            Outcome::Changes(vec![added("x\\y")]),
            "recursive, case-insensitive, backslash-separated"
        );
        hub.report(
            "share",
            &[ev(&base, NotifyAction::MODIFIED, cf::ATTRIBUTES)],
        );
        assert_eq!(
            root.try_recv().unwrap(),
            Outcome::Changes(vec![Change {
                action: NotifyAction::MODIFIED,
                name: "d".into()
            }])
        );
        // A watch never reports its own directory.
        let (_, mut on_d) = wait(hub.request(4, &spec("d", cf::ATTRIBUTES, true, 1000)));
        hub.report(
            "share",
            &[ev(&base, NotifyAction::MODIFIED, cf::ATTRIBUTES)],
        );
        assert!(on_d.try_recv().is_err());
    }

    #[test]
    fn the_first_request_fixes_filter_and_buffer_size() {
        let hub = NotifyHub::new();
        let (id, _rx) = wait(hub.request(1, &spec("", cf::ATTRIBUTES, false, 1000)));
        assert!(hub.forget(1, id));
        assert!(!hub.forget(1, id));
        // A wider filter later changes nothing.
        let (_, mut rx) = wait(hub.request(1, &spec("", cf::FILE_NAME, false, 1000)));
        let f = p("f");
        hub.report("share", &[ev(&f, NotifyAction::ADDED, cf::FILE_NAME)]);
        assert!(rx.try_recv().is_err());
        hub.report("share", &[ev(&f, NotifyAction::MODIFIED, cf::ATTRIBUTES)]);
        assert!(matches!(rx.try_recv().unwrap(), Outcome::Changes(_)));
    }

    #[test]
    fn too_small_or_overflowing_buffers_give_enum_dir() {
        let hub = NotifyHub::new();
        let f = p("file");
        // A waiting request whose buffer is too small for the change.
        let (_, mut rx) = wait(hub.request(1, &spec("", cf::FILE_NAME, false, 0)));
        hub.report("share", &[ev(&f, NotifyAction::ADDED, cf::FILE_NAME)]);
        assert_eq!(rx.try_recv().unwrap(), Outcome::EnumDir);
        // The watch keeps the first size (0): anything buffered overflows it.
        hub.report("share", &[ev(&f, NotifyAction::REMOVED, cf::FILE_NAME)]);
        assert_eq!(
            ready(
                &hub,
                1,
                hub.request(1, &spec("", cf::FILE_NAME, false, 1000))
            ),
            Outcome::EnumDir
        );
        // Overflow is reported once; then the watch waits again.
        wait(hub.request(1, &spec("", cf::FILE_NAME, false, 1000)));

        // 100 entries of 32 bytes do not fit a 1000-byte watch (smb2.notify.overflow).
        let (id, _rx) = wait(hub.request(2, &spec("", cf::DIR_NAME, true, 1000)));
        hub.forget(2, id);
        for i in 0..100 {
            let d = p(&format!("test{i}.txt"));
            hub.report("share", &[ev(&d, NotifyAction::ADDED, cf::DIR_NAME)]);
        }
        assert_eq!(
            ready(&hub, 2, hub.request(2, &spec("", cf::DIR_NAME, true, 1000))),
            Outcome::EnumDir
        );
    }

    #[test]
    fn identical_consecutive_changes_coalesce() {
        let hub = NotifyHub::new();
        let (id, _rx) = wait(hub.request(1, &spec("", 0xFFF, false, 1000)));
        hub.forget(1, id);
        let f = p("f");
        for (a, m) in [
            (NotifyAction::REMOVED, cf::FILE_NAME),
            (NotifyAction::ADDED, cf::FILE_NAME),
            (NotifyAction::MODIFIED, cf::LAST_WRITE),
            (NotifyAction::MODIFIED, cf::ATTRIBUTES),
        ] {
            hub.report("share", &[ev(&f, a, m)]);
        }
        match ready(&hub, 1, hub.request(1, &spec("", 0xFFF, false, 1000))) {
            Outcome::Changes(v) => assert_eq!(v.len(), 3),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn two_requests_complete_in_order_and_close_cleans_up() {
        let hub = NotifyHub::new();
        let s = |seq| WatchSpec {
            seq,
            ..spec("", cf::DIR_NAME, false, 1000)
        };
        // The second request reaches the hub first; the first sent is still answered first.
        let (_, mut r2) = wait(hub.request(7, &s(2)));
        let (_, mut r1) = wait(hub.request(7, &s(1)));
        let (_, mut r3) = wait(hub.request(7, &s(3)));
        let a = p("a");
        hub.report("share", &[ev(&a, NotifyAction::ADDED, cf::DIR_NAME)]);
        assert!(matches!(r1.try_recv().unwrap(), Outcome::Changes(_)));
        assert!(r2.try_recv().is_err());
        let b = p("b");
        hub.report("share", &[ev(&b, NotifyAction::ADDED, cf::DIR_NAME)]);
        assert_eq!(r2.try_recv().unwrap(), Outcome::Changes(vec![added("b")]));
        hub.mark_renamed(7);
        assert!(hub.closed(7));
        assert_eq!(r3.try_recv().unwrap(), Outcome::Cleanup);
        assert_eq!(hub.watch_count(), 0);
        assert!(!hub.closed(7));
    }

    #[test]
    fn rename_pairs_arrive_together_and_delete_pending_ends_waits() {
        let hub = NotifyHub::new();
        let (_, mut rx) = wait(hub.request(1, &spec("d", cf::FILE_NAME, false, 1000)));
        let (old, new) = (p("d/a"), p("d/b"));
        hub.report(
            "share",
            &[
                ev(&old, NotifyAction::RENAMED_OLD_NAME, cf::FILE_NAME),
                ev(&new, NotifyAction::RENAMED_NEW_NAME, cf::FILE_NAME),
            ],
        );
        match rx.try_recv().unwrap() {
            Outcome::Changes(v) => assert_eq!(v.len(), 2),
            o => panic!("{o:?}"),
        }
        let (_, mut rx) = wait(hub.request(1, &spec("d", cf::FILE_NAME, false, 1000)));
        hub.delete_pending("share", &p("e"));
        assert!(rx.try_recv().is_err());
        hub.delete_pending("share", &p("D"));
        assert_eq!(rx.try_recv().unwrap(), Outcome::DeletePending);
    }

    #[test]
    fn buffered_changes_go_to_the_first_sent_request_and_exclude_later_ones() {
        let hub = NotifyHub::new();
        let s = |seq| WatchSpec {
            seq,
            ..spec("", cf::FILE_NAME, false, 1000)
        };
        let (id, _rx) = wait(hub.request(1, &s(1)));
        hub.forget(1, id);
        let (a, b) = (p("a"), p("b"));
        hub.report("share", &[ev(&a, NotifyAction::ADDED, cf::FILE_NAME)]);
        // Request 3 arrives before request 2, then a change comes before the flush.
        let late = hub.request(1, &s(3));
        let early = hub.request(1, &s(2));
        assert!(late.ready && early.ready);
        hub.report("share", &[ev(&b, NotifyAction::ADDED, cf::FILE_NAME)]);
        let (mut r3, mut r2) = (late.rx, early.rx);
        hub.flush(1);
        hub.flush(1);
        assert_eq!(r2.try_recv().unwrap(), Outcome::Changes(vec![added("a")]));
        assert_eq!(r3.try_recv().unwrap(), Outcome::Changes(vec![added("b")]));
    }

    #[test]
    fn stream_names_and_exact_encoded_length() {
        let hub = NotifyHub::new();
        let (_, mut rx) = wait(hub.request(1, &spec("", cf::STREAM_NAME, false, 1000)));
        let f = p("f");
        hub.report(
            "share",
            &[Event {
                path: &f,
                stream: Some("s"),
                action: NotifyAction::ADDED_STREAM,
                filter: cf::STREAM_NAME,
            }],
        );
        let Outcome::Changes(v) = rx.try_recv().unwrap() else {
            panic!()
        };
        assert_eq!(v[0].name, "f:s");
        let two = vec![added("a"), added("bc")];
        let mut w = smbq_wire::Writer::new();
        let n = smbq_wire::change_notify::encode_notify_entries(
            two.iter().map(|c| (c.action, c.name.as_str())),
            &mut w,
        );
        assert_eq!(encoded_len(&two), n);
        assert_eq!(encoded_len(&[]), 0);
    }
}
