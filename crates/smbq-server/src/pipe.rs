//! Named pipe opens on IPC$ (MS-SMB2 3.3.5.9 named pipe create, 3.3.5.15.3 transceive).
//! The RPC service behind a pipe is reached through [`PipeIo`], so the handlers do not depend
//! on how a particular endpoint frames its PDUs.

use std::sync::Arc;

use parking_lot::Mutex;
use smbq_auth::Identity;
use smbq_rpc::RpcError;
use smbq_rpc::pipe::PipeEndpoint;
use smbq_rpc::srvsvc::{ShareInfo, ShareKind as RpcShareKind, ShareSource};
use smbq_wire::NtStatus;

use crate::config::ServerConfig;
use crate::share::{Share, ShareKind, ShareRegistry};

/// What a read from a pipe returned: the bytes, and whether more of the same message remain
/// (then READ/IOCTL answer STATUS_BUFFER_OVERFLOW, MS-SMB2 3.3.5.12 / 3.3.5.15.3).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PipeRead {
    pub data: Vec<u8>,
    pub more: bool,
}

/// A message-mode pipe endpoint.
pub trait PipeIo: Send {
    /// Feeds one client write (a whole or partial RPC PDU).
    fn write(&mut self, data: &[u8]) -> Result<(), NtStatus>;
    /// Takes up to `max` bytes of pending output; empty data with `more == false` means nothing
    /// is pending.
    fn read(&mut self, max: usize) -> Result<PipeRead, NtStatus>;
    /// FSCTL_PIPE_TRANSCEIVE: a write then a read of at most `max` bytes.
    fn transceive(&mut self, data: &[u8], max: usize) -> Result<PipeRead, NtStatus> {
        self.write(data)?;
        self.read(max)
    }
}

fn rpc_status(e: RpcError) -> NtStatus {
    match e {
        RpcError::PipeBusy => NtStatus::PIPE_BUSY,
        RpcError::Closed => NtStatus::PIPE_DISCONNECTED,
        RpcError::OutputFull => NtStatus::INSUFFICIENT_RESOURCES,
        RpcError::Malformed(_) => NtStatus::INVALID_PARAMETER,
    }
}

impl PipeIo for PipeEndpoint {
    fn write(&mut self, data: &[u8]) -> Result<(), NtStatus> {
        PipeEndpoint::write(self, data)
            .map(|_| ())
            .map_err(rpc_status)
    }

    fn read(&mut self, max: usize) -> Result<PipeRead, NtStatus> {
        let data = PipeEndpoint::read(self, max);
        Ok(PipeRead {
            data,
            more: self.message_remaining() > 0,
        })
    }

    fn transceive(&mut self, data: &[u8], max: usize) -> Result<PipeRead, NtStatus> {
        let data = PipeEndpoint::transceive(self, data, max).map_err(rpc_status)?;
        Ok(PipeRead {
            data,
            more: self.message_remaining() > 0,
        })
    }
}

/// Every share srvsvc can report, built when the server starts, each beside the registry entry
/// whose access rules decide which sessions see it.
pub struct ShareList(Vec<(Arc<Share>, ShareInfo)>);

impl ShareList {
    /// The srvsvc view of the registry: disk shares as `C:` plus their path with `\`, as Samba
    /// shows them, and IPC$.
    pub fn new(reg: &ShareRegistry) -> Self {
        Self(
            reg.iter()
                .map(|s| {
                    let info = ShareInfo {
                        name: s.name().to_owned(),
                        kind: match s.kind {
                            ShareKind::Disk => RpcShareKind::Disk,
                            ShareKind::Pipe => RpcShareKind::Ipc,
                        },
                        comment: s.cfg.comment.clone(),
                        path: match s.kind {
                            ShareKind::Disk => {
                                format!("C:{}", s.cfg.path.display()).replace('/', "\\")
                            }
                            ShareKind::Pipe => String::new(),
                        },
                    };
                    (s.clone(), info)
                })
                .collect(),
        )
    }

    /// What one session's srvsvc pipe lists ([`Share::listed_for`]). Taken when the pipe is
    /// opened: a session's identity and the configuration do not change while it is open.
    pub fn visible_to(&self, who: &Identity, cfg: &ServerConfig) -> VisibleShares {
        VisibleShares(
            self.0
                .iter()
                .filter(|(share, _)| share.listed_for(who, cfg))
                .map(|(_, info)| info.clone())
                .collect(),
        )
    }
}

/// The shares one srvsvc pipe reports; NetrShareGetInfo finds no other share either.
pub struct VisibleShares(Vec<ShareInfo>);

impl ShareSource for VisibleShares {
    fn shares(&self) -> Vec<ShareInfo> {
        self.0.clone()
    }
}

pub struct PipeOpen {
    pub name: String,
    pub io: Mutex<Box<dyn PipeIo>>,
}

impl std::fmt::Debug for PipeOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeOpen")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
