//! The small slice of ASN.1 DER (X.690) that SPNEGO needs: single-byte tags, definite lengths.
//!
//! The reader is not recursive: callers descend one known level at a time, so nesting depth is
//! fixed by the SPNEGO grammar in `spnego.rs` and hostile input cannot make us recurse.
//! Indefinite lengths (BER) and multi-byte tags are refused; neither is legal in SPNEGO's DER.

use crate::AuthError;

pub(crate) const TAG_OCTET_STRING: u8 = 0x04;
pub(crate) const TAG_OID: u8 = 0x06;
pub(crate) const TAG_ENUMERATED: u8 = 0x0a;
pub(crate) const TAG_GENERAL_STRING: u8 = 0x1b;
pub(crate) const TAG_SEQUENCE: u8 = 0x30;
pub(crate) const TAG_APPLICATION_0: u8 = 0x60;

/// Context-specific constructed tag `[n]`.
pub(crate) const fn ctx(n: u8) -> u8 {
    0xa0 | n
}

fn bad(what: &'static str) -> AuthError {
    AuthError::InvalidToken(what)
}

/// A cursor over DER-encoded TLVs.
#[derive(Clone, Debug)]
pub(crate) struct DerReader<'a> {
    buf: &'a [u8],
}

impl<'a> DerReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Reads one TLV; returns `(tag, contents, whole encoding)`.
    pub(crate) fn any(&mut self) -> Result<(u8, &'a [u8], &'a [u8]), AuthError> {
        let whole_start = self.buf;
        let (&tag, rest) = self.buf.split_first().ok_or(bad("DER: truncated tag"))?;
        if tag & 0x1f == 0x1f {
            return Err(bad("DER: multi-byte tag"));
        }
        let (&first, mut rest) = rest.split_first().ok_or(bad("DER: truncated length"))?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            // 0x80 is BER's indefinite form; more than 4 length octets is never needed under our cap.
            if n == 0 || n > 4 {
                return Err(bad("DER: unsupported length form"));
            }
            let (octets, after) = rest
                .split_at_checked(n)
                .ok_or(bad("DER: truncated length"))?;
            rest = after;
            octets
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
        };
        let (contents, after) = rest
            .split_at_checked(len)
            .ok_or(bad("DER: length past end"))?;
        let header_len = whole_start.len() - rest.len();
        let whole = whole_start
            .get(..header_len + len)
            .ok_or(bad("DER: length past end"))?;
        self.buf = after;
        Ok((tag, contents, whole))
    }

    /// Reads one TLV that must carry `tag`; returns its contents.
    pub(crate) fn expect(&mut self, tag: u8, what: &'static str) -> Result<&'a [u8], AuthError> {
        let (t, contents, _) = self.any()?;
        if t != tag {
            return Err(bad(what));
        }
        Ok(contents)
    }

    /// Like [`Self::expect`] but also returns the whole encoding (needed where the MIC covers it).
    pub(crate) fn expect_whole(
        &mut self,
        tag: u8,
        what: &'static str,
    ) -> Result<(&'a [u8], &'a [u8]), AuthError> {
        let (t, contents, whole) = self.any()?;
        if t != tag {
            return Err(bad(what));
        }
        Ok((contents, whole))
    }
}

/// Appends a TLV with a definite, minimal length.
pub(crate) fn put(out: &mut Vec<u8>, tag: u8, contents: &[u8]) {
    out.push(tag);
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = (len as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        let significant = bytes.get(skip..).unwrap_or_default();
        out.push(0x80 | significant.len() as u8);
        out.extend_from_slice(significant);
    }
    out.extend_from_slice(contents);
}

/// A TLV as a fresh vector.
pub(crate) fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(contents.len() + 6);
    put(&mut v, tag, contents);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_in_short_and_long_form() {
        for len in [0usize, 1, 0x7f, 0x80, 0xff, 0x100, 0x1234, 0x10000] {
            let contents = vec![0xabu8; len];
            let enc = tlv(TAG_OCTET_STRING, &contents);
            let mut r = DerReader::new(&enc);
            let (tag, c, whole) = r.any().unwrap();
            assert_eq!(tag, TAG_OCTET_STRING);
            assert_eq!(c.len(), len);
            assert_eq!(whole, &enc[..]);
            assert!(r.is_empty());
        }
        // Minimal long form: 0x80 takes one length octet, 0x100 two.
        assert_eq!(&tlv(4, &[0; 0x80])[..3], &[4, 0x81, 0x80]);
        assert_eq!(&tlv(4, &[0; 0x100])[..4], &[4, 0x82, 0x01, 0x00]);
    }

    #[test]
    fn hostile_encodings_are_errors() {
        let cases: &[&[u8]] = &[
            &[],
            &[0x30],
            &[0x30, 0x05, 1, 2],                   // length past end
            &[0x30, 0x80, 0, 0],                   // indefinite length
            &[0x30, 0x85, 1, 1, 1, 1, 1],          // 5 length octets
            &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff], // 4 GiB claimed
            &[0x1f, 0x01, 0x00],                   // multi-byte tag
            &[0x30, 0x82, 0x01],                   // truncated length octets
        ];
        for c in cases {
            assert!(DerReader::new(c).any().is_err(), "{c:02x?}");
        }
    }

    #[test]
    fn expect_checks_the_tag() {
        let enc = tlv(TAG_SEQUENCE, &[]);
        assert!(DerReader::new(&enc).expect(TAG_OID, "x").is_err());
        assert!(DerReader::new(&enc).expect(TAG_SEQUENCE, "x").is_ok());
    }
}
