//! The WebSocket transport: the HTTP/1.1 upgrade (timed alone, over an already-open TCP+TLS
//! stream) and one request/response turn on a persistent socket.
//!
//! Owns: the upgrade request (URL = base with scheme ws/wss + `/responses`, no subprotocol,
//! headers given by the caller; a 101 naming an extension or subprotocol not asked for is
//! refused), sending one text message, reading text messages until the
//! consumer says stop, Close codes, and whether the socket is still usable afterwards.
//! Does not own: what is sent (backend) or when a new socket is needed (session).
//!
//! Ping frames are answered by tungstenite (the pong goes out with the next read/write).
//! There is never more than one turn in flight: a turn borrows the socket mutably.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use super::connect::Dialed;
use super::io::{IoStats, MeteredIo};
use super::sockstate::SockProbe;
use super::{Ending, Flow, Limits, Setup, WireEvent};
use crate::clock::Clock;

/// An open WebSocket.
pub struct WsConn {
    ws: WebSocketStream<MeteredIo>,
    stats: Arc<IoStats>,
    /// What opening it cost (TCP, TLS and the upgrade); handed to the first turn only.
    pub setup: Setup,
    /// A `generate:false` warm-up completed on this socket.
    pub warmed: bool,
    /// At least one turn ran on it.
    pub used: bool,
    /// The kernel's view of the socket.
    pub probe: Option<Arc<SockProbe>>,
}

impl WsConn {
    /// True when the server closed the socket while it sat idle between turns: a Close
    /// frame, an error envelope (`"type":"error"`, e.g. `websocket_connection_limit_reached`,
    /// after which the server closes), EOF or a reset. Other messages still pending from the
    /// last reply (events after its terminal one, such as `response.done`), pings and pongs
    /// are taken in passing (tungstenite answers pings) and do not count.
    pub fn closed_while_idle(&mut self) -> bool {
        use futures_util::FutureExt;
        loop {
            match self.ws.next().now_or_never() {
                None => break,
                Some(Some(Ok(Message::Text(t)))) => {
                    let error = serde_json::from_str::<serde_json::Value>(&t)
                        .is_ok_and(|v| v["type"] == "error");
                    if error {
                        return true;
                    }
                }
                Some(Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)))) => {}
                Some(_) => return true,
            }
        }
        self.probe
            .as_ref()
            .is_some_and(|p| p.idle() == super::sockstate::Idle::Closed)
    }
}

/// tungstenite zero-fills its read buffer up to `read_buffer_size` before every read (128 KiB
/// by default, a memset that cost ~15% of the client's CPU per chunk in `cargo bench --bench
/// ingest`; at 16 KiB it was still 2.4% in `scripts/cpu-per-chunk.sh` with one chunk per read).
/// Streaming events are a few hundred bytes; larger frames still grow the buffer as needed.
/// Frames and messages are capped at [`super::limits::WS_FRAME`] / [`super::limits::WS_MESSAGE`]
/// (a larger one ends the turn as `too-large` before its payload is buffered).
pub fn ws_config() -> tungstenite::protocol::WebSocketConfig {
    tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(8 * 1024)
        .max_frame_size(Some(super::limits::WS_FRAME))
        .max_message_size(Some(super::limits::WS_MESSAGE))
}

/// The ending for a WebSocket read error: a frame or message over the limits is
/// `TooLarge`, a protocol violation or invalid UTF-8 is `Protocol`, the rest (reset, EOF)
/// `Io`.
fn classify(e: &tungstenite::Error) -> Ending {
    match e {
        tungstenite::Error::Capacity(c) => Ending::TooLarge(format!(
            "reading the WebSocket: {c} (limits: frame {} bytes, message {} bytes)",
            super::limits::WS_FRAME,
            super::limits::WS_MESSAGE
        )),
        tungstenite::Error::Utf8(m) => Ending::Protocol(format!(
            "reading the WebSocket: a text message is not valid UTF-8 ({m})"
        )),
        tungstenite::Error::Protocol(p) => {
            Ending::Protocol(format!("reading the WebSocket: protocol violation: {p}"))
        }
        other => Ending::Io(format!("reading the WebSocket: {other}")),
    }
}

/// Performs the upgrade on `d`. Errors carry the HTTP status when the server answered; a
/// TLS refusal of the client certificate (TLS 1.3 sends it after the handshake) is a TLS error.
pub async fn upgrade(
    d: Dialed,
    url: &str,
    headers: &[(http::HeaderName, http::HeaderValue)],
) -> Result<WsConn, Ending> {
    let mut req = url.into_client_request().map_err(|e| {
        Ending::Upgrade(
            None,
            format!("building the WebSocket request for {url}: {e}"),
        )
    })?;
    for (k, v) in headers {
        req.headers_mut().insert(k.clone(), v.clone());
    }
    let stats = d.stats.clone();
    let t0 = crate::clock::now();
    let (ws, resp) = tokio_tungstenite::client_async_with_config(req, d.io, Some(ws_config()))
        .await
        .map_err(|e| match e {
            tungstenite::Error::Http(resp) => {
                let status = resp.status().as_u16();
                let body = resp
                    .body()
                    .as_deref()
                    .map(|b| crate::vocab::redact::excerpt(b, 512))
                    .unwrap_or_default();
                Ending::Upgrade(
                    Some(status),
                    format!("WebSocket upgrade to {url} refused with HTTP {status}: {body}"),
                )
            }
            other => match super::io::client_cert_refusal(&other).or_else(|| stats.tls_refusal()) {
                Some(why) => Ending::Tls(format!("WebSocket upgrade to {url}: {other}: {why}")),
                // The same server behaviour gets the same kind as on HTTP: a connection that
                // ends or resets before the answer is truncated, a garbage or oversized head
                // a protocol / too-large failure. Only a refusal of the upgrade itself (an
                // answer that is not 101, a bad accept key) is an upgrade error.
                None => match other {
                    tungstenite::Error::Io(_)
                    | tungstenite::Error::ConnectionClosed
                    | tungstenite::Error::AlreadyClosed
                    | tungstenite::Error::Protocol(
                        tungstenite::error::ProtocolError::HandshakeIncomplete,
                    ) => {
                        Ending::Io(format!("WebSocket upgrade to {url}: {other}"))
                    }
                    tungstenite::Error::Capacity(_) | tungstenite::Error::AttackAttempt => Ending::TooLarge(format!(
                        "WebSocket upgrade to {url}: {other} (the upgrade response head is over \
                         64 KiB, or came in hundreds of tiny reads)"
                    )),
                    tungstenite::Error::HttpFormat(_) | tungstenite::Error::Utf8(_) => {
                        Ending::Protocol(format!(
                            "WebSocket upgrade to {url}: {other}: the server sent a malformed response"
                        ))
                    }
                    tungstenite::Error::Protocol(
                        tungstenite::error::ProtocolError::HttparseError(_),
                    ) => Ending::Protocol(format!(
                        "WebSocket upgrade to {url}: {other}: the server sent a malformed response"
                    )),
                    _ => Ending::Upgrade(None, format!("WebSocket upgrade to {url}: {other}")),
                },
            },
        })?;
    unrequested(&resp, headers, url)?;
    let mut setup = d.setup;
    setup.ws_upgrade_ns = Some(crate::clock::since(t0).as_nanos() as u64);
    Ok(WsConn {
        ws,
        stats: d.stats,
        setup,
        warmed: false,
        used: false,
        probe: d.probe,
    })
}

/// RFC 6455 §4.1: a client fails the connection when the 101 names an extension or a
/// subprotocol it did not ask for (an unrequested `permessage-deflate` would make the
/// server's frames compressed, which this client does not read).
fn unrequested(
    resp: &tungstenite::handshake::client::Response,
    asked: &[(http::HeaderName, http::HeaderValue)],
    url: &str,
) -> Result<(), Ending> {
    for name in ["sec-websocket-extensions", "sec-websocket-protocol"] {
        let requested = asked.iter().any(|(k, _)| k.as_str() == name);
        let got: Vec<String> = resp
            .headers()
            .get_all(name)
            .iter()
            .map(|v| crate::vocab::redact::excerpt(v.as_bytes(), 120))
            .filter(|v| !v.trim().is_empty())
            .collect();
        if !requested && !got.is_empty() {
            return Err(Ending::Protocol(format!(
                "WebSocket upgrade to {url}: the server's 101 names {name}: {}, which the \
                 client did not request (RFC 6455 section 4.1: the connection is failed)",
                got.join(", ")
            )));
        }
    }
    Ok(())
}

/// The result of one turn.
#[derive(Debug)]
pub struct Turn {
    /// How it ended.
    pub ending: Ending,
    /// When the message was flushed to the socket, ns.
    pub written_ns: Option<u64>,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Payload bytes of text messages received.
    pub bytes_received: u64,
    /// The socket is still in sync and open (the turn ran to its protocol end).
    pub alive: bool,
    /// The connection was reset (`ECONNRESET` / `EPIPE`) under the turn.
    pub reset: bool,
}

/// Sends `text` and delivers every received text message to `sink` until it says stop.
pub async fn turn<S>(
    conn: &mut WsConn,
    text: String,
    clock: Clock,
    limits: Limits,
    cancel: &CancellationToken,
    sink: &mut S,
) -> Turn
where
    S: FnMut(WireEvent) -> Flow,
{
    conn.used = true;
    let mut out = Turn {
        ending: Ending::Finished,
        written_ns: None,
        bytes_sent: text.len() as u64,
        bytes_received: 0,
        alive: false,
        reset: false,
    };
    let deadline = tokio::time::sleep_until(limits.deadline.into());
    tokio::pin!(deadline);
    // Created once: polling a fresh `cancelled()` per chunk would register (and drop) a
    // waiter under the token's lock on every chunk.
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let send = conn.ws.send(Message::Text(text.into()));
    let sent = tokio::select! {
        biased;
        _ = &mut cancelled => { out.ending = Ending::Cancelled; return out; }
        r = send => r,
        _ = &mut deadline => { out.ending = Ending::Deadline; return out; }
    };
    if let Err(e) = sent {
        out.reset = super::io::is_reset(&e);
        out.ending = Ending::Io(format!("sending on the WebSocket: {e}"));
        return out;
    }
    let mut progress_ns = clock.now_ns();
    out.written_ns = Some(progress_ns);
    let mut armed_ns = progress_ns;
    let stall = tokio::time::sleep_until((clock.instant(progress_ns) + limits.stall).into());
    tokio::pin!(stall);
    loop {
        // Timers before the socket: a server that keeps sending cannot starve them.
        let msg = tokio::select! {
            biased;
            _ = &mut cancelled => { out.ending = Ending::Cancelled; return out; }
            _ = &mut deadline => { out.ending = Ending::Deadline; return out; }
            m = conn.ws.next() => m,
            _ = &mut stall => {
                // `progress_ns` moves with every frame; the timer was armed at `armed_ns`.
                let last = conn.stats.last_read().max(progress_ns);
                if last > armed_ns {
                    progress_ns = last;
                    armed_ns = last;
                    stall.as_mut().reset((clock.instant(progress_ns) + limits.stall).into());
                    continue;
                }
                out.ending = Ending::Stall;
                return out;
            }
        };
        match msg {
            Some(Ok(Message::Text(t))) => {
                let at_ns = conn.stats.last_read().max(progress_ns);
                progress_ns = at_ns;
                out.bytes_received += t.len() as u64;
                let flow = sink(WireEvent::WsText { at_ns, text: t });
                if flow == Flow::Stop {
                    out.alive = true;
                    return out;
                }
            }
            Some(Ok(Message::Binary(b))) => {
                out.bytes_received += b.len() as u64;
                out.ending = Ending::Protocol(format!(
                    "the server sent a binary WebSocket message ({} bytes); the Responses API \
                     sends JSON text messages only",
                    b.len()
                ));
                return out;
            }
            Some(Ok(Message::Close(frame))) => {
                let (code, reason) = frame
                    .map(|f| (u16::from(f.code), f.reason.to_string()))
                    .unwrap_or((1005, String::new()));
                out.ending = Ending::WsClose(code, reason);
                return out;
            }
            Some(Ok(_)) => {} // ping / pong
            Some(Err(e)) => {
                out.reset = super::io::is_reset(&e);
                out.ending = classify(&e);
                return out;
            }
            None => {
                // A stream that never started has nothing to end (and the turn may be sent
                // again on a new socket, see `session`).
                if out.bytes_received > 0 {
                    let at_ns = clock.now_ns();
                    sink(WireEvent::End { at_ns });
                }
                out.ending = Ending::Io("the WebSocket ended without a Close frame".into());
                return out;
            }
        }
    }
}
