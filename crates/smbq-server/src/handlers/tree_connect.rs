//! TREE_CONNECT (MS-SMB2 3.3.5.7) and TREE_DISCONNECT (3.3.5.8).

use smbq_proto::Response;
use smbq_wire::negotiate::capabilities;
use smbq_wire::tree_connect::{
    TreeConnectRequest, TreeConnectResponse, TreeDisconnectResponse,
    share_capabilities as share_caps, share_flags, share_type,
};
use smbq_wire::{Dialect, NtStatus};

use super::{Ctx, bad, blocking, body};
use crate::config::EncryptPolicy;
use crate::share::{ShareKind, share_from_unc};
use crate::tables::Tree;

/// MS-SMB2 3.3.5.7, with one audit line per attempt (share, user, peer, result).
pub(super) fn connect(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let mut asked = String::new();
    let r = connect_to(ctx, &mut asked);
    let status = r.as_ref().map_or_else(|s| *s, |r| r.status);
    if !ctx.srv.tree_connects.admit(std::time::Instant::now()) {
        return r;
    }
    tracing::info!(
        target: crate::AUDIT,
        event = "tree_connect",
        result = if status == NtStatus::SUCCESS { "success" } else { "failure" },
        status = ?status,
        share = %asked,
        session = ctx.view.id,
        user = %ctx.view.identity.user,
        peer = %ctx.conn.peer,
        "tree connect"
    );
    r
}

fn connect_to(ctx: &Ctx<'_>, asked: &mut String) -> Result<Response, NtStatus> {
    let msg = &ctx.req.msg;
    let req = if ctx.conn.dialect == Dialect::SMB3_1_1 {
        TreeConnectRequest::decode(msg)
    } else {
        TreeConnectRequest::decode_pre_311(msg)
    }
    .map_err(bad)?;
    let path = req.path().map_err(bad)?;
    let name = share_from_unc(&path).ok_or(NtStatus::BAD_NETWORK_NAME)?;
    name.clone_into(asked);
    let share = ctx
        .srv
        .shares()
        .find(name)
        .ok_or(NtStatus::BAD_NETWORK_NAME)?;
    let maximal_access = share.check_access(&ctx.view.identity, ctx.srv.config().guest_ok)?;

    let policy = ctx.srv.config().encrypt;
    let encrypt =
        share.kind == ShareKind::Disk && (share.cfg.encrypt || policy == EncryptPolicy::Required);
    // 3.3.5.7: a share that must be encrypted refuses connections that cannot encrypt
    // (RejectUnencryptedAccess), unless TLS already protects the transport.
    if encrypt && !ctx.view.can_encrypt && !ctx.conn.transport_security {
        return Err(NtStatus::ACCESS_DENIED);
    }

    // MS-SMB2 3.3.5.7: SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY for a 3.x connection, which
    // negotiated SMB2_GLOBAL_CAP_PERSISTENT_HANDLES when any share is continuously available.
    let ca = share.kind == ShareKind::Disk
        && share.cfg.continuous_availability
        && ctx.conn.dialect.is_smb3()
        && ctx.conn.server_capabilities & capabilities::PERSISTENT_HANDLES != 0;
    let session_id = ctx.view.id;
    let tree = ctx
        .session
        .add_tree(|id| Tree {
            id,
            session_id,
            share: share.clone(),
            maximal_access,
            encrypt,
            ca,
        })
        .ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;

    let (stype, mut flags) = match share.kind {
        ShareKind::Disk => (share_type::DISK, share_flags::MANUAL_CACHING),
        ShareKind::Pipe => (share_type::PIPE, share_flags::NO_CACHING),
    };
    if encrypt && !ctx.conn.transport_security {
        flags |= share_flags::ENCRYPT_DATA;
    }
    if share.cfg.access_based_enumeration {
        flags |= share_flags::ACCESS_BASED_DIRECTORY_ENUM; // handlers/query_directory.rs
    }
    // MS-SMB2 2.2.10: the client compresses its WRITEs to this share, the server its READ
    // responses (handlers/read.rs), when the connection negotiated compression.
    if share.cfg.compress_data && ctx.conn.dialect == Dialect::SMB3_1_1 {
        flags |= share_flags::COMPRESS_DATA;
    }
    let resp = TreeConnectResponse {
        share_type: stype,
        share_flags: flags,
        capabilities: if ca {
            share_caps::CONTINUOUS_AVAILABILITY
        } else {
            0
        },
        maximal_access,
    };
    let mut r = Response::ok(body(|w| resp.encode(w)));
    r.tree_id = Some(tree.id);
    Ok(r)
}

/// Closes every open of the tree, then the tree itself.
pub(super) async fn disconnect(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let tree = ctx.tree()?.clone();
    if ctx.session.remove_tree(tree.id).is_none() {
        return Err(NtStatus::NETWORK_NAME_DELETED);
    }
    let ids: Vec<u64> = ctx
        .session
        .open_ids()
        .into_iter()
        .filter(|id| {
            ctx.srv
                .lookup_open(*id)
                .is_some_and(|o| o.tree.id == tree.id)
        })
        .collect();
    let srv = ctx.srv.self_arc();
    blocking(move || {
        for id in ids {
            srv.close_open_by_id(id);
        }
        Ok(())
    })
    .await?;
    Ok(Response::ok(body(|w| TreeDisconnectResponse.encode(w))))
}
