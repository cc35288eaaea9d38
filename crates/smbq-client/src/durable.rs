//! Durable handles from the client's side (MS-SMB2 3.2.4.3.x): an open that asks for a batch
//! oplock and a durable v2 handle survives a broken connection; after logging on again with
//! [`Client::login_replacing`](crate::Client::login_replacing) and connecting the share, the
//! client takes it back with [`Tree::reclaim`] and goes on where it was.
//!
//! The oplock's breaks are acknowledged at once (`conn.rs`): this client caches nothing, it
//! holds the oplock only because the server makes durability depend on one.

use rand::RngCore;
use smbq_wire::create::{CreateResponse, OplockLevel};
use smbq_wire::create_context::{
    CreateContext, CreateContextTag, Dh2cRequest, Dh2qRequest, Dh2qResponse, contexts_to_bytes,
    parse_contexts,
};
use smbq_wire::{Command, FileId};

use crate::Error;
use crate::conn::BreakTarget;
use crate::file::File;
use crate::session::check;
use crate::tree::{OpenOptions, Tree, create_body_with};

/// What the server granted: enough to reclaim the open on a new connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableHandle {
    pub path: String,
    pub file_id: FileId,
    pub create_guid: [u8; 16],
    /// How long the server keeps it for us after the connection breaks (milliseconds).
    pub timeout_ms: u32,
}

impl Tree {
    /// CREATE asking for a batch oplock and a durable v2 handle with the server's default
    /// timeout (MS-SMB2 2.2.13.2.11). The handle is `None` when the server granted none (no
    /// batch oplock, because the file is open elsewhere, or no support).
    pub async fn open_durable(
        &self,
        path: &str,
        o: &OpenOptions,
    ) -> Result<(File, Option<DurableHandle>), Error> {
        let mut create_guid = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut create_guid);
        let dh2q = Dh2qRequest {
            timeout: 0,
            flags: 0,
            create_guid,
        }
        .to_bytes();
        let list = contexts_to_bytes(&[CreateContext::new(CreateContextTag::DH2Q, &dh2q)]);
        let body = create_body_with(path, o, OplockLevel::BATCH, &list);
        let r = self.send(Command::CREATE, body, None, 0).await?;
        check(&r, "CREATE")?;
        let c = CreateResponse::decode(&r.msg)?;
        let granted = parse_contexts(c.contexts)?
            .iter()
            .find(|x| x.tag() == CreateContextTag::DH2Q)
            .and_then(|x| Dh2qResponse::decode(x.data).ok());
        let file = File::from_create(self.clone(), &r)?;
        if c.oplock_level != OplockLevel::NONE {
            self.watch_breaks(c.file_id);
        }
        let handle = granted.map(|g| DurableHandle {
            path: path.to_string(),
            file_id: c.file_id,
            create_guid,
            timeout_ms: g.timeout,
        });
        Ok((file, handle))
    }

    /// Takes back a durable open on this (new) tree (MS-SMB2 2.2.13.2.12, DH2C): the same
    /// FileId, with the locks and oplock it had. Fails with OBJECT_NAME_NOT_FOUND when the
    /// server no longer keeps it (timed out, or purged by another client's open).
    pub async fn reclaim(&self, h: &DurableHandle) -> Result<File, Error> {
        let dh2c = Dh2cRequest {
            file_id: h.file_id,
            create_guid: h.create_guid,
            flags: 0,
        }
        .to_bytes();
        let list = contexts_to_bytes(&[CreateContext::new(CreateContextTag::DH2C, &dh2c)]);
        let body = create_body_with(&h.path, &OpenOptions::read(), OplockLevel::BATCH, &list);
        let r = self.send(Command::CREATE, body, None, 0).await?;
        check(&r, "CREATE (durable reconnect)")?;
        let c = CreateResponse::decode(&r.msg)?;
        if c.oplock_level != OplockLevel::NONE {
            self.watch_breaks(c.file_id);
        }
        File::from_create(self.clone(), &r)
    }

    fn watch_breaks(&self, id: FileId) {
        let target = BreakTarget {
            session_id: self.session.id(),
            tree_id: self.id,
            protect: self.session.protect(self.encrypt),
        };
        self.session
            .client()
            .shared
            .watch_breaks(id.persistent, target);
    }
}
