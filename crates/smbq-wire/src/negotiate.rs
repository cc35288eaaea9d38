//! SMB2 NEGOTIATE request and response (MS-SMB2 2.2.3, 2.2.4) and the SMB 3.1.1 negotiate
//! contexts (MS-SMB2 2.2.3.1, 2.2.4.1).

use crate::cursor::{Reader, Writer, len16, len32, slice_at, utf16le_decode};
use crate::error::DecodeError;
use crate::header::{Dialect, HEADER_LEN};

/// Global capability bits (MS-SMB2 2.2.3 Capabilities, 2.2.4 Capabilities).
pub mod capabilities {
    pub const DFS: u32 = 0x0000_0001;
    pub const LEASING: u32 = 0x0000_0002;
    pub const LARGE_MTU: u32 = 0x0000_0004;
    pub const MULTI_CHANNEL: u32 = 0x0000_0008;
    pub const PERSISTENT_HANDLES: u32 = 0x0000_0010;
    pub const DIRECTORY_LEASING: u32 = 0x0000_0020;
    pub const ENCRYPTION: u32 = 0x0000_0040;
    pub const NOTIFICATIONS: u32 = 0x0000_0080;
}

/// NEGOTIATE SecurityMode bits (MS-SMB2 2.2.3, 2.2.4).
pub mod security_mode {
    pub const SIGNING_ENABLED: u16 = 0x0001;
    pub const SIGNING_REQUIRED: u16 = 0x0002;
}

/// Most dialects a request may list; real clients send at most a handful.
pub const MAX_DIALECTS: usize = 64;
/// Most negotiate contexts accepted in one message.
pub const MAX_CONTEXTS: usize = 64;
/// Most entries in one list inside a context (hash algorithms, ciphers, ...).
pub const MAX_LIST_ENTRIES: usize = 32;

crate::open_enum! {
    /// SMB2_NEGOTIATE_CONTEXT ContextType (MS-SMB2 2.2.3.1).
    NegotiateContextType(u16) {
        PREAUTH_INTEGRITY_CAPABILITIES = 0x0001,
        ENCRYPTION_CAPABILITIES = 0x0002,
        COMPRESSION_CAPABILITIES = 0x0003,
        NETNAME_NEGOTIATE_CONTEXT_ID = 0x0005,
        TRANSPORT_CAPABILITIES = 0x0006,
        RDMA_TRANSFORM_CAPABILITIES = 0x0007,
        SIGNING_CAPABILITIES = 0x0008,
        CONTEXTTYPE_RESERVED = 0x0100,
        /// smbq's multi-stream extension over QUIC (docs/multistream.md, `multi_stream`).
        SMBQ_MULTI_STREAM = 0x5351,
    }
}

crate::open_enum! {
    /// Preauth integrity hash algorithm (MS-SMB2 2.2.3.1.1).
    HashAlgorithm(u16) {
        SHA512 = 0x0001,
    }
}

crate::open_enum! {
    /// Encryption cipher (MS-SMB2 2.2.3.1.2).
    Cipher(u16) {
        AES_128_CCM = 0x0001,
        AES_128_GCM = 0x0002,
        AES_256_CCM = 0x0003,
        AES_256_GCM = 0x0004,
    }
}

crate::open_enum! {
    /// Compression algorithm (MS-SMB2 2.2.3.1.3).
    CompressionAlgorithm(u16) {
        NONE = 0x0000,
        LZNT1 = 0x0001,
        LZ77 = 0x0002,
        LZ77_HUFFMAN = 0x0003,
        PATTERN_V1 = 0x0004,
        LZ4 = 0x0005,
    }
}

crate::open_enum! {
    /// RDMA transform id (MS-SMB2 2.2.3.1.6).
    RdmaTransformId(u16) {
        NONE = 0x0000,
        ENCRYPTION = 0x0001,
        SIGNING = 0x0002,
    }
}

crate::open_enum! {
    /// Signing algorithm (MS-SMB2 2.2.3.1.7).
    SigningAlgorithm(u16) {
        HMAC_SHA256 = 0x0000,
        AES_CMAC = 0x0001,
        AES_GMAC = 0x0002,
    }
}

/// SMB2_COMPRESSION_CAPABILITIES Flags (MS-SMB2 2.2.3.1.3).
pub mod compression_flags {
    pub const NONE: u32 = 0x0000_0000;
    pub const CHAINED: u32 = 0x0000_0001;
}

/// SMB2_TRANSPORT_CAPABILITIES Flags (MS-SMB2 2.2.3.1.5).
pub mod transport_flags {
    pub const ACCEPT_TRANSPORT_LEVEL_SECURITY: u32 = 0x0000_0001;
}

/// One negotiate context (MS-SMB2 2.2.3.1). Types we do not know stay as raw data so the
/// preauth hash and future extensions are unaffected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NegotiateContext<'a> {
    /// MS-SMB2 2.2.3.1.1 / 2.2.4.1.1.
    PreauthIntegrity {
        hash_algorithms: Vec<HashAlgorithm>,
        salt: &'a [u8],
    },
    /// MS-SMB2 2.2.3.1.2 / 2.2.4.1.2.
    Encryption { ciphers: Vec<Cipher> },
    /// MS-SMB2 2.2.3.1.3 / 2.2.4.1.3.
    Compression {
        flags: u32,
        algorithms: Vec<CompressionAlgorithm>,
    },
    /// MS-SMB2 2.2.3.1.4: the server name the client connected to, UTF-16LE, no terminator.
    /// Kept raw: the server only logs it, and a bad name must not fail the negotiate.
    Netname { name_utf16: &'a [u8] },
    /// MS-SMB2 2.2.3.1.5 / 2.2.4.1.5.
    Transport { flags: u32 },
    /// MS-SMB2 2.2.3.1.6 / 2.2.4.1.6.
    RdmaTransform { transform_ids: Vec<RdmaTransformId> },
    /// MS-SMB2 2.2.3.1.7 / 2.2.4.1.7.
    Signing { algorithms: Vec<SigningAlgorithm> },
    /// Any other ContextType, data untouched.
    Other {
        context_type: NegotiateContextType,
        data: &'a [u8],
    },
}

impl<'a> NegotiateContext<'a> {
    pub fn context_type(&self) -> NegotiateContextType {
        match self {
            Self::PreauthIntegrity { .. } => NegotiateContextType::PREAUTH_INTEGRITY_CAPABILITIES,
            Self::Encryption { .. } => NegotiateContextType::ENCRYPTION_CAPABILITIES,
            Self::Compression { .. } => NegotiateContextType::COMPRESSION_CAPABILITIES,
            Self::Netname { .. } => NegotiateContextType::NETNAME_NEGOTIATE_CONTEXT_ID,
            Self::Transport { .. } => NegotiateContextType::TRANSPORT_CAPABILITIES,
            Self::RdmaTransform { .. } => NegotiateContextType::RDMA_TRANSFORM_CAPABILITIES,
            Self::Signing { .. } => NegotiateContextType::SIGNING_CAPABILITIES,
            Self::Other { context_type, .. } => *context_type,
        }
    }

    /// The Netname as a string, if this is a Netname context with valid UTF-16.
    pub fn netname(&self) -> Option<String> {
        match self {
            Self::Netname { name_utf16 } => utf16le_decode(name_utf16).ok(),
            _ => None,
        }
    }

    /// Parses the Data of a context of type `ty`.
    pub fn decode_data(ty: NegotiateContextType, data: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data);
        Ok(match ty {
            NegotiateContextType::PREAUTH_INTEGRITY_CAPABILITIES => {
                let count = usize::from(r.u16()?);
                let salt_len = usize::from(r.u16()?);
                let hash_algorithms =
                    read_list(&mut r, count, "HashAlgorithmCount", HashAlgorithm)?;
                let salt = r.bytes(salt_len)?;
                Self::PreauthIntegrity {
                    hash_algorithms,
                    salt,
                }
            }
            NegotiateContextType::ENCRYPTION_CAPABILITIES => {
                let count = usize::from(r.u16()?);
                Self::Encryption {
                    ciphers: read_list(&mut r, count, "CipherCount", Cipher)?,
                }
            }
            NegotiateContextType::COMPRESSION_CAPABILITIES => {
                let count = usize::from(r.u16()?);
                let _padding = r.u16()?;
                let flags = r.u32()?;
                let algorithms = read_list(
                    &mut r,
                    count,
                    "CompressionAlgorithmCount",
                    CompressionAlgorithm,
                )?;
                Self::Compression { flags, algorithms }
            }
            NegotiateContextType::NETNAME_NEGOTIATE_CONTEXT_ID => {
                Self::Netname { name_utf16: data }
            }
            NegotiateContextType::TRANSPORT_CAPABILITIES => Self::Transport { flags: r.u32()? },
            NegotiateContextType::RDMA_TRANSFORM_CAPABILITIES => {
                let count = usize::from(r.u16()?);
                let _reserved1 = r.u16()?;
                let _reserved2 = r.u32()?;
                let transform_ids = read_list(&mut r, count, "TransformCount", RdmaTransformId)?;
                Self::RdmaTransform { transform_ids }
            }
            NegotiateContextType::SIGNING_CAPABILITIES => {
                let count = usize::from(r.u16()?);
                let algorithms =
                    read_list(&mut r, count, "SigningAlgorithmCount", SigningAlgorithm)?;
                Self::Signing { algorithms }
            }
            context_type => Self::Other { context_type, data },
        })
    }

    /// Writes the Data part only.
    pub fn encode_data(&self, w: &mut Writer) {
        match self {
            Self::PreauthIntegrity {
                hash_algorithms,
                salt,
            } => {
                w.u16(len16(hash_algorithms.len())).u16(len16(salt.len()));
                for h in hash_algorithms {
                    w.u16(h.0);
                }
                w.bytes(salt);
            }
            Self::Encryption { ciphers } => {
                w.u16(len16(ciphers.len()));
                for c in ciphers {
                    w.u16(c.0);
                }
            }
            Self::Compression { flags, algorithms } => {
                w.u16(len16(algorithms.len())).u16(0).u32(*flags);
                for a in algorithms {
                    w.u16(a.0);
                }
            }
            Self::Netname { name_utf16 } => {
                w.bytes(name_utf16);
            }
            Self::Transport { flags } => {
                w.u32(*flags);
            }
            Self::RdmaTransform { transform_ids } => {
                w.u16(len16(transform_ids.len())).u16(0).u32(0);
                for t in transform_ids {
                    w.u16(t.0);
                }
            }
            Self::Signing { algorithms } => {
                w.u16(len16(algorithms.len()));
                for a in algorithms {
                    w.u16(a.0);
                }
            }
            Self::Other { data, .. } => {
                w.bytes(data);
            }
        }
    }

    /// Writes ContextType, DataLength, Reserved and Data (no alignment padding).
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.context_type().0);
        let len_pos = w.len();
        w.u16(0).u32(0);
        let data_start = w.len();
        self.encode_data(w);
        let data_len = len16(w.len() - data_start);
        w.patch_u16(len_pos, data_len);
    }
}

/// Decodes `count` contexts starting at absolute `offset` of `msg`; each one after the first
/// starts at the next 8-byte boundary from the header (MS-SMB2 2.2.3 NegotiateContextList).
pub fn decode_contexts<'a>(
    msg: &'a [u8],
    offset: usize,
    count: usize,
) -> Result<Vec<NegotiateContext<'a>>, DecodeError> {
    if count > MAX_CONTEXTS {
        return Err(DecodeError::TooLong {
            field: "NegotiateContextCount",
            len: count,
            limit: MAX_CONTEXTS,
        });
    }
    let mut out = Vec::with_capacity(count);
    let mut pos = offset;
    for i in 0..count {
        if i > 0 {
            pos = align8(pos)?;
        }
        let mut r = Reader::at(msg, pos)?;
        let ty = NegotiateContextType(r.u16()?);
        let data_len = usize::from(r.u16()?);
        let _reserved = r.u32()?;
        let data = r.bytes(data_len)?;
        out.push(NegotiateContext::decode_data(ty, data)?);
        pos = r.pos();
    }
    Ok(out)
}

/// Encodes contexts back to back, padding each to 8 bytes relative to `body_start` (the
/// writer position of the body's first byte, which sits at [`HEADER_LEN`], a multiple of 8).
pub fn encode_contexts(contexts: &[NegotiateContext<'_>], w: &mut Writer, body_start: usize) {
    for (i, c) in contexts.iter().enumerate() {
        if i > 0 {
            w.align_from(body_start, 8);
        }
        c.encode(w);
    }
}

/// SMB2 NEGOTIATE Request (MS-SMB2 2.2.3).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NegotiateRequest<'a> {
    pub security_mode: u16,
    pub capabilities: u32,
    pub client_guid: [u8; 16],
    pub dialects: Vec<Dialect>,
    /// Only present (and only parsed) when `dialects` contains 3.1.1; otherwise the 8 bytes
    /// are ClientStartTime, which MUST be zero and is ignored.
    pub contexts: Vec<NegotiateContext<'a>>,
}

impl<'a> NegotiateRequest<'a> {
    pub const STRUCTURE_SIZE: u16 = 36;

    pub fn offers(&self, d: Dialect) -> bool {
        self.dialects.contains(&d)
    }

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let dialect_count = usize::from(r.u16()?);
        let security_mode = r.u16()?;
        let _reserved = r.u16()?;
        let capabilities = r.u32()?;
        let client_guid = r.guid()?;
        let context_offset = r.u32()?;
        let context_count = r.u16()?;
        let _reserved2 = r.u16()?;
        if dialect_count > MAX_DIALECTS {
            return Err(DecodeError::TooLong {
                field: "DialectCount",
                len: dialect_count,
                limit: MAX_DIALECTS,
            });
        }
        let raw = r.bytes(dialect_count * 2)?;
        let dialects: Vec<Dialect> = le_u16s(raw).map(Dialect).collect();
        let contexts = if dialects.contains(&Dialect::SMB3_1_1) {
            decode_contexts(
                msg,
                offset_usize(context_offset),
                usize::from(context_count),
            )?
        } else {
            Vec::new()
        };
        Ok(Self {
            security_mode,
            capabilities,
            client_guid,
            dialects,
            contexts,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        let start = w.len();
        w.u16(Self::STRUCTURE_SIZE)
            .u16(len16(self.dialects.len()))
            .u16(self.security_mode)
            .u16(0)
            .u32(self.capabilities)
            .bytes(&self.client_guid);
        let ctx_offset_pos = w.len();
        w.u32(0).u16(len16(self.contexts.len())).u16(0);
        for d in &self.dialects {
            w.u16(d.0);
        }
        if !self.contexts.is_empty() {
            w.align_from(start, 8);
            let off = HEADER_LEN + (w.len() - start);
            w.patch_u32(ctx_offset_pos, len32(off));
            encode_contexts(&self.contexts, w, start);
        }
    }
}

/// SMB2 NEGOTIATE Response (MS-SMB2 2.2.4).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NegotiateResponse<'a> {
    pub security_mode: u16,
    pub dialect: Dialect,
    pub server_guid: [u8; 16],
    pub capabilities: u32,
    pub max_transact_size: u32,
    pub max_read_size: u32,
    pub max_write_size: u32,
    /// FILETIME.
    pub system_time: u64,
    /// FILETIME; servers send 0.
    pub server_start_time: u64,
    /// SPNEGO token (GSS negTokenInit2 hint) or empty.
    pub security_buffer: &'a [u8],
    /// Only for dialect 3.1.1 (the count/offset fields are reserved otherwise).
    pub contexts: Vec<NegotiateContext<'a>>,
}

impl<'a> NegotiateResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 65;
    /// Size of the fixed part; the security buffer follows at HEADER_LEN + 64.
    const FIXED: usize = 64;

    pub fn decode(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let security_mode = r.u16()?;
        let dialect = Dialect(r.u16()?);
        let context_count = r.u16()?;
        let server_guid = r.guid()?;
        let capabilities = r.u32()?;
        let max_transact_size = r.u32()?;
        let max_read_size = r.u32()?;
        let max_write_size = r.u32()?;
        let system_time = r.u64()?;
        let server_start_time = r.u64()?;
        let sec_off = usize::from(r.u16()?);
        let sec_len = usize::from(r.u16()?);
        let context_offset = r.u32()?;
        let security_buffer = slice_at(msg, sec_off, sec_len)?;
        let contexts = if dialect == Dialect::SMB3_1_1 {
            decode_contexts(
                msg,
                offset_usize(context_offset),
                usize::from(context_count),
            )?
        } else {
            Vec::new()
        };
        Ok(Self {
            security_mode,
            dialect,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            system_time,
            server_start_time,
            security_buffer,
            contexts,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        let start = w.len();
        w.u16(Self::STRUCTURE_SIZE)
            .u16(self.security_mode)
            .u16(self.dialect.0)
            .u16(len16(self.contexts.len()))
            .bytes(&self.server_guid)
            .u32(self.capabilities)
            .u32(self.max_transact_size)
            .u32(self.max_read_size)
            .u32(self.max_write_size)
            .u64(self.system_time)
            .u64(self.server_start_time)
            .u16(len16(HEADER_LEN + Self::FIXED))
            .u16(len16(self.security_buffer.len()));
        let ctx_offset_pos = w.len();
        w.u32(0);
        w.bytes(self.security_buffer);
        if !self.contexts.is_empty() {
            w.align_from(start, 8);
            let off = HEADER_LEN + (w.len() - start);
            w.patch_u32(ctx_offset_pos, len32(off));
            encode_contexts(&self.contexts, w, start);
        } else if self.security_buffer.is_empty() {
            // StructureSize 65 counts one byte of Buffer.
            w.u8(0);
        }
    }
}

fn read_list<T>(
    r: &mut Reader<'_>,
    count: usize,
    field: &'static str,
    make: fn(u16) -> T,
) -> Result<Vec<T>, DecodeError> {
    if count > MAX_LIST_ENTRIES {
        return Err(DecodeError::TooLong {
            field,
            len: count,
            limit: MAX_LIST_ENTRIES,
        });
    }
    let raw = r.bytes(count * 2)?;
    Ok(le_u16s(raw).map(make).collect())
}

/// Little-endian u16 values of `raw` (an odd trailing byte is ignored).
pub(crate) fn le_u16s(raw: &[u8]) -> impl Iterator<Item = u16> + '_ {
    raw.chunks_exact(2)
        .map(|c| c.try_into().map_or(0, u16::from_le_bytes))
}

fn align8(pos: usize) -> Result<usize, DecodeError> {
    pos.checked_add(7)
        .map(|p| p & !7)
        .ok_or(DecodeError::Truncated {
            need: usize::MAX,
            have: pos,
        })
}

fn offset_usize(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;
    use crate::cursor::utf16le_encode;
    use crate::header::{Command, Header};

    /// NEGOTIATE request from the Microsoft Open Specifications blog post "SMB 3.1.1
    /// Pre-authentication integrity in Windows 10" (2015-08-11), as reproduced in the pike
    /// project's test vectors.
    const BLOG_NEG_REQ: &str = concat!(
        "FE534D4240000100000000000000800000000000000000000100000000000000FFFE000000000000",
        "00000000000000000000000000000000000000000000000024000500000000003F000000ECD86F32",
        "6276024F9F7752B89BB33F3A70000000020000000202100200030203110300000100260000000000",
        "010020000100FA49E6578F1F3A9F4CD3E9CC14A67AA884B3D05844E0E5A118225C15887F32FF0000",
        "0200060000000000020002000100",
    );

    /// The matching NEGOTIATE response from the same blog post.
    const BLOG_NEG_RESP: &str = concat!(
        "FE534D4240000100000000000000010001000000000000000100000000000000FFFE000000000000",
        "000000000000000000000000000000000000000000000000410001001103020039CBCAF329714942",
        "BDCE5D60F09AB3FB2F000000000080000000800000008000D8DAE5ADCBAED00109094AB095AED001",
        "80004001C00100006082013C06062B0601050502A08201303082012CA01A3018060A2B0601040182",
        "3702021E060A2B06010401823702020AA282010C048201084E45474F455854530100000000000000",
        "60000000700000007C7CC0FD06D6362D02DDE1CF343BFE292900F49750B4AA97934D9C4296B26E51",
        "FD370471B235E15A50DAE15BD5489C87000000000000000060000000010000000000000000000000",
        "5C33530DEAF90D4DB2EC4AE3786EC3084E45474F4558545303000000010000004000000098000000",
        "7C7CC0FD06D6362D02DDE1CF343BFE295C33530DEAF90D4DB2EC4AE3786EC3084000000058000000",
        "3056A05430523027802530233121301F06035504031318546F6B656E205369676E696E6720507562",
        "6C6963204B65793027802530233121301F06035504031318546F6B656E205369676E696E67205075",
        "626C6963204B6579010026000000000001002000010060A3C3B95C3C7CCD51EC536648D9B3AC74C4",
        "83CA5B65385A251117BEB30712E50000020004000000000001000200",
    );

    fn msg_with(command: Command, flags: u32, body: &[u8]) -> Vec<u8> {
        let h = Header {
            command,
            flags,
            ..Default::default()
        };
        let mut v = h.to_bytes();
        v.extend_from_slice(body);
        v
    }

    fn body_of<T>(v: &T, enc: fn(&T, &mut Writer)) -> Vec<u8> {
        let mut w = Writer::new();
        enc(v, &mut w);
        w.into_vec()
    }

    #[test]
    fn blog_request_decodes() {
        let msg = hex::decode(BLOG_NEG_REQ).unwrap();
        let req = NegotiateRequest::decode(&msg).unwrap();
        assert_eq!(
            req.dialects,
            vec![
                Dialect::SMB2_0_2,
                Dialect::SMB2_1,
                Dialect::SMB3_0,
                Dialect::SMB3_0_2,
                Dialect::SMB3_1_1
            ]
        );
        assert_eq!(req.security_mode, 0);
        assert_eq!(req.capabilities, 0x3F);
        assert_eq!(req.client_guid[..4], [0xEC, 0xD8, 0x6F, 0x32]);
        assert_eq!(req.contexts.len(), 2);
        match &req.contexts[0] {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms,
                salt,
            } => {
                assert_eq!(hash_algorithms, &[HashAlgorithm::SHA512]);
                assert_eq!(salt.len(), 32);
                assert_eq!(salt[0], 0xFA);
                assert_eq!(salt[31], 0xFF);
            }
            c => panic!("unexpected {c:?}"),
        }
        assert_eq!(
            req.contexts[1],
            NegotiateContext::Encryption {
                ciphers: vec![Cipher::AES_128_GCM, Cipher::AES_128_CCM]
            }
        );
    }

    #[test]
    fn blog_request_re_encodes_byte_exact() {
        let msg = hex::decode(BLOG_NEG_REQ).unwrap();
        let req = NegotiateRequest::decode(&msg).unwrap();
        let body = body_of(&req, NegotiateRequest::encode);
        assert_eq!(hex::encode_upper(&body), &BLOG_NEG_REQ[128..]);
    }

    #[test]
    fn blog_response_decodes_and_re_encodes() {
        let msg = hex::decode(BLOG_NEG_RESP).unwrap();
        let resp = NegotiateResponse::decode(&msg).unwrap();
        assert_eq!(resp.dialect, Dialect::SMB3_1_1);
        assert_eq!(resp.security_mode, security_mode::SIGNING_ENABLED);
        assert_eq!(resp.capabilities, 0x2F);
        assert_eq!(resp.max_transact_size, 0x0080_0000);
        assert_eq!(resp.max_read_size, 0x0080_0000);
        assert_eq!(resp.max_write_size, 0x0080_0000);
        assert_eq!(resp.security_buffer.len(), 0x140);
        assert_eq!(resp.security_buffer[0], 0x60); // GSS-API application tag
        assert_eq!(resp.contexts.len(), 2);
        assert!(matches!(
            &resp.contexts[0],
            NegotiateContext::PreauthIntegrity { hash_algorithms, salt }
                if hash_algorithms == &[HashAlgorithm::SHA512] && salt.len() == 32
        ));
        assert_eq!(
            resp.contexts[1],
            NegotiateContext::Encryption {
                ciphers: vec![Cipher::AES_128_GCM]
            }
        );
        let body = body_of(&resp, NegotiateResponse::encode);
        assert_eq!(hex::encode_upper(&body), &BLOG_NEG_RESP[128..]);
    }

    #[test]
    fn all_context_kinds_round_trip() {
        let name = utf16le_encode("server.example");
        let salt = [7u8; 32];
        let req = NegotiateRequest {
            security_mode: security_mode::SIGNING_ENABLED,
            capabilities: capabilities::DFS | capabilities::LEASING | capabilities::ENCRYPTION,
            client_guid: [0x11; 16],
            dialects: vec![Dialect::SMB3_0_2, Dialect::SMB3_1_1],
            contexts: vec![
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms: vec![HashAlgorithm::SHA512],
                    salt: &salt,
                },
                NegotiateContext::Encryption {
                    ciphers: vec![Cipher::AES_256_GCM, Cipher::AES_128_GCM],
                },
                NegotiateContext::Compression {
                    flags: compression_flags::CHAINED,
                    algorithms: vec![CompressionAlgorithm::LZ4, CompressionAlgorithm::PATTERN_V1],
                },
                NegotiateContext::Netname { name_utf16: &name },
                NegotiateContext::Transport {
                    flags: transport_flags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
                },
                NegotiateContext::RdmaTransform {
                    transform_ids: vec![RdmaTransformId::ENCRYPTION],
                },
                NegotiateContext::Signing {
                    algorithms: vec![SigningAlgorithm::AES_GMAC, SigningAlgorithm::AES_CMAC],
                },
                NegotiateContext::Other {
                    context_type: NegotiateContextType(0x1234),
                    data: b"xyz",
                },
            ],
        };
        let msg = msg_with(
            Command::NEGOTIATE,
            0,
            &body_of(&req, NegotiateRequest::encode),
        );
        let back = NegotiateRequest::decode(&msg).unwrap();
        assert_eq!(back, req);
        assert_eq!(
            back.contexts[3].netname().as_deref(),
            Some("server.example")
        );
        // Every context starts 8-aligned from the header.
        let off = u32::from_le_bytes(msg[HEADER_LEN + 28..HEADER_LEN + 32].try_into().unwrap());
        assert_eq!(off % 8, 0);
        assert_eq!(off as usize, 64 + 36 + 4); // 2 dialects end at 104, already aligned
    }

    #[test]
    fn hand_assembled_request_without_311_ignores_start_time() {
        let mut body = Vec::new();
        body.extend_from_slice(&36u16.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes()); // DialectCount
        body.extend_from_slice(&2u16.to_le_bytes()); // SIGNING_REQUIRED
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&0x44u32.to_le_bytes());
        body.extend_from_slice(&[0xAB; 16]);
        body.extend_from_slice(&[0xFF; 8]); // ClientStartTime garbage: not offsets
        body.extend_from_slice(&0x0302u16.to_le_bytes());
        let msg = msg_with(Command::NEGOTIATE, 0, &body);
        let req = NegotiateRequest::decode(&msg).unwrap();
        assert_eq!(req.dialects, vec![Dialect::SMB3_0_2]);
        assert_eq!(req.security_mode, security_mode::SIGNING_REQUIRED);
        assert_eq!(req.capabilities, 0x44);
        assert!(req.contexts.is_empty());
    }

    #[test]
    fn hand_assembled_response_without_contexts() {
        let mut body = Vec::new();
        body.extend_from_slice(&65u16.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&0x0210u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&[0x22; 16]);
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&65536u32.to_le_bytes());
        body.extend_from_slice(&65536u32.to_le_bytes());
        body.extend_from_slice(&65536u32.to_le_bytes());
        body.extend_from_slice(&5u64.to_le_bytes());
        body.extend_from_slice(&0u64.to_le_bytes());
        body.extend_from_slice(&128u16.to_le_bytes());
        body.extend_from_slice(&3u16.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(b"abc");
        let msg = msg_with(Command::NEGOTIATE, 1, &body);
        let resp = NegotiateResponse::decode(&msg).unwrap();
        assert_eq!(resp.dialect, Dialect::SMB2_1);
        assert_eq!(resp.security_buffer, b"abc");
        assert_eq!(resp.system_time, 5);
        assert_eq!(body_of(&resp, NegotiateResponse::encode), body);
    }

    #[test]
    fn empty_response_pads_one_byte() {
        let resp = NegotiateResponse {
            dialect: Dialect::SMB2_0_2,
            ..Default::default()
        };
        let body = body_of(&resp, NegotiateResponse::encode);
        assert_eq!(body.len(), 65);
        let msg = msg_with(Command::NEGOTIATE, 1, &body);
        assert_eq!(NegotiateResponse::decode(&msg).unwrap(), resp);
    }

    #[test]
    fn rejects_hostile_counts_and_offsets() {
        let msg = hex::decode(BLOG_NEG_REQ).unwrap();
        // DialectCount huge.
        let mut m = msg.clone();
        m[66..68].copy_from_slice(&1000u16.to_le_bytes());
        assert!(matches!(
            NegotiateRequest::decode(&m),
            Err(DecodeError::TooLong { .. })
        ));
        // DialectCount larger than the message.
        let mut m = msg.clone();
        m[66..68].copy_from_slice(&40u16.to_le_bytes());
        assert!(NegotiateRequest::decode(&m).is_err());
        // Context offset beyond the end.
        let mut m = msg.clone();
        m[92..96].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        assert!(NegotiateRequest::decode(&m).is_err());
        // Context count too large.
        let mut m = msg.clone();
        m[96..98].copy_from_slice(&500u16.to_le_bytes());
        assert!(matches!(
            NegotiateRequest::decode(&m),
            Err(DecodeError::TooLong { .. })
        ));
        // Context DataLength past the end.
        let mut m = msg.clone();
        m[114..116].copy_from_slice(&0x200u16.to_le_bytes());
        assert!(NegotiateRequest::decode(&m).is_err());
        // Every truncation fails cleanly.
        for n in 0..msg.len() {
            let _ = NegotiateRequest::decode(&msg[..n]);
        }
        let resp = hex::decode(BLOG_NEG_RESP).unwrap();
        for n in 0..resp.len() {
            let _ = NegotiateResponse::decode(&resp[..n]);
        }
        assert!(NegotiateResponse::decode(&resp[..resp.len() - 1]).is_err());
    }

    #[test]
    fn mutated_inputs_never_panic() {
        // Deterministic xorshift: flip bytes of the published messages and decode.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for base in [
            hex::decode(BLOG_NEG_REQ).unwrap(),
            hex::decode(BLOG_NEG_RESP).unwrap(),
        ] {
            for _ in 0..5000 {
                let mut m = base.clone();
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % m.len();
                    m[i] = next() as u8;
                }
                let _ = NegotiateRequest::decode(&m);
                let _ = NegotiateResponse::decode(&m);
            }
        }
    }

    #[test]
    fn list_cap_enforced() {
        let mut data = Vec::new();
        data.extend_from_slice(&33u16.to_le_bytes());
        data.extend_from_slice(&[0u8; 66]);
        assert!(matches!(
            NegotiateContext::decode_data(NegotiateContextType::ENCRYPTION_CAPABILITIES, &data),
            Err(DecodeError::TooLong { .. })
        ));
    }
}
