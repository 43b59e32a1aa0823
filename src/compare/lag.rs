//! The harness's dispatch lag, judged against the rows it can move. A run that judged
//! itself harness-bound for its dispatch lag alone (`summary.json` → `harness.bound_by` is
//! only `dispatch-lag`) sent some requests later than planned; that lag enters only the
//! metrics counted from the intended start ([`GateMetric::dispatch_lag_enters`]). Each such
//! row is compared with the worst of those runs' driver lag at the row's statistic (p50 →
//! lag p50; p90, p99 and means → lag p99, the conservative side): over [`LAG_SHARE`] of
//! the row's band in milliseconds, the row is `not-gated` (even if it decided), except a
//! `regressed` row, which stays regressed with the lag in its reason. Every other row keeps
//! its verdict, and the headline does not turn ⚠️ for such runs.
//!
//! Owns: which runs count as lag-only ([`LagRun::of`]), the per-row rule ([`apply`]) and
//! its summary ([`DispatchLag`], in the verdict JSON).
//! Does not own: the harness's own verdict (`recorder::harness`), the loud warnings for runs
//! bound for any other reason (`runs`), the wording of the headline (`render`).

use serde::Serialize;

use super::gate::{GateMetric, Kind, Statistic, LAG_SHARE};
use super::verdict::{Row, Verdict};
use crate::recorder::harness::Harness;

/// One run that judged itself harness-bound for its dispatch lag alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LagRun {
    /// `baseline` or `candidate` (a confirmation side says so).
    pub side: String,
    /// `manifest.json` `run_id`.
    pub run_id: String,
    /// Driver lag p50 (dispatch lag less any wait for a slot), ms.
    pub p50_ms: f64,
    /// Driver lag p99, ms.
    pub p99_ms: f64,
    /// The harness's limit on the driver lag p99, ms (`thresholds.driver_lag_p99_ms`).
    pub limit_ms: f64,
    /// The harness's own reason, as it wrote it.
    pub reason: String,
}

impl LagRun {
    /// The run, when its harness section says it was bound by dispatch lag and nothing else.
    pub fn of(side: &str, run_id: &str, h: &Harness) -> Option<LagRun> {
        h.bound_by_lag_only().then(|| LagRun {
            side: side.to_string(),
            run_id: run_id.to_string(),
            p50_ms: h.driver_lag.p50_ms,
            p99_ms: h.driver_lag.p99_ms,
            limit_ms: h.thresholds.driver_lag_p99_ms,
            reason: h.reasons.join("; "),
        })
    }

    /// The lag a row's statistic is judged against, and its name: p50 for medians, p99
    /// for everything else (a tail, or a mean that a tail moves).
    pub fn at(&self, st: Statistic) -> (f64, &'static str) {
        match st {
            Statistic::P50 => (self.p50_ms, "p50"),
            _ => (self.p99_ms, "p99"),
        }
    }

    /// The plain note the renderings list for the run (not a ⚠️ warning).
    pub fn note(&self) -> String {
        format!(
            "the {} run {} judged itself harness-bound on dispatch lag alone ({}); the rows that lag can move are judged against its driver lag (p50 {:.2} ms, p99 {:.2} ms), the rest keep their verdict",
            self.side, self.run_id, self.reason, self.p50_ms, self.p99_ms
        )
    }
}

/// What the dispatch-lag rule did to a comparison (verdict JSON `dispatch_lag`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispatchLag {
    /// The runs harness-bound on dispatch lag alone, both sides.
    pub runs: Vec<LagRun>,
    /// [`LAG_SHARE`]: the share of a row's band a lag may take before the row is not gated.
    pub share: f64,
    /// The harness's limit on the driver lag p99, ms (the largest of the runs').
    pub limit_ms: f64,
    /// Rows the rule made `not-gated`.
    pub rows_not_gated: usize,
    /// Regressed rows under such a lag, kept regressed.
    pub rows_regressed: usize,
}

impl DispatchLag {
    /// The headline's clause: `6 runs had dispatch lag over 5 ms: 4 rows it could move not
    /// gated`.
    pub fn clause(&self) -> String {
        let mut s = format!(
            "{} run(s) had dispatch lag over {} ms: {} row(s) it could move not gated",
            self.runs.len(),
            self.limit_ms,
            self.rows_not_gated
        );
        if self.rows_regressed > 0 {
            s.push_str(&format!(
                ", {} regressed row(s) under it kept",
                self.rows_regressed
            ));
        }
        s
    }
}

/// A row's band in the metric's time unit (ms): the narrower edge times the baseline, or
/// for `output_tok_s` (a rate over E2E) times the same cell's `e2e` p50 baseline. `None`
/// when there is nothing to convert with.
fn band_ms(row: &Row, rows: &[Row]) -> Option<f64> {
    let edge = (-row.band_low).min(row.band_high);
    let base = match row.metric.kind() {
        Kind::Time => row.baseline?,
        _ => {
            rows.iter()
                .find(|r| {
                    r.metric == GateMetric::E2e
                        && r.statistic == Statistic::P50
                        && r.target == row.target
                        && r.transport == row.transport
                })?
                .baseline?
        }
    };
    (base > 0.0).then_some(edge * base)
}

/// Applies the rule (module doc) to `rows`; `None` when no run was lag-only bound.
pub fn apply(rows: &mut [Row], runs: Vec<LagRun>) -> Option<DispatchLag> {
    if runs.is_empty() {
        return None;
    }
    let mut out = DispatchLag {
        share: LAG_SHARE,
        limit_ms: runs.iter().map(|r| r.limit_ms).fold(0.0, f64::max),
        runs,
        rows_not_gated: 0,
        rows_regressed: 0,
    };
    let bands: Vec<Option<f64>> = rows.iter().map(|r| band_ms(r, rows)).collect();
    for (row, band) in rows.iter_mut().zip(bands) {
        if !row.metric.dispatch_lag_enters() || row.verdict == Verdict::NotGated {
            continue;
        }
        let Some(band) = band else { continue };
        let Some((worst, (lag, stat))) = out
            .runs
            .iter()
            .map(|r| (r, r.at(row.statistic)))
            .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        else {
            continue;
        };
        if lag <= LAG_SHARE * band {
            continue;
        }
        let why = format!(
            "the harness's dispatch lag {stat} {lag:.1} ms ({} run {}) is over {:.0}% of the band ±{band:.1} ms",
            worst.side,
            worst.run_id,
            LAG_SHARE * 100.0
        );
        row.dispatch_lag_ms = Some(lag);
        if row.verdict == Verdict::Regressed {
            // Never hide a regression: say the lag beside it.
            row.reason = format!("{}; note: {why}", row.reason);
            out.rows_regressed += 1;
        } else {
            row.verdict = Verdict::NotGated;
            row.reason = format!("not gated: {why}; {}", row.reason);
            out.rows_not_gated += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare, GateMetric, Outcome, RunLabel, RunSamples, Settings};
    use crate::recorder::harness::{Bound, Lag, Thresholds, Verdict as HarnessVerdict};
    use crate::vocab::RequestRecord;

    /// 2,000 requests: TTFT about 100 ms × `scale`, TPOT 4 ms.
    fn run(scale: f64) -> RunSamples {
        let mut s = RunSamples::new();
        for i in 0..2000u64 {
            let ttft = (100.0 + (i % 9) as f64) * scale * 1e6;
            s.add_request(&RequestRecord {
                target: "sim".into(),
                transport: crate::vocab::TransportKind::Http,
                first_token_ns: Some(ttft as u64),
                last_token_ns: Some(ttft as u64 + 40_000_000 + (i % 5) * 100_000),
                output_tokens: 11,
                ..Default::default()
            });
        }
        s
    }

    fn harness(bound_by: &[Bound], p50_ms: f64, p99_ms: f64) -> Harness {
        Harness {
            verdict: HarnessVerdict::HarnessBound,
            reasons: bound_by.iter().map(|b| format!("{b} over")).collect(),
            bound_by: bound_by.to_vec(),
            driver_lag: Lag {
                p50_ms,
                p99_ms,
                max_ms: p99_ms * 2.0,
            },
            thresholds: Thresholds::DEFAULT,
            ..Harness::default()
        }
    }

    fn comparison(scale: f64) -> crate::compare::Comparison {
        let settings = Settings {
            metrics: vec![GateMetric::Ttft, GateMetric::Tpot],
            ..Settings::default()
        };
        compare(
            &run(1.0),
            &run(scale),
            &settings,
            RunLabel::default(),
            RunLabel::default(),
        )
    }

    fn row(c: &crate::compare::Comparison, m: GateMetric, st: Statistic) -> &Row {
        c.rows
            .iter()
            .find(|r| r.metric == m && r.statistic == st)
            .unwrap()
    }

    #[test]
    fn lag_only_runs_ungate_the_tails_they_can_move_and_the_gate_passes() {
        let mut c = comparison(1.0);
        assert_eq!(c.outcome(), Outcome::Pass, "{:?}", c.rows);
        let h = harness(&[Bound::DispatchLag], 0.3, 8.9);
        let runs = vec![LagRun::of("candidate", "run-c", &h).unwrap()];
        c.dispatch_lag = apply(&mut c.rows, runs);
        // p50 band ±5.0 ms (5% of ~104 ms): a 0.3 ms lag p50 is under a quarter of it.
        let p50 = row(&c, GateMetric::Ttft, Statistic::P50);
        assert_eq!(p50.verdict, Verdict::NoChange, "{p50:?}");
        assert_eq!(p50.dispatch_lag_ms, None);
        // p99 band ±10.8 ms (10% of ~108 ms): 8.9 ms is over a quarter (so is p90's).
        let p99 = row(&c, GateMetric::Ttft, Statistic::P99);
        assert_eq!(p99.verdict, Verdict::NotGated, "{p99:?}");
        assert_eq!(p99.dispatch_lag_ms, Some(8.9));
        assert!(
            p99.reason.starts_with(
                "not gated: the harness's dispatch lag p99 8.9 ms (candidate run run-c) is over 25% of the band ±10.8 ms"
            ),
            "{}",
            p99.reason
        );
        // TPOT is counted after the first token: the lag cannot move it.
        for st in [Statistic::P50, Statistic::P90, Statistic::P99] {
            assert_eq!(row(&c, GateMetric::Tpot, st).verdict, Verdict::NoChange);
        }
        let lag = c.dispatch_lag.as_ref().unwrap();
        assert_eq!((lag.rows_not_gated, lag.rows_regressed), (2, 0));
        assert_eq!(c.counts().not_gated_lag, 2);
        assert!(c.harness_bound.is_empty());
        assert_eq!(c.outcome(), Outcome::Pass);
        let head = crate::compare::render::headline(&c);
        assert!(
            head.starts_with("PASS ✅")
                && head.contains("0 not gated: too few samples")
                && head.contains(
                    "(1 run(s) had dispatch lag over 5 ms: 2 row(s) it could move not gated)"
                ),
            "{head}"
        );
        let text = crate::compare::render::text(&c);
        assert!(!text.contains("⚠️"), "{text}");
        assert!(
            text.contains(
                "  note: the candidate run run-c judged itself harness-bound on dispatch lag alone"
            ),
            "{text}"
        );
        assert!(text.contains("not gated: harness dispatch lag"), "{text}");
        let md = crate::compare::render::markdown(&c);
        assert!(md.starts_with("## ✅"), "{md}");
        assert!(
            md.contains("**Not gated: the harness's dispatch lag (2):**"),
            "{md}"
        );
        let j: serde_json::Value = serde_json::from_str(&crate::compare::render::json(&c)).unwrap();
        assert_eq!(j["outcome"], "pass");
        assert_eq!(j["dispatch_lag"]["rows_not_gated"], 2);
        assert_eq!(j["dispatch_lag"]["runs"][0]["p99_ms"], 8.9);
        assert_eq!(j["counts"]["not_gated_lag"], 2);
    }

    #[test]
    fn runs_bound_for_other_reasons_are_not_lag_only() {
        for b in [
            &[Bound::CpuShare][..],
            &[Bound::DispatchLag, Bound::CpuShare],
            &[Bound::DispatchLag, Bound::AchievedRate],
            &[Bound::IngestCeiling],
        ] {
            assert_eq!(LagRun::of("baseline", "b", &harness(b, 0.3, 8.9)), None);
        }
        // Such a run stays a loud warning (`runs::harness_bound`): never a clean pass.
        let mut c = comparison(1.0);
        c.harness_bound
            .push("the baseline run b judged itself HARNESS-BOUND".into());
        assert_eq!(apply(&mut c.rows, Vec::new()), None);
        assert_eq!(c.outcome(), Outcome::PassInconclusive);
        assert!(crate::compare::render::headline(&c).contains("⚠️ HARNESS-BOUND"));
    }

    #[test]
    fn a_regression_under_lag_stays_a_regression() {
        let mut c = comparison(1.3);
        let p99 = row(&c, GateMetric::Ttft, Statistic::P99);
        assert_eq!(p99.verdict, Verdict::Regressed, "{p99:?}");
        let h = harness(&[Bound::DispatchLag], 0.3, 9.5);
        let runs = vec![LagRun::of("baseline", "run-b", &h).unwrap()];
        c.dispatch_lag = apply(&mut c.rows, runs);
        let p99 = row(&c, GateMetric::Ttft, Statistic::P99);
        assert_eq!(p99.verdict, Verdict::Regressed);
        assert!(
            p99.reason
                .contains("note: the harness's dispatch lag p99 9.5 ms (baseline run run-b)"),
            "{}",
            p99.reason
        );
        // p90 and p99 (the p50 row's lag, 0.3 ms, is under a quarter of its band).
        assert_eq!(c.dispatch_lag.as_ref().unwrap().rows_regressed, 2);
        assert_eq!(
            row(&c, GateMetric::Ttft, Statistic::P50).verdict,
            Verdict::Regressed
        );
        assert_eq!(c.outcome(), Outcome::Regression);
    }
}
