//! The planted-secret matrix: `spark-bench run` (the binary) and then `report` against a
//! hostile server and proxy written here (raw TCP, its own HTTP/1.1, CONNECT and WebSocket
//! framing), then every file of every output directory is read, binary too, and searched
//! for every planted secret and every 8-byte start of one (so any longer cut-off start too).
//!
//! Planted: an API key whose variable ends in a space and a newline, `user:password@` in
//! `base_url`, credential-like inline headers other than the well-known names, and proxy
//! credentials in `HTTP_PROXY`. The server echoes all of them: in JSON error bodies, in
//! bodies and unparsable events padded so that every excerpt limit (80-byte proxy reason,
//! 200-, 300-, 512-byte excerpts) falls inside a secret, as the response id (HTTP and
//! WebSocket), in WebSocket close reasons and error events, in text deltas, and a proxy
//! echoes its `Proxy-Authorization` in a 407's reason and body and inside the tunnel.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::raw_head::{read_head, Head};

const KEY_VAR: &str = "SPARK_BENCH_MATRIX_KEY";
/// The variable's value: the key with a trailing space and newline (sent trimmed).
const KEY_RAW: &str = "sk-matrix-7f3a9c0d1e2b4SECRETKEY \n";
const KEY: &str = "sk-matrix-7f3a9c0d1e2b4SECRETKEY";
/// Inline headers whose names look like credentials (none of the well-known five).
const HEADERS: [(&str, &str); 4] = [
    ("x-goog-api-key", "googhdr-1b2c3d4e5f60718293"),
    ("x-custom-token", "tokhdr-9a8b7c6d5e4f30211"),
    ("x-amz-signature", "sighdr-0f1e2d3c4b5a69788"),
    ("x-vendor-credential", "credhdr-5566778899aabbcc"),
];
const USERINFO: &str = "alice:urlpw-44d1c9e0b7a6f5";
const URL_PASSWORD: &str = "urlpw-44d1c9e0b7a6f5";
const PROXY_USERINFO: &str = "bob:proxypw-83e2a1f0c9d8b7";
const PROXY_PASSWORD: &str = "proxypw-83e2a1f0c9d8b7";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// What the echoing server quotes from a request head.
impl Head {
    /// Every header value the client sent, as one text (what an echoing server quotes).
    fn all(&self) -> String {
        self.headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
    /// The key as sent in `Authorization: Bearer …`.
    fn key(&self) -> String {
        let a = self.get("authorization");
        a.strip_prefix("Bearer ").unwrap_or(&a).to_string()
    }
}

fn response(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// `pad` bytes of filler, a space, then `secret`: a cut at `pad + 5` bytes falls inside it.
fn straddle(fill: char, pad: usize, secret: &str) -> String {
    format!("{} {secret} tail", fill.to_string().repeat(pad))
}

fn sse(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// Every secret the client sent, whatever the request: what this server echoes.
fn echoed(h: &Head, tunnel_auth: &str) -> Vec<String> {
    let mut v = vec![h.key()];
    v.extend(HEADERS.iter().map(|(k, _)| h.get(k)));
    if !tunnel_auth.is_empty() {
        let b = tunnel_auth.strip_prefix("Basic ").unwrap_or(tunnel_auth);
        v.push(b.to_string());
        let plain = base64::engine::general_purpose::STANDARD
            .decode(b)
            .unwrap_or_default();
        v.push(String::from_utf8_lossy(&plain).into_owned());
    }
    v.retain(|s| !s.is_empty());
    v
}

/// The `n`th answer to a POST: every way a server can echo what it was sent.
fn answer_post(n: usize, h: &Head, tunnel_auth: &str) -> String {
    let secrets = echoed(h, tunnel_auth);
    let s = &secrets[n / 6 % secrets.len()];
    let all = format!("{}; proxy said {tunnel_auth}", h.all());
    match n % 6 {
        0 => response(
            "401 Unauthorized",
            "application/json",
            &serde_json::json!({"error": {"message": format!("you sent {all}"), "code": s}})
                .to_string(),
        ),
        // Not JSON: the 300-byte excerpt ends inside a secret.
        1 => response("401 Unauthorized", "text/plain", &straddle('z', 294, s)),
        // A secret as the response id, then an unparsable event cut at 200 bytes inside it.
        2 => {
            let created = serde_json::json!({"type": "response.created", "response": {"id": s}});
            let body = format!("{}data: {}\n\n", sse(&[created]), straddle('y', 194, s));
            response("200 OK", "text/event-stream", &body)
        }
        // A success with the wrong content type: its excerpt ends inside a secret.
        3 => response("200 OK", "text/html", &straddle('w', 294, s)),
        // A complete answer whose id, text and usage-less completion echo the secrets.
        4 => response(
            "200 OK",
            "text/event-stream",
            &sse(&[
                serde_json::json!({"type": "response.created", "response": {"id": s}}),
                serde_json::json!({"type": "response.output_text.delta", "delta": all}),
                serde_json::json!({"type": "response.completed", "response": {"id": s, "status": "completed",
                    "usage": {"input_tokens": 3, "output_tokens": 2}}}),
            ]),
        ),
        // An error event quoting everything, padded so a 512-byte cut falls inside.
        _ => response(
            "200 OK",
            "text/event-stream",
            &sse(&[
                serde_json::json!({"type": "response.created", "response": {"id": "resp_1"}}),
                serde_json::json!({"type": "error", "error": {"message": format!("{} {all}", straddle('e', 505, s))}}),
            ]),
        ),
    }
}

/// A WebSocket frame from the server (unmasked).
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n < 65536 => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
}

/// The `n`th answer to a WebSocket upgrade: refused with a secret where the 512-byte
/// excerpt cuts; accepted then closed with a secret in the close reason; or events whose
/// id and error message are secrets.
async fn answer_ws(n: usize, h: &Head, tunnel_auth: &str, s: &mut TcpStream) {
    let secrets = echoed(h, tunnel_auth);
    let sec = &secrets[n / 3 % secrets.len()];
    if n % 3 == 0 {
        let r = response("401 Unauthorized", "text/plain", &straddle('u', 505, sec));
        let _ = s.write_all(r.as_bytes()).await;
        return;
    }
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(
        h.get("sec-websocket-key").as_bytes(),
    );
    let head = format!("HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: {accept}\r\n\r\n");
    let _ = s.write_all(head.as_bytes()).await;
    // Wait for the client's first message (its response.create).
    let mut b = [0u8; 65536];
    let _ = s.read(&mut b).await;
    let mut out = Vec::new();
    if n % 3 == 2 {
        for e in [
            serde_json::json!({"type": "response.created", "response": {"id": sec}}),
            serde_json::json!({"type": "error", "error": {"message": format!("you sent {}", h.all())}}),
        ] {
            out.extend(frame(1, e.to_string().as_bytes()));
        }
    }
    // Close reasons are at most 123 bytes: the secret, then filler.
    let mut reason = format!("bad credential {sec} ");
    reason.truncate(123);
    let mut payload = 1008u16.to_be_bytes().to_vec();
    payload.extend_from_slice(reason.as_bytes());
    out.extend(frame(8, &payload));
    let _ = s.write_all(&out).await;
}

/// How the server treats a `CONNECT`: refused with 407 quoting the credentials, or a
/// tunnel whose far end is this same echoing server.
#[derive(Clone, Copy, PartialEq)]
enum ProxyMode {
    Refuse,
    Tunnel,
}

async fn serve_one(
    mut s: TcpStream,
    mode: ProxyMode,
    posts: Arc<AtomicUsize>,
    gets: Arc<AtomicUsize>,
) {
    let Some(mut h) = read_head(&mut s).await else {
        return;
    };
    let mut tunnel_auth = String::new();
    if h.method == "CONNECT" {
        tunnel_auth = h.get("proxy-authorization");
        let b = tunnel_auth
            .strip_prefix("Basic ")
            .unwrap_or(&tunnel_auth)
            .to_string();
        if mode == ProxyMode::Refuse {
            // The reason phrase: the credentials where the 80-character cut falls.
            let reason = format!("{} {b}", "r".repeat(70));
            let body = format!("you sent Proxy-Authorization: {tunnel_auth} ({b})");
            let r = format!(
                "HTTP/1.1 407 {reason}\r\nproxy-authenticate: Basic realm=\"{b}\"\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(r.as_bytes()).await;
            return;
        }
        let _ = s
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await;
        h = match read_head(&mut s).await {
            Some(h) => h,
            None => return,
        };
    }
    if h.method == "GET" {
        let n = gets.fetch_add(1, Ordering::SeqCst);
        answer_ws(n, &h, &tunnel_auth, &mut s).await;
    } else {
        let n = posts.fetch_add(1, Ordering::SeqCst);
        let _ = s
            .write_all(answer_post(n, &h, &tunnel_auth).as_bytes())
            .await;
    }
    let _ = s.shutdown().await;
}

/// The hostile server (and proxy), its address, and how many requests it answered.
async fn hostile(mode: ProxyMode) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let posts = Arc::new(AtomicUsize::new(0));
    let gets = Arc::new(AtomicUsize::new(0));
    let total = Arc::new(AtomicUsize::new(0));
    let t = total.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            t.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve_one(s, mode, posts.clone(), gets.clone()));
        }
    });
    (format!("127.0.0.1:{}", addr.port()), total)
}

fn scenario_text(base_url: &str, sessions: u32) -> String {
    let headers = HEADERS
        .iter()
        .map(|(k, v)| format!("{k} = \"{v}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
name = "secret-matrix"
max_output_tokens = 8
[load]
sessions = {sessions}
concurrency = 4
[matrix]
targets = ["echo"]
transports = ["http", "ws"]
[targets.echo]
base_url = "{base_url}"
model = "m"
api_key_env = "{KEY_VAR}"
request_timeout = "5s"
stall_timeout = "5s"
headers = {{ {headers} }}
[[turns]]
prompt = "Hello."
"#
    )
}

/// Runs `spark-bench args…` with the planted key and `proxy` as `HTTP_PROXY`; its stderr.
async fn spark(args: &[&str], proxy: Option<&str>) -> String {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_spark-bench"));
    cmd.args(args).env(KEY_VAR, KEY_RAW);
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "no_proxy",
        "NO_PROXY",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env_remove(v);
    }
    if let Some(p) = proxy {
        cmd.env("HTTP_PROXY", p);
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("spark-bench finished")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.code().is_some_and(|c| c <= 3),
        "spark-bench {args:?}: {:?}\n{err}",
        out.status
    );
    err
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// One case: a run of `sessions` sessions against `base_url` (through `proxy`), then a
/// report of it; returns the output tree and the run's stderr.
async fn case(dir: &Path, name: &str, base_url: &str, proxy: Option<&str>) -> (PathBuf, String) {
    let s = dir.join(format!("{name}.toml"));
    std::fs::write(&s, scenario_text(base_url, 24)).unwrap();
    let out = dir.join(name);
    let (sp, op) = (s.display().to_string(), out.display().to_string());
    let err = spark(&["run", &sp, "--out", &op, "--no-report", "-q"], proxy).await;
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "one run directory in {out:?}");
    let run = runs.pop().unwrap();
    spark(&["report", &run.display().to_string(), "-q"], proxy).await;
    (out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn planted_secret_matrix_never_reaches_any_output_file() {
    let tmp = testkit::tempdir().unwrap();
    let (direct, direct_n) = hostile(ProxyMode::Tunnel).await;
    let (refuse, refuse_n) = hostile(ProxyMode::Refuse).await;
    let (tunnel, tunnel_n) = hostile(ProxyMode::Tunnel).await;
    let proxy_refuse = format!("http://{PROXY_USERINFO}@{refuse}");
    let proxy_tunnel = format!("http://{PROXY_USERINFO}@{tunnel}");
    // A non-loopback plain-http target, reached through the tunnelling proxy.
    let direct_url = format!("http://{USERINFO}@{direct}/v1");
    let far_url = format!("http://{USERINFO}@bench.example.test:8000/v1");
    let (a, b, c) = tokio::join!(
        case(tmp.path(), "direct", &direct_url, None),
        case(
            tmp.path(),
            "refused",
            "http://127.0.0.1:9/v1",
            Some(&proxy_refuse)
        ),
        case(tmp.path(), "tunnel", &far_url, Some(&proxy_tunnel)),
    );
    for (n, what) in [
        (&direct_n, "direct"),
        (&refuse_n, "refused"),
        (&tunnel_n, "tunnel"),
    ] {
        assert!(
            n.load(Ordering::SeqCst) >= 24,
            "{what}: every answer was given"
        );
    }
    // The warning: once for the non-loopback plain-http target, never for loopback.
    let warns = |e: &str| e.matches("goes over plain http").count();
    assert_eq!(warns(&c.1), 1, "{}", c.1);
    assert_eq!(warns(&a.1), 0, "{}", a.1);

    let mut planted: Vec<String> = vec![
        KEY_RAW.into(),
        KEY.into(),
        USERINFO.into(),
        URL_PASSWORD.into(),
        b64(USERINFO),
        PROXY_USERINFO.into(),
        PROXY_PASSWORD.into(),
        b64(PROXY_USERINFO),
    ];
    planted.extend(HEADERS.iter().map(|(_, v)| v.to_string()));
    let mut files = Vec::new();
    for (out, _) in [&a, &b, &c] {
        walk(out, &mut files);
    }
    assert!(files.len() >= 15, "{files:?}");
    let mut leaks = Vec::new();
    let mut requests = String::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        for secret in &planted {
            let start = &secret.as_bytes()[..8];
            if memchr::memmem::find(&bytes, start).is_some() {
                leaks.push(format!(
                    "{} holds {:?}",
                    f.display(),
                    String::from_utf8_lossy(start)
                ));
            }
        }
        if f.file_name().is_some_and(|n| n == "requests.csv") {
            requests.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    assert!(
        leaks.is_empty(),
        "planted secrets written:\n{}",
        leaks.join("\n")
    );
    // The servers did echo them: what is there is the redaction, not a missing echo.
    for expected in [
        "[redacted]",
        "unparsable Responses event",
        "refused with HTTP 401",
        "not text/event-stream",
        "HTTP 407",
        "1008",
    ] {
        assert!(requests.contains(expected), "{expected:?} in\n{requests}");
    }
}
