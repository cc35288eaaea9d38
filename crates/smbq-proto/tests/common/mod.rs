//! A small test-only SMB2 client, built from the real codec, NTLM initiator and crypto, driving
//! an in-memory `ServerConnection`. Deterministic: seeded RNGs on both sides and a fixed `now`.
//!
//! The client computes everything itself (preauth hash, keys, signatures, sealing), so a
//! signature or ciphertext that checks out on its side proves both sides agree.
#![allow(dead_code)]

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use smbq_auth::{Credentials, Initiator, nt_hash};
use smbq_crypto::{Cipher, PreauthHash, Role, Sealer, Signer, SigningAlgorithm, derive_keys};
use smbq_proto::engine::{Action, Env, ServerConnection, StreamId, Transport};
use smbq_proto::framing::Deframer;
use smbq_proto::{EngineConfig, Limits, Request, Response, SessionTable, Violation};
use smbq_wire::header::{NEXT_COMMAND_OFFSET, flags};
use smbq_wire::multi_stream::MultiStream;
use smbq_wire::negotiate::{
    Cipher as WireCipher, HashAlgorithm, NegotiateContext, NegotiateContextType, NegotiateRequest,
    NegotiateResponse, SigningAlgorithm as WireSigning, capabilities, transport_flags,
};
use smbq_wire::session_setup::{SessionSetupRequest, SessionSetupResponse, security_mode};
use smbq_wire::transform::{TRANSFORM_HEADER_LEN, TransformHeader};
use smbq_wire::{Command, Dialect, HEADER_LEN, Header, NtStatus, Writer};

/// A fixed FILETIME (2024-01-20); the engine has no clock of its own.
pub const NOW: u64 = 133_500_000_000_000_000;
pub const USER: &str = "alice";
pub const PASSWORD: &str = "correct horse";
pub const SERVER_GUID: [u8; 16] = [0x5A; 16];

/// A second valid account (same password), for rules about "another user".
pub const OTHER_USER: &str = "carol";

pub fn accounts(user: &str) -> Option<[u8; 16]> {
    (user.eq_ignore_ascii_case(USER) || user.eq_ignore_ascii_case(OTHER_USER))
        .then(|| nt_hash(PASSWORD))
}

pub fn config() -> EngineConfig {
    EngineConfig::new(Limits::default(), SERVER_GUID, "smbq")
}

/// The engine plus what `Env` borrows, a deframer as the connection's reader has, and a
/// simulated monotonic clock (`advance`).
pub struct Server {
    pub engine: ServerConnection,
    pub rng: StdRng,
    next_session: Cell<u64>,
    deframer: Deframer,
    /// The simulated time handed to the engine.
    pub clock: Instant,
    /// The server-wide session table this engine shares.
    pub table: Arc<SessionTable>,
}

impl Server {
    pub fn new(cfg: EngineConfig) -> Self {
        Self::with_transport(cfg, Transport::Tcp)
    }

    pub fn with_transport(cfg: EngineConfig, transport: Transport) -> Self {
        Self::sharing(cfg, transport, SessionTable::new())
    }

    /// A connection of a server whose other connections use `table` too.
    pub fn sharing(cfg: EngineConfig, transport: Transport, table: Arc<SessionTable>) -> Self {
        Self::sharing_as(cfg, transport, table, 1)
    }

    /// Like [`Self::sharing`], as connection `conn_id` (channels of one session need
    /// distinct connection ids).
    pub fn sharing_as(
        cfg: EngineConfig,
        transport: Transport,
        table: Arc<SessionTable>,
        conn_id: u64,
    ) -> Self {
        let first_id = 0x1000_0001 + (table.len() as u64) * 0x0100_0000;
        Self {
            // Ids are server-wide: a second connection of the same test server counts from
            // elsewhere.
            table: table.clone(),
            engine: ServerConnection::new(
                Arc::new(cfg),
                table,
                conn_id,
                "test-peer".into(),
                transport,
            ),
            rng: StdRng::seed_from_u64(0x5e7e7),
            next_session: Cell::new(first_id),
            deframer: Deframer::new(),
            clock: Instant::now(),
        }
    }

    /// Pushes stream bytes and hands every whole frame to the engine (on the control stream),
    /// as the connection's reader and loop would. Returns the actions the engine asked for;
    /// frames to send stay queued for [`Self::sent`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Action>, Violation> {
        self.feed_on(StreamId::CONTROL, bytes)
    }

    /// Like [`Self::feed`], on a given stream.
    pub fn feed_on(&mut self, stream: StreamId, bytes: &[u8]) -> Result<Vec<Action>, Violation> {
        let Self {
            engine,
            rng,
            next_session,
            deframer,
            clock,
            ..
        } = self;
        deframer.push(bytes);
        let new_id = || {
            let id = next_session.get();
            next_session.set(id + 1);
            id
        };
        while let Some(frame) = deframer.next_frame(engine.frame_limit())? {
            let mut env = Env {
                accounts: &accounts,
                now: NOW,
                at: *clock,
                rng,
                new_session_id: &new_id,
            };
            engine.handle_frame(stream, frame, &mut env)?;
        }
        Ok(self.actions())
    }

    /// Every action the engine has queued.
    pub fn actions(&mut self) -> Vec<Action> {
        std::iter::from_fn(|| self.engine.poll_action()).collect()
    }

    /// Every frame the engine has queued to send, segments joined, in order.
    pub fn sent(&mut self) -> Vec<Vec<u8>> {
        self.sent_with_streams()
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }

    /// Like [`Self::sent`] with the stream of each frame.
    pub fn sent_with_streams(&mut self) -> Vec<(StreamId, Vec<u8>)> {
        std::iter::from_fn(|| self.engine.poll_transmit())
            .map(|t| (t.stream, concat(&t.frame)))
            .collect()
    }

    /// Moves the simulated clock and lets the engine act on it.
    pub fn advance(&mut self, by: Duration) {
        self.clock += by;
        self.engine.handle_timeout(self.clock);
    }

    /// Completes a request at the current simulated time.
    pub fn complete(&mut self, message_id: u64, response: Response) {
        self.engine.complete(message_id, response, self.clock);
    }

    /// Runs every request the actions ask for (and those their completions lead to) with
    /// `handler`, at once; returns the other actions.
    pub fn run_all(
        &mut self,
        mut actions: Vec<Action>,
        handler: &mut dyn FnMut(&Request) -> Response,
    ) -> Vec<Action> {
        let mut other = Vec::new();
        while !actions.is_empty() {
            for a in std::mem::take(&mut actions) {
                match a {
                    Action::Execute(x) => {
                        let r = handler(&x.request);
                        self.complete(x.request.header.message_id, r);
                        actions.extend(self.actions());
                    }
                    a => other.push(a),
                }
            }
        }
        other
    }

    /// Feeds bytes, runs every request with `handler`, and returns the frames sent (in order)
    /// and the remaining actions (session events, cancels, answered chains).
    pub fn exchange(
        &mut self,
        bytes: &[u8],
        handler: &mut dyn FnMut(&Request) -> Response,
    ) -> Result<(Vec<Vec<u8>>, Vec<Action>), Violation> {
        let actions = self.feed(bytes)?;
        let other = self.run_all(actions, handler);
        Ok((self.sent(), other))
    }

    /// Like [`Self::exchange`] for requests the engine must answer itself.
    pub fn exchange_engine_only(
        &mut self,
        bytes: &[u8],
    ) -> Result<(Vec<Vec<u8>>, Vec<Action>), Violation> {
        self.exchange(bytes, &mut |r| {
            panic!("request {:?} unexpectedly passed up", r.header.command)
        })
    }
}

/// The requests an action list asks the server to run.
pub fn executes(actions: &[Action]) -> Vec<&Request> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Execute(x) => Some(&*x.request),
            _ => None,
        })
        .collect()
}

/// The segments of one frame, joined.
pub fn concat(segs: &[Bytes]) -> Vec<u8> {
    segs.iter().flat_map(|b| b.iter().copied()).collect()
}

/// Prepends the Direct-TCP header (MS-SMB2 2.1).
pub fn frame(msg: &[u8]) -> Vec<u8> {
    let len = u32::try_from(msg.len()).unwrap();
    assert!(len <= 0x00FF_FFFF);
    let mut out = len.to_be_bytes().to_vec();
    out[0] = 0;
    out.extend_from_slice(msg);
    out
}

/// A decoded response message (one element of a compound), as received.
#[derive(Clone, Debug)]
pub struct Msg {
    pub header: Header,
    /// The whole message, header included, padding included for non-last compound elements.
    pub bytes: Vec<u8>,
}

impl Msg {
    pub fn status(&self) -> NtStatus {
        self.header.status
    }
    pub fn body(&self) -> &[u8] {
        &self.bytes[HEADER_LEN..]
    }
}

/// One received frame, opened and split.
#[derive(Clone, Debug)]
pub struct Received {
    pub encrypted: bool,
    pub msgs: Vec<Msg>,
}

impl Received {
    pub fn one(&self) -> &Msg {
        assert_eq!(self.msgs.len(), 1, "expected a single message");
        &self.msgs[0]
    }
}

/// Splits a (decrypted) compound by NextCommand, checking the 8-byte rule for each link.
pub fn split_compound(plain: &[u8]) -> Vec<Msg> {
    let mut out = Vec::new();
    let mut off = 0usize;
    loop {
        let header = Header::decode(&plain[off..]).unwrap();
        let next = header.next_command as usize;
        let end = if next == 0 { plain.len() } else { off + next };
        if next != 0 {
            assert_eq!(next % 8, 0, "NextCommand {next} is not 8-byte aligned");
            assert!(end <= plain.len(), "NextCommand points outside the frame");
        }
        out.push(Msg {
            header,
            bytes: plain[off..end].to_vec(),
        });
        if next == 0 {
            return out;
        }
        off = end;
    }
}

/// Negotiation choices for a 3.1.1 client.
#[derive(Clone, Debug)]
pub struct Offer {
    pub dialects: Vec<Dialect>,
    pub ciphers: Vec<Cipher>,
    pub signing: Vec<SigningAlgorithm>,
    pub capabilities: u32,
    /// Session setup SecurityMode (MS-SMB2 2.2.5).
    pub setup_security_mode: u8,
    /// Offer SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (as a QUIC client does).
    pub transport_security: bool,
    /// Data streams asked for with smbq's multi-stream context (docs/multistream.md); 0: none.
    pub data_streams: u16,
    /// Send this raw Data in the multi-stream context instead (malformed offers).
    pub data_streams_raw: Option<Vec<u8>>,
    /// SMB2_COMPRESSION_CAPABILITIES to send: Flags and algorithm ids.
    pub compression: Option<(u32, Vec<u16>)>,
    /// The SMB3 POSIX extensions' negotiate context to send: its raw Data.
    pub posix: Option<Vec<u8>>,
}

impl Offer {
    pub fn smb311(ciphers: &[Cipher], signing: &[SigningAlgorithm]) -> Self {
        Self {
            dialects: vec![Dialect::SMB3_1_1],
            ciphers: ciphers.to_vec(),
            signing: signing.to_vec(),
            capabilities: capabilities::LARGE_MTU,
            setup_security_mode: security_mode::SIGNING_ENABLED,
            transport_security: false,
            data_streams: 0,
            data_streams_raw: None,
            compression: None,
            posix: None,
        }
    }

    /// A pre-3.1.1 dialect. 3.0/3.0.2 ask for encryption through the capability; 2.x clients
    /// require signing so that the final SESSION_SETUP response is signed.
    pub fn legacy(dialect: Dialect) -> Self {
        let smb3 = dialect.is_smb3();
        Self {
            dialects: vec![dialect],
            ciphers: Vec::new(),
            signing: Vec::new(),
            capabilities: if smb3 {
                capabilities::ENCRYPTION | capabilities::LARGE_MTU
            } else if dialect == Dialect::SMB2_0_2 {
                0
            } else {
                capabilities::LARGE_MTU
            },
            setup_security_mode: if smb3 {
                security_mode::SIGNING_ENABLED
            } else {
                security_mode::SIGNING_ENABLED | security_mode::SIGNING_REQUIRED
            },
            transport_security: false,
            data_streams: 0,
            data_streams_raw: None,
            compression: None,
            posix: None,
        }
    }
}

/// What the client learnt from NEGOTIATE.
#[derive(Clone, Debug)]
pub struct Negotiated {
    pub dialect: Dialect,
    pub cipher: Option<Cipher>,
    pub signing: SigningAlgorithm,
    pub capabilities: u32,
    pub security_mode: u16,
    pub contexts_seen: usize,
    pub salt_len: usize,
    /// The server answered SMB2_TRANSPORT_CAPABILITIES with ACCEPT_TRANSPORT_LEVEL_SECURITY.
    pub transport_security: bool,
    /// The multi-stream context the server answered, if any.
    pub multi_stream: Option<MultiStream>,
    /// The compression context the server answered: Flags and algorithm ids.
    pub compression: Option<(u32, Vec<u16>)>,
    /// The SMB3 POSIX extensions' context the server answered: its Data.
    pub posix: Option<Vec<u8>>,
}

/// The result of a whole SESSION_SETUP exchange.
#[derive(Debug)]
pub struct Setup {
    /// Status of the last leg.
    pub status: NtStatus,
    pub last: Msg,
    /// Non-frame actions seen during the exchange (SessionStarted, AuthFailed...).
    pub actions: Vec<Action>,
    pub session_flags: u16,
}

/// The test client's side of one connection.
pub struct Client {
    pub rng: StdRng,
    pub next_mid: u64,
    /// Credits granted and not yet charged, as the client counts them.
    pub credits: i64,
    pub offer: Offer,
    pub negotiated: Option<Negotiated>,
    pub conn_preauth: PreauthHash,
    pub session_id: u64,
    pub tree_id: u32,
    pub signer: Option<Signer>,
    pub encryptor: Option<Sealer>,
    pub decryptor: Option<Sealer>,
    /// Credits to ask for in each request.
    pub credit_request: u16,
}

impl Client {
    pub fn new(offer: Offer) -> Self {
        Self {
            rng: StdRng::seed_from_u64(0xC11E),
            next_mid: 0,
            credits: 1,
            offer,
            negotiated: None,
            conn_preauth: PreauthHash::new(),
            session_id: 0,
            tree_id: 0,
            signer: None,
            encryptor: None,
            decryptor: None,
            credit_request: 64,
        }
    }

    pub fn dialect(&self) -> Dialect {
        self.negotiated.as_ref().unwrap().dialect
    }

    /// A header for the next request: takes `charge` message ids and charges the credits.
    pub fn header(&mut self, command: Command, charge: u16) -> Header {
        let mid = self.next_mid;
        let n = u64::from(charge.max(1));
        self.next_mid += n;
        self.credits -= n as i64;
        Header {
            credit_charge: charge,
            command,
            credits: self.credit_request,
            message_id: mid,
            session_id: self.session_id,
            tree_id: self.tree_id,
            ..Default::default()
        }
    }

    /// Header + body, unsigned.
    pub fn message(header: &Header, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        header.encode(&mut w);
        w.bytes(body);
        w.into_vec()
    }

    /// Sets SIGNED and signs with the session's key (padding included, as sent).
    pub fn sign(&self, msg: &mut [u8]) {
        let f = u32::from_le_bytes(msg[16..20].try_into().unwrap()) | flags::SIGNED;
        msg[16..20].copy_from_slice(&f.to_le_bytes());
        self.signer
            .as_ref()
            .expect("no signing key")
            .sign(msg)
            .unwrap();
    }

    /// Joins messages into one compound: each but the last padded to 8 with NextCommand set;
    /// signs those whose flag is set after the padding is in place (MS-SMB2 3.2.4.1.4).
    pub fn compound(&self, msgs: Vec<(Vec<u8>, bool)>) -> Vec<u8> {
        let n = msgs.len();
        let mut out = Vec::new();
        for (i, (mut m, sign)) in msgs.into_iter().enumerate() {
            if i + 1 < n {
                let padded = m.len().div_ceil(8) * 8;
                m.resize(padded, 0);
                m[NEXT_COMMAND_OFFSET..NEXT_COMMAND_OFFSET + 4]
                    .copy_from_slice(&(padded as u32).to_le_bytes());
            }
            if sign {
                self.sign(&mut m);
            }
            out.extend_from_slice(&m);
        }
        out
    }

    /// Wraps `plain` in a TRANSFORM_HEADER sealed with the client's key (MS-SMB2 3.2.4.1.8),
    /// framed.
    pub fn seal(&mut self, plain: &[u8]) -> Vec<u8> {
        let enc = self.encryptor.as_ref().expect("no encryption key");
        let mut nonce = [0u8; 16];
        let nlen = enc.cipher().nonce_len();
        self.rng.fill_bytes(&mut nonce[..nlen]);
        let th = TransformHeader {
            signature: [0; 16],
            nonce,
            original_message_size: plain.len() as u32,
            flags: 1,
            session_id: self.session_id,
        };
        let mut hdr = th.to_bytes();
        let mut payload = plain.to_vec();
        enc.seal_transform(&mut hdr, &mut payload).unwrap();
        let mut msg = hdr.to_vec();
        msg.extend_from_slice(&payload);
        frame(&msg)
    }

    /// Parses one response frame: length header checked, transform opened with the client's
    /// decryption key, compound split; credits granted are added to the client's count.
    pub fn receive(&mut self, framed: &[u8]) -> Received {
        let len = u32::from_be_bytes(framed[..4].try_into().unwrap()) as usize;
        assert_eq!(len, framed.len() - 4, "frame length header");
        let body = &framed[4..];
        let decompressed;
        let body = if body[..4] == [0xFC, b'S', b'M', b'B'] {
            decompressed = self.decompress(body);
            &decompressed[..]
        } else {
            body
        };
        let (encrypted, plain) = if body[..4] == [0xFD, b'S', b'M', b'B'] {
            let th = TransformHeader::decode(body).unwrap();
            assert_eq!(th.session_id, self.session_id, "transform SessionId");
            assert_eq!(th.flags, 1);
            assert_eq!(
                th.original_message_size as usize,
                body.len() - TRANSFORM_HEADER_LEN
            );
            let hdr: [u8; TRANSFORM_HEADER_LEN] = body[..TRANSFORM_HEADER_LEN].try_into().unwrap();
            let mut payload = body[TRANSFORM_HEADER_LEN..].to_vec();
            self.decryptor
                .as_ref()
                .expect("encrypted response but no decryption key")
                .open_transform(&hdr, &mut payload)
                .expect("response does not open with the client's decryption key");
            if payload[..4] == [0xFC, b'S', b'M', b'B'] {
                payload = self.decompress(&payload);
            }
            (true, payload)
        } else {
            (false, body.to_vec())
        };
        let msgs = split_compound(&plain);
        for m in &msgs {
            assert!(m.header.is_response(), "SERVER_TO_REDIR missing");
            self.credits += i64::from(m.header.credits);
        }
        Received { encrypted, msgs }
    }

    /// A compressed response, decompressed with what NEGOTIATE settled.
    pub fn decompress(&self, msg: &[u8]) -> Vec<u8> {
        let (flags, algs) = self
            .negotiated
            .as_ref()
            .and_then(|n| n.compression.clone())
            .expect("a compressed response without compression negotiated");
        let ids: Vec<_> = algs
            .iter()
            .map(|a| smbq_wire::negotiate::CompressionAlgorithm(*a))
            .collect();
        let all = smbq_compress::Algorithm::ALL;
        let c = smbq_compress::Compression::accept(&all, true, flags, &ids).unwrap();
        c.decompress(msg, 16 << 20).expect("response decompresses")
    }

    /// Whether `m` carries a signature that verifies with the client's signing key.
    pub fn verifies(&self, m: &Msg) -> bool {
        m.header.is_signed() && self.signer.as_ref().is_some_and(|s| s.verify(&m.bytes))
    }

    // ---- NEGOTIATE -------------------------------------------------------------------

    pub fn negotiate_request(&mut self) -> Vec<u8> {
        let mut contexts = Vec::new();
        let salt = [0x42u8; 32];
        let multi = MultiStream::new(self.offer.data_streams).encode();
        let raw = self.offer.data_streams_raw.clone().unwrap_or_default();
        let posix = self.offer.posix.clone();
        if self.offer.dialects.contains(&Dialect::SMB3_1_1) {
            contexts.push(NegotiateContext::PreauthIntegrity {
                hash_algorithms: vec![HashAlgorithm::SHA512],
                salt: &salt,
            });
            if !self.offer.ciphers.is_empty() {
                contexts.push(NegotiateContext::Encryption {
                    ciphers: self
                        .offer
                        .ciphers
                        .iter()
                        .map(|c| WireCipher(c.wire_id()))
                        .collect(),
                });
            }
            if self.offer.transport_security {
                contexts.push(NegotiateContext::Transport {
                    flags: transport_flags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
                });
            }
            if self.offer.data_streams_raw.is_some() {
                contexts.push(NegotiateContext::Other {
                    context_type: NegotiateContextType::SMBQ_MULTI_STREAM,
                    data: &raw,
                });
            } else if self.offer.data_streams > 0 {
                contexts.push(MultiStream::context(&multi));
            }
            if let Some(data) = &posix {
                contexts.push(NegotiateContext::Other {
                    context_type: smbq_wire::posix::NEGOTIATE_CONTEXT,
                    data,
                });
            }
            if let Some((flags, algs)) = &self.offer.compression {
                contexts.push(NegotiateContext::Compression {
                    flags: *flags,
                    algorithms: algs
                        .iter()
                        .map(|a| smbq_wire::negotiate::CompressionAlgorithm(*a))
                        .collect(),
                });
            }
            if !self.offer.signing.is_empty() {
                contexts.push(NegotiateContext::Signing {
                    algorithms: self
                        .offer
                        .signing
                        .iter()
                        .map(|a| WireSigning(a.wire_id()))
                        .collect(),
                });
            }
        }
        let req = NegotiateRequest {
            security_mode: smbq_wire::negotiate::security_mode::SIGNING_ENABLED,
            capabilities: self.offer.capabilities,
            client_guid: [0xC1; 16],
            dialects: self.offer.dialects.clone(),
            contexts,
        };
        let h = self.header(Command::NEGOTIATE, 0);
        let mut w = Writer::new();
        h.encode(&mut w);
        req.encode(&mut w);
        w.into_vec()
    }

    /// Takes the NEGOTIATE response (and the request it answers, for the preauth hash).
    pub fn on_negotiate_response(&mut self, req: &[u8], resp: &Msg) -> Negotiated {
        assert_eq!(resp.status(), NtStatus::SUCCESS, "NEGOTIATE failed");
        let r = NegotiateResponse::decode(&resp.bytes).unwrap();
        let mut cipher = None;
        let mut signing = SigningAlgorithm::default_for_dialect(r.dialect.0);
        let mut salt_len = 0;
        let mut transport_security = false;
        let mut compression = None;
        let mut posix = None;
        let multi_stream = MultiStream::find(&r.contexts);
        if r.dialect == Dialect::SMB3_1_1 {
            self.conn_preauth.update(req);
            self.conn_preauth.update(&resp.bytes);
            for c in &r.contexts {
                match c {
                    NegotiateContext::PreauthIntegrity {
                        hash_algorithms,
                        salt,
                    } => {
                        assert_eq!(hash_algorithms, &vec![HashAlgorithm::SHA512]);
                        salt_len = salt.len();
                    }
                    NegotiateContext::Encryption { ciphers } => {
                        assert_eq!(ciphers.len(), 1, "server must choose one cipher");
                        cipher = Cipher::from_wire_id(ciphers[0].0);
                    }
                    NegotiateContext::Signing { algorithms } => {
                        assert_eq!(algorithms.len(), 1, "server must choose one algorithm");
                        signing = SigningAlgorithm::from_wire_id(algorithms[0].0).unwrap();
                    }
                    NegotiateContext::Transport { flags } => {
                        transport_security =
                            flags & transport_flags::ACCEPT_TRANSPORT_LEVEL_SECURITY != 0;
                    }
                    NegotiateContext::Compression { flags, algorithms } => {
                        compression = Some((*flags, algorithms.iter().map(|a| a.0).collect()));
                    }
                    NegotiateContext::Other { context_type, data }
                        if *context_type == smbq_wire::posix::NEGOTIATE_CONTEXT =>
                    {
                        posix = Some(data.to_vec());
                    }
                    _ => {}
                }
            }
        } else if r.dialect.is_smb3() && r.capabilities & capabilities::ENCRYPTION != 0 {
            cipher = Some(Cipher::Aes128Ccm);
        }
        let n = Negotiated {
            dialect: r.dialect,
            cipher,
            signing,
            capabilities: r.capabilities,
            security_mode: r.security_mode,
            contexts_seen: r.contexts.len(),
            salt_len,
            transport_security,
            multi_stream,
            compression,
            posix,
        };
        self.negotiated = Some(n.clone());
        n
    }

    pub fn negotiate(&mut self, server: &mut Server) -> Negotiated {
        let req = self.negotiate_request();
        let (frames, _) = server.exchange_engine_only(&frame(&req)).unwrap();
        assert_eq!(frames.len(), 1);
        let resp = self.receive(&frames[0]);
        assert!(!resp.encrypted);
        self.on_negotiate_response(&req, resp.one())
    }

    // ---- SESSION_SETUP ---------------------------------------------------------------

    /// One SESSION_SETUP leg; signed when re-authenticating an established session.
    fn setup_message(&mut self, token: &[u8], sign: bool) -> Vec<u8> {
        let h = self.header(Command::SESSION_SETUP, 1);
        let req = SessionSetupRequest {
            security_mode: self.offer.setup_security_mode,
            security_buffer: token,
            ..Default::default()
        };
        let mut w = Writer::new();
        h.encode(&mut w);
        req.encode(&mut w);
        let mut m = w.into_vec();
        if sign {
            self.sign(&mut m);
        }
        m
    }

    /// Runs NTLMv2-in-SPNEGO SESSION_SETUP to the end. On success the client holds keys
    /// derived on its own side (preauth hash over the exact bytes exchanged). On an
    /// established session this is a re-authentication: legs are signed and keys are kept
    /// (MS-SMB2 3.3.5.5.2).
    pub fn session_setup(&mut self, server: &mut Server, user: &str, password: &str) -> Setup {
        let creds = Credentials::with_password(user, "WORKGROUP", password, "TESTCLIENT");
        self.session_setup_with(server, creds, None)
    }

    /// An anonymous (null) logon; the client then holds the keys Windows and Samba derive
    /// for it, from a session key of 16 zero bytes.
    pub fn anonymous_setup(&mut self, server: &mut Server) -> Setup {
        self.session_setup_with(server, Credentials::anonymous(), Some([0; 16]))
    }

    /// [`Self::session_setup`] with any credentials; `key` replaces the session key NTLM gives.
    pub fn session_setup_with(
        &mut self,
        server: &mut Server,
        creds: Credentials,
        key: Option<[u8; 16]>,
    ) -> Setup {
        let neg = self.negotiated.clone().expect("negotiate first");
        let reauth = self.session_id != 0 && self.signer.is_some();
        let mut init = Initiator::new(creds, &mut self.rng, NOW);
        let mut preauth = self.conn_preauth.clone();
        let mut actions = Vec::new();

        let t1 = init.first_token();
        let m1 = self.setup_message(&t1, reauth);
        preauth.update(&m1);
        let (frames, a) = server.exchange_engine_only(&frame(&m1)).unwrap();
        actions.extend(a);
        assert_eq!(frames.len(), 1);
        let r1 = self.receive(&frames[0]).one().clone();
        if r1.status() != NtStatus::MORE_PROCESSING_REQUIRED {
            return Setup {
                status: r1.status(),
                last: r1,
                actions,
                session_flags: 0,
            };
        }
        preauth.update(&r1.bytes);
        self.session_id = r1.header.session_id;
        assert_ne!(self.session_id, 0);
        let challenge = SessionSetupResponse::decode(&r1.bytes).unwrap();
        let (t3, session_key) = init.step(challenge.security_buffer).unwrap();

        let m2 = self.setup_message(&t3, reauth);
        preauth.update(&m2);
        let (frames, a) = server.exchange_engine_only(&frame(&m2)).unwrap();
        actions.extend(a);
        assert_eq!(frames.len(), 1);
        let r2 = self.receive(&frames[0]).one().clone();
        if r2.status() != NtStatus::SUCCESS {
            return Setup {
                status: r2.status(),
                last: r2,
                actions,
                session_flags: 0,
            };
        }
        let done = SessionSetupResponse::decode(&r2.bytes).unwrap();
        init.finish(done.security_buffer).unwrap();
        if reauth {
            return Setup {
                status: r2.status(),
                session_flags: done.session_flags,
                last: r2,
                actions,
            };
        }
        let session_key = key.map_or_else(|| session_key.to_vec(), |k| k.to_vec());
        let keys = derive_keys(
            neg.dialect.0,
            Role::Client,
            &session_key[..],
            (neg.dialect == Dialect::SMB3_1_1).then_some(preauth.value()),
            neg.cipher,
        )
        .unwrap();
        self.signer = Some(Signer::new(neg.signing, keys.signing_key()).unwrap());
        self.encryptor = keys.encryptor();
        self.decryptor = keys.decryptor();
        Setup {
            status: r2.status(),
            session_flags: done.session_flags,
            last: r2,
            actions,
        }
    }

    /// Negotiate and log in as the valid user, asserting success.
    pub fn connect(&mut self, server: &mut Server) -> Setup {
        self.negotiate(server);
        let s = self.session_setup(server, USER, PASSWORD);
        assert_eq!(s.status, NtStatus::SUCCESS);
        s
    }

    // ---- Simple requests -------------------------------------------------------------

    /// An ECHO request on the current session, optionally signed.
    pub fn echo(&mut self, signed: bool) -> Vec<u8> {
        let h = self.header(Command::ECHO, 1);
        let mut m = Self::message(&h, &[4, 0, 0, 0]);
        if signed {
            self.sign(&mut m);
        }
        m
    }
}

/// A server and a 3.1.1 client logged on with `cipher` and AES-GMAC signing, the client's
/// requests addressed to tree `tree_id`.
pub fn logged_in_with(cipher: Cipher, tree_id: u32) -> (Server, Client) {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[cipher], &[SigningAlgorithm::AesGmac]));
    client.connect(&mut server);
    client.tree_id = tree_id;
    (server, client)
}

/// The single frame an exchange must produce.
pub fn single(frames: Vec<Vec<u8>>) -> Vec<u8> {
    assert_eq!(
        frames.len(),
        1,
        "expected exactly one frame, got {}",
        frames.len()
    );
    frames.into_iter().next().unwrap()
}

/// A handler that fails the test: for exchanges the engine must answer alone.
pub fn no_handler(r: &Request) -> Response {
    panic!("request {:?} unexpectedly passed up", r.header.command)
}
