//! `spark-bench run`: arguments → plan → [`crate::runner`] → table, report, baseline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::RunArgs;
use crate::plan::{self, Plan};
use crate::runner::{self, Options};

use super::run_status::{self, FailedCell, Status};
use super::{EXIT_FAILED_REQUESTS, EXIT_INTERRUPTED, EXIT_OK, EXIT_REGRESSION};

/// Executes `spark-bench run`; returns the exit code.
pub async fn execute(args: RunArgs) -> anyhow::Result<u8> {
    runner::fd_budget::raise();
    if let Some(spec) = args.sweep.clone() {
        return sweep(args, *spec).await;
    }
    check_baseline_names(&args)?;
    if args.repeat > 1 || args.confirm > 0 {
        return repeated(args).await;
    }
    let mut plan = load_plan(&args)?;
    if let Some(spec) = args.shard {
        plan = plan.shard(spec)?;
    }
    let plan = Arc::new(plan);
    for w in &plan.warnings {
        errln!("warning: {w}");
    }
    if let Some(w) = runner::fd_budget::check(&plan)? {
        errln!("warning: {w}");
    }
    let options = options(&args);
    let outcome = runner::run(plan.clone(), &args.out, options).await?;
    finish_one(&args, &plan, &outcome);
    let (failed, erring) = failures(&args, &outcome);
    if let Some(name) = &args.save_baseline {
        save_baseline(&args, &outcome.dir, name, failed.is_empty())?;
    }
    let status = if outcome.interrupted {
        errln!("interrupted: every completed request was written; the run is marked interrupted");
        Status::Interrupted
    } else {
        let gate = match &args.baseline {
            Some(name) => super::compare::gate_against_baseline(name, &outcome.dir, args.json)?,
            None => EXIT_OK,
        };
        if !failed.is_empty() {
            Status::FailedRequests
        } else if gate == EXIT_REGRESSION {
            Status::Regression
        } else if gate == crate::compare::EXIT_NO_DECISION {
            Status::NoDecision
        } else {
            Status::Ok
        }
    };
    if args.json {
        let v = run_status::json(&outcome.summary, &outcome.dir, status, &failed, &erring);
        outln!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(status.exit_code())
}

/// The measured cells of this run that fail it (see [`run_status`]) and those whose failed
/// requests stay within the budget, with a sample error text per kind, reported on stderr.
fn failures(args: &RunArgs, outcome: &runner::RunOutcome) -> (Vec<FailedCell>, Vec<FailedCell>) {
    // One read of `requests.csv` finds the samples of both lists.
    let mut failed = run_status::failed_cells(&outcome.summary, args.max_error_rate);
    let n = failed.len();
    failed.extend(run_status::erring_cells(
        &outcome.summary,
        args.max_error_rate,
    ));
    if let Err(e) = run_status::add_samples(&outcome.dir, &mut failed) {
        errln!("warning: the failed requests' error texts could not be read: {e:#}");
    }
    let erring = failed.split_off(n);
    run_status::print(&failed, args.max_error_rate);
    run_status::print_errors(&erring, args.max_error_rate);
    (failed, erring)
}

/// `--save-baseline NAME`, unless the run failed its requests (a baseline whose requests
/// failed would pass every later run that fails the same way).
fn save_baseline(args: &RunArgs, dir: &Path, name: &str, clean: bool) -> anyhow::Result<()> {
    if !clean {
        errln!("warning: not saved as baseline {name:?}: the run failed its requests (above)");
        return Ok(());
    }
    let saved = crate::store::save_baseline(&args.out, dir, name)?;
    errln!("baseline {name:?} saved to {}", saved.display());
    Ok(())
}

/// After one run: the stall windows into `stalls.json`, the table, the report.
fn finish_one(args: &RunArgs, plan: &Plan, outcome: &runner::RunOutcome) {
    // The runner wrote `stalls.json`; detected from the rows only when it could not.
    let written = crate::store::read_stalls(&outcome.dir).ok().flatten();
    let found = written.map(Ok).unwrap_or_else(|| {
        let stalls = crate::store::LoadedRun::open(&outcome.dir).and_then(|r| r.stalls())?;
        crate::store::write_stalls(&outcome.dir, &stalls).map(|()| stalls)
    });
    match found {
        Ok(stalls) => {
            if !stalls.windows.is_empty() {
                errln!("stalls: {}", stalls.line());
            }
        }
        Err(e) => errln!("warning: the stall windows could not be found: {e}"),
    }
    // `--json` prints its one object at the end (`run_status::json`), with the status.
    if !args.json {
        outln!("{}", crate::recorder::table(&outcome.summary));
        outln!("vs http measured under {}", plan.load_line());
        if let Some(w) = &plan.workload {
            outln!("{}", w.line());
        }
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
}

/// `run --repeat N` (and `--confirm K`): N runs with seeds seed … seed + N − 1 into one
/// set directory DIR/SET_ID/, then the gate; on a regression, K more sets of the candidate
/// that must all regress the same way.
async fn repeated(args: RunArgs) -> anyhow::Result<u8> {
    if args.sweep.is_some() {
        anyhow::bail!("--repeat/--confirm take a single scenario run; drop --sweep");
    }
    let input = plan_input(&args)?;
    let first = input.build()?;
    for w in &first.warnings {
        errln!("warning: {w}");
    }
    let base_seed = first.seed;
    let set = |tag: &str| -> PathBuf {
        let id = crate::store::run_id(
            &first.scenario_name,
            crate::clock::wall_now(),
            std::process::id() as u16,
        );
        args.out.join(format!("{id}-{tag}x{}", args.repeat))
    };
    let run_set = |dir: PathBuf| {
        let (args, input) = (&args, &input);
        async move {
            let mut any_failed = false;
            for i in 0..args.repeat {
                // The same inputs with this repeat's seed: no file is read again.
                let mut input = input.clone();
                input.overrides.seed = Some(base_seed.wrapping_add(u64::from(i)));
                let plan = Arc::new(input.build()?);
                errln!(
                    "repeat {}/{} (seed {}) into {}",
                    i + 1,
                    args.repeat,
                    plan.seed,
                    dir.display()
                );
                let outcome = runner::run(plan.clone(), &dir, options(args)).await?;
                finish_one(args, &plan, &outcome);
                let (failed, erring) = failures(args, &outcome);
                any_failed |= !failed.is_empty();
                let status = match (outcome.interrupted, failed.is_empty()) {
                    (true, _) => Status::Interrupted,
                    (false, false) => Status::FailedRequests,
                    (false, true) => Status::Ok,
                };
                if args.json {
                    let v =
                        run_status::json(&outcome.summary, &outcome.dir, status, &failed, &erring);
                    outln!("{}", serde_json::to_string_pretty(&v)?);
                }
                if outcome.interrupted {
                    return Ok::<_, anyhow::Error>((true, any_failed));
                }
            }
            Ok((false, any_failed))
        }
    };
    let dir = set("");
    let (interrupted, mut failed) = run_set(dir.clone()).await?;
    if interrupted {
        errln!("interrupted: every completed request was written; the run is marked interrupted");
        return Ok(EXIT_INTERRUPTED);
    }
    errln!("results: {}", dir.display());
    if let Some(name) = &args.save_baseline {
        save_baseline(&args, &dir, name, !failed)?;
    }
    // A repeat whose requests failed fails the set, whatever the gate says.
    let code = |gate: u8, failed: bool| if failed { EXIT_FAILED_REQUESTS } else { gate };
    let Some(name) = &args.baseline else {
        return Ok(code(EXIT_OK, failed));
    };
    let mut reruns: Vec<PathBuf> = Vec::new();
    loop {
        let c = crate::compare::gate_comparison(name, &dir, &reruns)?;
        if !c.fails() || reruns.len() as u32 >= args.confirm || c.counts().regressed == 0 {
            let verdict = crate::compare::render::text(&c);
            // With --json, stdout holds only the JSON objects.
            if args.json {
                errln!("{}", verdict.trim_end());
            } else {
                out!("{verdict}");
            }
            return Ok(code(crate::compare::exit_code(&c), failed));
        }
        let k = reruns.len() + 1;
        errln!(
            "the gate found a regression; confirming it: re-run {k}/{} of the candidate",
            args.confirm
        );
        let rerun = set(&format!("confirm{k}-"));
        let (interrupted, rerun_failed) = run_set(rerun.clone()).await?;
        if interrupted {
            return Ok(EXIT_INTERRUPTED);
        }
        failed |= rerun_failed;
        reruns.push(rerun);
    }
}

/// The runner's options from the command line: progress unless `--quiet`/`--json`,
/// `--realtime`, and this machine's calibration file for the harness section.
fn options(args: &RunArgs) -> Options {
    Options {
        progress: crate::progress::Mode::detect(args.quiet || args.json),
        realtime: args.realtime,
        calibration: crate::store::default_calibration_path(),
        announce: true,
        force_transports: args.force_transports,
        metrics: args
            .metrics_listen
            .clone()
            .map(|listen| runner::metrics_server::MetricsOptions {
                listen,
                linger: args.metrics_linger,
            }),
    }
}

/// `spark-bench run --sweep`: one run per load point, the sweep table and report.
async fn sweep(args: RunArgs, spec: plan::sweep::SweepSpec) -> anyhow::Result<u8> {
    if args.shard.is_some() {
        anyhow::bail!("--sweep and --shard cannot be combined: shard each point's plan instead (run --shard I/N once per load point)");
    }
    if args.save_baseline.is_some() || args.baseline.is_some() {
        anyhow::bail!("--sweep writes one run per load point; --save-baseline and --baseline take a single run (run `spark-bench compare` on a point's directory instead)");
    }
    let input = plan_input(&args)?;
    let base = input.build()?;
    for w in &base.warnings {
        errln!("warning: {w}");
    }
    let outcome = runner::sweep::run(&spec, &input, &base, &args.out, options(&args)).await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&outcome.summary)?);
    } else {
        outln!("{}", crate::recorder::sweep::sweep_table(&outcome.summary));
    }
    errln!("sweep: {}", outcome.dir.display());
    if !args.no_report {
        match crate::report::sweep::render_sweep(&outcome.dir) {
            Ok(paths) => {
                if let Some(html) = paths
                    .iter()
                    .find(|p| p.extension().is_some_and(|e| e == "html"))
                {
                    errln!("report: {}", html.display());
                }
            }
            Err(e) => errln!("warning: the sweep report could not be rendered: {e:#}"),
        }
    }
    if outcome.interrupted {
        return Ok(EXIT_INTERRUPTED);
    }
    Ok(EXIT_OK)
}

/// Reads the scenario and builds the plan with the command line's overrides.
pub fn load_plan(args: &RunArgs) -> anyhow::Result<Plan> {
    Ok(plan_input(args)?.build()?)
}

/// Reads the scenario (checking its `[gate]` table) and the `--targets` file once, with the
/// command line's overrides: what every plan of this run is built from (a sweep's points and
/// the repeats edit a copy in memory).
fn plan_input(args: &RunArgs) -> anyhow::Result<plan::PlanInput> {
    let loaded = crate::scenario::load(&args.scenario)?;
    check_gate_table(&loaded)?;
    let targets_file = args
        .targets_file
        .as_deref()
        .map(crate::scenario::load_targets)
        .transpose()?;
    let overrides = plan::Overrides {
        targets: args.targets.clone(),
        targets_file,
        url: url_target(args)?,
        transports: args.transports.clone(),
        seed: args.seed,
        link: args.link,
        load: args.load.clone(),
    };
    Ok(plan::PlanInput {
        scenario: Arc::new(loaded),
        overrides,
    })
}

/// `--url URL --model M [--api …] [--api-key-env VAR]` as one target (clap makes the other
/// three need --url); --url without --model takes the first model `GET URL/models` lists.
fn url_target(args: &RunArgs) -> anyhow::Result<Option<plan::targets::UrlTarget>> {
    let Some(url) = &args.url else {
        return Ok(None);
    };
    let model = match &args.model {
        Some(m) => m.clone(),
        None => super::url_model::first_model(url, args.api_key_env.as_deref())?,
    };
    Ok(Some(plan::targets::UrlTarget {
        url: url.clone(),
        model,
        api: args
            .api
            .unwrap_or(crate::vocab::ApiFlavour::ChatCompletions),
        api_key_env: args.api_key_env.clone(),
    }))
}

/// Checks the scenario's `[gate]` table before anything runs (`compare` would reject a bad
/// entry only after the whole run): each key must be a gate metric and each value a
/// threshold it can use. The error names the file, line, column and key, and the fix.
pub fn check_gate_table(loaded: &crate::scenario::LoadedScenario) -> anyhow::Result<()> {
    for (key, value) in &loaded.scenario.gate {
        let one = std::collections::BTreeMap::from([(key.clone(), value.clone())]);
        if let Err(e) = crate::compare::Thresholds::parse_gate(&one, &loaded.path) {
            let (line, col) =
                crate::scenario::locate(&loaded.source, Some("[gate]"), 1, key).unwrap_or((1, 1));
            anyhow::bail!(
                "[gate] key `{key}` = {value:?} at {}:{line}:{col}: {}; the [gate] table takes \
                 gate metrics (`spark-bench compare --help` lists them) with a worsening each, \
                 e.g. ttft = \"+10%\" or overhead = \"+5ms\"",
                loaded.path,
                e.message
            );
        }
    }
    Ok(())
}

/// Checks `--save-baseline NAME` (a safe name) and `--baseline NAME` (an existing baseline or
/// run) before the run, not after it.
fn check_baseline_names(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(name) = &args.save_baseline {
        crate::store::check_name("baseline", name)?;
    }
    if let Some(name) = &args.baseline {
        crate::compare::find_baseline_under(std::path::Path::new(name), &args.out)?;
    }
    Ok(())
}
