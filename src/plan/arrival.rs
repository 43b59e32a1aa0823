//! Intended start times: the pure arithmetic of the arrival processes.
//!
//! Owns: the [`Arrival`] shapes (constant, Poisson, gamma), their seeded gap generators,
//! closed-loop offsets (all zero: a session starts when a slot frees), and the open-loop
//! session offsets a request rate implies ([`session_offsets`]). The driver measures every
//! request from these intended times, so a late dispatch shows up as dispatch lag and in
//! TTFT instead of being hidden (coordinated omission).
//! Depends only on the seeded `crate::rng::Rng`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// The shape of an open-loop arrival process: how the gaps between intended starts are
/// drawn around their mean (`1 / rate`, or `session_interval`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Arrival {
    /// Exponential gaps: independent arrivals (coefficient of variation 1).
    #[default]
    Poisson,
    /// Every gap equals the mean: a metronome (coefficient of variation 0).
    Constant,
    /// Gamma-distributed gaps with shape `shape` (vLLM's `--burstiness`) and the same mean:
    /// `shape = 1` is Poisson, `shape < 1` burstier (clumps and long pauses), `shape > 1`
    /// more regular. Coefficient of variation `1 / sqrt(shape)`.
    Gamma {
        /// The gamma shape k (> 0).
        shape: f64,
    },
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Poisson => f.write_str("poisson"),
            Arrival::Constant => f.write_str("constant"),
            Arrival::Gamma { shape } => write!(f, "gamma (burstiness {shape})"),
        }
    }
}

/// A seeded stream of gaps (nanoseconds) with the given mean and shape.
#[derive(Debug, Clone)]
pub struct Gaps {
    rng: Rng,
    arrival: Arrival,
    mean_ns: f64,
}

impl Gaps {
    /// Gaps of `arrival` with mean `mean_gap`, drawn from `seed`.
    pub fn new(seed: u64, arrival: Arrival, mean_gap: Duration) -> Self {
        Gaps {
            rng: Rng::new(seed),
            arrival,
            mean_ns: mean_gap.as_nanos() as f64,
        }
    }

    /// The next gap, nanoseconds.
    pub fn next_ns(&mut self) -> f64 {
        match self.arrival {
            Arrival::Poisson => self.rng.exp(self.mean_ns),
            Arrival::Constant => self.mean_ns,
            Arrival::Gamma { shape } => {
                let k = if shape.is_finite() && shape > 0.0 {
                    shape
                } else {
                    1.0
                };
                gamma(&mut self.rng, k) * self.mean_ns / k
            }
        }
    }
}

/// A gamma(shape `k`, scale 1) sample (mean `k`), by Marsaglia and Tsang's method ("A simple
/// method for generating gamma variables", 2000); for `k < 1` a gamma(k + 1) sample is
/// scaled by `U^(1/k)`.
pub fn gamma(rng: &mut Rng, k: f64) -> f64 {
    if k < 1.0 {
        let u = rng.f64().max(f64::MIN_POSITIVE);
        return gamma(rng, k + 1.0) * u.powf(1.0 / k);
    }
    let d = k - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let (x, v) = loop {
            let x = rng.normal();
            let v = 1.0 + c * x;
            if v > 0.0 {
                break (x, v * v * v);
            }
        };
        let u = rng.f64();
        if u < 1.0 - 0.0331 * x * x * x * x {
            return d * v;
        }
        if u > 0.0 && u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

/// Closed loop: every session is "intended" to start as soon as it can.
pub fn closed_loop(count: u32) -> Vec<Duration> {
    vec![Duration::ZERO; count as usize]
}

/// Open loop: `count` start offsets of a Poisson process with mean gap `mean_gap`. The first
/// session starts at 0; each gap is exponential. The same seed always gives the same
/// schedule. Unlike some peers, the schedule is not rescaled to hit the mean exactly: a
/// Poisson process's realised rate varies, and rescaling would change its shape.
pub fn poisson(seed: u64, count: u32, mean_gap: Duration) -> Vec<Duration> {
    instants(seed, Arrival::Poisson, count, mean_gap)
}

/// `count` start offsets of `arrival` with mean gap `mean_gap`: the first at 0, then one
/// gap each (see [`poisson`]).
pub fn instants(seed: u64, arrival: Arrival, count: u32, mean_gap: Duration) -> Vec<Duration> {
    let mut gaps = Gaps::new(seed, arrival, mean_gap);
    let mut at_ns = 0f64;
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        if i > 0 {
            at_ns += gaps.next_ns();
        }
        out.push(Duration::from_nanos(at_ns.round() as u64));
    }
    out
}

/// The instants of an arrival process, handed out in runs: [`Instants::claim`] returns the
/// next instant and moves past `n` of them.
#[derive(Debug, Clone)]
pub struct Instants {
    gaps: Gaps,
    at_ns: f64,
}

impl Instants {
    /// The process of `arrival` with mean gap `mean_gap`, drawn from `seed`; the first
    /// instant is 0.
    pub fn new(seed: u64, arrival: Arrival, mean_gap: Duration) -> Self {
        Instants {
            gaps: Gaps::new(seed, arrival, mean_gap),
            at_ns: 0.0,
        }
    }

    /// The next unclaimed instant.
    pub fn peek(&self) -> Duration {
        Duration::from_nanos(self.at_ns.round() as u64)
    }

    /// Claims the next `n` instants (at least one) and returns the first of them.
    pub fn claim(&mut self, n: u32) -> Duration {
        let at = self.peek();
        for _ in 0..n.max(1) {
            self.at_ns += self.gaps.next_ns();
        }
        at
    }
}

/// Open-loop session starts. The arrival process yields intended instants with mean gap
/// `mean_gap`; session k claims `claims(k)` consecutive instants and starts at the first of
/// them. Under a request rate a session claims as many instants as it plans requests, so
/// the offered request rate is the process's rate whatever the session length (for
/// single-request sessions every instant starts one session); under `session_interval`
/// every session claims one. Sessions are drawn until `max_sessions` or until the next
/// start would be at or after `until` (when given). Returns the offsets in order.
pub fn session_offsets(
    seed: u64,
    arrival: Arrival,
    mean_gap: Duration,
    mut claims: impl FnMut(usize) -> u32,
    max_sessions: usize,
    until: Option<Duration>,
) -> Vec<Duration> {
    let mut at = Instants::new(seed, arrival, mean_gap);
    let mut out = Vec::new();
    while out.len() < max_sessions && until.is_none_or(|u| at.peek() < u) {
        let k = out.len();
        out.push(at.claim(claims(k)));
    }
    out
}

/// The mean gap of a request rate (requests per second), at least 1 ns.
pub fn gap_of_rate(rate: f64) -> Duration {
    Duration::from_nanos((1e9 / rate).round().max(1.0) as u64)
}

#[cfg(test)]
mod tests;
