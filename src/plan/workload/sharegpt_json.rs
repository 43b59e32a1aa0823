//! vLLM's ShareGPT file (`ShareGPT_V3_unfiltered_cleaned_split.json`): one JSON array of
//! `{"id": …, "conversations": [{"from": "human" | "gpt", "value": "…"}, …]}` objects.
//!
//! Owns: walking the array one element at a time (no tree of the whole file is built: each
//! element is parsed on its own, so a 650 MB file costs its text plus one element), the
//! element → [`Conversation`] rule (vLLM's: the first human turn is the prompt and the gpt
//! turn after it sets the output length), and `file:line` errors for a broken array.
//! Does not own: the JSONL formats (`plan::workload`, `aiperf`), sampling.

use serde_json::Value;

use super::{aiperf, parse_value, Conversation, FORMATS_READ};
use crate::plan::PlanError;
use crate::scenario::DatasetFormat;

/// The array's usable conversations and a note per element that vLLM's rule drops (no
/// human turn followed by a gpt turn), as `path:line: what`.
pub(super) fn parse(path: &str, text: &str) -> Result<(Vec<Conversation>, Vec<String>), PlanError> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, 0);
    let mut line = 1 + count_lines(&bytes[..pos]);
    let fail = |line: usize, what: &str| {
        PlanError::new(format!(
            "{path}:{line}: {what}; {FORMATS_READ}; fix the file, or set `format` in [workload] to the one it is written in"
        ))
    };
    if bytes.get(pos) != Some(&b'[') {
        return Err(fail(line, "not a JSON array (format = \"sharegpt-json\")"));
    }
    pos += 1;
    let (mut out, mut dropped) = (Vec::new(), Vec::new());
    loop {
        let at = skip_ws(bytes, pos);
        line += count_lines(&bytes[pos..at]);
        pos = at;
        match bytes.get(pos) {
            Some(b']') => break,
            None => {
                return Err(fail(
                    line,
                    "the JSON array is not closed (a truncated file?)",
                ))
            }
            _ => {}
        }
        let mut one = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<Value>();
        let v = match one.next() {
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                return Err(fail(
                    line + e.line().saturating_sub(1),
                    &format!("not valid JSON ({e})"),
                ))
            }
            None => {
                return Err(fail(
                    line,
                    "the JSON array is not closed (a truncated file?)",
                ))
            }
        };
        let end = pos + one.byte_offset();
        match element(&v, line) {
            Ok(c) => out.push(c),
            Err(what) => dropped.push(format!("{path}:{line}: {what}")),
        }
        line += count_lines(&bytes[pos..end]);
        let at = skip_ws(bytes, end);
        line += count_lines(&bytes[end..at]);
        pos = at;
        match bytes.get(pos) {
            Some(b',') => pos += 1,
            Some(b']') => break,
            None => {
                return Err(fail(
                    line,
                    "the JSON array is not closed (a truncated file?)",
                ))
            }
            _ => return Err(fail(line, "expected `,` or `]` after an array element")),
        }
    }
    if skip_ws(bytes, pos + 1) < bytes.len() {
        return Err(fail(line, "text after the closing `]` of the array"));
    }
    Ok((out, dropped))
}

/// One element by vLLM's rule: the first human turn, and the length of the gpt reply that
/// follows it (the element's other turns are not replayed).
fn element(v: &Value, line: usize) -> Result<Conversation, String> {
    if !v.is_object() {
        return Err("an array element that is not a JSON object".into());
    }
    let mut state = aiperf::State::default();
    let mut c = parse_value(v, line, Some(DatasetFormat::Sharegpt), &mut state)?;
    match c.turns.first() {
        Some((_, Some(_))) => {
            c.turns.truncate(1);
            Ok(c)
        }
        _ => {
            Err("no human turn followed by a gpt reply (vLLM drops such conversations too)".into())
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn count_lines(b: &[u8]) -> usize {
    b.iter().filter(|&&c| c == b'\n').count()
}
