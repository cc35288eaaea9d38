//! The server side of one SMB2/3 connection (MS-SMB2 3.3.5): turns frames into validated
//! requests for the server and the server's responses into frames.
//!
//! Sans-IO in the style of quinn-proto: the shell deframes each transport stream (with
//! [`ServerConnection::frame_limit`]) and hands every frame to
//! [`ServerConnection::handle_frame`]; then it takes what the engine decided:
//! [`poll_action`](ServerConnection::poll_action) (requests to run, cancels, session events),
//! [`poll_transmit`](ServerConnection::poll_transmit) (frames to send, each tagged with the
//! stream it goes back on) and [`poll_timeout`](ServerConnection::poll_timeout) (when to call
//! [`handle_timeout`](ServerConnection::handle_timeout) for interim responses). The server runs
//! each [`Action::Execute`] and gives the response to [`ServerConnection::complete`]; compound
//! chaining, interim responses, CANCEL and credits stay here (`requests.rs`). Everything the
//! engine answers itself (NEGOTIATE, SESSION_SETUP, LOGOFF, ECHO, errors) comes back as ready
//! frames.

mod binding;
mod negotiate;
mod outgoing;
mod requests;
mod session_setup;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use smbq_auth::Accounts;
use smbq_crypto::{Cipher, PreauthHash, Signer, SigningAlgorithm};
use smbq_wire::transform::TransformHeader;
use smbq_wire::{Command, Dialect, HEADER_LEN, Header, NtStatus};

use crate::config::EngineConfig;
use crate::credits::CreditWindow;
use crate::error::Violation;
use crate::request::{ConnView, Request, Response, SessionView};
use crate::session::Session;
use crate::sessions::{Established, SessionTable};

// Lives in `crate::transport`; re-exported at its old path, which the server, the binary and
// the tests use.
pub use crate::transport::Transport;
pub use requests::{Execute, INTERIM_AFTER};

/// One transport stream of a connection. TCP has one; QUIC has the client's first
/// bidirectional stream, and more once the multi-stream extension exists. Responses go back on
/// the stream their request came on; unsolicited messages go on [`StreamId::CONTROL`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The stream the connection began with.
    pub const CONTROL: StreamId = StreamId(0);
}

/// A frame to send (segments of one frame, in order) and the stream it goes on.
#[derive(Debug)]
pub struct Transmit {
    pub stream: StreamId,
    pub frame: Vec<Bytes>,
}

/// What the engine needs from its surroundings for one frame: no clock or randomness of its own.
pub struct Env<'a> {
    pub accounts: &'a dyn Accounts,
    /// Current time as a FILETIME.
    pub now: u64,
    /// The same moment on the monotonic clock, for interim-response timing.
    pub at: Instant,
    pub rng: &'a mut dyn rand::RngCore,
    /// Allocates a server-wide unique, non-zero session id.
    pub new_session_id: &'a dyn Fn() -> u64,
}

/// What the engine asks of the server, in order.
#[derive(Debug)]
pub enum Action {
    /// A request to run; its response goes to [`ServerConnection::complete`].
    Execute(Execute),
    /// Responses of these requests of `chain` went out (`chain_done`: the chain's last).
    Answered {
        chain: u64,
        message_ids: Vec<u64>,
        chain_done: bool,
    },
    /// Stop a running request (a CANCEL for it, MS-SMB2 3.3.5.16, or the engine gave up on it);
    /// its late response, if any, is still given to [`ServerConnection::complete`].
    Cancel {
        message_id: u64,
        async_id: Option<u64>,
        session_id: u64,
    },
    /// A session became valid on this connection; `previous_session_id` names a session to
    /// tear down (reconnect). `bound`: this connection joined a session established on
    /// another as a further channel (MS-SMB2 3.3.5.5.2 session binding).
    SessionStarted {
        session_id: u64,
        bound: bool,
        previous_session_id: u64,
        user: String,
        /// NTLM or Kerberos.
        mechanism: smbq_auth::Mechanism,
        /// What protects the session, for the log: dialect, signing algorithm and cipher
        /// (none for guest and anonymous sessions, or without a common cipher), and whether the
        /// server requires encryption on it (a client may encrypt on its own regardless).
        dialect: Dialect,
        signing: Option<SigningAlgorithm>,
        cipher: Option<Cipher>,
        encrypt_required: bool,
    },
    /// A session ended (LOGOFF); the server must close its trees and opens.
    SessionEnded { session_id: u64 },
    /// A logon failed (to be logged, rate-limited, without secrets). `reason` is empty for a
    /// wrong password or unknown NTLM user (saying which would help a guesser), and says why
    /// otherwise (a refused Kerberos ticket, NTLM turned off).
    AuthFailed { user: String, reason: String },
}

/// One message of a frame's chain, as validation left it.
#[derive(Debug)]
enum ChainItem {
    Run(Box<Request>),
    /// Already answered by the engine (an error found during validation, ECHO, LOGOFF...).
    Answered(Completed),
}

/// A finished request, ready to be framed.
#[derive(Debug, Clone)]
pub struct Completed {
    pub header: Header,
    pub response: Response,
    /// Set when an interim response went out: the final one is async and grants no credits.
    pub async_id: Option<u64>,
    /// Signed with the key of a session established on another connection: the request named
    /// it, signed with its key, here where it has no channel (answered
    /// STATUS_USER_SESSION_DELETED, signed as Windows and Samba sign it, so a client that
    /// signs everything accepts the answer).
    pub foreign_signed: bool,
}

enum ConnState {
    ExpectNegotiate { after_smb1: bool },
    Negotiated(Box<Negotiated>),
}

struct Negotiated {
    view: ConnView,
    signing: SigningAlgorithm,
    cipher: Option<Cipher>,
    /// Connection preauth hash after NEGOTIATE (3.1.1); sessions start from it.
    preauth: PreauthHash,
    /// Data streams granted by the multi-stream context (docs/multistream.md); 0 if none.
    data_streams: u16,
}

pub struct ServerConnection {
    cfg: Arc<EngineConfig>,
    id: u64,
    peer: String,
    transport: Transport,
    state: ConnState,
    credits: CreditWindow,
    /// This connection's part of each session it carries (MS-SMB2 3.3.1.8 Channel: the
    /// exchange in progress, the keys), each holding the session's record in `table`.
    sessions: HashMap<u64, Session>,
    table: Arc<SessionTable>,
    next_async_id: u64,
    frames: u64,
    encrypted_frames: u64,
    /// The connection began with an SMB1 multi-protocol NEGOTIATE (MS-SMB2 3.3.5.3.1).
    smb1_upgrade: bool,
    in_flight: requests::InFlight,
    actions: VecDeque<Action>,
    transmits: VecDeque<Transmit>,
    /// The stream of the frame being handled: where its immediate answers go.
    rx_stream: StreamId,
    /// Data streams the transport can carry for this connection (docs/multistream.md); 0 when
    /// it cannot (TCP, MsQuic) or the server turned the extension off.
    data_stream_limit: u16,
    /// Signing keys of sessions that ended here lately: a signed request still naming one is
    /// answered USER_SESSION_DELETED signed with its key, as Samba answers (smbtorture
    /// smb2.session.bind_invalid_auth), so a client that signs everything keeps the connection.
    ended_signers: VecDeque<(u64, Signer)>,
}

/// How many ended sessions' keys a connection remembers (see `ended_signers`).
const ENDED_SIGNERS: usize = 8;

/// Size of the SMB2 ERROR response body (MS-SMB2 2.2.2): StructureSize 9 counts one data byte.
const ERROR_BODY: [u8; 9] = [9, 0, 0, 0, 0, 0, 0, 0, 0];

impl ServerConnection {
    /// `table` is the server-wide session table every connection's engine shares.
    pub fn new(
        cfg: Arc<EngineConfig>,
        table: Arc<SessionTable>,
        id: u64,
        peer: String,
        transport: Transport,
    ) -> Self {
        let credits = CreditWindow::new(cfg.limits.max_credits);
        Self {
            cfg,
            id,
            peer,
            transport,
            state: ConnState::ExpectNegotiate { after_smb1: false },
            credits,
            sessions: HashMap::new(),
            table,
            next_async_id: 1,
            smb1_upgrade: false,
            frames: 0,
            encrypted_frames: 0,
            in_flight: requests::InFlight::default(),
            actions: VecDeque::new(),
            transmits: VecDeque::new(),
            rx_stream: StreamId::CONTROL,
            data_stream_limit: 0,
            ended_signers: VecDeque::new(),
        }
    }

    /// How many data streams the transport can accept for this connection; the multi-stream
    /// negotiate context is answered only when this is above 0 (docs/multistream.md 3.3).
    pub fn set_data_stream_limit(&mut self, limit: u16) {
        self.data_stream_limit = limit.min(smbq_wire::multi_stream::MAX_STREAMS);
    }

    /// Data streams granted in NEGOTIATE (0: one stream only). The shell lets the client open
    /// them once the first session is valid (docs/multistream.md 4.2).
    pub fn granted_data_streams(&self) -> u16 {
        match &self.state {
            ConnState::Negotiated(n) => n.data_streams,
            ConnState::ExpectNegotiate { .. } => 0,
        }
    }

    /// The next thing the server must do, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next frame to send, in order per stream.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// Whether requests are still running or waiting in a chain.
    pub fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Caps the credits later responses may leave the client holding (see
    /// [`CreditWindow::set_ceiling`]): the shell lowers it while responses queue up unsent.
    pub fn set_credit_ceiling(&mut self, ceiling: u32) {
        self.credits.set_ceiling(ceiling);
    }

    /// The largest frame the deframers may accept now: small until a session is authenticated.
    pub fn frame_limit(&self) -> u32 {
        // Sessions are few (capped per connection); the limit drops back after the last logoff.
        if self.sessions.values().any(Session::is_valid) {
            self.cfg
                .limits
                .frame
                .saturating_add(smbq_crypto::TRANSFORM_HEADER_LEN as u32)
        } else {
            self.cfg.limits.preauth_frame
        }
    }

    pub fn conn_view(&self) -> Option<&ConnView> {
        match &self.state {
            ConnState::Negotiated(n) => Some(&n.view),
            ConnState::ExpectNegotiate { .. } => None,
        }
    }

    /// Frames received, and how many of them arrived encrypted.
    pub fn frame_counts(&self) -> (u64, u64) {
        (self.frames, self.encrypted_frames)
    }

    /// Whether the client started with an SMB1 NEGOTIATE, as Windows does.
    pub fn upgraded_from_smb1(&self) -> bool {
        self.smb1_upgrade
    }

    pub fn session_ids(&self) -> Vec<u64> {
        self.sessions.keys().copied().collect()
    }

    /// Processes one frame that arrived on `stream`; what follows from it is polled.
    pub fn handle_frame(
        &mut self,
        stream: StreamId,
        frame: Bytes,
        env: &mut Env<'_>,
    ) -> Result<(), Violation> {
        self.rx_stream = stream;
        // A session ended elsewhere (a reconnect replaced it, MS-SMB2 3.3.5.5.3) takes no new
        // requests (`Session::is_valid`); its keys stay while responses are still owed, so
        // those go out signed and sealed as their requests were, then it is dropped here.
        let gone: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(id, s)| s.record.has_ended() && !self.in_flight.uses_session(**id))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.drop_session(id);
        }
        let actions = self.on_frame(frame, env)?;
        self.actions.extend(actions);
        Ok(())
    }

    fn on_frame(&mut self, frame: Bytes, env: &mut Env<'_>) -> Result<Vec<Action>, Violation> {
        self.frames += 1;
        match frame.get(..4) {
            Some([0xFF, b'S', b'M', b'B']) => self.on_smb1(&frame, env),
            Some([0xFD, b'S', b'M', b'B']) => {
                let (plain, session_id) = self.decrypt(frame)?;
                self.encrypted_frames += 1;
                self.on_messages(plain, true, Some(session_id), None, env)
            }
            Some([0xFE, b'S', b'M', b'B']) => {
                let (frame, checked) = self.verify_large_in_place(frame);
                self.on_messages(frame, false, None, checked, env)
            }
            _ => Err(Violation::BadProtocol),
        }
    }

    /// A signed request over 4 KiB alone in its frame (a WRITE's data), when the frame owns
    /// its buffer: its signature is checked here, in place (the Signature field zeroed while
    /// the MAC runs, then put back), instead of through a copy of the whole message in
    /// `check_session_security`, which is given the verdict.
    fn verify_large_in_place(&self, frame: Bytes) -> (Bytes, Option<bool>) {
        let Ok(h) = Header::decode(&frame) else {
            return (frame, None);
        };
        if frame.len() <= 4096 || !h.is_signed() || h.next_command != 0 || h.is_related() {
            return (frame, None);
        }
        let Some(signer) = self
            .sessions
            .get(&h.session_id)
            .and_then(|s| s.signer.as_ref())
        else {
            return (frame, None);
        };
        match frame.try_into_mut() {
            Ok(mut buf) => {
                let ok = signer.verify_in_place(&mut buf);
                (buf.freeze(), Some(ok))
            }
            Err(shared) => (shared, None),
        }
    }

    /// Opens a TRANSFORM frame (MS-SMB2 3.3.5.2.1.1) in place when the frame owns its buffer
    /// alone (the deframer hands large frames out that way), else through one copy.
    fn decrypt(&mut self, frame: Bytes) -> Result<(Bytes, u64), Violation> {
        if !matches!(&self.state, ConnState::Negotiated(n) if n.view.dialect.is_smb3()) {
            return Err(Violation::DecryptFailed);
        }
        let th = TransformHeader::decode(&frame).map_err(|e| malformed("transform header", e))?;
        let hdr_len = smbq_crypto::TRANSFORM_HEADER_LEN;
        if frame.len() < hdr_len
            || th.original_message_size as usize != frame.len() - hdr_len
            || th.flags != 1
        {
            return Err(Violation::DecryptFailed);
        }
        let session = self
            .sessions
            .get(&th.session_id)
            .ok_or(Violation::DecryptFailed)?;
        let dec = session.decryptor.as_ref().ok_or(Violation::DecryptFailed)?;
        let aad: [u8; 32] = frame
            .get(smbq_crypto::TRANSFORM_AAD)
            .and_then(|a| a.try_into().ok())
            .ok_or(Violation::DecryptFailed)?;
        let nonce = th
            .nonce
            .get(..dec.cipher().nonce_len())
            .ok_or(Violation::DecryptFailed)?;
        let mut buf = match frame.try_into_mut() {
            Ok(mut whole) => {
                whole.advance(hdr_len);
                whole
            }
            Err(shared) => BytesMut::from(shared.get(hdr_len..).unwrap_or_default()),
        };
        dec.open_in_place(nonce, &aad, &mut buf, &th.signature)
            .map_err(|_| Violation::DecryptFailed)?;
        Ok((buf.freeze(), th.session_id))
    }

    fn on_messages(
        &mut self,
        frame: Bytes,
        encrypted: bool,
        transform_session: Option<u64>,
        checked: Option<bool>,
        env: &mut Env<'_>,
    ) -> Result<Vec<Action>, Violation> {
        let mut actions = Vec::new();
        let mut items = Vec::new();
        let mut offset = 0usize;
        let mut prev: Option<Header> = None;
        let mut count = 0usize;
        loop {
            count += 1;
            if count > self.cfg.limits.max_compound {
                return Err(Violation::CompoundTooLong);
            }
            let rest = frame
                .get(offset..)
                .ok_or(Violation::BadCompound("offset past the frame"))?;
            let mut hdr = Header::decode(rest).map_err(|e| malformed("SMB2 header", e))?;
            if hdr.is_response() {
                return Err(Violation::UnexpectedResponse);
            }
            let next = hdr.next_command as usize;
            let end = if next == 0 {
                frame.len()
            } else {
                offset
                    .checked_add(next)
                    .ok_or(Violation::BadCompound("NextCommand overflows"))?
            };
            if end > frame.len() || (next != 0 && next < HEADER_LEN) {
                return Err(Violation::BadCompound("NextCommand outside the frame"));
            }
            let msg = frame.slice(offset..end);

            // MS-SMB2 3.3.5.2.7.2: a related request inherits the session and tree of the
            // previous one in the chain.
            if hdr.is_related()
                && let Some(p) = &prev
            {
                hdr.session_id = p.session_id;
                if hdr.tree_id == 0xFFFF_FFFF || hdr.tree_id == 0 {
                    hdr.tree_id = p.tree_id;
                }
            }
            // MS-SMB2 3.3.5.2.7.2 (as Windows and Samba behave): a related request after one
            // whose session could not be found cannot inherit a session at all.
            let orphaned = hdr.is_related()
                && prev.as_ref().is_some_and(|p| {
                    !self
                        .sessions
                        .get(&p.session_id)
                        .is_some_and(Session::is_valid)
                });
            let at = InChain {
                encrypted,
                transform_session,
                first: prev.is_none(),
                orphaned,
                checked,
            };
            if let Some(item) = self.on_message(hdr.clone(), msg, at, env, &mut actions)? {
                items.push(item);
            }
            prev = Some(hdr);
            if next == 0 {
                break;
            }
            // MS-SMB2 3.3.5.2.7: each message in a compound starts 8-byte aligned.
            if !next.is_multiple_of(8) {
                return Err(Violation::BadCompound("message not 8-byte aligned"));
            }
            offset = end;
        }
        // Actions so far (session events) come before the chain's requests.
        self.actions.extend(actions.drain(..));
        if !items.is_empty() {
            self.start_chain(self.rx_stream, items, encrypted, env.at);
        }
        Ok(actions)
    }

    fn on_message(
        &mut self,
        hdr: Header,
        msg: Bytes,
        at: InChain,
        env: &mut Env<'_>,
        actions: &mut Vec<Action>,
    ) -> Result<Option<ChainItem>, Violation> {
        self.check_stream(&hdr)?;
        if hdr.command == Command::CANCEL {
            if !matches!(self.state, ConnState::Negotiated(_)) {
                return Err(Violation::NotNegotiated);
            }
            // MS-SMB2 3.3.5.16: no credits, no response. Earlier actions of this frame first.
            self.actions.extend(actions.drain(..));
            self.on_cancel(&hdr);
            return Ok(None);
        }
        let (charge, multi_credit) = self.charge(&hdr)?;
        if hdr.command == Command::NEGOTIATE {
            self.on_negotiate_message(&hdr, &msg, env)?;
            return Ok(None);
        }
        if !matches!(self.state, ConnState::Negotiated(_)) {
            return Err(Violation::NotNegotiated);
        }
        if let Some(status) = chain_rules(&hdr, &msg, &at, charge, multi_credit)? {
            return Ok(Some(answered(&hdr, status)));
        }
        self.on_session_message(hdr, msg, &at, env, actions)
    }

    /// docs/multistream.md 5.1 and 8: a data stream exists only after a grant, and never
    /// carries the control-only requests.
    fn check_stream(&self, hdr: &Header) -> Result<(), Violation> {
        if self.rx_stream == StreamId::CONTROL {
            return Ok(());
        }
        if self.granted_data_streams() == 0 {
            return Err(Violation::DataStreamNotGranted);
        }
        if smbq_wire::multi_stream::CONTROL_ONLY.contains(&hdr.command) {
            return Err(Violation::ControlOnly(hdr.command));
        }
        Ok(())
    }

    /// Takes the message's credits from the window (MS-SMB2 3.3.5.2.3, 3.3.5.2.5): its charge,
    /// and whether the dialect charges multiple credits.
    fn charge(&mut self, hdr: &Header) -> Result<(u16, bool), Violation> {
        let multi_credit = match &self.state {
            ConnState::Negotiated(n) => n.view.dialect.0 >= 0x0210,
            ConnState::ExpectNegotiate { .. } => false,
        };
        let charge = if multi_credit {
            hdr.credit_charge.max(1)
        } else {
            1
        };
        if !self.credits.consume(hdr.message_id, charge) {
            return Err(Violation::BadMessageId(hdr.message_id));
        }
        Ok((charge, multi_credit))
    }

    /// A message past the connection-level rules: SESSION_SETUP, ECHO and LOGOFF are the
    /// engine's; everything else goes to the server once its session checks out.
    fn on_session_message(
        &mut self,
        hdr: Header,
        msg: Bytes,
        at: &InChain,
        env: &mut Env<'_>,
        actions: &mut Vec<Action>,
    ) -> Result<Option<ChainItem>, Violation> {
        let (encrypted, checked) = (at.encrypted, at.checked);
        if hdr.command == Command::SESSION_SETUP {
            let frame = self.session_setup(&hdr, &msg, encrypted, env, actions)?;
            self.transmit(self.rx_stream, vec![frame]);
            return Ok(None);
        }
        let needs_session = hdr.command != Command::ECHO;
        let status =
            self.check_session_security(&hdr, &msg, encrypted, needs_session, checked, env.at);
        if status != NtStatus::SUCCESS {
            let mut item = answered(&hdr, status);
            // A session of another connection, named here with its key (a channel not bound,
            // smbtorture smb2.session.bind2): the answer is signed with that key, as Samba
            // signs it, once the request proved it holds the key.
            if let ChainItem::Answered(c) = &mut item {
                c.foreign_signed = hdr.is_signed()
                    && !encrypted
                    && !self.sessions.contains_key(&hdr.session_id)
                    && self.signed_foreign(&hdr, &msg);
            }
            return Ok(Some(item));
        }
        match hdr.command {
            // MS-SMB2 2.2.28 (ECHO) and 2.2.8 (LOGOFF): StructureSize 4, Reserved.
            Command::ECHO => return Ok(Some(answered_ok(hdr, vec![4, 0, 0, 0]))),
            Command::LOGOFF => {
                // The response is signed with the session's key, so the session is removed
                // only after the response is built (in finish).
                actions.push(Action::SessionEnded {
                    session_id: hdr.session_id,
                });
                return Ok(Some(answered_ok(hdr, vec![4, 0, 0, 0])));
            }
            _ => {}
        }
        let view = self.sessions.get(&hdr.session_id).and_then(|s| {
            Some(SessionView {
                id: s.id,
                identity: s.identity.clone()?,
                encrypt_data: s.encrypt_data,
                can_encrypt: s.encryptor.is_some(),
            })
        });
        Ok(Some(ChainItem::Run(Box::new(Request {
            header: hdr,
            msg,
            session: view,
            encrypted,
            related_file_id: None,
            async_id: None,
        }))))
    }

    /// Session lookup, signature and encryption checks (MS-SMB2 3.3.5.2.4, 3.3.5.2.9).
    fn check_session_security(
        &self,
        hdr: &Header,
        msg: &[u8],
        encrypted: bool,
        session_needed: bool,
        checked: Option<bool>,
        now: Instant,
    ) -> NtStatus {
        if hdr.session_id == 0 {
            return if session_needed {
                NtStatus::USER_SESSION_DELETED
            } else {
                NtStatus::SUCCESS
            };
        }
        let Some(s) = self.sessions.get(&hdr.session_id) else {
            return NtStatus::USER_SESSION_DELETED;
        };
        if !s.is_valid() {
            return NtStatus::USER_SESSION_DELETED;
        }
        // MS-SMB2 3.3.5.2.9: an expired session still logs off, closes and unlocks what it
        // holds; anything else waits for a re-authentication (SESSION_SETUP takes another
        // path).
        let expired = s.expires_at.is_some_and(|t| now >= t)
            && !matches!(
                hdr.command,
                Command::LOGOFF | Command::CLOSE | Command::LOCK
            );
        let expired_status = if expired {
            NtStatus::NETWORK_SESSION_EXPIRED
        } else {
            NtStatus::SUCCESS
        };
        if encrypted {
            return expired_status;
        }
        if s.encrypt_data {
            return NtStatus::ACCESS_DENIED;
        }
        if hdr.is_signed() {
            match &s.signer {
                Some(signer) if checked.unwrap_or_else(|| signer.verify(msg)) => {}
                // A guest session has no key: a signed request cannot be checked.
                _ => return NtStatus::ACCESS_DENIED,
            }
        } else if s.signing_required {
            return NtStatus::ACCESS_DENIED;
        }
        expired_status
    }

    /// An unsolicited notification (oplock or lease break, MS-SMB2 3.3.4.6/3.3.4.7):
    /// MessageId all ones, SessionId 0, no credits, never signed; encrypted when the session
    /// the break concerns requires encryption.
    pub fn notification(&mut self, session_id: u64, command: Command, body: &[u8]) {
        let frame = self.notification_frame(session_id, command, body);
        self.transmit(StreamId::CONTROL, frame);
    }

    /// The key of a session this connection carries no channel of: one established on
    /// another connection, or one that ended here lately.
    fn known_signer(&self, session_id: u64) -> Option<Signer> {
        if let Some(est) = self.foreign_session(session_id) {
            return Some(est.signer.clone());
        }
        self.ended_signers
            .iter()
            .find(|(id, _)| *id == session_id)
            .map(|(_, k)| k.clone())
    }

    /// Whether `msg` names a session this connection has no channel of (see `known_signer`)
    /// and is signed with its key.
    fn signed_foreign(&self, hdr: &Header, msg: &[u8]) -> bool {
        self.known_signer(hdr.session_id)
            .is_some_and(|k| k.verify(msg))
    }

    /// Drops this connection's part of a session that ended, keeping its signing key a while
    /// (`ended_signers`).
    fn drop_session(&mut self, session_id: u64) {
        if let Some(k) = self.sessions.remove(&session_id).and_then(|s| s.signer) {
            if self.ended_signers.len() >= ENDED_SIGNERS {
                self.ended_signers.pop_front();
            }
            self.ended_signers.push_back((session_id, k));
        }
    }

    /// A session established on another connection, with its keys (for answering a request
    /// that names it here: binding, or a channel not bound yet).
    fn foreign_session(&self, session_id: u64) -> Option<Arc<Established>> {
        if session_id == 0 || self.sessions.contains_key(&session_id) {
            return None;
        }
        self.table.get(session_id)?.established().cloned()
    }
}

/// The rules a message of a negotiated connection must meet before its session is looked at:
/// a status to answer it with, or a violation that costs the connection.
fn chain_rules(
    hdr: &Header,
    msg: &[u8],
    at: &InChain,
    charge: u16,
    multi_credit: bool,
) -> Result<Option<NtStatus>, Violation> {
    // MS-SMB2 3.3.5.2.7.2: the first request of a chain cannot be related.
    if (at.first && hdr.is_related()) || at.orphaned {
        return Ok(Some(NtStatus::INVALID_PARAMETER));
    }
    // MS-SMB2 3.3.5.2: a command code we do not know.
    if hdr.command.0 > Command::OPLOCK_BREAK.0 {
        return Ok(Some(NtStatus::INVALID_PARAMETER));
    }
    // MS-SMB2 3.3.5.2.5: the charge must cover the payload.
    if multi_credit
        && let Some(need) = payload_credits(hdr.command, msg)
        && u32::from(charge) < need
    {
        return Ok(Some(NtStatus::INVALID_PARAMETER));
    }
    // MS-SMB2 3.3.5.2.1.1: every message in an encrypted frame belongs to its session.
    if at.encrypted && at.transform_session.is_some_and(|s| s != hdr.session_id) {
        return Err(Violation::DecryptFailed);
    }
    Ok(None)
}

fn answered(hdr: &Header, status: NtStatus) -> ChainItem {
    ChainItem::Answered(Completed {
        header: hdr.clone(),
        response: Response::error(status),
        async_id: None,
        foreign_signed: false,
    })
}

fn answered_ok(header: Header, body: Vec<u8>) -> ChainItem {
    ChainItem::Answered(Completed {
        header,
        response: Response::ok(body),
        async_id: None,
        foreign_signed: false,
    })
}

/// Credits a request must be charged for its payload (MS-SMB2 3.3.5.2.5), from fixed offsets
/// of the request body. `None` for commands without a large payload.
fn payload_credits(cmd: Command, msg: &[u8]) -> Option<u32> {
    let u32_at = |off: usize| -> Option<u32> {
        let b: [u8; 4] = msg
            .get(HEADER_LEN + off..HEADER_LEN + off + 4)?
            .try_into()
            .ok()?;
        Some(u32::from_le_bytes(b))
    };
    let size = match cmd {
        Command::READ | Command::WRITE => u32_at(4)?,
        Command::QUERY_DIRECTORY => u32_at(28)?,
        Command::CHANGE_NOTIFY => u32_at(4)?,
        Command::QUERY_INFO => u32_at(4)?.max(u32_at(12)?),
        Command::SET_INFO => u32_at(4)?,
        Command::IOCTL => u32_at(28)?.max(u32_at(44)?),
        _ => return None,
    };
    Some(if size == 0 { 1 } else { (size - 1) / 65536 + 1 })
}

/// Where a message sits in its frame, for the rules that depend on it.
#[derive(Clone, Copy)]
struct InChain {
    /// The frame came in an SMB2 TRANSFORM_HEADER (MS-SMB2 3.3.5.2.1.1).
    encrypted: bool,
    /// The session that TRANSFORM_HEADER named: every message inside must belong to it.
    transform_session: Option<u64>,
    /// First message of its chain (MS-SMB2 3.3.5.2.7.2: it cannot be related).
    first: bool,
    /// Related to a message whose session was not found: it cannot inherit one.
    orphaned: bool,
    /// The signature verdict `verify_large_in_place` reached for this (single) message.
    checked: Option<bool>,
}

/// A decode failure that drops the connection, with the structure it happened in.
fn malformed(what: &'static str, error: smbq_wire::DecodeError) -> Violation {
    Violation::Malformed { what, error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_credit_rule() {
        let mut msg = vec![0u8; HEADER_LEN + 49];
        msg[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&(65536u32 * 2 + 1).to_le_bytes());
        assert_eq!(payload_credits(Command::READ, &msg), Some(3));
        msg[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&65536u32.to_le_bytes());
        assert_eq!(payload_credits(Command::READ, &msg), Some(1));
        assert_eq!(payload_credits(Command::CLOSE, &msg), None);
    }
}
