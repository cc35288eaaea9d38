//! NTLMSSP message layouts (MS-NLMP 2.2.1) and AV_PAIR lists (MS-NLMP 2.2.2.1).

use smbq_wire::cursor::{Reader, Writer, slice_at};

use crate::AuthError;

/// MS-NLMP 2.2.1: every message starts with this signature.
pub(crate) const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";

/// MS-NLMP 2.2.2.5 NEGOTIATE flags.
pub(crate) mod flags {
    pub const UNICODE: u32 = 0x0000_0001;
    pub const OEM: u32 = 0x0000_0002;
    pub const REQUEST_TARGET: u32 = 0x0000_0004;
    pub const SIGN: u32 = 0x0000_0010;
    pub const SEAL: u32 = 0x0000_0020;
    pub const NTLM: u32 = 0x0000_0200;
    pub const ANONYMOUS: u32 = 0x0000_0800;
    pub const ALWAYS_SIGN: u32 = 0x0000_8000;
    pub const TARGET_TYPE_SERVER: u32 = 0x0002_0000;
    pub const EXTENDED_SESSIONSECURITY: u32 = 0x0008_0000;
    pub const TARGET_INFO: u32 = 0x0080_0000;
    pub const VERSION: u32 = 0x0200_0000;
    pub const NEG_128: u32 = 0x2000_0000;
    pub const KEY_EXCH: u32 = 0x4000_0000;
    pub const NEG_56: u32 = 0x8000_0000;
}

/// MS-NLMP 2.2.2.1 AvId values.
pub(crate) mod av {
    pub const EOL: u16 = 0;
    pub const NB_COMPUTER_NAME: u16 = 1;
    pub const NB_DOMAIN_NAME: u16 = 2;
    pub const DNS_COMPUTER_NAME: u16 = 3;
    pub const DNS_DOMAIN_NAME: u16 = 4;
    pub const FLAGS: u16 = 6;
    pub const TIMESTAMP: u16 = 7;
    /// MsvAvFlags bit: the AUTHENTICATE message carries a MIC.
    pub const FLAG_MIC_PRESENT: u32 = 0x2;
}

pub(crate) const MSG_NEGOTIATE: u32 = 1;
pub(crate) const MSG_CHALLENGE: u32 = 2;
pub(crate) const MSG_AUTHENTICATE: u32 = 3;

/// Offset of the MIC in an AUTHENTICATE message (MS-NLMP 2.2.1.3: after the 8-byte Version).
pub(crate) const MIC_OFFSET: usize = 72;
const AUTH_HEADER_NO_MIC: usize = 72;
const AUTH_HEADER_WITH_MIC: usize = 88;
const CHALLENGE_HEADER: usize = 56;
const NEGOTIATE_HEADER: usize = 40;
/// More AV pairs than this is not a real target info.
const MAX_AV_PAIRS: usize = 64;

/// MS-NLMP 2.2.2.10 VERSION. Informational only; we report Windows Server 2022 (10.0.20348), as
/// some clients gate features on it.
pub(crate) const VERSION: [u8; 8] = [10, 0, 0x7c, 0x4f, 0, 0, 0, 0x0f];

pub(crate) fn is_ntlmssp(token: &[u8]) -> bool {
    token.starts_with(SIGNATURE)
}

fn header(msg: &[u8], expected_type: u32) -> Result<Reader<'_>, AuthError> {
    let mut r = Reader::new(msg);
    if r.bytes(8)? != SIGNATURE {
        return Err(AuthError::InvalidToken("NTLMSSP: bad signature"));
    }
    if r.u32()? != expected_type {
        return Err(AuthError::InvalidToken("NTLMSSP: unexpected message type"));
    }
    Ok(r)
}

/// Reads a (Len, MaxLen, Offset) field triple and returns the referenced payload bytes.
fn sec_buf<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], AuthError> {
    let len = r.u16()?;
    let _max = r.u16()?;
    let offset = r.u32()?;
    Ok(slice_at(r.whole(), offset as usize, usize::from(len))?)
}

/// MS-NLMP 2.2.1.1 NEGOTIATE_MESSAGE. The domain/workstation fields are range-checked, then
/// ignored (they are informational).
pub(crate) fn decode_negotiate(msg: &[u8]) -> Result<u32, AuthError> {
    let mut r = header(msg, MSG_NEGOTIATE)?;
    let neg_flags = r.u32()?;
    let _domain = sec_buf(&mut r)?;
    let _workstation = sec_buf(&mut r)?;
    Ok(neg_flags)
}

pub(crate) fn encode_negotiate(neg_flags: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(NEGOTIATE_HEADER);
    w.bytes(SIGNATURE).u32(MSG_NEGOTIATE).u32(neg_flags);
    // Empty DomainNameFields and WorkstationFields, pointing at the end of the header.
    for _ in 0..2 {
        w.u16(0).u16(0).u32(NEGOTIATE_HEADER as u32);
    }
    w.bytes(&VERSION);
    w.into_vec()
}

/// MS-NLMP 2.2.1.2 CHALLENGE_MESSAGE.
#[derive(Debug)]
pub(crate) struct Challenge<'a> {
    pub flags: u32,
    pub server_challenge: [u8; 8],
    pub target_info: &'a [u8],
}

pub(crate) fn decode_challenge(msg: &[u8]) -> Result<Challenge<'_>, AuthError> {
    let mut r = header(msg, MSG_CHALLENGE)?;
    let _target_name = sec_buf(&mut r)?;
    let flags = r.u32()?;
    let server_challenge = r.array()?;
    r.skip(8)?;
    let target_info = sec_buf(&mut r)?;
    Ok(Challenge {
        flags,
        server_challenge,
        target_info,
    })
}

pub(crate) fn encode_challenge(
    neg_flags: u32,
    target_name: &[u8],
    server_challenge: &[u8; 8],
    target_info: &[u8],
) -> Vec<u8> {
    let mut w = Writer::with_capacity(CHALLENGE_HEADER + target_name.len() + target_info.len());
    let name_off = CHALLENGE_HEADER;
    let info_off = name_off + target_name.len();
    w.bytes(SIGNATURE).u32(MSG_CHALLENGE);
    w.u16(target_name.len() as u16)
        .u16(target_name.len() as u16)
        .u32(name_off as u32);
    w.u32(neg_flags).bytes(server_challenge).zeros(8);
    w.u16(target_info.len() as u16)
        .u16(target_info.len() as u16)
        .u32(info_off as u32);
    if neg_flags & flags::VERSION != 0 {
        w.bytes(&VERSION);
    } else {
        w.zeros(8);
    }
    w.bytes(target_name).bytes(target_info);
    w.into_vec()
}

/// MS-NLMP 2.2.1.3 AUTHENTICATE_MESSAGE, borrowed from the input.
#[derive(Debug)]
pub(crate) struct Authenticate<'a> {
    pub lm_response: &'a [u8],
    pub nt_response: &'a [u8],
    pub domain: &'a [u8],
    pub user: &'a [u8],
    pub encrypted_session_key: &'a [u8],
    pub flags: u32,
}

pub(crate) fn decode_authenticate(msg: &[u8]) -> Result<Authenticate<'_>, AuthError> {
    let mut r = header(msg, MSG_AUTHENTICATE)?;
    let lm_response = sec_buf(&mut r)?;
    let nt_response = sec_buf(&mut r)?;
    let domain = sec_buf(&mut r)?;
    let user = sec_buf(&mut r)?;
    let _workstation = sec_buf(&mut r)?;
    let encrypted_session_key = sec_buf(&mut r)?;
    let flags = r.u32()?;
    Ok(Authenticate {
        lm_response,
        nt_response,
        domain,
        user,
        encrypted_session_key,
        flags,
    })
}

/// Field values of an AUTHENTICATE message to encode.
pub(crate) struct AuthenticateFields<'a> {
    pub lm_response: &'a [u8],
    pub nt_response: &'a [u8],
    pub domain: &'a [u8],
    pub user: &'a [u8],
    pub workstation: &'a [u8],
    pub encrypted_session_key: &'a [u8],
    pub flags: u32,
    /// Reserve the 16-byte MIC field (zeroed; the caller patches it in at [`MIC_OFFSET`]).
    pub with_mic: bool,
}

/// Payload order follows the MS-NLMP 4.2.4.3 example: domain, user, workstation, LM, NT, key.
pub(crate) fn encode_authenticate(f: &AuthenticateFields<'_>) -> Vec<u8> {
    let head = if f.with_mic {
        AUTH_HEADER_WITH_MIC
    } else {
        AUTH_HEADER_NO_MIC
    };
    let payload: [&[u8]; 6] = [
        f.domain,
        f.user,
        f.workstation,
        f.lm_response,
        f.nt_response,
        f.encrypted_session_key,
    ];
    let mut offsets = [0usize; 6];
    let mut at = head;
    for (o, p) in offsets.iter_mut().zip(payload) {
        *o = at;
        at += p.len();
    }
    let mut w = Writer::with_capacity(at);
    w.bytes(SIGNATURE).u32(MSG_AUTHENTICATE);
    // Header field order differs from payload order: LM, NT, domain, user, workstation, key.
    for i in [3usize, 4, 0, 1, 2, 5] {
        let (len, off) = match (payload.get(i), offsets.get(i)) {
            (Some(p), Some(&o)) => (p.len() as u16, o as u32),
            _ => (0, head as u32),
        };
        w.u16(len).u16(len).u32(off);
    }
    w.u32(f.flags).bytes(&VERSION);
    if f.with_mic {
        w.zeros(16);
    }
    for p in payload {
        w.bytes(p);
    }
    w.into_vec()
}

/// Parses an AV_PAIR list up to MsvAvEOL (MS-NLMP 2.2.2.1). A list that simply ends without EOL
/// is accepted (some peers omit it); a pair running past the end is not.
pub(crate) fn parse_av_pairs(mut b: &[u8]) -> Result<Vec<(u16, &[u8])>, AuthError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let mut r = Reader::new(b);
        let id = r.u16()?;
        let len = r.u16()?;
        let value = r.bytes(usize::from(len))?;
        if id == av::EOL {
            break;
        }
        if out.len() == MAX_AV_PAIRS {
            return Err(AuthError::InvalidToken("NTLMSSP: too many AV pairs"));
        }
        out.push((id, value));
        b = r.rest();
    }
    Ok(out)
}

pub(crate) fn av_value<'a>(pairs: &[(u16, &'a [u8])], id: u16) -> Option<&'a [u8]> {
    pairs.iter().find(|(i, _)| *i == id).map(|(_, v)| *v)
}

pub(crate) fn put_av(w: &mut Writer, id: u16, value: &[u8]) {
    w.u16(id).u16(value.len() as u16).bytes(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiate_round_trip() {
        let m = encode_negotiate(0xe208_8297);
        assert_eq!(m.len(), NEGOTIATE_HEADER);
        assert_eq!(decode_negotiate(&m).unwrap(), 0xe208_8297);
    }

    #[test]
    fn challenge_round_trip() {
        let m = encode_challenge(
            flags::VERSION | flags::UNICODE,
            b"S\0",
            &[7; 8],
            &[0, 0, 0, 0],
        );
        let c = decode_challenge(&m).unwrap();
        assert_eq!(c.server_challenge, [7; 8]);
        assert_eq!(c.target_info, &[0, 0, 0, 0]);
        assert_eq!(c.flags, flags::VERSION | flags::UNICODE);
    }

    #[test]
    fn authenticate_round_trip_with_and_without_mic() {
        for with_mic in [false, true] {
            let m = encode_authenticate(&AuthenticateFields {
                lm_response: &[1; 24],
                nt_response: &[2; 50],
                domain: b"D\0",
                user: b"U\0",
                workstation: b"W\0",
                encrypted_session_key: &[3; 16],
                flags: 0x1234_5678,
                with_mic,
            });
            let a = decode_authenticate(&m).unwrap();
            assert_eq!(a.lm_response, &[1; 24]);
            assert_eq!(a.nt_response, &[2; 50]);
            assert_eq!(a.domain, b"D\0");
            assert_eq!(a.user, b"U\0");
            assert_eq!(a.encrypted_session_key, &[3; 16]);
            assert_eq!(a.flags, 0x1234_5678);
            let first_payload = if with_mic { 88 } else { 72 };
            assert_eq!(&m[first_payload..first_payload + 2], b"D\0");
        }
    }

    #[test]
    fn wrong_signature_or_type_is_rejected() {
        let mut m = encode_negotiate(0);
        assert!(decode_challenge(&m).is_err());
        m[0] = b'X';
        assert!(decode_negotiate(&m).is_err());
    }

    #[test]
    fn av_pairs_are_bounds_checked() {
        assert_eq!(
            parse_av_pairs(&[1, 0, 2, 0, b'a', 0, 0, 0, 0, 0]).unwrap(),
            vec![(1, &b"a\0"[..])]
        );
        assert!(parse_av_pairs(&[1, 0, 9, 0, b'a']).is_err());
        assert!(parse_av_pairs(&[1]).is_err());
        let many: Vec<u8> = (0..100).flat_map(|_| [9u8, 0, 0, 0]).collect();
        assert!(parse_av_pairs(&many).is_err());
    }
}
