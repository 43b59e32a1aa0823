//! Synthetic workloads end to end: `[workload]` draws input lengths (lognormal mean 2000,
//! sd 600) and output lengths (normal mean 300, sd 50) per session; the run against the
//! embedded simulator must see exactly those lengths, so the server-reported token means in
//! `requests.csv` match the requested distribution within 2%.

use std::time::Instant;

use spark_bench::plan::workload::tokens_by_rule;
use spark_bench::sim::text;
use spark_bench::store::LoadedRun;

use crate::support::run::{records, run_lib, scenario};

const SESSIONS: usize = 1200;

/// The scenario, against the `fast` simulator at `base_url` (a chat-completions endpoint as
/// a user would point at vLLM; the prefix-cache salt is off so prompts arrive as drawn).
fn synthetic(base_url: &str) -> String {
    format!(
        r#"
name = "synthetic-check"
seed = 7

[load]
sessions = {SESSIONS}
concurrency = 64
cache = "as-is"

[matrix]
targets = ["fast-chat"]
transports = ["http-pooled"]

[targets.fast-chat]
base_url = "{base_url}"
model = "sim-fast"
api = "chat-completions"
ignore_eos = true

[workload]
input_tokens = {{ dist = "lognormal", mean = 2000, sd = 600 }}
output_tokens = {{ dist = "normal", mean = 300, sd = 50 }}
"#
    )
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn within(measured: f64, wanted: f64, share: f64) -> bool {
    (measured - wanted).abs() <= wanted * share
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_token_lengths_reach_the_server_as_drawn() {
    let started = Instant::now();
    // The `fast` profile in 16-token chunks: the lengths are what is checked here, and fewer
    // chunks keep the run to a few seconds of CPU.
    let mut profile = spark_bench::sim::Profile::builtin("fast").unwrap();
    profile.chunk_tokens = [vec![0.0; 15], vec![1.0]].concat();
    let sim = spark_bench::sim::spawn(spark_bench::sim::SimConfig::new(profile))
        .await
        .unwrap();
    let tmp = testkit::tempdir().unwrap();
    let s = scenario(tmp.path(), "synthetic.toml", &synthetic(&sim.base_url));
    let out = tmp.path().join("results");
    let outcome = run_lib(&s, &out, &[]).await;
    let run = LoadedRun::open(&outcome.dir).unwrap();
    let plan = run.manifest.plan().unwrap();
    let info = plan
        .workload
        .clone()
        .expect("the plan records the workload");
    assert_eq!(info.sizing, "chars/4");
    assert_eq!(plan.sessions.len(), SESSIONS);

    // The generated prompts: the simulator's tokenizer and the sizing rule agree exactly.
    for s in &plan.sessions {
        let t = &s.turns[0].user_text;
        assert_eq!(text::count(t), tokens_by_rule(t), "{t:?}");
    }

    let recs = records(&run);
    assert_eq!(recs.len(), SESSIONS);
    let mut drawn_in = Vec::new();
    let mut drawn_out = Vec::new();
    for r in &recs {
        assert!(r.is_ok(), "{r:?}");
        let turn = &plan.sessions.get(r.session as usize).unwrap().turns[r.turn as usize];
        let want_in = tokens_by_rule(&turn.user_text);
        // The simulator's chat template: one newline token per message (no system prompt).
        assert_eq!(r.input_tokens, Some(want_in + 1), "session {}", r.session);
        // ignore_eos: the whole drawn length, not an early stop.
        assert_eq!(
            r.output_tokens, turn.max_output_tokens,
            "session {}",
            r.session
        );
        drawn_in.push(f64::from(want_in));
        drawn_out.push(f64::from(turn.max_output_tokens));
    }
    let measured_in = mean(recs.iter().map(|r| f64::from(r.input_tokens.unwrap() - 1)));
    let measured_out = mean(recs.iter().map(|r| f64::from(r.output_tokens)));
    let drawn_in = mean(drawn_in.into_iter());
    let drawn_out = mean(drawn_out.into_iter());
    eprintln!(
        "synthetic: input mean {measured_in:.1} (drawn {drawn_in:.1}, requested 2000), output mean {measured_out:.1} (drawn {drawn_out:.1}, requested 300), {SESSIONS} requests in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!((drawn_in - info.mean_input_tokens).abs() < 1e-3);
    assert!((drawn_out - info.mean_output_tokens).abs() < 1e-3);
    for (m, d, want, what) in [
        (measured_in, drawn_in, 2000.0, "input"),
        (measured_out, drawn_out, 300.0, "output"),
    ] {
        assert!(
            within(m, want, 0.02),
            "{what}: measured {m:.1} vs requested {want}"
        );
        assert!(
            within(m, d, 0.02),
            "{what}: measured {m:.1} vs drawn {d:.1}"
        );
    }
    // The summary shows the same means per cell (input as the server reported it).
    let cell = &run.summary.cells[0];
    let sum_in = cell.mean_input_tokens.unwrap();
    let sum_out = cell.mean_output_tokens.unwrap();
    assert!((sum_in - (measured_in + 1.0)).abs() < 1e-6, "{sum_in}");
    assert!((sum_out - measured_out).abs() < 1e-6, "{sum_out}");
    assert!(spark_bench::recorder::table(&run.summary).contains("tokens in/out"));
}
