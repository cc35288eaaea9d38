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
    /// The ids of files this share creates (crate::file_id).
    pub(crate) file_ids: crate::file_id::FileIds,
    /// A reload removed or changed the share: its tree connects answer NETWORK_NAME_DELETED.
    retired: std::sync::atomic::AtomicBool,
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

    pub fn is_retired(&self) -> bool {
        self.retired.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::Release);
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

    /// Whether srvsvc lists this share to `who` (NetrShareEnum at every level, and
    /// NetrShareGetInfo, which answers NET_NAME_NOT_FOUND for a share not listed). With
    /// access-based share enumeration on (the default, like Samba's `access based share enum`)
    /// a session sees exactly the shares it could TREE_CONNECT to, decided by
    /// [`check_access`](Self::check_access) so the two can never disagree: a listing then gives
    /// away no share name the session could not use anyway. IPC$ passes that check for everyone.
    /// Connection-dependent refusals (an encrypted share on a connection that cannot encrypt)
    /// do not hide a share: the same session could connect over a connection that can.
    pub fn listed_for(&self, who: &Identity, cfg: &ServerConfig) -> bool {
        !cfg.access_based_share_enum || self.check_access(who, cfg.guest_ok).is_ok()
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
        open: impl FnMut(&ShareConfig) -> io::Result<Arc<dyn Vfs>>,
    ) -> io::Result<Self> {
        Self::build(&cfg.shares, None, open)
    }

    /// The registry a reload makes: shares whose configuration is unchanged are this
    /// registry's own objects, so their tree connects and opens go on; the others are new.
    /// IPC$ stays.
    pub fn reloaded(
        &self,
        shares: &[ShareConfig],
        open: impl FnMut(&ShareConfig) -> io::Result<Arc<dyn Vfs>>,
    ) -> io::Result<Self> {
        Self::build(shares, Some(self), open)
    }

    fn build(
        configs: &[ShareConfig],
        previous: Option<&ShareRegistry>,
        mut open: impl FnMut(&ShareConfig) -> io::Result<Arc<dyn Vfs>>,
    ) -> io::Result<Self> {
        let mut shares = Vec::with_capacity(configs.len() + 1);
        for (i, sc) in configs.iter().enumerate() {
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
            let same = previous
                .and_then(|p| p.find(&sc.name))
                .filter(|old| old.kind == ShareKind::Disk && old.cfg == *sc);
            if let Some(old) = same {
                shares.push(old);
                continue;
            }
            let vfs = open(sc)?;
            shares.push(Arc::new(Share {
                cfg: sc.clone(),
                kind: ShareKind::Disk,
                vfs: Some(vfs),
                serial: serial_for(&sc.name, i),
                file_ids: Default::default(),
                retired: Default::default(),
            }));
        }
        if let Some(ipc) = previous.and_then(|p| p.find(IPC_SHARE)) {
            shares.push(ipc);
            return Ok(Self { shares });
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
                acl_flag_inherited_canonicalization: true,
                access_based_enumeration: false,
                compress_data: false,
                continuous_availability: false,
                posix_extensions: false,
            },
            kind: ShareKind::Pipe,
            vfs: None,
            serial: 0,
            file_ids: Default::default(),
            retired: Default::default(),
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
    use smbq_proto::Limits;
    use smbq_vfs::MemVfs;

    use crate::config::EncryptPolicy;

    fn share_cfg(name: &str) -> ShareConfig {
        ShareConfig {
            name: name.to_owned(),
            path: Default::default(),
            comment: String::new(),
            read_only: false,
            allowed_users: None,
            no_access_users: Vec::new(),
            encrypt: false,
            guest_ok: false,
            acl_flag_inherited_canonicalization: true,
            access_based_enumeration: false,
            compress_data: false,
            continuous_availability: false,
            posix_extensions: false,
        }
    }

    fn server_cfg(shares: Vec<ShareConfig>, guest_ok: bool, abse: bool) -> ServerConfig {
        ServerConfig {
            server_name: "SMBQ".into(),
            server_guid: [7; 16],
            shares,
            encrypt: EncryptPolicy::Off,
            guest_ok,
            access_based_share_enum: abse,
            limits: Limits::default(),
            refuse_hardlinks: false,
            logon: Default::default(),
            interfaces: Default::default(),
            restrict_named_pipes_quic: true,
            node_tag: 0,
        }
    }

    fn who(user: &str, is_guest: bool, is_anonymous: bool) -> Identity {
        Identity {
            user: user.to_owned(),
            domain: String::new(),
            is_guest,
            is_anonymous,
        }
    }

    /// The names `id` sees listed, in registry order.
    fn listed(reg: &ShareRegistry, cfg: &ServerConfig, id: &Identity) -> Vec<String> {
        reg.iter()
            .filter(|s| s.listed_for(id, cfg))
            .map(|s| s.name().to_owned())
            .collect()
    }

    #[test]
    fn listing_follows_the_tree_connect_decision() {
        let mut team = share_cfg("team");
        team.allowed_users = Some(vec!["Tester".into()]);
        let mut secret = share_cfg("secret");
        secret.allowed_users = Some(vec!["nobody-else".into()]);
        let mut public = share_cfg("public");
        public.guest_ok = true;
        let mut blind = share_cfg("blind");
        blind.no_access_users = vec!["tester".into()];
        let shares = vec![share_cfg("open"), team, secret, public, blind];
        let cfg = server_cfg(shares, true, true);
        let reg =
            ShareRegistry::new(&cfg, |_| Ok(Arc::new(MemVfs::new()) as Arc<dyn Vfs>)).unwrap();
        let anonymous = who("", false, true);
        let guest = who("stranger", true, false);
        let tester = who("tester", false, false);
        let other = who("alice", false, false);

        for id in [&anonymous, &guest, &tester, &other] {
            for s in reg.iter() {
                assert_eq!(
                    s.listed_for(id, &cfg),
                    s.check_access(id, cfg.guest_ok).is_ok(),
                    "{} for {:?}",
                    s.name(),
                    id.user
                );
            }
        }
        assert_eq!(listed(&reg, &cfg, &anonymous), ["public", "IPC$"]);
        assert_eq!(listed(&reg, &cfg, &guest), ["public", "IPC$"]);
        // Allowed user names compare case-insensitively; a user granted nothing in a share
        // still connects to it, so still sees it.
        assert_eq!(
            listed(&reg, &cfg, &tester),
            ["open", "team", "public", "blind", "IPC$"]
        );
        assert_eq!(
            listed(&reg, &cfg, &other),
            ["open", "public", "blind", "IPC$"]
        );

        // Guest sessions refused server-wide: guest_ok shares are hidden from them too.
        let no_guests = server_cfg(cfg.shares.clone(), false, true);
        assert_eq!(listed(&reg, &no_guests, &anonymous), ["IPC$"]);

        // Switched off, everyone sees every share.
        let off = server_cfg(cfg.shares.clone(), true, false);
        let all = ["open", "team", "secret", "public", "blind", "IPC$"];
        for id in [&anonymous, &guest, &tester, &other] {
            assert_eq!(listed(&reg, &off, id), all);
        }
    }

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
