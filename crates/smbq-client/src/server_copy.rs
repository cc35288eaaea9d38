//! Server-side copy (MS-SMB2 3.2.4.20.2): the source's resume key, then
//! FSCTL_SRV_COPYCHUNK_WRITE requests on the destination, each naming up to the server's
//! limits of chunks; the data never crosses the network. COPYCHUNK_WRITE rather than
//! COPYCHUNK because it needs no read access on the destination.

use smbq_wire::copychunk::{
    Chunk, CopyChunkCopy, CopyChunkResponse, RESUME_KEY_LEN, ResumeKeyResponse,
};
use smbq_wire::ioctl::{CtlCode, IoctlRequest, IoctlResponse, flags as ioctl_flags};
use smbq_wire::{Command, NtStatus, Writer};

use crate::session::check;
use crate::{Error, File, ProtocolError};

/// Windows' limits (MS-SMB2 3.3.5.15.6), the first guess until a server says otherwise.
const DEFAULT_LIMITS: CopyChunkResponse = CopyChunkResponse {
    chunks_written: 256,
    chunk_bytes_written: 1 << 20,
    total_bytes_written: 16 << 20,
};

/// Copy requests in flight at once: the server copies them on separate threads, and a WAN
/// link's round trip is not paid per request.
const DEPTH: usize = 4;

/// An FSCTL on `file` (MS-SMB2 2.2.31), sent on the open's lane.
pub(crate) async fn fsctl(
    file: &File,
    ctl_code: CtlCode,
    input: &[u8],
    max_out: u32,
) -> Result<smbq_proto::client::Incoming, Error> {
    let mut w = Writer::new();
    IoctlRequest {
        ctl_code,
        file_id: file.id(),
        input,
        max_output_response: max_out,
        flags: ioctl_flags::IS_FSCTL,
        ..Default::default()
    }
    .encode(&mut w);
    file.tree()
        .send_for(
            file.id(),
            Command::IOCTL,
            w.into_vec(),
            None,
            input.len(),
            false,
        )
        .await
}

impl File {
    /// FSCTL_SRV_REQUEST_RESUME_KEY: the key that names this open as a copy's source.
    pub async fn resume_key(&self) -> Result<[u8; RESUME_KEY_LEN], Error> {
        let r = fsctl(
            self,
            CtlCode::SRV_REQUEST_RESUME_KEY,
            &[],
            ResumeKeyResponse::LEN as u32,
        )
        .await?;
        check(&r, "IOCTL resume key")?;
        let out = IoctlResponse::decode(&r.msg)?;
        Ok(ResumeKeyResponse::decode(out.output)?.resume_key)
    }

    /// One FSCTL_SRV_COPYCHUNK_WRITE into this open from the open `source_key` names. On
    /// STATUS_INVALID_PARAMETER with a body the server's limits come back as `Err(limits)`
    /// inside `Ok`, so the caller can retry within them.
    pub async fn copy_chunks(
        &self,
        source_key: &[u8; RESUME_KEY_LEN],
        chunks: Vec<Chunk>,
    ) -> Result<Result<CopyChunkResponse, CopyChunkResponse>, Error> {
        let cc = CopyChunkCopy {
            source_key: *source_key,
            chunk_count: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
            chunks,
        };
        let mut w = Writer::new();
        cc.encode(&mut w);
        let r = fsctl(
            self,
            CtlCode::SRV_COPYCHUNK_WRITE,
            w.as_slice(),
            CopyChunkResponse::LEN as u32,
        )
        .await?;
        let body = IoctlResponse::decode(&r.msg)
            .ok()
            .and_then(|o| CopyChunkResponse::decode(o.output).ok());
        match (r.header.status, body) {
            (NtStatus::INVALID_PARAMETER, Some(limits)) => Ok(Err(limits)),
            _ => {
                check(&r, "IOCTL copychunk")?;
                body.map(Ok)
                    .ok_or(ProtocolError::Missing("copychunk answer without its counts").into())
            }
        }
    }
}

/// Copies `len` bytes from the start of `src` to the start of `dst` inside the server (both
/// opens on one session, any shares), calling `progress` with the bytes copied so far.
/// Returns the bytes copied.
// Long: the resume key, the batches in flight and the restart under the limits the server
// reports (MS-SMB2 3.3.5.15.6) share one set of loop state.
pub async fn server_copy(
    src: &File,
    dst: &File,
    len: u64,
    mut progress: impl FnMut(u64),
) -> Result<u64, Error> {
    let key = src.resume_key().await?;
    let mut limits = DEFAULT_LIMITS;
    let mut done = 0u64;
    'restart: loop {
        let chunk = u64::from(limits.chunk_bytes_written.max(1));
        let per_req = u64::from(limits.total_bytes_written.max(1))
            .min(chunk * u64::from(limits.chunks_written.max(1)))
            .max(chunk);
        let mut set = tokio::task::JoinSet::new();
        let mut next = done;
        let mut finished = std::collections::BTreeMap::new();
        loop {
            while set.len() < DEPTH && next < len {
                let end = (next + per_req).min(len);
                let mut chunks = Vec::new();
                let mut at = next;
                while at < end {
                    let l = chunk.min(end - at);
                    chunks.push(Chunk {
                        source_offset: at,
                        target_offset: at,
                        length: u32::try_from(l).unwrap_or(u32::MAX),
                    });
                    at += l;
                }
                let (d, start) = (dst.clone(), next);
                set.spawn(async move {
                    let r = d.copy_chunks(&key, chunks).await;
                    (start, end, r)
                });
                next = end;
            }
            let Some(joined) = set.join_next().await else {
                return Ok(done);
            };
            let (start, end, r) = joined.map_err(|source| Error::Task {
                what: "copy",
                source,
            })?;
            match r? {
                Ok(c) if u64::from(c.total_bytes_written) == end - start => {
                    finished.insert(start, end);
                    // Progress counts the copied prefix: what a resumed copy could skip.
                    while let Some(e) = finished.remove(&done) {
                        done = e;
                        progress(done);
                    }
                }
                Ok(c) => {
                    return Err(ProtocolError::ShortCopy {
                        copied: u64::from(c.total_bytes_written),
                        asked: end - start,
                    }
                    .into());
                }
                Err(server_limits) => {
                    if server_limits.chunk_bytes_written == 0
                        || server_limits == limits
                        || server_limits.total_bytes_written == 0
                    {
                        return Err(Error::Status {
                            op: "IOCTL copychunk",
                            status: NtStatus::INVALID_PARAMETER,
                        });
                    }
                    // Smaller limits than guessed: let what is in flight finish, then go on
                    // from the copied prefix within them (copying a range twice is harmless).
                    limits = server_limits;
                    while let Some(j) = set.join_next().await {
                        if let Ok((s, e, Ok(Ok(_)))) = j {
                            finished.insert(s, e);
                        }
                    }
                    while let Some(e) = finished.remove(&done) {
                        done = e;
                        progress(done);
                    }
                    continue 'restart;
                }
            }
        }
    }
}
