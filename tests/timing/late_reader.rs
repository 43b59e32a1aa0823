//! A harness that falls behind mid-stream must still stamp each chunk with its own arrival.
//!
//! The client runs on a current-thread runtime that a task stalls for 20 ms every 30 ms (a
//! blocking sleep: nothing on that runtime runs meanwhile, not the response pump, not
//! hyper's connection task). The simulator runs on a runtime of its own and the link's delay
//! line on its thread, so chunks keep arriving and queue up during each stall. When the
//! client resumes, TLS and hyper find many chunks waiting at once. Each must still be
//! stamped with when its own bytes arrived (here: the kernel's receive stamp at the link's
//! socket + RTT/2), not with when the client got to it, nor with the latest of the queued
//! ones. Checked against the simulator's ground truth, on all four transports.
//!
//! This is what `RecordAtATime` (TLS read one record at a time) and the HTTP byte log
//! ([`spark_bench::transport::bytelog`]) are for: without either, chunks here are stamped
//! up to a stall later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::sim::{self, Profile, SimConfig};
use spark_bench::tls::SelfSigned;
use spark_bench::vocab::TransportKind;

use crate::accuracy::{errors_against_trace, target, BOUND_NS};

/// Attempts per transport (machine noise only adds error; see `accuracy`).
const ATTEMPTS: usize = 3;

#[test]
fn a_stalled_client_still_stamps_each_chunk_with_its_own_arrival() {
    let sim_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sim")
        .enable_all()
        .build()
        .expect("simulator runtime");
    let mut cfg = SimConfig::new(Profile::builtin("wafer").expect("wafer profile"));
    cfg.tls = Some(SelfSigned::generate().expect("certificate"));
    let sim = Arc::new(sim_rt.block_on(sim::spawn(cfg)).expect("simulator"));

    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    client_rt.block_on(async {
        let _serial = crate::support::sim_client::SERIAL.lock().await;
        let _rt = crate::realtime::Realtime::new();
        let stalls = Arc::new(AtomicU64::new(0));
        let stalling = {
            let stalls = stalls.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    // Blocks the whole client runtime.
                    std::thread::sleep(Duration::from_millis(20));
                    stalls.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let link: Link = "rtt=40ms".parse().expect("link");
        let t = target(&sim);
        let clock = Clock::start();
        for kind in TransportKind::ALL {
            for attempt in 1..=ATTEMPTS {
                let trust = Trust::Sim(sim.cert.clone().expect("cert"));
                let connector =
                    Arc::new(Connector::new(&t, kind, trust, link, clock, 7).expect("connector"));
                let mut conn = connector.session();
                let mut conv = Conversation::new("You are a coding assistant.", t.api, kind, false);
                conv.add_user_message("Write a snake game in Python.");
                let meta = RecordMeta {
                    intended_ns: clock.now_ns(),
                    ..Default::default()
                };
                let spec = RequestSpec {
                    max_output_tokens: 1000,
                    ..Default::default()
                };
                let before = stalls.load(Ordering::Relaxed);
                let (r, _) = exchange(
                    &mut conn,
                    &t,
                    &mut conv,
                    &spec,
                    &meta,
                    &CancellationToken::new(),
                )
                .await;
                let stalled = stalls.load(Ordering::Relaxed) - before;
                let errors = errors_against_trace(&sim, clock, &r);
                let worst = errors.iter().map(|e| e.abs()).max().unwrap_or(0);
                let off = errors.iter().filter(|e| e.abs() >= BOUND_NS).count();
                eprintln!(
                    "{kind} attempt {attempt}: {} chunks over {stalled} client stalls of 20 ms; \
                     {off} 1 ms or more from write + RTT/2 (worst {} µs)",
                    errors.len(),
                    worst / 1000
                );
                assert!(
                    stalled >= 10,
                    "{kind}: the client stalled only {stalled} times"
                );
                if off == 0 {
                    break;
                }
                assert!(
                    attempt < ATTEMPTS,
                    "{kind}: {off} of {} chunks 1 ms or more off (worst {} µs) in each of \
                     {ATTEMPTS} attempts",
                    errors.len(),
                    worst / 1000
                );
            }
        }
        stalling.abort();
    });
    drop(sim);
}
