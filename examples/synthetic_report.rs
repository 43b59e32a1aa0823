//! Writes a synthetic results directory (two simulated targets × four transports, records
//! built in code and written through the real store) and renders its report.
//!
//! ```text
//! cargo run --example synthetic_report -- [--out DIR] [--requests N] [--seed S]
//!     [--tokens N] [--concurrency N] [--status complete|interrupted] [--no-render]
//! ```
//! Prints the run directory. Used by `.ci/steps/30-report-browser.sh` and for the
//! 1,000,000-request timing (see `spark_bench::report`).

use std::path::PathBuf;

use spark_bench::report::fixture::{synthetic_run_with, SyntheticOptions};
use spark_bench::store::RunStatus;

fn main() -> anyhow::Result<()> {
    let mut o = SyntheticOptions::default();
    let mut out = PathBuf::from("target/report-fixture");
    let mut render = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--out" => out = PathBuf::from(val()?),
            "--requests" => o.requests = val()?.parse()?,
            "--seed" => o.seed = val()?.parse()?,
            "--tokens" => {
                let n: u32 = val()?.parse()?;
                o.tokens = (n, n);
            }
            "--concurrency" => o.concurrency = val()?.parse()?,
            "--status" => {
                o.status = match val()?.as_str() {
                    "complete" => RunStatus::Complete,
                    "interrupted" => RunStatus::Interrupted,
                    other => anyhow::bail!("--status {other:?}: use complete or interrupted"),
                }
            }
            "--no-render" => render = false,
            other => anyhow::bail!("unknown argument {other:?}"),
        }
    }
    let dir = synthetic_run_with(&out, &o)?;
    if render {
        spark_bench::report::render_run(&dir)?;
    }
    println!("{}", dir.display());
    Ok(())
}
