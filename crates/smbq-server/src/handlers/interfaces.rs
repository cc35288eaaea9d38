//! FSCTL_QUERY_NETWORK_INTERFACE_INFO (MS-SMB2 3.3.5.15.11): the addresses a multichannel
//! client may open more channels to, one NETWORK_INTERFACE_INFO (2.2.32.5) per address of
//! every interface that is up, read from the kernel at each request (addresses come and go).
//!
//! Loopback addresses are listed only to a client that came over loopback (no one else could
//! reach them); a server listening on one address lists only that one. Link speeds come from
//! /sys/class/net/IF/speed; an interface that reports none (loopback, many virtual ones) is
//! given 1 Gbit/s. RSS capability is what the administrator configured (`rss_capable`): Linux
//! spreads a NIC's queues itself, but whether that is worth several channels per interface is
//! the administrator's call, as Windows' client opens up to four per RSS interface.

use std::net::{IpAddr, SocketAddr};

use nix::ifaddrs::getifaddrs;
use nix::net::if_::{InterfaceFlags, if_nametoindex};
use smbq_wire::NtStatus;

use crate::config::InterfacePolicy;

/// MS-SMB2 2.2.32.5: Next, IfIndex, Capability, Reserved, LinkSpeed, SockAddr_Storage (128).
const ENTRY_LEN: usize = 24 + 128;
/// Entries at most in one answer: more addresses than this are not listed.
const MAX_ENTRIES: usize = 64;
const RSS_CAPABLE: u32 = 0x1;
const AF_INET: u16 = 0x0002;
const AF_INET6: u16 = 0x0017;
/// What an interface without a reported speed is assumed to carry (bits per second).
const DEFAULT_SPEED: u64 = 1_000_000_000;

/// One address of an interface that is up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub index: u32,
    pub address: IpAddr,
    /// Bits per second.
    pub speed: u64,
    pub loopback: bool,
}

/// The kernel's interfaces that are up, with an address, in the kernel's order.
pub fn list() -> Vec<Interface> {
    let Ok(addrs) = getifaddrs() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for a in addrs {
        if !a.flags.contains(InterfaceFlags::IFF_UP) {
            continue;
        }
        let Some(sa) = a.address else { continue };
        let address = if let Some(v4) = sa.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = sa.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        // MS-SMB2 2.2.32.5: IfIndex MUST NOT be 0.
        let Ok(index) = if_nametoindex(a.interface_name.as_str()) else {
            continue;
        };
        if index == 0 {
            continue;
        }
        out.push(Interface {
            index,
            address,
            speed: link_speed(&a.interface_name),
            loopback: a.flags.contains(InterfaceFlags::IFF_LOOPBACK),
        });
    }
    out
}

/// /sys/class/net/IF/speed is in Mbit/s, and -1 or absent when unknown.
fn link_speed(name: &str) -> u64 {
    if name.contains('/') || name.contains("..") {
        return DEFAULT_SPEED;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&mbit| mbit > 0)
        .map_or(DEFAULT_SPEED, |mbit| {
            (mbit as u64).saturating_mul(1_000_000)
        })
}

/// The addresses `peer` is told about: what it could reach, and only the listening address
/// when the server listens on one.
pub fn advertised(all: &[Interface], policy: &InterfacePolicy, peer: &str) -> Vec<Interface> {
    let peer_loopback = peer
        .parse::<SocketAddr>()
        .is_ok_and(|p| p.ip().is_loopback() || p.ip().to_canonical().is_loopback());
    all.iter()
        .filter(|i| policy.listen.is_none_or(|l| l == i.address))
        .filter(|i| peer_loopback || !i.loopback)
        .take(MAX_ENTRIES)
        .cloned()
        .collect()
}

/// The FSCTL output for `list`; STATUS_BUFFER_TOO_SMALL when it does not fit `max_out`
/// (MS-SMB2 3.3.5.15.11).
pub fn encode(list: &[Interface], rss_capable: bool, max_out: usize) -> Result<Vec<u8>, NtStatus> {
    let len = list.len().saturating_mul(ENTRY_LEN);
    if len > max_out {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let mut out = Vec::with_capacity(len);
    for (n, i) in list.iter().enumerate() {
        let next = if n + 1 == list.len() { 0 } else { ENTRY_LEN };
        out.extend_from_slice(&(next as u32).to_le_bytes());
        out.extend_from_slice(&i.index.to_le_bytes());
        let cap = if rss_capable { RSS_CAPABLE } else { 0 };
        out.extend_from_slice(&cap.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&i.speed.to_le_bytes());
        let mut sa = [0u8; 128];
        match i.address {
            IpAddr::V4(a) => {
                sa[..2].copy_from_slice(&AF_INET.to_le_bytes());
                // Port (2) stays 0; then the address in network order.
                sa[4..8].copy_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                sa[..2].copy_from_slice(&AF_INET6.to_le_bytes());
                // Port (2) and FlowInfo (4) stay 0; then the address, then ScopeId (0).
                sa[8..24].copy_from_slice(&a.octets());
            }
        }
        out.extend_from_slice(&sa);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn iface(index: u32, address: &str, loopback: bool) -> Interface {
        Interface {
            index,
            address: address.parse().unwrap(),
            speed: 10_000_000_000,
            loopback,
        }
    }

    #[test]
    fn entries_are_laid_out_as_ms_smb2_2_2_32_5() {
        let l = [iface(2, "192.0.2.7", false), iface(3, "2001:db8::1", false)];
        let out = encode(&l, true, 4096).unwrap();
        assert_eq!(out.len(), 2 * 152);
        assert_eq!(u32::from_le_bytes(out[0..4].try_into().unwrap()), 152);
        assert_eq!(u32::from_le_bytes(out[4..8].try_into().unwrap()), 2);
        assert_eq!(
            u32::from_le_bytes(out[8..12].try_into().unwrap()),
            RSS_CAPABLE
        );
        assert_eq!(
            u64::from_le_bytes(out[16..24].try_into().unwrap()),
            10_000_000_000
        );
        assert_eq!(&out[24..26], &[2, 0]);
        assert_eq!(&out[28..32], &[192, 0, 2, 7]);
        let second = &out[152..];
        assert_eq!(u32::from_le_bytes(second[0..4].try_into().unwrap()), 0);
        assert_eq!(&second[24..26], &[0x17, 0]);
        assert_eq!(
            &second[32..48],
            &"2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
        assert_eq!(encode(&l, false, 303), Err(NtStatus::BUFFER_TOO_SMALL));
    }

    #[test]
    fn loopback_only_for_loopback_peers_and_only_the_listening_address() {
        let all = [
            iface(1, "127.0.0.1", true),
            iface(2, "192.0.2.7", false),
            iface(2, "192.0.2.8", false),
        ];
        let open = InterfacePolicy::default();
        assert_eq!(advertised(&all, &open, "127.0.0.1:5000").len(), 3);
        let remote = advertised(&all, &open, "198.51.100.1:5000");
        assert_eq!(remote.len(), 2);
        assert!(remote.iter().all(|i| !i.loopback));
        let one = InterfacePolicy {
            listen: Some("192.0.2.8".parse().unwrap()),
            rss_capable: false,
        };
        assert_eq!(
            advertised(&all, &one, "198.51.100.1:5000"),
            vec![all[2].clone()]
        );
    }

    #[test]
    fn the_machine_has_at_least_loopback() {
        // Every Linux machine this runs on has lo up with 127.0.0.1.
        let l = list();
        assert!(
            l.iter()
                .any(|i| i.loopback && i.address == IpAddr::from([127, 0, 0, 1]))
        );
    }
}
