//! Request bodies and headers for Chat Completions and the Responses API (HTTP and
//! WebSocket).
//!
//! Owns: each request's headers and path, its body's encoding (the shapes: `body.rs`),
//! the API key header (read from the environment at build time, never stored or logged),
//! extra target headers, the target's redaction set ([`secrets`]: what of that is secret),
//! the simulator fault (`x-sim-fault` header on HTTP, `"sim_fault"` field on WebSocket), and
//! what one turn sends, built when the transport asks ([`TurnRequest`]: the whole history on
//! a new WebSocket; a `generate:false` warm-up only on WebSocket).
//! Does not own: sending or re-sending (transport) or the chaining rule (conversation).

use super::{body, Conversation};
use crate::plan::Target;
use crate::transport::http::HttpRequest;
use crate::transport::Outgoing;
use crate::vocab::{ApiFlavour, Chaining, RequestKind, TransportKind};
use bytes::Bytes;
use http::{HeaderName, HeaderValue};

pub use super::RequestSpec;

/// A request that could not be built (e.g. a missing API key variable).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BuildError(pub String);

/// `Authorization` and the target's extra headers.
fn common_headers(target: &Target) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
    let mut h = Vec::new();
    if let Some(var) = &target.api_key_env {
        let key = std::env::var(var).map_err(|_| {
            BuildError(format!(
                "target {:?}: environment variable {var} (api_key_env, or --api-key-env) is not set; export it, or remove api_key_env (--api-key-env)",
                target.name
            ))
        })?;
        let mut v = HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
            BuildError(format!(
                "the API key in {var} contains characters not allowed in a header"
            ))
        })?;
        v.set_sensitive(true);
        h.push((http::header::AUTHORIZATION, v));
    }
    for (k, v) in &target.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            BuildError(format!(
                "target {:?}: invalid header name {k:?}",
                target.name
            ))
        })?;
        let mut value = HeaderValue::from_str(v).map_err(|_| {
            BuildError(format!(
                "target {:?}: invalid value for header {k:?}",
                target.name
            ))
        })?;
        value.set_sensitive(crate::plan::targets::is_credential_header(k));
        h.push((name, value));
    }
    Ok(h)
}

/// The target's redaction set: exactly the secrets its requests carry — the API key as
/// sent (trimmed) and as read from `api_key_env`, every credential-like header value
/// ([`crate::plan::targets::is_credential_header`]) — and the `user:password` its
/// `base_url` was written with. The exchange scrubs every server-derived text with it.
pub fn secrets(target: &Target) -> crate::vocab::redact::Secrets {
    let mut s = crate::vocab::redact::Secrets::default();
    if let Some(raw) = target
        .api_key_env
        .as_deref()
        .and_then(|v| std::env::var(v).ok())
    {
        s.add(&raw);
    }
    for (k, v) in &target.headers {
        if crate::plan::targets::is_credential_header(k) {
            s.add(v);
        }
    }
    if let Some(u) = &target.net.url_userinfo {
        s.add_userinfo(&u.0);
    }
    s
}

/// Checks that requests to `target` can be built: its API key variable (`api_key_env`) is
/// set and its extra headers are valid. `run` calls it before anything starts, so a missing
/// key is one configuration error (exit 2) instead of a run in which every request fails.
pub fn check_target(target: &Target) -> Result<(), BuildError> {
    common_headers(target).map(|_| ())
}

/// Headers of the WebSocket upgrade request.
pub fn ws_headers(target: &Target) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
    let mut h = common_headers(target)?;
    h.push((
        HeaderName::from_static("openai-beta"),
        HeaderValue::from_static("responses_websockets=2026-02-06"),
    ));
    if target.request_timing {
        h.push((
            HeaderName::from_static("x-responsesapi-include-timing-metrics"),
            HeaderValue::from_static("true"),
        ));
    }
    Ok(h)
}

/// The HTTP request (`POST {prefix}/chat/completions` or `/responses`).
pub fn http_request(
    target: &Target,
    conv: &Conversation,
    spec: &RequestSpec,
) -> Result<HttpRequest, BuildError> {
    let mut headers = common_headers(target)?;
    headers.push((
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    ));
    headers.push((
        http::header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    ));
    if let Some(f) = &spec.fault {
        let v = HeaderValue::from_str(f)
            .map_err(|_| BuildError(format!("invalid fault spec {f:?}")))?;
        headers.push((HeaderName::from_static("x-sim-fault"), v));
    }
    // Ask for the same server-side timing split over SSE as over the WebSocket, so that
    // overhead is computed the same way on every transport wherever the server honours it
    // (the simulator does; a server that ignores the header just sends no timing event).
    if target.request_timing && target.api == ApiFlavour::Responses {
        headers.push((
            HeaderName::from_static("x-responsesapi-include-timing-metrics"),
            HeaderValue::from_static("true"),
        ));
    }
    let (path, body) = match target.api {
        ApiFlavour::ChatCompletions => ("/chat/completions", body::chat(target, conv, spec)),
        ApiFlavour::Responses => ("/responses", body::responses(target, conv, spec, false)),
    };
    let body = body.map_err(|e| BuildError(format!("encoding the request: {e}")))?;
    Ok(HttpRequest {
        path: path.to_string(),
        headers,
        body: Bytes::from(body),
    })
}

/// The WebSocket `response.create` message (flat envelope, no `stream`).
pub fn ws_message(
    target: &Target,
    conv: &Conversation,
    spec: &RequestSpec,
) -> Result<String, BuildError> {
    if !target.api.speaks(TransportKind::Ws) {
        return Err(BuildError(format!(
            "target {:?} speaks chat completions, which has no WebSocket mode; use an HTTP transport",
            target.name
        )));
    }
    let body = body::responses(target, conv, spec, true)
        .map_err(|e| BuildError(format!("encoding the request: {e}")))?;
    // serde_json writes UTF-8 only.
    String::from_utf8(body).map_err(|e| BuildError(format!("encoding the request: {e}")))
}

/// One turn's request, built when the transport asks for it (see [`Outgoing`]): the HTTP
/// request, or the WebSocket upgrade headers and then the message for the socket it goes on.
pub struct TurnRequest<'a> {
    /// The target.
    pub target: &'a Target,
    /// The session's conversation: told when the message goes on a new socket (before the
    /// body is built, so the chaining matches what is sent).
    pub conv: &'a mut Conversation,
    /// What the request asks for.
    pub spec: &'a RequestSpec,
    /// How the last body built sent the history (`None`: none was built).
    pub chaining: Option<Chaining>,
}

impl<'a> TurnRequest<'a> {
    /// The request `spec` for `target`, nothing built yet.
    pub fn new(target: &'a Target, conv: &'a mut Conversation, spec: &'a RequestSpec) -> Self {
        TurnRequest {
            target,
            conv,
            spec,
            chaining: None,
        }
    }
}

impl Outgoing for TurnRequest<'_> {
    fn http_request(&mut self) -> Result<HttpRequest, String> {
        if self.spec.kind == RequestKind::Warmup {
            return Err("a generate:false warm-up needs the ws transport".into());
        }
        let req = http_request(self.target, self.conv, self.spec).map_err(|e| e.to_string())?;
        self.chaining = Some(self.conv.chaining());
        Ok(req)
    }

    fn ws_headers(&mut self) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        ws_headers(self.target).map_err(|e| e.to_string())
    }

    fn ws_message(&mut self, new_socket: bool) -> Result<String, String> {
        if new_socket {
            // A new socket has no connection-local chain: the whole history goes.
            self.conv.on_new_socket();
        }
        let text = ws_message(self.target, self.conv, self.spec).map_err(|e| e.to_string())?;
        self.chaining = Some(self.conv.chaining());
        Ok(text)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backend::ToolChoice;
    use crate::vocab::TransportKind;
    use serde_json::{json, Value};
    use std::time::Duration;

    pub(crate) fn target(api: ApiFlavour) -> Target {
        Target {
            name: "t".into(),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            sim_profile: None,
            api,
            model: "m".into(),
            api_key_env: None,
            hardware: "x".into(),
            headers: Default::default(),
            store: false,
            ws_warmup: false,
            request_timing: true,
            request_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(5),
            transports: TransportKind::ALL.to_vec(),
            net: Default::default(),
            ignore_eos: false,
            sim_profile_file: None,
        }
    }

    #[test]
    fn chat_body_asks_to_ignore_eos_only_when_the_target_says_so() {
        let mut t = target(ApiFlavour::ChatCompletions);
        let mut c = Conversation::new("", ApiFlavour::ChatCompletions, TransportKind::Http, false);
        c.add_user_message("hi");
        let spec = RequestSpec {
            max_output_tokens: 300,
            ..Default::default()
        };
        let body = |t: &Target| -> Value {
            serde_json::from_slice(&http_request(t, &c, &spec).unwrap().body).unwrap()
        };
        assert!(body(&t).get("ignore_eos").is_none());
        t.ignore_eos = true;
        let b = body(&t);
        assert_eq!(
            (b["ignore_eos"].clone(), b["max_tokens"].clone()),
            (json!(true), json!(300))
        );
    }

    #[test]
    fn responses_ws_message_is_flat_and_incremental() {
        let t = target(ApiFlavour::Responses);
        let mut c = Conversation::new("be brief", ApiFlavour::Responses, TransportKind::Ws, false);
        c.add_user_message("hi");
        c.on_reply(&crate::backend::conversation::Reply {
            ok: true,
            response_id: Some("resp_1".into()),
            tool_calls: vec![],
            text: "yo".into(),
            warmup: false,
        });
        c.add_user_message("next");
        let spec = RequestSpec {
            max_output_tokens: 50,
            tools: vec!["read_file".into()],
            tool_choice: ToolChoice::Function("read_file".into()),
            fault: Some("status=500".into()),
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&ws_message(&t, &c, &spec).unwrap()).unwrap();
        assert_eq!(v["type"], "response.create");
        assert!(v.get("stream").is_none());
        assert_eq!(v["previous_response_id"], "resp_1");
        assert_eq!(v["input"].as_array().unwrap().len(), 1);
        assert_eq!(v["input"][0]["content"][0]["text"], "next");
        assert_eq!(
            v["tool_choice"],
            json!({"type": "function", "name": "read_file"})
        );
        assert_eq!(v["sim_fault"], "status=500");
        assert_eq!(v["instructions"], "be brief");
        assert!(v.get("generate").is_none());
        let warm = RequestSpec {
            kind: RequestKind::Warmup,
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&ws_message(&t, &c, &warm).unwrap()).unwrap();
        assert_eq!(v["generate"], false);
    }

    #[test]
    fn responses_http_body_and_headers() {
        let t = target(ApiFlavour::Responses);
        let mut c = Conversation::new("", ApiFlavour::Responses, TransportKind::Http, false);
        c.add_user_message("hi");
        let spec = RequestSpec {
            max_output_tokens: 8,
            fault: Some("stall=1s".into()),
            ..Default::default()
        };
        let r = http_request(&t, &c, &spec).unwrap();
        assert_eq!(r.path, "/responses");
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["stream"], true);
        assert_eq!(v["store"], false);
        assert_eq!(v["stream_options"]["include_obfuscation"], false);
        assert_eq!(v["max_output_tokens"], 8);
        assert!(r
            .headers
            .iter()
            .any(|(k, v)| k == "x-sim-fault" && v == "stall=1s"));
        assert!(!r.headers.iter().any(|(k, _)| k == "authorization"));
    }

    #[test]
    fn chat_body_carries_tool_calls_and_tool_results() {
        let t = target(ApiFlavour::ChatCompletions);
        let mut c = Conversation::new(
            "sys",
            ApiFlavour::ChatCompletions,
            TransportKind::Http,
            false,
        );
        c.add_user_message("fix it");
        let call = crate::backend::ToolCall {
            call_id: "call_1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        c.on_reply(&crate::backend::conversation::Reply {
            ok: true,
            response_id: Some("x".into()),
            tool_calls: vec![call],
            text: String::new(),
            warmup: false,
        });
        c.add_tool_output("call_1", "contents");
        let spec = RequestSpec {
            max_output_tokens: 20,
            tools: vec!["read_file".into()],
            tool_choice: ToolChoice::Auto,
            ..Default::default()
        };
        let r = http_request(&t, &c, &spec).unwrap();
        assert_eq!(r.path, "/chat/completions");
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(v["stream_options"].get("continuous_usage_stats").is_none());
        assert_eq!(v["max_tokens"], 20);
        let m = v["messages"].as_array().unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "read_file");
        assert_eq!(m[2]["content"], Value::Null);
        assert_eq!(m[3]["role"], "tool");
        assert_eq!(m[3]["tool_call_id"], "call_1");
        assert_eq!(v["tool_choice"], "auto");
        assert!(ws_message(&t, &c, &spec).is_err());
    }

    #[test]
    fn api_key_comes_from_the_environment_and_is_sensitive() {
        let mut t = target(ApiFlavour::Responses);
        t.api_key_env = Some("SPARK_BENCH_TEST_KEY_UNSET_7f3".into());
        let c = Conversation::new("", ApiFlavour::Responses, TransportKind::Http, false);
        let e = http_request(&t, &c, &RequestSpec::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SPARK_BENCH_TEST_KEY_UNSET_7f3") && e.contains("--api-key-env"),
            "{e}"
        );
        // PATH is always set: use it as a stand-in key without touching the environment.
        t.api_key_env = Some("PATH".into());
        if let Ok(h) = ws_headers(&t) {
            let auth = h.iter().find(|(k, _)| k == "authorization").unwrap();
            assert!(auth.1.is_sensitive());
            assert!(h
                .iter()
                .any(|(k, v)| k == "x-responsesapi-include-timing-metrics" && v == "true"));
        }
    }

    /// A conversation with every kind of item: a system prompt, user messages, an assistant
    /// turn with text and two calls, one with a call and no text, one with text and no
    /// call, and tool outputs.
    fn conversation(api: ApiFlavour, transport: TransportKind) -> Conversation {
        let call = |id: &str, name: &str| crate::backend::ToolCall {
            call_id: id.into(),
            name: name.into(),
            arguments: "{\"path\":\"a \\\"b\\\".rs\"}".into(),
        };
        let mut c = Conversation::new("be \"brief\"\n", api, transport, false);
        c.add_user_message("fix it ✓");
        c.on_reply(&crate::backend::conversation::Reply {
            ok: true,
            response_id: Some("resp_1".into()),
            tool_calls: vec![call("call_1", "read_file"), call("call_2", "grep")],
            text: "looking".into(),
            warmup: false,
        });
        c.add_tool_output("call_1", "contents");
        c.add_tool_output("call_2", "");
        c.on_reply(&crate::backend::conversation::Reply {
            ok: true,
            response_id: Some("resp_2".into()),
            tool_calls: vec![call("call_3", "read_file")],
            text: String::new(),
            warmup: false,
        });
        c.add_tool_output("call_3", "more");
        c.on_reply(&crate::backend::conversation::Reply {
            ok: true,
            response_id: Some("resp_3".into()),
            tool_calls: vec![],
            text: "done".into(),
            warmup: false,
        });
        c.add_user_message("thanks");
        c
    }

    fn spec(choice: ToolChoice) -> RequestSpec {
        RequestSpec {
            max_output_tokens: 64,
            tools: vec!["read_file".into(), "grep".into()],
            tool_choice: choice,
            fault: Some("stall=1s".into()),
            continuous_usage_stats: true,
            ..Default::default()
        }
    }

    /// The body as JSON, after checking that its keys are in sorted order (what a `Value`
    /// of it serializes back to byte for byte).
    fn parsed(body: &[u8]) -> Value {
        let v: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            std::str::from_utf8(body).unwrap(),
            "keys out of order"
        );
        v
    }

    fn params() -> Value {
        json!({"type": "object", "properties": {"input": {"type": "string"}}})
    }

    #[test]
    fn chat_body_is_the_whole_history_in_sorted_keys() {
        let mut t = target(ApiFlavour::ChatCompletions);
        t.ignore_eos = true;
        let c = conversation(ApiFlavour::ChatCompletions, TransportKind::Http);
        let calls = |ids: &[(&str, &str)]| -> Value {
            ids.iter()
                .map(|(id, name)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": "{\"path\":\"a \\\"b\\\".rs\"}"}}))
                .collect()
        };
        let tools: Value = ["read_file", "grep"]
            .iter()
            .map(|n| json!({"type": "function", "function": {"name": n, "description": format!("The {n} tool."), "parameters": params()}}))
            .collect();
        for (choice, expected) in [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::None, json!("none")),
            (
                ToolChoice::Function("grep".into()),
                json!({"type": "function", "function": {"name": "grep"}}),
            ),
            (
                ToolChoice::Parallel(vec!["read_file".into(), "grep".into()]),
                json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
                    {"type": "function", "function": {"name": "read_file"}},
                    {"type": "function", "function": {"name": "grep"}}]}}),
            ),
        ] {
            let body = parsed(&http_request(&t, &c, &spec(choice)).unwrap().body);
            assert_eq!(
                body,
                json!({
                    "model": "m",
                    "stream": true,
                    "stream_options": {"include_usage": true, "continuous_usage_stats": true},
                    "max_tokens": 64,
                    "ignore_eos": true,
                    "messages": [
                        {"role": "system", "content": "be \"brief\"\n"},
                        {"role": "user", "content": "fix it ✓"},
                        {"role": "assistant", "content": "looking", "tool_calls": calls(&[("call_1", "read_file"), ("call_2", "grep")])},
                        {"role": "tool", "tool_call_id": "call_1", "content": "contents"},
                        {"role": "tool", "tool_call_id": "call_2", "content": ""},
                        {"role": "assistant", "content": null, "tool_calls": calls(&[("call_3", "read_file")])},
                        {"role": "tool", "tool_call_id": "call_3", "content": "more"},
                        {"role": "assistant", "content": "done"},
                        {"role": "user", "content": "thanks"},
                    ],
                    "tools": tools,
                    "tool_choice": expected,
                })
            );
        }
        // Nothing optional: no tools, no limits, no system prompt.
        t.ignore_eos = false;
        let mut c = Conversation::new("", ApiFlavour::ChatCompletions, TransportKind::Http, false);
        c.add_user_message("hi");
        let body = parsed(&http_request(&t, &c, &RequestSpec::default()).unwrap().body);
        assert_eq!(
            body,
            json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
                   "messages": [{"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn responses_bodies_are_the_items_to_send_in_sorted_keys() {
        let mut t = target(ApiFlavour::Responses);
        t.store = true;
        let tools: Value = ["read_file", "grep"]
            .iter()
            .map(|n| json!({"type": "function", "name": n, "description": format!("The {n} tool."), "parameters": params()}))
            .collect();
        let args = "{\"path\":\"a \\\"b\\\".rs\"}";
        let history = json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it ✓"}]},
            {"type": "message", "role": "assistant", "content": "looking"},
            {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": args},
            {"type": "function_call", "call_id": "call_2", "name": "grep", "arguments": args},
            {"type": "function_call_output", "call_id": "call_1", "output": "contents"},
            {"type": "function_call_output", "call_id": "call_2", "output": ""},
            {"type": "function_call", "call_id": "call_3", "name": "read_file", "arguments": args},
            {"type": "function_call_output", "call_id": "call_3", "output": "more"},
            {"type": "message", "role": "assistant", "content": "done"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
        ]);
        for (choice, expected) in [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::None, json!("none")),
            (
                ToolChoice::Function("grep".into()),
                json!({"type": "function", "name": "grep"}),
            ),
            (
                ToolChoice::Parallel(vec!["read_file".into(), "grep".into()]),
                json!({"type": "allowed_tools", "mode": "required", "tools": [
                    {"type": "function", "name": "read_file"}, {"type": "function", "name": "grep"}]}),
            ),
        ] {
            // HTTP: the whole history, streamed, no fault field (it goes in a header).
            let c = conversation(ApiFlavour::Responses, TransportKind::Http);
            let s = spec(choice.clone());
            let body = parsed(&http_request(&t, &c, &s).unwrap().body);
            assert_eq!(
                body,
                json!({
                    "model": "m",
                    "stream": true,
                    "stream_options": {"include_obfuscation": false},
                    "store": true,
                    "instructions": "be \"brief\"\n",
                    "input": history,
                    "max_output_tokens": 64,
                    "tools": tools,
                    "tool_choice": expected,
                })
            );
            // WebSocket: flat, chained on the last response (only the newest item goes).
            let c = conversation(ApiFlavour::Responses, TransportKind::Ws);
            let body = parsed(ws_message(&t, &c, &s).unwrap().as_bytes());
            assert_eq!(
                body,
                json!({
                    "type": "response.create",
                    "model": "m",
                    "store": true,
                    "instructions": "be \"brief\"\n",
                    "previous_response_id": "resp_3",
                    "input": [history[9]],
                    "max_output_tokens": 64,
                    "tools": tools,
                    "tool_choice": expected,
                    "sim_fault": "stall=1s",
                })
            );
        }
        // A warm-up with nothing optional.
        t.store = false;
        let c = Conversation::new("", ApiFlavour::Responses, TransportKind::Ws, false);
        let warm = RequestSpec {
            kind: RequestKind::Warmup,
            ..Default::default()
        };
        let body = parsed(ws_message(&t, &c, &warm).unwrap().as_bytes());
        assert_eq!(
            body,
            json!({"type": "response.create", "model": "m", "store": false, "input": [], "generate": false})
        );
    }
}
