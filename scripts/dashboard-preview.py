#!/usr/bin/env python3
"""Draws docs/images/dashboard-preview.png: the Grafana dashboard's panels
(packaging/grafana-dashboard.json), laid out as in Grafana, from the dashboard's own queries
against a private Prometheus that scraped a real smbq during a short mixed workload (smbclient
over TCP, the smbq client over QUIC, some failed logons). No Grafana runs here; this is the same
data drawn with matplotlib. Needs the release binary, smbclient, prometheus and matplotlib
(`pip install matplotlib`).

    python3 scripts/dashboard-preview.py [--seconds 90] [--out docs/images/dashboard-preview.png]
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "interop"))

from conftest import BINARY, USER  # noqa: E402
import smbclient  # noqa: E402
from prom import DASHBOARD, metered_server  # noqa: E402


def workload(server, workdir, seconds):
    sizes = [1 << 20, 8 << 20, 256 << 10]
    files = []
    for i, n in enumerate(sizes):
        p = workdir / f"src{i}.bin"
        p.write_bytes(os.urandom(n))
        files.append(p)
    env = {**os.environ, "SMBQ_PASSWORD": server.password}
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        f = files[i % len(files)]
        smbclient.run(server, f"put {f} w{i}.bin; get w{i}.bin {workdir / 'back'}; ls")
        if i % 4 == 0:
            smbclient.run(server, "ls", password="wrong")
        subprocess.run([str(BINARY), "cat", "--insecure", "--transport", "quic",
                        f"smb://{USER}@{server.quic_addr}/share/w{i}.bin"],
                       capture_output=True, timeout=60, env=env)
        i += 1
        time.sleep(0.5)


def draw(prom, start, end, out):
    import json
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.gridspec import GridSpec

    dash = json.loads(DASHBOARD.read_text())
    panels = dash["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = plt.figure(figsize=(16, rows * 0.42), facecolor="#111217")
    gs = GridSpec(rows, 24, figure=fig, hspace=1.2, wspace=1.0, top=0.96, bottom=0.04,
                  left=0.04, right=0.98)
    step = max(1, int((end - start) / 120))
    for p in panels:
        g = p["gridPos"]
        ax = fig.add_subplot(gs[g["y"]:g["y"] + g["h"], g["x"]:g["x"] + g["w"]])
        ax.set_facecolor("#181b1f")
        ax.set_title(p["title"], color="#ccccdc", fontsize=9, loc="left")
        for s in ax.spines.values():
            s.set_color("#2c3235")
        ax.tick_params(colors="#8e8e8e", labelsize=7)
        for t in p["targets"]:
            expr = t["expr"].replace("$__rate_interval", "15s").replace('"$instance"', '".*"')
            if p["type"] == "stat":
                r = prom.api("query", query=expr, time=end)["data"]["result"]
                v = float(r[0]["value"][1]) if r else 0.0
                decimals = p["fieldConfig"]["defaults"].get("decimals")
                shown = f"{v:.{decimals}f}" if decimals is not None else f"{v:g}"
                ax.text(0.5, 0.45, shown, color="#73bf69", fontsize=22, ha="center",
                        va="center", transform=ax.transAxes)
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            r = prom.api("query_range", query=expr, start=start, end=end, step=step)
            for series in r["data"]["result"]:
                xs = [float(x) - start for x, _ in series["values"]]
                ys = [float(y) for _, y in series["values"]]
                label = t.get("legendFormat", "")
                for k, v in series["metric"].items():
                    label = label.replace("{{" + k + "}}", v)
                ax.plot(xs, ys, linewidth=1, label=label or None)
        if p["type"] != "stat":
            unit = p["fieldConfig"]["defaults"].get("unit", "")
            ax.set_xlabel("seconds", color="#8e8e8e", fontsize=7)
            ax.set_ylabel(unit, color="#8e8e8e", fontsize=7)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, ncol=3, loc="upper left", facecolor="#181b1f",
                          labelcolor="#ccccdc", edgecolor="#2c3235")
    fig.suptitle("smbq dashboard preview (packaging/grafana-dashboard.json queries, real "
                 "Prometheus data; drawn by scripts/dashboard-preview.py, not Grafana)",
                 color="#ccccdc", fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90, facecolor=fig.get_facecolor())
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=90, help="length of the workload")
    ap.add_argument("--out", type=pathlib.Path,
                    default=ROOT / "docs" / "images" / "dashboard-preview.png",
                    help="where the PNG goes")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="smbq-preview-") as d:
        workdir = pathlib.Path(d)
        server, prom = metered_server(workdir)
        try:
            start = time.time()
            workload(server, workdir, args.seconds)
            time.sleep(3)
            draw(prom, start, time.time(), args.out)
        finally:
            prom.stop()
            server.stop()


if __name__ == "__main__":
    main()
