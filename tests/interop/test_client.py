"""smbq's own client (the `smbq ls|get|put|...` commands) against the real smbq server over TCP
and QUIC, and against a real Samba smbd with `server smb encrypt = required`.

Covered (issue 4): every CLI command; a big round trip with identical SHA-256 (1 GiB by
default, SMBQ_CLIENT_BIG_MB); a recursive copy of 1,000 small files; each cipher, signing
algorithm and dialect; the Windows-like SMB1 first message; error cases with distinct exit
codes (wrong password, missing share, missing file, server gone mid-transfer, pin mismatch)
and resuming a partial transfer with --continue."""

import hashlib
import os
import pathlib
import random
import re
import subprocess
import time

import pytest

from conftest import BINARY, TRANSPORTS, USER, SmbqServer, free_udp_port, stack_of

BIG_MB = int(os.environ.get("SMBQ_CLIENT_BIG_MB", "1024"))

EXIT_AUTH, EXIT_NOT_FOUND, EXIT_CONN, EXIT_CERT, EXIT_NO_SHARE = 3, 4, 6, 7, 9


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def make_file(path: pathlib.Path, size: int, seed: int = 1):
    rnd = random.Random(seed)
    block = rnd.randbytes(1 << 20)
    with open(path, "wb") as f:
        left = size
        i = 0
        while left > 0:
            n = min(left, len(block))
            # Vary each MiB so misplaced blocks are detected.
            f.write(i.to_bytes(8, "little") + block[8:n] if n >= 8 else block[:n])
            left -= n
            i += 1


class Cli:
    """Runs `smbq <cmd>` against one server with fixed connection options."""

    def __init__(self, host: str, port: int, user: str, password: str, share: str,
                 transport: str, extra=(), state: pathlib.Path | None = None):
        self.host, self.port, self.user, self.share = host, port, user, share
        self.password = password
        self.transport = transport
        self.extra = list(extra)
        self.opts = ["--transport", transport] + self.extra
        if transport == "quic" and state is not None:
            pin = subprocess.run([str(BINARY), "cert", "show", "--state-dir", str(state)],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
            self.opts += ["--pin", pin]

    def url(self, path: str = "", share: str | None = None) -> str:
        share = self.share if share is None else share
        base = f"smb://{self.user}@{self.host}:{self.port}/{share}"
        return base + ("/" + path.lstrip("/") if path else "")

    def run(self, *args, password: str | None = None, timeout=600, check=True, env=None):
        e = {**os.environ, "SMBQ_PASSWORD": self.password if password is None else password,
             **(env or {})}
        p = subprocess.run([str(BINARY), *args, *self.opts], capture_output=True,
                           timeout=timeout, env=e, stdin=subprocess.DEVNULL)
        if check:
            assert p.returncode == 0, (args, p.returncode, p.stderr.decode(errors="replace"))
        assert b"panicked" not in p.stderr, p.stderr
        return p


def smbq_cli(server: SmbqServer, transport: str, extra=()) -> Cli:
    if transport.startswith("quic"):
        port = int(server.quic_addr.rsplit(":", 1)[1])
        stack = stack_of(transport)
        extra = list(extra) + (["--quic-stack", stack] if stack else [])
        return Cli("127.0.0.1", port, USER, server.password, "share", "quic", extra, server.state)
    return Cli("127.0.0.1", server.port, USER, server.password, "share", "tcp", extra)


@pytest.fixture
def smbq(workdir, request):
    """A server on TCP and QUIC; a test parametrized by `transport` gets its QUIC stack."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    s = SmbqServer(workdir, quic_port=free_udp_port(),
                   quic_stack=stack_of(params.get("transport", "")))
    yield s
    rc = s.stop()
    assert "panicked" not in s.server_log(), s.server_log()
    assert rc == 0, s.server_log()


def exercise_every_command(cli: Cli, share_dir: pathlib.Path | None, local: pathlib.Path,
                           pipes_over_quic: bool = False):
    """mkdir, put, ls, stat, cat, mv, get, rm, rmdir, shares; checks each on both sides.
    Over QUIC `shares` is refused unless the server allows named pipes there."""
    local.mkdir(parents=True, exist_ok=True)
    src = local / "hello.txt"
    src.write_bytes(b"hello from smbq\n" * 1000)
    cli.run("mkdir", cli.url("docs"))
    cli.run("put", str(src), cli.url("docs/hello.txt"))
    if share_dir is not None:
        assert (share_dir / "docs" / "hello.txt").read_bytes() == src.read_bytes()
    ls = cli.run("ls", cli.url("docs")).stdout.decode()
    assert "hello.txt" in ls and "16000" in ls, ls
    st = cli.run("stat", cli.url("docs/hello.txt")).stdout.decode()
    assert "16000" in st, st
    assert cli.run("cat", cli.url("docs/hello.txt")).stdout == src.read_bytes()
    cli.run("mv", cli.url("docs/hello.txt"), "docs/renamed.txt")
    out = local / "back.txt"
    cli.run("get", cli.url("docs/renamed.txt"), str(out))
    assert out.read_bytes() == src.read_bytes()
    miss = cli.run("stat", cli.url("docs/hello.txt"), check=False)
    assert miss.returncode == EXIT_NOT_FOUND, miss.stderr
    cli.run("rm", cli.url("docs/renamed.txt"))
    cli.run("rmdir", cli.url("docs"))
    if share_dir is not None:
        assert not (share_dir / "docs").exists()
    server_url = f"smb://{cli.user}@{cli.host}:{cli.port}"
    if cli.transport == "quic" and not pipes_over_quic:
        # Named pipes (srvsvc) are refused over QUIC by default, as on Windows.
        p = cli.run("shares", server_url, check=False)
        assert p.returncode == EXIT_ACCESS, p.stderr
        assert b"over QUIC by default" in p.stderr, p.stderr
        return
    shares = cli.run("shares", server_url).stdout.decode()
    assert re.search(rf"^{cli.share}\b", shares, re.M), shares
    assert "IPC$" in shares, shares


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_command(smbq, workdir, transport):
    exercise_every_command(smbq_cli(smbq, transport), smbq.share, workdir / "local")


def test_shares_without_a_forced_transport_falls_back_to_tcp(smbq):
    """The CLI races both transports and prefers QUIC; a share list refused over QUIC (named
    pipes, the default) is asked again over TCP."""
    cli = smbq_cli(smbq, "quic")
    opts = [o for o in cli.opts if o not in ("--transport", "quic")]
    e = {**os.environ, "SMBQ_PASSWORD": cli.password}
    p = subprocess.run([str(BINARY), "shares", f"smb://{cli.user}@{cli.host}:{cli.port}",
                        "--tcp-port", str(smbq.port), *opts], capture_output=True,
                       timeout=120, env=e, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert re.search(rf"^{cli.share}\b", p.stdout.decode(), re.M), p.stdout


def test_shares_over_quic_when_the_server_allows_named_pipes(workdir):
    """`[quic] restrict_named_pipes = false` lets srvsvc (the share list) through over QUIC."""
    s = SmbqServer(workdir, quic_port=free_udp_port(),
                   config="[quic]\nrestrict_named_pipes = false\n")
    try:
        exercise_every_command(smbq_cli(s, "quic"), s.share, workdir / "local",
                               pipes_over_quic=True)
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_big_round_trip(smbq, workdir, transport):
    cli = smbq_cli(smbq, transport)
    src = workdir / "big.bin"
    make_file(src, BIG_MB << 20, seed=7)
    want = sha256(src)
    p = cli.run("put", str(src), cli.url("big.bin"), timeout=1800)
    assert sha256(smbq.share / "big.bin") == want
    back = workdir / "back.bin"
    cli.run("get", cli.url("big.bin"), str(back), timeout=1800)
    assert sha256(back) == want
    # Non-interactive runs end with a summary line (bytes, time, rate).
    assert re.search(rb"\d+ bytes in [\d.]+ s", p.stderr), p.stderr
    back.unlink()
    src.unlink()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_recursive_thousand_files(smbq, workdir, transport):
    cli = smbq_cli(smbq, transport)
    tree = workdir / "tree"
    rnd = random.Random(11)
    for i in range(1000):
        d = tree / f"d{i % 10}" / f"e{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.dat").write_bytes(rnd.randbytes(rnd.randint(0, 3000)))
    cli.run("put", "-r", str(tree), cli.url("tree"), timeout=1200)
    back = workdir / "back"
    cli.run("get", "-r", cli.url("tree"), str(back), timeout=1200)
    files = sorted(p.relative_to(tree) for p in tree.rglob("*") if p.is_file())
    assert len(files) == 1000
    for rel in files:
        assert (smbq.share / "tree" / rel).read_bytes() == (tree / rel).read_bytes(), rel
        assert (back / rel).read_bytes() == (tree / rel).read_bytes(), rel
    assert sorted(p.relative_to(back) for p in back.rglob("*") if p.is_file()) == files


def session_line(server: SmbqServer) -> str:
    lines = [l for l in server.server_log().splitlines() if "session established" in l]
    assert lines, server.server_log()
    return lines[-1]


@pytest.mark.parametrize("cipher,wire", [("aes-128-ccm", "AES-128-CCM"), ("aes-128-gcm", "AES-128-GCM"),
                                         ("aes-256-ccm", "AES-256-CCM"), ("aes-256-gcm", "AES-256-GCM")])
def test_each_cipher(workdir, cipher, wire):
    s = SmbqServer(workdir, extra_args=["--encrypt", "required"])
    try:
        cli = smbq_cli(s, "tcp", ["--cipher", cipher])
        src = workdir / "c.bin"
        make_file(src, 3 << 20, seed=3)
        cli.run("put", str(src), cli.url("c.bin"))
        back = workdir / "c.back"
        cli.run("get", cli.url("c.bin"), str(back))
        assert sha256(back) == sha256(src)
        line = session_line(s)
        assert f"cipher={wire} " in line and "encrypt_required=true" in line, line
        # The server saw encrypted frames.
        closed = [l for l in s.server_log().splitlines() if "connection closed" in l]
        assert closed and not re.search(r"encrypted=0\b", closed[-1]), closed
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("signing,wire", [("hmac-sha256", "HMAC-SHA256"), ("cmac", "AES-128-CMAC"),
                                          ("gmac", "AES-128-GMAC")])
def test_each_signing_algorithm(smbq, workdir, signing, wire):
    cli = smbq_cli(smbq, "tcp", ["--signing", signing])
    exercise_every_command(cli, smbq.share, workdir / "local")
    assert f"signing={wire} " in session_line(smbq)


@pytest.mark.parametrize("dialect,wire", [("3.1.1", "3.1.1"), ("3.0.2", "3.0.2"),
                                          ("3.0", "3.0"), ("2.1", "2.1"),
                                          ("2.0.2", "2.0.2")])
def test_each_dialect(smbq, workdir, dialect, wire):
    cli = smbq_cli(smbq, "tcp", ["--dialect", dialect])
    exercise_every_command(cli, smbq.share, workdir / "local")
    assert f"dialect={wire} " in session_line(smbq)


def test_quic_transport_security_lifts_required_encryption(workdir):
    """With `--encrypt required`, a TCP session is sealed, while over QUIC the client offers
    transport-level security and the server neither requires nor applies SMB3 encryption: the
    server counts the encrypted frames it received on each connection."""
    s = SmbqServer(workdir, extra_args=["--encrypt", "required"], quic_port=free_udp_port())
    try:
        (workdir / "a").write_bytes(os.urandom(300_000))
        for transport in ["quic", "tcp"]:
            cli = smbq_cli(s, transport)
            cli.run("put", str(workdir / "a"), cli.url(f"a-{transport}"))
            assert (s.share / f"a-{transport}").read_bytes() == (workdir / "a").read_bytes()
        deadline = time.time() + 10
        while time.time() < deadline and s.server_log().count("connection closed") < 2:
            time.sleep(0.05)
        log = s.server_log().splitlines()
        sessions = [l for l in log if "session established" in l]
        closed = [l for l in log if "connection closed" in l]
        assert len(sessions) == 2 and len(closed) == 2, log
        assert "encrypt_required=false" in sessions[0], sessions[0]
        assert "encrypt_required=true" in sessions[1], sessions[1]
        assert re.search(r"encrypted=0\b", closed[0]), closed[0]
        assert not re.search(r"encrypted=0\b", closed[1]), closed[1]
    finally:
        assert s.stop() == 0


def test_get_into_a_fifo_writes_through_and_keeps_it_a_fifo(smbq, workdir):
    """`get URL /dev/null` used to rename its .part over the target and so replaced the
    device node with a regular file; a FIFO stands in for the device here."""
    import stat
    import threading
    cli = smbq_cli(smbq, "tcp")
    payload = os.urandom(3 << 20)
    (smbq.share / "blob.bin").write_bytes(payload)
    fifo = workdir / "pipe"
    os.mkfifo(fifo)
    got = bytearray()

    def drain():
        with open(fifo, "rb") as f:
            while chunk := f.read(1 << 16):
                got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    cli.run("get", cli.url("blob.bin"), str(fifo))
    reader.join(timeout=30)
    assert bytes(got) == payload
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced"
    assert not (workdir / "pipe.part").exists()


def test_windows_like_smb1_first_message(smbq, workdir):
    cli = smbq_cli(smbq, "tcp", ["--smb1-negotiate"])
    exercise_every_command(cli, smbq.share, workdir / "local")
    assert "dialect=3.1.1 " in session_line(smbq)
    assert "smb1_upgrade=true" in smbq.server_log(), smbq.server_log()


# --- errors ----------------------------------------------------------------------------------

def test_error_cases_have_distinct_exit_codes(smbq, workdir):
    cli = smbq_cli(smbq, "tcp")
    p = cli.run("ls", cli.url(), password="wrong", check=False)
    assert p.returncode == EXIT_AUTH and b"NT_STATUS_LOGON_FAILURE" in p.stderr, p.stderr
    p = cli.run("ls", cli.url(share="nosuch"), check=False)
    assert p.returncode == EXIT_NO_SHARE and b"NT_STATUS_BAD_NETWORK_NAME" in p.stderr, p.stderr
    out = workdir / "missing.out"
    p = cli.run("get", cli.url("missing.bin"), str(out), check=False)
    assert p.returncode == EXIT_NOT_FOUND and b"NT_STATUS_OBJECT_NAME_NOT_FOUND" in p.stderr
    assert not out.exists()
    # One clear line on stderr.
    assert len(p.stderr.decode().strip().splitlines()) == 1, p.stderr

    q = smbq_cli(smbq, "quic")
    q.opts = ["--transport", "quic", "--pin", "sha256:" + "00" * 32]
    p = q.run("ls", q.url(), check=False)
    assert p.returncode == EXIT_CERT, p.stderr
    assert b"pin" in p.stderr.lower() or b"fingerprint" in p.stderr.lower(), p.stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_gone_mid_transfer_then_continue(workdir, transport):
    quic_port = free_udp_port()
    s = SmbqServer(workdir, quic_port=quic_port, quic_stack=stack_of(transport))
    cli = smbq_cli(s, transport)
    size = 400 << 20
    src = workdir / "src.bin"
    make_file(src, size, seed=5)
    (s.share / "src.bin").write_bytes(src.read_bytes())
    out = workdir / "out.bin"
    e = {**os.environ, "SMBQ_PASSWORD": s.password}
    # --reconnect-for 2: the server stays away, so the client gives up after 2 s rather than
    # the default minute.
    proc = subprocess.Popen([str(BINARY), "get", cli.url("src.bin"), str(out), *cli.opts,
                             "--depth", "2", "--chunk", "65536", "--reconnect-for", "2"],
                            stderr=subprocess.PIPE, env=e)
    # Stop the server once some data has arrived.
    deadline = time.time() + 60
    part = None
    while time.time() < deadline:
        parts = list(workdir.glob("out.bin*"))
        if parts and parts[0].stat().st_size > (8 << 20):
            part = parts[0]
            break
        time.sleep(0.02)
    assert part is not None, "transfer never started"
    s.stop()
    stopped = time.monotonic()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_CONN, err
    assert time.monotonic() - stopped < 30, "--reconnect-for was not honoured"
    assert b"panicked" not in err and err.strip(), err
    assert not out.exists(), "a partial download must not look complete"
    partial = part.stat().st_size
    assert 0 < partial < size

    # The server comes back (same account); --continue resumes from the partial file.
    s2 = SmbqServer(workdir, quic_port=quic_port, password=s.password,
                    quic_stack=stack_of(transport))
    try:
        cli2 = smbq_cli(s2, transport)
        p = cli2.run("get", "--continue", cli2.url("src.bin"), str(out))
        assert sha256(out) == sha256(src)
        assert not part.exists()
        # It really resumed: fewer bytes than the whole file were fetched.
        m = re.search(rb"(\d+) bytes in", p.stderr)
        assert m and int(m.group(1)) <= size - partial + (64 << 20), p.stderr
    finally:
        assert s2.stop() == 0


# --- Samba -----------------------------------------------------------------------------------

def test_against_samba_encrypted(samba, workdir):
    cli = Cli(samba.host, samba.port, samba.user, samba.password, samba.share_name, "tcp")
    exercise_every_command(cli, samba.share_path, workdir / "local")
    src = workdir / "s.bin"
    make_file(src, 64 << 20, seed=9)
    cli.run("put", str(src), cli.url("s.bin"))
    back = workdir / "s.back"
    cli.run("get", cli.url("s.bin"), str(back))
    assert sha256(back) == sha256(src) == sha256(samba.share_path / "s.bin")
    tree = workdir / "t"
    for i in range(50):
        (tree / f"d{i % 5}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 5}" / f"f{i}").write_bytes(os.urandom(i * 37))
    cli.run("put", "-r", str(tree), cli.url("t"))
    cli.run("get", "-r", cli.url("t"), str(workdir / "t2"))
    for p in tree.rglob("*"):
        if p.is_file():
            assert (workdir / "t2" / p.relative_to(tree)).read_bytes() == p.read_bytes()
    p = cli.run("ls", cli.url(), password="wrong", check=False)
    assert p.returncode == EXIT_AUTH, p.stderr


def test_against_samba_everything_after_setup_is_sealed(samba, workdir):
    """Through a recording relay: after NEGOTIATE and SESSION_SETUP, every frame our client sends
    and Samba answers is an SMB2 TRANSFORM (encrypted), and file bytes never cross in clear."""
    from samba_server import RecordingProxy, split_frames
    proxy = RecordingProxy(samba.port)
    try:
        cli = Cli(samba.host, proxy.port, samba.user, samba.password, samba.share_name, "tcp")
        marker = b"SMBQ-CLEARTEXT-MARKER-" * 4000
        (workdir / "m").write_bytes(marker)
        cli.run("put", str(workdir / "m"), cli.url("m"))
        cli.run("cat", cli.url("m"))
    finally:
        proxy.stop()
    assert proxy.connections
    for c2s, s2c in proxy.connections:
        assert b"SMBQ-CLEARTEXT-MARKER" not in c2s + s2c
        for stream in (c2s, s2c):
            frames = split_frames(stream)
            plain = [f for f in frames if f[:4] == b"\xfeSMB"]
            sealed = [f for f in frames if f[:4] == b"\xfdSMB"]
            assert sealed, "nothing was encrypted"
            # Only NEGOTIATE (0) and SESSION_SETUP (1) travel in clear.
            for f in plain:
                assert int.from_bytes(f[12:14], "little") in (0, 1), f[:64].hex()


# --- trust, fallback, credentials, client certificates ------------------------------------------

EXIT_ACCESS = 5


def make_client_cert(workdir: pathlib.Path, name: str) -> tuple:
    key, cert = workdir / f"{name}.key", workdir / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
                    "-addext", "basicConstraints=critical,CA:FALSE",
                    "-addext", "extendedKeyUsage=clientAuth"],
                   check=True, capture_output=True)
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "der"],
                         check=True, capture_output=True).stdout
    return key, cert, hashlib.sha256(der).hexdigest()


def test_quic_trust_modes(smbq, workdir):
    """--ca with the exported certificate works; --insecure works and says so; the system
    roots do not know a self-signed certificate (exit 7, and no silent fallback to TCP)."""
    base = smbq_cli(smbq, "quic")
    pem = workdir / "server.pem"
    subprocess.run([str(BINARY), "cert", "export", "--pem", str(pem), "--state-dir",
                    str(smbq.state)], check=True, capture_output=True, timeout=30)
    url = base.url()
    env = {**os.environ, "SMBQ_PASSWORD": smbq.password}

    def ls(*opts):
        return subprocess.run([str(BINARY), "ls", url, *opts], capture_output=True, env=env,
                              timeout=120, stdin=subprocess.DEVNULL)

    p = ls("--transport", "quic", "--ca", str(pem))
    assert p.returncode == 0, p.stderr
    p = ls("--transport", "quic", "--insecure")
    assert p.returncode == 0, p.stderr
    assert b"insecure" in p.stderr.lower() or b"any server certificate" in p.stderr.lower(), p.stderr
    # Default transport (QUIC, then TCP) with system roots: a trust failure must not fall back.
    p = ls()
    assert p.returncode == EXIT_CERT, p.stderr
    assert b"panicked" not in p.stderr


def test_falls_back_to_tcp_when_quic_is_off(server, workdir):
    """`server` runs TCP only: the default transport tries QUIC on the same port, gets no
    answer or a refusal, and uses TCP."""
    env = {**os.environ, "SMBQ_PASSWORD": server.password}
    (server.share / "f").write_bytes(b"fallback")
    url = f"smb://{USER}@127.0.0.1:{server.port}/share/f"
    p = subprocess.run([str(BINARY), "cat", url, "--connect-timeout", "3"], capture_output=True,
                       env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"fallback"
    assert b"tcp" in p.stderr.lower(), p.stderr


def test_credentials_file_and_no_password_on_command_line(server, workdir):
    creds = workdir / "creds"
    creds.write_text(f"username = {USER}\npassword = {server.password}\n")
    creds.chmod(0o600)
    (server.share / "c").write_bytes(b"creds")
    env = {k: v for k, v in os.environ.items() if k != "SMBQ_PASSWORD"}
    url = f"smb://127.0.0.1:{server.port}/share/c"
    p = subprocess.run([str(BINARY), "cat", url, "--transport", "tcp", "-A", str(creds)],
                       capture_output=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout == b"creds", p.stderr
    # A password inside the URL is refused rather than used.
    bad = f"smb://{USER}:{server.password}@127.0.0.1:{server.port}/share/c"
    p = subprocess.run([str(BINARY), "cat", bad, "--transport", "tcp"], capture_output=True,
                       env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 2, p.stderr


def test_client_certificate_for_access_control(workdir):
    key, cert, fp = make_client_cert(workdir, "laptop")
    other_key, other_cert, _ = make_client_cert(workdir, "stranger")
    config = f'[quic]\nclient_auth = "required"\nallow_fingerprints = ["sha256:{fp}"]\n'
    s = SmbqServer(workdir, config=config, quic_port=free_udp_port())
    try:
        cli = smbq_cli(s, "quic")
        (s.share / "x").write_bytes(b"mutual")
        p = cli.run("cat", cli.url("x"), check=False)
        assert p.returncode == EXIT_ACCESS, p.stderr
        p = cli.run("cat", cli.url("x"), "--client-cert", str(other_cert), "--client-key",
                    str(other_key), check=False)
        assert p.returncode == EXIT_ACCESS, p.stderr
        p = cli.run("cat", cli.url("x"), "--client-cert", str(cert), "--client-key", str(key))
        assert p.stdout == b"mutual"
    finally:
        assert s.stop() == 0
