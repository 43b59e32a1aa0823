//! WebSocket mode of the simulator: chaining, warm-up, cache misses, busy policies,
//! lifetime limit, ping/pong.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use spark_bench::sim::{self, BusyPolicy, Profile, SimConfig};
use tokio_tungstenite::tungstenite::Message;

use crate::support::sim_client::*;

#[tokio::test]
async fn two_turns_chained_from_the_connection_cache_after_a_warm_up() {
    let h = sim("fast").await;
    let mut ws = ws_to(&h, &[]).await;
    // Warm-up: created + completed, no output, and it pays session init now.
    ws_send(
        &mut ws,
        create("Write a snake game", json!({"generate": false})),
    )
    .await;
    let evs = ws_until(&mut ws, "response.completed").await;
    assert_eq!(types(&evs), ["response.created", "response.completed"]);
    let warm = &evs[1].1["response"];
    assert_eq!(warm["output"], json!([]));
    assert_eq!(warm["usage"]["output_tokens"], 0);
    let warm_id = warm["id"].as_str().unwrap().to_string();
    assert!(h.trace.get(&warm_id).unwrap().session_init > Duration::ZERO);
    // Turn 1 chained from the warm-up: no session init, the warm-up input is cached.
    ws_send(
        &mut ws,
        create(
            "",
            json!({"previous_response_id": warm_id, "input": [], "max_output_tokens": 30}),
        ),
    )
    .await;
    let evs = ws_until(&mut ws, "response.completed").await;
    let ty = types(&evs);
    assert_eq!(
        &ty[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert_eq!(ty.last().unwrap(), "response.completed");
    for (i, (_, e)) in evs.iter().enumerate() {
        assert_eq!(e["sequence_number"].as_u64().unwrap(), i as u64);
    }
    let r1 = &evs.last().unwrap().1["response"];
    let id1 = r1["id"].as_str().unwrap().to_string();
    let t1 = h.trace.get(&id1).unwrap();
    assert_eq!(t1.session_init, Duration::ZERO);
    assert_eq!(
        r1["usage"]["output_tokens"].as_u64().unwrap() as u32,
        t1.output_tokens
    );
    assert_eq!(t1.cached_input_tokens, t1.input_tokens);
    // Turn 2: incremental input (a tool output and a message), chained from turn 1.
    let input = json!([{"type":"function_call_output","call_id":"call_1","output":"ok"},
        {"type":"message","role":"user","content":[{"type":"input_text","text":"Now optimise it."}]}]);
    ws_send(&mut ws, json!({"type":"response.create","model":"sim","store":false,"previous_response_id":id1,"input":input,"max_output_tokens":20})).await;
    let evs = ws_until(&mut ws, "response.completed").await;
    let r2 = &evs.last().unwrap().1["response"];
    let t2 = h.trace.get(r2["id"].as_str().unwrap()).unwrap();
    assert_eq!(t2.cached_input_tokens, t1.input_tokens + t1.output_tokens);
    assert_eq!(
        r2["usage"]["input_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap() as u32,
        t2.cached_input_tokens
    );
    assert_eq!(r2["previous_response_id"], id1.as_str());
    // The nested form is accepted too, and a fresh chain on a warm socket pays no session init.
    ws_send(&mut ws, json!({"type":"response.create","response":{"model":"sim","input":"hi","max_output_tokens":5}})).await;
    let evs = ws_until(&mut ws, "response.completed").await;
    assert_eq!(evs.last().unwrap().1["type"], "response.completed");
    // An older id (not the cached one), store=false: not found, and the cache is evicted.
    ws_send(&mut ws, create("x", json!({"previous_response_id": id1}))).await;
    let e = ws_until(&mut ws, "response.completed")
        .await
        .pop()
        .unwrap()
        .1;
    assert_eq!(
        e,
        json!({"type":"error","status":400,"error":{"type":"invalid_request_error","code":"previous_response_not_found",
        "message":format!("Previous response with id '{id1}' not found."),"param":"previous_response_id"}})
    );
}

#[tokio::test]
async fn first_turn_on_a_cold_socket_pays_session_init_and_ping_gets_pong() {
    let h = sim("fast").await;
    let mut ws = ws_to(&h, &[("x-responsesapi-include-timing-metrics", "true")]).await;
    ws.send(Message::Ping(b"hello".to_vec().into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(pong, Message::Pong(b"hello".to_vec().into()));
    ws_send(&mut ws, create("hi", json!({"max_output_tokens": 5}))).await;
    let evs = ws_until(&mut ws, "response.completed").await;
    let ty = types(&evs);
    assert_eq!(ty[ty.len() - 2], "responsesapi.websocket_timing");
    let t = h
        .trace
        .get(evs.last().unwrap().1["response"]["id"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        t.session_init,
        Profile::builtin("fast").unwrap().session_init
    );
}

#[tokio::test]
async fn busy_policy_queue_runs_the_second_create_after_the_first() {
    let h = sim("fast").await;
    let mut ws = ws_to(&h, &[]).await;
    ws_send(&mut ws, create("a", json!({"max_output_tokens": 200}))).await;
    ws_send(&mut ws, create("b", json!({"max_output_tokens": 20}))).await;
    let first = ws_until(&mut ws, "response.completed").await;
    let second = ws_until(&mut ws, "response.completed").await;
    assert_eq!(types(&first)[0], "response.created");
    assert_eq!(types(&second)[0], "response.created");
    assert!(types(&first).iter().all(|t| t != "error"));
    let id1 = first.last().unwrap().1["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let id2 = second.last().unwrap().1["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(id1, id2);
    // Ground truth: the second response's first chunk did not leave before the first's last
    // one. They may leave together: when the machine is busy, TCP can still hold the last
    // chunk's bytes when the next write comes, send both in one segment, and the kernel
    // stamps that segment once (seen under two CPU hogs).
    let (t1, t2) = (h.trace.get(&id1).unwrap(), h.trace.get(&id2).unwrap());
    let (last, first) = (t1.chunk_writes.last().unwrap().at, t2.chunk_writes[0].at);
    assert!(
        first >= last,
        "the second response's first chunk left {:?} before the first's last",
        last.duration_since(first)
    );
}

#[tokio::test]
async fn busy_policy_reject_answers_response_already_in_flight() {
    let mut cfg = SimConfig::new(Profile::builtin("fast").unwrap());
    cfg.ws_busy_policy = BusyPolicy::Reject;
    let h = sim::spawn(cfg).await.unwrap();
    let mut ws = ws_to(&h, &[]).await;
    ws_send(&mut ws, create("a", json!({"max_output_tokens": 400}))).await;
    ws_send(&mut ws, create("b", json!({"max_output_tokens": 20}))).await;
    let evs = ws_until(&mut ws, "error").await;
    let e = &evs.last().unwrap().1;
    assert_eq!(e["status"], 409);
    assert_eq!(e["error"]["code"], "response_already_in_flight");
    // The first response still completes.
    let rest = ws_until(&mut ws, "response.completed").await;
    assert_eq!(rest.last().unwrap().1["type"], "response.completed");
}

#[tokio::test]
async fn lifetime_limit_sends_the_error_envelope_then_closes() {
    let mut cfg = SimConfig::new(Profile::builtin("fast").unwrap());
    cfg.ws_lifetime = Duration::from_millis(300);
    let h = sim::spawn(cfg).await.unwrap();
    let mut ws = ws_to(&h, &[]).await;
    let evs = ws_until(&mut ws, "error").await;
    let e = &evs.last().unwrap().1;
    assert_eq!(e["status"], 400);
    assert_eq!(e["error"]["code"], "websocket_connection_limit_reached");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Create a new websocket connection"));
    let next = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap();
    assert!(
        matches!(next, Some(Ok(Message::Close(_))) | None | Some(Err(_))),
        "{next:?}"
    );
}

#[tokio::test]
async fn reject_policy_accepts_a_create_sent_right_after_completed_and_model_query_is_tolerated() {
    let mut cfg = SimConfig::new(Profile::builtin("fast").unwrap());
    cfg.ws_busy_policy = BusyPolicy::Reject;
    let h = sim::spawn(cfg).await.unwrap();
    let io = open(h.addr, None, None, &[]).await.io;
    let mut ws = ws_over(io, &format!("{}?model=sim", h.ws_url()), &[]).await;
    for i in 0..8 {
        ws_send(&mut ws, create("x", json!({"max_output_tokens": 5}))).await;
        let evs = ws_until(&mut ws, "response.completed").await;
        assert_eq!(
            evs.last().unwrap().1["type"],
            "response.completed",
            "turn {i}: {:?}",
            types(&evs)
        );
    }
    // A failed turn leaves the connection idle too.
    ws_send(
        &mut ws,
        create("x", json!({"previous_response_id": "resp_missing"})),
    )
    .await;
    assert_eq!(
        ws_until(&mut ws, "response.completed")
            .await
            .last()
            .unwrap()
            .1["error"]["code"],
        "previous_response_not_found"
    );
    ws_send(&mut ws, create("x", json!({"max_output_tokens": 5}))).await;
    assert_eq!(
        ws_until(&mut ws, "response.completed")
            .await
            .last()
            .unwrap()
            .1["type"],
        "response.completed"
    );
}

#[tokio::test]
async fn shutdown_stops_the_server() {
    let h = crate::support::sim_client::sim("fast").await;
    let addr = h.addr;
    let mut ws = ws_to(&h, &[]).await;
    h.shutdown().await;
    // Nothing listens on the port any more. A connect to a free port in the ephemeral range
    // can, rarely, connect to itself (TCP simultaneous open: the kernel picked that very
    // port as the local one); that is not our server, anything else that answers is.
    if let Ok(s) = tokio::net::TcpStream::connect(addr).await {
        assert_eq!(
            s.local_addr().unwrap(),
            s.peer_addr().unwrap(),
            "something still accepts on {addr} after shutdown"
        );
    }
    // Open connections are closed too.
    let end = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap();
    assert!(!matches!(end, Some(Ok(Message::Text(_)))), "{end:?}");
}

/// Two turns on a fresh server; returns the second turn's text.
async fn two_turn_text(seed: u64) -> String {
    let mut cfg = SimConfig::new(Profile::builtin("fast").unwrap());
    cfg.seed = seed;
    let h = sim::spawn(cfg).await.unwrap();
    let mut ws = ws_to(&h, &[]).await;
    ws_send(
        &mut ws,
        create("Write a snake game", json!({"max_output_tokens": 40})),
    )
    .await;
    let evs = ws_until(&mut ws, "response.completed").await;
    let id = evs.last().unwrap().1["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ws_send(
        &mut ws,
        create(
            "Add tests",
            json!({"previous_response_id": id, "max_output_tokens": 40}),
        ),
    )
    .await;
    let evs = ws_until(&mut ws, "response.completed").await;
    evs.iter()
        .filter_map(|(_, v)| v["delta"].as_str())
        .collect()
}

#[tokio::test]
async fn same_seed_and_content_give_the_same_output_across_servers() {
    let (a, b, c) = (
        two_turn_text(5).await,
        two_turn_text(5).await,
        two_turn_text(6).await,
    );
    assert!(!a.is_empty());
    assert_eq!(a, b);
    assert_ne!(a, c);
}
