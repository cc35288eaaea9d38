"""SMB over QUIC against the real binary, with a third-party client: the crates.io `smb` crate
(0.12.1, quinn + rustls) in interop/smb-rs-quic, plus that tool's raw quinn probes.

Covered: list/upload/download/delete with a big SHA-256 round trip; client certificate access
control; SMB2_TRANSPORT_CAPABILITIES over QUIC but not over TCP; hostile QUIC input (garbage
datagrams, a second stream, zero-length and oversized frames, wrong ALPN); and a tshark capture
decrypted with the server's TLS key log, showing NEGOTIATE and SESSION_SETUP inside QUIC.

SMBQ_QUIC_BIG_MB sets the big file's size (default 256)."""

import hashlib
import os
import pathlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import ROOT, BINARY, QUIC_STACKS, USER, SmbqServer, free_udp_port

TOOL_DIR = ROOT / "interop" / "smb-rs-quic"
TOOL = pathlib.Path(os.environ.get("SMB_RS_QUIC_BIN", TOOL_DIR / "target" / "release" / "smb-rs-quic"))
BIG_MB = int(os.environ.get("SMBQ_QUIC_BIG_MB", "256"))


# --- the tool ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tool():
    """Builds the interop peer once (release, its own target dir, so a rebuild is a no-op)."""
    if "SMB_RS_QUIC_BIN" not in os.environ:
        p = subprocess.run(["cargo", "build", "--release", "--locked", "--manifest-path",
                            str(TOOL_DIR / "Cargo.toml")],
                           capture_output=True, text=True, timeout=3600)
        assert p.returncode == 0, p.stderr[-5000:]
    assert TOOL.exists(), TOOL
    return TOOL


def export_der(server: SmbqServer) -> pathlib.Path:
    """The certificate the server presents, as the DER root the smb crate wants."""
    der = server.workdir / "server.der"
    p = subprocess.run([str(BINARY), "cert", "export", "--der", str(der),
                        "--state-dir", str(server.state)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    shown = subprocess.run([str(BINARY), "cert", "show", "--state-dir", str(server.state)],
                           capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "sha256:" + hashlib.sha256(der.read_bytes()).hexdigest()
    return der


def start(workdir, **kw) -> SmbqServer:
    s = SmbqServer(workdir, quic_port=free_udp_port(), **kw)
    assert s.quic_addr == f"127.0.0.1:{s.quic_port}", s.ready_line
    s.der = export_der(s)
    return s


def stop_clean(s: SmbqServer):
    rc = s.stop()
    log = s.server_log()
    assert "panicked" not in log, log
    assert rc == 0, f"server exit code {rc}\n{log}"


@pytest.fixture(params=QUIC_STACKS)
def qserver(workdir, request):
    """A server on each QUIC stack: the third-party client meets quinn and MsQuic alike."""
    s = start(workdir, quic_stack=request.param)
    yield s
    stop_clean(s)


def smb(server, *args, timeout=120, step=30, tcp=False, ca=None):
    """Runs one smb-crate command (ls/put/get/rm) against the server; returns (rc, out)."""
    cmd, rest = args[0], args[1:]
    argv = [str(TOOL), cmd, "--port", str(server.port if tcp else server.quic_port),
            "--timeout", str(step)]
    argv += ["--tcp"] if tcp else ["--ca", str(ca or server.der)]
    env = dict(os.environ, SMBQ_USER=USER, SMBQ_PASSWORD=server.password)
    try:
        p = subprocess.run(argv + list(rest), capture_output=True, text=True, timeout=timeout,
                           env=env)
    except subprocess.TimeoutExpired as e:
        return 124, f"timed out after {timeout}s: {e.stdout}{e.stderr}"
    return p.returncode, p.stdout + p.stderr


def raw(server, action, *extra, timeout=60) -> dict:
    """Runs a raw quinn probe; returns its key=value report."""
    argv = [str(TOOL), "raw", "--port", str(server.quic_port), "--action", action] + list(extra)
    if "--insecure" not in extra and "--ca" not in extra:
        argv += ["--ca", str(server.der)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        out[k] = v
    out["_text"] = p.stdout + p.stderr
    return out


def ls_names(server, **kw) -> set:
    rc, out = smb(server, "ls", **kw)
    assert rc == 0, out
    return {line.split("\t")[0] for line in out.splitlines() if "\t" in line}


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def quic_sessions(log: str) -> list:
    return [l for l in log.splitlines()
            if "session established" in l and re.search(r'transport="?quic', l)]


# --- SMB NEGOTIATE by hand (MS-SMB2 2.2.3 / 2.2.4), for the TCP side --------------------------

def negotiate_request(transport_caps: bool) -> bytes:
    """A 3.1.1-only NEGOTIATE with preauth (SHA-512), AES-128-GCM and optionally
    SMB2_TRANSPORT_CAPABILITIES(ACCEPT_TRANSPORT_LEVEL_SECURITY)."""
    hdr = b"\xfeSMB" + struct.pack("<HHIHHIIQIIQ16s", 64, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, b"\0" * 16)
    contexts = [(1, struct.pack("<HHH", 1, 32, 1) + b"\xa5" * 32), (2, struct.pack("<HH", 1, 2))]
    if transport_caps:
        contexts.append((6, struct.pack("<I", 1)))
    body = struct.pack("<HHHHI16sIHH", 36, 1, 1, 0, 0, b"\x5a" * 16, 64 + 40, len(contexts), 0)
    body += struct.pack("<H", 0x0311) + b"\0\0"
    blob = b""
    for kind, data in contexts:
        blob += b"\0" * (-len(blob) % 8)
        blob += struct.pack("<HHI", kind, len(data), 0) + data
    return hdr + body + blob


def parse_negotiate_response(msg: bytes) -> tuple:
    """(status, dialect, {context type: data})."""
    assert msg[:4] == b"\xfeSMB", msg[:16].hex()
    status, command = struct.unpack_from("<IH", msg, 8)
    assert command == 0
    dialect, count = struct.unpack_from("<HH", msg, 64 + 4)
    (offset,) = struct.unpack_from("<I", msg, 64 + 60)
    contexts = {}
    for _ in range(count if dialect == 0x0311 else 0):
        offset += -offset % 8
        kind, length = struct.unpack_from("<HH", msg, offset)
        contexts[kind] = msg[offset + 8:offset + 8 + length]
        offset += 8 + length
    return status, dialect, contexts


def tcp_negotiate(server, transport_caps: bool) -> bytes:
    req = negotiate_request(transport_caps)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(struct.pack(">I", len(req)) + req)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "server closed the TCP connection"
            buf += chunk
        return buf[4:4 + struct.unpack(">I", buf[:4])[0]]


# --- the tests ----------------------------------------------------------------------------------

def test_list_put_get_delete_big_file(qserver, tool, workdir):
    (qserver.share / "hello.txt").write_text("hello over quic\n")
    (qserver.share / "sub").mkdir()
    names = ls_names(qserver)
    assert {"hello.txt", "sub"} <= names, names

    big = workdir / "big.bin"
    with open(big, "wb") as f:
        for _ in range(BIG_MB):
            f.write(os.urandom(1 << 20))
    want = sha256(big)

    rc, out = smb(qserver, "put", str(big), "big.bin", timeout=900, step=60)
    assert rc == 0, out
    put = re.search(r"put bytes=(\d+) secs=([\d.]+) mib_per_s=([\d.]+)", out)
    assert put and int(put.group(1)) == BIG_MB << 20, out
    assert sha256(qserver.share / "big.bin") == want

    back = workdir / "back.bin"
    rc, out = smb(qserver, "get", "big.bin", str(back), timeout=900, step=60)
    assert rc == 0, out
    get = re.search(r"get bytes=(\d+) secs=([\d.]+) mib_per_s=([\d.]+) sha256=(\w+)", out)
    assert get and get.group(4) == want, out
    assert sha256(back) == want
    print(f"\nQUIC {BIG_MB} MiB: put {put.group(2)} s ({put.group(3)} MiB/s), "
          f"get {get.group(2)} s ({get.group(3)} MiB/s)")

    rc, out = smb(qserver, "rm", "big.bin")
    assert rc == 0, out
    assert not (qserver.share / "big.bin").exists()
    assert "big.bin" not in ls_names(qserver)

    # Every session above came in over QUIC, and the client got the 3.1.1 it asked for.
    sessions = quic_sessions(qserver.server_log())
    assert len(sessions) >= 5, qserver.server_log()
    assert all("dialect=3.1.1 " in l for l in sessions), sessions


def test_smb1_multi_protocol_negotiate_over_quic(qserver, tool):
    """The crate's default start: the SMB1 multi-protocol NEGOTIATE, then SMB2, over QUIC."""
    (qserver.share / "a.txt").write_text("a")
    rc, out = smb(qserver, "ls", "--multi-protocol")
    assert rc == 0, out
    assert "a.txt" in out


def test_client_that_encrypts_anyway_over_quic(qserver, tool, workdir):
    """smb 0.12.1 offers ACCEPT_TRANSPORT_LEVEL_SECURITY, ignores the answer, and encrypts
    when told to require encryption. The server must still take encrypted traffic."""
    data = workdir / "enc.bin"
    data.write_bytes(os.urandom(3 << 20))
    rc, out = smb(qserver, "put", str(data), "enc.bin", "--encrypt", "required", step=8)
    assert rc == 0, out + qserver.server_log()
    back = workdir / "enc-back.bin"
    rc, out = smb(qserver, "get", "enc.bin", str(back), "--encrypt", "required", step=8)
    assert rc == 0, out
    assert sha256(back) == sha256(data)
    assert re.search(r"encrypted=[1-9]", qserver.server_log()), qserver.server_log()


def test_wrong_certificate_is_rejected_by_the_client(qserver, tool, workdir):
    """The client really verifies: a different root makes the handshake fail."""
    key, cert = make_cert(workdir, "other-root")
    der = workdir / "other.der"
    subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "der", "-out", str(der)],
                   check=True)
    rc, out = smb(qserver, "ls", ca=der, timeout=60, step=10)
    assert rc != 0 and "connect:" in out, out
    # The same command with the server's own certificate works.
    rc, out = smb(qserver, "ls", timeout=60, step=10)
    assert rc == 0, out


def make_cert(workdir: pathlib.Path, name: str) -> tuple:
    key, cert = workdir / f"{name}.key", workdir / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
                    "-addext", "basicConstraints=critical,CA:FALSE",
                    "-addext", "extendedKeyUsage=clientAuth"],
                   check=True, capture_output=True)
    return key, cert


def fingerprint(cert: pathlib.Path) -> str:
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "der"],
                         check=True, capture_output=True).stdout
    return hashlib.sha256(der).hexdigest()


def test_client_certificate_access_control(workdir, tool):
    certs = {n: make_cert(workdir, n) for n in ("allowed", "unknown", "denied")}
    fp = {n: fingerprint(c) for n, (_, c) in certs.items()}
    # "denied" is on both lists: deny wins.
    config = ('[quic]\nclient_auth = "required"\n'
              f'allow_fingerprints = ["sha256:{fp["allowed"]}", "sha256:{fp["denied"]}"]\n'
              f'deny_fingerprints = ["sha256:{fp["denied"]}"]\n')
    s = start(workdir, config=config, env={"SMBQ_LOG": "info,smbq_server=debug"})
    try:
        def probe(name=None):
            extra = ["--insecure", "--timeout", "10", "--linger-ms", "1500"]
            if name:
                key, cert = certs[name]
                extra += ["--cert", str(cert), "--key", str(key)]
            return raw(s, "negotiate", *extra)

        def refused(r, code):
            """Refused in the TLS handshake: a QUIC CRYPTO_ERROR carrying the TLS alert
            (RFC 9001 4.8: 0x100 + alert), and no NEGOTIATE answer."""
            assert r.get("outcome") in ("handshake-failed", "connection-closed"), r["_text"]
            assert r.get("close_kind") == "transport", r["_text"]
            assert r.get("close_code") == code, r["_text"]
            assert "dialect" not in r, r["_text"]

        # No certificate: certificate_required (116).
        refused(probe(), "0x174")
        assert re.search(r"QUIC handshake failed.*(no certificates|certificate)", s.server_log())
        # Not on the allow list, and on the deny list (deny wins): access_denied (49).
        refused(probe("unknown"), "0x131")
        assert re.search(r"client certificate refused: not allowed.*" + fp["unknown"],
                         s.server_log()), s.server_log()
        refused(probe("denied"), "0x131")
        assert re.search(r"client certificate refused: denied.*" + fp["denied"],
                         s.server_log()), s.server_log()
        # No refused client reached SMB: no connection span, no NEGOTIATE, no session.
        log = s.server_log()
        assert "session established" not in log, log
        assert not re.search(r'transport="?quic', log), log

        assert "quic_connect" not in log, log
        r = probe("allowed")
        assert r.get("outcome") == "response", r["_text"]
        assert r.get("status") == "0x00000000" and r.get("dialect") == "0x0311", r["_text"]
        assert re.search(r'transport="?quic', s.server_log()), s.server_log()
        # One audit line for the admitted connection, naming its certificate (issue 34 item 5).
        audit = [l for l in s.server_log().splitlines() if "quic_connect" in l]
        assert len(audit) == 1, audit
        assert "smbq::audit" in audit[0] and fp["allowed"] in audit[0], audit
        assert "subject=CN=allowed" in audit[0], audit

        # The smb crate has no client certificate to offer, so it is refused as well.
        rc, out = smb(s, "ls", timeout=60, step=10)
        assert rc != 0 and "connect:" in out, out
    finally:
        stop_clean(s)


def test_congestion_controller_is_configurable(workdir, tool):
    """BBR by default (docs/benchmarks.md: Cubic collapses under random loss); the `[quic]
    congestion` key reaches the listener, and an unknown name is refused at startup."""
    for config, want in ((None, "bbr"), ('[quic]\ncongestion = "cubic"\n', "cubic"),
                         ('[quic]\ncongestion = "NewReno"\n', "newreno")):
        d = workdir / want
        d.mkdir()
        s = start(d, config=config, env={"SMBQ_LOG": "info"})
        try:
            r = raw(s, "negotiate", "--insecure", "--timeout", "10")
            assert r.get("dialect"), r["_text"]
        finally:
            assert s.stop() == 0
        assert re.search(rf'SMB over QUIC listening.*congestion="?{want}"?\b', s.server_log()), \
            s.server_log()
    bad = workdir / "bad"
    bad.mkdir()
    (bad / "smbq.toml").write_text('[quic]\ncongestion = "vegas"\n')
    p = subprocess.run([str(BINARY), "serve", str(bad / "share"), "--config", str(bad / "smbq.toml"),
                        "--tcp-port", "0", "--quic-port", "0", "--state-dir", str(bad / "state")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "congestion" in p.stderr and "vegas" in p.stderr, p.stderr


@pytest.mark.parametrize("stack", QUIC_STACKS)
def test_transport_capabilities_only_over_quic(workdir, tool, stack):
    s = start(workdir, quic_stack=stack)
    try:
        r = raw(s, "negotiate", "--transport-caps")
        assert r.get("outcome") == "response", r["_text"]
        status, dialect, ctx = parse_negotiate_response(bytes.fromhex(r["response_hex"]))
        assert (status, dialect) == (0, 0x0311)
        assert ctx.get(6) == struct.pack("<I", 1), ctx
        assert r["transport_caps"] == "01000000"

        # Not offered by the client: not answered.
        r = raw(s, "negotiate")
        _, _, ctx = parse_negotiate_response(bytes.fromhex(r["response_hex"]))
        assert 6 not in ctx, ctx

        # The same request over TCP: TLS does not protect TCP, so no transport security.
        status, dialect, ctx = parse_negotiate_response(tcp_negotiate(s, True))
        assert (status, dialect) == (0, 0x0311)
        assert 1 in ctx and 6 not in ctx, ctx
    finally:
        stop_clean(s)

    # Switched off in the configuration: QUIC answers like TCP.
    off = workdir / "off"
    s = start(off, config="[quic]\ntransport_security = false\n", quic_stack=stack)
    try:
        r = raw(s, "negotiate", "--transport-caps")
        _, dialect, ctx = parse_negotiate_response(bytes.fromhex(r["response_hex"]))
        assert dialect == 0x0311 and 6 not in ctx, ctx
    finally:
        stop_clean(s)


def quic_initial_like(version: int, size: int) -> bytes:
    """A long-header Initial-looking datagram with random connection ids and a junk payload."""
    dcid, scid = os.urandom(8), os.urandom(8)
    head = bytes([0xc0]) + struct.pack(">I", version) + bytes([8]) + dcid + bytes([8]) + scid
    return head + os.urandom(max(0, size - len(head)))


def test_hostile_quic_input(qserver, tool):
    (qserver.share / "still-here.txt").write_text("x")
    addr = ("127.0.0.1", qserver.quic_port)

    # Garbage datagrams: random bytes, short-header junk, Initials with a good and a bad version.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        for size in (0, 1, 7, 100, 1200, 1500, 9000):
            u.sendto(os.urandom(size), addr)
        for _ in range(20):
            u.sendto(bytes([0x40]) + os.urandom(60), addr)
            u.sendto(quic_initial_like(1, 1200), addr)
            u.sendto(quic_initial_like(0x0a0a0a0a, 1200), addr)
        u.sendto(quic_initial_like(1, 300), addr)  # under the 1200-byte Initial minimum

    # Bad frames on the SMB stream: no answer, and the connection is closed (not left idle).
    clean = ("connection-closed", "stream-reset", "stream-stopped", "stream-finished")
    for action in ("zero-frame", "oversized-frame", "garbage"):
        r = raw(qserver, action, "--timeout", "10", "--linger-ms", "3000")
        assert r.get("handshake") == "ok", r["_text"]
        assert r.get("outcome") in clean, (action, r["_text"])
        assert r.get("connection") == "closed" or r.get("outcome") == "connection-closed", \
            (action, r["_text"])

    # A second stream: SMB over QUIC is one stream per connection (MS-SMB2 2.1), so the server
    # either never lets it open (stream limit 1) or refuses it; it is never answered.
    r = raw(qserver, "second-stream", "--timeout", "10")
    assert r.get("first_outcome") == "response", r["_text"]
    assert r.get("first_dialect") == "0x0311", r["_text"]
    assert r.get("second_outcome") in clean + ("blocked",), r["_text"]
    if r.get("second_outcome") != "blocked":
        assert "QUIC peer opened a second stream" in qserver.server_log()

    # No SMB over another ALPN.
    r = raw(qserver, "negotiate", "--alpn", "h3", "--timeout", "10")
    assert r.get("outcome") in ("handshake-failed", "connection-closed"), r["_text"]
    assert "dialect" not in r, r["_text"]

    # The server survived all of it and still serves.
    assert qserver.proc.poll() is None
    assert "still-here.txt" in ls_names(qserver)
    log = qserver.server_log()
    for reason in ("zero-length frame", "exceeds the limit", "frame header does not start"):
        assert reason in log, (reason, log)


def tshark_fields(cap, keylog, port, *fields, extra=()):
    args = ["tshark", "-n", "-r", str(cap), "-d", f"udp.port=={port},quic",
            "-o", f"tls.keylog_file:{keylog}", "-T", "fields", "-E", "occurrence=a",
            "-E", "aggregator=,"] + list(extra)
    for f in fields:
        args += ["-e", f]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [line.split("\t") for line in p.stdout.splitlines()]


def smb2_commands(rows, port) -> tuple:
    """SMB2 commands seen in decrypted QUIC stream data, (client->server, server->client).
    tshark 4.0 does not dissect SMB2 over QUIC, so look for FE 'SMB' headers by hand."""
    to_server, to_client = b"", b""
    for dport, data in rows:
        # Frames without data (a FIN alone) print as "<MISSING>".
        blob = b"".join(bytes.fromhex(d.replace(":", "")) for d in data.split(",")
                        if re.fullmatch(r"[0-9a-fA-F:]*", d))
        if int(dport) == port:
            to_server += blob
        else:
            to_client += blob

    def commands(b):
        return {struct.unpack_from("<H", b, m.start() + 12)[0]
                for m in re.finditer(rb"\xfeSMB", b) if m.start() + 14 <= len(b)}
    return commands(to_server), commands(to_client)


@pytest.mark.skipif(shutil.which("tshark") is None and not os.environ.get("CI"),
                    reason="tshark not installed (scripts/test.sh installs it)")
def test_tshark_sees_negotiate_and_session_setup_inside_quic(workdir, tool):
    keylog = workdir / "keys.log"
    s = start(workdir, env={"SSLKEYLOGFILE": str(keylog)})
    cap = workdir / "cap.pcapng"
    try:
        (s.share / "seen.txt").write_text("x")
        ts = subprocess.Popen(["tshark", "-n", "-i", "lo", "-f", f"udp port {s.quic_port}",
                               "-w", str(cap)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 30
            line = ""
            while time.time() < deadline:
                line = ts.stderr.readline()
                if "Capturing on" in line or not line:
                    break
            assert "Capturing on" in line, line
            time.sleep(0.5)
            assert "seen.txt" in ls_names(s)
            time.sleep(0.5)
        finally:
            ts.send_signal(signal.SIGINT)
            ts.wait(timeout=30)
        assert keylog.exists() and "CLIENT_HANDSHAKE_TRAFFIC_SECRET" in keylog.read_text()

        raw_bytes = cap.read_bytes()
        assert b"\xfeSMB" not in raw_bytes, "SMB2 in the clear on the wire"

        rows = tshark_fields(cap, keylog, s.quic_port, "udp.dstport", "quic.stream_data",
                             extra=["-Y", "quic.stream_data"])
        to_server, to_client = smb2_commands(rows, s.quic_port)
        assert {0, 1} <= to_server, (to_server, rows[:5])
        assert {0, 1} <= to_client, (to_client, rows[:5])

        # Without the key log the same capture shows no stream data at all.
        empty = workdir / "empty.log"
        empty.write_text("")
        assert tshark_fields(cap, empty, s.quic_port, "quic.stream_data",
                             extra=["-Y", "quic.stream_data"]) == []
    finally:
        stop_clean(s)
