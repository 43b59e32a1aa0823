//! Helpers for `spark-bench run` tests through the library: scenario files in temp dirs,
//! [`run_lib`] (`load_plan` + `runner::run`), a scenario's plan ([`plan_of`]), and a run's
//! records read back.

use std::path::{Path, PathBuf};

use spark_bench::commands::run::load_plan;
use spark_bench::plan::Plan;
use spark_bench::runner::{self, Options, RunOutcome};
use spark_bench::store::LoadedRun;
use spark_bench::vocab::RequestRecord;

/// Writes `text` to `dir/name` and returns the path.
pub fn scenario(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The plan of scenario `text`, read as if from a file called `name` (no overrides).
pub fn plan_of(name: &str, text: &str) -> Plan {
    let scenario = spark_bench::scenario::parse(name, text).unwrap();
    spark_bench::plan::build(&scenario, name, text.as_bytes(), &Default::default()).unwrap()
}

/// Runs a scenario file through the library (`load_plan` + `runner::run`) with extra command
/// line arguments, quietly.
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

/// Nanoseconds as milliseconds, for messages.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
