//! One lane: sessions dispatched in order through one pool of session slots, under the
//! run's stop conditions (`duration`, warm-up by time) and its cap on requests in flight
//! (`max_in_flight`).
//!
//! Owns: each session's intended start (the plan's open-loop offset from the lane's start,
//! or the moment a closed-loop slot frees), fresh sessions cycled from the lane's scripts
//! (closed-loop warm-up by time, and a closed-loop `duration` without a session count, each
//! with a new index and so its own cold-cache salt), the lane's dispatch deadline, and the
//! admission of each request under `max_in_flight`.
//! Does not own: what a session sends (`super::run_session`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::{run_session, CellContext, Phase, Slot};
use crate::clock::Clock;
use crate::plan::{salt, SessionPlan};
use crate::vocab::CacheMode;

/// What the sessions of a lane share.
#[derive(Clone)]
pub(super) struct Lane {
    /// Cancelled when the run stops dispatching (Ctrl-C).
    pub stop: CancellationToken,
    /// The end of the lane's `duration` on the run clock: nothing *intended* at or after it
    /// is sent. Something intended before it is sent even when the harness (or the
    /// `max_in_flight` cap) is late, so the lateness stays in the data instead of the
    /// request vanishing from it (coordinated omission).
    deadline: Option<u64>,
    /// The `max_in_flight` places, when capped.
    in_flight: Option<Arc<Semaphore>>,
}

/// A request's place under `max_in_flight`, held until its exchange ends.
pub(super) struct Admitted {
    _permit: Option<OwnedSemaphorePermit>,
    /// How long the request waited for its place, ns (0 when one was free).
    pub waited_ns: u64,
}

impl Lane {
    /// True when something intended at `ns` may still be sent.
    pub fn open(&self, ns: u64) -> bool {
        !self.stop.is_cancelled() && self.deadline.is_none_or(|d| ns < d)
    }

    /// Sleeps until `ns`; false (at once) if nothing intended then may be sent, or if the
    /// run stopped first.
    pub async fn sleep_until(&self, clock: Clock, ns: u64) -> bool {
        self.open(ns) && sleep_until_ns(clock, &self.stop, ns).await
    }

    /// Waits for a place for one request intended at `intended`; `None` when it may not be
    /// sent (past the duration, or the run stopped first). The request keeps its intended
    /// start, so the wait shows in TTFT.
    pub async fn admit(&self, clock: Clock, intended: u64) -> Option<Admitted> {
        if !self.open(intended) {
            return None;
        }
        let Some(places) = &self.in_flight else {
            return Some(Admitted {
                _permit: None,
                waited_ns: 0,
            });
        };
        if let Ok(p) = places.clone().try_acquire_owned() {
            return Some(Admitted {
                _permit: Some(p),
                waited_ns: 0,
            });
        }
        let asked = clock.now_ns();
        let permit = tokio::select! {
            biased;
            _ = self.stop.cancelled() => None,
            p = places.clone().acquire_owned() => p.ok(),
        }?;
        Some(Admitted {
            _permit: Some(permit),
            waited_ns: clock.now_ns().saturating_sub(asked.max(intended)),
        })
    }
}

/// Sleeps until `ns` on the run clock; false if `stop` was cancelled first.
async fn sleep_until_ns(clock: Clock, stop: &CancellationToken, ns: u64) -> bool {
    let deadline = clock.instant(ns);
    tokio::select! {
        _ = crate::clock::timer::sleep_until(deadline) => true,
        _ = stop.cancelled() => false,
    }
}

/// Session slots and the sessions running in them.
struct Dispatch {
    slots: Arc<Semaphore>,
    sessions: tokio::task::JoinSet<()>,
    lane: Lane,
    clock: Clock,
}

/// A session slot and how long the session waited for it past `intended`, ns (0 when one
/// was free).
type Taken = (OwnedSemaphorePermit, u64);

impl Dispatch {
    /// A session slot; `None` once the lane stopped. A free slot is taken at once; a wait
    /// for one is timed from the later of now and `intended` (the harness's `slot_wait`:
    /// the load exceeding the slots, not the harness being late).
    async fn slot(&self, intended: u64) -> Option<Taken> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Some((p, 0));
        }
        let asked = self.clock.now_ns();
        let p = tokio::select! {
            biased;
            _ = self.lane.stop.cancelled() => None,
            p = self.slots.clone().acquire_owned() => p.ok(),
        }?;
        Some((p, self.clock.now_ns().saturating_sub(asked.max(intended))))
    }

    fn spawn(
        &mut self,
        ctx: &CellContext,
        session: SessionPlan,
        intended: u64,
        (slot, slot_wait): Taken,
    ) {
        // A finished task stays in the set until joined: reap them as we go, so the set
        // holds the sessions in progress, not every session of the run.
        while let Some(joined) = self.sessions.try_join_next() {
            resume_panic(joined);
        }
        let (ctx, lane) = (ctx.clone(), self.lane.clone());
        // Boxed: the session's future is about 12 KiB, and a task's future is moved into
        // the set, then into the task's cell; a box moves as one pointer (20 µs of CPU per
        // request less, docs/measurements.md).
        self.sessions.spawn(Box::pin(async move {
            run_session(&ctx, &lane, &session, intended, slot_wait).await;
            drop(slot);
        }));
    }
}

impl Dispatch {
    /// Closed loop: fresh sessions cycled from `scripts`, each started when a slot frees
    /// (and measured from then, by definition), while `more(now)` holds. False when the
    /// lane stopped first.
    async fn cycle(
        &mut self,
        cells: &[CellContext],
        scripts: &[(usize, SessionPlan)],
        fresh: &mut Fresh,
        warmup: bool,
        more: impl Fn(u64) -> bool,
    ) -> bool {
        for k in 0.. {
            let Some((i, script)) = scripts.get(k % scripts.len().max(1)) else {
                break;
            };
            let Some((slot, _)) = self.slot(0).await else {
                return false;
            };
            let now = self.clock.now_ns();
            if !more(now) {
                break;
            }
            let Some(s) = fresh.session(cells, *i, script, warmup) else {
                break;
            };
            self.spawn(&cells[*i], s, now, (slot, 0));
        }
        true
    }
}

/// New session indices per cell of the lane, after every index the plan uses.
struct Fresh {
    next: Vec<Option<u32>>,
}

impl Fresh {
    /// A fresh session running `script`'s turns in cell `i` of the lane; `None` when the
    /// cell's cold-cache salts would no longer be distinct.
    fn session(
        &mut self,
        cells: &[CellContext],
        i: usize,
        script: &SessionPlan,
        warmup: bool,
    ) -> Option<SessionPlan> {
        let ctx = &cells[i];
        let next = self.next[i].get_or_insert_with(|| {
            let plan = &ctx.plan;
            let top = plan.sessions.end_index();
            let warm = plan.sessions_of_cell(ctx.index as usize) - plan.sessions.len();
            // A shard numbers its fresh sessions `index` modulo `count`, so the shards of
            // one plan never give two sessions the same index.
            let (first, stride) = shard_stride(plan);
            top.next_multiple_of(stride) + warm as u32 * stride + first
        });
        if ctx.cell.cache == CacheMode::Cold && u64::from(*next) >= salt::LIMITS.1 {
            return None;
        }
        let index = *next;
        *next += shard_stride(&ctx.plan).1;
        Some(SessionPlan {
            index,
            warmup,
            start_offset: Duration::ZERO,
            turns: script.turns.clone(),
        })
    }
}

/// Dispatches `lane` in order through one pool of session slots (`concurrency`, or no cap
/// under a request rate) and waits for every session to end.
///
/// Open loop: each session waits for its intended start (the lane's start + its offset),
/// not for a slot, so a late slot shows up as dispatch lag from the intended start. Closed
/// loop: a session starts when a slot frees and is measured from then. In the measured
/// phase, a closed loop first runs fresh warm-up sessions until `warmup_duration` is over;
/// `duration` ends the phase that long after the warm-up: no session or request intended
/// at or after that instant is sent (sessions in progress end `interrupted`, requests in
/// flight finish), while one intended before it is sent even if late; with no session
/// count a closed loop keeps starting fresh sessions until then.
pub(super) async fn run_lane(
    cells: &[CellContext],
    lane: impl Iterator<Item = Slot> + Send,
    phase: Phase,
) {
    let Some(first) = cells.first() else { return };
    let plan = first.plan.clone();
    let load = &plan.load;
    let clock = first.clock;
    let measured = phase == Phase::Measured;
    let lane_start = clock.now_ns();
    let warm_ns = match load.warmup_duration {
        Some(w) if measured => w.as_nanos() as u64,
        _ => 0,
    };
    let warm_end = lane_start + warm_ns;
    let deadline = load
        .duration
        .filter(|_| measured)
        .map(|d| warm_end + d.as_nanos() as u64);
    let open = load.open_loop();
    let mut d = Dispatch {
        slots: Arc::new(Semaphore::new(load.session_slots())),
        sessions: tokio::task::JoinSet::new(),
        clock,
        lane: Lane {
            stop: first.stop.dispatch.clone(),
            deadline,
            in_flight: load
                .max_in_flight
                .map(|m| Arc::new(Semaphore::new(m.max(1) as usize))),
        },
    };
    let cycle_warm = !open && warm_ns > 0;
    let cycle_measured = !open && measured && load.sessions_from_duration;
    // Cycling closed loops replay the lane's scripts, so only they hold the lane.
    let (scripts, lane): (
        Vec<(usize, SessionPlan)>,
        Box<dyn Iterator<Item = Slot> + Send + '_>,
    ) = if cycle_warm || cycle_measured {
        let lane: Vec<Slot> = lane.collect();
        let scripts = lane.iter().map(|(i, s, _)| (*i, s.clone())).collect();
        (scripts, Box::new(lane.into_iter()))
    } else {
        (Vec::new(), Box::new(lane))
    };
    let mut fresh = Fresh {
        next: vec![None; cells.len()],
    };

    'run: {
        // Closed-loop warm-up by time: fresh warm-up sessions while it lasts.
        if cycle_warm
            && !d
                .cycle(cells, &scripts, &mut fresh, true, |now| now < warm_end)
                .await
        {
            break 'run;
        }
        for (i, session, offset) in lane {
            let intended = lane_start + offset.as_nanos() as u64;
            // Open loop: wait for the arrival time (not for a slot) before taking a slot.
            if !d.lane.sleep_until(clock, intended).await {
                break 'run;
            }
            let Some((slot, waited)) = d.slot(intended).await else {
                break 'run;
            };
            let (intended, waited) = if open {
                (intended, waited)
            } else {
                (clock.now_ns(), 0)
            };
            if !d.lane.open(intended) {
                break 'run;
            }
            d.spawn(&cells[i], session, intended, (slot, waited));
        }
        // Closed loop under a duration without a session count: keep going until it is up.
        if cycle_measured {
            let lane = d.lane.clone();
            if !d
                .cycle(cells, &scripts, &mut fresh, false, |now| lane.open(now))
                .await
            {
                break 'run;
            }
        }
    }
    while let Some(joined) = d.sessions.join_next().await {
        resume_panic(joined);
    }
}

/// A session that panicked is a bug: fail the cell (and the run) loudly rather than lose
/// the session's requests without a word.
fn resume_panic(joined: Result<(), tokio::task::JoinError>) {
    if let Err(e) = joined {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// (first offset, stride) of fresh session indices: (0, 1) for a whole plan, (I, N) for
/// shard I of N.
fn shard_stride(plan: &crate::plan::Plan) -> (u32, u32) {
    plan.shard
        .as_ref()
        .map_or((0, 1), |s| (s.index, s.count.max(1)))
}
