//! Step 6 of a CREATE, the answer: the response (MS-SMB2 2.2.14) for the admitted and
//! granted open, with its create contexts; a durable v2 CREATE's answer is also kept on the
//! open for replays (3.3.5.9.10, durable.rs).

use smbq_proto::Response;
use smbq_wire::create::{CreateResponse, OplockLevel};

use super::grant::Granted;
use super::intent::CreateIntent;
use super::{Done, contexts};
use crate::access::attr;
use crate::durable::FirstAnswer;
use crate::durable::replay::ReplayRecord;
use crate::handlers::{Ctx, body};
use crate::meta;
use crate::open_state::Queries as _;
use crate::tables::Tree;

/// The response's create contexts for what the CREATE asked (contexts.rs): QFid from the
/// file's id, the POSIX context from the file's facts (crate::posix).
fn response_contexts(
    tree: &Tree,
    intent: &CreateIntent,
    done: &Done,
    extra: &[(
        smbq_wire::create_context::CreateContextTag<'static>,
        Vec<u8>,
    )],
) -> Vec<u8> {
    let (disk_id, volume) = match &done.view {
        Some(v) => (v.file_id, u64::from(tree.share.serial)),
        None => (0, 0),
    };
    let posix = done
        .stat
        .as_ref()
        .map(|st| crate::posix::stat(st, done.view.as_ref().map_or(0, |v| v.reparse_tag)));
    contexts::respond(
        &intent.contexts,
        done.maximal,
        disk_id,
        volume,
        posix.as_ref(),
        extra,
    )
}

/// The CREATE response (MS-SMB2 2.2.14) for an admitted open. `replay_guid` is the durable
/// v2 request's CreateGuid: the answer is kept for replays.
pub(super) fn respond(
    ctx: &Ctx<'_>,
    tree: &Tree,
    intent: &CreateIntent,
    done: &Done,
    granted: &Granted,
    replay_guid: Option<[u8; 16]>,
) -> Response {
    let srv = ctx.srv;
    let (oplock_level, extra) = (granted.oplock_level, granted.extra.as_slice());
    let open = &done.open;
    let ctx_bytes = response_contexts(tree, intent, done, extra);
    let resp = match (&done.stat, &done.view) {
        (Some(st), Some(v)) => CreateResponse {
            oplock_level,
            flags: 0,
            create_action: done.action,
            creation_time: v.creation,
            last_access_time: v.last_access,
            last_write_time: v.last_write,
            change_time: v.change,
            allocation_size: meta::allocation_with(
                st,
                open.file().and_then(|f| srv.open_state().allocation(f.key)),
            ),
            end_of_file: meta::end_of_file(st),
            file_attributes: v.attributes,
            file_id: open.file_id,
            contexts: &ctx_bytes,
        },
        _ => CreateResponse {
            oplock_level: OplockLevel::NONE,
            create_action: done.action,
            file_attributes: attr::NORMAL,
            file_id: open.file_id,
            contexts: &ctx_bytes,
            ..Default::default()
        },
    };
    if let Some(create_guid) = replay_guid {
        let first = FirstAnswer {
            oplock: resp.oplock_level.0,
            action: resp.create_action.0,
            times: [
                resp.creation_time,
                resp.last_access_time,
                resp.last_write_time,
                resp.change_time,
            ],
            allocation: resp.allocation_size,
            end_of_file: resp.end_of_file,
            attributes: resp.file_attributes,
            contexts: extra.to_vec(),
        };
        // Under the record's lock, and not for an open closed meanwhile (a LOGOFF on another
        // channel): Server::release_open marks the open closed, then takes this lock to drop
        // the index entry, so no entry outlives its open.
        let mut replay = open.replay.lock();
        if !open.is_closed() {
            *replay = Some(ReplayRecord {
                create_guid,
                client_guid: ctx.conn.client_guid,
                first,
            });
            ctx.srv.durable_store().replayable.insert(
                ctx.conn.client_guid,
                create_guid,
                open.file_id,
            );
        }
    }
    let mut r = Response::ok(body(|w| resp.encode(w)));
    r.file_id = Some(open.file_id);
    r
}

/// STATUS_STOPPED_ON_SYMLINK with its Symbolic Link Error Response (MS-SMB2 2.2.2.2.1): in
/// one DEFAULT error context on 3.1.1 (2.2.2.1), as the ErrorData itself before, as Samba
/// sends it.
pub(super) fn stopped_on_symlink(ctx: &Ctx<'_>, data: &[u8]) -> Response {
    use smbq_wire::Dialect;
    use smbq_wire::error_response::{ErrorContext, ErrorId, ErrorResponse};
    let body = if ctx.conn.dialect == Dialect::SMB3_1_1 {
        let context = ErrorContext {
            error_id: ErrorId::DEFAULT,
            data,
        };
        body(|w| ErrorResponse::encode_with_contexts(&[context], w))
    } else {
        let err = ErrorResponse {
            error_context_count: 0,
            error_data: data,
        };
        body(|w| err.encode(w))
    };
    Response {
        status: smbq_wire::NtStatus::STOPPED_ON_SYMLINK,
        body,
        ..Default::default()
    }
}
