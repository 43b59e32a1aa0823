//! What the gate compares and how strict it is: the gated metrics, their statistics, the
//! default noise bands (and why), the minimum sample counts, and user thresholds
//! (`--threshold ttft=+10%`, the scenario's `[gate]` table).
//!
//! Owns: gate metric names and aliases, threshold parsing and validation.
//! Does not own: sample extraction (see `samples`) or the statistics (see `stats`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A metric the gate compares. Each maps onto one definition of the recorder's catalogue
/// (`recorder::Metric`), except `error_rate`, which is a proportion of requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMetric {
    /// Time to first content token from the intended start, ms.
    Ttft,
    /// Time per output token after the first, ms.
    Tpot,
    /// Gap between consecutive content chunks, ms (resampled per request, see `stats`).
    Itl,
    /// Intended start to last content token, ms.
    E2e,
    /// Round-trip overhead (client TTFT − server TTFT, or dispatch → first event), ms.
    Overhead,
    /// Output tokens per second over the whole request (mean over requests).
    OutputTokS,
    /// Decode rate: tokens after the first chunk over the first-to-last token span
    /// (mean over requests).
    DecodeTokS,
    /// Session wall time, ms (sessions without failures).
    SessionWall,
    /// Failed requests / measured requests (cancelled ones excluded), compared in
    /// percentage points.
    ErrorRate,
    /// DNS + TCP + TLS + WebSocket upgrade of requests that opened a connection, ms.
    ConnectionSetup,
}

/// A statistic of a metric's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Statistic {
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// Arithmetic mean.
    Mean,
    /// A proportion (failed / measured).
    Rate,
}

impl Statistic {
    /// `p50`, `p90`, `p99`, `mean`, `rate`.
    pub fn name(self) -> &'static str {
        match self {
            Statistic::P50 => "p50",
            Statistic::P90 => "p90",
            Statistic::P99 => "p99",
            Statistic::Mean => "mean",
            Statistic::Rate => "rate",
        }
    }

    /// The quantile, for percentiles.
    pub fn quantile(self) -> Option<f64> {
        match self {
            Statistic::P50 => Some(0.50),
            Statistic::P90 => Some(0.90),
            Statistic::P99 => Some(0.99),
            Statistic::Mean | Statistic::Rate => None,
        }
    }

    /// Fewest samples per side before the gate decides anything. For a quantile q we ask
    /// for at least 5 samples beyond it (n ≥ 5 / (1 − q)): with fewer, the bootstrap
    /// distribution of the order statistic is a handful of repeated values and its interval
    /// means nothing. So p50 needs 10, p90 50, p99 500; means and rates need 10.
    pub fn min_samples(self) -> usize {
        match self {
            Statistic::P50 | Statistic::Mean | Statistic::Rate => 10,
            Statistic::P90 => 50,
            Statistic::P99 => 500,
        }
    }

    /// How much wider than the metric's noise band this statistic's band is: 1 for
    /// medians, means and rates, 1.5 for p90, 2 for p99. A tail depends on the few slowest
    /// requests, and those are the ones a transient disturbance (a neighbour's build, a GC
    /// pause, a retransmit) produces, so tails drift between runs more than medians do.
    /// Measured: A/A runs against the simulator on a loaded 2-core host moved TTFT p50 by
    /// ≤ 2 % but p90 by up to 7 %.
    pub fn noise_scale(self) -> f64 {
        match self {
            Statistic::P90 => 1.5,
            Statistic::P99 => 2.0,
            Statistic::P50 | Statistic::Mean | Statistic::Rate => 1.0,
        }
    }

    fn parse(s: &str) -> Option<Statistic> {
        [
            Statistic::P50,
            Statistic::P90,
            Statistic::P99,
            Statistic::Mean,
            Statistic::Rate,
        ]
        .into_iter()
        .find(|st| st.name() == s)
    }
}

/// Fewest fresh connections per side before `connection_setup` is gated.
pub const MIN_FRESH_CONNECTIONS: usize = 50;

/// The power rule: a row is gated only when the 95 % interval of a zero difference at its
/// sample sizes and dispersion (the baseline resampled against itself) has a half-width of
/// at most this share of its noise band. Then an A/A pair lands inside the band (a
/// `no-change`) in at least ~95 % of comparisons from sampling alone, and a change of twice
/// the band is caught; a row whose samples cannot do that is "not gated: too few samples".
pub const POWER_SHARE: f64 = 0.5;

/// The dispatch-lag rule: a row whose metric the harness's dispatch lag enters
/// ([`GateMetric::dispatch_lag_enters`]) is not gated when a run that judged itself
/// harness-bound for that lag alone had a lag (at the row's statistic) over this share of
/// the row's band in the metric's unit. A lag that large can move the row by a good part of
/// its band on its own, so a decision there would be the harness's, not the target's (a
/// regression stays a regression: it is never hidden, only annotated).
pub const LAG_SHARE: f64 = 0.25;

/// The unit family of a gate metric, for thresholds and display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A duration, shown in ms.
    Time,
    /// A rate in tokens per second.
    TokensPerSecond,
    /// A proportion, shown and thresholded in percentage points.
    Proportion,
}

/// The metrics one `--metrics` value names: a comma-separated list (empty items skipped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricList(pub Vec<GateMetric>);

impl MetricList {
    /// Parses one `--metrics` value (clap's value parser); names and aliases as
    /// [`GateMetric::parse`].
    pub fn parse(value: &str) -> Result<MetricList, String> {
        value
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                GateMetric::parse(s).ok_or_else(|| {
                    format!(
                        "unknown metric {s:?}; use any of: {}",
                        GateMetric::ALL.map(|m| m.name()).join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()
            .map(MetricList)
    }
}

impl GateMetric {
    /// Every gate metric, in the order tables show them.
    pub const ALL: [GateMetric; 10] = [
        GateMetric::Ttft,
        GateMetric::Tpot,
        GateMetric::Itl,
        GateMetric::E2e,
        GateMetric::Overhead,
        GateMetric::OutputTokS,
        GateMetric::DecodeTokS,
        GateMetric::SessionWall,
        GateMetric::ErrorRate,
        GateMetric::ConnectionSetup,
    ];

    /// The stable name (same as the recorder's metric name where one exists).
    pub fn name(self) -> &'static str {
        match self {
            GateMetric::Ttft => "ttft",
            GateMetric::Tpot => "tpot",
            GateMetric::Itl => "itl",
            GateMetric::E2e => "e2e",
            GateMetric::Overhead => "overhead",
            GateMetric::OutputTokS => "output_tok_s",
            GateMetric::DecodeTokS => "decode_tok_s",
            GateMetric::SessionWall => "session_wall",
            GateMetric::ErrorRate => "error_rate",
            GateMetric::ConnectionSetup => "connection_setup",
        }
    }

    /// Parses a name or alias (`tok_s`, `throughput`, `session`, `errors`); `-` and `_`
    /// are interchangeable and case is ignored.
    pub fn parse(s: &str) -> Option<GateMetric> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        let alias = match s.as_str() {
            "tok_s" | "throughput" | "output_tokens_per_s" => Some(GateMetric::OutputTokS),
            "decode" | "decode_rate" => Some(GateMetric::DecodeTokS),
            "session" | "session_time" => Some(GateMetric::SessionWall),
            "errors" | "error" => Some(GateMetric::ErrorRate),
            "connect" | "setup" => Some(GateMetric::ConnectionSetup),
            _ => None,
        };
        alias.or_else(|| GateMetric::ALL.into_iter().find(|m| m.name() == s))
    }

    /// True when the harness's dispatch lag (a request sent later than planned) enters the
    /// metric: the latencies counted from the intended start (`ttft`, `e2e`,
    /// `session_wall`) and `output_tok_s` (tokens over that E2E). Not `overhead` (counted
    /// from the actual send), `tpot`, `itl`, `decode_tok_s` (after the first token),
    /// `connection_setup` or `error_rate`.
    pub fn dispatch_lag_enters(self) -> bool {
        matches!(
            self,
            GateMetric::Ttft | GateMetric::E2e | GateMetric::SessionWall | GateMetric::OutputTokS
        )
    }

    /// The unit family.
    pub fn kind(self) -> Kind {
        match self {
            GateMetric::OutputTokS | GateMetric::DecodeTokS => Kind::TokensPerSecond,
            GateMetric::ErrorRate => Kind::Proportion,
            _ => Kind::Time,
        }
    }

    /// The unit values are shown in.
    pub fn unit(self) -> &'static str {
        match self.kind() {
            Kind::Time => "ms",
            Kind::TokensPerSecond => "tok/s",
            Kind::Proportion => "%",
        }
    }

    /// True when bigger is better (throughput); latencies and error rates are worse when
    /// they grow.
    pub fn higher_is_better(self) -> bool {
        matches!(self, GateMetric::OutputTokS | GateMetric::DecodeTokS)
    }

    /// The statistics compared by default. Latencies: the median and two tails. Session
    /// wall time: p50 and p90 only (a run has few sessions; p99 would need 500). Throughput:
    /// the median of per-request rates (not the mean: one request whose chunks a stall
    /// bunched together reads 195,316 tok/s against a profile of 250 and moves a mean by
    /// hundreds of percent; the median does not notice). Error rate: the proportion.
    pub fn statistics(self) -> &'static [Statistic] {
        match self {
            GateMetric::OutputTokS | GateMetric::DecodeTokS => &[Statistic::P50],
            GateMetric::SessionWall => &[Statistic::P50, Statistic::P90],
            GateMetric::ErrorRate => &[Statistic::Rate],
            GateMetric::ConnectionSetup => &[Statistic::P50],
            _ => &[Statistic::P50, Statistic::P90, Statistic::P99],
        }
    }

    /// True when the gate compares this metric without being asked. Everything except
    /// `itl`: chunk gaps measure how the client's reads happened to coalesce frames and how
    /// the scheduler woke it as much as the server (several chunks in one read give gaps of
    /// 0; a descheduled client gives one long gap), so their percentiles swing between runs
    /// on a shared machine far more than resampling one run can show. Measured: A/A runs
    /// against the simulator on a loaded 2-core host flagged `itl` p90/p99 in 5 of 20
    /// pairs. Decode speed is gated robustly by `tpot` and `decode_tok_s` (per-request
    /// averages). `itl` is compared when named in `--metrics` or given a threshold.
    ///
    /// The length-dependent metrics ([`GateMetric::length_dependent`]) are gated by default
    /// only when both sides replayed the same conversation, and then paired request by
    /// request (see `compare::compare`).
    ///
    /// Not `connection_setup` either: a run opens its connections in a burst at its start
    /// (a pooled transport a handful, WebSocket one per session under the concurrency cap),
    /// so the whole row follows the machine's load during that second. Measured beside five
    /// parallel builds (load 12): 2 of 50 A/A pairs flagged WebSocket `connection_setup p50` at
    /// +131 % and +155 % (168 fresh connections a side); they were its only first-comparison
    /// alarms. Compared when named in `--metrics` or given a threshold.
    pub fn gated_by_default(self) -> bool {
        !matches!(self, GateMetric::Itl | GateMetric::ConnectionSetup) && !self.length_dependent()
    }

    /// True for metrics that move with the drawn input or output lengths as much as with
    /// the system: `e2e`, `output_tok_s` (tokens / E2E, so short answers look slow) and
    /// `session_wall`. Between two seeds, or against a real model that draws new lengths
    /// every run, these moved 5–8 % with no change in the system; decode rate, TPOT, TTFT,
    /// overhead, connection setup and the error rate do not depend on how long the answers
    /// were.
    pub fn length_dependent(self) -> bool {
        matches!(
            self,
            GateMetric::E2e | GateMetric::OutputTokS | GateMetric::SessionWall
        )
    }

    /// The default noise band (for medians and means; tails get a multiple, see
    /// [`Statistic::noise_scale`]): relative changes smaller than this (as a fraction; for
    /// `error_rate`, percentage points as a fraction) are never called a regression or an
    /// improvement, however narrow the confidence interval. It stands for the run-to-run
    /// drift that resampling one run cannot see (another CI runner, a busier host, a
    /// different network path). criterion uses 1 % for CPU micro-benchmarks; network
    /// latencies drift more:
    ///
    /// * `ttft`, `e2e`, `session_wall`, `tpot`, `output_tok_s`, `decode_tok_s`: 5 %. These are sums of many
    ///   steps (prefill, decode, RTTs) and on a quiet runner repeat within a few percent.
    /// * `overhead`: 10 %. A small figure (a few ms) dominated by scheduler and network jitter.
    /// * `itl`: 10 %. Per-chunk gaps depend on how the server batches tokens into chunks
    ///   (speculative-decoding bursts), and the tails swing with it.
    /// * `error_rate`: 2 percentage points. With the few hundred requests of a CI run a
    ///   smaller difference cannot be resolved (the 95 % Wilson upper bound of 0 failures in
    ///   200 is 1.9 %), so a tighter default would make every clean run "inconclusive".
    pub fn default_noise(self) -> f64 {
        match self {
            GateMetric::Overhead | GateMetric::Itl | GateMetric::ConnectionSetup => 0.10,
            GateMetric::ErrorRate => 0.02,
            _ => 0.05,
        }
    }

    /// Fewest samples per side this metric needs before any of its rows is gated, on top of
    /// the statistic's own minimum ([`Statistic::min_samples`]). `connection_setup` is a
    /// per-connection figure: only requests that opened a connection carry it, and a pooled
    /// transport opens a handful per run, all at its start, so they follow the machine's
    /// load at that moment (A/A pairs moved it −29 % … +73 %). It needs
    /// [`MIN_FRESH_CONNECTIONS`] fresh connections per side; every other metric 10.
    pub fn min_samples(self) -> usize {
        match self {
            GateMetric::ConnectionSetup => MIN_FRESH_CONNECTIONS,
            _ => 10,
        }
    }

    /// An absolute floor under the noise band, in the metric's unit (ms), for tiny values:
    /// a 5 % band on a 0.2 ms overhead is 10 µs, far below timer and scheduler jitter
    /// (tokio wakes in ~1 ms steps on a loaded runner). 0.5 ms for request- and
    /// session-level times, 20 µs for per-token and per-chunk times; none for throughput
    /// and error rate.
    pub fn noise_floor(self) -> f64 {
        match self {
            GateMetric::Ttft
            | GateMetric::E2e
            | GateMetric::Overhead
            | GateMetric::SessionWall
            | GateMetric::ConnectionSetup => 0.5,
            GateMetric::Tpot | GateMetric::Itl => 0.02,
            GateMetric::OutputTokS | GateMetric::DecodeTokS | GateMetric::ErrorRate => 0.0,
        }
    }
}

impl GateMetric {
    /// Why the metric's default band is what it is, one line (the band table's last column).
    pub fn why(self) -> &'static str {
        match self {
            GateMetric::Ttft => "sums of prefill, API work and RTTs repeat within a few percent on a quiet runner",
            GateMetric::Tpot => "decode speed is stable per deployment",
            GateMetric::Itl => "chunk gaps reflect how the client's reads coalesced frames and when the scheduler woke it as much as the server (A/A runs flagged p90/p99 in 5 of 20 pairs); `tpot` and `decode_tok_s` gate decode speed robustly",
            GateMetric::E2e => "as TTFT, plus the drawn output lengths",
            GateMetric::Overhead => "a few ms, dominated by scheduler and network jitter",
            GateMetric::OutputTokS => "whole-request throughput (includes TTFT); the median, so one stalled request cannot move it",
            GateMetric::DecodeTokS => "decode rate after the first chunk; the median, so one stalled request cannot move it",
            GateMetric::SessionWall => "a run has few sessions; p99 would need 500",
            GateMetric::ErrorRate => "a few hundred requests cannot resolve less (the 95 % upper bound of 0 failures in 200 is 1.9 %)",
            GateMetric::ConnectionSetup => "fresh connections only; a run opens them in a burst at its start, so the row follows the machine's load in that second (A/A pairs beside five parallel builds, load 12: +131 % and +155 % in 2 of 50)",
        }
    }

    /// When the metric is gated without being named, in words.
    pub fn gated_when(self) -> &'static str {
        if self.gated_by_default() {
            "always"
        } else if self.length_dependent() {
            "when both sides replayed the same conversation"
        } else {
            "only when named in `--metrics` or a threshold"
        }
    }

    /// The default band, in words (`5 % (floor 0.5 ms)`; p90 1.5×, p99 2×).
    pub fn band_words(self) -> String {
        let noise = self.default_noise() * 100.0;
        if self.kind() == Kind::Proportion {
            return format!("{} percentage points", trim(noise));
        }
        let floor = self.noise_floor();
        if floor >= 0.1 {
            format!("{} % (floor {} ms)", trim(noise), trim(floor))
        } else if floor > 0.0 {
            format!("{} % (floor {} µs)", trim(noise), trim(floor * 1e3))
        } else {
            format!("{} %", trim(noise))
        }
    }
}

/// The table of gated metrics, their statistics, default bands and when each is gated, in
/// Markdown: the one source of `docs/compare-gate.md`'s table (a test checks the page holds
/// it verbatim) and of `compare --metrics`'s help ([`metrics_help`]).
pub fn defaults_table() -> String {
    let mut out = String::from(
        "| metric | statistics | direction | default band | gated by default | min. samples per side | why this band |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for m in GateMetric::ALL {
        let stats: Vec<&str> = m.statistics().iter().map(|s| s.name()).collect();
        let dir = if m.higher_is_better() {
            "higher is better"
        } else {
            "lower is better"
        };
        out.push_str(&format!(
            "| `{}` | {} | {dir} | {} | {} | {} | {} |\n",
            m.name(),
            stats.join(", "),
            m.band_words(),
            m.gated_when(),
            m.min_samples(),
            m.why()
        ));
    }
    out
}

/// `compare --metrics`'s long help, generated from the same data as [`defaults_table`].
pub fn metrics_help() -> String {
    let mut out = String::from(
        "Metrics to compare (comma-separated). Default: every metric gated \"always\" below, the \
         length-dependent ones when both sides replayed the same conversation, plus any metric a \
         threshold names. p90 bands are 1.5×, p99 2× the band shown. A row is gated only when its \
         samples can decide at its band (docs/compare-gate.md, \"The power rule\").\n",
    );
    for m in GateMetric::ALL {
        let stats: Vec<&str> = m.statistics().iter().map(|s| s.name()).collect();
        out.push_str(&format!(
            "\n  {:<17} {}; band {}; gated {}",
            m.name(),
            stats.join(", "),
            m.band_words(),
            m.gated_when().replace('`', "")
        ));
    }
    out
}

impl std::fmt::Display for GateMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How much worsening a user allows before the gate fails.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Threshold {
    /// A fraction of the baseline's statistic (`+10%` → 0.10).
    Relative(f64),
    /// An amount in the metric's unit: ms for times, tok/s for throughput, percentage
    /// points (as a fraction) for the error rate.
    Absolute(f64),
}

impl Threshold {
    /// The threshold as a fraction of `baseline` (for `error_rate`, in points already).
    pub fn relative_to(self, baseline: f64, metric: GateMetric) -> f64 {
        match (self, metric.kind()) {
            (Threshold::Relative(r), _) | (Threshold::Absolute(r), Kind::Proportion) => r,
            (Threshold::Absolute(a), _) if baseline.abs() > 0.0 => a / baseline.abs(),
            (Threshold::Absolute(_), _) => f64::INFINITY,
        }
    }

    /// `+10%`, `+5ms`, `-50tok/s`, `+1pp`, signed in the metric's worse direction.
    pub fn display(self, metric: GateMetric) -> String {
        let sign = if metric.higher_is_better() { '-' } else { '+' };
        match (self, metric.kind()) {
            (Threshold::Relative(r), Kind::Proportion)
            | (Threshold::Absolute(r), Kind::Proportion) => {
                format!("{sign}{}pp", trim(r * 100.0))
            }
            (Threshold::Relative(r), _) => format!("{sign}{}%", trim(r * 100.0)),
            (Threshold::Absolute(a), Kind::Time) => format!("{sign}{}ms", trim(a)),
            (Threshold::Absolute(a), Kind::TokensPerSecond) => format!("{sign}{}tok/s", trim(a)),
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A bad threshold; the message names the source (`--threshold` or `[gate]`) and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name} {spec:?}: {message}")]
pub struct ThresholdError {
    /// `--threshold` or `[gate] in <scenario>`.
    pub source_name: String,
    /// The offending text.
    pub spec: String,
    /// What is wrong and how to write it.
    pub message: String,
}

/// Thresholds by metric, optionally narrowed to one statistic (`ttft.p99=+20%`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Thresholds {
    map: BTreeMap<(GateMetric, Option<Statistic>), Threshold>,
}

impl Thresholds {
    /// No thresholds: the noise bands alone decide.
    pub fn new() -> Self {
        Self::default()
    }

    /// The threshold for a metric's statistic: the statistic-specific one, else the
    /// metric-wide one.
    pub fn get(&self, metric: GateMetric, stat: Statistic) -> Option<Threshold> {
        self.map
            .get(&(metric, Some(stat)))
            .or_else(|| self.map.get(&(metric, None)))
            .copied()
    }

    /// Sets one threshold (replacing an earlier one for the same key).
    pub fn set(&mut self, metric: GateMetric, stat: Option<Statistic>, t: Threshold) {
        self.map.insert((metric, stat), t);
    }

    /// Layers `other` on top (CLI over scenario).
    pub fn extend(&mut self, other: &Thresholds) {
        for (k, v) in &other.map {
            self.map.insert(*k, *v);
        }
    }

    /// Parses `METRIC[.STAT]=VALUE` pairs as given to `--threshold`.
    pub fn parse_cli<S: AsRef<str>>(specs: &[S]) -> Result<Thresholds, ThresholdError> {
        let mut t = Thresholds::new();
        for spec in specs {
            let spec = spec.as_ref();
            let err = |message: String| ThresholdError {
                source_name: "--threshold".into(),
                spec: spec.to_string(),
                message,
            };
            let (key, value) = spec.split_once('=').ok_or_else(|| {
                err("expected METRIC=VALUE, e.g. --threshold ttft=+10% or --threshold overhead=+5ms".into())
            })?;
            let (m, st, th) = parse_pair(key, value).map_err(err)?;
            t.set(m, st, th);
        }
        Ok(t)
    }

    /// Parses a scenario's `[gate]` table (`ttft = "+10%"`). `scenario` names the file in
    /// error messages.
    pub fn parse_gate(
        table: &BTreeMap<String, String>,
        scenario: &str,
    ) -> Result<Thresholds, ThresholdError> {
        let mut t = Thresholds::new();
        for (key, value) in table {
            let (m, st, th) = parse_pair(key, value).map_err(|message| ThresholdError {
                source_name: format!("[gate] in {scenario}:"),
                spec: format!("{key} = \"{value}\""),
                message,
            })?;
            t.set(m, st, th);
        }
        Ok(t)
    }

    /// True when any threshold names `metric`.
    pub fn mentions(&self, metric: GateMetric) -> bool {
        self.map.keys().any(|(m, _)| *m == metric)
    }

    /// Every threshold, for reports: (`ttft` or `ttft.p99`, `+10%`).
    pub fn describe(&self) -> Vec<(String, String)> {
        self.map
            .iter()
            .map(|((m, st), t)| {
                let key = match st {
                    Some(st) => format!("{}.{}", m.name(), st.name()),
                    None => m.name().to_string(),
                };
                (key, t.display(*m))
            })
            .collect()
    }
}

fn known_metrics() -> String {
    GateMetric::ALL.map(|m| m.name()).join(", ")
}

/// `ttft` / `ttft.p99` + `+10%` → (metric, statistic, threshold).
fn parse_pair(
    key: &str,
    value: &str,
) -> Result<(GateMetric, Option<Statistic>, Threshold), String> {
    let key = key.trim();
    let (mname, sname) = match key.split_once(['.', ':']) {
        Some((m, s)) => (m, Some(s)),
        None => (key, None),
    };
    let metric = GateMetric::parse(mname)
        .ok_or_else(|| format!("unknown metric {mname:?}; known: {}", known_metrics()))?;
    let stat = match sname {
        None => None,
        Some(s) => {
            let st = Statistic::parse(&s.trim().to_ascii_lowercase()).ok_or_else(|| {
                format!("unknown statistic {s:?}; use p50, p90, p99, mean or rate")
            })?;
            if !metric.statistics().contains(&st) {
                let have: Vec<&str> = metric.statistics().iter().map(|s| s.name()).collect();
                return Err(format!(
                    "{} is compared on {}; a threshold on {} would never apply",
                    metric.name(),
                    have.join(", "),
                    st.name()
                ));
            }
            Some(st)
        }
    };
    Ok((metric, stat, parse_value(metric, value.trim())?))
}

fn parse_value(metric: GateMetric, v: &str) -> Result<Threshold, String> {
    let worse_sign = if metric.higher_is_better() { '-' } else { '+' };
    let example = match metric.kind() {
        Kind::Time => format!("{worse_sign}10% or {worse_sign}5ms"),
        Kind::TokensPerSecond => format!("{worse_sign}10% or {worse_sign}50tok/s"),
        Kind::Proportion => format!("{worse_sign}1pp"),
    };
    let (sign, rest) = match v.chars().next() {
        Some(c @ ('+' | '-')) => (Some(c), &v[1..]),
        Some('±') => (None, &v['±'.len_utf8()..]),
        _ => (None, v),
    };
    if let Some(s) = sign {
        if s != worse_sign {
            let dir = if metric.higher_is_better() {
                "lower"
            } else {
                "higher"
            };
            return Err(format!(
                "a threshold is how much worse the candidate may be before the gate fails, and \
                 for {} worse means {dir}; write {}={example}",
                metric.name(),
                metric.name()
            ));
        }
    }
    let rest = rest.trim();
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, unit) = rest.split_at(split);
    let x: f64 = num
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("{v:?} is not a number with a unit; write e.g. {example}"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let bad_unit = || {
        format!(
            "unit {unit:?} does not fit {} ({}); write e.g. {example}",
            metric.name(),
            metric.unit()
        )
    };
    match (metric.kind(), unit.as_str()) {
        (Kind::Proportion, "%" | "pp") => Ok(Threshold::Absolute(x / 100.0)),
        (Kind::Proportion, _) => Err(bad_unit()),
        (_, "%") => Ok(Threshold::Relative(x / 100.0)),
        (Kind::Time, "ms") => Ok(Threshold::Absolute(x)),
        (Kind::Time, "us" | "µs") => Ok(Threshold::Absolute(x / 1e3)),
        (Kind::Time, "s") => Ok(Threshold::Absolute(x * 1e3)),
        (Kind::TokensPerSecond, "tok/s") => Ok(Threshold::Absolute(x)),
        _ => Err(bad_unit()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_thresholds() {
        let t = Thresholds::parse_cli(&[
            "ttft=+10%",
            "overhead=+5ms",
            "tok_s=-50tok/s",
            "error_rate=1pp",
            "itl.p99=+25%",
            "tpot=300us",
        ])
        .unwrap();
        assert_eq!(
            t.get(GateMetric::Ttft, Statistic::P50),
            Some(Threshold::Relative(0.10))
        );
        assert_eq!(
            t.get(GateMetric::Overhead, Statistic::P99),
            Some(Threshold::Absolute(5.0))
        );
        assert_eq!(
            t.get(GateMetric::OutputTokS, Statistic::Mean),
            Some(Threshold::Absolute(50.0))
        );
        assert_eq!(
            t.get(GateMetric::ErrorRate, Statistic::Rate),
            Some(Threshold::Absolute(0.01))
        );
        assert_eq!(t.get(GateMetric::Itl, Statistic::P50), None);
        assert_eq!(
            t.get(GateMetric::Itl, Statistic::P99),
            Some(Threshold::Relative(0.25))
        );
        assert_eq!(
            t.get(GateMetric::Tpot, Statistic::P90),
            Some(Threshold::Absolute(0.3))
        );
        assert_eq!(
            Threshold::Relative(0.1).relative_to(40.0, GateMetric::Ttft),
            0.1
        );
        assert_eq!(
            Threshold::Absolute(5.0).relative_to(50.0, GateMetric::Overhead),
            0.1
        );
    }

    #[test]
    fn rejects_bad_thresholds_with_hints() {
        let e = Thresholds::parse_cli(&["ttft=-10%"]).unwrap_err();
        assert!(e.to_string().contains("worse means higher"), "{e}");
        assert!(e.to_string().contains("ttft=+10%"), "{e}");
        let e = Thresholds::parse_cli(&["output_tok_s=+10%"]).unwrap_err();
        assert!(e.to_string().contains("worse means lower"), "{e}");
        let e = Thresholds::parse_cli(&["ttfb=+10%"]).unwrap_err();
        assert!(e.to_string().contains("known: ttft"), "{e}");
        let e = Thresholds::parse_cli(&["ttft"]).unwrap_err();
        assert!(e.to_string().contains("METRIC=VALUE"), "{e}");
        let e = Thresholds::parse_cli(&["ttft=+10tok/s"]).unwrap_err();
        assert!(e.to_string().contains("unit"), "{e}");
        let e = Thresholds::parse_cli(&["session_wall.p99=+10%"]).unwrap_err();
        assert!(e.to_string().contains("never apply"), "{e}");
        let e = Thresholds::parse_cli(&["ttft=+abc%"]).unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
    }

    /// docs/compare-gate.md holds [`defaults_table`] verbatim between its markers
    /// (`UPDATE_SNAPSHOTS=1` rewrites it), and `--metrics`' help names every metric with the
    /// same band words: one source.
    #[test]
    fn band_table_in_the_docs_is_the_codes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/compare-gate.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = (
            "<!-- gate-defaults:begin -->\n",
            "<!-- gate-defaults:end -->",
        );
        let a = doc.find(begin).expect("begin marker") + begin.len();
        let b = doc.find(end).expect("end marker");
        let table = defaults_table();
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, format!("{}{table}{}", &doc[..a], &doc[b..])).unwrap();
        } else {
            assert_eq!(&doc[a..b], table, "regenerate with UPDATE_SNAPSHOTS=1");
        }
        assert!(table.contains("| `connection_setup` | p50 |"), "{table}");
        assert!(
            table.contains("| `decode_tok_s` | p50 | higher is better | 5 % |"),
            "{table}"
        );
        let help = metrics_help();
        for m in GateMetric::ALL {
            assert!(
                help.contains(m.name()) && help.contains(&m.band_words()),
                "{help}"
            );
        }
    }

    #[test]
    fn gate_table_errors_name_the_scenario() {
        let mut table = BTreeMap::new();
        table.insert("ttft".to_string(), "+10%".to_string());
        table.insert("overhead".to_string(), "+5ms".to_string());
        let t = Thresholds::parse_gate(&table, "scenarios/ci.toml").unwrap();
        assert_eq!(
            t.describe(),
            vec![
                ("ttft".to_string(), "+10%".to_string()),
                ("overhead".to_string(), "+5ms".to_string())
            ]
        );
        table.insert("latency".to_string(), "+5ms".to_string());
        let e = Thresholds::parse_gate(&table, "scenarios/ci.toml").unwrap_err();
        assert!(e.to_string().contains("[gate] in scenarios/ci.toml"), "{e}");
        assert!(e.to_string().contains("latency"), "{e}");
    }
}
