//! The real smbq server in-process (PosixVfs on a temp dir) on loopback TCP and QUIC, and
//! small helpers the client tests share.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use smbq_client::transfer::{TransferOptions, download, upload};
use smbq_client::{Client, ClientConfig, OpenOptions, Session, Tree};
use smbq_proto::{EngineConfig, Limits};
use smbq_server::config::{EncryptPolicy, ServerConfig, ShareConfig};
use smbq_server::conn::{Runtime, Shutdown, serve_tcp, spawn_connection};
use smbq_transport::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use smbq_transport::{
    CertEntry, CertStore, ClientAuth, QuicListener, QuicSettings, TlsSettings, fingerprint,
};

pub const USER: &str = "alice";
pub const PASSWORD: &str = "s3cret pass";

pub struct TestServer {
    pub addr: SocketAddr,
    pub quic: Option<SocketAddr>,
    /// SHA-256 of the QUIC certificate, for pinning.
    pub pin: [u8; 32],
    pub dir: tempfile::TempDir,
    pub shutdown: Shutdown,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub async fn start(encrypt: EncryptPolicy) -> TestServer {
    start_with(encrypt, false).await
}

pub async fn start_with(encrypt: EncryptPolicy, quic: bool) -> TestServer {
    start_quic_with(encrypt, quic.then(QuicSettings::default)).await
}

/// A server whose QUIC listener (if any) runs with `quic`.
pub async fn start_quic_with(encrypt: EncryptPolicy, quic: Option<QuicSettings>) -> TestServer {
    start_full(encrypt, quic, false, |_| {}, |_| {}).await
}

/// A server (QUIC too) whose engine configuration `tune` adjusts.
#[allow(dead_code)] // not every test binary uses it
pub async fn start_tuned(
    encrypt: EncryptPolicy,
    tune: impl FnOnce(&mut EngineConfig),
) -> TestServer {
    start_full(encrypt, Some(QuicSettings::default()), false, |_| {}, tune).await
}

/// A server with QUIC whose share requires encryption (`encrypt = true` on the share).
#[allow(dead_code)] // not every test binary uses it
pub async fn start_encrypted_share(encrypt: EncryptPolicy) -> TestServer {
    start_full(encrypt, Some(QuicSettings::default()), true, |_| {}, |_| {}).await
}

/// A server (QUIC too) whose server configuration `tune` adjusts.
#[allow(dead_code)] // not every test binary uses it
pub async fn start_server_tuned(
    encrypt: EncryptPolicy,
    tune: impl FnOnce(&mut ServerConfig),
) -> TestServer {
    start_full(encrypt, Some(QuicSettings::default()), false, tune, |_| {}).await
}

async fn start_full(
    encrypt: EncryptPolicy,
    quic: Option<QuicSettings>,
    share_encrypt: bool,
    tune_server: impl FnOnce(&mut ServerConfig),
    tune: impl FnOnce(&mut EngineConfig),
) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let share = dir.path().join("share");
    std::fs::create_dir(&share).unwrap();
    let cfg = ServerConfig {
        server_name: "SMBQTEST".into(),
        server_guid: [7; 16],
        shares: vec![ShareConfig {
            name: "share".into(),
            path: share,
            comment: "test share".into(),
            read_only: false,
            allowed_users: None,
            no_access_users: Vec::new(),
            encrypt: share_encrypt,
            guest_ok: false,
            acl_flag_inherited_canonicalization: true,
            access_based_enumeration: false,
            compress_data: false,
            continuous_availability: false,
            posix_extensions: true,
        }],
        encrypt,
        guest_ok: false,
        access_based_share_enum: true,
        limits: Limits::default(),
        refuse_hardlinks: true,
        logon: Default::default(),
        interfaces: Default::default(),
        restrict_named_pipes_quic: true,
        node_tag: 0,
    };
    let mut cfg = cfg;
    tune_server(&mut cfg);
    let server = smbq_server::Server::new(cfg).unwrap();
    let mut engine = EngineConfig::new(Limits::default(), [7; 16], "SMBQTEST").encrypt(
        matches!(encrypt, EncryptPolicy::Required),
        matches!(encrypt, EncryptPolicy::Desired),
    );
    tune(&mut engine);
    let accounts = |u: &str| {
        u.eq_ignore_ascii_case(USER)
            .then(|| smbq_auth::nt_hash(PASSWORD))
    };
    let rt = Runtime::new(server, Arc::new(engine), Arc::new(accounts));
    let shutdown = Shutdown::new();
    let (quic, pin) = if let Some(settings) = quic {
        let (listener, pin) = quic_listener(settings);
        let addr = listener.local_addr().unwrap();
        let rt = rt.clone();
        let sd = shutdown.clone();
        tokio::spawn(async move {
            while let Some(Ok(conn)) = listener.accept().await {
                spawn_connection(conn, rt.clone(), sd.clone());
            }
        });
        (Some(addr), pin)
    } else {
        (None, [0; 32])
    };
    let listener = smbq_transport::tcp::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tcp(listener, rt, shutdown.clone()));
    TestServer {
        addr,
        quic,
        pin,
        dir,
        shutdown,
    }
}

impl TestServer {
    pub fn share_path(&self) -> std::path::PathBuf {
        self.dir.path().join("share")
    }
}

pub async fn login(srv: &TestServer, cfg: ClientConfig) -> (Client, Session, Tree) {
    let conn = smbq_transport::connect_tcp(srv.addr).await.unwrap();
    let client = Client::connect(conn, cfg).await.unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    let tree = session.tree_connect("share").await.unwrap();
    (client, session, tree)
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 13) as u8)
        .collect()
}

pub async fn put(tree: &Tree, path: &str, data: &[u8]) {
    let f = tree
        .open(path, &OpenOptions::create_truncate())
        .await
        .unwrap();
    let mut at = 0usize;
    let n = upload(
        &f,
        0,
        TransferOptions::default(),
        |max| {
            let end = (at + max).min(data.len());
            let b = Bytes::copy_from_slice(&data[at..end]);
            at = end;
            Ok(b)
        },
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(n as usize, data.len());
    f.close().await.unwrap();
}

pub async fn get(tree: &Tree, path: &str) -> Vec<u8> {
    let f = tree.open(path, &OpenOptions::read()).await.unwrap();
    let size = f.metadata().size;
    let mut out = Vec::new();
    download(&f, 0, size, TransferOptions::default(), |b| {
        out.extend_from_slice(b);
        Ok(())
    })
    .await
    .unwrap();
    f.close().await.unwrap();
    out
}

/// A QUIC listener on loopback with a fresh self-signed certificate; returns its pin.
fn quic_listener(settings: QuicSettings) -> (QuicListener, [u8; 32]) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let der: CertificateDer<'static> = cert.der().clone();
    let pin = fingerprint(&der);
    let store = CertStore::new(vec![CertEntry {
        names: vec!["localhost".into()],
        chain: vec![der],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }])
    .unwrap();
    let tls = TlsSettings {
        certs: store,
        client_auth: ClientAuth::default(),
        keylog: None,
        session_tickets: false,
    };
    let l = QuicListener::bind("127.0.0.1:0".parse().unwrap(), tls, settings).unwrap();
    (l, pin)
}
