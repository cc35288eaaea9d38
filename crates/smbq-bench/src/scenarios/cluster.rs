//! Scenario `cluster` (issue 39): what a cluster node's trips to etcd cost. One smbq server
//! alone, then one smbq cluster node whose open state goes through a three-member etcd on
//! loopback (Debian's etcd-server; the smbq binary built with the `cluster` feature), and one
//! client over encrypted TCP measures on each: a CREATE plus CLOSE, one at a time (two etcd
//! transactions, and one more when the open asks for caching); the same with a persistent
//! handle on a continuously available share (alone, its record is committed to the node's own
//! database; on a cluster node, to etcd: two transactions more); a 4 KiB WRITE on an open
//! handle (no etcd); an exclusive LOCK and its unlock, with the file open only there and
//! then also on a second node (alone: through a second client); and a sequential upload
//! and download (no etcd). The issue expects +1 to
//! 3 ms per CREATE+CLOSE, and READ and WRITE unchanged. Beside them, etcd alone: a
//! compare-and-swap one at a time, what each of those transactions costs at least here.
//!
//! Then the aggregate: [`CLIENTS`] clients at once, each uploading and then downloading a
//! file of its own, spread over one cluster node or over three (client i on node i mod n).
//! On a machine with few cores the three nodes share them with the clients: the ratio says
//! what scale-out costs or gains here, not on three hosts.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smbq_client::transfer::{TransferOptions, download};
use smbq_client::{OpenOptions, Tree};

use crate::net::{LinkDesc, Net};
use crate::progress::Progress;
use crate::scenarios::ca::{
    CaRow, ca_config, durable_create_close, latency_row, timed_upload, timed_writes,
};
use crate::servers::smbq::SmbqServer;
use crate::stats::Summary;
use crate::target::{Endpoint, Target, check_protection};
use crate::{Ctx, Scale};

/// The setups, in table order: smbq alone, and smbq as a node of a cluster.
pub const SETUPS: [&str; 2] = ["alone", "cluster node"];
/// The operations timed one at a time, in table order.
pub const OPS: [&str; 5] = [
    "create_close",
    "create_close_ca",
    "write_4k",
    "lock",
    "lock_open_elsewhere",
];
/// The row of etcd's own compare-and-swap ([`timed_cas`]).
pub const ETCD: &str = "etcd alone";
/// The setups of the aggregate measurement, in table order, with their number of nodes.
pub const SPREAD: [(&str, usize); 2] = [("1 node", 1), ("3 nodes", 3)];
/// Clients at once in the aggregate measurement.
pub const CLIENTS: usize = 6;
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

/// One compare-and-swap on etcd's member at `port`, through its JSON gateway (etcd 3.4's
/// `/v3/kv/txn`): the put happens only if the key's mod revision is still `seen`. The new
/// revision, or `seen` when the comparison failed.
fn cas(port: u16, seen: i64) -> Result<i64, String> {
    // Key "cas" ("Y2Fz") and value "1" ("MQ=="), base64 as the gateway takes bytes.
    let body = format!(
        "{{\"compare\":[{{\"key\":\"Y2Fz\",\"target\":\"MOD\",\"mod_revision\":\"{seen}\"}}],\
         \"success\":[{{\"request_put\":{{\"key\":\"Y2Fz\",\"value\":\"MQ==\"}}}}]}}"
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("etcd: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.set_nodelay(true);
    let req = format!(
        "POST /v3/kv/txn HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("etcd: {e}"))?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .map_err(|e| format!("etcd: {e}"))?;
    let json = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .ok_or("etcd: no body")?;
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("etcd: {e}: {json}"))?;
    if v.get("succeeded").and_then(|b| b.as_bool()) != Some(true) {
        return Ok(seen);
    }
    v.pointer("/header/revision")
        .and_then(|r| r.as_str())
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| format!("etcd: no revision in {json}"))
}

/// `n` compare-and-swaps one after another, each against the revision the last one made
/// (ms each): what one of etcd's transactions costs on this machine, for the CREATE+CLOSE
/// rows. Through the gateway (HTTP to gRPC inside the member, a TCP connection each), so
/// a little above what a node's own gRPC transaction costs.
fn timed_cas(port: u16, n: usize) -> Result<Vec<f64>, String> {
    let mut seen = 0;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let now = cas(port, seen)?;
        out.push(t.elapsed().as_secs_f64() * 1e3);
        if now == seen {
            return Err("etcd: a compare-and-swap nobody raced failed".into());
        }
        seen = now;
    }
    Ok(out)
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
/// `n` exclusive LOCKs (FAIL_IMMEDIATELY) of one range of `f`, each released again: the
/// LOCKs' latencies (ms). On a cluster node a LOCK is recorded in etcd, then granted once
/// every other node with the file open has seen it (docs/cluster.md, "tell, then grant").
async fn timed_locks(f: &smbq_client::File, n: usize) -> Result<Vec<f64>, String> {
    use smbq_client::{LockElement, lock_flags as lf};
    let el = |flags| LockElement {
        offset: 0,
        length: 4096,
        flags,
    };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f.lock(&[el(lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY)])
            .await
            .map_err(|e| format!("lock: {e}"))?;
        out.push(t.elapsed().as_secs_f64() * 1e3);
        f.lock(&[el(lf::UNLOCK)])
            .await
            .map_err(|e| format!("unlock: {e}"))?;
    }
    Ok(out)
}

/// The LOCK rows of one run on file `name` (open on `tree`): with the file open only there,
/// then also open through `other` (a client of another node, or of the same server alone).
async fn lock_rows(
    tree: &Tree,
    other: &Endpoint,
    name: &str,
    n: usize,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let shared = OpenOptions {
        share: 7, // read, write, delete: both opens stand
        ..OpenOptions::create_keep()
    };
    let f = tree
        .open(name, &shared)
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let alone = timed_locks(&f, n).await?;
    let there: Tree = other.open_tree().await?;
    let g = there
        .open(name, &shared)
        .await
        .map_err(|e| format!("open {name} elsewhere: {e}"))?;
    let elsewhere = timed_locks(&f, n).await?;
    g.close().await.map_err(|e| e.to_string())?;
    f.close().await.map_err(|e| e.to_string())?;
    Ok((alone, elsewhere))
}

async fn one_run(
    (ep, other): (Endpoint, Endpoint),
    (creates, writes, size): (usize, usize, u64),
    run: String,
) -> Result<Got, String> {
    let mut ca = ep.clone();
    ca.share = "ca".into();
    let tree: Tree = ca.open_tree().await?;
    check_protection(Target::SmbqTcpEnc, &tree)?;
    if !tree.is_continuously_available() {
        return Err("the share \"ca\" is not continuously available".into());
    }
    let persistent = durable_create_close(&tree, &format!("{DIR}/{run}-p"), creates).await?;
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
    let (lock, lock_elsewhere) =
        lock_rows(&tree, &other, &format!("{DIR}/{run}-l"), creates).await?;
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
    Ok(Got {
        create_close,
        persistent,
        write_4k,
        lock,
        lock_elsewhere,
        up: vec![up],
        down: vec![down],
    })
}

/// What runs measured, pooled: latencies (ms) of CREATE+CLOSE, the same with a persistent
/// handle, the 4 KiB WRITE, LOCK, LOCK with the file open elsewhere; then MB/s (one per run).
#[derive(Default)]
struct Got {
    create_close: Vec<f64>,
    persistent: Vec<f64>,
    write_4k: Vec<f64>,
    lock: Vec<f64>,
    lock_elsewhere: Vec<f64>,
    up: Vec<f64>,
    down: Vec<f64>,
}

/// One run against `server`, with `other` (another node of the cluster, or `server` itself
/// alone) holding the file open for the second LOCK row.
fn measure_on(
    ctx: &Ctx,
    net: &Net,
    (server, other): (&SmbqServer, &SmbqServer),
    run: String,
    acc: &mut Got,
) -> Result<(), String> {
    let ep = |s: &SmbqServer| -> Result<Endpoint, String> {
        Ok(Endpoint::tcp(
            Target::SmbqTcpEnc,
            s.tcp.ok_or("no TCP address")?,
            &ctx.user,
            &ctx.password,
        ))
    };
    let g = net.on_client(one_run((ep(server)?, ep(other)?), counts(ctx.scale), run))??;
    acc.create_close.extend(g.create_close);
    acc.persistent.extend(g.persistent);
    acc.write_4k.extend(g.write_4k);
    acc.lock.extend(g.lock);
    acc.lock_elsewhere.extend(g.lock_elsewhere);
    acc.up.extend(g.up);
    acc.down.extend(g.down);
    Ok(())
}

/// A row of MB/s (one per repeat) of `op` on `setup`.
fn mb_row(setup: &str, op: &str, v: &[f64]) -> CaRow {
    CaRow {
        share: setup.into(),
        op: op.into(),
        ops: v.len(),
        p50_ms: 0.0,
        p90_ms: 0.0,
        p99_ms: 0.0,
        mb_s: Summary::of(v),
    }
}

fn rows_of(setup: &str, g: Got) -> Vec<CaRow> {
    vec![
        latency_row(setup, "create_close", g.create_close),
        latency_row(setup, "create_close_ca", g.persistent),
        latency_row(setup, "write_4k", g.write_4k),
        latency_row(setup, "lock", g.lock),
        latency_row(setup, "lock_open_elsewhere", g.lock_elsewhere),
        mb_row(setup, "upload", &g.up),
        mb_row(setup, "download", &g.down),
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
            let cluster = if i == 0 {
                String::new()
            } else {
                etcd.config(&format!("bench{r}"))
            };
            let extra = format!("{}{cluster}", ca_config(&ctx.data));
            // Each setup starts with the last one's writes on disk: the upload measures the
            // server, not the page cache's writeback of the run before.
            let _ = Command::new("sync").status();
            let server = ctx.start_smbq_configured(net, "cluster", &extra)?;
            // A second node of the cluster, for the LOCK with the file open on another node.
            let second = if i == 0 {
                None
            } else {
                let extra = format!(
                    "{}{}",
                    ca_config(&ctx.data),
                    etcd.config(&format!("bench{r}b"))
                );
                match ctx.start_smbq_configured(net, "cluster-b", &extra) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        let _ = server.stop();
                        return Err(e);
                    }
                }
            };
            // Every run makes its own files: no setup overwrites (or inherits) another's.
            let other = second.as_ref().unwrap_or(&server);
            let m = measure_on(ctx, net, (&server, other), format!("{i}-{r}"), acc);
            let stopped = server.stop();
            if let Some(s) = second {
                s.stop()?;
            }
            m?;
            stopped?;
        }
    }
    let mut rows: Vec<CaRow> = SETUPS
        .iter()
        .zip(got)
        .flat_map(|(s, g)| rows_of(s, g))
        .collect();
    let port = *etcd.clients.first().ok_or("no etcd member")?;
    let _ = Command::new("sync").status();
    rows.push(latency_row(
        ETCD,
        "cas",
        timed_cas(port, counts(ctx.scale).0)?,
    ));
    Ok(rows)
}

/// Bytes each client moves each way in the aggregate measurement.
fn aggregate_size(scale: Scale) -> u64 {
    match scale {
        Scale::Quick => 16 << 20,
        Scale::Full => 256 << 20,
    }
}

/// One aggregate run: every client's tree and file, then all upload at once, then all
/// download at once; the MB/s of each phase over all clients.
async fn aggregate_run(eps: Vec<Endpoint>, size: u64, run: String) -> Result<(f64, f64), String> {
    let mut files = Vec::with_capacity(eps.len());
    for (i, ep) in eps.iter().enumerate() {
        let tree: Tree = ep.open_tree().await?;
        check_protection(Target::SmbqTcpEnc, &tree)?;
        let name = format!("{DIR}/{run}-a{i}");
        let f = tree
            .open(&name, &OpenOptions::create_truncate())
            .await
            .map_err(|e| format!("create {name}: {e}"))?;
        files.push((tree, std::sync::Arc::new(f), name));
    }
    let phase = |download_phase: bool| {
        let mut set = tokio::task::JoinSet::new();
        for (_, f, name) in &files {
            let (f, name) = (f.clone(), name.clone());
            set.spawn(async move {
                if download_phase {
                    download(&f, 0, size, TransferOptions::default(), |_| Ok(()))
                        .await
                        .map_err(|e| format!("download {name}: {e}"))
                } else {
                    timed_upload(&f, &name, size).await.map(|(sent, _)| sent)
                }
            });
        }
        async move {
            let t = Instant::now();
            let mut bytes = 0u64;
            while let Some(r) = set.join_next().await {
                bytes += r.map_err(|e| e.to_string())??;
            }
            Ok::<f64, String>(bytes as f64 / 1e6 / t.elapsed().as_secs_f64())
        }
    };
    let up = phase(false).await?;
    let down = phase(true).await?;
    for (_, f, _) in files {
        if let Ok(f) = std::sync::Arc::try_unwrap(f) {
            f.close().await.map_err(|e| e.to_string())?;
        }
    }
    Ok((up, down))
}

/// [`SPREAD`]'s setups in turns, each repeat on fresh nodes: aggregate upload and download
/// rows.
fn aggregate(
    ctx: &mut Ctx,
    net: &Net,
    etcd: &Etcd,
    prog: &mut Progress,
) -> Result<Vec<CaRow>, String> {
    let mut got: Vec<(Vec<f64>, Vec<f64>)> = SPREAD.iter().map(|_| Default::default()).collect();
    let size = aggregate_size(ctx.scale);
    for r in 0..ctx.repeats() {
        for (i, ((setup, n), acc)) in SPREAD.iter().zip(got.iter_mut()).enumerate() {
            prog.step(&format!("{CLIENTS} clients on {setup} (repeat {})", r + 1));
            let _ = Command::new("sync").status();
            let mut nodes = Vec::new();
            for k in 0..*n {
                let extra = etcd.config(&format!("agg{r}-{i}-{k}"));
                match ctx.start_smbq_configured(net, "cluster-agg", &extra) {
                    Ok(s) => nodes.push(s),
                    Err(e) => {
                        for s in nodes {
                            let _ = s.stop();
                        }
                        return Err(e);
                    }
                }
            }
            let eps: Result<Vec<Endpoint>, String> = (0..CLIENTS)
                .map(|c| {
                    let node = nodes.get(c % n).ok_or("no node")?;
                    let addr = node.tcp.ok_or("no TCP address")?;
                    Ok(Endpoint::tcp(
                        Target::SmbqTcpEnc,
                        addr,
                        &ctx.user,
                        &ctx.password,
                    ))
                })
                .collect();
            let m =
                eps.and_then(|eps| net.on_client(aggregate_run(eps, size, format!("{i}-{r}")))?);
            let mut stopped = Ok(());
            for s in nodes {
                stopped = stopped.and(s.stop());
            }
            let (up, down) = m?;
            stopped?;
            acc.0.push(up);
            acc.1.push(down);
        }
    }
    Ok(SPREAD
        .iter()
        .zip(got)
        .flat_map(|((s, _), (up, down))| {
            [
                mb_row(s, "aggregate_upload", &up),
                mb_row(s, "aggregate_download", &down),
            ]
        })
        .collect())
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<CaRow>, String> {
    std::fs::create_dir_all(ctx.data.join(DIR)).map_err(|e| e.to_string())?;
    // The continuously available share's root is `ca` (scenarios::ca::ca_config).
    std::fs::create_dir_all(ctx.data.join("ca").join(DIR)).map_err(|e| e.to_string())?;
    let steps = (SETUPS.len() + SPREAD.len()) * ctx.repeats();
    let mut prog = Progress::new("cluster", steps);
    let etcd_dir = ctx.scratch.path().join("etcd");
    std::fs::create_dir_all(&etcd_dir).map_err(|e| e.to_string())?;
    let etcd = Etcd::start(&etcd_dir)?;
    let net = ctx.net(Some(LinkDesc::loopback()))?;
    let r = measure(ctx, &net, &etcd, &mut prog).and_then(|mut rows| {
        rows.extend(aggregate(ctx, &net, &etcd, &mut prog)?);
        Ok(rows)
    });
    ctx.stop_net(net);
    drop(etcd);
    prog.finish();
    let _ = std::fs::remove_dir_all(ctx.data.join(DIR));
    let _ = std::fs::remove_dir_all(ctx.data.join("ca"));
    r
}
