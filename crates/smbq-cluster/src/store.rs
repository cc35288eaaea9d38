//! The decisions a node takes against etcd, one file at a time: read the file's keys in one
//! range read, decide with smbq-server's own rules, and write in a transaction that holds
//! only if nobody changed the file in between (crate::keys). Each returns the NTSTATUS the
//! client is to see; etcd being unreachable is STATUS_SERVER_UNAVAILABLE.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp};
use smbq_server::file_state::FileKey;
use smbq_server::file_state::byte_range::lock_conflict;
use smbq_server::file_state::share_mode::share_conflict;
use smbq_wire::NtStatus;

use crate::keys::{Entry, Keys, OpenRecord};

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
}

/// Everything etcd holds about one file.
#[derive(Debug, Default)]
struct View {
    /// The mod revision of `f/FILE/v` (0: absent). Revisions are never reused, so a file
    /// whose key went and came back in between is seen to have changed.
    version: i64,
    delete_pending: bool,
    /// Opens of other nodes: (access, share access).
    others: Vec<(u32, u32)>,
    /// Opens of this node.
    mine: usize,
    /// Locks of other nodes: (offset, length, exclusive).
    other_locks: Vec<(u64, u64, bool)>,
}

fn unavailable(e: etcd_client::Error) -> NtStatus {
    tracing::warn!(error = %e, "etcd request failed");
    NtStatus::SERVER_UNAVAILABLE
}

impl Store {
    async fn view(&self, f: FileKey) -> Result<View, NtStatus> {
        let mut c = self.client.clone();
        let prefix = self.keys.file(f);
        let r = c
            .get(prefix, Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        let mut v = View::default();
        for kv in r.kvs() {
            let Ok(key) = kv.key_str() else { continue };
            let Some((_, entry)) = self.keys.parse(key) else {
                continue;
            };
            match entry {
                Entry::Version => v.version = kv.mod_revision(),
                Entry::DeletePending => v.delete_pending = true,
                Entry::Open { node, .. } if *node == *self.node => v.mine += 1,
                Entry::Open { .. } => {
                    if let Ok(rec) = serde_json::from_slice::<OpenRecord>(kv.value()) {
                        v.others.push((rec.access, rec.share_access));
                    }
                }
                Entry::Lock { node, lock, .. } if *node != *self.node => v.other_locks.push(lock),
                Entry::Lock { .. } => {}
            }
        }
        Ok(v)
    }

    /// Writes `ops` (and a new version of the file) if the file is still at `seen`.
    async fn commit(&self, f: FileKey, seen: i64, ops: Vec<TxnOp>) -> Result<bool, NtStatus> {
        self.commit_or_drop(f, seen, ops, false).await
    }

    /// [`Self::commit`]; with `drop_version`, the file's version key goes instead (its last
    /// open went: nothing of the file is left in etcd, and a later admission finds it absent,
    /// which a concurrent decision's comparison also sees as a change).
    async fn commit_or_drop(
        &self,
        f: FileKey,
        seen: i64,
        mut ops: Vec<TxnOp>,
        drop_version: bool,
    ) -> Result<bool, NtStatus> {
        let vkey = self.keys.version(f);
        ops.push(if drop_version {
            TxnOp::delete(vkey.clone(), None)
        } else {
            TxnOp::put(vkey.clone(), "", None)
        });
        let txn = Txn::new()
            .when([Compare::mod_revision(vkey, CompareOp::Equal, seen)])
            .and_then(ops);
        let mut c = self.client.clone();
        Ok(c.txn(txn).await.map_err(unavailable)?.succeeded())
    }

    fn leased(&self) -> Option<PutOptions> {
        Some(PutOptions::new().with_lease(self.lease))
    }

    /// MS-FSA 2.1.5.1.2: admits an open this node already admitted against its own opens,
    /// against every other node's: DELETE_PENDING or SHARING_VIOLATION, or it is recorded.
    pub async fn admit(
        &self,
        f: FileKey,
        open_id: u64,
        (checked, access, share_access): (u32, u32, u32),
        path: String,
    ) -> Result<(), NtStatus> {
        let rec = OpenRecord {
            access,
            share_access,
            path,
        };
        let value = serde_json::to_vec(&rec).map_err(|_| NtStatus::INTERNAL_ERROR)?;
        for _ in 0..MAX_ROUNDS {
            let v = self.view(f).await?;
            let mut ops = Vec::new();
            if v.delete_pending {
                if v.others.is_empty() && v.mine == 0 {
                    // Every open that saw the file delete-pending went with a dead node (its
                    // lease dropped them): the mark outlived its opens, as after a crash.
                    ops.push(TxnOp::delete(self.keys.delete_pending(f), None));
                } else {
                    return Err(NtStatus::DELETE_PENDING);
                }
            }
            if v.others
                .iter()
                .any(|&held| share_conflict(held, checked, share_access))
            {
                return Err(NtStatus::SHARING_VIOLATION);
            }
            let okey = self.keys.open(f, &self.node, open_id);
            ops.push(TxnOp::put(okey, value.clone(), self.leased()));
            if self.commit(f, v.version, ops).await? {
                return Ok(());
            }
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// The share-mode check of [`Self::admit`] without recording anything (before a rename
    /// over the file).
    pub async fn check(&self, f: FileKey, access: u32, share_access: u32) -> Result<(), NtStatus> {
        let v = self.view(f).await?;
        if v.others
            .iter()
            .any(|&held| share_conflict(held, access, share_access))
        {
            return Err(NtStatus::SHARING_VIOLATION);
        }
        Ok(())
    }

    /// Open `open_id` of this node is gone, with its locks. `pending`: the file stays (or
    /// becomes) delete-pending for the opens other nodes still have. Says whether this was
    /// the file's last open in the cluster, and whether the file is delete-pending.
    pub async fn release(
        &self,
        f: FileKey,
        open_id: u64,
        pending: bool,
    ) -> Result<Released, NtStatus> {
        for _ in 0..MAX_ROUNDS {
            let v = self.view(f).await?;
            let last = v.others.is_empty() && v.mine <= 1;
            let mut ops = vec![
                TxnOp::delete(self.keys.open(f, &self.node, open_id), None),
                TxnOp::delete(
                    self.keys.locks_of(f, &self.node, open_id),
                    Some(DeleteOptions::new().with_prefix()),
                ),
            ];
            let dkey = self.keys.delete_pending(f);
            if pending && !last && !v.delete_pending {
                ops.push(TxnOp::put(dkey, self.node.as_bytes(), None));
            }
            // A delete-pending file's keys go once it is deleted (`forget`).
            let drop = last && !(pending || v.delete_pending);
            if self.commit_or_drop(f, v.version, ops, drop).await? {
                return Ok(Released {
                    last,
                    delete_pending: v.delete_pending || pending,
                });
            }
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// The file is gone (or its delete failed): nothing is left of it here.
    pub async fn forget(&self, f: FileKey) -> Result<(), NtStatus> {
        let mut c = self.client.clone();
        let txn = Txn::new().and_then([
            TxnOp::delete(self.keys.delete_pending(f), None),
            TxnOp::delete(self.keys.version(f), None),
        ]);
        c.txn(txn).await.map_err(unavailable)?;
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
            if self.commit(f, v.version, vec![op]).await? {
                return Ok(());
            }
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// Whether another node made the file delete-pending.
    pub async fn delete_pending(&self, f: FileKey) -> Result<bool, NtStatus> {
        Ok(self.view(f).await?.delete_pending)
    }

    /// MS-FSA 2.1.5.7: a lock this node granted against its own locks, against every other
    /// node's: LOCK_NOT_GRANTED, or it is recorded.
    pub async fn lock(
        &self,
        f: FileKey,
        owner: u64,
        (offset, length, exclusive): (u64, u64, bool),
    ) -> Result<(), NtStatus> {
        for _ in 0..MAX_ROUNDS {
            let v = self.view(f).await?;
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
            let op = TxnOp::put(key, "", self.leased());
            if self.commit(f, v.version, vec![op]).await? {
                return Ok(());
            }
        }
        Err(NtStatus::SERVER_UNAVAILABLE)
    }

    /// MS-FSA 2.1.5.9: one lock of exactly this range by `owner` goes.
    pub async fn unlock(&self, f: FileKey, owner: u64, range: (u64, u64)) -> Result<(), NtStatus> {
        let mut c = self.client.clone();
        let prefix = self.keys.lock_range(f, &self.node, owner, range);
        let opts = GetOptions::new()
            .with_prefix()
            .with_limit(1)
            .with_keys_only();
        let r = c.get(prefix, Some(opts)).await.map_err(unavailable)?;
        if let Some(kv) = r.kvs().first() {
            c.delete(kv.key(), None).await.map_err(unavailable)?;
        }
        Ok(())
    }
}

/// What [`Store::release`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// No other open of the file is left, on any node.
    pub last: bool,
    /// The file is delete-pending (here or on another node).
    pub delete_pending: bool,
}
