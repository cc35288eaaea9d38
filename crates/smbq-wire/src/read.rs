//! SMB2 READ request and response (MS-SMB2 2.2.19, 2.2.20).
//!
//! The response data is never copied into a struct: the server writes the 16-byte body with
//! [`ReadResponse::encode_header`] and sends the file data as a separate segment right after
//! it; the client gets the data back as a slice borrowed from the message.

use crate::cursor::{Reader, Writer, len16, len32, to_usize};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::header::HEADER_LEN;

crate::open_enum! {
    /// Channel (MS-SMB2 2.2.19, 2.2.21): how data moves for RDMA transports.
    Channel(u32) {
        NONE = 0,
        RDMA_V1 = 1,
        RDMA_V1_INVALIDATE = 2,
        RDMA_TRANSFORM = 3,
    }
}

/// READ request Flags (MS-SMB2 2.2.19).
pub mod read_flags {
    pub const UNBUFFERED: u8 = 0x01;
    pub const REQUEST_COMPRESSED: u8 = 0x02;
}

/// READ response Flags (MS-SMB2 2.2.20).
/// Sets SMB2_READFLAG_REQUEST_COMPRESSED in an encoded READ request body (Flags is its
/// fourth byte, MS-SMB2 2.2.19): the client's way to say it takes a compressed response.
pub fn request_compressed(body: &mut [u8]) {
    if let Some(f) = body.get_mut(3) {
        *f |= read_flags::REQUEST_COMPRESSED;
    }
}

pub mod read_response_flags {
    pub const RDMA_TRANSFORM: u32 = 0x0000_0001;
}

const REQUEST_FIXED: usize = 48;
const RESPONSE_FIXED: usize = 16;
/// Where the response data starts, counted from the header (0x50).
pub const RESPONSE_DATA_OFFSET: usize = HEADER_LEN + RESPONSE_FIXED;

/// A READ request (MS-SMB2 2.2.19). StructureSize 49 counts one byte of Buffer; a request
/// without channel info still carries that byte, which the decoder does not insist on.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReadRequest<'a> {
    /// Where the client would like the data placed in the response; servers use 0x50.
    pub padding: u8,
    pub flags: u8,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub minimum_count: u32,
    pub channel: Channel,
    pub remaining_bytes: u32,
    pub read_channel_info: &'a [u8],
}

impl<'a> ReadRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 49;

    /// Decodes a whole message. Channel info, when its length is non-zero, must lie inside
    /// the message after the fixed part.
    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let padding = r.u8()?;
        let flags = r.u8()?;
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::decode(&mut r)?;
        let minimum_count = r.u32()?;
        let channel = Channel(r.u32()?);
        let remaining_bytes = r.u32()?;
        let info_offset = usize::from(r.u16()?);
        let info_len = usize::from(r.u16()?);
        let read_channel_info = r.variable_buffer(info_offset, info_len)?;
        Ok(Self {
            padding,
            flags,
            length,
            offset,
            file_id,
            minimum_count,
            channel,
            remaining_bytes,
            read_channel_info,
        })
    }

    /// Writes the body: channel info at 0x70 if any, else offsets 0 and the one Buffer byte
    /// StructureSize counts.
    pub fn encode(&self, w: &mut Writer) {
        let info_offset = if self.read_channel_info.is_empty() {
            0
        } else {
            HEADER_LEN + REQUEST_FIXED
        };
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.padding)
            .u8(self.flags)
            .u32(self.length)
            .u64(self.offset);
        self.file_id.encode(w);
        w.u32(self.minimum_count)
            .u32(self.channel.0)
            .u32(self.remaining_bytes)
            .u16(info_offset as u16)
            .u16(len16(self.read_channel_info.len()))
            .buffer(self.read_channel_info);
    }
}

/// A READ response (MS-SMB2 2.2.20). `data` borrows from the decoded message.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReadResponse<'a> {
    pub data_remaining: u32,
    pub flags: u32,
    pub data: &'a [u8],
}

impl<'a> ReadResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 17;
    /// Length of the body [`Self::encode_header`] writes when data follows.
    pub const HEADER_BODY_LEN: usize = RESPONSE_FIXED;

    /// Decodes a whole message. DataOffset is one byte counted from the header; non-empty
    /// data must start at or after 0x50 and lie inside the message.
    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let data_offset = usize::from(r.u8()?);
        let _reserved = r.u8()?;
        let data_len = to_usize(r.u32()?);
        let data_remaining = r.u32()?;
        let flags = r.u32()?;
        let data = r.variable_buffer(data_offset, data_len)?;
        Ok(Self {
            data_remaining,
            flags,
            data,
        })
    }

    /// Writes the 16-byte body with DataOffset 0x50 and DataLength `data_len`, ignoring
    /// `self.data`: the caller sends exactly `data_len` bytes of data right after it. With
    /// `data_len` 0 a single zero byte is added so the body is StructureSize long.
    pub fn encode_header(&self, data_len: u32, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(RESPONSE_DATA_OFFSET as u8)
            .u8(0)
            .u32(data_len)
            .u32(self.data_remaining)
            .u32(self.flags);
        if data_len == 0 {
            w.u8(0);
        }
    }

    /// Writes the body followed by a copy of `self.data` (for tests and small replies).
    pub fn encode(&self, w: &mut Writer) {
        self.encode_header(len32(self.data.len()), w);
        w.bytes(self.data);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;

    #[test]
    fn request_round_trip_and_layout() {
        let req = ReadRequest {
            padding: 0x50,
            flags: read_flags::UNBUFFERED,
            length: 0x0010_0000,
            offset: 0x0102_0304_0506_0708,
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            minimum_count: 1,
            ..Default::default()
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), 49);
        assert_eq!(
            hex::encode(&b[..16]),
            concat!("3100", "50", "01", "00001000", "0807060504030201")
        );
        assert_eq!(&b[44..49], &[0, 0, 0, 0, 0]);
        let m = msg(&b);
        assert_eq!(ReadRequest::decode(&m).unwrap(), req);

        let info = [0xAB; 16];
        let rdma = ReadRequest {
            channel: Channel::RDMA_V1,
            read_channel_info: &info,
            ..req.clone()
        };
        let mut w = Writer::new();
        rdma.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(&b[44..48], &[0x70, 0, 16, 0]);
        let m = msg(&b);
        assert_eq!(ReadRequest::decode(&m).unwrap(), rdma);
    }

    #[test]
    fn request_hand_assembled_and_bad_offsets() {
        let mut b = vec![49, 0, 0x50, 0x02];
        b.extend_from_slice(&65536u32.to_le_bytes());
        b.extend_from_slice(&8192u64.to_le_bytes());
        b.extend_from_slice(&3u64.to_le_bytes());
        b.extend_from_slice(&4u64.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // MinimumCount
        b.extend_from_slice(&0u32.to_le_bytes()); // Channel
        b.extend_from_slice(&0u32.to_le_bytes()); // RemainingBytes
        b.extend_from_slice(&[0, 0, 0, 0]); // no channel info
        // Exactly the 48 fixed bytes: the missing Buffer byte is tolerated.
        let m = msg(&b);
        let d = ReadRequest::decode(&m).unwrap();
        assert_eq!(d.flags, read_flags::REQUEST_COMPRESSED);
        assert_eq!(d.length, 65536);
        assert_eq!(d.offset, 8192);
        assert_eq!(
            d.file_id,
            FileId {
                persistent: 3,
                volatile: 4
            }
        );
        assert!(d.read_channel_info.is_empty());
        // Channel info pointing into the fixed part, or past the end.
        b.push(0);
        b[44] = 0x40;
        b[46] = 1;
        assert!(ReadRequest::decode(&msg(&b)).is_err());
        b[44] = 0x70;
        b[46] = 2;
        assert!(ReadRequest::decode(&msg(&b)).is_err());
        b[46] = 1;
        assert_eq!(
            ReadRequest::decode(&msg(&b)).unwrap().read_channel_info,
            &[0]
        );
        assert!(ReadRequest::decode(&msg(&b[..47])).is_err());
    }

    #[test]
    fn response_header_and_borrowed_data() {
        let resp = ReadResponse {
            data_remaining: 0,
            flags: 0,
            data: b"bbbbbb",
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(
            hex::encode(w.as_slice()),
            "11005000060000000000000000000000626262626262"
        );
        let m = msg(w.as_slice());
        let d = ReadResponse::decode(&m).unwrap();
        assert_eq!(d, resp);
        // The data is a view into the message, not a copy.
        assert!(core::ptr::eq(
            d.data.as_ptr(),
            m[RESPONSE_DATA_OFFSET..].as_ptr()
        ));

        let mut w = Writer::new();
        resp.encode_header(1 << 20, &mut w);
        assert_eq!(w.len(), ReadResponse::HEADER_BODY_LEN);
        assert_eq!(&w.as_slice()[2..8], &[0x50, 0, 0, 0, 0x10, 0]);

        let mut w = Writer::new();
        ReadResponse::default().encode(&mut w);
        assert_eq!(w.len(), 17);
        assert!(
            ReadResponse::decode(&msg(w.as_slice()))
                .unwrap()
                .data
                .is_empty()
        );
    }

    #[test]
    fn response_rejects_bad_data_offset() {
        let mut b = vec![17, 0, 0x40, 0];
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(b"abcd");
        assert!(
            ReadResponse::decode(&msg(&b)).is_err(),
            "offset inside the fixed part"
        );
        b[2] = 0x50;
        assert_eq!(ReadResponse::decode(&msg(&b)).unwrap().data, b"abcd");
        b[4] = 5;
        assert!(ReadResponse::decode(&msg(&b)).is_err(), "data past the end");
        b[4] = 0;
        b[2] = 0xFF;
        assert!(ReadResponse::decode(&msg(&b)).unwrap().data.is_empty());
    }
}
