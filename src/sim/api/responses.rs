//! The Responses API: `response.create` parsing, the event encoder (shared by SSE and the
//! WebSocket mode) and `POST /v1/responses`.
//!
//! Owns: the Responses wire format, conversation history and `store=true` chaining over
//! HTTP. Does not own: the WebSocket connection cache and busy policy (`ws`), timing (`model`).

use std::time::{Duration, Instant};

use http::{Response, StatusCode};
use serde_json::{json, Map, Value};

use super::{content_text, forced_tools, record_single_write, DEFAULT_MAX_OUTPUT};
use crate::rng::Rng;
use crate::sim::fault::Fault;
use crate::sim::model::{self, content_hash, Done, Encoder, Engine, RunEnd, Stored, TurnSpec};
use crate::sim::text::{self, Style};
use crate::sim::wire::{json_string, parse_json, unix_now, ApiError, Body, Ctx, NullSink};

/// A parsed `response.create` / `POST /v1/responses` body.
#[derive(Debug, Clone)]
pub(crate) struct CreateReq {
    pub model: Option<String>,
    pub instructions: String,
    /// New input items, normalised to objects with a `type`.
    pub input: Vec<Value>,
    pub previous_response_id: Option<String>,
    pub store: bool,
    pub max_output: u32,
    pub tool: Option<String>,
    /// Further calls made in the same response (parallel tool calls: `allowed_tools`).
    pub parallel_tools: Vec<String>,
    pub tool_choice: Value,
    pub generate: bool,
    pub stream: bool,
    /// `sim_fault` field (the WebSocket way to ask for a fault per turn).
    pub sim_fault: Option<String>,
    pub hash: u64,
    /// `ignore_eos: true` (or the `x-sim-ignore-eos: true` header): exactly
    /// `max_output_tokens` tokens, as chat completions' `ignore_eos` (how a recorded session
    /// replays its output lengths exactly).
    pub ignore_eos: bool,
}

/// The items of an `input` array, normalised: each an object with a `type` (a bare
/// `role` message gets `"type": "message"`).
fn input_items(items: &[Value]) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let Value::Object(o) = it else {
            return Err(ApiError::bad(
                format!("Invalid 'input[{i}]': expected an object."),
                Some(&format!("input[{i}]")),
                Some("invalid_type"),
            ));
        };
        let mut o = o.clone();
        if !o.contains_key("type") {
            if !o.contains_key("role") {
                return Err(ApiError::bad(
                    format!("Invalid 'input[{i}]': missing 'type'."),
                    Some(&format!("input[{i}].type")),
                    Some("missing_required_parameter"),
                ));
            }
            o.insert("type".into(), json!("message"));
        }
        out.push(Value::Object(o));
    }
    Ok(out)
}

/// Parses the body fields of a create request; unknown fields are ignored.
pub(crate) fn parse_create(m: &Map<String, Value>) -> Result<CreateReq, ApiError> {
    let generate = match m.get("generate") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ApiError::bad(
                "Invalid 'generate': expected a boolean.",
                Some("generate"),
                Some("invalid_type"),
            ))
        }
    };
    let input = match m.get("input") {
        None | Some(Value::Null) if !generate || m.contains_key("previous_response_id") => {
            Vec::new()
        }
        None | Some(Value::Null) => {
            return Err(ApiError::bad(
                "Missing required parameter: 'input'.",
                Some("input"),
                Some("missing_required_parameter"),
            ))
        }
        Some(Value::String(s)) => vec![
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": s}]}),
        ],
        Some(Value::Array(items)) => input_items(items)?,
        Some(_) => {
            return Err(ApiError::bad(
                "Invalid 'input': expected a string or an array of items.",
                Some("input"),
                Some("invalid_type"),
            ))
        }
    };
    let str_field = |k: &str| -> Result<Option<String>, ApiError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::bad(
                format!("Invalid '{k}': expected a string."),
                Some(k),
                Some("invalid_type"),
            )),
        }
    };
    let bool_field = |k: &str, default: bool| -> Result<bool, ApiError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(ApiError::bad(
                format!("Invalid '{k}': expected a boolean."),
                Some(k),
                Some("invalid_type"),
            )),
        }
    };
    let max_output = match m.get("max_output_tokens") {
        None | Some(Value::Null) => DEFAULT_MAX_OUTPUT,
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => n.min(1_000_000) as u32,
            _ => {
                return Err(ApiError::bad(
                    "Invalid 'max_output_tokens': expected a positive integer.",
                    Some("max_output_tokens"),
                    Some("invalid_value"),
                ))
            }
        },
    };
    // The draws (length, timing jitter, faults) depend on what shapes the answer, never on
    // the envelope: the same conversation gets the same answer over SSE (full history,
    // `stream:true`) and over a WebSocket (incremental input, no `stream`), so transports
    // are compared on identical work. The conversation's text is mixed in by the caller.
    let shaping = json!({
        "instructions": m.get("instructions"),
        "max_output": max_output,
        "tool_choice": m.get("tool_choice"),
        "tools": m.get("tools"),
        "generate": generate,
    });
    Ok(CreateReq {
        model: str_field("model")?,
        instructions: str_field("instructions")?.unwrap_or_default(),
        input,
        previous_response_id: str_field("previous_response_id")?,
        store: bool_field("store", true)?,
        max_output,
        tool: forced_tools(m.get("tool_choice"), m.get("tools"))
            .into_iter()
            .next(),
        parallel_tools: forced_tools(m.get("tool_choice"), m.get("tools"))
            .into_iter()
            .skip(1)
            .collect(),
        tool_choice: m.get("tool_choice").cloned().unwrap_or(json!("auto")),
        generate,
        stream: bool_field("stream", false)?,
        ignore_eos: bool_field("ignore_eos", false)?,
        sim_fault: str_field("sim_fault")?,
        hash: content_hash(&[shaping.to_string().as_bytes()]),
    })
}

/// The text of one conversation item, for token counting.
pub(crate) fn item_text(item: &Value) -> String {
    match item.get("type").and_then(Value::as_str) {
        Some("function_call") => {
            let s = |k: &str| {
                item.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            s("name") + &s("arguments")
        }
        Some("function_call_output") => match item.get("output") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => content_text(v),
            None => String::new(),
        },
        _ => item.get("content").map(content_text).unwrap_or_default(),
    }
}

fn tokens_of(items: &[Value]) -> u32 {
    items.iter().map(|i| text::count(&item_text(i))).sum()
}

/// A turn ready to run: its spec, its encoder, and the conversation it extends.
pub(crate) struct Prepared {
    pub spec: TurnSpec,
    pub enc: RespEncoder,
    /// Previous history + this turn's input (the output item is added on completion).
    pub history: Vec<Value>,
    pub id: String,
}

/// How the turn relates to state the server holds.
pub(crate) struct Continuation<'a> {
    /// History of the response this turn continues (None: a fresh conversation).
    pub prev: Option<&'a [Value]>,
    /// The API only processes the new input (WebSocket continuing from its cache).
    pub incremental_api: bool,
    pub session_init: bool,
}

/// Builds the spec and encoder of a turn.
pub(crate) fn prepare(
    engine: &Engine,
    req: &CreateReq,
    cont: Continuation<'_>,
    received_at: Instant,
    fault: Option<Fault>,
    timing_metrics: bool,
) -> Prepared {
    let mut history: Vec<Value> = cont.prev.map(<[Value]>::to_vec).unwrap_or_default();
    history.extend(req.input.iter().cloned());
    let instr = text::count(&req.instructions);
    let input_tokens = instr + tokens_of(&history);
    let new_tokens = tokens_of(&req.input);
    let cached = if cont.prev.is_some() {
        input_tokens - new_tokens
    } else {
        0
    };
    let last_user = history
        .iter()
        .rev()
        .find(|i| i.get("role").and_then(Value::as_str) == Some("user"))
        .map(item_text)
        .unwrap_or_default();
    let mut fault = fault;
    if fault.is_none() && req.generate {
        let expected = (req.max_output as f64 * 0.85 / 2.0) as u32;
        fault = Fault::draw(
            &engine.profile.faults,
            &mut Rng::derive(engine.seed, req.hash ^ 0xfa17),
            expected,
        );
    }
    let id = engine.next_id("resp_");
    // Only the conversation's text seeds the draws: item ids differ from run to run.
    let texts: Vec<String> = history.iter().map(item_text).collect();
    let spec = TurnSpec {
        received_at,
        api_tokens: if cont.incremental_api {
            new_tokens
        } else {
            input_tokens
        },
        input_tokens,
        cached_tokens: cached,
        session_init: cont.session_init,
        max_output: req.max_output,
        content_hash: req.hash
            ^ content_hash(&texts.iter().map(String::as_bytes).collect::<Vec<_>>()),
        style: Style::for_prompt(&last_user),
        tool: req.tool.clone(),
        fault,
        generate: req.generate,
        ignore_eos: req.ignore_eos,
    };
    let enc = RespEncoder {
        id: id.clone(),
        model: req
            .model
            .clone()
            .unwrap_or_else(|| engine.profile.model.clone()),
        created_at: unix_now() as u64,
        seq: 0,
        msg_id: engine.next_id("msg_"),
        tool: req
            .tool
            .clone()
            .map(|n| (engine.next_id("call_"), engine.next_id("fc_"), n)),
        parallel_tools: req
            .parallel_tools
            .iter()
            .map(|n| (engine.next_id("call_"), engine.next_id("fc_"), n.clone()))
            .collect(),
        timing_metrics,
        generate: req.generate,
        echo: json!({
            "instructions": if req.instructions.is_empty() { Value::Null } else { json!(req.instructions) },
            "previous_response_id": req.previous_response_id,
            "store": req.store,
            "max_output_tokens": req.max_output,
            "tool_choice": req.tool_choice,
        }),
        output_item: Vec::new(),
        usage: Value::Null,
    };
    Prepared {
        spec,
        enc,
        history,
        id,
    }
}

/// Encodes a response as Responses API events (the same JSON over SSE and WebSocket).
pub(crate) struct RespEncoder {
    id: String,
    model: String,
    created_at: u64,
    seq: u64,
    msg_id: String,
    /// (call_id, item id, function name)
    tool: Option<(String, String, String)>,
    /// Further calls of the same response (parallel tool calls), made with empty arguments
    /// once the first call's arguments are done.
    parallel_tools: Vec<(String, String, String)>,
    timing_metrics: bool,
    generate: bool,
    echo: Value,
    /// The finished output items (for history and the non-streamed object).
    pub output_item: Vec<Value>,
    pub usage: Value,
}

impl RespEncoder {
    fn ev(&mut self, kind: &str, mut body: Value) -> (String, String) {
        body["type"] = json!(kind);
        body["sequence_number"] = json!(self.seq);
        self.seq += 1;
        (kind.to_string(), body.to_string())
    }

    /// The response object in a given state.
    pub fn response(&self, status: &str, output: Vec<Value>, usage: Value) -> Value {
        let mut r = json!({
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "error": null, "incomplete_details": null, "model": self.model, "output": output,
            "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "tools": [],
            "truncation": "disabled", "text": {"format": {"type": "text"}}, "metadata": {},
            "usage": usage,
        });
        if let (Value::Object(r), Value::Object(e)) = (&mut r, &self.echo) {
            for (k, v) in e {
                r.insert(k.clone(), v.clone());
            }
        }
        if status == "completed" {
            r["completed_at"] = json!(unix_now() as u64);
        }
        r
    }

    fn message_item(&self, status: &str, text: Option<&str>) -> Value {
        let content = match text {
            Some(t) => {
                json!([{"type": "output_text", "text": t, "annotations": [], "logprobs": []}])
            }
            None => json!([]),
        };
        json!({"id": self.msg_id, "type": "message", "status": status, "role": "assistant", "content": content})
    }

    fn call_item(&self, status: &str, args: &str) -> Value {
        let (call_id, item_id, name) = self.tool.clone().unwrap_or_default();
        json!({"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": args})
    }

    fn timing_event(&self, d: &Done) -> (String, String) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let tbt = ms(d.decode) / (d.output_tokens.max(2) - 1) as f64;
        let engine_total = d.engine_ttft() + d.decode;
        let body = json!({"type": "responsesapi.websocket_timing", "timing_metrics": {
            "responses_duration_excl_engine_and_client_tool_time_ms": ms(d.api_overhead),
            "engine_service_total_ms": ms(engine_total),
            "engine_service_ttft_total_ms": ms(d.engine_ttft()),
            "engine_iapi_ttft_total_ms": ms(d.session_init + d.prefill),
            "engine_service_tbt_across_engine_calls_ms": tbt,
            "engine_iapi_tbt_across_engine_calls_ms": tbt,
        }});
        (
            "responsesapi.websocket_timing".to_string(),
            body.to_string(),
        )
    }
}

impl Encoder for RespEncoder {
    fn start(&mut self) -> Vec<(String, String)> {
        let r = self.response("in_progress", vec![], Value::Null);
        let mut out = vec![self.ev("response.created", json!({"response": r}))];
        if self.generate {
            let r = self.response("in_progress", vec![], Value::Null);
            out.push(self.ev("response.in_progress", json!({"response": r})));
        }
        out
    }

    fn before_first(&mut self) -> Vec<(String, String)> {
        if self.tool.is_some() {
            let item = self.call_item("in_progress", "");
            return vec![self.ev(
                "response.output_item.added",
                json!({"output_index": 0, "item": item}),
            )];
        }
        let item = self.message_item("in_progress", None);
        let id = self.msg_id.clone();
        vec![
            self.ev(
                "response.output_item.added",
                json!({"output_index": 0, "item": item}),
            ),
            self.ev(
                "response.content_part.added",
                json!({"item_id": id, "output_index": 0, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
        ]
    }

    fn delta(&mut self, text: &str, _tokens: u32, _cumulative: u32) -> (String, String) {
        if let Some((_, item_id, _)) = self.tool.clone() {
            return self.ev(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": 0, "delta": text}),
            );
        }
        // The hot path (one event per chunk at up to thousands per second per stream) is
        // written directly, in the field order the real API uses, instead of via a `Value`.
        let kind = "response.output_text.delta";
        let data = format!(
            r#"{{"type":"{kind}","sequence_number":{},"item_id":{},"output_index":0,"content_index":0,"delta":{},"logprobs":[]}}"#,
            self.seq,
            json_string(&self.msg_id),
            json_string(text)
        );
        self.seq += 1;
        (kind.to_string(), data)
    }

    fn finish(&mut self, d: &Done) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut output = Vec::new();
        if self.generate {
            let item = if let Some((_, item_id, _)) = self.tool.clone() {
                out.push(self.ev(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": 0, "arguments": d.text}),
                ));
                self.call_item("completed", &d.text)
            } else {
                let id = self.msg_id.clone();
                out.push(self.ev("response.output_text.done", json!({"item_id": id, "output_index": 0, "content_index": 0, "text": d.text, "logprobs": []})));
                out.push(self.ev(
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": 0, "content_index": 0,
                    "part": {"type": "output_text", "text": d.text, "annotations": []}}),
                ));
                self.message_item("completed", Some(&d.text))
            };
            out.push(self.ev(
                "response.output_item.done",
                json!({"output_index": 0, "item": item}),
            ));
            self.output_item.push(item.clone());
            output.push(item);
            for (i, (call_id, item_id, name)) in self.parallel_tools.clone().into_iter().enumerate()
            {
                let item = |status: &str, args: &str| json!({"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": args});
                let at = i + 1;
                out.push(self.ev(
                    "response.output_item.added",
                    json!({"output_index": at, "item": item("in_progress", "")}),
                ));
                out.push(self.ev(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": at, "arguments": "{}"}),
                ));
                out.push(self.ev(
                    "response.output_item.done",
                    json!({"output_index": at, "item": item("completed", "{}")}),
                ));
                self.output_item.push(item("completed", "{}"));
                output.push(item("completed", "{}"));
            }
        }
        if self.timing_metrics {
            out.push(self.timing_event(d));
        }
        self.usage = json!({
            "input_tokens": d.input_tokens,
            "input_tokens_details": {"cached_tokens": d.cached_tokens},
            "output_tokens": d.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": d.input_tokens + d.output_tokens,
        });
        let r = self.response("completed", output, self.usage.clone());
        out.push(self.ev("response.completed", json!({"response": r})));
        out
    }
}

/// `POST /v1/responses`.
pub(crate) async fn handle_http(ctx: &Ctx, body: &[u8]) -> Result<Response<Body>, ApiError> {
    let m = parse_json(body)?;
    let mut req = parse_create(&m)?;
    req.ignore_eos |= ctx.ignore_eos();
    let engine = ctx.conn.engine.clone();
    let prev = match &req.previous_response_id {
        Some(id) => Some(
            engine
                .store_get(id)
                .ok_or_else(|| ApiError::prev_not_found(id))?,
        ),
        None => None,
    };
    let mut fault = ctx.fault()?;
    if fault.is_none() {
        if let Some(s) = &req.sim_fault {
            fault = Some(Fault::parse(s).map_err(|e| ApiError::bad(e, Some("sim_fault"), None))?);
        }
    }
    if let Some(Fault::Status(s)) = fault {
        return Err(ApiError::injected_http(s));
    }
    // Over HTTP the API re-processes the whole (hydrated) context; a stored chain keeps the
    // model-side cache (no session init, history not prefilled again).
    let cont = Continuation {
        prev: prev.as_ref().map(|p| p.history.as_slice()),
        incremental_api: false,
        session_init: prev.is_none(),
    };
    let Prepared {
        spec,
        mut enc,
        history,
        id,
    } = prepare(
        &engine,
        &req,
        cont,
        ctx.received_at,
        fault,
        ctx.timing_metrics(),
    );
    if let Some(Fault::Status(s)) = spec.fault {
        return Err(ApiError::injected_http(s));
    }
    let store = req.store;
    if req.stream {
        let (resp, mut sink) = ctx.sse();
        tokio::spawn(async move {
            if let RunEnd::Completed(_) = model::run(&engine, &spec, &id, &mut sink, &mut enc).await
            {
                if store {
                    remember(&engine, &id, history, &enc);
                }
            }
        });
        return Ok(resp);
    }
    let RunEnd::Completed(done) = model::run(&engine, &spec, &id, &mut NullSink, &mut enc).await
    else {
        return Err(ApiError::simulated_failure());
    };
    let output: Vec<Value> = enc.output_item.clone();
    let obj = enc.response("completed", output, enc.usage.clone());
    if store {
        remember(&engine, &id, history, &enc);
    }
    let resp = ctx.json(StatusCode::OK, &obj);
    record_single_write(&engine, &id, &done);
    Ok(resp)
}

/// Keeps a finished response server-side for `previous_response_id` over HTTP.
pub(crate) fn remember(engine: &Engine, id: &str, mut history: Vec<Value>, enc: &RespEncoder) {
    history.extend(enc.output_item.iter().cloned());
    engine.store_put(id, Stored { history });
}
