//! The run's measurements as an OpenMetrics / Prometheus text exposition: the `metrics.om`
//! file of a run and the body `run --metrics-listen` serves at `/metrics`.
//!
//! Owns: which metric families are exposed (names, HELP, UNIT, labels), the quantiles of the
//! summaries, and both text formats: OpenMetrics 1.0 (`application/openmetrics-text`, with
//! `# UNIT` and `# EOF`) and the Prometheus text format 0.0.4 (`text/plain`), which
//! `promtool check metrics` reads. Pure: a [`Recorder`] in, a [`Exposition`] value out, text
//! from it.
//! Does not own: the statistics (the recorder's HdrHistograms are read as they are, with their
//! 3 significant digits), serving them (`runner::metrics_server`) or writing the file
//! (`runner`). See docs/metrics.md.

use std::fmt::Write as _;

use crate::recorder::{CellStats, Metric, Recorder};
use crate::vocab::OutcomeKind;

/// The file a run writes its final exposition to, in OpenMetrics text format.
pub const FILE: &str = "metrics.om";

/// Every metric family's name starts with this.
pub const PREFIX: &str = "spark_bench";

/// The quantiles each summary exposes.
pub const QUANTILES: [f64; 6] = [0.5, 0.9, 0.95, 0.99, 0.999, 1.0];

/// The latency metrics exposed as summaries (seconds), with their family names.
pub const SUMMARIES: [(Metric, &str); 9] = [
    (Metric::Ttft, "ttft"),
    (Metric::TtftDispatch, "ttft_dispatch"),
    (Metric::Itl, "itl"),
    (Metric::Tpot, "tpot"),
    (Metric::E2e, "e2e"),
    (Metric::Overhead, "overhead"),
    (Metric::ConnectionSetup, "connection_setup"),
    (Metric::ServerTtft, "server_ttft"),
    (Metric::ServerTpot, "server_tpot"),
];

/// A text format of the exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// Prometheus text format 0.0.4.
    Prometheus,
}

impl Format {
    /// The format a scraper's `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (Prometheus does), the 0.0.4 text format otherwise.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of a body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// What kind of family (OpenMetrics types; `Info` is a gauge in the 0.0.4 format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Summary,
    Info,
}

/// One sample: the suffix after the family name (`_total`, `_sum`, …), its labels, its value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    suffix: &'static str,
    labels: Vec<(String, String)>,
    value: f64,
}

/// One metric family: name (with its unit suffix), type, unit, help, samples.
#[derive(Debug, Clone, PartialEq)]
struct Family {
    name: String,
    kind: Kind,
    unit: Option<&'static str>,
    help: String,
    samples: Vec<Sample>,
}

/// The run-wide labels and state of one exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The run id (the results directory's name).
    pub run_id: String,
    /// The scenario's name.
    pub scenario: String,
    /// True once the run has ended: the values are final.
    pub complete: bool,
}

/// A snapshot of a run's metrics, renderable in either [`Format`].
#[derive(Debug, Clone, PartialEq)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    /// The metrics of `recorder` (every cell) at this moment.
    pub fn of(recorder: &Recorder, run: &RunInfo) -> Exposition {
        let cells: Vec<(Vec<(String, String)>, &CellStats)> = recorder
            .cells()
            .iter()
            .map(|(k, c)| {
                let labels = vec![
                    ("target".to_string(), k.target.clone()),
                    ("transport".to_string(), k.transport.clone()),
                    ("cell".to_string(), format!("{}/{}", k.target, k.transport)),
                ];
                (labels, c)
            })
            .collect();
        let mut families = vec![run_family(run)];
        for (metric, short) in SUMMARIES {
            families.push(summary_family(metric, short, &cells));
        }
        families.extend(counter_families(&cells));
        Exposition { families }
    }

    /// An exposition before any request finished: the run's own families only.
    pub fn empty(run: &RunInfo) -> Exposition {
        Exposition::of(&Recorder::new(), run)
    }

    /// The exposition as text in `format`.
    pub fn render(&self, format: Format) -> String {
        let mut out = String::new();
        for f in &self.families {
            render_family(&mut out, f, format);
        }
        if format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
    }
}

fn run_family(run: &RunInfo) -> Family {
    Family {
        name: format!("{PREFIX}_run"),
        kind: Kind::Info,
        unit: None,
        help: "the run this exposition belongs to; its complete label turns true once the values are final"
            .to_string(),
        samples: vec![Sample {
            suffix: "_info",
            labels: vec![
                ("run_id".to_string(), run.run_id.clone()),
                ("scenario".to_string(), run.scenario.clone()),
                ("complete".to_string(), run.complete.to_string()),
            ],
            value: 1.0,
        }],
    }
}

fn summary_family(
    metric: Metric,
    short: &str,
    cells: &[(Vec<(String, String)>, &CellStats)],
) -> Family {
    let mut samples = Vec::new();
    for (labels, c) in cells {
        let Some(h) = c.histogram(metric) else {
            continue;
        };
        // Stored nanoseconds → seconds.
        let secs = |ns: f64| ns / 1e9;
        for q in QUANTILES {
            let mut l = labels.clone();
            l.push(("quantile".to_string(), fmt_value(q)));
            samples.push(Sample {
                suffix: "",
                labels: l,
                value: secs(h.value_at_quantile(q) as f64),
            });
        }
        samples.push(Sample {
            suffix: "_sum",
            labels: labels.clone(),
            value: secs(h.mean() * h.len() as f64),
        });
        samples.push(Sample {
            suffix: "_count",
            labels: labels.clone(),
            value: h.len() as f64,
        });
    }
    Family {
        name: format!("{PREFIX}_{short}_seconds"),
        kind: Kind::Summary,
        unit: Some("seconds"),
        help: format!(
            "{} (successful measured requests; HdrHistogram quantiles, 3 significant digits)",
            metric.description()
        ),
        samples,
    }
}

/// A counter family.
fn counter(name: &str, help: &str, samples: Vec<Sample>) -> Family {
    Family {
        name: format!("{PREFIX}_{name}"),
        kind: Kind::Counter,
        unit: None,
        help: help.to_string(),
        samples,
    }
}

fn counter_families(cells: &[(Vec<(String, String)>, &CellStats)]) -> Vec<Family> {
    let with = |labels: &[(String, String)], extra: &[(&str, &str)], value: u64| Sample {
        suffix: "_total",
        labels: labels
            .iter()
            .cloned()
            .chain(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .collect(),
        value: value as f64,
    };
    let mut requests = Vec::new();
    let (mut output, mut input, mut sessions) = (Vec::new(), Vec::new(), Vec::new());
    for (l, c) in cells {
        for o in OutcomeKind::ALL {
            let n = c.by_outcome.get(&o).copied().unwrap_or(0);
            requests.push(with(l, &[("kind", "measured"), ("status", o.as_str())], n));
        }
        requests.push(with(
            l,
            &[("kind", "warmup"), ("status", "any")],
            c.warmup_requests,
        ));
        output.push(with(l, &[], c.output_tokens));
        input.push(with(l, &[], c.input_tokens));
        let ok_sessions = c.sessions.saturating_sub(c.failed_sessions);
        sessions.push(with(
            l,
            &[("kind", "measured"), ("status", "ok")],
            ok_sessions,
        ));
        sessions.push(with(
            l,
            &[("kind", "measured"), ("status", "failed")],
            c.failed_sessions,
        ));
        sessions.push(with(
            l,
            &[("kind", "warmup"), ("status", "any")],
            c.warmup_sessions,
        ));
    }
    vec![
        counter(
            "requests",
            "finished requests by kind (measured, warmup) and status (the outcome; warm-ups are counted, not split)",
            requests,
        ),
        counter(
            "output_tokens",
            "output tokens of successful measured requests (server-reported usage, else the chunk count)",
            output,
        ),
        counter(
            "input_tokens",
            "input tokens of successful measured requests whose server reported them",
            input,
        ),
        counter(
            "sessions",
            "finished sessions by kind and status (failed: at least one request did not end ok)",
            sessions,
        ),
    ]
}

fn render_family(out: &mut String, f: &Family, format: Format) {
    let om = format == Format::OpenMetrics;
    // The 0.0.4 format names a counter by its sample (`_total`) and has no info type.
    let (type_name, kind) = match (f.kind, om) {
        (Kind::Counter, false) => (format!("{}_total", f.name), "counter"),
        (Kind::Info, false) => (format!("{}_info", f.name), "gauge"),
        (Kind::Counter, true) => (f.name.clone(), "counter"),
        (Kind::Info, true) => (f.name.clone(), "info"),
        (Kind::Summary, _) => (f.name.clone(), "summary"),
    };
    let _ = writeln!(out, "# TYPE {type_name} {kind}");
    if let (Some(unit), true) = (f.unit, om) {
        let _ = writeln!(out, "# UNIT {type_name} {unit}");
    }
    let _ = writeln!(out, "# HELP {type_name} {}", escape_help(&f.help, om));
    for s in &f.samples {
        out.push_str(&f.name);
        out.push_str(s.suffix);
        if !s.labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in s.labels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{k}=\"{}\"", escape_label(v));
            }
            out.push('}');
        }
        let _ = writeln!(out, " {}", fmt_value(s.value));
    }
}

/// A sample value as both formats read it: Rust's shortest round-trip decimal.
fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{v}")
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// HELP text: OpenMetrics escapes `"` as well; the 0.0.4 format only `\` and newlines.
fn escape_help(v: &str, om: bool) -> String {
    let v = v.replace('\\', "\\\\").replace('\n', "\\n");
    if om {
        v.replace('"', "\\\"")
    } else {
        v
    }
}

#[cfg(test)]
mod tests;
