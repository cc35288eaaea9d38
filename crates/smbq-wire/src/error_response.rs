//! SMB2 ERROR Response (MS-SMB2 2.2.2), its 3.1.1 error contexts (2.2.2.1) and the error data
//! formats the server produces (2.2.2.2).

use crate::cursor::{Reader, Writer, len16, len32, to_usize};
use crate::error::DecodeError;

/// Most error contexts accepted in one response (the count field is a u8).
pub const MAX_ERROR_CONTEXTS: usize = 16;

crate::open_enum! {
    /// SMB2_ERROR_CONTEXT ErrorId (MS-SMB2 2.2.2.1).
    ErrorId(u32) {
        DEFAULT = 0x0000_0000,
        /// Share Redirect Error Context (MS-SMB2 2.2.2.2.2): clustered servers only; its
        /// data is left raw.
        SHARE_REDIRECT = 0x7264_5253,
    }
}

/// SMB2 ERROR Response body (MS-SMB2 2.2.2).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ErrorResponse<'a> {
    /// Non-zero only in 3.1.1, when `error_data` is a list of error contexts.
    pub error_context_count: u8,
    /// Raw ErrorData (ByteCount bytes).
    pub error_data: &'a [u8],
}

impl<'a> ErrorResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;

    /// An error response with no data (the usual case).
    pub const EMPTY: ErrorResponse<'static> = ErrorResponse {
        error_context_count: 0,
        error_data: &[],
    };

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let error_context_count = r.u8()?;
        let _reserved = r.u8()?;
        let byte_count = to_usize(r.u32()?);
        let error_data = r.bytes(byte_count)?;
        Ok(Self {
            error_context_count,
            error_data,
        })
    }

    /// Empty ErrorData is written as one zero byte (ByteCount 0), as Windows does, because
    /// StructureSize 9 counts one byte of ErrorData.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.error_context_count)
            .u8(0)
            .u32(len32(self.error_data.len()))
            .buffer(self.error_data);
    }

    /// Writes an ERROR response whose ErrorData is `contexts` (3.1.1, MS-SMB2 2.2.2.1).
    pub fn encode_with_contexts(contexts: &[ErrorContext<'_>], w: &mut Writer) {
        let mut data = Writer::new();
        ErrorContext::encode_list(contexts, &mut data);
        let count = u8::try_from(contexts.len()).unwrap_or(u8::MAX);
        ErrorResponse {
            error_context_count: count,
            error_data: data.as_slice(),
        }
        .encode(w);
    }

    /// The error contexts, when ErrorContextCount is non-zero; otherwise empty.
    pub fn contexts(&self) -> Result<Vec<ErrorContext<'a>>, DecodeError> {
        ErrorContext::decode_list(self.error_data, usize::from(self.error_context_count))
    }

    /// The ErrorData a STATUS_BUFFER_TOO_SMALL carries: the required size (MS-SMB2 2.2.2).
    /// Looks inside a DEFAULT error context too (3.1.1).
    pub fn buffer_too_small_required(&self) -> Option<u32> {
        let data = if self.error_context_count == 0 {
            self.error_data
        } else {
            let ctx = self.contexts().ok()?;
            ctx.into_iter()
                .find(|c| c.error_id == ErrorId::DEFAULT)?
                .data
        };
        Some(u32::from_le_bytes(data.get(..4)?.try_into().ok()?))
    }
}

/// SMB2_ERROR_CONTEXT (MS-SMB2 2.2.2.1). Each one starts 8-byte aligned within ErrorData.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorContext<'a> {
    pub error_id: ErrorId,
    pub data: &'a [u8],
}

impl<'a> ErrorContext<'a> {
    /// Decodes `count` contexts from `data` (the ErrorData field).
    pub fn decode_list(data: &'a [u8], count: usize) -> Result<Vec<Self>, DecodeError> {
        if count > MAX_ERROR_CONTEXTS {
            return Err(DecodeError::TooLong {
                field: "ErrorContextCount",
                len: count,
                limit: MAX_ERROR_CONTEXTS,
            });
        }
        let mut out = Vec::with_capacity(count);
        let mut r = Reader::new(data);
        for i in 0..count {
            if i > 0 {
                let pad = (8 - r.pos() % 8) % 8;
                r.skip(pad)?;
            }
            let len = to_usize(r.u32()?);
            let error_id = ErrorId(r.u32()?);
            let data = r.bytes(len)?;
            out.push(Self { error_id, data });
        }
        Ok(out)
    }

    /// Encodes contexts as ErrorData, padding between them to 8 bytes.
    pub fn encode_list(contexts: &[Self], w: &mut Writer) {
        let start = w.len();
        for (i, c) in contexts.iter().enumerate() {
            if i > 0 {
                w.align_from(start, 8);
            }
            w.u32(len32(c.data.len())).u32(c.error_id.0).bytes(c.data);
        }
    }
}

/// Symbolic Link Error Response (MS-SMB2 2.2.2.2.1): ErrorData of STATUS_STOPPED_ON_SYMLINK,
/// telling the client where a symlink met while opening a path points.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SymlinkErrorResponse<'a> {
    /// Bytes of the original path name, counted from its end, not yet parsed when the link
    /// was met.
    pub unparsed_path_length: u16,
    /// UTF-16LE substitute name (the link target).
    pub substitute_name: &'a [u8],
    /// UTF-16LE print name.
    pub print_name: &'a [u8],
    /// `SYMLINK_FLAG_RELATIVE` when the target is relative to the link's directory.
    pub flags: u32,
}

impl<'a> SymlinkErrorResponse<'a> {
    /// "SYML" (MS-SMB2 2.2.2.2.1 SymLinkErrorTag).
    pub const ERROR_TAG: u32 = 0x4C4D_5953;
    /// IO_REPARSE_TAG_SYMLINK (MS-FSCC 2.1.2.1).
    pub const REPARSE_TAG: u32 = 0xA000_000C;
    pub const SYMLINK_FLAG_RELATIVE: u32 = 0x0000_0001;
    /// Bytes from SymLinkErrorTag to the start of PathBuffer.
    const FIXED: usize = 24;

    pub fn decode(data: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data);
        let sym_link_length = to_usize(r.u32()?);
        let body = r.bytes(sym_link_length)?;
        let mut r = Reader::new(body);
        if r.u32()? != Self::ERROR_TAG {
            return Err(DecodeError::InvalidField {
                field: "SymLinkErrorTag",
            });
        }
        if r.u32()? != Self::REPARSE_TAG {
            return Err(DecodeError::InvalidField {
                field: "ReparseTag",
            });
        }
        let _reparse_data_length = r.u16()?;
        let unparsed_path_length = r.u16()?;
        let sub_off = usize::from(r.u16()?);
        let sub_len = usize::from(r.u16()?);
        let print_off = usize::from(r.u16()?);
        let print_len = usize::from(r.u16()?);
        let flags = r.u32()?;
        let path_buffer = r.rest();
        let substitute_name = crate::cursor::slice_at(path_buffer, sub_off, sub_len)?;
        let print_name = crate::cursor::slice_at(path_buffer, print_off, print_len)?;
        Ok(Self {
            unparsed_path_length,
            substitute_name,
            print_name,
            flags,
        })
    }

    /// Writes the ErrorData: PathBuffer holds the substitute name then the print name.
    pub fn encode(&self, w: &mut Writer) {
        let path_len = self.substitute_name.len() + self.print_name.len();
        let sub_len = len16(self.substitute_name.len());
        let print_len = len16(self.print_name.len());
        w.u32(len32(Self::FIXED + path_len))
            .u32(Self::ERROR_TAG)
            .u32(Self::REPARSE_TAG)
            .u16(len16(12 + path_len))
            .u16(self.unparsed_path_length)
            .u16(0)
            .u16(sub_len)
            .u16(sub_len)
            .u16(print_len)
            .u32(self.flags)
            .bytes(self.substitute_name)
            .bytes(self.print_name);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as with_header;
    use crate::cursor::utf16le_encode;

    #[test]
    fn empty_error_is_nine_bytes_with_zero_byte() {
        let mut w = Writer::new();
        ErrorResponse::EMPTY.encode(&mut w);
        assert_eq!(w.as_slice(), &[9, 0, 0, 0, 0, 0, 0, 0, 0]);
        let m = with_header(w.as_slice());
        assert_eq!(ErrorResponse::decode(&m).unwrap(), ErrorResponse::EMPTY);
    }

    #[test]
    fn buffer_too_small_plain_and_in_context() {
        let body = [9, 0, 0, 0, 4, 0, 0, 0, 0x78, 0x56, 0x34, 0x12];
        let m = with_header(&body);
        let e = ErrorResponse::decode(&m).unwrap();
        assert_eq!(e.error_data, &[0x78, 0x56, 0x34, 0x12]);
        assert_eq!(e.buffer_too_small_required(), Some(0x1234_5678));
        let mut w = Writer::new();
        e.encode(&mut w);
        assert_eq!(w.as_slice(), &body);

        let req = 0x40u32.to_le_bytes();
        let mut w = Writer::new();
        ErrorResponse::encode_with_contexts(
            &[ErrorContext {
                error_id: ErrorId::DEFAULT,
                data: &req,
            }],
            &mut w,
        );
        // ErrorContextCount 1, ByteCount 12: ErrorDataLength 4, ErrorId 0, data.
        assert_eq!(
            w.as_slice(),
            &[
                9, 0, 1, 0, 12, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0
            ]
        );
        let m = with_header(w.as_slice());
        let e = ErrorResponse::decode(&m).unwrap();
        assert_eq!(e.buffer_too_small_required(), Some(0x40));
    }

    #[test]
    fn contexts_are_8_aligned() {
        let ctx = [
            ErrorContext {
                error_id: ErrorId::DEFAULT,
                data: b"abc",
            },
            ErrorContext {
                error_id: ErrorId::SHARE_REDIRECT,
                data: b"defgh",
            },
        ];
        let mut w = Writer::new();
        ErrorContext::encode_list(&ctx, &mut w);
        let d = w.into_vec();
        // 8 + 3 = 11, padded to 16, second context 8 + 5.
        assert_eq!(d.len(), 16 + 13);
        assert_eq!(&d[16..20], &5u32.to_le_bytes());
        assert_eq!(&d[20..24], &0x7264_5253u32.to_le_bytes());
        assert_eq!(ErrorContext::decode_list(&d, 2).unwrap(), ctx);
        assert!(ErrorContext::decode_list(&d, 3).is_err());
        assert!(ErrorContext::decode_list(&d, 200).is_err());
    }

    #[test]
    fn rejects_byte_count_past_end() {
        let m = with_header(&[9, 0, 0, 0, 5, 0, 0, 0, 1, 2]);
        assert!(ErrorResponse::decode(&m).is_err());
        let m = with_header(&[9, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0]);
        assert!(ErrorResponse::decode(&m).is_err());
    }

    #[test]
    fn symlink_error_round_trip_and_layout() {
        let sub = utf16le_encode("..\\target");
        let s = SymlinkErrorResponse {
            unparsed_path_length: 6,
            substitute_name: &sub,
            print_name: &sub,
            flags: SymlinkErrorResponse::SYMLINK_FLAG_RELATIVE,
        };
        let mut w = Writer::new();
        s.encode(&mut w);
        let d = w.into_vec();
        let n = sub.len();
        assert_eq!(d.len(), 4 + 24 + 2 * n);
        assert_eq!(&d[0..4], &((24 + 2 * n) as u32).to_le_bytes());
        assert_eq!(&d[4..8], b"SYML");
        assert_eq!(&d[8..12], &0xA000_000Cu32.to_le_bytes());
        assert_eq!(&d[12..14], &((12 + 2 * n) as u16).to_le_bytes());
        assert_eq!(&d[18..20], &(n as u16).to_le_bytes()); // SubstituteNameLength
        assert_eq!(&d[20..22], &(n as u16).to_le_bytes()); // PrintNameOffset
        assert_eq!(SymlinkErrorResponse::decode(&d).unwrap(), s);
        let mut bad = d.clone();
        bad[4] = b'X';
        assert!(SymlinkErrorResponse::decode(&bad).is_err());
        let mut bad = d.clone();
        bad[16] = 0xF0; // SubstituteNameOffset past PathBuffer
        assert!(SymlinkErrorResponse::decode(&bad).is_err());
    }
}
