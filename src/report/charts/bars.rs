//! Row-per-cell bar charts: round-trip overhead (p50 bar, p90/p99 whisker ticks) and decode
//! rate per hardware backend. Horizontal bars keep long labels readable on a phone.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{axes, de, font, row_axis, row_formatter, row_label, FAMILY};
use crate::recorder::Metric;
use crate::report::data::ReportInput;
use crate::report::style::{ms, num, transport_colour};

struct Row {
    label: String,
    transport: String,
    p50: f64,
    p90: Option<f64>,
    p99: Option<f64>,
    text: String,
}

pub(super) fn overhead<DB: DrawingBackend>(
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            for c in run.cells_of(&target) {
                if let Some(s) = c.metric(Metric::Overhead) {
                    rows.push(Row {
                        label: row_label(input, run, &target, &c.transport),
                        transport: c.transport.clone(),
                        p50: s.p50,
                        p90: Some(s.p90),
                        p99: Some(s.p99),
                        text: format!("{}  (p99 {})", ms(s.p50), ms(s.p99)),
                    });
                }
            }
        }
    }
    draw_rows(
        root,
        "Round-trip overhead: p50 bar, p90 and p99 ticks",
        "overhead (ms)",
        &rows,
    )
}

pub(super) fn throughput<DB: DrawingBackend>(
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            let hw = run.hardware_of(&target);
            // The hardware label is what this chart compares; the target name is in the tables.
            let first = hw;
            for c in run.cells_of(&target) {
                if let Some(s) = c.metric(Metric::DecodeTokS) {
                    rows.push(Row {
                        label: row_label(input, run, &first, &c.transport),
                        transport: c.transport.clone(),
                        p50: s.p50,
                        p90: None,
                        p99: None,
                        text: format!("{} tok/s", num(s.p50)),
                    });
                }
            }
        }
    }
    draw_rows(
        root,
        "Decode rate per hardware backend (p50)",
        "decode rate (tokens/s)",
        &rows,
    )
}

fn draw_rows<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    rows: &[Row],
) -> anyhow::Result<()> {
    let n = rows.len() as i32;
    if n == 0 {
        return super::empty_panel(root, title, "");
    }
    let xmax = rows
        .iter()
        .map(|r| r.p99.unwrap_or(r.p50))
        .fold(0.0, f64::max)
        .max(1e-3);
    let longest = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(10);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size((longest as u32 * 9 + 16).clamp(80, 420))
        .build_cartesian_2d(0f64..xmax * 1.45, row_axis(n))
        .map_err(de)?;
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    let fmt = row_formatter(labels);
    axes(&mut chart, x_desc)
        .disable_y_mesh()
        .y_labels(n as usize + 1)
        .y_label_formatter(&fmt)
        .x_label_formatter(&|v| super::tick(*v))
        .draw()
        .map_err(de)?;
    for (i, r) in rows.iter().enumerate() {
        let y = n - 1 - i as i32;
        let colour = transport_colour(&r.transport);
        let bar = Rectangle::new(
            [(0.0, y as f64 - 0.32), (r.p50, y as f64 + 0.32)],
            colour.filled(),
        );
        chart.draw_series(std::iter::once(bar)).map_err(de)?;
        let mid = || y as f64;
        let whisker = BLACK.stroke_width(2);
        let mut end = r.p50;
        if let (Some(p90), Some(p99)) = (r.p90, r.p99) {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(r.p50, mid()), (p99, mid())],
                    whisker,
                )))
                .map_err(de)?;
            for (v, h) in [(p90, 6), (p99, 9)] {
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((v, mid()))
                            + PathElement::new(vec![(0, -h), (0, h)], whisker),
                    ))
                    .map_err(de)?;
            }
            end = p99;
        }
        let style = font(15).pos(Pos::new(HPos::Left, VPos::Center));
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((end, mid())) + Text::new(r.text.clone(), (8, 0), style),
            ))
            .map_err(de)?;
    }
    Ok(())
}
