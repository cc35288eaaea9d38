//! Server-side copy payloads (MS-SMB2 2.2.31.1, 2.2.32.1, 2.2.32.3): the resume key that names
//! a source open, the chunk list of FSCTL_SRV_COPYCHUNK(_WRITE), and its answer.

use crate::cursor::{Reader, Writer, len32};
use crate::error::DecodeError;

/// Length of a resume key (MS-SMB2 2.2.32.3: opaque to the client).
pub const RESUME_KEY_LEN: usize = 24;

/// SRV_REQUEST_RESUME_KEY response (MS-SMB2 2.2.32.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeKeyResponse {
    pub resume_key: [u8; RESUME_KEY_LEN],
}

impl ResumeKeyResponse {
    /// ResumeKey, ContextLength (always 0 here), and 4 bytes of (empty) Context padding,
    /// as Windows sends them.
    pub const LEN: usize = RESUME_KEY_LEN + 8;

    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&self.resume_key).u32(0).u32(0);
    }

    pub fn decode(output: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(output);
        let resume_key = r.array()?;
        let _context_len = r.u32()?;
        Ok(Self { resume_key })
    }
}

/// One SRV_COPYCHUNK entry (MS-SMB2 2.2.31.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Chunk {
    pub source_offset: u64,
    pub target_offset: u64,
    pub length: u32,
}

impl Chunk {
    pub const LEN: usize = 24;
}

/// SRV_COPYCHUNK_COPY (MS-SMB2 2.2.31.1), the input of FSCTL_SRV_COPYCHUNK(_WRITE).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyChunkCopy {
    pub source_key: [u8; RESUME_KEY_LEN],
    /// ChunkCount as sent; `chunks` holds the entries when the count is within the decode
    /// limit, else none (the server answers the count with its limits, MS-SMB2 3.3.5.15.6).
    pub chunk_count: u32,
    pub chunks: Vec<Chunk>,
}

impl CopyChunkCopy {
    /// SourceKey, ChunkCount, Reserved.
    pub const FIXED_LEN: usize = RESUME_KEY_LEN + 8;

    /// Decodes the input buffer. Entries are read only when `chunk_count <= max_chunks`: a
    /// larger count is a limit violation the caller answers without reading them, so the
    /// allocation stays bounded by `max_chunks` whatever the wire says. Fewer bytes than the
    /// count names is malformed.
    pub fn decode(input: &[u8], max_chunks: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(input);
        let source_key = r.array()?;
        let chunk_count = r.u32()?;
        let _reserved = r.u32()?;
        let mut chunks = Vec::new();
        if chunk_count <= max_chunks {
            let n = usize::try_from(chunk_count).unwrap_or(usize::MAX);
            if r.remaining() / Chunk::LEN < n {
                return Err(DecodeError::Truncated {
                    need: n.saturating_mul(Chunk::LEN),
                    have: r.remaining(),
                });
            }
            chunks.reserve(n);
            for _ in 0..n {
                let source_offset = r.u64()?;
                let target_offset = r.u64()?;
                let length = r.u32()?;
                let _reserved = r.u32()?;
                chunks.push(Chunk {
                    source_offset,
                    target_offset,
                    length,
                });
            }
        }
        Ok(Self {
            source_key,
            chunk_count,
            chunks,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&self.source_key)
            .u32(len32(self.chunks.len()))
            .u32(0);
        for c in &self.chunks {
            w.u64(c.source_offset)
                .u64(c.target_offset)
                .u32(c.length)
                .u32(0);
        }
    }
}

/// SRV_COPYCHUNK_RESPONSE (MS-SMB2 2.2.32.1). After a success the fields count what was
/// copied; after STATUS_INVALID_PARAMETER for a broken limit they carry the server's limits
/// (chunks, bytes per chunk, bytes per request); after a failed chunk, what was copied before
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CopyChunkResponse {
    pub chunks_written: u32,
    pub chunk_bytes_written: u32,
    pub total_bytes_written: u32,
}

impl CopyChunkResponse {
    pub const LEN: usize = 12;

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.chunks_written)
            .u32(self.chunk_bytes_written)
            .u32(self.total_bytes_written);
    }

    pub fn decode(output: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(output);
        Ok(Self {
            chunks_written: r.u32()?,
            chunk_bytes_written: r.u32()?,
            total_bytes_written: r.u32()?,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn copy_round_trips() {
        let c = CopyChunkCopy {
            source_key: [7; RESUME_KEY_LEN],
            chunk_count: 2,
            chunks: vec![
                Chunk {
                    source_offset: 1,
                    target_offset: 2,
                    length: 3,
                },
                Chunk {
                    source_offset: u64::MAX,
                    target_offset: 0,
                    length: u32::MAX,
                },
            ],
        };
        let mut w = Writer::new();
        c.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), CopyChunkCopy::FIXED_LEN + 2 * Chunk::LEN);
        assert_eq!(CopyChunkCopy::decode(&b, 256).unwrap(), c);
    }

    #[test]
    fn a_count_over_the_limit_reads_no_entries() {
        let mut w = Writer::new();
        w.bytes(&[0; RESUME_KEY_LEN]).u32(u32::MAX).u32(0);
        let c = CopyChunkCopy::decode(&w.into_vec(), 256).unwrap();
        assert_eq!(c.chunk_count, u32::MAX);
        assert!(c.chunks.is_empty());
    }

    #[test]
    fn a_count_beyond_the_buffer_is_malformed() {
        let mut w = Writer::new();
        w.bytes(&[0; RESUME_KEY_LEN])
            .u32(2)
            .u32(0)
            .zeros(Chunk::LEN);
        assert!(CopyChunkCopy::decode(&w.into_vec(), 256).is_err());
        assert!(CopyChunkCopy::decode(&[0; 20], 256).is_err());
    }

    #[test]
    fn response_and_key_round_trip() {
        let r = CopyChunkResponse {
            chunks_written: 256,
            chunk_bytes_written: 1 << 20,
            total_bytes_written: 16 << 20,
        };
        let mut w = Writer::new();
        r.encode(&mut w);
        assert_eq!(CopyChunkResponse::decode(w.as_slice()).unwrap(), r);
        let k = ResumeKeyResponse {
            resume_key: [9; RESUME_KEY_LEN],
        };
        let mut w = Writer::new();
        k.encode(&mut w);
        assert_eq!(w.len(), ResumeKeyResponse::LEN);
        assert_eq!(ResumeKeyResponse::decode(w.as_slice()).unwrap(), k);
    }
}
