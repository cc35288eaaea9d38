"""`smbq cp`: a copy the server makes itself (FSCTL_SRV_COPYCHUNK, issue 16), against the real
server binary. A 1 GiB copy within a share moves almost nothing over the connection (the
server's bytes_in/bytes_out for it, from its "connection closed" log line), Samba's smbclient
reads back an identical file, and the copy keeps the source's modification time; copies
between shares, into a directory, over QUIC, and the refusals (existing target without -f,
another server, a missing source) behave as a user expects."""

import os
import re
import subprocess

import pytest

import smbclient
from conftest import SmbqServer, free_udp_port
from test_client import make_file, sha256, smbq_cli

BIG_MB = int(os.environ.get("SMBQ_CLIENT_BIG_MB", "1024"))


@pytest.fixture
def two_shares(workdir):
    other = workdir / "other"
    other.mkdir()
    s = SmbqServer(workdir, extra_args=["--share", f"other={other}"], quic_port=free_udp_port())
    yield s, other
    rc = s.stop()
    assert "panicked" not in s.server_log(), s.server_log()
    assert rc == 0, s.server_log()


def traffic(server: SmbqServer) -> list[tuple[int, int]]:
    """(bytes_in, bytes_out) of every closed connection so far, in order."""
    out = []
    for line in server.server_log().splitlines():
        if "connection closed" in line:
            i = re.search(r"bytes_in=(\d+)", line)
            o = re.search(r"bytes_out=(\d+)", line)
            assert i and o, line
            out.append((int(i.group(1)), int(o.group(1))))
    return out


def test_gigabyte_copy_stays_in_the_server(two_shares, workdir):
    server, _ = two_shares
    src = server.share / "big.bin"
    size = BIG_MB << 20
    make_file(src, size, seed=16)
    os.utime(src, (1_600_000_000, 1_600_000_000))
    cli = smbq_cli(server, "tcp")
    before = len(traffic(server))
    p = cli.run("cp", "--progress", cli.url("big.bin"), "copy/big.bin", check=False)
    # No directory "copy" yet: the open of the target fails cleanly, nothing is left.
    assert p.returncode != 0
    (server.share / "copy").mkdir()
    p = cli.run("cp", "--progress", cli.url("big.bin"), "copy/", timeout=600)
    assert re.search(rb"cp \d+ bytes", p.stderr), p.stderr
    dst = server.share / "copy" / "big.bin"
    assert dst.stat().st_size == size
    assert int(dst.stat().st_mtime) == 1_600_000_000, "the copy keeps the source's time"
    moved = traffic(server)[before:]
    assert moved, server.server_log()
    bytes_in, bytes_out = moved[-1]
    assert bytes_in < (1 << 20) and bytes_out < (1 << 20), (bytes_in, bytes_out, size)
    # Samba's client reads the copy back over the wire: the same bytes.
    local = workdir / "back.bin"
    rc, out = smbclient.run(server, f"get copy/big.bin {local}", timeout=600)
    assert rc == 0, out
    assert sha256(local) == sha256(src)


def test_copy_between_shares_over_quic_and_refusals(two_shares, workdir):
    server, other = two_shares
    data = os.urandom(3_000_000)
    (server.share / "a.bin").write_bytes(data)
    for transport in ["tcp", "quic"]:
        cli = smbq_cli(server, transport)
        name = f"to-{transport}.bin"
        cli.run("cp", cli.url("a.bin"), cli.url(name, share="other"))
        assert (other / name).read_bytes() == data
        # An existing target needs -f.
        p = cli.run("cp", cli.url("a.bin"), cli.url(name, share="other"), check=False)
        assert p.returncode != 0 and b"-f" in p.stderr, p.stderr
        (server.share / "b.bin").write_bytes(b"short")
        cli.run("cp", "-f", cli.url("b.bin"), cli.url(name, share="other"))
        assert (other / name).read_bytes() == b"short", "replaced, not overwritten in place"
    cli = smbq_cli(server, "tcp")
    p = cli.run("cp", cli.url("missing.bin"), "x.bin", check=False)
    assert p.returncode == 4, p.stderr  # not found
    assert not (server.share / "x.bin").exists()
    p = cli.run("cp", cli.url("a.bin"), "smb://tester@elsewhere.invalid/share/x", check=False)
    assert p.returncode != 0 and b"one server" in p.stderr, p.stderr
    # An empty file copies too (no chunks at all).
    (server.share / "empty").write_bytes(b"")
    cli.run("cp", cli.url("empty"), "empty2")
    assert (server.share / "empty2").read_bytes() == b""


def test_smbclient_copies_through_the_server(two_shares, workdir):
    """Samba's client has no copy command, but its tar and `get` already checked the data;
    here its `allinfo` confirms the copy is a plain file with the right size."""
    server, _ = two_shares
    (server.share / "s.bin").write_bytes(b"x" * 100_000)
    cli = smbq_cli(server, "tcp")
    cli.run("cp", cli.url("s.bin"), "t.bin")
    rc, out = smbclient.run(server, "allinfo t.bin")
    assert rc == 0, out
    assert re.search(r"stream: \[::\$DATA\], 100000 bytes", out), out


def test_cp_help_names_the_server_side_copy():
    from conftest import BINARY
    p = subprocess.run([str(BINARY), "cp", "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "inside the server" in p.stdout, p.stdout
