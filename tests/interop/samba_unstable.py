"""Samba's client from Debian's unstable suite (4.25 or newer: smbclient over QUIC, ngtcp2 +
GnuTLS) on this Debian 12 machine: a minimal debootstrap of unstable with smbclient, cached
under /var/cache (about 80 s and 150 MB the first time, nothing after), and run with chroot.

Needs root and debootstrap (scripts/test.sh installs it)."""

import os
import pathlib
import shutil
import subprocess

CACHE = pathlib.Path(os.environ.get("SMBQ_SAMBA_UNSTABLE", "/var/cache/smbq-samba-unstable"))
MIRROR = os.environ.get("SMBQ_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# smbclient refuses QUIC to an address in the UNC, and "localhost" resolves to ::1 first: the
# tests name the server by this, which the chroot's /etc/hosts maps to 127.0.0.1.
HOST = "smbqtest"


def provision() -> pathlib.Path:
    """The chroot's root, made on first use (into a temporary directory, renamed when done,
    so an interrupted run leaves nothing half made)."""
    root = CACHE / "root"
    if not (root / "usr/bin/smbclient").exists():
        assert os.geteuid() == 0, "debootstrap and chroot need root"
        assert shutil.which("debootstrap"), "debootstrap missing (Debian: debootstrap)"
        tmp = CACHE / "root.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        p = subprocess.run(["debootstrap", "--variant=minbase", "--include=smbclient",
                            "unstable", str(tmp), MIRROR],
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    (root / "etc/hosts").write_text(f"127.0.0.1 {HOST}\n127.0.0.1 localhost\n")
    return root


class Chroot:
    """The provisioned root with /proc and /dev mounted while in use."""

    def __init__(self):
        self.root = provision()
        self.mounts = []
        for src, dst, args in (("proc", "proc", ["-t", "proc"]), ("/dev", "dev", ["--bind"])):
            target = self.root / dst
            if subprocess.run(["mountpoint", "-q", str(target)]).returncode != 0:
                subprocess.run(["mount", *args, src, str(target)], check=True, timeout=30)
                self.mounts.append(target)

    def version(self) -> str:
        return self.run(["smbclient", "--version"]).stdout.strip()

    def path(self, inside: str) -> pathlib.Path:
        """Where a path inside the chroot is on this machine."""
        return self.root / inside.lstrip("/")

    def run(self, args, timeout=300):
        return subprocess.run(["chroot", str(self.root), *args], capture_output=True,
                              text=True, timeout=timeout)

    def close(self):
        for target in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(target)], check=False, timeout=30)
