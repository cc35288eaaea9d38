//! Create contexts (MS-SMB2 2.2.13.2 request values, 2.2.14.2 response values): the chained
//! list carried in CREATE requests and responses, and the typed bodies of the common ones.
//!
//! Each element on the wire is
//! `Next(4) NameOffset(2) NameLength(2) Reserved(2) DataOffset(2) DataLength(4) Buffer`, all
//! offsets counted from the start of that element.

use crate::cursor::{Reader, Writer, len16, len32, pad8, to_usize};
use crate::error::DecodeError;
use crate::file_id::FileId;
use crate::ntstatus::NtStatus;

/// Size of the fixed part of one context element.
pub const CONTEXT_HEADER_LEN: usize = 16;
/// Upper bound on contexts accepted in one list. Real clients send fewer than ten; the cap
/// bounds the `Vec` a hostile list could make us allocate.
pub const MAX_CONTEXTS: usize = 64;

/// A create context name. Most are 4 ASCII bytes; a few are 16-byte GUIDs, so the name stays a
/// borrowed byte slice. `Debug` prints the known name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreateContextTag<'a>(pub &'a [u8]);

impl CreateContextTag<'static> {
    /// SMB2_CREATE_EA_BUFFER (2.2.13.2.1).
    pub const EXTA: Self = Self(b"ExtA");
    /// SMB2_CREATE_SD_BUFFER (2.2.13.2.2).
    pub const SECD: Self = Self(b"SecD");
    /// SMB2_CREATE_DURABLE_HANDLE_REQUEST / _RESPONSE (2.2.13.2.3, 2.2.14.2.3).
    pub const DHNQ: Self = Self(b"DHnQ");
    /// SMB2_CREATE_DURABLE_HANDLE_RECONNECT (2.2.13.2.4).
    pub const DHNC: Self = Self(b"DHnC");
    /// SMB2_CREATE_ALLOCATION_SIZE (2.2.13.2.6).
    pub const ALSI: Self = Self(b"AlSi");
    /// SMB2_CREATE_QUERY_MAXIMAL_ACCESS_REQUEST / _RESPONSE (2.2.13.2.5, 2.2.14.2.5).
    pub const MXAC: Self = Self(b"MxAc");
    /// SMB2_CREATE_TIMEWARP_TOKEN (2.2.13.2.7).
    pub const TWRP: Self = Self(b"TWrp");
    /// SMB2_CREATE_QUERY_ON_DISK_ID (2.2.13.2.9, 2.2.14.2.9).
    pub const QFID: Self = Self(b"QFid");
    /// SMB2_CREATE_REQUEST_LEASE(_V2) / SMB2_CREATE_RESPONSE_LEASE(_V2) (2.2.13.2.8, 2.2.13.2.10).
    pub const RQLS: Self = Self(b"RqLs");
    /// SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2 / _RESPONSE_V2 (2.2.13.2.11, 2.2.14.2.12).
    pub const DH2Q: Self = Self(b"DH2Q");
    /// SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2 (2.2.13.2.12).
    pub const DH2C: Self = Self(b"DH2C");
    /// SMB2_CREATE_APP_INSTANCE_ID (2.2.13.2.13).
    pub const APP_INSTANCE_ID: Self = Self(&[
        0x45, 0xBC, 0xA6, 0x6A, 0xEF, 0xA7, 0xF7, 0x4A, 0x90, 0x08, 0xFA, 0x46, 0x2E, 0x14, 0x4D,
        0x74,
    ]);
    /// SMB2_CREATE_APP_INSTANCE_VERSION (2.2.13.2.15).
    pub const APP_INSTANCE_VERSION: Self = Self(&[
        0xB9, 0x82, 0xD0, 0xB7, 0x3B, 0x56, 0x07, 0x4F, 0xA0, 0x7B, 0x52, 0x4A, 0x81, 0x16, 0xA0,
        0x10,
    ]);
    /// SMB3 POSIX extensions create context (POSIX-SMB2, not MS-SMB2; crate::posix).
    pub const POSIX: Self = Self(&crate::posix::TAG);

    const KNOWN: [(Self, &'static str); 14] = [
        (Self::EXTA, "ExtA"),
        (Self::SECD, "SecD"),
        (Self::DHNQ, "DHnQ"),
        (Self::DHNC, "DHnC"),
        (Self::ALSI, "AlSi"),
        (Self::MXAC, "MxAc"),
        (Self::TWRP, "TWrp"),
        (Self::QFID, "QFid"),
        (Self::RQLS, "RqLs"),
        (Self::DH2Q, "DH2Q"),
        (Self::DH2C, "DH2C"),
        (Self::APP_INSTANCE_ID, "APP_INSTANCE_ID"),
        (Self::APP_INSTANCE_VERSION, "APP_INSTANCE_VERSION"),
        (Self::POSIX, "POSIX"),
    ];
}

impl CreateContextTag<'_> {
    /// The registry name of a known tag.
    pub fn name(&self) -> Option<&'static str> {
        CreateContextTag::KNOWN
            .iter()
            .find(|(t, _)| t.0 == self.0)
            .map(|(_, n)| *n)
    }
}

impl core::fmt::Debug for CreateContextTag<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => {
                f.write_str("CreateContextTag(")?;
                for b in self.0 {
                    write!(f, "{b:02x}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// One create context: its name and data, both borrowed from the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateContext<'a> {
    pub name: &'a [u8],
    pub data: &'a [u8],
}

impl<'a> CreateContext<'a> {
    pub fn new(tag: CreateContextTag<'a>, data: &'a [u8]) -> Self {
        Self { name: tag.0, data }
    }
    pub fn tag(&self) -> CreateContextTag<'a> {
        CreateContextTag(self.name)
    }
}

/// Parses a context list (the bytes at CreateContextsOffset, CreateContextsLength long).
///
/// MS-SMB2 2.2.13.2: every element must lie inside the list (or, when `Next` is non-zero,
/// inside the `Next` bytes that belong to it); `Next` is 8-aligned and at least one element
/// header long; a name is never empty. At most [`MAX_CONTEXTS`] elements are accepted.
/// Duplicate names are left for the CREATE handler to judge (3.3.5.9).
pub fn parse_contexts(list: &[u8]) -> Result<Vec<CreateContext<'_>>, DecodeError> {
    let mut out = Vec::new();
    let mut rest = list;
    while !rest.is_empty() {
        if out.len() == MAX_CONTEXTS {
            return Err(DecodeError::TooLong {
                field: "CreateContexts",
                len: MAX_CONTEXTS + 1,
                limit: MAX_CONTEXTS,
            });
        }
        let mut r = Reader::new(rest);
        let next = to_usize(r.u32()?);
        let name_offset = usize::from(r.u16()?);
        let name_len = usize::from(r.u16()?);
        let _reserved = r.u16()?;
        let data_offset = usize::from(r.u16()?);
        let data_len = to_usize(r.u32()?);

        let extent = if next == 0 {
            rest
        } else {
            if !next.is_multiple_of(8) || next < CONTEXT_HEADER_LEN {
                return Err(DecodeError::InvalidField {
                    field: "CreateContext.Next",
                });
            }
            rest.get(..next).ok_or(DecodeError::BadOffset {
                offset: next,
                len: 0,
                total: rest.len(),
            })?
        };
        if name_len == 0 {
            return Err(DecodeError::InvalidField {
                field: "CreateContext.NameLength",
            });
        }
        // Name and data must not overlap the element's own fixed fields.
        if name_offset < CONTEXT_HEADER_LEN {
            return Err(DecodeError::BadOffset {
                offset: name_offset,
                len: name_len,
                total: extent.len(),
            });
        }
        if data_len != 0 && data_offset < CONTEXT_HEADER_LEN {
            return Err(DecodeError::BadOffset {
                offset: data_offset,
                len: data_len,
                total: extent.len(),
            });
        }
        let name = crate::cursor::slice_at(extent, name_offset, name_len)?;
        let data = crate::cursor::slice_at(extent, data_offset, data_len)?;
        out.push(CreateContext { name, data });

        if next == 0 {
            break;
        }
        rest = rest.get(next..).unwrap_or_default();
    }
    Ok(out)
}

/// The first context called `tag`, if any.
pub fn find<'a>(
    list: &[CreateContext<'a>],
    tag: CreateContextTag<'_>,
) -> Option<CreateContext<'a>> {
    list.iter().find(|c| c.name == tag.0).copied()
}

/// Writes a context list: each element starts 8-aligned relative to the list start, the name
/// at offset 16, the data (if any) at the next 8-aligned offset after the name. An empty data
/// gets DataOffset 0. No padding follows the last element. The list start must itself be
/// 8-aligned in the message (callers place it so).
pub fn encode_contexts(list: &[CreateContext<'_>], w: &mut Writer) {
    for (i, c) in list.iter().enumerate() {
        let name_end = CONTEXT_HEADER_LEN + c.name.len();
        let data_offset = if c.data.is_empty() {
            0
        } else {
            name_end + pad8(name_end)
        };
        let end = if c.data.is_empty() {
            name_end
        } else {
            data_offset + c.data.len()
        };
        let next = if i + 1 == list.len() {
            0
        } else {
            end + pad8(end)
        };
        w.u32(len32(next))
            .u16(CONTEXT_HEADER_LEN as u16)
            .u16(len16(c.name.len()))
            .u16(0)
            .u16(len16(data_offset))
            .u32(len32(c.data.len()))
            .bytes(c.name);
        if !c.data.is_empty() {
            w.zeros(pad8(name_end)).bytes(c.data);
        }
        if next != 0 {
            w.zeros(pad8(end));
        }
    }
}

/// [`encode_contexts`] into a fresh buffer.
pub fn contexts_to_bytes(list: &[CreateContext<'_>]) -> Vec<u8> {
    let mut w = Writer::new();
    encode_contexts(list, &mut w);
    w.into_vec()
}

fn exact<'a>(data: &'a [u8], len: usize, field: &'static str) -> Result<Reader<'a>, DecodeError> {
    if data.len() != len {
        return Err(DecodeError::InvalidField { field });
    }
    Ok(Reader::new(data))
}

/// SMB2_CREATE_QUERY_MAXIMAL_ACCESS_REQUEST (2.2.13.2.5): empty, or a FILETIME after which
/// the client wants the answer only if the file changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MxAcRequest {
    pub timestamp: Option<u64>,
}

impl MxAcRequest {
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        match data.len() {
            0 => Ok(Self { timestamp: None }),
            8 => Ok(Self {
                timestamp: Some(Reader::new(data).u64()?),
            }),
            _ => Err(DecodeError::InvalidField {
                field: "MxAc request",
            }),
        }
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        self.timestamp
            .map(|t| t.to_le_bytes().to_vec())
            .unwrap_or_default()
    }
}

/// SMB2_CREATE_QUERY_MAXIMAL_ACCESS_RESPONSE (2.2.14.2.5). `maximal_access` is meaningful only
/// when `query_status` is success.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MxAcResponse {
    pub query_status: NtStatus,
    pub maximal_access: u32,
}

impl MxAcResponse {
    pub const LEN: usize = 8;
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = exact(data, Self::LEN, "MxAc response")?;
        Ok(Self {
            query_status: NtStatus(r.u32()?),
            maximal_access: r.u32()?,
        })
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::LEN);
        w.u32(self.query_status.0).u32(self.maximal_access);
        w.into_vec()
    }
}

/// SMB2_CREATE_QUERY_ON_DISK_ID response (2.2.14.2.9): DiskFileId, VolumeId, 16 reserved bytes.
/// The request carries no data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QFidResponse {
    pub disk_file_id: u64,
    pub volume_id: u64,
}

impl QFidResponse {
    pub const LEN: usize = 32;
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = exact(data, Self::LEN, "QFid response")?;
        Ok(Self {
            disk_file_id: r.u64()?,
            volume_id: r.u64()?,
        })
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::LEN);
        w.u64(self.disk_file_id).u64(self.volume_id).zeros(16);
        w.into_vec()
    }
}

/// A context whose data is a single little-endian u64: SMB2_CREATE_ALLOCATION_SIZE
/// (2.2.13.2.6, AllocationSize) and SMB2_CREATE_TIMEWARP_TOKEN (2.2.13.2.7, a FILETIME).
pub fn decode_u64(data: &[u8], field: &'static str) -> Result<u64, DecodeError> {
    exact(data, 8, field)?.u64()
}

/// SMB2_CREATE_DURABLE_HANDLE_REQUEST (2.2.13.2.3): 16 reserved bytes.
pub const DHNQ_REQUEST_LEN: usize = 16;
/// SMB2_CREATE_DURABLE_HANDLE_RESPONSE (2.2.14.2.3): 8 reserved bytes.
pub const DHNQ_RESPONSE_LEN: usize = 8;

/// SMB2_CREATE_DURABLE_HANDLE_RECONNECT (2.2.13.2.4): the FileId of the durable open.
pub fn decode_dhnc(data: &[u8]) -> Result<FileId, DecodeError> {
    FileId::decode(&mut exact(data, 16, "DHnC")?)
}

/// DH2Q/DH2C flag (2.2.13.2.11).
pub const DH2_FLAG_PERSISTENT: u32 = 0x0000_0002;

/// SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2 (2.2.13.2.11): Timeout, Flags, 8 reserved, CreateGuid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dh2qRequest {
    pub timeout: u32,
    pub flags: u32,
    pub create_guid: [u8; 16],
}

impl Dh2qRequest {
    pub const LEN: usize = 32;
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = exact(data, Self::LEN, "DH2Q request")?;
        let timeout = r.u32()?;
        let flags = r.u32()?;
        r.skip(8)?;
        Ok(Self {
            timeout,
            flags,
            create_guid: r.guid()?,
        })
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::LEN);
        w.u32(self.timeout)
            .u32(self.flags)
            .zeros(8)
            .bytes(&self.create_guid);
        w.into_vec()
    }
}

/// SMB2_CREATE_DURABLE_HANDLE_RESPONSE_V2 (2.2.14.2.12): Timeout, Flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dh2qResponse {
    pub timeout: u32,
    pub flags: u32,
}

impl Dh2qResponse {
    pub const LEN: usize = 8;
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = exact(data, Self::LEN, "DH2Q response")?;
        Ok(Self {
            timeout: r.u32()?,
            flags: r.u32()?,
        })
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::LEN);
        w.u32(self.timeout).u32(self.flags);
        w.into_vec()
    }
}

/// SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2 (2.2.13.2.12): FileId, CreateGuid, Flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dh2cRequest {
    pub file_id: FileId,
    pub create_guid: [u8; 16],
    pub flags: u32,
}

impl Dh2cRequest {
    pub const LEN: usize = 36;
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = exact(data, Self::LEN, "DH2C request")?;
        Ok(Self {
            file_id: FileId::decode(&mut r)?,
            create_guid: r.guid()?,
            flags: r.u32()?,
        })
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::LEN);
        self.file_id.encode(&mut w);
        w.bytes(&self.create_guid).u32(self.flags);
        w.into_vec()
    }
}

/// Lease state bits (2.2.13.2.8).
pub mod lease_state {
    pub const NONE: u32 = 0x00;
    pub const READ_CACHING: u32 = 0x01;
    pub const HANDLE_CACHING: u32 = 0x02;
    pub const WRITE_CACHING: u32 = 0x04;
}

/// Lease flag bits (2.2.13.2.8, 2.2.13.2.10, 2.2.14.2.10).
pub mod lease_flags {
    /// Response only: a break is in progress.
    pub const BREAK_IN_PROGRESS: u32 = 0x02;
    /// V2 only: ParentLeaseKey is set.
    pub const PARENT_LEASE_KEY_SET: u32 = 0x04;
}

/// The RqLs body, request and response alike: SMB2_CREATE_REQUEST_LEASE (2.2.13.2.8, 32 bytes)
/// or SMB2_CREATE_REQUEST_LEASE_V2 (2.2.13.2.10, 52 bytes), told apart by length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Lease {
    pub key: [u8; 16],
    pub state: u32,
    pub flags: u32,
    pub duration: u64,
    /// `Some` for the V2 layout.
    pub v2: Option<LeaseV2>,
}

/// The fields V2 adds to a lease context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LeaseV2 {
    pub parent_key: [u8; 16],
    pub epoch: u16,
}

impl Lease {
    pub const V1_LEN: usize = 32;
    pub const V2_LEN: usize = 52;

    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        if data.len() != Self::V1_LEN && data.len() != Self::V2_LEN {
            return Err(DecodeError::InvalidField { field: "RqLs" });
        }
        let mut r = Reader::new(data);
        let key = r.guid()?;
        let state = r.u32()?;
        let flags = r.u32()?;
        let duration = r.u64()?;
        let v2 = if data.len() == Self::V2_LEN {
            let parent_key = r.guid()?;
            let epoch = r.u16()?;
            Some(LeaseV2 { parent_key, epoch })
        } else {
            None
        };
        Ok(Self {
            key,
            state,
            flags,
            duration,
            v2,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::V2_LEN);
        w.bytes(&self.key)
            .u32(self.state)
            .u32(self.flags)
            .u64(self.duration);
        if let Some(v2) = &self.v2 {
            w.bytes(&v2.parent_key).u16(v2.epoch).u16(0);
        }
        w.into_vec()
    }
}

/// SMB2_CREATE_APP_INSTANCE_ID (2.2.13.2.13): StructureSize 20, Reserved, AppInstanceId.
pub fn decode_app_instance_id(data: &[u8]) -> Result<[u8; 16], DecodeError> {
    let mut r = exact(data, 20, "APP_INSTANCE_ID")?;
    r.structure_size(20)?;
    r.skip(2)?;
    r.guid()
}

/// SMB2_CREATE_APP_INSTANCE_VERSION (2.2.13.2.15): StructureSize 24, Reserved, Padding, then
/// the (high, low) version.
pub fn decode_app_instance_version(data: &[u8]) -> Result<(u64, u64), DecodeError> {
    let mut r = exact(data, 24, "APP_INSTANCE_VERSION")?;
    r.structure_size(24)?;
    r.skip(6)?;
    Ok((r.u64()?, r.u64()?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip_and_layout() {
        let mxac = MxAcRequest::default().to_bytes();
        let dh2q = Dh2qRequest {
            timeout: 0,
            flags: 0,
            create_guid: [7; 16],
        }
        .to_bytes();
        let lease = Lease {
            key: [1; 16],
            state: 7,
            ..Default::default()
        }
        .to_bytes();
        let list = [
            CreateContext::new(CreateContextTag::DH2Q, &dh2q),
            CreateContext::new(CreateContextTag::MXAC, &mxac),
            CreateContext::new(CreateContextTag::RQLS, &lease),
            CreateContext::new(CreateContextTag::APP_INSTANCE_ID, &[0; 20]),
        ];
        let b = contexts_to_bytes(&list);
        // DH2Q: 16 header + 4 name + 4 pad + 32 data = 56; MxAc: 16 + 4 = 20 -> next 24;
        // RqLs: 16 + 4 + 4 + 32 = 56; GUID-named: 16 + 16 + 20 = 52, unpadded at the end.
        assert_eq!(b.len(), 56 + 24 + 56 + 52);
        assert_eq!(&b[0..4], &56u32.to_le_bytes());
        assert_eq!(&b[56..60], &24u32.to_le_bytes());
        assert_eq!(&b[56 + 10..56 + 12], &[0, 0], "empty data has offset 0");
        assert_eq!(&b[80..84], &56u32.to_le_bytes());
        assert_eq!(&b[80 + 10..80 + 12], &24u16.to_le_bytes());
        assert_eq!(&b[136..140], &[0, 0, 0, 0], "last Next is 0");
        assert_eq!(&b[136 + 10..136 + 12], &32u16.to_le_bytes());
        let parsed = parse_contexts(&b).unwrap();
        assert_eq!(parsed, list);
        assert_eq!(format!("{:?}", parsed[3].tag()), "APP_INSTANCE_ID");
        assert_eq!(
            find(&parsed, CreateContextTag::RQLS).unwrap().data,
            &lease[..]
        );
        assert!(find(&parsed, CreateContextTag::QFID).is_none());
    }

    #[test]
    fn hand_assembled_list_decodes() {
        let mut b = Vec::new();
        // Element 1: "QFid", no data; Next = 24.
        b.extend_from_slice(&24u32.to_le_bytes());
        b.extend_from_slice(&[0x10, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(b"QFid\0\0\0\0");
        // Element 2: "AlSi" with an 8-byte size at offset 24.
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&[0x10, 0, 4, 0, 0, 0, 0x18, 0, 8, 0, 0, 0]);
        b.extend_from_slice(b"AlSi\0\0\0\0");
        b.extend_from_slice(&0x1_0000u64.to_le_bytes());
        let l = parse_contexts(&b).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].tag(), CreateContextTag::QFID);
        assert!(l[0].data.is_empty());
        assert_eq!(l[1].tag(), CreateContextTag::ALSI);
        assert_eq!(decode_u64(l[1].data, "AlSi").unwrap(), 0x1_0000);
        assert_eq!(
            format!("{:?}", CreateContextTag(b"Zzzz")),
            "CreateContextTag(5a7a7a7a)"
        );
    }

    #[test]
    fn rejects_bad_lists() {
        let good = contexts_to_bytes(&[
            CreateContext::new(CreateContextTag::MXAC, &[]),
            CreateContext::new(CreateContextTag::QFID, &[]),
        ]);
        assert_eq!(parse_contexts(&good).unwrap().len(), 2);
        // Next not 8-aligned.
        let mut b = good.clone();
        b[0] = 23;
        assert!(parse_contexts(&b).is_err());
        // Next past the end.
        let mut b = good.clone();
        b[0] = 0x80;
        assert!(parse_contexts(&b).is_err());
        // Next smaller than a header: would loop on overlapping elements.
        let mut b = good.clone();
        b[0] = 8;
        assert!(parse_contexts(&b).is_err());
        // Name running past the element's extent (NameLength 9 inside a 24-byte element).
        let mut b = good.clone();
        b[6] = 9;
        assert!(parse_contexts(&b).is_err());
        // Name inside the fixed part.
        let mut b = good.clone();
        b[4] = 4;
        assert!(parse_contexts(&b).is_err());
        // Empty name.
        let mut b = good.clone();
        b[6] = 0;
        assert!(parse_contexts(&b).is_err());
        // Data length wrapping.
        let mut b = good.clone();
        b[10] = 0x10;
        b[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_contexts(&b).is_err());
        // Truncated element.
        assert!(parse_contexts(&good[..10]).is_err());
    }

    #[test]
    fn caps_context_count() {
        let many: Vec<_> = (0..=MAX_CONTEXTS)
            .map(|_| CreateContext::new(CreateContextTag::MXAC, &[]))
            .collect();
        let b = contexts_to_bytes(&many);
        assert!(matches!(
            parse_contexts(&b),
            Err(DecodeError::TooLong { .. })
        ));
        assert_eq!(
            parse_contexts(&contexts_to_bytes(&many[1..]))
                .unwrap()
                .len(),
            MAX_CONTEXTS
        );
    }

    #[test]
    fn typed_bodies_round_trip() {
        let m = MxAcResponse {
            query_status: NtStatus::SUCCESS,
            maximal_access: 0x001F_01FF,
        };
        assert_eq!(hex::encode(m.to_bytes()), "00000000ff011f00");
        assert_eq!(MxAcResponse::decode(&m.to_bytes()).unwrap(), m);
        assert_eq!(MxAcRequest::decode(&[]).unwrap().timestamp, None);
        let t = MxAcRequest {
            timestamp: Some(0x01DB_0000_1234_5678),
        };
        assert_eq!(MxAcRequest::decode(&t.to_bytes()).unwrap(), t);
        assert!(MxAcRequest::decode(&[0; 4]).is_err());

        let q = QFidResponse {
            disk_file_id: 0x0004_0000_0001_E72A,
            volume_id: 0xB017_CFD9,
        };
        let qb = q.to_bytes();
        assert_eq!(qb.len(), 32);
        assert_eq!(QFidResponse::decode(&qb).unwrap(), q);
        assert!(QFidResponse::decode(&qb[..24]).is_err());

        let d = Dh2qRequest {
            timeout: 180_000,
            flags: DH2_FLAG_PERSISTENT,
            create_guid: [9; 16],
        };
        let db = d.to_bytes();
        assert_eq!(&db[..8], &[0x20, 0xBF, 0x02, 0, 2, 0, 0, 0]);
        assert_eq!(Dh2qRequest::decode(&db).unwrap(), d);
        let dr = Dh2qResponse {
            timeout: 180_000,
            flags: 0,
        };
        assert_eq!(hex::encode(dr.to_bytes()), "20bf020000000000");
        assert_eq!(Dh2qResponse::decode(&dr.to_bytes()).unwrap(), dr);
        let c = Dh2cRequest {
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            create_guid: [3; 16],
            flags: 0,
        };
        assert_eq!(Dh2cRequest::decode(&c.to_bytes()).unwrap(), c);
        assert_eq!(decode_dhnc(&c.to_bytes()[..16]).unwrap(), c.file_id);

        let v1 = Lease {
            key: [0xAA; 16],
            state: lease_state::READ_CACHING,
            ..Default::default()
        };
        assert_eq!(v1.to_bytes().len(), Lease::V1_LEN);
        assert_eq!(Lease::decode(&v1.to_bytes()).unwrap(), v1);
        let v2 = Lease {
            key: [0xAA; 16],
            state: lease_state::READ_CACHING | lease_state::HANDLE_CACHING,
            flags: lease_flags::PARENT_LEASE_KEY_SET,
            duration: 0,
            v2: Some(LeaseV2 {
                parent_key: [0xBB; 16],
                epoch: 3,
            }),
        };
        let vb = v2.to_bytes();
        assert_eq!(vb.len(), Lease::V2_LEN);
        assert_eq!(&vb[16..24], &[3, 0, 0, 0, 4, 0, 0, 0]);
        assert_eq!(&vb[48..52], &[3, 0, 0, 0]);
        assert_eq!(Lease::decode(&vb).unwrap(), v2);
        assert!(Lease::decode(&vb[..40]).is_err());
    }

    #[test]
    fn app_instance_bodies() {
        let mut id = vec![20, 0, 0, 0];
        id.extend_from_slice(&[0x5A; 16]);
        assert_eq!(decode_app_instance_id(&id).unwrap(), [0x5A; 16]);
        id[0] = 21;
        assert!(decode_app_instance_id(&id).is_err());
        let mut v = vec![24, 0, 0, 0, 0, 0, 0, 0];
        v.extend_from_slice(&5u64.to_le_bytes());
        v.extend_from_slice(&6u64.to_le_bytes());
        assert_eq!(decode_app_instance_version(&v).unwrap(), (5, 6));
    }
}
