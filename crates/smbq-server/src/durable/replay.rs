//! What a replayed CREATE needs (MS-SMB2 3.3.5.9.10): the answer the first sending got, kept
//! with the open it made ([`ReplayRecord`], for every CREATE that carried a durable v2
//! request, durable or not: the spec sets Open.CreateGuid before deciding durability), and
//! the CreateGuids of the CREATEs still running ([`CreatesInFlight`]): a replay of a CREATE
//! that is waiting for an oplock or lease break gets STATUS_FILE_NOT_AVAILABLE at once (the
//! client tries again later) instead of a second open or a second break. The spec has no
//! such state; Windows and Samba's replay cache behave this way (smbtorture smb2.replay.
//! dhv2-pending1*-sane, Samba bug 14449).

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

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

#[cfg(test)]
mod tests {
    use super::*;

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
