//! Scenario 5, loss and delay (the QUIC-versus-SCP study): 100 files sized like its JPEG set
//! (177 KB to 1.72 MB, mean 658 KB) downloaded in parallel, and one 1.5 GB file, under added
//! one-way delay and random loss on the emulated link; transfer time for smbq over TCP (SMB3
//! encryption), smbq over QUIC, and OpenSSH scp over the same link. Every time includes the
//! connection setup (handshake, authentication), as a user's copy does.
//!
//! TCP runs the namespaces' congestion controller (the kernel default unless
//! `--tcp-congestion`); the goal's point is also measured with TCP on Cubic when that default
//! is something else, since Cubic is what most Linux hosts and the study's TCP run. A transfer
//! that exceeds the time limit is stopped and counted at the limit, so one collapsed cell
//! cannot hold up the grid.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::Rng;
use smbq_client::OpenOptions;
use smbq_client::transfer::{TransferOptions, download};

use crate::net::{LinkDesc, Net, tcp_congestion_of};
use crate::progress::Progress;
use crate::servers::smbq::SmbqServer;
use crate::servers::sshd::Sshd;
use crate::stats::{Summary, normal_quantile};
use crate::target::Endpoint;
use crate::{Ctx, LossPoints, Scale};

const SET_DIR: &str = "loss/set";
/// The methods each condition is timed with: smbq over TCP (SMB3 encryption), over QUIC on one
/// stream (as Windows uses it), over QUIC with smbq's data streams (docs/multistream.md), and
/// scp.
pub const METHODS: [&str; 4] = ["smbq-tcp-enc", "smbq-quic", "smbq-quic-multi", "scp"];
/// Data streams the multi-stream method asks for.
pub const MULTI_STREAMS: u16 = 8;
const BIG_FILE: &str = "loss/big.iso";

#[derive(Clone, Debug, serde::Serialize)]
pub struct LossRow {
    /// "files" (the 100-file set) or "big" (one large file).
    pub group: &'static str,
    pub one_way_delay_ms: f64,
    pub loss_pct: f64,
    /// One of [`METHODS`].
    pub method: &'static str,
    /// Repeats stopped at the time limit; they count as the limit in `seconds`.
    pub timeouts: usize,
    pub seconds: Summary,
    pub bytes: u64,
    pub files: usize,
    /// TCP's congestion controller in the namespaces (smbq TCP and scp).
    pub tcp_congestion: String,
    /// smbq's QUIC congestion controller.
    pub quic_congestion: &'static str,
    /// Loss the emulator actually applied over the whole condition (both directions, every
    /// method), percent of packets.
    pub measured_loss_pct: Option<f64>,
}

/// The JPEG set's sizes: 100 quantiles of a log-normal with the set's mean (658 KB) and
/// standard deviation (407 KB), clamped to its range (177 KB to 1.72 MB); divided by `scale`.
pub fn set_sizes(divide: u64) -> Vec<u64> {
    let (mean, sd) = (658_000f64, 407_000f64);
    let sigma2 = (1.0 + (sd / mean).powi(2)).ln();
    let mu = mean.ln() - sigma2 / 2.0;
    (0..100)
        .map(|i| {
            let q = (f64::from(i) + 0.5) / 100.0;
            let x = (mu + sigma2.sqrt() * normal_quantile(q)).exp();
            (x.clamp(177_000.0, 1_720_000.0) as u64 / divide).max(1)
        })
        .collect()
}

#[derive(Clone)]
struct Condition {
    delay_ms: f64,
    loss_pct: f64,
    files: bool,
    big: bool,
    /// TCP congestion controller to set in the namespaces (None: the run's default).
    tcp_cc: Option<&'static str>,
}

/// Longest a single transfer may take before it is stopped and counted at this limit.
fn time_limit(scale: Scale) -> Duration {
    match scale {
        Scale::Quick => Duration::from_secs(60),
        Scale::Full => Duration::from_secs(300),
    }
}

fn conditions(scale: Scale, points: LossPoints, default_tcp_cc: &str) -> Vec<Condition> {
    let c = |delay_ms, loss_pct, files, big| Condition {
        delay_ms,
        loss_pct,
        files,
        big,
        tcp_cc: None,
    };
    // The goal's point (2 % loss at 20 ms round trip, files) once more with TCP on Cubic.
    let cubic_goal = (default_tcp_cc != "cubic").then(|| Condition {
        tcp_cc: Some("cubic"),
        ..c(10.0, 2.0, true, false)
    });
    if points == LossPoints::Goal {
        let mut v = vec![c(10.0, 2.0, true, false)];
        v.extend(cubic_goal);
        return v;
    }
    match scale {
        Scale::Quick => {
            let mut v = vec![
                c(0.0, 0.0, true, true),
                c(0.0, 1.0, false, true),
                c(10.0, 2.0, true, false),
            ];
            v.extend(cubic_goal);
            v
        }
        Scale::Full => {
            let mut v: Vec<Condition> = [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]
                .into_iter()
                .map(|d| c(d, 0.0, true, true))
                .collect();
            v.extend(
                [1.0, 2.0, 3.0, 4.0, 5.0]
                    .into_iter()
                    .map(|l| c(0.0, l, true, true)),
            );
            // The goal's point: 2 % loss at 20 ms round trip. TCP's throughput there is a few
            // Mbit/s (Mathis et al.), so the 1.5 GB file is left out of it.
            v.push(c(10.0, 2.0, true, false));
            v.extend(cubic_goal);
            v
        }
    }
}

fn write_random(path: &Path, size: u64, block: &[u8]) -> Result<(), String> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == size) {
        return Ok(());
    }
    let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(block.get(..n).unwrap_or_default())
            .map_err(|e| e.to_string())?;
        left -= n as u64;
    }
    Ok(())
}

async fn smb_download(
    ep: Endpoint,
    files: Vec<(String, u64)>,
    dest: PathBuf,
) -> Result<(f64, u64), String> {
    let t0 = Instant::now();
    let tree = ep.open_tree().await?;
    let mut set = tokio::task::JoinSet::new();
    for (name, size) in files {
        let tree = tree.clone();
        let local = dest.join(Path::new(&name).file_name().unwrap_or_default());
        set.spawn(async move {
            let f = tree
                .open(&name, &OpenOptions::read())
                .await
                .map_err(|e| format!("open {name}: {e}"))?;
            let mut out = std::fs::File::create(&local).map_err(|e| e.to_string())?;
            let got = download(&f, 0, size, TransferOptions::default(), |b| {
                out.write_all(b)
                    .map_err(|source| smbq_client::Error::Local {
                        what: "local write",
                        source,
                    })
            })
            .await
            .map_err(|e| format!("download {name}: {e}"))?;
            f.close().await.map_err(|e| format!("close {name}: {e}"))?;
            if got != size {
                return Err(format!("{name}: {got} of {size} bytes"));
            }
            Ok::<_, String>(got)
        });
    }
    let mut bytes = 0;
    while let Some(r) = set.join_next().await {
        bytes += r.map_err(|e| e.to_string())??;
    }
    let took = t0.elapsed().as_secs_f64();
    drop(tree);
    Ok((took, bytes))
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Runs the grid; `written` gets every row so far after each condition.
pub fn run(
    ctx: &mut Ctx,
    mut written: impl FnMut(&Ctx, &[LossRow]),
) -> Result<Vec<LossRow>, String> {
    if !ctx.can_emulate() {
        return Err("skipped: the link emulator needs root".into());
    }
    let (divide, big_size) = match ctx.scale {
        Scale::Quick => (20, 16 << 20),
        Scale::Full => (1, 1_500_000_000),
    };
    let sizes = set_sizes(divide);
    let mut block = vec![0u8; 8 << 20];
    rand::thread_rng().fill(block.as_mut_slice());
    let set_dir = ctx.data.join(SET_DIR);
    std::fs::create_dir_all(&set_dir).map_err(|e| e.to_string())?;
    let mut set_files = Vec::new();
    for (i, &s) in sizes.iter().enumerate() {
        let name = format!("{SET_DIR}/img{i:03}.jpg");
        write_random(&ctx.data.join(&name), s, &block)?;
        set_files.push((name, s));
    }
    let default_cc = ctx
        .args
        .tcp_congestion
        .clone()
        .or_else(crate::sys::tcp_congestion)
        .unwrap_or_default();
    let conds = conditions(ctx.scale, ctx.args.loss_points, &default_cc);
    if conds.iter().any(|c| c.big) {
        write_random(&ctx.data.join(BIG_FILE), big_size, &block)?;
    }
    drop(block);
    let work = Workload {
        set_files,
        big_size,
        repeats: ctx.repeats(),
    };
    let steps: usize = conds
        .iter()
        .map(|c| (usize::from(c.files) + usize::from(c.big)) * METHODS.len() * work.repeats)
        .sum();
    let mut prog = Progress::new("loss", steps);
    let mut rows = Vec::new();
    for c in conds {
        let mut desc = LinkDesc::emulated(c.delay_ms, c.loss_pct, ctx.args.rate_mbit);
        desc.tcp_congestion = c.tcp_cc.map(str::to_string);
        let net = ctx.net(Some(desc))?;
        let r = condition(ctx, &net, &mut prog, c, &work);
        let measured = net.link_stats().and_then(|s| {
            let seen = s.a_to_b.packets_seen() + s.b_to_a.packets_seen();
            let lost = s.a_to_b.dropped_loss + s.b_to_a.dropped_loss;
            (seen > 0).then(|| lost as f64 * 100.0 / seen as f64)
        });
        let tcp_cc = tcp_congestion_of(&net.desc);
        ctx.stop_net(net);
        for mut row in r? {
            row.measured_loss_pct = measured;
            row.tcp_congestion = tcp_cc.clone();
            rows.push(row);
        }
        written(ctx, &rows);
    }
    prog.finish();
    Ok(rows)
}

/// What every condition transfers, written once before the grid starts.
struct Workload {
    /// The JPEG-like set: (path in the share, size).
    set_files: Vec<(String, u64)>,
    /// Size of the one large file, [`BIG_FILE`].
    big_size: u64,
    /// Transfers per group and method.
    repeats: usize,
}

/// The servers one condition is measured against, both behind the emulated link.
struct Servers<'a> {
    smbq: &'a SmbqServer,
    sshd: &'a Sshd,
}

/// Starts the servers on the condition's link, measures, and stops them.
fn condition(
    ctx: &mut Ctx,
    net: &Net,
    prog: &mut Progress,
    c: Condition,
    work: &Workload,
) -> Result<Vec<LossRow>, String> {
    let server = ctx.start_smbq(net, true, &format!("loss-{}-{}", c.delay_ms, c.loss_pct))?;
    let sshd = match ctx.start_sshd(net) {
        Ok(s) => s,
        Err(e) => {
            let _ = server.stop();
            return Err(e);
        }
    };
    let servers = Servers {
        smbq: &server,
        sshd: &sshd,
    };
    let r = measure(ctx, net, prog, c, work, &servers);
    sshd.stop();
    let stopped = server.stop();
    let rows = r?;
    stopped?;
    Ok(rows)
}

/// Times every group and method `repeats` times on one condition's link.
fn measure(
    ctx: &Ctx,
    net: &Net,
    prog: &mut Progress,
    c: Condition,
    work: &Workload,
    servers: &Servers,
) -> Result<Vec<LossRow>, String> {
    let Servers { smbq: server, sshd } = *servers;
    let (set_files, big_size, repeats) = (&work.set_files, work.big_size, work.repeats);
    let (u, p) = (ctx.user.clone(), ctx.password.clone());
    let (qa, pin, cc) = (
        server.quic.ok_or("no QUIC address")?,
        server.pin,
        server.quic_settings.clone(),
    );
    let quic = net.on_client(async move { Endpoint::quic(qa, pin, cc, &u, &p) })??;
    let quic_multi = quic.clone().with_data_streams(MULTI_STREAMS);
    let tcp = Endpoint::tcp(
        crate::target::Target::SmbqTcpEnc,
        server.tcp.ok_or("no TCP address")?,
        &ctx.user,
        &ctx.password,
    );
    let dest = ctx.scratch_path().join("download");
    let limit = time_limit(ctx.scale);
    let mut groups: Vec<(&'static str, Vec<(String, u64)>)> = Vec::new();
    if c.files {
        groups.push(("files", set_files.to_vec()));
    }
    if c.big {
        groups.push(("big", vec![(BIG_FILE.to_string(), big_size)]));
    }
    let mut rows = Vec::new();
    for (group, files) in groups {
        let want: u64 = files.iter().map(|f| f.1).sum();
        let mut times: [Vec<f64>; METHODS.len()] = Default::default();
        let mut timeouts = [0usize; METHODS.len()];
        for r in 0..repeats {
            for (mi, method) in METHODS.into_iter().enumerate() {
                prog.step(&format!(
                    "{group} {method} at {} ms one-way, {} % loss (repeat {})",
                    c.delay_ms,
                    c.loss_pct,
                    r + 1
                ));
                let _ = std::fs::remove_dir_all(&dest);
                std::fs::create_dir_all(&dest).map_err(|e| e.to_string())?;
                let secs = match method {
                    "scp" => {
                        let remote = if group == "files" {
                            vec![format!("{}/*", ctx.data.join(SET_DIR).display())]
                        } else {
                            vec![ctx.data.join(BIG_FILE).display().to_string()]
                        };
                        match sshd.scp_download(net, &remote, &dest, limit)? {
                            Some(t) => {
                                let got = dir_bytes(&dest);
                                if got != want {
                                    return Err(format!("scp copied {got} of {want} bytes"));
                                }
                                Some(t.as_secs_f64())
                            }
                            None => None,
                        }
                    }
                    _ => {
                        let ep = match method {
                            "smbq-quic" => quic.clone(),
                            "smbq-quic-multi" => quic_multi.clone(),
                            _ => tcp.clone(),
                        };
                        let job = smb_download(ep, files.clone(), dest.clone());
                        match net
                            .on_client(async move { tokio::time::timeout(limit, job).await })?
                        {
                            Ok(r) => {
                                let (t, got) = r?;
                                if got != want {
                                    return Err(format!("{method} moved {got} of {want} bytes"));
                                }
                                Some(t)
                            }
                            Err(_) => None,
                        }
                    }
                };
                let secs = secs.unwrap_or_else(|| {
                    eprintln!(
                        "bench: {group} {method} stopped at the {} s limit",
                        limit.as_secs()
                    );
                    if let Some(t) = timeouts.get_mut(mi) {
                        *t += 1;
                    }
                    limit.as_secs_f64()
                });
                times.get_mut(mi).ok_or("index")?.push(secs);
            }
        }
        for (mi, method) in METHODS.into_iter().enumerate() {
            rows.push(LossRow {
                group,
                one_way_delay_ms: c.delay_ms,
                loss_pct: c.loss_pct,
                method,
                timeouts: timeouts.get(mi).copied().unwrap_or(0),
                seconds: Summary::of(times.get(mi).ok_or("index")?),
                bytes: want,
                files: files.len(),
                tcp_congestion: String::new(),
                quic_congestion: server.quic_settings.congestion.name(),
                measured_loss_pct: None,
            });
        }
    }
    let _ = std::fs::remove_dir_all(&dest);
    let _ = net.on_client(async move { drop((quic, quic_multi)) });
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_set_looks_like_the_jpeg_set() {
        let s = set_sizes(1);
        assert_eq!(s.len(), 100);
        let min = *s.iter().min().unwrap();
        let max = *s.iter().max().unwrap();
        let mean = s.iter().sum::<u64>() as f64 / 100.0;
        assert!(min >= 177_000 && max <= 1_720_000, "{min}..{max}");
        assert!((mean - 658_000.0).abs() < 0.05 * 658_000.0, "mean {mean}");
        let quick = set_sizes(20);
        assert!(quick.iter().sum::<u64>() * 19 < s.iter().sum::<u64>());
    }

    #[test]
    fn goal_points_are_only_the_goal_and_its_cubic_twin() {
        for scale in [Scale::Quick, Scale::Full] {
            let v = conditions(scale, LossPoints::Goal, "bbr");
            assert_eq!(v.len(), 2);
            for c in &v {
                assert!(c.files && !c.big && c.delay_ms == 10.0 && c.loss_pct == 2.0);
            }
            assert_eq!(v[1].tcp_cc, Some("cubic"));
            assert_eq!(conditions(scale, LossPoints::Goal, "cubic").len(), 1);
        }
        let all = conditions(Scale::Full, LossPoints::All, "bbr");
        assert_eq!(all.len(), 6 + 5 + 2);
        assert!(all.iter().any(|c| c.big));
    }
}
