//! Scenario `interactive` (issue 14): what a user browsing a share feels while the same
//! connection copies a large file. One client connection reads a 1 GiB file; meanwhile it
//! stats files, reads 4 KiB of other (already open) files and lists a directory, one operation
//! at a time, and each one's latency is recorded. Over smbq's TCP (SMB3 encryption), QUIC on
//! one stream (as Windows uses it) and QUIC with smbq's data streams (docs/multistream.md),
//! through the link emulator at 20 ms round trip, without loss and with 2 % loss.

use std::time::{Duration, Instant};

use smbq_client::transfer::{TransferOptions, download};
use smbq_client::{File, OpenOptions, Tree};

use crate::net::LinkDesc;
use crate::progress::Progress;
use crate::scenarios::loss::MULTI_STREAMS;
use crate::stats::{Summary, percentile_sorted};
use crate::target::{Endpoint, Target};
use crate::{Ctx, Scale};

const DIR: &str = "interactive";
const SMALL_DIR: &str = "interactive/small";
const BULK: &str = "interactive/bulk.bin";
/// Small files: opened once before the bulk read for the 4 KiB reads, and the listed directory.
const SMALL_FILES: usize = 24;
const SMALL_SIZE: usize = 16 * 1024;
/// One-way delay of the emulated link: 20 ms round trip.
const ONE_WAY_MS: f64 = 10.0;

/// The methods, in table order.
pub const METHODS: [&str; 3] = ["smbq-tcp-enc", "smbq-quic", "smbq-quic-multi"];

/// Latencies of the small operations of one method on one condition, pooled over repeats.
#[derive(Clone, Debug, serde::Serialize)]
pub struct InteractiveRow {
    pub one_way_delay_ms: f64,
    pub loss_pct: f64,
    /// One of [`METHODS`].
    pub method: &'static str,
    /// Small operations timed (all repeats).
    pub ops: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub stat_p99_ms: f64,
    pub read_p99_ms: f64,
    pub list_p99_ms: f64,
    /// Throughput of the concurrent bulk read, MB/s, over repeats.
    pub bulk_mb_s: Summary,
    /// Bulk reads that hit the time limit (their small operations still count).
    pub timeouts: usize,
}

impl InteractiveRow {
    /// Round trip of the condition's link, ms.
    pub fn rtt_ms(&self) -> f64 {
        2.0 * self.one_way_delay_ms
    }
}

/// The small operations' kinds, in the order they repeat.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Stat,
    Read,
    List,
}

fn bulk_size(scale: Scale) -> u64 {
    match scale {
        Scale::Quick => 64 << 20,
        Scale::Full => 1 << 30,
    }
}

fn time_limit(scale: Scale) -> Duration {
    match scale {
        Scale::Quick => Duration::from_secs(60),
        Scale::Full => Duration::from_secs(300),
    }
}

fn prepare(ctx: &Ctx) -> Result<u64, String> {
    let small = ctx.data.join(SMALL_DIR);
    std::fs::create_dir_all(&small).map_err(|e| e.to_string())?;
    for i in 0..SMALL_FILES {
        let p = small.join(format!("doc{i:02}.txt"));
        if !std::fs::metadata(&p).is_ok_and(|m| m.len() == SMALL_SIZE as u64) {
            std::fs::write(&p, vec![b'a' + (i % 26) as u8; SMALL_SIZE])
                .map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    let size = bulk_size(ctx.scale);
    let bulk = ctx.data.join(BULK);
    if !std::fs::metadata(&bulk).is_ok_and(|m| m.len() == size) {
        let block: Vec<u8> = (0..(8u32 << 20))
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let mut f = std::fs::File::create(&bulk).map_err(|e| e.to_string())?;
        let mut left = size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            std::io::Write::write_all(&mut f, block.get(..n).unwrap_or_default())
                .map_err(|e| e.to_string())?;
            left -= n as u64;
        }
    }
    Ok(size)
}

/// One measured run: the bulk read and, until it ends, small operations one after another.
/// Returns each small operation's kind and latency (ms), and the bulk read's MB/s (None at
/// the time limit).
async fn one_run(
    ep: Endpoint,
    size: u64,
    limit: Duration,
) -> Result<(Vec<(Op, f64)>, Option<f64>), String> {
    let tree: Tree = ep.open_tree().await?;
    let mut small: Vec<File> = Vec::new();
    for i in 0..SMALL_FILES {
        let name = format!("{SMALL_DIR}/doc{i:02}.txt");
        small.push(
            tree.open(&name, &OpenOptions::read())
                .await
                .map_err(|e| format!("open {name}: {e}"))?,
        );
    }
    let bulk = tree
        .open(BULK, &OpenOptions::read())
        .await
        .map_err(|e| format!("open {BULK}: {e}"))?;
    let t0 = Instant::now();
    let reader = tokio::spawn(async move {
        let r = download(&bulk, 0, size, TransferOptions::default(), |_| Ok(())).await;
        let _ = bulk.close().await;
        r
    });
    let mut samples = Vec::new();
    let ops = [Op::Stat, Op::Read, Op::List];
    let mut i = 0usize;
    while !reader.is_finished() && t0.elapsed() < limit {
        let op = ops.get(i % ops.len()).copied().unwrap_or(Op::Stat);
        let file = i % SMALL_FILES;
        let started = Instant::now();
        let r = match op {
            Op::Stat => tree
                .stat(&format!("{SMALL_DIR}/doc{file:02}.txt"))
                .await
                .map(|_| ()),
            Op::Read => match small.get(file) {
                Some(f) => f.read_at(0, 4096).await.map(|_| ()),
                None => Ok(()),
            },
            Op::List => tree.list(SMALL_DIR).await.map(|_| ()),
        };
        r.map_err(|e| format!("small operation during the bulk read: {e}"))?;
        samples.push((op, started.elapsed().as_secs_f64() * 1e3));
        i += 1;
    }
    let mb_s = if reader.is_finished() {
        let got = reader
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("bulk read: {e}"))?;
        if got != size {
            return Err(format!("bulk read moved {got} of {size} bytes"));
        }
        Some(size as f64 / 1e6 / t0.elapsed().as_secs_f64())
    } else {
        reader.abort();
        None
    };
    for f in small {
        let _ = f.close().await;
    }
    Ok((samples, mb_s))
}

fn p99_of(samples: &[(Op, f64)], op: Option<Op>) -> f64 {
    let mut v: Vec<f64> = samples
        .iter()
        .filter(|(o, _)| op.is_none_or(|want| *o == want))
        .map(|(_, ms)| *ms)
        .collect();
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, 99.0)
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<InteractiveRow>, String> {
    if !ctx.can_emulate() {
        return Err("skipped: the link emulator needs root".into());
    }
    std::fs::create_dir_all(ctx.data.join(DIR)).map_err(|e| e.to_string())?;
    let size = prepare(ctx)?;
    let repeats = ctx.repeats();
    let conditions = [0.0, 2.0];
    let mut prog = Progress::new("interactive", conditions.len() * METHODS.len() * repeats);
    let mut rows = Vec::new();
    for loss in conditions {
        let net = ctx.net(Some(LinkDesc::emulated(
            ONE_WAY_MS,
            loss,
            ctx.args.rate_mbit,
        )))?;
        let r = condition(ctx, &net, &mut prog, loss, size, repeats);
        ctx.stop_net(net);
        rows.extend(r?);
    }
    prog.finish();
    Ok(rows)
}

fn condition(
    ctx: &mut Ctx,
    net: &crate::net::Net,
    prog: &mut Progress,
    loss: f64,
    size: u64,
    repeats: usize,
) -> Result<Vec<InteractiveRow>, String> {
    let server = ctx.start_smbq(net, true, &format!("interactive-{loss}"))?;
    let r = measure(ctx, net, prog, loss, size, repeats, &server);
    let stopped = server.stop();
    let rows = r?;
    stopped?;
    Ok(rows)
}

fn measure(
    ctx: &Ctx,
    net: &crate::net::Net,
    prog: &mut Progress,
    loss: f64,
    size: u64,
    repeats: usize,
    server: &crate::servers::smbq::SmbqServer,
) -> Result<Vec<InteractiveRow>, String> {
    let (u, p) = (ctx.user.clone(), ctx.password.clone());
    let (qa, pin, qs) = (
        server.quic.ok_or("no QUIC address")?,
        server.pin,
        server.quic_settings.clone(),
    );
    let quic = net.on_client(async move { Endpoint::quic(qa, pin, qs, &u, &p) })??;
    let tcp = Endpoint::tcp(
        Target::SmbqTcpEnc,
        server.tcp.ok_or("no TCP address")?,
        &ctx.user,
        &ctx.password,
    );
    let limit = time_limit(ctx.scale);
    let mut rows = Vec::new();
    for method in METHODS {
        let ep = match method {
            "smbq-quic" => quic.clone(),
            "smbq-quic-multi" => quic.clone().with_data_streams(MULTI_STREAMS),
            _ => tcp.clone(),
        };
        let mut samples = Vec::new();
        let mut speeds = Vec::new();
        let mut timeouts = 0;
        for r in 0..repeats {
            prog.step(&format!(
                "{method} at {ONE_WAY_MS} ms one-way, {loss} % loss (repeat {})",
                r + 1
            ));
            let job = one_run(ep.clone(), size, limit);
            let (s, mb) = net.on_client(job)??;
            samples.extend(s);
            match mb {
                Some(v) => speeds.push(v),
                None => timeouts += 1,
            }
        }
        let mut all: Vec<f64> = samples.iter().map(|(_, ms)| *ms).collect();
        all.sort_by(f64::total_cmp);
        rows.push(InteractiveRow {
            one_way_delay_ms: ONE_WAY_MS,
            loss_pct: loss,
            method,
            ops: all.len(),
            p50_ms: percentile_sorted(&all, 50.0),
            p99_ms: percentile_sorted(&all, 99.0),
            max_ms: all.last().copied().unwrap_or(0.0),
            stat_p99_ms: p99_of(&samples, Some(Op::Stat)),
            read_p99_ms: p99_of(&samples, Some(Op::Read)),
            list_p99_ms: p99_of(&samples, Some(Op::List)),
            bulk_mb_s: Summary::of(&speeds),
            timeouts,
        });
    }
    let _ = net.on_client(async move { drop(quic) });
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_filters_by_kind() {
        let mut s: Vec<(Op, f64)> = (1..=100).map(|i| (Op::Stat, f64::from(i))).collect();
        s.push((Op::List, 1000.0));
        assert_eq!(p99_of(&s, Some(Op::Stat)), 99.0);
        assert_eq!(p99_of(&s, Some(Op::List)), 1000.0);
        assert_eq!(p99_of(&s, Some(Op::Read)), 0.0);
        assert_eq!(p99_of(&s, None), 100.0);
    }
}
