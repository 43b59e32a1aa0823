//! What plan building and its parts share: the error type, where a key sits in the
//! scenario file (for messages), and the checks of single values and `[[turns]]` entries.
//!
//! Owns: [`PlanError`], `Src`, the output-token limit, and the per-value checks with their
//! messages. A leaf: it imports no other part of `plan`, so `build`, `load`, `workload` and
//! `targets` all use it without importing each other.
//! Does not own: validation across fields (`build`, `load`) or any default.

use std::time::Duration;

use crate::scenario::TurnSpec;

/// Largest `max_output_tokens` accepted.
pub const MAX_OUTPUT_TOKENS_LIMIT: u32 = 131_072;

/// A plan that cannot be built; the message names the key or flag and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    /// What is wrong and how to fix it.
    pub message: String,
}

impl PlanError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
        }
    }
}

/// The scenario file: its path, and its text for locating keys in messages.
pub(super) struct Src<'a> {
    /// The path as given.
    pub(super) path: &'a str,
    /// The file's text.
    pub(super) text: std::borrow::Cow<'a, str>,
}

impl Src<'_> {
    /// `path:line:col` of `key` in `table` (entry `entry`), or the path alone.
    pub(super) fn at(&self, table: Option<&str>, entry: usize, key: &str) -> String {
        match crate::scenario::locate(&self.text, table, entry, key) {
            Some((line, col)) => format!("{}:{line}:{col}", self.path),
            None => self.path.to_string(),
        }
    }
}

pub(super) fn check_max_tokens(n: u32, what: &str) -> Result<(), PlanError> {
    if (1..=MAX_OUTPUT_TOKENS_LIMIT).contains(&n) {
        Ok(())
    } else {
        Err(PlanError::new(format!(
            "{what} is {n}; use 1 to {MAX_OUTPUT_TOKENS_LIMIT}, e.g. 1024"
        )))
    }
}

pub(super) fn check_duration(
    d: Option<Duration>,
    max: Duration,
    what: &str,
    example: &str,
) -> Result<(), PlanError> {
    match d {
        Some(d) if d > max => Err(PlanError::new(format!(
            "{what} is {}; keep it at most {}, e.g. \"{example}\"",
            crate::units::fmt_duration_spec(d),
            crate::units::fmt_duration_spec(max)
        ))),
        _ => Ok(()),
    }
}

/// The most requests one session's script may plan (the turns with `repeat` unrolled, each
/// agent loop's tool-result requests counted): a session's plan is built whole when it
/// starts, and `repeat = 1000` with `agent.calls = 1000` would be a million requests, over
/// 1 GB of plan, per session in flight.
pub const MAX_REQUESTS_PER_SESSION: u64 = 10_000;

/// Refuses a script of more than [`MAX_REQUESTS_PER_SESSION`] requests before any plan is
/// built, naming the keys that multiply.
pub(super) fn check_session_size(turns: &[TurnSpec], file: &str) -> Result<(), PlanError> {
    let requests: u64 = turns
        .iter()
        .map(|t| {
            let calls = match &t.agent {
                Some(a) => u64::from(a.calls),
                None => t.tool_calls.len() as u64,
            };
            u64::from(t.repeat.unwrap_or(1)) * (1 + calls)
        })
        .sum();
    if requests > MAX_REQUESTS_PER_SESSION {
        return Err(PlanError::new(format!(
            "{file}: one session plans {requests} requests (the sum over [[turns]] of repeat × (1 + agent.calls or the tool_calls listed)); the limit is {MAX_REQUESTS_PER_SESSION} per session (docs/hostile-servers.md, Limits): lower repeat or agent.calls, or run more sessions"
        )));
    }
    Ok(())
}

pub(super) fn check_turn(t: &TurnSpec, n: usize, src: &Src) -> Result<(), PlanError> {
    let at = |key: &str| {
        format!(
            "[[turns]] entry {n} at {}",
            src.at(Some("[[turns]]"), n, key)
        )
    };
    if t.prompt.trim().is_empty() {
        return Err(PlanError::new(format!(
            "{}: `prompt` is empty; write the user's message",
            at("prompt")
        )));
    }
    if let Some(m) = t.max_output_tokens {
        check_max_tokens(
            m,
            &format!("{}: `max_output_tokens`", at("max_output_tokens")),
        )?;
    }
    check_duration(
        t.think_time.map(|d| d.0),
        Duration::from_secs(3600),
        &format!("{}: `think_time`", at("think_time")),
        "3s",
    )?;
    if t.agent.is_some() && !t.tool_calls.is_empty() {
        return Err(PlanError::new(format!("{}: has both `tool_calls` and `agent`; keep one (agent is the compact form of tool_calls)", at("agent"))));
    }
    for (i, c) in t.tool_calls.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(PlanError::new(format!(
                "{}: tool_calls[{i}] has an empty `name`, e.g. name = \"read_file\"",
                at("tool_calls")
            )));
        }
        check_duration(
            c.tool_time.map(|d| d.0),
            Duration::from_secs(600),
            &format!("{}: tool_calls[{i}].tool_time", at("tool_calls")),
            "300ms",
        )?;
        check_output_bytes(
            c.output_bytes,
            &format!("{}: tool_calls[{i}].output_bytes", at("tool_calls")),
        )?;
        if i == 0 && c.parallel == Some(true) {
            return Err(PlanError::new(format!(
                "{}: tool_calls[0] has `parallel = true`, but no call before it to share a response with",
                at("tool_calls")
            )));
        }
    }
    if let Some(a) = &t.agent {
        if !(1..=1000).contains(&a.calls) {
            return Err(PlanError::new(format!(
                "{}: agent.calls is {}; use 1 to 1000",
                at("agent"),
                a.calls
            )));
        }
        if a.tools.is_empty() || a.tools.iter().any(|x| x.trim().is_empty()) {
            return Err(PlanError::new(format!(
                "{}: agent.tools must list tool names, e.g. tools = [\"read_file\", \"run_tests\"]",
                at("agent")
            )));
        }
        check_duration(
            a.tool_time.map(|d| d.0),
            Duration::from_secs(600),
            &format!("{}: agent.tool_time", at("agent")),
            "300ms",
        )?;
        check_output_bytes(
            a.output_bytes,
            &format!("{}: agent.output_bytes", at("agent")),
        )?;
    }
    if let Some(r) = t.repeat {
        if !(1..=1000).contains(&r) {
            return Err(PlanError::new(format!(
                "{}: `repeat` is {r}; use 1 to 1000",
                at("repeat")
            )));
        }
    }
    if t.fault.as_deref().is_some_and(|f| f.trim().is_empty()) {
        return Err(PlanError::new(format!(
            "{}: `fault` is empty; remove it or write e.g. \"status=500\"",
            at("fault")
        )));
    }
    Ok(())
}

pub(super) fn check_output_bytes(b: Option<u32>, what: &str) -> Result<(), PlanError> {
    match b {
        Some(b) if b > 16 * 1024 * 1024 => Err(PlanError::new(format!(
            "{what} is {b}; keep it at most 16777216 (16 MiB)"
        ))),
        _ => Ok(()),
    }
}
