"""The Grafana dashboard (packaging/grafana-dashboard.json) against real data: a private
Prometheus scrapes a real smbq while smbclient and the smbq client work on it over TCP and QUIC,
and every panel's query must be valid PromQL; the panels of traffic that happened must show it."""

import json
import os
import subprocess
import time

from conftest import BINARY, USER
import smbclient
from prom import DASHBOARD, dashboard_queries, metered_server


def workload(server, workdir, rounds=4):
    data = os.urandom(1 << 20)
    local = workdir / "one-mib.bin"
    local.write_bytes(data)
    env = {**os.environ, "SMBQ_PASSWORD": server.password}
    for i in range(rounds):
        rc, out = smbclient.run(server, f"put {local} f{i}.bin; get f{i}.bin {workdir / 'back'}")
        assert rc == 0, out
        smbclient.run(server, "ls", password="wrong")
        p = subprocess.run([str(BINARY), "cat", "--insecure", "--transport", "quic",
                            f"smb://{USER}@{server.quic_addr}/share/f{i}.bin"],
                           capture_output=True, timeout=60, env=env)
        assert p.returncode == 0, p.stderr
        time.sleep(1.5)


def test_every_panel_query_is_valid_and_traffic_shows(workdir):
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["panels"]
    server, prom = metered_server(workdir)
    try:
        workload(server, workdir)
        time.sleep(2)
        results = {}
        for title, legend, expr in dashboard_queries():
            r = prom.api("query", query=expr)
            assert r["status"] == "success", (title, expr, r)
            values = [float(s["value"][1]) for s in r["data"]["result"]]
            results.setdefault(title, []).extend(v for v in values if v == v)  # drop NaN
        for title in ("Requests by command", "Data read by share and transport",
                      "Data written by share and transport", "Handler latency p99 by command",
                      "Credits granted", "QUIC packet loss", "QUIC round-trip time",
                      "Logon failures (5 m)"):
            assert results.get(title), (title, results)
        assert max(results["Data written by share and transport"]) > 0
        assert max(results["Logon failures (5 m)"]) >= 1
        # Prometheus sees the families with the types the endpoint declares.

    finally:
        prom.stop()
        assert server.stop() == 0
