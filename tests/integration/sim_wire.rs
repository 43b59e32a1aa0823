//! Wire tests of the simulator: event order and shapes, usage vs the trace, errors.

use serde_json::{json, Value};

use crate::support::sim_client::*;

const CHAT: &str = r#"{"model":"sim","stream":true,"max_tokens":60,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Write a snake game in Python"}]}"#;

#[tokio::test]
async fn chat_sse_has_prelude_deltas_finish_usage_done_and_usage_matches_trace() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let r = post(&mut c, "/chat/completions", CHAT, &[]).await;
    assert_eq!(r.status, 200);
    assert!(
        r.headers.contains_key("x-request-id") && r.headers.contains_key("openai-processing-ms")
    );
    assert_eq!(r.events.last().unwrap().data, "[DONE]");
    let d = r.data();
    assert_eq!(
        d[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    let n = d.len();
    assert_eq!(d[n - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(d[n - 1]["choices"], json!([]));
    let usage = &d[n - 1]["usage"];
    let content: String = d[1..n - 2]
        .iter()
        .map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let id = d[0]["id"].as_str().unwrap();
    let t = h.trace.get(id).expect("trace");
    assert_eq!(
        usage["completion_tokens"].as_u64().unwrap() as u32,
        t.output_tokens
    );
    assert_eq!(
        t.chunk_writes.iter().map(|w| w.tokens).sum::<u32>(),
        t.output_tokens
    );
    assert_eq!(t.chunk_writes.len(), n - 3);
    assert!((42..=60).contains(&t.output_tokens), "{}", t.output_tokens);
    assert_eq!(
        t.chunk_writes
            .iter()
            .map(|w| w.text.as_str())
            .collect::<String>(),
        content
    );
    assert_eq!(
        usage["prompt_tokens"].as_u64().unwrap() as u32,
        t.input_tokens
    );
    assert_eq!(
        t.input_tokens,
        spark_bench::sim::text::count("be brief\nWrite a snake game in Python\n")
    );
    // Same request, same seed: same text.
    let r2 = post(&mut c, "/chat/completions", CHAT, &[]).await;
    let content2: String = r2.data()[1..r2.data().len() - 2]
        .iter()
        .map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(content, content2);
    // Trace over HTTP.
    let tj = get(&mut c, &format!("/sim/trace/{id}")).await.json();
    assert_eq!(
        tj["output_tokens"].as_u64().unwrap() as u32,
        t.output_tokens
    );
    assert_eq!(
        tj["chunk_writes"].as_array().unwrap().len(),
        t.chunk_writes.len()
    );
    let models = get(&mut c, "/models").await.json();
    assert_eq!(models["data"][0]["id"], "sim-fast");
}

#[tokio::test]
async fn chat_continuous_usage_timing_flavours_non_stream_and_tool_calls() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let body = r#"{"model":"sim","stream":true,"max_tokens":30,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"messages":[{"role":"user","content":"hi"}]}"#;
    let r = post(
        &mut c,
        "/chat/completions",
        body,
        &[("x-sim-timing-flavour", "cerebras")],
    )
    .await;
    let d = r.data();
    let mut prev = 0;
    for ch in &d[1..d.len() - 2] {
        let cum = ch["usage"]["completion_tokens"].as_u64().unwrap();
        assert!(cum > prev);
        prev = cum;
    }
    let last = d.last().unwrap();
    assert_eq!(last["usage"]["completion_tokens"].as_u64().unwrap(), prev);
    for k in [
        "queue_time",
        "prompt_time",
        "completion_time",
        "total_time",
        "created",
    ] {
        assert!(last["time_info"][k].is_number(), "{k}");
    }
    let r = post(
        &mut c,
        "/chat/completions",
        body,
        &[("x-sim-timing-flavour", "llamacpp")],
    )
    .await;
    let d = r.data();
    let fin = &d[d.len() - 2];
    assert_eq!(fin["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        fin["timings"]["predicted_n"],
        d.last().unwrap()["usage"]["completion_tokens"]
    );
    assert!(fin["timings"]["prompt_ms"].is_number());
    // Non-streamed.
    let r = post(
        &mut c,
        "/chat/completions",
        r#"{"model":"sim","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}"#,
        &[],
    )
    .await;
    let j = r.json();
    assert_eq!(j["object"], "chat.completion");
    let t = h.trace.get(j["id"].as_str().unwrap()).unwrap();
    assert_eq!(
        j["usage"]["completion_tokens"].as_u64().unwrap() as u32,
        t.output_tokens
    );
    let text = j["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!text.is_empty());
    assert_eq!(t.chunk_writes.len(), 1, "a non-streamed body is one write");
    assert_eq!(t.chunk_writes[0].text, text);
    // Forced tool call, with a tool message in the history.
    let body = json!({"model":"sim","stream":true,"messages":[
        {"role":"user","content":"find main"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"grep","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"src/main.rs:1: fn main"}],
        "tools":[{"type":"function","function":{"name":"grep","parameters":{}}}],
        "tool_choice":{"type":"function","function":{"name":"grep"}}});
    let r = post(&mut c, "/chat/completions", &body.to_string(), &[]).await;
    let d = r.data();
    let first = &d[1]["choices"][0]["delta"]["tool_calls"][0];
    assert!(first["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(first["function"]["name"], "grep");
    let args: String = d[1..d.len() - 1]
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert!(serde_json::from_str::<Value>(&args).is_ok(), "{args}");
    assert_eq!(
        d.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

const RESP_ORDER: [&str; 3] = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
];

fn check_responses_order(types: &[String]) {
    assert_eq!(&types[..3], &RESP_ORDER);
    assert_eq!(types[3], "response.content_part.added");
    let n = types.len();
    assert!(
        types[4..n - 4]
            .iter()
            .all(|t| t == "response.output_text.delta"),
        "{types:?}"
    );
    assert_eq!(
        &types[n - 4..],
        &[
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
}

#[tokio::test]
async fn responses_sse_order_usage_store_chaining_and_tool_calls() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let body = r#"{"model":"sim","stream":true,"max_output_tokens":40,"instructions":"You code.","input":"Write fizzbuzz in Rust","stream_options":{"include_obfuscation":false}}"#;
    let r = post(&mut c, "/responses", body, &[]).await;
    assert_eq!(r.status, 200);
    let types: Vec<String> = r.events.iter().map(|e| e.event.clone().unwrap()).collect();
    check_responses_order(&types);
    let d = r.data();
    for (i, e) in d.iter().enumerate() {
        assert_eq!(e["sequence_number"].as_u64().unwrap(), i as u64);
        assert_eq!(e["type"].as_str().unwrap(), types[i]);
    }
    let done = &d.last().unwrap()["response"];
    let id = done["id"].as_str().unwrap();
    let t = h.trace.get(id).unwrap();
    assert_eq!(
        done["usage"]["output_tokens"].as_u64().unwrap() as u32,
        t.output_tokens
    );
    assert_eq!(
        done["usage"]["input_tokens"].as_u64().unwrap() as u32,
        t.input_tokens
    );
    assert_eq!(done["usage"]["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(
        done["usage"]["output_tokens_details"]["reasoning_tokens"],
        0
    );
    assert_eq!(
        t.chunk_writes.len(),
        types
            .iter()
            .filter(|t| *t == "response.output_text.delta")
            .count()
    );
    assert!(!r.body.contains("[DONE]"));
    // store=true (the default) chains over HTTP.
    let body2 = json!({"model":"sim","stream":true,"max_output_tokens":10,"previous_response_id":id,"input":"again"});
    let r2 = post(&mut c, "/responses", &body2.to_string(), &[]).await;
    let last = r2.data().last().unwrap().clone();
    assert_eq!(last["type"], "response.completed");
    let t2 = h
        .trace
        .get(last["response"]["id"].as_str().unwrap())
        .unwrap();
    // Instructions do not carry over a chain; the previous input and output do, as cache.
    let instr = spark_bench::sim::text::count("You code.");
    assert_eq!(
        t2.cached_input_tokens,
        t.input_tokens - instr + t.output_tokens
    );
    assert_eq!(
        t2.input_tokens,
        t2.cached_input_tokens + spark_bench::sim::text::count("again")
    );
    assert_eq!(t2.session_init, std::time::Duration::ZERO);
    let r3 = post(
        &mut c,
        "/responses",
        r#"{"model":"sim","previous_response_id":"resp_nope","input":"x"}"#,
        &[],
    )
    .await;
    assert_eq!(r3.status, 400);
    assert_eq!(r3.json()["error"]["code"], "previous_response_not_found");
    assert_eq!(r3.json()["error"]["param"], "previous_response_id");
    // Forced function call; function_call and function_call_output items accepted as input.
    let body = json!({"model":"sim","stream":true,"input":[
        {"type":"message","role":"user","content":"find main"},
        {"type":"function_call","call_id":"call_0","name":"grep","arguments":"{}"},
        {"type":"function_call_output","call_id":"call_0","output":"nothing"}],
        "tools":[{"type":"function","name":"grep","parameters":{}}],"tool_choice":{"type":"function","name":"grep"}});
    let r = post(&mut c, "/responses", &body.to_string(), &[]).await;
    let d = r.data();
    assert_eq!(d[2]["item"]["type"], "function_call");
    assert_eq!(d[2]["item"]["name"], "grep");
    let args: String = d
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap().to_string())
        .collect();
    let done_ev = d
        .iter()
        .find(|e| e["type"] == "response.function_call_arguments.done")
        .unwrap();
    assert_eq!(done_ev["arguments"].as_str().unwrap(), args);
    let out = &d.last().unwrap()["response"]["output"][0];
    assert_eq!(out["type"], "function_call");
    assert!(out["call_id"].as_str().unwrap().starts_with("call_"));
    // Non-streamed with "required".
    let r = post(&mut c, "/responses", r#"{"model":"sim","input":"x","tool_choice":"required","tools":[{"type":"function","name":"ls"}]}"#, &[]).await;
    assert_eq!(r.json()["output"][0]["name"], "ls");
    assert_eq!(r.json()["status"], "completed");
}

#[tokio::test]
async fn timing_metrics_event_on_sse_when_asked() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let r = post(
        &mut c,
        "/responses",
        r#"{"model":"sim","stream":true,"max_output_tokens":10,"input":"hi"}"#,
        &[("x-responsesapi-include-timing-metrics", "true")],
    )
    .await;
    let d = r.data();
    let tm = &d[d.len() - 2];
    assert_eq!(tm["type"], "responsesapi.websocket_timing");
    let t = h
        .trace
        .get(d.last().unwrap()["response"]["id"].as_str().unwrap())
        .unwrap();
    let api_ms = tm["timing_metrics"]["responses_duration_excl_engine_and_client_tool_time_ms"]
        .as_f64()
        .unwrap();
    assert!((api_ms - t.api_overhead.as_secs_f64() * 1e3).abs() < 1e-6);
    assert!(
        tm["timing_metrics"]["engine_service_ttft_total_ms"]
            .as_f64()
            .unwrap()
            >= 0.0
    );
}

#[tokio::test]
async fn malformed_requests_get_4xx_json_and_garbage_never_kills_the_server() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let cases: &[(&str, &str, &str)] = &[
        ("/chat/completions", "{bad", ""),
        ("/chat/completions", "[1,2]", ""),
        ("/chat/completions", r#"{"model":"sim"}"#, "messages"),
        (
            "/chat/completions",
            r#"{"model":"sim","messages":[{"content":"x"}]}"#,
            "messages[0].role",
        ),
        (
            "/chat/completions",
            r#"{"model":"sim","messages":[{"role":"user","content":"x"}],"max_tokens":"many"}"#,
            "max_tokens",
        ),
        ("/responses", r#"{"model":"sim"}"#, "input"),
        ("/responses", r#"{"model":"sim","input":[3]}"#, "input[0]"),
        (
            "/responses",
            r#"{"model":"sim","input":"x","stream":"yes"}"#,
            "stream",
        ),
    ];
    for (path, body, param) in cases {
        let r = post(&mut c, path, body, &[]).await;
        assert_eq!(r.status, 400, "{path} {body}");
        let j = r.json();
        assert_eq!(j["error"]["type"], "invalid_request_error", "{body}");
        assert!(j["error"]["message"].as_str().unwrap().len() > 5);
        if !param.is_empty() {
            assert_eq!(j["error"]["param"], *param, "{body}");
        }
    }
    let r = get(&mut c, "/nowhere").await;
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"].is_string());
    let r = post(
        &mut c,
        "/chat/completions",
        r#"{"model":"sim","messages":[{"role":"user","content":"x"}]}"#,
        &[("x-sim-fault", "explode")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["param"], "x-sim-fault");
    // Fuzz-ish: seeded garbage bodies and frames.
    let mut rng = spark_bench::rng::Rng::new(99);
    let seeds = [
        CHAT,
        r#"{"model":"sim","input":"hi","max_output_tokens":3}"#,
    ];
    for i in 0..60 {
        let base = seeds[i % 2].as_bytes();
        let mut b = base.to_vec();
        for _ in 0..1 + rng.below(6) {
            let p = rng.below(b.len() as u64) as usize;
            b[p] = rng.below(256) as u8;
        }
        let body = String::from_utf8_lossy(&b).to_string();
        let path = if i % 2 == 0 {
            "/chat/completions"
        } else {
            "/responses"
        };
        let r = post(&mut c, path, &body, &[]).await;
        assert!(
            r.status == 200 || (400..500).contains(&r.status),
            "{}",
            r.status
        );
    }
    let mut ws = ws_to(&h, &[]).await;
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    for junk in [
        "",
        "{",
        "[]",
        "{\"type\":\"nope\"}",
        "{\"type\":\"response.create\",\"input\":5}",
        "\u{0}\u{1}",
    ] {
        ws.send(Message::text(junk)).await.unwrap();
        let evs = ws_until(&mut ws, "error").await;
        let e = &evs.last().unwrap().1;
        assert_eq!(e["type"], "error", "{junk}");
        assert_eq!(e["status"], 400);
    }
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    assert_eq!(
        ws_until(&mut ws, "error").await.last().unwrap().1["type"],
        "error"
    );
    // Still serving.
    ws_send(&mut ws, create("hi", json!({"max_output_tokens": 5}))).await;
    assert_eq!(
        ws_until(&mut ws, "response.completed")
            .await
            .last()
            .unwrap()
            .1["type"],
        "response.completed"
    );
}

#[tokio::test]
async fn beyond_capacity_requests_queue_fifo() {
    let mut p = spark_bench::sim::Profile::builtin("fast").unwrap();
    p.capacity = 1;
    p.decode_tok_s = 2000.0;
    let h = spark_bench::sim::spawn(spark_bench::sim::SimConfig::new(p))
        .await
        .unwrap();
    let body = r#"{"model":"sim","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#;
    let (mut a, mut b) = (h1_to(&h).await, h1_to(&h).await);
    let (ra, rb) = tokio::join!(
        post(&mut a, "/chat/completions", body, &[]),
        post(&mut b, "/chat/completions", body, &[])
    );
    let ta = h.trace.get(ra.data()[0]["id"].as_str().unwrap()).unwrap();
    let tb = h.trace.get(rb.data()[0]["id"].as_str().unwrap()).unwrap();
    let (first, second) = if ta.queue < tb.queue {
        (ta, tb)
    } else {
        (tb, ta)
    };
    // The second generation waited for the first one's slot, and started after it ended.
    assert!(
        second.queue > std::time::Duration::from_millis(20),
        "{:?}",
        second.queue
    );
    assert!(second.chunk_writes[0].at >= first.chunk_writes.last().unwrap().at);
}

#[tokio::test]
async fn http2_over_tls_via_alpn_streams_sse() {
    let cert = spark_bench::tls::SelfSigned::generate().unwrap();
    let mut cfg =
        spark_bench::sim::SimConfig::new(spark_bench::sim::Profile::builtin("fast").unwrap());
    cfg.tls = Some(cert.clone());
    let h = spark_bench::sim::spawn(cfg).await.unwrap();
    assert!(h.base_url.starts_with("https://127.0.0.1:"));
    let o = open(h.addr, Some(&cert), None, &[b"h2"]).await;
    let (mut tx, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(o.io),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::post(format!("{}/responses", h.base_url))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            r#"{"model":"sim","stream":true,"max_output_tokens":20,"input":"hi"}"#,
        )))
        .unwrap();
    let resp = tx.send_request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert!(resp.headers().contains_key("openai-processing-ms"));
    use http_body_util::BodyExt;
    let body = String::from_utf8(
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(
        body.trim_end().ends_with('}') && body.contains("event: response.completed"),
        "{body}"
    );
}

#[tokio::test]
async fn require_api_key_and_random_profile_faults() {
    let mut p = spark_bench::sim::Profile::builtin("fast").unwrap();
    p.require_api_key = true;
    p.faults.status_429 = 1.0;
    let h = spark_bench::sim::spawn(spark_bench::sim::SimConfig::new(p))
        .await
        .unwrap();
    let mut c = h1_to(&h).await;
    let req = http::Request::get("/v1/models")
        .header("host", "x")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    c.ready().await.unwrap();
    let r = c.send_request(req).await.unwrap();
    assert_eq!(r.status(), 401);
    // `post` sends an Authorization header; every request draws the 429 fault.
    let r = post(&mut c, "/chat/completions", CHAT, &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.json()["error"]["code"], "rate_limit_exceeded");
}

#[tokio::test]
async fn sim_ttft_summarises_the_servers_own_first_writes() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let start = get(&mut c, "/sim/ttft").await.json();
    assert_eq!(start["responses"], 0);
    assert!(start["p50_ms"].is_null());
    assert_eq!(start["next"], 0);
    for _ in 0..3 {
        assert_eq!(
            post(&mut c, "/chat/completions", CHAT, &[]).await.status,
            200
        );
    }
    let all = get(&mut c, "/sim/ttft").await.json();
    assert_eq!(
        (all["responses"].as_u64(), all["next"].as_u64()),
        (Some(3), Some(3))
    );
    // Only the responses from sequence number 1 on: the second and the third.
    let later = get(&mut c, "/sim/ttft?since=1").await.json();
    assert_eq!(later["responses"], 2);
    assert_eq!(
        get(&mut c, "/sim/ttft?since=3").await.json()["responses"],
        0
    );
    assert_eq!(get(&mut c, "/sim/ttft?since=-1").await.status, 400);
    // The same figures from the trace itself: request read → first content chunk written.
    let traces = h.trace.all();
    let own: Vec<f64> = traces[1..]
        .iter()
        .map(|t| {
            let model = t.api_overhead + t.queue + t.session_init + t.prefill;
            let ttft = t.chunk_writes[0].at.duration_since(t.received_at);
            // The simulator waits out its timing model before the first chunk.
            assert!(ttft >= model, "{ttft:?} < {model:?}");
            ttft.as_secs_f64() * 1e3
        })
        .collect();
    let max = own.iter().cloned().fold(f64::MIN, f64::max);
    let min = own.iter().cloned().fold(f64::MAX, f64::min);
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-6;
    assert!(close(&later["max_ms"], max), "{later} vs {own:?}");
    // Nearest rank: the median of two is the lower.
    assert!(close(&later["p50_ms"], min), "{later} vs {own:?}");
    assert!(close(&later["mean_ms"], (min + max) / 2.0), "{later}");
}
