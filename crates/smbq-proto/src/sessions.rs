//! The server-wide session table (MS-SMB2 3.3.1.5 GlobalSessionTable): one record per session,
//! looked up by SessionId by every connection's engine and by the server.
//!
//! A record is the session's single owner of what outlives a connection: whether it is still
//! alive, and the server's own state for it (trees, opens, channels) in `ext`, which this
//! layer does not know. What belongs to one connection of a session (the authentication
//! exchange in progress, the keys the engine signs and seals with, MS-SMB2 3.3.1.8 Channel)
//! stays in that connection's engine, next to an `Arc` of the record.
//!
//! Ending a session (LOGOFF, a failed re-authentication, its connection gone, or a reconnect
//! naming it as PreviousSessionId, MS-SMB2 3.3.5.5.3) removes its record and marks it ended,
//! so every engine still holding it answers its requests USER_SESSION_DELETED without being
//! told: no message to every connection.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use smbq_auth::Identity;
use smbq_crypto::{Cipher, Sealer, Signer, SigningAlgorithm};
use smbq_wire::Dialect;

use crate::nonces::NonceLedger;
use crate::transform::TransformSealer;

/// Most channels one session may have (MS-SMB2 leaves the number to the server; Windows and
/// Samba allow 32, and smbtorture smb2.multichannel.generic.num_channels expects the 33rd
/// bind to get STATUS_INSUFFICIENT_RESOURCES).
pub const MAX_CHANNELS: usize = 32;

#[derive(Default)]
pub struct SessionTable {
    map: RwLock<HashMap<u64, Arc<SessionRecord>>>,
}

impl std::fmt::Debug for SessionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTable")
            .field("sessions", &self.len())
            .finish()
    }
}

pub struct SessionRecord {
    id: u64,
    ended: AtomicBool,
    /// Who authenticated it (set once, when its first authentication succeeds).
    owner: OnceLock<Arc<Identity>>,
    /// What its first authentication settled, which a channel bound later shares.
    established: OnceLock<Arc<Established>>,
    /// The connections it is established on (MS-SMB2 3.3.1.8 Session.ChannelList), oldest
    /// first; at most [`MAX_CHANNELS`].
    channels: Mutex<Vec<u64>>,
    ext: OnceLock<Arc<dyn Any + Send + Sync>>,
}

/// A session's own security state (MS-SMB2 3.3.1.8: Session.Connection.Dialect, SigningKey,
/// EncryptionKey, DecryptionKey, SigningRequired, EncryptData), set by its first
/// authentication. A channel bound to the session checks its binding request with `signer`
/// and seals and opens with the session's keys (MS-SMB2 3.3.5.5.2, 3.3.5.5.3); only its
/// signing key is its own.
pub struct Established {
    pub dialect: Dialect,
    pub signing: SigningAlgorithm,
    pub cipher: Option<Cipher>,
    pub signer: Signer,
    /// One nonce sequence for every channel (the counter behind the shared key).
    pub encryptor: Option<Arc<TransformSealer>>,
    pub decryptor: Option<Sealer>,
    pub signing_required: bool,
    pub encrypt_data: bool,
    /// The nonces `signer` signed on binding connections (AES-GMAC; crate::nonces).
    pub nonces: Arc<NonceLedger>,
}

impl std::fmt::Debug for SessionRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRecord")
            .field("id", &self.id)
            .field("ended", &self.has_ended())
            .finish_non_exhaustive()
    }
}

impl SessionTable {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The record of session `id`, made now if there is none. Session ids come from one
    /// server-wide counter, so an ended session's id is never made again.
    pub fn insert(&self, id: u64) -> Arc<SessionRecord> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.entry(id)
            .or_insert_with(|| {
                Arc::new(SessionRecord {
                    id,
                    ended: AtomicBool::new(false),
                    owner: OnceLock::new(),
                    established: OnceLock::new(),
                    channels: Mutex::new(Vec::new()),
                    ext: OnceLock::new(),
                })
            })
            .clone()
    }

    /// A record for a new session `id`; `None` if the id is taken (ids come from one
    /// server-wide counter, so only a broken allocator could repeat one).
    pub fn create(&self, id: u64) -> Option<Arc<SessionRecord>> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(&id) {
            return None;
        }
        let rec = Arc::new(SessionRecord {
            id,
            ended: AtomicBool::new(false),
            owner: OnceLock::new(),
            established: OnceLock::new(),
            channels: Mutex::new(Vec::new()),
            ext: OnceLock::new(),
        });
        map.insert(id, rec.clone());
        Some(rec)
    }

    /// The live session `id`.
    pub fn get(&self, id: u64) -> Option<Arc<SessionRecord>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.get(&id).cloned()
    }

    /// Ends session `id`: its record leaves the table and every holder sees it ended.
    /// Returns it, for the server to release what `ext` holds.
    pub fn end(&self, id: u64) -> Option<Arc<SessionRecord>> {
        let rec = {
            let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
            map.remove(&id)
        }?;
        rec.ended.store(true, Ordering::Release);
        Some(rec)
    }

    /// Every session not yet ended, for status reports.
    pub fn live(&self) -> Vec<Arc<SessionRecord>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.values().filter(|r| !r.has_ended()).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SessionRecord {
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Who authenticated the session; `None` until its first authentication succeeded.
    pub fn owner(&self) -> Option<&Arc<Identity>> {
        self.owner.get()
    }

    /// Records the session's user; the first authentication's stays.
    pub fn set_owner(&self, who: Arc<Identity>) {
        let _ = self.owner.set(who);
    }

    /// The session's keys and settings, once its first authentication gave it keys.
    pub fn established(&self) -> Option<&Arc<Established>> {
        self.established.get()
    }

    /// Records what the first authentication settled; the first one stays.
    pub fn set_established(&self, e: Arc<Established>) {
        let _ = self.established.set(e);
    }

    /// Connection `conn_id` carries the session now. False when it would be one channel too
    /// many (MS-SMB2 3.3.5.5.2: the server may limit them; STATUS_INSUFFICIENT_RESOURCES).
    pub fn add_channel(&self, conn_id: u64) -> bool {
        let mut c = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if c.contains(&conn_id) {
            return true;
        }
        if c.len() >= MAX_CHANNELS {
            return false;
        }
        c.push(conn_id);
        true
    }

    /// Connection `conn_id` is gone; returns how many channels are left.
    pub fn remove_channel(&self, conn_id: u64) -> usize {
        let mut c = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        c.retain(|&x| x != conn_id);
        c.len()
    }

    /// The session's channels, oldest first.
    pub fn channels(&self) -> Vec<u64> {
        self.channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn channel_count(&self) -> usize {
        self.channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Whether session `by` may end this one by naming it as its PreviousSessionId
    /// (MS-SMB2 3.3.5.5.3: only when both belong to the same user, as Windows compares the
    /// users' SIDs). Accounts are local and named by user alone (the NTLM domain is whatever
    /// the client typed), so the user name decides. Guest and anonymous sessions share no
    /// user, so they replace nothing; a session nobody finished authenticating cannot be
    /// replaced either.
    pub fn may_be_replaced_by(&self, by: &SessionRecord) -> bool {
        let (Some(old), Some(new)) = (self.owner(), by.owner()) else {
            return false;
        };
        let real = |i: &Identity| !i.is_guest && !i.is_anonymous;
        self.id != by.id
            && real(old)
            && real(new)
            && old.user.to_lowercase() == new.user.to_lowercase()
    }

    /// The server's state for this session, made by `make` on first use.
    /// `None` if a state of another type was stored first (a bug, never a client's doing).
    pub fn ext_or_init<T: Send + Sync + 'static>(
        &self,
        make: impl FnOnce() -> T,
    ) -> Option<Arc<T>> {
        let any = self
            .ext
            .get_or_init(|| Arc::new(make()) as Arc<dyn Any + Send + Sync>);
        any.clone().downcast::<T>().ok()
    }

    /// The server's state for this session, if it was made.
    pub fn ext<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.ext.get()?.clone().downcast::<T>().ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ending_is_seen_by_every_holder_and_ids_are_not_revived_by_lookup() {
        let t = SessionTable::new();
        let held = t.insert(7);
        assert!(Arc::ptr_eq(&held, &t.insert(7)), "one record per id");
        assert!(!held.has_ended());
        let st = held.ext_or_init(|| 41u32).unwrap();
        assert_eq!(*st, 41);
        assert_eq!(
            *t.get(7).unwrap().ext::<u32>().unwrap(),
            41,
            "one state, shared"
        );
        assert!(
            held.ext::<String>().is_none(),
            "a wrong type is refused, not forced"
        );

        let ended = t.end(7).unwrap();
        assert!(held.has_ended() && ended.has_ended());
        assert!(t.get(7).is_none());
        assert!(t.end(7).is_none(), "ending twice is harmless");
        assert!(t.is_empty());
        assert_eq!(
            *ended.ext::<u32>().unwrap(),
            41,
            "the state is still there to release"
        );
    }

    fn owned(t: &SessionTable, id: u64, user: &str, guest: bool) -> Arc<SessionRecord> {
        let r = t.create(id).unwrap();
        r.set_owner(Arc::new(Identity {
            user: user.into(),
            domain: "WORKGROUP".into(),
            is_guest: guest,
            is_anonymous: false,
        }));
        r
    }

    #[test]
    fn only_the_same_user_replaces_a_session() {
        let t = SessionTable::new();
        let alice = owned(&t, 1, "alice", false);
        let alice_again = owned(&t, 2, "ALICE", false);
        // The same account logged on with another domain typed in.
        let alice_elsewhere = t.create(6).unwrap();
        alice_elsewhere.set_owner(Arc::new(Identity {
            domain: "ELSEWHERE".into(),
            ..(**alice.owner().unwrap()).clone()
        }));
        assert!(alice.may_be_replaced_by(&alice_elsewhere));
        let bob = owned(&t, 3, "bob", false);
        let guest = owned(&t, 4, "alice", true);
        let unfinished = t.create(5).unwrap();
        assert!(
            t.create(1).is_none(),
            "an id in use is never handed out again"
        );
        assert!(alice.may_be_replaced_by(&alice_again));
        assert!(
            !alice.may_be_replaced_by(&bob),
            "another user cannot end it"
        );
        assert!(!alice.may_be_replaced_by(&guest));
        assert!(!guest.may_be_replaced_by(&alice));
        assert!(!unfinished.may_be_replaced_by(&alice));
        assert!(
            !alice.may_be_replaced_by(&alice),
            "a session does not replace itself"
        );
    }
}
