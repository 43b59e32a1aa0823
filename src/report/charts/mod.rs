//! Charts: one function per chart, drawn with `plotters` on any backend, so the same code
//! gives the SVG (text stays `<text>`, scales in the HTML) and the PNG (rasterised with the
//! bundled DejaVu Sans through `ab_glyph`; no system font library is needed).
//!
//! Owns: which charts a report has, their sizes and file names, and the PNG encoding.
//! Does not own: data loading (`data`) or files (`report::render*` write them).
//!
//! Conventions: every axis says its unit; a transport has the same colour in every chart
//! (`style::transport_colour`); several runs get one panel (or row prefix) per run label.

mod bars;
mod distributions;
pub mod history;
pub mod sweep;
mod timeline;
mod waterfall;

use std::sync::Once;

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::{CoordTranslate, Shift};
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::data::{ReportInput, RunView};

/// Width of every chart, px: drawn at 720 px so the text stays legible when a 390 px phone
/// scales the chart down to its width (about 0.5×).
pub const WIDTH: u32 = 720;

/// The bundled font (DejaVu Sans, Bitstream Vera licence: `assets/fonts/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
/// The family every chart asks for.
pub(crate) const FAMILY: &str = "sans-serif";

/// Registers the bundled font with plotters (once per process). Text layout needs it for the
/// SVG too, since the `ab_glyph` feature measures text with it.
fn ensure_fonts() -> anyhow::Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            if plotters::style::register_font(FAMILY, style, FONT).is_err() {
                result = Err(anyhow::anyhow!(
                    "the bundled font assets/fonts/DejaVuSans.ttf is not a valid TrueType font"
                ));
            }
        }
    });
    result
}

/// One chart of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    /// TTFT CDF per target × transport (log x).
    TtftCdf,
    /// Inter-chunk gap distribution.
    Itl,
    /// Round-trip overhead p50 with p90/p99 whiskers.
    Overhead,
    /// Mean connection-phase waterfall per transport.
    Waterfall,
    /// One session's turns and token arrivals per transport.
    Timeline,
    /// Decode tokens/s per hardware backend.
    Throughput,
    /// TTFT p50 against concurrency, across runs with different load levels.
    Concurrency,
}

impl ChartKind {
    /// File stem under `charts/`.
    pub fn file_stem(self) -> &'static str {
        match self {
            ChartKind::TtftCdf => "ttft_cdf",
            ChartKind::Itl => "itl",
            ChartKind::Overhead => "overhead",
            ChartKind::Waterfall => "waterfall",
            ChartKind::Timeline => "timeline",
            ChartKind::Throughput => "throughput",
            ChartKind::Concurrency => "concurrency",
        }
    }

    /// Heading and alt text.
    pub fn title(self) -> &'static str {
        match self {
            ChartKind::TtftCdf => "Time to first token (CDF)",
            ChartKind::Itl => "Gap between streamed chunks",
            ChartKind::Overhead => "Round-trip overhead by transport",
            ChartKind::Waterfall => "Where the time goes: connection-phase waterfall (means)",
            ChartKind::Timeline => "One session, turn by turn",
            ChartKind::Throughput => "Decode rate per hardware backend",
            ChartKind::Concurrency => "TTFT against concurrency",
        }
    }

    /// One sentence under the heading: how to read the chart.
    pub fn caption(self) -> &'static str {
        match self {
            ChartKind::TtftCdf => "Share of requests whose first token arrived within x ms (from the intended start). Further left is faster; a long right tail is what users notice.",
            ChartKind::Itl => "Distribution of the time between consecutive content chunks (per chunk, not per token). Set by the model server, not the transport.",
            ChartKind::Overhead => "Bars: median round-trip overhead; whisker ticks: p90 and p99. Overhead is client TTFT minus server TTFT when the server reports timing, else dispatch to the first protocol event (an estimate).",
            ChartKind::Waterfall => "Mean time per phase of a request, from dispatch to the first token; decode time follows and is given as a number. Connection phases are averaged over all requests, including those that reused a connection.",
            ChartKind::Timeline => "The first measured session of each cell: light bars wait for the first token, solid bars stream, ticks are chunk arrivals. The number is the session's wall time.",
            ChartKind::Throughput => "Median decode rate (tokens after the first chunk over the first-to-last token span) per hardware backend and transport.",
            ChartKind::Concurrency => "Median TTFT of each run against its concurrency (sessions in flight per cell), one line per transport.",
        }
    }
}

/// The charts a report of `input` has, in display order. Charts without data are left out
/// (no concurrency chart unless the runs have at least two load levels).
pub fn available(input: &ReportInput) -> Vec<ChartKind> {
    let mut out = vec![
        ChartKind::TtftCdf,
        ChartKind::Overhead,
        ChartKind::Waterfall,
        ChartKind::Timeline,
        ChartKind::Itl,
        ChartKind::Throughput,
    ];
    if input.runs.iter().all(|r| r.timeline.is_empty()) {
        out.retain(|k| *k != ChartKind::Timeline);
    }
    let mut levels: Vec<u64> = input.runs.iter().filter_map(|r| r.concurrency).collect();
    levels.sort_unstable();
    levels.dedup();
    if levels.len() >= 2 {
        out.push(ChartKind::Concurrency);
    }
    out
}

/// Size of a chart, px.
pub fn size(kind: ChartKind, input: &ReportInput) -> (u32, u32) {
    let panels = panels(input).len() as u32;
    let rows: u32 = input
        .runs
        .iter()
        .map(|r| r.summary.cells.len() as u32)
        .sum::<u32>()
        .max(1);
    let h = match kind {
        // Each panel keeps a 330 px plot above its legend strip.
        ChartKind::TtftCdf | ChartKind::Itl => (330 + legend_height(4, WIDTH)) * panels.max(1),
        ChartKind::Concurrency => {
            (330 + legend_height(4, WIDTH))
                * input.runs.first().map_or(1, |r| r.targets().len().max(1)) as u32
        }
        ChartKind::Overhead | ChartKind::Throughput => 110 + 34 * rows,
        ChartKind::Waterfall => panels.max(1) * 60 + 40 * rows + 60,
        ChartKind::Timeline => 100 + 46 * rows,
    };
    (WIDTH, h.min(6000))
}

/// A sweep chart as SVG, [`WIDTH`] × 480.
pub fn sweep_svg(
    kind: sweep::SweepChart,
    s: &crate::recorder::sweep::SweepSummary,
) -> anyhow::Result<String> {
    render_svg((WIDTH, 480), |root| sweep::draw(kind, s, root))
}

/// A sweep chart as PNG bytes, the size of the SVG.
pub fn sweep_png(
    kind: sweep::SweepChart,
    s: &crate::recorder::sweep::SweepSummary,
) -> anyhow::Result<Vec<u8>> {
    render_png((WIDTH, 480), |root| sweep::draw(kind, s, root))
}

/// A gate history chart as SVG, [`WIDTH`] × 420.
pub fn history_svg(c: &history::HistoryChart) -> anyhow::Result<String> {
    render_svg((WIDTH, 420), |root| history::draw(c, root))
}

/// A gate history chart as PNG bytes, the size of the SVG.
pub fn history_png(c: &history::HistoryChart) -> anyhow::Result<Vec<u8>> {
    render_png((WIDTH, 420), |root| history::draw(c, root))
}

/// The chart as an SVG document (with a `viewBox`, so it scales).
pub fn svg(kind: ChartKind, input: &ReportInput) -> anyhow::Result<String> {
    render_svg(size(kind, input), |root| draw(kind, input, root))
}

/// The chart as PNG bytes, the same pixel size as the SVG.
pub fn png(kind: ChartKind, input: &ReportInput) -> anyhow::Result<Vec<u8>> {
    render_png(size(kind, input), |root| draw(kind, input, root))
}

/// An SVG document of `size` px, drawn by `draw`.
fn render_svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<String> {
    ensure_fonts()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        draw(&root)?;
        root.present().map_err(de)?;
    }
    Ok(out)
}

/// A PNG (8-bit RGB) of `(w, h)` px, drawn by `draw`.
fn render_png(
    (w, h): (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<u8>> {
    ensure_fonts()?;
    let mut rgb = vec![0u8; (w as usize) * (h as usize) * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root)?;
        root.present().map_err(de)?;
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header()?;
        writer.write_image_data(&rgb)?;
    }
    Ok(out)
}

fn draw<DB: DrawingBackend>(
    kind: ChartKind,
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(de)?;
    match kind {
        ChartKind::TtftCdf => distributions::ttft_cdf(input, root),
        ChartKind::Itl => distributions::itl(input, root),
        ChartKind::Concurrency => distributions::concurrency(input, root),
        ChartKind::Overhead => bars::overhead(input, root),
        ChartKind::Throughput => bars::throughput(input, root),
        ChartKind::Waterfall => waterfall::waterfall(input, root),
        ChartKind::Timeline => timeline::timeline(input, root),
    }
}

/// A panel: one target of one run.
pub(crate) struct Panel<'a> {
    pub run: &'a RunView,
    pub target: String,
    pub title: String,
}

/// One panel per run × target, titled `target` (one run) or `A · target` (several).
pub(crate) fn panels(input: &ReportInput) -> Vec<Panel<'_>> {
    let several = input.is_comparison();
    input
        .runs
        .iter()
        .flat_map(|run| {
            run.targets().into_iter().map(move |t| Panel {
                run,
                title: if several {
                    format!("{} · {}", run.label, t)
                } else {
                    t.clone()
                },
                target: t,
            })
        })
        .collect()
}

/// A row label for row-per-cell charts: `sim-gpu · ws`, prefixed by the run label when
/// several runs are shown.
pub(crate) fn row_label(
    input: &ReportInput,
    run: &RunView,
    first: &str,
    transport: &str,
) -> String {
    if input.is_comparison() {
        format!("{} · {first} · {transport}", run.label)
    } else {
        format!("{first} · {transport}")
    }
}

/// A y axis of `n` rows for row-per-cell charts: row `k` is centred on the integer `k` (row 0
/// at the bottom), so the axis' integer ticks carry the row labels.
pub(crate) fn row_axis(n: i32) -> std::ops::Range<f64> {
    -0.5..f64::from(n.max(1)) - 0.5
}

/// Labels for [`row_axis`]: `labels[0]` is the top row; ticks between rows get no text.
pub(crate) fn row_formatter(labels: Vec<String>) -> impl Fn(&f64) -> String {
    move |v: &f64| {
        let k = v.round();
        if (v - k).abs() > 1e-6 || k < 0.0 {
            return String::new();
        }
        labels
            .len()
            .checked_sub(k as usize + 1)
            .and_then(|i| labels.get(i))
            .cloned()
            .unwrap_or_default()
    }
}

/// Drawing errors → anyhow, with the backend's message.
pub(crate) fn de<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart failed: {e}")
}

/// Axis tick text for milliseconds on a log axis: `0.5`, `20`, `1500`.
pub(crate) fn ms_tick(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        tick(v)
    }
}

/// Axis tick text on a linear axis: `0`, `2.5`, `150` (no trailing `.0`).
pub(crate) fn tick(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Font helper.
pub(crate) fn font(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

/// The axes of an x–y chart as every chart draws them: `x_desc` under the x axis, tick
/// labels in 15 px, axis descriptions in 16 px, no light grid lines. The caller adds what
/// differs (a `y_desc`, tick formatters and counts) and calls `draw`.
pub(crate) fn axes<'a, 'b, DB, X, Y, XT, YT>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    x_desc: &str,
) -> MeshStyle<'a, 'b, X, Y, DB>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = XT> + ValueFormatter<XT>,
    Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
{
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc)
        .label_style(font(15))
        .axis_desc_style(font(16))
        .light_line_style(WHITE.mix(0.0));
    mesh
}

/// A marker shape. Series `k` of a chart gets `SERIES_MARKERS[k % 4]`; [`Marker::Ring`] marks
/// a knee and [`Marker::Missed`] a load point that missed a percentile SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Filled circle.
    Circle,
    /// Filled square.
    Square,
    /// Filled triangle, point up.
    Triangle,
    /// Filled diamond.
    Diamond,
    /// Hollow ring (a knee).
    Ring,
    /// Hollow circle with a cross through it: a point that missed a percentile SLO.
    Missed,
}

/// The marker shapes of series 0, 1, 2, 3, … (repeating).
pub(crate) const SERIES_MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
];

/// The dash patterns (dash, gap in px; `None`: solid) of series 0, 1, 2, 3, … (repeating),
/// so curves that coincide stay visible and tell apart without colour.
pub(crate) const SERIES_DASHES: [Option<(u32, u32)>; 4] =
    [None, Some((16, 7)), Some((6, 5)), Some((2, 5))];

/// How one series looks: colour, stroke width, dash pattern and marker shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SeriesStyle {
    /// Stroke and marker colour.
    pub colour: RGBColor,
    /// Stroke width, px.
    pub width: u32,
    /// Dash and gap, px; `None` for a solid line.
    pub dash: Option<(u32, u32)>,
    /// Marker shape.
    pub marker: Marker,
}

impl SeriesStyle {
    /// The style of series `k` of a chart in `colour`.
    pub(crate) fn nth(k: usize, colour: RGBColor, width: u32) -> SeriesStyle {
        SeriesStyle {
            colour,
            width,
            dash: SERIES_DASHES[k % SERIES_DASHES.len()],
            marker: SERIES_MARKERS[k % SERIES_MARKERS.len()],
        }
    }
}

/// Draws `pts` as one line of `style` (solid or dashed) on `chart`.
pub(crate) fn draw_line<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    pts: &[(X::ValueType, Y::ValueType)],
    style: &SeriesStyle,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged,
    Y: Ranged,
    X::ValueType: Clone + 'static,
    Y::ValueType: Clone + 'static,
{
    let stroke = style.colour.stroke_width(style.width);
    match style.dash {
        None => chart
            .draw_series(LineSeries::new(pts.iter().cloned(), stroke))
            .map(|_| ())
            .map_err(de),
        Some((dash, gap)) => chart
            .draw_series(DashedLineSeries::new(
                pts.iter().cloned(),
                dash as i32,
                gap as i32,
                stroke,
            ))
            .map(|_| ())
            .map_err(de),
    }
}

/// Draws one marker of shape `m`, radius `r` px, centred on `at` (in `area`'s coordinates).
pub(crate) fn draw_marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    m: Marker,
    r: i32,
    colour: RGBColor,
) -> anyhow::Result<()>
where
    CT::From: Clone,
{
    let fill = colour.filled();
    let hollow = colour.stroke_width(2);
    let e = EmptyElement::at(at);
    match m {
        Marker::Circle => area.draw(&(e + Circle::new((0, 0), r, fill))),
        Marker::Square => {
            area.draw(&(e + Rectangle::new([(-r + 1, -r + 1), (r - 1, r - 1)], fill)))
        }
        Marker::Triangle => {
            area.draw(&(e + Polygon::new(vec![(0, -r - 1), (r + 1, r), (-r - 1, r)], fill)))
        }
        Marker::Diamond => area.draw(
            &(e + Polygon::new(vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)], fill)),
        ),
        Marker::Ring => area.draw(&(e + Circle::new((0, 0), r, hollow))),
        Marker::Missed => {
            let w = WHITE.filled();
            let k = (f64::from(r) * 0.7) as i32;
            area.draw(
                &(e + Circle::new((0, 0), r, w)
                    + Circle::new((0, 0), r, hollow)
                    + PathElement::new(vec![(-k, -k), (k, k)], hollow)
                    + PathElement::new(vec![(-k, k), (k, -k)], hollow)),
            )
        }
    }
    .map_err(de)
}

/// One entry of a legend drawn outside the plot ([`split_legend`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LegendEntry {
    /// The text.
    pub label: String,
    /// The look it stands for.
    pub style: SeriesStyle,
    /// A line sample with the marker on it (a series), or the marker alone.
    pub line: bool,
}

/// Legend text size, px.
const LEGEND_FONT: u32 = 17;
/// Height of one legend row, px.
const LEGEND_ROW: i32 = 26;

/// Lays out `entries` in rows across `width` px: each entry's `(x, row)`, and the row count.
fn legend_layout<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    entries: &[LegendEntry],
) -> (Vec<(i32, i32)>, i32) {
    let width = area.dim_in_pixel().0 as i32;
    let (mut x, mut row) = (16, 0);
    let mut at = Vec::with_capacity(entries.len());
    for e in entries {
        let text = area
            .estimate_text_size(&e.label, &font(LEGEND_FONT))
            .map_or(e.label.len() as i32 * 9, |(w, _)| w as i32);
        let w = 50 + text + 22;
        if x > 16 && x + w > width - 8 {
            x = 16;
            row += 1;
        }
        at.push((x, row));
        x += w;
    }
    (at, if entries.is_empty() { 0 } else { row + 1 })
}

/// Splits `area` into the plot (top) and a legend strip under it holding `entries`, so no
/// legend covers a curve; draws the legend and returns the plot area.
pub(crate) fn split_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> anyhow::Result<DrawingArea<DB, Shift>> {
    if entries.is_empty() {
        return Ok(area.clone());
    }
    let (at, rows) = legend_layout(area, entries);
    let h = area.dim_in_pixel().1 as i32;
    let (plot, strip) = area.split_vertically(h - rows * LEGEND_ROW - 10);
    for (e, (x, row)) in entries.iter().zip(at) {
        let y = row * LEGEND_ROW + LEGEND_ROW / 2;
        let s = e.style;
        if e.line {
            let stroke = s.colour.stroke_width(s.width.max(2));
            match s.dash {
                None => strip.draw(&PathElement::new(vec![(x, y), (x + 40, y)], stroke)),
                Some((d, g)) => strip.draw(&DashedPathElement::new(
                    vec![(x, y), (x + 40, y)],
                    d as i32,
                    g as i32,
                    stroke,
                )),
            }
            .map_err(de)?;
        }
        draw_marker(&strip, (x + 20, y), s.marker, 5, s.colour)?;
        strip
            .draw(&Text::new(
                e.label.clone(),
                (x + 50, y - LEGEND_FONT as i32 / 2 - 1),
                font(LEGEND_FONT),
            ))
            .map_err(de)?;
    }
    Ok(plot)
}

/// Height of the legend strip [`split_legend`] takes for `n` entries on a `width`-px chart,
/// assuming about 230 px per entry: for sizing charts before drawing.
pub(crate) fn legend_height(n: usize, width: u32) -> u32 {
    if n == 0 {
        return 0;
    }
    let per_row = (width as usize / 230).max(1);
    (n.div_ceil(per_row) as u32) * LEGEND_ROW as u32 + 10
}

/// Text for an empty panel (no samples).
pub(crate) fn empty_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    what: &str,
) -> anyhow::Result<()> {
    let (w, h) = area.dim_in_pixel();
    area.draw(&Text::new(
        format!("{title}: no {what} samples"),
        (w as i32 / 2 - 150, h as i32 / 2),
        font(16),
    ))
    .map_err(de)
}

/// A log-scale axis with "nice" ticks (1, 2, 5 × 10ⁿ) anywhere in its range. plotters' own
/// log axis only ticks from the first power of ten upwards, which leaves a 400–1300 ms TTFT
/// axis with a single label.
#[derive(Debug, Clone)]
pub(crate) struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    /// An axis over `lo..hi` (both clamped to be positive, `hi > lo`).
    pub(crate) fn new(lo: f64, hi: f64) -> LogAxis {
        let lo = if lo.is_finite() && lo > 0.0 { lo } else { 1e-3 };
        let hi = if hi.is_finite() && hi > lo {
            hi
        } else {
            lo * 10.0
        };
        LogAxis { lo, hi }
    }

    fn ticks(&self, max: usize) -> Vec<f64> {
        let (a, b) = (
            self.lo.log10().floor() as i32,
            self.hi.log10().ceil() as i32,
        );
        for mults in [
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0][..],
            &[1.0, 2.0, 3.0, 5.0],
            &[1.0, 2.0, 5.0],
            &[1.0, 3.0],
            &[1.0],
        ] {
            let v: Vec<f64> = (a..=b)
                .flat_map(|e| mults.iter().map(move |m| m * 10f64.powi(e)))
                .filter(|v| *v >= self.lo && *v <= self.hi)
                .collect();
            if v.len() <= max.max(2) {
                return v;
            }
        }
        Vec::new()
    }
}

impl plotters::coord::ranged1d::Ranged for LogAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let v = value.max(self.lo * 1e-6);
        let t = (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        limit.0 + (f64::from(limit.1 - limit.0) * t).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        self.ticks(hint.max_num_points())
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_ticks_inside_a_decade() {
        let a = LogAxis::new(420.0, 1300.0);
        assert_eq!(a.ticks(14), vec![500.0, 600.0, 700.0, 800.0, 900.0, 1000.0]);
        let wide = LogAxis::new(0.5, 20_000.0);
        let t = wide.ticks(10);
        assert!(
            t.len() <= 10 && t.contains(&1.0) && t.contains(&10_000.0),
            "{t:?}"
        );
        // Degenerate input still gives a usable axis.
        let d = LogAxis::new(0.0, f64::NAN);
        assert!(d.hi > d.lo && d.lo > 0.0);
        assert_eq!(tick(150.0), "150");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(ms_tick(0.25), "0.25");
    }

    #[test]
    fn row_labels_are_top_down_and_only_on_rows() {
        let f = row_formatter(vec!["top".into(), "middle".into(), "bottom".into()]);
        assert_eq!(f(&2.0), "top");
        assert_eq!(f(&0.0), "bottom");
        assert_eq!(f(&0.5), "");
        assert_eq!(f(&3.0), "");
        assert_eq!(row_axis(3), -0.5..2.5);
    }
}
