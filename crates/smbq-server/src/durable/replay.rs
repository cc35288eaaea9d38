//! What a replayed CREATE needs (MS-SMB2 3.3.5.9.10): the answer the first sending got, kept
//! with the open it made ([`ReplayRecord`], for every CREATE that carried a durable v2
//! request, durable or not: the spec sets Open.CreateGuid before deciding durability), and
//! the CreateGuids of the CREATEs still running ([`CreatesInFlight`]): a replay of a CREATE
//! that is waiting for an oplock or lease break gets STATUS_FILE_NOT_AVAILABLE at once (the
//! client tries again later) instead of a second open or a second break. The spec has no
//! such state; Windows and Samba's replay cache behave this way (smbtorture smb2.replay.
//! dhv2-pending1*-sane, Samba bug 14449).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use smbq_wire::FileId;

use super::FirstAnswer;

/// The first answer of a CREATE that carried SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayRecord {
    pub create_guid: [u8; 16],
    /// The client it answered (updated when a durable open is reclaimed).
    pub client_guid: [u8; 16],
    pub first: FirstAnswer,
}

/// (ClientGuid, CreateGuid).
type GuidPair = ([u8; 16], [u8; 16]);
type Shared = Arc<Mutex<HashSet<GuidPair>>>;

/// (ClientGuid, CreateGuid) of every CREATE in progress that carries a durable v2 request.
/// Bounded by the requests in flight: each entry lives as long as its CREATE's handler.
#[derive(Debug, Default)]
pub struct CreatesInFlight {
    set: Shared,
}

/// Held while the CREATE runs; dropping it (answer, error or cancel) ends the reservation.
#[derive(Debug)]
pub struct Running {
    set: Shared,
    key: GuidPair,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.set.lock().remove(&self.key);
    }
}

impl CreatesInFlight {
    /// Marks the CREATE running; `None` when one with the same GUIDs already is.
    pub fn start(&self, client_guid: [u8; 16], create_guid: [u8; 16]) -> Option<Running> {
        let key = (client_guid, create_guid);
        self.set.lock().insert(key).then(|| Running {
            set: self.set.clone(),
            key,
        })
    }

    /// CREATEs running now.
    pub fn len(&self) -> usize {
        self.set.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The open each (ClientGuid, CreateGuid) answered, while that answer may still be replayed.
/// MS-SMB2 3.3.5.9.10 looks a replayed CREATE's open up server-wide (GlobalOpenTable): the
/// replay may come on another connection and session, and find an open whose connection went
/// (parked, crate::durable) or one of another session (STATUS_DUPLICATE_OBJECTID). Bounded by
/// the opens: an entry lives no longer than its open's [`ReplayRecord`].
#[derive(Debug, Default)]
pub struct ReplayIndex {
    map: Mutex<HashMap<GuidPair, FileId>>,
}

impl ReplayIndex {
    /// `id` answered the pair (a later CREATE with the same GUIDs replaces an earlier one).
    pub fn insert(&self, client_guid: [u8; 16], create_guid: [u8; 16], id: FileId) {
        self.map.lock().insert((client_guid, create_guid), id);
    }

    pub fn get(&self, client_guid: [u8; 16], create_guid: [u8; 16]) -> Option<FileId> {
        self.map.lock().get(&(client_guid, create_guid)).copied()
    }

    /// The open `volatile` may no longer be replayed (used, closed, or reclaimed by another
    /// client): its entry goes, unless the pair names a newer open by now.
    pub fn remove(&self, client_guid: [u8; 16], create_guid: [u8; 16], volatile: u64) {
        let mut map = self.map.lock();
        if map
            .get(&(client_guid, create_guid))
            .is_some_and(|id| id.volatile == volatile)
        {
            map.remove(&(client_guid, create_guid));
        }
    }

    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_forgets_an_open_only_if_it_still_names_it() {
        let i = ReplayIndex::default();
        let first = FileId {
            persistent: 1,
            volatile: 10,
        };
        let second = FileId {
            persistent: 2,
            volatile: 20,
        };
        i.insert([1; 16], [2; 16], first);
        i.insert([1; 16], [2; 16], second);
        i.remove([1; 16], [2; 16], 10);
        assert_eq!(i.get([1; 16], [2; 16]), Some(second), "a newer open stays");
        i.remove([1; 16], [2; 16], 20);
        assert!(i.is_empty());
    }

    #[test]
    fn one_create_per_guid_pair_until_it_ends() {
        let c = CreatesInFlight::default();
        let a = c.start([1; 16], [2; 16]);
        assert!(a.is_some());
        assert!(c.start([1; 16], [2; 16]).is_none(), "the same CREATE again");
        let b = c.start([3; 16], [2; 16]);
        assert!(b.is_some(), "another client's GUID is another CREATE");
        drop(a);
        assert_eq!(c.len(), 1);
        assert!(c.start([1; 16], [2; 16]).is_some());
        drop(b);
        assert!(c.is_empty());
    }
}
