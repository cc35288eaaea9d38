"""Runs each smbtorture test of the checked-in allowlist in its own process against a fresh
smbq, and requires a `success:` line. The allowlist only grows."""

import pathlib
import subprocess

import pytest

from conftest import SmbqServer, USER

ALLOWLIST = pathlib.Path(__file__).with_name("smbtorture_allowlist.txt")

# Every server also exports `noperm`, the share smbtorture's ioctl.bug14788 tests connect to:
# the test user may connect (tree connect succeeds) but is granted nothing in it.
NOPERM_CONFIG = f"""
[share.noperm]
path = "{{noperm}}"
no_access_users = ["{USER}"]
"""

# Tests whose expectations depend on the target: smbq behaves like Windows here.
# smb2.read.position expects FilePositionInformation to follow reads on a non-synchronous
# open unless torture:windows is set; Windows (MS-FSA 2.1.5.2) and smbq leave it at 0.
EXTRA_OPTIONS = {
    "smb2.read.position": ["--option=torture:windows=true"],
}


def allowlist():
    names = []
    for line in ALLOWLIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


@pytest.mark.parametrize("name", allowlist())
def test_smbtorture(workdir, name):
    noperm = workdir / "noperm"
    noperm.mkdir()
    server = SmbqServer(workdir, config=NOPERM_CONFIG.format(noperm=noperm))
    try:
        p = subprocess.run(
            ["smbtorture", "-s", "/dev/null", f"//127.0.0.1/share", "-p", str(server.port),
             "-U", f"{USER}%{server.password}", "--fullname", "--format=subunit",
             "--option=torture:sharedelay=0", *EXTRA_OPTIONS.get(name, []), name],
            capture_output=True, text=True, timeout=300)
    finally:
        rc = server.stop()
    out = p.stdout + p.stderr
    log = server.server_log()
    assert "panicked" not in log, log
    assert f"success: {name}" in out, f"{out}\n--- server log ---\n{log[-4000:]}"
    assert "failure:" not in out and "error:" not in out, out
    assert rc == 0, log
