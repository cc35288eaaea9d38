//! The SMB3 POSIX extensions from the client's side (smbq_wire::posix; docs/posix.md):
//! POSIX opens, listings with modes, owners and link counts, chmod, and symlinks as reparse
//! points. Offered in every 3.1.1 NEGOTIATE (`ClientConfig::posix`); usable when the server
//! took them ([`Tree::posix`]).

use smbq_wire::create::{CreateDisposition, OplockLevel};
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::fscc::access;
use smbq_wire::fscc::dir_info::{DirClass, DirEntryInfo, decode_dir_list};
use smbq_wire::fscc::reparse::SymlinkReparse;
use smbq_wire::ioctl::{CtlCode, IoctlResponse};
use smbq_wire::query_directory::{
    QueryDirectoryRequest, QueryDirectoryResponse, query_directory_flags,
};
use smbq_wire::query_info::InfoType;
use smbq_wire::security::{Ace, Acl, SecurityDescriptor, Sid, control, info};
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::{Command, NtStatus, Writer};

use crate::server_copy::fsctl;
use crate::session::check;
use crate::tree::{OpenOptions, create_body_with};
use crate::{Error, File, ProtocolError, Tree};

/// A listing's entries at most (the server's, too, are bounded; this bounds what one reply
/// stream may make the client keep).
const MAX_ENTRIES: usize = 1 << 20;
/// OutputBufferLength of each QUERY_DIRECTORY.
const DIR_BUFFER: u32 = 64 * 1024;
/// Largest reparse buffer (MAXIMUM_REPARSE_DATA_BUFFER_SIZE, MS-FSCC 2.1.2.2).
const MAX_REPARSE: u32 = 16 * 1024;
/// FILE_OPEN_REPARSE_POINT (MS-SMB2 2.2.13).
const OPEN_REPARSE_POINT: u32 = 0x0020_0000;

/// One entry of a POSIX listing: the name and FILE_POSIX_INFORMATION.
pub type PosixEntry = DirEntryInfo<'static>;

fn posix_context(mode: u32) -> Vec<u8> {
    contexts_to_bytes(&[CreateContext::new(
        CreateContextTag::POSIX,
        &mode.to_le_bytes(),
    )])
}

fn no_posix() -> Error {
    ProtocolError::Violation("the server does not offer the SMB3 POSIX extensions").into()
}

impl Tree {
    /// Whether this connection negotiated the SMB3 POSIX extensions.
    pub fn posix(&self) -> bool {
        self.session().client().negotiated().posix
    }

    /// A POSIX open (the POSIX create context; `mode` is what a created object gets).
    pub async fn open_posix(&self, path: &str, o: &OpenOptions, mode: u32) -> Result<File, Error> {
        if !self.posix() {
            return Err(no_posix());
        }
        let body = create_body_with(path, o, OplockLevel::NONE, &posix_context(mode));
        let r = self.send(Command::CREATE, body, None, 0).await?;
        check(&r, "CREATE")?;
        File::from_create(self.clone(), &r)
    }

    /// Every entry of a directory with its POSIX facts (FILE_POSIX_INFORMATION), `.` and
    /// `..` left out.
    pub async fn list_posix(&self, path: &str) -> Result<Vec<PosixEntry>, Error> {
        let o = OpenOptions {
            access: access::FILE_LIST_DIRECTORY
                | access::FILE_READ_ATTRIBUTES
                | access::SYNCHRONIZE,
            options: smbq_wire::create::create_options::DIRECTORY_FILE,
            ..OpenOptions::read()
        };
        let dir = self.open_posix(path, &o, 0).await?;
        let r = read_posix_dir(self, &dir).await;
        let c = dir.close().await;
        let out = r?;
        c?;
        Ok(out)
    }

    /// chmod: the rwx bits of `mode`, as one ACE naming S-1-5-88-3-`mode` on a POSIX open
    /// (what Samba's and Linux's clients send).
    pub async fn chmod(&self, path: &str, mode: u32) -> Result<(), Error> {
        let o = OpenOptions {
            access: access::WRITE_DAC | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            ..OpenOptions::read()
        };
        let f = self.open_posix(path, &o, 0).await?;
        let sd = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: None,
            group: None,
            sacl: None,
            dacl: Some(Acl::new(vec![Ace::allowed(
                Sid::new(5, &[88, 3, mode & 0o777]),
                0,
                0,
            )])),
        };
        let r = set_security(self, &f, info::DACL_SECURITY_INFORMATION, &sd).await;
        let c = f.close().await;
        r?;
        c
    }

    /// chown: the owner (uid) and/or group (gid), as S-1-22-1-uid and S-1-22-2-gid on a
    /// POSIX open; the server's kernel decides as the session's user.
    pub async fn chown(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<(), Error> {
        let o = OpenOptions {
            access: access::WRITE_OWNER | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            ..OpenOptions::read()
        };
        let mut addl = 0;
        if uid.is_some() {
            addl |= info::OWNER_SECURITY_INFORMATION;
        }
        if gid.is_some() {
            addl |= info::GROUP_SECURITY_INFORMATION;
        }
        let sd = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE,
            owner: uid.map(Sid::unix_user),
            group: gid.map(Sid::unix_group),
            sacl: None,
            dacl: None,
        };
        let f = self.open_posix(path, &o, 0).await?;
        let r = set_security(self, &f, addl, &sd).await;
        let c = f.close().await;
        r?;
        c
    }

    /// Makes `path` a symlink to `target`: a new file carrying an IO_REPARSE_TAG_SYMLINK
    /// reparse point (removed again if the server refuses the reparse point).
    pub async fn symlink(&self, target: &str, path: &str) -> Result<(), Error> {
        let o = OpenOptions {
            access: access::FILE_READ_ATTRIBUTES
                | access::FILE_WRITE_ATTRIBUTES
                | access::DELETE
                | access::SYNCHRONIZE,
            disposition: CreateDisposition::CREATE,
            options: smbq_wire::create::create_options::NON_DIRECTORY_FILE | OPEN_REPARSE_POINT,
            share: 0,
            attributes: 0,
        };
        // The server keeps the link as a regular file (never followed); its own mode matters
        // to nobody but the server's local users.
        let f = self.open_posix(path, &o, 0o600).await?;
        let r = fsctl(
            &f,
            CtlCode::SET_REPARSE_POINT,
            &SymlinkReparse::to(target).encode(),
            0,
        )
        .await
        .and_then(|r| check(&r, "FSCTL_SET_REPARSE_POINT"));
        if r.is_err() {
            // FileDispositionInformation: the half-made link goes with the handle.
            let _ = f
                .set_info(smbq_wire::fscc::FileInfoClass::DISPOSITION, vec![1])
                .await;
        }
        let c = f.close().await;
        r?;
        c
    }

    /// The target of the symlink at `path` (FSCTL_GET_REPARSE_POINT).
    pub async fn readlink(&self, path: &str) -> Result<String, Error> {
        let o = OpenOptions {
            access: access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            options: OPEN_REPARSE_POINT,
            ..OpenOptions::read()
        };
        let f = self.open_posix(path, &o, 0).await?;
        let r = fsctl(&f, CtlCode::GET_REPARSE_POINT, &[], MAX_REPARSE).await;
        let c = f.close().await;
        let r = r?;
        check(&r, "FSCTL_GET_REPARSE_POINT")?;
        c?;
        let out = IoctlResponse::decode(&r.msg)?.output;
        Ok(SymlinkReparse::decode(out)?.substitute_name)
    }
}

/// SET_INFO of the parts `addl` selects of `sd` (MS-SMB2 2.2.39).
async fn set_security(
    tree: &Tree,
    f: &File,
    addl: u32,
    sd: &SecurityDescriptor,
) -> Result<(), Error> {
    let buf = sd.to_bytes();
    let mut w = Writer::new();
    SetInfoRequest {
        info_type: InfoType::SECURITY,
        file_info_class: 0,
        additional_information: addl,
        file_id: f.id(),
        buffer: &buf,
    }
    .encode(&mut w);
    let r = tree
        .send_for(
            f.id(),
            Command::SET_INFO,
            w.into_vec(),
            None,
            buf.len(),
            false,
        )
        .await?;
    check(&r, "SET_INFO")
}

async fn read_posix_dir(tree: &Tree, dir: &File) -> Result<Vec<PosixEntry>, Error> {
    let pattern = smbq_wire::cursor::utf16le_encode("*");
    let mut out = Vec::new();
    let mut restart = true;
    loop {
        let first = restart;
        let mut w = Writer::new();
        QueryDirectoryRequest {
            file_information_class: DirClass::Posix.info_class().0,
            flags: if restart {
                query_directory_flags::RESTART_SCANS
            } else {
                0
            },
            file_index: 0,
            file_id: dir.id(),
            file_name: &pattern,
            output_buffer_length: DIR_BUFFER,
        }
        .encode(&mut w);
        restart = false;
        let r = tree
            .send_for(
                dir.id(),
                Command::QUERY_DIRECTORY,
                w.into_vec(),
                None,
                DIR_BUFFER as usize,
                false,
            )
            .await?;
        if r.header.status == NtStatus::NO_MORE_FILES {
            return Ok(out);
        }
        check(&r, "QUERY_DIRECTORY")?;
        let buf = QueryDirectoryResponse::decode(&r.msg)?.buffer;
        let entries = decode_dir_list(DirClass::Posix, buf)?;
        // A reply of nothing new (or only "." and "..") after the first ends the listing: a
        // server that kept sending those would keep the loop forever.
        let new = entries.iter().any(|e| e.name != "." && e.name != "..");
        if entries.is_empty() || (!new && !first) {
            return Ok(out);
        }
        for e in entries {
            if e.name == "." || e.name == ".." {
                continue;
            }
            if out.len() == MAX_ENTRIES {
                return Err(ProtocolError::TooLarge("directory listing too long").into());
            }
            out.push(e);
        }
    }
}
