//! Results that survive the worst: SIGTERM behaves like Ctrl-C; a run killed with SIGKILL
//! mid-stream or stopped by a full disk leaves a directory that `report` and `compare` read
//! (rebuilding the summary from the rows, dropping a torn last row with a note) or refuse
//! with a clear message; and the checks that used to fail only after a whole run (`[gate]`,
//! baseline names) or not at all (an empty candidate) now fail first and clearly.

use std::path::{Path, PathBuf};
use std::process::Output;

use spark_bench::store::{LoadedRun, RunStatus};

use crate::binary::*;
use crate::support::run::*;

/// [`long_scenario`] with a `[gate]`, which a stopped run must not trip over.
fn long() -> String {
    long_scenario(64) + "[gate]\nttft = \"+10%\"\n"
}

/// `report` on run `dir`, written to `out`.
async fn report_on(dir: &Path, out: &Path) -> Output {
    run_bin(
        &[
            "report",
            dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await
}

/// `compare` of run `base` with run `cand`, with `extra` arguments.
async fn compare_runs(base: &Path, cand: &Path, extra: &[&str]) -> Output {
    let mut argv = vec!["compare", base.to_str().unwrap(), cand.to_str().unwrap()];
    argv.extend(extra);
    run_bin(&argv, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_is_ctrl_c_results_written_run_marked_interrupted_exit_130() {
    let tmp = testkit::tempdir().unwrap();
    let s = scenario(tmp.path(), "long.toml", &long());
    let out = tmp.path().join("results");
    let (child, dir) = start_run(&s, &out, 2).await;
    let o = stop_with(child, "-TERM").await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(130), "{stdout}\n{stderr}");
    assert_no_panic(&stderr);
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    let run = LoadedRun::open(&dir).unwrap();
    assert_eq!(run.manifest.status, RunStatus::Interrupted);
    assert!(!run.rebuilt, "summary.json must be written on SIGTERM");
    assert!(dir.join("histograms").is_dir());
    let rows = request_rows(&dir);
    assert!((2..600).contains(&rows), "{rows} rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_leaves_a_run_report_and_compare_read() {
    let tmp = testkit::tempdir().unwrap();
    let s = scenario(tmp.path(), "long.toml", &long());
    let out = tmp.path().join("results");
    let (child, dir) = start_run(&s, &out, 20).await;
    let o = stop_with(child, "-KILL").await;
    assert_eq!(o.status.code(), None, "SIGKILL leaves no exit code");
    // What a crash leaves: the manifest still says running, no summary or histograms.
    assert!(!dir.join("summary.json").exists());
    // Tear the last row as a kill in the middle of a write would (the rows are flushed
    // whole, so cut one by hand): it must be dropped with a note, never counted.
    let csv = dir.join("requests.csv");
    let text = std::fs::read(&csv).unwrap();
    let whole = request_rows(&dir);
    std::fs::write(&csv, &text[..text.len() - 7]).unwrap();
    let run = LoadedRun::open(&dir).unwrap();
    assert_eq!(run.manifest.status, RunStatus::Running);
    assert!(run.rebuilt);
    assert_eq!(run.skipped_rows, 1);
    assert_eq!(run.records().unwrap().len(), whole - 1);
    let total: u64 = run.summary.cells.iter().map(|c| c.requests).sum();
    // (The summary counts measured requests: never the dropped row.)
    assert!(
        total > 0 && (total as usize) < whole,
        "{total} of {whole} rows"
    );
    assert!(
        run.row_notes()
            .unwrap()
            .iter()
            .any(|n| n.contains("half-written")),
        "{:?}",
        run.row_notes()
    );

    let report = tmp.path().join("report");
    let o = report_on(&dir, &report).await;
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_no_panic(&stderr);
    assert!(stderr.contains("half-written"), "{stderr}");
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        md.contains("did not finish") && md.contains("half-written"),
        "{md}"
    );

    // compare against itself: read (same samples: PASS), with the notes.
    let o = compare_runs(&dir, &dir, &[]).await;
    let (stdout, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("half-written") && stdout.contains("running"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_refuses_an_empty_candidate_and_report_flags_a_truncated_csv() {
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("results");
    let o = run_bin(
        &[
            "run",
            "scenarios/smoke.toml",
            "--out",
            out.to_str().unwrap(),
            "--no-report",
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{:?}", texts(&o));
    let base = only_run(&out);
    let cand = tmp.path().join("cand");
    std::fs::create_dir(&cand).unwrap();
    for e in std::fs::read_dir(&base).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, cand.join(p.file_name().unwrap())).unwrap();
        }
    }
    let csv = cand.join("requests.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    let header = text.lines().next().unwrap().to_string();
    // Empty (the header only): exit 2 with a message, not PASS.
    std::fs::write(&csv, format!("{header}\n")).unwrap();
    let o = compare_runs(&base, &cand, &[]).await;
    let (stdout, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert_eq!(o.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("no requests in requests.csv"), "{stderr}");
    // Truncated at a row boundary: report and compare say so.
    let keep: Vec<&str> = text.lines().take(4).collect();
    std::fs::write(&csv, keep.join("\n") + "\n").unwrap();
    let report = tmp.path().join("report");
    let o = report_on(&cand, &report).await;
    let (_, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("has 3 rows but summary.json counts"),
        "{stderr}"
    );
    let o = compare_runs(&base, &cand, &["--allow-mismatch"]).await;
    let (stdout, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert!(
        stdout.contains("has 3 rows but summary.json counts"),
        "{stdout}\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_gate_entries_and_baseline_names_fail_before_the_run() {
    let tmp = testkit::tempdir().unwrap();
    let out = tmp.path().join("results");
    let smoke =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml"))
            .unwrap();
    for (entry, says) in [
        ("dispatch_lag = \"+5ms\"", "unknown metric \"dispatch_lag\""),
        ("ttft = \"banana\"", "ttft"),
    ] {
        let text = smoke.replace("overhead = \"+10ms\"", entry);
        let line = text.lines().position(|l| l == entry).unwrap() + 1;
        let s = scenario(tmp.path(), "bad.toml", &text);
        let o = run_bin(
            &["run", s.to_str().unwrap(), "--out", out.to_str().unwrap()],
            &[],
        )
        .await;
        let (_, stderr) = texts(&o);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("bad.toml:{line}:1")) && stderr.contains(says),
            "{stderr}"
        );
        assert!(!out.exists(), "the run started: {stderr}");
    }
    for args in [
        ["--save-baseline", "../escape"],
        ["--baseline", "no-such-baseline"],
    ] {
        let mut argv = vec![
            "run",
            "scenarios/smoke.toml",
            "--out",
            out.to_str().unwrap(),
        ];
        argv.extend(args);
        let o = run_bin(&argv, &[]).await;
        let (_, stderr) = texts(&o);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(args[1]), "{stderr}");
        assert!(
            !out.exists(),
            "the run started before {args:?} was checked: {stderr}"
        );
    }
}

/// A results filesystem that fills up mid-run (a 2 MiB tmpfs; needs root, else skipped with
/// a message): the run fails with exit 2 naming the write, the directory still parses
/// (whole rows, manifest `failed` or `running`), and `report`/`compare` read it or refuse
/// it clearly, never panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_leaves_a_run_that_parses() {
    let tmp = testkit::tempdir().unwrap();
    let mnt = tmp.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=2m",
            "tmpfs",
            mnt.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a small tmpfs (needs root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.clone());
    let s = scenario(
        tmp.path(),
        "fill.toml",
        r#"
name = "fill"
max_output_tokens = 256
link = "none"
[load]
sessions = 40
concurrency = 8
[matrix]
targets = ["sim-wafer"]
transports = ["http-pooled"]
[[turns]]
prompt = "Write a long answer."
repeat = 20
"#,
    );
    let out = mnt.join("results");
    let o = run_bin(
        &[
            "run",
            s.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    let (stdout, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a full disk is an error\n{stdout}\n{stderr}"
    );
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let dir = only_run(&out);
    let run = LoadedRun::open(&dir).unwrap();
    assert!(
        matches!(run.manifest.status, RunStatus::Failed | RunStatus::Running),
        "{:?}",
        run.manifest.status
    );
    assert!(run.rebuilt, "no summary.json claims a whole run");
    let rows = run.records().unwrap().len();
    assert!(rows > 0, "rows written before the disk filled are kept");
    eprintln!(
        "full disk: status {:?}, {rows} requests kept, {} torn rows dropped, notes {:?}",
        run.manifest.status,
        run.skipped_rows,
        run.row_notes()
    );
    let report = tmp.path().join("report");
    let o = report_on(&dir, &report).await;
    let (_, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let o = compare_runs(&dir, &dir, &[]).await;
    let (stdout, stderr) = texts(&o);
    assert_no_panic(&stderr);
    assert!(
        matches!(o.status.code(), Some(0) | Some(2)),
        "{stdout}\n{stderr}"
    );
}
