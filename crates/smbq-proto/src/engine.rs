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
//!
//! This file keeps the types, the public surface, the dispatch of a frame by its protocol id
//! (`on_frame`) and the session-key helpers the parts share; each part adds its own
//! `impl ServerConnection`: `validate.rs` (frames in: decryption, signature checks, the
//! compound walk and its rules), `negotiate.rs` (the SMB1 upgrade, NEGOTIATE and its
//! contexts), `session_setup.rs` (authentication, re-authentication, keys), `binding.rs`
//! (further channels of a session), `requests.rs` (chains in flight) and `outgoing.rs`
//! (responses out: framing, signing, sealing).

mod binding;
mod negotiate;
mod outgoing;
mod requests;
mod session_setup;
mod validate;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use smbq_auth::Accounts;
use smbq_crypto::{Cipher, PreauthHash, Signer, SigningAlgorithm};
use smbq_wire::{Command, Dialect, Header};

use crate::config::EngineConfig;
use crate::credits::CreditWindow;
use crate::error::Violation;
use crate::request::{ConnView, Request, Response};
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
    /// What the compression context settled (off unless 3.1.1 negotiated it).
    compression: smbq_compress::Compression,
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
    /// Whether compressing pays on this link (smbq_compress::pace).
    pace: smbq_compress::Pace,
    /// MS-SMB2 3.3.1.7 Connection.ConstrainedConnection: true until a session that is neither
    /// anonymous nor guest has been set up here. Until then no encrypted message is opened
    /// (validate.rs `decrypt`): an anonymous session's keys are public.
    constrained: bool,
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
            constrained: true,
            in_flight: requests::InFlight::default(),
            actions: VecDeque::new(),
            transmits: VecDeque::new(),
            rx_stream: StreamId::CONTROL,
            data_stream_limit: 0,
            ended_signers: VecDeque::new(),
            pace: smbq_compress::Pace::default(),
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

    /// How fast the connection's writers get bytes out (smbq_compress::pace): compression
    /// is tried only while it is faster than that.
    pub fn set_link_rate(&mut self, bytes_per_s: Option<u64>) {
        self.pace.set_link_rate(bytes_per_s);
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
                let (mut plain, session_id) = self.decrypt(frame)?;
                self.encrypted_frames += 1;
                // MS-SMB2 3.3.5.2.1.1: a decrypted message may be compressed (compressed,
                // then encrypted: 3.1.4.4 before 3.1.4.3).
                if plain.starts_with(&smbq_wire::transform::COMPRESSION_PROTOCOL_ID) {
                    plain = self.decompress(&plain)?;
                }
                self.on_messages(plain, true, Some(session_id), None, env)
            }
            Some([0xFC, b'S', b'M', b'B']) => {
                let plain = self.decompress(&frame)?;
                let (frame, checked) = self.verify_large_in_place(plain);
                self.on_messages(frame, false, None, checked, env)
            }
            Some([0xFE, b'S', b'M', b'B']) => {
                let (frame, checked) = self.verify_large_in_place(frame);
                self.on_messages(frame, false, None, checked, env)
            }
            _ => Err(Violation::BadProtocol),
        }
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

/// A decode failure that drops the connection, with the structure it happened in.
fn malformed(what: &'static str, error: smbq_wire::DecodeError) -> Violation {
    Violation::Malformed { what, error }
}
