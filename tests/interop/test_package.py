"""The Debian package (issue 17): it builds (scripts/package.sh), installs with dpkg, its unit
passes `systemd-analyze verify`, and the installed binary, started as the unit starts it (as the
smbq user, with the installed configuration; CI has no running systemd), serves the default
share and tells a NOTIFY_SOCKET it is ready. The package is purged afterwards."""

import json
import os
import pathlib
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

from conftest import ROOT, free_port
import smbclient

DEB_DIR = ROOT / "target" / "debian"


def run(*args, **kw):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=kw.pop("timeout", 600),
                       **kw)
    assert p.returncode == 0, f"{args}: {p.stdout}\n{p.stderr}"
    return p


def apt_install(*pkgs):
    run("apt-get", "update", "-qq")
    run("apt-get", "install", "-y", "-qq", *pkgs,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


class Served:
    """The installed binary serving /etc/smbq/smbq.toml on free loopback ports as user smbq."""

    def __init__(self, notify_path):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        env = {"PATH": os.environ["PATH"], "NOTIFY_SOCKET": str(notify_path),
               "SMBQ_LOG": "info"}
        self.proc = subprocess.Popen(
            ["/usr/bin/smbq", "serve",
             "--config", "/etc/smbq/smbq.toml", "--listen", "127.0.0.1",
             "--tcp-port", str(self.port), "--quic-port", "0"],
            stdout=subprocess.PIPE, stderr=self.log, env=env, cwd="/",
            user="smbq", group="smbq", extra_groups=[])
        self.ready_line = self.proc.stdout.readline().decode()

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=20)
        self.log.seek(0)
        return rc, self.log.read().decode(errors="replace")


@pytest.fixture
def installed():
    assert os.geteuid() == 0, "installing a package needs root (scripts/test.sh runs as root)"
    assert not pathlib.Path("/var/lib/dpkg/info/smbq.list").exists(), \
        "smbq is installed already; this test installs and purges its own build"
    run(str(ROOT / "scripts" / "package.sh"), timeout=1800)
    debs = sorted(DEB_DIR.glob("smbq_*.deb"))
    assert debs, list(DEB_DIR.iterdir())
    try:
        run("dpkg", "-i", str(debs[-1]))
        yield debs[-1]
    finally:
        subprocess.run(["dpkg", "--purge", "smbq"], capture_output=True, timeout=120)
        shutil.rmtree("/srv/smbq", ignore_errors=True)


def test_package_installs_verifies_and_serves(installed, workdir):
    # What the package put in place.
    user = pwd.getpwnam("smbq")
    assert user.pw_dir == "/var/lib/smbq"
    st = os.stat("/var/lib/smbq")
    assert (st.st_uid, st.st_mode & 0o777) == (user.pw_uid, 0o750)
    assert os.stat("/srv/smbq").st_uid == user.pw_uid
    conffiles = run("dpkg-query", "-W", "-f=${Conffiles}", "smbq").stdout
    assert "/etc/smbq/smbq.toml" in conffiles, conffiles
    unit = pathlib.Path("/usr/lib/systemd/system/smbq.service")
    text = unit.read_text()
    for line in ("Type=notify", "User=smbq", "AmbientCapabilities=CAP_NET_BIND_SERVICE",
                 "ProtectSystem=strict", "NoNewPrivileges=yes", "Restart=on-failure",
                 "ExecReload=/bin/kill -HUP $MAINPID", "ReadWritePaths=/var/lib/smbq /srv/smbq"):
        assert line in text, line
    assert pathlib.Path("/usr/share/man/man1/smbq.1.gz").exists()

    # The unit file is one systemd accepts (its Documentation= names the man page).
    if shutil.which("man") is None:
        apt_install("man-db")
    if shutil.which("systemd-analyze") is None:
        apt_install("systemd")
    p = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr

    # An account added by root stays readable by the smbq user.
    run("/usr/bin/smbq", "user", "add", "tester", "--state-dir", "/var/lib/smbq",
        input="Pw-package-1\n")
    assert os.stat("/var/lib/smbq/users").st_uid == user.pw_uid

    notify_path = workdir / "notify.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    os.chmod(workdir, 0o755)
    os.chmod(notify_path, 0o777)
    notify.settimeout(20)
    served = Served(notify_path)
    try:
        assert served.ready_line.startswith("smbq: listening tcp=127.0.0.1:"), served.ready_line
        assert b"READY=1" in notify.recv(4096)
        server = type("S", (), {"port": served.port, "password": "Pw-package-1"})()
        local = workdir / "hello.txt"
        local.write_text("hello from the package test\n")
        os.chmod(workdir, 0o755)
        rc, out = smbclient.run(server, f"put {local} hello.txt; ls", user="tester")
        assert rc == 0 and "hello.txt" in out, out
        landed = pathlib.Path("/srv/smbq/hello.txt")
        assert landed.read_text() == "hello from the package test\n"
        assert landed.stat().st_uid == user.pw_uid
        # The administrator (root) reads the status of the server running as smbq; without
        # --state-dir `smbq status` finds the package's socket.
        p = run("/usr/bin/smbq", "status", "--json", cwd=str(workdir))
        assert json.loads(p.stdout)["server"]["version"], p.stdout
    finally:
        rc, log = served.stop()
        notify.close()
    assert rc == 0, log
    assert "panicked" not in log, log
