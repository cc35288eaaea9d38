//! Typed server configuration, built by the binary from TOML and flags.

use std::path::PathBuf;

use smbq_proto::Limits;

/// SMB3 encryption policy (MS-SMB2 3.3.1.5 Server.EncryptData / RejectUnencryptedAccess).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EncryptPolicy {
    /// Every session must encrypt; clients that cannot are refused.
    Required,
    /// Encrypt when the client can; others still work.
    Desired,
    /// Encrypt only shares marked `encrypt = true`.
    #[default]
    Off,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareConfig {
    pub name: String,
    pub path: PathBuf,
    pub comment: String,
    pub read_only: bool,
    /// `None`: every authenticated user. Names compare case-insensitively.
    pub allowed_users: Option<Vec<String>>,
    /// Users who may connect but are granted no access to anything in the share
    /// (MS-SMB2 3.3.1.6 Share.FileSecurity; TREE_CONNECT MaximalAccess 0).
    pub no_access_users: Vec<String>,
    /// Share.EncryptData: requests on this share must be encrypted.
    pub encrypt: bool,
    pub guest_ok: bool,
    /// SET_INFO of a DACL keeps SE_DACL_AUTO_INHERITED only with SE_DACL_AUTO_INHERIT_REQ, as
    /// Windows does (Samba: `acl flag inherited canonicalization`); `false` stores the flag
    /// as the client sent it.
    pub acl_flag_inherited_canonicalization: bool,
    /// Access-based enumeration (Windows' share setting; Samba `hide unreadable`): directory
    /// listings leave out what the session may not read, and TREE_CONNECT says so
    /// (SMB2_SHAREFLAG_ACCESS_BASED_DIRECTORY_ENUM).
    pub access_based_enumeration: bool,
    /// SMB2_SHAREFLAG_COMPRESS_DATA: READ responses are compressed whether or not the client
    /// asked, and clients compress their WRITEs (MS-SMB2 2.2.10, 3.3.5.12).
    pub compress_data: bool,
    /// Share.IsCA (MS-SMB2 3.3.1.6): continuously available. TREE_CONNECT says so
    /// (SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY), an open that asks for a persistent handle
    /// gets one (crate::durable), and writes are write-through.
    pub continuous_availability: bool,
    /// The SMB3 POSIX extensions (crate::posix): a CREATE on a connection that negotiated
    /// them and carries the POSIX create context is a POSIX open.
    pub posix_extensions: bool,
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// NetBIOS-style server name used in NTLM target info and srvsvc.
    pub server_name: String,
    pub server_guid: [u8; 16],
    pub shares: Vec<ShareConfig>,
    pub encrypt: EncryptPolicy,
    /// Whether guest (unknown user / anonymous) sessions are allowed at all.
    pub guest_ok: bool,
    /// srvsvc lists to each session only the shares it may connect to (Share::listed_for);
    /// `false` lists every share to everyone.
    pub access_based_share_enum: bool,
    pub limits: Limits,
    /// Refuse regular files with more than one hard link (a link to a file outside the share).
    pub refuse_hardlinks: bool,
    /// Throttling and logging of failed logons (crate::logon_guard).
    pub logon: crate::LogonPolicy,
    /// What FSCTL_QUERY_NETWORK_INTERFACE_INFO may advertise (handlers/interfaces.rs).
    pub interfaces: InterfacePolicy,
    /// Refuse named pipes on QUIC connections (`[quic] restrict_named_pipes`, Windows'
    /// RestrictNamedpipeAccessViaQuic).
    pub restrict_named_pipes_quic: bool,
    /// 0 on one server; a cluster node's own tag, so that no two nodes hand out one id:
    /// - the high 32 bits of every session id (crate::conn::Runtime). A client that
    ///   reconnects to another node names its old session as PreviousSessionId (MS-SMB2
    ///   3.3.5.5.3), which must not end another session there;
    /// - the range of open ids (FileId; [`open_id_base`]): an open taken over or handed over
    ///   from another node keeps the FileId its client knows.
    pub node_tag: u32,
}

/// What the server may advertise to multichannel clients (MS-SMB2 3.3.5.15.11).
#[derive(Clone, Debug, Default)]
pub struct InterfacePolicy {
    /// The one address the server listens on, if it is not the unspecified address.
    pub listen: Option<std::net::IpAddr>,
    /// Advertise every interface as RSS_CAPABLE.
    pub rss_capable: bool,
}

/// Open ids (the slab index in FileId) of a cluster node start here: one of 1024 ranges of
/// 2^22 (the open table's size), by the node's tag; 0 on one server.
pub fn open_id_base(node_tag: u32) -> u32 {
    (node_tag % 1024) << 22
}
