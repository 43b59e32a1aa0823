//! Buffering detection (`recorder::buffering`) end to end, with the real binary:
//! - the simulator streaming straight to spark-bench is not flagged, nor is a simulator
//!   profile that writes 4 chunks per write by design;
//! - a real nginx (Debian's package) in front of the simulator, started here: with
//!   `proxy_buffering on` the cell is flagged and the run's warning names target × transport;
//!   with `proxy_buffering off` it is not. Those two are `#[ignore]`d (they need `nginx` on
//!   PATH); `.ci/steps/26-nginx-buffering.sh` installs it and runs them with
//!   `cargo test --test integration nginx -- --ignored --test-threads 1`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use spark_bench::sim::{self, Profile, SimConfig, SimHandle};

use crate::binary::*;
use crate::support::run::scenario;

/// Output tokens asked per answer (the simulator writes 70–100% of it, one token per chunk):
/// ~100 chat-completions chunks of ~200 bytes, several of nginx's 4 KiB proxy buffers.
const MAX_OUTPUT: u32 = 120;

/// A simulator paced at 400 tok/s, one token per chunk, no jitter: a real stream spreads an
/// answer's chunks 2.5 ms apart, each in its own write.
async fn paced_sim() -> SimHandle {
    let profile = Profile {
        decode_tok_s: 400.0,
        chunk_tokens: vec![1.0],
        burst_prob: 0.0,
        step_jitter: 0.0,
        api_base: Duration::from_millis(5),
        ..Profile::builtin("wafer").unwrap()
    };
    sim::spawn(SimConfig::new(profile)).await.unwrap()
}

/// Runs `spark-bench run` (the binary, report included) with `targets` (TOML of one
/// `[targets.NAME]`) and returns the cell's `summary.json` entry and the run's stderr followed
/// by its `report.md`.
async fn run(dir: &Path, name: &str, targets: &str) -> (Value, String) {
    let text = format!(
        r#"name = "buffering"
max_output_tokens = {MAX_OUTPUT}
link = "none"
[load]
sessions = 1
[matrix]
targets = ["{name}"]
transports = ["http-pooled"]
{targets}
[[turns]]
prompt = "Write a long file."
repeat = 8
"#
    );
    let sc = scenario(dir, "buffering.toml", &text);
    let out = dir.join("results");
    let _ = std::fs::remove_dir_all(&out);
    let args = [
        "run",
        sc.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    let o = run_bin(&args, &[]).await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "spark-bench {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let run = only_run(&out);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let cell = summary["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["target"] == name)
        .unwrap_or_else(|| panic!("no cell {name} in {summary}"))
        .clone();
    assert_eq!(cell["ok"], 8, "{cell}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    (cell, format!("{stderr}\n--- report.md ---\n{report}"))
}

/// A target at `base_url` (chat completions, the simulator's model name).
fn real_target(name: &str, base_url: &str) -> String {
    format!("[targets.{name}]\nbase_url = \"{base_url}\"\napi = \"chat-completions\"\nmodel = \"sim-model\"\n")
}

fn verdict(cell: &Value) -> (u64, u64, bool) {
    let b = &cell["buffering"];
    (
        b["bursty_requests"]
            .as_u64()
            .unwrap_or_else(|| panic!("{cell}")),
        b["checked_requests"].as_u64().unwrap(),
        b["flagged"].as_bool().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffering_the_plain_simulator_is_not_flagged() {
    let sim = paced_sim().await;
    let tmp = testkit::tempdir().unwrap();
    let (cell, stderr) = run(tmp.path(), "direct", &real_target("direct", &sim.base_url)).await;
    let (bursty, checked, flagged) = verdict(&cell);
    println!(
        "direct: {bursty}/{checked} bursty; {}",
        cell["buffering"]["note"]
    );
    assert_eq!(checked, 8, "{cell}");
    assert!(!flagged, "{cell}");
    assert!(bursty <= 1, "{cell}");
    assert!(!stderr.contains("arrived in bursts"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffering_a_profile_that_writes_in_groups_by_design_is_not_flagged() {
    // An embedded simulator target whose profile file writes 4 chunks per write: its cadence,
    // which the run knows from the profile, explains reads of 4.
    let tmp = testkit::tempdir().unwrap();
    let profile = scenario(
        tmp.path(),
        "grouped.toml",
        "name = \"grouped\"\nbase = \"wafer\"\ndecode_tok_s = 400.0\nchunk_tokens = [1.0]\nburst_prob = 0.0\nstep_jitter = 0.0\nchunks_per_write = 4\n",
    );
    let target = format!(
        "[targets.grouped]\nsim_profile = \"wafer\"\nsim_profile_file = {:?}\n",
        profile.display().to_string()
    );
    let (cell, stderr) = run(tmp.path(), "grouped", &target).await;
    let (bursty, checked, flagged) = verdict(&cell);
    println!(
        "grouped: {bursty}/{checked} bursty; {}",
        cell["buffering"]["note"]
    );
    assert_eq!(checked, 8, "{cell}");
    assert!(!flagged, "{cell}");
    assert!(
        cell["buffering"]["note"]
            .as_str()
            .unwrap()
            .contains("reads of ≥8 chunks"),
        "{cell}"
    );
    assert!(!stderr.contains("arrived in bursts"), "{stderr}");
}

/// nginx, started by the test as a child (no daemon, no master process, every path in its
/// own directory); killed when dropped.
struct Nginx {
    child: std::process::Child,
    port: u16,
    _dir: testkit::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nginx_bin() -> PathBuf {
    for p in ["/usr/sbin/nginx", "/usr/local/sbin/nginx"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    PathBuf::from("nginx")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nginx on a free port proxying to `upstream` (`127.0.0.1:PORT`) with `proxy_buffering`
/// `on` or `off`; returns once it accepts connections.
///
/// nginx's upstream protocol is left at its default, HTTP/1.0: the simulator then answers
/// without chunked encoding, and with buffering on nginx 1.22 forwards the stream one proxy
/// buffer (~17 chunks) at a time. With `proxy_http_version 1.1` (a chunked upstream) it
/// was measured forwarding every upstream chunk as it came even with buffering on: that
/// path does not buffer (docs/buffering.md).
fn nginx(upstream: std::net::SocketAddr, buffering: &str) -> Nginx {
    let dir = testkit::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let port = free_port();
    let conf = format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{upstream};
            proxy_buffering {buffering};
        }}
    }}
}}
"#
    );
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    let child = std::process::Command::new(nginx_bin())
        .args(["-p", &d, "-e", &format!("{d}/error.log"), "-c", "nginx.conf"])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("starting nginx: {e} (install Debian's nginx-light; see .ci/steps/26-nginx-buffering.sh)")
        });
    let mut n = Nginx {
        child,
        port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = n.child.try_wait().unwrap() {
            let log = std::fs::read_to_string(format!("{d}/error.log")).unwrap_or_default();
            panic!("nginx exited ({status}) before listening:\n{log}");
        }
        assert!(
            Instant::now() < deadline,
            "nginx did not listen on {port} in 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    n
}

/// spark-bench → nginx (`proxy_buffering` = `buffering`) → the paced simulator, three runs.
async fn through_nginx(buffering: &str) -> Vec<(Value, String)> {
    let sim = paced_sim().await;
    let proxy = nginx(sim.addr, buffering);
    let base = format!("http://127.0.0.1:{}/v1", proxy.port);
    let mut runs = Vec::new();
    for i in 0..3 {
        let tmp = testkit::tempdir().unwrap();
        let (cell, stderr) = run(tmp.path(), "via-nginx", &real_target("via-nginx", &base)).await;
        println!(
            "proxy_buffering {buffering}, run {i}: {:?}; {}; TTFT p50 {} ms, E2E p50 {} ms",
            verdict(&cell),
            cell["buffering"]["note"],
            cell["metrics"]["ttft"]["p50"],
            cell["metrics"]["e2e"]["p50"]
        );
        runs.push((cell, stderr));
    }
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx on PATH: .ci/steps/26-nginx-buffering.sh"]
async fn nginx_proxy_buffering_on_is_flagged() {
    for (cell, stderr) in through_nginx("on").await {
        let (bursty, checked, flagged) = verdict(&cell);
        assert_eq!(checked, 8, "{cell}");
        assert!(flagged, "{cell}");
        assert!(bursty >= 6, "{cell}");
        let warning = stderr
            .lines()
            .find(|l| l.contains("arrived in bursts"))
            .unwrap_or_else(|| panic!("no buffering warning:\n{stderr}"));
        assert!(
            warning.starts_with("warning: via-nginx × http-pooled: "),
            "{warning}"
        );
        assert!(warning.contains("buffering proxy"), "{warning}");
        // The report says it too, in its notes.
        let (_, report) = stderr.split_once("--- report.md ---").unwrap();
        assert!(
            report
                .lines()
                .any(|l| l.contains("via-nginx × http-pooled: ") && l.contains("arrived in bursts")),
            "{report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx on PATH: .ci/steps/26-nginx-buffering.sh"]
async fn nginx_proxy_buffering_off_is_not_flagged() {
    for (cell, stderr) in through_nginx("off").await {
        let (bursty, checked, flagged) = verdict(&cell);
        assert_eq!(checked, 8, "{cell}");
        assert!(!flagged, "{cell}");
        assert!(bursty <= 1, "{cell}");
        assert!(!stderr.contains("arrived in bursts"), "{stderr}");
    }
}
