//! Whole-file transfers with many READs or WRITEs in flight (the credit window permitting),
//! reported through a progress callback.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::{Error, File, ProtocolError};

/// How much to keep in flight.
#[derive(Clone, Copy, Debug)]
pub struct TransferOptions {
    /// Bytes per READ/WRITE (capped by the negotiated maximum).
    pub chunk: u32,
    /// Requests in flight at once.
    pub depth: usize,
}

impl Default for TransferOptions {
    fn default() -> Self {
        Self {
            chunk: 1 << 20,
            depth: 8,
        }
    }
}

/// Reads `[offset, end)` of `file`, `depth` READs in flight, handing each piece to `sink` in
/// file order; a READ that went with the open at `offset` is used instead of repeated. Returns the bytes delivered; stops early at end of file. Dropping the future
/// aborts the READs still running (each sends its CANCEL).
pub async fn download(
    file: &File,
    offset: u64,
    end: u64,
    opts: TransferOptions,
    mut sink: impl FnMut(&Bytes) -> Result<(), Error>,
) -> Result<u64, Error> {
    let chunk = u64::from(opts.chunk.min(file.max_read()).max(1));
    let mut set = tokio::task::JoinSet::new();
    let mut ready: BTreeMap<u64, (u64, Bytes)> = BTreeMap::new();
    let mut next = offset;
    let mut deliver = offset;
    let mut done = 0u64;
    let mut eof = false;
    // The READ that went with the open (Tree::open_and_read) is the first piece.
    if let Some((asked, data)) = file.take_prefetch(offset) {
        let len = u64::from(asked).min(end.saturating_sub(offset));
        if len > 0 {
            if (data.len() as u64) < u64::from(asked) {
                eof = true;
            }
            let data = data.slice(..data.len().min(len as usize));
            ready.insert(offset, (len, data));
            next = offset + len;
        }
    }
    loop {
        while !eof && set.len() + ready.len() < opts.depth.max(1) && next < end {
            let len = chunk.min(end - next);
            let f = file.clone();
            let at = next;
            set.spawn(async move {
                let d = f
                    .read_at(at, u32::try_from(len).unwrap_or(u32::MAX))
                    .await?;
                Ok::<_, Error>((at, len, d))
            });
            next += len;
        }
        while let Some((len, data)) = ready.remove(&deliver) {
            sink(&data)?;
            done += data.len() as u64;
            if (data.len() as u64) < len {
                // Short read: the file ends here; later pieces are past it.
                return Ok(done);
            }
            deliver += len;
        }
        if set.is_empty() {
            if eof || next >= end {
                return Ok(done);
            }
            // Everything delivered and the window is open again: send the next READs.
            continue;
        }
        match set.join_next().await {
            None => return Ok(done),
            Some(Ok(Ok((at, len, data)))) => {
                if (data.len() as u64) < len {
                    eof = true;
                }
                ready.insert(at, (len, data));
            }
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(source)) => {
                return Err(Error::Task {
                    what: "read",
                    source,
                });
            }
        }
    }
}

/// Writes what `source` yields at `offset` onwards, `depth` WRITEs in flight. `source`
/// returns the next piece (empty at the end). Returns the bytes written.
pub async fn upload(
    file: &File,
    offset: u64,
    opts: TransferOptions,
    mut source: impl FnMut(usize) -> Result<Bytes, Error>,
    mut progress: impl FnMut(u64),
) -> Result<u64, Error> {
    let chunk = opts.chunk.min(file.max_write()).max(1) as usize;
    let mut set = tokio::task::JoinSet::new();
    let mut at = offset;
    let mut done = 0u64;
    let mut eof = false;
    loop {
        while !eof && set.len() < opts.depth.max(1) {
            let data = source(chunk)?;
            if data.is_empty() {
                eof = true;
                break;
            }
            let len = data.len() as u64;
            let f = file.clone();
            let pos = at;
            set.spawn(async move {
                let n = f.write_at(pos, data).await?;
                if u64::from(n) != len {
                    return Err(ProtocolError::ShortWrite {
                        written: n.into(),
                        asked: len,
                    }
                    .into());
                }
                Ok(len)
            });
            at += len;
        }
        match set.join_next().await {
            None => return Ok(done),
            Some(Ok(Ok(n))) => {
                done += n;
                progress(done);
            }
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(source)) => {
                return Err(Error::Task {
                    what: "write",
                    source,
                });
            }
        }
    }
}
