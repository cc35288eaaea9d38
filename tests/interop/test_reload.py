"""Reloading the configuration without a restart (issue 17), against the real binary: a share
added while a client is connected becomes reachable, a removed one answers the existing tree
connect with NETWORK_NAME_DELETED, and a broken configuration keeps the old shares."""

import signal
import subprocess
import time

from conftest import BINARY, SmbqServer
import smbclient
from test_status import HeldSmbclient, wait_for


def shares_config(workdir, *names):
    text = ""
    for n in names:
        d = workdir / f"dir-{n}"
        d.mkdir(exist_ok=True)
        (d / f"in-{n}.txt").write_text(n)
        text += f'[share.{n}]\npath = "{d}"\n\n'
    return text


def wait_log(server, needle, count, timeout=10):
    deadline = time.time() + timeout
    while server.server_log().count(needle) < count:
        assert time.time() < deadline, f"{needle!r} x{count} not in log:\n{server.server_log()}"
        time.sleep(0.05)


def test_sighup_and_reload_command_apply_share_changes(workdir):
    server = SmbqServer(workdir, config=shares_config(workdir, "one"))
    cfg = workdir / "smbq.toml"
    held = HeldSmbclient(server, share="one")
    try:
        wait_for(server, lambda s: any(t["share"] == "one" for t in s["trees"]),
                 "the held client's tree connect")
        rc, out = smbclient.run(server, "ls", share="two")
        assert rc != 0 and "BAD_NETWORK_NAME" in out, out

        # "one" goes, "two" comes; SIGHUP applies it.
        cfg.write_text(shares_config(workdir, "two"))
        server.proc.send_signal(signal.SIGHUP)
        wait_log(server, "reload: shares added two, removed one", 1)
        rc, out = smbclient.run(server, "ls", share="two")
        assert rc == 0 and "in-two.txt" in out, out
        held.send("ls")
        out = held.quit()
        assert "NT_STATUS_NETWORK_NAME_DELETED" in out, out

        # A file that does not parse changes nothing, and the administrator is told.
        cfg.write_text("[share.three\npath = 1\n")
        p = subprocess.run([str(BINARY), "status", "--state-dir", str(server.state), "--reload"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "the old configuration stays" in p.stderr, p.stderr
        rc, out = smbclient.run(server, "ls", share="two")
        assert rc == 0, out
        # So does a share whose directory is missing.
        cfg.write_text(shares_config(workdir, "two") + '[share.gone]\npath = "/nonexistent/x"\n')
        p = subprocess.run([str(BINARY), "status", "--state-dir", str(server.state), "--reload"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "the old configuration stays" in p.stderr, p.stderr
        rc, out = smbclient.run(server, "ls", share="gone")
        assert rc != 0 and "BAD_NETWORK_NAME" in out, out

        # A good file again, through the admin socket: the summary names the change.
        cfg.write_text(shares_config(workdir, "two", "three"))
        p = subprocess.run([str(BINARY), "status", "--state-dir", str(server.state), "--reload"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and "added three" in p.stderr, p.stderr
        rc, out = smbclient.run(server, "ls", share="three")
        assert rc == 0 and "in-three.txt" in out, out

        # [limits] apply to new connections: one connection per address from now on; the
        # one already there stays, a second is refused.
        cfg.write_text(shares_config(workdir, "two", "three")
                       + "[limits]\nmax_connections_per_ip = 1\n")
        held = HeldSmbclient(server, share="two")
        wait_for(server, lambda s: any(t["share"] == "two" for t in s["trees"]),
                 "the second held client's tree connect")
        p = subprocess.run([str(BINARY), "status", "--state-dir", str(server.state), "--reload"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and "new limits for new connections" in p.stderr, p.stderr
        rc, out = smbclient.run(server, "ls", share="two")
        assert rc != 0, out
        held.send("ls")
        out = held.quit()
        assert "in-two.txt" in out, out
        cfg.write_text(shares_config(workdir, "two", "three"))
        p = subprocess.run([str(BINARY), "status", "--state-dir", str(server.state), "--reload"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        rc, out = smbclient.run(server, "ls", share="two")
        assert rc == 0, out
    finally:
        held.quit()
        rc = server.stop()
    assert rc == 0 and "panicked" not in server.server_log()
