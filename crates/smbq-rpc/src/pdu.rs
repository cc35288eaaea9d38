//! Connection-oriented DCE/RPC PDUs (C706 chapter 12.6, with the MS-RPCE 2.2.2 extensions).
//!
//! Bodies are encoded little-endian only; the header decoder still reads a big-endian sender's
//! lengths and call id so that the endpoint can frame the PDU and answer it.

use smbq_wire::cursor::{Reader, Writer};
use smbq_wire::error::DecodeError;
use std::fmt;
use thiserror::Error;

pub const HEADER_LEN: usize = 16;

/// C706 12.6.4 PDU types used on a connection.
pub const PTYPE_REQUEST: u8 = 0;
pub const PTYPE_RESPONSE: u8 = 2;
pub const PTYPE_FAULT: u8 = 3;
pub const PTYPE_BIND: u8 = 11;
pub const PTYPE_BIND_ACK: u8 = 12;
pub const PTYPE_BIND_NAK: u8 = 13;
pub const PTYPE_ALTER_CONTEXT: u8 = 14;
pub const PTYPE_ALTER_CONTEXT_RESP: u8 = 15;
pub const PTYPE_AUTH3: u8 = 16;
pub const PTYPE_SHUTDOWN: u8 = 17;
pub const PTYPE_CO_CANCEL: u8 = 18;
pub const PTYPE_ORPHANED: u8 = 19;

/// C706 12.6.3.1 `pfc_flags`.
pub const PFC_FIRST_FRAG: u8 = 0x01;
pub const PFC_LAST_FRAG: u8 = 0x02;
/// In a bind, MS-RPCE 2.2.2.3 reuses this bit as PFC_SUPPORT_HEADER_SIGN.
pub const PFC_PENDING_CANCEL: u8 = 0x04;
pub const PFC_CONC_MPX: u8 = 0x10;
pub const PFC_DID_NOT_EXECUTE: u8 = 0x20;
pub const PFC_MAYBE: u8 = 0x40;
pub const PFC_OBJECT_UUID: u8 = 0x80;

/// C706 14.1 `packed_drep`: little-endian integers, ASCII characters, IEEE floats.
pub const DREP_LE: [u8; 4] = [0x10, 0, 0, 0];

/// C706 12.6.3.1 p_cont_def_result_t, plus MS-RPCE 2.2.2.4 negotiate_ack.
pub const RESULT_ACCEPTANCE: u16 = 0;
pub const RESULT_USER_REJECTION: u16 = 1;
pub const RESULT_PROVIDER_REJECTION: u16 = 2;
pub const RESULT_NEGOTIATE_ACK: u16 = 3;

/// C706 12.6.3.1 p_provider_reason_t.
pub const REASON_NOT_SPECIFIED: u16 = 0;
pub const REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED: u16 = 1;
pub const REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED: u16 = 2;
pub const REASON_LOCAL_LIMIT_EXCEEDED: u16 = 3;

/// C706 12.6.3.1 p_reject_reason_t (bind_nak), plus MS-RPCE 2.2.2.5.
pub const NAK_REASON_NOT_SPECIFIED: u16 = 0;
pub const NAK_PROTOCOL_VERSION_NOT_SUPPORTED: u16 = 4;
pub const NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED: u16 = 8;

/// MS-RPCE 2.2.2.14 BindTimeFeatureNegotiationBitmask bits.
pub const BTFN_SECURITY_CONTEXT_MULTIPLEXING: u8 = 0x01;
pub const BTFN_KEEP_CONNECTION_ON_ORPHAN: u8 = 0x02;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PduError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("unsupported RPC version {major}.{minor}")]
    Version { major: u8, minor: u8 },
    #[error("frag_length {0} is shorter than the PDU's fixed part")]
    FragLength(u16),
    #[error("invalid PDU: {0}")]
    Invalid(&'static str),
}

/// A UUID in its NDR wire order (first three fields little-endian, C706 Appendix A).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub const NIL: Uuid = Uuid([0; 16]);

    pub const fn from_fields(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> Self {
        let a = d1.to_le_bytes();
        let b = d2.to_le_bytes();
        let c = d3.to_le_bytes();
        Uuid([
            a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d4[0], d4[1], d4[2], d4[3], d4[4],
            d4[5], d4[6], d4[7],
        ])
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            u16::from_le_bytes([b[4], b[5]]),
            u16::from_le_bytes([b[6], b[7]]),
            b[8],
            b[9],
            b[10],
            b[11],
            b[12],
            b[13],
            b[14],
            b[15]
        )
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// C706 12.6.3.1 p_syntax_id_t: an interface or transfer syntax and its version
/// (major in the low 16 bits, minor in the high 16 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyntaxId {
    pub uuid: Uuid,
    pub version: u32,
}

impl SyntaxId {
    pub const NIL: SyntaxId = SyntaxId {
        uuid: Uuid::NIL,
        version: 0,
    };

    pub fn major(&self) -> u16 {
        (self.version & 0xffff) as u16
    }
    pub fn minor(&self) -> u16 {
        (self.version >> 16) as u16
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            uuid: Uuid(r.array()?),
            version: r.u32()?,
        })
    }
    fn encode(&self, w: &mut Writer) {
        w.bytes(&self.uuid.0).u32(self.version);
    }

    /// MS-RPCE 3.3.1.5.3: a transfer syntax whose UUID starts 6CB71C2C-9812-4540 carries the
    /// client's BindTimeFeatureNegotiationBitmask in the octet after that prefix.
    pub fn bind_time_features(&self) -> Option<u8> {
        let prefix = BIND_TIME_FEATURE_PREFIX.0;
        if self.uuid.0.get(..8)? == prefix.get(..8)? {
            self.uuid.0.get(8).copied()
        } else {
            None
        }
    }
}

/// NDR20, C706 14.
pub const NDR20: SyntaxId = SyntaxId {
    uuid: Uuid::from_fields(
        0x8a885d04,
        0x1ceb,
        0x11c9,
        [0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48, 0x60],
    ),
    version: 2,
};

/// NDR64, MS-RPCE 2.2.5; not offered by this server.
pub const NDR64: SyntaxId = SyntaxId {
    uuid: Uuid::from_fields(
        0x71710533,
        0xbeba,
        0x4937,
        [0x83, 0x19, 0xb5, 0xdb, 0xef, 0x9c, 0xcc, 0x36],
    ),
    version: 1,
};

/// MS-RPCE 3.3.1.5.3 bind time feature negotiation UUID (bitmask octet zero here).
pub const BIND_TIME_FEATURE_PREFIX: Uuid =
    Uuid::from_fields(0x6cb71c2c, 0x9812, 0x4540, [0, 0, 0, 0, 0, 0, 0, 0]);

/// C706 12.6.3.1 common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub rpc_vers_minor: u8,
    pub ptype: u8,
    pub flags: u8,
    pub drep: [u8; 4],
    pub frag_length: u16,
    pub auth_length: u16,
    pub call_id: u32,
}

impl Header {
    /// A header for an outgoing PDU; `frag_length` is filled in by [`encode_pdu`].
    pub fn new(ptype: u8, flags: u8, call_id: u32) -> Self {
        Self {
            rpc_vers_minor: 0,
            ptype,
            flags,
            drep: DREP_LE,
            frag_length: 0,
            auth_length: 0,
            call_id,
        }
    }

    /// C706 14.1: integer representation nibble 1 = little-endian.
    pub fn is_little_endian(&self) -> bool {
        self.drep[0] & 0xf0 == 0x10
    }

    /// Decodes the header; lengths and call id are read in the sender's integer representation.
    /// C706 12.6.3.1: version 5, minor 0 or 1.
    pub fn decode(buf: &[u8]) -> Result<Self, PduError> {
        let mut r = Reader::new(buf);
        let major = r.u8()?;
        let minor = r.u8()?;
        if major != 5 || minor > 1 {
            return Err(PduError::Version { major, minor });
        }
        let ptype = r.u8()?;
        let flags = r.u8()?;
        let drep: [u8; 4] = r.array()?;
        let le = drep[0] & 0xf0 == 0x10;
        let (frag_length, auth_length, call_id) = if le {
            (r.u16()?, r.u16()?, r.u32()?)
        } else {
            (r.u16_be()?, r.u16_be()?, r.u32_be()?)
        };
        if (frag_length as usize) < HEADER_LEN {
            return Err(PduError::FragLength(frag_length));
        }
        Ok(Self {
            rpc_vers_minor: minor,
            ptype,
            flags,
            drep,
            frag_length,
            auth_length,
            call_id,
        })
    }

    fn encode(&self, w: &mut Writer) {
        w.u8(5)
            .u8(self.rpc_vers_minor)
            .u8(self.ptype)
            .u8(self.flags)
            .bytes(&self.drep)
            .u16(self.frag_length)
            .u16(self.auth_length)
            .u32(self.call_id);
    }
}

/// The frag_length of the PDU at the start of `buf`, once its 16-byte header is buffered.
pub fn peek_frag_length(buf: &[u8]) -> Option<u16> {
    let drep0 = *buf.get(4)?;
    let b = [*buf.get(8)?, *buf.get(9)?];
    Some(if drep0 & 0xf0 == 0x10 {
        u16::from_le_bytes(b)
    } else {
        u16::from_be_bytes(b)
    })
}

/// Header + body with frag_length set. Bodies here are bounded by the negotiated fragment size.
pub fn encode_pdu(mut header: Header, body: &[u8]) -> Vec<u8> {
    header.frag_length = u16::try_from(HEADER_LEN + body.len()).unwrap_or(u16::MAX);
    let mut w = Writer::with_capacity(HEADER_LEN + body.len());
    header.encode(&mut w);
    w.bytes(body);
    w.into_vec()
}

/// The PDU's body: after the header, before any auth verifier (C706 12.6.3.1: the verifier is
/// the last auth_length octets, preceded by the 8-octet sec_trailer).
pub fn body<'a>(header: &Header, pdu: &'a [u8]) -> Result<&'a [u8], PduError> {
    let frag = header.frag_length as usize;
    let trailer = if header.auth_length == 0 {
        0
    } else {
        header.auth_length as usize + 8
    };
    let end = frag
        .checked_sub(trailer)
        .filter(|&e| e >= HEADER_LEN)
        .ok_or(PduError::Invalid("auth_length exceeds frag_length"))?;
    pdu.get(HEADER_LEN..end)
        .ok_or(PduError::Decode(DecodeError::Truncated {
            need: end,
            have: pdu.len(),
        }))
}

/// C706 12.6.3.1 p_cont_elem_t.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextElem {
    pub context_id: u16,
    pub abstract_syntax: SyntaxId,
    pub transfer_syntaxes: Vec<SyntaxId>,
}

/// C706 12.6.4.3 bind and 12.6.4.1 alter_context bodies (same layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub max_xmit_frag: u16,
    pub max_recv_frag: u16,
    pub assoc_group_id: u32,
    pub contexts: Vec<ContextElem>,
}

const SYNTAX_LEN: usize = 20;

impl Bind {
    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let mut r = Reader::new(body);
        let max_xmit_frag = r.u16()?;
        let max_recv_frag = r.u16()?;
        let assoc_group_id = r.u32()?;
        let n = r.u8()?;
        r.skip(3)?;
        // Counts are u8, and each element is checked against the bytes present before use.
        let mut contexts = Vec::with_capacity((n as usize).min(r.remaining() / (4 + SYNTAX_LEN)));
        for _ in 0..n {
            let context_id = r.u16()?;
            let n_ts = r.u8()?;
            r.skip(1)?;
            let abstract_syntax = SyntaxId::decode(&mut r)?;
            let mut transfer_syntaxes =
                Vec::with_capacity((n_ts as usize).min(r.remaining() / SYNTAX_LEN));
            for _ in 0..n_ts {
                transfer_syntaxes.push(SyntaxId::decode(&mut r)?);
            }
            contexts.push(ContextElem {
                context_id,
                abstract_syntax,
                transfer_syntaxes,
            });
        }
        Ok(Self {
            max_xmit_frag,
            max_recv_frag,
            assoc_group_id,
            contexts,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.max_xmit_frag)
            .u16(self.max_recv_frag)
            .u32(self.assoc_group_id);
        w.u8(u8::try_from(self.contexts.len()).unwrap_or(u8::MAX))
            .zeros(3);
        for c in self.contexts.iter().take(u8::MAX as usize) {
            w.u16(c.context_id)
                .u8(u8::try_from(c.transfer_syntaxes.len()).unwrap_or(u8::MAX))
                .u8(0);
            c.abstract_syntax.encode(w);
            for t in c.transfer_syntaxes.iter().take(u8::MAX as usize) {
                t.encode(w);
            }
        }
    }
}

/// C706 12.6.3.1 p_result_t.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextResult {
    pub result: u16,
    pub reason: u16,
    pub transfer_syntax: SyntaxId,
}

/// C706 12.6.4.4 bind_ack and 12.6.4.2 alter_context_resp bodies (same layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAck {
    pub max_xmit_frag: u16,
    pub max_recv_frag: u16,
    pub assoc_group_id: u32,
    /// port_any_t: ASCII with its NUL counted in the length; empty encodes as length 0.
    pub secondary_address: String,
    pub results: Vec<ContextResult>,
}

impl BindAck {
    /// The body starts 16 octets into the PDU, so 4-byte alignment within the body is the
    /// same as C706's alignment from the PDU start.
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.max_xmit_frag)
            .u16(self.max_recv_frag)
            .u32(self.assoc_group_id);
        if self.secondary_address.is_empty() {
            w.u16(0);
        } else {
            let a = self.secondary_address.as_bytes();
            w.u16(u16::try_from(a.len() + 1).unwrap_or(u16::MAX))
                .bytes(a)
                .u8(0);
        }
        w.align(4);
        w.u8(u8::try_from(self.results.len()).unwrap_or(u8::MAX))
            .zeros(3);
        for res in self.results.iter().take(u8::MAX as usize) {
            w.u16(res.result).u16(res.reason);
            res.transfer_syntax.encode(w);
        }
    }

    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let mut r = Reader::new(body);
        let max_xmit_frag = r.u16()?;
        let max_recv_frag = r.u16()?;
        let assoc_group_id = r.u32()?;
        let len = r.u16()? as usize;
        let raw = r.bytes(len)?;
        let text = raw.split(|&b| b == 0).next().unwrap_or_default();
        let secondary_address = String::from_utf8(text.to_vec())
            .map_err(|_| PduError::Invalid("secondary address is not ASCII"))?;
        let pad = (4 - r.pos() % 4) % 4;
        r.skip(pad)?;
        let n = r.u8()?;
        r.skip(3)?;
        let mut results = Vec::with_capacity((n as usize).min(r.remaining() / (4 + SYNTAX_LEN)));
        for _ in 0..n {
            let result = r.u16()?;
            let reason = r.u16()?;
            let transfer_syntax = SyntaxId::decode(&mut r)?;
            results.push(ContextResult {
                result,
                reason,
                transfer_syntax,
            });
        }
        Ok(Self {
            max_xmit_frag,
            max_recv_frag,
            assoc_group_id,
            secondary_address,
            results,
        })
    }
}

/// C706 12.6.4.5 bind_nak: reject reason and the one protocol version offered (5.0), padded
/// to 8 octets as Samba and Windows send it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindNak {
    pub reason: u16,
}

impl BindNak {
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.reason).u8(1).u8(5).u8(0).zeros(3);
    }
    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        Ok(Self {
            reason: Reader::new(body).u16()?,
        })
    }
}

/// C706 12.6.4.9 request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub alloc_hint: u32,
    pub context_id: u16,
    pub opnum: u16,
    pub object: Option<Uuid>,
    pub stub: &'a [u8],
}

impl<'a> Request<'a> {
    /// `flags` is the header's pfc_flags (PFC_OBJECT_UUID adds the object field).
    pub fn decode(flags: u8, body: &'a [u8]) -> Result<Self, PduError> {
        let mut r = Reader::new(body);
        let alloc_hint = r.u32()?;
        let context_id = r.u16()?;
        let opnum = r.u16()?;
        let object = if flags & PFC_OBJECT_UUID != 0 {
            Some(Uuid(r.array()?))
        } else {
            None
        };
        Ok(Self {
            alloc_hint,
            context_id,
            opnum,
            object,
            stub: r.rest(),
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.alloc_hint).u16(self.context_id).u16(self.opnum);
        if let Some(o) = self.object {
            w.bytes(&o.0);
        }
        w.bytes(self.stub);
    }
}

/// Octets before the stub in a response fragment (header + alloc_hint, p_cont_id,
/// cancel_count, reserved).
pub const RESPONSE_OVERHEAD: usize = HEADER_LEN + 8;

/// C706 12.6.4.10 response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<'a> {
    pub alloc_hint: u32,
    pub context_id: u16,
    pub cancel_count: u8,
    pub stub: &'a [u8],
}

impl<'a> Response<'a> {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.alloc_hint)
            .u16(self.context_id)
            .u8(self.cancel_count)
            .u8(0)
            .bytes(self.stub);
    }
    pub fn decode(body: &'a [u8]) -> Result<Self, PduError> {
        let mut r = Reader::new(body);
        let alloc_hint = r.u32()?;
        let context_id = r.u16()?;
        let cancel_count = r.u8()?;
        r.skip(1)?;
        Ok(Self {
            alloc_hint,
            context_id,
            cancel_count,
            stub: r.rest(),
        })
    }
}

/// C706 12.6.4.7 fault body (MS-RPCE 2.2.2.11 names the reserved octet "flags").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub alloc_hint: u32,
    pub context_id: u16,
    pub cancel_count: u8,
    pub status: u32,
}

impl Fault {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.alloc_hint)
            .u16(self.context_id)
            .u8(self.cancel_count)
            .u8(0)
            .u32(self.status)
            .u32(0);
    }
    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let mut r = Reader::new(body);
        let alloc_hint = r.u32()?;
        let context_id = r.u16()?;
        let cancel_count = r.u8()?;
        r.skip(1)?;
        let status = r.u32()?;
        Ok(Self {
            alloc_hint,
            context_id,
            cancel_count,
            status,
        })
    }
}

/// Fault status codes (C706 Appendix E; MS-RPCE 3.1.1.5.5; RPC_X_BAD_STUB_DATA from MS-ERREF).
pub mod status {
    pub const NCA_S_OP_RNG_ERROR: u32 = 0x1c01_0002;
    pub const NCA_S_UNK_IF: u32 = 0x1c01_0003;
    pub const NCA_S_PROTO_ERROR: u32 = 0x1c01_000b;
    pub const NCA_S_UNSUPPORTED_TYPE: u32 = 0x1c01_0017;
    pub const NCA_S_FAULT_REMOTE_NO_MEMORY: u32 = 0x1c00_001b;
    /// What Windows and Samba return when a stub does not unmarshal.
    pub const RPC_X_BAD_STUB_DATA: u32 = 0x0000_06f7;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_wire_order_and_display() {
        let u = NDR20.uuid;
        assert_eq!(u.0[..4], [0x04, 0x5d, 0x88, 0x8a]);
        assert_eq!(u.to_string(), "8a885d04-1ceb-11c9-9fe8-08002b104860");
    }

    #[test]
    fn header_round_trip_and_version_check() {
        let pdu = encode_pdu(
            Header::new(PTYPE_BIND, PFC_FIRST_FRAG | PFC_LAST_FRAG, 7),
            &[1, 2, 3],
        );
        assert_eq!(pdu.len(), 19);
        assert_eq!(peek_frag_length(&pdu), Some(19));
        let h = Header::decode(&pdu).unwrap();
        assert_eq!(
            (h.ptype, h.flags, h.frag_length, h.call_id),
            (PTYPE_BIND, 3, 19, 7)
        );
        let mut bad = pdu.clone();
        bad[0] = 4;
        assert!(matches!(
            Header::decode(&bad),
            Err(PduError::Version { .. })
        ));
        assert!(Header::decode(&pdu[..15]).is_err());
        let mut short = pdu.clone();
        short[8] = 15;
        assert_eq!(Header::decode(&short), Err(PduError::FragLength(15)));
    }

    #[test]
    fn big_endian_header_lengths_are_read_in_sender_order() {
        let mut pdu = encode_pdu(Header::new(PTYPE_REQUEST, 3, 0x0102_0304), &[0; 8]);
        pdu[4] = 0x00;
        pdu[8..10].copy_from_slice(&24u16.to_be_bytes());
        pdu[12..16].copy_from_slice(&9u32.to_be_bytes());
        let h = Header::decode(&pdu).unwrap();
        assert!(!h.is_little_endian());
        assert_eq!((h.frag_length, h.call_id), (24, 9));
        assert_eq!(peek_frag_length(&pdu), Some(24));
    }

    #[test]
    fn bind_ack_pads_after_secondary_address() {
        let ack = BindAck {
            max_xmit_frag: 4280,
            max_recv_frag: 4280,
            assoc_group_id: 0x1234,
            secondary_address: "\\PIPE\\srvsvc".into(),
            results: vec![ContextResult {
                result: 0,
                reason: 0,
                transfer_syntax: NDR20,
            }],
        };
        let mut w = Writer::new();
        ack.encode(&mut w);
        let b = w.into_vec();
        // 8 fixed + 2 + 13 ("\PIPE\srvsvc\0") = 23, padded to 24, + 4 + 24
        assert_eq!(b.len(), 52);
        assert_eq!(&b[8..10], &13u16.to_le_bytes());
        assert_eq!(b[23], 0);
        assert_eq!(b[24], 1);
        assert_eq!(BindAck::decode(&b).unwrap(), ack);
    }

    #[test]
    fn bind_decode_rejects_truncation_without_panicking() {
        let bind = Bind {
            max_xmit_frag: 4280,
            max_recv_frag: 4280,
            assoc_group_id: 0,
            contexts: vec![ContextElem {
                context_id: 0,
                abstract_syntax: NDR64,
                transfer_syntaxes: vec![NDR20, NDR64],
            }],
        };
        let mut w = Writer::new();
        bind.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(Bind::decode(&b).unwrap(), bind);
        for n in 0..b.len() {
            assert!(Bind::decode(&b[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn body_excludes_auth_trailer_and_checks_lengths() {
        let mut h = Header::new(PTYPE_REQUEST, 3, 1);
        h.frag_length = 40;
        h.auth_length = 8;
        let pdu = [0u8; 40];
        assert_eq!(body(&h, &pdu).unwrap().len(), 8);
        h.auth_length = 30;
        assert!(body(&h, &pdu).is_err());
        h.auth_length = 0;
        h.frag_length = 50;
        assert!(body(&h, &pdu).is_err());
    }

    #[test]
    fn bind_time_feature_bits_are_extracted() {
        let mut u = BIND_TIME_FEATURE_PREFIX;
        u.0[8] = 3;
        assert_eq!(
            SyntaxId {
                uuid: u,
                version: 1
            }
            .bind_time_features(),
            Some(3)
        );
        assert_eq!(NDR20.bind_time_features(), None);
    }
}
