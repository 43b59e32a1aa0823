//! `spark-bench calibrate`: this machine's ceiling, measured against the embedded simulator.
//!
//! Owns: the two phases and their sizes.
//! * **Ingest**: [`INGEST_STREAMS`] streams from one simulator (TLS, HTTP/1.1 keep-alive, no
//!   link, in this process) at [`INGEST_RATE_PER_STREAM`] one-token chunks per second each,
//!   eight chunks per write, through spark-bench's real client path (transport → framing →
//!   decoder → `exchange` record, as `cargo bench --bench ingest` does). The ceiling is the
//!   chunks per second received while every stream was active; the timestamp error is
//!   each chunk's arrival stamp minus the simulator's record of when it wrote the chunk
//!   (the kernel's transmit stamp where the socket gives one: the ground truth). The
//!   simulator shares the machine, so the ceiling is a lower bound of the harness's own.
//! * **Rate ramp**: short open-loop runs (`runner::run`, the real driver, Poisson session
//!   arrivals, one one-turn request per session, four output tokens, the `fast` simulator
//!   profile, no link) at rising rates, each judged by the run's own `harness` section;
//!   the highest rate whose driver lag p99 and achieved rate stayed within
//!   [`Thresholds::DEFAULT`] is the machine's request-rate ceiling. A rate that fails is
//!   tried once more (one late burst on a shared machine); the ramp stops at the first rate
//!   that fails twice.
//!
//! Does not own: the file (`store::calibration`), the verdict (`recorder::harness`),
//! printing (`commands::calibrate`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::driver::exchange::{exchange, Connector, Conversation, RecordMeta, RequestSpec};
use crate::recorder::harness::Thresholds;
use crate::store::{Calibration, Host, RampPoint};
use crate::transport::Trust;
use crate::vocab::{ApiFlavour, RequestRecord, TransportKind};

/// Concurrent streams in the ingest phase.
pub const INGEST_STREAMS: u32 = 16;
/// Chunks per second each stream is offered (16 × 25,000 = 400,000 chunks/s in all: a
/// release build on a quiet 2-core VM took all of 160,000; `cargo bench --bench ingest`
/// saw 290k–410k of 400k).
pub const INGEST_RATE_PER_STREAM: f64 = 25_000.0;
/// Chunks the simulator writes at once in the ingest phase (each still its own event).
const INGEST_CHUNKS_PER_WRITE: u32 = 8;
/// The stamp error is measured at this share of the measured ingest ceiling.
const ACCURACY_SHARE: f64 = 0.25;

/// How long and how far to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `--quick`.
    pub quick: bool,
    /// Seconds of streaming the ingest phase is sized for (at the offered rate).
    pub ingest_s: f64,
    /// Seconds of streaming the stamp-error pass is sized for.
    pub accuracy_s: f64,
    /// Requested rates of the ramp, req/s, rising.
    pub rates: Vec<f64>,
    /// Seconds of arrivals per ramp point.
    pub point_s: f64,
}

impl Plan {
    /// The default (about 25 s) or `--quick` (about 10 s) calibration.
    pub fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                quick,
                ingest_s: 1.5,
                accuracy_s: 1.0,
                rates: vec![100.0, 300.0, 1000.0, 2000.0],
                point_s: 1.0,
            }
        } else {
            Plan {
                quick,
                ingest_s: 4.0,
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
    let ingest = stream(INGEST_RATE_PER_STREAM, plan.ingest_s).await?;
    say(&format!(
        "ingest: {:.0} chunks/s received over {} streams offered {:.0} in all ({} chunks, process CPU {} cores)",
        ingest.chunks_s,
        INGEST_STREAMS,
        INGEST_RATE_PER_STREAM * f64::from(INGEST_STREAMS),
        ingest.chunks,
        ingest.cpu_cores.map_or("-".into(), |c| format!("{c:.2}"))
    ));
    // The stamp error at a load the harness keeps up with: a quarter of the ceiling (at
    // the ceiling, chunks queue in the socket and every stamp is late by the queue).
    let accuracy_rate =
        (ingest.chunks_s * ACCURACY_SHARE / f64::from(INGEST_STREAMS)).min(INGEST_RATE_PER_STREAM);
    let accuracy = stream(accuracy_rate, plan.accuracy_s).await?;
    say(&format!(
        "stamp error at {:.0} chunks/s ({:.0}% of the ceiling): p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
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
    let max_request_rate = ramp
        .iter()
        .filter(|p| point_ok(p))
        .map(|p| p.requested)
        .fold(0.0, f64::max);
    Ok(Calibration {
        measured_at: crate::store::rfc3339(crate::clock::wall_now()),
        host: Host::current(),
        quick: plan.quick,
        ingest_chunks_s: ingest.chunks_s,
        ingest_chunks: ingest.chunks,
        ingest_streams: INGEST_STREAMS,
        ingest_cpu_cores: ingest.cpu_cores,
        stamp_error_rate: accuracy.chunks_s,
        stamp_error_p50_us: accuracy.p50_us,
        stamp_error_p99_us: accuracy.p99_us,
        stamp_error_max_us: accuracy.max_us,
        max_request_rate,
        ramp,
        took_s: crate::clock::since(started).as_secs_f64(),
    })
}

/// A ramp point the harness drove: driver lag p99 and achieved rate within the thresholds.
pub fn point_ok(p: &RampPoint) -> bool {
    let t = Thresholds::DEFAULT;
    p.lag_p99_ms <= t.driver_lag_p99_ms && p.achieved >= p.requested * t.min_achieved_share
}

struct Ingest {
    chunks_s: f64,
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
    for r in &records {
        let Some(truth) = r.response_id.as_deref().and_then(|id| sim.trace.get(id)) else {
            continue;
        };
        for (c, w) in r.chunks.iter().zip(&truth.chunk_writes) {
            errors.push(c.at_ns.saturating_sub(clock.ns(w.at)));
        }
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
        chunks: records.iter().map(|r| r.chunks.len() as u64).sum(),
        cpu_cores,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        max_us: pct(1.0),
    })
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
        for (s, off) in p.sessions.iter_mut().filter(|s| !s.warmup).zip(offsets) {
            s.start_offset = off;
        }
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
