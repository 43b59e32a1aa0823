//! The report's content, independent of its format: the headline table with changes against
//! `http`, failures by kind, per-run provenance, warnings a reader must see, and metric
//! definitions. `markdown` and `html` only lay this out (and escape it): both formats always
//! say the same thing.
//!
//! All text here is plain and unescaped; it may contain names read from files.

use std::collections::BTreeMap;

use super::data::{ReportInput, RunView};
use super::style::{ms, num};
use crate::recorder::{cached_share_text, percent, CellSummary, Metric, MetricSummary};
use crate::store::RunStatus;

/// A table of plain-text cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Column headings.
    pub header: Vec<String>,
    /// Rows, as many cells as headings.
    pub rows: Vec<Vec<String>>,
    /// Per column: right-aligned (numbers).
    pub numeric: Vec<bool>,
}

/// A bar chart of one value per cell, for the Markdown report's Mermaid `xychart-beta`
/// blocks (GitHub renders them in a step summary, where relative image links break).
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    /// Heading and chart title.
    pub title: String,
    /// The y axis' text, with its unit.
    pub y_label: String,
    /// One label per bar (`target · transport`).
    pub labels: Vec<String>,
    /// One value per bar.
    pub values: Vec<f64>,
}

/// Everything a report says.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// `spark-bench report: <scenario>` (or several scenarios joined).
    pub title: String,
    /// One line under the title: which runs, when.
    pub subtitle: String,
    /// Things the reader must not miss (interrupted runs, estimates, failures), most important first.
    pub notices: Vec<String>,
    /// Per target × transport (× run): overhead, TTFT, TPOT, tok/s, session p50/p90.
    pub headline: Table,
    /// Note under the headline table.
    pub headline_note: String,
    /// Server / transport split of TTFT and TPOT per cell, when a server reported timing.
    pub attribution: Option<Table>,
    /// Whose each change against `http` is (the server's or the transport's), per cell.
    pub attribution_notes: Vec<String>,
    /// Where a percentile shown rests on too few samples to differ from the maximum.
    pub sample_notes: Vec<String>,
    /// The key charts as bars per cell (TTFT p50, overhead p50, tok/s p50).
    pub bars: Vec<Bars>,
    /// With several runs: each cell's p50 change against the first run.
    pub versus_first: Option<Table>,
    /// Failed requests by kind; `None` when nothing failed.
    pub failures: Option<Table>,
    /// Provenance: one row per fact, one column per run.
    pub provenance: Table,
    /// (term, definition).
    pub definitions: Vec<(String, String)>,
}

const DEFINITIONS: [(&str, &str); 11] = [
    ("overhead", "round-trip overhead: client TTFT minus the server-reported TTFT; when the server reports no timing, dispatch to the first protocol event (an estimate that also contains API work)"),
    ("TTFT", "time to first content token, from the request's intended start (includes client-side queueing)"),
    ("TPOT", "time per output token after the first: (last token − first token) / (tokens − 1)"),
    ("tok/s", "output tokens per second over the whole request, from the intended start; not defined for a request whose span is under 50 µs (counted as `rate_span_unresolved` in summary.json)"),
    ("session", "session wall time: the first request's intended start to the last request's end; sessions with a failed request are excluded"),
    ("p50 / p90 / p99", "percentiles over successful measured requests (warm-up excluded), by nearest rank on an HdrHistogram with 3 significant digits: pq is the ⌈q·n⌉-th smallest sample, reported as the upper edge of its histogram bucket (within 0.1 %). That is numpy.percentile(method=\"inverted_cdf\"); numpy's default (linear) interpolates between neighbouring samples instead, which differs on small samples (8 TTFTs: p50 879 ms by nearest rank, 901.9 ms linear). With n < 1/(1 − q) samples pq is the maximum (p99 with n < 100, p90 with n < 10): the notes under Results say where"),
    ("vs http", "change of the same statistic against the same target's `http` row (new TCP + TLS connection per request); negative is faster. The overhead column's change is the transport's; TTFT, TPOT, tok/s and session changes are end to end, and the attribution lines under the table say whether the server or the transport made them. Cells that share a server ran under the run's schedule (see Load below the table): interleaved or sequential cells never added their loads up; parallel ones did"),
    ("server / transport", "where the server reported timing in-band: TTFT's server part is its reported TTFT and its transport part the overhead; TPOT's server part is (server total − server TTFT) / (tokens − 1) and its transport part client TPOT minus that (clamped at 0); each part is its own p50, so the parts need not add up to the p50 of the whole; brackets give the change against the `http` row in ms"),
    ("cached in", "share of input tokens the server reported as answered from its prefix cache (sum of cached input tokens / sum of input tokens); — when the server reported none"),
    ("good req/s", "goodput as vLLM's `vllm bench serve --goodput` defines it: measured requests per second (over the cell's span) that succeeded and met every per-request SLO. A percentile SLO (p90<=50ms) is a condition on the whole cell or load point, not on requests: a cell that misses one is marked \"SLO missed\" (summary.json: slo_met false, misses), and its good req/s still counts the requests that met the per-request SLOs; it is not set to 0"),
    ("reused", "successful requests that ran on a connection opened for an earlier request, of all successful requests: a pooled cell that reads 0/N never pooled (its server closed each connection after its response, or no request found an idle one), so its difference from `http` is not the pool's"),
];

/// Builds the model of a report.
pub fn build(input: &ReportInput) -> Model {
    let several = input.is_comparison();
    let mut names: Vec<String> = Vec::new();
    for r in &input.runs {
        if !names.contains(&r.manifest.scenario.name) {
            names.push(r.manifest.scenario.name.clone());
        }
    }
    let title = format!("spark-bench report: {}", names.join(" / "));
    let subtitle = if several {
        let runs: Vec<String> = input
            .runs
            .iter()
            .map(|r| format!("{} = {}", r.label, r.dir_name()))
            .collect();
        format!(
            "Comparison of {} runs: {}",
            input.runs.len(),
            runs.join(", ")
        )
    } else {
        let r = &input.runs[0];
        format!(
            "Run {} · started {} · link {} · {}",
            r.manifest.run_id,
            r.manifest.started_at,
            r.manifest.link,
            r.manifest.status.as_str()
        )
    };
    Model {
        title,
        subtitle,
        notices: notices(input),
        headline: headline(input),
        headline_note: headline_note(input),
        attribution: super::attribution::table(input).map(|(header, rows)| Table {
            numeric: header
                .iter()
                .map(|h| !matches!(h.as_str(), "run" | "target" | "transport"))
                .collect(),
            header,
            rows,
        }),
        attribution_notes: super::attribution::notes(input),
        sample_notes: sample_notes(input),
        bars: bars(input),
        versus_first: several.then(|| versus_first(input)),
        failures: failures(input),
        provenance: provenance(input),
        definitions: DEFINITIONS
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
    }
}

/// True when a cell of any run has goodput (its scenario has an `[slo]`).
fn has_goodput(input: &ReportInput) -> bool {
    input
        .runs
        .iter()
        .any(|r| r.summary.cells.iter().any(|c| c.goodput.is_some()))
}

/// The note under the headline table, with each run's load: whether the cells compared
/// against `http` shared a server and under which schedule.
fn headline_note(input: &ReportInput) -> String {
    let mut s = "Values are p50 unless marked; brackets give the change against the same target's http row (negative = faster). tok/s: higher is better.".to_string();
    if has_goodput(input) {
        let mut slos: Vec<&str> = Vec::new();
        for c in input.runs.iter().flat_map(|r| r.summary.cells.iter()) {
            if let Some(g) = &c.goodput {
                if !slos.contains(&g.slo.as_str()) {
                    slos.push(&g.slo);
                }
            }
        }
        s.push_str(&format!(
            " good req/s (tok/s): measured requests (their output tokens) per second that succeeded and met every per-request SLO ({}), as vLLM's --goodput counts them; \"SLO missed\" marks a cell that missed a percentile SLO (a condition on the whole cell), whose good req/s still counts per-request SLOs only.",
            slos.join(" | ")
        ));
    }
    for r in &input.runs {
        let who = if input.is_comparison() {
            format!(" Run {}", r.label)
        } else {
            String::new()
        };
        match &r.manifest.load {
            Some(l) if l.shared_servers.is_empty() => s.push_str(&format!(
                "{who} Load: no two cells shared a server (schedule {}), so each vs-http change compares cells that did not load each other's server.",
                l.schedule
            )),
            Some(l) => {
                let how = match l.schedule.as_str() {
                    "interleaved" => "taking turns session by session through one pool of slots, so they did not add up their load and drift fell on every transport alike",
                    "sequential" => "one after another, so they did not add up their load",
                    _ => "at the same time, each with its own slots, so each measured the others' load too",
                };
                let servers: Vec<String> = l
                    .shared_servers
                    .iter()
                    .map(|sh| format!("{} shared {}", sh.cells.join(", "), sh.server))
                    .collect();
                s.push_str(&format!(
                    "{who} Load: {} under schedule {}, {how}.",
                    servers.join("; "),
                    l.schedule
                ));
            }
            None => {}
        }
    }
    s
}

/// The percentiles (of p90, p99) that equal the maximum with `n` samples: by nearest rank
/// pq is the ⌈q·n⌉-th smallest, the maximum when ⌈q·n⌉ = n, i.e. n < 1/(1 − q) (p99 with
/// n < 100, p90 with n < 10). `None` when neither does.
pub fn at_max(n: u64) -> Option<&'static str> {
    let max = |q: f64| (q * n as f64).ceil() as u64 >= n;
    match (max(0.90), max(0.99)) {
        (true, _) => Some("p90 = p99 = max"),
        (false, true) => Some("p99 = max"),
        _ => None,
    }
}

/// One line per distinct small-sample statement, naming the cells it holds for:
/// `n = 8 requests, so p90 = p99 = max; 3 sessions, so session p90 = max: sim · http, …`.
fn sample_notes(input: &ReportInput) -> Vec<String> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for run in &input.runs {
        for c in &run.summary.cells {
            let mut parts = Vec::new();
            if let Some(m) = c.metric(Metric::Ttft) {
                if let Some(w) = at_max(m.count) {
                    parts.push(format!("n = {} requests, so {w}", m.count));
                }
            }
            // The table shows session p50 and p90.
            if let Some(n) = c.metric(Metric::SessionWall).map(|m| m.count) {
                if (0.9 * n as f64).ceil() as u64 >= n {
                    let s = if n == 1 { "session" } else { "sessions" };
                    parts.push(format!("{n} {s}, so session p90 = max"));
                }
            }
            if parts.is_empty() {
                continue;
            }
            let who = if input.is_comparison() {
                format!("{} · {} · {}", run.label, c.target, c.transport)
            } else {
                format!("{} · {}", c.target, c.transport)
            };
            let what = parts.join("; ");
            match groups.iter_mut().find(|(w, _)| *w == what) {
                Some((_, cells)) => cells.push(who),
                None => groups.push((what, vec![who])),
            }
        }
    }
    groups
        .into_iter()
        .map(|(what, cells)| format!("{what}: {}", cells.join(", ")))
        .collect()
}

/// Most bars per Mermaid chart (more do not read).
const MAX_BARS: usize = 24;

/// TTFT p50, overhead p50 and tok/s p50 per cell, for the Mermaid charts; a chart without
/// values is left out.
fn bars(input: &ReportInput) -> Vec<Bars> {
    let mut cells: Vec<(String, &CellSummary)> = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            for c in run.cells_of(&target) {
                let label = if input.is_comparison() {
                    format!("{} · {target} · {}", run.label, c.transport)
                } else {
                    format!("{target} · {}", c.transport)
                };
                cells.push((label, c));
            }
        }
    }
    cells.truncate(MAX_BARS);
    [
        (Metric::Ttft, "TTFT p50 per cell", "TTFT p50 (ms)"),
        (
            Metric::Overhead,
            "Round-trip overhead p50 per cell",
            "overhead p50 (ms)",
        ),
        (
            Metric::OutputTokS,
            "Output tokens/s p50 per cell",
            "tok/s p50",
        ),
    ]
    .into_iter()
    .filter_map(|(m, title, y)| {
        let (labels, values): (Vec<String>, Vec<f64>) = cells
            .iter()
            .filter_map(|(l, c)| metric(c, m).map(|s| (l.clone(), s.p50)))
            .unzip();
        (!values.is_empty()).then(|| Bars {
            title: title.to_string(),
            y_label: y.to_string(),
            labels,
            values,
        })
    })
    .collect()
}

fn metric(c: &CellSummary, m: Metric) -> Option<&MetricSummary> {
    c.metric(m)
}

/// `41.2 ms (−81%)`: a value and its change against the http cell of the same target.
fn with_change(
    value: Option<f64>,
    base: Option<f64>,
    fmt: fn(f64) -> String,
    is_base: bool,
) -> String {
    let Some(v) = value else {
        return "–".into();
    };
    match base {
        Some(b) if !is_base && b > 0.0 => format!("{} ({})", fmt(v), percent((v - b) / b * 100.0)),
        _ => fmt(v),
    }
}

fn headline(input: &ReportInput) -> Table {
    let several = input.is_comparison();
    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("run".into());
    }
    header.extend(
        [
            "target",
            "transport",
            "ok / failed",
            "overhead",
            "TTFT",
            "TPOT",
            "tok/s",
            "session p50",
            "session p90",
            "cached in",
            "reused",
        ]
        .map(String::from),
    );
    let with_goodput = has_goodput(input);
    if with_goodput {
        header.push("good req/s (tok/s)".into());
    }
    let mut rows = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            let cells = run.cells_of(&target);
            let http = cells.iter().find(|c| c.transport == "http").copied();
            for c in &cells {
                let is_base = c.transport == "http";
                let stat = |cell: Option<&CellSummary>, m: Metric, p90: bool| {
                    cell.and_then(|c| metric(c, m))
                        .map(|s| if p90 { s.p90 } else { s.p50 })
                };
                let col = |m: Metric, p90: bool, fmt: fn(f64) -> String| {
                    with_change(stat(Some(c), m, p90), stat(http, m, p90), fmt, is_base)
                };
                let mut row = Vec::new();
                if several {
                    row.push(run.label.clone());
                }
                let failed = if c.cancelled > 0 {
                    format!("{} / {} (+{} cancelled)", c.ok, c.failed, c.cancelled)
                } else {
                    format!("{} / {}", c.ok, c.failed)
                };
                row.extend([
                    target.clone(),
                    c.transport.clone(),
                    failed,
                    col(Metric::Overhead, false, ms),
                    col(Metric::Ttft, false, ms),
                    col(Metric::Tpot, false, ms),
                    col(Metric::OutputTokS, false, num),
                    col(Metric::SessionWall, false, ms),
                    col(Metric::SessionWall, true, ms),
                    cached_share_text(c.cached_input_share),
                    c.connections.text_with_note(),
                ]);
                if with_goodput {
                    row.push(c.goodput.as_ref().map_or_else(
                        || "-".to_string(),
                        |g| {
                            let missed = if g.slo_met {
                                String::new()
                            } else {
                                format!(" · SLO missed: {}", g.misses.join("; "))
                            };
                            format!(
                                "{} ({}){missed}",
                                num(g.good_req_s),
                                num(g.good_output_tok_s)
                            )
                        },
                    ));
                }
                rows.push(row);
            }
        }
    }
    let numeric = header
        .iter()
        .map(|h| !matches!(h.as_str(), "run" | "target" | "transport"))
        .collect();
    Table {
        header,
        rows,
        numeric,
    }
}

fn versus_first(input: &ReportInput) -> Table {
    let Some(base) = input.runs.first() else {
        return Table {
            header: Vec::new(),
            rows: Vec::new(),
            numeric: Vec::new(),
        };
    };
    let metrics = [
        (Metric::Overhead, "overhead"),
        (Metric::Ttft, "TTFT"),
        (Metric::Tpot, "TPOT"),
        (Metric::OutputTokS, "tok/s"),
        (Metric::SessionWall, "session"),
    ];
    let mut header = vec!["run".to_string(), "target".into(), "transport".into()];
    header.extend(
        metrics
            .iter()
            .map(|(_, n)| format!("{n} p50 vs {}", base.label)),
    );
    let mut rows = Vec::new();
    for run in input.runs.iter().skip(1) {
        for target in run.targets() {
            for c in run.cells_of(&target) {
                let b = base.summary.cell(&target, &c.transport);
                let mut row = vec![run.label.clone(), target.clone(), c.transport.clone()];
                for (m, _) in metrics {
                    let v = metric(c, m).map(|s| s.p50);
                    let bv = b.and_then(|b| metric(b, m)).map(|s| s.p50);
                    row.push(match (v, bv) {
                        (Some(v), Some(bv)) if bv > 0.0 => percent((v - bv) / bv * 100.0),
                        _ => "–".into(),
                    });
                }
                rows.push(row);
            }
        }
    }
    let numeric = (0..header.len()).map(|i| i >= 3).collect();
    Table {
        header,
        rows,
        numeric,
    }
}

fn failures(input: &ReportInput) -> Option<Table> {
    let several = input.is_comparison();
    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("run".into());
    }
    header.extend(["target", "transport", "kind", "requests", "share"].map(String::from));
    let mut rows = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            for c in run.cells_of(&target) {
                for (kind, n) in &c.by_outcome {
                    if kind == "ok" || *n == 0 {
                        continue;
                    }
                    let mut row = Vec::new();
                    if several {
                        row.push(run.label.clone());
                    }
                    let share = *n as f64 * 100.0 / c.requests.max(1) as f64;
                    row.extend([
                        target.clone(),
                        c.transport.clone(),
                        kind.clone(),
                        n.to_string(),
                        format!("{share:.2}%"),
                    ]);
                    rows.push(row);
                }
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    let k = header.len();
    Some(Table {
        header,
        rows,
        numeric: (0..k).map(|i| i + 2 >= k).collect(),
    })
}

/// `server-timing 25% (ws); first-event-estimate 75% (http, http-pooled, http2)`.
fn source_mix(run: &RunView, pick: fn(&CellSummary) -> &BTreeMap<String, u64>) -> String {
    let mut by: BTreeMap<String, (u64, Vec<String>)> = BTreeMap::new();
    let mut total = 0;
    for c in &run.summary.cells {
        for (src, n) in pick(c) {
            let e = by.entry(src.clone()).or_default();
            e.0 += n;
            total += n;
            let name = c.transport.clone();
            if !e.1.contains(&name) {
                e.1.push(name);
            }
        }
    }
    if total == 0 {
        return "none (no successful requests)".into();
    }
    by.into_iter()
        .map(|(src, (n, mut transports))| {
            transports.sort_by_key(|t| super::style::transport_rank(t));
            format!(
                "{src} {:.0}% ({})",
                n as f64 * 100.0 / total as f64,
                transports.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One provenance row: how to read a fact off a run.
type Fact = Box<dyn Fn(&RunView) -> String>;

/// The provenance rows every run has, in order: identity, scenario, load, host, sources.
fn base_facts() -> Vec<(&'static str, Fact)> {
    vec![
        ("run id", Box::new(|r| r.manifest.run_id.clone())),
        ("directory", Box::new(|r| r.dir_name())),
        (
            "status",
            Box::new(|r| {
                let mut s = r.manifest.status.as_str().to_string();
                if r.rebuilt {
                    s.push_str(" (statistics rebuilt from rows)");
                }
                s
            }),
        ),
        ("started", Box::new(|r| r.manifest.started_at.clone())),
        (
            "ended",
            Box::new(|r| r.manifest.ended_at.clone().unwrap_or_else(|| "–".into())),
        ),
        (
            "tool",
            Box::new(|r| format!("{} {}", r.manifest.tool.name, r.manifest.tool.version)),
        ),
        ("scenario", Box::new(|r| r.manifest.scenario.name.clone())),
        (
            "scenario file",
            Box::new(|r| r.manifest.scenario.path.clone()),
        ),
        (
            "scenario hash",
            Box::new(|r| r.manifest.scenario.hash.clone()),
        ),
        ("seed", Box::new(|r| r.manifest.seed.to_string())),
        ("link model", Box::new(|r| r.manifest.link.clone())),
        (
            "arrival timestamps",
            Box::new(|r| {
                r.manifest
                    .timestamps
                    .clone()
                    .unwrap_or_else(|| "not recorded".into())
            }),
        ),
        (
            "concurrency",
            Box::new(|r| r.concurrency.map_or("–".into(), |c| c.to_string())),
        ),
        (
            "load",
            Box::new(|r| {
                r.manifest
                    .load
                    .as_ref()
                    .map_or("not recorded".into(), |l| l.summary.clone())
            }),
        ),
        (
            "host",
            Box::new(|r| {
                let h = &r.manifest.host;
                format!("{} ({}/{}, {} CPUs)", h.hostname, h.os, h.arch, h.cpus)
            }),
        ),
        (
            "targets",
            Box::new(|r| {
                r.targets()
                    .iter()
                    .map(|t| format!("{t}: {}", r.hardware_of(t)))
                    .collect::<Vec<_>>()
                    .join("; ")
            }),
        ),
        (
            "overhead source",
            Box::new(|r| source_mix(r, |c| &c.overhead_sources)),
        ),
        (
            "token source",
            Box::new(|r| source_mix(r, |c| &c.token_sources)),
        ),
        ("command", Box::new(|r| r.manifest.command_line.join(" "))),
    ]
}

fn provenance(input: &ReportInput) -> Table {
    let mut header = vec!["".to_string()];
    header.extend(input.runs.iter().map(|r| {
        if input.is_comparison() {
            format!("run {}", r.label)
        } else {
            "run".to_string()
        }
    }));
    let mut facts = base_facts();
    // Runs written before the harness judged itself have no section: the row appears only
    // when some run has one.
    if input.runs.iter().any(|r| r.summary.harness.is_some()) {
        facts.push((
            "harness",
            Box::new(|r| {
                r.summary
                    .harness
                    .as_ref()
                    .map_or("not measured".into(), |h| h.lines().join(" · "))
            }),
        ));
    }
    // Stall windows (every stream silent together): the gate leaves requests in them out.
    if input.runs.iter().any(|r| r.stalls.is_some()) {
        facts.push((
            "stall windows",
            Box::new(|r| {
                r.stalls
                    .as_ref()
                    .map_or("not measured".into(), |s| s.line())
            }),
        ));
    }
    let rows = facts
        .iter()
        .map(|(name, f)| {
            let mut row = vec![name.to_string()];
            row.extend(input.runs.iter().map(f));
            row
        })
        .collect();
    let k = header.len();
    Table {
        header,
        rows,
        numeric: vec![false; k],
    }
}

fn notices(input: &ReportInput) -> Vec<String> {
    let mut out = Vec::new();
    let several = input.is_comparison();
    for r in &input.runs {
        let who = if several {
            format!("Run {} ({})", r.label, r.dir_name())
        } else {
            "This run".to_string()
        };
        if let Some(h) = r
            .summary
            .harness
            .as_ref()
            .filter(|h| h.verdict == crate::recorder::harness::Verdict::HarnessBound)
        {
            out.push(format!(
                "{who} was HARNESS-BOUND: the harness could not keep up with the load it was asked to drive, so its latencies and rates may be the harness's, not the target's ({}). See `spark-bench calibrate` and docs/harness.md.",
                h.reasons.join("; ")
            ));
        }
        match r.manifest.status {
            RunStatus::Complete => {}
            RunStatus::Interrupted => out.push(format!(
                "{who} was INTERRUPTED (Ctrl-C or deadline): the figures cover only the sessions that completed; cancelled requests are counted separately."
            )),
            RunStatus::Failed => out.push(format!(
                "{who} FAILED before it completed: the figures cover only what was recorded."
            )),
            RunStatus::Running => out.push(format!(
                "{who} did not finish (status running: the process stopped without writing its summary); statistics were rebuilt from the rows written so far."
            )),
        }
        let estimated: Vec<String> = r
            .summary
            .cells
            .iter()
            .filter(|c| c.overhead_sources.contains_key("first-event-estimate"))
            .map(|c| format!("{} · {}", c.target, c.transport))
            .collect();
        let timed = r
            .summary
            .cells
            .iter()
            .any(|c| c.overhead_sources.contains_key("server-timing"));
        if !estimated.is_empty() {
            let mut s = format!(
                "{who}: overhead of {} is an estimate (dispatch to the first protocol event: the server reported no timing), so it includes the server's API work",
                estimated.join(", ")
            );
            if timed {
                s.push_str("; other cells use server-reported timing, so compare overhead across these two groups with care");
            }
            s.push('.');
            out.push(s);
        }
        let counted: Vec<String> = r
            .summary
            .cells
            .iter()
            .filter(|c| {
                c.token_sources.contains_key("chunk-count")
                    || c.token_sources.contains_key("usage-rejected")
            })
            .map(|c| format!("{} · {}", c.target, c.transport))
            .collect();
        if !counted.is_empty() {
            out.push(format!(
                "{who}: token counts of {} come from counting chunks (no usage reported, or a usage that was impossible for the bytes and time: `usage-rejected`): tok/s and TPOT are lower bounds.",
                counted.join(", ")
            ));
        }
        let failed: u64 = r.summary.cells.iter().map(|c| c.failed).sum();
        let requests: u64 = r.summary.cells.iter().map(|c| c.requests).sum();
        if failed > 0 {
            out.push(format!(
                "{who}: {failed} of {requests} measured requests failed ({:.2}%); failures are excluded from every latency figure (see Failures).",
                failed as f64 * 100.0 / requests.max(1) as f64
            ));
        }
        if let Ok(plan) = r.manifest.plan() {
            for w in crate::recorder::cold_cache_warnings(&plan, &r.summary) {
                out.push(format!("{who}: {w}."));
            }
        }
        for w in crate::recorder::buffering::warnings(&r.summary) {
            out.push(format!("{who}: {w}."));
        }
        for w in &r.warnings {
            out.push(format!("{who}: plan warning: {w}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sample_rule() {
        assert_eq!(at_max(8), Some("p90 = p99 = max"));
        assert_eq!(at_max(9), Some("p90 = p99 = max"));
        assert_eq!(at_max(10), Some("p99 = max"));
        assert_eq!(at_max(99), Some("p99 = max"));
        assert_eq!(at_max(100), None);
    }

    /// The percentile method against numpy on the same samples (scripts/percentile_check.py
    /// runs numpy on this list in CI): nearest rank = numpy.percentile(method="inverted_cdf")
    /// within the histogram's 0.1 %; numpy's default linear method gives p50 901.9 ms,
    /// p90 999.0 ms, p99 1017.9 ms here.
    #[test]
    fn percentiles_are_nearest_rank_like_numpy_inverted_cdf() {
        let samples_ms = [812.0, 845.0, 861.0, 879.0, 924.8, 951.0, 990.0, 1020.0];
        let mut h = crate::recorder::new_histogram();
        for v in samples_ms {
            h.record((v * 1e6) as u64).unwrap();
        }
        let s = MetricSummary::of(Metric::Ttft, &h).unwrap();
        // numpy.percentile(samples_ms, [50, 90, 99], method="inverted_cdf")
        let numpy_inverted_cdf = [879.0, 1020.0, 1020.0];
        let numpy_linear = [901.9, 999.0, 1017.9];
        for ((ours, want), lin) in [s.p50, s.p90, s.p99]
            .into_iter()
            .zip(numpy_inverted_cdf)
            .zip(numpy_linear)
        {
            assert!((ours - want).abs() <= want * 1e-3, "{ours} vs numpy {want}");
            assert!(ours >= want, "the bucket's upper edge: {ours} vs {want}");
            assert!(
                (ours - lin).abs() > 1.0,
                "{ours} should differ from numpy linear {lin}"
            );
        }
        assert_eq!(at_max(s.count), Some("p90 = p99 = max"));
    }

    #[test]
    fn change_text() {
        assert_eq!(
            with_change(Some(20.0), Some(100.0), ms, false),
            "20.0 ms (\u{2212}80%)"
        );
        assert_eq!(with_change(Some(100.0), Some(100.0), ms, true), "100 ms");
        assert_eq!(with_change(None, Some(1.0), ms, false), "–");
        assert_eq!(with_change(Some(5.0), Some(0.0), num, false), "5.00");
    }
}
