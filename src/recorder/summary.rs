//! Summaries for people and machines: per cell, counts, outcome mix, and for each metric
//! count/min/mean/stdev/p50/p90/p95/p99/max in natural units; plus the terminal table.
//!
//! Owns: `summary.json`'s shape (checked by `schemas/summary.schema.json`), the "vs http"
//! percentages, and the table text. Pure: data in, data or `String` out.
//! Does not own: histograms (see `histograms`), files (see `store`), or charts (see `report`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::histograms::{CellStats, Recorder};
use super::metrics::Metric;

/// Version of the `summary.json` shape; bumped on any incompatible change.
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

/// Metrics whose p50 is compared against the same target's `http` cell: the transport parts
/// (`overhead`, `tpot_overhead`) and the end-to-end figures (see `attribution` for whose an
/// end-to-end change is).
pub const VS_HTTP_METRICS: [Metric; 6] = [
    Metric::Ttft,
    Metric::Overhead,
    Metric::TpotOverhead,
    Metric::Tpot,
    Metric::E2e,
    Metric::SessionWall,
];

/// The whole run, summarised (`summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Shape version ([`SUMMARY_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// One entry per target × transport, targets then transports in name order.
    pub cells: Vec<CellSummary>,
    /// Could the harness have been the bottleneck (see [`super::harness`])? Absent in runs
    /// written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<super::harness::Harness>,
}

/// One target × transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: String,
    /// Measured requests, every outcome (warm-up excluded).
    pub requests: u64,
    /// Measured requests that completed.
    pub ok: u64,
    /// Measured requests that failed (cancelled ones excluded).
    pub failed: u64,
    /// Measured requests cut off by Ctrl-C or the run deadline (not the server's fault).
    pub cancelled: u64,
    /// `failed / (requests − cancelled)`; 0 when nothing ran.
    pub error_rate: f64,
    /// Warm-up requests (excluded from every statistic).
    pub warmup_requests: u64,
    /// Measured sessions.
    pub sessions: u64,
    /// Measured sessions with at least one failed request (not in `session_wall`).
    pub failed_sessions: u64,
    /// Warm-up sessions.
    pub warmup_sessions: u64,
    /// Measured requests by outcome name (`ok`, `http-status`, `timeout`, …).
    pub by_outcome: BTreeMap<String, u64>,
    /// Output tokens of successful measured requests.
    pub output_tokens: u64,
    /// Content chunks of successful measured requests.
    pub chunks: u64,
    /// Share of input tokens the server answered from its prefix cache: sum of cached
    /// input tokens / sum of input tokens over successful measured requests whose server
    /// reported both; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_share: Option<f64>,
    /// The same share over the requests that re-sent their whole history (not
    /// `previous-response-id` continuations, whose stored conversation the server counts as
    /// cached): what a `cold` cell is judged by. Absent when none reported both counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchained_cached_input_share: Option<f64>,
    /// Successful measured requests by the connection they ran on: opened for them
    /// (`fresh`) or opened earlier (`reused`). Absent in older summaries.
    #[serde(default)]
    pub connections: ConnectionUse,
    /// Seconds from the earliest intended start to the latest end of the successful
    /// measured requests (0 when there are none).
    pub span_s: f64,
    /// Seconds the cell was busy: the length of the union of its successful measured
    /// requests' `[intended start, end]` intervals (see `busy`); at most `span_s`, less when
    /// the cell took turns with others (the interleaved schedule) or sat idle. 0 in older
    /// summaries.
    #[serde(default)]
    pub busy_s: f64,
    /// Aggregate output rate over the cell's own busy time: `output_tokens / busy_s` (0 when
    /// it is 0). Unlike the per-request `output_tok_s` metric, this counts concurrent
    /// sessions together; unlike `output_tokens / span_s`, it does not count the time other
    /// cells had the server.
    pub aggregate_output_tok_s: f64,
    /// Per metric name (`ttft`, `tpot`, …): statistics in natural units. Metrics without
    /// samples are absent.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Successful requests by where their overhead figure came from (`server-timing`,
    /// `first-event-estimate`).
    pub overhead_sources: BTreeMap<String, u64>,
    /// Successful requests by where their token count came from (`server-usage`,
    /// `chunk-count`).
    pub token_sources: BTreeMap<String, u64>,
    /// Change of p50 against the same target's `http` cell, percent (negative = lower =
    /// faster), for `ttft`, `overhead`, `tpot`, `e2e`, `session_wall`. Empty for the `http`
    /// cell itself or when there is none.
    pub vs_http: BTreeMap<String, f64>,
    /// TTFT and per-token time split into the server's part and the transport's, and whose
    /// each change against `http` is (see `attribution`); absent when there is nothing to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<super::attribution::Attribution>,
    /// Mean input (prompt) tokens per successful measured request, as the server reported
    /// them; absent when no server reported any (and in older summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_input_tokens: Option<f64>,
    /// Mean output tokens per successful measured request; absent when none succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_output_tokens: Option<f64>,
    /// Goodput under the scenario's `[slo]`; absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// Successful measured requests whose `decode_tok_s` or `output_tok_s` was not defined
    /// because the span it divides by was below `vocab::MIN_RATE_SPAN_NS` (e.g. the whole
    /// stream arrived in one read): not in those two metrics, counted here. 0 in older
    /// summaries.
    #[serde(default)]
    pub rate_span_unresolved: u64,
    /// Did the stream arrive in bursts its server's cadence does not explain (a buffering
    /// proxy)? See `recorder::buffering`. Absent when no request was checked (none had
    /// enough chunks, a merged run whose chunks were not re-read, older summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffering: Option<super::buffering::Buffering>,
}

/// How a cell's successful measured requests got their connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionUse {
    /// Requests that ran on a connection opened for them (they paid its set-up).
    pub fresh: u64,
    /// Requests that ran on a connection opened for an earlier request.
    pub reused: u64,
    /// Why connections were not reused, when the cell learnt it from its server (e.g. the
    /// server closed each connection after its response); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ConnectionUse {
    /// `reused/total` (`7/8`), or `-` without requests.
    pub fn text(&self) -> String {
        let total = self.fresh + self.reused;
        if total == 0 {
            "-".into()
        } else {
            format!("{}/{total}", self.reused)
        }
    }

    /// [`ConnectionUse::text`], with the reason when one is known (`0/8: the server closed …`).
    pub fn text_with_note(&self) -> String {
        match &self.note {
            Some(n) => format!("{}: {n}", self.text()),
            None => self.text(),
        }
    }
}

/// Goodput of one cell: what met the scenario's `[slo]`.
///
/// A request is good when it succeeded and meets every per-request SLO (see `plan::slo`).
/// Rates are over the cell's measured window, `span_s` (earliest intended start to latest
/// end of its successful measured requests).
/// Tokens are the output tokens each good request recorded: the server's usage report, or
/// the chunk count when the server sent none (`token_sources` says which).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// The SLOs, e.g. `ttft <=500ms, tpot p90<=20ms`.
    pub slo: String,
    /// Good measured requests.
    pub good_requests: u64,
    /// Output tokens of the good requests.
    pub good_output_tokens: u64,
    /// `good_requests / span_s` (0 when the span is 0).
    pub good_req_s: f64,
    /// `good_output_tokens / span_s` (0 when the span is 0).
    pub good_output_tok_s: f64,
    /// True when every percentile SLO (`p90<=…`) holds over the cell's successful measured
    /// requests (true when none is set).
    pub slo_met: bool,
    /// The percentile SLOs that did not hold, e.g. `ttft p90 612.0 ms > 500.0 ms`.
    pub misses: Vec<String>,
}

/// Statistics of one metric in one cell, in the metric's natural unit (`unit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// `ms`, `tok/s`, `tokens` or `bytes`.
    pub unit: String,
    /// Samples.
    pub count: u64,
    /// Smallest sample.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stdev: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
}

impl MetricSummary {
    /// Statistics of a histogram of `metric` (stored units in, natural units out); `None`
    /// when it is empty. Values carry the histogram's 3-significant-digit resolution.
    pub fn of(metric: Metric, h: &Histogram<u64>) -> Option<MetricSummary> {
        if h.is_empty() {
            return None;
        }
        // Written at the precision the values have: no float noise past a nanosecond in ms.
        let n = |v: f64| crate::units::round_decimals(metric.to_natural(v), 6);
        let q = |p: f64| n(h.value_at_quantile(p) as f64);
        Some(MetricSummary {
            unit: metric.natural_unit().to_string(),
            count: h.len(),
            min: n(h.min() as f64),
            mean: n(h.mean()),
            stdev: n(h.stdev()),
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            max: n(h.max() as f64),
        })
    }
}

impl Summary {
    /// Summarises every cell of a recorder.
    pub fn from_recorder(rec: &Recorder) -> Summary {
        let mut cells: Vec<CellSummary> = rec
            .cells()
            .iter()
            .map(|(k, c)| {
                let mut s = cell_summary(&k.target, &k.transport, c);
                s.goodput = goodput(rec.slo(), c, s.span_s);
                s
            })
            .collect();
        // vs http: a second pass, once every cell's p50s are known.
        let http_p50: BTreeMap<(String, String), f64> = cells
            .iter()
            .filter(|c| c.transport == "http")
            .flat_map(|c| {
                c.metrics
                    .iter()
                    .map(|(m, s)| ((c.target.clone(), m.clone()), s.p50))
            })
            .collect();
        for c in cells.iter_mut().filter(|c| c.transport != "http") {
            for m in VS_HTTP_METRICS {
                let (Some(base), Some(s)) = (
                    http_p50.get(&(c.target.clone(), m.name().to_string())),
                    c.metrics.get(m.name()),
                ) else {
                    continue;
                };
                if *base > 0.0 {
                    c.vs_http
                        .insert(m.name().to_string(), (s.p50 - base) / base * 100.0);
                }
            }
        }
        attribute_cells(&mut cells);
        Summary {
            schema_version: SUMMARY_SCHEMA_VERSION,
            cells,
            harness: None,
        }
    }

    /// The cell for `target` × `transport`.
    pub fn cell(&self, target: &str, transport: &str) -> Option<&CellSummary> {
        self.cells
            .iter()
            .find(|c| c.target == target && c.transport == transport)
    }
}

impl CellSummary {
    /// Statistics of `metric`, when it has samples.
    pub fn metric(&self, metric: Metric) -> Option<&MetricSummary> {
        self.metrics.get(metric.name())
    }
}

fn cell_summary(target: &str, transport: &str, c: &CellStats) -> CellSummary {
    let denominator = c.requests.saturating_sub(c.cancelled());
    let span_s = match (c.first_intended_ns, c.last_end_ns) {
        (Some(f), Some(l)) if l > f => (l - f) as f64 / 1e9,
        _ => 0.0,
    };
    let busy_s = c.busy.total_ns() as f64 / 1e9;
    CellSummary {
        target: target.to_string(),
        transport: transport.to_string(),
        requests: c.requests,
        ok: c.ok(),
        failed: c.failed(),
        cancelled: c.cancelled(),
        error_rate: if denominator == 0 {
            0.0
        } else {
            c.failed() as f64 / denominator as f64
        },
        warmup_requests: c.warmup_requests,
        sessions: c.sessions,
        failed_sessions: c.failed_sessions,
        warmup_sessions: c.warmup_sessions,
        by_outcome: c
            .by_outcome
            .iter()
            .map(|(k, n)| (k.as_str().to_string(), *n))
            .collect(),
        output_tokens: c.output_tokens,
        chunks: c.chunks,
        cached_input_share: (c.cache_input_tokens > 0)
            .then(|| c.cached_input_tokens as f64 / c.cache_input_tokens as f64),
        unchained_cached_input_share: (c.unchained_cache_input_tokens > 0).then(|| {
            c.unchained_cached_input_tokens as f64 / c.unchained_cache_input_tokens as f64
        }),
        connections: ConnectionUse {
            fresh: c.fresh_connection_requests,
            reused: c.reused_connection_requests,
            note: c.connection_note.clone(),
        },
        span_s,
        busy_s,
        aggregate_output_tok_s: if busy_s > 0.0 {
            c.output_tokens as f64 / busy_s
        } else {
            0.0
        },
        metrics: Metric::ALL
            .into_iter()
            .filter_map(|m| {
                let h = c.histogram(m)?;
                Some((m.name().to_string(), MetricSummary::of(m, h)?))
            })
            .collect(),
        overhead_sources: c.overhead_sources.clone(),
        token_sources: c.token_sources.clone(),
        vs_http: BTreeMap::new(),
        attribution: None,
        mean_input_tokens: (c.input_token_requests > 0)
            .then(|| c.input_tokens as f64 / c.input_token_requests as f64),
        mean_output_tokens: (c.ok() > 0).then(|| c.output_tokens as f64 / c.ok() as f64),
        goodput: None,
        rate_span_unresolved: c.rate_span_unresolved,
        buffering: super::buffering::Buffering::of(
            c.bursty_requests,
            c.burst_checked_requests,
            super::buffering::burst_read_chunks(c.chunks_per_write),
        ),
    }
}

/// The cell's goodput under `slo`; `None` when there is no SLO.
fn goodput(slo: &crate::plan::Slo, c: &CellStats, span_s: f64) -> Option<Goodput> {
    if slo.is_empty() {
        return None;
    }
    let mut misses = Vec::new();
    for (name, b) in slo.bounds() {
        let Some(p) = b.percentile else { continue };
        match Metric::from_name(name).and_then(|m| c.histogram(m)) {
            Some(h) => {
                let v = h.value_at_quantile(p / 100.0) as f64;
                if !b.met_by_ns(v) {
                    // Each in its own unit: a 1 µs bound is not "0.00 ms".
                    misses.push(format!(
                        "{name} p{p} {} > {}",
                        crate::units::fmt_ns(v),
                        crate::units::fmt_ns(b.limit.as_nanos() as f64)
                    ));
                }
            }
            None => misses.push(format!("{name} p{p}: no successful request measured it")),
        }
    }
    let rate = |n: u64| if span_s > 0.0 { n as f64 / span_s } else { 0.0 };
    Some(Goodput {
        slo: slo.describe(),
        good_requests: c.good_requests,
        good_output_tokens: c.good_output_tokens,
        good_req_s: rate(c.good_requests),
        good_output_tok_s: rate(c.good_output_tokens),
        slo_met: misses.is_empty(),
        misses,
    })
}

/// The terminal table: one row per target × transport with p50/p90/p99 of TTFT, overhead and
/// TPOT (ms), output tok/s (p50), session wall time (p50, s), errors, the cached input
/// share, mean input/output tokens per request, and a compact change against the target's
/// `http` row; under it, the run's `harness` lines when it has them.
pub fn table(summary: &Summary) -> String {
    let header = [
        "target",
        "transport",
        "ok",
        "err",
        "TTFT ms p50/p90/p99",
        "overhead ms p50/p90/p99",
        "TPOT ms p50/p90/p99",
        "tok/s p50",
        "session s p50",
        "cached in",
        "reused",
        "tokens in/out",
        "vs http (p50)",
    ];
    let with_goodput = summary.cells.iter().any(|c| c.goodput.is_some());
    let mut header: Vec<&str> = header.to_vec();
    if with_goodput {
        header.insert(header.len() - 1, "good req/s (tok/s)");
    }
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for c in &summary.cells {
        let triple = |m: Metric| {
            c.metric(m).map_or_else(
                || "-".to_string(),
                |s| format!("{}/{}/{}", num(s.p50), num(s.p90), num(s.p99)),
            )
        };
        let p50 = |m: Metric, scale: f64| {
            c.metric(m)
                .map_or_else(|| "-".to_string(), |s| num(s.p50 / scale))
        };
        let err = if c.cancelled > 0 {
            format!("{} (+{} cancelled)", c.failed, c.cancelled)
        } else {
            c.failed.to_string()
        };
        rows.push(vec![
            c.target.clone(),
            c.transport.clone(),
            c.ok.to_string(),
            err,
            triple(Metric::Ttft),
            triple(Metric::Overhead),
            triple(Metric::Tpot),
            p50(Metric::OutputTokS, 1.0),
            p50(Metric::SessionWall, 1000.0),
            cached_share_text(c.cached_input_share),
            c.connections.text(),
            tokens_in_out_text(c),
            vs_http_text(c),
        ]);
        if with_goodput {
            let g = c.goodput.as_ref().map_or_else(
                || "-".to_string(),
                |g| {
                    let miss = if g.slo_met { "" } else { " SLO missed" };
                    format!("{} ({}){miss}", num(g.good_req_s), num(g.good_output_tok_s))
                },
            );
            let row = rows.last_mut().expect("a row was just pushed");
            let at = row.len() - 1;
            row.insert(at, g);
        }
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (n, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            // Text columns left-aligned, numbers right-aligned.
            if i < 2 || i == row.len() - 1 {
                let _ = write!(line, "{cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{cell}", " ".repeat(pad));
            }
            if i + 1 < row.len() {
                line.push_str("  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if n == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    // Why a cell's connections were not reused, where its server showed it.
    for c in &summary.cells {
        if let Some(n) = &c.connections.note {
            let _ = writeln!(
                out,
                "{} × {}: reused {}: {n}",
                c.target,
                c.transport,
                c.connections.text()
            );
        }
    }
    // Whose each change against http is (server or transport).
    for c in &summary.cells {
        for n in c.attribution.iter().flat_map(|a| a.notes.iter()) {
            let _ = writeln!(out, "{} × {}: {n}", c.target, c.transport);
        }
    }
    // The footer: could the harness have been the bottleneck?
    for line in summary.harness.iter().flat_map(|h| h.lines()) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Fills each cell's `attribution` (see [`super::attribution`]), once `vs_http` is known.
fn attribute_cells(cells: &mut [CellSummary]) {
    use super::attribution::{attribute, splits, Splits};
    let split = |c: &CellSummary| {
        let timed = c.overhead_sources.contains_key("server-timing");
        splits(|m| c.metric(m).map(|s| s.p50), timed)
    };
    let http: BTreeMap<String, Splits> = cells
        .iter()
        .filter(|c| c.transport == "http")
        .map(|c| (c.target.clone(), split(c)))
        .collect();
    for c in cells.iter_mut() {
        let base = http.get(&c.target).filter(|_| c.transport != "http");
        // A change that prints as ±0% has nothing to attribute.
        let change = |m: Metric| {
            let p = c.vs_http.get(m.name()).filter(|p| p.round() != 0.0);
            p.map(|p| percent(*p))
        };
        let a = attribute(
            split(c),
            base.copied(),
            change(Metric::Ttft),
            change(Metric::Tpot),
        );
        c.attribution = a;
    }
}

/// Mean input and output tokens per successful request, `2003/298` (`-` where unknown).
pub fn tokens_in_out_text(c: &CellSummary) -> String {
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
    format!("{}/{}", f(c.mean_input_tokens), f(c.mean_output_tokens))
}

/// The cached share of input tokens: `0%`, `99.7%`, or `—` when the server reported none.
pub fn cached_share_text(share: Option<f64>) -> String {
    match share {
        None => "\u{2014}".to_string(),
        Some(s) if s > 0.0 && s < 0.001 => "<0.1%".to_string(),
        Some(s) if s * 100.0 == (s * 100.0).round() => format!("{:.0}%", s * 100.0),
        Some(s) => format!("{:.1}%", s * 100.0),
    }
}

/// A `cold` cell whose server still reported more than this share of input tokens cached
/// gets a warning: something answered from a cache after all.
pub const COLD_CACHE_WARN_SHARE: f64 = 0.10;

/// Warnings for cells that asked for `cache = "cold"` and got a cached share of input
/// tokens above [`COLD_CACHE_WARN_SHARE`] on the requests that re-sent their whole history.
pub fn cold_cache_warnings(plan: &crate::plan::Plan, summary: &Summary) -> Vec<String> {
    plan.cells
        .iter()
        .filter(|c| c.cache == crate::vocab::CacheMode::Cold)
        .filter_map(|c| {
            let s = summary.cell(&c.target.name, c.transport.as_str())?;
            // Continuations (`previous-response-id`) are left out: the conversation the server
            // stored for them is cached by design. Older summaries have only the whole share.
            let share = s.unchained_cached_input_share.or(s.cached_input_share)?;
            (share > COLD_CACHE_WARN_SHARE).then(|| {
                format!(
                    "{} × {} asked for a cold prefix cache but the server reported {} of the input tokens of its full-history requests cached: its latencies are not cold (a cache that ignores the salt?)",
                    c.target.name,
                    c.transport,
                    cached_share_text(Some(share))
                )
            })
        })
        .collect()
}

/// `overhead −81%; end to end: TTFT −47%, session −12%` (or `baseline` for the http row,
/// `-` when there is nothing to compare): the transport part first, then the end-to-end
/// figures, whose cause the lines under the table attribute.
fn vs_http_text(c: &CellSummary) -> String {
    if c.transport == "http" {
        return "baseline".to_string();
    }
    let part = |ms: &[(Metric, &str)]| -> Vec<String> {
        ms.iter()
            .filter_map(|(m, label)| {
                c.vs_http
                    .get(m.name())
                    .map(|p| format!("{label} {}", percent(*p)))
            })
            .collect()
    };
    let transport = part(&[
        (Metric::Overhead, "overhead"),
        (Metric::TpotOverhead, "per-token overhead"),
    ]);
    let e2e = part(&[(Metric::Ttft, "TTFT"), (Metric::SessionWall, "session")]);
    match (transport.is_empty(), e2e.is_empty()) {
        (true, true) => "-".to_string(),
        (false, true) => transport.join(", "),
        (true, false) => format!("end to end: {}", e2e.join(", ")),
        (false, false) => format!("{}; end to end: {}", transport.join(", "), e2e.join(", ")),
    }
}

/// `−81%`, `+12%`, `±0%` (a real minus sign, rounded to whole percent).
pub fn percent(p: f64) -> String {
    let r = p.round();
    if r == 0.0 {
        "±0%".to_string()
    } else if r < 0.0 {
        format!("\u{2212}{}%", -r)
    } else {
        format!("+{r}%")
    }
}

/// Three significant-ish figures: `0.83`, `41.2`, `1234`.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if a < 10.0 {
        format!("{v:.2}")
    } else if a < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Chunk, OutcomeKind, RequestRecord, SessionRecord, TokenSource};

    /// A request with exact integer-ms phases on an `intended = dispatch = 0` origin.
    fn req(
        transport: &str,
        first_event_ms: u64,
        ttft_ms: u64,
        tokens: u32,
        gap_ms: u64,
    ) -> RequestRecord {
        let ms = 1_000_000;
        let chunks: Vec<Chunk> = (0..u64::from(tokens))
            .map(|i| Chunk {
                at_ns: (ttft_ms + i * gap_ms) * ms,
                tokens: 1,
                text_bytes: 4,
            })
            .collect();
        let last = chunks.last().map_or(0, |c| c.at_ns);
        RequestRecord {
            target: "sim".into(),
            transport: transport.parse().unwrap(),
            first_event_ns: Some(first_event_ms * ms),
            first_token_ns: Some(ttft_ms * ms),
            last_token_ns: Some(last),
            end_ns: Some(last),
            output_tokens: tokens,
            token_source: TokenSource::ServerUsage,
            chunks,
            ..Default::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        // Histograms keep 3 significant digits: values land within 0.1 %.
        (a - b).abs() <= b.abs() * 1e-3 + 1e-9
    }

    #[test]
    fn metric_summary_exact_on_small_values() {
        // Values below 2048 are exact at 3 significant digits.
        let mut h = crate::recorder::new_histogram();
        for v in [100u64, 200, 300, 400] {
            h.record(v).unwrap();
        }
        let s = MetricSummary::of(Metric::BytesSent, &h).unwrap();
        assert_eq!(s.unit, "bytes");
        assert_eq!(s.count, 4);
        assert_eq!(s.min, 100.0);
        assert_eq!(s.max, 400.0);
        assert_eq!(s.mean, 250.0);
        assert_eq!(s.p50, 200.0);
        assert_eq!(s.p90, 400.0);
        assert!(
            // Written to six decimals.
            (s.stdev - 111.803_398_874_989_5).abs() < 1e-6,
            "{}",
            s.stdev
        );
        let mut t = crate::recorder::new_histogram();
        t.record(1500).unwrap(); // 1.5 tok/s stored as milli-tokens/s
        assert_eq!(MetricSummary::of(Metric::OutputTokS, &t).unwrap().p50, 1.5);
    }

    #[test]
    fn summary_and_vs_http() {
        let mut rec = Recorder::new();
        // http: first event 100 ms, TTFT 200 ms; ws: 20 ms and 100 ms. 11 tokens 10 ms apart.
        rec.add_request(&req("http", 100, 200, 11, 10));
        rec.add_request(&req("ws", 20, 100, 11, 10));
        rec.add_request(&RequestRecord {
            outcome: OutcomeKind::Timeout,
            ..req("ws", 1, 1, 1, 1)
        });
        rec.add_session(&SessionRecord {
            target: "sim".into(),
            transport: crate::vocab::TransportKind::Ws,
            start_ns: 0,
            end_ns: 3_000_000_000,
            requests: 2,
            failed: 0,
            ..Default::default()
        });
        let s = Summary::from_recorder(&rec);
        assert_eq!(s.schema_version, 1);
        assert_eq!(s.cells.len(), 2);
        let http = s.cell("sim", "http").unwrap();
        let ws = s.cell("sim", "ws").unwrap();
        assert_eq!((ws.requests, ws.ok, ws.failed, ws.cancelled), (2, 1, 1, 0));
        assert_eq!(ws.error_rate, 0.5);
        assert_eq!(ws.by_outcome.get("timeout"), Some(&1));
        // 11 tokens from intended start 0 to the last token at 200 ms.
        assert!((ws.span_s - 0.2).abs() < 1e-12 && (ws.aggregate_output_tok_s - 55.0).abs() < 1e-9);
        assert!(close(http.metric(Metric::Ttft).unwrap().p50, 200.0));
        assert!(close(ws.metric(Metric::Overhead).unwrap().p50, 20.0));
        assert!(close(ws.metric(Metric::Tpot).unwrap().p50, 10.0));
        assert!(close(ws.metric(Metric::E2e).unwrap().p50, 200.0));
        assert!(close(ws.metric(Metric::SessionWall).unwrap().p50, 3000.0));
        assert_eq!(ws.metric(Metric::Itl).unwrap().count, 10);
        // 10 tokens after the first over 100 ms = 100 tok/s.
        assert!(close(ws.metric(Metric::DecodeTokS).unwrap().p50, 100.0));
        assert!(http.vs_http.is_empty());
        // overhead 20 vs 100 ms → −80 %; TTFT 100 vs 200 → −50 %; e2e 200 vs 300 → −33.3 %.
        assert!(
            (ws.vs_http["overhead"] + 80.0).abs() < 0.2,
            "{:?}",
            ws.vs_http
        );
        assert!((ws.vs_http["ttft"] + 50.0).abs() < 0.2);
        assert!((ws.vs_http["e2e"] + 33.33).abs() < 0.2);
        assert!((ws.vs_http["tpot"]).abs() < 0.2);
        assert!(
            !ws.vs_http.contains_key("session_wall"),
            "http has no sessions"
        );

        let t = table(&s);
        println!("{t}");
        assert!(
            t.contains("overhead \u{2212}80%; end to end: TTFT \u{2212}50%"),
            "{t}"
        );
        // No server timing on either side: the TTFT and TPOT changes cannot be attributed.
        let notes = &ws.attribution.as_ref().unwrap().notes;
        assert_eq!(notes.len(), 1, "TPOT did not change: {notes:?}");
        assert!(notes[0].starts_with("TTFT \u{2212}50% vs http: the delta cannot be attributed (the server reported no timing)"), "{notes:?}");
        assert!(
            t.contains("sim × ws: TTFT \u{2212}50% vs http: the delta cannot"),
            "{t}"
        );
        assert!(
            t.lines().nth(2).unwrap().starts_with("sim     http "),
            "{t}"
        );
        assert!(t.contains("baseline"));
        // JSON round trip keeps everything.
        let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn server_timing_splits_ttft_and_tpot_and_busy_time_is_the_cells_own() {
        // http: the server took 40 ms to the first token and 10 ms/token; the client saw
        // 41 ms and 11 ms. http-pooled: the server 10 ms and 2 ms/token; the client 10.5 and 2.5.
        let timed = |transport: &str, server: (f64, f64), client: (u64, u64), start_ms: u64| {
            let mut r = req(transport, client.0, client.0, 11, client.1);
            r.server_timing = Some(crate::vocab::ServerTiming {
                source: "llamacpp-timings".into(),
                ttft_ms: Some(server.0),
                total_ms: Some(server.0 + 10.0 * server.1),
                ..Default::default()
            });
            let shift = |t: &mut u64| *t += start_ms * 1_000_000;
            shift(&mut r.intended_ns);
            shift(&mut r.dispatch_ns);
            r.first_token_ns.as_mut().map(shift);
            r.last_token_ns.as_mut().map(shift);
            r.end_ns.as_mut().map(shift);
            r
        };
        let mut rec = Recorder::new();
        rec.add_request(&timed("http", (40.0, 10.0), (41, 11), 0));
        rec.add_request(&timed("http-pooled", (10.0, 2.0), (11, 3), 1_000));
        rec.add_request(&timed("http-pooled", (10.0, 2.0), (11, 3), 3_000));
        let s = Summary::from_recorder(&rec);
        let http = s.cell("sim", "http").unwrap();
        let pooled = s.cell("sim", "http-pooled").unwrap();
        let a = pooled.attribution.as_ref().unwrap();
        let (ttft, tpot) = (a.ttft.unwrap(), a.tpot.unwrap());
        assert!(
            close(ttft.server_ms, 10.0) && close(ttft.transport_ms, 1.0),
            "{a:?}"
        );
        assert!(
            close(tpot.server_ms, 2.0) && close(tpot.transport_ms, 1.0),
            "{a:?}"
        );
        let d = a.ttft_vs_http.unwrap();
        assert!(
            (d.server_ms + 30.0).abs() < 0.05 && d.transport_ms.abs() < 0.01,
            "{d:?}"
        );
        assert!(a.notes[0].ends_with("the difference is the server's, not the transport's"));
        assert!(
            a.notes[1].starts_with("TPOT \u{2212}73% vs http: server part \u{2212}8.00 ms"),
            "{:?}",
            a.notes
        );
        assert!(pooled.vs_http.contains_key("tpot_overhead"));
        assert!(http.attribution.as_ref().unwrap().notes.is_empty());
        // Busy time: two 41 ms requests 2 s apart are busy 82 ms of a 2.041 s span.
        assert!((pooled.span_s - 2.041).abs() < 1e-9, "{}", pooled.span_s);
        assert!((pooled.busy_s - 0.082).abs() < 1e-9, "{}", pooled.busy_s);
        assert!((pooled.aggregate_output_tok_s - 22.0 / 0.082).abs() < 1e-6);
    }

    #[test]
    fn goodput_counts_requests_that_met_every_per_request_slo() {
        let slo = crate::plan::Slo {
            ttft: crate::plan::SloBound::parse("150ms").ok(),
            e2e: crate::plan::SloBound::parse("p50<=100ms").ok(),
            ..Default::default()
        };
        let mut rec = Recorder::with_slo(slo);
        // TTFT 100, 200 and 120 ms (11 tokens 10 ms apart: e2e = TTFT + 100 ms); one failure.
        rec.add_request(&req("http", 50, 100, 11, 10));
        rec.add_request(&req("http", 50, 200, 11, 10));
        rec.add_request(&req("http", 50, 120, 11, 10));
        rec.add_request(&RequestRecord {
            outcome: OutcomeKind::Timeout,
            ..req("http", 1, 1, 1, 1)
        });
        let s = Summary::from_recorder(&rec);
        let c = s.cell("sim", "http").unwrap();
        let g = c.goodput.as_ref().unwrap();
        assert_eq!((g.good_requests, g.good_output_tokens), (2, 22));
        // The window: intended start 0 to the last token at 300 ms.
        assert!((g.good_req_s - 2.0 / c.span_s).abs() < 1e-9 && (c.span_s - 0.3).abs() < 1e-9);
        // e2e p50 is 220 ms: the load point misses its percentile SLO.
        assert!(
            !g.slo_met && g.misses[0].starts_with("e2e p50"),
            "{:?}",
            g.misses
        );
        assert!(table(&s).contains("good req/s (tok/s)"), "{}", table(&s));
        // No SLO, no goodput.
        let mut plain = Recorder::new();
        plain.add_request(&req("http", 50, 100, 11, 10));
        assert!(Summary::from_recorder(&plain).cells[0].goodput.is_none());
    }

    #[test]
    fn percent_text() {
        assert_eq!(percent(-81.4), "\u{2212}81%");
        assert_eq!(percent(12.6), "+13%");
        assert_eq!(percent(0.2), "±0%");
    }

    #[test]
    fn cached_share_and_the_cold_cache_warning() {
        let mut rec = Recorder::new();
        // http: nothing reported; ws: 300 of 1000 input tokens cached.
        rec.add_request(&req("http", 10, 20, 3, 1));
        for cached in [100, 200] {
            rec.add_request(&RequestRecord {
                input_tokens: Some(500),
                cached_input_tokens: Some(cached),
                ..req("ws", 10, 20, 3, 1)
            });
        }
        let s = Summary::from_recorder(&rec);
        assert_eq!(s.cell("sim", "http").unwrap().cached_input_share, None);
        let share = s.cell("sim", "ws").unwrap().cached_input_share.unwrap();
        assert!((share - 0.3).abs() < 1e-12);
        assert_eq!(cached_share_text(None), "\u{2014}");
        assert_eq!(cached_share_text(Some(0.0)), "0%");
        assert_eq!(cached_share_text(Some(0.3)), "30%");
        assert_eq!(cached_share_text(Some(0.9967)), "99.7%");
        assert!(table(&s).contains("cached in"));

        let text = "name = \"m\"\n[matrix]\ntargets = [\"sim\"]\ntransports = [\"http\", \"ws\"]\n[targets.sim]\nsim_profile = \"gpu\"\n[[turns]]\nprompt = \"hi\"\n";
        let scenario = crate::scenario::parse("s.toml", text).unwrap();
        let mut o = crate::plan::Overrides::default();
        let plan = crate::plan::build(&scenario, "s.toml", text.as_bytes(), &o).unwrap();
        // As-is asked for nothing: no warning.
        assert!(cold_cache_warnings(&plan, &s).is_empty());
        o.load.cache = Some(crate::vocab::CacheMode::Cold);
        let plan = crate::plan::build(&scenario, "s.toml", text.as_bytes(), &o).unwrap();
        let w = cold_cache_warnings(&plan, &s);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("sim × ws") && w[0].contains("30%"), "{w:?}");

        // A chained WebSocket conversation: the first request (full history, salted) finds
        // nothing cached; the continuations' stored conversation is cached by design. The
        // whole share is high, the share a cold cell is judged by is 0: no warning.
        let mut chained = Recorder::new();
        chained.add_request(&RequestRecord {
            input_tokens: Some(400),
            cached_input_tokens: Some(0),
            ..req("ws", 10, 20, 3, 1)
        });
        for _ in 0..3 {
            chained.add_request(&RequestRecord {
                input_tokens: Some(1000),
                cached_input_tokens: Some(900),
                chaining: crate::vocab::Chaining::PreviousResponseId,
                ..req("ws", 10, 20, 3, 1)
            });
        }
        let cs = Summary::from_recorder(&chained);
        let ws = cs.cell("sim", "ws").unwrap();
        assert!(ws.cached_input_share.unwrap() > 0.75);
        assert_eq!(ws.unchained_cached_input_share, Some(0.0));
        assert!(cold_cache_warnings(&plan, &cs).is_empty());
    }
}
