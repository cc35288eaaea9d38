"""Issue 15, what a new user trips over in the first hour, each against the real binary:
hidden/system attributes in listings (smbclient, impacket and smbq's client), ..."""

import os
import re
import subprocess

from conftest import BINARY, USER
from smbclient import run

HIDDEN, SYSTEM, ARCHIVE = 0x2, 0x4, 0x20


def smbq_env(server):
    return {**os.environ, "SMBQ_PASSWORD": server.password}


def test_listing_shows_hidden_and_system(server):
    """`setmode +hs` through smbclient; every client's listing then shows H and S, as the
    file's own QUERY_INFO does (smbclient allinfo said HSA while its ls said A)."""
    (server.share / "h2.txt").write_bytes(b"hidden")
    (server.share / "plain.txt").write_bytes(b"plain")
    rc, out = run(server, "setmode h2.txt +hs; allinfo h2.txt; ls")
    assert rc == 0, out
    assert re.search(r"attributes: HSA \(26\)", out), out
    line = next(l for l in out.splitlines() if l.strip().startswith("h2.txt"))
    assert line.split()[1] == "AHS", line
    line = next(l for l in out.splitlines() if l.strip().startswith("plain.txt"))
    assert line.split()[1] == "A", line

    p = subprocess.run([str(BINARY), "ls", f"smb://{USER}@127.0.0.1:{server.port}/share",
                        "--transport", "tcp"], capture_output=True, text=True,
                       env=smbq_env(server), timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    line = next(l for l in p.stdout.splitlines() if l.endswith(" h2.txt"))
    assert line.startswith("--hsa"), p.stdout

    from impacket.smbconnection import SMBConnection
    c = SMBConnection("127.0.0.1", "127.0.0.1", sess_port=server.port)
    c.login(USER, server.password)
    try:
        listed = {f.get_longname(): f.get_attributes() for f in c.listPath("share", "*")}
        assert listed["h2.txt"] == HIDDEN | SYSTEM | ARCHIVE, hex(listed["h2.txt"])
        assert listed["plain.txt"] == ARCHIVE, hex(listed["plain.txt"])
    finally:
        c.logoff()
