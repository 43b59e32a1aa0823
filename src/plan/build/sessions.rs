//! The sessions a load implies.
//!
//! Owns: the sessions' source of a load (the closed loop's count; the open loop's arrival
//! process, warm-up by time and `duration` stop, walked once to count and check them).
//! Pure, like the rest of `build`: a resolved [`Load`] and a
//! session-script function in, a [`Sessions`] source out.
//! Does not own: the load itself (`plan::load`), nor the session scripts (`build`).

use crate::plan::arrival;
use crate::plan::session_source::{Arrivals, ScriptFn, Source};
use crate::plan::PlanError;
use crate::plan::{Load, Sessions};

/// Most sessions a `duration` may generate per cell (open loop).
pub const MAX_GENERATED_SESSIONS: usize = 200_000;

pub use crate::plan::session_source::planned_requests;

/// Every session of a cell as a [`Sessions`] source, and how many of them are measured:
/// sessions `0..load.warmup_sessions` are warm-up sessions at offset 0, then `script` gives
/// session `index` its turns.
///
/// Closed loop: `load.sessions` sessions at offset 0 (the driver adds warm-up by time and
/// keeps cycling them under a `duration` without a session count). Open loop: the arrival
/// process's starts (each session claiming one instant per planned request under `rate`,
/// one under `session_interval`); starts before `warmup_duration` are warm-up sessions, and
/// measured ones follow until `load.sessions` of them, or, under `duration`, until the start
/// would be at or after warm-up + duration (whichever comes first). An open loop is walked
/// once here to count and check it (no session is kept); the source walks it again, from
/// the same seed, each time the sessions are read.
pub(super) fn sessions(
    load: &Load,
    arrival_seed: u64,
    script: ScriptFn,
) -> Result<(Sessions, u32), PlanError> {
    let mean_gap = match (load.rate, load.session_interval) {
        (Some(r), _) => arrival::gap_of_rate(r),
        (None, Some(gap)) => gap,
        (None, None) => {
            let source = Source {
                script,
                warmup_sessions: load.warmup_sessions,
                arrivals: None,
            };
            let whole = load.warmup_sessions.saturating_add(load.sessions);
            return Ok((Sessions::from_source(source, whole), load.sessions));
        }
    };
    let warm = load.warmup_duration.unwrap_or_default();
    let source = Source {
        script,
        warmup_sessions: load.warmup_sessions,
        arrivals: Some(Arrivals {
            seed: arrival_seed,
            arrival: load.arrival,
            mean_gap,
            per_request: load.rate.is_some(),
            warm,
            until: load.duration.map(|d| warm + d),
            max_measured: if load.sessions_from_duration {
                u32::MAX
            } else {
                load.sessions
            },
        }),
    };
    // The walk: unbounded but for the arrival process's own stops.
    let walk = Sessions::from_source(source.clone(), u32::MAX);
    let (mut generated, mut measured) = (0usize, 0u32);
    for s in walk.iter().skip(load.warmup_sessions as usize) {
        if generated >= MAX_GENERATED_SESSIONS {
            return Err(PlanError::new(format!(
                "this load needs more than {MAX_GENERATED_SESSIONS} sessions per cell ({}); shorten duration or warmup, or lower the rate",
                load.shape_line()
            )));
        }
        generated += 1;
        measured += u32::from(!s.warmup);
    }
    if measured == 0 {
        return Err(PlanError::new(format!(
            "this load starts no measured session ({}: the first start after the warm-up is past the duration); raise the rate or lengthen duration",
            load.shape_line()
        )));
    }
    let whole = load.warmup_sessions + generated as u32;
    Ok((Sessions::from_source(source, whole), measured))
}
