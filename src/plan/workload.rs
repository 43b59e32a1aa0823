//! `[workload]` → session scripts: synthetic prompts sized to seeded token-length draws, or
//! conversations replayed from a dataset (OpenAI `messages` or ShareGPT `conversations`
//! per line; vLLM's ShareGPT JSON array in `sharegpt_json`; AIPerf's `single_turn`,
//! `multi_turn` and `mooncake_trace` lines in `aiperf`), sampled with the seed, or, for a
//! dataset with arrival instants (a trace), replayed in time order on its own schedule.
//!
//! Owns: the distributions (fixed, uniform, normal, lognormal, optional clamps), the sizing
//! rule (~4 characters per token), the synthetic text generator, dataset parsing with
//! `file:line` errors that list the formats read, a trace's start offsets
//! ([`Workload::replay_trace`]), and the record of the workload the plan keeps ([`WorkloadInfo`]).
//! Pure: the dataset's text arrives from `scenario::load`; nothing here reads a file.
//!
//! The drawn input length is the length of the *user message* a turn sends. The server's
//! reported prompt tokens add the system prompt, the chat template (the embedded simulator
//! adds one token per chat-completions message and none on the Responses API) and, from the
//! second turn on, the conversation so far.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::check::{PlanError, MAX_OUTPUT_TOKENS_LIMIT};
use super::{Load, SessionPlan, Sessions, TurnPlan, STREAM_DATASET, STREAM_WORKLOAD};
use crate::rng::Rng;
use crate::scenario::{DatasetFormat, DistKind, DistSpec, WorkloadSpec};

/// The sizing rule's name as the plan records it: tokens = ⌈characters / 4⌉.
pub const SIZING_CHARS_PER_TOKEN: &str = "chars/4";
/// Largest synthetic user message, tokens (1 MiB of text by the sizing rule).
pub const MAX_INPUT_TOKENS: u32 = 262_144;
/// Most synthetic turns per session.
pub const MAX_TURNS: u32 = 1000;
/// Most sessions a dataset provides when `[load] sessions` is not given.
const MAX_SESSIONS: u32 = 100_000;
/// Most prompt text a plan may hold, bytes (the plan, and the manifest, keep every prompt).
pub const MAX_PLANNED_TEXT: f64 = 256.0 * 1024.0 * 1024.0;
/// The dataset formats read, for error messages.
pub const FORMATS_READ: &str = "the formats read are: openai (JSONL, {\"messages\": [{\"role\", \"content\"}, …]}), sharegpt (JSONL, {\"conversations\": [{\"from\", \"value\"}, …]}), sharegpt-json (vLLM's ShareGPT file: one JSON array of such objects), aiperf-single-turn (JSONL, {\"text\": …, \"output_length\": N, \"timestamp\": ms}), aiperf-multi-turn (JSONL, {\"session_id\": …, \"turns\": [{\"text\": …, \"delay\": ms}, …]}), mooncake (JSONL, {\"timestamp\": ms, \"input_length\": N, \"output_length\": M, \"hash_ids\": […]})";

mod aiperf;
mod sharegpt_json;

/// Tokens of `text` by the sizing rule: ⌈characters / 4⌉, at least 1.
pub fn tokens_by_rule(text: &str) -> u32 {
    let chars = text.chars().count() as u64;
    chars.div_ceil(4).clamp(1, u64::from(u32::MAX)) as u32
}

/// What the plan records about a `[workload]` (`manifest.json` → `plan.workload`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// `synthetic` or `dataset`.
    #[serde(default)]
    pub kind: String,
    /// The rule that turned text into token counts: `chars/4` (~4 characters per token).
    #[serde(default)]
    pub sizing: String,
    /// The input distribution, resolved (`lognormal mean 2000 sd 600 (mu … sigma …) …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<String>,
    /// The output distribution, resolved; `None` when the lengths come from the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<String>,
    /// Synthetic turns per session (0 for a dataset).
    #[serde(default)]
    pub turns: u32,
    /// The dataset file, as resolved against the scenario's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// `sha256:<hex>` of the dataset file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_hash: Option<String>,
    /// Usable conversations in the dataset.
    #[serde(default)]
    pub conversations: u32,
    /// Conversations the run replays (`sample`, or all of them).
    #[serde(default)]
    pub sampled: u32,
    /// Dataset lines skipped as unusable (`skip_bad_lines = true`).
    #[serde(default)]
    pub skipped_lines: u32,
    /// Measured turns in the plan.
    #[serde(default)]
    pub measured_turns: u64,
    /// Mean user-message tokens of the measured turns, by `sizing` (to 3 decimals).
    #[serde(default)]
    pub mean_input_tokens: f64,
    /// Mean `max_output_tokens` of the measured turns (to 3 decimals).
    #[serde(default)]
    pub mean_output_tokens: f64,
}

impl WorkloadInfo {
    /// One line for the run's output: where the sessions came from and the planned means,
    /// to read beside the table's measured `tokens in/out`.
    pub fn line(&self) -> String {
        let from = match (&self.dataset, &self.input_tokens) {
            (Some(d), _) => format!(
                "dataset {d} ({} of {} conversations)",
                self.sampled, self.conversations
            ),
            (None, Some(i)) => format!("synthetic input {i}"),
            (None, None) => self.kind.clone(),
        };
        let out = self
            .output_tokens
            .as_ref()
            .map(|o| format!("; output {o}"))
            .unwrap_or_default();
        format!(
            "workload {from}{out}; planned mean {:.0} in / {:.0} out tokens per turn (user message, sized by {})",
            self.mean_input_tokens, self.mean_output_tokens, self.sizing
        )
    }
}

/// A validated token-length distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dist {
    kind: DistKind,
    /// `fixed`: value; `normal`/`lognormal`: mean.
    a: f64,
    /// `normal`/`lognormal`: sd.
    b: f64,
    lo: f64,
    hi: f64,
}

impl Dist {
    /// Validates `spec`; `what` names it in messages (`[workload] input_tokens at f:3:1`).
    pub fn new(spec: &DistSpec, what: &str, limit: u32) -> Result<Dist, PlanError> {
        let err = |m: String| Err(PlanError::new(format!("{what}: {m}")));
        let kind = spec.dist;
        let name = dist_name(kind);
        let given = [
            ("value", spec.value),
            ("mean", spec.mean),
            ("sd", spec.sd),
            ("min", spec.min),
            ("max", spec.max),
        ];
        let allowed: &[&str] = match kind {
            DistKind::Fixed => &["value"],
            DistKind::Uniform => &["min", "max"],
            DistKind::Normal | DistKind::Lognormal => &["mean", "sd", "min", "max"],
        };
        for (key, v) in given {
            match v {
                Some(_) if !allowed.contains(&key) => {
                    return err(format!(
                        "`{key}` does not apply to dist = \"{name}\"; it takes {}",
                        allowed.join(", ")
                    ))
                }
                Some(x) if !x.is_finite() => return err(format!("`{key}` is not a number")),
                _ => {}
            }
        }
        let need = |key: &str, v: Option<f64>| {
            v.ok_or_else(|| {
                PlanError::new(format!(
                    "{what}: dist = \"{name}\" needs `{key}`, e.g. {}",
                    example(kind)
                ))
            })
        };
        let limit = f64::from(limit);
        let (a, b, lo, hi) = match kind {
            DistKind::Fixed => {
                let v = need("value", spec.value)?.round();
                (v, 0.0, v, v)
            }
            DistKind::Uniform => {
                let lo = need("min", spec.min)?.round();
                (0.0, 0.0, lo, need("max", spec.max)?.round())
            }
            DistKind::Normal | DistKind::Lognormal => {
                let mean = need("mean", spec.mean)?;
                let sd = need("sd", spec.sd)?;
                if mean < 1.0 || sd < 0.0 {
                    return err(format!(
                        "mean {mean} / sd {sd}: the mean must be at least 1 and the sd at least 0"
                    ));
                }
                let lo = spec.min.unwrap_or(1.0).round().max(1.0);
                (mean, sd, lo, spec.max.unwrap_or(limit).round())
            }
        };
        if lo < 1.0 || hi > limit || lo > hi {
            return err(format!(
                "the lengths must lie within 1..{limit} tokens with min ≤ max (got {lo}..{hi})"
            ));
        }
        if kind != DistKind::Uniform && kind != DistKind::Fixed && (a > hi || a < lo) {
            return err(format!(
                "the mean {a} lies outside the clamps {lo}..{hi}; widen min/max"
            ));
        }
        Ok(Dist { kind, a, b, lo, hi })
    }

    /// The mean before clamping (the midpoint for `uniform`), tokens.
    pub fn expected(&self) -> f64 {
        match self.kind {
            DistKind::Uniform => (self.lo + self.hi) / 2.0,
            _ => self.a,
        }
    }

    /// One seeded draw, rounded to a whole number of tokens and clamped.
    pub fn draw(&self, rng: &mut Rng) -> u32 {
        let x = match self.kind {
            DistKind::Fixed => self.a,
            DistKind::Uniform => self.lo + rng.below((self.hi - self.lo) as u64 + 1) as f64,
            DistKind::Normal => self.a + self.b * rng.normal(),
            DistKind::Lognormal => {
                let (mu, sigma) = lognormal_params(self.a, self.b);
                (mu + sigma * rng.normal()).exp()
            }
        };
        x.round().clamp(self.lo, self.hi) as u32
    }

    /// `lognormal mean 2000 sd 600 (mu 7.557 sigma 0.294), clamped to 1..262144`.
    pub fn describe(&self) -> String {
        let clamp = format!("clamped to {}..{}", self.lo, self.hi);
        match self.kind {
            DistKind::Fixed => format!("fixed {}", self.a),
            DistKind::Uniform => format!("uniform {}..{}", self.lo, self.hi),
            DistKind::Normal => format!("normal mean {} sd {}, {clamp}", self.a, self.b),
            DistKind::Lognormal => {
                let (mu, sigma) = lognormal_params(self.a, self.b);
                format!(
                    "lognormal mean {} sd {} (mu {mu:.4} sigma {sigma:.4} of the log), {clamp}",
                    self.a, self.b
                )
            }
        }
    }
}

/// `mu` and `sigma` of the underlying normal of a log-normal whose own mean and sd are
/// `mean` and `sd`: σ² = ln(1 + sd²/mean²), μ = ln(mean) − σ²/2.
pub fn lognormal_params(mean: f64, sd: f64) -> (f64, f64) {
    let s2 = (1.0 + (sd / mean).powi(2)).ln();
    (mean.ln() - s2 / 2.0, s2.sqrt())
}

fn dist_name(k: DistKind) -> &'static str {
    match k {
        DistKind::Fixed => "fixed",
        DistKind::Uniform => "uniform",
        DistKind::Normal => "normal",
        DistKind::Lognormal => "lognormal",
    }
}

fn example(k: DistKind) -> &'static str {
    match k {
        DistKind::Fixed => "{ dist = \"fixed\", value = 500 }",
        DistKind::Uniform => "{ dist = \"uniform\", min = 100, max = 900 }",
        DistKind::Normal => "{ dist = \"normal\", mean = 300, sd = 50 }",
        DistKind::Lognormal => "{ dist = \"lognormal\", mean = 2000, sd = 600 }",
    }
}

/// Openers (no leading space, 4 letters: one token, four characters).
const OPENERS: [&str; 8] = [
    "Plan", "Read", "Make", "Take", "Show", "Find", "Keep", "List",
];
/// Words of 3, 7 and 11 letters: with their leading space, one, two and three tokens of
/// exactly four characters each under the simulator's rule and the sizing rule alike.
const WORDS: [&[&str]; 3] = [
    &[
        "the", "and", "for", "can", "use", "new", "add", "fix", "run", "get", "set", "map", "key",
        "row", "log", "api", "app", "bug", "end", "top", "way", "day", "any", "old", "own", "few",
        "big", "low", "far", "net", "raw", "sum", "max", "min", "hot", "dry", "tab", "cat", "dog",
        "sky",
    ],
    &[
        "request", "between", "process", "compile", "returns", "reading", "network", "display",
        "session", "channel", "element", "storage", "history", "summary", "counter", "measure",
        "balance", "package", "context", "capture", "current", "default", "extract", "feature",
        "general", "handler", "install", "library", "message", "monitor", "numbers", "pattern",
    ],
    &[
        "performance",
        "application",
        "description",
        "transaction",
        "environment",
        "development",
        "concurrency",
        "measurement",
        "temperature",
        "information",
        "calculation",
        "requirement",
        "distributed",
        "independent",
        "interactive",
        "significant",
    ],
];

/// Seeded filler text of exactly `n` tokens by the simulator's tokenizer and `4 n`
/// characters (so the sizing rule gives `n` too): an opener, then words of 3, 7 and 11
/// letters, each with its single leading space.
pub fn synthetic_text(rng: &mut Rng, n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 4);
    if n == 0 {
        return s;
    }
    s.push_str(OPENERS[rng.below(OPENERS.len() as u64) as usize]);
    push_words(&mut s, rng, n - 1);
    s
}

/// Appends words worth exactly `n` tokens to `s`, each with its leading space: mostly short
/// words, some long ones (3, 7 or 11 letters: 1, 2 or 3 tokens), never past the count.
fn push_words(s: &mut String, rng: &mut Rng, n: u32) {
    let mut left = n;
    while left > 0 {
        let u = rng.below(10);
        let want: u32 = if u < 5 {
            1
        } else if u < 9 {
            2
        } else {
            3
        };
        let k = want.min(left);
        let list = WORDS[k as usize - 1];
        s.push(' ');
        s.push_str(list[rng.below(list.len() as u64) as usize]);
        left -= k;
    }
}

/// A `[workload]`, validated and ready to script sessions.
#[derive(Debug, Clone)]
pub struct Workload {
    output: Option<Dist>,
    source: Source,
    info: WorkloadInfo,
    warnings: Vec<String>,
}

#[derive(Debug, Clone)]
enum Source {
    Synthetic {
        input: Dist,
        turns: u32,
    },
    Dataset {
        chosen: Vec<Conversation>,
        /// A trace: each chosen conversation's start offset (the first at 0), in order.
        arrivals: Option<Vec<Duration>>,
    },
}

/// One usable dataset line: its user turns and, for each, the token length of the
/// assistant reply that follows it in the file (`None`: no reply follows).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// 1-based line number in the file.
    pub line: usize,
    /// (user text, reply tokens).
    pub turns: Vec<(std::sync::Arc<str>, Option<u32>)>,
    /// The line had a system message (not replayed: the scenario's `system_prompt` is sent).
    pub had_system: bool,
    /// When the trace starts it, ms from the trace's start (AIPerf `timestamp`/`delay`).
    pub arrival: Option<f64>,
    /// Think time before each turn (AIPerf `multi_turn` `delay`); empty: none.
    pub delays: Vec<Duration>,
}

/// A synthetic `[workload]`: its input-token distribution and turns per session, checked.
fn synthetic(
    w: &WorkloadSpec,
    d: &DistSpec,
    at: &dyn Fn(&str) -> String,
    info: &mut WorkloadInfo,
) -> Result<Source, PlanError> {
    let input = Dist::new(
        d,
        &format!("[workload] input_tokens at {}", at("input_tokens")),
        MAX_INPUT_TOKENS,
    )?;
    let turns = w.turns.unwrap_or(1);
    if !(1..=MAX_TURNS).contains(&turns) {
        return Err(PlanError::new(format!(
            "[workload] turns at {} is {turns}; use 1 to {MAX_TURNS} turns per session",
            at("turns")
        )));
    }
    for key in ["format", "sample", "skip_bad_lines"] {
        let set = match key {
            "format" => w.format.is_some(),
            "sample" => w.sample.is_some(),
            _ => w.skip_bad_lines.is_some(),
        };
        if set {
            return Err(PlanError::new(format!(
                "[workload] `{key}` at {} applies to a `dataset` only; remove it",
                at(key)
            )));
        }
    }
    info.kind = "synthetic".into();
    info.input_tokens = Some(input.describe());
    info.turns = turns;
    Ok(Source::Synthetic { input, turns })
}

/// A dataset `[workload]`: its usable conversations (bad lines skipped only when allowed)
/// and the seeded sample of them that the sessions replay.
fn dataset(
    w: &WorkloadSpec,
    name: &str,
    seed: u64,
    at: &dyn Fn(&str) -> String,
    info: &mut WorkloadInfo,
    warnings: &mut Vec<String>,
) -> Result<Source, PlanError> {
    if w.turns.is_some() {
        return Err(PlanError::new(format!(
            "[workload] `turns` at {} is for synthetic workloads; a dataset session replays every user turn of its conversation",
            at("turns")
        )));
    }
    let Some(src) = &w.dataset_source else {
        return Err(PlanError::new(format!(
            "[workload] dataset {name:?} at {} was not read (load the scenario with scenario::load)",
            at("dataset")
        )));
    };
    let skip = w.skip_bad_lines.unwrap_or(false);
    let (convs, bad, dropped) = read_dataset(&src.path, &src.text, w.format, skip)?;
    if convs.is_empty() {
        return Err(PlanError::new(format!(
            "{}: no usable conversation ({} bad lines, {} conversations without a human turn and its reply); {FORMATS_READ}",
            src.path,
            bad.len(),
            dropped.len()
        )));
    }
    if let Some(first) = dropped.first() {
        warnings.push(format!(
            "left out {} of {} conversations of the ShareGPT JSON array, as vLLM does (each replays its first human turn, capped at the length of the gpt reply after it); the first: {first}",
            dropped.len(),
            dropped.len() + convs.len()
        ));
    }
    if let Some(first) = bad.first() {
        warnings.push(format!(
            "skipped {} bad line(s) of the dataset (skip_bad_lines = true); the first: {first}",
            bad.len()
        ));
    }
    let sample = w.sample.unwrap_or(convs.len() as u32);
    if sample == 0 || sample as usize > convs.len() {
        return Err(PlanError::new(format!(
            "[workload] sample at {} is {sample}, but {} has {} usable conversations; use 1 to {}, or remove `sample` to replay them all",
            at("sample"),
            src.path,
            convs.len(),
            convs.len()
        )));
    }
    let systems = convs.iter().filter(|c| c.had_system).count();
    if systems > 0 {
        warnings.push(format!(
            "{systems} dataset conversation(s) have a system message; it is not replayed (every request sends the scenario's system_prompt)"
        ));
    }
    info.kind = "dataset".into();
    info.dataset = Some(src.path.clone());
    info.dataset_hash = Some(format!(
        "sha256:{}",
        Sha256::digest(src.text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ));
    info.conversations = convs.len() as u32;
    info.sampled = sample;
    info.skipped_lines = bad.len() as u32;
    if convs.iter().any(|c| c.arrival.is_some()) {
        return trace(convs, sample as usize, &src.path, warnings);
    }
    let mut rng = Rng::derive(seed, STREAM_DATASET);
    let mut order: Vec<usize> = (0..convs.len()).collect();
    // Partial Fisher–Yates: the first `sample` places are a seeded sample.
    for i in 0..sample as usize {
        let j = i + rng.below((order.len() - i) as u64) as usize;
        order.swap(i, j);
    }
    let chosen = order[..sample as usize]
        .iter()
        .map(|&i| convs[i].clone())
        .collect();
    Ok(Source::Dataset {
        chosen,
        arrivals: None,
    })
}

/// A dataset whose lines carry arrival instants: its first `sample` conversations in time
/// order, each starting at its offset from the first (every line must have one).
fn trace(
    mut convs: Vec<Conversation>,
    sample: usize,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<Source, PlanError> {
    if let Some(c) = convs.iter().find(|c| c.arrival.is_none()) {
        return Err(PlanError::new(format!(
            "{path}:{}: no `timestamp` or `delay`, while other lines of the trace have one; give every line its arrival (ms), or none to replay the file without a schedule",
            c.line
        )));
    }
    let ms = |c: &Conversation| c.arrival.unwrap_or(0.0);
    convs.sort_by(|a, b| ms(a).total_cmp(&ms(b)));
    convs.truncate(sample);
    let t0 = convs.first().map_or(0.0, ms);
    let arrivals: Vec<Duration> = convs.iter().map(|c| ms_duration(ms(c) - t0)).collect();
    warnings.push(format!(
        "trace replay: {} sessions start at the dataset's arrival instants (over {:.3} s), the first {} in time order",
        convs.len(),
        arrivals.last().map_or(0.0, Duration::as_secs_f64),
        convs.len()
    ));
    Ok(Source::Dataset {
        chosen: convs,
        arrivals: Some(arrivals),
    })
}

/// `ms` milliseconds, to the nearest nanosecond.
fn ms_duration(ms: f64) -> Duration {
    Duration::from_nanos((ms * 1e6).round().max(0.0) as u64)
}

/// What [`read_dataset`] read: the conversations, the bad lines skipped and the array's
/// elements left out by vLLM's rule.
pub type DatasetRead = (Vec<Conversation>, Vec<String>, Vec<String>);

/// A dataset file in any format read: vLLM's ShareGPT JSON array (declared, or detected by
/// its opening `[`), else JSONL.
pub fn read_dataset(
    path: &str,
    text: &str,
    format: Option<DatasetFormat>,
    skip: bool,
) -> Result<DatasetRead, PlanError> {
    let array = text.trim_start().starts_with('[');
    match format {
        Some(DatasetFormat::SharegptJson) => {}
        None | Some(DatasetFormat::Sharegpt) if array => {}
        _ => {
            let (c, bad) = parse_dataset(path, text, format, skip)?;
            return Ok((c, bad, Vec::new()));
        }
    }
    let (c, dropped) = sharegpt_json::parse(path, text)?;
    Ok((c, Vec::new(), dropped))
}

impl Workload {
    /// Validates `w`. `at(key)` locates a `[workload]` key for messages.
    pub fn new(
        w: &WorkloadSpec,
        seed: u64,
        at: &dyn Fn(&str) -> String,
    ) -> Result<Self, PlanError> {
        let output = w
            .output_tokens
            .as_ref()
            .map(|d| {
                Dist::new(
                    d,
                    &format!("[workload] output_tokens at {}", at("output_tokens")),
                    MAX_OUTPUT_TOKENS_LIMIT,
                )
            })
            .transpose()?;
        let mut info = WorkloadInfo {
            sizing: SIZING_CHARS_PER_TOKEN.to_string(),
            output_tokens: output.as_ref().map(Dist::describe),
            ..Default::default()
        };
        let mut warnings = Vec::new();
        let source = match (&w.dataset, &w.input_tokens) {
            (Some(_), Some(_)) => {
                return Err(PlanError::new(format!(
                    "[workload] at {} has both `dataset` and `input_tokens`; the dataset's user messages are the input, so keep one",
                    at("input_tokens")
                )))
            }
            (None, None) => {
                return Err(PlanError::new(format!(
                    "[workload] at {} has neither `input_tokens` nor `dataset`; add e.g. input_tokens = {{ dist = \"lognormal\", mean = 2000, sd = 600 }} or dataset = \"data/sample-sharegpt.jsonl\"",
                    at("input_tokens")
                )))
            }
            (None, Some(d)) => synthetic(w, d, at, &mut info)?,
            (Some(name), None) => dataset(w, name, seed, at, &mut info, &mut warnings)?,
        };
        Ok(Workload {
            output,
            source,
            info,
            warnings,
        })
    }

    /// Sessions the workload provides on its own: a dataset's sampled conversations.
    pub fn natural_sessions(&self) -> Option<u32> {
        match &self.source {
            Source::Dataset { chosen, .. } => Some((chosen.len() as u32).min(MAX_SESSIONS)),
            Source::Synthetic { .. } => None,
        }
    }

    /// Refuses a plan whose prompts would not fit comfortably in memory and the manifest:
    /// the expected user-message text of `sessions` sessions (warm-up included) must stay
    /// under [`MAX_PLANNED_TEXT`].
    pub fn check_size(&self, sessions: u32) -> Result<(), PlanError> {
        let per_session = match &self.source {
            Source::Synthetic { input, turns } => input.expected() * 4.0 * f64::from(*turns),
            Source::Dataset { chosen, .. } => {
                let bytes: usize = chosen
                    .iter()
                    .flat_map(|c| c.turns.iter().map(|t| t.0.len()))
                    .sum();
                bytes as f64 / chosen.len().max(1) as f64
            }
        };
        let total = per_session * f64::from(sessions);
        if total > MAX_PLANNED_TEXT {
            return Err(PlanError::new(format!(
                "this [workload] plans about {:.0} MiB of prompt text for {sessions} sessions (at most {:.0} MiB); lower the sessions, the turns or the input lengths",
                total / 1024.0 / 1024.0,
                MAX_PLANNED_TEXT / 1024.0 / 1024.0
            )));
        }
        Ok(())
    }

    /// A trace's schedule: sets each measured session's start offset to its conversation's
    /// arrival (warm-up sessions, a rate, an interval or a duration would move them, so they
    /// are refused) and, unless `[load] concurrency` was given, lets every session run at
    /// once so that none waits for a slot. Nothing for other workloads.
    pub fn replay_trace(
        &self,
        load: &mut Load,
        concurrency_given: bool,
        sessions: &mut Sessions,
    ) -> Result<(), PlanError> {
        let Source::Dataset {
            arrivals: Some(arrivals),
            ..
        } = &self.source
        else {
            return Ok(());
        };
        let clash = [
            (load.rate.is_some(), "rate"),
            (load.session_interval.is_some(), "session_interval"),
            (load.warmup_sessions > 0, "warmup_sessions"),
            (load.warmup_duration.is_some(), "warmup"),
            (load.duration.is_some(), "duration"),
            (load.sessions as usize > arrivals.len(), "sessions"),
        ];
        if let Some((_, key)) = clash.iter().find(|c| c.0) {
            return Err(PlanError::new(format!(
                "the dataset is a trace ({} sessions with arrival instants), which is its own schedule; remove `{key}` from [load] (and its flag), or use `sample` to replay the first N of the trace",
                arrivals.len()
            )));
        }
        // A trace has one session per line at most, so its sessions are listed explicitly
        // (each with its own start offset).
        let mut listed: Vec<SessionPlan> = sessions.to_vec();
        for s in listed.iter_mut().filter(|s| !s.warmup) {
            s.start_offset = arrivals[s.index as usize % arrivals.len()];
        }
        *sessions = Sessions::from_sessions(listed);
        if !concurrency_given {
            load.concurrency = load.sessions.clamp(1, 10_000);
        }
        Ok(())
    }

    /// Warnings for the plan (skipped lines, dropped system messages).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Session `session`'s turns: its own seeded draws (synthetic), or sampled conversation
    /// `session mod sampled` (dataset). `default_max` sizes a dataset turn no reply follows.
    pub fn turns(&self, seed: u64, session: u32, default_max: u32) -> Vec<TurnPlan> {
        let mut rng = Rng::derive(seed, STREAM_WORKLOAD + u64::from(session));
        let turn = |user_text: std::sync::Arc<str>, max: u32| TurnPlan {
            user_text,
            think_time: Duration::ZERO,
            max_output_tokens: max.clamp(1, MAX_OUTPUT_TOKENS_LIMIT),
            tool_calls: Vec::new(),
            fault: None,
            answer: None,
        };
        match &self.source {
            Source::Synthetic { input, turns } => (0..*turns)
                .map(|_| {
                    let n = input.draw(&mut rng);
                    let max = self.output.map_or(default_max, |d| d.draw(&mut rng));
                    turn(synthetic_text(&mut rng, n).into(), max)
                })
                .collect(),
            Source::Dataset { chosen, .. } => {
                let c = &chosen[session as usize % chosen.len()];
                c.turns
                    .iter()
                    .enumerate()
                    .map(|(k, (text, reply))| {
                        let max = match self.output {
                            Some(d) => d.draw(&mut rng),
                            None => reply.unwrap_or(default_max),
                        };
                        TurnPlan {
                            think_time: c.delays.get(k).copied().unwrap_or_default(),
                            ..turn(text.clone(), max)
                        }
                    })
                    .collect()
            }
        }
    }

    /// The record for the plan, with the means of the measured sessions' turns.
    pub fn info(&self, sessions: &Sessions) -> WorkloadInfo {
        let mut info = self.info.clone();
        // Streamed: one session's turns at a time, summed in the order a list would be.
        let (mut count, mut input, mut output) = (0u64, 0.0f64, 0.0f64);
        for s in sessions.iter().filter(|s| !s.warmup) {
            for t in s.turns.iter() {
                count += 1;
                input += f64::from(tokens_by_rule(&t.user_text));
                output += f64::from(t.max_output_tokens);
            }
        }
        let n = count.max(1) as f64;
        // Three decimals: enough, and a short decimal survives the manifest's JSON exactly.
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        info.measured_turns = count;
        info.mean_input_tokens = round(input / n);
        info.mean_output_tokens = round(output / n);
        info
    }
}

/// Parses a JSONL dataset: the usable conversations and, when `skip` is set, a message per
/// skipped line (`path:line: what`); otherwise the first bad line is the error.
pub fn parse_dataset(
    path: &str,
    text: &str,
    format: Option<DatasetFormat>,
    skip: bool,
) -> Result<(Vec<Conversation>, Vec<String>), PlanError> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    let mut state = aiperf::State::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match parse_line(line, i + 1, format, &mut state) {
            Ok(c) => out.push(c),
            Err(what) => {
                let msg = format!("{path}:{}: {what}", i + 1);
                if !skip {
                    return Err(PlanError::new(format!(
                        "{msg}; {FORMATS_READ}; fix the line, set `format` in [workload] to the one the file is written in, or set skip_bad_lines = true to skip such lines (they are counted in a warning)"
                    )));
                }
                bad.push(msg);
            }
        }
    }
    Ok((out, bad))
}

enum Role {
    User,
    Assistant,
    System,
    Tool,
}

fn parse_line(
    line: &str,
    n: usize,
    format: Option<DatasetFormat>,
    state: &mut aiperf::State,
) -> Result<Conversation, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| {
        let array = if line.starts_with('[') {
            "; a JSON array is read as a whole file only (vLLM's ShareGPT file: format = \"sharegpt-json\")"
        } else {
            ""
        };
        format!("not valid JSON ({e}){array}")
    })?;
    parse_value(&v, n, format, state)
}

/// One conversation object (a JSONL line, or an element of the ShareGPT array).
fn parse_value(
    v: &Value,
    n: usize,
    format: Option<DatasetFormat>,
    state: &mut aiperf::State,
) -> Result<Conversation, String> {
    let obj = v
        .as_object()
        .ok_or("not a JSON object; write one conversation object per line")?;
    let fmt = match format {
        Some(f) => f,
        None if obj.contains_key("messages") => DatasetFormat::Openai,
        None if obj.contains_key("conversations") => DatasetFormat::Sharegpt,
        None => aiperf::detect(obj).ok_or(
            "has none of the keys that tell a format read (`messages`, `conversations`, `turns`, `input_length`/`hash_ids`, `text`/`texts`)",
        )?,
    };
    let (list_key, role_key, text_key) = match fmt {
        DatasetFormat::Openai => ("messages", "role", "content"),
        DatasetFormat::Sharegpt | DatasetFormat::SharegptJson => ("conversations", "from", "value"),
        _ => return aiperf::parse(obj, n, fmt, state),
    };
    let list = obj
        .get(list_key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no `{list_key}` array (format = \"{}\")", fmt.as_str()))?;
    let mut conv = Conversation {
        line: n,
        turns: Vec::new(),
        had_system: false,
        arrival: None,
        delays: Vec::new(),
    };
    // Whether the last user turn already has its reply.
    let mut answered = true;
    for (k, m) in list.iter().enumerate() {
        let who = m
            .get(role_key)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{list_key}[{k}] has no string `{role_key}`"))?;
        let role = match who.to_ascii_lowercase().as_str() {
            "user" | "human" => Role::User,
            "assistant" | "gpt" | "chatgpt" | "model" | "bard" | "bing" => Role::Assistant,
            "system" => Role::System,
            "tool" | "function" | "ipython" => Role::Tool,
            _ => {
                return Err(format!(
                    "{list_key}[{k}] has {role_key} {who:?}; use user/human, assistant/gpt, system or tool"
                ))
            }
        };
        let text = match m.get(text_key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) if fmt == DatasetFormat::Openai => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            Some(_) => return Err(format!("{list_key}[{k}].{text_key} is not a string")),
        };
        match role {
            Role::User => {
                if text.trim().is_empty() {
                    return Err(format!("{list_key}[{k}] is an empty user message"));
                }
                conv.turns.push((text.into(), None));
                answered = false;
            }
            Role::Assistant if !answered && !text.is_empty() => {
                if let Some(last) = conv.turns.last_mut() {
                    last.1 = Some(tokens_by_rule(&text));
                }
                answered = true;
            }
            Role::System => conv.had_system = true,
            Role::Assistant | Role::Tool => {}
        }
    }
    if conv.turns.is_empty() {
        return Err(format!("no user message in `{list_key}`"));
    }
    Ok(conv)
}

#[cfg(test)]
mod tests;
