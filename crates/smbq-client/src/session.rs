//! An authenticated session: tree connects, share enumeration, logoff.

use std::sync::Arc;

use smbq_proto::client::{EncryptionPolicy, Negotiated, SessionCrypto};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::logoff::LogoffRequest;
use smbq_wire::tree_connect::{TreeConnectRequest, TreeConnectResponse, share_flags};
use smbq_wire::{Command, Writer};

use crate::conn::{Outgoing, Protect};
use crate::tree::Tree;
use crate::{Client, Error, ProtocolError};

/// A logged-on user on one connection. Cheap to clone.
#[derive(Clone)]
pub struct Session {
    pub(crate) client: Client,
    pub(crate) crypto: Arc<SessionCrypto>,
    encrypt: bool,
    sign: bool,
    anonymous: bool,
}

impl Session {
    pub(crate) fn new(
        client: Client,
        crypto: Arc<SessionCrypto>,
        encrypt_data: bool,
        anonymous: bool,
        neg: &Negotiated,
    ) -> Result<Self, Error> {
        let cfg = &client.shared.config;
        let wants = encrypt_data || cfg.encryption == EncryptionPolicy::Required;
        if wants && !crypto.can_seal() {
            return Err(ProtocolError::Unsupported(
                "encryption is required but no cipher was negotiated",
            )
            .into());
        }
        // MS-SMB2 3.2.5.3.1: sign when either side requires it (and there is a key).
        let sign = crypto.can_sign() && (cfg.signing_required || neg.server_requires_signing());
        Ok(Self {
            client,
            crypto,
            encrypt: wants,
            sign,
            anonymous,
        })
    }

    pub fn id(&self) -> u64 {
        self.crypto.session_id
    }

    /// Whether requests on this session are sealed (before any share's own requirement).
    pub fn encrypts(&self) -> bool {
        self.encrypt
    }

    pub fn signs(&self) -> bool {
        self.sign
    }

    pub fn is_anonymous(&self) -> bool {
        self.anonymous
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn protect(&self, tree_encrypt: bool) -> Protect {
        let encrypt = (self.encrypt || tree_encrypt) && self.crypto.can_seal();
        Protect {
            session: Some(self.crypto.clone()),
            sign: !encrypt && self.sign,
            encrypt,
        }
    }

    pub(crate) async fn send(
        &self,
        command: Command,
        tree_id: u32,
        tree_encrypt: bool,
        body: Vec<u8>,
        payload: Option<bytes::Bytes>,
        io_size: usize,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        self.send_out(
            Outgoing {
                command,
                session_id: self.id(),
                tree_id,
                body,
                payload,
                io_size,
                replay: false,
                lane: crate::conn::Lane::Any,
            },
            tree_encrypt,
        )
        .await
    }

    /// Sends a request built by the caller (its header fields and flags).
    pub(crate) async fn send_out(
        &self,
        out: Outgoing,
        tree_encrypt: bool,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        self.client.call(out, self.protect(tree_encrypt)).await
    }

    /// TREE_CONNECT to `\\server\share` (MS-SMB2 3.2.4.2.4).
    pub async fn tree_connect(&self, share: &str) -> Result<Tree, Error> {
        let path = format!("\\\\{}\\{}", self.client.server_name(), share);
        let utf16 = utf16le_encode(&path);
        let mut w = Writer::new();
        TreeConnectRequest {
            flags: 0,
            path_utf16: &utf16,
            contexts: Vec::new(),
        }
        .encode(&mut w);
        let r = self
            .send(Command::TREE_CONNECT, 0, false, w.into_vec(), None, 0)
            .await?;
        check(&r, "TREE_CONNECT")?;
        let t = TreeConnectResponse::decode(&r.msg)?;
        let encrypt = t.share_flags & share_flags::ENCRYPT_DATA != 0;
        if encrypt && !self.crypto.can_seal() {
            return Err(ProtocolError::ShareNeedsEncryption(share.to_string()).into());
        }
        let mut tree = Tree::new(
            self.clone(),
            r.header.tree_id,
            encrypt,
            t.share_type,
            share.to_string(),
        );
        // TreeConnect.IsCAShare (MS-SMB2 3.2.5.5): durable opens ask to be persistent.
        tree.ca = t.capabilities
            & smbq_wire::tree_connect::share_capabilities::CONTINUOUS_AVAILABILITY
            != 0;
        Ok(tree)
    }

    /// LOGOFF (MS-SMB2 3.2.4.22); the session's keys are forgotten afterwards.
    pub async fn logoff(&self) -> Result<(), Error> {
        let mut w = Writer::new();
        LogoffRequest.encode(&mut w);
        let r = self
            .send(Command::LOGOFF, 0, false, w.into_vec(), None, 0)
            .await;
        self.client.shared.remove_session(self.id());
        check(&r?, "LOGOFF")
    }
}

/// Turns an error status into [`Error::Status`].
pub(crate) fn check(r: &smbq_proto::client::Incoming, op: &'static str) -> Result<(), Error> {
    if r.header.status.is_error() {
        Err(Error::Status {
            op,
            status: r.header.status,
        })
    } else {
        Ok(())
    }
}
