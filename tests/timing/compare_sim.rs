//! The CI gate end to end against the real simulator: `spark-bench run`'s library path
//! (`load_plan` + `runner::run`) drives three embedded simulators — a baseline profile, the
//! same with +10 % TTFT, and the same with −10 % decode speed — and the gate compares the
//! results directories with default settings.
//!
//! The simulators run with custom profiles (derived from the built-in `fast` one) and are
//! reached as ordinary `base_url` targets, so one scenario file (one scenario hash) serves
//! every run; only the `--targets` file differs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use spark_bench::cli::{Cli, Command};
use spark_bench::commands::run::load_plan;
use spark_bench::compare::{
    compare_loaded, exit_code, gate_comparison, GateMetric, Settings, Verdict,
};
use spark_bench::runner::{self, Options};
use spark_bench::sim::{self, Profile, SimConfig};
use spark_bench::store::LoadedRun;

/// 40 sessions × 3 short turns = 120 measured requests per run: enough for p50 and p90
/// (p99 stays inconclusive, as it should). `cache = "as-is"`: the simulators are reached as
/// real endpoints, whose default (`cold`) would salt every prompt with a per-run key, and
/// the simulator's answers follow the prompt; every run must replay the same conversations.
const SCENARIO: &str = r#"
name = "gate-e2e"
seed = 1
system_prompt = "You are terse."
max_output_tokens = 12

[load]
sessions = 40
concurrency = 8
warmup_sessions = 1
cache = "as-is"

[matrix]
targets = ["gate-sim"]
transports = ["http-pooled"]

[[turns]]
prompt = "Write a function that reverses a string."

[[turns]]
prompt = "Handle None."

[[turns]]
prompt = "Add a docstring."
"#;

/// The baseline deployment: ~40 ms to the first token, 400 tok/s decode. Times are kept
/// well above the scheduler jitter of a loaded 2-core debug build (a 2000 tok/s profile's
/// 0.5 ms token gaps moved ±20 % between A/A runs there).
fn base_profile() -> Profile {
    let mut p = Profile::builtin("fast").expect("built-in profile");
    p.name = "gate-base".into();
    p.api_base = Duration::from_millis(40);
    p.api_per_input_token = Duration::ZERO;
    p.session_init = Duration::from_micros(500);
    p.decode_tok_s = 400.0;
    p.chunk_tokens = vec![1.0];
    p.step_jitter = 0.1;
    p
}

async fn start(profile: Profile) -> sim::SimHandle {
    let mut cfg = SimConfig::new(profile);
    cfg.seed = 7;
    sim::spawn(cfg).await.expect("simulator starts")
}

/// Runs the scenario against the simulator at `base_url` with `seed`; returns the run dir.
async fn run_once(dir: &Path, base_url: &str, seed: u64, tag: &str) -> PathBuf {
    let scenario = dir.join("gate-e2e.toml");
    if !scenario.exists() {
        std::fs::write(&scenario, SCENARIO).unwrap();
    }
    let targets = dir.join(format!("targets-{tag}.toml"));
    std::fs::write(
        &targets,
        format!(
            "[targets.gate-sim]\nbase_url = \"{base_url}\"\napi = \"responses\"\nmodel = \"sim-model\"\n"
        ),
    )
    .unwrap();
    let cli = Cli::try_parse_from([
        "spark-bench".to_string(),
        "run".into(),
        scenario.display().to_string(),
        "--targets".into(),
        targets.display().to_string(),
        "--seed".into(),
        seed.to_string(),
        "--quiet".into(),
    ])
    .unwrap();
    let Command::Run(args) = cli.command else {
        unreachable!("parsed a run command")
    };
    let plan = load_plan(&args).unwrap();
    let outcome = runner::run(Arc::new(plan), &dir.join("results"), Options::quiet())
        .await
        .unwrap();
    assert!(!outcome.interrupted);
    outcome.dir
}

fn gate(base: &Path, cand: &Path) -> spark_bench::compare::Comparison {
    let (b, c) = (
        LoadedRun::open(base).unwrap(),
        LoadedRun::open(cand).unwrap(),
    );
    compare_loaded(&b, &c, &Settings::default(), false).unwrap()
}

/// The false-positive and detection rates against the real simulator: 21 baseline runs
/// (different seeds) give 20 consecutive A/A pairs; +10 % TTFT and −10 % decode speed are
/// each compared against those baselines in 20 trials. Default settings throughout.
///
/// Ignored in the normal suite: it measures the host as much as the gate. When other tests
/// run in the same process (the synthetic gate tests bootstrap on both cores), client-side
/// CPU contention moves TTFT p50 by up to 14 % between two runs made seconds apart, and the
/// gate rightly reports that. Run it alone:
/// `cargo test --test integration compare_sim -- --ignored --test-threads=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_rates_against_the_simulator() {
    let _serial = crate::support::sim_client::SERIAL.lock().await;
    let tmp = testkit::tempdir().unwrap();
    let base_sim = start(base_profile()).await;
    let slow_ttft = start(Profile {
        name: "gate-slow-ttft".into(),
        // +4.5 ms on a measured ~44 ms TTFT (40 ms API work + client and loopback
        // time): the measured p50 TTFT moves by ~10 % (the test prints the realised shift).
        api_base: Duration::from_micros(44_500),
        session_init: Duration::from_micros(550),
        ..base_profile()
    })
    .await;
    let slow_decode = start(Profile {
        name: "gate-slow-decode".into(),
        decode_tok_s: 360.0,
        ..base_profile()
    })
    .await;

    // Runs are interleaved (baseline, slow-TTFT, slow-decode, next baseline, …) so every
    // comparison is between runs made back to back, as a CI job does: the host's load
    // drifts over a minute, and that drift is not what the gate is asked about.
    let trials = 20usize;
    let (mut baselines, mut slow) = (Vec::new(), [Vec::new(), Vec::new()]);
    for i in 0..=trials {
        let seed = 100 + i as u64;
        baselines.push(run_once(tmp.path(), &base_sim.base_url, seed, "base").await);
        if i < trials {
            slow[0].push(run_once(tmp.path(), &slow_ttft.base_url, seed + 1000, "slow-ttft").await);
            slow[1].push(
                run_once(
                    tmp.path(),
                    &slow_decode.base_url,
                    seed + 2000,
                    "slow-decode",
                )
                .await,
            );
        }
    }

    // A/A: 21 baseline runs, 20 consecutive pairs.
    let mut aa_failed = 0;
    for i in 0..trials {
        let c = tokio::task::block_in_place(|| gate(&baselines[i], &baselines[i + 1]));
        if c.fails() {
            aa_failed += 1;
            eprintln!(
                "sim A/A false positive {i}-{}:\n{}",
                i + 1,
                spark_bench::compare::render::text(&c)
            );
        }
    }
    eprintln!("sim A/A: {aa_failed}/{trials} comparisons failed the gate");

    let mut detected = [0u32; 2];
    let mut shifts: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    // A decode slowdown shows in `decode_tok_s`, `tpot` (its inverse, per token) and
    // `output_tok_s`; any of them regressing is the gate catching it.
    let decode = [
        GateMetric::DecodeTokS,
        GateMetric::Tpot,
        GateMetric::OutputTokS,
    ];
    for (k, (tag, metrics)) in [
        ("slow-ttft", &[GateMetric::Ttft][..]),
        ("slow-decode", &decode[..]),
    ]
    .into_iter()
    .enumerate()
    {
        for i in 0..trials {
            let c = tokio::task::block_in_place(|| gate(&baselines[i], &slow[k][i]));
            let hit = c
                .rows
                .iter()
                .any(|r| metrics.contains(&r.metric) && r.verdict == Verdict::Regressed);
            if let Some(ch) = c
                .rows
                .iter()
                .find(|r| r.metric == metrics[0] && r.statistic.name() != "p90")
                .and_then(|r| r.change)
            {
                shifts[k].push(ch);
            }
            // Medians and means only: a tail can move either way with host contention.
            assert!(
                !c.rows.iter().any(|r| metrics.contains(&r.metric)
                    && r.verdict == Verdict::Improved
                    && matches!(r.statistic.name(), "p50" | "mean")),
                "a slowdown read as an improvement:\n{}",
                spark_bench::compare::render::text(&c)
            );
            if exit_code(&c) == 1 && hit {
                detected[k] += 1;
            } else {
                eprintln!(
                    "sim {tag} trial {i} not flagged:\n{}",
                    spark_bench::compare::render::text(&c)
                );
            }
        }
        shifts[k].sort_by(f64::total_cmp);
        eprintln!(
            "sim {tag}: flagged {}/{trials}; realised {} change: median {:+.1}% (min {:+.1}%, max {:+.1}%)",
            detected[k],
            metrics[0],
            100.0 * shifts[k][shifts[k].len() / 2],
            100.0 * shifts[k][0],
            100.0 * shifts[k][shifts[k].len() - 1]
        );
    }
    // Measured here (2 shared cores, debug build, other jobs running): A/A 0/20; +10 %
    // TTFT 19/20 (the realised shift ranged +5.6 % … +14.4 %: host drift between two runs
    // made seconds apart moves it by a few percent); −10 % decode 20/20. The bounds are the
    // issue's: at most 1 of 20 A/A pairs may fail, at least 19 of 20 slowdowns must be
    // caught. This runs in the `timing` test binary, alone on the machine.
    assert!(aa_failed <= 1, "A/A false positives {aa_failed}/{trials}");
    assert!(
        detected[0] >= 19,
        "+10% TTFT flagged {}/{trials}",
        detected[0]
    );
    assert!(
        detected[1] >= 19,
        "-10% decode flagged {}/{trials}",
        detected[1]
    );
}

/// End to end in the normal suite, robust to a busy host: a baseline run saved as a named
/// baseline, then `run --baseline`'s gate against a deployment whose TTFT is 2.5× longer
/// (exit 1, `ttft` regressed), and the CLI comparing a run with itself (exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_catches_a_large_slowdown_end_to_end() {
    let _serial = crate::support::sim_client::SERIAL.lock().await;
    let tmp = testkit::tempdir().unwrap();
    let base_sim = start(base_profile()).await;
    let slow_sim = start(Profile {
        name: "gate-much-slower".into(),
        api_base: Duration::from_millis(100),
        ..base_profile()
    })
    .await;
    let base = run_once(tmp.path(), &base_sim.base_url, 1, "base").await;
    spark_bench::store::save_baseline(&tmp.path().join("results"), &base, "main").unwrap();
    let slow = run_once(tmp.path(), &slow_sim.base_url, 2, "slow").await;

    let code = tokio::task::block_in_place(|| gate_comparison("main", &slow, &[]))
        .map(|c| exit_code(&c))
        .unwrap();
    assert_eq!(code, 1);
    let c = tokio::task::block_in_place(|| gate(&base, &slow));
    let ttft = c
        .rows
        .iter()
        .find(|r| r.metric == GateMetric::Ttft && r.statistic.name() == "p50")
        .unwrap();
    assert_eq!(ttft.verdict, Verdict::Regressed, "{}", ttft.reason);
    assert!(ttft.change.unwrap() > 0.5, "{ttft:?}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spark-bench"))
        .arg("compare")
        .arg(&base)
        .arg(&base)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("REGRESSED"), "{text}");
}
