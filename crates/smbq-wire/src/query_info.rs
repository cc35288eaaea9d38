//! SMB2 QUERY_INFO request and response (MS-SMB2 2.2.37, 2.2.38).

use crate::body;
use crate::cursor::{Reader, Writer, len32, to_usize};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::header::HEADER_LEN;

crate::open_enum! {
    /// InfoType of QUERY_INFO and SET_INFO (MS-SMB2 2.2.37, 2.2.39).
    InfoType(u8) {
        FILE = 0x01,
        FILESYSTEM = 0x02,
        SECURITY = 0x03,
        QUOTA = 0x04,
    }
}

/// QUERY_INFO Flags, used with InfoType QUOTA (MS-SMB2 2.2.37).
pub mod query_info_flags {
    pub const RESTART_SCAN: u32 = 0x0000_0001;
    pub const RETURN_SINGLE_ENTRY: u32 = 0x0000_0002;
    pub const INDEX_SPECIFIED: u32 = 0x0000_0004;
}

const REQUEST_FIXED: usize = 40;
/// Where the request's input buffer starts, counted from the header (0x68).
pub const REQUEST_BUFFER_OFFSET: usize = HEADER_LEN + REQUEST_FIXED;
/// Where the response's output buffer starts, counted from the header (0x48).
pub const RESPONSE_BUFFER_OFFSET: usize = body::OUTPUT_BUFFER_OFFSET;

/// A QUERY_INFO request (MS-SMB2 2.2.37). `input` holds, for example, an EA name list or a
/// quota SID list; `additional_information` carries security-information bits for SECURITY.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct QueryInfoRequest<'a> {
    pub info_type: InfoType,
    pub file_info_class: u8,
    pub output_buffer_length: u32,
    pub additional_information: u32,
    pub flags: u32,
    pub file_id: FileId,
    pub input: &'a [u8],
}

impl<'a> QueryInfoRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 41;

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let info_type = InfoType(r.u8()?);
        let file_info_class = r.u8()?;
        let output_buffer_length = r.u32()?;
        let input_offset = usize::from(r.u16()?);
        let _reserved = r.u16()?;
        let input_len = to_usize(r.u32()?);
        let additional_information = r.u32()?;
        let flags = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let input = r.variable_buffer(input_offset, input_len)?;
        Ok(Self {
            info_type,
            file_info_class,
            output_buffer_length,
            additional_information,
            flags,
            file_id,
            input,
        })
    }

    /// Writes the body: input at 0x68 (one zero byte if there is none).
    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.info_type.0)
            .u8(self.file_info_class)
            .u32(self.output_buffer_length)
            .u16(REQUEST_BUFFER_OFFSET as u16)
            .u16(0)
            .u32(len32(self.input.len()))
            .u32(self.additional_information)
            .u32(self.flags);
        self.file_id.encode(w);
        w.buffer(self.input);
    }
}

body::output_buffer_body! {
    /// A QUERY_INFO response (MS-SMB2 2.2.38): the encoded information, borrowed. A non-empty
    /// buffer must lie after the fixed part and inside the message.
    QueryInfoResponse { buffer, placement: AfterFixedPart }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;

    #[test]
    fn request_round_trip_and_layout() {
        let req = QueryInfoRequest {
            info_type: InfoType::SECURITY,
            file_info_class: 0,
            output_buffer_length: 0x1000,
            additional_information: 0x7,
            flags: 0,
            file_id: FileId {
                persistent: 0xA,
                volatile: 0xB,
            },
            input: &[],
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(
            hex::encode(&b),
            concat!(
                "2900",
                "03",
                "00",
                "00100000",
                "6800",
                "0000",
                "00000000",
                "07000000",
                "00000000",
                "0a00000000000000",
                "0b00000000000000",
                "00"
            )
        );
        assert_eq!(QueryInfoRequest::decode(&msg(&b)).unwrap(), req);

        let ea_list = [0u8, 0, 0, 0, 3, b'a', b'b', b'c', 0];
        let with_input = QueryInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: 15,
            input: &ea_list,
            ..req.clone()
        };
        let mut w = Writer::new();
        with_input.encode(&mut w);
        let m = msg(w.as_slice());
        assert_eq!(QueryInfoRequest::decode(&m).unwrap(), with_input);
    }

    #[test]
    fn request_hand_assembled_and_bad_offsets() {
        let mut b = vec![41, 0, 4, 0];
        b.extend_from_slice(&256u32.to_le_bytes());
        b.extend_from_slice(&[0x68, 0, 0, 0]);
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&query_info_flags::RESTART_SCAN.to_le_bytes());
        b.extend_from_slice(&[2; 16]);
        b.extend_from_slice(&[0xCA, 0xFE]);
        let m = msg(&b);
        let d = QueryInfoRequest::decode(&m).unwrap();
        assert_eq!(d.info_type, InfoType::QUOTA);
        assert_eq!(d.output_buffer_length, 256);
        assert_eq!(d.flags, query_info_flags::RESTART_SCAN);
        assert_eq!(d.input, &[0xCA, 0xFE]);
        assert_eq!(format!("{:?}", InfoType(9)), "InfoType(0x9)");
        let mut bad = b.clone();
        bad[8] = 0x60;
        assert!(QueryInfoRequest::decode(&msg(&bad)).is_err());
        let mut bad = b.clone();
        bad[12] = 3;
        assert!(QueryInfoRequest::decode(&msg(&bad)).is_err());
        // No input: any offset is fine, and a missing pad byte is tolerated.
        let mut none = b[..40].to_vec();
        none[8] = 0;
        none[12] = 0;
        assert!(
            QueryInfoRequest::decode(&msg(&none))
                .unwrap()
                .input
                .is_empty()
        );
    }

    #[test]
    fn response_round_trip() {
        let info = [0x5Au8; 24];
        let resp = QueryInfoResponse { buffer: &info };
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(&w.as_slice()[..8], &[9, 0, 0x48, 0, 24, 0, 0, 0]);
        let m = msg(w.as_slice());
        assert_eq!(QueryInfoResponse::decode(&m).unwrap(), resp);
        let mut w = Writer::new();
        QueryInfoResponse::default().encode(&mut w);
        assert_eq!(w.len(), 9);
        assert!(
            QueryInfoResponse::decode(&msg(w.as_slice()))
                .unwrap()
                .buffer
                .is_empty()
        );
    }
}
