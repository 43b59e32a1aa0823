//! Arrival statistics: seeds, means and shapes of the gap generators.

use super::*;

fn gaps_s(arrival: Arrival, n: u32, mean: Duration, seed: u64) -> Vec<f64> {
    let s = instants(seed, arrival, n, mean);
    s.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect()
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|g| (g - m) * (g - m)).sum::<f64>() / v.len() as f64;
    (m, var.sqrt())
}

#[test]
fn same_seed_same_schedule_different_seed_different() {
    let a = poisson(42, 50, Duration::from_secs(2));
    assert_eq!(a, poisson(42, 50, Duration::from_secs(2)));
    assert_ne!(a, poisson(43, 50, Duration::from_secs(2)));
    assert_eq!(a[0], Duration::ZERO);
    assert!(
        a.windows(2).all(|w| w[0] <= w[1]),
        "offsets are non-decreasing"
    );
    let g = Arrival::Gamma { shape: 0.5 };
    let b = instants(42, g, 50, Duration::from_secs(2));
    assert_eq!(b, instants(42, g, 50, Duration::from_secs(2)));
    assert_ne!(b, instants(43, g, 50, Duration::from_secs(2)));
}

#[test]
fn mean_gap_and_spread_match_an_exponential() {
    let n = 20_000u32;
    let gaps = gaps_s(Arrival::Poisson, n, Duration::from_millis(500), 7);
    let (m, sd) = mean_sd(&gaps);
    // Standard error of the mean is 0.5/√20000 ≈ 0.0035 s; 3 % is > 4 σ.
    assert!((m - 0.5).abs() < 0.015, "mean gap {m}");
    // Exponential: standard deviation equals the mean.
    assert!((sd - 0.5).abs() < 0.03, "sd {sd}");
    // P(gap < mean) = 1 − 1/e ≈ 0.632.
    let below = gaps.iter().filter(|g| **g < 0.5).count() as f64 / gaps.len() as f64;
    assert!((below - 0.632).abs() < 0.02, "{below}");
}

#[test]
fn constant_gaps_are_exactly_the_mean() {
    let s = instants(9, Arrival::Constant, 1001, Duration::from_millis(5));
    assert_eq!(s[0], Duration::ZERO);
    for (i, at) in s.iter().enumerate() {
        assert_eq!(*at, Duration::from_millis(5 * i as u64));
    }
}

#[test]
fn gamma_has_the_mean_and_the_coefficient_of_variation_of_its_shape() {
    // CV = 1/√k; mean = the requested gap for every shape.
    for (k, seed) in [(0.25, 1u64), (0.5, 2), (1.0, 3), (2.0, 4), (9.0, 5)] {
        let gaps = gaps_s(
            Arrival::Gamma { shape: k },
            40_001,
            Duration::from_millis(100),
            seed,
        );
        let (m, sd) = mean_sd(&gaps);
        let cv = sd / m;
        let want_cv = 1.0 / f64::sqrt(k);
        // Standard error of the mean: 0.1 · CV / √40000 ≤ 0.001 s (k = 0.25); 3 % is > 3 σ.
        assert!((m - 0.1).abs() < 0.003, "k {k}: mean gap {m}");
        assert!(
            (cv - want_cv).abs() < 0.06 * want_cv,
            "k {k}: cv {cv}, want {want_cv}"
        );
        assert!(gaps.iter().all(|g| *g >= 0.0));
    }
}

#[test]
fn gamma_of_shape_one_is_exponential_in_shape() {
    let gaps = gaps_s(
        Arrival::Gamma { shape: 1.0 },
        20_001,
        Duration::from_millis(500),
        11,
    );
    let below = gaps.iter().filter(|g| **g < 0.5).count() as f64 / gaps.len() as f64;
    assert!((below - 0.632).abs() < 0.02, "{below}");
}

#[test]
fn gamma_sampler_mean_is_its_shape() {
    let mut rng = Rng::new(3);
    for k in [0.1, 0.7, 1.0, 3.5, 40.0] {
        let n = 50_000;
        let m = (0..n).map(|_| gamma(&mut rng, k)).sum::<f64>() / n as f64;
        // sd of the mean = √k/√n.
        assert!(
            (m - k).abs() < 5.0 * (k / n as f64).sqrt(),
            "k {k}: mean {m}"
        );
    }
}

#[test]
fn session_offsets_claim_one_instant_per_planned_request() {
    // Constant 100/s: a session of 3 requests claims 3 instants (30 ms), a session of 1
    // claims one (10 ms).
    let gap = Duration::from_millis(10);
    let reqs = [3u32, 1, 2, 1];
    let s = session_offsets(1, Arrival::Constant, gap, |k| reqs[k % 4], 4, None);
    let ms: Vec<u64> = s.iter().map(|d| d.as_millis() as u64).collect();
    assert_eq!(ms, vec![0, 30, 40, 60]);
    // Until a time: every start is before it.
    let s = session_offsets(
        1,
        Arrival::Constant,
        gap,
        |_| 1,
        1000,
        Some(Duration::from_secs(1)),
    );
    assert_eq!(s.len(), 100);
    assert_eq!(*s.last().unwrap(), Duration::from_millis(990));
    // Poisson, one claim each: the same schedule as `poisson`.
    let p = session_offsets(5, Arrival::Poisson, gap, |_| 1, 50, None);
    assert_eq!(p, poisson(5, 50, gap));
}

#[test]
fn closed_loop_is_all_zero() {
    assert_eq!(closed_loop(3), vec![Duration::ZERO; 3]);
    assert!(poisson(1, 0, Duration::from_secs(1)).is_empty());
}
