//! A connected share: opening files, listing, and the name operations built on CREATE.

use smbq_wire::create::{
    CreateAction, CreateDisposition, CreateRequest, CreateResponse, ImpersonationLevel,
    OplockLevel, create_options,
};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::fscc::access;
use smbq_wire::fscc::attributes::FILE_ATTRIBUTE_DIRECTORY;
use smbq_wire::fscc::file_info::RenameInfo;
use smbq_wire::tree_connect::TreeDisconnectRequest;
use smbq_wire::{Command, NtStatus, Writer};

use crate::file::File;
use crate::session::{Session, check};
use crate::{DirEntry, Error, Metadata};

/// One share on one session. Cheap to clone.
#[derive(Clone)]
pub struct Tree {
    pub(crate) session: Session,
    pub(crate) id: u32,
    pub(crate) encrypt: bool,
    share_type: u8,
    name: String,
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
        }
    }

    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn name(&self) -> &str {
        &self.name
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
        self.session
            .send(command, self.id, self.encrypt, body, payload, io_size)
            .await
    }

    /// CREATE (MS-SMB2 3.2.4.3).
    pub async fn open(&self, path: &str, o: &OpenOptions) -> Result<File, Error> {
        let name = utf16le_encode(&smb_path(path));
        let mut w = Writer::new();
        CreateRequest {
            requested_oplock_level: OplockLevel::NONE,
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            desired_access: o.access,
            file_attributes: o.attributes,
            share_access: o.share,
            create_disposition: o.disposition,
            create_options: o.options,
            name: &name,
            ..Default::default()
        }
        .encode(&mut w);
        let r = self.send(Command::CREATE, w.into_vec(), None, 0).await?;
        check(&r, "CREATE")?;
        let c = CreateResponse::decode(&r.msg)?;
        let meta = Metadata {
            size: c.end_of_file,
            allocation: c.allocation_size,
            attributes: c.file_attributes,
            created: c.creation_time,
            accessed: c.last_access_time,
            modified: c.last_write_time,
            changed: c.change_time,
        };
        Ok(File::new(
            self.clone(),
            c.file_id,
            meta,
            c.create_action == CreateAction::CREATED,
        ))
    }

    /// Size, times and attributes of a path (one CREATE + CLOSE).
    pub async fn stat(&self, path: &str) -> Result<Metadata, Error> {
        let o = OpenOptions {
            access: access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            ..OpenOptions::read()
        };
        let f = self.open(path, &o).await?;
        let m = f.metadata().clone();
        f.close().await?;
        Ok(m)
    }

    /// Every entry of a directory except `.` and `..`.
    pub async fn list(&self, path: &str) -> Result<Vec<DirEntry>, Error> {
        let o = OpenOptions {
            access: access::FILE_LIST_DIRECTORY
                | access::FILE_READ_ATTRIBUTES
                | access::SYNCHRONIZE,
            options: create_options::DIRECTORY_FILE,
            ..OpenOptions::read()
        };
        let dir = self.open(path, &o).await?;
        let r = dir.read_dir("*").await;
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
        self.open(path, &o).await?.close().await
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
        let f = self.open(path, &o).await?;
        let r = f
            .set_info(smbq_wire::fscc::FileInfoClass::DISPOSITION, vec![1])
            .await;
        let c = f.close().await;
        r?;
        c
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
        let f = self.open(from, &o).await?;
        let info = RenameInfo {
            replace_if_exists: replace,
            root_directory: 0,
            file_name: smb_path(to),
        };
        let mut w = Writer::new();
        info.encode(&mut w);
        let r = f
            .set_info(smbq_wire::fscc::FileInfoClass::RENAME, w.into_vec())
            .await;
        let c = f.close().await;
        r?;
        c
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
