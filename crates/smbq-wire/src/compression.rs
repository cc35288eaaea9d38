//! SMB2 COMPRESSION_TRANSFORM_HEADER (MS-SMB2 2.2.42): the unchained header, the chained
//! header and its payload headers, and the Pattern_V1 payload. Only the layout lives here;
//! what a receiver accepts (negotiated algorithms, sizes) is `smbq-compress`'s.

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::negotiate::CompressionAlgorithm;
use crate::transform::COMPRESSION_PROTOCOL_ID;

/// SMB2_COMPRESSION_TRANSFORM_HEADER_UNCHAINED (2.2.42.1): 16 bytes.
pub const UNCHAINED_HEADER_LEN: usize = 16;
/// SMB2_COMPRESSION_TRANSFORM_HEADER_CHAINED (2.2.42.2): ProtocolId and
/// OriginalCompressedSegmentSize; the first payload header follows (its Flags field sits
/// where the unchained header has its Flags).
pub const CHAINED_HEADER_LEN: usize = 8;
/// SMB2_COMPRESSION_CHAINED_PAYLOAD_HEADER without OriginalPayloadSize (2.2.42.2.1).
pub const PAYLOAD_HEADER_LEN: usize = 8;
/// SMB2_COMPRESSION_PATTERN_PAYLOAD_V1 (2.2.42.2.2).
pub const PATTERN_V1_LEN: usize = 8;

/// Flags of the transform header and of a chained payload header (2.2.42, 2.2.42.2.1).
pub mod flags {
    pub const NONE: u16 = 0x0000;
    pub const CHAINED: u16 = 0x0001;
}

/// The fixed part of a compressed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionHeader {
    /// 2.2.42.1: `offset` bytes after the header are sent as they are, then the compressed
    /// segment, which decompresses to `original_size` bytes.
    Unchained {
        original_size: u32,
        algorithm: CompressionAlgorithm,
        offset: u32,
    },
    /// 2.2.42.2: payloads follow; together they decompress to `original_size` bytes.
    Chained { original_size: u32 },
}

impl CompressionHeader {
    /// Decodes the header at the start of `msg` and returns it with the bytes after it (the
    /// chained form's payload headers start at byte 8). Flags other than NONE and CHAINED are
    /// malformed.
    pub fn decode(msg: &[u8]) -> Result<(Self, &[u8]), DecodeError> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != COMPRESSION_PROTOCOL_ID {
            return Err(DecodeError::BadProtocolId);
        }
        let original_size = r.u32()?;
        let at_payloads = r.pos();
        let algorithm = CompressionAlgorithm(r.u16()?);
        match r.u16()? {
            flags::NONE => {
                let offset = r.u32()?;
                let h = Self::Unchained {
                    original_size,
                    algorithm,
                    offset,
                };
                Ok((h, r.rest()))
            }
            flags::CHAINED => {
                let rest = msg.get(at_payloads..).unwrap_or_default();
                Ok((Self::Chained { original_size }, rest))
            }
            _ => Err(DecodeError::InvalidField { field: "Flags" }),
        }
    }

    /// Encodes the header: 16 bytes unchained, 8 chained (the first payload header follows).
    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&COMPRESSION_PROTOCOL_ID);
        match *self {
            Self::Unchained {
                original_size,
                algorithm,
                offset,
            } => {
                w.u32(original_size)
                    .u16(algorithm.0)
                    .u16(flags::NONE)
                    .u32(offset);
            }
            Self::Chained { original_size } => {
                w.u32(original_size);
            }
        }
    }
}

/// Whether a chained payload header carries OriginalPayloadSize (2.2.42.2.1: LZNT1, LZ77,
/// LZ77+Huffman and LZ4 do; NONE and Pattern_V1 do not).
pub fn has_original_size(algorithm: CompressionAlgorithm) -> bool {
    matches!(
        algorithm,
        CompressionAlgorithm::LZNT1
            | CompressionAlgorithm::LZ77
            | CompressionAlgorithm::LZ77_HUFFMAN
            | CompressionAlgorithm::LZ4
    )
}

/// One chained payload (2.2.42.2.1), its data borrowed from the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainedPayload<'a> {
    pub algorithm: CompressionAlgorithm,
    pub flags: u16,
    /// OriginalPayloadSize, for the algorithms that carry it.
    pub original_size: Option<u32>,
    /// The payload after its header (and after OriginalPayloadSize).
    pub data: &'a [u8],
}

impl<'a> ChainedPayload<'a> {
    /// Decodes the payload at the start of `buf`; returns it and the bytes after it. Length
    /// is checked against what is left, once.
    pub fn decode(buf: &'a [u8]) -> Result<(Self, &'a [u8]), DecodeError> {
        let mut r = Reader::new(buf);
        let algorithm = CompressionAlgorithm(r.u16()?);
        let flags = r.u16()?;
        let length = r.u32()? as usize;
        let mut body = Reader::new(r.bytes(length)?);
        let original_size = if has_original_size(algorithm) {
            Some(body.u32()?)
        } else {
            None
        };
        let p = Self {
            algorithm,
            flags,
            original_size,
            data: body.rest(),
        };
        Ok((p, r.rest()))
    }

    /// Encodes a payload header for `data_len` bytes of payload data (which the caller
    /// appends): Length covers OriginalPayloadSize when present.
    pub fn encode_header(
        w: &mut Writer,
        algorithm: CompressionAlgorithm,
        flags: u16,
        original_size: Option<u32>,
        data_len: u32,
    ) {
        let extra = if original_size.is_some() { 4 } else { 0 };
        w.u16(algorithm.0)
            .u16(flags)
            .u32(data_len.saturating_add(extra));
        if let Some(n) = original_size {
            w.u32(n);
        }
    }
}

/// SMB2_COMPRESSION_PATTERN_PAYLOAD_V1 (2.2.42.2.2): one byte repeated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternV1 {
    pub pattern: u8,
    pub repetitions: u32,
}

impl PatternV1 {
    /// Exactly 8 bytes; the reserved fields are ignored as the spec says.
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        if data.len() != PATTERN_V1_LEN {
            return Err(DecodeError::InvalidField {
                field: "Pattern_V1 payload length",
            });
        }
        let mut r = Reader::new(data);
        let pattern = r.u8()?;
        r.skip(3)?;
        let repetitions = r.u32()?;
        Ok(Self {
            pattern,
            repetitions,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u8(self.pattern).u8(0).u16(0).u32(self.repetitions);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchained_round_trip() {
        let h = CompressionHeader::Unchained {
            original_size: 1000,
            algorithm: CompressionAlgorithm::LZ4,
            offset: 80,
        };
        let mut w = Writer::new();
        h.encode(&mut w);
        w.bytes(b"rest");
        let v = w.into_vec();
        assert_eq!(v.len(), UNCHAINED_HEADER_LEN + 4);
        let (d, rest) = CompressionHeader::decode(&v).unwrap();
        assert_eq!(d, h);
        assert_eq!(rest, b"rest");
    }

    /// The chained message smb-rs's tests carry (a Windows READ response: NONE, NONE with a
    /// garbage Flags field, Pattern_V1), decoded payload by payload.
    #[test]
    fn windows_chained_read_response_decodes() {
        let hex = "fc534d42700100000000010068000000fe534d4240000100000000001000010030000000000000009100000000000000fffe0000010000007d00002800300000000000000000000000000000000000002900010f2a02000068000000080100000000000003000000ee0500000c0000008d0000000c000000000075b91a0000000000000015244d7045615f443236324143363234343531323935040000000800000000000000ee000000";
        let v: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let (h, mut rest) = CompressionHeader::decode(&v).unwrap();
        assert_eq!(h, CompressionHeader::Chained { original_size: 368 });
        let mut seen = Vec::new();
        while !rest.is_empty() {
            let (p, next) = ChainedPayload::decode(rest).unwrap();
            seen.push((p.algorithm, p.data.len()));
            rest = next;
        }
        assert_eq!(
            seen,
            vec![
                (CompressionAlgorithm::NONE, 104),
                (CompressionAlgorithm::NONE, 26),
                (CompressionAlgorithm::PATTERN_V1, 8)
            ]
        );
        let (p, _) = ChainedPayload::decode(&v[v.len() - 16..]).unwrap();
        assert_eq!(
            PatternV1::decode(p.data).unwrap(),
            PatternV1 {
                pattern: 0,
                repetitions: 238
            }
        );
    }

    #[test]
    fn payload_length_past_the_end_is_refused() {
        let mut w = Writer::new();
        ChainedPayload::encode_header(&mut w, CompressionAlgorithm::LZ4, 0, Some(10), 100);
        w.bytes(&[0; 20]);
        assert!(ChainedPayload::decode(&w.into_vec()).is_err());
        // LZ4 without room for OriginalPayloadSize.
        let mut w = Writer::new();
        w.u16(5).u16(0).u32(2).bytes(&[0, 0]);
        assert!(ChainedPayload::decode(&w.into_vec()).is_err());
    }

    #[test]
    fn unknown_flags_are_malformed() {
        let mut v = vec![0xFC, b'S', b'M', b'B', 0, 1, 0, 0, 5, 0, 2, 0, 0, 0, 0, 0];
        assert!(CompressionHeader::decode(&v).is_err());
        v[10] = 0;
        assert!(CompressionHeader::decode(&v).is_ok());
    }

    #[test]
    fn pattern_must_be_eight_bytes() {
        assert!(PatternV1::decode(&[0; 7]).is_err());
        assert!(PatternV1::decode(&[0; 9]).is_err());
        let p = PatternV1 {
            pattern: 0xAB,
            repetitions: 7,
        };
        let mut w = Writer::new();
        p.encode(&mut w);
        assert_eq!(PatternV1::decode(w.as_slice()).unwrap(), p);
    }
}
