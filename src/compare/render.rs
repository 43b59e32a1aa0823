//! Renderings of a [`Comparison`]: a terminal table, Markdown for `$GITHUB_STEP_SUMMARY` and
//! PR comments, and the verdict JSON. Pure: data in, `String` out. Regressions come first
//! everywhere; inconclusive rows come next and are never folded into "passed" silently.
//!
//! Owns: the text of the verdict and the verdict JSON shape (schema_version
//! [`VERDICT_SCHEMA_VERSION`]; documented in docs/gate.md).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::verdict::{fmt_change, Row, Verdict};
use super::{Comparison, Counts, DispatchLag, Outcome, RunLabel, VERDICT_SCHEMA_VERSION};

/// Output format of `compare` (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Terminal table.
    Text,
    /// Markdown.
    Markdown,
    /// Verdict JSON.
    Json,
}

impl Format {
    /// Parses `--format` (clap's value parser): `text` (or `table`), `md` (or `markdown`),
    /// `json`, case-insensitive.
    pub fn parse(s: &str) -> Result<Format, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" | "table" => Ok(Format::Text),
            "md" | "markdown" => Ok(Format::Markdown),
            "json" => Ok(Format::Json),
            other => Err(format!("{other:?} is not a format; use text, md or json")),
        }
    }

    /// Renders a comparison.
    pub fn render(self, c: &Comparison) -> String {
        match self {
            Format::Text => text(c),
            Format::Markdown => markdown(c),
            Format::Json => json(c),
        }
    }
}

fn fmt_value(v: Option<f64>, unit: &str) -> String {
    let Some(v) = v else {
        return "-".to_string();
    };
    let num = if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if unit == "%" {
        format!("{num}%")
    } else {
        format!("{num} {unit}")
    }
}

fn fmt_ci(r: &Row) -> String {
    match (r.ci_low, r.ci_high) {
        (Some(l), Some(h)) => format!(
            "[{}, {}]",
            fmt_change(l, r.change_unit),
            fmt_change(h, r.change_unit)
        ),
        _ => "-".to_string(),
    }
}

fn fmt_band(r: &Row) -> String {
    format!(
        "[{}, {}]",
        fmt_change(r.band_low, r.change_unit),
        fmt_change(r.band_high, r.change_unit)
    )
}

fn short_reason(r: &Row) -> &'static str {
    match r.verdict {
        Verdict::Inconclusive if r.ci_low.is_none() => {
            if r.reason.starts_with("no samples") {
                "no samples on one side"
            } else {
                "undefined"
            }
        }
        Verdict::NotGated if r.dispatch_lag_ms.is_some() => "not gated: harness dispatch lag",
        Verdict::NotGated if r.reason.contains("floor") => "not gated: below the floor",
        Verdict::NotGated => "not gated: too few samples",
        Verdict::Inconclusive => "CI straddles band edge",
        Verdict::Regressed => "worse beyond band",
        Verdict::Improved => "better beyond band",
        Verdict::NoChange => "within band",
    }
}

/// The one-line headline: the outcome first (REGRESSION, FAILED, NO DECISION, PASS ⚠️,
/// PASS ✅), then the counts, then any dispatch lag the rows were judged against, then any
/// harness-bound side.
pub fn headline(c: &Comparison) -> String {
    let n = c.counts();
    let total = c.rows.len();
    let gated = total - n.not_gated;
    let detail = format!(
        "{} regressed, {} inconclusive, {} improved, {} no change (of {gated} gated; {} not gated: too few samples)",
        n.regressed,
        n.inconclusive,
        n.improved,
        n.no_change,
        n.not_gated - n.not_gated_lag
    );
    let mut line = match c.outcome() {
        Outcome::Regression => format!("REGRESSION ❌: {detail}"),
        Outcome::Failed => format!("FAILED (--fail-on-inconclusive): {detail}"),
        Outcome::NoDecision if total == 0 => {
            "NO DECISION: no metric had samples in both runs".to_string()
        }
        Outcome::NoDecision => format!(
            "NO DECISION: not one of {total} rows could be decided ({} inconclusive, {} not gated: too few samples); this gate cannot judge the change",
            n.inconclusive, n.not_gated
        ),
        Outcome::PassInconclusive => format!("PASS ⚠️ no regression, but not every gated row decided: {detail}"),
        Outcome::Pass => format!("PASS ✅ every gated row decided, none regressed: {detail}"),
    };
    if let Some(lag) = &c.dispatch_lag {
        line.push_str(&format!(" ({})", lag.clause()));
    }
    if !c.harness_bound.is_empty() {
        line.push_str(&format!(
            " — ⚠️ HARNESS-BOUND: {} run(s) judged themselves limited by the client, not the target (see below)",
            c.harness_bound.len()
        ));
    }
    line
}

fn settings_line(c: &Comparison) -> String {
    let b = &c.settings.bootstrap;
    let th = c.settings.thresholds.describe();
    let th = if th.is_empty() {
        "none (noise bands only)".to_string()
    } else {
        th.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{:.0}% bootstrap CI ({} resamples, seed {:#x}); thresholds: {th}",
        b.confidence * 100.0,
        b.resamples,
        b.seed
    )
}

/// The terminal table: headline, runs, every row (regressions first), notes.
pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "spark-bench compare: {}", headline(c));
    for h in &c.harness_bound {
        let _ = writeln!(out, "  ⚠️ {h}");
    }
    for r in c.dispatch_lag.iter().flat_map(|l| &l.runs) {
        let _ = writeln!(out, "  note: {}", r.note());
    }
    let _ = writeln!(
        out,
        "  baseline:  {} ({})",
        c.baseline.dir, c.baseline.run_id
    );
    let _ = writeln!(
        out,
        "  candidate: {} ({})",
        c.candidate.dir, c.candidate.run_id
    );
    let _ = writeln!(out, "  {}", settings_line(c));
    let header = [
        "verdict",
        "cell",
        "metric",
        "stat",
        "baseline",
        "candidate",
        "change",
        "CI",
        "band",
        "n (b/c)",
        "why",
    ];
    let mut table: Vec<[String; 11]> = vec![header.map(String::from)];
    for r in c.rows_for_display() {
        table.push([
            r.verdict.as_str().to_uppercase(),
            r.cell(),
            r.metric.name().to_string(),
            r.statistic.name().to_string(),
            fmt_value(r.baseline, r.unit),
            fmt_value(r.candidate, r.unit),
            r.change
                .map_or("-".to_string(), |v| fmt_change(v, r.change_unit)),
            fmt_ci(r),
            fmt_band(r),
            format!("{}/{}", r.n_baseline, r.n_candidate),
            short_reason(r).to_string(),
        ]);
    }
    let mut widths = [0usize; 11];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    out.push('\n');
    for row in &table {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            let pad = w - cell.chars().count();
            // Numbers right-aligned, words left-aligned.
            if (4..=6).contains(&i) {
                let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
            } else {
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for note in &c.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

fn md_table(rows: &[&Row], with_reason: bool) -> String {
    let mut out = String::from(
        "| verdict | cell | metric | baseline | candidate | change | CI | band | n (b/c) |",
    );
    out.push_str(if with_reason { " why |\n" } else { "\n" });
    out.push_str("|---|---|---|--:|--:|--:|---|---|--:|");
    out.push_str(if with_reason { "---|\n" } else { "\n" });
    for r in rows {
        let icon = match r.verdict {
            Verdict::Regressed => "❌ regressed",
            Verdict::Inconclusive => "⚠️ inconclusive",
            Verdict::Improved => "✅ improved",
            Verdict::NoChange => "no change",
            Verdict::NotGated => "not gated",
        };
        let _ = write!(
            out,
            "| {icon} | {} | {} {} | {} | {} | {} | {} | {} | {}/{} |",
            r.cell(),
            r.metric.name(),
            r.statistic.name(),
            fmt_value(r.baseline, r.unit),
            fmt_value(r.candidate, r.unit),
            r.change
                .map_or("-".to_string(), |v| fmt_change(v, r.change_unit)),
            fmt_ci(r),
            fmt_band(r),
            r.n_baseline,
            r.n_candidate
        );
        if with_reason {
            let _ = write!(out, " {} |", r.reason.replace('|', "\\|"));
        }
        out.push('\n');
    }
    out
}

fn md_run(label: &str, r: &RunLabel) -> String {
    format!(
        "- {label}: `{}` (run `{}`, status {}, link `{}`, scenario `{}`)\n",
        r.dir, r.run_id, r.status, r.link, r.scenario_hash
    )
}

/// The compact line of rows the dispatch-lag rule left ungated (empty when none).
fn md_lagged(rows: &[&Row]) -> String {
    let list: Vec<String> = rows
        .iter()
        .filter(|r| r.verdict == Verdict::NotGated)
        .filter_map(|r| {
            r.dispatch_lag_ms.map(|lag| {
                format!(
                    "{} {} {} (lag {lag:.1} ms)",
                    r.cell(),
                    r.metric.name(),
                    r.statistic.name()
                )
            })
        })
        .collect();
    if list.is_empty() {
        return String::new();
    }
    format!(
        "**Not gated: the harness's dispatch lag ({}):** {}. A run harness-bound on dispatch lag \
         alone had a lag over {:.0}% of these rows' bands (docs/compare-gate.md, \"Dispatch lag\").\n\n",
        list.len(),
        list.join("; "),
        super::gate::LAG_SHARE * 100.0
    )
}

/// Markdown for `$GITHUB_STEP_SUMMARY` or a PR comment: a one-line headline, the
/// regressions, the inconclusive rows, then every row in a collapsed `<details>`, and links
/// to the candidate's report and charts when it has them.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    let icon = match c.outcome() {
        Outcome::Regression | Outcome::Failed => "❌",
        Outcome::NoDecision => "⛔",
        Outcome::PassInconclusive => "⚠️",
        Outcome::Pass => "✅",
    };
    let _ = writeln!(out, "## {icon} spark-bench: {}\n", headline(c));
    for h in &c.harness_bound {
        let _ = writeln!(out, "> **⚠️ Harness-bound:** {h}\n");
    }
    for r in c.dispatch_lag.iter().flat_map(|l| &l.runs) {
        let _ = writeln!(out, "> **Note (dispatch lag):** {}\n", r.note());
    }
    let rows = c.rows_for_display();
    let regressed: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.verdict == Verdict::Regressed)
        .collect();
    // Inconclusive rows get a table; rows the power rule left ungated get one compact line,
    // so they are visible without drowning the table.
    let inconclusive: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.verdict == Verdict::Inconclusive)
        .collect();
    let undecided: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.verdict == Verdict::NotGated && r.dispatch_lag_ms.is_none())
        .collect();
    if !regressed.is_empty() {
        let _ = writeln!(out, "### Regressions\n\n{}", md_table(&regressed, true));
    }
    if !inconclusive.is_empty() {
        let _ = writeln!(
            out,
            "### Inconclusive (not failing the gate{})\n\n{}",
            if c.settings.fail_on_inconclusive {
                "… except with --fail-on-inconclusive, which is on"
            } else {
                ""
            },
            md_table(&inconclusive, true)
        );
    }
    if !undecided.is_empty() {
        let list: Vec<String> = undecided
            .iter()
            .map(|r| format!("{} {} {}", r.cell(), r.metric.name(), r.statistic.name()))
            .collect();
        let _ = writeln!(
            out,
            "**Not gated: too few samples ({}):** {}. A row is gated only when its samples can \
             decide at its band (docs/compare-gate.md, \"The power rule\"); run more sessions to gate on these.\n",
            undecided.len(),
            list.join("; ")
        );
    }
    out.push_str(&md_lagged(&rows));
    for note in &c.notes {
        let _ = writeln!(out, "> **Note:** {note}\n");
    }
    let _ = writeln!(
        out,
        "<details><summary>All {} comparisons</summary>\n\n{}\n{}\n{}\n{}\n</details>\n",
        c.rows.len(),
        md_table(&rows, false),
        md_run("Baseline", &c.baseline),
        md_run("Candidate", &c.candidate),
        settings_line(c)
    );
    out.push_str(&mermaid_changes(c));
    if !c.candidate.charts.is_empty() {
        let names: Vec<String> = c
            .candidate
            .charts
            .iter()
            .map(|p| format!("`{p}`"))
            .collect();
        let _ = writeln!(
            out,
            "Candidate report and charts (files in `{}`): {}. They are not embedded: GitHub's \
             job summary and PR comments strip inline SVG, do not render `data:` images, and \
             resolve relative paths against nothing. Publish them with `actions/upload-artifact` \
             (scripts/ci-regression.sh leaves them under `target/ci-regression/results/`), or push \
             them to a branch or Pages site and link their URLs.\n",
            c.candidate.dir,
            names.join(" · ")
        );
    }
    out
}

/// A Mermaid `xychart-beta` (GitHub renders Mermaid blocks in job summaries, issues and PR
/// comments): one bar per decided median/mean/rate row, the change in the worse direction
/// in percent (or points), and a line at the worse edge of its band, so a bar above the line
/// is a change beyond the noise. Empty when no row has a change.
fn mermaid_changes(c: &Comparison) -> String {
    let rows: Vec<&Row> = c
        .rows
        .iter()
        .filter(|r| r.change.is_some())
        .filter(|r| {
            matches!(
                r.statistic,
                super::Statistic::P50 | super::Statistic::Mean | super::Statistic::Rate
            )
        })
        .take(24)
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let worse = |r: &Row, v: f64| if r.metric.higher_is_better() { -v } else { v };
    let bars: Vec<f64> = rows
        .iter()
        .map(|r| worse(r, r.change.unwrap_or(0.0)) * 100.0)
        .collect();
    let edges: Vec<f64> = rows
        .iter()
        .map(|r| {
            100.0
                * if r.metric.higher_is_better() {
                    -r.band_low
                } else {
                    r.band_high
                }
        })
        .collect();
    let lo = bars.iter().chain(&edges).fold(0.0f64, |a, b| a.min(*b));
    let hi = bars.iter().chain(&edges).fold(0.0f64, |a, b| a.max(*b));
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "\"{} {} {}\"",
                r.metric.name(),
                r.statistic.name(),
                r.transport
            )
        })
        .collect();
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "```mermaid\nxychart-beta\n    title \"Change in the worse direction (%, pp for error rate); line: band edge\"\n    x-axis [{}]\n    y-axis \"worse by (%)\" {:.0} --> {:.0}\n    bar [{}]\n    line [{}]\n```\n\n",
        labels.join(", "),
        (lo - 2.0).floor(),
        (hi + 2.0).ceil(),
        fmt(&bars),
        fmt(&edges)
    )
}

#[derive(Serialize)]
struct VerdictJson<'a> {
    schema_version: u32,
    outcome: Outcome,
    verdict: Verdict,
    passed: bool,
    headline: String,
    counts: Counts,
    baseline: &'a RunLabel,
    candidate: &'a RunLabel,
    settings: JsonSettings,
    harness_bound: &'a [String],
    dispatch_lag: Option<&'a DispatchLag>,
    notes: &'a [String],
    rows: Vec<&'a Row>,
}

#[derive(Serialize)]
struct JsonSettings {
    confidence: f64,
    resamples: u32,
    seed: u64,
    fail_on_inconclusive: bool,
    metrics: Vec<&'static str>,
    thresholds: BTreeMap<String, String>,
}

/// The verdict JSON (pretty-printed, trailing newline). Rows in display order.
pub fn json(c: &Comparison) -> String {
    let s = &c.settings;
    let v = VerdictJson {
        schema_version: VERDICT_SCHEMA_VERSION,
        outcome: c.outcome(),
        verdict: c.overall(),
        passed: !c.fails(),
        headline: headline(c),
        counts: c.counts(),
        baseline: &c.baseline,
        candidate: &c.candidate,
        settings: JsonSettings {
            confidence: s.bootstrap.confidence,
            resamples: s.bootstrap.resamples,
            seed: s.bootstrap.seed,
            fail_on_inconclusive: s.fail_on_inconclusive,
            metrics: s.metrics.iter().map(|m| m.name()).collect(),
            thresholds: s.thresholds.describe().into_iter().collect(),
        },
        harness_bound: &c.harness_bound,
        dispatch_lag: c.dispatch_lag.as_ref(),
        notes: &c.notes,
        rows: c.rows_for_display(),
    };
    // Every field is a plain number, string, list or map: serializing cannot fail, but a
    // failure would still produce valid JSON rather than a panic.
    let mut s = serde_json::to_string_pretty(&v)
        .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialize the verdict: {e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare, RunSamples, Settings};
    use crate::vocab::RequestRecord;

    fn run(scale: f64, n: usize) -> RunSamples {
        let mut s = RunSamples::new();
        for i in 0..n {
            let ttft = (20.0 + (i % 7) as f64) * scale;
            s.add_request(&RequestRecord {
                target: "sim-wafer".into(),
                transport: crate::vocab::TransportKind::Http,
                first_token_ns: Some((ttft * 1e6) as u64),
                ..Default::default()
            });
        }
        s
    }

    #[test]
    fn renderings_put_regressions_first() {
        let settings = Settings {
            metrics: vec![crate::compare::GateMetric::Ttft],
            ..Settings::default()
        };
        let label = |d: &str| RunLabel {
            dir: d.into(),
            run_id: format!("{d}-id"),
            charts: vec!["report.md".into()],
            ..Default::default()
        };
        // 2,000 requests a side: enough for the p50 row to be gated (the power rule).
        let c = compare(
            &run(1.0, 2000),
            &run(1.2, 2000),
            &settings,
            label("a"),
            label("b"),
        );
        assert!(c.fails());
        assert_eq!(c.overall(), Verdict::Regressed);
        let t = text(&c);
        assert!(t.starts_with("spark-bench compare: REGRESSION"), "{t}");
        let first_row = t
            .lines()
            .find(|l| l.starts_with("REGRESSED") || l.starts_with("INCONCLUSIVE"))
            .unwrap();
        assert!(first_row.starts_with("REGRESSED"), "{t}");
        let md = markdown(&c);
        assert!(md.starts_with("## ❌ spark-bench: REGRESSION"), "{md}");
        assert!(md.find("### Regressions").unwrap() < md.find("<details>").unwrap());
        // Relative links render broken on GitHub: files are named, and a Mermaid chart is
        // embedded instead.
        assert!(!md.contains("](b/report.md)"), "{md}");
        assert!(
            md.contains("`report.md`") && md.contains("actions/upload-artifact"),
            "{md}"
        );
        assert!(md.contains("```mermaid\nxychart-beta\n"), "{md}");
        assert!(md.contains("bar [20.0"), "{md}");
        // Confirmation: a re-run that regresses the same way keeps the failure; one that
        // does not turns it into "inconclusive".
        let again = compare(
            &run(1.0, 200),
            &run(1.2, 200),
            &settings,
            label("a"),
            label("c"),
        );
        let gone = compare(
            &run(1.0, 200),
            &run(1.0, 200),
            &settings,
            label("a"),
            label("d"),
        );
        let mut kept = c.clone();
        kept.confirm_with(std::slice::from_ref(&again));
        assert!(kept.fails(), "{:?}", kept.rows);
        assert!(
            kept.rows[0]
                .reason
                .contains("reproduced on 1 confirmation re-run"),
            "{}",
            kept.rows[0].reason
        );
        let mut dropped = c.clone();
        dropped.confirm_with(&[again, gone]);
        assert!(!dropped.fails());
        assert!(
            dropped.rows[0]
                .reason
                .contains("NOT reproduced on re-run 2"),
            "{}",
            dropped.rows[0].reason
        );
        assert!(dropped
            .notes
            .iter()
            .any(|n| n.contains("0 regression(s) reproduced")));
        let j: serde_json::Value = serde_json::from_str(&json(&c)).unwrap();
        assert_eq!(j["verdict"], "regressed");
        assert_eq!(j["passed"], false);
        assert_eq!(j["rows"][0]["verdict"], "regressed");
        assert_eq!(j["rows"][0]["metric"], "ttft");
        assert_eq!(j["rows"][0]["statistic"], "p50");
        assert_eq!(j["rows"][0]["change_unit"], "relative");
        let same = compare(
            &run(1.0, 200),
            &run(1.0, 200),
            &settings,
            label("a"),
            label("b"),
        );
        assert!(!same.fails());
        assert!(
            text(&same).starts_with("spark-bench compare: PASS"),
            "{}",
            text(&same)
        );
    }
}
