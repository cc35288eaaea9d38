//! The link: two namespaces, a TUN device in each, and the pumps between them.

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use tun_rs::{AsyncDevice, DeviceBuilder, SyncDevice};

use crate::namespace::{self, Namespace, PREFIX, in_namespace, ip};
use crate::pump::{self, Direction};
use crate::settings::LinkSettings;
use crate::shaper::Shaper;
use crate::stats::{Counters, LinkStats};

/// Address of side A (its end of the point-to-point link).
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Address of side B.
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

/// Distinguishes the links one process starts; with the pid it names namespaces and devices.
static NEXT_LINK: AtomicU32 = AtomicU32::new(0);

/// Loss-RNG salts, so the two directions draw independently from one seed.
const SALT_A_TO_B: u64 = 0;
const SALT_B_TO_A: u64 = 0x9e37_79b9_7f4a_7c15;

/// A running emulated link between namespace A (address [`ADDR_A`]) and namespace B
/// ([`ADDR_B`]). Dropping it tears everything down; [`Link::stop`] does the same and waits.
#[derive(Debug)]
pub struct Link {
    ns_a_name: String,
    ns_b_name: String,
    // Options and a Vec so that `stop` can take them and leave `Drop` nothing to do.
    ns_a: Option<Namespace>,
    ns_b: Option<Namespace>,
    directions: Vec<Direction>,
    stop: Arc<AtomicBool>,
    /// While set, both directions drop every packet (`set_down`).
    down: Arc<AtomicBool>,
    a_to_b: Arc<Counters>,
    b_to_a: Arc<Counters>,
}

impl Link {
    /// Creates both namespaces and devices and starts forwarding. Needs root (CAP_NET_ADMIN
    /// and CAP_SYS_ADMIN), `/dev/net/tun` and iproute2's `ip`.
    pub async fn start(a_to_b: LinkSettings, b_to_a: LinkSettings) -> io::Result<Link> {
        a_to_b.validate()?;
        b_to_a.validate()?;
        namespace::sweep_stale().await;
        let pid = std::process::id();
        // Interface names hold 15 bytes: "nq" + pid (at most 7 digits) + side + 5 digits.
        let seq = NEXT_LINK.fetch_add(1, Ordering::Relaxed) % 100_000;
        let ns_a = Namespace::create(format!("{PREFIX}{pid}-{seq}-a")).await?;
        let ns_b = Namespace::create(format!("{PREFIX}{pid}-{seq}-b")).await?;
        let tun_a = open_side(&ns_a, &format!("nq{pid}a{seq}"), a_to_b.mtu, ADDR_A, ADDR_B).await?;
        let tun_b = open_side(&ns_b, &format!("nq{pid}b{seq}"), b_to_a.mtu, ADDR_B, ADDR_A).await?;

        // Each device is read by one direction and written by the other: the writer gets a
        // duplicate descriptor (dup(2); tun-rs's own try_clone would add a queue instead, and
        // the kernel would then spread the reads over both) for its delay-line thread.
        let write_a = File::from(tun_a.as_fd().try_clone_to_owned()?);
        let write_b = File::from(tun_b.as_fd().try_clone_to_owned()?);
        let read_a = AsyncDevice::new(tun_a)?;
        let read_b = AsyncDevice::new(tun_b)?;
        let stop = Arc::new(AtomicBool::new(false));
        let down = Arc::new(AtomicBool::new(false));
        let counters_ab = Arc::new(Counters::default());
        let counters_ba = Arc::new(Counters::default());
        let mut link = Link {
            ns_a_name: ns_a.name().to_owned(),
            ns_b_name: ns_b.name().to_owned(),
            ns_a: Some(ns_a),
            ns_b: Some(ns_b),
            directions: Vec::with_capacity(2),
            stop: stop.clone(),
            down: down.clone(),
            a_to_b: counters_ab.clone(),
            b_to_a: counters_ba.clone(),
        };
        let shaper_ab = Shaper::new(&a_to_b, SALT_A_TO_B);
        link.directions.push(pump::start(
            "a-b",
            read_a,
            write_b,
            shaper_ab,
            counters_ab,
            stop.clone(),
            down.clone(),
        )?);
        let shaper_ba = Shaper::new(&b_to_a, SALT_B_TO_A);
        link.directions.push(pump::start(
            "b-a",
            read_b,
            write_a,
            shaper_ba,
            counters_ba,
            stop,
            down,
        )?);
        tracing::info!(ns_a = %link.ns_a_name, ns_b = %link.ns_b_name, ?a_to_b, ?b_to_a, "link up");
        Ok(link)
    }

    /// Namespace of side A.
    pub fn ns_a(&self) -> &str {
        &self.ns_a_name
    }

    /// Namespace of side B.
    pub fn ns_b(&self) -> &str {
        &self.ns_b_name
    }

    /// Side A's address, reachable from B.
    pub fn addr_a(&self) -> Ipv4Addr {
        ADDR_A
    }

    /// Side B's address, reachable from A.
    pub fn addr_b(&self) -> Ipv4Addr {
        ADDR_B
    }

    /// Cuts the link (every packet in both directions is dropped, as when a cable is pulled or
    /// Wi-Fi drops) or restores it.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
    }

    /// Counters of both directions so far.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
            a_to_b: self.a_to_b.snapshot(),
            b_to_a: self.b_to_a.snapshot(),
        }
    }

    /// Stops forwarding, waits for the pumps to finish and deletes both namespaces.
    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let mut threads = Vec::new();
        for dir in self.directions.drain(..) {
            dir.reader.abort();
            // Cancelled is the expected outcome; a panic has already been reported.
            let _ = dir.reader.await;
            threads.push(dir.delay_line);
        }
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        for ns in [self.ns_a.take(), self.ns_b.take()].into_iter().flatten() {
            if let Err(e) = ns.delete().await {
                tracing::warn!(error = %e, "could not delete namespace");
            }
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The delay lines see the flag within their idle poll and exit on their own; the
        // namespaces are deleted by their own Drop right after this.
        self.stop.store(true, Ordering::Relaxed);
        for dir in &self.directions {
            dir.reader.abort();
        }
    }
}

/// Creates a TUN device, moves it into `ns` and configures it there: point-to-point
/// addresses, MTU, up, with the namespace's loopback up too.
async fn open_side(
    ns: &Namespace,
    dev: &str,
    mtu: u16,
    local: Ipv4Addr,
    peer: Ipv4Addr,
) -> io::Result<SyncDevice> {
    // Left down in the root namespace: moving a device between namespaces resets its
    // addresses and state anyway, and an up device would start chattering there.
    let tun = DeviceBuilder::new()
        .name(dev)
        .mtu(mtu)
        .enable(false)
        .build_sync()?;
    let ns_name = ns.name();
    ip(&["link", "set", "dev", dev, "netns", ns_name]).await?;
    // IPv6 would add router solicitations and MLD reports to every measurement, and the
    // benchmark runs over IPv4 only. /proc/sys/net shows the namespace of the thread that
    // opens it, which is why this goes through `in_namespace`.
    let sysctl = format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
    if let Err(e) = in_namespace(ns_name, || std::fs::write(&sysctl, "1")) {
        tracing::debug!(error = %e, "could not disable IPv6 (kernel without IPv6?)");
    }
    let mtu = mtu.to_string();
    let (local, peer) = (local.to_string(), format!("{peer}/32"));
    ip(&["-n", ns_name, "link", "set", "dev", "lo", "up"]).await?;
    ip(&[
        "-n", ns_name, "addr", "add", &local, "peer", &peer, "dev", dev,
    ])
    .await?;
    ip(&["-n", ns_name, "link", "set", "dev", dev, "mtu", &mtu, "up"]).await?;
    Ok(tun)
}
