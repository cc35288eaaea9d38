//! LOCK (MS-SMB2 3.3.5.14) over the byte-range lock manager (crate::byte_lock).

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::lock::{LockElement, LockRequest, LockResponse, lock_flags as lf};

use super::{Ctx, bad, body};
use crate::access::mask;
use crate::file_state::WaitEnds;
use crate::tables::lock_seq::{self, Check};

/// 2.2.26.1: the flag combinations a lock element may carry.
fn lock_kind(e: &LockElement) -> Result<(bool, bool), NtStatus> {
    match e.flags {
        f if f == lf::SHARED => Ok((false, false)),
        f if f == lf::EXCLUSIVE => Ok((true, false)),
        f if f == lf::SHARED | lf::FAIL_IMMEDIATELY => Ok((false, true)),
        f if f == lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY => Ok((true, true)),
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = LockRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?;
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    if f.is_dir {
        // MS-FSA 2.1.5.8: no byte-range locks on directories.
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let first = req.locks.first().ok_or(NtStatus::INVALID_PARAMETER)?;
    // 3.3.5.14: a resent LOCK of a durable or resilient open is answered, not done again
    // (crate::tables::lock_seq); recorded below only when the whole request succeeded.
    let kept = open.durable.lock().is_some();
    let seq = lock_seq::slot(req.lock_sequence, ctx.conn.dialect, kept);
    if let Some(s) = seq
        && open.lock_seq.lock().check(s) == Check::Replay
    {
        return Ok(Response::ok(body(|w| LockResponse.encode(w))));
    }
    let srv = ctx.srv;
    let owner = open.volatile();
    // A persistent open's locks are on stable storage before the client hears of them
    // (crate::persist, MS-SMB2 3.3.5.9.10): one write per request, whatever its number of
    // elements. Locks that cannot be recorded are not granted: they go again and the request
    // fails, so a restart never loses a lock a client was told it holds. (An unlock that
    // cannot be recorded stands, and the record is written again in the background until
    // the store takes it: crate::persist, `write_again_later`.)
    let done = |taken: &[&LockElement]| {
        if !srv.persist(open) && !taken.is_empty() {
            for t in taken {
                let _ = srv.unlock_range(f.key, owner, (t.offset, t.length));
            }
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        if let Some(s) = seq {
            open.lock_seq.lock().record(s);
        }
        Ok(Response::ok(body(|w| LockResponse.encode(w))))
    };
    if first.flags & lf::UNLOCK != 0 {
        // 3.3.5.14.1: an unlock list; each entry must be a plain UNLOCK. Entries already
        // processed stay unlocked when a later one fails.
        let unlocked = req.locks.iter().try_for_each(|e| {
            if e.flags != lf::UNLOCK {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            srv.unlock_range(f.key, owner, (e.offset, e.length))
        });
        if let Err(status) = unlocked {
            // The entries before it stay unlocked, and so does the record.
            srv.persist(open);
            return Err(status);
        }
        return done(&[]);
    }
    // Taking a lock blocks other users' reads and writes of the range, so a handle opened
    // only for attributes may not (MS-CIFS 3.3.5.15: at minimum read permission; Windows'
    // NtLockFile wants FILE_READ_DATA or FILE_WRITE_DATA on the handle). Unlocking is always
    // allowed, so a lock can never be stuck.
    if open.granted & (mask::FILE_READ_DATA | mask::FILE_WRITE_DATA) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // 3.3.5.14.2: only a single-element request may wait.
    let kinds: Vec<(bool, bool)> = req.locks.iter().map(lock_kind).collect::<Result<_, _>>()?;
    if req.locks.len() > 1 && kinds.iter().any(|(_, fail)| !fail) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut taken: Vec<&LockElement> = Vec::new();
    for (e, (exclusive, fail)) in req.locks.iter().zip(kinds) {
        // MS-FSA 2.1.5.7: each request breaks level II oplocks (crate::open_state, on_lock).
        let ends = (!fail).then_some(WaitEnds {
            cancel: &ctx.cancel,
            closed: &open.closed,
        });
        let range = (e.offset, e.length);
        if let Err(status) = srv.lock_range(f.key, owner, range, exclusive, ends).await {
            for t in taken {
                let _ = srv.unlock_range(f.key, owner, (t.offset, t.length));
            }
            return Err(status);
        }
        taken.push(e);
    }
    done(&taken)
}
