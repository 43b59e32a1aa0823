//! The validated, resolved plan: what the driver executes. Built from a `Scenario` plus CLI
//! overrides in one fallible step; the same scenario and seed always give the same plan.
//!
//! Owns: the plan types, the scenario → plan resolution (`build`; the load knobs → [`Load`]
//! in `load`), built-in targets, and the pure arithmetic of intended send times.
//! Does not own: I/O, clocks, or runtime handles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::link::Link;
use crate::vocab::{ApiFlavour, CacheMode, Schedule, TransportKind};

pub mod arrival;
mod build;
mod check;
mod load;
pub mod salt;
pub mod schedule;
pub mod session_runs;
pub mod session_source;
pub mod shard;
pub mod slo;
pub mod sweep;
pub mod targets;
pub mod workload;

pub use build::{build, Overrides, PlanInput};
pub use check::PlanError;
pub use load::{Load, DEFAULT_CONNECT_TIMEOUT};
pub use session_source::Sessions;
pub use slo::{Slo, SloBound};

// Seed streams of the plan's RNG, so adding randomness in one place never shifts another.
const STREAM_ARRIVALS: u64 = 1;
const STREAM_CONTEXT: u64 = 2;
const STREAM_AGENT: u64 = 1 << 20;
/// `[workload]`: session `i`'s token lengths and synthetic text use stream
/// `STREAM_WORKLOAD + i` (far above every agent stream).
const STREAM_WORKLOAD: u64 = 1 << 40;
/// `[workload]`: the dataset sample's order (one draw per plan), just below the sessions'.
const STREAM_DATASET: u64 = STREAM_WORKLOAD - 1;
pub use schedule::SharedServer;

/// Everything the driver needs to run, fully resolved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// Scenario `name`.
    pub scenario_name: String,
    /// Path the scenario was read from.
    pub scenario_path: String,
    /// `sha256:<hex>` of the scenario file bytes (the compare gate refuses mismatches).
    pub scenario_hash: String,
    /// Master seed (scenario `seed`, overridden by `--seed`).
    pub seed: u64,
    /// System prompt / instructions sent with every request.
    pub system_prompt: String,
    /// The target × transport matrix, in display order (targets outer, transports inner).
    pub cells: Vec<Cell>,
    /// The sessions; every cell runs the same sessions. A built plan generates each one
    /// when it is reached (see [`session_source`]: nothing is kept per session), and the
    /// JSON form folds consecutive sessions that differ only in their index into one entry
    /// with a `count` (see [`session_runs`]).
    #[serde(with = "session_runs")]
    pub sessions: Sessions,
    /// Load shape.
    pub load: Load,
    /// Link emulation applied on the client side for embedded-simulator targets (and for
    /// any target when given with `--link`).
    pub link: Link,
    /// True when the link was given with `--link`: then it applies to real endpoints too.
    /// A scenario's `link` (or the default `rtt=40ms`) applies to simulator targets only.
    #[serde(default)]
    pub link_for_real_targets: bool,
    /// Scenario `description`.
    #[serde(default)]
    pub description: String,
    /// Gate thresholds from the scenario's `[gate]`, for `compare`.
    pub gate: BTreeMap<String, String>,
    /// Things the plan builder adjusted or skipped (e.g. a `ws` cell dropped for a
    /// chat-completions target); shown before the run and kept in the manifest.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The scenario file's text, for the manifest (`manifest.json` → `scenario.source`);
    /// not repeated inside the serialized plan.
    #[serde(skip)]
    pub scenario_source: String,
    /// Where the sessions came from when the scenario has a `[workload]`, and which rule
    /// sized it; `None` for hand-written `[[turns]]` (and in older manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<workload::WorkloadInfo>,
    /// The scenario's `[slo]` (empty when it has none); goodput is counted against it.
    #[serde(default, skip_serializing_if = "Slo::is_empty")]
    pub slo: Slo,
    /// `run --shard I/N`: which part of the whole plan this is (see [`shard`]); `None` for
    /// a whole plan (and in older manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<shard::Shard>,
}

impl Plan {
    /// The link emulation as this plan's cells get it, for the run's header, manifest and
    /// report: the scenario's link covers simulator targets, and real endpoints only when it
    /// came from `--link`, so a run of real endpoints alone says `none`.
    pub fn link_line(&self) -> String {
        let link = self.link.to_string();
        let real = self
            .cells
            .iter()
            .filter(|c| c.target.base_url.is_some())
            .count();
        if real == 0 || self.link_for_real_targets || self.link.is_none() {
            link
        } else if real == self.cells.len() {
            format!("none (real endpoints; the scenario's link {link} applies to simulator targets only)")
        } else {
            format!("{link} (simulator targets only)")
        }
    }

    /// The untimed sessions a `warm` cell runs first: each distinct measured session script
    /// once (agent loops draw their tool order per session, so scripts can differ), marked
    /// warm-up and numbered after the measured sessions. Its prompts then sit in the server's
    /// prefix cache when the measured sessions start.
    pub fn cache_warm_sessions(&self) -> Vec<SessionPlan> {
        let mut out: Vec<SessionPlan> = Vec::new();
        let next = self.sessions.end_index();
        for s in self.sessions.iter().filter(|s| !s.warmup) {
            if out.iter().any(|t| same_script(&t.turns, &s.turns)) {
                continue;
            }
            out.push(SessionPlan {
                index: next + out.len() as u32,
                warmup: true,
                start_offset: Duration::ZERO,
                turns: s.turns,
            });
        }
        out
    }

    /// Sessions cell `cell` runs in all: warm-up, cache-warming (for `warm`) and measured.
    pub fn sessions_of_cell(&self, cell: usize) -> usize {
        let warm = match self.cells.get(cell).map(|c| c.cache) {
            Some(CacheMode::Warm) => self.cache_warm_sessions().len(),
            _ => 0,
        };
        self.sessions.len() + warm
    }

    /// Cells that share a server (see [`schedule`]).
    pub fn shared_servers(&self) -> Vec<SharedServer> {
        schedule::shared_servers(&self.cells)
    }

    /// One line on how the run shares servers and treats prefix caches, for the header the
    /// run prints and the report: `schedule interleaved (… share …); cache cold`, after the
    /// load shape when it is more than a plain closed loop (see [`Load::shape_line`]).
    pub fn load_line(&self) -> String {
        let shared = self.shared_servers();
        let shape = self.load.shape_line();
        let mut s = if shape.is_empty() {
            format!("schedule {}", self.load.schedule)
        } else {
            format!("{shape}; schedule {}", self.load.schedule)
        };
        if shared.is_empty() {
            s.push_str(" (no two cells share a server)");
        } else {
            let parts: Vec<String> = shared
                .iter()
                .map(|sh| {
                    let per_lane = match (self.load.rate, self.load.max_in_flight) {
                        (_, Some(m)) => m,
                        (Some(_), None) => 0,
                        (None, None) => self.load.concurrency,
                    };
                    let inflight = match self.load.schedule {
                        Schedule::Parallel => sh.cells.len() as u64 * u64::from(per_lane),
                        _ => u64::from(per_lane),
                    };
                    let inflight = if per_lane == 0 {
                        "no cap on requests".to_string()
                    } else {
                        format!("at most {inflight}")
                    };
                    format!(
                        "{} share {}, {inflight} in flight there",
                        sh.cells.join(", "),
                        sh.server
                    )
                })
                .collect();
            s.push_str(&format!(" ({})", parts.join("; ")));
        }
        let mut modes: Vec<String> = Vec::new();
        for c in &self.cells {
            let m = format!("{} {}", c.target.name, c.cache);
            if !modes.contains(&m) {
                modes.push(m);
            }
        }
        let all_same = self.cells.iter().all(|c| c.cache == self.cells[0].cache);
        if all_same && !self.cells.is_empty() {
            s.push_str(&format!("; cache {}", self.cells[0].cache));
        } else {
            s.push_str(&format!("; cache {}", modes.join(", ")));
        }
        s
    }
}

/// One target × transport combination.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// The target.
    pub target: Target,
    /// The transport.
    pub transport: TransportKind,
    /// What the cell does about the server's prefix cache (`[load] cache`, the target's
    /// `cache`, or `--cache`). Older manifests have none: `as-is`.
    #[serde(default)]
    pub cache: CacheMode,
}

/// A backend to talk to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Target {
    /// Name (`sim-wafer`, `openai`, …).
    pub name: String,
    /// Base URL such as `https://api.openai.com/v1`; `None` means the embedded simulator,
    /// started in-process on loopback with TLS.
    pub base_url: Option<String>,
    /// Embedded-simulator profile (`gpu`, `wafer`, `cpu`) when `base_url` is `None`.
    pub sim_profile: Option<String>,
    /// Wire API.
    pub api: ApiFlavour,
    /// Model name sent in requests.
    pub model: String,
    /// Name of the environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Hardware label for reports ("GPU", "Cerebras WSE-3", …).
    pub hardware: String,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// Responses API over HTTP: chain turns with `store=true` + `previous_response_id`
    /// instead of resending the full history.
    pub store: bool,
    /// Send a `generate:false` warm-up on each new WebSocket before the first turn.
    pub ws_warmup: bool,
    /// Ask for server timing (`x-responsesapi-include-timing-metrics: true`).
    pub request_timing: bool,
    /// Give up on a request after this long.
    #[serde(with = "crate::units::serde_duration")]
    pub request_timeout: Duration,
    /// Give up when no byte arrives for this long (a stall).
    #[serde(with = "crate::units::serde_duration")]
    pub stall_timeout: Duration,
    /// Transports this target supports (chat-completions targets cannot do `ws`).
    pub transports: Vec<TransportKind>,
    /// Extra trust, client certificate and proxy choice (real endpoints only).
    #[serde(default)]
    pub net: TargetNet,
    /// Chat completions: send `ignore_eos: true` (vLLM, llama.cpp, the simulator), so the
    /// output length is `max_tokens` rather than wherever the model stops.
    #[serde(default)]
    pub ignore_eos: bool,
    /// Embedded simulator: a profile TOML file layered on `sim_profile` (absolute, resolved
    /// against the file that named it). Read when the run starts, not by the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_profile_file: Option<std::path::PathBuf>,
}

/// How a target is reached on the user's network: extra CA certificates, a client
/// certificate for mutual TLS, and the proxy choice. Paths are absolute (resolved against
/// the file that named them); the files are read when the run starts, not by the plan.
/// Never serializes key material or credentials, so it may be written to the manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetNet {
    /// PEM file of CA certificates trusted besides the system store and the bundled roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<std::path::PathBuf>,
    /// PEM certificate chain presented for mutual TLS (with `client_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<std::path::PathBuf>,
    /// PEM private key of `client_cert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<std::path::PathBuf>,
    /// `Some("none")`: never a proxy; `Some("http://host:port")`: this proxy; `None`: the
    /// environment decides (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// The `user:password` that `base_url` was written with (stripped from the URL, never
    /// sent, never serialized): only for the target's redaction set.
    #[serde(skip)]
    pub url_userinfo: Option<crate::vocab::redact::Withheld>,
}

/// One scripted session (a coding conversation).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionPlan {
    /// Index within the cell; warm-up sessions come first.
    pub index: u32,
    /// Excluded from statistics.
    pub warmup: bool,
    /// Intended start relative to the start of the session's phase: warm-up sessions all
    /// have 0; measured sessions count from the end of the warm-up phase (0 for closed loop,
    /// Poisson offsets for open loop).
    #[serde(with = "crate::units::serde_duration")]
    pub start_offset: Duration,
    /// The turns, in order; shared by every session with the same script.
    #[serde(with = "session_runs::arc_slice")]
    pub turns: Arc<[TurnPlan]>,
}

/// True when two scripts are the same (the same `Arc`, or equal turns).
pub fn same_script(a: &Arc<[TurnPlan]>, b: &Arc<[TurnPlan]>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

impl SessionPlan {
    /// Requests the session plans: one per turn plus one per tool call (at least 1). Under
    /// a request rate the session claims this many of the arrival process's instants.
    pub fn planned_requests(&self) -> u32 {
        build::planned_requests(&self.turns)
    }
}

/// One user turn; an agent-loop turn expands to several requests (one per tool call + 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnPlan {
    /// User message text (shared by every session that sends the same scenario turn).
    #[serde(with = "session_runs::arc_str")]
    pub user_text: Arc<str>,
    /// Think time before this turn is sent (after the previous turn ended).
    #[serde(with = "crate::units::serde_duration")]
    pub think_time: Duration,
    /// `max_output_tokens` / `max_tokens` for every request of the turn.
    pub max_output_tokens: u32,
    /// Tool calls the model is asked to make, in order, before its final answer.
    pub tool_calls: Vec<ToolCallPlan>,
    /// Simulator fault to inject on this turn's first request (`x-sim-fault` header), e.g.
    /// `status=500`, `stall=5s`, `reset-after=3`. Ignored by real endpoints.
    pub fault: Option<String>,
    /// The recorded final answer, resent as history in place of the replay's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl TurnPlan {
    /// Requests the turn sends: one per response that makes tool calls (parallel calls
    /// share theirs) plus the final answer.
    pub fn requests(&self) -> u32 {
        self.tool_calls.iter().filter(|c| !c.parallel).count() as u32 + 1
    }
}

/// A tool call in an agent loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPlan {
    /// Function name (`read_file`, `run_tests`, …).
    pub name: String,
    /// Simulated tool execution time (the client waits this long before answering).
    #[serde(with = "crate::units::serde_duration")]
    pub tool_time: Duration,
    /// Size of the tool output sent back, bytes.
    pub output_bytes: u32,
    /// Made in the same response as the call before it (parallel tool calls).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel: bool,
    /// Output length of the response that makes this call (default: the turn's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}
