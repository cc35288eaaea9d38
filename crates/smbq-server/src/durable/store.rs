//! The store of persistent handles (MS-SMB2 3.3.5.9.10, continuously available shares): what
//! must outlive the process, one record per persistent open, in an embedded database (redb)
//! under the state directory. A record is committed, and on stable storage, before the
//! response that depends on it is sent (the CREATE that granted the handle, a LOCK, a lease
//! break acknowledgment, a delete-on-close); a close removes it. At start the server loads
//! the records and holds the opens again for their clients (crate::persist).
//!
//! Nothing here trusts what it reads back: a record that does not decode, or names a share
//! or file that is not what it was, is dropped and said so; a database that cannot be opened
//! is moved aside and a new one started, so a damaged store never keeps the server down and
//! never serves a wrong open.

use std::io;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};

/// Persistent opens by FileId.Persistent; values are JSON [`Record`]s.
const OPENS: TableDefinition<u64, &[u8]> = TableDefinition::new("persistent_opens");

/// The layout of [`Record`]; a record of another version is dropped.
pub const RECORD_VERSION: u32 = 1;

/// One persistent open, as it must be restored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    /// FileId.Persistent (and the volatile id it is restored under).
    pub file_id: u64,
    pub create_guid: [u8; 16],
    pub client_guid: [u8; 16],
    /// The account that opened it; only it may reclaim the open.
    pub user: String,
    /// Open.DurableOpenTimeout, in milliseconds.
    pub timeout_ms: u64,
    pub share: String,
    /// Share-relative, components joined by `/`.
    pub path: String,
    pub is_dir: bool,
    /// The file's identity when it was opened: a file found at the path with another identity
    /// is not the open's file.
    pub dev: u64,
    pub ino: u64,
    pub granted: u32,
    pub share_access: u32,
    pub create_options: u32,
    pub delete_on_close: bool,
    /// The file is delete-pending (set through this open or another).
    pub delete_pending: bool,
    /// The wire oplock level (0 for none, 0xFF for a lease).
    pub oplock: u8,
    pub lease: Option<LeaseRecord>,
    pub locks: Vec<LockRecord>,
    /// The V2 ParentLeaseKey the open named.
    pub parent_lease: Option<[u8; 16]>,
    /// A POSIX open (crate::posix): restored as one. Records written before it existed
    /// are Windows opens.
    #[serde(default)]
    pub posix: bool,
    /// Its client is away: the open is parked, waiting for a reclaim. Records written
    /// before it existed were read back only at a start, when every open waits.
    #[serde(default)]
    pub away: bool,
    /// A persistent handle. A durable one that is not has a record only while a cluster
    /// node hands it to another (smbq-cluster's crate::ca).
    #[serde(default = "persistent_by_default")]
    pub persistent: bool,
}

/// Records written before [`Record::persistent`] existed were all persistent.
fn persistent_by_default() -> bool {
    true
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub key: [u8; 16],
    pub state: u32,
    /// `Some` for a V2 lease.
    pub epoch: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

/// Where persistent opens' records live: this server's own database ([`Store`]), or one
/// that several servers share (a cluster's, in etcd). A record is on stable storage (or
/// replicated) when `put` returns; the server sends the response that depends on it only
/// then.
pub trait RecordStore: Send + Sync + std::fmt::Debug {
    /// Writes `rec`, replacing the open's earlier record.
    fn put(&self, rec: &Record) -> io::Result<()>;
    /// Removes the record of open `id`, if any.
    fn remove(&self, id: u64) -> io::Result<()>;
    /// How many of the records this server holds are `user`'s.
    fn records_of(&self, user: &str) -> usize;
    /// How many records this server holds.
    fn records(&self) -> io::Result<usize>;
    /// A durable reconnect (DH2C, DHnC) names open `id` of file `file` (when the name
    /// the reconnect carries is found), which this server does not hold: whether another
    /// server does. A store shared with other servers hands over the record of one that
    /// died, or that gave the open up for this one ([`Claim::Adopted`]), for this server
    /// to hold the open again.
    fn claim(&self, id: u64, file: Option<crate::file_state::FileKey>, who: Claimant<'_>) -> Claim {
        let _ = (id, file, who);
        Claim::Unknown
    }
    /// The open a claim handed to this server ([`Claim::Adopted`]) is held here again, or
    /// could not be: a store that moved a durable (not persistent) open's record only for
    /// the way over removes it now, once the open's locks are in this server's tables.
    fn adopted(&self, id: u64) {
        let _ = id;
    }
}

/// Who reconnects ([`RecordStore::claim`]): nothing moves for another user's open, or one
/// of another CreateGuid when the reconnect names one (DH2C).
#[derive(Clone, Copy, Debug)]
pub struct Claimant<'a> {
    pub user: &'a str,
    pub create_guid: Option<[u8; 16]>,
}

/// What [`RecordStore::claim`] found.
#[derive(Debug)]
pub enum Claim {
    /// No record: the open is gone (OBJECT_NAME_NOT_FOUND).
    Unknown,
    /// A live server holds it, connected or waiting for its client there: MS-SMB2 3.3.5.9.12
    /// (the open still has a connection) says STATUS_FILE_NOT_AVAILABLE; the client tries
    /// again.
    Elsewhere,
    /// The record of a server that died, now this server's to hold.
    Adopted(Box<Record>),
}

impl RecordStore for Store {
    fn put(&self, rec: &Record) -> io::Result<()> {
        Store::put(self, rec)
    }

    fn remove(&self, id: u64) -> io::Result<()> {
        Store::remove(self, id)
    }

    fn records_of(&self, user: &str) -> usize {
        Store::records_of(self, user)
    }

    fn records(&self) -> io::Result<usize> {
        Store::records(self)
    }
}

/// The database of persistent opens.
pub struct Store {
    db: std::sync::Arc<Database>,
    path: PathBuf,
    /// A removal committed without waiting for stable storage, not yet flushed.
    dirty: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Whose each record is, and how many each user has, for the per-user bound
    /// (`max_durable_opens_per_user`); as many entries as records.
    owners: parking_lot::Mutex<Owners>,
    /// Tests: every write fails, as on a full or failing disk.
    #[cfg(test)]
    fail_puts: std::sync::atomic::AtomicBool,
}

/// The owners of the records (see [`Store::records_of`]).
#[derive(Debug, Default)]
struct Owners {
    of: std::collections::HashMap<u64, String>,
    count: std::collections::HashMap<String, usize>,
}

impl Owners {
    fn add(&mut self, id: u64, user: &str) {
        if self.of.get(&id).is_some_and(|u| u == user) {
            return;
        }
        self.remove(id);
        self.of.insert(id, user.to_owned());
        *self.count.entry(user.to_owned()).or_default() += 1;
    }

    fn remove(&mut self, id: u64) {
        let Some(user) = self.of.remove(&id) else {
            return;
        };
        if let Some(n) = self.count.get_mut(&user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.count.remove(&user);
            }
        }
    }
}

/// How soon a removal reaches stable storage (`Store::remove`).
pub const REMOVAL_FLUSH: std::time::Duration = std::time::Duration::from_millis(100);

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// What opening the store found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    /// Why each record (or the whole database) that could not be used was dropped.
    pub dropped: Vec<String>,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Store {
    /// Opens (or creates, owner-only) the store at `path` and reads every record. A damaged
    /// database is renamed `<path>.damaged-<unix seconds>` and a new one started; any other
    /// failure (another process has it open, an I/O error, a newer file format) is an error,
    /// so the server does not start without its persistent handles.
    pub fn open(path: &Path) -> io::Result<(Store, Loaded)> {
        let mut loaded = Loaded::default();
        create_private(path)?;
        let db = match Database::create(path) {
            Ok(db) => db,
            Err(e) if damaged(&e) => {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let aside = path.with_extension(format!("damaged-{secs}"));
                std::fs::rename(path, &aside)?;
                loaded.dropped.push(format!(
                    "the store could not be opened ({e}); moved to {} and started anew",
                    aside.display()
                ));
                create_private(path)?;
                Database::create(path).map_err(other)?
            }
            Err(e) => return Err(other(e)),
        };
        let store = Store {
            db: std::sync::Arc::new(db),
            path: path.to_owned(),
            dirty: Default::default(),
            owners: Default::default(),
            #[cfg(test)]
            fail_puts: Default::default(),
        };
        store.read_all(&mut loaded)?;
        {
            let mut owners = store.owners.lock();
            for rec in &loaded.records {
                owners.add(rec.file_id, &rec.user);
            }
        }
        store.start_flusher();
        Ok((store, loaded))
    }

    /// A thread that makes removals durable within [`REMOVAL_FLUSH`] (an empty durable
    /// commit persists the ones before it); it ends with the store.
    fn start_flusher(&self) {
        let db = std::sync::Arc::downgrade(&self.db);
        let dirty = self.dirty.clone();
        let spawned = std::thread::Builder::new()
            .name("smbq-persist".into())
            .spawn(move || {
                use std::sync::atomic::Ordering;
                loop {
                    std::thread::sleep(REMOVAL_FLUSH);
                    let Some(db) = db.upgrade() else {
                        return;
                    };
                    if dirty.swap(false, Ordering::AcqRel)
                        && let Err(e) = flush(&db)
                    {
                        dirty.store(true, Ordering::Release);
                        tracing::error!(error = %e, "persistent store flush failed");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "no persistent store flusher: removals wait for the next write");
        }
    }

    fn read_all(&self, loaded: &mut Loaded) -> io::Result<()> {
        let mut bad = Vec::new();
        {
            let r = self.db.begin_read().map_err(other)?;
            let t = match r.open_table(OPENS) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
                Err(e) => return Err(other(e)),
            };
            for entry in t.iter().map_err(other)? {
                let (k, v) = match entry {
                    Ok(kv) => kv,
                    Err(e) => {
                        loaded.dropped.push(format!("an unreadable entry: {e}"));
                        continue;
                    }
                };
                let id = k.value();
                match serde_json::from_slice::<Record>(v.value()) {
                    Ok(rec) if rec.version == RECORD_VERSION && rec.file_id == id => {
                        loaded.records.push(rec);
                    }
                    Ok(rec) => {
                        loaded.dropped.push(format!(
                            "open {id}: record version {} or id {} does not match",
                            rec.version, rec.file_id
                        ));
                        bad.push(id);
                    }
                    Err(e) => {
                        loaded
                            .dropped
                            .push(format!("open {id}: record does not decode: {e}"));
                        bad.push(id);
                    }
                }
            }
        }
        for id in bad {
            self.remove(id)?;
        }
        Ok(())
    }

    /// Writes `rec` (replacing the open's earlier record); durable when it returns.
    pub fn put(&self, rec: &Record) -> io::Result<()> {
        #[cfg(test)]
        if self.fail_puts.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(io::Error::other("injected store failure"));
        }
        let bytes = serde_json::to_vec(rec).map_err(other)?;
        let w = self.db.begin_write().map_err(other)?;
        {
            let mut t = w.open_table(OPENS).map_err(other)?;
            t.insert(rec.file_id, bytes.as_slice()).map_err(other)?;
        }
        w.commit().map_err(other)?;
        self.owners.lock().add(rec.file_id, &rec.user);
        Ok(())
    }

    /// Removes the record of open `id`, if any. Nothing waits on a removal (a CLOSE's answer
    /// promises nothing a crash could take back: at worst the open comes back after a crash
    /// and expires unclaimed), so it is committed at once but reaches stable storage with
    /// the next write or within [`REMOVAL_FLUSH`], saving a CLOSE its fsync.
    pub fn remove(&self, id: u64) -> io::Result<()> {
        let mut w = self.db.begin_write().map_err(other)?;
        w.set_durability(redb::Durability::None).map_err(other)?;
        {
            let mut t = w.open_table(OPENS).map_err(other)?;
            t.remove(id).map_err(other)?;
        }
        w.commit().map_err(other)?;
        self.owners.lock().remove(id);
        self.dirty.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Tests: makes every later [`Self::put`] fail (`true`) or work again.
    #[cfg(test)]
    pub fn fail_puts(&self, fail: bool) {
        self.fail_puts
            .store(fail, std::sync::atomic::Ordering::Relaxed);
    }

    /// Makes every earlier commit durable now.
    pub fn flush(&self) -> io::Result<()> {
        self.dirty
            .store(false, std::sync::atomic::Ordering::Release);
        flush(&self.db)
    }

    /// How many records of `user`'s the store holds.
    pub fn records_of(&self, user: &str) -> usize {
        self.owners.lock().count.get(user).copied().unwrap_or(0)
    }

    /// How many records the store holds.
    pub fn records(&self) -> io::Result<usize> {
        let r = self.db.begin_read().map_err(other)?;
        match r.open_table(OPENS) {
            Ok(t) => Ok(usize::try_from(t.len().map_err(other)?).unwrap_or(usize::MAX)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(other(e)),
        }
    }
}

/// Whether opening failed on the file's contents (moved aside then), not on its access.
fn damaged(e: &redb::DatabaseError) -> bool {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(_)) => true,
        redb::DatabaseError::Storage(redb::StorageError::Io(io)) => matches!(
            io.kind(),
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData
        ),
        _ => false,
    }
}

/// Makes `path` an empty owner-only file if it does not exist (redb would create it with the
/// process umask: the records name users, paths and GUIDs).
fn create_private(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// An empty durable commit: it persists the non-durable ones before it.
fn flush(db: &Database) -> io::Result<()> {
    db.begin_write().map_err(other)?.commit().map_err(other)
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.dirty.load(std::sync::atomic::Ordering::Acquire) {
            let _ = flush(&self.db);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record(id: u64) -> Record {
        Record {
            version: RECORD_VERSION,
            file_id: id,
            create_guid: [1; 16],
            client_guid: [2; 16],
            user: "alice".into(),
            timeout_ms: 60_000,
            share: "ca".into(),
            path: "dir/f".into(),
            is_dir: false,
            dev: 3,
            ino: 4,
            granted: 0x12019f,
            share_access: 7,
            create_options: 0,
            delete_on_close: false,
            delete_pending: false,
            oplock: 0xFF,
            lease: Some(LeaseRecord {
                key: [5; 16],
                state: 7,
                epoch: Some(3),
            }),
            locks: vec![LockRecord {
                offset: 0,
                length: 1,
                exclusive: true,
            }],
            parent_lease: None,
            posix: true,
            away: false,
            persistent: true,
        }
    }

    /// A record written before POSIX opens were recorded is a Windows open.
    #[test]
    fn an_older_record_is_a_windows_open() {
        let mut json: serde_json::Value = serde_json::to_value(record(1)).unwrap();
        json.as_object_mut().unwrap().remove("posix");
        let old: Record = serde_json::from_value(json).unwrap();
        assert_eq!(
            old,
            Record {
                posix: false,
                ..record(1)
            }
        );
    }

    #[test]
    fn records_survive_reopening_and_removal_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.redb");
        {
            let (s, l) = Store::open(&p).unwrap();
            assert!(l.records.is_empty() && l.dropped.is_empty());
            s.put(&record(1)).unwrap();
            s.put(&record(2)).unwrap();
            let mut r = record(1);
            r.locks.clear();
            s.put(&r).unwrap();
            s.remove(2).unwrap();
        }
        let (s, l) = Store::open(&p).unwrap();
        let mut expect = record(1);
        expect.locks.clear();
        assert_eq!(l.records, vec![expect]);
        assert_eq!(s.records().unwrap(), 1);
        // Whose each record is survives too (the per-user bound).
        assert_eq!((s.records_of("alice"), s.records_of("bob")), (1, 0));
        let mut bobs = record(3);
        bobs.user = "bob".into();
        s.put(&bobs).unwrap();
        s.put(&bobs).unwrap();
        assert_eq!((s.records_of("alice"), s.records_of("bob")), (1, 1));
        s.remove(1).unwrap();
        s.remove(1).unwrap();
        assert_eq!((s.records_of("alice"), s.records_of("bob")), (0, 1));
        s.remove(3).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "owner-only");
        // A second opener (another server on the same state directory) is refused, and the
        // first one's store is left as it is.
        assert!(Store::open(&p).is_err());
        assert_eq!(s.records().unwrap(), 0);
    }

    /// A damaged database is moved aside and the server starts with an empty store.
    #[test]
    fn a_damaged_store_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.redb");
        {
            let (s, _) = Store::open(&p).unwrap();
            s.put(&record(1)).unwrap();
        }
        // Truncated in the middle of its pages, then garbage.
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.truncate(bytes.len() / 3);
        bytes.extend_from_slice(&[0xA5; 333]);
        std::fs::write(&p, &bytes).unwrap();
        let (s, l) = Store::open(&p).unwrap();
        assert!(
            l.records.is_empty(),
            "nothing from a damaged store is served"
        );
        assert_eq!(l.dropped.len(), 1, "{:?}", l.dropped);
        assert_eq!(s.records().unwrap(), 0);
        let aside = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                let e = e.as_ref().unwrap();
                e.file_name().to_string_lossy().contains("damaged")
            })
            .count();
        assert_eq!(aside, 1);
    }

    /// A record that does not decode, or claims another id, is dropped and said so.
    #[test]
    fn undecodable_records_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.redb");
        {
            let (s, _) = Store::open(&p).unwrap();
            s.put(&record(1)).unwrap();
            let w = s.db.begin_write().unwrap();
            {
                let mut t = w.open_table(OPENS).unwrap();
                t.insert(2u64, b"{not json".as_slice()).unwrap();
                let other = serde_json::to_vec(&record(9)).unwrap();
                t.insert(3u64, other.as_slice()).unwrap();
            }
            w.commit().unwrap();
        }
        let (s, l) = Store::open(&p).unwrap();
        assert_eq!(l.records, vec![record(1)]);
        assert_eq!(l.dropped.len(), 2, "{:?}", l.dropped);
        assert_eq!(s.records().unwrap(), 1, "the bad ones are gone");
    }
}
