//! SMB2 SESSION_SETUP request and response (MS-SMB2 2.2.5, 2.2.6).

use crate::cursor::{Reader, Writer, len16, slice_at};
use crate::error::DecodeError;
use crate::header::HEADER_LEN;

/// SESSION_SETUP request Flags (MS-SMB2 2.2.5).
pub mod flags {
    pub const BINDING: u8 = 0x01;
}

/// SESSION_SETUP request SecurityMode (MS-SMB2 2.2.5); one byte here, unlike NEGOTIATE.
pub mod security_mode {
    pub const SIGNING_ENABLED: u8 = 0x01;
    pub const SIGNING_REQUIRED: u8 = 0x02;
}

/// SESSION_SETUP response SessionFlags (MS-SMB2 2.2.6).
pub mod session_flags {
    pub const IS_GUEST: u16 = 0x0001;
    pub const IS_NULL: u16 = 0x0002;
    pub const ENCRYPT_DATA: u16 = 0x0004;
}

/// SMB2 SESSION_SETUP Request (MS-SMB2 2.2.5).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SessionSetupRequest<'a> {
    pub flags: u8,
    pub security_mode: u8,
    /// Only DFS is meaningful here (MS-SMB2 2.2.5).
    pub capabilities: u32,
    pub channel: u32,
    /// The GSS/SPNEGO token.
    pub security_buffer: &'a [u8],
    pub previous_session_id: u64,
}

impl<'a> SessionSetupRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 25;
    const FIXED: usize = 24;

    pub fn is_binding(&self) -> bool {
        self.flags & flags::BINDING != 0
    }

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u8()?;
        let security_mode = r.u8()?;
        let capabilities = r.u32()?;
        let channel = r.u32()?;
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let previous_session_id = r.u64()?;
        let security_buffer = slice_at(msg, off, len)?;
        Ok(Self {
            flags,
            security_mode,
            capabilities,
            channel,
            security_buffer,
            previous_session_id,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.flags)
            .u8(self.security_mode)
            .u32(self.capabilities)
            .u32(self.channel)
            .u16(len16(HEADER_LEN + Self::FIXED))
            .u16(len16(self.security_buffer.len()))
            .u64(self.previous_session_id);
        w.buffer(self.security_buffer);
    }
}

/// SMB2 SESSION_SETUP Response (MS-SMB2 2.2.6).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SessionSetupResponse<'a> {
    pub session_flags: u16,
    pub security_buffer: &'a [u8],
}

impl<'a> SessionSetupResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;
    const FIXED: usize = 8;

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let session_flags = r.u16()?;
        let off = usize::from(r.u16()?);
        let len = usize::from(r.u16()?);
        let security_buffer = slice_at(msg, off, len)?;
        Ok(Self {
            session_flags,
            security_buffer,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u16(self.session_flags)
            .u16(len16(HEADER_LEN + Self::FIXED))
            .u16(len16(self.security_buffer.len()));
        w.buffer(self.security_buffer);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::header::{Command, Header};
    use crate::ntstatus::NtStatus;

    // Messages from the Microsoft Open Specifications blog post "SMB 3.1.1 Pre-authentication
    // integrity in Windows 10" (2015-08-11), as reproduced in the pike project's test vectors.
    const BLOG_SS_REQ1: &str = concat!(
        "FE534D4240000100000000000100800000000000000000000200000000000000FFFE000000000000",
        "00000000000000000000000000000000000000000000000019000001010000000000000058004A00",
        "0000000000000000604806062B0601050502A03E303CA00E300C060A2B06010401823702020AA22A",
        "04284E544C4D5353500001000000978208E200000000000000000000000000000000060380250000",
        "000F",
    );
    const BLOG_SS_RESP1: &str = concat!(
        "FE534D4240000100160000C00100010001000000000000000200000000000000FFFE000000000000",
        "190000000010000000000000000000000000000000000000090000004800B300A181B03081ADA003",
        "0A0101A10C060A2B06010401823702020AA281970481944E544C4D53535000020000000C000C0038",
        "00000015828AE20D1D8BA31179D008000000000000000050005000440000000A0092270000000F53",
        "005500540033003100310002000C0053005500540033003100310001000C00530055005400330031",
        "00310004000C0053005500540033003100310003000C0053005500540033003100310007000800A1",
        "A1F5ADCBAED00100000000",
    );

    #[test]
    fn blog_request_decodes_and_re_encodes() {
        let msg = hex::decode(BLOG_SS_REQ1).unwrap();
        assert_eq!(
            Header::decode(&msg).unwrap().command,
            Command::SESSION_SETUP
        );
        let req = SessionSetupRequest::decode(&msg).unwrap();
        assert_eq!(req.flags, 0);
        assert_eq!(req.security_mode, security_mode::SIGNING_ENABLED);
        assert_eq!(req.capabilities, 1);
        assert_eq!(req.channel, 0);
        assert_eq!(req.previous_session_id, 0);
        assert_eq!(req.security_buffer.len(), 0x4A);
        assert_eq!(req.security_buffer[0], 0x60);
        assert!(!req.is_binding());
        let mut w = Writer::new();
        req.encode(&mut w);
        assert_eq!(hex::encode_upper(w.as_slice()), &BLOG_SS_REQ1[128..]);
    }

    #[test]
    fn blog_response_decodes_and_re_encodes() {
        let msg = hex::decode(BLOG_SS_RESP1).unwrap();
        let h = Header::decode(&msg).unwrap();
        assert_eq!(h.status, NtStatus::MORE_PROCESSING_REQUIRED);
        assert_eq!(h.session_id, 0x0000_1000_0000_0019);
        let resp = SessionSetupResponse::decode(&msg).unwrap();
        assert_eq!(resp.session_flags, 0);
        assert_eq!(resp.security_buffer.len(), 0xB3);
        assert_eq!(&resp.security_buffer[..2], &[0xA1, 0x81]);
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(hex::encode_upper(w.as_slice()), &BLOG_SS_RESP1[128..]);
    }

    #[test]
    fn binding_round_trip_and_hand_assembled() {
        let req = SessionSetupRequest {
            flags: flags::BINDING,
            security_mode: security_mode::SIGNING_REQUIRED,
            capabilities: 0,
            channel: 0,
            security_buffer: b"tok",
            previous_session_id: 0x1122_3344_5566_7788,
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let mut expect = vec![25, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 88, 0, 3, 0];
        expect.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        expect.extend_from_slice(b"tok");
        assert_eq!(w.as_slice(), &expect[..]);
        let mut msg = Header::default().to_bytes();
        msg.extend_from_slice(w.as_slice());
        let back = SessionSetupRequest::decode(&msg).unwrap();
        assert_eq!(back, req);
        assert!(back.is_binding());
    }

    #[test]
    fn empty_buffers() {
        let resp = SessionSetupResponse {
            session_flags: session_flags::IS_GUEST,
            security_buffer: b"",
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(w.len(), 9);
        let mut msg = Header::default().to_bytes();
        msg.extend_from_slice(w.as_slice());
        assert_eq!(SessionSetupResponse::decode(&msg).unwrap(), resp);
        // offset 0, length 0 from a client is an empty buffer.
        let mut body = vec![25, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        body.extend_from_slice(&[0; 8]);
        let mut msg = Header::default().to_bytes();
        msg.extend_from_slice(&body);
        assert_eq!(
            SessionSetupRequest::decode(&msg).unwrap().security_buffer,
            b""
        );
    }

    #[test]
    fn rejects_bad_offsets() {
        let msg = hex::decode(BLOG_SS_REQ1).unwrap();
        let mut m = msg.clone();
        m[HEADER_LEN + 14..HEADER_LEN + 16].copy_from_slice(&0x4Bu16.to_le_bytes());
        assert!(SessionSetupRequest::decode(&m).is_err());
        let mut m = msg.clone();
        m[HEADER_LEN + 12..HEADER_LEN + 14].copy_from_slice(&0xFFFFu16.to_le_bytes());
        assert!(SessionSetupRequest::decode(&m).is_err());
        let mut m = msg.clone();
        m[HEADER_LEN] = 24;
        assert!(matches!(
            SessionSetupRequest::decode(&m),
            Err(DecodeError::StructureSize {
                expected: 25,
                got: 24
            })
        ));
        for n in 0..msg.len() {
            assert!(SessionSetupRequest::decode(&msg[..n]).is_err());
        }
    }
}
