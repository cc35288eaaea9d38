//! One open of an RPC named pipe: the connection-oriented association (C706 chapter 12,
//! MS-RPCE 3.3.1) driven by the bytes of the pipe's WRITE, READ and FSCTL_PIPE_TRANSCEIVE.
//!
//! The pipe is message-mode (MS-RPCE 2.1.1.2): every PDU fragment the server produces is one
//! message, and a read returns bytes of at most one message.

use crate::RpcError;
use crate::pdu::{
    BTFN_KEEP_CONNECTION_ON_ORPHAN, Bind, BindAck, BindNak, ContextElem, ContextResult, Fault,
    HEADER_LEN, Header, NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED, NAK_PROTOCOL_VERSION_NOT_SUPPORTED,
    NAK_REASON_NOT_SPECIFIED, NDR20, PFC_DID_NOT_EXECUTE, PFC_FIRST_FRAG, PFC_LAST_FRAG,
    PTYPE_ALTER_CONTEXT, PTYPE_ALTER_CONTEXT_RESP, PTYPE_BIND, PTYPE_BIND_ACK, PTYPE_BIND_NAK,
    PTYPE_CO_CANCEL, PTYPE_FAULT, PTYPE_ORPHANED, PTYPE_REQUEST, PTYPE_RESPONSE, PduError,
    REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED, REASON_LOCAL_LIMIT_EXCEEDED, REASON_NOT_SPECIFIED,
    REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED, RESPONSE_OVERHEAD, RESULT_ACCEPTANCE,
    RESULT_NEGOTIATE_ACK, RESULT_PROVIDER_REJECTION, Request, Response, SyntaxId, body, encode_pdu,
    peek_frag_length, status,
};
use crate::srvsvc::{CallError, SRVSVC_SYNTAX, ShareSource, Srvsvc};
use smbq_wire::cursor::Writer;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Cap on a reassembled request stub.
pub const MAX_REQUEST_STUB: usize = 1 << 20;
/// Cap on output nobody has read yet; past it the pipe is closed.
pub const MAX_PENDING_OUTPUT: usize = 8 << 20;
/// Largest fragment on SMB named pipes (Windows and Samba both use 4280 on ncacn_np).
pub const MAX_FRAG: u16 = 4280;
/// Smallest negotiated fragment: C706's MustRecvFragSize is 1432; Windows and Samba answer
/// at least 2048 whatever the client offers.
const MIN_FRAG: u16 = 2048;
/// Presentation contexts one association may hold.
const MAX_CONTEXTS: usize = 64;

const SRVSVC_SECONDARY_ADDRESS: &str = "\\PIPE\\srvsvc";

/// Association groups are not shared between pipes here; a fresh id only has to be non-zero.
static NEXT_ASSOC_GROUP: AtomicU32 = AtomicU32::new(0x0000_5300);

fn next_assoc_group() -> u32 {
    NEXT_ASSOC_GROUP.fetch_add(1, Ordering::Relaxed).max(1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the bind.
    Unbound,
    Bound,
    /// A protocol error ended the association; queued output can still be read.
    Closed,
}

/// A request whose first fragments have arrived (C706 12.6.2).
struct PendingCall {
    call_id: u32,
    context_id: u16,
    opnum: u16,
    stub: Vec<u8>,
}

/// One open of a supported RPC pipe.
pub struct PipeEndpoint {
    service: Srvsvc,
    input: Vec<u8>,
    output: VecDeque<Vec<u8>>,
    /// Octets of `output.front()` already read.
    out_pos: usize,
    /// Unread octets over all of `output`.
    out_len: usize,
    state: State,
    contexts: Vec<u16>,
    max_xmit_frag: u16,
    assoc_group_id: u32,
    pending: Option<PendingCall>,
}

impl fmt::Debug for PipeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipeEndpoint")
            .field("state", &self.state)
            .field("contexts", &self.contexts)
            .field("max_xmit_frag", &self.max_xmit_frag)
            .field("buffered_input", &self.input.len())
            .field("pending_output", &self.out_len)
            .finish()
    }
}

impl PipeEndpoint {
    /// The `srvsvc` pipe; `server_name` is what NetrServerGetInfo reports.
    pub fn srvsvc(server_name: String, source: Arc<dyn ShareSource>) -> Self {
        Self {
            service: Srvsvc::new(server_name, source),
            input: Vec::new(),
            output: VecDeque::new(),
            out_pos: 0,
            out_len: 0,
            state: State::Unbound,
            contexts: Vec::new(),
            max_xmit_frag: MAX_FRAG,
            assoc_group_id: 0,
            pending: None,
        }
    }

    /// Whether a CREATE of this name on IPC$ opens a pipe served here: `srvsvc`, any case,
    /// optionally prefixed by `\PIPE\` (SMB1 style) or `\`.
    pub fn is_supported_pipe(name: &str) -> bool {
        let n = name.strip_prefix('\\').unwrap_or(name);
        let n = match n.get(..5) {
            Some(p) if p.eq_ignore_ascii_case("PIPE\\") => n.get(5..).unwrap_or_default(),
            _ => n,
        };
        n.eq_ignore_ascii_case("srvsvc")
    }

    /// The association was ended by a protocol error: further writes fail with
    /// [`RpcError::Closed`] (the caller should treat the pipe as disconnected once drained).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Takes bytes the client wrote: buffers a partial fragment until frag_length octets are
    /// present, then processes each complete fragment. Returns `data.len()` on success.
    ///
    /// Errors mean the byte stream cannot be framed (or output overflowed); the pipe is then
    /// closed. Protocol errors inside a well-framed PDU become a fault or bind_nak instead.
    pub fn write(&mut self, data: &[u8]) -> Result<usize, RpcError> {
        if self.state == State::Closed {
            return Err(RpcError::Closed);
        }
        let mut input = std::mem::take(&mut self.input);
        input.extend_from_slice(data);
        let mut at = 0;
        let result = loop {
            let rest = input.get(at..).unwrap_or_default();
            if rest.len() < HEADER_LEN {
                break Ok(());
            }
            let Some(frag) = peek_frag_length(rest) else {
                break Ok(());
            };
            if (frag as usize) < HEADER_LEN {
                self.state = State::Closed;
                break Err(PduError::FragLength(frag).into());
            }
            let Some(pdu) = rest.get(..frag as usize) else {
                break Ok(());
            };
            at += frag as usize;
            if let Err(e) = self.handle(pdu) {
                self.state = State::Closed;
                break Err(e);
            }
            if self.state == State::Closed {
                break Ok(());
            }
            if self.out_len > MAX_PENDING_OUTPUT {
                self.state = State::Closed;
                break Err(RpcError::OutputFull);
            }
        };
        if self.state == State::Closed {
            self.pending = None;
        } else {
            input.drain(..at);
            self.input = input;
        }
        result.map(|()| data.len())
    }

    /// Up to `max` octets of the next unread message; empty when there is none.
    pub fn read(&mut self, max: usize) -> Vec<u8> {
        let Some(front) = self.output.front() else {
            return Vec::new();
        };
        let rest = front.get(self.out_pos..).unwrap_or_default();
        let n = rest.len().min(max);
        let out = rest.get(..n).unwrap_or_default().to_vec();
        self.out_pos += n;
        self.out_len -= n;
        if self.out_pos >= front.len() {
            self.output.pop_front();
            self.out_pos = 0;
        }
        out
    }

    /// Unread octets over all queued messages.
    pub fn pending_output(&self) -> usize {
        self.out_len
    }

    /// Octets left of the message the last [`read`](Self::read) returned part of; non-zero
    /// means that read was short and maps to STATUS_BUFFER_OVERFLOW (MS-SMB2 3.3.5.12).
    pub fn message_remaining(&self) -> usize {
        match self.output.front() {
            Some(front) if self.out_pos > 0 => front.len() - self.out_pos,
            _ => 0,
        }
    }

    /// FSCTL_PIPE_TRANSCEIVE: write then read at most `max_out` octets. Fails with
    /// [`RpcError::PipeBusy`] while unread output is queued (MS-FSCC 2.3.48 STATUS_PIPE_BUSY).
    pub fn transceive(&mut self, data: &[u8], max_out: usize) -> Result<Vec<u8>, RpcError> {
        if self.out_len > 0 {
            return Err(RpcError::PipeBusy);
        }
        self.write(data)?;
        Ok(self.read(max_out))
    }

    fn handle(&mut self, pdu: &[u8]) -> Result<(), RpcError> {
        let hdr = match Header::decode(pdu) {
            Ok(h) => h,
            Err(PduError::Version { .. }) if pdu.get(2) == Some(&PTYPE_BIND) => {
                // C706 12.6.4.5: a bind for another protocol version is refused by a bind_nak.
                let call_id = pdu
                    .get(12..16)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u32::from_le_bytes);
                self.bind_nak(call_id, NAK_PROTOCOL_VERSION_NOT_SUPPORTED);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        if !hdr.is_little_endian() {
            // Only little-endian NDR is implemented; a big-endian client is refused.
            if hdr.ptype == PTYPE_BIND {
                self.bind_nak(hdr.call_id, NAK_REASON_NOT_SPECIFIED);
            } else {
                self.fault_close(hdr.call_id, 0, status::NCA_S_UNSUPPORTED_TYPE);
            }
            return Ok(());
        }
        match hdr.ptype {
            PTYPE_BIND => self.on_bind(&hdr, pdu),
            PTYPE_ALTER_CONTEXT => self.on_alter(&hdr, pdu),
            PTYPE_REQUEST => self.on_request(&hdr, pdu),
            // Calls run to completion inside write(), so there is never one to cancel.
            PTYPE_CO_CANCEL => {}
            // MS-RPCE 3.3.1.5.10: the client abandoned the call; drop its fragments.
            PTYPE_ORPHANED => {
                if self
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.call_id == hdr.call_id)
                {
                    self.pending = None;
                }
            }
            // auth3 without a started authentication, and any server-to-client type.
            _ => self.fault_close(hdr.call_id, 0, status::NCA_S_PROTO_ERROR),
        }
        Ok(())
    }

    /// C706 12.6.4.3 bind -> 12.6.4.4 bind_ack (or 12.6.4.5 bind_nak).
    fn on_bind(&mut self, hdr: &Header, pdu: &[u8]) {
        if self.state != State::Unbound {
            // C706 12.4.2: one bind per association.
            return self.bind_nak(hdr.call_id, NAK_REASON_NOT_SPECIFIED);
        }
        if hdr.auth_length != 0 {
            // The SMB session authenticates the pipe; no RPC security provider is offered.
            return self.bind_nak(hdr.call_id, NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED);
        }
        let Ok(bind) = body(hdr, pdu).and_then(Bind::decode) else {
            return self.bind_nak(hdr.call_id, NAK_REASON_NOT_SPECIFIED);
        };
        let Some(results) = self.negotiate(&bind.contexts, true) else {
            return self.bind_nak(hdr.call_id, NAK_REASON_NOT_SPECIFIED);
        };
        // C706 12.6.4.4 lets each side size its own direction; Windows and Samba answer one
        // value for both, rounded down to 8 octets.
        let frag = bind
            .max_xmit_frag
            .min(bind.max_recv_frag)
            .clamp(MIN_FRAG, MAX_FRAG)
            & !7;
        self.max_xmit_frag = frag;
        self.assoc_group_id = if bind.assoc_group_id != 0 {
            bind.assoc_group_id
        } else {
            next_assoc_group()
        };
        self.state = State::Bound;
        let ack = BindAck {
            max_xmit_frag: frag,
            max_recv_frag: frag,
            assoc_group_id: self.assoc_group_id,
            secondary_address: SRVSVC_SECONDARY_ADDRESS.into(),
            results,
        };
        let mut w = Writer::new();
        ack.encode(&mut w);
        self.push(
            PTYPE_BIND_ACK,
            PFC_FIRST_FRAG | PFC_LAST_FRAG,
            hdr.call_id,
            w.as_slice(),
        );
    }

    /// C706 12.6.4.1 alter_context -> 12.6.4.2 alter_context_resp.
    fn on_alter(&mut self, hdr: &Header, pdu: &[u8]) {
        if self.state != State::Bound || hdr.auth_length != 0 {
            return self.fault_close(hdr.call_id, 0, status::NCA_S_PROTO_ERROR);
        }
        let Ok(alter) = body(hdr, pdu).and_then(Bind::decode) else {
            return self.fault_close(hdr.call_id, 0, status::NCA_S_PROTO_ERROR);
        };
        let Some(results) = self.negotiate(&alter.contexts, false) else {
            return self.fault_close(hdr.call_id, 0, status::NCA_S_PROTO_ERROR);
        };
        let resp = BindAck {
            max_xmit_frag: self.max_xmit_frag,
            max_recv_frag: self.max_xmit_frag,
            assoc_group_id: self.assoc_group_id,
            secondary_address: String::new(),
            results,
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        self.push(
            PTYPE_ALTER_CONTEXT_RESP,
            PFC_FIRST_FRAG | PFC_LAST_FRAG,
            hdr.call_id,
            w.as_slice(),
        );
    }

    /// One result per proposed context (C706 12.6.4.4), adding accepted ones to the
    /// association. `None` when the list itself is malformed (empty, a context with no transfer
    /// syntax, or two feature-negotiation contexts).
    fn negotiate(&mut self, contexts: &[ContextElem], bind: bool) -> Option<Vec<ContextResult>> {
        if contexts.is_empty() {
            return None;
        }
        let reject = |reason| ContextResult {
            result: RESULT_PROVIDER_REJECTION,
            reason,
            transfer_syntax: SyntaxId::NIL,
        };
        let mut seen_features = false;
        let mut out = Vec::with_capacity(contexts.len());
        for c in contexts {
            let first = c.transfer_syntaxes.first()?;
            // MS-RPCE 3.3.1.5.3: only the first transfer syntax is looked at, only in a bind;
            // the answer is negotiate_ack with the features both sides support in `reason`.
            // Security context multiplexing needs RPC authentication, which is not offered.
            if let Some(bits) = first.bind_time_features().filter(|_| bind) {
                if seen_features {
                    return None;
                }
                seen_features = true;
                out.push(ContextResult {
                    result: RESULT_NEGOTIATE_ACK,
                    reason: u16::from(bits & BTFN_KEEP_CONNECTION_ON_ORPHAN),
                    transfer_syntax: SyntaxId::NIL,
                });
                continue;
            }
            let a = &c.abstract_syntax;
            // MS-RPCE 3.3.1.5.1: same interface and major version, minor not above ours.
            let ours = a.uuid == SRVSVC_SYNTAX.uuid
                && a.major() == SRVSVC_SYNTAX.major()
                && a.minor() <= SRVSVC_SYNTAX.minor();
            let known = self.contexts.contains(&c.context_id);
            out.push(if !ours {
                reject(REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED)
            } else if !c.transfer_syntaxes.contains(&NDR20) {
                // NDR64 and anything else: only NDR20 is spoken here.
                reject(REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED)
            } else if !known && self.contexts.len() >= MAX_CONTEXTS {
                reject(REASON_LOCAL_LIMIT_EXCEEDED)
            } else {
                if !known {
                    self.contexts.push(c.context_id);
                }
                ContextResult {
                    result: RESULT_ACCEPTANCE,
                    reason: REASON_NOT_SPECIFIED,
                    transfer_syntax: NDR20,
                }
            });
        }
        Some(out)
    }

    /// C706 12.6.4.9 request, reassembling fragments (12.6.2) before the call runs.
    fn on_request(&mut self, hdr: &Header, pdu: &[u8]) {
        if self.state != State::Bound || hdr.auth_length != 0 {
            return self.fault_close(hdr.call_id, 0, status::NCA_S_PROTO_ERROR);
        }
        let Ok(req) = body(hdr, pdu).and_then(|b| Request::decode(hdr.flags, b)) else {
            return self.fault_close(hdr.call_id, 0, status::NCA_S_PROTO_ERROR);
        };
        let first = hdr.flags & PFC_FIRST_FRAG != 0;
        let last = hdr.flags & PFC_LAST_FRAG != 0;
        if first {
            if let Some(p) = self.pending.take() {
                // Without PFC_CONC_MPX calls may not interleave; the fault names the open call.
                return self.fault_close(p.call_id, p.context_id, status::NCA_S_PROTO_ERROR);
            }
            if !self.contexts.contains(&req.context_id) {
                return self.fault(
                    hdr.call_id,
                    req.context_id,
                    status::NCA_S_UNK_IF,
                    PFC_DID_NOT_EXECUTE,
                );
            }
            if last {
                return self.execute(hdr.call_id, req.context_id, req.opnum, req.stub);
            }
            if req.alloc_hint as usize > MAX_REQUEST_STUB {
                return self.fault_close(
                    hdr.call_id,
                    req.context_id,
                    status::NCA_S_FAULT_REMOTE_NO_MEMORY,
                );
            }
            // alloc_hint is only a hint: preallocate within the cap and grow as fragments come.
            let mut stub = Vec::with_capacity((req.alloc_hint as usize).max(req.stub.len()));
            stub.extend_from_slice(req.stub);
            self.pending = Some(PendingCall {
                call_id: hdr.call_id,
                context_id: req.context_id,
                opnum: req.opnum,
                stub,
            });
            return;
        }
        let Some(mut p) = self.pending.take() else {
            return self.fault_close(hdr.call_id, req.context_id, status::NCA_S_PROTO_ERROR);
        };
        if p.call_id != hdr.call_id {
            return self.fault_close(p.call_id, p.context_id, status::NCA_S_PROTO_ERROR);
        }
        if p.stub.len() + req.stub.len() > MAX_REQUEST_STUB {
            return self.fault_close(
                p.call_id,
                p.context_id,
                status::NCA_S_FAULT_REMOTE_NO_MEMORY,
            );
        }
        p.stub.extend_from_slice(req.stub);
        if last {
            self.execute(p.call_id, p.context_id, p.opnum, &p.stub);
        } else {
            self.pending = Some(p);
        }
    }

    fn execute(&mut self, call_id: u32, context_id: u16, opnum: u16, stub: &[u8]) {
        match self.service.call(opnum, stub) {
            Ok(out) => self.respond(call_id, context_id, &out),
            Err(CallError::OpRange) => self.fault(
                call_id,
                context_id,
                status::NCA_S_OP_RNG_ERROR,
                PFC_DID_NOT_EXECUTE,
            ),
            Err(CallError::BadStub(_)) => {
                self.fault(call_id, context_id, status::RPC_X_BAD_STUB_DATA, 0)
            }
        }
    }

    /// C706 12.6.4.10 response, split so no fragment exceeds the client's max_recv_frag.
    /// Stub chunks are multiples of 16 octets (what an auth trailer would need; Samba does
    /// the same without one). alloc_hint counts the stub octets from this fragment on.
    fn respond(&mut self, call_id: u32, context_id: u16, stub: &[u8]) {
        let room = (self.max_xmit_frag as usize).saturating_sub(RESPONSE_OVERHEAD);
        let chunk = (room & !15).max(16);
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
            let resp = Response {
                alloc_hint: u32::try_from(rest.len()).unwrap_or(u32::MAX),
                context_id,
                cancel_count: 0,
                stub: rest.get(..n).unwrap_or_default(),
            };
            let mut w = Writer::with_capacity(8 + n);
            resp.encode(&mut w);
            self.push(PTYPE_RESPONSE, flags, call_id, w.as_slice());
            off += n;
            if off >= stub.len() {
                break;
            }
        }
    }

    /// C706 12.6.4.7 fault. alloc_hint 24 as Samba sends it.
    fn fault(&mut self, call_id: u32, context_id: u16, status: u32, extra_flags: u8) {
        let f = Fault {
            alloc_hint: 24,
            context_id,
            cancel_count: 0,
            status,
        };
        let mut w = Writer::new();
        f.encode(&mut w);
        self.push(
            PTYPE_FAULT,
            PFC_FIRST_FRAG | PFC_LAST_FRAG | extra_flags,
            call_id,
            w.as_slice(),
        );
    }

    /// A fault after which the association is unusable (the caller disconnects the pipe).
    fn fault_close(&mut self, call_id: u32, context_id: u16, status: u32) {
        self.fault(call_id, context_id, status, PFC_DID_NOT_EXECUTE);
        self.state = State::Closed;
    }

    fn bind_nak(&mut self, call_id: u32, reason: u16) {
        let mut w = Writer::new();
        BindNak { reason }.encode(&mut w);
        self.push(
            PTYPE_BIND_NAK,
            PFC_FIRST_FRAG | PFC_LAST_FRAG,
            call_id,
            w.as_slice(),
        );
        self.state = State::Closed;
    }

    fn push(&mut self, ptype: u8, flags: u8, call_id: u32, body: &[u8]) {
        let pdu = encode_pdu(Header::new(ptype, flags, call_id), body);
        self.out_len += pdu.len();
        self.output.push_back(pdu);
    }
}
