//! The gate history chart: one metric × statistic over gate runs, one line per target ×
//! transport (coloured as everywhere else), regressed runs ringed in red, and a dashed
//! vertical line where a change point starts.
//!
//! Pure: a [`HistoryChart`] in, drawing on the given area out. The series and change points
//! come from `compare::history` (which this layer does not import: the caller converts).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    axes, de, draw_line, draw_marker, font, split_legend, tick, LegendEntry, SeriesStyle, FAMILY,
};
use crate::report::style::transport_colour;

/// One line of a history chart.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryLine {
    /// Legend label (`sim-ci × ws`).
    pub label: String,
    /// Transport, for the colour.
    pub transport: String,
    /// Value per gate run (absent where not compared).
    pub values: Vec<Option<f64>>,
    /// Runs where this line's row regressed.
    pub regressed: Vec<bool>,
    /// Index of the first run of a new level, if a change point was found.
    pub change_point: Option<usize>,
}

/// A history chart.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryChart {
    /// Caption (`ttft p50 over gate runs`).
    pub title: String,
    /// Y axis description with its unit.
    pub y_desc: String,
    /// Lines.
    pub lines: Vec<HistoryLine>,
}

/// Draws a history chart.
pub fn draw<DB: DrawingBackend>(
    c: &HistoryChart,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(de)?;
    let n = c
        .lines
        .iter()
        .map(|l| l.values.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let ys = c
        .lines
        .iter()
        .flat_map(|l| l.values.iter().flatten().copied());
    let ymax = ys.clone().fold(1e-9, f64::max);
    let ymin = ys.fold(f64::INFINITY, f64::min).min(ymax);
    let pad = ((ymax - ymin) * 0.15).max(ymax * 0.02);
    let y0 = (ymin - pad).max(0.0);
    let entries: Vec<LegendEntry> = c
        .lines
        .iter()
        .enumerate()
        .map(|(k, l)| LegendEntry {
            label: l.label.clone(),
            style: SeriesStyle::nth(k, transport_colour(&l.transport), 2),
            line: true,
        })
        .collect();
    let plot = split_legend(root, &entries)?;
    let mut chart = ChartBuilder::on(&plot)
        .caption(&c.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.5f64..n as f64 + 0.5, y0..ymax + pad)
        .map_err(de)?;
    axes(&mut chart, "gate run (oldest first)")
        .y_desc(c.y_desc.as_str())
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(de)?;
    for (l, e) in c.lines.iter().zip(&entries) {
        let col = e.style.colour;
        let pts: Vec<(f64, f64)> = l
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|y| ((i + 1) as f64, y)))
            .collect();
        draw_line(&mut chart, &pts, &e.style)?;
        for p in &pts {
            draw_marker(chart.plotting_area(), *p, e.style.marker, 4, col)?;
        }
        let red = RGBColor(200, 30, 30);
        chart
            .draw_series(
                l.values
                    .iter()
                    .zip(&l.regressed)
                    .enumerate()
                    .filter_map(|(i, (v, r))| v.filter(|_| *r).map(|y| ((i + 1) as f64, y)))
                    .map(|p| Circle::new(p, 8, red.stroke_width(2))),
            )
            .map_err(de)?;
        if let Some(k) = l.change_point {
            let x = (k + 1) as f64 - 0.5;
            let top = ymax + pad;
            let dashes: Vec<PathElement<(f64, f64)>> = (0..24)
                .filter(|i| i % 2 == 0)
                .map(|i| {
                    let a = y0 + (top - y0) * i as f64 / 24.0;
                    let b = y0 + (top - y0) * (i + 1) as f64 / 24.0;
                    PathElement::new(vec![(x, a), (x, b)], col.stroke_width(2))
                })
                .collect();
            chart.draw_series(dashes).map_err(de)?;
            chart
                .draw_series([EmptyElement::at((x, top))
                    + Text::new(
                        format!("change from run {}", k + 1),
                        (6, 6),
                        font(14).color(&col),
                    )])
                .map_err(de)?;
        }
    }
    Ok(())
}
