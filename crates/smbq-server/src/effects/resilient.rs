//! Resilient handles (MS-SMB2 3.3.5.15.9, FSCTL_LMR_REQUEST_RESILIENCY): an application asks
//! the server to keep an open across a broken connection for a while, whatever oplock or
//! lease it holds. smbq keeps it in the durable store with a grant marked resilient: parked
//! on disconnect or LOGOFF like a durable open, closed at its timeout, reclaimed by DHnC by the
//! same account, and, unlike a durable open, not purged when another open needs it broken
//! (the break completes at once; its share mode and locks stay, as on Windows).

use std::time::Duration;

use smbq_wire::NtStatus;

use crate::Server;
use crate::durable::DurableGrant;
use crate::tables::Open;

/// Open.ResiliencyTimeout when the request says 0 (Windows Server 2012 and later: 120 s),
/// capped by `max_durable_timeout_secs`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

impl Server {
    /// Makes `open` resilient for `timeout_ms` (0: the default) on behalf of `user`.
    /// STATUS_INVALID_PARAMETER for a timeout past the configured maximum (MS-SMB2 rejects
    /// rather than clamps) or a directory; STATUS_NOT_SUPPORTED for a pipe.
    pub(crate) fn make_resilient(
        &self,
        open: &Open,
        user: &str,
        client_guid: [u8; 16],
        timeout_ms: u32,
    ) -> Result<(), NtStatus> {
        let f = open.file().ok_or(NtStatus::NOT_SUPPORTED)?;
        if f.is_dir {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let max = self.limits().max_durable_timeout_secs;
        if u64::from(timeout_ms / 1000) > max {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let timeout = if timeout_ms == 0 {
            DEFAULT_TIMEOUT.min(Duration::from_secs(max))
        } else {
            Duration::from_millis(u64::from(timeout_ms))
        };
        // Open.IsDurable becomes FALSE: a durable grant it had is replaced, and a persistent
        // one's record goes (crate::persist).
        let grant = DurableGrant {
            create_guid: None,
            client_guid,
            user: user.to_string(),
            timeout,
            resilient: true,
            persistent: false,
        };
        self.stop_persisting(open, grant);
        Ok(())
    }
}
