//! Gauges and totals read from the server's tables at each scrape.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabel {
    transport: &'static str,
}

#[derive(Debug)]
pub struct Tables {
    server: Arc<smbq_server::Server>,
    started: f64,
}

impl Tables {
    pub fn new(server: Arc<smbq_server::Server>) -> Self {
        let started = server.status_started_unix() as f64;
        Self { server, started }
    }
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let g = ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
    g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

impl Collector for Tables {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let g = self.server.gauges();
        {
            let kind = ConstGauge::new(0i64).metric_type();
            let mut family = enc.encode_descriptor(
                "smbq_connections",
                "Live SMB connections, by transport",
                None,
                kind,
            )?;
            for (transport, n) in [("tcp", g.tcp_connections), ("quic", g.quic_connections)] {
                let labels = TransportLabel { transport };
                ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))
                    .encode(family.encode_family(&labels)?)?;
            }
        }
        gauge(
            &mut enc,
            "smbq_sessions",
            "Authenticated sessions",
            g.sessions,
        )?;
        gauge(
            &mut enc,
            "smbq_open_files",
            "Open handles (files, directories, pipes)",
            g.opens,
        )?;
        gauge(
            &mut enc,
            "smbq_durable_disconnected_opens",
            "Durable opens waiting for their client to reconnect",
            g.parked_durable_opens,
        )?;
        counter(
            &mut enc,
            "smbq_quic_sent_packets",
            "QUIC packets sent (quinn stack), every connection since the start",
            g.quic_sent_packets,
        )?;
        counter(
            &mut enc,
            "smbq_quic_lost_packets",
            "QUIC packets declared lost (quinn stack), every connection since the start",
            g.quic_lost_packets,
        )?;
        counter(
            &mut enc,
            "smbq_inline_writes",
            "Small WRITEs done on the request's worker thread instead of the blocking pool",
            g.inline_writes,
        )?;
        let start = ConstGauge::new(self.started);
        start.encode(enc.encode_descriptor(
            "smbq_start_time_seconds",
            "When the server started, seconds since the Unix epoch",
            None,
            start.metric_type(),
        )?)
    }
}
