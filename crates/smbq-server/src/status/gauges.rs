//! Cheap counts for the metrics endpoint (issue 17), read at each scrape: no snapshot, one
//! lock per table.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Server;

/// Packet counts of QUIC connections that have ended, so the totals stay monotonic as
/// connections come and go.
#[derive(Debug, Default)]
pub(crate) struct EndedQuic {
    sent: AtomicU64,
    lost: AtomicU64,
}

impl EndedQuic {
    pub(crate) fn add(&self, s: smbq_transport::PathSample) {
        self.sent.fetch_add(s.sent_packets, Ordering::Relaxed);
        self.lost.fetch_add(s.lost_packets, Ordering::Relaxed);
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gauges {
    pub tcp_connections: u64,
    pub quic_connections: u64,
    pub sessions: u64,
    pub opens: u64,
    pub parked_durable_opens: u64,
    /// QUIC packets sent and declared lost, over every connection since the start.
    pub quic_sent_packets: u64,
    pub quic_lost_packets: u64,
    /// Small WRITEs done on the request's worker rather than the blocking pool
    /// (crate::inline_io), since the start.
    pub inline_writes: u64,
}

impl Server {
    pub fn gauges(&self) -> Gauges {
        let mut g = Gauges {
            quic_sent_packets: self.ended_quic.sent.load(Ordering::Relaxed),
            quic_lost_packets: self.ended_quic.lost.load(Ordering::Relaxed),
            inline_writes: crate::inline_io::InlineGate::get().passes(),
            ..Gauges::default()
        };
        for c in self.conn_infos.read().values() {
            if c.transport == "quic" {
                g.quic_connections += 1;
            } else {
                g.tcp_connections += 1;
            }
            if let Some(s) = c.path() {
                g.quic_sent_packets += s.sent_packets;
                g.quic_lost_packets += s.lost_packets;
            }
        }
        g.sessions = self
            .sessions
            .live()
            .iter()
            .filter(|r| r.owner().is_some())
            .count() as u64;
        g.opens = self
            .opens
            .read()
            .iter()
            .filter(|(_, o)| o.is_some())
            .count() as u64;
        g.parked_durable_opens = self.parked_opens() as u64;
        g
    }

    /// The round-trip time of each live QUIC connection now (for the RTT histogram).
    pub fn quic_rtts(&self) -> Vec<std::time::Duration> {
        self.conn_infos
            .read()
            .values()
            .filter_map(|c| c.path().map(|s| s.rtt))
            .collect()
    }
}
