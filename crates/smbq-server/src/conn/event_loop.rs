//! The loop that owns one connection's engine. It moves bytes and runs handlers; the engine
//! decides everything else. Events: frames from a stream's reader (taken only while the
//! backlog has room), a finished request, a pushed notification, the engine's timer
//! (interim responses), the writer draining, the unauthenticated deadline, shutdown. After
//! each, it applies what the engine asks (`poll_action`) and sends what it built
//! (`poll_transmit`) on the stream each frame names.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use smbq_proto::engine::{Action, Env, Execute, ServerConnection, StreamId, Transmit, Transport};
use smbq_proto::{ConnView, EngineConfig};
use smbq_transport::{Connection, DataStream, StreamGate, TransportKind};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::exec::{self, Done};
use super::reader::{self, FrameLimit, Inbound};
use super::{ConnError, Runtime, Shutdown, writer};
use crate::backlog::Backlog;
use crate::status::{ConnInfo, Protection};

mod data_streams;

use data_streams::{DataStreams, accept_stream};

/// What woke the connection loop.
enum Event {
    Inbound(Option<Inbound>),
    /// Frames delivered earlier can be taken now.
    Waiting,
    Done(Option<Done>),
    Push(Option<crate::push::Push>),
    Timer,
    Idle,
    /// The writer sent something while the backlog was full.
    Drained,
    /// The client left (its stream ended, or a write failed) while the backlog was full.
    Gone,
    /// A data stream the client opened (docs/multistream.md 4); None once the gate is closed.
    Stream(Option<DataStream>),
    /// Sending on a data stream failed: the client stopped reading responses it is owed
    /// (docs/multistream.md 7.3).
    StreamFailed,
    Shutdown,
}

fn filetime_now() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    smbq_wire::filetime::FILETIME_UNIX_EPOCH
        + d.as_secs() * 10_000_000
        + u64::from(d.subsec_nanos() / 100)
}

/// The loop's state besides the channels it waits on.
struct ConnLoop {
    rt: Arc<Runtime>,
    shutdown: Shutdown,
    peer: SocketAddr,
    engine: ServerConnection,
    backlog: Backlog,
    /// One writer per stream.
    writers: HashMap<StreamId, mpsc::UnboundedSender<Vec<Bytes>>>,
    done_tx: mpsc::Sender<Done>,
    /// Running requests by MessageId, for the engine's cancels.
    running: HashMap<u64, Running>,
    /// Chains with requests running, and the budget share their first request took.
    chains: HashMap<u64, Option<OwnedSemaphorePermit>>,
    /// Frames a reader delivered that wait for the backlog to drain (at most one batch).
    waiting: VecDeque<(StreamId, Bytes)>,
    frame_limit: FrameLimit,
    view: Option<Arc<ConnView>>,
    rng: rand::rngs::OsRng,
    authenticated: bool,
    /// The data streams (docs/multistream.md), when the transport can carry them.
    streams: DataStreams,
    /// What `smbq status` shows of this connection, among it the SMB2 bytes each way
    /// (framing included), also logged when the connection closes: what an administrator
    /// reads to see that a server-side copy stayed in the server.
    info: Arc<ConnInfo>,
    /// The QUIC path's rate for compression's pace, and when it was sampled.
    quic_link: (std::time::Instant, Option<u64>),
}

/// How often a QUIC connection's path is sampled for compression's pace (a sample takes the
/// connection's lock).
const QUIC_LINK_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// What the loop waits on besides its own state.
struct Inputs {
    inbound: mpsc::Receiver<Inbound>,
    done: mpsc::Receiver<Done>,
    push: mpsc::UnboundedReceiver<crate::push::Push>,
    /// A hard deadline from accept: a connection that trickles bytes does not extend it.
    deadline: tokio::time::Instant,
    /// Cancelled by the reader at the stream's end and by the writer when a write fails.
    gone: CancellationToken,
    /// The QUIC connection's further streams, if it may have any.
    gate: Option<Box<dyn StreamGate>>,
}

/// The connection's other tasks, stopped or awaited when it ends.
struct Tasks {
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

/// A request handed to the server, for cancelling it.
struct Running {
    token: CancellationToken,
    command: smbq_wire::Command,
    session_id: u64,
}

pub(super) async fn run_connection(
    id: u64,
    conn: Connection,
    rt: Arc<Runtime>,
    shutdown: Shutdown,
) -> Result<(), ConnError> {
    let (mut c, mut inputs, tasks) = start(id, conn, &rt, &shutdown);
    let result = loop {
        let event = c.next_event(&mut inputs).await;
        if let Some(end) = c.on_event(event).await {
            break end;
        }
    };
    // Requests of a connection that is gone have nobody to answer. A CREATE of a session
    // that lives on in another channel runs to its end, though: the client replays it there,
    // and while it runs the replay is answered FILE_NOT_AVAILABLE instead of starting a second
    // open (MS-SMB2 3.3.5.9.10; smbtorture smb2.replay.dhv2-pending2*). It ends on its own
    // (a break answered or timed out); nothing else outlives its connection.
    for r in c.running.values() {
        let survives = r.command == smbq_wire::Command::CREATE
            && rt
                .server
                .session_table()
                .get(r.session_id)
                .is_some_and(|rec| rec.channels().iter().any(|&ch| ch != id));
        if !survives {
            r.token.cancel();
        }
    }
    // What finished requests left for after their answers (directory lease breaks to other
    // clients) still goes out: the file system changed whether or not this client hears it.
    // Closed first, so a request finishing later carries its own out (crate::conn::exec).
    inputs.done.close();
    while let Ok(d) = inputs.done.try_recv() {
        if let Some(after) = d.after {
            rt.server.apply(*after);
        }
    }
    tasks.reader.abort();
    for r in &c.streams.readers {
        r.abort();
    }
    let ConnLoop {
        engine,
        writers,
        info,
        ..
    } = c;
    drop(writers);
    finish_conn(&rt, &engine, &info, tasks.writer, result).await
}

/// Builds the engine and spawns the stream's reader and writer.
fn start(
    id: u64,
    conn: Connection,
    rt: &Arc<Runtime>,
    shutdown: &Shutdown,
) -> (ConnLoop, Inputs, Tasks) {
    let Connection {
        reader,
        writer,
        peer,
        kind,
        gate,
        path,
        ..
    } = conn;
    let engine_cfg = rt.engine_config();
    let engine = new_engine(rt, &engine_cfg, id, peer, kind, gate.as_deref());
    let limits = &engine_cfg.limits;
    let backlog = Backlog::new(
        limits.max_pending_bytes,
        limits.max_in_flight,
        limits.max_read.max(limits.max_write) as usize,
    );
    // The writer channel is unbounded in messages but not in bytes: `backlog` counts what is
    // in it and the loop stops taking frames while it is full (crate::backlog).
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Vec<Bytes>>();
    let gone = CancellationToken::new();
    let writer = writer::spawn(
        writer,
        out_rx,
        backlog.queued.clone(),
        gone.clone(),
        writer::Role::Control,
    );
    // Every running request sends one Done; `max_in_flight` bounds how many run.
    let (done_tx, done) = mpsc::channel::<Done>(limits.max_in_flight.max(1));
    let (push, info) = register(rt, id, peer, kind, path);
    let frame_limit: FrameLimit = Arc::new(engine.frame_limit().into());
    let (in_tx, inbound) = mpsc::channel::<Inbound>(reader::QUEUED_BATCHES);
    let chunked = kind == TransportKind::Quic;
    let streams = DataStreams::new(in_tx.clone());
    let reader = reader::spawn(
        StreamId::CONTROL,
        reader,
        chunked,
        frame_limit.clone(),
        in_tx,
        gone.clone(),
    );
    let deadline = tokio::time::Instant::now()
        + Duration::from_secs(engine_cfg.limits.unauthenticated_idle_secs);
    let c = ConnLoop {
        rt: rt.clone(),
        shutdown: shutdown.clone(),
        peer,
        engine,
        backlog,
        writers: HashMap::from([(StreamId::CONTROL, out_tx)]),
        done_tx,
        running: HashMap::new(),
        chains: HashMap::new(),
        waiting: VecDeque::new(),
        frame_limit,
        view: None,
        rng: rand::rngs::OsRng,
        authenticated: false,
        streams,
        info,
        quic_link: (std::time::Instant::now(), None),
    };
    let inputs = Inputs {
        inbound,
        done,
        push,
        deadline,
        gone,
        gate,
    };
    (c, inputs, Tasks { reader, writer })
}

/// The connection's engine, over the server's session table.
fn new_engine(
    rt: &Runtime,
    engine_cfg: &Arc<EngineConfig>,
    id: u64,
    peer: SocketAddr,
    kind: TransportKind,
    gate: Option<&dyn StreamGate>,
) -> ServerConnection {
    let transport = match kind {
        TransportKind::Tcp => Transport::Tcp,
        TransportKind::Quic => Transport::Quic,
    };
    let mut engine = ServerConnection::new(
        engine_cfg.clone(),
        rt.server.session_table().clone(),
        id,
        peer.to_string(),
        transport,
    );
    engine.set_data_stream_limit(gate.map_or(0, |g| g.limit()));
    engine
}

/// Makes the connection known to the server: the channel its pushes (breaks, notifications)
/// come on, and what `smbq status` shows of it.
fn register(
    rt: &Runtime,
    id: u64,
    peer: SocketAddr,
    kind: TransportKind,
    path: Option<Arc<dyn smbq_transport::PathStats>>,
) -> (mpsc::UnboundedReceiver<crate::push::Push>, Arc<ConnInfo>) {
    // Pushes are bounded by what the connection's sessions hold (one break per open at most).
    let (push_tx, push) = mpsc::unbounded_channel::<crate::push::Push>();
    rt.server.register_connection(id, push_tx);
    let name = match kind {
        TransportKind::Tcp => "tcp",
        TransportKind::Quic => "quic",
    };
    let info = Arc::new(ConnInfo::new(id, peer, name, path));
    rt.server.register_connection_info(info.clone());
    (push, info)
}

impl ConnLoop {
    /// Over QUIC a write ends in the stack's own send buffer, not on the path, so its time
    /// says nothing of the link (the bench measured 1.2x instead of 2.3x at 100 Mbit/s):
    /// the rate is the congestion window over the RTT, from the stack's path figures
    /// (`smbq_compress::pace::window_rate`), sampled every [`QUIC_LINK_EVERY`]. None where
    /// the stack has no figures (MsQuic): compression then uses the first common algorithm.
    fn quic_link_rate(&mut self) -> Option<u64> {
        let (at, rate) = self.quic_link;
        if at.elapsed() < QUIC_LINK_EVERY && rate.is_some() {
            return rate;
        }
        let rate = self
            .info
            .path()
            .and_then(|p| smbq_compress::pace::window_rate(p.cwnd_bytes, p.rtt));
        self.quic_link = (std::time::Instant::now(), rate);
        rate
    }

    /// Waits for the next event. Frames are taken only while the backlog has room; those
    /// already delivered go first.
    async fn next_event(&mut self, inputs: &mut Inputs) -> Event {
        let full = self.backlog.full();
        self.engine
            .set_credit_ceiling(self.backlog.credit_ceiling());
        let link = match self.engine.conn_view().map(|v| v.transport) {
            Some(smbq_proto::engine::Transport::Tcp) => self.backlog.queued.link_rate(),
            _ => self.quic_link_rate(),
        };
        self.engine.set_link_rate(link);
        if !self.waiting.is_empty() && !full {
            return Event::Waiting;
        }
        if let (Some(n), Some(gate)) = (self.streams.to_grant.take(), inputs.gate.as_mut()) {
            gate.grant(n);
            self.streams.granted = true;
        }
        let accepting = self.streams.granted && inputs.gate.is_some();
        // A notification queued before a request finished goes out before its answer: a
        // break a request started (crate::dispatch::before_task) precedes the answers to the
        // requests sent after it.
        if let Ok(push) = inputs.push.try_recv() {
            return Event::Push(Some(push));
        }
        let timer = self.engine.poll_timeout();
        tokio::select! {
            r = inputs.inbound.recv(), if !full => Event::Inbound(r),
            d = inputs.done.recv() => Event::Done(d),
            push = inputs.push.recv() => Event::Push(push),
            () = sleep_until(timer), if timer.is_some() => Event::Timer,
            () = self.backlog.queued.drained(), if full => Event::Drained,
            // Frames and the end of the stream wait in order behind a full backlog; a client
            // that left must not keep its requests, opens and slot until they drain.
            () = inputs.gone.cancelled(), if full => Event::Gone,
            () = tokio::time::sleep_until(inputs.deadline), if !self.authenticated => Event::Idle,
            s = accept_stream(&mut inputs.gate), if accepting => {
                if s.is_none() {
                    // The QUIC connection is gone; its control stream tells the rest.
                    inputs.gate = None;
                }
                Event::Stream(s)
            }
            () = self.streams.failed.cancelled() => Event::StreamFailed,
            () = self.shutdown.cancelled() => Event::Shutdown,
        }
    }

    /// Handles one event; `Some` when the connection ends, with why.
    async fn on_event(&mut self, event: Event) -> Option<Result<(), ConnError>> {
        let step = match event {
            Event::Inbound(Some(Inbound::Frames(stream, frames))) => {
                self.waiting.extend(frames.into_iter().map(|f| (stream, f)));
                self.take_frames().await
            }
            Event::Waiting => self.take_frames().await,
            // The control stream's end is the connection's (docs/multistream.md 7).
            Event::Inbound(Some(Inbound::Closed(stream, r))) if stream == StreamId::CONTROL => {
                return Some(r);
            }
            Event::Inbound(Some(Inbound::Closed(stream, r))) => self.data_stream_ended(stream, r),
            Event::Stream(Some(s)) => {
                self.add_stream(s);
                Ok(())
            }
            // The gate is gone with the QUIC connection; the control stream notices too.
            Event::Stream(None) => Ok(()),
            Event::StreamFailed => Err(ConnError::Io(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "client stopped reading a data stream it is owed responses on",
            ))),
            Event::Inbound(None) | Event::Shutdown | Event::Gone => return Some(Ok(())),
            Event::Done(Some(done)) => self.on_done(done),
            Event::Push(Some(push)) => {
                self.on_push(push);
                Ok(())
            }
            Event::Timer => {
                self.engine.handle_timeout(Instant::now());
                self.drain();
                Ok(())
            }
            Event::Done(None) | Event::Push(None) | Event::Drained => Ok(()),
            Event::Idle => Err(ConnError::Unauthenticated),
        };
        step.err().map(Err)
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

impl ConnLoop {
    /// Sends a frame on its stream (the control stream if that one is gone).
    fn send(&self, t: Transmit) {
        let tx = self
            .writers
            .get(&t.stream)
            .or_else(|| self.writers.get(&StreamId::CONTROL));
        if let Some(tx) = tx {
            let n = self.backlog.queued.add(&t.frame);
            self.info.add_out(n + 4);
            let _ = tx.send(t.frame);
        }
    }

    /// Applies every action the engine queued, then sends every frame it built.
    fn drain(&mut self) {
        while let Some(a) = self.engine.poll_action() {
            self.apply(a);
        }
        while let Some(t) = self.engine.poll_transmit() {
            self.send(t);
        }
        self.retire_streams();
    }

    /// Hands the engine every waiting frame while the backlog has room.
    async fn take_frames(&mut self) -> Result<(), ConnError> {
        while !self.backlog.full() {
            let Some((stream, frame)) = self.waiting.pop_front() else {
                break;
            };
            self.info.add_in(frame.len() + 4);
            self.engine
                .set_credit_ceiling(self.backlog.credit_ceiling());
            {
                let rt = &self.rt;
                let next_session = || rt.next_session_id.fetch_add(1, Ordering::Relaxed);
                let mut env = Env {
                    accounts: rt.accounts.as_ref(),
                    now: filetime_now(),
                    at: Instant::now(),
                    rng: &mut self.rng,
                    new_session_id: &next_session,
                };
                self.engine.handle_frame(stream, frame, &mut env)
            }
            .map_err(ConnError::Violation)?;
            self.frame_limit
                .store(self.engine.frame_limit(), Ordering::Release);
            if self.view.is_none() {
                self.view = self.engine.conn_view().cloned().map(Arc::new);
            }
            let actions: Vec<Action> = std::iter::from_fn(|| self.engine.poll_action()).collect();
            // A failed logon's answer is held back by the throttle; only this connection
            // waits, and nothing it sends meanwhile is read.
            tokio::select! {
                () = self.rt.logon.answer(self.peer.ip(), self.info.transport, &actions) => {}
                () = self.shutdown.cancelled() => {}
            }
            for action in actions {
                self.apply(action);
            }
            self.drain();
        }
        Ok(())
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Execute(x) => self.execute(x),
            Action::Answered {
                chain,
                message_ids,
                chain_done,
            } => self.answered(chain, message_ids, chain_done),
            Action::Cancel { message_id, .. } => {
                if let Some(r) = self.running.get(&message_id) {
                    r.token.cancel();
                }
            }
            Action::SessionStarted {
                session_id,
                bound,
                previous_session_id,
                user,
                mechanism,
                dialect,
                signing,
                cipher,
                encrypt_required,
            } => {
                self.authenticated = true;
                let protection = Protection::of(dialect, signing, cipher);
                info!(
                    target: crate::AUDIT,
                    event = "logon",
                    result = "success",
                    session = session_id,
                    user = %user,
                    auth = mechanism.name(),
                    peer = %self.peer,
                    transport = self.info.transport,
                    dialect = %protection.dialect,
                    signing = %protection.signing.as_deref().unwrap_or("none"),
                    cipher = %protection.cipher.as_deref().unwrap_or("none"),
                    encrypt_required,
                    channel = if bound { "bound" } else { "first" },
                    "session established"
                );
                if previous_session_id != 0 {
                    self.rt
                        .server
                        .session_replaced(previous_session_id, session_id);
                }
                self.rt.server.session_started(session_id, self.engine.id());
                if let Some(view) = &self.view {
                    self.rt.server.client_session(view.client_guid, session_id);
                }
                self.info.set_protection(protection.clone());
                self.rt
                    .server
                    .session_protection(session_id, protection, encrypt_required);
                // docs/multistream.md 4.2: data streams open once a session is valid.
                let n = self.engine.granted_data_streams();
                if n > 0 && !self.streams.granted {
                    self.streams.to_grant = Some(n);
                }
            }
            // LOGOFF and a failed re-authentication: durable opens stay for a reconnect, as
            // Windows keeps them (smbtorture smb2.durable-open.reopen4).
            Action::SessionEnded { session_id } => self.rt.server.session_lost(session_id),
            // Counted, logged and delayed by `LogonGuard::answer` in `take_frames`.
            Action::AuthFailed { .. } => self.rt.engine_config().observer.logon_failed(),
        }
    }

    /// Runs a request the engine let through: its chain's share of the budget, a cancel
    /// token, and the task (crate::conn::exec).
    fn execute(&mut self, x: Execute) {
        let Some(view) = self.view.clone() else {
            return;
        };
        let budget = x.chain_charges.as_ref().map(|charges| {
            self.chains.insert(x.chain, None);
            self.backlog.start_chain(charges.iter().copied())
        });
        let token = CancellationToken::new();
        let header = &x.request.header;
        self.running.insert(
            header.message_id,
            Running {
                token: token.clone(),
                command: header.command,
                session_id: header.session_id,
            },
        );
        let arrival = self.rt.server.before_task(&view, &x.request);
        exec::spawn(
            x,
            budget,
            view,
            &self.rt.server,
            token,
            arrival,
            &self.done_tx,
        );
    }

    /// Responses went out: their requests stop running and give back their backlog share.
    fn answered(&mut self, chain: u64, message_ids: Vec<u64>, chain_done: bool) {
        for mid in message_ids {
            self.running.remove(&mid);
            self.backlog.finished(mid);
        }
        if chain_done {
            self.chains.remove(&chain);
        }
    }

    fn on_done(&mut self, done: Done) -> Result<(), ConnError> {
        if done.response.disconnect {
            // MS-SMB2 3.3.5.15.12: a failed VALIDATE_NEGOTIATE_INFO drops the connection.
            if let Some(after) = done.after {
                self.rt.server.apply(*after);
            }
            return Err(ConnError::ValidateNegotiate);
        }
        // The chain may be over already (the engine gave up on this request): the share of
        // the budget goes back at once then.
        if let Some(permit) = done.permit
            && let Some(slot) = self.chains.get_mut(&done.chain)
        {
            *slot = Some(permit);
        }
        self.engine
            .set_credit_ceiling(self.backlog.credit_ceiling());
        self.engine
            .complete(done.message_id, done.response, Instant::now());
        self.drain();
        // Its answer is queued: what the request left for after it goes out now, behind it.
        if let Some(after) = done.after {
            self.rt.server.apply(*after);
        }
        Ok(())
    }

    fn on_push(&mut self, push: crate::push::Push) {
        let crate::push::Push::Notification {
            session_id,
            command,
            body,
        } = push;
        self.engine.notification(session_id, command, &body);
        self.drain();
    }
}

async fn finish_conn(
    rt: &Runtime,
    engine: &ServerConnection,
    info: &ConnInfo,
    writer_task: tokio::task::JoinHandle<()>,
    result: Result<(), ConnError>,
) -> Result<(), ConnError> {
    // MS-SMB2 3.3.7.1: a session goes with its last channel; durable opens wait.
    for s in engine.session_ids() {
        rt.server.channel_lost(s, engine.id());
    }
    rt.server.connection_ended(engine.id());
    let (frames, encrypted) = engine.frame_counts();
    let smb1_upgrade = engine.upgraded_from_smb1();
    let bytes_in = info.bytes_in.load(Ordering::Relaxed);
    let bytes_out = info.bytes_out.load(Ordering::Relaxed);
    info!(
        frames,
        encrypted, smb1_upgrade, bytes_in, bytes_out, "connection closed"
    );
    // A peer that stopped reading would keep the writer (its socket and every unsent
    // response) forever: give it 2 s, then stop it.
    let abort = writer_task.abort_handle();
    if tokio::time::timeout(Duration::from_secs(2), writer_task)
        .await
        .is_err()
    {
        abort.abort();
    }
    result
}
