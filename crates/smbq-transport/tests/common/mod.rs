//! Shared by the transport tests: rcgen certificates, listeners, clients and chunk helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::indexing_slicing)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use smbq_transport::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use smbq_transport::rustls::{self};
use smbq_transport::{
    CertEntry, CertStore, ChunkRead, ClientAuth, Connection, QuicClient, QuicClientConfig,
    QuicListener, QuicSettings, ServerTrust, TlsSettings,
};

pub async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("timed out")
}

pub struct Cert {
    pub der: CertificateDer<'static>,
    pub key: KeyPair,
}

impl Cert {
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
    }

    pub fn entry(&self, names: &[&str]) -> CertEntry {
        CertEntry {
            names: names.iter().map(|s| s.to_string()).collect(),
            chain: vec![self.der.clone()],
            key: self.key_der(),
        }
    }

    pub fn chain_and_key(
        &self,
        extra: &[CertificateDer<'static>],
    ) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let mut chain = vec![self.der.clone()];
        chain.extend_from_slice(extra);
        (chain, self.key_der())
    }
}

pub fn self_signed(name: &str, eku: ExtendedKeyUsagePurpose) -> Cert {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec![name.to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![eku];
    let cert = p.self_signed(&key).unwrap();
    Cert {
        der: cert.der().clone(),
        key,
    }
}

pub fn server_cert(name: &str) -> Cert {
    self_signed(name, ExtendedKeyUsagePurpose::ServerAuth)
}

pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).unwrap();
        Self { cert, key }
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    fn issue(&self, name: &str, eku: ExtendedKeyUsagePurpose) -> Cert {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec![name.to_string()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![eku];
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Cert {
            der: cert.der().clone(),
            key,
        }
    }

    pub fn issue_client(&self, name: &str) -> Cert {
        self.issue(name, ExtendedKeyUsagePurpose::ClientAuth)
    }

    pub fn issue_server(&self, name: &str) -> Cert {
        self.issue(name, ExtendedKeyUsagePurpose::ServerAuth)
    }
}

pub fn test_settings() -> QuicSettings {
    QuicSettings {
        socket_buffer: 1 << 20,
        ..QuicSettings::default()
    }
}

pub fn listen(
    certs: Arc<CertStore>,
    client_auth: ClientAuth,
    settings: QuicSettings,
) -> QuicListener {
    listen_at("127.0.0.1:0", certs, client_auth, None, settings)
}

pub fn listen_at(
    addr: &str,
    certs: Arc<CertStore>,
    client_auth: ClientAuth,
    keylog: Option<Arc<dyn rustls::KeyLog>>,
    settings: QuicSettings,
) -> QuicListener {
    let tls = TlsSettings {
        certs,
        client_auth,
        keylog,
        session_tickets: false,
    };
    QuicListener::bind(addr.parse().unwrap(), tls, settings).unwrap()
}

/// A listener without client auth that sends TLS 1.3 session tickets (`[quic]
/// session_tickets = true`).
#[allow(dead_code)] // not every test binary uses it
pub fn listen_with_tickets(certs: Arc<CertStore>, settings: QuicSettings) -> QuicListener {
    let tls = TlsSettings {
        certs,
        client_auth: ClientAuth::Off,
        keylog: None,
        session_tickets: true,
    };
    QuicListener::bind("127.0.0.1:0".parse().unwrap(), tls, settings).unwrap()
}

/// A listener serving one self-signed certificate for `name`, without client auth.
pub fn listen_as(name: &str) -> (QuicListener, Cert) {
    let cert = server_cert(name);
    let store = CertStore::new(vec![cert.entry(&[name])]).unwrap();
    (listen(store, ClientAuth::Off, test_settings()), cert)
}

/// The loopback address of the server's family, any port.
pub fn loopback_for(server: SocketAddr) -> SocketAddr {
    if server.is_ipv4() {
        "127.0.0.1:0".parse().unwrap()
    } else {
        "[::1]:0".parse().unwrap()
    }
}

pub fn client_cfg(trust: ServerTrust) -> QuicClientConfig {
    QuicClientConfig {
        settings: test_settings(),
        ..QuicClientConfig::new(trust)
    }
}

pub fn client_for(server: SocketAddr, cfg: QuicClientConfig) -> QuicClient {
    QuicClient::new(cfg, loopback_for(server)).unwrap()
}

pub fn trusting(certs: &[&Cert]) -> ServerTrust {
    ServerTrust::CaCerts(certs.iter().map(|c| c.der.clone()).collect())
}

/// Reads exactly `n` bytes through `read_chunk`; fails on an early end of stream.
pub async fn read_n(reader: &mut dyn ChunkRead, n: usize) -> Vec<u8> {
    let mut got = Vec::with_capacity(n);
    while got.len() < n {
        let chunk = reader
            .read_chunk()
            .await
            .unwrap()
            .expect("early end of stream");
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got.len(), n, "read past the expected bytes");
    got
}

/// Reads until the end of stream; `None` if the stream failed instead of ending cleanly.
pub async fn read_to_end(reader: &mut dyn ChunkRead) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    loop {
        match reader.read_chunk().await {
            Ok(Some(chunk)) => got.extend_from_slice(&chunk),
            Ok(None) => return Some(got),
            Err(_) => return None,
        }
    }
}

/// Sends back every chunk as it arrives (no copy), then ends the stream; returns the count.
pub async fn echo(conn: Connection) -> usize {
    let Connection {
        mut reader,
        mut writer,
        ..
    } = conn;
    let mut total = 0;
    while let Ok(Some(chunk)) = reader.read_chunk().await {
        total += chunk.len();
        if writer.write_chunks(&mut [chunk]).await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
    total
}

/// Accepts the next connection and echoes it in a task whose result is the byte count.
pub async fn accept_and_echo(
    accept: impl Future<Output = Option<std::io::Result<Connection>>>,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(echo(within(accept).await.unwrap().unwrap()))
}

/// `len` bytes of a pattern that shows misordering and loss.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

/// Splits `data` into chunks of varying sizes, some empty.
pub fn chunks_of(data: &[u8]) -> Vec<Bytes> {
    let sizes = [0usize, 1, 7, 4096, 3, 65_537, 0, 1200, 100_000];
    let mut out = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < data.len() {
        let n = sizes[k % sizes.len()].min(data.len() - at);
        out.push(Bytes::copy_from_slice(&data[at..at + n]));
        at += n;
        k += 1;
    }
    out
}

/// Client side of an echo: writes `payload` in varied chunks while reading it back.
pub async fn echo_round_trip(conn: &mut Connection, payload: &[u8]) {
    let mut chunks = chunks_of(payload);
    let (reader, writer) = (&mut conn.reader, &mut conn.writer);
    let write = async {
        within(writer.write_chunks(&mut chunks)).await.unwrap();
    };
    let (_, got) = tokio::join!(write, within(read_n(reader.as_mut(), payload.len())));
    assert!(got == payload, "echoed bytes differ");
    assert!(chunks.iter().all(Bytes::is_empty));
}
