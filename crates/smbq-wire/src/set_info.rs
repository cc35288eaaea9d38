//! SMB2 SET_INFO request and response (MS-SMB2 2.2.39, 2.2.40).

use crate::cursor::{Reader, Writer, len32, to_usize};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::header::HEADER_LEN;
use crate::query_info::InfoType;

const REQUEST_FIXED: usize = 32;
/// Where the request's buffer starts, counted from the header (0x60).
pub const REQUEST_BUFFER_OFFSET: usize = HEADER_LEN + REQUEST_FIXED;

/// A SET_INFO request (MS-SMB2 2.2.39). `buffer` is the encoded information, borrowed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SetInfoRequest<'a> {
    pub info_type: InfoType,
    pub file_info_class: u8,
    pub additional_information: u32,
    pub file_id: FileId,
    pub buffer: &'a [u8],
}

impl<'a> SetInfoRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 33;

    /// Decodes a whole message; a non-empty buffer must lie after the fixed part and inside
    /// the message.
    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let info_type = InfoType(r.u8()?);
        let file_info_class = r.u8()?;
        let len = to_usize(r.u32()?);
        let offset = usize::from(r.u16()?);
        let _reserved = r.u16()?;
        let additional_information = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let buffer = r.variable_buffer(offset, len)?;
        Ok(Self {
            info_type,
            file_info_class,
            additional_information,
            file_id,
            buffer,
        })
    }

    /// Writes the body with the buffer at 0x60 (one zero byte if it is empty).
    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.info_type.0)
            .u8(self.file_info_class)
            .u32(len32(self.buffer.len()))
            .u16(REQUEST_BUFFER_OFFSET as u16)
            .u16(0)
            .u32(self.additional_information);
        self.file_id.encode(w);
        w.buffer(self.buffer);
    }
}

crate::body::empty_body! {
    /// A SET_INFO response (MS-SMB2 2.2.40): StructureSize 2 and nothing else.
    SetInfoResponse { structure_size: 2, reserved: 0 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;

    #[test]
    fn request_round_trip_and_layout() {
        // FileEndOfFileInformation (class 20) carrying a new size of 0x1000.
        let eof = 0x1000u64.to_le_bytes();
        let req = SetInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: 20,
            additional_information: 0,
            file_id: FileId {
                persistent: 3,
                volatile: 4,
            },
            buffer: &eof,
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(
            hex::encode(&b),
            concat!(
                "2100",
                "01",
                "14",
                "08000000",
                "6000",
                "0000",
                "00000000",
                "0300000000000000",
                "0400000000000000",
                "0010000000000000"
            )
        );
        assert_eq!(SetInfoRequest::decode(&msg(&b)).unwrap(), req);
    }

    #[test]
    fn request_hand_assembled_and_bad_offsets() {
        let mut b = vec![33, 0, 3, 0];
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&[0x60, 0, 0, 0]);
        b.extend_from_slice(&4u32.to_le_bytes()); // DACL_SECURITY_INFORMATION
        b.extend_from_slice(&[9; 16]);
        b.extend_from_slice(&[1, 2, 3, 4]);
        let m = msg(&b);
        let d = SetInfoRequest::decode(&m).unwrap();
        assert_eq!(d.info_type, InfoType::SECURITY);
        assert_eq!(d.additional_information, 4);
        assert_eq!(d.buffer, &[1, 2, 3, 4]);
        let mut bad = b.clone();
        bad[8] = 0x5C;
        assert!(SetInfoRequest::decode(&msg(&bad)).is_err());
        let mut bad = b.clone();
        bad[4] = 5;
        assert!(SetInfoRequest::decode(&msg(&bad)).is_err());
        let mut bad = b.clone();
        bad[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(SetInfoRequest::decode(&msg(&bad)).is_err());
    }

    #[test]
    fn response_round_trip() {
        let mut w = Writer::new();
        SetInfoResponse.encode(&mut w);
        assert_eq!(w.as_slice(), &[2, 0]);
        assert_eq!(
            SetInfoResponse::decode(&msg(w.as_slice())).unwrap(),
            SetInfoResponse
        );
        assert!(SetInfoResponse::decode(&msg(&[4, 0])).is_err());
    }
}
