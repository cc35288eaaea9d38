//! SMB2 QUERY_DIRECTORY request and response (MS-SMB2 2.2.33, 2.2.34).

use crate::body;
use crate::cursor::{Reader, Writer, len16, utf16le_decode};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::header::HEADER_LEN;

/// QUERY_DIRECTORY request Flags (MS-SMB2 2.2.33).
pub mod query_directory_flags {
    pub const RESTART_SCANS: u8 = 0x01;
    pub const RETURN_SINGLE_ENTRY: u8 = 0x02;
    pub const INDEX_SPECIFIED: u8 = 0x04;
    pub const REOPEN: u8 = 0x10;
}

const REQUEST_FIXED: usize = 32;
/// Where the request's FileName starts, counted from the header (0x60).
pub const REQUEST_BUFFER_OFFSET: usize = HEADER_LEN + REQUEST_FIXED;
/// Where the response's buffer starts, counted from the header (0x48).
pub const RESPONSE_BUFFER_OFFSET: usize = body::OUTPUT_BUFFER_OFFSET;

/// A QUERY_DIRECTORY request (MS-SMB2 2.2.33). `file_name` is the UTF-16LE search pattern.
/// An empty pattern decodes; 3.3.5.18 leaves its rejection to the handler.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct QueryDirectoryRequest<'a> {
    pub file_information_class: u8,
    pub flags: u8,
    pub file_index: u32,
    pub file_id: FileId,
    pub file_name: &'a [u8],
    pub output_buffer_length: u32,
}

impl<'a> QueryDirectoryRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 33;

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let file_information_class = r.u8()?;
        let flags = r.u8()?;
        let file_index = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let name_offset = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        let output_buffer_length = r.u32()?;
        let file_name = r.variable_buffer(name_offset, name_len)?;
        Ok(Self {
            file_information_class,
            flags,
            file_index,
            file_id,
            file_name,
            output_buffer_length,
        })
    }

    /// The pattern as a string; odd lengths and unpaired surrogates are errors.
    pub fn file_name_string(&self) -> Result<String, DecodeError> {
        utf16le_decode(self.file_name)
    }

    /// Writes the body: pattern at 0x60 (one zero byte if it is empty).
    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.file_information_class)
            .u8(self.flags)
            .u32(self.file_index);
        self.file_id.encode(w);
        w.u16(REQUEST_BUFFER_OFFSET as u16)
            .u16(len16(self.file_name.len()))
            .u32(self.output_buffer_length)
            .buffer(self.file_name);
    }
}

body::output_buffer_body! {
    /// A QUERY_DIRECTORY response (MS-SMB2 2.2.34): the entries of the requested information
    /// class, already laid out by the FSCC encoder, borrowed. A non-empty buffer must lie after
    /// the fixed part and inside the message.
    QueryDirectoryResponse { buffer, placement: AfterFixedPart }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;
    use crate::cursor::utf16le_encode;

    #[test]
    fn request_round_trip_and_layout() {
        let pat = utf16le_encode("*");
        let req = QueryDirectoryRequest {
            file_information_class: 0x25,
            flags: query_directory_flags::RESTART_SCANS,
            file_index: 0,
            file_id: FileId {
                persistent: 8,
                volatile: 9,
            },
            file_name: &pat,
            output_buffer_length: 65536,
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(
            hex::encode(&b),
            concat!(
                "2100",
                "25",
                "01",
                "00000000",
                "0800000000000000",
                "0900000000000000",
                "6000",
                "0200",
                "00000100",
                "2a00"
            )
        );
        let m = msg(&b);
        let d = QueryDirectoryRequest::decode(&m).unwrap();
        assert_eq!(d, req);
        assert_eq!(d.file_name_string().unwrap(), "*");
    }

    #[test]
    fn request_hand_assembled_and_bad_offsets() {
        let mut b = vec![33, 0, 0x03, 0x16, 5, 0, 0, 0];
        b.extend_from_slice(&[1; 16]);
        b.extend_from_slice(&[0x60, 0, 6, 0]);
        b.extend_from_slice(&4096u32.to_le_bytes());
        b.extend_from_slice(&utf16le_encode("a*b"));
        let m = msg(&b);
        let d = QueryDirectoryRequest::decode(&m).unwrap();
        assert_eq!(d.file_information_class, 3);
        assert_eq!(
            d.flags,
            query_directory_flags::RETURN_SINGLE_ENTRY
                | query_directory_flags::INDEX_SPECIFIED
                | query_directory_flags::REOPEN
        );
        assert_eq!(d.file_index, 5);
        assert_eq!(d.output_buffer_length, 4096);
        assert_eq!(d.file_name_string().unwrap(), "a*b");
        let mut bad = b.clone();
        bad[24] = 0x58;
        assert!(QueryDirectoryRequest::decode(&msg(&bad)).is_err());
        let mut bad = b.clone();
        bad[26] = 8;
        assert!(QueryDirectoryRequest::decode(&msg(&bad)).is_err());
        let mut odd = b.clone();
        odd[26] = 5;
        assert!(
            QueryDirectoryRequest::decode(&msg(&odd))
                .unwrap()
                .file_name_string()
                .is_err()
        );
    }

    #[test]
    fn response_round_trip() {
        let entries = [0x11u8; 40];
        let resp = QueryDirectoryResponse { buffer: &entries };
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(&w.as_slice()[..8], &[9, 0, 0x48, 0, 40, 0, 0, 0]);
        let m = msg(w.as_slice());
        assert_eq!(QueryDirectoryResponse::decode(&m).unwrap(), resp);

        let mut bad = w.into_vec();
        bad[2] = 0x40;
        assert!(QueryDirectoryResponse::decode(&msg(&bad)).is_err());
    }
}
