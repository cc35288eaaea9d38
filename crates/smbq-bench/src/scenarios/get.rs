//! Scenario `get` (issue 40): what a user sees of one large download with smbq's own command
//! line client. `smbq cat` of one file (1 GiB; 64 MiB quick) runs as its own process, output
//! discarded, against an smbq server that requires encryption and allows multichannel over
//! QUIC (`[quic] multichannel = true`), over:
//! - encrypted TCP (`--transport tcp --encrypt`: SMB3 AES-GCM), the reference;
//! - QUIC with one connection (TLS 1.3 protects it; SMB messages are signed), on each QUIC
//!   stack this run measures (the server's listener and the client on the same stack);
//! - QUIC with more channels (`--channels N`, quinn): N QUIC connections bound to one session,
//!   each with its own packet work, which a machine with idle cores can run in parallel.
//!
//! The time is the client process's whole life (start, connect, log on, transfer, exit): what
//! `time smbq get` shows. CPU is the client process's and the server's, per GB moved.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use rand::RngCore;
use smbq_transport::QuicStack;

use crate::net::Net;
use crate::progress::Progress;
use crate::servers::smbq::SmbqServer;
use crate::stats::Summary;
use crate::{Ctx, Scale};

/// The file downloaded, in the share's root.
const FILE: &str = "get-bench.bin";
/// Channel counts measured over QUIC beside one.
pub const MORE_CHANNELS: [u16; 2] = [2, 4];

#[derive(Clone, Debug, serde::Serialize)]
pub struct GetRow {
    /// `tcp-enc` or `quic`.
    pub transport: &'static str,
    /// The QUIC stack (client and server); `-` over TCP.
    pub stack: String,
    pub channels: u16,
    pub bytes: u64,
    /// MB/s of the whole command, per repeat.
    pub mb_s: Summary,
    /// CPU seconds per GB moved (median over the repeats).
    pub client_cpu_s_per_gb: f64,
    pub server_cpu_s_per_gb: f64,
}

fn size(scale: Scale) -> u64 {
    match scale {
        Scale::Quick => 64 << 20,
        Scale::Full => 1 << 30,
    }
}

/// One way of downloading: transport, stack, channels.
#[derive(Clone, Copy)]
struct Variant {
    transport: &'static str,
    stack: Option<QuicStack>,
    channels: u16,
}

fn prepare(ctx: &Ctx, size: u64) -> Result<(), String> {
    let path = ctx.data.join(FILE);
    let mut f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut block = vec![0u8; 1 << 20];
    rand::thread_rng().fill_bytes(&mut block);
    let mut left = size;
    while left > 0 {
        let n = usize::try_from(left.min(block.len() as u64)).unwrap_or(block.len());
        f.write_all(block.get(..n).unwrap_or_default())
            .map_err(|e| e.to_string())?;
        left -= n as u64;
    }
    f.sync_all().map_err(|e| e.to_string())
}

/// The `smbq cat` command line for one variant against `server`.
fn command(ctx: &Ctx, net: &Net, server: &SmbqServer, v: Variant) -> Result<Command, String> {
    let mut cmd = net.command_a(&ctx.bin.to_string_lossy());
    let host = net.server_ip();
    cmd.arg("cat")
        .arg(format!("smb://{}@{host}/share/{FILE}", ctx.user))
        .args(["--channels", &v.channels.to_string(), "--quiet"])
        .env("SMBQ_PASSWORD", &ctx.password)
        .env("SMBQ_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    match v.stack {
        None => {
            let tcp = server.tcp.ok_or("no TCP address")?;
            cmd.args(["--transport", "tcp", "--encrypt"])
                .args(["--tcp-port", &tcp.port().to_string()]);
        }
        Some(stack) => {
            let quic = server.quic.ok_or("no QUIC address")?;
            let pin: String = server.pin.iter().map(|b| format!("{b:02x}")).collect();
            cmd.args(["--transport", "quic"])
                .args(["--quic-port", &quic.port().to_string()])
                .args(["--pin", &format!("sha256:{pin}")])
                .args(["--quic-stack", &stack.to_string()])
                .args([
                    "--quic-mtu",
                    &server.quic_settings.mtu_upper_bound.to_string(),
                ]);
        }
    }
    Ok(cmd)
}

/// Runs one download; (seconds, client CPU seconds, server CPU seconds).
fn one_run(mut cmd: Command, server: &SmbqServer) -> Result<(f64, f64, f64), String> {
    let server_cpu = server.cpu();
    let t = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("smbq cat: {e}"))?;
    let (status, client_cpu, stderr) = crate::sys::wait_with_cpu(child)?;
    let secs = t.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("smbq cat: {status}: {}", stderr.trim()));
    }
    Ok((secs, client_cpu, server.cpu() - server_cpu))
}

fn row(v: Variant, bytes: u64, runs: &[(f64, f64, f64)]) -> GetRow {
    let gb = bytes as f64 / 1e9;
    let mb_s: Vec<f64> = runs.iter().map(|r| bytes as f64 / 1e6 / r.0).collect();
    let per_gb = |f: fn(&(f64, f64, f64)) -> f64| {
        Summary::of(&runs.iter().map(|r| f(r) / gb).collect::<Vec<_>>()).median
    };
    GetRow {
        transport: v.transport,
        stack: v.stack.map_or_else(|| "-".to_string(), |s| s.to_string()),
        channels: v.channels,
        bytes,
        mb_s: Summary::of(&mb_s),
        client_cpu_s_per_gb: per_gb(|r| r.1),
        server_cpu_s_per_gb: per_gb(|r| r.2),
    }
}

/// The variants a server on `stack` is measured with: encrypted TCP once (on the quinn
/// server), QUIC with one channel, and (quinn) with more.
fn variants(stack: QuicStack) -> Vec<Variant> {
    let mut v = Vec::new();
    if stack == QuicStack::Quinn {
        v.push(Variant {
            transport: "tcp-enc",
            stack: None,
            channels: 1,
        });
    }
    v.push(Variant {
        transport: "quic",
        stack: Some(stack),
        channels: 1,
    });
    if stack == QuicStack::Quinn {
        for n in MORE_CHANNELS {
            v.push(Variant {
                transport: "quic",
                stack: Some(stack),
                channels: n,
            });
        }
    }
    v
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<GetRow>, String> {
    let bytes = size(ctx.scale);
    prepare(ctx, bytes)?;
    let stacks = ctx.quic_stacks();
    let steps: usize = stacks.iter().map(|s| variants(*s).len()).sum::<usize>() * ctx.repeats();
    let mut prog = Progress::new("get", steps);
    let net = ctx.net(None)?;
    let mut rows = Vec::new();
    let mut result = Ok(());
    for stack in stacks {
        let server = match ctx.start_smbq_with(
            &net,
            true,
            &format!("get-{stack}"),
            stack,
            (false, "multichannel = true\n"),
        ) {
            Ok(s) => s,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        let vs = variants(stack);
        let mut runs: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); vs.len()];
        // The repeats take the variants in turns, so the machine's drift falls on all alike.
        let measured = (|| {
            for r in 0..ctx.repeats() {
                for (v, acc) in vs.iter().zip(runs.iter_mut()) {
                    prog.step(&format!(
                        "{} {} x{} (repeat {})",
                        v.transport,
                        v.stack.map_or_else(String::new, |s| s.to_string()),
                        v.channels,
                        r + 1
                    ));
                    acc.push(one_run(command(ctx, &net, &server, *v)?, &server)?);
                }
            }
            Ok::<(), String>(())
        })();
        let stopped = server.stop();
        if let Err(e) = measured.and(stopped) {
            result = Err(e);
            break;
        }
        rows.extend(vs.iter().zip(&runs).map(|(v, r)| row(*v, bytes, r)));
    }
    ctx.stop_net(net);
    prog.finish();
    let _ = std::fs::remove_file(ctx.data.join(FILE));
    result.map(|()| rows)
}
