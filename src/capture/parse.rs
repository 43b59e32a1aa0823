//! One recorded exchange → what the session needs: the request's instructions, new input
//! items, chaining and limits; the response's id, text, function calls, usage and the
//! arrival time of every content delta.
//!
//! Owns: reading chat completions and Responses request bodies (HTTP and `response.create`
//! messages), SSE, JSON and WebSocket event streams. Unknown fields are ignored; a body that
//! is not JSON gives an exchange with no input (counted, never a panic).

use serde_json::Value;

use super::Exchange;
use crate::vocab::{ApiFlavour, TokenSource};

/// One input item of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum In {
    /// A user message.
    User(String),
    /// An assistant message (its text and the function calls it made, by name).
    Assistant(String, Vec<String>),
    /// A tool result: (call id, output text).
    ToolOutput(String, String),
    /// Anything else (system messages after the first, reasoning items, …).
    Other,
}

/// What one exchange says.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Chat completions or Responses.
    pub api: Option<ApiFlavour>,
    /// System prompt / `instructions`.
    pub system: String,
    /// The input items sent (all of them: full history, or the new ones when chaining).
    pub input: Vec<In>,
    /// `previous_response_id`.
    pub previous_response_id: Option<String>,
    /// `store` (Responses; default true).
    pub store: bool,
    /// `generate: false` (a WebSocket warm-up).
    pub warmup: bool,
    /// `model`.
    pub model: String,
    /// The response completed (terminal success event, or a 2xx JSON body).
    pub ok: bool,
    /// Why not.
    pub error: Option<String>,
    /// The response's id.
    pub response_id: Option<String>,
    /// Output text.
    pub text: String,
    /// Function calls made: (call id, name); several when the response made parallel calls.
    pub calls: Vec<(String, String)>,
    /// `usage`.
    pub input_tokens: Option<u32>,
    /// `usage` cached input tokens.
    pub cached_tokens: Option<u32>,
    /// `usage` output tokens.
    pub output_tokens: Option<u32>,
    /// Output tokens the provider's timing fields count (llama.cpp `timings.predicted_n`),
    /// for streams without `usage` (a chat client that set no `include_usage`).
    pub timed_output_tokens: Option<u32>,
    /// Input tokens the provider's timing fields count (llama.cpp `prompt_n + cache_n`).
    pub timed_input_tokens: Option<u32>,
    /// Server-reported timing in the stream (llama.cpp `timings`, Cerebras `time_info`,
    /// the WebSocket mode's `responsesapi.websocket_timing`).
    pub server_timing: Option<crate::vocab::ServerTiming>,
    /// Content deltas: (arrival ns, delta events, text bytes), one entry per network chunk.
    pub deltas: Vec<(u64, u32, u32)>,
}

fn s(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or("").to_string()
}

/// The text of a `content` field: a string, or the `text` of its parts.
pub fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

impl Parsed {
    /// The response's output length and where it came from: `usage`; else the provider's
    /// timing fields (llama.cpp `timings.predicted_n`, present without `include_usage`);
    /// else the content deltas of the stream, one token per delta event (the vLLM-style
    /// one-token-per-chunk rule: the last resort, exact for llama.cpp and the simulator,
    /// an undercount for servers that pack several tokens per chunk).
    pub fn output_length(&self) -> (u32, TokenSource) {
        if let Some(n) = self.output_tokens {
            return (n, TokenSource::ServerUsage);
        }
        if let Some(n) = self.timed_output_tokens {
            return (n, TokenSource::ServerUsage);
        }
        (
            self.deltas.iter().map(|d| d.1).sum(),
            TokenSource::ChunkCount,
        )
    }

    /// Input tokens: `usage`, else the provider's timing fields.
    pub fn input_length(&self) -> Option<u32> {
        self.input_tokens.or(self.timed_input_tokens)
    }
}

/// Parses an exchange.
pub fn parse(x: &Exchange) -> Parsed {
    let mut p = Parsed {
        store: true,
        ..Default::default()
    };
    let mut body: Value = serde_json::from_slice(&x.body).unwrap_or(Value::Null);
    if body.get("type").and_then(Value::as_str) == Some("response.create") {
        if let Some(inner) = body.get("response").cloned() {
            body = inner;
        }
    }
    let chat = x.path.contains("chat/completions") || body.get("messages").is_some();
    p.api = Some(if chat {
        ApiFlavour::ChatCompletions
    } else {
        ApiFlavour::Responses
    });
    p.model = s(body.get("model"));
    if chat {
        request_chat(&body, &mut p);
    } else {
        request_responses(&body, &mut p);
    }
    response(x, chat, &mut p);
    if let Some(e) = &x.error {
        // A client that hangs up once it has the stream's own end (`[DONE]`, a terminal
        // Responses event, a whole JSON body) had the whole response; only the transport's
        // last bytes (HTTP/1.1's closing chunk) were still on their way.
        if !(p.ok && e == super::tee::CLIENT_LEFT) {
            p.ok = false;
            p.error.get_or_insert_with(|| e.clone());
        }
    }
    if let Some(st) = x.status.filter(|s| !(200..300).contains(s) && *s != 101) {
        p.ok = false;
        p.error.get_or_insert_with(|| format!("HTTP {st}"));
    }
    p
}

fn request_chat(body: &Value, p: &mut Parsed) {
    let msgs = body.get("messages").and_then(Value::as_array);
    for (i, m) in msgs.into_iter().flatten().enumerate() {
        let text = content_text(m.get("content"));
        match m.get("role").and_then(Value::as_str) {
            Some("system" | "developer") if i == 0 => p.system = text,
            Some("user") => p.input.push(In::User(text)),
            Some("assistant") => {
                let calls = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| s(c.pointer("/function/name")))
                    .collect();
                p.input.push(In::Assistant(text, calls));
            }
            Some("tool") => p.input.push(In::ToolOutput(s(m.get("tool_call_id")), text)),
            _ => p.input.push(In::Other),
        }
    }
}

fn request_responses(body: &Value, p: &mut Parsed) {
    p.system = s(body.get("instructions"));
    p.previous_response_id = body
        .get("previous_response_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    p.store = body.get("store").and_then(Value::as_bool).unwrap_or(true);
    p.warmup = body.get("generate").and_then(Value::as_bool) == Some(false);
    match body.get("input") {
        Some(Value::String(t)) => p.input.push(In::User(t.clone())),
        Some(Value::Array(items)) => {
            for it in items {
                let item = match it.get("type").and_then(Value::as_str) {
                    Some("function_call_output") => In::ToolOutput(
                        s(it.get("call_id")),
                        match it.get("output") {
                            Some(Value::String(o)) => o.clone(),
                            o => content_text(o),
                        },
                    ),
                    Some("function_call") => In::Assistant(String::new(), vec![s(it.get("name"))]),
                    Some("message") | None => match it.get("role").and_then(Value::as_str) {
                        Some("user") => In::User(content_text(it.get("content"))),
                        Some("assistant") => In::Assistant(content_text(it.get("content")), vec![]),
                        Some("system" | "developer") if p.system.is_empty() => {
                            p.system = content_text(it.get("content"));
                            In::Other
                        }
                        _ => In::Other,
                    },
                    _ => In::Other,
                };
                p.input.push(item);
            }
        }
        _ => {}
    }
}

/// Splits a byte stream into SSE events: (index of the chunk that completed it, data).
fn sse_events(chunks: &[(u64, bytes::Bytes)]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    for (ci, (_, c)) in chunks.iter().enumerate() {
        buf.extend_from_slice(c);
        loop {
            let text = String::from_utf8_lossy(&buf).replace("\r\n", "\n");
            let Some(end) = text.find("\n\n") else { break };
            let event = &text[..end];
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                out.push((ci, data.join("\n")));
            }
            let rest = text[end + 2..].to_string();
            buf = rest.into_bytes();
        }
    }
    out
}

fn response(x: &Exchange, chat: bool, p: &mut Parsed) {
    let events: Vec<(usize, String)> = if x.wire == crate::vocab::WireProtocol::WebSocket {
        x.chunks
            .iter()
            .enumerate()
            .map(|(i, (_, b))| (i, String::from_utf8_lossy(b).into_owned()))
            .collect()
    } else {
        let sse = sse_events(&x.chunks);
        if sse.is_empty() && !x.chunks.is_empty() {
            // A JSON (non-streaming) response.
            let all: Vec<u8> = x.chunks.iter().flat_map(|(_, b)| b.to_vec()).collect();
            let v: Value = serde_json::from_slice(&all).unwrap_or(Value::Null);
            if chat {
                chat_object(&v, p);
            } else {
                responses_object(&v, p);
            }
            let n = p.output_tokens.unwrap_or(1);
            if let Some((t, _)) = x.chunks.last() {
                p.deltas.push((*t, n, p.text.len() as u32));
            }
            return;
        }
        sse
    };
    let mut chat_calls: Vec<(String, String)> = Vec::new();
    for (ci, data) in events {
        let at = x.chunks.get(ci).map_or(x.end_ns, |c| c.0);
        if data.trim() == "[DONE]" {
            p.ok = p.error.is_none();
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        if chat {
            chat_event(&v, at, p, &mut chat_calls);
        } else {
            responses_event(&v, at, p);
        }
    }
    if chat {
        p.calls = chat_calls;
    }
}

/// Counts a text delta that arrived at `at` (deltas of one frame share one entry).
fn delta(p: &mut Parsed, at: u64, text: &str) {
    match p.deltas.last_mut() {
        Some(d) if d.0 == at => {
            d.1 += 1;
            d.2 += text.len() as u32;
        }
        _ => p.deltas.push((at, 1, text.len() as u32)),
    }
}

/// One chat completions stream event: error, content and tool-call deltas (tool calls
/// gathered by index into `chat_calls`), the response id, usage.
fn chat_event(v: &Value, at: u64, p: &mut Parsed, chat_calls: &mut Vec<(String, String)>) {
    if let Some(e) = v.get("error") {
        p.error = Some(s(e.get("message")));
    }
    if let Some(c) = v.pointer("/choices/0/delta") {
        if let Some(t) = c.get("content").and_then(Value::as_str) {
            p.text.push_str(t);
            delta(p, at, t);
        }
        for tc in c
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let idx = tc.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            while chat_calls.len() <= idx {
                chat_calls.push(Default::default());
            }
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                chat_calls[idx].0 = id.to_string();
            }
            if let Some(n) = tc.pointer("/function/name").and_then(Value::as_str) {
                chat_calls[idx].1.push_str(n);
            }
            let args = s(tc.pointer("/function/arguments"));
            if !args.is_empty() {
                delta(p, at, &args);
            }
        }
    }
    if let Some(id) = v.get("id").and_then(Value::as_str) {
        p.response_id.get_or_insert_with(|| id.to_string());
    }
    if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
        usage_chat(u, p);
    }
    provider_timing(v, p);
}

/// Provider timing fields of a chat chunk or object: llama.cpp `timings` (also its token
/// counts, the lengths of a stream without `usage`) and Cerebras `time_info`.
fn provider_timing(v: &Value, p: &mut Parsed) {
    use crate::backend::timing::{CerebrasTimeInfo, LlamaTimings};
    if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
        if let Ok(lt) = serde_json::from_value::<LlamaTimings>(t.clone()) {
            p.server_timing = Some(lt.timing());
        }
        let n = |k: &str| t.get(k).and_then(Value::as_u64).map(|n| n as u32);
        p.timed_output_tokens = n("predicted_n").or(p.timed_output_tokens);
        if let Some(prompt) = n("prompt_n") {
            p.timed_input_tokens = Some(prompt + n("cache_n").unwrap_or(0));
        }
    }
    if let Some(t) = v.get("time_info").filter(|t| t.is_object()) {
        if let Ok(ct) = serde_json::from_value::<CerebrasTimeInfo>(t.clone()) {
            p.server_timing = Some(ct.timing());
        }
    }
}

/// One Responses stream event (SSE or WebSocket): id, text and argument deltas, the final
/// response object, errors.
fn responses_event(v: &Value, at: u64, p: &mut Parsed) {
    match v.get("type").and_then(Value::as_str).unwrap_or("") {
        "response.created" => {
            p.response_id = v
                .pointer("/response/id")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        "response.output_text.delta" => {
            let t = s(v.get("delta"));
            delta(p, at, &t);
        }
        "response.function_call_arguments.delta" => {
            let t = s(v.get("delta"));
            delta(p, at, &t);
        }
        "response.completed" | "response.incomplete" => {
            if let Some(r) = v.get("response") {
                responses_object(r, p);
            }
        }
        "responsesapi.websocket_timing" => {
            if let Some(Ok(m)) = v.get("timing_metrics").map(|m| {
                serde_json::from_value::<crate::backend::timing::WsTimingMetrics>(m.clone())
            }) {
                p.server_timing = Some(m.timing());
            }
        }
        "response.failed" => {
            p.error = Some(
                v.pointer("/response/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("response.failed")
                    .to_string(),
            );
        }
        "error" => {
            p.error = Some(
                v.pointer("/error/message")
                    .or_else(|| v.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("error event")
                    .to_string(),
            );
        }
        _ => {}
    }
}

fn usage_chat(u: &Value, p: &mut Parsed) {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).map(|n| n as u32);
    p.input_tokens = n("prompt_tokens").or(p.input_tokens);
    p.output_tokens = n("completion_tokens").or(p.output_tokens);
    p.cached_tokens = u
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .map(|n| n as u32)
        .or(p.cached_tokens);
}

fn chat_object(v: &Value, p: &mut Parsed) {
    if let Some(e) = v.get("error") {
        p.error = Some(s(e.get("message")));
        return;
    }
    p.response_id = v.get("id").and_then(Value::as_str).map(str::to_string);
    p.text = content_text(v.pointer("/choices/0/message/content"));
    for tc in v
        .pointer("/choices/0/message/tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        p.calls
            .push((s(tc.get("id")), s(tc.pointer("/function/name"))));
    }
    if let Some(u) = v.get("usage") {
        usage_chat(u, p);
    }
    provider_timing(v, p);
    p.ok = v.get("choices").is_some();
}

fn responses_object(r: &Value, p: &mut Parsed) {
    if let Some(e) = r.get("error").filter(|e| !e.is_null()) {
        p.error = Some(s(e.get("message")));
    }
    p.response_id = r.get("id").and_then(Value::as_str).map(str::to_string);
    let mut text = String::new();
    p.calls.clear();
    for item in r
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for c in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    text.push_str(c.get("text").and_then(Value::as_str).unwrap_or(""));
                }
            }
            Some("function_call") => p.calls.push((s(item.get("call_id")), s(item.get("name")))),
            _ => {}
        }
    }
    p.text = text;
    if let Some(u) = r.get("usage").filter(|u| !u.is_null()) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).map(|n| n as u32);
        p.input_tokens = n("input_tokens");
        p.output_tokens = n("output_tokens");
        p.cached_tokens = u
            .pointer("/input_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .map(|n| n as u32);
    }
    let status = s(r.get("status"));
    p.ok =
        p.error.is_none() && (status == "completed" || status == "incomplete" || status.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// A chat SSE exchange: `events` one network chunk each, 1 ms apart.
    fn chat(events: &[&str]) -> Exchange {
        Exchange {
            path: "/v1/chat/completions".into(),
            body: Bytes::from_static(
                br#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            ),
            status: Some(200),
            chunks: events
                .iter()
                .enumerate()
                .map(|(i, e)| (i as u64 * 1_000_000, Bytes::from(format!("data: {e}\n\n"))))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_llama_cpp_stream_without_usage_gives_its_length_and_timing_from_timings() {
        // What llama-server streams to a client that set no `stream_options.include_usage`.
        let x = chat(&[
            r#"{"id":"c1","choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"b"}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{},"finish_reason":"length"}],"timings":{"cache_n":4,"prompt_n":11,"prompt_ms":12.5,"predicted_n":7,"predicted_ms":30.0}}"#,
            "[DONE]",
        ]);
        let p = parse(&x);
        assert!(p.ok);
        assert_eq!(p.output_length(), (7, TokenSource::ServerUsage));
        assert_eq!(p.input_length(), Some(15));
        let t = p.server_timing.expect("llama.cpp timings kept");
        assert_eq!(t.source, "llamacpp-timings");
        assert_eq!((t.ttft_ms, t.total_ms), (Some(12.5), Some(42.5)));
    }

    #[test]
    fn usage_wins_and_a_stream_with_neither_counts_its_deltas() {
        let with_usage = chat(&[
            r#"{"id":"c1","choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3},"timings":{"predicted_n":7}}"#,
        ]);
        assert_eq!(
            parse(&with_usage).output_length(),
            (3, TokenSource::ServerUsage)
        );
        let bare = chat(&[
            r#"{"id":"c1","choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"b"}}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"c"}}]}"#,
        ]);
        assert_eq!(parse(&bare).output_length(), (3, TokenSource::ChunkCount));
        assert_eq!(parse(&bare).input_length(), None);
    }

    #[test]
    fn a_client_that_hangs_up_after_the_streams_end_had_the_whole_response() {
        let whole = [
            r#"{"id":"c1","choices":[{"delta":{"content":"a"}}]}"#,
            "[DONE]",
        ];
        let left = |events: &[&str], error: &str| {
            let mut x = chat(events);
            x.error = Some(error.into());
            parse(&x)
        };
        let p = left(&whole, super::super::tee::CLIENT_LEFT);
        assert!(p.ok && p.error.is_none(), "{:?}", p.error);
        // Before `[DONE]` the response was cut short, and any other break stays a break.
        let cut = left(&whole[..1], super::super::tee::CLIENT_LEFT);
        assert!(!cut.ok);
        assert_eq!(cut.error.as_deref(), Some(super::super::tee::CLIENT_LEFT));
        let broke = left(&whole, "upstream reset");
        assert!(!broke.ok);
        assert_eq!(broke.error.as_deref(), Some("upstream reset"));
    }

    #[test]
    fn tool_outputs_keep_their_call_ids() {
        let x = Exchange {
            path: "/v1/responses".into(),
            body: Bytes::from_static(
                br#"{"input":[{"type":"function_call_output","call_id":"call_2","output":"two"}]}"#,
            ),
            ..Default::default()
        };
        assert_eq!(
            parse(&x).input,
            vec![In::ToolOutput("call_2".into(), "two".into())]
        );
    }
}
