"""Shared fixtures: start the real smbq binary on a free loopback port with a fresh state
directory and share, and tear it down afterwards."""

import os
import pathlib
import secrets
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = pathlib.Path(os.environ.get("SMBQ_BIN", ROOT / "target" / "release" / "smbq"))
USER = "tester"
# The client remembers which transport each server answered on (client_cli/remember.rs);
# tests must neither read nor leave behind the user's own memory.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="smbq-test-cache-")


# The QUIC stacks every QUIC interop test runs on (the binary is built with the msquic
# feature by scripts/test.sh; one without it fails the msquic cases at the server's start).
QUIC_STACKS = ["quinn", "msquic"]

# Transports of the smbq client tests: TCP, and QUIC on each stack (server and client alike).
TRANSPORTS = ["tcp", "quic", "quic-msquic"]


def stack_of(transport: str) -> str | None:
    """The QUIC stack a TRANSPORTS entry names (None: the default, or TCP)."""
    return "msquic" if transport == "quic-msquic" else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unix_user(name: str):
    """The passwd entry of a system user the tests act as (per-user identities), made if it
    does not exist yet; it stays for the next run. Needs root, as scripts/test.sh runs."""
    import pwd
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", name], check=True, timeout=30)
        return pwd.getpwnam(name)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SmbqServer:
    """One running `smbq serve`, ready when its ready line has been printed.

    TCP listens on a free port unless `tcp=False`; QUIC is off unless `quic_port` names a UDP
    port (then `quic_addr` is what the ready line reported). `env` adds environment variables
    (for example SSLKEYLOGFILE or SMBQ_LOG); `port` reuses a TCP port and `append_log` keeps
    the earlier server's log (a restart); `listen` is the address both listen on; `share` is
    the directory served as share "share" (by default one of its own under `workdir`)."""

    def __init__(self, workdir: pathlib.Path, extra_args=(), config: str | None = None,
                 quic_port: int = 0, tcp: bool = True, env: dict | None = None,
                 password: str | None = None, quic_stack: str | None = None,
                 port: int | None = None, append_log: bool = False, listen: str = "127.0.0.1",
                 share: pathlib.Path | None = None):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.share = share or workdir / "share"
        self.share.mkdir(parents=True, exist_ok=True)
        self.state = workdir / "state"
        self.password = password or "Pw-" + secrets.token_hex(8)
        self.port = (port or free_port()) if tcp else 0
        self.quic_port = quic_port
        self.listen = listen
        args = [str(BINARY), "serve", str(self.share), "--listen", listen,
                "--tcp-port", str(self.port), "--quic-port", str(quic_port),
                "--state-dir", str(self.state)]
        if config is not None:
            cfg = workdir / "smbq.toml"
            cfg.write_text(config)
            args += ["--config", str(cfg)]
        if quic_stack is not None:
            args += ["--quic-stack", quic_stack]
        self.quic_stack = quic_stack or "quinn"
        args += list(extra_args)
        env = {**os.environ, "SMBQ_USER": USER, "SMBQ_PASSWORD": self.password,
               "SMBQ_LOG": os.environ.get("SMBQ_LOG", "info"), **(env or {})}
        self.log_path = workdir / "server.log"
        # A restart (`append_log`) adds to the log of the server before it.
        self.log = open(self.log_path, "ab" if append_log else "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=env)
        deadline = time.time() + 20
        line = b""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"smbq: listening"):
                break
            if self.proc.poll() is not None:
                break
        if not line.startswith(b"smbq: listening"):
            self.stop()
            raise RuntimeError(f"smbq did not start: {line!r}\n{self.log_path.read_text()}")
        self.ready_line = line.decode().strip()
        self.quic_addr = next((w.split("=", 1)[1] for w in self.ready_line.split()
                               if w.startswith("quic=")), None)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def server_log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def workdir():
    with tempfile.TemporaryDirectory(prefix="smbq-test-") as d:
        yield pathlib.Path(d)


@pytest.fixture
def server(workdir):
    s = SmbqServer(workdir)
    yield s
    rc = s.stop()
    assert "panicked" not in s.server_log(), s.server_log()
    assert rc == 0, f"server exit code {rc}\n{s.server_log()}"


@pytest.fixture
def samba(request, workdir):
    """A private Samba smbd (Debian samba 4.17) on a free loopback port with `server smb encrypt
    = required`: see samba_server.SambaServer. Other settings via indirect parametrisation, e.g.
    `@pytest.mark.parametrize("samba", [{"encrypt": "off"}], indirect=True)`. On failure the
    Samba logs are printed (pytest shows captured output of failing tests)."""
    from samba_server import SambaServer
    s = SambaServer(workdir, **(getattr(request, "param", None) or {}))
    yield s
    s.stop()
    print(f"--- samba logs ({s.base}) ---\n{s.log_tail(200)}")


@pytest.fixture(scope="module")
def unstable():
    """Samba's tools from Debian unstable (4.25+: smbclient and smbtorture over QUIC), in the
    cached chroot samba_unstable.py makes."""
    from samba_unstable import Chroot
    c = Chroot()
    try:
        yield c
    finally:
        c.close()
