"""Per-user Unix identities (unix_identity = "per-user"): the server runs as root, and every
file system operation of a session runs as its account's Unix user, so files belong to their
creator and the kernel's permissions hold through SMB. The test makes its own Unix users."""

import os
import pathlib
import pwd
import secrets
import struct
import subprocess
import tempfile
import threading

import pytest

import smbclient
from conftest import BINARY, USER, SmbqServer, free_port, unix_user

UNIX_USERS = ("smbq-id-a", "smbq-id-b")


@pytest.fixture(scope="module")
def unix_users():
    if os.geteuid() != 0:
        pytest.fail("per-user identities need root; scripts/test.sh runs as root")
    return {u: unix_user(u) for u in UNIX_USERS}


def add_account(state, name, password, unix_user=None):
    args = [str(BINARY), "user", "add", name, "--state-dir", str(state)]
    if unix_user:
        args += ["--unix-user", unix_user]
    p = subprocess.run(args, input=password + "\n", capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def identity_server(workdir, extra_config=""):
    """alice acts as smbq-id-a, bob as smbq-id-b; tester (the fixture's account) has no
    Unix user of its name. The share is world-writable so both users can create in it."""
    state = workdir / "state"
    password = "Pw-" + secrets.token_hex(6)
    for name, unix in (("alice", UNIX_USERS[0]), ("bob", UNIX_USERS[1]), (USER, None)):
        add_account(state, name, password, unix)
    share = workdir / "share"
    share.mkdir(parents=True, exist_ok=True)
    share.chmod(0o777)
    server = SmbqServer(workdir, config=f'unix_identity = "per-user"\n{extra_config}',
                        password=password)
    return server


def owner(path):
    return pwd.getpwuid(path.stat().st_uid).pw_name


def test_files_belong_to_their_creator_and_permissions_hold(workdir, unix_users):
    server = identity_server(workdir)
    try:
        src = workdir / "src.txt"
        src.write_text("secret of a\n")
        rc, out = smbclient.run(server, f"put {src} a.txt; mkdir adir", user="alice")
        assert rc == 0, out
        rc, out = smbclient.run(server, f"put {src} b.txt", user="bob")
        assert rc == 0, out
        assert owner(server.share / "a.txt") == UNIX_USERS[0]
        assert owner(server.share / "adir") == UNIX_USERS[0]
        assert owner(server.share / "b.txt") == UNIX_USERS[1]
        # a's file mode 0600: b cannot read it through smbq although the server is root.
        (server.share / "a.txt").chmod(0o600)
        rc, out = smbclient.run(server, f"get a.txt {workdir / 'stolen'}", user="bob")
        assert rc != 0 and "NT_STATUS_ACCESS_DENIED" in out, out
        assert not (workdir / "stolen").exists()
        rc, out = smbclient.run(server, f"get a.txt {workdir / 'mine'}", user="alice")
        assert rc == 0, out
        assert (workdir / "mine").read_text() == "secret of a\n"
        # Stream data is written with the server's uid (xattrs), yet only as far as the user
        # may write the file itself. b.txt's mode says anyone may write it (so does the
        # descriptor smbq derives from it), but a POSIX ACL entry keeps a to reading: a gets
        # neither its data nor a stream on it.
        (server.share / "b.txt").chmod(0o666)
        subprocess.run(["setfacl", "-m", f"u:{UNIX_USERS[0]}:r--", str(server.share / "b.txt")],
                       check=True, timeout=30)
        rc, out = smbclient.run(server, f"put {src} b.txt", user="alice")
        assert "NT_STATUS_ACCESS_DENIED" in out, out
        rc, out = smbclient.run(server, f"put {src} b.txt:evil", user="alice")
        assert "NT_STATUS_ACCESS_DENIED" in out, out
        assert not any("evil" in n for n in os.listxattr(server.share / "b.txt")), \
            os.listxattr(server.share / "b.txt")
        rc, out = smbclient.run(server, f"put {src} b.txt:own", user="bob")
        assert rc == 0 and "NT_STATUS" not in out, out
        # Nor delete it: the directory is a's own (0755).
        (server.share / "adir" / "keep").write_text("x")
        os.chown(server.share / "adir" / "keep", unix_users[UNIX_USERS[0]].pw_uid, -1)
        # (smbclient's rm reports the refusal but exits 0.)
        rc, out = smbclient.run(server, "rm adir/keep", user="bob")
        assert "NT_STATUS_ACCESS_DENIED" in out, out
        assert (server.share / "adir" / "keep").exists()
        # An account whose Unix user does not exist gets nothing, not root's rights.
        rc, out = smbclient.run(server, "ls", user=USER)
        assert rc != 0 and "NT_STATUS_ACCESS_DENIED" in out, out
    finally:
        assert server.stop() == 0, server.server_log()


def test_concurrent_users_never_borrow_each_others_identity(workdir, unix_users):
    server = identity_server(workdir)
    try:
        src = workdir / "f.bin"
        src.write_bytes(os.urandom(64 * 1024))
        results = {}

        def hammer(user, prefix):
            # Two connections one after the other per thread, four threads at once: sessions
            # of both users share tokio's blocking threads all along.
            for round_ in range(2):
                cmds = "; ".join(f"put {src} {prefix}{round_}-{i}.bin" for i in range(40))
                results[(prefix, round_)] = smbclient.run(server, cmds, user=user)

        threads = [threading.Thread(target=hammer, args=(u, p))
                   for u, p in (("alice", "a"), ("bob", "b"), ("alice", "c"), ("bob", "d"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        for key, (rc, out) in results.items():
            assert rc == 0, (key, out)
        files = sorted(server.share.glob("*.bin"))
        assert len(files) == 4 * 2 * 40, len(files)
        for f in files:
            want = UNIX_USERS[0] if f.name[0] in "ac" else UNIX_USERS[1]
            assert owner(f) == want, f
    finally:
        assert server.stop() == 0, server.server_log()


def test_a_share_can_opt_out_and_root_is_required(workdir, unix_users):
    public = workdir / "public"
    public.mkdir()
    server = identity_server(
        workdir, f'[share.public]\npath = "{public}"\nunix_identity = "off"\n')
    try:
        src = workdir / "p.txt"
        src.write_text("p")
        rc, out = smbclient.run(server, f"put {src} p.txt", user="bob", share="public")
        assert rc == 0, out
        assert (public / "p.txt").stat().st_uid == 0, "an opted-out share acts as the server"
    finally:
        assert server.stop() == 0, server.server_log()
    # Without root the mode is refused at start, with the reason.
    with tempfile.TemporaryDirectory(prefix="smbq-nobody-") as d:
        os.chmod(d, 0o777)
        conf = pathlib.Path(d) / "smbq.toml"
        conf.write_text('unix_identity = "per-user"\n')
        p = subprocess.run(["runuser", "-u", "nobody", "--", str(BINARY), "serve",
                            f"{d}/share", "--state-dir", f"{d}/state", "--tcp-port", str(free_port()),
                            "--quic-port", "0", "--config", str(conf)],
                           capture_output=True, text=True, timeout=30,
                           env={**os.environ, "SMBQ_PASSWORD": "x"}, cwd=d)
    assert p.returncode != 0 and "needs the server to run as root" in p.stderr, p.stderr


# --- CHANGE_NOTIFY (impacket has the structures, not the call) --------------------------------

def impacket_session(server, user):
    from impacket.smbconnection import SMBConnection
    c = SMBConnection("127.0.0.1", "127.0.0.1", sess_port=server.port, timeout=15)
    c.login(user, server.password)
    return c, c.getSMBServer(), c.connectTree("share")


def send_tree_notify(s, tree, fid):
    """A CHANGE_NOTIFY with WATCH_TREE for names; returns its MessageId."""
    from impacket import smb3structs as s3
    p = s.SMB_PACKET()
    p["Command"] = s3.SMB2_CHANGE_NOTIFY
    p["TreeID"] = tree
    req = s3.SMB2ChangeNotify()
    req["Flags"] = 1  # SMB2_WATCH_TREE
    req["OutputBufferLength"] = 4096
    req["FileID"] = fid
    req["CompletionFilter"] = s3.FILE_NOTIFY_CHANGE_FILE_NAME | s3.FILE_NOTIFY_CHANGE_DIR_NAME
    p["Data"] = req
    return s.sendSMB(p)


def notify_names(s, mid):
    """The names of the FILE_NOTIFY_INFORMATION entries answering request `mid`."""
    ans = s.recvSMB(mid)
    assert ans["Status"] == 0, hex(ans["Status"])
    data = ans["Data"]
    offset, length = struct.unpack_from("<HI", data, 2)
    buf = data[offset - 64:offset - 64 + length]
    names, at = [], 0
    while True:
        nxt, _action, n = struct.unpack_from("<III", buf, at)
        names.append(buf[at + 12:at + 12 + n].decode("utf-16le"))
        if nxt == 0:
            return names
        at += nxt


def test_a_tree_watch_reports_no_name_from_a_directory_the_watcher_may_not_list(
        workdir, unix_users):
    """Issue 42: bob's 0700 directory is closed to alice's listing, and so to her WATCH_TREE
    watch on the share root: bob's new file there never reaches her, while a file he makes in
    his 0755 directory does."""
    from impacket import smb3structs as s3
    from impacket.smbconnection import SessionError
    server = identity_server(workdir)
    try:
        bob = unix_users[UNIX_USERS[1]]
        for name, mode in (("bobprivate", 0o700), ("pub", 0o755)):
            d = server.share / name
            d.mkdir()
            os.chown(d, bob.pw_uid, bob.pw_gid)
            d.chmod(mode)
        ac, a, at = impacket_session(server, "alice")
        with pytest.raises(SessionError) as denied:
            ac.listPath("share", "bobprivate\\*")
        assert denied.value.getErrorCode() == 0xC0000022, denied.value  # ACCESS_DENIED
        root = a.create(at, "", s3.FILE_LIST_DIRECTORY | s3.SYNCHRONIZE, 7,
                        s3.FILE_DIRECTORY_FILE, s3.FILE_OPEN, 0)
        mid = send_tree_notify(a, at, root)
        _, b, bt = impacket_session(server, "bob")
        for path in ("bobprivate\\salary-2027-layoff-list.xlsx", "pub\\visible.txt",
                     "marker.txt"):
            f = b.create(bt, path, s3.FILE_WRITE_DATA, 7, s3.FILE_NON_DIRECTORY_FILE,
                         s3.FILE_CREATE, 0x80)
            b.close(bt, f)
        assert (server.share / "bobprivate" / "salary-2027-layoff-list.xlsx").exists()
        seen = []
        for _ in range(4):
            seen += notify_names(a, mid)
            if "marker.txt" in seen:
                break
            mid = send_tree_notify(a, at, root)
        assert "marker.txt" in seen, seen
        assert "pub\\visible.txt" in seen, seen
        assert not any("salary" in n or "bobprivate\\" in n for n in seen), seen
    finally:
        assert server.stop() == 0, server.server_log()
