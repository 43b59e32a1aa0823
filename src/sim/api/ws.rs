//! The Responses API WebSocket mode: `GET /v1/responses` upgraded to a WebSocket.
//!
//! Owns: the upgrade handshake, the connection-local cache (the most recent response and its
//! history), the one-in-flight policy (queue or reject), the lifetime limit and WS faults.
//! Does not own: the event format (`responses::RespEncoder`), the error envelope
//! (`wire::ApiError`) or timing (`model`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{SplitSink, StreamExt};
use futures_util::SinkExt;
use http::{HeaderValue, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::{mpsc, Mutex};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use super::responses::{parse_create, prepare, remember, Continuation, Prepared};
use crate::clock::tx::{Chain, TxLog};
use crate::sim::config::BusyPolicy;
use crate::sim::fault::Fault;
use crate::sim::model::{self, Break, RunEnd, Sink, Written};
use crate::sim::wire::{full, ApiError, Body, Conn, Ctx};

type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;
type WsTx = Arc<Mutex<SplitSink<Ws, Message>>>;

/// Per-connection options taken from the upgrade request's headers.
#[derive(Clone)]
struct ConnOpts {
    timing_metrics: bool,
    fault: Option<Fault>,
    ignore_eos: bool,
}

/// Answers the upgrade request with 101 and serves the socket in a task.
pub(crate) fn upgrade(ctx: &Ctx, mut req: Request<()>) -> Result<Response<Body>, ApiError> {
    let key = req
        .headers()
        .get("sec-websocket-key")
        .map(|k| derive_accept_key(k.as_bytes()));
    let version_ok = req
        .headers()
        .get("sec-websocket-version")
        .is_some_and(|v| v.as_bytes() == b"13");
    let Some(accept) = key.filter(|_| version_ok) else {
        return Err(ApiError::bad(
            "WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13.",
            None,
            None,
        ));
    };
    let opts = ConnOpts {
        timing_metrics: ctx.timing_metrics(),
        fault: ctx.fault()?,
        ignore_eos: ctx.ignore_eos(),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let conn = ctx.conn.clone();
    tokio::spawn(async move {
        if let Ok(upgraded) = on_upgrade.await {
            let ws = WebSocketStream::from_raw_socket(
                TokioIo::new(upgraded),
                Role::Server,
                // A small read buffer: tungstenite zero-fills it before every read.
                Some(
                    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
                        .read_buffer_size(16 * 1024),
                ),
            )
            .await;
            serve_socket(conn, ws, opts).await;
        }
    });
    let mut r = ctx.respond(StatusCode::SWITCHING_PROTOCOLS, "text/plain", full(""));
    let h = r.headers_mut();
    h.remove(http::header::CONTENT_TYPE);
    h.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", v);
    }
    if let Ok(v) = HeaderValue::from_str(&conn_model(ctx)) {
        h.insert("openai-model", v);
    }
    Ok(r)
}

fn conn_model(ctx: &Ctx) -> String {
    ctx.conn.engine.profile.model.clone()
}

/// Sends one text frame; returns the instant it was handed to the connection (the frame is
/// written and flushed within the send, so this is just before its bytes reach the socket,
/// the same point the SSE path stamps).
async fn send_text(tx: &WsTx, s: String) -> Result<Instant, ()> {
    send_watched(tx, s, None).await.map(|w| w.at)
}

/// [`send_text`], also asking `log` (the socket's transmit stamps) for the frame's.
async fn send_watched(
    tx: &WsTx,
    s: String,
    log: Option<(&TxLog, &mut Chain)>,
) -> Result<Written, ()> {
    let mut g = tx.lock().await;
    let written = Written {
        at: crate::clock::now(),
        sent: log.map(|(l, chain)| l.watch(s.len(), chain)),
    };
    g.send(Message::text(s)).await.map_err(|_| ())?;
    Ok(written)
}

/// The connection-local cache: the most recent response and its full history.
struct Cache {
    id: String,
    history: Vec<Value>,
}

struct Shared {
    conn: Arc<Conn>,
    tx: WsTx,
    opts: ConnOpts,
    busy: AtomicBool,
    /// Ends the connection (a fault that closes or resets it).
    end: CancellationToken,
}

async fn serve_socket(conn: Arc<Conn>, ws: Ws, opts: ConnOpts) {
    let now = crate::clock::now();
    // A lifetime too large to represent means "never" (a year is as good as never here).
    let deadline = now
        .checked_add(conn.ws_lifetime)
        .unwrap_or(now + std::time::Duration::from_secs(365 * 86_400));
    let (tx, mut rx) = ws.split();
    let shared = Arc::new(Shared {
        tx: Arc::new(Mutex::new(tx)),
        opts,
        busy: AtomicBool::new(false),
        end: CancellationToken::new(),
        conn: conn.clone(),
    });
    let (jobs_tx, jobs_rx) = mpsc::unbounded_channel::<(Instant, Value)>();
    let worker = tokio::spawn(worker(shared.clone(), jobs_rx));
    loop {
        tokio::select! {
            msg = rx.next() => {
                let received_at = crate::clock::now();
                match msg {
                    Some(Ok(Message::Text(t))) => on_text(&shared, &jobs_tx, received_at, t.as_str()).await,
                    Some(Ok(Message::Binary(_))) => {
                        let e = ApiError::bad("Binary frames are not supported; send JSON text frames.", None, Some("invalid_frame"));
                        let _ = send_text(&shared.tx, e.ws_envelope()).await;
                    }
                    // Ping is answered by tungstenite itself; Pong and raw frames need nothing.
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                }
            }
            _ = crate::clock::timer::sleep_until(deadline) => {
                worker.abort();
                let minutes = conn.ws_lifetime.as_secs_f64() / 60.0;
                let e = ApiError::bad(
                    format!("Responses websocket connection limit reached ({} minutes). Create a new websocket connection to continue.", fmt_minutes(minutes)),
                    None,
                    Some("websocket_connection_limit_reached"),
                );
                let _ = send_text(&shared.tx, e.ws_envelope()).await;
                let mut g = shared.tx.lock().await;
                let _ = g.send(Message::Close(Some(CloseFrame { code: CloseCode::Normal, reason: "connection limit reached".into() }))).await;
                break;
            }
            _ = shared.end.cancelled() => break,
            _ = conn.kill.cancelled() => break,
        }
    }
    worker.abort();
    // Dropping both halves drops the socket; with the reset flag set that is a TCP RST.
    drop(rx);
}

fn fmt_minutes(m: f64) -> String {
    if (m - m.round()).abs() < 1e-9 {
        format!("{}", m.round() as u64)
    } else {
        format!("{m:.2}")
    }
}

async fn on_text(
    shared: &Arc<Shared>,
    jobs: &mpsc::UnboundedSender<(Instant, Value)>,
    received_at: Instant,
    text: &str,
) {
    let v: Value = match serde_json::from_str(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            let e = ApiError::bad(
                "Invalid JSON in client event; expected an object with a 'type'.",
                None,
                Some("invalid_json"),
            );
            let _ = send_text(&shared.tx, e.ws_envelope()).await;
            return;
        }
    };
    if v.get("type").and_then(Value::as_str) != Some("response.create") {
        let e = ApiError::bad(
            "Unsupported client event type; expected 'response.create'.",
            Some("type"),
            Some("invalid_value"),
        );
        let _ = send_text(&shared.tx, e.ws_envelope()).await;
        return;
    }
    let was_busy = shared.busy.swap(true, Ordering::SeqCst);
    if was_busy && shared.conn.ws_busy == BusyPolicy::Reject {
        let e = ApiError::new(
            StatusCode::CONFLICT,
            "A response is already in progress on this connection.",
            None,
            Some("response_already_in_flight"),
        );
        let _ = send_text(&shared.tx, e.ws_envelope()).await;
        return;
    }
    let _ = jobs.send((received_at, v));
}

/// Runs the queued `response.create`s one at a time.
async fn worker(shared: Arc<Shared>, mut jobs: mpsc::UnboundedReceiver<(Instant, Value)>) {
    let mut cache: Option<Cache> = None;
    let mut warm = false;
    while let Some((received_at, v)) = jobs.recv().await {
        let result = turn(&shared, &mut cache, &mut warm, received_at, v).await;
        if let Err(e) = result {
            // A failed turn evicts the cache.
            cache = None;
            shared.busy.store(false, Ordering::SeqCst);
            if let Some(e) = e {
                let _ = send_text(&shared.tx, e.ws_envelope()).await;
            }
        }
    }
}

/// One turn. `Err(Some(e))`: answer with the error envelope; `Err(None)`: the stream broke.
async fn turn(
    shared: &Arc<Shared>,
    cache: &mut Option<Cache>,
    warm: &mut bool,
    received_at: Instant,
    v: Value,
) -> Result<(), Option<ApiError>> {
    let body = match v.get("response") {
        Some(Value::Object(inner)) => inner.clone(),
        _ => match v {
            Value::Object(m) => m,
            _ => return Err(Some(ApiError::bad("Expected an object.", None, None))),
        },
    };
    let mut req = parse_create(&body).map_err(Some)?;
    req.ignore_eos |= shared.opts.ignore_eos;
    let fault = match &req.sim_fault {
        Some(s) => {
            Some(Fault::parse(s).map_err(|e| Some(ApiError::bad(e, Some("sim_fault"), None)))?)
        }
        None => shared.opts.fault,
    };
    if let Some(Fault::Status(s)) = fault {
        return Err(Some(ApiError::injected_ws(s)));
    }
    let engine = shared.conn.engine.clone();
    let stored;
    let cont = match &req.previous_response_id {
        Some(id) if cache.as_ref().is_some_and(|c| &c.id == id) => Continuation {
            prev: cache.as_ref().map(|c| c.history.as_slice()),
            incremental_api: true,
            session_init: false,
        },
        Some(id) => {
            // Not the connection's most recent response: hydrate from the store (store=true
            // responses only), paying the full API processing like HTTP does.
            stored = engine.store_get(id).filter(|_| req.store);
            match &stored {
                Some(s) => Continuation {
                    prev: Some(s.history.as_slice()),
                    incremental_api: false,
                    session_init: !*warm,
                },
                None => return Err(Some(ApiError::prev_not_found(id))),
            }
        }
        None => Continuation {
            prev: None,
            incremental_api: false,
            session_init: !*warm,
        },
    };
    let Prepared {
        spec,
        mut enc,
        history,
        id,
    } = prepare(
        &engine,
        &req,
        cont,
        received_at,
        fault,
        shared.opts.timing_metrics,
    );
    if let Some(Fault::Status(s)) = spec.fault {
        return Err(Some(ApiError::injected_ws(s)));
    }
    let mut sink = WsSink {
        shared: shared.clone(),
        chain: None,
    };
    match model::run(&engine, &spec, &id, &mut sink, &mut enc).await {
        RunEnd::Completed(_) => {
            *warm = true;
            if req.store {
                remember(&engine, &id, history.clone(), &enc);
            }
            let mut history = history;
            history.extend(enc.output_item.iter().cloned());
            *cache = Some(Cache { id, history });
            Ok(())
        }
        RunEnd::Broken => Err(None),
    }
}

struct WsSink {
    shared: Arc<Shared>,
    /// This response's chain in the socket's transmit stamps.
    chain: Chain,
}

impl Sink for WsSink {
    async fn send(&mut self, event: &str, data: String) -> Result<Written, ()> {
        if event == "response.completed" {
            // The client may send its next create the moment it reads this event: the
            // connection must already count as idle then, or `Reject` would refuse it.
            self.shared.busy.store(false, Ordering::SeqCst);
        }
        let log = self.shared.conn.tx.as_deref().map(|l| (l, &mut self.chain));
        send_watched(&self.shared.tx, data, log).await
    }

    async fn send_group(&mut self, events: Vec<(String, String)>) -> Result<Vec<Written>, ()> {
        // Each event is its own message; the frames are buffered and flushed in one write,
        // so without a transmit stamp they all fall back to the instant before the flush.
        let mut g = self.shared.tx.lock().await;
        let mut sent = Vec::with_capacity(events.len());
        for (_, data) in events {
            sent.push(
                self.shared
                    .conn
                    .tx
                    .as_deref()
                    .map(|l| l.watch(data.len(), &mut self.chain)),
            );
            g.feed(Message::text(data)).await.map_err(|_| ())?;
        }
        let at = crate::clock::now();
        g.flush().await.map_err(|_| ())?;
        Ok(sent.into_iter().map(|sent| Written { at, sent }).collect())
    }

    async fn send_raw(&mut self, data: String) -> Result<Written, ()> {
        let log = self.shared.conn.tx.as_deref().map(|l| (l, &mut self.chain));
        send_watched(&self.shared.tx, data, log).await
    }

    async fn break_stream(&mut self, how: Break) {
        match how {
            Break::Reset => {
                self.shared.conn.reset.store(true, Ordering::SeqCst);
            }
            Break::Close1011 => {
                let mut g = self.shared.tx.lock().await;
                let frame = CloseFrame {
                    code: CloseCode::Error,
                    reason: "simulated internal error".into(),
                };
                let _ = g.send(Message::Close(Some(frame))).await;
            }
        }
        self.shared.end.cancel();
    }
}
