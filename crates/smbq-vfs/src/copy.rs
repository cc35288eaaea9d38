//! Copying a byte range from one open file to another (the server's FSCTL_SRV_COPYCHUNK): in
//! the kernel with copy_file_range(2) when both files are descriptors, so no byte passes
//! through user space and file systems that share extents (XFS, Btrfs) may reflink; through a
//! bounded buffer otherwise.

use std::io;

use rustix::io::Errno;

use crate::VfsFile;

/// Largest piece copied through memory at once; a chunk up to this size is read whole before
/// any of it is written, so overlapping ranges of one file copy as memmove would.
pub const COPY_PIECE: usize = 1 << 20;

/// Copies up to `len` bytes at `src_off` of `src` to `dst_off` of `dst`; fewer only when the
/// source ends first. Returns the byte count copied.
pub fn copy_range(
    src: &dyn VfsFile,
    src_off: u64,
    dst: &dyn VfsFile,
    dst_off: u64,
    len: u64,
) -> io::Result<u64> {
    let max = i64::MAX as u64;
    if src_off.checked_add(len).is_none_or(|e| e > max)
        || dst_off.checked_add(len).is_none_or(|e| e > max)
    {
        return Err(io::Error::from_raw_os_error(Errno::FBIG.raw_os_error()));
    }
    let mut done = 0u64;
    if let (Some(sfd), Some(dfd)) = (src.as_fd(), dst.as_fd()) {
        while done < len {
            let mut so = src_off + done;
            let mut d = dst_off + done;
            let want = usize::try_from(len - done).unwrap_or(usize::MAX);
            match rustix::fs::copy_file_range(sfd, Some(&mut so), dfd, Some(&mut d), want) {
                Ok(0) => return Ok(done),
                Ok(n) => done += n as u64,
                Err(Errno::INTR) => {}
                // Not supported here (another file system, a kernel without it, special
                // files) or the same file with overlapping ranges: copy through memory.
                Err(Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => break,
                Err(e) => return Err(io::Error::from_raw_os_error(e.raw_os_error())),
            }
        }
    }
    while done < len {
        let want = usize::try_from(len - done)
            .unwrap_or(usize::MAX)
            .min(COPY_PIECE);
        let piece = src.read_at(src_off + done, want)?;
        if piece.is_empty() {
            break;
        }
        let n = dst.write_at(dst_off + done, std::slice::from_ref(&piece))?;
        done += n as u64;
        if piece.len() < want {
            break;
        }
    }
    Ok(done)
}

/// Writes zeros over `[offset, offset + len)`, clipped to the end of the file (a file that
/// cannot deallocate still reads zeros there, and does not grow).
pub(crate) fn write_zeros<F: VfsFile + ?Sized>(file: &F, offset: u64, len: u64) -> io::Result<()> {
    let end = offset.saturating_add(len).min(file.stat()?.size);
    let zeros = bytes::Bytes::from(vec![0u8; COPY_PIECE]);
    let mut at = offset;
    while at < end {
        let n = usize::try_from(end - at)
            .unwrap_or(usize::MAX)
            .min(COPY_PIECE);
        file.write_at(at, &[zeros.slice(..n)])?;
        at += n as u64;
    }
    Ok(())
}

/// Makes `[dst_off, dst_off + len)` of `dst` share the blocks of `[src_off, src_off + len)` of
/// `src` (block-aligned ranges on a file system that clones: see [`crate::FsStat`]), through
/// copy_file_range(2), which the kernel turns into a clone there. Unlike [`copy_range`] it
/// never copies through memory: a range the kernel does not take is an error, so a request
/// cannot make the server read or write the bytes.
pub fn clone_range(
    src: &dyn VfsFile,
    src_off: u64,
    dst: &dyn VfsFile,
    dst_off: u64,
    len: u64,
) -> io::Result<()> {
    let (Some(sfd), Some(dfd)) = (src.as_fd(), dst.as_fd()) else {
        return Err(io::Error::from_raw_os_error(
            Errno::OPNOTSUPP.raw_os_error(),
        ));
    };
    let mut done = 0u64;
    while done < len {
        let mut so = src_off + done;
        let mut d = dst_off + done;
        let want = usize::try_from(len - done).unwrap_or(usize::MAX);
        match rustix::fs::copy_file_range(sfd, Some(&mut so), dfd, Some(&mut d), want) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => done += n as u64,
            Err(Errno::INTR) => {}
            Err(e) => return Err(io::Error::from_raw_os_error(e.raw_os_error())),
        }
    }
    Ok(())
}
