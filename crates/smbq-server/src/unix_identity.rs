//! Per-user Unix identities on disk (`unix_identity = "per-user"`): every file system
//! operation of a session runs with its account's uid, gid and supplementary groups, so the
//! kernel enforces POSIX permissions and new files belong to their creator.
//!
//! Linux keeps credentials per thread, and the raw setresuid/setresgid/setgroups system
//! calls (rustix's `set_thread_*`, safe wrappers) change only the calling thread, unlike
//! glibc's process-wide wrappers. Each blocking file-system task switches its thread to the
//! user on entry and back to the server's own credentials when it ends ([`Switched`]'s drop),
//! before tokio reuses the thread; a failed switch back aborts the process rather than let
//! another user's request run with the wrong identity. The server must run as root: the
//! switch back to euid 0 relies on the real and saved uid staying 0.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
use smbq_wire::NtStatus;

/// A Unix user as the kernel knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnixIdentity {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (getgrouplist), the primary group included.
    pub groups: Vec<u32>,
}

/// Account name to Unix user (the binary reads the account file and the passwd database).
pub trait UnixIdentities: Send + Sync + std::fmt::Debug {
    /// `None`: the account has no Unix user, so it gets nothing on a per-user share.
    fn lookup(&self, account: &str) -> Option<UnixIdentity>;
}

/// Which shares run per user, and how accounts map.
#[derive(Debug)]
pub struct UnixIdentityPolicy {
    pub identities: Arc<dyn UnixIdentities>,
    /// The server-wide setting, for shares that do not set their own.
    pub default_on: bool,
    /// Lower-cased share name to its own setting.
    pub shares: HashMap<String, bool>,
    /// Guest and anonymous sessions act as this account's Unix user (e.g. "nobody").
    pub guest_account: String,
}

impl UnixIdentityPolicy {
    fn on_for(&self, share: Option<&str>) -> bool {
        // IPC$ is named pipes in the server's memory: no file system, no identity needed.
        if share.is_some_and(|s| s.eq_ignore_ascii_case("IPC$")) {
            return false;
        }
        share
            .and_then(|s| self.shares.get(&s.to_lowercase()).copied())
            .unwrap_or(self.default_on)
    }
}

tokio::task_local! {
    /// The identity the current request's blocking work runs with.
    pub(crate) static CURRENT: Option<Arc<UnixIdentity>>;
}

/// The server's own credentials, captured at the first switch (before any).
struct Own {
    gid: Gid,
    groups: Vec<Gid>,
}

fn own() -> &'static Own {
    static OWN: OnceLock<Own> = OnceLock::new();
    OWN.get_or_init(|| Own {
        gid: rustix::process::getegid(),
        groups: rustix::process::getgroups().unwrap_or_default(),
    })
}

/// Whether per-user identities can work here: the process must be root.
pub fn check_root() -> Result<(), String> {
    if rustix::process::geteuid().is_root() && rustix::process::getuid().is_root() {
        own();
        Ok(())
    } else {
        Err(
            "unix_identity = \"per-user\" needs the server to run as root: each request \
             switches its thread to the user's uid, gid and groups and back"
                .into(),
        )
    }
}

/// A thread running as a user; dropping it switches back to the server's credentials.
pub(crate) struct Switched(());

impl UnixIdentity {
    /// Switches the calling thread: groups and gid first, while the thread still has the
    /// privilege to, then the uid (the effective uid, which also sets the fsuid).
    pub(crate) fn enter(&self) -> std::io::Result<Switched> {
        own();
        let groups: Vec<Gid> = self.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        set_thread_groups(&groups)?;
        let switched = Switched(());
        set_thread_res_gid(None, Some(Gid::from_raw(self.gid)), None)?;
        set_thread_res_uid(None, Some(Uid::from_raw(self.uid)), None)?;
        smbq_vfs::privilege::set_thread_user(Some(self.uid));
        Ok(switched)
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        smbq_vfs::privilege::set_thread_user(None);
        let own = own();
        let back = set_thread_res_uid(None, Some(Uid::ROOT), None)
            .and_then(|()| set_thread_res_gid(None, Some(own.gid), None))
            .and_then(|()| set_thread_groups(&own.groups));
        if let Err(e) = back {
            eprintln!("smbq: cannot switch a thread back to the server's identity ({e}); stopping");
            std::process::abort();
        }
    }
}

std::thread_local! {
    /// Whether this thread runs a request as its user (set by [`run_as`]).
    static ACTIVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread runs a request as its Unix user: then the kernel, not root,
/// decides, and checks the kernel only makes later (a delete at close) are made early.
pub(crate) fn active() -> bool {
    ACTIVE.with(|a| a.get())
}

/// Runs `f` as the current request's user, if it has one.
pub(crate) fn run_as<T>(
    who: Option<&UnixIdentity>,
    f: impl FnOnce() -> Result<T, NtStatus>,
) -> Result<T, NtStatus> {
    let Some(id) = who else {
        return f();
    };
    let switched = id.enter().map_err(|e| {
        tracing::warn!(user = %id.name, error = %e, "cannot switch to the user's identity");
        NtStatus::ACCESS_DENIED
    })?;
    ACTIVE.with(|a| a.set(true));
    // Cleared on unwinding too: the thread may be an async worker (crate::inline_io).
    struct Inactive;
    impl Drop for Inactive {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(false));
        }
    }
    let inactive = Inactive;
    let r = f();
    drop(inactive);
    drop(switched);
    r
}

/// The identity a request on `share` (none for TREE_CONNECT's own checks) of a session
/// logged on as `account` runs with; ACCESS_DENIED when the share is per-user and the
/// account maps to no Unix user.
pub(crate) fn for_request(
    policy: Option<&UnixIdentityPolicy>,
    cache: &OnceLock<Option<Arc<UnixIdentity>>>,
    share: Option<&str>,
    account: &str,
    guest: bool,
) -> Result<Option<Arc<UnixIdentity>>, NtStatus> {
    let Some(p) = policy.filter(|p| p.on_for(share)) else {
        return Ok(None);
    };
    let name = if guest { &p.guest_account } else { account };
    cache
        .get_or_init(|| p.identities.lookup(name).map(Arc::new))
        .clone()
        .map(Some)
        .ok_or(NtStatus::ACCESS_DENIED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct One;
    impl UnixIdentities for One {
        fn lookup(&self, account: &str) -> Option<UnixIdentity> {
            (account == "alice").then(|| UnixIdentity {
                name: "alice".into(),
                uid: 1000,
                gid: 1000,
                groups: vec![1000],
            })
        }
    }

    fn policy(default_on: bool) -> UnixIdentityPolicy {
        UnixIdentityPolicy {
            identities: Arc::new(One),
            default_on,
            shares: HashMap::from([("public".to_string(), false), ("home".to_string(), true)]),
            guest_account: "nobody".into(),
        }
    }

    #[test]
    fn shares_override_the_server_setting() {
        let p = policy(true);
        let cache = OnceLock::new();
        let got = for_request(Some(&p), &cache, Some("Data"), "alice", false).unwrap();
        assert_eq!(got.unwrap().uid, 1000);
        let off = for_request(Some(&p), &OnceLock::new(), Some("PUBLIC"), "alice", false);
        assert_eq!(off, Ok(None));
        let p = policy(false);
        assert_eq!(
            for_request(Some(&p), &OnceLock::new(), Some("x"), "alice", false),
            Ok(None)
        );
        let on = for_request(Some(&p), &OnceLock::new(), Some("home"), "alice", false);
        assert!(on.unwrap().is_some());
        assert_eq!(
            for_request(None, &OnceLock::new(), Some("home"), "alice", false),
            Ok(None)
        );
    }

    /// Needs root (scripts/test.sh runs as root); elsewhere it says so and checks nothing.
    #[test]
    fn a_thread_switches_to_the_user_and_back() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: per-thread switching not exercised");
            return;
        }
        let nobody = UnixIdentity {
            name: "nobody".into(),
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        };
        let other_thread = std::thread::spawn(|| rustix::process::geteuid().as_raw());
        let seen = run_as(Some(&nobody), || {
            Ok((
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
                active(),
            ))
        })
        .unwrap();
        assert_eq!(seen, (65534, 65534, true), "inside: the user");
        assert!(rustix::process::geteuid().is_root(), "after: root again");
        assert!(!active());
        assert_eq!(
            other_thread.join().unwrap(),
            0,
            "other threads never switch"
        );
        // A failing closure switches back too.
        let r: Result<(), NtStatus> = run_as(Some(&nobody), || Err(NtStatus::ACCESS_DENIED));
        assert_eq!(r, Err(NtStatus::ACCESS_DENIED));
        assert!(rustix::process::geteuid().is_root());
    }

    #[test]
    fn an_account_without_a_unix_user_is_denied_and_guests_use_the_guest_account() {
        let p = policy(true);
        let denied = for_request(Some(&p), &OnceLock::new(), Some("data"), "bob", false);
        assert_eq!(denied, Err(NtStatus::ACCESS_DENIED));
        let guest = for_request(Some(&p), &OnceLock::new(), Some("data"), "alice", true);
        assert_eq!(
            guest,
            Err(NtStatus::ACCESS_DENIED),
            "nobody is not mapped here"
        );
    }
}
