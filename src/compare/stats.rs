//! The statistics behind the gate: a seeded bootstrap of the relative change of a statistic
//! between two samples, and a score interval for the difference of two proportions.
//!
//! Owns: [`Sample`] (sorted values grouped into resampling clusters, clusters grouped into
//! runs), nearest-rank quantiles, the (hierarchical, optionally paired) bootstrap,
//! Wilson/Newcombe intervals and the normal quantile.
//! Does not own: what the intervals mean for the verdict (see `verdict`).
//!
//! # Why clusters
//! Requests are resampled as units. For most metrics a request gives one sample, so a
//! cluster is one value. ITL gives one sample per chunk gap; gaps of one request share its
//! decode speed and are strongly correlated, so resampling gaps one by one would pretend a
//! run holds tens of thousands of independent observations and give intervals far too
//! narrow. Resampling whole requests (a cluster bootstrap) keeps that correlation.
//!
//! # Why runs (the hierarchical bootstrap)
//! On a shared machine whole runs differ from each other more than requests within one run
//! do: a neighbour's build, a busy minute, a slower scheduler tick move every request of a
//! run together. Resampling the requests of one run cannot see that, so its interval is too
//! narrow and an A/A pair fails the gate. With several runs per side (`run --repeat N`)
//! each resample first draws N runs with replacement, then the requests of each drawn run
//! with replacement (a two-stage bootstrap; Davison & Hinkley 1997, §3.8, "strategy 1"),
//! so the interval's width comes from how much runs differ on this machine. With one run
//! per side it is the ordinary cluster bootstrap.
//!
//! # Pairing
//! [`Pairing::Runs`]: baseline and candidate ran interleaved (B₁ C₁ B₂ C₂ …), so run i of
//! each side saw the same machine state; the run draw is shared by both sides, which
//! cancels drift common to a pair. [`Pairing::Requests`]: both sides replayed the same
//! conversation (same scenario and seeds) and the samples hold the same requests in the
//! same order (`session`, `turn`, `step`); the request draw is shared too, so a change in
//! drawn lengths cannot move the ratio.

use crate::rng::Rng;

/// Values sorted ascending, each tagged with the cluster (request) it came from.
///
/// Invariants (established by [`Sample::new`]): no NaN or infinite values; cluster ids are
/// `0..clusters`, every one used at least once; `size`/`sum` hold each cluster's count and
/// sum of values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    values: Vec<f64>,
    cluster_of: Vec<u32>,
    size: Vec<u64>,
    sum: Vec<f64>,
    /// First cluster of each run (ascending; empty for an empty sample).
    run_start: Vec<u32>,
}

impl Sample {
    /// A sample from clusters of values (one inner `Vec` per request). Non-finite values
    /// and empty clusters are dropped.
    pub fn new(groups: impl IntoIterator<Item = Vec<f64>>) -> Sample {
        Sample::with_runs([groups.into_iter().collect::<Vec<_>>()])
    }

    /// A sample from runs of clusters of values (runs → requests → values). Non-finite
    /// values, empty clusters and runs left empty are dropped.
    pub fn with_runs(runs: impl IntoIterator<Item = Vec<Vec<f64>>>) -> Sample {
        let mut pairs: Vec<(f64, u32)> = Vec::new();
        let (mut size, mut sum, mut run_start) = (Vec::new(), Vec::new(), Vec::new());
        for run in runs {
            let first = size.len() as u32;
            for g in run {
                let before = pairs.len();
                let id = size.len() as u32;
                pairs.extend(g.into_iter().filter(|v| v.is_finite()).map(|v| (v, id)));
                if pairs.len() > before {
                    size.push((pairs.len() - before) as u64);
                    sum.push(pairs[before..].iter().map(|p| p.0).sum());
                }
            }
            if size.len() as u32 > first {
                run_start.push(first);
            }
        }
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        Sample {
            values: pairs.iter().map(|p| p.0).collect(),
            cluster_of: pairs.iter().map(|p| p.1).collect(),
            size,
            sum,
            run_start,
        }
    }

    /// Number of runs holding at least one value.
    pub fn runs(&self) -> usize {
        self.run_start.len()
    }

    /// Clusters of run `r`.
    fn run_range(&self, r: usize) -> std::ops::Range<usize> {
        let start = self.run_start[r] as usize;
        let end = self
            .run_start
            .get(r + 1)
            .map_or(self.clusters(), |e| *e as usize);
        start..end
    }

    /// The clusters per run, for checking that two samples line up request by request.
    pub fn shape(&self) -> Vec<usize> {
        (0..self.runs()).map(|r| self.run_range(r).len()).collect()
    }

    /// A sample of independent values (each its own cluster).
    pub fn independent(values: impl IntoIterator<Item = f64>) -> Sample {
        Sample::new(values.into_iter().map(|v| vec![v]))
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Number of resampling units (requests, sessions).
    pub fn clusters(&self) -> usize {
        self.size.len()
    }

    /// The statistic over the whole sample (every cluster weighted once).
    pub fn point(&self, stat: Stat) -> Option<f64> {
        let ones = vec![1u32; self.clusters()];
        let mut out = [0.0];
        self.weighted(&ones, &[stat], &mut out).then_some(out[0])
    }

    /// Computes `stats` with cluster `c` counted `weights[c]` times. Quantiles are
    /// nearest-rank: the smallest value whose cumulative weight reaches `q` of the total.
    /// Returns false when the total weight is zero.
    ///
    /// This is the bootstrap's inner loop, so it avoids touching every value: totals and
    /// means come from per-cluster sizes and sums, quantiles up to the median are found
    /// walking up from the smallest value and higher ones walking down from the largest
    /// (p99 looks at ~1 % of the values).
    fn weighted(&self, weights: &[u32], stats: &[Stat], out: &mut [f64]) -> bool {
        let mut total = 0u64;
        let mut sum = 0.0;
        for ((w, n), s) in weights.iter().zip(&self.size).zip(&self.sum) {
            total += u64::from(*w) * n;
            sum += f64::from(*w) * s;
        }
        if total == 0 {
            return false;
        }
        for (i, st) in stats.iter().enumerate() {
            out[i] = match *st {
                Stat::Mean => sum / total as f64,
                Stat::Quantile(q) => {
                    let t = ((q * total as f64).ceil() as u64).clamp(1, total);
                    self.nearest_rank(weights, total, t)
                }
            };
        }
        true
    }

    /// The value at cumulative weight `t` (1-based) of `total`.
    fn nearest_rank(&self, weights: &[u32], total: u64, t: u64) -> f64 {
        let w = |i: usize| u64::from(weights[self.cluster_of[i] as usize]);
        if t <= total / 2 {
            let mut acc = 0u64;
            for i in 0..self.values.len() {
                acc += w(i);
                if acc >= t {
                    return self.values[i];
                }
            }
        } else {
            // Weight strictly above value i is `above`; i holds rank t when
            // total − above − w(i) < t ≤ total − above.
            let mut above = 0u64;
            for i in (0..self.values.len()).rev() {
                let wi = w(i);
                if wi > 0 && above + wi > total - t {
                    return self.values[i];
                }
                above += wi;
            }
        }
        self.values.last().copied().unwrap_or(f64::NAN)
    }

    /// Draws the runs of one resample: as many as there are, with replacement (none drawn
    /// for a single run, so a one-run sample resamples exactly as the plain bootstrap).
    fn draw_runs(&self, rng: &mut Rng, picks: &mut Vec<usize>) {
        picks.clear();
        let r = self.runs();
        if r == 1 {
            picks.push(0);
        } else {
            picks.extend((0..r).map(|_| rng.below(r as u64) as usize));
        }
    }

    /// Cluster weights of one resample given the drawn runs: each drawn run contributes as
    /// many draws (with replacement) from its own clusters as it has clusters.
    fn resample_weights(&self, rng: &mut Rng, picks: &[usize], weights: &mut [u32]) {
        weights.fill(0);
        for &p in picks {
            let range = self.run_range(p);
            let n = range.len() as u64;
            for _ in 0..n {
                weights[range.start + rng.below(n) as usize] += 1;
            }
        }
    }
}

/// How the two sides of a comparison are resampled (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// Independent resamples of each side.
    #[default]
    None,
    /// Run i of the baseline with run i of the candidate (interleaved repeats).
    Runs,
    /// Request by request (same conversation replayed; same shape on both sides).
    Requests,
}

impl Pairing {
    /// `Requests` reduced to `Runs` (for samples not built request by request).
    pub fn min_runs(self) -> Pairing {
        match self {
            Pairing::Requests => Pairing::Runs,
            p => p,
        }
    }

    /// The strongest pairing the two samples allow, up to `wanted`: `Requests` needs the
    /// same shape (runs and requests per run), `Runs` the same number of runs (> 1).
    pub fn allowed(wanted: Pairing, b: &Sample, c: &Sample) -> Pairing {
        match wanted {
            Pairing::Requests if b.shape() == c.shape() && !b.is_empty() => Pairing::Requests,
            Pairing::Requests | Pairing::Runs if b.runs() == c.runs() && b.runs() > 1 => {
                Pairing::Runs
            }
            _ => Pairing::None,
        }
    }
}

/// A statistic the bootstrap can compute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// Nearest-rank quantile, `q` in (0, 1].
    Quantile(f64),
    /// Arithmetic mean.
    Mean,
}

/// A point estimate with a confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The estimate from the full samples.
    pub point: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

/// Bootstrap settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BootstrapConfig {
    /// Resamples per side.
    pub resamples: u32,
    /// Two-sided confidence level, e.g. 0.95.
    pub confidence: f64,
    /// Seed; the same seed and data give the same interval.
    pub seed: u64,
}

/// Percentile-bootstrap intervals of the relative change `candidate / baseline − 1` of each
/// statistic in `stats`, from `resamples` independent resamples of each side (one resample
/// serves every statistic). `None` for a statistic whose baseline point estimate is 0 or
/// whose samples are empty.
pub fn relative_change(
    baseline: &Sample,
    candidate: &Sample,
    stats: &[Stat],
    cfg: BootstrapConfig,
) -> Vec<Option<Interval>> {
    relative_change_paired(baseline, candidate, stats, cfg, Pairing::None)
}

/// [`relative_change`] with the two sides' draws shared as `pairing` says (reduced to what
/// the samples allow, see [`Pairing::allowed`]).
pub fn relative_change_paired(
    baseline: &Sample,
    candidate: &Sample,
    stats: &[Stat],
    cfg: BootstrapConfig,
    pairing: Pairing,
) -> Vec<Option<Interval>> {
    let pairing = Pairing::allowed(pairing, baseline, candidate);
    let mut result = vec![None; stats.len()];
    if baseline.is_empty() || candidate.is_empty() || cfg.resamples == 0 {
        return result;
    }
    let ones_b = vec![1u32; baseline.clusters()];
    let ones_c = vec![1u32; candidate.clusters()];
    let mut pb = vec![0.0; stats.len()];
    let mut pc = vec![0.0; stats.len()];
    if !baseline.weighted(&ones_b, stats, &mut pb) || !candidate.weighted(&ones_c, stats, &mut pc) {
        return result;
    }
    let mut rng = Rng::new(cfg.seed);
    let mut wb = vec![0u32; baseline.clusters()];
    let mut wc = vec![0u32; candidate.clusters()];
    let mut sb = vec![0.0; stats.len()];
    let mut sc = vec![0.0; stats.len()];
    let mut changes: Vec<Vec<f64>> = vec![Vec::with_capacity(cfg.resamples as usize); stats.len()];
    let (mut pick_b, mut pick_c) = (Vec::new(), Vec::new());
    for _ in 0..cfg.resamples {
        baseline.draw_runs(&mut rng, &mut pick_b);
        match pairing {
            Pairing::None => candidate.draw_runs(&mut rng, &mut pick_c),
            Pairing::Runs | Pairing::Requests => pick_c.clone_from(&pick_b),
        }
        baseline.resample_weights(&mut rng, &pick_b, &mut wb);
        match pairing {
            Pairing::Requests => wc.copy_from_slice(&wb),
            Pairing::None | Pairing::Runs => candidate.resample_weights(&mut rng, &pick_c, &mut wc),
        }
        // Every cluster holds at least one value, so a resample is never empty.
        baseline.weighted(&wb, stats, &mut sb);
        candidate.weighted(&wc, stats, &mut sc);
        for i in 0..stats.len() {
            if sb[i] > 0.0 {
                changes[i].push(sc[i] / sb[i] - 1.0);
            }
        }
    }
    let alpha = (1.0 - cfg.confidence).clamp(0.0, 1.0) / 2.0;
    for i in 0..stats.len() {
        if pb[i] <= 0.0 || changes[i].len() < cfg.resamples as usize / 2 {
            continue;
        }
        let c = &mut changes[i];
        c.sort_by(f64::total_cmp);
        result[i] = Some(Interval {
            point: pc[i] / pb[i] - 1.0,
            low: percentile_sorted(c, alpha),
            high: percentile_sorted(c, 1.0 - alpha),
        });
    }
    result
}

/// Linear-interpolated percentile of sorted data (`p` in [0, 1]).
fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = p.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let low = 0.024_25;
    if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - p)
    }
}

/// The Wilson score interval of a proportion `k / n` at two-sided `confidence`.
pub fn wilson(k: u64, n: u64, confidence: f64) -> Option<(f64, f64)> {
    if n == 0 || k > n {
        return None;
    }
    let z = normal_quantile(1.0 - (1.0 - confidence) / 2.0);
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// Newcombe's hybrid score interval (his method 10) for the difference of two independent
/// proportions `k2/n2 − k1/n1`. Unlike the Wald interval it behaves at 0 failures, which is
/// the usual case for a healthy service.
pub fn proportion_difference(
    k1: u64,
    n1: u64,
    k2: u64,
    n2: u64,
    confidence: f64,
) -> Option<Interval> {
    let (l1, u1) = wilson(k1, n1, confidence)?;
    let (l2, u2) = wilson(k2, n2, confidence)?;
    let p1 = k1 as f64 / n1 as f64;
    let p2 = k2 as f64 / n2 as f64;
    let d = p2 - p1;
    Some(Interval {
        point: d,
        low: d - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt(),
        high: d + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(seed: u64) -> BootstrapConfig {
        BootstrapConfig {
            resamples: 2000,
            confidence: 0.95,
            seed,
        }
    }

    #[test]
    fn nearest_rank_quantiles_and_mean() {
        let s = Sample::independent((1..=100).map(f64::from));
        assert_eq!(s.point(Stat::Quantile(0.5)), Some(50.0));
        assert_eq!(s.point(Stat::Quantile(0.9)), Some(90.0));
        assert_eq!(s.point(Stat::Quantile(0.99)), Some(99.0));
        assert_eq!(s.point(Stat::Quantile(1.0)), Some(100.0));
        assert_eq!(s.point(Stat::Mean), Some(50.5));
        let clustered = Sample::new(vec![vec![1.0, 2.0], vec![], vec![3.0, f64::NAN]]);
        assert_eq!(clustered.len(), 3);
        assert_eq!(clustered.clusters(), 2);
        assert_eq!(Sample::default().point(Stat::Mean), None);
    }

    #[test]
    fn weighted_quantiles_match_expanding_the_resample() {
        let mut rng = Rng::new(42);
        for round in 0..200 {
            let groups: Vec<Vec<f64>> = (0..1 + rng.below(12))
                .map(|_| {
                    (0..1 + rng.below(4))
                        .map(|_| rng.below(20) as f64)
                        .collect()
                })
                .collect();
            let s = Sample::new(groups.clone());
            let weights: Vec<u32> = (0..s.clusters()).map(|_| rng.below(3) as u32).collect();
            let mut expanded: Vec<f64> = groups
                .iter()
                .zip(&weights)
                .flat_map(|(g, w)| (0..*w).flat_map(move |_| g.iter().copied()))
                .collect();
            expanded.sort_by(f64::total_cmp);
            let stats = [
                Stat::Quantile(0.1),
                Stat::Quantile(0.5),
                Stat::Quantile(0.9),
                Stat::Quantile(0.99),
                Stat::Mean,
            ];
            let mut out = [0.0; 5];
            let ok = s.weighted(&weights, &stats, &mut out);
            assert_eq!(ok, !expanded.is_empty(), "round {round}");
            if !ok {
                continue;
            }
            let n = expanded.len();
            for (i, q) in [0.1, 0.5, 0.9, 0.99].into_iter().enumerate() {
                let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
                assert_eq!(
                    out[i],
                    expanded[rank - 1],
                    "round {round} q {q} {expanded:?} {weights:?}"
                );
            }
            let mean = expanded.iter().sum::<f64>() / n as f64;
            assert!((out[4] - mean).abs() < 1e-9);
        }
    }

    #[test]
    fn bootstrap_is_deterministic_and_covers_a_known_shift() {
        let mut rng = Rng::new(1);
        let base: Vec<f64> = (0..400).map(|_| rng.lognormal(100.0, 0.2)).collect();
        let cand: Vec<f64> = (0..400).map(|_| rng.lognormal(120.0, 0.2)).collect();
        let (b, c) = (Sample::independent(base), Sample::independent(cand));
        let stats = [Stat::Quantile(0.5), Stat::Mean];
        let a = relative_change(&b, &c, &stats, cfg(9));
        assert_eq!(a, relative_change(&b, &c, &stats, cfg(9)));
        let med = a[0].unwrap();
        assert!(med.low < 0.20 && 0.20 < med.high, "{med:?}");
        assert!(med.low > 0.1, "{med:?}");
        assert!(med.low <= med.point && med.point <= med.high);
    }

    #[test]
    fn cluster_bootstrap_is_wider_than_pretending_values_are_independent() {
        // 50 requests, each with 40 gaps that share the request's speed.
        let mut rng = Rng::new(3);
        let mk = |rng: &mut Rng| -> Vec<Vec<f64>> {
            (0..50)
                .map(|_| {
                    let speed = rng.lognormal(1.0, 0.3);
                    (0..40).map(|_| speed * rng.lognormal(1.0, 0.05)).collect()
                })
                .collect()
        };
        let (b, c) = (mk(&mut rng), mk(&mut rng));
        let flat = |g: &Vec<Vec<f64>>| Sample::independent(g.iter().flatten().copied());
        let st = [Stat::Quantile(0.5)];
        let clustered = relative_change(
            &Sample::new(b.clone()),
            &Sample::new(c.clone()),
            &st,
            cfg(1),
        )[0]
        .unwrap();
        let naive = relative_change(&flat(&b), &flat(&c), &st, cfg(1))[0].unwrap();
        assert!(
            clustered.high - clustered.low > 2.0 * (naive.high - naive.low),
            "clustered {clustered:?} naive {naive:?}"
        );
    }

    #[test]
    fn normal_quantile_and_proportion_intervals() {
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!((normal_quantile(0.005) + 2.575_829).abs() < 1e-5);
        let (lo, hi) = wilson(0, 200, 0.95).unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.0188).abs() < 5e-4, "{hi}");
        // Newcombe's worked example: 56/70 vs 48/80 → difference 0.2, CI (0.0524, 0.3339).
        let d = proportion_difference(48, 80, 56, 70, 0.95).unwrap();
        assert!((d.point - 0.2).abs() < 1e-12);
        assert!((d.low - 0.0524).abs() < 5e-4, "{d:?}");
        assert!((d.high - 0.3339).abs() < 5e-4, "{d:?}");
        assert!(proportion_difference(0, 0, 1, 10, 0.95).is_none());
    }

    #[test]
    fn hierarchical_bootstrap_sees_between_run_noise_and_pairing_cancels_it() {
        // Three runs per side; each run shifted as a whole by −6 %, 0 or +6 % (a busy
        // machine moves every request of a run together). Requests within a run vary ±2 %.
        let mut rng = Rng::new(5);
        let mut side = |shifts: [f64; 3]| -> Vec<Vec<Vec<f64>>> {
            shifts
                .iter()
                .map(|s| {
                    (0..150)
                        .map(|_| vec![100.0 * (1.0 + s) * rng.lognormal(1.0, 0.02)])
                        .collect()
                })
                .collect()
        };
        let b = side([-0.06, 0.0, 0.06]);
        let c = side([0.06, -0.06, 0.0]);
        let flat = |runs: &Vec<Vec<Vec<f64>>>| Sample::new(runs.iter().flatten().cloned());
        let st = [Stat::Quantile(0.5)];
        let pooled = relative_change(&flat(&b), &flat(&c), &st, cfg(2))[0].unwrap();
        let (hb, hc) = (Sample::with_runs(b.clone()), Sample::with_runs(c.clone()));
        assert_eq!((hb.runs(), hb.shape()), (3, vec![150, 150, 150]));
        let hier = relative_change(&hb, &hc, &st, cfg(2))[0].unwrap();
        assert!(
            hier.high - hier.low > 2.0 * (pooled.high - pooled.low),
            "hierarchical {hier:?} pooled {pooled:?}"
        );
        // Paired runs, each pair shifted together (interleaved on the same machine): the
        // common shift cancels and the interval is back to the within-run width.
        let shifts = [-0.06, 0.0, 0.06];
        let mut rng = Rng::new(6);
        let mut paired_side = |k: f64| -> Vec<Vec<Vec<f64>>> {
            shifts
                .iter()
                .map(|s| {
                    (0..150)
                        .map(|_| vec![100.0 * k * (1.0 + s) * rng.lognormal(1.0, 0.02)])
                        .collect()
                })
                .collect()
        };
        let (pb, pc) = (
            Sample::with_runs(paired_side(1.0)),
            Sample::with_runs(paired_side(1.10)),
        );
        let unpaired = relative_change(&pb, &pc, &st, cfg(3))[0].unwrap();
        let paired = relative_change_paired(&pb, &pc, &st, cfg(3), Pairing::Runs)[0].unwrap();
        assert!(paired.low > 0.07 && paired.high < 0.13, "{paired:?}");
        assert!(
            paired.high - paired.low < 0.5 * (unpaired.high - unpaired.low),
            "paired {paired:?} unpaired {unpaired:?}"
        );
        assert_eq!(
            Pairing::allowed(Pairing::Runs, &pb, &flat(&b)),
            Pairing::None
        );
    }

    #[test]
    fn request_pairing_removes_the_drawn_lengths() {
        // E2E grows with the drawn output length (20–400 tokens); the candidate is 5 % slower
        // on the very same requests. Unpaired, the lengths' spread swamps it; paired, the
        // ratio is exact.
        let mut rng = Rng::new(8);
        let lens: Vec<f64> = (0..200).map(|_| 20.0 + rng.below(380) as f64).collect();
        let b = Sample::new(lens.iter().map(|l| vec![10.0 + 4.0 * l]));
        let c = Sample::new(lens.iter().map(|l| vec![1.05 * (10.0 + 4.0 * l)]));
        let st = [Stat::Mean];
        let unpaired = relative_change(&b, &c, &st, cfg(4))[0].unwrap();
        let paired = relative_change_paired(&b, &c, &st, cfg(4), Pairing::Requests)[0].unwrap();
        assert!(unpaired.low < 0.0, "{unpaired:?}");
        assert!(
            (paired.low - 0.05).abs() < 1e-9 && (paired.high - 0.05).abs() < 1e-9,
            "{paired:?}"
        );
    }
}
