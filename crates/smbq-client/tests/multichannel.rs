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
