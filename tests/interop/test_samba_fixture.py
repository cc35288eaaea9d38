"""The private Samba smbd fixture (samba_server.py) that smbq's client is tested against: it
serves a read-write share to its own user, really enforces `server smb encrypt = required`,
rejects a wrong password, and leaves no process behind.

Encryption is proven two independent ways:
- server side, `smbstatus --json` on the private config reports each session's and tree
  connect's encryption cipher and degree. Samba's own session table is the authority on what
  it enforces, and with degree "full" smbd refuses any unencrypted request on the session;
- on the wire, a recording relay between smbclient and smbd shows that after NEGOTIATE and
  SESSION_SETUP only SMB2 TRANSFORM frames flow and the file's bytes never appear in clear.
Both are also run against `server smb encrypt = off`, where they must report the opposite, so
neither check can pass vacuously. (A tshark capture would prove the same as the relay but needs
capture privileges and a race against capture start-up; the relay has neither.)"""

import contextlib
import os
import pathlib
import pwd
import secrets
import subprocess

import pytest

from samba_server import RecordingProxy, SambaServer, split_frames

SMB2_PLAIN = b"\xfeSMB"
SMB2_TRANSFORM = b"\xfdSMB"
NEGOTIATE, SESSION_SETUP, TREE_CONNECT = 0, 1, 3


def smbclient(samba, command, *extra, password=None, port=None, cwd=None, timeout=120):
    args = samba.smbclient_args(password=password)
    if port is not None:
        args[args.index("-p") + 1] = str(port)
    p = subprocess.run(args + list(extra) + ["-c", command], capture_output=True, text=True,
                       timeout=timeout, cwd=cwd)
    return p.returncode, p.stdout + p.stderr


@contextlib.contextmanager
def held_session(samba, *extra):
    """An smbclient connected to the share that stays connected until the block ends, so
    smbstatus can see its session and tree connect."""
    p = subprocess.Popen(samba.smbclient_args() + list(extra), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = ""
    try:
        p.stdin.write("ls\n")
        p.stdin.flush()
        yield p
    finally:
        try:
            out, _ = p.communicate("quit\n", timeout=30)
        except (BrokenPipeError, ValueError):
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
    # Reached only when the block succeeded, so a failure inside it is not masked.
    assert p.returncode == 0, out


def test_put_ls_get_round_trip(samba, tmp_path):
    data = secrets.token_bytes(300_000) + b"\x00" * 4096 + secrets.token_bytes(777)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    rc, out = smbclient(samba, "put src.bin remote.bin; ls; get remote.bin back.bin", "-m", "SMB3",
                        cwd=tmp_path)
    assert rc == 0 and "NT_STATUS_" not in out, out
    assert "remote.bin" in out, out
    assert (tmp_path / "back.bin").read_bytes() == data
    # The write went through smbd into the share directory, as the share user.
    stored = samba.share_path / "remote.bin"
    assert stored.read_bytes() == data
    assert stored.stat().st_uid == pwd.getpwnam(samba.user).pw_uid


@pytest.mark.parametrize("client_protection", [None, "encrypt", "off"])
def test_required_encryption_is_enforced_on_every_session(samba, client_protection):
    # Samba forces encryption (SMB2_SESSION_FLAG_ENCRYPT_DATA) even when the client does not
    # ask for it, or asks for none.
    extra = ["-m", "SMB3"]
    if client_protection:
        extra.append(f"--client-protection={client_protection}")
    with held_session(samba, *extra):
        [session] = samba.wait_sessions()
        status = samba.smbstatus_json()
    assert session["session_dialect"].startswith("SMB3"), session
    assert session["encryption"]["degree"] == "full", session
    assert session["encryption"]["cipher"].startswith("AES-"), session
    tcons = [t for t in status["tcons"].values() if t["session_id"] == session["session_id"]]
    assert [t["service"] for t in tcons] == [samba.share_name], status
    assert all(t["encryption"]["degree"] == "full" for t in tcons), status


@pytest.mark.parametrize("samba", [{"encrypt": "off"}], indirect=True)
def test_smbstatus_reports_no_encryption_when_off(samba):
    with held_session(samba, "-m", "SMB3"):
        [session] = samba.wait_sessions()
    assert session["encryption"]["degree"] == "none", session


def test_required_encryption_refuses_a_dialect_without_encryption(samba):
    # SMB 2.1 has no encryption, so a session under `required` is refused (MS-SMB2 3.3.5.5.3).
    rc, out = smbclient(samba, "ls", "-m", "SMB2_10")
    assert rc != 0 and "NT_STATUS_ACCESS_DENIED" in out, out


@pytest.mark.parametrize("samba", [{"encrypt": "off"}], indirect=True)
def test_smb2_10_works_when_encryption_is_off(samba):
    rc, out = smbclient(samba, "ls", "-m", "SMB2_10")
    assert rc == 0 and "NT_STATUS_" not in out, out


def wire_summary(samba, tmp_path, payload):
    """Run put+get through a recording relay; return both raw streams and their frames."""
    (tmp_path / "p.bin").write_bytes(payload)
    proxy = RecordingProxy(samba.port)
    try:
        rc, out = smbclient(samba, "put p.bin p.bin; get p.bin q.bin", "-m", "SMB3",
                            port=proxy.port, cwd=tmp_path)
    finally:
        proxy.stop()
    assert rc == 0 and "NT_STATUS_" not in out, out
    assert (tmp_path / "q.bin").read_bytes() == payload
    [(c2s, s2c)] = proxy.connections
    return c2s, s2c, split_frames(c2s), split_frames(s2c)


def plain_commands(frames):
    return [int.from_bytes(f[12:14], "little") for f in frames if f[:4] == SMB2_PLAIN]


def test_wire_carries_only_transform_frames_after_session_setup(samba, tmp_path):
    payload = secrets.token_bytes(64 * 1024)
    c2s, s2c, cf, sf = wire_summary(samba, tmp_path, payload)
    for frames in (cf, sf):
        assert frames and all(f[:4] in (SMB2_PLAIN, SMB2_TRANSFORM) for f in frames)
        assert set(plain_commands(frames)) <= {NEGOTIATE, SESSION_SETUP}, plain_commands(frames)
        # TREE_CONNECT, CREATE, WRITE, READ, CLOSE, ... all sealed.
        assert sum(f[:4] == SMB2_TRANSFORM for f in frames) >= 5
    probe = payload[1000:1032]
    assert probe not in c2s and probe not in s2c


@pytest.mark.parametrize("samba", [{"encrypt": "off"}], indirect=True)
def test_wire_is_plain_when_encryption_is_off(samba, tmp_path):
    payload = secrets.token_bytes(64 * 1024)
    c2s, s2c, cf, sf = wire_summary(samba, tmp_path, payload)
    assert not any(f[:4] == SMB2_TRANSFORM for f in cf + sf)
    assert TREE_CONNECT in plain_commands(cf)
    probe = payload[1000:1032]
    assert probe in c2s and probe in s2c


def test_wrong_password_is_logon_failure(samba):
    rc, out = smbclient(samba, "ls", "-m", "SMB3", password=samba.password + "x")
    assert rc != 0 and "NT_STATUS_LOGON_FAILURE" in out, out
    rc, out = smbclient(samba, "ls", "-m", "SMB3")
    assert rc == 0, out


def test_two_servers_side_by_side_share_the_user_not_the_password(tmp_path):
    # The Unix user already exists for the second instance (idempotent setup); each instance has
    # its own passdb, port and share.
    a = SambaServer(tmp_path / "a")
    try:
        b = SambaServer(tmp_path / "b")
        try:
            assert a.port != b.port and a.user == b.user and a.password != b.password
            (a.share_path / "only-in-a").write_bytes(b"a")
            rc, out = smbclient(b, "ls")
            assert rc == 0 and "only-in-a" not in out, out
            rc, out = smbclient(a, "ls")
            assert rc == 0 and "only-in-a" in out, out
            rc, out = smbclient(b, "ls", password=a.password)
            assert "NT_STATUS_LOGON_FAILURE" in out, out
        finally:
            b.stop()
    finally:
        a.stop()


def live_pids_using(conf: pathlib.Path):
    """Processes (not zombies) whose command line names `conf`."""
    needle = str(conf).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle not in f.read():
                        continue
                with open(f"/proc/{entry}/status") as f:
                    state = next(line for line in f if line.startswith("State:"))
            except (OSError, StopIteration):
                continue
            if "zombie" not in state and "dead" not in state:
                pids.append(int(entry))
    return pids


def test_stop_ends_smbd_and_every_helper(tmp_path):
    s = SambaServer(tmp_path)
    try:
        # Listing shares goes through IPC$/srvsvc, which makes smbd spawn samba-dcerpcd and
        # rpcd_* helpers; samba-dcerpcd leaves smbd's process group.
        p = subprocess.run(["smbclient", "-s", "/dev/null", "-L", s.host, "-p", str(s.port),
                            "-U", f"{s.user}%{s.password}"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0 and s.share_name in p.stdout, p.stdout + p.stderr
        live = live_pids_using(s.conf_path)
        assert s.proc.pid in live
        assert any(os.getpgid(pid) != s.proc.pid for pid in live), live  # outside the group
        assert "smbd version 4." in s.server_log()
    finally:
        s.stop()
    assert live_pids_using(s.conf_path) == []
    rc, out = smbclient(s, "ls", timeout=30)
    assert "NT_STATUS_CONNECTION_REFUSED" in out, out
    assert s.stop() == s.proc.returncode  # idempotent


def test_private_tempdir_is_removed_when_owned():
    s = SambaServer()
    base = s.base
    assert base.exists() and s.conf_path.read_text().count(str(base)) >= 10
    s.stop()
    assert not base.parent.exists()
