//! Drives smbq-auth's acceptor (server) and initiator (client) with hostile tokens, in raw
//! NTLMSSP framing or wrapped in SPNEGO (MS-NLMP, RFC 4178).

use smbq_auth::{AcceptStep, Acceptor, AcceptorConfig, Credentials, Initiator, nt_hash};

use crate::chunks;
use crate::driver::{NOW, PASSWORD, USER};

pub const SERVER_CHALLENGE: [u8; 8] = *b"chalenge";
pub const CLIENT_CHALLENGE: [u8; 8] = [7; 8];
pub const CLIENT_SESSION_KEY: [u8; 16] = [9; 16];

pub fn accounts(user: &str) -> Option<[u8; 16]> {
    user.eq_ignore_ascii_case(USER).then(|| nt_hash(PASSWORD))
}

pub fn acceptor(allow_guest: bool) -> Acceptor {
    let cfg = AcceptorConfig {
        netbios_domain: "SMBQ".into(),
        netbios_computer: "FUZZSRV".into(),
        dns_domain: "smbq.test".into(),
        dns_computer: "fuzzsrv.smbq.test".into(),
        allow_guest,
        allow_anonymous: allow_guest,
        kerberos: None,
        ntlm: true,
    };
    Acceptor::new(cfg, SERVER_CHALLENGE, NOW)
}

pub fn initiator(spnego: bool) -> Initiator {
    let creds = Credentials::with_password(USER, "SMBQ", PASSWORD, "FUZZWS");
    let init = Initiator::with_randomness(creds, CLIENT_CHALLENGE, CLIENT_SESSION_KEY, NOW);
    if spnego { init } else { init.raw_ntlmssp() }
}

/// The valid client tokens of one exchange: (NEGOTIATE leg, AUTHENTICATE leg).
pub fn valid_tokens(spnego: bool) -> (Vec<u8>, Vec<u8>) {
    let mut init = initiator(spnego);
    let mut acc = acceptor(false);
    let first = init.first_token();
    let Ok(AcceptStep::Continue(challenge)) = acc.step(&first, &accounts) else {
        panic!("acceptor refused the initiator's first token");
    };
    let (auth, _key) = init
        .step(&challenge)
        .expect("initiator refused the acceptor's CHALLENGE");
    (first, auth)
}

/// Feeds tokens until the acceptor finishes or fails; checks what a success may claim.
fn feed(acc: &mut Acceptor, tokens: &[&[u8]]) {
    for t in tokens {
        match acc.step(t, &accounts) {
            Ok(AcceptStep::Continue(_)) => {}
            Ok(AcceptStep::Done { identity, .. }) => {
                // Without the password nobody else can be authenticated as a real user.
                if !identity.is_guest && !identity.is_anonymous {
                    assert!(
                        identity.user.eq_ignore_ascii_case(USER),
                        "logged on as {identity:?}"
                    );
                }
                return;
            }
            Err(_) => {
                assert!(
                    acc.step(b"", &accounts).is_err(),
                    "an acceptor must stay failed after an error"
                );
                return;
            }
        }
    }
}

/// Input: byte 0 picks the mode and the guest policy, the rest is mode-specific.
pub fn run(data: &[u8], spnego: bool) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let allow_guest = sel & 0x80 != 0;
    match sel % 4 {
        // A fresh acceptor given length-prefixed tokens.
        0 => feed(&mut acceptor(allow_guest), &chunks(rest)),
        // A valid first leg, then hostile tokens: reaches AUTHENTICATE parsing.
        1 => {
            let (first, _) = valid_tokens(spnego);
            let mut acc = acceptor(allow_guest);
            let tokens: Vec<&[u8]> = std::iter::once(&first[..]).chain(chunks(rest)).collect();
            feed(&mut acc, &tokens);
        }
        // A real exchange whose AUTHENTICATE token is XORed with the input. Unchanged, it must
        // log the user on; changed, it must never log anyone else on.
        2 => {
            let (first, mut auth) = valid_tokens(spnego);
            let orig_len = auth.len();
            let mut changed = rest.len() > orig_len;
            for (b, m) in auth.iter_mut().zip(rest) {
                *b ^= m;
                changed |= *m != 0;
            }
            // Input past the token's end is appended, so the fuzzer can also lengthen it.
            auth.extend_from_slice(rest.get(orig_len..).unwrap_or_default());
            let mut acc = acceptor(allow_guest);
            assert!(matches!(
                acc.step(&first, &accounts),
                Ok(AcceptStep::Continue(_))
            ));
            if changed {
                feed(&mut acc, &[&auth[..]]);
                return;
            }
            match acc.step(&auth, &accounts) {
                Ok(AcceptStep::Done {
                    identity,
                    session_key,
                    ..
                }) => {
                    assert_eq!(identity.user, USER);
                    assert!(!identity.is_guest && !identity.is_anonymous);
                    assert_ne!(session_key[..], [0u8; 16], "an authenticated user gets a key");
                }
                other => panic!("a valid AUTHENTICATE was refused: {other:?}"),
            }
        }
        // The client side: hostile CHALLENGE, then a hostile final server token.
        _ => {
            let mut init = initiator(spnego);
            let _ = init.first_token();
            let parts = chunks(rest);
            let challenge = parts.first().copied().unwrap_or_default();
            if init.step(challenge).is_ok() {
                let _ = init.finish(parts.get(1).copied().unwrap_or_default());
            }
        }
    }
}
