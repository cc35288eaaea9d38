//! Scale-out (docs/cluster.md): several smbq nodes serve one namespace on a shared file
//! system, and what one node's opens hold on a file is seen by every other node through etcd.
//!
//! A node keeps its own in-process open state (smbq-server's table) and wraps it
//! ([`Cluster::wrap`]) in an [`OpenState`] that also asks etcd where the rules cross nodes:
//! share modes and delete-pending at admission, byte-range locks at LOCK, the last close of a
//! delete-pending file, and oplock and lease breaks (crate::breaks). READ and WRITE never ask
//! etcd: they check other nodes' locks in this node's view (crate::remote), which every
//! node with the file open confirms before a LOCK is granted.
//!
//! Each node holds an etcd lease (its liveness): its opens and locks are keys on that lease,
//! so etcd drops them when the node dies. A node that cannot renew its lease for two thirds of
//! its time to live fences itself: every decision that crosses nodes fails with
//! STATUS_SERVER_UNAVAILABLE (clients retry) until etcd answers again. A node whose lease
//! expired, or that could not renew it for its whole time to live (it may have expired), has
//! lost its opens' records and must stop: [`Cluster::lost`] resolves.

#![forbid(unsafe_code)]

mod breaks;
mod budget;
pub mod ca;
pub mod keys;
pub mod marks;
mod remote;
mod state;
pub mod store;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{Compare, CompareOp, ConnectOptions, PutOptions, Txn, TxnOp, WatchOptions};
use smbq_server::durable::store::{Record, RecordStore};
use smbq_server::file_state::FileKey;
use smbq_server::open_state::{Effects, OpenState, Queries as _};
use smbq_wire::NtStatus;
use tokio::sync::Notify;

use crate::keys::{Keys, NodeRecord};
use crate::remote::RemoteView;
use crate::store::Seen;
use crate::store::Store;

/// How a node joins the cluster (`[cluster]` in smbq.toml, `--cluster`, `--node`).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// etcd endpoints, `http://HOST:PORT`.
    pub endpoints: Vec<String>,
    /// This node's name, unique in the cluster.
    pub node: String,
    /// The node lease's time to live: a dead node's opens are released this long after it
    /// stopped renewing (etcd may add up to a second).
    pub ttl: Duration,
    /// Where in etcd's key space the cluster lives.
    pub prefix: String,
    /// How long one decision may wait for etcd before the client hears SERVER_UNAVAILABLE.
    pub timeout: Duration,
    /// The file systems this node serves, as (device number here, a name every node gives
    /// it): files are identified across nodes by volume, inode and stream (crate::keys).
    pub volumes: Vec<(u64, String)>,
    /// The shares this node serves, (name, root directory): each root must carry the
    /// cluster's mark for the share (crate::marks), or the node does not join.
    pub shares: Vec<(String, std::path::PathBuf)>,
    /// Open and lock records this node may hold in etcd at once; past it an open or a lock
    /// gets STATUS_INSUFFICIENT_RESOURCES. etcd's space is shared by every node (and refuses
    /// every write once its quota is spent), so one node's clients may not fill it.
    pub max_records: usize,
    /// Admissions that may wait at once for other nodes' clients to acknowledge breaks;
    /// past it an open that would wait gets SHARING_VIOLATION (a conflict with a cached
    /// handle) or INSUFFICIENT_RESOURCES, and the breaks still go out.
    pub max_break_waits: usize,
    /// The range of open ids this node hands out (smbq-server's `config::open_id_base`):
    /// no other live node may have the same, or an open moved between them could not keep
    /// its FileId. Checked at join.
    pub open_ids: u32,
}

impl ClusterConfig {
    pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
    pub const DEFAULT_PREFIX: &str = "/smbq/";
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
    pub const DEFAULT_MAX_RECORDS: usize = 100_000;
    /// An eighth of tokio's default blocking pool (512): each wait holds a blocking thread.
    pub const DEFAULT_MAX_BREAK_WAITS: usize = 64;

    pub fn new(endpoints: Vec<String>, node: String) -> ClusterConfig {
        ClusterConfig {
            endpoints,
            node,
            ttl: Self::DEFAULT_TTL,
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            timeout: Self::DEFAULT_TIMEOUT,
            volumes: Vec::new(),
            shares: Vec::new(),
            max_records: Self::DEFAULT_MAX_RECORDS,
            max_break_waits: Self::DEFAULT_MAX_BREAK_WAITS,
            open_ids: 0,
        }
    }
}

/// A node's membership: its etcd connection, lease and fence.
pub struct Cluster {
    store: Store,
    /// The runtime etcd's client runs on: its own threads, so a handler blocked on a decision
    /// never holds up the client's I/O.
    rt: tokio::runtime::Handle,
    started: Instant,
    /// Milliseconds after `started` of the last renewal etcd confirmed.
    renewed_ms: Arc<AtomicU64>,
    fence_after: Duration,
    timeout: Duration,
    lost: Arc<Notify>,
    is_lost: Arc<AtomicBool>,
    /// Carries out breaks this node sends for other nodes' opens (`Server::apply_effects`).
    sink: OnceLock<Sink>,
    /// Tells the watch to start again from a full read (etcd came back).
    rewatch: Notify,
    /// `ClusterConfig::max_records`.
    max_records: usize,
    /// Persistent opens' records (crate::ca), once a continuously available share asks.
    records: OnceLock<Arc<ca::EtcdRecords>>,
    /// The server's side of persistent opens moving between nodes (crate::ca).
    holder: OnceLock<Holder>,
    /// Other nodes' opens and locks as the watch sees them (crate::remote), once wrapped.
    remote: OnceLock<Arc<RemoteView>>,
}

/// The server's side of persistent opens moving between nodes (crate::ca).
pub struct Holder {
    /// Holds persistent opens taken over from a departed node again, each parked for its
    /// client (smbq-server's `Server::adopt_persistent`).
    pub adopt: Box<dyn Fn(Vec<Record>) + Send + Sync>,
    /// Gives up a parked durable open for another node, returning its record (smbq-server's
    /// `Server::hand_over_parked`), off the etcd client's runtime.
    pub hand_over: HandOver,
}

/// Gives up parked open ID for another node's reclaim by USER (with CREATE_GUID when named).
pub type HandOver =
    Box<dyn Fn(u64, String, Option<[u8; 16]>) -> BoxFuture<Option<Record>> + Send + Sync>;

/// A future the server runs for the cluster.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn Future<Output = T> + Send>>;

/// Where a node's breaks for other nodes' opens go: the server's delivery.
pub type Sink = Box<dyn Fn(Effects) + Send + Sync>;

impl Cluster {
    /// Connects, takes the node's name (waiting, up to the lease's time to live, for a
    /// previous process of the same node to expire) and starts renewing its lease.
    pub async fn join(cfg: ClusterConfig) -> Result<Arc<Cluster>, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("smbq-etcd")
            .enable_all()
            .build()
            .map_err(|e| format!("etcd runtime: {e}"))?;
        let handle = rt.handle().clone();
        // The runtime lives as long as the process.
        std::thread::Builder::new()
            .name("smbq-etcd".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .map_err(|e| format!("etcd runtime: {e}"))?;
        let c = cfg.clone();
        let store = handle
            .spawn(async move { connect(&c).await })
            .await
            .map_err(|e| e.to_string())??;
        let cluster = Arc::new(Cluster {
            store,
            rt: handle,
            started: Instant::now(),
            renewed_ms: Arc::new(AtomicU64::new(0)),
            fence_after: cfg.ttl * 2 / 3,
            timeout: cfg.timeout,
            lost: Arc::new(Notify::new()),
            is_lost: Arc::new(AtomicBool::new(false)),
            sink: OnceLock::new(),
            rewatch: Notify::new(),
            max_records: cfg.max_records,
            records: OnceLock::new(),
            holder: OnceLock::new(),
            remote: OnceLock::new(),
        });
        cluster.rt.spawn(cluster.clone().renew(cfg.ttl));
        cluster.rt.spawn(cluster.clone().watchdog(cfg.ttl));
        cluster.rt.spawn(sweeper(cluster.clone()));
        Ok(cluster)
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.store.node
    }

    /// Wraps this node's own open state (`smbq_server::Server::local_open_state`) so that
    /// what crosses nodes is decided with etcd (crate::state).
    pub fn wrap(self: &Arc<Self>, local: Box<dyn OpenState>) -> Box<dyn OpenState> {
        let local: Arc<dyn OpenState> = Arc::from(local);
        let remote = self.remote.get_or_init(Arc::default).clone();
        self.rt
            .spawn(watch(self.clone(), local.clone(), remote.clone()));
        let max = self.max_records;
        Box::new(state::ClusterState::new(self.clone(), local, remote, max))
    }

    /// The store of this node's persistent opens' records, in etcd (crate::ca), for the
    /// server (smbq-server's `Server::use_record_store`).
    pub fn records(self: &Arc<Self>) -> Arc<dyn RecordStore> {
        self.ca_records().clone()
    }

    fn ca_records(self: &Arc<Self>) -> &Arc<ca::EtcdRecords> {
        self.records
            .get_or_init(|| Arc::new(ca::EtcdRecords::new(self.clone())))
    }

    /// Takes over the persistent opens of nodes that are gone, this node's earlier process
    /// among them, and returns them for the server to hold again. From then on, the opens of
    /// every node that leaves go to `holder`, and so do other nodes' requests for opens
    /// parked here (crate::ca).
    pub async fn adopt(self: &Arc<Self>, holder: Holder) -> Result<Vec<Record>, String> {
        self.ca_records();
        let store = self.store.clone();
        let taken = self
            .rt
            .spawn(async move { store.orphans(true).await })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("reading persistent opens from etcd: {e:?}"))?;
        let _ = self.holder.set(holder);
        Ok(taken)
    }

    /// Takes over what departed nodes held of persistent opens, and hands it to the server.
    async fn adopt_departed(self: &Arc<Self>) {
        let Some(holder) = self.holder.get() else {
            return;
        };
        match self.store.orphans(false).await {
            Ok(taken) if !taken.is_empty() => (holder.adopt)(taken),
            Ok(_) => {}
            Err(e) => tracing::warn!(status = ?e, "persistent opens of departed nodes not read"),
        }
    }

    /// Sets where the breaks this node sends for other nodes' opens go (once; the server
    /// exists only after its open state, [`Self::wrap`]).
    pub fn deliver_to(&self, sink: Sink) {
        let _ = self.sink.set(sink);
    }

    /// Resolves when the node's lease expired in etcd: its opens' records are gone and other
    /// nodes may grant what they held, so the node must stop serving them.
    pub async fn lost(&self) {
        let notified = self.lost.notified();
        if self.is_lost.load(Ordering::Acquire) {
            return;
        }
        notified.await;
    }

    /// Leaves at shutdown: the lease is revoked, so the node's opens are released at once
    /// rather than when it would have expired.
    pub async fn leave(&self) {
        let store = self.store.clone();
        let revoke = async move {
            let mut c = store.client.clone();
            c.lease_revoke(store.lease).await
        };
        match tokio::time::timeout(self.timeout, self.rt.spawn(revoke)).await {
            Ok(Ok(Ok(_))) => {}
            _ => tracing::warn!("could not revoke the node's etcd lease; it expires on its own"),
        }
    }

    /// Whether the node fences itself: etcd has not confirmed its lease for long enough that
    /// it may have expired, so nothing that could conflict is granted.
    pub fn fenced(&self) -> bool {
        let renewed = Duration::from_millis(self.renewed_ms.load(Ordering::Acquire));
        self.started.elapsed().saturating_sub(renewed) > self.fence_after
    }

    /// Runs one decision on the etcd runtime and waits for it, from a handler's thread (the
    /// open-state verbs are synchronous). A decision etcd could not take (a member restarting,
    /// a leader being elected) is tried again until the configured time is up; each is one
    /// transaction that holds only if the file did not change, so trying again is safe. A
    /// fenced node, an etcd that does not answer in time, or a lost lease are
    /// STATUS_SERVER_UNAVAILABLE.
    fn decide<T, F>(&self, work: impl Fn(Store) -> F + Send + Sync + 'static) -> Result<T, NtStatus>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, NtStatus>> + Send + 'static,
    {
        self.decide_within(self.timeout, work)
    }

    /// [`Self::decide`] for a decision that may wait on other nodes' clients for up to
    /// `limit` (an admission waiting for breaks); etcd itself still has the configured time.
    fn decide_within<T, F>(
        &self,
        limit: Duration,
        work: impl Fn(Store) -> F + Send + Sync + 'static,
    ) -> Result<T, NtStatus>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, NtStatus>> + Send + 'static,
    {
        if self.fenced() || self.is_lost.load(Ordering::Acquire) {
            return Err(NtStatus::SERVER_UNAVAILABLE);
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let store = self.store.clone();
        let retry_for = self.timeout;
        self.rt.spawn(async move {
            let start = Instant::now();
            let tries = async {
                loop {
                    match work(store.clone()).await {
                        Err(NtStatus::SERVER_UNAVAILABLE) if start.elapsed() < retry_for => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        r => return r,
                    }
                }
            };
            let r = tokio::time::timeout(limit.max(retry_for), tries)
                .await
                .unwrap_or(Err(NtStatus::SERVER_UNAVAILABLE));
            let _ = tx.send(r);
        });
        let wait = move || rx.recv().unwrap_or(Err(NtStatus::SERVER_UNAVAILABLE));
        match tokio::runtime::Handle::try_current() {
            // A worker of the server's runtime: its other tasks move to other threads while
            // this one waits.
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        }
    }

    /// The node stops serving (`lost` resolves).
    fn lose(&self, why: &str) {
        tracing::error!(node = %self.store.node, "{why}; stopping");
        self.is_lost.store(true, Ordering::Release);
        self.lost.notify_waiters();
    }

    /// A node that etcd has not confirmed for its whole time to live may have lost its lease:
    /// then other nodes can already grant what its opens hold, while its clients still read
    /// and write through them. It stops, as a partitioned node must, whether etcd is down
    /// for everyone or only unreachable from here (it cannot tell which).
    async fn watchdog(self: Arc<Self>, ttl: Duration) {
        let tick = (ttl / 8).max(Duration::from_millis(100));
        loop {
            tokio::time::sleep(tick).await;
            if self.is_lost.load(Ordering::Acquire) {
                return;
            }
            let renewed = Duration::from_millis(self.renewed_ms.load(Ordering::Acquire));
            // One tick early: the check runs every tick, and must not come after the expiry.
            if self.started.elapsed().saturating_sub(renewed) + tick >= ttl {
                self.lose("no etcd lease renewal for the lease's whole time to live: other nodes may hold this node's opens");
                return;
            }
        }
    }

    /// Tries `work` again in the background until etcd takes it: a release or an unlock
    /// that failed (etcd away, the node fenced) must not leave a record that the node's
    /// still-renewed lease keeps forever. Each is idempotent. Ends when the node is lost.
    fn retry_later<F>(
        self: &Arc<Self>,
        what: &'static str,
        work: impl Fn(Store) -> F + Send + 'static,
    ) where
        F: Future<Output = Result<(), NtStatus>> + Send + 'static,
    {
        let me = self.clone();
        self.rt.spawn(async move {
            let mut pause = Duration::from_millis(200);
            while !me.is_lost.load(Ordering::Acquire) {
                tokio::time::sleep(pause).await;
                if !me.fenced() && work(me.store.clone()).await.is_ok() {
                    tracing::info!(what, "done after a retry");
                    return;
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        });
    }

    /// Renews the lease every third of its time to live, recording each confirmation; says
    /// when etcd reports it expired.
    async fn renew(self: Arc<Self>, ttl: Duration) {
        let every = ttl / 3;
        let mut client = self.store.client.clone();
        let mut failed = false;
        loop {
            let Ok((mut keeper, mut answers)) = client.lease_keep_alive(self.store.lease).await
            else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            loop {
                // A confirmed renewal counts from when it was sent: etcd's lease runs from
                // when it got it, which is no earlier.
                let sent = self.started.elapsed().as_millis();
                if keeper.keep_alive().await.is_err() {
                    break;
                }
                match tokio::time::timeout(every, answers.message()).await {
                    Ok(Ok(Some(a))) if a.ttl() > 0 => {
                        let sent = u64::try_from(sent).unwrap_or(u64::MAX);
                        self.renewed_ms.store(sent, Ordering::Release);
                        if std::mem::take(&mut failed) {
                            // etcd is back: the watch may have sat on a member that lost
                            // the others; it reads everything again.
                            tracing::info!(node = %self.store.node, "etcd answers again");
                            self.rewatch.notify_one();
                        }
                    }
                    Ok(Ok(Some(_))) => {
                        self.lose("the node's etcd lease expired: its opens are no longer held");
                        return;
                    }
                    _ => break,
                }
                tokio::time::sleep(every).await;
            }
            failed = true;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Connects to etcd, takes a lease and registers the node under it.
async fn connect(cfg: &ClusterConfig) -> Result<Store, String> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(cfg.timeout)
        .with_timeout(cfg.timeout);
    let mut client = etcd_client::Client::connect(&cfg.endpoints, Some(opts))
        .await
        .map_err(|e| format!("etcd {}: {e}", cfg.endpoints.join(",")))?;
    let ttl = i64::try_from(cfg.ttl.as_secs().max(2)).unwrap_or(i64::MAX);
    let keys = Keys::new(&cfg.prefix, keys::Volumes::new(&cfg.volumes));
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let record = serde_json::to_vec(&NodeRecord {
        since,
        open_ids: cfg.open_ids,
    })
    .map_err(|e| e.to_string())?;
    // A share served from another file system than the other nodes' keeps the node out.
    // In one order on every node: two shares on one root get the same mark everywhere.
    let mut shares = cfg.shares.clone();
    shares.sort_by_key(|(name, _)| name.to_lowercase());
    for (name, path) in &shares {
        match marks::check(&client, &keys, (name, path.clone())).await? {
            marks::Checked::Same => {}
            marks::Checked::Marked => {
                tracing::info!(share = %name, "share root marked for the cluster")
            }
            marks::Checked::Unmarkable => tracing::warn!(
                share = %name,
                "the share's file system takes no extended attributes: that every node serves \
                 it from the same one is not checked"
            ),
        }
    }
    let key = keys.node(&cfg.node);
    // Open ids must not collide with a live node's (they move between nodes with their
    // opens): two names whose hashes share a range cannot both be in the cluster.
    let nodes = client
        .get(
            keys.nodes(),
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    for kv in nodes.kvs() {
        let other = kv
            .key_str()
            .unwrap_or_default()
            .trim_start_matches(&keys.nodes());
        let same = serde_json::from_slice::<NodeRecord>(kv.value())
            .is_ok_and(|r| r.open_ids == cfg.open_ids);
        if same && other != cfg.node {
            return Err(format!(
                "nodes {other} and {} would hand out the same open ids: give one another name",
                cfg.node
            ));
        }
    }
    // A node restarted at once finds its previous process's entry until that lease expires.
    // Each try takes a fresh lease, so the one kept has not aged while waiting.
    let deadline = Instant::now() + cfg.ttl + Duration::from_secs(2);
    let lease = loop {
        let lease = client
            .lease_grant(ttl, None)
            .await
            .map_err(|e| format!("etcd lease: {e}"))?
            .id();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                record.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )]);
        let r = client.txn(txn).await.map_err(|e| format!("etcd: {e}"))?;
        if r.succeeded() {
            break lease;
        }
        let _ = client.lease_revoke(lease).await;
        if Instant::now() > deadline {
            return Err(format!("node {} is already in the cluster", cfg.node));
        }
        tracing::info!(node = %cfg.node, "waiting for this node's previous lease to expire");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    Ok(Store {
        client,
        keys,
        node: Arc::from(cfg.node.as_str()),
        lease,
        seq: Arc::new(AtomicU64::new(0)),
        waits: Arc::new((AtomicUsize::new(0), cfg.max_break_waits)),
        ca_mine: Arc::default(),
        adopting: Arc::default(),
        handed_in: Arc::default(),
    })
}

/// Keeps this node's view of other nodes' locks (crate::remote), wakes this node's waiters
/// on a file whenever another node changes it (a blocked LOCK tries again when a remote lock
/// or open goes), and carries out the break requests addressed to this node (crate::breaks).
/// Each time it (re)starts it reads every key first and watches from that revision on.
async fn watch(cluster: Arc<Cluster>, local: Arc<dyn OpenState>, remote: Arc<RemoteView>) {
    let store = &cluster.store;
    let prefix = store.keys.files();
    loop {
        let mut c = store.client.clone();
        let Ok((all, rev)) = store.read_all(&prefix).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let mut loaded = remote::Loaded::default();
        // Other nodes' admissions of files open here, which the watch may have missed while
        // it was away: flushed and acknowledged now (the latest of each file).
        let mut to_flush: HashMap<FileKey, i64> = HashMap::new();
        for kv in &all {
            let Ok(key) = kv.key_str() else { continue };
            match store.keys.parse(key) {
                Some((f, keys::Entry::Lock { node, lock, .. })) if node != *store.node => {
                    loaded.locks.push((f, (key.to_owned(), lock)));
                }
                Some((f, keys::Entry::Open { node, .. })) if node != *store.node => {
                    loaded.opens.push((f, key.to_owned()));
                    if local.open_count_any(f) > 0 {
                        let rev = to_flush.entry(f).or_default();
                        *rev = (*rev).max(kv.mod_revision());
                    }
                }
                Some((f, keys::Entry::DeletePending)) => {
                    loaded.pending.insert(f);
                }
                Some((f, keys::Entry::Hold { open_id })) => {
                    if let Some(locks) = hold_locks(kv.value()) {
                        loaded.holds.push((f, key.to_owned(), (open_id, locks)));
                    }
                }
                // A request made while the watch was away is carried out now.
                Some((_, keys::Entry::Break { .. })) => {
                    apply_event(&cluster, &local, &remote, kv, true);
                }
                _ => {}
            }
        }
        remote.reset(loaded, rev);
        for (f, at) in to_flush {
            tokio::spawn(flush_then_ack(cluster.clone(), f, at));
        }
        let opts = WatchOptions::new()
            .with_prefix()
            .with_start_revision(rev + 1);
        let Ok(mut events) = c.watch(prefix.clone(), Some(opts)).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        loop {
            let r = tokio::select! {
                r = events.message() => r,
                () = cluster.rewatch.notified() => break,
            };
            let Ok(Some(r)) = r else { break };
            if r.canceled() {
                break; // compacted past us, or etcd gave up: read everything again
            }
            for ev in r.events() {
                if let Some(kv) = ev.kv() {
                    let put = ev.event_type() == etcd_client::EventType::Put;
                    apply_event(&cluster, &local, &remote, kv, put);
                    // Applied up to the events themselves, not the response's header: a
                    // watch catching up gets its events in batches stamped with the current
                    // revision. An admission waits for its own write's event.
                    remote.advance(kv.mod_revision());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How often a node looks for persistent opens of departed nodes nobody took over, besides
/// when a node leaves.
const ADOPT_AGAIN: Duration = Duration::from_secs(10);

/// Sweeps (crate::store::Store::sweep) when this node starts and whenever a node leaves
/// the cluster (its entry under `nodes/` goes with its lease, and its opens with it). Each
/// node waits a little, by its name, so that they do not all read at once.
async fn sweeper(cluster: Arc<Cluster>) {
    let store = &cluster.store;
    let spread = store.node.bytes().map(u64::from).sum::<u64>() % 1000;
    let cl = &cluster;
    let sweep = || async move {
        tokio::time::sleep(Duration::from_millis(200 + spread)).await;
        cl.adopt_departed().await;
        match store.sweep().await {
            Ok(0) | Err(_) => {}
            Ok(n) => tracing::info!(files = n, "removed what departed nodes left in etcd"),
        }
    };
    loop {
        let mut c = store.client.clone();
        let opts = WatchOptions::new().with_prefix();
        let Ok(mut events) = c.watch(store.keys.nodes(), Some(opts)).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        // Also at every (re)start: nodes may have left while this one was not watching.
        sweep().await;
        // And now and then: a takeover that failed (etcd away) is tried again.
        let mut again = tokio::time::interval(ADOPT_AGAIN);
        again.tick().await;
        loop {
            tokio::select! {
                m = events.message() => {
                    let Ok(Some(r)) = m else { break };
                    let left = r
                        .events()
                        .iter()
                        .any(|e| e.event_type() == etcd_client::EventType::Delete);
                    if left {
                        sweep().await;
                    }
                }
                _ = again.tick() => cl.adopt_departed().await,
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Flushes what this node's opens of `f` wrote, then says so for another node's admission
/// at `rev` (crate::store::Store::admit waits for it).
async fn flush_then_ack(cluster: Arc<Cluster>, f: FileKey, rev: i64) {
    let c = cluster.clone();
    let flushed = tokio::task::spawn_blocking(move || {
        if let Some(sink) = c.sink.get() {
            sink(Effects {
                flush: vec![f],
                ..Effects::default()
            });
        }
    });
    if flushed.await.is_ok() {
        let _ = cluster.store.ack(f, rev, Seen::Flushed).await;
    }
}

/// One change of another node, or of this one.
fn apply_event(
    cluster: &Arc<Cluster>,
    local: &Arc<dyn OpenState>,
    remote: &Arc<RemoteView>,
    kv: &etcd_client::KeyValue,
    put: bool,
) {
    let store = &cluster.store;
    let Ok(key) = kv.key_str() else { return };
    let Some((f, entry)) = store.keys.parse(key) else {
        return;
    };
    match entry {
        keys::Entry::Break { holder } if put && holder == *store.node => {
            if let Ok(req) = serde_json::from_slice(kv.value()) {
                let on = (cluster.clone(), local.clone(), remote.clone());
                let task = breaks::carry_out(on, f, (key.to_owned(), kv.mod_revision()), req);
                tokio::spawn(task);
            }
        }
        keys::Entry::Open { node, .. } if node != *store.node => {
            remote.other_open(f, key, put);
            // Another node admitted an open of a file open here: what this node's opens
            // wrote goes to stable storage, so the other node's client reads it through its
            // own mount, then this node says it has seen the admission, which waits for
            // that (crate::store::Store::admit).
            let new = kv.create_revision() == kv.mod_revision();
            if put && new && local.open_count_any(f) > 0 {
                tokio::spawn(flush_then_ack(cluster.clone(), f, kv.mod_revision()));
            }
            local.changed(f).notify_waiters();
        }
        // Another node's client reclaims a durable open that may be parked here (crate::ca).
        keys::Entry::Handover { open_id } if put => {
            let held = store.ca_mine.lock().is_ok_and(|m| m.contains_key(&open_id))
                || local.open_count_any(f) > 0;
            match serde_json::from_slice::<ca::Ask>(kv.value()) {
                Ok(who) if held && who.node != *store.node => {
                    tokio::spawn(ca::hand_over(cluster.clone(), open_id, who));
                }
                _ => {}
            }
        }
        keys::Entry::Hold { open_id } => {
            let locks = put.then(|| hold_locks(kv.value())).flatten();
            remote.hold(f, key, locks.map(|l| (open_id, l)));
            local.changed(f).notify_waiters();
        }
        keys::Entry::DeletePending => {
            remote.mark(f, put);
            local.changed(f).notify_waiters();
        }
        keys::Entry::Lock { node, lock, .. } if node != *store.node => {
            if put {
                remote.put(f, key.to_owned(), lock);
                remote.advance(kv.mod_revision());
                // Seen: a LOCK on that node waits for this before it is granted.
                if local.open_count_any(f) > 0 {
                    let (store, rev) = (store.clone(), kv.mod_revision());
                    tokio::spawn(async move { store.ack(f, rev, Seen::Changes).await });
                }
            } else {
                remote.remove(f, key);
            }
            local.changed(f).notify_waiters();
        }
        _ => local.changed(f).notify_waiters(),
    }
}

/// The locks in a persistent open's hold (crate::ca), for the remote view; `None` when the
/// value is unreadable.
fn hold_locks(value: &[u8]) -> Option<Vec<(u64, u64, bool)>> {
    let h: keys::Hold = serde_json::from_slice(value).ok()?;
    Some(h.locks)
}
