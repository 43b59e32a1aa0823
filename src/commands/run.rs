//! `spark-bench run`: scenario → plan → (embedded simulators) → driver → recorder + store →
//! table, report, baseline.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::{mpsc, watch};

use crate::cli::RunArgs;
use crate::clock::Clock;
use crate::driver::{self, Endpoint, Event, Stop};
use crate::link::Link;
use crate::plan::{self, Plan};
use crate::recorder::{LiveStats, Recorder};
use crate::sim;
use crate::store::{RunStatus, RunWriter};
use crate::transport::proxy::{self, Proxy};
use crate::transport::Trust;

use super::{EXIT_INTERRUPTED, EXIT_OK};

/// The link emulated on the client side when the scenario and `--link` say nothing and the
/// target is the embedded simulator: a typical developer-to-cloud round trip.
pub const DEFAULT_SIM_LINK: &str = "rtt=40ms";

/// How often the incremental CSV files are flushed even when few rows arrived.
const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Executes `spark-bench run`; returns the exit code.
pub async fn execute(args: RunArgs) -> anyhow::Result<u8> {
    let plan = Arc::new(load_plan(&args)?);
    for w in &plan.warnings {
        errln!("warning: {w}");
    }
    if args.realtime {
        if let Err(why) = crate::priority::raise_emulator_threads() {
            errln!("warning: --realtime: {why}");
        }
    }
    let outcome = run_plan(plan.clone(), &args.out, ProgressChoice::from_args(&args)).await?;

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

/// How to show progress.
#[derive(Debug, Clone, Copy)]
pub struct ProgressChoice(pub crate::progress::Mode);

impl ProgressChoice {
    fn from_args(args: &RunArgs) -> Self {
        ProgressChoice(crate::progress::Mode::detect(args.quiet || args.json))
    }
}

/// What a finished (or interrupted) run left behind.
pub struct RunOutcome {
    /// The results directory.
    pub dir: std::path::PathBuf,
    /// The summary written to `summary.json`.
    pub summary: crate::recorder::Summary,
    /// True when Ctrl-C stopped the run.
    pub interrupted: bool,
}

/// Runs a plan end to end: starts embedded simulators for simulator targets (one per cell,
/// so cells cannot disturb each other), drives every cell, records and writes the results.
/// The plan's link applies to simulator targets, and to real endpoints only when it came
/// from `--link`.
pub async fn run_plan(
    plan: Arc<Plan>,
    out: &Path,
    progress: ProgressChoice,
) -> anyhow::Result<RunOutcome> {
    // Configuration the plan cannot check (it reads no environment): fail before any
    // results directory or request exists.
    for cell in &plan.cells {
        crate::backend::request::check_target(&cell.target)?;
    }
    // A new key for the cold-cache salts of this run, so a run with the same seed does not
    // resend an earlier run's salts (the manifest's plan keeps it).
    let plan = if plan.load.salt_key == 0 {
        let mut p = (*plan).clone();
        p.load.salt_key = fresh_salt_key();
        Arc::new(p)
    } else {
        plan
    };
    // Trust and proxy of every real endpoint, checked before any request: certificate
    // files are read once per target, and the environment's proxy variables are read here
    // and nowhere else (the library takes the resolved proxy).
    let mut reach: std::collections::BTreeMap<&str, (Trust, Option<Proxy>)> = Default::default();
    for cell in &plan.cells {
        let t = &cell.target;
        let Some(url) = &t.base_url else { continue };
        if reach.contains_key(t.name.as_str()) {
            continue;
        }
        let trust = endpoint_trust(t)?;
        let endpoint = crate::transport::Endpoint::parse(url)?;
        let proxy = proxy::choose(t.net.proxy.as_deref(), &endpoint, |name| {
            std::env::var(name).ok()
        })
        .map_err(|why| anyhow::anyhow!("target {}: {why}", t.name))?;
        let custom = t.net.ca_file.is_some() || t.net.client_cert.is_some();
        if let Trust::Endpoint(e) = &trust {
            if custom {
                errln!("target {}: trusting {}", t.name, e.describe());
            }
            for note in e.notes() {
                errln!("warning: target {}: {note}", t.name);
            }
        }
        if let Some(p) = &proxy {
            errln!(
                "target {}: through proxy {} (HTTP CONNECT)",
                t.name,
                p.url()
            );
        }
        reach.insert(t.name.as_str(), (trust, proxy));
    }
    let mut sims = Vec::new();
    let mut endpoints = Vec::new();
    for (i, cell) in plan.cells.iter().enumerate() {
        match (&cell.target.base_url, &cell.target.sim_profile) {
            (Some(url), _) => {
                let (trust, proxy) = reach[cell.target.name.as_str()].clone();
                endpoints.push(Endpoint {
                    base_url: url.clone(),
                    trust,
                    link: if plan.link_for_real_targets {
                        plan.link
                    } else {
                        Link::default()
                    },
                    proxy,
                })
            }
            (None, Some(profile_name)) => {
                let profile = sim::Profile::builtin(profile_name).with_context(|| {
                    format!(
                        "target {}: unknown simulator profile {profile_name:?} (known: {})",
                        cell.target.name,
                        sim::Profile::builtin_names().join(", ")
                    )
                })?;
                let mut cfg = sim::SimConfig::new(profile);
                // One seed per target, not per cell: every transport of a target gets the same
                // answers to the same conversation, so only the transport differs.
                let target_index = plan
                    .cells
                    .iter()
                    .position(|c| c.target.name == cell.target.name)
                    .unwrap_or(i);
                cfg.seed =
                    crate::rng::Rng::derive(plan.seed, 1000 + target_index as u64).next_u64();
                let cert = crate::tls::SelfSigned::generate()?;
                cfg.tls = Some(cert.clone());
                let handle = sim::spawn(cfg).await?;
                endpoints.push(Endpoint {
                    base_url: handle.base_url.clone(),
                    trust: Trust::Sim(cert),
                    link: plan.link,
                    proxy: None,
                });
                sims.push(handle);
            }
            (None, None) => anyhow::bail!(
                "target {} has neither base_url nor sim_profile; set one in [targets.{}]",
                cell.target.name,
                cell.target.name
            ),
        }
    }

    let command_line: Vec<String> = std::env::args().collect();
    let mut writer = RunWriter::create(out, &plan, &command_line)?;
    for (name, (trust, proxy)) in &reach {
        let plain = plan.cells.iter().any(|c| {
            c.target.name == *name
                && c.target
                    .base_url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("http://"))
        });
        let trusted = match trust {
            _ if plain => "none (plain http)".to_string(),
            Trust::Endpoint(e) => e.describe().to_string(),
            _ => "the simulator's certificate".to_string(),
        };
        let via = proxy.as_ref().map_or("direct".to_string(), |p| p.url());
        writer.set_network(name, format!("trust: {trusted}; proxy: {via}"));
    }
    let dir = writer.dir().to_path_buf();
    errln!(
        "spark-bench: {} × {} cells, {} sessions each, link {}; {}; writing {}",
        plan.scenario_name,
        plan.cells.len(),
        plan.load.sessions,
        plan.link,
        plan.load_line(),
        dir.display()
    );

    let clock = Clock::start();
    let stop = Stop::default();
    let ctrl_c = tokio::spawn(watch_ctrl_c(stop.clone()));

    let (tx, mut rx) = mpsc::channel::<Event>(4096);
    let (live_tx, live_rx) = watch::channel((0u64, LiveStats::default()));
    let total_sessions: u64 = (0..plan.cells.len())
        .map(|i| plan.sessions_of_cell(i) as u64)
        .sum();
    let progress_task = tokio::spawn(crate::progress::show(progress.0, total_sessions, live_rx));

    // The recorder task owns the measurements and the incremental files.
    let recorder_task = tokio::spawn(async move {
        let mut recorder = Recorder::new();
        let mut sessions_done = 0u64;
        let mut write_error: Option<anyhow::Error> = None;
        // Rows also reach the files at least once a second, so a killed run loses at most
        // the last second (plus what the OS had not written).
        let mut flush_tick = tokio::time::interval(FLUSH_INTERVAL);
        flush_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                event = rx.recv() => match event {
                    Some(event) => event,
                    None => break,
                },
                _ = flush_tick.tick() => {
                    if let Err(e) = writer.flush() {
                        write_error.get_or_insert(e.into());
                    }
                    continue;
                }
            };
            let written = match &event {
                Event::Request(r) => {
                    recorder.add_request(r);
                    writer.write_request(r)
                }
                Event::Session(s) => {
                    sessions_done += 1;
                    recorder.add_session(s);
                    writer.write_session(s)
                }
            };
            if let Err(e) = written {
                write_error.get_or_insert(e.into());
            }
            let _ = live_tx.send((sessions_done, recorder.live()));
        }
        (writer, recorder, write_error)
    });

    let driven = driver::run(plan.clone(), endpoints, clock, stop.clone(), tx).await;
    let (mut writer, recorder, write_error) = recorder_task
        .await
        .map_err(|e| anyhow::anyhow!("the recorder task failed: {e}"))?;
    let _ = progress_task.await;
    ctrl_c.abort();
    for s in sims {
        s.shutdown().await;
    }

    let interrupted = stop.dispatch.is_cancelled();
    let status = match (&driven, interrupted) {
        (Err(_), _) => RunStatus::Failed,
        (Ok(()), true) => RunStatus::Interrupted,
        (Ok(()), false) => RunStatus::Complete,
    };
    let summary = crate::recorder::Summary::from_recorder(&recorder);
    let mut how = crate::clock::rx::stamp_source();
    if let Some(frames) = crate::clock::byteclock::frame_source() {
        how.push_str("; ");
        how.push_str(&frames);
    }
    if crate::priority::emulator_realtime() {
        how.push_str("; link emulator at real-time priority");
    }
    writer.set_timestamps(how);
    for w in crate::recorder::cold_cache_warnings(&plan, &summary) {
        errln!("warning: {w}");
    }
    writer.finish(status, &recorder)?;
    driven?;
    if let Some(e) = write_error {
        return Err(e.context("writing the results"));
    }
    Ok(RunOutcome {
        dir,
        summary,
        interrupted,
    })
}

/// A salt key that differs from run to run (time, process id and a counter, mixed).
fn fresh_salt_key() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let key = crate::rng::Rng::derive(nanos ^ (u64::from(std::process::id()) << 32), n).next_u64();
    key.max(1)
}

/// What a real endpoint's TLS client trusts and presents: the system's store, the bundled
/// roots, the target's `ca_file` and client certificate. Errors name the target, the key
/// and the file.
fn endpoint_trust(t: &plan::Target) -> anyhow::Result<Trust> {
    use crate::tls::{EndpointTrust, NamedFile};
    fn named<'a>(key: &'static str, p: &'a Option<std::path::PathBuf>) -> Option<NamedFile<'a>> {
        p.as_deref().map(|path| NamedFile { key, path })
    }
    let ca = named("ca_file", &t.net.ca_file);
    let client =
        named("client_cert", &t.net.client_cert).zip(named("client_key", &t.net.client_key));
    let trust =
        EndpointTrust::load(ca, client).map_err(|e| anyhow::anyhow!("target {}: {e:#}", t.name))?;
    Ok(Trust::Endpoint(Arc::new(trust)))
}

/// First Ctrl-C: stop sending new requests and give in-flight ones 2 s to finish.
/// Second Ctrl-C: cancel in-flight requests at once.
async fn watch_ctrl_c(stop: Stop) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    errln!("\ninterrupt: stopping; in-flight requests get 2 s (Ctrl-C again to cut them off)");
    stop.dispatch.cancel();
    let inflight = stop.inflight.clone();
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    inflight.cancel();
}
