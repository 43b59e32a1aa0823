//! The load generator: executes a [`Plan`], cell by cell, session by session.
//!
//! Owns: concurrency (sessions in flight per cell), pacing (intended send times: think time
//! after a turn, tool time after a tool call, open-loop session arrivals), warm-ups, and
//! cancellation. Emits one [`RequestRecord`] per request and one [`SessionRecord`] per
//! session on a bounded channel; the run is over when every sender has dropped.
//! Does not own: any wire protocol (`backend`, `transport`), statistics (`recorder`) or
//! files (`store`).
//!
//! Cells on different servers (every embedded-simulator cell has its own instance) run at
//! the same time, each with its own connections. Cells that share a server follow the
//! plan's schedule: `interleaved` (sessions take turns through one pool of `concurrency`
//! slots), `sequential` (cell after cell) or `parallel` (all at once, each with its own
//! slots), so `--concurrency N` means N requests in flight at that server.
//!
//! A lane (`lane`) is one pool of session slots: it paces the sessions (open-loop offsets
//! of a request rate or session interval, or a closed loop), applies `duration` and warm-up
//! by time, and admits each request under `max_in_flight`.
//!
//! Coordinated omission: every request carries the time it was *meant* to be sent. A session
//! that waits for a concurrency slot, or a request the driver sends late, is measured from
//! its intended start, so client-side queueing shows up in TTFT instead of vanishing.

pub mod exchange;
mod lane;

use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::{Conversation, ToolChoice};
use crate::clock::Clock;
use crate::plan::salt::{self, RequestPos};
use crate::plan::{schedule, Cell, Plan, SessionPlan, Target, TurnPlan};
use crate::transport::Trust;
use crate::vocab::{CacheMode, Schedule};
use crate::vocab::{RequestKind, RequestRecord, SessionRecord, TransportKind};
use exchange::{exchange, Connector, RecordMeta, Reply, RequestSpec, SessionTransport};
use lane::{run_lane, Lane};

/// What the driver emits.
#[derive(Debug)]
pub enum Event {
    /// A request finished (in any way).
    Request(Box<RequestRecord>),
    /// A session finished.
    Session(SessionRecord),
}

/// Sessions in progress over the whole run, counted as each begins and ends, and the most
/// at once (the manifest's `peak_sessions`): two counters, nothing per session.
#[derive(Debug, Default)]
pub struct SessionGauge {
    now: std::sync::atomic::AtomicU64,
    peak: std::sync::atomic::AtomicU64,
}

impl SessionGauge {
    /// Counts one session in until the guard drops.
    fn enter(self: &Arc<Self>) -> InProgress {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.now.fetch_add(1, Relaxed) + 1;
        self.peak.fetch_max(now, Relaxed);
        InProgress(self.clone())
    }

    /// The most sessions in progress at once so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One session counted in a [`SessionGauge`].
struct InProgress(Arc<SessionGauge>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0
            .now
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How to reach each cell's target: the base URL and what to trust.
#[derive(Clone)]
pub struct Endpoint {
    /// Base URL, e.g. `https://127.0.0.1:41234/v1`.
    pub base_url: String,
    /// Certificates to trust.
    pub trust: Trust,
    /// Client-side link emulation for this cell.
    pub link: crate::link::Link,
    /// The HTTP proxy every connection of the cell tunnels through (`None`: direct).
    pub proxy: Option<crate::vocab::Proxy>,
}

/// Cancellation for a run: the first Ctrl-C stops dispatch, the second aborts in-flight requests.
#[derive(Clone, Default)]
pub struct Stop {
    /// No new request is sent once this is cancelled.
    pub dispatch: CancellationToken,
    /// In-flight requests end as `cancelled` once this is cancelled.
    pub inflight: CancellationToken,
}

/// Runs every cell of the plan. `endpoints[i]` serves `plan.cells[i]`. Cells that share a
/// server follow the plan's schedule (see [`crate::plan::schedule`]); all other cells run
/// side by side. Every cell's warm-up sessions (and, for `cache = "warm"`, its
/// cache-warming sessions) finish before any measured session starts.
/// Returns when all cells are done or stopped, with what the cells' connectors learnt about
/// their servers (a server that closes every keep-alive connection after its response);
/// events go to `tx`. Every cell's connections run their delay lines on `emulator` and count
/// into its (the run's) provenance counters; every session counts into `sessions`.
pub async fn run(
    plan: Arc<Plan>,
    endpoints: Vec<Endpoint>,
    emulator: Arc<crate::link::Emulator>,
    clock: Clock,
    stop: Stop,
    tx: mpsc::Sender<Event>,
    sessions: Arc<SessionGauge>,
) -> anyhow::Result<Vec<ConnectionNote>> {
    anyhow::ensure!(
        endpoints.len() == plan.cells.len(),
        "internal error: {} endpoints for {} cells",
        endpoints.len(),
        plan.cells.len()
    );
    let ids = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut cells = Vec::new();
    for (index, (cell, endpoint)) in plan.cells.iter().zip(endpoints).enumerate() {
        let cell_seed = crate::rng::Rng::derive(plan.seed, index as u64 + 1).next_u64();
        let mut target = cell.target.clone();
        target.base_url = Some(endpoint.base_url.clone());
        let connector = Connector::new(
            &target,
            cell.transport,
            endpoint.trust.clone(),
            endpoint.link,
            clock,
            cell_seed,
        )?
        .with_proxy(endpoint.proxy.clone())
        .with_emulator(emulator.clone())
        .with_connect_timeout(plan.load.connect_timeout());
        cells.push(CellContext {
            plan: plan.clone(),
            index: index as u32,
            cell: Cell {
                target,
                transport: cell.transport,
                cache: cell.cache,
            },
            connector: Arc::new(connector),
            clock,
            stop: stop.clone(),
            tx: tx.clone(),
            ids: ids.clone(),
            sessions: sessions.clone(),
        });
    }
    drop(tx);
    let groups = schedule::groups(&plan);
    for phase in [Phase::Warmup, Phase::Measured] {
        if stop.dispatch.is_cancelled() {
            break;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for g in &groups {
            let members: Vec<CellContext> = g.cells.iter().map(|&i| cells[i].clone()).collect();
            tasks.spawn(run_group(members, g.schedule, phase));
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|e| anyhow::anyhow!("a cell task failed: {e}"))?;
        }
    }
    Ok(cells
        .iter()
        .filter(|c| c.connector.server_closes_after_response())
        .map(|c| ConnectionNote {
            target: c.cell.target.name.clone(),
            transport: c.cell.transport,
            note: SERVER_CLOSES.to_string(),
        })
        .collect())
}

/// Why a cell's connections were not reused, when its connector learnt it.
pub const SERVER_CLOSES: &str =
    "the server closed each connection after its response, so nothing could be pooled";

/// What a cell's connector learnt about its server's connections, for the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionNote {
    /// Target name.
    pub target: String,
    /// The cell's transport.
    pub transport: crate::vocab::TransportKind,
    /// What it learnt, in words ([`SERVER_CLOSES`]).
    pub note: String,
}

#[derive(Clone)]
struct CellContext {
    plan: Arc<Plan>,
    /// The cell's index in the plan (part of its cold-cache salts).
    index: u32,
    cell: Cell,
    connector: Arc<Connector>,
    clock: Clock,
    stop: Stop,
    tx: mpsc::Sender<Event>,
    ids: Arc<std::sync::atomic::AtomicU64>,
    sessions: Arc<SessionGauge>,
}

impl CellContext {
    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The cell's sessions of `phase`: cache-warming (for `warm`) and `warmup_sessions`, or
    /// the measured ones (after, in open loop, the warm-up-by-time sessions that share
    /// their arrival process). Drawn from the plan one at a time (a clone shares the
    /// script), so a lane holds no copy of the cell's sessions.
    fn sessions(&self, phase: Phase) -> impl Iterator<Item = SessionPlan> + Send + '_ {
        let counted = self.plan.load.warmup_sessions;
        let warm = if phase == Phase::Warmup && self.cell.cache == CacheMode::Warm {
            self.plan.cache_warm_sessions()
        } else {
            Vec::new()
        };
        let keep = move |s: &SessionPlan| match phase {
            Phase::Warmup => s.warmup && s.index < counted,
            Phase::Measured => s.index >= counted,
        };
        warm.into_iter()
            .chain(self.plan.sessions.iter().filter(keep))
    }
}

/// The two phases of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Measured,
}

/// One session to dispatch: which cell of the lane, the script, and its intended start
/// offset from the start of the lane.
type Slot = (usize, SessionPlan, std::time::Duration);

/// Runs one phase of a group of cells under its schedule.
async fn run_group(cells: Vec<CellContext>, schedule: Schedule, phase: Phase) {
    let Some(first) = cells.first() else { return };
    let plan = first.plan.clone();
    match schedule {
        Schedule::Parallel | Schedule::Sequential => {
            // A cell alone (or cells one after another), each with its own slots.
            for (i, c) in cells.iter().enumerate() {
                let lane = c.sessions(phase).map(move |s| {
                    let off = s.start_offset;
                    (i, s, off)
                });
                run_lane(&cells, lane, phase).await;
                if cells[0].stop.dispatch.is_cancelled() {
                    break;
                }
            }
        }
        Schedule::Interleaved => {
            // Session k of every cell, then session k + 1 …, through one pool of slots; in
            // open loop the group shares ONE arrival process in that order.
            let mut per_cell: Vec<_> = cells.iter().map(|c| c.sessions(phase)).collect();
            let n = per_cell.len();
            let (mut next, mut dry) = (0usize, 0usize);
            let mut lane = std::iter::from_fn(move || {
                // Round robin over the cells, skipping those run dry; done when all are.
                while dry < n {
                    let i = next;
                    next = (next + 1) % n;
                    match per_cell[i].next() {
                        Some(s) => {
                            dry = 0;
                            return Some((i, s));
                        }
                        None => dry += 1,
                    }
                }
                None
            })
            .map(|(i, s)| {
                let off = s.start_offset;
                (i, s, off)
            });
            if plan.load.open_loop() && phase == Phase::Measured {
                let mut lane: Vec<Slot> = lane.by_ref().collect();
                let claims: Vec<u32> = lane.iter().map(|(_, s, _)| s.planned_requests()).collect();
                let starts = schedule::interleaved_starts(plan.shard_seed(), &plan.load, &claims);
                let warm = plan.load.warmup_duration.unwrap_or_default();
                for (slot, start) in lane.iter_mut().zip(starts) {
                    slot.2 = start;
                    // Warm-up by time is the first `warmup` of the group's process.
                    slot.1.warmup = start < warm;
                }
                run_lane(&cells, lane.into_iter(), phase).await;
            } else {
                run_lane(&cells, lane, phase).await;
            }
        }
    }
}

/// One session's mutable state while it runs.
struct SessionRun<'a> {
    ctx: &'a CellContext,
    lane: &'a Lane,
    session: &'a SessionPlan,
    conn: SessionTransport,
    conv: Conversation,
    requests: u32,
    failed: u32,
    last_end: u64,
    /// The session's wait for a concurrency slot, ns: charged to its first request.
    slot_wait: u64,
}

impl SessionRun<'_> {
    /// Sends one request (step `step` of scenario turn `turn`) once the lane admits it,
    /// forwards its record, and returns the reply, end time and success; `None` when the
    /// lane stopped dispatching first (nothing was sent).
    async fn send(
        &mut self,
        spec: RequestSpec,
        (turn, step): (u32, u32),
        intended: u64,
    ) -> Option<(Reply, u64, bool)> {
        // Under `max_in_flight` the request may wait here; it keeps its intended start.
        let admitted = self.lane.admit(self.ctx.clock, intended).await?;
        if self.ctx.cell.cache == CacheMode::Cold {
            // A unique salt first in the system prompt: no prefix cache can serve this
            // request from any earlier one (see `plan::salt`).
            let pos = RequestPos {
                cell: self.ctx.index,
                session: self.session.index,
                turn,
                step,
                ws_warmup: spec.kind == RequestKind::Warmup,
            };
            self.conv.system = salt::salted(
                self.ctx.plan.load.salt_key,
                pos,
                &self.ctx.plan.system_prompt,
            );
        }
        let meta = RecordMeta {
            id: self.ctx.next_id(),
            session: self.session.index,
            turn,
            request: self.requests,
            step,
            intended_ns: intended,
            warmup: self.session.warmup,
        };
        let (record, reply) = exchange(
            &mut self.conn,
            &self.ctx.cell.target,
            &mut self.conv,
            &spec,
            &meta,
            &self.ctx.stop.inflight,
        )
        .await;
        let mut record = record;
        // Waits for a session slot (charged to the session's first request) and for a
        // place under `max_in_flight`: the load queueing, not the harness being slow.
        let waited = std::mem::take(&mut self.slot_wait) + admitted.waited_ns;
        drop(admitted);
        if waited > 0 {
            record.slot_wait_ns = Some(waited);
        }
        // `exchange` always sets `end_ns`; the fallback only keeps this total.
        let end = record.end_ns.unwrap_or(record.dispatch_ns);
        let ok = record.is_ok();
        self.requests += 1;
        self.failed += u32::from(!ok);
        self.last_end = end;
        let _ = self.ctx.tx.send(Event::Request(Box::new(record))).await;
        Some((reply, end, ok))
    }
}

impl SessionRun<'_> {
    /// A fresh WebSocket gets a `generate:false` warm-up first when the target asks for it.
    /// Returns when the turn may start (the warm-up's end, or `intended` when none was
    /// needed), or `None` when the lane stopped dispatching first.
    async fn warm_up(&mut self, turn: &TurnPlan, turn_no: u32, intended: u64) -> Option<u64> {
        let target = &self.ctx.cell.target;
        if !(self.ctx.cell.transport == TransportKind::Ws
            && target.ws_warmup
            && !self.conn.ws_warm())
        {
            return Some(intended);
        }
        let spec = RequestSpec {
            kind: RequestKind::Warmup,
            max_output_tokens: turn.max_output_tokens,
            tool_choice: ToolChoice::Auto,
            tools: Vec::new(),
            fault: None,
            continuous_usage_stats: false,
        };
        let (_, end, _) = self.send(spec, (turn_no, 0), intended).await?;
        Some(end)
    }
}

async fn run_session(
    ctx: &CellContext,
    lane: &Lane,
    session: &SessionPlan,
    intended_start: u64,
    slot_wait: u64,
) {
    let _in_progress = ctx.sessions.enter();
    let target: &Target = &ctx.cell.target;
    let mut run = SessionRun {
        ctx,
        lane,
        session,
        conn: ctx.connector.session(),
        conv: Conversation::new(
            &ctx.plan.system_prompt,
            target.api,
            ctx.cell.transport,
            target.store,
        ),
        requests: 0,
        failed: 0,
        last_end: intended_start,
        slot_wait,
    };
    let mut intended = intended_start;
    // Set when the run's stop cut the session short.
    let mut interrupted = false;

    'turns: for (turn_no, turn) in (0u32..).zip(session.turns.iter()) {
        intended = run.last_end.max(intended) + turn.think_time.as_nanos() as u64;
        if !lane.sleep_until(ctx.clock, intended).await {
            interrupted = true;
            break;
        }
        match run.warm_up(turn, turn_no, intended).await {
            Some(at) => intended = at,
            None => {
                interrupted = true;
                break;
            }
        }
        run.conv.add_user_message(&turn.user_text);
        let tools: Vec<String> = turn.tool_calls.iter().map(|t| t.name.clone()).collect();
        let groups = call_groups(&turn.tool_calls);
        let mut groups = groups.into_iter();
        let mut next_group = groups.next();
        let mut fault = turn.fault.clone();
        let mut kind = RequestKind::User;
        let mut step = 0;
        loop {
            if lane.stop.is_cancelled() {
                interrupted = true;
                break 'turns;
            }
            let spec = RequestSpec {
                kind,
                fault: fault.take(),
                // Exact per-chunk token counts where the server supports the vLLM extension
                // (the embedded simulator does); real APIs may reject unknown stream options.
                continuous_usage_stats: target.sim_profile.is_some(),
                ..step_spec(turn, next_group, &tools)
            };
            let Some((reply, end, ok)) = run.send(spec, (turn_no, step), intended).await else {
                interrupted = true;
                break 'turns;
            };
            step += 1;
            // `exchange` has already updated the conversation with the reply (or the failure).
            if !ok {
                // The turn is lost; the session goes on with the next turn.
                continue 'turns;
            }
            let Some(group) = next_group else {
                if let Some(answer) = &turn.answer {
                    run.conv.replace_last_answer(answer);
                }
                break;
            };
            if reply.tool_calls.is_empty() {
                // The model answered in text although a tool was requested: nothing to return.
                break;
            }
            // Answer each tool call the model made (the planned call of the same name, else
            // the group's first), after the simulated tool time.
            for tc in &reply.tool_calls {
                let call = group
                    .iter()
                    .find(|c| c.name == tc.name)
                    .unwrap_or(&group[0]);
                run.conv
                    .add_tool_output(&tc.call_id, &tool_output(&tc.name, call.output_bytes));
            }
            intended = end + group[0].tool_time.as_nanos() as u64;
            if !lane.sleep_until(ctx.clock, intended).await {
                interrupted = true;
                break 'turns;
            }
            next_group = groups.next();
            kind = RequestKind::ToolResult;
        }
    }
    let _ = ctx
        .tx
        .send(Event::Session(SessionRecord {
            target: target.name.clone(),
            transport: ctx.cell.transport,
            session: session.index,
            warmup: session.warmup,
            start_ns: intended_start,
            end_ns: run.last_end,
            requests: run.requests,
            failed: run.failed,
            interrupted,
        }))
        .await;
}

/// What a step of a turn asks for: the tool calls of `group` (one forced function, or
/// parallel calls) or, after the last group, the answer; and the output length.
fn step_spec(
    turn: &TurnPlan,
    group: Option<&[crate::plan::ToolCallPlan]>,
    tools: &[String],
) -> RequestSpec {
    let tool_choice = match group {
        Some([call]) => ToolChoice::Function(call.name.clone()),
        Some(group) => ToolChoice::Parallel(group.iter().map(|c| c.name.clone()).collect()),
        None if tools.is_empty() => ToolChoice::Auto,
        None => ToolChoice::None,
    };
    RequestSpec {
        kind: RequestKind::User,
        max_output_tokens: group
            .and_then(|g| g.first()?.max_output_tokens)
            .unwrap_or(turn.max_output_tokens),
        tool_choice,
        tools: tools.to_vec(),
        fault: None,
        continuous_usage_stats: false,
    }
}

/// A turn's tool calls grouped by the response that makes them: a call marked `parallel`
/// joins the group before it.
fn call_groups(calls: &[crate::plan::ToolCallPlan]) -> Vec<&[crate::plan::ToolCallPlan]> {
    let mut out: Vec<&[crate::plan::ToolCallPlan]> = Vec::new();
    let mut start = 0;
    for i in 1..=calls.len() {
        if i == calls.len() || !calls[i].parallel {
            out.push(&calls[start..i]);
            start = i;
        }
    }
    out
}

/// A deterministic tool output of about `bytes` bytes (looks like test-runner output).
pub fn tool_output(tool: &str, bytes: u32) -> String {
    let mut out = format!("$ {tool}\n");
    let mut i = 0u32;
    while out.len() < bytes as usize {
        i += 1;
        out.push_str(&format!("test module_{i}::case_{i} ... ok\n"));
    }
    out.truncate(bytes.max(1) as usize);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_calls_share_a_group_and_a_request() {
        let call = |name: &str, parallel| crate::plan::ToolCallPlan {
            name: name.into(),
            tool_time: std::time::Duration::ZERO,
            output_bytes: 10,
            parallel,
            max_output_tokens: None,
        };
        let calls = [call("a", false), call("b", true), call("c", false)];
        let groups = call_groups(&calls);
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [2, 1]);
        let turn = TurnPlan {
            user_text: "u".into(),
            think_time: std::time::Duration::ZERO,
            max_output_tokens: 7,
            tool_calls: calls.to_vec(),
            fault: None,
            answer: None,
        };
        assert_eq!(turn.requests(), 3);
        let spec = step_spec(&turn, Some(groups[0]), &[]);
        assert_eq!(
            spec.tool_choice,
            ToolChoice::Parallel(vec!["a".into(), "b".into()])
        );
        assert_eq!(spec.max_output_tokens, 7);
    }

    #[test]
    fn the_session_gauge_keeps_the_most_in_progress_at_once() {
        let g = Arc::new(SessionGauge::default());
        let a = g.enter();
        let b = g.enter();
        drop(a);
        let c = g.enter();
        drop((b, c));
        let d = g.enter();
        drop(d);
        assert_eq!(g.peak(), 2);
        assert_eq!(g.now.load(std::sync::atomic::Ordering::Relaxed), 0);
    }
}
