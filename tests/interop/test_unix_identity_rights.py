"""Per-user identities (unix_identity = "per-user"): the changes smbq makes with the server's
uid (named streams, descriptors, DOS attributes and EAs live in extended attributes) are
granted only where the kernel lets the account's Unix user make them (issue 42, items 1-2).

bob owns a 0755 directory holding a 0644 file with two streams: the kernel lets alice read
them and change nothing. Every request below is one alice can send with any client; each
is refused, and bob, the owner, may still do all of it."""

import os
import struct

import pytest

from test_unix_identity import UNIX_USERS, identity_server, unix_users  # noqa: F401

# impacket: installed by scripts/test.sh.
from impacket import smb3structs as s3
from impacket.smb3 import SessionError
from impacket.smbconnection import SMBConnection

ACCESS_DENIED = 0xC0000022
END_OF_FILE = 0xC0000011
NOT_SUPPORTED = 0xC00000BB
INVALID_OWNER = 0xC000005A
READ = s3.FILE_READ_DATA | s3.FILE_READ_ATTRIBUTES
SHARE_ALL = 7
DELETE_ON_CLOSE = 0x1000
MAXIMUM_ALLOWED = 0x02000000
WRITE_DAC = 0x00040000
WRITE_OWNER = 0x00080000
READ_CONTROL = 0x00020000
FILE_WRITE_EA = 0x10
FILE_WRITE_ATTRIBUTES = 0x100
# SET_INFO security (MS-SMB2 2.2.39): InfoType SMB2_0_INFO_SECURITY, AdditionalInformation.
INFO_SECURITY = 3
OWNER_INFO, DACL_INFO = 0x1, 0x4


def sid_bytes(authority: int, *subs: int) -> bytes:
    return bytes([1, len(subs)]) + authority.to_bytes(6, "big") + b"".join(
        struct.pack("<I", s) for s in subs)


EVERYONE = sid_bytes(1, 0)


def sd_owner(owner: bytes) -> bytes:
    """A self-relative descriptor with only an owner (MS-DTYP 2.4.6)."""
    return struct.pack("<BBHIIII", 1, 0, 0x8000, 20, 0, 0, 0) + owner


def sd_deny_everyone() -> bytes:
    """A self-relative descriptor whose DACL denies Everyone everything."""
    ace = struct.pack("<BBHI", 1, 0, 8 + len(EVERYONE), 0x001F01FF) + EVERYONE
    acl = struct.pack("<BBHHH", 2, 0, 8 + len(ace), 1, 0) + ace
    return struct.pack("<BBHIIII", 1, 0, 0x8000 | 0x0004, 0, 0, 0, 20) + acl


class Client:
    def __init__(self, server, user):
        self.conn = SMBConnection("127.0.0.1", "127.0.0.1", sess_port=server.port)
        self.conn.login(user, server.password)
        self.smb = self.conn.getSMBServer()
        self.tree = self.conn.connectTree("share")

    def open(self, name, access, disposition=s3.FILE_OPEN, options=0):
        return self.smb.create(self.tree, name, access, SHARE_ALL, options, disposition, 0x80)

    def status(self, name, access, disposition=s3.FILE_OPEN, options=0) -> int:
        """0 when the open succeeds (and is closed again), else its NTSTATUS."""
        try:
            fid = self.open(name, access, disposition, options)
        except SessionError as e:
            return e.get_error_code()
        self.smb.close(self.tree, fid)
        return 0

    def set_security(self, fid, addl, sd) -> int:
        try:
            self.smb.setInfo(self.tree, fid, inputBlob=sd, infoType=INFO_SECURITY,
                             fileInfoClass=0, additionalInformation=addl)
        except SessionError as e:
            return e.get_error_code()
        return 0

    def write(self, fid, data) -> int:
        try:
            self.smb.write(self.tree, fid, data, 0, len(data))
        except SessionError as e:
            return e.get_error_code()
        return 0

    def close(self):
        self.conn.close()


def streams(path) -> set[str]:
    """The named streams smbq keeps on `path` (crate::streams: extended attributes)."""
    return {n for n in os.listxattr(path) if ".smbq.stream." in n}


@pytest.fixture
def bob_files(workdir, unix_users):  # noqa: F811
    server = identity_server(workdir)
    bob = Client(server, "bob")
    fid = bob.open("bobdir", s3.FILE_READ_DATA | s3.FILE_WRITE_DATA, s3.FILE_CREATE, 1)
    bob.smb.close(bob.tree, fid)
    for name, data in (("bobdir/f.txt", b"bob's data"), ("bobdir/f.txt:notes", b"notes"),
                       ("bobdir/f.txt:keep", b"keep")):
        fid = bob.open(name, s3.FILE_WRITE_DATA | s3.FILE_READ_DATA, s3.FILE_OVERWRITE_IF)
        assert bob.write(fid, data) == 0
        bob.smb.close(bob.tree, fid)
    d = server.share / "bobdir"
    bob_uid = unix_users[UNIX_USERS[1]].pw_uid
    assert d.stat().st_uid == bob_uid and (d / "f.txt").stat().st_uid == bob_uid
    assert d.stat().st_mode & 0o777 == 0o755 and (d / "f.txt").stat().st_mode & 0o777 == 0o644
    alice = Client(server, "alice")
    try:
        yield server, alice, bob
    finally:
        alice.close()
        bob.close()
        assert server.stop() == 0, server.server_log()


def stream_data(client, name) -> bytes:
    fid = client.open(name, s3.FILE_READ_DATA)
    try:
        return client.smb.read(client.tree, fid, 0, 100)
    except SessionError as e:
        assert e.get_error_code() == END_OF_FILE, hex(e.get_error_code())
        return b""
    finally:
        client.smb.close(client.tree, fid)


def test_a_reader_cannot_change_another_users_streams(bob_files):
    server, alice, bob = bob_files
    f = server.share / "bobdir" / "f.txt"
    before = set(os.listxattr(f))
    # Reading them is what the kernel allows.
    assert stream_data(alice, "bobdir/f.txt:notes") == b"notes"
    # Overwrite and supersede with read access only: a write to bob's file.
    for disp in (s3.FILE_OVERWRITE, s3.FILE_OVERWRITE_IF, s3.FILE_SUPERSEDE):
        assert alice.status("bobdir/f.txt:notes", READ, disp) == ACCESS_DENIED, disp
    assert stream_data(bob, "bobdir/f.txt:notes") == b"notes"
    # A new stream, asked for with read access only (FILE_CREATE and FILE_OPEN_IF).
    for disp in (s3.FILE_CREATE, s3.FILE_OPEN_IF):
        assert alice.status("bobdir/f.txt:planted", READ, disp) == ACCESS_DENIED, disp
    # Delete on close, and DELETE to rename or delete it later.
    assert alice.status("bobdir/f.txt:keep", s3.DELETE | READ, s3.FILE_OPEN,
                        DELETE_ON_CLOSE) == ACCESS_DENIED
    assert alice.status("bobdir/f.txt:keep", s3.DELETE) == ACCESS_DENIED
    # Writing, directly or with what MAXIMUM_ALLOWED gives.
    assert alice.status("bobdir/f.txt:notes", s3.FILE_WRITE_DATA) == ACCESS_DENIED
    fid = alice.open("bobdir/f.txt:notes", MAXIMUM_ALLOWED)
    assert alice.write(fid, b"evil") == ACCESS_DENIED
    alice.smb.close(alice.tree, fid)
    # A stream on bob's directory, with write access or read access only.
    for access in (s3.FILE_WRITE_DATA | READ, READ):
        assert alice.status("bobdir:ads", access, s3.FILE_CREATE) == ACCESS_DENIED, access
    assert set(os.listxattr(f)) == before, "nothing changed on bob's file"
    assert stream_data(bob, "bobdir/f.txt:keep") == b"keep"
    assert not streams(server.share / "bobdir")
    # bob, the owner, may do each of these.
    assert bob.status("bobdir/f.txt:notes", READ, s3.FILE_OVERWRITE) == 0
    assert stream_data(bob, "bobdir/f.txt:notes") == b""
    assert bob.status("bobdir/f.txt:planted", READ, s3.FILE_CREATE) == 0
    assert bob.status("bobdir/f.txt:keep", s3.DELETE | READ, s3.FILE_OPEN, DELETE_ON_CLOSE) == 0
    assert bob.status("bobdir/f.txt:keep", READ) != 0, "deleted"
    assert bob.status("bobdir:ads", s3.FILE_WRITE_DATA | READ, s3.FILE_CREATE) == 0


def test_only_the_unix_owner_changes_owner_and_dacl(bob_files):
    server, alice, bob = bob_files
    for name in ("bobdir/f.txt", "bobdir"):
        for access in (WRITE_DAC, WRITE_OWNER, WRITE_DAC | WRITE_OWNER | READ_CONTROL):
            assert alice.status(name, access) == ACCESS_DENIED, (name, hex(access))
        # MAXIMUM_ALLOWED leaves them out, so the change itself is refused.
        fid = alice.open(name, MAXIMUM_ALLOWED)
        assert alice.set_security(fid, DACL_INFO, sd_deny_everyone()) == ACCESS_DENIED
        assert alice.set_security(fid, OWNER_INFO, sd_owner(EVERYONE)) == ACCESS_DENIED
        alice.smb.close(alice.tree, fid)
    # bob still reads his own file: nothing was stored.
    assert stream_data(bob, "bobdir/f.txt") == b"bob's data"
    # The owner may change the DACL, and name only himself as owner: not Everyone, although
    # his token carries that group.
    fid = bob.open("bobdir/f.txt", WRITE_DAC | WRITE_OWNER | READ_CONTROL)
    assert bob.set_security(fid, OWNER_INFO, sd_owner(EVERYONE)) == INVALID_OWNER
    bob_sid = sid_bytes(22, 1, os.stat(server.share / "bobdir" / "f.txt").st_uid)
    assert bob.set_security(fid, OWNER_INFO, sd_owner(bob_sid)) == 0
    assert bob.set_security(fid, DACL_INFO, sd_deny_everyone()) == 0
    bob.smb.close(bob.tree, fid)
    assert bob.status("bobdir/f.txt", READ) == ACCESS_DENIED, "bob's own DACL holds"


def test_attributes_and_eas_need_the_owner_or_write_permission(bob_files):
    server, alice, bob = bob_files
    f = server.share / "bobdir" / "f.txt"
    for access in (FILE_WRITE_ATTRIBUTES, FILE_WRITE_EA):
        assert alice.status("bobdir/f.txt", access) == ACCESS_DENIED, hex(access)
    # Where the kernel lets alice write the file (mode 0666), she may set its attributes as
    # on Samba; an explicit time is still the kernel's to refuse (only the owner sets one).
    f.chmod(0o666)
    assert alice.status("bobdir/f.txt", FILE_WRITE_ATTRIBUTES | FILE_WRITE_EA) == 0
    f.chmod(0o444)
    # The owner of a READONLY file (0444) may still clear it: attributes are the owner's.
    assert bob.status("bobdir/f.txt", FILE_WRITE_ATTRIBUTES) == 0
    assert alice.status("bobdir/f.txt", FILE_WRITE_ATTRIBUTES) == ACCESS_DENIED


FSCTL_SRV_REQUEST_RESUME_KEY = 0x00140078
FSCTL_SRV_COPYCHUNK_WRITE = 0x001480F2
FILE_BASIC_INFORMATION, FILE_FULL_EA_INFORMATION, FILE_LINK_INFORMATION = 4, 15, 11


def set_info(client, fid, cls, blob) -> int:
    try:
        client.smb.setInfo(client.tree, fid, inputBlob=blob, infoType=1, fileInfoClass=cls)
    except SessionError as e:
        return e.get_error_code()
    return 0


def ioctl(client, fid, code, blob, out=64 * 1024):
    try:
        return 0, client.smb.ioctl(client.tree, fid, code, flags=1, inputBlob=blob,
                                   maxOutputResponse=out)
    except SessionError as e:
        return e.get_error_code(), b""


def test_every_other_change_as_root_is_the_kernels_to_allow(bob_files):
    """The per-user paths whose change smbq makes with the server's uid, or through a handle
    it granted: with everything MAXIMUM_ALLOWED gives alice on bob's 0644 file, each is
    refused, and the file, its EAs and its attributes stay as bob left them."""
    server, alice, bob = bob_files
    f = server.share / "bobdir" / "f.txt"
    before = (f.read_bytes(), sorted(os.listxattr(f)), f.stat().st_mtime_ns)
    fid = alice.open("bobdir/f.txt", MAXIMUM_ALLOWED)
    # DOS attributes and times (FILE_BASIC_INFORMATION: HIDDEN, and a LastWriteTime).
    basic = struct.pack("<qqqqII", 0, 0, 0, 0, 0x2, 0)
    assert set_info(alice, fid, FILE_BASIC_INFORMATION, basic) == ACCESS_DENIED
    basic = struct.pack("<qqqqII", 0, 0, 132_000_000_000_000_000, 0, 0, 0)
    assert set_info(alice, fid, FILE_BASIC_INFORMATION, basic) == ACCESS_DENIED
    # An EA (FILE_FULL_EA_INFORMATION).
    ea = struct.pack("<IBBH", 0, 0, 3, 2) + b"EVL\x00hi"
    assert set_info(alice, fid, FILE_FULL_EA_INFORMATION, ea) == ACCESS_DENIED
    # Server-side copy into bob's file from alice's own (copychunk's target needs write).
    src = alice.open("mine.txt", s3.FILE_READ_DATA | s3.FILE_WRITE_DATA, s3.FILE_CREATE)
    assert alice.write(src, b"alice's bytes") == 0
    status, key = ioctl(alice, src, FSCTL_SRV_REQUEST_RESUME_KEY, b"", 32)
    assert status == 0, hex(status)
    chunk = struct.pack("<QQII", 0, 0, 13, 0)
    status, _ = ioctl(alice, fid, FSCTL_SRV_COPYCHUNK_WRITE,
                      key[:24] + struct.pack("<II", 1, 0) + chunk)
    assert status == ACCESS_DENIED, hex(status)
    # A hard link is not offered at all.
    name = "bobdir/link.txt".encode("utf-16-le")
    link = struct.pack("<B7xQI", 0, 0, len(name)) + name
    assert set_info(alice, fid, FILE_LINK_INFORMATION, link) == NOT_SUPPORTED
    alice.smb.close(alice.tree, fid)
    alice.smb.close(alice.tree, src)
    assert (f.read_bytes(), sorted(os.listxattr(f)), f.stat().st_mtime_ns) == before
    # A rename into bob's directory is the kernel's to refuse (alice may not write there).
    from impacket.smbconnection import SessionError as ConnError
    with pytest.raises(ConnError) as refused:
        alice.conn.rename("share", "mine.txt", "bobdir\\mine.txt")
    assert refused.value.getErrorCode() == ACCESS_DENIED
    assert not (server.share / "bobdir" / "mine.txt").exists()
    assert (server.share / "mine.txt").exists()
