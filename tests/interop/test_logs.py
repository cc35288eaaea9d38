"""Logs an administrator can use (issue 17), against the real binary: `--log-format json` writes
one JSON object per line, and logons, tree connects and access denials each leave an audit line
(target smbq::audit) naming user, peer, transport and result. A reload applies `[log] level`."""

import json
import signal
import time

from conftest import USER, SmbqServer
import smbclient


def log_events(server):
    events = []
    for line in server.server_log().splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
        else:
            # Start-up messages for a person (the generated password, the `try:` lines).
            assert line.startswith("smbq: "), line
    return events


def audit(server, event):
    return [e["fields"] for e in log_events(server)
            if e["target"] == "smbq::audit" and e["fields"].get("event") == event]


def wait_for(pred, what, timeout=10):
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, what
        time.sleep(0.05)


def config(workdir, level):
    ro = workdir / "ro"
    ro.mkdir(exist_ok=True)
    return f'[log]\nlevel = "{level}"\n\n[share.ro]\npath = "{ro}"\nread_only = true\n'


def test_json_audit_lines_and_level_reload(workdir):
    # SMBQ_LOG would rule over [log] level; empty counts as unset.
    server = SmbqServer(workdir, extra_args=["--log-format", "json"],
                        config=config(workdir, "info"), env={"SMBQ_LOG": ""})
    try:
        rc, out = smbclient.run(server, f"put {server.log_path} x", share="ro")
        assert "ACCESS_DENIED" in out, out
        rc, out = smbclient.run(server, "ls", share="ro", password="wrong")
        assert rc != 0 and "LOGON_FAILURE" in out, out
        rc, out = smbclient.run(server, "ls", share="nope")
        assert rc != 0 and "BAD_NETWORK_NAME" in out, out
        wait_for(lambda: len(audit(server, "tree_connect")) == 2, "two tree connect lines")

        logons = audit(server, "logon")
        ok = [e for e in logons if e["result"] == "success"]
        bad = [e for e in logons if e["result"] == "failure"]
        assert len(ok) == 2 and len(bad) == 1, logons
        for e in logons:
            assert e["user"] == USER and e["peer"].startswith("127.0.0.1") \
                and e["transport"] == "tcp", e
        # smbclient asks for multichannel: AES-CMAC before AES-GMAC (issue 42, docs/security.md).
        assert ok[0]["signing"] == "AES-128-CMAC" and ok[0]["dialect"] == "3.1.1", ok[0]
        trees = {e["share"]: e for e in audit(server, "tree_connect")}
        assert trees["ro"]["result"] == "success" and trees["ro"]["user"] == USER
        assert trees["nope"]["result"] == "failure"
        assert trees["nope"]["status"] == "BAD_NETWORK_NAME"
        denied = audit(server, "access_denied")
        assert len(denied) == 1, denied
        assert (denied[0]["command"], denied[0]["share"], denied[0]["file"], denied[0]["user"]) \
            == ("CREATE", "ro", "x", USER), denied[0]

        # [log] level = "warn" by reload: successful logons (info) are no longer logged,
        # failures (warn) still are.
        (workdir / "smbq.toml").write_text(config(workdir, "warn"))
        server.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "log level warn" in server.server_log(), "the reload line")
        before = len(audit(server, "logon"))
        assert smbclient.run(server, "ls")[0] == 0
        assert smbclient.run(server, "ls", password="wrong")[0] != 0
        wait_for(lambda: len(audit(server, "logon")) == before + 1, "one more logon line")
        assert audit(server, "logon")[-1]["result"] == "failure"
    finally:
        rc = server.stop()
    assert rc == 0 and "panicked" not in server.server_log()
