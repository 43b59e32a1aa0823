//! Link emulation phases against the simulator, rtt=50ms with TLS: through the client-side
//! link (every phase costs one RTT), then through the server-side link (`SimConfig.link`,
//! like `serve --link`: the same except TCP connect, which the kernel completes).

use std::time::Duration;

use serde_json::json;
use spark_bench::link::Link;
use spark_bench::sim::{self, Profile, SimConfig, SimHandle};
use spark_bench::tls::SelfSigned;

use crate::sim_client::*;

const RTT: Duration = Duration::from_millis(50);

fn within(name: &str, got: Duration, want: Duration) {
    let err = (got.as_secs_f64() - want.as_secs_f64()).abs() / want.as_secs_f64();
    eprintln!("{name}: measured {:.2} ms, expected {:.2} ms ({:+.1}%)", got.as_secs_f64() * 1e3, want.as_secs_f64() * 1e3, (got.as_secs_f64() / want.as_secs_f64() - 1.0) * 100.0);
    assert!(err <= 0.10, "{name}: {got:?} vs {want:?}");
}

async fn tls_sim(server_link: Link) -> (SimHandle, SelfSigned) {
    let cert = SelfSigned::generate().unwrap();
    let mut cfg = SimConfig::new(Profile::builtin("fast").unwrap());
    cfg.tls = Some(cert.clone());
    cfg.link = server_link;
    (sim::spawn(cfg).await.unwrap(), cert)
}

async fn phases(h: &SimHandle, cert: &SelfSigned, client_link: Option<Link>) {
    let client_side = client_link.is_some();
    // TCP + TLS, then an HTTP/1.1 request on that connection.
    let o = open(h.addr, Some(cert), client_link, &[b"http/1.1"]).await;
    if client_side {
        within("tcp connect", o.tcp, RTT);
    } else {
        eprintln!("tcp connect: measured {:.3} ms (loopback; the kernel completes it)", o.tcp.as_secs_f64() * 1e3);
        assert!(o.tcp < Duration::from_millis(10), "{:?}", o.tcp);
    }
    within("tls handshake", o.tls, RTT);
    let mut c = h1(o.io).await;
    let r = post(&mut c, "/responses", r#"{"model":"sim","stream":true,"max_output_tokens":20,"input":"hi"}"#, &[]).await;
    assert_eq!(r.status, 200);
    let server_ms: f64 = r.headers["openai-processing-ms"].to_str().unwrap().parse().unwrap();
    within("http request -> first byte", r.head_at - r.sent_at, RTT + Duration::from_secs_f64(server_ms / 1e3));
    // TTFT over HTTP against ground truth: 1 RTT + the server's own time to its first chunk.
    let id = r.data().last().unwrap()["response"]["id"].as_str().unwrap().to_string();
    let t = h.trace.get(&id).unwrap();
    let first = r.events.iter().find(|e| e.event.as_deref() == Some("response.output_text.delta")).unwrap();
    within("http request -> first token", first.at - r.sent_at, RTT + (t.chunk_writes[0].at - t.received_at));
    // WebSocket: a new TCP+TLS connection, the upgrade, then a warm turn.
    let o = open(h.addr, Some(cert), client_link, &[b"http/1.1"]).await;
    let t0 = std::time::Instant::now();
    let mut ws = ws_over(o.io, &h.ws_url(), &[]).await;
    within("ws upgrade", t0.elapsed(), RTT);
    ws_send(&mut ws, create("hi", json!({"max_output_tokens": 10}))).await;
    let evs = ws_until(&mut ws, "response.completed").await;
    let prev = evs.last().unwrap().1["response"]["id"].as_str().unwrap().to_string();
    let sent = ws_send(&mut ws, create("more", json!({"previous_response_id": prev, "max_output_tokens": 10}))).await;
    let evs = ws_until(&mut ws, "response.completed").await;
    let id = evs.last().unwrap().1["response"]["id"].as_str().unwrap().to_string();
    let t = h.trace.get(&id).unwrap();
    within("warm ws turn -> response.created", evs[0].0 - sent, RTT + t.api_overhead);
    let first = evs.iter().find(|(_, v)| v["type"] == "response.output_text.delta").unwrap().0;
    within("warm ws turn -> first token", first - sent, RTT + (t.chunk_writes[0].at - t.received_at));
}

#[tokio::test]
async fn client_side_link_every_phase_costs_one_rtt() {
    let (h, cert) = tls_sim(Link::default()).await;
    let link: Link = "rtt=50ms".parse().unwrap();
    phases(&h, &cert, Some(link)).await;
}

#[tokio::test]
async fn server_side_link_same_except_tcp_connect() {
    let (h, cert) = tls_sim("rtt=50ms".parse().unwrap()).await;
    phases(&h, &cert, None).await;
}
