//! Hand-written SVG charts (no plotting dependency): grouped bars with min/max whiskers, like
//! the thesis's fio figures, and lines over a linear or logarithmic x axis, like the sweep and
//! loss studies' figures.

use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color(i: usize) -> &'static str {
    COLORS.get(i % COLORS.len()).copied().unwrap_or("#000")
}

/// A "nice" axis top and step for values up to `max`.
pub fn nice_axis(max: f64) -> (f64, f64) {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return (1.0, 0.2);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>
"#,
        (LEFT + W - RIGHT) / 2.0,
        escape(title)
    );
}

fn legend(out: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 20.0;
        let x = W - RIGHT + 15.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            y - 10.0,
            color(i),
            x + 18.0,
            y,
            escape(n)
        );
    }
}

fn y_axis(out: &mut String, top: f64, step: f64, label: &str) {
    let plot_h = H - TOP - BOTTOM;
    let mut v = 0.0;
    while v <= top + step * 0.01 {
        let y = H - BOTTOM - v / top * plot_h;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            fmt_tick(v)
        );
        v += step;
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        escape(label)
    );
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="black"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"#,
        H - BOTTOM,
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM
    );
}

/// One bar: median with a whisker from min to max.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// Grouped bars: one group per category, one bar per series (None leaves a gap).
pub fn bar_chart(
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<Option<Bar>>)],
) -> String {
    let mut out = String::new();
    header(&mut out, title);
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().map(|b| b.max.max(b.median)))
        .fold(0.0, f64::max);
    let (top, step) = nice_axis(max);
    y_axis(&mut out, top, step, y_label);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let groups = categories.len().max(1) as f64;
    let group_w = plot_w / groups;
    let bar_w = (group_w * 0.8) / series.len().max(1) as f64;
    let y_of = |v: f64| H - BOTTOM - (v / top).clamp(0.0, 1.0) * plot_h;
    for (gi, cat) in categories.iter().enumerate() {
        let gx = LEFT + gi as f64 * group_w + group_w * 0.1;
        for (si, (_, vals)) in series.iter().enumerate() {
            let Some(Some(b)) = vals.get(gi) else {
                continue;
            };
            let x = gx + si as f64 * bar_w;
            let y = y_of(b.median);
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                (bar_w - 2.0).max(1.0),
                (H - BOTTOM - y).max(0.0),
                color(si),
                escape(cat),
                fmt_tick(b.median)
            );
            if b.max > b.min {
                let cx = x + (bar_w - 2.0).max(1.0) / 2.0;
                let _ = writeln!(
                    out,
                    r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="black"/>"#,
                    y_of(b.min),
                    y_of(b.max)
                );
            }
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + gi as f64 * group_w + group_w / 2.0,
            H - BOTTOM + 18.0,
            escape(cat)
        );
    }
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut out, &names);
    out.push_str("</svg>\n");
    out
}

/// Lines through (x, y) points; with `log_x` the x axis is logarithmic (x > 0), ticks at the
/// given positions and labels.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    log_x: bool,
    x_ticks: &[(f64, String)],
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let mut out = String::new();
    header(&mut out, title);
    let ymax = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0, f64::max);
    let (top, step) = nice_axis(ymax);
    y_axis(&mut out, top, step, y_label);
    let tx = |x: f64| if log_x { x.max(1e-12).log10() } else { x };
    let xs: Vec<f64> = x_ticks
        .iter()
        .map(|t| t.0)
        .chain(series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)))
        .map(tx)
        .collect();
    let xmin = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let xmax = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if xmax > xmin { xmax - xmin } else { 1.0 };
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + 10.0 + (tx(x) - xmin) / span * (plot_w - 20.0);
    let py = |y: f64| H - BOTTOM - (y / top).clamp(0.0, 1.0) * plot_h;
    for (x, label) in x_ticks {
        let _ = writeln!(
            out,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="black"/><text x="{0:.1}" y="{3:.1}" text-anchor="middle">{4}</text>"#,
            px(*x),
            H - BOTTOM,
            H - BOTTOM + 5.0,
            H - BOTTOM + 18.0,
            escape(label)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        H - 18.0,
        escape(x_label)
    );
    for (si, (name, pts)) in series.iter().enumerate() {
        let mut pts = pts.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            color(si),
            path.join(" ")
        );
        for (x, y) in &pts {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: {}</title></circle>"#,
                px(*x),
                py(*y),
                color(si),
                escape(name),
                fmt_tick(*y)
            );
        }
    }
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut out, &names);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_is_nice_and_covers_the_max() {
        assert_eq!(nice_axis(7.3), (8.0, 2.0));
        assert_eq!(nice_axis(950.0), (1000.0, 200.0));
        let (top, step) = nice_axis(0.034);
        assert!(top >= 0.034 && step > 0.0);
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
    }

    #[test]
    fn charts_escape_text_and_draw_every_point() {
        let svg = bar_chart(
            "a < b",
            "MB/s",
            &["S1 & co".into()],
            &[(
                "x".into(),
                vec![Some(Bar {
                    median: 2.0,
                    min: 1.0,
                    max: 3.0,
                })],
            )],
        );
        assert!(svg.contains("a &lt; b") && svg.contains("S1 &amp; co"));
        assert_eq!(
            svg.matches("<rect x=").count(),
            2,
            "one bar plus one legend swatch"
        );
        let l = line_chart(
            "t",
            "x",
            "y",
            true,
            &[(1.0, "1".into()), (100.0, "100".into())],
            &[("s".into(), vec![(1.0, 1.0), (10.0, 2.0), (100.0, 3.0)])],
        );
        assert_eq!(l.matches("<circle").count(), 3);
        assert!(l.starts_with("<?xml") && l.trim_end().ends_with("</svg>"));
    }
}
