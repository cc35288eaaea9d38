//! SMB over QUIC, stack-independent part: ALPN, close codes and tuning (MS-SMB2 1.9, 2.1).
//! The QUIC stack itself lives behind `crate::quinn` so another stack can be added beside it.

use std::time::Duration;

/// MS-SMB2 1.9: the ALPN identification sequence for SMB2 over QUIC (0x73 0x6D 0x62).
pub const ALPN: &[u8] = b"smb";

/// Application close code of an orderly end (the SMB connection ended, or the server shuts
/// down). MS-SMB2 defines no QUIC error codes; 0 is what smb-rs and Windows peers use.
pub const CLOSE_NORMAL: u32 = 0;
/// Application close code when a peer opens a stream beyond the single one SMB uses
/// (MS-SMB2 2.1, product note <2>: one bidirectional stream per connection).
pub const CLOSE_EXTRA_STREAM: u32 = 1;
/// Application close code when the peer completed the handshake but never opened its stream.
pub const CLOSE_NO_STREAM: u32 = 2;
/// Application close code when a client that proved its address only by completing the
/// handshake finds its IP address at `max_connections_per_ip` (other clients from it were
/// admitted meanwhile). Before the handshake the refusal is QUIC's CONNECTION_REFUSED.
pub const CLOSE_REFUSED: u32 = 3;

/// The most data streams one connection may be granted (docs/multistream.md 3, rule 4).
pub const MAX_DATA_STREAMS: u16 = 64;

/// The largest MTU-discovery bound: what a 9000-byte jumbo frame carries after the IPv6 and
/// UDP headers. (It was 6500 while quinn sent 10 segments per GSO send whatever their size, and
/// the kernel refuses a batch over 64 KiB, quinn #2201; the quinn carried in third_party/ sizes
/// its batches in bytes.) MsQuic caps its own MTU at 1500 whatever it is given.
pub const MAX_MTU_UPPER_BOUND: u16 = 8952;
/// QUIC's minimum datagram size (RFC 9000 14): no MTU bound below it makes sense.
pub const MIN_MTU: u16 = 1200;

/// The congestion controller of QUIC connections. TCP's is the kernel's choice
/// (`net.ipv4.tcp_congestion_control`); this is ours, since QUIC runs in user space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Congestion {
    /// RFC 9438. Treats every loss as congestion: on a link with random (non-congestion) loss
    /// its window, and so the throughput, follows ~1/sqrt(loss). What MsQuic (Windows) uses.
    Cubic,
    /// smbq's BBR model (after draft-cardwell-iccrg-bbr-congestion-control, `quinn/bbr.rs`):
    /// a window sized from the measured bandwidth and minimum round trip; random loss barely
    /// slows it. The default: at 2% random loss and 20 ms RTT raw QUIC moved ~0.6 MB/s with
    /// Cubic and 85-100 MB/s with quinn's BBR (docs/benchmarks.md), 160-180 MB/s with this
    /// model (a quick run, 2026-11-28). It replaced quinn's BBR, which
    /// began every bulk transfer in a spurious ProbeRTT (250-400 ms at a few MB/s) and now and
    /// then stayed there for seconds. On a path whose minimum RTT is LAN-short (< 2 ms) the
    /// window is never below what Cubic, fed the same events, would allow
    /// (`quinn/congestion.rs`).
    #[default]
    Bbr,
    /// quinn's own BBR, without the LAN floor (for comparison).
    BbrPure,
    /// RFC 9002 7.3.
    NewReno,
}

impl Congestion {
    pub const ALL: [Congestion; 4] = [
        Congestion::Cubic,
        Congestion::Bbr,
        Congestion::BbrPure,
        Congestion::NewReno,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Congestion::Cubic => "cubic",
            Congestion::Bbr => "bbr",
            Congestion::BbrPure => "bbr-pure",
            Congestion::NewReno => "newreno",
        }
    }
}

impl std::str::FromStr for Congestion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Congestion::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown congestion controller {s:?} (cubic, bbr, bbr-pure, newreno)")
            })
    }
}

/// QUIC tuning. Defaults follow quic-stacks.md 7.2 (1500-byte-MTU link, up to 10 Gbit/s).
#[derive(Clone, Debug)]
pub struct QuicSettings {
    /// Per-stream receive window. SMB uses one stream, so this caps throughput (16 MiB).
    pub stream_receive_window: u64,
    /// Connection receive window (32 MiB).
    pub receive_window: u64,
    /// Bytes the server may have in flight unacknowledged (32 MiB).
    pub send_window: u64,
    /// Idle timeout the server advertises; the effective one is the peers' minimum (30 s).
    /// A client that vanishes without a CONNECTION_CLOSE (killed, or its network gone) is
    /// noticed only when this expires, and its opens are held until then (issue 10): with
    /// keep-alive PINGs every 10 s a live peer answers three times within it.
    pub idle_timeout: Duration,
    /// Interval of server PINGs. The Rust smb crate sends none and times out at 30 s, and
    /// Windows relies on TCP keep-alives, so without these an idle mount dies (10 s).
    pub keep_alive: Duration,
    /// MTU discovery upper bound (1452), clamped to [`MIN_MTU`, `MAX_MTU_UPPER_BOUND`]; also
    /// the largest UDP payload this end accepts. 1452 fits any path with a 1500-byte MTU (the
    /// internet, most LANs). On a LAN with jumbo frames raise it on both ends: per-packet
    /// work (crypto, headers, syscalls) dominates QUIC's cost, so on loopback 6500 moved raw
    /// QUIC 3.3x and SMB over QUIC 2-2.7x faster (docs/benchmarks.md); 8952 fills a
    /// 9000-byte jumbo frame.
    pub mtu_upper_bound: u16,
    /// SO_RCVBUF / SO_SNDBUF wanted on the UDP socket; the kernel may cap it (16 MiB).
    pub socket_buffer: usize,
    /// Connections (handshaking or established) allowed from one IP address once the address
    /// is proven: by a Retry token, or by completing the handshake (64). Handshakes from an
    /// unproven address take no slot, so forged Initials cannot lock the address out.
    pub max_connections_per_ip: usize,
    /// With this many handshakes in progress, a client whose address is unproven gets a Retry
    /// first (256; 0 = always validate addresses). It also gets one when its IP address has 8
    /// unproven handshakes in progress or is at `max_connections_per_ip`. Unproven handshakes
    /// are therefore never more than this.
    pub retry_above: usize,
    /// Informational for the engine: allow SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (MS-SMB2
    /// 2.2.3.1.5) on QUIC connections, skipping SMB3 encryption under TLS 1.3 (true).
    pub accept_transport_security: bool,
    /// Congestion controller (bbr).
    pub congestion: Congestion,
    /// Run quinn's drivers (UDP I/O, packet crypto, congestion control of every connection)
    /// on one dedicated thread instead of the shared runtime's workers (false). Measured on
    /// the 2-core bench machine (client and server sharing the cores, `quinn/io_thread.rs`):
    /// raw QUIC +10%, but SMB over QUIC S1 read -10..25%, so off by default; a server with
    /// cores to spare and clients elsewhere may gain from it.
    pub io_thread: bool,
    /// The QUIC implementation: quinn (default) or MsQuic (builds with the `msquic`
    /// feature). Both serve the same ALPN, certificates and tuning (`crate::stack`).
    pub stack: crate::QuicStack,
    /// Data streams a connection may be granted by smbq's multi-stream extension
    /// (docs/multistream.md), 0..=64; 0 turns it off (8).
    pub max_streams: u16,
    /// The stateless reset key (RFC 9000 10.3) of quinn's endpoint, and of MsQuic's library
    /// (one per process). The server keeps one in
    /// its state directory, so that after a restart it can reset the connections the process
    /// before it had: their clients hear it at their next packet and reconnect at once,
    /// rather than after their idle timeout, while their persistent and durable opens wait
    /// for them (issue 37). `None`: a random key (clients, tests).
    pub reset_key: Option<[u8; 32]>,
    /// Connection ids a QUIC-LB load balancer routes to this node (crate::quic_lb; quinn
    /// only). `None`: quinn's own.
    pub quic_lb: Option<crate::quic_lb::QuicLb>,
}

impl Default for QuicSettings {
    fn default() -> Self {
        Self {
            stream_receive_window: 16 << 20,
            receive_window: 32 << 20,
            send_window: 32 << 20,
            idle_timeout: Duration::from_secs(30),
            keep_alive: Duration::from_secs(10),
            mtu_upper_bound: 1452,
            socket_buffer: 16 << 20,
            max_connections_per_ip: 64,
            retry_above: 256,
            accept_transport_security: true,
            congestion: Congestion::Bbr,
            io_thread: false,
            max_streams: 8,
            stack: crate::QuicStack::Quinn,
            reset_key: None,
            quic_lb: None,
        }
    }
}

/// Counters for logs and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuicListenerStats {
    pub handshakes_in_progress: usize,
    /// Retry packets sent for address validation.
    pub retries: u64,
    /// Connection attempts refused by the per-IP limit.
    pub refused: u64,
    /// Handshakes that failed (TLS refusals included) or timed out.
    pub handshake_failures: u64,
    /// Connections closed because the peer opened a second stream.
    pub extra_streams: u64,
}

/// The UDP socket buffers a QUIC endpoint asked for ([`QuicSettings::socket_buffer`]) and
/// what the kernel granted (as `getsockopt` reports them: Linux doubles the value set for its
/// bookkeeping, after capping it at net.core.rmem_max / wmem_max, socket(7)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpBuffers {
    pub want: usize,
    pub rcvbuf: usize,
    pub sndbuf: usize,
}

impl UdpBuffers {
    /// The kernel's limits held a buffer below what was asked for.
    pub fn capped(&self) -> bool {
        self.rcvbuf < self.want || self.sndbuf < self.want
    }

    /// The command (as root) that lifts the cap: limits of `want` let the full value through.
    pub fn sysctl_fix(&self) -> String {
        format!(
            "sysctl -w net.core.rmem_max={w} net.core.wmem_max={w}",
            w = self.want
        )
    }
}

impl QuicSettings {
    /// The MTU-discovery bound actually used.
    pub fn effective_mtu_upper_bound(&self) -> u16 {
        self.mtu_upper_bound.clamp(MIN_MTU, MAX_MTU_UPPER_BOUND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_bound_is_clamped_both_ways() {
        let mut s = QuicSettings {
            mtu_upper_bound: 9000,
            ..QuicSettings::default()
        };
        assert_eq!(s.effective_mtu_upper_bound(), 8952);
        s.mtu_upper_bound = 500;
        assert_eq!(s.effective_mtu_upper_bound(), 1200);
        s.mtu_upper_bound = 1452;
        assert_eq!(s.effective_mtu_upper_bound(), 1452);
    }
}
