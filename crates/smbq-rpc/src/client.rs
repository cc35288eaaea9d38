//! The client side of share enumeration over the `srvsvc` named pipe: bind to the interface,
//! call NetrShareEnum at level 1 and read the answer (MS-SRVS 3.1.4.8 over MS-RPCE 2.1.1.2
//! ncacn_np). PDUs are C706 chapter 12 connection-oriented PDUs as MS-RPCE 2.2.2 profiles
//! them. No IO: the SMB client writes the PDUs built here to the pipe (WRITE, or IOCTL
//! FSCTL_PIPE_TRANSCEIVE) and feeds what it reads back in.
//!
//! Everything read back is untrusted. Parsing goes through bounds-checked cursors, counts and
//! string lengths are capped before anything is allocated from them, and referent ids are only
//! compared with zero (C706 14.3.10: a unique pointer's id is opaque, and Samba's ids are not
//! the sequential ones MIDL hands out).

use crate::ndr::{NdrError, NdrReader, NdrWriter};
use crate::pdu::{
    Bind, BindAck, BindNak, ContextElem, Fault, HEADER_LEN, Header, NDR20, PFC_FIRST_FRAG,
    PFC_LAST_FRAG, PTYPE_BIND, PTYPE_BIND_ACK, PTYPE_BIND_NAK, PTYPE_FAULT, PTYPE_REQUEST,
    PTYPE_RESPONSE, PduError, RESULT_ACCEPTANCE, Request, Response, body, encode_pdu,
    peek_frag_length,
};
use crate::pipe::MAX_FRAG;
use crate::srvsvc::{SRVSVC_SYNTAX, STYPE_SPECIAL, opnum};
use smbq_wire::cursor::Writer;
use thiserror::Error;

/// Requests are cut into fragments no larger than C706's MustRecvFragSize, which every server
/// accepts whatever it put in its bind_ack. Only an absurdly long server name gets that far.
const REQUEST_FRAG: usize = 1432;

/// The one presentation context this client binds.
const CONTEXT_ID: u16 = 0;

/// Octets of a request fragment before its stub (header, alloc_hint, p_cont_id, opnum).
const REQUEST_OVERHEAD: usize = HEADER_LEN + 8;

/// MS-SRVS 2.2.2.4: OR'ed into the base type of a temporary share.
pub const STYPE_TEMPORARY: u32 = 0x4000_0000;
/// The Windows SDK's `STYPE_MASK` (lmshare.h): the low byte holds the base type
/// (STYPE_DISKTREE, STYPE_PRINTQ, STYPE_DEVICE, STYPE_IPC).
pub const STYPE_MASK: u32 = 0x0000_00ff;

/// MS-ERREF 2.2: the WERROR NetrShareEnum returns when it could not fit every entry.
pub const ERROR_MORE_DATA: u32 = 234;

/// Why a bind or a call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RpcClientError {
    /// The PDU framing or a PDU body does not decode.
    #[error("malformed PDU: {0}")]
    Pdu(#[from] PduError),
    /// The response stub does not unmarshal as NetrShareEnum's [out] parameters.
    #[error("malformed response stub: {0}")]
    Ndr(#[from] NdrError),
    /// The server sent something this client does not expect here.
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    /// A PDU of a type that is not an answer to what was sent.
    #[error("unexpected PDU type {0}")]
    UnexpectedPdu(u8),
    /// C706 12.6.4.5 bind_nak, with its p_reject_reason_t.
    #[error("bind refused (reason {reason})")]
    BindNak { reason: u16 },
    /// The bind_ack refused the srvsvc / NDR20 presentation context (C706 12.6.3.1 p_result_t).
    #[error("presentation context rejected (result {result}, reason {reason})")]
    ContextRejected { result: u16, reason: u16 },
    /// C706 12.6.4.7 fault, with its status (nca_s_* or a Win32 code such as 0x6f7).
    #[error("RPC fault 0x{0:08x}")]
    Fault(u32),
    /// The call ran and returned this WERROR (MS-ERREF 2.2).
    #[error("server returned WERROR {0}")]
    Werror(u32),
    /// The reassembled stub would exceed the caller's limit.
    #[error("response stub over the limit of {limit} octets")]
    TooLarge { limit: usize },
}

/// One entry of a level-1 share enumeration (MS-SRVS 2.2.4.23 SHARE_INFO_1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareInfo1 {
    pub name: String,
    /// shi1_type as sent: a base type in the low byte plus flags such as STYPE_SPECIAL.
    pub share_type: u32,
    /// Empty when the server sent a NULL pointer.
    pub comment: String,
}

impl ShareInfo1 {
    /// The base type without the flag bits (0 disk, 1 print queue, 2 device, 3 IPC).
    pub fn base_type(&self) -> u32 {
        self.share_type & STYPE_MASK
    }

    /// Administrative shares (`C$`, `IPC$`, ...), MS-SRVS 2.2.2.4 STYPE_SPECIAL.
    pub fn is_special(&self) -> bool {
        self.share_type & STYPE_SPECIAL != 0
    }

    pub fn is_temporary(&self) -> bool {
        self.share_type & STYPE_TEMPORARY != 0
    }
}

/// C706 12.6.4.3 bind for srvsvc v3.0 (MS-SRVS 1.9) over NDR20, one context, a new association
/// group, and 4280-octet fragments both ways, as smbclient sends it.
pub fn bind_request(call_id: u32) -> Vec<u8> {
    let bind = Bind {
        max_xmit_frag: MAX_FRAG,
        max_recv_frag: MAX_FRAG,
        assoc_group_id: 0,
        contexts: vec![ContextElem {
            context_id: CONTEXT_ID,
            abstract_syntax: SRVSVC_SYNTAX,
            transfer_syntaxes: vec![NDR20],
        }],
    };
    let mut w = Writer::new();
    bind.encode(&mut w);
    encode_pdu(
        Header::new(PTYPE_BIND, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id),
        w.as_slice(),
    )
}

/// Accepts a bind_ack whose first result (our only context) is acceptance of NDR20.
/// A bind_nak or a fault is turned into its error.
pub fn check_bind_ack(pdu: &[u8]) -> Result<(), RpcClientError> {
    let hdr = whole_pdu_header(pdu)?;
    let b = body(&hdr, pdu)?;
    match hdr.ptype {
        PTYPE_BIND_ACK => {}
        PTYPE_BIND_NAK => {
            return Err(RpcClientError::BindNak {
                reason: BindNak::decode(b)?.reason,
            });
        }
        PTYPE_FAULT => return Err(RpcClientError::Fault(Fault::decode(b)?.status)),
        other => return Err(RpcClientError::UnexpectedPdu(other)),
    }
    if hdr.flags & (PFC_FIRST_FRAG | PFC_LAST_FRAG) != PFC_FIRST_FRAG | PFC_LAST_FRAG {
        // C706 12.6.3.1: only request and response PDUs are fragmented.
        return Err(RpcClientError::Protocol("fragmented bind_ack"));
    }
    let ack = BindAck::decode(b)?;
    // C706 12.6.4.4: one result per proposed context, in the order proposed.
    let res = ack
        .results
        .first()
        .ok_or(RpcClientError::Protocol("bind_ack without a result"))?;
    if res.result != RESULT_ACCEPTANCE {
        return Err(RpcClientError::ContextRejected {
            result: res.result,
            reason: res.reason,
        });
    }
    if res.transfer_syntax != NDR20 {
        return Err(RpcClientError::Protocol(
            "bind_ack accepted a transfer syntax that was not offered",
        ));
    }
    Ok(())
}

/// NetrShareEnum (opnum 15) at level 1 with PreferedMaximumLength = MAX_PREFERRED_LENGTH, so
/// the server returns every entry at once (MS-SRVS 3.1.4.8). `server_unc` is `\\host`; empty
/// sends a NULL ServerName. The stub is byte-identical to what Samba's rpcclient sends.
///
/// Usually one PDU. A stub too long for one C706 MustRecvFragSize fragment is split into
/// several fragments, concatenated: write each one as its own pipe message (frag_length, at
/// octets 8-9, gives each length).
pub fn share_enum_request(call_id: u32, server_unc: &str) -> Vec<u8> {
    let mut w = NdrWriter::new();
    // ServerName: [in, string, unique] SRVSVC_HANDLE.
    if server_unc.is_empty() {
        w.pointer(false);
    } else {
        w.pointer(true).wstring(server_unc);
    }
    // InfoStruct: [in, out] ref SHARE_ENUM_STRUCT*, so no referent id; Level, then the
    // non-encapsulated union's discriminant and its level-1 arm, an empty container.
    w.u32(1).u32(1).pointer(true);
    w.u32(0).pointer(false);
    // PreferedMaximumLength = MAX_PREFERRED_LENGTH.
    w.u32(u32::MAX);
    // ResumeHandle: [in, out, unique] DWORD*, present and 0 to start from the first share.
    w.pointer(true).u32(0);
    request_pdus(call_id, opnum::NETR_SHARE_ENUM, w.as_slice())
}

/// C706 12.6.4.9 request fragments; alloc_hint counts the stub octets from each fragment on.
fn request_pdus(call_id: u32, opnum: u16, stub: &[u8]) -> Vec<u8> {
    // Stub chunks are multiples of 8 octets, as Windows and Samba cut them, so a server that
    // wrongly aligns per fragment still reads the stub right; C706 does not require it.
    let chunk = (REQUEST_FRAG - REQUEST_OVERHEAD) & !7;
    let mut out = Vec::with_capacity(stub.len() + REQUEST_OVERHEAD);
    let mut off = 0;
    loop {
        let rest = stub.get(off..).unwrap_or_default();
        let n = rest.len().min(chunk);
        let mut flags = 0;
        if off == 0 {
            flags |= PFC_FIRST_FRAG;
        }
        if n == rest.len() {
            flags |= PFC_LAST_FRAG;
        }
        let req = Request {
            alloc_hint: u32::try_from(rest.len()).unwrap_or(u32::MAX),
            context_id: CONTEXT_ID,
            opnum,
            object: None,
            stub: rest.get(..n).unwrap_or_default(),
        };
        let mut w = Writer::with_capacity(8 + n);
        req.encode(&mut w);
        out.extend_from_slice(&encode_pdu(
            Header::new(PTYPE_REQUEST, flags, call_id),
            w.as_slice(),
        ));
        off += n;
        if off >= stub.len() {
            return out;
        }
    }
}

/// Decodes the header of a PDU that must be exactly `pdu`, little-endian and unauthenticated.
fn whole_pdu_header(pdu: &[u8]) -> Result<Header, RpcClientError> {
    let hdr = Header::decode(pdu)?;
    if hdr.frag_length as usize != pdu.len() {
        return Err(RpcClientError::Protocol(
            "PDU length differs from its frag_length",
        ));
    }
    check_header(&hdr)?;
    Ok(hdr)
}

fn check_header(hdr: &Header) -> Result<(), RpcClientError> {
    if !hdr.is_little_endian() {
        // Only little-endian NDR is decoded here; Windows and Samba answer in the client's
        // data representation, which is little-endian.
        return Err(RpcClientError::Protocol("big-endian data representation"));
    }
    if hdr.auth_length != 0 {
        // The bind asked for no RPC security; the SMB session protects the pipe.
        return Err(RpcClientError::Protocol(
            "auth verifier on an unauthenticated association",
        ));
    }
    Ok(())
}

/// Collects the response stub of one call from its fragments (C706 12.6.2: PFC_FIRST_FRAG on
/// the first, PFC_LAST_FRAG on the last, the same call id throughout).
///
/// Bytes may be pushed as whole PDUs (one per pipe message) or split anywhere, for instance
/// when a READ ended with STATUS_BUFFER_OVERFLOW and the rest came with the next READ.
#[derive(Debug)]
pub struct ResponseAssembler {
    max_stub: usize,
    expected_call_id: Option<u32>,
    call_id: Option<u32>,
    input: Vec<u8>,
    stub: Vec<u8>,
    /// Set once the stub was returned or an error was reported; later pushes fail.
    finished: bool,
}

impl ResponseAssembler {
    /// `max_stub` caps the reassembled stub (and so the memory a server can make this use).
    pub fn new(max_stub: usize) -> Self {
        Self {
            max_stub,
            expected_call_id: None,
            call_id: None,
            input: Vec::new(),
            stub: Vec::new(),
            finished: false,
        }
    }

    /// Also requires every fragment to carry `call_id` (that of the request sent).
    pub fn expect_call_id(mut self, call_id: u32) -> Self {
        self.expected_call_id = Some(call_id);
        self
    }

    /// Feeds bytes read from the pipe. `Some(stub)` once the last fragment is in; a fault PDU
    /// is [`RpcClientError::Fault`]. After `Some` or an error the assembler is spent.
    pub fn push(&mut self, data: &[u8]) -> Result<Option<Vec<u8>>, RpcClientError> {
        if self.finished {
            return Err(RpcClientError::Protocol("response already complete"));
        }
        let result = self.push_inner(data);
        if !matches!(result, Ok(None)) {
            self.finished = true;
            self.input = Vec::new();
        }
        result
    }

    fn push_inner(&mut self, data: &[u8]) -> Result<Option<Vec<u8>>, RpcClientError> {
        let mut input = std::mem::take(&mut self.input);
        input.extend_from_slice(data);
        let mut at = 0;
        let result = loop {
            let rest = input.get(at..).unwrap_or_default();
            let Some(frag_length) = peek_frag_length(rest) else {
                break Ok(None);
            };
            let frag = usize::from(frag_length);
            if frag < HEADER_LEN {
                break Err(PduError::FragLength(frag_length).into());
            }
            let Some(pdu) = rest.get(..frag) else {
                break Ok(None);
            };
            at += frag;
            match self.fragment(pdu) {
                Ok(false) => {}
                Ok(true) if at == input.len() => break Ok(Some(std::mem::take(&mut self.stub))),
                Ok(true) => break Err(RpcClientError::Protocol("data after the last fragment")),
                Err(e) => break Err(e),
            }
        };
        // Only a partial fragment stays buffered, so this holds less than 64 KiB.
        input.drain(..at.min(input.len()));
        self.input = input;
        result
    }

    /// One complete fragment; `true` when it was the last.
    fn fragment(&mut self, pdu: &[u8]) -> Result<bool, RpcClientError> {
        let hdr = whole_pdu_header(pdu)?;
        let b = body(&hdr, pdu)?;
        match hdr.ptype {
            PTYPE_RESPONSE => {}
            // C706 12.6.4.7: the call failed (or never ran); the status says why. Its call id
            // is not checked: on a pipe with one call at a time any fault ends that call.
            PTYPE_FAULT => return Err(RpcClientError::Fault(Fault::decode(b)?.status)),
            other => return Err(RpcClientError::UnexpectedPdu(other)),
        }
        if let Some(want) = self.expected_call_id.or(self.call_id)
            && hdr.call_id != want
        {
            return Err(RpcClientError::Protocol("fragment for another call id"));
        }
        let first = hdr.flags & PFC_FIRST_FRAG != 0;
        if first != self.call_id.is_none() {
            return Err(RpcClientError::Protocol(if first {
                "PFC_FIRST_FRAG in the middle of a response"
            } else {
                "response does not start with PFC_FIRST_FRAG"
            }));
        }
        let resp = Response::decode(b)?;
        if resp.context_id != CONTEXT_ID {
            return Err(RpcClientError::Protocol("response for another context"));
        }
        if self.stub.len().saturating_add(resp.stub.len()) > self.max_stub {
            return Err(RpcClientError::TooLarge {
                limit: self.max_stub,
            });
        }
        if first {
            // alloc_hint is only a hint: reserve up to the cap, never past it.
            self.stub
                .reserve((resp.alloc_hint as usize).min(self.max_stub).min(1 << 16));
            self.call_id = Some(hdr.call_id);
        }
        self.stub.extend_from_slice(resp.stub);
        Ok(hdr.flags & PFC_LAST_FRAG != 0)
    }
}

/// Decodes NetrShareEnum's [out] parameters at level 1 (MS-SRVS 3.1.4.8):
/// `InfoStruct` (SHARE_ENUM_STRUCT), `TotalEntries`, `ResumeHandle`, then the WERROR.
/// A WERROR other than 0 is [`RpcClientError::Werror`], ERROR_MORE_DATA included: with
/// MAX_PREFERRED_LENGTH the server has to return every entry, so a partial list is not passed
/// off as the whole one.
pub fn parse_share_enum(stub: &[u8]) -> Result<Vec<ShareInfo1>, RpcClientError> {
    let mut r = NdrReader::new(stub);
    // SHARE_ENUM_STRUCT (MS-SRVS 2.2.4.38): Level, then the union's discriminant (C706 14.3.8
    // non-encapsulated union), which must agree.
    let level = r.u32()?;
    let disc = r.u32()?;
    if level != 1 || disc != 1 {
        return Err(RpcClientError::Protocol(
            "share enumeration answered at another level",
        ));
    }
    // The level-1 arm: a unique pointer to SHARE_INFO_1_CONTAINER (MS-SRVS 2.2.4.33).
    let mut shares = Vec::new();
    if r.pointer()? {
        let entries_read = r.u32()?;
        if r.pointer()? {
            // Conformant array of SHARE_INFO_1 (C706 14.3.3.2): max_count, every entry's
            // scalars with referent ids for its strings, then the strings in entry order
            // (C706 14.3.12.3 deferral). 12 octets per entry must be present.
            let count = r.array_count(12)?;
            if count != entries_read {
                return Err(RpcClientError::Protocol(
                    "array size differs from EntriesRead",
                ));
            }
            // Bounded by array_count: at most 65536, and 12 octets each are in the stub.
            let mut scalars = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let name = r.pointer()?;
                let share_type = r.u32()?;
                let comment = r.pointer()?;
                scalars.push((name, share_type, comment));
            }
            shares.reserve(scalars.len());
            for (name, share_type, comment) in scalars {
                shares.push(ShareInfo1 {
                    name: deferred_string(&mut r, name)?,
                    share_type,
                    comment: deferred_string(&mut r, comment)?,
                });
            }
        }
        // A NULL Buffer carries no entries whatever EntriesRead says.
    }
    let _total_entries = r.u32()?;
    if r.pointer()? {
        let _resume_handle = r.u32()?;
    }
    let werror = r.u32()?;
    // Octets past the WERROR are ignored: nothing follows it in NDR, and a stub padded to
    // an 8-octet boundary is still the same answer.
    if werror != 0 {
        return Err(RpcClientError::Werror(werror));
    }
    Ok(shares)
}

/// The `[string] wchar_t*` referent of a present pointer (NdrReader caps it at 32768 UTF-16
/// units, 64 KiB); a NULL pointer reads as the empty string.
fn deferred_string(r: &mut NdrReader<'_>, present: bool) -> Result<String, NdrError> {
    if present {
        r.wstring()
    } else {
        Ok(String::new())
    }
}
