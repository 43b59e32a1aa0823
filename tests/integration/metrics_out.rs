//! Metrics out: `run --metrics-listen` serves the live measurements at `/metrics` over real
//! TCP while the run goes (OpenMetrics to a scraper that asks for it, the 0.0.4 text format
//! otherwise), its final values for `--metrics-linger` after; the run's `metrics.om` is a
//! valid OpenMetrics exposition whose TTFT quantiles are `summary.json`'s.

use std::time::{Duration, Instant};

use spark_bench::report::openmetrics::Format;
use spark_bench::report::openmetrics_parse::{parse, value, ParsedSample};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::binary::*;
use crate::support::run::scenario;

/// `GET path` over a fresh TCP connection; (status line, headers and body as text).
async fn get(addr: &str, path: &str, accept: Option<&str>) -> std::io::Result<(String, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut text = String::new();
    s.read_to_string(&mut text).await?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((head.to_string(), body.to_string()))
}

const OM: &str = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";

fn scrape_value(samples: &[ParsedSample], status: &str) -> f64 {
    value(
        samples,
        "spark_bench_requests_total",
        &[("kind", "measured"), ("status", status)],
    )
    .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_listen_serves_live_then_final_values_that_match_the_files() {
    let tmp = testkit::tempdir().unwrap();
    // ~80 requests, ~25 ms apart: a few seconds, so several once-a-second publishes.
    let s = scenario(
        tmp.path(),
        "m.toml",
        r#"
name = "metrics"
max_output_tokens = 8
[matrix]
targets = ["sim-wafer"]
transports = ["http-pooled"]
[[turns]]
prompt = "Say something short."
think_time = "25ms"
repeat = 80
"#,
    );
    let out = tmp.path().join("results");
    let mut child = spark_bench(&[
        "run",
        s.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-report",
        "--quiet",
        "--metrics-listen",
        "127.0.0.1:0",
        "--metrics-linger",
        "2s",
    ])
    .spawn()
    .unwrap();
    // stderr drained into a channel, the metrics address taken from it.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let stderr = child.stderr.take().unwrap();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            let _ = tx.send(l);
        }
    });
    let mut seen = Vec::new();
    let addr = loop {
        let l = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("no metrics line within 60 s")
            .unwrap_or_else(|| panic!("the run ended without a metrics line: {seen:#?}"));
        if let Some(url) = l.strip_prefix("metrics: http://") {
            break url.trim_end_matches("/metrics").to_string();
        }
        seen.push(l);
    };

    // Scrape while the run goes: live values (complete="false") that grow.
    let started = Instant::now();
    let mut live_oks = Vec::new();
    let last = loop {
        let (head, body) = get(&addr, "/metrics", Some(OM)).await.unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/openmetrics-text"),
            "{head}"
        );
        let samples = parse(&body, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{body}"));
        if value(&samples, "spark_bench_run_info", &[("complete", "true")]).is_some() {
            break samples;
        }
        assert_eq!(
            value(&samples, "spark_bench_run_info", &[("complete", "false")]),
            Some(1.0)
        );
        live_oks.push(scrape_value(&samples, "ok"));
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no final values within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        live_oks.iter().any(|&n| n > 0.0 && n < 80.0),
        "no scrape saw the run part-way: {live_oks:?}"
    );
    assert!(live_oks.windows(2).all(|w| w[0] <= w[1]), "{live_oks:?}");
    // The 0.0.4 text format to a scraper that does not ask for OpenMetrics; 404 elsewhere.
    let (head, body) = get(&addr, "/metrics", None).await.unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let plain = parse(&body, Format::Prometheus).unwrap_or_else(|e| panic!("{e}\n{body}"));
    assert_eq!(scrape_value(&plain, "ok"), 80.0);
    let (head, _) = get(&addr, "/", None).await.unwrap();
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");

    let o = tokio::time::timeout(BIN_LIMIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    // Gone after the linger.
    assert!(
        get(&addr, "/metrics", None).await.is_err(),
        "still listening after the run"
    );

    // The file: the same final values, valid OpenMetrics, TTFT quantiles = summary.json's.
    let dir = only_run(&out);
    let file = std::fs::read_to_string(dir.join("metrics.om")).unwrap();
    let from_file = parse(&file, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{file}"));
    assert_eq!(from_file, last, "the file and the final scrape differ");
    assert_eq!(scrape_value(&from_file, "ok"), 80.0);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let ttft = &summary["cells"][0]["metrics"]["ttft"];
    for (q, key) in [("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99")] {
        let om = value(&from_file, "spark_bench_ttft_seconds", &[("quantile", q)]).unwrap();
        let ms = ttft[key].as_f64().unwrap();
        assert!(
            (om * 1e3 - ms).abs() <= ms * 1e-9,
            "ttft {key}: {om} s vs {ms} ms"
        );
    }
    let count = value(&from_file, "spark_bench_ttft_seconds_count", &[]).unwrap();
    assert_eq!(count, ttft["count"].as_f64().unwrap());

    // The vLLM export of the same run: vLLM's keys, per request and in aggregate.
    let exported = tmp.path().join("vllm");
    let o = run_bin(
        &[
            "export",
            "vllm",
            dir.to_str().unwrap(),
            "--out",
            exported.to_str().unwrap(),
            "--json",
        ],
        &[],
    )
    .await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let files: Vec<String> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    for key in [
        "date",
        "backend",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "generated_texts",
        "errors",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_tpot_ms",
        "mean_itl_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
    ] {
        assert!(v.get(key).is_some(), "no {key} in {v}");
    }
    assert_eq!(v["num_prompts"], 80);
    assert_eq!(v["completed"], 80);
    // sim-wafer's API is the Responses API (no vLLM backend has a name for it).
    assert_eq!(v["backend"], "openai-responses");
    assert_eq!(v["ttfts"].as_array().unwrap().len(), 80);
    assert_eq!(v["output_lens"].as_array().unwrap().len(), 80);
    assert_eq!(
        v["total_output_tokens"],
        summary["cells"][0]["output_tokens"]
    );
    // vLLM's TTFT is from the request's send: summary.json's ttft_dispatch. The export takes
    // numpy's median of the raw values (the mean of the middle two of 80), the summary a
    // 3-significant-digit histogram's 40th value: close, not equal.
    let median = v["median_ttft_ms"].as_f64().unwrap();
    let p50 = summary["cells"][0]["metrics"]["ttft_dispatch"]["p50"]
        .as_f64()
        .unwrap();
    assert!(
        (median - p50).abs() <= p50 * 0.05,
        "median {median} vs p50 {p50}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_metrics_address_fails_the_run_before_it_starts() {
    let tmp = testkit::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = tmp.path().join("results");
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--out",
            out.to_str().unwrap(),
            "--no-report",
            "--metrics-listen",
            &addr,
        ],
        &[],
    )
    .await;
    let (_, stderr) = texts(&o);
    assert_ne!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}
