"""Kerberos logons against a real MIT KDC (tests/interop/kdc.py) started for this module:
Samba's smbclient with --use-kerberos=required lists and copies files, and every kind of bad
ticket is refused with the NTSTATUS Windows answers and a logged reason.

smbclient refuses Kerberos to "localhost" or an IP address, so it names the server
files.smbq.test (the service principal cifs/files.smbq.test) and connects with -I 127.0.0.1.
Replayed and expired AP-REQs are real smbclient tokens caught by a relay and sent again by
a raw SMB2 client, since no Kerberos library sends those on purpose."""

import http.client
import os
import re
import secrets
import select
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest

import smbclient
from conftest import BINARY, USER, SmbqServer, free_port, free_udp_port
from kdc import SERVER_HOST, Kdc

SERVICE = f"cifs/{SERVER_HOST}"
PASSWORD = "Krb-" + secrets.token_hex(6)


@pytest.fixture(scope="module")
def kdc(tmp_path_factory):
    with Kdc(tmp_path_factory.mktemp("kdc") / "realm") as k:
        k.add_principal(SERVICE)
        for host in ("alt", "rekeyed", "other"):
            k.add_principal(f"cifs/{host}.smbq.test")
        k.add_principal(USER, PASSWORD)
        k.add_principal("stranger", PASSWORD)
        yield k


def keytab(kdc, path, *names):
    for n in names:
        kdc.export_keytab(kdc.principal(n), path, norandkey=True)
    return path


def kerberos_server(workdir, kdc, extra="", names=(SERVICE,), env=None, quic=False):
    kt = keytab(kdc, workdir / "smb.keytab", *names)
    config = f'[kerberos]\nkeytab = "{kt}"\nrealm = "{kdc.realm}"\n{extra}'
    return SmbqServer(workdir, config=config, env={**kdc.env(), **(env or {})},
                      quic_port=free_udp_port() if quic else 0)


def ticket(kdc, workdir, user=USER, lifetime=None):
    cc = workdir / f"{user}-{secrets.token_hex(3)}.cc"
    return kdc.kinit(kdc.principal(user), PASSWORD, cc, lifetime=lifetime)


def krb_smbclient(server, kdc, ccache, command, host=SERVER_HOST, port=None, extra=()):
    args = ["smbclient", "-s", "/dev/null", f"//{host}/share", "-I", "127.0.0.1",
            "-p", str(port or server.port), "--use-kerberos=required",
            f"--use-krb5-ccache=FILE:{ccache}", *extra, "-c", command]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60,
                       env={**os.environ, **kdc.env(ccache=ccache)})
    return p.returncode, p.stdout + p.stderr


def wait_for_log(server, pattern, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = re.search(pattern, server.server_log())
        if m:
            return m
        time.sleep(0.1)
    raise AssertionError(f"{pattern!r} not in the server log:\n{server.server_log()[-3000:]}")


def test_smbclient_logs_on_with_kerberos_lists_and_copies(workdir, kdc):
    server = kerberos_server(workdir, kdc)
    try:
        cc = ticket(kdc, workdir)
        src = workdir / "up.bin"
        src.write_bytes(os.urandom(300_000))
        back = workdir / "back.bin"
        rc, out = krb_smbclient(server, kdc, cc, f"put {src} up.bin; ls; get up.bin {back}")
        assert rc == 0, out
        assert "up.bin" in out
        assert (server.share / "up.bin").read_bytes() == src.read_bytes()
        assert back.read_bytes() == src.read_bytes()
        wait_for_log(server, rf'result="success".*user={USER} auth="kerberos"')
        # Encrypted with AES-256: its keys derive from the whole 32-byte Kerberos key
        # (MS-SMB2 3.3.5.5.3), not the 16-byte SessionKey.
        for cipher in ("AES-256-GCM", "AES-128-CCM"):
            rc, out = krb_smbclient(server, kdc, cc, f"get up.bin {back}", extra=[
                "--client-protection=encrypt",
                f"--option=client smb3 encryption algorithms={cipher}"])
            assert rc == 0, (cipher, out)
            assert back.read_bytes() == src.read_bytes()
            wait_for_log(server, rf'auth="kerberos".*cipher={cipher}')
        # NTLM is still offered next to Kerberos by default.
        rc, out = smbclient.run(server, "ls")
        assert rc == 0, out
        wait_for_log(server, rf'result="success".*user={USER} auth="ntlm"')
    finally:
        assert server.stop() == 0, server.server_log()


def test_ntlm_off_leaves_only_kerberos(workdir, kdc):
    server = kerberos_server(workdir, kdc, extra="ntlm = false\n")
    try:
        rc, out = smbclient.run(server, "ls")
        assert rc != 0 and "NT_STATUS_NTLM_BLOCKED" in out, out
        wait_for_log(server, r'result="failure".*reason="NTLM is turned off')
        rc, out = krb_smbclient(server, kdc, ticket(kdc, workdir), "ls")
        assert rc == 0, out
    finally:
        assert server.stop() == 0, server.server_log()


def test_bad_tickets_are_refused_with_logon_failure_and_a_reason(workdir, kdc):
    # The server holds keys for files, alt and rekeyed; only files and rekeyed are configured
    # principals. rekeyed then gets a new key at the KDC, so the server's copy is wrong.
    names = (SERVICE, "cifs/alt.smbq.test", "cifs/rekeyed.smbq.test")
    allowed = f'principals = ["{kdc.principal(SERVICE)}", "{kdc.principal(names[2])}"]\n'
    server = kerberos_server(workdir, kdc, extra=allowed, names=names)
    try:
        kdc.export_keytab(kdc.principal(names[2]), workdir / "throwaway.keytab")
        cc = ticket(kdc, workdir)
        cases = [
            ("rekeyed.smbq.test", cc, r'user="" reason=.*rekeyed.smbq.test.*kvno \d+ not found'),
            ("other.smbq.test", cc, r'user="" reason=.*other.smbq.test.*not found in keytab'),
            ("alt.smbq.test", cc, r'reason="the ticket is for cifs/alt.smbq.test'),
            (SERVER_HOST, ticket(kdc, workdir, "stranger"),
             r'user="stranger@SMBQ.TEST" reason="no account'),
        ]
        for host, ccache, reason in cases:
            rc, out = krb_smbclient(server, kdc, ccache, "ls", host=host)
            assert rc != 0 and "NT_STATUS_LOGON_FAILURE" in out, (host, out)
            wait_for_log(server, r'result="failure".*' + reason)
        # The good ticket still works after all that.
        rc, out = krb_smbclient(server, kdc, cc, "ls")
        assert rc == 0, out
        # Rotating keys needs no restart or reload: MIT reads the keytab file at each logon.
        keytab(kdc, workdir / "smb.keytab", names[2])
        rc, out = krb_smbclient(server, kdc, cc, "ls", host="rekeyed.smbq.test")
        assert rc == 0, out
    finally:
        assert server.stop() == 0, server.server_log()


class Relay:
    """A TCP relay between smbclient and the server that keeps the security buffer of the
    first SESSION_SETUP request; with `swallow`, that request is never delivered."""

    def __init__(self, target_port, swallow=False):
        self.target_port, self.swallow = target_port, swallow
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.blob = None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.target_port))
        threading.Thread(target=self.pump, args=(server, client), daemon=True).start()
        buf = b""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                    n = struct.unpack(">I", buf[:4])[0]
                    frame, buf = buf[:4 + n], buf[4 + n:]
                    msg = frame[4:]
                    if self.blob is None and msg[:4] == b"\xfeSMB" and \
                            struct.unpack("<H", msg[12:14])[0] == 1:
                        off, length = struct.unpack("<HH", msg[76:80])
                        self.blob = msg[off:off + length]
                        if self.swallow:
                            return
                    server.sendall(frame)
        except OSError:
            pass
        finally:
            client.close()
            server.close()

    @staticmethod
    def pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            dst.close()


def raw_session_setup(port, blob):
    """NEGOTIATE (SMB 2.0.2) then one SESSION_SETUP carrying `blob`; the setup's NTSTATUS."""
    def header(command, message_id):
        return struct.pack("<4sHHIHHIIQIIQ16s", b"\xfeSMB", 64, 0, 0, command, 1, 0, 0,
                           message_id, 0, 0, 0, b"\0" * 16)

    def exchange(s, msg):
        s.sendall(struct.pack(">I", len(msg)) + msg)
        n = struct.unpack(">I", recv_exact(s, 4))[0]
        return recv_exact(s, n)

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        neg = header(0, 0) + struct.pack("<HHHHI16sQH", 36, 1, 1, 0, 0, os.urandom(16), 0,
                                         0x0202)
        assert struct.unpack("<I", exchange(s, neg)[8:12])[0] == 0
        setup = header(1, 1) + struct.pack("<HBBIIHHQ", 25, 0, 1, 0, 0, 88, len(blob), 0) + blob
        return struct.unpack("<I", exchange(s, setup)[8:12])[0]


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    return data


LOGON_FAILURE = 0xC000006D


def test_replayed_authenticator_is_refused(workdir, kdc):
    server = kerberos_server(workdir, kdc)
    try:
        relay = Relay(server.port)
        rc, out = krb_smbclient(server, kdc, ticket(kdc, workdir), "ls", port=relay.port)
        assert rc == 0, out
        assert relay.blob, "the relay saw no SESSION_SETUP"
        assert raw_session_setup(server.port, relay.blob) == LOGON_FAILURE
        wait_for_log(server, r'result="failure".*reason=.*(?i:replay)')
    finally:
        assert server.stop() == 0, server.server_log()


def strict_clock_server(workdir, kdc):
    """A server allowing one second of clock skew instead of MIT's five minutes, so a ticket of
    four seconds is expired for it six seconds later (MIT counts the skew past a ticket's end)."""
    conf = workdir / "krb5-server.conf"
    conf.write_text(kdc.krb5_conf.read_text().replace("[libdefaults]",
                                                       "[libdefaults]\n    clockskew = 1", 1))
    return kerberos_server(workdir, kdc, env={"KRB5_CONFIG": str(conf)})


def test_expired_ticket_is_refused(workdir, kdc):
    server = strict_clock_server(workdir, kdc)
    try:
        relay = Relay(server.port, swallow=True)
        krb_smbclient(server, kdc, ticket(kdc, workdir, lifetime="4s"), "ls", port=relay.port)
        assert relay.blob, "the relay saw no SESSION_SETUP"
        time.sleep(6)
        assert raw_session_setup(server.port, relay.blob) == LOGON_FAILURE
        wait_for_log(server, r'result="failure".*reason=.*(?i:expired)')
    finally:
        assert server.stop() == 0, server.server_log()


def test_session_expires_with_its_ticket(workdir, kdc):
    """MS-SMB2 3.3.5.2.9: past the ticket's end, requests get NETWORK_SESSION_EXPIRED (the
    client should re-authenticate; smbclient reports it)."""
    server = strict_clock_server(workdir, kdc)
    try:
        cc = ticket(kdc, workdir, lifetime="4s")
        args = ["smbclient", "-s", "/dev/null", f"//{SERVER_HOST}/share", "-I", "127.0.0.1",
                "-p", str(server.port), "--use-kerberos=required",
                f"--use-krb5-ccache=FILE:{cc}"]
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env={**os.environ, **kdc.env(ccache=cc)})
        try:
            p.stdin.write(b"ls\n")
            p.stdin.flush()
            time.sleep(7)
            p.stdin.write(b"ls\nquit\n")
            p.stdin.close()
            out = p.stdout.read().decode(errors="replace")
            p.wait(30)
        finally:
            p.kill()
        first, _, second = out.partition("blocks available")
        assert "NT_STATUS" not in first, out
        assert "NT_STATUS_NETWORK_SESSION_EXPIRED" in second, out
    finally:
        assert server.stop() == 0, server.server_log()


def smbq_client(server, kdc, ccache, *args, transport="quic", password=None):
    """smbq's own client naming the server files.smbq.test and connecting to 127.0.0.1."""
    if transport == "quic":
        pin = subprocess.run([str(BINARY), "cert", "show", "--state-dir", str(server.state)],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        conn = ["--transport", "quic", "--pin", pin,
                "--quic-port", server.quic_addr.rsplit(":", 1)[1]]
    else:
        conn = ["--transport", "tcp", "--tcp-port", str(server.port)]
    env = {k: v for k, v in os.environ.items() if k != "SMBQ_PASSWORD"}
    env.update(kdc.env(ccache=ccache))
    if password is not None:
        env["SMBQ_PASSWORD"] = password
    p = subprocess.run([str(BINARY), *args, "--ip", "127.0.0.1", *conn], capture_output=True,
                       text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert "panicked" not in p.stderr, p.stderr
    return p


@pytest.mark.parametrize("transport", ["quic", "tcp"])
def test_smbq_client_logs_on_with_kerberos(workdir, kdc, transport):
    server = kerberos_server(workdir, kdc, quic=True)
    try:
        cc = ticket(kdc, workdir)
        url = f"smb://{SERVER_HOST}/share"
        src = workdir / "k.bin"
        src.write_bytes(os.urandom(200_000))
        # --kerberos: asked for explicitly.
        p = smbq_client(server, kdc, cc, "put", "--kerberos", str(src), url + "/k.bin",
                        transport=transport)
        assert p.returncode == 0, p.stderr
        assert (server.share / "k.bin").read_bytes() == src.read_bytes()
        # No flag and no password: the ticket in the cache is used, not a prompt.
        back = workdir / "k.back"
        p = smbq_client(server, kdc, cc, "get", url + "/k.bin", str(back), transport=transport)
        assert p.returncode == 0, p.stderr
        assert back.read_bytes() == src.read_bytes()
        log = server.server_log()
        assert len(re.findall(rf'result="success".*user={USER} auth="kerberos".*'
                              rf'transport="{transport}"', log)) == 2, log
        # --kerberos without a ticket fails cleanly as an authentication error (exit 3).
        p = smbq_client(server, kdc, workdir / "none.cc", "ls", "--kerberos", url,
                        transport=transport)
        assert p.returncode == 3, (p.returncode, p.stderr)
        assert "Kerberos" in p.stderr, p.stderr
    finally:
        assert server.stop() == 0, server.server_log()


def der(tag, content):
    n = len(content)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + \
        n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + content


def kkdcp_request(framed, realm):
    """MS-KKDCP 2.2.2 KDC-PROXY-MESSAGE { [0] kerb-message, [1] target-domain }."""
    return der(0x30, der(0xA0, der(0x04, framed)) + der(0xA1, der(0x1B, realm.encode())))


def post(port, body, path="/KdcProxy", method="POST"):
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                       context=ssl._create_unverified_context())
    conn.request(method, path, body=body, headers={"Content-Type": "application/kerberos"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def test_kdc_proxy_gets_tickets_and_refuses_what_it_must(workdir, kdc):
    proxy_port = free_port()
    extra = (f'[kdc_proxy]\nenabled = true\nlisten = "127.0.0.1:{proxy_port}"\n'
             f'per_client_per_minute = 40\n'
             f'[kdc_proxy.realms]\n"{kdc.realm}" = ["127.0.0.1:{kdc.port}"]\n')
    server = kerberos_server(workdir, kdc, extra=extra, quic=True)
    try:
        # A client whose only way to the KDC is the proxy, trusting smbq's certificate.
        conf = workdir / "krb5-proxy.conf"
        conf.write_text(kdc.krb5_conf.read_text().replace(
            f"kdc = 127.0.0.1:{kdc.port}",
            f"kdc = https://127.0.0.1:{proxy_port}/KdcProxy\n"
            f"        http_anchors = FILE:{server.state / 'cert.pem'}"))
        cc = workdir / "proxied.cc"
        env = {**os.environ, **kdc.env(ccache=cc), "KRB5_CONFIG": str(conf)}
        p = subprocess.run(["kinit", kdc.principal(USER)], input=PASSWORD + "\n", text=True,
                           capture_output=True, timeout=30, env=env)
        assert p.returncode == 0, p.stdout + p.stderr + server.server_log()
        wait_for_log(server, rf'event="kdc_proxy" result="forwarded".*realm={kdc.realm}')
        # The internet case: smbq's client over QUIC gets its service ticket through the
        # proxy too (the KDC itself is never contacted directly), then logs on.
        before = len(re.findall(r'result="forwarded"', server.server_log()))
        pin = subprocess.run([str(BINARY), "cert", "show", "--state-dir", str(server.state)],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        p = subprocess.run([str(BINARY), "ls", f"smb://{SERVER_HOST}/share", "--ip", "127.0.0.1",
                            "--transport", "quic", "--pin", pin, "--quic-port",
                            server.quic_addr.rsplit(":", 1)[1]],
                           capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in env.items() if k != "SMBQ_PASSWORD"})
        assert p.returncode == 0, p.stderr
        assert len(re.findall(r'result="forwarded"', server.server_log())) > before
        wait_for_log(server, rf'user={USER} auth="kerberos".*transport="quic"')
        # Samba's smbclient uses the same ticket cache (its service ticket now cached).
        rc, out = krb_smbclient(server, kdc, cc, "ls")
        assert rc == 0, out

        # Not an open proxy, and bad input gets a clean HTTP error.
        framed = struct.pack(">I", 5) + b"\x6a\x03abc"
        status, _ = post(proxy_port, kkdcp_request(framed, "EVIL.TEST"))
        assert status == 403
        wait_for_log(server, r'status=403 reason="realm EVIL.TEST is not served here"')
        for body in [b"", b"not DER", kkdcp_request(b"\0\0\0\x09short", kdc.realm),
                     der(0x30, der(0xA0, der(0x04, framed)))]:
            status, _ = post(proxy_port, body)
            assert status == 400, body
        assert post(proxy_port, b"", method="GET")[0] == 405
        assert post(proxy_port, b"x", path="/other")[0] == 404
        assert post(proxy_port, b"x" * (200 * 1024))[0] == 413
        # The per-address budget runs out: 40 requests a minute.
        statuses = [post(proxy_port, b"x")[0] for _ in range(40)]
        assert statuses[-1] == 429 and 400 in statuses, statuses
        # The server still serves SMB.
        rc, out = krb_smbclient(server, kdc, ticket(kdc, workdir), "ls")
        assert rc == 0, out
    finally:
        assert server.stop() == 0, server.server_log()


def test_kdc_proxy_bounds_connections_that_never_speak(workdir, kdc):
    """A client that opens connections and never finishes a TLS handshake holds 4 of them at
    most, each for the 5 s handshake time; others, and later requests, are still served."""
    proxy_port = free_port()
    extra = (f'[kdc_proxy]\nenabled = true\nlisten = "127.0.0.1:{proxy_port}"\n'
             f'[kdc_proxy.realms]\n"{kdc.realm}" = ["127.0.0.1:{kdc.port}"]\n')
    server = kerberos_server(workdir, kdc, extra=extra, quic=True)
    try:
        # Six connections from one address that never speak: four are held (which four
        # depends on the order their tasks run), two are closed at once.
        conns = [socket.create_connection(("127.0.0.1", proxy_port)) for _ in range(6)]
        started = time.time()
        closed_at = {}
        while len(closed_at) < len(conns) and time.time() - started < 10:
            waiting = [c for c in conns if c not in closed_at]
            ready, _, _ = select.select(waiting, [], [], 0.2)
            for c in ready:
                assert c.recv(1) == b""
                closed_at[c] = time.time() - started
        times = sorted(closed_at.values())
        assert len(times) == 6, times
        assert times[1] < 1.0, f"two are refused at once: {times}"
        assert 4.0 < times[2] and times[5] < 8.0, f"four wait the 5 s handshake time: {times}"
        for c in conns:
            c.close()
        status, _ = post(proxy_port, b"not DER")
        assert status == 400
    finally:
        assert server.stop() == 0, server.server_log()
