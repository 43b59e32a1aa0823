//! Sweep charts: latency, throughput and goodput against load, one line per target ×
//! transport (so backends overlay), the knee of each line marked with a ring.
//!
//! Pure: a `SweepSummary` in, drawing on the given area out.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    axes, de, draw_line, draw_marker, font, split_legend, tick, LegendEntry, Marker, SeriesStyle,
    FAMILY,
};
use crate::recorder::sweep::{Curve, CurvePoint, SweepSummary};

/// One chart of a sweep report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepChart {
    /// TTFT p50/p90/p99 against load.
    Ttft,
    /// TPOT p50/p90/p99 against load.
    Tpot,
    /// Achieved requests/s against load.
    Requests,
    /// Output tokens/s against load.
    Tokens,
    /// Good requests/s against load (only with SLOs).
    Goodput,
}

impl SweepChart {
    /// Every chart, in display order.
    pub const ALL: [SweepChart; 5] = [
        SweepChart::Ttft,
        SweepChart::Tpot,
        SweepChart::Requests,
        SweepChart::Tokens,
        SweepChart::Goodput,
    ];

    /// File stem under `charts/`.
    pub fn file_stem(self) -> &'static str {
        match self {
            SweepChart::Ttft => "sweep_ttft",
            SweepChart::Tpot => "sweep_tpot",
            SweepChart::Requests => "sweep_requests",
            SweepChart::Tokens => "sweep_tokens",
            SweepChart::Goodput => "sweep_goodput",
        }
    }

    /// Heading.
    pub fn title(self) -> &'static str {
        match self {
            SweepChart::Ttft => "TTFT against load (p50 thick, p90 medium, p99 thin)",
            SweepChart::Tpot => {
                "Time per output token against load (p50 thick, p90 medium, p99 thin)"
            }
            SweepChart::Requests => "Achieved requests/s against load",
            SweepChart::Tokens => "Output tokens/s against load",
            SweepChart::Goodput => "Goodput: requests/s that met every SLO",
        }
    }

    fn y_desc(self) -> &'static str {
        match self {
            SweepChart::Ttft => "TTFT (ms)",
            SweepChart::Tpot => "TPOT (ms)",
            SweepChart::Requests => "requests/s (successful)",
            SweepChart::Tokens => "output tokens/s",
            SweepChart::Goodput => "good requests/s",
        }
    }

    /// The series of a point: `(value, stroke width)` per line (three for percentiles).
    fn values(self, p: &CurvePoint) -> Vec<(f64, u32)> {
        let three = |v: [f64; 3]| vec![(v[0], 3), (v[1], 2), (v[2], 1)];
        match self {
            SweepChart::Ttft => three(p.ttft_ms),
            SweepChart::Tpot => three(p.tpot_ms),
            SweepChart::Requests => vec![(p.achieved_req_s, 3)],
            SweepChart::Tokens => vec![(p.output_tok_s, 3)],
            SweepChart::Goodput => vec![(p.good_req_s.unwrap_or(0.0), 3)],
        }
    }
}

/// The charts a sweep has: goodput only when the scenario set SLOs.
pub fn available(s: &SweepSummary) -> Vec<SweepChart> {
    let good = s
        .curves
        .iter()
        .any(|c| c.points.iter().any(|p| p.good_req_s.is_some()));
    SweepChart::ALL
        .into_iter()
        .filter(|k| good || *k != SweepChart::Goodput)
        .collect()
}

/// A colour per curve: the transport's colour for the first target, darker shades after.
fn colour(curves: &[Curve], i: usize) -> RGBColor {
    let c = &curves[i];
    let base = crate::report::style::transport_colour(&c.transport);
    let mut targets: Vec<&str> = Vec::new();
    for cv in curves {
        if !targets.contains(&cv.target.as_str()) {
            targets.push(&cv.target);
        }
    }
    let k = targets.iter().position(|t| *t == c.target).unwrap_or(0) as f64;
    let f = 1.0 / (1.0 + 0.6 * k);
    RGBColor(
        (f64::from(base.0) * f) as u8,
        (f64::from(base.1) * f) as u8,
        (f64::from(base.2) * f) as u8,
    )
}

/// Whether point `p` is drawn as a miss on `kind`: the goodput chart marks every point that
/// missed a percentile SLO (its good req/s counts per-request SLOs only, as vLLM's).
pub fn marks_miss(kind: SweepChart, p: &CurvePoint) -> bool {
    kind == SweepChart::Goodput && p.slo_met == Some(false)
}

/// The legend of `kind`: one entry per curve, then the knee ring and the miss marker when
/// the chart has them.
fn legend_entries(kind: SweepChart, s: &SweepSummary) -> Vec<LegendEntry> {
    let mut out: Vec<LegendEntry> = s
        .curves
        .iter()
        .enumerate()
        .map(|(i, c)| LegendEntry {
            label: format!("{} · {}", c.target, c.transport),
            style: SeriesStyle::nth(i, colour(&s.curves, i), 3),
            line: true,
        })
        .collect();
    let grey = RGBColor(0x44, 0x44, 0x44);
    let marker = |m: Marker| SeriesStyle {
        colour: grey,
        width: 2,
        dash: None,
        marker: m,
    };
    if s.curves.iter().any(|c| c.knee.is_some()) {
        out.push(LegendEntry {
            label: "knee".into(),
            style: marker(Marker::Ring),
            line: false,
        });
    }
    if s.curves
        .iter()
        .any(|c| c.points.iter().any(|p| marks_miss(kind, p)))
    {
        out.push(LegendEntry {
            label: "missed a percentile SLO".into(),
            style: marker(Marker::Missed),
            line: false,
        });
    }
    out
}

/// Draws `kind` of sweep `s`.
pub fn draw<DB: DrawingBackend>(
    kind: SweepChart,
    s: &SweepSummary,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(de)?;
    let xs = s
        .curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.value));
    let xmax = xs.fold(1.0, f64::max);
    let ymax = s
        .curves
        .iter()
        .flat_map(|c| c.points.iter().flat_map(|p| kind.values(p)))
        .map(|(v, _)| v)
        .filter(|v| v.is_finite())
        .fold(1e-9, f64::max);
    let x_desc = if s.param == "rate" {
        "requested rate (requests/s)"
    } else {
        "concurrency (requests in flight per cell)"
    };
    let entries = legend_entries(kind, s);
    let plot = split_legend(root, &entries)?;
    let mut chart = ChartBuilder::on(&plot)
        .caption(kind.title(), (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..xmax * 1.08, 0f64..ymax * 1.15)
        .map_err(de)?;
    axes(&mut chart, x_desc)
        .y_desc(kind.y_desc())
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(de)?;
    for (c, e) in s.curves.iter().zip(&entries) {
        let lines = c.points.first().map_or(0, |p| kind.values(p).len());
        for l in 0..lines {
            let pts: Vec<(f64, f64)> = c
                .points
                .iter()
                .map(|p| (p.value, kind.values(p)[l].0))
                .collect();
            let width = c.points.first().map_or(1, |p| kind.values(p)[l].1);
            draw_line(&mut chart, &pts, &SeriesStyle { width, ..e.style })?;
            for (p, xy) in c.points.iter().zip(&pts) {
                let (m, r) = if marks_miss(kind, p) {
                    (Marker::Missed, MISS_RADIUS)
                } else {
                    (e.style.marker, 4)
                };
                draw_marker(chart.plotting_area(), *xy, m, r, e.style.colour)?;
            }
        }
        // The knee: a ring on the p50 (first) line.
        if let Some(k) = c.knee.and_then(|k| c.points.get(k)) {
            let y = kind.values(k)[0].0;
            let col = e.style.colour;
            draw_marker(chart.plotting_area(), (k.value, y), Marker::Ring, 11, col)?;
            chart
                .draw_series([EmptyElement::at((k.value, y))
                    + Text::new("knee".to_string(), (12, -24), font(14).color(&col))])
                .map_err(de)?;
        }
    }
    Ok(())
}

/// Radius (px) of the marker of a point that missed a percentile SLO.
pub const MISS_RADIUS: i32 = 8;
