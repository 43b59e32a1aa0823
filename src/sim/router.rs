//! The simulator's router: one hyper service per connection, method + path → an API handler.
//!
//! Owns: reading the request body (with its size limit), the request id, the API-key check,
//! the small routes (`/v1/models`, `/v1/sim/trace/{id}`, `/v1/sim/ttft`), 404/405/426 for
//! everything else, and turning every handler's [`ApiError`] into its HTTP response. Does
//! not own: what the APIs mean (`api`) or how responses are written (`wire`).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::json;

use super::api::{chat, responses, ws};
use super::wire::{ApiError, Body, Conn, Ctx};

/// Request bodies larger than this are refused (413).
const MAX_BODY: usize = 32 << 20;

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
                let e = ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "Request body too large or unreadable.",
                    None,
                    None,
                );
                return Ok(e.into_response(&ctx));
            }
        }
    };
    let ctx = Ctx {
        conn,
        request_id,
        received_at: crate::clock::now(),
        headers: parts.headers.clone(),
    };
    let resp = route(&ctx, parts, &bytes, is_upgrade)
        .await
        .unwrap_or_else(|e| e.into_response(&ctx));
    Ok(resp)
}

/// Dispatches one request whose body has been read.
async fn route(
    ctx: &Ctx,
    parts: Parts,
    bytes: &[u8],
    is_upgrade: bool,
) -> Result<Response<Body>, ApiError> {
    if ctx.conn.engine.profile.require_api_key && ctx.header("authorization").is_none() {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "You didn't provide an API key (this simulator profile has require_api_key = true).",
            None,
            Some("invalid_api_key"),
        ));
    }
    let path = parts.uri.path().trim_end_matches('/');
    match (&parts.method, path) {
        (&Method::GET, "/v1/models") => {
            let model = &ctx.conn.engine.profile.model;
            Ok(ctx.json(StatusCode::OK, &json!({"object":"list","data":[{"id":model,"object":"model","created":0,"owned_by":"spark-bench-sim"}]})))
        }
        (&Method::GET, p) if p.starts_with("/v1/sim/trace/") => {
            let id = &p["/v1/sim/trace/".len()..];
            let trace = &ctx.conn.engine.trace;
            match trace.get(id) {
                Some(t) => Ok(ctx.json(StatusCode::OK, &t.to_json(trace.origin()))),
                None => Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!("No trace for response id '{id}'."),
                    Some("response_id"),
                    Some("not_found"),
                )),
            }
        }
        (&Method::GET, "/v1/sim/ttft") => {
            let since = match query_param(parts.uri.query(), "since") {
                None => 0,
                Some(v) => v.parse::<u64>().map_err(|_| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        format!("since={v:?} is not a response sequence number (0, 1, 2, ...)."),
                        Some("since"),
                        Some("invalid_type"),
                    )
                })?,
            };
            let (ttfts, next) = ctx.conn.engine.trace.ttfts_since(since);
            Ok(ctx.json(StatusCode::OK, &ttft_summary(ttfts, next)))
        }
        (&Method::POST, "/v1/chat/completions") => chat::handle(ctx, bytes).await,
        (&Method::POST, "/v1/responses") => responses::handle_http(ctx, bytes).await,
        (&Method::GET, "/v1/responses") if is_upgrade => {
            ws::upgrade(ctx, Request::from_parts(parts, ()))
        }
        (&Method::GET, "/v1/responses") => Err(ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            "GET /v1/responses is the WebSocket mode endpoint; send an Upgrade: websocket request.",
            None,
            None,
        )),
        (_, p) if ["/v1/models", "/v1/chat/completions", "/v1/responses"].contains(&p) => {
            Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("Method {} not allowed on {p}.", parts.method),
                None,
                None,
            ))
        }
        (_, p) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("Unknown path {p}."),
            None,
            Some("unknown_url"),
        )),
    }
}

/// The value of `name` in a query string (`a=1&b=2`), as written.
fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The server's own TTFTs summarised (`GET /v1/sim/ttft?since=K`): count, mean, and the
/// nearest-rank p50, p90, p99 and max, in milliseconds (null when there are none), and
/// `next`, the sequence number the next response will get.
fn ttft_summary(mut v: Vec<std::time::Duration>, next: u64) -> serde_json::Value {
    v.sort_unstable();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let rank = |q: f64| {
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1)) - 1;
        v.get(i).map(|d| ms(*d))
    };
    let mean = (!v.is_empty()).then(|| v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64);
    json!({
        "responses": v.len(),
        "mean_ms": mean,
        "p50_ms": rank(0.5),
        "p90_ms": rank(0.9),
        "p99_ms": rank(0.99),
        "max_ms": v.last().map(|d| ms(*d)),
        "next": next,
    })
}
