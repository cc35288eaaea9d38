"""Issue 37, against the real binary: persistent handles on a continuously available share
outlive the server. `smbq put` to such a share goes on after the server is killed with
SIGKILL and started again, over TCP and over QUIC, and the file is whole; while the
uploader's open waits for it, another client's open of the file is refused
(STATUS_FILE_NOT_AVAILABLE); an open whose client never comes back expires."""

import os
import pathlib
import subprocess
import time

import pytest

from conftest import BINARY, TRANSPORTS, USER, SmbqServer, free_udp_port, stack_of
from test_client import Cli, make_file, sha256

SIZE_MB = int(os.environ.get("SMBQ_PERSISTENT_MB", "128"))
TIMEOUT_S = 6  # the durable timeout the server gives opens that ask for its default

CONFIG = """
[limits]
durable_timeout_secs = {timeout}

[share.ca]
path = "{path}"
continuous_availability = true
"""


def start(workdir: pathlib.Path, quic_port: int, port: int | None = None,
          password: str | None = None, timeout: int = TIMEOUT_S,
          quic_stack: str | None = None) -> SmbqServer:
    ca = workdir / "ca"
    ca.mkdir(exist_ok=True)
    return SmbqServer(workdir, config=CONFIG.format(timeout=timeout, path=ca),
                      quic_port=quic_port, port=port, password=password,
                      append_log=port is not None, quic_stack=quic_stack)


def cli(s: SmbqServer, transport: str) -> Cli:
    """The smbq client for TRANSPORTS' `transport` (its QUIC stack is the server's)."""
    if transport.startswith("quic"):
        port = int(s.quic_addr.rsplit(":", 1)[1])
        stack = stack_of(transport)
        extra = ["--quic-stack", stack] if stack else []
        return Cli("127.0.0.1", port, USER, s.password, "ca", "quic", extra, s.state)
    return Cli("127.0.0.1", s.port, USER, s.password, "ca", "tcp")


def kill_9(s: SmbqServer):
    s.proc.kill()
    s.proc.wait()
    s.log.close()


def grown(ca: pathlib.Path, at_least: int, within: float) -> bool:
    """Whether some file under `ca` reaches `at_least` bytes within `within` seconds."""
    deadline = time.time() + within
    while time.time() < deadline:
        if any(f.stat().st_size >= at_least for f in ca.rglob("*") if f.is_file()):
            return True
        time.sleep(0.05)
    return False


def through_restart(workdir: pathlib.Path, s: SmbqServer, quic_port: int, argv: list,
                    started) -> tuple[SmbqServer, str]:
    """Runs `smbq ARGV`, kills the server with SIGKILL once `started()` says the transfer got
    going, starts it again on the same ports and state, and waits for the command; returns
    the new server and the command's stderr (the command must succeed)."""
    env = {**os.environ, "SMBQ_PASSWORD": s.password}
    p = subprocess.Popen([str(BINARY), *argv], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while not started():
            assert time.time() < deadline, "the transfer did not get going"
            time.sleep(0.02)
        kill_9(s)
        time.sleep(0.5)
        s = start(workdir, quic_port, port=s.port, password=s.password,
                  quic_stack=s.quic_stack)
        _, err = p.communicate(timeout=900)
    finally:
        if p.poll() is None:
            p.kill()
    stderr = err.decode(errors="replace")
    assert p.returncode == 0, stderr + s.server_log()[-4000:]
    assert "reconnecting" in stderr, stderr
    return s, stderr


def any_file_reaches(where: pathlib.Path, pattern: str, size: int):
    return lambda: any(f.stat().st_size >= size for f in where.glob(pattern) if f.is_file())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_put_goes_on_after_kill_9_and_restart(workdir, transport):
    quic_port = free_udp_port()
    # A short durable timeout: the QUIC client hears of the restart at once too, from the
    # stateless reset the new process sends with the key it kept (not after its idle timeout),
    # on either QUIC stack.
    s = start(workdir, quic_port, quic_stack=stack_of(transport))
    size = SIZE_MB << 20
    src = workdir / "src.bin"
    make_file(src, size, seed=37)
    c = cli(s, transport)
    s, stderr = through_restart(workdir, s, quic_port,
                                ["put", str(src), c.url("big.bin"), *c.opts],
                                any_file_reaches(workdir / "ca", "**/*", size // 4))
    assert "no longer kept" not in stderr, stderr + s.server_log()[-4000:]
    assert sha256(workdir / "ca" / "big.bin") == sha256(src)
    s.stop()
    log = s.server_log()
    assert "panicked" not in log
    assert "restored=1" in log, log[-3000:]
    assert "durable open reclaimed" in log


def test_an_abandoned_persistent_open_holds_its_file_until_it_expires(workdir):
    """The uploader's open holds an RWH lease: another client's open of the file waits for
    the break it cannot hear (as on Windows, a persistent open whose lease caches handles is
    broken rather than refused) and goes on when the open expires, its client never back."""
    quic_port = free_udp_port()
    s = start(workdir, quic_port)
    size = 64 << 20
    src = workdir / "src.bin"
    make_file(src, size, seed=38)
    c = cli(s, "tcp")
    env = {**os.environ, "SMBQ_PASSWORD": s.password}
    put = subprocess.Popen([str(BINARY), "put", str(src), c.url("gone.bin"), *c.opts],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           stdin=subprocess.DEVNULL)
    assert grown(workdir / "ca", 1 << 20, 120)
    # The client and the server die together; only the server comes back.
    put.kill()
    put.wait()
    kill_9(s)
    part = next(f for f in (workdir / "ca").rglob("*") if f.is_file())
    s = start(workdir, quic_port, port=s.port, password=s.password)
    restarted = time.time()
    c = cli(s, "tcp")
    name = part.relative_to(workdir / "ca").as_posix()
    p = c.run("cat", c.url(name), timeout=60)
    waited = time.time() - restarted
    assert p.stdout == part.read_bytes()
    assert TIMEOUT_S - 1.5 <= waited < 30, waited
    s.stop()
    log = s.server_log()
    assert "restored=1" in log
    assert "durable open timed out" in log


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_get_goes_on_after_kill_9_and_restart(workdir, transport):
    quic_port = free_udp_port()
    s = start(workdir, quic_port, quic_stack=stack_of(transport))
    size = SIZE_MB << 20
    src = workdir / "ca" / "big.bin"
    make_file(src, size, seed=39)
    dst = workdir / "got.bin"
    c = cli(s, transport)
    s, _ = through_restart(workdir, s, quic_port,
                           ["get", c.url("big.bin"), str(dst), *c.opts],
                           any_file_reaches(workdir, "got.bin*", size // 4))
    assert sha256(dst) == sha256(src)
    s.stop()
    assert "panicked" not in s.server_log()


def test_status_shows_a_restored_persistent_open_and_closing_it_forgets_it(workdir):
    """`smbq status` lists a persistent open restored after a restart, waiting for its client,
    with the seconds it has left; `--close-file` ends it for good: the next start restores
    nothing."""
    from test_status import snapshot, status
    quic_port = free_udp_port()
    s = start(workdir, quic_port, timeout=120)
    src = workdir / "src.bin"
    make_file(src, 64 << 20, seed=40)
    c = cli(s, "tcp")
    env = {**os.environ, "SMBQ_PASSWORD": s.password}
    put = subprocess.Popen([str(BINARY), "put", str(src), c.url("kept.bin"), *c.opts],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           stdin=subprocess.DEVNULL)
    assert grown(workdir / "ca", 1 << 20, 120)
    put.kill()
    put.wait()
    kill_9(s)
    s = start(workdir, quic_port, port=s.port, password=s.password, timeout=120)
    opens = snapshot(s)["opens"]
    assert len(opens) == 1, opens
    assert opens[0]["durable"].startswith("persistent, disconnected ("), opens
    assert opens[0]["share"] == "ca"
    p = status(s, "--close-file", str(opens[0]["id"]))
    assert p.returncode == 0, p.stderr
    assert not snapshot(s)["opens"]
    time.sleep(0.3)  # the removal reaches the disk within 100 ms
    kill_9(s)
    s = start(workdir, quic_port, port=s.port, password=s.password, timeout=120)
    assert not snapshot(s)["opens"]
    s.stop()
    starts = [line for line in s.server_log().splitlines() if "persistent opens" in line]
    assert [("restored=1" in x, "restored=0" in x) for x in starts[-3:]] == \
        [(False, True), (True, False), (False, True)], starts
