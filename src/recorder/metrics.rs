//! The metric catalogue: every histogram spark-bench keeps, with a stable name, the integer
//! unit it is stored in, the natural unit it is shown in, and how one record yields samples.
//!
//! Owns: metric names (they are file names under `histograms/` and keys in `summary.json`,
//! so they never change), storage scaling, and the per-record sample extraction.
//! Does not own: the metric definitions themselves (TTFT, TPOT, overhead, …), which live on
//! `RequestRecord` and are only called here.

use serde::{Deserialize, Serialize};

use crate::vocab::{RequestRecord, SessionRecord};

/// One measured quantity. Histograms store `u64`; see [`Metric::storage`] for the scaling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Time to first content token, from the intended start (includes client queueing), ns.
    Ttft,
    /// Time to first content token, from dispatch (service time only), ns.
    TtftDispatch,
    /// Gap between consecutive content chunks (one sample per gap), ns.
    Itl,
    /// Time per output token after the first, ns.
    Tpot,
    /// Intended start to last content token, ns.
    E2e,
    /// Round-trip overhead (see `RequestRecord::overhead_ns`), ns.
    Overhead,
    /// DNS + TCP + TLS + WebSocket upgrade, only for requests that paid any, ns.
    ConnectionSetup,
    /// How late the driver dispatched the request against its intended start, ns.
    DispatchLag,
    /// Dispatch to the first protocol event (SSE event or WS frame), ns.
    FirstEvent,
    /// Output tokens per second over the whole request; stored as milli-tokens/s.
    OutputTokS,
    /// Decode rate after the first chunk; stored as milli-tokens/s.
    DecodeTokS,
    /// Mean tokens per content chunk; stored ×1000.
    TokensPerChunk,
    /// Request bytes written, per request.
    BytesSent,
    /// Response bytes read, per request.
    BytesReceived,
    /// Session wall time, first request's intended start to last request's end, ns.
    SessionWall,
    /// Waterfall phase: DNS resolution, ns (0 when not resolved on this request).
    PhaseDns,
    /// Waterfall phase: TCP connect, ns (0 on a reused connection).
    PhaseTcp,
    /// Waterfall phase: TLS handshake, ns (0 on a reused or plaintext connection).
    PhaseTls,
    /// Waterfall phase: WebSocket upgrade, ns (0 except on the request that paid it).
    PhaseWsUpgrade,
    /// Waterfall phase: from the end of connection setup (or dispatch) to the request being
    /// fully written (pool checkout + upload), ns.
    PhaseRequestWrite,
    /// Waterfall phase: request written to the first response byte (headers, or the first
    /// WebSocket frame), ns.
    PhaseTtfb,
    /// Waterfall phase: first response byte to the first content token, ns.
    PhaseFirstToken,
    /// Waterfall phase: first to last content token, ns.
    PhaseDecode,
    /// The server's own TTFT as it reported it in-band (`RequestRecord::server_ttft_ns`), ns;
    /// only requests whose server reported one.
    ServerTtft,
    /// The server's own decode time per output token after the first
    /// (`RequestRecord::server_tpot_ns`), ns; only requests whose server reported it.
    ServerTpot,
    /// Per-token transport/client time: client TPOT minus server TPOT
    /// (`RequestRecord::tpot_overhead_ns`, clamped at 0), ns.
    TpotOverhead,
}

/// How a metric's `u64` histogram values relate to its natural unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Storage {
    /// Nanoseconds; shown in milliseconds.
    Nanos,
    /// Thousandths of the natural unit (milli-tokens/s, milli-tokens).
    Milli,
    /// The natural unit itself (bytes).
    Identity,
}

impl Metric {
    /// Every metric, in the order tables and files list them.
    pub const ALL: [Metric; 26] = [
        Metric::Ttft,
        Metric::TtftDispatch,
        Metric::Itl,
        Metric::Tpot,
        Metric::E2e,
        Metric::Overhead,
        Metric::ConnectionSetup,
        Metric::DispatchLag,
        Metric::FirstEvent,
        Metric::OutputTokS,
        Metric::DecodeTokS,
        Metric::TokensPerChunk,
        Metric::BytesSent,
        Metric::BytesReceived,
        Metric::SessionWall,
        Metric::PhaseDns,
        Metric::PhaseTcp,
        Metric::PhaseTls,
        Metric::PhaseWsUpgrade,
        Metric::PhaseRequestWrite,
        Metric::PhaseTtfb,
        Metric::PhaseFirstToken,
        Metric::PhaseDecode,
        Metric::ServerTtft,
        Metric::ServerTpot,
        Metric::TpotOverhead,
    ];

    /// The waterfall phases, in wire order. Every successful request contributes exactly one
    /// sample to each (0 for a phase it did not go through), so their means add up to the
    /// mean dispatch → last-token time, and a waterfall can be drawn from means alone.
    pub const PHASES: [Metric; 8] = [
        Metric::PhaseDns,
        Metric::PhaseTcp,
        Metric::PhaseTls,
        Metric::PhaseWsUpgrade,
        Metric::PhaseRequestWrite,
        Metric::PhaseTtfb,
        Metric::PhaseFirstToken,
        Metric::PhaseDecode,
    ];

    /// The stable name: histogram file stem and `summary.json` key.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::TtftDispatch => "ttft_dispatch",
            Metric::Itl => "itl",
            Metric::Tpot => "tpot",
            Metric::E2e => "e2e",
            Metric::Overhead => "overhead",
            Metric::ConnectionSetup => "connection_setup",
            Metric::DispatchLag => "dispatch_lag",
            Metric::FirstEvent => "first_event",
            Metric::OutputTokS => "output_tok_s",
            Metric::DecodeTokS => "decode_tok_s",
            Metric::TokensPerChunk => "tokens_per_chunk",
            Metric::BytesSent => "bytes_sent",
            Metric::BytesReceived => "bytes_received",
            Metric::SessionWall => "session_wall",
            Metric::PhaseDns => "phase_dns",
            Metric::PhaseTcp => "phase_tcp",
            Metric::PhaseTls => "phase_tls",
            Metric::PhaseWsUpgrade => "phase_ws_upgrade",
            Metric::PhaseRequestWrite => "phase_request_write",
            Metric::PhaseTtfb => "phase_ttfb",
            Metric::PhaseFirstToken => "phase_first_token",
            Metric::PhaseDecode => "phase_decode",
            Metric::ServerTtft => "server_ttft",
            Metric::ServerTpot => "server_tpot",
            Metric::TpotOverhead => "tpot_overhead",
        }
    }

    /// Parses a stable name; `None` for anything else.
    pub fn from_name(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s)
    }

    /// How histogram values are scaled.
    pub fn storage(self) -> Storage {
        match self {
            Metric::OutputTokS | Metric::DecodeTokS | Metric::TokensPerChunk => Storage::Milli,
            Metric::BytesSent | Metric::BytesReceived => Storage::Identity,
            _ => Storage::Nanos,
        }
    }

    /// The unit histogram values are stored in: `ns`, `mtok/s`, `mtok`, `bytes`.
    pub fn stored_unit(self) -> &'static str {
        match self {
            Metric::OutputTokS | Metric::DecodeTokS => "mtok/s",
            Metric::TokensPerChunk => "mtok",
            Metric::BytesSent | Metric::BytesReceived => "bytes",
            _ => "ns",
        }
    }

    /// The unit summaries and tables show: `ms`, `tok/s`, `tokens`, `bytes`.
    pub fn natural_unit(self) -> &'static str {
        match self {
            Metric::OutputTokS | Metric::DecodeTokS => "tok/s",
            Metric::TokensPerChunk => "tokens",
            Metric::BytesSent | Metric::BytesReceived => "bytes",
            _ => "ms",
        }
    }

    /// Divide a stored value by this to get the natural unit.
    pub fn natural_divisor(self) -> f64 {
        match self.storage() {
            Storage::Nanos => 1e6,
            Storage::Milli => 1e3,
            Storage::Identity => 1.0,
        }
    }

    /// Converts a stored value to the natural unit.
    pub fn to_natural(self, stored: f64) -> f64 {
        stored / self.natural_divisor()
    }

    /// True when bigger is better (rates); false for times and sizes.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::OutputTokS | Metric::DecodeTokS)
    }

    /// One-line description for reports and `--help`-style listings.
    pub fn description(self) -> &'static str {
        match self {
            Metric::Ttft => "time to first content token, from the intended start (includes client-side queueing)",
            Metric::TtftDispatch => "time to first content token, from dispatch (excludes client-side queueing)",
            Metric::Itl => "gap between consecutive content chunks (per chunk, not per token)",
            Metric::Tpot => "time per output token after the first: (last - first token) / (tokens - 1)",
            Metric::E2e => "intended start to the last content token",
            Metric::Overhead => "round-trip overhead: client TTFT minus server TTFT, or dispatch to first event when the server reports no timing",
            Metric::ConnectionSetup => "DNS + TCP + TLS + WebSocket upgrade, for requests that opened a connection",
            Metric::DispatchLag => "how late the driver dispatched a request against its intended start",
            Metric::FirstEvent => "dispatch to the first protocol event (SSE event or WebSocket frame)",
            Metric::OutputTokS => "output tokens per second over the whole request, from the intended start",
            Metric::DecodeTokS => "decode rate: tokens after the first chunk over the first-to-last token span",
            Metric::TokensPerChunk => "mean tokens per content chunk (server batching / speculative decoding)",
            Metric::BytesSent => "request bytes written (headers + body, or the WebSocket frame)",
            Metric::BytesReceived => "response bytes read (headers + body, or WebSocket frames)",
            Metric::SessionWall => "session wall time: first request's intended start to the last request's end",
            Metric::PhaseDns => "waterfall phase: DNS resolution (0 when not resolved on this request)",
            Metric::PhaseTcp => "waterfall phase: TCP connect (0 on a reused connection)",
            Metric::PhaseTls => "waterfall phase: TLS handshake (0 on a reused or plaintext connection)",
            Metric::PhaseWsUpgrade => "waterfall phase: WebSocket upgrade (0 except on the request that paid it)",
            Metric::PhaseRequestWrite => "waterfall phase: end of connection setup (or dispatch) to the request fully written",
            Metric::PhaseTtfb => "waterfall phase: request written to the first response byte (headers or first WebSocket frame)",
            Metric::PhaseFirstToken => "waterfall phase: first response byte to the first content token",
            Metric::PhaseDecode => "waterfall phase: first to last content token",
            Metric::ServerTtft => "server part of TTFT: the server's own TTFT as it reported it in-band (requests whose server reported timing)",
            Metric::ServerTpot => "server part of TPOT: (server total − server TTFT) / (tokens − 1), as the server reported them",
            Metric::TpotOverhead => "transport/client part of TPOT: client TPOT minus server TPOT, clamped at 0",
        }
    }

    /// Calls `sample` with each sample one successful request contributes to this metric, in
    /// stored units (`SessionWall` comes from sessions, not requests, and yields nothing
    /// here), without a `Vec`: the recorder folds every finished request this way. `phases`
    /// is [`phases_ns`] of `r`, computed once for the eight phase metrics.
    pub fn each_request_sample(
        self,
        r: &RequestRecord,
        phases: &[u64; 8],
        mut sample: impl FnMut(u64),
    ) {
        let mut one = |v: Option<u64>| v.into_iter().for_each(&mut sample);
        let milli = |v: Option<f64>| {
            v.filter(|x| x.is_finite())
                .map(|x| (x * 1e3).round() as u64)
        };
        match self {
            Metric::Ttft => one(r.ttft_ns()),
            Metric::TtftDispatch => one(r.first_token_ns.map(|t| t.saturating_sub(r.dispatch_ns))),
            Metric::Itl => r.itl_ns().for_each(|v| one(Some(v))),
            Metric::Tpot => one(r
                .tpot_ns()
                .filter(|x| x.is_finite())
                .map(|x| x.round() as u64)),
            Metric::E2e => one(r.e2e_ns()),
            Metric::Overhead => one(r.overhead_ns().map(|(o, _)| o)),
            Metric::ConnectionSetup => {
                let s = r.connection_setup_ns();
                let paid = r.dns_ns.is_some()
                    || r.tcp_connect_ns.is_some()
                    || r.tls_handshake_ns.is_some()
                    || r.ws_upgrade_ns.is_some();
                one(paid.then_some(s))
            }
            Metric::DispatchLag => one(Some(r.dispatch_lag_ns())),
            Metric::FirstEvent => one(r.first_event_ns.map(|t| t.saturating_sub(r.dispatch_ns))),
            Metric::OutputTokS => one(milli(r.output_tok_s())),
            Metric::DecodeTokS => one(milli(r.decode_tok_s())),
            Metric::TokensPerChunk => one(milli(r.tokens_per_chunk())),
            Metric::BytesSent => one(Some(r.bytes_sent)),
            Metric::BytesReceived => one(Some(r.bytes_received)),
            Metric::SessionWall => {}
            Metric::ServerTtft => one(r.server_ttft_ns()),
            Metric::ServerTpot => one(r.server_tpot_ns().map(|x| x.round() as u64)),
            Metric::TpotOverhead => one(r.tpot_overhead_ns()),
            Metric::PhaseDns
            | Metric::PhaseTcp
            | Metric::PhaseTls
            | Metric::PhaseWsUpgrade
            | Metric::PhaseRequestWrite
            | Metric::PhaseTtfb
            | Metric::PhaseFirstToken
            | Metric::PhaseDecode => {
                let i = Metric::PHASES.iter().position(|p| *p == self).unwrap_or(0);
                one(Some(phases[i]))
            }
        }
    }

    /// The session wall-time sample of one session, ns (`SessionWall` only).
    pub fn session_sample(self, s: &SessionRecord) -> Option<u64> {
        (self == Metric::SessionWall).then(|| s.end_ns.saturating_sub(s.start_ns))
    }
}

/// The eight waterfall phases of one request, ns, in [`Metric::PHASES`] order.
///
/// Phases are consecutive segments on the request's own clock: a cursor starts at dispatch
/// and each known boundary (end of DNS, TCP, TLS, upgrade; request written; first response
/// byte; first token; last token) closes one segment. A boundary that is missing, or that lies
/// before the cursor, yields 0 and the next known boundary absorbs the time, so the phases
/// always sum to `last_token − dispatch` when the last token is known.
pub fn phases_ns(r: &RequestRecord) -> [u64; 8] {
    let mut out = [0u64; 8];
    let mut cursor = r.dispatch_ns;
    // Connection setup phases are durations: their boundaries are cumulative sums.
    let mut setup_end = r.dispatch_ns;
    let durations = [
        r.dns_ns,
        r.tcp_connect_ns,
        r.tls_handshake_ns,
        r.ws_upgrade_ns,
    ];
    let mut boundaries: [Option<u64>; 8] = [None; 8];
    for (i, d) in durations.iter().enumerate() {
        if let Some(d) = d {
            setup_end = setup_end.saturating_add(*d);
            boundaries[i] = Some(setup_end);
        }
    }
    boundaries[4] = r.request_written_ns;
    boundaries[5] = r.response_headers_ns.or(r.first_event_ns);
    boundaries[6] = r.first_token_ns;
    boundaries[7] = r.last_token_ns;
    for (i, b) in boundaries.iter().enumerate() {
        if let Some(b) = *b {
            out[i] = b.saturating_sub(cursor);
            cursor = cursor.max(b);
        }
    }
    out
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Metric::from_name(s).ok_or_else(|| {
            let known: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
            format!("unknown metric {s:?}; known metrics: {}", known.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Chunk;

    /// The samples `r` contributes to `m`, as a list.
    fn samples(m: Metric, r: &RequestRecord) -> Vec<u64> {
        let mut v = Vec::new();
        m.each_request_sample(r, &phases_ns(r), |x| v.push(x));
        v
    }

    #[test]
    fn names_round_trip_and_serde_matches() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_name(m.name()), Some(m));
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.name())
            );
        }
        assert!("thing"
            .parse::<Metric>()
            .unwrap_err()
            .contains("ttft_dispatch"));
    }

    #[test]
    fn samples_from_a_record() {
        let r = RequestRecord {
            intended_ns: 1_000,
            dispatch_ns: 2_000,
            tcp_connect_ns: Some(500),
            tls_handshake_ns: Some(700),
            first_event_ns: Some(50_000),
            first_token_ns: Some(100_000),
            last_token_ns: Some(400_000),
            output_tokens: 4,
            bytes_sent: 10,
            bytes_received: 20,
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
        };
        assert_eq!(samples(Metric::Ttft, &r), vec![99_000]);
        assert_eq!(samples(Metric::TtftDispatch, &r), vec![98_000]);
        assert_eq!(samples(Metric::Itl, &r), vec![100_000, 200_000]);
        assert_eq!(samples(Metric::Tpot, &r), vec![100_000]);
        assert_eq!(samples(Metric::ConnectionSetup, &r), vec![1_200]);
        assert_eq!(samples(Metric::FirstEvent, &r), vec![48_000]);
        assert_eq!(samples(Metric::DecodeTokS, &r), vec![10_000_000]); // 10 000 tok/s
        assert_eq!(samples(Metric::TokensPerChunk, &r), vec![1_333]);
        assert_eq!(samples(Metric::BytesReceived, &r), vec![20]);
        // dispatch 2 000; TCP 500 → 2 500; TLS 700 → 3 200; no written/headers; first event
        // 50 000; first token 100 000; last 400 000.
        assert_eq!(phases_ns(&r), [0, 500, 700, 0, 0, 46_800, 50_000, 300_000]);
        assert_eq!(phases_ns(&r).iter().sum::<u64>(), 400_000 - 2_000);
        assert_eq!(samples(Metric::PhaseTtfb, &r), vec![46_800]);
        let reused = RequestRecord {
            connection_reused: true,
            ..r
        };
        assert_eq!(
            samples(
                Metric::ConnectionSetup,
                &RequestRecord {
                    tcp_connect_ns: None,
                    tls_handshake_ns: None,
                    ..reused
                }
            ),
            Vec::<u64>::new()
        );
    }
}
