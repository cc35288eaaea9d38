//! Scenario 4, connection setup: the time from nothing to the first byte of a 1 KB file
//! (transport connect, NEGOTIATE, SESSION_SETUP, TREE_CONNECT, CREATE+READ compounded, CLOSE), TCP with
//! SMB3 encryption against QUIC, at 0, 10 and 50 ms round-trip time; then how many such
//! setups per second the server completes with several clients connecting at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use smbq_client::OpenOptions;

use crate::net::{LinkDesc, Net};
use crate::progress::Progress;
use crate::stats::{Summary, percentile_sorted};
use crate::target::{Endpoint, Target};
use crate::{Ctx, Scale};

const FILE: &str = "setup/1k.dat";
const FILE_SIZE: usize = 1000;
/// Clients setting up at once in the setups-per-second phase.
const CONCURRENCY: usize = 8;

#[derive(Clone, Debug, serde::Serialize)]
pub struct SetupRow {
    pub rtt_ms: f64,
    pub link: LinkDesc,
    pub target: Target,
    pub iterations: usize,
    /// Nothing to the first byte of the file (after READ).
    pub first_byte_ms: Summary,
    pub first_byte_p50_ms: f64,
    pub first_byte_p99_ms: f64,
    /// Including CLOSE.
    pub total_p50_ms: f64,
    /// One client after the other: 1 / mean setup time.
    pub sequential_setups_per_s: f64,
    /// `concurrency` clients at once, for a fixed time.
    pub parallel_setups_per_s: f64,
    pub concurrency: usize,
}

/// One setup; returns (first byte, total) in seconds.
async fn once(ep: &Endpoint) -> Result<(f64, f64), String> {
    let t0 = Instant::now();
    let tree = ep.open_tree().await?;
    // CREATE and READ go as one compound, as a client that wants the first byte soon sends
    // them: 6 round trips in all (docs/benchmarks.md, "setup").
    let (f, data) = tree
        .open_and_read(FILE, &OpenOptions::read(), FILE_SIZE as u32)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let data = data.map_err(|e| format!("read: {e}"))?;
    let first = t0.elapsed().as_secs_f64();
    if data.len() != FILE_SIZE {
        return Err(format!("read {} of {FILE_SIZE} bytes", data.len()));
    }
    f.close().await.map_err(|e| format!("close: {e}"))?;
    Ok((first, t0.elapsed().as_secs_f64()))
}

async fn measure(
    ep: Endpoint,
    n: usize,
    par_time: Duration,
) -> Result<(Vec<f64>, Vec<f64>, f64), String> {
    // One warm-up setup: the first connection pays for lazy initialisation on both sides.
    once(&ep).await?;
    let mut first = Vec::with_capacity(n);
    let mut total = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = once(&ep).await?;
        first.push(a);
        total.push(b);
    }
    let done = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + par_time;
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let ep = ep.clone();
        let done = done.clone();
        set.spawn(async move {
            while Instant::now() < end {
                once(&ep).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, String>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    let rate = done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    Ok((first, total, rate))
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<SetupRow>, String> {
    let dir = ctx.data.join("setup");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(ctx.data.join(FILE), vec![0x5a; FILE_SIZE]).map_err(|e| e.to_string())?;
    let (rtts, par): (Vec<(f64, usize)>, f64) = match ctx.scale {
        Scale::Quick => (vec![(0.0, 10), (10.0, 5), (50.0, 3)], 1.0),
        Scale::Full => (vec![(0.0, 300), (10.0, 100), (50.0, 40)], 5.0),
    };
    let emulate = ctx.can_emulate();
    if !emulate {
        ctx.note_error("setup: 10 and 50 ms RTT skipped: the link emulator needs root".into());
    }
    let steps: Vec<_> = rtts
        .into_iter()
        .filter(|&(rtt, _)| emulate || rtt == 0.0)
        .collect();
    let mut prog = Progress::new("setup", steps.len() * 2);
    let mut rows = Vec::new();
    for (rtt, n) in steps {
        let desc = if emulate {
            LinkDesc::emulated(rtt / 2.0, 0.0, ctx.args.rate_mbit)
        } else {
            LinkDesc::loopback()
        };
        let net = ctx.net(Some(desc.clone()))?;
        let r = at_rtt(
            ctx,
            &net,
            &mut prog,
            rtt,
            n,
            Duration::from_secs_f64(par),
            &desc,
        );
        ctx.stop_net(net);
        rows.extend(r?);
    }
    prog.finish();
    Ok(rows)
}

fn at_rtt(
    ctx: &mut Ctx,
    net: &Net,
    prog: &mut Progress,
    rtt: f64,
    n: usize,
    par: Duration,
    desc: &LinkDesc,
) -> Result<Vec<SetupRow>, String> {
    let server = ctx.start_smbq(net, true, &format!("setup-{rtt}"))?;
    let (u, p) = (ctx.user.clone(), ctx.password.clone());
    let mut rows = Vec::new();
    let mut result = Ok(());
    for target in [Target::SmbqTcpEnc, Target::SmbqQuic] {
        prog.step(&format!("{} at {rtt} ms RTT, {n} setups", target.name()));
        let ep = match target {
            Target::SmbqQuic => {
                let (addr, pin, cc) = (server.quic, server.pin, server.quic_settings.clone());
                let (u, p) = (u.clone(), p.clone());
                net.on_client(async move {
                    Endpoint::quic(addr.ok_or("no QUIC address")?, pin, cc, &u, &p)
                })
                .and_then(|r| r)
            }
            _ => server
                .tcp
                .ok_or_else(|| "no TCP address".to_string())
                .map(|a| Endpoint::tcp(target, a, &u, &p)),
        };
        let r = ep.and_then(|ep| net.on_client(measure(ep, n, par)).and_then(|r| r));
        match r {
            Ok((mut first, total, rate)) => {
                let mean = total.iter().sum::<f64>() / total.len().max(1) as f64;
                let fs = Summary::of(&first.iter().map(|s| s * 1e3).collect::<Vec<_>>());
                first.sort_by(f64::total_cmp);
                let mut total_sorted = total.clone();
                total_sorted.sort_by(f64::total_cmp);
                rows.push(SetupRow {
                    rtt_ms: rtt,
                    link: desc.clone(),
                    target,
                    iterations: n,
                    first_byte_ms: fs,
                    first_byte_p50_ms: percentile_sorted(&first, 50.0) * 1e3,
                    first_byte_p99_ms: percentile_sorted(&first, 99.0) * 1e3,
                    total_p50_ms: percentile_sorted(&total_sorted, 50.0) * 1e3,
                    sequential_setups_per_s: if mean > 0.0 { 1.0 / mean } else { 0.0 },
                    parallel_setups_per_s: rate,
                    concurrency: CONCURRENCY,
                });
            }
            Err(e) => {
                result = Err(format!("setup {} at {rtt} ms: {e}", target.name()));
                break;
            }
        }
    }
    let stopped = server.stop();
    result?;
    stopped?;
    Ok(rows)
}
