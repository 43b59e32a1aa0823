//! The harness's accuracy against ground truth: spark-bench's real client path (transport →
//! backend → `exchange`) against the real simulator over TLS and the client-side emulated
//! link (rtt=40ms), compared chunk by chunk with the instants the simulator wrote each chunk.
//!
//! Each chunk's error, arrival − (simulator write + RTT/2), is split with the link's probe
//! into three parts:
//! * **reader**: simulator write → the delay line reads the bytes off its socket (the link's
//!   start-of-wire lag: one task wake-up);
//! * **link**: how late the delay line handed the bytes over against its due time (its timer);
//! * **harness**: hand-over → spark-bench's arrival timestamp. This is the harness's own
//!   timestamp error, what a real network would leave.
//!
//! Claims checked, on every transport:
//! * the harness's error is within 1 ms for **every** chunk (best of three attempts per
//!   transport: machine noise only ever adds lateness, so a systematic error fails all three);
//! * end to end, no chunk is early, the median is under 0.5 ms and 90% are within 1 ms
//!   (single chunks can be several ms late when the 2-core machine stalls a link task: the
//!   test prints the split so it is visible which part was late);
//! * TTFT is the first chunk's arrival; token counts equal the simulator's (the total; per
//!   chunk they are apportioned); the measured decode rate is within 2% of the profile's.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::plan::Target;
use spark_bench::recorder::{ApiFlavour, OutcomeKind, RequestRecord, TransportKind};
use spark_bench::sim::{self, Profile, SimConfig, SimHandle};
use spark_bench::tls::SelfSigned;

use crate::sim_client::SERIAL;

const RTT_NS: i64 = 40_000_000;
/// The accuracy bound of the issue: 1 ms.
const BOUND_NS: i64 = 1_000_000;
/// How far a chunk may appear early: the precise timer fires up to 30 µs early, and the
/// simulator stamps a WebSocket frame after its send returns, so a simulator task
/// descheduled right after the write stamps it late (seen: 0.33 ms).
const EARLY_NS: i64 = 1_000_000;
/// Attempts per transport for the every-chunk harness bound.
const ATTEMPTS: usize = 3;

fn target(sim: &SimHandle) -> Target {
    Target {
        name: "sim-wafer".into(),
        base_url: Some(sim.base_url.clone()),
        sim_profile: None,
        api: ApiFlavour::Responses,
        model: "sim-wafer".into(),
        api_key_env: None,
        hardware: "wafer-scale (simulated)".into(),
        headers: Default::default(),
        store: false,
        ws_warmup: false,
        request_timing: true,
        request_timeout: Duration::from_secs(30),
        stall_timeout: Duration::from_secs(10),
        transports: TransportKind::ALL.to_vec(),
    }
}

/// Compares one record with the simulator's trace; returns the per-chunk errors (ns).
fn errors_against_trace(sim: &SimHandle, clock: Clock, r: &RequestRecord) -> Vec<i64> {
    assert_eq!(r.outcome, OutcomeKind::Ok, "{r:?}");
    let tr = sim
        .trace
        .get(r.response_id.as_deref().expect("response id"))
        .expect("the simulator traced the response");
    assert_eq!(
        r.output_tokens, tr.output_tokens,
        "output tokens vs ground truth"
    );
    assert_eq!(r.chunks.len(), tr.chunk_writes.len(), "one chunk per write");
    let errors: Vec<i64> = r
        .chunks
        .iter()
        .zip(&tr.chunk_writes)
        .map(|(c, w)| c.at_ns as i64 - (clock.ns(w.at) as i64 + RTT_NS / 2))
        .collect();
    // The Responses API reports usage once, at the end; per-chunk counts are that total
    // apportioned by text length, so only the sum is exact.
    assert_eq!(
        r.chunks.iter().map(|c| c.tokens).sum::<u32>(),
        tr.output_tokens
    );
    assert_eq!(
        r.first_token_ns,
        r.chunks.first().map(|c| c.at_ns),
        "TTFT is the first chunk's arrival"
    );
    errors
}

/// Splits each chunk's error (see the module docs), prints the parts, and returns the
/// harness's part per chunk (`None` for a chunk stamped before any bytes were handed over).
fn split(
    sim: &SimHandle,
    clock: Clock,
    r: &RequestRecord,
    segs: &[spark_bench::link::probe::SegmentTiming],
) -> Vec<Option<i64>> {
    let tr = sim
        .trace
        .get(r.response_id.as_deref().expect("id"))
        .expect("trace");
    let (mut reader, mut link, mut harness) = (Vec::new(), Vec::new(), Vec::new());
    let mut out = Vec::new();
    for (c, w) in r.chunks.iter().zip(&tr.chunk_writes) {
        // The segment that made this read possible: the last one handed over before it.
        let Some(seg) = segs.iter().rfind(|s| clock.ns(s.delivered) <= c.at_ns) else {
            out.push(None);
            continue;
        };
        reader.push(clock.ns(seg.read) as i64 - clock.ns(w.at) as i64);
        link.push(clock.ns(seg.delivered) as i64 - clock.ns(seg.due) as i64);
        let h = c.at_ns as i64 - clock.ns(seg.delivered) as i64;
        harness.push(h);
        out.push(Some(h));
    }
    for (name, v) in [
        ("reader", &mut reader),
        ("link", &mut link),
        ("harness", &mut harness),
    ] {
        v.sort_unstable();
        if let (Some(&lo), Some(&hi)) = (v.first(), v.last()) {
            eprintln!(
                "    {name:<8} min {:>5} µs  p50 {:>5} µs  p99 {:>6} µs  max {:>6} µs",
                lo / 1000,
                v[v.len() / 2] / 1000,
                v[(v.len() - 1) * 99 / 100] / 1000,
                hi / 1000
            );
        }
    }
    out
}

/// Runs this process's threads under SCHED_FIFO priority 1 while it lives, where allowed
/// (root or CAP_SYS_NICE), as one would start a latency measurement with `chrt -f 1`: the
/// test measures the harness, not the scheduler's time slices for whatever else the machine
/// runs (with two CPU hogs on the 2-core machine and no priority, single chunks waited 3–4 ms
/// for a slice; with it, the harness's worst chunk was ~0.2 ms). Threads created meanwhile
/// (the timer thread) inherit it; on drop every thread goes back to SCHED_OTHER, so the
/// tests that follow run as before.
struct Realtime {
    threads: usize,
}

impl Realtime {
    fn new() -> Realtime {
        Realtime {
            threads: set_policy(libc::SCHED_FIFO, 1),
        }
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        set_policy(libc::SCHED_OTHER, 0);
    }
}

/// Sets every thread of this process to `policy`; returns how many accepted it.
fn set_policy(policy: libc::c_int, priority: libc::c_int) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut changed = 0;
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        let param = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: sched_setscheduler only changes the scheduling policy of one of our threads.
        if unsafe { libc::sched_setscheduler(tid, policy, &param) } == 0 {
            changed += 1;
        }
    }
    changed
}

/// One attempt on one transport: three turns. Returns the end-to-end errors and the worst
/// harness error (i64::MAX when a chunk was stamped before any bytes were handed over).
async fn measure(
    sim: &SimHandle,
    t: &Target,
    kind: TransportKind,
    link: Link,
    clock: Clock,
    profile_rate: f64,
) -> (Vec<i64>, i64) {
    let trust = Trust::Sim(sim.cert.clone().expect("cert"));
    let connector = Arc::new(Connector::new(t, kind, trust, link, clock, 3).expect("connector"));
    let mut conn = connector.session();
    let mut conv = Conversation::new("You are a coding assistant.", t.api, kind, false);
    let prompts = [
        ("Write a snake game in Python.", 1500),
        ("Add a score display.", 200),
        ("Make the snake faster over time.", 200),
    ];
    let mut all = Vec::new();
    let mut harness_worst = i64::MIN;
    for (turn, (prompt, max)) in prompts.into_iter().enumerate() {
        conv.add_user_message(prompt);
        let meta = RecordMeta {
            id: turn as u64,
            session: 0,
            turn: turn as u32,
            intended_ns: clock.now_ns(),
            warmup: false,
        };
        let spec = RequestSpec {
            max_output_tokens: max,
            ..Default::default()
        };
        spark_bench::link::probe::start();
        let (r, _) = exchange(
            &mut conn,
            t,
            &mut conv,
            &spec,
            &meta,
            &CancellationToken::new(),
        )
        .await;
        let segs = spark_bench::link::probe::take();
        let errors = errors_against_trace(sim, clock, &r);
        let mut sorted = errors.clone();
        sorted.sort_unstable();
        let best = sorted.first().copied().unwrap_or(0);
        let worst = sorted.last().copied().unwrap_or(0);
        eprintln!(
            "{kind} turn {turn}: {} chunks, {} tokens, arrival − (write + RTT/2): min {} µs, p50 {} µs, p99 {} µs, max {} µs",
            r.chunks.len(),
            r.output_tokens,
            best / 1000,
            sorted[sorted.len() / 2] / 1000,
            sorted[(sorted.len() - 1) * 99 / 100] / 1000,
            worst / 1000
        );
        for h in split(sim, clock, &r, &segs) {
            harness_worst = harness_worst.max(h.unwrap_or(i64::MAX));
        }
        assert!(
            best >= -EARLY_NS,
            "{kind} turn {turn}: a chunk arrived {best} ns before the simulator wrote it + RTT/2"
        );
        if turn == 0 {
            let rate = r.decode_tok_s().expect("decode rate");
            eprintln!("{kind}: decode {rate:.1} tok/s (profile {profile_rate})");
            assert!(
                (rate / profile_rate - 1.0).abs() < 0.02,
                "{kind}: decode rate {rate:.1} tok/s vs profile {profile_rate}"
            );
        }
        all.extend(errors);
    }
    (all, harness_worst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_arrivals_ttft_tokens_and_decode_rate_match_ground_truth() {
    let _serial = SERIAL.lock().await;
    let rt = Realtime::new();
    eprintln!(
        "threads running SCHED_FIFO 1 (as under `chrt -f 1`; 0 = not permitted): {}",
        rt.threads
    );
    let mut cfg = SimConfig::new(Profile::builtin("wafer").expect("wafer profile"));
    // The wafer profile's speculative bursts and several-token chunks, as shipped.
    cfg.tls = Some(SelfSigned::generate().expect("certificate"));
    let profile_rate = cfg.profile.decode_tok_s();
    let sim = Arc::new(sim::spawn(cfg).await.expect("simulator"));
    let link: Link = "rtt=40ms".parse().expect("link");
    let t = target(&sim);
    let clock = Clock::start();

    let mut all_errors = Vec::new();
    for kind in TransportKind::ALL {
        let mut attempt = 0;
        let errors = loop {
            attempt += 1;
            let (errors, harness_worst) = measure(&sim, &t, kind, link, clock, profile_rate).await;
            eprintln!(
                "{kind} attempt {attempt}: harness error max {} µs",
                harness_worst / 1000
            );
            if harness_worst < BOUND_NS || attempt == ATTEMPTS {
                assert!(
                    harness_worst < BOUND_NS,
                    "{kind}: a chunk's harness timestamp error was {harness_worst} ns in each of {ATTEMPTS} attempts"
                );
                break errors;
            }
        };
        all_errors.extend(errors);
    }
    all_errors.sort_unstable();
    let p = |q: f64| all_errors[((all_errors.len() - 1) as f64 * q) as usize];
    eprintln!(
        "all transports: {} chunks; error p50 {} µs, p90 {} µs, p99 {} µs, max {} µs",
        all_errors.len(),
        p(0.5) / 1000,
        p(0.9) / 1000,
        p(0.99) / 1000,
        all_errors.last().copied().unwrap_or(0) / 1000
    );
    // Measured on the 2-core machine: p50 ≈ 0.13 ms, p90 ≈ 0.25 ms, p99 0.5–0.9 ms, max 1–8 ms.
    assert!(p(0.5) < BOUND_NS / 2, "median error {} ns", p(0.5));
    assert!(p(0.9) < BOUND_NS, "p90 error {} ns", p(0.9));
}
