//! `report.html`: one self-contained page (inline CSS and SVG; no script, font, image or
//! stylesheet from anywhere else) that reads on a 390 px phone and a 1280 px laptop (tables
//! scroll sideways inside their own box, charts scale to the width through their `viewBox`)
//! and prints cleanly. Pure: model + SVG strings in, text out. Every string from a file is
//! escaped; SVG text was escaped by plotters.

use std::fmt::Write as _;

use super::charts::ChartKind;
use super::model::{Model, Table};
use super::style::{hex, html_escape as esc, TRANSPORT_COLOURS};

/// The stylesheet of every report page (the run report and the sweep report).
pub(crate) const CSS: &str = r#"
:root { color-scheme: light; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #ffffff; --warn: #fff8c5; --warn-line: #d4a72c; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: var(--bg); }
main { max-width: 1200px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.5rem; margin: 0.2em 0 0.3em; overflow-wrap: anywhere; }
h2 { font-size: 1.2rem; margin: 1.6em 0 0.5em; border-bottom: 1px solid var(--line); padding-bottom: 0.2em; }
h3 { font-size: 1.05rem; margin: 1.2em 0 0.3em; }
p.sub { color: var(--muted); margin: 0 0 1em; overflow-wrap: anywhere; }
.notice { background: var(--warn); border-left: 4px solid var(--warn-line); padding: 8px 12px; margin: 8px 0; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
td.num, th.num { text-align: right; }
table.facts td { white-space: normal; overflow-wrap: anywhere; min-width: 9em; }
tr:last-child td { border-bottom: 0; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px; margin-right: 0.4em; vertical-align: -0.05em; }
figure { margin: 0 0 1.5em; }
figure .chart { overflow-x: auto; -webkit-overflow-scrolling: touch; }
figure svg { display: block; width: 100%; height: auto; max-width: 960px; }
figcaption { color: var(--muted); font-size: 0.92rem; margin-top: 0.3em; }
.note { color: var(--muted); font-size: 0.92rem; }
dl { margin: 0; } dt { font-weight: 600; margin-top: 0.5em; } dd { margin: 0 0 0 1em; }
@media (max-width: 600px) {
  body { font-size: 14px; } main { padding: 10px; } th, td { padding: 5px 7px; }
  /* Charts scale down with the page (no minimum width): every series and the legend under
     the plot stay in view; the chart text is drawn large enough to stay legible at 390 px. */
}
@media print {
  body { font-size: 10.5pt; } main { max-width: none; padding: 0; }
  .scroll, figure .chart { overflow: visible; border: 0; }
  th, td { white-space: normal; }
  figure, table, .notice { break-inside: avoid; }
  h2 { break-after: avoid; }
  a { color: inherit; text-decoration: none; }
}
"#;

/// Renders the page. `svgs` holds each chart's SVG document, in display order.
pub fn render(model: &Model, svgs: &[(ChartKind, String)]) -> String {
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // No network: a CSP that forbids every fetch makes that a property of the page itself.
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
    let _ = writeln!(out, "<title>{}</title>", esc(&model.title));
    let _ = writeln!(out, "<style>{CSS}</style>\n</head>\n<body>\n<main>");
    let _ = writeln!(out, "<h1>{}</h1>", esc(&model.title));
    let _ = writeln!(out, "<p class=\"sub\">{}</p>", esc(&model.subtitle));
    for n in &model.notices {
        let _ = writeln!(
            out,
            "<div class=\"notice\" role=\"note\"><strong>Warning:</strong> {}</div>",
            esc(n)
        );
    }
    out.push_str("<h2 id=\"results\">Results</h2>\n");
    table(&mut out, &model.headline, "results", true);
    let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&model.headline_note));
    if let Some(t) = &model.attribution {
        out.push_str("<h3>Server and transport (p50)</h3>\n");
        table(&mut out, t, "attribution", true);
    }
    if !model.attribution_notes.is_empty() {
        out.push_str("<ul class=\"attribution\">\n");
        for n in &model.attribution_notes {
            let _ = writeln!(out, "<li>{}</li>", esc(n));
        }
        out.push_str("</ul>\n");
    }
    if !model.sample_notes.is_empty() {
        out.push_str("<p class=\"note\">Small samples (nearest rank: pq is the maximum when n &lt; 1/(1 − q)):</p>\n<ul class=\"note\">\n");
        for n in &model.sample_notes {
            let _ = writeln!(out, "<li>{}</li>", esc(n));
        }
        out.push_str("</ul>\n");
    }
    if let Some(t) = &model.versus_first {
        out.push_str("<h3>Change against the first run (p50)</h3>\n");
        table(&mut out, t, "versus-first", true);
    }
    out.push_str("<h2 id=\"failures\">Failures</h2>\n");
    match &model.failures {
        Some(t) => table(&mut out, t, "failures", true),
        None => out.push_str("<p>No measured request failed.</p>\n"),
    }
    out.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for (kind, svg) in svgs {
        let _ = writeln!(
            out,
            "<figure id=\"chart-{}\">\n<h3>{}</h3>",
            kind.file_stem(),
            esc(kind.title())
        );
        out.push_str("<div class=\"chart\">");
        out.push_str(&responsive_svg(svg, kind.title()));
        out.push_str("</div>\n");
        let _ = writeln!(
            out,
            "<figcaption>{}</figcaption>\n</figure>",
            esc(kind.caption())
        );
    }
    out.push_str("<h2 id=\"provenance\">Provenance</h2>\n");
    table(&mut out, &model.provenance, "facts", false);
    out.push_str("<h2 id=\"definitions\">Definitions</h2>\n<dl>\n");
    for (term, def) in &model.definitions {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", esc(term), esc(def));
    }
    out.push_str("</dl>\n</main>\n</body>\n</html>\n");
    out
}

fn table(out: &mut String, t: &Table, class: &str, swatches: bool) {
    let _ = writeln!(
        out,
        "<div class=\"scroll\"><table class=\"{class}\">\n<thead><tr>"
    );
    for (h, num) in t.header.iter().zip(&t.numeric) {
        let _ = write!(
            out,
            "<th{} scope=\"col\">{}</th>",
            if *num { " class=\"num\"" } else { "" },
            esc(h)
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let transport_col = t.header.iter().position(|h| h == "transport");
    for r in &t.rows {
        out.push_str("<tr>");
        for (i, (cell, num)) in r.iter().zip(&t.numeric).enumerate() {
            let swatch = match (swatches, transport_col) {
                (true, Some(c)) if c == i => TRANSPORT_COLOURS
                    .iter()
                    .find(|(name, _)| name == cell)
                    .map(|(_, colour)| format!("<span class=\"swatch\" style=\"background:{}\" aria-hidden=\"true\"></span>", hex(*colour)))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            let _ = write!(
                out,
                "<td{}>{swatch}{}</td>",
                if *num { " class=\"num\"" } else { "" },
                esc(cell)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
}

/// Rewrites plotters' `<svg width=".." height=".." viewBox="..">` opening tag so the chart
/// scales with the page (CSS sets the width; the `viewBox` keeps the aspect ratio), and labels
/// it for screen readers.
pub(crate) fn responsive_svg(svg: &str, label: &str) -> String {
    let Some(start) = svg.find("<svg") else {
        return String::new();
    };
    let Some(end) = svg[start..].find('>').map(|e| start + e) else {
        return String::new();
    };
    let tag = &svg[start..end];
    let view_box = tag
        .split("viewBox=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or("0 0 960 400");
    format!(
        "<svg viewBox=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{}\" preserveAspectRatio=\"xMidYMid meet\">{}",
        esc(view_box),
        esc(label),
        &svg[end + 1..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_tag_is_made_responsive() {
        let s = responsive_svg(
            "<svg width=\"960\" height=\"300\" viewBox=\"0 0 960 300\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect/></svg>",
            "a <b>",
        );
        assert!(s.starts_with("<svg viewBox=\"0 0 960 300\" xmlns="), "{s}");
        assert!(!s.contains("width=\"960\""));
        assert!(s.contains("aria-label=\"a &lt;b&gt;\""));
        assert!(s.ends_with("\n<rect/></svg>"));
    }
}
