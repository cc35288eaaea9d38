"""Issue 37, "100,000 persistent opens: bounded by configuration, refused beyond it", against
the real binary and its redb store: a client opens as many persistent handles as
`max_durable_opens` allows, one on each file, every one granted persistent; the next open
works but is not made persistent. Killed with SIGKILL and started again, the server holds
every one of them again for its client. Each open is a file descriptor, so the server starts
under a soft open-file limit of 1,024 and must raise it.

CI runs it with 2,000 opens (a bound of 2,000); SMBQ_PERSISTENT_SCALE=N runs N, as far as the
hard open-file limit allows (docs/features.md gives what the largest run measured)."""

import os
import resource
import struct
import time

import pytest

from conftest import SmbqServer, free_udp_port
from test_cluster import Client
from test_cluster_ca import open_persistent
from test_persistent import kill_9

N = int(os.environ.get("SMBQ_PERSISTENT_SCALE", "2000"))
READ = 0x1
SHARE_ALL = 0x7

CONFIG = """
[limits]
durable_timeout_secs = 600
max_durable_timeout_secs = 600
max_durable_opens = {n}
max_durable_opens_per_user = {n}
max_opens_per_session = {opens}

[share.ca]
path = "{path}"
continuous_availability = true
"""


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start(workdir, config: str, quic_port: int, port=None, password=None) -> SmbqServer:
    return SmbqServer(workdir, config=config, quic_port=quic_port, port=port,
                      password=password, append_log=port is not None)


@pytest.fixture
def low_soft_fd_limit():
    """The servers this test starts inherit a soft open-file limit of 1,024 (systemd's for a
    service) under a hard limit with room for every open: the server raises its soft limit
    to the hard one at start (crate::fd_limit), or fails its 1,025th open."""
    was = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = max(was[1], N + 8192)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))  # needs CAP_SYS_RESOURCE
    except (ValueError, OSError):
        hard = was[1]  # a container without it: the hard limit stays where it is
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    assert hard >= N + 1024, f"a hard open-file limit of {hard} leaves no room for {N} opens"
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, was)


def test_persistent_opens_are_bounded_by_configuration_and_all_come_back(workdir,
                                                                        low_soft_fd_limit):
    ca = workdir / "ca"
    ca.mkdir()
    for i in range(N + 1):
        (ca / f"f{i}").touch()
    config = CONFIG.format(n=N, opens=N + 16, path=ca)
    quic_port = free_udp_port()
    s = start(workdir, config, quic_port)
    c = Client(s, s.password, share="ca")

    began = time.time()
    for i in range(N):
        open_persistent(c, f"f{i}", READ, SHARE_ALL)
    took = time.time() - began
    # One more: opened, but without the persistent handle the store has no room for.
    ask = struct.pack("<II8x", 0, 0x2) + os.urandom(16)
    _, _, got = c.create(f"f{N}", READ, SHARE_ALL, 0, {b"DH2Q": ask})
    assert b"DH2Q" not in got or not struct.unpack_from("<II", got[b"DH2Q"])[1] & 0x2, got
    held = rss_mib(s.proc.pid)

    kill_9(s)
    began = time.time()
    s = start(workdir, config, quic_port, port=s.port, password=s.password)
    ready = time.time() - began
    log = s.server_log()
    assert f"restored={N}" in log, log[-3000:]
    assert "panicked" not in log
    # Each restored open keeps its file for its client (STATUS_FILE_NOT_AVAILABLE), the
    # first and the last alike.
    other = Client(s, s.password, share="ca")
    for name in ("f0", f"f{N - 1}"):
        assert other.open(name, READ, SHARE_ALL) == 0xC0000467, name
    assert isinstance(other.open(f"f{N}", READ, SHARE_ALL), bytes), "its open was not kept"
    restored = rss_mib(s.proc.pid)
    s.stop()
    print(f"\n{N} persistent opens: {took:.1f} s ({took / N * 1e3:.2f} ms each), "
          f"server RSS {held:.0f} MiB; restart to ready {ready:.1f} s, RSS {restored:.0f} MiB")
