//! Transport: connections, TLS, HTTP/1.1, HTTP/2, SSE framing and WebSocket.
//!
//! Owns: opening connections with every phase timed separately (DNS, TCP connect, TLS,
//! WebSocket upgrade), pooling them per transport policy, moving request bytes out and
//! response bytes in, and **timestamping bytes when the read that delivered them returns**,
//! before any parsing, on the run's [`crate::clock::Clock`].
//! Does not own: JSON, tokens, or what an event means (that is `backend`), nor records
//! (the driver's `exchange` fills them from what this module reports).
//!
//! Layering of one connection: `TcpStream` (nodelay, kernel receive stamps) →
//! [`crate::link::Link::wrap`] → TLS (read one record at a time) → [`io::MeteredIo`] (byte
//! counts and read/write times of the plaintext, and the HTTP
//! [`bytelog::ByteClock`]) → hyper, or [`wsupgrade`]'s upgrade and then [`wsframe`]'s frames.
//!
//! One turn, every transport: [`SessionTransport::turn`] opens or reuses the connection, asks
//! the caller's [`Outgoing`] (the backend's request) for what to send once it knows whether
//! the connection is new, sends it, streams [`WireEvent`]s into the caller's sink, and re-sends
//! once what the server provably never read. The driver only stamps, calls it, and records.
//!
//! How to add a transport (four files, the compiler points at the rest):
//! 1. `vocab/kinds.rs`: the [`crate::vocab::TransportKind`] variant (its name and doc), its
//!    arms in `TransportKind::wire_protocol` (a new `WireProtocol` if it is one) and
//!    `TransportKind::connection_scope`, and `ApiFlavour::speaks` if not every API has it.
//! 2. `transport/<name>.rs`: opening the connection over a [`connect::Dialed`] stream and one
//!    request on it, reporting [`WireEvent`]s (an HTTP-shaped one reuses [`http::pump`]).
//! 3. this file: its `pub mod` line.
//! 4. `transport/session.rs`: where its connections live (per cell on [`Connector`], per
//!    session on [`SessionTransport`]), its arm in `turn`'s dispatch, and its attempt fn
//!    (what proves a turn unread, for the one re-send). TLS ALPN is chosen in `Connector::new`.
//!
//! Before a run, [`probe`] asks each real server once per transport whether it speaks it
//! (and [`fetch`] GETs `/models` when `run --url` names no model).
//!
//! Only if the transport brings more than a connection: a new `WireProtocol` also needs
//! `capture/write.rs`'s mapping back; a body of a new shape
//! needs a method on [`Outgoing`] and its impl in `backend/request.rs`; a new kind of
//! payload a [`WireEvent`] variant and the decoders' arms in `backend/`.

pub mod bytelog;
pub mod connect;
pub mod fetch;
pub mod http;
pub mod io;
pub mod probe;
pub mod proxy;
pub mod session;
pub mod sockstate;
pub mod sse;
pub mod tcp;
pub mod wake;
pub mod ws;
pub mod wsframe;
pub mod wsupgrade;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;

pub use session::{Connector, SessionTransport};
/// A WebSocket text message's payload: bytes known to be UTF-8.
pub use tokio_tungstenite::tungstenite::Utf8Bytes;

use crate::vocab::WireProtocol;

/// Which certificates a TLS client trusts.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Exactly the embedded simulator's certificate.
    Sim(crate::tls::SelfSigned),
    /// The bundled public webpki roots only (`run` uses [`Trust::Endpoint`] for real endpoints).
    PublicRoots,
    /// The certificates in a PEM file (`--cacert`).
    PemFile(PathBuf),
    /// A real endpoint: the system's store, the bundled roots, the target's `ca_file`, and
    /// its client certificate (see [`crate::tls::EndpointTrust`]).
    Endpoint(std::sync::Arc<crate::tls::EndpointTrust>),
}

impl Trust {
    /// A rustls client config offering `alpn`.
    pub fn client_config(
        &self,
        alpn: &[&[u8]],
    ) -> anyhow::Result<std::sync::Arc<rustls::ClientConfig>> {
        match self {
            Trust::Sim(cert) => cert.client_config(alpn),
            Trust::PublicRoots => crate::tls::public_client_config(alpn),
            Trust::Endpoint(t) => t.client_config(alpn),
            Trust::PemFile(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    anyhow::anyhow!(
                        "reading CA file {}: {e}; check the --cacert path",
                        path.display()
                    )
                })?;
                crate::tls::client_config_from_pem(&pem, alpn)
                    .map_err(|e| anyhow::anyhow!("CA file {}: {e}", path.display()))
            }
        }
    }
}

/// What arrived on the wire, stamped with the time of the read that delivered its last byte.
#[derive(Debug, Clone)]
pub enum WireEvent {
    /// HTTP response status line and headers.
    Headers {
        /// Arrival, ns since run start.
        at_ns: u64,
        /// HTTP status.
        status: u16,
        /// Response headers.
        headers: ::http::HeaderMap,
    },
    /// One SSE event of a 2xx streaming body.
    Sse {
        /// Arrival, ns since run start.
        at_ns: u64,
        /// `event:` field.
        event: Option<Bytes>,
        /// `data:` field (lines joined by `\n`).
        data: Bytes,
    },
    /// The body of a non-2xx HTTP response (at most 64 KiB), for the error message.
    ErrorBody {
        /// Arrival of the last byte, ns since run start.
        at_ns: u64,
        /// The body.
        data: Bytes,
    },
    /// One WebSocket text message.
    WsText {
        /// Arrival, ns since run start.
        at_ns: u64,
        /// The payload, UTF-8 as the transport checked it.
        text: Utf8Bytes,
    },
    /// The stream ended (body complete, or WebSocket closed) — whether or not the protocol
    /// had finished; the backend decides whether that is a truncation.
    End {
        /// Arrival of the end, ns since run start.
        at_ns: u64,
    },
}

impl WireEvent {
    /// The arrival time.
    pub fn at_ns(&self) -> u64 {
        match self {
            WireEvent::Headers { at_ns, .. }
            | WireEvent::Sse { at_ns, .. }
            | WireEvent::ErrorBody { at_ns, .. }
            | WireEvent::WsText { at_ns, .. }
            | WireEvent::End { at_ns } => *at_ns,
        }
    }
}

/// What the consumer of wire events wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep delivering events.
    Continue,
    /// The protocol finished (terminal event seen): stop delivering. HTTP connections are
    /// still drained to the end of the body so that they can be reused.
    Stop,
}

/// Time limits of one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Absolute deadline for the whole request (connection setup included).
    pub deadline: Instant,
    /// Longest silence (no bytes) tolerated once the request was written.
    pub stall: Duration,
}

/// Connection setup paid by one request; `None` phases were not paid by it.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// DNS resolution, ns (None for IP literals and reused connections).
    pub dns_ns: Option<u64>,
    /// TCP connect including the emulated SYN round trip, ns (to the proxy when one is used).
    pub tcp_connect_ns: Option<u64>,
    /// HTTP proxy `CONNECT` tunnel set-up, ns.
    pub proxy_connect_ns: Option<u64>,
    /// TLS handshake, ns.
    pub tls_handshake_ns: Option<u64>,
    /// WebSocket upgrade, ns.
    pub ws_upgrade_ns: Option<u64>,
    /// Negotiated ALPN protocol.
    pub alpn: Option<String>,
    /// Negotiated TLS version (`TLSv1_3`).
    pub tls_version: Option<String>,
    /// The request ran on a connection opened earlier.
    pub reused: bool,
    /// Connection id, unique within the process (so within the run).
    pub connection_id: u64,
}

impl Setup {
    /// What a later request on the same connection pays: nothing, on connection `self`.
    pub fn reused(&self) -> Setup {
        Setup {
            reused: true,
            connection_id: self.connection_id,
            alpn: self.alpn.clone(),
            tls_version: self.tls_version.clone(),
            ..Setup::default()
        }
    }
}

/// How the transport part of a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The consumer said [`Flow::Stop`] or the stream ended normally ([`WireEvent::End`] was delivered).
    Finished,
    /// DNS or TCP connect failed.
    Connect(String),
    /// TLS handshake failed (or h2 was not negotiated for the http2 transport).
    Tls(String),
    /// The WebSocket upgrade was refused (status when the server answered).
    Upgrade(Option<u16>, String),
    /// No bytes for the stall timeout.
    Stall,
    /// The request deadline passed.
    Deadline,
    /// The cancellation token fired.
    Cancelled,
    /// The connection failed mid-request (reset, protocol error): a truncated response.
    Io(String),
    /// The WebSocket was closed by the server with this code before the protocol finished.
    WsClose(u16, String),
    /// A reused connection was closed by the server after the request was written and
    /// before any response byte, without proof that the server never read the request (so
    /// it was not re-sent).
    Stale(String),
    /// A reused WebSocket was closed by the server before it read the turn's message (the
    /// kernel reset the connection on the message): the caller may send the turn again on
    /// a new socket.
    Unread(String),
    /// The server broke the protocol: a garbage or malformed response head, broken chunked
    /// encoding, a WebSocket binary frame or invalid UTF-8 in a text frame.
    Protocol(String),
    /// The server sent more than a size limit allows (see [`limits`]): a response head, an
    /// SSE line or event, a WebSocket frame or message.
    TooLarge(String),
    /// This machine ran out of a resource (file descriptors, ports): not the target's fault.
    Local(String),
}

/// The size limits that bound a request's memory whatever the server sends. Documented in
/// docs/transports.md "Hostile servers" section; exceeding one ends the request with `too-large`.
pub mod limits {
    /// Longest SSE line and largest SSE event `data`, bytes.
    pub const SSE_LINE: usize = super::sse::MAX_LINE;
    /// Largest HTTP/1.1 response head (status line + headers), bytes: hyper's read buffer
    /// limit (its default, 408 KiB).
    pub const HTTP1_HEAD: usize = 8192 + 4096 * 100;
    /// Most header fields in an HTTP/1.1 response head (hyper's default is 100; raised, as
    /// hyper allows, so that the byte limit is the one that usually applies).
    pub const HTTP1_HEADERS: usize = 500;
    /// Largest HTTP/2 header list the client accepts, bytes (hyper's default, 16 KiB).
    pub const HTTP2_HEADER_LIST: u32 = 16 * 1024;
    /// Largest WebSocket frame, bytes.
    pub const WS_FRAME: usize = 16 << 20;
    /// Largest WebSocket message (its frames joined), bytes.
    pub const WS_MESSAGE: usize = 16 << 20;
    /// The most of a non-2xx body kept for the error message, bytes (the rest is read and
    /// dropped).
    pub const ERROR_BODY: usize = 64 * 1024;
    /// Content chunks whose timestamps are kept per request (`chunks.csv` rows); later
    /// chunks are counted (`chunks_dropped`) and the last one's time is kept.
    pub const CHUNKS_KEPT: usize = 100_000;
}

/// What a turn sends. [`SessionTransport::turn`] asks for each part when it needs it, so
/// that what is sent can depend on the connection it goes on (the backend implements it).
/// An `Err` is the caller's: the turn ends there, with nothing more sent.
pub trait Outgoing {
    /// The HTTP request (`http`, `http-pooled`, `http2`), asked once before connecting: a
    /// re-send sends the same request.
    fn http_request(&mut self) -> Result<http::HttpRequest, String>;
    /// The WebSocket upgrade's headers (`ws`), asked once before connecting.
    fn ws_headers(&mut self) -> Result<Vec<(::http::HeaderName, ::http::HeaderValue)>, String>;
    /// The turn's WebSocket message, asked on every attempt once the socket is open.
    /// `new_socket`: the socket was opened for this attempt, so it carries no state of earlier
    /// turns.
    fn ws_message(&mut self, new_socket: bool) -> Result<String, String>;
}

/// What the transport reports about one request besides the events.
#[derive(Debug, Clone)]
pub struct Exchanged {
    /// Connection setup paid by this request.
    pub setup: Setup,
    /// When the request was fully handed to the socket, ns.
    pub request_written_ns: Option<u64>,
    /// Request bytes (headers + body, or the WS message payload).
    pub bytes_sent: u64,
    /// Response bytes (headers + body, or WS message payloads).
    pub bytes_received: u64,
    /// How it ended.
    pub ending: Ending,
    /// `HTTP/1.1`, `HTTP/2` or `WebSocket`.
    pub protocol: WireProtocol,
    /// Times the request was re-sent on a fresh connection (see `RequestRecord::reconnects`).
    pub reconnects: u32,
}
