//! The connection-phase waterfall: per target, one row per transport, the mean time of each
//! phase from dispatch to the first token stacked left to right (the `phase_*` histograms:
//! every successful request contributes one sample per phase, 0 when it skipped it, so the
//! means add up). Decode time follows as a number, since at ~65 tok/s it would dwarf the rest.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{axes, de, empty_panel, font, panels, row_axis, row_formatter, FAMILY};
use crate::recorder::Metric;
use crate::report::data::{ReportInput, RunView};
use crate::report::style::{ms, PHASE_STYLE};

/// Mean of each phase of a cell, ms, in `Metric::PHASES` order; `None` when the run has no
/// phase histograms (written before they existed) or the cell no successful request.
pub(crate) fn phase_means(run: &RunView, target: &str, transport: &str) -> Option<[f64; 8]> {
    let mut out = [0.0; 8];
    for (i, m) in Metric::PHASES.iter().enumerate() {
        out[i] = m.to_natural(run.histogram(target, transport, *m)?.mean());
    }
    Some(out)
}

pub(super) fn waterfall<DB: DrawingBackend>(
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    let (w, _) = root.dim_in_pixel();
    let (charts, legend) = root.split_horizontally(w * 4 / 5);
    draw_legend(&legend)?;
    let ps = panels(input);
    let areas = charts.split_evenly((ps.len().max(1), 1));
    for (p, area) in ps.iter().zip(areas.iter()) {
        let rows: Vec<(String, [f64; 8])> = p
            .run
            .cells_of(&p.target)
            .iter()
            .filter_map(|c| {
                Some((
                    c.transport.clone(),
                    phase_means(p.run, &p.target, &c.transport)?,
                ))
            })
            .collect();
        if rows.is_empty() {
            empty_panel(area, &p.title, "connection-phase")?;
            continue;
        }
        let n = rows.len() as i32;
        let to_first: Vec<f64> = rows.iter().map(|(_, m)| m[..7].iter().sum()).collect();
        let xmax = to_first.iter().copied().fold(1e-3, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("Dispatch → first token · {}", p.title),
                (FAMILY, 20),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(100)
            .build_cartesian_2d(0f64..xmax * 1.75, row_axis(n))
            .map_err(de)?;
        let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        let fmt = row_formatter(labels);
        axes(&mut chart, "mean time since dispatch (ms)")
            .disable_y_mesh()
            .y_labels(n as usize + 1)
            .y_label_formatter(&fmt)
            .x_label_formatter(&|v| super::tick(*v))
            .draw()
            .map_err(de)?;
        for (i, (_, means)) in rows.iter().enumerate() {
            let y = n - 1 - i as i32;
            let mut x = 0.0;
            for (phase, mean) in means[..7].iter().enumerate() {
                if *mean <= 0.0 {
                    continue;
                }
                let r = Rectangle::new(
                    [(x, y as f64 - 0.32), (x + mean, y as f64 + 0.32)],
                    PHASE_STYLE[phase].1.filled(),
                );
                chart.draw_series(std::iter::once(r)).map_err(de)?;
                x += mean;
            }
            let text = format!("{}  + decode {}", ms(to_first[i]), ms(means[7]));
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x, y as f64))
                        + Text::new(
                            text,
                            (8, 0),
                            font(15).pos(Pos::new(HPos::Left, VPos::Center)),
                        ),
                ))
                .map_err(de)?;
        }
    }
    Ok(())
}

fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
    area.draw(&Text::new("phase", (8, 18), font(16)))
        .map_err(de)?;
    for (i, (name, colour)) in PHASE_STYLE[..7].iter().enumerate() {
        let y = 44 + i as i32 * 24;
        area.draw(&Rectangle::new([(8, y - 8), (28, y + 8)], colour.filled()))
            .map_err(de)?;
        area.draw(&Text::new(
            name.to_string(),
            (36, y),
            font(15).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(de)?;
    }
    Ok(())
}
