//! Round trips through a real directory: write → read gives the same rows and histograms.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::link::Link;
use crate::plan::{Cell, Load, Plan, Target};
use crate::recorder::{Metric, Recorder, Summary};
use crate::vocab::{
    ApiFlavour, Chunk, OutcomeKind, RequestKind, RequestRecord, ServerTiming, SessionRecord,
    TokenSource, TransportKind,
};

pub(crate) fn test_plan() -> Plan {
    let target = Target {
        name: "sim-wafer".into(),
        base_url: None,
        sim_profile: Some("wafer".into()),
        api: ApiFlavour::Responses,
        model: "sim-wafer".into(),
        api_key_env: Some("OPENAI_API_KEY".into()),
        hardware: "Wafer-scale (simulated)".into(),
        headers: BTreeMap::new(),
        store: false,
        ws_warmup: true,
        request_timing: true,
        request_timeout: Duration::from_secs(300),
        stall_timeout: Duration::from_secs(30),
        transports: TransportKind::ALL.to_vec(),
        net: Default::default(),
        ignore_eos: false,
        sim_profile_file: None,
    };
    Plan {
        scenario_name: "smoke test".into(),
        scenario_path: "scenarios/smoke.toml".into(),
        scenario_hash: "sha256:00".into(),
        seed: 7,
        system_prompt: "You are terse.".into(),
        cells: vec![
            Cell {
                target: target.clone(),
                transport: TransportKind::Http,
                cache: Default::default(),
            },
            Cell {
                target,
                transport: TransportKind::Ws,
                cache: Default::default(),
            },
        ],
        sessions: Default::default(),
        load: Load {
            sessions: 1,
            concurrency: 1,
            warmup_sessions: 0,
            session_interval: None,
            schedule: Default::default(),
            salt_key: 0,
            ..Default::default()
        },
        link: "rtt=40ms".parse::<Link>().unwrap(),
        link_for_real_targets: false,
        description: "a test".into(),
        gate: BTreeMap::new(),
        warnings: vec!["a warning".into()],
        scenario_source: "name = \"smoke test\"\n".into(),
        workload: None,
        slo: Default::default(),
        shard: None,
    }
}

fn records() -> Vec<RequestRecord> {
    let ms = 1_000_000;
    let mut out = Vec::new();
    for (i, transport) in ["http", "ws", "http", "ws"].into_iter().enumerate() {
        let i = i as u64;
        let first = (100 + i * 7) * ms;
        out.push(RequestRecord {
            id: i,
            target: "sim-wafer".into(),
            transport: transport.parse().unwrap(),
            session: (i / 2) as u32,
            turn: (i % 2) as u32,
            kind: if i % 2 == 0 {
                RequestKind::User
            } else {
                RequestKind::ToolResult
            },
            intended_ns: i * 1000 * ms,
            dispatch_ns: i * 1000 * ms + 5_000,
            dns_ns: (i == 0).then_some(1_234),
            tcp_connect_ns: (i < 2).then_some(40 * ms),
            tls_handshake_ns: (i < 2).then_some(41 * ms),
            ws_upgrade_ns: (i == 1).then_some(42 * ms),
            request_written_ns: Some(i * 1000 * ms + 90 * ms),
            response_headers_ns: Some(i * 1000 * ms + 95 * ms),
            first_event_ns: Some(i * 1000 * ms + 96 * ms),
            first_token_ns: Some(i * 1000 * ms + first),
            last_token_ns: Some(i * 1000 * ms + first + 30 * ms),
            end_ns: Some(i * 1000 * ms + first + 31 * ms),
            chunks: (0..4)
                .map(|c| Chunk {
                    at_ns: i * 1000 * ms + first + c * 10 * ms,
                    tokens: 1 + (c as u32 % 2),
                    text_bytes: 5,
                })
                .collect(),
            connection_reused: i >= 2,
            connection_id: i % 2,
            protocol: if transport == "ws" {
                crate::vocab::WireProtocol::WebSocket
            } else {
                crate::vocab::WireProtocol::Http1
            },
            alpn: Some("http/1.1".into()),
            bytes_sent: 1000 + i,
            bytes_received: 5000 + i,
            input_tokens: Some(120),
            cached_input_tokens: (i == 3).then_some(64),
            output_tokens: 6,
            token_source: TokenSource::ServerUsage,
            tool_calls: (i % 2) as u32,
            server_timing: (transport == "ws").then(|| ServerTiming {
                source: "websocket-timing".into(),
                ttft_ms: Some(80.5),
                total_ms: Some(111.0),
                api_overhead_ms: None,
                queue_ms: Some(0.25),
            }),
            response_id: Some(format!("resp_{i}")),
            ..Default::default()
        });
    }
    // A failure with an awkward error text, and a warm-up request.
    out.push(RequestRecord {
        id: 4,
        target: "sim-wafer".into(),
        transport: crate::vocab::TransportKind::Http,
        outcome: OutcomeKind::HttpStatus,
        http_status: Some(500),
        error: Some("status 500: \"boom\", then\nnewline".into()),
        ..Default::default()
    });
    out.push(RequestRecord {
        id: 5,
        target: "sim-wafer".into(),
        transport: crate::vocab::TransportKind::Ws,
        warmup: true,
        kind: RequestKind::Warmup,
        ..Default::default()
    });
    out
}

fn sessions() -> Vec<SessionRecord> {
    vec![
        SessionRecord {
            target: "sim-wafer".into(),
            transport: crate::vocab::TransportKind::Http,
            session: 0,
            warmup: false,
            start_ns: 0,
            end_ns: 1_500_000_000,
            requests: 3,
            failed: 1,
            interrupted: false,
        },
        SessionRecord {
            target: "sim-wafer".into(),
            transport: crate::vocab::TransportKind::Ws,
            session: 0,
            warmup: false,
            start_ns: 0,
            end_ns: 1_200_000_000,
            requests: 2,
            failed: 0,
            interrupted: false,
        },
    ]
}

fn write_run(root: &Path, status: RunStatus) -> (std::path::PathBuf, Recorder) {
    let mut w =
        RunWriter::create(root, &test_plan(), &["spark-bench".into(), "run".into()]).unwrap();
    let mut rec = Recorder::new();
    for r in records() {
        w.write_request(&r).unwrap();
        rec.add_request(&r);
    }
    for s in sessions() {
        w.write_session(&s).unwrap();
        rec.add_session(&s);
    }
    let summary = Summary::from_recorder(&rec);
    (w.finish(status, &rec, &summary).unwrap(), rec)
}

#[test]
fn round_trip_rows_histograms_summary_manifest() {
    let tmp = testkit::tempdir().unwrap();
    let (dir, rec) = write_run(tmp.path(), RunStatus::Complete);
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("-smoke-test-"), "{name}");
    let run = LoadedRun::open(&dir).unwrap();
    assert!(!run.rebuilt);
    assert_eq!(run.manifest.status, RunStatus::Complete);
    assert_eq!(run.manifest.run_id, name);
    assert!(run.manifest.ended_at.is_some());
    assert_eq!(run.manifest.link, "rtt=40ms");
    assert_eq!(run.manifest.scenario.source, "name = \"smoke test\"\n");
    assert_eq!(run.manifest.seed, 7);
    let plan = run.plan().unwrap();
    assert_eq!(plan.cells.len(), 2);
    assert_eq!(plan.warnings, vec!["a warning".to_string()]);
    assert_eq!(plan.scenario_source, "name = \"smoke test\"\n");

    assert_eq!(run.summary, Summary::from_recorder(&rec));
    let expected: BTreeMap<_, _> = rec
        .histograms()
        .map(|(k, m, h)| ((k.clone(), m), h.clone()))
        .collect();
    assert_eq!(run.histograms.len(), expected.len());
    assert!(run.histograms.contains_key(&(
        crate::recorder::CellKey::new("sim-wafer", "ws"),
        Metric::SessionWall
    )));
    for (k, h) in &expected {
        let got = &run.histograms[k];
        assert_eq!(got, h, "{k:?}");
        assert_eq!(got.len(), h.len());
    }

    let rows: Vec<RequestRow> = run.request_rows().unwrap().map(|r| r.unwrap()).collect();
    let want: Vec<RequestRow> = records().iter().map(RequestRow::from).collect();
    assert_eq!(rows, want);
    assert_eq!(run.records().unwrap(), records());
    assert_eq!(run.sessions().unwrap(), sessions());
    assert_eq!(run.chunk_rows().unwrap().count(), 16);
    // Raw samples hold exactly what the histograms hold.
    let samples = run.samples().unwrap();
    assert_eq!(samples.len(), run.histograms.len());
    for (k, vs) in &samples {
        let mut h = crate::recorder::new_histogram();
        vs.iter().for_each(|v| h.record(*v).unwrap());
        assert_eq!(&h, &run.histograms[k], "{k:?}");
    }
    // A recorder rebuilt from the CSVs summarises to the same numbers.
    assert_eq!(
        Summary::from_recorder(&run.recorder().unwrap()),
        run.summary
    );
    // timeline.json holds the recorder's sampled sessions, chunks included.
    let tl = run.timeline().unwrap();
    assert_eq!(tl, rec.timelines().cloned().collect::<Vec<_>>());
    assert_eq!(tl.len(), 2);
    assert!(tl.iter().all(|t| t.session == 0 && !t.requests.is_empty()));
    assert_eq!(tl[1].record.as_ref().map(|s| s.end_ns), Some(1_200_000_000));
}

#[test]
fn hlog_files_are_standard_interval_logs() {
    let tmp = testkit::tempdir().unwrap();
    let (dir, rec) = write_run(tmp.path(), RunStatus::Complete);
    let path = dir.join("histograms/sim-wafer/ws/ttft.hlog");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("#[Histogram log format version 1.3]"));
    assert!(text.contains("#[StartTime: "), "{text}");
    assert!(text.contains("#[BaseTime: "), "{text}");
    assert!(text.contains(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    ));
    let interval = text
        .lines()
        .find(|l| l.starts_with("Tag=ttft,0.000,"))
        .expect("one tagged interval");
    // The max column is in ms: two ws requests with TTFT ≈ 107 ms and 121 ms.
    let max: f64 = interval.split(',').nth(3).unwrap().parse().unwrap();
    assert!((max - 121.0).abs() < 0.2, "{interval}");
    // V2 deflate cookie (0x1c849304), base64 of the first bytes.
    let b64 = interval.split(',').nth(4).unwrap();
    assert!(b64.starts_with("HIST"), "{b64}");
    let h = read_hlog(&path).unwrap();
    let cell = rec
        .cell(&crate::recorder::CellKey::new("sim-wafer", "ws"))
        .unwrap();
    assert_eq!(&h, cell.histogram(Metric::Ttft).unwrap());
}

#[test]
fn interrupted_status_and_unfinished_runs() {
    let tmp = testkit::tempdir().unwrap();
    let (dir, _) = write_run(tmp.path(), RunStatus::Interrupted);
    let run = LoadedRun::open(&dir).unwrap();
    assert_eq!(run.manifest.status, RunStatus::Interrupted);
    let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
    assert!(text.contains("\"status\": \"interrupted\""));

    // A process that dies after flushing: manifest still `running`, no summary; the reader
    // recomputes from the CSV rows.
    let mut w = RunWriter::create(tmp.path(), &test_plan(), &[]).unwrap();
    assert_ne!(w.dir(), dir.as_path());
    let running = LoadedRun::open(w.dir()).unwrap();
    assert_eq!(running.manifest.status, RunStatus::Running);
    assert!(running.manifest.ended_at.is_none());
    assert!(running.summary.cells.is_empty());
    let mut rec = Recorder::new();
    for r in records() {
        w.write_request(&r).unwrap();
        rec.add_request(&r);
    }
    w.flush().unwrap();
    let died_dir = w.dir().to_path_buf();
    drop(w);
    let died = LoadedRun::open(&died_dir).unwrap();
    assert!(died.rebuilt);
    assert_eq!(died.skipped_rows, 0);
    assert_eq!(died.manifest.status, RunStatus::Running);
    assert_eq!(died.summary, Summary::from_recorder(&rec));
    // No timeline.json: the sample is rebuilt from the rows.
    assert_eq!(
        died.timeline().unwrap(),
        rec.timelines().cloned().collect::<Vec<_>>()
    );

    // Killed mid-row: half a row at the end of requests.csv is skipped and counted. The same
    // damage in a finished run (a copy cut short) drops the row too, and says so.
    let csv_path = died_dir.join(REQUESTS_FILE);
    let mut text = std::fs::read_to_string(&csv_path).unwrap();
    text.push_str("99,sim-wafer,ht");
    std::fs::write(&csv_path, &text).unwrap();
    let torn = LoadedRun::open(&died_dir).unwrap();
    assert_eq!(torn.skipped_rows, 1);
    assert_eq!(torn.summary, Summary::from_recorder(&rec));
    let finished_csv = dir.join(REQUESTS_FILE);
    let whole = LoadedRun::open(&dir).unwrap().records().unwrap().len();
    let mut text = std::fs::read_to_string(&finished_csv).unwrap();
    text.push_str("99,sim-wafer,ht");
    std::fs::write(&finished_csv, &text).unwrap();
    let run = LoadedRun::open(&dir).unwrap();
    assert_eq!(run.records().unwrap().len(), whole);
    let notes = run.row_notes().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("requests.csv") && n.contains("half-written row")),
        "{notes:?}"
    );
    // A bad row that is not the last one is an error, torn tail or not.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(2, "7,sim-wafer,not-a-transport");
    std::fs::write(&finished_csv, lines.join("\n")).unwrap();
    let err = LoadedRun::open(&dir)
        .unwrap()
        .records()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("requests.csv") && err.contains("bad row"),
        "{err}"
    );
}

#[test]
fn bad_root_fails_fast_and_names_the_path() {
    let tmp = testkit::tempdir().unwrap();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let err = RunWriter::create(&file, &test_plan(), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("not-a-dir") && err.contains("--out"), "{err}");
    let err = LoadedRun::open(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("not a spark-bench results directory"), "{err}");
}

#[test]
fn manifest_holds_no_secrets_only_env_var_names() {
    let tmp = testkit::tempdir().unwrap();
    let (dir, _) = write_run(tmp.path(), RunStatus::Complete);
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap()).unwrap();
    assert_eq!(m["schema_version"], 1);
    assert_eq!(m["tool"]["name"], "spark-bench");
    for key in ["hostname", "os", "arch", "cpus"] {
        assert!(!m["host"][key].is_null(), "host.{key}");
    }
    assert_eq!(
        m["plan"]["cells"][0]["target"]["api_key_env"],
        "OPENAI_API_KEY"
    );
    let text = m.to_string();
    assert!(!text.contains("api_key\""), "only api_key_env may appear");
    assert!(m["started_at"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn baselines_save_resolve_and_list() {
    let tmp = testkit::tempdir().unwrap();
    let root = tmp.path();
    let (dir, _) = write_run(root, RunStatus::Complete);
    let saved = save_baseline(root, &dir, "ci").unwrap();
    assert_eq!(saved, root.join("baselines/ci"));
    assert_eq!(resolve(root, "ci").unwrap(), saved);
    assert_eq!(resolve(root, dir.to_str().unwrap()).unwrap(), dir);
    let run_id = dir.file_name().unwrap().to_str().unwrap();
    assert_eq!(resolve(root, run_id).unwrap(), root.join(run_id));
    // Saving again replaces it.
    save_baseline(root, &dir, "ci").unwrap();
    assert_eq!(list_baselines(root).unwrap(), vec!["ci".to_string()]);
    let a = LoadedRun::open(&saved).unwrap();
    let b = LoadedRun::open(&dir).unwrap();
    assert_eq!(a.summary, b.summary);
    assert_eq!(a.histograms, b.histograms);
    let err = resolve(root, "nope").unwrap_err().to_string();
    assert!(
        err.contains("Known baselines: ci") && err.contains("--save-baseline"),
        "{err}"
    );
    assert!(save_baseline(root, &dir, "../evil")
        .unwrap_err()
        .to_string()
        .contains("invalid baseline name"));
}

#[test]
fn unsafe_target_names_are_refused_for_histogram_paths() {
    let tmp = testkit::tempdir().unwrap();
    let w = RunWriter::create(tmp.path(), &test_plan(), &[]).unwrap();
    let mut rec = Recorder::new();
    let mut r = records().remove(0);
    r.target = "../escape".into();
    rec.add_request(&r);
    let err = w
        .finish(RunStatus::Complete, &rec, &Summary::from_recorder(&rec))
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid target name"), "{err}");
}

// ---------------------------------------------------------------------------------------
// summary.json against schemas/summary.schema.json, with a small validator for the subset
// of JSON Schema the file uses (type, enum, required, properties, additionalProperties,
// items, minimum, maximum, $ref to #/$defs). Unknown keywords fail the test, so the
// validator cannot silently ignore a constraint the schema relies on.

fn validate(schema: &Value, root: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        errors.push(format!("{path}: schema is not an object"));
        return;
    };
    for (k, s) in obj {
        match k.as_str() {
            "$schema" | "$id" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let name = s
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .unwrap_or("?");
                match root["$defs"].get(name) {
                    Some(def) => validate(def, root, v, path, errors),
                    None => errors.push(format!("{path}: unresolved $ref {s}")),
                }
            }
            "type" => {
                let ok = match s.as_str().unwrap_or("") {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "integer" => v.is_u64() || v.is_i64(),
                    "number" => v.is_number(),
                    "boolean" => v.is_boolean(),
                    "null" => v.is_null(),
                    other => {
                        errors.push(format!("{path}: unsupported type {other}"));
                        true
                    }
                };
                if !ok {
                    errors.push(format!("{path}: expected {s}, got {v}"));
                }
            }
            "enum" => {
                if !s.as_array().is_some_and(|a| a.contains(v)) {
                    errors.push(format!("{path}: {v} not in {s}"));
                }
            }
            "minimum" => {
                if v.as_f64()
                    .is_some_and(|x| x < s.as_f64().unwrap_or(f64::MIN))
                {
                    errors.push(format!("{path}: {v} < minimum {s}"));
                }
            }
            "maximum" => {
                if v.as_f64()
                    .is_some_and(|x| x > s.as_f64().unwrap_or(f64::MAX))
                {
                    errors.push(format!("{path}: {v} > maximum {s}"));
                }
            }
            "required" => {
                for r in s.as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if v.is_object() && v.get(r).is_none() {
                        errors.push(format!("{path}: missing required {r}"));
                    }
                }
            }
            "properties" => {
                if let (Some(props), Some(o)) = (s.as_object(), v.as_object()) {
                    for (name, sub) in props {
                        if let Some(x) = o.get(name) {
                            validate(sub, root, x, &format!("{path}.{name}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                let Some(o) = v.as_object() else { continue };
                let known = obj.get("properties").and_then(Value::as_object);
                for (name, x) in o {
                    if known.is_some_and(|k| k.contains_key(name)) {
                        continue;
                    }
                    match s {
                        Value::Bool(false) => {
                            errors.push(format!("{path}: unexpected property {name}"))
                        }
                        Value::Bool(true) => {}
                        sub => validate(sub, root, x, &format!("{path}.{name}"), errors),
                    }
                }
            }
            "items" => {
                for (i, x) in v.as_array().into_iter().flatten().enumerate() {
                    validate(s, root, x, &format!("{path}[{i}]"), errors);
                }
            }
            other => errors.push(format!(
                "{path}: validator does not support keyword {other}"
            )),
        }
    }
}

fn schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/summary.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn summary_json_matches_its_schema() {
    let tmp = testkit::tempdir().unwrap();
    let (dir, _) = write_run(tmp.path(), RunStatus::Complete);
    let mut summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(SUMMARY_FILE)).unwrap()).unwrap();
    // A harness section with every optional part present.
    let mut stats = crate::recorder::harness::DispatchStats::default();
    for i in 0..3u64 {
        stats.add(&RequestRecord {
            intended_ns: i * 1_000_000,
            dispatch_ns: i * 1_000_000 + 50_000,
            ..Default::default()
        });
    }
    let probe = crate::clock::selfwatch::ProbeReport {
        timer_samples: 10,
        wall_s: 1.0,
        cpu_s: Some(0.5),
        cores: 2,
        cpu_peak_cores: Some(0.7),
        ..Default::default()
    };
    let ceiling = crate::recorder::harness::Ceiling {
        chunks_s: 1e5,
        found: true,
        measured_at: "2026-11-25T10:00:00.000Z".into(),
    };
    let harness = crate::recorder::harness::Harness::judge(
        &stats,
        Some(&probe),
        Some(ceiling),
        Default::default(),
    );
    summary["harness"] = serde_json::to_value(&harness).unwrap();
    assert!(summary["harness"]["cpu"]["peak_cores"].is_number());
    let schema = schema();
    // The sample must exercise the interesting parts: metrics, vs_http, failures.
    assert!(summary["cells"][1]["vs_http"]["ttft"].is_number());
    assert_eq!(summary["cells"][0]["by_outcome"]["http-status"], 1);
    let mut errors = Vec::new();
    validate(&schema, &schema, &summary, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");

    // And the validator does reject drift.
    let mut bad = summary.clone();
    bad["cells"][0]["metrics"]["ttft"]
        .as_object_mut()
        .unwrap()
        .remove("p99");
    bad["cells"][0]["surprise"] = Value::from(1);
    bad["cells"][1]["transport"] = Value::from("carrier-pigeon");
    let mut errors = Vec::new();
    validate(&schema, &schema, &bad, "$", &mut errors);
    assert_eq!(errors.len(), 3, "{errors:#?}");
}
