//! `run --sweep` end to end against the embedded simulator with a known capacity
//! (`profiles/cap8.toml`: 8 generations at once, FIFO beyond): the knee lands at the capacity,
//! TTFT is flat below it and grows as the queue predicts above it; goodput in summary.json
//! equals what `scripts/goodput.py` counts from requests.csv.

use std::path::{Path, PathBuf};

use spark_bench::recorder::sweep::SweepSummary;
use spark_bench::sim::Profile;

const MAX_OUTPUT: u32 = 100;

fn profile_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/cap8.toml")
}

/// Mean slot time of one request on cap8, s: the first chunk comes out of prefill, the rest
/// decode at `decode_tok_s`; outputs are 70–100 % of max_output_tokens (mean 85 %).
fn slot_s(p: &Profile) -> f64 {
    let first_chunk = p.chunk_tokens.len() as f64; // weight only on the last: k tokens per chunk
    (0.85 * f64::from(MAX_OUTPUT) - first_chunk) / p.decode_tok_s
}

fn scenario(dir: &Path, slo: &str) -> PathBuf {
    let text = format!(
        "name = \"cap8\"\nlink = \"none\"\nmax_output_tokens = {MAX_OUTPUT}\n[load]\nsessions = 8\n[matrix]\ntargets = [\"cap8\"]\ntransports = [\"http2\"]\n[targets.cap8]\nsim_profile_file = {:?}\n{slo}\n[[turns]]\nprompt = \"Write a function that adds two numbers.\"\n",
        profile_path().display().to_string()
    );
    crate::support::run::scenario(dir, "cap8.toml", &text)
}

async fn sweep(scenario: &Path, out: &Path, spec: &str) -> (PathBuf, SweepSummary) {
    let argv = [
        "spark-bench",
        "run",
        &scenario.display().to_string(),
        "--out",
        &out.display().to_string(),
        "--sweep",
        spec,
        "--quiet",
        "--no-report",
    ];
    let cli = <spark_bench::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let spark_bench::cli::Command::Run(args) = cli.command else {
        unreachable!()
    };
    let code = spark_bench::commands::run::execute(args).await.unwrap();
    assert_eq!(code, 0);
    let dir = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("sweep.json").is_file())
        .expect("a sweep directory");
    let s = spark_bench::store::read_sweep(&dir).unwrap();
    // A point whose run judged itself harness-bound is left out of the knee: say why.
    for p in &s.points {
        let summary = std::fs::read_to_string(dir.join(&p.dir).join("summary.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&summary).unwrap();
        if v["harness"]["verdict"] == "harness-bound" {
            eprintln!(
                "point {}: harness-bound: {}",
                p.value, v["harness"]["reasons"]
            );
        }
    }
    (dir, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_sweep_finds_the_capacity_and_goodput_matches_the_script() {
    let tmp = testkit::tempdir().unwrap();
    let profile = Profile::from_toml_file(&profile_path(), "gpu").unwrap();
    assert_eq!(profile.capacity, 8);
    let slot = slot_s(&profile);
    let sc = scenario(tmp.path(), "[slo]\nttft = \"40ms\"\ne2e = \"p90<=5s\"");
    let started = std::time::Instant::now();
    let (dir, s) = sweep(&sc, tmp.path(), "concurrency=1,2,4,6,8,10,12,16").await;
    eprintln!("{}", spark_bench::recorder::sweep::sweep_table(&s));
    eprintln!("sweep wall time {:?}", started.elapsed());
    assert_eq!(s.points.len(), 8);
    assert_eq!(s.curves.len(), 1);
    let c = &s.curves[0];
    let knee = c.knee_value.expect("a knee");
    assert!(
        (6.0..=10.0).contains(&knee),
        "knee at {knee}, expected 8 ± 1 step: {:?}",
        c.knee_reason
    );
    // TTFT flat up to the capacity: within 10 ms of concurrency 1.
    let base = c.points[0].ttft_ms[0];
    for p in c.points.iter().filter(|p| p.value <= 8.0) {
        assert!(
            p.ttft_ms[0] - base < 10.0,
            "TTFT p50 {} at {} vs {base}",
            p.ttft_ms[0],
            p.value
        );
    }
    // Above it a FIFO queue: at 16 in flight, 8 wait one slot time each.
    let p16 = c.points.last().unwrap();
    let wait_ms = p16.ttft_ms[0] - base;
    let predicted = (16.0 - 8.0) / 8.0 * slot * 1e3;
    assert!(
        wait_ms > 0.5 * predicted && wait_ms < 1.8 * predicted,
        "TTFT p50 rose {wait_ms:.1} ms at 16, a FIFO queue predicts {predicted:.1} ms"
    );
    // Throughput at saturation: capacity / slot time.
    let cap_rate = 8.0 / (slot + 0.002);
    assert!(
        (p16.achieved_req_s / cap_rate - 1.0).abs() < 0.35,
        "{} req/s at 16, capacity rate {cap_rate:.1}",
        p16.achieved_req_s
    );
    // Goodput: scripts/goodput.py over each point's requests.csv counts what summary.json says.
    let mut total_good = 0;
    for point in &s.points {
        let run = dir.join(&point.dir);
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
        let g = &summary["cells"][0]["goodput"];
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/goodput.py");
        let out = std::process::Command::new("python3")
            .arg(&script)
            .arg(&run)
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap())
                .unwrap();
        assert_eq!(line["good_requests"], g["good_requests"], "{}", point.dir);
        assert_eq!(
            line["good_output_tokens"], g["good_output_tokens"],
            "{}",
            point.dir
        );
        let (a, b) = (
            line["good_req_s"].as_f64().unwrap(),
            g["good_req_s"].as_f64().unwrap(),
        );
        assert!((a - b).abs() <= 1e-6 * b.max(1.0), "{a} vs {b}");
        total_good += g["good_requests"].as_u64().unwrap();
    }
    // TTFT <= 40 ms holds below the capacity and not in the queue above it: some good, not all.
    let total: u64 = c.points.iter().map(|p| p.ok).sum();
    assert!(
        total_good > 0 && total_good < total,
        "{total_good} of {total} good"
    );
    // Every point is a run directory `report` reads; the sweep report renders.
    spark_bench::store::LoadedRun::open(&dir.join(&s.points[0].dir)).unwrap();
    let written = spark_bench::report::sweep::render_sweep(&dir).unwrap();
    assert!(written.iter().any(|p| p.ends_with("charts/sweep_ttft.svg")));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let knee_text = spark_bench::recorder::sweep::num(knee);
    assert!(
        md.contains(&format!("| cap8 | http2 | concurrency {knee_text} |")),
        "{md}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_sweep_finds_the_capacity_rate() {
    let tmp = testkit::tempdir().unwrap();
    let profile = Profile::from_toml_file(&profile_path(), "gpu").unwrap();
    // Capacity request rate: 8 slots / slot time (plus the client's share, ~2 ms).
    let cap_rate = f64::from(profile.capacity) / (slot_s(&profile) + 0.002);
    let rates: Vec<String> = [0.25, 0.5, 0.75, 1.0, 1.3, 1.6]
        .iter()
        .map(|f| format!("{:.0}", f * cap_rate))
        .collect();
    let sc = scenario(tmp.path(), "");
    let (_, s) = sweep(&sc, tmp.path(), &format!("rate={}", rates.join(","))).await;
    eprintln!("{}", spark_bench::recorder::sweep::sweep_table(&s));
    let c = &s.curves[0];
    let knee = c.knee_value.expect("a knee");
    // ±1 step around the capacity rate (the 1.0 point).
    let r = |i: usize| rates[i].parse::<f64>().unwrap();
    assert!(
        knee >= r(2) && knee <= r(4),
        "knee at {knee} req/s, capacity rate {cap_rate:.1}: {:?}",
        c.knee_reason
    );
    // Below the capacity the achieved rate follows the requested one.
    let p = &c.points[1];
    assert!(
        (p.achieved_req_s / p.value - 1.0).abs() < 0.3,
        "{} vs {}",
        p.achieved_req_s,
        p.value
    );
}
