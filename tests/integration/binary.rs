//! The `spark-bench` binary in tests: run with a time limit, its output as text, and its
//! results directory read back as plain CSV. Only this binary runs it (the timing tests call
//! the library, `support::run::run_lib`), so it lives here and not in `tests/support`.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

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
