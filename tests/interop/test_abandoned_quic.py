"""Issue 10 item 6: a QUIC client killed mid-upload sends no CONNECTION_CLOSE, so the server
learns it is gone only from QUIC's idle timeout; then its opens must be closed at once, and
the same client's `put --continue` must work (it failed with SHARING_VIOLATION while the
abandoned open was held)."""

import os
import signal
import subprocess
import time

import pytest

from conftest import BINARY, TRANSPORTS, SmbqServer, free_udp_port, stack_of
from test_client import make_file, sha256, smbq_cli

IDLE = 3


@pytest.mark.parametrize("transport", [t for t in TRANSPORTS if t.startswith("quic")])
def test_killed_quic_client_releases_its_opens_at_the_idle_timeout(workdir, transport):
    config = f"[quic]\nidle_timeout_secs = {IDLE}\nkeep_alive_secs = 1\n"
    server = SmbqServer(workdir, quic_port=free_udp_port(), config=config,
                        quic_stack=stack_of(transport))
    try:
        cli = smbq_cli(server, transport)
        src = workdir / "src.bin"
        make_file(src, 256 << 20)
        env = {**os.environ, "SMBQ_PASSWORD": cli.password}
        p = subprocess.Popen([str(BINARY), "put", str(src), cli.url("up.bin"), *cli.opts],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        # Kill it once data is flowing: no CONNECTION_CLOSE reaches the server.
        deadline = time.time() + 30
        partial = [server.share / "up.bin", server.share / "up.bin.part"]
        while time.time() < deadline:
            if any(f.exists() and f.stat().st_size > (8 << 20) for f in partial):
                break
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        killed_at = time.time()
        assert any(f.exists() for f in partial), "the upload never started"

        # The same client resumes: refused only while the abandoned open is still held.
        done_at = None
        while time.time() - killed_at < IDLE + 10:
            r = cli.run("put", "--continue", str(src), cli.url("up.bin"), check=False)
            if r.returncode == 0:
                done_at = time.time()
                break
            time.sleep(0.5)
        print(f"resumed {done_at - killed_at:.1f}s after the kill" if done_at else "never")
        assert done_at is not None, "put --continue never succeeded"
        assert done_at - killed_at <= IDLE + 6, f"open held {done_at - killed_at:.1f}s"
        assert sha256(server.share / "up.bin") == sha256(src)
        log = server.server_log()
        assert "timed out" in log.lower() or "idle" in log.lower() or "disconnected" in log, log
    finally:
        assert server.stop() == 0
    assert "panicked" not in server.server_log()
