//! One downstream connection of the recording proxy: HTTP/1.1 or HTTP/2 (prior knowledge)
//! in, one upstream connection of the same protocol out, opened on the first request.
//!
//! Owns: header forwarding (hop-by-hop headers dropped, `Host` rewritten, everything else,
//! `Authorization` included, passed on and never kept), streaming the response body through
//! the tee body ([`super::tee`]), and the hand-off of each failed [`Exchange`] to the log.
//! WebSocket upgrades go to [`super::ws`]. Does not own: dialling the upstream and the
//! hop-by-hop header list ([`super::upstream`]).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::tee::{error_response, TeeBody};
use super::upstream::{dial, hop_by_hop};
use super::{Exchange, Shared};
use crate::vocab::WireProtocol;

enum Upstream {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

struct ConnState {
    id: u64,
    requests: std::sync::atomic::AtomicU32,
    upstream: tokio::sync::Mutex<Option<Upstream>>,
}

/// Serves one downstream connection until it closes.
pub(crate) async fn serve_connection(tcp: TcpStream, shared: Arc<Shared>) {
    let _ = tcp.set_nodelay(true);
    let state = Arc::new(ConnState {
        id: shared.next_conn(),
        requests: Default::default(),
        upstream: tokio::sync::Mutex::new(None),
    });
    let svc = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        let state = state.clone();
        async move { Ok::<_, Infallible>(handle(req, shared, state).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let _ = builder
        .serve_connection_with_upgrades(TokioIo::new(tcp), svc)
        .await;
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
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("reading the request body: {e}"),
            )
        }
    };
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
    let up_req = match b.body(Full::new(body.clone())) {
        Ok(r) => r,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &format!("bad request: {e}")),
    };
    let mut x = Exchange {
        conn: st.id,
        conn_request,
        wire: if h2 {
            WireProtocol::Http2
        } else {
            WireProtocol::Http1
        },
        head_sent: super::write::head_len(
            up_req.method().as_str().len() + up_req.uri().to_string().len() + 12,
            up_req.headers(),
        ),
        path,
        body,
        start_ns,
        ..Default::default()
    };
    let sent = send(&shared, &st, h2, up_req, &mut x).await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("spark-bench record: upstream request failed: {e}");
            x.end_ns = shared.clock.now_ns();
            x.error = Some(msg.clone());
            let _ = shared.log.send(x);
            return error_response(StatusCode::BAD_GATEWAY, &msg);
        }
    };
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
    Response::from_parts(parts, TeeBody::stream(body, x, shared))
}

async fn send(
    shared: &Shared,
    st: &ConnState,
    h2: bool,
    req: Request<Full<Bytes>>,
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
