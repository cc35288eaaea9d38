//! SMB2 WRITE request and response (MS-SMB2 2.2.21, 2.2.22).
//!
//! Write data is never copied by this module: the server finds it with
//! [`WriteRequest::data_range`] (to slice a `Bytes` without copying) and the client writes
//! the body with [`WriteRequest::encode_header`] and sends the data as its own segment.

use core::ops::Range;

use crate::cursor::{Reader, Writer, len16, len32, to_usize};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::header::HEADER_LEN;
use crate::read::Channel;

/// WRITE request Flags (MS-SMB2 2.2.21).
pub mod write_flags {
    pub const WRITE_THROUGH: u32 = 0x0000_0001;
    pub const UNBUFFERED: u32 = 0x0000_0002;
}

const REQUEST_FIXED: usize = 48;
/// Where request data starts when there is no channel info, counted from the header (0x70).
pub const REQUEST_DATA_OFFSET: usize = HEADER_LEN + REQUEST_FIXED;

/// A WRITE request (MS-SMB2 2.2.21). `data` borrows from the decoded message.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WriteRequest<'a> {
    pub offset: u64,
    pub file_id: FileId,
    pub channel: Channel,
    pub remaining_bytes: u32,
    pub write_channel_info: &'a [u8],
    pub flags: u32,
    pub data: &'a [u8],
}

/// The fixed fields, and where the two buffers lie in the message.
struct Parsed {
    req: WriteRequest<'static>,
    data: Range<usize>,
    info: Range<usize>,
}

impl<'a> WriteRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 49;

    fn parse(msg: &[u8]) -> Result<Parsed, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let data_offset = usize::from(r.u16()?);
        let length = to_usize(r.u32()?);
        let offset = r.u64()?;
        let file_id = FileId::decode(&mut r)?;
        let channel = Channel(r.u32()?);
        let remaining_bytes = r.u32()?;
        let info_offset = usize::from(r.u16()?);
        let info_len = usize::from(r.u16()?);
        let flags = r.u32()?;
        Ok(Parsed {
            req: WriteRequest {
                offset,
                file_id,
                channel,
                remaining_bytes,
                write_channel_info: &[],
                flags,
                data: &[],
            },
            // The reader stands at the end of the fixed part (0x70): each buffer, when not
            // empty, must start there or later and end inside the message.
            data: r.variable_range(data_offset, length)?,
            info: r.variable_range(info_offset, info_len)?,
        })
    }

    /// Decodes a whole message; data and channel info are checked (MS-SMB2 3.3.5.13: they
    /// must lie inside the request, never inside its fixed part) and borrowed.
    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let p = Self::parse(msg)?;
        Ok(Self {
            data: msg.get(p.data).unwrap_or_default(),
            write_channel_info: msg.get(p.info).unwrap_or_default(),
            ..p.req
        })
    }

    /// Where the data lies in `msg` (header included), checked exactly as [`Self::decode`]
    /// does; an empty range when Length is 0.
    pub fn data_range(msg: &[u8]) -> Result<Range<usize>, DecodeError> {
        Ok(Self::parse(msg)?.data)
    }

    /// Writes the body without data, ignoring `self.data`: channel info (if any) at 0x70,
    /// then DataOffset points right after it and Length is `data_len`; the caller sends
    /// exactly `data_len` bytes next. With no channel info and no data a single zero byte is
    /// added so the body is StructureSize long.
    pub fn encode_header(&self, data_len: u32, w: &mut Writer) {
        let info_len = self.write_channel_info.len();
        let info_offset = if info_len == 0 {
            0
        } else {
            REQUEST_DATA_OFFSET
        };
        w.u16(Self::STRUCTURE_SIZE)
            .u16(len16(REQUEST_DATA_OFFSET + info_len))
            .u32(data_len)
            .u64(self.offset);
        self.file_id.encode(w);
        w.u32(self.channel.0)
            .u32(self.remaining_bytes)
            .u16(info_offset as u16)
            .u16(len16(info_len))
            .u32(self.flags)
            .bytes(self.write_channel_info);
        if data_len == 0 && info_len == 0 {
            w.u8(0);
        }
    }

    /// Writes the body followed by a copy of `self.data` (for tests and small writes).
    pub fn encode(&self, w: &mut Writer) {
        self.encode_header(len32(self.data.len()), w);
        w.bytes(self.data);
    }
}

/// A WRITE response (MS-SMB2 2.2.22). Remaining and the channel-info fields are reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WriteResponse {
    pub count: u32,
    pub remaining: u32,
}

impl WriteResponse {
    pub const STRUCTURE_SIZE: u16 = 17;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let _reserved = r.u16()?;
        let count = r.u32()?;
        let remaining = r.u32()?;
        let _info_offset = r.u16()?;
        let _info_len = r.u16()?;
        Ok(Self { count, remaining })
    }

    /// Writes the 16 fixed bytes plus the one Buffer byte StructureSize counts.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u16(0)
            .u32(self.count)
            .u32(self.remaining)
            .u16(0)
            .u16(0)
            .u8(0);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;

    #[test]
    fn request_round_trip_and_layout() {
        let data = b"MeFriend!THIS IS FINE!";
        let req = WriteRequest {
            offset: 0x1234_ABCD,
            file_id: FileId {
                persistent: 0x0C_0000_0414,
                volatile: 0x0C_0010_0051,
            },
            flags: write_flags::WRITE_THROUGH,
            data,
            ..Default::default()
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(
            hex::encode(&b[..48]),
            concat!(
                "3100",
                "7000",
                "16000000",
                "cdab341200000000",
                "140400000c000000510010000c000000",
                "00000000",
                "00000000",
                "0000",
                "0000",
                "01000000"
            )
        );
        assert_eq!(&b[48..], data);
        let m = msg(&b);
        assert_eq!(WriteRequest::decode(&m).unwrap(), req);
        assert_eq!(WriteRequest::data_range(&m).unwrap(), 112..112 + data.len());

        // encode_header + appended data gives the same bytes as encode.
        let mut w = Writer::new();
        WriteRequest {
            data: &[],
            ..req.clone()
        }
        .encode_header(data.len() as u32, &mut w);
        assert_eq!(w.len(), 48);
        w.bytes(data);
        assert_eq!(w.as_slice(), &b[..]);
    }

    #[test]
    fn request_with_channel_info_and_empty_data() {
        let info = [7u8; 16];
        let req = WriteRequest {
            channel: Channel::RDMA_V1,
            remaining_bytes: 65536,
            write_channel_info: &info,
            ..Default::default()
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), 64);
        assert_eq!(&b[2..4], &0x80u16.to_le_bytes());
        assert_eq!(&b[40..44], &[0x70, 0, 16, 0]);
        let m = msg(&b);
        assert_eq!(WriteRequest::decode(&m).unwrap(), req);
        assert_eq!(WriteRequest::data_range(&m).unwrap(), 0..0);

        let mut w = Writer::new();
        WriteRequest::default().encode(&mut w);
        assert_eq!(w.len(), 49);
        assert!(
            WriteRequest::decode(&msg(w.as_slice()))
                .unwrap()
                .data
                .is_empty()
        );
    }

    #[test]
    fn request_hand_assembled_and_bad_offsets() {
        let mut b = vec![49, 0, 0x70, 0];
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&100u64.to_le_bytes());
        b.extend_from_slice(&5u64.to_le_bytes());
        b.extend_from_slice(&6u64.to_le_bytes());
        b.extend_from_slice(&[0; 12]); // Channel, RemainingBytes, channel info
        b.extend_from_slice(&2u32.to_le_bytes()); // UNBUFFERED
        b.extend_from_slice(b"xyz");
        let m = msg(&b);
        let d = WriteRequest::decode(&m).unwrap();
        assert_eq!(d.offset, 100);
        assert_eq!(
            d.file_id,
            FileId {
                persistent: 5,
                volatile: 6
            }
        );
        assert_eq!(d.flags, write_flags::UNBUFFERED);
        assert_eq!(d.data, b"xyz");

        // Data overlapping the fixed body.
        let mut bad = b.clone();
        bad[2] = 0x6F;
        assert!(matches!(
            WriteRequest::decode(&msg(&bad)),
            Err(DecodeError::BadOffset { .. })
        ));
        assert!(WriteRequest::data_range(&msg(&bad)).is_err());
        // Data running past the end.
        let mut bad = b.clone();
        bad[4] = 4;
        assert!(WriteRequest::decode(&msg(&bad)).is_err());
        // Huge length cannot wrap.
        let mut bad = b.clone();
        bad[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(WriteRequest::data_range(&msg(&bad)).is_err());
        // Zero length with a junk offset is an empty write.
        let mut z = b.clone();
        z[2] = 0;
        z[4] = 0;
        assert!(WriteRequest::decode(&msg(&z)).unwrap().data.is_empty());
    }

    #[test]
    fn response_round_trip() {
        let resp = WriteResponse {
            count: 0xBEEF_BAAF,
            remaining: 0,
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(
            hex::encode(w.as_slice()),
            "11000000afbaefbe000000000000000000"
        );
        assert_eq!(WriteResponse::decode(&msg(w.as_slice())).unwrap(), resp);
        assert_eq!(
            WriteResponse::decode(&msg(&w.as_slice()[..16])).unwrap(),
            resp
        );
        assert!(WriteResponse::decode(&msg(&w.as_slice()[..15])).is_err());
    }
}
