//! The share registry: configured disk shares plus the always-present IPC$, looked up
//! case-insensitively, with the per-user access decision made at TREE_CONNECT.

use std::io;
use std::sync::Arc;

use smbq_auth::Identity;
use smbq_vfs::Vfs;
use smbq_wire::NtStatus;

use crate::access::mask;
use crate::config::{ServerConfig, ShareConfig};

/// The name of the inter-process communication share (MS-SMB2 3.3.5.7).
pub const IPC_SHARE: &str = "IPC$";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareKind {
    Disk,
    Pipe,
}

pub struct Share {
    pub cfg: ShareConfig,
    pub kind: ShareKind,
    /// `None` for IPC$.
    pub vfs: Option<Arc<dyn Vfs>>,
    /// Stable per-share number reported as the volume serial number and volume id.
    pub serial: u32,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("name", &self.cfg.name)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Share {
    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// MS-SMB2 3.3.5.7: the access a user gets on this share, or why they get none.
    /// Returns the MaximalAccess for the TREE_CONNECT response.
    pub fn check_access(&self, who: &Identity, server_guest_ok: bool) -> Result<u32, NtStatus> {
        if self.kind == ShareKind::Pipe {
            // IPC$ is open to every session, anonymous included (srvsvc share enumeration).
            return Ok(mask::FILE_ALL_ACCESS);
        }
        let guest = who.is_guest || who.is_anonymous;
        if guest && !(self.cfg.guest_ok && server_guest_ok) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if let Some(users) = &self.cfg.allowed_users
            && (guest || !users.iter().any(|u| crate::names_eq(u, &who.user)))
        {
            return Err(NtStatus::ACCESS_DENIED);
        }
        // Share.FileSecurity grants these users nothing: they may connect (and use
        // tree-level IOCTLs such as VALIDATE_NEGOTIATE_INFO) but open nothing.
        if self
            .cfg
            .no_access_users
            .iter()
            .any(|u| crate::names_eq(u, &who.user))
        {
            return Ok(0);
        }
        Ok(self.maximal_access())
    }

    /// The most a client may be granted on this share.
    pub fn maximal_access(&self) -> u32 {
        if self.cfg.read_only && self.kind == ShareKind::Disk {
            mask::FILE_GENERIC_READ | mask::FILE_GENERIC_EXECUTE
        } else {
            mask::FILE_ALL_ACCESS
        }
    }
}

#[derive(Debug)]
pub struct ShareRegistry {
    shares: Vec<Arc<Share>>,
}

impl ShareRegistry {
    /// Builds the registry, opening each disk share's backend with `open`.
    pub fn new(
        cfg: &ServerConfig,
        mut open: impl FnMut(&ShareConfig) -> io::Result<Arc<dyn Vfs>>,
    ) -> io::Result<Self> {
        let mut shares = Vec::with_capacity(cfg.shares.len() + 1);
        for (i, sc) in cfg.shares.iter().enumerate() {
            if sc.name.eq_ignore_ascii_case(IPC_SHARE) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "IPC$ is reserved",
                ));
            }
            if shares
                .iter()
                .any(|s: &Arc<Share>| s.cfg.name.eq_ignore_ascii_case(&sc.name))
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("duplicate share name {:?}", sc.name),
                ));
            }
            let vfs = open(sc)?;
            shares.push(Arc::new(Share {
                cfg: sc.clone(),
                kind: ShareKind::Disk,
                vfs: Some(vfs),
                serial: serial_for(&sc.name, i),
            }));
        }
        shares.push(Arc::new(Share {
            cfg: ShareConfig {
                name: IPC_SHARE.to_owned(),
                path: Default::default(),
                comment: "IPC Service".to_owned(),
                read_only: false,
                allowed_users: None,
                no_access_users: Vec::new(),
                encrypt: false,
                guest_ok: true,
            },
            kind: ShareKind::Pipe,
            vfs: None,
            serial: 0,
        }));
        Ok(Self { shares })
    }

    /// Case-insensitive lookup (share names are case-insensitive on Windows).
    pub fn find(&self, name: &str) -> Option<Arc<Share>> {
        self.shares
            .iter()
            .find(|s| crate::names_eq(&s.cfg.name, name))
            .cloned()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Share>> {
        self.shares.iter()
    }
}

/// A deterministic serial number per share (FNV-1a of the lower-cased name and position), so
/// clients see the same volume across restarts.
fn serial_for(name: &str, index: usize) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name
        .to_lowercase()
        .bytes()
        .chain((index as u32).to_le_bytes())
    {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The share name out of a TREE_CONNECT path `\\server\share` (MS-SMB2 2.2.9). The server
/// part is not checked (clients use names, addresses, or aliases).
pub fn share_from_unc(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("\\\\")?;
    let (_server, share) = rest.split_once('\\')?;
    if share.is_empty() || share.contains('\\') {
        return None;
    }
    Some(share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unc_parsing() {
        assert_eq!(share_from_unc("\\\\srv\\data"), Some("data"));
        assert_eq!(share_from_unc("\\\\10.0.0.1\\IPC$"), Some("IPC$"));
        assert_eq!(share_from_unc("\\\\srv\\"), None);
        assert_eq!(share_from_unc("\\\\srv"), None);
        assert_eq!(share_from_unc("srv\\data"), None);
        assert_eq!(share_from_unc("\\\\srv\\a\\b"), None);
    }
}
