//! Wire helpers of the simulator: what every API handler shares to read a request and write
//! a response.
//!
//! Owns: the per-connection state ([`Conn`]), the per-request context ([`Ctx`]) with the
//! common headers (`x-request-id`, `openai-processing-ms`), the one error type
//! ([`ApiError`]), the SSE body (`sse`), and the JSON body and field readers. Imports no
//! router or API code: the layers above call down into this one.

mod error;
mod sse;

use std::convert::Infallible;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use error::ApiError;
pub(crate) use sse::NullSink;

use super::config::BusyPolicy;
use super::fault::Fault;
use super::model::EngineRef;
use crate::clock::tx::TxLog;

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

    /// The fault asked for by `x-sim-fault`; a bad spec is a 400 naming the header.
    pub fn fault(&self) -> Result<Option<Fault>, ApiError> {
        match self.header("x-sim-fault") {
            None => Ok(None),
            Some(s) => Fault::parse(s)
                .map(Some)
                .map_err(|m| ApiError::bad(m, Some("x-sim-fault"), None)),
        }
    }

    /// Whether `x-responsesapi-include-timing-metrics: true` was sent.
    pub fn timing_metrics(&self) -> bool {
        self.header("x-responsesapi-include-timing-metrics")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// Whether `x-sim-ignore-eos: true` was sent (Responses: generate exactly
    /// `max_output_tokens`, as `ignore_eos` in the body).
    pub fn ignore_eos(&self) -> bool {
        self.header("x-sim-ignore-eos")
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
}

/// A complete body.
pub(crate) fn full(s: impl Into<Bytes>) -> Body {
    Full::new(s.into()).boxed()
}

/// Parses a JSON body that must be an object; anything else is a 400.
pub(crate) fn parse_json(body: &[u8]) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad(
            "The request body must be a JSON object.",
            None,
            None,
        )),
        Err(e) => Err(ApiError::bad(
            format!("We could not parse the JSON body of your request: {e}"),
            None,
            None,
        )),
    }
}

/// Reads an optional u32 field; wrong types are a 400 naming the field.
pub(crate) fn opt_u32(
    m: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<u32>, ApiError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n.min(1_000_000) as u32)),
            _ => Err(ApiError::bad(
                format!("Invalid '{key}': expected a positive integer."),
                Some(key),
                Some("invalid_value"),
            )),
        },
    }
}

/// Reads an optional bool field; wrong types are a 400 naming the field.
pub(crate) fn opt_bool(
    m: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<bool>, ApiError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ApiError::bad(
            format!("Invalid '{key}': expected a boolean."),
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
