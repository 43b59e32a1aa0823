//! `spark-bench run`: arguments → plan → [`crate::runner`] → table, report, baseline.

use std::sync::Arc;

use crate::cli::RunArgs;
use crate::plan::{self, Plan};
use crate::runner::{self, Options};

use super::{EXIT_INTERRUPTED, EXIT_OK};

/// Executes `spark-bench run`; returns the exit code.
pub async fn execute(args: RunArgs) -> anyhow::Result<u8> {
    let plan = Arc::new(load_plan(&args)?);
    for w in &plan.warnings {
        errln!("warning: {w}");
    }
    let options = Options {
        progress: crate::progress::Mode::detect(args.quiet || args.json),
        realtime: args.realtime,
        calibration: crate::store::default_calibration_path(),
        announce: true,
    };
    let outcome = runner::run(plan.clone(), &args.out, options).await?;

    if args.json {
        outln!("{}", serde_json::to_string_pretty(&outcome.summary)?);
    } else {
        outln!("{}", crate::recorder::table(&outcome.summary));
        outln!("vs http measured under {}", plan.load_line());
    }
    errln!("results: {}", outcome.dir.display());
    if !args.no_report {
        match crate::report::render_run(&outcome.dir) {
            Ok(paths) => {
                let html = paths
                    .iter()
                    .find(|p| p.extension().is_some_and(|e| e == "html"));
                let charts = paths
                    .iter()
                    .filter(|p| p.extension().is_some_and(|e| e == "svg" || e == "png"))
                    .count();
                if let Some(html) = html {
                    errln!(
                        "report:  {} (and report.md, {charts} charts in charts/)",
                        html.display()
                    );
                }
            }
            Err(e) => errln!("warning: the report could not be rendered: {e:#}"),
        }
    }
    if let Some(name) = &args.save_baseline {
        let saved = crate::store::save_baseline(&args.out, &outcome.dir, name)?;
        errln!("baseline {name:?} saved to {}", saved.display());
    }
    if outcome.interrupted {
        errln!("interrupted: every completed request was written; the run is marked interrupted");
        return Ok(EXIT_INTERRUPTED);
    }
    if let Some(name) = &args.baseline {
        return super::compare::gate_against_baseline(name, &outcome.dir);
    }
    Ok(EXIT_OK)
}

/// Reads the scenario and builds the plan with the command line's overrides.
pub fn load_plan(args: &RunArgs) -> anyhow::Result<Plan> {
    let loaded = crate::scenario::load(&args.scenario)?;
    let targets_file = args
        .targets_file
        .as_deref()
        .map(crate::scenario::load_targets)
        .transpose()?;
    let overrides = plan::Overrides {
        targets: args.targets.clone(),
        targets_file,
        transports: args.transports.clone(),
        sessions: args.sessions,
        concurrency: args.concurrency,
        seed: args.seed,
        link: args.link,
        schedule: args.schedule,
        cache: args.cache,
    };
    Ok(plan::build(
        &loaded.scenario,
        &loaded.path,
        loaded.source.as_bytes(),
        &overrides,
    )?)
}
