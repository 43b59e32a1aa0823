//! The Responses WebSocket mode through the recording proxy: the upstream handshake first
//! (with the client's headers, `Authorization` included), then the client's 101, then both
//! directions pumped message by message.
//!
//! Owns: splitting the message stream into exchanges: a `response.create` from the client
//! opens one, and the server's terminal event (`response.completed`, `response.failed`,
//! `response.incomplete` or `error`) closes it. Each message is forwarded before it is read.
//! A client message over [`super::Bounds::max_request_body`] ends the connection (close
//! code 1009); when the recording stops, the open exchanges are logged as interrupted.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use super::tee::{error_response, TeeBody};
use super::upstream::{dial, hop_by_hop};
use super::{Exchange, Shared};
use crate::vocab::WireProtocol;

/// Answers a WebSocket upgrade: 101 once the upstream accepted, else the upstream's answer.
pub(crate) async fn upgrade(
    mut req: Request<Incoming>,
    shared: Arc<Shared>,
    conn: u64,
    start_ns: u64,
) -> Response<TeeBody> {
    let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "WebSocket upgrade without Sec-WebSocket-Key",
        );
    };
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let up_path = shared.upstream_path(&path);
    let url = shared
        .upstream
        .ws_url(&up_path[shared.upstream.prefix.len()..]);
    let mut up_req = match url.as_str().into_client_request() {
        Ok(r) => r,
        Err(e) => {
            return error_response(StatusCode::BAD_GATEWAY, &format!("upstream URL {url}: {e}"))
        }
    };
    for (k, v) in req.headers() {
        let name = k.as_str();
        if !hop_by_hop(name) && !name.starts_with("sec-websocket-") {
            up_req.headers_mut().insert(k.clone(), v.clone());
        }
    }
    let io = match dial(&shared, &[b"http/1.1"]).await {
        Ok(io) => io,
        Err(e) => return error_response(StatusCode::BAD_GATEWAY, &e.to_string()),
    };
    let upstream = match tokio_tungstenite::client_async(up_req, io).await {
        Ok((ws, _)) => ws,
        Err(tungstenite::Error::Http(resp)) => {
            let status = resp.status();
            let body = resp.into_body().unwrap_or_default();
            let mut r = Response::new(TeeBody::fixed(Bytes::from(body)));
            *r.status_mut() = status;
            return r;
        }
        Err(e) => {
            return error_response(
                StatusCode::BAD_GATEWAY,
                &format!("upstream WebSocket handshake: {e}"),
            )
        }
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        if let Ok(up) = on_upgrade.await {
            let limit = usize::try_from(shared.bounds.max_request_body).unwrap_or(usize::MAX);
            let cfg = tungstenite::protocol::WebSocketConfig::default()
                .max_message_size(Some(limit))
                .max_frame_size(Some(limit));
            let down =
                WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Server, Some(cfg)).await;
            pump(down, upstream, shared, conn, path, start_ns).await;
        }
    });
    let mut r = Response::new(TeeBody::fixed(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(
        http::header::UPGRADE,
        http::HeaderValue::from_static("websocket"),
    );
    h.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("Upgrade"),
    );
    if let Ok(v) = http::HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert("sec-websocket-accept", v);
    }
    r
}

fn event_type(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    v.get("type")?.as_str().map(str::to_string)
}

fn is_warmup(body: &[u8]) -> bool {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let v = v.get("response").unwrap_or(&v);
    v.get("generate").and_then(serde_json::Value::as_bool) == Some(false)
}

fn is_terminal(t: &str) -> bool {
    matches!(
        t,
        "response.completed" | "response.failed" | "response.incomplete" | "error"
    )
}

async fn pump<D, U>(
    down: WebSocketStream<D>,
    up: WebSocketStream<U>,
    shared: Arc<Shared>,
    conn: u64,
    path: String,
    upgrade_ns: u64,
) where
    D: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    U: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut down_tx, mut down_rx) = down.split();
    let (mut up_tx, mut up_rx) = up.split();
    let mut open: VecDeque<Exchange> = VecDeque::new();
    let mut n = 0u32;
    let mut error = "the WebSocket closed before the response ended";
    loop {
        tokio::select! {
            _ = shared.stopped() => {
                // Log first; both sockets close when dropped.
                error = "interrupted: the recording stopped before the response ended";
                break;
            }
            m = down_rx.next() => {
                let t = shared.clock.now_ns();
                let Some(Ok(msg)) = m else { let _ = up_tx.close().await; break };
                let text = match &msg { Message::Text(s) => Some(s.as_str().to_string()), _ => None };
                let close = matches!(msg, Message::Close(_));
                if up_tx.send(msg).await.is_err() { break; }
                if close { continue; }
                if let Some(text) = text {
                    if event_type(&text).as_deref() == Some("response.create") {
                        // A `generate:false` warm-up some servers answer with
                        // `response.created` alone ends when the next request comes.
                        if open.front().is_some_and(|x| !x.chunks.is_empty() && is_warmup(&x.body)) {
                            if let Some(mut x) = open.pop_front() {
                                x.end_ns = x.chunks.last().map_or(t, |c| c.0);
                                let _ = shared.log.send(x);
                            }
                        }
                        open.push_back(Exchange {
                            conn,
                            conn_request: n,
                            wire: WireProtocol::WebSocket,
                            path: path.clone(),
                            body: Bytes::from(text),
                            start_ns: t,
                            sent_ns: shared.clock.now_ns(),
                            status: Some(101),
                            headers_ns: Some(upgrade_ns),
                            ..Default::default()
                        });
                        n += 1;
                    }
                }
            }
            m = up_rx.next() => {
                let t = shared.clock.now_ns();
                let Some(Ok(msg)) = m else { let _ = down_tx.close().await; break };
                let text = match &msg { Message::Text(s) => Some(Bytes::copy_from_slice(s.as_bytes())), _ => None };
                if down_tx.send(msg).await.is_err() { break; }
                if let (Some(text), Some(x)) = (text, open.front_mut()) {
                    let kind = event_type(std::str::from_utf8(&text).unwrap_or(""));
                    x.chunks.push((t, text));
                    if kind.as_deref().is_some_and(is_terminal) {
                        if let Some(mut x) = open.pop_front() {
                            x.end_ns = t;
                            let _ = shared.log.send(x);
                        }
                    }
                }
            }
        }
    }
    let end = shared.clock.now_ns();
    for mut x in open {
        x.end_ns = end;
        x.error = Some(error.into());
        let _ = shared.log.send(x);
    }
}
