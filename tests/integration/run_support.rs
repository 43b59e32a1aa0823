//! Helpers for the `spark-bench run` end-to-end tests: scenario files in temp dirs, the real
//! binary with a time limit, and reading a results directory back.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use spark_bench::commands::run::load_plan;
use spark_bench::runner::{self, Options, RunOutcome};
use spark_bench::store::LoadedRun;
use spark_bench::vocab::RequestRecord;

/// The most any single binary run in these tests may take before the test fails.
pub const BIN_LIMIT: Duration = Duration::from_secs(120);

/// Writes `text` to `dir/name` and returns the path.
pub fn scenario(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `spark-bench` with `args`, run from the crate root (so `scenarios/…` resolves), with
/// extra environment variables; fails the test if it runs longer than [`BIN_LIMIT`].
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

/// Runs a scenario file through the library (`load_plan` + `runner::run`) with extra command
/// line arguments, quietly.
#[allow(dead_code)] // used by the `timing` binary
pub async fn run_lib(scenario: &Path, out: &Path, extra: &[&str]) -> RunOutcome {
    let mut argv = vec![
        "spark-bench".to_string(),
        "run".into(),
        scenario.display().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    let cli = <spark_bench::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let spark_bench::cli::Command::Run(args) = cli.command else {
        unreachable!()
    };
    let plan = std::sync::Arc::new(load_plan(&args).unwrap());
    runner::run(plan, &args.out, Options::quiet())
        .await
        .unwrap()
}

/// Every request of a run, sorted by cell, then session, then turn.
pub fn records(run: &LoadedRun) -> Vec<RequestRecord> {
    let mut r = run.records().unwrap();
    r.sort_by(|a, b| {
        (&a.target, &a.transport, a.session, a.turn).cmp(&(
            &b.target,
            &b.transport,
            b.session,
            b.turn,
        ))
    });
    r
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

/// Nanoseconds as milliseconds, for messages.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
