"""Hostile connections are refused cleanly and never disturb other clients: garbage, an
oversized length header, a zero-length frame, a half frame that never completes, and a
response where a request belongs. Meanwhile smbclient keeps working and the server exits 0."""

import socket
import struct
import time

from smbclient import run


def connect(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.settimeout(5)
    return s


def closed_by_server(s) -> bool:
    """True when the server closed the connection (EOF or reset) without answering."""
    try:
        return s.recv(4096) == b""
    except ConnectionResetError:
        return True


def smb2_header(command=0, flags=0, message_id=0):
    return (b"\xfeSMB" + struct.pack("<HHIHHIIQIIQ16s", 64, 1, 0, command, 1, flags, 0,
                                     message_id, 0, 0, 0, b"\0" * 16))


def test_bad_frames_are_dropped_and_others_keep_working(server, workdir):
    cases = {
        "garbage": b"\x81garbage that is not SMB at all",
        "oversized": b"\x00\xff\xff\xff" + b"A" * 16,
        "zero_length": b"\x00\x00\x00\x00",
        "bad_protocol": struct.pack(">I", 68) + b"\xaaSMB" + b"\0" * 64,
        "response_as_request": struct.pack(">I", 64 + 36) + smb2_header(flags=1) + b"\0" * 36,
    }
    for name, payload in cases.items():
        s = connect(server)
        s.sendall(payload)
        assert closed_by_server(s), name
        s.close()

    # A client that sends half a frame and stalls holds only its own connection.
    stalled = connect(server)
    stalled.sendall(b"\x00\x00\x10\x00" + b"\xfeSMB")
    rc, out = run(server, "ls")
    assert rc == 0 and "NT_STATUS_" not in out, out
    stalled.close()

    # The server is still healthy afterwards.
    rc, out = run(server, "ls")
    assert rc == 0, out
    assert server.proc.poll() is None


def test_pre_auth_frame_limit(server):
    """Before a session exists, frames over the small pre-auth limit are refused from the
    4-byte header alone, before the server buffers anything."""
    s = connect(server)
    s.sendall(struct.pack(">I", 1 << 20))
    start = time.time()
    assert closed_by_server(s)
    assert time.time() - start < 4
