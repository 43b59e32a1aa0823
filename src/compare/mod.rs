//! The CI regression gate: two runs' samples in, a verdict per metric × statistic ×
//! target × transport out, and the renderings of that verdict. The statistics, the decision
//! rule and the renderings are pure (no I/O, no clocks); [`sides`] and [`runs`] read
//! results directories (through `store`), and [`history_file`] reads and writes the history
//! file (its entries stamped with the wall clock, through `clock`).
//!
//! * [`runs`]: the gate's use case over results directories (`compare`, `run --baseline`):
//!   comparability, pairing, the stall policy, confirmation, the verdict → exit code.
//! * [`sides`]: finding the baseline, opening a side (a run or a set of repeats), labels.
//! * [`gate`]: gated metrics, statistics, default noise bands, thresholds.
//! * [`samples`]: per-request samples per cell, built from records.
//! * [`stats`]: seeded (cluster) bootstrap of relative changes; proportion intervals.
//! * [`verdict`]: the decision rule and one [`Row`] per comparison.
//! * [`lag`]: a harness's dispatch lag judged against the rows it can move.
//! * [`history`]: the gate's history (`compare --history`), series, change points, Markdown.
//! * [`history_file`]: `history.jsonl` (append, keep the last N, read) and its charts.
//! * [`render`]: terminal table, Markdown (for `$GITHUB_STEP_SUMMARY`), verdict JSON.
//!
//! Does not own: parsing arguments and printing (`commands::compare`,
//! `commands::history`), the results files' format (`store`), the exit codes other than the
//! gate's pass/regression (`commands`).

pub mod gate;
pub mod history;
pub mod history_file;
pub mod lag;
pub mod render;
pub mod runs;
pub mod samples;
pub mod sides;
pub mod stats;
pub mod verdict;

use serde::Serialize;

pub use gate::{GateMetric, MetricList, Statistic, Threshold, ThresholdError, Thresholds};
pub use lag::DispatchLag;
pub use runs::{
    compare_dirs, compare_loaded, compare_sides, exit_code, gate_comparison, load_samples,
    EXIT_NO_DECISION, EXIT_PASS, EXIT_REGRESSION,
};
pub use samples::{CellSamples, RunSamples};
pub use sides::{check_comparable, find_baseline_under};
pub use stats::{BootstrapConfig, Pairing};
pub use verdict::{ChangeUnit, Row, Verdict};

use crate::recorder::CellKey;

/// Version of the verdict JSON shape (`--format json`). 2: `outcome`, `counts.not_gated`,
/// `harness_bound`, rows with verdict `not-gated`, throughput rows on `p50`.
pub const VERDICT_SCHEMA_VERSION: u32 = 2;

/// Bootstrap resamples per side by default: enough that the 2.5 % / 97.5 % percentiles of
/// the resampled changes are stable to a few tenths of a percent.
pub const DEFAULT_RESAMPLES: u32 = 2000;
/// Two-sided confidence level of every interval (criterion's default).
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// Bootstrap seed; fixed so the same two runs always give the same verdict.
pub const DEFAULT_SEED: u64 = 0x5eed_c0de;

/// How to compare.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// User thresholds (scenario `[gate]` with `--threshold` layered on top).
    pub thresholds: Thresholds,
    /// Metrics to compare; empty means every metric gated by default
    /// ([`GateMetric::gated_by_default`]) plus any metric a threshold names.
    pub metrics: Vec<GateMetric>,
    /// Bootstrap settings.
    #[serde(skip)]
    pub bootstrap: BootstrapConfig,
    /// Count `Inconclusive` as a failure (`--fail-on-inconclusive`).
    pub fail_on_inconclusive: bool,
    /// Both sides replayed the same conversation (same scenario, same seed per run): the
    /// length-dependent metrics are then gated by default, paired request by request.
    pub same_conversation: bool,
    /// Both sides hold the same number of runs, taken interleaved: run i of each side is
    /// paired in the bootstrap.
    pub paired_runs: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            thresholds: Thresholds::new(),
            metrics: Vec::new(),
            bootstrap: BootstrapConfig {
                resamples: DEFAULT_RESAMPLES,
                confidence: DEFAULT_CONFIDENCE,
                seed: DEFAULT_SEED,
            },
            fail_on_inconclusive: false,
            same_conversation: false,
            paired_runs: false,
        }
    }
}

/// What the renderers say about each run (filled in by the caller, which read the runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunLabel {
    /// The directory as given.
    pub dir: String,
    /// `manifest.json` `run_id`.
    pub run_id: String,
    /// `manifest.json` `status`.
    pub status: String,
    /// Scenario hash.
    pub scenario_hash: String,
    /// Link model.
    pub link: String,
    /// Relative paths of charts and reports found in the directory (`report.md`, `*.svg`).
    pub charts: Vec<String>,
}

/// Counts of rows by verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Regressed rows.
    pub regressed: usize,
    /// Inconclusive rows.
    pub inconclusive: usize,
    /// Improved rows.
    pub improved: usize,
    /// No-change rows.
    pub no_change: usize,
    /// Rows left ungated: by the power rule (too few samples for their band), a floor,
    /// or the dispatch-lag rule.
    pub not_gated: usize,
    /// Of `not_gated`, the rows the dispatch-lag rule left ungated (`compare::lag`).
    pub not_gated_lag: usize,
}

impl Counts {
    /// Gated rows that reached a decision (regressed, improved or no change).
    pub fn decided(&self) -> usize {
        self.regressed + self.improved + self.no_change
    }
}

crate::vocab::names! {
    /// What the gate says in its headline, and its exit code.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Outcome ("outcome") {
        /// A gated row regressed (exit 1).
        Regression = "regression",
        /// No regression, but `--fail-on-inconclusive` and an inconclusive row (exit 1).
        Failed = "failed",
        /// Nothing regressed and no gated row decided anything: every row was inconclusive
        /// or not gated (exit [`EXIT_NO_DECISION`]).
        NoDecision = "no-decision",
        /// No regression; some gated rows inconclusive (exit 0, shown ⚠️).
        PassInconclusive = "pass-inconclusive",
        /// No regression and every gated row decided (exit 0, shown ✅).
        Pass = "pass",
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Baseline run.
    pub baseline: RunLabel,
    /// Candidate run.
    pub candidate: RunLabel,
    /// Every comparison, in cell, metric, statistic order.
    pub rows: Vec<Row>,
    /// Things the reader must know (allowed mismatches, cells on one side only,
    /// incomplete runs).
    pub notes: Vec<String>,
    /// The settings used.
    pub settings: Settings,
    /// Loud warnings about a side's runs that judged themselves harness-bound (the client,
    /// not the target, limited them; `summary.json` → `harness`), one per run: they go in
    /// the headline, and such a comparison never reads as a clean PASS. Runs bound for their
    /// dispatch lag alone are not here but in `dispatch_lag`.
    pub harness_bound: Vec<String>,
    /// Runs harness-bound for their dispatch lag alone and what that did to the rows it can
    /// move ([`lag`]); `None` when there were none. A plain note, not a ⚠️.
    pub dispatch_lag: Option<lag::DispatchLag>,
}

impl Comparison {
    /// Rows by verdict.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.rows {
            match r.verdict {
                Verdict::Regressed => c.regressed += 1,
                Verdict::Inconclusive => c.inconclusive += 1,
                Verdict::Improved => c.improved += 1,
                Verdict::NoChange => c.no_change += 1,
                Verdict::NotGated => c.not_gated += 1,
            }
            if r.verdict == Verdict::NotGated && r.dispatch_lag_ms.is_some() {
                c.not_gated_lag += 1;
            }
        }
        c
    }

    /// The verdict over the gated rows: `Regressed` if any regressed, else `Inconclusive`
    /// if any is (or none was gated), else `Improved` if any improved, else `NoChange`.
    pub fn overall(&self) -> Verdict {
        self.rows
            .iter()
            .map(|r| r.verdict)
            .filter(|v| *v != Verdict::NotGated)
            .min()
            .unwrap_or(Verdict::Inconclusive)
    }

    /// The headline outcome (see [`Outcome`]).
    pub fn outcome(&self) -> Outcome {
        let c = self.counts();
        if c.regressed > 0 {
            Outcome::Regression
        } else if self.settings.fail_on_inconclusive && (c.inconclusive > 0 || self.rows.is_empty())
        {
            Outcome::Failed
        } else if c.decided() == 0 {
            Outcome::NoDecision
        } else if c.inconclusive > 0 || !self.harness_bound.is_empty() {
            Outcome::PassInconclusive
        } else {
            Outcome::Pass
        }
    }

    /// True when the gate fails: a regression, or (with `fail_on_inconclusive`) an
    /// inconclusive row, or nothing at all to compare.
    pub fn fails(&self) -> bool {
        matches!(self.outcome(), Outcome::Regression | Outcome::Failed)
    }

    /// Applies confirmation re-runs (`--confirm-run`, optionally with `--confirm-baseline`:
    /// a fresh baseline beside each, so a fault in the first baseline can be cleared as well
    /// as one in the candidate): a row stays `Regressed` only if the same metric × statistic ×
    /// cell regressed in every re-run too; otherwise it becomes `Inconclusive` and says on
    /// which re-run it did not reproduce. A note records the outcome either way.
    pub fn confirm_with(&mut self, reruns: &[Comparison]) {
        if reruns.is_empty() {
            return;
        }
        let key = |r: &Row| (r.target.clone(), r.transport.clone(), r.metric, r.statistic);
        let mut kept = 0;
        let mut dropped = 0;
        for row in self
            .rows
            .iter_mut()
            .filter(|r| r.verdict == Verdict::Regressed)
        {
            let k = key(row);
            let failed_on: Vec<usize> = reruns
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    !c.rows
                        .iter()
                        .any(|r| key(r) == k && r.verdict == Verdict::Regressed)
                })
                .map(|(i, _)| i + 1)
                .collect();
            if failed_on.is_empty() {
                kept += 1;
                row.reason = format!(
                    "{}; reproduced on {} confirmation re-run(s)",
                    row.reason,
                    reruns.len()
                );
            } else {
                dropped += 1;
                row.verdict = Verdict::Inconclusive;
                row.reason = format!(
                    "{}; NOT reproduced on re-run {}: not confirmed",
                    row.reason,
                    failed_on
                        .iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        self.notes.push(format!(
            "confirmation: {} re-run(s); {kept} regression(s) reproduced, {dropped} did not (those are shown as inconclusive)",
            reruns.len()
        ));
    }

    /// Rows ordered for display: regressions first, then inconclusive, improved, no change.
    pub fn rows_for_display(&self) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by_key(|r| r.verdict);
        rows
    }
}

/// Compares every cell present in both runs, metric by metric. Cells on one side only are
/// listed in `notes` (the caller decides beforehand whether that is allowed).
pub fn compare(
    baseline: &RunSamples,
    candidate: &RunSamples,
    settings: &Settings,
    baseline_label: RunLabel,
    candidate_label: RunLabel,
) -> Comparison {
    let metrics: Vec<GateMetric> = if settings.metrics.is_empty() {
        GateMetric::ALL
            .into_iter()
            .filter(|m| {
                m.gated_by_default()
                    || (settings.same_conversation && m.length_dependent())
                    || settings.thresholds.mentions(*m)
            })
            .collect()
    } else {
        GateMetric::ALL
            .into_iter()
            .filter(|m| settings.metrics.contains(m))
            .collect()
    };
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (key, b) in &baseline.cells {
        let Some(c) = candidate.cells.get(key) else {
            notes.push(format!("{key} is only in the baseline; not compared"));
            continue;
        };
        for &m in &metrics {
            let wanted = if settings.same_conversation && m.length_dependent() {
                Pairing::Requests
            } else if settings.paired_runs {
                Pairing::Runs
            } else {
                Pairing::None
            };
            rows.extend(verdict::compare_metric(
                key,
                m,
                b,
                c,
                &settings.thresholds,
                settings.bootstrap,
                wanted,
            ));
        }
    }
    for key in candidate.cells.keys() {
        if !baseline.cells.contains_key(key) {
            notes.push(format!("{key} is only in the candidate; not compared"));
        }
    }
    if !settings.same_conversation && settings.metrics.is_empty() {
        let gated: Vec<&str> = GateMetric::ALL
            .into_iter()
            .filter(|m| m.gated_by_default())
            .map(|m| m.name())
            .collect();
        notes.push(format!(
            "the sides drew different conversations (different seeds, or a real model's own lengths): \
             e2e, output_tok_s and session_wall move with the drawn lengths, so they are not gated; \
             {} are",
            gated.join(", ")
        ));
    }
    Comparison {
        baseline: baseline_label,
        candidate: candidate_label,
        rows,
        notes,
        settings: settings.clone(),
        harness_bound: Vec::new(),
        dispatch_lag: None,
    }
}

/// The cells of a run, for the apples-vs-oranges check.
pub fn cell_names(samples: &RunSamples) -> Vec<String> {
    samples.cells.keys().map(CellKey::to_string).collect()
}
