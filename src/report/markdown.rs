//! `report.md`: GitHub-flavoured Markdown that reads well in `$GITHUB_STEP_SUMMARY`, a PR
//! comment and a repository. Pure: model + chart links in, text out. Every string that came
//! from a file is escaped (no raw HTML, no broken tables).

use std::fmt::Write as _;

use super::charts::ChartKind;
use super::model::{Bars, Model, Table};
use super::style::md_escape;

/// Renders the report. `charts` pairs each chart with its relative link (`charts/ttft_cdf.svg`),
/// or `None` when no image file was written for it.
pub fn render(model: &Model, charts: &[(ChartKind, Option<String>)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", md_escape(&model.title));
    let _ = writeln!(out, "{}\n", md_escape(&model.subtitle));
    for n in &model.notices {
        let _ = writeln!(out, "> **Warning:** {}\n", md_escape(n));
    }
    out.push_str("## Results\n\n");
    table(&mut out, &model.headline);
    let _ = writeln!(out, "\n{}\n", md_escape(&model.headline_note));
    if let Some(t) = &model.attribution {
        out.push_str("### Server and transport (p50)\n\n");
        table(&mut out, t);
        out.push('\n');
    }
    for n in &model.attribution_notes {
        let _ = writeln!(out, "- {}", md_escape(n));
    }
    if !model.attribution_notes.is_empty() {
        out.push('\n');
    }
    if !model.sample_notes.is_empty() {
        out.push_str("Small samples (nearest rank: pq is the maximum when n < 1/(1 − q)):\n\n");
        for n in &model.sample_notes {
            let _ = writeln!(out, "- {}", md_escape(n));
        }
        out.push('\n');
    }
    if let Some(t) = &model.versus_first {
        out.push_str("### Change against the first run (p50)\n\n");
        table(&mut out, t);
        out.push('\n');
    }
    out.push_str("## Failures\n\n");
    match &model.failures {
        Some(t) => table(&mut out, t),
        None => out.push_str("No measured request failed.\n"),
    }
    out.push_str("\n## Charts\n\n");
    for b in &model.bars {
        let _ = writeln!(out, "### {}\n\n{}", md_escape(&b.title), mermaid(b));
    }
    if charts.iter().any(|(_, l)| l.is_some()) {
        out.push_str("The charts below are image files next to this report (`charts/`): their links are relative, so they show in a repository or an unpacked artifact but not in a GitHub step summary, where the Mermaid charts above render.\n\n");
    }
    let mut any = false;
    for (kind, link) in charts {
        let Some(link) = link else { continue };
        any = true;
        let _ = writeln!(
            out,
            "### {}\n\n![{}]({})\n\n{}\n",
            kind.title(),
            kind.title(),
            link,
            kind.caption()
        );
    }
    if !any {
        out.push_str("No chart files were written (pass `--format svg` or `png`).\n\n");
    }
    out.push_str("## Provenance\n\n");
    table(&mut out, &model.provenance);
    out.push_str("\n## Definitions\n\n");
    for (term, def) in &model.definitions {
        let _ = writeln!(out, "- **{}**: {}", md_escape(term), md_escape(def));
    }
    out
}

/// A Mermaid `xychart-beta` bar chart (GitHub renders Mermaid in step summaries, issues and
/// PR comments). Labels lose the characters Mermaid's quoted strings cannot hold.
pub fn mermaid(b: &Bars) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '"' | '`' | '\n' | '\r' | '[' | ']' | ';'))
            .collect()
    };
    let labels: Vec<String> = b
        .labels
        .iter()
        .map(|l| format!("\"{}\"", clean(l)))
        .collect();
    let values: Vec<String> = b.values.iter().map(|v| format!("{v:.3}")).collect();
    let max = b.values.iter().copied().fold(0.0, f64::max);
    format!(
        "```mermaid\nxychart-beta\n    title \"{}\"\n    x-axis [{}]\n    y-axis \"{}\" 0 --> {}\n    bar [{}]\n```\n",
        clean(&b.title),
        labels.join(", "),
        clean(&b.y_label),
        super::charts::tick((max * 1.15).max(1e-3)),
        values.join(", ")
    )
}

fn table(out: &mut String, t: &Table) {
    let row = |cells: &[String]| {
        let escaped: Vec<String> = cells.iter().map(|c| md_escape(c)).collect();
        format!("| {} |\n", escaped.join(" | "))
    };
    out.push_str(&row(&t.header));
    let align: Vec<&str> = t
        .numeric
        .iter()
        .map(|n| if *n { "---:" } else { ":---" })
        .collect();
    let _ = writeln!(out, "| {} |", align.join(" | "));
    for r in &t.rows {
        out.push_str(&row(r));
    }
}
