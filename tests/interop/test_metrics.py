"""The Prometheus endpoint against the real binary (issue 17): Prometheus' own `promtool` accepts
its output, and the counters move by exactly what a known smbclient workload did."""

import os
import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.request

import pytest

from conftest import BINARY, USER, SmbqServer, free_port, free_udp_port
import smbclient
from test_status import HeldSmbclient

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def scrape(port, accept=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def samples(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = SAMPLE.match(line)
        assert m, f"unparsable sample line: {line!r}"
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def value(s, name, **labels):
    want = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
    return s.get((name, want), 0.0)


@pytest.fixture
def metered(workdir):
    port = free_port()
    s = SmbqServer(workdir, extra_args=["--metrics-listen", f"127.0.0.1:{port}"],
                   quic_port=free_udp_port())
    s.metrics_port = port
    yield s
    rc = s.stop()
    assert "panicked" not in s.server_log(), s.server_log()
    assert rc == 0, s.server_log()


def test_promtool_accepts_the_output(metered):
    assert shutil.which("promtool"), "Debian package prometheus (scripts/test.sh installs it)"
    # Some traffic first, so every family has samples.
    rc, out = smbclient.run(metered, "ls")
    assert rc == 0, out
    ctype, text = scrape(metered.metrics_port)
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr + text
    # A scraper that asks for OpenMetrics (Prometheus does) gets it.
    ctype, om = scrape(metered.metrics_port, "application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text"), ctype
    assert om.rstrip().endswith("# EOF")
    assert "# TYPE smbq_requests counter" in om


def test_counters_move_by_what_the_workload_did(metered, workdir):
    port = metered.metrics_port
    data = os.urandom(100_000)
    local = workdir / "local.bin"
    local.write_bytes(data)
    before = samples(scrape(port)[1])
    rc, out = smbclient.run(metered, f"put {local} up.bin; get up.bin {workdir / 'back.bin'}")
    assert rc == 0, out
    assert (workdir / "back.bin").read_bytes() == data
    after = samples(scrape(port)[1])

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("smbq_written_bytes_total", share="share", transport="tcp") == 100_000
    assert delta("smbq_read_bytes_total", share="share", transport="tcp") == 100_000
    assert delta("smbq_requests_total", command="NEGOTIATE", status="SUCCESS") == 1
    assert delta("smbq_requests_total", command="SESSION_SETUP", status="SUCCESS") == 1
    assert delta("smbq_requests_total", command="TREE_CONNECT", status="SUCCESS") == 1
    writes = delta("smbq_requests_total", command="WRITE", status="SUCCESS")
    assert writes >= 1
    assert delta("smbq_request_duration_seconds_count", command="WRITE") == writes
    # smbclient writes up to 64 KiB per WRITE: small enough to run inline, unless a write
    # that blocked sent them to the blocking pool for a while (crate::inline_io).
    assert ("smbq_inline_writes_total", "") in after
    assert 0 <= delta("smbq_inline_writes_total") <= writes
    assert delta("smbq_credits_granted_total") > 0
    assert delta("smbq_logon_failures_total") == 0

    rc, out = smbclient.run(metered, "ls", password="wrong")
    assert rc != 0 and "LOGON_FAILURE" in out, out
    third = samples(scrape(port)[1])
    assert value(third, "smbq_logon_failures_total") - value(after, "smbq_logon_failures_total") == 1
    assert value(third, "smbq_requests_total", command="SESSION_SETUP", status="LOGON_FAILURE") \
        - value(after, "smbq_requests_total", command="SESSION_SETUP", status="LOGON_FAILURE") == 1


def test_gauges_follow_live_clients_and_quic_is_counted(metered):
    (metered.share / "f.txt").write_bytes(b"x")
    held = HeldSmbclient(metered)
    try:
        held.send("open f.txt")
        for _ in range(100):
            s = samples(scrape(metered.metrics_port)[1])
            if value(s, "smbq_open_files") == 1:
                break
            time.sleep(0.1)
        assert value(s, "smbq_open_files") == 1, s
        assert value(s, "smbq_sessions") == 1
        assert value(s, "smbq_connections", transport="tcp") == 1
        assert value(s, "smbq_connections", transport="quic") == 0
    finally:
        held.quit()
    # A QUIC client's packets are counted, and stay counted after it left.
    env = {**os.environ, "SMBQ_PASSWORD": metered.password}
    p = subprocess.run([str(BINARY), "ls", "--insecure", "--transport", "quic",
                        f"smb://{USER}@{metered.quic_addr}/share/"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    s = samples(scrape(metered.metrics_port)[1])
    assert value(s, "smbq_quic_sent_packets_total") > 0, s
    assert value(s, "smbq_connections", transport="quic") == 0
    assert value(s, "smbq_read_bytes_total", share="share", transport="quic") == 0


def smb2_request(command, message_id, body=b""):
    """An SMB2 header (CreditRequest 1) and `body`, framed for TCP."""
    msg = struct.pack("<4sHHIHHIIQIIQ16s", b"\xfeSMB", 64, 0, 0, command, 1, 0, 0,
                      message_id, 0, 0, 0, b"\0" * 16) + body
    return struct.pack(">I", len(msg)) + msg


def read_frame(s):
    def exact(n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            assert chunk, "server closed the connection"
            data += chunk
        return data
    (n,) = struct.unpack(">I", exact(4))
    return exact(n)


def test_commands_a_client_makes_up_share_one_series(metered):
    """Issue 42: a peer that negotiates and never logs on sends 2000 command codes no dialect
    defines. They all count under command="other", and the scrape gains a handful of series,
    not one per code."""
    port = metered.metrics_port
    before = scrape(port)[1]
    with socket.create_connection(("127.0.0.1", metered.port), timeout=10) as s:
        neg = struct.pack("<HHHHI16sQH", 36, 1, 1, 0, 0, os.urandom(16), 0, 0x0202)
        s.sendall(smb2_request(0, 0, neg))
        assert struct.unpack_from("<I", read_frame(s), 8)[0] == 0
        statuses = set()
        for i in range(2000):
            s.sendall(smb2_request(0x13 + i, 1 + i, b"\0" * 8))
            statuses.add(struct.unpack_from("<I", read_frame(s), 8)[0])
        assert 0 not in statuses, "an unknown command never succeeds"
    after = scrape(port)[1]
    made_up = [line for line in after.splitlines() if 'command="0x' in line]
    assert not made_up, made_up[:5]
    s = samples(after)
    others = sum(v for (name, labels), v in s.items()
                 if name == "smbq_requests_total" and 'command="other"' in labels)
    assert others == 2000, [k for k in s if "other" in k[1]]
    grown = len(samples(after)) - len(samples(before))
    assert grown < 100, f"{grown} new series"
