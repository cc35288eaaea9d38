"""The SMB3 POSIX extensions (issue 41, first part; docs/posix.md) with Samba 4.25's own
clients from Debian unstable (tests/interop/samba_unstable.py): smbtorture's
libsmbclient.posix_* tests, which check that the negotiate context is answered exactly and
that FILE_POSIX_INFORMATION reports the link count, and smbclient's `posix` mode (every
CREATE carries the POSIX create context) over TCP and QUIC."""

import os
import pathlib
import shutil
import stat

import pytest

from conftest import USER, SmbqServer, free_udp_port
from samba_unstable import HOST
from test_unix_identity import UNIX_USERS, identity_server, unix_users  # noqa: F401

# The extensions are on by default; hard links are not (refuse_hardlinks).
CONFIG = "refuse_hardlinks = false\n"


@pytest.mark.parametrize("name", ["libsmbclient.posix_extensions", "libsmbclient.posix_hardlinks"])
def test_smbtorture_posix(workdir, unstable, name):
    server = SmbqServer(workdir, config=CONFIG)
    try:
        # Samba's selftest share: one file and two hard links to it (nlink 3).
        original = server.share / "posix_test_original.txt"
        original.write_text("posix\n")
        for n in (1, 2):
            os.link(original, server.share / f"posix_test_hardlink{n}.txt")
        url = f"smb://{USER}:{server.password}@{HOST}:{server.port}/share"
        p = unstable.run(["smbtorture", "-s", "/dev/null", f"//{HOST}/share",
                          f"--option=client smb transports=tcp:{server.port}",
                          "-U", f"{USER}%{server.password}", "--fullname",
                          "--format=subunit", f"--option=torture:smburl={url}", name],
                         timeout=120)
    finally:
        rc = server.stop()
    out = p.stdout + p.stderr
    log = server.server_log()
    assert "panicked" not in log, log
    assert f"success: {name}" in out, f"{out}\n--- server log ---\n{log[-4000:]}"
    assert rc == 0, log


def test_smbtorture_posix_fails_without_the_extensions(workdir, unstable):
    """The same test against a server that does not offer them fails: the test can fail."""
    server = SmbqServer(workdir, config="posix_extensions = false\nrefuse_hardlinks = false\n")
    try:
        (server.share / "posix_test_original.txt").write_text("posix\n")
        url = f"smb://{USER}:{server.password}@{HOST}:{server.port}/share"
        p = unstable.run(["smbtorture", "-s", "/dev/null", f"//{HOST}/share",
                          "-U", f"{USER}%{server.password}", "--fullname", "--format=subunit",
                          f"--option=torture:smburl={url}", "libsmbclient.posix_extensions"],
                         timeout=120)
    finally:
        server.stop()
    assert "success: libsmbclient.posix_extensions" not in p.stdout + p.stderr


@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_smbclient_posix_mode(workdir, unstable, transport):
    """`posix` makes every CREATE a POSIX open: a file put then gets the mode asked for (0, as
    Samba's client asks; Samba's smbd gives the same), a hard link is made, and the listing
    and a read back work on POSIX handles."""
    server = SmbqServer(workdir, config=CONFIG, quic_port=free_udp_port())
    up = "/tmp/smbq-posix-up.txt"
    unstable.path(up).write_text("hello posix\n")
    down = "/tmp/smbq-posix-down.txt"
    unstable.path(down).unlink(missing_ok=True)
    (server.share / "kept.txt").write_text("old\n")
    os.chmod(server.share / "kept.txt", 0o640)
    port = server.quic_addr.rsplit(":", 1)[1] if transport == "quic" else server.port
    try:
        p = unstable.run([
            "smbclient", f"//{HOST}/share", "-U", f"{USER}%{server.password}",
            f"--option=client smb transports={transport}:{port}",
            "--option=tls verify peer=no_check",
            "-c", f"posix; put {up} new.txt; hardlink new.txt link.txt; "
                  f"get link.txt {down}; ls"], timeout=120)
    finally:
        rc = server.stop()
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "new.txt" in p.stdout and "link.txt" in p.stdout and "kept.txt" in p.stdout, out
    new = os.stat(server.share / "new.txt")
    assert stat.S_IMODE(new.st_mode) == 0, oct(new.st_mode)
    assert new.st_nlink == 2
    assert os.stat(server.share / "link.txt").st_ino == new.st_ino
    assert unstable.path(down).read_text() == "hello posix\n"
    # Opening an existing file as a POSIX open leaves its mode alone.
    assert stat.S_IMODE(os.stat(server.share / "kept.txt").st_mode) == 0o640
    assert rc == 0, server.server_log()


@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_smbclient_posix_names_and_symlinks(workdir, unstable, transport):
    """In `posix` mode two names that differ only in case are two files; `symlink` makes a
    reparse point that `readlink` reads back, stored as data on a regular file: a link to
    outside the share is kept and reported, and never followed by anything."""
    server = SmbqServer(workdir, config=CONFIG, quic_port=free_udp_port())
    port = server.quic_addr.rsplit(":", 1)[1] if transport == "quic" else server.port
    a, b = "/tmp/smbq-posix-a.txt", "/tmp/smbq-posix-b.txt"
    unstable.path(a).write_text("upper\n")
    unstable.path(b).write_text("lower\n")
    leaked = "/tmp/smbq-posix-leak.txt"
    unstable.path(leaked).unlink(missing_ok=True)
    try:
        p = unstable.run([
            "smbclient", f"//{HOST}/share", "-U", f"{USER}%{server.password}",
            f"--option=client smb transports={transport}:{port}",
            "--option=tls verify peer=no_check",
            "-c", f"posix; put {a} Case.txt; put {b} case.txt; mkdir sub; put {a} sub\\deep.txt; "
                  "symlink ../../../etc/passwd evil; symlink Case.txt good; "
                  f"readlink evil; readlink good; ls; get evil {leaked}"], timeout=120)
    finally:
        rc = server.stop()
    out = p.stdout + p.stderr
    assert (server.share / "Case.txt").read_text() == "upper\n", out
    assert (server.share / "case.txt").read_text() == "lower\n", out
    assert (server.share / "sub" / "deep.txt").read_text() == "upper\n", out
    assert "evil -> ../../../etc/passwd" in p.stdout, out
    assert "good -> Case.txt" in p.stdout, out
    for name in ("evil", "good"):
        st = os.lstat(server.share / name)
        assert stat.S_ISREG(st.st_mode) and st.st_size == 0, (name, oct(st.st_mode))
    # Opened as a file, the link is answered STOPPED_ON_SYMLINK with where it points, as
    # Windows and Samba answer; smbclient does not follow it.
    assert "NT_STATUS_STOPPED_ON_SYMLINK opening remote file \\evil" in p.stdout, out
    # Whatever the client does with it, no byte of /etc/passwd comes back.
    got = unstable.path(leaked).read_bytes() if unstable.path(leaked).exists() else b""
    assert b"root:" not in got
    assert rc == 0, server.server_log()


def test_smbclient_posix_renames_a_directory_with_a_file_open_below(workdir, unstable):
    """A Linux client renames a directory while it has a file inside open. In `posix` mode the
    rename goes through (Samba's have_file_open_below ignores POSIX opens, and so does smbq)
    and the open file moves along; a Windows-mode client gets ACCESS_DENIED, as from Windows."""
    server = SmbqServer(workdir, config=CONFIG)
    (server.share / "d").mkdir()
    (server.share / "d" / "f.txt").write_text("inside\n")
    (server.share / "w").mkdir()
    (server.share / "w" / "f.txt").write_text("inside\n")

    def smbclient(commands):
        return unstable.run([
            "smbclient", f"//{HOST}/share", "-U", f"{USER}%{server.password}",
            f"--option=client smb transports=tcp:{server.port}", "-c", commands], timeout=120)
    try:
        windows = smbclient("open w\\f.txt; rename w w2")
        posix = smbclient("posix; open d\\f.txt; rename d e; ls e\\*")
    finally:
        rc = server.stop()
    out = windows.stdout + windows.stderr
    assert "NT_STATUS_ACCESS_DENIED" in out and (server.share / "w").is_dir(), out
    out = posix.stdout + posix.stderr
    assert "fnum" in posix.stdout and "NT_STATUS" not in out, out
    assert (server.share / "e" / "f.txt").read_text() == "inside\n", out
    assert not (server.share / "d").exists()
    assert "f.txt" in posix.stdout
    assert rc == 0, server.server_log()


@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_samba_libsmb_posix_semantics(workdir, unstable, transport):
    """Samba's own client library (python3-samba's libsmb, which Samba's smb3unix and
    smb2symlink tests use) against smbq: posix_libsmb.py's checks, each a behaviour Samba
    4.25's smbd has. Modes, owners and link counts in POSIX listings (what smbclient's `ls`
    cannot show), chmod, POSIX unlink of an open file, case-sensitive and reserved names,
    append-only handles, FILE_FS_POSIX_INFORMATION, symlinks answered STOPPED_ON_SYMLINK. The
    disk is checked from outside too."""
    server = SmbqServer(workdir, config=CONFIG, quic_port=free_udp_port())
    port = server.quic_addr.rsplit(":", 1)[1] if transport == "quic" else server.port
    shutil.copy(pathlib.Path(__file__).with_name("posix_libsmb.py"),
                unstable.path("/tmp/posix_libsmb.py"))
    try:
        p = unstable.run(["python3", "/tmp/posix_libsmb.py", HOST, f"{transport}:{port}", USER,
                          server.password], timeout=300)
    finally:
        rc = server.stop()
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "FAIL" not in p.stdout, out
    assert p.stdout.count("ok ") == 12, out
    share = server.share
    assert stat.S_IMODE(os.stat(share / "mode-file").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(share / "mode-dir").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(share / "chmod-me").st_mode) == 0o644
    assert (share / "unlinked").read_bytes() == b"new"
    assert (share / "appended").read_bytes() == b"hello world"
    assert not (share / "ro-file").exists() and not (share / "win-doc").exists()
    assert (share / "xx").exists() and not (share / "XX").exists()
    assert (share / "a:b").is_file() and not os.path.lexists(share / "syml")
    assert rc == 0, server.server_log()


@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_smbq_client_posix_commands(workdir, transport):
    """smbq's own client: `ls -l` shows modes, links and owners; `chmod`, `ln -s` and
    `readlink` work; against a server without the extensions they say so and fail."""
    from test_client import smbq_cli
    server = SmbqServer(workdir, config=CONFIG, quic_port=free_udp_port())
    try:
        share = server.share
        (share / "f.txt").write_text("hello\n")
        os.chmod(share / "f.txt", 0o640)
        os.link(share / "f.txt", share / "g.txt")
        (share / "d").mkdir()
        os.chmod(share / "d", 0o750)
        cli = smbq_cli(server, transport)
        cli.run("chmod", "604", cli.url("f.txt"))
        assert stat.S_IMODE(os.stat(share / "f.txt").st_mode) == 0o604
        cli.run("ln", "-s", "../../etc/passwd", cli.url("evil"))
        st = os.lstat(share / "evil")
        assert stat.S_ISREG(st.st_mode) and st.st_size == 0
        out = cli.run("readlink", cli.url("evil")).stdout.decode()
        assert out == "../../etc/passwd\n", out
        ls = cli.run("ls", "-l", cli.url()).stdout.decode()
        uid, gid = os.getuid(), os.getgid()
        lines = {line.split()[-1]: line.split() for line in ls.splitlines()}
        assert lines["f.txt"][:4] == ["-rw----r--", "2", str(uid), str(gid)], ls
        assert lines["d"][0] == "drwxr-x---", ls
        assert lines["evil"][0].startswith("l"), ls
        assert lines["f.txt"][4] == "6", ls
        # Reading through the link brings nothing of /etc/passwd.
        p = cli.run("cat", cli.url("evil"), check=False)
        assert b"root:" not in p.stdout
    finally:
        rc = server.stop()
    assert rc == 0, server.server_log()

    off = SmbqServer(workdir / "off", config="posix_extensions = false\n")
    try:
        cli = smbq_cli(off, "tcp")
        p = cli.run("chmod", "600", cli.url("x"), check=False)
        assert p.returncode != 0 and b"POSIX extensions" in p.stderr, p.stderr
        # ls -l falls back to the short listing.
        (off.share / "x").write_text("x")
        assert "x" in cli.run("ls", "-l", cli.url()).stdout.decode()
    finally:
        off.stop()


def test_chmod_of_another_users_file_is_refused_on_per_user_shares(workdir, unix_users):  # noqa: F811
    """On a per-user share (unix_identity = "per-user"), chmod through the POSIX extensions
    needs WRITE_DAC, which only the file's Unix owner holds, and runs as the session's Unix
    user: alice cannot change bob's mode; bob can."""
    from test_client import Cli
    server = identity_server(workdir, "refuse_hardlinks = false\n")
    try:
        bob = Cli("127.0.0.1", server.port, "bob", server.password, "share", "tcp")
        alice = Cli("127.0.0.1", server.port, "alice", server.password, "share", "tcp")
        src = workdir / "b.txt"
        src.write_text("bob's\n")
        bob.run("put", str(src), bob.url("b.txt"))
        f = server.share / "b.txt"
        assert f.stat().st_uid == unix_users[UNIX_USERS[1]].pw_uid
        before = stat.S_IMODE(f.stat().st_mode)
        p = alice.run("chmod", "666", alice.url("b.txt"), check=False)
        assert p.returncode != 0, p.stderr
        assert b"ACCESS_DENIED" in p.stderr, p.stderr
        assert stat.S_IMODE(f.stat().st_mode) == before
        bob.run("chmod", "600", bob.url("b.txt"))
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    finally:
        rc = server.stop()
    assert rc == 0, server.server_log()


def test_chown_follows_the_kernel_on_per_user_shares(workdir, unix_users):  # noqa: F811
    """chown through the POSIX extensions runs as the session's Unix user: bob may not give
    his file to alice (only root may), alice may not touch bob's file at all (no
    WRITE_OWNER), and bob may set the group to his own."""
    from test_client import Cli
    server = identity_server(workdir)
    try:
        bob = Cli("127.0.0.1", server.port, "bob", server.password, "share", "tcp")
        alice = Cli("127.0.0.1", server.port, "alice", server.password, "share", "tcp")
        src = workdir / "b.txt"
        src.write_text("bob's\n")
        bob.run("put", str(src), bob.url("b.txt"))
        f = server.share / "b.txt"
        bob_pw, alice_pw = unix_users[UNIX_USERS[1]], unix_users[UNIX_USERS[0]]
        for cli, owner in ((bob, str(alice_pw.pw_uid)), (alice, str(alice_pw.pw_uid)),
                           (alice, f":{alice_pw.pw_gid}")):
            p = cli.run("chown", owner, cli.url("b.txt"), check=False)
            assert p.returncode != 0 and b"ACCESS_DENIED" in p.stderr, (owner, p.stderr)
            assert (f.stat().st_uid, f.stat().st_gid) == (bob_pw.pw_uid, bob_pw.pw_gid)
        bob.run("chown", f"{bob_pw.pw_uid}:{bob_pw.pw_gid}", bob.url("b.txt"))
    finally:
        rc = server.stop()
    assert rc == 0, server.server_log()
