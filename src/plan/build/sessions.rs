//! The sessions a load implies.
//!
//! Owns: the open-loop session list (arrival instants, warm-up by time, the `duration`
//! stop) and the requests a session plans. Pure, like the rest of `build`: a resolved
//! [`Load`] and session scripts in, sessions out.
//! Does not own: the load itself (`plan::load`), nor the session scripts (`build`).

use std::sync::Arc;

use crate::plan::arrival::{self, Instants};
use crate::plan::PlanError;
use crate::plan::{Load, SessionPlan, TurnPlan};

/// Most sessions a `duration` may generate per cell (open loop).
pub const MAX_GENERATED_SESSIONS: usize = 200_000;

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
    mut script: impl FnMut(u32) -> Arc<[TurnPlan]>,
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
