//! CSV row types: `requests.csv`, `chunks.csv`, `sessions.csv`. The field docs are the
//! column docs.
//!
//! Owns: the columns and their order, and the conversions between records and rows.

use serde::{Deserialize, Serialize};

use crate::vocab::{
    Chaining, Chunk, OutcomeKind, OverheadSource, RequestKind, RequestRecord, ServerTiming,
    SessionRecord, TokenSource, TransportKind, WireProtocol,
};

/// The columns of `requests.csv`, in order (the fields of [`RequestRow`]).
pub const REQUEST_COLUMNS: &[&str] = &[
    "id",
    "target",
    "transport",
    "session",
    "turn",
    "request",
    "step",
    "kind",
    "warmup",
    "chaining",
    "response_id",
    "intended_ns",
    "dispatch_ns",
    "dns_ns",
    "tcp_connect_ns",
    "proxy_connect_ns",
    "tls_handshake_ns",
    "ws_upgrade_ns",
    "request_written_ns",
    "response_headers_ns",
    "first_event_ns",
    "first_token_ns",
    "last_token_ns",
    "end_ns",
    "connection_reused",
    "connection_id",
    "reconnects",
    "protocol",
    "alpn",
    "bytes_sent",
    "bytes_received",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "token_source",
    "tool_calls",
    "server_timing_source",
    "server_ttft_ms",
    "server_total_ms",
    "server_api_overhead_ms",
    "server_queue_ms",
    "outcome",
    "http_status",
    "error",
    "ttft_ns",
    "e2e_ns",
    "tpot_ns",
    "overhead_ns",
    "overhead_source",
    "chunk_count",
    "shard",
];

/// The columns of `chunks.csv`, in order (the fields of [`ChunkRow`]).
pub const CHUNK_COLUMNS: &[&str] = &["request_id", "index", "at_ns", "tokens", "text_bytes"];

/// The columns of `sessions.csv`, in order (the fields of [`SessionRow`]).
pub const SESSION_COLUMNS: &[&str] = &[
    "target",
    "transport",
    "session",
    "warmup",
    "start_ns",
    "end_ns",
    "requests",
    "failed",
    "interrupted",
    "wall_ns",
    "shard",
];

/// One row of `requests.csv`: every scalar field of [`RequestRecord`] (times in ns since run
/// start, durations in ns; empty cells for "none"), the flattened server timing, and derived
/// columns. Chunks are in `chunks.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    /// Sequence number in the run (dispatch order).
    pub id: u64,
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: TransportKind,
    /// Session index within its cell.
    pub session: u32,
    /// The scenario turn the request belongs to (the same on every transport).
    pub turn: u32,
    /// Request index within its session (every request counted; absent in older runs).
    #[serde(default)]
    pub request: u32,
    /// Request index within its turn (0 = the user's request or a warm-up; absent in older
    /// runs).
    #[serde(default)]
    pub step: u32,
    /// `user`, `tool-result` or `warmup`.
    pub kind: RequestKind,
    /// True for warm-up sessions (excluded from statistics).
    pub warmup: bool,
    /// `full-history` or `previous-response-id`.
    pub chaining: Chaining,
    /// Server response id.
    pub response_id: Option<String>,
    /// Intended send time (coordinated-omission origin), ns.
    pub intended_ns: u64,
    /// Dispatch time, ns.
    pub dispatch_ns: u64,
    /// DNS duration, ns.
    pub dns_ns: Option<u64>,
    /// TCP connect duration, ns (empty on a reused connection).
    pub tcp_connect_ns: Option<u64>,
    /// Proxy `CONNECT` tunnel duration, ns (empty without a proxy or on a reused connection;
    /// absent in older runs).
    #[serde(default)]
    pub proxy_connect_ns: Option<u64>,
    /// TLS handshake duration, ns.
    pub tls_handshake_ns: Option<u64>,
    /// WebSocket upgrade duration, ns.
    pub ws_upgrade_ns: Option<u64>,
    /// Request fully written, ns.
    pub request_written_ns: Option<u64>,
    /// Response headers received, ns.
    pub response_headers_ns: Option<u64>,
    /// First protocol event, ns.
    pub first_event_ns: Option<u64>,
    /// First content token, ns.
    pub first_token_ns: Option<u64>,
    /// Last content token, ns.
    pub last_token_ns: Option<u64>,
    /// Terminal event or close, ns.
    pub end_ns: Option<u64>,
    /// Ran on a connection opened earlier.
    pub connection_reused: bool,
    /// Connection id within the run.
    pub connection_id: u64,
    /// Times the request was re-sent on a fresh connection (absent in older runs).
    #[serde(default)]
    pub reconnects: u32,
    /// `HTTP/1.1`, `HTTP/2` or `WebSocket`.
    pub protocol: WireProtocol,
    /// Negotiated ALPN.
    pub alpn: Option<String>,
    /// Request bytes written.
    pub bytes_sent: u64,
    /// Response bytes read.
    pub bytes_received: u64,
    /// Input tokens (server usage).
    pub input_tokens: Option<u32>,
    /// Cached input tokens (server usage).
    pub cached_input_tokens: Option<u32>,
    /// Output tokens.
    pub output_tokens: u32,
    /// `server-usage` or `chunk-count`.
    pub token_source: TokenSource,
    /// Tool calls the model made.
    pub tool_calls: u32,
    /// Server timing source (`websocket-timing`, `openai-processing-ms`, …); empty when the
    /// server reported none.
    pub server_timing_source: Option<String>,
    /// Server TTFT, ms.
    pub server_ttft_ms: Option<f64>,
    /// Server total time, ms.
    pub server_total_ms: Option<f64>,
    /// Server API overhead outside the engine, ms.
    pub server_api_overhead_ms: Option<f64>,
    /// Server queueing, ms.
    pub server_queue_ms: Option<f64>,
    /// `ok`, `http-status`, `connect-error`, `tls-error`, `upgrade-error`, `timeout`,
    /// `truncated`, `stale-connection`, `server-error`, `protocol-error`, `cancelled`.
    pub outcome: OutcomeKind,
    /// HTTP status when not 2xx.
    pub http_status: Option<u16>,
    /// Failure detail.
    pub error: Option<String>,
    /// Derived: TTFT from the intended start, ns.
    pub ttft_ns: Option<u64>,
    /// Derived: end-to-end latency from the intended start, ns.
    pub e2e_ns: Option<u64>,
    /// Derived: time per output token after the first, ns (fractional).
    pub tpot_ns: Option<f64>,
    /// Derived: round-trip overhead, ns.
    pub overhead_ns: Option<u64>,
    /// Derived: `server-timing` or `first-event-estimate`.
    pub overhead_source: Option<OverheadSource>,
    /// Derived: number of content chunks (rows in `chunks.csv`).
    pub chunk_count: u32,
    /// The shard (`run --shard I/N`) that sent the request; empty for an unsharded run
    /// (and in older runs). After `merge`, every row names its shard.
    #[serde(default)]
    pub shard: Option<u32>,
}

impl From<&RequestRecord> for RequestRow {
    fn from(r: &RequestRecord) -> Self {
        let st = r.server_timing.as_ref();
        let overhead = r.overhead_ns();
        RequestRow {
            id: r.id,
            target: r.target.clone(),
            transport: r.transport,
            session: r.session,
            turn: r.turn,
            request: r.request,
            step: r.step,
            kind: r.kind,
            warmup: r.warmup,
            chaining: r.chaining,
            response_id: r.response_id.clone(),
            intended_ns: r.intended_ns,
            dispatch_ns: r.dispatch_ns,
            dns_ns: r.dns_ns,
            tcp_connect_ns: r.tcp_connect_ns,
            proxy_connect_ns: r.proxy_connect_ns,
            tls_handshake_ns: r.tls_handshake_ns,
            ws_upgrade_ns: r.ws_upgrade_ns,
            request_written_ns: r.request_written_ns,
            response_headers_ns: r.response_headers_ns,
            first_event_ns: r.first_event_ns,
            first_token_ns: r.first_token_ns,
            last_token_ns: r.last_token_ns,
            end_ns: r.end_ns,
            connection_reused: r.connection_reused,
            connection_id: r.connection_id,
            reconnects: r.reconnects,
            protocol: r.protocol,
            alpn: r.alpn.clone(),
            bytes_sent: r.bytes_sent,
            bytes_received: r.bytes_received,
            input_tokens: r.input_tokens,
            cached_input_tokens: r.cached_input_tokens,
            output_tokens: r.output_tokens,
            token_source: r.token_source,
            tool_calls: r.tool_calls,
            server_timing_source: st.map(|s| s.source.clone()),
            server_ttft_ms: st.and_then(|s| s.ttft_ms),
            server_total_ms: st.and_then(|s| s.total_ms),
            server_api_overhead_ms: st.and_then(|s| s.api_overhead_ms),
            server_queue_ms: st.and_then(|s| s.queue_ms),
            outcome: r.outcome,
            http_status: r.http_status,
            error: r.error.clone(),
            ttft_ns: r.ttft_ns(),
            e2e_ns: r.e2e_ns(),
            tpot_ns: r.tpot_ns(),
            overhead_ns: overhead.map(|(o, _)| o),
            overhead_source: overhead.map(|(_, s)| s),
            chunk_count: u32::try_from(r.chunks.len() as u64 + r.chunks_dropped)
                .unwrap_or(u32::MAX),
            shard: None,
        }
    }
}

impl RequestRow {
    /// Rebuilds the record from this row and its chunks (from `chunks.csv`), dropping the
    /// derived columns. A server timing with an empty source and no values reads back as
    /// `None` (CSV cannot tell them apart).
    pub fn into_record(self, chunks: Vec<Chunk>) -> RequestRecord {
        let any_timing = self.server_timing_source.is_some()
            || self.server_ttft_ms.is_some()
            || self.server_total_ms.is_some()
            || self.server_api_overhead_ms.is_some()
            || self.server_queue_ms.is_some();
        RequestRecord {
            id: self.id,
            target: self.target,
            transport: self.transport,
            session: self.session,
            turn: self.turn,
            request: self.request,
            step: self.step,
            kind: self.kind,
            warmup: self.warmup,
            chaining: self.chaining,
            response_id: self.response_id,
            intended_ns: self.intended_ns,
            dispatch_ns: self.dispatch_ns,
            dns_ns: self.dns_ns,
            tcp_connect_ns: self.tcp_connect_ns,
            proxy_connect_ns: self.proxy_connect_ns,
            tls_handshake_ns: self.tls_handshake_ns,
            ws_upgrade_ns: self.ws_upgrade_ns,
            request_written_ns: self.request_written_ns,
            response_headers_ns: self.response_headers_ns,
            first_event_ns: self.first_event_ns,
            first_token_ns: self.first_token_ns,
            last_token_ns: self.last_token_ns,
            end_ns: self.end_ns,
            chunks,
            connection_reused: self.connection_reused,
            connection_id: self.connection_id,
            reconnects: self.reconnects,
            protocol: self.protocol,
            alpn: self.alpn,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            input_tokens: self.input_tokens,
            cached_input_tokens: self.cached_input_tokens,
            output_tokens: self.output_tokens,
            token_source: self.token_source,
            tool_calls: self.tool_calls,
            server_timing: any_timing.then(|| ServerTiming {
                source: self.server_timing_source.unwrap_or_default(),
                ttft_ms: self.server_ttft_ms,
                total_ms: self.server_total_ms,
                api_overhead_ms: self.server_api_overhead_ms,
                queue_ms: self.server_queue_ms,
            }),
            outcome: self.outcome,
            http_status: self.http_status,
            error: self.error,
            // Not a column: the run's `harness` section in `summary.json` keeps what it meant.
            slot_wait_ns: None,
            chunks_dropped: 0,
        }
    }
}

/// One row of `chunks.csv`: one content chunk of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRow {
    /// `requests.csv` `id`.
    pub request_id: u64,
    /// Position within the request (0-based).
    pub index: u32,
    /// Arrival, ns since run start.
    pub at_ns: u64,
    /// Tokens in the chunk.
    pub tokens: u32,
    /// UTF-8 bytes of the chunk's text.
    pub text_bytes: u32,
}

impl ChunkRow {
    /// The chunk.
    pub fn chunk(&self) -> Chunk {
        Chunk {
            at_ns: self.at_ns,
            tokens: self.tokens,
            text_bytes: self.text_bytes,
        }
    }
}

/// One row of `sessions.csv`: a [`SessionRecord`] plus its wall time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRow {
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: TransportKind,
    /// Session index within its cell.
    pub session: u32,
    /// Warm-up session (excluded from statistics).
    pub warmup: bool,
    /// Intended start of the first request, ns since run start.
    pub start_ns: u64,
    /// End of the last request, ns since run start.
    pub end_ns: u64,
    /// Requests sent.
    pub requests: u32,
    /// Requests that did not end `ok`.
    pub failed: u32,
    /// Stopped by Ctrl-C before its last turn (excluded from session wall time).
    #[serde(default)]
    pub interrupted: bool,
    /// Derived: `end_ns − start_ns`.
    pub wall_ns: u64,
    /// The shard that ran the session (see [`RequestRow::shard`]).
    #[serde(default)]
    pub shard: Option<u32>,
}

impl From<&SessionRecord> for SessionRow {
    fn from(s: &SessionRecord) -> Self {
        SessionRow {
            target: s.target.clone(),
            transport: s.transport,
            session: s.session,
            warmup: s.warmup,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            requests: s.requests,
            failed: s.failed,
            interrupted: s.interrupted,
            wall_ns: s.end_ns.saturating_sub(s.start_ns),
            shard: None,
        }
    }
}

impl SessionRow {
    /// The record.
    pub fn into_record(self) -> SessionRecord {
        SessionRecord {
            target: self.target,
            transport: self.transport,
            session: self.session,
            warmup: self.warmup,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            requests: self.requests,
            failed: self.failed,
            interrupted: self.interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_of<T: Serialize>(row: T) -> String {
        let mut w = csv::WriterBuilder::new()
            .has_headers(true)
            .from_writer(Vec::new());
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        text.lines().next().unwrap().to_string()
    }

    #[test]
    fn every_requests_column_is_documented_in_the_readme() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        let section = readme
            .split("### `requests.csv` columns")
            .nth(1)
            .expect("README has a requests.csv columns section");
        let section = section.split("\n#").next().unwrap_or(section);
        let documented: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| "))
            .filter_map(|l| l.split(" | ").next())
            .collect();
        for c in REQUEST_COLUMNS {
            let name = format!("`{c}`");
            assert!(
                documented.iter().any(|d| d.split(", ").any(|n| n == name)),
                "README does not document the requests.csv column {name}"
            );
        }
    }

    #[test]
    fn column_lists_match_the_row_types() {
        assert_eq!(
            header_of(RequestRow::from(&RequestRecord::default())),
            REQUEST_COLUMNS.join(",")
        );
        assert_eq!(
            header_of(ChunkRow {
                request_id: 0,
                index: 0,
                at_ns: 0,
                tokens: 0,
                text_bytes: 0
            }),
            CHUNK_COLUMNS.join(",")
        );
        assert_eq!(
            header_of(SessionRow::from(&SessionRecord::default())),
            SESSION_COLUMNS.join(",")
        );
    }
}
