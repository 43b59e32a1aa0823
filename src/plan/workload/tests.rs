//! Tests of `plan::workload`: the seeded draws' moments, the text generator's exact sizes,
//! both dataset formats and their errors, and plans built from `[workload]` scenarios.

use std::path::Path;

use super::*;
use crate::plan::{build, Overrides, Plan};
use crate::scenario;

fn spec(text: &str) -> DistSpec {
    #[derive(serde::Deserialize)]
    struct W {
        d: DistSpec,
    }
    toml::from_str::<W>(&format!("d = {text}")).unwrap().d
}

fn moments(d: &Dist, n: usize, seed: u64) -> (f64, f64) {
    let mut rng = Rng::new(seed);
    let xs: Vec<f64> = (0..n).map(|_| f64::from(d.draw(&mut rng))).collect();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    (mean, var.sqrt())
}

#[test]
fn draws_have_the_requested_mean_and_sd() {
    let ln = Dist::new(
        &spec("{ dist = \"lognormal\", mean = 2000, sd = 600 }"),
        "x",
        MAX_INPUT_TOKENS,
    )
    .unwrap();
    let (m, sd) = moments(&ln, 40_000, 1);
    assert!((m - 2000.0).abs() < 2000.0 * 0.01, "lognormal mean {m}");
    assert!((sd - 600.0).abs() < 600.0 * 0.03, "lognormal sd {sd}");
    // The mean and sd are of the count itself: mu/sigma are derived from them.
    let (mu, sigma) = lognormal_params(2000.0, 600.0);
    assert!((sigma - (1.09f64).ln().sqrt()).abs() < 1e-12 && mu < 2000f64.ln());
    let n = Dist::new(
        &spec("{ dist = \"normal\", mean = 300, sd = 50 }"),
        "x",
        MAX_OUTPUT_TOKENS_LIMIT,
    )
    .unwrap();
    let (m, sd) = moments(&n, 40_000, 2);
    assert!((m - 300.0).abs() < 3.0, "normal mean {m}");
    assert!((sd - 50.0).abs() < 1.5, "normal sd {sd}");
    let u = Dist::new(
        &spec("{ dist = \"uniform\", min = 10, max = 20 }"),
        "x",
        100,
    )
    .unwrap();
    let mut rng = Rng::new(3);
    let xs: Vec<u32> = (0..5000).map(|_| u.draw(&mut rng)).collect();
    assert!(xs.iter().all(|x| (10..=20).contains(x)));
    assert!(xs.contains(&10) && xs.contains(&20));
    let (m, _) = moments(&u, 40_000, 4);
    assert!((m - 15.0).abs() < 0.1, "uniform mean {m}");
    let f = Dist::new(&spec("{ dist = \"fixed\", value = 77 }"), "x", 100).unwrap();
    assert_eq!(moments(&f, 100, 5), (77.0, 0.0));
    // Clamps cut the tails.
    let c = Dist::new(
        &spec("{ dist = \"normal\", mean = 300, sd = 200, min = 250, max = 350 }"),
        "x",
        1000,
    )
    .unwrap();
    let mut rng = Rng::new(6);
    assert!((0..2000).all(|_| (250..=350).contains(&c.draw(&mut rng))));
}

#[test]
fn bad_distributions_say_what_to_write() {
    let err = |t: &str| {
        Dist::new(&spec(t), "[workload] input_tokens at s.toml:3:1", 1000)
            .unwrap_err()
            .to_string()
    };
    let e = err("{ dist = \"normal\", mean = 300 }");
    assert!(
        e.starts_with("[workload] input_tokens at s.toml:3:1: dist = \"normal\" needs `sd`"),
        "{e}"
    );
    let e = err("{ dist = \"fixed\", value = 3, sd = 1 }");
    assert!(e.contains("`sd` does not apply to dist = \"fixed\""), "{e}");
    let e = err("{ dist = \"uniform\", min = 30, max = 20 }");
    assert!(e.contains("min ≤ max"), "{e}");
    let e = err("{ dist = \"lognormal\", mean = 5000, sd = 1 }");
    assert!(e.contains("outside the clamps"), "{e}");
    let e = err("{ dist = \"normal\", mean = 0, sd = 1 }");
    assert!(e.contains("at least 1"), "{e}");
}

#[test]
fn synthetic_text_is_exactly_four_characters_per_token() {
    let mut rng = Rng::new(11);
    for n in (1..300).chain([1999, 2000, 4096]) {
        let t = synthetic_text(&mut rng, n);
        assert_eq!(t.chars().count(), 4 * n as usize, "{n}: {t:?}");
        assert_eq!(tokens_by_rule(&t), n);
        assert!(t.is_ascii() && !t.contains("  "), "{t:?}");
    }
    for list in WORDS.iter().enumerate() {
        assert!(
            list.1.iter().all(|w| w.len() == 4 * list.0 + 3),
            "{:?}",
            list.1
        );
    }
    assert!(OPENERS.iter().all(|w| w.len() == 4));
    // The simulator's tokenizer agreeing with this is checked in tests/integration/workload.rs
    // (plan code may not import the simulator).
}

const OPENAI: &str = r#"{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"},{"role":"assistant","content":"0123456789"},{"role":"user","content":[{"type":"text","text":"and again"}]}]}

{"messages":[{"role":"assistant","content":"greeting"},{"role":"user","content":"q"},{"role":"tool","content":"x"},{"role":"assistant","content":"abcd"}]}
"#;

#[test]
fn both_dataset_formats_parse_and_are_detected() {
    let (c, bad) = parse_dataset("d.jsonl", OPENAI, None, false).unwrap();
    assert!(bad.is_empty());
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].line, 1);
    assert!(c[0].had_system);
    assert_eq!(
        c[0].turns,
        vec![
            (std::sync::Arc::<str>::from("hello there"), Some(3)),
            (std::sync::Arc::<str>::from("and again"), None)
        ]
    );
    assert_eq!(c[1].line, 3);
    assert_eq!(
        c[1].turns,
        vec![(std::sync::Arc::<str>::from("q"), Some(1))]
    );
    let sg = r#"{"id":"a","conversations":[{"from":"human","value":"Write a sort."},{"from":"gpt","value":"12345678901234567"},{"from":"human","value":"Faster?"},{"from":"gpt","value":"yes"}]}"#;
    let (c, _) = parse_dataset("d.jsonl", sg, Some(DatasetFormat::Sharegpt), false).unwrap();
    assert_eq!(
        c[0].turns,
        vec![
            (std::sync::Arc::<str>::from("Write a sort."), Some(5)),
            (std::sync::Arc::<str>::from("Faster?"), Some(1))
        ]
    );
    // A declared format must match.
    let e = parse_dataset("d.jsonl", sg, Some(DatasetFormat::Openai), false).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("d.jsonl:1: no `messages` array (format = \"openai\")"),
        "{e}"
    );
}

#[test]
fn a_bad_line_names_file_and_line_or_is_skipped_and_counted() {
    let text = format!(
        "{}\n{{\"messages\": [{{\"role\": \"robot\", \"content\": \"x\"}}]}}\nnot json\n{{\"conversations\": []}}\n",
        OPENAI.lines().next().unwrap()
    );
    let e = parse_dataset("data/x.jsonl", &text, None, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("data/x.jsonl:2: messages[0] has role \"robot\""),
        "{e}"
    );
    assert!(e.contains("skip_bad_lines = true"), "{e}");
    let (c, bad) = parse_dataset("data/x.jsonl", &text, None, true).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert!(
        bad[1].starts_with("data/x.jsonl:3: not valid JSON"),
        "{bad:?}"
    );
    assert!(
        bad[2].starts_with("data/x.jsonl:4: no user message"),
        "{bad:?}"
    );
}

const SYNTH: &str = r#"name = "s"
[load]
sessions = 400
warmup_sessions = 2
[matrix]
targets = ["sim-wafer"]
transports = ["http2"]
[workload]
input_tokens = { dist = "lognormal", mean = 2000, sd = 600 }
output_tokens = { dist = "normal", mean = 300, sd = 50 }
turns = 2
"#;

fn plan_of(text: &str, seed: Option<u64>) -> Result<Plan, crate::plan::PlanError> {
    let s = scenario::parse("s.toml", text).unwrap();
    let o = Overrides {
        seed,
        ..Default::default()
    };
    build(&s, "s.toml", text.as_bytes(), &o)
}

#[test]
fn synthetic_plans_are_seeded_per_session_and_recorded() {
    let a = plan_of(SYNTH, Some(5)).unwrap();
    let b = plan_of(SYNTH, Some(5)).unwrap();
    let c = plan_of(SYNTH, Some(6)).unwrap();
    let turns = |p: &Plan| serde_json::to_string(&p.sessions).unwrap();
    assert_eq!(turns(&a), turns(&b));
    assert_ne!(turns(&a), turns(&c));
    assert_eq!(a.sessions.len(), 402);
    assert!(a.sessions.iter().all(|s| s.turns.len() == 2));
    // Every session draws its own lengths.
    assert_ne!(
        a.sessions.get(2).unwrap().turns[0].user_text,
        a.sessions.get(3).unwrap().turns[0].user_text
    );
    let w = a.workload.as_ref().unwrap();
    assert_eq!(w.kind, "synthetic");
    assert_eq!(w.sizing, SIZING_CHARS_PER_TOKEN);
    assert_eq!(w.measured_turns, 800);
    assert!(
        (w.mean_input_tokens - 2000.0).abs() < 2000.0 * 0.05,
        "{w:?}"
    );
    assert!((w.mean_output_tokens - 300.0).abs() < 300.0 * 0.02, "{w:?}");
    assert!(
        w.input_tokens
            .as_deref()
            .unwrap()
            .contains("mu 7.5578 sigma 0.2936"),
        "{w:?}"
    );
    // The manifest round trip keeps it, and an older plan without it still loads.
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["workload"]["sizing"], "chars/4");
    let mut old = json.clone();
    old.as_object_mut().unwrap().remove("workload");
    assert!(serde_json::from_value::<Plan>(old)
        .unwrap()
        .workload
        .is_none());
    // The rest of the plan's randomness does not move: hand-written plans have no workload.
    let hand = "name = \"h\"\n[[turns]]\nprompt = \"hi\"\n";
    assert!(plan_of(hand, None).unwrap().workload.is_none());
}

#[test]
fn workload_errors_name_the_key() {
    let both = format!("{SYNTH}[[turns]]\nprompt = \"hi\"\n");
    let e = plan_of(&both, None).unwrap_err().to_string();
    assert!(e.contains("both [[turns]] and [workload]"), "{e}");
    let huge = SYNTH.replace("sessions = 400", "sessions = 100000");
    let e = plan_of(&huge, None).unwrap_err().to_string();
    assert!(e.contains("MiB of prompt text for 100002 sessions"), "{e}");
    let e = plan_of("name = \"x\"\n[workload]\nturns = 2\n", None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("neither `input_tokens` nor `dataset`"), "{e}");
    let e = plan_of(
        "name = \"x\"\n[workload]\ninput_tokens = { dist = \"normal\", mean = 9 }\n",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("[workload] input_tokens at s.toml:3:1: dist = \"normal\" needs `sd`"),
        "{e}"
    );
    let e = plan_of(
        "name = \"x\"\n[workload]\ninput_tokens = { dist = \"fixed\", value = 9 }\nsample = 3\n",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`sample` at s.toml:4:1 applies to a `dataset` only"),
        "{e}"
    );
    let e = scenario::parse(
        "s.toml",
        "name = \"x\"\n[workload]\ninput_tokens = { dist = \"gauss\", mean = 9 }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("gauss") && e.contains("s.toml:3:"), "{e}");
}

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn the_shipped_dataset_scenario_samples_with_the_seed() {
    let loaded = scenario::load(&repo("scenarios/sharegpt.toml")).unwrap();
    let build_with = |sessions: Option<u32>, seed: u64| {
        let o = Overrides {
            seed: Some(seed),
            load: crate::scenario::LoadKnobs {
                sessions,
                ..Default::default()
            },
            ..Default::default()
        };
        build(&loaded.scenario, &loaded.path, loaded.source.as_bytes(), &o).unwrap()
    };
    let p = build_with(None, 3);
    let w = p.workload.as_ref().unwrap();
    assert_eq!(
        (w.kind.as_str(), w.conversations, w.sampled),
        ("dataset", 8, 8)
    );
    assert!(w
        .dataset
        .as_deref()
        .unwrap()
        .ends_with("sample-sharegpt.jsonl"));
    assert!(w.dataset_hash.as_deref().unwrap().starts_with("sha256:"));
    // Every conversation once, in a seeded order.
    assert_eq!(p.sessions.len(), 8);
    let firsts = |p: &Plan| -> Vec<String> {
        p.sessions
            .iter()
            .map(|s| s.turns[0].user_text.to_string())
            .collect()
    };
    let mut sorted = firsts(&p);
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 8);
    assert_eq!(firsts(&p), firsts(&build_with(None, 3)));
    assert_ne!(firsts(&p), firsts(&build_with(None, 4)));
    // Output caps come from the following reply, by the sizing rule.
    let rust = p
        .sessions
        .iter()
        .find(|s| s.turns[0].user_text.starts_with("Write a Rust function"))
        .unwrap();
    assert_eq!(rust.turns.len(), 1);
    let file = std::fs::read_to_string(repo("scenarios/data/sample-sharegpt.jsonl")).unwrap();
    let (convs, _) = parse_dataset("d", &file, None, false).unwrap();
    let reply = convs
        .iter()
        .find(|c| c.turns[0].0.starts_with("Write a Rust"))
        .unwrap()
        .turns[0]
        .1;
    assert_eq!(Some(rust.turns[0].max_output_tokens), reply);
    assert!(rust.turns[0].max_output_tokens > 40 && rust.turns[0].max_output_tokens < 80);
    // More sessions than conversations cycle through the sample.
    let p = build_with(Some(20), 3);
    assert_eq!(p.sessions.len(), 20);
    assert_eq!(
        p.sessions.get(0).unwrap().turns[0].user_text,
        p.sessions.get(8).unwrap().turns[0].user_text
    );
}

#[test]
fn dataset_sample_and_skip_bad_lines() {
    let dir = testkit::tempdir().unwrap();
    std::fs::write(dir.path().join("d.jsonl"), format!("{OPENAI}\nnot json\n")).unwrap();
    let write = |extra: &str| {
        let p = dir.path().join("s.toml");
        std::fs::write(
            &p,
            format!("name = \"d\"\n[matrix]\ntargets = [\"sim-wafer\"]\n[workload]\ndataset = \"d.jsonl\"\n{extra}"),
        )
        .unwrap();
        let l = scenario::load(&p).unwrap();
        build(
            &l.scenario,
            &l.path,
            l.source.as_bytes(),
            &Overrides::default(),
        )
    };
    let e = write("").unwrap_err().to_string();
    assert!(e.contains("d.jsonl:5: not valid JSON"), "{e}");
    let p = write("skip_bad_lines = true\nsample = 1\n").unwrap();
    assert_eq!(p.sessions.len(), 1);
    assert_eq!(p.workload.as_ref().unwrap().skipped_lines, 1);
    assert!(
        p.warnings.iter().any(|w| w.contains("skipped 1 bad line")),
        "{:?}",
        p.warnings
    );
    let e = write("skip_bad_lines = true\nsample = 3\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sample at") && e.contains("has 2 usable conversations"),
        "{e}"
    );
    // A missing file is an error at the `dataset` key.
    std::fs::remove_file(dir.path().join("d.jsonl")).unwrap();
    let p = dir.path().join("s.toml");
    let e = scenario::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("cannot read the [workload] dataset") && e.contains("s.toml:5:1"),
        "{e}"
    );
}

#[test]
fn ignore_eos_needs_chat_completions() {
    let base = "name = \"x\"\n[matrix]\ntargets = [\"t\"]\n[[turns]]\nprompt = \"hi\"\n[targets.t]\nsim_profile = \"wafer\"\nignore_eos = true\n";
    let e = plan_of(base, None).unwrap_err().to_string();
    assert!(
        e.contains("`ignore_eos = true` needs api = \"chat-completions\""),
        "{e}"
    );
    let p = plan_of(&format!("{base}api = \"chat-completions\"\n"), None).unwrap();
    assert!(p.cells[0].target.ignore_eos);
    let line = plan_of(SYNTH, None).unwrap().workload.unwrap().line();
    assert!(
        line.starts_with("workload synthetic input lognormal mean 2000"),
        "{line}"
    );
}

fn data(name: &str) -> (String, String) {
    let p = repo(&format!("tests/data/datasets/{name}"));
    (
        p.display().to_string(),
        std::fs::read_to_string(&p).unwrap(),
    )
}

#[test]
fn vllm_sharegpt_json_array_replays_first_turns_by_vllm_rule() {
    let (path, text) = data("sharegpt_vllm.json");
    for format in [
        None,
        Some(DatasetFormat::SharegptJson),
        Some(DatasetFormat::Sharegpt),
    ] {
        let (c, bad, dropped) = read_dataset(&path, &text, format, false).unwrap();
        assert!(bad.is_empty());
        // Six elements: one with a lone human turn and one empty are left out, as vLLM does.
        assert_eq!(c.len(), 4, "{c:?}");
        assert_eq!(dropped.len(), 2, "{dropped:?}");
        assert!(
            dropped[0].starts_with(&format!("{path}:36: no human turn")),
            "{dropped:?}"
        );
        assert!(
            dropped[1].starts_with(&format!("{path}:45: ")),
            "{dropped:?}"
        );
        // The first element: its first human turn only, capped by the gpt reply after it.
        assert_eq!(c[0].line, 2);
        assert_eq!(c[0].turns.len(), 1);
        assert!(c[0].turns[0].0.starts_with("Summarize the main idea"));
        let reply = "The text says spark-bench is a tool that measures latency of streaming APIs. It focuses on what a developer feels while waiting for tokens.";
        assert_eq!(c[0].turns[0].1, Some(tokens_by_rule(reply)));
        // Escapes are decoded.
        assert_eq!(
            &*c[1].turns[0].0,
            "What is a \"prefix cache\"?\nAnswer briefly."
        );
        // A conversation opening with the assistant: its first human turn.
        assert_eq!(&*c[2].turns[0].0, "Write a haiku about latency.");
        assert_eq!((c[1].line, c[2].line, c[3].line), (23, 49, 66));
    }
    // A broken array names the file and line, and the formats read.
    let broken = text.replacen("\"gpt\",", "\"gpt\"", 1);
    let e = read_dataset("v.json", &broken, None, false)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("v.json:11: not valid JSON"), "{e}");
    assert!(e.contains("sharegpt-json (vLLM's ShareGPT file"), "{e}");
    let e = read_dataset("v.json", &text[..text.len() - 3], None, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not valid JSON") || e.contains("not closed"),
        "{e}"
    );
    let e = read_dataset(
        "v.json",
        "{\"a\": 1}",
        Some(DatasetFormat::SharegptJson),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("v.json:1: not a JSON array"), "{e}");
}

#[test]
fn mooncake_traces_get_hash_block_text_lengths_and_arrivals() {
    let (path, text) = data("mooncake_trace.jsonl");
    let (c, bad, _) = read_dataset(&path, &text, None, false).unwrap();
    assert!(bad.is_empty());
    assert_eq!(c.len(), 5);
    let lens: Vec<u32> = c.iter().map(|c| tokens_by_rule(&c.turns[0].0)).collect();
    assert_eq!(lens, [700, 1100, 300, 520, 64]);
    let outs: Vec<Option<u32>> = c.iter().map(|c| c.turns[0].1).collect();
    assert_eq!(outs, [Some(12), Some(20), Some(8), Some(5), Some(16)]);
    let arr: Vec<Option<f64>> = c.iter().map(|c| c.arrival).collect();
    assert_eq!(
        arr,
        [
            Some(0.0),
            Some(150.0),
            Some(300.0),
            Some(300.0),
            Some(800.0)
        ]
    );
    // The same hash ids give the same text: line 1 (blocks 0, 1 cut short) is a prefix of
    // line 2 (blocks 0, 1, 2), line 4 shares block 0 only, line 3 shares nothing.
    let t: Vec<&str> = c.iter().map(|c| &*c.turns[0].0).collect();
    assert!(t[1].starts_with(t[0]));
    assert_eq!(t[3][..2048], t[0][..2048]);
    assert_ne!(t[3][2048..], t[0][2048..2080]);
    assert_ne!(t[2][..40], t[0][..40]);
    // Same trace, same text: nothing depends on the run's seed.
    let (again, _, _) = read_dataset(&path, &text, Some(DatasetFormat::Mooncake), false).unwrap();
    assert_eq!(again, c);
}

#[test]
fn aiperf_single_and_multi_turn_lines_parse() {
    let (path, text) = data("aiperf_single_turn.jsonl");
    let (c, _, _) = read_dataset(&path, &text, None, false).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(&*c[0].turns[0].0, "What is the capital of France?");
    assert_eq!(c[0].turns[0].1, Some(20));
    assert_eq!(
        &*c[1].turns[0].0,
        "Compare two sorting algorithms.\nUse a table."
    );
    assert_eq!(c[2].turns[0].1, None);
    // `delay` counts from the previous line's arrival.
    let arr: Vec<Option<f64>> = c.iter().map(|c| c.arrival).collect();
    assert_eq!(arr, [Some(0.0), Some(250.0), Some(750.0)]);

    let (path, text) = data("aiperf_multi_turn.jsonl");
    let (c, _, _) =
        read_dataset(&path, &text, Some(DatasetFormat::AiperfMultiTurn), false).unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(c[1].turns.len(), 3);
    assert_eq!(c[1].turns[0].1, Some(200));
    assert_eq!(c[1].turns[1].1, None);
    assert_eq!(
        c[1].delays,
        [
            Duration::ZERO,
            Duration::from_secs(2),
            Duration::from_millis(500)
        ]
    );
    assert!(c.iter().all(|c| c.arrival.is_none()));
}

#[test]
fn a_bad_file_names_the_line_and_every_format_read() {
    for (text, want) in [
        ("{\"prompt\": \"hi\"}\n", "x.jsonl:1: has none of the keys"),
        (
            "{\"text\": \"a\"}\n{\"input_length\": 0}\n",
            "x.jsonl:2: `input_length`",
        ),
        (
            "{\"session_id\": \"s\", \"turns\": []}\n",
            "x.jsonl:1: `turns` is not",
        ),
        ("[{\"a\":1}]\n", "x.jsonl: no usable conversation"),
    ] {
        let e = Workload::new(
            &WorkloadSpec {
                dataset: Some("x.jsonl".into()),
                dataset_source: Some(crate::scenario::DatasetSource {
                    path: "x.jsonl".into(),
                    text: text.into(),
                }),
                ..Default::default()
            },
            1,
            &|_| "s.toml:1:1".into(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with(want), "{e}");
        for f in [
            "openai (JSONL",
            "sharegpt (JSONL",
            "sharegpt-json",
            "aiperf-single-turn",
            "aiperf-multi-turn",
            "mooncake (JSONL",
        ] {
            assert!(e.contains(f), "{f} missing: {e}");
        }
    }
}

const TRACE: &str = r#"name = "t"
[matrix]
targets = ["sim-wafer"]
transports = ["http2"]
[workload]
dataset = "mooncake_trace.jsonl"
"#;

fn trace_plan(extra: &str) -> Result<Plan, crate::plan::PlanError> {
    let dir = testkit::tempdir().unwrap();
    std::fs::copy(
        repo("tests/data/datasets/mooncake_trace.jsonl"),
        dir.path().join("mooncake_trace.jsonl"),
    )
    .unwrap();
    let p = dir.path().join("t.toml");
    std::fs::write(&p, format!("{TRACE}{extra}")).unwrap();
    let l = scenario::load(&p).unwrap();
    build(
        &l.scenario,
        &l.path,
        l.source.as_bytes(),
        &Overrides::default(),
    )
}

#[test]
fn a_trace_is_its_own_schedule() {
    let p = trace_plan("").unwrap();
    let offs: Vec<u128> = p
        .sessions
        .iter()
        .map(|s| s.start_offset.as_millis())
        .collect();
    assert_eq!(offs, [0, 150, 300, 300, 800]);
    // Every session may run at once: none waits for a slot.
    assert_eq!((p.load.sessions, p.load.concurrency), (5, 5));
    assert!(p
        .warnings
        .iter()
        .any(|w| w.starts_with("trace replay: 5 sessions")));
    // `sample` replays the first N in time order.
    let p = trace_plan("sample = 2\n").unwrap();
    assert_eq!(p.sessions.len(), 2);
    assert_eq!(p.sessions.get(1).unwrap().start_offset.as_millis(), 150);
    let e = trace_plan("[load]\nrate = 5\n").unwrap_err().to_string();
    assert!(e.contains("remove `rate` from [load]"), "{e}");
}
