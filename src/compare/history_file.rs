//! The gate's history on disk (`compare --history DIR`, `spark-bench history`):
//! `DIR/history.jsonl` (one entry per gate run, the last N kept), its charts (SVG and PNG,
//! one per gated metric, in `charts/`) and its Markdown (`history.md`).
//!
//! Owns: the file's I/O and the bound, and writing the charts and Markdown files.
//! Does not own: the entry shape, series, change points and Markdown ([`super::history`]),
//! drawing a chart (`report::charts::history`), printing (`commands::history`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::history::{self, Entry, Series};
use super::Comparison;
use crate::report::charts::history::{HistoryChart, HistoryLine};

/// The history file inside a history directory.
pub const HISTORY_FILE: &str = "history.jsonl";

/// Appends the comparison to `dir/history.jsonl`, keeping the last `keep` entries; returns
/// how many the file holds.
pub fn append(
    dir: &Path,
    c: &Comparison,
    label: Option<String>,
    keep: usize,
) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the history directory {}", dir.display()))?;
    let mut entries = read(dir)?;
    let at = crate::store::rfc3339(crate::clock::wall_now());
    entries.push(history::entry(c, at, label));
    let drop = entries.len().saturating_sub(keep.max(1));
    entries.drain(..drop);
    let mut text = String::new();
    for e in &entries {
        text.push_str(&serde_json::to_string(e)?);
        text.push('\n');
    }
    let path = dir.join(HISTORY_FILE);
    let tmp = dir.join(format!(".{HISTORY_FILE}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(entries.len())
}

/// Reads `dir/history.jsonl` (empty when absent). A line that does not parse is an error
/// naming the file and line.
pub fn read(dir: &Path) -> anyhow::Result<Vec<Entry>> {
    let path = dir.join(HISTORY_FILE);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let text = crate::vocab::input::read_text(&path, crate::vocab::input::MAX_WHOLE_FILE_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| {
                format!(
                    "{}:{}: not a gate history entry (written by `compare --history`); remove the line or the file",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect()
}

/// What [`write_report`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// Gate runs in the history (after `last`).
    pub entries: usize,
    /// Every series, with its change point.
    pub series: Vec<Series>,
    /// The charts directory.
    pub charts_dir: PathBuf,
    /// Chart files written (an SVG and a PNG per metric).
    pub charts: usize,
    /// The Markdown, as written to [`Written::markdown_path`].
    pub markdown: String,
    /// `OUT/history.md`.
    pub markdown_path: PathBuf,
}

/// Reads the history in `dir` (its last `last` entries), and writes its charts into
/// `out/charts/` and its Markdown into `out/history.md` (`out` defaults to `dir`). An empty
/// history is an error saying how to start one.
pub fn write_report(
    dir: &Path,
    out: Option<&Path>,
    last: Option<usize>,
) -> anyhow::Result<Written> {
    let mut entries = read(dir)?;
    if entries.is_empty() {
        anyhow::bail!(
            "no gate history in {} (no {HISTORY_FILE}); append to it with `spark-bench compare BASE CAND --history {}`",
            dir.display(),
            dir.display()
        );
    }
    if let Some(n) = last {
        let drop = entries.len().saturating_sub(n);
        entries.drain(..drop);
    }
    let out: PathBuf = out.map_or_else(|| dir.to_path_buf(), Path::to_path_buf);
    let charts_dir = out.join("charts");
    std::fs::create_dir_all(&charts_dir)
        .with_context(|| format!("cannot create {}", charts_dir.display()))?;
    let series = history::series(&entries);
    let charts = write_charts(&series, &charts_dir)?;
    let markdown = history::markdown(&entries, &series, &charts_dir.display().to_string());
    let markdown_path = out.join("history.md");
    std::fs::write(&markdown_path, &markdown)?;
    Ok(Written {
        entries: entries.len(),
        series,
        charts_dir,
        charts,
        markdown,
        markdown_path,
    })
}

/// Writes an SVG and a PNG chart of each metric's headline statistic into `charts_dir`;
/// returns how many files it wrote.
fn write_charts(series: &[Series], charts_dir: &Path) -> anyhow::Result<usize> {
    let mut metrics: Vec<&str> = Vec::new();
    for s in series {
        if !metrics.contains(&s.metric.as_str()) {
            metrics.push(&s.metric);
        }
    }
    let mut written = 0;
    for m in metrics {
        let Some(chart) = chart_of(m, series) else {
            continue;
        };
        let stat = series
            .iter()
            .find(|s| s.metric == m && history::headline_statistic(&s.statistic))
            .map_or("p50", |s| s.statistic.as_str());
        let stem = history::chart_stem(m, stat);
        let svg = crate::report::charts::history_svg(&chart)?;
        std::fs::write(charts_dir.join(format!("{stem}.svg")), svg)?;
        let png = crate::report::charts::history_png(&chart)?;
        std::fs::write(charts_dir.join(format!("{stem}.png")), png)?;
        written += 2;
    }
    Ok(written)
}

/// The chart of one metric's headline statistic.
fn chart_of(metric: &str, series: &[Series]) -> Option<HistoryChart> {
    let lines: Vec<HistoryLine> = series
        .iter()
        .filter(|s| s.metric == metric && history::headline_statistic(&s.statistic))
        .map(|s| HistoryLine {
            label: s.cell.clone(),
            transport: s.cell.rsplit(" × ").next().unwrap_or("").to_string(),
            values: s.values.clone(),
            regressed: s.regressed.clone(),
            change_point: s.change_point.as_ref().map(|c| c.index),
        })
        .collect();
    let first = series
        .iter()
        .find(|s| s.metric == metric && history::headline_statistic(&s.statistic))?;
    Some(HistoryChart {
        title: format!(
            "{metric} {} over gate runs (red ring: regressed; dashed: change point)",
            first.statistic
        ),
        y_desc: format!("{metric} {} ({})", first.statistic, first.unit),
        lines,
    })
}
