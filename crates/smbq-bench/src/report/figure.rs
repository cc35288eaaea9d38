//! Charts drawn with `plotters`: grouped bars with min/max whiskers, like the thesis's fio
//! figures, and lines over a linear or logarithmic x axis, like the sweep and loss studies'
//! figures. Each chart renders as SVG (its text stays `<text>`, so it is searchable and sharp
//! at any size) and as PNG at twice the pixels (for pages that show no SVG, such as the
//! README's headline figure).
//!
//! The font is embedded (`epaint_default_fonts`' Ubuntu Light), so a figure looks the same on
//! every machine and nothing is read from the system's font directories.

use std::ops::Range;
use std::sync::OnceLock;

use plotters::backend::RGBPixel;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};
// `pb::BackendStyle` and `pb::BackendTextStyle` are only named in bounds: imported, their
// methods would clash with plotters' `Color`'s.
use plotters_backend::{self as pb, BackendColor, BackendCoord, DrawingErrorKind};

/// The size of a figure in CSS pixels (the SVG's size; the PNG has `PNG_SCALE` times as many
/// pixels each way).
pub const WIDTH: u32 = 760;
pub const HEIGHT: u32 = 420;
pub const PNG_SCALE: u32 = 2;
/// The right-hand column the legend lives in, clear of the plot.
const LEGEND_W: f64 = 170.0;
const FONT: &str = "sans-serif";
/// plotters' font sizes: the SVG's font-size is this over 1.24.
const TEXT: f64 = 15.0;
const TITLE: f64 = 19.0;
const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];
const GRID: RGBColor = RGBColor(0xdd, 0xdd, 0xdd);

fn color(i: usize) -> RGBColor {
    COLORS.get(i % COLORS.len()).copied().unwrap_or(BLACK)
}

/// One bar: median with a whisker from min to max.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bar {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// What one figure shows.
#[derive(Clone, Debug)]
pub enum Chart {
    /// Grouped bars: one group per category, one bar per series (None leaves a gap).
    Bars {
        title: String,
        y_label: String,
        categories: Vec<String>,
        series: Vec<(String, Vec<Option<Bar>>)>,
    },
    /// Lines through (x, y) points, with a dot on each; with `log_x` the x axis is
    /// logarithmic (points at x <= 0 are left out). The x axis is labelled at `x_ticks`.
    Lines {
        title: String,
        x_label: String,
        y_label: String,
        log_x: bool,
        x_ticks: Vec<(f64, String)>,
        series: Vec<(String, Vec<(f64, f64)>)>,
    },
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

/// The y axis for values up to `max`: from 0 to a nice top, labelled at every nice step.
fn y_axis(max: f64) -> (f64, Ticked<RangedCoordf64>) {
    let (top, step) = nice_axis(max);
    let steps = (top / step).round() as usize;
    let ticks = (0..=steps).map(|i| i as f64 * step).collect();
    (
        top,
        Ticked {
            inner: RangedCoordf64::from(0.0..top),
            ticks,
        },
    )
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

/// An axis labelled exactly at the given points (bar groups' centres, the measured file sizes or
/// delays, every nice step of y) rather than at the points plotters would pick.
struct Ticked<R> {
    inner: R,
    ticks: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Ticked<R> {
    type ValueType = f64;
    // The labels come from the mesh's label formatters.
    type FormatOption = DefaultFormatting;

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }
}

/// A bitmap backend that draws text itself, with the embedded font through `ab_glyph`, and
/// passes everything else through. plotters' own `ab_glyph` text drawing leaves out each
/// glyph's side bearing (letters crowd or gap: "SecNetPerf" ran together) and puts the baseline
/// half a font size below the top of the text's box (text sat a fifth of its size too high:
/// the title lost its top, the rotated y label its side). This lays the text out with the same
/// advances and kerning plotters measures it by, so the boxes plotters plans around hold, and
/// fits the font's ascent and descent to the box. The font has one, light, face, so bold text
/// (the title) is drawn a few times, a pixel apart, for weight.
struct PngText<DB>(DB);

/// The embedded font, parsed once, for `PngText`.
fn glyph_font() -> Option<&'static ab_glyph::FontRef<'static>> {
    static PARSED: OnceLock<Option<ab_glyph::FontRef<'static>>> = OnceLock::new();
    PARSED
        .get_or_init(|| ab_glyph::FontRef::try_from_slice(epaint_default_fonts::UBUNTU_LIGHT).ok())
        .as_ref()
}

impl<DB: DrawingBackend> DrawingBackend for PngText<DB> {
    type ErrorType = DB::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.draw_pixel(point, color)
    }

    fn draw_line<S: pb::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.draw_line(from, to, style)
    }

    fn draw_rect<S: pb::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: pb::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.draw_path(path, style)
    }

    fn draw_circle<S: pb::BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: pb::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }

    fn draw_text<S: pb::BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        (x, y): BackendCoord,
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        use ab_glyph::{Font, ScaleFont};
        let Some(font) = glyph_font() else {
            return self.0.draw_text(text, style, (x, y));
        };
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let font = font.as_scaled(style.size() as f32);
        // Pen positions along the baseline, as plotters measures the text.
        let mut pen = 0f32;
        let mut prev = None;
        let mut glyphs = Vec::new();
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                pen += font.kern(p, id);
            }
            glyphs.push((id, pen));
            pen += font.h_advance(id);
            prev = Some(id);
        }
        // plotters' box for the text is `pen` wide and size / 1.24 high; place it by the anchor
        // and fit the font's ascent and descent into it.
        let height = (style.size() / 1.24) as f32;
        let left = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -pen / 2.0,
            HPos::Right => -pen,
        };
        let top = match style.anchor().v_pos {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        let baseline = top + height * font.ascent() / font.height();
        // Coverage of each pixel, in the text's own frame (x along, y down).
        let mut pixels = Vec::new();
        for (id, at) in glyphs {
            let glyph =
                id.with_scale_and_position(font.scale, ab_glyph::point(left + at, baseline));
            let Some(outline) = font.outline_glyph(glyph) else {
                continue;
            };
            let b = outline.px_bounds();
            let (bx, by) = (b.min.x as i32, b.min.y as i32);
            outline.draw(|gx, gy, cover| pixels.push((bx + gx as i32, by + gy as i32, cover)));
        }
        let passes = match style.style() {
            FontStyle::Bold => (style.size() / 20.0).round().max(1.0) as i32,
            _ => 0,
        };
        let (w, h) = self.0.get_size();
        let transform = style.transform();
        for k in 0..=passes {
            for &(tx, ty, cover) in &pixels {
                let (dx, dy) = transform.transform(tx + k, ty);
                let (px, py) = (x + dx, y + dy);
                if px < 0 || py < 0 || px >= w as i32 || py >= h as i32 || cover <= 0.0 {
                    continue;
                }
                let alpha = color.alpha * f64::from(cover.min(1.0));
                self.0.draw_pixel(
                    (px, py),
                    BackendColor {
                        alpha,
                        rgb: color.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }

    fn estimate_text_size<S: pb::BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<DB::ErrorType>> {
        self.0.estimate_text_size(text, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        self.0.blit_bitmap(pos, size, src)
    }
}

/// Registers the embedded font with plotters once; every text needs it (the SVG too, for
/// laying out labels and the legend).
fn font_ready() -> Result<(), String> {
    static READY: OnceLock<bool> = OnceLock::new();
    let ok = *READY.get_or_init(|| {
        register_font(FONT, FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("figures: the embedded font did not load".into())
    }
}

impl Chart {
    pub fn title(&self) -> &str {
        match self {
            Chart::Bars { title, .. } | Chart::Lines { title, .. } => title,
        }
    }

    /// The figure as an SVG document.
    pub fn svg(&self) -> Result<String, String> {
        font_ready()?;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(&root, 1.0)?;
            root.present().map_err(|e| self.err(e))?;
        }
        Ok(out)
    }

    /// The figure as a PNG image, `PNG_SCALE` times the SVG's size.
    pub fn png(&self) -> Result<Vec<u8>, String> {
        font_ready()?;
        let (w, h) = (WIDTH * PNG_SCALE, HEIGHT * PNG_SCALE);
        let mut rgb = vec![0u8; w as usize * h as usize * 3];
        {
            let backend = BitMapBackend::<RGBPixel>::with_buffer_and_format(&mut rgb, (w, h))
                .map_err(|e| self.err(e))?;
            let root = PngText(backend).into_drawing_area();
            self.draw(&root, f64::from(PNG_SCALE))?;
            root.present().map_err(|e| self.err(e))?;
        }
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(|e| self.err(e))?;
        writer.write_image_data(&rgb).map_err(|e| self.err(e))?;
        writer.finish().map_err(|e| self.err(e))?;
        Ok(out)
    }

    fn err(&self, e: impl std::fmt::Display) -> String {
        format!("figure \"{}\": {e}", self.title())
    }

    /// Draws the whole figure; `s` scales every length (1 for SVG, `PNG_SCALE` for PNG).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, s: f64) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| self.err(e);
        root.fill(&WHITE).map_err(e)?;
        let body = root
            .titled(
                self.title(),
                (FONT, TITLE * s).into_font().style(FontStyle::Bold),
            )
            .map_err(e)?;
        let (w, _) = body.dim_in_pixel();
        let (plot, legend) = body.split_horizontally(f64::from(w) - LEGEND_W * s);
        let text = (FONT, TEXT * s).into_font();
        let px = |v: f64| v * s;
        let line = |v: f64| (v * s).round().max(1.0) as u32;
        match self {
            Chart::Bars {
                y_label,
                categories,
                series,
                ..
            } => {
                let max = series
                    .iter()
                    .flat_map(|(_, v)| v.iter().flatten().map(|b| b.max.max(b.median)))
                    .fold(0.0, f64::max);
                let (top, y) = y_axis(max);
                let groups = categories.len().max(1);
                let centres: Vec<f64> = (0..groups).map(|g| g as f64 + 0.5).collect();
                let mut chart = ChartBuilder::on(&plot)
                    .margin_top(px(8.0))
                    .margin_left(px(6.0))
                    .margin_right(px(10.0))
                    .x_label_area_size(px(30.0))
                    .y_label_area_size(px(70.0))
                    .build_cartesian_2d(
                        Ticked {
                            inner: RangedCoordf64::from(0.0..groups as f64),
                            ticks: centres,
                        },
                        y,
                    )
                    .map_err(e)?;
                let category = |x: &f64| {
                    categories
                        .get(x.floor().max(0.0) as usize)
                        .cloned()
                        .unwrap_or_default()
                };
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .light_line_style(TRANSPARENT)
                    .bold_line_style(GRID.stroke_width(line(1.0)))
                    .axis_style(BLACK.stroke_width(line(1.0)))
                    .x_label_formatter(&category)
                    .y_label_formatter(&|v| fmt_tick(*v))
                    .y_desc(y_label.as_str())
                    .label_style(text.clone())
                    .axis_desc_style(text.clone())
                    .draw()
                    .map_err(e)?;
                let bar_w = 0.8 / series.len().max(1) as f64;
                for (si, (_, vals)) in series.iter().enumerate() {
                    let c = color(si);
                    for (gi, b) in vals.iter().enumerate() {
                        let Some(b) = b else { continue };
                        let x0 = gi as f64 + 0.1 + si as f64 * bar_w;
                        let (l, r) = (x0 + bar_w * 0.04, x0 + bar_w * 0.96);
                        chart
                            .draw_series(std::iter::once(Rectangle::new(
                                [(l, 0.0), (r, b.median.clamp(0.0, top))],
                                c.filled(),
                            )))
                            .map_err(e)?;
                        if b.max > b.min {
                            let mid = (l + r) / 2.0;
                            let cap = bar_w * 0.15;
                            let (lo, hi) = (b.min.clamp(0.0, top), b.max.clamp(0.0, top));
                            let whisker = BLACK.stroke_width(line(1.5));
                            chart
                                .draw_series([
                                    PathElement::new(vec![(mid, lo), (mid, hi)], whisker),
                                    PathElement::new(
                                        vec![(mid - cap, lo), (mid + cap, lo)],
                                        whisker,
                                    ),
                                    PathElement::new(
                                        vec![(mid - cap, hi), (mid + cap, hi)],
                                        whisker,
                                    ),
                                ])
                                .map_err(e)?;
                        }
                    }
                }
            }
            Chart::Lines {
                x_label,
                y_label,
                log_x,
                x_ticks,
                series,
                ..
            } => {
                let keep = |x: f64| x.is_finite() && (!log_x || x > 0.0);
                let ymax = series
                    .iter()
                    .flat_map(|(_, p)| p.iter().map(|q| q.1))
                    .fold(0.0, f64::max);
                let (_, y) = y_axis(ymax);
                let xs = x_ticks
                    .iter()
                    .map(|t| t.0)
                    .chain(series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)))
                    .filter(|x| keep(*x));
                let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                    (lo.min(x), hi.max(x))
                });
                let ticks: Vec<f64> = x_ticks.iter().map(|t| t.0).filter(|x| keep(*x)).collect();
                let label = |x: &f64| {
                    x_ticks
                        .iter()
                        .find(|t| t.0 == *x)
                        .map(|t| t.1.clone())
                        .unwrap_or_else(|| fmt_tick(*x))
                };
                let points = |p: &[(f64, f64)]| {
                    let mut p: Vec<(f64, f64)> = p
                        .iter()
                        .copied()
                        .filter(|q| keep(q.0) && q.1.is_finite())
                        .collect();
                    p.sort_by(|a, b| a.0.total_cmp(&b.0));
                    p
                };
                let mut builder = ChartBuilder::on(&plot);
                builder
                    .margin_top(px(8.0))
                    .margin_left(px(6.0))
                    .margin_right(px(10.0))
                    .margin_bottom(px(6.0))
                    .x_label_area_size(px(44.0))
                    .y_label_area_size(px(70.0));
                // Both kinds of axis keep the points off the plot's edges.
                macro_rules! lines {
                    ($x:expr) => {{
                        let mut chart = builder
                            .build_cartesian_2d(Ticked { inner: $x, ticks }, y)
                            .map_err(e)?;
                        chart
                            .configure_mesh()
                            .disable_x_mesh()
                            .light_line_style(TRANSPARENT)
                            .bold_line_style(GRID.stroke_width(line(1.0)))
                            .axis_style(BLACK.stroke_width(line(1.0)))
                            .x_label_formatter(&label)
                            .y_label_formatter(&|v| fmt_tick(*v))
                            .x_desc(x_label.as_str())
                            .y_desc(y_label.as_str())
                            .label_style(text.clone())
                            .axis_desc_style(text.clone())
                            .draw()
                            .map_err(e)?;
                        for (si, (_, pts)) in series.iter().enumerate() {
                            let c = color(si);
                            let pts = points(pts);
                            chart
                                .draw_series(LineSeries::new(
                                    pts.iter().copied(),
                                    c.stroke_width(line(2.0)),
                                ))
                                .map_err(e)?;
                            chart
                                .draw_series(
                                    pts.iter().map(|p| Circle::new(*p, line(3.5), c.filled())),
                                )
                                .map_err(e)?;
                        }
                    }};
                }
                if !lo.is_finite() {
                    lines!(RangedCoordf64::from(0.0..1.0))
                } else if *log_x {
                    let (lo, hi) = if hi > lo {
                        (lo, hi)
                    } else {
                        (lo / 2.0, hi * 2.0)
                    };
                    let pad = (hi / lo).powf(0.03);
                    lines!(LogCoord::<f64>::from((lo / pad..hi * pad).log_scale()))
                } else {
                    let (lo, hi) = if hi > lo {
                        (lo, hi)
                    } else {
                        (lo - 1.0, hi + 1.0)
                    };
                    let pad = (hi - lo) * 0.03;
                    lines!(RangedCoordf64::from(lo - pad..hi + pad))
                }
            }
        }
        self.legend(&legend, s)
    }

    /// The legend, in its own column right of the plot: a swatch (bars) or a dotted line
    /// (lines) and the series' name, one a row.
    fn legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        s: f64,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| self.err(e);
        let text = (FONT, TEXT * s).into_font();
        let names: Vec<&str> = match self {
            Chart::Bars { series, .. } => series.iter().map(|(n, _)| n.as_str()).collect(),
            Chart::Lines { series, .. } => series.iter().map(|(n, _)| n.as_str()).collect(),
        };
        let px = |v: f64| (v * s).round() as i32;
        for (i, name) in names.into_iter().enumerate() {
            let c = color(i);
            let y = px(16.0 + 22.0 * i as f64);
            let x = px(12.0);
            match self {
                Chart::Bars { .. } => area
                    .draw(&Rectangle::new(
                        [(x, y - px(6.0)), (x + px(14.0), y + px(6.0))],
                        c.filled(),
                    ))
                    .map_err(e)?,
                Chart::Lines { .. } => {
                    area.draw(&PathElement::new(
                        vec![(x, y), (x + px(18.0), y)],
                        c.stroke_width((2.0 * s).round().max(1.0) as u32),
                    ))
                    .map_err(e)?;
                    area.draw(&Circle::new((x + px(9.0), y), px(3.5), c.filled()))
                        .map_err(e)?;
                }
            }
            area.draw(&Text::new(
                name.to_string(),
                (x + px(24.0), y),
                TextStyle::from(text.clone()).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(e)?;
        }
        Ok(())
    }
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

    fn svg(chart: &Chart) -> String {
        let svg = chart.svg().unwrap();
        roxmltree::Document::parse(&svg).unwrap();
        svg
    }

    /// The elements of one kind whose attribute has the given value.
    fn count(svg: &str, tag: &str, attr: &str, value: &str) -> usize {
        roxmltree::Document::parse(svg)
            .unwrap()
            .descendants()
            .filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value))
            .count()
    }

    fn texts(svg: &str) -> Vec<String> {
        roxmltree::Document::parse(svg)
            .unwrap()
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect()
    }

    fn bar(median: f64, min: f64, max: f64) -> Option<Bar> {
        Some(Bar { median, min, max })
    }

    #[test]
    fn bars_leave_gaps_and_draw_whiskers_only_where_repeats_spread() {
        let chart = Chart::Bars {
            title: "a < b & \"c\"".into(),
            y_label: "MB/s".into(),
            categories: vec!["read".into(), "S1 & co".into()],
            series: vec![
                ("one".into(), vec![bar(2.0, 1.0, 3.0), None]),
                ("two".into(), vec![bar(5.0, 5.0, 5.0), bar(4.0, 3.5, 4.5)]),
            ],
        };
        let svg = svg(&chart);
        // Bars plus the legend's swatch, in each series' colour.
        assert_eq!(count(&svg, "rect", "fill", "#1F77B4"), 1 + 1);
        assert_eq!(count(&svg, "rect", "fill", "#D62728"), 2 + 1);
        // A whisker is a line and two caps; the bar without spread has none.
        assert_eq!(count(&svg, "polyline", "stroke-width", "2"), 2 * 3);
        let shown = texts(&svg);
        for want in [
            "a < b & \"c\"",
            "MB/s",
            "read",
            "S1 & co",
            "one",
            "two",
            "0",
            "5",
        ] {
            assert!(shown.iter().any(|t| t == want), "{want:?} in {shown:?}");
        }
    }

    /// The x of each dot of the first series, left to right.
    fn dots(chart: &Chart) -> Vec<f64> {
        let svg = svg(chart);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let mut xs: Vec<f64> = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle") && n.attribute("fill") == Some("#1F77B4"))
            .filter_map(|n| n.attribute("cx")?.parse().ok())
            .collect();
        // The last one is the legend's.
        xs.pop();
        xs
    }

    fn lines(log_x: bool, xs: &[f64]) -> Chart {
        Chart::Lines {
            title: "t".into(),
            x_label: "file size".into(),
            y_label: "MB/s".into(),
            log_x,
            x_ticks: xs.iter().map(|x| (*x, format!("{x} B"))).collect(),
            series: vec![(
                "s".into(),
                xs.iter().rev().map(|x| (*x, x.sqrt())).collect(),
            )],
        }
    }

    #[test]
    fn lines_put_a_dot_on_every_point_over_a_log_or_linear_axis() {
        let close = |a: f64, b: f64| (a - b).abs() <= 2.0;
        // Decades are evenly spaced on a log axis.
        let log = dots(&lines(true, &[1.0, 10.0, 100.0, 1000.0]));
        assert_eq!(log.len(), 4);
        let gaps: Vec<f64> = log.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter().all(|g| *g > 0.0 && close(*g, gaps[0])),
            "{log:?}"
        );
        // And by value on a linear one: 0, 10, 50.
        let lin = dots(&lines(false, &[0.0, 10.0, 50.0]));
        assert_eq!(lin.len(), 3);
        assert!(
            close((lin[2] - lin[0]) / (lin[1] - lin[0]) * 10.0, 50.0),
            "{lin:?}"
        );
        // A log axis leaves out x = 0, which it cannot show.
        assert_eq!(dots(&lines(true, &[0.0, 10.0, 100.0])).len(), 2);
        let svg = svg(&lines(true, &[1.0, 10.0]));
        let shown = texts(&svg);
        for want in ["file size", "MB/s", "1 B", "10 B", "s"] {
            assert!(shown.iter().any(|t| t == want), "{want:?} in {shown:?}");
        }
    }

    #[test]
    fn png_is_twice_the_svg_and_not_blank() {
        let png = lines(true, &[1.0, 10.0, 100.0]).png().unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        let mut reader = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        let info = reader.info();
        assert_eq!((info.width, info.height), (2 * WIDTH, 2 * HEIGHT));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut pixels).unwrap();
        let dark = pixels
            .chunks_exact(3)
            .filter(|p| p.iter().all(|c| *c < 64))
            .count();
        assert!(dark > 1000, "axes and text are drawn: {dark} dark pixels");
        // The title is drawn in the top band and not cut by the edge, and neither is the
        // rotated y label by the left edge.
        let row = (2 * WIDTH * 3) as usize;
        let ink = |p: &[u8]| p.iter().any(|c| *c < 200);
        let top: Vec<&[u8]> = pixels.chunks_exact(row).take(50).collect();
        assert!(top.iter().take(2).all(|r| !r.chunks_exact(3).any(ink)));
        assert!(top.iter().skip(2).any(|r| r.chunks_exact(3).any(ink)));
        let left_edge = pixels
            .chunks_exact(row)
            .any(|r| r.chunks_exact(3).take(2).any(ink));
        assert!(!left_edge);
    }
}
