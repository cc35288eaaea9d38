//! SMB2 IOCTL request and response (MS-SMB2 2.2.31, 2.2.32), FSCTL codes, and the
//! VALIDATE_NEGOTIATE_INFO payloads (2.2.31.4, 2.2.32.6).

use crate::cursor::{Reader, Writer, len16, len32, to_usize};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::header::{Dialect, HEADER_LEN};

/// IOCTL request Flags (MS-SMB2 2.2.31).
pub mod flags {
    pub const IS_IOCTL: u32 = 0x0000_0000;
    pub const IS_FSCTL: u32 = 0x0000_0001;
}

crate::open_enum! {
    /// CtlCode values (MS-SMB2 2.2.31, MS-FSCC 2.3).
    CtlCode(u32) {
        DFS_GET_REFERRALS = 0x0006_0194,
        DFS_GET_REFERRALS_EX = 0x0006_01B0,
        PIPE_PEEK = 0x0011_400C,
        PIPE_WAIT = 0x0011_0018,
        PIPE_TRANSCEIVE = 0x0011_C017,
        SRV_COPYCHUNK = 0x0014_40F2,
        SRV_COPYCHUNK_WRITE = 0x0014_80F2,
        SRV_ENUMERATE_SNAPSHOTS = 0x0014_4064,
        SRV_REQUEST_RESUME_KEY = 0x0014_0078,
        SRV_READ_HASH = 0x0014_41BB,
        LMR_REQUEST_RESILIENCY = 0x0014_01D4,
        QUERY_NETWORK_INTERFACE_INFO = 0x0014_01FC,
        VALIDATE_NEGOTIATE_INFO = 0x0014_0204,
        IS_PATHNAME_VALID = 0x0009_002C,
        GET_COMPRESSION = 0x0009_003C,
        SET_COMPRESSION = 0x0009_C040,
        FILESYSTEM_GET_STATISTICS = 0x0009_0060,
        GET_NTFS_VOLUME_DATA = 0x0009_0064,
        GET_RETRIEVAL_POINTERS = 0x0009_0073,
        FIND_FILES_BY_SID = 0x0009_008F,
        SET_OBJECT_ID = 0x0009_0098,
        GET_OBJECT_ID = 0x0009_009C,
        DELETE_OBJECT_ID = 0x0009_00A0,
        SET_REPARSE_POINT = 0x0009_00A4,
        GET_REPARSE_POINT = 0x0009_00A8,
        DELETE_REPARSE_POINT = 0x0009_00AC,
        CREATE_OR_GET_OBJECT_ID = 0x0009_00C0,
        SET_SPARSE = 0x0009_00C4,
        SET_ZERO_DATA = 0x0009_80C8,
        QUERY_ALLOCATED_RANGES = 0x0009_40CF,
        READ_FILE_USN_DATA = 0x0009_00EB,
        WRITE_USN_CLOSE_RECORD = 0x0009_00EF,
        SET_ZERO_ON_DEALLOCATION = 0x0009_0194,
        SET_SHORT_NAME_BEHAVIOR = 0x0009_01B4,
        FILE_LEVEL_TRIM = 0x0009_8208,
        OFFLOAD_READ = 0x0009_4264,
        OFFLOAD_WRITE = 0x0009_8268,
        GET_INTEGRITY_INFORMATION = 0x0009_027C,
        SET_INTEGRITY_INFORMATION = 0x0009_C280,
        QUERY_FILE_REGIONS = 0x0009_0284,
        DUPLICATE_EXTENTS_TO_FILE = 0x0009_8344,
    }
}

/// SMB2 IOCTL Request (MS-SMB2 2.2.31).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IoctlRequest<'a> {
    pub ctl_code: CtlCode,
    pub file_id: FileId,
    pub input: &'a [u8],
    pub max_input_response: u32,
    /// Clients send none; kept for completeness.
    pub output: &'a [u8],
    pub max_output_response: u32,
    pub flags: u32,
}

impl<'a> IoctlRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 57;
    const FIXED: usize = 56;

    pub fn is_fsctl(&self) -> bool {
        self.flags & flags::IS_FSCTL != 0
    }

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let (b, max) = decode_body(msg, Self::STRUCTURE_SIZE, true)?;
        let (max_input_response, max_output_response) = max.unwrap_or_default();
        Ok(Self {
            ctl_code: b.ctl_code,
            file_id: b.file_id,
            input: b.input,
            max_input_response,
            output: b.output,
            max_output_response,
            flags: b.flags,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        let shared = IoctlResponse {
            ctl_code: self.ctl_code,
            file_id: self.file_id,
            input: self.input,
            output: self.output,
            flags: self.flags,
        };
        let max = Some((self.max_input_response, self.max_output_response));
        encode_body(w, Self::STRUCTURE_SIZE, Self::FIXED, &shared, max);
    }
}

/// SMB2 IOCTL Response (MS-SMB2 2.2.32). Its fields are exactly those the request shares.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IoctlResponse<'a> {
    pub ctl_code: CtlCode,
    pub file_id: FileId,
    /// Servers return no input except for some pass-through cases (MS-SMB2 3.3.5.15).
    pub input: &'a [u8],
    pub output: &'a [u8],
    pub flags: u32,
}

impl<'a> IoctlResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 49;
    const FIXED: usize = 48;

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        decode_body(msg, Self::STRUCTURE_SIZE, false).map(|(b, _)| b)
    }

    pub fn encode(&self, w: &mut Writer) {
        encode_body(w, Self::STRUCTURE_SIZE, Self::FIXED, self, None);
    }
}

/// MaxInputResponse and MaxOutputResponse: the request's only fields the response lacks.
type MaxResponses = Option<(u32, u32)>;

/// Decodes the layout the IOCTL request and response share (MS-SMB2 2.2.31, 2.2.32):
/// Reserved, CtlCode, FileId, the input and the output offset/length pairs (in the request
/// each is followed by MaxInputResponse or MaxOutputResponse), Flags, Reserved2, Buffer. Each
/// buffer, when not empty, must lie inside the message (checked once, after every fixed field
/// is read).
fn decode_body(
    msg: &[u8],
    structure_size: u16,
    request: bool,
) -> Result<(IoctlResponse<'_>, MaxResponses), DecodeError> {
    let mut r = Reader::body(msg, structure_size)?;
    let _reserved = r.u16()?;
    let ctl_code = CtlCode(r.u32()?);
    let file_id = FileId::decode(&mut r)?;
    let in_off = to_usize(r.u32()?);
    let in_len = to_usize(r.u32()?);
    let max_input = if request { Some(r.u32()?) } else { None };
    let out_off = to_usize(r.u32()?);
    let out_len = to_usize(r.u32()?);
    let max_output = if request { Some(r.u32()?) } else { None };
    let flags = r.u32()?;
    let _reserved2 = r.u32()?;
    let input = r.slice_at(in_off, in_len)?;
    let output = r.slice_at(out_off, out_len)?;
    let shared = IoctlResponse {
        ctl_code,
        file_id,
        input,
        output,
        flags,
    };
    Ok((shared, max_input.zip(max_output)))
}

/// Writes the shared layout: input at the start of Buffer, output after it, 8-byte aligned;
/// both offsets point into the message even when a buffer is empty, as Windows sends them.
fn encode_body(
    w: &mut Writer,
    structure_size: u16,
    fixed: usize,
    b: &IoctlResponse<'_>,
    max: MaxResponses,
) {
    let start = w.len();
    let in_off = HEADER_LEN + fixed;
    let out_off = if b.input.is_empty() {
        in_off
    } else {
        (in_off + b.input.len() + 7) & !7
    };
    w.u16(structure_size).u16(0).u32(b.ctl_code.0);
    b.file_id.encode(w);
    w.u32(len32(in_off)).u32(len32(b.input.len()));
    if let Some((max_input, _)) = max {
        w.u32(max_input);
    }
    w.u32(len32(out_off)).u32(len32(b.output.len()));
    if let Some((_, max_output)) = max {
        w.u32(max_output);
    }
    w.u32(b.flags).u32(0).bytes(b.input);
    if !b.output.is_empty() {
        if !b.input.is_empty() {
            w.align_from(start, 8);
        }
        w.bytes(b.output);
    }
    if b.input.is_empty() && b.output.is_empty() {
        // The odd StructureSize counts one byte of Buffer.
        w.u8(0);
    }
}

/// NETWORK_RESILIENCY_REQUEST (MS-SMB2 2.2.31.3), FSCTL_LMR_REQUEST_RESILIENCY's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NetworkResiliencyRequest {
    /// Milliseconds the server keeps the open after its connection breaks (0: its default).
    pub timeout_ms: u32,
}

impl NetworkResiliencyRequest {
    pub const LEN: usize = 8;

    /// Decodes the IOCTL input buffer (Timeout, then a Reserved field that is ignored).
    pub fn decode(input: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(input);
        let timeout_ms = r.u32()?;
        let _reserved = r.u32()?;
        Ok(Self { timeout_ms })
    }
}

/// VALIDATE_NEGOTIATE_INFO request payload (MS-SMB2 2.2.31.4).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ValidateNegotiateInfoRequest {
    pub capabilities: u32,
    pub guid: [u8; 16],
    pub security_mode: u16,
    pub dialects: Vec<Dialect>,
}

impl ValidateNegotiateInfoRequest {
    /// Same cap as NEGOTIATE's DialectCount.
    pub const MAX_DIALECTS: usize = crate::negotiate::MAX_DIALECTS;

    /// Decodes the IOCTL input buffer.
    pub fn decode(input: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(input);
        let capabilities = r.u32()?;
        let guid = r.guid()?;
        let security_mode = r.u16()?;
        let count = usize::from(r.u16()?);
        if count > Self::MAX_DIALECTS {
            return Err(DecodeError::TooLong {
                field: "DialectCount",
                len: count,
                limit: Self::MAX_DIALECTS,
            });
        }
        let raw = r.bytes(count * 2)?;
        let dialects = crate::negotiate::le_u16s(raw).map(Dialect).collect();
        Ok(Self {
            capabilities,
            guid,
            security_mode,
            dialects,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.capabilities)
            .bytes(&self.guid)
            .u16(self.security_mode)
            .u16(len16(self.dialects.len()));
        for d in &self.dialects {
            w.u16(d.0);
        }
    }
}

/// VALIDATE_NEGOTIATE_INFO response payload (MS-SMB2 2.2.32.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ValidateNegotiateInfoResponse {
    pub capabilities: u32,
    pub guid: [u8; 16],
    pub security_mode: u16,
    pub dialect: Dialect,
}

impl ValidateNegotiateInfoResponse {
    pub const LEN: usize = 24;

    pub fn decode(output: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(output);
        Ok(Self {
            capabilities: r.u32()?,
            guid: r.guid()?,
            security_mode: r.u16()?,
            dialect: Dialect(r.u16()?),
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.capabilities)
            .bytes(&self.guid)
            .u16(self.security_mode)
            .u16(self.dialect.0);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as with_header;

    #[test]
    fn request_round_trip_and_offsets() {
        let req = IoctlRequest {
            ctl_code: CtlCode::PIPE_TRANSCEIVE,
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            input: b"rpc-bind",
            max_input_response: 0,
            output: b"",
            max_output_response: 4280,
            flags: flags::IS_FSCTL,
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let body = w.into_vec();
        assert_eq!(body.len(), 56 + 8);
        assert_eq!(&body[0..2], &57u16.to_le_bytes());
        assert_eq!(&body[4..8], &0x0011_C017u32.to_le_bytes());
        assert_eq!(&body[24..28], &120u32.to_le_bytes()); // InputOffset = 64 + 56
        assert_eq!(&body[28..32], &8u32.to_le_bytes());
        assert_eq!(&body[48..52], &1u32.to_le_bytes());
        let m = with_header(&body);
        let d = IoctlRequest::decode(&m).unwrap();
        assert_eq!(d, req);
        assert!(d.is_fsctl());
    }

    #[test]
    fn response_with_input_and_output_aligns_output() {
        let resp = IoctlResponse {
            ctl_code: CtlCode::SRV_COPYCHUNK,
            file_id: FileId {
                persistent: 7,
                volatile: 8,
            },
            input: b"abc",
            output: b"0123456789",
            flags: 0,
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        let body = w.into_vec();
        // Input at 64 + 48 = 112, 3 bytes; output at 120.
        assert_eq!(&body[24..28], &112u32.to_le_bytes());
        assert_eq!(&body[32..36], &120u32.to_le_bytes());
        assert_eq!(&body[56..66], b"0123456789");
        assert_eq!(IoctlResponse::decode(&with_header(&body)).unwrap(), resp);
    }

    #[test]
    fn empty_response_has_pad_byte() {
        let resp = IoctlResponse {
            ctl_code: CtlCode::SET_SPARSE,
            ..Default::default()
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(w.len(), 49);
        assert_eq!(
            IoctlResponse::decode(&with_header(w.as_slice())).unwrap(),
            resp
        );
    }

    #[test]
    fn rejects_bad_buffers() {
        let req = IoctlRequest {
            input: b"xy",
            ..Default::default()
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        let mut body = w.into_vec();
        body[28..32].copy_from_slice(&3u32.to_le_bytes()); // InputCount past end
        assert!(IoctlRequest::decode(&with_header(&body)).is_err());
        body[28..32].copy_from_slice(&2u32.to_le_bytes());
        body[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(IoctlRequest::decode(&with_header(&body)).is_err());
        // offset 0 / count 0 is an empty buffer.
        body[24..28].copy_from_slice(&0u32.to_le_bytes());
        body[28..32].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            IoctlRequest::decode(&with_header(&body)).unwrap().input,
            b""
        );
    }

    #[test]
    fn validate_negotiate_info_hand_assembled() {
        let mut input = Vec::new();
        input.extend_from_slice(&0x7Fu32.to_le_bytes());
        input.extend_from_slice(&[0x5A; 16]);
        input.extend_from_slice(&1u16.to_le_bytes());
        input.extend_from_slice(&3u16.to_le_bytes());
        input.extend_from_slice(&[0x02, 0x02, 0x10, 0x02, 0x00, 0x03]);
        let v = ValidateNegotiateInfoRequest::decode(&input).unwrap();
        assert_eq!(v.capabilities, 0x7F);
        assert_eq!(
            v.dialects,
            vec![Dialect::SMB2_0_2, Dialect::SMB2_1, Dialect::SMB3_0]
        );
        let mut w = Writer::new();
        v.encode(&mut w);
        assert_eq!(w.as_slice(), &input[..]);
        assert!(ValidateNegotiateInfoRequest::decode(&input[..input.len() - 1]).is_err());

        let resp = ValidateNegotiateInfoResponse {
            capabilities: 0x2F,
            guid: [0x33; 16],
            security_mode: 1,
            dialect: Dialect::SMB3_0_2,
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(w.len(), ValidateNegotiateInfoResponse::LEN);
        assert_eq!(&w.as_slice()[22..24], &[0x02, 0x03]);
        assert_eq!(
            ValidateNegotiateInfoResponse::decode(w.as_slice()).unwrap(),
            resp
        );
    }

    #[test]
    fn ctl_code_names() {
        assert_eq!(
            format!("{:?}", CtlCode(0x0014_0204)),
            "VALIDATE_NEGOTIATE_INFO"
        );
        assert_eq!(format!("{:?}", CtlCode(0x1234)), "CtlCode(0x1234)");
    }
}
