//! What each CreateDisposition does to an existing or a missing file (MS-SMB2 2.2.13,
//! MS-FSA 2.1.5.1.1 / 2.1.5.1.2), and the CreateAction it reports.

use smbq_wire::NtStatus;
use smbq_wire::create::{CreateAction, CreateDisposition};

/// The plan for one CREATE once we know whether the name exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Open the existing object; truncate it when `truncate` (overwrite/supersede).
    OpenExisting {
        truncate: bool,
        action: CreateAction,
    },
    /// Create a new object.
    Create,
}

impl Plan {
    /// Whether the existing object is truncated (overwrite, supersede).
    pub fn truncates(self) -> bool {
        matches!(self, Plan::OpenExisting { truncate: true, .. })
    }

    /// The CreateAction the response reports for this plan.
    pub fn action(self) -> CreateAction {
        match self {
            Plan::OpenExisting { action, .. } => action,
            Plan::Create => CreateAction::CREATED,
        }
    }
}

pub fn plan(disposition: CreateDisposition, exists: bool) -> Result<Plan, NtStatus> {
    use CreateDisposition as D;
    let existing = |truncate, action| Ok(Plan::OpenExisting { truncate, action });
    match (disposition, exists) {
        (D::OPEN | D::OPEN_IF, true) => existing(false, CreateAction::OPENED),
        (D::OVERWRITE | D::OVERWRITE_IF, true) => existing(true, CreateAction::OVERWRITTEN),
        (D::SUPERSEDE, true) => existing(true, CreateAction::SUPERSEDED),
        (D::CREATE, true) => Err(NtStatus::OBJECT_NAME_COLLISION),
        (D::OPEN | D::OVERWRITE, false) => Err(NtStatus::OBJECT_NAME_NOT_FOUND),
        (D::CREATE | D::OPEN_IF | D::OVERWRITE_IF | D::SUPERSEDE, false) => Ok(Plan::Create),
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}

/// Whether a disposition may create (a read-only share refuses these on a missing name).
pub fn may_create(disposition: CreateDisposition) -> bool {
    use CreateDisposition as D;
    matches!(
        disposition,
        D::CREATE | D::OPEN_IF | D::OVERWRITE_IF | D::SUPERSEDE
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use CreateDisposition as D;

    #[test]
    fn every_disposition_both_ways() {
        let ow = |a| {
            Ok(Plan::OpenExisting {
                truncate: true,
                action: a,
            })
        };
        let rows = [
            (D::SUPERSEDE, true, ow(CreateAction::SUPERSEDED)),
            (D::SUPERSEDE, false, Ok(Plan::Create)),
            (
                D::OPEN,
                true,
                Ok(Plan::OpenExisting {
                    truncate: false,
                    action: CreateAction::OPENED,
                }),
            ),
            (D::OPEN, false, Err(NtStatus::OBJECT_NAME_NOT_FOUND)),
            (D::CREATE, true, Err(NtStatus::OBJECT_NAME_COLLISION)),
            (D::CREATE, false, Ok(Plan::Create)),
            (
                D::OPEN_IF,
                true,
                Ok(Plan::OpenExisting {
                    truncate: false,
                    action: CreateAction::OPENED,
                }),
            ),
            (D::OPEN_IF, false, Ok(Plan::Create)),
            (D::OVERWRITE, true, ow(CreateAction::OVERWRITTEN)),
            (D::OVERWRITE, false, Err(NtStatus::OBJECT_NAME_NOT_FOUND)),
            (D::OVERWRITE_IF, true, ow(CreateAction::OVERWRITTEN)),
            (D::OVERWRITE_IF, false, Ok(Plan::Create)),
            (CreateDisposition(6), true, Err(NtStatus::INVALID_PARAMETER)),
        ];
        for (d, exists, want) in rows {
            assert_eq!(plan(d, exists), want, "{d:?} exists={exists}");
        }
    }
}
