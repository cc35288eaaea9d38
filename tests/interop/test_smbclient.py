"""Samba smbclient 4.17 against the real smbq binary: listing, the file operations a user
does, a large round trip, under each cipher, signing algorithm and dialect; and the error
cases. Output is checked for NT_STATUS_ strings, not only exit codes."""

import hashlib
import re
import time
import os
import pathlib

import pytest

from smbclient import run

BIG_MB = int(os.environ.get("SMBQ_BIG_FILE_MB", "1024"))

# (id, extra smbclient arguments). Each must negotiate what it names: the server logs every
# session's dialect, signing algorithm and cipher, and per connection how many frames arrived
# encrypted; EXPECT lists what that log must show for the profile.
PROFILES = [
    ("default", []),
    ("enc-aes128ccm", ["--client-protection=encrypt", "--option=client smb3 encryption algorithms=AES-128-CCM"]),
    ("enc-aes128gcm", ["--client-protection=encrypt", "--option=client smb3 encryption algorithms=AES-128-GCM"]),
    ("enc-aes256ccm", ["--client-protection=encrypt", "--option=client smb3 encryption algorithms=AES-256-CCM"]),
    ("enc-aes256gcm", ["--client-protection=encrypt", "--option=client smb3 encryption algorithms=AES-256-GCM"]),
    ("sign-hmacsha256", ["--client-protection=sign", "--option=client smb3 signing algorithms=HMAC-SHA256"]),
    ("sign-aes128cmac", ["--client-protection=sign", "--option=client smb3 signing algorithms=AES-128-CMAC"]),
    ("sign-aes128gmac", ["--client-protection=sign", "--option=client smb3 signing algorithms=AES-128-GMAC"]),
    ("smb2_02", ["-m", "SMB2_02"]),
    ("smb2_10", ["-m", "SMB2_10"]),
    ("smb3_00", ["-m", "SMB3_00"]),
]


EXPECT = {
    "default": ["dialect=3.1.1 "],
    "enc-aes128ccm": ["dialect=3.1.1 ", "cipher=AES-128-CCM ", "encrypted>0"],
    "enc-aes128gcm": ["dialect=3.1.1 ", "cipher=AES-128-GCM ", "encrypted>0"],
    "enc-aes256ccm": ["dialect=3.1.1 ", "cipher=AES-256-CCM ", "encrypted>0"],
    "enc-aes256gcm": ["dialect=3.1.1 ", "cipher=AES-256-GCM ", "encrypted>0"],
    "sign-hmacsha256": ["dialect=3.1.1 ", "signing=HMAC-SHA256 "],
    "sign-aes128cmac": ["dialect=3.1.1 ", "signing=AES-128-CMAC "],
    "sign-aes128gmac": ["dialect=3.1.1 ", "signing=AES-128-GMAC "],
    "smb2_02": ["dialect=2.0.2 ", "signing=HMAC-SHA256 "],
    "smb2_10": ["dialect=2.1 ", "signing=HMAC-SHA256 "],
    "smb3_00": ["dialect=3.0 ", "signing=AES-128-CMAC "],
}


def check_negotiated(server, profile_id: str):
    """The server log shows the profile's dialect/signing/cipher on a session, and for the
    encryption profiles that frames really arrived encrypted."""
    log = server.server_log()
    sessions = [l for l in log.splitlines() if "session established" in l]
    closes = [l for l in log.splitlines() if "connection closed" in l]
    for want in EXPECT[profile_id]:
        if want == "encrypted>0":
            assert any(re.search(r"encrypted=[1-9]", l) for l in closes), closes
        else:
            assert any(want in l for l in sessions), (want, sessions)


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def wait_for_close_log(server, timeout=5.0):
    """smbclient has exited; give the server a moment to log the connection's close."""
    deadline = time.time() + timeout
    while time.time() < deadline and "connection closed" not in server.server_log():
        time.sleep(0.05)


def no_status(out: str):
    assert "NT_STATUS_" not in out, out


def test_list_shares(server):
    rc, out = run(server, list_shares=True, extra=["-g"])
    assert rc == 0, out
    lines = out.splitlines()
    assert any(l.startswith("Disk|share|") for l in lines), out
    assert any(l.startswith("IPC|IPC$|") for l in lines), out


@pytest.mark.parametrize("profile_id,profile", PROFILES, ids=[p[0] for p in PROFILES])
def test_file_operations(server, workdir, profile_id, profile):
    local = workdir / "local"
    local.mkdir()
    src = local / "small.txt"
    src.write_bytes(b"hello smbq\n" * 1000)
    cmd = ("mkdir dir1; put small.txt dir1\\a.txt; ls dir1\\*; allinfo dir1\\a.txt; "
           "rename dir1\\a.txt dir1\\b.txt; get dir1\\b.txt back.txt; ls dir1\\*")
    rc, out = run(server, cmd, extra=profile, cwd=local)
    assert rc == 0, out
    no_status(out)
    assert "b.txt" in out and "create_time:" in out, out
    assert (local / "back.txt").read_bytes() == src.read_bytes()
    assert (server.share / "dir1" / "b.txt").read_bytes() == src.read_bytes()
    rc, out = run(server, "rm dir1\\b.txt; rmdir dir1", extra=profile, cwd=local)
    assert rc == 0, out
    no_status(out)
    assert not (server.share / "dir1").exists()
    wait_for_close_log(server)
    check_negotiated(server, profile_id)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """One BIG_MB file shared by every profile (writing it is slower than sending it)."""
    path = tmp_path_factory.mktemp("big") / "big.bin"
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(BIG_MB):
            # Vary each MiB so misplaced blocks change the hash.
            f.write(i.to_bytes(8, "little") + block[8:])
    return path, sha256(path)


@pytest.mark.parametrize("profile_id,profile", PROFILES, ids=[p[0] for p in PROFILES])
def test_big_file_round_trip(server, workdir, big_file, profile_id, profile):
    src, want = big_file
    local = workdir / "local"
    local.mkdir()
    (local / "big.bin").symlink_to(src)
    rc, out = run(server, "put big.bin; get big.bin big.back", extra=profile, cwd=local, timeout=1800)
    assert rc == 0, out
    no_status(out)
    assert sha256(server.share / "big.bin") == want
    assert sha256(local / "big.back") == want
    wait_for_close_log(server)
    check_negotiated(server, profile_id)


def test_wrong_password(server):
    rc, out = run(server, "ls", password="wrong-password")
    assert rc != 0
    assert "NT_STATUS_LOGON_FAILURE" in out, out


def test_missing_file(server, workdir):
    rc, out = run(server, "get does-not-exist.txt out.txt", cwd=workdir)
    assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in out, out


def test_symlink_outside_share_is_not_followed(server, workdir):
    (server.share / "etc").symlink_to("/etc")
    (server.share / "passwd").symlink_to("/etc/passwd")
    rc, out = run(server, "get etc\\passwd out1", cwd=workdir)
    assert "NT_STATUS_" in out, out
    assert "NT_STATUS_ACCESS_DENIED" in out or "NT_STATUS_OBJECT_PATH_NOT_FOUND" in out \
        or "NT_STATUS_OBJECT_NAME_NOT_FOUND" in out, out
    rc, out = run(server, "get passwd out2", cwd=workdir)
    assert "NT_STATUS_" in out, out
    assert not (workdir / "out1").exists() or (workdir / "out1").stat().st_size == 0
    assert not (workdir / "out2").exists() or (workdir / "out2").stat().st_size == 0
    rc, out = run(server, "ls etc\\*", cwd=workdir)
    assert "passwd" not in out.replace("etc\\passwd", ""), out


def test_dotdot_is_refused(server, workdir):
    rc, out = run(server, "get ..\\..\\etc\\passwd out", cwd=workdir)
    assert "NT_STATUS_" in out, out
    assert not (workdir / "out").exists() or (workdir / "out").stat().st_size == 0
