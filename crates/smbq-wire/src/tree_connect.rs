//! SMB2 TREE_CONNECT and TREE_DISCONNECT (MS-SMB2 2.2.9 - 2.2.12).

use crate::cursor::{Reader, Writer, len16, len32, slice_at, to_usize, utf16le_decode};
use crate::error::DecodeError;
use crate::header::HEADER_LEN;

/// TREE_CONNECT request Flags (3.1.1; Reserved before) (MS-SMB2 2.2.9).
pub mod flags {
    pub const CLUSTER_RECONNECT: u16 = 0x0001;
    pub const REDIRECT_TO_OWNER: u16 = 0x0002;
    pub const EXTENSION_PRESENT: u16 = 0x0004;
}

/// ShareType (MS-SMB2 2.2.10).
pub mod share_type {
    pub const DISK: u8 = 0x01;
    pub const PIPE: u8 = 0x02;
    pub const PRINT: u8 = 0x03;
}

/// ShareFlags (MS-SMB2 2.2.10). The caching values are a 2-bit field under `CACHING_MASK`.
pub mod share_flags {
    pub const MANUAL_CACHING: u32 = 0x0000_0000;
    pub const AUTO_CACHING: u32 = 0x0000_0010;
    pub const VDO_CACHING: u32 = 0x0000_0020;
    pub const NO_CACHING: u32 = 0x0000_0030;
    pub const CACHING_MASK: u32 = 0x0000_0030;
    pub const DFS: u32 = 0x0000_0001;
    pub const DFS_ROOT: u32 = 0x0000_0002;
    pub const RESTRICT_EXCLUSIVE_OPENS: u32 = 0x0000_0100;
    pub const FORCE_SHARED_DELETE: u32 = 0x0000_0200;
    pub const ALLOW_NAMESPACE_CACHING: u32 = 0x0000_0400;
    pub const ACCESS_BASED_DIRECTORY_ENUM: u32 = 0x0000_0800;
    pub const FORCE_LEVELII_OPLOCK: u32 = 0x0000_1000;
    pub const ENABLE_HASH_V1: u32 = 0x0000_2000;
    pub const ENABLE_HASH_V2: u32 = 0x0000_4000;
    pub const ENCRYPT_DATA: u32 = 0x0000_8000;
    pub const IDENTITY_REMOTING: u32 = 0x0004_0000;
    pub const COMPRESS_DATA: u32 = 0x0010_0000;
    pub const ISOLATED_TRANSPORT: u32 = 0x0020_0000;
}

/// Share Capabilities (MS-SMB2 2.2.10).
pub mod share_capabilities {
    pub const DFS: u32 = 0x0000_0008;
    pub const CONTINUOUS_AVAILABILITY: u32 = 0x0000_0010;
    pub const SCALEOUT: u32 = 0x0000_0020;
    pub const CLUSTER: u32 = 0x0000_0040;
    pub const ASYMMETRIC: u32 = 0x0000_0080;
    pub const REDIRECT_TO_OWNER: u32 = 0x0000_0100;
}

/// Most tree connect contexts accepted.
pub const MAX_TREE_CONNECT_CONTEXTS: usize = 16;

crate::open_enum! {
    /// SMB2_TREE_CONNECT_CONTEXT ContextType (MS-SMB2 2.2.9.2).
    TreeConnectContextType(u16) {
        RESERVED = 0x0000,
        REMOTED_IDENTITY = 0x0001,
    }
}

/// SMB2_TREE_CONNECT_CONTEXT (MS-SMB2 2.2.9.2), data left raw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeConnectContext<'a> {
    pub context_type: TreeConnectContextType,
    pub data: &'a [u8],
}

/// SMB2 TREE_CONNECT Request (MS-SMB2 2.2.9), with the 3.1.1 extension (2.2.9.1).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TreeConnectRequest<'a> {
    pub flags: u16,
    /// UTF-16LE "\\server\share", no terminator.
    pub path_utf16: &'a [u8],
    /// Only with `flags::EXTENSION_PRESENT`.
    pub contexts: Vec<TreeConnectContext<'a>>,
}

impl<'a> TreeConnectRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;
    const FIXED: usize = 8;
    /// TreeConnectContextOffset, TreeConnectContextCount, Reserved (MS-SMB2 2.2.9.1).
    const EXTENSION_FIXED: usize = 16;

    /// The path as a string; an invalid one is STATUS_INVALID_PARAMETER (MS-SMB2 3.3.5.7).
    pub fn path(&self) -> Result<String, DecodeError> {
        utf16le_decode(self.path_utf16)
    }

    /// `flags` is only meaningful on a 3.1.1 connection; callers on older dialects pass the
    /// message through [`Self::decode_pre_311`] so a stray bit is ignored as the spec says.
    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_inner(msg, true)
    }

    /// Decode for dialects before 3.1.1: Flags is Reserved and ignored (MS-SMB2 2.2.9).
    pub fn decode_pre_311(msg: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_inner(msg, false)
    }

    fn decode_inner(msg: &'a [u8], is_311: bool) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let raw_flags = r.u16()?;
        let flags = if is_311 { raw_flags } else { 0 };
        let path_off = usize::from(r.u16()?);
        let path_len = usize::from(r.u16()?);
        if flags & flags::EXTENSION_PRESENT == 0 {
            let path_utf16 = slice_at(msg, path_off, path_len)?;
            return Ok(Self {
                flags,
                path_utf16,
                contexts: Vec::new(),
            });
        }
        // The extension sits at the start of Buffer.
        let ext_start = HEADER_LEN + Self::FIXED;
        let ctx_off = to_usize(r.u32()?);
        let ctx_count = usize::from(r.u16()?);
        r.skip(10)?;
        // The spec counts PathOffset from the header, but some clients count it from the
        // extension; an offset that would land inside the fixed part or the extension
        // header can only mean the latter.
        let path_abs = if path_off < ext_start + Self::EXTENSION_FIXED {
            ext_start
                .checked_add(path_off)
                .ok_or(DecodeError::BadOffset {
                    offset: path_off,
                    len: path_len,
                    total: msg.len(),
                })?
        } else {
            path_off
        };
        let path_utf16 = slice_at(msg, path_abs, path_len)?;
        let contexts = decode_contexts(msg, ctx_off, ctx_count)?;
        Ok(Self {
            flags,
            path_utf16,
            contexts,
        })
    }

    /// Writes the extension form iff `contexts` is non-empty (and then sets
    /// EXTENSION_PRESENT); offsets are counted from the header.
    pub fn encode(&self, w: &mut Writer) {
        let start = w.len();
        let path_len = len16(self.path_utf16.len());
        if self.contexts.is_empty() {
            w.u16(Self::STRUCTURE_SIZE)
                .u16(self.flags & !flags::EXTENSION_PRESENT)
                .u16(len16(HEADER_LEN + Self::FIXED))
                .u16(path_len)
                .buffer(self.path_utf16);
            return;
        }
        w.u16(Self::STRUCTURE_SIZE)
            .u16(self.flags | flags::EXTENSION_PRESENT)
            .u16(len16(HEADER_LEN + Self::FIXED + Self::EXTENSION_FIXED))
            .u16(path_len);
        let ctx_off_pos = w.len();
        w.u32(0)
            .u16(len16(self.contexts.len()))
            .zeros(10)
            .bytes(self.path_utf16);
        w.align_from(start, 8);
        w.patch_u32(ctx_off_pos, len32(HEADER_LEN + (w.len() - start)));
        for (i, c) in self.contexts.iter().enumerate() {
            if i > 0 {
                w.align_from(start, 8);
            }
            w.u16(c.context_type.0)
                .u16(len16(c.data.len()))
                .u32(0)
                .bytes(c.data);
        }
    }
}

fn decode_contexts(
    msg: &[u8],
    offset: usize,
    count: usize,
) -> Result<Vec<TreeConnectContext<'_>>, DecodeError> {
    if count > MAX_TREE_CONNECT_CONTEXTS {
        return Err(DecodeError::TooLong {
            field: "TreeConnectContextCount",
            len: count,
            limit: MAX_TREE_CONNECT_CONTEXTS,
        });
    }
    let mut out = Vec::with_capacity(count);
    let mut pos = offset;
    for i in 0..count {
        if i > 0 {
            pos = pos
                .checked_add(7)
                .map(|p| p & !7)
                .ok_or(DecodeError::Truncated {
                    need: usize::MAX,
                    have: msg.len(),
                })?;
        }
        let mut r = Reader::at(msg, pos)?;
        let context_type = TreeConnectContextType(r.u16()?);
        let len = usize::from(r.u16()?);
        let _reserved = r.u32()?;
        let data = r.bytes(len)?;
        out.push(TreeConnectContext { context_type, data });
        pos = r.pos();
    }
    Ok(out)
}

/// SMB2 TREE_CONNECT Response (MS-SMB2 2.2.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TreeConnectResponse {
    pub share_type: u8,
    pub share_flags: u32,
    pub capabilities: u32,
    pub maximal_access: u32,
}

impl TreeConnectResponse {
    pub const STRUCTURE_SIZE: u16 = 16;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let share_type = r.u8()?;
        let _reserved = r.u8()?;
        Ok(Self {
            share_type,
            share_flags: r.u32()?,
            capabilities: r.u32()?,
            maximal_access: r.u32()?,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u8(self.share_type)
            .u8(0)
            .u32(self.share_flags)
            .u32(self.capabilities)
            .u32(self.maximal_access);
    }
}

crate::body::empty_body! {
    /// SMB2 TREE_DISCONNECT Request (MS-SMB2 2.2.11): StructureSize 4 and a reserved u16.
    TreeDisconnectRequest { structure_size: 4, reserved: 2 }
}

crate::body::empty_body! {
    /// SMB2 TREE_DISCONNECT Response (MS-SMB2 2.2.12): StructureSize 4 and a reserved u16.
    TreeDisconnectResponse { structure_size: 4, reserved: 2 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as with_header;
    use crate::cursor::utf16le_encode;

    fn enc(r: &TreeConnectRequest<'_>) -> Vec<u8> {
        let mut w = Writer::new();
        r.encode(&mut w);
        w.into_vec()
    }

    #[test]
    fn plain_request_hand_assembled() {
        let p = utf16le_encode(r"\\srv\share");
        let mut body = vec![9, 0, 0, 0, 72, 0, p.len() as u8, 0];
        body.extend_from_slice(&p);
        let req = TreeConnectRequest {
            flags: 0,
            path_utf16: &p,
            contexts: vec![],
        };
        assert_eq!(enc(&req), body);
        let m = with_header(&body);
        let d = TreeConnectRequest::decode(&m).unwrap();
        assert_eq!(d, req);
        assert_eq!(d.path().unwrap(), r"\\srv\share");
    }

    #[test]
    fn extension_round_trip_and_layout() {
        let p = utf16le_encode(r"\\srv\ipc$"); // 20 bytes
        let ctx_data = [1u8, 2, 3];
        let req = TreeConnectRequest {
            flags: flags::EXTENSION_PRESENT | flags::REDIRECT_TO_OWNER,
            path_utf16: &p,
            contexts: vec![
                TreeConnectContext {
                    context_type: TreeConnectContextType::REMOTED_IDENTITY,
                    data: &ctx_data,
                },
                TreeConnectContext {
                    context_type: TreeConnectContextType(9),
                    data: b"",
                },
            ],
        };
        let body = enc(&req);
        // PathOffset 64 + 8 + 16 = 88; path ends at body 44, contexts at 48 => offset 112.
        assert_eq!(&body[4..6], &88u16.to_le_bytes());
        assert_eq!(&body[8..12], &112u32.to_le_bytes());
        assert_eq!(&body[12..14], &2u16.to_le_bytes());
        assert_eq!(&body[24..44], &p[..]);
        assert_eq!(&body[48..50], &1u16.to_le_bytes());
        // second context at body 48 + 8 + 3 = 59 -> 64
        assert_eq!(&body[64..66], &9u16.to_le_bytes());
        let m = with_header(&body);
        assert_eq!(TreeConnectRequest::decode(&m).unwrap(), req);
    }

    #[test]
    fn extension_with_path_offset_relative_to_extension() {
        let p = utf16le_encode(r"\\h\s");
        let mut body = vec![9, 0, 4, 0, 16, 0, p.len() as u8, 0];
        body.extend_from_slice(&0u32.to_le_bytes()); // no contexts
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&[0; 10]);
        body.extend_from_slice(&p);
        let m = with_header(&body);
        let d = TreeConnectRequest::decode(&m).unwrap();
        assert_eq!(d.path().unwrap(), r"\\h\s");
        assert!(d.contexts.is_empty());
        // Same bytes with the header-relative offset 88.
        let mut body2 = body.clone();
        body2[4] = 88;
        assert_eq!(
            TreeConnectRequest::decode(&with_header(&body2))
                .unwrap()
                .path()
                .unwrap(),
            r"\\h\s"
        );
    }

    #[test]
    fn pre_311_ignores_flags() {
        let p = utf16le_encode(r"\\a\b");
        let mut body = vec![9, 0, 4, 0, 72, 0, p.len() as u8, 0];
        body.extend_from_slice(&p);
        let m = with_header(&body);
        let d = TreeConnectRequest::decode_pre_311(&m).unwrap();
        assert_eq!(d.flags, 0);
        assert_eq!(d.path().unwrap(), r"\\a\b");
        // The 3.1.1 decoder reads the same bytes as an extension and fails (too short).
        assert!(TreeConnectRequest::decode(&m).is_err());
    }

    #[test]
    fn rejects_bad_path_and_contexts() {
        let m = with_header(&[9, 0, 0, 0, 72, 0, 10, 0, 0x41, 0]);
        assert!(TreeConnectRequest::decode(&m).is_err());
        let m = with_header(&[9, 0, 0, 0, 72, 0, 2, 0, 0x00, 0xD8]);
        assert!(TreeConnectRequest::decode(&m).unwrap().path().is_err());
        let mut body = vec![9, 0, 4, 0, 88, 0, 0, 0];
        body.extend_from_slice(&0xFFFF_FF00u32.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&[0; 10]);
        assert!(TreeConnectRequest::decode(&with_header(&body)).is_err());
        body[12] = 200;
        assert!(matches!(
            TreeConnectRequest::decode(&with_header(&body)),
            Err(DecodeError::TooLong { .. })
        ));
    }

    #[test]
    fn response_hand_assembled() {
        let resp = TreeConnectResponse {
            share_type: share_type::DISK,
            share_flags: share_flags::ACCESS_BASED_DIRECTORY_ENUM | share_flags::ENCRYPT_DATA,
            capabilities: share_capabilities::DFS,
            maximal_access: 0x001F_01FF,
        };
        let body = [
            16, 0, 1, 0, 0x00, 0x88, 0, 0, 8, 0, 0, 0, 0xFF, 0x01, 0x1F, 0x00,
        ];
        let mut w = Writer::new();
        resp.encode(&mut w);
        assert_eq!(w.as_slice(), &body);
        assert_eq!(
            TreeConnectResponse::decode(&with_header(&body)).unwrap(),
            resp
        );
        assert!(TreeConnectResponse::decode(&with_header(&body[..15])).is_err());
    }

    #[test]
    fn disconnect_round_trip() {
        let mut w = Writer::new();
        TreeDisconnectRequest.encode(&mut w);
        assert_eq!(w.as_slice(), &[4, 0, 0, 0]);
        let m = with_header(w.as_slice());
        assert_eq!(
            TreeDisconnectRequest::decode(&m).unwrap(),
            TreeDisconnectRequest
        );
        assert_eq!(
            TreeDisconnectResponse::decode(&m).unwrap(),
            TreeDisconnectResponse
        );
        assert!(TreeDisconnectRequest::decode(&with_header(&[9, 0, 0, 0])).is_err());
    }
}
