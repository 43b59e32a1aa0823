//! `--sweep`: which load parameter a sweep varies and over which values, and the plan of one
//! load point.
//!
//! Owns: the `--sweep` syntax (`concurrency=1,2,4,8`, `rate=2,4,8`, `concurrency=auto`,
//! `rate=auto`), how many sessions a point runs, and how a point sets its load: on the
//! command line's load knobs, in memory ([`PointLoad::apply`]). Pure.
//! Does not own: the order of the points (`runner::sweep`).

use std::fmt;

use super::Load;
use crate::scenario::LoadKnobs;
use crate::vocab::ArrivalKind;

/// The load of one sweep point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointLoad {
    /// Closed loop at this concurrency.
    Concurrency(u32),
    /// Open loop at this many requests per second.
    Rate(f64),
}

impl PointLoad {
    /// Sets this point's load on `cli`, the command line's load knobs (a point's load
    /// overrides the scenario as a flag would): `file` is the scenario's `[load]`, `base`
    /// the load of the sweep's base plan (its session count and duration).
    ///
    /// A concurrency point runs [`sessions_for_concurrency`] sessions. A rate point clears
    /// `--concurrency`, runs constant arrivals unless the command line or the scenario chose
    /// a shape, and [`sessions_for_rate`] sessions unless the plan has a `duration`.
    pub fn apply(self, cli: &mut LoadKnobs, file: &LoadKnobs, base: &Load) {
        match self {
            PointLoad::Concurrency(c) => {
                cli.concurrency = Some(c);
                cli.sessions = Some(sessions_for_concurrency(base.sessions, c));
            }
            PointLoad::Rate(r) => {
                cli.rate = Some(r);
                cli.concurrency = None;
                cli.arrival = cli.arrival.or(file.arrival).or(Some(ArrivalKind::Constant));
                if base.duration.is_none() {
                    cli.sessions = Some(sessions_for_rate(base.sessions, r));
                }
            }
        }
    }
}

/// The load parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepParam {
    /// Sessions in flight per cell (closed loop).
    Concurrency,
    /// Requests per second (open loop).
    Rate,
}

impl SweepParam {
    /// `concurrency` or `rate`.
    pub fn name(self) -> &'static str {
        match self {
            SweepParam::Concurrency => "concurrency",
            SweepParam::Rate => "rate",
        }
    }
}

/// A parsed `--sweep` argument.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSpec {
    /// The parameter.
    pub param: SweepParam,
    /// The listed values, increasing; empty for `auto`.
    pub values: Vec<f64>,
    /// The text as given.
    pub text: String,
}

impl SweepSpec {
    /// True for `…=auto`.
    pub fn is_auto(&self) -> bool {
        self.values.is_empty()
    }

    /// [`SweepSpec::parse`], boxed (for the command line's argument struct).
    pub fn parse_boxed(text: &str) -> Result<Box<SweepSpec>, String> {
        SweepSpec::parse(text).map(Box::new)
    }

    /// Parses `concurrency=1,2,4`, `rate=0.5,1,2` or `…=auto`; the error shows the forms.
    pub fn parse(text: &str) -> Result<SweepSpec, String> {
        const FORMS: &str = "write --sweep concurrency=1,2,4,8,16 (sessions in flight), --sweep rate=2,4,8 (requests/s), or --sweep concurrency=auto / rate=auto (find the saturation point)";
        let (k, v) = text
            .split_once('=')
            .ok_or_else(|| format!("--sweep {text:?} has no `=`; {FORMS}"))?;
        let param = match k.trim() {
            "concurrency" => SweepParam::Concurrency,
            "rate" => SweepParam::Rate,
            other => {
                return Err(format!(
                    "--sweep varies `concurrency` or `rate`, not {other:?}; {FORMS}"
                ))
            }
        };
        let v = v.trim();
        let mut values = Vec::new();
        if v != "auto" {
            for part in v.split(',') {
                let x: f64 = part.trim().parse().map_err(|_| {
                    format!(
                        "--sweep {text:?}: {:?} is not a number; {FORMS}",
                        part.trim()
                    )
                })?;
                let ok = match param {
                    SweepParam::Concurrency => (1.0..=10_000.0).contains(&x) && x.fract() == 0.0,
                    SweepParam::Rate => x.is_finite() && x > 0.0 && x <= 100_000.0,
                };
                if !ok {
                    return Err(format!(
                        "--sweep {text:?}: {x} is out of range; concurrency takes whole numbers 1 to 10000, rate takes requests/s above 0 up to 100000"
                    ));
                }
                values.push(x);
            }
            values.sort_by(f64::total_cmp);
            values.dedup();
            if values.len() < 2 {
                return Err(format!(
                    "--sweep {text:?} has one value; a sweep needs at least two (or `auto`)"
                ));
            }
        }
        Ok(SweepSpec {
            param,
            values,
            text: text.trim().to_string(),
        })
    }
}

impl fmt::Display for SweepSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Sessions a concurrency point runs: the plan's, raised to 4 × the concurrency so the
/// closed loop spends most of the point at full concurrency.
pub fn sessions_for_concurrency(plan_sessions: u32, concurrency: u32) -> u32 {
    plan_sessions
        .max(concurrency.saturating_mul(4))
        .min(100_000)
}

/// Sessions a rate point runs: the plan's, raised to ⌈rate⌉ (and at least 8): one second of
/// arrivals for single-turn sessions (a session of R requests claims R arrival instants, so
/// R seconds for those). A scenario with a `duration` keeps its own count.
pub fn sessions_for_rate(plan_sessions: u32, rate: f64) -> u32 {
    plan_sessions.max(rate.ceil().max(8.0) as u32).min(100_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_auto() {
        let s = SweepSpec::parse("concurrency=4, 1,2,2").unwrap();
        assert_eq!(s.param, SweepParam::Concurrency);
        assert_eq!(s.values, vec![1.0, 2.0, 4.0]);
        let s = SweepSpec::parse("rate=auto").unwrap();
        assert!(s.is_auto() && s.param == SweepParam::Rate);
        assert_eq!(
            SweepSpec::parse("rate=0.5,2").unwrap().values,
            vec![0.5, 2.0]
        );
        for bad in [
            "concurrency",
            "users=1,2",
            "concurrency=1.5,2",
            "rate=0,1",
            "rate=2",
            "concurrency=a,b",
        ] {
            let e = SweepSpec::parse(bad).unwrap_err();
            assert!(e.contains("--sweep"), "{bad}: {e}");
        }
    }
}
