//! SMB2/3 server core: share registry, session/tree/open tables, one handler per command,
//! share modes and byte-range locks. Handlers get resolved objects and return
//! `Result<Response, NtStatus>`; they never parse headers, sign or count credits (the engine in
//! smbq-proto does).
#![forbid(unsafe_code)]

pub mod access;
pub mod admission;
pub mod audit;
mod backlog;
mod clients;
pub mod config;
pub mod conn;
mod dispatch;
pub use dispatch::Arrival;
mod dos;
pub mod durable;
pub mod ea;
mod effects;
pub mod errors;
mod file_id;
pub mod file_state;
pub mod fnv;
mod handlers;
mod inline_io;
mod kernel_rights;
pub mod logon_guard;
mod meta;
pub mod notify;
pub mod open_state;
pub mod path;
pub mod persist;
pub mod pipe;
pub mod posix;
pub mod push;
mod reload;
pub mod reparse;
mod resume_key;
pub mod security;
pub mod share;
pub mod short_name;
mod stable;
pub mod status;
pub mod streams;
pub mod tables;
pub mod unix_identity;
mod write_time;

pub use config::{EncryptPolicy, InterfacePolicy, ServerConfig, ShareConfig};
pub use logon_guard::LogonPolicy;
pub use reload::ShareChanges;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use smbq_auth::Identity;
use smbq_proto::{ConnView, Request, Response, SessionTable};
use smbq_vfs::{PosixOptions, PosixVfs, Vfs};
use tokio_util::sync::CancellationToken;

use crate::file_state::FileStates;
use crate::open_state::Changes as _;
use crate::pipe::PipeIo;
use crate::share::ShareRegistry;
use crate::tables::{GenSlab, Open, OpenKind, SessionState};

/// Makes the endpoint behind a named pipe open, or `None` for an unknown pipe.
pub type PipeFactory =
    dyn Fn(&str, &ServerConfig, &Identity) -> Option<Box<dyn PipeIo>> + Send + Sync;

/// The tracing target of audit lines (logons, tree connects, access denials, administrator
/// actions): one target, so an administrator can route or filter them as a whole.
pub const AUDIT: &str = "smbq::audit";

/// Opens a disk share's backend (PosixVfs, or MemVfs in tests).
type ShareOpener =
    parking_lot::Mutex<dyn FnMut(&ShareConfig) -> io::Result<Arc<dyn Vfs>> + Send + Sync>;

/// Server-wide cap on open handles, whatever the per-session limits add up to.
const MAX_OPENS_TOTAL: u32 = 1 << 22;

pub struct Server {
    cfg: ServerConfig,
    /// `cfg.limits` until a reload replaces them ([`set_limits`](Self::set_limits)).
    limits: RwLock<Arc<smbq_proto::Limits>>,
    /// Replaced whole by a reload (crate::reload); trees keep the `Share` they connected to.
    shares: RwLock<Arc<ShareRegistry>>,
    /// What srvsvc lists; follows `shares`.
    share_list: Arc<RwLock<Arc<pipe::ShareList>>>,
    /// How disk shares' backends are opened, for shares a reload adds.
    opener: Box<ShareOpener>,
    /// Every session, shared with the connections' engines (smbq_proto::sessions); the
    /// server's part of each (trees, opens, channels) is its record's `SessionState`.
    sessions: Arc<SessionTable>,
    /// `None` marks an id reserved by a CREATE still in progress.
    opens: RwLock<GenSlab<Option<Arc<Open>>>>,
    /// Everything opens share about each file: share modes, locks, oplocks, leases, behind
    /// the crate::open_state door (crate::file_state's table).
    files: Box<dyn open_state::OpenState>,
    /// CHANGE_NOTIFY watches (crate::notify).
    notify: notify::NotifyHub,
    /// Durable opens whose connection broke, waiting for their clients (crate::durable).
    durable: durable::DurableStore,
    /// Each client's sessions, where its lease breaks go (crate::clients).
    clients: clients::Clients,
    /// The persistent handles' store, once opened (crate::persist).
    persistent: std::sync::OnceLock<Arc<dyn durable::store::RecordStore>>,
    pipes: RwLock<Arc<PipeFactory>>,
    /// Where to send unsolicited messages for each live connection.
    connections: RwLock<HashMap<u64, push::PushSender>>,
    /// What status reports show of each live connection (crate::status).
    conn_infos: RwLock<HashMap<u64, Arc<status::ConnInfo>>>,
    /// When the server started, for status reports.
    started: std::time::SystemTime,
    /// Packet counts of ended QUIC connections, for the metrics' totals.
    ended_quic: status::EndedQuic,
    /// Audit lines of access denials and tree connects, rate-limited (crate::audit).
    denials: audit::DenialLog,
    tree_connects: audit::AuditWindow,
    /// Told of every request a handler ran (smbq_proto::observe), for the metrics.
    observer: std::sync::OnceLock<smbq_proto::observe::SharedObserver>,
    unix_identity: std::sync::OnceLock<unix_identity::UnixIdentityPolicy>,
    /// Mints and checks the resume keys of server-side copies (crate::resume_key).
    resume_keys: resume_key::ResumeKeys,
    /// Handlers move work to the blocking pool, which needs an owned handle on the server.
    me: Weak<Server>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("shares", &self.shares)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Opens a [`PosixVfs`] for every disk share; IPC$ is always present.
    pub fn new(cfg: ServerConfig) -> io::Result<Arc<Server>> {
        Self::with_state(cfg, new_open_state())
    }

    /// Like [`new`](Self::new) with the backend of each disk share chosen by `open`
    /// (tests use `MemVfs`).
    pub fn with_backends(
        cfg: ServerConfig,
        open: impl FnMut(&ShareConfig) -> io::Result<Arc<dyn Vfs>> + Send + Sync + 'static,
    ) -> io::Result<Arc<Server>> {
        Self::with_open_state(cfg, open, new_open_state())
    }

    /// Like [`new`](Self::new), with per-file open state kept by `files` instead of this
    /// process's own table: a cluster node's (smbq-cluster), which wraps
    /// [`Server::local_open_state`].
    pub fn with_state(
        cfg: ServerConfig,
        files: Box<dyn open_state::OpenState>,
    ) -> io::Result<Arc<Server>> {
        let refuse_hardlinks = cfg.refuse_hardlinks;
        Self::with_open_state(
            cfg,
            move |sc| {
                let opts = PosixOptions { refuse_hardlinks };
                Ok(Arc::new(PosixVfs::new(&sc.path, opts)?) as Arc<dyn Vfs>)
            },
            files,
        )
    }

    /// The in-process open-state table every server uses on its own.
    pub fn local_open_state() -> Box<dyn open_state::OpenState> {
        new_open_state()
    }

    fn with_open_state(
        cfg: ServerConfig,
        mut open: impl FnMut(&ShareConfig) -> io::Result<Arc<dyn Vfs>> + Send + Sync + 'static,
        files: Box<dyn open_state::OpenState>,
    ) -> io::Result<Arc<Server>> {
        let shares = ShareRegistry::new(&cfg, &mut open)?;
        let share_list = Arc::new(RwLock::new(Arc::new(pipe::ShareList::new(&shares))));
        let opener: Box<ShareOpener> = Box::new(parking_lot::Mutex::new(open));
        let open_base = config::open_id_base(cfg.node_tag);
        Ok(Arc::new_cyclic(|me| Server {
            limits: RwLock::new(Arc::new(cfg.limits.clone())),
            cfg,
            shares: RwLock::new(Arc::new(shares)),
            pipes: RwLock::new(srvsvc_pipes(&share_list)),
            share_list,
            opener,
            sessions: SessionTable::new(),
            opens: RwLock::new(GenSlab::new(MAX_OPENS_TOTAL).with_base(open_base)),
            files,
            notify: notify::NotifyHub::new(),
            durable: durable::DurableStore::default(),
            clients: clients::Clients::default(),
            persistent: std::sync::OnceLock::new(),
            connections: RwLock::new(HashMap::new()),
            conn_infos: RwLock::new(HashMap::new()),
            started: std::time::SystemTime::now(),
            ended_quic: status::EndedQuic::default(),
            observer: std::sync::OnceLock::new(),
            unix_identity: std::sync::OnceLock::new(),
            denials: audit::DenialLog::default(),
            tree_connects: audit::AuditWindow::tree_connects(),
            resume_keys: resume_key::ResumeKeys::new(),
            me: me.clone(),
        }))
    }

    /// Replaces the named-pipe factory (opens made later use the new one).
    pub fn set_pipe_factory(&self, f: Arc<PipeFactory>) {
        *self.pipes.write() = f;
    }

    pub(crate) fn pipe_factory(&self) -> Arc<PipeFactory> {
        self.pipes.read().clone()
    }

    /// An owned handle on this server, for work moved to the blocking pool. Callers always
    /// reach `&Server` through an `Arc`, so the upgrade succeeds while they run.
    pub(crate) fn self_arc(&self) -> Arc<Server> {
        match self.me.upgrade() {
            Some(s) => s,
            None => unreachable!("Server is only constructed inside an Arc"),
        }
    }

    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    /// The limits now. A reload replaces them: per-session caps apply to sessions that start
    /// later (open counts are checked against the current value), durable-open caps and
    /// time-outs to durable opens granted later.
    pub fn limits(&self) -> Arc<smbq_proto::Limits> {
        self.limits.read().clone()
    }

    /// Limits from a reload (see [`limits`](Self::limits)).
    pub fn set_limits(&self, limits: smbq_proto::Limits) {
        *self.limits.write() = Arc::new(limits);
    }

    /// The shares now (a reload replaces the registry; hold the `Arc` only briefly).
    pub fn shares(&self) -> Arc<ShareRegistry> {
        self.shares.read().clone()
    }

    /// Runs one request (TREE_CONNECT and every file command). NEGOTIATE, SESSION_SETUP,
    /// LOGOFF, ECHO and CANCEL belong to the engine. A response marked
    /// [`Response::disconnect`](smbq_proto::Response::disconnect) drops the connection instead.
    pub async fn handle(
        &self,
        conn: &ConnView,
        req: &Request,
        cancel: CancellationToken,
    ) -> Response {
        dispatch::dispatch(self, conn, req, cancel, dispatch::Arrival::default()).await
    }

    /// What a request starts on its connection's loop, before
    /// [`Server::handle_arrived`] runs it on a task of its own: the part whose order against
    /// the connection's later requests clients rely on (crate::dispatch::before_task).
    pub fn before_task(&self, conn: &ConnView, req: &Request) -> Arrival {
        dispatch::before_task(self, conn, req)
    }

    /// [`Server::handle`] for a request [`Server::before_task`] saw arrive.
    pub async fn handle_arrived(
        &self,
        conn: &ConnView,
        req: &Request,
        cancel: CancellationToken,
        arrival: Arrival,
    ) -> Response {
        dispatch::dispatch(self, conn, req, cancel, arrival).await
    }

    /// The session table every connection's engine shares with the server.
    pub fn session_table(&self) -> &Arc<SessionTable> {
        &self.sessions
    }

    /// The session is gone and takes everything with it: it leaves the table, so every
    /// engine still holding it answers USER_SESSION_DELETED from now on, and its trees and
    /// opens, durable ones too, are closed, applying delete-on-close and releasing locks.
    /// (LOGOFF, a lost connection and a replaced session keep durable opens instead:
    /// [`session_lost`](Self::session_lost).)
    pub fn session_ended(&self, session_id: u64) {
        self.end_session(session_id, false);
    }

    /// Ends session `session_id` (see [`session_ended`](Self::session_ended)); with
    /// `keep_durable` its durable opens are parked for a reconnect (crate::durable) rather
    /// than closed.
    fn end_session(&self, session_id: u64, keep_durable: bool) {
        self.clients.remove(session_id);
        let Some(st) = self
            .sessions
            .end(session_id)
            .and_then(|rec| rec.ext::<SessionState>())
        else {
            return;
        };
        for id in st.end_opens() {
            if !(keep_durable && self.park_open(id)) {
                self.close_open_by_id(id);
            }
        }
        st.take_trees();
    }

    /// The engine of connection `conn_id` established (or re-authenticated) session
    /// `session_id`, or bound the connection to it: the connection is one of its channels
    /// (the engine has added it to SessionRecord::channels already; adding is idempotent). A
    /// session that ended meanwhile (a LOGOFF in the same compound, a reconnect elsewhere)
    /// stays ended: its record is never made again, so nothing is left behind that no one
    /// would end.
    pub fn session_started(&self, session_id: u64, conn_id: u64) {
        if let Some(rec) = self.sessions.get(session_id) {
            rec.add_channel(conn_id);
            let _ = self.state_of(&rec);
        }
    }

    /// Session `session_id` was established (or bound) on a connection of the client that
    /// calls itself `client_guid` (crate::clients: where the client's lease breaks go).
    pub fn client_session(&self, client_guid: [u8; 16], session_id: u64) {
        let live = || {
            self.sessions
                .get(session_id)
                .is_some_and(|r| !r.has_ended())
        };
        if live() {
            self.clients.add(client_guid, session_id);
            // A session that ended meanwhile (end_session removed it before we added it)
            // leaves nothing behind.
            if !live() {
                self.clients.remove(session_id);
            }
        }
    }

    /// The session a break of a lease of `client_guid` held through session `holder` goes
    /// to: the client's oldest live session of the same user (crate::clients), else `holder`.
    pub(crate) fn lease_break_session(&self, client_guid: &[u8; 16], holder: u64) -> u64 {
        let Some(own) = self.sessions.get(holder) else {
            return holder;
        };
        self.clients
            .sessions_of(client_guid)
            .into_iter()
            .find(|id| {
                *id == holder
                    || self.sessions.get(*id).is_some_and(|r| {
                        !r.has_ended() && r.channel_count() > 0 && r.may_be_replaced_by(&own)
                    })
            })
            .unwrap_or(holder)
    }

    /// Connection `conn_id` is gone: it is no longer a channel of `session_id`, and a session
    /// left with no channel is lost (MS-SMB2 3.3.7.1: its durable opens wait for a
    /// reconnect, the rest close). A session bound to other connections goes on there.
    pub fn channel_lost(&self, session_id: u64, conn_id: u64) {
        let left = self
            .sessions
            .get(session_id)
            .map_or(0, |rec| rec.remove_channel(conn_id));
        if left == 0 {
            self.session_lost(session_id);
        }
    }

    /// Session `by` named `session_id` as its PreviousSessionId (MS-SMB2 3.3.5.5.3): if both
    /// belong to the same user, the old one ends now; otherwise nothing happens (a user must
    /// not end another's session by guessing its id). The connection it lived on needs no
    /// message: its engine finds the session ended in the table at its next request.
    /// Returns whether it ended.
    pub fn session_replaced(&self, session_id: u64, by: u64) -> bool {
        let (Some(old), Some(new)) = (self.sessions.get(session_id), self.sessions.get(by)) else {
            return false;
        };
        if !old.may_be_replaced_by(&new) {
            tracing::info!(
                previous = session_id,
                session = by,
                "PreviousSessionId names a session of another user; ignored"
            );
            return false;
        }
        // MS-SMB2 3.3.5.5.3: the old session goes, its durable opens wait for the reconnect.
        self.session_lost(session_id);
        true
    }

    /// The connection is gone. Sessions outlive connections in SMB3 (multichannel, durable
    /// reconnect), so the engine calls [`session_ended`](Self::session_ended) for sessions
    /// that had no other channel; nothing here is per connection yet.
    pub fn connection_ended(&self, conn_id: u64) {
        self.connections.write().remove(&conn_id);
        let info = self.conn_infos.write().remove(&conn_id);
        if let Some(s) = info.and_then(|i| i.path()) {
            self.ended_quic.add(s);
            if let Some(o) = self.observer() {
                o.quic_ended(s.rtt);
            }
        }
    }

    /// Sets the observer of handled requests, once (later calls are ignored).
    pub fn set_observer(&self, o: smbq_proto::observe::SharedObserver) {
        let _ = self.observer.set(o);
    }

    pub(crate) fn observer(&self) -> Option<&smbq_proto::observe::SharedObserver> {
        self.observer.get()
    }

    /// Turns per-user Unix identities on, once, before serving (crate::unix_identity).
    pub fn set_unix_identity(&self, p: unix_identity::UnixIdentityPolicy) {
        let _ = self.unix_identity.set(p);
    }

    pub(crate) fn unix_identity(&self) -> Option<&unix_identity::UnixIdentityPolicy> {
        self.unix_identity.get()
    }

    /// A new connection's loop shows itself to status reports (removed with it).
    pub fn register_connection_info(&self, info: Arc<status::ConnInfo>) {
        self.conn_infos.write().insert(info.id, info);
    }

    /// A new connection's task registers where its unsolicited messages go.
    pub fn register_connection(&self, conn_id: u64, tx: push::PushSender) {
        self.connections.write().insert(conn_id, tx);
    }

    /// Queues an unsolicited message for a connection; false if it is gone.
    pub fn push(&self, conn_id: u64, msg: push::Push) -> bool {
        self.connections
            .read()
            .get(&conn_id)
            .is_some_and(|tx| tx.send(msg).is_ok())
    }

    /// Queues a message for session `session_id` on the first of its channels that is still
    /// there (MS-SMB2 3.3.4.6, 3.3.4.7); false when none is.
    pub(crate) fn push_to_session(&self, session_id: u64, msg: push::Push) -> bool {
        let Some(rec) = self.sessions.get(session_id) else {
            return false;
        };
        rec.channels()
            .into_iter()
            .any(|c| self.push(c, msg.clone()))
    }

    /// The server's state of a live session, made on first use; `None` once it ended.
    pub(crate) fn session_state(&self, id: u64) -> Option<Arc<SessionState>> {
        let rec = self.sessions.get(id)?;
        self.state_of(&rec)
    }

    fn state_of(&self, rec: &smbq_proto::SessionRecord) -> Option<Arc<SessionState>> {
        let limits = self.limits();
        rec.ext_or_init(|| {
            SessionState::new(
                rec.id(),
                limits.max_trees_per_session,
                limits.max_opens_per_session,
            )
        })
    }

    /// The server's state of a live session, if a request or a channel made it.
    pub(crate) fn existing_session(&self, id: u64) -> Option<Arc<SessionState>> {
        self.sessions.get(id)?.ext::<SessionState>()
    }

    pub(crate) fn resume_keys(&self) -> &resume_key::ResumeKeys {
        &self.resume_keys
    }

    pub(crate) fn lookup_open(&self, volatile: u64) -> Option<Arc<Open>> {
        self.opens.read().get(volatile).cloned().flatten()
    }

    /// Reserves an open id (share modes and locks are keyed by it before the open exists).
    pub(crate) fn reserve_open_id(&self) -> Option<u64> {
        self.opens.write().insert(None)
    }

    pub(crate) fn install_open(&self, open: Arc<Open>) {
        let mut opens = self.opens.write();
        let id = open.volatile();
        if let Some(slot) = opens.get_mut(id) {
            *slot = Some(open);
        }
    }

    pub(crate) fn cancel_reservation(&self, id: u64) {
        let mut opens = self.opens.write();
        if matches!(opens.get(id), Some(None)) {
            opens.remove(id);
        }
    }

    /// The door to per-file open state (crate::open_state); what its verbs decide is
    /// carried out by [`Self::apply`] (crate::effects).
    pub(crate) fn open_state(&self) -> &dyn open_state::OpenState {
        &*self.files
    }

    /// Removes an open from every table and releases what it holds. Blocking when the file
    /// is deleted at last close (callers on the async side use `spawn_blocking`).
    pub(crate) fn close_open_by_id(&self, volatile: u64) -> Option<Arc<Open>> {
        let open = self.opens.write().remove(volatile).flatten()?;
        self.apply(self.release_open(&open));
        Some(open)
    }

    /// [`Self::close_open_by_id`] for a CLOSE: the directory lease breaks it causes go out
    /// after the answer ([`Self::after_answer`]).
    pub(crate) fn close_open_answering_first(&self, volatile: u64) -> Option<open_state::Effects> {
        let open = self.opens.write().remove(volatile).flatten()?;
        Some(self.release_open(&open))
    }

    /// Releases what `open` holds; returns the directory lease breaks this close causes (a
    /// delete, or the close of a file written through it), for the caller to send.
    fn release_open(&self, open: &Open) -> open_state::Effects {
        open.closed.store(true, Ordering::Release);
        self.unpersist(open); // crate::persist
        if let Some(r) = open.replay.lock().as_ref() {
            self.durable_store()
                .replayable
                .remove(r.client_guid, r.create_guid, open.volatile());
        }
        if let Some(s) = self.existing_session(open.session_id) {
            s.remove_open(open.volatile());
        }
        let OpenKind::File(f) = &open.kind else {
            return open_state::Effects::default();
        };
        let doc = open.delete_on_close.load(Ordering::Acquire);
        // CHANGE_NOTIFY waits on this open end; watchers hear of a delete-pending directory.
        let mut breaks = self.notify_closing(open, doc);
        // Share mode, locks and oplock go in one step, so a CREATE or lock request this
        // wakes finds the file free.
        let parent = open.parent_lease.map(|k| k.key);
        let last = self
            .open_state()
            .release(f.key, open.volatile(), doc, parent);
        if let Some(last) = &last
            && last.delete_stream
            && !last.delete
            && let Some(name) = f.stream.as_ref().and_then(|s| s.name())
        {
            // MS-FSA 2.1.5.4: a delete-pending stream goes with its last open.
            if let Err(e) = f.file.remove_xattr(&format!("{}{name}", streams::PREFIX)) {
                tracing::warn!(stream = %name, error = %e, "stream delete on close failed");
            } else {
                breaks.merge(self.notify_removed(open, last, Some(&name))); // CHANGE_NOTIFY (crate::notify)
            }
        }
        if let Some(last) = last.filter(|l| l.delete) {
            if let Some(vfs) = &open.tree.share.vfs {
                // The name must still be this file's: the path the open state kept may name
                // another file by now (a local rename, or a POSIX rename of a directory
                // above that a path here missed), and that one is not deleted. Samba's close
                // checks the file id the same way.
                let r = match f.key.named_by(vfs.as_ref(), &last.path) {
                    Some(false) => Err(std::io::Error::other("the name is another file's now")),
                    _ if last.is_dir => vfs.rmdir(&last.path),
                    _ => vfs.unlink(&last.path),
                };
                if let Err(e) = r {
                    tracing::warn!(path = %last.path, error = %e, "delete on close failed");
                } else {
                    breaks.merge(self.notify_removed(open, &last, None)); // CHANGE_NOTIFY (crate::notify)
                }
            }
            // Only now may an open of the name go on (FileStates::deleted).
            self.open_state().deleted(f.key);
        }
        breaks
    }
}

/// The open-state implementation: the sharded in-process table (crate::file_state). The
/// crate's own tests run on the one-table implementation too, with
/// `SMBQ_TEST_OPEN_STATE=one-table` (scripts/test.sh does both).
fn new_open_state() -> Box<dyn open_state::OpenState> {
    #[cfg(test)]
    if std::env::var("SMBQ_TEST_OPEN_STATE").as_deref() == Ok("one-table") {
        return Box::new(FileStates::<file_state::OneTable>::default());
    }
    Box::new(FileStates::new())
}

/// The pipes served by default: srvsvc (MS-SRVS share enumeration) over smbq-rpc.
fn srvsvc_pipes(list: &Arc<RwLock<Arc<pipe::ShareList>>>) -> Arc<PipeFactory> {
    let list = list.clone();
    Arc::new(move |name: &str, cfg: &ServerConfig, who: &Identity| {
        if !smbq_rpc::pipe::PipeEndpoint::is_supported_pipe(name) {
            return None;
        }
        let list = list.read().clone();
        let visible = Arc::new(list.visible_to(who, cfg));
        let ep = smbq_rpc::pipe::PipeEndpoint::srvsvc(cfg.server_name.clone(), visible);
        Some(Box::new(ep) as Box<dyn PipeIo>)
    })
}

/// Case-insensitive comparison of share and user names (Unicode simple case folding).
pub(crate) fn names_eq(a: &str, b: &str) -> bool {
    smbq_vfs::simple_lowercase_eq(a, b)
}

#[cfg(test)]
mod tests;
