//! The data layers through the public API, as `spark-bench run` uses them: scenario file →
//! plan → records → results directory → loaded back.

use std::path::Path;

use spark_bench::plan::{self, Overrides};
use spark_bench::recorder::{Metric, Recorder, Summary};
use spark_bench::scenario;
use spark_bench::store::{self, LoadedRun, RunStatus, RunWriter};
use spark_bench::vocab::{Chunk, RequestRecord, SessionRecord, TokenSource};

#[test]
fn smoke_scenario_to_results_directory_and_back() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml");
    let loaded = scenario::load(&path).unwrap();
    let plan = plan::build(
        &loaded.scenario,
        &loaded.path,
        loaded.source.as_bytes(),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(plan.cells.len(), 4);

    let tmp = testkit::tempdir().unwrap();
    let cmd = vec![
        "spark-bench".to_string(),
        "run".into(),
        "scenarios/smoke.toml".into(),
    ];
    let mut writer = RunWriter::create(tmp.path(), &plan, &cmd).unwrap();
    let mut rec = Recorder::new();
    let ms = 1_000_000u64;
    let mut id = 0;
    for cell in &plan.cells {
        for s in &plan.sessions {
            for (turn, t) in s.turns.iter().enumerate() {
                let start = id * 100 * ms;
                let first = start + 50 * ms;
                let tokens = t.max_output_tokens.min(8);
                let r = RequestRecord {
                    id,
                    target: cell.target.name.clone(),
                    transport: cell.transport,
                    session: s.index,
                    turn: turn as u32,
                    intended_ns: start,
                    dispatch_ns: start,
                    first_event_ns: Some(start + 45 * ms),
                    first_token_ns: Some(first),
                    last_token_ns: Some(first + u64::from(tokens - 1) * ms),
                    end_ns: Some(first + u64::from(tokens) * ms),
                    chunks: (0..u64::from(tokens))
                        .map(|i| Chunk {
                            at_ns: first + i * ms,
                            tokens: 1,
                            text_bytes: 4,
                        })
                        .collect(),
                    output_tokens: tokens,
                    token_source: TokenSource::ServerUsage,
                    ..Default::default()
                };
                writer.write_request(&r).unwrap();
                rec.add_request(&r);
                id += 1;
            }
            let sr = SessionRecord {
                target: cell.target.name.clone(),
                transport: cell.transport,
                session: s.index,
                warmup: s.warmup,
                start_ns: 0,
                end_ns: id * 100 * ms,
                requests: s.turns.len() as u32,
                failed: 0,
                interrupted: false,
            };
            writer.write_session(&sr).unwrap();
            rec.add_session(&sr);
        }
    }
    let dir = writer
        .finish(RunStatus::Complete, &rec, &Summary::from_recorder(&rec))
        .unwrap();

    let run = LoadedRun::open(&store::resolve(tmp.path(), dir.to_str().unwrap()).unwrap()).unwrap();
    assert_eq!(run.manifest.status, RunStatus::Complete);
    assert_eq!(run.manifest.scenario.hash, plan.scenario_hash);
    assert_eq!(run.manifest.command_line, cmd);
    assert_eq!(run.summary.cells.len(), 4);
    let ws = run.summary.cell("sim-wafer", "ws").unwrap();
    assert_eq!(ws.ok, 6); // 2 sessions × 3 turns
    let ttft = ws.metric(Metric::Ttft).unwrap();
    assert!((ttft.p50 - 50.0).abs() < 0.1, "{ttft:?}");
    assert_eq!(
        run.histogram("sim-wafer", "ws", Metric::Ttft)
            .unwrap()
            .len(),
        6
    );
    assert_eq!(run.request_rows().unwrap().count(), id as usize);
    assert_eq!(run.plan().unwrap().sessions.len(), plan.sessions.len());
    assert!(spark_bench::recorder::table(&run.summary).contains("sim-wafer"));
}
