//! Durable handles from the client's side (MS-SMB2 3.2.4.3.x): an open that asks for an RWH
//! lease (a batch oplock on 2.0.2) and a durable v2 handle survives a broken connection;
//! after logging on again with [`Client::login_replacing`](crate::Client::login_replacing)
//! on a connection with the same ClientGuid and connecting the share, the client takes it
//! back with [`Tree::reclaim`] and goes on where it was.
//!
//! Breaks are acknowledged at once (`conn.rs`): these opens cache nothing, they hold the
//! lease only because the server makes durability depend on one.

use rand::RngCore;
use smbq_wire::create::{CreateResponse, OplockLevel};
use smbq_wire::create_context::{
    CreateContext, CreateContextTag, DH2_FLAG_PERSISTENT, Dh2cRequest, Dh2qRequest, Dh2qResponse,
    contexts_to_bytes, parse_contexts,
};
use smbq_wire::{Command, FileId};

use crate::file::File;
use crate::session::check;
use crate::tree::{OpenOptions, Tree, create_body_with};
use crate::{Error, lease};

/// What the server granted: enough to reclaim the open on a new connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableHandle {
    pub path: String,
    pub file_id: FileId,
    pub create_guid: [u8; 16],
    /// How long the server keeps it for us after the connection breaks (milliseconds).
    pub timeout_ms: u32,
    /// The lease the open holds (reclaimed with it), when the server granted one.
    pub lease_key: Option<[u8; 16]>,
    /// A persistent handle (a continuously available share): it outlives the server's
    /// restart too, and is reclaimed saying so.
    pub persistent: bool,
}

impl Tree {
    /// CREATE asking for a durable v2 handle with the server's default timeout (MS-SMB2
    /// 2.2.13.2.11) and what durability depends on: an RWH lease where the connection has
    /// leases, a batch oplock otherwise; on a continuously available share, a persistent one
    /// (MS-SMB2 3.2.4.3.5: the client MUST ask). The handle is `None` when the server
    /// granted none (the file is open elsewhere, or no support).
    pub async fn open_durable(
        &self,
        path: &str,
        o: &OpenOptions,
    ) -> Result<(File, Option<DurableHandle>), Error> {
        let mut create_guid = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut create_guid);
        let dh2q = Dh2qRequest {
            timeout: 0,
            flags: if self.ca { DH2_FLAG_PERSISTENT } else { 0 },
            create_guid,
        }
        .to_bytes();
        let key = lease::new_key();
        let rqls = self.lease_request(key, lease::R | lease::W | lease::H);
        let r = self
            .send_durable(path, o, (CreateContextTag::DH2Q, &dh2q), rqls.as_deref())
            .await?;
        check(&r, "CREATE")?;
        let c = CreateResponse::decode(&r.msg)?;
        let granted = parse_contexts(c.contexts)?
            .iter()
            .find(|x| x.tag() == CreateContextTag::DH2Q)
            .and_then(|x| Dh2qResponse::decode(x.data).ok());
        let file = File::from_create(self.clone(), &r)?;
        let lease_key = self.watch_grant(&r, key, rqls.is_some())?;
        let handle = granted.map(|g| DurableHandle {
            path: path.to_string(),
            file_id: c.file_id,
            create_guid,
            timeout_ms: g.timeout,
            lease_key,
            persistent: g.flags & DH2_FLAG_PERSISTENT != 0,
        });
        Ok((file, handle))
    }

    /// Takes back a durable open on this (new) tree (MS-SMB2 2.2.13.2.12, DH2C): the same
    /// FileId, with the locks and lease (or oplock) it had. The connection must have the
    /// ClientGuid the open was made with. Fails with OBJECT_NAME_NOT_FOUND when the server no
    /// longer keeps it (timed out, or purged by another client's open).
    pub async fn reclaim(&self, h: &DurableHandle) -> Result<File, Error> {
        let dh2c = Dh2cRequest {
            file_id: h.file_id,
            create_guid: h.create_guid,
            flags: if h.persistent { DH2_FLAG_PERSISTENT } else { 0 },
        }
        .to_bytes();
        let rqls = h
            .lease_key
            .and_then(|k| self.lease_request(k, lease::R | lease::W | lease::H));
        let r = self
            .send_durable(
                &h.path,
                &OpenOptions::read(),
                (CreateContextTag::DH2C, &dh2c),
                rqls.as_deref(),
            )
            .await?;
        check(&r, "CREATE (durable reconnect)")?;
        if let Some(k) = h.lease_key {
            self.watch_grant(&r, k, rqls.is_some())?;
        } else {
            self.watch_grant(&r, [0; 16], false)?;
        }
        File::from_create(self.clone(), &r)
    }

    /// A CREATE with durable context `durable` and, when given, the lease request `rqls`
    /// (oplock level LEASE), else a batch oplock request.
    async fn send_durable(
        &self,
        path: &str,
        o: &OpenOptions,
        durable: (CreateContextTag<'_>, &[u8]),
        rqls: Option<&[u8]>,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        let mut list = vec![CreateContext::new(durable.0, durable.1)];
        let level = match rqls {
            Some(data) => {
                list.push(CreateContext::new(CreateContextTag::RQLS, data));
                OplockLevel::LEASE
            }
            None => OplockLevel::BATCH,
        };
        let body = create_body_with(path, o, level, &contexts_to_bytes(&list));
        self.send(Command::CREATE, body, None, 0).await
    }

    /// Routes the breaks of what the CREATE `r` granted (a lease under `key` when `leased`,
    /// else an oplock) to the acknowledgment task; the lease key when a lease was granted.
    fn watch_grant(
        &self,
        r: &smbq_proto::client::Incoming,
        key: [u8; 16],
        leased: bool,
    ) -> Result<Option<[u8; 16]>, Error> {
        let c = CreateResponse::decode(&r.msg)?;
        if leased && lease::granted(r, &key)? != 0 {
            self.watch_lease(r, key, None)?;
            return Ok(Some(key));
        }
        if c.oplock_level != OplockLevel::NONE {
            self.session
                .client()
                .shared
                .watch_breaks(c.file_id.persistent, self.break_target());
        }
        Ok(None)
    }
}
