//! The connect timeout: a server that accepts TCP and never answers the TLS handshake, and a
//! proxy that accepts and never answers `CONNECT`, each end the request within the connect
//! timeout (`[load] connect_timeout`), not the 300 s request timeout, recorded
//! `connect-error` with a message naming the phase (the run exits 3: its one cell failed). Both peers are plain `std` listeners
//! written here, nothing of `src/sim`.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::binary::{csv_maps, only_run, run_bin, texts};

/// Accepts connections and holds them open, silent, until the test ends.
fn silent_listener() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            match s {
                Ok(s) => held.push(s),
                Err(_) => return,
            }
        }
    });
    port
}

fn scenario(base_url: &str, proxy: Option<&str>) -> String {
    let proxy = proxy.map_or(String::new(), |p| format!("proxy = \"{p}\"\n"));
    format!(
        r#"name = "silent"
seed = 1
max_output_tokens = 8
link = "none"

[load]
sessions = 1
concurrency = 1
connect_timeout = "300ms"

[matrix]
targets = ["t"]
transports = ["http"]

[[turns]]
prompt = "hi"

[targets.t]
base_url = "{base_url}"
api = "responses"
model = "m"
ws_warmup = false
transports = ["http"]
{proxy}"#
    )
}

async fn one_record(text: &str) -> (std::collections::HashMap<String, String>, Duration) {
    let tmp = testkit::tempdir().unwrap();
    let path = tmp.path().join("s.toml");
    std::fs::write(&path, text).unwrap();
    let out = tmp.path().join("out");
    let (p, o) = (path.to_string_lossy(), out.to_string_lossy());
    let t0 = Instant::now();
    let args = ["run", &p, "--out", &o, "--quiet", "--no-report"];
    let run = run_bin(&args, &[]).await;
    let wall = t0.elapsed();
    // Every request of the cell failed: exit 3 (README "Exit codes"), results written.
    assert_eq!(run.status.code(), Some(3), "{:?}", texts(&run));
    let rows = csv_maps(&only_run(&out).join("requests.csv"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    (rows.into_iter().next().unwrap(), wall)
}

#[tokio::test]
async fn a_silent_tls_server_and_a_silent_proxy_end_at_the_connect_timeout() {
    let port = silent_listener();
    let (rec, wall) = one_record(&scenario(&format!("https://127.0.0.1:{port}/v1"), None)).await;
    eprintln!("silent TLS: {rec:?} in {wall:?}");
    assert_eq!(rec["outcome"], "connect-error", "{rec:?}");
    assert!(
        rec["error"].contains("the TLS handshake with 127.0.0.1")
            && rec["error"].contains("within 300ms"),
        "{rec:?}"
    );
    assert!(wall < Duration::from_secs(20), "{wall:?}");

    let proxy = format!("http://127.0.0.1:{}", silent_listener());
    let (rec, wall) = one_record(&scenario("http://127.0.0.1:9/v1", Some(&proxy))).await;
    eprintln!("silent proxy: {rec:?} in {wall:?}");
    assert_eq!(rec["outcome"], "connect-error", "{rec:?}");
    assert!(
        rec["error"].contains("the proxy's CONNECT") && rec["error"].contains("within 300ms"),
        "{rec:?}"
    );
    assert!(wall < Duration::from_secs(20), "{wall:?}");
}
