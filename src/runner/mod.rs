//! Executes a plan: the embedded simulators' lifecycle, the driver, the recorder task, the
//! results files, and the run's provenance.
//!
//! Owns: one run end to end. It checks what the plan cannot (endpoint configuration, trust,
//! proxies), starts a simulator per simulator cell ([`targets`]), creates the run's link
//! emulator and provenance counters (handed down to every connection, so two runs in one
//! process keep their own counts), probes each real target's transports ([`probes`]),
//! drives the cells, records and writes the results
//! ([`recorder_task`]), stops the simulators, and returns what it did as a [`RunOutcome`] value,
//! provenance included. What a run can hold open: [`resources`] (the open-file limit,
//! memory) and [`fd_budget`] (whether a plan's connections fit in that limit). The run's
//! `metrics.om` and its live `/metrics` endpoint: [`metrics_server`].
//! Does not own: command-line handling and printing the results (`commands::run`), the
//! plan (`plan`), the measurements (`driver`, `transport`), the file layout (`store`).

use std::path::Path;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::clock::Clock;
use crate::driver::{self, Event, Stop};
use crate::link::Emulator;
use crate::plan::Plan;
use crate::provenance::{Counters, Provenance};
use crate::recorder::harness::{Harness, Thresholds, Verdict};
use crate::recorder::LiveStats;
use crate::store::{RunStatus, RunWriter};

pub mod calibrate;
pub mod fd_budget;
pub mod metrics_server;
pub mod probes;
pub mod recorder_task;
pub mod resources;
pub mod sweep;
pub mod targets;

/// How to run a plan, beyond the plan itself.
#[derive(Debug, Clone)]
pub struct Options {
    /// How to show progress.
    pub progress: crate::progress::Mode,
    /// Ask for real-time priority for the link emulator's threads (`--realtime`).
    pub realtime: bool,
    /// The calibration file whose ingest ceiling the run's `harness` section compares its
    /// chunk rate with (`spark-bench calibrate` writes it); `None`: the run says "not
    /// calibrated".
    pub calibration: Option<std::path::PathBuf>,
    /// Print the run's header line and its harness warning on stderr (off inside
    /// `spark-bench calibrate`, which reports its runs itself).
    pub announce: bool,
    /// Run the cells whose server the transport probe found not to speak their transport
    /// (`--force-transports`), recording their failed requests as `unsupported-transport`,
    /// instead of skipping them (see [`probes`]).
    pub force_transports: bool,
    /// Serve the live measurements at `/metrics` (`--metrics-listen`, see [`metrics_server`]).
    pub metrics: Option<metrics_server::MetricsOptions>,
}

impl Options {
    /// No progress display, normal scheduling: for runs inside tests and tools.
    pub fn quiet() -> Self {
        Options {
            progress: crate::progress::Mode::Quiet,
            realtime: false,
            calibration: None,
            announce: true,
            force_transports: false,
            metrics: None,
        }
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
    /// How this run's timestamps were taken (the manifest's `timestamps` line says it in
    /// words).
    pub provenance: Provenance,
}

/// Runs a plan end to end: starts embedded simulators for simulator targets (one per cell,
/// so cells cannot disturb each other), drives every cell, records and writes the results.
/// The plan's link applies to simulator targets, and to real endpoints only when it came
/// from `--link`.
pub async fn run(plan: Arc<Plan>, out: &Path, options: Options) -> anyhow::Result<RunOutcome> {
    // This run's counts of how its timestamps were taken; only its own connections and
    // emulator threads add to them.
    let counters = Arc::new(Counters::default());
    // Every session holds a descriptor: raise the open-file limit before any is opened.
    let fd_limit = resources::raise_nofile();
    if options.realtime {
        match crate::priority::raise_emulator_threads() {
            Ok(_) => counters.realtime_granted(),
            Err(why) => errln!("warning: --realtime: {why}"),
        }
    }
    let plan = checked_and_salted(plan)?;
    let reach = targets::reach(&plan)?;
    // Each real target × transport asked once: cells on a transport the server does not
    // speak are skipped (or forced), before any results directory exists.
    let probed = probes::probe(&plan, &reach).await?;
    let (kept, forced) = probed.apply(&plan, options.force_transports)?;
    let metrics = metrics_server::start(options.metrics.as_ref()).await?;
    let (endpoints, sims) = targets::endpoints(&kept, &reach).await?;
    let plan = kept;

    let command_line: Vec<String> = std::env::args().collect();
    let mut writer = RunWriter::create(out, &plan, &command_line)?;
    writer.set_transport_probes(probed.records);
    for (name, how) in targets::network_notes(&plan, &reach) {
        writer.set_network(&name, how);
    }
    let dir = writer.dir().to_path_buf();
    if options.announce {
        announce(&plan, fd_limit, &dir);
    }
    let feed = metrics.as_ref().map(|m| {
        errln!("metrics: http://{}/metrics", m.addr());
        m.feed(metrics_server::run_info(&dir, &plan.scenario_name))
    });

    let emulator = Arc::new(Emulator::new(counters.clone()));
    let clock = Clock::start();
    writer.set_clock(clock.anchor());
    let stop = Stop::default();
    let ctrl_c = tokio::spawn(watch_ctrl_c(stop.clone()));

    let (tx, rx) = mpsc::channel::<Event>(4096);
    let (live_tx, live_rx) = watch::channel((0u64, LiveStats::default()));
    let total_sessions: u64 = (0..plan.cells.len())
        .map(|i| plan.sessions_of_cell(i) as u64)
        .sum();
    let progress_task = tokio::spawn(crate::progress::show(
        options.progress,
        total_sessions,
        live_rx,
    ));

    // The recorder task owns the measurements and the incremental files.
    let recorder = recorder_task::recorder(&plan)?;
    let recorder_task = recorder_task::spawn(recorder, writer, rx, live_tx, forced, feed);
    // The harness watching itself: timer lateness and CPU use while the driver runs.
    let probe = crate::clock::selfwatch::Probe::start();
    let (rss_before_kib, _) = resources::rss_kib();

    let sessions = Arc::new(driver::SessionGauge::default());
    let driven = driver::run(
        plan.clone(),
        endpoints,
        emulator.clone(),
        clock,
        stop.clone(),
        tx,
        sessions.clone(),
    )
    .await;
    let (mut writer, mut recorder, write_error) = recorder_task
        .await
        .map_err(|e| anyhow::anyhow!("the recorder task failed: {e}"))?;
    let probe = probe.finish();
    let _ = progress_task.await;
    ctrl_c.abort();
    for s in sims {
        s.shutdown().await;
    }

    let interrupted = stop.dispatch.is_cancelled();
    let status = match (&driven, interrupted) {
        (Err(_), _) => RunStatus::Failed,
        // Rows could not be written (a full disk): the files are short, the run failed.
        _ if write_error.is_some() => RunStatus::Failed,
        (Ok(_), true) => RunStatus::Interrupted,
        (Ok(_), false) => RunStatus::Complete,
    };
    for n in driven.iter().flatten() {
        recorder.note_connections(&n.target, n.transport.as_str(), &n.note);
    }
    let mut summary = crate::recorder::Summary::from_recorder(&recorder);
    let provenance = counters.snapshot();
    let mut harness = harness_section(&recorder, &probe, options.calibration.as_deref());
    harness.reads = Some(provenance.reads);
    warn(&plan, &summary, &harness, options.announce);
    writer.set_resources(resources_used(fd_limit, sessions.peak(), rss_before_kib));
    summary.harness = Some(harness);
    writer.set_timestamps(provenance.timestamps());
    writer.finish(status, &recorder, &summary)?;
    metrics_server::finish(metrics, &dir, &recorder, &plan.scenario_name).await;
    // The windows from the recorder's bounded detector; late dispatches from the rows.
    if let Err(e) = crate::store::write_run_stalls(&dir, recorder.stalls()) {
        errln!("warning: stalls.json could not be written: {e}");
    }
    driven?;
    if let Some(e) = write_error {
        return Err(e.context("writing the results"));
    }
    Ok(RunOutcome {
        dir,
        summary,
        interrupted,
        provenance,
    })
}

/// The run's warnings on stderr: a harness that could not keep up (when the run announces
/// itself), a cold cache that was not cold, a stream that arrived in bursts.
fn warn(plan: &Plan, summary: &crate::recorder::Summary, harness: &Harness, announce: bool) {
    if harness.verdict == Verdict::HarnessBound && announce {
        errln!(
            "warning: the harness could not keep up with this load, so these figures may be the harness's, not the target's: {}",
            harness.reasons.join("; ")
        );
    }
    let buffering = crate::recorder::buffering::warnings(summary);
    for w in crate::recorder::cold_cache_warnings(plan, summary)
        .into_iter()
        .chain(buffering)
    {
        errln!("warning: {w}");
    }
}

/// Configuration the plan cannot check (it reads no environment), checked before any
/// results directory or request exists; then the plan with a new key for the cold-cache
/// salts of this run, so a run with the same seed does not resend an earlier run's salts
/// (the manifest's plan keeps it).
fn checked_and_salted(plan: Arc<Plan>) -> anyhow::Result<Arc<Plan>> {
    for cell in &plan.cells {
        crate::backend::request::check_target(&cell.target)?;
    }
    Ok(with_salt_key(plan))
}

/// The plan with a fresh key for its cold-cache salts when it has none, so a run with the
/// same seed does not resend an earlier run's salts (the manifest's plan keeps it).
fn with_salt_key(plan: Arc<Plan>) -> Arc<Plan> {
    if plan.load.salt_key == 0 {
        let mut p = (*plan).clone();
        p.load.salt_key = fresh_salt_key();
        Arc::new(p)
    } else {
        plan
    }
}

/// The run's header lines on stderr: the shard (when it is one) and the plan's shape.
fn announce(plan: &Plan, fd_limit: resources::FdLimit, dir: &Path) {
    if let Some(s) = &plan.shard {
        errln!(
            "spark-bench: shard {}/{} of plan {}: {} of its {} measured sessions per cell; open files {} (was {})",
            s.index,
            s.count,
            s.plan_hash,
            plan.load.sessions,
            s.plan_sessions,
            fd_limit.granted,
            fd_limit.before
        );
    }
    errln!(
        "spark-bench: {} × {} cells, {} sessions each, link {}; {}; writing {}",
        plan.scenario_name,
        plan.cells.len(),
        plan.load.sessions,
        plan.link_line(),
        plan.load_line(),
        dir.display()
    );
}

/// The manifest's `resources` section: the open-file limit, peak sessions (the driver's
/// count), and resident memory before the driver and at the peak (per session when any ran).
fn resources_used(
    fd_limit: resources::FdLimit,
    peak_sessions: u64,
    rss_before_kib: u64,
) -> crate::store::Resources {
    let (_, rss_peak_kib) = resources::rss_kib();
    crate::store::Resources {
        nofile_before: fd_limit.before,
        nofile_granted: fd_limit.granted,
        nofile_hard: fd_limit.hard,
        peak_sessions,
        rss_before_kib,
        rss_peak_kib,
        kib_per_session: if peak_sessions > 0 {
            Some(rss_peak_kib.saturating_sub(rss_before_kib) as f64 / peak_sessions as f64)
        } else {
            None
        },
    }
}

/// The run's `harness` section: its records' send times, the probe's figures and the
/// calibrated ingest ceiling (a calibration file that cannot be read is a warning, and
/// the run is "not calibrated").
fn harness_section(
    recorder: &crate::recorder::Recorder,
    probe: &crate::clock::selfwatch::ProbeReport,
    calibration: Option<&Path>,
) -> Harness {
    let ceiling = calibration.and_then(|path| match crate::store::load_calibration(path) {
        Ok(c) => c.map(|c| c.ceiling()),
        Err(e) => {
            errln!("warning: ignoring the calibration: {e}; run `spark-bench calibrate` again");
            None
        }
    });
    Harness::judge(
        recorder.dispatch(),
        Some(probe),
        ceiling,
        Thresholds::DEFAULT,
    )
}

/// A salt key that differs from run to run (time, process id and a counter, mixed).
fn fresh_salt_key() -> u64 {
    // Not run state: only makes two keys drawn in the same nanosecond differ.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = crate::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let key = crate::rng::Rng::derive(nanos ^ (u64::from(std::process::id()) << 32), n).next_u64();
    key.max(1)
}

/// First Ctrl-C (or SIGTERM, which `timeout`, `kill`, systemd and CI runners send): stop
/// sending new requests and give in-flight ones 2 s to finish. A second one: cancel in-flight
/// requests at once. Either way every completed request is written, the manifest says
/// `interrupted` and the exit code is 130.
async fn watch_ctrl_c(stop: Stop) {
    let mut signals = Interrupts::new();
    let which = signals.next().await;
    errln!("\n{which}: stopping; in-flight requests get 2 s (Ctrl-C again to cut them off)");
    stop.dispatch.cancel();
    let inflight = stop.inflight.clone();
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        _ = signals.next() => {}
    }
    inflight.cancel();
}

/// SIGINT and SIGTERM as one stream.
struct Interrupts {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    fn new() -> Interrupts {
        Interrupts {
            #[cfg(unix)]
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok(),
        }
    }

    /// Waits for the next interrupt; names it.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        if let Some(term) = self.term.as_mut() {
            return tokio::select! {
                r = tokio::signal::ctrl_c() => if r.is_ok() { "interrupt" } else { std::future::pending().await },
                _ = term.recv() => "terminated (SIGTERM)",
            };
        }
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        "interrupt"
    }
}
