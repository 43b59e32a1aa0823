//! The client's half of the WebSocket opening handshake (RFC 6455 section 4.1): the upgrade
//! request written here, the server's answer read and checked here.
//!
//! Owns: the request's bytes (tungstenite's: the request line, `Host`, `Connection`,
//! `Upgrade`, `Sec-WebSocket-Version` and a fresh `Sec-WebSocket-Key` in that order, a
//! caller's header of one of those names taking its place, then the caller's other headers),
//! reading the answer's head within tungstenite's limits, and checking it as tungstenite
//! does (status 101, `Upgrade`, `Connection`, the accept key, subprotocols).
//! Does not own: what a failure means for a record ([`super::ws`] classifies it), extensions
//! or subprotocols nobody asked for (also [`super::ws`]), or the frames after it
//! ([`super::wsframe`]).
//!
//! Every failure is the `tungstenite::Error` value tungstenite returns for the same bytes: the
//! head is parsed by tungstenite's own parser (`TryParse for Response`), the accept key is
//! its `derive_accept_key`, and the limits and checks are its rules, so records keep their
//! kinds and words. Why not tungstenite's driver: for each socket it parsed the URL into an
//! `http::Uri`, built an `http::Request` and its header map, wrote that out again, and after
//! the 101 built a `WebSocket` with its read and write buffers, which spark-bench dropped at
//! once to read the frames itself: about 30 allocations and a fifth of the instructions of a
//! two-token request (docs/measurements.md, session 37).

use http::{HeaderName, HeaderValue, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_tungstenite::tungstenite::error::{ProtocolError, SubProtocolError, UrlError};
use tokio_tungstenite::tungstenite::handshake::client::{generate_key, Response};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::handshake::headers::MAX_HEADERS;
use tokio_tungstenite::tungstenite::handshake::machine::TryParse;
use tokio_tungstenite::tungstenite::Error;

/// The headers every upgrade carries, in the order tungstenite writes them.
const OWN: [&str; 5] = [
    "Host",
    "Connection",
    "Upgrade",
    "Sec-WebSocket-Version",
    "Sec-WebSocket-Key",
];

/// One upgrade request: its bytes, and what the answer must carry.
#[derive(Debug)]
pub struct Request {
    /// The request head, ready to write.
    pub bytes: Vec<u8>,
    /// The `Sec-WebSocket-Accept` the key asks for.
    accept: String,
    /// The subprotocols asked for (`Sec-WebSocket-Protocol`), if any.
    subprotocols: Option<Vec<String>>,
}

/// The upgrade request for `url` (`ws://` or `wss://`, as
/// [`crate::vocab::BaseUrl::ws_url`] writes it) with `headers` (a later header replaces an
/// earlier one of the same name).
pub fn request(url: &str, headers: &[(HeaderName, HeaderValue)]) -> Result<Request, Error> {
    request_with_key(url, headers, generate_key())
}

fn request_with_key(
    url: &str,
    headers: &[(HeaderName, HeaderValue)],
    key: String,
) -> Result<Request, Error> {
    let rest = url
        .strip_prefix("ws://")
        .or_else(|| url.strip_prefix("wss://"))
        .ok_or(Error::Url(UrlError::UnsupportedUrlScheme))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(Error::Url(UrlError::NoHostName));
    }
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() {
        return Err(Error::Url(UrlError::EmptyHostName));
    }
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    // The last of each name stands, as a header map's `insert` keeps it.
    let last = |i: usize| headers[i + 1..].iter().all(|(k, _)| k != headers[i].0);
    let given = |name: &str| {
        headers
            .iter()
            .rev()
            .find(|(k, _)| k.as_str().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let own = [
        given(OWN[0]).map_or_else(|| HeaderValue::from_str(host), Ok)?,
        given(OWN[1]).unwrap_or(HeaderValue::from_static("Upgrade")),
        given(OWN[2]).unwrap_or(HeaderValue::from_static("websocket")),
        given(OWN[3]).unwrap_or(HeaderValue::from_static("13")),
        given(OWN[4]).map_or_else(|| HeaderValue::from_str(&key), Ok)?,
    ];
    let key = own[4].to_str()?.to_owned();
    let mut bytes = Vec::with_capacity(256);
    bytes.extend_from_slice(b"GET ");
    bytes.extend_from_slice(path.as_bytes());
    bytes.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in OWN.iter().zip(&own) {
        let text = value.to_str().map_err(|e| {
            Error::Utf8(format!(
                "{e} for header name '{name}' with value: {value:?}"
            ))
        })?;
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    for (i, (k, v)) in headers.iter().enumerate() {
        let name = match k.as_str() {
            n if OWN.iter().any(|o| o.eq_ignore_ascii_case(n)) => continue,
            _ if !last(i) => continue,
            // Written as some servers wrongly insist (tungstenite's spelling).
            "sec-websocket-protocol" => "Sec-WebSocket-Protocol",
            "origin" => "Origin",
            n => n,
        };
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(v.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"\r\n");
    let subprotocols = match given("Sec-WebSocket-Protocol") {
        Some(v) => Some(
            v.to_str()?
                .split(',')
                .map(|s| s.trim().to_string())
                .collect(),
        ),
        None => None,
    };
    Ok(Request {
        bytes,
        accept: derive_accept_key(key.as_bytes()),
        subprotocols,
    })
}

/// Most bytes one read of the answer takes (tungstenite's read chunk).
const READ_CHUNK: usize = 4096;

/// Reads the server's answer to `req` from `io` and checks it: the 101 response (its status
/// and at least the [`READ_AFTER`] headers) and the bytes that came after its head (frames
/// the server sent at once). A refusal (any other status) is `Error::Http` with those bytes
/// as its body.
pub async fn answer<R: AsyncRead + Unpin>(
    io: &mut R,
    req: &Request,
) -> Result<(Response, Vec<u8>), Error> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; READ_CHUNK];
    let mut check = AttackCheck::default();
    let (resp, tail) = loop {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(Error::Protocol(ProtocolError::HandshakeIncomplete));
        }
        check.packet(n)?;
        buf.extend_from_slice(&chunk[..n]);
        if let Some((size, headers)) = accepted(&buf, req) {
            let mut resp = Response::new(None);
            *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            *resp.headers_mut() = headers?;
            buf.drain(..size);
            return Ok((resp, buf));
        }
        if let Some((size, resp)) = Response::try_parse(&buf)? {
            buf.drain(..size);
            break (resp, buf);
        }
    };
    verify(resp, tail, req)
}

/// The headers a caller reads after a 101 ([`super::ws`]'s check for an extension or a
/// subprotocol nobody asked for): those an accepted answer's `Response` carries at least.
pub const READ_AFTER: [&str; 2] = ["sec-websocket-extensions", "sec-websocket-protocol"];

/// The length of the head at the start of `buf` and its [`READ_AFTER`] headers, when it is a
/// 101 that tungstenite would accept for `req` (see [`verify`]); `None` for anything else
/// (incomplete, malformed, a refusal, a failed check), which [`answer`] then reads as
/// tungstenite does, for its exact error. The common case thus builds no map of every
/// header: each costs an allocation or two, and the checks read five.
fn accepted(buf: &[u8], req: &Request) -> Option<(usize, Result<http::HeaderMap, Error>)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(size) = r.parse(buf).ok()? else {
        return None;
    };
    if r.code != Some(101) || r.version != Some(1) {
        return None;
    }
    // A header map's `get`: the first of that name.
    let first = |name: &str| {
        r.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    let is = |name: &str, want: &str| {
        first(name)
            .is_some_and(|v| std::str::from_utf8(v).is_ok_and(|v| v.eq_ignore_ascii_case(want)))
    };
    let ok = is("Upgrade", "websocket")
        && is("Connection", "Upgrade")
        && first("Sec-WebSocket-Accept") == Some(req.accept.as_bytes())
        && match (first("Sec-WebSocket-Protocol"), &req.subprotocols) {
            (None, None) => true,
            (Some(got), Some(asked)) => {
                std::str::from_utf8(got).is_ok_and(|g| asked.iter().any(|a| a == g))
            }
            _ => false,
        };
    if !ok {
        return None;
    }
    // As tungstenite's header map holds them (none, mostly: then nothing is allocated).
    let mut map = http::HeaderMap::new();
    for h in r.headers.iter() {
        if let Some(name) = READ_AFTER.iter().find(|n| h.name.eq_ignore_ascii_case(n)) {
            match HeaderValue::from_bytes(h.value) {
                Ok(v) => map.append(*name, v),
                Err(e) => return Some((size, Err(e.into()))),
            };
        }
    }
    Some((size, Ok(map)))
}

/// tungstenite's checks of a client's answer (its `VerifyData::verify_response`).
fn verify(mut resp: Response, tail: Vec<u8>, req: &Request) -> Result<(Response, Vec<u8>), Error> {
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        *resp.body_mut() = Some(tail);
        return Err(Error::Http(Box::new(resp)));
    }
    let h = resp.headers();
    let is = |name: &str, want: &str| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case(want))
    };
    if !is("Upgrade", "websocket") {
        return Err(Error::Protocol(
            ProtocolError::MissingUpgradeWebSocketHeader,
        ));
    }
    if !is("Connection", "Upgrade") {
        return Err(Error::Protocol(
            ProtocolError::MissingConnectionUpgradeHeader,
        ));
    }
    if h.get("Sec-WebSocket-Accept")
        .is_none_or(|v| v != req.accept.as_str())
    {
        return Err(Error::Protocol(
            ProtocolError::SecWebSocketAcceptKeyMismatch,
        ));
    }
    let sub = |e| Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(e));
    match (h.get("Sec-WebSocket-Protocol"), &req.subprotocols) {
        (None, Some(_)) => return Err(sub(SubProtocolError::NoSubProtocol)),
        (Some(_), None) => return Err(sub(SubProtocolError::ServerSentSubProtocolNoneRequested)),
        (Some(got), Some(asked)) => {
            let got = got.to_str()?;
            if !asked.iter().any(|a| a == got) {
                return Err(sub(SubProtocolError::InvalidSubProtocol));
            }
        }
        (None, None) => {}
    }
    Ok((resp, tail))
}

/// tungstenite's guard on the answer's head: at most 64 KiB, 512 reads, and after 64 reads
/// an average of at least 128 bytes a read.
#[derive(Default)]
struct AttackCheck {
    reads: usize,
    bytes: usize,
}

impl AttackCheck {
    fn packet(&mut self, n: usize) -> Result<(), Error> {
        self.reads += 1;
        self.bytes += n;
        if self.bytes > 65536
            || self.reads > 512
            || (self.reads > 64 && self.reads * 128 > self.bytes)
        {
            return Err(Error::AttackAttempt);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::handshake::client::generate_request;

    fn h(name: &'static str, value: &'static str) -> (HeaderName, HeaderValue) {
        (
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        )
    }

    /// tungstenite's request for the same URL, headers and key.
    fn theirs(url: &str, headers: &[(HeaderName, HeaderValue)], key: &str) -> Vec<u8> {
        let mut req = url.into_client_request().unwrap();
        req.headers_mut()
            .insert("sec-websocket-key", HeaderValue::from_str(key).unwrap());
        for (k, v) in headers {
            req.headers_mut().insert(k.clone(), v.clone());
        }
        generate_request(req).unwrap().0
    }

    /// The head's lines: the request line and the five own headers in order, the rest as a
    /// sorted set (tungstenite's header map reorders them; order carries no meaning).
    fn lines(b: &[u8]) -> (Vec<String>, Vec<String>) {
        let text = String::from_utf8(b.to_vec()).unwrap();
        assert!(text.ends_with("\r\n\r\n"), "{text:?}");
        let all: Vec<String> = text.trim_end().split("\r\n").map(String::from).collect();
        let mut rest = all[6..].to_vec();
        rest.sort();
        (all[..6].to_vec(), rest)
    }

    #[test]
    fn the_request_is_tungstenites_for_the_same_url_headers_and_key() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let cases: &[(&str, Vec<(HeaderName, HeaderValue)>)] = &[
            ("ws://127.0.0.1:8080/v1/responses", vec![]),
            (
                "wss://api.openai.com/v1/responses",
                vec![
                    h("authorization", "Bearer x"),
                    h("openai-beta", "responses_websockets=2026-02-06"),
                    h("x-responsesapi-include-timing-metrics", "true"),
                ],
            ),
            ("ws://[::1]:9/responses", vec![h("origin", "https://a")]),
            ("ws://h/p?q=1", vec![h("sec-websocket-protocol", "a, b")]),
            ("ws://h", vec![h("host", "vhost.example"), h("x-a", "1")]),
            ("ws://h/x", vec![h("x-a", "1"), h("x-a", "2")]),
        ];
        for (url, headers) in cases {
            let ours = request_with_key(url, headers, key.into()).unwrap();
            assert_eq!(
                lines(&ours.bytes),
                lines(&theirs(url, headers, key)),
                "{url}"
            );
            assert_eq!(ours.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        }
        let e = request_with_key("http://h/x", &[], key.into()).unwrap_err();
        assert!(
            matches!(e, Error::Url(UrlError::UnsupportedUrlScheme)),
            "{e:?}"
        );
        // A fresh key each time.
        let (a, b) = (
            request("ws://h/", &[]).unwrap(),
            request("ws://h/", &[]).unwrap(),
        );
        assert_ne!(a.accept, b.accept);
    }

    /// A server that reads the request head and answers with `respond(accept key)`, written
    /// in pieces of `piece` bytes (the pipe holds no more, so the client reads them so).
    async fn serve(
        mut s: tokio::io::DuplexStream,
        respond: impl Fn(&str) -> Vec<u8>,
        piece: usize,
    ) {
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(b[0]);
        }
        let text = String::from_utf8(head).unwrap();
        let key = text
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap();
        for part in respond(&derive_accept_key(key.as_bytes())).chunks(piece) {
            if s.write_all(part).await.is_err() {
                return;
            }
        }
    }

    /// What ours gives for an answer, and what tungstenite's driver gives, as text: the
    /// error's debug form, or the status and headers of a 101 (and ours keeps the tail).
    async fn both(
        respond: impl Fn(&str) -> Vec<u8> + Clone + Send + 'static,
        piece: usize,
        headers: Vec<(HeaderName, HeaderValue)>,
    ) -> (String, String, Vec<u8>) {
        let url = "ws://127.0.0.1:1/v1/responses";
        let (c, s) = tokio::io::duplex(piece);
        let a = respond.clone();
        tokio::spawn(async move { serve(s, a, piece).await });
        let mut c = c;
        let req = request(url, &headers).unwrap();
        c.write_all(&req.bytes).await.unwrap();
        let (ours, tail) = match answer(&mut c, &req).await {
            Ok((r, tail)) => (shown(&r), tail),
            Err(e) => (format!("{e:?}"), Vec::new()),
        };
        let (c, s) = tokio::io::duplex(piece);
        tokio::spawn(async move { serve(s, respond, piece).await });
        let mut r = url.into_client_request().unwrap();
        for (k, v) in headers {
            r.headers_mut().insert(k, v);
        }
        let theirs = match tokio_tungstenite::client_async(r, c).await {
            Ok((_, r)) => shown(&r),
            Err(e) => format!("{e:?}"),
        };
        (ours, theirs, tail)
    }

    /// A 101's status and the headers read after it (all ours keeps).
    fn shown(r: &Response) -> String {
        let headers: Vec<_> = r
            .headers()
            .iter()
            .filter(|(k, _)| READ_AFTER.contains(&k.as_str()))
            .collect();
        format!("{:?} {headers:?}", r.status())
    }

    fn ok(extra: &'static str, tail: &'static [u8]) -> impl Fn(&str) -> Vec<u8> + Clone {
        move |accept| {
            let mut b = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n{extra}\r\n"
            )
            .into_bytes();
            b.extend_from_slice(tail);
            b
        }
    }

    fn fixed(text: String) -> impl Fn(&str) -> Vec<u8> + Clone {
        move |_| text.clone().into_bytes()
    }

    #[tokio::test]
    async fn the_answer_is_read_and_judged_as_tungstenite_judges_it() {
        let frame: &[u8] = b"\x81\x02hi";
        let (ours, theirs, tail) = both(ok("", frame), 1 << 20, vec![]).await;
        assert_eq!(ours, theirs);
        assert!(ours.starts_with("101"), "{ours}");
        assert_eq!(tail, frame);
        // The same in reads of 7 bytes: the tail is what the read that ended the head held.
        let (ours, theirs, tail) = both(ok("Server: x\r\n", frame), 7, vec![]).await;
        assert_eq!(ours, theirs);
        assert!(frame.starts_with(&tail), "{tail:?}");

        let refusals: Vec<(String, usize)> = vec![
            ("HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\nnope".into(), 1 << 20),
            ("HTTP/1.1 101 OK\r\nConnection: Upgrade\r\n\r\n".into(), 1 << 20),
            ("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n\r\n".into(), 1 << 20),
            ("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n".into(), 1 << 20),
            ("HTTP/1.1 abc\r\n\r\n".into(), 1 << 20),
            ("HTTP/1.0 101 OK\r\n\r\n".into(), 1 << 20),
            ("HTTP/1.1 101 OK\r\nUpgr".into(), 1 << 20),
            ("HTTP/1.1 101 OK\r\nBad Header: x\r\n\r\n".into(), 1 << 20),
            (format!("HTTP/1.1 101 OK\r\nx-pad: {}\r\n\r\n", "a".repeat(70_000)), 1 << 20),
            (format!("HTTP/1.1 101 OK\r\n{}\r\n", "x: y\r\n".repeat(40)), 2),
            (format!("HTTP/1.1 101 OK\r\n{}\r\n", "x: y\r\n".repeat(130)), 1 << 20),
        ];
        // Accepted or not by the quick reading exactly when by tungstenite's.
        let odd: &[&'static str] = &[
            "UPGRADE: WebSocket\r\nCONNECTION: upgrade\r\nsec-websocket-accept: {a}\r\n",
            "Upgrade: h2c\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {a}\r\n",
            "Upgrade: websocket\r\nConnection: Upgrade, keep-alive\r\nSec-WebSocket-Accept: {a}\r\n",
            "Upgrade:   websocket  \r\nConnection:Upgrade\r\nSec-WebSocket-Accept: {a}\r\nX-Odd: café ü\r\n",
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {a}\r\nSec-WebSocket-Extensions: permessage-deflate\r\nsec-websocket-extensions: x\r\n",
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {a}x\r\n",
        ];
        for head in odd {
            let respond = move |accept: &str| {
                let mut b = b"HTTP/1.1 101 Switching Protocols\r\n".to_vec();
                b.extend_from_slice(&head.replace("{a}", accept).into_bytes());
                b.extend_from_slice(b"\r\n");
                b
            };
            let (ours, theirs, _) = both(respond, 1 << 20, vec![]).await;
            assert_eq!(ours, theirs, "{head}");
        }
        for (text, piece) in refusals {
            let (ours, theirs, _) = both(fixed(text.clone()), piece, vec![]).await;
            assert_eq!(ours, theirs, "{text:.80}");
            assert!(!ours.starts_with("101"), "{text:.80}: {ours}");
        }
        // Subprotocols: none asked and one named; one asked and none named; another named.
        let (ours, theirs, _) =
            both(ok("Sec-WebSocket-Protocol: a\r\n", b""), 1 << 20, vec![]).await;
        assert_eq!(ours, theirs);
        assert!(
            ours.contains("ServerSentSubProtocolNoneRequested"),
            "{ours}"
        );
        let asked = vec![h("sec-websocket-protocol", "a, b")];
        let (ours, theirs, _) = both(ok("", b""), 1 << 20, asked.clone()).await;
        assert_eq!(ours, theirs);
        assert!(ours.contains("NoSubProtocol"), "{ours}");
        let (ours, theirs, _) = both(
            ok("Sec-WebSocket-Protocol: c\r\n", b""),
            1 << 20,
            asked.clone(),
        )
        .await;
        assert_eq!(ours, theirs);
        assert!(ours.contains("InvalidSubProtocol"), "{ours}");
        let (ours, theirs, _) =
            both(ok("Sec-WebSocket-Protocol: b\r\n", b""), 1 << 20, asked).await;
        assert_eq!(ours, theirs);
        assert!(ours.starts_with("101"), "{ours}");
    }
}
