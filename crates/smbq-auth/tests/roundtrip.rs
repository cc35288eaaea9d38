//! Initiator <-> acceptor exchanges through the public API, plus hostile-input checks.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smbq_auth::{
    AcceptStep, Acceptor, AcceptorConfig, AuthError, Credentials, Identity, Initiator,
    MAX_TOKEN_LEN, nt_hash,
};
use smbq_wire::NtStatus;

fn cfg(allow_guest: bool) -> AcceptorConfig {
    AcceptorConfig {
        netbios_domain: "WORKGROUP".into(),
        netbios_computer: "SMBQ".into(),
        dns_domain: "example.test".into(),
        dns_computer: "smbq.example.test".into(),
        allow_guest,
        allow_anonymous: allow_guest,
        kerberos: None,
        ntlm: true,
    }
}

fn accounts(user: &str) -> Option<[u8; 16]> {
    user.eq_ignore_ascii_case("alice")
        .then(|| nt_hash("correct horse"))
}

const NOW: u64 = 133_500_000_000_000_000;

struct Run {
    /// Tokens as sent: [client init, server challenge, client authenticate].
    tokens: Vec<Vec<u8>>,
    client_key: [u8; 16],
    result: Result<AcceptStep, AuthError>,
}

/// Runs the three legs; `tamper` may edit the client's AUTHENTICATE leg before it is delivered.
fn run(
    creds: Credentials,
    allow_guest: bool,
    raw: bool,
    tamper: impl FnOnce(&mut Vec<u8>),
) -> (Run, Initiator) {
    let mut rng = StdRng::seed_from_u64(7);
    let mut cli = Initiator::new(creds, &mut rng, NOW);
    if raw {
        cli = cli.raw_ntlmssp();
    }
    let mut acc = Acceptor::new(cfg(allow_guest), rng.r#gen(), NOW);
    let t1 = cli.first_token();
    let AcceptStep::Continue(t2) = acc.step(&t1, &accounts).unwrap() else {
        panic!("leg 1")
    };
    let (mut t3, key) = cli.step(&t2).unwrap();
    tamper(&mut t3);
    let result = acc.step(&t3, &accounts);
    (
        Run {
            tokens: vec![t1, t2, t3],
            client_key: *key,
            result,
        },
        cli,
    )
}

fn alice(password: &str) -> Credentials {
    Credentials::with_password("Alice", "WORKGROUP", password, "CLIENT")
}

fn done(r: Result<AcceptStep, AuthError>) -> (Vec<u8>, Identity, [u8; 16]) {
    match r {
        Ok(AcceptStep::Done {
            token,
            identity,
            session_key,
            ..
        }) => (token, identity, session_key[..].try_into().unwrap()),
        other => panic!("expected Done, got {other:?}"),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("needle present")
}

#[test]
fn spnego_success_agrees_on_key_and_verifies_server_mic() {
    let (r, mut cli) = run(alice("correct horse"), false, false, |_| {});
    let (token, identity, key) = done(r.result);
    assert_eq!(key, r.client_key);
    assert_ne!(key, [0; 16]);
    assert_eq!(
        identity,
        Identity {
            user: "Alice".into(),
            domain: "WORKGROUP".into(),
            is_guest: false,
            is_anonymous: false,
        }
    );
    // accept-completed, and a 16-byte mechListMIC answering the client's.
    assert!(
        token
            .windows(5)
            .any(|w| w == [0xa0, 0x03, 0x0a, 0x01, 0x00])
    );
    // a1 1b 30 19 | a0 03 0a 01 00 | a3 12 04 10 <16-byte signature, version 1>
    assert_eq!(token.len(), 29);
    assert_eq!(&token[9..17], &[0xa3, 0x12, 0x04, 0x10, 1, 0, 0, 0]);
    cli.finish(&token).unwrap();
}

#[test]
fn client_rejects_a_forged_server_mic() {
    let (r, mut cli) = run(alice("correct horse"), false, false, |_| {});
    let (mut token, _, _) = done(r.result);
    *token.last_mut().unwrap() ^= 1;
    assert_eq!(cli.finish(&token).unwrap_err(), AuthError::MechListMic);
}

#[test]
fn client_accepts_completion_without_server_mic_but_not_reject() {
    let (r, mut cli) = run(alice("correct horse"), false, false, |_| {});
    done(r.result);
    cli.finish(&[0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x00])
        .unwrap();

    let (r, mut cli) = run(alice("correct horse"), false, false, |_| {});
    done(r.result);
    let reject = [0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x02];
    assert_eq!(cli.finish(&reject).unwrap_err(), AuthError::Rejected);
}

#[test]
fn raw_ntlmssp_success() {
    let (r, mut cli) = run(alice("correct horse"), false, true, |_| {});
    assert!(r.tokens[0].starts_with(b"NTLMSSP\0"));
    assert!(r.tokens[1].starts_with(b"NTLMSSP\0"));
    let (token, identity, key) = done(r.result);
    assert!(token.is_empty());
    assert_eq!(key, r.client_key);
    assert_eq!(identity.user, "Alice");
    cli.finish(&token).unwrap();
}

#[test]
fn user_name_case_and_empty_domain_still_authenticate() {
    for (user, domain) in [
        ("ALICE", "WORKGROUP"),
        ("alice", ""),
        ("Alice", "OtherDomain"),
    ] {
        let creds = Credentials::with_password(user, domain, "correct horse", "C");
        let (r, _) = run(creds, false, false, |_| {});
        let (_, identity, key) = done(r.result);
        assert_eq!(key, r.client_key);
        assert_eq!(identity.user, user);
    }
}

#[test]
fn wrong_password_is_logon_failure_even_with_guest() {
    for allow_guest in [false, true] {
        let (r, _) = run(alice("wrong"), allow_guest, false, |_| {});
        let err = r.result.unwrap_err();
        assert_eq!(
            err,
            AuthError::LogonFailure {
                user: "Alice".into()
            }
        );
        assert_eq!(err.nt_status(), NtStatus::LOGON_FAILURE);
    }
}

#[test]
fn nt_hash_credentials_work_like_passwords() {
    let creds = Credentials::with_nt_hash("alice", "", nt_hash("correct horse"), "C");
    let (r, _) = run(creds, false, false, |_| {});
    done(r.result);
}

#[test]
fn tampered_ntlm_mic_is_logon_failure() {
    let (r, _) = run(alice("correct horse"), false, false, |t| {
        // MIC sits at offset 72 of the AUTHENTICATE message (MS-NLMP 2.2.1.3).
        let at = find(t, b"NTLMSSP\0\x03\0\0\0") + 72;
        t[at] ^= 0x80;
    });
    assert_eq!(
        r.result.unwrap_err(),
        AuthError::LogonFailure {
            user: "Alice".into()
        }
    );
}

#[test]
fn tampered_client_mech_list_mic_is_rejected() {
    let (r, _) = run(alice("correct horse"), false, false, |t| {
        // mechListMIC is the last field of the NegTokenResp.
        *t.last_mut().unwrap() ^= 1;
    });
    let err = r.result.unwrap_err();
    assert_eq!(err, AuthError::MechListMic);
    assert_eq!(err.nt_status(), NtStatus::LOGON_FAILURE);
}

#[test]
fn tampered_flags_break_the_mic() {
    let (r, _) = run(alice("correct horse"), false, false, |t| {
        // Dropping KEY_EXCH from NegotiateFlags (offset 60) must not go unnoticed.
        let at = find(t, b"NTLMSSP\0\x03\0\0\0") + 63;
        t[at] &= !0x40;
    });
    assert!(r.result.is_err());
}

#[test]
fn unknown_user_maps_to_guest_only_when_allowed() {
    let bob = || Credentials::with_password("bob", "D", "x", "C");
    let (r, _) = run(bob(), true, false, |_| {});
    let (token, identity, key) = done(r.result);
    assert!(identity.is_guest && !identity.is_anonymous);
    assert_eq!(identity.user, "bob");
    assert_eq!(key, [0; 16]);
    assert!(!token.is_empty());

    let (r, _) = run(bob(), false, false, |_| {});
    assert_eq!(
        r.result.unwrap_err(),
        AuthError::LogonFailure { user: "bob".into() }
    );
}

#[test]
fn anonymous_round_trip() {
    let (r, mut cli) = run(Credentials::anonymous(), true, false, |_| {});
    assert_eq!(r.client_key, [0; 16]);
    let (token, identity, key) = done(r.result);
    assert!(identity.is_anonymous);
    assert_eq!(key, [0; 16]);
    cli.finish(&token).unwrap();

    let (r, _) = run(Credentials::anonymous(), false, false, |_| {});
    assert_eq!(r.result.unwrap_err().nt_status(), NtStatus::LOGON_FAILURE);
}

#[test]
fn acceptor_is_finished_after_an_error() {
    let mut acc = Acceptor::new(cfg(false), [1; 8], NOW);
    assert!(acc.step(b"garbage", &accounts).is_err());
    let mut cli = Initiator::with_randomness(alice("correct horse"), [2; 8], [3; 16], NOW);
    assert_eq!(
        acc.step(&cli.first_token(), &accounts).unwrap_err(),
        AuthError::OutOfSequence
    );
}

#[test]
fn oversized_token_is_refused() {
    let mut acc = Acceptor::new(cfg(true), [1; 8], NOW);
    let big = vec![0u8; MAX_TOKEN_LEN + 1];
    let err = acc.step(&big, &accounts).unwrap_err();
    assert_eq!(err, AuthError::TooLarge(MAX_TOKEN_LEN + 1));
    assert_eq!(err.nt_status(), NtStatus::INVALID_PARAMETER);
}

/// Feeds a leg to a fresh acceptor that has seen the earlier legs.
fn acceptor_at_leg(tokens: &[Vec<u8>], leg: usize) -> Acceptor {
    let mut acc = Acceptor::new(cfg(true), [9; 8], NOW);
    if leg == 2 {
        acc.step(&tokens[0], &accounts).unwrap();
    }
    acc
}

#[test]
fn truncated_tokens_are_errors_not_panics() {
    for raw in [false, true] {
        let (r, _) = run(alice("correct horse"), true, raw, |_| {});
        for leg in [0usize, 2] {
            let t = &r.tokens[leg];
            // A raw NEGOTIATE without its trailing 8-byte Version is accepted on purpose: the
            // field is informational (MS-NLMP 2.2.2.10) and older clients omit it.
            let end = if raw && leg == 0 { 32 } else { t.len() };
            for cut in 0..end {
                let mut acc = acceptor_at_leg(&r.tokens, leg);
                let res = acc.step(&t[..cut], &accounts);
                assert!(res.is_err(), "raw={raw} leg={leg} cut={cut} accepted");
            }
        }
        // Truncated server challenges must not panic the client either.
        for cut in 0..r.tokens[1].len() {
            let mut rng = StdRng::seed_from_u64(1);
            let mut cli = Initiator::new(alice("x"), &mut rng, NOW);
            if raw {
                cli = cli.raw_ntlmssp();
            }
            cli.first_token();
            assert!(
                cli.step(&r.tokens[1][..cut]).is_err(),
                "raw={raw} cut={cut}"
            );
        }
    }
}

#[test]
fn huge_lengths_and_out_of_range_offsets_are_errors() {
    let (r, _) = run(alice("correct horse"), true, true, |_| {});
    let auth = &r.tokens[2];
    // Each (len, maxlen, offset) field of the AUTHENTICATE header: LM, NT, domain, user, ws, key.
    for field in 0..6 {
        let base = 12 + field * 8;
        for (len, off) in [
            (0xffffu16, None),
            (16, Some(0xffff_fff0u32)),
            (1, Some(auth.len() as u32)),
        ] {
            let mut t = auth.clone();
            t[base..base + 2].copy_from_slice(&len.to_le_bytes());
            if let Some(o) = off {
                t[base + 4..base + 8].copy_from_slice(&o.to_le_bytes());
            }
            let mut acc = acceptor_at_leg(&r.tokens, 2);
            assert!(
                acc.step(&t, &accounts).is_err(),
                "field {field} len {len} off {off:?}"
            );
        }
    }
    // A DER length claiming 4 GiB.
    let mut acc = Acceptor::new(cfg(true), [1; 8], NOW);
    assert!(matches!(
        acc.step(&[0x60, 0x84, 0xff, 0xff, 0xff, 0xff, 0x06], &accounts),
        Err(AuthError::InvalidToken(_))
    ));
}

#[test]
fn random_corruption_never_panics() {
    let (r, _) = run(alice("correct horse"), true, false, |_| {});
    let mut rng = StdRng::seed_from_u64(42);
    for _ in 0..3000 {
        let leg = if rng.r#gen::<bool>() { 0 } else { 2 };
        let mut t = r.tokens[leg].clone();
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(0..t.len());
            t[i] = rng.r#gen();
        }
        let mut acc = acceptor_at_leg(&r.tokens, leg);
        let _ = acc.step(&t, &accounts);
    }
    for _ in 0..3000 {
        let mut t = r.tokens[1].clone();
        let i = rng.gen_range(0..t.len());
        t[i] = rng.r#gen();
        let mut cli = Initiator::with_randomness(alice("x"), [1; 8], [2; 16], NOW);
        cli.first_token();
        let _ = cli.step(&t);
    }
}
