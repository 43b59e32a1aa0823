//! The hostile-server suite, fast pass: `tests/hostile/server.py` (Python standard library,
//! raw sockets, its own HTTP/SSE/chunked/WebSocket framing; nothing shared with `src/sim`)
//! misbehaves in one way per endpoint, and one `spark-bench run` meets every fault of
//! `tests/hostile/expected.tsv` over every transport it applies to, at small sizes that
//! still cross every limit. Each cell must end as its one record with the expected kind and
//! a readable error, the run must exit 0 within its timeouts, without a panic, with bounded
//! memory and without writing the key the server echoes. The full matrix (50 MB lines,
//! 100 MB frames, one run per fault, peak RSS each) is `python3 tests/hostile/matrix.py`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Command, Stdio};

const KEY: &str = "sk-hostile-0123456789-secret";

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (fault, transport, expected kind) from `expected.tsv`.
/// The fault cells whose server answers the probe with something that means the transport is
/// not there (an HTTP/1.1 answer to the h2c preface; a WebSocket upgrade answered 200, 426
/// or with a head that is not HTTP): the run skips them unless forced.
const PROBED_ABSENT: &[&str] = &[
    "garbage-head over ws",
    "h2-refused over http2",
    "wrong-content-type over ws",
    "ws-426 over ws",
];

fn expectations() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(root().join("tests/hostile/expected.tsv")).unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 4, "expected.tsv: {line:?}");
        for t in cols[1].split(',') {
            let transport = match t {
                "h" => "http",
                "p" => "http-pooled",
                "2" => "http2",
                "w" => "ws",
                other => panic!("expected.tsv: transport {other:?}"),
            };
            out.push((
                cols[0].to_string(),
                transport.to_string(),
                cols[2].to_string(),
            ));
        }
    }
    out
}

/// The port and API a fault is asked on (see `expected.tsv`): `h2-*` faults (but
/// `h2-refused`) on the server's HTTP/2 port, `chat-*` faults in the Chat Completions API.
fn target_of(fault: &str, port: u16, h2_port: u16) -> (u16, &'static str) {
    let port = if fault.starts_with("h2-") && fault != "h2-refused" {
        h2_port
    } else {
        port
    };
    let api = if fault.starts_with("chat-") {
        "chat-completions"
    } else {
        "responses"
    };
    (port, api)
}

#[test]
fn every_fault_is_one_record_of_its_kind_on_every_transport() {
    let mut server = Command::new("python3")
        .arg(root().join("tests/hostile/server.py"))
        .args(["--scale", "small"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs tests/hostile/server.py");
    let mut lines = std::io::BufReader::new(server.stdout.take().unwrap());
    let mut port_of = || {
        let mut line = String::new();
        lines.read_line(&mut line).unwrap();
        line.trim()
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u16>()
            .unwrap()
    };
    let port = port_of();
    let h2_port = port_of();
    let _server = Kill(server);

    let expected = expectations();
    let mut faults: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (f, t, _) in &expected {
        faults.entry(f).or_default().push(t);
    }
    let dir = testkit::tempdir().unwrap();
    let mut toml = String::from(
        "name = \"hostile\"\nseed = 1\nmax_output_tokens = 8\nlink = \"none\"\n\n\
         [load]\nsessions = 1\nconcurrency = 1\nschedule = \"parallel\"\n\n[matrix]\ntransports = [\"http\", \"http-pooled\", \"http2\", \"ws\"]\n",
    );
    let names: Vec<String> = faults.keys().map(|f| format!("\"{f}\"")).collect();
    toml.push_str(&format!(
        "targets = [{}]\n\n[[turns]]\nprompt = \"hi\"\n",
        names.join(", ")
    ));
    for (f, ts) in &faults {
        let ts: Vec<String> = ts.iter().map(|t| format!("\"{t}\"")).collect();
        let (port, api) = target_of(f, port, h2_port);
        toml.push_str(&format!(
            "\n[targets.{f}]\nbase_url = \"http://127.0.0.1:{port}/f/{f}/v1\"\napi = \"{api}\"\n\
             model = \"{f}\"\napi_key_env = \"HOSTILE_KEY\"\nrequest_timeout = \"5s\"\n\
             stall_timeout = \"2s\"\nws_warmup = false\ntransports = [{}]\n",
            ts.join(", ")
        ));
    }
    let scenario = dir.path().join("hostile.toml");
    std::fs::write(&scenario, toml).unwrap();
    let out = dir.path().join("out");

    let t0 = std::time::Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_spark-bench"))
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .args(["--quiet", "--no-report", "--force-transports"])
        .env("HOSTILE_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    // Peak RSS from the kernel's accounting of the reaped child (wait4's rusage).
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let out_pipes = std::thread::spawn(move || {
        let mut child = child;
        let mut stdout = String::new();
        let mut stderr = String::new();
        use std::io::Read;
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        std::mem::forget(child); // reaped below with wait4
        (stdout, stderr)
    });
    // SAFETY: waiting for our own child; `usage` and `status` are ours.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    let wall = t0.elapsed();
    let (_stdout, stderr) = out_pipes.join().unwrap();
    let peak_mb = usage.ru_maxrss as f64 / 1024.0;
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(libc::WIFEXITED(status), "{stderr}");
    // Exit 3: cells whose every request failed (here by design: each fault is one cell) are
    // reported as such, after every result was written.
    assert_eq!(libc::WEXITSTATUS(status), 3, "{stderr}");
    assert!(stderr.contains("failed-requests:"), "{stderr}");
    // Every cell runs at once; the slowest ends at its 5 s request timeout.
    assert!(wall < std::time::Duration::from_secs(40), "{wall:?}");
    // Three 17 MiB payloads cross their 16 MiB limits at once; nothing grows past them.
    assert!(peak_mb < 400.0, "peak RSS {peak_mb:.0} MB");

    let run = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.join("requests.csv").exists())
        .expect("a results directory");
    let mut rdr = csv::Reader::from_path(run.join("requests.csv")).unwrap();
    let headers = rdr.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (ct, ctr, co, ce) = (
        col("target"),
        col("transport"),
        col("outcome"),
        col("error"),
    );
    let mut got: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for rec in rdr.records() {
        let rec = rec.unwrap();
        got.entry((rec[ct].to_string(), rec[ctr].to_string()))
            .or_default()
            .push((rec[co].to_string(), rec[ce].to_string()));
    }
    // The probe before the run judged these cells' transport absent (forced here, so they
    // ran): their failures are `unsupported-transport`, whatever the fault's own kind.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    let unsupported: BTreeSet<(String, String)> = manifest["transport_probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["supported"] == false)
        .map(|p| {
            (
                p["target"].as_str().unwrap().to_string(),
                p["transport"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let named: Vec<String> = unsupported
        .iter()
        .map(|(f, t)| format!("{f} over {t}"))
        .collect();
    assert_eq!(
        named, PROBED_ABSENT,
        "the cells whose probe said the transport is absent"
    );
    let mut wrong = Vec::new();
    for (f, t, kind) in &expected {
        let kind = if unsupported.contains(&(f.clone(), t.clone())) {
            "unsupported-transport"
        } else {
            kind.as_str()
        };
        match got.get(&(f.clone(), t.clone())).map(|v| v.as_slice()) {
            Some([(k, e)]) => {
                if k != kind {
                    wrong.push(format!("{f} over {t}: {k} ({e}), expected {kind}"));
                } else if k != "ok" && e.trim().is_empty() {
                    wrong.push(format!("{f} over {t}: {k} without an error message"));
                }
            }
            other => wrong.push(format!("{f} over {t}: records {other:?}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n(peak RSS {peak_mb:.0} MB, {wall:?})",
        wrong.join("\n")
    );
    // Past the 100,000 chunks a record keeps: every chunk counted, the tokens from the
    // server's usage, only the kept chunks in chunks.csv.
    let rows = crate::binary::csv_maps(&run.join("requests.csv"));
    let many = rows
        .iter()
        .find(|r| r["target"] == "many-chunks")
        .expect("the many-chunks record");
    assert_eq!(many["chunk_count"], "100005");
    assert_eq!(many["output_tokens"], "100005");
    assert_eq!(many["token_source"], "server-usage");
    let kept = crate::binary::csv_maps(&run.join("chunks.csv"))
        .iter()
        .filter(|c| c["request_id"] == many["id"])
        .count();
    assert_eq!(kept, spark_bench::transport::limits::CHUNKS_KEPT);
    protocol_truth(&rows);
    for name in ["requests.csv", "timeline.json", "manifest.json"] {
        let p = run.join(name);
        if let Ok(text) = std::fs::read_to_string(&p) {
            assert!(
                !text.contains(KEY),
                "{name} holds the key the server echoed"
            );
        }
    }
    eprintln!(
        "hostile fast pass: {} cells, peak RSS {peak_mb:.0} MB, {wall:?}",
        expected.len()
    );
}

/// What the second round's faults must show besides their kind: no content chunk lost to a
/// BOM, an impossible usage not trusted, errors that say what happened.
fn protocol_truth(rows: &[std::collections::HashMap<String, String>]) {
    let of = |target: &str, transport: &str| {
        rows.iter()
            .find(|r| r["target"] == target && r["transport"] == transport)
            .unwrap_or_else(|| panic!("a record of {target} over {transport}"))
    };
    for t in ["http", "http-pooled"] {
        for f in ["sse-bom", "chat-bom", "no-created", "chat-choices-null"] {
            let r = of(f, t);
            assert_eq!(r["chunk_count"], "2", "{f} over {t}: {r:?}");
            assert!(!r["first_token_ns"].is_empty(), "{f} over {t}: {r:?}");
        }
        let r = of("chat-usage-impossible", t);
        assert_eq!(r["token_source"], "usage-rejected", "{r:?}");
        assert_eq!(r["output_tokens"], "3", "{r:?}");
        assert!(of("gzip", t)["error"].contains("content-encoding gzip"));
        assert!(of("headers-600", t)["error"].contains("more than 500 header fields"));
        assert!(of("204", t)["error"].contains("204 No Content"));
        assert!(of("empty-200", t)["error"].contains("empty body"));
        for f in ["error-200-sse", "chat-error-200"] {
            let r = of(f, t);
            assert_eq!(r["http_status"], "", "{f}: {r:?}");
            assert!(r["error"].contains("engine overloaded"), "{f}: {r:?}");
        }
    }
    let r = of("ws-error-200", "ws");
    assert_eq!(r["http_status"], "", "{r:?}");
    assert!(
        r["error"].contains("overloaded: engine overloaded"),
        "{r:?}"
    );
    assert!(of("ws-deflate", "ws")["error"].contains("permessage-deflate"));
    assert!(of("ws-foreign-ids", "ws")["error"].contains("resp_other"));
    for (f, needle) in [
        ("h2-flow-control-overflow", "GOAWAY FLOW_CONTROL_ERROR"),
        ("h2-continuation-flood", "ENHANCE_YOUR_CALM"),
        ("h2-empty-data-flood", "GOAWAY ENHANCE_YOUR_CALM"),
        ("h2-rst-protocol", "RST_STREAM PROTOCOL_ERROR"),
    ] {
        let e = &of(f, "http2")["error"];
        assert!(e.contains(needle), "{f}: {e}");
    }
}

#[test]
fn a_plan_that_cannot_fit_in_the_open_file_limit_is_refused_before_it_runs() {
    use std::os::unix::process::CommandExt;
    let dir = testkit::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spark-bench"));
    cmd.arg("run")
        .arg(root().join("scenarios/smoke.toml"))
        .args([
            "--concurrency",
            "3000",
            "--sessions",
            "3000",
            "--quiet",
            "--no-report",
            "--out",
        ])
        .arg(dir.path());
    // SAFETY: setrlimit in the child before exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 512,
                rlim_max: 512,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t0 = std::time::Instant::now();
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("file descriptors")
            && stderr.contains("ulimit -n")
            && stderr.contains("512"),
        "{stderr}"
    );
    // Refused up front: no results directory with requests in it, and at once.
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    let any_requests = walk(dir.path()).iter().any(|p| p.ends_with("requests.csv"));
    assert!(!any_requests);
}

fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}
