//! Persistent handles on cluster nodes (MS-SMB2 3.3.5.9.10, continuously available shares):
//! a persistent open outlives the node it was opened on, and its client reclaims it on any
//! node.
//!
//! - **Records in etcd.** Each persistent open's record (smbq-server's
//!   `durable::store::Record`) is `ca/ID` ([`CaRecord`], with the node holding it), and its
//!   share mode and locks are `f/FILE/p/ID` ([`Hold`]). Neither hangs on a lease: they stay
//!   when the node dies, and other nodes' admissions and locks meet the hold meanwhile
//!   (SHARING_VIOLATION, LOCK_NOT_GRANTED), as they met the open.
//! - **Written before the answer.** [`EtcdRecords`] is the server's record store
//!   (`RecordStore`): a put returns once etcd committed it, so the CREATE, LOCK or lease
//!   acknowledgment that depends on it is answered after, as with the local database.
//! - **Taken over.** When a node's entry under `nodes/` goes (its lease expired), the other
//!   nodes read the records it held ([`Store::orphans`]); each record is moved to one of them
//!   in a transaction compared against the record's revision, so exactly one node holds it.
//!   That node holds the open again, parked for its client until the open's timeout
//!   (smbq-server's `Server::adopt_persistent`). A node starting takes the records of nodes
//!   that are gone, its own earlier process's among them.
//! - **Reclaimed on any node.** A DH2C for an open this node does not hold asks
//!   [`EtcdRecords`]'s `claim` ([`Store::claim_ca`]):
//!   - held by a node that is gone: taken over here at once, and reclaimed;
//!   - held by a live node: this node asks for it (`f/FILE/h/ID`). The holder's watch sees
//!     the request; if the open is parked there (its client left it, and reached this node
//!     instead, as DNS round robin may have it), the holder closes it without removing its
//!     record and makes the record this node's ([`hand_over`]), and the reclaim goes on
//!     here. Otherwise (the client's old connection is still up there, as far as the
//!     holder knows) the answer after 2 s is STATUS_FILE_NOT_AVAILABLE (MS-SMB2 3.3.5.9.12,
//!     the open still has a connection), and the client tries again.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use smbq_server::durable::persistent::oplock_as_lease;
use smbq_server::durable::store::{Claim, Claimant, Record, RecordStore};
use smbq_server::file_state::FileKey;
use smbq_server::file_state::oplock::Level;
use smbq_wire::NtStatus;

use crate::Cluster;
use crate::keys::{CaRecord, Entry, Hold};
use crate::state::VIEW_WAIT;
use crate::store::{Store, unavailable};

/// The file a record is of (named streams are not kept).
fn file_of(rec: &Record) -> FileKey {
    FileKey {
        dev: rec.dev,
        ino: rec.ino,
        stream: 0,
    }
}

/// What etcd held of a persistent open a reclaim names.
pub(crate) enum Claimed {
    /// No record.
    None,
    /// Held by a live node that did not hand it over in time (or being taken over here).
    Held,
    /// This node's now.
    Taken(Box<Record>),
}

/// How long a reclaim waits for a live node to hand its parked persistent open over.
const HANDOVER_WAIT: Duration = Duration::from_secs(2);

/// How long a reclaim of a durable open waits for a node to hand it over: the holder answers
/// within milliseconds, and when no node holds it the answer is OBJECT_NAME_NOT_FOUND.
const DURABLE_WAIT: Duration = Duration::from_secs(1);

impl Store {
    fn mine(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (String, FileKey)>> {
        self.ca_mine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a record this node now holds.
    fn note(&self, rec: &Record) {
        self.mine()
            .insert(rec.file_id, (rec.user.clone(), file_of(rec)));
    }

    /// The hold of persistent open `rec`, held by `node`.
    fn hold_of(&self, rec: &Record, node: &str) -> Result<Vec<u8>, NtStatus> {
        let hold = Hold {
            node: node.to_owned(),
            access: rec.granted,
            share_access: rec.share_access,
            path: rec.path.clone(),
            locks: rec
                .locks
                .iter()
                .map(|l| (l.offset, l.length, l.exclusive))
                .collect(),
            caching: match (&rec.lease, Level::from_wire(rec.oplock)) {
                (Some(l), _) => l.state,
                (None, Some(level)) => oplock_as_lease(level),
                (None, None) => 0,
            },
            away: rec.away,
        };
        serde_json::to_vec(&hold).map_err(|_| NtStatus::INTERNAL_ERROR)
    }

    /// The record as etcd keeps it, held by `node`.
    fn ca_of(&self, rec: &Record, node: &str) -> Result<Vec<u8>, NtStatus> {
        let ca = CaRecord {
            node: node.to_owned(),
            volume: self.keys.volumes().id(rec.dev),
            record: rec.clone(),
        };
        serde_json::to_vec(&ca).map_err(|_| NtStatus::INTERNAL_ERROR)
    }

    /// The writes that make `rec` (on this node's device numbers) `node`'s.
    fn held_by(&self, rec: &Record, node: &str) -> Result<[TxnOp; 2], NtStatus> {
        let hold = self.keys.hold(file_of(rec), rec.file_id);
        Ok([
            TxnOp::put(self.keys.ca(rec.file_id), self.ca_of(rec, node)?, None),
            TxnOp::put(hold, self.hold_of(rec, node)?, None),
        ])
    }

    /// Writes persistent open `rec`'s record and hold, held by this node.
    /// A record new here is written only if no record of the id exists (one of another
    /// node, or one handed away meanwhile, is not overwritten).
    pub(crate) async fn put_ca(&self, rec: Record) -> Result<(), NtStatus> {
        let new = !self.mine().contains_key(&rec.file_id);
        // Noted first: a put that etcd committed but did not confirm is still removed at
        // the open's close.
        self.note(&rec);
        let mut txn = Txn::new();
        if new {
            let key = self.keys.ca(rec.file_id);
            txn = txn.when([Compare::create_revision(key, CompareOp::Equal, 0)]);
        }
        let txn = txn.and_then(self.held_by(&rec, &self.node)?);
        let mut c = self.client.clone();
        if !c.txn(txn).await.map_err(unavailable)?.succeeded() {
            self.mine().remove(&rec.file_id);
            tracing::warn!(
                open = rec.file_id,
                "another node holds a record of this open id"
            );
            return Err(NtStatus::INTERNAL_ERROR);
        }
        Ok(())
    }

    /// Removes persistent open `id`'s record and its hold on file `f`; the revision that
    /// removed them.
    pub(crate) async fn remove_ca(&self, id: u64, f: FileKey) -> Result<i64, NtStatus> {
        let txn = Txn::new().and_then([
            TxnOp::delete(self.keys.ca(id), None),
            TxnOp::delete(self.keys.hold(f, id), None),
        ]);
        let mut c = self.client.clone();
        let r = c.txn(txn).await.map_err(unavailable)?;
        Ok(r.header().map_or(0, |h| h.revision()))
    }

    /// The nodes alive now (their entry under `nodes/` stands on their lease).
    async fn alive(&self) -> Result<HashSet<String>, NtStatus> {
        let prefix = self.keys.nodes();
        let (kvs, _) = self.read_all(&prefix).await.map_err(unavailable)?;
        Ok(kvs
            .iter()
            .filter_map(|kv| kv.key_str().ok()?.strip_prefix(prefix.as_str()))
            .map(str::to_owned)
            .collect())
    }

    /// The record of `ca`, on this node's device numbers and parked for its client; `None`
    /// for a volume this node does not serve.
    fn local(&self, ca: CaRecord) -> Option<Record> {
        let Some(dev) = self.keys.volumes().dev(&ca.volume) else {
            tracing::warn!(volume = %ca.volume, "persistent open on a volume this node does not serve");
            return None;
        };
        Some(Record {
            dev,
            away: true,
            ..ca.record
        })
    }

    /// Moves the record read as `kv` to this node, if nobody changed it since it was read;
    /// the record, on this node's device numbers, when this node now holds it. The caller
    /// holds `adopting`.
    async fn take_over(&self, kv: &etcd_client::KeyValue) -> Result<Option<Record>, NtStatus> {
        let Ok(ca) = serde_json::from_slice::<CaRecord>(kv.value()) else {
            return Ok(None);
        };
        let from = ca.node.clone();
        let key = kv.key().to_vec();
        if !ca.record.persistent {
            // A durable open on its way to another node when a node died: it dies too, as
            // durable opens do with their node.
            let f = self.keys.volumes().dev(&ca.volume).map(|dev| FileKey {
                dev,
                ..file_of(&ca.record)
            });
            let mut ops = vec![TxnOp::delete(key.clone(), None)];
            if let Some(f) = f {
                ops.push(TxnOp::delete(self.keys.hold(f, ca.record.file_id), None));
            }
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    key,
                    CompareOp::Equal,
                    kv.mod_revision(),
                )])
                .and_then(ops);
            let mut c = self.client.clone();
            c.txn(txn).await.map_err(unavailable)?;
            return Ok(None);
        }
        let Some(rec) = self.local(ca) else {
            return Ok(None);
        };
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key,
                CompareOp::Equal,
                kv.mod_revision(),
            )])
            .and_then(self.held_by(&rec, &self.node)?);
        let mut c = self.client.clone();
        let won = c.txn(txn).await.map_err(unavailable)?.succeeded();
        if !won {
            return Ok(None);
        }
        tracing::info!(open = rec.file_id, %from, "took over a persistent open");
        self.note(&rec);
        Ok(Some(rec))
    }

    /// Takes over the records of nodes that are gone; with `own`, also those under this
    /// node's name that it does not hold (an earlier process of this node left them).
    pub(crate) async fn orphans(&self, own: bool) -> Result<Vec<Record>, NtStatus> {
        let _adopting = self.adopting.lock().await;
        let alive = self.alive().await?;
        let (kvs, _) = self.read_all(&self.keys.cas()).await.map_err(unavailable)?;
        let mut taken = Vec::new();
        for kv in &kvs {
            let Ok(ca) = serde_json::from_slice::<CaRecord>(kv.value()) else {
                continue;
            };
            let orphan = if *ca.node == *self.node {
                own && !self.mine().contains_key(&ca.record.file_id)
            } else {
                !alive.contains(&ca.node)
            };
            if orphan && let Some(rec) = self.take_over(kv).await? {
                taken.push(rec);
            }
        }
        Ok(taken)
    }

    /// Reads persistent open `id`'s record.
    async fn read_ca(
        &self,
        id: u64,
    ) -> Result<Option<(etcd_client::KeyValue, CaRecord)>, NtStatus> {
        let mut c = self.client.clone();
        let r = c
            .get(self.keys.ca(id), Some(GetOptions::new()))
            .await
            .map_err(unavailable)?;
        Ok(r.kvs().first().and_then(|kv| {
            let ca = serde_json::from_slice::<CaRecord>(kv.value()).ok()?;
            Some((kv.clone(), ca))
        }))
    }

    /// A reclaim on this node names durable open `id` of file `file` (when found), which
    /// this node does not hold parked. A persistent one held by a node that is gone is
    /// taken over; one held by a live node (a durable one: by whichever node has it), that
    /// node is asked to hand it over (it does if the open is parked there: its client left
    /// it) and this waits up to [`HANDOVER_WAIT`] ([`DURABLE_WAIT`]) for it.
    ///
    /// Nothing moves for a reconnect of another user, or one naming another CreateGuid:
    /// the record is compared first here, and the holder compares its parked open.
    pub(crate) async fn claim_ca(
        &self,
        id: u64,
        file: Option<FileKey>,
        who: Ask,
    ) -> Result<Claimed, NtStatus> {
        let adopting = self.adopting.lock().await;
        let Some((kv, ca)) = self.read_ca(id).await? else {
            drop(adopting);
            // No persistent record: a durable open, parked on the node its client left.
            let Some(f) = file else {
                return Ok(Claimed::None);
            };
            return Ok(match self.ask_for(f, id, DURABLE_WAIT, &who).await? {
                Some(rec) => self.taken(rec).await,
                None => Claimed::None,
            });
        };
        let same_guid = who.create_guid.is_none_or(|g| g == ca.record.create_guid);
        if !ca.record.user.eq_ignore_ascii_case(&who.user) || !same_guid {
            return Ok(Claimed::None);
        }
        if *ca.node == *self.node {
            // Taken over here, by the sweeper or handed over after an earlier reclaim
            // gave up waiting: held here unless restored already (then it is being used).
            return Ok(match self.local(ca) {
                Some(rec) => self.taken(rec).await,
                None => Claimed::None,
            });
        }
        if !self.alive().await?.contains(&ca.node) {
            return Ok(match self.take_over(&kv).await? {
                Some(rec) => Claimed::Taken(Box::new(rec)),
                None => Claimed::Held,
            });
        }
        // The wait for the holder needs no guard: what it hands over is claimed here once
        // (`taken`).
        drop(adopting);
        let Some(f) = self.keys.volumes().dev(&ca.volume).map(|dev| FileKey {
            dev,
            ..file_of(&ca.record)
        }) else {
            return Ok(Claimed::None);
        };
        Ok(match self.ask_for(f, id, HANDOVER_WAIT, &who).await? {
            Some(rec) => self.taken(rec).await,
            None => Claimed::Held,
        })
    }

    /// Asks whichever node holds open `id` of file `f` parked to hand it to this node, and
    /// waits up to `wait` for its record to name this node.
    async fn ask_for(
        &self,
        f: FileKey,
        id: u64,
        wait: Duration,
        who: &Ask,
    ) -> Result<Option<Record>, NtStatus> {
        // Only where another node has an open of this id on the file (a parked open keeps
        // its record): a reconnect naming an open nobody has costs one read.
        let opens = self.keys.file(f) + "o/";
        let mut c = self.client.clone();
        let r = c
            .get(
                opens,
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await
            .map_err(unavailable)?;
        let held_elsewhere = r.kvs().iter().any(|kv| {
            let entry = kv.key_str().ok().and_then(|k| self.keys.parse(k));
            matches!(entry, Some((_, Entry::Open { node, open_id })) if open_id == id && *node != *self.node)
        });
        if !held_elsewhere {
            return Ok(None);
        }
        // Each wait holds a blocking thread of the server: bounded with the admissions'
        // waits (`[cluster] max_break_waits`), so reconnects naming opens nobody has cannot
        // take them all.
        let Some(_slot) = self.wait_slot() else {
            tracing::warn!(
                open = id,
                "reclaim not asked of other nodes: max_break_waits reached"
            );
            return Ok(None);
        };
        // The request under the file reaches the holder's watch; the one outside it stands
        // while this waits (the file's keys go with its last close, the holder's own).
        let (ask, want) = (self.keys.handover(f, id), self.keys.want(id));
        let value = serde_json::to_vec(who).map_err(|_| NtStatus::INTERNAL_ERROR)?;
        let leased = || Some(PutOptions::new().with_lease(self.lease));
        let put = Txn::new().and_then([
            TxnOp::put(want.clone(), value.clone(), leased()),
            TxnOp::put(ask.clone(), value, leased()),
        ]);
        c.txn(put).await.map_err(unavailable)?;
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(5);
        let handed = loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
            match self.read_ca(id).await? {
                Some((_, ca)) if *ca.node == *self.node => break self.local(ca),
                _ if Instant::now() < deadline => {}
                _ => break None,
            }
        };
        let done = Txn::new().and_then([TxnOp::delete(ask, None), TxnOp::delete(want, None)]);
        let _ = c.txn(done).await;
        if handed.is_some() {
            tracing::info!(open = id, "durable open handed over to this node");
        }
        Ok(handed)
    }

    /// This node holds `rec` now, unless another reclaim here claimed it first (then it is
    /// held for that one). A persistent open's record stays (this node's); a durable one's
    /// was only the way over, and goes.
    async fn taken(&self, rec: Record) -> Claimed {
        let first = {
            let mut mine = self.mine();
            let first = !mine.contains_key(&rec.file_id);
            mine.insert(rec.file_id, (rec.user.clone(), file_of(&rec)));
            first
        };
        if !first {
            return Claimed::Held;
        }
        if !rec.persistent {
            // Its hold stands for its locks until the open is held here again and has
            // recorded them as this node's (`RecordStore::adopted` removes both then).
            self.handed_in
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(rec.file_id);
        }
        Claimed::Taken(Box::new(rec))
    }

    /// Hands open `rec`, given up here, to node `to`, while its request `ask` (a `want/`
    /// key) stands: an asker that gave up waiting deleted it. False when it no longer does.
    pub(crate) async fn hand_to(
        &self,
        rec: &Record,
        to: &str,
        ask: &str,
    ) -> Result<bool, NtStatus> {
        let rec = Record {
            away: true,
            ..rec.clone()
        };
        let txn = Txn::new()
            .when([Compare::version(ask, CompareOp::Greater, 0)])
            .and_then(self.held_by(&rec, to)?);
        let mut c = self.client.clone();
        Ok(c.txn(txn).await.map_err(unavailable)?.succeeded())
    }

    /// Whether the request `ask` still stands.
    async fn asked(&self, ask: &str) -> Result<bool, NtStatus> {
        let mut c = self.client.clone();
        let r = c
            .get(ask, Some(GetOptions::new().with_count_only()))
            .await
            .map_err(unavailable)?;
        Ok(r.count() > 0)
    }
}

/// Who asks for an open (the value of `f/FILE/h/ID`): the holder hands it over only for
/// its own user, and CreateGuid when the reconnect names one.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ask {
    pub node: String,
    pub user: String,
    pub create_guid: Option<[u8; 16]>,
}

/// Node `ask.node` asks for open `id`, which may be parked here: the server gives
/// it up if it is parked here for the asker's user (its client left it, and reached that
/// node), and the record becomes the asker's. Under this node's adoption guard, so a reclaim
/// here meanwhile does not hold the open again.
pub(crate) async fn hand_over(cluster: Arc<Cluster>, id: u64, who: Ask) {
    let Some(holder) = cluster.holder.get() else {
        return;
    };
    let store = &cluster.store;
    let ask = store.keys.want(id);
    let _adopting = store.adopting.lock().await;
    if !store.asked(&ask).await.unwrap_or(false) {
        return;
    }
    let Some(rec) = (holder.hand_over)(id, who.user.clone(), who.create_guid).await else {
        return;
    };
    match store.hand_to(&rec, &who.node, &ask).await {
        Ok(true) => {
            store.mine().remove(&id);
        }
        r => {
            // The asker gave up (or etcd did not take it): the open is held here again,
            // parked for its client, from the record as it was.
            tracing::warn!(open = id, result = ?r, "open not handed over; held here again");
            if rec.persistent {
                store.note(&rec);
            }
            (holder.adopt)(vec![rec]);
        }
    }
}

/// The record store of a cluster node's persistent opens (smbq-server's `RecordStore`), in
/// etcd. Limits count this node's records, as the local database counts one server's.
pub struct EtcdRecords {
    cluster: Arc<Cluster>,
}

impl std::fmt::Debug for EtcdRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdRecords").finish_non_exhaustive()
    }
}

fn io_error(s: NtStatus) -> io::Error {
    io::Error::other(format!("etcd: {s:?}"))
}

impl EtcdRecords {
    pub(crate) fn new(cluster: Arc<Cluster>) -> EtcdRecords {
        EtcdRecords { cluster }
    }
}

impl RecordStore for EtcdRecords {
    fn put(&self, rec: &Record) -> io::Result<()> {
        let r = rec.clone();
        self.cluster
            .decide(move |s| {
                let r = r.clone();
                async move { s.put_ca(r).await }
            })
            .map_err(io_error)
    }

    fn remove(&self, id: u64) -> io::Result<()> {
        let Some((_, f)) = self.cluster.store.mine().remove(&id) else {
            return Ok(());
        };
        let r = self
            .cluster
            .decide(move |s| async move { s.remove_ca(id, f).await });
        match r {
            // The hold is out of this node's view too before the close is answered, so a
            // client's next open here does not meet the locks of the open it closed.
            Ok(rev) => {
                if let Some(view) = self.cluster.remote.get() {
                    view.wait_applied(rev, VIEW_WAIT);
                }
                Ok(())
            }
            Err(e) => {
                // The hold would refuse other opens of the file for good: it goes once etcd
                // takes it.
                self.cluster
                    .retry_later("persistent record removal", move |s| async move {
                        s.remove_ca(id, f).await.map(|_| ())
                    });
                Err(io_error(e))
            }
        }
    }

    fn adopted(&self, id: u64) {
        let handed = self
            .cluster
            .store
            .handed_in
            .lock()
            .map(|mut h| h.remove(&id));
        if handed.unwrap_or(false) {
            // A durable open's record was only the way over (crate::ca::Store::taken).
            let _ = self.remove(id);
        }
    }

    fn records_of(&self, user: &str) -> usize {
        let mine = self.cluster.store.mine();
        mine.values().filter(|(u, _)| u == user).count()
    }

    fn records(&self) -> io::Result<usize> {
        Ok(self.cluster.store.mine().len())
    }

    fn claim(&self, id: u64, file: Option<FileKey>, who: Claimant<'_>) -> Claim {
        let who = Ask {
            node: self.cluster.store.node.to_string(),
            user: who.user.to_owned(),
            create_guid: who.create_guid,
        };
        // A durable open is asked for only where another node has its file open: a parked
        // open keeps its record there (crate::remote), and nobody else can hand it over.
        let file = file.filter(|f| {
            self.cluster
                .remote
                .get()
                .is_some_and(|r| r.opened_elsewhere(*f))
        });
        match self.cluster.decide_within(HANDOVER_WAIT, move |s| {
            let who = who.clone();
            async move { s.claim_ca(id, file, who).await }
        }) {
            Ok(Claimed::None) => Claim::Unknown,
            // etcd away: the open may be held elsewhere; the client tries again.
            Ok(Claimed::Held) | Err(_) => Claim::Elsewhere,
            Ok(Claimed::Taken(rec)) => Claim::Adopted(rec),
        }
    }
}
