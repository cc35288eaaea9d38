//! Prometheus metrics (issue 17): `[metrics] listen = "127.0.0.1:9445"` serves them at
//! `/metrics` (off by default). Events come typed from the engine and the server
//! (`smbq_proto::observe`); gauges are read from the server's tables at each scrape
//! (`collector.rs`). Names follow Prometheus conventions: `smbq_` prefix, base units
//! (seconds, bytes), `_total` on counters.

mod collector;
pub mod http;
mod text_format;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use smbq_proto::engine::Transport;
use smbq_proto::observe::{CompressionEvent, Handled, Observer};
use smbq_wire::{Command, NtStatus};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    command: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabels {
    command: &'static str,
}

/// `share` is the name of the request's tree's share: a configured share, never a name a
/// client asked for (a TREE_CONNECT to one that does not exist has no tree).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DataLabels {
    share: String,
    transport: &'static str,
}

/// A compressed message's direction and algorithm ("any" for a received one: its payloads
/// may mix algorithms).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CompressionLabels {
    direction: &'static str,
    algorithm: &'static str,
}

/// The label of every command code and NTSTATUS smbq has no name for. A client picks the
/// command code of each request, before any logon, and every distinct label value is a series
/// kept for the life of the process: a label per made-up code would let one peer grow the
/// scrape and the server's memory without bound (issue 42).
const OTHER: &str = "other";

fn command_name(c: Command) -> &'static str {
    c.name().unwrap_or(OTHER)
}

fn status_name(s: NtStatus) -> &'static str {
    s.name().unwrap_or(OTHER)
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Tcp => "tcp",
        Transport::Quic => "quic",
    }
}

fn duration_histogram() -> Histogram {
    // 50 µs .. ~13 s, factor 4: a cached READ to a CREATE waiting on an oplock break.
    Histogram::new(exponential_buckets(0.000_05, 4.0, 10))
}

/// The event-fed series; an `Observer` for the engine and the server alike.
#[derive(Debug)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<CommandLabels, Histogram, fn() -> Histogram>,
    credits: Counter,
    read: Family<DataLabels, Counter>,
    written: Family<DataLabels, Counter>,
    logon_failures: Counter,
    quic_rtt: Histogram,
    compressed: Family<CompressionLabels, Counter>,
    compressed_wire: Family<CompressionLabels, Counter>,
    compressed_plain: Family<CompressionLabels, Counter>,
}

impl Metrics {
    /// The series, registered in a new registry with the scrape-time gauges of `server`.
    pub fn new(server: Arc<smbq_server::Server>) -> (Arc<Self>, Registry) {
        let m = Arc::new(Self {
            requests: Family::default(),
            durations: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            credits: Counter::default(),
            read: Family::default(),
            written: Family::default(),
            logon_failures: Counter::default(),
            // 100 µs .. ~3 s, factor 2.
            quic_rtt: Histogram::new(exponential_buckets(0.000_1, 2.0, 15)),
            compressed: Family::default(),
            compressed_wire: Family::default(),
            compressed_plain: Family::default(),
        });
        let mut r = Registry::default();
        r.register(
            "smbq_requests",
            "SMB2 responses sent, by command and NTSTATUS (interim responses not counted)",
            m.requests.clone(),
        );
        r.register_with_unit(
            "smbq_request_duration",
            "Time a handler took to answer a request, by command",
            Unit::Seconds,
            m.durations.clone(),
        );
        r.register(
            "smbq_credits_granted",
            "SMB2 credits granted in responses",
            m.credits.clone(),
        );
        r.register_with_unit(
            "smbq_read",
            "File data returned by READ, by share and transport",
            Unit::Bytes,
            m.read.clone(),
        );
        r.register_with_unit(
            "smbq_written",
            "File data written by WRITE, by share and transport",
            Unit::Bytes,
            m.written.clone(),
        );
        r.register(
            "smbq_logon_failures",
            "Failed SESSION_SETUP authentications",
            m.logon_failures.clone(),
        );
        r.register_with_unit(
            "smbq_quic_rtt",
            "Smoothed round-trip time of QUIC connections: each live one every 5 s, and each as it ends",
            Unit::Seconds,
            m.quic_rtt.clone(),
        );
        r.register(
            "smbq_compressed_messages",
            "SMB2 compressed messages, by direction (sent, received) and algorithm",
            m.compressed.clone(),
        );
        r.register_with_unit(
            "smbq_compressed_wire",
            "Size of compressed messages as they crossed the wire",
            Unit::Bytes,
            m.compressed_wire.clone(),
        );
        r.register_with_unit(
            "smbq_compressed_plain",
            "Size of the same messages uncompressed",
            Unit::Bytes,
            m.compressed_plain.clone(),
        );
        r.register_collector(Box::new(collector::Tables::new(server)));
        (m, r)
    }

    /// Samples the QUIC connections' RTTs into the histogram every 5 s until `shutdown`.
    pub async fn sample_rtts(
        self: Arc<Self>,
        server: Arc<smbq_server::Server>,
        shutdown: smbq_server::conn::Shutdown,
    ) {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = shutdown.cancelled() => return,
            }
            for rtt in server.quic_rtts() {
                self.quic_rtt.observe(rtt.as_secs_f64());
            }
        }
    }
}

impl Observer for Metrics {
    fn response(&self, command: Command, status: NtStatus, credits: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                command: command_name(command),
                status: status_name(status),
            })
            .inc();
        self.credits.inc_by(u64::from(credits));
    }

    fn handled(&self, h: &Handled<'_>) {
        self.durations
            .get_or_create(&CommandLabels {
                command: command_name(h.command),
            })
            .observe(h.elapsed.as_secs_f64());
        if h.read_bytes == 0 && h.written_bytes == 0 {
            return;
        }
        let labels = DataLabels {
            share: h.share.unwrap_or("").to_owned(),
            transport: transport_name(h.transport),
        };
        if h.read_bytes > 0 {
            self.read.get_or_create(&labels).inc_by(h.read_bytes);
        }
        if h.written_bytes > 0 {
            self.written.get_or_create(&labels).inc_by(h.written_bytes);
        }
    }

    fn logon_failed(&self) {
        self.logon_failures.inc();
    }

    fn quic_ended(&self, rtt: Duration) {
        self.quic_rtt.observe(rtt.as_secs_f64());
    }

    fn compression(&self, c: &CompressionEvent) {
        let labels = CompressionLabels {
            direction: if c.sent { "sent" } else { "received" },
            algorithm: c.algorithm.map_or("any", |a| a.name()),
        };
        self.compressed.get_or_create(&labels).inc();
        self.compressed_wire
            .get_or_create(&labels)
            .inc_by(c.wire_bytes);
        self.compressed_plain
            .get_or_create(&labels)
            .inc_by(c.plain_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_without_a_name_share_one_label() {
        assert_eq!(command_name(Command::READ), "READ");
        assert_eq!(command_name(Command(0x5710)), OTHER);
        assert_eq!(command_name(Command(0x0013)), OTHER);
        assert_eq!(status_name(NtStatus::SUCCESS), "SUCCESS");
        assert_eq!(status_name(NtStatus(0xC0DE_0001)), OTHER);
    }
}
