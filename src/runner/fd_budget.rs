//! The open-file budget of a plan: the limit raised as far as the hard limit allows when a
//! run starts, and a plan whose concurrency cannot fit in it refused up front, with the fix,
//! instead of thousands of failed connects counted against the target.
//!
//! Owns: the arithmetic (descriptors a plan needs, [`RESERVE`]) and the refusal or warning.
//! Does not own: the `RLIMIT_NOFILE` calls ([`super::resources`]).

use crate::plan::Plan;
use crate::vocab::Schedule;

/// File descriptors a run needs besides its connections (results files, the runtime,
/// listeners, certificates, the terminal).
pub const RESERVE: u64 = 64;

/// Raises `RLIMIT_NOFILE` as far as the process may (the runner's
/// [`super::resources::raise_nofile`]); returns (soft, hard) after it.
pub fn raise() -> (u64, u64) {
    let l = super::resources::raise_nofile();
    if l.granted == 0 {
        (u64::MAX, u64::MAX)
    } else {
        (l.granted, l.hard)
    }
}

/// Connections the plan can hold open at once, and file descriptors that takes: one per
/// connection, two when the target is the embedded simulator (its end is in this process
/// too). `None` when the plan does not cap them (a request rate without `max_in_flight`).
pub fn needed(plan: &Plan) -> Option<u64> {
    let per_lane = match (plan.load.rate, plan.load.max_in_flight) {
        (_, Some(m)) => u64::from(m),
        (Some(_), None) => return None,
        (None, None) => {
            // A closed loop of a fixed session count never has more sessions in flight
            // than it has sessions (warm-up ones run first, with the same slots).
            let c = u64::from(plan.load.concurrency.max(1));
            if plan.load.duration.is_some() || plan.load.sessions_from_duration {
                c
            } else {
                let sessions = u64::from(plan.load.sessions.max(plan.load.warmup_sessions));
                c.min(sessions.max(1))
            }
        }
    };
    let per_conn = |c: &crate::plan::Cell| if c.target.base_url.is_none() { 2 } else { 1 };
    let fds = match plan.load.schedule {
        Schedule::Parallel => plan.cells.iter().map(|c| per_lane * per_conn(c)).sum(),
        // One cell (or one shared pool) at a time: the largest.
        _ => plan
            .cells
            .iter()
            .map(|c| per_lane * per_conn(c))
            .max()
            .unwrap_or(0),
    };
    Some(fds + RESERVE)
}

/// Raises the limit, then refuses a plan that cannot fit (error with the figures and the
/// fix) or warns about one whose connections are not capped.
pub fn check(plan: &Plan) -> anyhow::Result<Option<String>> {
    let (soft, hard) = raise();
    match needed(plan) {
        Some(need) if need > soft => Err(anyhow::anyhow!(
            "this plan can hold about {} connections open at once and needs about {need} file descriptors, \
             but this process may open {soft} (hard limit {hard}); lower --concurrency (or \
             max_in_flight), or raise the limit (`ulimit -n {need}` in the shell that runs \
             spark-bench, or LimitNOFILE= for a service)",
            need - RESERVE
        )),
        Some(_) => Ok(None),
        None => Ok((soft < 100_000).then(|| {
            format!(
                "an open loop without max_in_flight does not cap connections; this process may \
                 open {soft} files, so past about {} requests in flight new ones fail as \
                 `local-error` (set max_in_flight to cap them)",
                soft.saturating_sub(RESERVE) / 2
            )
        })),
    }
}
