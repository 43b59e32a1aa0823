//! `spark-bench compare` and the `run --baseline NAME` gate: arguments → the gate's use case
//! ([`crate::compare::runs`]) → the verdict printed → the exit code (0 pass, 1 regression,
//! 2 error, 4 no decision).
//!
//! Owns: turning [`CompareArgs`] into a [`compare::runs::Request`], the history label
//! (`--label`, else `$GITHUB_SHA`), and printing. Does not own: finding and loading the
//! runs, comparability, pairing, the stall policy, the exit code mapping (`compare::runs`,
//! `compare::sides`) or the history file (`compare::history_file`).

use std::path::Path;

use anyhow::Context as _;

use crate::cli::CompareArgs;
use crate::compare::{self, history_file, render, Comparison, Thresholds};

/// Executes `spark-bench compare`; returns the exit code.
pub async fn execute(args: CompareArgs) -> anyhow::Result<u8> {
    // `--json` is `--format json` (clap refuses both with another format).
    let format = if args.json {
        render::Format::Json
    } else {
        args.format
    };
    let request = compare::runs::Request {
        thresholds: Thresholds::parse_cli(&args.thresholds)?,
        metrics: args
            .metrics
            .iter()
            .flat_map(|l| l.0.iter().copied())
            .collect(),
        baseline: args.baseline.clone(),
        candidate: args.candidate.clone(),
        confirm: args.confirm_run.clone(),
        confirm_baseline: args.confirm_baseline.clone(),
        fail_on_inconclusive: args.fail_on_inconclusive,
        allow_mismatch: args.allow_mismatch,
    };
    let comparison = tokio::task::spawn_blocking(move || -> anyhow::Result<Comparison> {
        let c = compare::compare_dirs(&request)?;
        if let Some(h) = &args.history {
            let label = args
                .label
                .clone()
                .or_else(|| std::env::var("GITHUB_SHA").ok().filter(|s| !s.is_empty()));
            let n = history_file::append(h, &c, label, args.history_keep)?;
            if !args.quiet {
                errln!("history: {} ({n} entries)", h.display());
            }
        }
        Ok(c)
    })
    .await
    .context("the comparison task failed")??;
    out!("{}", format.render(&comparison));
    Ok(compare::exit_code(&comparison))
}

/// The gate of `spark-bench run --baseline NAME` ([`compare::gate_comparison`]): prints the
/// text verdict (on stderr with `to_stderr`, for `run --json`, whose stdout is one JSON
/// object) and returns the exit code (0 pass, 1 regression, 4 no decision).
pub fn gate_against_baseline(
    name: &str,
    candidate_dir: &Path,
    to_stderr: bool,
) -> anyhow::Result<u8> {
    let comparison = compare::gate_comparison(name, candidate_dir, &[])?;
    let verdict = render::text(&comparison);
    if to_stderr {
        errln!("{}", verdict.trim_end());
    } else {
        out!("{verdict}");
    }
    Ok(compare::exit_code(&comparison))
}
