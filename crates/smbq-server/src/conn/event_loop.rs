//! The loop that owns one connection's engine: it reads frames while the backlog has room,
//! applies what the engine decides (send, run a chain, cancel, session events), hands
//! finished chains back to the engine, and relays pushed notifications.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use smbq_proto::ConnView;
use smbq_proto::engine::{Action, ChainItem, Env, ServerConnection, Transport};
use smbq_transport::{ChunkRead, Connection, TransportKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::chain::{FromTask, dispatch};
use super::{ConnError, Runtime, Shutdown, writer};
use crate::backlog::Backlog;

/// What woke the connection loop.
enum Event {
    Read(std::io::Result<Read>),
    Task(Option<FromTask>),
    Push(Option<crate::push::Push>),
    Idle,
    /// The writer sent something while the backlog was full.
    Drained,
    Shutdown,
}

enum Read {
    /// A QUIC chunk, for the deframer to slice.
    Chunk(Bytes),
    /// Bytes were read straight into the deframer's buffer.
    Filled,
    Eof,
}

/// One read from the transport; cancel safe, as both `ChunkRead` methods are.
async fn read_step(
    reader: &mut dyn ChunkRead,
    buf: &mut BytesMut,
    chunked: bool,
) -> std::io::Result<Read> {
    if chunked {
        return Ok(reader.read_chunk().await?.map_or(Read::Eof, Read::Chunk));
    }
    Ok(match reader.read_into(buf).await? {
        0 => Read::Eof,
        _ => Read::Filled,
    })
}

fn filetime_now() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    smbq_wire::filetime::FILETIME_UNIX_EPOCH
        + d.as_secs() * 10_000_000
        + u64::from(d.subsec_nanos() / 100)
}

/// The loop's state besides the transport halves and the channels it waits on.
struct ConnLoop {
    rt: Arc<Runtime>,
    shutdown: Shutdown,
    peer: SocketAddr,
    engine: ServerConnection,
    backlog: Backlog,
    out_tx: mpsc::UnboundedSender<Vec<Bytes>>,
    task_tx: mpsc::UnboundedSender<FromTask>,
    /// Running requests by MessageId, for CANCEL.
    running: HashMap<u64, CancellationToken>,
    /// AsyncId -> MessageId of requests that went async.
    async_ids: HashMap<u64, u64>,
    view: Option<Arc<ConnView>>,
    rng: rand::rngs::OsRng,
    authenticated: bool,
}

pub(super) async fn run_connection(
    id: u64,
    conn: Connection,
    rt: Arc<Runtime>,
    shutdown: Shutdown,
) -> Result<(), ConnError> {
    let Connection {
        mut reader,
        writer,
        peer,
        kind,
        ..
    } = conn;
    let transport = match kind {
        TransportKind::Tcp => Transport::Tcp,
        TransportKind::Quic => Transport::Quic,
    };
    let engine = ServerConnection::new(rt.engine.clone(), id, peer.to_string(), transport);

    // The channel is unbounded in messages but not in bytes: `backlog` counts what is in it
    // and the loop stops reading while it is full (crate::backlog).
    let limits = &rt.engine.limits;
    let backlog = Backlog::new(
        limits.max_pending_bytes,
        limits.max_in_flight,
        limits.max_read.max(limits.max_write) as usize,
    );
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Vec<Bytes>>();
    let writer_task = writer::spawn(writer, out_rx, backlog.queued.clone());
    let (task_tx, mut task_rx) = mpsc::unbounded_channel::<FromTask>();
    let (push_tx, mut push_rx) = mpsc::unbounded_channel::<crate::push::Push>();
    rt.server.register_connection(id, push_tx);
    // A hard deadline from accept: a connection that trickles bytes does not extend it.
    let deadline = tokio::time::Instant::now()
        + Duration::from_secs(rt.engine.limits.unauthenticated_idle_secs);
    let mut c = ConnLoop {
        rt: rt.clone(),
        shutdown: shutdown.clone(),
        peer,
        engine,
        backlog,
        out_tx,
        task_tx,
        running: HashMap::new(),
        async_ids: HashMap::new(),
        view: None,
        rng: rand::rngs::OsRng,
        authenticated: false,
    };
    // Whole frames may still sit in the deframer when the backlog filled up.
    let mut frames_waiting = false;

    // TCP reads straight into the deframer's buffer; QUIC hands over the chunks quinn
    // decrypted in place, and the deframer slices whole frames out of them. Either way a frame
    // is copied only when it spans QUIC chunks.
    let chunked = kind == TransportKind::Quic;
    let result: Result<(), ConnError> = loop {
        let mut buf = BytesMut::new();
        if !chunked {
            buf = std::mem::take(c.engine.deframer().buffer_mut());
            if buf.capacity() - buf.len() < 64 * 1024 {
                buf.reserve(256 * 1024);
            }
        }
        let full = c.backlog.full();
        c.engine.set_credit_ceiling(c.backlog.credit_ceiling());
        let event = if frames_waiting && !full {
            // Take the frames already buffered before reading more.
            Event::Read(Ok(Read::Filled))
        } else {
            tokio::select! {
                r = read_step(reader.as_mut(), &mut buf, chunked), if !full => Event::Read(r),
                msg = task_rx.recv() => Event::Task(msg),
                push = push_rx.recv() => Event::Push(push),
                () = c.backlog.queued.drained(), if full => Event::Drained,
                () = tokio::time::sleep_until(deadline), if !c.authenticated => Event::Idle,
                () = shutdown.cancelled() => Event::Shutdown,
            }
        };
        if !chunked {
            *c.engine.deframer().buffer_mut() = buf;
        }
        match event {
            Event::Read(r) => {
                match r {
                    Ok(Read::Eof) => break Ok(()),
                    Err(e) => break Err(ConnError::Io(e)),
                    Ok(Read::Chunk(chunk)) => c.engine.deframer().push_bytes(chunk),
                    Ok(Read::Filled) => {}
                }
                match c.take_frames().await {
                    Ok(waiting) => frames_waiting = waiting,
                    Err(e) => break Err(e),
                }
            }
            Event::Task(Some(msg)) => {
                if let Err(e) = c.on_task(msg) {
                    break Err(e);
                }
            }
            Event::Push(Some(push)) => c.on_push(push),
            Event::Task(None) | Event::Push(None) | Event::Drained => {}
            Event::Idle => break Err(ConnError::Unauthenticated),
            Event::Shutdown => break Ok(()),
        }
    };
    // Requests of a connection that is gone have nobody to answer.
    for t in c.running.values() {
        t.cancel();
    }
    finish_conn(&rt, &c.engine, writer_task, c.out_tx, result).await
}

impl ConnLoop {
    fn send(&self, frame: Vec<Bytes>) {
        self.backlog.queued.add(&frame);
        let _ = self.out_tx.send(frame);
    }

    /// Feeds the engine every whole frame the deframer holds, while the backlog has room.
    /// `Ok(true)`: frames are left for when it drains.
    async fn take_frames(&mut self) -> Result<bool, ConnError> {
        loop {
            if self.backlog.full() {
                return Ok(true);
            }
            self.engine
                .set_credit_ceiling(self.backlog.credit_ceiling());
            let Some(frame) = self.engine.next_frame().map_err(ConnError::Violation)? else {
                return Ok(false);
            };
            let actions = {
                let rt = &self.rt;
                let next_session = || rt.next_session_id.fetch_add(1, Ordering::Relaxed);
                let mut env = Env {
                    accounts: rt.accounts.as_ref(),
                    now: filetime_now(),
                    rng: &mut self.rng,
                    new_session_id: &next_session,
                };
                self.engine.on_frame(frame, &mut env)
            }
            .map_err(ConnError::Violation)?;
            if self.view.is_none() {
                self.view = self.engine.conn_view().cloned().map(Arc::new);
            }
            // A failed logon's answer is held back by the throttle; only this connection
            // waits, and nothing it sends meanwhile is read.
            tokio::select! {
                () = self.rt.logon.answer(self.peer.ip(), &actions) => {}
                () = self.shutdown.cancelled() => {}
            }
            for action in actions {
                self.apply(action);
            }
        }
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Send(frame) => self.send(frame),
            Action::Run(chain) => {
                let Some(view) = self.view.clone() else {
                    return;
                };
                let budget = self
                    .backlog
                    .start_chain(chain.items.iter().filter_map(|item| match item {
                        ChainItem::Run(r) => Some((r.header.message_id, r.header.credit_charge)),
                        ChainItem::Answered(_) => None,
                    }));
                dispatch(
                    chain,
                    view,
                    &self.rt.server,
                    &self.task_tx,
                    &mut self.running,
                    budget,
                );
            }
            Action::Cancel {
                message_id,
                async_id,
                ..
            } => {
                let mid = async_id
                    .and_then(|a| self.async_ids.get(&a).copied())
                    .unwrap_or(message_id);
                if let Some(t) = self.running.get(&mid) {
                    t.cancel();
                }
            }
            Action::SessionStarted {
                session_id,
                previous_session_id,
                user,
                dialect,
                signing,
                cipher,
                encrypt_required,
            } => {
                self.authenticated = true;
                info!(
                    session = session_id,
                    user = %user,
                    dialect = ?dialect,
                    signing = ?signing,
                    cipher = ?cipher,
                    encrypt_required,
                    "session established"
                );
                if previous_session_id != 0 && previous_session_id != session_id {
                    self.rt.server.session_replaced(previous_session_id);
                }
                self.rt.server.session_started(session_id, self.engine.id());
            }
            Action::SessionEnded { session_id } => self.rt.server.session_ended(session_id),
            // Counted, logged and delayed by `LogonGuard::answer` in `take_frames`.
            Action::AuthFailed { .. } => {}
        }
    }

    fn on_task(&mut self, msg: FromTask) -> Result<(), ConnError> {
        match msg {
            FromTask::Interim {
                header,
                encrypted,
                reply,
            } => {
                let (async_id, frame) = self.engine.interim(&header, encrypted);
                self.async_ids.insert(async_id, header.message_id);
                self.send(frame);
                let _ = reply.send(async_id);
            }
            FromTask::Done {
                items,
                encrypted,
                message_ids,
            } => {
                if items.iter().any(|c| c.response.disconnect) {
                    // MS-SMB2 3.3.5.15.12: a failed VALIDATE_NEGOTIATE_INFO drops the connection.
                    return Err(ConnError::ValidateNegotiate);
                }
                for mid in message_ids {
                    self.running.remove(&mid);
                    self.backlog.finished(mid);
                }
                for c in &items {
                    if let Some(a) = c.async_id {
                        self.async_ids.remove(&a);
                    }
                }
                self.engine
                    .set_credit_ceiling(self.backlog.credit_ceiling());
                let frame = self.engine.finish(&items, encrypted);
                self.send(frame);
            }
        }
        Ok(())
    }

    fn on_push(&mut self, push: crate::push::Push) {
        match push {
            crate::push::Push::Notification {
                session_id,
                command,
                body,
            } => {
                let frame = self.engine.notification(session_id, command, &body);
                self.send(frame);
            }
            crate::push::Push::RevokeSession(id) => self.engine.revoke_session(id),
        }
    }
}

async fn finish_conn(
    rt: &Runtime,
    engine: &ServerConnection,
    writer_task: tokio::task::JoinHandle<()>,
    out_tx: mpsc::UnboundedSender<Vec<Bytes>>,
    result: Result<(), ConnError>,
) -> Result<(), ConnError> {
    for s in engine.session_ids() {
        rt.server.session_ended(s);
    }
    rt.server.connection_ended(engine.id());
    let (frames, encrypted) = engine.frame_counts();
    let smb1_upgrade = engine.upgraded_from_smb1();
    info!(frames, encrypted, smb1_upgrade, "connection closed");
    drop(out_tx);
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
