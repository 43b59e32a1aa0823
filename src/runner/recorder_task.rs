//! The run's recorder task: the one owner of the measurements and the incremental files
//! while the driver runs.
//!
//! Owns: the run's empty [`Recorder`] (its SLOs and expected write groups), folding each
//! driver event into it and the results files (a forced unsupported cell's failed requests
//! relabelled first, see [`super::probes::Forced`]), flushing
//! them at least once a second, and the live figures the progress display shows (published
//! at most every [`LIVE_EVERY`] and once at the end: they merge every cell's TTFT histogram,
//! which per request cost more than the request's own chunks), and the measurements the
//! `/metrics` endpoint serves (published with each flush).
//! Does not own: the final summary and manifest (the run writes them when the task ends).

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::driver::Event;
use crate::recorder::{LiveStats, Recorder};
use crate::store::RunWriter;

/// How often the incremental CSV files are flushed even when few rows arrived.
const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// How often, at most, the live figures are recomputed and published (the progress bar
/// draws 8 times a second; the line display every 5 s).
pub const LIVE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// What the task hands back when the driver's events end: the writer, the recorder, and
/// the first error writing the files, if any.
pub type Recorded = (RunWriter, Recorder, Option<anyhow::Error>);

/// The run's empty recorder: goodput against the plan's `[slo]`, and the buffering check told
/// which simulator targets write several chunks at once by design.
pub fn recorder(plan: &crate::plan::Plan) -> anyhow::Result<Recorder> {
    let mut recorder = Recorder::with_slo(plan.slo);
    for (target, group) in super::targets::write_groups(plan)? {
        recorder.expect_write_groups(&target, group);
    }
    Ok(recorder)
}

/// Starts the task: it folds events from `rx` into `recorder` (empty, configured by the run)
/// until every sender is gone, and sends (sessions done, live figures) to `live_tx`: at most
/// every [`LIVE_EVERY`] while events arrive, at the next flush tick after a quiet spell, and
/// once more, final, when the events end; publishes the measurements to `feed`
/// (`--metrics-listen`) with each flush, once a second.
pub fn spawn(
    mut recorder: Recorder,
    mut writer: RunWriter,
    mut rx: mpsc::Receiver<Event>,
    live_tx: watch::Sender<(u64, LiveStats)>,
    forced: super::probes::Forced,
    feed: Option<super::metrics_server::Feed>,
) -> JoinHandle<Recorded> {
    tokio::spawn(async move {
        let mut sessions_done = 0u64;
        let mut write_error: Option<anyhow::Error> = None;
        // Rows also reach the files at least once a second, so a killed run loses at most
        // the last second (plus what the OS had not written).
        let mut flush_tick = tokio::time::interval(FLUSH_INTERVAL);
        flush_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut live_at = crate::clock::now();
        let mut unpublished = false;
        let publish = |done: u64, recorder: &Recorder| {
            let _ = live_tx.send((done, recorder.live()));
        };
        loop {
            let mut event = tokio::select! {
                event = rx.recv() => match event {
                    Some(event) => event,
                    None => break,
                },
                _ = flush_tick.tick() => {
                    if let Err(e) = writer.flush() {
                        write_error.get_or_insert(e.into());
                    }
                    if let Some(feed) = &feed {
                        feed.publish(&recorder);
                    }
                    if std::mem::take(&mut unpublished) {
                        publish(sessions_done, &recorder);
                        live_at = crate::clock::now();
                    }
                    continue;
                }
            };
            let written = match &mut event {
                Event::Request(r) => {
                    forced.relabel(r);
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
            if crate::clock::since(live_at) >= LIVE_EVERY {
                publish(sessions_done, &recorder);
                live_at = crate::clock::now();
                unpublished = false;
            } else {
                unpublished = true;
            }
        }
        publish(sessions_done, &recorder);
        (writer, recorder, write_error)
    })
}
