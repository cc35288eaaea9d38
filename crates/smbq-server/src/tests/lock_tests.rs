use smbq_wire::create::CreateDisposition as D;
use smbq_wire::lock::{LockElement, LockRequest, lock_flags as lf};
use smbq_wire::{Command, FileId, NtStatus};
use tokio_util::sync::CancellationToken;

use super::harness::{H, msg};
use crate::access::mask;

fn lock_msg(h: &H, id: FileId, locks: &[(u64, u64, u32)]) -> bytes::Bytes {
    let locks = locks
        .iter()
        .map(|&(offset, length, flags)| LockElement {
            offset,
            length,
            flags,
        })
        .collect();
    msg(Command::LOCK, h.tree, h.session.id, |w| {
        LockRequest {
            lock_sequence: 0,
            file_id: id,
            locks,
        }
        .encode(w)
    })
}

const EXF: u32 = lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY;

#[tokio::test]
async fn lock_conflicts_and_io() {
    let h = H::new().await;
    h.put("f", &[0u8; 100]).await;
    let rw = mask::GENERIC_READ | mask::GENERIC_WRITE;
    let a = h.create("f", rw, D::OPEN, 0).await;
    let b = h.create("f", rw, D::OPEN, 0).await;
    assert_eq!(
        h.send(lock_msg(&h, a.id, &[(10, 10, EXF)])).await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(
        h.send(lock_msg(&h, b.id, &[(15, 1, EXF)])).await.status,
        NtStatus::LOCK_NOT_GRANTED
    );
    assert_eq!(
        h.read(b.id, 12, 4).await.status,
        NtStatus::FILE_LOCK_CONFLICT
    );
    assert_eq!(
        h.write(b.id, 0, &[1; 11]).await.status,
        NtStatus::FILE_LOCK_CONFLICT
    );
    assert_eq!(h.read(a.id, 12, 4).await.status, NtStatus::SUCCESS);
    // Unlock must match exactly.
    assert_eq!(
        h.send(lock_msg(&h, a.id, &[(10, 5, lf::UNLOCK)]))
            .await
            .status,
        NtStatus::RANGE_NOT_LOCKED
    );
    // Overflowing range.
    assert_eq!(
        h.send(lock_msg(&h, a.id, &[(u64::MAX, 2, EXF)]))
            .await
            .status,
        NtStatus(0xC000_01A1)
    );
    // Mixed and invalid flag combinations.
    assert_eq!(
        h.send(lock_msg(&h, a.id, &[(0, 1, lf::SHARED | lf::EXCLUSIVE)]))
            .await
            .status,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.send(lock_msg(&h, a.id, &[(0, 1, lf::EXCLUSIVE), (5, 1, EXF)]))
            .await
            .status,
        NtStatus::INVALID_PARAMETER
    );
    // A failing element rolls back the ones before it.
    assert_eq!(
        h.send(lock_msg(&h, b.id, &[(50, 1, EXF), (10, 1, EXF)]))
            .await
            .status,
        NtStatus::LOCK_NOT_GRANTED
    );
    assert_eq!(
        h.send(lock_msg(&h, a.id, &[(50, 1, EXF)])).await.status,
        NtStatus::SUCCESS
    );
    // Closing releases.
    h.close(a.id).await;
    assert_eq!(
        h.send(lock_msg(&h, b.id, &[(10, 10, EXF)])).await.status,
        NtStatus::SUCCESS
    );
}

#[tokio::test]
async fn blocking_lock_is_cancelled() {
    let h = H::new().await;
    h.put("f", &[0u8; 10]).await;
    let a = h.create("f", mask::GENERIC_READ, D::OPEN, 0).await;
    let b = h.create("f", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(
        h.send(lock_msg(&h, a.id, &[(0, 10, EXF)])).await.status,
        NtStatus::SUCCESS
    );
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let m = lock_msg(&h, b.id, &[(0, 10, lf::EXCLUSIVE)]);
    let waiting = h.send_with(m, None, c2);
    let canceller = async {
        tokio::task::yield_now().await;
        cancel.cancel();
    };
    let (r, ()) = tokio::join!(waiting, canceller);
    assert_eq!(r.status, NtStatus::CANCELLED);
}

/// A handle without FILE_READ_DATA or FILE_WRITE_DATA cannot lock a range away from the users
/// who may read and write it; with either right it can, and unlocking is never refused.
#[tokio::test]
async fn locking_needs_a_data_right() {
    let h = H::new().await;
    h.put("f", &[0u8; 100]).await;
    let attrs = h.create("f", mask::FILE_READ_ATTRIBUTES, D::OPEN, 0).await;
    assert_eq!(attrs.status, NtStatus::SUCCESS);
    assert_eq!(
        h.send(lock_msg(&h, attrs.id, &[(0, 100, EXF)]))
            .await
            .status,
        NtStatus::ACCESS_DENIED
    );
    let rw = mask::GENERIC_READ | mask::GENERIC_WRITE;
    let other = h.create("f", rw, D::OPEN, 0).await;
    assert_eq!(
        h.send(lock_msg(&h, other.id, &[(0, 100, EXF)]))
            .await
            .status,
        NtStatus::SUCCESS,
        "the refused lock left nothing behind"
    );
    assert_eq!(
        h.send(lock_msg(&h, other.id, &[(0, 100, lf::UNLOCK)]))
            .await
            .status,
        NtStatus::SUCCESS
    );
    for right in [mask::FILE_READ_DATA, mask::FILE_WRITE_DATA] {
        let o = h.create("f", right, D::OPEN, 0).await;
        assert_eq!(
            h.send(lock_msg(&h, o.id, &[(0, 10, EXF)])).await.status,
            NtStatus::SUCCESS,
            "{right:#x}"
        );
        assert_eq!(
            h.send(lock_msg(&h, o.id, &[(0, 10, lf::UNLOCK)]))
                .await
                .status,
            NtStatus::SUCCESS
        );
        h.close(o.id).await;
    }
}
