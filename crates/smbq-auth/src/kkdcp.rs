//! MS-KKDCP 2.2.2 KDC-PROXY-MESSAGE, the body of a Kerberos KDC proxy request and response:
//!
//! ```text
//! KDC-PROXY-MESSAGE ::= SEQUENCE {
//!     kerb-message   [0] OCTET STRING,      -- a KDC message with its 4-byte TCP length
//!     target-domain  [1] KERB-REALM OPTIONAL,
//!     dclocator-hint [2] INTEGER OPTIONAL
//! }
//! ```

use crate::AuthError;
use crate::der::{DerReader, TAG_GENERAL_STRING, TAG_OCTET_STRING, TAG_SEQUENCE, ctx, put, tlv};

/// A decoded request.
#[derive(Debug, PartialEq, Eq)]
pub struct ProxyRequest<'a> {
    /// The KDC message with its RFC 4120 section 7.2.2 length prefix, forwarded as is.
    pub kerb_message: &'a [u8],
    /// The realm the message is for: which KDCs it goes to, and what the allow-list checks.
    pub realm: String,
}

fn bad(what: &'static str) -> AuthError {
    AuthError::InvalidToken(what)
}

/// Decodes a proxy request. MS-KKDCP 3.2.5.1: a request names its realm, and the message
/// inside carries the TCP length prefix, which must match.
pub fn decode_request(body: &[u8]) -> Result<ProxyRequest<'_>, AuthError> {
    let mut outer = DerReader::new(body);
    let seq = outer.expect(TAG_SEQUENCE, "KKDCP: expected a SEQUENCE")?;
    if !outer.is_empty() {
        return Err(bad("KKDCP: bytes after the message"));
    }
    let mut fields = DerReader::new(seq);
    let kerb = fields.expect(ctx(0), "KKDCP: expected kerb-message [0]")?;
    let kerb_message = DerReader::new(kerb).expect(TAG_OCTET_STRING, "KKDCP: kerb-message")?;
    let (prefix, message) = kerb_message
        .split_first_chunk::<4>()
        .ok_or(bad("KKDCP: kerb-message shorter than its length prefix"))?;
    if usize::try_from(u32::from_be_bytes(*prefix)).ok() != Some(message.len())
        || message.is_empty()
    {
        return Err(bad("KKDCP: kerb-message length prefix does not match"));
    }
    let mut realm = None;
    while !fields.is_empty() {
        let (tag, contents, _) = fields.any()?;
        match tag {
            t if t == ctx(1) && realm.is_none() => {
                let r =
                    DerReader::new(contents).expect(TAG_GENERAL_STRING, "KKDCP: target-domain")?;
                let r = std::str::from_utf8(r).map_err(|_| bad("KKDCP: realm is not text"))?;
                if r.is_empty() || r.len() > 255 || r.chars().any(|c| c.is_control()) {
                    return Err(bad("KKDCP: unusable realm"));
                }
                realm = Some(r.to_owned());
            }
            // The DC locator hint is for Windows' own DC discovery; KDCs here are configured.
            t if t == ctx(2) => {}
            _ => return Err(bad("KKDCP: unexpected field")),
        }
    }
    Ok(ProxyRequest {
        kerb_message,
        realm: realm.ok_or(bad("KKDCP: no target-domain"))?,
    })
}

/// A proxy response carrying the KDC's reply, `framed` with its 4-byte length prefix.
pub fn encode_response(framed: &[u8]) -> Vec<u8> {
    let mut seq = Vec::with_capacity(framed.len() + 16);
    put(&mut seq, ctx(0), &tlv(TAG_OCTET_STRING, framed));
    tlv(TAG_SEQUENCE, &seq)
}

/// A request as a client sends it (tests, and smbq's own client one day).
pub fn encode_request(framed: &[u8], realm: &str) -> Vec<u8> {
    let mut seq = Vec::new();
    put(&mut seq, ctx(0), &tlv(TAG_OCTET_STRING, framed));
    put(&mut seq, ctx(1), &tlv(TAG_GENERAL_STRING, realm.as_bytes()));
    tlv(TAG_SEQUENCE, &seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(msg: &[u8]) -> Vec<u8> {
        let mut v = (msg.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(msg);
        v
    }

    #[test]
    fn requests_round_trip() {
        let f = framed(b"\x6a\x03AS-REQ");
        let body = encode_request(&f, "SMBQ.TEST");
        let r = decode_request(&body).unwrap();
        assert_eq!(r.kerb_message, &f[..]);
        assert_eq!(r.realm, "SMBQ.TEST");
        let resp = encode_response(&f);
        let mut rd = DerReader::new(&resp);
        let seq = rd.expect(TAG_SEQUENCE, "").unwrap();
        let kerb = DerReader::new(seq).expect(ctx(0), "").unwrap();
        assert_eq!(
            DerReader::new(kerb).expect(TAG_OCTET_STRING, "").unwrap(),
            &f[..]
        );
    }

    #[test]
    fn hint_is_accepted_and_ignored() {
        let f = framed(b"x");
        let mut seq = Vec::new();
        put(&mut seq, ctx(0), &tlv(TAG_OCTET_STRING, &f));
        put(&mut seq, ctx(1), &tlv(TAG_GENERAL_STRING, b"R"));
        put(&mut seq, ctx(2), &tlv(0x02, &[1]));
        assert_eq!(decode_request(&tlv(TAG_SEQUENCE, &seq)).unwrap().realm, "R");
    }

    #[test]
    fn malformed_requests_are_refused() {
        let f = framed(b"msg");
        let no_realm = {
            let mut seq = Vec::new();
            put(&mut seq, ctx(0), &tlv(TAG_OCTET_STRING, &f));
            tlv(TAG_SEQUENCE, &seq)
        };
        let mut trailing = encode_request(&f, "R");
        trailing.push(0);
        let mut bad_prefix = f.clone();
        bad_prefix[3] = 9;
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            b"GET / HTTP/1.1".to_vec(),
            no_realm,
            trailing,
            encode_request(&bad_prefix, "R"),
            encode_request(&framed(b""), "R"),
            encode_request(&[0, 0], "R"),
            encode_request(&f, ""),
            encode_request(&f, "BAD\nREALM"),
        ];
        for c in cases {
            assert!(decode_request(&c).is_err(), "{c:02x?}");
        }
    }
}
