//! One load per server: how cells that reach the same server take turns.
//!
//! Cells whose targets have the same scheme, host and port share a server. Under
//! `interleaved` such cells take turns session by session (session k of the first cell,
//! session k of the second, …) through one pool of `concurrency` session slots; under
//! `sequential` they run one after another, each with `concurrency` slots; under `parallel`
//! every cell runs at once with its own slots (so a shared server sees the sum). Cells on
//! different servers always run side by side; every embedded-simulator cell has a server of
//! its own.
//!
//! Pure: the driver asks this module which cells form a group and in which order and at
//! which offsets their sessions start.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{arrival, Cell, Plan};
use crate::vocab::{BaseUrl, Schedule, Scheme};

/// Cells that reach the same server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedServer {
    /// `scheme://host:port`.
    pub server: String,
    /// The cells, as `target × transport`, in plan order.
    pub cells: Vec<String>,
    /// Their indices in the plan.
    #[serde(skip)]
    pub indices: Vec<usize>,
}

/// `scheme://host:port` of a cell's real endpoint; `None` for the embedded simulator (every
/// simulator cell gets its own instance) or an unparsable URL (rejected later anyway).
pub fn server_of(cell: &Cell) -> Option<String> {
    let url = cell.target.base_url.as_deref()?;
    let e = BaseUrl::parse(url).ok()?;
    let scheme = match e.scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    };
    let host = if e.host.contains(':') {
        format!("[{}]", e.host.to_ascii_lowercase())
    } else {
        e.host.to_ascii_lowercase()
    };
    Some(format!("{scheme}://{host}:{}", e.port))
}

/// Servers that two or more cells reach, in plan order.
pub fn shared_servers(cells: &[Cell]) -> Vec<SharedServer> {
    let mut out: Vec<SharedServer> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let Some(server) = server_of(c) else { continue };
        let label = format!("{} × {}", c.target.name, c.transport);
        match out.iter_mut().find(|s| s.server == server) {
            Some(s) => {
                s.cells.push(label);
                s.indices.push(i);
            }
            None => out.push(SharedServer {
                server,
                cells: vec![label],
                indices: vec![i],
            }),
        }
    }
    out.retain(|s| s.cells.len() > 1);
    out
}

/// The default schedule: `parallel` when every target is an embedded simulator (each cell
/// has its own instance), `interleaved` otherwise.
pub fn default_schedule(cells: &[Cell]) -> Schedule {
    if cells.iter().all(|c| c.target.base_url.is_none()) {
        Schedule::Parallel
    } else {
        Schedule::Interleaved
    }
}

/// Cells the driver runs as one unit: either one cell alone, or cells sharing a server under
/// `interleaved` or `sequential`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Cell indices, in plan order.
    pub cells: Vec<usize>,
    /// How they take turns (`parallel` for a cell alone).
    pub schedule: Schedule,
}

/// The run's groups: cells sharing a server form one group unless the schedule is
/// `parallel`; every other cell is a group of its own. Groups run side by side.
pub fn groups(plan: &Plan) -> Vec<Group> {
    let schedule = plan.load.schedule;
    let mut out: Vec<Group> = Vec::new();
    let shared = if schedule == Schedule::Parallel {
        Vec::new()
    } else {
        shared_servers(&plan.cells)
    };
    for i in 0..plan.cells.len() {
        if let Some(s) = shared.iter().find(|s| s.indices.contains(&i)) {
            if s.indices[0] == i {
                out.push(Group {
                    cells: s.indices.clone(),
                    schedule,
                });
            }
            continue;
        }
        out.push(Group {
            cells: vec![i],
            schedule: Schedule::Parallel,
        });
    }
    out
}

/// Open loop under `interleaved`: the start offsets of the measured sessions of `cells`
/// cells, indexed `[session][cell]`. The group draws ONE Poisson process with the scenario's
/// mean gap for all its sessions in turn order (session k of cell 1, of cell 2, …), so the
/// shared server is offered the scenario's arrival rate, not `cells` times it; each cell
/// sees 1/`cells` of it and the measured phase lasts about `cells` times as long.
pub fn interleaved_offsets(
    plan_seed: u64,
    sessions: u32,
    cells: usize,
    gap: Duration,
) -> Vec<Vec<Duration>> {
    let n = sessions.saturating_mul(cells as u32);
    let load = super::Load {
        session_interval: Some(gap),
        ..Default::default()
    };
    let all = interleaved_starts(plan_seed, &load, &vec![1; n as usize]);
    all.chunks(cells.max(1)).map(<[Duration]>::to_vec).collect()
}

/// Open loop under `interleaved`: the starts of a group's sessions in turn order, where
/// `claims[j]` is the requests the j-th session plans. ONE arrival process of the load's
/// shape serves the whole group (see [`interleaved_offsets`]); under `rate` each session
/// claims one instant per planned request, under `session_interval` one. `None` for a
/// closed loop.
pub fn interleaved_starts(plan_seed: u64, load: &super::Load, claims: &[u32]) -> Vec<Duration> {
    let gap = match (load.rate, load.session_interval) {
        (Some(r), _) => arrival::gap_of_rate(r),
        (None, Some(gap)) => gap,
        (None, None) => return vec![Duration::ZERO; claims.len()],
    };
    let seed = crate::rng::Rng::derive(plan_seed, super::STREAM_ARRIVALS).next_u64();
    let per = |j: usize| if load.rate.is_some() { claims[j] } else { 1 };
    arrival::session_offsets(seed, load.arrival, gap, per, claims.len(), None)
}
