//! `spark-bench run`'s exit codes CI can trust: a run whose measured requests all failed (or
//! whose error rate passes `--max-error-rate`) writes its results, names the error kinds on
//! stderr with a sample message each, and exits 3; `--json` says so in one object with the
//! run id, the results directory, the status and the exit code. Failed requests within the
//! budget are named the same way, as a note, and leave the exit code at 0.

use crate::binary::*;
use crate::support::run::*;

/// A scenario whose only target is `base_url`, over plain HTTP.
fn dead_target_scenario(dir: &std::path::Path, base_url: &str) -> std::path::PathBuf {
    scenario(
        dir,
        "dead.toml",
        &format!(
            r#"
name = "dead"
max_output_tokens = 8
[load]
sessions = 2
[matrix]
targets = ["dead"]
transports = ["http"]
[targets.dead]
base_url = "{base_url}"
model = "sim-wafer"
[[turns]]
prompt = "Hello."
[[turns]]
prompt = "Again."
"#
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_requests_all_failed_exits_3_and_says_why() {
    let tmp = testkit::tempdir().unwrap();
    // A port nobody listens on: bound, then dropped.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let s = dead_target_scenario(tmp.path(), &format!("http://127.0.0.1:{port}/v1"));
    let out = tmp.path().join("results");
    let o = run_bin(
        &[
            "run",
            s.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--no-report",
            "--json",
        ],
        &[],
    )
    .await;
    let (stdout, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert_eq!(o.status.code(), Some(3), "{stdout}\n{stderr}");

    // The results are written in full: the failure is data.
    let dir = only_run(&out);
    let rows = csv_maps(&dir.join("requests.csv"));
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| r["outcome"] == "connect-error"),
        "{rows:?}"
    );
    let first_error = rows[0]["error"].clone();
    assert!(!first_error.is_empty());

    // stderr names the cell, the kind with its count, and a sample message.
    assert!(stderr.contains("failed-requests:"), "{stderr}");
    assert!(stderr.contains("dead × http: all"), "{stderr}");
    let kind_line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("connect-error ×"))
        .unwrap_or_else(|| panic!("no connect-error line:\n{stderr}"));
    assert!(
        kind_line.contains(&format!("×{}: ", rows.len())),
        "{kind_line}"
    );
    assert!(
        kind_line.ends_with(first_error.lines().next().unwrap()),
        "{kind_line}"
    );

    // One JSON object: the summary's keys, plus what CI needs.
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}"));
    assert_eq!(v["status"], "failed-requests", "{v}");
    assert_eq!(v["exit_code"], 3);
    let results_dir = std::path::PathBuf::from(v["results_dir"].as_str().unwrap());
    assert!(results_dir.is_dir(), "{}", results_dir.display());
    assert_eq!(results_dir, dir);
    assert_eq!(
        v["run_id"].as_str().unwrap(),
        dir.file_name().unwrap().to_str().unwrap()
    );
    assert_eq!(v["cells"][0]["failed"], rows.len() as u64);
    let cell = &v["failed_cells"][0];
    assert_eq!(
        (cell["target"].as_str(), cell["transport"].as_str()),
        (Some("dead"), Some("http"))
    );
    assert_eq!(cell["errors"][0]["outcome"], "connect-error");
    assert_eq!(cell["errors"][0]["count"], rows.len() as u64);
    assert_eq!(
        cell["errors"][0]["sample"].as_str(),
        first_error.lines().next()
    );
}

/// 4 turns, one answered with HTTP 500: an error rate of exactly 25 % in the one cell.
const ONE_IN_FOUR: &str = r#"
name = "quarter"
seed = 3
max_output_tokens = 8
link = "none"
[matrix]
targets = ["fw"]
transports = ["http-pooled"]
[targets.fw]
sim_profile = "wafer"
[[turns]]
prompt = "Write a function."
[[turns]]
prompt = "Make it faster."
fault = "status=500"
[[turns]]
prompt = "Add a test."
[[turns]]
prompt = "Thanks."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_error_rate_fails_a_run_only_above_the_limit() {
    let tmp = testkit::tempdir().unwrap();
    let s = scenario(tmp.path(), "quarter.toml", ONE_IN_FOUR);
    let s = s.to_str().unwrap();
    for (i, (limit, code)) in [(None, 0), (Some("25%"), 0), (Some("0.24"), 3)]
        .into_iter()
        .enumerate()
    {
        let out = tmp.path().join(format!("r{i}"));
        let mut args = vec![
            "run",
            s,
            "--out",
            out.to_str().unwrap(),
            "--no-report",
            "-q",
            "--json",
        ];
        if let Some(l) = limit {
            args.extend(["--max-error-rate", l]);
        }
        let o = run_bin(&args, &[]).await;
        let (stdout, stderr) = texts(&o);
        assert_no_panic(&stderr);
        assert_eq!(o.status.code(), Some(code), "{limit:?}\n{stdout}\n{stderr}");
        let rows = csv_maps(&only_run(&out).join("requests.csv"));
        let failed = rows.iter().filter(|r| r["outcome"] != "ok").count();
        assert_eq!((failed, rows.len()), (1, 4), "{rows:?}");
        // `--json` lists the cell under one key or the other, never both.
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let (listed, other) = if code == 3 {
            ("failed_cells", "erring_cells")
        } else {
            ("erring_cells", "failed_cells")
        };
        assert_eq!(v[listed][0]["errors"][0]["outcome"], "http-status", "{v}");
        assert_eq!(v[listed][0]["failed"], 1, "{v}");
        assert_eq!(v[other], serde_json::json!([]), "{v}");
        if code == 3 {
            assert!(
                stderr.contains("error rate 25.0% (1 of 4) is above --max-error-rate 24%"),
                "{stderr}"
            );
            assert!(stderr.contains("http-status ×1: "), "{stderr}");
        } else {
            assert!(!stderr.contains("failed-requests"), "{stderr}");
            // Within the budget the errors are still named, as a note.
            assert!(
                stderr.contains("errors: 1 measured cell(s) had failed requests"),
                "{stderr}"
            );
            assert!(
                stderr.contains("1 of 4 measured requests failed (25.0%)"),
                "{stderr}"
            );
            assert!(stderr.contains("http-status ×1: "), "{stderr}");
        }
    }
    // Not a rate: a usage error before anything runs.
    let o = run_bin(&["run", s, "--max-error-rate", "5"], &[]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(texts(&o).1.contains("5%"), "{}", texts(&o).1);
}

/// `compare` and `history` take `--json` (their `--format json`) and `-q` like `run` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_history_take_json_and_quiet() {
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("results");
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--out",
            out.to_str().unwrap(),
            "--no-report",
            "-q",
            "--transport",
            "ws",
        ],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", texts(&o).1);
    let dir = only_run(&out);
    let d = dir.to_str().unwrap();
    let hist = tmp.path().join("history");
    let h = hist.to_str().unwrap();
    for quiet in [false, true] {
        let mut args = vec!["compare", d, d, "--json", "--history", h];
        if quiet {
            args.push("-q");
        }
        let o = run_bin(&args, &[]).await;
        let (stdout, stderr) = texts(&o);
        // A run this small cannot decide a row at its band: NO DECISION, exit 4.
        assert_eq!(o.status.code(), Some(4), "{stdout}\n{stderr}");
        let v: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("not the verdict JSON ({e}):\n{stdout}"));
        assert_eq!(v["schema_version"], 2, "{v}");
        assert_eq!(v["outcome"], "no-decision", "{v}");
        assert_eq!(stderr.contains("history: "), !quiet, "{stderr}");
    }
    let o = run_bin(&["history", h, "--json", "-q"], &[]).await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["entries"], 2, "{v}");
    assert!(!stderr.contains("gate runs"), "{stderr}");
}
