//! The shared enums: how a request travels, what it was, how it ended, and the run's modes.
//! Each is declared with the `names!` macro (in `vocab`), so its names are written once.

use super::names;

names! {
    /// How requests reach the target.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub value_enum enum TransportKind ("transport") {
        /// A new TCP (+TLS) connection for every request.
        #[default]
        Http = "http",
        /// HTTP/1.1 keep-alive: idle connections are reused.
        HttpPooled = "http-pooled",
        /// HTTP/2: every request of a target multiplexed over one connection.
        Http2 = "http2",
        /// One persistent WebSocket per session (Responses API WebSocket mode).
        Ws = "ws",
    }
}

names! {
    /// The wire protocol a request went over, as the transport spoke it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum WireProtocol ("protocol") {
        /// HTTP/1.1 (with or without keep-alive).
        #[default]
        Http1 = "HTTP/1.1",
        /// HTTP/2.
        Http2 = "HTTP/2",
        /// WebSocket (after an HTTP/1.1 upgrade).
        WebSocket = "WebSocket",
    }
}

/// Who a transport's connections belong to, and so which requests pay for opening one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionScope {
    /// Each request opens its own connection and closes it (`http`).
    Request,
    /// A cell's pool of keep-alive connections: a request takes an idle one or opens one
    /// (`http-pooled`).
    Pool,
    /// One connection per cell, shared by its sessions' requests as streams (`http2`).
    Cell,
    /// One connection per session, kept across its turns (`ws`).
    Session,
}

impl TransportKind {
    /// Who this transport's connections belong to.
    pub fn connection_scope(self) -> ConnectionScope {
        match self {
            TransportKind::Http => ConnectionScope::Request,
            TransportKind::HttpPooled => ConnectionScope::Pool,
            TransportKind::Http2 => ConnectionScope::Cell,
            TransportKind::Ws => ConnectionScope::Session,
        }
    }

    /// The wire protocol requests on this transport go over.
    pub fn wire_protocol(self) -> WireProtocol {
        match self {
            TransportKind::Http | TransportKind::HttpPooled => WireProtocol::Http1,
            TransportKind::Http2 => WireProtocol::Http2,
            TransportKind::Ws => WireProtocol::WebSocket,
        }
    }
}

names! {
    /// The wire API a target speaks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ApiFlavour ("API") {
        /// `POST /v1/chat/completions`, SSE `data:` lines ending in `[DONE]`.
        ChatCompletions = "chat-completions",
        /// `POST /v1/responses` (SSE) and `GET /v1/responses` upgraded to WebSocket.
        Responses = "responses",
    }
}

impl ApiFlavour {
    /// Whether this API can travel over `transport`: the WebSocket mode exists only for the
    /// Responses API (chat completions has none).
    pub fn speaks(self, transport: TransportKind) -> bool {
        !matches!(
            (self, transport),
            (ApiFlavour::ChatCompletions, TransportKind::Ws)
        )
    }
}

names! {
    /// Where a request's token counts came from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum TokenSource ("token source") {
        /// The server's `usage` object (preferred).
        ServerUsage = "server-usage",
        /// No usage reported: one token per content chunk (a lower bound; flagged in reports).
        #[default]
        ChunkCount = "chunk-count",
        /// The server's usage was impossible for what it sent (more output tokens than one
        /// per byte received plus 1,000,000 per second of the request): not trusted, one token
        /// per content chunk instead (a lower bound; flagged in reports).
        UsageRejected = "usage-rejected",
    }
}

names! {
    /// How a request ended. Failures are data: counted by kind, never folded into latencies.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub enum OutcomeKind ("outcome") {
        /// Completed with a terminal success event.
        #[default]
        Ok = "ok",
        /// The server answered with a non-2xx HTTP status (see `http_status`).
        HttpStatus = "http-status",
        /// TCP connect (or DNS) failed.
        ConnectError = "connect-error",
        /// The TLS handshake failed.
        TlsError = "tls-error",
        /// The WebSocket upgrade was refused.
        UpgradeError = "upgrade-error",
        /// No byte arrived within the stall timeout, or the request exceeded its deadline.
        Timeout = "timeout",
        /// The connection closed or reset before the terminal event.
        Truncated = "truncated",
        /// A reused connection was closed by the server after this request was written and
        /// before any byte of a response: the server may have seen the request, so it was not
        /// sent again (a request that provably never reached the server is re-sent on a fresh
        /// connection instead, and counts in `reconnects`).
        StaleConnection = "stale-connection",
        /// The server sent an error event, `response.failed`, or a WebSocket error envelope / close 1011.
        ServerError = "server-error",
        /// The server broke the protocol: a garbage response head, broken chunked encoding,
        /// an SSE `data:` that is not JSON or not the API's shape, a WebSocket binary frame or
        /// invalid UTF-8.
        ProtocolError = "protocol-error",
        /// Cut off by Ctrl-C or the run deadline; not counted against the server.
        Cancelled = "cancelled",
        /// The server sent more than a size limit allows (response head, SSE line or event,
        /// WebSocket frame or message; see docs/transports.md "Hostile servers"); the request was ended
        /// without buffering the rest.
        TooLarge = "too-large",
        /// This machine failed the request, not the server: out of file descriptors or
        /// ephemeral ports (`EMFILE`, `EADDRNOTAVAIL`, …).
        LocalError = "local-error",
        /// The transport probe found, before the run, that the server does not speak this
        /// transport (it answered the HTTP/2 preface or the WebSocket upgrade otherwise), and
        /// the cell ran anyway (`run --force-transports`): the error quotes the server's answer.
        UnsupportedTransport = "unsupported-transport",
    }
}

names! {
    /// What the request was, within its session.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum RequestKind ("request kind") {
        /// A user prompt (first turn or follow-up edit).
        #[default]
        User = "user",
        /// A request carrying tool outputs back to the model (agent loop).
        ToolResult = "tool-result",
        /// A `generate:false` warm-up on a fresh WebSocket (no output).
        Warmup = "warmup",
    }
}

names! {
    /// How conversation history was sent.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum Chaining ("chaining") {
        /// The whole history was sent in the request body.
        #[default]
        FullHistory = "full-history",
        /// `previous_response_id` with only the new input items.
        PreviousResponseId = "previous-response-id",
    }
}

names! {
    /// Where a request's round-trip overhead figure came from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum OverheadSource ("overhead source") {
        /// Client TTFT minus the server-reported TTFT.
        ServerTiming = "server-timing",
        /// No server timing: time to the first protocol event (connection setup, upload, API
        /// work and one RTT, but no model time). An estimate; flagged in reports.
        FirstEventEstimate = "first-event-estimate",
    }
}

names! {
    /// How cells that share a server use it (see `plan::schedule`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub value_enum enum Schedule ("schedule") {
        /// Sessions alternate between the cells, through one pool of `concurrency` slots.
        Interleaved = "interleaved",
        /// Cell after cell, each with `concurrency` slots.
        Sequential = "sequential",
        /// Every cell at once, each with its own `concurrency` slots.
        #[default]
        Parallel = "parallel",
    }
}

names! {
    /// What a cell does about the server's prefix cache (see `plan::salt`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub value_enum enum CacheMode ("cache mode") {
        /// Every request's prompt starts with a unique salt: nothing can come from the cache.
        Cold = "cold",
        /// The prompts are sent once, untimed, first, so the first turns find them cached.
        Warm = "warm",
        /// The scenario's prompts verbatim.
        #[default]
        AsIs = "as-is",
    }
}

names! {
    /// The shape of open-loop arrivals, as written in `[load] arrival` / `--arrival` (the
    /// plan resolves it, with `burstiness`, into `plan::arrival::Arrival`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub value_enum enum ArrivalKind ("arrival") {
        /// Exponential gaps (independent arrivals).
        #[default]
        Poisson = "poisson",
        /// Equal gaps, exactly 1/rate apart.
        Constant = "constant",
        /// Gamma gaps with shape `burstiness` (1 = Poisson, below 1 burstier).
        Gamma = "gamma",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_name_everywhere() {
        for t in TransportKind::ALL {
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.as_str()));
            assert_eq!(serde_json::from_str::<TransportKind>(&json).unwrap(), t);
            assert_eq!(t.as_str().parse::<TransportKind>().unwrap(), t);
            let clap = clap::ValueEnum::to_possible_value(&t).unwrap();
            assert_eq!(clap.get_name(), t.as_str());
        }
        let clap = clap::ValueEnum::to_possible_value(&CacheMode::AsIs).unwrap();
        assert_eq!(clap.get_name(), "as-is");
        assert_eq!(
            "tcp".parse::<TransportKind>().unwrap_err(),
            "unknown transport \"tcp\"; use one of: http, http-pooled, http2, ws"
        );
        let e = serde_json::from_str::<OutcomeKind>("\"fine\"").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("unknown variant `fine`, expected one of `ok`"));
    }
}
