//! IOCTL (MS-SMB2 3.3.5.15): pipe transceive, validate negotiate, server-side copy
//! (`copychunk`), and the few FSCTLs a file server is expected to answer.

use smbq_proto::Response;
use smbq_wire::ioctl::{
    CtlCode, IoctlRequest, IoctlResponse, NetworkResiliencyRequest, ValidateNegotiateInfoRequest,
    ValidateNegotiateInfoResponse, flags,
};
use smbq_wire::{Dialect, NtStatus};

use super::{Ctx, bad, blocking, body};
use crate::access::mask;

/// Dialects this server implements, for the greatest-common-dialect check.
const IMPLEMENTED: [Dialect; 5] = [
    Dialect::SMB2_0_2,
    Dialect::SMB2_1,
    Dialect::SMB3_0,
    Dialect::SMB3_0_2,
    Dialect::SMB3_1_1,
];

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = IoctlRequest::decode(&ctx.req.msg).map_err(bad)?;
    // 3.3.5.15: only FSCTLs are served.
    if req.flags != flags::IS_FSCTL {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if req.input.len() > ctx.conn.max_transact_size as usize
        || req.max_output_response > ctx.conn.max_transact_size
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let max_out = req.max_output_response as usize;
    match req.ctl_code {
        CtlCode::VALIDATE_NEGOTIATE_INFO => validate_negotiate(ctx, &req),
        CtlCode::PIPE_TRANSCEIVE => pipe_transceive(ctx, &req, max_out),
        CtlCode::CREATE_OR_GET_OBJECT_ID | CtlCode::GET_OBJECT_ID => object_id(ctx, &req, max_out),
        CtlCode::SET_SPARSE => {
            super::sparse::set_sparse(ctx.open()?, req.input).await?;
            Ok(reply(&req, NtStatus::SUCCESS, &[]))
        }
        CtlCode::SET_ZERO_DATA => {
            super::sparse::zero_data(ctx.srv, ctx.open()?, req.input).await?;
            Ok(reply(&req, NtStatus::SUCCESS, &[]))
        }
        CtlCode::QUERY_ALLOCATED_RANGES => {
            let (out, more) =
                super::sparse::allocated_ranges(ctx.open()?, req.input, max_out).await?;
            let status = if more {
                NtStatus::BUFFER_OVERFLOW
            } else {
                NtStatus::SUCCESS
            };
            Ok(reply(&req, status, &out))
        }
        CtlCode::GET_COMPRESSION => {
            let out = super::compression::get(ctx.open()?, max_out)?;
            Ok(reply(&req, NtStatus::SUCCESS, &out))
        }
        CtlCode::SET_COMPRESSION => {
            super::compression::set(ctx.open()?, req.input)?;
            Ok(reply(&req, NtStatus::SUCCESS, &[]))
        }
        CtlCode::SRV_ENUMERATE_SNAPSHOTS => {
            ctx.open()?;
            let out = super::snapshots::enumerate(max_out)?;
            Ok(reply(&req, NtStatus::SUCCESS, &out))
        }
        CtlCode::LMR_REQUEST_RESILIENCY => request_resiliency(ctx, &req),
        CtlCode::DUPLICATE_EXTENTS_TO_FILE => {
            super::dup_extents::duplicate(ctx, ctx.open()?.clone(), req.input).await?;
            Ok(reply(&req, NtStatus::SUCCESS, &[]))
        }
        CtlCode::QUERY_NETWORK_INTERFACE_INFO => network_interfaces(ctx, &req, max_out),
        CtlCode::SET_REPARSE_POINT | CtlCode::GET_REPARSE_POINT | CtlCode::DELETE_REPARSE_POINT => {
            reparse_point(ctx, &req, max_out).await
        }
        CtlCode::DFS_GET_REFERRALS | CtlCode::DFS_GET_REFERRALS_EX => {
            Err(NtStatus::FS_DRIVER_REQUIRED)
        }
        CtlCode::SRV_REQUEST_RESUME_KEY => super::copychunk::resume_key(ctx, &req),
        CtlCode::SRV_COPYCHUNK | CtlCode::SRV_COPYCHUNK_WRITE => {
            super::copychunk::copy(ctx, &req).await
        }
        _ => Err(NtStatus::INVALID_DEVICE_REQUEST),
    }
}

/// FSCTL_SET/GET/DELETE_REPARSE_POINT (crate::reparse). Setting or deleting needs
/// FILE_WRITE_DATA or FILE_WRITE_ATTRIBUTES (MS-FSA 2.1.5.10.37, 2.1.5.10.9); reading needs
/// no right beyond the open (2.1.5.10.24).
async fn reparse_point(
    ctx: &Ctx<'_>,
    req: &IoctlRequest<'_>,
    max_out: usize,
) -> Result<Response, NtStatus> {
    let open = ctx.open()?.clone();
    open.file().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let code = req.ctl_code;
    if code != CtlCode::GET_REPARSE_POINT {
        // Only shares with the SMB3 POSIX extensions keep reparse points (their symlinks);
        // elsewhere nobody can make a file Windows applications cannot open, as before.
        if !open.tree.share.cfg.posix_extensions {
            return Err(NtStatus::INVALID_DEVICE_REQUEST);
        }
        crate::security::require_any(&open, mask::FILE_WRITE_DATA | mask::FILE_WRITE_ATTRIBUTES)?;
    }
    let input = req.input.to_vec();
    let (out, status) = blocking(move || {
        let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
        if f.stream.is_some() {
            // A named stream has no reparse point of its own (MS-FSCC 2.1.2).
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let file = f.file.as_ref();
        match code {
            CtlCode::GET_REPARSE_POINT => crate::reparse::get(file, max_out),
            CtlCode::SET_REPARSE_POINT => crate::reparse::set(file, f.is_dir, &input)
                .map(|()| (Vec::new(), NtStatus::SUCCESS)),
            _ => crate::reparse::delete(file, &input).map(|()| (Vec::new(), NtStatus::SUCCESS)),
        }
    })
    .await?;
    Ok(reply(req, status, &out))
}

/// The IOCTL response to `req` carrying `output`.
pub(super) fn reply(req: &IoctlRequest<'_>, status: NtStatus, output: &[u8]) -> Response {
    let r = IoctlResponse {
        ctl_code: req.ctl_code,
        file_id: req.file_id,
        input: &[],
        output,
        flags: 0,
    };
    Response::with_status(status, body(|w| r.encode(w)))
}

/// FSCTL_PIPE_TRANSCEIVE: one write and read on the open named pipe.
fn pipe_transceive(
    ctx: &Ctx<'_>,
    req: &IoctlRequest<'_>,
    max_out: usize,
) -> Result<Response, NtStatus> {
    let open = ctx.open()?;
    let pipe = open.pipe().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let r = pipe.io.lock().transceive(req.input, max_out)?;
    // 3.3.5.15.3: more output than fits is returned in part with BUFFER_OVERFLOW.
    let status = if r.more {
        NtStatus::BUFFER_OVERFLOW
    } else {
        NtStatus::SUCCESS
    };
    Ok(reply(req, status, &r.data))
}

/// FSCTL_CREATE_OR_GET_OBJECT_ID and FSCTL_GET_OBJECT_ID: the same derived ObjectId for both.
fn object_id(ctx: &Ctx<'_>, req: &IoctlRequest<'_>, max_out: usize) -> Result<Response, NtStatus> {
    let open = ctx.open()?;
    let f = open.file().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let st = f.file.stat().map_err(|e| crate::errors::map_io_error(&e))?;
    let dos = crate::dos::DosInfo::read(f.file.as_ref());
    // FILE_OBJECTID_BUFFER (MS-FSCC 2.1.3.1): a stable ObjectId from volume and file
    // id (crate::file_id), then 48 bytes of extended info.
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&crate::file_id::reported(&st, &dos).to_le_bytes());
    out.extend_from_slice(&u64::from(open.tree.share.serial).to_le_bytes());
    out.resize(64, 0);
    if max_out < out.len() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(reply(req, NtStatus::SUCCESS, &out))
}

/// FSCTL_LMR_REQUEST_RESILIENCY: the open survives a lost connection for the asked timeout.
fn request_resiliency(ctx: &Ctx<'_>, req: &IoctlRequest<'_>) -> Result<Response, NtStatus> {
    // MS-SMB2 3.3.5.15.9 (crate::durable::resilient).
    if ctx.conn.dialect == Dialect::SMB2_0_2 {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let who = &ctx.view.identity;
    if who.is_guest || who.is_anonymous {
        // Nobody could prove to be its owner when reclaiming it.
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let r = NetworkResiliencyRequest::decode(req.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    ctx.srv
        .make_resilient(ctx.open()?, &who.user, ctx.conn.client_guid, r.timeout_ms)?;
    Ok(reply(req, NtStatus::SUCCESS, &[]))
}

/// FSCTL_QUERY_NETWORK_INTERFACE_INFO: the interfaces a multichannel client may bind.
fn network_interfaces(
    ctx: &Ctx<'_>,
    req: &IoctlRequest<'_>,
    max_out: usize,
) -> Result<Response, NtStatus> {
    // MS-SMB2 3.3.5.15.11 (handlers/interfaces.rs): only where multichannel is offered,
    // so a QUIC client on the internet learns nothing of the server's networks.
    if ctx.conn.server_capabilities & smbq_wire::negotiate::capabilities::MULTI_CHANNEL == 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let policy = &ctx.srv.config().interfaces;
    let list = super::interfaces::advertised(&super::interfaces::list(), policy, &ctx.conn.peer);
    let out = super::interfaces::encode(&list, policy.rss_capable, max_out)?;
    Ok(reply(req, NtStatus::SUCCESS, &out))
}

/// MS-SMB2 3.3.5.15.12. Every mismatch drops the connection ([`Response::disconnect`]); on a
/// 3.1.1 connection the request itself is a reason to drop.
fn validate_negotiate(ctx: &Ctx<'_>, req: &IoctlRequest<'_>) -> Result<Response, NtStatus> {
    let c = ctx.conn;
    if c.dialect == Dialect::SMB3_1_1
        || (req.max_output_response as usize) < ValidateNegotiateInfoResponse::LEN
    {
        return Ok(Response::disconnect());
    }
    let Ok(v) = ValidateNegotiateInfoRequest::decode(req.input) else {
        return Ok(Response::disconnect());
    };
    let best = v
        .dialects
        .iter()
        .copied()
        .filter(|d| IMPLEMENTED.contains(d))
        .max();
    let ok = v.dialects == c.client_dialects
        && best == Some(c.dialect)
        && v.guid == c.client_guid
        && v.security_mode == c.client_security_mode
        && v.capabilities == c.client_capabilities;
    if !ok {
        return Ok(Response::disconnect());
    }
    let out = ValidateNegotiateInfoResponse {
        capabilities: c.server_capabilities,
        guid: ctx.srv.config().server_guid,
        security_mode: c.server_security_mode,
        dialect: c.dialect,
    };
    let mut w = smbq_wire::Writer::new();
    out.encode(&mut w);
    let output = w.into_vec();
    let r = IoctlResponse {
        ctl_code: req.ctl_code,
        file_id: req.file_id,
        input: &[],
        output: &output,
        flags: 0,
    };
    Ok(Response::ok(body(|w| r.encode(w))))
}
