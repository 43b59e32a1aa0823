//! The `spark-bench` binary in tests: run with a time limit, its output as text, and its
//! results directory read back as plain CSV, and a long run started and stopped mid-run with
//! a signal. Only this binary runs it (the timing tests call the library,
//! `support::run::run_lib`), so it lives here and not in `tests/support`.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// The most any single binary run in these tests may take before the test fails.
pub const BIN_LIMIT: Duration = Duration::from_secs(120);

/// The spark-bench binary with `args`, run from the repository root: no stdin, stdout and
/// stderr piped, killed if the test drops it, and no API key from the test's environment.
pub fn spark_bench(args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_spark-bench"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Only the key a test passes on purpose.
        .env_remove("OPENAI_API_KEY");
    cmd
}

/// `spark-bench` with `args`, run from the crate root (so `scenarios/…` resolves), with
/// extra environment variables; fails the test if it runs longer than [`BIN_LIMIT`].
pub async fn run_bin(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = spark_bench(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::time::timeout(BIN_LIMIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("spark-bench {args:?} ran longer than {BIN_LIMIT:?}"))
        .unwrap()
}

/// Fails the test if a run's stderr shows a panic.
pub fn assert_no_panic(stderr: &str) {
    assert!(!stderr.contains("panicked"), "panic output:\n{stderr}");
}

/// A scenario of ~300 short streaming requests per cell (two cells), ~1 every 25 ms plus
/// the answer's time: long enough to be stopped mid-run. `max_output_tokens` sets how long
/// each answer streams.
pub fn long_scenario(max_output_tokens: u32) -> String {
    format!(
        r#"
name = "long"
max_output_tokens = {max_output_tokens}
link = "rtt=5ms"
[matrix]
targets = ["sim-wafer"]
transports = ["http-pooled", "ws"]
[[turns]]
prompt = "Say something short."
think_time = "20ms"
repeat = 300
"#
    )
}

/// Rows in `dir/requests.csv` so far, the header not counted (0 while there is no file).
pub fn request_rows(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("requests.csv"))
        .map(|t| t.lines().count().saturating_sub(1))
        .unwrap_or(0)
}

/// Starts `run` on `scenario` into `out` and waits (on the file, not the clock) until
/// `rows` requests are on disk; returns the running child and its run directory. Fails the
/// test if the run ends first or takes over 60 s.
pub async fn start_run(
    scenario: &Path,
    out: &Path,
    rows: usize,
) -> (tokio::process::Child, PathBuf) {
    let mut child = spark_bench(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-report",
    ])
    .spawn()
    .unwrap();
    let started = Instant::now();
    loop {
        let dir = std::fs::read_dir(out)
            .ok()
            .and_then(|mut d| d.next())
            .map(|e| e.unwrap().path());
        if let Some(dir) = dir.filter(|d| request_rows(d) >= rows) {
            return (child, dir);
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be stopped"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no {rows} rows within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `sig` (`-INT`, `-TERM`, `-KILL`) to a running child with `kill` and waits for it
/// to exit; fails the test if it does not within [`BIN_LIMIT`].
pub async fn stop_with(child: tokio::process::Child, sig: &str) -> Output {
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap()
        .success());
    tokio::time::timeout(BIN_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("spark-bench did not exit after kill {sig}"))
        .unwrap()
}

/// stdout and stderr as text, for assertions and failure messages.
pub fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The one run directory under a results root (`--out`).
pub fn only_run(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap_or_else(|e| panic!("{}: {e}", out.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "baselines"))
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "expected one run under {}: {dirs:?}",
        out.display()
    );
    dirs.into_iter().next().unwrap()
}

/// `requests.csv` (or any CSV) as header → value maps, read without the crate's row types,
/// so a column that fails to parse as the crate expects is still visible.
pub fn csv_maps(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut rd = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let headers = rd.headers().unwrap().clone();
    rd.records()
        .map(|r| {
            let r = r.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}
