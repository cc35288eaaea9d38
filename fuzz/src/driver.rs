//! Drives one `smbq_proto::engine::ServerConnection` the way the server does, deterministically
//! (fixed clock, seeded RNG, counting session ids), checking every frame it sends.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use rand::SeedableRng;
use rand::rngs::StdRng;
use smbq_auth::{Credentials, Initiator, nt_hash};
use smbq_proto::engine::{Action, Env, INTERIM_AFTER, ServerConnection, StreamId, Transport};
use smbq_proto::framing::Deframer;
use smbq_proto::{EngineConfig, Limits, Response, SessionTable, Violation};
use smbq_wire::session_setup::SessionSetupResponse;
use smbq_wire::transform::TransformHeader;
use smbq_wire::{Command, FileId, HEADER_LEN, Header, NtStatus};

use crate::smb2;

/// A fixed FILETIME (2022-06-20), so runs are reproducible.
pub const NOW: u64 = 133_000_000_000_000_000;
pub const USER: &str = "alice";
pub const PASSWORD: &str = "fuzz-password";
/// The first session id the engine hands out; later ones count up from it.
pub const FIRST_SESSION_ID: u64 = 0x1001;
/// Message ids the prefixes use: NEGOTIATE is 0, the two SESSION_SETUP legs 1 and 2.
pub const MID_AFTER_NEGOTIATE: u64 = 1;
pub const MID_AFTER_SESSION: u64 = 3;

fn accounts(user: &str) -> Option<[u8; 16]> {
    user.eq_ignore_ascii_case(USER).then(|| nt_hash(PASSWORD))
}

/// One frame the engine sent, segments joined, framing checked and removed.
pub struct Sent {
    pub msg: Vec<u8>,
}

impl Sent {
    /// The header of the first message (panics if the frame is encrypted).
    pub fn header(&self) -> Header {
        Header::decode(&self.msg).expect("checked in check_frame")
    }
}

pub struct Driver {
    pub conn: ServerConnection,
    deframer: Deframer,
    /// Simulated monotonic time: moves only when the driver makes a request outlive the
    /// interim deadline.
    clock: Instant,
    rng: StdRng,
    next_session_id: Cell<u64>,
}

impl Default for Driver {
    fn default() -> Self {
        Self::new()
    }
}

impl Driver {
    pub fn new() -> Self {
        let cfg = EngineConfig::new(Limits::default(), *b"smbq-fuzz-server", "FUZZSRV");
        Self {
            conn: ServerConnection::new(
                Arc::new(cfg),
                SessionTable::new(),
                1,
                "127.0.0.1:445".into(),
                Transport::Tcp,
            ),
            deframer: Deframer::new(),
            clock: Instant::now(),
            rng: StdRng::seed_from_u64(0x5eed),
            next_session_id: Cell::new(FIRST_SESSION_ID),
        }
    }

    /// Pushes stream bytes and processes every complete frame, as the connection's reader task
    /// and loop do. Stops at the first violation (the server would disconnect). Returns what
    /// was sent.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Sent>, Violation> {
        self.deframer.push(bytes);
        let mut sent = Vec::new();
        while let Some(frame) = self.deframer.next_frame(self.conn.frame_limit())? {
            self.on_frame(frame, &mut sent)?;
        }
        Ok(sent)
    }

    fn on_frame(&mut self, frame: Bytes, sent: &mut Vec<Sent>) -> Result<(), Violation> {
        let next_id = &self.next_session_id;
        let new_session_id = || {
            let id = next_id.get();
            next_id.set(id + 1);
            id
        };
        let mut env = Env {
            accounts: &accounts,
            now: NOW,
            at: self.clock,
            rng: &mut self.rng,
            new_session_id: &new_session_id,
        };
        self.conn.handle_frame(StreamId::CONTROL, frame, &mut env)?;
        // Run every request the engine hands up, as a server would; a CHANGE_NOTIFY first
        // outlives the interim deadline, to exercise the async path.
        while let Some(action) = self.conn.poll_action() {
            if let Action::Execute(x) = action {
                let command = x.request.header.command;
                if command == Command::CHANGE_NOTIFY {
                    self.clock += INTERIM_AFTER;
                    self.conn.handle_timeout(self.clock);
                }
                self.conn.complete(
                    x.request.header.message_id,
                    canned_response(command),
                    self.clock,
                );
            }
        }
        while let Some(t) = self.conn.poll_transmit() {
            sent.push(check_frame(&t.frame));
        }
        Ok(())
    }

    /// Sends the NEGOTIATE of [`smb2::negotiate`]; the engine must accept it.
    pub fn negotiate(&mut self) {
        let sent = self
            .feed(&smb2::frame(&smb2::negotiate(0)))
            .expect("engine refused a valid SMB 3.1.1 NEGOTIATE");
        let [resp] = &sent[..] else {
            panic!("NEGOTIATE: expected one response frame")
        };
        assert_eq!(resp.header().status, NtStatus::SUCCESS, "NEGOTIATE failed");
    }

    /// Authenticates [`USER`] with NTLMv2 in SPNEGO over two SESSION_SETUP legs (message ids
    /// 1 and 2), as a Windows client does. Returns the session id.
    pub fn authenticate(&mut self) -> u64 {
        let creds = Credentials::with_password(USER, "", PASSWORD, "FUZZWS");
        let mut init = Initiator::with_randomness(creds, [7; 8], [9; 16], NOW);
        let leg1 = self
            .feed(&smb2::frame(&smb2::session_setup(
                1,
                0,
                &init.first_token(),
            )))
            .expect("engine refused SESSION_SETUP leg 1");
        let [resp] = &leg1[..] else {
            panic!("SESSION_SETUP 1: expected one response frame")
        };
        let hdr = resp.header();
        assert_eq!(
            hdr.status,
            NtStatus::MORE_PROCESSING_REQUIRED,
            "SESSION_SETUP 1"
        );
        let session_id = hdr.session_id;
        let body = SessionSetupResponse::decode(&resp.msg).expect("SESSION_SETUP 1 response");
        let (token, _key) = init
            .step(body.security_buffer)
            .expect("server CHALLENGE rejected");
        let leg2 = self
            .feed(&smb2::frame(&smb2::session_setup(2, session_id, &token)))
            .expect("engine refused SESSION_SETUP leg 2");
        let [resp] = &leg2[..] else {
            panic!("SESSION_SETUP 2: expected one response frame")
        };
        assert_eq!(
            resp.header().status,
            NtStatus::SUCCESS,
            "valid NTLMv2 logon failed"
        );
        session_id
    }
}

/// What the (absent) server answers: READ gets data as a separate segment, CREATE a file id,
/// everything else an error status.
fn canned_response(cmd: Command) -> Response {
    match cmd {
        Command::READ => Response {
            status: NtStatus::SUCCESS,
            // MS-SMB2 2.2.20: StructureSize 17, DataOffset 0x50, DataLength 5.
            body: vec![17, 0, 0x50, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            data: Some(Bytes::from_static(b"hello")),
            ..Default::default()
        },
        Command::CREATE => Response {
            status: NtStatus::SUCCESS,
            body: vec![0; 89],
            file_id: Some(FileId {
                persistent: 1,
                volatile: 2,
            }),
            ..Default::default()
        },
        _ => Response::error(NtStatus::NOT_SUPPORTED),
    }
}

/// Checks one outgoing frame: the 4-byte framing length matches, and it holds either a
/// compound of well-formed SMB2 *responses* whose NextCommand offsets stay inside the frame,
/// or a TRANSFORM_HEADER whose OriginalMessageSize is the rest of the frame.
pub fn check_frame(segs: &[Bytes]) -> Sent {
    let f: Vec<u8> = segs.concat();
    let (hdr, body) = f
        .split_at_checked(4)
        .expect("frame shorter than its length header");
    assert_eq!(hdr[0], 0, "frame header must start with 0x00");
    let len = u32::from_be_bytes([0, hdr[1], hdr[2], hdr[3]]) as usize;
    assert_eq!(
        len,
        body.len(),
        "frame length header disagrees with the frame"
    );
    match body.get(..4) {
        Some([0xFE, b'S', b'M', b'B']) => {
            let mut at = 0usize;
            loop {
                let m = &body[at..];
                let h = Header::decode(m).expect("engine sent an undecodable SMB2 header");
                assert!(
                    h.is_response(),
                    "engine sent a message without SERVER_TO_REDIR"
                );
                let next = h.next_command as usize;
                if next == 0 {
                    break;
                }
                assert!(
                    next >= HEADER_LEN && next.is_multiple_of(8),
                    "bad NextCommand {next}"
                );
                assert!(next < m.len(), "NextCommand {next} past the frame");
                at += next;
            }
        }
        Some([0xFD, b'S', b'M', b'B']) => {
            let th = TransformHeader::decode(body).expect("engine sent a bad transform header");
            assert_eq!(th.original_message_size as usize, body.len() - 52);
            assert_eq!(th.flags, 1);
        }
        other => panic!("engine sent a frame with protocol id {other:02x?}"),
    }
    Sent { msg: body.to_vec() }
}
