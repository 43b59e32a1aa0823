//! Distribution charts: TTFT CDF, inter-chunk gap histogram, TTFT against concurrency.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    axes, de, draw_line, draw_marker, empty_panel, ms_tick, panels, split_legend, LegendEntry,
    LogAxis, SeriesStyle, FAMILY,
};
use crate::recorder::Metric;
use crate::report::data::ReportInput;
use crate::report::style::{ms, transport_colour, transport_rank};

/// Quantile points per CDF line: enough for a smooth curve, bounded SVG size.
const CDF_POINTS: usize = 240;
/// Log-spaced bins of the gap histogram.
const ITL_BINS: usize = 48;

pub(super) fn ttft_cdf<DB: DrawingBackend>(
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    let ps = panels(input);
    let areas = root.split_evenly((ps.len().max(1), 1));
    for (p, area) in ps.iter().zip(areas.iter()) {
        let cells = p.run.cells_of(&p.target);
        let hs: Vec<(&str, _)> = cells
            .iter()
            .filter_map(|c| {
                p.run
                    .histogram(&p.target, &c.transport, Metric::Ttft)
                    .map(|h| (c.transport.as_str(), h))
            })
            .collect();
        if hs.is_empty() {
            empty_panel(area, &p.title, "TTFT")?;
            continue;
        }
        let to_ms = |v: u64| Metric::Ttft.to_natural(v as f64);
        let lo = hs
            .iter()
            .map(|(_, h)| to_ms(h.min()))
            .fold(f64::MAX, f64::min);
        let hi = hs.iter().map(|(_, h)| to_ms(h.max())).fold(0.0, f64::max);
        let (lo, hi) = ((lo * 0.8).max(0.01), (hi * 1.25).max(lo * 2.0 + 0.02));
        let entries: Vec<LegendEntry> = hs
            .iter()
            .enumerate()
            .map(|(k, (t, h))| LegendEntry {
                label: format!("{t}  p50 {}", ms(to_ms(h.value_at_quantile(0.5)))),
                style: SeriesStyle::nth(k, transport_colour(t), 3),
                line: true,
            })
            .collect();
        let plot = split_legend(area, &entries)?;
        let mut chart = ChartBuilder::on(&plot)
            .caption(format!("TTFT · {}", p.title), (FAMILY, 22))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(LogAxis::new(lo, hi), 0f64..100f64)
            .map_err(de)?;
        axes(&mut chart, "TTFT (ms, log scale)")
            .y_desc("requests ≤ x (%)")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_labels(14)
            .x_label_formatter(&|v| ms_tick(*v))
            .draw()
            .map_err(de)?;
        for (k, ((_, h), e)) in hs.iter().zip(&entries).enumerate() {
            let pts: Vec<(f64, f64)> = cdf_points(h)
                .into_iter()
                .map(|(v, q)| (to_ms(v).max(lo), q * 100.0))
                .collect();
            draw_line(&mut chart, &pts, &e.style)?;
            // Markers at quantiles staggered per series: curves that coincide still show
            // every series' markers.
            for q in marker_quantiles(k) {
                let v = to_ms(h.value_at_quantile(q)).max(lo);
                draw_marker(
                    chart.plotting_area(),
                    (v, q * 100.0),
                    e.style.marker,
                    5,
                    e.style.colour,
                )?;
            }
        }
    }
    Ok(())
}

/// Where series `k` of a CDF puts its markers: five quantiles from 0.1 to 0.9, shifted by
/// 0.04 per series so the markers of coinciding curves do not sit on each other.
fn marker_quantiles(k: usize) -> Vec<f64> {
    let shift = 0.04 * (k % 4) as f64;
    (0..5).map(|j| 0.1 + 0.2 * f64::from(j) + shift).collect()
}

/// The CDF of a histogram as at most about [`CDF_POINTS`] (value, cumulative fraction) steps,
/// in one pass over its recorded buckets (`value_at_quantile` per point would scan the counts
/// every time).
fn cdf_points(h: &hdrhistogram::Histogram<u64>) -> Vec<(u64, f64)> {
    let total = h.len().max(1) as f64;
    let mut out = Vec::with_capacity(CDF_POINTS * 2 + 2);
    let mut seen = 0u64;
    let mut next = 0.0;
    for v in h.iter_recorded() {
        let value = h.highest_equivalent(v.value_iterated_to());
        let before = seen as f64 / total;
        seen += v.count_at_value();
        let after = seen as f64 / total;
        if after >= next || seen == h.len() {
            // A vertical step: the CDF jumps from `before` to `after` at this value.
            out.push((value, before));
            out.push((value, after));
            next = after + 1.0 / CDF_POINTS as f64;
        }
    }
    out
}

pub(super) fn itl<DB: DrawingBackend>(
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    let ps = panels(input);
    let areas = root.split_evenly((ps.len().max(1), 1));
    for (p, area) in ps.iter().zip(areas.iter()) {
        let cells = p.run.cells_of(&p.target);
        let hs: Vec<(&str, _)> = cells
            .iter()
            .filter_map(|c| {
                p.run
                    .histogram(&p.target, &c.transport, Metric::Itl)
                    .map(|h| (c.transport.as_str(), h))
            })
            .collect();
        if hs.is_empty() {
            empty_panel(area, &p.title, "chunk-gap")?;
            continue;
        }
        let to_ms = |v: f64| Metric::Itl.to_natural(v);
        // Bins span the 0.1th to 99.9th percentile so one outlier does not flatten the plot.
        let lo = hs
            .iter()
            .map(|(_, h)| to_ms(h.value_at_quantile(0.001) as f64))
            .fold(f64::MAX, f64::min)
            .max(0.001);
        let hi = hs
            .iter()
            .map(|(_, h)| to_ms(h.value_at_quantile(0.999) as f64))
            .fold(0.0, f64::max)
            .max(lo * 1.5);
        let (llo, lhi) = (lo.ln(), hi.ln());
        let width = (lhi - llo) / ITL_BINS as f64;
        let mut series = Vec::new();
        let mut ymax: f64 = 1.0;
        for (transport, h) in &hs {
            let mut bins = vec![0u64; ITL_BINS];
            let total = h.len().max(1);
            for v in h.iter_recorded() {
                let x = to_ms(h.median_equivalent(v.value_iterated_to()) as f64).max(lo);
                let i = (((x.ln() - llo) / width) as usize).min(ITL_BINS - 1);
                bins[i] += v.count_at_value();
            }
            let pts: Vec<(f64, f64)> = bins
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let centre = (llo + (i as f64 + 0.5) * width).exp();
                    (centre, *n as f64 * 100.0 / total as f64)
                })
                .collect();
            ymax = pts.iter().map(|p| p.1).fold(ymax, f64::max);
            series.push((*transport, pts, to_ms(h.value_at_quantile(0.5) as f64)));
        }
        let entries: Vec<LegendEntry> = series
            .iter()
            .enumerate()
            .map(|(k, (t, _, p50))| LegendEntry {
                label: format!("{t}  p50 {}", ms(*p50)),
                style: SeriesStyle::nth(k, transport_colour(t), 2),
                line: true,
            })
            .collect();
        let plot = split_legend(area, &entries)?;
        let mut chart = ChartBuilder::on(&plot)
            .caption(format!("Chunk gap · {}", p.title), (FAMILY, 22))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(LogAxis::new(lo * 0.9, hi * 1.1), 0f64..ymax * 1.3)
            .map_err(de)?;
        axes(&mut chart, "gap between chunks (ms, log scale)")
            .y_desc("share of gaps (%)")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_labels(14)
            .x_label_formatter(&|v| ms_tick(*v))
            .draw()
            .map_err(de)?;
        for (k, ((_, pts, _), e)) in series.iter().zip(&entries).enumerate() {
            draw_line(&mut chart, pts, &e.style)?;
            // A marker on every sixth bin, offset per series, so coinciding lines show each.
            for p in pts.iter().skip(k % 6).step_by(6).filter(|p| p.1 > 0.0) {
                draw_marker(chart.plotting_area(), *p, e.style.marker, 4, e.style.colour)?;
            }
        }
    }
    Ok(())
}

pub(super) fn concurrency<DB: DrawingBackend>(
    input: &ReportInput,
    root: &DrawingArea<DB, Shift>,
) -> anyhow::Result<()> {
    let targets = input.runs.first().map(|r| r.targets()).unwrap_or_default();
    let areas = root.split_evenly((targets.len().max(1), 1));
    for (target, area) in targets.iter().zip(areas.iter()) {
        // transport → [(concurrency, TTFT p50 ms)]
        let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for run in &input.runs {
            let Some(c) = run.concurrency else { continue };
            for cell in run.cells_of(target) {
                let Some(s) = cell.metric(Metric::Ttft) else {
                    continue;
                };
                match lines.iter_mut().find(|(t, _)| *t == cell.transport) {
                    Some((_, pts)) => pts.push((c as f64, s.p50)),
                    None => lines.push((cell.transport.clone(), vec![(c as f64, s.p50)])),
                }
            }
        }
        lines.sort_by_key(|(t, _)| transport_rank(t));
        for (_, pts) in &mut lines {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let xs = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
        let xmax = xs.fold(1.0, f64::max);
        let ymax = lines
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.1))
            .fold(1.0, f64::max);
        let entries: Vec<LegendEntry> = lines
            .iter()
            .enumerate()
            .map(|(k, (t, _))| LegendEntry {
                label: t.clone(),
                style: SeriesStyle::nth(k, transport_colour(t), 3),
                line: true,
            })
            .collect();
        let plot = split_legend(area, &entries)?;
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("TTFT p50 against concurrency · {target}"),
                (FAMILY, 22),
            )
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..xmax * 1.08, 0f64..ymax * 1.15)
            .map_err(de)?;
        axes(&mut chart, "concurrency (sessions in flight per cell)")
            .x_label_formatter(&|v| super::tick(*v))
            .y_label_formatter(&|v| super::tick(*v))
            .y_desc("TTFT p50 (ms)")
            .draw()
            .map_err(de)?;
        for ((_, pts), e) in lines.iter().zip(&entries) {
            draw_line(&mut chart, pts, &e.style)?;
            for p in pts {
                draw_marker(chart.plotting_area(), *p, e.style.marker, 5, e.style.colour)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_points_are_bounded_monotone_and_complete() {
        let mut h = crate::recorder::new_histogram();
        for v in 1..=100_000u64 {
            h.record(v * 1_000).unwrap();
        }
        let pts = cdf_points(&h);
        assert!(pts.len() <= 2 * CDF_POINTS + 4, "{}", pts.len());
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let last = pts.last().unwrap();
        assert_eq!(last.1, 1.0);
        assert!(h.equivalent(last.0, h.max()));
        // The median of the points matches the histogram's.
        let mid = pts.iter().find(|p| p.1 >= 0.5).unwrap().0;
        let p50 = h.value_at_quantile(0.5);
        assert!(
            (mid as f64 - p50 as f64).abs() / p50 as f64 <= 0.01,
            "{mid} vs {p50}"
        );
    }
}
