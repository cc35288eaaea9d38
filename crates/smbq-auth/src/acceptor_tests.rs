//! Acceptor tests: the MS-NLMP 4.2.4.3 AUTHENTICATE vector and state-machine edge cases.

use super::*;
use crate::nt_hash;

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

fn user_db(user: &str) -> Option<[u8; 16]> {
    user.eq_ignore_ascii_case("user")
        .then(|| nt_hash("Password"))
}

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.replace([' ', '\n'], "")).unwrap()
}

/// MS-NLMP 4.2.4.3: the published AUTHENTICATE_MESSAGE of the NTLMv2 example (no MIC).
const AUTH_4_2_4_3: &str = "
    4e544c4d53535000030000001800180 06c00000054005400840000000c000c00
    480000000800080054000000100010005c00000010001000d8000000358288e2
    0501280a0000000f44006f006d00610069006e00550073006500720043004f00
    4d005000550054004500520086c35097ac9cec102554764a57cccc19aaaaaaaa
    aaaaaaaa68cd0ab851e51c96aabc927bebef6a1c010100000000000000000000
    00000000aaaaaaaaaaaaaaaa0000000002000c0044006f006d00610069006e00
    01000c005300650072007600650072000000000000000000c5dad2544fc97990
    94ce1ce90bc9d03e";

#[test]
fn accepts_the_published_ntlmv2_authenticate_4_2_4_3() {
    // Server challenge of MS-NLMP 4.2.1; the published message carries no MIC, so the
    // NEGOTIATE/CHALLENGE we exchange first do not enter the result.
    let mut acc = Acceptor::new(
        cfg(false),
        [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef],
        0,
    );
    let neg = ntlm_msg::encode_negotiate(0xe288_8235);
    let AcceptStep::Continue(chal) = acc.step(&neg, &user_db).unwrap() else {
        panic!()
    };
    let c = ntlm_msg::decode_challenge(&chal).unwrap();
    assert_ne!(c.flags & flags::KEY_EXCH, 0);

    let auth = h(&AUTH_4_2_4_3.replace(' ', ""));
    assert_eq!(auth.len(), 0xe8);
    let AcceptStep::Done {
        token,
        identity,
        session_key,
        ..
    } = acc.step(&auth, &user_db).unwrap()
    else {
        panic!("not done")
    };
    assert!(token.is_empty(), "raw NTLMSSP gets an empty final token");
    assert_eq!(identity.user, "User");
    assert_eq!(identity.domain, "Domain");
    assert!(!identity.is_guest && !identity.is_anonymous);
    // 4.2.1 RandomSessionKey, recovered from 4.2.4.2.3's EncryptedSessionKey.
    assert_eq!(session_key[..], [0x55; 16]);
    // Finished: another step is out of sequence.
    assert_eq!(
        acc.step(&auth, &user_db).unwrap_err(),
        AuthError::OutOfSequence
    );
}

#[test]
fn published_authenticate_with_other_challenge_fails() {
    let mut acc = Acceptor::new(cfg(true), [0; 8], 0);
    acc.step(&ntlm_msg::encode_negotiate(0xe288_8235), &user_db)
        .unwrap();
    let auth = h(&AUTH_4_2_4_3.replace(' ', ""));
    // A known user with a wrong proof is never mapped to guest.
    let err = acc.step(&auth, &user_db).unwrap_err();
    assert_eq!(
        err,
        AuthError::LogonFailure {
            user: "User".into()
        }
    );
    assert_eq!(err.nt_status(), smbq_wire::NtStatus::LOGON_FAILURE);
}

/// Runs NEGOTIATE/CHALLENGE on a raw acceptor and returns (acceptor, challenge message).
fn raw_acceptor(allow_guest: bool) -> (Acceptor, Vec<u8>) {
    let mut acc = Acceptor::new(cfg(allow_guest), [3; 8], 5);
    let AcceptStep::Continue(chal) = acc
        .step(&ntlm_msg::encode_negotiate(0xe288_8235), &user_db)
        .unwrap()
    else {
        panic!()
    };
    (acc, chal)
}

fn auth_with(user: &str, lm: &[u8], nt: &[u8]) -> Vec<u8> {
    ntlm_msg::encode_authenticate(&ntlm_msg::AuthenticateFields {
        lm_response: lm,
        nt_response: nt,
        domain: &[],
        user: &unicode(user),
        workstation: &[],
        encrypted_session_key: &[0; 16],
        flags: 0xe288_8235,
        with_mic: false,
    })
}

#[test]
fn ntlmv1_and_lm_only_responses_are_logon_failures() {
    for nt in [&[0x11u8; 24][..], &[][..], &[1; 10][..]] {
        let (mut acc, _) = raw_acceptor(true);
        let err = acc
            .step(&auth_with("User", &[0x22; 24], nt), &user_db)
            .unwrap_err();
        assert_eq!(
            err,
            AuthError::LogonFailure {
                user: "User".into()
            },
            "nt len {}",
            nt.len()
        );
    }
}

#[test]
fn anonymous_needs_allow_anonymous() {
    for lm in [&[][..], &[0][..]] {
        let (mut acc, _) = raw_acceptor(true);
        let AcceptStep::Done {
            identity,
            session_key,
            ..
        } = acc.step(&auth_with("", lm, &[]), &user_db).unwrap()
        else {
            panic!()
        };
        assert!(identity.is_anonymous && !identity.is_guest);
        // KEY_EXCH with an EncryptedRandomSessionKey of zeros: the key is its RC4 under the
        // zero KeyExchangeKey.
        let mut want = [0u8; 16];
        crate::ntlm_crypto::rc4k(&[0; 16], &mut want);
        assert_eq!(session_key[..], want);
        let (mut acc, _) = raw_acceptor(false);
        let err = acc.step(&auth_with("", lm, &[]), &user_db).unwrap_err();
        assert_eq!(err.nt_status(), smbq_wire::NtStatus::LOGON_FAILURE);
    }
}

/// A null logon's key as Samba's client makes it (MS-NLMP 3.2.5.1.2): a random key sent
/// RC4-encrypted under the zero KeyExchangeKey with KEY_EXCH, else the zero key itself.
#[test]
fn an_anonymous_logon_gets_the_clients_exchanged_key() {
    let random = [0x5Au8; 16];
    let mut encrypted = random;
    crate::ntlm_crypto::rc4k(&[0; 16], &mut encrypted);
    for (flags, enc, want) in [
        (0xe288_8235u32, &encrypted[..], random),
        (0xe288_8235 & !0x4000_0000, &encrypted[..], [0; 16]),
        (0xe288_8235, &[][..], [0; 16]),
    ] {
        let msg = ntlm_msg::encode_authenticate(&ntlm_msg::AuthenticateFields {
            lm_response: &[0],
            nt_response: &[],
            domain: &[],
            user: &[],
            workstation: &[],
            encrypted_session_key: enc,
            flags,
            with_mic: false,
        });
        let (mut acc, _) = raw_acceptor(true);
        let AcceptStep::Done { session_key, .. } = acc.step(&msg, &user_db).unwrap() else {
            panic!()
        };
        assert_eq!(
            session_key[..],
            want,
            "flags {flags:#x}, {} key bytes",
            enc.len()
        );
    }
}

#[test]
fn bad_resp_type_and_short_blob_are_invalid() {
    let mut nt = vec![0u8; 16];
    nt.extend_from_slice(&crate::ntlm_crypto::client_blob(0, &[0; 8], &[0, 0, 0, 0]));
    nt[16] = 2;
    let (mut acc, _) = raw_acceptor(true);
    assert!(matches!(
        acc.step(&auth_with("User", &[], &nt), &user_db),
        Err(AuthError::InvalidToken(_))
    ));
    let (mut acc, _) = raw_acceptor(true);
    // Longer than NTLMv1 but too short to hold the blob's fixed part.
    let short = [&[0u8; 16][..], &[1, 1], &[0; 12]].concat();
    assert!(matches!(
        acc.step(&auth_with("User", &[], &short), &user_db),
        Err(AuthError::InvalidToken(_))
    ));
}

/// RFC 4178 section 5: when NTLM is not the client's first mechanism the acceptor answers
/// request-mic and then insists on a mechListMIC over the client's own mechanism list.
#[test]
fn ntlm_not_first_requires_mech_list_mic() {
    use crate::der::{TAG_OID, TAG_SEQUENCE, tlv};
    use crate::{Credentials, Initiator};
    const KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
    let mech_types = tlv(
        TAG_SEQUENCE,
        &[tlv(TAG_OID, KRB5), tlv(TAG_OID, OID_NTLMSSP)].concat(),
    );

    for send_mic in [true, false] {
        let mut acc = Acceptor::new(cfg(false), [3; 8], 5);
        let init = spnego::encode_init(&mech_types, b"a kerberos AP-REQ");
        let AcceptStep::Continue(t) = acc.step(&init, &user_db).unwrap() else {
            panic!()
        };
        let NegotiationToken::Resp(r) = spnego::decode(&t).unwrap() else {
            panic!()
        };
        assert_eq!(r.neg_state, Some(NegState::RequestMic));
        assert_eq!(r.supported_mech, Some(OID_NTLMSSP));
        assert!(r.response_token.is_none());

        let creds = Credentials::with_password("user", "", "Password", "W");
        let mut cli = Initiator::with_randomness(creds, [4; 8], [6; 16], 0).raw_ntlmssp();
        let neg = cli.first_token();
        let AcceptStep::Continue(t) = acc
            .step(&spnego::encode_resp(None, None, Some(&neg), None), &user_db)
            .unwrap()
        else {
            panic!()
        };
        let NegotiationToken::Resp(r) = spnego::decode(&t).unwrap() else {
            panic!()
        };
        let (auth, key) = cli.step(r.response_token.unwrap()).unwrap();
        let neg_flags = ntlm_msg::decode_authenticate(&auth).unwrap().flags;
        let mic = Sealer::new(&key, neg_flags, Direction::ClientToServer).sign(&mech_types);
        let last = spnego::encode_resp(None, None, Some(&auth), send_mic.then_some(&mic[..]));
        let res = acc.step(&last, &user_db);
        if !send_mic {
            assert_eq!(res.unwrap_err(), AuthError::MechListMic);
            continue;
        }
        let AcceptStep::Done {
            token, session_key, ..
        } = res.unwrap()
        else {
            panic!()
        };
        assert_eq!(session_key[..], key[..]);
        let NegotiationToken::Resp(r) = spnego::decode(&token).unwrap() else {
            panic!()
        };
        assert_eq!(r.neg_state, Some(NegState::AcceptCompleted));
        let mut srv = Sealer::new(&key, neg_flags, Direction::ServerToClient);
        assert!(srv.verify(&mech_types, r.mech_list_mic.unwrap()));
    }
}

#[test]
fn no_ntlm_in_mech_types_is_no_common_mechanism() {
    use crate::der::{TAG_OID, TAG_SEQUENCE, tlv};
    let mech_types = tlv(TAG_SEQUENCE, &tlv(TAG_OID, &[0x2a, 0x03]));
    let mut acc = Acceptor::new(cfg(true), [3; 8], 5);
    let err = acc
        .step(&spnego::encode_init(&mech_types, b"x"), &user_db)
        .unwrap_err();
    assert_eq!(err, AuthError::NoCommonMechanism);
    assert_eq!(err.nt_status(), smbq_wire::NtStatus::INVALID_PARAMETER);
}

#[test]
fn challenge_carries_target_info_and_mirrors_flags() {
    let mut acc = Acceptor::new(cfg(false), [7; 8], 0x01d0_0000_0000_0000);
    let client = flags::UNICODE | flags::SIGN | flags::KEY_EXCH | flags::NEG_128 | flags::VERSION;
    let AcceptStep::Continue(chal) = acc
        .step(&ntlm_msg::encode_negotiate(client), &user_db)
        .unwrap()
    else {
        panic!()
    };
    let c = ntlm_msg::decode_challenge(&chal).unwrap();
    assert_eq!(c.server_challenge, [7; 8]);
    for f in [
        flags::UNICODE,
        flags::SIGN,
        flags::KEY_EXCH,
        flags::NEG_128,
        flags::VERSION,
    ] {
        assert_ne!(c.flags & f, 0, "{f:#x}");
    }
    for f in [flags::SEAL, flags::NEG_56, flags::OEM] {
        assert_eq!(c.flags & f, 0, "{f:#x}");
    }
    assert_ne!(c.flags & flags::TARGET_INFO, 0);
    let pairs = parse_av_pairs(c.target_info).unwrap();
    let ids: Vec<u16> = pairs.iter().map(|p| p.0).collect();
    assert_eq!(ids, vec![2, 1, 4, 3, 7]);
    assert_eq!(
        av_value(&pairs, av::NB_COMPUTER_NAME),
        Some(&unicode("SMBQ")[..])
    );
    assert_eq!(
        av_value(&pairs, av::TIMESTAMP),
        Some(&0x01d0_0000_0000_0000u64.to_le_bytes()[..])
    );
    assert!(c.target_info.ends_with(&[0, 0, 0, 0]));
}

#[test]
fn anonymous_is_independent_of_guest() {
    let mut c = cfg(false);
    c.allow_anonymous = true;
    let mut acc = Acceptor::new(c.clone(), [3; 8], 5);
    let _ = acc
        .step(&ntlm_msg::encode_negotiate(0xe288_8235), &user_db)
        .unwrap();
    let AcceptStep::Done { identity, .. } = acc.step(&auth_with("", &[], &[]), &user_db).unwrap()
    else {
        panic!()
    };
    assert!(identity.is_anonymous);
    // Unknown users still fail: guest mapping is off.
    let mut acc = Acceptor::new(c, [3; 8], 5);
    let _ = acc
        .step(&ntlm_msg::encode_negotiate(0xe288_8235), &user_db)
        .unwrap();
    let mut nt = vec![0u8; 16];
    nt.extend_from_slice(&crate::ntlm_crypto::client_blob(0, &[0; 8], &[0, 0, 0, 0]));
    let err = acc
        .step(&auth_with("nobody", &[0; 24], &nt), &user_db)
        .unwrap_err();
    assert_eq!(err.nt_status(), smbq_wire::NtStatus::LOGON_FAILURE);
}
