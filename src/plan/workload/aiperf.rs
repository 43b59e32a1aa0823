//! AIPerf's custom dataset lines: `single_turn`, `multi_turn` and `mooncake_trace` JSONL.
//!
//! Owns: detecting them by their keys, each line → [`Conversation`] (prompts, output
//! lengths, arrival instants, think times between turns), and the synthetic text that stands
//! in for a trace's prompt: `input_length` tokens made of one block per `hash_ids` entry
//! ([`BLOCK_TOKENS`] each, AIPerf's default block size), the same id giving the same text,
//! so a prefix cache sees the trace's shared prefixes. Pure; seeded by the ids and line
//! numbers only (a trace's content does not change with the scenario's seed).
//! Does not own: sampling, the schedule (`plan::workload`, `plan::build`).

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

use super::{Conversation, MAX_INPUT_TOKENS};
use crate::rng::Rng;
use crate::scenario::DatasetFormat;

/// Tokens per `hash_ids` block (AIPerf's `--isl-block-size` default, Mooncake's too).
pub const BLOCK_TOKENS: u32 = 512;
/// Seed stream of a hash block's text (`BLOCK_STREAM ^ id`).
const BLOCK_STREAM: u64 = 0x6d6f_6f6e_6361_6b65;
/// Seed stream of the text of a line that gives a length without `hash_ids`.
const LINE_STREAM: u64 = 0x6169_7065_7266_6c6e;

/// What parsing carries from line to line: the last arrival (a `delay` counts from it) and
/// the text of each hash block seen.
#[derive(Default)]
pub(super) struct State {
    last_ms: f64,
    blocks: HashMap<u64, Arc<str>>,
}

/// The AIPerf format a line's keys say it is in.
pub(super) fn detect(obj: &Map<String, Value>) -> Option<DatasetFormat> {
    if obj.contains_key("turns") {
        Some(DatasetFormat::AiperfMultiTurn)
    } else if obj.contains_key("input_length") || obj.contains_key("hash_ids") {
        Some(DatasetFormat::Mooncake)
    } else if obj.contains_key("text") || obj.contains_key("texts") {
        Some(DatasetFormat::AiperfSingleTurn)
    } else {
        None
    }
}

/// One line in `fmt` (one of the three AIPerf formats).
pub(super) fn parse(
    obj: &Map<String, Value>,
    line: usize,
    fmt: DatasetFormat,
    st: &mut State,
) -> Result<Conversation, String> {
    let mut c = Conversation {
        line,
        turns: Vec::new(),
        had_system: false,
        arrival: None,
        delays: Vec::new(),
    };
    c.arrival = st.arrival(obj)?;
    match fmt {
        DatasetFormat::AiperfMultiTurn => {
            let turns = obj
                .get("turns")
                .and_then(Value::as_array)
                .filter(|t| !t.is_empty())
                .ok_or("`turns` is not a non-empty array (format = \"aiperf-multi-turn\")")?;
            for (k, t) in turns.iter().enumerate() {
                let t = t
                    .as_object()
                    .ok_or_else(|| format!("turns[{k}] is not an object"))?;
                if k == 0 && c.arrival.is_none() {
                    c.arrival = st.arrival(t)?;
                }
                c.turns.push((text(t, &format!("turns[{k}]"))?, output(t)?));
                let delay = if k == 0 { None } else { ms(t, "delay")? };
                c.delays.push(super::ms_duration(delay.unwrap_or(0.0)));
            }
        }
        DatasetFormat::Mooncake => {
            let prompt = match obj.get("text_input").and_then(Value::as_str) {
                Some(s) if !s.trim().is_empty() => Arc::from(s),
                _ => st.trace_prompt(obj, line)?,
            };
            c.turns.push((prompt, output(obj)?));
        }
        _ => c.turns.push((text(obj, "the line")?, output(obj)?)),
    }
    Ok(c)
}

impl State {
    /// `timestamp` (ms from the trace's start), else `delay` (ms after the previous line's
    /// arrival), else none.
    fn arrival(&mut self, obj: &Map<String, Value>) -> Result<Option<f64>, String> {
        let at = match (ms(obj, "timestamp")?, ms(obj, "delay")?) {
            (Some(t), _) => t,
            (None, Some(d)) => self.last_ms + d,
            (None, None) => return Ok(None),
        };
        self.last_ms = at;
        Ok(Some(at))
    }

    /// `input_length` tokens: one block per hash id (the last one cut short), then, past the
    /// ids, text unique to the line.
    fn trace_prompt(&mut self, obj: &Map<String, Value>, line: usize) -> Result<Arc<str>, String> {
        let n = obj
            .get("input_length")
            .and_then(Value::as_u64)
            .filter(|&n| (1..=u64::from(MAX_INPUT_TOKENS)).contains(&n))
            .ok_or_else(|| {
                format!(
                    "`input_length` is not a whole number of tokens from 1 to {MAX_INPUT_TOKENS}"
                )
            })? as u32;
        let ids: Vec<u64> = match obj.get("hash_ids") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_u64()
                        .ok_or("`hash_ids` holds a value that is not a whole number")
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("`hash_ids` is not an array".into()),
        };
        let mut s = String::with_capacity(n as usize * 4);
        let mut left = n;
        for id in ids {
            if left == 0 {
                break;
            }
            let block = self.blocks.entry(id).or_insert_with(|| {
                block_text(&mut Rng::derive(BLOCK_STREAM, id), BLOCK_TOKENS).into()
            });
            let k = left.min(BLOCK_TOKENS);
            // Every word is 4 characters per token, so k tokens are the first 4k bytes.
            s.push_str(&block[..k as usize * 4]);
            left -= k;
        }
        if left > 0 {
            s.push_str(&block_text(
                &mut Rng::derive(LINE_STREAM, line as u64),
                left,
            ));
        }
        Ok(s.into())
    }
}

/// `n` tokens of words with their leading space (3, 7 or 11 letters: 1, 2 or 3 tokens of
/// exactly 4 characters), so any prefix of whole words is a prefix of whole tokens.
fn block_text(rng: &mut Rng, n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 4);
    super::push_words(&mut s, rng, n);
    s
}

/// The prompt: `text`, or `texts` (strings, or `{"contents": [...]}` objects) joined by
/// newlines.
fn text(obj: &Map<String, Value>, what: &str) -> Result<Arc<str>, String> {
    let s = match (obj.get("text"), obj.get("texts")) {
        (Some(Value::String(s)), _) => s.clone(),
        (_, Some(Value::Array(parts))) => parts
            .iter()
            .flat_map(|p| match p {
                Value::String(s) => vec![s.as_str()],
                _ => p
                    .get("contents")
                    .and_then(Value::as_array)
                    .map(|c| c.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return Err(format!("{what} has no string `text` (or `texts` array)")),
    };
    if s.trim().is_empty() {
        return Err(format!("{what} has an empty `text`"));
    }
    Ok(s.into())
}

/// `output_length`, when given.
fn output(obj: &Map<String, Value>) -> Result<Option<u32>, String> {
    match obj.get("output_length") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=u64::from(u32::MAX)).contains(n))
            .map(|n| Some(n as u32))
            .ok_or_else(|| "`output_length` is not a whole number of tokens, at least 1".into()),
    }
}

/// A millisecond key, when given: a number at least 0.
fn ms(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(Some)
            .ok_or_else(|| format!("`{key}` is not a number of milliseconds, at least 0")),
    }
}
