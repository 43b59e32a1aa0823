//! The scenario TOML schema. Every table denies unknown keys, so a typo is an error with a
//! location and a suggestion instead of a silently ignored setting.
//!
//! Owns: the shape of `scenarios/*.toml` and `targets/*.toml` and field defaults that are
//! pure data. Does not own: validation across fields or resolution (see `plan`), nor the
//! `[load]` table's keys (`knobs`, shared with the `run` flags).
//! Every key is documented in `scenarios/README.md`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::link::Link;
use crate::vocab::{ApiFlavour, TransportKind};

/// A scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name; used in run ids (`20261122-215802-snake-0a1f`).
    pub name: String,
    /// One or two sentences for reports.
    #[serde(default)]
    pub description: String,
    /// Master seed for everything random in the plan and the simulator. Default 1.
    pub seed: Option<u64>,
    /// System prompt / instructions sent with every request.
    #[serde(default)]
    pub system_prompt: String,
    /// Appends this many bytes of deterministic, code-like repository context to the system
    /// prompt (a long-context workload without pasting a repository into the file).
    pub context_bytes: Option<u32>,
    /// Default `max_output_tokens` for every turn. Default 1024.
    pub max_output_tokens: Option<u32>,
    /// Emulated link for embedded-simulator targets, e.g. `rtt=40ms,jitter=2ms`. Default `rtt=40ms`.
    pub link: Option<LinkSpec>,
    /// Load shape: `[load]`, the same knobs as `run`'s load flags.
    #[serde(default)]
    pub load: super::knobs::LoadKnobs,
    /// Which targets and transports to run.
    #[serde(default)]
    pub matrix: MatrixSpec,
    /// The conversation every session replays (with `[[sessions]]`: session 1's).
    #[serde(default)]
    pub turns: Vec<TurnSpec>,
    /// Further conversations, one per session (`spark-bench record` writes one per recorded
    /// session after the first): session 1 sends `[[turns]]`, session k+1 sends
    /// `sessions[k-1]`, and so on round; `[load] sessions` = 1 + their count replays each
    /// once.
    #[serde(default)]
    pub sessions: Vec<SessionSpec>,
    /// Target definitions (or overrides of built-in targets' fields).
    #[serde(default)]
    pub targets: BTreeMap<String, TargetSpec>,
    /// Thresholds for `spark-bench compare` (free-form, e.g. `ttft = "+10%"`).
    #[serde(default)]
    pub gate: BTreeMap<String, String>,
    /// Synthetic token-length distributions or a dataset, instead of `[[turns]]`.
    pub workload: Option<super::workload::WorkloadSpec>,
    /// Service-level objectives for goodput (`ttft = "500ms"`, `tpot = "p90<=20ms"`).
    #[serde(default)]
    pub slo: SloSpec,
}

/// `[slo]`: each key a per-request limit (`"500ms"`) or a percentile the load point must
/// meet (`"p90<=500ms"`); see `plan::slo`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloSpec {
    /// Time to first token, from the intended start.
    pub ttft: Option<String>,
    /// Time per output token after the first.
    pub tpot: Option<String>,
    /// Intended start to the last content token.
    pub e2e: Option<String>,
}

/// `[matrix]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixSpec {
    /// Target names. Default `["sim-gpu", "sim-wafer"]`.
    pub targets: Option<Vec<String>>,
    /// Transports. Default all four.
    pub transports: Option<Vec<TransportKind>>,
}

/// One `[[sessions]]` entry: a further session's conversation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// Its turns (`[[sessions.turns]]`), as `[[turns]]`.
    #[serde(default)]
    pub turns: Vec<TurnSpec>,
}

/// One `[[turns]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnSpec {
    /// The user's message.
    pub prompt: String,
    /// Pause before sending this turn (after the previous one ended). Default 0.
    pub think_time: Option<Dur>,
    /// Output cap for this turn's requests (default: the scenario's).
    pub max_output_tokens: Option<u32>,
    /// Simulator fault for the turn's first request (`status=500`, `stall=5s`, …).
    pub fault: Option<String>,
    /// Explicit tool calls the model makes before answering.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallSpec>,
    /// Compact agent loop: expands into `calls` tool calls (seeded order).
    pub agent: Option<AgentSpec>,
    /// Send this turn this many times in a row (default 1).
    pub repeat: Option<u32>,
    /// The assistant's final answer as recorded (`spark-bench record` writes it): the history
    /// later requests resend carries this text in place of the replay's own answer, so a
    /// replay sends the recorded conversation.
    pub answer: Option<String>,
}

/// One `tool_calls` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    /// Function name.
    pub name: String,
    /// Simulated tool run time. Default 0.
    pub tool_time: Option<Dur>,
    /// Tool output size sent back. Default 1024.
    pub output_bytes: Option<u32>,
    /// Made in the same response as the entry before it (parallel tool calls): one request
    /// asks for all the calls of the group, and their results go back together. Default false.
    pub parallel: Option<bool>,
    /// Output length of the response that makes this call (default: the turn's).
    pub max_output_tokens: Option<u32>,
}

/// `agent = { … }`: an agent loop in one line.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Number of tool calls.
    pub calls: u32,
    /// Tool names to draw from (seeded, uniform).
    pub tools: Vec<String>,
    /// Simulated run time of every call. Default 0.
    pub tool_time: Option<Dur>,
    /// Output size of every call. Default 1024.
    pub output_bytes: Option<u32>,
}

/// `[targets.NAME]`: a backend, or field overrides for a built-in one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// `https://api.openai.com/v1`; absent for the embedded simulator.
    pub base_url: Option<String>,
    /// `responses` or `chat-completions`.
    pub api: Option<ApiFlavour>,
    /// Model name sent in requests.
    pub model: Option<String>,
    /// Environment variable holding the API key (never the key).
    pub api_key_env: Option<String>,
    /// Hardware label for reports.
    pub hardware: Option<String>,
    /// Extra request headers (no credentials: use `api_key_env`).
    pub headers: Option<BTreeMap<String, String>>,
    /// Responses API over HTTP: chain with `store=true` + `previous_response_id`.
    pub store: Option<bool>,
    /// `generate:false` warm-up on each new WebSocket.
    pub ws_warmup: Option<bool>,
    /// Ask for server timing headers.
    pub request_timing: Option<bool>,
    /// Per-request deadline.
    pub request_timeout: Option<Dur>,
    /// No-byte stall limit.
    pub stall_timeout: Option<Dur>,
    /// Embedded-simulator profile (`gpu`, `wafer`, `cpu`) when there is no `base_url`.
    pub sim_profile: Option<String>,
    /// Transports this target supports (default: all four for `responses`, no `ws` for
    /// `chat-completions`).
    pub transports: Option<Vec<TransportKind>>,
    /// This target's prefix-cache mode (overrides `[load] cache`).
    pub cache: Option<crate::vocab::CacheMode>,
    /// PEM file of extra CA certificates (relative to this file's folder).
    pub ca_file: Option<String>,
    /// PEM client certificate chain for mutual TLS (relative to this file's folder).
    pub client_cert: Option<String>,
    /// PEM private key of `client_cert` (relative to this file's folder).
    pub client_key: Option<String>,
    /// `"http://host:port"` or `"none"`; overrides `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`.
    pub proxy: Option<String>,
    /// Chat completions: send `ignore_eos: true` so the server generates `max_tokens`.
    pub ignore_eos: Option<bool>,
    /// A simulator profile TOML file (relative to this file's folder), layered on
    /// `sim_profile` (or the file's own `base`); read when the run starts.
    pub sim_profile_file: Option<String>,
}

/// A `--targets FILE`: only `[targets.NAME]` tables.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetsFile {
    /// Where it was read from (for messages); set by the loader, not a TOML key.
    #[serde(skip)]
    pub path: String,
    /// The targets.
    #[serde(default)]
    pub targets: BTreeMap<String, TargetSpec>,
}

/// A duration written as a string: `"40ms"`, `"1.5s"`, `"2m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"3s\", \"250ms\" or \"1.5s\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Dur, E> {
                humantime::parse_duration(s.trim()).map(Dur).map_err(|e| {
                    E::custom(format!(
                        "bad duration {s:?} ({e}); write it like \"40ms\", \"1.5s\", \"2m\" or \"250us\""
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// A `Dur` key read straight into an `Option<Duration>` (for `#[serde(deserialize_with)]`,
/// with `default`): the same messages as a `Dur` field.
pub(super) fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Ok(Option::<Dur>::deserialize(d)?.map(|d| d.0))
}

/// A link spec string, parsed with [`Link`]'s parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSpec(pub Link);

impl<'de> Deserialize<'de> for LinkSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LinkSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a link string such as \"rtt=40ms,jitter=2ms,bandwidth=100mbit\" or \"none\"",
                )
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<LinkSpec, E> {
                s.parse::<Link>()
                    .map(LinkSpec)
                    .map_err(|e| E::custom(e.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}
