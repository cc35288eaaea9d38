"""Runs each smbtorture test of the checked-in allowlist in its own process against a fresh
smbq, and requires a `success:` line. The allowlist only grows."""

import pathlib
import subprocess

import pytest

from conftest import SmbqServer, USER

ALLOWLIST = pathlib.Path(__file__).with_name("smbtorture_allowlist.txt")


def allowlist():
    names = []
    for line in ALLOWLIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


@pytest.mark.parametrize("name", allowlist())
def test_smbtorture(workdir, name):
    server = SmbqServer(workdir)
    try:
        p = subprocess.run(
            ["smbtorture", "-s", "/dev/null", f"//127.0.0.1/share", "-p", str(server.port),
             "-U", f"{USER}%{server.password}", "--fullname", "--format=subunit",
             "--option=torture:sharedelay=0", name],
            capture_output=True, text=True, timeout=300)
    finally:
        rc = server.stop()
    out = p.stdout + p.stderr
    log = server.server_log()
    assert "panicked" not in log, log
    assert f"success: {name}" in out, f"{out}\n--- server log ---\n{log[-4000:]}"
    assert "failure:" not in out and "error:" not in out, out
    assert rc == 0, log
