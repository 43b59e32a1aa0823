//! HTTP front of the simulator: routing, request bodies, errors and the SSE body.
//!
//! Owns: one hyper service per connection, the per-connection context (reset flag, kill
//! switch), the JSON error shape, common headers (`x-request-id`, `openai-processing-ms`),
//! and the SSE [`Sink`]. Does not own: the APIs' semantics (`chat`, `responses`, `ws`).

// Handlers return a ready error `Response` on their (cold) error path; boxing it buys nothing.
#![allow(clippy::result_large_err)]

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::fault::Fault;
use super::model::{Break, EngineRef, Sink, Written};
use super::BusyPolicy;
use crate::clock::tx::{Chain, TxLog};

/// Request bodies larger than this are refused (413).
const MAX_BODY: usize = 32 << 20;
/// SSE frames buffered between the generator and hyper.
const SSE_BUFFER: usize = 64;

/// The response body type of every route.
pub(crate) type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// State shared by every request on one connection.
pub(crate) struct Conn {
    pub engine: EngineRef,
    pub ws_lifetime: Duration,
    pub ws_busy: BusyPolicy,
    /// Set before dropping the connection to make the close a TCP RST.
    pub reset: Arc<AtomicBool>,
    /// Cancels this connection (and its WebSocket, if upgraded).
    pub kill: CancellationToken,
    /// Transmit stamps of the socket, when the kernel gives them.
    pub tx: Option<Arc<TxLog>>,
}

/// What every handler gets besides the body.
pub(crate) struct Ctx {
    pub conn: Arc<Conn>,
    pub request_id: String,
    pub received_at: Instant,
    pub headers: HeaderMap,
}

impl Ctx {
    /// A header as a string, if present and valid.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The fault asked for by `x-sim-fault`, or an error response for a bad spec.
    pub fn fault(&self) -> Result<Option<Fault>, Response<Body>> {
        match self.header("x-sim-fault") {
            None => Ok(None),
            Some(s) => Fault::parse(s)
                .map(Some)
                .map_err(|m| self.error(StatusCode::BAD_REQUEST, &m, Some("x-sim-fault"), None)),
        }
    }

    /// Whether `x-responsesapi-include-timing-metrics: true` was sent.
    pub fn timing_metrics(&self) -> bool {
        self.header("x-responsesapi-include-timing-metrics")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// A response with the common headers; `openai-processing-ms` is measured now.
    pub fn respond(&self, status: StatusCode, content_type: &str, body: Body) -> Response<Body> {
        let mut r = Response::new(body);
        *r.status_mut() = status;
        let h = r.headers_mut();
        if let Ok(v) = HeaderValue::from_str(content_type) {
            h.insert(http::header::CONTENT_TYPE, v);
        }
        if let Ok(v) = HeaderValue::from_str(&self.request_id) {
            h.insert("x-request-id", v);
        }
        let ms = crate::clock::since(self.received_at)
            .as_millis()
            .to_string();
        if let Ok(v) = HeaderValue::from_str(&ms) {
            h.insert("openai-processing-ms", v);
        }
        r
    }

    /// A JSON response.
    pub fn json(&self, status: StatusCode, v: &Value) -> Response<Body> {
        self.respond(status, "application/json", full(v.to_string()))
    }

    /// The provider's error shape `{"error":{message,type,param,code}}`.
    pub fn error(
        &self,
        status: StatusCode,
        message: &str,
        param: Option<&str>,
        code: Option<&str>,
    ) -> Response<Body> {
        let kind = match status.as_u16() {
            429 => "rate_limit_exceeded",
            401 => "authentication_error",
            404 => "not_found_error",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        };
        let kind = if status == StatusCode::BAD_REQUEST {
            "invalid_request_error"
        } else {
            kind
        };
        self.json(
            status,
            &json!({"error": {"message": message, "type": kind, "param": param, "code": code}}),
        )
    }

    /// The response for an injected `status=` fault.
    pub fn status_fault(&self, status: u16) -> Response<Body> {
        if status == 429 {
            let mut r = self.error(
                StatusCode::TOO_MANY_REQUESTS,
                "Rate limit reached (simulated by x-sim-fault). Please try again in 1s.",
                None,
                Some("rate_limit_exceeded"),
            );
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            r
        } else {
            let s = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            self.error(
                s,
                "The server had an error while processing your request (simulated).",
                None,
                Some("server_error"),
            )
        }
    }

    /// An SSE response whose body is fed by the returned sink.
    pub fn sse(&self) -> (Response<Body>, SseSink) {
        let (tx, rx) = mpsc::channel(SSE_BUFFER);
        let mut r = self.respond(
            StatusCode::OK,
            "text/event-stream; charset=utf-8",
            ChannelBody {
                rx,
                tx: self.conn.tx.clone().map(|log| (log, Chain::None)),
            }
            .boxed(),
        );
        r.headers_mut().insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        );
        (
            r,
            SseSink {
                tx,
                conn: self.conn.clone(),
            },
        )
    }
}

/// A complete body.
pub(crate) fn full(s: impl Into<Bytes>) -> Body {
    Full::new(s.into()).boxed()
}

/// A frame for the body, and where to report the instant hyper took it.
type Queued = (Bytes, Option<oneshot::Sender<Written>>);

/// An SSE body fed from a channel; ends when the sender is dropped.
///
/// The ground-truth instant of an SSE chunk is when hyper's connection task takes it from
/// here to encode and write it, not when the generating task queued it: the two are one task
/// wake-up apart (~70 µs median on the 2-core test machine, more under load).
struct ChannelBody {
    rx: mpsc::Receiver<Queued>,
    /// The socket's transmit stamps, and this response's chain in them.
    tx: Option<(Arc<TxLog>, Chain)>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        this.rx.poll_recv(cx).map(|o| {
            o.map(|(b, stamp)| {
                if let Some(tx) = stamp {
                    let _ = tx.send(Written {
                        at: crate::clock::now(),
                        sent: this
                            .tx
                            .as_mut()
                            .map(|(log, chain)| log.watch(b.len(), chain)),
                    });
                }
                Ok(Frame::data(b))
            })
        })
    }
}

/// Writes SSE frames into the hyper body channel.
pub(crate) struct SseSink {
    tx: mpsc::Sender<Queued>,
    conn: Arc<Conn>,
}

impl SseSink {
    /// Queues one frame and waits until hyper takes it; returns that instant.
    async fn push(&mut self, frame: String) -> Result<Written, ()> {
        let (stamp_tx, stamp_rx) = oneshot::channel();
        self.tx
            .send((Bytes::from(frame), Some(stamp_tx)))
            .await
            .map_err(|_| ())?;
        stamp_rx.await.map_err(|_| ())
    }
}

impl Sink for SseSink {
    async fn send(&mut self, event: &str, data: String) -> Result<Written, ()> {
        let mut frame = String::with_capacity(event.len() + data.len() + 16);
        sse_event(&mut frame, event, &data);
        self.push(frame).await
    }

    async fn send_group(&mut self, events: Vec<(String, String)>) -> Result<Vec<Written>, ()> {
        // One body frame: hyper writes it (chunk-size line, events, CRLF) in one write.
        let mut frame = String::new();
        for (event, data) in &events {
            sse_event(&mut frame, event, data);
        }
        let w = self.push(frame).await?;
        Ok(vec![w; events.len()])
    }

    async fn send_raw(&mut self, data: String) -> Result<Written, ()> {
        self.push(format!("data: {data}\n\n")).await
    }

    async fn break_stream(&mut self, how: Break) {
        if how == Break::Reset {
            // Let hyper take the frames already queued, so the client sees the N chunks
            // before the reset, then abort the whole connection.
            let _ = self.tx.reserve_many(SSE_BUFFER).await;
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.conn.reset.store(true, Ordering::SeqCst);
            self.conn.kill.cancel();
            // Keep the body open until the connection is gone, or hyper could still end
            // the body cleanly when this sender is dropped.
            self.tx.closed().await;
        }
    }
}

/// Appends one SSE event (`event:` line when named, then `data:`).
fn sse_event(out: &mut String, event: &str, data: &str) {
    if !event.is_empty() {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
}

/// A sink for non-streaming requests: paces the model but writes nothing.
pub(crate) struct NullSink;

impl Sink for NullSink {
    async fn send(&mut self, _event: &str, _data: String) -> Result<Written, ()> {
        Ok(Written::now())
    }
    async fn send_group(&mut self, events: Vec<(String, String)>) -> Result<Vec<Written>, ()> {
        Ok(vec![Written::now(); events.len()])
    }
    async fn send_raw(&mut self, _data: String) -> Result<Written, ()> {
        Ok(Written::now())
    }
    async fn break_stream(&mut self, _how: Break) {}
}

/// Parses a JSON body; the error is a ready 400 response.
pub(crate) fn parse_json(
    ctx: &Ctx,
    body: &[u8],
) -> Result<serde_json::Map<String, Value>, Response<Body>> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ctx.error(
            StatusCode::BAD_REQUEST,
            "The request body must be a JSON object.",
            None,
            None,
        )),
        Err(e) => Err(ctx.error(
            StatusCode::BAD_REQUEST,
            &format!("We could not parse the JSON body of your request: {e}"),
            None,
            None,
        )),
    }
}

/// The hyper service: one call per request.
pub(crate) async fn handle(
    conn: Arc<Conn>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let request_id = conn.engine.next_id("req_");
    let is_upgrade = parts
        .headers
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    // A WebSocket upgrade has no body; everything else is read completely first.
    let bytes = if is_upgrade {
        Bytes::new()
    } else {
        match Limited::new(body, MAX_BODY).collect().await {
            Ok(c) => c.to_bytes(),
            Err(_) => {
                let ctx = Ctx {
                    conn,
                    request_id,
                    received_at: crate::clock::now(),
                    headers: parts.headers.clone(),
                };
                return Ok(ctx.error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "Request body too large or unreadable.",
                    None,
                    None,
                ));
            }
        }
    };
    let ctx = Ctx {
        conn,
        request_id,
        received_at: crate::clock::now(),
        headers: parts.headers.clone(),
    };
    if ctx.conn.engine.profile.require_api_key && ctx.header("authorization").is_none() {
        return Ok(ctx.error(
            StatusCode::UNAUTHORIZED,
            "You didn't provide an API key (this simulator profile has require_api_key = true).",
            None,
            Some("invalid_api_key"),
        ));
    }
    let path = parts.uri.path().trim_end_matches('/');
    let resp = match (&parts.method, path) {
        (&Method::GET, "/v1/models") => {
            let model = &ctx.conn.engine.profile.model;
            ctx.json(StatusCode::OK, &json!({"object":"list","data":[{"id":model,"object":"model","created":0,"owned_by":"spark-bench-sim"}]}))
        }
        (&Method::GET, p) if p.starts_with("/v1/sim/trace/") => {
            let id = &p["/v1/sim/trace/".len()..];
            let trace = &ctx.conn.engine.trace;
            match trace.get(id) {
                Some(t) => ctx.json(StatusCode::OK, &t.to_json(trace.origin())),
                None => ctx.error(
                    StatusCode::NOT_FOUND,
                    &format!("No trace for response id '{id}'."),
                    Some("response_id"),
                    Some("not_found"),
                ),
            }
        }
        (&Method::POST, "/v1/chat/completions") => super::chat::handle(ctx, &bytes).await,
        (&Method::POST, "/v1/responses") => super::responses::handle_http(ctx, &bytes).await,
        (&Method::GET, "/v1/responses") if is_upgrade => {
            super::ws::upgrade(ctx, Request::from_parts(parts, ()))
        }
        (&Method::GET, "/v1/responses") => ctx.error(
            StatusCode::UPGRADE_REQUIRED,
            "GET /v1/responses is the WebSocket mode endpoint; send an Upgrade: websocket request.",
            None,
            None,
        ),
        (_, p) if ["/v1/models", "/v1/chat/completions", "/v1/responses"].contains(&p) => ctx
            .error(
                StatusCode::METHOD_NOT_ALLOWED,
                &format!("Method {} not allowed on {p}.", parts.method),
                None,
                None,
            ),
        (_, p) => ctx.error(
            StatusCode::NOT_FOUND,
            &format!("Unknown path {p}."),
            None,
            Some("unknown_url"),
        ),
    };
    Ok(resp)
}

/// Reads an optional u32 field; wrong types are a 400 naming the field.
pub(crate) fn opt_u32(
    ctx: &Ctx,
    m: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<u32>, Response<Body>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n.min(1_000_000) as u32)),
            _ => Err(ctx.error(
                StatusCode::BAD_REQUEST,
                &format!("Invalid '{key}': expected a positive integer."),
                Some(key),
                Some("invalid_value"),
            )),
        },
    }
}

/// Reads an optional bool field; wrong types are a 400 naming the field.
pub(crate) fn opt_bool(
    ctx: &Ctx,
    m: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<bool>, Response<Body>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ctx.error(
            StatusCode::BAD_REQUEST,
            &format!("Invalid '{key}': expected a boolean."),
            Some(key),
            Some("invalid_type"),
        )),
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> f64 {
    crate::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A JSON string literal (quoted and escaped).
pub(crate) fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}
