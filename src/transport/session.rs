//! Connection policy per transport: who opens a connection, who reuses it, when it is dropped,
//! and one turn on it ([`SessionTransport::turn`], the dispatch on the transport kind).
//!
//! Owns: [`Connector`] (one per cell = target × transport; shared by the cell's sessions via
//! `Arc`; owns the HTTP/1.1 keep-alive pool and the one HTTP/2 connection),
//! [`SessionTransport`] (one per session; owns that session's WebSocket), and the re-send of
//! a turn the server provably never read, once, on every transport.
//! * `http`: a new TCP(+TLS) connection per request, closed after.
//! * `http-pooled`: check out an idle HTTP/1.1 connection or open one; put it back only when
//!   the body was read to its end and hyper reports it ready.
//! * `http2`: one HTTP/2 connection per cell, opened by the first request that needs it
//!   (others wait for it), reopened when it dies.
//! * `ws`: one WebSocket per session, reopened when it dies.
//!
//! Does not own: request bodies (asked of the caller's [`Outgoing`] when needed) or event
//! meaning. The pool lock is taken at checkout and return only, never per chunk.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

use super::connect::{DialError, Dialed};
use super::http::{self as h, H1Conn, H2Conn, HttpRequest};
use super::sockstate::{Idle, SockProbe};
use super::ws::{self, WsConn};
use super::{Ending, Exchanged, Flow, Limits, Outgoing, Setup, Trust, WireEvent};
use crate::clock::Clock;
use crate::link::{Emulator, Link};
use crate::vocab::{BaseUrl, Proxy, Scheme, TransportKind, WireProtocol};

/// Some servers close every keep-alive connection right after a streamed response without
/// saying so (llama.cpp's server sends its FIN ~40 µs after the last chunk while advertising
/// `Keep-Alive: timeout=5`). A request written in that instant reaches a server that is
/// closing; when its close is a plain FIN there is no proof the request went unread, so it
/// could only be a `stale-connection` failure. So until a cell has seen what its server
/// does, an idle connection is taken from the pool only once it has been idle this long (the
/// request waits the rest, counted in its latency from the intended start; only the first
/// reuses of a cell) and is still open. Closed: the server "closes after responses" and the
/// cell stops pooling (each request opens a connection, as it would have to anyway). Open:
/// the server "keeps" and reuse is immediate from then on.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(5);

const HABIT_UNKNOWN: u8 = 0;
const HABIT_KEEPS: u8 = 1;
const HABIT_CLOSES: u8 = 2;

/// Per-cell connection owner.
pub struct Connector {
    kind: TransportKind,
    endpoint: BaseUrl,
    tls: Option<TlsConnector>,
    proxy: Option<Proxy>,
    link: Link,
    /// The delay lines' runtime and the run's provenance counters.
    emulator: Arc<Emulator>,
    clock: Clock,
    seed: u64,
    pool: Mutex<Vec<H1Conn>>,
    /// What this cell's server does with a keep-alive connection after a response:
    /// [`HABIT_UNKNOWN`], [`HABIT_KEEPS`] or [`HABIT_CLOSES`] (see [`Connector::pool_return`]).
    habit: AtomicU8,
    h2: tokio::sync::Mutex<Option<H2Conn>>,
    /// The longest opening a connection may take (see [`super::connect::dial_within`]).
    connect_timeout: std::time::Duration,
}

impl Connector {
    /// A connector for `target` over `transport`. `target.base_url` must be set (the driver
    /// fills it with the spawned simulator's URL for embedded targets).
    pub fn new(
        target: &crate::plan::Target,
        transport: TransportKind,
        trust: Trust,
        link: Link,
        clock: Clock,
        seed: u64,
    ) -> anyhow::Result<Self> {
        // Before any connection: the kernel turns receive stamping on asynchronously.
        crate::clock::rx::keep_enabled();
        let base = target.base_url.as_deref().ok_or_else(|| {
            anyhow::anyhow!(
                "target {:?} has no base_url; start the simulator first and set its URL",
                target.name
            )
        })?;
        anyhow::ensure!(
            target.api.speaks(transport),
            "target {:?} speaks chat completions, which has no WebSocket mode; drop ws from its transports",
            target.name
        );
        let endpoint = BaseUrl::parse(base)?;
        let tls = match endpoint.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                // Offer h2 only where we speak it, so a server never picks a protocol we
                // did not plan to measure.
                let alpn: &[&[u8]] = match transport {
                    TransportKind::Http2 => &[b"h2"],
                    _ => &[b"http/1.1"],
                };
                Some(TlsConnector::from(trust.client_config(alpn)?))
            }
        };
        Ok(Connector {
            kind: transport,
            endpoint,
            tls,
            proxy: None,
            link,
            emulator: Arc::new(Emulator::default()),
            clock,
            seed,
            pool: Mutex::new(Vec::new()),
            habit: AtomicU8::new(HABIT_UNKNOWN),
            h2: tokio::sync::Mutex::new(None),
            connect_timeout: crate::plan::DEFAULT_CONNECT_TIMEOUT,
        })
    }

    /// Connections go through `proxy`'s `CONNECT` tunnel (every transport, plain http too).
    pub fn with_proxy(mut self, proxy: Option<Proxy>) -> Self {
        self.proxy = proxy;
        self
    }

    /// Connections run their delay lines on `emulator` and count into its provenance
    /// counters: a run's connectors share the run's. Without this a connector has an
    /// emulator (and counters) of its own.
    pub fn with_emulator(mut self, emulator: Arc<Emulator>) -> Self {
        self.emulator = emulator;
        self
    }

    /// The provenance counters this connector's connections add to.
    pub fn counters(&self) -> &Arc<crate::provenance::Counters> {
        self.emulator.counters()
    }

    /// A per-session handle.
    pub fn session(self: &Arc<Self>) -> SessionTransport {
        SessionTransport {
            connector: self.clone(),
            ws: None,
        }
    }

    /// The run clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The transport.
    pub fn kind(&self) -> TransportKind {
        self.kind
    }

    /// The parsed base URL.
    pub fn endpoint(&self) -> &BaseUrl {
        &self.endpoint
    }

    /// The proxy the cell's connections tunnel through, if any.
    pub fn proxy(&self) -> Option<&Proxy> {
        self.proxy.as_ref()
    }

    /// Idle HTTP/1.1 connections in the pool (for tests).
    pub fn idle_connections(&self) -> usize {
        self.pool.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Bounds opening a connection (TCP connect, proxy `CONNECT`, TLS) by `timeout`
    /// (default [`crate::plan::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    async fn dial(&self) -> Result<Dialed, Ending> {
        super::connect::dial_within(
            &self.endpoint,
            self.tls.as_ref(),
            self.proxy.as_ref(),
            &self.link,
            &self.emulator,
            self.clock,
            self.seed,
            self.connect_timeout,
        )
        .await
        .map_err(|e| match e {
            DialError::Connect(m) => Ending::Connect(m),
            DialError::Tls(m) => Ending::Tls(m),
            DialError::Local(m) => Ending::Local(m),
        })
    }

    /// Puts a connection whose response ended cleanly back in the pool, unless this cell's
    /// server was seen closing connections right after responses (see [`SETTLE`]).
    fn pool_return(c: &Arc<Connector>, mut conn: H1Conn) {
        if c.habit.load(Ordering::Relaxed) == HABIT_CLOSES {
            return;
        }
        conn.idle_since = Some(crate::clock::now());
        if let Ok(mut p) = c.pool.lock() {
            p.push(conn);
        }
    }

    fn learn(&self, keeps: bool) {
        if keeps {
            self.habit.store(HABIT_KEEPS, Ordering::Relaxed);
        } else {
            let _ = self.habit.compare_exchange(
                HABIT_UNKNOWN,
                HABIT_CLOSES,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Whether this cell's server was seen closing keep-alive connections right after a
    /// response without announcing it (and never seen keeping one).
    pub fn server_closes_after_response(&self) -> bool {
        self.habit.load(Ordering::Relaxed) == HABIT_CLOSES
    }

    /// An idle pooled connection fit for a request, or `None` (open a new one). Drops the
    /// ones the server closed, that hold bytes nobody asked for, or that the server's
    /// `Connection: close` / `Keep-Alive` said not to reuse by now. (The request then runs
    /// on a new connection, `connection_reused = false`; nothing was sent, so nothing is
    /// re-sent and `reconnects` stays 0.)
    async fn checkout(&self) -> Option<H1Conn> {
        while let Some(mut idle) = self.pool.lock().ok().and_then(|mut p| p.pop()) {
            let idle_for = idle.idle_since.map(crate::clock::since).unwrap_or_default();
            if !idle.keep_alive.reusable_after(idle_for) {
                continue;
            }
            let unknown = self.habit.load(Ordering::Relaxed) == HABIT_UNKNOWN;
            if unknown && idle_for < SETTLE {
                tokio::time::sleep(SETTLE - idle_for).await;
            }
            let server_closed = idle.sender.is_closed()
                || idle.probe.as_ref().is_some_and(|p| p.idle() != Idle::Open);
            if unknown {
                self.learn(!server_closed);
            }
            if server_closed {
                continue;
            }
            // Ready resolves at once on a live idle connection; an error means the server
            // closed it while idle.
            let ok =
                tokio::time::timeout(std::time::Duration::from_millis(50), idle.sender.ready())
                    .await
                    .is_ok_and(|r| r.is_ok());
            if !ok {
                continue;
            }
            idle.setup = idle.setup.reused();
            return Some(idle);
        }
        None
    }

    /// An HTTP/1.1 connection for one request: an idle pooled one when `from_pool` and the
    /// pool has one fit, else a new one. A connection that carries one request (`http`)
    /// comes with its driver, to run in the request's own task (see [`h::drive`]).
    async fn h1_connection(
        &self,
        from_pool: bool,
        limits: Limits,
        cancel: &CancellationToken,
    ) -> Result<(H1Conn, Option<h::H1Driver>), Ending> {
        if from_pool {
            if let Some(conn) = self.checkout().await {
                return Ok((conn, None));
            }
        }
        let pooled = self.kind == TransportKind::HttpPooled;
        race(
            async {
                let d = self.dial().await?;
                if pooled {
                    h::h1_handshake(d).await.map(|c| (c, None))
                } else {
                    h::h1_handshake_local(d).await.map(|(c, d)| (c, Some(d)))
                }
                .map_err(Ending::Io)
            },
            limits,
            cancel,
        )
        .await
    }

    /// The cell's HTTP/2 connection (marked reused), or a new one when there is none or it
    /// closed; the first request that needs a new one opens it while the others wait.
    async fn h2_connection(
        &self,
        limits: Limits,
        cancel: &CancellationToken,
    ) -> Result<H2Conn, Ending> {
        race(
            async {
                let mut slot = self.h2.lock().await;
                if let Some(conn) = slot.as_ref() {
                    if !conn.sender.is_closed() {
                        let mut shared = conn.clone();
                        shared.setup = conn.setup.reused();
                        return Ok(shared);
                    }
                }
                let d = self.dial().await?;
                let conn = h::h2_handshake(d, self.tls.is_some())
                    .await
                    .map_err(Ending::Tls)?;
                *slot = Some(conn.clone());
                Ok(conn)
            },
            limits,
            cancel,
        )
        .await
    }

    /// Forgets the cell's HTTP/2 connection when it is still `conn` (a dead one).
    async fn h2_forget(&self, conn: &H2Conn) {
        let mut slot = self.h2.lock().await;
        if slot.as_ref().map(|s| s.setup.connection_id) == Some(conn.setup.connection_id) {
            *slot = None;
        }
    }

    /// Whether the kernel reset the connection behind `probe` within the bound the link's
    /// round trip allows: proof that what was written to it was never read (see `probe`).
    async fn reset_seen(&self, probe: Option<&Arc<SockProbe>>) -> bool {
        match probe {
            Some(p) => p.await_reset(p.reset_bound(self.link.rtt)).await,
            None => false,
        }
    }

    /// The ending of a turn on a reused WebSocket that got no reply. When the server closed
    /// the socket under the turn (EOF, a reset, or close 1000/1001/1005), a reset on the
    /// message (`reset`, or one the probe sees) proves no server application read it:
    /// `Unread` (the turn may go again on a new socket); without one it may have been read:
    /// `Stale`. Other endings stay.
    async fn ws_closed_under(
        &self,
        ending: Ending,
        reset: bool,
        probe: Option<&Arc<SockProbe>>,
    ) -> Ending {
        let what = match &ending {
            Ending::Io(m) => m.clone(),
            Ending::WsClose(code @ (1000 | 1001 | 1005), r) => format!("close {code} {r}"),
            _ => return ending,
        };
        if reset || self.reset_seen(probe).await {
            Ending::Unread(format!(
                "the server had closed the reused WebSocket before it read the turn ({what})"
            ))
        } else {
            Ending::Stale(format!(
                "the server closed the reused WebSocket after the turn was sent and before \
                 any reply ({what}); the server may have read it, so it was not sent again"
            ))
        }
    }
}

/// Races `fut` against the deadline and cancellation.
async fn race<T>(
    fut: impl Future<Output = Result<T, Ending>>,
    limits: Limits,
    cancel: &CancellationToken,
) -> Result<T, Ending> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(Ending::Cancelled),
        r = fut => r,
        _ = tokio::time::sleep_until(limits.deadline.into()) => Err(Ending::Deadline),
    }
}

/// One session's transport handle.
pub struct SessionTransport {
    connector: Arc<Connector>,
    ws: Option<WsConn>,
}

impl SessionTransport {
    /// The cell's connector.
    pub fn connector(&self) -> &Arc<Connector> {
        &self.connector
    }

    /// The run clock.
    pub fn clock(&self) -> Clock {
        self.connector.clock
    }

    /// The transport.
    pub fn kind(&self) -> TransportKind {
        self.connector.kind
    }

    /// True when the session has an open WebSocket.
    pub fn ws_open(&self) -> bool {
        self.ws.is_some()
    }

    /// True when the open WebSocket already carried a completed warm-up or turn (so a
    /// `generate:false` warm-up would be pointless).
    pub fn ws_warm(&self) -> bool {
        self.ws.as_ref().is_some_and(|w| w.warmed || w.used)
    }

    /// Marks the open socket as warmed.
    pub fn set_ws_warmed(&mut self) {
        if let Some(w) = self.ws.as_mut() {
            w.warmed = true;
        }
    }

    /// Drops the session's WebSocket (the next turn opens a new one).
    pub fn close_ws(&mut self) {
        self.ws = None;
    }

    /// A report for a turn that ended before anything was sent.
    fn failed(&self, setup: Setup, ending: Ending) -> Exchanged {
        Exchanged {
            setup,
            request_written_ns: None,
            bytes_sent: 0,
            bytes_received: 0,
            ending,
            protocol: self.kind().wire_protocol(),
            reconnects: 0,
        }
    }

    /// One turn on this session's transport, whatever it is: opens or reuses the connection
    /// (the HTTP/1.1 pool, the cell's HTTP/2 connection, the session's WebSocket), asks `out`
    /// for what to send (see [`Outgoing`]), sends it, delivers the wire events to `sink`, and
    /// reports. A turn the server provably never read goes once more (counted in
    /// [`Exchanged::reconnects`]): HTTP/1.1 and WebSocket, the server had closed the reused
    /// connection under it (a reset on what was written), so it goes on a new one (a
    /// WebSocket turn rebuilt for the new socket); HTTP/2, hyper handed the request back
    /// unsent or the server refused its stream, so it goes on the cell's connection,
    /// reopened if it died. `Err`: `out` could not build what is sent.
    pub async fn turn<O, S>(
        &mut self,
        out: &mut O,
        limits: Limits,
        cancel: &CancellationToken,
        sink: &mut S,
    ) -> Result<Exchanged, String>
    where
        O: Outgoing + ?Sized,
        S: FnMut(WireEvent) -> Flow,
    {
        // What is asked before connecting: the dispatch on the transport.
        let before = match self.kind() {
            TransportKind::Http | TransportKind::HttpPooled => Before::Http1(out.http_request()?),
            TransportKind::Http2 => Before::Http2(out.http_request()?),
            TransportKind::Ws => Before::Ws(out.ws_headers()?),
        };
        let mut resent = 0u32;
        loop {
            let attempt = match &before {
                Before::Http1(req) => self.http1(req, resent, limits, cancel, sink).await,
                Before::Http2(req) => self.http2(req, resent, limits, cancel, sink).await,
                Before::Ws(headers) => self.ws(headers, out, resent, limits, cancel, sink).await?,
            };
            if attempt.unread && resent == 0 {
                resent += 1;
                // A WebSocket turn goes on a new socket.
                self.ws = None;
                continue;
            }
            return Ok(attempt.x);
        }
    }

    /// One attempt on an HTTP/1.1 connection (`http`, `http-pooled`): an idle pooled one
    /// (`http-pooled`, never after a re-send: a fresh connection's failure is the request's
    /// own) or a new one. A pooled connection whose response ended cleanly goes back.
    async fn http1<S>(
        &mut self,
        req: &HttpRequest,
        resent: u32,
        limits: Limits,
        cancel: &CancellationToken,
        sink: &mut S,
    ) -> Attempt
    where
        S: FnMut(WireEvent) -> Flow,
    {
        let c = self.connector.clone();
        let pooled = c.kind == TransportKind::HttpPooled;
        let (mut conn, driver) = match c.h1_connection(pooled && resent == 0, limits, cancel).await
        {
            Ok(got) => got,
            Err(e) => {
                let mut x = self.failed(Setup::default(), e);
                x.reconnects = resent;
                return Attempt::done(x);
            }
        };
        let setup = conn.setup.clone();
        let uri = format!("{}{}", c.endpoint.prefix, req.path);
        let hreq = match h::build(req, &uri, Some(&c.endpoint.authority())) {
            Ok(r) => r,
            Err(e) => return Attempt::done(self.failed(setup, Ending::Io(e))),
        };
        let (w0, r0) = (conn.stats.written(), conn.stats.read());
        let start_ns = c.clock.now_ns();
        let stats = conn.stats.clone();
        let attribution = h::Attribution::H1(conn.byte_clock.clone(), conn.next_response);
        conn.next_response += 1;
        let send = conn.sender.try_send_request(hreq);
        let pump = h::pump(
            send,
            attribution,
            &stats,
            c.clock,
            limits,
            cancel,
            pooled,
            sink,
        );
        let pumped = h::drive(driver, pump).await;
        let mut ending = pumped.ending;
        let mut unread = false;
        if setup.reused && !pumped.head {
            if let Ending::Io(msg) = &ending {
                // The server closed the reused connection under the request. Re-send only
                // with proof that no server application read it.
                let never_read =
                    pumped.unsent || pumped.reset || c.reset_seen(conn.probe.as_ref()).await;
                if never_read && resent == 0 {
                    unread = true;
                } else {
                    ending = Ending::Stale(format!(
                        "the server closed the reused connection after the request was written \
                         and before any response byte ({msg}); the server may have read the \
                         request, so it was not sent again"
                    ));
                }
            }
        }
        let last_write = stats.last_write();
        let x = Exchanged {
            setup,
            request_written_ns: (last_write >= start_ns && stats.written() > w0)
                .then_some(last_write),
            bytes_sent: stats.written() - w0,
            bytes_received: stats.read() - r0,
            ending,
            protocol: WireProtocol::Http1,
            reconnects: resent,
        };
        let keep = pooled
            && pumped.clean
            && x.ending == Ending::Finished
            && pumped.keep_alive.reusable_after(std::time::Duration::ZERO);
        if keep && conn.sender.is_closed() {
            // Closed already, though the server did not announce it.
            c.learn(false);
        } else if keep {
            conn.keep_alive = pumped.keep_alive;
            Connector::pool_return(&c, conn);
        }
        Attempt { x, unread }
    }

    /// One attempt on the cell's HTTP/2 connection (`http2`). A shared connection can die
    /// between two requests (the server reset it or sent GOAWAY) before hyper notices; a
    /// request sent then comes back unsent. The server never saw it, so it may go once more,
    /// on a new connection, whose setup this request then pays.
    async fn http2<S>(
        &mut self,
        req: &HttpRequest,
        resent: u32,
        limits: Limits,
        cancel: &CancellationToken,
        sink: &mut S,
    ) -> Attempt
    where
        S: FnMut(WireEvent) -> Flow,
    {
        let c = self.connector.clone();
        let mut conn = match c.h2_connection(limits, cancel).await {
            Ok(conn) => conn,
            Err(e) => return Attempt::done(self.failed(Setup::default(), e)),
        };
        let hreq = match h::build(req, &c.endpoint.http_url(&req.path), None) {
            Ok(r) => r,
            Err(e) => return Attempt::done(self.failed(conn.setup.clone(), Ending::Io(e))),
        };
        let sent_estimate = h::request_size(&hreq, req.body.len());
        let stats = conn.stats.clone();
        let mut sender = conn.sender.clone();
        let send = async move {
            // `ready` fails only on a closed connection: the request was not sent.
            sender.ready().await.map_err(|error| h::SendError {
                error,
                unsent: true,
            })?;
            sender
                .try_send_request(hreq)
                .await
                .map_err(h::SendError::from)
        };
        let attribution = h::Attribution::H2(conn.byte_clock.clone());
        let pumped = h::pump(
            send,
            attribution,
            &stats,
            c.clock,
            limits,
            cancel,
            true,
            sink,
        )
        .await;
        let dead = pumped.unsent || conn.sender.is_closed();
        if matches!(pumped.ending, Ending::Io(_)) && dead {
            c.h2_forget(&conn).await;
        }
        // Sent again only with proof the server never processed it: hyper handed the
        // request back unwritten (the connection was closing, e.g. after a GOAWAY), or
        // the server refused the stream (REFUSED_STREAM).
        let unread = (pumped.unsent || pumped.refused) && !pumped.head;
        let x = Exchanged {
            setup: std::mem::take(&mut conn.setup),
            // The shared connection's write times mix streams; not attributable per request.
            request_written_ns: None,
            bytes_sent: if pumped.unsent { 0 } else { sent_estimate },
            bytes_received: pumped.header_bytes + pumped.body_bytes,
            ending: pumped.ending,
            protocol: WireProtocol::Http2,
            reconnects: resent,
        };
        Attempt { x, unread }
    }

    /// The session's WebSocket, opened now when it has none or the server closed it while
    /// idle, with the setup it paid when opened now (`None`: reused; its setup was reported
    /// by the request that opened it); or the failure to open one.
    async fn ensure_ws(
        &mut self,
        headers: &[(http::HeaderName, http::HeaderValue)],
        limits: Limits,
        cancel: &CancellationToken,
    ) -> Result<(&mut WsConn, Option<Setup>), Exchanged> {
        // A socket the server closed between turns is dropped: the turn goes on a new socket
        // (its record shows the new socket's phases; nothing was sent on the old one).
        let idle = match self.ws.take() {
            Some(mut w) => (!w.closed_while_idle()).then_some(w),
            None => None,
        };
        let (w, opened) = match idle {
            Some(w) => (w, None),
            None => {
                let c = self.connector.clone();
                let url = c.endpoint.ws_url("/responses");
                let dialed = async {
                    let d = c.dial().await?;
                    ws::upgrade(d, &url, headers).await
                };
                let w = race(dialed, limits, cancel)
                    .await
                    .map_err(|e| self.failed(Setup::default(), e))?;
                let setup = w.setup.clone();
                (w, Some(setup))
            }
        };
        Ok((self.ws.insert(w), opened))
    }

    /// One attempt on the session's WebSocket (`ws`): opens it when needed, asks `out` for
    /// the message (telling it whether the socket is new), and runs the turn. The turn that
    /// paid for the socket reports its setup. A socket that did not finish the turn cleanly
    /// is dropped.
    async fn ws<O, S>(
        &mut self,
        headers: &[(http::HeaderName, http::HeaderValue)],
        out: &mut O,
        resent: u32,
        limits: Limits,
        cancel: &CancellationToken,
        sink: &mut S,
    ) -> Result<Attempt, String>
    where
        O: Outgoing + ?Sized,
        S: FnMut(WireEvent) -> Flow,
    {
        let c = self.connector.clone();
        let (w, opened) = match self.ensure_ws(headers, limits, cancel).await {
            Ok(got) => got,
            Err(mut x) => {
                x.reconnects = resent;
                return Ok(Attempt::done(x));
            }
        };
        let text = out.ws_message(opened.is_some())?;
        let setup = opened.unwrap_or_else(|| w.setup.reused());
        let reused = setup.reused;
        let probe = w.probe.clone();
        let mut t = ws::turn(w, text, c.clock, limits, cancel, sink).await;
        if !t.alive {
            self.ws = None;
        }
        if reused && t.bytes_received == 0 {
            t.ending = c.ws_closed_under(t.ending, t.reset, probe.as_ref()).await;
        }
        let x = Exchanged {
            setup,
            request_written_ns: t.written_ns,
            bytes_sent: t.bytes_sent,
            bytes_received: t.bytes_received,
            ending: t.ending,
            protocol: WireProtocol::WebSocket,
            reconnects: resent,
        };
        Ok(Attempt {
            unread: matches!(x.ending, Ending::Unread(_)),
            x,
        })
    }
}

/// What a turn asked of the caller before connecting (see [`Outgoing`]), by transport.
enum Before {
    /// `http`, `http-pooled`: the request, for an HTTP/1.1 connection.
    Http1(HttpRequest),
    /// `http2`: the request, for the cell's HTTP/2 connection.
    Http2(HttpRequest),
    /// `ws`: the upgrade's headers (the message is asked once the socket is open).
    Ws(Vec<(http::HeaderName, http::HeaderValue)>),
}

/// One attempt at a turn.
struct Attempt {
    /// Its report (`reconnects` counts the re-sends before it).
    x: Exchanged,
    /// The server provably never read what was sent: it may go once more.
    unread: bool,
}

impl Attempt {
    /// An attempt that is not to be repeated.
    fn done(x: Exchanged) -> Self {
        Attempt { x, unread: false }
    }
}
