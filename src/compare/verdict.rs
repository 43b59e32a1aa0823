//! From two samples to one verdict per metric × statistic × cell: the criterion-style
//! decision with an explicit noise band.
//!
//! Owns: [`Verdict`], [`Row`], the band (noise, floor, user threshold) and the decision.
//! Does not own: the interval arithmetic (see `stats`) or rendering (see `render`).
//!
//! # The rule
//! Changes are signed in the metric's own direction (`+` = the candidate's value is
//! higher). The band is `[band_low, band_high]`; on the side where a change is *worse* its
//! edge is `max(noise, floor / baseline, threshold)`, on the better side
//! `max(noise, floor / baseline)` (a threshold says how much worsening is tolerated; it
//! does not make improvements harder to claim). With the confidence interval `[lo, hi]`:
//!
//! * the whole interval beyond the worse edge → `Regressed`;
//! * the whole interval beyond the better edge → `Improved`;
//! * the whole interval inside the band → `NoChange`;
//! * otherwise (it straddles an edge) → `Inconclusive`.
//!
//! # The power rule
//! A row is gated only when its samples can decide: at least the statistic's and the
//! metric's minimum samples per side and a baseline value above the metric's absolute
//! floor. A row whose interval then decides (regressed, improved or no change) keeps its
//! verdict. A row left straddling an edge is asked whether it could have decided at all:
//! if a zero-difference interval (the baseline resampled against itself) has a half-width
//! over [`POWER_SHARE`] of the band, its samples cannot decide at that band and it is
//! `NotGated` ("not gated: too few samples") rather than inconclusive. A not-gated row is
//! listed, never fails the gate and never counts as a decision, so a gate that decided
//! nothing says NO DECISION instead of PASS.

use serde::Serialize;

use super::gate::{GateMetric, Kind, Statistic, Threshold, Thresholds, POWER_SHARE};
use super::samples::CellSamples;
use super::stats::{self, BootstrapConfig, Interval, Pairing, Sample, Stat};
use crate::recorder::CellKey;
use crate::rng::Rng;

crate::vocab::names! {
    /// The outcome for one metric × statistic × cell.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Verdict ("verdict") {
        /// Worse beyond the band, with confidence.
        Regressed = "regressed",
        /// Undecided: the interval straddles a band edge, or there are too few samples.
        Inconclusive = "inconclusive",
        /// Better beyond the band, with confidence.
        Improved = "improved",
        /// Within the band, with confidence.
        NoChange = "no-change",
        /// Not gated: the samples cannot decide at the row's band (too few, or too
        /// dispersed; see [`super::gate::POWER_SHARE`]), or its value is below the metric's
        /// floor. Shown, never failing the gate, never counted as decided.
        NotGated = "not-gated",
    }
}

/// How a row's change is expressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeUnit {
    /// `candidate / baseline − 1`, as a fraction.
    Relative,
    /// `candidate − baseline` of a proportion, as a fraction (0.01 = 1 percentage point).
    Points,
}

/// One comparison: a metric's statistic in one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: String,
    /// Gate metric.
    pub metric: GateMetric,
    /// Statistic.
    pub statistic: Statistic,
    /// Unit of `baseline`/`candidate`: `ms`, `tok/s`, `%`.
    pub unit: &'static str,
    /// Baseline value (natural unit; error rate in percent); absent without samples.
    pub baseline: Option<f64>,
    /// Candidate value.
    pub candidate: Option<f64>,
    /// Baseline samples (requests; chunk gaps for `itl`; sessions for `session_wall`).
    pub n_baseline: u64,
    /// Candidate samples.
    pub n_candidate: u64,
    /// How `change`, `ci_low`, `ci_high`, `band_low`, `band_high` are expressed.
    pub change_unit: ChangeUnit,
    /// Point estimate of the change, signed in the metric's direction (+ = higher).
    pub change: Option<f64>,
    /// Lower confidence bound of the change.
    pub ci_low: Option<f64>,
    /// Upper confidence bound of the change.
    pub ci_high: Option<f64>,
    /// Lower edge of the no-change band.
    pub band_low: f64,
    /// Upper edge of the no-change band.
    pub band_high: f64,
    /// The metric's noise band (fraction, or points for the error rate).
    pub noise: f64,
    /// The user threshold that applied, as written (`+10%`, `+5ms`), if any.
    pub threshold: Option<String>,
    /// The decision.
    pub verdict: Verdict,
    /// Why, in one line.
    pub reason: String,
    /// Runs behind the baseline's samples (`run --repeat N`).
    pub runs_baseline: u32,
    /// Runs behind the candidate's samples.
    pub runs_candidate: u32,
    /// How the two sides were resampled: `none` (independently), `runs` (run i with run i,
    /// interleaved repeats), `requests` (request by request, same conversation replayed).
    pub pairing: Pairing,
    /// The comparison used, in words (pairing, runs, matched requests).
    pub comparison: String,
    /// The harness's dispatch lag (ms) that this row was judged against, when a run that
    /// judged itself harness-bound for that lag alone had one over
    /// [`super::gate::LAG_SHARE`] of the row's band (see `compare::lag`): the row is then
    /// `not-gated`, or stays `regressed` with the lag in its reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch_lag_ms: Option<f64>,
}

impl Row {
    /// `sim-wafer × http`.
    pub fn cell(&self) -> String {
        format!("{} × {}", self.target, self.transport)
    }
}

/// Decides from an interval and a band (both signed in the metric's direction).
pub fn decide(ci: Interval, band_low: f64, band_high: f64, higher_is_better: bool) -> Verdict {
    let (above, below) = if higher_is_better {
        (Verdict::Improved, Verdict::Regressed)
    } else {
        (Verdict::Regressed, Verdict::Improved)
    };
    if ci.low > band_high {
        above
    } else if ci.high < band_low {
        below
    } else if ci.low >= band_low && ci.high <= band_high {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    }
}

/// Stable stream id for a cell × metric, so a row's bootstrap does not depend on which
/// other metrics or cells were compared (FNV-1a).
fn stream_id(cell: &CellKey, metric: GateMetric) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in cell
        .target
        .bytes()
        .chain([0])
        .chain(cell.transport.bytes())
        .chain([0])
        .chain(metric.name().bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Compares one metric of one cell; one row per statistic. Metrics with no samples on
/// either side give no rows.
pub fn compare_metric(
    cell: &CellKey,
    metric: GateMetric,
    base: &CellSamples,
    cand: &CellSamples,
    thresholds: &Thresholds,
    boot: BootstrapConfig,
    wanted: Pairing,
) -> Vec<Row> {
    if metric.kind() == Kind::Proportion {
        return compare_error_rate(cell, base, cand, thresholds, boot.confidence)
            .into_iter()
            .collect();
    }
    let (sb, sc) = (base.sample(metric), cand.sample(metric));
    if sb.is_empty() && sc.is_empty() {
        return Vec::new();
    }
    let (sb, sc, pairing, comparison) = choose_pairing(base, cand, metric, wanted, sb, sc);
    let stats: Vec<Statistic> = metric.statistics().to_vec();
    let as_stat = |s: Statistic| s.quantile().map_or(Stat::Mean, Stat::Quantile);
    let boot = BootstrapConfig {
        seed: Rng::derive(boot.seed, stream_id(cell, metric)).next_u64(),
        ..boot
    };
    // Bootstrap only the statistics with enough samples (p99 often has too few).
    let enough: Vec<Statistic> = stats
        .iter()
        .copied()
        .filter(|s| {
            sb.len().min(sc.len()) >= s.min_samples().max(metric.min_samples())
                && sb.clusters().min(sc.clusters()) >= 10
        })
        .collect();
    let wanted_stats: Vec<Stat> = enough.iter().map(|s| as_stat(*s)).collect();
    let intervals = stats::relative_change_paired(&sb, &sc, &wanted_stats, boot, pairing);
    // The power rule: the interval of a zero difference at these sizes and this spread (the
    // baseline against itself, resampled independently).
    let zero = stats::relative_change_paired(
        &sb,
        &sb,
        &wanted_stats,
        BootstrapConfig {
            seed: boot.seed ^ 0x7a65_726f,
            ..boot
        },
        Pairing::None,
    );
    let hib = metric.higher_is_better();
    stats
        .iter()
        .map(|&st| {
            let bval = sb.point(as_stat(st));
            let cval = sc.point(as_stat(st));
            let threshold = thresholds.get(metric, st);
            let (noise, band_low, band_high) = band(metric, st, bval, threshold);
            let mut row = Row {
                target: cell.target.clone(),
                transport: cell.transport.clone(),
                metric,
                statistic: st,
                unit: metric.unit(),
                baseline: bval,
                candidate: cval,
                n_baseline: sb.len() as u64,
                n_candidate: sc.len() as u64,
                change_unit: ChangeUnit::Relative,
                change: None,
                ci_low: None,
                ci_high: None,
                band_low,
                band_high,
                noise,
                threshold: threshold.map(|t| t.display(metric)),
                verdict: Verdict::Inconclusive,
                reason: String::new(),
                runs_baseline: sb.runs() as u32,
                runs_candidate: sc.runs() as u32,
                pairing,
                comparison: comparison.clone(),
                dispatch_lag_ms: None,
            };
            let idx = enough.iter().position(|s| *s == st);
            match idx.and_then(|i| intervals[i]) {
                Some(ci) => {
                    row.change = Some(ci.point);
                    row.ci_low = Some(ci.low);
                    row.ci_high = Some(ci.high);
                    row.verdict = decide(ci, band_low, band_high, hib);
                    row.reason = reason(&row, boot.confidence, ci);
                    let zero_ci = idx.and_then(|i| zero[i]);
                    apply_power_rule(&mut row, zero_ci);
                }
                None => {
                    if let (Some(b), Some(c)) = (bval, cval) {
                        if b > 0.0 {
                            row.change = Some(c / b - 1.0);
                        }
                    }
                    row.reason = no_interval_reason(metric, st, &sb, &sc, idx.is_none());
                    if idx.is_none() && !sb.is_empty() && !sc.is_empty() {
                        row.verdict = Verdict::NotGated;
                        row.reason = format!("not gated: {}", row.reason);
                    }
                }
            }
            row
        })
        .collect()
}

/// How to pair the two sides' samples of `metric`: request by request when `wanted` says
/// both replayed the same conversation and enough requests match, else by run when the
/// repeats allow it, else not at all. Returns the samples to compare, the pairing and the
/// comparison in words.
fn choose_pairing(
    base: &CellSamples,
    cand: &CellSamples,
    metric: GateMetric,
    wanted: Pairing,
    mut sb: Sample,
    mut sc: Sample,
) -> (Sample, Sample, Pairing, String) {
    let mut pairing = Pairing::allowed(wanted.min_runs(), &sb, &sc);
    let mut comparison = match pairing {
        Pairing::Runs => format!(
            "hierarchical bootstrap, run i of the baseline paired with run i of the candidate ({} runs per side)",
            sb.runs()
        ),
        _ if sb.runs().max(sc.runs()) > 1 => format!(
            "hierarchical bootstrap over runs, then requests ({} / {} runs)",
            sb.runs(),
            sc.runs()
        ),
        _ => "bootstrap over requests (one run per side)".to_string(),
    };
    if wanted == Pairing::Requests {
        let (pb, pc, matched) = base.paired(cand, metric);
        let smaller = sb.clusters().min(sc.clusters());
        if matched >= 10 && 2 * matched >= smaller {
            pairing = Pairing::allowed(Pairing::Requests, &pb, &pc);
            comparison = format!(
                "paired by request (session, turn, step): both sides replayed the same conversation; {matched} of {smaller} requests matched"
            );
            (sb, sc) = (pb, pc);
        } else {
            comparison = format!(
                "unpaired: only {matched} of {smaller} requests matched by (session, turn, step), so the drawn lengths may differ; {comparison}"
            );
        }
    } else if metric.length_dependent() {
        comparison = format!(
            "unpaired and length-dependent: the sides drew different conversations, so this change mixes workload and system; {comparison}"
        );
    }
    (sb, sc, pairing, comparison)
}

/// A row's noise and its band of no change (signed in the metric's direction): the noise
/// (at least the metric's absolute floor), widened on the worse side to the threshold.
fn band(
    metric: GateMetric,
    st: Statistic,
    bval: Option<f64>,
    threshold: Option<Threshold>,
) -> (f64, f64, f64) {
    let noise = metric.default_noise() * st.noise_scale();
    let floor_rel = match bval {
        Some(b) if b > 0.0 => metric.noise_floor() / b,
        _ => 0.0,
    };
    // A value below the metric's floor is not gated (see `apply_power_rule`); its band is
    // then shown as the noise alone rather than as the floor over a tiny value (a 0.5 ms floor
    // over a 0.019 ms connection setup printed [-2623.6%, +2623.6%]).
    let floor_rel = if floor_rel > 1.0 { 0.0 } else { floor_rel };
    let better_edge = noise.max(floor_rel);
    let worse_edge = better_edge.max(
        threshold
            .zip(bval)
            .map_or(0.0, |(t, b)| t.relative_to(b, metric)),
    );
    let (band_low, band_high) = if metric.higher_is_better() {
        (-worse_edge, better_edge)
    } else {
        (-better_edge, worse_edge)
    };
    (noise, band_low, band_high)
}

/// The power rule (module doc) on a row that has an interval: `NotGated` when its baseline
/// is below the metric's floor or when `zero` (the interval of a zero difference at its
/// sizes and spread) is wider than [`POWER_SHARE`] of its band; the interval stays shown.
fn apply_power_rule(row: &mut Row, zero: Option<Interval>) {
    let floor = row.metric.noise_floor();
    if let Some(b) = row.baseline.filter(|b| floor > 0.0 && *b < floor) {
        row.verdict = Verdict::NotGated;
        row.reason = format!(
            "not gated: the baseline's {b:.3} {} is below {}'s {floor} {} floor, too small to gate; {}",
            row.unit,
            row.metric.name(),
            row.unit,
            row.reason
        );
        return;
    }
    // A row whose interval decided (wholly beyond an edge, or wholly inside the band) has
    // shown that its samples could decide; only a row left straddling an edge is asked
    // whether it could have decided at all.
    if row.verdict != Verdict::Inconclusive {
        return;
    }
    let edge = (-row.band_low).min(row.band_high);
    let Some(half) = zero.map(|z| (z.high - z.low) / 2.0) else {
        return;
    };
    if half > POWER_SHARE * edge {
        row.verdict = Verdict::NotGated;
        row.reason = format!(
            "not gated: too few samples for its band: a zero difference at n = {} / {} with this spread has a 95% interval of ±{:.1}%, more than {:.0}% of the band ±{:.1}%; {}",
            row.n_baseline,
            row.n_candidate,
            half * 100.0,
            POWER_SHARE * 100.0,
            edge * 100.0,
            row.reason
        );
    }
}

/// Why a row has no interval: a side without samples, too few samples for the statistic
/// (`too_few`), or a baseline of 0.
fn no_interval_reason(
    metric: GateMetric,
    st: Statistic,
    sb: &Sample,
    sc: &Sample,
    too_few: bool,
) -> String {
    if sb.is_empty() || sc.is_empty() {
        let side = if sb.is_empty() {
            "baseline"
        } else {
            "candidate"
        };
        format!("no samples in the {side}")
    } else if too_few {
        let unit = match metric {
            GateMetric::SessionWall => "sessions",
            GateMetric::Itl => "chunk gaps (from ≥ 10 requests)",
            _ => "requests",
        };
        format!(
            "too few samples: {} needs ≥ {} {unit} per side, have {} / {}",
            st.name(),
            st.min_samples(),
            sb.len(),
            sc.len()
        )
    } else {
        "baseline value is 0; a relative change is undefined".to_string()
    }
}

fn compare_error_rate(
    cell: &CellKey,
    base: &CellSamples,
    cand: &CellSamples,
    thresholds: &Thresholds,
    confidence: f64,
) -> Option<Row> {
    let metric = GateMetric::ErrorRate;
    if base.counted == 0 && cand.counted == 0 {
        return None;
    }
    let st = Statistic::Rate;
    let noise = metric.default_noise();
    let threshold = thresholds.get(metric, st);
    let worse = noise.max(threshold.map_or(0.0, |t| t.relative_to(0.0, metric)));
    let pct = |k: u64, n: u64| (n > 0).then(|| 100.0 * k as f64 / n as f64);
    let mut row = Row {
        target: cell.target.clone(),
        transport: cell.transport.clone(),
        metric,
        statistic: st,
        unit: metric.unit(),
        baseline: pct(base.failed, base.counted),
        candidate: pct(cand.failed, cand.counted),
        n_baseline: base.counted,
        n_candidate: cand.counted,
        change_unit: ChangeUnit::Points,
        change: None,
        ci_low: None,
        ci_high: None,
        band_low: -noise,
        band_high: worse,
        noise,
        threshold: threshold.map(|t| t.display(metric)),
        verdict: Verdict::Inconclusive,
        reason: String::new(),
        runs_baseline: base.runs,
        runs_candidate: cand.runs,
        pairing: Pairing::None,
        comparison: "Newcombe score interval of the difference of the pooled proportions"
            .to_string(),
        dispatch_lag_ms: None,
    };
    if base.counted.min(cand.counted) < st.min_samples() as u64 {
        row.verdict = Verdict::NotGated;
        row.reason = format!(
            "not gated: too few samples: the error rate needs ≥ {} requests per side, have {} / {}",
            st.min_samples(),
            base.counted,
            cand.counted
        );
        return Some(row);
    }
    let ci = stats::proportion_difference(
        base.failed,
        base.counted,
        cand.failed,
        cand.counted,
        confidence,
    )?;
    row.change = Some(ci.point);
    row.ci_low = Some(ci.low);
    row.ci_high = Some(ci.high);
    row.verdict = decide(ci, row.band_low, row.band_high, false);
    row.reason = reason(&row, confidence, ci);
    // The power rule (only for an undecided row), with the baseline's rate on both sides.
    let same = (base.failed as f64 / base.counted as f64 * cand.counted as f64).round() as u64;
    let zero =
        stats::proportion_difference(base.failed, base.counted, same, cand.counted, confidence);
    let half = zero.map_or(f64::INFINITY, |z| (z.high - z.low) / 2.0);
    if row.verdict == Verdict::Inconclusive && half > POWER_SHARE * noise {
        row.verdict = Verdict::NotGated;
        row.reason = format!(
            "not gated: too few requests for the ±{:.0}pp band: a zero difference at n = {} / {} has a 95% interval of ±{:.2}pp, more than {:.0}% of the band (a rise in failures beyond the band would still fail the gate); {}",
            noise * 100.0,
            base.counted,
            cand.counted,
            half * 100.0,
            POWER_SHARE * 100.0,
            row.reason
        );
    }
    Some(row)
}

/// Formats a change (fraction) as `+12.3%` or, for points, `+1.2pp`.
pub fn fmt_change(v: f64, unit: ChangeUnit) -> String {
    match unit {
        ChangeUnit::Relative => format!("{:+.1}%", v * 100.0),
        ChangeUnit::Points => format!("{:+.1}pp", v * 100.0),
    }
}

fn reason(row: &Row, confidence: f64, ci: Interval) -> String {
    let u = row.change_unit;
    let ci_s = format!(
        "{:.0}% CI [{}, {}]",
        confidence * 100.0,
        fmt_change(ci.low, u),
        fmt_change(ci.high, u)
    );
    let band = format!(
        "band [{}, {}]",
        fmt_change(row.band_low, u),
        fmt_change(row.band_high, u)
    );
    match row.verdict {
        Verdict::Regressed | Verdict::Improved => {
            let word = if row.verdict == Verdict::Regressed {
                "worse"
            } else {
                "better"
            };
            format!("{ci_s} lies entirely beyond the {band}: {word}")
        }
        Verdict::NoChange => format!("{ci_s} lies within the noise {band}"),
        Verdict::Inconclusive => {
            format!("{ci_s} straddles an edge of the {band}; more samples would decide")
        }
        Verdict::NotGated => format!("{ci_s}, {band}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(low: f64, high: f64) -> Interval {
        Interval {
            point: (low + high) / 2.0,
            low,
            high,
        }
    }

    #[test]
    fn decision_table() {
        // Latency (lower is better), band [-5%, +10%].
        let d = |l, h| decide(iv(l, h), -0.05, 0.10, false);
        assert_eq!(d(0.11, 0.20), Verdict::Regressed);
        assert_eq!(d(0.06, 0.20), Verdict::Inconclusive);
        assert_eq!(d(-0.04, 0.09), Verdict::NoChange);
        assert_eq!(d(-0.20, -0.06), Verdict::Improved);
        assert_eq!(d(-0.20, 0.20), Verdict::Inconclusive);
        // Throughput (higher is better), band [-10%, +5%].
        let d = |l, h| decide(iv(l, h), -0.10, 0.05, true);
        assert_eq!(d(-0.30, -0.11), Verdict::Regressed);
        assert_eq!(d(0.06, 0.10), Verdict::Improved);
        assert_eq!(d(-0.09, 0.04), Verdict::NoChange);
    }

    fn cell_with(ttft: &[f64], failed: u64, counted: u64) -> CellSamples {
        use crate::vocab::RequestRecord;
        let mut c = CellSamples::default();
        for t in ttft {
            c.add_request(&RequestRecord {
                first_token_ns: Some((t * 1e6) as u64),
                ..Default::default()
            });
        }
        c.counted += counted;
        c.failed += failed;
        c
    }

    fn boot() -> BootstrapConfig {
        BootstrapConfig {
            resamples: 500,
            confidence: 0.95,
            seed: 1,
        }
    }

    #[test]
    fn too_few_samples_are_not_gated_never_a_pass() {
        let key = CellKey::new("t", "http");
        let base = cell_with(&[10.0; 5], 0, 0);
        let cand = cell_with(&[30.0; 5], 0, 0);
        let rows = compare_metric(
            &key,
            GateMetric::Ttft,
            &base,
            &cand,
            &Thresholds::new(),
            boot(),
            Pairing::None,
        );
        assert_eq!(rows.len(), 3);
        for r in &rows {
            // The power rule: rows that cannot decide at their band are not gated.
            assert_eq!(r.verdict, Verdict::NotGated, "{r:?}");
            assert!(r.reason.contains("too few samples"), "{}", r.reason);
        }
        assert_eq!(rows[0].change, Some(2.0));
    }

    #[test]
    fn thresholds_widen_only_the_worse_side() {
        let key = CellKey::new("t", "http");
        let xs: Vec<f64> = (0..200).map(|i| 100.0 + (i % 10) as f64).collect();
        let ys: Vec<f64> = xs.iter().map(|x| x * 1.08).collect();
        let (b, c) = (cell_with(&xs, 0, 0), cell_with(&ys, 0, 0));
        let none = compare_metric(
            &key,
            GateMetric::Ttft,
            &b,
            &c,
            &Thresholds::new(),
            boot(),
            Pairing::None,
        );
        assert_eq!(none[0].verdict, Verdict::Regressed, "{:?}", none[0]);
        let t = Thresholds::parse_cli(&["ttft=+10%"]).unwrap();
        let with = compare_metric(&key, GateMetric::Ttft, &b, &c, &t, boot(), Pairing::None);
        assert_eq!(with[0].verdict, Verdict::NoChange, "{:?}", with[0]);
        assert_eq!(with[0].band_high, 0.10);
        assert_eq!(with[0].band_low, -0.05);
        assert_eq!(with[0].threshold.as_deref(), Some("+10%"));
        // Absolute: +20ms on a ~104ms median is ~19%.
        let t = Thresholds::parse_cli(&["ttft=+20ms"]).unwrap();
        let abs = compare_metric(&key, GateMetric::Ttft, &b, &c, &t, boot(), Pairing::None);
        assert!(
            (abs[0].band_high - 20.0 / 104.0).abs() < 0.01,
            "{:?}",
            abs[0]
        );
        // Reversed: the candidate is faster.
        let rev = compare_metric(
            &key,
            GateMetric::Ttft,
            &c,
            &b,
            &Thresholds::new(),
            boot(),
            Pairing::None,
        );
        assert_eq!(rev[0].verdict, Verdict::Improved, "{:?}", rev[0]);
    }

    #[test]
    fn error_rate_uses_points() {
        let key = CellKey::new("t", "http");
        let sized = |bf, cf, n| {
            compare_metric(
                &key,
                GateMetric::ErrorRate,
                &cell_with(&[], bf, n),
                &cell_with(&[], cf, n),
                &Thresholds::new(),
                boot(),
                Pairing::None,
            )
        };
        // 0% against 0% at 100 requests a side straddles the ±2pp band and has no power
        // to decide at it: not gated. At 300 its interval (±1.26pp) lies inside: decided.
        assert_eq!(sized(0, 0, 100)[0].verdict, Verdict::NotGated);
        assert_eq!(sized(0, 0, 300)[0].verdict, Verdict::NoChange);
        assert_eq!(sized(0, 0, 3000)[0].verdict, Verdict::NoChange);
        let rows = |bf, cf| {
            compare_metric(
                &key,
                GateMetric::ErrorRate,
                &cell_with(&[], bf, 300),
                &cell_with(&[], cf, 300),
                &Thresholds::new(),
                boot(),
                Pairing::None,
            )
        };
        assert_eq!(
            rows(0, 30)[0].verdict,
            Verdict::Regressed,
            "{:?}",
            rows(0, 30)
        );
        // A fall wholly beyond the band is a decision at any n; an undecided row without
        // the power to decide is not gated.
        assert_eq!(rows(30, 0)[0].verdict, Verdict::Improved);
        assert_eq!(sized(300, 0, 3000)[0].verdict, Verdict::Improved);
        assert_eq!(rows(0, 4)[0].verdict, Verdict::NotGated);
        assert_eq!(rows(0, 30)[0].change_unit, ChangeUnit::Points);
        assert_eq!(rows(0, 30)[0].candidate, Some(10.0));
    }
}
