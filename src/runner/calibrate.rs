//! `spark-bench calibrate`: this machine's ceiling, measured against the embedded simulator.
//!
//! Owns: the two ramps, their sizes, and the rules that say whether each found a ceiling.
//! * **Ingest ramp**: [`INGEST_STREAMS`] streams from one simulator (TLS, HTTP/1.1
//!   keep-alive, no link, in this process) of one-token chunks, eight per write, through
//!   spark-bench's real client path (transport → framing → decoder → `exchange` record, as
//!   `cargo bench --bench ingest` does), at the plan's offered rates, rising (doubling). A
//!   step *holds* when at least [`INGEST_HELD_SHARE`] of the offered chunks per second
//!   arrived (with every stream active) and the median arrival lag (arrival stamp − the
//!   simulator's write, the kernel's transmit stamp where the socket gives one) stayed
//!   under [`INGEST_LAG_P50_MS`]. The first step that does not hold ends the ramp
//!   ([`ingest_finding`]): when the simulator wrote under [`INGEST_HELD_SHARE`] of the
//!   offered rate while what it wrote arrived promptly (lag within the limit), the
//!   simulator ran out first (`simulator-bound`, a lower bound); otherwise the harness fell
//!   behind (chunks queued in the socket, or arrived short while the simulator kept pace):
//!   the ceiling is **found**, the most chunks per second received at any step. Every step
//!   held: `not reached at` the top received rate (a lower bound). The stamp error is then
//!   measured at `ACCURACY_SHARE` of that rate.
//! * **Rate ramp**: short open-loop runs (`runner::run`, the real driver, Poisson session
//!   arrivals, one one-turn request per session, four output tokens, the `fast` simulator
//!   profile, no link) at rising rates, each judged by the run's own `harness` section;
//!   a rate holds when its driver lag p99 and achieved rate stayed within
//!   [`Thresholds::DEFAULT`] ([`point_ok`]). A rate that fails is tried once more (one late
//!   burst on a shared machine); the ramp stops at the first rate that fails twice
//!   ([`rate_finding`]): found (the highest rate that held, with the first that failed),
//!   not reached (every rate held: a lower bound), or below the first rate (it failed:
//!   an upper bound, never "a ceiling of 0").
//!
//! Does not own: the file (`store::calibration`), the verdict (`recorder::harness`),
//! printing (`commands::calibrate`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::driver::exchange::{exchange, Connector, Conversation, RecordMeta, RequestSpec};
use crate::recorder::harness::Thresholds;
use crate::store::{Calibration, Finding, Host, IngestStep, RampPoint, Reach};
use crate::transport::Trust;
use crate::vocab::{ApiFlavour, RequestRecord, TransportKind};

/// Concurrent streams in the ingest phase.
pub const INGEST_STREAMS: u32 = 16;
/// The top of the default ingest ramp, per stream (16 × 100,000 = 1.6 M chunks/s in all: a
/// release build on a quiet 2-core VM took 160,000–400,000).
pub const INGEST_RATE_PER_STREAM: f64 = 100_000.0;
/// A step holds when at least this share of the offered chunks per second arrived.
pub const INGEST_HELD_SHARE: f64 = 0.9;
/// … and the median arrival lag stayed under this (a queue in the socket shows here), ms.
pub const INGEST_LAG_P50_MS: f64 = 5.0;
/// Chunks the simulator writes at once in the ingest phase (each still its own event).
const INGEST_CHUNKS_PER_WRITE: u32 = 8;
/// The stamp error is measured at this share of the measured ingest ceiling.
const ACCURACY_SHARE: f64 = 0.25;

/// How long and how far to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `--quick`.
    pub quick: bool,
    /// Offered chunk rates of the ingest ramp, chunks/s in all, rising.
    pub ingest_rates: Vec<f64>,
    /// Seconds of streaming each ingest step is sized for (at its offered rate).
    pub ingest_s: f64,
    /// Seconds of streaming the stamp-error pass is sized for.
    pub accuracy_s: f64,
    /// Requested rates of the ramp, req/s, rising.
    pub rates: Vec<f64>,
    /// Seconds of arrivals per ramp point.
    pub point_s: f64,
}

/// `from`, doubling, up to the top of the ingest ramp.
fn doubling(from: f64) -> Vec<f64> {
    let top = INGEST_RATE_PER_STREAM * f64::from(INGEST_STREAMS);
    std::iter::successors(Some(from), |r| Some(r * 2.0))
        .take_while(|r| *r <= top)
        .collect()
}

impl Plan {
    /// The default (about 25 s) or `--quick` (about 10 s) calibration.
    pub fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                quick,
                ingest_rates: doubling(50_000.0),
                ingest_s: 0.5,
                accuracy_s: 1.0,
                rates: vec![100.0, 300.0, 1000.0, 2000.0],
                point_s: 1.0,
            }
        } else {
            Plan {
                quick,
                ingest_rates: doubling(25_000.0),
                ingest_s: 1.0,
                accuracy_s: 3.0,
                rates: vec![100.0, 250.0, 500.0, 1000.0, 2000.0, 3000.0, 5000.0],
                point_s: 2.0,
            }
        }
    }
}

/// Runs the calibration; `say` gets one line per finished step.
pub async fn calibrate(plan: &Plan, say: &mut dyn FnMut(&str)) -> anyhow::Result<Calibration> {
    let started = crate::clock::now();
    let (steps, ingest_chunks, cpu_cores) = ingest_ramp(plan, say).await?;
    let ingest = ingest_finding(&steps);
    say(&format!("ingest ceiling {}", ingest.describe("chunks/s")));
    // The stamp error at a load the harness keeps up with: a quarter of the ceiling (at
    // the ceiling, chunks queue in the socket and every stamp is late by the queue).
    let accuracy_rate = ingest.bound * ACCURACY_SHARE / f64::from(INGEST_STREAMS);
    let accuracy = stream(accuracy_rate.max(1.0), plan.accuracy_s).await?;
    say(&format!(
        "stamp error at {:.0} chunks/s ({:.0}% of the ingest figure): p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        accuracy.chunks_s,
        ACCURACY_SHARE * 100.0,
        accuracy.p50_us,
        accuracy.p99_us,
        accuracy.max_us
    ));
    let scratch = std::env::temp_dir().join(format!(
        "spark-bench-calibrate-{}-{}",
        std::process::id(),
        crate::clock::wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let ramp = ramp(plan, &scratch, say).await;
    let _ = std::fs::remove_dir_all(&scratch);
    let ramp = ramp?;
    let request_rate = rate_finding(&ramp);
    say(&format!(
        "request-rate ceiling {}",
        request_rate.describe("req/s")
    ));
    let max_request_rate = ramp
        .iter()
        .filter(|p| point_ok(p))
        .map(|p| p.requested)
        .fold(0.0, f64::max);
    Ok(Calibration {
        measured_at: crate::store::rfc3339(crate::clock::wall_now()),
        host: Host::current(),
        quick: plan.quick,
        ingest_chunks_s: ingest.bound,
        ingest,
        ingest_ramp: steps,
        ingest_chunks,
        ingest_streams: INGEST_STREAMS,
        ingest_cpu_cores: cpu_cores,
        stamp_error_rate: accuracy.chunks_s,
        stamp_error_p50_us: accuracy.p50_us,
        stamp_error_p99_us: accuracy.p99_us,
        stamp_error_max_us: accuracy.max_us,
        max_request_rate,
        request_rate,
        ramp,
        took_s: crate::clock::since(started).as_secs_f64(),
    })
}

/// The ingest steps up to the first that did not hold, the chunks received in all, and
/// the process's CPU use at the last step.
async fn ingest_ramp(
    plan: &Plan,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<(Vec<IngestStep>, u64, Option<f64>)> {
    let (mut steps, mut chunks, mut cpu) = (Vec::new(), 0, None);
    for &offered in &plan.ingest_rates {
        let i = stream(offered / f64::from(INGEST_STREAMS), plan.ingest_s).await?;
        let step = IngestStep {
            offered,
            received: i.chunks_s,
            written: i.written_s,
            lag_p50_us: i.p50_us,
            lag_p99_us: i.p99_us,
            cpu_cores: i.cpu_cores,
        };
        let held = step_held(&step);
        say(&format!(
            "ingest {offered:>8.0} chunks/s offered: received {:.0} ({:.0}%), the simulator wrote {:.0}, arrival lag p50 {:.0} µs, p99 {:.0} µs (process CPU {} cores): {}",
            step.received,
            step.received / offered * 100.0,
            step.written,
            step.lag_p50_us,
            step.lag_p99_us,
            i.cpu_cores.map_or("-".into(), |c| format!("{c:.2}")),
            if held { "held" } else { "did not hold" }
        ));
        (chunks, cpu) = (chunks + i.chunks, i.cpu_cores);
        steps.push(step);
        if !held {
            break;
        }
    }
    Ok((steps, chunks, cpu))
}

/// An ingest step held: enough of the offered rate arrived, and promptly.
pub fn step_held(s: &IngestStep) -> bool {
    s.received >= s.offered * INGEST_HELD_SHARE && !lagged(s)
}

fn lagged(s: &IngestStep) -> bool {
    s.lag_p50_us > INGEST_LAG_P50_MS * 1e3
}

/// What the ingest ramp found (see the module header for the rule).
pub fn ingest_finding(steps: &[IngestStep]) -> Finding {
    let best = steps.iter().map(|s| s.received).fold(0.0, f64::max);
    let Some(failed) = steps.iter().find(|s| !step_held(s)) else {
        return Finding {
            reach: Reach::NotReached,
            bound: best,
            failed_at: None,
            reason: format!(
                "every offered rate up to {:.0} chunks/s arrived",
                steps.last().map_or(0.0, |s| s.offered)
            ),
        };
    };
    let share = failed.received / failed.offered * 100.0;
    let sim_short = failed.written < failed.offered * INGEST_HELD_SHARE;
    if sim_short && !lagged(failed) {
        return Finding {
            reach: Reach::SimulatorBound,
            bound: best,
            failed_at: Some(failed.offered),
            reason: format!(
                "at {:.0} offered the simulator wrote only {:.0} chunks/s and what it wrote arrived promptly (lag p50 {:.0} µs): the harness was waiting on it",
                failed.offered, failed.written, failed.lag_p50_us
            ),
        };
    }
    let why = if lagged(failed) {
        format!(
            "chunks queued: arrival lag p50 {:.1} ms > {INGEST_LAG_P50_MS} ms",
            failed.lag_p50_us / 1e3
        )
    } else {
        format!(
            "the simulator kept pace ({:.0} chunks/s written)",
            failed.written
        )
    };
    Finding {
        reach: Reach::Found,
        bound: best,
        failed_at: Some(failed.offered),
        reason: format!(
            "the harness fell behind at {:.0} chunks/s offered: {:.0} received ({share:.0}%); {why}",
            failed.offered, failed.received
        ),
    }
}

/// What the rate ramp found: its points in order, a failed rate tried twice at most.
pub fn rate_finding(points: &[RampPoint]) -> Finding {
    let held = points
        .iter()
        .filter(|p| point_ok(p))
        .map(|p| p.requested)
        .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))));
    let failed = points.last().filter(|p| !point_ok(p));
    let why = |p: &RampPoint| {
        let t = Thresholds::DEFAULT;
        if p.lag_p99_ms > t.driver_lag_p99_ms {
            format!(
                "dispatch lag p99 {:.2} ms > {} ms",
                p.lag_p99_ms, t.driver_lag_p99_ms
            )
        } else {
            format!(
                "achieved {:.0} req/s < {:.0}% of {:.0}",
                p.achieved,
                t.min_achieved_share * 100.0,
                p.requested
            )
        }
    };
    match (held, failed) {
        (Some(h), Some(f)) => Finding {
            reach: Reach::Found,
            bound: h,
            failed_at: Some(f.requested),
            reason: format!("{:.0} req/s failed: {}", f.requested, why(f)),
        },
        (Some(h), None) => Finding {
            reach: Reach::NotReached,
            bound: h,
            failed_at: None,
            reason: "every rate tried held".into(),
        },
        (None, Some(f)) => Finding {
            reach: Reach::BelowFirst,
            bound: f.requested,
            failed_at: Some(f.requested),
            reason: format!("{}; a busy machine or a debug build shows here", why(f)),
        },
        (None, None) => Finding {
            reach: Reach::NotReached,
            bound: 0.0,
            failed_at: None,
            reason: "no rate was tried".into(),
        },
    }
}

/// A ramp point the harness drove: driver lag p99 and achieved rate within the thresholds.
pub fn point_ok(p: &RampPoint) -> bool {
    let t = Thresholds::DEFAULT;
    p.lag_p99_ms <= t.driver_lag_p99_ms && p.achieved >= p.requested * t.min_achieved_share
}

struct Ingest {
    chunks_s: f64,
    written_s: f64,
    chunks: u64,
    cpu_cores: Option<f64>,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

/// [`INGEST_STREAMS`] streams of `rate` chunks/s each, sized for `secs` seconds.
async fn stream(rate: f64, secs: f64) -> anyhow::Result<Ingest> {
    let mut profile = crate::sim::Profile::builtin("fast").expect("the fast profile is built in");
    profile.decode_tok_s = rate.max(1.0);
    profile.chunk_tokens = vec![1.0];
    profile.step_jitter = 0.0;
    profile.capacity = 4096;
    profile.chunks_per_write = INGEST_CHUNKS_PER_WRITE;
    let mut cfg = crate::sim::SimConfig::new(profile);
    let cert = crate::tls::SelfSigned::generate()?;
    cfg.tls = Some(cert.clone());
    let sim = crate::sim::spawn(cfg).await?;
    let target = Arc::new(crate::plan::targets::running_sim(
        "calibrate",
        "sim-fast",
        &sim.base_url,
    ));
    let clock = crate::clock::Clock::start();
    let connector = Arc::new(Connector::new(
        &target,
        TransportKind::HttpPooled,
        Trust::Sim(cert),
        crate::link::Link::default(),
        clock,
        1,
    )?);
    let tokens = (rate * secs).max(100.0) as u32;
    // A slow machine (or a debug build) stops at twice the planned length and a second.
    let cancel = CancellationToken::new();
    let guard = {
        let cancel = cancel.clone();
        let limit = Duration::from_secs_f64(secs * 2.0 + 1.0);
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            cancel.cancel();
        })
    };
    let cpu_before = crate::clock::selfwatch::process_cpu_time();
    let wall = crate::clock::now();
    let mut tasks = tokio::task::JoinSet::new();
    for s in 0..INGEST_STREAMS {
        let (connector, target, cancel) = (connector.clone(), target.clone(), cancel.clone());
        tasks.spawn(async move {
            let mut conn = connector.session();
            let mut conv = Conversation::new(
                "calibrate",
                ApiFlavour::Responses,
                TransportKind::HttpPooled,
                false,
            );
            conv.add_user_message(&format!("Stream {s}: write a long file."));
            let meta = RecordMeta {
                id: u64::from(s),
                session: s,
                intended_ns: clock.now_ns(),
                ..Default::default()
            };
            let spec = RequestSpec {
                max_output_tokens: tokens,
                ..Default::default()
            };
            exchange(&mut conn, &target, &mut conv, &spec, &meta, &cancel)
                .await
                .0
        });
    }
    let mut records: Vec<RequestRecord> = Vec::new();
    while let Some(r) = tasks.join_next().await {
        records.push(r?);
    }
    let wall_s = crate::clock::since(wall).as_secs_f64();
    let cpu_cores = match (cpu_before, crate::clock::selfwatch::process_cpu_time()) {
        (Some(a), Some(b)) if wall_s > 0.0 => Some(b.saturating_sub(a).as_secs_f64() / wall_s),
        _ => None,
    };
    guard.abort();
    let (from, to, steady) = steady_state(&records)?;
    let mut errors: Vec<u64> = Vec::new();
    let mut writes: Vec<Vec<u64>> = Vec::new();
    for r in &records {
        let Some(truth) = r.response_id.as_deref().and_then(|id| sim.trace.get(id)) else {
            continue;
        };
        for (c, w) in r.chunks.iter().zip(&truth.chunk_writes) {
            errors.push(c.at_ns.saturating_sub(clock.ns(w.at)));
        }
        writes.push(truth.chunk_writes.iter().map(|w| clock.ns(w.at)).collect());
    }
    sim.shutdown().await;
    errors.sort_unstable();
    let pct = |p: f64| {
        errors
            .get(((errors.len().max(1) - 1) as f64 * p).round() as usize)
            .map_or(0.0, |&v| v as f64 / 1e3)
    };
    Ok(Ingest {
        chunks_s: steady as f64 * 1e9 / (to - from) as f64,
        written_s: written_rate(&writes),
        chunks: records.iter().map(|r| r.chunks.len() as u64).sum(),
        cpu_cores,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        max_us: pct(1.0),
    })
}

/// The simulator's own pace: chunks written per second from when the last stream began
/// writing to when the first stopped (0 when that span is empty).
fn written_rate(streams: &[Vec<u64>]) -> f64 {
    let from = streams.iter().filter_map(|w| w.first()).max().copied();
    let to = streams.iter().filter_map(|w| w.last()).min().copied();
    match (from, to) {
        (Some(from), Some(to)) if to > from => {
            let n = streams
                .iter()
                .flatten()
                .filter(|&&t| t >= from && t < to)
                .count();
            n as f64 * 1e9 / (to - from) as f64
        }
        _ => 0.0,
    }
}

/// The steady state of the ingest streams: from when the last stream began receiving to
/// when the first ended, and the chunks received in it; an error when it is empty.
fn steady_state(records: &[RequestRecord]) -> anyhow::Result<(u64, u64, usize)> {
    let from = records
        .iter()
        .filter_map(|r| r.chunks.first())
        .map(|c| c.at_ns)
        .max()
        .unwrap_or(0);
    let to = records
        .iter()
        .filter_map(|r| r.chunks.last())
        .map(|c| c.at_ns)
        .min()
        .unwrap_or(0);
    let steady = records
        .iter()
        .flat_map(|r| &r.chunks)
        .filter(|c| c.at_ns >= from && c.at_ns < to)
        .count();
    anyhow::ensure!(
        to > from && steady > 0,
        "the ingest phase received no chunks with every stream active ({} of {} streams failed: {})",
        records.iter().filter(|r| !r.is_ok()).count(),
        records.len(),
        records
            .iter()
            .find_map(|r| r.error.clone())
            .unwrap_or_default()
    );
    Ok((from, to, steady))
}

/// The scenario of one ramp point: `sessions` one-request sessions in open loop (the
/// arrival rate is set on the plan: scenarios stop at 1,000 sessions/s).
fn ramp_scenario(sessions: u32) -> String {
    format!(
        "name = \"calibrate\"\nseed = 7\nlink = \"none\"\nmax_output_tokens = 4\n\
         [load]\nsessions = {sessions}\nconcurrency = {sessions}\nsession_interval = \"1ms\"\n\
         [matrix]\ntargets = [\"sim-calibrate\"]\ntransports = [\"http-pooled\"]\n\
         [targets.sim-calibrate]\nsim_profile = \"wafer\"\n\
         [[turns]]\nprompt = \"ok\"\n"
    )
}

async fn ramp(
    plan: &Plan,
    scratch: &std::path::Path,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<Vec<RampPoint>> {
    let mut points = Vec::new();
    let mut retried = false;
    let mut rates = plan.rates.iter().copied().peekable();
    while let Some(&rate) = rates.peek() {
        let sessions = (rate * plan.point_s).round().max(20.0) as u32;
        let text = ramp_scenario(sessions);
        let scenario = crate::scenario::parse("calibrate.toml", &text)?;
        let mut p = crate::plan::build(
            &scenario,
            "calibrate.toml",
            text.as_bytes(),
            &Default::default(),
        )?;
        // The simulator's `fast` profile (sub-millisecond answers, room for 1,024 at once),
        // which scenarios do not offer, so the target costs the ramp as little as possible.
        for cell in &mut p.cells {
            cell.target.sim_profile = Some("fast".into());
        }
        // Poisson arrivals at `rate` (a scenario's `session_interval` stops at 1 ms).
        let gap = Duration::from_nanos((1e9 / rate).round().max(1.0) as u64);
        let offsets = crate::plan::arrival::poisson(p.seed ^ rate.to_bits(), sessions, gap);
        let mut sessions = p.sessions.to_vec();
        for (s, off) in sessions.iter_mut().filter(|s| !s.warmup).zip(offsets) {
            s.start_offset = off;
        }
        p.sessions = crate::plan::Sessions::from_sessions(sessions);
        p.load.session_interval = Some(gap);
        let options = super::Options {
            announce: false,
            ..super::Options::quiet()
        };
        let outcome = super::run(Arc::new(p), scratch, options).await?;
        let _ = std::fs::remove_dir_all(&outcome.dir);
        let h = outcome
            .summary
            .harness
            .ok_or_else(|| anyhow::anyhow!("internal error: a run without a harness section"))?;
        let point = RampPoint {
            requested: h.requested_rate.unwrap_or(0.0),
            achieved: h.achieved_rate.unwrap_or(0.0),
            lag_p99_ms: h.driver_lag.p99_ms,
            verdict: h.verdict.to_string(),
            timer_late_p99_ms: h.timer_late_us.p99 / 1e3,
            cpu_cores: h.cpu.mean_cores,
        };
        say(&format!(
            "rate {rate:>5.0} req/s planned: requested {:.0}, achieved {:.0} req/s, dispatch lag p99 {:.2} ms (timer late p99 {:.2} ms, CPU {} cores): {}",
            point.requested,
            point.achieved,
            point.lag_p99_ms,
            point.timer_late_p99_ms,
            point.cpu_cores.map_or("-".into(), |c| format!("{c:.2}")),
            if point_ok(&point) { "kept up" } else { "could not keep up" }
        ));
        let ok = point_ok(&point);
        points.push(point);
        if ok {
            rates.next();
            retried = false;
        } else if retried {
            break;
        } else {
            // Once more: one late burst on a shared machine should not end the ramp.
            retried = true;
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(offered: f64, received: f64, written: f64, lag_p50_us: f64) -> IngestStep {
        IngestStep {
            offered,
            received,
            written,
            lag_p50_us,
            lag_p99_us: lag_p50_us * 3.0,
            cpu_cores: None,
        }
    }

    fn point(requested: f64, achieved: f64, lag_p99_ms: f64) -> RampPoint {
        RampPoint {
            requested,
            achieved,
            lag_p99_ms,
            verdict: String::new(),
            timer_late_p99_ms: 0.0,
            cpu_cores: None,
        }
    }

    #[test]
    fn calibrate_ingest_ramp_found_not_reached_and_simulator_bound() {
        let held = [step(50e3, 50e3, 50e3, 40.0), step(100e3, 99e3, 100e3, 60.0)];
        // Every step arrived: a lower bound at the top received rate.
        let f = ingest_finding(&held);
        assert_eq!(
            (f.reach, f.bound, f.failed_at),
            (Reach::NotReached, 99e3, None)
        );
        assert!(f
            .describe("chunks/s")
            .starts_with("not reached at 99000 chunks/s"));
        // Short while the simulator kept pace: the harness fell behind; the ceiling is
        // the most received at any step.
        let mut s = held.to_vec();
        s.push(step(200e3, 150e3, 199e3, 300.0));
        let f = ingest_finding(&s);
        assert_eq!((f.reach, f.bound), (Reach::Found, 150e3));
        assert_eq!(f.failed_at, Some(200e3));
        assert!(f.describe("chunks/s").starts_with("found: 150000 chunks/s"));
        // All of it arrived, but late: chunks queue in the socket, found too.
        s[2] = step(200e3, 199e3, 199e3, 9_000.0);
        let f = ingest_finding(&s);
        assert_eq!(f.reach, Reach::Found);
        assert!(f.reason.contains("chunks queued"), "{}", f.reason);
        // Short, and the simulator wrote short, lag still small: the simulator ran out.
        s[2] = step(200e3, 120e3, 121e3, 80.0);
        let f = ingest_finding(&s);
        assert_eq!((f.reach, f.bound), (Reach::SimulatorBound, 120e3));
        assert!(!f.found());
        // The simulator wrote short because the harness pushed back (lag large): found.
        s[2] = step(200e3, 120e3, 121e3, 20_000.0);
        assert_eq!(ingest_finding(&s).reach, Reach::Found);
        // The first step already short: found (a saturated harness's throughput).
        let f = ingest_finding(&[step(50e3, 30e3, 50e3, 100.0)]);
        assert_eq!((f.reach, f.bound), (Reach::Found, 30e3));
    }

    #[test]
    fn calibrate_rate_ramp_found_not_reached_and_first_failed() {
        let ok = [point(100.0, 100.0, 0.5), point(300.0, 299.0, 1.0)];
        let f = rate_finding(&ok);
        assert_eq!(
            (f.reach, f.bound, f.failed_at),
            (Reach::NotReached, 300.0, None)
        );
        assert!(f.describe("req/s").starts_with("not reached at 300 req/s"));
        // A failure retried and failed again ends the ramp: found at the last that held.
        let mut p = ok.to_vec();
        p.push(point(1000.0, 990.0, 7.0));
        p.push(point(1000.0, 900.0, 2.0));
        let f = rate_finding(&p);
        assert_eq!((f.reach, f.bound), (Reach::Found, 300.0));
        assert_eq!(f.failed_at, Some(1000.0));
        assert!(f.reason.contains("achieved 900 req/s"), "{}", f.reason);
        // A failure that passed on its retry is not the end.
        p.push(point(1000.0, 1000.0, 1.0));
        assert_eq!(rate_finding(&p).reach, Reach::NotReached);
        assert_eq!(rate_finding(&p).bound, 1000.0);
        // The first rate failed twice: below it, with the reason, never "a ceiling of 0".
        let f = rate_finding(&[point(100.0, 100.0, 9.0), point(100.0, 100.0, 8.0)]);
        assert_eq!((f.reach, f.bound), (Reach::BelowFirst, 100.0));
        let text = f.describe("req/s");
        assert!(text.starts_with("below 100 req/s"), "{text}");
        assert!(text.contains("dispatch lag p99 8.00 ms > 5 ms"), "{text}");
    }
}
