//! Intended session start times: the pure arithmetic of the arrival process.
//!
//! Owns: closed-loop offsets (all zero: a session starts when a slot frees) and open-loop
//! Poisson offsets (exponential gaps with a given mean, seeded). The driver measures every
//! request from these intended times, so a late dispatch shows up as dispatch lag and in
//! TTFT instead of being hidden (coordinated omission).
//! Depends only on the seeded `crate::rng::Rng`.

use std::time::Duration;

use crate::rng::Rng;

/// Closed loop: every session is "intended" to start as soon as it can.
pub fn closed_loop(count: u32) -> Vec<Duration> {
    vec![Duration::ZERO; count as usize]
}

/// Open loop: `count` start offsets of a Poisson process with mean gap `mean_gap`. The first
/// session starts at 0; each gap is exponential. The same seed always gives the same
/// schedule. Unlike some peers, the schedule is not rescaled to hit the mean exactly: a
/// Poisson process's realised rate varies, and rescaling would change its shape.
pub fn poisson(seed: u64, count: u32, mean_gap: Duration) -> Vec<Duration> {
    let mut rng = Rng::new(seed);
    let mean_ns = mean_gap.as_nanos() as f64;
    let mut at_ns = 0f64;
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        if i > 0 {
            at_ns += rng.exp(mean_ns);
        }
        out.push(Duration::from_nanos(at_ns.round() as u64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn mean_gap_and_spread_match_an_exponential() {
        let n = 20_000u32;
        let mean = Duration::from_millis(500);
        let s = poisson(7, n, mean);
        let gaps: Vec<f64> = s.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        // Standard error of the mean is 0.5/√20000 ≈ 0.0035 s; 3 % is > 4 σ.
        assert!((m - 0.5).abs() < 0.015, "mean gap {m}");
        // Exponential: standard deviation equals the mean.
        let sd = (gaps.iter().map(|g| (g - m) * (g - m)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd - 0.5).abs() < 0.03, "sd {sd}");
        // P(gap < mean) = 1 − 1/e ≈ 0.632.
        let below = gaps.iter().filter(|g| **g < 0.5).count() as f64 / gaps.len() as f64;
        assert!((below - 0.632).abs() < 0.02, "{below}");
    }

    #[test]
    fn closed_loop_is_all_zero() {
        assert_eq!(closed_loop(3), vec![Duration::ZERO; 3]);
        assert!(poisson(1, 0, Duration::from_secs(1)).is_empty());
    }
}
