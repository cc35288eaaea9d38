"""A private Samba smbd for interop tests of smbq's client.

`SambaServer` starts the Debian `smbd` on a free loopback port with its own smb.conf and every
directory Samba writes (locks, state, cache, pid, private, ncalrpc, logs) inside one temporary
directory, so the system configuration and any system smbd are never touched. The share belongs to
a dedicated Unix user (smbd runs as root and switches to the logged-on user's uid for file access,
so a Samba account must map to a real Unix account); its Samba password lives in a private
tdbsam passdb and is fresh per instance.

Usage:

    with SambaServer(tmp_path) as samba:          # or s = SambaServer(...); ...; s.stop()
        smbclient //127.0.0.1/{samba.share_name} -p {samba.port} -U {samba.user}%{samba.password}
"""

from __future__ import annotations

import json
import os
import pathlib
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

SMBD = shutil.which("smbd") or "/usr/sbin/smbd"
PDBEDIT = shutil.which("pdbedit") or "/usr/bin/pdbedit"
SMBSTATUS = shutil.which("smbstatus") or "/usr/bin/smbstatus"
DEFAULT_USER = "smbqtest"
HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def ensure_unix_user(name: str) -> pwd.struct_passwd:
    """Create a locked system account `name` unless it exists (idempotent, race tolerant)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    if os.geteuid() != 0:
        raise RuntimeError(f"Unix user {name!r} is missing and only root can create it")
    nologin = "/usr/sbin/nologin" if os.path.exists("/usr/sbin/nologin") else "/bin/false"
    p = subprocess.run(["useradd", "--system", "--no-create-home", "--user-group",
                        "--shell", nologin, name], capture_output=True, text=True)
    try:
        # Another test process may have created it between the lookup and useradd (exit 9).
        return pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(f"useradd {name} failed ({p.returncode}): {p.stderr}") from None


def _searchable_by_others(d: pathlib.Path) -> bool:
    return all(p.stat().st_mode & 0o001 for p in [d, *d.parents])


def _share_parent(root: pathlib.Path, tmp: str | None = None) -> tuple[pathlib.Path, bool]:
    """Where to put the share directory, and whether stop() must remove it.

    smbd opens the share as the share user, so every directory above the share must be
    searchable by others. Inside `root` (ours) that is arranged with o+x; pytest's tmp_path and
    friends sit under 0700 directories we do not own, and then the share goes into its own
    directory in the system temporary directory instead."""
    if _searchable_by_others(root.parent):
        for d in (root, root / "samba"):
            d.chmod((d.stat().st_mode & 0o7777) | 0o711)
        return root / "samba", False
    own = pathlib.Path(tempfile.mkdtemp(prefix="smbq-samba-share-", dir=tmp))
    own.chmod(0o711)
    if not _searchable_by_others(own):
        shutil.rmtree(own, ignore_errors=True)
        raise RuntimeError(f"{own} is not reachable by other users (check TMPDIR), so smbd "
                           f"cannot open a share there as the share user")
    return own, True


class SambaServer:
    """One running smbd on 127.0.0.1:`port` exporting `share_name` (read-write) at `share_path`.

    Constructor arguments (all keyword except `workdir`):
      workdir     directory to hold everything (a subdirectory `samba/` is used; workdir gets
                  o+x so smbd, as the share user, can reach the share); None makes a private
                  temporary directory that stop() removes. If workdir sits under directories
                  others cannot search (pytest's tmp_path), the share alone goes into a fresh
                  directory in the system temp dir, removed by stop().
      encrypt     value of `server smb encrypt`: "required" (default), "desired",
                  "if_required", "off" or "default".
      signing     value of `server signing`, or None to keep Samba's default.
      min_protocol / max_protocol   `server min/max protocol` (max None = Samba's default).
      user        Unix + Samba account name (created if missing).
      password    account password; None picks a random one.
      share_name  name of the exported share.
      log_level   smbd `log level` (raise it, e.g. to 10, when debugging).
      extra_global / extra_share  additional "name = value" lines for [global] / the share.
      start_timeout  seconds to wait for the port to accept connections.
      chroot      a samba_unstable.Chroot: run that root's smbd (Samba 4.25 or newer from
                  Debian unstable) instead of this machine's. Everything then lives inside the
                  root (workdir must be there, or None), and the accounts are made in both.

    Attributes: host, port, user, password, share_name, share_path (pathlib.Path; also `share`,
    as on SmbqServer), unc ("//127.0.0.1/share"), base (the private directory), conf_path,
    log_path (smbd's stdout/stderr), log_dir (per-process Samba logs), proc (the smbd Popen).
    Methods: stop(), server_log(), log_tail(n), smbstatus_json(), sessions(), wait_sessions(),
    smbclient_args().
    """

    def __init__(self, workdir: pathlib.Path | str | None = None, *, encrypt: str = "required",
                 signing: str | None = None, min_protocol: str = "SMB2_02",
                 max_protocol: str | None = None, user: str = DEFAULT_USER,
                 password: str | None = None, share_name: str = "share", log_level: int = 1,
                 extra_global: tuple[str, ...] | list[str] = (),
                 extra_share: tuple[str, ...] | list[str] = (),
                 extra_shares: dict[str, list[str]] | None = None, start_timeout: float = 30.0,
                 chroot=None):
        self.chroot = chroot
        if chroot is not None:
            chroot.install_samba()
        elif not os.path.exists(SMBD):
            raise RuntimeError("smbd not found: install Debian's samba package "
                               "(apt-get install samba)")
        self._own_tmp = workdir is None
        tmp_parent = None if chroot is None else chroot.path("/tmp")
        root = pathlib.Path(tempfile.mkdtemp(prefix="smbq-samba-", dir=tmp_parent)
                            if workdir is None else workdir).resolve()
        if chroot is not None and not root.is_relative_to(chroot.root):
            raise ValueError(f"{root} is outside the chroot {chroot.root}")
        self.base = root / "samba"
        self.base.mkdir(parents=True, exist_ok=True)
        self._tmp_root = root
        self.host = HOST
        self.user = user
        self.password = password if password is not None else "Pw-" + secrets.token_hex(8)
        self.share_name = share_name
        self.unc = f"//{HOST}/{share_name}"
        self.encrypt = encrypt
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self._log_file = None
        self._own_share_parent = False
        self.log_dir = self.base / "log"
        self.log_path = self.base / "smbd.out"
        self.conf_path = self.base / "smb.conf"
        self.share_path = self.base / "share"
        self.share = self.share_path
        try:
            self._setup(encrypt=encrypt, signing=signing, min_protocol=min_protocol,
                        max_protocol=max_protocol, log_level=log_level,
                        extra_global=list(extra_global), extra_share=list(extra_share),
                        extra_shares=dict(extra_shares or {}))
            self._start_on_free_port(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _setup(self, **conf) -> None:
        dirs = {name: self.base / name for name in
                ("lock", "state", "cache", "pid", "private", "ncalrpc", "binddns", "log",
                 "usershares")}
        for name, d in dirs.items():
            d.mkdir(exist_ok=True)
            d.chmod(0o700 if name in ("private", "binddns") else 0o755)
        account = self._ensure_user(self.user)
        share_parent, self._own_share_parent = _share_parent(
            self._tmp_root, None if self.chroot is None else str(self.chroot.path("/tmp")))
        self.share_path = share_parent / "share"
        self.share = self.share_path
        self.share_path.mkdir(exist_ok=True)
        os.chown(self.share_path, account.pw_uid, account.pw_gid)
        self.share_path.chmod(0o755)
        self._conf = dict(dirs=dirs, **conf)

    def _start_on_free_port(self, timeout: float) -> None:
        # Picking a free port and binding it in smbd is racy; retry with a new port if smbd
        # reports the address is taken.
        last_error = None
        for attempt in range(3):
            self.port = _free_port()
            self._write_conf()
            if attempt == 0:
                self._add_samba_user()
            try:
                self._start(timeout)
                return
            except _PortInUse as e:
                last_error = e
                self._kill()
        raise RuntimeError(f"smbd could not bind a free port: {last_error}")

    # -- the tools, here or in the chroot -------------------------------------------------------

    def _cmd(self, tool: str) -> list[str]:
        """How to run Samba's `tool` (smbd, pdbedit, smbstatus)."""
        here = {"smbd": SMBD, "pdbedit": PDBEDIT, "smbstatus": SMBSTATUS}
        if self.chroot is None:
            return [here[tool]]
        inside = {"smbd": "/usr/sbin/smbd", "pdbedit": "/usr/bin/pdbedit",
                  "smbstatus": "/usr/bin/smbstatus"}
        return ["chroot", str(self.chroot.root), inside[tool]]

    def _in(self, path: pathlib.Path) -> str:
        """`path` as Samba sees it (inside the chroot, if any)."""
        if self.chroot is None:
            return str(path)
        return "/" + str(path.relative_to(self.chroot.root))

    def _ensure_user(self, name: str) -> pwd.struct_passwd:
        account = ensure_unix_user(name)
        if self.chroot is not None:
            self.chroot.ensure_user(account)
        return account

    # -- configuration -------------------------------------------------------------------------

    def _write_conf(self) -> None:
        c = self._conf
        d = c["dirs"]
        g = [
            "server role = standalone server",
            "workgroup = SMBQTEST",
            "netbios name = SMBQSAMBA",
            f"smb ports = {self.port}",
            "interfaces = lo",
            "bind interfaces only = yes",
            "disable netbios = yes",
            f"server min protocol = {c['min_protocol']}",
            f"server smb encrypt = {c['encrypt']}",
            f"passdb backend = tdbsam:{self._in(d['private'] / 'passdb.tdb')}",
            f"lock directory = {self._in(d['lock'])}",
            f"state directory = {self._in(d['state'])}",
            f"cache directory = {self._in(d['cache'])}",
            f"pid directory = {self._in(d['pid'])}",
            f"private dir = {self._in(d['private'])}",
            f"ncalrpc dir = {self._in(d['ncalrpc'])}",
            f"binddns dir = {self._in(d['binddns'])}",
            f"usershare path = {self._in(d['usershares'])}",
            f"smb passwd file = {self._in(d['private'] / 'smbpasswd')}",
            f"log file = {self._in(d['log'])}/log.%m",
            "max log size = 0",
            f"log level = {c['log_level']}",
            "map to guest = never",
            "load printers = no",
            "printing = bsd",
            "printcap name = /dev/null",
            "disable spoolss = yes",
            "unix password sync = no",
            "obey pam restrictions = no",
        ]
        if c["max_protocol"] is not None:
            g.append(f"server max protocol = {c['max_protocol']}")
        if c["signing"] is not None:
            g.append(f"server signing = {c['signing']}")
        g += c["extra_global"]
        s = [f"path = {self._in(self.share_path)}", "read only = no", "browseable = yes",
             f"valid users = {self.user}"] + c["extra_share"]
        text = "[global]\n" + "".join(f"\t{x}\n" for x in g)
        text += f"\n[{self.share_name}]\n" + "".join(f"\t{x}\n" for x in s)
        # More shares, each given whole ({name: [option lines]}; the options name its path,
        # as Samba sees it: extra_path()).
        for name, options in c["extra_shares"].items():
            text += f"\n[{name}]\n" + "".join(f"\t{x}\n" for x in options)
        self.conf_path.write_text(text)

    def _add_samba_user(self) -> None:
        # pdbedit -t reads the new password twice from stdin.
        p = subprocess.run([*self._cmd("pdbedit"), "-s", self._in(self.conf_path), "-a", "-t",
                            "-u", self.user],
                           input=f"{self.password}\n{self.password}\n", capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"pdbedit -a {self.user} failed ({p.returncode}):\n"
                               f"{p.stdout}{p.stderr}")

    def add_user(self, name: str, password: str) -> None:
        """Another account on this server (a Unix user, created if missing, and its Samba
        password), for tests that log on as a second user."""
        self._ensure_user(name)
        p = subprocess.run([*self._cmd("pdbedit"), "-s", self._in(self.conf_path), "-a", "-t",
                            "-u", name],
                           input=f"{password}\n{password}\n", capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"pdbedit -a {name} failed ({p.returncode}):\n"
                               f"{p.stdout}{p.stderr}")

    # -- process control -----------------------------------------------------------------------

    def _start(self, timeout: float) -> None:
        if self._log_file is not None:
            self._log_file.close()
        # Truncated per attempt, so the port-clash check reads only this attempt's log.
        self._log_file = open(self.log_path, "wb")
        # A new session makes smbd the leader of its own process group, so stop() can signal
        # smbd and every child it forks (per-connection smbd, samba-dcerpcd, rpcd_*) at once;
        # --no-process-group keeps smbd from trying to set one up itself.
        self.proc = subprocess.Popen(
            [*self._cmd("smbd"), "-s", self._in(self.conf_path), "--foreground",
             "--no-process-group",
             "--debug-stdout"],
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # smbd keeps running when it can bind ::1 but not 127.0.0.1, so look at the log
            # as well as at the exit.
            if "Address already in use" in self.log_tail(40):
                raise _PortInUse(self.log_tail(10))
            if self.proc.poll() is not None:
                raise RuntimeError(f"smbd exited with {self.proc.returncode} before listening "
                                   f"on port {self.port}:\n{self.log_tail()}")
            # Ready once smbd itself holds the listening socket (a bare connect could reach
            # whoever else grabbed the port between _free_port() and smbd's bind) and the
            # port accepts a connection.
            if self._smbd_listens():
                try:
                    with socket.create_connection((HOST, self.port), timeout=1):
                        return
                except OSError:
                    pass
            time.sleep(0.1)
        raise RuntimeError(f"smbd did not listen on {HOST}:{self.port} within {timeout}s:\n"
                           f"{self.log_tail()}")

    def _smbd_listens(self) -> bool:
        """Whether the smbd process owns a TCP socket listening on 127.0.0.1:port."""
        want = f"0100007F:{self.port:04X}"
        inodes = set()
        try:
            with open("/proc/net/tcp") as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    # local_address, state (0A = LISTEN), inode: see proc(5).
                    if len(cols) > 9 and cols[1] == want and cols[3] == "0A":
                        inodes.add(f"socket:[{cols[9]}]")
            fd_dir = f"/proc/{self.proc.pid}/fd"
            return any(os.readlink(f"{fd_dir}/{fd}") in inodes for fd in os.listdir(fd_dir))
        except OSError:
            return False

    def _leftovers(self) -> list[int]:
        """Live processes of this server, found by our private config path in their command
        line: smbd's forks inherit it and the helpers it execs (samba-dcerpcd, which makes
        itself a session leader, rpcd_*) get it as --configfile. Zombies are dead already (once
        smbd is gone they wait for init to reap them), so they are skipped."""
        needle = self._in(self.conf_path).encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle not in f.read():
                        continue
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
            if state not in (b"Z", b"X"):
                found.append(int(entry))
        return found

    def _kill(self) -> None:
        if self.proc is None:
            return
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            # Signal the group only while smbd (its leader) is unreaped, so the id cannot
            # have been reused.
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    pass
            for pid in self._leftovers():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
            while time.monotonic() < deadline and self._leftovers():
                time.sleep(0.05)
            if not self._leftovers():
                return

    def stop(self) -> int | None:
        """Terminate smbd and all its children; return smbd's exit code. Idempotent."""
        self._kill()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        rc = self.proc.returncode if self.proc is not None else None
        if self._own_tmp and self._tmp_root.exists():
            shutil.rmtree(self._tmp_root, ignore_errors=True)
        if self._own_share_parent and self.share_path.parent.exists():
            shutil.rmtree(self.share_path.parent, ignore_errors=True)
        return rc

    def __enter__(self) -> "SambaServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- diagnostics ---------------------------------------------------------------------------

    def server_log(self) -> str:
        """smbd's stdout/stderr followed by every per-process Samba log file."""
        parts = []
        if self.log_path.exists():
            parts.append(f"==> {self.log_path.name}\n" +
                         self.log_path.read_text(errors="replace"))
        if self.log_dir.exists():
            for p in sorted(self.log_dir.iterdir()):
                if p.is_file():
                    parts.append(f"==> log/{p.name}\n" + p.read_text(errors="replace"))
        return "\n".join(parts)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.server_log().splitlines()[-lines:])

    def smbstatus_json(self, *args: str) -> dict:
        """`smbstatus --json` against this server's private state (sessions, tcons, opens)."""
        p = subprocess.run([*self._cmd("smbstatus"), "-s", self._in(self.conf_path), "--json",
                            *args],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"smbstatus failed ({p.returncode}): {p.stdout}{p.stderr}")
        return json.loads(p.stdout)

    def sessions(self) -> list[dict]:
        """The server's current SMB sessions as smbstatus reports them (each has "username",
        "dialect", "encryption": {"cipher", "degree"}, "signing": {...})."""
        return list(self.smbstatus_json("--brief").get("sessions", {}).values())

    def wait_sessions(self, count: int = 1, timeout: float = 15.0,
                      with_tcon: bool = True) -> list[dict]:
        """Poll smbstatus until at least `count` sessions exist (each with a tree connect when
        `with_tcon`); return them. Use while a client holds its connection open."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.smbstatus_json()
            sessions = list(status.get("sessions", {}).values())
            if with_tcon:
                tcon_sessions = {t.get("session_id") for t in status.get("tcons", {}).values()}
                sessions = [s for s in sessions if s.get("session_id") in tcon_sessions]
            if len(sessions) >= count:
                return sessions
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(sessions)} of {count} sessions after {timeout}s: "
                                   f"{json.dumps(status)}\n{self.log_tail()}")
            time.sleep(0.1)

    def extra_path(self, path: pathlib.Path) -> str:
        """A directory for an extra share's `path = ` line, as this server sees it."""
        return self._in(pathlib.Path(path).resolve())

    def smbclient_args(self, *, password: str | None = None) -> list[str]:
        """Hermetic smbclient arguments for the share (append -c '...' and options)."""
        pw = self.password if password is None else password
        return ["smbclient", "-s", "/dev/null", self.unc, "-p", str(self.port),
                "-U", f"{self.user}%{pw}"]


class _PortInUse(RuntimeError):
    pass


class RecordingProxy:
    """A loopback TCP relay that records both directions of every connection, so a test can
    check what actually crossed the wire (for example that after SESSION_SETUP only SMB2
    TRANSFORM frames flow) without packet-capture privileges or tshark timing.

    Point the client at `port`; after the client is done, call stop() and read `connections`:
    a list of (client_to_server: bytes, server_to_client: bytes)."""

    def __init__(self, target_port: int, target_host: str = HOST):
        self._target = (target_host, target_port)
        self._listener = socket.create_server((HOST, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._records: list[list[bytearray]] = []
        self._socks: list[socket.socket] = []
        self._closing = False
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        # accept() is not woken by close() from another thread, so poll for stop().
        self._listener.settimeout(0.1)
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            rec = [bytearray(), bytearray()]
            with self._lock:
                self._records.append(rec)
                self._socks += [client, upstream]
            for src, dst, buf in ((client, upstream, rec[0]), (upstream, client, rec[1])):
                t = threading.Thread(target=self._pump, args=(src, dst, buf), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, buf: bytearray) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    buf += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
                try:
                    s.shutdown(how)
                except OSError:
                    pass

    def stop(self, timeout: float = 10.0) -> None:
        self._closing = True
        self._accept_thread.join(timeout)
        self._listener.close()
        for t in self._threads:
            t.join(timeout)
        for s in self._socks:
            s.close()

    @property
    def connections(self) -> list[tuple[bytes, bytes]]:
        with self._lock:
            return [(bytes(a), bytes(b)) for a, b in self._records]


def split_frames(stream: bytes) -> list[bytes]:
    """Split a Direct TCP byte stream into SMB messages (MS-SMB2 2.1: a zero byte and a 24-bit
    big-endian length before each message). A trailing partial frame is dropped."""
    frames, off = [], 0
    while off + 4 <= len(stream):
        length = int.from_bytes(stream[off + 1:off + 4], "big")
        if off + 4 + length > len(stream):
            break
        frames.append(stream[off + 4:off + 4 + length])
        off += 4 + length
    return frames
