//! Peers' datasets replayed through `run` against the embedded simulator: vLLM's ShareGPT
//! JSON array (first human turn, capped at the gpt reply's length) and an AIPerf mooncake
//! trace (synthetic prompts of the trace's input lengths, its output lengths, its arrival
//! instants as the schedule), each checked request by request; a bad file stops the run
//! naming the line and the formats read; `run --url` without `--model` takes the model
//! that a real server's `GET /v1/models` lists, and says why when it cannot.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use spark_bench::plan::workload::tokens_by_rule;
use spark_bench::sim::text;
use spark_bench::store::LoadedRun;

use crate::binary::{csv_maps, only_run, run_bin, texts};
use crate::support::run::{records, run_lib, scenario};

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/datasets")
        .join(name)
}

/// A scenario replaying `dataset` (copied beside it) against the simulator at `base_url`,
/// with `ignore_eos` so every reply is exactly its `max_tokens`.
fn dataset_scenario(dir: &Path, dataset: &str, base_url: &str) -> std::path::PathBuf {
    std::fs::copy(data(dataset), dir.join(dataset)).unwrap();
    scenario(
        dir,
        "d.toml",
        &format!(
            r#"
name = "dataset-check"
seed = 1

[load]
cache = "as-is"

[matrix]
targets = ["sim"]
transports = ["http-pooled"]

[targets.sim]
base_url = "{base_url}"
model = "sim-fast"
api = "chat-completions"
ignore_eos = true

[workload]
dataset = "{dataset}"
"#
        ),
    )
}

async fn sim() -> spark_bench::sim::SimHandle {
    let profile = spark_bench::sim::Profile::builtin("fast").unwrap();
    spark_bench::sim::spawn(spark_bench::sim::SimConfig::new(profile))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_sharegpt_json_replays_first_turns_with_their_reply_lengths() {
    let sim = sim().await;
    let tmp = testkit::tempdir().unwrap();
    let s = dataset_scenario(tmp.path(), "sharegpt_vllm.json", &sim.base_url);
    let outcome = run_lib(&s, &tmp.path().join("out"), &[]).await;
    let run = LoadedRun::open(&outcome.dir).unwrap();
    let plan = run.manifest.plan().unwrap();
    let info = plan.workload.clone().unwrap();
    // Six elements, two left out by vLLM's rule (no human turn answered by gpt).
    assert_eq!((info.conversations, info.sampled), (4, 4));
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.starts_with("left out 2 of 6 conversations")));
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("sharegpt_vllm.json")).unwrap())
            .unwrap();
    let recs = records(&run);
    assert_eq!(recs.len(), 4);
    let mut prompts = Vec::new();
    for r in &recs {
        assert!(r.is_ok(), "{r:?}");
        let session = plan.sessions.get(r.session as usize).unwrap();
        let turn = &session.turns[0];
        // The element this prompt is the first human turn of, and the gpt reply after it.
        let conv = file
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["conversations"].as_array().unwrap())
            .find(|c| {
                c.iter()
                    .position(|m| m["value"] == *turn.user_text)
                    .is_some_and(|k| c[k]["from"] == "human")
            })
            .expect("each prompt is a human turn of the file");
        let k = conv
            .iter()
            .position(|m| m["value"] == *turn.user_text)
            .unwrap();
        let reply = conv[k + 1]["value"].as_str().unwrap();
        assert_eq!(turn.max_output_tokens, tokens_by_rule(reply));
        assert_eq!(r.output_tokens, turn.max_output_tokens);
        // The server counts the prompt as sent (+1 for the chat template's message).
        assert_eq!(r.input_tokens, Some(text::count(&turn.user_text) + 1));
        prompts.push(turn.user_text.to_string());
    }
    prompts.sort();
    assert_eq!(prompts[0], "List three sorting algorithms.", "{prompts:?}");
    assert!(prompts.contains(&"Write a haiku about latency.".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mooncake_trace_is_replayed_at_its_instants_with_its_lengths() {
    let sim = sim().await;
    let tmp = testkit::tempdir().unwrap();
    let s = dataset_scenario(tmp.path(), "mooncake_trace.jsonl", &sim.base_url);
    let outcome = run_lib(&s, &tmp.path().join("out"), &[]).await;
    let run = LoadedRun::open(&outcome.dir).unwrap();
    let mut recs = records(&run);
    assert_eq!(recs.len(), 5);
    assert!(recs.iter().all(|r| r.is_ok()), "{recs:?}");
    recs.sort_by_key(|r| (r.intended_ns, r.session));
    // input_length tokens (+1: the chat template), output_length tokens, in time order.
    let mut got: Vec<(Option<u32>, u32)> = recs
        .iter()
        .map(|r| (r.input_tokens, r.output_tokens))
        .collect();
    let mut want: Vec<(Option<u32>, u32)> = [(701, 12), (1101, 20), (301, 8), (521, 5), (65, 16)]
        .iter()
        .map(|&(i, o)| (Some(i), o))
        .collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    // Each was sent at its trace instant (0, 150, 300, 300, 800 ms after the first).
    let t0 = recs[0].dispatch_ns;
    let offsets: Vec<f64> = recs
        .iter()
        .map(|r| (r.dispatch_ns - t0) as f64 / 1e6)
        .collect();
    for (got, want) in offsets.iter().zip([0.0, 150.0, 300.0, 300.0, 800.0]) {
        assert!(
            *got >= want - 2.0 && *got < want + 60.0,
            "sent {got:.1} ms after the first, the trace says {want} ({offsets:?})"
        );
    }
    let order: Vec<Option<u32>> = recs.iter().map(|r| r.input_tokens).collect();
    assert_eq!(order[0], Some(701));
    assert_eq!(order[1], Some(1101));
    assert_eq!(order[4], Some(65));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_dataset_stops_the_run_naming_the_line_and_the_formats() {
    let tmp = testkit::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bad.jsonl"),
        "{\"text\": \"fine\"}\n{\"prompt\": \"not a format we read\"}\n",
    )
    .unwrap();
    let s = scenario(
        tmp.path(),
        "bad.toml",
        "name = \"bad\"\n[matrix]\ntargets = [\"sim-wafer\"]\n[workload]\ndataset = \"bad.jsonl\"\n",
    );
    let out = tmp.path().join("out");
    let o = run_bin(
        &[
            "run",
            s.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        &[],
    )
    .await;
    let (_, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.jsonl:2: has none of the keys"),
        "{stderr}"
    );
    for f in [
        "openai (JSONL",
        "sharegpt (JSONL",
        "sharegpt-json",
        "aiperf-single-turn",
        "aiperf-multi-turn",
        "mooncake (JSONL",
    ] {
        assert!(stderr.contains(f), "{f}: {stderr}");
    }
    assert!(stderr.contains("set `format` in [workload]"), "{stderr}");
    assert!(!out.exists());
}

/// A one-connection-at-a-time HTTP/1.1 server on 127.0.0.1:0 answering every request with
/// `status` and `body`; returns its base URL (`…/v1`).
fn answering(status: &'static str, body: &'static str) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = write!(
                c,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_without_model_takes_the_model_v1_models_lists() {
    // The embedded simulator answers GET /v1/models with its profile's model.
    let sim = sim().await;
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("ok");
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--url",
            &sim.base_url,
            "--transport",
            "http-pooled",
            "--out",
            out.to_str().unwrap(),
            "-q",
            "--no-report",
        ],
        &[],
    )
    .await;
    let (_, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "--url without --model: using model \"sim-fast\", the only one of the 1 model(s) GET"
        ) && stderr.contains("/v1/models lists"),
        "{stderr}"
    );
    let rows = csv_maps(&only_run(&out).join("requests.csv"));
    assert!(!rows.is_empty() && rows.iter().all(|r| r["outcome"] == "ok"));

    // A server whose list is not there, or lists nothing: the error says how to fix it.
    for (url, why) in [
        (answering("404 Not Found", "{\"error\":\"no\"}"), "HTTP 404"),
        (
            answering("200 OK", "{\"object\":\"list\",\"data\":[]}"),
            "lists no model",
        ),
    ] {
        let out = tmp.path().join("err");
        let o = run_bin(
            &[
                "run",
                "scenarios/smoke.toml",
                "--url",
                &url,
                "--out",
                out.to_str().unwrap(),
                "-q",
            ],
            &[],
        )
        .await;
        let (_, stderr) = texts(&o);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("could not read the model list at {url}/models"))
                && stderr.contains(why)
                && stderr.contains("give the model name with --model M"),
            "{stderr}"
        );
        assert!(!out.exists());
    }
}
