//! One load per server and the prefix cache by choice, end to end: `spark-bench run` (through
//! the library) against a small chat-completions server written here with hyper on
//! 127.0.0.1:0, independent of `src/sim`. The server streams `data: {...}` chunks, a usage
//! chunk with `prompt_tokens_details.cached_tokens` (it plays a prefix cache keyed on the
//! first 64 bytes of the system prompt) and `[DONE]`, and records when each request arrived
//! and finished and the most requests it ever had in flight.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::mpsc;

use crate::support::run::{run_lib, scenario};
use spark_bench::store::LoadedRun;

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    arrived: Instant,
    finished: Option<Instant>,
    system: String,
}

#[derive(Default)]
struct ServerLog {
    requests: Vec<Seen>,
    in_flight: usize,
    max_in_flight: usize,
    /// The "prefix cache": first 64 bytes of every system prompt seen.
    prefixes: HashSet<String>,
}

struct Server {
    base_url: String,
    log: Arc<Mutex<ServerLog>>,
}

const DELTAS: usize = 5;
const DELTA_GAP: Duration = Duration::from_millis(6);
const PROMPT_TOKENS: u32 = 100;

type Body = BoxBody<Bytes, Infallible>;

fn prefix64(s: &str) -> String {
    s.bytes().take(64).map(char::from).collect()
}

async fn handle(
    req: hyper::Request<Incoming>,
    log: Arc<Mutex<ServerLog>>,
) -> Result<hyper::Response<Body>, Infallible> {
    let arrived = Instant::now();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let system = body["messages"][0]["content"]
        .as_str()
        .filter(|_| body["messages"][0]["role"] == "system")
        .unwrap_or("")
        .to_string();
    let (index, cached) = {
        let mut g = log.lock().unwrap();
        g.in_flight += 1;
        g.max_in_flight = g.max_in_flight.max(g.in_flight);
        let hit = !g.prefixes.insert(prefix64(&system));
        g.requests.push(Seen {
            arrived,
            finished: None,
            system,
        });
        (
            g.requests.len() - 1,
            if hit { PROMPT_TOKENS - 1 } else { 0 },
        )
    };
    let mut events = vec![
        r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#.to_string(),
    ];
    for i in 0..DELTAS {
        events.push(format!(
            r#"{{"id":"c1","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"word{i} "}},"finish_reason":null}}]}}"#
        ));
    }
    events.push(r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.to_string());
    events.push(format!(
        r#"{{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{{"prompt_tokens":{PROMPT_TOKENS},"completion_tokens":{DELTAS},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":{cached}}}}}}}"#,
        PROMPT_TOKENS + DELTAS as u32
    ));
    events.push("[DONE]".to_string());
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    tokio::spawn(async move {
        for e in events {
            tokio::time::sleep(DELTA_GAP).await;
            let frame = Frame::data(Bytes::from(format!("data: {e}\n\n")));
            if tx.send(Ok(frame)).await.is_err() {
                break;
            }
        }
        // The answer is complete before the client can see its end.
        let mut g = log.lock().unwrap();
        g.in_flight -= 1;
        g.requests[index].finished = Some(Instant::now());
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    Ok(hyper::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap())
}

async fn start_server() -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(Mutex::new(ServerLog::default()));
    let l2 = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            tcp.set_nodelay(true).unwrap();
            let log = l2.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| handle(req, log.clone()));
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    Server {
        base_url: format!("http://127.0.0.1:{}/v1", addr.port()),
        log,
    }
}

const SESSIONS: u32 = 3;
const TURNS: usize = 2;

/// Runs http + http-pooled against one fresh server with `extra` flags (and
/// `--concurrency 1` unless they say otherwise); returns the server's log, the loaded run and the directory holding it.
async fn run_against_server(extra: &[&str]) -> (ServerLog, LoadedRun, testkit::TempDir) {
    run_against_server_with("", extra, 2 * SESSIONS as usize * TURNS).await
}

/// [`run_against_server`] with extra `[load]` lines and the number of requests the server
/// must see.
async fn run_against_server_with(
    load: &str,
    extra: &[&str],
    expected: usize,
) -> (ServerLog, LoadedRun, testkit::TempDir) {
    let server = start_server().await;
    let dir = testkit::tempdir().unwrap();
    let text = format!(
        r#"name = "load"
system_prompt = "You are a terse coding assistant."
link = "none"
max_output_tokens = 16
[load]
sessions = {SESSIONS}
{load}
[matrix]
targets = ["local"]
transports = ["http", "http-pooled"]
[targets.local]
base_url = "{}"
api = "chat-completions"
model = "m"
request_timing = false
[[turns]]
prompt = "Write a function."
[[turns]]
prompt = "Now test it."
"#,
        server.base_url
    );
    let path = scenario(dir.path(), "load.toml", &text);
    let out = dir.path().join("out");
    let mut args = Vec::new();
    if !extra.contains(&"--concurrency") {
        args.extend(["--concurrency", "1"]);
    }
    args.extend_from_slice(extra);
    let outcome = run_lib(&path, &out, &args).await;
    let run = LoadedRun::open(&outcome.dir).unwrap();
    let log = std::mem::take(&mut *server.log.lock().unwrap());
    assert_eq!(log.requests.len(), expected, "requests the server saw");
    assert!(log.requests.iter().all(|r| r.finished.is_some()));
    (log, run, dir)
}

/// The cells' sessions in the order their first request was dispatched.
fn session_order(run: &LoadedRun) -> Vec<(String, u32)> {
    let mut recs = run.records().unwrap();
    recs.sort_by_key(|r| r.dispatch_ns);
    let mut order: Vec<(String, u32)> = Vec::new();
    for r in recs {
        let key = (r.transport.as_str().to_string(), r.session);
        if !order.contains(&key) {
            order.push(key);
        }
    }
    order
}

#[tokio::test]
async fn interleaved_shares_one_slot_alternates_sessions_and_salts_every_prompt() {
    // Defaults for a real endpoint: interleaved schedule, cold cache.
    let (log, run, _dir) = run_against_server(&[]).await;
    assert_eq!(log.max_in_flight, 1, "two requests in flight at one server");
    // Every request started after the one before it finished.
    for w in log.requests.windows(2) {
        assert!(w[1].arrived >= w[0].finished.unwrap());
    }
    let order = session_order(&run);
    let expected: Vec<(String, u32)> = (0..SESSIONS)
        .flat_map(|s| [("http".to_string(), s), ("http-pooled".to_string(), s)])
        .collect();
    assert_eq!(order, expected, "cells take turns session by session");
    // Cold: no two requests share their first 64 bytes of system prompt, every salted
    // system prompt has the same length, and the scenario's prompt follows the salt.
    let prefixes: HashSet<String> = log.requests.iter().map(|r| prefix64(&r.system)).collect();
    assert_eq!(prefixes.len(), log.requests.len(), "a prefix repeated");
    let lens: HashSet<usize> = log.requests.iter().map(|r| r.system.len()).collect();
    assert_eq!(
        lens.len(),
        1,
        "salted system prompts differ in length: {lens:?}"
    );
    assert!(log
        .requests
        .iter()
        .all(|r| r.system.ends_with("\n\nYou are a terse coding assistant.")));
    // The server's cache never answered; the summary and the manifest say what ran.
    let summary = &run.summary;
    for c in &summary.cells {
        assert_eq!(c.cached_input_share, Some(0.0), "{}", c.transport);
    }
    let load = run.manifest.load.as_ref().expect("manifest load record");
    assert_eq!(load.schedule, "interleaved");
    assert_eq!(load.shared_servers.len(), 1);
    assert_eq!(
        load.shared_servers[0].cells,
        ["local × http", "local × http-pooled"]
    );
    assert!(load.cache.values().all(|m| m == "cold"));
    assert!(load.salt_form.is_some());
    // Each cell's aggregate rate is over its own busy time, not the shared span: the cells
    // took turns, so each was busy about half of it.
    let recs = run.records().unwrap();
    for c in &summary.cells {
        let own: Vec<_> = recs
            .iter()
            .filter(|r| r.transport.as_str() == c.transport && !r.warmup && r.is_ok())
            .collect();
        let busy: u64 = own
            .iter()
            .map(|r| r.end_ns.or(r.last_token_ns).unwrap() - r.intended_ns)
            .sum();
        let (busy_s, tokens) = (busy as f64 / 1e9, c.output_tokens as f64);
        assert!(
            c.busy_s <= busy_s * 1.0001 && c.busy_s >= busy_s * 0.95,
            "{}: busy {} s, requests' own time {busy_s} s",
            c.transport,
            c.busy_s
        );
        assert!(
            c.busy_s < 0.75 * c.span_s,
            "{}: busy {} of span {}",
            c.transport,
            c.busy_s,
            c.span_s
        );
        let own_rate = tokens / busy_s;
        assert!(
            (c.aggregate_output_tok_s - own_rate).abs() <= 0.05 * own_rate,
            "{}: aggregate {} tok/s, own rate {own_rate}",
            c.transport,
            c.aggregate_output_tok_s
        );
        assert!(
            c.aggregate_output_tok_s > 1.5 * tokens / c.span_s,
            "halved by the shared span"
        );
    }
}

#[tokio::test]
async fn sequential_runs_cell_after_cell_with_one_request_in_flight() {
    let (log, run, _dir) = run_against_server(&["--schedule", "sequential"]).await;
    assert_eq!(log.max_in_flight, 1, "two requests in flight at one server");
    let order = session_order(&run);
    let expected: Vec<(String, u32)> = ["http", "http-pooled"]
        .iter()
        .flat_map(|t| (0..SESSIONS).map(move |s| (t.to_string(), s)))
        .collect();
    assert_eq!(order, expected, "cell after cell");
    assert_eq!(run.manifest.load.as_ref().unwrap().schedule, "sequential");
}

#[tokio::test]
async fn parallel_adds_the_cells_up_and_as_is_rides_the_cache() {
    let (log, run, _dir) =
        run_against_server(&["--schedule", "parallel", "--cache", "as-is"]).await;
    assert_eq!(
        log.max_in_flight, 2,
        "parallel cells should overlap at the server"
    );
    // As-is: every request sends the same system prompt, so all but the first hit the
    // server's (played) prefix cache, and the summary shows it.
    let summary = &run.summary;
    let shares: Vec<f64> = summary
        .cells
        .iter()
        .map(|c| c.cached_input_share.unwrap())
        .collect();
    assert!(shares.iter().all(|s| *s > 0.7), "{shares:?}");
    let load = run.manifest.load.as_ref().unwrap();
    assert_eq!(load.schedule, "parallel");
    assert!(load.salt_form.is_none());
}

#[tokio::test]
async fn interleaved_open_loop_offers_the_server_one_arrival_process() {
    let gap = Duration::from_millis(25);
    let (log, run, _dir) = run_against_server_with(
        "session_interval = \"25ms\"",
        &["--concurrency", "4"],
        2 * SESSIONS as usize * TURNS,
    )
    .await;
    assert!(log.max_in_flight <= 4);
    // The intended starts of both cells' sessions are ONE Poisson process with the
    // scenario's mean gap, in turn order (session k of http, of http-pooled, …): the
    // server is offered the scenario's rate, not twice it.
    let plan = run.manifest.plan().unwrap();
    let offsets = spark_bench::plan::schedule::interleaved_offsets(plan.seed, SESSIONS, 2, gap);
    let sessions = run.sessions().unwrap();
    let start = sessions.iter().map(|s| s.start_ns).min().unwrap();
    for s in &sessions {
        let cell = usize::from(s.transport.as_str() == "http-pooled");
        let want = offsets[s.session as usize][cell].as_nanos() as u64;
        assert_eq!(
            s.start_ns - start,
            want,
            "{} session {}",
            s.transport,
            s.session
        );
    }
}

#[tokio::test]
async fn warm_runs_each_script_once_untimed_so_first_turns_hit_the_cache() {
    // One distinct script × two cells × two turns of untimed warming, then the run.
    let (log, run, _dir) = run_against_server_with(
        "",
        &["--cache", "warm"],
        2 * (SESSIONS as usize + 1) * TURNS,
    )
    .await;
    assert_eq!(log.max_in_flight, 1);
    let records = run.records().unwrap();
    let warming: Vec<_> = records.iter().filter(|r| r.warmup).collect();
    assert_eq!(warming.len(), 2 * TURNS);
    assert!(warming.iter().all(|r| r.session == SESSIONS));
    // Every measured request found its prefix in the (played) cache.
    for c in &run.summary.cells {
        assert!(c.cached_input_share.unwrap() > 0.9, "{}", c.transport);
        assert_eq!(c.warmup_sessions, 1);
    }
    let load = run.manifest.load.as_ref().unwrap();
    assert!(load.cache.values().all(|m| m == "warm"));
}
