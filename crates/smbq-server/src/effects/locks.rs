//! Byte-range lock requests (MS-SMB2 3.3.5.14) through the open-state door: a request that
//! may wait sleeps on the file's change signal and asks again whenever something on the file
//! is released. The records of a persistent open are not written per element here: LOCK
//! writes the open's record once, when the whole request is done (handlers/lock.rs).

use std::time::Instant;

use smbq_wire::NtStatus;

use crate::Server;
use crate::file_state::{FileKey, WaitEnds};
use crate::open_state::{self, Effects, LockOp};

impl Server {
    /// Locks `(offset, length)` of `key` for `owner`: at once or LOCK_NOT_GRANTED without
    /// `ends`, else waiting until it is granted or `ends` says the request is over.
    pub(crate) async fn lock_range(
        &self,
        key: FileKey,
        owner: u64,
        range: (u64, u64),
        exclusive: bool,
        ends: Option<WaitEnds<'_>>,
    ) -> Result<(), NtStatus> {
        let apply = |fx: Effects| {
            self.apply(Effects {
                recorded: Vec::new(),
                ..fx
            });
        };
        let state = self.open_state();
        open_state::lock_wait(state, (key, owner), range, exclusive, ends, &apply).await
    }

    /// Removes `owner`'s lock of exactly `(offset, length)` on `key` (MS-FSA 2.1.5.9).
    pub(crate) fn unlock_range(
        &self,
        key: FileKey,
        owner: u64,
        range: (u64, u64),
    ) -> Result<(), NtStatus> {
        let (r, fx) = self
            .open_state()
            .on_lock(key, owner, range, LockOp::Unlock, Instant::now());
        self.apply(Effects {
            recorded: Vec::new(),
            ..fx
        });
        r
    }
}
