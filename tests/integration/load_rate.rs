//! Load shapes end to end against the embedded simulator's `fast` profile: an open-loop
//! constant request rate (intended starts 1/rate apart, dispatches at the rate), `duration`
//! as a stop condition, and `max_in_flight` as a cap, all read back from `requests.csv`.

use spark_bench::store::LoadedRun;
use spark_bench::vocab::RequestRecord;

use crate::support::run::{ms, records, run_lib, scenario};

/// A one-turn scenario on the `fast` simulator with `load` as its `[load]` table.
fn text(load: &str, link: &str, max_tokens: u32) -> String {
    format!(
        "name = \"rate\"\nseed = 3\nmax_output_tokens = {max_tokens}\nlink = \"{link}\"\n[load]\n{load}\n[matrix]\ntargets = [\"sim-fast\"]\ntransports = [\"http2\"]\n[targets.sim-fast]\nsim_profile = \"fast\"\n[[turns]]\nprompt = \"Say OK.\"\n"
    )
}

async fn run(load: &str, link: &str, max_tokens: u32) -> Vec<RequestRecord> {
    let tmp = testkit::tempdir().unwrap();
    let path = scenario(tmp.path(), "rate.toml", &text(load, link, max_tokens));
    let outcome = run_lib(&path, &tmp.path().join("results"), &["--no-report"]).await;
    assert!(!outcome.interrupted);
    let run = LoadedRun::open(&outcome.dir).unwrap();
    records(&run).into_iter().filter(|r| !r.warmup).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constant_rate_is_planned_one_gap_apart_and_achieved_within_2_percent() {
    let rate = 200.0;
    let recs = run(
        "rate = 200\narrival = \"constant\"\nduration = \"2s\"",
        "none",
        4,
    )
    .await;
    // 2 s at 200/s: 400 single-request sessions, all answered.
    assert_eq!(recs.len(), 400);
    let failed: Vec<_> = recs.iter().filter(|r| !r.is_ok()).collect();
    assert!(
        failed.is_empty(),
        "{} failed, e.g. {:?}",
        failed.len(),
        failed.first().map(|r| &r.outcome)
    );
    let mut intended: Vec<u64> = recs.iter().map(|r| r.intended_ns).collect();
    intended.sort_unstable();
    for w in intended.windows(2) {
        let gap = w[1] - w[0];
        assert!(
            gap.abs_diff(5_000_000) <= 1_000,
            "intended gap {} ms",
            ms(gap)
        );
    }
    let mut dispatch: Vec<u64> = recs.iter().map(|r| r.dispatch_ns).collect();
    dispatch.sort_unstable();
    // The achieved rate: the least-squares slope of the dispatch instants against their
    // rank (one late dispatch at either end cannot swing it, as it would first-to-last).
    let n = dispatch.len() as f64;
    let t: Vec<f64> = dispatch
        .iter()
        .map(|d| (d - dispatch[0]) as f64 / 1e9)
        .collect();
    let mean_k = (n - 1.0) / 2.0;
    let mean_t = t.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (k, tk) in t.iter().enumerate() {
        sxy += (k as f64 - mean_k) * (tk - mean_t);
        sxx += (k as f64 - mean_k) * (k as f64 - mean_k);
    }
    let achieved = sxx / sxy;
    // Every request is measured from its intended start, never before it.
    assert!(recs.iter().all(|r| r.dispatch_ns >= r.intended_ns));
    let lags: Vec<f64> = recs
        .iter()
        .map(|r| ms(r.dispatch_ns - r.intended_ns))
        .collect();
    let worst = lags.iter().copied().fold(0.0, f64::max);
    assert!(
        (achieved / rate - 1.0).abs() < 0.02,
        "achieved {achieved:.1} requests/s for {rate} (worst dispatch lag {worst:.1} ms)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duration_stops_dispatch_and_keeps_a_closed_loop_going_until_then() {
    let recs = run("concurrency = 2\nduration = \"1s\"", "rtt=10ms", 8).await;
    let start = recs.iter().map(|r| r.intended_ns).min().unwrap();
    let last = recs.iter().map(|r| r.intended_ns).max().unwrap();
    let last_sent = recs.iter().map(|r| r.dispatch_ns).max().unwrap();
    let sessions: std::collections::HashSet<u32> = recs.iter().map(|r| r.session).collect();
    // Sessions cycled with fresh indices the whole second (each takes ~10–20 ms)…
    assert!(sessions.len() > 20, "{} sessions", sessions.len());
    assert!(
        last - start > 800_000_000,
        "last start at {} ms",
        ms(last - start)
    );
    // …and none intended after it was sent (a closed loop's requests are intended when a
    // slot frees, so they are sent then, up to the scheduler's slack).
    assert!(
        last - start < 1_000_000_000,
        "last start at {} ms",
        ms(last - start)
    );
    assert!(
        last_sent - start < 1_200_000_000,
        "last dispatch at {} ms",
        ms(last_sent - start)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_is_never_exceeded_and_the_wait_counts_from_the_intended_start() {
    // 300 requests/s of ~25–35 ms each would keep ~8 in flight; the cap holds it at 3
    // (~90/s). Every request intended within the second is still sent, late, measured from
    // its intended start: the seeded plan has 308.
    let recs = run(
        "rate = 300\nduration = \"1s\"\nmax_in_flight = 3",
        "rtt=20ms",
        16,
    )
    .await;
    assert_eq!(recs.len(), 308);
    // Sweep dispatch (+1) and end (−1) instants; an end at the same instant comes first.
    let mut events: Vec<(u64, i32)> = Vec::new();
    for r in &recs {
        events.push((r.dispatch_ns, 1));
        events.push((r.end_ns.unwrap(), -1));
    }
    events.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    assert_eq!(most, 3, "most requests in flight");
    // The cap made requests wait, and the wait is in their latency from the intended start.
    let lag = recs
        .iter()
        .map(|r| r.dispatch_ns - r.intended_ns)
        .max()
        .unwrap();
    assert!(lag > 1_000_000_000, "largest dispatch lag {} ms", ms(lag));
    assert!(recs
        .iter()
        .filter(|r| r.is_ok())
        .all(|r| r.dispatch_ns >= r.intended_ns && r.first_token_ns.unwrap() > r.dispatch_ns));
}
