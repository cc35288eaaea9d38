//! Multichannel from the client's side against the real smbq server (in-process, loopback
//! TCP): a second connection bound to the session carries READs and WRITEs, a bind with a
//! wrong password is refused and leaves the session working, and a channel that goes away
//! costs no request (they go on the first connection).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use common::*;
use smbq_client::{Client, ClientConfig, OpenOptions};
use smbq_server::config::EncryptPolicy;

/// A client that will bind asks for multichannel.
fn binding_config() -> ClientConfig {
    ClientConfig {
        multichannel: true,
        ..ClientConfig::default()
    }
}

async fn second_client(srv: &TestServer) -> Client {
    let conn = smbq_transport::connect_tcp(srv.addr).await.unwrap();
    Client::connect(conn, binding_config()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_channel_carries_data_and_its_loss_costs_nothing() {
    for encrypt in [EncryptPolicy::Off, EncryptPolicy::Required] {
        let srv = start(encrypt).await;
        let (client, session, tree) = login(&srv, binding_config()).await;
        assert!(
            client.negotiated().multichannel(),
            "smbq offers multichannel over TCP"
        );
        let data = pattern(8 << 20, 3);
        put(&tree, "f.bin", &data).await;

        let other = second_client(&srv).await;
        let refused = other.bind(&session, USER, "", "wrong password").await;
        assert!(refused.is_err(), "a wrong password binds nothing");
        let channel = other.bind(&session, USER, "", PASSWORD).await.unwrap();
        assert_eq!(channel.id(), session.id());
        assert_eq!(channel.encrypts(), session.encrypts());
        let both = tree.with_channels(vec![channel]).unwrap();
        assert_eq!(both.channel_count(), 2);

        let sent_before = other.frames_sent();
        assert_eq!(get(&both, "f.bin").await, data);
        assert!(
            other.frames_sent() > sent_before + 2,
            "the second connection carried READs"
        );

        // The second connection goes: reads go on over the first one, the session stays.
        other.close(Duration::from_secs(2)).await;
        assert_eq!(get(&both, "f.bin").await, data);
        let f = both.open("f.bin", &OpenOptions::read()).await.unwrap();
        assert_eq!(&f.read_at(0, 4096).await.unwrap()[..], &data[..4096]);
        f.close().await.unwrap();
    }
}

/// Issue 42: a session set up over QUIC without a cipher (TLS protects that connection) and
/// bound to a TCP connection must not be served in clear text on TCP where encryption is
/// required, by the server or by the share. Either the bind is refused, or the TCP channel
/// encrypts, or the server refuses what comes unencrypted: never file data in the clear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_session_without_a_cipher_is_never_served_in_clear_over_tcp() {
    // Both connections ask for multichannel and offer AES-GMAC alone: the session, set up
    // over QUIC (no multichannel there), signs with AES-GMAC, and a channel must sign as its
    // session does (MS-SMB2 3.3.5.5: REQUEST_OUT_OF_SEQUENCE otherwise). Offered AES-CMAC too,
    // the TCP connection would get it (issue 42) and the bind would be refused before the
    // check this test is about.
    let no_cipher = ClientConfig {
        transport_security: true,
        ciphers: Vec::new(),
        signing: vec![smbq_crypto::SigningAlgorithm::AesGmac],
        ..binding_config()
    };
    let with_cipher = ClientConfig {
        client_guid: no_cipher.client_guid,
        signing: no_cipher.signing.clone(),
        ..binding_config()
    };
    for (policy, tcp_cfg) in [
        (EncryptPolicy::Required, &with_cipher),
        (EncryptPolicy::Off, &no_cipher),
        (EncryptPolicy::Off, &with_cipher),
        (EncryptPolicy::Desired, &no_cipher),
    ] {
        let srv = start_encrypted_share(policy).await;
        let what = format!("{policy:?}, TCP ciphers {:?}", tcp_cfg.ciphers);
        let outcome = quic_then_tcp(&srv, &no_cipher, tcp_cfg).await;
        assert!(!outcome.starts_with("clear text"), "{what}: {outcome}");
        // The case that was served in clear before the fix must still get as far as a bound
        // channel, or this test shows nothing.
        if policy == EncryptPolicy::Off && tcp_cfg.ciphers.is_empty() {
            assert_eq!(outcome, "refused over TCP", "{what}");
        }
    }
}

/// Logs on over QUIC without a cipher, binds a TCP connection and reads over both; says
/// what happened: "bind refused", "refused over TCP", "encrypted over TCP", or "clear text
/// ..." when file data came back over TCP unencrypted.
async fn quic_then_tcp(
    srv: &TestServer,
    quic_cfg: &ClientConfig,
    tcp_cfg: &ClientConfig,
) -> String {
    use smbq_transport::{QuicClient, QuicClientConfig, ServerTrust};
    let qc = QuicClient::new(
        QuicClientConfig::new(ServerTrust::Pin(srv.pin)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    let conn = qc.connect(srv.quic.unwrap(), "localhost").await.unwrap();
    let client = Client::connect(conn, quic_cfg.clone()).await.unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    assert!(!session.encrypts(), "no cipher was negotiated over QUIC");
    let tree = session.tree_connect("share").await.unwrap();
    put(&tree, "secret.bin", &pattern(4 << 20, 9)).await;

    let tcp = smbq_transport::connect_tcp(srv.addr).await.unwrap();
    let other = Client::connect(tcp, tcp_cfg.clone()).await.unwrap();
    let Ok(channel) = other.bind(&session, USER, "", PASSWORD).await else {
        return "bind refused".into();
    };
    let both = tree.with_channels(vec![channel.clone()]).unwrap();
    // READs spread over both connections; what the TCP one carries must not be clear text.
    let sent_before = other.frames_sent();
    let Ok(f) = both.open("secret.bin", &OpenOptions::read()).await else {
        return "refused over TCP".into();
    };
    let mut read = 0;
    for i in 0..64 {
        if let Ok(d) = f.read_at(i * 65536, 65536).await {
            read += d.len();
        }
    }
    if other.frames_sent() <= sent_before + 2 {
        return "nothing went over TCP".into();
    }
    match (read == 4 << 20, channel.encrypts()) {
        (_, true) => "encrypted over TCP".into(),
        (false, false) => "refused over TCP".into(),
        (true, false) => format!("clear text: {read} bytes read over QUIC and TCP"),
    }
}
