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
//! create-only transaction, and only the winner writes the attribute; the other waits a
//! little for it to appear. Nodes check their shares in one order (by name), so two shares
//! on one root get the mark of the first on every node. A node that cannot write the
//! attribute (a read-only mount, no right to smbq's namespace) takes its mark out of etcd
//! again and stops. If a node dies between the two steps, etcd keeps a mark no root
//! carries: remove `shares/NAME` from etcd (docs/cluster.md).
//!
//! The attribute is in `trusted.` when smbq runs as root and in `user.` otherwise: all
//! nodes of a cluster must run alike.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, Txn, TxnOp};
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
    let here = read(root.as_ref()).map_err(|e| refuse(format!("its mark: {e}")))?;
    let key = keys.share(name);
    let ours = here.clone().unwrap_or_else(new_mark);
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key.clone(), ours.clone(), None)])
        .or_else([TxnOp::get(key, None)]);
    let mut c = client.clone();
    let r = c.txn(txn).await.map_err(|e| format!("etcd: {e}"))?;
    if r.succeeded() {
        if here.is_some() {
            return Ok(Checked::Same);
        }
        return match root.set_xattr(XATTR, ours.as_bytes()) {
            Ok(()) => Ok(Checked::Marked),
            Err(e) if unsupported(&e) => {
                // Nothing to check on this file system: every node is told so.
                let mut c = client.clone();
                c.put(keys.share(name), UNMARKABLE, None)
                    .await
                    .map_err(|e| format!("etcd: {e}"))?;
                Ok(Checked::Unmarkable)
            }
            Err(e) => {
                // Not left in etcd for a root that does not carry it, or every node would
                // be refused: taken back unless another node changed it meanwhile.
                let undo = Txn::new()
                    .when([Compare::value(keys.share(name), CompareOp::Equal, ours)])
                    .and_then([TxnOp::delete(keys.share(name), None)]);
                let mut c = client.clone();
                let _ = c.txn(undo).await;
                Err(refuse(format!("marking its root: {e}")))
            }
        };
    }
    let mut theirs = recorded(&r).ok_or_else(|| "etcd: the share's mark went".to_owned())?;
    // Another node recorded the mark: it is on the root, or about to be.
    let deadline = Instant::now() + APPEAR_WITHIN;
    let mut seen = here;
    loop {
        match seen {
            _ if theirs == UNMARKABLE => return Ok(Checked::Unmarkable),
            Some(m) if m == theirs => return Ok(Checked::Same),
            Some(m) => {
                return Err(refuse(format!(
                    "its root carries mark {m}, the cluster's is {theirs}"
                )));
            }
            None if Instant::now() >= deadline => {
                return Err(refuse(format!(
                    "its root carries no mark, the cluster's is {theirs}"
                )));
            }
            None => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = read(root.as_ref()).map_err(|e| refuse(format!("its mark: {e}")))?;
        let mut c = client.clone();
        let r = c
            .get(keys.share(name), None)
            .await
            .map_err(|e| format!("etcd: {e}"))?;
        if let Some(kv) = r.kvs().first() {
            theirs = String::from_utf8_lossy(kv.value()).into_owned();
        }
    }
}

/// What etcd answered a mark's create-only transaction that found one.
fn recorded(r: &etcd_client::TxnResponse) -> Option<String> {
    r.op_responses().into_iter().find_map(|op| match op {
        etcd_client::TxnOpResponse::Get(g) => g
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
        _ => None,
    })
}

/// A file system without extended attributes (smbq_vfs reads none there, and refuses a
/// write as unsupported).
fn unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}
