//! One downstream connection of the recording proxy: HTTP/1.1 or HTTP/2 (prior knowledge)
//! in, one upstream connection of the same protocol out, opened on the first request.
//!
//! Owns: header forwarding (hop-by-hop headers dropped, `Host` rewritten, everything else,
//! `Authorization` included, passed on and never kept), streaming the request body up
//! ([`super::reqbody`], 413 past the limit) and the response body down through the tee body
//! ([`super::tee`]), the header-read timeout, ending the connection when the recording stops,
//! and the hand-off of each failed or interrupted [`Exchange`] to the log.
//! WebSocket upgrades go to [`super::ws`]. Does not own: dialling the upstream and the
//! hop-by-hop header list ([`super::upstream`]).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, Request, Response, StatusCode, Version};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;

use super::reqbody::{Capture, ReqBody};
use super::tee::{error_response, TeeBody};
use super::upstream::{dial, hop_by_hop};
use super::{Exchange, Shared};
use crate::vocab::WireProtocol;

enum Upstream {
    H1(hyper::client::conn::http1::SendRequest<ReqBody>),
    H2(hyper::client::conn::http2::SendRequest<ReqBody>),
}

struct ConnState {
    id: u64,
    requests: std::sync::atomic::AtomicU32,
    upstream: tokio::sync::Mutex<Option<Upstream>>,
}

/// The HTTP/2 connection preface, which the protocol detection waits for.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Waits until the client has sent enough to tell HTTP/1.1 from HTTP/2 (the detection in
/// `hyper_util` has no timeout of its own); false if it closed first.
async fn preface(tcp: &TcpStream) -> bool {
    let mut buf = [0u8; 24];
    loop {
        match tcp.peek(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if n >= H2_PREFACE.len() || buf[..n] != H2_PREFACE[..n] => return true,
            // A partial preface: peek again once more may have come.
            Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
        }
    }
}

/// Serves one downstream connection until it closes, its client is too slow to send a
/// request head ([`super::Bounds::header_timeout`]), or the recording stops.
pub(crate) async fn serve_connection(tcp: TcpStream, shared: Arc<Shared>) {
    let _ = tcp.set_nodelay(true);
    let timeout = shared.bounds.header_timeout;
    if !matches!(tokio::time::timeout(timeout, preface(&tcp)).await, Ok(true)) {
        return;
    }
    let state = Arc::new(ConnState {
        id: shared.next_conn(),
        requests: Default::default(),
        upstream: tokio::sync::Mutex::new(None),
    });
    let stop = shared.clone();
    let svc = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        let state = state.clone();
        async move { Ok::<_, Infallible>(handle(req, shared, state).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), svc);
    // Dropping the connection at the stop drops each in-flight exchange's guard or tee
    // body, which logs it as interrupted.
    tokio::select! {
        _ = conn => {}
        _ = stop.stopped() => {}
    }
}

/// An exchange not yet handed to a [`TeeBody`]: logged as failed if dropped (the recording
/// stopped or the client went away before the upstream answered).
struct Pending {
    x: Option<Exchange>,
    /// The request body's bounded copy, once the body is being streamed.
    cap: Option<Arc<Mutex<Capture>>>,
    shared: Arc<Shared>,
}

impl Pending {
    /// Logs the exchange now with `status` and `error`.
    fn fail(mut self, status: Option<u16>, error: String) {
        self.log(status, error);
    }

    fn log(&mut self, status: Option<u16>, error: String) {
        if let Some(mut x) = self.x.take() {
            if let Some(cap) = self.cap.take() {
                x.body = cap.lock().unwrap_or_else(|p| p.into_inner()).take();
            }
            x.status = status.or(x.status);
            x.error = Some(error);
            x.end_ns = self.shared.clock.now_ns();
            let _ = self.shared.log.send(x);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.log(None, "interrupted before the upstream answered".into());
    }
}

fn is_ws_upgrade(h: &HeaderMap) -> bool {
    h.get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    st: Arc<ConnState>,
) -> Response<TeeBody> {
    let start_ns = shared.clock.now_ns();
    let conn_request = st
        .requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if is_ws_upgrade(req.headers()) {
        return super::ws::upgrade(req, shared, st.id, start_ns).await;
    }
    let h2 = req.version() == Version::HTTP_2;
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let limit = shared.bounds.max_request_body;
    let mut pending = Pending {
        x: Some(Exchange {
            conn: st.id,
            conn_request,
            wire: if h2 {
                WireProtocol::Http2
            } else {
                WireProtocol::Http1
            },
            path: path.clone(),
            start_ns,
            ..Default::default()
        }),
        cap: None,
        shared: shared.clone(),
    };
    let declared = hyper::body::Body::size_hint(&body).upper();
    if declared.is_some_and(|n| n > limit) {
        let msg = too_large(limit);
        pending.fail(Some(413), msg.clone());
        return error_response(StatusCode::PAYLOAD_TOO_LARGE, &msg);
    }
    let up_path = shared.upstream_path(&path);
    let uri = if h2 {
        shared
            .upstream
            .http_url(&up_path[shared.upstream.prefix.len()..])
    } else {
        up_path
    };
    let mut b = Request::builder().method(parts.method).uri(uri);
    if h2 {
        b = b.version(Version::HTTP_2);
    } else {
        b = b.header(http::header::HOST, shared.upstream.authority());
    }
    for (k, v) in &parts.headers {
        if !hop_by_hop(k.as_str()) {
            b = b.header(k, v);
        }
    }
    let (body, cap) = ReqBody::new(body, limit, shared.bounds.header_timeout);
    pending.cap = Some(cap.clone());
    let up_req = match b.body(body) {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("bad request: {e}");
            pending.fail(None, msg.clone());
            return error_response(StatusCode::BAD_REQUEST, &msg);
        }
    };
    let x = pending.x.as_mut().expect("the exchange is pending");
    x.head_sent = super::write::head_len(
        up_req.method().as_str().len() + up_req.uri().to_string().len() + 12,
        up_req.headers(),
    );
    let sent = send(&shared, &st, h2, up_req, x).await;
    let resp = match sent {
        Ok(r) => r,
        Err(_) if cap.lock().is_ok_and(|c| c.over) => {
            let msg = too_large(limit);
            pending.fail(Some(413), msg.clone());
            return error_response(StatusCode::PAYLOAD_TOO_LARGE, &msg);
        }
        Err(e) => {
            let msg = format!("spark-bench record: upstream request failed: {e}");
            pending.fail(None, msg.clone());
            return error_response(StatusCode::BAD_GATEWAY, &msg);
        }
    };
    pending.cap = None;
    let mut x = pending.x.take().expect("the exchange is pending");
    x.headers_ns = Some(shared.clock.now_ns());
    x.status = Some(resp.status().as_u16());
    x.head_received = super::write::head_len(
        13 + resp.status().canonical_reason().map_or(0, str::len) + 2,
        resp.headers(),
    );
    x.chunked = !resp.headers().contains_key(http::header::CONTENT_LENGTH);
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(http::header::CONNECTION);
    parts.headers.remove("keep-alive");
    parts.version = Version::HTTP_11;
    Response::from_parts(parts, TeeBody::stream(body, x, cap, shared))
}

fn too_large(limit: u64) -> String {
    format!(
        "spark-bench record: the request body is over the proxy's limit of {} MiB; refused, not sent upstream",
        limit >> 20
    )
}

async fn send(
    shared: &Shared,
    st: &ConnState,
    h2: bool,
    req: Request<ReqBody>,
    x: &mut Exchange,
) -> anyhow::Result<Response<Incoming>> {
    let mut guard = st.upstream.lock().await;
    let usable = match guard.as_ref() {
        Some(Upstream::H1(s)) => !s.is_closed(),
        Some(Upstream::H2(s)) => !s.is_closed(),
        None => false,
    };
    if !usable {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let io = TokioIo::new(dial(shared, alpn).await?);
        *guard = Some(if h2 {
            let (s, c) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .handshake(io)
                .await?;
            tokio::spawn(c);
            Upstream::H2(s)
        } else {
            let (s, c) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(c);
            Upstream::H1(s)
        });
    }
    match guard.as_mut() {
        Some(Upstream::H1(s)) => {
            s.ready().await?;
            x.sent_ns = shared.clock.now_ns();
            Ok(s.send_request(req).await?)
        }
        Some(Upstream::H2(s)) => {
            let mut s = s.clone();
            drop(guard);
            s.ready().await?;
            x.sent_ns = shared.clock.now_ns();
            Ok(s.send_request(req).await?)
        }
        None => anyhow::bail!("no upstream connection"),
    }
}
