//! spark-bench against a real llama.cpp `llama-server` serving a tiny random-weight model.
//! Ignored by default; `.ci/steps/25-llama-server.sh` builds the server, writes the model
//! (`scripts/llama/make_tiny_gguf.py`), starts it and runs these with
//! `SPARK_BENCH_LLAMA_URL=http://127.0.0.1:PORT/v1`.
//!
//! What they show, from `requests.csv` of real `spark-bench run`s:
//! - at `--concurrency 1` no two requests of a run are in flight at once, across transports;
//! - the transport probe skips the `http2` cell (llama-server answers the h2c preface with
//!   `HTTP/1.1 400`), quoting the answer, or records it `unsupported-transport` when forced;
//! - `http-pooled` loses no request over 200+ requests at concurrency 4, and every new
//!   connection (and every re-send on one) is visible on its row;
//! - `cache = "cold"` defeats the server's prompt cache and `cache = "as-is"` reports it;
//! - spark-bench's `http` TTFT is within 0.3 ms of a minimal raw-socket client's, measured
//!   alternately in the same run.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use spark_bench::backend::request::http_request;
use spark_bench::commands::run::load_plan;
use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::plan::{Plan, Target};
use spark_bench::vocab::{OutcomeKind, TransportKind};

use crate::binary::*;
use crate::support::run::*;

type Row = HashMap<String, String>;

/// The server's OpenAI-compatible base URL, e.g. `http://127.0.0.1:8080/v1`.
fn llama_url() -> String {
    match std::env::var("SPARK_BENCH_LLAMA_URL") {
        Ok(u) if u.starts_with("http://") => u.trim_end_matches('/').to_string(),
        Ok(u) => panic!("SPARK_BENCH_LLAMA_URL={u:?}: expected http://HOST:PORT/v1 (llama-server speaks plain HTTP)"),
        Err(_) => panic!(
            "set SPARK_BENCH_LLAMA_URL to a running llama-server's base URL, e.g. \
             http://127.0.0.1:8080/v1 (.ci/steps/25-llama-server.sh starts one)"
        ),
    }
}

/// A `--targets` file defining the target `llama`.
fn targets_file(dir: &Path) -> PathBuf {
    scenario(
        dir,
        "targets.toml",
        &format!(
            r#"[targets.llama]
base_url = "{}"
api = "chat-completions"
model = "tiny"
hardware = "CPU (llama.cpp llama-server, tiny random model)"
request_timeout = "60s"
stall_timeout = "20s"
"#,
            llama_url()
        ),
    )
}

/// Runs `spark-bench run` (the binary) on `scenario_text` against the `llama` target and
/// returns the rows of `requests.csv`. The exit code must be `exit`: 0 for a clean run, 3 when
/// a cell's requests all failed (its rows are still written: failures are data).
async fn run(name: &str, scenario_text: &str, extra: &[&str], exit: i32) -> Vec<Row> {
    run_with_summary(name, scenario_text, extra, exit).await.0
}

/// [`run`], and the run's `summary.json`.
async fn run_with_summary(
    name: &str,
    scenario_text: &str,
    extra: &[&str],
    exit: i32,
) -> (Vec<Row>, serde_json::Value) {
    let ran = run_full(name, scenario_text, extra, exit).await;
    (ran.rows, ran.summary)
}

/// What [`run_full`] hands back of a finished run.
struct Ran {
    rows: Vec<Row>,
    summary: serde_json::Value,
    manifest: serde_json::Value,
    stderr: String,
}

/// [`run`], with the run's `summary.json`, `manifest.json` and stderr.
async fn run_full(name: &str, scenario_text: &str, extra: &[&str], exit: i32) -> Ran {
    let tmp = testkit::tempdir().unwrap();
    let sc = scenario(tmp.path(), &format!("{name}.toml"), scenario_text);
    let targets = targets_file(tmp.path());
    let out = tmp.path().join("results");
    let mut args = vec![
        "run",
        sc.to_str().unwrap(),
        "--targets",
        targets.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--no-report",
    ];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let o = run_bin(&args, &[]).await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(
        o.status.code(),
        Some(exit),
        "spark-bench {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let dir = only_run(&out);
    let rows = csv_maps(&dir.join("requests.csv"));
    let json = |file: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join(file)).unwrap()).unwrap()
    };
    let (summary, manifest) = (json("summary.json"), json("manifest.json"));
    println!(
        "{name}: {} rows in {:.1} s\n{stdout}",
        rows.len(),
        started.elapsed().as_secs_f64()
    );
    Ran {
        rows,
        summary,
        manifest,
        stderr,
    }
}

fn num(r: &Row, col: &str) -> u64 {
    r[col]
        .parse()
        .unwrap_or_else(|e| panic!("column {col} = {:?}: {e}; row {r:?}", r[col]))
}

fn opt_num(r: &Row, col: &str) -> Option<u64> {
    (!r[col].is_empty()).then(|| num(r, col))
}

/// Rows that are requests a user would see (not WebSocket warm-ups; chat-completions has none).
fn user_rows(rows: &[Row]) -> Vec<&Row> {
    rows.iter().filter(|r| r["kind"] != "warmup").collect()
}

fn assert_all_ok(rows: &[&Row]) {
    let bad: Vec<_> = rows.iter().filter(|r| r["outcome"] != "ok").collect();
    assert!(
        bad.is_empty(),
        "{} of {} requests not ok; first: {:?}",
        bad.len(),
        rows.len(),
        bad.first()
    );
}

/// (a) `--concurrency 1` with the three HTTP transports: across the whole run (every transport
/// cell) no request starts before the previous one ended. Needs the run schedule that does
/// not overlap cells sharing a real endpoint (`[load] schedule`, default `interleaved` for
/// such cells). llama-server does not speak HTTP/2 (it answers the h2c preface with an
/// HTTP/1.1 400), so the transport probe skips the `http2` cell before the run (see
/// [`llama_http2_is_skipped_by_the_probe_or_recorded_as_unsupported_when_forced`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn llama_concurrency_1_never_overlaps_requests() {
    let rows = run(
        "llama-sequential",
        r#"name = "llama-sequential"
seed = 3
system_prompt = "You are terse."
max_output_tokens = 32

[load]
sessions = 3
concurrency = 1

[matrix]
targets = ["llama"]
transports = ["http", "http-pooled", "http2"]

[[turns]]
prompt = "Write a haiku about sockets."

[[turns]]
prompt = "Now one about queues."
"#,
        &[],
        // Exit 0: the http2 cell was skipped by the transport probe (the server speaks no
        // HTTP/2); the cells that ran were clean.
        0,
    )
    .await;
    let rows = user_rows(&rows);
    let (h1, h2): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r["transport"] != "http2");
    assert_eq!(
        h1.len(),
        2 * 3 * 2,
        "2 HTTP/1.1 transports x 3 sessions x 2 turns"
    );
    assert!(h2.is_empty(), "the http2 cell was skipped: {h2:?}");
    let mut spans: Vec<(u64, u64, &str)> = rows
        .iter()
        .map(|r| {
            let end = opt_num(r, "end_ns").unwrap_or_else(|| panic!("no end_ns: {r:?}"));
            (num(r, "dispatch_ns"), end, r["transport"].as_str())
        })
        .collect();
    spans.sort();
    let overlaps: Vec<_> = spans
        .windows(2)
        .filter(|w| w[1].0 < w[0].1)
        .map(|w| {
            format!(
                "{} [{:.3}..{:.3} ms] overlaps {} [{:.3}..{:.3} ms]",
                w[1].2,
                ms(w[1].0),
                ms(w[1].1),
                w[0].2,
                ms(w[0].0),
                ms(w[0].1)
            )
        })
        .collect();
    println!(
        "concurrency 1: {} requests, {} overlapping the one before",
        spans.len(),
        overlaps.len()
    );
    assert!(
        overlaps.is_empty(),
        "{} of {} requests started while another was in flight:\n{}",
        overlaps.len(),
        spans.len(),
        overlaps.join("\n")
    );
    assert_all_ok(&h1);
}

/// (a') The transport probe against llama-server: the `http2` cell is skipped before the run,
/// with a line and a manifest record quoting what the server answered the h2c preface; with
/// `--force-transports` it runs, and every request of it is `unsupported-transport` with
/// that answer (exit 3: the forced cell's requests all failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn llama_http2_is_skipped_by_the_probe_or_recorded_as_unsupported_when_forced() {
    let text = r#"name = "llama-probe"
seed = 4
max_output_tokens = 8

[load]
sessions = 2
concurrency = 1

[matrix]
targets = ["llama"]
transports = ["http", "http2"]

[[turns]]
prompt = "Say hi."
"#;
    for (force, exit) in [(false, 0), (true, 3)] {
        let extra: &[&str] = if force { &["--force-transports"] } else { &[] };
        let Ran {
            rows,
            manifest,
            stderr,
            ..
        } = run_full("llama-probe", text, extra, exit).await;
        let probe = manifest["transport_probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["transport"] == "http2")
            .cloned()
            .unwrap_or_else(|| panic!("no http2 probe: {manifest}"));
        println!("llama-server's http2 probe: {probe}");
        assert_eq!(probe["supported"], false, "{probe}");
        let answer = probe["answer"].as_str().unwrap().to_string();
        assert!(answer.starts_with("HTTP/1.1 400"), "{probe}");
        let sentence =
            format!("the server does not speak HTTP/2 (it answered `{answer}` to the h2c preface)");
        let h2: Vec<_> = rows.iter().filter(|r| r["transport"] == "http2").collect();
        if force {
            assert!(!h2.is_empty(), "the forced cell ran");
            for r in &h2 {
                assert_eq!(r["outcome"], "unsupported-transport", "{r:?}");
                assert!(r["error"].starts_with(&sentence), "{r:?}");
            }
        } else {
            assert!(
                stderr.contains(&format!("skipping llama × http2: {sentence}")),
                "{stderr}"
            );
            assert!(h2.is_empty(), "{h2:?}");
        }
        assert!(
            rows.iter()
                .filter(|r| r["transport"] == "http")
                .all(|r| r["outcome"] == "ok"),
            "{rows:?}"
        );
    }
}

/// (b) `http-pooled`, 200+ requests at concurrency 4. llama-server closes the connection
/// right after every streamed response although it announced `Keep-Alive: timeout=5,
/// max=100` (and no `Connection: close`), so nearly every pooled request finds its connection
/// closed: no request may be lost, and every new connection shows on its row
/// (`connection_reused = false`, a new `connection_id`; a re-send counts in `reconnects`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn llama_pooled_loses_no_request_and_shows_every_reconnect() {
    let mut text = String::from(
        r#"name = "llama-pooled"
seed = 4
system_prompt = "You are terse."
max_output_tokens = 12

[load]
sessions = 52
concurrency = 4

[matrix]
targets = ["llama"]
transports = ["http-pooled"]
"#,
    );
    // 52 sessions x 4 turns = 208 requests.
    for t in 0..4 {
        text.push_str(&format!("\n[[turns]]\nprompt = \"Step {t}: go on.\"\n"));
    }
    let (rows, summary) = run_with_summary("llama-pooled", &text, &[], 0).await;
    let rows = user_rows(&rows);
    // The summary says the pool never pooled, and why (what the run table and report show).
    let conns = &summary["cells"][0]["connections"];
    assert_eq!(conns["reused"], 0, "{conns}");
    assert!(
        conns["note"].as_str().is_some_and(|n| n.contains("closed")),
        "the reason the pool never pooled: {conns}"
    );
    assert!(rows.len() >= 200, "{} requests", rows.len());
    let reconnected = rows.iter().filter(|r| num(r, "reconnects") > 0).count();
    let resends: u64 = rows.iter().map(|r| num(r, "reconnects")).sum();
    let fresh = rows
        .iter()
        .filter(|r| r["connection_reused"] == "false")
        .count();
    let conns: HashSet<&str> = rows.iter().map(|r| r["connection_id"].as_str()).collect();
    let mut outcomes: HashMap<&str, usize> = HashMap::new();
    for r in &rows {
        *outcomes.entry(r["outcome"].as_str()).or_default() += 1;
    }
    println!(
        "http-pooled: {} requests, outcomes {outcomes:?}; {reconnected} rows with reconnects > 0 \
         ({resends} re-sends); {} distinct connections; {fresh} rows on a fresh connection",
        rows.len(),
        conns.len()
    );
    assert_all_ok(&rows);
    // A re-sent request ran on the fresh connection it was re-sent on.
    for r in rows.iter().filter(|r| num(r, "reconnects") > 0) {
        assert_eq!(r["connection_reused"], "false", "{r:?}");
    }
    // Every connection the run opened is the fresh connection of exactly one row.
    assert_eq!(
        conns.len(),
        fresh,
        "each connection_id must appear first on a row with connection_reused = false"
    );
}

/// (c) The prefix cache: `cache = "cold"` keeps the server's cached input tokens near 0,
/// `cache = "as-is"` shows the share the server reports (repeated prompts: above 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn llama_cache_cold_vs_as_is() {
    let scenario = |mode: &str| {
        format!(
            r#"name = "llama-cache-{mode}"
seed = 5
system_prompt = "You are a coding assistant. Keep answers short."
context_bytes = 600
max_output_tokens = 16

[load]
sessions = 4
concurrency = 1
cache = "{mode}"

[matrix]
targets = ["llama"]
transports = ["http-pooled"]

[[turns]]
prompt = "Write a function that reverses a string."

[[turns]]
prompt = "Now make it handle None."
"#
        )
    };
    let share = |rows: &[Row]| -> (f64, u64, u64) {
        let rows = user_rows(rows);
        assert_all_ok(&rows);
        let input: u64 = rows.iter().map(|r| num(r, "input_tokens")).sum();
        let cached: u64 = rows
            .iter()
            .map(|r| opt_num(r, "cached_input_tokens").unwrap_or(0))
            .sum();
        assert!(input > 0, "the server reported no input tokens");
        (cached as f64 / input as f64, cached, input)
    };
    let (cold, c_cached, c_input) =
        share(&run("llama-cache-cold", &scenario("cold"), &[], 0).await);
    let (as_is, a_cached, a_input) =
        share(&run("llama-cache-as-is", &scenario("as-is"), &[], 0).await);
    println!(
        "cached input share: cold {:.1}% ({c_cached}/{c_input}), as-is {:.1}% ({a_cached}/{a_input})",
        100.0 * cold,
        100.0 * as_is
    );
    assert!(
        cold < 0.05,
        "cold: {:.1}% of input tokens cached",
        100.0 * cold
    );
    assert!(as_is > 0.0, "as-is: the server reported no cached tokens");
}

/// The target and system prompt exactly as `spark-bench run` resolves them.
fn resolved_plan(dir: &Path) -> Plan {
    let sc = scenario(
        dir,
        "llama-ttft.toml",
        r#"name = "llama-ttft"
system_prompt = "You are terse."
max_output_tokens = 8

[matrix]
targets = ["llama"]
transports = ["http"]

[[turns]]
prompt = "Name one prime."
"#,
    );
    let targets = targets_file(dir);
    let argv = [
        "spark-bench",
        "run",
        sc.to_str().unwrap(),
        "--targets",
        targets.to_str().unwrap(),
    ];
    let cli = <spark_bench::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let spark_bench::cli::Command::Run(args) = cli.command else {
        unreachable!()
    };
    load_plan(&args).unwrap_or_else(|e| panic!("loading the plan: {e:#}"))
}

/// A minimal HTTP/1.1 client on a blocking socket: new connection per request, TCP_NODELAY,
/// the given request bytes; returns the time from before `connect` to the read that
/// completed the first SSE event with non-empty `choices[0].delta.content` (with the request
/// written and the response head, as `[written, head, ttft]`). Reads the
/// response to its end so the server is idle before the next request.
fn raw_ttft(addr: &str, request: &[u8]) -> Result<[Duration; 3], String> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    s.write_all(request).map_err(|e| format!("write: {e}"))?;
    let written = t0.elapsed();
    let mut head_at = Duration::ZERO;
    let mut raw = Vec::with_capacity(16 * 1024);
    let mut buf = [0u8; 16 * 1024];
    let mut head_len = None;
    let mut chunked = false;
    let mut body = Vec::new(); // de-chunked body
    let mut pos = 0; // parse position in `raw` (after the head)
    let mut events_from = 0; // parse position in `body`
    let mut ttft = None;
    let mut done = false;
    while !done {
        let n = s.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        let at = Instant::now();
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if head_len.is_none() {
            let Some(i) = find(&raw, b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&raw[..i]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                return Err(format!("response head: {head}"));
            }
            chunked = head.contains("transfer-encoding: chunked");
            head_len = Some(i + 4);
            head_at = at - t0;
            pos = i + 4;
        }
        if chunked {
            while let Some(le) = find(&raw[pos..], b"\r\n") {
                let size_line = String::from_utf8_lossy(&raw[pos..pos + le]).to_string();
                let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16)
                    .map_err(|e| format!("chunk size {size_line:?}: {e}"))?;
                let start = pos + le + 2;
                if raw.len() < start + size + 2 {
                    break;
                }
                body.extend_from_slice(&raw[start..start + size]);
                pos = start + size + 2;
                if size == 0 {
                    done = true;
                    break;
                }
            }
        } else {
            body.extend_from_slice(&raw[pos..]);
            pos = raw.len();
        }
        while let Some(e) = find(&body[events_from..], b"\n\n") {
            let event = &body[events_from..events_from + e];
            events_from += e + 2;
            if ttft.is_none() && has_content(event) {
                ttft = Some(at - t0);
            }
        }
    }
    let ttft = ttft.ok_or_else(|| {
        format!(
            "no content event in {:?}",
            String::from_utf8_lossy(&raw[..raw.len().min(2000)])
        )
    })?;
    Ok([written, head_at, ttft])
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// An SSE event whose `data:` is a chat chunk with non-empty `choices[0].delta.content`.
fn has_content(event: &[u8]) -> bool {
    String::from_utf8_lossy(event).lines().any(|l| {
        let Some(data) = l.strip_prefix("data:") else {
            return false;
        };
        serde_json::from_str::<serde_json::Value>(data.trim()).is_ok_and(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        })
    })
}

/// `(host:port, path prefix)` of `http://host:port/prefix`.
fn split_url(base: &str) -> (String, String) {
    let rest = base.strip_prefix("http://").expect("http:// URL");
    match rest.find('/') {
        Some(i) => (rest[..i].to_string(), rest[i..].to_string()),
        None => (rest.to_string(), String::new()),
    }
}

/// The bytes of the request spark-bench's `http` transport sends for `conv`: the same
/// method, path, `Host`, headers and JSON body (built by the library), with `Content-Length`.
fn raw_request(target: &Target, conv: &Conversation, spec: &RequestSpec) -> Vec<u8> {
    let (authority, prefix) = split_url(target.base_url.as_deref().unwrap());
    let req = http_request(target, conv, spec).unwrap_or_else(|e| panic!("{e}"));
    let mut out = format!(
        "POST {prefix}{} HTTP/1.1\r\nhost: {authority}\r\n",
        req.path
    );
    for (k, v) in &req.headers {
        out.push_str(&format!("{}: {}\r\n", k, v.to_str().unwrap()));
    }
    out.push_str(&format!("content-length: {}\r\n\r\n", req.body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&req.body);
    bytes
}

fn p50(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// (d) TTFT of spark-bench's `http` transport (the library's `exchange`, new connection per
/// request) against a minimal raw-socket client sending the same request, alternating one of
/// each so server drift falls on both; both timed from just before the connection is opened
/// to the first content event; five blocks of pairs, the median block's p50 difference held
/// to the issue's 0.3 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn llama_http_ttft_matches_a_raw_socket_client() {
    const PAIRS: usize = 100;
    const WARMUP: usize = 4;
    const BLOCKS: usize = 5;
    let tmp = testkit::tempdir().unwrap();
    let plan = resolved_plan(tmp.path());
    let target = plan.cells[0].target.clone();
    let turn = &plan.sessions.get(0).unwrap().turns[0];
    let spec = RequestSpec {
        max_output_tokens: turn.max_output_tokens,
        ..Default::default()
    };
    let new_conv = || {
        let mut c = Conversation::new(&plan.system_prompt, target.api, TransportKind::Http, false);
        c.add_user_message(&turn.user_text);
        c
    };
    let request = Arc::new(raw_request(&target, &new_conv(), &spec));
    let (addr, _) = split_url(target.base_url.as_deref().unwrap());

    let clock = Clock::start();
    let connector = Arc::new(
        Connector::new(
            &target,
            TransportKind::Http,
            Trust::PublicRoots,
            Link::default(),
            clock,
            1,
        )
        .unwrap_or_else(|e| panic!("connector: {e:#}")),
    );
    let mut session = connector.session();
    let mut gaps = Vec::with_capacity(BLOCKS);
    for block in 0..BLOCKS {
        // The first block starts with a few unmeasured pairs (connection set-up paths and
        // the server's first requests warm up).
        let warmup = if block == 0 { WARMUP } else { 0 };
        // Per client: [request written, response head, first content] in ms from the start.
        let mut spark: [Vec<f64>; 3] = Default::default();
        let mut raw: [Vec<f64>; 3] = Default::default();
        // spark-bench's own phases: dispatch lag, DNS, TCP connect.
        let mut setup: [Vec<f64>; 3] = Default::default();
        for i in 0..warmup + PAIRS {
            // Alternate which goes first in each pair.
            for which in [i % 2, 1 - i % 2] {
                if which == 0 {
                    let (req, addr) = (request.clone(), addr.clone());
                    let d = tokio::task::spawn_blocking(move || raw_ttft(&addr, &req))
                        .await
                        .unwrap()
                        .unwrap_or_else(|e| panic!("raw client: {e}"));
                    if i >= warmup {
                        for (v, d) in raw.iter_mut().zip(d) {
                            v.push(d.as_secs_f64() * 1e3);
                        }
                    }
                } else {
                    let mut conv = new_conv();
                    let meta = RecordMeta {
                        id: i as u64,
                        intended_ns: clock.now_ns(),
                        ..Default::default()
                    };
                    let (rec, _) = exchange(
                        &mut session,
                        &target,
                        &mut conv,
                        &spec,
                        &meta,
                        &CancellationToken::new(),
                    )
                    .await;
                    assert_eq!(rec.outcome, OutcomeKind::Ok, "{rec:?}");
                    assert!(
                        !rec.connection_reused,
                        "http opens a connection per request"
                    );
                    let at = |v: Option<u64>, what: &str| {
                        ms(v.unwrap_or_else(|| panic!("no {what}: {rec:?}")) - meta.intended_ns)
                    };
                    if i >= warmup {
                        spark[0].push(at(rec.request_written_ns, "request_written_ns"));
                        spark[1].push(at(rec.response_headers_ns, "response_headers_ns"));
                        spark[2].push(at(rec.first_token_ns, "first_token_ns"));
                        setup[0].push(ms(rec.dispatch_ns - meta.intended_ns));
                        setup[1].push(ms(rec.dns_ns.unwrap_or(0)));
                        setup[2].push(ms(rec.tcp_connect_ns.unwrap_or(0)));
                    }
                }
            }
        }
        println!("block {}/{BLOCKS}:", block + 1);
        let phases = ["request written", "response head", "first content (TTFT)"];
        for (k, name) in phases.iter().enumerate() {
            let (s, r) = (p50(&mut spark[k]), p50(&mut raw[k]));
            println!(
                "  {name} p50: spark-bench http {s:.3} ms, raw socket {r:.3} ms, difference {:+.3} ms",
                s - r
            );
        }
        println!(
            "  spark-bench http p50: dispatch lag {:.3} ms, dns {:.3} ms, tcp connect {:.3} ms",
            p50(&mut setup[0]),
            p50(&mut setup[1]),
            p50(&mut setup[2])
        );
        gaps.push(p50(&mut spark[2]) - p50(&mut raw[2]));
    }
    gaps.sort_by(f64::total_cmp);
    let gap = gaps[BLOCKS / 2];
    println!(
        "TTFT p50 difference per block of {PAIRS} alternating pairs: {}; median {gap:+.3} ms",
        gaps.iter()
            .map(|g| format!("{g:+.3} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Issue 9: within 0.3 ms of the raw client. One block's p50 can be thrown off by the
    // 2-core machine (another process, the server's own spread): the median of five blocks
    // is what is held to 0.3 ms.
    assert!(
        gap.abs() <= 0.3,
        "spark-bench http TTFT p50 is {gap:+.3} ms from the raw socket client's (median of \
         {BLOCKS} blocks: {gaps:?})"
    );
}

/// (e) The one-line run: `--url $SPARK_BENCH_LLAMA_URL --model local` with no targets file
/// exits 0, every request ok, on the target named after the server's host and port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn llama_one_line_url_run() {
    let tmp = testkit::tempdir().unwrap();
    let sc = scenario(
        tmp.path(),
        "one-line.toml",
        "name = \"one-line\"\nmax_output_tokens = 12\n[load]\nsessions = 4\nconcurrency = 2\n\
         [[turns]]\nprompt = \"Say hi.\"\n[[turns]]\nprompt = \"Again.\"\n",
    );
    let out = tmp.path().join("results");
    let url = llama_url();
    let args = [
        "run",
        sc.to_str().unwrap(),
        "--url",
        &url,
        "--model",
        "local",
        "--transport",
        "http-pooled",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--no-report",
    ];
    let o = run_bin(&args, &[]).await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let rows = csv_maps(&only_run(&out).join("requests.csv"));
    let rows = user_rows(&rows);
    assert_eq!(rows.len(), 8, "{stderr}");
    assert_all_ok(&rows);
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/v1");
    assert!(
        rows.iter()
            .all(|r| r["target"] == format!("url-127-0-0-1-{port}")),
        "{:?}",
        rows[0]
    );
    println!("one-line run: {} ok rows\n{stdout}", rows.len());
}

/// A concurrency sweep against llama-server with a percentile SLO no server meets (TTFT p90
/// within 1 µs) beside one every point meets: the sweep marks the missed points everywhere
/// goodput shows (sweep.json's `slo_met`, the sweep table's "SLO missed", the goodput
/// chart's crossed circles and its legend entry), and marks nothing when every SLO held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn llama_sweep_goodput_marks_percentile_slo_misses() {
    for (slo, missed) in [("p90<=1us", true), ("p90<=60s", false)] {
        let tmp = testkit::tempdir().unwrap();
        let text = format!(
            "name = \"llama-goodput\"\nseed = 5\nmax_output_tokens = 8\nlink = \"none\"\n\n\
             [load]\nsessions = 4\ncache = \"as-is\"\n\n[matrix]\ntargets = [\"llama\"]\n\
             transports = [\"http-pooled\"]\n\n[slo]\nttft = \"{slo}\"\ne2e = \"60s\"\n\n\
             [[turns]]\nprompt = \"Write a haiku about sockets.\"\n"
        );
        let sc = scenario(tmp.path(), "goodput.toml", &text);
        let targets = targets_file(tmp.path());
        let out = tmp.path().join("results");
        let args = [
            "run",
            sc.to_str().unwrap(),
            "--targets",
            targets.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--sweep",
            "concurrency=1,2",
        ];
        let o = run_bin(&args, &[]).await;
        let (stdout, stderr) = texts(&o);
        assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
        let dir = std::fs::read_dir(&out)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.join("sweep.json").is_file())
            .expect("a sweep directory");
        let s = spark_bench::store::read_sweep(&dir).unwrap();
        let points: Vec<_> = s.curves.iter().flat_map(|c| c.points.iter()).collect();
        assert_eq!(points.len(), 2, "{s:?}");
        assert!(
            points.iter().all(|p| p.slo_met == Some(!missed)),
            "slo {slo}: {points:?}"
        );
        let table = spark_bench::recorder::sweep::sweep_table(&s);
        assert_eq!(table.contains("SLO missed"), missed, "{table}");
        spark_bench::report::sweep::render_sweep(&dir).unwrap();
        let svg = std::fs::read_to_string(dir.join("charts/sweep_goodput.svg"))
            .expect("the sweep report's goodput chart");
        assert_eq!(
            svg.contains("missed a percentile SLO"),
            missed,
            "slo {slo}: the goodput chart's legend"
        );
        println!("slo ttft {slo}: {table}");
    }
}
