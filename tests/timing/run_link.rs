//! `spark-bench run` on the emulated link: the recorded phases agree with the link model
//! (every RTT the protocol pays shows up once), and ws beats http on overhead and TTFT.

use spark_bench::recorder::Metric;
use spark_bench::store::LoadedRun;
use spark_bench::vocab::RequestKind;

use crate::support::run::*;

const RTT_MS: f64 = 40.0;

/// `measured` within 15% of `expected` (both ms), and never below it by more than 1 ms (a
/// delay line cannot make a round trip shorter).
fn near(what: &str, measured_ms: f64, expected_ms: f64) {
    let tol = expected_ms * 0.15;
    assert!(
        (measured_ms - expected_ms).abs() <= tol && measured_ms >= expected_ms - 1.0,
        "{what}: {measured_ms:.2} ms, expected {expected_ms:.2} ms ± {tol:.1}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phases_match_the_link_model_and_ws_beats_http() {
    let _serial = crate::support::sim_client::SERIAL.lock().await;
    // As the accuracy test: a single 13 ms stall of the timer on this VM once put a TCP
    // connect 33% over its one RTT.
    let _rt = crate::realtime::Realtime::new();
    let tmp = testkit::tempdir().unwrap();
    let s = scenario(
        tmp.path(),
        "link.toml",
        r#"
name = "link"
max_output_tokens = 16
link = "rtt=40ms"
[matrix]
targets = ["sim-wafer"]
transports = ["http", "ws"]
[[turns]]
prompt = "Write a function that adds two numbers."
[[turns]]
prompt = "Now three numbers."
[[turns]]
prompt = "Add a docstring."
"#,
    );
    // The first TLS handshakes of a process pay one-time initialisation (seen: +6 ms on a
    // loaded 2-core machine, debug build); a throwaway run without a link takes it first.
    run_lib(
        &s,
        &tmp.path().join("warm"),
        &["--link", "none", "--transport", "http"],
    )
    .await;
    let outcome = run_lib(&s, &tmp.path().join("results"), &[]).await;
    assert!(!outcome.interrupted);
    let run = LoadedRun::open(&outcome.dir).unwrap();
    assert_eq!(run.manifest.link, "rtt=40ms");
    let all = records(&run);
    assert!(all.iter().all(|r| r.is_ok()), "{all:#?}");

    // http: a new connection per request, each paying TCP connect (1 RTT) and a TLS 1.3
    // handshake (1 RTT); the response headers come 3 RTT after dispatch (connect, handshake,
    // request → response) plus the server's time to headers, which for a stream is ~0.
    let http: Vec<_> = all
        .iter()
        .filter(|r| r.transport.as_str() == "http")
        .collect();
    assert_eq!(http.len(), 3);
    for r in &http {
        let id = r.id;
        assert!(!r.connection_reused, "{r:#?}");
        near(
            &format!("http #{id} tcp_connect"),
            ms(r.tcp_connect_ns.unwrap()),
            RTT_MS,
        );
        near(
            &format!("http #{id} tls_handshake"),
            ms(r.tls_handshake_ns.unwrap()),
            RTT_MS,
        );
        let headers = ms(r.response_headers_ns.unwrap() - r.dispatch_ns);
        near(&format!("http #{id} first byte"), headers, 3.0 * RTT_MS);
        // The first event (`response.created`) waits for the API work on top.
        let api = r.server_timing.as_ref().unwrap().api_overhead_ms.unwrap();
        let first_event = ms(r.first_event_ns.unwrap() - r.dispatch_ns);
        near(
            &format!("http #{id} first event"),
            first_event,
            3.0 * RTT_MS + api,
        );
        eprintln!(
            "http #{id}: tcp {:.1} ms, tls {:.1} ms, first byte {headers:.1} ms, first event {first_event:.1} ms (api {api:.1} ms)",
            ms(r.tcp_connect_ns.unwrap()),
            ms(r.tls_handshake_ns.unwrap())
        );
    }

    // ws: one socket per session; its setup (TCP, TLS, upgrade: 1 RTT each) is paid once, by
    // the warm-up that opened it. Later turns: 1 RTT + the simulator's API time to the first
    // event.
    let ws: Vec<_> = all
        .iter()
        .filter(|r| r.transport.as_str() == "ws")
        .collect();
    assert_eq!(ws.len(), 4, "a warm-up and three turns: {ws:#?}");
    let warm = ws[0];
    assert_eq!(warm.kind, RequestKind::Warmup);
    assert_eq!(
        ws.iter().filter(|r| r.ws_upgrade_ns.is_some()).count(),
        1,
        "only the request that opened the socket pays the upgrade"
    );
    near("ws tcp_connect", ms(warm.tcp_connect_ns.unwrap()), RTT_MS);
    near(
        "ws tls_handshake",
        ms(warm.tls_handshake_ns.unwrap()),
        RTT_MS,
    );
    near("ws upgrade", ms(warm.ws_upgrade_ns.unwrap()), RTT_MS);
    eprintln!(
        "ws warm-up: tcp {:.1} ms, tls {:.1} ms, upgrade {:.1} ms",
        ms(warm.tcp_connect_ns.unwrap()),
        ms(warm.tls_handshake_ns.unwrap()),
        ms(warm.ws_upgrade_ns.unwrap())
    );
    for r in &ws[1..] {
        let id = r.id;
        assert_eq!(r.kind, RequestKind::User);
        assert!(r.connection_reused && r.tcp_connect_ns.is_none() && r.tls_handshake_ns.is_none());
        let t = r.server_timing.as_ref().unwrap();
        assert_eq!(t.source, "websocket-timing");
        let api = t.api_overhead_ms.unwrap();
        let first_event = ms(r.first_event_ns.unwrap() - r.dispatch_ns);
        near(&format!("ws #{id} first event"), first_event, RTT_MS + api);
        eprintln!("ws #{id}: first event {first_event:.1} ms (api {api:.1} ms)");
    }

    // summary.json: ws has the lower overhead and TTFT medians.
    let (h, w) = (
        run.summary.cell("sim-wafer", "http").unwrap(),
        run.summary.cell("sim-wafer", "ws").unwrap(),
    );
    // Both from server timing (the same definition), not server timing on ws and the
    // first-event estimate on http.
    for c in [h, w] {
        let sources: Vec<_> = c.overhead_sources.keys().map(String::as_str).collect();
        assert_eq!(sources, ["server-timing"], "{}", c.transport);
    }
    for m in [Metric::Overhead, Metric::Ttft] {
        let (hp, wp) = (h.metric(m).unwrap().p50, w.metric(m).unwrap().p50);
        eprintln!("{m:?} p50: http {hp:.1} ms, ws {wp:.1} ms");
        assert!(wp < hp, "{m:?} p50: ws {wp} ms, http {hp} ms");
    }
}
