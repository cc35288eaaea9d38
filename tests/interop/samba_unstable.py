"""Samba's client tools from Debian's unstable suite (4.25 or newer: smbclient and smbtorture
over QUIC, ngtcp2 + GnuTLS) on this Debian 12 machine: a minimal debootstrap of unstable with
smbclient, then samba-testsuite installed inside it, cached under /var/cache (40 s and 610 MB
the first time on 2026-11-28, nothing after), and run with chroot.

Several pytest-xdist workers may use it at once: making it is done under a lock, and /proc and
/dev stay mounted while any process holds a `Chroot` (the lock file lists those processes).

Needs root and debootstrap (scripts/test.sh installs it)."""

import contextlib
import fcntl
import os
import pathlib
import shutil
import subprocess

CACHE = pathlib.Path(os.environ.get("SMBQ_SAMBA_UNSTABLE", "/var/cache/smbq-samba-unstable"))
MIRROR = os.environ.get("SMBQ_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# smbclient refuses QUIC to an address in the UNC, and "localhost" resolves to ::1 first: the
# tests name the server by this, which the chroot's /etc/hosts maps to 127.0.0.1.
HOST = "smbqtest"
MOUNTS = (("proc", "proc", ["-t", "proc"]), ("/dev", "dev", ["--bind"]))
# The suite's Release file may say it expired; apt would then refuse the index.
APT = ["apt-get", "-q", "-o", "Acquire::Check-Valid-Until=false"]


@contextlib.contextmanager
def locked():
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield f
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _debootstrap(root: pathlib.Path):
    """The base root with smbclient (into a temporary directory, renamed when done, so an
    interrupted run leaves nothing half made)."""
    assert os.geteuid() == 0, "debootstrap and chroot need root"
    assert shutil.which("debootstrap"), "debootstrap missing (Debian: debootstrap)"
    tmp = CACHE / "root.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    p = subprocess.run(["debootstrap", "--variant=minbase", "--include=smbclient",
                        "unstable", str(tmp), MIRROR],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)


def _apt(root: pathlib.Path, *args, timeout=900):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    p = subprocess.run(["chroot", str(root), *APT, *args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return p


def _install_smbtorture(root: pathlib.Path):
    """samba-testsuite inside the root. A virtual-package dependency of python3-cryptography
    can leave packages unconfigured; `apt-get -f install` finishes them."""
    p = _apt(root, "update")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    p = _apt(root, "install", "-y", "--no-install-recommends", "samba-testsuite")
    fixed = _apt(root, "-f", "install", "-y")
    assert (root / "usr/bin/smbtorture").exists(), (p.stdout[-3000:] + p.stderr[-3000:]
                                                    + fixed.stdout[-2000:] + fixed.stderr[-2000:])


def _mount(root: pathlib.Path):
    for src, dst, args in MOUNTS:
        target = root / dst
        if subprocess.run(["mountpoint", "-q", str(target)]).returncode != 0:
            subprocess.run(["mount", *args, src, str(target)], check=True, timeout=30)


def _unmount(root: pathlib.Path):
    for _, dst, _ in reversed(MOUNTS):
        subprocess.run(["umount", "-l", str(root / dst)], check=False, timeout=30)


def _users(lock) -> set:
    """The processes using the root, as the lock file lists them, less those that died (a
    killed run must not keep the mounts forever)."""
    lock.seek(0)
    pids = {int(w) for w in lock.read().split() if w.isdigit()}
    return {pid for pid in pids if pathlib.Path(f"/proc/{pid}").exists()}


def _set_users(lock, pids: set):
    lock.seek(0)
    lock.truncate()
    lock.write(" ".join(str(p) for p in sorted(pids)))
    lock.flush()


class Chroot:
    """The provisioned root, with /proc and /dev mounted while any process uses it."""

    def __init__(self):
        self.root = CACHE / "root"
        with locked() as lock:
            if not (self.root / "usr/bin/smbclient").exists():
                _debootstrap(self.root)
            (self.root / "etc/hosts").write_text(f"127.0.0.1 {HOST}\n127.0.0.1 localhost\n")
            # Mounted whatever the list says: one left by a killed run must not leave a
            # root without /proc.
            _mount(self.root)
            _set_users(lock, _users(lock) | {os.getpid()})
            self.open = True
            if not (self.root / "usr/bin/smbtorture").exists():
                _install_smbtorture(self.root)

    def install_samba(self):
        """smbd too (Debian's samba package), for tests that compare smbq with Samba 4.25+
        (scripts/conformance.py): 14 s and 60 MB more, once."""
        with locked():
            if not (self.root / "usr/sbin/smbd").exists():
                p = _apt(self.root, "install", "-y", "--no-install-recommends", "samba")
                if not (self.root / "usr/sbin/smbd").exists():
                    p = _apt(self.root, "update")
                    p = _apt(self.root, "install", "-y", "--no-install-recommends", "samba")
                assert (self.root / "usr/sbin/smbd").exists(), p.stdout[-3000:] + p.stderr[-3000:]

    def etcd(self) -> pathlib.Path:
        """The etcd server binary of unstable (3.5 or newer), for the cluster tests against a
        newer etcd than Debian 12's 3.4: the package is downloaded and unpacked beside the
        root, not installed (its postinst wants systemd). The binary needs only libc, so it
        runs on this machine directly."""
        out = CACHE / "etcd"
        binary = out / "usr/bin/etcd"
        with locked():
            if not binary.exists():
                p = self.run(["sh", "-c", "cd /tmp && " + " ".join(APT) + " download etcd-server"])
                if p.returncode != 0:
                    _apt(self.root, "update")
                    p = self.run(["sh", "-c",
                                  "cd /tmp && " + " ".join(APT) + " download etcd-server"])
                debs = sorted((self.root / "tmp").glob("etcd-server_*.deb"))
                assert debs, p.stdout[-3000:] + p.stderr[-3000:]
                shutil.rmtree(out, ignore_errors=True)
                subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(out)], check=True)
                for d in debs:
                    d.unlink()
        return binary

    def ensure_user(self, account):
        """The account (a pwd.struct_passwd of this machine) inside the root too, with the same
        ids, so files smbd makes there belong to the same user here."""
        with locked():
            names = {line.split(":", 1)[0]
                     for line in (self.root / "etc/passwd").read_text().splitlines()}
            if account.pw_name in names:
                return
            groups = {line.split(":", 1)[0]
                      for line in (self.root / "etc/group").read_text().splitlines()}
            if account.pw_name not in groups:
                self.run(["groupadd", "-g", str(account.pw_gid), account.pw_name])
            p = self.run(["useradd", "-M", "-u", str(account.pw_uid), "-g",
                          str(account.pw_gid), "-s", "/usr/sbin/nologin", account.pw_name])
            assert p.returncode == 0, p.stderr

    def version(self, tool="smbclient") -> str:
        return self.run([tool, "--version"]).stdout.strip()

    def path(self, inside: str) -> pathlib.Path:
        """Where a path inside the chroot is on this machine."""
        return self.root / inside.lstrip("/")

    def run(self, args, timeout=300):
        return subprocess.run(["chroot", str(self.root), *args], capture_output=True,
                              text=True, timeout=timeout)

    def close(self):
        if not self.open:
            return
        self.open = False
        with locked() as lock:
            users = _users(lock) - {os.getpid()}
            if not users:
                _unmount(self.root)
            _set_users(lock, users)


def main():
    """Provisions everything the tests take from unstable (the root with smbtorture, smbd, and
    etcd), so scripts/test.sh can do it in the background while it builds: the tests then
    find it cached. Prints how long it took."""
    import time
    started = time.monotonic()
    root = Chroot()
    try:
        root.install_samba()
        root.etcd()
        print(f"samba_unstable: {root.version().strip()}, smbd and etcd ready "
              f"in {time.monotonic() - started:.0f} s")
    finally:
        root.close()


if __name__ == "__main__":
    main()
