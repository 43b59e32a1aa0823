//! The sweep report: `report.md` and a self-contained `report.html` at the sweep level, with
//! the sweep table (knee marked), the knee rule, and the latency / throughput / goodput
//! charts (`charts/sweep_*.svg|png`), one line per target × transport.
//!
//! Renderers are pure; only [`render_sweep`] reads `sweep.json` and writes files. Each
//! point's own report is `spark-bench report <sweep>/points/NN-…`. The HTML uses the run
//! report's stylesheet (`html::CSS`) and renders the text's code spans as `<code>`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::charts::sweep::{available, SweepChart};
use super::style::{html_escape, md_escape};
use crate::recorder::sweep::{no_knee_reason, slo_line, sweep_table, SweepSummary};

/// The note under the goodput chart: what a crossed circle means, and each curve's SLO line.
pub fn goodput_note(s: &SweepSummary) -> String {
    let mut out = "Goodput is vLLM's (`vllm bench serve --goodput`): requests per second that succeeded and met every per-request SLO. A percentile SLO (`p90<=50ms`) judges a whole load point: a point that missed one is drawn as a crossed circle (legend: missed a percentile SLO); its good req/s still counts the per-request SLOs only and is not set to 0.".to_string();
    for c in &s.curves {
        if let Some(line) = slo_line(&s.param, c) {
            let _ = write!(out, " {} · {}: {line}.", c.target, c.transport);
        }
    }
    out
}

/// Plain text with `code spans` as HTML: escaped once, code spans in `<code>`.
pub fn inline_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let ticks = text.matches('`').count();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 && i < ticks {
            let _ = write!(out, "<code>{}</code>", html_escape(part));
        } else {
            // An unpaired backtick stays as it is.
            if i % 2 == 1 {
                out.push('`');
            }
            out.push_str(&html_escape(part));
        }
    }
    out
}

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
        if *k == SweepChart::Goodput {
            let _ = writeln!(out, "{}\n", goodput_note(s));
        }
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

/// `report.html` of a sweep, with the SVG charts inline, in the run report's style.
pub fn html(s: &SweepSummary, svgs: &[(SweepChart, String)]) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
    let _ = writeln!(out, "<title>Sweep {}</title>", html_escape(&s.scenario));
    let _ = writeln!(
        out,
        "<style>{}pre {{ overflow-x: auto; font-size: 13px; border: 1px solid var(--line); border-radius: 6px; padding: 8px; }}\ncode {{ font-size: 0.92em; background: #f6f8fa; padding: 0 0.2em; border-radius: 3px; }}</style>\n</head>\n<body>\n<main>",
        super::html::CSS
    );
    let _ = writeln!(
        out,
        "<h1>Sweep: {} ({})</h1>\n<ul class=\"note\">",
        html_escape(&s.scenario),
        inline_html(&s.spec)
    );
    for line in [
        format!("load: {}", s.load_note),
        format!("SLOs: {}", s.slo),
        s.knee_rule.clone(),
        format!("points: {} run directories under `points/`", s.points.len()),
    ] {
        let _ = writeln!(out, "<li>{}</li>", inline_html(&line));
    }
    out.push_str("</ul>\n");
    if let Some(w) = harness_warning(s) {
        let _ = writeln!(
            out,
            "<div class=\"notice\" role=\"note\"><strong>Warning:</strong> {}</div>",
            inline_html(&w)
        );
    }
    out.push_str("<h2>Knees</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th scope=\"col\">target</th><th scope=\"col\">transport</th><th scope=\"col\">knee</th><th scope=\"col\">why the next point is saturated</th></tr></thead>\n<tbody>\n");
    for c in &s.curves {
        let knee = c.knee_value.map_or("not reached".to_string(), |v| {
            format!("{} {}", s.param, crate::recorder::sweep::num(v))
        });
        let why = c.knee_reason.clone().unwrap_or_else(|| no_knee_reason(c));
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td style=\"white-space:normal\">{}</td></tr>",
            html_escape(&c.target),
            html_escape(&c.transport),
            html_escape(&knee),
            inline_html(&why)
        );
    }
    out.push_str("</tbody></table></div>\n<h2>Points</h2>\n<pre>");
    out.push_str(&html_escape(&sweep_table(s)));
    out.push_str("</pre>\n<h2 id=\"charts\">Charts</h2>\n");
    for (k, svg) in svgs {
        let _ = write!(
            out,
            "<figure id=\"chart-{}\">\n<h3>{}</h3>\n<div class=\"chart\">{}</div>\n",
            k.file_stem(),
            html_escape(k.title()),
            super::html::responsive_svg(svg, k.title())
        );
        if *k == SweepChart::Goodput {
            let _ = writeln!(
                out,
                "<figcaption>{}</figcaption>",
                inline_html(&goodput_note(s))
            );
        }
        out.push_str("</figure>\n");
    }
    out.push_str("</main>\n</body>\n</html>\n");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::sweep::{Curve, CurvePoint, SWEEP_SCHEMA_VERSION};

    /// Two curves at concurrency 1, 2, 4 under `ttft p90<=50ms`; `a · http` misses it at 4.
    fn fixture() -> SweepSummary {
        let curve = |transport: &str, miss_at: Option<f64>| Curve {
            target: "a".into(),
            transport: transport.into(),
            points: [1.0, 2.0, 4.0]
                .iter()
                .map(|&v| CurvePoint {
                    value: v,
                    requests: 20,
                    ok: 20,
                    error_rate: 0.0,
                    achieved_req_s: v * 5.0,
                    output_tok_s: v * 50.0,
                    ttft_ms: [10.0 * v, 20.0 * v, 30.0 * v],
                    tpot_ms: [1.0; 3],
                    e2e_ms: [100.0; 3],
                    good_req_s: Some(v * 4.0),
                    good_output_tok_s: Some(v * 40.0),
                    slo_met: Some(miss_at != Some(v)),
                    harness_bound: false,
                })
                .collect(),
            knee: None,
            knee_value: None,
            knee_reason: None,
        };
        SweepSummary {
            schema_version: SWEEP_SCHEMA_VERSION,
            sweep_id: "s".into(),
            scenario: "snake <game>".into(),
            param: "concurrency".into(),
            spec: "concurrency=1,2,4".into(),
            load_note: "closed loop".into(),
            knee_rule: crate::recorder::sweep::knee_rule(),
            slo: "ttft p90<=50ms".into(),
            points: Vec::new(),
            curves: vec![curve("http", Some(4.0)), curve("ws", None)],
        }
    }

    /// `cx` of every `<circle>` of radius `r` in an SVG.
    fn circles(svg: &str, r: i32) -> Vec<f64> {
        svg.split("<circle")
            .skip(1)
            .filter(|c| c.contains(&format!(" r=\"{r}\"")))
            .filter_map(|c| c.split("cx=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect()
    }

    #[test]
    fn the_goodput_chart_marks_the_point_that_missed_a_percentile_slo() {
        use crate::report::charts::sweep::MISS_RADIUS;
        let s = fixture();
        let svg = crate::report::charts::sweep_svg(SweepChart::Goodput, &s).unwrap();
        let missed = circles(&svg, MISS_RADIUS);
        // One missed point (a white disc under a ring: two circles at one x).
        assert_eq!(missed.len(), 2, "{missed:?}");
        assert_eq!(missed[0], missed[1]);
        // Series 0 (`a · http`) draws met points as r=4 discs: at 1 and 2, left of the miss.
        let met = circles(&svg, 4);
        assert_eq!(met.len(), 2, "{met:?}");
        assert!(met.iter().all(|x| *x < missed[0]), "{met:?} vs {missed:?}");
        assert!(svg.contains("missed a percentile SLO"));
        // Without a miss: no miss marker and no legend entry.
        let mut ok = fixture();
        ok.curves.truncate(0);
        ok.curves.push(fixture().curves[1].clone());
        let svg = crate::report::charts::sweep_svg(SweepChart::Goodput, &ok).unwrap();
        assert!(circles(&svg, MISS_RADIUS).is_empty());
        assert!(!svg.contains("missed a percentile SLO"));
        // Other charts do not mark misses.
        let ttft = crate::report::charts::sweep_svg(SweepChart::Ttft, &s).unwrap();
        assert!(circles(&ttft, MISS_RADIUS).is_empty());
    }

    #[test]
    fn the_sweep_report_says_where_the_slo_was_missed_and_renders_code_spans() {
        let s = fixture();
        let md = markdown(&s, &[SweepChart::Goodput], "svg");
        assert!(md.contains("SLO missed"), "{md}");
        assert!(
            md.contains("percentile SLO missed at concurrency = 4.00")
                && md.contains("highest load meeting every SLO: concurrency = 2.00"),
            "{md}"
        );
        let svg = "<svg width=\"9\" viewBox=\"0 0 9 9\"><rect/></svg>".to_string();
        let html = html(&s, &[(SweepChart::Goodput, svg)]);
        assert!(html.contains("<code>points/</code>"), "{html}");
        assert!(html.contains("<code>p90&lt;=50ms</code>"), "{html}");
        assert!(html.contains("snake &lt;game&gt;"));
        assert!(!html.contains('`') && !html.contains("&amp;lt;"), "{html}");
        assert!(
            html.contains(":root { color-scheme: light;"),
            "the run report's CSS"
        );
        assert_eq!(inline_html("a `b<c` d ` e"), "a <code>b&lt;c</code> d ` e");
    }
}
