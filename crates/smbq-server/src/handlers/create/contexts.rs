//! Create contexts the server acts on (MS-SMB2 2.2.13.2): MxAc and QFid get answers, AlSi
//! preallocates, SecD gives a new object its security descriptor, RqLs asks for a lease
//! (answered with the lease granted, crate::file_state::lease); durable-handle requests are
//! ignored (none are granted, which the absent response context tells the client), as are
//! unknown ones.

use smbq_wire::NtStatus;
use smbq_wire::create::CreateRequest;
use smbq_wire::create_context::{
    CreateContext, CreateContextTag, Lease, LeaseV2, MxAcRequest, MxAcResponse, QFidResponse,
    contexts_to_bytes, lease_flags,
};
use smbq_wire::security::SecurityDescriptor;

use crate::file_state::lease::Granted;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requested {
    pub maximal_access: bool,
    pub query_on_disk_id: bool,
    pub allocation_size: Option<u64>,
    /// SMB2_CREATE_EA_BUFFER (2.2.13.2.1): EAs for a created or overwritten file.
    pub eas: Option<Vec<crate::ea::Ea>>,
    /// SMB2_CREATE_SD_BUFFER (2.2.13.2.2): the descriptor a created object starts with.
    pub sec_desc: Option<SecurityDescriptor>,
    /// SMB2_CREATE_REQUEST_LEASE(_V2) (2.2.13.2.8 / 2.2.13.2.10), as sent; whether it is acted
    /// on depends on RequestedOplockLevel and the dialect (`CreateIntent`).
    pub lease: Option<Lease>,
    /// The SMB3 POSIX create context's mode (smbq_wire::posix), where the connection and the
    /// share have the extensions: this is a POSIX open (crate::posix).
    pub posix_mode: Option<u32>,
}

/// `posix`: the connection negotiated the SMB3 POSIX extensions and the share offers them;
/// otherwise their create context is ignored, as any unknown one.
pub fn parse(req: &CreateRequest<'_>, posix: bool) -> Result<Requested, NtStatus> {
    let list = req
        .parse_contexts()
        .map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let mut out = Requested::default();
    for c in &list {
        let tag = c.tag();
        if tag == CreateContextTag::MXAC {
            // A malformed timestamp is the client's error (3.3.5.9.5).
            MxAcRequest::decode(c.data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
            out.maximal_access = true;
        } else if tag == CreateContextTag::QFID {
            out.query_on_disk_id = true;
        } else if tag == CreateContextTag::EXTA {
            // A FILE_FULL_EA_INFORMATION list, checked before anything is created.
            out.eas = Some(crate::ea::parse_set(c.data)?);
        } else if tag == CreateContextTag::ALSI {
            // MS-SMB2 2.2.13.2.6: an 8-byte allocation size.
            let b: [u8; 8] = c.data.try_into().map_err(|_| NtStatus::INVALID_PARAMETER)?;
            out.allocation_size = Some(u64::from_le_bytes(b));
        } else if tag == CreateContextTag::SECD {
            // MS-SMB2 2.2.13.2.2: a self-relative SECURITY_DESCRIPTOR.
            let sd =
                SecurityDescriptor::decode(c.data).map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?;
            out.sec_desc = Some(sd);
        } else if tag == CreateContextTag::RQLS {
            // A body of neither lease layout is ignored, as an unknown context would be.
            out.lease = Lease::decode(c.data).ok();
        } else if posix && tag == CreateContextTag::POSIX {
            // A mode of any length but 4 bytes is malformed (Samba smbd_smb2_create_before_exec).
            let mode = smbq_wire::posix::create_request_mode(c.data)
                .map_err(|_| NtStatus::INVALID_PARAMETER)?;
            out.posix_mode = Some(mode);
        }
    }
    Ok(out)
}

/// The RqLs context of `req`, if it has a well-formed one; nothing else is looked at (a
/// durable reconnect reads only this, MS-SMB2 3.3.5.9.7).
pub fn lease_of(req: &CreateRequest<'_>) -> Option<Lease> {
    let list = req.parse_contexts().ok()?;
    list.iter()
        .find(|c| c.tag() == CreateContextTag::RQLS)
        .and_then(|c| Lease::decode(c.data).ok())
}

/// The RqLs response context (MS-SMB2 2.2.14.2.10 / 2.2.14.2.11) for the lease `asked` was
/// granted as: the layout of the lease's version (a V2 lease answers a V1 request in V2,
/// smbtorture smb2.lease.v2_epoch2), the V2 parent key echoed.
pub fn lease_response(asked: &Lease, g: &Granted) -> Vec<u8> {
    let mut flags = if g.breaking {
        lease_flags::BREAK_IN_PROGRESS
    } else {
        0
    };
    let parent = asked
        .v2
        .filter(|_| asked.flags & lease_flags::PARENT_LEASE_KEY_SET != 0)
        .map(|v| v.parent_key);
    if parent.is_some() && g.v2 {
        flags |= lease_flags::PARENT_LEASE_KEY_SET;
    }
    let v2 = g.v2.then(|| LeaseV2 {
        parent_key: parent.unwrap_or([0; 16]),
        epoch: g.epoch,
    });
    Lease {
        key: asked.key,
        state: g.state,
        flags,
        duration: 0,
        v2,
    }
    .to_bytes()
}

/// The response context list for what was asked; `extra` are the lease and durable-handle
/// responses, when they were granted.
pub fn respond(
    req: &Requested,
    maximal_access: u32,
    disk_file_id: u64,
    volume_id: u64,
    posix: Option<&smbq_wire::posix::PosixStat>,
    extra: &[(CreateContextTag<'static>, Vec<u8>)],
) -> Vec<u8> {
    let mxac = MxAcResponse {
        query_status: NtStatus::SUCCESS,
        maximal_access,
    }
    .to_bytes();
    let qfid = QFidResponse {
        disk_file_id,
        volume_id,
    }
    .to_bytes();
    let mut list: Vec<CreateContext<'_>> = Vec::new();
    if req.maximal_access {
        list.push(CreateContext::new(CreateContextTag::MXAC, &mxac));
    }
    if req.query_on_disk_id {
        list.push(CreateContext::new(CreateContextTag::QFID, &qfid));
    }
    for (tag, data) in extra {
        list.push(CreateContext::new(*tag, data));
    }
    // The POSIX context's answer: the file's links, mode and owners (crate::posix).
    let posix = posix
        .filter(|_| req.posix_mode.is_some())
        .map(|p| p.to_bytes());
    if let Some(p) = &posix {
        list.push(CreateContext::new(CreateContextTag::POSIX, p.as_slice()));
    }
    if list.is_empty() {
        Vec::new()
    } else {
        contexts_to_bytes(&list)
    }
}
