//! The transport probe, against servers written here on raw sockets: an HTTP/1.1-only chat
//! server that answers the h2c preface with `HTTP/1.1 400 Bad Request` (as llama.cpp's
//! llama-server does) and a Responses server that answers the WebSocket upgrade with 404.
//!
//! What must hold: the cell on a transport the server does not speak is skipped with one
//! line naming the server's answer, the manifest keeps every probe, and the cells that ran
//! exit by the usual rules; every cell skipped is exit 2; with `--force-transports` the cell
//! runs and its requests are `unsupported-transport`, quoting the answer. The simulator
//! passes the HTTP/2 and WebSocket probes, over plain TCP and TLS.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use spark_bench::transport::probe::{Probe, Verdict};
use spark_bench::transport::Trust;
use spark_bench::vocab::{BaseUrl, TransportKind};

use crate::binary::*;
use crate::conn_lifecycle::chat_sse_body;
use crate::support::run::scenario;

/// What the server did, by kind of request.
#[derive(Default)]
struct Seen {
    prefaces: AtomicUsize,
    upgrades: AtomicUsize,
    posts: AtomicUsize,
}

/// The request head in `buf` once complete (its body, by `Content-Length`, read too).
async fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .to_ascii_lowercase()
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                return Some(head);
            }
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn connection(mut s: TcpStream, seen: Arc<Seen>) {
    let mut buf = Vec::new();
    while let Some(head) = read_head(&mut s, &mut buf).await {
        let line = head.lines().next().unwrap_or_default().to_string();
        if line.starts_with("PRI ") {
            seen.prefaces.fetch_add(1, Ordering::Relaxed);
            let _ = s
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            return;
        }
        if line.starts_with("GET ") && head.to_ascii_lowercase().contains("upgrade: websocket") {
            seen.upgrades.fetch_add(1, Ordering::Relaxed);
            let _ = s
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found")
                .await;
            continue;
        }
        seen.posts.fetch_add(1, Ordering::Relaxed);
        let body = chat_sse_body(3);
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if s.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The HTTP/1.1-only server; its base URL (`http://127.0.0.1:PORT/v1`) and what it saw.
async fn h1_only_server() -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(connection(sock, s.clone()));
        }
    });
    (format!("http://{addr}/v1"), seen)
}

fn scenario_text(base_url: &str, api: &str, transports: &str) -> String {
    format!(
        r#"name = "probe"
seed = 1
max_output_tokens = 8

[targets.h1only]
base_url = "{base_url}"
api = "{api}"
model = "m"
request_timeout = "10s"
stall_timeout = "5s"

[load]
sessions = 2
concurrency = 1

[matrix]
targets = ["h1only"]
transports = {transports}

[[turns]]
prompt = "hi"
"#
    )
}

/// `spark-bench run` on `text` with `extra`: its exit code, stderr and results directory.
async fn run(dir: &Path, text: &str, extra: &[&str]) -> (Option<i32>, String, std::path::PathBuf) {
    let sc = scenario(dir, "probe.toml", text);
    let out = dir.join("results");
    let mut args = vec![
        "run",
        sc.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--no-report",
    ];
    args.extend_from_slice(extra);
    let o = run_bin(&args, &[]).await;
    let (_, stderr) = texts(&o);
    assert_no_panic(&stderr);
    (o.status.code(), stderr, out)
}

fn probes_of(run_dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(run_dir.join("manifest.json")).unwrap();
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["transport_probes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn probe_for<'a>(probes: &'a [serde_json::Value], transport: &str) -> &'a serde_json::Value {
    probes
        .iter()
        .find(|p| p["transport"] == transport)
        .unwrap_or_else(|| panic!("no {transport} probe in {probes:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_cell_the_server_cannot_speak_is_skipped_with_its_answer() {
    let (url, seen) = h1_only_server().await;
    let tmp = testkit::tempdir().unwrap();
    let text = scenario_text(&url, "chat-completions", r#"["http", "http2"]"#);
    let (code, stderr, out) = run(tmp.path(), &text, &[]).await;
    // The http cell ran clean: exit 0 by the usual rules, the skipped cell not counted.
    assert_eq!(code, Some(0), "stderr:\n{stderr}");
    assert!(
        stderr.contains(
            "skipping h1only × http2: the server does not speak HTTP/2 (it answered \
             `HTTP/1.1 400 Bad Request` to the h2c preface); --force-transports runs it anyway"
        ),
        "stderr:\n{stderr}"
    );
    let dir = only_run(&out);
    let probes = probes_of(&dir);
    let h2 = probe_for(&probes, "http2");
    assert_eq!(h2["supported"], false, "{h2}");
    assert_eq!(h2["answer"], "HTTP/1.1 400 Bad Request", "{h2}");
    assert!(h2["elapsed_ms"].as_f64().unwrap() < 5000.0, "{h2}");
    assert_eq!(probe_for(&probes, "http")["supported"], true);
    let rows = csv_maps(&dir.join("requests.csv"));
    assert_eq!(
        rows.len(),
        2,
        "two sessions of one turn, http only: {rows:?}"
    );
    for r in &rows {
        assert_eq!(
            (r["transport"].as_str(), r["outcome"].as_str()),
            ("http", "ok"),
            "{r:?}"
        );
    }
    // One preface: the probe's; no http2 request was sent.
    assert_eq!(seen.prefaces.load(Ordering::Relaxed), 1);
    assert_eq!(seen.posts.load(Ordering::Relaxed), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_http2_cell_records_unsupported_transport_quoting_the_answer() {
    let (url, _seen) = h1_only_server().await;
    let tmp = testkit::tempdir().unwrap();
    let text = scenario_text(&url, "chat-completions", r#"["http", "http2"]"#);
    let (code, stderr, out) = run(tmp.path(), &text, &["--force-transports"]).await;
    // The forced cell's requests all failed: exit 3 by the usual rule, naming the kind.
    assert_eq!(code, Some(3), "stderr:\n{stderr}");
    assert!(
        stderr.contains("running h1only × http2 anyway (--force-transports)"),
        "{stderr}"
    );
    assert!(stderr.contains("unsupported-transport"), "{stderr}");
    let dir = only_run(&out);
    assert_eq!(probe_for(&probes_of(&dir), "http2")["supported"], false);
    let rows = csv_maps(&dir.join("requests.csv"));
    let (h2, h1): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r["transport"] == "http2");
    assert!(!h2.is_empty(), "the forced cell ran: {rows:?}");
    for r in &h2 {
        assert_eq!(r["outcome"], "unsupported-transport", "{r:?}");
        assert!(
            r["error"].starts_with(
                "the server does not speak HTTP/2 (it answered `HTTP/1.1 400 Bad Request` to the h2c preface)"
            ),
            "{r:?}"
        );
    }
    assert!(h1.iter().all(|r| r["outcome"] == "ok"), "{h1:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_websocket_upgrade_skips_the_ws_cell_and_nothing_left_is_exit_2() {
    let (url, seen) = h1_only_server().await;
    let tmp = testkit::tempdir().unwrap();
    let text = scenario_text(&url, "responses", r#"["ws"]"#);
    let (code, stderr, out) = run(tmp.path(), &text, &[]).await;
    assert_eq!(code, Some(2), "stderr:\n{stderr}");
    let ws_url = url.replacen("http://", "ws://", 1);
    assert!(
        stderr.contains(&format!(
            "skipping h1only × ws: the server does not speak the WebSocket mode (it answered \
             `HTTP/1.1 404 Not Found` to the WebSocket upgrade of {ws_url}/responses)"
        )),
        "stderr:\n{stderr}"
    );
    assert!(stderr.contains("nothing to run"), "{stderr}");
    assert!(
        !out.exists(),
        "no results directory for a run that ran nothing"
    );
    assert_eq!(
        seen.upgrades.load(Ordering::Relaxed),
        1,
        "one probe, no run"
    );
    assert_eq!(seen.posts.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_passes_the_http2_and_websocket_probes() {
    for tls in [false, true] {
        let mut cfg =
            spark_bench::sim::SimConfig::new(spark_bench::sim::Profile::builtin("fast").unwrap());
        let cert = spark_bench::tls::SelfSigned::generate().unwrap();
        if tls {
            cfg.tls = Some(cert.clone());
        }
        let sim = spark_bench::sim::spawn(cfg).await.unwrap();
        let endpoint = BaseUrl::parse(&sim.base_url).unwrap();
        let trust = Trust::Sim(cert);
        let headers = [(
            http::HeaderName::from_static("openai-beta"),
            http::HeaderValue::from_static("responses_websockets=2026-02-06"),
        )];
        let probe = Probe {
            endpoint: &endpoint,
            trust: &trust,
            proxy: None,
            ws_headers: &headers,
            timeout: Duration::from_secs(5),
        };
        for t in TransportKind::ALL {
            let p = probe.run(t).await;
            assert_eq!(p.verdict, Verdict::Supported, "{t} (tls {tls}): {p:?}");
        }
        assert_eq!(probe.run(TransportKind::Http2).await.answer, "SETTINGS");
        sim.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_not_called_unsupported() {
    // A port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let endpoint = BaseUrl::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
    let trust = Trust::PublicRoots;
    let probe = Probe {
        endpoint: &endpoint,
        trust: &trust,
        proxy: None,
        ws_headers: &[],
        timeout: Duration::from_secs(2),
    };
    let p = probe.run(TransportKind::Http2).await;
    assert_eq!(p.verdict, Verdict::Unknown, "{p:?}");
    assert!(p.answer.starts_with("not reached"), "{p:?}");
}
