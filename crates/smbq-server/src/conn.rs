//! The per-connection tasks: a loop that owns the engine (reads frames, dispatches requests,
//! finishes responses), request tasks that run handlers (many in flight, as credits allow),
//! and a writer task that sends frames in order.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use smbq_auth::Accounts;
use smbq_proto::engine::{Action, Chain, ChainItem, Completed, Env, ServerConnection, Transport};
use smbq_proto::{ConnView, EngineConfig, Response};
use smbq_transport::{ChunkRead, Connection, TransportKind};
use smbq_wire::{Command, NtStatus};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::Server;
use crate::admission::{Admission, AdmissionLimits};
use crate::backlog::{Backlog, ChainBudget};
use crate::logon_guard::LogonGuard;

/// Requests still running after this long get an interim STATUS_PENDING response
/// (MS-SMB2 3.3.4.2), so the client's timers do not fire and CANCEL can address them.
const INTERIM_AFTER: Duration = Duration::from_millis(300);
/// Segments gathered into one write when responses queue up (writev takes up to 1024).
const WRITE_BATCH: usize = 256;

/// Stops the listeners and connections on shutdown.
#[derive(Clone, Default)]
pub struct Shutdown(CancellationToken);

impl Shutdown {
    pub fn new() -> Self {
        Self(CancellationToken::new())
    }
    pub fn cancel(&self) {
        self.0.cancel();
    }
    pub async fn cancelled(&self) {
        self.0.cancelled().await;
    }
}

/// Everything shared by all connections.
pub struct Runtime {
    server: Arc<Server>,
    engine: Arc<EngineConfig>,
    accounts: Arc<dyn Accounts>,
    next_conn_id: AtomicU64,
    next_session_id: AtomicU64,
    /// The connection table (global, per-address and reserved slots).
    admission: Arc<Admission>,
    /// Failed-logon throttle and log.
    logon: Arc<LogonGuard>,
}

impl Runtime {
    pub fn new(
        server: Arc<Server>,
        engine: Arc<EngineConfig>,
        accounts: Arc<dyn Accounts>,
    ) -> Arc<Self> {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1);
        let logon = LogonGuard::new(server.config().logon.clone());
        let admission = Admission::new(AdmissionLimits {
            total: engine.limits.max_connections,
            per_address: engine.limits.max_connections_per_ip,
            reserved: engine.limits.reserved_connections,
            per_address_in_reserve: smbq_proto::Limits::RESERVE_PER_IP,
        });
        Arc::new(Self {
            server,
            engine,
            accounts,
            next_conn_id: AtomicU64::new(1),
            // Session ids differ across restarts so a client never reuses a stale one by accident;
            // they stay below 2^32 because some clients (smbtorture session-id) keep 32 bits.
            next_session_id: AtomicU64::new(((seed & 0x7FFF) << 16) | 1),
            admission,
            logon,
        })
    }
}

/// Accepts TCP connections until shutdown.
pub async fn serve_tcp(
    listener: smbq_transport::tcp::TcpListener,
    rt: Arc<Runtime>,
    shutdown: Shutdown,
) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = shutdown.cancelled() => break,
        };
        match conn {
            Ok(conn) => spawn_connection(conn, rt.clone(), shutdown.clone()),
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Runs one accepted connection in its own task.
pub fn spawn_connection(conn: Connection, rt: Arc<Runtime>, shutdown: Shutdown) {
    // Dropping a refused connection closes it (TCP FIN; QUIC close).
    let Ok(slot) = rt.admission.admit(conn.peer.ip()) else {
        return;
    };
    let id = rt.next_conn_id.fetch_add(1, Ordering::Relaxed);
    let transport = match conn.kind {
        TransportKind::Tcp => "tcp",
        TransportKind::Quic => "quic",
    };
    let span = info_span!("conn", id, peer = %conn.peer, transport);
    tokio::spawn(
        async move {
            debug!("connected");
            let result = run_connection(id, conn, rt.clone(), shutdown).await;
            drop(slot);
            match result {
                Ok(()) => {}
                Err(reason) => info!(%reason, "disconnected"),
            }
        }
        .instrument(span),
    );
}

/// Why a connection ended, other than by the client closing it or the server shutting down.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("{0}")]
    Io(std::io::Error),
    /// The client broke a rule that costs it the connection, as Windows does.
    #[error("{0}")]
    Violation(smbq_proto::Violation),
    /// MS-SMB2 3.3.5.15.12.
    #[error("validate negotiate failed")]
    ValidateNegotiate,
    /// No session by the unauthenticated deadline (`Limits::unauthenticated_idle_secs`).
    #[error("no session before the unauthenticated deadline")]
    Unauthenticated,
}

enum FromTask {
    Interim {
        header: smbq_wire::Header,
        encrypted: bool,
        reply: oneshot::Sender<u64>,
    },
    Done {
        items: Vec<Completed>,
        encrypted: bool,
        message_ids: Vec<u64>,
    },
}

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

async fn run_connection(
    id: u64,
    conn: Connection,
    rt: Arc<Runtime>,
    shutdown: Shutdown,
) -> Result<(), ConnError> {
    let Connection {
        mut reader,
        mut writer,
        peer,
        kind,
        ..
    } = conn;
    let transport = match kind {
        TransportKind::Tcp => Transport::Tcp,
        TransportKind::Quic => Transport::Quic,
    };
    let mut engine = ServerConnection::new(rt.engine.clone(), id, peer.to_string(), transport);

    // The channel is unbounded in messages but not in bytes: `backlog` counts what is in it
    // and the loop stops reading while it is full (crate::backlog).
    let limits = &rt.engine.limits;
    let mut backlog = Backlog::new(
        limits.max_pending_bytes,
        limits.max_in_flight,
        limits.max_read.max(limits.max_write) as usize,
    );
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Vec<Bytes>>();
    let queued = backlog.queued.clone();
    let writer_task = tokio::spawn(async move {
        let mut batch: Vec<Bytes> = Vec::new();
        while let Some(frame) = out_rx.recv().await {
            batch.clear();
            batch.extend(frame);
            // Responses finished meanwhile go out in the same writev / QUIC send.
            while batch.len() < WRITE_BATCH {
                match out_rx.try_recv() {
                    Ok(more) => batch.extend(more),
                    Err(_) => break,
                }
            }
            let bytes = batch.iter().map(Bytes::len).sum();
            let r = writer.write_chunks(&mut batch).await;
            queued.written(bytes);
            if r.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    });
    let send = |frame: Vec<Bytes>, backlog: &Backlog| {
        backlog.queued.add(&frame);
        let _ = out_tx.send(frame);
    };

    let (task_tx, mut task_rx) = mpsc::unbounded_channel::<FromTask>();
    let (push_tx, mut push_rx) = mpsc::unbounded_channel::<crate::push::Push>();
    rt.server.register_connection(id, push_tx);
    let mut running: HashMap<u64, CancellationToken> = HashMap::new();
    let mut async_ids: HashMap<u64, u64> = HashMap::new();
    let mut view: Option<Arc<ConnView>> = None;
    let mut rng = rand::rngs::OsRng;
    // A hard deadline from accept: a connection that trickles bytes does not extend it.
    let deadline = tokio::time::Instant::now()
        + Duration::from_secs(rt.engine.limits.unauthenticated_idle_secs);
    let mut authenticated = false;
    // Whole frames may still sit in the deframer when the backlog filled up.
    let mut frames_waiting = false;

    // TCP reads straight into the deframer's buffer; QUIC hands over the chunks quinn
    // decrypted in place, and the deframer slices whole frames out of them. Either way a frame
    // is copied only when it spans QUIC chunks.
    let chunked = kind == TransportKind::Quic;
    let result: Result<(), ConnError> = loop {
        let mut buf = BytesMut::new();
        if !chunked {
            buf = std::mem::take(engine.deframer().buffer_mut());
            if buf.capacity() - buf.len() < 64 * 1024 {
                buf.reserve(256 * 1024);
            }
        }
        let full = backlog.full();
        engine.set_credit_ceiling(backlog.credit_ceiling());
        let event = if frames_waiting && !full {
            // Take the frames already buffered before reading more.
            Event::Read(Ok(Read::Filled))
        } else {
            tokio::select! {
                r = read_step(reader.as_mut(), &mut buf, chunked), if !full => Event::Read(r),
                msg = task_rx.recv() => Event::Task(msg),
                push = push_rx.recv() => Event::Push(push),
                () = backlog.queued.drained(), if full => Event::Drained,
                () = tokio::time::sleep_until(deadline), if !authenticated => Event::Idle,
                () = shutdown.cancelled() => Event::Shutdown,
            }
        };
        if !chunked {
            *engine.deframer().buffer_mut() = buf;
        }
        match event {
            Event::Read(r) => {
                match r {
                    Ok(Read::Eof) => break Ok(()),
                    Err(e) => break Err(ConnError::Io(e)),
                    Ok(Read::Chunk(chunk)) => engine.deframer().push_bytes(chunk),
                    Ok(Read::Filled) => {}
                }
                frames_waiting = false;
                loop {
                    if backlog.full() {
                        frames_waiting = true;
                        break;
                    }
                    engine.set_credit_ceiling(backlog.credit_ceiling());
                    let frame = match engine.next_frame() {
                        Ok(Some(f)) => f,
                        Ok(None) => break,
                        Err(v) => {
                            return finish_conn(
                                &rt,
                                &engine,
                                writer_task,
                                out_tx,
                                Err(ConnError::Violation(v)),
                            )
                            .await;
                        }
                    };
                    let actions = {
                        let next_session = || rt.next_session_id.fetch_add(1, Ordering::Relaxed);
                        let mut env = Env {
                            accounts: rt.accounts.as_ref(),
                            now: filetime_now(),
                            rng: &mut rng,
                            new_session_id: &next_session,
                        };
                        engine.on_frame(frame, &mut env)
                    };
                    let actions = match actions {
                        Ok(a) => a,
                        Err(v) => {
                            return finish_conn(
                                &rt,
                                &engine,
                                writer_task,
                                out_tx,
                                Err(ConnError::Violation(v)),
                            )
                            .await;
                        }
                    };
                    if view.is_none() {
                        view = engine.conn_view().cloned().map(Arc::new);
                    }
                    // A failed logon's answer is held back by the throttle; only this
                    // connection waits, and nothing it sends meanwhile is read.
                    tokio::select! {
                        () = rt.logon.answer(peer.ip(), &actions) => {}
                        () = shutdown.cancelled() => {}
                    }
                    for action in actions {
                        match action {
                            Action::Send(frame) => {
                                send(frame, &backlog);
                            }
                            Action::Run(chain) => {
                                let Some(view) = view.clone() else { continue };
                                let budget =
                                    backlog.start_chain(chain.items.iter().filter_map(|item| {
                                        match item {
                                            ChainItem::Run(r) => {
                                                Some((r.header.message_id, r.header.credit_charge))
                                            }
                                            ChainItem::Answered(_) => None,
                                        }
                                    }));
                                dispatch(chain, view, &rt.server, &task_tx, &mut running, budget);
                            }
                            Action::Cancel {
                                message_id,
                                async_id,
                                ..
                            } => {
                                let mid = async_id
                                    .and_then(|a| async_ids.get(&a).copied())
                                    .unwrap_or(message_id);
                                if let Some(t) = running.get(&mid) {
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
                                authenticated = true;
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
                                    rt.server.session_replaced(previous_session_id);
                                }
                            }
                            Action::SessionEnded { session_id } => {
                                rt.server.session_ended(session_id);
                            }
                            // Counted, logged and delayed by `LogonGuard::answer` above.
                            Action::AuthFailed { .. } => {}
                        }
                    }
                }
            }
            Event::Task(msg) => {
                match msg {
                    Some(FromTask::Interim {
                        header,
                        encrypted,
                        reply,
                    }) => {
                        let (async_id, frame) = engine.interim(&header, encrypted);
                        async_ids.insert(async_id, header.message_id);
                        send(frame, &backlog);
                        let _ = reply.send(async_id);
                    }
                    Some(FromTask::Done {
                        items,
                        encrypted,
                        message_ids,
                    }) => {
                        if items.iter().any(|c| c.response.disconnect) {
                            // MS-SMB2 3.3.5.15.12: a failed VALIDATE_NEGOTIATE_INFO drops the connection.
                            break Err(ConnError::ValidateNegotiate);
                        }
                        for mid in message_ids {
                            running.remove(&mid);
                            backlog.finished(mid);
                        }
                        for c in &items {
                            if let Some(a) = c.async_id {
                                async_ids.remove(&a);
                            }
                        }
                        engine.set_credit_ceiling(backlog.credit_ceiling());
                        let frame = engine.finish(&items, encrypted);
                        send(frame, &backlog);
                    }
                    None => {}
                }
            }
            Event::Push(push) => match push {
                Some(crate::push::Push::Notification {
                    session_id,
                    command,
                    body,
                }) => {
                    let frame = engine.notification(session_id, command, &body);
                    send(frame, &backlog);
                }
                Some(crate::push::Push::RevokeSession(id)) => engine.revoke_session(id),
                None => {}
            },
            Event::Idle => break Err(ConnError::Unauthenticated),
            Event::Drained => {}
            Event::Shutdown => break Ok(()),
        }
    };
    for t in running.values() {
        t.cancel();
    }
    finish_conn(&rt, &engine, writer_task, out_tx, result).await
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

/// Runs a chain in its own task: related requests in order, carrying the FileId
/// (MS-SMB2 3.3.5.2.7.2); a failed CREATE fails the related requests after it.
fn dispatch(
    chain: Chain,
    view: Arc<ConnView>,
    server: &Arc<Server>,
    task_tx: &mpsc::UnboundedSender<FromTask>,
    running: &mut HashMap<u64, CancellationToken>,
    budget: ChainBudget,
) {
    let token = CancellationToken::new();
    let mut message_ids = Vec::new();
    for item in &chain.items {
        if let ChainItem::Run(r) = item {
            running.insert(r.header.message_id, token.clone());
            message_ids.push(r.header.message_id);
        }
    }
    let server = server.clone();
    let tx = task_tx.clone();
    let single = chain.items.len() == 1;
    let count = chain.items.len();
    tokio::spawn(async move {
        // Held until the responses are handed to the loop, which counts them as unsent bytes.
        let _budget = budget.acquire().await;
        let encrypted = chain.encrypted;
        let mut message_ids = message_ids;
        let mut done = Vec::with_capacity(chain.items.len());
        let mut related_fid = None;
        let mut failed: Option<NtStatus> = None;
        for (index, item) in chain.items.into_iter().enumerate() {
            match item {
                ChainItem::Answered(c) => {
                    // An invalid CREATE answered by the engine still fails what follows it.
                    if !c.header.is_related() {
                        failed = None;
                    }
                    if c.header.command == Command::CREATE && c.response.status.is_error() {
                        failed = Some(c.response.status);
                    }
                    done.push(c);
                }
                ChainItem::Run(mut req) => {
                    let header = req.header.clone();
                    if header.is_related() {
                        if let Some(status) = failed {
                            done.push(Completed {
                                header,
                                response: Response::error(status),
                                async_id: None,
                            });
                            continue;
                        }
                        req.related_file_id = related_fid;
                    } else {
                        // A new related segment starts: only a FileId it produces carries on.
                        failed = None;
                        related_fid = None;
                    }
                    let mut async_id = None;
                    // MS-SMB2 3.3.4.1.3 note (Windows): a CHANGE_NOTIFY ending a compound goes
                    // async alone; the responses before it are sent first (smbtorture
                    // smb2.compound.interim1).
                    let async_last = index + 1 == count && header.command == Command::CHANGE_NOTIFY;
                    let response = {
                        let fut = server.handle(&view, &req, token.clone());
                        tokio::pin!(fut);
                        // A CREATE waiting for an oplock break gets one too, as on Windows.
                        // One in the middle cannot go async: Windows fails it instead
                        // (smbtorture smb2.compound.interim2). Dropping the wait withdraws it.
                        let mid_notify = !single
                            && index + 1 < count
                            && header.command == Command::CHANGE_NOTIFY;
                        if mid_notify {
                            tokio::select! {
                                r = &mut fut => r,
                                _ = tokio::time::sleep(INTERIM_AFTER) => Response::error(NtStatus::INTERNAL_ERROR),
                            }
                        } else if single || async_last {
                            tokio::select! {
                                r = &mut fut => r,
                                _ = tokio::time::sleep(INTERIM_AFTER) => {
                                    if !single && !done.is_empty() {
                                        let mid = header.message_id;
                                        let before: Vec<u64> = message_ids.iter().copied().filter(|m| *m != mid).collect();
                                        message_ids.retain(|m| *m == mid);
                                        let _ = tx.send(FromTask::Done { items: std::mem::take(&mut done), encrypted, message_ids: before });
                                    }
                                    let (reply, rx) = oneshot::channel();
                                    let _ = tx.send(FromTask::Interim { header: header.clone(), encrypted, reply });
                                    async_id = rx.await.ok();
                                    fut.await
                                }
                            }
                        } else {
                            fut.await
                        }
                    };
                    if let Some(fid) = response.file_id {
                        related_fid = Some(fid);
                    }
                    if header.command == Command::CREATE && response.status.is_error() {
                        failed = Some(response.status);
                    }
                    done.push(Completed {
                        header,
                        response,
                        async_id,
                    });
                }
            }
        }
        let _ = tx.send(FromTask::Done {
            items: done,
            encrypted,
            message_ids,
        });
    });
}
