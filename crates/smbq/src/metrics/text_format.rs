//! The classic Prometheus text format (0.0.4) from prometheus-client's OpenMetrics output, for
//! scrapers that do not ask for OpenMetrics (curl, `promtool check metrics`, older servers).
//! The two differ only where it matters here in how a counter family is named: OpenMetrics
//! names the family `x` and its sample `x_total`, 0.0.4 names both `x_total`; 0.0.4 has no
//! `# UNIT` and no `# EOF`. Histograms and gauges are written alike.

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Rewrites one OpenMetrics exposition as 0.0.4.
pub fn from_openmetrics(om: &str) -> String {
    let lines: Vec<&str> = om.lines().collect();
    let counters: std::collections::HashSet<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len() + 64);
    for line in lines {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_renamed_units_and_eof_dropped_the_rest_kept() {
        let om = "# HELP smbq_requests Responses.\n# TYPE smbq_requests counter\n\
                  smbq_requests_total{command=\"READ\"} 3\n\
                  # HELP smbq_read_bytes Data.\n# TYPE smbq_read_bytes counter\n\
                  # UNIT smbq_read_bytes bytes\nsmbq_read_bytes_total 10\n\
                  # HELP smbq_sessions Sessions.\n# TYPE smbq_sessions gauge\nsmbq_sessions 2\n\
                  # EOF\n";
        let want = "# HELP smbq_requests_total Responses.\n# TYPE smbq_requests_total counter\n\
                    smbq_requests_total{command=\"READ\"} 3\n\
                    # HELP smbq_read_bytes_total Data.\n# TYPE smbq_read_bytes_total counter\n\
                    smbq_read_bytes_total 10\n\
                    # HELP smbq_sessions Sessions.\n# TYPE smbq_sessions gauge\nsmbq_sessions 2\n";
        assert_eq!(from_openmetrics(om), want);
    }
}
