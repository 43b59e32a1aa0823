//! The sweep report: `report.md` and a self-contained `report.html` at the sweep level, with
//! the sweep table (knee marked), the knee rule, and the latency / throughput / goodput
//! charts (`charts/sweep_*.svg|png`), one line per target × transport.
//!
//! Renderers are pure; only [`render_sweep`] reads `sweep.json` and writes files. Each
//! point's own report is `spark-bench report <sweep>/points/NN-…`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::charts::sweep::{available, SweepChart};
use super::style::{html_escape, md_escape};
use crate::recorder::sweep::{no_knee_reason, sweep_table, SweepSummary};

/// `report.md` of a sweep; `ext` is the chart file extension to link (`svg`).
pub fn markdown(s: &SweepSummary, charts: &[SweepChart], ext: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Sweep: {} ({})\n",
        md_escape(&s.scenario),
        md_escape(&s.spec)
    );
    let _ = writeln!(out, "- load: {}", md_escape(&s.load_note));
    let _ = writeln!(out, "- SLOs: {}", md_escape(&s.slo));
    let _ = writeln!(out, "- {}", md_escape(&s.knee_rule));
    let _ = writeln!(
        out,
        "- points: {} run directories under `points/`\n",
        s.points.len()
    );
    out.push_str("## Knees\n\n| target | transport | knee | why the next point is saturated |\n|---|---|---|---|\n");
    for c in &s.curves {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            md_escape(&c.target),
            md_escape(&c.transport),
            c.knee_value.map_or("not reached".to_string(), |v| format!(
                "{} {}",
                s.param,
                crate::recorder::sweep::num(v)
            )),
            md_escape(&c.knee_reason.clone().unwrap_or_else(|| no_knee_reason(c)))
        );
    }
    if let Some(w) = harness_warning(s) {
        let _ = writeln!(out, "\n> **Warning:** {}", md_escape(&w));
    }
    let _ = writeln!(out, "\n## Points\n\n```text\n{}```\n", sweep_table(s));
    for k in charts {
        let _ = writeln!(
            out,
            "## {}\n\n![{}](charts/{}.{ext})\n",
            k.title(),
            k.title(),
            k.file_stem()
        );
    }
    out
}

/// The load points whose runs were `harness-bound`, as one sentence; `None` when none was.
fn harness_warning(s: &SweepSummary) -> Option<String> {
    let mut values: Vec<f64> = s
        .curves
        .iter()
        .flat_map(|c| c.points.iter().filter(|p| p.harness_bound).map(|p| p.value))
        .collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    if values.is_empty() {
        return None;
    }
    let list: Vec<String> = values
        .iter()
        .map(|v| crate::recorder::sweep::num(*v))
        .collect();
    Some(format!(
        "the harness could not keep up at {} = {} (marked HARNESS-BOUND below; each point's summary.json → harness says why). Those points show the harness's limits, not the target's, and a knee at or just before them may be the harness's. Run `spark-bench calibrate`, lower the load or use a quieter machine.",
        s.param,
        list.join(", ")
    ))
}

/// `report.html` of a sweep, with the SVG charts inline.
pub fn html(s: &SweepSummary, svgs: &[(SweepChart, String)]) -> String {
    let mut out = String::new();
    out.push_str("<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">");
    let _ = write!(out, "<title>Sweep {}</title>", html_escape(&s.scenario));
    out.push_str("<style>body{font-family:sans-serif;max-width:1000px;margin:auto;padding:1em}pre{overflow-x:auto;font-size:13px}svg{width:100%;height:auto}</style></head><body>");
    let _ = write!(
        out,
        "<h1>Sweep: {} ({})</h1><ul>",
        html_escape(&s.scenario),
        html_escape(&s.spec)
    );
    for line in [&s.load_note, &format!("SLOs: {}", s.slo), &s.knee_rule] {
        let _ = write!(out, "<li>{}</li>", html_escape(line));
    }
    out.push_str("</ul>");
    if let Some(w) = harness_warning(s) {
        let _ = write!(
            out,
            "<p style=\"background:#fff3cd;padding:.5em\"><strong>Warning:</strong> {}</p>",
            html_escape(&w)
        );
    }
    out.push_str("<h2>Points</h2><pre>");
    out.push_str(&html_escape(&sweep_table(s)));
    out.push_str("</pre>");
    for (k, svg) in svgs {
        let _ = write!(out, "<h2>{}</h2>{svg}", html_escape(k.title()));
    }
    out.push_str("</body></html>\n");
    out
}

/// Reads `dir/sweep.json` and writes `report.md`, `report.html` and `charts/sweep_*.svg|png`
/// into `dir`; returns the written paths.
pub fn render_sweep(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let s = crate::store::read_sweep(dir)?;
    let kinds = available(&s);
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut svgs = Vec::new();
    for k in &kinds {
        let svg = super::charts::sweep_svg(*k, &s)?;
        files.push((
            PathBuf::from(format!("charts/{}.svg", k.file_stem())),
            svg.clone().into_bytes(),
        ));
        files.push((
            PathBuf::from(format!("charts/{}.png", k.file_stem())),
            super::charts::sweep_png(*k, &s)?,
        ));
        svgs.push((*k, svg));
    }
    files.push((
        PathBuf::from(super::MARKDOWN_FILE),
        markdown(&s, &kinds, "svg").into_bytes(),
    ));
    files.push((
        PathBuf::from(super::HTML_FILE),
        html(&s, &svgs).into_bytes(),
    ));
    let mut written = Vec::new();
    for (rel, bytes) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
