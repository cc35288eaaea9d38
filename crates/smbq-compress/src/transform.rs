//! What one connection negotiated (MS-SMB2 3.3.5.4, 3.2.5.2: Connection.CompressionIds and
//! Connection.SupportsChainedCompression), and the transform both ends apply with it:
//! compressing an outgoing message (3.1.4.4) and decompressing an incoming one (3.1.5.3,
//! 3.3.5.2.1.2, 3.2.5.1.1.2). Server and client share this one implementation.

use smbq_wire::compression::{self as wire, ChainedPayload, CompressionHeader, PatternV1};
use smbq_wire::cursor::Writer;
use smbq_wire::header::PROTOCOL_ID;
use smbq_wire::negotiate::{CompressionAlgorithm, compression_flags};

use crate::algorithm::Algorithm;

/// A run of one byte at least this long at either end of the data goes out as a Pattern_V1
/// payload (chained only); shorter runs stay with the rest.
pub const MIN_RUN: usize = 64;
/// Data this long or longer is tried on samples first: when neither a sample from its start
/// nor one from its middle shrinks by 1/16, it goes out uncompressed.
const SAMPLE: usize = 16 * 1024;

/// Connection.CompressionIds (in the sender's order of preference, never NONE) and
/// Connection.SupportsChainedCompression. The default is compression off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compression {
    algorithms: Vec<Algorithm>,
    chained: bool,
}

/// Why an incoming compressed message was refused; every one ends the connection (MS-SMB2
/// 3.3.5.2.1.2, 3.2.5.1.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecompressError {
    /// Compression (or chained compression) was not negotiated on this connection.
    NotNegotiated,
    Malformed(&'static str),
    /// An algorithm the connection did not negotiate (Pattern_V1 included).
    AlgorithmNotNegotiated(u16),
    /// OriginalCompressedSegmentSize (plus Offset) over the limit, checked before allocating.
    TooLarge {
        size: u64,
        limit: usize,
    },
    /// The payloads decompress to more or fewer bytes than the header declares.
    SizeMismatch,
    Corrupt(Algorithm),
    /// What decompressed is not an SMB2 message (an encrypted message inside a compressed
    /// one is refused: the spec compresses, then encrypts).
    NotSmb2,
}

impl std::fmt::Display for DecompressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotNegotiated => f.write_str("compression not negotiated"),
            Self::Malformed(what) => write!(f, "malformed compressed message: {what}"),
            Self::AlgorithmNotNegotiated(id) => {
                write!(f, "compression algorithm {id:#06x} not negotiated")
            }
            Self::TooLarge { size, limit } => {
                write!(
                    f,
                    "compressed message of {size} bytes over the limit of {limit}"
                )
            }
            Self::SizeMismatch => f.write_str("decompressed size differs from the declared size"),
            Self::Corrupt(a) => write!(f, "{a} payload does not decompress"),
            Self::NotSmb2 => f.write_str("decompressed message is not an SMB2 message"),
        }
    }
}

impl std::error::Error for DecompressError {}

/// An outgoing message, compressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compressed {
    /// The COMPRESSION_TRANSFORM_HEADER and what follows it (no transport frame header).
    pub message: Vec<u8>,
    /// The algorithm that did the work (Pattern_V1 when runs alone did).
    pub algorithm: Algorithm,
}

impl Compression {
    /// MS-SMB2 3.3.5.4, the server's side: the algorithms both ends support, in the server's
    /// order (`ours`), Pattern_V1 only when the client asked for chained compression (it
    /// exists only there); chained when the client asked for it.
    pub fn settle(ours: &[Algorithm], offered: &[CompressionAlgorithm], flags: u32) -> Self {
        let chained = flags & compression_flags::CHAINED != 0;
        let mut algorithms = Vec::new();
        for a in ours {
            if a.available()
                && offered.contains(&a.wire())
                && (chained || a.is_general())
                && !algorithms.contains(a)
            {
                algorithms.push(*a);
            }
        }
        let chained = chained && !algorithms.is_empty();
        Self {
            algorithms,
            chained,
        }
    }

    /// The response context's Flags and CompressionAlgorithms (3.3.5.4): NONE alone when no
    /// algorithm is common.
    pub fn response(&self) -> (u32, Vec<CompressionAlgorithm>) {
        if self.algorithms.is_empty() {
            return (compression_flags::NONE, vec![CompressionAlgorithm::NONE]);
        }
        let flags = if self.chained {
            compression_flags::CHAINED
        } else {
            compression_flags::NONE
        };
        (flags, self.algorithms.iter().map(|a| a.wire()).collect())
    }

    /// MS-SMB2 3.2.5.2, the client's side: the server's answer must name only algorithms the
    /// client offered (or NONE alone), and chained only when the client asked for it.
    pub fn accept(
        offered: &[Algorithm],
        chained_offered: bool,
        flags: u32,
        answered: &[CompressionAlgorithm],
    ) -> Result<Self, DecompressError> {
        if answered == [CompressionAlgorithm::NONE] {
            return Ok(Self::default());
        }
        let mut algorithms = Vec::new();
        for id in answered {
            let a = Algorithm::from_wire(*id)
                .filter(|a| offered.contains(a))
                .ok_or(DecompressError::AlgorithmNotNegotiated(id.0))?;
            if !algorithms.contains(&a) {
                algorithms.push(a);
            }
        }
        let chained = flags & compression_flags::CHAINED != 0;
        if algorithms.is_empty()
            || (chained && !chained_offered)
            || (!chained && algorithms.contains(&Algorithm::PatternV1))
        {
            return Err(DecompressError::Malformed(
                "compression capabilities answer",
            ));
        }
        Ok(Self {
            algorithms,
            chained,
        })
    }

    pub fn is_on(&self) -> bool {
        !self.algorithms.is_empty()
    }

    pub fn chained(&self) -> bool {
        self.chained
    }

    pub fn algorithms(&self) -> &[Algorithm] {
        &self.algorithms
    }

    /// The general algorithm this end compresses with: the first negotiated one.
    fn general(&self) -> Option<Algorithm> {
        self.algorithms.iter().copied().find(|a| a.is_general())
    }

    fn negotiated(&self, id: CompressionAlgorithm) -> Result<Algorithm, DecompressError> {
        Algorithm::from_wire(id)
            .filter(|a| self.algorithms.contains(a))
            .ok_or(DecompressError::AlgorithmNotNegotiated(id.0))
    }

    /// Decompresses a received compressed message (0xFC 'SMB') into the SMB2 message it holds
    /// (MS-SMB2 3.3.5.2.1.2 / 3.2.5.1.1.2, 3.1.5.3). `limit`: the largest message the
    /// connection accepts now (before a session is set up, the pre-authentication frame
    /// limit); the declared size is checked against it before anything is allocated, and no
    /// payload may produce more than the declared size, so memory stays within `limit` and
    /// the work linear in it whatever the input.
    pub fn decompress(&self, msg: &[u8], limit: usize) -> Result<Vec<u8>, DecompressError> {
        if !self.is_on() {
            return Err(DecompressError::NotNegotiated);
        }
        if msg.len() < wire::UNCHAINED_HEADER_LEN {
            return Err(DecompressError::Malformed(
                "shorter than the compression header",
            ));
        }
        let (header, rest) = CompressionHeader::decode(msg)
            .map_err(|_| DecompressError::Malformed("compression header"))?;
        let out = match header {
            CompressionHeader::Unchained {
                original_size,
                algorithm,
                offset,
            } => self.unchained(rest, original_size, algorithm, offset, limit)?,
            CompressionHeader::Chained { original_size } => {
                if !self.chained {
                    return Err(DecompressError::NotNegotiated);
                }
                self.chained_payloads(rest, original_size, limit)?
            }
        };
        if out.get(..4) != Some(&PROTOCOL_ID[..]) {
            return Err(DecompressError::NotSmb2);
        }
        Ok(out)
    }

    /// 2.2.42.1: `offset` bytes as they are, then one segment of `algorithm`.
    fn unchained(
        &self,
        rest: &[u8],
        original_size: u32,
        algorithm: CompressionAlgorithm,
        offset: u32,
        limit: usize,
    ) -> Result<Vec<u8>, DecompressError> {
        let a = self.negotiated(algorithm)?;
        if !a.is_general() {
            return Err(DecompressError::Malformed(
                "Pattern_V1 in an unchained message",
            ));
        }
        let total = u64::from(offset) + u64::from(original_size);
        check_size(total, limit)?;
        let (prefix, compressed) =
            rest.split_at_checked(offset as usize)
                .ok_or(DecompressError::Malformed(
                    "Offset past the end of the message",
                ))?;
        let mut out = Vec::with_capacity(total as usize);
        out.extend_from_slice(prefix);
        a.decompress(compressed, &mut out, original_size as usize)
            .map_err(|_| DecompressError::Corrupt(a))?;
        Ok(out)
    }

    /// 3.1.5.3: the payloads in turn, none past the declared total, which they must reach.
    fn chained_payloads(
        &self,
        mut rest: &[u8],
        original_size: u32,
        limit: usize,
    ) -> Result<Vec<u8>, DecompressError> {
        let want = original_size as usize;
        check_size(u64::from(original_size), limit)?;
        let mut out = Vec::with_capacity(want);
        while !rest.is_empty() {
            let (p, next) = ChainedPayload::decode(rest)
                .map_err(|_| DecompressError::Malformed("chained payload header"))?;
            rest = next;
            let room = want - out.len();
            match p.algorithm {
                CompressionAlgorithm::NONE => {
                    if p.data.len() > room {
                        return Err(DecompressError::SizeMismatch);
                    }
                    out.extend_from_slice(p.data);
                }
                CompressionAlgorithm::PATTERN_V1 => {
                    self.negotiated(p.algorithm)?;
                    let pat = PatternV1::decode(p.data)
                        .map_err(|_| DecompressError::Malformed("Pattern_V1 payload"))?;
                    let n = pat.repetitions as usize;
                    if n > room {
                        return Err(DecompressError::SizeMismatch);
                    }
                    out.resize(out.len() + n, pat.pattern);
                }
                id => {
                    let a = self.negotiated(id)?;
                    let n = p.original_size.unwrap_or(0) as usize;
                    if n > room {
                        return Err(DecompressError::SizeMismatch);
                    }
                    a.decompress(p.data, &mut out, n)
                        .map_err(|_| DecompressError::Corrupt(a))?;
                }
            }
        }
        if out.len() != want {
            return Err(DecompressError::SizeMismatch);
        }
        Ok(out)
    }

    /// MS-SMB2 3.1.4.4: compresses one outgoing message whose `prefix` (the SMB2 header and
    /// the fixed part of the body) goes out as it is and whose `data` is compressed. Chained
    /// when negotiated: the prefix as a NONE payload, runs of one byte at either end of the
    /// data as Pattern_V1, the rest with the first negotiated algorithm. None when that would
    /// not save at least 1/32 of the data, or when samples of large data do not compress.
    pub fn compress(&self, prefix: &[u8], data: &[u8]) -> Option<Compressed> {
        self.compress_with(self.general()?, prefix, data)
    }

    /// [`compress`](Self::compress) with `a` (one of [`general`](Self::general_algorithms))
    /// as the general algorithm: the sender's pace picks it (crate::pace).
    pub fn compress_with(&self, a: Algorithm, prefix: &[u8], data: &[u8]) -> Option<Compressed> {
        if !a.is_general() || !self.algorithms.contains(&a) {
            return None;
        }
        let total = u32::try_from(prefix.len().checked_add(data.len())?).ok()?;
        let c = if self.chained {
            self.compress_chained(a, prefix, data, total)?
        } else {
            self.compress_unchained(a, prefix, data)?
        };
        (c.message.len() + data.len() / 32 < total as usize).then_some(c)
    }

    /// The negotiated algorithms that compress arbitrary data, in order of preference.
    pub fn general_algorithms(&self) -> impl Iterator<Item = Algorithm> + '_ {
        self.algorithms.iter().copied().filter(|a| a.is_general())
    }

    fn compress_unchained(&self, a: Algorithm, prefix: &[u8], data: &[u8]) -> Option<Compressed> {
        if !worth_trying(a, data) {
            return None;
        }
        let mut w = Writer::with_capacity(wire::UNCHAINED_HEADER_LEN + prefix.len());
        CompressionHeader::Unchained {
            original_size: u32::try_from(data.len()).ok()?,
            algorithm: a.wire(),
            offset: u32::try_from(prefix.len()).ok()?,
        }
        .encode(&mut w);
        w.bytes(prefix);
        let mut message = w.into_vec();
        message.reserve(data.len() / 2);
        a.compress(data, &mut message);
        Some(Compressed {
            message,
            algorithm: a,
        })
    }

    fn compress_chained(
        &self,
        a: Algorithm,
        prefix: &[u8],
        data: &[u8],
        total: u32,
    ) -> Option<Compressed> {
        let pattern = self.algorithms.contains(&Algorithm::PatternV1);
        let (lead, trail) = if pattern { runs(data) } else { (0, 0) };
        let mid = data.get(lead..data.len() - trail)?;
        let mut w = Writer::with_capacity(64 + prefix.len());
        CompressionHeader::Chained {
            original_size: total,
        }
        .encode(&mut w);
        let none = CompressionAlgorithm::NONE;
        ChainedPayload::encode_header(
            &mut w,
            none,
            wire::flags::CHAINED,
            None,
            u32::try_from(prefix.len()).ok()?,
        );
        w.bytes(prefix);
        let mut used = Algorithm::PatternV1;
        if lead > 0 {
            pattern_payload(&mut w, data.first().copied()?, lead)?;
        }
        let mut message = w.into_vec();
        if !mid.is_empty() {
            match Some(a).filter(|a| worth_trying(*a, mid)) {
                Some(a) if algorithm_payload(&mut message, a, mid)? => used = a,
                _ => {
                    let mut w = Writer::with_capacity(wire::PAYLOAD_HEADER_LEN);
                    let n = u32::try_from(mid.len()).ok()?;
                    ChainedPayload::encode_header(&mut w, none, wire::flags::NONE, None, n);
                    message.extend_from_slice(w.as_slice());
                    message.extend_from_slice(mid);
                }
            }
        }
        if trail > 0 {
            let mut w = Writer::with_capacity(16);
            pattern_payload(&mut w, data.last().copied()?, trail)?;
            message.extend_from_slice(w.as_slice());
        }
        Some(Compressed {
            message,
            algorithm: used,
        })
    }
}

fn check_size(size: u64, limit: usize) -> Result<(), DecompressError> {
    if size > limit as u64 {
        return Err(DecompressError::TooLarge { size, limit });
    }
    Ok(())
}

/// The leading and trailing runs of one byte worth a Pattern_V1 payload (at least
/// [`MIN_RUN`] long; data that is one run is all lead).
fn runs(data: &[u8]) -> (usize, usize) {
    let run = |mut it: std::slice::Iter<'_, u8>, first: u8| {
        it.position(|b| *b != first).unwrap_or(data.len())
    };
    let Some((&first, &last)) = data.first().zip(data.last()) else {
        return (0, 0);
    };
    let lead = run(data.iter(), first);
    if lead == data.len() {
        return if lead >= MIN_RUN { (lead, 0) } else { (0, 0) };
    }
    let lead = if lead >= MIN_RUN { lead } else { 0 };
    let trail = data
        .iter()
        .rev()
        .position(|b| *b != last)
        .unwrap_or(data.len());
    let trail = if trail >= MIN_RUN { trail } else { 0 };
    (lead, trail)
}

fn pattern_payload(w: &mut Writer, pattern: u8, n: usize) -> Option<()> {
    let repetitions = u32::try_from(n).ok()?;
    ChainedPayload::encode_header(
        w,
        CompressionAlgorithm::PATTERN_V1,
        wire::flags::NONE,
        None,
        wire::PATTERN_V1_LEN as u32,
    );
    PatternV1 {
        pattern,
        repetitions,
    }
    .encode(w);
    Some(())
}

/// Appends `data` as a payload of `a`, when that is smaller than sending it as it is;
/// Some(false) leaves `message` as it was.
fn algorithm_payload(message: &mut Vec<u8>, a: Algorithm, data: &[u8]) -> Option<bool> {
    let start = message.len();
    let mut w = Writer::with_capacity(wire::PAYLOAD_HEADER_LEN + 4);
    let original = u32::try_from(data.len()).ok()?;
    ChainedPayload::encode_header(&mut w, a.wire(), wire::flags::NONE, Some(original), 0);
    message.extend_from_slice(w.as_slice());
    let body = message.len();
    message.reserve(data.len() / 2);
    a.compress(data, message);
    let n = message.len() - body;
    if n == 0 || n + 4 >= data.len() {
        message.truncate(start);
        return Some(false);
    }
    // Length covers OriginalPayloadSize and the compressed bytes (2.2.42.2.1).
    let length = u32::try_from(n + 4).ok()?;
    message
        .get_mut(start + 4..start + 8)?
        .copy_from_slice(&length.to_le_bytes());
    Some(true)
}

/// Give up early on data that does not compress: large data is tried on a sample from its
/// start and one from its middle first.
fn worth_trying(a: Algorithm, data: &[u8]) -> bool {
    if data.len() < 4 * SAMPLE {
        return true;
    }
    let mid = data.len() / 2;
    [0, mid].iter().any(|&at| {
        let Some(sample) = data.get(at..at + SAMPLE) else {
            return false;
        };
        let mut out = Vec::with_capacity(SAMPLE);
        a.compress(sample, &mut out);
        !out.is_empty() && out.len() < SAMPLE - SAMPLE / 16
    })
}
