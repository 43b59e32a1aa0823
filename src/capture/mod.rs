//! The recording proxy behind `spark-bench record`: an OpenAI-compatible pass-through for
//! chat completions and Responses (SSE and JSON) and the Responses WebSocket mode, which
//! turns the live session it carried into a scenario TOML and a results directory.
//!
//! Owns: accepting downstream connections (`relay` for HTTP, `ws` for WebSockets, one
//! upstream connection per downstream connection, dialled by `upstream`; response bodies
//! through `tee`), the in-memory log of exchanges, and
//! turning that log into files ([`parse`] → [`build`] → [`write`](mod@write), through [`privacy`]).
//! Bytes are forwarded as they arrive (each body frame or WebSocket message is passed on
//! before it is looked at); the client's `Authorization` header is forwarded and never kept.
//! Also owns the proxy's bounds ([`Bounds`]: request body size, header-read time) and the
//! stop: every exchange still in flight is ended and logged as interrupted, never dropped.
//! Does not own: the scenario schema (`scenario`), the results contract (`store`).

pub mod build;
pub mod live;
pub mod parse;
pub mod privacy;
mod relay;
mod reqbody;
mod tee;
mod upstream;
pub mod write;
mod ws;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::vocab::{BaseUrl, WireProtocol};

/// One request and its response as the proxy saw them. Held in memory only: the request
/// body may hold secrets, so nothing of it is written before [`privacy`] has been applied,
/// and request headers are not kept at all.
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    /// Downstream connection number (from 1).
    pub conn: u64,
    /// Index of this request on its connection (0 = the first).
    pub conn_request: u32,
    /// The downstream protocol.
    pub wire: WireProtocol,
    /// Request path as the client sent it (`/v1/responses`).
    pub path: String,
    /// The request body (HTTP) or the `response.create` message (WebSocket).
    pub body: Bytes,
    /// The request head (HTTP) or message (WebSocket) arrived at the proxy.
    pub start_ns: u64,
    /// The request was handed to the upstream connection.
    pub sent_ns: u64,
    /// Upstream response status (101 for WebSocket exchanges).
    pub status: Option<u16>,
    /// The upstream response head arrived.
    pub headers_ns: Option<u64>,
    /// Response body frames (SSE/JSON) or server messages (WebSocket), with arrival stamps.
    pub chunks: Vec<(u64, Bytes)>,
    /// The last byte (or terminal event) arrived.
    pub end_ns: u64,
    /// The exchange broke (upstream error, client gone).
    pub error: Option<String>,
    /// Request head bytes as forwarded (HTTP/1.1 text size; 0 for WebSocket messages).
    pub head_sent: u64,
    /// Response head bytes (HTTP/1.1 text size; 0 for WebSocket messages).
    pub head_received: u64,
    /// The response body came without a length (chunked on HTTP/1.1: framing counted).
    pub chunked: bool,
}

/// What `spark-bench record` was asked for.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where requests go.
    pub upstream: BaseUrl,
}

/// The largest request body (HTTP) or client WebSocket message the proxy carries: 32 MiB.
pub const MAX_REQUEST_BODY: u64 = 32 << 20;

/// How long a client may take to send a request head (and the protocol preface) before the
/// proxy disconnects it; also how long an idle keep-alive connection is kept.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the stop waits for the exchanges it interrupted to reach the log.
const STOP_DRAIN: Duration = Duration::from_secs(2);

/// What the proxy holds and waits for, at most.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// A client that has not sent a whole request head this long after the connection
    /// opened (or its previous response ended) is disconnected.
    pub header_timeout: Duration,
    /// A request body (or client WebSocket message) over this many bytes is refused with
    /// 413 and never reaches the upstream in full.
    pub max_request_body: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            header_timeout: HEADER_TIMEOUT,
            max_request_body: MAX_REQUEST_BODY,
        }
    }
}

/// State every connection shares.
pub(crate) struct Shared {
    pub upstream: BaseUrl,
    pub clock: Clock,
    pub log: mpsc::UnboundedSender<Exchange>,
    pub bounds: Bounds,
    /// Turns true when the recording stops: every connection ends its exchanges.
    pub stop: tokio::sync::watch::Receiver<bool>,
    conns: AtomicU64,
}

impl Shared {
    /// Completes when the recording stops.
    pub async fn stopped(&self) {
        let mut rx = self.stop.clone();
        let _ = rx.wait_for(|s| *s).await;
    }

    fn next_conn(&self) -> u64 {
        self.conns.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The upstream path for a downstream one: `/v1/X` → `{upstream prefix}/X`.
    pub fn upstream_path(&self, path_and_query: &str) -> String {
        let rest = path_and_query
            .strip_prefix("/v1")
            .filter(|r| r.is_empty() || r.starts_with('/') || r.starts_with('?'))
            .unwrap_or(path_and_query);
        format!("{}{rest}", self.upstream.prefix)
    }
}

/// The exchanges of a finished recording, in arrival order, and the clock they are on.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Every exchange, ordered by `start_ns`.
    pub exchanges: Vec<Exchange>,
    /// Downstream connections accepted.
    pub connections: u64,
}

/// Runs the proxy on `listener` until `stop` completes, then returns what it saw, with the
/// default [`Bounds`].
pub async fn record(
    listener: TcpListener,
    config: Config,
    clock: Clock,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<Recording> {
    record_with(listener, config, Bounds::default(), clock, stop).await
}

/// [`record`] with explicit bounds. When `stop` fires, exchanges still in flight are ended
/// (their connections closed) and kept, marked as interrupted.
pub async fn record_with(
    listener: TcpListener,
    config: Config,
    bounds: Bounds,
    clock: Clock,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<Recording> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        upstream: config.upstream,
        clock,
        log: tx,
        bounds,
        stop: stop_rx,
        conns: AtomicU64::new(0),
    });
    let mut exchanges = Vec::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(x) = rx.recv() => exchanges.push(x),
            accepted = listener.accept() => {
                let Ok((tcp, _peer)) = accepted else { continue };
                let shared = shared.clone();
                tokio::spawn(relay::serve_connection(tcp, shared));
            }
        }
    }
    // End every connection; each logs what it had in flight, then drops its sender.
    let _ = stop_tx.send(true);
    let connections = shared.conns.load(Ordering::Relaxed);
    drop(shared);
    let drain = tokio::time::sleep(STOP_DRAIN);
    tokio::pin!(drain);
    loop {
        tokio::select! {
            x = rx.recv() => match x {
                Some(x) => exchanges.push(x),
                None => break,
            },
            _ = &mut drain => break,
        }
    }
    while let Ok(x) = rx.try_recv() {
        exchanges.push(x);
    }
    exchanges.sort_by_key(|x| (x.start_ns, x.conn));
    Ok(Recording {
        exchanges,
        connections,
    })
}

/// The base URL an agent should use for a proxy listening on `addr`.
pub fn base_url(addr: SocketAddr) -> String {
    format!("http://{addr}/v1")
}

/// What a finished recording wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Written {
    /// The scenario file (`--out`; every session in it).
    pub scenarios: Vec<std::path::PathBuf>,
    /// The live session's results directory (None when nothing was recorded).
    pub results: Option<std::path::PathBuf>,
    /// Sessions found.
    pub sessions: usize,
    /// Requests recorded (warm-ups included).
    pub requests: usize,
    /// Of which failed.
    pub failed: usize,
    /// Turns and tool calls of the first session.
    pub turns: usize,
    /// Tool calls of the first session.
    pub tool_calls: usize,
}

/// Writes a recording: `out` (every session: session 1 as `[[turns]]`, the others as
/// `[[sessions]]`), and the live results directory under `results_root`.
pub fn finish(
    rec: &Recording,
    name: &str,
    upstream: &str,
    out: &std::path::Path,
    results_root: &std::path::Path,
    pv: &privacy::Privacy,
    command_line: &[String],
) -> anyhow::Result<Written> {
    let mut all = build::sessions(&rec.exchanges);
    // A session with no turn (only warm-ups), or a turn with no prompt (a refused or
    // unreadable request), has nothing to replay, but its requests are rows of the live
    // session: those sessions go last, after `sessions`.
    let replays =
        |s: &build::Session| !s.turns.is_empty() && s.turns.iter().all(|t| !t.prompt.is_empty());
    all.sort_by_key(|s| !replays(s));
    let replayable = all.iter().take_while(|s| replays(s)).count();
    let sessions = &all[..replayable];
    let mut written = Written {
        scenarios: Vec::new(),
        results: None,
        sessions: sessions.len(),
        requests: rec.exchanges.len(),
        failed: 0,
        turns: sessions.first().map_or(0, |s| s.turns.len()),
        tool_calls: sessions
            .first()
            .map_or(0, |s| s.turns.iter().map(|t| t.calls.len()).sum()),
    };
    if sessions.is_empty() {
        return Ok(written);
    }
    let concurrency = build::peak_concurrency(sessions);
    let first_text = write::scenario_toml(
        &write::ScenarioOut {
            name,
            upstream,
            sessions,
            concurrency,
        },
        pv,
    );
    let path = out.to_path_buf();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, &first_text)
        .map_err(|e| anyhow::anyhow!("cannot write the scenario {}: {e}", path.display()))?;
    written.scenarios.push(path);
    let (reqs, _) = write::records(&all, pv);
    written.failed = reqs.iter().filter(|r| !r.is_ok()).count();
    written.results = Some(write::results_dir(
        results_root,
        out,
        &first_text,
        &all,
        pv,
        command_line,
    )?);
    Ok(written)
}
