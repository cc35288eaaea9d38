//! SMB2 CLOSE request and response (MS-SMB2 2.2.15, 2.2.16).

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::file_id::FileId;

/// SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB (2.2.15): the response carries the file's attributes.
pub const POSTQUERY_ATTRIB: u16 = 0x0001;

/// A CLOSE request (MS-SMB2 2.2.15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CloseRequest {
    pub flags: u16,
    pub file_id: FileId,
}

impl CloseRequest {
    pub const STRUCTURE_SIZE: u16 = 24;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u16()?;
        let _reserved = r.u32()?;
        Ok(Self {
            flags,
            file_id: FileId::decode(&mut r)?,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE).u16(self.flags).u32(0);
        self.file_id.encode(w);
    }
}

/// A CLOSE response (MS-SMB2 2.2.16). Without POSTQUERY_ATTRIB in `flags` every other field
/// is zero on the wire. Times are FILETIMEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CloseResponse {
    pub flags: u16,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: u32,
}

impl CloseResponse {
    pub const STRUCTURE_SIZE: u16 = 60;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u16()?;
        let _reserved = r.u32()?;
        Ok(Self {
            flags,
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            file_attributes: r.u32()?,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u16(self.flags)
            .u32(0)
            .u64(self.creation_time)
            .u64(self.last_access_time)
            .u64(self.last_write_time)
            .u64(self.change_time)
            .u64(self.allocation_size)
            .u64(self.end_of_file)
            .u32(self.file_attributes);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;

    #[test]
    fn request_round_trip_and_hand_assembled() {
        let req = CloseRequest {
            flags: POSTQUERY_ATTRIB,
            file_id: FileId {
                persistent: 0x11,
                volatile: 0x2233,
            },
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        assert_eq!(
            hex::encode(w.as_slice()),
            concat!(
                "1800",
                "0100",
                "00000000",
                "1100000000000000",
                "3322000000000000"
            )
        );
        assert_eq!(CloseRequest::decode(&msg(w.as_slice())).unwrap(), req);

        let mut b = vec![24, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF];
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&9u64.to_le_bytes());
        let m = msg(&b);
        let d = CloseRequest::decode(&m).unwrap();
        assert_eq!(d.flags, 0);
        assert_eq!(
            d.file_id,
            FileId {
                persistent: 7,
                volatile: 9
            }
        );
        assert!(CloseRequest::decode(&msg(&b[..23])).is_err());
        b[0] = 25;
        assert!(CloseRequest::decode(&msg(&b)).is_err());
    }

    #[test]
    fn response_round_trip_and_field_positions() {
        let resp = CloseResponse {
            flags: POSTQUERY_ATTRIB,
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            allocation_size: 5,
            end_of_file: 6,
            file_attributes: 0x10,
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), 60);
        assert_eq!(&b[..8], &[60, 0, 1, 0, 0, 0, 0, 0]);
        assert_eq!(&b[8..16], &1u64.to_le_bytes());
        assert_eq!(&b[48..56], &6u64.to_le_bytes());
        assert_eq!(&b[56..60], &0x10u32.to_le_bytes());
        assert_eq!(CloseResponse::decode(&msg(&b)).unwrap(), resp);
        assert!(CloseResponse::decode(&msg(&b[..59])).is_err());
    }
}
