//! The decisions a node takes against etcd, one file at a time: read the file's keys in one
//! range read, decide with smbq-server's own rules, and write in a transaction that holds
//! only if nobody changed the file in between (crate::keys). Each returns the NTSTATUS the
//! client is to see; etcd being unreachable is STATUS_SERVER_UNAVAILABLE.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
};
use smbq_server::durable::persistent::{keeps_file_at, lets_in};
use smbq_server::file_state::FileKey;
use smbq_server::file_state::byte_range::lock_conflict;
use smbq_server::file_state::oplock::is_stat_open;
use smbq_server::file_state::share_mode::share_conflict;
use smbq_wire::NtStatus;

use crate::keys::{BreakRequest, Entry, Hold, Keys, OpenRecord};

/// How long an admission waits for other nodes' clients to acknowledge breaks: a break's own
/// time (MS-SMB2 3.3.6.3, 35 s here as on one server) and a little for the round trips.
pub const BREAK_WAIT: Duration = Duration::from_secs(37);

/// How long a LOCK waits for the nodes that have the file open to see it.
const ACK_WAIT: Duration = Duration::from_secs(2);

/// How long an admission waits for the nodes that have the file open to flush what they
/// wrote and say so: a flush of a file with much unwritten data takes a while.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// Operations in one transaction: etcd refuses more than 128 by default.
const MAX_TXN_OPS: usize = 100;

/// Every caching bit: what a record says before the grant is known.
const ALL_CACHING: u32 = 0x7;

const WRITE_DATA: u32 = 0x2;
const APPEND_DATA: u32 = 0x4;

/// The nodes of `opens` whose caching has a bit of `bits`, but those in `asked`, each once.
fn holders_of(opens: &[&Other], bits: u32, asked: &HashSet<String>) -> Vec<String> {
    let mut nodes: Vec<String> = opens
        .iter()
        .filter(|o| o.caching & bits != 0 && !asked.contains(&o.node))
        .map(|o| o.node.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// How often a decision is tried again when another node changed the file in between; past
/// this the request fails as if etcd were away (it never happens without a storm of opens).
const MAX_ROUNDS: usize = 32;

/// One node's handle on the shared state.
#[derive(Clone)]
pub struct Store {
    pub(crate) client: etcd_client::Client,
    pub(crate) keys: Keys,
    pub(crate) node: Arc<str>,
    /// The node's etcd lease: its opens and locks go with it.
    pub(crate) lease: i64,
    /// Makes lock keys unique (the same range may be locked twice by one open).
    pub(crate) seq: Arc<AtomicU64>,
    /// Admissions waiting now for other nodes' clients to acknowledge breaks, and how many
    /// may ([`Self::wait_slot`]).
    pub(crate) waits: Arc<(AtomicUsize, usize)>,
    /// The persistent opens' records this node holds: each one's user and file (crate::ca).
    pub(crate) ca_mine: Arc<std::sync::Mutex<HashMap<u64, (String, FileKey)>>>,
    /// Held while this node takes records over, so it takes each once (crate::ca).
    pub(crate) adopting: Arc<tokio::sync::Mutex<()>>,
    /// Durable (not persistent) opens handed to this node whose record, only the way over,
    /// goes once the open is held here again (crate::ca, `RecordStore::adopted`).
    pub(crate) handed_in: Arc<std::sync::Mutex<std::collections::HashSet<u64>>>,
}

/// An admission's right to wait for breaks; given back when dropped.
pub(crate) struct WaitSlot(Arc<(AtomicUsize, usize)>);

impl Drop for WaitSlot {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Everything etcd holds about one file.
#[derive(Debug, Default)]
struct View {
    /// The mod revision of `f/FILE/v` (0: absent). Revisions are never reused, so a file
    /// whose key went and came back in between is seen to have changed.
    version: i64,
    delete_pending: bool,
    /// Opens of other nodes.
    others: Vec<Other>,
    /// Persistent opens other nodes hold, or held when they died (crate::keys::Hold): their
    /// share modes stand (their locks are in `other_locks`).
    held: Vec<Held>,
    /// Opens of this node, by open id.
    mine: HashMap<u64, Mine>,
    /// Locks of other nodes: (offset, length, exclusive).
    other_locks: Vec<(u64, u64, bool)>,
    /// Break requests waiting for their holder: (key, holder).
    breaks: Vec<(String, String)>,
    /// What each node says it has seen of the file (crate::remote): a revision.
    acks: HashMap<String, i64>,
    /// Up to which admission each node flushed the file: a revision.
    flushed: HashMap<String, i64>,
}

/// A persistent open's hold, of another node (crate::keys::Hold).
#[derive(Debug)]
struct Held {
    node: String,
    /// Access and share access.
    modes: (u32, u32),
    /// Its caching lets other opens in while its client is away (MS-SMB2 3.3.5.9).
    lets_in: bool,
    /// Its client is away: the open is parked on its node.
    away: bool,
    /// Its node died and no node took it over yet: nobody holds the open, its client is
    /// away, and no break reaches it. Otherwise the node's own open record stands for it.
    orphan: bool,
}

impl View {
    /// Whether a persistent open of a node that died refuses an open with `access` and
    /// `share_access` (MS-FSA 2.1.5.1.2.1).
    fn held_conflict(&self, access: u32, share_access: u32) -> bool {
        self.held
            .iter()
            .any(|h| h.orphan && share_conflict(h.modes, access, share_access))
    }

    /// MS-SMB2 3.3.5.9, as one server answers for a disconnected persistent open (smbq-server
    /// `durable::persistent::refuses`): one waiting for its client, on another node or on
    /// none, refuses every open but a stat open with STATUS_FILE_NOT_AVAILABLE, unless its
    /// caching lets others in.
    fn waiting_refuses(&self, access: u32) -> bool {
        !is_stat_open(access) && self.held.iter().any(|h| (h.away || h.orphan) && !h.lets_in)
    }
}

/// An open of this node: its record, and the record's mod revision (a write back compares
/// it, so a record its close removed meanwhile is not made again).
#[derive(Debug, Clone)]
struct Mine {
    rec: OpenRecord,
    rev: i64,
}

/// An open of another node.
#[derive(Debug)]
struct Other {
    node: String,
    access: u32,
    share_access: u32,
    caching: u32,
}

/// SMB2_LEASE_READ_CACHING (a level II oplock as its lease equivalent).
const READ_CACHING: u32 = 0x1;

/// FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE.
const SHARE_ALL: u32 = 0x7;

/// SMB2_LEASE_HANDLE_CACHING: an open that caches its handle is closed by its client when
/// asked, so a sharing violation against it waits for the break first (MS-SMB2 3.3.5.9).
const HANDLE_CACHING: u32 = 0x2;

/// An acknowledgment's revision ([`Store::ack`]); 0 when unreadable.
fn revision_of(value: &[u8]) -> i64 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|t| i64::from_str_radix(t, 16).ok())
        .unwrap_or(0)
}

pub(crate) fn unavailable(e: etcd_client::Error) -> NtStatus {
    tracing::warn!(error = %e, "etcd request failed");
    NtStatus::SERVER_UNAVAILABLE
}

/// Keys read in one response of [`Store::read_all`]: small enough that a page of the
/// largest records (an open's path is at most a few KiB) stays far below gRPC's 4 MiB.
const PAGE: i64 = 500;

/// The first key after every key that starts with `prefix` (etcd's range end for it).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every key
}

impl Store {
    /// Every key under `prefix` as of one revision, and that revision, read in pages: one
    /// response is bounded by gRPC's 4 MiB limit, however many records the cluster holds.
    pub(crate) async fn read_all(
        &self,
        prefix: &str,
    ) -> Result<(Vec<etcd_client::KeyValue>, i64), etcd_client::Error> {
        let mut c = self.client.clone();
        let end = prefix_end(prefix);
        let (mut from, mut rev) = (prefix.as_bytes().to_vec(), 0);
        let mut all = Vec::new();
        loop {
            let mut opts = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
            if rev != 0 {
                opts = opts.with_revision(rev);
            }
            let mut r = c.get(from, Some(opts)).await?;
            if rev == 0 {
                rev = r.header().map_or(0, |h| h.revision());
            }
            let more = r.more();
            let page = r.take_kvs();
            let next = page.last().map(|kv| [kv.key(), &[0]].concat());
            all.extend(page);
            match next {
                Some(next) if more => from = next,
                _ => return Ok((all, rev)),
            }
        }
    }

    async fn view(&self, f: FileKey) -> Result<View, NtStatus> {
        let mut c = self.client.clone();
        let prefix = self.keys.file(f);
        let r = c
            .get(prefix, Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        Ok(self.parse_view(r.kvs()))
    }

    fn parse_view(&self, kvs: &[etcd_client::KeyValue]) -> View {
        let mut v = View::default();
        for kv in kvs {
            let Ok(key) = kv.key_str() else { continue };
            let Some((_, entry)) = self.keys.parse(key) else {
                continue;
            };
            match entry {
                Entry::Version => v.version = kv.mod_revision(),
                Entry::DeletePending => v.delete_pending = true,
                Entry::Open { node, open_id } => {
                    let Ok(rec) = serde_json::from_slice::<OpenRecord>(kv.value()) else {
                        continue;
                    };
                    if *node == *self.node {
                        let rev = kv.mod_revision();
                        v.mine.insert(open_id, Mine { rec, rev });
                    } else {
                        v.others.push(Other {
                            node,
                            access: rec.access,
                            share_access: rec.share_access,
                            caching: rec.caching,
                        });
                    }
                }
                Entry::Lock { node, lock, .. } if *node != *self.node => v.other_locks.push(lock),
                Entry::Lock { .. } => {}
                Entry::Break { holder } => v.breaks.push((key.to_owned(), holder)),
                Entry::Ack { node } => {
                    v.acks.insert(node, revision_of(kv.value()));
                }
                Entry::Flushed { node } => {
                    v.flushed.insert(node, revision_of(kv.value()));
                }
                Entry::Handover { .. } => {}
                Entry::Hold { .. } => {
                    let Ok(h) = serde_json::from_slice::<Hold>(kv.value()) else {
                        continue;
                    };
                    if *h.node != *self.node {
                        v.other_locks.extend(h.locks.iter().copied());
                        v.held.push(Held {
                            modes: (h.access, h.share_access),
                            lets_in: lets_in(h.caching, !h.locks.is_empty()),
                            node: h.node,
                            away: h.away,
                            orphan: false,
                        });
                    }
                }
            }
        }
        // A hold whose node has no open of the file left is of a node that died.
        for h in &mut v.held {
            h.orphan = !v.others.iter().any(|o| o.node == h.node);
        }
        v
    }

    /// Writes `ops` (and a new version of the file) if the file is still at `seen`.
    /// The revision it was written at, or `None` when the file changed.
    async fn commit(
        &self,
        f: FileKey,
        seen: i64,
        ops: Vec<TxnOp>,
    ) -> Result<Option<i64>, NtStatus> {
        self.commit_or_drop(f, seen, ops, false).await
    }

    /// [`Self::commit`]; with `drop_file`, every key of the file goes instead of `ops` (its
    /// last open went: nothing of the file is left in etcd, and a later admission finds its
    /// version key absent, which a concurrent decision's comparison also sees as a change).
    async fn commit_or_drop(
        &self,
        f: FileKey,
        seen: i64,
        mut ops: Vec<TxnOp>,
        drop_file: bool,
    ) -> Result<Option<i64>, NtStatus> {
        let vkey = self.keys.version(f);
        if drop_file {
            let all = Some(DeleteOptions::new().with_prefix());
            ops = vec![TxnOp::delete(self.keys.file(f), all)];
        } else {
            ops.push(TxnOp::put(vkey.clone(), "", None));
        }
        let txn = Txn::new()
            .when([Compare::mod_revision(vkey, CompareOp::Equal, seen)])
            .and_then(ops);
        let mut c = self.client.clone();
        let r = c.txn(txn).await.map_err(unavailable)?;
        let rev = r.header().map_or(0, |h| h.revision());
        Ok(r.succeeded().then_some(rev))
    }

    /// Room for one more admission waiting for breaks, or `None`. Each holds one of the
    /// server's blocking threads for up to a break's 35 s, so clients that never acknowledge
    /// on another node (or one client sending many opens) could otherwise take them all and
    /// stall every node's file I/O (`[cluster] max_break_waits`).
    pub(crate) fn wait_slot(&self) -> Option<WaitSlot> {
        let (held, max) = &*self.waits;
        held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < *max).then_some(n + 1)
        })
        .ok()
        .map(|_| WaitSlot(self.waits.clone()))
    }

    fn leased(&self) -> Option<PutOptions> {
        Some(PutOptions::new().with_lease(self.lease))
    }

    /// MS-FSA 2.1.5.1.2 and MS-SMB2 3.3.5.9: admits an open this node already admitted
    /// against its own opens, against every other node's: DELETE_PENDING or
    /// SHARING_VIOLATION, or it is recorded. As on one server, an open that conflicts only
    /// with opens whose handles are cached asks their nodes to break them first, and an
    /// admitted open waits until every other node's caching it breaks is acknowledged (or its
    /// time is up), so no client goes on with stale cached data.
    ///
    /// One function of about 150 lines, on purpose: the one-round-trip try, the decision on
    /// the view, the breaks before the share-mode answer, the compared write, and the breaks
    /// and flushes after it share one view, one wait slot and one retry loop, and their order is the rule (a break
    /// request made after the commit would miss a holder; one made before could be answered
    /// before the holder's grant).
    pub async fn admit(
        &self,
        f: FileKey,
        open_id: u64,
        (checked, access, share_access): (u32, u32, u32),
        (path, restoring): (String, bool),
    ) -> Result<Admitted, NtStatus> {
        let record = |caching| {
            let rec = OpenRecord {
                access,
                share_access,
                path: path.clone(),
                caching,
            };
            serde_json::to_vec(&rec).map_err(|_| NtStatus::INTERNAL_ERROR)
        };
        let okey = self.keys.open(f, &self.node, open_id);
        // The common case in one round trip: nothing of the file is in etcd (nobody has it
        // open, locked or delete-pending), so the open is admitted alone and may cache.
        let vkey = self.keys.version(f);
        let fast = Txn::new()
            .when([Compare::mod_revision(vkey.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(okey.clone(), record(ALL_CACHING)?, self.leased()),
                TxnOp::put(vkey, "", None),
            ])
            .or_else([TxnOp::get(
                self.keys.file(f),
                Some(GetOptions::new().with_prefix()),
            )]);
        let mut c = self.client.clone();
        let r = c.txn(fast).await.map_err(unavailable)?;
        let rev = r.header().map_or(0, |h| h.revision());
        if r.succeeded() {
            return Ok(Admitted {
                rev,
                alone: true,
                sole: true,
            });
        }
        let mut first = r.op_responses().into_iter().find_map(|op| match op {
            etcd_client::TxnOpResponse::Get(g) => Some(self.parse_view(g.kvs())),
            _ => None,
        });
        let intent = BreakRequest {
            granted: checked,
            share_access,
            writes: checked & (WRITE_DATA | APPEND_DATA) != 0,
        };
        let deadline = Instant::now() + BREAK_WAIT;
        let mut asked = HashSet::new();
        for _ in 0..MAX_ROUNDS {
            let v = match first.take() {
                Some(v) => v,
                None => self.view(f).await?,
            };
            let mut ops = Vec::new();
            if v.delete_pending {
                if v.others.is_empty()
                    && v.held.is_empty()
                    && v.mine.keys().all(|id| *id == open_id)
                {
                    // Every open that saw the file delete-pending went with a dead node (its
                    // lease dropped them): the mark outlived its opens, as after a crash.
                    ops.push(TxnOp::delete(self.keys.delete_pending(f), None));
                } else {
                    return Err(NtStatus::DELETE_PENDING);
                }
            }
            let conflicting: Vec<&Other> = v
                .others
                .iter()
                .filter(|o| share_conflict((o.access, o.share_access), checked, share_access))
                .collect();
            // A persistent open held again is not refused by those that wait with it (other
            // opens of the same departed node, taken over elsewhere): they were compatible.
            if !restoring && keeps_file_at(path.is_empty()) && v.waiting_refuses(checked) {
                return Err(NtStatus::FILE_NOT_AVAILABLE);
            }
            if !restoring && v.held_conflict(checked, share_access) {
                // A persistent open nobody holds: no break reaches it, and it stands until a
                // node takes it over (then that node's record stands for it).
                return Err(NtStatus::SHARING_VIOLATION);
            }
            if !conflicting.is_empty() {
                let holders = holders_of(&conflicting, HANDLE_CACHING, &asked);
                if holders.is_empty() || Instant::now() > deadline {
                    return Err(NtStatus::SHARING_VIOLATION);
                }
                let slot = self.wait_slot();
                let keys = self.request_breaks(f, &holders, intent).await?;
                if slot.is_none() {
                    // The breaks go on; this open does not wait for them (the client may
                    // try again), as the conflict stands until they are acknowledged.
                    tracing::warn!("sharing violation without waiting: max_break_waits reached");
                    return Err(NtStatus::SHARING_VIOLATION);
                }
                asked.extend(holders);
                self.await_breaks(f, &keys, deadline).await?;
                continue;
            }
            // Alone among the nodes: this node's own table decides caching.
            let alone = v.others.is_empty() && v.held.is_empty();
            let caching = if alone { ALL_CACHING } else { 0 };
            ops.push(TxnOp::put(okey.clone(), record(caching)?, self.leased()));
            let Some(rev) = self.commit(f, v.version, ops).await? else {
                continue;
            };
            // Any caching recorded after this commit saw this open (and is none), so the
            // view read before it names every holder to break.
            let all: Vec<&Other> = v.others.iter().collect();
            let holders = holders_of(&all, u32::MAX, &HashSet::new());
            let admitted = Admitted {
                rev,
                alone,
                sole: false,
            };
            // The other nodes with the file open flush what their opens wrote when they see
            // this admission, then say so (crate::watch): the new open's client reads it.
            let told: HashSet<String> = all.iter().map(|o| o.node.clone()).collect();
            let waited = async {
                // Waiting for breaks or flushes holds a blocking thread: a slot for both.
                let slot = (!holders.is_empty() || !told.is_empty()).then(|| self.wait_slot());
                if let Some(None) = slot {
                    if !holders.is_empty() {
                        // The breaks go on; the open may not go on before them, nor wait.
                        self.request_breaks(f, &holders, intent).await?;
                    }
                    tracing::warn!("open refused without waiting: max_break_waits reached");
                    return Err(NtStatus::INSUFFICIENT_RESOURCES);
                }
                if !holders.is_empty() {
                    let keys = self.request_breaks(f, &holders, intent).await?;
                    self.await_breaks(f, &keys, deadline).await?;
                }
                self.await_acks(f, rev, &told, (FLUSH_WAIT, Seen::Flushed))
                    .await
            };
            if let Err(e) = waited.await {
                let mut c = self.client.clone();
                let _ = c.delete(okey, None).await;
                return Err(e);
            }
            return Ok(admitted);
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// Asks each of `holders` to break its caching for an open like `intent`; the keys to
    /// wait for.
    async fn request_breaks(
        &self,
        f: FileKey,
        holders: &[String],
        intent: BreakRequest,
    ) -> Result<Vec<String>, NtStatus> {
        let value = serde_json::to_vec(&intent).map_err(|_| NtStatus::INTERNAL_ERROR)?;
        let mut keys = Vec::new();
        let mut ops = Vec::new();
        for h in holders {
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            let key = self.keys.break_request(f, h, &self.node, seq);
            ops.push(TxnOp::put(key.clone(), value.clone(), self.leased()));
            keys.push(key);
        }
        let mut c = self.client.clone();
        c.txn(Txn::new().and_then(ops)).await.map_err(unavailable)?;
        Ok(keys)
    }

    /// Waits until every break request in `keys` is done by its holder, or `deadline`
    /// passes (then, as on one server when a break times out, the request goes on; the
    /// keys are removed). A holder whose opens are gone (a dead node) has nothing to break.
    async fn await_breaks(
        &self,
        f: FileKey,
        keys: &[String],
        deadline: Instant,
    ) -> Result<(), NtStatus> {
        let mut pause = Duration::from_millis(2);
        loop {
            let v = self.view(f).await?;
            let live: HashSet<&str> = v.others.iter().map(|o| o.node.as_str()).collect();
            let waiting = v
                .breaks
                .iter()
                .any(|(k, holder)| keys.contains(k) && live.contains(holder.as_str()));
            if !waiting || Instant::now() >= deadline {
                let mut c = self.client.clone();
                let ops: Vec<TxnOp> = keys
                    .iter()
                    .map(|k| TxnOp::delete(k.clone(), None))
                    .collect();
                c.txn(Txn::new().and_then(ops)).await.map_err(unavailable)?;
                return Ok(());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// After this node broke its caching for a request: its opens' records say what they
    /// still cache, and the request is done.
    pub async fn broke(
        &self,
        f: FileKey,
        request: &str,
        caching: &[(u64, u32)],
    ) -> Result<(), NtStatus> {
        let v = self.view(f).await?;
        let mut when = Vec::new();
        let mut ops = Vec::new();
        for (id, bits) in caching {
            let Some(m) = v.mine.get(id).filter(|m| m.rec.caching != *bits) else {
                continue;
            };
            let rec = OpenRecord {
                caching: *bits,
                ..m.rec.clone()
            };
            let value = serde_json::to_vec(&rec).map_err(|_| NtStatus::INTERNAL_ERROR)?;
            let okey = self.keys.open(f, &self.node, *id);
            when.push(Compare::mod_revision(okey.clone(), CompareOp::Equal, m.rev));
            ops.push(TxnOp::put(okey, value, self.leased()));
        }
        let done = TxnOp::delete(request, None);
        let mut c = self.client.clone();
        // Within etcd's operations per transaction; a record that changed meanwhile (its
        // open closed) is left as it is. Either way a record may claim more caching than
        // is left, which costs another node a break that finds nothing: never less.
        if !ops.is_empty() && ops.len() < MAX_TXN_OPS {
            ops.push(done.clone());
            if c.txn(Txn::new().when(when).and_then(ops))
                .await
                .map_err(unavailable)?
                .succeeded()
            {
                return Ok(());
            }
        }
        c.txn(Txn::new().and_then([done]))
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// The share-mode check of [`Self::admit`] without recording anything (before a rename
    /// over the file).
    pub async fn check(&self, f: FileKey, access: u32, share_access: u32) -> Result<(), NtStatus> {
        let v = self.view(f).await?;
        if v.others
            .iter()
            .any(|o| share_conflict((o.access, o.share_access), access, share_access))
            || v.held_conflict(access, share_access)
        {
            return Err(NtStatus::SHARING_VIOLATION);
        }
        Ok(())
    }

    /// Open `open_id` of this node is gone, with its locks. `pending`: the file stays (or
    /// becomes) delete-pending for the opens other nodes still have. `unlinks`: this was the
    /// local table's last open of the file, so this node deletes it when it was the last
    /// anywhere and delete-pending (and then calls `forget`). Says whether this was the
    /// file's last open in the cluster, and whether the file is delete-pending.
    pub async fn release(
        &self,
        f: FileKey,
        open_id: u64,
        (pending, unlinks): (bool, bool),
        admitted: Option<Admitted>,
    ) -> Result<Released, NtStatus> {
        // The common case in one round trip: the open was admitted alone and nothing of the
        // file changed since (any other open, lock or delete-pending mark moves the version
        // key), so this is its last open and every key of the file goes.
        if let Some(a) = admitted.filter(|a| a.sole && !pending) {
            let all = Some(DeleteOptions::new().with_prefix());
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    self.keys.version(f),
                    CompareOp::Equal,
                    a.rev,
                )])
                .and_then([TxnOp::delete(self.keys.file(f), all)]);
            let mut c = self.client.clone();
            if c.txn(txn).await.map_err(unavailable)?.succeeded() {
                return Ok(Released {
                    last: true,
                    delete_pending: false,
                });
            }
        }
        for _ in 0..MAX_ROUNDS {
            let v = self.view(f).await?;
            let last =
                v.others.is_empty() && v.held.is_empty() && v.mine.keys().all(|id| *id == open_id);
            // The last open of a delete-pending file: this node deletes it now. Until the
            // name is gone (`forget`), the open's record stays with the mark, so an admission
            // on another node meanwhile is refused DELETE_PENDING, as one server makes it
            // wait (MS-FSA 2.1.5.4), rather than open a file about to lose its name.
            let deleting = unlinks && last && (pending || v.delete_pending);
            let mut ops = vec![TxnOp::delete(
                self.keys.locks_of(f, &self.node, open_id),
                Some(DeleteOptions::new().with_prefix()),
            )];
            if !deleting {
                ops.push(TxnOp::delete(self.keys.open(f, &self.node, open_id), None));
            }
            if pending && !v.delete_pending {
                let dkey = self.keys.delete_pending(f);
                ops.push(TxnOp::put(dkey, self.node.as_bytes(), None));
            }
            let drop = last && !(pending || v.delete_pending);
            if self
                .commit_or_drop(f, v.version, ops, drop)
                .await?
                .is_some()
            {
                return Ok(Released {
                    last,
                    delete_pending: v.delete_pending || pending,
                });
            }
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// Whether another node has a file open strictly below directory `dir` (share-relative,
    /// `/`-separated; empty for the root), but file `except`. Paths are compared without
    /// case and without the share, so an open at the same path in another share also counts:
    /// a directory rename is refused then, which errs on the safe side (MS-FSA 2.1.5.15.11).
    /// Reads every open in the cluster: renames of directories are rare.
    pub async fn any_open_below(&self, dir: String, except: FileKey) -> Result<bool, NtStatus> {
        let (all, _) = self
            .read_all(&self.keys.files())
            .await
            .map_err(unavailable)?;
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{}/", dir.to_lowercase())
        };
        Ok(all.iter().any(|kv| {
            let Some((f, entry)) = kv.key_str().ok().and_then(|k| self.keys.parse(k)) else {
                return false;
            };
            let other_file = FileKey { stream: 0, ..f }
                != FileKey {
                    stream: 0,
                    ..except
                };
            // An open of another node, or a persistent open another node holds or held.
            let (node, path) = match entry {
                Entry::Open { node, .. } => {
                    match serde_json::from_slice::<OpenRecord>(kv.value()) {
                        Ok(rec) => (node, rec.path),
                        Err(_) => return false,
                    }
                }
                Entry::Hold { .. } => match serde_json::from_slice::<Hold>(kv.value()) {
                    Ok(h) => (h.node, h.path),
                    Err(_) => return false,
                },
                _ => return false,
            };
            node != *self.node && other_file && path.to_lowercase().starts_with(&prefix)
        }))
    }

    /// Open `open_id`'s file is at `path` now (a rename): its record says so, for the checks
    /// of other nodes' directory renames.
    pub async fn set_path(&self, f: FileKey, open_id: u64, path: String) -> Result<(), NtStatus> {
        let v = self.view(f).await?;
        let Some(m) = v.mine.get(&open_id) else {
            return Ok(());
        };
        let rec = OpenRecord {
            path,
            ..m.rec.clone()
        };
        let value = serde_json::to_vec(&rec).map_err(|_| NtStatus::INTERNAL_ERROR)?;
        let mut c = self.client.clone();
        let key = self.keys.open(f, &self.node, open_id);
        // Not if the open closed meanwhile: its record stays gone.
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, m.rev)])
            .and_then([TxnOp::put(key, value, self.leased())]);
        c.txn(txn).await.map_err(unavailable)?;
        Ok(())
    }

    /// Removes what is left of files nobody has open: a node that died while it held a
    /// file's last opens leaves the file's version and delete-pending keys (they hang on no
    /// lease). Each file goes in a transaction that holds only if the file did not change
    /// since it was read, so an admission meanwhile keeps it. The number of files removed.
    pub async fn sweep(&self) -> Result<usize, NtStatus> {
        let files = self.keys.files();
        let (all, _) = self.read_all(&files).await.map_err(unavailable)?;
        // Per file (its key prefix): the version key's mod revision, and whether an open or
        // a lock is left (each on a live node's lease).
        let mut seen: HashMap<String, (i64, bool)> = HashMap::new();
        for kv in &all {
            let Ok(key) = kv.key_str() else { continue };
            let Some((file, rest)) = key
                .strip_prefix(files.as_str())
                .and_then(|r| r.split_once('/'))
            else {
                continue;
            };
            let e = seen.entry(format!("{files}{file}/")).or_default();
            match rest.split('/').next() {
                Some("v") => e.0 = kv.mod_revision(),
                // A break request outlives its requester's wait only when its holder died
                // or never answered: with no open left, nobody is waiting for it.
                // A persistent open's hold stands for its open while its node is away.
                Some("o" | "l" | "p") => e.1 = true,
                _ => {}
            }
        }
        let mut c = self.client.clone();
        let mut removed = 0;
        for (prefix, (version, live)) in seen {
            if live {
                continue;
            }
            let all = Some(DeleteOptions::new().with_prefix());
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    format!("{prefix}v"),
                    CompareOp::Equal,
                    version,
                )])
                .and_then([TxnOp::delete(prefix, all)]);
            if c.txn(txn).await.map_err(unavailable)?.succeeded() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The file is gone (or its delete failed) after its last close (`release`): every key
    /// of it goes, the closing open's record and the delete-pending mark with them.
    pub async fn forget(&self, f: FileKey) -> Result<(), NtStatus> {
        let mut c = self.client.clone();
        let all = Some(DeleteOptions::new().with_prefix());
        c.delete(self.keys.file(f), all)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// MS-FSA 2.1.5.15.3: the file becomes delete-pending, or stops being so, for every node.
    pub async fn set_delete_pending(&self, f: FileKey, pending: bool) -> Result<(), NtStatus> {
        for _ in 0..MAX_ROUNDS {
            let v = self.view(f).await?;
            if v.delete_pending == pending {
                return Ok(());
            }
            let dkey = self.keys.delete_pending(f);
            let op = if pending {
                TxnOp::put(dkey, self.node.as_bytes(), None)
            } else {
                TxnOp::delete(dkey, None)
            };
            if self.commit(f, v.version, vec![op]).await?.is_some() {
                return Ok(());
            }
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// MS-FSA 2.1.5.7: a lock this node granted against its own locks, against every other
    /// node's: LOCK_NOT_GRANTED, or it is recorded. It is granted only once every other node
    /// with the file open has it in its view (crate::remote), so their READs and WRITEs
    /// respect it from the moment the client hears it is locked (MS-FSA 2.1.4.10) without
    /// asking etcd. A node that does not say so in time fails the lock (SERVER_UNAVAILABLE).
    pub async fn lock(
        &self,
        f: FileKey,
        owner: u64,
        (offset, length, exclusive): (u64, u64, bool),
    ) -> Result<(), NtStatus> {
        for _ in 0..MAX_ROUNDS {
            let v = self.view(f).await?;
            // The open closed meanwhile (its close removed its record): no lock may outlive
            // it in etcd.
            if !v.mine.contains_key(&owner) {
                return Err(NtStatus::FILE_CLOSED);
            }
            if v.other_locks
                .iter()
                .any(|&held| lock_conflict(held, offset, length, exclusive))
            {
                return Err(NtStatus::LOCK_NOT_GRANTED);
            }
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            let key = self
                .keys
                .lock(f, &self.node, owner, (offset, length, exclusive), seq);
            let op = TxnOp::put(key.clone(), "", self.leased());
            let Some(rev) = self.commit(f, v.version, vec![op]).await? else {
                continue;
            };
            let told: HashSet<String> = v.others.iter().map(|o| o.node.clone()).collect();
            if let Err(e) = self
                .await_acks(f, rev, &told, (ACK_WAIT, Seen::Changes))
                .await
            {
                let mut c = self.client.clone();
                let _ = c.delete(key, None).await;
                return Err(e);
            }
            // MS-FSA 2.1.5.7: a lock breaks the read caching (level II oplocks, R leases) of
            // other opens to none; other nodes' is theirs to break, as for a writer's open.
            // A break to none needs no acknowledgment, so the lock does not wait for it.
            let readers: Vec<&Other> = v.others.iter().collect();
            let holders = holders_of(&readers, READ_CACHING, &HashSet::new());
            if !holders.is_empty() {
                let intent = BreakRequest {
                    granted: 0,
                    share_access: SHARE_ALL,
                    writes: true,
                };
                if let Err(e) = self.request_breaks(f, &holders, intent).await {
                    tracing::warn!(status = ?e, "read caching on other nodes not broken");
                }
            }
            return Ok(());
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// Waits until each of `nodes` that still has the file open says it has seen the file's
    /// changes up to `rev`.
    async fn await_acks(
        &self,
        f: FileKey,
        rev: i64,
        nodes: &HashSet<String>,
        (within, what): (Duration, Seen),
    ) -> Result<(), NtStatus> {
        if nodes.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + within;
        let mut pause = Duration::from_millis(1);
        loop {
            let v = self.view(f).await?;
            let open: HashSet<&str> = v.others.iter().map(|o| o.node.as_str()).collect();
            let said = match what {
                Seen::Changes => &v.acks,
                Seen::Flushed => &v.flushed,
            };
            let waiting = nodes
                .iter()
                .any(|n| open.contains(n.as_str()) && said.get(n).is_none_or(|seen| *seen < rev));
            if !waiting {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(NtStatus::SERVER_UNAVAILABLE);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// This node has seen the file's changes up to `rev` (crate::remote), or (`what` =
    /// Flushed) flushed what it wrote before another node's admission at `rev`.
    pub async fn ack(&self, f: FileKey, rev: i64, what: Seen) -> Result<(), NtStatus> {
        let mut c = self.client.clone();
        let key = match what {
            Seen::Changes => self.keys.ack(f, &self.node),
            Seen::Flushed => self.keys.flushed(f, &self.node),
        };
        // Acknowledgments run concurrently, so one may come after a later one: the value
        // only grows (fixed-width hex, which etcd's byte-wise comparison orders as numbers).
        let seen = format!("{rev:016x}");
        let put = || TxnOp::put(key.clone(), seen.clone(), self.leased());
        let first = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([put()])
            .or_else([TxnOp::txn(
                Txn::new()
                    .when([Compare::value(key.clone(), CompareOp::Less, seen.clone())])
                    .and_then([put()]),
            )]);
        // Only while the file has state here: an ack after its last close would outlive it.
        let txn = Txn::new()
            .when([Compare::version(
                self.keys.version(f),
                CompareOp::Greater,
                0,
            )])
            .and_then([TxnOp::txn(first)]);
        c.txn(txn).await.map_err(unavailable)?;
        Ok(())
    }

    /// MS-FSA 2.1.5.9: one lock of exactly this range by `owner` goes, an exclusive one
    /// first, as the local table takes it (keys in descending order: `x` before `s`).
    pub async fn unlock(&self, f: FileKey, owner: u64, range: (u64, u64)) -> Result<(), NtStatus> {
        let mut c = self.client.clone();
        let prefix = self.keys.lock_range(f, &self.node, owner, range);
        let opts = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Key, SortOrder::Descend)
            .with_limit(1)
            .with_keys_only();
        let r = c.get(prefix, Some(opts)).await.map_err(unavailable)?;
        if let Some(kv) = r.kvs().first() {
            c.delete(kv.key(), None).await.map_err(unavailable)?;
        }
        Ok(())
    }
}

/// What a node acknowledges ([`Store::ack`]): the two are kept apart, so a LOCK's
/// acknowledgment, given at once, never stands for a flush still under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Its view of other nodes' locks has the file's changes (crate::remote).
    Changes,
    /// It flushed what its opens wrote before another node's admission.
    Flushed,
}

/// An admission: the revision it was recorded at, whether no other node had the file open
/// then (its open may cache; crate::state), and whether nothing at all of the file was in
/// etcd (then, if nothing changed since, its close removes every key of the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    pub rev: i64,
    pub alone: bool,
    pub sole: bool,
}

/// What [`Store::release`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// No other open of the file is left, on any node.
    pub last: bool,
    /// The file is delete-pending (here or on another node).
    pub delete_pending: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(lets_in: bool, away: bool, orphan: bool) -> Held {
        Held {
            node: "n0".into(),
            modes: (WRITE_DATA, 0),
            lets_in,
            away,
            orphan,
        }
    }

    fn view(h: Held) -> View {
        View {
            held: vec![h],
            ..View::default()
        }
    }

    /// MS-SMB2 3.3.5.9 across nodes: a persistent open waiting for its client refuses other
    /// opens (but stat opens) unless its caching lets them in; a hold stands for its share
    /// mode itself only while no node holds the open (otherwise that node's record does).
    #[test]
    fn a_persistent_open_waiting_for_its_client_refuses_as_on_one_server() {
        const STAT: u32 = 0x80; // FILE_READ_ATTRIBUTES
        for (h, refuses) in [
            (held(false, true, false), true),
            (held(false, false, true), true),
            (held(true, true, true), false),
            (held(false, false, false), false),
        ] {
            let v = view(h);
            assert_eq!(v.waiting_refuses(WRITE_DATA), refuses, "{:?}", v.held);
            assert!(!v.waiting_refuses(STAT));
        }
        assert!(view(held(true, true, true)).held_conflict(WRITE_DATA, SHARE_ALL));
        assert!(!view(held(true, true, false)).held_conflict(WRITE_DATA, SHARE_ALL));
        assert!(!view(held(true, true, true)).held_conflict(STAT, SHARE_ALL));
    }
}
