//! Planted secrets never reach the results directory. A small HTTP server written here echoes
//! every credential it receives back at the client: in a JSON error body, in error bodies and
//! unparsable events padded so that the 200-, 300- and 512-byte excerpt limits fall inside
//! the key, as the response id, and in a refused WebSocket upgrade. The run uses a key
//! variable ending in a newline, a credential-like inline header (`x-goog-api-key`) and a
//! `base_url` with `user:password@`. Every file of the results directory is then searched
//! for every planted secret and every 8-byte start of one.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::raw_head::{read_head, Head};
use crate::support::run::{run_lib, scenario};

const KEY_VAR: &str = "SPARK_BENCH_PLANTED_SECRET_KEY";
/// The variable's value: the key with a trailing newline (sent trimmed).
const KEY_RAW: &str = "sk-planted-0123456789abcdefSECRET\n";
const KEY: &str = "sk-planted-0123456789abcdefSECRET";
const HEADER_SECRET: &str = "goog-planted-header-secret-42";
const USERINFO: &str = "alice:pw-planted-in-url-77";
const PASSWORD: &str = "pw-planted-in-url-77";

fn response(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// `pad` bytes of filler, a space, then `secret`: an excerpt cut at `pad + 4` bytes ends
/// inside it.
fn straddle(fill: char, pad: usize, secret: &str) -> String {
    format!("{} {secret} tail", fill.to_string().repeat(pad))
}

/// One answer per request, in turn: every way a server can echo what it was sent.
fn answer(n: usize, method: &str, headers: &[(String, String)]) -> String {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map_or(String::new(), |(_, v)| v.clone())
    };
    let auth = get("authorization");
    let key = auth.strip_prefix("Bearer ").unwrap_or(&auth).to_string();
    let goog = get("x-goog-api-key");
    if method == "GET" {
        // A refused WebSocket upgrade: the 512-byte excerpt ends inside the key.
        return response("401 Unauthorized", "text/plain", &straddle('u', 505, &key));
    }
    match n % 4 {
        0 => response(
            "401 Unauthorized",
            "application/json",
            &serde_json::json!({"error": {"message": format!(
                "invalid key {key}; you sent authorization: {auth} and x-goog-api-key: {goog}"
            )}})
            .to_string(),
        ),
        // Not JSON: the 300-byte excerpt ends inside the key, then inside the header value.
        1 => response(
            "401 Unauthorized",
            "text/plain",
            &straddle('z', 294, if n % 8 == 1 { &key } else { &goog }),
        ),
        // The key as the response id, then an unparsable event cut at 200 bytes inside it.
        2 => {
            let created = serde_json::json!({"type": "response.created", "response": {"id": key}});
            let body = format!(
                "event: response.created\ndata: {created}\n\ndata: {}\n\n",
                straddle('y', 194, &key)
            );
            response("200 OK", "text/event-stream", &body)
        }
        // A success with the wrong content type: its 300-byte excerpt ends inside the key.
        _ => response("200 OK", "text/html", &straddle('w', 294, &key)),
    }
}

async fn echo_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let c = c.clone();
            tokio::spawn(async move {
                if let Some(Head { method, headers }) = read_head(&mut s).await {
                    let n = if method == "GET" {
                        0
                    } else {
                        c.fetch_add(1, Ordering::SeqCst)
                    };
                    let _ = s.write_all(answer(n, &method, &headers).as_bytes()).await;
                    let _ = s.shutdown().await;
                }
            });
        }
    });
    (format!("127.0.0.1:{}", addr.port()), count)
}

/// Every file under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_never_reach_the_results_directory() {
    std::env::set_var(KEY_VAR, KEY_RAW);
    let (addr, count) = echo_server().await;
    let tmp = testkit::tempdir().unwrap();
    let s = scenario(
        tmp.path(),
        "secrets.toml",
        &format!(
            r#"
name = "secrets"
max_output_tokens = 8
[load]
sessions = 8
concurrency = 1
[matrix]
targets = ["echo"]
transports = ["http", "ws"]
[targets.echo]
base_url = "http://{USERINFO}@{addr}/v1"
model = "m"
api_key_env = "{KEY_VAR}"
proxy = "none"
request_timeout = "5s"
stall_timeout = "5s"
headers = {{ x-goog-api-key = "{HEADER_SECRET}" }}
[[turns]]
prompt = "Hello."
"#
        ),
    );
    let out = tmp.path().join("results");
    run_lib(&s, &out, &[]).await;
    assert!(count.load(Ordering::SeqCst) >= 8, "every answer was given");

    let b64 = base64::engine::general_purpose::STANDARD.encode(USERINFO);
    let planted = [KEY_RAW, KEY, HEADER_SECRET, USERINFO, PASSWORD, &b64];
    let mut all = Vec::new();
    files(&out, &mut all);
    assert!(all.len() >= 5, "{all:?}");
    let mut text_of = std::collections::BTreeMap::new();
    for f in &all {
        let bytes = std::fs::read(f).unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        for secret in planted {
            let start = &secret[..8];
            assert!(
                !text.contains(start),
                "{} holds {start:?} (the start of a planted secret)",
                f.display()
            );
        }
        text_of.insert(f.file_name().unwrap().to_string_lossy().into_owned(), text);
    }
    // The server did echo them: what is there is the redaction, not a missing echo.
    let requests = &text_of["requests.csv"];
    for expected in [
        "invalid key [redacted]",
        "x-goog-api-key: [redacted]",
        "unparsable Responses event",
        "refused with HTTP 401",
        "not text/event-stream",
    ] {
        assert!(requests.contains(expected), "{expected:?} in\n{requests}");
    }
    let manifest = &text_of["manifest.json"];
    assert!(
        manifest.contains("\"x-goog-api-key\": \"<redacted>\""),
        "{manifest}"
    );
    assert!(manifest.contains("[redacted]@127.0.0.1"), "{manifest}");
}
