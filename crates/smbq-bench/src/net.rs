//! The network a measurement runs over: plain loopback, or the smbq-netem link between two
//! namespaces (client in A, servers in B).
//!
//! Client and in-process servers each get a tokio runtime of their own, with named threads, so
//! their CPU can be told apart inside this one process (`sys::threads_cpu`). For the emulated
//! link both runtimes are built on a thread that has entered the side's namespace: tokio
//! starts its workers from there, and threads inherit the namespace of the thread that creates
//! them, so every socket the runtime's tasks open belongs to that side.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::Duration;

use smbq_netem::{Link, LinkSettings};
use tokio::runtime::{Builder, Runtime};

/// Thread-name prefixes, for per-side CPU accounting.
pub const CLIENT_THREADS: &str = "bench-client";
pub const SERVER_THREADS: &str = "bench-server";
pub const NETEM_THREADS: &str = "bench-netem";
/// MsQuic's worker threads (they inherit the name of the thread that started them).
pub const MSQUIC_THREADS: &str = "bench-msquic";

/// The link settings one measurement ran under, as recorded in the results.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct LinkDesc {
    /// "loopback" or "emulated".
    pub kind: &'static str,
    pub one_way_delay_ms: f64,
    pub loss_pct: f64,
    pub rate_mbit: Option<f64>,
    pub mtu: Option<u16>,
    /// TCP congestion controller set in both namespaces (None: the kernel default, which
    /// namespaces inherit).
    pub tcp_congestion: Option<String>,
}

impl LinkDesc {
    pub fn loopback() -> Self {
        Self {
            kind: "loopback",
            one_way_delay_ms: 0.0,
            loss_pct: 0.0,
            rate_mbit: None,
            mtu: None,
            tcp_congestion: None,
        }
    }

    pub fn emulated(delay_ms: f64, loss_pct: f64, rate_mbit: Option<f64>) -> Self {
        Self {
            kind: "emulated",
            one_way_delay_ms: delay_ms,
            loss_pct,
            rate_mbit,
            mtu: Some(smbq_netem::DEFAULT_MTU),
            tcp_congestion: None,
        }
    }

    fn settings(&self, seed: u64) -> LinkSettings {
        LinkSettings {
            mtu: self.mtu.unwrap_or(smbq_netem::DEFAULT_MTU),
            delay: Duration::from_secs_f64(self.one_way_delay_ms.max(0.0) / 1000.0),
            loss: (self.loss_pct / 100.0).clamp(0.0, 1.0),
            rate_bps: self.rate_mbit.map(|m| (m * 1e6) as u64),
            queue_bytes: 0,
            seed,
        }
    }
}

fn runtime(name: &str, ns: Option<&str>, workers: usize) -> io::Result<Runtime> {
    let name = name.to_string();
    let build = move || {
        Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name(name)
            // Threads that exit take their CPU counters with them; keep them for the run.
            .thread_keep_alive(Duration::from_secs(24 * 3600))
            .enable_all()
            .build()
    };
    match ns {
        Some(ns) => smbq_netem::in_namespace(ns, build),
        None => build(),
    }
}

/// The runtime that drives the link emulator's packet pumps (kept out of the client's and
/// server's CPU numbers).
pub fn netem_runtime() -> io::Result<Runtime> {
    runtime(NETEM_THREADS, None, 2)
}

const TCP_ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Outside the initial namespace only controllers in the (global)
/// `net.ipv4.tcp_allowed_congestion_control` list may be chosen; `cc` is added to it when
/// missing. Returns the list to put back afterwards.
fn allow_tcp_congestion(cc: &str) -> io::Result<Option<String>> {
    let before = std::fs::read_to_string(TCP_ALLOWED)?;
    let before = before.trim();
    if before.split_whitespace().any(|c| c == cc) {
        return Ok(None);
    }
    std::fs::write(TCP_ALLOWED, format!("{before} {cc}"))?;
    eprintln!("bench: added {cc} to net.ipv4.tcp_allowed_congestion_control for this link");
    Ok(Some(before.to_string()))
}

/// `net.ipv4.tcp_congestion_control` is per network namespace.
fn set_tcp_congestion(ns: &str, cc: &str) -> io::Result<()> {
    let out = smbq_netem::command_in(ns, "sysctl")
        .arg("-qw")
        .arg(format!("net.ipv4.tcp_congestion_control={cc}"))
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "TCP congestion controller {cc:?} in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The TCP congestion controller a measurement over `desc` uses.
pub fn tcp_congestion_of(desc: &LinkDesc) -> String {
    desc.tcp_congestion
        .clone()
        .or_else(crate::sys::tcp_congestion)
        .unwrap_or_else(|| "unknown".into())
}

pub struct Net {
    pub desc: LinkDesc,
    pub client_rt: Runtime,
    pub server_rt: Runtime,
    link: Option<Link>,
    ns_a: Option<String>,
    ns_b: Option<String>,
    /// The allowed TCP congestion controllers before this link added one.
    restore_allowed: Option<String>,
}

impl Net {
    pub fn loopback() -> io::Result<Self> {
        Ok(Self {
            desc: LinkDesc::loopback(),
            client_rt: runtime(CLIENT_THREADS, None, 2)?,
            server_rt: runtime(SERVER_THREADS, None, 2)?,
            link: None,
            ns_a: None,
            ns_b: None,
            restore_allowed: None,
        })
    }

    /// Starts an emulated link with the same settings both ways (needs root).
    pub fn emulated(netem: &Runtime, desc: LinkDesc, seed: u64) -> io::Result<Self> {
        let s = desc.settings(seed);
        let mut back = s.clone();
        back.seed = seed.wrapping_add(1);
        let link = netem.block_on(Link::start(s, back))?;
        let ns_a = link.ns_a().to_string();
        let ns_b = link.ns_b().to_string();
        let mut restore_allowed = None;
        if let Some(cc) = &desc.tcp_congestion {
            restore_allowed = allow_tcp_congestion(cc)?;
            let set = set_tcp_congestion(&ns_a, cc).and_then(|()| set_tcp_congestion(&ns_b, cc));
            if let Err(e) = set {
                if let Some(list) = &restore_allowed {
                    let _ = std::fs::write(TCP_ALLOWED, list);
                }
                return Err(e);
            }
        }
        Ok(Self {
            desc,
            client_rt: runtime(CLIENT_THREADS, Some(&ns_a), 2)?,
            server_rt: runtime(SERVER_THREADS, Some(&ns_b), 2)?,
            link: Some(link),
            ns_a: Some(ns_a),
            ns_b: Some(ns_b),
            restore_allowed,
        })
    }

    /// Where servers listen (side B).
    pub fn server_ip(&self) -> IpAddr {
        if self.link.is_some() {
            IpAddr::V4(smbq_netem::ADDR_B)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        }
    }

    /// What the emulated link has done so far (None on loopback).
    pub fn link_stats(&self) -> Option<smbq_netem::LinkStats> {
        self.link.as_ref().map(Link::stats)
    }

    pub fn is_emulated(&self) -> bool {
        self.link.is_some()
    }

    /// Runs `f` on the client runtime (side A) and waits for it.
    pub fn on_client<F>(&self, f: F) -> Result<F::Output, String>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.client_rt
            .block_on(self.client_rt.spawn(f))
            .map_err(|e| format!("client task failed: {e}"))
    }

    /// Spawns `f` on the in-process server runtime (side B).
    pub fn spawn_server<F>(&self, f: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.server_rt.spawn(f)
    }

    /// A command that runs on side B (`ip netns exec` for the emulated link).
    pub fn command_b(&self, program: &str) -> Command {
        match &self.ns_b {
            Some(ns) => smbq_netem::command_in(ns, program),
            None => Command::new(program),
        }
    }

    /// A command that runs on side A.
    pub fn command_a(&self, program: &str) -> Command {
        match &self.ns_a {
            Some(ns) => smbq_netem::command_in(ns, program),
            None => Command::new(program),
        }
    }

    /// Stops the runtimes and the link.
    pub fn stop(self, netem: &Runtime) {
        self.client_rt.shutdown_timeout(Duration::from_secs(2));
        self.server_rt.shutdown_timeout(Duration::from_secs(2));
        if let Some(link) = self.link {
            netem.block_on(link.stop());
        }
        if let Some(list) = self.restore_allowed
            && let Err(e) = std::fs::write(TCP_ALLOWED, &list)
        {
            eprintln!("bench: could not restore tcp_allowed_congestion_control {list:?}: {e}");
        }
    }
}
