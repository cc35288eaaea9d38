//! NEGOTIATE, SESSION_SETUP, signing and encryption end to end between the test client and the
//! engine: the client derives its own keys, so every verified signature and every opened
//! ciphertext proves the preauth hash, the KDF and the negotiated algorithms agree.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_proto::engine::Action;
use smbq_wire::negotiate::capabilities;
use smbq_wire::session_setup::session_flags;
use smbq_wire::{Command, Dialect, NtStatus};

const ALL_CIPHERS: [Cipher; 4] = [
    Cipher::Aes128Ccm,
    Cipher::Aes128Gcm,
    Cipher::Aes256Ccm,
    Cipher::Aes256Gcm,
];
const ALL_SIGNING: [SigningAlgorithm; 3] = [
    SigningAlgorithm::HmacSha256,
    SigningAlgorithm::AesCmac,
    SigningAlgorithm::AesGmac,
];

/// Logs in, then checks the final SESSION_SETUP signature, a signed ECHO and (when a cipher was
/// negotiated) an encrypted ECHO.
fn login_and_echo(server: &mut Server, client: &mut Client) {
    let setup = client.session_setup(server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    let dialect = client.dialect();
    // MS-SMB2 3.3.5.5.3: the final response is signed with the new session's key.
    assert!(
        client.verifies(&setup.last),
        "{dialect:?}: final SESSION_SETUP response must verify with the client-derived key"
    );
    assert_eq!(setup.session_flags & session_flags::ENCRYPT_DATA, 0);
    assert!(setup.actions.iter().any(|a| matches!(
        a,
        Action::SessionStarted { session_id, user, .. }
            if *session_id == client.session_id && user.eq_ignore_ascii_case(USER)
    )));

    // Signed ECHO: the engine verifies it and signs its answer.
    let echo = client.echo(true);
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&echo)).unwrap().0,
    ));
    assert!(!resp.encrypted);
    let m = resp.one();
    assert_eq!(m.status(), NtStatus::SUCCESS);
    assert_eq!(m.header.command, Command::ECHO);
    assert_eq!(m.body(), &[4, 0, 0, 0]);
    assert!(client.verifies(m), "{dialect:?}: signed ECHO response");

    // A signature made with the wrong key is refused (and nothing is signed back).
    let mut bad = client.echo(true);
    bad[60] ^= 1;
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&bad)).unwrap().0,
    ));
    assert_eq!(resp.one().status(), NtStatus::ACCESS_DENIED);

    if client.negotiated.as_ref().unwrap().cipher.is_none() {
        assert!(client.encryptor.is_none());
        return;
    }
    // Encrypted ECHO: sealed by the client, opened by the engine; the response comes back
    // sealed and opens with the client's decryption key (Client::receive asserts that).
    let echo = client.echo(false);
    let sealed = client.seal(&echo);
    let resp = client.receive(&single(server.exchange_engine_only(&sealed).unwrap().0));
    assert!(
        resp.encrypted,
        "{dialect:?}: response to an encrypted request"
    );
    let m = resp.one();
    assert_eq!(m.status(), NtStatus::SUCCESS);
    assert_eq!(m.header.command, Command::ECHO);
    assert!(!m.header.is_signed(), "encrypted messages are not signed");
    assert_eq!(m.header.signature, [0; 16]);
}

#[test]
fn smb311_every_cipher() {
    for cipher in ALL_CIPHERS {
        let mut server = Server::new(config());
        let mut client = Client::new(Offer::smb311(&[cipher], &[SigningAlgorithm::AesGmac]));
        let n = client.negotiate(&mut server);
        assert_eq!(n.dialect, Dialect::SMB3_1_1);
        assert_eq!(n.cipher, Some(cipher));
        assert_eq!(n.signing, SigningAlgorithm::AesGmac);
        assert_eq!(n.salt_len, 32, "preauth context salt");
        assert_eq!(
            n.contexts_seen, 3,
            "preauth, encryption and signing contexts"
        );
        login_and_echo(&mut server, &mut client);
    }
}

#[test]
fn smb311_every_signing_algorithm() {
    for signing in ALL_SIGNING {
        let mut server = Server::new(config());
        let mut client = Client::new(Offer::smb311(&[Cipher::Aes128Gcm], &[signing]));
        let n = client.negotiate(&mut server);
        assert_eq!(n.dialect, Dialect::SMB3_1_1);
        assert_eq!(n.cipher, Some(Cipher::Aes128Gcm));
        assert_eq!(n.signing, signing);
        login_and_echo(&mut server, &mut client);
    }
}

#[test]
fn smb311_client_order_picks_among_offers() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes256Ccm, Cipher::Aes128Gcm],
        &[SigningAlgorithm::AesCmac, SigningAlgorithm::AesGmac],
    ));
    let n = client.negotiate(&mut server);
    assert_eq!(n.cipher, Some(Cipher::Aes256Ccm));
    assert_eq!(n.signing, SigningAlgorithm::AesCmac);
    login_and_echo(&mut server, &mut client);
}

#[test]
fn smb311_without_optional_contexts_defaults_to_cmac_and_no_cipher() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    let n = client.negotiate(&mut server);
    assert_eq!(n.dialect, Dialect::SMB3_1_1);
    assert_eq!(n.cipher, None);
    assert_eq!(n.signing, SigningAlgorithm::AesCmac);
    assert_eq!(n.contexts_seen, 1, "only the preauth context is answered");
    login_and_echo(&mut server, &mut client);
}

#[test]
fn smb311_picks_highest_common_dialect() {
    let mut server = Server::new(config());
    let mut offer = Offer::smb311(&[Cipher::Aes128Gcm], &[SigningAlgorithm::AesGmac]);
    offer.dialects = vec![
        Dialect::SMB2_0_2,
        Dialect::SMB3_1_1,
        Dialect::SMB2_1,
        Dialect::SMB3_0,
    ];
    let mut client = Client::new(offer);
    assert_eq!(client.negotiate(&mut server).dialect, Dialect::SMB3_1_1);
    login_and_echo(&mut server, &mut client);
}

#[test]
fn smb30_encrypts_with_ccm_through_the_capability() {
    for dialect in [Dialect::SMB3_0, Dialect::SMB3_0_2] {
        let mut server = Server::new(config());
        let mut client = Client::new(Offer::legacy(dialect));
        let n = client.negotiate(&mut server);
        assert_eq!(n.dialect, dialect);
        assert_ne!(n.capabilities & capabilities::ENCRYPTION, 0);
        assert_eq!(n.cipher, Some(Cipher::Aes128Ccm));
        assert_eq!(n.signing, SigningAlgorithm::AesCmac);
        login_and_echo(&mut server, &mut client);
    }
}

#[test]
fn smb30_without_encryption_capability_gets_no_cipher() {
    let mut server = Server::new(config());
    let mut offer = Offer::legacy(Dialect::SMB3_0_2);
    offer.capabilities &= !capabilities::ENCRYPTION;
    let mut client = Client::new(offer);
    let n = client.negotiate(&mut server);
    assert_eq!(n.capabilities & capabilities::ENCRYPTION, 0);
    assert_eq!(n.cipher, None);
    login_and_echo(&mut server, &mut client);
}

#[test]
fn smb2x_signs_with_hmac_sha256_and_never_encrypts() {
    for dialect in [Dialect::SMB2_1, Dialect::SMB2_0_2] {
        let mut server = Server::new(config());
        let mut client = Client::new(Offer::legacy(dialect));
        let n = client.negotiate(&mut server);
        assert_eq!(n.dialect, dialect);
        assert_eq!(n.capabilities & capabilities::ENCRYPTION, 0);
        assert_eq!(n.signing, SigningAlgorithm::HmacSha256);
        login_and_echo(&mut server, &mut client);
    }
}

/// MS-SMB2 3.3.5.5.3: a failed logon gets STATUS_LOGON_FAILURE, is reported, and its session
/// is gone.
#[test]
fn wrong_password_fails_and_session_is_deleted() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes128Gcm],
        &[SigningAlgorithm::AesGmac],
    ));
    client.negotiate(&mut server);
    let setup = client.session_setup(&mut server, USER, "wrong password");
    assert_eq!(setup.status, NtStatus::LOGON_FAILURE);
    assert_eq!(setup.last.header.command, Command::SESSION_SETUP);
    assert!(
        setup.actions.iter().any(
            |a| matches!(a, Action::AuthFailed { user, .. } if user.eq_ignore_ascii_case(USER))
        ),
        "AuthFailed expected, got {:?}",
        setup.actions
    );
    assert!(
        !setup
            .actions
            .iter()
            .any(|a| matches!(a, Action::SessionStarted { .. }))
    );
    assert_ne!(client.session_id, 0);
    assert!(server.engine.session_ids().is_empty());

    // Any later request on that session id: USER_SESSION_DELETED.
    let h = client.header(Command::TREE_CONNECT, 1);
    let tc = Client::message(&h, &[9, 0, 0, 0, 0x48, 0, 0, 0, 0]);
    let resp = client.receive(&single(server.exchange_engine_only(&frame(&tc)).unwrap().0));
    assert_eq!(resp.one().status(), NtStatus::USER_SESSION_DELETED);
    let echo = client.echo(false);
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&echo)).unwrap().0,
    ));
    assert_eq!(resp.one().status(), NtStatus::USER_SESSION_DELETED);
    // Continuing the SESSION_SETUP on the dead id is refused too.
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::USER_SESSION_DELETED);

    // A fresh logon on the same connection still works.
    client.session_id = 0;
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert!(client.verifies(&setup.last));
}

#[test]
fn unknown_user_fails_without_guest() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.negotiate(&mut server);
    let setup = client.session_setup(&mut server, "mallory", PASSWORD);
    assert_eq!(setup.status, NtStatus::LOGON_FAILURE);
    assert!(
        setup
            .actions
            .iter()
            .any(|a| matches!(a, Action::AuthFailed { .. }))
    );
}

/// MS-SMB2 3.3.5.2.9 / 3.3.5.5.3 with RejectUnencryptedAccess: the session is marked
/// EncryptData, plain requests are refused, and clients that cannot encrypt cannot log on.
#[test]
fn encryption_required_refuses_plain_requests() {
    let mut server = Server::new(config().encrypt(true, false));
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes256Gcm],
        &[SigningAlgorithm::AesGmac],
    ));
    client.negotiate(&mut server);
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert!(client.verifies(&setup.last));
    assert_ne!(setup.session_flags & session_flags::ENCRYPT_DATA, 0);

    // Plain, even signed: ACCESS_DENIED (the answer may itself be sealed, MS-SMB2 3.3.4.1.4).
    for signed in [false, true] {
        let echo = client.echo(signed);
        let resp = client.receive(&single(
            server.exchange_engine_only(&frame(&echo)).unwrap().0,
        ));
        assert_eq!(
            resp.one().status(),
            NtStatus::ACCESS_DENIED,
            "signed={signed}"
        );
    }
    let h = client.header(Command::TREE_CONNECT, 1);
    let tc = Client::message(&h, &[9, 0, 0, 0, 0x48, 0, 0, 0, 0]);
    let resp = client.receive(&single(server.exchange_engine_only(&frame(&tc)).unwrap().0));
    assert_eq!(resp.one().status(), NtStatus::ACCESS_DENIED);

    // Sealed: accepted and passed up, and the answer is sealed.
    let h = client.header(Command::TREE_CONNECT, 1);
    let tc = Client::message(&h, &[9, 0, 0, 0, 0x48, 0, 0, 0, 0]);
    let sealed = client.seal(&tc);
    let mut seen = None;
    let (frames, _) = server
        .exchange(&sealed, &mut |r| {
            seen = Some((r.encrypted, r.session.as_ref().map(|s| s.encrypt_data)));
            smbq_proto::Response::error(NtStatus::BAD_NETWORK_NAME)
        })
        .unwrap();
    assert_eq!(seen, Some((true, Some(true))));
    let resp = client.receive(&single(frames));
    assert!(resp.encrypted);
    assert_eq!(resp.one().status(), NtStatus::BAD_NETWORK_NAME);
}

#[test]
fn encryption_required_refuses_clients_that_cannot_encrypt() {
    // 2.1 has no encryption at all; a 3.1.1 client offering no cipher cannot encrypt either.
    let offers = [
        Offer::legacy(Dialect::SMB2_1),
        Offer::smb311(&[], &[SigningAlgorithm::AesCmac]),
    ];
    for offer in offers {
        let mut server = Server::new(config().encrypt(true, false));
        let mut client = Client::new(offer.clone());
        client.negotiate(&mut server);
        let setup = client.session_setup(&mut server, USER, PASSWORD);
        assert_eq!(
            setup.status,
            NtStatus::ACCESS_DENIED,
            "{:?}",
            offer.dialects
        );
        assert!(server.engine.session_ids().is_empty());
        assert!(
            !setup
                .actions
                .iter()
                .any(|a| matches!(a, Action::SessionStarted { .. }))
        );
    }
}

#[test]
fn encryption_desired_marks_capable_sessions_only() {
    let mut server = Server::new(config().encrypt(false, true));
    let mut client = Client::new(Offer::smb311(&[Cipher::Aes128Ccm], &[]));
    client.negotiate(&mut server);
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert_ne!(setup.session_flags & session_flags::ENCRYPT_DATA, 0);

    let mut server = Server::new(config().encrypt(false, true));
    let mut client = Client::new(Offer::legacy(Dialect::SMB2_1));
    client.negotiate(&mut server);
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert_eq!(setup.session_flags & session_flags::ENCRYPT_DATA, 0);
    let echo = client.echo(true);
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&echo)).unwrap().0,
    ));
    assert_eq!(resp.one().status(), NtStatus::SUCCESS);
}

/// MS-SMB2 3.3.5.5.2: re-authentication on a valid session keeps its keys.
#[test]
fn reauthentication_keeps_the_session_keys() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes128Gcm],
        &[SigningAlgorithm::AesCmac],
    ));
    client.connect(&mut server);
    let sid = client.session_id;
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert_eq!(setup.last.header.session_id, sid);
    assert!(client.verifies(&setup.last), "signed with the existing key");
    let echo = client.echo(true);
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&echo)).unwrap().0,
    ));
    assert!(client.verifies(resp.one()));
}

/// MS-SMB2 3.3.5.5.3: "If the authentication protocol indicates an error, the server MUST
/// fail the session setup request ... The server MUST remove the session object from
/// GlobalSessionTable and Connection.SessionTable" - with no exception for re-authentication.
#[test]
fn failed_reauthentication_removes_the_session() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[SigningAlgorithm::AesCmac]));
    client.connect(&mut server);
    let sid = client.session_id;
    let setup = client.session_setup(&mut server, USER, "wrong");
    assert_eq!(setup.status, NtStatus::LOGON_FAILURE);
    assert!(
        setup
            .actions
            .iter()
            .any(|a| matches!(a, Action::SessionEnded { session_id } if *session_id == sid)),
        "the server must be told to tear the session down: {:?}",
        setup.actions
    );
    let echo = client.echo(true);
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&echo)).unwrap().0,
    ));
    assert_eq!(resp.one().status(), NtStatus::USER_SESSION_DELETED);
}

/// A re-authentication leg whose signature does not verify is refused.
#[test]
fn badly_signed_reauthentication_is_refused() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[SigningAlgorithm::AesGmac]));
    client.connect(&mut server);
    let h = client.header(Command::SESSION_SETUP, 1);
    let mut w = smbq_wire::Writer::new();
    h.encode(&mut w);
    smbq_wire::session_setup::SessionSetupRequest {
        security_mode: 1,
        security_buffer: b"junk",
        ..Default::default()
    }
    .encode(&mut w);
    let mut m = w.into_vec();
    client.sign(&mut m);
    m[49] ^= 1;
    let resp = client.receive(&single(server.exchange_engine_only(&frame(&m)).unwrap().0));
    assert_eq!(resp.one().status(), NtStatus::ACCESS_DENIED);
}

/// RequireMessageSigning: advertised in NEGOTIATE, and unsigned requests are refused.
#[test]
fn require_signing_refuses_unsigned_requests() {
    let mut server = Server::new(config().require_signing(true));
    let mut client = Client::new(Offer::smb311(&[], &[SigningAlgorithm::AesCmac]));
    let n = client.negotiate(&mut server);
    assert_ne!(
        n.security_mode & smbq_wire::negotiate::security_mode::SIGNING_REQUIRED,
        0
    );
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    let tree_connect = |client: &mut Client, signed: bool| {
        let h = client.header(Command::TREE_CONNECT, 1);
        let mut m = Client::message(&h, &[9, 0, 0, 0, 0x48, 0, 0, 0, 0]);
        if signed {
            client.sign(&mut m);
        }
        m
    };
    let m = tree_connect(&mut client, false);
    let resp = client.receive(&single(server.exchange_engine_only(&frame(&m)).unwrap().0));
    assert_eq!(resp.one().status(), NtStatus::ACCESS_DENIED);
    let m = tree_connect(&mut client, true);
    let (frames, _) = server
        .exchange(&frame(&m), &mut |_| {
            smbq_proto::Response::error(NtStatus::BAD_NETWORK_NAME)
        })
        .unwrap();
    let resp = client.receive(&single(frames));
    assert_eq!(resp.one().status(), NtStatus::BAD_NETWORK_NAME);
    assert!(
        client.verifies(resp.one()),
        "responses on a signing-required session are signed"
    );
}

/// MS-SMB2 3.3.5.5 step 1: with EncryptData and RejectUnencryptedAccess, a SESSION_SETUP on a
/// connection whose dialect is not 3.x fails at once with ACCESS_DENIED (before any
/// authentication work, so a 2.x client cannot even probe passwords).
#[test]
fn encryption_required_refuses_2x_at_the_first_leg() {
    let mut server = Server::new(config().encrypt(true, false));
    let mut client = Client::new(Offer::legacy(Dialect::SMB2_1));
    client.negotiate(&mut server);
    let setup = client.session_setup(&mut server, USER, "any password");
    assert_eq!(setup.status, NtStatus::ACCESS_DENIED);
    assert!(
        !setup
            .actions
            .iter()
            .any(|a| matches!(a, Action::AuthFailed { .. }))
    );
}
