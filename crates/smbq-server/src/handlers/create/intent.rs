//! Step 1 of a CREATE, the intent: the decoded request and its create contexts validated
//! once into a [`CreateIntent`] (MS-SMB2 2.2.13, 3.3.5.9), which every later step reads.
//! Every rule on the request's own fields is checked here, before anything is looked up.

use std::sync::Arc;

use smbq_proto::ConnView;
use smbq_wire::create::{CreateDisposition, CreateRequest, ImpersonationLevel, OplockLevel};
use smbq_wire::create_context::{Lease, lease_flags};
use smbq_wire::{Dialect, NtStatus};

use super::{contexts, secure};
use crate::access::{attr, mask, opts, share as share_bits};
use crate::file_state::lease::{LeaseAsk, LeaseKey};
use crate::security::Token;

/// What the client asked this CREATE to do, validated once from the decoded request
/// (MS-SMB2 2.2.13, 3.3.5.9) and read by every step after.
#[derive(Debug)]
pub(super) struct CreateIntent {
    pub(super) name: String,
    pub(super) desired: u32,
    pub(super) share_access: u32,
    pub(super) disposition: CreateDisposition,
    pub(super) options: u32,
    pub(super) attributes: u32,
    /// RequestedOplockLevel, granted once the open is admitted (3.3.5.9.8).
    pub(super) oplock: OplockLevel,
    /// The lease asked for, when RequestedOplockLevel is LEASE, the request carries an RqLs
    /// context and the dialect has leases (2.1 for V1, 3.x for V2; MS-SMB2 3.3.5.9.8,
    /// 3.3.5.9.11). Then no oplock is granted.
    pub(super) lease: Option<LeaseAsk>,
    /// The create contexts the server acts on.
    pub(super) contexts: contexts::Requested,
    /// The session's token, for the security-descriptor checks (crate::security).
    pub(super) token: Arc<Token>,
}

impl CreateIntent {
    pub(super) fn from_request(
        req: &CreateRequest<'_>,
        token: Arc<Token>,
        conn: &ConnView,
        posix_share: bool,
    ) -> Result<Self, NtStatus> {
        validate(req)?;
        let name = req
            .name_string()
            .map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
        let contexts = contexts::parse(req, conn.posix && posix_share)?;
        if let Some(sd) = &contexts.sec_desc {
            secure::check_creator_sd(sd)?;
        }
        let lease = lease_ask(req.requested_oplock_level, contexts.lease.as_ref(), conn);
        Ok(Self {
            name,
            desired: req.desired_access,
            share_access: req.share_access,
            disposition: req.create_disposition,
            options: req.create_options,
            attributes: req.file_attributes,
            oplock: req.requested_oplock_level,
            lease,
            contexts,
            token,
        })
    }
}

/// The request fields MS-SMB2 3.3.5.9 checks before anything is looked up.
fn validate(req: &CreateRequest<'_>) -> Result<(), NtStatus> {
    if req.impersonation_level.0 > ImpersonationLevel::DELEGATE.0 {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    let o = req.create_options;
    if o & opts::RESERVE_OPFILTER != 0 || o & opts::OPEN_BY_FILE_ID != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if o & 0xFF00_0000 != 0 || (o & opts::DIRECTORY_FILE != 0 && o & opts::NON_DIRECTORY_FILE != 0)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.create_disposition.0 > CreateDisposition::OVERWRITE_IF.0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // MS-FSA 2.1.5.1: a directory can only be opened or created, never overwritten.
    if o & opts::DIRECTORY_FILE != 0
        && !matches!(
            req.create_disposition,
            CreateDisposition::OPEN | CreateDisposition::CREATE | CreateDisposition::OPEN_IF
        )
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.share_access & !share_bits::ALL != 0 || req.file_attributes & !attr::VALID_SET != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    check_desired(req.desired_access)
}

/// Validates the raw DesiredAccess before anything else (MS-SMB2 3.3.5.9).
fn check_desired(desired: u32) -> Result<(), NtStatus> {
    if desired & mask::INVALID_BITS != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if desired & mask::ACCESS_SYSTEM_SECURITY != 0 {
        // Reading or writing the SACL needs SeSecurityPrivilege, which no SMB user holds here.
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    Ok(())
}

/// MS-SMB2 3.3.5.9.8 / 3.3.5.9.11: which lease the CREATE asks for, if any.
fn lease_ask(level: OplockLevel, ctx: Option<&Lease>, conn: &ConnView) -> Option<LeaseAsk> {
    let l = ctx.filter(|_| level == OplockLevel::LEASE)?;
    if conn.dialect.0 < Dialect::SMB2_1.0 || (l.v2.is_some() && !conn.dialect.is_smb3()) {
        return None;
    }
    Some(LeaseAsk {
        key: LeaseKey {
            client_guid: conn.client_guid,
            key: l.key,
        },
        requested: l.state,
        v2_epoch: l.v2.map(|v| v.epoch),
        parent: l
            .v2
            .filter(|_| l.flags & lease_flags::PARENT_LEASE_KEY_SET != 0)
            .map(|v| LeaseKey {
                client_guid: conn.client_guid,
                key: v.parent_key,
            }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desired_access_is_checked_first() {
        assert_eq!(check_desired(0x0000_0200), Err(NtStatus::ACCESS_DENIED));
        assert_eq!(
            check_desired(mask::ACCESS_SYSTEM_SECURITY),
            Err(NtStatus::PRIVILEGE_NOT_HELD)
        );
        assert_eq!(
            check_desired(mask::GENERIC_ALL | mask::MAXIMUM_ALLOWED),
            Ok(())
        );
    }
}
