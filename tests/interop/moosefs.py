"""A private, throw-away MooseFS for interop tests, mounted twice.

`moosefs(tmpdir)` starts the Debian MooseFS 3.0 daemons (packages moosefs-master,
moosefs-chunkserver, moosefs-client) with every config file, metadata file, lock file and chunk
directory inside `tmpdir`, mounts the file system twice with mfsmount (FUSE) and yields the two
mount points. Two mounts of one MooseFS behave like two cluster nodes sharing one file system:
each mount is its own FUSE connection with its own kernel caches, so what one mount does reaches
the other only through the master and the chunkserver.

    from moosefs import moosefs
    with moosefs(tmp_path) as (mount_a, mount_b):
        (mount_a / "f").write_bytes(b"x")          # readable as mount_b / "f"

    fs = MooseFS(tmp_path); a, b = fs.start(); ...; fs.stop()   # the same without `with`

    @pytest.fixture
    def mfs(tmp_path):
        fs = MooseFS(tmp_path)   # raises MooseFSUnavailable if MooseFS is not installed
        with fs:                 # fs.mount_a, fs.mount_b; fs.tool([...]), fs.log("master")
            yield fs

Start takes about 2.5 s (2 s of it is the master's warm-up before it hands out the new
chunkserver, which start() waits out), stop about 3 s (5 s if a file is still open).

`python3 moosefs.py` runs a self-check that measures what the tests can rely on (file identity
across the mounts, when written data becomes visible, metadata caching, start/stop times).

Nothing of the system's configuration (/etc/mfs, /var/lib/mfs, systemd units) is used or
changed, and no daemon is started through systemd: every process runs in the foreground (-f) as
our child, in a session of its own, so stop() can always signal it and everything it forked.
Needs root (FUSE mounts, network setup) and /dev/fuse.

Why a private network namespace (the non-obvious part)
-------------------------------------------------------
MooseFS refuses loopback for the master <-> chunkserver link, for the whole of 127.0.0.0/8:
  * mfschunkserver exits at start-up when MASTER_HOST is in 127/8: "master connection module:
    localhost (127.0.0.2) can't be used for connecting with master (use ip address of network
    controller)" (the test is `(ip & 0xFF000000) == 0x7F000000`, so 127.0.0.2 fails too);
  * mfsmaster drops a chunkserver that registers with a 127/8 address ("chunkserver connected
    using localhost ... you cannot use localhost for communication").
So the daemons need a non-loopback address. The host's real interface address may not exist in
CI and would expose the daemons to the network. By default everything MooseFS runs in a private
network namespace made for this instance with `unshare --net`: inside it we bring `lo` up and
add 198.18.0.1/32 to it (198.18.0.0/15 is the RFC 2544 benchmarking range, never a real peer),
and the daemons and both mfsmount processes are started with `nsenter --net=...` into it. Only
the network is private: the FUSE mounts are made in the ordinary mount namespace, so the test
and any server under test use the mount points like any other directory. Nothing on the host's
network changes, and parallel instances (pytest-xdist) can't meet. The MooseFS tools
(mfsfileinfo, mfsgetgoal, ...) talk to mfsmount's proxy on 127.0.0.1 *inside* the namespace:
run them with `fs.tool([...])`, which enters it.

netns=False instead adds a random unused /32 from 198.18.0.0/15 to the host's `lo` (removed
again by stop()); the daemons listen only on that address. netns=None, the default, tries a
namespace and falls back to that if unshare(CLONE_NEWNET) is not allowed.

Ports: MooseFS's defaults are 9419 (metaloggers), 9420 (chunkservers), 9421 (clients) on the
master and 9422 on the chunkserver. We never use them: each comes from free_port(), with a
retry if it was taken before the daemon bound it (in a private namespace nothing can be in the
way, but the same code serves both modes). mfsmount itself listens on 127.0.0.1 with a port the
kernel picks (its proxy for the tools), which can't collide either.

Caches, measured by the self-check (mfsmount 3.0.117):
  * mfsattrcacheto (default 1.0 s) and mfsdirentrycacheto (default 1.0 s) must be 0: with the
    defaults fstat() on an open file misses another mount's chmod/utime for 1 s, a directory that
    the other mount removed, renamed or replaced by a file stays visible for 1 s (this option is
    the kernel entry timeout for directory names). Sizes are not affected: the master tells the
    other clients when a file's length or data changed. mfsentrycacheto (file names) and
    mfsnegentrycacheto (missing names) are 0 by default; they are passed explicitly so that an
    /etc/mfs/mfsmount.cfg can't change them (and we point -c at an empty cfg file anyway).
  * Written data is not in that list: it sits in the writing mfsmount's write cache, and the
    other mount sees it after fsync(), fdatasync() or close() at once, or after about 0.1 s
    without them (the write() must have been issued: Python's own buffer is not enough).
  * Not configurable: fstat() on an open *directory* handle can lag by 1 s (an internal cache of
    mfsmount), and all timestamps have whole-second resolution (st_mtime_ns % 10**9 == 0).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import time

_PATH = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
# mfsmaster needs an initial metadata file; for a new file system it is this 8-byte stub
# ("MFSM NEW") shipped by moosefs-master, copied to DATA_PATH/metadata.mfs.
EMPTY_METADATA = "/var/lib/mfs/metadata.mfs.empty"
# The daemons' address inside the private network namespace.
NETNS_ADDR = "198.18.0.1"

# See "Caches" above: with these, mount B sees mount A's metadata changes at once.
# mfscachemode stays AUTO: the master tells a client when its cached file data is stale.
COHERENT_OPTIONS = ("mfsattrcacheto=0", "mfsentrycacheto=0", "mfsdirentrycacheto=0",
                    "mfsnegentrycacheto=0")
# Behave like a test fixture: by default mfsmount renices itself to -19 and exempts itself from
# the OOM killer (NICE_LEVEL/DISABLE_OOM_KILLER do the same for the daemons, in their cfgs).
POLITE_OPTIONS = ("mfsnice=0", "mfsallowoomkiller")


class MooseFSUnavailable(RuntimeError):
    """MooseFS, or a tool this module needs, is missing, or we lack the privileges."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _which(name: str) -> str | None:
    return shutil.which(name, path=_PATH)


def check_installed() -> None:
    """Raise MooseFSUnavailable, saying what to install, unless everything needed is here."""
    missing = [b for b in ("mfsmaster", "mfschunkserver", "mfsmount", "mfssetgoal")
               if _which(b) is None]
    if missing or not os.path.exists(EMPTY_METADATA):
        raise MooseFSUnavailable(
            f"MooseFS is not installed (missing: {', '.join(missing) or EMPTY_METADATA}); "
            "run `apt-get install -y moosefs-master moosefs-chunkserver moosefs-client`")
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux"),
                          ("nsenter", "util-linux"), ("umount", "mount")):
        if _which(tool) is None:
            raise MooseFSUnavailable(f"`{tool}` is missing (install {package})")
    if os.geteuid() != 0:
        raise MooseFSUnavailable("the MooseFS fixture needs root (FUSE mounts, network setup)")
    if not os.path.exists("/dev/fuse"):
        raise MooseFSUnavailable("/dev/fuse is missing")


def mounted(path: pathlib.Path | str) -> bool:
    """Whether `path` is a mount point, from /proc/self/mountinfo: it never touches the file
    system, so it can't hang on a dead mfsmount."""
    want = os.fsencode(str(path))
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            # Field 5 is the mount point, with space, tab, newline and backslash octal-escaped.
            mp = line.split()[4]
            for esc, ch in ((b"\\040", b" "), (b"\\011", b"\t"), (b"\\012", b"\n"),
                            (b"\\134", b"\\")):
                mp = mp.replace(esc, ch)
            if mp == want:
                return True
    return False


def _listening(pid: int, addr: str, port: int) -> bool:
    """Whether a TCP socket listens on addr:port in the network namespace of `pid`. Read from
    /proc/PID/net/tcp, which shows that process's namespace (we can't connect() into it)."""
    want = f"{int.from_bytes(socket.inet_aton(addr), 'little'):08X}:{port:04X}"
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            return any(c[1] == want and c[3] == "0A"   # 0A = LISTEN, see proc(5)
                       for c in (line.split() for line in f.readlines()[1:]))
    except OSError:
        return False


class MooseFS:
    """One master, one chunkserver (goal 1: one copy of each chunk) and two mounts."""

    def __init__(self, tmpdir, *, netns: bool | None = None,
                 mount_options: tuple[str, ...] = COHERENT_OPTIONS,
                 start_timeout: float = 30.0):
        check_installed()
        self.base = pathlib.Path(tmpdir).resolve() / "moosefs"
        self.netns = netns
        self.mount_options = tuple(mount_options)
        self.start_timeout = start_timeout
        self.mount_a = self.base / "mnt-a"
        self.mount_b = self.base / "mnt-b"
        self.addr: str | None = None
        self.timings: dict[str, float] = {}   # seconds per start/stop step
        self.master: subprocess.Popen | None = None
        self.chunkserver: subprocess.Popen | None = None
        self.mounts: list[tuple[pathlib.Path, subprocess.Popen]] = []
        self._ns_holder: subprocess.Popen | None = None
        self._host_addr_added = False
        self._logs: list = []

    def __enter__(self) -> tuple[pathlib.Path, pathlib.Path]:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- public --------------------------------------------------------------------------------

    def start(self) -> tuple[pathlib.Path, pathlib.Path]:
        """Start everything; returns (mount_a, mount_b) once a write on A reads back on B."""
        _live.add(self)
        try:
            self._start()
        except BaseException as e:
            try:
                self.stop()
            except Exception as cleanup:
                e.add_note(f"and the cleanup after it failed too: {cleanup}")
            raise
        return self.mount_a, self.mount_b

    def stop(self) -> None:
        """Unmount, stop every process and undo the network setup. Safe to call again and after
        a failed start; raises only if a mount or a process survives it all."""
        t = time.monotonic()
        # 1. Unmount. A mount still busy after 2 s (a test holds a file open) is detached
        #    lazily, and its mfsmount, which would serve the open files on, gets SIGTERM; the
        #    open descriptors then fail with ENOTCONN.
        umount = _which("umount")
        busy = [(mp, proc) for mp, proc in self.mounts if mounted(mp)]
        for _ in range(20):
            busy = [(mp, proc) for mp, proc in busy
                    if subprocess.run([umount, str(mp)], capture_output=True).returncode != 0
                    and mounted(mp)]
            if not busy:
                break
            time.sleep(0.1)   # EBUSY: something may still have a file open
        for mp, proc in busy:
            subprocess.run([umount, "-l", str(mp)], capture_output=True)
            if proc.poll() is None:
                proc.terminate()
        # 2. mfsmount -f now ends by itself (in about 2 s). Meanwhile mfschunkserver and
        #    mfsmaster get SIGTERM (mfsmaster writes its metadata and takes 2.5-3 s). What still
        #    runs after 10 s gets SIGKILL. Each process leads a session of its own, so killpg
        #    also reaches mfsmaster's forked "data writer".
        for proc in (self.chunkserver, self.master):
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in (*(p for _, p in self.mounts), self.chunkserver, self.master):
            self._end(proc, grace=max(0.0, t + 10.0 - time.monotonic()))
        self.timings["stop: unmount + processes"], t = time.monotonic() - t, time.monotonic()
        # 3. The network: the namespace goes away with its last process (the holder), or the
        #    address we added to the host's lo is removed.
        self._end(self._ns_holder, grace=0.0)
        if self._host_addr_added:
            subprocess.run([_which("ip"), "addr", "del", f"{self.addr}/32", "dev", "lo"],
                           capture_output=True)
            self._host_addr_added = False
        self.timings["stop: network"] = time.monotonic() - t
        for f in self._logs:
            f.close()
        self._logs.clear()
        problems = [f"{mp} is still mounted" for mp, _ in self.mounts if mounted(mp)]
        problems += [f"{' '.join(map(str, p.args))} (pid {p.pid}) is still running"
                     for p in (self.master, self.chunkserver, self._ns_holder,
                               *(p for _, p in self.mounts))
                     if p is not None and p.poll() is None]
        if problems:
            raise RuntimeError("MooseFS teardown incomplete: " + "; ".join(problems))
        # Forget the processes, so that a second stop() can't signal a recycled pid.
        self.master = self.chunkserver = self._ns_holder = None
        self.mounts = []
        _live.discard(self)

    def tool(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        """Run a MooseFS tool (mfsfileinfo, mfsgetgoal, ...) where it can reach the master."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 30)
        return subprocess.run([*self._prefix(), *argv], **kw)

    def log(self, name: str) -> str:
        """The output so far of "master", "chunkserver", "mount-a" or "mount-b"."""
        p = self.base / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    # -- start-up ------------------------------------------------------------------------------

    def _start(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        for d in ("master", "chunkserver", "hdd", "mnt-a", "mnt-b"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        for step, run in (("network", self._network),
                          ("master", lambda: self._master(deadline)),
                          ("chunkserver", lambda: self._chunkserver(deadline)),
                          ("mount-a", lambda: self._mount(self.mount_a, "mount-a", deadline)),
                          ("mount-b", lambda: self._mount(self.mount_b, "mount-b", deadline)),
                          ("goal, first write, statfs", lambda: self._ready(deadline))):
            run()
            self.timings[f"start: {step}"], t = time.monotonic() - t, time.monotonic()

    def _prefix(self) -> list[str]:
        if self._ns_holder is None:
            return []
        return [_which("nsenter"), f"--net=/proc/{self._ns_holder.pid}/ns/net", "--"]

    def _network(self) -> None:
        if self.netns is not False:
            try:
                self._make_netns()
                self.addr = NETNS_ADDR
                return
            except Exception:
                self._end(self._ns_holder, grace=0.0)
                self._ns_holder = None
                if self.netns:
                    raise
        # Host fallback: a random /32 from 198.18.0.0/15 on lo that nothing uses yet.
        ip = _which("ip")
        taken = subprocess.run([ip, "-o", "-4", "addr", "show"], capture_output=True,
                               text=True, check=True).stdout
        for _ in range(100):
            addr = f"198.{random.randint(18, 19)}.{random.randint(0, 255)}." \
                   f"{random.randint(1, 254)}"
            if f" {addr}/" in taken:
                continue
            r = subprocess.run([ip, "addr", "add", f"{addr}/32", "dev", "lo"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                self.addr, self._host_addr_added = addr, True
                return
            if "exists" not in r.stderr:
                raise MooseFSUnavailable(f"cannot add {addr}/32 to lo: {r.stderr.strip()}")
        raise RuntimeError("found no unused address in 198.18.0.0/15")

    def _make_netns(self) -> None:
        # A `sleep` holds the namespace; everything else enters it with nsenter. (Not
        # `ip netns exec`: that also makes a private mount namespace, hiding the mounts.)
        self._ns_holder = subprocess.Popen(
            [_which("unshare"), "--net", "--", "sleep", "infinity"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        own = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 5
        while True:   # Popen returns before unshare(2) has run: wait for the new namespace
            if self._ns_holder.poll() is not None:
                raise MooseFSUnavailable(
                    f"unshare --net failed: {self._ns_holder.stderr.read().decode().strip()}")
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{self._ns_holder.pid}/ns/net") != own:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("unshare --net did not make a network namespace")
            time.sleep(0.01)
        ip = _which("ip")
        for argv in ([ip, "link", "set", "lo", "up"],
                     [ip, "addr", "add", f"{NETNS_ADDR}/32", "dev", "lo"]):
            subprocess.run([*self._prefix(), *argv], check=True, capture_output=True)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.base / f"{name}.log", "wb")
        self._logs.append(log)
        # A session of its own: stop() signals the process and all it forked at once, and a ^C
        # in the terminal doesn't reach the daemons before stop() runs.
        return subprocess.Popen([*self._prefix(), *argv], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait(self, what: str, cond, deadline: float, procs) -> None:
        while not cond():
            for p, name in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode} while waiting for "
                                       f"{what}:\n{self.log(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}:\n" + "\n".join(
                    f"--- {n}:\n{self.log(n)[-2000:]}" for _, n in procs))
            time.sleep(0.02)

    def _write_cfg(self, name: str, settings: dict) -> pathlib.Path:
        p = self.base / name
        p.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
        return p

    def _master(self, deadline: float) -> None:
        data = self.base / "master"
        shutil.copyfile(EMPTY_METADATA, data / "metadata.mfs")
        exports = self.base / "mfsexports.cfg"
        # Any client (only local ones can reach the address) may mount any path read-write, and
        # root stays root (without maproot=0 it would be 999:999).
        exports.write_text("*\t/\trw,alldirs,admin,maproot=0:0\n")
        topology = self.base / "mfstopology.cfg"
        topology.write_text("")
        for _ in range(3):
            self.ml_port, self.cs_port, self.cl_port = (free_port() for _ in range(3))
            cfg = self._write_cfg("mfsmaster.cfg", {
                "WORKING_USER": "root", "WORKING_GROUP": "root",   # our directories are root's
                "DATA_PATH": data,          # metadata, changelogs, lock file
                "EXPORTS_FILENAME": exports,
                "TOPOLOGY_FILENAME": topology,
                "SYSLOG_IDENT": "mfsmaster-test",
                "NICE_LEVEL": 0, "DISABLE_OOM_KILLER": 0, "LOCK_MEMORY": 0,
                # metaloggers (unused, but it listens), chunkservers, clients
                "MATOML_LISTEN_HOST": self.addr, "MATOML_LISTEN_PORT": self.ml_port,
                "MATOCS_LISTEN_HOST": self.addr, "MATOCS_LISTEN_PORT": self.cs_port,
                "MATOCL_LISTEN_HOST": self.addr, "MATOCL_LISTEN_PORT": self.cl_port,
            })
            self.master = self._spawn("master", [_which("mfsmaster"), "-f", "-c", str(cfg)])
            try:
                self._wait("mfsmaster to listen",
                           lambda: all(_listening(self.master.pid, self.addr, p)
                                       for p in (self.ml_port, self.cs_port, self.cl_port)),
                           deadline, [(self.master, "master")])
                return
            except RuntimeError:
                if "Address already in use" not in self.log("master"):
                    raise
                self._end(self.master, grace=0.0)   # lost a port race: new ports, again
        raise RuntimeError("mfsmaster could not bind free ports")

    def _chunkserver(self, deadline: float) -> None:
        hdd_cfg = self.base / "mfshdd.cfg"
        hdd_cfg.write_text(f"{self.base / 'hdd'}\n")
        for _ in range(3):
            self.csserv_port = free_port()
            cfg = self._write_cfg("mfschunkserver.cfg", {
                "WORKING_USER": "root", "WORKING_GROUP": "root",
                "DATA_PATH": self.base / "chunkserver",
                "HDD_CONF_FILENAME": hdd_cfg,
                "SYSLOG_IDENT": "mfschunkserver-test",
                "NICE_LEVEL": 0, "DISABLE_OOM_KILLER": 0, "LOCK_MEMORY": 0,
                "MASTER_HOST": self.addr, "MASTER_PORT": self.cs_port,
                # The chunkserver announces its listen address to the master, which hands it to
                # the clients for chunk I/O: it must be the non-loopback one (see the top).
                "BIND_HOST": self.addr,
                "CSSERV_LISTEN_HOST": self.addr, "CSSERV_LISTEN_PORT": self.csserv_port,
            })
            self.chunkserver = self._spawn("chunkserver",
                                           [_which("mfschunkserver"), "-f", "-c", str(cfg)])
            # Registered = the master accepted it and its space; before that a client can't
            # create chunks and a write would wait in mfsmount's retry loop.
            try:
                self._wait("the chunkserver to register with the master",
                           lambda: "chunkserver register end" in self.log("master"),
                           deadline,
                           [(self.chunkserver, "chunkserver"), (self.master, "master")])
                return
            except RuntimeError:
                if "Address already in use" not in self.log("chunkserver"):
                    raise
                self._end(self.chunkserver, grace=0.0)
        raise RuntimeError("mfschunkserver could not bind a free port")

    def _mount(self, mp: pathlib.Path, name: str, deadline: float) -> None:
        # -f: stay in the foreground, so the process is ours to track (it daemonizes otherwise).
        # -S /: the whole file system. -c: our (empty) defaults file instead of
        # /etc/mfs/mfsmount.cfg. mfsmount adds "allow_other" itself, so other users (smbd's
        # users, say) can use the mounts too.
        cfg = self.base / "mfsmount.cfg"
        cfg.touch()
        opts = ",".join((*POLITE_OPTIONS, *self.mount_options))
        proc = self._spawn(name, [_which("mfsmount"), "-f", "-c", str(cfg), "-H", self.addr,
                                  "-P", str(self.cl_port), "-S", "/", "-o", opts, str(mp)])
        self.mounts.append((mp, proc))
        self._wait(f"{mp} to be mounted", lambda: mounted(mp), deadline, [(proc, name)])

    def _ready(self, deadline: float) -> None:
        # One copy of each chunk, as there is one chunkserver. (The default goal, 2, works too,
        # but leaves every chunk "undergoal".) Set on the root, inherited by all new files.
        r = self.tool(["mfssetgoal", "-r", "1", str(self.mount_a)])
        if r.returncode != 0:
            raise RuntimeError(f"mfssetgoal failed: {r.stdout}{r.stderr}")
        # End to end: data written and fsync'ed on A reads back on B. The first write to a new
        # file system takes about 2 s (the master doesn't hand out a chunkserver in the first
        # ~2 s after it registered), so the tests don't pay for it.
        data = os.urandom(4096)
        a, b = self.mount_a / ".moosefs-probe", self.mount_b / ".moosefs-probe"
        with open(a, "wb") as f:
            f.write(data)
            os.fsync(f.fileno())
        if b.read_bytes() != data:
            raise RuntimeError("a write through mount A did not read back on mount B")
        a.unlink()
        # For a moment after that, statfs() can still report 0 blocks (total and free); wait
        # until both mounts report the chunkserver's space, so that no test sees a full disk.
        self._wait("statfs to report the chunkserver's space",
                   lambda: all(os.statvfs(mp).f_blocks for mp, _ in self.mounts), deadline,
                   [(proc, name) for (_, proc), name in zip(self.mounts, ("mount-a", "mount-b"))])

    # -- tear-down helpers ---------------------------------------------------------------------

    @staticmethod
    def _end(proc: subprocess.Popen | None, grace: float) -> None:
        if proc is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        # SIGKILL the whole session, which also gets whatever the process left behind.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


# Started and not yet stopped. A normal interpreter exit (an uncaught exception in a script,
# sys.exit, the end of a pytest run) stops them; nothing helps against SIGKILL of Python.
_live: set[MooseFS] = set()


@atexit.register
def _stop_leftovers() -> None:
    for fs in list(_live):
        with contextlib.suppress(Exception):
            fs.stop()


@contextlib.contextmanager
def moosefs(tmpdir, **kw):
    """Yield (mount_a, mount_b): two mounts of one fresh MooseFS living in `tmpdir`.
    Keyword arguments go to MooseFS (netns, mount_options, start_timeout)."""
    fs = MooseFS(tmpdir, **kw)
    fs.start()
    try:
        yield fs.mount_a, fs.mount_b
    finally:
        fs.stop()


# -- self-check ------------------------------------------------------------------------------------

def _lag(cond, limit: float = 5.0, step: float = 0.002) -> float | None:
    """Seconds until cond() holds (polled), None if not within `limit`."""
    t = time.monotonic()
    while not cond():
        if time.monotonic() - t > limit:
            return None
        time.sleep(step)
    return round(time.monotonic() - t, 3)


def _size(p) -> int | None:
    try:
        return os.stat(p).st_size
    except FileNotFoundError:
        return None


def _data(p) -> bytes | None:
    try:
        return pathlib.Path(p).read_bytes()
    except FileNotFoundError:
        return None


def _exists(p) -> bool:
    try:
        os.stat(p)
        return True
    except FileNotFoundError:
        return False


def _sh(cmd: str) -> str:
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.rstrip()


def _identity(fs: MooseFS, a: pathlib.Path, b: pathlib.Path) -> None:
    print("\n== 1. identity of one file seen through both mounts")
    (a / "ident").write_bytes(b"x")
    sa, sb = os.stat(a / "ident"), os.stat(b / "ident")
    va, vb = os.statvfs(a), os.statvfs(b)
    print(f"st_dev A={sa.st_dev} B={sb.st_dev} (differ: {sa.st_dev != sb.st_dev}); "
          f"st_ino A={sa.st_ino} B={sb.st_ino} (equal: {sa.st_ino == sb.st_ino})")
    print(f"statvfs f_fsid A={va.f_fsid} B={vb.f_fsid}; "
          f"st_mtime_ns={sa.st_mtime_ns} (whole seconds: {sa.st_mtime_ns % 10**9 == 0})")
    print(_sh(f"stat -c '%n dev=%d ino=%i size=%s' {a}/ident {b}/ident"))
    print(_sh(f"stat -f {a} {b}"))
    print(_sh(f"grep ' {fs.base}/' /proc/self/mountinfo"))
    print(fs.tool(["mfsfileinfo", str(a / "ident")]).stdout.rstrip())


def _visibility(a: pathlib.Path, b: pathlib.Path) -> None:
    print("\n== 2a. when does data written on A show on B?")
    mib = 1 << 20
    for i in range(3):
        data = os.urandom(mib)
        with open(a / f"w{i}", "wb") as f:
            f.write(data)   # 1 MiB > Python's buffer: goes straight to write(2), no flush needed
            now = (_size(b / f"w{i}"), _data(b / f"w{i}") == data)
            size_lag = _lag(lambda: _size(b / f"w{i}") == mib)
            data_lag = _lag(lambda: _data(b / f"w{i}") == data)
            print(f"  run {i}: write(1 MiB), no flush/fsync: B right away size={now[0]} "
                  f"data-equal={now[1]}; B size ok after {size_lag}s, data ok after {data_lag}s")
    for how in ("flush", "fsync", "fdatasync", "close"):
        data = os.urandom(mib)
        p, q = a / f"v-{how}", b / f"v-{how}"
        f = open(p, "wb", buffering=8 * mib)   # a buffer big enough to hold the 1 MiB
        f.write(data)
        before = (_size(q), _data(q) == data)
        f.flush()   # -> write(2)
        if how == "fsync":
            os.fsync(f.fileno())
        elif how == "fdatasync":
            os.fdatasync(f.fileno())
        elif how == "close":
            f.close()
        after = (_size(q), _data(q) == data)
        print(f"  buffered f.write(1 MiB): B size={before[0]} data-equal={before[1]}; after "
              f"{'f.flush()' if how == 'flush' else f'f.flush() + {how}'}: B size={after[0]} "
              f"data-equal={after[1]}" + (f"; data ok after {_lag(lambda: _data(q) == data)}s"
                                          if how == "flush" else ""))
        f.close()
    # Never flushed at all: the bytes are still in Python's buffer, no write(2) happened.
    f = open(a / "unflushed", "wb")
    f.write(b"y" * 100)
    print(f"  buffered f.write(100 B), no flush: B size after 2 s of polling: "
          f"{_size(b / 'unflushed')} (appears: {_lag(lambda: _size(b / 'unflushed') == 100, 2)})")
    f.close()


def _coherence(a: pathlib.Path, b: pathlib.Path) -> dict:
    """Seconds until B sees each of A's changes, after B has looked (and could have cached)."""
    r = {}
    (a / "s").write_bytes(b"1")
    os.stat(b / "s")
    with open(a / "s", "ab") as f:
        f.write(b"2345")
        os.fsync(f.fileno())
    r["size after append+fsync (stat)"] = _lag(lambda: _size(b / "s") == 5)
    fd = os.open(b / "s", os.O_RDONLY)
    os.fstat(fd)
    with open(a / "s", "ab") as f:
        f.write(b"6789")
        os.fsync(f.fileno())
    r["size after append+fsync (fstat on open fd)"] = _lag(lambda: os.fstat(fd).st_size == 9)
    r["appended data (pread on open fd)"] = _lag(lambda: os.pread(fd, 4, 5) == b"6789")
    os.close(fd)
    (a / "m").write_bytes(b"1")
    fd = os.open(b / "m", os.O_RDONLY)
    os.fstat(fd)
    os.chmod(a / "m", 0o600)
    r["chmod (fstat on open fd)"] = _lag(lambda: os.fstat(fd).st_mode & 0o777 == 0o600)
    os.utime(a / "m", (1_000_000_000, 1_000_000_000))
    r["utime (fstat on open fd)"] = _lag(lambda: os.fstat(fd).st_mtime == 1_000_000_000)
    os.close(fd)
    os.mkdir(a / "d")
    os.listdir(b / "d")
    _exists(b / "d" / "new")
    (a / "d" / "new").write_bytes(b"n")
    r["new file name (stat after a miss)"] = _lag(lambda: _exists(b / "d" / "new"))
    r["new file name (listdir)"] = _lag(lambda: "new" in os.listdir(b / "d"))
    os.rename(a / "d" / "new", a / "d" / "renamed")
    r["file rename: old name gone"] = _lag(lambda: not _exists(b / "d" / "new"))
    r["file rename: new name there"] = _lag(lambda: _exists(b / "d" / "renamed"))
    os.unlink(a / "d" / "renamed")
    r["file unlink (stat)"] = _lag(lambda: not _exists(b / "d" / "renamed"))
    r["file unlink (listdir)"] = _lag(lambda: "renamed" not in os.listdir(b / "d"))
    os.mkdir(a / "x")
    os.stat(b / "x")
    os.rename(a / "x", a / "y")
    r["dir rename: old name gone"] = _lag(lambda: not _exists(b / "x"))
    os.stat(b / "y")
    os.rmdir(a / "y")
    r["dir rmdir (stat)"] = _lag(lambda: not _exists(b / "y"))
    os.mkdir(a / "z")
    os.stat(b / "z")
    os.rmdir(a / "z")
    (a / "z").write_bytes(b"file now")
    r["dir replaced by a file"] = _lag(lambda: os.path.isfile(b / "z"))
    dfd = os.open(b / "d", os.O_RDONLY | os.O_DIRECTORY)
    n = os.fstat(dfd).st_nlink
    os.mkdir(a / "d" / "sub")
    r["dir nlink (fstat on open dir fd)"] = _lag(lambda: os.fstat(dfd).st_nlink == n + 1)
    os.close(dfd)
    return r


def _leftovers(fs: MooseFS) -> str:
    mounts = [line for line in _sh("mount").splitlines() if str(fs.base) in line]
    procs = [line for line in _sh("ps -eo pid,stat,args").splitlines()
             if str(fs.base) in line and " Z" not in line]
    return f"mounts: {mounts or 'none'}; processes: {procs or 'none'}"


def _main() -> None:
    import argparse
    import tempfile
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host-network", action="store_true",
                    help="an address on the host's lo instead of a network namespace")
    ap.add_argument("--quick", action="store_true", help="skip the default-options comparison")
    args = ap.parse_args()
    netns = False if args.host_network else None
    with tempfile.TemporaryDirectory(prefix="moosefs-selfcheck-") as tmp:
        fs = MooseFS(tmp, netns=netns)
        t = time.monotonic()
        a, b = fs.start()
        started = time.monotonic() - t
        try:
            print(f"MooseFS at {fs.addr} ({'private netns' if fs._ns_holder else 'host lo'}), "
                  f"master ports {fs.ml_port}/{fs.cs_port}/{fs.cl_port}, chunkserver port "
                  f"{fs.csserv_port}; mounts {a} {b}")
            print("mount options:", ",".join((*POLITE_OPTIONS, *fs.mount_options)))
            _identity(fs, a, b)
            _visibility(a, b)
            coherent = _coherence(a, b)
        finally:
            t = time.monotonic()
            fs.stop()
            stopped = time.monotonic() - t
        print("  leftovers after stop():", _leftovers(fs))
        defaults = {}
        if not args.quick:
            with moosefs(pathlib.Path(tmp) / "defaults", netns=netns,
                         mount_options=()) as (a2, b2):
                defaults = _coherence(a2, b2)
        print("\n== 2b. seconds until B sees A's change (None = not within 5 s)")
        print(f"  {'':48} {'our options':>12} {'mfsmount defaults':>18}")
        for k, v in coherent.items():
            print(f"  {k:48} {v!s:>12} {defaults.get(k, '-')!s:>18}")
        print("\n== 3. timing")
        print(f"  start (nothing -> both mounts usable): {started:.2f} s; stop: {stopped:.2f} s")
        for k, v in fs.timings.items():
            print(f"    {k:32} {v:.3f} s")


if __name__ == "__main__":
    _main()
