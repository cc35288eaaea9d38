//! The kernel's view of a TCP connection's path, from `getsockopt(IPPROTO_TCP, TCP_INFO)`:
//! how fast the connection delivered data in its latest sample and whether the sender was
//! application-limited then (Linux 4.9+, the rate BBR works from). Compression's pace
//! (smbq_compress::pace) uses it to tell a slow link from a socket buffer that still has
//! room: a write into a buffer with room returns at memory speed however slow the link.
//!
//! The answer is parsed from bytes at the offsets of `struct tcp_info` in the kernel's
//! `include/uapi/linux/tcp.h`, an append-only ABI: a kernel that fills less than a field
//! needs gives `None` for it, never a guess.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::os::fd::{AsFd, AsRawFd};

/// Bytes of `struct tcp_info` read (the kernel fills what it has, up to this).
const ASK: usize = 256;
/// Offset of the byte whose lowest bit is `tcpi_delivery_rate_app_limited` (after the seven
/// `__u8` fields, the `tcpi_snd_wscale`/`tcpi_rcv_wscale` bitfield byte included).
const APP_LIMITED_BYTE: usize = 7;
/// Offset of `tcpi_snd_mss` (bytes).
const SND_MSS: usize = 16;
/// Offset of `tcpi_rtt` (microseconds).
const RTT: usize = 68;
/// Offset of `tcpi_snd_cwnd` (segments).
const SND_CWND: usize = 80;
/// Offset of `tcpi_notsent_bytes`.
const NOTSENT: usize = 144;
/// Offset of `tcpi_delivery_rate` (bytes per second).
const DELIVERY_RATE: usize = 160;

/// One reading of a connection's TCP_INFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpPath {
    /// Bytes per second delivered in the kernel's latest rate sample.
    pub delivery_rate: u64,
    /// The sender had less to send than the path could take when the sample was taken, so
    /// the rate is what the application gave, not what the path can do.
    pub app_limited: bool,
    /// Bytes written to the socket and not sent yet.
    pub notsent: u32,
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Sender's maximum segment size, bytes.
    pub snd_mss: u32,
}

impl TcpPath {
    /// The congestion window in bytes (what the sender may have in flight per round trip):
    /// known from the handshake on, before any rate sample.
    pub fn cwnd_bytes(&self) -> u64 {
        u64::from(self.snd_cwnd) * u64::from(self.snd_mss)
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Parses the bytes the kernel filled (`filled` is what getsockopt returned as the length).
fn parse(filled: &[u8]) -> Option<TcpPath> {
    Some(TcpPath {
        delivery_rate: u64_at(filled, DELIVERY_RATE)?,
        app_limited: filled.get(APP_LIMITED_BYTE)? & 1 == 1,
        notsent: u32_at(filled, NOTSENT)?,
        rtt_us: u32_at(filled, RTT)?,
        snd_cwnd: u32_at(filled, SND_CWND)?,
        snd_mss: u32_at(filled, SND_MSS)?,
    })
}

/// The kernel's view of `socket`'s path; None when it is not a TCP socket or the kernel is
/// older than the delivery rate (4.9).
pub fn sample(socket: impl AsFd) -> Option<TcpPath> {
    let mut buf = [0u8; ASK];
    let mut len = libc::socklen_t::try_from(ASK).ok()?;
    let fd = socket.as_fd().as_raw_fd();
    // SAFETY: `fd` is a descriptor borrowed for this call; `buf` is a live, writable
    // buffer of `len` bytes, and the kernel writes at most `len` bytes into it and stores
    // how many in `len`, a valid `socklen_t`. Bytes are plain data: any value is valid.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    parse(buf.get(..usize::try_from(len).ok()?)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::mem::offset_of;

    /// The offsets are the kernel's, as libc's own mirror of the struct lays them out.
    #[test]
    fn offsets_match_the_kernel_struct() {
        assert_eq!(offset_of!(libc::tcp_info, tcpi_rtt), RTT);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_snd_mss), SND_MSS);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_snd_cwnd), SND_CWND);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_notsent_bytes), NOTSENT);
        assert_eq!(
            offset_of!(libc::tcp_info, tcpi_delivery_rate),
            DELIVERY_RATE
        );
        // The app-limited bit sits in the byte after the seven u8 fields, which libc's
        // glibc mirror leaves as padding before the first u32.
        assert_eq!(
            offset_of!(libc::tcp_info, tcpi_snd_rcv_wscale),
            APP_LIMITED_BYTE - 1
        );
        assert_eq!(offset_of!(libc::tcp_info, tcpi_rto), APP_LIMITED_BYTE + 1);
    }

    #[test]
    fn a_short_answer_gives_nothing() {
        assert_eq!(parse(&[0u8; DELIVERY_RATE + 7]), None);
        let mut b = [0u8; DELIVERY_RATE + 8];
        b[APP_LIMITED_BYTE] = 0b101; // the fast-open bits beside it do not count
        b[DELIVERY_RATE..].copy_from_slice(&12_500_000u64.to_ne_bytes());
        let s = parse(&b).unwrap();
        assert!(s.app_limited);
        assert_eq!(s.delivery_rate, 12_500_000);
    }

    /// A real loopback connection: after data has been sent and acknowledged, the kernel
    /// reports a delivery rate; a UDP socket is not TCP.
    #[test]
    fn a_loopback_connection_reports_its_delivery_rate() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let data = vec![7u8; 4 << 20];
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 4 << 20];
            s.read_exact(&mut got).unwrap();
            s.write_all(b"k").unwrap();
        });
        c.write_all(&data).unwrap();
        let mut k = [0u8; 1];
        c.read_exact(&mut k).unwrap();
        reader.join().unwrap();
        let got = sample(&c).unwrap();
        assert!(got.delivery_rate > 0, "{got:?}");
        assert_eq!(got.notsent, 0);
        assert!(got.snd_cwnd >= 1 && got.snd_mss >= 536, "{got:?}");
        assert!(got.cwnd_bytes() >= 536 && got.rtt_us > 0, "{got:?}");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(sample(&udp), None);
    }
}
