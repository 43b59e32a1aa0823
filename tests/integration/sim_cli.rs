//! `spark-bench serve` as a real process: it prints its URL, and speaks HTTP.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::sim_client::*;

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `spark-bench serve`: the first line it printed (its URL; None when it exited
/// first) and its stderr, line by line (each line is also echoed to the test's stderr).
struct Served {
    child: Kill,
    url_line: Option<String>,
    stderr: std::sync::mpsc::Receiver<String>,
}

/// Starts `spark-bench serve ARGS`.
fn serve(args: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spark-bench"))
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, stderr) = std::sync::mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            eprintln!("serve: {l}");
            let _ = tx.send(l);
        }
    });
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let n = reader.read_line(&mut line).unwrap();
    // Keep draining stdout: closing the pipe early would make the server's later prints fail.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    Served {
        child: Kill(child),
        url_line: (n > 0).then_some(line),
        stderr,
    }
}

/// The first stderr line of `s` that contains `needle`, within 10 s.
fn stderr_line(s: &Served, needle: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let l = s
            .stderr
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("serve printed no line with {needle:?}"));
        if l.contains(needle) {
            return l;
        }
    }
}

/// The address in a `… listening on http://HOST:PORT/v1` line.
fn addr_of(line: &str) -> std::net::SocketAddr {
    line.trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .unwrap()
}

#[tokio::test]
async fn serve_prints_a_url_and_answers_chat_and_responses() {
    let child = serve(&[
        "--profile",
        "wafer",
        "--listen",
        "127.0.0.1:0",
        "--seed",
        "3",
    ]);
    let line = child.url_line.clone().expect("serve printed its URL");
    assert!(
        line.starts_with("spark-bench simulator (profile wafer) listening on http://127.0.0.1:"),
        "{line}"
    );
    let addr = addr_of(&line);
    let mut c = h1(open(addr, None, None, &[]).await.io).await;
    let r = post(&mut c, "/chat/completions", r#"{"model":"sim","stream":true,"max_tokens":30,"messages":[{"role":"user","content":"hi"}]}"#, &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.events.last().unwrap().data, "[DONE]");
    let r = post(
        &mut c,
        "/responses",
        r#"{"model":"sim","stream":true,"max_output_tokens":30,"input":"hi"}"#,
        &[],
    )
    .await;
    assert_eq!(
        r.events.last().unwrap().event.as_deref(),
        Some("response.completed")
    );
    // The trace is reachable out of process.
    let id = r.data().last().unwrap()["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let t = get(&mut c, &format!("/sim/trace/{id}")).await.json();
    assert!(t["chunk_writes"].as_array().unwrap().len() >= 5);
    assert!(
        t["received_at_ns"].as_u64().unwrap() < t["chunk_writes"][0]["at_ns"].as_u64().unwrap()
    );
    drop(child);
}

#[tokio::test]
async fn serve_tls_prints_the_certificate_path_and_serves_https() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spark-bench"))
        .args([
            "serve",
            "--profile",
            "fast",
            "--listen",
            "127.0.0.1:0",
            "--tls",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut child = Kill(child);
    let mut reader = BufReader::new(stdout);
    let (mut url_line, mut pem_line, mut curl_line) = (String::new(), String::new(), String::new());
    reader.read_line(&mut url_line).unwrap();
    reader.read_line(&mut pem_line).unwrap();
    reader.read_line(&mut curl_line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let url = url_line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{url_line}");
    let pem_path = pem_line
        .trim()
        .strip_prefix("certificate (PEM): ")
        .expect(&pem_line)
        .to_string();
    assert!(
        curl_line.contains(&format!("curl --cacert {pem_path} -N {url}/")),
        "{curl_line}"
    );
    let pem = std::fs::read(&pem_path).unwrap();
    let cfg = spark_bench::tls::client_config_from_pem(&pem, &[b"http/1.1"]).unwrap();
    let addr: std::net::SocketAddr = url
        .trim_start_matches("https://")
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .unwrap();
    let mut c = h1(Box::pin(tls)).await;
    let r = post(&mut c, "/chat/completions", r#"{"model":"sim","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#, &[]).await;
    assert_eq!(r.events.last().unwrap().data, "[DONE]");

    // The file: not at a predictable path, private (0600 in a 0700 directory of its own),
    // and gone once the server stops on SIGTERM.
    use std::os::unix::fs::PermissionsExt;
    let pem_path = std::path::PathBuf::from(pem_path);
    let dir = pem_path.parent().unwrap().to_path_buf();
    let port = addr.port();
    assert!(
        !pem_path.to_string_lossy().contains(&port.to_string()),
        "{}",
        pem_path.display()
    );
    let mode =
        |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&pem_path), 0o600);
    assert_eq!(mode(&dir), 0o700);
    assert!(std::fs::symlink_metadata(&dir).unwrap().is_dir());
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.0.id() as i32, libc::SIGTERM);
    }
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!pem_path.exists() && !dir.exists(), "{}", dir.display());
}

#[tokio::test]
async fn serve_reuse_port_lets_several_processes_share_one_port() {
    let first = serve(&[
        "--profile",
        "fast",
        "--listen",
        "127.0.0.1:0",
        "--reuse-port",
    ]);
    let addr = addr_of(
        first
            .url_line
            .as_deref()
            .expect("first serve printed its URL"),
    );
    let spec = addr.to_string();
    let second = serve(&["--profile", "fast", "--listen", &spec, "--reuse-port"]);
    let line = second
        .url_line
        .as_deref()
        .expect("second serve printed its URL");
    assert_eq!(addr_of(line), addr);
    // Without the flag the port is taken: a clear error and a non-zero exit.
    let mut third = serve(&["--profile", "fast", "--listen", &spec]);
    assert_eq!(third.url_line, None);
    assert!(!third.child.0.wait().unwrap().success());
    stderr_line(&third, &format!("cannot listen on --listen {spec}"));
    // With the first process gone, the second still answers on the shared port.
    drop(first);
    let mut c = h1(open(addr, None, None, &[]).await.io).await;
    let r = post(&mut c, "/chat/completions", r#"{"model":"sim","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#, &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.events.last().unwrap().data, "[DONE]");
    drop(second);
}

#[tokio::test]
async fn serve_says_when_it_cannot_accept_and_serves_again_after() {
    // A server that may hold 48 descriptors: the connections past that wait in the backlog.
    let s = serve(&[
        "--profile",
        "fast",
        "--listen",
        "127.0.0.1:0",
        "--max-open-files",
        "48",
    ]);
    let addr = addr_of(s.url_line.as_deref().expect("serve printed its URL"));
    let limit = stderr_line(&s, "open-file limit");
    assert!(limit.contains("open-file limit 48 "), "{limit}");
    let mut held = Vec::new();
    for _ in 0..64 {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let warning = stderr_line(&s, "cannot accept");
    assert!(warning.contains("listen backlog"), "{warning}");
    assert!(warning.contains("open-file limit"), "{warning}");
    drop(held);
    // Once descriptors are free again it serves.
    let mut c = h1(open(addr, None, None, &[]).await.io).await;
    let r = post(&mut c, "/chat/completions", r#"{"model":"sim","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#, &[]).await;
    assert_eq!(r.status, 200);
}
