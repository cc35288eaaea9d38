//! Where the owners' decisions meet the rest of the server. The per-file state
//! ([`crate::file_state`]), the durable store ([`crate::durable`]) and the change-notify hub
//! ([`crate::notify`]) decide; they never reach back into [`crate::Server`]. What they decide
//! (breaks to send to a session, opens to purge or park, notify events to report, directory
//! leases to break) is carried out here, after the handler that asked.

mod breaks;
mod dir_leases;
mod leases;
mod locks;
mod notify;
mod parking;
mod resilient;

use crate::Server;
use crate::open_state::{Effects, WaitToken};

impl Server {
    /// Carries out what an [`OpenState`](crate::open_state::OpenState) verb decided: the
    /// breaks go to their sessions, the disconnected durable opens that can no longer answer
    /// are purged, and the persistent opens whose state changed are written to the store
    /// (crate::persist) before the handler answers. Returns the wait the request must make,
    /// if any ([`Self::oplock_wait`]).
    pub(crate) fn apply(&self, fx: Effects) -> Option<WaitToken> {
        self.send_breaks(&fx.oplock_breaks);
        self.send_lease_breaks(&fx.lease_breaks);
        for id in fx.purge {
            self.purge_parked(id);
        }
        self.persist_opens(&fx.recorded);
        fx.wait
    }
}
