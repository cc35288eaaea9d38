"""AES-GMAC nonces under session binding (issue 42, item 3), against the real server binary.

An AES-GMAC signature's nonce is the message's MessageId and two role bits (MS-SMB2 3.1.4.1:
bit 0 server-to-client, bit 1 CANCEL). Two different messages signed under one key with one
nonce give away the GHASH key, and with it signatures of anything. Every binding connection
starts at MessageId 1, and a binding's legs are signed with the session's key (MS-SMB2
3.2.4.1.1, 3.3.4.1.1), so a second binding repeats the nonces of the first.

tshark captures a multichannel download on loopback; the test takes every signed SMB2 message
apart and groups them by the key that signed them (the session's, or a bound channel's) and by
nonce: no group may hold two different messages."""

import hashlib
import os
import signal
import struct
import subprocess
import time
from collections import defaultdict

from conftest import BINARY, USER, SmbqServer

SIGNED = 0x8
SERVER_TO_REDIR = 0x1
SESSION_SETUP = 0x1
CANCEL = 0xC
BINDING = 0x1


def start_capture(port: int, pcap) -> subprocess.Popen:
    p = subprocess.Popen(["tshark", "-i", "lo", "-B", "64", "-f", f"tcp port {port}", "-F", "pcap",
                          "-w", str(pcap)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # tshark says so on stderr once the capture runs ("Capturing on" comes before that).
    deadline = time.monotonic() + 20
    seen = b""
    while b"Capture started" not in seen:
        assert time.monotonic() < deadline and p.poll() is None, seen
        seen += p.stderr.read1(4096)
    time.sleep(0.5)
    return p


def stop_capture(p: subprocess.Popen):
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=20)


def tcp_payloads(pcap) -> dict:
    """Each direction's TCP payload in sequence order: {(src, sport, dst, dport): bytes}."""
    data = open(pcap, "rb").read()
    magic, = struct.unpack_from("<I", data, 0)
    assert magic == 0xA1B2C3D4, hex(magic)
    link, = struct.unpack_from("<I", data, 20)
    assert link == 1, link  # Ethernet (what tshark writes for lo)
    segs = defaultdict(dict)
    first = {}
    off = 24
    while off + 16 <= len(data):
        incl, = struct.unpack_from("<I", data, off + 8)
        pkt = data[off + 16: off + 16 + incl]
        off += 16 + incl
        if len(pkt) < 34 or pkt[12:14] != b"\x08\x00":
            continue
        ip = pkt[14:]
        ihl = (ip[0] & 0xF) * 4
        total, = struct.unpack_from(">H", ip, 2)
        if ip[9] != 6:
            continue
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            key = (ip[12:16], sport, ip[16:20], dport)
            first.setdefault(key, seq)
            # Offsets from the first segment's sequence number: no 32-bit wrap to mind.
            segs[key][(seq - first[key]) % (1 << 32)] = payload
    out = {}
    for key, by_offset in segs.items():
        buf = bytearray()
        for at in sorted(by_offset):
            p = by_offset[at]
            if at + len(p) <= len(buf):
                continue  # a retransmission of what is there
            assert at <= len(buf), f"gap in the capture of {key}"
            buf += p[len(buf) - at:]
        out[key] = bytes(buf)
    return out


def smb2_messages(stream: bytes):
    """The SMB2 messages of one direction (NetBIOS session framing; compounds split)."""
    off = 0
    while off + 4 <= len(stream):
        length = int.from_bytes(stream[off + 1: off + 4], "big")
        frame = stream[off + 4: off + 4 + length]
        off += 4 + length
        at = 0
        while frame[at: at + 4] == b"\xfeSMB":
            nxt, = struct.unpack_from("<I", frame, at + 20)
            yield frame[at: at + nxt] if nxt else frame[at:]
            if not nxt:
                break
            at += nxt


def signed_messages(pcap):
    """(connection, message) for every signed SMB2 message; a connection is its client port."""
    for (src, sport, dst, dport), stream in tcp_payloads(pcap).items():
        for m in smb2_messages(stream):
            flags, = struct.unpack_from("<I", m, 16)
            if flags & SIGNED:
                yield (sport if flags & SERVER_TO_REDIR == 0 else dport), m


def key_of(m: bytes, binding_conns: set, conn: int) -> str:
    """Which key signed `m`: MS-SMB2 3.2.4.1.1 and 3.3.4.1.1 sign SESSION_SETUP requests and
    non-SUCCESS SESSION_SETUP responses with Session.SigningKey, everything else with the
    connection's Channel.SigningKey; the first connection's channel key is the session's."""
    command, = struct.unpack_from("<H", m, 12)
    status, = struct.unpack_from("<I", m, 8)
    from_server = struct.unpack_from("<I", m, 16)[0] & SERVER_TO_REDIR
    if conn not in binding_conns:
        return "session"
    if command == SESSION_SETUP and (not from_server or status != 0):
        return "session"
    return f"channel {conn}"


def nonce_reuse(pcap):
    msgs = list(signed_messages(pcap))
    binding_conns = set()
    for conn, m in msgs:
        command, = struct.unpack_from("<H", m, 12)
        flags, = struct.unpack_from("<I", m, 16)
        if command == SESSION_SETUP and not flags & SERVER_TO_REDIR and m[64 + 2] & BINDING:
            binding_conns.add(conn)
    groups = defaultdict(set)
    for conn, m in msgs:
        command, = struct.unpack_from("<H", m, 12)
        flags, = struct.unpack_from("<I", m, 16)
        mid, = struct.unpack_from("<Q", m, 24)
        sid, = struct.unpack_from("<Q", m, 40)
        nonce = (mid, flags & SERVER_TO_REDIR, command == CANCEL)
        body = hashlib.sha256(m[:48] + bytes(16) + m[64:]).hexdigest()
        groups[(sid, key_of(m, binding_conns, conn), nonce)].add(body)
    reused = {k: v for k, v in groups.items() if len(v) > 1}
    session_legs = [k for k in groups if k[1] == "session" and k[2][0] < 3]
    return reused, binding_conns, session_legs


def test_multichannel_gmac_never_signs_two_messages_under_one_nonce(workdir):
    server = SmbqServer(workdir)
    data = os.urandom(1 << 20)
    (server.share / "big").write_bytes(data)
    pcap = workdir / "cap.pcap"
    cap = start_capture(server.port, pcap)
    try:
        env = {**os.environ, "SMBQ_PASSWORD": server.password}
        got = subprocess.run(
            [str(BINARY), "cat", f"smb://{USER}@127.0.0.1/share/big", "--channels", "3",
             "--signing", "gmac", "--tcp-port", str(server.port), "--transport", "tcp"],
            capture_output=True, env=env, timeout=120)
    finally:
        stop_capture(cap)
        assert server.stop() == 0
    assert got.returncode == 0, got.stderr.decode()
    assert got.stdout == data
    log = server.server_log()
    assert "panicked" not in log
    assert "AES-128-GMAC" in log, log
    # Not vacuous: a channel was bound under GMAC, its legs signed with the session's key.
    assert log.count('channel="bound"') >= 1, log
    reused, binding_conns, session_legs = nonce_reuse(pcap)
    assert binding_conns, "no binding seen in the capture"
    assert session_legs, "no message signed with the session's key seen"
    assert not reused, f"(session, key, nonce) signing two different messages: {reused}"


def test_a_client_binding_at_message_id_1_each_time_gets_no_second_challenge(workdir):
    """Samba's client, held to AES-GMAC, binds channel after channel, each binding at
    MessageId 1 as MS-SMB2 has it. The server answers the first binding's challenge only: a
    second one would be another message under the same nonce of the session's key. What the
    server signs is checked; what the client signs is the client's own doing."""
    server = SmbqServer(workdir)
    pcap = workdir / "cap.pcap"
    cap = start_capture(server.port, pcap)
    try:
        torture = subprocess.run(
            ["smbtorture", "-s", "/dev/null", "//127.0.0.1/share", "-p", str(server.port),
             "-U", f"{USER}%{server.password}",
             "--option=client smb3 signing algorithms=AES-128-GMAC",
             "smb2.multichannel.generic.num_channels"],
            capture_output=True, text=True, timeout=300)
    finally:
        stop_capture(cap)
        assert server.stop() == 0
    log = server.server_log()
    assert "panicked" not in log
    assert log.count('channel="bound"') >= 1, torture.stdout + log
    reused, binding_conns, _ = nonce_reuse(pcap)
    assert len(binding_conns) >= 2, torture.stdout
    by_server = {k: v for k, v in reused.items() if k[2][1]}
    assert not by_server, f"the server signed two messages under one nonce: {by_server}"
