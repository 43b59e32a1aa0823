//! Decode rates: measured from the trace's write times and from the client's arrival times,
//! within 5% of each profile's `decode_tok_s`.

use std::time::Instant;

use serde_json::Value;

use crate::support::sim_client::*;

/// Streams one response and returns (rate from trace, rate from client arrivals, tokens).
async fn measure(profile: &str, max_tokens: u32) -> (f64, f64, u32) {
    let _serial = SERIAL.lock().await;
    let h = sim(profile).await;
    let mut c = h1_to(&h).await;
    let body = format!(
        r#"{{"model":"sim","stream":true,"max_tokens":{max_tokens},"stream_options":{{"include_usage":true}},"messages":[{{"role":"user","content":"Write a snake game"}}]}}"#
    );
    let r = post(&mut c, "/chat/completions", &body, &[]).await;
    let d: Vec<(Instant, Value)> = r
        .events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| (e.at, e.json()))
        .collect();
    let content: Vec<&(Instant, Value)> = d
        .iter()
        .filter(|(_, v)| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .collect();
    let id = d[0].1["id"].as_str().unwrap();
    let t = h.trace.get(id).unwrap();
    let usage = d.last().unwrap().1["usage"]["completion_tokens"]
        .as_u64()
        .unwrap() as u32;
    assert_eq!(usage, t.output_tokens);
    assert_eq!(content.len(), t.chunk_writes.len());
    let after_first = (t.output_tokens - t.chunk_writes[0].tokens) as f64;
    let w = &t.chunk_writes;
    let trace_rate = after_first / (w.last().unwrap().at - w[0].at).as_secs_f64();
    let client_rate = after_first / (content.last().unwrap().0 - content[0].0).as_secs_f64();
    (trace_rate, client_rate, t.output_tokens)
}

fn check(profile: &str, (trace, client, n): (f64, f64, u32)) {
    let want = spark_bench::sim::Profile::builtin(profile)
        .unwrap()
        .decode_tok_s();
    eprintln!(
        "{profile}: {n} tokens, trace {trace:.1} tok/s, client {client:.1} tok/s (profile {want})"
    );
    assert!(
        (trace / want - 1.0).abs() < 0.05,
        "{profile} trace rate {trace}"
    );
    assert!(
        (client / want - 1.0).abs() < 0.05,
        "{profile} client rate {client}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_decode_rate_holds() {
    check("gpu", measure("gpu", 140).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wafer_decode_rate_holds() {
    check("wafer", measure("wafer", 2000).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_decode_rate_holds() {
    check("cpu", measure("cpu", 34).await);
}
