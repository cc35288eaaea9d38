//! Durable opens whose connection broke (MS-SMB2 3.3.7.1: Open.Connection is NULL, the open
//! kept for Open.DurableOpenTimeout): their own store, next to the tables of live opens.
//!
//! A parked open keeps its place in [`crate::file_state::FileStates`] (share mode, byte-range
//! locks, oplock or lease) and its open id (the slot stays reserved), so other clients see the
//! file as open. It leaves the store in one of three ways: its client reconnects
//! (`handlers/create/durable.rs`), its timeout passes, or another open needs a break it can no
//! longer receive and purges it (smbtorture smb2.durable-open.oplock). The store is bounded in
//! all and per user by the configured limits.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub mod persistent;
pub mod replay;
pub mod store;

/// What made an open durable (MS-SMB2 3.3.5.9.6 / 3.3.5.9.10), kept with the open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableGrant {
    /// `Some` for a durable v2 open: its CreateGuid.
    pub create_guid: Option<[u8; 16]>,
    pub client_guid: [u8; 16],
    /// The account that opened it (user names compare case-insensitively); only the same
    /// account may reconnect (MS-SMB2 3.3.5.9.7).
    pub user: String,
    /// Open.DurableOpenTimeout, or Open.ResiliencyTimeout.
    pub timeout: Duration,
    /// Open.IsResilient (FSCTL_LMR_REQUEST_RESILIENCY, MS-SMB2 3.3.5.15.9) rather than
    /// durable: kept whatever its oplock or lease, never purged by a break (the break
    /// completes at once instead), reclaimed by DHnC only.
    pub resilient: bool,
    /// Open.IsPersistent (MS-SMB2 3.3.5.9.10, a continuously available share): parked
    /// whatever it holds, never purged by a break (the break waits for its client), and
    /// while parked it keeps other opens of its file out (crate::durable::persistent).
    pub persistent: bool,
}

/// The fields of a CREATE response, kept for its replays (crate::durable::replay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstAnswer {
    pub oplock: u8,
    pub action: u32,
    /// Creation, last access, last write, change.
    pub times: [u64; 4],
    pub allocation: u64,
    pub end_of_file: u64,
    pub attributes: u32,
    /// The lease and durable contexts it carried.
    pub contexts: Vec<(
        smbq_wire::create_context::CreateContextTag<'static>,
        Vec<u8>,
    )>,
}

/// A disconnected durable open.
#[derive(Debug)]
pub struct Parked {
    pub open: std::sync::Arc<crate::tables::Open>,
    pub grant: DurableGrant,
    pub deadline: Instant,
    /// Which parking this is, so a timer of an earlier one does not end a later one.
    generation: u64,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<u64, Parked>,
    per_user: HashMap<String, usize>,
    /// The parked persistent opens of each stream (crate::durable::persistent), ordered so
    /// that a file's streams are one range (`persistent_on_file`).
    persistent: std::collections::BTreeMap<crate::file_state::FileKey, Vec<u64>>,
    next_generation: u64,
}

/// The durable opens waiting for their clients, by open id (FileId.Persistent).
#[derive(Debug, Default)]
pub struct DurableStore {
    inner: Mutex<Inner>,
    /// CREATEs with a durable v2 request still running (crate::durable::replay).
    pub creating: replay::CreatesInFlight,
    /// The opens whose first answer may still be replayed, by their GUIDs.
    pub replayable: replay::ReplayIndex,
}

/// Why an open could not be parked.
#[derive(Debug, PartialEq, Eq)]
pub enum ParkError {
    /// The store holds `max_durable_opens` (or the user's share of them) already.
    Full,
}

impl DurableStore {
    /// Parks `open` until `now + grant.timeout`; returns the generation its timer checks.
    pub fn park(
        &self,
        open: std::sync::Arc<crate::tables::Open>,
        grant: DurableGrant,
        now: Instant,
        limits: (usize, usize),
    ) -> Result<u64, Box<(std::sync::Arc<crate::tables::Open>, ParkError)>> {
        let (max_total, max_per_user) = limits;
        let mut inner = self.inner.lock();
        let user = grant.user.to_lowercase();
        let mine = inner.per_user.get(&user).copied().unwrap_or(0);
        if inner.by_id.len() >= max_total || mine >= max_per_user {
            return Err(Box::new((open, ParkError::Full)));
        }
        inner.next_generation += 1;
        let generation = inner.next_generation;
        *inner.per_user.entry(user).or_insert(0) += 1;
        if grant.persistent
            && let Some(f) = open.file()
        {
            inner
                .persistent
                .entry(f.key)
                .or_default()
                .push(open.volatile());
        }
        let deadline = now + grant.timeout;
        inner.by_id.insert(
            open.volatile(),
            Parked {
                open,
                grant,
                deadline,
                generation,
            },
        );
        Ok(generation)
    }

    /// The parked opens with their owner and what is left of their wait, for status reports.
    pub fn parked(
        &self,
        now: Instant,
    ) -> Vec<(std::sync::Arc<crate::tables::Open>, String, Duration)> {
        self.inner
            .lock()
            .by_id
            .values()
            .map(|p| {
                (
                    p.open.clone(),
                    p.grant.user.clone(),
                    p.deadline.saturating_duration_since(now),
                )
            })
            .collect()
    }

    fn remove(inner: &mut Inner, id: u64) -> Option<Parked> {
        let p = inner.by_id.remove(&id)?;
        if let Some(f) = p.open.file()
            && let Some(ids) = inner.persistent.get_mut(&f.key)
        {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                inner.persistent.remove(&f.key);
            }
        }
        let user = p.grant.user.to_lowercase();
        if let Some(n) = inner.per_user.get_mut(&user) {
            *n -= 1;
            if *n == 0 {
                inner.per_user.remove(&user);
            }
        }
        Some(p)
    }

    /// Takes the parked open `id` out if `accept` agrees (a reconnect that passes its
    /// checks); the error `accept` gave otherwise, leaving it parked.
    pub fn take_if<E>(
        &self,
        id: u64,
        not_found: E,
        accept: impl FnOnce(&Parked) -> Result<(), E>,
    ) -> Result<Parked, E> {
        let mut inner = self.inner.lock();
        let p = inner.by_id.get(&id).ok_or(not_found)?;
        accept(p)?;
        match Self::remove(&mut inner, id) {
            Some(p) => Ok(p),
            None => unreachable!("the parked open was found under the same lock"),
        }
    }

    /// The parked open `id`.
    pub fn parked_open(&self, id: u64) -> Option<std::sync::Arc<crate::tables::Open>> {
        self.inner.lock().by_id.get(&id).map(|p| p.open.clone())
    }

    /// The parked open `id`, if it is resilient (a break does not purge it).
    pub fn resilient(&self, id: u64) -> Option<std::sync::Arc<crate::tables::Open>> {
        let inner = self.inner.lock();
        inner
            .by_id
            .get(&id)
            .filter(|p| p.grant.resilient)
            .map(|p| p.open.clone())
    }

    /// Takes the parked open `id` out whatever it is (a purge).
    pub fn take(&self, id: u64) -> Option<Parked> {
        Self::remove(&mut self.inner.lock(), id)
    }

    /// Takes `id` out if it is still the parking `generation` and its deadline passed.
    pub fn take_expired(&self, id: u64, generation: u64, now: Instant) -> Option<Parked> {
        let mut inner = self.inner.lock();
        let due = inner
            .by_id
            .get(&id)
            .is_some_and(|p| p.generation == generation && p.deadline <= now);
        if due {
            Self::remove(&mut inner, id)
        } else {
            None
        }
    }

    pub fn is_parked(&self, id: u64) -> bool {
        self.inner.lock().by_id.contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.inner.lock().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
