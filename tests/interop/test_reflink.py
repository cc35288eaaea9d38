"""Block cloning on a file system that shares extents (issue 16): a share on a private XFS
(made with mkfs.xfs in a file and loop-mounted; XFS is made with reflink by default) against
the real server binary.

- smbtorture's smb2.ioctl.dup_extents_* tests (FSCTL_DUPLICATE_EXTENTS_TO_FILE) pass: they run
  only where the share advertises FILE_SUPPORTS_BLOCK_REFCOUNTING, so they are not in the
  ext4 allowlist. The two compressed_* variants skip: smbq does not compress.
- `smbq cp` within the share (FSCTL_SRV_COPYCHUNK) makes a copy that shares the source's
  blocks (filefrag reports its extents "shared"): nothing was read or written.

Needs root, mkfs.xfs (xfsprogs, installed by scripts/test.sh) and a loop device."""

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from conftest import SmbqServer
from test_client import make_file, sha256, smbq_cli
from test_smbtorture import run_torture

DUP_EXTENTS = [
    "smb2.ioctl.dup_extents_simple",
    "smb2.ioctl.dup_extents_len_beyond_dest",
    "smb2.ioctl.dup_extents_len_beyond_src",
    "smb2.ioctl.dup_extents_len_zero",
    "smb2.ioctl.dup_extents_sparse_src",
    "smb2.ioctl.dup_extents_sparse_dest",
    "smb2.ioctl.dup_extents_sparse_both",
    "smb2.ioctl.dup_extents_src_is_dest",
    "smb2.ioctl.dup_extents_src_is_dest_overlap",
    "smb2.ioctl.dup_extents_bad_handle",
    "smb2.ioctl.dup_extents_src_lock",
    "smb2.ioctl.dup_extents_dest_lock",
]


@pytest.fixture(scope="module")
def xfs():
    """A 512 MiB XFS, loop-mounted for this module."""
    assert os.geteuid() == 0, "loop-mounting a file system needs root"
    assert shutil.which("mkfs.xfs"), "mkfs.xfs missing (Debian: xfsprogs)"
    base = pathlib.Path(tempfile.mkdtemp(prefix="smbq-xfs-"))
    image, mnt = base / "xfs.img", base / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(512 << 20)
    subprocess.run(["mkfs.xfs", "-q", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def xfs_workdir(xfs):
    d = pathlib.Path(tempfile.mkdtemp(prefix="w-", dir=xfs))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("name", DUP_EXTENTS)
def test_dup_extents_on_xfs(xfs_workdir, name, unstable):
    run_torture(xfs_workdir, name, unstable)


def shared_extents(path: pathlib.Path) -> bool:
    out = subprocess.run(["filefrag", "-v", str(path)], capture_output=True, text=True,
                         check=True).stdout
    extents = [line for line in out.splitlines() if ".." in line and ":" in line]
    return bool(extents) and all("shared" in line for line in extents)


def test_server_copy_shares_blocks_on_xfs(xfs_workdir):
    server = SmbqServer(xfs_workdir)
    try:
        src = server.share / "big.bin"
        make_file(src, 64 << 20, seed=7)
        os.sync()
        assert not shared_extents(src), "a fresh file shares nothing yet"
        cli = smbq_cli(server, "tcp")
        cli.run("cp", cli.url("big.bin"), "copy.bin", timeout=120)
        dst = server.share / "copy.bin"
        os.sync()
        assert sha256(dst) == sha256(src)
        assert shared_extents(dst), subprocess.run(["filefrag", "-v", str(dst)],
                                                   capture_output=True, text=True).stdout
    finally:
        assert server.stop() == 0


def test_dup_extents_needs_write_data_not_append(xfs_workdir):
    """Cloning into a file replaces bytes inside it, like a WRITE below its end: an open with
    FILE_APPEND_DATA alone gets STATUS_ACCESS_DENIED and the file keeps its bytes; with
    FILE_WRITE_DATA the same request clones (MS-FSA 2.1.5.10.4; MS-SMB2 3.3.5.15)."""
    import struct
    from impacket import smb3structs as s3
    from impacket.smb3 import SessionError
    from impacket.smbconnection import SMBConnection
    from conftest import USER

    server = SmbqServer(xfs_workdir)
    try:
        block = 64 << 10
        src, dst = server.share / "src.bin", server.share / "dst.bin"
        make_file(src, block, seed=3)
        dst.write_bytes(b"\0" * block)
        conn = SMBConnection("127.0.0.1", "127.0.0.1", sess_port=server.port)
        conn.login(USER, server.password)
        s, t = conn.getSMBServer(), conn.connectTree("share")
        fsrc = s.create(t, "src.bin", s3.FILE_READ_DATA, 7, 0, s3.FILE_OPEN, 0x80)
        persistent, volatile = struct.unpack("<QQ", fsrc)
        request = struct.pack("<QQQQQ", persistent, volatile, 0, 0, block)
        dup_extents = 0x00098344  # FSCTL_DUPLICATE_EXTENTS_TO_FILE

        append = s.create(t, "dst.bin", s3.FILE_APPEND_DATA | s3.FILE_READ_ATTRIBUTES, 7, 0,
                          s3.FILE_OPEN, 0x80)
        with pytest.raises(SessionError) as refused:
            s.ioctl(t, append, dup_extents, flags=s3.SMB2_0_IOCTL_IS_FSCTL, inputBlob=request,
                    maxOutputResponse=0)
        assert refused.value.get_error_code() == 0xC0000022, hex(refused.value.get_error_code())
        assert dst.read_bytes() == b"\0" * block
        s.close(t, append)

        writer = s.create(t, "dst.bin", s3.FILE_WRITE_DATA, 7, 0, s3.FILE_OPEN, 0x80)
        s.ioctl(t, writer, dup_extents, flags=s3.SMB2_0_IOCTL_IS_FSCTL, inputBlob=request,
                maxOutputResponse=0)
        s.close(t, writer)
        s.close(t, fsrc)
        conn.logoff()
        assert sha256(dst) == sha256(src)
    finally:
        assert server.stop() == 0


def test_dup_extents_per_user_is_the_kernels_to_allow(xfs_workdir):
    """unix_identity = "per-user" (issue 42): cloning into bob's file is a write to it, which
    the kernel decides at the open of the target. alice's MAXIMUM_ALLOWED open of bob's 0644
    file gets no FILE_WRITE_DATA, so her clone into it is refused and the file keeps its
    bytes; once the mode lets her write (0666), the same request clones."""
    import struct
    from impacket import smb3structs as s3
    from impacket.smb3 import SessionError
    from impacket.smbconnection import SMBConnection
    from test_unix_identity import UNIX_USERS, identity_server
    from conftest import unix_user

    bob = unix_user(UNIX_USERS[1])
    unix_user(UNIX_USERS[0])
    server = identity_server(xfs_workdir)
    try:
        block = 64 << 10
        src, dst = server.share / "alice.bin", server.share / "bob.bin"
        make_file(src, block, seed=5)
        dst.write_bytes(b"\0" * block)
        os.chown(dst, bob.pw_uid, bob.pw_gid)
        dst.chmod(0o644)
        conn = SMBConnection("127.0.0.1", "127.0.0.1", sess_port=server.port)
        conn.login("alice", server.password)
        s, t = conn.getSMBServer(), conn.connectTree("share")
        fsrc = s.create(t, "alice.bin", s3.FILE_READ_DATA, 7, 0, s3.FILE_OPEN, 0x80)
        persistent, volatile = struct.unpack("<QQ", fsrc)
        request = struct.pack("<QQQQQ", persistent, volatile, 0, 0, block)
        dup_extents = 0x00098344  # FSCTL_DUPLICATE_EXTENTS_TO_FILE

        target = s.create(t, "bob.bin", 0x02000000, 7, 0, s3.FILE_OPEN, 0x80)  # MAXIMUM_ALLOWED
        with pytest.raises(SessionError) as refused:
            s.ioctl(t, target, dup_extents, flags=s3.SMB2_0_IOCTL_IS_FSCTL, inputBlob=request,
                    maxOutputResponse=0)
        assert refused.value.get_error_code() == 0xC0000022, hex(refused.value.get_error_code())
        s.close(t, target)
        assert dst.read_bytes() == b"\0" * block

        dst.chmod(0o666)
        target = s.create(t, "bob.bin", 0x02000000, 7, 0, s3.FILE_OPEN, 0x80)
        s.ioctl(t, target, dup_extents, flags=s3.SMB2_0_IOCTL_IS_FSCTL, inputBlob=request,
                maxOutputResponse=0)
        s.close(t, target)
        s.close(t, fsrc)
        conn.logoff()
        assert sha256(dst) == sha256(src)
    finally:
        assert server.stop() == 0, server.server_log()
