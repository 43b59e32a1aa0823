//! `spark-bench run`'s verdict on itself, for CI: which measured cells failed, why, the run's
//! status word and exit code, and the `--json` object.
//!
//! A measured cell fails when every request it measured failed (cancelled ones aside), or
//! when `--max-error-rate` is set and its error rate is above it. Each failing cell is shown
//! with its top error kinds (the summary's `by_outcome` counts) and, per kind, the first
//! error text of that kind read back from the run's `requests.csv` (texts there are already
//! redacted). Cells whose failed requests stay within the budget are listed the same way,
//! as a note that leaves the exit code alone.
//!
//! Owns: the failure rule, the failure report on stderr, [`Status`] and its exit code, the
//! `--json` object's extra keys. Does not own: the summary (`recorder`), the rows (`store`),
//! the gate (`compare`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{EXIT_FAILED_REQUESTS, EXIT_INTERRUPTED, EXIT_OK, EXIT_REGRESSION};
use crate::recorder::Summary;

/// Error kinds shown per failing cell (the rest are counted in one line).
const TOP_KINDS: usize = 3;
/// Longest sample message shown, in characters.
const SAMPLE_CHARS: usize = 240;
/// Slack for `error_rate > max` (an error rate equal to the limit passes).
const RATE_EPSILON: f64 = 1e-9;

/// What a run came to: the `status` of `run --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Every measured cell within its error budget; no regression.
    Ok,
    /// A measured cell whose requests all failed, or whose error rate passed
    /// `--max-error-rate`.
    FailedRequests,
    /// Ctrl-C or SIGTERM stopped the run.
    Interrupted,
    /// `--baseline NAME`: the gate found a regression.
    Regression,
    /// `--baseline NAME`: the gate decided nothing (every row inconclusive or not gated).
    NoDecision,
}

impl Status {
    /// The exit code of this status.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Ok => EXIT_OK,
            Status::FailedRequests => EXIT_FAILED_REQUESTS,
            Status::Interrupted => EXIT_INTERRUPTED,
            Status::Regression => EXIT_REGRESSION,
            Status::NoDecision => crate::compare::EXIT_NO_DECISION,
        }
    }
}

/// One error kind of a failing cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorKind {
    /// The outcome name (`connect-error`, `http-status`, …).
    pub outcome: String,
    /// Measured requests with this outcome.
    pub count: u64,
    /// The first error text of this kind in `requests.csv` (redacted there), shortened.
    pub sample: Option<String>,
}

/// A measured cell with failed requests: one that failed the run ([`failed_cells`]) or one
/// within its error budget ([`erring_cells`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedCell {
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: String,
    /// Measured requests that were not cancelled.
    pub requests: u64,
    /// Of them, failed.
    pub failed: u64,
    /// `failed / requests`.
    pub error_rate: f64,
    /// Why the cell is listed (why it fails the run, or how many of its requests failed).
    pub reason: String,
    /// The top error kinds, most frequent first (`TOP_KINDS` at most).
    pub errors: Vec<ErrorKind>,
    /// Error kinds beyond the top ones.
    pub more_kinds: usize,
}

/// The measured cells of `summary` that fail the run (see the module header); samples are
/// not filled in ([`add_samples`]).
pub fn failed_cells(summary: &Summary, max_error_rate: Option<f64>) -> Vec<FailedCell> {
    cells_with_errors(summary, max_error_rate, true)
}

/// The measured cells with failed requests that do not fail the run (within its error
/// budget): shown all the same, so that a run with errors does not read as clean.
pub fn erring_cells(summary: &Summary, max_error_rate: Option<f64>) -> Vec<FailedCell> {
    cells_with_errors(summary, max_error_rate, false)
}

/// The measured cells with failed requests that fail the run (`failing`), or the others.
fn cells_with_errors(
    summary: &Summary,
    max_error_rate: Option<f64>,
    failing: bool,
) -> Vec<FailedCell> {
    let mut out = Vec::new();
    for c in &summary.cells {
        let requests = c.requests.saturating_sub(c.cancelled);
        if requests == 0 || c.failed == 0 {
            continue;
        }
        let fails = if c.failed >= requests {
            Some(format!("all {requests} measured requests failed"))
        } else {
            match max_error_rate {
                Some(max) if c.error_rate > max + RATE_EPSILON => Some(format!(
                    "error rate {:.1}% ({} of {requests}) is above --max-error-rate {}",
                    c.error_rate * 100.0,
                    c.failed,
                    percent(max)
                )),
                _ => None,
            }
        };
        let reason = match (fails, failing) {
            (Some(why), true) => why,
            (None, false) => format!(
                "{} of {requests} measured requests failed ({:.1}%)",
                c.failed,
                c.error_rate * 100.0
            ),
            _ => continue,
        };
        let mut kinds: Vec<(&String, u64)> = c
            .by_outcome
            .iter()
            .filter(|(k, n)| **n > 0 && k.as_str() != "ok" && k.as_str() != "cancelled")
            .map(|(k, n)| (k, *n))
            .collect();
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let more_kinds = kinds.len().saturating_sub(TOP_KINDS);
        out.push(FailedCell {
            target: c.target.clone(),
            transport: c.transport.clone(),
            requests,
            failed: c.failed,
            error_rate: c.error_rate,
            reason,
            errors: kinds
                .into_iter()
                .take(TOP_KINDS)
                .map(|(k, n)| ErrorKind {
                    outcome: k.clone(),
                    count: n,
                    sample: None,
                })
                .collect(),
            more_kinds,
        });
    }
    out
}

/// Fills each error kind's sample: the first error text of that kind among the cell's
/// measured requests in `dir`'s `requests.csv`. Stops reading once every sample is found.
pub fn add_samples(dir: &Path, cells: &mut [FailedCell]) -> anyhow::Result<()> {
    let mut wanted: BTreeMap<(String, String, String), Option<String>> = BTreeMap::new();
    for c in cells.iter() {
        for e in &c.errors {
            wanted.insert(
                (c.target.clone(), c.transport.clone(), e.outcome.clone()),
                None,
            );
        }
    }
    let mut missing = wanted.len();
    if missing > 0 {
        let run = crate::store::LoadedRun::open(dir)?;
        for row in run.request_rows()? {
            let row = row?;
            if row.warmup {
                continue;
            }
            let Some(text) = row.error.as_deref().filter(|t| !t.is_empty()) else {
                continue;
            };
            let key = (
                row.target.clone(),
                row.transport.as_str().to_string(),
                row.outcome.as_str().to_string(),
            );
            if let Some(slot @ None) = wanted.get_mut(&key) {
                *slot = Some(shorten(text));
                missing -= 1;
                if missing == 0 {
                    break;
                }
            }
        }
    }
    for c in cells.iter_mut() {
        for e in &mut c.errors {
            let key = (c.target.clone(), c.transport.clone(), e.outcome.clone());
            e.sample = wanted.get(&key).cloned().flatten();
        }
    }
    Ok(())
}

/// Prints the failure report on stderr: per failing cell, why, and its top error kinds with
/// counts and a sample message each.
pub fn print(cells: &[FailedCell], max_error_rate: Option<f64>) {
    if cells.is_empty() {
        return;
    }
    let limit = max_error_rate.map_or_else(
        || "every request of a cell failing".to_string(),
        |m| {
            format!(
                "every request of a cell failing, or an error rate above {}",
                percent(m)
            )
        },
    );
    errln!(
        "failed-requests: {} measured cell(s) failed ({limit}); exit code {}",
        cells.len(),
        EXIT_FAILED_REQUESTS
    );
    print_cells(cells);
}

/// Prints, on stderr, the cells whose failed requests do not fail the run, the same way.
pub fn print_errors(cells: &[FailedCell], max_error_rate: Option<f64>) {
    if cells.is_empty() {
        return;
    }
    let budget = match max_error_rate {
        Some(m) => format!("within --max-error-rate {}", percent(m)),
        None => "some requests of each succeeded; --max-error-rate sets a limit".to_string(),
    };
    errln!(
        "errors: {} measured cell(s) had failed requests ({budget}; exit code unaffected)",
        cells.len()
    );
    print_cells(cells);
}

/// Per cell: why it is listed, then its top error kinds with counts and a sample each.
fn print_cells(cells: &[FailedCell]) {
    for c in cells {
        errln!("  {} × {}: {}", c.target, c.transport, c.reason);
        for e in &c.errors {
            match &e.sample {
                Some(s) => errln!("    {} ×{}: {s}", e.outcome, e.count),
                None => errln!("    {} ×{}", e.outcome, e.count),
            }
        }
        if c.more_kinds > 0 {
            errln!("    … and {} more error kind(s)", c.more_kinds);
        }
    }
}

/// The `run --json` object: the summary's own keys, unchanged, plus `run_id`, `results_dir`,
/// `status`, `exit_code`, `failed_cells` and `erring_cells` (cells with failed requests
/// within the budget, in the same shape).
pub fn json(
    summary: &Summary,
    dir: &Path,
    status: Status,
    failed: &[FailedCell],
    erring: &[FailedCell],
) -> serde_json::Value {
    let mut v = serde_json::to_value(summary).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        let run_id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        o.insert("run_id".into(), run_id.into());
        o.insert("results_dir".into(), dir.display().to_string().into());
        o.insert(
            "status".into(),
            serde_json::to_value(status).unwrap_or_default(),
        );
        o.insert("exit_code".into(), status.exit_code().into());
        o.insert(
            "failed_cells".into(),
            serde_json::to_value(failed).unwrap_or_default(),
        );
        o.insert(
            "erring_cells".into(),
            serde_json::to_value(erring).unwrap_or_default(),
        );
    }
    v
}

/// `0.05` → `5%`, `0.125` → `12.5%`.
fn percent(rate: f64) -> String {
    let p = format!("{:.3}", rate * 100.0);
    let p = p.trim_end_matches('0').trim_end_matches('.');
    format!("{p}%")
}

/// The first line of `text`, at most [`SAMPLE_CHARS`] characters.
fn shorten(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= SAMPLE_CHARS {
        return line.to_string();
    }
    let mut s: String = line.chars().take(SAMPLE_CHARS).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::CellSummary;

    fn cell(requests: u64, failed: u64, cancelled: u64) -> CellSummary {
        let ok = requests - failed - cancelled;
        let mut by_outcome = BTreeMap::new();
        by_outcome.insert("ok".to_string(), ok);
        if failed > 0 {
            by_outcome.insert("timeout".to_string(), failed / 2);
            by_outcome.insert("connect-error".to_string(), failed - failed / 2);
        }
        if cancelled > 0 {
            by_outcome.insert("cancelled".to_string(), cancelled);
        }
        let denom = requests - cancelled;
        CellSummary {
            target: "t".into(),
            transport: "http".into(),
            requests,
            ok,
            failed,
            cancelled,
            error_rate: if denom == 0 {
                0.0
            } else {
                failed as f64 / denom as f64
            },
            warmup_requests: 0,
            sessions: 1,
            failed_sessions: 0,
            warmup_sessions: 0,
            by_outcome,
            output_tokens: 0,
            chunks: 0,
            cached_input_share: None,
            unchained_cached_input_share: None,
            connections: Default::default(),
            rate_span_unresolved: 0,
            buffering: None,
            span_s: 0.0,
            busy_s: 0.0,
            aggregate_output_tok_s: 0.0,
            metrics: BTreeMap::new(),
            overhead_sources: BTreeMap::new(),
            token_sources: BTreeMap::new(),
            vs_http: BTreeMap::new(),
            attribution: None,
            mean_input_tokens: None,
            mean_output_tokens: None,
            goodput: None,
        }
    }

    fn summary(cells: Vec<CellSummary>) -> Summary {
        Summary {
            schema_version: crate::recorder::SUMMARY_SCHEMA_VERSION,
            cells,
            harness: None,
        }
    }

    #[test]
    fn a_cell_fails_when_all_its_requests_failed_whatever_the_limit() {
        let s = summary(vec![cell(6, 6, 0), cell(6, 0, 0), cell(4, 2, 2)]);
        for limit in [None, Some(1.0)] {
            let f = failed_cells(&s, limit);
            assert_eq!(f.len(), 2, "{f:?}");
            assert_eq!(f[0].requests, 6);
            assert!(f[0].reason.contains("all 6"), "{}", f[0].reason);
            // Cancelled requests are not the server's fault: 2 of 2 left failed.
            assert_eq!((f[1].requests, f[1].failed), (2, 2));
            // Most frequent kind first, cancelled and ok never listed.
            assert_eq!(f[0].errors[0].outcome, "connect-error");
            assert_eq!(f[0].errors[0].count, 3);
            assert!(f[1].errors.iter().all(|e| e.outcome != "cancelled"));
        }
    }

    #[test]
    fn the_error_rate_limit_is_exclusive() {
        // 1 of 4 failed: 25 %.
        let s = summary(vec![cell(4, 1, 0)]);
        assert!(failed_cells(&s, None).is_empty());
        assert!(failed_cells(&s, Some(0.25)).is_empty());
        let f = failed_cells(&s, Some(0.24));
        assert_eq!(f.len(), 1);
        assert!(
            f[0].reason.contains("above --max-error-rate 24%"),
            "{}",
            f[0].reason
        );
        assert_eq!(failed_cells(&s, Some(0.0)).len(), 1);
        // Nothing measured, nothing failed: never a failure.
        assert!(failed_cells(&summary(vec![cell(0, 0, 0)]), Some(0.0)).is_empty());
    }

    #[test]
    fn cells_within_the_budget_are_listed_apart_from_the_failing_ones() {
        let s = summary(vec![cell(4, 1, 0), cell(6, 6, 0), cell(6, 0, 0)]);
        let e = erring_cells(&s, None);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].requests, e[0].failed), (4, 1));
        assert_eq!(e[0].reason, "1 of 4 measured requests failed (25.0%)");
        assert_eq!(e[0].errors[0].outcome, "connect-error");
        // Above the limit it fails the run instead; both lists never share a cell.
        assert!(erring_cells(&s, Some(0.24)).is_empty());
        assert_eq!(failed_cells(&s, Some(0.24)).len(), 2);
        assert_eq!(erring_cells(&s, Some(0.25)).len(), 1);
    }

    #[test]
    fn statuses_map_to_distinct_exit_codes() {
        let codes = [
            Status::Ok,
            Status::FailedRequests,
            Status::Interrupted,
            Status::Regression,
        ]
        .map(Status::exit_code);
        assert_eq!(codes, [0, 3, 130, 1]);
        assert_ne!(EXIT_FAILED_REQUESTS, super::super::EXIT_ERROR);
        assert_eq!(
            serde_json::to_value(Status::FailedRequests).unwrap(),
            "failed-requests"
        );
    }

    #[test]
    fn samples_are_one_line_and_bounded() {
        assert_eq!(shorten("a\nb"), "a");
        let long = "x".repeat(1000);
        assert_eq!(shorten(&long).chars().count(), SAMPLE_CHARS + 1);
        assert_eq!(percent(0.05), "5%");
        assert_eq!(percent(0.125), "12.5%");
    }
}
