//! SMB2 OPLOCK_BREAK messages (MS-SMB2 2.2.23 - 2.2.25): oplock break notification,
//! acknowledgment and response (all StructureSize 24), lease break notification (44), and
//! lease break acknowledgment and response (36). The command code is shared; StructureSize
//! tells them apart.

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::header::HEADER_LEN;

/// OplockLevel values (MS-SMB2 2.2.23.1).
pub mod oplock_level {
    pub const NONE: u8 = 0x00;
    pub const II: u8 = 0x01;
    pub const EXCLUSIVE: u8 = 0x08;
    pub const BATCH: u8 = 0x09;
    pub const LEASE: u8 = 0xFF;
}

/// Lease state bits (MS-SMB2 2.2.23.2).
pub mod lease_state {
    pub const NONE: u32 = 0x00;
    pub const READ_CACHING: u32 = 0x01;
    pub const HANDLE_CACHING: u32 = 0x02;
    pub const WRITE_CACHING: u32 = 0x04;
}

/// Lease Break Notification Flags (MS-SMB2 2.2.23.2).
pub mod lease_break_flags {
    pub const ACK_REQUIRED: u32 = 0x01;
}

/// Oplock Break Notification, Acknowledgment or Response (MS-SMB2 2.2.23.1, 2.2.24.1,
/// 2.2.25.1): one layout for all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OplockBreak {
    pub oplock_level: u8,
    pub file_id: FileId,
}

impl OplockBreak {
    pub const STRUCTURE_SIZE: u16 = 24;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let oplock_level = r.u8()?;
        let _reserved = r.u8()?;
        let _reserved2 = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        Ok(Self {
            oplock_level,
            file_id,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.oplock_level)
            .u8(0)
            .u32(0);
        self.file_id.encode(w);
    }
}

/// Lease Break Notification (MS-SMB2 2.2.23.2), server to client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LeaseBreakNotification {
    pub new_epoch: u16,
    pub flags: u32,
    pub lease_key: [u8; 16],
    pub current_lease_state: u32,
    pub new_lease_state: u32,
    /// BreakReason, AccessMaskHint and ShareMaskHint are reserved (zero) but kept.
    pub break_reason: u32,
    pub access_mask_hint: u32,
    pub share_mask_hint: u32,
}

impl LeaseBreakNotification {
    pub const STRUCTURE_SIZE: u16 = 44;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        Ok(Self {
            new_epoch: r.u16()?,
            flags: r.u32()?,
            lease_key: r.guid()?,
            current_lease_state: r.u32()?,
            new_lease_state: r.u32()?,
            break_reason: r.u32()?,
            access_mask_hint: r.u32()?,
            share_mask_hint: r.u32()?,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u16(self.new_epoch)
            .u32(self.flags)
            .bytes(&self.lease_key)
            .u32(self.current_lease_state)
            .u32(self.new_lease_state)
            .u32(self.break_reason)
            .u32(self.access_mask_hint)
            .u32(self.share_mask_hint);
    }
}

/// Lease Break Acknowledgment (MS-SMB2 2.2.24.2) and Lease Break Response (2.2.25.2): one
/// layout for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LeaseBreakAck {
    pub flags: u32,
    pub lease_key: [u8; 16],
    pub lease_state: u32,
    pub lease_duration: u64,
}

impl LeaseBreakAck {
    pub const STRUCTURE_SIZE: u16 = 36;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let _reserved = r.u16()?;
        Ok(Self {
            flags: r.u32()?,
            lease_key: r.guid()?,
            lease_state: r.u32()?,
            lease_duration: r.u64()?,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u16(0)
            .u32(self.flags)
            .bytes(&self.lease_key)
            .u32(self.lease_state)
            .u64(self.lease_duration);
    }
}

/// An OPLOCK_BREAK request as the server receives it: an oplock or a lease acknowledgment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OplockBreakAck {
    Oplock(OplockBreak),
    Lease(LeaseBreakAck),
}

impl OplockBreakAck {
    /// Picks the form by StructureSize (MS-SMB2 3.3.5.22).
    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        match peek_structure_size(msg)? {
            OplockBreak::STRUCTURE_SIZE => OplockBreak::decode(msg).map(Self::Oplock),
            LeaseBreakAck::STRUCTURE_SIZE => LeaseBreakAck::decode(msg).map(Self::Lease),
            got => Err(DecodeError::StructureSize {
                expected: OplockBreak::STRUCTURE_SIZE,
                got,
            }),
        }
    }

    pub fn encode(&self, w: &mut Writer) {
        match self {
            Self::Oplock(o) => o.encode(w),
            Self::Lease(l) => l.encode(w),
        }
    }
}

/// An OPLOCK_BREAK message as the client receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OplockBreakFromServer {
    /// Oplock break notification or the response to an oplock acknowledgment.
    Oplock(OplockBreak),
    LeaseNotification(LeaseBreakNotification),
    LeaseResponse(LeaseBreakAck),
}

impl OplockBreakFromServer {
    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        match peek_structure_size(msg)? {
            OplockBreak::STRUCTURE_SIZE => OplockBreak::decode(msg).map(Self::Oplock),
            LeaseBreakNotification::STRUCTURE_SIZE => {
                LeaseBreakNotification::decode(msg).map(Self::LeaseNotification)
            }
            LeaseBreakAck::STRUCTURE_SIZE => LeaseBreakAck::decode(msg).map(Self::LeaseResponse),
            got => Err(DecodeError::StructureSize {
                expected: OplockBreak::STRUCTURE_SIZE,
                got,
            }),
        }
    }

    pub fn encode(&self, w: &mut Writer) {
        match self {
            Self::Oplock(o) => o.encode(w),
            Self::LeaseNotification(n) => n.encode(w),
            Self::LeaseResponse(l) => l.encode(w),
        }
    }
}

fn peek_structure_size(msg: &[u8]) -> Result<u16, DecodeError> {
    Reader::at(msg, HEADER_LEN)?.u16()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as with_header;

    fn enc(f: impl Fn(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::new();
        f(&mut w);
        w.into_vec()
    }

    #[test]
    fn oplock_hand_assembled() {
        let o = OplockBreak {
            oplock_level: oplock_level::II,
            file_id: FileId {
                persistent: 0x0102,
                volatile: 0x0304,
            },
        };
        let mut expect = vec![24, 0, 1, 0, 0, 0, 0, 0];
        expect.extend_from_slice(&0x0102u64.to_le_bytes());
        expect.extend_from_slice(&0x0304u64.to_le_bytes());
        let body = enc(|w| o.encode(w));
        assert_eq!(body, expect);
        let m = with_header(&body);
        assert_eq!(
            OplockBreakAck::decode(&m).unwrap(),
            OplockBreakAck::Oplock(o)
        );
        assert_eq!(
            OplockBreakFromServer::decode(&m).unwrap(),
            OplockBreakFromServer::Oplock(o)
        );
    }

    #[test]
    fn lease_notification_layout() {
        let n = LeaseBreakNotification {
            new_epoch: 3,
            flags: lease_break_flags::ACK_REQUIRED,
            lease_key: [0xAA; 16],
            current_lease_state: lease_state::READ_CACHING | lease_state::HANDLE_CACHING,
            new_lease_state: lease_state::READ_CACHING,
            ..Default::default()
        };
        let body = enc(|w| n.encode(w));
        assert_eq!(body.len(), 44);
        assert_eq!(&body[0..8], &[44, 0, 3, 0, 1, 0, 0, 0]);
        assert_eq!(&body[24..32], &[3, 0, 0, 0, 1, 0, 0, 0]);
        let m = with_header(&body);
        assert_eq!(
            OplockBreakFromServer::decode(&m).unwrap(),
            OplockBreakFromServer::LeaseNotification(n)
        );
        // A client never sends this form.
        assert!(OplockBreakAck::decode(&m).is_err());
    }

    #[test]
    fn lease_ack_layout() {
        let a = LeaseBreakAck {
            flags: 0,
            lease_key: [0x11; 16],
            lease_state: 1,
            lease_duration: 0,
        };
        let body = enc(|w| a.encode(w));
        assert_eq!(body.len(), 36);
        assert_eq!(&body[0..4], &[36, 0, 0, 0]);
        assert_eq!(&body[24..28], &[1, 0, 0, 0]);
        let m = with_header(&body);
        assert_eq!(
            OplockBreakAck::decode(&m).unwrap(),
            OplockBreakAck::Lease(a)
        );
        assert_eq!(
            OplockBreakFromServer::decode(&m).unwrap(),
            OplockBreakFromServer::LeaseResponse(a)
        );
        for n in 0..m.len() {
            assert!(OplockBreakAck::decode(&m[..n]).is_err());
        }
    }

    #[test]
    fn unknown_size_rejected() {
        let m = with_header(&[30, 0, 0, 0]);
        assert!(matches!(
            OplockBreakAck::decode(&m),
            Err(DecodeError::StructureSize { got: 30, .. })
        ));
    }
}
