//! Session binding (MS-SMB2 3.3.5.5.2): a second connection of the same server joins a session
//! established on the first. The test client computes the channel's signing key itself
//! (binding exchange's preauth hash, MS-SMB2 3.3.5.5.3), so a final response that verifies
//! proves both sides derived the same key.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use smbq_auth::{Credentials, Initiator};
use smbq_crypto::{Cipher, Signer, SigningAlgorithm, derive_signing_key};
use smbq_proto::SessionTable;
use smbq_proto::engine::{Action, Transport};
use smbq_wire::negotiate::capabilities;
use smbq_wire::session_setup::{SessionSetupRequest, SessionSetupResponse, flags as setup_flags};
use smbq_wire::{Command, Dialect, NtStatus, Writer};

const GMAC: SigningAlgorithm = SigningAlgorithm::AesGmac;
const CMAC: SigningAlgorithm = SigningAlgorithm::AesCmac;

fn multichannel(mut offer: Offer) -> Offer {
    offer.capabilities |= capabilities::MULTI_CHANNEL;
    offer
}

/// A server's first connection with a logged-on client, and the table its next connections
/// share.
fn first(offer: Offer) -> (Server, Client, Arc<SessionTable>) {
    let table = SessionTable::new();
    let mut s1 = Server::sharing_as(config(), Transport::Tcp, table.clone(), 1);
    let mut c1 = Client::new(multichannel(offer));
    c1.connect(&mut s1);
    (s1, c1, table)
}

/// Connection `conn_id` of the same server, negotiated with `offer`.
fn second(table: &Arc<SessionTable>, conn_id: u64, offer: Offer) -> (Server, Client) {
    let mut s = Server::sharing_as(config(), Transport::Tcp, table.clone(), conn_id);
    let mut c = Client::new(multichannel(offer));
    c.rng = rand::SeedableRng::seed_from_u64(conn_id);
    c.negotiate(&mut s);
    (s, c)
}

/// What a binding exchange ended with.
struct Bound {
    status: NtStatus,
    /// Whether the last answer was signed.
    signed: bool,
    /// The channel's signing key, when the binding succeeded and its final response verified.
    channel: Option<Signer>,
    actions: Vec<Action>,
}

/// Binds `client`'s connection to `session_id`: SESSION_SETUP with SMB2_SESSION_FLAG_BINDING,
/// each leg signed with `master` (Session.SigningKey) unless `sign` is false.
fn bind(
    server: &mut Server,
    client: &mut Client,
    session_id: u64,
    master: &Signer,
    user: &str,
    password: &str,
    sign: bool,
) -> Bound {
    let neg = client.negotiated.clone().expect("negotiated");
    client.session_id = session_id;
    let creds = Credentials::with_password(user, "WORKGROUP", password, "TESTCLIENT");
    let mut init = Initiator::new(creds, &mut client.rng, NOW);
    let mut preauth = client.conn_preauth.clone();
    let mut actions = Vec::new();
    let leg = |client: &mut Client, token: &[u8]| {
        let h = client.header(Command::SESSION_SETUP, 1);
        let req = SessionSetupRequest {
            flags: setup_flags::BINDING,
            security_mode: client.offer.setup_security_mode,
            security_buffer: token,
            ..Default::default()
        };
        let mut w = Writer::new();
        h.encode(&mut w);
        req.encode(&mut w);
        let mut m = w.into_vec();
        if sign {
            let f = u32::from_le_bytes(m[16..20].try_into().unwrap()) | 0x8;
            m[16..20].copy_from_slice(&f.to_le_bytes());
            master.sign(&mut m).unwrap();
        }
        m
    };
    let m1 = leg(client, &init.first_token());
    preauth.update(&m1);
    let (frames, a) = server.exchange_engine_only(&frame(&m1)).unwrap();
    actions.extend(a);
    let r1 = client.receive(&frames[0]).one().clone();
    if r1.status() != NtStatus::MORE_PROCESSING_REQUIRED {
        return Bound {
            status: r1.status(),
            signed: r1.header.is_signed(),
            channel: None,
            actions,
        };
    }
    assert!(
        r1.header.is_signed() && master.verify(&r1.bytes),
        "a binding's intermediate leg is signed with the session's key"
    );
    preauth.update(&r1.bytes);
    let challenge = SessionSetupResponse::decode(&r1.bytes).unwrap();
    let (t3, session_key) = init.step(challenge.security_buffer).unwrap();
    let m2 = leg(client, &t3);
    preauth.update(&m2);
    let (frames, a) = server.exchange_engine_only(&frame(&m2)).unwrap();
    actions.extend(a);
    let r2 = client.receive(&frames[0]).one().clone();
    if r2.status() != NtStatus::SUCCESS {
        return Bound {
            status: r2.status(),
            signed: r2.header.is_signed(),
            channel: None,
            actions,
        };
    }
    let hash = (neg.dialect == Dialect::SMB3_1_1).then_some(preauth.value());
    let key = derive_signing_key(neg.dialect.0, &session_key[..], hash).unwrap();
    let channel = Signer::new(neg.signing, &key[..]).unwrap();
    assert!(
        r2.header.is_signed() && channel.verify(&r2.bytes),
        "the final response is signed with the channel's own key"
    );
    assert!(
        !master.verify(&r2.bytes),
        "the channel key differs from the session's"
    );
    Bound {
        status: r2.status(),
        signed: true,
        channel: Some(channel),
        actions,
    }
}

/// An ECHO naming the session, signed with `key`: the engine checks the signature against
/// this connection's key for the session (MS-SMB2 3.3.5.2.4) before answering.
fn echo_status(server: &mut Server, client: &mut Client, key: &Signer) -> NtStatus {
    let h = client.header(Command::ECHO, 1);
    let mut m = Client::message(&h, &[4, 0, 0, 0]);
    let f = u32::from_le_bytes(m[16..20].try_into().unwrap()) | 0x8;
    m[16..20].copy_from_slice(&f.to_le_bytes());
    key.sign(&mut m).unwrap();
    let (frames, _) = server.exchange_engine_only(&frame(&m)).unwrap();
    client.receive(&frames[0]).one().status()
}

#[test]
fn a_second_connection_binds_and_signs_with_its_own_key() {
    let offer = Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC]);
    let (mut s1, c1, table) = first(offer.clone());
    let master = c1.signer.clone().unwrap();
    let (mut s2, mut c2) = second(&table, 2, offer);
    assert_ne!(
        c2.negotiated.as_ref().unwrap().capabilities & capabilities::MULTI_CHANNEL,
        0,
        "multichannel is offered over TCP to a client that asks"
    );
    let b = bind(
        &mut s2,
        &mut c2,
        c1.session_id,
        &master,
        USER,
        PASSWORD,
        true,
    );
    assert_eq!(b.status, NtStatus::SUCCESS);
    assert!(b.actions.iter().any(
        |a| matches!(a, Action::SessionStarted { session_id, bound: true, .. } if *session_id == c1.session_id)
    ));
    let rec = table.get(c1.session_id).unwrap();
    assert_eq!(rec.channels(), vec![1, 2]);
    let channel = b.channel.unwrap();
    // A request on the new channel passes with the channel's key, not the session's.
    assert_eq!(echo_status(&mut s2, &mut c2, &channel), NtStatus::SUCCESS);
    assert_eq!(
        echo_status(&mut s2, &mut c2, &master),
        NtStatus::ACCESS_DENIED
    );
    // A TREE_CONNECT on the channel reaches the server as the session's user.
    let h = c2.header(Command::TREE_CONNECT, 1);
    let mut m = Client::message(&h, &[9, 0, 0, 0, 0, 0, 0, 0, 0]);
    let f = u32::from_le_bytes(m[16..20].try_into().unwrap()) | 0x8;
    m[16..20].copy_from_slice(&f.to_le_bytes());
    channel.sign(&mut m).unwrap();
    let actions = s2.feed(&frame(&m)).unwrap();
    let run = executes(&actions);
    assert_eq!(run.len(), 1);
    let view = run[0]
        .session
        .as_ref()
        .expect("the channel carries the session");
    assert_eq!(view.identity.user, USER);
    // The first connection goes on with the session's key.
    let mut c1 = c1;
    assert_eq!(echo_status(&mut s1, &mut c1, &master), NtStatus::SUCCESS);
    // Binding the same connection again is refused (answered with the channel's key).
    let again = bind(
        &mut s2,
        &mut c2,
        c1.session_id,
        &channel,
        USER,
        PASSWORD,
        true,
    );
    assert_eq!(again.status, NtStatus::REQUEST_NOT_ACCEPTED);
}

#[test]
fn binding_refusals_follow_windows_order() {
    let gmac = Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC]);
    let cmac = Offer::smb311(&[Cipher::Aes128Gcm], &[CMAC]);
    let (_s1, c1, table) = first(gmac.clone());
    let master = c1.signer.clone().unwrap();
    let id = c1.session_id;
    let try_bind = |conn: u64, offer: Offer, sign: bool, user: &str, pw: &str| {
        let (mut s, mut c) = second(&table, conn, offer);
        bind(&mut s, &mut c, id, &master, user, pw, sign).status
    };
    // A GMAC session takes no channel with another algorithm; an algorithm check comes
    // before the dialect check (smbtorture bind_negative_smb3signGtoH2X).
    assert_eq!(
        try_bind(2, cmac.clone(), true, USER, PASSWORD),
        NtStatus::REQUEST_OUT_OF_SEQUENCE
    );
    assert_eq!(
        try_bind(3, Offer::legacy(Dialect::SMB2_1), true, USER, PASSWORD),
        NtStatus::REQUEST_OUT_OF_SEQUENCE
    );
    // Unsigned: refused before any authentication.
    assert_eq!(
        try_bind(4, gmac.clone(), false, USER, PASSWORD),
        NtStatus::INVALID_PARAMETER
    );
    // Another cipher than the session's connection: refused.
    assert_eq!(
        try_bind(
            5,
            Offer::smb311(&[Cipher::Aes128Ccm], &[GMAC]),
            true,
            USER,
            PASSWORD
        ),
        NtStatus::INVALID_PARAMETER
    );
    let rec = table.get(id).expect("a failed binding leaves the session");
    assert!(!rec.has_ended());
    assert_eq!(rec.channels(), vec![1]);
    // Another user, or a wrong password: refused, and the session goes on untouched. Each on
    // a session of its own: under AES-GMAC a session answers one binding's challenge only.
    for (user, password) in [("bob", "builder"), (USER, "wrong")] {
        let (_s, c, table) = first(gmac.clone());
        let (mut s2, mut c2) = second(&table, 2, gmac.clone());
        let master = c.signer.clone().unwrap();
        let b = bind(
            &mut s2,
            &mut c2,
            c.session_id,
            &master,
            user,
            password,
            true,
        );
        assert_eq!(b.status, NtStatus::LOGON_FAILURE);
        let rec = table.get(c.session_id).unwrap();
        assert!(!rec.has_ended());
        assert_eq!(rec.channels(), vec![1]);
    }
    // An unknown session.
    let (mut s, mut c) = second(&table, 8, gmac.clone());
    assert_eq!(
        bind(&mut s, &mut c, id + 99, &master, USER, PASSWORD, true).status,
        NtStatus::USER_SESSION_DELETED
    );

    // A CMAC session: a GMAC channel is NOT_SUPPORTED, a 2.1 one REQUEST_NOT_ACCEPTED, a
    // 3.0.2 one INVALID_PARAMETER (dialect), an HMAC-free CMAC one binds.
    let (_s1, c1, table) = first(cmac.clone());
    let master = c1.signer.clone().unwrap();
    let try_bind = |conn: u64, offer: Offer| {
        let (mut s, mut c) = second(&table, conn, offer);
        bind(&mut s, &mut c, c1.session_id, &master, USER, PASSWORD, true).status
    };
    assert_eq!(try_bind(2, gmac.clone()), NtStatus::NOT_SUPPORTED);
    assert_eq!(
        try_bind(3, Offer::legacy(Dialect::SMB2_1)),
        NtStatus::REQUEST_NOT_ACCEPTED
    );
    assert_eq!(
        try_bind(4, Offer::legacy(Dialect::SMB3_0_2)),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(try_bind(5, cmac), NtStatus::SUCCESS);
}

#[test]
fn another_users_credentials_cannot_bind() {
    let offer = Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC]);
    let (_s1, c1, table) = first(offer.clone());
    let master = c1.signer.clone().unwrap();
    let (mut s2, mut c2) = second(&table, 2, offer);
    // A valid account, but not the session's user.
    let b = bind(
        &mut s2,
        &mut c2,
        c1.session_id,
        &master,
        OTHER_USER,
        PASSWORD,
        true,
    );
    assert_eq!(b.status, NtStatus::ACCESS_DENIED);
    assert_eq!(table.get(c1.session_id).unwrap().channels(), vec![1]);
}

#[test]
fn multichannel_off_refuses_binding_and_is_not_offered() {
    let offer = Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC]);
    let (_s1, c1, table) = first(offer.clone());
    let master = c1.signer.clone().unwrap();
    let mut cfg = config();
    cfg.multichannel_tcp = false;
    let mut s2 = Server::sharing_as(cfg, Transport::Tcp, table.clone(), 2);
    let mut c2 = Client::new(multichannel(offer));
    let neg = c2.negotiate(&mut s2);
    assert_eq!(neg.capabilities & capabilities::MULTI_CHANNEL, 0);
    let b = bind(
        &mut s2,
        &mut c2,
        c1.session_id,
        &master,
        USER,
        PASSWORD,
        true,
    );
    assert_eq!(b.status, NtStatus::REQUEST_NOT_ACCEPTED);
}

#[test]
fn a_session_takes_at_most_32_channels() {
    let offer = Offer::smb311(&[Cipher::Aes128Gcm], &[CMAC]);
    let (_s1, c1, table) = first(offer.clone());
    let master = c1.signer.clone().unwrap();
    let mut kept = Vec::new();
    for conn in 2..=32 {
        let (mut s, mut c) = second(&table, conn, offer.clone());
        let b = bind(&mut s, &mut c, c1.session_id, &master, USER, PASSWORD, true);
        assert_eq!(b.status, NtStatus::SUCCESS, "channel {conn}");
        kept.push(s);
    }
    let (mut s, mut c) = second(&table, 33, offer);
    let b = bind(&mut s, &mut c, c1.session_id, &master, USER, PASSWORD, true);
    assert_eq!(b.status, NtStatus::INSUFFICIENT_RESOURCES);
    assert_eq!(table.get(c1.session_id).unwrap().channel_count(), 32);
}

/// A hostile client that starts bindings and never finishes them holds no more than its
/// connection's session slots: a half-bound channel counts as a session of the connection.
#[test]
fn unfinished_bindings_count_against_the_connections_sessions() {
    let offer = Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC]);
    let (_s1, c1, table) = first(offer.clone());
    // A second session of the same server, on its own connection.
    let mut s3 = Server::sharing_as(config(), Transport::Tcp, table.clone(), 3);
    let mut c3 = Client::new(multichannel(offer.clone()));
    c3.rng = rand::SeedableRng::seed_from_u64(3);
    c3.connect(&mut s3);
    let mut cfg = config();
    cfg.limits.max_sessions_per_connection = 1;
    let mut s2 = Server::sharing_as(cfg, Transport::Tcp, table.clone(), 2);
    let mut c2 = Client::new(multichannel(offer));
    c2.negotiate(&mut s2);
    // The first leg of a binding to session 1, left unfinished: it holds the one slot.
    let master1 = c1.signer.clone().unwrap();
    let mut h = c2.header(Command::SESSION_SETUP, 1);
    let token = Initiator::new(
        Credentials::with_password(USER, "WORKGROUP", PASSWORD, "TESTCLIENT"),
        &mut c2.rng,
        NOW,
    )
    .first_token();
    h.session_id = c1.session_id;
    let mut w = Writer::new();
    h.encode(&mut w);
    SessionSetupRequest {
        flags: setup_flags::BINDING,
        security_buffer: &token,
        ..Default::default()
    }
    .encode(&mut w);
    let mut m = w.into_vec();
    let f = u32::from_le_bytes(m[16..20].try_into().unwrap()) | 0x8;
    m[16..20].copy_from_slice(&f.to_le_bytes());
    master1.sign(&mut m).unwrap();
    let (frames, _) = s2.exchange_engine_only(&frame(&m)).unwrap();
    assert_eq!(
        c2.receive(&frames[0]).one().status(),
        NtStatus::MORE_PROCESSING_REQUIRED
    );
    // A binding to session 3 on the same connection finds no slot.
    let master3 = c3.signer.clone().unwrap();
    let b = bind(
        &mut s2,
        &mut c2,
        c3.session_id,
        &master3,
        USER,
        PASSWORD,
        true,
    );
    assert_eq!(b.status, NtStatus::INSUFFICIENT_RESOURCES);
    assert_eq!(table.get(c3.session_id).unwrap().channels(), vec![3]);
}

/// Issue 42: every binding connection starts at MessageId 1, and a binding's MORE_PROCESSING
/// answer is signed with the session's key (MS-SMB2 3.3.4.1.1). Under AES-GMAC the nonce is
/// MessageId and role (3.1.4.1): a second NTLM binding's challenge would be a second message
/// under the first one's nonce, so it is not sent. The binding is refused unsigned and the
/// session keeps the channels it has. AES-CMAC has no nonce: there the session binds again.
#[test]
fn a_gmac_session_answers_one_bindings_challenge_only() {
    let gmac = Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC]);
    let (_s1, c1, table) = first(gmac.clone());
    let master = c1.signer.clone().unwrap();
    let (mut s2, mut c2) = second(&table, 2, gmac.clone());
    let b = bind(
        &mut s2,
        &mut c2,
        c1.session_id,
        &master,
        USER,
        PASSWORD,
        true,
    );
    assert_eq!(b.status, NtStatus::SUCCESS);
    let channel = b.channel.unwrap();
    let (mut s3, mut c3) = second(&table, 3, gmac);
    // Another challenge than the first binding's (the test servers share one seed).
    s3.rng = rand::SeedableRng::seed_from_u64(3);
    let b = bind(
        &mut s3,
        &mut c3,
        c1.session_id,
        &master,
        USER,
        PASSWORD,
        true,
    );
    assert_eq!(b.status, NtStatus::INSUFFICIENT_RESOURCES);
    assert!(
        !b.signed,
        "no nonce of the session's key is left to sign the refusal"
    );
    assert_eq!(table.get(c1.session_id).unwrap().channels(), vec![1, 2]);
    // The channel bound first goes on with its own key.
    assert_eq!(echo_status(&mut s2, &mut c2, &channel), NtStatus::SUCCESS);

    let cmac = Offer::smb311(&[Cipher::Aes128Gcm], &[CMAC]);
    let (_s1, c1, table) = first(cmac.clone());
    let master = c1.signer.clone().unwrap();
    for conn in 2..=3 {
        let (mut s, mut c) = second(&table, conn, cmac.clone());
        let b = bind(&mut s, &mut c, c1.session_id, &master, USER, PASSWORD, true);
        assert_eq!(b.status, NtStatus::SUCCESS, "channel {conn}");
    }
}

/// Issue 42: where multichannel is offered, a session may be bound, so AES-CMAC goes before
/// AES-GMAC among the algorithms the client offers (MS-SMB2 3.3.5.4); elsewhere the client's
/// first choice stands.
#[test]
fn where_sessions_may_bind_cmac_goes_before_gmac() {
    let both = Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC, CMAC]);
    let negotiated = |cfg: smbq_proto::EngineConfig, offer: Offer| {
        let mut s = Server::sharing_as(cfg, Transport::Tcp, SessionTable::new(), 1);
        Client::new(offer).negotiate(&mut s).signing
    };
    assert_eq!(negotiated(config(), multichannel(both.clone())), CMAC);
    // A client that does not ask for multichannel binds nothing.
    assert_eq!(negotiated(config(), both.clone()), GMAC);
    let mut off = config();
    off.multichannel_tcp = false;
    assert_eq!(negotiated(off, multichannel(both)), GMAC);
    // GMAC alone is taken; HMAC-SHA256 first stays first.
    let gmac = multichannel(Offer::smb311(&[Cipher::Aes128Gcm], &[GMAC]));
    assert_eq!(negotiated(config(), gmac), GMAC);
    let hmac_first = Offer::smb311(
        &[Cipher::Aes128Gcm],
        &[SigningAlgorithm::HmacSha256, GMAC, CMAC],
    );
    assert_eq!(
        negotiated(config(), multichannel(hmac_first)),
        SigningAlgorithm::HmacSha256
    );
}
