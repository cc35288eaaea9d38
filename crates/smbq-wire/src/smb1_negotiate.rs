//! The SMB1 SMB_COM_NEGOTIATE request a client may open with to ask for SMB2 (MS-CIFS
//! 2.2.4.52.1, MS-SMB2 3.3.5.3.1). Only enough SMB1 to find the offered dialect strings.

use crate::cursor::{Reader, Writer, len16};
use crate::error::DecodeError;
use crate::header::{Dialect, SMB1_PROTOCOL_ID};

/// SMB_COM_NEGOTIATE (MS-CIFS 2.2.2.1).
pub const SMB_COM_NEGOTIATE: u8 = 0x72;
/// The SMB1 header is 32 bytes (MS-CIFS 2.2.3.1).
pub const SMB1_HEADER_LEN: usize = 32;
/// Most dialect strings accepted; Windows clients sent about a dozen at most.
pub const MAX_SMB1_DIALECTS: usize = 64;

/// Dialect string that asks for SMB 2.0.2 (MS-SMB2 1.7).
pub const DIALECT_SMB2_002: &[u8] = b"SMB 2.002";
/// Dialect string that asks for SMB 2.1 or later (MS-SMB2 1.7).
pub const DIALECT_SMB2_WILDCARD: &[u8] = b"SMB 2.???";

/// BufferFormat byte before each dialect string (MS-CIFS 2.2.4.52.1).
const DIALECT_BUFFER_FORMAT: u8 = 0x02;

/// True if `msg` starts with the SMB1 protocol id 0xFF 'S' 'M' 'B'.
pub fn is_smb1(msg: &[u8]) -> bool {
    msg.get(..4) == Some(&SMB1_PROTOCOL_ID[..])
}

/// An SMB1 NEGOTIATE request: the dialect strings, as OEM bytes without the 0x02 prefix and
/// the NUL terminator.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Smb1NegotiateRequest<'a> {
    pub dialects: Vec<&'a [u8]>,
}

impl<'a> Smb1NegotiateRequest<'a> {
    /// Decodes a whole SMB1 message (starting at 0xFF 'SMB', without the 4-byte transport
    /// length). Fails unless the command is SMB_COM_NEGOTIATE with WordCount 0.
    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != SMB1_PROTOCOL_ID {
            return Err(DecodeError::BadProtocolId);
        }
        if r.u8()? != SMB_COM_NEGOTIATE {
            return Err(DecodeError::InvalidField { field: "Command" });
        }
        r.seek(SMB1_HEADER_LEN)?;
        if r.u8()? != 0 {
            return Err(DecodeError::InvalidField { field: "WordCount" });
        }
        let byte_count = usize::from(r.u16()?);
        let mut bytes = Reader::new(r.bytes(byte_count)?);
        let mut dialects = Vec::new();
        while bytes.remaining() > 0 {
            if bytes.u8()? != DIALECT_BUFFER_FORMAT {
                return Err(DecodeError::InvalidField {
                    field: "BufferFormat",
                });
            }
            let rest = bytes.rest();
            let nul = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or(DecodeError::InvalidField {
                    field: "DialectString",
                })?;
            if dialects.len() == MAX_SMB1_DIALECTS {
                return Err(DecodeError::TooLong {
                    field: "Dialects",
                    len: dialects.len() + 1,
                    limit: MAX_SMB1_DIALECTS,
                });
            }
            dialects.push(bytes.bytes(nul)?);
            bytes.skip(1)?;
        }
        Ok(Self { dialects })
    }

    /// Encodes the whole SMB1 message (header included), with the header values the
    /// MS-SMB2 4.1 example shows (Flags 0x18, Flags2 0xC853, TID 0xFFFF, PID 0xFEFF).
    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&SMB1_PROTOCOL_ID)
            .u8(SMB_COM_NEGOTIATE)
            .u32(0) // Status
            .u8(0x18) // Flags
            .u16(0xC853) // Flags2
            .u16(0) // PIDHigh
            .zeros(8) // SecurityFeatures
            .u16(0) // Reserved
            .u16(0xFFFF) // TID
            .u16(0xFEFF) // PIDLow
            .u16(0) // UID
            .u16(0); // MID
        let len: usize = self.dialects.iter().map(|d| d.len() + 2).sum();
        w.u8(0).u16(len16(len));
        for d in &self.dialects {
            w.u8(DIALECT_BUFFER_FORMAT).bytes(d).u8(0);
        }
    }

    pub fn best_smb2_reply(&self) -> Option<Dialect> {
        best_smb2_reply(&self.dialects)
    }
}

/// The DialectRevision of the SMB2 NEGOTIATE response a server sends to an SMB1 negotiate
/// (MS-SMB2 3.3.5.3.1): 0x02FF if "SMB 2.???" is offered, 0x0202 if only "SMB 2.002" is,
/// otherwise None (no SMB2 offered: the server disconnects, as it speaks no SMB1).
pub fn best_smb2_reply(dialects: &[&[u8]]) -> Option<Dialect> {
    if dialects.contains(&DIALECT_SMB2_WILDCARD) {
        Some(Dialect::WILDCARD)
    } else if dialects.contains(&DIALECT_SMB2_002) {
        Some(Dialect::SMB2_0_2)
    } else {
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// The dialect list of the MS-SMB2 4.2 example (a multi-protocol negotiate offering
    /// SMB 2.1), assembled by hand from the strings the example lists.
    const WINDOWS_DIALECTS: [&[u8]; 8] = [
        b"PC NETWORK PROGRAM 1.0",
        b"LANMAN1.0",
        b"Windows for Workgroups 3.1a",
        b"LM1.2X002",
        b"LANMAN2.1",
        b"NT LM 0.12",
        b"SMB 2.002",
        b"SMB 2.???",
    ];

    fn hand_assembled(dialects: &[&[u8]]) -> Vec<u8> {
        let mut m = vec![0xFF, b'S', b'M', b'B', 0x72];
        m.extend_from_slice(&[0; 27]); // rest of the 32-byte header
        let mut data = Vec::new();
        for d in dialects {
            data.push(0x02);
            data.extend_from_slice(d);
            data.push(0);
        }
        m.push(0); // WordCount
        m.extend_from_slice(&(data.len() as u16).to_le_bytes());
        m.extend_from_slice(&data);
        m
    }

    #[test]
    fn decodes_windows_style_list() {
        let m = hand_assembled(&WINDOWS_DIALECTS);
        assert!(is_smb1(&m));
        let req = Smb1NegotiateRequest::decode(&m).unwrap();
        assert_eq!(req.dialects, WINDOWS_DIALECTS);
        assert_eq!(req.best_smb2_reply(), Some(Dialect::WILDCARD));
    }

    #[test]
    fn best_reply_rules() {
        assert_eq!(
            best_smb2_reply(&WINDOWS_DIALECTS[..7]),
            Some(Dialect::SMB2_0_2)
        );
        assert_eq!(best_smb2_reply(&WINDOWS_DIALECTS[..6]), None);
        assert_eq!(best_smb2_reply(&[b"SMB 2.???"]), Some(Dialect::WILDCARD));
        assert_eq!(best_smb2_reply(&[]), None);
    }

    #[test]
    fn encode_round_trip() {
        let req = Smb1NegotiateRequest {
            dialects: WINDOWS_DIALECTS.to_vec(),
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(&b[..5], &[0xFF, b'S', b'M', b'B', 0x72]);
        assert_eq!(Smb1NegotiateRequest::decode(&b).unwrap(), req);
        // Body after the header is identical to the hand-assembled one.
        assert_eq!(&b[32..], &hand_assembled(&WINDOWS_DIALECTS)[32..]);
    }

    #[test]
    fn rejects_malformed() {
        let good = hand_assembled(&[b"SMB 2.002"]);
        let mut m = good.clone();
        m[4] = 0x73;
        assert!(Smb1NegotiateRequest::decode(&m).is_err());
        let mut m = good.clone();
        m[32] = 1; // WordCount
        assert!(Smb1NegotiateRequest::decode(&m).is_err());
        let mut m = good.clone();
        m[35] = 0x04; // BufferFormat
        assert!(Smb1NegotiateRequest::decode(&m).is_err());
        let mut m = good.clone();
        *m.last_mut().unwrap() = b'X'; // missing NUL
        assert!(Smb1NegotiateRequest::decode(&m).is_err());
        let mut m = good.clone();
        m[33] = 0xFF; // ByteCount past end
        assert!(Smb1NegotiateRequest::decode(&m).is_err());
        for n in 0..good.len() {
            assert!(Smb1NegotiateRequest::decode(&good[..n]).is_err());
        }
        let many: Vec<&[u8]> = vec![b"x"; MAX_SMB1_DIALECTS + 1];
        assert!(matches!(
            Smb1NegotiateRequest::decode(&hand_assembled(&many)),
            Err(DecodeError::TooLong { .. })
        ));
        assert!(!is_smb1(&[0xFE, b'S', b'M', b'B']));
        assert!(!is_smb1(&[0xFF]));
    }
}
