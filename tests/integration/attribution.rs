//! Whose is a "vs http" difference? Against a small HTTP/1.1 keep-alive chat-completions server
//! written here on raw TCP (127.0.0.1:0, independent of `src/sim`) whose speed depends on the
//! connection: the first request of a connection waits 30 ms before its first token and
//! streams 20 ms/token, later requests on the same connection 5 ms and 4 ms/token (a server
//! with a warm per-connection state). It reports llama.cpp-style `timings` (`prompt_ms`,
//! `predicted_ms`) in its final chunk, from its own clock. `http` opens a connection per
//! request (always slow); `http-pooled` reuses them (fast): the summary and the report must
//! say the difference is the server's, and the transport delta they print must be the
//! difference of the two cells' overhead p50s.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::run::{run_lib, scenario};
use spark_bench::recorder::Metric;
use spark_bench::store::LoadedRun;

const TOKENS: usize = 12;

/// One chunk of a chunked-encoding body.
fn chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}

/// Reads one request (headers and a `content-length` body); `false` at end of stream.
async fn read_request(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + len {
                let mut b = [0u8; 4096];
                let n = tcp.read(&mut b).await.unwrap_or(0);
                if n == 0 {
                    return false;
                }
                buf.extend_from_slice(&b[..n]);
            }
            buf.drain(..end + 4 + len);
            return true;
        }
        let mut b = [0u8; 4096];
        let n = tcp.read(&mut b).await.unwrap_or(0);
        if n == 0 {
            return false;
        }
        buf.extend_from_slice(&b[..n]);
    }
}

async fn serve(mut tcp: TcpStream) {
    tcp.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let mut served = 0u32;
    while read_request(&mut tcp, &mut buf).await {
        let received = Instant::now();
        let (prefill, per_token) = if served == 0 {
            (Duration::from_millis(30), Duration::from_millis(20))
        } else {
            (Duration::from_millis(5), Duration::from_millis(4))
        };
        served += 1;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n";
        if tcp.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        tokio::time::sleep(prefill).await;
        let mut first = None;
        let mut last = received;
        for i in 0..TOKENS {
            if i > 0 {
                tokio::time::sleep(per_token).await;
            }
            let ev = format!(
                "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"w{i} \"}},\"finish_reason\":null}}]}}\n\n"
            );
            if tcp.write_all(&chunk(&ev)).await.is_err() {
                return;
            }
            last = Instant::now();
            first.get_or_insert(last);
        }
        let first = first.unwrap();
        let prompt_ms = first.duration_since(received).as_secs_f64() * 1e3;
        let predicted_ms = last.duration_since(first).as_secs_f64() * 1e3;
        let end = format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":20,\"completion_tokens\":{TOKENS},\"total_tokens\":{}}},\"timings\":{{\"prompt_n\":20,\"prompt_ms\":{prompt_ms:.3},\"predicted_n\":{TOKENS},\"predicted_ms\":{predicted_ms:.3}}}}}\n\ndata: [DONE]\n\n",
            TOKENS + 20
        );
        let mut tail = chunk(&end);
        tail.extend_from_slice(b"0\r\n\r\n");
        if tcp.write_all(&tail).await.is_err() {
            return;
        }
    }
}

async fn start_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(serve(tcp));
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

#[tokio::test]
async fn a_server_that_decodes_faster_on_a_reused_connection_gets_the_blame() {
    let base_url = start_server().await;
    let dir = testkit::tempdir().unwrap();
    let text = format!(
        r#"name = "attribution"
link = "none"
max_output_tokens = 16
[load]
sessions = 3
concurrency = 1
schedule = "sequential"
[matrix]
targets = ["local"]
transports = ["http", "http-pooled"]
[targets.local]
base_url = "{base_url}"
api = "chat-completions"
model = "m"
request_timing = false
[[turns]]
prompt = "Write a function."
[[turns]]
prompt = "Now test it."
[[turns]]
prompt = "And document it."
"#
    );
    let path = scenario(dir.path(), "attribution.toml", &text);
    let outcome = run_lib(&path, &dir.path().join("out"), &[]).await;
    let run = LoadedRun::open(&outcome.dir).unwrap();
    let s = &run.summary;
    let http = s.cell("local", "http").unwrap();
    let pooled = s.cell("local", "http-pooled").unwrap();
    assert_eq!((http.ok, pooled.ok), (9, 9), "{s:#?}");
    assert_eq!(
        pooled.connections.reused, 8,
        "the pool reused its one connection"
    );
    assert_eq!(pooled.overhead_sources.get("server-timing"), Some(&9));

    // The splits: the server's TPOT is 20 ms on http, 4 ms pooled.
    let p50 = |c: &spark_bench::recorder::CellSummary, m: Metric| c.metric(m).unwrap().p50;
    assert!((p50(http, Metric::ServerTpot) - 20.0).abs() < 3.0);
    assert!((p50(pooled, Metric::ServerTpot) - 4.0).abs() < 2.0);
    let a = pooled.attribution.as_ref().expect("attribution");
    let (ttft_d, tpot_d) = (a.ttft_vs_http.unwrap(), a.tpot_vs_http.unwrap());
    assert!(
        ttft_d.server_ms < -15.0 && tpot_d.server_ms < -10.0,
        "{a:?}"
    );
    // The transport delta printed is the overhead difference (within 0.2 ms).
    let overhead_delta = p50(pooled, Metric::Overhead) - p50(http, Metric::Overhead);
    assert!(
        (ttft_d.transport_ms - overhead_delta).abs() <= 0.2,
        "transport delta {} ms, overhead p50 difference {overhead_delta} ms",
        ttft_d.transport_ms
    );
    let per_token_delta = p50(pooled, Metric::TpotOverhead) - p50(http, Metric::TpotOverhead);
    assert!(
        (tpot_d.transport_ms - per_token_delta).abs() <= 0.2,
        "{a:?}"
    );
    assert_eq!(a.notes.len(), 2, "{a:?}");
    for (n, label) in a.notes.iter().zip(["TTFT \u{2212}", "TPOT \u{2212}"]) {
        assert!(
            n.starts_with(label)
                && n.ends_with("the difference is the server's, not the transport's"),
            "{n}"
        );
    }
    assert!(pooled.vs_http.contains_key("overhead"));
    assert!(pooled.vs_http.contains_key("tpot_overhead"));
    // The transport delta, as the sentence prints it, matches the overhead difference.
    let printed: f64 = a.notes[0]
        .split("transport part ")
        .nth(1)
        .and_then(|t| t.split(" ms").next())
        .map(|v| v.replace('\u{2212}', "-").replace(['+', '±'], ""))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no transport part in {:?}", a.notes[0]));
    assert!(
        (printed - overhead_delta).abs() <= 0.2,
        "{printed} vs {overhead_delta}"
    );

    // The report says so too, in both formats.
    spark_bench::report::render_run(&outcome.dir).unwrap();
    let md = std::fs::read_to_string(outcome.dir.join("report.md")).unwrap();
    assert!(md.contains("### Server and transport (p50)"), "{md}");
    assert!(
        md.contains("local · http-pooled: TTFT \u{2212}")
            && md.contains("the difference is the server's, not the transport's"),
        "{md}"
    );
    let html = std::fs::read_to_string(outcome.dir.join("report.html")).unwrap();
    assert!(
        html.contains("the difference is the server&#39;s")
            || html.contains("the difference is the server's")
    );
    // And the terminal table.
    let table = spark_bench::recorder::table(s);
    println!("{table}");
    assert!(
        table.contains("local × http-pooled: TPOT \u{2212}"),
        "{table}"
    );
}
