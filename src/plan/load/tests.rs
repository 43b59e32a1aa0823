//! The load knobs → `Load`: rate offsets, duration and warm-up by time, precedence and errors.

use std::time::Duration;

use crate::plan::arrival::Arrival;
use crate::plan::{build, Overrides, Plan, PlanError};
use crate::scenario::{self, LoadKnobs};

fn plan_of(text: &str, o: &Overrides) -> Result<Plan, PlanError> {
    let s = scenario::parse("s.toml", text).map_err(|e| PlanError::new(e.to_string()))?;
    build(&s, "s.toml", text.as_bytes(), o)
}

fn err(text: &str, o: &Overrides) -> String {
    plan_of(text, o).unwrap_err().to_string()
}

fn with_load(load: &str) -> String {
    format!("name = \"m\"\n[load]\n{load}\n[[turns]]\nprompt = \"hi\"\n")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
fn constant_rate_spaces_single_turn_sessions_one_gap_apart() {
    let p = plan_of(
        &with_load("rate = 200\narrival = \"constant\"\nsessions = 50"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(p.load.rate, Some(200.0));
    assert_eq!(p.load.arrival, Arrival::Constant);
    assert_eq!(p.sessions.len(), 50);
    for (k, s) in p.sessions.iter().enumerate() {
        assert!(!s.warmup);
        assert!(
            (ms(s.start_offset) - 5.0 * k as f64).abs() < 1e-3,
            "{k}: {:?}",
            s.start_offset
        );
    }
    assert!(
        p.load_line()
            .starts_with("open loop 200 requests/s (constant); schedule parallel"),
        "{}",
        p.load_line()
    );
    assert_eq!(p.load.session_slots(), tokio::sync::Semaphore::MAX_PERMITS);
}

#[test]
fn a_multi_request_session_claims_one_instant_per_planned_request() {
    // 2 turns, the second with a tool call: 3 requests per session → sessions 3/rate apart.
    let text = "name = \"m\"\n[load]\nrate = 10\narrival = \"constant\"\nsessions = 4\n[[turns]]\nprompt = \"a\"\n[[turns]]\nprompt = \"b\"\nthink_time = \"1s\"\ntool_calls = [{ name = \"run_tests\" }]\n";
    let p = plan_of(text, &Overrides::default()).unwrap();
    let offs: Vec<f64> = p.sessions.iter().map(|s| ms(s.start_offset)).collect();
    assert_eq!(offs, vec![0.0, 300.0, 600.0, 900.0]);
    assert_eq!(p.sessions.get(0).unwrap().planned_requests(), 3);
}

#[test]
fn poisson_rate_offers_the_rate_on_average() {
    let p = plan_of(
        &with_load("rate = 50\nsessions = 5000"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(p.load.arrival, Arrival::Poisson);
    let last = p.sessions.iter().last().unwrap().start_offset.as_secs_f64();
    let achieved = (p.sessions.len() - 1) as f64 / last;
    // Standard error 50/√5000 ≈ 0.7/s; 4 % is > 2.8 σ.
    assert!((achieved - 50.0).abs() < 2.0, "{achieved}");
}

#[test]
fn duration_without_sessions_plans_every_arrival_before_the_end() {
    let p = plan_of(
        &with_load("rate = 10\narrival = \"constant\"\nduration = \"2s\""),
        &Overrides::default(),
    )
    .unwrap();
    assert!(p.load.sessions_from_duration);
    assert_eq!((p.sessions.len(), p.load.sessions), (20, 20));
    assert!(p
        .sessions
        .iter()
        .all(|s| s.start_offset < Duration::from_secs(2)));
    // Every session its own index (own salt, own seeded tool order).
    let idx: Vec<u32> = p.sessions.iter().map(|s| s.index).collect();
    assert_eq!(idx, (0..20).collect::<Vec<u32>>());
    // A session count is a second stop condition.
    let p = plan_of(
        &with_load("rate = 10\narrival = \"constant\"\nduration = \"2s\"\nsessions = 5"),
        &Overrides::default(),
    )
    .unwrap();
    assert!(!p.load.sessions_from_duration);
    assert_eq!(p.sessions.len(), 5);
    // The flags override the scenario.
    let o = Overrides {
        load: LoadKnobs {
            rate: Some(20.0),
            duration: Some(Duration::from_secs(1)),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan_of(
        &with_load("rate = 10\narrival = \"constant\"\nduration = \"2s\""),
        &o,
    )
    .unwrap();
    assert_eq!(p.sessions.len(), 20);
    // Closed loop: the driver keeps going; the plan holds the scripts.
    let p = plan_of(
        &with_load("concurrency = 3\nduration = \"2s\""),
        &Overrides::default(),
    )
    .unwrap();
    assert!(p.load.sessions_from_duration);
    assert_eq!(p.sessions.len(), 1);
    assert!(
        p.load_line()
            .starts_with("closed loop, concurrency 3, for 2s; "),
        "{}",
        p.load_line()
    );
}

#[test]
fn warmup_by_time_marks_the_first_arrivals_and_measured_ones_follow() {
    let text = with_load("rate = 10\narrival = \"constant\"\nwarmup = \"1s\"\nduration = \"1s\"\nwarmup_sessions = 2");
    let p = plan_of(&text, &Overrides::default()).unwrap();
    assert_eq!(p.load.warmup_duration, Some(Duration::from_secs(1)));
    let counted: Vec<_> = p.sessions.iter().filter(|s| s.index < 2).collect();
    assert!(counted.iter().all(|s| s.warmup && s.start_offset.is_zero()));
    let timed: Vec<_> = p
        .sessions
        .iter()
        .filter(|s| s.index >= 2 && s.warmup)
        .collect();
    let measured: Vec<_> = p.sessions.iter().filter(|s| !s.warmup).collect();
    assert_eq!((timed.len(), measured.len()), (10, 10));
    assert!(timed
        .iter()
        .all(|s| s.start_offset < Duration::from_secs(1)));
    assert!(measured
        .iter()
        .all(|s| s.start_offset >= Duration::from_secs(1)));
    assert_eq!(p.sessions.len(), 22);
    // With a session count, the count is of measured sessions.
    let p = plan_of(
        &with_load("rate = 10\nwarmup = \"1s\"\nsessions = 3"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(p.sessions.iter().filter(|s| !s.warmup).count(), 3);
}

#[test]
fn gamma_needs_its_shape_and_the_shape_needs_gamma() {
    let p = plan_of(
        &with_load("rate = 10\narrival = \"gamma\"\nburstiness = 0.5\nsessions = 3"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(p.load.arrival, Arrival::Gamma { shape: 0.5 });
    assert!(
        p.load_line()
            .contains("open loop 10 requests/s (gamma, burstiness 0.5)"),
        "{}",
        p.load_line()
    );
    let e = err(
        &with_load("rate = 10\narrival = \"gamma\""),
        &Overrides::default(),
    );
    assert!(
        e.starts_with(
            "[load] arrival at s.toml:4:1 is \"gamma\" but no burstiness is given; add burstiness"
        ),
        "{e}"
    );
    let e = err(
        &with_load("rate = 10\nburstiness = 0.5"),
        &Overrides::default(),
    );
    assert!(e.starts_with("[load] burstiness at s.toml:4:1 is the shape of gamma arrivals, but arrival is poisson; add arrival = \"gamma\""), "{e}");
    let e = err(
        &with_load("rate = 10\narrival = \"gamma\"\nburstiness = 0"),
        &Overrides::default(),
    );
    assert!(
        e.starts_with("[load] burstiness at s.toml:5:1 is 0; use a gamma shape from 0.01 to 100"),
        "{e}"
    );
    // The flag completes the scenario's arrival.
    let o = Overrides {
        load: LoadKnobs {
            burstiness: Some(2.0),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = plan_of(
        &with_load("rate = 10\narrival = \"gamma\"\nsessions = 2"),
        &o,
    )
    .unwrap();
    assert_eq!(p.load.arrival, Arrival::Gamma { shape: 2.0 });
    let e = err(&with_load("rate = 10"), &o);
    assert!(
        e.starts_with("--burstiness is the shape of gamma arrivals"),
        "{e}"
    );
    // An arrival shape needs an open loop.
    let e = err(&with_load("arrival = \"constant\""), &Overrides::default());
    assert!(e.starts_with("[load] arrival at s.toml:3:1 shapes open-loop arrivals, but this load is a closed loop; add a rate"), "{e}");
    // It shapes session_interval too.
    let p = plan_of(
        &with_load("session_interval = \"100ms\"\narrival = \"constant\"\nsessions = 3"),
        &Overrides::default(),
    )
    .unwrap();
    let offs: Vec<f64> = p.sessions.iter().map(|s| ms(s.start_offset)).collect();
    assert_eq!(offs, vec![0.0, 100.0, 200.0]);
}

#[test]
fn rate_refuses_session_interval_and_concurrency_beside_it() {
    let e = err(
        &with_load("rate = 10\nsession_interval = \"1s\""),
        &Overrides::default(),
    );
    assert!(e.contains("[load] rate at s.toml:3:1 and [load] session_interval at s.toml:4:1 both set an open loop"), "{e}");
    let e = err(
        &with_load("session_interval = \"1s\""),
        &Overrides {
            load: LoadKnobs {
                rate: Some(5.0),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert!(
        e.starts_with("--rate and [load] session_interval at s.toml:3:1 both set an open loop"),
        "{e}"
    );
    let e = err(
        &with_load("rate = 10\nconcurrency = 4"),
        &Overrides::default(),
    );
    assert!(
        e.starts_with(
            "[load] rate at s.toml:3:1 and [load] concurrency at s.toml:4:1 are two load shapes"
        ),
        "{e}"
    );
    assert!(e.contains("max_in_flight"), "{e}");
    let both = Overrides {
        load: LoadKnobs {
            rate: Some(5.0),
            concurrency: Some(2),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(err(MINIMAL, &both).starts_with("--rate and --concurrency are two load shapes"));
    // The command line wins over the scenario, with a warning.
    let p = plan_of(
        &with_load("concurrency = 4"),
        &Overrides {
            load: LoadKnobs {
                rate: Some(5.0),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.load.rate, Some(5.0));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("concurrency = 4 is not used")),
        "{:?}",
        p.warnings
    );
    let p = plan_of(
        &with_load("rate = 10\narrival = \"constant\""),
        &Overrides {
            load: LoadKnobs {
                concurrency: Some(2),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((p.load.rate, p.load.concurrency), (None, 2));
    assert!(!p.load.open_loop());
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("rate = 10 is not used")),
        "{:?}",
        p.warnings
    );
}

const MINIMAL: &str = "name = \"m\"\n[[turns]]\nprompt = \"hi\"\n";

#[test]
fn bad_values_name_the_key_and_a_fix() {
    let o = Overrides::default();
    for (load, want) in [
        ("rate = 0", "[load] rate at s.toml:3:1 is 0; use a request rate above 0"),
        ("rate = -3.5", "[load] rate at s.toml:3:1 is -3.5; use a request rate above 0"),
        ("rate = nan", "[load] rate at s.toml:3:1 is NaN; use a request rate above 0"),
        ("rate = 1e9", "[load] rate at s.toml:3:1 is 1000000000; use a request rate above 0, from 0.001 (one request every 1000 s) to at most 100000"),
        ("rate = 1e-12", "[load] rate at s.toml:3:1 is 0.000000000001; use a request rate above 0, from 0.001"),
        ("rate = 0.0009", "[load] rate at s.toml:3:1 is 0.0009; use a request rate above 0, from 0.001"),
        ("rate = 10\nduration = \"0s\"", "[load] duration at s.toml:4:1 is 0ms; use 1ms to 24h, e.g. \"60s\""),
        ("warmup = \"2h\"", "[load] warmup at s.toml:3:1 is 2h; keep a warm-up at most 1h"),
        ("max_in_flight = 0", "[load] max_in_flight at s.toml:3:1 is 0; use 1 to 100000"),
        ("rate = 0.1\nduration = \"1s\"\nwarmup = \"1s\"", "this load starts no measured session"),
        ("rate = 100000\nduration = \"10s\"", "this load needs more than 200000 sessions per cell"),
    ] {
        let e = err(&with_load(load), &o);
        assert!(e.starts_with(want), "{load}: {e}");
    }
    let e = err(
        MINIMAL,
        &Overrides {
            load: LoadKnobs {
                max_in_flight: Some(0),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert!(
        e.starts_with("--max-in-flight is 0; use 1 to 100000"),
        "{e}"
    );
    let e = err(
        MINIMAL,
        &Overrides {
            load: LoadKnobs {
                rate: Some(f64::INFINITY),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert!(
        e.starts_with("--rate is inf; use a request rate above 0"),
        "{e}"
    );
}

#[test]
fn the_load_survives_the_manifest_and_older_manifests_load() {
    let p = plan_of(&with_load("rate = 20\narrival = \"gamma\"\nburstiness = 0.25\nduration = \"3s\"\nwarmup = \"500ms\"\nmax_in_flight = 8"), &Overrides::default()).unwrap();
    let json = serde_json::to_value(&p.load).unwrap();
    assert_eq!(json["rate"], 20.0);
    assert_eq!(
        json["arrival"],
        serde_json::json!({ "kind": "gamma", "shape": 0.25 })
    );
    assert_eq!(json["duration"], "3s");
    assert_eq!(json["warmup_duration"], "500ms");
    assert_eq!(json["max_in_flight"], 8);
    let back: crate::plan::Load = serde_json::from_value(json).unwrap();
    assert_eq!(back.arrival, Arrival::Gamma { shape: 0.25 });
    assert_eq!(back.duration, Some(Duration::from_secs(3)));
    let old = serde_json::json!({ "sessions": 2, "concurrency": 1, "warmup_sessions": 0, "session_interval": null });
    let old: crate::plan::Load = serde_json::from_value(old).unwrap();
    assert_eq!(
        (old.rate, old.arrival, old.max_in_flight),
        (None, Arrival::Poisson, None)
    );
    assert_eq!(old.shape_line(), "");
}

#[test]
fn interleaved_cells_share_one_process_at_the_rate() {
    let load = crate::plan::Load {
        rate: Some(100.0),
        arrival: Arrival::Constant,
        ..Default::default()
    };
    // Sessions in turn order planning 1, 2, 1, 1 requests: 10 ms per request.
    let starts = crate::plan::schedule::interleaved_starts(1, &load, &[1, 2, 1, 1]);
    let offs: Vec<f64> = starts.into_iter().map(ms).collect();
    assert_eq!(offs, vec![0.0, 10.0, 30.0, 40.0]);
}
