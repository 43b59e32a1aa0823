//! One record per request: the contract between the driver (which fills it from transport
//! timestamps) and everything downstream (histograms, CSV, reports, the gate).
//!
//! Owns: the `RequestRecord` and `SessionRecord` types and the metric definitions derived
//! from a record (TTFT, ITL, TPOT, E2E, overhead, the server's and the transport's parts of
//! TTFT and TPOT, the token rates), with the one rule for
//! rates over spans too short to resolve ([`MIN_RATE_SPAN_NS`], [`rate_tok_s`]); the enums
//! they hold are in [`kinds`](super::kinds). Pure: no clocks, no I/O.
//!
//! All timestamps are `u64` nanoseconds since the run's monotonic origin (the `Instant`
//! taken when the run started); they were taken by the transport when the bytes arrived,
//! before any JSON parsing. Durations of connection phases are nanoseconds too.

use serde::{Deserialize, Serialize};

use super::kinds::{
    Chaining, OutcomeKind, OverheadSource, RequestKind, TokenSource, TransportKind, WireProtocol,
};

/// The shortest span, ns, a per-request token rate (`decode_tok_s`, `output_tok_s`) is
/// divided by; below it the rate is not defined for that request ([`rate_tok_s`] gives
/// `None`), so no infinite or 1e9-scale value reaches a histogram, a mean or a gate row.
///
/// Why 50 µs: arrival stamps are taken once per read, so every chunk that arrived in the same
/// read shares one stamp and a span of 0 means "same read", not "infinitely fast". Reads a
/// few microseconds apart are the kernel and the reader's scheduling splitting one burst, not
/// the server producing tokens: the fastest decode we simulate (the `fast` simulator
/// profile, 20 000 tok/s per request, several times the few thousand tok/s that the fastest
/// published per-request decodes reach) spends 50 µs on one token, so a span under 50 µs cannot hold even one measured token
/// interval; what it measures is read coalescing and scheduling. Such a request is counted (the cell's
/// `rate_span_unresolved` in `summary.json`), never silently dropped.
///
/// TPOT and ITL are times, not rates: a TPOT or gap of 0 ns is a real measurement ("all at
/// once") and stays finite, so they keep every sample and this rule does not apply to them.
pub const MIN_RATE_SPAN_NS: u64 = 50_000;

/// `tokens` per second over `span_ns`: `None` when there are no tokens or the span is below
/// [`MIN_RATE_SPAN_NS`] (a span exactly at the floor is resolved).
pub fn rate_tok_s(tokens: u64, span_ns: u64) -> Option<f64> {
    (tokens > 0 && span_ns >= MIN_RATE_SPAN_NS).then(|| tokens as f64 * 1e9 / span_ns as f64)
}

/// One content chunk: when its bytes arrived and how many tokens it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// Arrival, ns since run start.
    pub at_ns: u64,
    /// Tokens in this chunk: from cumulative server usage when the server sends it per chunk,
    /// otherwise the final usage apportioned by text length, otherwise 1.
    pub tokens: u32,
    /// Content bytes (UTF-8 text of the delta).
    pub text_bytes: u32,
}

/// Server-reported timing, when the server sends any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerTiming {
    /// Where it came from: `websocket-timing`, `openai-processing-ms`, `cerebras-time-info`,
    /// `llamacpp-timings`, `groq-usage`.
    pub source: String,
    /// Server time from request receipt to the first token (queue + prefill + API work), ms.
    pub ttft_ms: Option<f64>,
    /// Server time for the whole request, ms.
    pub total_ms: Option<f64>,
    /// API time outside the engine, ms (`responses_duration_excl_engine…`).
    pub api_overhead_ms: Option<f64>,
    /// Queueing time, ms.
    pub queue_ms: Option<f64>,
}

/// One request, as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RequestRecord {
    /// Sequence number in the run (dispatch order).
    pub id: u64,
    /// Target name (`sim-wafer`, `openai`, …).
    pub target: String,
    /// How the request travelled.
    pub transport: TransportKind,
    /// Session index within its cell.
    pub session: u32,
    /// The scenario turn the request belongs to (0-based, after `repeat`): the same on every
    /// transport for the same step, since a WebSocket warm-up and an agent loop's tool-result
    /// requests carry the turn they serve.
    pub turn: u32,
    /// Request index within its session (0-based, counting every request: warm-ups and tool
    /// results too).
    #[serde(default)]
    pub request: u32,
    /// Request index within its turn: 0 for the user's request (and a warm-up), 1, 2, … for
    /// the tool-result requests of an agent loop.
    #[serde(default)]
    pub step: u32,
    /// What the request was.
    pub kind: RequestKind,
    /// True for warm-up sessions: recorded, excluded from statistics.
    pub warmup: bool,
    /// How history was sent.
    pub chaining: Chaining,
    /// The server's response id (`resp_…`, `chatcmpl-…`), for matching ground truth.
    pub response_id: Option<String>,

    /// When the request was meant to be sent (coordinated-omission origin), ns.
    pub intended_ns: u64,
    /// When the driver started on it (connection checkout begins), ns.
    pub dispatch_ns: u64,
    /// DNS resolution, ns duration; None when not resolved on this request.
    pub dns_ns: Option<u64>,
    /// TCP connect (including the emulated SYN round trip), ns duration; None on a reused connection.
    pub tcp_connect_ns: Option<u64>,
    /// HTTP proxy `CONNECT` tunnel set-up (request to `200` answer), ns duration; None when no
    /// proxy was used or the connection was reused.
    #[serde(default)]
    pub proxy_connect_ns: Option<u64>,
    /// TLS handshake, ns duration; None on a reused or plaintext connection.
    pub tls_handshake_ns: Option<u64>,
    /// WebSocket upgrade, ns duration; only on the request that paid for it.
    pub ws_upgrade_ns: Option<u64>,
    /// Request fully written to the socket, ns.
    pub request_written_ns: Option<u64>,
    /// Response headers received (HTTP), ns.
    pub response_headers_ns: Option<u64>,
    /// First protocol event (SSE event or WS frame) received, ns.
    pub first_event_ns: Option<u64>,
    /// First content token received, ns.
    pub first_token_ns: Option<u64>,
    /// Last content token received, ns.
    pub last_token_ns: Option<u64>,
    /// Terminal event or stream close, ns.
    pub end_ns: Option<u64>,
    /// Every content chunk.
    pub chunks: Vec<Chunk>,

    /// True when the request ran on a connection opened for an earlier request.
    pub connection_reused: bool,
    /// Identifies the connection within the run.
    pub connection_id: u64,
    /// How many times the request was sent again on a fresh connection because the reused
    /// connection it was first written to had been closed by the server with proof that no
    /// server application read it (reset, handed back unwritten, HTTP/2 `REFUSED_STREAM`).
    /// The connection phases are the fresh connection's.
    #[serde(default)]
    pub reconnects: u32,
    /// `HTTP/1.1`, `HTTP/2` or `WebSocket`.
    pub protocol: WireProtocol,
    /// Negotiated ALPN protocol, when TLS was used.
    pub alpn: Option<String>,
    /// Request bytes written (headers + body, or the WS frame payload).
    pub bytes_sent: u64,
    /// Response bytes read (headers + body, or WS frame payloads).
    pub bytes_received: u64,

    /// Input tokens (server usage), when reported.
    pub input_tokens: Option<u32>,
    /// Cached input tokens (server usage), when reported.
    pub cached_input_tokens: Option<u32>,
    /// Output tokens.
    pub output_tokens: u32,
    /// Where `output_tokens` came from.
    pub token_source: TokenSource,
    /// Tool calls the model made in this response.
    pub tool_calls: u32,
    /// Server-reported timing, when present.
    pub server_timing: Option<ServerTiming>,

    /// How it ended.
    pub outcome: OutcomeKind,
    /// HTTP status when not 2xx (or the WS error envelope's status).
    pub http_status: Option<u16>,
    /// Human-readable failure detail.
    pub error: Option<String>,
    /// How long the request waited for a concurrency slot after its intended start (the
    /// first request of an open-loop session that found every slot taken), ns; part of its
    /// dispatch lag, but the load's doing, not the harness's. Not a `requests.csv` column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_wait_ns: Option<u64>,
    /// Content chunks past the per-request cap (`transport::limits::CHUNKS_KEPT`): counted
    /// here and in the chunk totals, not kept in `chunks` (nor `chunks.csv`); the last one's
    /// time is `last_token_ns` and `output_tokens` counts their tokens. Not a
    /// `requests.csv` column.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chunks_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One session (a scripted conversation) as it ran: written to `sessions.csv` and the
/// source of the `session_wall` metric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SessionRecord {
    /// Target name.
    pub target: String,
    /// The cell's transport.
    pub transport: TransportKind,
    /// Session index within its cell (warm-up sessions first).
    pub session: u32,
    /// True for warm-up sessions: recorded, excluded from statistics.
    pub warmup: bool,
    /// Intended start of the session's first request, ns since run start.
    pub start_ns: u64,
    /// End of the session's last request, ns since run start.
    pub end_ns: u64,
    /// Requests the session sent.
    pub requests: u32,
    /// Requests that did not end `ok` (cancelled ones included).
    pub failed: u32,
    /// True when the run was stopped (Ctrl-C) before the session's last turn: its wall time
    /// is not a session time, so it is kept out of `session_wall`.
    #[serde(default)]
    pub interrupted: bool,
}

impl RequestRecord {
    /// True when the request completed and counts towards latency statistics.
    pub fn is_ok(&self) -> bool {
        self.outcome == OutcomeKind::Ok
    }

    /// TTFT from the intended start (includes any client-side queueing), ns.
    pub fn ttft_ns(&self) -> Option<u64> {
        self.first_token_ns
            .map(|t| t.saturating_sub(self.intended_ns))
    }

    /// End-to-end latency from the intended start to the last content token, ns.
    pub fn e2e_ns(&self) -> Option<u64> {
        self.last_token_ns
            .or(self.end_ns)
            .map(|t| t.saturating_sub(self.intended_ns))
    }

    /// Dispatch lag: how late the driver started the request, ns.
    pub fn dispatch_lag_ns(&self) -> u64 {
        self.dispatch_ns.saturating_sub(self.intended_ns)
    }

    /// Gaps between consecutive content chunks (inter-chunk latency), ns.
    pub fn itl_ns(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks
            .windows(2)
            .map(|w| w[1].at_ns.saturating_sub(w[0].at_ns))
    }

    /// Time per output token after the first: (last − first) / (tokens − 1), ns.
    pub fn tpot_ns(&self) -> Option<f64> {
        let (f, l) = (self.first_token_ns?, self.last_token_ns?);
        (self.output_tokens > 1).then(|| (l - f) as f64 / (self.output_tokens - 1) as f64)
    }

    /// Decode rate in tokens/s: tokens after the first chunk over the first→last span.
    /// `None` when no token followed the first chunk, or when the span is below
    /// [`MIN_RATE_SPAN_NS`] (e.g. the whole stream arrived in one read).
    pub fn decode_tok_s(&self) -> Option<f64> {
        let (f, l) = (self.first_token_ns?, self.last_token_ns?);
        let first_chunk = self.chunks.first()?.tokens;
        let after = self.output_tokens.checked_sub(first_chunk)?;
        rate_tok_s(u64::from(after), l.saturating_sub(f))
    }

    /// Output tokens per second over the whole request (from the intended start to the last
    /// token). `None` without tokens or when that span is below [`MIN_RATE_SPAN_NS`].
    pub fn output_tok_s(&self) -> Option<f64> {
        rate_tok_s(u64::from(self.output_tokens), self.e2e_ns()?)
    }

    /// True when [`MIN_RATE_SPAN_NS`] withheld one of this request's rates: it had more than
    /// one content chunk (`chunks`, counted or listed) but its first→last token span is below
    /// the floor, or it had output tokens but its E2E is below the floor. Row-only readers
    /// (which count chunks without listing them) get the same answer as record readers.
    pub fn rate_span_unresolved(&self, chunks: u64) -> bool {
        let short = |span: Option<u64>| span.is_some_and(|s| s < MIN_RATE_SPAN_NS);
        let decode_span = self
            .first_token_ns
            .zip(self.last_token_ns)
            .map(|(f, l)| l.saturating_sub(f));
        (chunks > 1 && short(decode_span)) || (self.output_tokens > 0 && short(self.e2e_ns()))
    }

    /// Connection setup paid by this request (DNS + TCP + proxy tunnel + TLS + WS upgrade), ns.
    pub fn connection_setup_ns(&self) -> u64 {
        [
            self.dns_ns,
            self.tcp_connect_ns,
            self.proxy_connect_ns,
            self.tls_handshake_ns,
            self.ws_upgrade_ns,
        ]
        .iter()
        .flatten()
        .sum()
    }

    /// Round-trip overhead, ns, and where it came from: client-observed TTFT (from dispatch)
    /// minus the server-reported TTFT when the server reports one; otherwise the time from
    /// dispatch to the first protocol event.
    pub fn overhead_ns(&self) -> Option<(u64, OverheadSource)> {
        let first_token = self.first_token_ns?;
        if let Some(server_ttft) = self.server_timing.as_ref().and_then(|s| s.ttft_ms) {
            let client = first_token.saturating_sub(self.dispatch_ns) as f64;
            let o = (client - server_ttft * 1e6).max(0.0);
            return Some((o as u64, OverheadSource::ServerTiming));
        }
        let fe = self.first_event_ns?;
        Some((
            fe.saturating_sub(self.dispatch_ns),
            OverheadSource::FirstEventEstimate,
        ))
    }

    /// The server's TTFT as it reported it in-band (`server_timing.ttft_ms`), ns; `None`
    /// when it reported none (or a negative or non-finite one).
    pub fn server_ttft_ns(&self) -> Option<u64> {
        let ms = self.server_timing.as_ref()?.ttft_ms?;
        (ms.is_finite() && ms >= 0.0).then(|| (ms * 1e6).round() as u64)
    }

    /// The server's decode time per output token after the first, ns:
    /// `(total_ms − ttft_ms) / (output_tokens − 1)` when the server reported both and the
    /// request had at least two tokens.
    pub fn server_tpot_ns(&self) -> Option<f64> {
        let t = self.server_timing.as_ref()?;
        let (ttft, total) = (t.ttft_ms?, t.total_ms?);
        let decode_ms = total - ttft;
        (self.output_tokens > 1 && decode_ms.is_finite() && decode_ms >= 0.0)
            .then(|| decode_ms * 1e6 / f64::from(self.output_tokens - 1))
    }

    /// Per-token transport/client time, ns: client TPOT ([`RequestRecord::tpot_ns`]) minus
    /// the server's ([`RequestRecord::server_tpot_ns`]). Clamped at 0 like
    /// [`RequestRecord::overhead_ns`]: histograms hold `u64`, and a client that saw the
    /// tokens closer together than the server timed them (the server stamped its writes
    /// before they were flushed) has no per-token transport time to report.
    pub fn tpot_overhead_ns(&self) -> Option<u64> {
        let (client, server) = (self.tpot_ns()?, self.server_tpot_ns()?);
        let d = client - server;
        d.is_finite().then(|| d.max(0.0).round() as u64)
    }

    /// Mean tokens per content chunk (a batching / speculative-decoding signature).
    pub fn tokens_per_chunk(&self) -> Option<f64> {
        let n = self.chunks.len() as u64 + self.chunks_dropped;
        (n > 0).then(|| self.output_tokens as f64 / n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> RequestRecord {
        RequestRecord {
            intended_ns: 1_000,
            dispatch_ns: 2_000,
            first_event_ns: Some(50_000),
            first_token_ns: Some(100_000),
            last_token_ns: Some(400_000),
            output_tokens: 4,
            chunks: vec![
                Chunk {
                    at_ns: 100_000,
                    tokens: 1,
                    text_bytes: 3,
                },
                Chunk {
                    at_ns: 200_000,
                    tokens: 2,
                    text_bytes: 6,
                },
                Chunk {
                    at_ns: 400_000,
                    tokens: 1,
                    text_bytes: 3,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn metric_definitions() {
        let r = rec();
        assert_eq!(r.ttft_ns(), Some(99_000));
        assert_eq!(r.e2e_ns(), Some(399_000));
        assert_eq!(r.itl_ns().collect::<Vec<_>>(), vec![100_000, 200_000]);
        assert_eq!(r.tpot_ns(), Some(100_000.0));
        assert_eq!(r.decode_tok_s(), Some(3.0 * 1e9 / 300_000.0));
        assert_eq!(r.dispatch_lag_ns(), 1_000);
        assert_eq!(
            r.overhead_ns(),
            Some((48_000, OverheadSource::FirstEventEstimate))
        );
        let mut s = r.clone();
        s.server_timing = Some(ServerTiming {
            ttft_ms: Some(0.05),
            ..Default::default()
        });
        assert_eq!(
            s.overhead_ns(),
            Some((48_000, OverheadSource::ServerTiming))
        );
        // Without a total, no server TPOT; with one: (0.26 − 0.05) ms / 3 tokens = 70 µs.
        assert_eq!(s.server_ttft_ns(), Some(50_000));
        assert_eq!((s.server_tpot_ns(), s.tpot_overhead_ns()), (None, None));
        s.server_timing.as_mut().unwrap().total_ms = Some(0.26);
        assert_eq!(s.server_tpot_ns().map(|v| v.round()), Some(70_000.0));
        assert_eq!(s.tpot_overhead_ns(), Some(30_000));
        // A server slower than the client saw: clamped at 0.
        s.server_timing.as_mut().unwrap().total_ms = Some(0.5);
        assert_eq!(s.tpot_overhead_ns(), Some(0));
        assert_eq!(r.server_ttft_ns(), None);
    }

    #[test]
    fn rates_below_the_span_floor_are_not_defined() {
        let floor = MIN_RATE_SPAN_NS;
        assert_eq!(rate_tok_s(3, floor - 1), None);
        assert_eq!(rate_tok_s(3, floor), Some(3.0 * 1e9 / floor as f64));
        assert_eq!(
            rate_tok_s(3, floor + 1),
            Some(3.0 * 1e9 / (floor + 1) as f64)
        );
        assert_eq!(rate_tok_s(0, floor), None);
        assert_eq!(rate_tok_s(3, 0), None);
        // The decode span of `rec()` set just below / at / above the floor.
        let at = |span: u64| {
            let mut r = rec();
            r.last_token_ns = Some(100_000 + span);
            r
        };
        let below = at(floor - 1);
        assert_eq!(below.decode_tok_s(), None);
        assert!(below.rate_span_unresolved(3));
        assert!(
            !below.rate_span_unresolved(1),
            "one chunk: no decode span to resolve"
        );
        // TPOT is a time: 0-ish spans stay real, finite measurements.
        assert_eq!(below.tpot_ns(), Some((floor - 1) as f64 / 3.0));
        let exact = at(floor);
        assert_eq!(exact.decode_tok_s(), Some(3.0 * 1e9 / floor as f64));
        assert!(!exact.rate_span_unresolved(3));
        let above = at(floor + 1);
        assert_eq!(above.decode_tok_s(), Some(3.0 * 1e9 / (floor + 1) as f64));
        // Same read: every chunk shares one stamp.
        let mut same = rec();
        same.last_token_ns = same.first_token_ns;
        assert_eq!(same.decode_tok_s(), None);
        assert_eq!(same.tpot_ns(), Some(0.0));
        assert!(same.output_tok_s().is_some_and(f64::is_finite));
        // E2E below the floor withholds output_tok_s too.
        let mut quick = rec();
        quick.intended_ns = 100_000 - (floor - 1);
        quick.last_token_ns = Some(100_000);
        assert_eq!(quick.output_tok_s(), None);
        assert!(quick.rate_span_unresolved(1));
    }
}
