"""Samba's own client over SMB over QUIC (issue 34): smbclient 4.25+ from Debian's unstable
suite (ngtcp2 + GnuTLS, the first QUIC stack tested here that is neither quinn/rustls nor
MsQuic) against the real smbq binary, protected once by the transport alone
(`client smb encryption over quic = no`, SMB2_TRANSPORT_CAPABILITIES) and once by SMB3
encryption inside QUIC; and the same client over TCP at each dialect from 2.0.2 to 3.1.1.

The regression this guards: before smbq stopped sending TLS 1.3 session tickets by default,
this client failed right after NEGOTIATE (NGTCP2_ERR_CRYPTO; docs/interop.md has the root
cause, a use-after-free of the GnuTLS session in Samba's tstream_tls_ngtcp2)."""

import hashlib
import os
import re

import pytest

from conftest import USER, SmbqServer, free_udp_port
from samba_unstable import HOST

# Uploads of more than a few MiB slow down quadratically in this client (a Samba bug,
# docs/interop.md), so what it puts is small; what it gets is the big file of the QUIC tests.
SIZE = 256 << 10
BIG_MB = int(os.environ.get("SMBQ_QUIC_BIG_MB", "256"))


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("protection", ["transport", "smb3-encryption"])
def test_samba_smbclient_over_quic(unstable, workdir, protection):
    version = unstable.version()
    assert re.search(r"Version 4\.(2[5-9]|[3-9]\d)", version), version
    server = SmbqServer(workdir, quic_port=free_udp_port())
    up, down, big = "/tmp/smbq-up.bin", "/tmp/smbq-down.bin", "/tmp/smbq-big.bin"
    try:
        unstable.path(up).write_bytes(os.urandom(SIZE))
        unstable.path(down).unlink(missing_ok=True)
        unstable.path(big).unlink(missing_ok=True)
        with open(server.share / "big.bin", "wb") as f:
            for _ in range(BIG_MB):
                f.write(os.urandom(1 << 20))
        port = server.quic_addr.rsplit(":", 1)[1]
        if protection == "transport":
            # The client offers SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY; smbq accepts it.
            protect = ["--option=client smb encryption over quic=no"]
        else:
            protect = ["--option=client smb encryption over quic=yes",
                       "--option=client smb encrypt=required"]
        p = unstable.run([
            "smbclient", f"//{HOST}/share", "-U", f"{USER}%{server.password}",
            f"--option=client smb transports=quic:{port}",
            "--option=tls verify peer=no_check", *protect,
            "-c", f"put {up} up.bin; get up.bin {down}; get big.bin {big}; ls"], timeout=300)
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        assert "up.bin" in p.stdout, out
        assert sha256(server.share / "up.bin") == sha256(unstable.path(up))
        assert sha256(unstable.path(down)) == sha256(unstable.path(up))
        assert sha256(unstable.path(big)) == sha256(server.share / "big.bin")
    finally:
        unstable.path(big).unlink(missing_ok=True)
        assert server.stop() == 0, server.server_log()
    # The server logs each connection's encrypted frames: none where TLS alone protects it.
    closed = re.findall(r'transport="quic".*connection closed frames=(\d+) encrypted=(\d+)',
                        server.server_log())
    assert closed, server.server_log()
    frames, encrypted = map(int, closed[-1])
    if protection == "transport":
        assert encrypted == 0, closed
    else:
        # All but NEGOTIATE and the two SESSION_SETUP legs, sent before the session has keys.
        assert encrypted >= frames - 3, closed


@pytest.mark.parametrize("cert_name, accepted", [("smbqtest", True), ("elsewhere.example", False)])
def test_samba_smbclient_checks_the_certificate_over_quic(unstable, workdir, cert_name, accepted):
    """`tls verify peer = ca_and_name` with smbq's exported certificate as the CA file: GnuTLS
    accepts the server when the name the client dialled is among the certificate's DNS names,
    and refuses it, before any SMB message, when it is not."""
    import subprocess
    from conftest import BINARY
    state = workdir / "state"
    made = subprocess.run([str(BINARY), "cert", "create", "--state-dir", str(state),
                           "--name", cert_name], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    ca = "/tmp/smbq-ca.pem"
    exported = subprocess.run([str(BINARY), "cert", "export", "--pem", str(unstable.path(ca)),
                               "--state-dir", str(state)], capture_output=True, text=True,
                              timeout=30)
    assert exported.returncode == 0, exported.stderr
    server = SmbqServer(workdir, quic_port=free_udp_port())
    try:
        port = server.quic_addr.rsplit(":", 1)[1]
        p = unstable.run([
            "smbclient", f"//{HOST}/share", "-U", f"{USER}%{server.password}",
            f"--option=client smb transports=quic:{port}",
            "--option=tls verify peer=ca_and_name", f"--option=tls cafile={ca}",
            "-c", "ls"], timeout=120)
    finally:
        assert server.stop() == 0, server.server_log()
    out = p.stdout + p.stderr
    log = server.server_log()
    if accepted:
        assert p.returncode == 0, out
        assert "session established" in log, log
    else:
        assert p.returncode != 0, out
        # GnuTLS's verdict: "check failed for verify_peer[ca_and_name] and peer_name[smbqtest]".
        assert "check failed for verify_peer[ca_and_name]" in out, out
        assert "session established" not in log, log


# Samba 4.25's smbclient over TCP at each dialect it can be held to, and what smbq logs for it.
DIALECTS = {"SMB2_02": "2.0.2", "SMB2_10": "2.1", "SMB3_00": "3.0", "SMB3_02": "3.0.2",
            "SMB3_11": "3.1.1"}


@pytest.mark.parametrize("protocol", list(DIALECTS))
def test_samba_425_smbclient_over_tcp_at_each_dialect(unstable, workdir, protocol):
    server = SmbqServer(workdir)
    up, down = "/tmp/smbq-tcp-up.bin", "/tmp/smbq-tcp-down.bin"
    try:
        unstable.path(up).write_bytes(os.urandom(SIZE))
        unstable.path(down).unlink(missing_ok=True)
        p = unstable.run([
            "smbclient", f"//{HOST}/share", "-p", str(server.port),
            "-U", f"{USER}%{server.password}",
            f"--option=client min protocol={protocol}", f"--option=client max protocol={protocol}",
            "-c", f"put {up} up.bin; get up.bin {down}; ls"], timeout=120)
    finally:
        assert server.stop() == 0, server.server_log()
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "up.bin" in p.stdout, out
    assert sha256(server.share / "up.bin") == sha256(unstable.path(up))
    assert sha256(unstable.path(down)) == sha256(unstable.path(up))
    sessions = [l for l in server.server_log().splitlines() if "session established" in l]
    assert any(f"dialect={DIALECTS[protocol]} " in l and 'transport="tcp"' in l
               for l in sessions), sessions
