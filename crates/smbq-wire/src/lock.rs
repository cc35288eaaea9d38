//! SMB2 LOCK request and response (MS-SMB2 2.2.26, 2.2.27).

use crate::cursor::{Reader, Writer, len16};
use crate::error::DecodeError;
use crate::file_id::FileId;

/// SMB2_LOCK_ELEMENT Flags (MS-SMB2 2.2.26.1).
pub mod lock_flags {
    pub const SHARED: u32 = 0x0000_0001;
    pub const EXCLUSIVE: u32 = 0x0000_0002;
    pub const UNLOCK: u32 = 0x0000_0004;
    pub const FAIL_IMMEDIATELY: u32 = 0x0000_0010;
}

/// SMB2_LOCK_ELEMENT (MS-SMB2 2.2.26.1): Offset, Length, Flags, 4 reserved bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LockElement {
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
}

impl LockElement {
    pub const LEN: usize = 24;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = r.u64()?;
        let length = r.u64()?;
        let flags = r.u32()?;
        let _reserved = r.u32()?;
        Ok(Self {
            offset,
            length,
            flags,
        })
    }

    fn encode(&self, w: &mut Writer) {
        w.u64(self.offset).u64(self.length).u32(self.flags).u32(0);
    }
}

/// A LOCK request (MS-SMB2 2.2.26).
///
/// LockCount 0 decodes (to an empty `locks`) so that the handler can answer
/// STATUS_INVALID_PARAMETER as 3.3.5.14 requires. There is no cap beyond the u16 count: every
/// element must be present in the message before any is stored, so the allocation never
/// exceeds the message's own size (Samba does the same).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LockRequest {
    /// LockSequenceNumber (low 4 bits) and LockSequenceIndex (high 28 bits); reserved in
    /// SMB 2.0.2.
    pub lock_sequence: u32,
    pub file_id: FileId,
    pub locks: Vec<LockElement>,
}

impl LockRequest {
    /// Counts the fixed fields plus one lock element.
    pub const STRUCTURE_SIZE: u16 = 48;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let count = usize::from(r.u16()?);
        let lock_sequence = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let need = count * LockElement::LEN;
        if r.remaining() < need {
            return Err(DecodeError::Truncated {
                need: r.pos() + need,
                have: msg.len(),
            });
        }
        let mut locks = Vec::with_capacity(count);
        for _ in 0..count {
            locks.push(LockElement::decode(&mut r)?);
        }
        Ok(Self {
            lock_sequence,
            file_id,
            locks,
        })
    }

    /// LockSequenceNumber (MS-SMB2 2.2.26).
    pub fn sequence_number(&self) -> u8 {
        (self.lock_sequence & 0xF) as u8
    }

    /// LockSequenceIndex (MS-SMB2 2.2.26): 0 is reserved, valid indices are 1..=64.
    pub fn sequence_index(&self) -> u32 {
        self.lock_sequence >> 4
    }

    /// Builds the LockSequence field from its parts (`number` keeps its low 4 bits).
    pub fn make_sequence(number: u8, index: u32) -> u32 {
        (index << 4) | u32::from(number & 0xF)
    }

    /// Writes the body. Callers send 1..=65535 locks.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u16(len16(self.locks.len()))
            .u32(self.lock_sequence);
        self.file_id.encode(w);
        for l in self.locks.iter().take(usize::from(u16::MAX)) {
            l.encode(w);
        }
    }
}

crate::body::empty_body! {
    /// A LOCK response (MS-SMB2 2.2.27): StructureSize 4 and a reserved u16.
    LockResponse { structure_size: 4, reserved: 2 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;

    #[test]
    fn request_round_trip_and_layout() {
        let req = LockRequest {
            lock_sequence: LockRequest::make_sequence(3, 17),
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            locks: vec![
                LockElement {
                    offset: 0,
                    length: 10,
                    flags: lock_flags::EXCLUSIVE | lock_flags::FAIL_IMMEDIATELY,
                },
                LockElement {
                    offset: 100,
                    length: 1,
                    flags: lock_flags::UNLOCK,
                },
            ],
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), 24 + 2 * 24);
        assert_eq!(hex::encode(&b[..8]), "3000020013010000");
        assert_eq!(
            hex::encode(&b[24..48]),
            "00000000000000000a000000000000001200000000000000"
        );
        let m = msg(&b);
        let d = LockRequest::decode(&m).unwrap();
        assert_eq!(d, req);
        assert_eq!(d.sequence_number(), 3);
        assert_eq!(d.sequence_index(), 17);
    }

    #[test]
    fn hand_assembled_and_limits() {
        let mut b = vec![48, 0, 1, 0, 0x21, 0, 0, 0];
        b.extend_from_slice(&[0; 16]);
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes()); // reserved, ignored
        let m = msg(&b);
        let d = LockRequest::decode(&m).unwrap();
        assert_eq!(d.sequence_number(), 1);
        assert_eq!(d.sequence_index(), 2);
        assert_eq!(
            d.locks,
            [LockElement {
                offset: u64::MAX,
                length: 1,
                flags: lock_flags::SHARED
            }]
        );
        // LockCount 0 decodes; the handler rejects it.
        let mut z = b.clone();
        z[2] = 0;
        assert!(LockRequest::decode(&msg(&z)).unwrap().locks.is_empty());
        // A count larger than the elements present fails before allocating.
        let mut big = b.clone();
        big[2] = 0xFF;
        big[3] = 0xFF;
        assert!(matches!(
            LockRequest::decode(&msg(&big)),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(LockRequest::decode(&msg(&b[..47])).is_err());
    }

    #[test]
    fn response_round_trip() {
        let mut w = Writer::new();
        LockResponse.encode(&mut w);
        assert_eq!(w.as_slice(), &[4, 0, 0, 0]);
        assert_eq!(
            LockResponse::decode(&msg(w.as_slice())).unwrap(),
            LockResponse
        );
    }
}
