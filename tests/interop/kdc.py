"""A private MIT Kerberos KDC for interop tests.

`Kdc` creates a fresh realm database in a working directory and runs Debian's `krb5kdc` in the
foreground on a free loopback port. Nothing under /etc is read or written: every tool is pointed
at the files in the working directory through KRB5_CONFIG (client library configuration) and
KRB5_KDC_PROFILE (KDC/database configuration, read by krb5kdc, kdb5_util and kadmin.local).
Principals are managed with kadmin.local, which opens the database directly, so kadmind never
runs.

Usage:

    with Kdc(tmp_path / "kdc") as kdc:            # or kdc = Kdc(...); kdc.start(); ...; kdc.stop()
        svc = kdc.add_principal("cifs/localhost")         # random key
        kdc.export_keytab(svc, tmp_path / "smbq.keytab")
        alice = kdc.add_principal("alice", "Secret-1")
        cc = kdc.kinit(alice, "Secret-1", tmp_path / "alice.cc")
        kdc.kvno(svc, cc)                                 # service ticket into the cache
        env = {**os.environ, **kdc.env(ccache=cc)}        # for a client process
"""

from __future__ import annotations

import os
import pathlib
import secrets
import socket
import subprocess
import time

KRB5KDC = "/usr/sbin/krb5kdc"
KDB5_UTIL = "/usr/sbin/kdb5_util"
KADMIN_LOCAL = "/usr/sbin/kadmin.local"
HOST = "127.0.0.1"
# The smbq server's name in the tests' realm (every *.smbq.test host is in it): cifs/SERVER_HOST
# is its service principal.
SERVER_HOST = "files.smbq.test"
TIMEOUT = 30  # seconds for every helper command; a hang must fail the test, not stall it


def _free_port() -> int:
    """A loopback port free for both TCP and UDP (the KDC listens on both)."""
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind((HOST, 0))
            port = tcp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind((HOST, port))
                except OSError:
                    continue
                return port
    raise RuntimeError("no loopback port free for both TCP and UDP")


class Kdc:
    """One KDC for `realm` with all its files in `workdir` (created if missing; it must not
    hold a database already, since kdb5_util create refuses to overwrite one).

    Attributes: realm, workdir, port (0 until started), krb5_conf, kdc_conf, log_path,
    proc (the krb5kdc Popen, None when stopped)."""

    def __init__(self, workdir: pathlib.Path, realm: str = "SMBQ.TEST"):
        self.workdir = pathlib.Path(workdir).resolve()
        self.realm = realm
        self.port = 0
        self.krb5_conf = self.workdir / "krb5.conf"
        self.kdc_conf = self.workdir / "kdc.conf"
        self.log_path = self.workdir / "krb5kdc.log"
        # Acceptors (the smbq server under test) keep a replay cache; by default it goes to
        # /var/tmp, shared between tests and runs. Keep it with the realm instead.
        self.rcache_dir = self.workdir / "rcache"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Kdc:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if not os.path.exists(KRB5KDC):
            raise RuntimeError("krb5kdc not found: install Debian's krb5-kdc, "
                               "krb5-admin-server and krb5-user packages")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.rcache_dir.mkdir(exist_ok=True)
        self.port = _free_port()
        self._write_config()
        # -s writes a stash file so krb5kdc and kadmin.local open the database without asking
        # for the master password; the password itself is never needed again.
        self._run([KDB5_UTIL, "create", "-s", "-r", self.realm,
                   "-P", secrets.token_urlsafe(24)])
        try:
            self._start_kdc()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None

    def env(self, *, ccache: pathlib.Path | str | None = None,
            keytab: pathlib.Path | str | None = None) -> dict[str, str]:
        """Environment variables for a Kerberos client or server process, to be merged into
        os.environ. `ccache` adds KRB5CCNAME (client credentials), `keytab` KRB5_KTNAME
        (acceptor keys). KRB5_KDC_PROFILE is left out: only the KDC-side tools read it."""
        env = {"KRB5_CONFIG": str(self.krb5_conf), "KRB5RCACHEDIR": str(self.rcache_dir)}
        if ccache is not None:
            env["KRB5CCNAME"] = f"FILE:{ccache}"
        if keytab is not None:
            env["KRB5_KTNAME"] = f"FILE:{keytab}"
        return env

    def principal(self, name: str) -> str:
        """`name` qualified with the realm unless it already names one."""
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, password: str | None = None) -> str:
        """Create `name` with `password`, or with a random key when None (a service)."""
        princ = self.principal(name)
        key = "-randkey" if password is None else f"-pw {_quote(password)}"
        self._kadmin(f"addprinc {key} {princ}")
        return princ

    def set_max_life(self, principal: str, life: str) -> None:
        """Cap the ticket life of `principal` (e.g. "10s"); a ticket's life is the minimum of
        the client's, the service's (krbtgt for kinit) and the realm's max_life."""
        self._kadmin(f"modprinc -maxlife {_quote(life)} {self.principal(principal)}")

    def export_keytab(self, principal: str, path: pathlib.Path | str, *,
                      norandkey: bool = False) -> pathlib.Path:
        """Append `principal`'s keys to the keytab at `path`. Plain ktadd gives the principal
        new random keys (bumping its kvno), which invalidates keytabs exported before and
        tickets issued before; `norandkey` exports the current keys instead."""
        path = pathlib.Path(path).resolve()
        flag = "-norandkey " if norandkey else ""
        self._kadmin(f"ktadd -k {_quote(str(path))} {flag}{self.principal(principal)}")
        return path

    def kinit(self, principal: str, password: str, ccache_path: pathlib.Path | str,
              lifetime: str | None = None) -> pathlib.Path:
        """Get a TGT for `principal` into the file ccache at `ccache_path`. `lifetime` (e.g.
        "10s") asks for a short ticket; the KDC still caps it at the principal's max life."""
        ccache_path = pathlib.Path(ccache_path).resolve()
        args = ["kinit"] + (["-l", lifetime] if lifetime else []) + [self.principal(principal)]
        # MIT kinit reads the password from stdin when it is not a terminal.
        self._run(args, env=self.env(ccache=ccache_path), input=password + "\n")
        return ccache_path

    def kvno(self, service_principal: str, ccache_path: pathlib.Path | str) -> str:
        """Fetch a ticket for `service_principal` into the ccache (with its TGT); returns
        kvno's output ("<principal>: kvno = N")."""
        return self._run(["kvno", self.principal(service_principal)],
                         env=self.env(ccache=ccache_path)).stdout

    def _write_config(self) -> None:
        r, port, w = self.realm, self.port, self.workdir
        # No DNS: the realm and its KDC are named here, and host names are used as given
        # (no forward or reverse canonicalisation), so "cifs/files.smbq.test" stays exactly that.
        # smbclient refuses Kerberos to "localhost" or an IP address, so tests name the server
        # SERVER_HOST and connect to 127.0.0.1 with smbclient -I.
        # udp_preference_limit = 1 makes clients use TCP, as the smbq server will.
        self.krb5_conf.write_text(f"""\
[libdefaults]
    default_realm = {r}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    rdns = false
    dns_canonicalize_hostname = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    renew_lifetime = 1d
    forwardable = true

[realms]
    {r} = {{
        kdc = {HOST}:{port}
    }}

[domain_realm]
    localhost = {r}
    .smbq.test = {r}
""")
        # kdc_listen/kdc_tcp_listen (the 1.15+ names of kdc_ports/kdc_tcp_ports) take an
        # address, so the KDC binds loopback only, the address _free_port checked. No acl_file:
        # kadmind never runs. kdc = FILE: logs krb5kdc's messages where tests can show them.
        self.kdc_conf.write_text(f"""\
[kdcdefaults]
    kdc_listen = {HOST}:{port}
    kdc_tcp_listen = {HOST}:{port}

[realms]
    {r} = {{
        database_name = {w}/principal
        key_stash_file = {w}/stash
        master_key_type = aes256-cts-hmac-sha1-96
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
        max_life = 1d
        max_renewable_life = 7d
    }}

[logging]
    kdc = FILE:{self.log_path}
""")

    def _start_kdc(self) -> None:
        # -n: stay in the foreground, so the Popen is the KDC and stop() can end it.
        # The KDC's own stdout/stderr (startup errors before logging is set up) go to the
        # same log file.
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen([KRB5KDC, "-n", "-r", self.realm], env=self._kdc_env(),
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"krb5kdc exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"krb5kdc did not accept TCP on {HOST}:{self.port} within 10 s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def _kdc_env(self) -> dict[str, str]:
        return {**os.environ, **self.env(), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _kadmin(self, query: str) -> str:
        out = self._run([KADMIN_LOCAL, "-r", self.realm, "-q", query])
        # kadmin.local reports a failed query (e.g. "Principal or policy already exists") on
        # stderr but may still exit 0, so its stderr is checked as well.
        errors = [line for line in out.stderr.splitlines()
                  if line and not line.startswith("Authenticating as principal")
                  and "No policy specified" not in line]
        if errors:
            raise RuntimeError(f"kadmin.local -q {query!r} failed:\n{out.stdout}{out.stderr}")
        return out.stdout

    def _run(self, args: list[str], *, env: dict[str, str] | None = None,
             input: str | None = None) -> subprocess.CompletedProcess:
        full_env = {**self._kdc_env(), **(env or {})}
        try:
            p = subprocess.run(args, env=full_env, input=input, capture_output=True, text=True,
                               timeout=TIMEOUT)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"{args} timed out after {TIMEOUT} s:\n"
                               f"{e.stdout or ''}{e.stderr or ''}") from None
        if p.returncode != 0:
            raise RuntimeError(f"{args} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
        return p


def _quote(arg: str) -> str:
    """Quote one argument for kadmin's own command-line parser (it splits -q on spaces and
    honours double quotes)."""
    if any(c in arg for c in '"\\'):
        raise ValueError(f"kadmin argument must not contain quotes or backslashes: {arg!r}")
    return f'"{arg}"'
