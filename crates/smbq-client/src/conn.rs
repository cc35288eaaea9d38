//! One SMB connection: a reader task that deframes, opens and routes responses to waiting
//! requests; a writer task that batches frames; credits as a semaphore so requests wait for
//! the window instead of overrunning it (MS-SMB2 3.2.4.1.5, 3.2.5.1.4).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

pub(crate) use crate::lanes::Lane;
use crate::lanes::Lanes;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use smbq_compress::Compression;
use smbq_proto::client::{ClientConfig, Incoming, Negotiated, SessionCrypto, split_compound};
use smbq_proto::framing::{Deframer, frame_header};
use smbq_transport::{ChunkRead, ChunkWrite, Connection, TransportKind};
use smbq_wire::cancel::CancelRequest;
use smbq_wire::oplock_break::{
    LeaseBreakAck, OplockBreak, OplockBreakFromServer, lease_break_flags,
};
use smbq_wire::transform::{COMPRESSION_PROTOCOL_ID, TRANSFORM_HEADER_LEN, TransformHeader};
use smbq_wire::{Command, Header, NtStatus, Writer};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::{Error, ProtocolError};

/// Message id the server uses for oplock/lease break notifications (MS-SMB2 3.3.4.6).
const UNSOLICITED: u64 = u64::MAX;

/// Break acknowledgments waiting to be sent; more are dropped (a server breaking one open
/// this often is misbehaving, and its break completes at its timeout anyway).
const MAX_QUEUED_ACKS: usize = 64;

struct Pending {
    /// None once the caller gave up (the response still returns its credits).
    tx: Option<oneshot::Sender<Result<Incoming, Error>>>,
    /// Set by an interim STATUS_PENDING response (MS-SMB2 3.2.5.1.5).
    async_id: Option<u64>,
    /// The command: SESSION_SETUP responses are verified by the setup itself.
    command: Command,
}

struct State {
    next_mid: u64,
    pending: HashMap<u64, Pending>,
    sessions: HashMap<u64, Arc<SessionCrypto>>,
    dead: Option<String>,
}

pub(crate) struct Shared {
    /// This connection itself, for the tasks of streams opened later.
    me: Weak<Shared>,
    pub(crate) config: ClientConfig,
    pub(crate) kind: TransportKind,
    state: Mutex<State>,
    credits: Semaphore,
    tx: mpsc::UnboundedSender<Vec<Bytes>>,
    negotiated: Mutex<Option<Negotiated>>,
    pub(crate) server_name: Mutex<String>,
    /// Woken when the reader task has ended (the connection is gone).
    ended: tokio::sync::Notify,
    /// Opens holding an oplock or a lease, by FileId.Persistent: where their break
    /// acknowledgments go. One entry per open the caller holds.
    breaks: Mutex<HashMap<u64, BreakTarget>>,
    /// The leases this connection's opens hold, by LeaseKey (crate::lease).
    leases: Mutex<HashMap<[u8; 16], LeaseWatch>>,
    /// Frames sent on this connection, for callers counting round trips.
    frames_sent: AtomicU64,
    /// Acknowledgments to send, taken by the task `start` spawns (the reader must not wait).
    /// Bounded: a server flooding breaks gets the excess dropped, not our memory.
    acks: mpsc::Sender<(BreakTarget, Vec<u8>)>,
    /// The data streams of smbq's multi-stream extension (docs/multistream.md). An async
    /// lock: a stream is opened under it the first time a request needs it.
    lanes: tokio::sync::Mutex<Lanes>,
    /// How fast the writers get bytes out, and whether compressing pays against it.
    link: Mutex<smbq_compress::LinkRate>,
    pace: Mutex<smbq_compress::Pace>,
    /// The QUIC stack's path figures (congestion window, RTT), where it has them.
    path: Option<Arc<dyn smbq_transport::PathStats>>,
}

/// How long opening a data stream may wait for the server's grant (it comes with the first
/// session, docs/multistream.md 4.2) before the client gives up on data streams.
const OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Requests that travel on the control stream only (docs/multistream.md 5.1).
fn control_only(command: Command) -> bool {
    smbq_wire::multi_stream::CONTROL_ONLY.contains(&command)
}

/// A lease held through open `persistent`: its breaks are acknowledged on that open's
/// target, and `holder` (a cache) hears of them first.
pub(crate) struct LeaseWatch {
    /// 0 until the CREATE's answer names the open.
    pub(crate) persistent: u64,
    pub(crate) target: BreakTarget,
    pub(crate) holder: Option<Weak<dyn LeaseHolder>>,
}

/// What is cached under a lease: told the state the server broke the lease to, before the
/// acknowledgment goes (MS-SMB2 3.2.5.19.2: the client gives up what it may no longer keep).
pub(crate) trait LeaseHolder: Send + Sync {
    fn broken(&self, new_state: u32);
}

/// The session and tree an oplock holder's acknowledgment is sent on.
#[derive(Clone)]
pub(crate) struct BreakTarget {
    pub(crate) session_id: u64,
    pub(crate) tree_id: u32,
    pub(crate) protect: Protect,
}

/// How a request is protected.
#[derive(Clone, Default)]
pub(crate) struct Protect {
    pub(crate) session: Option<Arc<SessionCrypto>>,
    pub(crate) sign: bool,
    pub(crate) encrypt: bool,
}

/// A request ready to go: the header fields the caller chose, the body, and optional bulk
/// payload (WRITE data) appended after the body.
#[derive(Clone)]
pub(crate) struct Outgoing {
    pub(crate) command: Command,
    pub(crate) session_id: u64,
    pub(crate) tree_id: u32,
    pub(crate) body: Vec<u8>,
    pub(crate) payload: Option<Bytes>,
    /// Bytes the request moves, which sets the credit charge (MS-SMB2 3.2.4.1.5).
    pub(crate) io_size: usize,
    /// Sent again after a broken connection, not answered the first time: flagged
    /// SMB2_FLAGS_REPLAY_OPERATION (MS-SMB2 2.2.1, 3.x only).
    pub(crate) replay: bool,
    /// The stream it goes on when the connection has data streams.
    pub(crate) lane: Lane,
}

/// Removes the pending entries and cancels the requests when the caller's future is dropped
/// before the answers came (MS-SMB2 3.2.4.24).
struct Waiter<'a> {
    shared: &'a Shared,
    mids: Vec<u64>,
    protect: Protect,
    done: bool,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for &mid in &self.mids {
            let async_id = {
                let mut st = self.shared.state.lock();
                match st.pending.get_mut(&mid) {
                    Some(p) => {
                        p.tx = None;
                        p.async_id
                    }
                    None => continue,
                }
            };
            self.shared.send_cancel(mid, async_id, &self.protect);
        }
    }
}

/// One message of a request frame: its command and credit charge. The message ids are
/// consecutive, each taking as many as its charge (MS-SMB2 3.2.4.1.3).
#[derive(Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) command: Command,
    pub(crate) charge: u16,
}

impl Shared {
    pub(crate) fn start(conn: Connection, mut config: ClientConfig) -> Arc<Self> {
        // Offered only where the transport can open the streams (docs/multistream.md 3.1).
        if conn.opener.is_none() {
            config.data_streams = 0;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (acks, ack_rx) = mpsc::channel(MAX_QUEUED_ACKS);
        let shared = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            config,
            kind: conn.kind,
            state: Mutex::new(State {
                next_mid: 0,
                pending: HashMap::new(),
                sessions: HashMap::new(),
                dead: None,
            }),
            credits: Semaphore::new(1),
            tx,
            negotiated: Mutex::new(None),
            server_name: Mutex::new(conn.peer.ip().to_string()),
            ended: tokio::sync::Notify::new(),
            breaks: Mutex::new(HashMap::new()),
            leases: Mutex::new(HashMap::new()),
            frames_sent: AtomicU64::new(0),
            acks,
            lanes: tokio::sync::Mutex::new(Lanes::new(conn.opener)),
            link: Mutex::new(smbq_compress::LinkRate::default()),
            pace: Mutex::new(smbq_compress::Pace::default()),
            path: conn.path,
        });
        tokio::spawn(ack_task(ack_rx, Arc::downgrade(&shared)));
        tokio::spawn(writer_task(conn.writer, rx, Arc::downgrade(&shared), true));
        tokio::spawn(reader_task(conn.reader, Arc::downgrade(&shared), true));
        shared
    }

    /// How many data streams are open (docs/multistream.md); they open as requests need them.
    pub(crate) async fn data_streams(&self) -> usize {
        self.lanes.lock().await.writers.iter().flatten().count()
    }

    /// The writer a request goes to (docs/multistream.md 10): control-only requests and
    /// connections without data streams use the control stream; others the stream
    /// [`Lanes::choose`] gives. A stream is opened the first time a request needs it; only
    /// after the first session is valid does the server grant them (4.2), and requests sent
    /// before that use the control stream. `bulk`: the request moves more than 64 KiB.
    async fn writer_for(
        &self,
        lane: Lane,
        command: Command,
        bulk: bool,
    ) -> mpsc::UnboundedSender<Vec<Bytes>> {
        let granted = self
            .negotiated
            .lock()
            .as_ref()
            .map_or(0, |n| usize::from(n.data_streams));
        let has_session = !self.state.lock().sessions.is_empty();
        if granted == 0 || !has_session || lane == Lane::Control || control_only(command) {
            return self.tx.clone();
        }
        let mut lanes = self.lanes.lock().await;
        if lanes.off {
            return self.tx.clone();
        }
        let Some(i) = lanes.choose(lane, command, bulk, granted, Instant::now()) else {
            return self.tx.clone();
        };
        if let Some(Some(tx)) = lanes.writers.get(i) {
            return tx.clone();
        }
        let Some(opener) = lanes.opener.clone() else {
            return self.tx.clone();
        };
        let stream = match tokio::time::timeout(OPEN_TIMEOUT, opener.open()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "data stream not opened; using the control stream");
                lanes.off = true;
                return self.tx.clone();
            }
            Err(_) => {
                tracing::warn!(
                    "the server granted no data stream in time; using the control stream"
                );
                lanes.off = true;
                return self.tx.clone();
            }
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(writer_task(stream.writer, rx, self.me.clone(), false));
        tokio::spawn(reader_task(stream.reader, self.me.clone(), false));
        if let Some(slot) = lanes.writers.get_mut(i) {
            *slot = Some(tx.clone());
        }
        tx
    }

    pub(crate) fn set_negotiated(&self, n: Negotiated) {
        *self.negotiated.lock() = Some(n);
    }

    pub(crate) fn add_session(&self, crypto: Arc<SessionCrypto>) {
        self.state.lock().sessions.insert(crypto.session_id, crypto);
    }

    /// Open `persistent` holds an oplock: its breaks are acknowledged on `target`.
    pub(crate) fn watch_breaks(&self, persistent: u64, target: BreakTarget) {
        self.breaks.lock().insert(persistent, target);
    }

    /// Open `persistent` holds lease `key`: its breaks go to `holder` and are acknowledged
    /// on the open's target (set by [`Self::watch_breaks`] too).
    pub(crate) fn watch_lease(
        &self,
        key: [u8; 16],
        persistent: u64,
        target: BreakTarget,
        holder: Option<Weak<dyn LeaseHolder>>,
    ) {
        self.leases.lock().insert(
            key,
            LeaseWatch {
                persistent,
                target,
                holder,
            },
        );
    }

    /// The lease `key`, watched before its CREATE went, is held through open `persistent`.
    pub(crate) fn lease_open_is(&self, key: &[u8; 16], persistent: u64) {
        if let Some(w) = self.leases.lock().get_mut(key) {
            w.persistent = persistent;
        }
    }

    pub(crate) fn unwatch_lease(&self, key: &[u8; 16]) {
        self.leases.lock().remove(key);
    }

    pub(crate) fn unwatch_breaks(&self, persistent: u64) {
        self.breaks.lock().remove(&persistent);
        self.leases.lock().retain(|_, w| w.persistent != persistent);
    }

    /// How many frames this connection has sent.
    pub(crate) fn frames_sent(&self) -> u64 {
        self.frames_sent.load(Ordering::Relaxed)
    }

    /// An oplock or lease break notification (MS-SMB2 2.2.23.1, 2.2.23.2). Oplock breaks are
    /// acknowledged at once with the level the server broke to (3.2.5.19.1): this client
    /// caches nothing under an oplock. A lease break first drops what its cache may no
    /// longer keep, then is acknowledged with the new state when the server asks
    /// (3.2.5.19.2); this client never caches writes, so there is nothing to flush. Breaks for
    /// opens we do not know are dropped.
    fn on_break(&self, m: &Incoming) {
        let (target, body) = match OplockBreakFromServer::decode(&m.msg) {
            Ok(OplockBreakFromServer::Oplock(n)) => {
                let Some(target) = self.breaks.lock().get(&n.file_id.persistent).cloned() else {
                    return;
                };
                let mut w = Writer::new();
                OplockBreak {
                    oplock_level: n.oplock_level,
                    file_id: n.file_id,
                }
                .encode(&mut w);
                (target, w.into_vec())
            }
            Ok(OplockBreakFromServer::LeaseNotification(n)) => {
                let (target, holder) = {
                    let leases = self.leases.lock();
                    let Some(w) = leases.get(&n.lease_key) else {
                        return;
                    };
                    (w.target.clone(), w.holder.as_ref().and_then(Weak::upgrade))
                };
                if let Some(h) = holder {
                    h.broken(n.new_lease_state);
                }
                if n.flags & lease_break_flags::ACK_REQUIRED == 0 {
                    return;
                }
                let mut w = Writer::new();
                LeaseBreakAck {
                    lease_key: n.lease_key,
                    lease_state: n.new_lease_state,
                    ..Default::default()
                }
                .encode(&mut w);
                (target, w.into_vec())
            }
            _ => return,
        };
        if self.acks.try_send((target, body)).is_err() {
            tracing::debug!("break acknowledgment dropped: too many queued");
        }
    }

    pub(crate) fn remove_session(&self, id: u64) {
        self.state.lock().sessions.remove(&id);
    }

    pub(crate) fn is_dead(&self) -> Option<String> {
        self.state.lock().dead.clone()
    }

    pub(crate) fn charge(&self, io_size: usize) -> u16 {
        let large = self
            .negotiated
            .lock()
            .as_ref()
            .is_some_and(Negotiated::large_mtu);
        if !large {
            return 1;
        }
        u16::try_from(io_size.div_ceil(65536).max(1)).unwrap_or(u16::MAX)
    }

    /// Sends an SMB1 NEGOTIATE as message 0 and waits for the SMB2 answer (MS-SMB2 3.2.4.2.1).
    pub(crate) async fn call_smb1(&self, msg: Vec<u8>) -> Result<Incoming, Error> {
        let permit = self
            .credits
            .acquire_many(1)
            .await
            .map_err(|_| Error::Disconnected("connection closed".into()))?;
        permit.forget();
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock();
            if let Some(d) = &st.dead {
                return Err(Error::Disconnected(d.clone()));
            }
            let mid = st.next_mid;
            st.next_mid += 1;
            st.pending.insert(
                mid,
                Pending {
                    tx: Some(tx),
                    async_id: None,
                    command: Command::NEGOTIATE,
                },
            );
        }
        self.send_frame(vec![
            Bytes::copy_from_slice(&frame_header(msg.len())),
            Bytes::from(msg),
        ])?;
        rx.await
            .map_err(|_| Error::Disconnected(self.is_dead().unwrap_or_default()))?
    }

    /// Sends one request and waits for its final response (interim responses are absorbed).
    pub(crate) async fn call(&self, out: Outgoing, protect: Protect) -> Result<Incoming, Error> {
        let charge = self.charge(out.io_size);
        let Outgoing {
            command,
            session_id,
            tree_id,
            body,
            payload,
            replay,
            lane,
            ..
        } = out;
        let p = protect.clone();
        let mut body = body;
        if command == Command::READ && self.compression_on() {
            smbq_wire::read::request_compressed(&mut body);
        }
        self.call_with(
            Slot { command, charge },
            session_id,
            tree_id,
            protect,
            lane,
            move |s, h| {
                if replay {
                    let mut h = h.clone();
                    h.flags |= smbq_wire::header::flags::REPLAY_OPERATION;
                    s.seal_or_sign(&h, body, payload, &p)
                } else {
                    s.seal_or_sign(h, body, payload, &p)
                }
            },
        )
        .await
    }

    /// Sends a message built from its header, unsigned and unsealed, and returns the final
    /// response: NEGOTIATE and SESSION_SETUP, whose exact bytes feed the preauth hash.
    pub(crate) async fn call_recorded(
        &self,
        command: Command,
        session_id: u64,
        build: impl FnOnce(&Header) -> Result<Vec<u8>, Error>,
    ) -> Result<Incoming, Error> {
        self.call_with(
            Slot { command, charge: 1 },
            session_id,
            0,
            Protect::default(),
            Lane::Control,
            move |_, h| {
                let m = build(h)?;
                Ok(vec![
                    Bytes::copy_from_slice(&frame_header(m.len())),
                    Bytes::from(m),
                ])
            },
        )
        .await
    }

    async fn call_with(
        &self,
        slot: Slot,
        session_id: u64,
        tree_id: u32,
        protect: Protect,
        lane: Lane,
        build: impl FnOnce(&Self, &Header) -> Result<Vec<Bytes>, Error>,
    ) -> Result<Incoming, Error> {
        let mut answers = self
            .call_many(
                &[slot],
                session_id,
                tree_id,
                protect,
                lane,
                move |s, headers| match headers.first() {
                    Some(h) => build(s, h),
                    None => Err(ProtocolError::Missing("no header").into()),
                },
            )
            .await?;
        answers
            .pop()
            .unwrap_or_else(|| Err(ProtocolError::Missing("no response").into()))
    }

    /// Sends one frame of `slots.len()` messages (one request, or a compound that `build`
    /// lays out from the headers) and waits for every final response, in order. The whole
    /// charge is taken from the window at once, so a compound never waits half-sent.
    // Long: credit charge, send and the wait for every slot share one set of cleanup paths.
    pub(crate) async fn call_many(
        &self,
        slots: &[Slot],
        session_id: u64,
        tree_id: u32,
        protect: Protect,
        lane: Lane,
        build: impl FnOnce(&Self, &[Header]) -> Result<Vec<Bytes>, Error>,
    ) -> Result<Vec<Result<Incoming, Error>>, Error> {
        let total: u32 = slots.iter().map(|s| u32::from(s.charge)).sum();
        let permit = self
            .credits
            .acquire_many(total)
            .await
            .map_err(|_| Error::Disconnected(self.is_dead().unwrap_or_default()))?;
        permit.forget();
        let mut receivers = Vec::with_capacity(slots.len());
        let mut mids = Vec::with_capacity(slots.len());
        {
            let mut st = self.state.lock();
            if let Some(d) = &st.dead {
                return Err(Error::Disconnected(d.clone()));
            }
            for slot in slots {
                let (tx, rx) = oneshot::channel();
                let mid = st.next_mid;
                st.next_mid += u64::from(slot.charge);
                st.pending.insert(
                    mid,
                    Pending {
                        tx: Some(tx),
                        async_id: None,
                        command: slot.command,
                    },
                );
                receivers.push(rx);
                mids.push(mid);
            }
        }
        let mut waiter = Waiter {
            shared: self,
            mids: mids.clone(),
            protect,
            done: false,
        };
        let dialect_202 = self
            .negotiated
            .lock()
            .as_ref()
            .is_some_and(|n| !n.large_mtu());
        let headers: Vec<Header> = slots
            .iter()
            .zip(&mids)
            .map(|(slot, &mid)| Header {
                // 2.0.2 has no CreditCharge field (MS-SMB2 2.2.1.2).
                credit_charge: if dialect_202 { 0 } else { slot.charge },
                command: slot.command,
                credits: self.config.credit_request,
                message_id: mid,
                session_id,
                tree_id,
                ..Default::default()
            })
            .collect();
        let first = slots.first().map_or(Command::ECHO, |s| s.command);
        let bulk = slots.iter().any(|s| s.charge > 1);
        match build(self, &headers) {
            Ok(segs) => self.send_frame_on(self.writer_for(lane, first, bulk).await, segs)?,
            Err(e) => {
                waiter.done = true;
                let mut st = self.state.lock();
                for mid in &mids {
                    st.pending.remove(mid);
                }
                return Err(e);
            }
        }
        let mut answers = Vec::with_capacity(receivers.len());
        for rx in receivers {
            let r = rx.await;
            answers.push(
                r.map_err(|_| Error::Disconnected(self.is_dead().unwrap_or_default()))
                    .and_then(|r| r),
            );
        }
        waiter.done = true;
        Ok(answers)
    }

    /// Builds the frame: header + body (+ payload), signed or sealed as the session requires.
    fn seal_or_sign(
        &self,
        header: &Header,
        body: Vec<u8>,
        payload: Option<Bytes>,
        protect: &Protect,
    ) -> Result<Vec<Bytes>, Error> {
        let payload_len = payload.as_ref().map_or(0, Bytes::len);
        let session = protect.session.as_ref();
        // MS-SMB2 3.2.4.1.9: bulk data (a WRITE's) is compressed when the connection
        // negotiated it and it pays: after signing, before sealing (3.1.4.4).
        let compression = payload
            .as_ref()
            .filter(|p| p.len() >= self.config.compress_min_size)
            .and_then(|_| self.compression());
        let head = |header: &Header, body: &[u8]| {
            let mut w = Writer::with_capacity(64 + body.len());
            header.encode(&mut w);
            w.bytes(body);
            w.into_vec()
        };
        if protect.encrypt {
            let s = session.ok_or(Error::Integrity("encryption without a session"))?;
            if let Some(c) = compression
                .as_ref()
                .zip(payload.as_ref())
                .and_then(|(c, p)| self.try_compress(c, &head(header, &body), p))
            {
                let mut frame = Vec::with_capacity(TRANSFORM_HEADER_LEN + c.message.len());
                frame.resize(TRANSFORM_HEADER_LEN, 0);
                frame.extend_from_slice(&c.message);
                let sealed = s.seal_reserved(frame)?;
                return Ok(vec![
                    Bytes::copy_from_slice(&frame_header(sealed.len())),
                    Bytes::from(sealed),
                ]);
            }
            // Built behind room for the transform header and sealed where it lies: the
            // payload is copied once, into the frame.
            let mut w = Writer::with_capacity(TRANSFORM_HEADER_LEN + 64 + body.len() + payload_len);
            w.zeros(TRANSFORM_HEADER_LEN);
            header.encode(&mut w);
            w.bytes(&body);
            if let Some(p) = &payload {
                w.bytes(p);
            }
            let sealed = s.seal_reserved(w.into_vec())?;
            return Ok(vec![
                Bytes::copy_from_slice(&frame_header(sealed.len())),
                Bytes::from(sealed),
            ]);
        }
        let mut w =
            Writer::with_capacity(64 + body.len() + if protect.sign { payload_len } else { 0 });
        header.encode(&mut w);
        w.bytes(&body);
        if protect.sign {
            let s = session.ok_or(Error::Integrity("signing without a session"))?;
            if let Some(p) = &payload {
                w.bytes(p);
            }
            let mut m = w.into_vec();
            s.sign(&mut m)?;
            if let Some(c) = compression.as_ref().and_then(|c| {
                let (prefix, data) = m.split_at_checked(64 + body.len())?;
                self.try_compress(c, prefix, data)
            }) {
                m = c.message;
            }
            return Ok(vec![
                Bytes::copy_from_slice(&frame_header(m.len())),
                Bytes::from(m),
            ]);
        }
        let m = w.into_vec();
        if let Some(c) = compression
            .as_ref()
            .zip(payload.as_ref())
            .and_then(|(c, p)| self.try_compress(c, &m, p))
        {
            return Ok(vec![
                Bytes::copy_from_slice(&frame_header(c.message.len())),
                Bytes::from(c.message),
            ]);
        }
        let total = m.len() + payload_len;
        let mut segs = vec![Bytes::copy_from_slice(&frame_header(total)), Bytes::from(m)];
        // Unsigned, unsealed bulk data goes out as the caller's buffer, uncopied.
        if let Some(p) = payload {
            segs.push(p);
        }
        Ok(segs)
    }

    /// Compresses when this end compresses faster than the link drains
    /// (smbq_compress::pace), measuring how fast it does. The pace's tries on a sample (one
    /// 64 KiB compression per algorithm on the first large message, and a probe now and
    /// then: up to a few milliseconds) run under its lock, so a concurrent WRITE on this
    /// connection waits for them; the message itself is compressed outside it.
    fn try_compress(
        &self,
        c: &Compression,
        prefix: &[u8],
        data: &[u8],
    ) -> Option<smbq_compress::Compressed> {
        let a = {
            let mut pace = self.pace.lock();
            // Over QUIC a write's time measures quinn's buffer, not the link: there the
            // congestion window over the RTT (unknown without the stack's figures).
            let link = match (self.kind, &self.path) {
                (TransportKind::Tcp, _) => self.link.lock().get(),
                (_, Some(p)) => {
                    let s = p.sample();
                    smbq_compress::pace::window_rate(s.cwnd_bytes, s.rtt)
                }
                (_, None) => None,
            };
            pace.set_link_rate(link);
            pace.pick(c, self.config.compress_adaptive, data)?
        };
        let started = Instant::now();
        let out = c.compress_with(a, prefix, data);
        let took = started.elapsed();
        self.pace
            .lock()
            .record(a, prefix.len(), data.len(), out.as_ref(), took);
        out
    }

    /// Whether NEGOTIATE settled compression (without copying what it settled: asked on
    /// every READ).
    fn compression_on(&self) -> bool {
        self.negotiated
            .lock()
            .as_ref()
            .is_some_and(|n| n.compression.is_on())
    }

    /// What NEGOTIATE settled for compression, when it is on.
    pub(crate) fn compression(&self) -> Option<Compression> {
        self.negotiated
            .lock()
            .as_ref()
            .map(|n| &n.compression)
            .filter(|c| c.is_on())
            .cloned()
    }

    /// MS-SMB2 3.2.5.1.1.2: a compressed response, decompressed before anything looks at
    /// it; no larger than the largest frame this client accepts.
    fn decompress(&self, msg: &[u8]) -> Result<Bytes, Error> {
        let c = self.compression().unwrap_or_default();
        let plain = c
            .decompress(msg, self.config.max_frame as usize)
            .map_err(ProtocolError::Compression)?;
        Ok(Bytes::from(plain))
    }

    /// Ends the stream (TCP FIN / QUIC stream FIN) after what is queued, and waits until the
    /// server has closed its side too, or `timeout` passes.
    pub(crate) async fn close(&self, timeout: std::time::Duration) {
        let ended = self.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        if self.is_dead().is_some() {
            return;
        }
        // An empty batch tells a writer to shut its stream down.
        for lane in self.lanes.lock().await.writers.drain(..).flatten() {
            let _ = lane.send(Vec::new());
        }
        let _ = self.tx.send(Vec::new());
        let _ = tokio::time::timeout(timeout, ended).await;
    }

    fn send_frame(&self, segs: Vec<Bytes>) -> Result<(), Error> {
        self.send_frame_on(self.tx.clone(), segs)
    }

    fn send_frame_on(
        &self,
        tx: mpsc::UnboundedSender<Vec<Bytes>>,
        segs: Vec<Bytes>,
    ) -> Result<(), Error> {
        self.frames_sent.fetch_add(1, Ordering::Relaxed);
        tx.send(segs).map_err(|_| {
            Error::Disconnected(self.is_dead().unwrap_or_else(|| "writer stopped".into()))
        })
    }

    fn send_cancel(&self, mid: u64, async_id: Option<u64>, protect: &Protect) {
        let header = Header {
            command: Command::CANCEL,
            message_id: if async_id.is_some() { 0 } else { mid },
            async_id,
            session_id: protect.session.as_ref().map_or(0, |s| s.session_id),
            ..Default::default()
        };
        let mut body = Writer::new();
        CancelRequest.encode(&mut body);
        if let Ok(segs) = self.seal_or_sign(&header, body.into_vec(), None, protect) {
            let _ = self.send_frame(segs);
        }
    }

    /// Fails every waiting request and refuses new ones.
    fn die(&self, reason: String) {
        let pending = {
            let mut st = self.state.lock();
            if st.dead.is_none() {
                st.dead = Some(reason.clone());
            }
            std::mem::take(&mut st.pending)
        };
        for (_, p) in pending {
            if let Some(tx) = p.tx {
                let _ = tx.send(Err(Error::Disconnected(reason.clone())));
            }
        }
        self.credits.close();
    }

    /// Takes one frame off the wire: opens a transform, splits the compound, returns credits
    /// and routes each message to its waiter.
    fn on_frame(&self, frame: Bytes) -> Result<(), Error> {
        let frame = if frame.starts_with(&COMPRESSION_PROTOCOL_ID) {
            self.decompress(&frame)?
        } else {
            frame
        };
        let (plain, encrypted) = if frame.get(..4) == Some(&[0xFD, b'S', b'M', b'B'][..]) {
            let th = TransformHeader::decode(&frame)?;
            if th.original_message_size as usize != frame.len().saturating_sub(TRANSFORM_HEADER_LEN)
                || th.flags != 1
            {
                return Err(ProtocolError::Violation("transform header size or flags").into());
            }
            let session = self
                .state
                .lock()
                .sessions
                .get(&th.session_id)
                .cloned()
                .ok_or(ProtocolError::Violation(
                    "encrypted response for an unknown session",
                ))?;
            // In place when the frame owns its buffer alone (the deframer hands large frames
            // out that way): a sealed 8 MiB READ response is not copied once more.
            let mut buf = frame
                .try_into_mut()
                .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
            session.open(&mut buf)?;
            let mut plain = buf.freeze().split_off(TRANSFORM_HEADER_LEN);
            if plain.starts_with(&COMPRESSION_PROTOCOL_ID) {
                plain = self.decompress(&plain)?;
            }
            (plain, true)
        } else {
            let (frame, checked) = self.verify_large_in_place(frame);
            for m in split_compound(frame, false)? {
                self.route(m, checked);
            }
            return Ok(());
        };
        for m in split_compound(plain, encrypted)? {
            self.route(m, None);
        }
        Ok(())
    }

    /// A signed response over 4 KiB alone in its frame (a READ's data), when the frame owns its
    /// buffer: its signature is checked here, in place, instead of later through a copy of the
    /// whole message. Returns the frame and the verdict, if one was reached.
    fn verify_large_in_place(&self, frame: Bytes) -> (Bytes, Option<bool>) {
        smbq_proto::framing::verify_large_in_place(
            frame,
            |sid| {
                let session = self.state.lock().sessions.get(&sid).cloned()?;
                session.can_sign().then_some(session)
            },
            |session, buf| session.verify_in_place(buf),
        )
    }

    /// `checked`: the signature verdict [`Self::verify_large_in_place`] reached, if any.
    fn route(&self, m: Incoming, checked: Option<bool>) {
        let h = &m.header;
        self.credits.add_permits(usize::from(h.credits));
        if h.message_id == UNSOLICITED {
            // Oplock and lease breaks (crate::lease).
            if h.command == Command::OPLOCK_BREAK {
                self.on_break(&m);
            }
            return;
        }
        let mut st = self.state.lock();
        if h.status == NtStatus::PENDING && h.is_async() {
            if let Some(p) = st.pending.get_mut(&h.message_id) {
                p.async_id = h.async_id;
            }
            return;
        }
        let Some(p) = st.pending.remove(&h.message_id) else {
            tracing::debug!(mid = h.message_id, "response to no request");
            return;
        };
        let session = st.sessions.get(&h.session_id).cloned();
        drop(st);
        let Some(tx) = p.tx else { return };
        let result = verify(
            &m,
            p.command,
            session.as_deref(),
            self.config.signing_required,
            checked,
        );
        let _ = tx.send(result.map(|()| m));
    }
}

/// MS-SMB2 3.2.5.1.3: a signed response must verify; a session that signs must get signed
/// responses unless they were encrypted. SESSION_SETUP checks its own final response.
fn verify(
    m: &Incoming,
    command: Command,
    session: Option<&SessionCrypto>,
    required: bool,
    checked: Option<bool>,
) -> Result<(), Error> {
    if m.encrypted || command == Command::SESSION_SETUP || command == Command::NEGOTIATE {
        return Ok(());
    }
    let Some(s) = session.filter(|s| s.can_sign()) else {
        return Ok(());
    };
    if m.header.is_signed() {
        if checked.unwrap_or_else(|| s.verify(&m.msg)) {
            Ok(())
        } else {
            Err(Error::Integrity("response signature does not verify"))
        }
    } else if required && m.header.status != NtStatus::PENDING {
        Err(Error::Integrity("unsigned response on a signed session"))
    } else {
        Ok(())
    }
}

/// Sends one stream's frames in order. On a data stream each batch goes at the priority
/// `DataPriority` gives (docs/multistream.md 9): metadata ahead of WRITE data on the other
/// streams.
async fn writer_task(
    mut writer: Box<dyn ChunkWrite>,
    mut rx: mpsc::UnboundedReceiver<Vec<Bytes>>,
    shared: std::sync::Weak<Shared>,
    control: bool,
) {
    if control {
        writer.set_priority(smbq_transport::PRIORITY_CONTROL);
    }
    let mut priority = smbq_transport::DataPriority::default();
    while let Some(first) = rx.recv().await {
        if first.is_empty() {
            break;
        }
        let mut chunks = first;
        // Batch what is already queued into one vectored write.
        while chunks.len() < 256 {
            match rx.try_recv() {
                Ok(more) if more.is_empty() => {
                    let _ = writer.write_chunks(&mut chunks).await;
                    let _ = writer.shutdown().await;
                    return;
                }
                Ok(more) => chunks.extend(more),
                Err(_) => break,
            }
        }
        if !control
            && let Some(p) = priority.for_batch(chunks.iter().map(Bytes::len).sum(), Instant::now())
        {
            writer.set_priority(p);
        }
        let bytes: usize = chunks.iter().map(Bytes::len).sum();
        let started = Instant::now();
        let r = writer.write_chunks(&mut chunks).await;
        if let Some(s) = shared.upgrade() {
            let mut link = s.link.lock();
            link.wrote(bytes, started.elapsed());
            // A system call: only after the writes the pace measures, and until the link
            // is known (the first requests give the window and the RTT).
            if (bytes >= smbq_compress::pace::MEASURED_MIN || link.get().is_none())
                && let Some(p) = writer.tcp_path()
            {
                link.tcp(
                    p.delivery_rate,
                    p.app_limited,
                    p.cwnd_bytes(),
                    std::time::Duration::from_micros(u64::from(p.rtt_us)),
                );
            }
        }
        if let Err(e) = r {
            if let Some(s) = shared.upgrade() {
                s.die(format!("send failed: {e}"));
            }
            return;
        }
    }
    let _ = writer.shutdown().await;
}

/// Reads one stream's frames. The control stream's end is the connection's; a data stream
/// ends quietly after the server finished it (docs/multistream.md 7.1).
async fn reader_task(
    mut reader: Box<dyn ChunkRead>,
    shared: std::sync::Weak<Shared>,
    control: bool,
) {
    let mut deframer = Deframer::new();
    let reason = loop {
        let chunk = match reader.read_chunk().await {
            Ok(Some(c)) => c,
            Ok(None) if !control => return,
            Ok(None) => break "the server closed the connection".to_string(),
            Err(e) => break format!("receive failed: {e}"),
        };
        let Some(s) = shared.upgrade() else { return };
        deframer.push_bytes(chunk);
        let mut failed = None;
        loop {
            match deframer.next_frame(s.config.max_frame) {
                Ok(Some(frame)) => {
                    if let Err(e) = s.on_frame(frame) {
                        failed = Some(e.to_string());
                        break;
                    }
                }
                Ok(None) => break,
                Err(v) => {
                    failed = Some(format!("bad frame from server: {v}"));
                    break;
                }
            }
        }
        if let Some(f) = failed {
            break f;
        }
    };
    if let Some(s) = shared.upgrade() {
        s.die(reason);
        s.ended.notify_waiters();
    }
}

/// Sends the oplock break acknowledgments `Shared::on_break` queued, one at a time (each
/// response only confirms the level).
async fn ack_task(mut rx: mpsc::Receiver<(BreakTarget, Vec<u8>)>, shared: Weak<Shared>) {
    while let Some((target, body)) = rx.recv().await {
        let Some(s) = shared.upgrade() else {
            return;
        };
        let out = Outgoing {
            command: Command::OPLOCK_BREAK,
            session_id: target.session_id,
            tree_id: target.tree_id,
            body,
            payload: None,
            io_size: 0,
            replay: false,
            lane: Lane::Control,
        };
        if let Err(e) = s.call(out, target.protect).await {
            tracing::debug!(error = %e, "oplock break acknowledgment failed");
        }
    }
}
