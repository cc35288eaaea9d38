//! What the engine hands up to the server (a validated request) and takes back (a response).
//!
//! The server never parses headers, checks signatures, counts credits or encrypts: by the time a
//! [`Request`] exists all of that has been done, and the [`Response`] it returns is framed,
//! credited, signed and sealed by the engine.

use std::sync::Arc;

use bytes::Bytes;
use smbq_auth::Identity;
use smbq_wire::{Command, Dialect, FileId, Header, NtStatus};

/// The authenticated session a request belongs to (MS-SMB2 3.3.1.8, the parts handlers need).
#[derive(Clone, Debug)]
pub struct SessionView {
    pub id: u64,
    pub identity: Arc<Identity>,
    /// Session.EncryptData: every request on this session must arrive encrypted.
    pub encrypt_data: bool,
    /// Whether the connection can encrypt at all (3.x with a cipher negotiated).
    pub can_encrypt: bool,
}

/// Connection facts a handler may need (negotiated once, immutable afterwards).
#[derive(Clone, Debug)]
pub struct ConnView {
    pub id: u64,
    pub dialect: Dialect,
    pub client_guid: [u8; 16],
    pub client_capabilities: u32,
    pub client_security_mode: u16,
    pub server_capabilities: u32,
    pub server_security_mode: u16,
    /// The client's dialect list from NEGOTIATE, for FSCTL_VALIDATE_NEGOTIATE_INFO.
    pub client_dialects: Vec<Dialect>,
    pub max_read_size: u32,
    pub max_write_size: u32,
    pub max_transact_size: u32,
    /// QUIC with transport-level security accepted: encryption is neither required nor applied.
    pub transport_security: bool,
    /// The SMB3 POSIX extensions were negotiated (smbq_wire::posix): CREATEs may carry the
    /// POSIX context, on shares that offer them.
    pub posix: bool,
    pub peer: String,
    pub transport: crate::transport::Transport,
}

/// One validated request. `msg` is the whole SMB2 message (header included, decrypted), so the
/// wire decoders can be applied to it directly and WRITE payloads can be sliced without copying.
#[derive(Clone, Debug)]
pub struct Request {
    pub header: Header,
    pub msg: Bytes,
    pub session: Option<SessionView>,
    /// The request arrived inside a TRANSFORM_HEADER.
    pub encrypted: bool,
    /// In a related compound: the FileId produced by the previous request of the chain, used
    /// instead of the one this request carries (MS-SMB2 3.3.5.2.7.2; see
    /// [`Request::resolve_file_id`]).
    pub related_file_id: Option<FileId>,
    /// Async id assigned if the handler goes async (interim response already sent).
    pub async_id: Option<u64>,
}

impl Request {
    pub fn command(&self) -> Command {
        self.header.command
    }

    /// Resolves a FileId from the request body against the compound chain: a related request
    /// works on the FileId the requests before it produced, whatever it carries itself
    /// (MS-SMB2 3.3.5.2.7.2 asks for all-ones there; Windows Server 2022 and Samba take the
    /// chain's FileId also when it is not, smbtorture smb2.compound_async.getinfo_middle,
    /// whose GETINFO carries {all-ones, 0}).
    pub fn resolve_file_id(&self, id: FileId) -> FileId {
        self.related_file_id.unwrap_or(id)
    }
}

/// A response body as produced by a handler. The engine writes the header.
#[derive(Clone, Debug, Default)]
pub struct Response {
    pub status: NtStatus,
    /// The encoded body (without header). Empty with an error status means "send an
    /// SMB2 ERROR response" (MS-SMB2 2.2.2).
    pub body: Vec<u8>,
    /// Payload appended after `body` without copying (READ data, large query buffers).
    pub data: Option<Bytes>,
    /// For CREATE: the FileId this response produced, carried to the next related request.
    pub file_id: Option<FileId>,
    /// Tree id assigned by TREE_CONNECT (the response header carries it).
    pub tree_id: Option<u32>,
    /// Drop the connection instead of answering (MS-SMB2 3.3.5.15.12: a failed
    /// FSCTL_VALIDATE_NEGOTIATE_INFO); such a response is never sent.
    pub disconnect: bool,
    /// Compress this response when the connection negotiated compression and it pays
    /// (MS-SMB2 3.3.5.12, 3.1.4.4: a READ that asked with SMB2_READFLAG_REQUEST_COMPRESSED, or any
    /// response on a share with compress_data). `data` (or the body after its fixed part)
    /// is compressed; the header and fixed body go as they are.
    pub compress: bool,
}

impl Response {
    pub fn ok(body: Vec<u8>) -> Self {
        Self {
            status: NtStatus::SUCCESS,
            body,
            ..Default::default()
        }
    }
    pub fn error(status: NtStatus) -> Self {
        Self {
            status,
            ..Default::default()
        }
    }
    /// No answer: the connection is dropped (see [`Response::disconnect`]). The status is
    /// what a log or test sees; the client never does.
    pub fn disconnect() -> Self {
        Self {
            status: NtStatus::ACCESS_DENIED,
            disconnect: true,
            ..Default::default()
        }
    }
    /// A warning or success status that still carries a body (e.g. BUFFER_OVERFLOW).
    pub fn with_status(status: NtStatus, body: Vec<u8>) -> Self {
        Self {
            status,
            body,
            ..Default::default()
        }
    }
}

impl From<NtStatus> for Response {
    fn from(s: NtStatus) -> Self {
        Self::error(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_related(related: Option<FileId>) -> Request {
        Request {
            header: Header::default(),
            msg: Bytes::new(),
            session: None,
            encrypted: false,
            related_file_id: related,
            async_id: None,
        }
    }

    /// smbtorture smb2.compound_async.getinfo_middle: a related GETINFO carrying {all-ones,
    /// 0} works on the open the CREATE before it made, as on Windows Server 2022 and Samba.
    #[test]
    fn a_related_request_takes_the_chains_file_id_whatever_it_carries() {
        let made = FileId {
            persistent: 7,
            volatile: 9,
        };
        let odd = FileId {
            persistent: u64::MAX,
            volatile: 0,
        };
        assert_eq!(with_related(Some(made)).resolve_file_id(odd), made);
        assert_eq!(
            with_related(Some(made)).resolve_file_id(FileId::RELATED),
            made
        );
        assert_eq!(with_related(None).resolve_file_id(odd), odd, "unrelated");
    }
}
