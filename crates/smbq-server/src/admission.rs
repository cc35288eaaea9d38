//! The connection table: a global limit, a limit per client address, and a reserve of slots
//! that an address already holding several connections cannot take, so one host cannot lock
//! every other client out (issue 10, item 3). TCP and QUIC connections share it; QUIC also has
//! its own per-address limit on handshakes in the transport.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::warn;

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every slot is taken.
    Full,
    /// This address holds its share already.
    PerAddress,
    /// Only the reserve is left, and this address holds enough.
    Reserve,
}

#[derive(Clone, Copy, Debug)]
pub struct AdmissionLimits {
    pub total: usize,
    pub per_address: usize,
    pub reserved: usize,
    pub per_address_in_reserve: usize,
}

struct Table {
    /// Here rather than beside the table so a reload changes them under the same lock.
    limits: AdmissionLimits,
    total: usize,
    by_address: HashMap<IpAddr, usize>,
    refused_since_log: u64,
    last_log: Option<Instant>,
}

pub struct Admission {
    table: Mutex<Table>,
}

/// Holds a slot; dropping it frees the slot.
pub struct Slot {
    admission: Arc<Admission>,
    key: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.admission.table.lock();
        t.total = t.total.saturating_sub(1);
        if let Some(n) = t.by_address.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.by_address.remove(&self.key);
            }
        }
    }
}

/// The unit one client controls: an IPv4 address, or an IPv6 /64 (a host gets a whole /64
/// from its router, so counting single IPv6 addresses would be no limit at all).
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((v6.to_bits() & !u128::from(u64::MAX)).into()),
        v4 => v4,
    }
}

impl Admission {
    pub fn new(limits: AdmissionLimits) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(Table {
                limits,
                total: 0,
                by_address: HashMap::new(),
                refused_since_log: 0,
                last_log: None,
            }),
        })
    }

    /// Takes a slot for a connection from `ip`, or says why not. Refusals are logged at most
    /// every 10 s with a count, so a flood cannot flood the log.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refusal> {
        let key = address_key(ip);
        let mut t = self.table.lock();
        let held = t.by_address.get(&key).copied().unwrap_or(0);
        let l = t.limits;
        let refusal = if t.total >= l.total {
            Some(Refusal::Full)
        } else if held >= l.per_address {
            Some(Refusal::PerAddress)
        } else if t.total >= l.total.saturating_sub(l.reserved) && held >= l.per_address_in_reserve
        {
            Some(Refusal::Reserve)
        } else {
            None
        };
        if let Some(r) = refusal {
            t.refused_since_log += 1;
            let due = t
                .last_log
                .is_none_or(|at| at.elapsed() >= Duration::from_secs(10));
            if due {
                warn!(
                    peer = %ip,
                    reason = ?r,
                    held,
                    total = t.total,
                    refused = t.refused_since_log,
                    "connection refused (count since the last such line)"
                );
                t.refused_since_log = 0;
                t.last_log = Some(Instant::now());
            }
            return Err(r);
        }
        t.total += 1;
        *t.by_address.entry(key).or_insert(0) += 1;
        Ok(Slot {
            admission: self.clone(),
            key,
        })
    }

    /// New limits (a reload): they decide later admissions; connections already admitted
    /// stay, even above a lowered limit.
    pub fn set_limits(&self, limits: AdmissionLimits) {
        self.table.lock().limits = limits;
    }

    /// Connections held now (all addresses).
    pub fn total(&self) -> usize {
        self.table.lock().total
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn table(total: usize, per: usize, reserved: usize) -> Arc<Admission> {
        Admission::new(AdmissionLimits {
            total,
            per_address: per,
            reserved,
            per_address_in_reserve: 2,
        })
    }

    #[test]
    fn one_address_is_capped_and_others_still_get_in() {
        let a = table(100, 5, 10);
        let held: Vec<_> = (0..5).map(|_| a.admit(ip("10.0.0.1")).unwrap()).collect();
        assert_eq!(a.admit(ip("10.0.0.1")).err(), Some(Refusal::PerAddress));
        assert!(a.admit(ip("10.0.0.2")).is_ok());
        drop(held);
        assert_eq!(a.total(), 0, "slots come back when connections end");
        assert!(a.admit(ip("10.0.0.1")).is_ok());
    }

    #[test]
    fn the_reserve_goes_to_addresses_with_few_connections() {
        let a = table(20, 15, 8);
        let mut held = Vec::new();
        for i in 0..6 {
            held.push(a.admit(ip(&format!("10.0.1.{i}"))).unwrap());
        }
        for _ in 0..6 {
            held.push(a.admit(ip("10.9.9.9")).unwrap());
        }
        // 12 of 20 held: only the reserve of 8 is left.
        assert_eq!(a.admit(ip("10.9.9.9")).err(), Some(Refusal::Reserve));
        for i in 0..8 {
            held.push(a.admit(ip(&format!("10.0.2.{i}"))).unwrap());
        }
        assert_eq!(a.admit(ip("10.0.3.1")).err(), Some(Refusal::Full));
    }

    #[test]
    fn ipv6_counts_by_64_and_mapped_v4_as_v4() {
        let a = table(100, 2, 0);
        let _x = a.admit(ip("2001:db8:1:2::1")).unwrap();
        let _y = a.admit(ip("2001:db8:1:2:ffff::9")).unwrap();
        assert_eq!(
            a.admit(ip("2001:db8:1:2::77")).err(),
            Some(Refusal::PerAddress),
            "same /64"
        );
        assert!(a.admit(ip("2001:db8:1:3::1")).is_ok(), "another /64");
        let _v4 = a.admit(ip("192.0.2.1")).unwrap();
        let _v4b = a.admit(ip("::ffff:192.0.2.1")).unwrap();
        assert_eq!(a.admit(ip("192.0.2.1")).err(), Some(Refusal::PerAddress));
    }

    #[test]
    fn new_limits_decide_later_admissions_and_keep_held_slots() {
        let t = table(10, 3, 0);
        let a = ip("192.0.2.1");
        let held: Vec<Slot> = (0..3).map(|_| t.admit(a).unwrap()).collect();
        t.set_limits(AdmissionLimits {
            total: 10,
            per_address: 1,
            reserved: 0,
            per_address_in_reserve: 2,
        });
        assert_eq!(t.total(), 3, "connections already admitted stay");
        assert!(matches!(t.admit(a), Err(Refusal::PerAddress)));
        drop(held);
        let one = t.admit(a).unwrap();
        assert!(matches!(t.admit(a), Err(Refusal::PerAddress)));
        drop(one);
    }
}
