//! Anonymous (null) sessions and their keys, as Windows and Samba treat them (smbtorture 4.25's
//! smb2.session.anon-signing1/2 and anon-encryption1/2/3): the keys come from the null logon's
//! session key (16 zero bytes here: the test client sends no KEY_EXCH; smbq_auth's tests cover
//! the exchanged key), so they prove nothing, but a signed request is verified with them and an
//! encrypted one is opened with them once the connection is no longer constrained (MS-SMB2
//! 3.3.1.7 ConstrainedConnection: a session that is neither anonymous nor guest was set up).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::{Cipher, Signer, SigningAlgorithm};
use smbq_proto::Violation;
use smbq_proto::engine::Action;
use smbq_wire::Command;
use smbq_wire::NtStatus;
use smbq_wire::session_setup::session_flags;

fn negotiated() -> (Server, Client) {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes128Gcm],
        &[SigningAlgorithm::AesCmac],
    ));
    client.negotiate(&mut server);
    (server, client)
}

fn echo_status(server: &mut Server, client: &mut Client, msg: Vec<u8>) -> NtStatus {
    let sent = single(server.exchange_engine_only(&frame(&msg)).unwrap().0);
    client.receive(&sent).one().status()
}

#[test]
fn an_anonymous_session_verifies_signed_requests_with_the_zero_key_and_never_requires_them() {
    let (mut server, mut client) = negotiated();
    let s = client.anonymous_setup(&mut server);
    assert_eq!(s.status, NtStatus::SUCCESS);
    assert_ne!(s.session_flags & session_flags::IS_NULL, 0);
    // Nothing proves the final answer: it is not signed.
    assert!(!s.last.header.is_signed());

    // Signed with the keys of the zero key: verified and served, and the answer is signed.
    let m = client.echo(true);
    let sent = single(server.exchange_engine_only(&frame(&m)).unwrap().0);
    let r = client.receive(&sent);
    assert_eq!(r.one().status(), NtStatus::SUCCESS);
    assert!(client.verifies(r.one()));

    // Signed with another key: refused, and the connection stays (anon-signing2).
    let right = client.signer.take();
    client.signer = Some(Signer::new(SigningAlgorithm::AesCmac, &[0x1f; 16]).unwrap());
    let m = client.echo(true);
    assert_eq!(
        echo_status(&mut server, &mut client, m),
        NtStatus::ACCESS_DENIED
    );
    client.signer = right;

    // Unsigned: signing is never required of an anonymous session.
    let m = client.echo(false);
    assert_eq!(echo_status(&mut server, &mut client, m), NtStatus::SUCCESS);
}

/// An anonymous session set up on `client`'s connection, then an ECHO sealed with its keys:
/// the connection is still constrained, so the server refuses to open it.
fn anonymous_echo_sealed_ends_the_connection(server: &mut Server, client: &mut Client) {
    assert_eq!(client.anonymous_setup(server).status, NtStatus::SUCCESS);
    let m = client.echo(false);
    let sealed = client.seal(&m);
    assert!(matches!(
        server.feed(&sealed),
        Err(Violation::DecryptFailed)
    ));
}

#[test]
fn an_encrypted_message_on_a_constrained_connection_ends_it() {
    let (mut server, mut client) = negotiated();
    anonymous_echo_sealed_ends_the_connection(&mut server, &mut client);
}

#[test]
fn after_an_authenticated_session_an_anonymous_one_may_encrypt() {
    let (mut server, mut client) = negotiated();
    assert_eq!(
        client.session_setup(&mut server, USER, PASSWORD).status,
        NtStatus::SUCCESS
    );
    // A second session on the same connection, anonymous.
    client.session_id = 0;
    client.signer = None;
    let s = client.anonymous_setup(&mut server);
    assert_eq!(s.status, NtStatus::SUCCESS);
    let m = client.echo(false);
    let sealed = client.seal(&m);
    let sent = single(server.exchange_engine_only(&sealed).unwrap().0);
    let r = client.receive(&sent);
    assert!(r.encrypted, "an encrypted request is answered encrypted");
    assert_eq!(r.one().status(), NtStatus::SUCCESS);
}

#[test]
fn a_guest_session_does_not_lift_the_constraint() {
    // Guest logons (an unknown user mapped to guest) have no keys at all; they leave the
    // connection constrained, as on Samba (got_authenticated_session needs a real user).
    let mut server = Server::new(config().guest_ok(true));
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes128Gcm],
        &[SigningAlgorithm::AesCmac],
    ));
    client.negotiate(&mut server);
    let s = client.session_setup(&mut server, "nobody-known", "whatever");
    assert_eq!(s.status, NtStatus::SUCCESS);
    assert_ne!(s.session_flags & session_flags::IS_GUEST, 0);
    client.session_id = 0;
    client.signer = None;
    anonymous_echo_sealed_ends_the_connection(&mut server, &mut client);
}

/// Public keys reach no share that requires encryption: the request the engine passes up
/// says the session cannot encrypt (crate handlers refuse such a TREE_CONNECT).
#[test]
fn an_anonymous_session_does_not_count_as_one_that_can_encrypt() {
    let (mut server, mut client) = negotiated();
    assert_eq!(
        client.anonymous_setup(&mut server).status,
        NtStatus::SUCCESS
    );
    let h = client.header(Command::TREE_CONNECT, 1);
    let m = Client::message(&h, &[0u8; 8]);
    let actions = server.feed(&frame(&m)).unwrap();
    let run = actions
        .iter()
        .find_map(|a| match a {
            Action::Execute(x) => Some(x),
            _ => None,
        })
        .expect("the TREE_CONNECT is passed up");
    let view = run.request.session.as_ref().unwrap();
    assert!(view.identity.is_anonymous);
    assert!(!view.can_encrypt);
}

/// A re-authentication keeps the first one's keys, so an anonymous session may not become a
/// user's: it fails and the session goes.
#[test]
fn an_anonymous_session_cannot_reauthenticate_as_a_user() {
    let (mut server, mut client) = negotiated();
    assert_eq!(
        client.anonymous_setup(&mut server).status,
        NtStatus::SUCCESS
    );
    let s = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(s.status, NtStatus::LOGON_FAILURE);
    let m = client.echo(false);
    assert_eq!(
        echo_status(&mut server, &mut client, m),
        NtStatus::USER_SESSION_DELETED
    );
}

/// smbtorture smb2.session.reauth2: a user's session may re-authenticate as anonymous and
/// back; it keeps the user's keys all along.
#[test]
fn a_users_session_may_go_anonymous_and_back() {
    let (mut server, mut client) = negotiated();
    let s = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(s.status, NtStatus::SUCCESS);
    assert_eq!(
        client.anonymous_setup(&mut server).status,
        NtStatus::SUCCESS
    );
    let s = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(s.status, NtStatus::SUCCESS);
    let m = client.echo(true);
    assert_eq!(echo_status(&mut server, &mut client, m), NtStatus::SUCCESS);
}
