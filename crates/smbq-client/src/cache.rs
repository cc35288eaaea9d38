//! Stats and reads served from RH leases (MS-SMB2 3.2.4.3.8, 3.2.5.19.2): across a WAN every
//! CREATE, QUERY_INFO and READ costs a round trip, so a [`CachedTree`] opens each file it is
//! asked about once, with a lease asking read and handle caching, keeps the handle, and
//! answers later stats from what the CREATE reported and later reads from the bytes already
//! read, for as long as the server leaves the lease alone. Another client's change breaks the
//! lease (`conn.rs` calls [`LeaseHolder::broken`] before acknowledging): the cached data and
//! metadata go at once, and the next call asks the server again, on a new open.
//!
//! Bounded: at most [`CacheLimits::files`] files (least recently used go first) and
//! [`CacheLimits::bytes_per_file`] cached bytes per file. Nothing is written through it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use smbq_wire::Command;
use smbq_wire::create::OplockLevel;
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::fscc::access;

use crate::conn::LeaseHolder;
use crate::file::File;
use crate::lease::{self, H, R};
use crate::session::check;
use crate::tree::{OpenOptions, Tree, create_body_with, smb_path};
use crate::{Error, Metadata, ProtocolError};

/// How much a [`CachedTree`] keeps.
#[derive(Clone, Copy, Debug)]
pub struct CacheLimits {
    /// Files kept open under a lease at once.
    pub files: usize,
    /// Bytes of data kept per file.
    pub bytes_per_file: usize,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            files: 256,
            bytes_per_file: 8 << 20,
        }
    }
}

/// A share whose stats and reads are served from leases (see the module docs). Cheap to
/// clone; clones share the cache.
#[derive(Clone)]
pub struct CachedTree {
    tree: Tree,
    limits: CacheLimits,
    entries: Arc<Mutex<HashMap<String, Arc<Entry>>>>,
    clock: Arc<AtomicU64>,
}

/// One file held open under a lease.
struct Entry {
    file: File,
    limits: CacheLimits,
    state: Mutex<Cached>,
    /// The lease's break handler: the connection keeps only a weak reference to it.
    _holder: Arc<dyn LeaseHolder>,
}

#[derive(Default)]
struct Cached {
    /// What the lease allows now; a break lowers it.
    lease: u32,
    /// Counts breaks, so data read while one arrived is not kept.
    breaks: u64,
    meta: Metadata,
    /// Ranges read, as (offset, data); never more than `bytes_per_file` in all.
    chunks: Vec<(u64, Bytes)>,
    bytes: usize,
    last_used: u64,
}

impl Cached {
    fn covering(&self, offset: u64, len: u64) -> Option<Bytes> {
        self.chunks.iter().find_map(|(at, data)| {
            let start = offset.checked_sub(*at)?;
            let end = start.checked_add(len)?;
            let (start, end) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
            (end <= data.len()).then(|| data.slice(start..end))
        })
    }
}

/// What the entry's lease holder hears of breaks before any entry exists: a break can
/// arrive between the CREATE's answer and the entry being made.
struct Pending {
    broken_to: Mutex<Option<u32>>,
    entry: Mutex<Weak<Entry>>,
}

impl LeaseHolder for Pending {
    fn broken(&self, new_state: u32) {
        // Held throughout, so `CachedTree::open` sees either the break or the entry.
        let slot = self.entry.lock();
        if let Some(e) = slot.upgrade() {
            let mut s = e.state.lock();
            s.lease &= new_state;
            s.breaks += 1;
            if s.lease & R == 0 {
                s.chunks.clear();
                s.bytes = 0;
            }
            return;
        }
        let mut b = self.broken_to.lock();
        *b = Some(b.map_or(new_state, |old| old & new_state));
    }
}

impl Tree {
    /// This share with its stats and reads served from leases (see [`CachedTree`]).
    pub fn cached(&self, limits: CacheLimits) -> CachedTree {
        CachedTree {
            tree: self.clone(),
            limits,
            entries: Arc::new(Mutex::new(HashMap::new())),
            clock: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl CachedTree {
    /// Size, times and attributes of `path`: from the cache while the lease caches reads.
    pub async fn stat(&self, path: &str) -> Result<Metadata, Error> {
        let (e, fresh) = self.entry(path).await?;
        {
            let s = e.state.lock();
            if fresh || s.lease & R != 0 {
                return Ok(s.meta.clone());
            }
        }
        // The lease went between the lookup and now: ask again on a new open.
        let (e, _) = self.entry(path).await?;
        let meta = e.state.lock().meta.clone();
        Ok(meta)
    }

    /// Up to `len` bytes of `path` at `offset` (fewer at the end of the file): from the cache
    /// when they were read before under the lease still held, else from the server (and
    /// kept, within the limits).
    pub async fn read(&self, path: &str, offset: u64, len: u32) -> Result<Bytes, Error> {
        let (e, _) = self.entry(path).await?;
        let (breaks, want) = {
            let s = e.state.lock();
            let mut want = u64::from(len);
            if s.lease & R != 0 {
                // The size is known while nobody else can write.
                want = want.min(s.meta.size.saturating_sub(offset));
                if want == 0 {
                    return Ok(Bytes::new());
                }
                if let Some(hit) = s.covering(offset, want) {
                    return Ok(hit);
                }
            }
            (s.breaks, u32::try_from(want).unwrap_or(len))
        };
        let data = e.file.read_at(offset, want).await?;
        let mut s = e.state.lock();
        if s.breaks == breaks && s.lease & R != 0 && data.len() <= e.limits.bytes_per_file {
            if s.bytes + data.len() > e.limits.bytes_per_file {
                s.chunks.clear();
                s.bytes = 0;
            }
            s.bytes += data.len();
            s.chunks.push((offset, data.clone()));
        }
        Ok(data)
    }

    /// The whole of a small file (at most `max` bytes), through [`Self::read`].
    pub async fn read_all(&self, path: &str, max: usize) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        loop {
            let chunk = self
                .read(path, out.len() as u64, self.tree.max_read())
                .await?;
            if chunk.is_empty() {
                return Ok(out);
            }
            if out.len() + chunk.len() > max {
                return Err(ProtocolError::FileTooLarge {
                    path: path.to_string(),
                    max,
                }
                .into());
            }
            out.extend_from_slice(&chunk);
        }
    }

    /// Whether `path` is served from the cache now (its lease still caches reads).
    pub fn is_cached(&self, path: &str) -> bool {
        self.entries
            .lock()
            .get(&cache_key(path))
            .is_some_and(|e| e.state.lock().lease & R != 0)
    }

    /// Closes every open the cache holds.
    pub async fn close(&self) -> Result<(), Error> {
        let all: Vec<Arc<Entry>> = self.entries.lock().drain().map(|(_, e)| e).collect();
        for e in all {
            e.file.clone().close().await?;
        }
        Ok(())
    }

    /// The entry for `path`, opened now (`true`) when there was none with its lease whole.
    async fn entry(&self, path: &str) -> Result<(Arc<Entry>, bool), Error> {
        let key = cache_key(path);
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let stale = {
            let mut map = self.entries.lock();
            match map.get(&key) {
                Some(e) if e.state.lock().lease & R != 0 => {
                    e.state.lock().last_used = now;
                    return Ok((e.clone(), false));
                }
                Some(_) => map.remove(&key),
                None => None,
            }
        };
        if let Some(old) = stale {
            // The lease no longer covers what it cached: give its handle back.
            let _ = old.file.clone().close().await;
        }
        let e = self.open(path, now).await?;
        if e.state.lock().lease & R != 0 {
            let evicted = {
                let mut map = self.entries.lock();
                let evicted = if map.len() >= self.limits.files.max(1) {
                    let lru = map
                        .iter()
                        .min_by_key(|(_, e)| e.state.lock().last_used)
                        .map(|(k, _)| k.clone());
                    lru.and_then(|k| map.remove(&k))
                } else {
                    None
                };
                map.insert(key, e.clone());
                evicted
            };
            if let Some(old) = evicted {
                let _ = old.file.clone().close().await;
            }
        }
        Ok((e, true))
    }

    /// CREATE of `path` for reading, asking for an RH lease under a new key.
    async fn open(&self, path: &str, now: u64) -> Result<Arc<Entry>, Error> {
        let o = OpenOptions {
            access: access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            ..OpenOptions::read()
        };
        let key = lease::new_key();
        let pending = Arc::new(Pending {
            broken_to: Mutex::new(None),
            entry: Mutex::new(Weak::new()),
        });
        let rqls = self.tree.lease_request(key, R | H);
        let (level, list) = match &rqls {
            Some(data) => (
                OplockLevel::LEASE,
                contexts_to_bytes(&[CreateContext::new(CreateContextTag::RQLS, data)]),
            ),
            None => (OplockLevel::NONE, Vec::new()),
        };
        let holder: Arc<dyn LeaseHolder> = pending.clone();
        let weak = Arc::downgrade(&holder);
        let target = self.tree.break_target();
        // Watched before the CREATE goes, so no break can slip past.
        if rqls.is_some() {
            self.tree
                .session()
                .client()
                .shared
                .watch_lease(key, 0, target, Some(weak));
        }
        let body = create_body_with(path, &o, level, &list);
        let sent = self.tree.send(Command::CREATE, body, None, 0).await;
        let r = match sent.and_then(|r| check(&r, "CREATE").map(|()| r)) {
            Ok(r) => r,
            Err(e) => {
                self.tree.session().client().shared.unwatch_lease(&key);
                return Err(e);
            }
        };
        let file = File::from_create(self.tree.clone(), &r)?;
        let mut granted = if rqls.is_some() {
            lease::granted(&r, &key)?
        } else {
            0
        };
        if granted == 0 {
            self.tree.session().client().shared.unwatch_lease(&key);
        } else {
            self.tree
                .session()
                .client()
                .shared
                .lease_open_is(&key, file.id().persistent);
        }
        let meta = file.metadata().clone();
        let e = Arc::new(Entry {
            file,
            limits: self.limits,
            state: Mutex::new(Cached::default()),
            _holder: holder,
        });
        {
            let mut slot = pending.entry.lock();
            if let Some(to) = *pending.broken_to.lock() {
                granted &= to;
            }
            let mut s = e.state.lock();
            s.lease = granted;
            s.meta = meta;
            s.last_used = now;
            *slot = Arc::downgrade(&e);
        }
        Ok(e)
    }
}

/// Paths name files case-insensitively (MS-FSCC 2.1.5 on a default share).
fn cache_key(path: &str) -> String {
    smb_path(path).to_lowercase()
}
