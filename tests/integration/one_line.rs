//! Your own server in one line: `spark-bench run SCENARIO --url URL --model M [--api …]
//! [--api-key-env VAR]`, against a real `spark-bench serve` process, with no targets file;
//! a URL given as `--target` answered with the fix that works; the key sent and written
//! nowhere.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::binary::*;

/// A `spark-bench serve --listen 127.0.0.1:0` process, killed on drop.
struct Served(Child, SocketAddr);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve() -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spark-bench"))
        .args(["serve", "--profile", "fast", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .unwrap_or_else(|e| panic!("{line:?}: {e}"));
    Served(child, addr)
}

/// Runs `spark-bench run scenarios/smoke.toml ARGS --out DIR -q --no-report` and returns
/// its exit code, stderr and the rows of requests.csv (empty when no run was written).
async fn run_smoke(
    out: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (
    Option<i32>,
    String,
    Vec<std::collections::HashMap<String, String>>,
) {
    let mut argv = vec!["run", "scenarios/smoke.toml"];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--out", out.to_str().unwrap(), "-q", "--no-report"]);
    let o = run_bin(&argv, env).await;
    let (_, stderr) = texts(&o);
    let rows = if out.exists() {
        csv_maps(&only_run(out).join("requests.csv"))
    } else {
        Vec::new()
    };
    (o.status.code(), stderr, rows)
}

/// Every file under `dir` that contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            hits.extend(files_containing(&p, needle));
        } else if String::from_utf8_lossy(&std::fs::read(&p).unwrap()).contains(needle) {
            hits.push(p.display().to_string());
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_and_model_run_a_scenario_against_serve_with_no_targets_file() {
    let s = serve();
    let port = s.1.port();
    let tmp = testkit::tempdir().unwrap();
    // URL credentials are never sent, and written nowhere.
    let url = format!("http://bob:pw-in-url-71@127.0.0.1:{port}/v1");
    let out = tmp.path().join("chat");
    let (code, stderr, rows) = run_smoke(&out, &["--url", &url, "--model", "sim"], &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let name = format!("url-127-0-0-1-{port}");
    let odd: Vec<String> = rows
        .iter()
        .filter(|r| r["target"] != name || r["outcome"] != "ok")
        .map(|r| {
            format!(
                "{} {} {} {:?}",
                r["target"],
                r["transport"],
                r["outcome"],
                r.get("error")
            )
        })
        .collect();
    assert!(!rows.is_empty() && odd.is_empty(), "{odd:?}\n{stderr}");
    // Chat completions: the three HTTP transports, no WebSocket cell (the scenario's matrix
    // lists ws; the API decides).
    let mut transports: Vec<&str> = rows.iter().map(|r| r["transport"].as_str()).collect();
    transports.sort_unstable();
    transports.dedup();
    assert_eq!(transports, ["http", "http-pooled", "http2"], "{stderr}");
    assert!(!stderr.contains("skipping"), "{stderr}");
    assert_eq!(files_containing(&out, "pw-in-url-71"), Vec::<String>::new());

    let out = tmp.path().join("responses");
    let url = format!("http://127.0.0.1:{port}/v1");
    let (code, stderr, rows) = run_smoke(
        &out,
        &["--url", &url, "--model", "sim", "--api", "responses"],
        &[],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(rows
        .iter()
        .all(|r| r["target"] == name && r["outcome"] == "ok"));
    assert!(rows.iter().any(|r| r["transport"] == "ws"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_as_target_and_a_url_without_model_say_the_fix() {
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("r");
    // A port nothing listens on: bound by the OS, then closed (no fixed port).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let (code, stderr, _) = run_smoke(&out, &["--target", &url], &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("use --url {url} --model M")) && !stderr.contains("[targets.http"),
        "{stderr}"
    );
    let (code, stderr, _) = run_smoke(&out, &["--url", &url], &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("could not read the model list at {url}/models"))
            && stderr.contains("--model M"),
        "{stderr}"
    );
    // The other three flags need --url.
    let (code, stderr, _) = run_smoke(&out, &["--model", "m"], &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--url"), "{stderr}");
    assert!(!out.exists());
}

/// A TCP relay to `upstream` that keeps every byte clients sent (HTTP/1.1 request heads
/// included), to see what went over the wire.
fn recording_relay(upstream: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut server) = TcpStream::connect(upstream) else {
                return;
            };
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
                let _ = c2.shutdown(std::net::Shutdown::Write);
            });
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                while let Ok(n) = client.read(&mut buf) {
                    if n == 0 || server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    keep.lock().unwrap().extend_from_slice(&buf[..n]);
                }
                let _ = server.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_env_sends_the_key_and_writes_it_nowhere() {
    let s = serve();
    let (relay, seen) = recording_relay(s.1);
    let key = "sk-oneline-test-0123456789abcdef";
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("r");
    let url = format!("http://127.0.0.1:{}/v1", relay.port());
    let (code, stderr, rows) = run_smoke(
        &out,
        &[
            "--url",
            &url,
            "--model",
            "sim",
            "--api-key-env",
            "SPARK_BENCH_ONE_LINE_KEY",
            "--transport",
            "http-pooled",
        ],
        &[("SPARK_BENCH_ONE_LINE_KEY", key)],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!rows.is_empty() && rows.iter().all(|r| r["outcome"] == "ok"));
    let wire = String::from_utf8_lossy(&seen.lock().unwrap()).to_ascii_lowercase();
    let sent = format!("authorization: bearer {key}");
    assert!(
        wire.matches(&sent).count() >= rows.len(),
        "the key went with {} of {} requests",
        wire.matches(&sent).count(),
        rows.len()
    );
    assert_eq!(files_containing(&out, key), Vec::<String>::new());
    assert_eq!(
        files_containing(&out, "0123456789abcdef"),
        Vec::<String>::new()
    );
    assert!(!stderr.contains(key), "{stderr}");
}
