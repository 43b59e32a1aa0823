//! Fault injection in the simulator, each kind, on SSE and WebSocket.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use crate::support::sim_client::*;

const BODY: &str = r#"{"model":"sim","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"Write code"}]}"#;

#[tokio::test]
async fn status_faults_answer_with_the_provider_error_shape() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let r = post(
        &mut c,
        "/chat/completions",
        BODY,
        &[("x-sim-fault", "status=429")],
    )
    .await;
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(r.json()["error"]["code"], "rate_limit_exceeded");
    let r = post(
        &mut c,
        "/responses",
        r#"{"model":"sim","input":"x","stream":true}"#,
        &[("x-sim-fault", "status=500")],
    )
    .await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["error"]["type"], "server_error");
}

#[tokio::test]
async fn reset_after_n_chunks_aborts_the_connection() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let r = post(
        &mut c,
        "/chat/completions",
        BODY,
        &[("x-sim-fault", "reset-after=3")],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(!r.body.contains("[DONE]"));
    assert!(r.body_error, "the body must end in an error, not cleanly");
    let id = r.data()[0]["id"].as_str().unwrap().to_string();
    let t = h.trace.get(&id).unwrap();
    assert_eq!(t.chunk_writes.len(), 3);
    assert_eq!(t.fault.as_deref(), Some("reset-after=3"));
    // The connection is gone.
    assert!(c.ready().await.is_err() || c.is_closed());
}

#[tokio::test]
async fn stall_delays_the_first_token_and_malformed_breaks_the_stream() {
    let h = sim("fast").await;
    let mut c = h1_to(&h).await;
    let r = post(
        &mut c,
        "/chat/completions",
        BODY,
        &[("x-sim-fault", "stall=300ms")],
    )
    .await;
    let id = r.data()[0]["id"].as_str().unwrap().to_string();
    let t = h.trace.get(&id).unwrap();
    let ttft = t.chunk_writes[0].at - t.received_at;
    assert!(ttft >= Duration::from_millis(300), "{ttft:?}");
    assert_eq!(r.events.last().unwrap().data, "[DONE]");
    let r = post(
        &mut c,
        "/responses",
        r#"{"model":"sim","input":"x","stream":true,"max_output_tokens":50}"#,
        &[("x-sim-fault", "malformed-after=2")],
    )
    .await;
    let deltas = r
        .events
        .iter()
        .filter(|e| e.event.as_deref() == Some("response.output_text.delta"))
        .count();
    assert_eq!(deltas, 2);
    let last = r.events.last().unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&last.data).is_err(),
        "{}",
        last.data
    );
    assert!(!r.body.contains("response.completed"));
}

#[tokio::test]
async fn websocket_faults_close_1011_reset_and_status() {
    let h = sim("fast").await;
    let mut ws = ws_to(&h, &[]).await;
    ws_send(&mut ws, create("x", json!({"sim_fault": "status=429"}))).await;
    let e = ws_until(&mut ws, "error").await.pop().unwrap().1;
    assert_eq!(e["status"], 429);
    assert_eq!(e["error"]["code"], "rate_limit_exceeded");
    ws_send(
        &mut ws,
        create(
            "x",
            json!({"sim_fault": "ws-close-1011-after=4", "max_output_tokens": 100}),
        ),
    )
    .await;
    let mut deltas = 0;
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Text(t))) => {
                if t.as_str().contains("output_text.delta") {
                    deltas += 1;
                }
            }
            Some(Ok(Message::Close(f))) => break f,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(deltas, 4);
    assert_eq!(close.unwrap().code, CloseCode::Error);
    // reset-after via the connection header.
    let mut ws = ws_to(&h, &[("x-sim-fault", "reset-after=2")]).await;
    ws_send(&mut ws, create("x", json!({"max_output_tokens": 100}))).await;
    let mut deltas = 0;
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Text(t))) if t.as_str().contains("output_text.delta") => deltas += 1,
            Some(Ok(Message::Text(_))) => {}
            other => break other,
        }
    };
    assert!(deltas <= 2);
    assert!(
        !matches!(end, Some(Ok(Message::Close(_)))),
        "a reset is not a clean close: {end:?}"
    );
    let t = h
        .trace
        .all()
        .into_iter()
        .find(|t| t.fault.as_deref() == Some("reset-after=2"))
        .unwrap();
    assert_eq!(t.chunk_writes.len(), 2);
}
