//! Every node must serve each share from the one file system all nodes share: a node that
//! served a directory of its own disk under the share's name would admit opens, locks and
//! deletes in etcd for files the other nodes never see, and its clients' writes would go
//! where nobody else reads them. Nothing in etcd alone can tell (a volume is named by its
//! share, crate::keys::Volumes), so each share root carries a mark.
//!
//! The first node to serve a share records a random mark in etcd (`shares/NAME`) and
//! writes it on the share root (the `smbq.cluster` attribute, in the namespace smbq keeps
//! its own metadata in; clients' extended attributes live under another name and never reach
//! it). Every node that joins reads both, and refuses to start when its root carries
//! another mark or none: its directory is not the shared one. A root that already carries a
//! mark when etcd has none (etcd was set up again) gives etcd its mark.
//!
//! Two nodes starting at once on a new cluster: the mark goes to etcd first, in a
//! create-only transaction, and only the winner writes the attribute; the other waits for it
//! to appear. Nodes check their shares in one order (by name), so two shares on one root get
//! the mark of the first on every node. A node that cannot write the attribute (a read-only
//! mount, no right to smbq's namespace) takes its mark out of etcd again and stops.
//!
//! Until the winner has written the attribute, its mark in etcd is pending: it stands on a
//! short lease of its own ([`PENDING_TTL`]), and the winner takes the lease off once the
//! root carries the mark. A node that dies between the two steps leaves no mark behind in
//! etcd, and the next node to start marks the share itself (before, it left a mark no root
//! carried, and every node was refused until someone removed it from etcd by hand). Nodes
//! waiting for a pending mark wait while its lease lives.
//!
//! The attribute is in `trusted.` when smbq runs as root and in `user.` otherwise: all
//! nodes of a cluster must run alike.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
use smbq_vfs::{OpenOptions, PosixOptions, PosixVfs, RelPath, Vfs, VfsFile};

use crate::keys::Keys;

/// The share root's attribute that holds the mark (smbq_vfs puts it in `trusted.` or `user.`).
pub const XATTR: &str = "smbq.cluster";

/// What etcd holds for a share on a file system without extended attributes: the first
/// node could not mark it, and nothing is checked.
const UNMARKABLE: &str = "-";

/// How long a node waits for the mark of a share another node just recorded in etcd to
/// appear on the share root (that node writes it right after).
const APPEAR_WITHIN: Duration = Duration::from_secs(5);

/// A mark's text: 128 random bits in hex.
fn new_mark() -> String {
    let bits: u128 = rand::random();
    format!("{bits:032x}")
}

fn root_of(path: &std::path::Path) -> io::Result<Box<dyn VfsFile>> {
    let vfs = PosixVfs::new(path, PosixOptions::default())?;
    let opts = OpenOptions {
        directory: Some(true),
        ..Default::default()
    };
    Ok(vfs.open(&RelPath::root(), &opts)?.file)
}

/// The mark on `root`, if any (an unreadable one counts as another node's).
fn read(root: &dyn VfsFile) -> io::Result<Option<String>> {
    Ok(root
        .get_xattr(XATTR)?
        .map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// What checking one share found.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// The root carries the cluster's mark.
    Same,
    /// This node was first: it marked the root.
    Marked,
    /// The file system takes no extended attributes: not checked.
    Unmarkable,
}

/// How long a mark in etcd stands for a node that recorded it and has not yet written it on
/// the share root: if that node dies in between, the mark goes with this lease.
const PENDING_TTL: i64 = 5;

/// How long a node goes on trying when the share's mark in etcd keeps coming and going (each
/// marking node died before it wrote the root).
const SETTLE_WITHIN: Duration = Duration::from_secs(30);

/// Checks (or, first, makes) the mark of share `name` at `path` against etcd.
pub(crate) async fn check(
    client: &etcd_client::Client,
    keys: &Keys,
    (name, path): (&str, PathBuf),
) -> Result<Checked, String> {
    let refuse = |why: String| {
        format!(
            "share {name} ({}): {why}; every cluster node must serve each share from the one \
             file system the nodes share (docs/cluster.md)",
            path.display()
        )
    };
    let root = root_of(&path).map_err(|e| refuse(format!("its root: {e}")))?;
    let share = Share {
        client,
        key: keys.share(name).into_bytes(),
        root: root.as_ref(),
        refuse: &refuse,
    };
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        if let Some(checked) = share.attempt().await? {
            return Ok(checked);
        }
        if Instant::now() >= deadline {
            return Err(refuse("its mark in etcd kept going away".to_owned()));
        }
    }
}

/// One share being checked.
struct Share<'a> {
    client: &'a etcd_client::Client,
    /// `shares/NAME` in etcd.
    key: Vec<u8>,
    root: &'a dyn VfsFile,
    refuse: &'a (dyn Fn(String) -> String + Sync),
}

/// A mark as etcd holds it: its text, and whether it is still pending (on a lease).
struct Recorded {
    mark: String,
    pending: bool,
}

impl Share<'_> {
    /// One try: what was checked, or `None` when the mark in etcd went away meanwhile (its
    /// node died before writing the root) and the check starts over.
    async fn attempt(&self) -> Result<Option<Checked>, String> {
        let here = read(self.root).map_err(|e| (self.refuse)(format!("its mark: {e}")))?;
        let mut c = self.client.clone();
        // A root that carries a mark is recorded as it is; an unmarked one gets a new mark,
        // pending until the root carries it.
        let lease = match here {
            Some(_) => None,
            None => Some(
                c.lease_grant(PENDING_TTL, None)
                    .await
                    .map_err(|e| format!("etcd lease: {e}"))?
                    .id(),
            ),
        };
        let ours = here.clone().unwrap_or_else(new_mark);
        let txn = Txn::new()
            .when([Compare::create_revision(
                self.key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(
                self.key.clone(),
                ours.clone(),
                lease.map(|l| PutOptions::new().with_lease(l)),
            )])
            .or_else([TxnOp::get(self.key.clone(), None)]);
        let r = c.txn(txn).await.map_err(|e| format!("etcd: {e}"))?;
        if r.succeeded() {
            return match lease {
                None => Ok(Some(Checked::Same)),
                Some(lease) => self.mark_root(ours, lease).await,
            };
        }
        if let Some(lease) = lease {
            let _ = c.lease_revoke(lease).await;
        }
        match recorded(&r) {
            Some(theirs) => self.wait_for(here, theirs).await,
            None => Ok(None),
        }
    }

    /// This node recorded `ours`, pending on `lease`: it writes the mark on the root, then
    /// takes the lease off the mark in etcd.
    async fn mark_root(&self, ours: String, lease: i64) -> Result<Option<Checked>, String> {
        let mut c = self.client.clone();
        let (checked, value) = match self.root.set_xattr(XATTR, ours.as_bytes()) {
            Ok(()) => (Checked::Marked, ours.clone()),
            // Nothing to check on this file system: every node is told so.
            Err(e) if unsupported(&e) => (Checked::Unmarkable, UNMARKABLE.to_owned()),
            Err(e) => {
                // Not left in etcd for a root that does not carry it, or every node would
                // be refused until the lease ran out.
                let _ = c.lease_revoke(lease).await;
                return Err((self.refuse)(format!("marking its root: {e}")));
            }
        };
        // A put without a lease takes the mark off it, if it is still this node's.
        let confirm = Txn::new()
            .when([Compare::value(self.key.clone(), CompareOp::Equal, ours)])
            .and_then([TxnOp::put(self.key.clone(), value, None)]);
        let confirmed = c
            .txn(confirm)
            .await
            .map_err(|e| format!("etcd: {e}"))?
            .succeeded();
        let _ = c.lease_revoke(lease).await;
        // Not confirmed: the lease ran out first. The root carries the mark now, and the
        // next try records it (or meets another node's).
        Ok(confirmed.then_some(checked))
    }

    /// Another node recorded `theirs` first: it is on the root, or about to be while it is
    /// pending. `None` when it went away meanwhile.
    async fn wait_for(
        &self,
        mut seen: Option<String>,
        mut theirs: Recorded,
    ) -> Result<Option<Checked>, String> {
        // A recorded mark that is no longer pending is on the root: a shared file system
        // may show it a little later on this mount.
        let mut deadline = Instant::now() + APPEAR_WITHIN;
        loop {
            match &seen {
                _ if theirs.mark == UNMARKABLE => return Ok(Some(Checked::Unmarkable)),
                Some(m) if *m == theirs.mark => return Ok(Some(Checked::Same)),
                Some(m) => {
                    return Err((self.refuse)(format!(
                        "its root carries mark {m}, the cluster's is {}",
                        theirs.mark
                    )));
                }
                None if theirs.pending => deadline = Instant::now() + APPEAR_WITHIN,
                None if Instant::now() >= deadline => {
                    return Err((self.refuse)(format!(
                        "its root carries no mark, the cluster's is {}",
                        theirs.mark
                    )));
                }
                None => {}
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen = read(self.root).map_err(|e| (self.refuse)(format!("its mark: {e}")))?;
            let mut c = self.client.clone();
            let r = c
                .get(self.key.clone(), None)
                .await
                .map_err(|e| format!("etcd: {e}"))?;
            match r.kvs().first() {
                Some(kv) => theirs = Recorded::of(kv),
                None => return Ok(None),
            }
        }
    }
}

impl Recorded {
    fn of(kv: &etcd_client::KeyValue) -> Recorded {
        Recorded {
            mark: String::from_utf8_lossy(kv.value()).into_owned(),
            pending: kv.lease() != 0,
        }
    }
}

/// What etcd answered a mark's create-only transaction that found one.
fn recorded(r: &etcd_client::TxnResponse) -> Option<Recorded> {
    r.op_responses().into_iter().find_map(|op| match op {
        etcd_client::TxnOpResponse::Get(g) => g.kvs().first().map(Recorded::of),
        _ => None,
    })
}

/// A file system without extended attributes (smbq_vfs reads none there, and refuses a
/// write as unsupported).
fn unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}
