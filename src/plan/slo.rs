//! Service-level objectives (`[slo]`): the latency a request must meet to count as good, and
//! the percentiles a load point must meet to pass. Goodput is computed from them (see
//! `recorder`).
//!
//! Owns: the SLO syntax and its parsing, and whether one request meets the per-request SLOs.
//! Pure: no I/O, no clock.
//!
//! Syntax of each key (`ttft`, `tpot`, `e2e`):
//! * `"500ms"`: per request. A request is *good* when it succeeded and every per-request SLO
//!   given holds for it (`ttft <= 500ms`). A request without the metric (TPOT needs at least
//!   two output tokens) is not held to that SLO.
//! * `"p90<=500ms"` (also `p50`, `p99`, `p99.9`, …): per load point. The point *passes* when
//!   that percentile of the metric over its successful measured requests is at most the
//!   limit. It does not decide which requests are good.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::vocab::RequestRecord;

/// One SLO: a limit, per request or on a percentile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloBound {
    /// The limit.
    #[serde(with = "crate::units::serde_duration")]
    pub limit: Duration,
    /// `Some(90.0)` for `p90<=…` (a load-point SLO); `None` for a per-request SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
}

impl SloBound {
    /// Parses `"500ms"` or `"p90<=500ms"`; the error says what was expected.
    pub fn parse(text: &str) -> Result<SloBound, String> {
        let t = text.trim();
        let (percentile, limit) = match t.split_once("<=") {
            Some((p, l)) => {
                let p = p.trim();
                let n = p
                    .strip_prefix('p')
                    .or_else(|| p.strip_prefix('P'))
                    .and_then(|n| n.parse::<f64>().ok())
                    .filter(|n| n.is_finite() && *n > 0.0 && *n < 100.0)
                    .ok_or_else(|| {
                        format!("{p:?} is not a percentile; write p50, p90, p99 or p99.9")
                    })?;
                (Some(n), l.trim())
            }
            None => (None, t),
        };
        let limit = humantime::parse_duration(limit)
            .map_err(|e| format!("{limit:?} is not a duration ({e})"))?;
        if limit.is_zero() || limit > Duration::from_secs(3600) {
            return Err("the limit must be above 0 and at most 1h".to_string());
        }
        Ok(SloBound { limit, percentile })
    }

    /// Whether a value (ns) meets the limit.
    pub fn met_by_ns(&self, ns: f64) -> bool {
        ns <= self.limit.as_nanos() as f64
    }
}

impl fmt::Display for SloBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = crate::units::fmt_duration_spec(self.limit);
        match self.percentile {
            Some(p) => write!(f, "p{p}<={l}"),
            None => write!(f, "<={l}"),
        }
    }
}

/// The scenario's `[slo]`, resolved. Empty when the scenario has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Time to first token, from the intended start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<SloBound>,
    /// Time per output token after the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<SloBound>,
    /// Intended start to the last content token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e: Option<SloBound>,
}

/// The SLO keys, with the metric each applies to (the names of `recorder::Metric`).
pub const SLO_KEYS: [&str; 3] = ["ttft", "tpot", "e2e"];

impl Slo {
    /// True when no SLO is set.
    pub fn is_empty(&self) -> bool {
        self.bounds().next().is_none()
    }

    /// `(metric name, bound)` of each SLO set, in `ttft`, `tpot`, `e2e` order.
    pub fn bounds(&self) -> impl Iterator<Item = (&'static str, SloBound)> {
        SLO_KEYS
            .into_iter()
            .zip([self.ttft, self.tpot, self.e2e])
            .filter_map(|(k, b)| b.map(|b| (k, b)))
    }

    /// Whether a request is good: it succeeded, and each per-request SLO holds for it (a
    /// request that lacks the metric is not held to it). Percentile SLOs play no part.
    pub fn request_is_good(&self, r: &RequestRecord) -> bool {
        r.is_ok()
            && self
                .bounds()
                .filter(|(_, b)| b.percentile.is_none())
                .all(|(k, b)| {
                    let v = match k {
                        "ttft" => r.ttft_ns().map(|v| v as f64),
                        "tpot" => r.tpot_ns(),
                        _ => r.e2e_ns().map(|v| v as f64),
                    };
                    v.is_none_or(|v| b.met_by_ns(v))
                })
    }

    /// `ttft<=500ms, tpot p90<=20ms`, or `none`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self.bounds().map(|(k, b)| format!("{k} {b}")).collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// Resolves a scenario's `[slo]` table; `at(key)` gives `file:line:col` for messages.
    pub fn resolve(
        spec: &crate::scenario::SloSpec,
        at: impl Fn(&str) -> String,
    ) -> Result<Slo, super::PlanError> {
        let one = |key: &str, v: &Option<String>| -> Result<Option<SloBound>, super::PlanError> {
            v.as_deref()
                .map(|text| {
                    SloBound::parse(text).map_err(|why| {
                        super::PlanError::new(format!(
                            "[slo] {key} at {}: {why}. Write a per-request limit such as {key} = \"500ms\", or a percentile the load point must meet such as {key} = \"p90<=500ms\"",
                            at(key)
                        ))
                    })
                })
                .transpose()
        };
        Ok(Slo {
            ttft: one("ttft", &spec.ttft)?,
            tpot: one("tpot", &spec.tpot)?,
            e2e: one("e2e", &spec.e2e)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::OutcomeKind;

    #[test]
    fn parses_both_forms_and_rejects_the_rest() {
        let b = SloBound::parse("500ms").unwrap();
        assert_eq!((b.limit, b.percentile), (Duration::from_millis(500), None));
        let b = SloBound::parse(" p99.9 <= 1.5s ").unwrap();
        assert_eq!(b.percentile, Some(99.9));
        assert_eq!(b.limit, Duration::from_millis(1500));
        for bad in ["", "fast", "p100<=1s", "q90<=1s", "p90<=", "0ms", "p90<=2h"] {
            assert!(SloBound::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_good_request_succeeded_and_met_every_per_request_slo() {
        let ms = 1_000_000;
        let r = RequestRecord {
            intended_ns: 0,
            first_token_ns: Some(300 * ms),
            last_token_ns: Some(1300 * ms),
            output_tokens: 101, // TPOT 10 ms
            ..Default::default()
        };
        let slo = |t: &str, p: &str, e: &str| Slo {
            ttft: SloBound::parse(t).ok(),
            tpot: SloBound::parse(p).ok(),
            e2e: SloBound::parse(e).ok(),
        };
        assert!(slo("300ms", "10ms", "1300ms").request_is_good(&r));
        assert!(!slo("299ms", "", "").request_is_good(&r));
        assert!(!slo("", "9ms", "").request_is_good(&r));
        assert!(!slo("", "", "1299ms").request_is_good(&r));
        // Percentile SLOs do not judge single requests.
        assert!(slo("p90<=1ms", "", "").request_is_good(&r));
        let failed = RequestRecord {
            outcome: OutcomeKind::Timeout,
            ..r.clone()
        };
        assert!(!Slo::default().request_is_good(&failed));
        assert_eq!(
            slo("300ms", "p90<=10ms", "").describe(),
            "ttft <=300ms, tpot p90<=10ms"
        );
    }
}
