//! Breaks across nodes, on the holder's side: another node's admission asked this node
//! (crate::keys, `f/FILE/b/HOLDER/...`) to break what its opens cache for an open like the
//! one it describes. The break is the one this node's own table decides for such an open
//! (MS-FSA 2.1.5.1.2, MS-SMB2 3.3.4.6/3.3.4.7), sent to this node's clients by the server;
//! once they acknowledged, closed, or the break timed out, the records say what is still
//! cached and the request is done.

use std::sync::Arc;
use std::time::Instant;

use smbq_server::file_state::FileKey;
use smbq_server::file_state::OpenRequest;
use smbq_server::file_state::oplock::Level;
use smbq_server::open_state::{self, Changes as _, OpenState, Queries as _};
use tokio_util::sync::CancellationToken;

use crate::Cluster;
use crate::keys::BreakRequest;
use crate::remote::RemoteView;

/// No open of this node has this id: a write "through" it breaks every read cache.
const NOBODY: u64 = u64::MAX;

pub(crate) async fn carry_out(
    (cluster, local, remote): (Arc<Cluster>, Arc<dyn OpenState>, Arc<RemoteView>),
    f: FileKey,
    (key, rev): (String, i64),
    req: BreakRequest,
) {
    tracing::debug!(file = ?f, request = %key, "breaking for another node's open");
    let now = Instant::now();
    // Noted before the table is asked: a caching grant of an open admitted before this
    // request either happened already (and is broken here) or sees the note and grants none.
    let gate = remote.gate.lock().unwrap_or_else(|e| e.into_inner());
    if local.open_count_any(f) > 0 {
        // Only opens of this node admitted before now can be waiting for their grant.
        remote.contended_at(f, rev);
    }
    let intent = OpenRequest {
        granted: req.granted,
        share_access: req.share_access,
        overwrite: false,
        deletes: false,
        lease: None,
    };
    let mut fx = local.contend(f, &intent, now).unwrap_or_default();
    if req.writes {
        // Read caching goes too: the other node's client will change the data, and its
        // writes do not reach this node's table (MS-FSA 2.1.4.12 breaks it at the write).
        let mut on_write = local.on_write(f, NOBODY, now);
        on_write.wait = None;
        fx.merge(on_write);
    }
    drop(gate);
    let wait = fx.wait.take();
    if let Some(sink) = cluster.sink.get() {
        sink(fx);
    }
    if let Some(token) = wait {
        let _ = open_state::break_wait(local.as_ref(), token, &CancellationToken::new()).await;
    }
    if let Err(e) = cluster
        .store
        .broke(f, &key, &caching_now(local.as_ref(), f))
        .await
    {
        // Tried again until etcd takes it (each try with what is cached then): left
        // undone, the request would hold the other node's open until its break time runs
        // out (35 s), as after an etcd outage that ended meanwhile.
        tracing::warn!(status = ?e, "break request not marked done yet; trying again");
        cluster.retry_later("break request done", move |s| {
            let (local, key) = (local.clone(), key.clone());
            async move { s.broke(f, &key, &caching_now(local.as_ref(), f)).await }
        });
    }
}

/// What each of this node's opens of `f` caches now.
fn caching_now(local: &dyn OpenState, f: FileKey) -> Vec<(u64, u32)> {
    local
        .open_ids(f)
        .into_iter()
        .map(|id| (id, caching_bits(local, f, id)))
        .collect()
}

/// What open `id` caches, as lease state bits (an oplock as its lease equivalent).
fn caching_bits(local: &dyn OpenState, f: FileKey, id: u64) -> u32 {
    match local.caching_of(f, id) {
        (_, Some((_, granted))) => granted.state,
        (Level::Batch, None) => 0x7,
        (Level::Exclusive, None) => 0x5,
        (Level::II, None) => 0x1,
        (Level::None, None) => 0,
    }
}
