//! Connection lifecycle against servers that close connections the way real ones do, written
//! here on raw sockets (apart from `src/sim`, and apart from hyper on the server side):
//! a keep-alive server that closes after every streamed response without saying so (as
//! llama.cpp's server was seen to), one that answers `Connection: close`, one with
//! `Keep-Alive: timeout=1`, one that closes a connection with a request unread (reset), one
//! that reads a request and closes without answering, and a WebSocket server that closes
//! idle sockets between turns.
//!
//! What must hold: a connection the server closed is not used again; a request the server
//! never read (the connection was reset under it) is sent again on a fresh connection and
//! shows it (`reconnects`, the fresh connection's phases), never as a failure and never
//! twice; a request the server may have read is never re-sent (`stale-connection`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::plan::{targets, Target};
use spark_bench::vocab::{ApiFlavour, OutcomeKind, RequestRecord, TransportKind};

/// How the HTTP/1.1 server treats its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// Keep-alive, closed `0` ms after every response, with no header saying so.
    AfterEach(u64),
    /// `Connection: close` on every response, the socket closed only 200 ms later.
    Announced,
    /// `Keep-Alive: timeout=1`; idle connections closed after 1 s.
    IdleTimeout,
    /// The second request of each connection is left unread and the socket closed under
    /// it (the kernel resets: the request never reached the application).
    SecondUnread,
    /// The second request of each connection is read, then the socket closed without an
    /// answer (the application saw it).
    SecondReadNoAnswer,
}

struct Server {
    base_url: String,
    /// Requests the server application read.
    requests_read: Arc<AtomicUsize>,
    /// TCP connections accepted.
    connections: Arc<AtomicUsize>,
}

const DELTAS: usize = 5;

fn chat_sse() -> String {
    chat_sse_body(DELTAS)
}

/// A chat-completions SSE body: a role chunk, `deltas` one-token content chunks (`tok0 `,
/// `tok1 `, …), a stop chunk, a usage chunk (9 prompt tokens) and `[DONE]`. Shared with
/// `rates.rs`.
pub(crate) fn chat_sse_body(deltas: usize) -> String {
    let mut events = vec![r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#.to_string()];
    for i in 0..deltas {
        events.push(format!(
            r#"{{"id":"chatcmpl-1","choices":[{{"index":0,"delta":{{"content":"tok{i} "}},"finish_reason":null}}]}}"#
        ));
    }
    events.push(
        r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#
            .to_string(),
    );
    let total = 9 + deltas;
    events.push(format!(
        r#"{{"id":"chatcmpl-1","choices":[],"usage":{{"prompt_tokens":9,"completion_tokens":{deltas},"total_tokens":{total}}}}}"#
    ));
    events.push("[DONE]".into());
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

/// Reads one request (head + `Content-Length` body); false on EOF before a full request.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                return true;
            }
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn respond(s: &mut TcpStream, extra_headers: &str) -> std::io::Result<()> {
    let body = chat_sse();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n{extra_headers}\r\n"
    );
    s.write_all(head.as_bytes()).await?;
    for event in body.split_inclusive("\n\n") {
        s.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())
            .await?;
    }
    s.write_all(b"0\r\n\r\n").await
}

async fn connection(mut s: TcpStream, mode: Close, read: Arc<AtomicUsize>) {
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let mut served = 0usize;
    loop {
        if served == 1 && mode == Close::SecondUnread {
            // Wait for the second request's bytes, then close with them unread: RST.
            let _ = s.readable().await;
            tokio::time::sleep(Duration::from_millis(2)).await;
            return;
        }
        let idle = if mode == Close::IdleTimeout {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(30)
        };
        match tokio::time::timeout(idle, read_request(&mut s, &mut buf)).await {
            Ok(true) => {}
            _ => return,
        }
        read.fetch_add(1, Ordering::SeqCst);
        if served == 1 && mode == Close::SecondReadNoAnswer {
            return;
        }
        let extra = match mode {
            Close::Announced => "connection: close\r\n",
            Close::IdleTimeout => "connection: keep-alive\r\nkeep-alive: timeout=1, max=100\r\n",
            _ => "",
        };
        if respond(&mut s, extra).await.is_err() {
            return;
        }
        served += 1;
        match mode {
            Close::AfterEach(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                return;
            }
            Close::Announced => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                return;
            }
            _ => {}
        }
    }
}

async fn server(mode: Close) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests_read = Arc::new(AtomicUsize::new(0));
    let connections = Arc::new(AtomicUsize::new(0));
    let (read, conns) = (requests_read.clone(), connections.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            conns.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(connection(s, mode, read.clone()));
        }
    });
    Server {
        base_url: format!("http://{addr}/v1"),
        requests_read,
        connections,
    }
}

fn target(base_url: &str, api: ApiFlavour) -> Target {
    Target {
        name: "peer".into(),
        base_url: Some(base_url.into()),
        sim_profile: None,
        api,
        model: "m".into(),
        ws_warmup: false,
        request_timing: false,
        request_timeout: Duration::from_secs(10),
        stall_timeout: Duration::from_secs(5),
        ..targets::builtin("sim-gpu").unwrap()
    }
}

/// `n` requests on one session of `kind`, `gap` apart (after each one ends).
async fn requests(t: &Target, kind: TransportKind, n: u32, gap: Duration) -> Vec<RequestRecord> {
    let clock = Clock::start();
    let c =
        Arc::new(Connector::new(t, kind, Trust::PublicRoots, Link::default(), clock, 1).unwrap());
    let mut s = c.session();
    let mut conv = Conversation::new("You are terse.", t.api, kind, false);
    let mut out = Vec::new();
    for turn in 0..n {
        conv.add_user_message(&format!("step {turn}"));
        let spec = RequestSpec {
            max_output_tokens: 16,
            ..Default::default()
        };
        let meta = RecordMeta {
            id: u64::from(turn),
            turn,
            intended_ns: clock.now_ns(),
            ..Default::default()
        };
        let (rec, _) = exchange(
            &mut s,
            t,
            &mut conv,
            &spec,
            &meta,
            &CancellationToken::new(),
        )
        .await;
        out.push(rec);
        tokio::time::sleep(gap).await;
    }
    out
}

fn summary(recs: &[RequestRecord]) -> String {
    recs.iter()
        .map(|r| {
            format!(
                "{}:{}{}{}",
                r.outcome.as_str(),
                r.connection_id,
                if r.connection_reused { "r" } else { "" },
                if r.reconnects > 0 { "+" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn a_server_closing_after_every_response_loses_no_pooled_request() {
    // 0 ms: the FIN follows the last chunk at once; 1–3 ms: it lands while the next
    // request is being prepared or sent (the race that lost requests before).
    for delay in [0u64, 1, 2, 3] {
        let srv = server(Close::AfterEach(delay)).await;
        let t = target(&srv.base_url, ApiFlavour::ChatCompletions);
        let recs = requests(&t, TransportKind::HttpPooled, 20, Duration::ZERO).await;
        let s = summary(&recs);
        eprintln!("close {delay} ms after each: {s}");
        assert!(recs.iter().all(|r| r.is_ok()), "{s}");
        // Each request read exactly once: nothing was sent twice.
        assert_eq!(srv.requests_read.load(Ordering::SeqCst), 20, "{s}");
        for r in &recs {
            // A request that replaced a closed connection ran on a fresh one, paid (and
            // shows) its TCP connect.
            if r.reconnects > 0 {
                assert!(!r.connection_reused && r.tcp_connect_ns.is_some(), "{r:?}");
            }
            assert!(r.reconnects <= 1, "{r:?}");
        }
        // The server closed every connection, so every request ran on a new one: found
        // closed before sending (nothing sent, nothing to re-send) or re-sent after a reset.
        let fresh = recs.iter().filter(|r| !r.connection_reused).count();
        assert_eq!(fresh, 20, "{s}");
    }
}

#[tokio::test]
async fn connection_close_and_keep_alive_timeout_are_honoured() {
    let srv = server(Close::Announced).await;
    let t = target(&srv.base_url, ApiFlavour::ChatCompletions);
    let recs = requests(&t, TransportKind::HttpPooled, 6, Duration::from_millis(20)).await;
    let s = summary(&recs);
    // The server said close: never reused, and nothing to reconnect from.
    assert!(
        recs.iter()
            .all(|r| r.is_ok() && !r.connection_reused && r.reconnects == 0),
        "{s}"
    );
    assert_eq!(srv.connections.load(Ordering::SeqCst), 6, "{s}");

    let srv = server(Close::IdleTimeout).await;
    let t = target(&srv.base_url, ApiFlavour::ChatCompletions);
    // Back to back: reused. After 800 ms idle (within a second of the 1 s timeout): not.
    let quick = requests(&t, TransportKind::HttpPooled, 3, Duration::ZERO).await;
    let s = summary(&quick);
    assert!(quick.iter().all(|r| r.is_ok() && r.reconnects == 0), "{s}");
    assert!(
        quick[1].connection_reused && quick[2].connection_reused,
        "{s}"
    );
    let slow = requests(&t, TransportKind::HttpPooled, 3, Duration::from_millis(800)).await;
    let s = summary(&slow);
    assert!(
        slow.iter()
            .all(|r| r.is_ok() && !r.connection_reused && r.reconnects == 0),
        "{s}"
    );
}

#[tokio::test]
async fn a_request_the_server_never_read_is_sent_again_and_one_it_read_is_not() {
    // The server closes with the second request unread: the kernel resets, so the request
    // provably never reached the application. It goes again on a fresh connection.
    let srv = server(Close::SecondUnread).await;
    let t = target(&srv.base_url, ApiFlavour::ChatCompletions);
    let recs = requests(&t, TransportKind::HttpPooled, 4, Duration::ZERO).await;
    let s = summary(&recs);
    eprintln!("second unread: {s}");
    assert!(recs.iter().all(|r| r.is_ok()), "{s}");
    assert_eq!(recs[1].reconnects, 1, "{s}");
    assert!(
        !recs[1].connection_reused && recs[1].tcp_connect_ns.is_some(),
        "{s}"
    );
    assert_eq!(srv.requests_read.load(Ordering::SeqCst), 4, "{s}");

    // The server reads the second request and closes without answering: it may have acted
    // on it, so it is a failure of its own kind and is never sent twice.
    let srv = server(Close::SecondReadNoAnswer).await;
    let t = target(&srv.base_url, ApiFlavour::ChatCompletions);
    let recs = requests(&t, TransportKind::HttpPooled, 3, Duration::ZERO).await;
    let s = summary(&recs);
    eprintln!("second read, no answer: {s}");
    assert_eq!(recs[1].outcome, OutcomeKind::StaleConnection, "{s}");
    assert_eq!(recs[1].reconnects, 0, "{s}");
    assert!(recs[1]
        .error
        .as_deref()
        .is_some_and(|e| e.contains("not sent again")));
    assert!(recs[0].is_ok() && recs[2].is_ok(), "{s}");
    // Requests 0, 1 (read, unanswered) and 2: three reads, none twice.
    assert_eq!(srv.requests_read.load(Ordering::SeqCst), 3, "{s}");

    // The plain `http` transport never reuses, so it never re-sends.
    let srv = server(Close::SecondReadNoAnswer).await;
    let t = target(&srv.base_url, ApiFlavour::ChatCompletions);
    let recs = requests(&t, TransportKind::Http, 3, Duration::ZERO).await;
    assert!(recs.iter().all(|r| r.is_ok() && r.reconnects == 0));
}

/// How the WebSocket server treats its sockets after a completed turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WsClose {
    /// Keeps them open.
    Never,
    /// Sends a Close frame 20 ms after each completed turn (between turns).
    BetweenTurns,
    /// Waits for the next turn's bytes and closes the socket with them unread (reset).
    NextTurnUnread,
}

/// A Responses WebSocket server on raw sockets and tungstenite.
async fn ws_server(mode: WsClose) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let turns = Arc::new(AtomicUsize::new(0));
    let seen = turns.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(s).await else {
                    return;
                };
                while let Some(Ok(msg)) = ws.next().await {
                    let Message::Text(_) = msg else { continue };
                    let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                    let id = format!("resp_{n}");
                    let mut events = vec![format!(
                        r#"{{"type":"response.created","response":{{"id":"{id}","status":"in_progress","output":[]}}}}"#
                    )];
                    for i in 0..DELTAS {
                        events.push(format!(
                            r#"{{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"tok{i} "}}"#
                        ));
                    }
                    events.push(format!(
                        r#"{{"type":"response.completed","response":{{"id":"{id}","status":"completed","output":[],"usage":{{"input_tokens":9,"output_tokens":{DELTAS}}}}}}}"#
                    ));
                    for e in events {
                        if ws.send(Message::Text(e.into())).await.is_err() {
                            return;
                        }
                    }
                    match mode {
                        WsClose::Never => {}
                        WsClose::BetweenTurns => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            let _ = ws.close(None).await;
                            return;
                        }
                        WsClose::NextTurnUnread => {
                            let _ = ws.get_ref().readable().await;
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            return;
                        }
                    }
                }
            });
        }
    });
    (format!("http://{addr}/v1"), turns)
}

#[tokio::test]
async fn a_websocket_closed_between_turns_is_replaced_by_the_next_turn() {
    let (url, turns) = ws_server(WsClose::BetweenTurns).await;
    let t = target(&url, ApiFlavour::Responses);
    let recs = requests(&t, TransportKind::Ws, 4, Duration::from_millis(100)).await;
    let s = summary(&recs);
    eprintln!("ws closed between turns: {s}");
    assert!(recs.iter().all(|r| r.is_ok()), "{s}");
    for r in &recs[1..] {
        // Found closed before the turn was sent: a new socket, nothing re-sent.
        assert_eq!(r.reconnects, 0, "{s}");
        assert!(!r.connection_reused && r.ws_upgrade_ns.is_some(), "{r:?}");
        // A new socket has no connection-local chain: the full history goes again.
        assert_eq!(r.chaining, spark_bench::vocab::Chaining::FullHistory);
    }
    assert_eq!(turns.load(Ordering::SeqCst), 4, "{s}");

    // A socket left open is reused, with nothing to reconnect.
    let (url, _) = ws_server(WsClose::Never).await;
    let t = target(&url, ApiFlavour::Responses);
    let recs = requests(&t, TransportKind::Ws, 3, Duration::from_millis(20)).await;
    let s = summary(&recs);
    assert!(recs.iter().all(|r| r.is_ok() && r.reconnects == 0), "{s}");
    assert!(
        recs[1].connection_reused && recs[2].connection_reused,
        "{s}"
    );
}

#[tokio::test]
async fn a_websocket_turn_the_server_never_read_goes_again_on_a_new_socket() {
    let (url, turns) = ws_server(WsClose::NextTurnUnread).await;
    let t = target(&url, ApiFlavour::Responses);
    let recs = requests(&t, TransportKind::Ws, 3, Duration::ZERO).await;
    let s = summary(&recs);
    eprintln!("ws turn unread: {s}");
    assert!(recs.iter().all(|r| r.is_ok()), "{s}");
    for r in &recs[1..] {
        assert_eq!(r.reconnects, 1, "{s}");
        assert!(!r.connection_reused && r.ws_upgrade_ns.is_some(), "{r:?}");
        assert_eq!(r.chaining, spark_bench::vocab::Chaining::FullHistory);
    }
    // Each turn read once: three turns, none twice.
    assert_eq!(turns.load(Ordering::SeqCst), 3, "{s}");
}

/// A Responses WebSocket server whose replies never end: `response.created` and a delta,
/// then another delta every `every` (zero: as fast as the socket takes them; `None`:
/// silence).
async fn ws_endless_server(every: Option<Duration>) -> String {
    ws_drip_server(every, usize::MAX).await
}

/// [`ws_endless_server`] that goes silent after `count` more deltas.
async fn ws_drip_server(every: Option<Duration>, count: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(s).await else {
                    return;
                };
                // One turn: its reply never ends.
                let Some(Ok(Message::Text(_))) = ws.next().await else {
                    return;
                };
                let created = r#"{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}"#;
                let delta = r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"tok "}"#;
                for e in [created, delta] {
                    if ws.send(Message::Text(e.into())).await.is_err() {
                        return;
                    }
                }
                let Some(every) = every else {
                    // Holds the socket open, silent, until the client goes.
                    while ws.next().await.is_some() {}
                    return;
                };
                for _ in 0..count {
                    if !every.is_zero() {
                        tokio::time::sleep(every).await;
                    }
                    if ws.send(Message::Text(delta.into())).await.is_err() {
                        return;
                    }
                }
                while ws.next().await.is_some() {}
            });
        }
    });
    format!("http://{addr}/v1")
}

/// One timer serves a WebSocket turn's two limits (`transport::ws::turn`): a server that
/// keeps sending is ended by the request timeout, and one that went quiet by the stall
/// timeout, each at its own time, with its own words.
#[tokio::test]
async fn a_websocket_turn_ends_at_its_deadline_or_at_its_stall_limit() {
    let ms = |n| Duration::from_millis(n);
    let waited = |r: &RequestRecord| Duration::from_nanos(r.end_ns.unwrap() - r.dispatch_ns);
    // A delta every 50 ms keeps the 300 ms stall limit away; the 700 ms deadline ends it.
    let url = ws_endless_server(Some(ms(50))).await;
    let t = Target {
        request_timeout: ms(700),
        stall_timeout: ms(300),
        ..target(&url, ApiFlavour::Responses)
    };
    let r = &requests(&t, TransportKind::Ws, 1, Duration::ZERO).await[0];
    assert_eq!(r.outcome, OutcomeKind::Timeout, "{r:#?}");
    assert!(
        r.error.as_deref().unwrap().contains("request timeout"),
        "{r:#?}"
    );
    // Not before the deadline; the upper bound is loose (a loaded machine), the words above
    // say which limit ended it.
    assert!((ms(700)..ms(5000)).contains(&waited(r)), "{:?}", waited(r));
    assert!(
        r.chunks.len() >= 5,
        "the drip's chunks are kept: {}",
        r.chunks.len()
    );

    // A flood (no pause between deltas): the socket always has more, yet the deadline ends it.
    let url = ws_endless_server(Some(Duration::ZERO)).await;
    let t = Target {
        request_timeout: ms(500),
        stall_timeout: ms(300),
        ..target(&url, ApiFlavour::Responses)
    };
    let flood = requests(&t, TransportKind::Ws, 1, Duration::ZERO);
    let r = &tokio::time::timeout(Duration::from_secs(10), flood)
        .await
        .expect("a flood must not starve the deadline")[0];
    assert_eq!(r.outcome, OutcomeKind::Timeout, "{r:#?}");
    assert!(
        r.error.as_deref().unwrap().contains("request timeout"),
        "{r:#?}"
    );
    assert!((ms(500)..ms(5000)).contains(&waited(r)), "{:?}", waited(r));
    assert!(r.chunks.len() > 1000, "a flood: {} chunks", r.chunks.len());

    // Silent after its first delta: the stall limit (300 ms), long before the 10 s deadline.
    // Then silent after 8 more deltas 50 ms apart: the stall limit counted from the last
    // delta (the timer was re-armed on the way).
    for (more, after, chunks) in [(0, ms(300), 1), (8, ms(700), 9)] {
        let url = match more {
            0 => ws_endless_server(None).await,
            n => ws_drip_server(Some(ms(50)), n).await,
        };
        let t = Target {
            request_timeout: Duration::from_secs(10),
            stall_timeout: ms(300),
            ..target(&url, ApiFlavour::Responses)
        };
        let r = &requests(&t, TransportKind::Ws, 1, Duration::ZERO).await[0];
        assert_eq!(r.outcome, OutcomeKind::Timeout, "{r:#?}");
        assert!(
            r.error.as_deref().unwrap().contains("stall timeout"),
            "{r:#?}"
        );
        assert!((after..ms(5000)).contains(&waited(r)), "{:?}", waited(r));
        assert_eq!(r.chunks.len(), chunks, "{r:#?}");
    }
}

/// The client answers a Ping mid-turn with a Pong carrying its payload (RFC 6455 §5.5.2):
/// tungstenite's server side pings after `response.created` and completes the reply only
/// when the pong came back, masked and whole.
#[tokio::test]
async fn a_ping_mid_turn_gets_its_pong() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(s).await.unwrap();
        while let Some(Ok(Message::Text(_))) = ws.next().await {
            let created = r#"{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}"#;
            ws.send(Message::Text(created.into())).await.unwrap();
            ws.send(Message::Ping(b"are you there".to_vec().into()))
                .await
                .unwrap();
            let answer = match ws.next().await {
                Some(Ok(Message::Pong(p))) if &p[..] == b"are you there" => {
                    r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":0}}}"#
                }
                other => {
                    eprintln!("no pong: {other:?}");
                    return;
                }
            };
            ws.send(Message::Text(answer.into())).await.unwrap();
        }
    });
    let t = target(&format!("http://{addr}/v1"), ApiFlavour::Responses);
    let recs = requests(&t, TransportKind::Ws, 2, Duration::ZERO).await;
    assert!(recs.iter().all(|r| r.is_ok()), "{}", summary(&recs));
    assert!(recs[1].connection_reused, "{}", summary(&recs));
}

/// Frames a server sends in the same segment as its 101, before any request, are read:
/// the upgrade hands them on to the socket's reader (here an error envelope, which is
/// never a stale frame: the turn fails with its status, not with a stall timeout).
#[tokio::test]
async fn frames_sent_with_the_101_are_not_lost() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut b = [0u8; 1];
            if s.read(&mut b).await.unwrap() == 0 {
                return;
            }
            head.push(b[0]);
        }
        let head = String::from_utf8(head).unwrap();
        let key = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("sec-websocket-key: ")
                    .or_else(|| l.strip_prefix("Sec-WebSocket-Key: "))
            })
            .unwrap()
            .trim()
            .to_string();
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        let envelope = br#"{"type":"error","status":429,"error":{"type":"rate_limit","code":"rate_limited","message":"slow down"}}"#;
        let mut out = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        )
        .into_bytes();
        out.extend_from_slice(&[0x81, envelope.len() as u8]);
        out.extend_from_slice(envelope);
        s.write_all(&out).await.unwrap();
        // Reads the client's frames until it goes.
        let mut sink = [0u8; 4096];
        while s.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    });
    let t = target(&format!("http://{addr}/v1"), ApiFlavour::Responses);
    let r = &requests(&t, TransportKind::Ws, 1, Duration::ZERO).await[0];
    assert_eq!(r.outcome, OutcomeKind::HttpStatus, "{r:#?}");
    assert_eq!(r.http_status, Some(429), "{r:#?}");
}

/// An HTTP/2 server (cleartext, prior knowledge; hyper's server side) that sends GOAWAY
/// (graceful shutdown) on each connection once `per_connection` streams completed on it.
async fn h2_goaway_server(per_connection: usize) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let read = Arc::new(AtomicUsize::new(0));
    let conns = Arc::new(AtomicUsize::new(0));
    let (read2, conns2) = (read.clone(), conns.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            conns2.fetch_add(1, Ordering::SeqCst);
            let read = read2.clone();
            tokio::spawn(async move {
                let done = Arc::new(tokio::sync::Notify::new());
                let served = Arc::new(AtomicUsize::new(0));
                let (done2, served2) = (done.clone(), served.clone());
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (read, done, served) = (read.clone(), done2.clone(), served2.clone());
                        async move {
                            let _ = req.into_body().collect().await;
                            read.fetch_add(1, Ordering::SeqCst);
                            let resp = hyper::Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(Full::new(bytes::Bytes::from(chat_sse())))
                                .unwrap();
                            if served.fetch_add(1, Ordering::SeqCst) + 1 >= per_connection {
                                done.notify_one();
                            }
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    },
                );
                let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => return,
                    _ = done.notified() => {}
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            });
        }
    });
    (format!("http://{addr}/v1"), read, conns)
}

#[tokio::test]
async fn http2_goaway_between_requests_loses_nothing() {
    let (url, read, conns) = h2_goaway_server(2).await;
    let t = target(&url, ApiFlavour::ChatCompletions);
    for gap in [Duration::ZERO, Duration::from_millis(30)] {
        read.store(0, Ordering::SeqCst);
        let recs = requests(&t, TransportKind::Http2, 8, gap).await;
        let s = summary(&recs);
        eprintln!("h2 GOAWAY every 2 streams, gap {gap:?}: {s}");
        assert!(recs.iter().all(|r| r.is_ok()), "{s}");
        assert_eq!(read.load(Ordering::SeqCst), 8, "{s}");
        let ids: std::collections::BTreeSet<u64> = recs.iter().map(|r| r.connection_id).collect();
        assert!(
            ids.len() >= 2,
            "the GOAWAYs did not move requests to new connections: {s}"
        );
    }
    assert!(conns.load(Ordering::SeqCst) >= 2);
}

/// A run against a server that closes each keep-alive connection after its response: the
/// summary counts the pooled cell's reuse (none) and says why, and the table prints it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_cell_that_never_pooled_says_why() {
    let srv = server(Close::AfterEach(0)).await;
    let text = format!(
        r#"
name = "closer"
max_output_tokens = 8
[load]
sessions = 1
[matrix]
targets = ["peer"]
transports = ["http-pooled"]
[targets.peer]
base_url = "{}"
api = "chat-completions"
model = "m"
[[turns]]
prompt = "one"
[[turns]]
prompt = "two"
[[turns]]
prompt = "three"
"#,
        srv.base_url
    );
    let plan = crate::support::run::plan_of("closer.toml", &text);
    let tmp = testkit::tempdir().unwrap();
    let outcome = spark_bench::runner::run(
        Arc::new(plan),
        tmp.path(),
        spark_bench::runner::Options::quiet(),
    )
    .await
    .unwrap();
    let cell = &outcome.summary.cells[0];
    assert_eq!(cell.ok, 3, "{cell:?}");
    assert_eq!((cell.connections.fresh, cell.connections.reused), (3, 0));
    assert_eq!(
        cell.connections.note.as_deref(),
        Some(spark_bench::driver::SERVER_CLOSES)
    );
    let table = spark_bench::recorder::table(&outcome.summary);
    assert!(
        table.contains("peer × http-pooled: reused 0/3: the server closed each connection"),
        "{table}"
    );
    // And summary.json says it too.
    let json = std::fs::read_to_string(outcome.dir.join("summary.json")).unwrap();
    assert!(json.contains(spark_bench::driver::SERVER_CLOSES), "{json}");
}
