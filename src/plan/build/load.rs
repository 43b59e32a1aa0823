//! The load shape's keys: `rate`, `arrival`/`burstiness`, `duration`, `warmup` (by time),
//! `max_in_flight`, their precedence against `concurrency` and `session_interval`, and the
//! open-loop session list they imply.
//!
//! Pure, like the rest of `build`: scenario + overrides in, a [`Load`] and sessions out,
//! with messages that name the key or flag and the fix.

use std::time::Duration;

use super::{Overrides, PlanError, Src};
use crate::plan::arrival::{self, Arrival, Instants};
use crate::plan::{Load, SessionPlan, TurnPlan};
use crate::scenario::Scenario;
use crate::vocab::ArrivalKind;

/// Highest accepted `rate`, requests per second.
pub const MAX_RATE: f64 = 100_000.0;
/// Most sessions a `duration` may generate per cell (open loop).
pub const MAX_GENERATED_SESSIONS: usize = 200_000;

/// Resolves the new load keys into `load` (already holding sessions, concurrency, warm-up
/// sessions and session interval), with the warnings a reader needs.
pub(super) fn resolve_shape(
    s: &Scenario,
    o: &Overrides,
    src: &Src,
    load: &mut Load,
    warnings: &mut Vec<String>,
) -> Result<(), PlanError> {
    let key_at = |key: &str| format!("[load] {key} at {}", src.at(Some("[load]"), 1, key));
    let from = |flag: bool, key: &str| {
        if flag {
            format!("--{}", key.replace('_', "-"))
        } else {
            key_at(key)
        }
    };
    let l = &s.load;

    // Rate against concurrency: the command line wins over the scenario; both from the same
    // place is a contradiction.
    let mut rate = o.rate.or(l.rate);
    match (o.rate, o.concurrency, l.rate, l.concurrency) {
        (Some(_), Some(_), _, _) => {
            return Err(PlanError::new(
                "--rate and --concurrency are two load shapes (open loop at a request rate, closed loop with N sessions in flight); give one, and cap an open loop with --max-in-flight",
            ))
        }
        (None, None, Some(_), Some(_)) => {
            return Err(PlanError::new(format!(
                "{} and {} are two load shapes (open loop at a request rate, closed loop with N sessions in flight); keep one, and cap an open loop with max_in_flight",
                key_at("rate"),
                key_at("concurrency")
            )))
        }
        (Some(_), None, _, Some(c)) => warnings.push(format!(
            "--rate runs an open loop, so the scenario's concurrency = {c} is not used; cap requests in flight with max_in_flight"
        )),
        (None, Some(_), Some(r), _) => {
            warnings.push(format!(
                "--concurrency runs a closed loop, so the scenario's rate = {r} is not used"
            ));
            rate = None;
        }
        _ => {}
    }
    if let Some(r) = rate {
        if !r.is_finite() || r <= 0.0 || r > MAX_RATE {
            return Err(PlanError::new(format!(
                "{} is {r}; use a request rate above 0 and at most {MAX_RATE} requests/s, e.g. 20",
                from(o.rate.is_some(), "rate")
            )));
        }
        if load.session_interval.is_some() {
            return Err(PlanError::new(format!(
                "{} and {} both set an open loop (requests per second vs a mean gap between session starts); keep one",
                from(o.rate.is_some(), "rate"),
                key_at("session_interval")
            )));
        }
    }

    let kind = o.arrival.or(l.arrival);
    let burstiness = o.burstiness.or(l.burstiness);
    let open = rate.is_some() || load.session_interval.is_some();
    let arrival = match (kind, burstiness) {
        (Some(ArrivalKind::Gamma), None) => {
            return Err(PlanError::new(format!(
                "{} is \"gamma\" but no burstiness is given; add burstiness, the gamma shape k (1 is Poisson, below 1 burstier), e.g. burstiness = 0.5 or --burstiness 0.5",
                from(o.arrival.is_some(), "arrival")
            )))
        }
        (Some(ArrivalKind::Gamma), Some(k)) => {
            if !k.is_finite() || !(0.01..=100.0).contains(&k) {
                return Err(PlanError::new(format!(
                    "{} is {k}; use a gamma shape from 0.01 to 100 (1 is Poisson, below 1 burstier), e.g. 0.5",
                    from(o.burstiness.is_some(), "burstiness")
                )));
            }
            Arrival::Gamma { shape: k }
        }
        (other, Some(_)) => {
            return Err(PlanError::new(format!(
                "{} is the shape of gamma arrivals, but arrival is {}; add arrival = \"gamma\" (--arrival gamma) or remove burstiness",
                from(o.burstiness.is_some(), "burstiness"),
                other.unwrap_or_default()
            )))
        }
        (Some(ArrivalKind::Constant), None) => Arrival::Constant,
        (Some(ArrivalKind::Poisson) | None, None) => Arrival::Poisson,
    };
    if kind.is_some() && !open && o.concurrency.is_none() {
        return Err(PlanError::new(format!(
            "{} shapes open-loop arrivals, but this load is a closed loop; add a rate (e.g. rate = 20 or --rate 20) or remove arrival",
            from(o.arrival.is_some(), "arrival")
        )));
    }

    let duration = o.duration.or(l.duration.map(|d| d.0));
    if let Some(d) = duration {
        if d < Duration::from_millis(1) || d > Duration::from_secs(24 * 3600) {
            return Err(PlanError::new(format!(
                "{} is {}; use 1ms to 24h, e.g. \"60s\"",
                from(o.duration.is_some(), "duration"),
                humantime::format_duration(d)
            )));
        }
    }
    let warmup = o.warmup_duration.or(l.warmup.map(|d| d.0));
    if let Some(w) = warmup {
        if w > Duration::from_secs(3600) {
            return Err(PlanError::new(format!(
                "{} is {}; keep a warm-up at most 1h, e.g. \"10s\"",
                from(o.warmup_duration.is_some(), "warmup"),
                humantime::format_duration(w)
            )));
        }
    }
    let max_in_flight = o.max_in_flight.or(l.max_in_flight);
    if let Some(m) = max_in_flight {
        if !(1..=100_000).contains(&m) {
            return Err(PlanError::new(format!(
                "{} is {m}; use 1 to 100000 requests in flight, e.g. 64",
                from(o.max_in_flight.is_some(), "max_in_flight")
            )));
        }
    }
    load.rate = rate;
    load.arrival = arrival;
    load.duration = duration;
    load.warmup_duration = warmup.filter(|w| !w.is_zero());
    load.max_in_flight = max_in_flight;
    load.sessions_from_duration =
        duration.is_some() && o.sessions.is_none() && l.sessions.is_none();
    Ok(())
}

/// Requests a session plans: one per turn plus one per tool call.
pub fn planned_requests(turns: &[TurnPlan]) -> u32 {
    turns
        .iter()
        .map(|t| t.tool_calls.len() as u32 + 1)
        .sum::<u32>()
        .max(1)
}

/// The sessions after the count-based warm-up ones, numbered from `first_index`; `script`
/// gives session `index` its turns.
///
/// Closed loop: `load.sessions` sessions at offset 0 (the driver adds warm-up by time and
/// keeps cycling them under a `duration` without a session count). Open loop: the arrival
/// process's starts (each session claiming one instant per planned request under `rate`,
/// one under `session_interval`); starts before `warmup_duration` are warm-up sessions, and
/// measured ones follow until `load.sessions` of them, or, under `duration`, until the start
/// would be at or after warm-up + duration (whichever comes first).
pub(super) fn sessions(
    load: &Load,
    arrival_seed: u64,
    first_index: u32,
    script: impl Fn(u32) -> Vec<TurnPlan>,
) -> Result<Vec<SessionPlan>, PlanError> {
    let mean_gap = match (load.rate, load.session_interval) {
        (Some(r), _) => arrival::gap_of_rate(r),
        (None, Some(gap)) => gap,
        (None, None) => {
            return Ok(arrival::closed_loop(load.sessions)
                .into_iter()
                .zip(first_index..)
                .map(|(off, index)| SessionPlan {
                    index,
                    warmup: false,
                    start_offset: off,
                    turns: script(index),
                })
                .collect());
        }
    };
    let warm = load.warmup_duration.unwrap_or_default();
    let until = load.duration.map(|d| warm + d);
    let max_measured = if load.sessions_from_duration {
        usize::MAX
    } else {
        load.sessions as usize
    };
    let mut at = Instants::new(arrival_seed, load.arrival, mean_gap);
    let mut out = Vec::new();
    let mut measured = 0usize;
    while measured < max_measured && until.is_none_or(|u| at.peek() < u) {
        if out.len() >= MAX_GENERATED_SESSIONS {
            return Err(PlanError::new(format!(
                "this load needs more than {MAX_GENERATED_SESSIONS} sessions per cell ({}); shorten duration or warmup, or lower the rate",
                load.shape_line()
            )));
        }
        let index = first_index + out.len() as u32;
        let turns = script(index);
        let claims = if load.rate.is_some() {
            planned_requests(&turns)
        } else {
            1
        };
        let start = at.claim(claims);
        let warmup = start < warm;
        measured += usize::from(!warmup);
        out.push(SessionPlan {
            index,
            warmup,
            start_offset: start,
            turns,
        });
    }
    if measured == 0 {
        return Err(PlanError::new(format!(
            "this load starts no measured session ({}: the first start after the warm-up is past the duration); raise the rate or lengthen duration",
            load.shape_line()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
