"""`smbq status` against the real binary (issue 17): what live clients hold shows up through the
admin socket, goes away when they leave, and only the server's user (or root) may ask."""

import json
import os
import shutil
import struct
import subprocess
import time

from conftest import BINARY, USER


def status(server, *extra, user=None):
    args = [str(BINARY), "status", "--state-dir", str(server.state), *extra]
    if user is not None:
        args = ["runuser", "-u", user, "--", *args]
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


def snapshot(server):
    p = status(server, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def wait_for(server, pred, what, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        s = snapshot(server)
        if pred(s):
            return s
        if time.time() > deadline:
            raise AssertionError(f"{what} not seen in {json.dumps(s, indent=1)}")
        time.sleep(0.1)


class HeldSmbclient:
    """smbclient reading commands from a pipe, so it keeps its session and opens until told."""

    def __init__(self, server, share="share"):
        self.p = subprocess.Popen(
            ["smbclient", "-s", "/dev/null", "-p", str(server.port),
             "-U", f"{USER}%{server.password}", f"//127.0.0.1/{share}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def send(self, line):
        try:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise AssertionError(f"smbclient exited early: {self.p.stdout.read()}")

    def quit(self):
        if self.p.stdin.closed:
            return ""
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.stdout.read()


def impacket_lock(server, name, offset, length):
    """An impacket connection holding `name` open with an exclusive byte-range lock (impacket's
    own lock() helper is broken on Python 3, so the LOCK request is built here)."""
    from impacket import smb3structs as s3
    from impacket.smbconnection import SMBConnection
    c = SMBConnection("127.0.0.1", "127.0.0.1", sess_port=server.port)
    c.login(USER, server.password)
    smb = c.getSMBServer()
    tid = c.connectTree("share")
    fid = smb.create(tid, name, s3.FILE_READ_DATA | s3.FILE_WRITE_DATA, 7, 0, s3.FILE_OPEN, 0x80)
    packet = smb.SMB_PACKET()
    packet["Command"] = s3.SMB2_LOCK
    packet["TreeID"] = tid
    req = s3.SMB2Lock()
    req["FileID"] = fid
    req["LockCount"] = 1
    req["LockSequence"] = 0
    exclusive_fail_immediately = 0x02 | 0x10
    req["Locks"] = struct.pack("<QQII", offset, length, exclusive_fail_immediately, 0)
    packet["Data"] = req
    ans = smb.recvSMB(smb.sendSMB(packet))
    assert ans.isValidAnswer(0), hex(ans["Status"])
    return c


def test_status_lists_a_live_smbclient_session_and_forgets_it_after_disconnect(server):
    (server.share / "held.txt").write_bytes(b"hello world")
    (server.share / "watched").mkdir()
    held = HeldSmbclient(server)
    notifier = HeldSmbclient(server)
    try:
        held.send("open held.txt")
        notifier.send("notify watched")
        s = wait_for(server, lambda s: any(o["path"] == "held.txt" for o in s["opens"])
                     and s["notifies"], "smbclient's open and notify")
        users = {x["user"] for x in s["sessions"]}
        assert users == {USER}, s["sessions"]
        assert len(s["sessions"]) == 2
        for x in s["sessions"]:
            # smbclient asks for multichannel: AES-CMAC before AES-GMAC (issue 42).
            assert x["signing"] == "AES-128-CMAC" and x["dialect"] == "3.1.1", x
            assert len(x["connections"]) == 1
        conns = {c["id"]: c for c in s["connections"]}
        assert all(c["transport"] == "tcp" and c["peer"].startswith("127.0.0.1:")
                   and c["bytes_in"] > 0 and c["bytes_out"] > 0 for c in conns.values()), conns
        assert {t["share"] for t in s["trees"]} == {"share"}
        assert len(s["trees"]) == 2
        o = next(o for o in s["opens"] if o["path"] == "held.txt")
        assert o["user"] == USER and o["share"] == "share" and o["kind"] == "file"
        assert o["session_id"] in {x["id"] for x in s["sessions"]}
        n = s["notifies"][0]
        assert n["path"] == "watched" and n["waiting"] == 1 and n["recursive"], n

        # A byte-range lock from a second client.
        locker = impacket_lock(server, "held.txt", 4, 3)
        s = wait_for(server, lambda s: s["locks"], "the lock")
        lock = s["locks"][0]
        assert (lock["path"], lock["offset"], lock["length"], lock["exclusive"]) == \
            ("held.txt", 4, 3, True)
        assert len(s["sessions"]) == 3

        # The human table names the same things.
        table = status(server)
        assert table.returncode == 0, table.stderr
        for word in ("CONNECTIONS (3)", "SESSIONS (3)", "OPEN FILES", "held.txt",
                     "BYTE-RANGE LOCKS (1)", "CHANGE NOTIFICATIONS (1)", "exclusive", "watched"):
            assert word in table.stdout, table.stdout
        locker.close()
    finally:
        held.quit()
        notifier.quit()
    s = wait_for(server, lambda s: not s["connections"] and not s["sessions"] and not s["opens"]
                 and not s["locks"] and not s["notifies"] and not s["trees"],
                 "everything gone after the clients left")


def test_close_file_and_kill_session(server):
    (server.share / "f.txt").write_bytes(b"data")
    held = HeldSmbclient(server)
    try:
        held.send("open f.txt")
        s = wait_for(server, lambda s: s["opens"], "the open")
        open_id = s["opens"][0]["id"]
        p = status(server, "--close-file", str(open_id))
        assert p.returncode == 0, p.stderr
        assert "closed" in p.stderr
        assert not snapshot(server)["opens"]
        p = status(server, "--close-file", str(open_id))
        assert p.returncode != 0 and "no open" in p.stderr, p.stderr

        sid = s["sessions"][0]["id"]
        p = status(server, "--kill-session", str(sid))
        assert p.returncode == 0, p.stderr
        assert not snapshot(server)["sessions"]
        # The client's next request on the ended session is refused; it sees an error.
        held.send("ls")
    finally:
        out = held.quit()
    assert "NT_STATUS_USER_SESSION_DELETED listing" in out, out
    log = server.server_log()
    assert "admin: close file" in log and "admin: kill session" in log, log


def test_admin_socket_refuses_another_user(server):
    sock = server.state / "admin.sock"
    assert (sock.stat().st_mode & 0o777) == 0o600
    assert shutil.which("runuser"), "util-linux runuser"
    # The file's mode keeps another user out...
    p = status(server, "--json", user="nobody")
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr
    # ...and so does the server's own check when the mode is loosened by mistake.
    for d in (server.workdir, server.state):
        os.chmod(d, 0o755)
    os.chmod(sock, 0o666)
    p = status(server, "--json", user="nobody")
    assert p.returncode != 0 and "only the server's user or root" in p.stderr, p.stderr
    assert "refused a client of another user" in server.server_log()
    # The owner still gets an answer.
    assert snapshot(server)["server"]["pid"] == server.proc.pid


def test_a_second_server_on_the_same_state_dir_does_not_take_the_socket(server):
    from conftest import free_port
    p = subprocess.run(
        [str(BINARY), "serve", str(server.share), "--listen", "127.0.0.1",
         "--tcp-port", str(free_port()), "--quic-port", "0", "--state-dir", str(server.state)],
        capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "another smbq server answers" in p.stderr, p.stderr
    assert snapshot(server)["server"]["pid"] == server.proc.pid


def test_admin_socket_survives_silent_and_oversized_clients(server):
    """Clients of the admin socket that send nothing, or too much, hold at most the 4 slots for
    the 5 s request deadline; an oversized request gets an error, and a real request is answered
    afterwards."""
    import socket
    import time
    path = str(server.state / "admin.sock")
    silent = []
    for _ in range(6):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        silent.append(s)
    big = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    big.connect(path)
    big.settimeout(30)
    big.sendall(b"x" * 8192)
    t0 = time.monotonic()
    reply = big.makefile("rb").readline()
    assert b"at most 4096 bytes" in reply, reply
    p = status(server, "--json")
    assert p.returncode == 0, p.stderr
    # The silent ones were dropped at their deadline, not kept.
    assert time.monotonic() - t0 < 25
    for s in silent:
        s.settimeout(10)
        assert b"expected one JSON request line" in s.makefile("rb").readline()
        s.close()
    big.close()
