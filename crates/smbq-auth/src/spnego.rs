//! SPNEGO (RFC 4178, with the NegTokenInit2 variant of MS-SPNG 2.2.1) framing of NTLMSSP tokens.

use crate::AuthError;
use crate::der::{
    DerReader, TAG_APPLICATION_0, TAG_ENUMERATED, TAG_GENERAL_STRING, TAG_OCTET_STRING, TAG_OID,
    TAG_SEQUENCE, ctx, put, tlv,
};

/// DER contents of OID 1.3.6.1.5.5.2 (SPNEGO, RFC 4178 section 3).
pub(crate) const OID_SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
/// DER contents of OID 1.3.6.1.4.1.311.2.2.10 (NTLMSSP, MS-NLMP 1.9).
pub(crate) const OID_NTLMSSP: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];

/// A client offering more mechanisms than this is not one we can talk to anyway.
const MAX_MECH_TYPES: usize = 32;

/// RFC 4178 section 4.2.2 negState.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NegState {
    AcceptCompleted = 0,
    AcceptIncomplete = 1,
    Reject = 2,
    RequestMic = 3,
}

impl NegState {
    fn from_u8(v: u8) -> Result<Self, AuthError> {
        Ok(match v {
            0 => Self::AcceptCompleted,
            1 => Self::AcceptIncomplete,
            2 => Self::Reject,
            3 => Self::RequestMic,
            _ => return Err(AuthError::InvalidToken("SPNEGO: unknown negState")),
        })
    }
}

/// RFC 4178 section 4.2.1 NegTokenInit (the fields an acceptor uses).
#[derive(Debug)]
pub(crate) struct NegTokenInit<'a> {
    /// OID contents, in the initiator's order of preference.
    pub mech_types: Vec<&'a [u8]>,
    /// The whole DER `MechTypeList` SEQUENCE: what mechListMIC covers (RFC 4178 section 5).
    pub mech_types_der: &'a [u8],
    pub mech_token: Option<&'a [u8]>,
}

/// RFC 4178 section 4.2.2 NegTokenResp.
#[derive(Debug, Default)]
pub(crate) struct NegTokenResp<'a> {
    pub neg_state: Option<NegState>,
    pub supported_mech: Option<&'a [u8]>,
    pub response_token: Option<&'a [u8]>,
    pub mech_list_mic: Option<&'a [u8]>,
}

#[derive(Debug)]
pub(crate) enum NegotiationToken<'a> {
    Init(NegTokenInit<'a>),
    Resp(NegTokenResp<'a>),
}

fn bad(what: &'static str) -> AuthError {
    AuthError::InvalidToken(what)
}

/// Decodes a GSS-API InitialContextToken (RFC 2743 section 3.1) carrying SPNEGO, or a bare
/// NegTokenResp (subsequent tokens are not wrapped, RFC 4178 section 4.2).
pub(crate) fn decode(token: &[u8]) -> Result<NegotiationToken<'_>, AuthError> {
    let mut outer = DerReader::new(token);
    let (tag, contents, _) = outer.any()?;
    if !outer.is_empty() {
        return Err(bad("SPNEGO: trailing bytes"));
    }
    let choice = if tag == TAG_APPLICATION_0 {
        let mut r = DerReader::new(contents);
        if r.expect(TAG_OID, "SPNEGO: missing mech OID")? != OID_SPNEGO {
            return Err(bad("SPNEGO: not the SPNEGO OID"));
        }
        let (t, c, _) = r.any()?;
        if !r.is_empty() {
            return Err(bad("SPNEGO: trailing bytes"));
        }
        (t, c)
    } else {
        (tag, contents)
    };
    match choice {
        (t, c) if t == ctx(0) => decode_init(c).map(NegotiationToken::Init),
        (t, c) if t == ctx(1) => decode_resp(c).map(NegotiationToken::Resp),
        _ => Err(bad("SPNEGO: not a NegotiationToken")),
    }
}

fn decode_init(explicit: &[u8]) -> Result<NegTokenInit<'_>, AuthError> {
    let mut outer = DerReader::new(explicit);
    let seq = outer.expect(TAG_SEQUENCE, "NegTokenInit: not a SEQUENCE")?;
    let mut r = DerReader::new(seq);
    let mut init = NegTokenInit {
        mech_types: Vec::new(),
        mech_types_der: &[],
        mech_token: None,
    };
    let mut have_mech_types = false;
    while !r.is_empty() {
        let (tag, contents, _) = r.any()?;
        match tag {
            t if t == ctx(0) => {
                let mut m = DerReader::new(contents);
                let (list, whole) = m.expect_whole(TAG_SEQUENCE, "mechTypes: not a SEQUENCE")?;
                init.mech_types_der = whole;
                let mut oids = DerReader::new(list);
                while !oids.is_empty() {
                    if init.mech_types.len() == MAX_MECH_TYPES {
                        return Err(bad("mechTypes: too many"));
                    }
                    init.mech_types
                        .push(oids.expect(TAG_OID, "mechTypes: not an OID")?);
                }
                have_mech_types = true;
            }
            t if t == ctx(2) => {
                let mut m = DerReader::new(contents);
                init.mech_token = Some(m.expect(TAG_OCTET_STRING, "mechToken: not OCTET STRING")?);
            }
            // reqFlags [1], mechListMIC [3] (or NegTokenInit2's negHints [3] / MIC [4]) carry nothing
            // an NTLM acceptor acts on in the first leg.
            _ => {}
        }
    }
    if !have_mech_types {
        return Err(bad("NegTokenInit: no mechTypes"));
    }
    Ok(init)
}

fn decode_resp(explicit: &[u8]) -> Result<NegTokenResp<'_>, AuthError> {
    let mut outer = DerReader::new(explicit);
    let seq = outer.expect(TAG_SEQUENCE, "NegTokenResp: not a SEQUENCE")?;
    let mut r = DerReader::new(seq);
    let mut resp = NegTokenResp::default();
    while !r.is_empty() {
        let (tag, contents, _) = r.any()?;
        let mut inner = DerReader::new(contents);
        match tag {
            t if t == ctx(0) => {
                let v = inner.expect(TAG_ENUMERATED, "negState: not ENUMERATED")?;
                let &[b] = v else {
                    return Err(bad("negState: bad length"));
                };
                resp.neg_state = Some(NegState::from_u8(b)?);
            }
            t if t == ctx(1) => {
                resp.supported_mech = Some(inner.expect(TAG_OID, "supportedMech: not an OID")?);
            }
            t if t == ctx(2) => {
                resp.response_token =
                    Some(inner.expect(TAG_OCTET_STRING, "responseToken: not OCTET STRING")?);
            }
            t if t == ctx(3) => {
                resp.mech_list_mic =
                    Some(inner.expect(TAG_OCTET_STRING, "mechListMIC: not OCTET STRING")?);
            }
            _ => {}
        }
    }
    Ok(resp)
}

/// The DER `MechTypeList` naming only NTLMSSP.
pub(crate) fn ntlm_mech_types_der() -> Vec<u8> {
    tlv(TAG_SEQUENCE, &tlv(TAG_OID, OID_NTLMSSP))
}

fn wrap_initial(neg_token_init_seq: &[u8]) -> Vec<u8> {
    let mut body = tlv(TAG_OID, OID_SPNEGO);
    put(&mut body, ctx(0), neg_token_init_seq);
    tlv(TAG_APPLICATION_0, &body)
}

/// MS-SPNG 2.2.1 NegTokenInit2 as a server sends it in the SMB2 NEGOTIATE response
/// (MS-SMB2 3.3.5.4) and the conventional negHints. mechTypes lists what the server accepts
/// in Windows' order: the two Kerberos OIDs when Kerberos is configured, then NTLMSSP unless
/// it is turned off. Clients read it as a hint (Windows tries Kerberos only if listed).
pub fn spnego_init_token(kerberos: bool, ntlm: bool) -> Vec<u8> {
    let mut mechs = Vec::new();
    if kerberos {
        put(&mut mechs, TAG_OID, crate::kerberos::OID_MS_KRB5);
        put(&mut mechs, TAG_OID, crate::kerberos::OID_KRB5);
    }
    if ntlm || !kerberos {
        put(&mut mechs, TAG_OID, OID_NTLMSSP);
    }
    let mut seq = tlv(ctx(0), &tlv(TAG_SEQUENCE, &mechs));
    let hint_name = tlv(TAG_GENERAL_STRING, b"not_defined_in_RFC4178@please_ignore");
    let hints = tlv(TAG_SEQUENCE, &tlv(ctx(0), &hint_name));
    put(&mut seq, ctx(3), &hints);
    wrap_initial(&tlv(TAG_SEQUENCE, &seq))
}

/// An initiator's NegTokenInit offering `mech_types_der` with an optimistic `mech_token`.
pub(crate) fn encode_init(mech_types_der: &[u8], mech_token: &[u8]) -> Vec<u8> {
    let mut seq = tlv(ctx(0), mech_types_der);
    put(&mut seq, ctx(2), &tlv(TAG_OCTET_STRING, mech_token));
    wrap_initial(&tlv(TAG_SEQUENCE, &seq))
}

/// A NegTokenInit with no optimistic token: the acceptor chooses, then the token follows.
#[cfg(test)]
pub(crate) fn encode_init_without_token(mech_types_der: &[u8]) -> Vec<u8> {
    wrap_initial(&tlv(TAG_SEQUENCE, &tlv(ctx(0), mech_types_der)))
}

/// A NegTokenResp; absent fields are left out, as RFC 4178 section 4.2.2 allows.
pub(crate) fn encode_resp(
    neg_state: Option<NegState>,
    supported_mech: Option<&[u8]>,
    response_token: Option<&[u8]>,
    mech_list_mic: Option<&[u8]>,
) -> Vec<u8> {
    let mut seq = Vec::new();
    if let Some(s) = neg_state {
        put(&mut seq, ctx(0), &tlv(TAG_ENUMERATED, &[s as u8]));
    }
    if let Some(m) = supported_mech {
        put(&mut seq, ctx(1), &tlv(TAG_OID, m));
    }
    if let Some(t) = response_token {
        put(&mut seq, ctx(2), &tlv(TAG_OCTET_STRING, t));
    }
    if let Some(m) = mech_list_mic {
        put(&mut seq, ctx(3), &tlv(TAG_OCTET_STRING, m));
    }
    tlv(ctx(1), &tlv(TAG_SEQUENCE, &seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_token_has_the_expected_shape() {
        let t = spnego_init_token(false, true);
        // Hand-assembled from RFC 4178 / MS-SPNG 2.2.1: lengths counted independently of the encoder.
        let mut expect = vec![0x60, 0x48, 0x06, 0x06, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
        expect.extend_from_slice(&[0xa0, 0x3e, 0x30, 0x3c]);
        expect.extend_from_slice(&[0xa0, 0x0e, 0x30, 0x0c, 0x06, 0x0a]);
        expect.extend_from_slice(OID_NTLMSSP);
        expect.extend_from_slice(&[0xa3, 0x2a, 0x30, 0x28, 0xa0, 0x26, 0x1b, 0x24]);
        expect.extend_from_slice(b"not_defined_in_RFC4178@please_ignore");
        assert_eq!(t, expect);

        let NegotiationToken::Init(init) = decode(&t).unwrap() else {
            panic!("not init")
        };
        assert_eq!(init.mech_types, vec![OID_NTLMSSP]);
        assert_eq!(init.mech_types_der, &ntlm_mech_types_der()[..]);
        assert!(init.mech_token.is_none());
    }

    #[test]
    fn init_round_trip() {
        let t = encode_init(&ntlm_mech_types_der(), b"NTLMSSP\0hello");
        let NegotiationToken::Init(init) = decode(&t).unwrap() else {
            panic!("not init")
        };
        assert_eq!(init.mech_token, Some(&b"NTLMSSP\0hello"[..]));
        assert_eq!(init.mech_types_der, &ntlm_mech_types_der()[..]);
    }

    #[test]
    fn resp_round_trip() {
        let t = encode_resp(
            Some(NegState::AcceptIncomplete),
            Some(OID_NTLMSSP),
            Some(&[1, 2, 3]),
            Some(&[9; 16]),
        );
        let NegotiationToken::Resp(r) = decode(&t).unwrap() else {
            panic!("not resp")
        };
        assert_eq!(r.neg_state, Some(NegState::AcceptIncomplete));
        assert_eq!(r.supported_mech, Some(OID_NTLMSSP));
        assert_eq!(r.response_token, Some(&[1u8, 2, 3][..]));
        assert_eq!(r.mech_list_mic, Some(&[9u8; 16][..]));

        let t = encode_resp(Some(NegState::AcceptCompleted), None, None, None);
        assert_eq!(t, [0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x00]);
    }

    #[test]
    fn malformed_tokens_are_errors() {
        let good = encode_init(&ntlm_mech_types_der(), b"x");
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_oid = good.clone();
        wrong_oid[4] ^= 1;
        assert!(decode(&wrong_oid).is_err());
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        // negState out of range.
        assert!(decode(&[0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x07]).is_err());
        // NegTokenInit without mechTypes.
        assert!(decode(&tlv(ctx(0), &tlv(TAG_SEQUENCE, &[]))).is_err());
    }
}
