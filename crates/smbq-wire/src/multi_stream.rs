//! smbq's multi-stream negotiate context (docs/multistream.md section 3): one SMB connection
//! over several QUIC streams. Data: Version (2), StreamCount (2), Flags (4).

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::header::Command;
use crate::negotiate::{NegotiateContext, NegotiateContextType};

/// The only version defined.
pub const VERSION: u16 = 1;
/// The most data streams a request may ask for and a server may grant (section 3, rule 4).
pub const MAX_STREAMS: u16 = 64;
/// Bytes of the context's Data.
pub const DATA_LEN: usize = 8;
/// Requests that travel on the control stream only (section 5.1); the server refuses them on
/// a data stream, the client never sends them there.
pub const CONTROL_ONLY: [Command; 6] = [
    Command::NEGOTIATE,
    Command::SESSION_SETUP,
    Command::LOGOFF,
    Command::ECHO,
    Command::CANCEL,
    Command::CHANGE_NOTIFY,
];

/// The context's Data, in a request (streams wanted) or a response (streams granted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MultiStream {
    pub version: u16,
    pub streams: u16,
    /// Reserved: sent as 0, ignored on receipt.
    pub flags: u32,
}

impl MultiStream {
    pub fn new(streams: u16) -> Self {
        Self {
            version: VERSION,
            streams,
            flags: 0,
        }
    }

    /// Reads the Data; anything past the 8 defined bytes is left for later versions.
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data);
        Ok(Self {
            version: r.u16()?,
            streams: r.u16()?,
            flags: r.u32()?,
        })
    }

    pub fn encode(&self) -> [u8; DATA_LEN] {
        let mut w = Writer::with_capacity(DATA_LEN);
        w.u16(self.version).u16(self.streams).u32(self.flags);
        let mut out = [0u8; DATA_LEN];
        out.copy_from_slice(w.as_slice());
        out
    }

    /// The context carrying this Data (its bytes borrowed from `data`, see [`Self::encode`]).
    pub fn context(data: &[u8; DATA_LEN]) -> NegotiateContext<'_> {
        NegotiateContext::Other {
            context_type: NegotiateContextType::SMBQ_MULTI_STREAM,
            data,
        }
    }

    /// The first multi-stream context among `contexts`, if one is there and decodes.
    pub fn find(contexts: &[NegotiateContext<'_>]) -> Option<Self> {
        contexts.iter().find_map(|c| match c {
            NegotiateContext::Other { context_type, data }
                if *context_type == NegotiateContextType::SMBQ_MULTI_STREAM =>
            {
                Self::decode(data).ok()
            }
            _ => None,
        })
    }

    /// Whether a server may grant this request (section 3, rule 3): version 1, at least one
    /// stream. The grant is `min(streams, server's max, MAX_STREAMS)`.
    pub fn acceptable_request(&self) -> bool {
        self.version == VERSION && self.streams >= 1
    }

    /// Whether a client that asked for `asked` streams may accept this response (rule 5).
    pub fn acceptable_response(&self, asked: u16) -> bool {
        self.version == VERSION && self.streams >= 1 && self.streams <= asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trips_little_endian() {
        let m = MultiStream::new(8);
        let bytes = m.encode();
        assert_eq!(bytes, [1, 0, 8, 0, 0, 0, 0, 0]);
        assert_eq!(MultiStream::decode(&bytes), Ok(m));
    }

    #[test]
    fn short_data_does_not_decode_and_extra_bytes_are_ignored() {
        assert!(MultiStream::decode(&[1, 0, 8, 0, 0, 0, 0]).is_err());
        let longer = [1, 0, 3, 0, 0, 0, 0, 0, 0xAA, 0xBB];
        assert_eq!(MultiStream::decode(&longer).map(|m| m.streams), Ok(3));
    }

    #[test]
    fn found_among_other_contexts_through_a_full_encode_and_decode() {
        let data = MultiStream::new(4).encode();
        let list = [
            NegotiateContext::Transport { flags: 1 },
            MultiStream::context(&data),
        ];
        let mut w = Writer::new();
        for c in &list {
            c.encode(&mut w);
            while !w.len().is_multiple_of(8) {
                w.u8(0);
            }
        }
        let bytes = w.into_vec();
        // ContextType 0x5351, DataLength 8 after the first context (8 + 4 bytes, padded to 16).
        assert_eq!(&bytes[16..20], &[0x51, 0x53, 8, 0]);
        let decoded =
            NegotiateContext::decode_data(NegotiateContextType::SMBQ_MULTI_STREAM, &bytes[24..32])
                .map(|c| vec![c]);
        assert_eq!(
            decoded.as_deref().map(MultiStream::find),
            Ok(Some(MultiStream::new(4)))
        );
    }

    #[test]
    fn request_and_response_rules() {
        assert!(MultiStream::new(1).acceptable_request());
        assert!(!MultiStream::new(0).acceptable_request());
        let v2 = MultiStream {
            version: 2,
            ..MultiStream::new(4)
        };
        assert!(!v2.acceptable_request());
        assert!(MultiStream::new(4).acceptable_response(4));
        assert!(!MultiStream::new(5).acceptable_response(4));
        assert!(!MultiStream::new(0).acceptable_response(4));
        assert!(!v2.acceptable_response(4));
    }
}
