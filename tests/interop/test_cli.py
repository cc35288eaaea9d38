"""The account commands from the CLI contract, end to end: add (password from stdin), list,
del; the database stays mode 0600 and never holds the password; a new user can log on."""

import os
import stat
import subprocess

from conftest import BINARY
from smbclient import run


def smbq(*args, stdin=""):
    return subprocess.run([str(BINARY), *args], input=stdin, capture_output=True, text=True, timeout=30)


def test_user_add_list_del(server):
    users = server.state / "users"
    p = smbq("user", "add", "alice", "--users", str(users), stdin="Al1ce-pw\n")
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(users).st_mode) == 0o600
    assert "Al1ce-pw" not in users.read_text()
    p = smbq("user", "list", "--users", str(users))
    assert p.returncode == 0 and {"alice", "tester"} <= set(p.stdout.split()), p.stdout

    # The running server reads the database at start; a fresh one sees alice.
    server.stop()
    from conftest import SmbqServer
    s2 = SmbqServer(server.workdir)
    try:
        rc, out = run(s2, "ls", user="alice", password="Al1ce-pw")
        assert rc == 0 and "NT_STATUS_" not in out, out
        rc, out = run(s2, "ls", user="alice", password="wrong")
        assert "NT_STATUS_LOGON_FAILURE" in out, out
    finally:
        s2.stop()

    p = smbq("user", "del", "alice", "--users", str(users))
    assert p.returncode == 0, p.stderr
    p = smbq("user", "list", "--users", str(users))
    assert "alice" not in p.stdout.split()
    p = smbq("user", "del", "alice", "--users", str(users))
    assert p.returncode != 0 and "no user alice" in p.stderr


def test_bad_arguments_give_one_clear_line():
    p = smbq("serve", "--share", "nodir", "--tcp-port", "0", "--quic-port", "0")
    assert p.returncode != 0
    assert p.stderr.strip().startswith("smbq:"), p.stderr
