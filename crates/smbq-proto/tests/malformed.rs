//! Hostile and malformed input: every case ends in a `Violation` or an error status, never a
//! panic; then random mutations of a valid exchange.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_proto::engine::Action;
use smbq_proto::{Limits, Response, Violation};
use smbq_wire::header::flags;
use smbq_wire::{Command, NtStatus};

#[test]
fn frame_larger_than_the_preauth_limit() {
    let mut server = Server::new(config());
    let limit = Limits::default().preauth_frame;
    let len = limit + 1;
    let hdr = [0, (len >> 16) as u8, (len >> 8) as u8, len as u8];
    // Refused from the 4-byte header alone, before any of the body arrives.
    assert_eq!(
        server.feed(&hdr).unwrap_err(),
        Violation::FrameTooLarge { len, limit }
    );
}

#[test]
fn frame_limit_grows_only_after_authentication() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.negotiate(&mut server);
    assert_eq!(server.engine.frame_limit(), Limits::default().preauth_frame);
    client.session_setup(&mut server, USER, "wrong");
    assert_eq!(
        server.engine.frame_limit(),
        Limits::default().preauth_frame,
        "a failed logon does not lift the limit"
    );
    client.session_id = 0;
    client.session_setup(&mut server, USER, PASSWORD);
    assert!(server.engine.frame_limit() > Limits::default().frame);
}

#[test]
fn zero_length_frame() {
    let mut server = Server::new(config());
    assert_eq!(
        server.feed(&[0, 0, 0, 0]).unwrap_err(),
        Violation::EmptyFrame
    );
}

#[test]
fn bad_frame_header_byte() {
    let mut server = Server::new(config());
    assert_eq!(
        server.feed(&[0x85, 0, 0, 4, 1, 2, 3, 4]).unwrap_err(),
        Violation::BadFrameHeader
    );
}

#[test]
fn garbage_protocol_ids() {
    for id in [*b"\xFESMX", *b"GET ", [0; 4]] {
        let mut server = Server::new(config());
        let mut msg = id.to_vec();
        msg.resize(64, 0);
        assert_eq!(
            server.feed(&frame(&msg)).unwrap_err(),
            Violation::BadProtocol,
            "{id:?}"
        );
    }
    let mut server = Server::new(config());
    assert_eq!(
        server.feed(&frame(b"\xFES")).unwrap_err(),
        Violation::BadProtocol
    );
    // A compression transform before NEGOTIATE (tests/compression.rs has the rest).
    let mut server = Server::new(config());
    let mut msg = b"\xFCSMB".to_vec();
    msg.resize(64, 0);
    assert_eq!(
        server.feed(&frame(&msg)).unwrap_err(),
        Violation::Compression(smbq_compress::DecompressError::NotNegotiated)
    );
}

#[test]
fn truncated_header() {
    let mut client = Client::new(Offer::smb311(&[], &[]));
    let req = client.negotiate_request();
    for cut in [4, 20, 63] {
        let mut server = Server::new(config());
        assert!(
            matches!(
                server.feed(&frame(&req[..cut])).unwrap_err(),
                Violation::Malformed { .. }
            ),
            "cut at {cut}"
        );
    }
    // A whole header but a truncated NEGOTIATE body.
    let mut server = Server::new(config());
    assert!(matches!(
        server.feed(&frame(&req[..70])).unwrap_err(),
        Violation::Malformed { .. }
    ));
}

#[test]
fn negotiate_twice() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.negotiate(&mut server);
    let again = client.negotiate_request();
    assert_eq!(
        server.feed(&frame(&again)).unwrap_err(),
        Violation::Renegotiate
    );
}

#[test]
fn requests_before_negotiate() {
    for cmd in [
        Command::SESSION_SETUP,
        Command::ECHO,
        Command::TREE_CONNECT,
        Command::CREATE,
        Command::LOGOFF,
    ] {
        let mut server = Server::new(config());
        let mut client = Client::new(Offer::smb311(&[], &[]));
        let h = client.header(cmd, 0);
        let m = Client::message(&h, &[0; 32]);
        assert_eq!(
            server.feed(&frame(&m)).unwrap_err(),
            Violation::NotNegotiated,
            "{cmd:?}"
        );
    }
    // Encrypted before any key exists.
    let mut server = Server::new(config());
    let mut msg = b"\xFDSMB".to_vec();
    msg.resize(52 + 68, 0);
    assert!(server.feed(&frame(&msg)).is_err());
}

#[test]
fn response_sent_as_request() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    let mut req = client.negotiate_request();
    req[16] |= flags::SERVER_TO_REDIR as u8;
    assert_eq!(
        server.feed(&frame(&req)).unwrap_err(),
        Violation::UnexpectedResponse
    );
}

/// Bad negotiate parameters are answered, not fatal (MS-SMB2 3.3.5.4).
#[test]
fn negotiate_errors_are_answered() {
    // No dialect at all.
    let mut server = Server::new(config());
    let mut offer = Offer::smb311(&[], &[]);
    offer.dialects.clear();
    let mut client = Client::new(offer);
    let req = client.negotiate_request();
    let (frames, _) = server.exchange_engine_only(&frame(&req)).unwrap();
    assert_eq!(
        client.receive(&single(frames)).one().status(),
        NtStatus::INVALID_PARAMETER
    );
    // No common dialect.
    let mut server = Server::new(config());
    let mut offer = Offer::smb311(&[], &[]);
    offer.dialects = vec![smbq_wire::Dialect(0x0222)];
    let mut client = Client::new(offer);
    let req = client.negotiate_request();
    let (frames, _) = server.exchange_engine_only(&frame(&req)).unwrap();
    assert_eq!(
        client.receive(&single(frames)).one().status(),
        NtStatus::NOT_SUPPORTED
    );
}

/// MS-SMB2 3.3.5.2.4: "If the SMB2 header of the SMB2 NEGOTIATE request has the
/// SMB2_FLAGS_SIGNED bit set, the server MUST fail the request with STATUS_INVALID_PARAMETER."
#[test]
fn signed_negotiate_is_invalid_parameter() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    let mut req = client.negotiate_request();
    req[16] |= flags::SIGNED as u8;
    let (frames, _) = server.exchange_engine_only(&frame(&req)).unwrap();
    assert_eq!(
        client.receive(&single(frames)).one().status(),
        NtStatus::INVALID_PARAMETER
    );
}

// ---- Random mutations ------------------------------------------------------------------

/// The client frames of one valid exchange: negotiate, two session setup legs, a signed ECHO,
/// a sealed ECHO, a request passed up, LOGOFF. Replaying them against a fresh engine (same
/// seed, so the same challenge) is valid byte for byte.
fn recorded_exchange() -> Vec<Vec<u8>> {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(
        &[Cipher::Aes128Gcm],
        &[SigningAlgorithm::AesGmac],
    ));
    let mut sent = Vec::new();
    let req = client.negotiate_request();
    sent.push(frame(&req));
    let (frames, _) = server.exchange_engine_only(&frame(&req)).unwrap();
    let r = client.receive(&single(frames));
    client.on_negotiate_response(&req, r.one());

    // Drive SESSION_SETUP by hand to capture the exact legs.
    let creds = smbq_auth::Credentials::with_password(USER, "WORKGROUP", PASSWORD, "T");
    let mut init = smbq_auth::Initiator::new(creds, &mut client.rng, NOW);
    let mut preauth = client.conn_preauth.clone();
    let leg = |client: &mut Client, token: &[u8]| {
        let h = client.header(Command::SESSION_SETUP, 1);
        let mut w = smbq_wire::Writer::new();
        h.encode(&mut w);
        smbq_wire::session_setup::SessionSetupRequest {
            security_mode: 1,
            security_buffer: token,
            ..Default::default()
        }
        .encode(&mut w);
        w.into_vec()
    };
    let m1 = leg(&mut client, &init.first_token());
    preauth.update(&m1);
    sent.push(frame(&m1));
    let r1 = client.receive(&single(server.exchange_engine_only(&frame(&m1)).unwrap().0));
    preauth.update(&r1.one().bytes);
    client.session_id = r1.one().header.session_id;
    let ch = smbq_wire::session_setup::SessionSetupResponse::decode(&r1.one().bytes).unwrap();
    let (t3, key) = init.step(ch.security_buffer).unwrap();
    let m2 = leg(&mut client, &t3);
    preauth.update(&m2);
    sent.push(frame(&m2));
    let r2 = client.receive(&single(server.exchange_engine_only(&frame(&m2)).unwrap().0));
    assert_eq!(r2.one().status(), NtStatus::SUCCESS);
    let keys = smbq_crypto::derive_keys(
        0x0311,
        smbq_crypto::Role::Client,
        &key[..],
        Some(preauth.value()),
        Some(Cipher::Aes128Gcm),
    )
    .unwrap();
    client.signer =
        Some(smbq_crypto::Signer::new(SigningAlgorithm::AesGmac, keys.signing_key()).unwrap());
    client.encryptor = keys.encryptor();
    client.decryptor = keys.decryptor();

    let echo = client.echo(true);
    sent.push(frame(&echo));
    let echo = client.echo(false);
    sent.push(client.seal(&echo));
    let h = client.header(Command::TREE_CONNECT, 1);
    let mut tc = Client::message(&h, &[9, 0, 0, 0, 0x48, 0, 0, 0, 0]);
    client.sign(&mut tc);
    sent.push(frame(&tc));
    let h = client.header(Command::LOGOFF, 1);
    let mut lo = Client::message(&h, &[4, 0, 0, 0]);
    client.sign(&mut lo);
    sent.push(frame(&lo));
    sent
}

/// Replays `frames`; stops at the first violation. Returns how many frames were accepted.
fn replay(frames: &[Vec<u8>]) -> usize {
    let mut server = Server::new(config());
    let mut ok = 0;
    for f in frames {
        match server.exchange(f, &mut |_| Response::error(NtStatus::BAD_NETWORK_NAME)) {
            Ok(_) => ok += 1,
            Err(_) => break,
        }
    }
    ok
}

fn mutate(rng: &mut StdRng, f: &mut Vec<u8>) {
    let n = rng.gen_range(1..=4);
    for _ in 0..n {
        // Keep room for every kind of edit below.
        if f.len() < 12 {
            f.resize(12, 0);
        }
        match rng.gen_range(0..7) {
            // Flip bits in the message (headers and fields included).
            0 | 1 => {
                let i = rng.gen_range(4..f.len());
                f[i] ^= 1 << rng.gen_range(0..8);
            }
            // A random byte at a random place.
            2 => {
                let i = rng.gen_range(0..f.len());
                f[i] = rng.r#gen();
            }
            // An interesting 16/32-bit value over a length/offset/count-like field.
            3 => {
                let vals: [u32; 6] = [0, 1, 0x7F, 0xFFFF, 0xFFFF_FFFF, 0x8000_0000];
                let v = vals[rng.gen_range(0..vals.len())].to_le_bytes();
                let w = if rng.r#gen() { 2 } else { 4 };
                let i = rng.gen_range(4..f.len() - w);
                f[i..i + w].copy_from_slice(&v[..w]);
            }
            // Truncate (the frame header then promises more than is sent).
            4 => {
                let cut = rng.gen_range(0..f.len());
                f.truncate(cut);
                if f.is_empty() {
                    f.push(0);
                }
            }
            // Append junk, fixing the frame length so the junk is inside the message.
            5 => {
                let extra = rng.gen_range(1..64);
                for _ in 0..extra {
                    f.push(rng.r#gen());
                }
                fix_len(f);
            }
            // Cut the message and fix the length: a shorter but well-framed message.
            _ => {
                if f.len() > 5 {
                    let cut = rng.gen_range(5..f.len());
                    f.truncate(cut);
                    fix_len(f);
                }
            }
        }
    }
}

fn fix_len(f: &mut [u8]) {
    if f.len() >= 4 {
        let len = (f.len() - 4) as u32;
        f[..4].copy_from_slice(&len.to_be_bytes());
        f[0] = 0;
    }
}

#[test]
fn unmutated_replay_is_fully_accepted() {
    let frames = recorded_exchange();
    assert_eq!(replay(&frames), frames.len());
}

#[test]
fn two_thousand_mutations_never_panic() {
    let frames = recorded_exchange();
    let mut rng = StdRng::seed_from_u64(2000);
    let mut accepted_any_mutant = 0;
    for iter in 0..2000 {
        let mut mutated = frames.clone();
        let which = rng.gen_range(0..mutated.len());
        mutate(&mut rng, &mut mutated[which]);
        // Sometimes damage a second frame too.
        if rng.gen_ratio(1, 4) {
            let other = rng.gen_range(0..mutated.len());
            mutate(&mut rng, &mut mutated[other]);
        }
        let result = catch_unwind(AssertUnwindSafe(|| replay(&mutated)));
        match result {
            Ok(n) => {
                if n > which {
                    accepted_any_mutant += 1;
                }
            }
            Err(_) => panic!(
                "engine panicked on mutation iteration {iter} (frame {which}): {:02x?}",
                mutated[which]
            ),
        }
    }
    // The loop must actually reach the engine with damaged frames, not just stop early.
    assert!(accepted_any_mutant > 100, "only {accepted_any_mutant}");
}

/// Whole random frames after a valid login.
#[test]
fn random_frames_after_login_never_panic() {
    let mut rng = StdRng::seed_from_u64(77);
    for _ in 0..300 {
        let mut server = Server::new(config());
        let mut client = Client::new(Offer::smb311(&[], &[]));
        client.connect(&mut server);
        let len = rng.gen_range(1..300);
        let mut msg: Vec<u8> = (0..len).map(|_| rng.r#gen()).collect();
        if rng.r#gen() && msg.len() >= 64 {
            // Give it a valid-looking header so it gets past the protocol id.
            let mut h = client.header(Command(rng.gen_range(0..0x20)), 1);
            h.flags = rng.r#gen::<u32>() & !flags::SERVER_TO_REDIR;
            h.next_command = if rng.r#gen() {
                0
            } else {
                rng.gen_range(0..400)
            };
            msg[..64].copy_from_slice(&h.to_bytes());
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _ = server.exchange(&frame(&msg), &mut |_| {
                Response::error(NtStatus::ACCESS_DENIED)
            });
        }));
        assert!(r.is_ok(), "panic on {msg:02x?}");
    }
}

#[test]
fn logoff_ends_the_session() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[SigningAlgorithm::AesCmac]));
    client.connect(&mut server);
    let h = client.header(Command::LOGOFF, 1);
    let mut lo = Client::message(&h, &[4, 0, 0, 0]);
    client.sign(&mut lo);
    let (frames, actions) = server.exchange_engine_only(&frame(&lo)).unwrap();
    assert!(matches!(
        &actions[..],
        [Action::SessionEnded { session_id }] if *session_id == client.session_id
    ));
    let resp = client.receive(&single(frames));
    assert_eq!(resp.one().status(), NtStatus::SUCCESS);
    assert!(
        client.verifies(resp.one()),
        "LOGOFF response signed with the old key"
    );
    let echo = client.echo(false);
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&echo)).unwrap().0,
    ));
    assert_eq!(resp.one().status(), NtStatus::USER_SESSION_DELETED);
    assert_eq!(
        server.engine.frame_limit(),
        Limits::default().preauth_frame,
        "without a session the small pre-auth limit applies again"
    );
}

/// A stream delivered one byte at a time yields the same frames.
#[test]
fn byte_at_a_time_delivery() {
    let frames = recorded_exchange();
    let mut server = Server::new(config());
    let mut sends = 0;
    for f in &frames {
        for b in f {
            let (out, _) = server
                .exchange(std::slice::from_ref(b), &mut |_| {
                    Response::error(NtStatus::BAD_NETWORK_NAME)
                })
                .unwrap();
            sends += out.len();
        }
    }
    assert_eq!(sends, frames.len(), "one response per request");
}

/// Limits::max_sessions_per_connection counts sessions still authenticating.
#[test]
fn session_limit_per_connection() {
    let mut cfg = config();
    cfg.limits.max_sessions_per_connection = 2;
    let mut server = Server::new(cfg);
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.negotiate(&mut server);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let mut init = smbq_auth::Initiator::new(
            smbq_auth::Credentials::with_password(USER, "W", PASSWORD, "T"),
            &mut client.rng,
            NOW,
        );
        let token = init.first_token();
        let h = client.header(Command::SESSION_SETUP, 1);
        let mut w = smbq_wire::Writer::new();
        h.encode(&mut w);
        smbq_wire::session_setup::SessionSetupRequest {
            security_mode: 1,
            security_buffer: &token,
            ..Default::default()
        }
        .encode(&mut w);
        let (frames, _) = server.exchange_engine_only(&frame(&w.into_vec())).unwrap();
        statuses.push(client.receive(&single(frames)).one().status());
    }
    assert_eq!(
        statuses,
        [
            NtStatus::MORE_PROCESSING_REQUIRED,
            NtStatus::MORE_PROCESSING_REQUIRED,
            NtStatus::INSUFFICIENT_RESOURCES
        ]
    );
}

#[test]
fn a_revoked_session_is_gone_for_logoff_too() {
    // A reconnect elsewhere (PreviousSessionId) ends the session in the shared table.
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[SigningAlgorithm::AesCmac]));
    client.connect(&mut server);
    server.table.end(client.session_id);
    let h = client.header(Command::LOGOFF, 1);
    let mut lo = Client::message(&h, &[4, 0, 0, 0]);
    client.sign(&mut lo);
    let (frames, actions) = server.exchange_engine_only(&frame(&lo)).unwrap();
    assert!(actions.is_empty(), "{actions:?}");
    let resp = client.receive(&single(frames));
    assert_eq!(resp.one().status(), NtStatus::USER_SESSION_DELETED);
}
