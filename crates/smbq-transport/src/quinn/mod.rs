//! SMB over QUIC on quinn: the listener, the client, and the stream halves both hand up as a
//! [`crate::Connection`]. What they share lives here: the transport tuning (quic-stacks.md
//! 7.2), the UDP socket setup and the endpoint configuration.

mod bbr;
mod client;
mod congestion;
mod io_thread;
mod listener;
mod multi;
mod stream;

pub use client::QuicClient;
pub use listener::QuicListener;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use ::quinn::{EndpointConfig, IdleTimeout, MtuDiscoveryConfig, TransportConfig, VarInt};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::quic::{Congestion, QuicSettings, UdpBuffers};

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

fn varint(v: u64) -> VarInt {
    VarInt::from_u64(v).unwrap_or(VarInt::MAX)
}

/// Which end of the connection a transport configuration is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Server,
    Client,
}

/// quic-stacks.md 7.2: large windows (SMB READ/WRITE up to 8 MiB on one stream), PINGs, no
/// datagrams. The server lets the client open exactly one bidirectional stream and no
/// unidirectional ones (MS-SMB2 2.1, product note <2>); the client lets the server open none.
fn transport_config(s: &QuicSettings, role: Role) -> io::Result<TransportConfig> {
    let mut tc = TransportConfig::default();
    let mut mtu = MtuDiscoveryConfig::default();
    mtu.upper_bound(s.effective_mtu_upper_bound());
    let peer_bidi = match role {
        Role::Server => 1,
        Role::Client => 0,
    };
    tc.stream_receive_window(varint(s.stream_receive_window))
        .receive_window(varint(s.receive_window))
        .send_window(s.send_window)
        .max_concurrent_bidi_streams(VarInt::from_u32(peer_bidi))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .max_idle_timeout(Some(
            IdleTimeout::try_from(s.idle_timeout).map_err(invalid)?,
        ))
        .keep_alive_interval((!s.keep_alive.is_zero()).then_some(s.keep_alive))
        .datagram_receive_buffer_size(None)
        .mtu_discovery_config(Some(mtu));
    match s.congestion {
        Congestion::Cubic => {
            tc.congestion_controller_factory(Arc::new(::quinn::congestion::CubicConfig::default()))
        }
        Congestion::Bbr => {
            tc.congestion_controller_factory(Arc::new(congestion::BbrLanFloorConfig::default()))
        }
        Congestion::BbrPure => {
            tc.congestion_controller_factory(Arc::new(::quinn::congestion::BbrConfig::default()))
        }
        Congestion::NewReno => tc
            .congestion_controller_factory(Arc::new(::quinn::congestion::NewRenoConfig::default())),
    };
    if role == Role::Client {
        tc.ack_frequency_config(Some(ack_frequency()));
    }
    Ok(tc)
}

/// How quickly the client asks the server to acknowledge it (the QUIC ACK-frequency extension,
/// draft-ietf-quic-ack-frequency; sent only to a server that advertised `min_ack_delay`).
/// A lost request is found by the probe timeout, RFC 9002 6.2.1: smoothed RTT + 4 x RTT
/// variation + the peer's max_ack_delay, which is 25 ms by default. A client sending one small
/// request at a time has nothing after it to reveal the loss sooner, so those 25 ms land on
/// the operation (issue 14's `interactive` tail at 2 % loss). The server answers almost every
/// request well within the delay asked, with the ACK riding on the response, so the extra
/// ACK-only packets are few. The thresholds keep RFC 9000's behaviour: an ACK every second
/// ack-eliciting packet, and at once on any gap.
const CLIENT_MAX_ACK_DELAY: std::time::Duration = std::time::Duration::from_millis(5);

fn ack_frequency() -> ::quinn::AckFrequencyConfig {
    let mut af = ::quinn::AckFrequencyConfig::default();
    af.max_ack_delay(Some(CLIENT_MAX_ACK_DELAY))
        .ack_eliciting_threshold(VarInt::from_u32(1))
        .reordering_threshold(VarInt::from_u32(1));
    af
}

/// Lets the peer send datagrams as large as our own MTU discovery may reach; signs stateless
/// resets with the configured key when there is one.
fn endpoint_config(s: &QuicSettings) -> io::Result<EndpointConfig> {
    let mut config = match s.reset_key {
        Some(key) => {
            let mut c = EndpointConfig::new(std::sync::Arc::new(ResetKey::new(&key)));
            // quinn answers a packet of an unknown connection with a reset only when its
            // connection id passes the generator's check, which is keyed: the key must
            // outlive the process too, so it is derived from the reset key.
            let cid_key = cid_key(&key);
            c.cid_generator(move || {
                Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
            });
            c
        }
        None => EndpointConfig::default(),
    };
    if let Some(lb) = s.quic_lb.clone() {
        // Keyed like the reset tokens, so ids survive a restart (docs/cluster.md).
        let key = match s.reset_key {
            Some(k) => lb_key(&k),
            None => rand::random(),
        };
        config
            .cid_generator(move || Box::new(crate::quic_lb::LbCidGenerator::new(lb.clone(), key)));
    }
    config
        .max_udp_payload_size(s.effective_mtu_upper_bound().max(1472))
        .map_err(invalid)?;
    Ok(config)
}

/// The connection id generator's key, derived from the reset key (a hash of it with a label,
/// so the two are independent keys).
fn cid_key(reset_key: &[u8; 32]) -> u64 {
    use sha2::Digest;
    let d = sha2::Sha256::new()
        .chain_update(b"smbq quic cid key")
        .chain_update(reset_key)
        .finalize();
    let mut b = [0u8; 8];
    for (o, x) in b.iter_mut().zip(d.iter()) {
        *o = *x;
    }
    u64::from_le_bytes(b)
}

/// The QUIC-LB ids' hash key, derived from the reset key under its own label.
fn lb_key(reset_key: &[u8; 32]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::new()
        .chain_update(b"smbq quic-lb key")
        .chain_update(reset_key)
        .finalize()
        .into()
}

/// HMAC-SHA256 under the stateless reset key (quinn derives each connection id's reset token
/// with it, RFC 9000 10.3.2).
struct ResetKey(hmac::Hmac<sha2::Sha256>);

impl ResetKey {
    fn new(key: &[u8; 32]) -> Self {
        use hmac::Mac;
        match hmac::Hmac::<sha2::Sha256>::new_from_slice(key) {
            Ok(m) => Self(m),
            Err(_) => unreachable!("HMAC takes a key of any length"),
        }
    }
}

impl quinn_proto::crypto::HmacKey for ResetKey {
    fn sign(&self, data: &[u8], out: &mut [u8]) {
        use hmac::Mac;
        let mut m = self.0.clone();
        m.update(data);
        let tag = m.finalize().into_bytes();
        for (o, t) in out.iter_mut().zip(tag.iter()) {
            *o = *t;
        }
    }

    fn signature_len(&self) -> usize {
        32
    }

    fn verify(
        &self,
        data: &[u8],
        signature: &[u8],
    ) -> Result<(), quinn_proto::crypto::CryptoError> {
        use hmac::Mac;
        let mut m = self.0.clone();
        m.update(data);
        m.verify_slice(signature)
            .map_err(|_| quinn_proto::crypto::CryptoError)
    }
}

/// Large UDP buffers: quinn stalls and drops on bursts when SO_RCVBUF is the Linux default of
/// 208 KiB (quic-stacks.md 7.2, quinn #2262). The kernel may cap them (net.core.rmem_max,
/// wmem_max); what it granted is returned, and left to the caller to report: a server says so
/// once per machine, not at every start.
fn tune_socket(sock: SockRef<'_>, want: usize) -> io::Result<UdpBuffers> {
    if let Err(e) = sock.set_recv_buffer_size(want) {
        tracing::warn!(error = %e, want, "could not set SO_RCVBUF");
    }
    if let Err(e) = sock.set_send_buffer_size(want) {
        tracing::warn!(error = %e, want, "could not set SO_SNDBUF");
    }
    let buffers = UdpBuffers {
        want,
        rcvbuf: sock.recv_buffer_size().unwrap_or(0),
        sndbuf: sock.send_buffer_size().unwrap_or(0),
    };
    sock.set_nonblocking(true)?;
    Ok(buffers)
}

fn udp_socket(addr: SocketAddr, want: usize) -> io::Result<(std::net::UdpSocket, UdpBuffers)> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let buffers = tune_socket(SockRef::from(&sock), want)?;
    sock.bind(&addr.into())?;
    Ok((sock.into(), buffers))
}

/// The runtime quinn's drivers run on: their own thread ([`io_thread`]), or the caller's
/// tokio runtime when `[quic] io_thread = false`.
fn quinn_runtime(s: &QuicSettings, name: &str) -> io::Result<Arc<dyn ::quinn::Runtime>> {
    if s.io_thread {
        Ok(io_thread::IoThread::start(name)?)
    } else {
        Ok(Arc::new(::quinn::TokioRuntime))
    }
}

/// A quinn connection's path figures (`crate::PathStats`). Holds a handle; the owner drops it
/// with the connection's other state, and the halves close the connection explicitly anyway.
struct QuinnPath(::quinn::Connection);

impl crate::PathStats for QuinnPath {
    fn sample(&self) -> crate::PathSample {
        let s = self.0.stats();
        crate::PathSample {
            rtt: s.path.rtt,
            cwnd_bytes: s.path.cwnd,
            sent_packets: s.path.sent_packets,
            lost_packets: s.path.lost_packets,
        }
    }
}
