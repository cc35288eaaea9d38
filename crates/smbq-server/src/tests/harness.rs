use std::sync::Arc;

use bytes::Bytes;
use smbq_auth::Identity;
use smbq_proto::{ConnView, Limits, Request, Response, SessionView};
use smbq_wire::close::CloseRequest;
use smbq_wire::create::{CreateDisposition, CreateRequest, CreateResponse, OplockLevel};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::flush::FlushRequest;
use smbq_wire::ioctl::{CtlCode, IoctlRequest, IoctlResponse, flags as ioctl_flags};
use smbq_wire::read::ReadRequest;
use smbq_wire::tree_connect::{TreeConnectRequest, TreeConnectResponse};
use smbq_wire::write::WriteRequest;
use smbq_wire::{Command, Dialect, FileId, Header, NtStatus, Writer};
use tokio_util::sync::CancellationToken;

use crate::access::{mask, share};
use crate::{EncryptPolicy, Server, ServerConfig, ShareConfig};

pub struct H {
    pub srv: Arc<Server>,
    pub conn: ConnView,
    pub session: SessionView,
    pub tree: u32,
    pub dir: tempfile::TempDir,
}

pub fn share(name: &str, path: &std::path::Path) -> ShareConfig {
    ShareConfig {
        name: name.into(),
        path: path.into(),
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
        posix_extensions: true,
    }
}

pub fn config(shares: Vec<ShareConfig>) -> ServerConfig {
    ServerConfig {
        server_name: "SMBQ".into(),
        server_guid: [7; 16],
        shares,
        encrypt: EncryptPolicy::Off,
        guest_ok: false,
        access_based_share_enum: true,
        limits: Limits::default(),
        refuse_hardlinks: false,
        logon: Default::default(),
        interfaces: Default::default(),
        restrict_named_pipes_quic: true,
        node_tag: 0,
    }
}

pub fn conn() -> ConnView {
    ConnView {
        id: 1,
        dialect: Dialect::SMB3_1_1,
        client_guid: [1; 16],
        client_capabilities: 0,
        client_security_mode: 1,
        server_capabilities: 0,
        server_security_mode: 1,
        client_dialects: vec![Dialect::SMB3_0_2, Dialect::SMB3_1_1],
        max_read_size: 1 << 20,
        max_write_size: 1 << 20,
        max_transact_size: 1 << 16,
        transport_security: false,
        posix: true,
        peer: "test".into(),
        transport: smbq_proto::engine::Transport::Tcp,
    }
}

pub fn session(id: u64) -> SessionView {
    SessionView {
        id,
        identity: Arc::new(Identity {
            user: "alice".into(),
            domain: "D".into(),
            is_guest: false,
            is_anonymous: false,
        }),
        encrypt_data: false,
        can_encrypt: true,
    }
}

pub fn msg(cmd: Command, tree: u32, session: u64, f: impl FnOnce(&mut Writer)) -> Bytes {
    let h = Header {
        command: cmd,
        tree_id: tree,
        session_id: session,
        message_id: 1,
        ..Default::default()
    };
    let mut w = Writer::new();
    h.encode(&mut w);
    f(&mut w);
    Bytes::from(w.into_vec())
}

pub struct Open {
    pub status: NtStatus,
    pub id: FileId,
    pub resp: Option<Response>,
}

impl Open {
    pub fn create(&self) -> CreateResponse<'_> {
        let r = self.resp.as_ref().unwrap();
        let mut m = vec![0u8; 64];
        m.extend_from_slice(&r.body);
        // Re-decode from an owned copy leaked for the test's lifetime.
        let m: &'static [u8] = Box::leak(m.into_boxed_slice());
        CreateResponse::decode(m).unwrap()
    }
}

/// An FSCTL (IOCTL with SMB2_0_IOCTL_IS_FSCTL) on `id` in `tree` of session `sid`.
pub fn ioctl_msg(
    tree: u32,
    sid: u64,
    ctl: CtlCode,
    id: FileId,
    input: &[u8],
    max_out: u32,
) -> Bytes {
    msg(Command::IOCTL, tree, sid, |w| {
        IoctlRequest {
            ctl_code: ctl,
            file_id: id,
            input,
            max_output_response: max_out,
            flags: ioctl_flags::IS_FSCTL,
            ..Default::default()
        }
        .encode(w)
    })
}

/// The output buffer of an IOCTL response; empty for an SMB2 ERROR response.
pub fn ioctl_output(r: &Response) -> Vec<u8> {
    if r.body.is_empty() {
        return Vec::new();
    }
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&r.body);
    IoctlResponse::decode(&m).unwrap().output.to_vec()
}

impl H {
    /// An FSCTL on `id` in this session and tree: its status and output buffer.
    pub async fn fsctl(
        &self,
        ctl: CtlCode,
        id: FileId,
        input: &[u8],
        max_out: u32,
    ) -> (NtStatus, Vec<u8>) {
        let r = self
            .send(ioctl_msg(
                self.tree,
                self.session.id,
                ctl,
                id,
                input,
                max_out,
            ))
            .await;
        (r.status, ioctl_output(&r))
    }

    pub async fn new() -> H {
        Self::with(|_| {}).await
    }

    pub async fn with(tweak: impl FnOnce(&mut ServerConfig)) -> H {
        Self::on_dir(tempfile::tempdir().unwrap(), tweak).await
    }

    /// A server whose share "data" is the in-memory tree `vfs`.
    pub async fn on_mem(vfs: smbq_vfs::MemVfs, tweak: impl FnOnce(&mut ServerConfig)) -> H {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(vec![share("data", dir.path())]);
        tweak(&mut cfg);
        let srv = Server::with_backends(cfg, move |_| {
            Ok(std::sync::Arc::new(vfs.clone()) as std::sync::Arc<dyn smbq_vfs::Vfs>)
        })
        .unwrap();
        Self::started(srv, dir).await
    }

    /// A server on the share directory `dir` (a restart over an earlier server's files).
    pub async fn on_dir(dir: tempfile::TempDir, tweak: impl FnOnce(&mut ServerConfig)) -> H {
        let mut cfg = config(vec![share("data", dir.path())]);
        tweak(&mut cfg);
        Self::started(Server::new(cfg).unwrap(), dir).await
    }

    /// A harness on `srv`, with a session and the share "data" connected.
    async fn started(srv: Arc<Server>, dir: tempfile::TempDir) -> H {
        // What the engine does for a session it sets up: a record, then SessionStarted.
        srv.session_table().insert(0x11);
        srv.session_started(0x11, conn().id);
        let mut h = H {
            srv,
            conn: conn(),
            session: session(0x11),
            tree: 0,
            dir,
        };
        let r = h.tree_connect("\\\\srv\\data").await;
        assert_eq!(r.status, NtStatus::SUCCESS);
        h.tree = r.tree_id.unwrap();
        h
    }

    pub async fn send(&self, m: Bytes) -> Response {
        self.send_with(m, None, CancellationToken::new()).await
    }

    pub async fn send_with(
        &self,
        m: Bytes,
        session: Option<SessionView>,
        cancel: CancellationToken,
    ) -> Response {
        let mut req = self.request(m);
        req.session = Some(session.unwrap_or_else(|| self.session.clone()));
        self.srv.handle(&self.conn, &req, cancel).await
    }

    /// `m` as the engine hands it up, on this harness's session.
    pub fn request(&self, m: Bytes) -> Request {
        Request {
            header: Header::decode(&m).unwrap(),
            msg: m,
            session: Some(self.session.clone()),
            encrypted: false,
            related_file_id: None,
            async_id: None,
        }
    }

    pub async fn tree_connect(&self, path: &str) -> Response {
        let p = utf16le_encode(path);
        let m = msg(Command::TREE_CONNECT, 0, self.session.id, |w| {
            TreeConnectRequest {
                flags: 0,
                path_utf16: &p,
                contexts: vec![],
            }
            .encode(w)
        });
        self.send(m).await
    }

    pub fn tree_resp(r: &Response) -> TreeConnectResponse {
        let mut m = vec![0u8; 64];
        m.extend_from_slice(&r.body);
        TreeConnectResponse::decode(&m).unwrap()
    }

    /// A CREATE of `name` to build further (share access, options, attributes, contexts)
    /// and [`send`](CreateReq::send).
    pub fn create_req<'a>(
        &'a self,
        name: &'a str,
        access: u32,
        disp: CreateDisposition,
    ) -> CreateReq<'a> {
        CreateReq {
            h: self,
            name,
            access,
            share_access: share::ALL,
            disp,
            options: 0,
            attrs: 0,
            contexts: &[],
            oplock: OplockLevel::NONE,
        }
    }

    pub async fn create(
        &self,
        name: &str,
        access: u32,
        disp: CreateDisposition,
        options: u32,
    ) -> Open {
        self.create_req(name, access, disp)
            .options(options)
            .send()
            .await
    }

    /// Creates (or truncates) a file and writes `data` into it, then closes it.
    pub async fn put(&self, name: &str, data: &[u8]) {
        let o = self
            .create(name, mask::GENERIC_ALL, CreateDisposition::OVERWRITE_IF, 0)
            .await;
        assert_eq!(o.status, NtStatus::SUCCESS, "create {name}");
        if !data.is_empty() {
            assert_eq!(self.write(o.id, 0, data).await.status, NtStatus::SUCCESS);
        }
        assert_eq!(self.close(o.id).await.status, NtStatus::SUCCESS);
    }

    /// SET_INFO FileRenameInformation (class 10) on `id`, without replacing.
    pub async fn rename(&self, id: FileId, to: &str) -> Response {
        let mut w = Writer::new();
        smbq_wire::fscc::file_info::RenameInfo {
            replace_if_exists: false,
            root_directory: 0,
            file_name: to.into(),
        }
        .encode(&mut w);
        let buf = w.into_vec();
        self.send(msg(Command::SET_INFO, self.tree, self.session.id, |w| {
            smbq_wire::set_info::SetInfoRequest {
                info_type: smbq_wire::query_info::InfoType::FILE,
                file_info_class: 10,
                additional_information: 0,
                file_id: id,
                buffer: &buf,
            }
            .encode(w)
        }))
        .await
    }

    pub async fn close(&self, id: FileId) -> Response {
        self.send(msg(Command::CLOSE, self.tree, self.session.id, |w| {
            CloseRequest {
                flags: 0,
                file_id: id,
            }
            .encode(w)
        }))
        .await
    }

    pub async fn write(&self, id: FileId, offset: u64, data: &[u8]) -> Response {
        self.send(msg(Command::WRITE, self.tree, self.session.id, |w| {
            WriteRequest {
                offset,
                file_id: id,
                data,
                ..Default::default()
            }
            .encode(w)
        }))
        .await
    }

    pub async fn flush(&self, id: FileId) -> Response {
        self.send(msg(Command::FLUSH, self.tree, self.session.id, |w| {
            FlushRequest { file_id: id }.encode(w)
        }))
        .await
    }

    pub async fn read(&self, id: FileId, offset: u64, len: u32) -> Response {
        self.send(msg(Command::READ, self.tree, self.session.id, |w| {
            ReadRequest {
                padding: 0x50,
                length: len,
                offset,
                file_id: id,
                ..Default::default()
            }
            .encode(w)
        }))
        .await
    }

    pub fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }
}

/// A CREATE request being built ([`H::create_req`]): shares everything, with no options,
/// attributes or contexts, unless set.
#[must_use]
pub struct CreateReq<'a> {
    h: &'a H,
    name: &'a str,
    access: u32,
    share_access: u32,
    disp: CreateDisposition,
    options: u32,
    attrs: u32,
    contexts: &'a [u8],
    oplock: OplockLevel,
}

impl<'a> CreateReq<'a> {
    pub fn share(self, share_access: u32) -> Self {
        Self {
            share_access,
            ..self
        }
    }

    pub fn options(self, options: u32) -> Self {
        Self { options, ..self }
    }

    pub fn attrs(self, attrs: u32) -> Self {
        Self { attrs, ..self }
    }

    pub fn contexts(self, contexts: &'a [u8]) -> Self {
        Self { contexts, ..self }
    }

    pub fn oplock(self, oplock: OplockLevel) -> Self {
        Self { oplock, ..self }
    }

    pub async fn send(self) -> Open {
        let n = utf16le_encode(self.name);
        let h = self.h;
        let m = msg(Command::CREATE, h.tree, h.session.id, |w| {
            CreateRequest {
                desired_access: self.access,
                share_access: self.share_access,
                create_disposition: self.disp,
                create_options: self.options,
                file_attributes: self.attrs,
                name: &n,
                contexts: self.contexts,
                requested_oplock_level: self.oplock,
                ..Default::default()
            }
            .encode(w)
        });
        let r = h.send(m).await;
        Open {
            status: r.status,
            id: r.file_id.unwrap_or_default(),
            resp: Some(r),
        }
    }
}
