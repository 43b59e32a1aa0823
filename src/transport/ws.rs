//! The WebSocket transport: the HTTP/1.1 upgrade (timed alone, over an already-open TCP+TLS
//! stream) and one request/response turn on a persistent socket.
//!
//! Owns: the upgrade (URL = base with scheme ws/wss + `/responses`, no subprotocol, headers
//! given by the caller; a 101 naming an extension or subprotocol not asked for is refused)
//! and what a failed one means for the record, sending one text message, reading text
//! messages until the consumer says stop, Close codes, and whether the socket is still
//! usable afterwards.
//! Does not own: what is sent (backend), when a new socket is needed (session), the
//! upgrade's bytes ([`super::wsupgrade`]) or the frames' ([`super::wsframe`]).
//!
//! [`super::wsupgrade`] writes the upgrade and reads the answer (with tungstenite's parser
//! and rules); after it the socket is read and written here, frame by frame
//! ([`super::wsframe`] says why). Ping frames are answered: the pong goes out before
//! the next read, as tungstenite sent it. There is never more than one turn in flight: a
//! turn borrows the socket mutably.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::{self};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::connect::Dialed;
use super::io::{IoStats, MeteredIo};
use super::sockstate::SockProbe;
use super::wake::Sides;
use super::wsframe::{self, Incoming, Reader};
use super::wsupgrade;
use super::{Ending, Flow, Limits, Setup, WireEvent};
use crate::clock::Clock;

/// An open WebSocket.
pub struct WsConn {
    io: MeteredIo,
    /// What the server sent and was not yet read as a message.
    reader: Reader,
    /// Pongs not yet written.
    pending: Vec<u8>,
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
            match std::future::poll_fn(|cx| self.poll_message(cx)).now_or_never() {
                None => break,
                Some(Ok(Incoming::Text(t))) => {
                    let error = serde_json::from_str::<serde_json::Value>(&t)
                        .is_ok_and(|v| v["type"] == "error");
                    if error {
                        return true;
                    }
                }
                Some(Ok(Incoming::Ping(_) | Incoming::Pong)) => {}
                Some(_) => return true,
            }
        }
        self.probe
            .as_ref()
            .is_some_and(|p| p.idle() == super::sockstate::Idle::Closed)
    }

    /// The next text, binary or Close message. Pings are answered (their pongs written
    /// before the next read) and pongs dropped. An error leaves the socket unusable.
    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Result<Incoming, tungstenite::Error>> {
        loop {
            if !self.pending.is_empty() {
                self.poll_pongs(cx).map_err(tungstenite::Error::Io)?;
            }
            match self.reader.message()? {
                Some(Incoming::Ping(payload)) => {
                    wsframe::pong_frame(&mut self.pending, payload);
                    continue;
                }
                Some(Incoming::Pong) => continue,
                Some(m) => return Poll::Ready(Ok(m)),
                None => {}
            }
            let mut buf = ReadBuf::uninit(self.reader.spare());
            ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))
                .map_err(tungstenite::Error::Io)?;
            let n = buf.filled().len();
            if n == 0 {
                return Poll::Ready(Err(tungstenite::Error::Protocol(
                    ProtocolError::ResetWithoutClosingHandshake,
                )));
            }
            // SAFETY: the read initialised the `n` bytes it filled.
            unsafe { self.reader.filled(n) };
        }
    }

    /// Writes what it can of the pending pongs without waiting.
    fn poll_pongs(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        while !self.pending.is_empty() {
            match Pin::new(&mut self.io).poll_write(cx, &self.pending) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.pending.drain(..n);
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Ok(()),
        }
    }

    /// Writes one text message (after any pending pongs).
    async fn send(&mut self, text: String) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.io.write_all(&self.pending).await?;
            self.pending.clear();
        }
        self.io.write_all(&wsframe::text_frame(text)).await?;
        self.io.flush().await
    }
}

/// What tungstenite upgrades and reads with where it still drives a socket (`probe`,
/// `examples/read_floor.rs --transport ws-tungstenite`). It zero-fills its read buffer up to
/// `read_buffer_size` before every read (128 KiB by default, a memset that cost ~15% of the
/// client's CPU per chunk in `cargo bench --bench ingest`); streaming events are a few
/// hundred bytes, and larger frames still grow the buffer as needed. Frames and messages are
/// capped at [`super::limits::WS_FRAME`] / [`super::limits::WS_MESSAGE`], as
/// [`super::wsframe`] caps them.
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

/// Performs the upgrade on `d` ([`super::wsupgrade`]; a failure ends as `upgrade_error`
/// says), keeping any bytes the server sent behind its 101 for the first read.
pub async fn upgrade(
    d: Dialed,
    url: &str,
    headers: &[(http::HeaderName, http::HeaderValue)],
) -> Result<WsConn, Ending> {
    let req = wsupgrade::request(url, headers).map_err(|e| {
        Ending::Upgrade(
            None,
            format!("building the WebSocket request for {url}: {e}"),
        )
    })?;
    let t0 = crate::clock::now();
    let mut io = d.io;
    let answered = async {
        io.write_all(&req.bytes).await?;
        io.flush().await?;
        wsupgrade::answer(&mut io, &req).await
    };
    let (resp, tail) = answered
        .await
        .map_err(|e| upgrade_error(e, url, &d.stats))?;
    unrequested(&resp, headers, url)?;
    let mut setup = d.setup;
    setup.ws_upgrade_ns = Some(crate::clock::since(t0).as_nanos() as u64);
    Ok(WsConn {
        io,
        reader: Reader::new(tail),
        pending: Vec::new(),
        stats: d.stats,
        setup,
        warmed: false,
        used: false,
        probe: d.probe,
    })
}

/// The ending for a failed upgrade. Errors carry the HTTP status when the server answered; a
/// TLS refusal of the client certificate (TLS 1.3 sends it after the handshake) is a TLS error.
fn upgrade_error(e: tungstenite::Error, url: &str, stats: &IoStats) -> Ending {
    match e {
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
                ) => Ending::Io(format!("WebSocket upgrade to {url}: {other}")),
                tungstenite::Error::Capacity(_) | tungstenite::Error::AttackAttempt => {
                    Ending::TooLarge(format!(
                        "WebSocket upgrade to {url}: {other} (the upgrade response head is over \
                         64 KiB, or came in hundreds of tiny reads)"
                    ))
                }
                tungstenite::Error::HttpFormat(_) | tungstenite::Error::Utf8(_) => {
                    Ending::Protocol(format!(
                        "WebSocket upgrade to {url}: {other}: the server sent a malformed response"
                    ))
                }
                tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HttparseError(
                    _,
                )) => Ending::Protocol(format!(
                    "WebSocket upgrade to {url}: {other}: the server sent a malformed response"
                )),
                _ => Ending::Upgrade(None, format!("WebSocket upgrade to {url}: {other}")),
            },
        },
    }
}

/// RFC 6455 §4.1: a client fails the connection when the 101 names an extension or a
/// subprotocol it did not ask for (an unrequested `permessage-deflate` would make the
/// server's frames compressed, which this client does not read).
fn unrequested(
    resp: &tungstenite::handshake::client::Response,
    asked: &[(http::HeaderName, http::HeaderValue)],
    url: &str,
) -> Result<(), Ending> {
    for name in wsupgrade::READ_AFTER {
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

/// What woke a turn's read loop.
enum Next {
    Message(Result<Incoming, tungstenite::Error>),
    Cancelled,
    Timer,
}

/// A message, else (when one of them woke) the cancel or the timer.
fn poll_next(
    conn: &mut WsConn,
    sides: &mut Sides,
    mut cancelled: Pin<&mut WaitForCancellationFuture<'_>>,
    mut timer: Pin<&mut tokio::time::Sleep>,
    cx: &mut Context<'_>,
) -> Poll<Next> {
    if let Poll::Ready(m) = conn.poll_message(cx) {
        return Poll::Ready(Next::Message(m));
    }
    sides.poll(cx, |cx| {
        if cancelled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Next::Cancelled);
        }
        timer.as_mut().poll(cx).map(|()| Next::Timer)
    })
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
    // One timer for both limits: the deadline while sending, then the earlier of the deadline
    // and the stall limit from the last progress (one timer polled a chunk, not two).
    let timer = tokio::time::sleep_until(limits.deadline.into());
    tokio::pin!(timer);
    // Created once: polling a fresh `cancelled()` per chunk would register (and drop) a
    // waiter under the token's lock on every chunk.
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let send = conn.send(text);
    let sent = tokio::select! {
        biased;
        _ = &mut cancelled => { out.ending = Ending::Cancelled; return out; }
        r = send => r,
        _ = &mut timer => { out.ending = Ending::Deadline; return out; }
    };
    if let Err(e) = sent {
        out.reset = super::io::is_reset(&e);
        // In the words tungstenite wrote it in.
        let e = tungstenite::Error::Io(e);
        out.ending = Ending::Io(format!("sending on the WebSocket: {e}"));
        return out;
    }
    let mut progress_ns = clock.now_ns();
    out.written_ns = Some(progress_ns);
    // Arms the timer for progress at `ns`; true when the deadline comes first (or with the
    // stall limit: then the deadline is what ends the turn, as it did with two timers).
    let arm = |timer: Pin<&mut tokio::time::Sleep>, ns: u64| {
        let stall_at = clock.instant(ns) + limits.stall;
        let deadline_first = limits.deadline <= stall_at;
        timer.reset(stall_at.min(limits.deadline).into());
        deadline_first
    };
    let mut armed_ns = progress_ns;
    let mut deadline_first = arm(timer.as_mut(), armed_ns);
    // The socket first, then the cancel and the timer: those when one of them woke (and
    // after each reset of the timer), not on every chunk's wake-up (`super::wake`). A server
    // that keeps sending cannot starve them: a read spends tokio's cooperative budget, which
    // turns the socket `Pending` after 128.
    let mut sides = Sides::new();
    loop {
        let next = std::future::poll_fn(|cx| {
            poll_next(conn, &mut sides, cancelled.as_mut(), timer.as_mut(), cx)
        })
        .await;
        let msg = match next {
            Next::Message(m) => m,
            Next::Cancelled => {
                out.ending = Ending::Cancelled;
                return out;
            }
            Next::Timer => {
                if deadline_first {
                    out.ending = Ending::Deadline;
                    return out;
                }
                // `progress_ns` moves with every frame; the timer was armed at `armed_ns`.
                let last = conn.stats.last_read().max(progress_ns);
                if last > armed_ns {
                    progress_ns = last;
                    armed_ns = last;
                    deadline_first = arm(timer.as_mut(), armed_ns);
                    sides.due();
                    continue;
                }
                out.ending = Ending::Stall;
                return out;
            }
        };
        match msg {
            Ok(Incoming::Text(t)) => {
                let at_ns = conn.stats.last_read().max(progress_ns);
                progress_ns = at_ns;
                out.bytes_received += t.len() as u64;
                let flow = sink(WireEvent::WsText { at_ns, text: t });
                if flow == Flow::Stop {
                    out.alive = true;
                    return out;
                }
            }
            Ok(Incoming::Binary(n)) => {
                out.bytes_received += n as u64;
                out.ending = Ending::Protocol(format!(
                    "the server sent a binary WebSocket message ({n} bytes); the Responses API \
                     sends JSON text messages only"
                ));
                return out;
            }
            Ok(Incoming::Close(code, reason)) => {
                out.ending = Ending::WsClose(code, reason);
                return out;
            }
            Ok(Incoming::Ping(_) | Incoming::Pong) => {} // answered in `poll_message`
            Err(e) => {
                out.reset = super::io::is_reset(&e);
                out.ending = classify(&e);
                return out;
            }
        }
    }
}
