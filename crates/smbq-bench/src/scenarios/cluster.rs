//! Scenario `cluster` (issue 39): what a cluster node's trips to etcd cost. One smbq server
//! alone, then one smbq cluster node whose open state goes through a three-member etcd on
//! loopback (Debian's etcd-server; the smbq binary built with the `cluster` feature), and one
//! client over encrypted TCP measures on each: a CREATE plus CLOSE, one at a time (two etcd
//! transactions, and one more when the open asks for caching); a 4 KiB WRITE on an open
//! handle (no etcd); and a sequential upload and download (no etcd). The issue expects +1 to
//! 3 ms per CREATE+CLOSE, and READ and WRITE unchanged.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smbq_client::transfer::{TransferOptions, download};
use smbq_client::{OpenOptions, Tree};

use crate::net::{LinkDesc, Net};
use crate::progress::Progress;
use crate::scenarios::ca::{CaRow, latency_row, timed_upload, timed_writes};
use crate::servers::smbq::SmbqServer;
use crate::stats::Summary;
use crate::target::{Endpoint, Target, check_protection};
use crate::{Ctx, Scale};

/// The setups, in table order: smbq alone, and smbq as a node of a cluster.
pub const SETUPS: [&str; 2] = ["alone", "cluster node"];
/// The operations timed one at a time, in table order.
pub const OPS: [&str; 2] = ["create_close", "write_4k"];
const DIR: &str = "cluster-bench";

fn counts(scale: Scale) -> (usize, usize, u64) {
    match scale {
        Scale::Quick => (50, 200, 32 << 20),
        Scale::Full => (400, 2000, 512 << 20),
    }
}

/// Three etcd members on loopback, each its own process, killed on drop.
struct Etcd {
    members: Vec<Child>,
    clients: Vec<u16>,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            let _ = m.kill();
            let _ = m.wait();
        }
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// Whether the member at `port` answers `/health` with `"health":"true"`.
fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let req = format!("GET /health HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let mut body = String::new();
    s.write_all(req.as_bytes()).is_ok()
        && s.read_to_string(&mut body).is_ok()
        && body.contains("\"health\":\"true\"")
}

impl Etcd {
    fn start(dir: &Path) -> Result<Etcd, String> {
        let names = ["b1", "b2", "b3"];
        let clients: Vec<u16> = names
            .iter()
            .map(|_| free_port())
            .collect::<Result<_, _>>()?;
        let peers: Vec<u16> = names
            .iter()
            .map(|_| free_port())
            .collect::<Result<_, _>>()?;
        let initial: Vec<String> = names
            .iter()
            .zip(&peers)
            .map(|(n, p)| format!("{n}=http://127.0.0.1:{p}"))
            .collect();
        let mut etcd = Etcd {
            members: Vec::new(),
            clients: clients.clone(),
        };
        for ((n, c), p) in names.iter().zip(&clients).zip(&peers) {
            let child = Command::new("etcd")
                .args(["--name", n, "--data-dir"])
                .arg(dir.join(n))
                .args(["--listen-client-urls", &format!("http://127.0.0.1:{c}")])
                .args(["--advertise-client-urls", &format!("http://127.0.0.1:{c}")])
                .args(["--listen-peer-urls", &format!("http://127.0.0.1:{p}")])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{p}"),
                ])
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-token", "smbq-bench"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("etcd (apt-get install etcd-server): {e}"))?;
            etcd.members.push(child);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !etcd.clients.iter().all(|p| healthy(*p)) {
            if Instant::now() > deadline {
                return Err("etcd did not become healthy in 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(etcd)
    }

    /// The `[cluster]` table of a node named `node`.
    fn config(&self, node: &str) -> String {
        let urls: Vec<String> = self
            .clients
            .iter()
            .map(|p| format!("\"http://127.0.0.1:{p}\""))
            .collect();
        format!(
            "\n[cluster]\netcd = [{}]\nnode = \"{node}\"\n",
            urls.join(", ")
        )
    }
}

/// One repeat on one server: the latencies (ms) of each operation, and the upload's and
/// download's MB/s.
async fn one_run(
    ep: Endpoint,
    (creates, writes, size): (usize, usize, u64),
    run: String,
) -> Result<(Vec<f64>, Vec<f64>, f64, f64), String> {
    let tree: Tree = ep.open_tree().await?;
    check_protection(Target::SmbqTcpEnc, &tree)?;
    let mut create_close = Vec::with_capacity(creates);
    for i in 0..creates {
        let name = format!("{DIR}/{run}-c{i}");
        let t = Instant::now();
        let f = tree
            .open(&name, &OpenOptions::create_truncate())
            .await
            .map_err(|e| format!("create {name}: {e}"))?;
        f.close().await.map_err(|e| format!("close {name}: {e}"))?;
        create_close.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let name = format!("{DIR}/{run}-w");
    let f = tree
        .open(&name, &OpenOptions::create_truncate())
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let write_4k = timed_writes(&f, &name, writes).await?;
    f.close().await.map_err(|e| e.to_string())?;
    let name = format!("{DIR}/{run}-u");
    let f = tree
        .open(&name, &OpenOptions::create_truncate())
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let (sent, up) = timed_upload(&f, &name, size).await?;
    let t = Instant::now();
    let got = download(&f, 0, sent, TransferOptions::default(), |_| Ok(()))
        .await
        .map_err(|e| format!("download {name}: {e}"))?;
    let down = got as f64 / 1e6 / t.elapsed().as_secs_f64();
    f.close().await.map_err(|e| e.to_string())?;
    Ok((create_close, write_4k, up, down))
}

type Got = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

fn measure_on(
    ctx: &Ctx,
    net: &Net,
    server: &SmbqServer,
    run: String,
    acc: &mut Got,
) -> Result<(), String> {
    let ep = Endpoint::tcp(
        Target::SmbqTcpEnc,
        server.tcp.ok_or("no TCP address")?,
        &ctx.user,
        &ctx.password,
    );
    let (c, w, up, down) = net.on_client(one_run(ep, counts(ctx.scale), run))??;
    acc.0.extend(c);
    acc.1.extend(w);
    acc.2.push(up);
    acc.3.push(down);
    Ok(())
}

fn rows_of(setup: &str, (c, w, up, down): Got) -> Vec<CaRow> {
    let mb = |op: &str, v: &[f64]| CaRow {
        share: setup.into(),
        op: op.into(),
        ops: v.len(),
        p50_ms: 0.0,
        p90_ms: 0.0,
        p99_ms: 0.0,
        mb_s: Summary::of(v),
    };
    vec![
        latency_row(setup, "create_close", c),
        latency_row(setup, "write_4k", w),
        mb("upload", &up),
        mb("download", &down),
    ]
}

/// Starts and stops a server for each setup and repeat, so each measures a fresh process.
fn measure(
    ctx: &mut Ctx,
    net: &Net,
    etcd: &Etcd,
    prog: &mut Progress,
) -> Result<Vec<CaRow>, String> {
    let mut got: Vec<Got> = SETUPS.iter().map(|_| Default::default()).collect();
    // The repeats take the setups in turns, so the machine's drift falls on both alike.
    for r in 0..ctx.repeats() {
        for (i, (setup, acc)) in SETUPS.iter().zip(got.iter_mut()).enumerate() {
            prog.step(&format!("{setup} (repeat {})", r + 1));
            let extra = if i == 0 {
                String::new()
            } else {
                etcd.config(&format!("bench{r}"))
            };
            // Each setup starts with the last one's writes on disk: the upload measures the
            // server, not the page cache's writeback of the run before.
            let _ = Command::new("sync").status();
            let server = ctx.start_smbq_configured(net, "cluster", &extra)?;
            // Every run makes its own files: no setup overwrites (or inherits) another's.
            let m = measure_on(ctx, net, &server, format!("{i}-{r}"), acc);
            let stopped = server.stop();
            m?;
            stopped?;
        }
    }
    Ok(SETUPS
        .iter()
        .zip(got)
        .flat_map(|(s, g)| rows_of(s, g))
        .collect())
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<CaRow>, String> {
    std::fs::create_dir_all(ctx.data.join(DIR)).map_err(|e| e.to_string())?;
    let mut prog = Progress::new("cluster", SETUPS.len() * ctx.repeats());
    let etcd_dir = ctx.scratch.path().join("etcd");
    std::fs::create_dir_all(&etcd_dir).map_err(|e| e.to_string())?;
    let etcd = Etcd::start(&etcd_dir)?;
    let net = ctx.net(Some(LinkDesc::loopback()))?;
    let r = measure(ctx, &net, &etcd, &mut prog);
    ctx.stop_net(net);
    drop(etcd);
    prog.finish();
    let _ = std::fs::remove_dir_all(ctx.data.join(DIR));
    r
}
