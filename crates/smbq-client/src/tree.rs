//! A connected share: opening files, listing, and the name operations built on CREATE.

use smbq_wire::create::{
    CreateDisposition, CreateRequest, ImpersonationLevel, OplockLevel, create_options,
};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::access;
use smbq_wire::fscc::attributes::FILE_ATTRIBUTE_DIRECTORY;
use smbq_wire::fscc::file_info::RenameInfo;
use smbq_wire::tree_connect::TreeDisconnectRequest;
use smbq_wire::{Command, FileId, NtStatus, Writer};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::conn::Lane;
use crate::file::File;
use crate::session::{Session, check};
use crate::{DirEntry, Error, Metadata, ProtocolError};

/// One share on one session. Cheap to clone.
#[derive(Clone)]
pub struct Tree {
    pub(crate) session: Session,
    pub(crate) id: u32,
    pub(crate) encrypt: bool,
    share_type: u8,
    name: String,
    /// TreeConnect.IsCAShare: the share is continuously available (durable.rs asks for
    /// persistent handles there).
    pub(crate) ca: bool,
    /// The session on further connections (multichannel channels, `Client::bind`): READs and
    /// WRITEs take turns over `session` and these; everything else stays on `session`.
    channels: Arc<Vec<Session>>,
    next_channel: Arc<AtomicUsize>,
}

/// How to open a file (CREATE's knobs, MS-SMB2 2.2.13).
#[derive(Clone, Debug)]
pub struct OpenOptions {
    pub access: u32,
    pub disposition: CreateDisposition,
    pub options: u32,
    pub share: u32,
    pub attributes: u32,
}

impl OpenOptions {
    /// Open an existing file or directory for reading.
    pub fn read() -> Self {
        Self {
            access: access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            disposition: CreateDisposition::OPEN,
            options: 0,
            share: access::FILE_SHARE_READ | access::FILE_SHARE_WRITE | access::FILE_SHARE_DELETE,
            attributes: 0,
        }
    }

    /// Create or truncate a regular file for writing.
    pub fn create_truncate() -> Self {
        Self {
            access: access::FILE_READ_DATA
                | access::FILE_WRITE_DATA
                | access::FILE_READ_ATTRIBUTES
                | access::FILE_WRITE_ATTRIBUTES
                | access::SYNCHRONIZE,
            disposition: CreateDisposition::OVERWRITE_IF,
            options: create_options::NON_DIRECTORY_FILE,
            share: access::FILE_SHARE_READ,
            attributes: 0,
        }
    }

    /// Open or create a regular file for writing without truncating it (resume).
    pub fn create_keep() -> Self {
        Self {
            disposition: CreateDisposition::OPEN_IF,
            ..Self::create_truncate()
        }
    }
}

/// Share-relative SMB path: forward slashes become backslashes, no leading separator.
pub fn smb_path(path: &str) -> String {
    path.split(['/', '\\'])
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("\\")
}

impl Tree {
    pub(crate) fn new(
        session: Session,
        id: u32,
        encrypt: bool,
        share_type: u8,
        name: String,
    ) -> Self {
        Self {
            session,
            id,
            encrypt,
            share_type,
            name,
            ca: false,
            channels: Arc::new(Vec::new()),
            next_channel: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// This tree with READ and WRITE spread over `channels` too: the same session bound to
    /// other connections of the same server (`Client::bind`). A TreeId is the session's, so
    /// it is valid on every channel (MS-SMB2 3.3.5.2.11).
    pub fn with_channels(&self, channels: Vec<Session>) -> Result<Tree, Error> {
        if channels.iter().any(|c| c.id() != self.session.id()) {
            return Err(
                ProtocolError::Unsupported("a channel must carry the tree's own session").into(),
            );
        }
        Ok(Tree {
            channels: Arc::new(channels),
            ..self.clone()
        })
    }

    /// How many connections this tree's data requests use.
    pub fn channel_count(&self) -> usize {
        1 + self.channels.len()
    }

    /// The session a data request goes out on: the channels in turn, skipping those whose
    /// connection is gone.
    fn data_session(&self) -> &Session {
        if self.channels.is_empty() {
            return &self.session;
        }
        let n = self.next_channel.fetch_add(1, Ordering::Relaxed) % (1 + self.channels.len());
        match n.checked_sub(1).and_then(|i| self.channels.get(i)) {
            Some(ch) if ch.client().closed_reason().is_none() => ch,
            _ => &self.session,
        }
    }

    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Whether the share is continuously available (SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY).
    pub fn is_continuously_available(&self) -> bool {
        self.ca
    }

    pub fn share_type(&self) -> u8 {
        self.share_type
    }
    /// Whether requests on this tree are sealed.
    pub fn encrypts(&self) -> bool {
        self.session.protect(self.encrypt).encrypt
    }
    pub fn session(&self) -> &Session {
        &self.session
    }

    pub(crate) async fn send(
        &self,
        command: Command,
        body: Vec<u8>,
        payload: Option<bytes::Bytes>,
        io_size: usize,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        self.send_as(command, body, payload, io_size, false).await
    }

    /// [`Self::send`] for a request naming an open: on its data stream, if any.
    pub(crate) async fn send_for(
        &self,
        open: FileId,
        command: Command,
        body: Vec<u8>,
        payload: Option<bytes::Bytes>,
        io_size: usize,
        replay: bool,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        self.send_out(
            command,
            body,
            payload,
            io_size,
            replay,
            Lane::Open(open.persistent),
        )
        .await
    }

    /// [`Self::send`], flagged as a replay when `replay` (see `File::replay_writes_below`).
    pub(crate) async fn send_as(
        &self,
        command: Command,
        body: Vec<u8>,
        payload: Option<bytes::Bytes>,
        io_size: usize,
        replay: bool,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        self.send_out(command, body, payload, io_size, replay, Lane::Any)
            .await
    }

    async fn send_out(
        &self,
        command: Command,
        body: Vec<u8>,
        payload: Option<bytes::Bytes>,
        io_size: usize,
        replay: bool,
        lane: Lane,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        let out = crate::conn::Outgoing {
            command,
            session_id: self.session.id(),
            tree_id: self.id,
            body,
            payload,
            io_size,
            replay,
            lane,
        };
        if !matches!(command, Command::READ | Command::WRITE) || self.channels.is_empty() {
            return self.session.send_out(out, self.encrypt).await;
        }
        let session = self.data_session();
        if std::ptr::eq(session, &self.session) {
            return self.session.send_out(out, self.encrypt).await;
        }
        // A channel lost mid-request costs the request, not the transfer: the session lives
        // on the other connections (MS-SMB2 3.3.7.1), so it goes again on the first one,
        // flagged as a replay (a WRITE the lost channel may have carried already).
        let again = out.clone();
        match session.send_out(out, self.encrypt).await {
            Err(Error::Disconnected(_)) if self.session.client().closed_reason().is_none() => {
                let again = crate::conn::Outgoing {
                    replay: self.session.client().negotiated().dialect.is_smb3(),
                    ..again
                };
                self.session.send_out(again, self.encrypt).await
            }
            other => other,
        }
    }

    /// CREATE (MS-SMB2 3.2.4.3).
    pub async fn open(&self, path: &str, o: &OpenOptions) -> Result<File, Error> {
        let r = self
            .send(Command::CREATE, create_body(path, o), None, 0)
            .await?;
        check(&r, "CREATE")?;
        File::from_create(self.clone(), &r)
    }

    /// Size, times and attributes of a path: CREATE + CLOSE, compounded (one round trip).
    pub async fn stat(&self, path: &str) -> Result<Metadata, Error> {
        let o = OpenOptions {
            access: access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            ..OpenOptions::read()
        };
        let (create, _) = self.compound_on(path, &o, Vec::new(), true).await?;
        crate::file::metadata_of(&create)
    }

    /// Every entry of a directory except `.` and `..`. CREATE, two QUERY_DIRECTORYs and CLOSE
    /// go as one compound, so a directory whose entries fit in the two answers (about 500
    /// with short names) costs one round trip; the second answers NO_MORE_FILES when the first
    /// held everything (smbtorture smb2.compound_find does the same against Windows). A larger
    /// one is listed again on a handle kept open until NO_MORE_FILES.
    pub async fn list(&self, path: &str) -> Result<Vec<DirEntry>, Error> {
        let o = list_options();
        let parts = vec![
            crate::file::query_dir_part(FileId::RELATED, "*", true),
            crate::file::query_dir_part(FileId::RELATED, "*", false),
        ];
        let (_, rest) = self.compound_on(path, &o, parts, true).await?;
        let mut out = Vec::new();
        for r in rest {
            if !crate::file::append_dir_entries(&mut out, &r?)? {
                return Ok(out);
            }
        }
        self.list_on_handle(path).await
    }

    /// A listing on a handle that stays open until the server says NO_MORE_FILES: the open
    /// and the first QUERY_DIRECTORY go as one compound.
    async fn list_on_handle(&self, path: &str) -> Result<Vec<DirEntry>, Error> {
        let first = crate::file::query_dir_part(FileId::RELATED, "*", true);
        let (create, mut rest) = self
            .compound_on(path, &list_options(), vec![first], false)
            .await?;
        let dir = File::from_create(self.clone(), &create)?;
        let first = rest.pop().unwrap_or_else(|| {
            Err(ProtocolError::Missing("a compound response is missing").into())
        });
        let r = match first {
            Ok(first) => dir.read_dir_after(first, "*").await,
            Err(e) => Err(e),
        };
        let c = dir.close().await;
        let entries = r?;
        c?;
        Ok(entries)
    }

    pub async fn mkdir(&self, path: &str) -> Result<(), Error> {
        let o = OpenOptions {
            access: access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            disposition: CreateDisposition::CREATE,
            options: create_options::DIRECTORY_FILE,
            attributes: FILE_ATTRIBUTE_DIRECTORY,
            ..OpenOptions::read()
        };
        self.compound_on(path, &o, Vec::new(), true).await?;
        Ok(())
    }

    /// Deletes a file (`dir == false`) or an empty directory by setting the delete
    /// disposition (MS-FSCC 2.4.11), which reports a non-empty directory as
    /// STATUS_DIRECTORY_NOT_EMPTY (MS-FSA 2.1.5.14.3) where FILE_DELETE_ON_CLOSE would fail
    /// silently at close.
    async fn delete(&self, path: &str, dir: bool) -> Result<(), Error> {
        let o = OpenOptions {
            access: access::DELETE | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            options: if dir {
                create_options::DIRECTORY_FILE
            } else {
                create_options::NON_DIRECTORY_FILE
            },
            ..OpenOptions::read()
        };
        self.set_info_on(path, &o, FileInfoClass::DISPOSITION, vec![1])
            .await
    }

    pub async fn remove(&self, path: &str) -> Result<(), Error> {
        self.delete(path, false).await
    }

    pub async fn rmdir(&self, path: &str) -> Result<(), Error> {
        self.delete(path, true).await
    }

    /// Renames through FileRenameInformation (MS-FSCC 2.4.42.2); `to` is share-relative.
    pub async fn rename(&self, from: &str, to: &str, replace: bool) -> Result<(), Error> {
        let o = OpenOptions {
            access: access::DELETE | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            ..OpenOptions::read()
        };
        let info = RenameInfo {
            replace_if_exists: replace,
            root_directory: 0,
            file_name: smb_path(to),
        };
        let mut w = Writer::new();
        info.encode(&mut w);
        self.set_info_on(from, &o, FileInfoClass::RENAME, w.into_vec())
            .await
    }

    /// Whether a path exists (any status but "not found" is reported as an error).
    pub async fn exists(&self, path: &str) -> Result<bool, Error> {
        match self.stat(path).await {
            Ok(_) => Ok(true),
            Err(Error::Status {
                status: NtStatus::OBJECT_NAME_NOT_FOUND | NtStatus::OBJECT_PATH_NOT_FOUND,
                ..
            }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// TREE_DISCONNECT (MS-SMB2 3.2.4.23).
    pub async fn disconnect(&self) -> Result<(), Error> {
        let mut w = Writer::new();
        TreeDisconnectRequest.encode(&mut w);
        let r = self
            .send(Command::TREE_DISCONNECT, w.into_vec(), None, 0)
            .await?;
        check(&r, "TREE_DISCONNECT")
    }
}

/// A CREATE request's body (MS-SMB2 2.2.13): no oplock or lease, no contexts.
pub(crate) fn create_body(path: &str, o: &OpenOptions) -> Vec<u8> {
    create_body_with(path, o, OplockLevel::NONE, &[])
}

/// A CREATE request's body asking for oplock `level`, with a create context list.
pub(crate) fn create_body_with(
    path: &str,
    o: &OpenOptions,
    level: OplockLevel,
    contexts: &[u8],
) -> Vec<u8> {
    let name = utf16le_encode(&smb_path(path));
    let mut w = Writer::new();
    CreateRequest {
        requested_oplock_level: level,
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        desired_access: o.access,
        file_attributes: o.attributes,
        share_access: o.share,
        create_disposition: o.disposition,
        create_options: o.options,
        name: &name,
        contexts,
        ..Default::default()
    }
    .encode(&mut w);
    w.into_vec()
}

/// How a directory is opened to be listed.
fn list_options() -> OpenOptions {
    OpenOptions {
        access: access::FILE_LIST_DIRECTORY | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
        options: create_options::DIRECTORY_FILE,
        ..OpenOptions::read()
    }
}
