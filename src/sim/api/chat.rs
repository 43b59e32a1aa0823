//! `POST /v1/chat/completions`: request parsing, the chunk encoder and provider timing
//! flavours (Cerebras `time_info`, llama.cpp `timings`, vLLM `continuous_usage_stats`).
//!
//! Owns: the Chat Completions wire format. Does not own: timing (`model`) or HTTP plumbing
//! (`wire`).

use std::time::Duration;

use http::{Response, StatusCode};
use serde_json::{json, Map, Value};

use super::{content_text, forced_tools, record_single_write, DEFAULT_MAX_OUTPUT};
use crate::rng::Rng;
use crate::sim::fault::Fault;
use crate::sim::model::{self, content_hash, Done, Encoder, RunEnd, TurnSpec};
use crate::sim::profile::ChatTiming;
use crate::sim::text::{self, Style};
use crate::sim::wire::{
    json_string, opt_bool, opt_u32, parse_json, unix_now, ApiError, Body, Ctx, NullSink,
};

struct ChatEncoder {
    id: String,
    model: String,
    created: u64,
    include_usage: bool,
    continuous: bool,
    timing: ChatTiming,
    tool: Option<(String, String)>,
    input_tokens: u32,
    decode_tok_s: f64,
}

impl ChatEncoder {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!("chat.completion.chunk"));
        m.insert("created".into(), json!(self.created));
        m.insert("model".into(), json!(self.model));
        m.insert("system_fingerprint".into(), json!("fp_sim"));
        m.insert(
            "choices".into(),
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]),
        );
        if self.include_usage && !self.continuous {
            m.insert("usage".into(), Value::Null);
        }
        m
    }

    fn usage(&self, done_tokens: u32, cached: u32) -> Value {
        json!({
            "prompt_tokens": self.input_tokens,
            "completion_tokens": done_tokens,
            "total_tokens": self.input_tokens + done_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        })
    }

    fn finish_reason(&self) -> &'static str {
        if self.tool.is_some() {
            "tool_calls"
        } else {
            "stop"
        }
    }

    fn time_info(&self, d: &Done) -> Value {
        let s = |d: Duration| d.as_secs_f64();
        json!({
            "queue_time": s(d.queue),
            "prompt_time": s(d.session_init + d.prefill),
            "completion_time": s(d.decode),
            "total_time": s(d.api_overhead + d.engine_ttft() + d.decode),
            "created": unix_now(),
        })
    }

    fn timings(&self, d: &Done) -> Value {
        let prompt_n = d.input_tokens.saturating_sub(d.cached_tokens);
        let prompt_ms = (d.session_init + d.prefill).as_secs_f64() * 1e3;
        // Each predicted token costs one mean step, as llama.cpp counts it.
        let predicted_ms = d.output_tokens as f64 / self.decode_tok_s * 1e3;
        let per = |ms: f64, n: u32| if n == 0 { 0.0 } else { ms / n as f64 };
        let rate = |ms: f64, n: u32| if ms <= 0.0 { 0.0 } else { n as f64 / ms * 1e3 };
        json!({
            "cache_n": d.cached_tokens,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": per(prompt_ms, prompt_n),
            "prompt_per_second": rate(prompt_ms, prompt_n),
            "predicted_n": d.output_tokens,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": per(predicted_ms, d.output_tokens),
            "predicted_per_second": rate(predicted_ms, d.output_tokens),
        })
    }
}

impl Encoder for ChatEncoder {
    fn start(&mut self) -> Vec<(String, String)> {
        let c = self.chunk(json!({"role": "assistant", "content": ""}), None);
        vec![(String::new(), Value::Object(c).to_string())]
    }

    fn before_first(&mut self) -> Vec<(String, String)> {
        match &self.tool {
            Some((call_id, name)) => {
                let delta = json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]});
                vec![(
                    String::new(),
                    Value::Object(self.chunk(delta, None)).to_string(),
                )]
            }
            None => Vec::new(),
        }
    }

    fn delta(&mut self, text: &str, _tokens: u32, cumulative: u32) -> (String, String) {
        if self.tool.is_none() && !self.continuous {
            // The hot path, written directly in the real API's field order.
            let usage = if self.include_usage {
                r#","usage":null"#
            } else {
                ""
            };
            let data = format!(
                r#"{{"id":{},"object":"chat.completion.chunk","created":{},"model":{},"system_fingerprint":"fp_sim","choices":[{{"index":0,"delta":{{"content":{}}},"logprobs":null,"finish_reason":null}}]{usage}}}"#,
                json_string(&self.id),
                self.created,
                json_string(&self.model),
                json_string(text)
            );
            return (String::new(), data);
        }
        let delta = if self.tool.is_some() {
            json!({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})
        } else {
            json!({"content": text})
        };
        let mut c = self.chunk(delta, None);
        if self.continuous {
            c.insert("usage".into(), self.usage(cumulative, 0));
        }
        (String::new(), Value::Object(c).to_string())
    }

    fn finish(&mut self, d: &Done) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut fin = self.chunk(json!({}), Some(self.finish_reason()));
        if self.continuous {
            fin.insert("usage".into(), self.usage(d.output_tokens, d.cached_tokens));
        }
        if self.timing == ChatTiming::Llamacpp {
            fin.insert("timings".into(), self.timings(d));
        }
        if self.timing == ChatTiming::Cerebras && !self.include_usage {
            fin.insert("time_info".into(), self.time_info(d));
        }
        out.push((String::new(), Value::Object(fin).to_string()));
        if self.include_usage {
            let mut u = Map::new();
            u.insert("id".into(), json!(self.id));
            u.insert("object".into(), json!("chat.completion.chunk"));
            u.insert("created".into(), json!(self.created));
            u.insert("model".into(), json!(self.model));
            u.insert("system_fingerprint".into(), json!("fp_sim"));
            u.insert("choices".into(), json!([]));
            u.insert("usage".into(), self.usage(d.output_tokens, d.cached_tokens));
            if self.timing == ChatTiming::Cerebras {
                u.insert("time_info".into(), self.time_info(d));
            }
            out.push((String::new(), Value::Object(u).to_string()));
        }
        out.push((String::new(), "[DONE]".to_string()));
        out
    }
}

/// A request's `messages`, read: the prompt (each message's text and tool calls, a line
/// each) and the last user message's text.
fn read_messages(req: &Map<String, Value>) -> Result<(String, String), ApiError> {
    let bad = |msg: &str, param: &str| ApiError::bad(msg, Some(param), None);
    let messages = match req.get("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => return Err(bad("'messages' must not be empty.", "messages")),
        Some(_) => return Err(bad("'messages' must be an array.", "messages")),
        None => return Err(bad("Missing required parameter: 'messages'.", "messages")),
    };
    let mut prompt = String::new();
    let mut last_user = String::new();
    for (i, m) in messages.iter().enumerate() {
        let Some(role) = m.get("role").and_then(Value::as_str) else {
            return Err(bad(
                &format!("Missing required parameter: 'messages[{i}].role'."),
                &format!("messages[{i}].role"),
            ));
        };
        let text = m.get("content").map(content_text).unwrap_or_default();
        if role == "user" {
            last_user = text.clone();
        }
        prompt.push_str(&text);
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for c in calls {
                prompt.push_str(
                    c.pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                );
                prompt.push_str(
                    c.pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                );
            }
        }
        prompt.push('\n');
    }
    Ok((prompt, last_user))
}

/// The body of a non-streamed chat completion of `done`.
fn completion_body(enc: &ChatEncoder, id: &str, done: &Done) -> Value {
    let message = match &enc.tool {
        Some((call_id, name)) => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": done.text}}]}),
        None => json!({"role": "assistant", "content": done.text}),
    };
    let mut obj = json!({
        "id": id, "object": "chat.completion", "created": enc.created, "model": enc.model,
        "system_fingerprint": "fp_sim",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": enc.finish_reason()}],
        "usage": enc.usage(done.output_tokens, done.cached_tokens),
    });
    match enc.timing {
        ChatTiming::Cerebras => obj["time_info"] = enc.time_info(done),
        ChatTiming::Llamacpp => obj["timings"] = enc.timings(done),
        ChatTiming::None => {}
    }
    obj
}

/// Handles one chat completion request.
pub(crate) async fn handle(ctx: &Ctx, body: &[u8]) -> Result<Response<Body>, ApiError> {
    let req = parse_json(body)?;
    let (prompt, last_user) = read_messages(&req)?;
    let bad = |msg: &str, param: &str| ApiError::bad(msg, Some(param), None);
    let model_name = match req.get("model") {
        Some(Value::String(s)) => s.clone(),
        None => ctx.conn.engine.profile.model.clone(),
        Some(_) => return Err(bad("'model' must be a string.", "model")),
    };
    let stream = opt_bool(&req, "stream")?.unwrap_or(false);
    let ignore_eos = opt_bool(&req, "ignore_eos")?.unwrap_or(false);
    let opts = req.get("stream_options");
    let flag = |k: &str| {
        opts.and_then(|o| o.get(k))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let max_output = match opt_u32(&req, "max_completion_tokens")? {
        Some(n) => n,
        None => opt_u32(&req, "max_tokens")?.unwrap_or(DEFAULT_MAX_OUTPUT),
    };
    let engine = ctx.conn.engine.clone();
    let timing = match ctx.header("x-sim-timing-flavour") {
        Some(v) => ChatTiming::parse(v).ok_or_else(|| {
            bad(
                "x-sim-timing-flavour must be none, cerebras or llamacpp.",
                "x-sim-timing-flavour",
            )
        })?,
        None => engine.profile.chat_timing,
    };
    let tool = forced_tools(req.get("tool_choice"), req.get("tools"))
        .into_iter()
        .next();
    let input_tokens = text::count(&prompt);
    let hash = content_hash(&[body]);
    let mut fault = ctx.fault()?;
    if fault.is_none() {
        let expected = (max_output as f64 * 0.85 / 2.0) as u32;
        fault = Fault::draw(
            &engine.profile.faults,
            &mut Rng::derive(engine.seed, hash ^ 0xfa17),
            expected,
        );
    }
    if let Some(Fault::Status(s)) = fault {
        return Err(ApiError::injected_http(s));
    }
    let id = engine.next_id("chatcmpl-");
    let spec = TurnSpec {
        received_at: ctx.received_at,
        api_tokens: input_tokens,
        input_tokens,
        cached_tokens: 0,
        session_init: true,
        max_output,
        content_hash: hash,
        style: Style::for_prompt(&last_user),
        tool: tool.clone(),
        fault,
        generate: true,
        ignore_eos,
    };
    let mut enc = ChatEncoder {
        id: id.clone(),
        model: model_name,
        created: unix_now() as u64,
        include_usage: flag("include_usage"),
        continuous: flag("continuous_usage_stats"),
        timing,
        tool: tool.map(|n| (engine.next_id("call_"), n)),
        input_tokens,
        decode_tok_s: engine.profile.decode_tok_s,
    };
    if stream {
        let (resp, mut sink) = ctx.sse();
        tokio::spawn(async move {
            let _ = model::run(&engine, &spec, &id, &mut sink, &mut enc).await;
        });
        return Ok(resp);
    }
    let RunEnd::Completed(done) = model::run(&engine, &spec, &id, &mut NullSink, &mut enc).await
    else {
        return Err(ApiError::simulated_failure());
    };
    let obj = completion_body(&enc, &id, &done);
    let resp = ctx.json(StatusCode::OK, &obj);
    record_single_write(&engine, &id, &done);
    Ok(resp)
}
