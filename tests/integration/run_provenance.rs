//! Two runs in one process keep their own provenance: the counts behind a manifest's
//! `timestamps` line belong to the run that wrote it, not to whatever else the process ran
//! (the test suite itself, a sweep, `--repeat`).

use spark_bench::store::LoadedRun;

use crate::support::run::{run_lib, scenario};

/// One session of two turns on the wafer simulator over `transport`.
fn one_transport(transport: &str) -> String {
    format!(
        r#"
name = "provenance-{transport}"
max_output_tokens = 8
link = "none"
[matrix]
targets = ["sim-wafer"]
transports = ["{transport}"]
[load]
sessions = 1
[[turns]]
prompt = "Write a function that adds two numbers."
[[turns]]
prompt = "Add a docstring."
"#
    )
}

fn timestamps(dir: &std::path::Path) -> String {
    let run = LoadedRun::open(dir).unwrap();
    run.manifest.timestamps.clone().unwrap_or_default()
}

/// An HTTP/2 run, then a WebSocket run: the WebSocket run read no HTTP body frame, so its
/// manifest must not say how HTTP body frames were stamped; and the other way round, each
/// run's counts are its own. With process-wide counters the second run's manifest carried
/// the first run's frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_in_one_process_keep_their_own_provenance() {
    let tmp = testkit::tempdir().unwrap();
    let h2 = scenario(tmp.path(), "h2.toml", &one_transport("http2"));
    let ws = scenario(tmp.path(), "ws.toml", &one_transport("ws"));

    let first = run_lib(&h2, &tmp.path().join("h2"), &[]).await;
    let second = run_lib(&ws, &tmp.path().join("ws"), &[]).await;
    let (first_how, second_how) = (timestamps(&first.dir), timestamps(&second.dir));
    assert!(
        first_how.contains("HTTP body frames stamped"),
        "the HTTP/2 run: {first_how}"
    );
    assert!(
        !second_how.contains("HTTP body frames"),
        "the WebSocket run read no HTTP body frame, yet its manifest says: {second_how}"
    );
    // The same, as values: the run's own connections and frames only.
    let (a, b) = (first.provenance, second.provenance);
    assert!(a.frames_exact > 0, "{a:?}");
    assert_eq!((b.frames_exact, b.frames_latest), (0, 0), "{b:?}");
    assert!(a.connections >= 1 && b.connections >= 1, "{a:?} {b:?}");
    assert_eq!(first_how, a.timestamps());
    assert_eq!(second_how, b.timestamps());

    // At the same time, on one runtime: still each its own.
    let (h2_out, ws_out) = (tmp.path().join("h2-again"), tmp.path().join("ws-again"));
    let (a, b) = tokio::join!(run_lib(&h2, &h2_out, &[]), run_lib(&ws, &ws_out, &[]));
    assert!(a.provenance.frames_exact > 0, "{:?}", a.provenance);
    assert_eq!(
        (b.provenance.frames_exact, b.provenance.frames_latest),
        (0, 0),
        "{:?}",
        b.provenance
    );
    assert!(!timestamps(&b.dir).contains("HTTP body frames"));
}
