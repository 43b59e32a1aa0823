//! The harness judging itself where it matters:
//! * a run whose runtime is kept busy (two tasks on the run's two worker threads that each
//!   block their thread for 25 ms at a time, as a harness drowning in its own work would)
//!   is judged `harness-bound` for its dispatch lag, notes the timer lateness it measured,
//!   and its report carries the warning;
//! * `spark-bench calibrate --quick` (through the library) measures sane numbers, and saves
//!   them where a run reads them back.

use std::sync::Arc;
use std::time::Duration;

use spark_bench::recorder::harness::Verdict;
use spark_bench::runner::{self, calibrate, Options};

use crate::support::run::plan_of;
use crate::support::sim_client::SERIAL;

/// 200 one-turn sessions arriving at 200/s against the wafer simulator, no link.
const SCENARIO: &str = r#"
name = "starved"
seed = 5
link = "none"
max_output_tokens = 4
[load]
sessions = 200
concurrency = 200
session_interval = "5ms"
[matrix]
targets = ["sim-wafer"]
transports = ["http-pooled"]
[[turns]]
prompt = "Say ok."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_starved_runtime_is_judged_harness_bound() {
    let _serial = SERIAL.lock().await;
    let tmp = testkit::tempdir().unwrap();
    let plan = plan_of("starved.toml", SCENARIO);
    let stop = tokio_util::sync::CancellationToken::new();
    let mut hogs = Vec::new();
    for _ in 0..2 {
        let stop = stop.clone();
        hogs.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                // Blocks this worker thread, as CPU-bound work on the runtime would.
                std::thread::sleep(Duration::from_millis(25));
                tokio::task::yield_now().await;
            }
        }));
    }
    let outcome = runner::run(Arc::new(plan), tmp.path(), Options::quiet())
        .await
        .unwrap();
    stop.cancel();
    for h in hogs {
        h.await.unwrap();
    }
    let h = outcome.summary.harness.clone().unwrap();
    println!("{}", h.lines().join("\n"));
    assert_eq!(h.verdict, Verdict::HarnessBound, "{h:?}");
    assert!(h.driver_lag.p99_ms > 5.0, "{h:?}");
    assert!(
        h.reasons.iter().any(|r| r.starts_with("dispatch lag p99")),
        "{:?}",
        h.reasons
    );
    assert!(
        h.notes.iter().any(|r| r.starts_with("timer lateness p99")),
        "{:?}",
        h.notes
    );
    let paths = spark_bench::report::render_run(&outcome.dir).unwrap();
    let md = paths.iter().find(|p| p.ends_with("report.md")).unwrap();
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("HARNESS-BOUND"), "the report flags it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibrate_quick_measures_sane_numbers_and_saves_them() {
    let _serial = SERIAL.lock().await;
    let tmp = testkit::tempdir().unwrap();
    let plan = calibrate::Plan::new(true);
    let mut lines = Vec::new();
    let c = calibrate::calibrate(&plan, &mut |l: &str| lines.push(l.to_string()))
        .await
        .unwrap();
    println!("{}", lines.join("\n"));
    println!("{}", serde_json::to_string_pretty(&c).unwrap());
    let offered = calibrate::INGEST_RATE_PER_STREAM * f64::from(calibrate::INGEST_STREAMS);
    // Sane: chunks arrived at a real rate, never faster than the simulator offered them.
    assert!(
        c.ingest_chunks_s > 1_000.0 && c.ingest_chunks_s < offered * 1.1,
        "{c:?}"
    );
    assert!(c.ingest_chunks > 1_000);
    // The stamp error is measured at a quarter of the ceiling, and ordered.
    assert!(c.stamp_error_rate > 0.0 && c.stamp_error_rate < c.ingest_chunks_s * 0.5);
    assert!(c.stamp_error_p50_us <= c.stamp_error_p99_us);
    assert!(c.stamp_error_p99_us <= c.stamp_error_max_us);
    // Below the ceiling, the median chunk is stamped within a millisecond of its write.
    assert!(c.stamp_error_p50_us < 1_000.0, "{c:?}");
    // The ramp tried the first rate and the ceiling is one of the rates that kept up.
    assert!(!c.ramp.is_empty());
    assert!(
        c.max_request_rate == 0.0
            || c.ramp
                .iter()
                .any(|p| calibrate::point_ok(p) && p.requested == c.max_request_rate),
        "{c:?}"
    );
    for p in &c.ramp {
        assert!(p.requested > 0.0 && p.achieved > 0.0, "{p:?}");
    }
    assert!(c.took_s < 30.0, "took {} s", c.took_s);

    let path = tmp.path().join("spark-bench/calibration.json");
    spark_bench::store::save_calibration(&path, &c).unwrap();
    let back = spark_bench::store::load_calibration(&path)
        .unwrap()
        .unwrap();
    // Equal to JSON's float precision.
    assert_eq!(
        (&back.measured_at, back.ingest_chunks, back.ramp.len()),
        (&c.measured_at, c.ingest_chunks, c.ramp.len())
    );
    assert!((back.ceiling().chunks_s / c.ingest_chunks_s - 1.0).abs() < 1e-12);
    assert!((back.max_request_rate - c.max_request_rate).abs() <= c.max_request_rate * 1e-12);
}
