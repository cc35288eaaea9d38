//! Scenario `ca` (issue 37): what continuous availability costs. One smbq server exports the
//! same directory twice, as a plain share and as a continuously available one (persistent
//! handles kept in the store, every write write-through), and one client over encrypted TCP
//! measures, on each in turn: a CREATE (durable v2, RWH lease; persistent on the CA share)
//! plus CLOSE, one at a time; a 4 KiB WRITE on an open handle, one at a time; and a
//! sequential upload. The goal: CA at most 2x the plain share's p50 latency. Beside them, the
//! bench itself makes the same 4 KiB appending writes in the share's directory, each followed
//! by `fdatasync` (row `disk`): the flush a write-through answer must wait for on this disk,
//! with no server in the way, so the table shows what of the CA share's cost is the disk's.

use std::time::Instant;

use bytes::Bytes;
use smbq_client::transfer::{TransferOptions, upload};
use smbq_client::{File, OpenOptions, Tree};

use crate::net::Net;
use crate::progress::Progress;
use crate::servers::smbq::SmbqServer;
use crate::stats::{Summary, percentile_sorted};
use crate::target::{Endpoint, Target, check_protection};
use crate::{Ctx, Scale};

/// The shares, in table order: the plain one and the continuously available one.
pub const SHARES: [&str; 2] = ["share", "ca"];
/// The row of the disk's own 4 KiB write + `fdatasync`, made without a server.
pub const DISK: &str = "disk";
/// The operations, in table order.
pub const OPS: [&str; 2] = ["create_close", "write_4k"];
/// The CA share's directory under the data directory, and its configuration.
const DIR: &str = "ca";

#[derive(Clone, Debug, serde::Serialize)]
pub struct CaRow {
    pub share: String,
    /// `create_close`, `write_4k`, or `upload` (sequential MB/s instead of latencies).
    pub op: String,
    /// Operations timed, pooled over the repeats.
    pub ops: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    /// `upload` only: MB/s per repeat.
    pub mb_s: Summary,
}

/// The `[share.ca]` table the server is started with.
pub fn ca_config(data: &std::path::Path) -> String {
    format!(
        "\n[share.ca]\npath = \"{}\"\ncontinuous_availability = true\n",
        data.join(DIR).display()
    )
}

fn counts(scale: Scale) -> (usize, usize, u64) {
    match scale {
        Scale::Quick => (50, 200, 32 << 20),
        Scale::Full => (400, 2000, 512 << 20),
    }
}

/// One repeat on one share: the latencies (ms) of each operation, and the upload's MB/s.
async fn one_run(
    ep: Endpoint,
    (creates, writes, size): (usize, usize, u64),
    repeat: usize,
) -> Result<(Vec<f64>, Vec<f64>, f64), String> {
    let tree: Tree = ep.open_tree().await?;
    check_protection(Target::SmbqTcpEnc, &tree)?;
    let create_close =
        durable_create_close(&tree, &format!("{DIR}-bench/c{repeat}-"), creates).await?;
    let name = format!("{DIR}-bench/w{repeat}");
    let (f, _) = tree
        .open_durable(&name, &OpenOptions::create_truncate())
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let write_4k = timed_writes(&f, &name, writes).await?;
    f.close().await.map_err(|e| e.to_string())?;
    let name = format!("{DIR}-bench/u{repeat}");
    let (f, _) = tree
        .open_durable(&name, &OpenOptions::create_truncate())
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let (_, mb_s) = timed_upload(&f, &name, size).await?;
    f.close().await.map_err(|e| e.to_string())?;
    Ok((create_close, write_4k, mb_s))
}

/// `creates` CREATEs asking for a durable handle (persistent on a continuously available
/// share), each with its CLOSE, one at a time on `tree`, of files named `prefix` and a
/// number: their latencies (ms).
pub(crate) async fn durable_create_close(
    tree: &Tree,
    prefix: &str,
    creates: usize,
) -> Result<Vec<f64>, String> {
    let mut v = Vec::with_capacity(creates);
    for i in 0..creates {
        let name = format!("{prefix}{i}");
        let t = Instant::now();
        let (f, handle) = tree
            .open_durable(&name, &OpenOptions::create_truncate())
            .await
            .map_err(|e| format!("create {name}: {e}"))?;
        f.close().await.map_err(|e| format!("close {name}: {e}"))?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
        // A run that measured something else (no durable handle, or persistence where the
        // share is plain) fails rather than reports.
        let persistent = handle.as_ref().map(|h| h.persistent);
        if persistent != Some(tree.is_continuously_available()) {
            return Err(format!(
                "{name}: durable handle {persistent:?} on a share whose CA is {}",
                tree.is_continuously_available()
            ));
        }
    }
    Ok(v)
}

/// `writes` 4 KiB WRITEs one at a time on `f` (named `name`): their latencies (ms).
pub(crate) async fn timed_writes(f: &File, name: &str, writes: usize) -> Result<Vec<f64>, String> {
    let block = Bytes::from(vec![0x5a; 4096]);
    let mut ms = Vec::with_capacity(writes);
    for i in 0..writes {
        let t = Instant::now();
        f.write_at((i as u64) * 4096, block.clone())
            .await
            .map_err(|e| format!("write {name}: {e}"))?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(ms)
}

/// Uploads `size` bytes to `f` (named `name`) from offset 0: the bytes sent and MB/s.
pub(crate) async fn timed_upload(f: &File, name: &str, size: u64) -> Result<(u64, f64), String> {
    let data = Bytes::from(vec![0xa5; 1 << 20]);
    let mut left = size;
    let t = Instant::now();
    let source = |want: usize| {
        let n = want
            .min(data.len())
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        left -= n as u64;
        Ok(data.slice(..n))
    };
    let sent = upload(f, 0, TransferOptions::default(), source, |_| {})
        .await
        .map_err(|e| format!("upload {name}: {e}"))?;
    Ok((sent, sent as f64 / 1e6 / t.elapsed().as_secs_f64()))
}

/// A row of latencies (ms) of `op` on `share` (or a setup, crate::scenarios::cluster).
pub(crate) fn latency_row(share: &str, op: &str, mut v: Vec<f64>) -> CaRow {
    v.sort_by(f64::total_cmp);
    CaRow {
        share: share.into(),
        op: op.into(),
        ops: v.len(),
        p50_ms: percentile_sorted(&v, 50.0),
        p90_ms: percentile_sorted(&v, 90.0),
        p99_ms: percentile_sorted(&v, 99.0),
        mb_s: Summary::default(),
    }
}

/// `writes` 4 KiB writes one after the other at the end of a new file in `dir`, each followed
/// by `fdatasync` (its data and size on stable storage, as a write-through WRITE on a CA share
/// needs): their latencies (ms). The same disk, the same sizes and offsets as
/// [`timed_writes`], and no server.
fn disk_flushes(dir: &std::path::Path, writes: usize) -> Result<Vec<f64>, String> {
    use std::os::unix::fs::FileExt;
    let path = dir.join("disk-flushes");
    let f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let block = vec![0x5a; 4096];
    let mut ms = Vec::with_capacity(writes);
    for i in 0..writes {
        let t = Instant::now();
        f.write_all_at(&block, (i as u64) * 4096)
            .and_then(|()| f.sync_data())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok(ms)
}

fn measure(
    ctx: &Ctx,
    net: &Net,
    server: &SmbqServer,
    prog: &mut Progress,
) -> Result<Vec<CaRow>, String> {
    let base = Endpoint::tcp(
        Target::SmbqTcpEnc,
        server.tcp.ok_or("no TCP address")?,
        &ctx.user,
        &ctx.password,
    );
    let n = counts(ctx.scale);
    let mut got: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> =
        SHARES.iter().map(|_| Default::default()).collect();
    let mut disk = Vec::new();
    // The repeats take the shares in turns, so the machine's drift falls on both alike.
    for r in 0..ctx.repeats() {
        for (share, acc) in SHARES.iter().zip(got.iter_mut()) {
            prog.step(&format!("{share} (repeat {})", r + 1));
            let mut ep = base.clone();
            ep.share = (*share).to_string();
            let (c, w, mb) = net.on_client(one_run(ep, n, r))??;
            acc.0.extend(c);
            acc.1.extend(w);
            acc.2.push(mb);
        }
        disk.extend(disk_flushes(&ctx.data.join(format!("{DIR}-bench")), n.1)?);
    }
    let mut rows = Vec::new();
    for (share, (c, w, mb)) in SHARES.iter().zip(got) {
        rows.push(latency_row(share, "create_close", c));
        rows.push(latency_row(share, "write_4k", w));
        rows.push(CaRow {
            share: (*share).into(),
            op: "upload".into(),
            ops: mb.len(),
            p50_ms: 0.0,
            p90_ms: 0.0,
            p99_ms: 0.0,
            mb_s: Summary::of(&mb),
        });
    }
    rows.push(latency_row(DISK, "write_4k", disk));
    Ok(rows)
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<CaRow>, String> {
    // Each share's files go in its own `ca-bench` directory (the CA share's root is `ca`).
    for d in [format!("{DIR}-bench"), format!("{DIR}/{DIR}-bench")] {
        std::fs::create_dir_all(ctx.data.join(d)).map_err(|e| e.to_string())?;
    }
    let mut prog = Progress::new("ca", SHARES.len() * ctx.repeats());
    let net = ctx.net(None)?;
    let extra = ca_config(&ctx.data);
    let r = ctx
        .start_smbq_configured(&net, "ca", &extra)
        .and_then(|server| {
            let r = measure(ctx, &net, &server, &mut prog);
            let stopped = server.stop();
            let rows = r?;
            stopped.map(|()| rows)
        });
    ctx.stop_net(net);
    prog.finish();
    let _ = std::fs::remove_dir_all(ctx.data.join(DIR));
    let _ = std::fs::remove_dir_all(ctx.data.join(format!("{DIR}-bench")));
    r
}
