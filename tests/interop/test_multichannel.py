"""Multichannel over TCP (issue 16): smbq's client binds its session to more connections
(`--channels N`) and spreads READs and WRITEs over them, against the real server binary.

Each connection's bytes in and out come from the server's own `connection closed` log lines,
so the tests see where the data went, not only that it arrived."""

import hashlib
import os
import re
import subprocess

from conftest import BINARY, USER, SmbqServer, free_udp_port

SIZE = 24 * 1024 * 1024


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cli(server, *args, stdin=None):
    env = {**os.environ, "SMBQ_PASSWORD": server.password}
    return subprocess.run(
        [str(BINARY), *args, "--tcp-port", str(server.port), "--transport", "tcp"],
        input=stdin, capture_output=True, env=env, timeout=120)


def quic_cli(server, *args):
    """The client over QUIC only, trusting the server's own certificate."""
    pem = server.workdir / "server.pem"
    if not pem.exists():
        subprocess.run([str(BINARY), "cert", "export", "--pem", str(pem), "--state-dir",
                        str(server.state)], check=True, capture_output=True, timeout=30)
    env = {**os.environ, "SMBQ_PASSWORD": server.password}
    return subprocess.run(
        [str(BINARY), *args, "--quic-port", str(server.quic_port), "--transport", "quic",
         "--ca", str(pem)],
        capture_output=True, env=env, timeout=120, stdin=subprocess.DEVNULL)


def per_connection(log: str, field: str) -> dict[int, int]:
    """Bytes of `field` (bytes_in / bytes_out) per connection id, from the close lines."""
    out = {}
    for line in log.splitlines():
        if "connection closed" not in line:
            continue
        conn = re.search(r"conn\{id=(\d+)", line)
        value = re.search(rf"{field}=(\d+)", line)
        if conn and value:
            out[int(conn.group(1))] = int(value.group(1))
    return out


def spread_over_three_channels(server, run):
    """A download and an upload with `--channels 3` through `run` (the client over one
    transport): the bytes are right, two binds per command, and each of three connections
    carries a real share of each direction."""
    try:
        data = os.urandom(SIZE)
        (server.share / "big").write_bytes(data)
        url = f"smb://{USER}@127.0.0.1/share/big"
        got = run(server, "cat", url, "--channels", "3")
        assert got.returncode == 0, got.stderr.decode()
        assert sha256(got.stdout) == sha256(data)

        up = server.workdir / "up.bin"
        up.write_bytes(data[::-1])
        put = run(server, "put", str(up), f"smb://{USER}@127.0.0.1/share/up.bin",
                  "--channels", "3")
        assert put.returncode == 0, put.stderr.decode()
        assert sha256((server.share / "up.bin").read_bytes()) == sha256(data[::-1])
    finally:
        assert server.stop() == 0
    log = server.server_log()
    assert "panicked" not in log
    # Two binds per command, each logged as an audit line of the session's user.
    assert log.count('channel="bound"') == 4, log
    # The download: three connections, each carrying a real share of the file.
    out = per_connection(log, "bytes_out")
    assert len([n for n in out.values() if n > SIZE // 6]) == 3, out
    inn = per_connection(log, "bytes_in")
    assert len([n for n in inn.values() if n > SIZE // 6]) == 3, inn


def test_reads_and_writes_spread_over_three_channels(workdir):
    spread_over_three_channels(SmbqServer(workdir), cli)


def one_connection_only(server, run):
    """`--channels 2` against a server that offers no multichannel on that transport: one
    connection carries it all, the client says why, and nothing is bound."""
    try:
        data = os.urandom(1 << 20)
        (server.share / "f").write_bytes(data)
        got = run(server, "cat", f"smb://{USER}@127.0.0.1/share/f", "--channels", "2")
        assert got.returncode == 0, got.stderr.decode()
        assert got.stdout == data
        assert b"server does not offer multichannel" in got.stderr
    finally:
        assert server.stop() == 0
    assert 'channel="bound"' not in server.server_log()


def test_a_server_without_multichannel_serves_one_connection(workdir):
    one_connection_only(SmbqServer(workdir, config="multichannel = false\n"), cli)


def test_quic_channels_each_carry_a_share_when_the_server_allows_them(workdir):
    """Issue 40: `--channels 3` over QUIC binds two more QUIC connections (each its own
    quinn connection, so its packet work can run on another core) when the server allows
    binding over QUIC (`[quic] multichannel = true`); each carries part of a download and of
    an upload, and the bytes are right."""
    server = SmbqServer(workdir, config="[quic]\nmultichannel = true\n",
                        quic_port=free_udp_port())
    spread_over_three_channels(server, quic_cli)


def test_quic_channels_need_the_servers_consent(workdir):
    """Without `[quic] multichannel` (the default, as Windows binds no QUIC channels) the
    server does not offer multichannel over QUIC: one connection, with a note."""
    one_connection_only(SmbqServer(workdir, quic_port=free_udp_port()), quic_cli)
