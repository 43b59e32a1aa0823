//! The session timeline: for each cell, its sampled session (`timeline.json`) drawn turn by
//! turn on a shared time axis from the session's start, so "done in 3 s over ws, 43 s over
//! http" is visible at a glance. Token arrivals are ticks, merged per pixel column so the SVG
//! stays small however many tokens there were.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{axes, de, empty_panel, font, row_axis, row_formatter, row_label, FAMILY};
use crate::recorder::SessionTimeline;
use crate::report::data::{ReportInput, RunView};
use crate::report::style::{ms, transport_colour};

/// Tick columns across the axis: one tick per column that saw any chunk.
const TICK_COLUMNS: f64 = 700.0;
/// Room right of the longest row for its label.
const HEADROOM: f64 = 1.32;

pub(super) fn timeline<DB: DrawingBackend>(
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    let mut rows: Vec<(String, &RunView, &SessionTimeline)> = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            for c in run.cells_of(&target) {
                if let Some(tl) = run.timeline_of(&target, &c.transport) {
                    if !tl.requests.is_empty() {
                        rows.push((row_label(input, run, &target, &c.transport), run, tl));
                    }
                }
            }
        }
    }
    let title = "One session per cell (first measured session)";
    if rows.is_empty() {
        return empty_panel(root, title, "timeline");
    }
    let n = rows.len() as i32;
    let wall_s = |tl: &SessionTimeline| -> f64 {
        match (tl.start_ns(), tl.end_ns()) {
            (Some(s), Some(e)) => e.saturating_sub(s) as f64 / 1e9,
            _ => 0.0,
        }
    };
    let xmax = rows.iter().map(|r| wall_s(r.2)).fold(0.001, f64::max);
    let longest = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(10);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size((longest as u32 * 9 + 16).clamp(80, 420))
        .build_cartesian_2d(0f64..xmax * HEADROOM, row_axis(n))
        .map_err(de)?;
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let fmt = row_formatter(labels);
    axes(&mut chart, "time since the session started (s)")
        .disable_y_mesh()
        .y_labels(n as usize + 1)
        .y_label_formatter(&fmt)
        .x_label_formatter(&|v| super::tick(*v))
        .draw()
        .map_err(de)?;
    let column = xmax * HEADROOM / TICK_COLUMNS;
    for (i, (_, _, tl)) in rows.iter().enumerate() {
        let y = n - 1 - i as i32;
        let colour = transport_colour(&tl.transport);
        let origin = tl.start_ns().unwrap_or(0);
        let s = |ns: u64| ns.saturating_sub(origin) as f64 / 1e9;
        let mut bars = Vec::new();
        let mut ticks: Vec<i64> = Vec::new();
        for r in &tl.requests {
            let start = s(r.intended_ns);
            let first = r.first_token_ns.map(s);
            let end = s(r.last_token_ns.or(r.end_ns).unwrap_or(r.intended_ns));
            let waiting_end = first.unwrap_or(end);
            let wait = Rectangle::new(
                [(start, y as f64 - 0.32), (waiting_end, y as f64 + 0.32)],
                colour.mix(0.3).filled(),
            );
            bars.push(wait);
            if let Some(first) = first {
                let stream = Rectangle::new(
                    [(first, y as f64 - 0.32), (end, y as f64 + 0.32)],
                    colour.filled(),
                );
                bars.push(stream);
            }
            ticks.extend(
                r.chunks
                    .iter()
                    .map(|c| (s(c.at_ns) / column).round() as i64),
            );
        }
        chart.draw_series(bars).map_err(de)?;
        ticks.sort_unstable();
        ticks.dedup();
        let tick_style = BLACK.mix(0.3).stroke_width(1);
        chart
            .draw_series(ticks.into_iter().map(|t| {
                EmptyElement::at((t as f64 * column, y as f64))
                    + PathElement::new(vec![(0, -15), (0, -11)], tick_style)
            }))
            .map_err(de)?;
        let failed = tl.requests.iter().filter(|r| !r.is_ok()).count();
        let mut text = format!(
            "{} · {} requests",
            ms(wall_s(tl) * 1000.0),
            tl.requests.len()
        );
        if failed > 0 {
            text.push_str(&format!(" · {failed} failed"));
        }
        if tl.truncated {
            text.push_str(" · sample truncated");
        }
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((wall_s(tl), y as f64))
                    + Text::new(
                        text,
                        (8, 0),
                        font(15).pos(Pos::new(HPos::Left, VPos::Center)),
                    ),
            ))
            .map_err(de)?;
    }
    Ok(())
}
