//! SMB2_TRANSPORT_CAPABILITIES (MS-SMB2 2.2.3.1.5, 3.3.5.4): over QUIC, a client that accepts
//! transport-level security gets it, and SMB3 encryption is then neither required nor applied,
//! even when the server requires encryption; over TCP the context is never answered and the
//! same configuration requires encryption. Checked on the messages themselves.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_proto::engine::Transport;
use smbq_wire::session_setup::session_flags;
use smbq_wire::{Command, NtStatus};

fn encrypt_required() -> smbq_proto::EngineConfig {
    config().encrypt(true, false)
}

fn offer(transport_security: bool) -> Offer {
    let mut o = Offer::smb311(&[Cipher::Aes128Gcm], &[SigningAlgorithm::AesCmac]);
    o.transport_security = transport_security;
    o
}

/// A signed, unencrypted TREE_CONNECT-free request the engine passes up: CLOSE of a made-up
/// file id is enough to see whether the engine lets plaintext through and how it marks it.
fn plaintext_request(client: &mut Client) -> Vec<u8> {
    let h = client.header(Command::CLOSE, 1);
    let mut body = vec![24, 0, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&[0x11; 16]);
    let mut m = Client::message(&h, &body);
    client.sign(&mut m);
    m
}

#[test]
fn quic_with_transport_security_skips_encryption() {
    let mut server = Server::with_transport(encrypt_required(), Transport::Quic);
    let mut client = Client::new(offer(true));
    let n = client.negotiate(&mut server);
    assert!(n.transport_security, "the context is answered over QUIC");
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert_eq!(
        setup.session_flags & session_flags::ENCRYPT_DATA,
        0,
        "no ENCRYPT_DATA although the server requires encryption"
    );

    // A plaintext (signed) request is accepted and passed up unencrypted.
    let req = plaintext_request(&mut client);
    let mut seen = Vec::new();
    let (frames, _) = server
        .exchange(&frame(&req), &mut |r| {
            seen.push((r.encrypted, r.session.as_ref().map(|s| s.encrypt_data)));
            smbq_proto::Response::error(NtStatus::FILE_CLOSED)
        })
        .unwrap();
    assert_eq!(seen, vec![(false, Some(false))]);
    let resp = client.receive(&single(frames));
    assert!(!resp.encrypted, "the response is not sealed either");
    assert_eq!(resp.one().status(), NtStatus::FILE_CLOSED);
    assert!(client.verifies(resp.one()), "signing rules are unchanged");

    // A client may still encrypt (the Rust smb crate ignores the answer and does): the keys
    // exist, the sealed request is accepted and answered sealed.
    let echo = client.echo(false);
    let sealed = client.seal(&echo);
    let resp = client.receive(&single(server.exchange_engine_only(&sealed).unwrap().0));
    assert!(resp.encrypted);
    assert_eq!(resp.one().status(), NtStatus::SUCCESS);
}

#[test]
fn tcp_never_answers_the_context_and_requires_encryption() {
    let mut server = Server::with_transport(encrypt_required(), Transport::Tcp);
    let mut client = Client::new(offer(true));
    let n = client.negotiate(&mut server);
    assert!(!n.transport_security, "never answered on TCP");
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert_ne!(setup.session_flags & session_flags::ENCRYPT_DATA, 0);

    let req = plaintext_request(&mut client);
    let (frames, _) = server.exchange_engine_only(&frame(&req)).unwrap();
    let resp = client.receive(&single(frames));
    assert_eq!(resp.one().status(), NtStatus::ACCESS_DENIED);
}

#[test]
fn quic_without_the_clients_flag_requires_encryption() {
    let mut server = Server::with_transport(encrypt_required(), Transport::Quic);
    let mut client = Client::new(offer(false));
    let n = client.negotiate(&mut server);
    assert!(!n.transport_security);
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_ne!(setup.session_flags & session_flags::ENCRYPT_DATA, 0);
}

#[test]
fn transport_security_can_be_turned_off() {
    let mut cfg = encrypt_required();
    cfg.accept_transport_security = false;
    let mut server = Server::with_transport(cfg, Transport::Quic);
    let mut client = Client::new(offer(true));
    let n = client.negotiate(&mut server);
    assert!(!n.transport_security);
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_ne!(setup.session_flags & session_flags::ENCRYPT_DATA, 0);
}

#[test]
fn quic_negotiates_3_1_1_only() {
    // MS-SMB2 2.1: SMB over QUIC is 3.1.1 only; an older-only offer has no common dialect.
    let mut server = Server::with_transport(config(), Transport::Quic);
    let mut client = Client::new(Offer::legacy(smbq_wire::Dialect::SMB3_0_2));
    let req = client.negotiate_request();
    let (frames, _) = server.exchange_engine_only(&frame(&req)).unwrap();
    let resp = client.receive(&single(frames));
    assert_eq!(resp.one().status(), NtStatus::NOT_SUPPORTED);

    // Offering everything, as Windows does, selects 3.1.1.
    let mut server = Server::with_transport(config(), Transport::Quic);
    let mut o = offer(true);
    o.dialects = vec![
        smbq_wire::Dialect::SMB2_0_2,
        smbq_wire::Dialect::SMB2_1,
        smbq_wire::Dialect::SMB3_0,
        smbq_wire::Dialect::SMB3_0_2,
        smbq_wire::Dialect::SMB3_1_1,
    ];
    let mut client = Client::new(o);
    assert_eq!(
        client.negotiate(&mut server).dialect,
        smbq_wire::Dialect::SMB3_1_1
    );

    // The same 3.0.2-only offer is fine over TCP.
    let mut server = Server::with_transport(config(), Transport::Tcp);
    let mut client = Client::new(Offer::legacy(smbq_wire::Dialect::SMB3_0_2));
    assert_eq!(
        client.negotiate(&mut server).dialect,
        smbq_wire::Dialect::SMB3_0_2
    );
}
