"""Issue 39, durable and persistent handles across nodes. A continuously available share
served by three cluster nodes keeps each persistent open's record in etcd, so when the node
holding it is killed with SIGKILL, another node takes it over and the client reclaims it
there. When only the client's path to its node fails, the node parks the open (durable or
persistent) and hands it to the node the client reaches instead.

The client finds the nodes as a real client would, by DNS round robin: `smbq put` runs in a
private mount namespace whose /etc/hosts gives one name two addresses (127.0.0.2 and
127.0.0.3), where two of the nodes listen on the same port. When the first dies, its next
connection reaches the second."""

import os
import pathlib
import shutil
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import BINARY, USER, SmbqServer, free_port
from test_client import make_file, sha256
from test_cluster import (EXCLUSIVE, FAIL_IMMEDIATELY, TTL_S, UNLOCK,  # noqa: F401
                          Client, etcd, io_status)  # etcd is a fixture

SIZE_MB = int(os.environ.get("SMBQ_PERSISTENT_MB", "128"))
NAME = "smbq-nodes.test"
STATUS_FILE_NOT_AVAILABLE = 0xC0000467
STATUS_SHARING_VIOLATION = 0xC0000043
STATUS_FILE_LOCK_CONFLICT = 0xC0000054
READ, WRITE = 0x1, 0x2

CONFIG = """
[cluster]
ttl_secs = {ttl}

[limits]
durable_timeout_secs = {timeout}

[share.data]
path = "{path}"
continuous_availability = {ca}
"""


class CaCluster:
    """Nodes n0 (127.0.0.2) and n1 (127.0.0.3) on one TCP port, reached by one name, and n2
    (127.0.0.1) on its own; all serve `data` as continuously available share "data"."""

    def __init__(self, workdir: pathlib.Path, etcd, timeout: int,
                 names: tuple[str, ...] = ("127.0.0.2", "127.0.0.3"),
                 addrs: tuple[str, ...] = ("127.0.0.2", "127.0.0.3", "127.0.0.1"),
                 ca: bool = True):
        self.ca = ca
        self.workdir = workdir
        self.data = workdir / "data"
        self.data.mkdir()
        self.etcd = etcd
        self.timeout = timeout
        self.password = "Pw-" + secrets_hex()
        self.port = free_port()
        self.nodes = []
        for i, addr in enumerate(addrs):
            port = self.port if i < 2 else free_port()
            if i:
                # One server GUID for the cluster (docs/cluster.md).
                state = workdir / f"n{i}" / "state"
                state.mkdir(parents=True)
                shutil.copy(workdir / "n0" / "state" / "server-guid", state / "server-guid")
            self.nodes.append(self.start(i, addr, port))
        self.hosts = workdir / "hosts"
        self.hosts.write_text("".join(f"{a} {NAME}\n" for a in names))

    def start(self, i: int, addr: str, port: int) -> SmbqServer:
        config = CONFIG.format(ttl=TTL_S, timeout=self.timeout, path=self.data,
                               ca="true" if self.ca else "false")
        return SmbqServer(self.workdir / f"n{i}", config=config, password=self.password,
                          port=port, listen=addr, share=self.data,
                          extra_args=["--cluster", self.etcd.endpoints, "--node", f"n{i}"])

    def put(self, src: pathlib.Path, name: str) -> subprocess.Popen:
        """`smbq put` to smb://NAME:PORT/data/NAME over TCP, resolving NAME through this
        cluster's hosts file."""
        argv = [str(BINARY), "put", str(src), f"smb://{USER}@{NAME}:{self.port}/data/{name}",
                "--transport", "tcp"]
        script = 'mount --bind "$0" /etc/hosts && exec "$@"'
        env = {**os.environ, "SMBQ_PASSWORD": self.password}
        return subprocess.Popen(["unshare", "--mount", "sh", "-c", script, str(self.hosts),
                                 *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env, stdin=subprocess.DEVNULL)

    def serving(self) -> int:
        """Which of n0 and n1 the client's connection is on."""
        out = subprocess.run(["ss", "-Htn", "state", "established"], capture_output=True,
                             text=True, check=True).stdout
        for i in (0, 1):
            if f"{self.nodes[i].listen}:{self.port} " in out:
                return i
        raise AssertionError(f"no client connection to n0 or n1:\n{out}")

    def kill(self, i: int):
        self.nodes[i].proc.kill()
        self.nodes[i].proc.wait()
        self.nodes[i].log.close()

    def stop(self) -> list[str]:
        logs = []
        for n in self.nodes:
            n.stop()
            logs.append(n.server_log())
        return logs


class CutRelay:
    """A TCP relay from `listen`:port to `target`:port whose `cut()` resets every connection
    through it and stops listening: a network path that fails while both ends live."""

    def __init__(self, listen: str, target: str, port: int):
        self.target = (target, port)
        self.listener = socket.create_server((listen, port))
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closing = False
        self.done = threading.Event()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        # accept() is not woken by close() from another thread: poll for cut().
        self.listener.settimeout(0.1)
        while not self.closing:
            try:
                client, _ = self.listener.accept()
                client.settimeout(None)
                upstream = socket.create_connection(self.target, timeout=10)
            except TimeoutError:
                continue
            except OSError:
                break
            upstream.settimeout(None)
            with self.lock:
                self.socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()
        self.done.set()

    @staticmethod
    def pump(src: socket.socket, dst: socket.socket):
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass

    def cut(self):
        self.closing = True
        self.done.wait(5)
        self.listener.close()
        with self.lock:
            for s in self.socks:
                # A reset, not a close: as a path that breaks, not a peer that leaves. The
                # shutdown wakes the pump blocked on the socket, without which the close
                # would not reach the kernel while it waits.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


def secrets_hex() -> str:
    import secrets
    return secrets.token_hex(8)


def reaches(where: pathlib.Path, size: int):
    return lambda: any(f.stat().st_size >= size for f in where.iterdir()
                       if f.is_file() and not f.name.startswith("own"))


def wait_for(cond, within: float, what: str):
    deadline = time.time() + within
    while not cond():
        assert time.time() < deadline, what
        time.sleep(0.02)


def went_on(c: "CaCluster", put: subprocess.Popen, src: pathlib.Path, name: str) -> str:
    """Waits for `put` (a reference of the file is `src`); asserts it reconnected and went on
    with its open, and that `name` is whole; the nodes' logs."""
    try:
        _, err = put.communicate(timeout=600)
    finally:
        if put.poll() is None:
            put.kill()
    stderr = err.decode(errors="replace")
    logs = "".join(n.server_log()[-3000:] for n in c.nodes)
    assert put.returncode == 0, stderr + logs
    assert "reconnecting" in stderr, stderr
    assert "no longer kept" not in stderr, stderr + logs
    assert sha256(c.data / name) == sha256(src)
    return logs


def open_in_thread(c: Client, name: str) -> dict:
    """Opens `name` for writing, sharing nothing, on a thread (the open may wait for breaks);
    the result lands in the returned dict under "status" (an int) or "fid"."""
    out: dict = {}

    def run():
        got = c.open(name, READ | WRITE, share=0)
        out["fid" if isinstance(got, bytes) else "status"] = got
    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def open_persistent(cl: Client, name: str, access: int, share: int) -> bytes:
    """A CREATE asking for a persistent handle (MS-SMB2 2.2.13.2.11, DH2Q with
    SMB2_DHANDLE_FLAG_PERSISTENT), without an oplock or lease; its file id. Asserts that the
    response grants the handle persistent (2.2.14.2.12)."""
    ask = struct.pack("<II8x", 0, 0x2) + os.urandom(16)  # timeout, PERSISTENT, CreateGuid
    fid, _, got = cl.create(name, access, share, 0, {b"DH2Q": ask})
    assert b"DH2Q" in got and len(got[b"DH2Q"]) >= 8, got
    _, flags = struct.unpack_from("<II", got[b"DH2Q"])
    assert flags & 0x2, "the handle was not granted persistent"
    return fid


def test_a_dead_nodes_persistent_locks_hold_for_reads_and_writes_until_taken_over(
        workdir, etcd):
    """MS-FSA 2.1.4.10 while a persistent open has no live node: its node dies, its lock
    records in etcd go with the node's lease, and until another node takes the open over
    (and records its locks again) only the open's hold in etcd says what it locked. Another
    node's READ and WRITE of the range meet the lock throughout, and are let in once the
    open expires. On the open's own node, an unlock lets another open in at once."""
    timeout = 6
    c = CaCluster(workdir, etcd, timeout=timeout)
    try:
        (c.data / "locked.bin").write_bytes(b"z" * 4096)
        a = Client(c.nodes[0], c.password)
        fa = open_persistent(a, "locked.bin", READ | WRITE, share=7)
        assert a.lock(fa, 0, 100, EXCLUSIVE | FAIL_IMMEDIATELY) == 0
        # The same node: its own table decides, and the hold (rewritten after the unlock,
        # seen by this node's watch a moment later) does not refuse what the unlock freed.
        a2 = Client(c.nodes[0], c.password)
        fa2 = a2.open("locked.bin", READ | WRITE, share=7)
        assert isinstance(fa2, bytes), hex(fa2)
        assert io_status(a2, fa2, 10, write=True) == STATUS_FILE_LOCK_CONFLICT
        for _ in range(20):
            assert a.lock(fa, 0, 100, UNLOCK) == 0
            assert io_status(a2, fa2, 10, write=True) == 0, "refused right after the unlock"
            assert a.lock(fa, 0, 100, EXCLUSIVE | FAIL_IMMEDIATELY) == 0
        b = Client(c.nodes[2], c.password)
        fb = b.open("locked.bin", READ | WRITE, share=7)
        assert isinstance(fb, bytes), hex(fb)
        assert io_status(b, fb, 10, write=False) == STATUS_FILE_LOCK_CONFLICT
        c.kill(0)
        killed = time.time()
        tries = 0
        survivors = (c.nodes[1], c.nodes[2])
        taken = None
        while taken is None or time.time() < taken + 1:
            for write in (False, True):
                got = io_status(b, fb, 10, write=write)
                assert got == STATUS_FILE_LOCK_CONFLICT, \
                    f"{'WRITE' if write else 'READ'} {hex(got)} {time.time() - killed:.2f} s after the kill"
            assert io_status(b, fb, 200, write=False) == 0, "outside the lock"
            tries += 1
            if taken is None and any("took over a persistent open" in n.server_log()
                                     for n in survivors):
                taken = time.time()
            assert time.time() - killed < TTL_S + 15, "nobody took the open over"
        print(f"{tries} rounds of READ and WRITE refused; taken over "
              f"{taken - killed:.1f} s after the kill (lease {TTL_S} s)")
        # Its client never comes back: the open expires, and its locks go with it.
        wait_for(lambda: io_status(b, fb, 10, write=True) == 0, timeout + 10,
                 "the expired open's lock stayed")
        print(f"the range was free {time.time() - killed:.1f} s after the kill")
        b.close(fb)
        b.logoff()
    finally:
        for log in c.stop():
            assert "panicked" not in log, log


def test_a_persistent_open_is_reclaimed_on_another_node_after_kill_9(workdir, etcd):
    c = CaCluster(workdir, etcd, timeout=20)
    try:
        size = SIZE_MB << 20
        src = workdir / "src.bin"
        make_file(src, size, seed=39)
        # The survivors have more opens of their own than n0 had before the upload's, so
        # their slots include the one its FileId names there: a moved open keeps its FileId
        # without taking one of theirs (each node's open ids are its own range).
        own = []
        for i in (0, 1, 2):
            cl = Client(c.nodes[i], c.password)
            for k in range(3 if i == 0 else 6):
                (c.data / f"own{i}{k}").write_bytes(b"x")
                fid = cl.open(f"own{i}{k}", READ, share=7)
                assert isinstance(fid, bytes), hex(fid)
            own.append(cl)
        put = c.put(src, "big.bin")
        try:
            wait_for(reaches(c.data, size // 4), 300, "the upload did not get going")
            dead = c.serving()
            part = next(f.name for f in c.data.iterdir() if f.name.startswith("big"))
            assert part != "big.bin", "the upload finished before the kill"
            c.kill(dead)
            killed = time.time()
            # Meanwhile a client of the third node may not open the file: the dead node's
            # open, then its hold in etcd, then the node that took it over keep it.
            other = Client(c.nodes[2], c.password)
            tried = open_in_thread(other, part)
        except BaseException:
            put.kill()
            raise
        logs = went_on(c, put, src, "big.bin")
        print(f"put finished {time.time() - killed:.1f} s after the kill (lease {TTL_S} s)")
        # A surviving node took the open over (the sweeper of either, or the reclaim); if
        # that was n2, it handed the open to the node the client reached.
        survivor = c.nodes[1 - dead].server_log()
        assert "took over a persistent open" in logs, logs
        assert "durable open reclaimed" in survivor, survivor[-3000:]
        # No session of the new node was taken for the old one (each node its own ids).
        assert "PreviousSessionId names a session of another user" not in survivor
        tried["thread"].join(60)
        assert tried.get("status") in (STATUS_FILE_NOT_AVAILABLE, STATUS_SHARING_VIOLATION), \
            (tried, part, logs)
        other.logoff()
        for i, cl in enumerate(own):
            if i != dead:
                cl.logoff()
        # The upload's close removed its record and hold.
        wait_for(lambda: c.etcd.count("/smbq/ca/") == 0, 10, "a persistent record stayed")
        wait_for(lambda: c.etcd.count("/smbq/f/") == 0, 10, "a file's keys stayed")
    finally:
        for log in c.stop():
            assert "panicked" not in log, log


def test_an_abandoned_persistent_open_of_a_dead_node_holds_its_file_until_it_expires(
        workdir, etcd):
    timeout = 6
    c = CaCluster(workdir, etcd, timeout=timeout)
    try:
        src = workdir / "src.bin"
        make_file(src, SIZE_MB << 20, seed=40)
        put = c.put(src, "gone.bin")
        wait_for(reaches(c.data, 1 << 20), 300, "the upload did not get going")
        dead = c.serving()
        part = next(f.name for f in c.data.iterdir() if f.is_file())
        put.kill()  # the client never comes back
        put.wait()
        c.kill(dead)
        killed = time.time()
        other = Client(c.nodes[2], c.password)
        statuses = set()
        while True:
            got = other.open(part, READ | WRITE, share=0)
            if isinstance(got, bytes):
                other.close(got)
                break
            statuses.add(got)
            assert time.time() - killed < TTL_S + timeout + 10, \
                f"still held {time.time() - killed:.1f} s after the kill"
            time.sleep(0.2)
        held = time.time() - killed
        print(f"held {held:.1f} s after the kill (lease {TTL_S} s, timeout {timeout} s): "
              f"{sorted(hex(s) for s in statuses)}")
        # Held while a node kept it for its client: for the lease and the open's timeout.
        # The uploader's RWH lease lets other opens in to break it (MS-SMB2 3.3.5.9), so an
        # open conflicts (SHARING_VIOLATION) or waits for the break its client cannot hear.
        assert statuses <= {STATUS_FILE_NOT_AVAILABLE, STATUS_SHARING_VIOLATION}, statuses
        assert held >= timeout, held
        other.logoff()
        logs = "".join(n.server_log() for n in c.nodes if n is not c.nodes[dead])
        assert "took over a persistent open" in logs, logs[-4000:]
        wait_for(lambda: c.etcd.count("/smbq/ca/") == 0, 10, "the expired record stayed")
    finally:
        for log in c.stop():
            assert "panicked" not in log, log


@pytest.mark.parametrize("ca", [True, False], ids=["persistent", "durable"])
def test_a_parked_open_is_handed_over_to_the_node_its_client_reaches(workdir, etcd, ca):
    """The client's path to its node fails while the node lives: the node parks the open
    (a persistent one on a continuously available share, a durable one on another), and
    the client reconnects (DNS round robin) to another node, which asks for the open. The
    first node hands it over, and the upload goes on there."""
    # getaddrinfo orders addresses by their common prefix with the source (127.0.0.1,
    # RFC 6724 rule 9): 127.0.0.2 and .3 tie and keep the hosts file's order.
    c = CaCluster(workdir, etcd, timeout=20, names=("127.0.0.2", "127.0.0.3"),
                  addrs=("127.0.0.5", "127.0.0.3", "127.0.0.1"), ca=ca)
    relay = CutRelay("127.0.0.2", "127.0.0.5", c.port)
    try:
        size = SIZE_MB << 20
        src = workdir / "src.bin"
        make_file(src, size, seed=41)
        put = c.put(src, "moved.bin")
        try:
            wait_for(reaches(c.data, size // 4), 300, "the upload did not get going")
            assert c.serving() == 0  # n0, through the relay
            relay.cut()
            cut = time.time()
        except BaseException:
            put.kill()
            raise
        logs = went_on(c, put, src, "moved.bin")
        print(f"put finished {time.time() - cut:.1f} s after the cut")
        assert c.nodes[0].proc.poll() is None  # n0 lived throughout
        assert "durable open handed over to another node" in c.nodes[0].server_log(), logs
        n1 = c.nodes[1].server_log()
        assert "durable open handed over to this node" in n1, logs
        assert "durable open reclaimed" in n1, logs
        wait_for(lambda: c.etcd.count("/smbq/ca/") == 0, 10, "a persistent record stayed")
    finally:
        for log in c.stop():
            assert "panicked" not in log, log
