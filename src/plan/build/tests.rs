//! Plan building: shipped files, precedence, matrix rules, validation messages, seeds.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::scenario;

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn plan_of(text: &str, o: &Overrides) -> Result<Plan, PlanError> {
    let s = scenario::parse("s.toml", text).map_err(|e| PlanError::new(e.to_string()))?;
    build(&s, "s.toml", text.as_bytes(), o)
}

const MINIMAL: &str = "name = \"m\"\n[[turns]]\nprompt = \"hi\"\n";

#[test]
fn every_shipped_scenario_parses_and_builds() {
    let mut seen = 0;
    for entry in std::fs::read_dir(repo("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let loaded = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let plan = build(
            &loaded.scenario,
            &loaded.path,
            loaded.source.as_bytes(),
            &Overrides::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            !plan.cells.is_empty() && !plan.sessions.is_empty(),
            "{}",
            path.display()
        );
        assert!(
            plan.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            plan.warnings
        );
        assert!(plan.scenario_hash.starts_with("sha256:") && plan.scenario_hash.len() == 7 + 64);
        // The plan survives the manifest's JSON round trip.
        let json = serde_json::to_string(&plan).unwrap();
        let back: Plan = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        seen += 1;
    }
    assert!(
        seen >= 5,
        "expected the five shipped scenarios, found {seen}"
    );
}

#[test]
fn every_shipped_targets_file_parses_and_resolves() {
    let mut seen = 0;
    for entry in std::fs::read_dir(repo("targets")).unwrap() {
        let path = entry.unwrap().path();
        let file = scenario::load_targets(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(file.targets.len(), 1, "{}", path.display());
        let name = file.targets.keys().next().unwrap().clone();
        let o = Overrides {
            targets: vec![name.clone()],
            targets_file: Some(file),
            ..Default::default()
        };
        let plan = plan_of(MINIMAL, &o).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let t = &plan.cells[0].target;
        assert!(t.base_url.as_deref().unwrap().starts_with("http"), "{name}");
        let chat = t.api == crate::vocab::ApiFlavour::ChatCompletions;
        // The HTTP/1.1-only servers' files leave http2 out (each says why).
        let h1_only = matches!(name.as_str(), "llamacpp" | "vllm" | "ollama");
        let cells = match (h1_only, chat) {
            (true, _) => 2,
            (false, true) => 3,
            (false, false) => 4,
        };
        assert_eq!(plan.cells.len(), cells, "{name}");
        assert_eq!(
            plan.warnings
                .iter()
                .any(|w| w.contains("× http2: its `transports` are http, http-pooled")),
            h1_only,
            "{name}: {:?}",
            plan.warnings
        );
        // Skipped ws cells are warned about (transports came from defaults, not the CLI).
        assert_eq!(
            plan.warnings
                .iter()
                .any(|w| w.contains("no WebSocket mode")),
            chat,
            "{name}: {:?}",
            plan.warnings
        );
        seen += 1;
    }
    assert_eq!(seen, 7);
}

#[test]
fn snake_story_numbers() {
    let loaded = scenario::load(&repo("scenarios/snake.toml")).unwrap();
    let plan = build(
        &loaded.scenario,
        &loaded.path,
        loaded.source.as_bytes(),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(plan.cells.len(), 8);
    assert_eq!(plan.load.sessions, 2);
    assert_eq!(plan.load.concurrency, 2);
    assert_eq!(plan.link.to_string(), "rtt=40ms");
    let turns = &plan.sessions.get(0).unwrap().turns;
    assert_eq!(turns[0].max_output_tokens, 2800);
    // GPU profile ~65 tok/s: output alone ≤ ~75 s per session, think time included.
    let tokens: u32 = turns.iter().map(|t| t.max_output_tokens).sum();
    let think: Duration = turns.iter().map(|t| t.think_time).sum();
    let gpu_s = f64::from(tokens) / 65.0 + think.as_secs_f64();
    assert!(gpu_s < 75.0, "gpu session ≈ {gpu_s:.0}s");
    assert!((2800.0 / 65.0 - 43.0f64).abs() < 1.0);
}

#[test]
fn overrides_take_precedence() {
    let text = "name = \"m\"\nseed = 5\nlink = \"rtt=80ms\"\n[load]\nsessions = 3\nconcurrency = 3\n[[turns]]\nprompt = \"hi\"\n";
    let p = plan_of(text, &Overrides::default()).unwrap();
    assert_eq!((p.seed, p.load.sessions, p.load.concurrency), (5, 3, 3));
    assert_eq!(p.link.to_string(), "rtt=80ms");
    assert!(!p.link_for_real_targets);
    let o = Overrides {
        seed: Some(9),
        link: Some("none".parse().unwrap()),
        targets: vec!["sim-cpu".into()],
        transports: vec![TransportKind::Ws, TransportKind::Http],
        load: LoadKnobs {
            sessions: Some(1),
            concurrency: Some(1),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan_of(text, &o).unwrap();
    assert_eq!((p.seed, p.load.sessions, p.load.concurrency), (9, 1, 1));
    assert!(p.link.is_none() && p.link_for_real_targets);
    let cells: Vec<String> = p
        .cells
        .iter()
        .map(|c| format!("{}/{}", c.target.name, c.transport))
        .collect();
    assert_eq!(cells, vec!["sim-cpu/ws", "sim-cpu/http"]);
    // Defaults: both headline targets, all four transports, rtt=40ms, seed 1.
    let p = plan_of(MINIMAL, &Overrides::default()).unwrap();
    assert_eq!(p.cells.len(), 8);
    assert_eq!((p.seed, p.link.to_string()), (1, "rtt=40ms".to_string()));
    assert_eq!(p.sessions.get(0).unwrap().turns[0].max_output_tokens, 1024);
}

#[test]
fn chat_completions_ws_is_skipped_from_the_matrix_but_an_error_on_the_cli() {
    let text = "name = \"m\"\n[matrix]\ntargets = [\"groq\"]\n[targets.groq]\nbase_url = \"https://api.groq.com/openai/v1\"\napi = \"chat-completions\"\nmodel = \"llama\"\napi_key_env = \"GROQ_API_KEY\"\n[[turns]]\nprompt = \"hi\"\n";
    let p = plan_of(text, &Overrides::default()).unwrap();
    assert_eq!(p.cells.len(), 3);
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings); // ws skipped + link is sim-only
    assert!(
        p.warnings[0].contains("skipping groq × ws"),
        "{:?}",
        p.warnings
    );
    // --transport ws alone (matrix target): skipped with a warning → no cells → error.
    let o = Overrides {
        transports: vec![TransportKind::Ws],
        ..Default::default()
    };
    assert!(plan_of(text, &o)
        .unwrap_err()
        .to_string()
        .contains("no target supports"));
    // Both named on the CLI: an error that says what to do.
    let o = Overrides {
        targets: vec!["groq".into()],
        transports: vec![TransportKind::Ws, TransportKind::Http],
        ..Default::default()
    };
    let e = plan_of(text, &o).unwrap_err().to_string();
    assert!(
        e.contains("--target groq --transport ws") && e.contains("drop `--transport ws`"),
        "{e}"
    );
}

#[test]
fn a_url_target_replaces_the_matrix_and_a_url_as_target_says_use_url() {
    let text = "name = \"m\"\n[matrix]\ntargets = [\"sim-gpu\"]\ntransports = [\"ws\", \"http\"]\n[[turns]]\nprompt = \"hi\"\n";
    let u = targets::UrlTarget {
        url: "http://127.0.0.1:8000/v1".into(),
        model: "m".into(),
        api: crate::vocab::ApiFlavour::ChatCompletions,
        api_key_env: None,
    };
    let o = Overrides {
        url: Some(u.clone()),
        ..Default::default()
    };
    let p = plan_of(text, &o).unwrap();
    let cells: Vec<_> = p
        .cells
        .iter()
        .map(|c| format!("{}/{}", c.target.name, c.transport))
        .collect();
    assert_eq!(
        cells,
        [
            "url-127-0-0-1-8000/http",
            "url-127-0-0-1-8000/http-pooled",
            "url-127-0-0-1-8000/http2"
        ]
    );
    let o = Overrides {
        targets: vec!["sim-gpu".into()],
        url: Some(u),
        transports: vec![TransportKind::Http],
        ..Default::default()
    };
    assert_eq!(plan_of(text, &o).unwrap().cells.len(), 2);
    let o = Overrides {
        targets: vec!["http://127.0.0.1:35785/v1".into()],
        ..Default::default()
    };
    let e = plan_of(MINIMAL, &o).unwrap_err().to_string();
    assert!(
        e.contains("--url http://127.0.0.1:35785/v1 --model M") && !e.contains("[targets.http"),
        "{e}"
    );
    let text = "name = \"m\"\n[matrix]\ntargets = [\"my.server\"]\n[[turns]]\nprompt = \"hi\"\n";
    let e = plan_of(text, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("[targets.\"my.server\"]"), "{e}");
}

#[test]
fn unknown_target_lists_known_ones() {
    let o = Overrides {
        targets: vec!["sim-wafr".into()],
        ..Default::default()
    };
    let e = plan_of(MINIMAL, &o).unwrap_err().to_string();
    assert!(
        e.contains("unknown target `sim-wafr` (--target)")
            && e.contains("did you mean `sim-wafer`?"),
        "{e}"
    );
    assert!(
        e.contains("known targets: sim-cpu, sim-gpu, sim-wafer"),
        "{e}"
    );
    let text = "name = \"m\"\n[matrix]\ntargets = [\"openai\"]\n[[turns]]\nprompt = \"hi\"\n";
    let e = plan_of(text, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[matrix] targets at s.toml:3:1") && e.contains("--targets FILE"),
        "{e}"
    );
}

#[test]
fn validation_messages_say_how_to_fix() {
    let cases: [(&str, Overrides, &str); 8] = [
        ("name = \"m\"\n", Overrides::default(), "add at least one"),
        (
            MINIMAL,
            Overrides {
                load: LoadKnobs {
                    sessions: Some(0),
                    ..Default::default()
                },
                ..Default::default()
            },
            "--sessions is 0; use 1 to 100000",
        ),
        (
            "name = \"m\"\n[load]\nconcurrency = 0\n[[turns]]\nprompt = \"hi\"\n",
            Overrides::default(),
            "[load] concurrency at s.toml:3:1 is 0",
        ),
        (
            "name = \"m\"\nmax_output_tokens = 0\n[[turns]]\nprompt = \"hi\"\n",
            Overrides::default(),
            "`max_output_tokens` at s.toml:2:1 is 0; use 1 to 131072",
        ),
        (
            "name = \"m\"\n[[turns]]\nprompt = \"hi\"\nmax_output_tokens = 200000\n",
            Overrides::default(),
            "[[turns]] entry 1 at s.toml:4:1: `max_output_tokens` is 200000",
        ),
        (
            "name = \"m\"\n[[turns]]\nprompt = \"hi\"\nthink_time = \"2h\"\n",
            Overrides::default(),
            "[[turns]] entry 1 at s.toml:4:1: `think_time` is 2h; keep it at most 1h",
        ),
        (
            "name = \"m\"\n[[turns]]\nprompt = \"hi\"\nagent = { calls = 3, tools = [] }\n",
            Overrides::default(),
            "[[turns]] entry 1 at s.toml:4:1: agent.tools must list tool names",
        ),
        (
            "name = \"m\"\n[load]\nsession_interval = \"0s\"\n[[turns]]\nprompt = \"hi\"\n",
            Overrides::default(),
            "[load] session_interval at s.toml:3:1 must be between 1ms and 1h",
        ),
    ];
    let cases: Vec<(&str, Overrides, &str)> = cases
        .into_iter()
        .chain([
            (
                "name = \"m\"\n[[turns]]\nprompt = \"a\"\n\n[[turns]]\n  prompt = \"b\"\n  repeat = 0\n",
                Overrides::default(),
                "[[turns]] entry 2 at s.toml:7:3: `repeat` is 0",
            ),
            (
                "name = \"m\"\n[[turns]]\nprompt = \"   \"\n",
                Overrides::default(),
                "[[turns]] entry 1 at s.toml:3:1: `prompt` is empty",
            ),
            // A prompt quoting TOML-looking lines is text, not keys or tables.
            (
                "name = \"m\"\n[[turns]]\nprompt = \"\"\"\nRefactor:\nagent.py\n[[turns]]\nrepeat = 3\n\"\"\"\nagent = { calls = 0, tools = [\"a\"] }\n",
                Overrides::default(),
                "[[turns]] entry 1 at s.toml:9:1: agent.calls is 0",
            ),
            // Headers spelled with spaces count as the same array.
            (
                "name = \"m\"\n[[turns]]\nprompt = '''\n[[turns]]\n'''\n[[ turns ]]\nprompt = \"b\"\nrepeat = 0\n",
                Overrides::default(),
                "[[turns]] entry 2 at s.toml:8:1: `repeat` is 0",
            ),
            // Each key within its range, the product over the plan bound: refused before
            // any session is built (it was 1.2 GB of plan per session).
            (
                "name = \"m\"\n[[turns]]\nprompt = \"go\"\nrepeat = 1000\nagent = { calls = 1000, tools = [\"a\"] }\n",
                Overrides::default(),
                "s.toml: one session plans 1001000 requests (the sum over [[turns]] of repeat × (1 + agent.calls or the tool_calls listed)); the limit is 10000 per session",
            ),
        ])
        .collect();
    for (text, o, want) in cases {
        let e = plan_of(text, &o).unwrap_err().to_string();
        assert!(e.contains(want), "want {want:?} in {e:?}");
    }
}

#[test]
fn warmup_sessions_come_first_and_open_loop_offsets_are_seeded() {
    let text = "name = \"m\"\nseed = 3\n[load]\nsessions = 6\nwarmup_sessions = 2\nsession_interval = \"2s\"\n[[turns]]\nprompt = \"go\"\nagent = { calls = 20, tools = [\"read_file\", \"run_tests\", \"apply_patch\"], tool_time = \"300ms\" }\n";
    let a = plan_of(text, &Overrides::default()).unwrap();
    assert_eq!(a.sessions.len(), 8);
    assert!(a.sessions.to_vec()[..2]
        .iter()
        .all(|s| s.warmup && s.start_offset.is_zero()));
    assert!(a.sessions.to_vec()[2..].iter().all(|s| !s.warmup));
    assert_eq!(
        a.sessions.iter().map(|s| s.index).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(a.sessions.get(2).unwrap().start_offset, Duration::ZERO);
    assert!(a.sessions.get(3).unwrap().start_offset > Duration::ZERO);
    let calls = &a.sessions.get(2).unwrap().turns[0].tool_calls;
    assert_eq!(calls.len(), 20);
    assert!(calls
        .iter()
        .all(|c| c.tool_time == Duration::from_millis(300) && c.output_bytes == 1024));
    let tools: std::collections::BTreeSet<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(tools.len(), 3, "20 draws from 3 tools use all of them");

    // Same seed → identical plan; another seed → other offsets and tool order.
    let b = plan_of(text, &Overrides::default()).unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let c = plan_of(
        text,
        &Overrides {
            seed: Some(4),
            ..Default::default()
        },
    )
    .unwrap();
    assert_ne!(
        a.sessions.get(3).unwrap().start_offset,
        c.sessions.get(3).unwrap().start_offset
    );
    let order = |p: &Plan| {
        p.sessions.get(2).unwrap().turns[0]
            .tool_calls
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    };
    assert_ne!(order(&a), order(&c));
    // Sessions differ from each other but every cell replays the same ones (one list).
    assert_ne!(
        order(&a),
        a.sessions.get(3).unwrap().turns[0]
            .tool_calls
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    );
}

#[test]
fn repeat_context_and_explicit_tool_calls_expand() {
    let text = "name = \"m\"\ncontext_bytes = 5000\nsystem_prompt = \"Be brief.\"\n[[turns]]\nprompt = \"x\"\nrepeat = 3\nfault = \"status=500\"\n[[turns]]\nprompt = \"y\"\ntool_calls = [{ name = \"grep\", tool_time = \"20ms\", output_bytes = 10 }, { name = \"read_file\" }]\n";
    let p = plan_of(text, &Overrides::default()).unwrap();
    let turns = &p.sessions.get(0).unwrap().turns;
    assert_eq!(turns.len(), 4);
    assert!(turns[..3]
        .iter()
        .all(|t| &*t.user_text == "x" && t.fault.as_deref() == Some("status=500")));
    assert_eq!(turns[3].tool_calls.len(), 2);
    assert_eq!(turns[3].tool_calls[0].tool_time, Duration::from_millis(20));
    assert_eq!(turns[3].tool_calls[1].output_bytes, 1024);
    assert_eq!(p.system_prompt.len(), "Be brief.".len() + 5000);
    assert!(p.system_prompt.contains("pub fn "));
    let again = plan_of(text, &Overrides::default()).unwrap();
    assert_eq!(p.system_prompt, again.system_prompt);
}

const TWO_CELLS_ONE_SERVER: &str = r#"name = "m"
link = "none"
[matrix]
targets = ["a", "b"]
transports = ["http", "http-pooled"]
[targets.a]
base_url = "http://127.0.0.1:8080/v1"
api = "chat-completions"
model = "m"
[targets.b]
base_url = "http://127.0.0.1:8080/other/v1"
api = "chat-completions"
model = "m"
[[turns]]
prompt = "hi"
"#;

#[test]
fn schedule_defaults_to_parallel_for_simulators_and_interleaved_for_real_endpoints() {
    let sim = plan_of(MINIMAL, &Overrides::default()).unwrap();
    assert_eq!(sim.load.schedule, Schedule::Parallel);
    assert!(sim.shared_servers().is_empty());
    assert!(sim.cells.iter().all(|c| c.cache == CacheMode::AsIs));
    assert!(sim.warnings.is_empty(), "{:?}", sim.warnings);
    // One group per simulator cell: each has its own instance.
    let groups = crate::plan::schedule::groups(&sim);
    assert_eq!(groups.len(), sim.cells.len());

    let real = plan_of(TWO_CELLS_ONE_SERVER, &Overrides::default()).unwrap();
    assert_eq!(real.load.schedule, Schedule::Interleaved);
    assert!(real.cells.iter().all(|c| c.cache == CacheMode::Cold));
    // Same scheme, host and port: one server, whatever the path.
    let shared = real.shared_servers();
    assert_eq!(shared.len(), 1);
    assert_eq!(shared[0].server, "http://127.0.0.1:8080");
    assert_eq!(shared[0].cells.len(), 4);
    let groups = crate::plan::schedule::groups(&real);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].cells, vec![0, 1, 2, 3]);
    assert!(real.warnings.is_empty(), "{:?}", real.warnings);
    assert!(real.load_line().contains("at most 1 in flight"));
}

#[test]
fn schedule_and_cache_precedence_and_warnings() {
    // The scenario's [load] keys, then --schedule / --cache over them.
    let text = TWO_CELLS_ONE_SERVER.replace(
        "[matrix]",
        "[load]\nschedule = \"sequential\"\ncache = \"warm\"\nconcurrency = 2\n[matrix]",
    );
    let p = plan_of(&text, &Overrides::default()).unwrap();
    assert_eq!(p.load.schedule, Schedule::Sequential);
    assert!(p.cells.iter().all(|c| c.cache == CacheMode::Warm));
    let o = Overrides {
        load: LoadKnobs {
            schedule: Some(Schedule::Parallel),
            cache: Some(CacheMode::AsIs),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan_of(&text, &o).unwrap();
    assert_eq!(p.load.schedule, Schedule::Parallel);
    assert!(p.cells.iter().all(|c| c.cache == CacheMode::AsIs));
    // Parallel on a shared server: every cell its own group, and a warning with the sum.
    assert_eq!(crate::plan::schedule::groups(&p).len(), 4);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("up to 8 requests in flight")),
        "{:?}",
        p.warnings
    );
    // A target's own `cache` beats [load] cache (but not --cache).
    let text2 = text.replace("[targets.b]\n", "[targets.b]\ncache = \"as-is\"\n");
    let p = plan_of(&text2, &Overrides::default()).unwrap();
    let modes: Vec<CacheMode> = p.cells.iter().map(|c| c.cache).collect();
    assert_eq!(
        modes,
        [
            CacheMode::Warm,
            CacheMode::Warm,
            CacheMode::AsIs,
            CacheMode::AsIs
        ]
    );
    // An explicit schedule with nothing to share says so; cold on the simulator warns.
    let o = Overrides {
        load: LoadKnobs {
            schedule: Some(Schedule::Interleaved),
            cache: Some(CacheMode::Cold),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan_of(MINIMAL, &o).unwrap();
    assert!(p.warnings.iter().any(|w| w.contains("no two cells share")));
    assert!(p
        .warnings
        .iter()
        .any(|w| w.contains("cache cold on sim-gpu")));
    // Bad values are located errors naming the choices.
    let bad = MINIMAL.replace("[[turns]]", "[load]\nschedule = \"round-robin\"\n[[turns]]");
    let e = plan_of(&bad, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("round-robin") && e.contains("interleaved"),
        "{e}"
    );
    assert!(e.contains("s.toml:"), "{e}");
}

#[test]
fn cache_warm_sessions_are_distinct_scripts_numbered_after_the_measured_ones() {
    let text =
        "name = \"m\"\n[load]\nsessions = 3\nwarmup_sessions = 1\n[[turns]]\nprompt = \"hi\"\n";
    let p = plan_of(text, &Overrides::default()).unwrap();
    let warm = p.cache_warm_sessions();
    // Every session replays the same script: one warming session is enough.
    assert_eq!(warm.len(), 1);
    assert_eq!(warm[0].index, 4);
    assert!(warm[0].warmup);
    let agent = "name = \"m\"\n[load]\nsessions = 3\n[[turns]]\nprompt = \"fix\"\nagent = { calls = 6, tools = [\"a\", \"b\", \"c\"] }\n";
    let p = plan_of(agent, &Overrides::default()).unwrap();
    assert_eq!(p.cache_warm_sessions().len(), 3);
    let o = Overrides {
        load: LoadKnobs {
            cache: Some(CacheMode::Warm),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan_of(agent, &o).unwrap();
    assert_eq!(p.sessions_of_cell(0), 6);
}

#[test]
fn interleaved_open_loop_offers_the_scenario_rate_to_the_server() {
    let gap = Duration::from_millis(100);
    let offsets = crate::plan::schedule::interleaved_offsets(1, 400, 2, gap);
    assert_eq!(offsets.len(), 400);
    assert!(offsets.iter().all(|o| o.len() == 2));
    // Arrivals are in turn order and the whole group's mean gap is the scenario's.
    let flat: Vec<Duration> = offsets.iter().flatten().copied().collect();
    assert!(flat.windows(2).all(|w| w[0] <= w[1]));
    let mean = flat.last().unwrap().as_secs_f64() / (flat.len() - 1) as f64;
    assert!((mean - 0.1).abs() < 0.015, "mean gap {mean}");
}

#[test]
fn the_scenario_readme_example_builds() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/README.md"))
        .unwrap();
    let example = doc
        .split("```toml\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let s = scenario::parse("README example", example).unwrap();
    let plan = build(&s, "README", example.as_bytes(), &Default::default()).unwrap();
    assert_eq!(plan.cells.len(), 6);
    assert_eq!(plan.sessions.len(), 5);
}

/// The link a run reports is the link its cells get: the scenario's link covers simulator
/// targets, and real endpoints only when `--link` asked for it.
#[test]
fn link_line_says_what_the_cells_get() {
    let scenario = |targets: &str| {
        format!(
            "name = \"l\"\nlink = \"rtt=40ms\"\n[matrix]\ntargets = [{targets}]\ntransports = [\"http\"]\n\
             [targets.real]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n[[turns]]\nprompt = \"hi\"\n"
        )
    };
    let o = Overrides::default();
    let sim = plan_of(&scenario("\"sim-wafer\""), &o).unwrap();
    assert_eq!(sim.link_line(), "rtt=40ms");
    let real = plan_of(&scenario("\"real\""), &o).unwrap();
    assert_eq!(
        real.link_line(),
        "none (real endpoints; the scenario's link rtt=40ms applies to simulator targets only)"
    );
    let both = plan_of(&scenario("\"real\", \"sim-wafer\""), &o).unwrap();
    assert_eq!(both.link_line(), "rtt=40ms (simulator targets only)");
}
