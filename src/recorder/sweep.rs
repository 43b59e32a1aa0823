//! A sweep's curves: each load point's summary folded into one curve per target ×
//! transport, and the knee of each curve.
//!
//! Owns: `sweep.json`'s shape ([`SweepSummary`]), the knee rule, the highest load under the
//! SLOs ([`best_under_slo`]: points that missed a percentile SLO are skipped), and the sweep
//! table text.
//! Pure: summaries in, data or `String` out. Does not own: running the points (`runner`),
//! files (`store`), or charts (`report`).
//!
//! # The knee
//! Points are taken in order of increasing load. The first point is the baseline. Point
//! `i > 0` is *saturated* when either
//! * latency left its flat region: its TTFT p50 exceeds the baseline's TTFT p50 by more
//!   than [`KNEE_LATENCY_RISE`] (50 %) *and* by more than a queue wait worth noting: the
//!   larger of [`KNEE_LATENCY_FLOOR_MS`] (5 ms) and [`KNEE_WAIT_SHARE`] (a quarter) of the
//!   baseline's end-to-end p50 (a request that waits a quarter of a request's duration for a
//!   slot is queueing; scheduling noise on a short TTFT is not), or
//! * throughput stopped following load: from point `i − 1` to `i` the achieved request rate
//!   grew by less than [`KNEE_THROUGHPUT_FOLLOW`] (half) of the relative load increase
//!   (load ×1.25 needs achieved ×1.125 or more), or
//! * more than 5 % of its requests failed.
//!
//! The knee is the last point before the first saturated one: the highest load the backend
//! served without queueing. No saturated point: no knee (the sweep did not reach it).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::metrics::Metric;
use super::summary::{CellSummary, Summary};

/// Version of the `sweep.json` shape.
pub const SWEEP_SCHEMA_VERSION: u32 = 1;
/// Relative TTFT p50 rise over the baseline that marks saturation.
pub const KNEE_LATENCY_RISE: f64 = 0.5;
/// Absolute TTFT p50 rise (ms) that must also be exceeded.
pub const KNEE_LATENCY_FLOOR_MS: f64 = 5.0;
/// Share of the baseline's e2e p50 the TTFT p50 rise must also exceed.
pub const KNEE_WAIT_SHARE: f64 = 0.25;
/// Share of the relative load increase the achieved rate must keep up with.
pub const KNEE_THROUGHPUT_FOLLOW: f64 = 0.5;
/// Error rate above which a point is saturated.
pub const KNEE_ERROR_RATE: f64 = 0.05;

/// `sweep.json`: the sweep's points and one curve per target × transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// Shape version ([`SWEEP_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The sweep's directory name.
    pub sweep_id: String,
    /// Scenario name.
    pub scenario: String,
    /// `concurrency` or `rate` (requests/s).
    pub param: String,
    /// The `--sweep` argument as given, e.g. `concurrency=1,2,4` or `rate=auto`.
    pub spec: String,
    /// How the sweep's request rate was driven (`rate` sweeps), or the closed loop.
    pub load_note: String,
    /// The knee rule, in words.
    pub knee_rule: String,
    /// The SLOs goodput counts against (`none`).
    pub slo: String,
    /// Every point in the order it ran.
    pub points: Vec<SweepPoint>,
    /// One curve per target × transport, points in increasing load.
    pub curves: Vec<Curve>,
}

/// One load point: a complete run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The load value (concurrency, or requests/s).
    pub value: f64,
    /// The run directory, relative to the sweep directory (`points/03-concurrency-4`).
    pub dir: String,
    /// Why this point ran (`listed`, `synchronous`, `throughput search`, `between`).
    pub role: String,
}

/// One target × transport across the load points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: String,
    /// The points, in increasing load.
    pub points: Vec<CurvePoint>,
    /// Index into `points` of the knee (see the module doc); `None` when not reached.
    pub knee: Option<usize>,
    /// The knee's load value.
    pub knee_value: Option<f64>,
    /// Why the point after the knee counts as saturated.
    pub knee_reason: Option<String>,
}

/// One cell of one load point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// The load value asked for.
    pub value: f64,
    /// Measured requests, every outcome.
    pub requests: u64,
    /// Successful measured requests.
    pub ok: u64,
    /// `failed / (requests − cancelled)`.
    pub error_rate: f64,
    /// Achieved request rate: successful requests over the measured window (`span_s`).
    pub achieved_req_s: f64,
    /// Output tokens of successful requests over the measured window.
    pub output_tok_s: f64,
    /// TTFT p50/p90/p99, ms (0 when no request measured it, as for TPOT and e2e).
    pub ttft_ms: [f64; 3],
    /// TPOT p50/p90/p99, ms.
    pub tpot_ms: [f64; 3],
    /// End-to-end p50/p90/p99, ms.
    pub e2e_ms: [f64; 3],
    /// Good requests/s under the SLOs (absent without SLOs).
    pub good_req_s: Option<f64>,
    /// Good output tokens/s.
    pub good_output_tok_s: Option<f64>,
    /// Every percentile SLO held.
    pub slo_met: Option<bool>,
    /// The point's run judged itself `harness-bound` (its `summary.json` → `harness`): its
    /// figures may be the harness's limits, not the target's, so no knee is read from it.
    #[serde(default)]
    pub harness_bound: bool,
}

impl CurvePoint {
    /// The point of `cell` at load `value`.
    pub fn of(value: f64, cell: &CellSummary) -> CurvePoint {
        let triple = |m: Metric| cell.metric(m).map_or([0.0; 3], |s| [s.p50, s.p90, s.p99]);
        let per_s = |n: u64| {
            if cell.span_s > 0.0 {
                n as f64 / cell.span_s
            } else {
                0.0
            }
        };
        CurvePoint {
            value,
            requests: cell.requests,
            ok: cell.ok,
            error_rate: cell.error_rate,
            achieved_req_s: per_s(cell.ok),
            // Over the window, like `achieved_req_s` (not the cell's busy time).
            output_tok_s: per_s(cell.output_tokens),
            ttft_ms: triple(Metric::Ttft),
            tpot_ms: triple(Metric::Tpot),
            e2e_ms: triple(Metric::E2e),
            good_req_s: cell.goodput.as_ref().map(|g| g.good_req_s),
            good_output_tok_s: cell.goodput.as_ref().map(|g| g.good_output_tok_s),
            slo_met: cell.goodput.as_ref().map(|g| g.slo_met),
            harness_bound: false,
        }
    }
}

/// The knee rule in words (kept in `sweep.json`).
pub fn knee_rule() -> String {
    format!(
        "knee = last point before the first saturated one; a point is saturated when its TTFT p50 exceeds the lowest-load point's by more than {:.0}% and by more than the larger of {KNEE_LATENCY_FLOOR_MS} ms and {:.0}% of the lowest-load point's e2e p50, or its achieved request rate grew by less than {:.0}% of the relative load increase from the previous point, or more than {:.0}% of its requests failed",
        KNEE_LATENCY_RISE * 100.0,
        KNEE_WAIT_SHARE * 100.0,
        KNEE_THROUGHPUT_FOLLOW * 100.0,
        KNEE_ERROR_RATE * 100.0
    )
}

/// Why point `i` of `pts` (sorted by load) is saturated, or `None`.
pub fn saturated(pts: &[CurvePoint], i: usize) -> Option<String> {
    let (base, prev, p) = (pts.first()?, pts.get(i.checked_sub(1)?)?, pts.get(i)?);
    if p.error_rate > KNEE_ERROR_RATE {
        return Some(format!("{:.0}% of requests failed", p.error_rate * 100.0));
    }
    let (b, t) = (base.ttft_ms[0], p.ttft_ms[0]);
    let floor = KNEE_LATENCY_FLOOR_MS.max(KNEE_WAIT_SHARE * base.e2e_ms[0]);
    if b > 0.0 && t > b * (1.0 + KNEE_LATENCY_RISE) && t - b > floor {
        return Some(format!(
            "TTFT p50 {t:.1} ms against {b:.1} ms at the lowest load"
        ));
    }
    if prev.value > 0.0 && prev.achieved_req_s > 0.0 && p.value > prev.value {
        let load_growth = p.value / prev.value - 1.0;
        let got = p.achieved_req_s / prev.achieved_req_s - 1.0;
        if got < KNEE_THROUGHPUT_FOLLOW * load_growth {
            return Some(format!(
                "load +{:.0}% but achieved requests/s {:+.0}% ({:.1} → {:.1}/s)",
                load_growth * 100.0,
                got * 100.0,
                prev.achieved_req_s,
                p.achieved_req_s
            ));
        }
    }
    None
}

/// The knee of a curve (sorted by load): `(index, reason the next point is saturated)`.
pub fn knee(pts: &[CurvePoint]) -> Option<(usize, String)> {
    (1..pts.len()).find_map(|i| saturated(pts, i).map(|why| (i - 1, why)))
}

/// What a curve's harness-bound points mean for its knee, when it has any: they are the
/// harness's limits, not the target's, so a knee at or just before the first of them may
/// be the harness's own.
pub fn harness_caveat(c: &Curve) -> Option<String> {
    let first = c.points.iter().position(|p| p.harness_bound)?;
    let at = num(c.points[first].value);
    Some(match c.knee {
        Some(k) if first <= k + 1 => format!(
            "the harness could not drive the load from {at} on (HARNESS-BOUND): this knee may be the harness's, not the target's"
        ),
        Some(_) => format!(
            "the harness could not drive the load from {at} on (HARNESS-BOUND), past the knee"
        ),
        None => format!(
            "the harness could not drive the load from {at} on (HARNESS-BOUND): the curve from there is the harness's, not the target's"
        ),
    })
}

/// Why a curve has no knee, with the harness caveat when it has one.
pub fn no_knee_reason(c: &Curve) -> String {
    match harness_caveat(c) {
        Some(caveat) => format!("no knee: no point saturated; {caveat}"),
        None => "no knee: no point saturated".to_string(),
    }
}

/// One curve per target × transport from `(load value, summary)` pairs, each sorted by load
/// with its knee marked.
pub fn curves(points: &[(f64, &Summary)]) -> Vec<Curve> {
    let mut out: Vec<Curve> = Vec::new();
    for (value, summary) in points {
        let bound = summary
            .harness
            .as_ref()
            .is_some_and(|h| h.verdict == super::harness::Verdict::HarnessBound);
        for cell in &summary.cells {
            let mut p = CurvePoint::of(*value, cell);
            p.harness_bound = bound;
            match out
                .iter_mut()
                .find(|c| c.target == cell.target && c.transport == cell.transport)
            {
                Some(c) => c.points.push(p),
                None => out.push(Curve {
                    target: cell.target.clone(),
                    transport: cell.transport.clone(),
                    points: vec![p],
                    knee: None,
                    knee_value: None,
                    knee_reason: None,
                }),
            }
        }
    }
    for c in &mut out {
        c.points.sort_by(|a, b| a.value.total_cmp(&b.value));
        if let Some((k, why)) = knee(&c.points) {
            c.knee = Some(k);
            c.knee_value = Some(c.points[k].value);
            c.knee_reason = Some(why);
        }
        if let (Some(why), Some(caveat)) = (&c.knee_reason, harness_caveat(c)) {
            c.knee_reason = Some(format!("{why}; {caveat}"));
        }
    }
    out
}

/// The sweep table: one block per curve, one row per load point, the knee marked `◀ knee`.
pub fn sweep_table(s: &SweepSummary) -> String {
    let mut out = String::new();
    let good = s
        .curves
        .iter()
        .any(|c| c.points.iter().any(|p| p.good_req_s.is_some()));
    for c in &s.curves {
        let _ = writeln!(out, "{} · {}", c.target, c.transport);
        let _ = write!(
            out,
            "  {:>9}  {:>6}  {:>8}  {:>9}  {:>20}  {:>17}",
            s.param, "ok", "req/s", "tok/s", "TTFT ms p50/p90/p99", "TPOT ms p50/p90/p99"
        );
        if good {
            let _ = write!(out, "  {:>29}", "good req/s (tok/s)");
        }
        out.push('\n');
        for (i, p) in c.points.iter().enumerate() {
            let t = |v: [f64; 3]| format!("{}/{}/{}", num(v[0]), num(v[1]), num(v[2]));
            let _ = write!(
                out,
                "  {:>9}  {:>6}  {:>8}  {:>9}  {:>20}  {:>17}",
                num(p.value),
                p.ok,
                num(p.achieved_req_s),
                num(p.output_tok_s),
                t(p.ttft_ms),
                t(p.tpot_ms)
            );
            if good {
                let g = match (p.good_req_s, p.good_output_tok_s) {
                    (Some(r), Some(t)) => format!(
                        "{} ({}){}",
                        if r == 0.0 { "0".to_string() } else { num(r) },
                        if t == 0.0 { "0".to_string() } else { num(t) },
                        if p.slo_met == Some(false) {
                            " SLO missed"
                        } else {
                            ""
                        }
                    ),
                    _ => "-".to_string(),
                };
                let _ = write!(out, "  {g:>29}");
            }
            if c.knee == Some(i) {
                out.push_str("  \u{25c0} knee");
            }
            if p.harness_bound {
                out.push_str("  HARNESS-BOUND");
            }
            out.push('\n');
        }
        if let Some(line) = slo_line(&s.param, c) {
            let _ = writeln!(out, "  {line}");
        }
        match (&c.knee_value, &c.knee_reason) {
            (Some(v), Some(why)) => {
                let _ = writeln!(
                    out,
                    "  knee at {} = {} (next point: {why})",
                    s.param,
                    num(*v)
                );
            }
            _ => {
                let _ = writeln!(out, "  {}", no_knee_reason(c));
            }
        }
    }
    out
}

/// The highest-load point of a curve that met every percentile SLO (GuideLLM's "max rate
/// under SLO"): points that missed one are skipped; `None` without SLOs or when none met.
pub fn best_under_slo(c: &Curve) -> Option<&CurvePoint> {
    c.points.iter().rev().find(|p| p.slo_met == Some(true))
}

/// The curve's SLO line for the table and report: where percentile SLOs were missed and the
/// highest load that met them all; `None` without SLOs.
pub fn slo_line(param: &str, c: &Curve) -> Option<String> {
    if c.points.iter().all(|p| p.slo_met.is_none()) {
        return None;
    }
    let missed: Vec<String> = c
        .points
        .iter()
        .filter(|p| p.slo_met == Some(false))
        .map(|p| num(p.value))
        .collect();
    let best = match best_under_slo(c) {
        Some(p) => format!(
            "highest load meeting every SLO: {param} = {} ({} good req/s)",
            num(p.value),
            p.good_req_s.map_or("-".to_string(), num)
        ),
        None => "no load point met every SLO".to_string(),
    };
    Some(if missed.is_empty() {
        best
    } else {
        format!(
            "percentile SLO missed at {param} = {} (good req/s there counts per-request SLOs only, as vLLM's --goodput); {best}",
            missed.join(", ")
        )
    })
}

/// `0.83`, `41.2`, `1234`, `-` for NaN or 0.
pub fn num(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return "-".to_string();
    }
    super::summary::num(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(value: f64, req_s: f64, ttft: f64) -> CurvePoint {
        CurvePoint {
            value,
            requests: 10,
            ok: 10,
            error_rate: 0.0,
            achieved_req_s: req_s,
            output_tok_s: 0.0,
            ttft_ms: [ttft; 3],
            tpot_ms: [1.0; 3],
            e2e_ms: [1.0; 3],
            good_req_s: None,
            good_output_tok_s: None,
            slo_met: None,
            harness_bound: false,
        }
    }

    #[test]
    fn a_missed_percentile_slo_is_marked_and_skipped_by_best_under_slo() {
        let mut points: Vec<_> = [1.0, 2.0, 4.0]
            .iter()
            .map(|&c: &f64| pt(c, c * 10.0, 20.0 * c))
            .collect();
        for (p, met) in points.iter_mut().zip([true, true, false]) {
            p.good_req_s = Some(p.achieved_req_s);
            p.good_output_tok_s = Some(1.0);
            p.slo_met = Some(met);
        }
        let c = Curve {
            target: "t".into(),
            transport: "http".into(),
            points,
            knee: None,
            knee_value: None,
            knee_reason: None,
        };
        assert_eq!(best_under_slo(&c).map(|p| p.value), Some(2.0));
        let line = slo_line("concurrency", &c).unwrap();
        assert!(line.contains("missed at concurrency = 4.00"), "{line}");
        assert!(
            line.contains("highest load meeting every SLO: concurrency = 2.00"),
            "{line}"
        );
        let s = SweepSummary {
            schema_version: SWEEP_SCHEMA_VERSION,
            sweep_id: "s".into(),
            scenario: "x".into(),
            param: "concurrency".into(),
            spec: "concurrency=1,2,4".into(),
            load_note: String::new(),
            knee_rule: knee_rule(),
            slo: "ttft p90<=50ms".into(),
            points: Vec::new(),
            curves: vec![c],
        };
        let t = sweep_table(&s);
        let rows: Vec<&str> = t.lines().filter(|l| l.ends_with("SLO missed")).collect();
        assert_eq!(rows.len(), 1, "{t}");
        assert!(rows[0].trim_start().starts_with("4.00"), "{t}");
    }

    #[test]
    fn knee_is_the_last_point_before_saturation() {
        // Capacity 8: throughput follows load up to 8, then flattens; TTFT then rises.
        let pts: Vec<_> = [1.0, 2.0, 4.0, 8.0, 16.0]
            .iter()
            .map(|&c: &f64| pt(c, c.min(8.0) * 10.0, if c > 8.0 { 100.0 } else { 20.0 }))
            .collect();
        let (k, why) = knee(&pts).unwrap();
        assert_eq!(pts[k].value, 8.0, "{why}");
        // Throughput alone: flat TTFT, throughput stops at 4.
        let pts: Vec<_> = [1.0, 2.0, 4.0, 8.0]
            .iter()
            .map(|&c: &f64| pt(c, c.min(4.0), 20.0))
            .collect();
        let (k, why) = knee(&pts).unwrap();
        assert_eq!(pts[k].value, 4.0);
        assert!(why.contains("achieved"), "{why}");
        // Noise below the floor is not a knee; no saturation, no knee.
        let pts: Vec<_> = [1.0, 2.0, 4.0]
            .iter()
            .map(|&c: &f64| pt(c, c, 1.0 + c))
            .collect();
        assert!(knee(&pts).is_none());
    }

    #[test]
    fn a_harness_bound_point_puts_a_caveat_on_the_knee() {
        let curve = |bound: Option<usize>| {
            let mut points: Vec<_> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
                .iter()
                .map(|&c: &f64| pt(c, c.min(8.0) * 10.0, if c > 8.0 { 100.0 } else { 20.0 }))
                .collect();
            if let Some(i) = bound {
                points[i].harness_bound = true;
            }
            Curve {
                target: "t".into(),
                transport: "http".into(),
                knee: knee(&points).map(|k| k.0),
                points,
                knee_value: None,
                knee_reason: None,
            }
        };
        // No bound point: no caveat; the knee at 8 (index 3).
        assert_eq!(curve(None).knee, Some(3));
        assert!(harness_caveat(&curve(None)).is_none());
        // Bound at the saturated point after the knee: the knee may be the harness's.
        let c = curve(Some(4));
        assert!(
            harness_caveat(&c).unwrap().contains("may be the harness's"),
            "{c:?}"
        );
        // Bound only well past the knee: said, but the knee stands.
        let c = curve(Some(5));
        assert!(harness_caveat(&c).unwrap().contains("past the knee"));
        // No knee and a bound point: the curve from there is the harness's.
        let mut c = curve(Some(2));
        c.knee = None;
        assert!(
            no_knee_reason(&c).contains("from 4.00 on"),
            "{}",
            no_knee_reason(&c)
        );
    }
}
