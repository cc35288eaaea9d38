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
//!   [`EtcdRecords`]'s `claim`: held by a live node, STATUS_FILE_NOT_AVAILABLE (MS-SMB2
//!   3.3.5.9.12 for an open that still has a connection; the client tries again); held by a
//!   node that is gone, it is taken over here at once and reclaimed.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use smbq_server::durable::persistent::oplock_as_lease;
use smbq_server::durable::store::{Claim, Record, RecordStore};
use smbq_server::file_state::FileKey;
use smbq_server::file_state::oplock::Level;
use smbq_wire::NtStatus;

use crate::Cluster;
use crate::keys::{CaRecord, Hold};
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
    /// Held by a live node (or being taken over by this one).
    Held,
    /// Taken over by this node now.
    Taken(Box<Record>),
}

impl Store {
    /// The hold of persistent open `rec` (held by this node).
    fn hold_of(&self, rec: &Record) -> Result<Vec<u8>, NtStatus> {
        let hold = Hold {
            node: self.node.to_string(),
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

    /// The record as this node keeps it in etcd.
    fn ca_of(&self, rec: &Record) -> Result<Vec<u8>, NtStatus> {
        let ca = CaRecord {
            node: self.node.to_string(),
            volume: self.keys.volumes().id(rec.dev),
            record: rec.clone(),
        };
        serde_json::to_vec(&ca).map_err(|_| NtStatus::INTERNAL_ERROR)
    }

    /// Writes persistent open `rec`'s record and hold, held by this node.
    pub(crate) async fn put_ca(&self, rec: Record) -> Result<(), NtStatus> {
        let f = file_of(&rec);
        let txn = Txn::new().and_then([
            TxnOp::put(self.keys.ca(rec.file_id), self.ca_of(&rec)?, None),
            TxnOp::put(self.keys.hold(f, rec.file_id), self.hold_of(&rec)?, None),
        ]);
        let mut c = self.client.clone();
        c.txn(txn).await.map_err(unavailable)?;
        Ok(())
    }

    /// Removes persistent open `id`'s record and its hold on file `f`.
    pub(crate) async fn remove_ca(&self, id: u64, f: FileKey) -> Result<(), NtStatus> {
        let txn = Txn::new().and_then([
            TxnOp::delete(self.keys.ca(id), None),
            TxnOp::delete(self.keys.hold(f, id), None),
        ]);
        let mut c = self.client.clone();
        c.txn(txn).await.map_err(unavailable)?;
        Ok(())
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

    /// Moves the record read as `kv` to this node, if nobody changed it since it was read;
    /// the record, on this node's device numbers, when this node now holds it.
    async fn take_over(&self, kv: &etcd_client::KeyValue) -> Result<Option<Record>, NtStatus> {
        let Ok(ca) = serde_json::from_slice::<CaRecord>(kv.value()) else {
            return Ok(None);
        };
        let Some(dev) = self.keys.volumes().dev(&ca.volume) else {
            tracing::warn!(volume = %ca.volume, "persistent open on a volume this node does not serve");
            return Ok(None);
        };
        // Held again parked, for its client.
        let rec = Record {
            dev,
            away: true,
            ..ca.record
        };
        let f = file_of(&rec);
        let key = kv.key().to_vec();
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                kv.mod_revision(),
            )])
            .and_then([
                TxnOp::put(key, self.ca_of(&rec)?, None),
                TxnOp::put(self.keys.hold(f, rec.file_id), self.hold_of(&rec)?, None),
            ]);
        let mut c = self.client.clone();
        let won = c.txn(txn).await.map_err(unavailable)?.succeeded();
        if won {
            tracing::info!(open = rec.file_id, from = %ca.node, "took over a persistent open");
        }
        Ok(won.then_some(rec))
    }

    /// Takes over the records of nodes that are gone; with `own`, also those under this
    /// node's name but `known` (an earlier process of this node left them).
    pub(crate) async fn orphans(
        &self,
        own: bool,
        known: HashSet<u64>,
    ) -> Result<Vec<Record>, NtStatus> {
        let alive = self.alive().await?;
        let (kvs, _) = self.read_all(&self.keys.cas()).await.map_err(unavailable)?;
        let mut taken = Vec::new();
        for kv in &kvs {
            let Ok(ca) = serde_json::from_slice::<CaRecord>(kv.value()) else {
                continue;
            };
            let orphan = if *ca.node == *self.node {
                own && !known.contains(&ca.record.file_id)
            } else {
                !alive.contains(&ca.node)
            };
            if orphan && let Some(rec) = self.take_over(kv).await? {
                taken.push(rec);
            }
        }
        Ok(taken)
    }

    /// A reclaim on this node names persistent open `id`, which this node does not hold.
    pub(crate) async fn claim_ca(&self, id: u64) -> Result<Claimed, NtStatus> {
        let mut c = self.client.clone();
        let r = c
            .get(self.keys.ca(id), Some(GetOptions::new()))
            .await
            .map_err(unavailable)?;
        let Some(kv) = r.kvs().first() else {
            return Ok(Claimed::None);
        };
        let Ok(ca) = serde_json::from_slice::<CaRecord>(kv.value()) else {
            return Ok(Claimed::None);
        };
        // Held here but not parked: being taken over right now (the client tries again).
        if *ca.node == *self.node || self.alive().await?.contains(&ca.node) {
            return Ok(Claimed::Held);
        }
        Ok(match self.take_over(kv).await? {
            Some(rec) => Claimed::Taken(Box::new(rec)),
            // Another node took it over first.
            None => Claimed::Held,
        })
    }
}

/// The record store of a cluster node's persistent opens (smbq-server's `RecordStore`), in
/// etcd. Limits count this node's records, as the local database counts one server's.
pub struct EtcdRecords {
    cluster: Arc<Cluster>,
    /// The records this node holds: each one's user and file.
    mine: Mutex<HashMap<u64, (String, FileKey)>>,
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
        EtcdRecords {
            cluster,
            mine: Mutex::default(),
        }
    }

    fn mine(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (String, FileKey)>> {
        self.mine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes records this node now holds.
    pub(crate) fn hold(&self, records: &[Record]) {
        let mut mine = self.mine();
        for r in records {
            mine.insert(r.file_id, (r.user.clone(), file_of(r)));
        }
    }

    /// The ids of the records this node holds.
    pub(crate) fn known(&self) -> HashSet<u64> {
        self.mine().keys().copied().collect()
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
            .map_err(io_error)?;
        self.hold(std::slice::from_ref(rec));
        Ok(())
    }

    fn remove(&self, id: u64) -> io::Result<()> {
        let Some((_, f)) = self.mine().remove(&id) else {
            return Ok(());
        };
        let r = self
            .cluster
            .decide(move |s| async move { s.remove_ca(id, f).await });
        if let Err(e) = r {
            // The hold would refuse other opens of the file for good: it goes once etcd
            // takes it.
            self.cluster
                .retry_later("persistent record removal", move |s| async move {
                    s.remove_ca(id, f).await
                });
            return Err(io_error(e));
        }
        Ok(())
    }

    fn records_of(&self, user: &str) -> usize {
        self.mine().values().filter(|(u, _)| u == user).count()
    }

    fn records(&self) -> io::Result<usize> {
        Ok(self.mine().len())
    }

    fn claim(&self, id: u64) -> Claim {
        match self
            .cluster
            .decide(move |s| async move { s.claim_ca(id).await })
        {
            Ok(Claimed::None) => Claim::Unknown,
            // etcd away: the open may be held elsewhere; the client tries again.
            Ok(Claimed::Held) | Err(_) => Claim::Elsewhere,
            Ok(Claimed::Taken(rec)) => {
                self.hold(std::slice::from_ref(&*rec));
                Claim::Adopted(rec)
            }
        }
    }
}
