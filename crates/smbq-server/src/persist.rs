//! Persistent handles across a restart of the server (MS-SMB2 3.3.5.9.10 on continuously
//! available shares; issue 37). A persistent open's state goes into the store
//! (crate::durable::store) whenever a response depends on it: the CREATE that granted it, a
//! LOCK, a lease break acknowledgment, a delete-on-close, a reclaim and a disconnect; its
//! close removes it. At start, [`Server::open_persistent_store`] reads the store and holds
//! each open again, as a parked open waiting for its client: its share mode, lease or
//! oplock, byte-range locks and delete-pending are back, other clients meet them as before
//! the restart, and the client reclaims the open with DH2C on a new connection.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use parking_lot::Mutex;
use smbq_vfs::{CreateMode, FileKind, OpenOptions, RelPath};
use smbq_wire::FileId;
use smbq_wire::create::OplockLevel;

use crate::Server;
use crate::access::mask;
use crate::durable::DurableGrant;
use crate::durable::store::{
    Claim, Claimant, LeaseRecord, LockRecord, RECORD_VERSION, Record, RecordStore, Store,
};
use crate::file_state::lease::LeaseKey;
use crate::file_state::oplock::{Level, Owner};
use crate::file_state::{FileKey, NewOpen};
use crate::open_state::{Changes as _, Queries as _, Restored};
use crate::tables::{FileOpen, Open, OpenKind, Tree};

/// Runs `f`, a store commit that waits for the disk, where the runtime allows blocking (a
/// worker of the multi-thread runtime hands its other tasks on meanwhile); inline otherwise.
fn blocking_io<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// What a start made of the store.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Opens held again for their clients.
    pub restored: usize,
    /// Why each record that was not restored was dropped.
    pub dropped: Vec<String>,
}

impl Server {
    /// Opens the persistent handles' store at `path` (once) and restores the opens it holds.
    /// Must run inside the runtime (each restored open gets its timeout timer).
    pub fn open_persistent_store(&self, path: &Path) -> std::io::Result<RestoreReport> {
        let (store, loaded) = Store::open(path)?;
        self.use_record_store(Arc::new(store))?;
        let mut report = self.adopt_persistent(loaded.records);
        report.dropped.splice(0..0, loaded.dropped);
        Ok(report)
    }

    /// Keeps persistent opens' records in `store` from now on (once): this server's own
    /// database, or a store shared by the nodes of a cluster.
    pub fn use_record_store(&self, store: Arc<dyn RecordStore>) -> std::io::Result<()> {
        self.persistent
            .set(store)
            .map_err(|_| std::io::Error::other("the persistent store is open already"))
    }

    /// Holds the opens of `records` again, each parked for its client until its timeout: the
    /// records of the last run at a start, or those of a cluster node that died. A record
    /// that cannot be held is removed from the store and said why. Must run inside the
    /// runtime (each open gets its timeout timer).
    pub fn adopt_persistent(&self, records: Vec<Record>) -> RestoreReport {
        let mut report = RestoreReport::default();
        for rec in records {
            match self.restore(&rec) {
                Ok(()) => report.restored += 1,
                Err(why) => {
                    self.forget_record(rec.file_id);
                    report.dropped.push(format!(
                        "open {} ({}\\{}): {why}",
                        rec.file_id, rec.share, rec.path
                    ));
                }
            }
        }
        for d in &report.dropped {
            tracing::warn!(dropped = %d, "persistent open not restored");
        }
        tracing::info!(
            restored = report.restored,
            dropped = report.dropped.len(),
            "persistent opens"
        );
        report
    }

    /// Whether durable opens' records are kept in a store (a CA share, or a cluster node).
    pub(crate) fn shares_records(&self) -> bool {
        self.persistent.get().is_some()
    }

    /// A durable reconnect (DH2C, DHnC) names open `id` of file `file`, which this server
    /// does not hold: the store may know of it ([`RecordStore::claim`]). Ok when there is
    /// nothing to claim or the open is now held here (parked for the reclaim);
    /// FILE_NOT_AVAILABLE while another live server holds a persistent one.
    pub(crate) fn claim_parked(
        &self,
        id: u64,
        file: Option<FileKey>,
        who: Claimant<'_>,
    ) -> Result<(), smbq_wire::NtStatus> {
        let Some(store) = self.persistent.get() else {
            return Ok(());
        };
        match blocking_io(|| store.claim(id, file, who)) {
            Claim::Unknown => Ok(()),
            Claim::Elsewhere => Err(smbq_wire::NtStatus::FILE_NOT_AVAILABLE),
            Claim::Adopted(rec) => {
                let report = self.adopt_persistent(vec![*rec]);
                if report.restored == 1 {
                    tracing::info!(open = id, "persistent open held here for its reclaim");
                }
                blocking_io(|| store.adopted(id));
                Ok(())
            }
        }
    }

    /// Writes `open`'s state to the store if it is a persistent open; false if that failed
    /// (the caller then does not promise persistence). True for any other open.
    ///
    /// Writes of one open take turns (`Open::persisting`), each describing the open when its
    /// turn comes: a LOCK's and a lease acknowledgment's writes, made at once, leave the newer
    /// state in the store, not whichever write etcd or redb took last.
    pub(crate) fn persist(&self, open: &Open) -> bool {
        match self.persist_now(open) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(open = open.volatile(), error = %e, "persistent store write failed");
                self.write_again_later(open);
                false
            }
        }
    }

    /// [`Self::persist`] without the retry.
    fn persist_now(&self, open: &Open) -> std::io::Result<()> {
        let Some(store) = self.persistent.get() else {
            return Ok(());
        };
        blocking_io(|| {
            let _turn = open.persisting.lock();
            if open.is_closed() {
                return Ok(());
            }
            let Some(rec) = self.record_of(open) else {
                return Ok(());
            };
            let r = store.put(&rec);
            // A CLOSE that began meanwhile (it marks the open closed, then waits its turn
            // to remove the record) finds the record gone or removes it itself; this only
            // makes sure a closed open never comes back at a restart.
            if open.is_closed() {
                self.forget_record(rec.file_id);
            }
            r
        })
    }

    /// The store did not take `open`'s record: what it holds is older than the open. That
    /// matters where the change cannot be taken back: an unlock (on a cluster, other nodes'
    /// READ and WRITE meet the stale lock in the record's hold), a lease acknowledgment, a
    /// change of delete-pending. (A lock that could not be recorded was not granted.) The
    /// record is written again in the background, after 0.5 s and then twice as long each
    /// time up to 10 s, until the store takes it or the open is closed: one task per open,
    /// which `Open::record_behind` says is running.
    fn write_again_later(&self, open: &Open) {
        use std::sync::atomic::Ordering::AcqRel;
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if open.record_behind.swap(true, AcqRel) {
            return;
        }
        let (me, id) = (self.me.clone(), open.volatile());
        rt.spawn(async move {
            let mut wait = std::time::Duration::from_millis(500);
            loop {
                tokio::time::sleep(wait).await;
                let Some(srv) = me.upgrade() else { return };
                let Some(open) = srv.lookup_open(id).or_else(|| srv.durable.parked_open(id)) else {
                    return;
                };
                let tried = tokio::task::spawn_blocking(move || {
                    // Cleared before the write: a write failing from here on starts its own
                    // task; one that failed before is older than this write, which takes its
                    // turn after it.
                    open.record_behind
                        .store(false, std::sync::atomic::Ordering::Release);
                    let written = srv.persist_now(&open).is_ok();
                    // Failed, and another task started meanwhile: it goes on instead.
                    let other = !written && open.record_behind.swap(true, AcqRel);
                    (written, other)
                })
                .await;
                match tried {
                    Ok((true, _)) => {
                        tracing::info!(open = id, "persistent store took the record again");
                        return;
                    }
                    Ok((false, false)) => {}
                    Ok((false, true)) | Err(_) => return,
                }
                wait = (wait * 2).min(std::time::Duration::from_secs(10));
            }
        });
    }

    /// Writes the records of the persistent ones among `opens` (live or parked) again: their
    /// state changed ([`crate::open_state::Effects::recorded`]).
    pub(crate) fn persist_opens(&self, opens: &[u64]) {
        if self.persistent.get().is_none() {
            return;
        }
        for &id in opens {
            if let Some(o) = self
                .lookup_open(id)
                .or_else(|| self.durable.parked_open(id))
            {
                self.persist(&o);
            }
        }
    }

    /// Whether the store has room for another persistent open of `user`'s: fewer than
    /// `max_durable_opens` in all and `max_durable_opens_per_user` of the account's, so one
    /// client cannot take it all.
    pub(crate) fn persistent_room_for(&self, user: &str) -> bool {
        let limits = self.limits();
        self.persistent_records() < limits.max_durable_opens
            && self.persistent_records_of(user) < limits.max_durable_opens_per_user
    }

    /// How many persistent opens of `user`'s the store holds (0 without a store).
    pub fn persistent_records_of(&self, user: &str) -> usize {
        self.persistent.get().map_or(0, |s| s.records_of(user))
    }

    /// How many persistent opens the store holds (0 without a store).
    pub fn persistent_records(&self) -> usize {
        self.persistent
            .get()
            .and_then(|s| s.records().ok())
            .unwrap_or(0)
    }

    /// Gives up parked durable or persistent open `id` for another cluster node, which its
    /// client reached, to hold: returns its record as its client left it, and closes the
    /// open here without removing a persistent one's record (the other node restores the
    /// open from it). `None` when `id` is not a durable open parked here, or its file is
    /// delete-pending (closing it here could unlink the file: it stays until reclaimed here
    /// or expired).
    pub fn hand_over_parked(
        &self,
        id: u64,
        user: &str,
        create_guid: Option<[u8; 16]>,
    ) -> Option<Record> {
        let open = self.durable.parked_open(id)?;
        // The open's turn (`Open::persisting`), from its description until it is no longer
        // persistent: a write of its record under way here must not land after the record is
        // the other node's, nor remove it.
        let (rec, parked) = blocking_io(|| {
            let _turn = open.persisting.lock();
            let grant = open.durable.lock().clone()?;
            // Only for its own user, and the CreateGuid it was made with when one is named
            // (the checks of the reclaim, crate::handlers::create::durable, made early).
            let same_guid = create_guid.is_none_or(|g| g == grant.create_guid.unwrap_or([0; 16]));
            if !grant.user.eq_ignore_ascii_case(user) || !same_guid {
                return None;
            }
            let rec = self
                .describe(&open, grant)
                .filter(|r| !r.delete_pending && r.away)?;
            let accept = |p: &crate::durable::Parked| {
                let same = Arc::ptr_eq(&p.open, &open);
                if same { Ok(()) } else { Err(()) }
            };
            let parked = self.durable.take_if(id, (), accept).ok()?;
            // Closed as an open that is not persistent: its record stays for the other
            // node, and nothing is deleted here.
            if let Some(g) = parked.open.durable.lock().as_mut() {
                g.persistent = false;
            }
            Some((rec, parked))
        })?;
        parked
            .open
            .delete_on_close
            .store(false, std::sync::atomic::Ordering::Release);
        self.close_parked_now(&parked.open);
        tracing::info!(open = id, "durable open handed over to another node");
        Some(rec)
    }

    /// The open is closed: its record goes, after any write of it under way (each
    /// [`Self::persist`] checks for the close before it writes).
    pub(crate) fn unpersist(&self, open: &Open) {
        let persistent = open.durable.lock().as_ref().is_some_and(|g| g.persistent);
        if persistent {
            blocking_io(|| {
                let _turn = open.persisting.lock();
                self.forget_record(open.file_id.persistent);
            });
        }
    }

    /// `open` is no longer durable or persistent (it became resilient, MS-SMB2 3.3.5.15.9):
    /// its record goes and `grant` replaces its grant, in its turn, so no write of the
    /// record under way lands after the removal.
    pub(crate) fn stop_persisting(&self, open: &Open, grant: DurableGrant) {
        blocking_io(|| {
            let _turn = open.persisting.lock();
            if open.durable.lock().as_ref().is_some_and(|g| g.persistent) {
                self.forget_record(open.file_id.persistent);
            }
            *open.durable.lock() = Some(grant);
        });
    }

    pub(crate) fn forget_record(&self, id: u64) {
        if let Some(store) = self.persistent.get()
            && let Err(e) = store.remove(id)
        {
            tracing::error!(open = id, error = %e, "persistent store removal failed");
        }
    }

    /// The record of a persistent open of a file or directory (named streams are not kept).
    fn record_of(&self, open: &Open) -> Option<Record> {
        let g = open.durable.lock().clone().filter(|g| g.persistent)?;
        self.describe(open, g)
    }

    /// The record of durable open `open`, granted `g`, of a file or directory.
    fn describe(&self, open: &Open, g: DurableGrant) -> Option<Record> {
        let f = open.file().filter(|f| f.stream.is_none())?;
        let held = self.open_state().held_by(f.key, open.volatile());
        let lease = self
            .open_state()
            .caching_of(f.key, open.volatile())
            .1
            .map(|(k, granted)| LeaseRecord {
                key: k.key,
                state: granted.state,
                epoch: granted.v2.then_some(granted.epoch),
            });
        let oplock = match (&lease, held.oplock) {
            (Some(_), _) => OplockLevel::LEASE.0,
            (None, Some(l)) => l.to_wire(),
            (None, None) => 0,
        };
        Some(Record {
            version: RECORD_VERSION,
            file_id: open.file_id.persistent,
            create_guid: g.create_guid.unwrap_or_default(),
            client_guid: g.client_guid,
            user: g.user,
            timeout_ms: u64::try_from(g.timeout.as_millis()).unwrap_or(u64::MAX),
            share: open.tree.share.cfg.name.clone(),
            // The file's path as the share-mode table knows it (a rename through another open
            // of the file moves it there), else the open's own.
            path: self
                .files
                .path(f.key)
                .unwrap_or_else(|| open.path())
                .as_str()
                .to_owned(),
            is_dir: f.is_dir,
            dev: f.key.dev,
            ino: f.key.ino,
            granted: open.granted,
            share_access: open.share_access,
            create_options: open.create_options,
            delete_on_close: open
                .delete_on_close
                .load(std::sync::atomic::Ordering::Acquire),
            delete_pending: self.open_state().delete_pending(f.key),
            oplock,
            lease,
            locks: held
                .locks
                .into_iter()
                .map(|(offset, length, exclusive)| LockRecord {
                    offset,
                    length,
                    exclusive,
                })
                .collect(),
            parent_lease: open.parent_lease.map(|k| k.key),
            posix: open.posix,
            away: self.durable.is_parked(open.volatile()),
            persistent: g.persistent,
        })
    }

    /// Holds the open of `rec` again, parked for its client; why not, otherwise.
    fn restore(&self, rec: &Record) -> Result<(), String> {
        let share = self.shares().find(&rec.share).ok_or("the share is gone")?;
        if rec.persistent && !share.cfg.continuous_availability {
            return Err("the share is no longer continuously available".into());
        }
        // The server restores as itself, not as the account: what the share no longer lets
        // anyone do, a restored open may not do either.
        if share.cfg.read_only && rec.granted & mask::WRITE_RIGHTS != 0 {
            return Err("the share is read-only now and the open could change the file".into());
        }
        let vfs = share.vfs.clone().ok_or("not a disk share")?;
        let path = RelPath::parse(&rec.path).map_err(|e| format!("bad path: {e:?}"))?;
        let write =
            !rec.is_dir && rec.granted & (mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA) != 0;
        let opts = OpenOptions {
            read: true,
            write,
            create: CreateMode::OpenExisting,
            directory: Some(rec.is_dir),
            mode: 0,
        };
        let file = vfs
            .open(&path, &opts)
            .map_err(|e| format!("cannot open: {e}"))?
            .file;
        let st = file.stat().map_err(|e| format!("cannot stat: {e}"))?;
        // A file put in its place meanwhile is not the open's file.
        if st.dev != rec.dev || st.ino != rec.ino || (st.kind == FileKind::Dir) != rec.is_dir {
            return Err("another file is at its path now".into());
        }
        let key = FileKey::of(&st);
        let id = rec.file_id;
        let open = restored_open(rec, &share, (file, key), &path);
        if !self.opens.write().insert_at(id, Some(open.clone())) {
            return Err("its id is taken".into());
        }
        let held = self.hold_again(&open, rec, key, &path);
        let parked = held.is_ok() && self.park_open(id);
        if !parked {
            // Undo what was registered (share mode, caching, locks) without acting on the
            // file: an open that is not restored deletes nothing at its close.
            open.delete_on_close
                .store(false, std::sync::atomic::Ordering::Release);
            if let Some(p) = self.durable.take(id) {
                self.close_parked_now(&p.open);
            } else {
                self.close_open_by_id(id);
            }
            return Err(held
                .err()
                .unwrap_or_else(|| "the store of disconnected opens is full".into()));
        }
        // Last, once nothing can fail: a file is never left delete-pending by an open that
        // was not restored.
        if rec.delete_pending {
            let _ = self.open_state().on_disposition(key, true, None);
        }
        Ok(())
    }

    /// Registers a restored open's share mode, delete-pending, lease or oplock and locks.
    fn hold_again(
        &self,
        open: &Open,
        rec: &Record,
        key: FileKey,
        path: &RelPath,
    ) -> Result<(), String> {
        let id = open.volatile();
        let new = NewOpen {
            open_id: id,
            checked: rec.granted,
            access: rec.granted,
            share_access: rec.share_access,
            path,
            is_dir: rec.is_dir,
            posix: rec.posix,
            restoring: true,
        };
        let state = self.open_state();
        state
            .admit(key, &new)
            .map_err(|s| format!("its share mode no longer fits ({s:?})"))?;
        let lease = rec.lease.map(|l| {
            let k = LeaseKey {
                client_guid: rec.client_guid,
                key: l.key,
            };
            (k, l.state, l.epoch)
        });
        let level = Level::from_wire(rec.oplock).unwrap_or(Level::None);
        let owner = Owner {
            session_id: 0,
            file_id: open.file_id,
        };
        let locks: Vec<(u64, u64, bool)> = rec
            .locks
            .iter()
            .map(|l| (l.offset, l.length, l.exclusive))
            .collect();
        let held = Restored {
            oplock: (level, owner),
            lease,
            is_dir: rec.is_dir,
            locks: &locks,
        };
        state.restore(key, id, held)
    }
}

/// The open a record describes, on `file` (whose identity `key` was checked), in a tree of its
/// own: no session holds it until its client reclaims it.
fn restored_open(
    rec: &Record,
    share: &Arc<crate::share::Share>,
    (file, key): (Box<dyn smbq_vfs::VfsFile>, FileKey),
    path: &RelPath,
) -> Arc<Open> {
    let id = rec.file_id;
    let tree = Arc::new(Tree {
        id: 0,
        session_id: 0,
        share: share.clone(),
        maximal_access: rec.granted,
        encrypt: share.cfg.encrypt,
        ca: share.cfg.continuous_availability,
    });
    Arc::new(Open {
        file_id: FileId {
            persistent: id,
            volatile: id,
        },
        session_id: 0,
        tree,
        kind: OpenKind::File(FileOpen {
            file,
            key,
            is_dir: rec.is_dir,
            dir: Mutex::new(Default::default()),
            stream: None,
        }),
        path: Mutex::new(path.clone()),
        granted: rec.granted,
        share_access: rec.share_access,
        create_options: rec.create_options,
        delete_on_close: AtomicBool::new(rec.delete_on_close),
        position: AtomicU64::new(0),
        mode: AtomicU32::new(0),
        closed: AtomicBool::new(false),
        ea_index: AtomicU32::new(0),
        durable: Mutex::new(Some(DurableGrant {
            create_guid: Some(rec.create_guid).filter(|g| *g != [0; 16]),
            client_guid: rec.client_guid,
            user: rec.user.clone(),
            timeout: std::time::Duration::from_millis(rec.timeout_ms),
            resilient: false,
            persistent: rec.persistent,
        })),
        replay: Mutex::new(None),
        channel: Mutex::new(Default::default()),
        lock_seq: Mutex::new(Default::default()),
        parent_lease: rec.parent_lease.map(|key| LeaseKey {
            client_guid: rec.client_guid,
            key,
        }),
        modified: AtomicBool::new(false),
        sticky_write: AtomicBool::new(false),
        persisting: Default::default(),
        record_behind: AtomicBool::new(false),
        posix: rec.posix,
    })
}
