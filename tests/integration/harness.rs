//! The harness section of an ordinary run, checked against the run's own records and the
//! plan's known intended starts: dispatch lag p50/p99/max as the records give it, the
//! requested rate from the plan's Poisson offsets, the achieved rate from the records'
//! dispatch instants, the calibrated ceiling read from the file the run was given, and the
//! section in `summary.json`, the table footer and the report; a ceiling `calibrate` did
//! not reach is a note, never a reason; and `calibrate` with an offered load far below
//! this machine's capacity says "not reached". (A run the harness cannot drive, and a
//! full `calibrate --quick`, are timing tests: `tests/timing/harness_bound.rs`.)

use std::sync::Arc;

use spark_bench::clock::selfwatch::SAMPLE_PERIOD;
use spark_bench::recorder::harness::Verdict;
use spark_bench::runner::calibrate;
use spark_bench::runner::{self, Options};
use spark_bench::store::{Calibration, Finding, Host, LoadedRun, Reach};

use crate::support::run::plan_of;

/// 40 one-turn sessions arriving at 50/s (Poisson) against the wafer simulator, no link.
const SCENARIO: &str = r#"
name = "harness"
seed = 11
link = "none"
max_output_tokens = 8
[load]
sessions = 40
concurrency = 40
session_interval = "20ms"
[matrix]
targets = ["sim-wafer"]
transports = ["http-pooled"]
[[turns]]
prompt = "Say ok."
"#;

/// A calibration file, as `spark-bench calibrate` leaves it, with this ingest figure.
fn calibration_of(chunks_s: f64, reach: Reach) -> Calibration {
    Calibration {
        measured_at: "2026-11-25T10:00:00.000Z".into(),
        host: Host::current(),
        quick: true,
        ingest_chunks_s: chunks_s,
        ingest: Finding {
            reach,
            bound: chunks_s,
            ..Default::default()
        },
        ingest_ramp: Vec::new(),
        ingest_chunks: 1,
        ingest_streams: 16,
        ingest_cpu_cores: None,
        stamp_error_rate: 1.0,
        stamp_error_p50_us: 1.0,
        stamp_error_p99_us: 1.0,
        stamp_error_max_us: 1.0,
        max_request_rate: 1.0,
        request_rate: Finding::default(),
        ramp: Vec::new(),
        took_s: 1.0,
    }
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    // HdrHistogram's value_at_quantile: the smallest value with at least q of the samples
    // at or below it.
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1e6
}

fn near(measured: f64, truth: f64) -> bool {
    // 3 significant digits in the histogram, plus a microsecond.
    (measured - truth).abs() <= truth.abs() * 2e-3 + 1e-3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_run_carries_a_harness_section_that_matches_its_records() {
    let tmp = testkit::tempdir().unwrap();
    let plan = plan_of("harness.toml", SCENARIO);
    // A calibration file, as `spark-bench calibrate` leaves it.
    let calibration = tmp.path().join("cache/calibration.json");
    let c = calibration_of(54_321.0, Reach::Found);
    spark_bench::store::save_calibration(&calibration, &c).unwrap();
    let offsets: Vec<u64> = plan
        .sessions
        .iter()
        .filter(|s| !s.warmup)
        .map(|s| s.start_offset.as_nanos() as u64)
        .collect();
    let options = Options {
        calibration: Some(calibration),
        ..Options::quiet()
    };
    let outcome = runner::run(Arc::new(plan), &tmp.path().join("results"), options)
        .await
        .unwrap();
    let h = outcome.summary.harness.clone().expect("a harness section");
    let run = LoadedRun::open(&outcome.dir).unwrap();
    // summary.json keeps it (floats to JSON's precision).
    let saved = run.summary.harness.as_ref().expect("in summary.json");
    assert_eq!((saved.verdict, &saved.reasons), (h.verdict, &h.reasons));
    assert_eq!(saved.dispatch_lag, h.dispatch_lag);
    assert!((saved.requested_rate.unwrap() / h.requested_rate.unwrap() - 1.0).abs() < 1e-12);

    let records = run.records().unwrap();
    assert_eq!(records.len(), 40);
    assert_eq!(h.requests, 40);
    // Dispatch lag, as the records give it.
    let mut lags: Vec<u64> = records.iter().map(|r| r.dispatch_lag_ns()).collect();
    lags.sort_unstable();
    for (got, q) in [
        (h.dispatch_lag.p50_ms, 0.5),
        (h.dispatch_lag.p99_ms, 0.99),
        (h.dispatch_lag.max_ms, 1.0),
    ] {
        assert!(
            near(got, quantile(&lags, q)),
            "q{q}: {got} vs records {}",
            quantile(&lags, q)
        );
    }
    // No slot was ever full (concurrency = sessions): driver lag is dispatch lag.
    assert_eq!(h.slot_waits, 0);
    assert_eq!(h.driver_lag, h.dispatch_lag);

    // Requested rate from the plan's own offsets (the lane's start cancels out).
    let span = offsets.iter().max().unwrap() - offsets.iter().min().unwrap();
    let requested = 39.0 * 1e9 / span as f64;
    let got = h.requested_rate.unwrap();
    assert!(
        (got - requested).abs() <= requested * 1e-6,
        "{got} vs {requested}"
    );
    // Achieved rate from the records' dispatch instants.
    let (first, last) = records.iter().fold((u64::MAX, 0), |(a, b), r| {
        (a.min(r.dispatch_ns), b.max(r.dispatch_ns))
    });
    let achieved = 39.0 * 1e9 / (last - first) as f64;
    assert!((h.achieved_rate.unwrap() - achieved).abs() <= achieved * 1e-9);

    // The probe ran for the whole run: one sample per SAMPLE_PERIOD over the run's span, of
    // which a loaded machine (each sleeper woken late) still gives more than half.
    let end = records.iter().filter_map(|r| r.end_ns).max().unwrap();
    let periods = (end - first) / SAMPLE_PERIOD.as_nanos() as u64;
    assert!(
        periods >= 50,
        "a run of {periods} probe periods is too short to judge"
    );
    assert!(
        h.timer_late_us.samples * 2 > periods,
        "{} timer samples over {periods} probe periods",
        h.timer_late_us.samples
    );
    // The ceiling is the file's.
    assert!(h.timer_late_us.p50 <= h.timer_late_us.p99);
    assert!(h.cpu.mean_cores.unwrap() > 0.0 && h.cpu.cores >= 1);
    assert_eq!(h.ingest_ceiling.as_ref().unwrap().chunks_s, 54_321.0);
    assert!(h.chunk_rate > 0.0);
    // The verdict agrees with its reasons (a loaded machine may make it harness-bound, but
    // never without saying why).
    assert_eq!(
        h.verdict == Verdict::HarnessBound,
        !h.reasons.is_empty(),
        "{h:?}"
    );

    let table = spark_bench::recorder::table(&outcome.summary);
    assert!(
        table.contains("harness: dispatch lag p50/p99/max"),
        "{table}"
    );
    assert!(table.contains("vs ceiling 54321"), "{table}");
    let paths = spark_bench::report::render_run(&outcome.dir).unwrap();
    let md = paths.iter().find(|p| p.ends_with("report.md")).unwrap();
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("| harness |"), "the provenance row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ceiling_calibrate_did_not_reach_is_a_note_not_a_reason() {
    // A "ceiling" of 10 chunks/s that was only a lower bound: the run's chunk rate is far
    // over half of it, and the verdict must not blame the harness for that.
    let tmp = testkit::tempdir().unwrap();
    let calibration = tmp.path().join("calibration.json");
    spark_bench::store::save_calibration(&calibration, &calibration_of(10.0, Reach::NotReached))
        .unwrap();
    let options = Options {
        calibration: Some(calibration),
        ..Options::quiet()
    };
    let plan = plan_of("harness.toml", SCENARIO);
    let outcome = runner::run(Arc::new(plan), &tmp.path().join("results"), options)
        .await
        .unwrap();
    let h = outcome.summary.harness.clone().expect("a harness section");
    assert!(h.chunk_rate > 5.0, "{h:?}");
    assert!(!h.ingest_ceiling.as_ref().unwrap().found);
    assert!(
        !h.reasons.iter().any(|r| r.contains("ceiling")),
        "{:?}",
        h.reasons
    );
    assert!(
        h.notes.iter().any(|n| n.contains(
            "did not reach this machine's ingest ceiling; below 10 chunks/s, the highest measured, the harness kept up"
        )),
        "{:?}",
        h.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibrate_far_below_capacity_says_not_reached() {
    // 1,600 and 3,200 chunks/s offered (a debug build on a busy 2-core VM takes tens of
    // thousands), and 10 req/s: every step holds, so neither ramp found a ceiling.
    let plan = calibrate::Plan {
        quick: true,
        ingest_rates: vec![1_600.0, 3_200.0],
        ingest_s: 0.5,
        accuracy_s: 0.3,
        rates: vec![10.0],
        point_s: 2.0,
    };
    let mut lines = Vec::new();
    let c = calibrate::calibrate(&plan, &mut |l: &str| lines.push(l.to_string()))
        .await
        .unwrap();
    println!("{}", lines.join("\n"));
    assert_eq!(c.ingest.reach, Reach::NotReached, "{:?}", c.ingest);
    assert_eq!(c.ingest_ramp.len(), 2);
    assert!(c.ingest_ramp.iter().all(calibrate::step_held), "{c:?}");
    // The bound is what was measured (about the top offered rate), never more.
    assert!(
        c.ingest.bound > 3_200.0 * 0.9 && c.ingest.bound < 3_200.0 * 1.1,
        "{:?}",
        c.ingest
    );
    assert_eq!(c.ingest_chunks_s, c.ingest.bound);
    assert!(!c.ceiling().found);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ingest ceiling not reached at ")),
        "{lines:?}"
    );
    assert_eq!(
        c.request_rate.reach,
        Reach::NotReached,
        "{:?}",
        c.request_rate
    );
    assert_eq!(c.request_rate.bound, c.max_request_rate);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("request-rate ceiling not reached at ")),
        "{lines:?}"
    );
}
