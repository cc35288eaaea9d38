//! Share enumeration: srvsvc NetrShareEnum level 1 over the IPC$ named pipe (MS-SRVS 3.1.4.8),
//! carried by FSCTL_PIPE_TRANSCEIVE (MS-SMB2 3.2.4.20.1) and READs for further fragments.

use smbq_rpc::client::{
    ResponseAssembler, RpcClientError, ShareInfo1, bind_request, check_bind_ack, parse_share_enum,
    share_enum_request,
};
use smbq_wire::create::create_options;
use smbq_wire::fscc::access;
use smbq_wire::ioctl::{CtlCode, IoctlRequest, IoctlResponse, flags as ioctl_flags};
use smbq_wire::{Command, NtStatus, Writer};

use crate::session::check;
use crate::tree::OpenOptions;
use crate::{Error, File, ProtocolError, Session, Tree};

/// Largest RPC response accepted (a share list of thousands fits easily).
const MAX_STUB: usize = 4 << 20;
const PIPE_BUFFER: u32 = 65536;

/// A failed srvsvc step `op`, as the protocol error it is.
fn rpc(op: &'static str) -> impl Fn(RpcClientError) -> Error {
    move |source| Error::Rpc { op, source }
}

async fn transceive(tree: &Tree, pipe: &File, input: Vec<u8>) -> Result<Vec<u8>, Error> {
    let mut w = Writer::new();
    IoctlRequest {
        ctl_code: CtlCode::PIPE_TRANSCEIVE,
        file_id: pipe.id(),
        input: &input,
        max_output_response: PIPE_BUFFER,
        flags: ioctl_flags::IS_FSCTL,
        ..Default::default()
    }
    .encode(&mut w);
    let r = tree
        .send(Command::IOCTL, w.into_vec(), None, PIPE_BUFFER as usize)
        .await?;
    // BUFFER_OVERFLOW: more of this PDU waits in the pipe (MS-SMB2 3.3.5.15.1).
    if r.header.status != NtStatus::BUFFER_OVERFLOW {
        check(&r, "IOCTL")?;
    }
    let out = IoctlResponse::decode(&r.msg)?.output.to_vec();
    let mut pdu = out;
    if r.header.status == NtStatus::BUFFER_OVERFLOW {
        loop {
            let more = pipe.read_at(0, PIPE_BUFFER).await;
            match more {
                Ok(b) if b.is_empty() => break,
                Ok(b) => {
                    if pdu.len() + b.len() > MAX_STUB {
                        return Err(ProtocolError::TooLarge("RPC response too large").into());
                    }
                    pdu.extend_from_slice(&b);
                    if b.len() < PIPE_BUFFER as usize {
                        break;
                    }
                }
                Err(e) if e.status() == Some(NtStatus::BUFFER_OVERFLOW) => continue,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(pdu)
}

impl Session {
    /// The shares the server offers (names, types, comments), through srvsvc on IPC$.
    pub async fn shares(&self) -> Result<Vec<ShareInfo1>, Error> {
        let ipc = self.tree_connect("IPC$").await?;
        let o = OpenOptions {
            access: access::FILE_READ_DATA | access::FILE_WRITE_DATA | access::SYNCHRONIZE,
            options: create_options::NON_DIRECTORY_FILE,
            ..OpenOptions::read()
        };
        let pipe = ipc.open("srvsvc", &o).await?;
        let result = async {
            let ack = transceive(&ipc, &pipe, bind_request(1)).await?;
            check_bind_ack(&ack).map_err(rpc("srvsvc bind"))?;
            let server = format!("\\\\{}", self.client().server_name());
            let mut asm = ResponseAssembler::new(MAX_STUB);
            let mut pdu = transceive(&ipc, &pipe, share_enum_request(2, &server)).await?;
            loop {
                match asm.push(&pdu).map_err(rpc("srvsvc"))? {
                    Some(stub) => {
                        return parse_share_enum(&stub).map_err(rpc("srvsvc"));
                    }
                    None => {
                        pdu = pipe.read_at(0, PIPE_BUFFER).await?.to_vec();
                        if pdu.is_empty() {
                            return Err(
                                ProtocolError::Missing("srvsvc response ended early").into()
                            );
                        }
                    }
                }
            }
        }
        .await;
        let _ = pipe.close().await;
        let _ = ipc.disconnect().await;
        result
    }
}
