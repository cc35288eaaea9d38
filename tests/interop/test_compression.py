"""SMB 3.1.1 compression against the real binary (issue 36).

A client we did not write, the crates.io `smb` crate (LZ4 and Pattern_V1, in
interop/smb-rs-quic), writes and reads compressed data over QUIC and TCP; the server's
Prometheus counters show the compressed messages both ways. smbq's own CLI round-trips every
algorithm both ends build. A client that does not ask gets nothing compressed, and a
`compress_data` share compresses READs unasked."""

import hashlib
import pathlib
import re

import pytest

from conftest import SmbqServer, free_port, free_udp_port
from test_client import smbq_cli
from test_metrics import samples, scrape, value
from test_quic import export_der, smb, tool  # noqa: F401  (tool is a fixture)

MB = 1 << 20


def text_file(path: pathlib.Path, size: int) -> str:
    """Log-like text: compresses about 5-10x with LZ4, as source trees and logs do."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        i, left = 0, size
        while left > 0:
            line = f"2026-11-28T15:{i % 60:02d}:{i % 59:02d} host{i % 7} smbq[{i % 977}]: " \
                   f"request {i} READ offset={i * 4096} length=65536 status=SUCCESS\n".encode()
            line = line[:left]
            f.write(line)
            h.update(line)
            left -= len(line)
            i += 1
    return h.hexdigest()


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MB):
            h.update(chunk)
    return h.hexdigest()


def counters(server) -> dict:
    _, text = scrape(server.metrics_port)
    s = samples(text)
    out = {}
    for (name, labels), v in s.items():
        if name.startswith("smbq_compressed_"):
            d = re.search(r'direction="(\w+)"', labels).group(1)
            a = re.search(r'algorithm="(\w+)"', labels).group(1)
            out[(name, d, a)] = v
    return out


def total(c: dict, name: str, direction: str) -> float:
    return sum(v for (n, d, _), v in c.items() if n == name and d == direction)


# Loopback is faster than compressing: by default compression would step aside (pace.rs).
NOT_ADAPTIVE = "[compression]\nadaptive = false\n"


def start(workdir, config="") -> SmbqServer:
    port = free_port()
    s = SmbqServer(workdir, extra_args=["--metrics-listen", f"127.0.0.1:{port}"],
                   quic_port=free_udp_port(), config=NOT_ADAPTIVE + config)
    s.metrics_port = port
    s.der = export_der(s)
    return s


def stop(s: SmbqServer):
    rc = s.stop()
    log = s.server_log()
    assert "panicked" not in log, log
    assert rc == 0, log


@pytest.mark.parametrize("transport", ["quic", "tcp"])
def test_the_smb_crate_writes_and_reads_compressed(workdir, tool, transport):  # noqa: F811
    s = start(workdir)
    try:
        src = workdir / "log.txt"
        want = text_file(src, 24 * MB)
        tcp = transport == "tcp"
        rc, out = smb(s, "put", "--compress", str(src), "log.txt", tcp=tcp, timeout=600)
        assert rc == 0, out
        assert sha256(s.share / "log.txt") == want
        after_put = counters(s)
        # The crate compresses every message over 1 KiB, its WRITEs included (8 MiB each).
        assert total(after_put, "smbq_compressed_messages_total", "received") >= 3, after_put
        assert total(after_put, "smbq_compressed_plain_bytes_total", "received") >= 24 * MB
        assert total(after_put, "smbq_compressed_wire_bytes_total", "received") < 8 * MB
        back = workdir / "back.txt"
        rc, out = smb(s, "get", "--compress", "log.txt", str(back), tcp=tcp, timeout=600)
        assert rc == 0, out
        assert sha256(back) == want
        c = counters(s)
        sent = total(c, "smbq_compressed_messages_total", "sent")
        assert sent >= 3, c
        plain = total(c, "smbq_compressed_plain_bytes_total", "sent")
        wire = total(c, "smbq_compressed_wire_bytes_total", "sent")
        assert plain >= 24 * MB and wire < plain / 3, (plain, wire)
        # READ responses go out in the crate's first choice it can decode: LZ4.
        assert c.get(("smbq_compressed_messages_total", "sent", "lz4"), 0) > 0, c
    finally:
        stop(s)


def test_nothing_is_compressed_for_a_client_that_does_not_ask(workdir, tool):  # noqa: F811
    s = start(workdir)
    try:
        src = workdir / "log.txt"
        want = text_file(src, 4 * MB)
        rc, out = smb(s, "put", str(src), "log.txt")
        assert rc == 0, out
        back = workdir / "back.txt"
        rc, out = smb(s, "get", "log.txt", str(back))
        assert rc == 0, out
        assert sha256(back) == want
        assert total(counters(s), "smbq_compressed_messages_total", "sent") == 0
    finally:
        stop(s)


def test_a_compress_data_share_is_served_compressed(workdir):
    cfg = "[share.logs]\npath = \"{}\"\ncompress_data = true\n".format(workdir / "logs")
    (workdir / "logs").mkdir()
    s = start(workdir, config=cfg)
    try:
        want = text_file(workdir / "logs" / "a.txt", 8 * MB)
        # Over TCP smbq's client compresses only when told (--compress, last: it takes an
        # optional value).
        cli = smbq_cli(s, "tcp", extra=["--compress-always", "--compress"])
        cli.share = "logs"
        back = workdir / "a.txt"
        cli.run("get", cli.url("a.txt"), str(back))
        assert sha256(back) == want
        # Eight 1 MiB READs (the first in a compound with its CREATE, compressed whole).
        assert total(counters(s), "smbq_compressed_messages_total", "sent") >= 8
    finally:
        stop(s)


# Every algorithm with a general codec, each leading the client's offer in turn.
GENERAL = ["lz4", "lz77", "lz77_huffman", "lznt1"]


@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_smbq_round_trips_each_algorithm(workdir, transport):
    s = start(workdir)
    try:
        src = workdir / "src.txt"
        want = text_file(src, 6 * MB)
        for alg in GENERAL:
            cli = smbq_cli(s, transport,
                           extra=["--compress-always", "--compress", f"{alg},pattern_v1"])
            before = counters(s)
            cli.run("put", str(src), cli.url(f"{alg}.txt"))
            assert sha256(s.share / f"{alg}.txt") == want, alg
            back = workdir / f"{alg}.back"
            cli.run("get", cli.url(f"{alg}.txt"), str(back))
            assert sha256(back) == want, alg
            after = counters(s)
            key = ("smbq_compressed_messages_total", "sent", alg)
            assert after.get(key, 0) > before.get(key, 0), (alg, after)
            received = total(after, "smbq_compressed_messages_total", "received") - \
                total(before, "smbq_compressed_messages_total", "received")
            assert received >= 6, (alg, after)
    finally:
        stop(s)
