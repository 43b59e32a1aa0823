//! `spark-bench run` as a user runs it: the real binary on real scenarios, its exit codes,
//! stdout/stderr, and every file of the results contract.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use sha2::Digest;
use spark_bench::recorder::{Metric, Summary};
use spark_bench::store::{
    read_hlog, LoadedRun, RunStatus, TimelineFile, CHUNK_COLUMNS, REQUEST_COLUMNS, SESSION_COLUMNS,
};

use crate::binary::*;
use crate::support::run::*;

fn header_of(path: &Path) -> Vec<String> {
    let mut rd = csv::Reader::from_path(path).unwrap();
    rd.headers().unwrap().iter().map(String::from).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_run_writes_the_whole_results_contract() {
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("results");
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
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
    let source =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml")).unwrap();
    let want_hash = format!("sha256:{:x}", sha2::Sha256::digest(&source));
    assert_eq!(m.scenario.hash, want_hash);
    assert_eq!(m.scenario.source.as_bytes(), &source[..]);
    assert_eq!(m.seed, 1);
    assert_eq!(m.link, "rtt=10ms");
    assert!(
        !m.host.hostname.is_empty() && m.host.cpus >= 1,
        "{:?}",
        m.host
    );
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
    let per_session: usize = plan
        .sessions
        .get(0)
        .unwrap()
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
    // `turn` is the scenario turn and `step` the request within it, the same on every
    // transport (a ws warm-up carries the turn it precedes); `request` counts every request
    // of the session.
    let steps = |t: &str, session: &str| -> (Vec<String>, Vec<String>, Vec<String>) {
        let mut mine: Vec<_> = rows
            .iter()
            .filter(|r| r["transport"] == t && r["session"] == session)
            .collect();
        mine.sort_by_key(|r| r["request"].parse::<u32>().unwrap());
        let numbered: Vec<String> = (0..mine.len()).map(|i| i.to_string()).collect();
        let requests: Vec<String> = mine.iter().map(|r| r["request"].clone()).collect();
        assert_eq!(requests, numbered, "{t} session {session}");
        let turns = |warm: bool| {
            mine.iter()
                .filter(|r| (r["kind"] == "warmup") == warm)
                .map(|r| format!("{} {} {}", r["turn"], r["step"], r["kind"]))
                .collect::<Vec<_>>()
        };
        (turns(false), turns(true), requests)
    };
    for session in ["0", "1"] {
        let (http, _, _) = steps("http", session);
        assert_eq!(
            http,
            ["0 0 user", "1 0 user", "2 0 user", "2 1 tool-result"],
            "session {session}"
        );
        for t in ["http-pooled", "http2", "ws"] {
            let (user, warm, _) = steps(t, session);
            assert_eq!(user, http, "{t} session {session}");
            if t == "ws" {
                assert_eq!(warm, ["0 0 warmup"], "session {session}");
            }
        }
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
        assert_eq!(
            c.requests,
            (measured_sessions * per_session) as u64,
            "{c:?}"
        );
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
            assert_eq!(h.len(), c.metric(m).unwrap().count, "{}", p.display());
        }
        let ttft =
            read_hlog(&dir.join(format!("histograms/{}/{}/ttft.hlog", c.target, c.transport)))
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
        assert!(
            std::fs::metadata(&p).unwrap().len() > 100,
            "{}",
            p.display()
        );
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
    let tmp = testkit::tempdir().unwrap();
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
    // Beside the summary's keys: what CI needs without scraping stderr.
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&v["status"], &v["exit_code"]),
        (&"ok".into(), &0.into()),
        "{v}"
    );
    assert_eq!(v["results_dir"].as_str(), dir.to_str());
    assert_eq!(v["run_id"].as_str(), dir.file_name().unwrap().to_str());
    assert_eq!(v["failed_cells"], serde_json::json!([]));
    assert_eq!(v["erring_cells"], serde_json::json!([]));
    let on_disk: Summary =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary, on_disk);
    let transports: Vec<&str> = summary.cells.iter().map(|c| c.transport.as_str()).collect();
    assert_eq!(transports, ["http-pooled", "ws"]);
    assert!(
        !dir.join("report.html").exists(),
        "--no-report wrote a report"
    );
}

/// Progress goes to stderr as a status line every 5 s when stderr is not a terminal; with
/// `--quiet` there is none. The run lasts ~6.5 s so that the control run prints at least one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_prints_no_progress() {
    let tmp = testkit::tempdir().unwrap();
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
    let quiet_args = [
        "run",
        s,
        "--out",
        out_q.to_str().unwrap(),
        "--quiet",
        "--no-report",
    ];
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
    let tmp = testkit::tempdir().unwrap();
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

/// Ctrl-C (SIGINT) mid-run: exit 130, every completed request written and parseable, the run
/// marked interrupted, the summary written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_reach_the_files_within_a_second_even_when_few() {
    let tmp = testkit::tempdir().unwrap();
    // Three quick requests, then a turn that waits a minute before it is sent: the three
    // rows are far fewer than the writer's row batch, so only the time-based flush puts them
    // on disk while the run is still going.
    let s = scenario(
        tmp.path(),
        "few.toml",
        r#"
name = "few"
max_output_tokens = 4
link = "none"
[matrix]
targets = ["sim-wafer"]
transports = ["http-pooled"]
[[turns]]
prompt = "Say something short."
repeat = 3
[[turns]]
prompt = "And one more, much later."
think_time = "60s"
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
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let started = std::time::Instant::now();
    let rows = loop {
        let rows = std::fs::read_dir(&out)
            .ok()
            .and_then(|mut d| d.next())
            .map_or(0, |e| request_rows(&e.unwrap().path()));
        if rows >= 3 {
            break rows;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended early (it should be waiting out the think time)"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(45),
            "the 3 completed requests never reached requests.csv while the run was going"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    // Killed without warning: what is on disk is what a crash would leave.
    child.kill().await.unwrap();
    assert_eq!(rows, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_writes_what_completed_and_exits_130() {
    let tmp = testkit::tempdir().unwrap();
    // ~300 requests per cell at ~1 every 70 ms: about 20 s if nothing stops it.
    let s = scenario(tmp.path(), "long.toml", &long_scenario(8));
    let out = tmp.path().join("results");
    // Wait (on the file, not the clock) until completed requests are on disk.
    let (child, dir) = start_run(&s, &out, 1).await;
    let o = stop_with(child, "-INT").await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(130), "{stdout}\n{stderr}");
    assert_no_panic(&stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");

    let run = LoadedRun::open(&dir).unwrap();
    assert_eq!(run.manifest.status, RunStatus::Interrupted);
    assert!(run.manifest.ended_at.is_some());
    assert!(dir.join("summary.json").is_file());
    assert!(!run.rebuilt, "summary.json was not written");
    // Every row parses (strictly: the run finished writing), and every request the recorder
    // counted has its row.
    let recs = run.records().unwrap();
    let counted: u64 = run
        .summary
        .cells
        .iter()
        .map(|c| c.requests + c.warmup_requests)
        .sum();
    assert_eq!(recs.len() as u64, counted);
    assert!(
        recs.len() < 2 * 300,
        "the run was not stopped: {} requests",
        recs.len()
    );
    use spark_bench::vocab::OutcomeKind;
    for r in &recs {
        assert!(
            matches!(r.outcome, OutcomeKind::Ok | OutcomeKind::Cancelled),
            "{r:?}"
        );
        if r.is_ok() && r.kind != spark_bench::vocab::RequestKind::Warmup {
            assert!(r.first_token_ns.is_some() && !r.chunks.is_empty(), "{r:?}");
        }
    }
    // No request id twice, and every chunk belongs to a written request.
    let ids: std::collections::BTreeSet<u64> = recs.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), recs.len());
    for c in csv_maps(&dir.join("chunks.csv")) {
        assert!(ids.contains(&c["request_id"].parse::<u64>().unwrap()));
    }
    // Each cell's session ended and was written.
    let sessions = run.sessions().unwrap();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    for s in &sessions {
        let n = recs
            .iter()
            .filter(|r| r.transport == s.transport && r.session == s.session)
            .count();
        assert_eq!(s.requests as usize, n, "{s:?}");
    }
    // A session cut short by Ctrl-C is marked, and its wall time is not a session time.
    assert!(sessions.iter().any(|s| s.interrupted), "{sessions:?}");
    let timed = sessions
        .iter()
        .filter(|s| !s.warmup && !s.interrupted && s.failed == 0)
        .count() as u64;
    let walls: u64 = run
        .histograms
        .iter()
        .filter(|((_, m), _)| *m == spark_bench::recorder::Metric::SessionWall)
        .map(|(_, h)| h.len())
        .sum();
    assert_eq!(walls, timed, "session_wall samples vs complete sessions");
    // The table is still printed.
    assert!(stdout.starts_with("target"), "{stdout}");
}

/// Mistakes in a scenario or on the command line: exit 2, a message that says where and how
/// to fix it, no panic, no results directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_with_a_located_message() {
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("results");
    let out = out.to_str().unwrap();
    let unknown_key = scenario(
        tmp.path(),
        "unknown-key.toml",
        "name = \"x\"\n[load]\nsessions = 1\n[[turns]]\nprompt = \"hi\"\nthink = \"1s\"\n",
    );
    let bad_duration = scenario(
        tmp.path(),
        "bad-duration.toml",
        "name = \"x\"\n[[turns]]\nprompt = \"hi\"\nthink_time = \"three seconds\"\n",
    );
    let wrong_type = scenario(
        tmp.path(),
        "wrong-type.toml",
        "name = \"x\"\n[load]\nsessions = \"two\"\n[[turns]]\nprompt = \"hi\"\n",
    );
    // (file, line:col, what the message must name, the hint)
    let cases = [
        (&unknown_key, "6:1", "`think`", "did you mean `think_time`"),
        (
            &bad_duration,
            "4:14",
            "`think_time`",
            "write it like \"40ms\"",
        ),
        (&wrong_type, "3:12", "`sessions`", "e.g. `sessions = 2`"),
    ];
    for (file, at, key, hint) in cases {
        let o = run_bin(&["run", file.to_str().unwrap(), "--out", out], &[]).await;
        let (stdout, stderr) = texts(&o);
        assert_eq!(o.status.code(), Some(2), "{}: {stderr}", file.display());
        assert_no_panic(&stderr);
        assert!(stdout.is_empty(), "{stdout}");
        let located = format!("{}:{at}", file.display());
        for want in [located.as_str(), key, hint] {
            assert!(stderr.contains(want), "missing {want:?} in:\n{stderr}");
        }
        assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    }

    // A scenario that does not exist: the path, the reason once, and where scenarios live.
    let missing = tmp.path().join("no-such-scenario.toml");
    let o = run_bin(&["run", missing.to_str().unwrap(), "--out", out], &[]).await;
    let (_, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_no_panic(&stderr);
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("scenarios/"), "{stderr}");
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "the reason once:\n{stderr}"
    );

    // An unknown --target lists the known ones.
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--target",
            "sim-tpu",
            "--out",
            out,
        ],
        &[],
    )
    .await;
    let (_, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_no_panic(&stderr);
    for want in ["sim-tpu", "sim-gpu", "sim-wafer", "sim-cpu"] {
        assert!(stderr.contains(want), "missing {want:?} in:\n{stderr}");
    }

    // An unknown --transport: clap's usage error, also exit 2.
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--transport",
            "carrier-pigeon",
        ],
        &[],
    )
    .await;
    let (_, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("http-pooled"), "{stderr}");

    assert!(
        !Path::new(out).exists(),
        "bad input created a results directory"
    );
}

/// `spark-bench run … | head -1`: stdout and stderr closed early. The run still finishes,
/// writes its files and exits 0; nothing panics on the broken pipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_does_not_crash_the_run() {
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("results");
    let mut child = spark_bench(&[
        "run",
        "scenarios/smoke.toml",
        "--no-report",
        "--out",
        out.to_str().unwrap(),
    ])
    .spawn()
    .unwrap();
    // Close both pipes before the program writes anything.
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = tokio::time::timeout(std::time::Duration::from_secs(120), child.wait())
        .await
        .expect("spark-bench did not finish")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let run = LoadedRun::open(&only_run(&out)).unwrap();
    assert_eq!(run.manifest.status, RunStatus::Complete);
}
