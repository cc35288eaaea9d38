"""A private Prometheus (Debian package `prometheus`) scraping one smbq metrics endpoint, for
checking the Grafana dashboard's queries (test_dashboard.py) and drawing its preview
(scripts/dashboard-preview.py)."""

import json
import pathlib
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from conftest import SmbqServer, free_port, free_udp_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "packaging" / "grafana-dashboard.json"


class Prometheus:
    def __init__(self, target_port: int, scrape_interval: str = "1s"):
        self.dir = tempfile.TemporaryDirectory(prefix="smbq-prom-")
        d = pathlib.Path(self.dir.name)
        (d / "prometheus.yml").write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            "scrape_configs:\n"
            "  - job_name: smbq\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n")
        self.port = free_port()
        self.log = open(d / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={d / 'prometheus.yml'}",
             f"--storage.tsdb.path={d / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                if self.api("query", query="up").get("status") == "success":
                    break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError((d / "prometheus.log").read_text())
            time.sleep(0.2)

    def api(self, endpoint: str, **params) -> dict:
        url = (f"http://127.0.0.1:{self.port}/api/v1/{endpoint}?"
               + urllib.parse.urlencode(params))
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    def wait_up(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.api("query", query='up{job="smbq"}')["data"]["result"]
            if r and r[0]["value"][1] == "1":
                return
            time.sleep(0.2)
        raise AssertionError("Prometheus never scraped smbq")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        self.dir.cleanup()


def dashboard_queries(rate_interval: str = "15s"):
    """(panel title, legend format, PromQL) of every target, the dashboard's variables filled in
    as Grafana would for "all instances"."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p["targets"]:
            expr = (t["expr"].replace("$__rate_interval", rate_interval)
                    .replace('"$instance"', '".*"'))
            out.append((p["title"], t.get("legendFormat", ""), expr))
    return out


def metered_server(workdir):
    """A smbq on TCP and QUIC with its metrics endpoint, and a Prometheus that has scraped it
    once. The caller stops both."""
    port = free_port()
    server = SmbqServer(workdir, extra_args=["--metrics-listen", f"127.0.0.1:{port}"],
                        quic_port=free_udp_port())
    try:
        prom = Prometheus(port)
        prom.wait_up()
    except BaseException:
        server.stop()
        raise
    return server, prom
