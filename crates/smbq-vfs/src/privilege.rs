//! smbq's own metadata under per-user identities (smbq_server::unix_identity): a request's
//! thread runs as the account's Unix user, so the kernel checks its file access, but the
//! extended attributes holding DOS attributes, security descriptors and streams are smbq's
//! bookkeeping, which the SMB layer has already authorized (FILE_WRITE_ATTRIBUTES, WRITE_DAC,
//! ...). They are read and written with the server's own (root) effective uid, as without
//! per-user identities: a READONLY file (mode 0444) must still take a new DOS attribute, and
//! a directory listing reads them through /proc/self/fd, which a switched thread may not.

use std::cell::Cell;

use rustix::process::Uid;
use rustix::thread::set_thread_res_uid;

std::thread_local! {
    /// The uid this thread was switched to, while it runs a request as that user.
    static USER: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The uid the calling thread runs a request as, if it was switched (per-user identities).
pub fn thread_user() -> Option<u32> {
    USER.with(|u| u.get())
}

/// Records that the calling thread now runs as `uid` (or again as the server, `None`).
pub fn set_thread_user(uid: Option<u32>) {
    USER.with(|u| u.set(uid));
}

/// Runs `f` with the server's effective uid when the thread runs as a user; as is otherwise.
/// Only for changes the SMB layer has already authorized.
pub fn as_server<T>(f: impl FnOnce() -> T) -> T {
    let Some(uid) = USER.with(|u| u.get()) else {
        return f();
    };
    // Without the switch the call runs as the user, and the kernel answers as for them.
    if set_thread_res_uid(None, Some(Uid::ROOT), None).is_err() {
        return f();
    }
    let r = f();
    if let Err(e) = set_thread_res_uid(None, Some(Uid::from_raw(uid)), None) {
        eprintln!("smbq: cannot switch a thread back to its user ({e}); stopping");
        std::process::abort();
    }
    r
}
