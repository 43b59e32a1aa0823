//! The simulator's APIs: what a request means and what goes on the wire for it.
//!
//! `chat` (`POST /v1/chat/completions`), `responses` (`POST /v1/responses` and the Responses
//! event encoder) and `ws` (the Responses WebSocket mode, which reuses that encoder). Each
//! handler returns `Result<_, ApiError>`; the router turns errors into responses. Below them
//! is `wire` (context, errors, SSE) and the engine (`model`). This file holds what the APIs
//! share: reading message content and `tool_choice`, the default output length, and the
//! trace of a non-streamed answer.

pub(crate) mod chat;
pub(crate) mod responses;
pub(crate) mod ws;

use serde_json::Value;

use super::model::{self, Done};
use super::trace::ChunkWrite;

/// Default output length when the request sets none.
pub(crate) const DEFAULT_MAX_OUTPUT: u32 = 512;

/// Text of a message `content` (string, or parts with `text`).
pub(crate) fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The function a `tool_choice` forces, if any (`"required"` picks the first tool).
pub(crate) fn forced_tool(tool_choice: Option<&Value>, tools: Option<&Value>) -> Option<String> {
    let first_tool = || {
        tools
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
            })
            .unwrap_or("tool")
            .to_string()
    };
    match tool_choice? {
        Value::String(s) if s == "required" => Some(first_tool()),
        Value::Object(o) => o
            .get("function")
            .and_then(|f| f.get("name"))
            .or_else(|| o.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}

/// The functions a `tool_choice` forces, one call each: the `tools` of `allowed_tools` with
/// mode `required` (Responses: `{"type":"allowed_tools","mode":"required","tools":[…]}`,
/// chat: the same under `allowed_tools`), which the simulator answers with parallel calls;
/// else the one [`forced_tool`] (or none).
pub(crate) fn forced_tools(tool_choice: Option<&Value>, tools: Option<&Value>) -> Vec<String> {
    let allowed = tool_choice
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("allowed_tools"))
        .map(|c| c.get("allowed_tools").unwrap_or(c));
    if let Some(a) = allowed.filter(|a| a.get("mode").and_then(Value::as_str) == Some("required")) {
        let names: Vec<String> = a
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        if !names.is_empty() {
            return names;
        }
    }
    forced_tool(tool_choice, tools).into_iter().collect()
}

/// A non-streamed body is handed to the connection in one piece: the trace says so.
pub(crate) fn record_single_write(engine: &model::Engine, id: &str, done: &Done) {
    if let Some(mut t) = engine.trace.get(id) {
        t.chunk_writes = vec![ChunkWrite {
            at: crate::clock::now(),
            tokens: done.output_tokens,
            text: done.text.clone(),
            sent: None,
        }];
        engine.trace.insert(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn allowed_tools_required_forces_one_call_of_each() {
        let responses = json!({"type": "allowed_tools", "mode": "required",
            "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}]});
        assert_eq!(forced_tools(Some(&responses), None), ["a", "b"]);
        let chat = json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
            "tools": [{"type": "function", "function": {"name": "a"}}]}});
        assert_eq!(forced_tools(Some(&chat), None), ["a"]);
        let one = json!({"type": "function", "name": "x"});
        assert_eq!(forced_tools(Some(&one), None), ["x"]);
        assert!(forced_tools(Some(&json!("auto")), None).is_empty());
    }
}
