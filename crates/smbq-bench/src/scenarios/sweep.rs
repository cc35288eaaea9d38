//! Scenario 3, the file-size sweep of the Windows Server 2025 study: files of 1 KB to 1 GB
//! (10 GB in the full run) copied onto the share repeatedly, in persistent mode (one session
//! for every copy) and ephemeral mode (connect, negotiate, authenticate, tree connect, copy,
//! disconnect for each), over TCP (SMB3 encryption) and QUIC. Reports throughput, client and
//! server CPU and server memory.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::Rng;
use smbq_client::transfer::{TransferOptions, upload};
use smbq_client::{OpenOptions, Tree};

use crate::net::{CLIENT_THREADS, Net};
use crate::progress::Progress;
use crate::stats::Summary;
use crate::sys;
use crate::target::{Endpoint, Target};
use crate::{Ctx, Scale};

#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepRow {
    pub size: u64,
    /// "persistent" or "ephemeral".
    pub mode: &'static str,
    pub target: Target,
    pub copies: usize,
    /// Per-copy throughput: min/median/max over the copies.
    pub per_copy_mb_s: Summary,
    /// All bytes over all the time, as Robocopy's summary reports.
    pub mb_s: f64,
    pub client_cpu_pct: f64,
    pub server_cpu_pct: f64,
    pub server_rss_kib: u64,
    pub server_peak_rss_kib: u64,
}

pub fn plan(scale: Scale) -> Vec<(u64, usize)> {
    match scale {
        Scale::Quick => vec![
            (1_000, 50),
            (10_000, 50),
            (100_000, 20),
            (1_000_000, 10),
            (10_000_000, 3),
        ],
        // The study's counts (1,000 / 100 / 10), fewer at 10 GB to keep the run bounded.
        Scale::Full => vec![
            (1_000, 1000),
            (10_000, 1000),
            (100_000, 100),
            (1_000_000, 100),
            (10_000_000, 10),
            (100_000_000, 10),
            (1_000_000_000, 10),
            (10_000_000_000, 3),
        ],
    }
}

/// Pieces of a fixed random block, `size` bytes in all.
fn source(
    block: &Bytes,
    size: u64,
) -> impl FnMut(usize) -> Result<Bytes, smbq_client::Error> + use<> {
    let block = block.clone();
    let mut left = size;
    let mut at = 0usize;
    move |want| {
        let n = (want as u64).min(left).min((block.len() - at) as u64) as usize;
        let piece = block.slice(at..at + n);
        left -= n as u64;
        at = (at + n) % block.len();
        Ok(piece)
    }
}

async fn copy(tree: &Tree, name: &str, size: u64, block: &Bytes) -> Result<(), String> {
    let opts = TransferOptions::default();
    if size <= u64::from(opts.chunk.min(tree.max_write())) {
        // A file that fits one WRITE goes as CREATE + WRITE + CLOSE in one compound, as
        // `smbq put` sends it: one round trip.
        let data = source(block, size)(size as usize).map_err(|e| e.to_string())?;
        tree.write_small(name, &OpenOptions::create_truncate(), &data)
            .await
            .map_err(|e| format!("write {name}: {e}"))?;
        return Ok(());
    }
    let f = tree
        .open(name, &OpenOptions::create_truncate())
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let n = upload(&f, 0, opts, source(block, size), |_| {})
        .await
        .map_err(|e| format!("upload {name}: {e}"))?;
    f.close().await.map_err(|e| format!("close {name}: {e}"))?;
    if n != size {
        return Err(format!("{name}: wrote {n} of {size} bytes"));
    }
    Ok(())
}

/// Runs `copies` copies; returns each copy's seconds.
async fn batch(
    ep: Endpoint,
    persistent: bool,
    size: u64,
    copies: usize,
    block: Bytes,
) -> Result<Vec<f64>, String> {
    let name = format!("sweep/{}-{size}.bin", ep.target.name());
    let mut times = Vec::with_capacity(copies);
    let shared = if persistent {
        Some(ep.open_tree().await?)
    } else {
        None
    };
    for _ in 0..copies {
        let t0 = Instant::now();
        match &shared {
            Some(tree) => copy(tree, &name, size, &block).await?,
            None => {
                let tree = ep.open_tree().await?;
                copy(&tree, &name, size, &block).await?;
                tree.disconnect()
                    .await
                    .map_err(|e| format!("tree disconnect: {e}"))?;
                tree.session()
                    .logoff()
                    .await
                    .map_err(|e| format!("logoff: {e}"))?;
            }
        }
        times.push(t0.elapsed().as_secs_f64());
    }
    Ok(times)
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<SweepRow>, String> {
    let net = ctx.net(None)?;
    let result = run_on(ctx, &net);
    ctx.stop_net(net);
    result
}

fn run_on(ctx: &mut Ctx, net: &Net) -> Result<Vec<SweepRow>, String> {
    let server = ctx.start_smbq(net, true, "sweep")?;
    let r = measure(ctx, net, &server);
    let stopped = server.stop();
    let rows = r?;
    stopped?;
    Ok(rows)
}

fn measure(
    ctx: &Ctx,
    net: &Net,
    server: &crate::servers::smbq::SmbqServer,
) -> Result<Vec<SweepRow>, String> {
    std::fs::create_dir_all(ctx.data.join("sweep")).map_err(|e| e.to_string())?;
    let (u, p) = (ctx.user.clone(), ctx.password.clone());
    let quic_addr = server.quic.ok_or("no QUIC address")?;
    let (pin, cc) = (server.pin, server.quic_settings.clone());
    let quic = net.on_client(async move { Endpoint::quic(quic_addr, pin, cc, &u, &p) })??;
    let tcp = Endpoint::tcp(
        Target::SmbqTcpEnc,
        server.tcp.ok_or("no TCP address")?,
        &ctx.user,
        &ctx.password,
    );
    let mut block = vec![0u8; 8 << 20];
    rand::thread_rng().fill(block.as_mut_slice());
    let block = Bytes::from(block);
    let plan = plan(ctx.scale);
    let mut prog = Progress::new("sweep", plan.len() * 4);
    let mut rows = Vec::new();
    let pid = server.pid();
    for &(size, copies) in &plan {
        for persistent in [true, false] {
            for ep in [&tcp, &quic] {
                let mode = if persistent {
                    "persistent"
                } else {
                    "ephemeral"
                };
                prog.step(&format!("{size} B x {copies} {mode} {}", ep.target.name()));
                let c0 = sys::threads_cpu(CLIENT_THREADS);
                let s0 = sys::tree_cpu(pid);
                let t0 = Instant::now();
                let times =
                    net.on_client(batch(ep.clone(), persistent, size, copies, block.clone()))??;
                let wall = t0.elapsed().as_secs_f64().max(1e-9);
                let c1 = sys::threads_cpu(CLIENT_THREADS);
                let s1 = sys::tree_cpu(pid);
                let (rss, hwm) = server.rss_kib();
                let per: Vec<f64> = times
                    .iter()
                    .map(|t| size as f64 / 1e6 / t.max(1e-9))
                    .collect();
                let busy: f64 = times.iter().sum();
                rows.push(SweepRow {
                    size,
                    mode,
                    target: ep.target,
                    copies,
                    per_copy_mb_s: Summary::of(&per),
                    mb_s: (size as f64 * copies as f64) / 1e6 / busy.max(1e-9),
                    client_cpu_pct: 100.0 * (c1 - c0) / wall,
                    server_cpu_pct: 100.0 * (s1 - s0) / wall,
                    server_rss_kib: rss,
                    server_peak_rss_kib: hwm,
                });
            }
        }
        // The copies of the largest sizes would otherwise fill the scratch disk.
        for t in ["smbq-tcp-enc", "smbq-quic"] {
            let _ = std::fs::remove_file(ctx.data.join(format!("sweep/{t}-{size}.bin")));
        }
    }
    let _ = net.on_client(async move {
        drop(quic);
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
    prog.finish();
    Ok(rows)
}
