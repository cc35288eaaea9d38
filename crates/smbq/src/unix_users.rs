//! Accounts to Unix users for `unix_identity = "per-user"`: the account file's mapping (or
//! the account's own name), then the system's user and group databases (NSS, so LDAP or
//! SSSD users work as well as /etc/passwd ones).

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;

use smbq_server::unix_identity::{UnixIdentities, UnixIdentity, UnixIdentityPolicy};

use crate::accounts::LiveAccounts;
use crate::config::{FileConfig, per_user};

#[derive(Debug)]
pub struct SystemUsers {
    accounts: Arc<LiveAccounts>,
    guest: String,
}

/// A Unix user's uid, gid and groups, from the system databases.
pub fn resolve(unix: &str) -> Option<UnixIdentity> {
    let user = nix::unistd::User::from_name(unix).ok().flatten()?;
    let groups = nix::unistd::getgrouplist(&CString::new(unix).ok()?, user.gid).ok()?;
    Some(UnixIdentity {
        name: unix.to_string(),
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        groups: groups.into_iter().map(|g| g.as_raw()).collect(),
    })
}

impl UnixIdentities for SystemUsers {
    fn lookup(&self, account: &str) -> Option<UnixIdentity> {
        let unix = if account == self.guest {
            self.guest.clone()
        } else {
            self.accounts.unix_user(account)?
        };
        let id = resolve(&unix);
        match &id {
            None => {
                tracing::warn!(account, unix_user = %unix, "no such Unix user: the account gets nothing on per-user shares")
            }
            // Root would bypass every permission the mode is there to enforce.
            Some(i) if i.uid == 0 => {
                tracing::warn!(account, unix_user = %unix, "an account may not act as root on per-user shares");
                return None;
            }
            Some(_) => {}
        }
        id
    }
}

/// The policy the server runs with, or `None` when no share is per-user.
pub fn policy(
    file: &FileConfig,
    accounts: Arc<LiveAccounts>,
) -> Result<Option<UnixIdentityPolicy>, String> {
    let default_on = per_user(file.unix_identity.as_deref(), "")?.unwrap_or(false);
    let mut shares = HashMap::new();
    for (name, s) in &file.shares {
        if let Some(on) = per_user(s.unix_identity.as_deref(), &format!("[share.{name}]"))? {
            shares.insert(name.to_lowercase(), on);
        }
    }
    if !default_on && !shares.values().any(|on| *on) {
        return Ok(None);
    }
    smbq_server::unix_identity::check_root()?;
    let guest = file
        .guest_unix_user
        .clone()
        .unwrap_or_else(|| "nobody".into());
    Ok(Some(UnixIdentityPolicy {
        identities: Arc::new(SystemUsers {
            accounts,
            guest: guest.clone(),
        }),
        default_on,
        shares,
        guest_account: guest,
    }))
}
