//! Acceptor tests for Kerberos in SPNEGO (MS-SPNG 3.3.5.1) with a stand-in [`Kerberos`]:
//! the mechanism choice, the NegTokenResp the AP-REP goes back in, and `ntlm = false`.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::der::{TAG_OID, TAG_SEQUENCE, tlv};
use crate::kerberos::{KerberosLogon, OID_KRB5, OID_MS_KRB5};
use smbq_wire::NtStatus;

/// Accepts the token "good" for `alice`, refuses anything else as a replay would be.
#[derive(Debug)]
struct FakeKdc;

impl Kerberos for FakeKdc {
    fn accept(&self, token: &[u8]) -> Result<KerberosLogon, AuthError> {
        if token != b"good" {
            return Err(AuthError::Kerberos {
                principal: String::new(),
                status: NtStatus::LOGON_FAILURE,
                reason: "Request is a replay".into(),
            });
        }
        Ok(KerberosLogon {
            identity: Identity {
                user: "alice".into(),
                domain: "SMBQ.TEST".into(),
                is_guest: false,
                is_anonymous: false,
            },
            reply: b"ap-rep".to_vec(),
            session_key: zeroize::Zeroizing::new(vec![9; 32]),
            valid_for: Duration::from_secs(600),
        })
    }
}

fn cfg(kerberos: bool, ntlm: bool) -> AcceptorConfig {
    AcceptorConfig {
        netbios_domain: "WORKGROUP".into(),
        netbios_computer: "SMBQ".into(),
        dns_domain: "example.test".into(),
        dns_computer: "smbq.example.test".into(),
        allow_guest: false,
        allow_anonymous: false,
        kerberos: kerberos.then(|| Arc::new(FakeKdc) as Arc<dyn Kerberos>),
        ntlm,
    }
}

fn no_accounts(_: &str) -> Option<[u8; 16]> {
    None
}

fn mechs(oids: &[&[u8]]) -> Vec<u8> {
    let list: Vec<u8> = oids.iter().flat_map(|o| tlv(TAG_OID, o)).collect();
    tlv(TAG_SEQUENCE, &list)
}

fn done(step: AcceptStep) -> (Vec<u8>, Identity, Vec<u8>, Option<Duration>, Mechanism) {
    match step {
        AcceptStep::Done {
            token,
            identity,
            session_key,
            valid_for,
            mechanism,
        } => (token, identity, session_key.to_vec(), valid_for, mechanism),
        other => panic!("not done: {other:?}"),
    }
}

#[test]
fn optimistic_ap_req_completes_in_one_leg_with_the_clients_oid() {
    for first in [OID_MS_KRB5, OID_KRB5] {
        let mut acc = Acceptor::new(cfg(true, true), [1; 8], 5);
        let init = spnego::encode_init(&mechs(&[first, OID_KRB5, OID_NTLMSSP]), b"good");
        let (token, identity, key, valid_for, mechanism) =
            done(acc.step(&init, &no_accounts).unwrap());
        assert_eq!(identity.user, "alice");
        assert_eq!(
            key, [9; 32],
            "the whole GSS key: AES-256 ciphers derive from all of it"
        );
        assert_eq!(valid_for, Some(Duration::from_secs(600)));
        assert_eq!(mechanism, Mechanism::Kerberos);
        let NegotiationToken::Resp(r) = spnego::decode(&token).unwrap() else {
            panic!()
        };
        assert_eq!(r.neg_state, Some(NegState::AcceptCompleted));
        assert_eq!(
            r.supported_mech,
            Some(first),
            "the OID the client named first"
        );
        assert_eq!(r.response_token, Some(&b"ap-rep"[..]));
        assert!(
            r.mech_list_mic.is_none(),
            "the preferred mechanism needs no MIC"
        );
    }
}

#[test]
fn without_an_optimistic_token_kerberos_is_selected_then_completed() {
    let mut acc = Acceptor::new(cfg(true, true), [1; 8], 5);
    let init = spnego::encode_init_without_token(&mechs(&[OID_KRB5, OID_NTLMSSP]));
    let AcceptStep::Continue(t) = acc.step(&init, &no_accounts).unwrap() else {
        panic!()
    };
    let NegotiationToken::Resp(r) = spnego::decode(&t).unwrap() else {
        panic!()
    };
    assert_eq!(r.neg_state, Some(NegState::AcceptIncomplete));
    assert_eq!(r.supported_mech, Some(OID_KRB5));
    let next = spnego::encode_resp(None, None, Some(b"good"), None);
    let (_, identity, ..) = done(acc.step(&next, &no_accounts).unwrap());
    assert_eq!(identity.user, "alice");
}

#[test]
fn a_refused_ticket_keeps_its_status_and_reason_and_ends_the_exchange() {
    let mut acc = Acceptor::new(cfg(true, true), [1; 8], 5);
    let init = spnego::encode_init(&mechs(&[OID_KRB5]), b"replayed");
    let err = acc.step(&init, &no_accounts).unwrap_err();
    assert_eq!(err.nt_status(), NtStatus::LOGON_FAILURE);
    assert!(err.to_string().contains("replay"), "{err}");
    assert_eq!(
        acc.step(&init, &no_accounts).unwrap_err(),
        AuthError::OutOfSequence
    );
}

#[test]
fn ntlm_first_still_gets_ntlm_when_kerberos_is_configured() {
    let mut acc = Acceptor::new(cfg(true, true), [1; 8], 5);
    let init = spnego::encode_init_without_token(&mechs(&[OID_NTLMSSP, OID_KRB5]));
    let AcceptStep::Continue(t) = acc.step(&init, &no_accounts).unwrap() else {
        panic!()
    };
    let NegotiationToken::Resp(r) = spnego::decode(&t).unwrap() else {
        panic!()
    };
    assert_eq!(r.supported_mech, Some(OID_NTLMSSP));
}

#[test]
fn ntlm_off_blocks_ntlm_in_spnego_and_raw() {
    let mut acc = Acceptor::new(cfg(true, false), [1; 8], 5);
    let init = spnego::encode_init(&mechs(&[OID_NTLMSSP, OID_KRB5]), b"NTLMSSP\0");
    let err = acc.step(&init, &no_accounts).unwrap_err();
    assert_eq!(err, AuthError::NtlmBlocked);
    assert_eq!(err.nt_status(), NtStatus::NTLM_BLOCKED);

    let mut acc = Acceptor::new(cfg(true, false), [1; 8], 5);
    let raw = crate::Initiator::with_randomness(
        crate::Credentials::with_password("user", "", "Password", "W"),
        [4; 8],
        [6; 16],
        0,
    )
    .raw_ntlmssp()
    .first_token();
    assert_eq!(
        acc.step(&raw, &no_accounts).unwrap_err(),
        AuthError::NtlmBlocked
    );

    let mut acc = Acceptor::new(cfg(true, false), [1; 8], 5);
    let init = spnego::encode_init(&mechs(&[&[0x2a, 0x03]]), b"x");
    assert_eq!(
        acc.step(&init, &no_accounts).unwrap_err(),
        AuthError::NoCommonMechanism
    );
}

#[test]
fn the_negotiate_hint_lists_what_is_accepted() {
    let list = |kerberos, ntlm| {
        let t = crate::spnego_init_token(kerberos, ntlm);
        let NegotiationToken::Init(init) = spnego::decode(&t).unwrap() else {
            panic!()
        };
        init.mech_types
            .iter()
            .map(|m| m.to_vec())
            .collect::<Vec<_>>()
    };
    assert_eq!(list(false, true), vec![OID_NTLMSSP.to_vec()]);
    assert_eq!(
        list(true, true),
        vec![
            OID_MS_KRB5.to_vec(),
            OID_KRB5.to_vec(),
            OID_NTLMSSP.to_vec()
        ]
    );
    assert_eq!(
        list(true, false),
        vec![OID_MS_KRB5.to_vec(), OID_KRB5.to_vec()]
    );
}
