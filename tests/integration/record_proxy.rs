//! `spark-bench record`'s proxy end to end, in-process over real TCP: a multi-turn,
//! tool-calling session (spark-bench's own client as the agent, with a planted key in its
//! prompt and its Authorization header) through the proxy to the simulator over the
//! Responses WebSocket mode and HTTP/SSE; the recorded scenario replayed against the
//! simulator must give the same requests, token counts and think/tool times, and no written
//! file may hold the key. Plus the byte-exact forwarding of a paced SSE stream, and (ignored,
//! a measurement) the proxy's added latency per chunk against a direct connection.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use spark_bench::capture::{self, privacy::Privacy, Config};
use spark_bench::clock::Clock;
use spark_bench::runner::{self, Options};
use spark_bench::sim::{self, SimConfig};
use spark_bench::vocab::BaseUrl;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY: &str = "sk-proj-TESTplantedKEY00112233445566778899";

struct Proxy {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<capture::Recording>>,
}

async fn proxy(upstream: &str) -> Proxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = capture::base_url(listener.local_addr().unwrap());
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let config = Config {
        upstream: BaseUrl::parse(upstream).unwrap(),
    };
    let task = tokio::spawn(capture::record(listener, config, Clock::start(), async {
        let _ = rx.await;
    }));
    Proxy { url, stop, task }
}

async fn run_scenario(path: &Path, out: &Path) -> std::path::PathBuf {
    let loaded = spark_bench::scenario::load(path).unwrap();
    let plan = spark_bench::plan::build(
        &loaded.scenario,
        &loaded.path,
        loaded.source.as_bytes(),
        &Default::default(),
    )
    .unwrap();
    runner::run(Arc::new(plan), out, Options::quiet())
        .await
        .unwrap()
        .dir
}

fn rows(dir: &Path) -> Vec<HashMap<String, String>> {
    let mut r = csv::Reader::from_path(dir.join("requests.csv")).unwrap();
    r.deserialize::<HashMap<String, String>>()
        .map(Result::unwrap)
        .filter(|r| r["kind"] != "warmup")
        .collect()
}

fn total(rows: &[HashMap<String, String>], k: &str) -> u64 {
    rows.iter().map(|r| r[k].parse::<u64>().unwrap_or(0)).sum()
}

/// (kind, gap from the previous request's end to this one's intended start, ms) per request
/// (the replay's send lag behind its schedule is the loaded machine's, not the scenario's).
fn gaps(rows: &[HashMap<String, String>]) -> Vec<(String, f64)> {
    let mut v: Vec<&HashMap<String, String>> = rows.iter().collect();
    v.sort_by_key(|r| r["dispatch_ns"].parse::<u64>().unwrap());
    v.windows(2)
        .map(|w| {
            let end: f64 = w[0]["end_ns"].parse().unwrap();
            let start: f64 = w[1]["intended_ns"].parse().unwrap();
            (w[1]["kind"].clone(), (start - end) / 1e6)
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

async fn record_and_replay(transport: &str) {
    let tmp = testkit::tempdir().unwrap();
    let sim = sim::spawn(SimConfig::new(sim::Profile::builtin("wafer").unwrap()))
        .await
        .unwrap();
    let px = proxy(&sim.base_url).await;
    // The agent: spark-bench's client against the proxy, key in env and prompt.
    std::env::set_var("RECORD_TEST_KEY", KEY);
    let live = tmp.path().join("live.toml");
    std::fs::write(
        &live,
        format!(
            r#"name = "live"
system_prompt = "You are a coding agent. Be terse."
link = "none"
[matrix]
targets = ["agent"]
transports = ["{transport}"]
[targets.agent]
base_url = "{url}"
api = "responses"
api_key_env = "RECORD_TEST_KEY"
model = "sim-wafer"
store = true
[[turns]]
prompt = "Fix the failing test; my key is {KEY}."
max_output_tokens = 24
tool_calls = [{{ name = "read_file", tool_time = "40ms", output_bytes = 700 }}, {{ name = "run_tests", tool_time = "25ms", output_bytes = 300 }}]
[[turns]]
prompt = "Summarise the change."
think_time = "60ms"
max_output_tokens = 16
"#,
            url = px.url
        ),
    )
    .unwrap();
    run_scenario(&live, &tmp.path().join("agent-results")).await;
    px.stop.send(()).unwrap();
    let rec = px.task.await.unwrap().unwrap();
    let pv = Privacy::new(&[], false, 1).unwrap();
    let out = tmp.path().join("recorded.toml");
    let written = capture::finish(
        &rec,
        "recorded",
        &sim.base_url,
        &out,
        &tmp.path().join("results"),
        &pv,
        &[
            "spark-bench".into(),
            "record".into(),
            format!("--redact={KEY}"),
        ],
    )
    .unwrap();
    assert_eq!(written.sessions, 1, "{written:?}");
    assert_eq!((written.turns, written.tool_calls), (2, 2), "{written:?}");
    let live_dir = written.results.clone().unwrap();
    let toml = std::fs::read_to_string(&out).unwrap();
    assert!(
        toml.contains(&format!("transports = [\"{transport}\"]")),
        "{toml}"
    );

    // Replay against the embedded simulator.
    let replay_dir = run_scenario(&out, &tmp.path().join("replay")).await;
    let (a, b) = (rows(&live_dir), rows(&replay_dir));
    assert_eq!(a.len(), 4, "recorded requests");
    assert_eq!(a.len(), b.len(), "replayed requests");
    assert!(b.iter().all(|r| r["outcome"] == "ok"));
    for k in ["input_tokens", "output_tokens"] {
        let (x, y) = (total(&a, k) as f64, total(&b, k) as f64);
        assert!((x - y).abs() <= 0.01 * x, "{k}: recorded {x}, replay {y}");
    }
    let (ga, gb) = (gaps(&a), gaps(&b));
    assert_eq!(ga.len(), gb.len());
    for ((ka, x), (kb, y)) in ga.iter().zip(&gb) {
        assert_eq!(ka, kb);
        assert!(
            (x - y).abs() <= 5.0,
            "{ka}: recorded gap {x:.2} ms, replay {y:.2} ms"
        );
    }
    // The planted key: in no file the recorder wrote.
    let mut files = vec![out.clone()];
    walk(&tmp.path().join("results"), &mut files);
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("sk-proj-"), "{} holds the key", f.display());
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_session_recorded_through_the_proxy_replays_to_the_same_counts_and_times() {
    record_and_replay("ws").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_session_recorded_through_the_proxy_replays_to_the_same_counts_and_times() {
    record_and_replay("http-pooled").await;
}

/// Two sessions (different conversations) over one WebSocket each, the first turn of session
/// 1 with two parallel tool calls: the recording is one scenario holding both sessions
/// (`[[sessions]]`), the parallel calls marked, the recorded answers and no cache salt; its
/// replay sends each session once, the same requests per session, the same tokens per
/// session within 1% and the same think/tool times within 5 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_with_parallel_tool_calls_replay_as_recorded() {
    let tmp = testkit::tempdir().unwrap();
    let sim = sim::spawn(SimConfig::new(sim::Profile::builtin("wafer").unwrap()))
        .await
        .unwrap();
    let px = proxy(&sim.base_url).await;
    let live = tmp.path().join("live.toml");
    std::fs::write(
        &live,
        format!(
            r#"name = "live"
system_prompt = "You are a coding agent. Be terse."
link = "none"
[load]
sessions = 2
concurrency = 1
[matrix]
targets = ["agent"]
transports = ["ws"]
[targets.agent]
base_url = "{url}"
api = "responses"
model = "sim-wafer"
[[turns]]
prompt = "Fix the failing test."
max_output_tokens = 24
tool_calls = [{{ name = "read_file", tool_time = "40ms", output_bytes = 700, max_output_tokens = 10 }}, {{ name = "run_tests", tool_time = "40ms", output_bytes = 300, parallel = true }}]
[[turns]]
prompt = "Summarise the change."
think_time = "60ms"
max_output_tokens = 16
[[sessions]]
[[sessions.turns]]
prompt = "A different session: write a README section about the totals module, with an example."
max_output_tokens = 40
[[sessions.turns]]
prompt = "Shorter."
think_time = "30ms"
max_output_tokens = 8
"#,
            url = px.url
        ),
    )
    .unwrap();
    run_scenario(&live, &tmp.path().join("agent-results")).await;
    px.stop.send(()).unwrap();
    let rec = px.task.await.unwrap().unwrap();
    let pv = Privacy::new(&[], false, 1).unwrap();
    let out = tmp.path().join("recorded.toml");
    let written = capture::finish(
        &rec,
        "recorded",
        &sim.base_url,
        &out,
        &tmp.path().join("results"),
        &pv,
        &["spark-bench".into(), "record".into()],
    )
    .unwrap();
    assert_eq!(written.sessions, 2, "{written:?}");
    assert_eq!(written.scenarios, vec![out.clone()], "one file");
    let toml = std::fs::read_to_string(&out).unwrap();
    for want in [
        "sessions = 2",
        "cache = \"as-is\"",
        "[[sessions]]",
        "[[sessions.turns]]",
        "parallel = true",
        "answer = ",
    ] {
        assert!(toml.contains(want), "no `{want}` in\n{toml}");
    }
    // The response to the tool results carries its recorded length.
    assert!(
        toml.lines()
            .any(|l| l.contains("name = \"read_file\"") && l.contains("max_output_tokens = ")),
        "{toml}"
    );
    let live_dir = written.results.clone().unwrap();
    let replay_dir = run_scenario(&out, &tmp.path().join("replay")).await;
    let (a, b) = (rows(&live_dir), rows(&replay_dir));
    // Session 1: a user request making both calls, the tool results, turn 2; session 2: 2.
    assert_eq!(a.len(), 5, "recorded requests");
    assert!(b.iter().all(|r| r["outcome"] == "ok"));
    let calls: u64 = a
        .iter()
        .map(|r| r["tool_calls"].parse::<u64>().unwrap())
        .max()
        .unwrap();
    assert_eq!(calls, 2, "one response made both calls");
    for session in ["0", "1"] {
        let of = |rows: &[HashMap<String, String>]| -> Vec<HashMap<String, String>> {
            rows.iter()
                .filter(|r| r["session"] == session)
                .cloned()
                .collect()
        };
        let (sa, sb) = (of(&a), of(&b));
        assert_eq!(sa.len(), sb.len(), "session {session}: requests");
        for k in ["input_tokens", "output_tokens", "tool_calls"] {
            let (x, y) = (total(&sa, k) as f64, total(&sb, k) as f64);
            assert!(
                (x - y).abs() <= 0.01 * x,
                "session {session} {k}: recorded {x}, replay {y}"
            );
        }
        for ((ka, x), (kb, y)) in gaps(&sa).iter().zip(&gaps(&sb)) {
            assert_eq!(ka, kb);
            assert!(
                (x - y).abs() <= 5.0,
                "{ka}: recorded gap {x:.2} ms, replay {y:.2} ms"
            );
        }
    }
    sim.shutdown().await;
}

/// A raw HTTP/1.1 upstream: each request gets `n` SSE events, `gap` apart, chunked; returns
/// the instant each event was written (ns on `clock`).
async fn paced_upstream(
    n: usize,
    gap: std::time::Duration,
    clock: Clock,
) -> (String, tokio::task::JoinHandle<Vec<u64>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        s.set_nodelay(true).unwrap();
        let mut buf = vec![0u8; 65536];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let k = s.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..k]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        let mut stamps = Vec::new();
        for i in 0..n {
            let ev = format!("data: {{\"i\":{i}}}\n\n");
            let chunk = format!("{:x}\r\n{ev}\r\n", ev.len());
            tokio::time::sleep(gap).await;
            stamps.push(clock.now_ns());
            s.write_all(chunk.as_bytes()).await.unwrap();
        }
        s.write_all(b"0\r\n\r\n").await.unwrap();
        stamps
    });
    (url, task)
}

/// Reads a chunked SSE response from `url`: (arrival ns of each event, body bytes).
async fn read_events(url: &str, clock: &Clock) -> (Vec<u64>, Vec<u8>) {
    let addr = url.trim_start_matches("http://").trim_end_matches("/v1");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let body = "{\"model\":\"m\",\"stream\":true,\"input\":\"hi\"}";
    let req = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    let mut stamps = Vec::new();
    let mut seen = 0;
    let mut buf = vec![0u8; 65536];
    loop {
        let k = s.read(&mut buf).await.unwrap();
        let t = clock.now_ns();
        if k == 0 {
            break;
        }
        all.extend_from_slice(&buf[..k]);
        let events = all.windows(2).filter(|w| w == b"\n\n").count();
        stamps.extend(std::iter::repeat_n(t, events - seen));
        seen = events;
        if all.ends_with(b"0\r\n\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&all);
    let payload: Vec<u8> = text
        .lines()
        .filter(|l| l.starts_with("data: "))
        .flat_map(|l| l.bytes().collect::<Vec<_>>())
        .collect();
    (stamps, payload)
}

/// (p50, p99) of event latencies (arrival − write), µs.
async fn stream_latency(n: usize, through_proxy: bool) -> (f64, f64, Vec<u8>) {
    let clock = Clock::start();
    let gap = std::time::Duration::from_micros(1500);
    let (up, task) = paced_upstream(n, gap, clock).await;
    let px = if through_proxy {
        Some(proxy(&up).await)
    } else {
        None
    };
    let url = px.as_ref().map_or(up.clone(), |p| p.url.clone());
    let (arrivals, payload) = read_events(&url, &clock).await;
    let writes = task.await.unwrap();
    assert_eq!(arrivals.len(), n, "events received");
    let mut lat: Vec<f64> = arrivals
        .iter()
        .zip(&writes)
        .map(|(a, w)| a.saturating_sub(*w) as f64 / 1e3)
        .collect();
    lat.sort_by(f64::total_cmp);
    if let Some(p) = px {
        p.stop.send(()).unwrap();
        let rec = p.task.await.unwrap().unwrap();
        assert_eq!(rec.exchanges.len(), 1);
        let x = &rec.exchanges[0];
        let bytes: usize = x.chunks.iter().map(|c| c.1.len()).sum();
        let events = x
            .chunks
            .iter()
            .flat_map(|c| c.1.to_vec())
            .collect::<Vec<u8>>()
            .windows(2)
            .filter(|w| w == b"\n\n")
            .count();
        assert_eq!(events, n, "events the proxy saw");
        assert!(bytes > 0);
    }
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
    (q(0.5), q(0.99), payload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_forwards_every_event_byte_for_byte() {
    let (_, _, direct) = stream_latency(40, false).await;
    let (_, _, proxied) = stream_latency(40, true).await;
    assert_eq!(direct, proxied);
}

/// The proxy's added latency per chunk: `cargo test --test integration
/// proxy_added_latency -- --ignored --nocapture` (quiet machine; figures in docs/record.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn proxy_added_latency_per_chunk() {
    let n = 2000;
    let (d50, d99, _) = stream_latency(n, false).await;
    let (p50, p99, _) = stream_latency(n, true).await;
    println!(
        "per-chunk latency over {n} chunks: direct p50 {d50:.1} µs p99 {d99:.1} µs; through the proxy p50 {p50:.1} µs p99 {p99:.1} µs; added p50 {:.1} µs p99 {:.1} µs",
        p50 - d50,
        p99 - d99
    );
}
