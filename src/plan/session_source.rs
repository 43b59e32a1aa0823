//! The plan's sessions without a list of them: a compact description that builds session
//! `i` when it is asked for, so a plan of ten million sessions costs what a plan of ten does.
//!
//! Owns: [`Sessions`]: either a [`Source`] (session `i`'s script as a function of `i`, the
//! count-based warm-up, the open-loop arrival process) with an optional shard filter, or
//! explicit runs (read back from a manifest, merged from shards, edited by `calibrate`);
//! its iterator, which draws open-loop start offsets from the seeded arrival process as it
//! goes; the folding of consecutive equal sessions into runs; and the requests a session
//! plans.
//! Does not own: how scripts are made (`plan::build`, `plan::workload`), counting an
//! open-loop plan's sessions and its checks (`plan::build`), nor the JSON form
//! (`session_runs`).
//!
//! Iterating a source is the eager build's loop, replayed: the same seed gives the same
//! sessions, offsets and warm-up flags every time, and the folded JSON is byte for byte
//! what a list of those sessions folds to.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::arrival::{Arrival, Instants};
use super::{same_script, SessionPlan, TurnPlan};

/// Session `i`'s script (pure: the same `i` always gives equal turns).
pub type ScriptFn = Arc<dyn Fn(u32) -> Arc<[TurnPlan]> + Send + Sync>;

/// An open-loop arrival process and where it stops (see `plan::build`'s sessions).
#[derive(Debug, Clone)]
pub struct Arrivals {
    /// Seed of the process.
    pub seed: u64,
    /// Its shape.
    pub arrival: Arrival,
    /// Its mean gap.
    pub mean_gap: Duration,
    /// Under a request rate a session claims one instant per planned request; else one.
    pub per_request: bool,
    /// Sessions starting before this are warm-up sessions.
    pub warm: Duration,
    /// No session starts at or after this.
    pub until: Option<Duration>,
    /// Most measured sessions.
    pub max_measured: u32,
}

/// What every session of a plan is made from.
#[derive(Clone)]
pub struct Source {
    /// Session `i`'s script.
    pub script: ScriptFn,
    /// Sessions `0..warmup_sessions` are warm-up sessions at offset 0.
    pub warmup_sessions: u32,
    /// `None`: a closed loop (every offset 0).
    pub arrivals: Option<Arrivals>,
}

/// `count` sessions numbered from `index` with the same flag, offset and script.
#[derive(Debug, Clone)]
pub struct Run {
    /// First index.
    pub index: u32,
    /// Warm-up flag.
    pub warmup: bool,
    /// Start offset.
    pub start_offset: Duration,
    /// The script.
    pub turns: Arc<[TurnPlan]>,
    /// Sessions in the run (at least 1).
    pub count: u32,
}

#[derive(Clone)]
enum Kind {
    /// Sessions `0..whole` of `src`, keeping index `i` only when `i % n == k` for
    /// `shard = Some((k, n))`.
    Source {
        src: Arc<Source>,
        whole: u32,
        shard: Option<(u32, u32)>,
    },
    Runs(Vec<Run>),
}

/// Every session of a cell, in index order (warm-up ones first).
#[derive(Clone)]
pub struct Sessions {
    kind: Kind,
    len: usize,
}

impl fmt::Debug for Sessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Source { .. } => "source",
            Kind::Runs(_) => "runs",
        };
        f.debug_struct("Sessions")
            .field("kind", &kind)
            .field("len", &self.len)
            .finish()
    }
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            kind: Kind::Runs(Vec::new()),
            len: 0,
        }
    }
}

impl Sessions {
    /// Sessions `0..whole` of `src` (a source generates; nothing per session is kept).
    pub fn from_source(src: Source, whole: u32) -> Self {
        Sessions {
            kind: Kind::Source {
                src: Arc::new(src),
                whole,
                shard: None,
            },
            len: whole as usize,
        }
    }

    /// Explicit runs, in index order.
    pub fn from_runs(runs: Vec<Run>) -> Self {
        let len = runs.iter().map(|r| r.count as usize).sum();
        Sessions {
            kind: Kind::Runs(runs),
            len,
        }
    }

    /// These sessions, folded into runs.
    pub fn from_sessions(sessions: impl IntoIterator<Item = SessionPlan>) -> Self {
        Self::from_runs(fold(sessions.into_iter()).collect())
    }

    /// How many sessions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sessions in order, each built as it is reached (a clone shares the script).
    pub fn iter(&self) -> Iter<'_> {
        let state = match &self.kind {
            Kind::Source { src, whole, shard } => State::Source {
                src,
                whole: *whole,
                shard: *shard,
                next: 0,
                at: src
                    .arrivals
                    .as_ref()
                    .map(|a| Instants::new(a.seed, a.arrival, a.mean_gap)),
                measured: 0,
            },
            Kind::Runs(runs) => State::Runs {
                runs: runs.iter(),
                cur: None,
            },
        };
        Iter { state }
    }

    /// The `k`-th session in order (a closed-loop source builds it directly; otherwise the
    /// sessions before it are walked).
    pub fn get(&self, k: usize) -> Option<SessionPlan> {
        if k >= self.len {
            return None;
        }
        if let Kind::Source { src, shard, .. } = &self.kind {
            if src.arrivals.is_none() {
                let (first, stride) = shard.unwrap_or((0, 1));
                return Some(src.closed(first + k as u32 * stride));
            }
        }
        self.iter().nth(k)
    }

    /// Every session, listed (for tests and small plans).
    pub fn to_vec(&self) -> Vec<SessionPlan> {
        self.iter().collect()
    }

    /// One past the highest session index (0 when there are none).
    pub fn end_index(&self) -> u32 {
        match &self.kind {
            Kind::Source { whole, shard, .. } => match *shard {
                None => *whole,
                Some((k, n)) if *whole > k => (*whole - 1 - k) / n * n + k + 1,
                Some(_) => 0,
            },
            Kind::Runs(runs) => runs.iter().map(|r| r.index + r.count).max().unwrap_or(0),
        }
    }

    /// The sessions whose index is `k` modulo `n` (shard `k` of `n`).
    pub fn shard(&self, k: u32, n: u32) -> Sessions {
        match &self.kind {
            Kind::Source {
                src,
                whole,
                shard: None,
            } => Sessions {
                kind: Kind::Source {
                    src: src.clone(),
                    whole: *whole,
                    shard: Some((k, n)),
                },
                len: if *whole > k {
                    ((*whole - 1 - k) / n + 1) as usize
                } else {
                    0
                },
            },
            _ => Self::from_sessions(self.iter().filter(|s| s.index % n == k)),
        }
    }

    /// The sessions of `parts` together, in index order.
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a Sessions>) -> Sessions {
        let mut all: Vec<SessionPlan> = parts.into_iter().flat_map(|p| p.iter()).collect();
        all.sort_by_key(|s| s.index);
        Self::from_sessions(all)
    }

    /// The sessions folded: consecutive sessions with the same script, warm-up flag and
    /// start offset, numbered one after another, are one run. Streams.
    pub fn runs(&self) -> impl Iterator<Item = Run> + '_ {
        fold(self.iter())
    }
}

impl Source {
    /// Session `i` of a closed loop.
    fn closed(&self, i: u32) -> SessionPlan {
        SessionPlan {
            index: i,
            warmup: i < self.warmup_sessions,
            start_offset: Duration::ZERO,
            turns: (self.script)(i),
        }
    }
}

impl<'a> IntoIterator for &'a Sessions {
    type Item = SessionPlan;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over [`Sessions`].
pub struct Iter<'a> {
    state: State<'a>,
}

enum State<'a> {
    Source {
        src: &'a Source,
        whole: u32,
        shard: Option<(u32, u32)>,
        next: u32,
        at: Option<Instants>,
        measured: u32,
    },
    Runs {
        runs: std::slice::Iter<'a, Run>,
        cur: Option<(&'a Run, u32)>,
    },
}

impl Iterator for Iter<'_> {
    type Item = SessionPlan;

    fn next(&mut self) -> Option<SessionPlan> {
        match &mut self.state {
            State::Source {
                src,
                whole,
                shard,
                next,
                at,
                measured,
            } => loop {
                if *next >= *whole {
                    return None;
                }
                let i = *next;
                *next += 1;
                let keep = shard.is_none_or(|(k, n)| i % n == k);
                let (Some(a), Some(at)) = (&src.arrivals, at.as_mut()) else {
                    if keep {
                        return Some(src.closed(i));
                    }
                    // A closed loop's next kept index, without building the ones between.
                    if let Some((k, n)) = *shard {
                        let j = i - i % n + k;
                        *next = if j > i { j } else { j.saturating_add(n) };
                    }
                    continue;
                };
                if i < src.warmup_sessions {
                    if keep {
                        return Some(src.closed(i));
                    }
                    continue;
                }
                // The open-loop process: one arrival walk, exactly the build's.
                if *measured >= a.max_measured || a.until.is_some_and(|u| at.peek() >= u) {
                    *next = *whole;
                    return None;
                }
                let turns = (keep || a.per_request).then(|| (src.script)(i));
                let claims = match (&turns, a.per_request) {
                    (Some(t), true) => planned_requests(t),
                    _ => 1,
                };
                let start = at.claim(claims);
                let warmup = start < a.warm;
                *measured += u32::from(!warmup);
                if let (true, Some(turns)) = (keep, turns) {
                    return Some(SessionPlan {
                        index: i,
                        warmup,
                        start_offset: start,
                        turns,
                    });
                }
            },
            State::Runs { runs, cur } => loop {
                if let Some((r, k)) = cur {
                    if *k < r.count {
                        let s = SessionPlan {
                            index: r.index.saturating_add(*k),
                            warmup: r.warmup,
                            start_offset: r.start_offset,
                            turns: r.turns.clone(),
                        };
                        *k += 1;
                        return Some(s);
                    }
                }
                *cur = Some((runs.next()?, 0));
            },
        }
    }
}

/// Requests a session plans: one per turn plus one per tool call.
pub fn planned_requests(turns: &[TurnPlan]) -> u32 {
    turns.iter().map(TurnPlan::requests).sum::<u32>().max(1)
}

/// Folds consecutive equal sessions into runs, streaming.
fn fold(mut sessions: impl Iterator<Item = SessionPlan>) -> impl Iterator<Item = Run> {
    let mut pending: Option<Run> = None;
    std::iter::from_fn(move || loop {
        let Some(s) = sessions.next() else {
            return pending.take();
        };
        if let Some(last) = pending.as_mut() {
            if last.warmup == s.warmup
                && last.start_offset == s.start_offset
                && last.index.checked_add(last.count) == Some(s.index)
                && same_script(&last.turns, &s.turns)
            {
                last.count += 1;
                continue;
            }
        }
        let run = Run {
            index: s.index,
            warmup: s.warmup,
            start_offset: s.start_offset,
            turns: s.turns,
            count: 1,
        };
        if let Some(done) = pending.replace(run) {
            return Some(done);
        }
    })
}

#[cfg(test)]
mod tests;
