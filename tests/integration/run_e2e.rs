//! `spark-bench run` as a user runs it: the real binary on real scenarios, its exit codes,
//! stdout/stderr, and every file of the results contract.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use sha2::Digest;
use spark_bench::recorder::{Metric, Summary};
use spark_bench::store::{
    read_hlog, LoadedRun, RunStatus, TimelineFile, CHUNK_COLUMNS, REQUEST_COLUMNS,
    SESSION_COLUMNS,
};

use crate::run_support::*;

fn header_of(path: &Path) -> Vec<String> {
    let mut rd = csv::Reader::from_path(path).unwrap();
    rd.headers().unwrap().iter().map(String::from).collect()
}

fn assert_no_panic(stderr: &str) {
    assert!(!stderr.contains("panicked"), "panic output:\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_run_writes_the_whole_results_contract() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    let o = run_bin(
        &["run", "scenarios/smoke.toml", "--out", out.to_str().unwrap()],
        &[],
    )
    .await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_no_panic(&stderr);
    let dir = only_run(&out);
    let run = LoadedRun::open(&dir).unwrap();
    let plan = run.plan().unwrap();
    let transports = ["http", "http-pooled", "http2", "ws"];

    // The table: a header and exactly one row per target × transport.
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("target") && lines[0].contains("transport"),
        "{stdout}"
    );
    for t in transports {
        let rows = lines
            .iter()
            .filter(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some("sim-wafer") && w.next() == Some(t)
            })
            .count();
        assert_eq!(rows, 1, "table rows for sim-wafer × {t}:\n{stdout}");
    }

    // manifest.json
    let m = &run.manifest;
    assert_eq!(m.status, RunStatus::Complete);
    assert!(m.ended_at.is_some());
    let source = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml"))
        .unwrap();
    let want_hash = format!("sha256:{:x}", sha2::Sha256::digest(&source));
    assert_eq!(m.scenario.hash, want_hash);
    assert_eq!(m.scenario.source.as_bytes(), &source[..]);
    assert_eq!(m.seed, 1);
    assert_eq!(m.link, "rtt=10ms");
    assert!(!m.host.hostname.is_empty() && m.host.cpus >= 1, "{:?}", m.host);
    assert!(!m.host.os.is_empty() && !m.host.arch.is_empty());
    assert_eq!(plan.cells.len(), 4);

    // requests.csv: the documented columns; one row per request; per cell, sessions ×
    // requests per session (a turn with tool calls is one request per call plus one), and
    // on ws one warm-up per session (a new socket per session).
    assert_eq!(header_of(&dir.join("requests.csv")), REQUEST_COLUMNS);
    assert_eq!(header_of(&dir.join("chunks.csv")), CHUNK_COLUMNS);
    assert_eq!(header_of(&dir.join("sessions.csv")), SESSION_COLUMNS);
    let measured_sessions = plan.sessions.iter().filter(|s| !s.warmup).count();
    assert_eq!(measured_sessions, 2);
    let per_session: usize = plan.sessions[0]
        .turns
        .iter()
        .map(|t| 1 + t.tool_calls.len())
        .sum();
    assert_eq!(per_session, 4, "smoke.toml: 3 turns, one tool call");
    let rows = csv_maps(&dir.join("requests.csv"));
    let records = records(&run);
    assert_eq!(rows.len(), records.len());
    for t in transports {
        let cell: Vec<_> = rows.iter().filter(|r| r["transport"] == t).collect();
        let user = cell.iter().filter(|r| r["kind"] != "warmup").count();
        let warm = cell.iter().filter(|r| r["kind"] == "warmup").count();
        assert_eq!(user, measured_sessions * per_session, "{t}");
        assert_eq!(warm, if t == "ws" { measured_sessions } else { 0 }, "{t}");
        assert!(cell.iter().all(|r| r["outcome"] == "ok"), "{t}: {cell:?}");
        assert!(cell.iter().all(|r| r["target"] == "sim-wafer"));
    }
    // Ids are unique.
    let ids: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), rows.len());

    // chunks.csv: every request's chunk_count is its number of chunk rows.
    let chunk_rows = csv_maps(&dir.join("chunks.csv"));
    let mut per_request: HashMap<&str, usize> = HashMap::new();
    for c in &chunk_rows {
        *per_request.entry(c["request_id"].as_str()).or_default() += 1;
    }
    assert!(!chunk_rows.is_empty());
    for r in &rows {
        let n: usize = r["chunk_count"].parse().unwrap();
        assert_eq!(per_request.get(r["id"].as_str()).copied().unwrap_or(0), n);
        if r["kind"] != "warmup" {
            assert!(n > 0, "a completed answer has content: {r:?}");
        }
    }

    // sessions.csv: one row per session and cell.
    let sessions = run.sessions().unwrap();
    assert_eq!(sessions.len(), 4 * measured_sessions);
    assert!(sessions.iter().all(|s| s.failed == 0));

    // summary.json: as the recorder made it, one cell per transport.
    assert!(!run.rebuilt);
    let summary: Summary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary, run.summary);
    assert_eq!(summary.cells.len(), 4);
    for c in &summary.cells {
        assert_eq!(c.requests, (measured_sessions * per_session) as u64, "{c:?}");
        assert_eq!(c.ok, c.requests);
        assert_eq!(c.sessions, measured_sessions as u64);
    }

    // timeline.json: one sampled session per cell.
    let tl: TimelineFile =
        serde_json::from_slice(&std::fs::read(dir.join("timeline.json")).unwrap()).unwrap();
    assert_eq!(tl.sessions.len(), 4);

    // histograms/<target>/<transport>/<metric>.hlog, counts matching the summary.
    for c in &summary.cells {
        for m in [Metric::Ttft, Metric::Overhead, Metric::Tpot, Metric::E2e] {
            let p = dir
                .join("histograms")
                .join(&c.target)
                .join(&c.transport)
                .join(format!("{}.hlog", m.name()));
            let h = read_hlog(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(
                h.len(),
                c.metric(m).unwrap().count,
                "{}",
                p.display()
            );
        }
        let ttft = read_hlog(
            &dir.join(format!("histograms/{}/{}/ttft.hlog", c.target, c.transport)),
        )
        .unwrap();
        assert_eq!(ttft.len(), c.ok);
    }

    // The report and its charts, as SVG and PNG.
    for f in ["report.md", "report.html"] {
        let len = std::fs::metadata(dir.join(f)).unwrap().len();
        assert!(len > 1000, "{f}: {len} bytes");
    }
    let mut charts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in std::fs::read_dir(dir.join("charts")).unwrap() {
        let p = e.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        let ext = p.extension().unwrap().to_string_lossy().into_owned();
        assert!(std::fs::metadata(&p).unwrap().len() > 100, "{}", p.display());
        charts.entry(stem).or_default().push(ext);
    }
    assert!(charts.len() >= 4, "{charts:?}");
    for (stem, mut exts) in charts {
        exts.sort();
        assert_eq!(exts, ["png", "svg"], "{stem}");
    }
    assert!(
        stderr.contains(&format!("results: {}", dir.display())),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_prints_a_summary_that_parses_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().to_str().unwrap();
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--out",
            out,
            "--json",
            "--no-report",
            "--transport",
            "http-pooled",
            "--transport",
            "ws",
        ],
        &[],
    )
    .await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_no_panic(&stderr);
    let summary: Summary = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not a JSON summary ({e}):\n{stdout}"));
    let dir = only_run(tmp.path());
    let on_disk: Summary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary, on_disk);
    let transports: Vec<&str> = summary.cells.iter().map(|c| c.transport.as_str()).collect();
    assert_eq!(transports, ["http-pooled", "ws"]);
    assert!(!dir.join("report.html").exists(), "--no-report wrote a report");
}

/// Progress goes to stderr as a status line every 5 s when stderr is not a terminal; with
/// `--quiet` there is none. The run lasts ~6.5 s so that the control run prints at least one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_prints_no_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let s = scenario(
        tmp.path(),
        "slow.toml",
        r#"
name = "slow"
max_output_tokens = 8
link = "rtt=5ms"
[matrix]
targets = ["sim-wafer"]
transports = ["ws"]
[[turns]]
think_time = "2.1s"
prompt = "One."
[[turns]]
think_time = "2.1s"
prompt = "Two."
[[turns]]
think_time = "2.1s"
prompt = "Three."
"#,
    );
    let s = s.to_str().unwrap();
    let (out_q, out_l) = (tmp.path().join("q"), tmp.path().join("l"));
    let quiet_args = ["run", s, "--out", out_q.to_str().unwrap(), "--quiet", "--no-report"];
    let loud_args = ["run", s, "--out", out_l.to_str().unwrap(), "--no-report"];
    let (quiet, loud) = tokio::join!(run_bin(&quiet_args, &[]), run_bin(&loud_args, &[]));
    let is_progress = |l: &&str| l.starts_with('[') && l.contains(" sessions");
    let (_, loud_err) = texts(&loud);
    assert_eq!(loud.status.code(), Some(0), "{loud_err}");
    assert!(
        loud_err.lines().any(|l| is_progress(&l)),
        "the control run printed no progress line:\n{loud_err}"
    );
    let (quiet_out, quiet_err) = texts(&quiet);
    assert_eq!(quiet.status.code(), Some(0), "{quiet_err}");
    assert!(
        !quiet_err.lines().any(|l| is_progress(&l)),
        "--quiet printed progress:\n{quiet_err}"
    );
    assert!(quiet_out.starts_with("target"), "{quiet_out}");
    assert_no_panic(&quiet_err);
    assert_no_panic(&loud_err);
}

/// A target with `api_key_env` sends the key (the run fails without it) but no results file,
/// nor the output, ever contains it; the manifest names only the variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_is_used_but_never_written() {
    const KEY: &str = "sk-test-SECRET-5a9c";
    let sim = spark_bench::sim::spawn(spark_bench::sim::SimConfig::new(
        spark_bench::sim::Profile::builtin("wafer").unwrap(),
    ))
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let s = scenario(
        tmp.path(),
        "keyed.toml",
        &format!(
            r#"
name = "keyed"
max_output_tokens = 12
[matrix]
targets = ["keyed"]
transports = ["http-pooled", "ws"]
[targets.keyed]
base_url = "{}"
model = "sim-wafer"
api_key_env = "OPENAI_API_KEY"
[[turns]]
prompt = "Hello."
[[turns]]
prompt = "Again."
"#,
            sim.base_url
        ),
    );
    let out = tmp.path().join("results");
    let args = ["run", s.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let o = run_bin(&args, &[("OPENAI_API_KEY", KEY)]).await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_no_panic(&stderr);
    assert!(!stdout.contains(KEY) && !stderr.contains(KEY));
    let dir = only_run(&out);
    let run = LoadedRun::open(&dir).unwrap();
    assert!(
        run.summary.cells.iter().all(|c| c.ok == 2 && c.failed == 0),
        "{:?}",
        run.summary
    );
    let plan = run.plan().unwrap();
    assert!(plan
        .cells
        .iter()
        .all(|c| c.target.api_key_env.as_deref() == Some("OPENAI_API_KEY")));
    // Every file, reports and charts included.
    let mut files = 0;
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            files += 1;
            let bytes = std::fs::read(&p).unwrap();
            assert!(
                !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
                "{} contains the API key",
                p.display()
            );
        }
    }
    assert!(files > 10, "{files} files");

    // Without the variable no request can be sent: a configuration error (exit 2) naming
    // the variable, before any results directory exists, not a run of failed requests.
    let out2 = tmp.path().join("results2");
    let o = run_bin(
        &["run", s.to_str().unwrap(), "--out", out2.to_str().unwrap()],
        &[],
    )
    .await;
    let (stdout, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert_eq!(o.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("OPENAI_API_KEY") && stderr.contains("not set"),
        "{stderr}"
    );
    assert!(!out2.exists(), "a results directory was created");
    sim.shutdown().await;
}
