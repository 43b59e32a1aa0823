//! HTTP/1.1 and HTTP/2 on our own connections (hyper 1 `client::conn`), and the response
//! pump: status + headers → body frames → SSE events, each stamped with the read time.
//!
//! Owns: handshakes of the HTTP layer over a [`Dialed`] stream, sending one request (asking
//! for `accept-encoding: identity`), stall/deadline/cancellation while waiting for bytes,
//! draining a finished body so a keep-alive connection can be reused, per-request byte
//! counts, refusing a 2xx that carries no event stream (another content type, a content
//! encoding, no body), and the ending of a hyper or h2 error (HTTP/2 ones named by frame and
//! reason).
//! Does not own: pooling policy ([`super::session`]) or what the events mean.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::bytelog::ByteClock;
use super::connect::Dialed;
use super::io::IoStats;
use super::sockstate::SockProbe;
use super::sse::SseParser;
use super::{Ending, Flow, Limits, Setup, WireEvent};
use crate::clock::Clock;

/// An HTTP request as the backend built it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// Path below the endpoint prefix, e.g. `/responses`.
    pub path: String,
    /// Headers besides `Host` / `Content-Length` (content type, auth, extras).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// JSON body.
    pub body: Bytes,
}

/// How long a finished response's body may take to end before its connection is given up.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// An HTTP/1.1 connection.
pub struct H1Conn {
    /// hyper's request handle.
    pub sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    /// Byte counters and read times.
    pub stats: Arc<IoStats>,
    /// What opening it cost (handed to the first request only).
    pub setup: Setup,
    /// Which read delivered which response byte.
    pub byte_clock: Arc<ByteClock>,
    /// The next response's place on the connection (its key in `byte_clock`).
    pub next_response: u32,
    /// The kernel's view of the socket (is an idle connection still open?).
    pub probe: Option<Arc<SockProbe>>,
    /// When it went back to the pool.
    pub idle_since: Option<Instant>,
    /// What the server's last response said about keeping it open.
    pub keep_alive: KeepAlive,
}

/// What a response head says about reusing its connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepAlive {
    /// `Connection: close` (or an HTTP/1.0 answer without `Connection: keep-alive`): the
    /// server will close the connection after this response.
    pub close: bool,
    /// `Keep-Alive: timeout=N`: the server closes the connection after N idle seconds.
    pub timeout: Option<std::time::Duration>,
    /// `Keep-Alive: max=N`: N more requests are allowed on the connection.
    pub max: Option<u32>,
}

impl KeepAlive {
    /// Reads `Connection` and `Keep-Alive` (RFC 9112 §9.3; the `Keep-Alive` parameters as
    /// servers send them, e.g. `timeout=5, max=100`).
    pub fn from_head(version: http::Version, headers: &http::HeaderMap) -> KeepAlive {
        let tokens = headers
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .collect::<Vec<_>>();
        let has = |t: &str| tokens.iter().any(|x| x == t);
        let close = has("close") || (version == http::Version::HTTP_10 && !has("keep-alive"));
        let mut out = KeepAlive {
            close,
            ..KeepAlive::default()
        };
        for v in headers
            .get_all("keep-alive")
            .iter()
            .filter_map(|v| v.to_str().ok())
        {
            for param in v.split(',') {
                let Some((k, val)) = param.split_once('=') else {
                    continue;
                };
                let val = val.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "timeout" => {
                        if let Ok(secs) = val.parse::<u64>() {
                            out.timeout = Some(std::time::Duration::from_secs(secs));
                        }
                    }
                    "max" => out.max = val.parse().ok(),
                    _ => {}
                }
            }
        }
        out
    }

    /// Whether a connection idle for `idle` may carry another request. A timeout leaves a
    /// margin (a second, or half of a shorter timeout) for the server's clock and the
    /// request's flight time.
    pub fn reusable_after(&self, idle: std::time::Duration) -> bool {
        if self.close || self.max == Some(0) {
            return false;
        }
        match self.timeout {
            Some(t) => idle + (t / 2).min(std::time::Duration::from_secs(1)) < t,
            None => true,
        }
    }
}

/// An HTTP/2 connection (shared; the sender is cloned per request).
#[derive(Clone)]
pub struct H2Conn {
    /// hyper's request handle.
    pub sender: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    /// Byte counters and read times of the whole connection.
    pub stats: Arc<IoStats>,
    /// What opening it cost.
    pub setup: Setup,
    /// Which read delivered which byte of each stream.
    pub byte_clock: Arc<ByteClock>,
    /// The kernel's view of the socket.
    pub probe: Option<Arc<SockProbe>>,
}

/// hyper's HTTP/1.1 connection task: writes requests and reads responses for an [`H1Conn`].
pub type H1Driver = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// HTTP/1.1 handshake (no bytes on the wire; hyper only sets up its state). The connection's
/// I/O runs in a task of its own (a pooled connection outlives its requests).
pub async fn h1_handshake(d: Dialed) -> Result<H1Conn, String> {
    let (conn, driver) = h1_handshake_local(d).await?;
    tokio::spawn(driver);
    Ok(conn)
}

/// HTTP/1.1 handshake for a connection that carries one request: the caller runs the returned
/// driver in the request's own task (see [`drive`]). Spawning it instead would hand the
/// request's write to a task that may run on the other core, which a waiting core reaches
/// only after a wake-up: tens of microseconds in every TTFT of the `http` transport.
pub async fn h1_handshake_local(d: Dialed) -> Result<(H1Conn, H1Driver), String> {
    // Set before hyper's first read.
    let byte_clock = d
        .stats
        .byte_clock
        .get_or_init(|| Arc::new(ByteClock::h1()))
        .clone();
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_headers(super::limits::HTTP1_HEADERS)
        .handshake(TokioIo::new(d.io))
        .await
        .map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
    let driver: H1Driver = Box::pin(async move {
        // Ends when the sender is dropped or the peer closes; errors surface on requests.
        let _ = conn.await;
    });
    let conn = H1Conn {
        sender,
        stats: d.stats,
        setup: d.setup,
        byte_clock,
        next_response: 0,
        probe: d.probe,
        idle_since: None,
        keep_alive: KeepAlive::default(),
    };
    Ok((conn, driver))
}

/// Runs `work` (a request on the connection) with the connection's `driver` polled in the same
/// task, the driver first so a queued request is written in the poll that queued it. The
/// driver may end first (the server closed the connection); `work` then finishes alone.
/// Dropping the driver when `work` ends closes the connection.
pub async fn drive<W: Future>(driver: Option<H1Driver>, work: W) -> W::Output {
    let Some(mut driver) = driver else {
        return work.await;
    };
    tokio::pin!(work);
    let mut driver_done = false;
    std::future::poll_fn(|cx| {
        if !driver_done && driver.as_mut().poll(cx).is_ready() {
            driver_done = true;
        }
        work.as_mut().poll(cx)
    })
    .await
}

/// HTTP/2 handshake (client preface + SETTINGS; the server's SETTINGS arrive with the first
/// response). Fails clearly when TLS did not negotiate `h2`.
pub async fn h2_handshake(d: Dialed, tls: bool) -> Result<H2Conn, String> {
    if tls && d.setup.alpn.as_deref() != Some("h2") {
        return Err(format!(
            "the server did not negotiate HTTP/2 via ALPN (got {:?}); use transport http-pooled for this target",
            d.setup.alpn
        ));
    }
    let byte_clock = d
        .stats
        .byte_clock
        .get_or_init(|| Arc::new(ByteClock::h2()))
        .clone();
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(d.io))
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(H2Conn {
        sender,
        stats: d.stats,
        setup: d.setup,
        byte_clock,
        probe: d.probe,
    })
}

/// Builds the hyper request. HTTP/2 needs an absolute URI (for `:authority`); HTTP/1.1 an
/// origin-form path and a `Host` header.
pub fn build(
    req: &HttpRequest,
    uri: &str,
    host: Option<&str>,
) -> Result<http::Request<Full<Bytes>>, String> {
    let mut b = http::Request::builder().method(http::Method::POST).uri(uri);
    if let Some(h) = host {
        b = b.header(http::header::HOST, h);
    }
    for (k, v) in &req.headers {
        b = b.header(k, v);
    }
    // Stamps are taken per read of the bytes as they arrive: a compressed stream would need
    // decoding first (see [`Pump::start_body`]), so ask for none.
    if !req
        .headers
        .iter()
        .any(|(k, _)| k == http::header::ACCEPT_ENCODING)
    {
        b = b.header(http::header::ACCEPT_ENCODING, "identity");
    }
    b.body(Full::new(req.body.clone()))
        .map_err(|e| format!("building the HTTP request for {uri}: {e}"))
}

/// Approximate size of a request's header block plus body, for HTTP/2 where the shared
/// connection's counters cannot be split per stream (HPACK compression is not modelled).
pub fn request_size(req: &http::Request<Full<Bytes>>, body_len: usize) -> u64 {
    let h: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    (h + req.uri().to_string().len() + 16 + body_len) as u64
}

/// Why a request got no response.
#[derive(Debug)]
pub struct SendError {
    /// hyper's error.
    pub error: hyper::Error,
    /// True when hyper handed the request back unsent (its connection closed before the
    /// request was written): the server never saw it, so it may go on another connection.
    pub unsent: bool,
}

impl From<hyper::Error> for SendError {
    fn from(error: hyper::Error) -> Self {
        SendError {
            error,
            unsent: false,
        }
    }
}

impl<T> From<hyper::client::conn::TrySendError<T>> for SendError {
    fn from(e: hyper::client::conn::TrySendError<T>) -> Self {
        SendError {
            unsent: e.message().is_some(),
            error: e.into_error(),
        }
    }
}

/// True when an HTTP/2 stream failed because the server refused it before processing it:
/// `REFUSED_STREAM` (RFC 9113 §8.7). A stream failed by a GOAWAY is not proof: h2 reports
/// the same remote GOAWAY error for the streams above the GOAWAY's last stream id (never
/// processed) and for those at or below it that die with the connection later (possibly
/// processed). Requests sent after a GOAWAY come back unsent, which is proof.
fn refused_unprocessed(e: &hyper::Error) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = src {
        if let Some(h2e) = err.downcast_ref::<h2::Error>() {
            return h2e.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        src = err.source();
    }
    false
}

/// The result of pumping one response.
#[derive(Debug)]
pub struct Pumped {
    /// How it ended.
    pub ending: Ending,
    /// Body bytes read (after de-chunking).
    pub body_bytes: u64,
    /// Size of the status line and headers (approximate on HTTP/2).
    pub header_bytes: u64,
    /// The body was read to its end without error: the connection may be reused.
    pub clean: bool,
    /// The request was never written (see [`SendError::unsent`]).
    pub unsent: bool,
    /// A response head arrived.
    pub head: bool,
    /// What the head said about reusing the connection.
    pub keep_alive: KeepAlive,
    /// HTTP/2: the server refused the stream unprocessed (`REFUSED_STREAM`, or a GOAWAY
    /// whose last stream id is below it): RFC 9113 §8.7 says it may be retried.
    pub refused: bool,
    /// The connection was reset under the request (`ECONNRESET` / `EPIPE` from hyper's I/O).
    pub reset: bool,
}

/// How the pump learns when a response's bytes arrived.
#[derive(Debug, Clone)]
pub enum Attribution {
    /// The connection's latest read when hyper hands a frame up: a bound no earlier than the
    /// frame's arrival (hyper may have read ahead).
    Latest,
    /// Response number `.1` on an HTTP/1.1 connection: exact per read.
    H1(Arc<ByteClock>, u32),
    /// A stream on an HTTP/2 connection, which the response claims by its first body bytes:
    /// exact per read once claimed, the latest read until then or if the claim fails.
    H2(Arc<ByteClock>),
}

/// Forgets a response's log when the pump ends, on every path.
struct Forget(Option<(Arc<ByteClock>, u32)>);

impl Drop for Forget {
    fn drop(&mut self) {
        if let Some((bc, key)) = self.0.take() {
            bc.done(key);
        }
    }
}

/// The pump's timers, pinned once per request. Every select polls them before the response:
/// a server that keeps sending cannot keep them from firing (a biased select polls in order).
struct Timers<'p, 'c> {
    /// Created once: polling a fresh `cancelled()` per chunk would register (and drop) a
    /// waiter under the token's lock on every chunk.
    cancelled: Pin<&'p mut WaitForCancellationFuture<'c>>,
    deadline: Pin<&'p mut Sleep>,
    /// Re-armed lazily: it fires at (last progress + stall) and, if bytes arrived meanwhile,
    /// is pushed forward once. No timer work per chunk.
    stall: Pin<&'p mut Sleep>,
}

/// One response being pumped: the timers, the connection's counters, the consumer and the
/// report so far.
struct Pump<'p, 'c, S> {
    stats: &'p IoStats,
    clock: Clock,
    limits: Limits,
    t: Timers<'p, 'c>,
    sink: &'p mut S,
    out: Pumped,
    /// The latest progress seen (a byte read or written, a frame handed up), ns.
    progress_ns: u64,
    /// The connection's bytes read when the request was sent (the head's size is what was
    /// read since, read-ahead included).
    read_at_start: u64,
}

/// Where a response's body stands: how its bytes are stamped, the SSE parser, the kept
/// error body, and what the consumer said last.
struct Body {
    byte_clock: Option<Arc<ByteClock>>,
    /// The response's key in `byte_clock` (HTTP/2: once its stream is claimed).
    key: Option<u32>,
    /// HTTP/2: the claim was tried (on the first non-empty frame).
    claimed: bool,
    forget: Forget,
    /// The previous frame's stamp: frames are stamped in order, no earlier than it.
    last_at: u64,
    /// Body bytes of this response so far.
    body_end: u64,
    /// The progress time the stall timer was last armed against.
    armed_ns: u64,
    status: u16,
    /// A 2xx status.
    ok: bool,
    /// A 2xx whose content type is not an event stream (see [`Pump::start_body`]).
    wrong_type: Option<String>,
    /// A 2xx with a `Content-Encoding` other than `identity` (see [`Pump::start_body`]).
    encoded: Option<String>,

    parser: SseParser,
    err_body: Vec<u8>,
    flow: Flow,
}

/// Sends a request (the `send` future) and pumps the response into `sink`.
///
/// Timestamps are arrival times of the reads that delivered the bytes, looked up per body
/// offset in the connection's [`ByteClock`] (see [`Attribution`]), else the time of the
/// newest read on the connection when hyper hands the frame up. `drain` keeps reading after
/// [`Flow::Stop`] until the body ends (keep-alive reuse); without it the response is dropped
/// at once.
#[allow(clippy::too_many_arguments)]
pub async fn pump<F, E, S>(
    send: F,
    attribution: Attribution,
    stats: &IoStats,
    clock: Clock,
    limits: Limits,
    cancel: &CancellationToken,
    drain: bool,
    sink: &mut S,
) -> Pumped
where
    F: Future<Output = Result<http::Response<Incoming>, E>>,
    E: Into<SendError>,
    S: FnMut(WireEvent) -> Flow,
{
    let deadline = tokio::time::sleep_until(limits.deadline.into());
    tokio::pin!(deadline);
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let stall = tokio::time::sleep_until((crate::clock::now() + limits.stall).into());
    tokio::pin!(stall);
    let mut p = Pump {
        stats,
        clock,
        limits,
        t: Timers {
            cancelled,
            deadline,
            stall,
        },
        sink,
        out: Pumped {
            ending: Ending::Finished,
            body_bytes: 0,
            header_bytes: 0,
            clean: false,
            unsent: false,
            head: false,
            keep_alive: KeepAlive::default(),
            refused: false,
            reset: false,
        },
        progress_ns: clock.now_ns(),
        read_at_start: stats.read(),
    };
    if let Some(resp) = p.head(send).await {
        let (mut b, body) = p.start_body(resp, attribution);
        p.body(&mut b, body, drain).await;
    }
    p.out
}

impl<S: FnMut(WireEvent) -> Flow> Pump<'_, '_, S> {
    /// Sends the request and waits for the response head; `None` (with `out.ending` set)
    /// when none came.
    async fn head<F, E>(&mut self, send: F) -> Option<http::Response<Incoming>>
    where
        F: Future<Output = Result<http::Response<Incoming>, E>>,
        E: Into<SendError>,
    {
        tokio::pin!(send);
        let resp = loop {
            tokio::select! {
                biased;
                _ = &mut self.t.cancelled => { self.out.ending = Ending::Cancelled; return None; }
                _ = &mut self.t.deadline => { self.out.ending = Ending::Deadline; return None; }
                r = &mut send => break r,
                _ = &mut self.t.stall => {
                    // Bytes may still be trickling in (a slow upload is not a stall).
                    let last = self.stats.last_read().max(self.stats.last_write()).max(self.progress_ns);
                    if last > self.progress_ns {
                        self.progress_ns = last;
                        let at = self.clock.instant(self.progress_ns) + self.limits.stall;
                        self.t.stall.as_mut().reset(at.into());
                    } else {
                        self.out.ending = Ending::Stall;
                        return None;
                    }
                }
            }
        };
        match resp {
            Ok(r) => {
                self.out.head = true;
                self.out.keep_alive = KeepAlive::from_head(r.version(), r.headers());
                Some(r)
            }
            Err(e) => {
                let e: SendError = e.into();
                self.out.unsent = e.unsent;
                self.out.refused = refused_unprocessed(&e.error);
                self.out.reset = super::io::is_reset(&e.error);
                let refusal =
                    super::io::client_cert_refusal(&e.error).or_else(|| self.stats.tls_refusal());
                self.out.ending = match refusal {
                    Some(why) => Ending::Tls(format!("sending the request: {}: {why}", e.error)),
                    None => classify(
                        &e.error,
                        "sending the request",
                        self.stats.read().saturating_sub(self.read_at_start),
                    ),
                };
                None
            }
        }
    }

    /// Stamps the response head, delivers it, and sets up reading the body.
    fn start_body(
        &mut self,
        resp: http::Response<Incoming>,
        attribution: Attribution,
    ) -> (Body, Incoming) {
        let (byte_clock, key) = match attribution {
            Attribution::Latest => (None, None),
            Attribution::H1(bc, k) => (Some(bc), Some(k)),
            Attribution::H2(bc) => (Some(bc), None),
        };
        let mut forget = Forget(None);
        if let (Some(bc), Some(k)) = (&byte_clock, key) {
            forget.0 = Some((bc.clone(), k));
        }
        let exact_head = match (&byte_clock, key) {
            (Some(bc), Some(k)) => bc.head(k),
            _ => None,
        };
        let at_ns = exact_head
            .unwrap_or_else(|| self.stats.last_read())
            .max(self.progress_ns);
        // Frames are stamped in order: no earlier than the one before. On HTTP/2 the head's
        // time is only a bound (the connection's latest read: its stream is not known yet),
        // so it does not hold the exact body stamps back.
        let last_at = if exact_head.is_none() && key.is_none() && byte_clock.is_some() {
            self.progress_ns
        } else {
            at_ns
        };
        self.progress_ns = at_ns;
        self.t
            .stall
            .as_mut()
            .reset((self.clock.instant(self.progress_ns) + self.limits.stall).into());
        let status = resp.status().as_u16();
        let (parts, body) = resp.into_parts();
        self.out.header_bytes = parts
            .headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum::<usize>() as u64
            + 17;
        let ok = (200..300).contains(&status);
        // A 2xx whose body is declared as something else than an event stream (a gateway's
        // HTML page, a JSON object from a server that ignored `stream: true`) is kept like an
        // error body and reported as a protocol error. Missing, `text/plain` and
        // `application/octet-stream` bodies are parsed as SSE (proxies stamp those).
        let wrong_type = ok
            .then(|| parts.headers.get(http::header::CONTENT_TYPE))
            .flatten()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
            .filter(|t| {
                !t.contains("event-stream")
                    && !t.starts_with("text/plain")
                    && !t.starts_with("application/octet-stream")
            });
        // The request asked for `identity`; a server that compresses anyway sends bytes
        // that are not an event stream until decoded, and decoding would blur which read
        // delivered which event. Such a stream is refused, naming the encoding.
        let encoded = ok
            .then(|| parts.headers.get(http::header::CONTENT_ENCODING))
            .flatten()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .trim()
                    .to_ascii_lowercase()
            })
            .filter(|e| !e.is_empty() && e != "identity");
        let flow = (self.sink)(WireEvent::Headers {
            at_ns,
            status,
            headers: parts.headers,
        });
        let b = Body {
            byte_clock,
            key,
            claimed: false,
            forget,
            last_at,
            body_end: 0,
            armed_ns: self.progress_ns,
            status,
            ok,
            wrong_type,
            encoded,
            parser: SseParser::new(),
            err_body: Vec::new(),
            flow,
        };
        (b, body)
    }

    /// Reads the body to its end (or until the consumer stops and, without `drain`, at
    /// once), the timers first.
    async fn body(&mut self, b: &mut Body, mut body: Incoming, drain: bool) {
        if let (Some(enc), Flow::Continue) = (&b.encoded, b.flow) {
            self.out.ending = Ending::Protocol(format!(
                "the server answered {} with content-encoding {}, although the request asked \
                 for identity; spark-bench reads event streams uncompressed only (each event is \
                 stamped with the read that delivered it)",
                b.status,
                crate::vocab::redact::excerpt(enc.as_bytes(), 60)
            ));
            return;
        }
        loop {
            // Timers first (see above): a body that is always ready must not starve them.
            let frame = tokio::select! {
                biased;
                _ = &mut self.t.cancelled => {
                    if b.flow == Flow::Continue { self.out.ending = Ending::Cancelled; }
                    return;
                }
                _ = &mut self.t.deadline => {
                    if b.flow == Flow::Continue { self.out.ending = Ending::Deadline; }
                    return;
                }
                f = body.frame() => f,
                _ = &mut self.t.stall => {
                    // `progress_ns` moves with every frame; the timer was armed at `armed_ns`.
                    let last = self.stats.last_read().max(self.progress_ns);
                    if last > b.armed_ns && b.flow == Flow::Continue {
                        self.progress_ns = last;
                        b.armed_ns = last;
                        let at = self.clock.instant(self.progress_ns) + self.limits.stall;
                        self.t.stall.as_mut().reset(at.into());
                        continue;
                    }
                    // Stalled, or a finished response whose body did not end within the drain
                    // grace (the connection is then not reused).
                    if b.flow == Flow::Continue { self.out.ending = Ending::Stall; }
                    return;
                }
            };
            match frame {
                None => return self.end(b),
                Some(Err(e)) => {
                    if b.flow == Flow::Continue {
                        self.out.ending = classify(&e, "reading the response body", 0);
                    }
                    return;
                }
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if self.data(b, data, drain) {
                        return;
                    }
                }
            }
        }
    }

    /// The body ended: a clean end, delivered (with a kept error body first) unless the
    /// consumer had stopped.
    fn end(&mut self, b: &mut Body) {
        self.out.clean = true;
        let exact = match (&b.byte_clock, b.key) {
            (Some(bc), Some(k)) => bc.end(k),
            _ => None,
        };
        let at_ns = exact
            .unwrap_or_else(|| self.stats.last_read())
            .max(b.last_at);
        if let (Some(t), Flow::Continue) = (&b.wrong_type, b.flow) {
            self.out.ending = Ending::Protocol(format!(
                "the server answered {} with content-type {t}, not text/event-stream: {}",
                b.status,
                crate::vocab::redact::excerpt(&b.err_body, 300)
            ));
            return;
        }
        if b.ok && b.body_end == 0 && b.flow == Flow::Continue {
            // Not a stream cut short: the server sent no stream at all.
            self.out.ending = Ending::Protocol(if b.status == 204 {
                "the server answered 204 No Content: no body, so no event stream".to_string()
            } else {
                format!(
                    "the server answered {} with an empty body: no event stream",
                    b.status
                )
            });
            return;
        }
        if b.flow == Flow::Continue {
            if !b.ok {
                (self.sink)(WireEvent::ErrorBody {
                    at_ns,
                    data: Bytes::from(std::mem::take(&mut b.err_body)),
                });
            }
            (self.sink)(WireEvent::End { at_ns });
        }
    }

    /// One body frame: stamps it, then keeps it (error body), parses it into SSE events for
    /// the consumer, or drops it (draining). True when the pump is to end now.
    fn data(&mut self, b: &mut Body, data: Bytes, drain: bool) -> bool {
        b.body_end += data.len() as u64;
        if let (Some(bc), None, false) = (&b.byte_clock, b.key, b.claimed) {
            if !data.is_empty() {
                // HTTP/2: find this response's stream by its first bytes.
                b.claimed = true;
                b.key = bc.claim(&data);
                if let Some(k) = b.key {
                    b.forget.0 = Some((bc.clone(), k));
                }
            }
        }
        let exact = match (&b.byte_clock, b.key) {
            (Some(bc), Some(k)) => bc.body(k, b.body_end),
            _ => None,
        };
        if let (Some(_), Some(c)) = (&b.byte_clock, self.stats.counters.get()) {
            c.frame(exact.is_some());
        }
        let at_ns = exact
            .unwrap_or_else(|| self.stats.last_read())
            .max(b.last_at);
        b.last_at = at_ns;
        self.progress_ns = self.progress_ns.max(at_ns);
        self.out.body_bytes += data.len() as u64;
        if b.flow == Flow::Stop {
            return false; // draining for reuse
        }
        if !b.ok || b.wrong_type.is_some() {
            let room = super::limits::ERROR_BODY.saturating_sub(b.err_body.len());
            b.err_body.extend_from_slice(&data[..data.len().min(room)]);
            return false;
        }
        let sink = &mut self.sink;
        let flow = &mut b.flow;
        b.parser.feed(data, |ev| {
            *flow = sink(WireEvent::Sse {
                at_ns,
                event: ev.event,
                data: ev.data,
            });
            *flow == Flow::Continue
        });
        if let Some(why) = b.parser.overflow() {
            self.out.ending = Ending::TooLarge(why.to_string());
            return true;
        }
        if b.flow == Flow::Stop {
            if !drain {
                return true;
            }
            // The terminal event arrived: the body should end right after it. Give it a
            // short grace to do so (keep-alive reuse), not the stall timeout.
            self.t
                .stall
                .as_mut()
                .reset((crate::clock::now() + DRAIN_GRACE).into());
        }
        false
    }
}

/// The ending for a hyper error: a malformed or oversized response (head, chunked
/// encoding) is the server breaking the protocol; an HTTP/2 error carries its reason code
/// and frame ([`h2_ending`]); anything else (reset, EOF mid-body) a connection that ended
/// early. `head_read`: bytes read since the request was sent (tells a head with too many
/// fields from one too large).
fn classify(e: &hyper::Error, what: &str, head_read: u64) -> Ending {
    if e.is_parse_too_large() {
        // hyper says "too large" for both of its limits: too many bytes, or too many fields.
        let why = if head_read < super::limits::HTTP1_HEAD as u64 {
            format!(
                "the response head has more than {} header fields",
                super::limits::HTTP1_HEADERS
            )
        } else {
            format!(
                "the response head exceeded {} bytes",
                super::limits::HTTP1_HEAD
            )
        };
        return Ending::TooLarge(format!("{what}: {e} ({why})"));
    }
    if e.is_parse() || e.is_parse_status() {
        return Ending::Protocol(format!("{what}: {e}: the server sent a malformed response"));
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = src {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            ) {
                return Ending::Protocol(format!("{what}: {e}: {io}"));
            }
        }
        if let Some(h2e) = err.downcast_ref::<h2::Error>() {
            if let Some(ending) = h2_ending(h2e, what) {
                return ending;
            }
        }
        src = err.source();
    }
    Ending::Io(format!("{what}: {e}"))
}

/// An HTTP/2 error with a reason code, told as what happened: which frame (`GOAWAY` for
/// the connection, `RST_STREAM` for the stream), who sent it, and the reason's name. A
/// protocol violation (the server's, or one it reported) is `protocol-error`; a stream the
/// server ended without blaming the protocol (`NO_ERROR`, `CANCEL`, `REFUSED_STREAM`,
/// `INTERNAL_ERROR`) is a truncated response. `None` for I/O errors (no reason code).
fn h2_ending(h2e: &h2::Error, what: &str) -> Option<Ending> {
    let reason = h2e.reason()?;
    let frame = if h2e.is_go_away() {
        "GOAWAY"
    } else if h2e.is_reset() {
        "RST_STREAM"
    } else {
        "error"
    };
    let who = if h2e.is_remote() {
        "from the server"
    } else if h2e.is_library() {
        "sent by spark-bench: the server broke the HTTP/2 protocol"
    } else {
        "from the HTTP/2 layer"
    };
    let msg = format!("{what}: HTTP/2 {frame} {reason:?} ({who}: {reason})");
    Some(
        if [
            h2::Reason::NO_ERROR,
            h2::Reason::CANCEL,
            h2::Reason::REFUSED_STREAM,
            h2::Reason::INTERNAL_ERROR,
        ]
        .contains(&reason)
        {
            Ending::Io(msg)
        } else {
            Ending::Protocol(msg)
        },
    )
}
