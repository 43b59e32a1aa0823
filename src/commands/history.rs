//! `spark-bench history` and `compare --history DIR`: the gate's history file
//! (`DIR/history.jsonl`, one entry per gate run, the last N kept), its charts (SVG and PNG,
//! one per gated metric) and its Markdown (`DIR/history.md`, and stdout for
//! `$GITHUB_STEP_SUMMARY`).
//!
//! Owns: the file's I/O and the bound. The entry shape, series, change points and Markdown
//! are `compare::history`'s; the chart is `report::charts::history`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::EXIT_OK;
use crate::cli::HistoryArgs;
use crate::compare::history::{self, Entry, Series};
use crate::compare::Comparison;
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
    let text = std::fs::read_to_string(&path)
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

/// Executes `spark-bench history`.
pub async fn execute(args: HistoryArgs) -> anyhow::Result<u8> {
    let mut entries = read(&args.dir)?;
    if entries.is_empty() {
        anyhow::bail!(
            "no gate history in {} (no {HISTORY_FILE}); append to it with `spark-bench compare BASE CAND --history {}`",
            args.dir.display(),
            args.dir.display()
        );
    }
    if let Some(n) = args.last {
        let drop = entries.len().saturating_sub(n);
        entries.drain(..drop);
    }
    let out: PathBuf = args.out.clone().unwrap_or_else(|| args.dir.clone());
    let charts = out.join("charts");
    std::fs::create_dir_all(&charts)
        .with_context(|| format!("cannot create {}", charts.display()))?;
    let series = history::series(&entries);
    let mut metrics: Vec<&str> = Vec::new();
    for s in &series {
        if !metrics.contains(&s.metric.as_str()) {
            metrics.push(&s.metric);
        }
    }
    let mut written = 0;
    for m in metrics {
        let Some(chart) = chart_of(m, &series) else {
            continue;
        };
        let stat = series
            .iter()
            .find(|s| s.metric == m && history::headline_statistic(&s.statistic))
            .map_or("p50", |s| s.statistic.as_str());
        let stem = history::chart_stem(m, stat);
        let svg = crate::report::charts::history_svg(&chart)?;
        std::fs::write(charts.join(format!("{stem}.svg")), svg)?;
        let png = crate::report::charts::history_png(&chart)?;
        std::fs::write(charts.join(format!("{stem}.png")), png)?;
        written += 2;
    }
    let md = history::markdown(&entries, &series, &charts.display().to_string());
    std::fs::write(out.join("history.md"), &md)?;
    errln!(
        "history: {} gate runs, {} series, {} with a change point; {written} charts in {}, Markdown in {}",
        entries.len(),
        series.len(),
        series.iter().filter(|s| s.change_point.is_some()).count(),
        charts.display(),
        out.join("history.md").display()
    );
    match args.format.as_str() {
        "md" => out!("{md}"),
        "json" => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "entries": entries.len(),
                "series": series,
            }))?
        ),
        _ => {}
    }
    Ok(EXIT_OK)
}
