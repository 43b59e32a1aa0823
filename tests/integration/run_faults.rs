//! `spark-bench run` with injected faults: each failure is recorded with the right kind, the
//! session goes on, the run succeeds, and failures stay out of the latency statistics.

use spark_bench::recorder::Metric;
use spark_bench::store::{read_hlog, LoadedRun, RunStatus};
use spark_bench::vocab::{OutcomeKind, RequestKind};

use crate::binary::*;
use crate::support::run::*;

const FAULTS: &str = r#"
name = "faults"
seed = 3
max_output_tokens = 24
link = "rtt=5ms"

[matrix]
targets = ["fw"]
transports = ["http", "http-pooled", "http2", "ws"]

[targets.fw]
sim_profile = "wafer"
stall_timeout = "400ms"

[[turns]]
prompt = "Write a function."

[[turns]]
prompt = "Make it faster."
fault = "status=500"

[[turns]]
prompt = "Add a test."

[[turns]]
prompt = "Explain it."
fault = "stall=2s"

[[turns]]
prompt = "Shorter, please."

[[turns]]
prompt = "Rename it."
fault = "reset-after=3"

[[turns]]
prompt = "Thanks. Anything else?"
"#;

/// User turn index → the fault it carries.
const FAULT_TURNS: [(usize, &str); 3] = [(1, "status=500"), (3, "stall"), (5, "reset")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults_are_recorded_by_kind_and_the_session_goes_on() {
    let tmp = testkit::tempdir().unwrap();
    let s = scenario(tmp.path(), "faults.toml", FAULTS);
    let out = tmp.path().join("results");
    // Through `execute`, for the exit code a user sees.
    let cli = <spark_bench::cli::Cli as clap::Parser>::try_parse_from([
        "spark-bench",
        "run",
        s.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--no-report",
    ])
    .unwrap();
    let spark_bench::cli::Command::Run(args) = cli.command else {
        unreachable!()
    };
    let code = spark_bench::commands::run::execute(args).await.unwrap();
    assert_eq!(code, 0, "a run with failed requests still succeeds");

    let dir = only_run(&out);
    let run = LoadedRun::open(&dir).unwrap();
    assert_eq!(run.manifest.status, RunStatus::Complete);
    // Provenance: how the arrival timestamps were taken.
    let how = run.manifest.timestamps.as_deref().unwrap_or("");
    #[cfg(target_os = "linux")]
    assert!(
        how.starts_with("kernel receive time (SO_TIMESTAMPNS)"),
        "{how}"
    );
    assert!(!how.is_empty());
    let all = records(&run);
    for transport in ["http", "http-pooled", "http2", "ws"] {
        // The user turns of the one session, in order (ws warm-ups aside).
        let turns: Vec<_> = all
            .iter()
            .filter(|r| r.transport.as_str() == transport && r.kind == RequestKind::User)
            .collect();
        assert_eq!(turns.len(), 7, "{transport}: {turns:#?}");
        let outcomes: Vec<_> = turns
            .iter()
            .map(|r| (r.outcome, r.http_status, r.chunks.len()))
            .collect();
        for (i, r) in turns.iter().enumerate() {
            let fault = FAULT_TURNS.iter().find(|(t, _)| *t == i).map(|(_, f)| *f);
            match fault {
                None => assert!(
                    r.is_ok() && r.first_token_ns.is_some() && r.output_tokens > 0,
                    "{transport} turn {i} should succeed after/between faults: {r:#?}\nall: {outcomes:?}"
                ),
                Some("status=500") => {
                    // HTTP: a 500 status. WebSocket: the error envelope (status 500 in it).
                    // One behaviour, one kind on every transport (docs/hostile-servers.md).
                    assert_eq!(r.outcome, OutcomeKind::HttpStatus, "{transport}: {r:#?}");
                    assert_eq!(r.http_status, Some(500), "{transport}: {r:#?}");
                    assert!(r.first_token_ns.is_none() && r.chunks.is_empty());
                }
                Some("stall") => {
                    assert_eq!(r.outcome, OutcomeKind::Timeout, "{transport}: {r:#?}");
                    assert!(r.chunks.is_empty());
                    // Cut off by the 400 ms stall timeout, not by the 2 s stall ending.
                    let waited = r.end_ns.unwrap() - r.dispatch_ns;
                    assert!(
                        (400_000_000..1_500_000_000).contains(&waited),
                        "{transport}: gave up after {} ms",
                        ms(waited)
                    );
                }
                Some(_) => {
                    assert_eq!(r.outcome, OutcomeKind::Truncated, "{transport}: {r:#?}");
                    // The chunks before the reset arrived and are kept with the record.
                    assert_eq!(r.chunks.len(), 3, "{transport}: {r:#?}");
                }
            }
        }

        // summary.json: failures counted by kind, not in the latency histograms.
        let cell = run.summary.cell("fw", transport).unwrap();
        let error_kind = "http-status";
        let want: std::collections::BTreeMap<String, u64> =
            [("ok", 4), (error_kind, 1), ("timeout", 1), ("truncated", 1)]
                .into_iter()
                .map(|(k, n)| (k.to_string(), n))
                .collect();
        assert_eq!(cell.by_outcome, want, "{transport}");
        assert_eq!(
            (cell.requests, cell.ok, cell.failed),
            (7, 4, 3),
            "{transport}"
        );
        for m in [Metric::Ttft, Metric::E2e, Metric::Overhead, Metric::Tpot] {
            assert_eq!(cell.metric(m).unwrap().count, cell.ok, "{transport} {m:?}");
        }
        let hlog = read_hlog(&dir.join(format!("histograms/fw/{transport}/ttft.hlog"))).unwrap();
        assert_eq!(
            hlog.len(),
            cell.ok,
            "{transport}: TTFT histogram holds failures"
        );
        // The session with failures is counted as failed, and stays out of session_wall.
        assert_eq!(cell.failed_sessions, 1);
        assert!(cell.metric(Metric::SessionWall).is_none());
    }
    let sessions = run.sessions().unwrap();
    assert_eq!(sessions.len(), 4);
    assert!(sessions.iter().all(|s| s.failed == 3), "{sessions:?}");
}
