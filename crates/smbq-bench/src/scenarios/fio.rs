//! Scenario 2, the thesis's fio jobs. fio has no SMB engine, so our client is driven with the
//! same job shapes: `depth` requests always in flight on one open per file, each worker
//! issuing its next request as soon as the last completes (what fio's async engines do at a
//! fixed iodepth), time based with a ramp whose completions are not counted, no client cache
//! (every request goes to the server, like --direct=1), for read and for write:
//!
//! - S1 sequential: one preallocated file (5 GiB full, 256 MiB quick), 1 MiB blocks, depth 4;
//! - S2 random: one 1 GiB file (64 MiB quick), 4 KiB blocks, depth 16;
//! - S3 many files: 16 files of 100 KiB, random 4 KiB blocks, depth 4, files in turn.
//!
//! Every job runs against smbq over QUIC, smbq over TCP with and without SMB3 encryption, and
//! Samba over TCP with encryption, all through the same client.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use smbq_client::{File, OpenOptions, Tree};

use crate::net::{CLIENT_THREADS, MSQUIC_THREADS, Net};
use crate::progress::Progress;
use crate::stats::{Summary, percentile_sorted};
use crate::sys;
use crate::target::{Endpoint, Target, check_protection};
use crate::{Ctx, Scale};

#[derive(Clone, Debug)]
pub struct Shape {
    pub name: &'static str,
    pub files: Vec<String>,
    pub file_size: u64,
    pub bs: u32,
    pub depth: usize,
    pub random: bool,
}

pub fn shapes(scale: Scale) -> Vec<Shape> {
    let quick = scale == Scale::Quick;
    vec![
        Shape {
            name: "S1",
            files: vec!["fio/s1.dat".into()],
            file_size: if quick { 256 << 20 } else { 5 << 30 },
            bs: 1 << 20,
            depth: 4,
            random: false,
        },
        Shape {
            name: "S2",
            files: vec!["fio/s2.dat".into()],
            file_size: if quick { 64 << 20 } else { 1 << 30 },
            bs: 4096,
            depth: 16,
            random: true,
        },
        Shape {
            name: "S3",
            files: (0..16).map(|i| format!("fio/s3/f{i:02}.dat")).collect(),
            file_size: 100 << 10,
            bs: 4096,
            depth: 4,
            random: true,
        },
    ]
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct FioRow {
    pub job: &'static str,
    /// "read" or "write".
    pub rw: &'static str,
    pub target: Target,
    pub block_size: u32,
    pub iodepth: usize,
    pub file_size: u64,
    pub files: usize,
    pub mb_s: Summary,
    pub iops: Summary,
    pub lat_p50_us: Summary,
    pub lat_p99_us: Summary,
    pub client_cpu_pct: Summary,
    pub server_cpu_pct: Summary,
    pub smb_encrypted: bool,
    pub smb_signed: bool,
}

/// Writes the job's files straight into the share (fio's --fallocate=native plus a layout
/// pass): non-zero, incompressible data, so reads return real blocks.
pub fn prepare(data: &Path, shape: &Shape, owner: Option<(u32, u32)>) -> Result<(), String> {
    let mut block = vec![0u8; 8 << 20];
    rand::thread_rng().fill(block.as_mut_slice());
    for f in &shape.files {
        let path = data.join(f);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            chown(dir, owner)?;
        }
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == shape.file_size) {
            continue;
        }
        let mut file =
            std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut left = shape.file_size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            file.write_all(block.get(..n).unwrap_or_default())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            left -= n as u64;
        }
        chown(&path, owner)?;
    }
    Ok(())
}

pub fn chown(path: &Path, owner: Option<(u32, u32)>) -> Result<(), String> {
    if let Some((u, g)) = owner {
        std::os::unix::fs::chown(path, Some(u), Some(g))
            .map_err(|e| format!("chown {}: {e}", path.display()))?;
    }
    Ok(())
}

/// One run of one job: completions inside the measured window, their latencies, and the CPU
/// both sides spent in it.
struct Sample {
    ios: u64,
    lat_us: Vec<u32>,
    secs: f64,
    client_cpu: f64,
    server_cpu: f64,
}

type CpuProbe = Arc<dyn Fn() -> f64 + Send + Sync>;

async fn run_job(
    tree: Tree,
    shape: Shape,
    write: bool,
    ramp: Duration,
    runtime: Duration,
    server_cpu: CpuProbe,
) -> Result<Sample, String> {
    let opts = if write {
        OpenOptions::create_keep()
    } else {
        OpenOptions::read()
    };
    let mut files: Vec<File> = Vec::new();
    for f in &shape.files {
        files.push(
            tree.open(f, &opts)
                .await
                .map_err(|e| format!("open {f}: {e}"))?,
        );
    }
    let files = Arc::new(files);
    let mut payload = vec![0u8; shape.bs as usize];
    rand::thread_rng().fill(payload.as_mut_slice());
    let payload = Bytes::from(payload);
    let start = Instant::now();
    let measure = start + ramp;
    let end = measure + runtime;
    let counter = Arc::new(AtomicU64::new(0));
    let blocks = (shape.file_size / u64::from(shape.bs)).max(1);
    let mut set = tokio::task::JoinSet::new();
    for w in 0..shape.depth {
        let files = files.clone();
        let counter = counter.clone();
        let payload = payload.clone();
        let shape = shape.clone();
        set.spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed + w as u64);
            let mut lat = Vec::new();
            let mut ios = 0u64;
            while Instant::now() < end {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let nfiles = files.len() as u64;
                let file = files.get((n % nfiles) as usize).ok_or("no file")?;
                let block = if shape.random {
                    rng.gen_range(0..blocks)
                } else {
                    (n / nfiles) % blocks
                };
                let off = block * u64::from(shape.bs);
                let t0 = Instant::now();
                if write {
                    let done = file
                        .write_at(off, payload.clone())
                        .await
                        .map_err(|e| format!("write: {e}"))?;
                    if done != shape.bs {
                        return Err(format!("short write: {done}"));
                    }
                } else {
                    let got = file
                        .read_at(off, shape.bs)
                        .await
                        .map_err(|e| format!("read: {e}"))?;
                    if got.len() != shape.bs as usize {
                        return Err(format!("short read: {} at {off}", got.len()));
                    }
                }
                let t1 = Instant::now();
                if t1 >= measure && t1 < end {
                    ios += 1;
                    lat.push(u32::try_from((t1 - t0).as_micros()).unwrap_or(u32::MAX));
                }
            }
            Ok::<_, String>((ios, lat))
        });
    }
    tokio::time::sleep_until(measure.into()).await;
    // MsQuic's workers (started under their own name) do the client's QUIC work when the
    // target is MsQuic; otherwise they are idle.
    let c0 = sys::threads_cpu(CLIENT_THREADS) + sys::threads_cpu(MSQUIC_THREADS);
    let s0 = server_cpu();
    tokio::time::sleep_until(end.into()).await;
    let c1 = sys::threads_cpu(CLIENT_THREADS) + sys::threads_cpu(MSQUIC_THREADS);
    let s1 = server_cpu();
    let mut ios = 0;
    let mut lat_us = Vec::new();
    while let Some(r) = set.join_next().await {
        let (n, l) = r.map_err(|e| format!("worker: {e}"))??;
        ios += n;
        lat_us.extend(l);
    }
    for f in files.iter() {
        let _ = f.clone().close().await;
    }
    lat_us.sort_unstable();
    Ok(Sample {
        ios,
        lat_us,
        secs: runtime.as_secs_f64(),
        client_cpu: c1 - c0,
        server_cpu: s1 - s0,
    })
}

struct Running {
    target: Target,
    endpoint: Endpoint,
    tree: Option<Tree>,
    cpu: CpuProbe,
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<FioRow>, String> {
    let net = ctx.net(None)?;
    let result = run_on(ctx, &net);
    ctx.stop_net(net);
    result
}

fn run_on(ctx: &mut Ctx, net: &Net) -> Result<Vec<FioRow>, String> {
    let shapes = shapes(ctx.scale);
    let owner = ctx.samba_owner;
    for s in &shapes {
        eprintln!(
            "bench: [fio] preparing {} ({} file(s) of {} bytes)",
            s.name,
            s.files.len(),
            s.file_size
        );
        prepare(&ctx.data, s, owner)?;
    }
    let (ramp, runtime) = ctx.fio_times();
    let enc = ctx.start_smbq(net, true, "fio-enc")?;
    let plain = match ctx.start_smbq(net, false, "fio-plain") {
        Ok(p) => p,
        Err(e) => {
            let _ = enc.stop();
            return Err(e);
        }
    };
    // The same `--encrypt required` server once more, its QUIC on MsQuic.
    let msquic = if ctx.msquic() {
        match ctx.start_smbq_on(net, true, "fio-msquic", smbq_transport::QuicStack::MsQuic) {
            Ok(s) => Some(s),
            Err(e) => {
                let _ = enc.stop();
                let _ = plain.stop();
                return Err(e);
            }
        }
    } else {
        None
    };
    let samba = if ctx.samba_owner.is_some() {
        match ctx.start_samba(net) {
            Ok(s) => Some(s),
            Err(e) => {
                ctx.note_error(format!("fio: Samba target skipped: {e}"));
                None
            }
        }
    } else {
        ctx.note_error("fio: Samba target skipped: needs root (Unix account, smbd)".into());
        None
    };
    let servers = Servers {
        enc: &enc,
        plain: &plain,
        msquic: msquic.as_ref(),
        samba: samba.as_ref(),
    };
    let result = measure(ctx, net, &shapes, JobTimes { ramp, runtime }, &servers);
    let stop_enc = enc.stop();
    let stop_plain = plain.stop();
    let stop_msquic = msquic.map(|m| m.stop()).unwrap_or(Ok(()));
    if let Some(s) = samba {
        s.stop();
    }
    let rows = result?;
    stop_enc?;
    stop_plain?;
    stop_msquic?;
    Ok(rows)
}

/// The servers every job runs against.
struct Servers<'a> {
    /// `--encrypt required`: serves the QUIC and the encrypted TCP targets.
    enc: &'a crate::servers::smbq::SmbqServer,
    /// `--encrypt off`: the plain TCP target.
    plain: &'a crate::servers::smbq::SmbqServer,
    /// `--encrypt required` with `[quic] stack = "msquic"`: the MsQuic target, when measured.
    msquic: Option<&'a crate::servers::smbq::SmbqServer>,
    /// None when Samba could not run (not root, no smbd).
    samba: Option<&'a crate::servers::samba::Samba>,
}

/// How long each job runs: `ramp` first, whose completions are not counted, then `runtime`
/// measured.
#[derive(Clone, Copy)]
struct JobTimes {
    ramp: Duration,
    runtime: Duration,
}

/// Connects to every target and opens its tree, checking each protects data as its name says.
fn connect_targets(ctx: &Ctx, net: &Net, servers: &Servers) -> Result<Vec<Running>, String> {
    let Servers {
        enc,
        plain,
        msquic,
        samba,
    } = *servers;
    let (user, pw) = (ctx.user.clone(), ctx.password.clone());
    let mut targets = Vec::new();
    let enc_pid = enc.pid();
    let plain_pid = plain.pid();
    let quic_addr = enc.quic.ok_or("smbq printed no QUIC address")?;
    let (pin, cc) = (enc.pin, enc.quic_settings.clone());
    let (u, p) = (user.clone(), pw.clone());
    let quic = net.on_client(async move { Endpoint::quic(quic_addr, pin, cc, &u, &p) })??;
    targets.push(Running {
        target: Target::SmbqQuic,
        endpoint: quic,
        tree: None,
        cpu: Arc::new(move || sys::tree_cpu(enc_pid)),
    });
    if let Some(m) = msquic {
        let pid = m.pid();
        let addr = m.quic.ok_or("smbq (MsQuic) printed no QUIC address")?;
        let (pin, settings) = (m.pin, m.quic_settings.clone());
        let (u, p) = (user.clone(), pw.clone());
        let endpoint =
            net.on_client(async move { Endpoint::quic(addr, pin, settings, &u, &p) })??;
        targets.push(Running {
            target: Target::SmbqMsQuic,
            endpoint,
            tree: None,
            cpu: Arc::new(move || sys::tree_cpu(pid)),
        });
    }
    targets.push(Running {
        target: Target::SmbqTcpEnc,
        endpoint: Endpoint::tcp(
            Target::SmbqTcpEnc,
            enc.tcp.ok_or("no TCP address")?,
            &user,
            &pw,
        ),
        tree: None,
        cpu: Arc::new(move || sys::tree_cpu(enc_pid)),
    });
    // Issue 16: the same encrypted server, the session bound to two TCP connections.
    targets.push(Running {
        target: Target::SmbqTcpEnc2Ch,
        endpoint: Endpoint::tcp(
            Target::SmbqTcpEnc2Ch,
            enc.tcp.ok_or("no TCP address")?,
            &user,
            &pw,
        )
        .with_channels(2),
        tree: None,
        cpu: Arc::new(move || sys::tree_cpu(enc_pid)),
    });
    targets.push(Running {
        target: Target::SmbqTcpPlain,
        endpoint: Endpoint::tcp(
            Target::SmbqTcpPlain,
            plain.tcp.ok_or("no TCP address")?,
            &user,
            &pw,
        ),
        tree: None,
        cpu: Arc::new(move || sys::tree_cpu(plain_pid)),
    });
    if let Some(s) = samba {
        let pid = s.pid();
        targets.push(Running {
            target: Target::SambaTcpEnc,
            endpoint: Endpoint::tcp(Target::SambaTcpEnc, s.addr, &s.user, &s.password),
            tree: None,
            cpu: Arc::new(move || sys::tree_cpu(pid)),
        });
    }
    for t in &mut targets {
        let ep = t.endpoint.clone();
        let tree = net.on_client(async move { ep.open_tree().await })??;
        check_protection(t.target, &tree)?;
        t.tree = Some(tree);
    }
    Ok(targets)
}

fn measure(
    ctx: &Ctx,
    net: &Net,
    shapes: &[Shape],
    times: JobTimes,
    servers: &Servers,
) -> Result<Vec<FioRow>, String> {
    let JobTimes { ramp, runtime } = times;
    let targets = connect_targets(ctx, net, servers)?;
    let repeats = ctx.repeats();
    let args = &ctx.args;
    let runs = |shape: &Shape, t: &Running, rw: &str| {
        (shape.name == "S1" || !t.target.s1_only())
            && args.fio_job_selected(shape.name, rw)
            && args.fio_target_selected(t.target.name())
    };
    let total = repeats
        * shapes
            .iter()
            .map(|s| {
                targets
                    .iter()
                    .map(|t| usize::from(runs(s, t, "read")) + usize::from(runs(s, t, "write")))
                    .sum::<usize>()
            })
            .sum::<usize>();
    let mut prog = Progress::new("fio", total);
    // (shape, rw, target) -> samples
    let mut samples: Vec<Vec<Sample>> = (0..shapes.len() * 2 * targets.len())
        .map(|_| Vec::new())
        .collect();
    for r in 0..repeats {
        for (si, shape) in shapes.iter().enumerate() {
            for (wi, write) in [false, true].into_iter().enumerate() {
                // Targets interleave within a repeat, so slow drift of the machine spreads
                // over all of them instead of biasing one.
                for (ti, t) in targets.iter().enumerate() {
                    let rw = if write { "write" } else { "read" };
                    if !runs(shape, t, rw) {
                        continue;
                    }
                    prog.step(&format!(
                        "{} {rw} {} (repeat {})",
                        shape.name,
                        t.target.name(),
                        r + 1
                    ));
                    let tree = t.tree.clone().ok_or("no tree")?;
                    let s = net.on_client(run_job(
                        tree,
                        shape.clone(),
                        write,
                        ramp,
                        runtime,
                        t.cpu.clone(),
                    ))??;
                    if s.ios == 0 {
                        return Err(format!(
                            "{} {rw} {}: no I/O completed",
                            shape.name,
                            t.target.name()
                        ));
                    }
                    let idx = (si * 2 + wi) * targets.len() + ti;
                    samples.get_mut(idx).ok_or("index")?.push(s);
                }
            }
        }
    }
    prog.finish();
    let mut rows = Vec::new();
    for (si, shape) in shapes.iter().enumerate() {
        for (wi, rw) in ["read", "write"].into_iter().enumerate() {
            for (ti, t) in targets.iter().enumerate() {
                if !runs(shape, t, rw) {
                    continue;
                }
                let idx = (si * 2 + wi) * targets.len() + ti;
                let ss = samples.get(idx).ok_or("index")?;
                let tree = t.tree.as_ref().ok_or("no tree")?;
                let per =
                    |f: &dyn Fn(&Sample) -> f64| Summary::of(&ss.iter().map(f).collect::<Vec<_>>());
                let bs = f64::from(shape.bs);
                rows.push(FioRow {
                    job: shape.name,
                    rw,
                    target: t.target,
                    block_size: shape.bs,
                    iodepth: shape.depth,
                    file_size: shape.file_size,
                    files: shape.files.len(),
                    mb_s: per(&|s| s.ios as f64 * bs / 1e6 / s.secs),
                    iops: per(&|s| s.ios as f64 / s.secs),
                    lat_p50_us: per(&|s| percentile_sorted(&s.lat_us, 50.0)),
                    lat_p99_us: per(&|s| percentile_sorted(&s.lat_us, 99.0)),
                    client_cpu_pct: per(&|s| 100.0 * s.client_cpu / s.secs),
                    server_cpu_pct: per(&|s| 100.0 * s.server_cpu / s.secs),
                    smb_encrypted: tree.encrypts(),
                    smb_signed: tree.session().signs(),
                });
            }
        }
    }
    // Dropping the trees on the client runtime closes the connections there.
    let trees: Vec<Tree> = targets.into_iter().filter_map(|t| t.tree).collect();
    let _ = net.on_client(async move { drop(trees) });
    Ok(rows)
}
