#!/usr/bin/env python3
"""Writes packaging/grafana-dashboard.json, the Grafana dashboard over smbq's metrics
(docs/operations.md). Edit the panels here, run it from the repository root, commit both; the
queries are checked against a real Prometheus by tests/interop/test_dashboard.py.

    python3 scripts/grafana-dashboard.py
"""
import json
ds={"type":"prometheus","uid":"${datasource}"}
panels=[]
def ts(title, exprs, unit, x, y, w=12, h=8, desc=""):
    panels.append({
        "id":len(panels)+1,"type":"timeseries","title":title,"description":desc,"datasource":ds,
        "gridPos":{"x":x,"y":y,"w":w,"h":h},
        "fieldConfig":{"defaults":{"unit":unit,"custom":{"lineWidth":1,"fillOpacity":10}},"overrides":[]},
        "options":{"legend":{"showLegend":True,"displayMode":"list","placement":"bottom"},"tooltip":{"mode":"multi"}},
        "targets":[{"datasource":ds,"refId":chr(65+i),"expr":e,"legendFormat":l} for i,(e,l) in enumerate(exprs)],
    })
def stat(title, expr, unit, x, y, w=4, h=4):
    panels.append({
        "id":len(panels)+1,"type":"stat","title":title,"datasource":ds,
        "gridPos":{"x":x,"y":y,"w":w,"h":h},
        "fieldConfig":{"defaults":{"unit":unit,"decimals":0},"overrides":[]},
        "options":{"reduceOptions":{"calcs":["lastNotNull"],"fields":"","values":False},"colorMode":"value","graphMode":"area"},
        "targets":[{"datasource":ds,"refId":"A","expr":expr}],
    })
def s(metric, extra=""):
    inner='instance=~"$instance"' + ("," + extra if extra else "")
    return metric + "{" + inner + "}"
R="[$__rate_interval]"
tcp='transport="tcp"'; quic='transport="quic"'
noise='status!~"SUCCESS|MORE_PROCESSING_REQUIRED|NO_MORE_FILES|PENDING"'
stat("TCP connections", "sum(" + s("smbq_connections", tcp) + ")", "short", 0, 0)
stat("QUIC connections", "sum(" + s("smbq_connections", quic) + ")", "short", 4, 0)
stat("Sessions", "sum(" + s("smbq_sessions") + ")", "short", 8, 0)
stat("Open files", "sum(" + s("smbq_open_files") + ")", "short", 12, 0)
stat("Durable opens waiting", "sum(" + s("smbq_durable_disconnected_opens") + ")", "short", 16, 0)
stat("Logon failures (5 m)", "sum(increase(" + s("smbq_logon_failures_total") + "[5m]))", "short", 20, 0)
ts("Requests by command", [("sum by (command) (rate(" + s("smbq_requests_total") + R + "))", "{{command}}")], "reqps", 0, 4)
ts("Error responses by status", [("sum by (status) (rate(" + s("smbq_requests_total", noise) + R + "))", "{{status}}")], "reqps", 12, 4,
   desc="Responses other than success and the statuses of normal protocol flow (more processing in SESSION_SETUP, the end of a directory listing).")
ts("Handler latency p99 by command", [("histogram_quantile(0.99, sum by (le, command) (rate(" + s("smbq_request_duration_seconds_bucket") + R + ")))", "{{command}}")], "s", 0, 12)
ts("Handler latency p50 by command", [("histogram_quantile(0.5, sum by (le, command) (rate(" + s("smbq_request_duration_seconds_bucket") + R + ")))", "{{command}}")], "s", 12, 12)
ts("Data read by share and transport", [("sum by (share, transport) (rate(" + s("smbq_read_bytes_total") + R + "))", "{{share}} {{transport}}")], "Bps", 0, 20)
ts("Data written by share and transport", [("sum by (share, transport) (rate(" + s("smbq_written_bytes_total") + R + "))", "{{share}} {{transport}}")], "Bps", 12, 20)
ts("QUIC round-trip time", [("histogram_quantile(0.5, sum by (le) (rate(" + s("smbq_quic_rtt_seconds_bucket") + R + ")))", "p50"),
                            ("histogram_quantile(0.99, sum by (le) (rate(" + s("smbq_quic_rtt_seconds_bucket") + R + ")))", "p99")], "s", 0, 28)
ts("QUIC packet loss", [("sum(rate(" + s("smbq_quic_lost_packets_total") + R + ")) / sum(rate(" + s("smbq_quic_sent_packets_total") + R + "))", "lost / sent")], "percentunit", 12, 28)
ts("Credits granted", [("sum(rate(" + s("smbq_credits_granted_total") + R + "))", "credits/s")], "short", 0, 36)
ts("Logon failures", [("sum(rate(" + s("smbq_logon_failures_total") + R + "))", "failures/s")], "short", 12, 36)
dash={
 "title":"smbq","uid":"smbq-overview","tags":["smbq","smb"],"timezone":"browser","schemaVersion":39,"version":1,
 "refresh":"30s","time":{"from":"now-1h","to":"now"},
 "description":"smbq SMB server: connections, requests, latency, data, QUIC path (metric names in docs/operations.md).",
 "templating":{"list":[
   {"name":"datasource","type":"datasource","query":"prometheus","label":"Prometheus","current":{}},
   {"name":"instance","type":"query","datasource":ds,"query":"label_values(smbq_start_time_seconds, instance)","refresh":2,"includeAll":True,"multi":True,"current":{"text":"All","value":"$__all"},"label":"Server"}]},
 "panels":panels,
}
open("packaging/grafana-dashboard.json","w").write(json.dumps(dash,indent=2)+"\n")
print(len(panels))
