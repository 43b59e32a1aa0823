//! Whether a server speaks a transport, asked once before a run: one short connection per
//! target × transport that goes only as far as the transport's first answer.
//!
//! Owns: the probe of each transport and the words that quote the server's answer.
//! * `http2`: TCP (+TLS offering only `h2`, as the http2 transport does; a server that
//!   selects no `h2` is answered there), then the client preface and an empty SETTINGS frame
//!   (h2c prior knowledge on `http://`, as the transport); a server that speaks HTTP/2 answers
//!   with a SETTINGS frame on stream 0. Anything else it sends (`HTTP/1.1 400 Bad Request`),
//!   or closing without a byte, is quoted: its first line, or its first bytes escaped.
//! * `ws`: TCP (+TLS), then the upgrade the ws transport makes (same URL, same headers,
//!   given by the caller: they may hold credentials, and are never quoted); `101` passes;
//!   an answer that says the mode is not there (2xx/3xx without the upgrade, 400, 404, 405,
//!   410, 426, 501, 505) is quoted by its status line; any other (401, 403, 429, 5xx) is
//!   [`Verdict::Unknown`]: a refused key or a busy server says nothing about the mode.
//! * `http`, `http-pooled`: TCP (+TLS) connect only.
//!
//! A server that cannot be reached, a TLS failure other than ALPN, or no answer within the
//! timeout is [`Verdict::Unknown`]: the run goes on and records what its requests meet.
//! Does not own: what a run does with the verdict (`runner::probes`), nor the headers
//! (`backend::request::ws_headers`).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::connect::{dial, DialError, Dialed};
use super::Trust;
use crate::clock::Clock;
use crate::link::{Emulator, Link};
use crate::vocab::{BaseUrl, Proxy, Scheme, TransportKind};

/// The longest a probe waits, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTP/2 client connection preface, then an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
/// The longest quoted answer, bytes.
const QUOTE_MAX: usize = 120;

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The server answered as the transport expects.
    Supported,
    /// The server answered, and not in the transport's protocol.
    Unsupported,
    /// The probe could not tell (unreachable, TLS failure, no answer in time).
    Unknown,
}

/// One probe's result.
#[derive(Debug, Clone)]
pub struct Probed {
    /// What it found.
    pub verdict: Verdict,
    /// What the server answered (or why the probe could not tell), in words, scrubbed and
    /// cut short; never a header the probe sent.
    pub answer: String,
    /// The answer in a sentence for an unsupported transport ("it answered `HTTP/1.1 400
    /// Bad Request` to the h2c preface"); the answer itself otherwise.
    pub why: String,
    /// How long the probe took.
    pub elapsed: Duration,
}

/// Where and how to probe: the endpoint, what its TLS trusts, its proxy, and for `ws` the
/// upgrade's headers.
pub struct Probe<'a> {
    /// The target's base URL.
    pub endpoint: &'a BaseUrl,
    /// What its TLS client trusts.
    pub trust: &'a Trust,
    /// The proxy the run's connections tunnel through.
    pub proxy: Option<&'a Proxy>,
    /// The WebSocket upgrade's headers (`ws` only), as the ws transport sends them.
    pub ws_headers: &'a [(http::HeaderName, http::HeaderValue)],
    /// The longest the probe waits.
    pub timeout: Duration,
}

impl Probe<'_> {
    /// Probes `transport`, within the timeout.
    pub async fn run(&self, transport: TransportKind) -> Probed {
        let t0 = crate::clock::now();
        let (verdict, answer) = match tokio::time::timeout(self.timeout, self.ask(transport)).await
        {
            Ok(found) => found,
            Err(_) => (
                Verdict::Unknown,
                format!("no answer within {} ms", self.timeout.as_millis()),
            ),
        };
        let tls = self.endpoint.scheme == Scheme::Https;
        let why = match (verdict, transport) {
            (Verdict::Unsupported, TransportKind::Http2) if answer.starts_with("TLS") => {
                answer.clone()
            }
            (Verdict::Unsupported, TransportKind::Http2) => format!(
                "it answered `{answer}` to the {} preface",
                if tls { "HTTP/2" } else { "h2c" }
            ),
            (Verdict::Unsupported, TransportKind::Ws) => format!(
                "it answered `{answer}` to the WebSocket upgrade of {}",
                self.endpoint.ws_url("/responses")
            ),
            _ => answer.clone(),
        };
        Probed {
            verdict,
            answer,
            why,
            elapsed: crate::clock::since(t0),
        }
    }

    async fn ask(&self, transport: TransportKind) -> (Verdict, String) {
        let d = match self.dial(transport).await {
            Ok(d) => d,
            Err(found) => return found,
        };
        match transport {
            TransportKind::Http | TransportKind::HttpPooled => {
                (Verdict::Supported, "connected".to_string())
            }
            TransportKind::Http2 => h2(d).await,
            TransportKind::Ws => self.ws(d).await,
        }
    }

    /// TCP (+TLS with the transport's ALPN). A TLS server that selects no `h2` for
    /// `http2` is an answer; other failures are not.
    async fn dial(&self, transport: TransportKind) -> Result<Dialed, (Verdict, String)> {
        let h2 = transport == TransportKind::Http2;
        let tls = match self.endpoint.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
                let config = self
                    .trust
                    .client_config(alpn)
                    .map_err(|e| (Verdict::Unknown, format!("TLS set-up: {e}")))?;
                Some(TlsConnector::from(config))
            }
        };
        let d = dial(
            self.endpoint,
            tls.as_ref(),
            self.proxy,
            &Link::default(),
            &Emulator::default(),
            Clock::start(),
            0,
        )
        .await
        .map_err(|e| match e {
            DialError::Tls(m) if h2 && m.contains("NoApplicationProtocol") => (
                Verdict::Unsupported,
                "TLS: the server accepts no offered ALPN protocol (h2)".to_string(),
            ),
            DialError::Connect(m) | DialError::Tls(m) | DialError::Local(m) => {
                (Verdict::Unknown, format!("not reached: {m}"))
            }
        })?;
        if h2 && tls.is_some() && d.setup.alpn.as_deref() != Some("h2") {
            let got = d.setup.alpn.as_deref().unwrap_or("none");
            return Err((
                Verdict::Unsupported,
                format!("TLS ALPN selected {got}, not h2"),
            ));
        }
        Ok(d)
    }

    /// The upgrade the ws transport makes; 101 passes.
    async fn ws(&self, d: Dialed) -> (Verdict, String) {
        let url = self.endpoint.ws_url("/responses");
        let mut req = match url.as_str().into_client_request() {
            Ok(r) => r,
            Err(e) => return (Verdict::Unknown, format!("building the upgrade: {e}")),
        };
        for (k, v) in self.ws_headers {
            req.headers_mut().insert(k.clone(), v.clone());
        }
        use tokio_tungstenite::tungstenite::Error;
        match tokio_tungstenite::client_async_with_config(req, d.io, Some(super::ws::ws_config()))
            .await
        {
            Ok((mut ws, resp)) => {
                let _ = ws.close(None).await;
                (
                    Verdict::Supported,
                    status_line(resp.version(), resp.status()),
                )
            }
            Err(Error::Http(resp)) => (
                ws_status_verdict(resp.status()),
                status_line(resp.version(), resp.status()),
            ),
            Err(e @ Error::Protocol(_)) => match e {
                Error::Protocol(
                    tokio_tungstenite::tungstenite::error::ProtocolError::HandshakeIncomplete,
                ) => (Verdict::Unknown, format!("the upgrade did not finish: {e}")),
                _ => (Verdict::Unsupported, quote(e.to_string().as_bytes())),
            },
            Err(e) => (Verdict::Unknown, format!("the upgrade did not finish: {e}")),
        }
    }
}

/// What a status other than 101 says of the WebSocket mode: the server does not speak it
/// at that URL (no such path or method, a demand for another protocol, or a plain answer
/// without the upgrade), or it said nothing about it (a key refused, a rate limit, a server
/// error: the run goes on and records what its requests meet, as without a probe).
fn ws_status_verdict(status: http::StatusCode) -> Verdict {
    match status.as_u16() {
        200..=399 | 400 | 404 | 405 | 410 | 426 | 501 | 505 => Verdict::Unsupported,
        _ => Verdict::Unknown,
    }
}

/// `HTTP/1.1 404 Not Found`.
fn status_line(version: http::Version, status: http::StatusCode) -> String {
    format!("{version:?} {status}")
}

/// The client preface and an empty SETTINGS frame; a SETTINGS frame on stream 0 passes.
async fn h2(mut d: Dialed) -> (Verdict, String) {
    if let Err(e) = d.io.write_all(H2_PREFACE).await {
        return (Verdict::Unknown, format!("sending the preface: {e}"));
    }
    let _ = d.io.flush().await;
    let mut got = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    // Enough to tell: a frame header, or a line.
    while got.len() < 9 && !got.contains(&b'\n') {
        match d.io.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if got.is_empty() => {
                return (
                    Verdict::Unsupported,
                    format!("(connection failed, no bytes: {e})"),
                )
            }
            Err(_) => break,
        }
    }
    h2_verdict(&got)
}

/// What the first bytes after the preface say.
fn h2_verdict(got: &[u8]) -> (Verdict, String) {
    if got.is_empty() {
        return (
            Verdict::Unsupported,
            "(connection closed, no bytes)".to_string(),
        );
    }
    let settings = got.len() >= 9 && got[3] == 0x4 && got[5..9] == [0, 0, 0, 0];
    if settings {
        (Verdict::Supported, "SETTINGS".to_string())
    } else {
        (Verdict::Unsupported, quote(got))
    }
}

/// A server's answer as words: the first line when it is text, else its first bytes
/// escaped; cut short and scrubbed of anything credential-like.
pub fn quote(got: &[u8]) -> String {
    let line = got.split(|&b| b == b'\n').next().unwrap_or(got);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = if line.iter().all(|b| b.is_ascii_graphic() || *b == b' ') && !line.is_empty() {
        crate::vocab::redact::excerpt(line, QUOTE_MAX)
    } else {
        let head = &got[..got.len().min(32)];
        format!("bytes {}", head.escape_ascii())
    };
    crate::vocab::redact::redact(&text, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ws_statuses_are_told_apart() {
        use http::StatusCode as S;
        for s in [
            S::OK,
            S::NOT_FOUND,
            S::METHOD_NOT_ALLOWED,
            S::UPGRADE_REQUIRED,
            S::BAD_REQUEST,
        ] {
            assert_eq!(ws_status_verdict(s), Verdict::Unsupported, "{s}");
        }
        for s in [
            S::UNAUTHORIZED,
            S::FORBIDDEN,
            S::TOO_MANY_REQUESTS,
            S::SERVICE_UNAVAILABLE,
        ] {
            assert_eq!(ws_status_verdict(s), Verdict::Unknown, "{s}");
        }
    }

    #[test]
    fn h2_answers_are_told_apart() {
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
        assert_eq!(h2_verdict(&settings).0, Verdict::Supported);
        let (v, a) = h2_verdict(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(
            (v, a.as_str()),
            (Verdict::Unsupported, "HTTP/1.1 400 Bad Request")
        );
        // A GOAWAY first is not a server preface.
        let (v, a) = h2_verdict(&[0, 0, 8, 7, 0, 0, 0, 0, 0]);
        assert_eq!(v, Verdict::Unsupported);
        assert!(a.starts_with("bytes \\x00"), "{a}");
        assert_eq!(h2_verdict(b"").0, Verdict::Unsupported);
        let long = format!("HTTP/1.1 400 {}", "x ".repeat(200));
        assert!(quote(long.as_bytes()).len() < QUOTE_MAX + 10);
        assert_eq!(
            quote(b"HTTP/1.1 401 Bearer sk-abcdefghijklmnop"),
            "HTTP/1.1 401 Bearer [redacted]"
        );
    }
}
