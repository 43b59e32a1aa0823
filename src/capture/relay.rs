//! One downstream connection of the recording proxy: HTTP/1.1 or HTTP/2 (prior knowledge)
//! in, one upstream connection of the same protocol out, opened on the first request.
//!
//! Owns: header forwarding (hop-by-hop headers dropped, `Host` rewritten, everything else,
//! `Authorization` included, passed on and never kept), streaming the response body through
//! a tee that stamps each frame on arrival and hands it on in the same poll, and the hand-off
//! of each finished [`Exchange`] to the log. WebSocket upgrades go to [`super::ws`].

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{Exchange, Shared};
use crate::vocab::{Scheme, WireProtocol};

/// Any upstream byte stream (TCP or TLS over TCP).
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Dials the upstream with `TCP_NODELAY`, over TLS for https (ALPN `alpn`).
pub(crate) async fn dial(shared: &Shared, alpn: &[&[u8]]) -> anyhow::Result<Box<dyn Io>> {
    let up = &shared.upstream;
    let tcp = TcpStream::connect((up.host.as_str(), up.port))
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to the upstream {}: {e}", up.authority()))?;
    let _ = tcp.set_nodelay(true);
    match up.scheme {
        Scheme::Http => Ok(Box::new(tcp)),
        Scheme::Https => {
            let cfg = crate::tls::public_client_config(alpn)?;
            let name = rustls::pki_types::ServerName::try_from(up.host.clone())
                .map_err(|e| anyhow::anyhow!("bad upstream host {:?}: {e}", up.host))?;
            let tls = tokio_rustls::TlsConnector::from(cfg)
                .connect(name, tcp)
                .await
                .map_err(|e| anyhow::anyhow!("TLS to the upstream {}: {e}", up.authority()))?;
            Ok(Box::new(tls))
        }
    }
}

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

/// Headers never forwarded (hop-by-hop, or set by the upstream connection itself).
pub(crate) fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authorization"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

pub(crate) fn error_response(status: StatusCode, msg: &str) -> Response<TeeBody> {
    let body = serde_json::json!({"error": {"message": msg, "type": "proxy_error"}}).to_string();
    let mut r = Response::new(TeeBody::fixed(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
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
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(http::header::CONNECTION);
    parts.headers.remove("keep-alive");
    parts.version = Version::HTTP_11;
    Response::from_parts(
        parts,
        TeeBody {
            inner: Inner::Stream(body),
            rec: Some((x, shared)),
        },
    )
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

pub(crate) enum Inner {
    Stream(Incoming),
    Fixed(Option<Bytes>),
}

/// The response body handed to the client: each upstream frame is stamped, copied into the
/// exchange and returned in the same poll (no queue, no extra task). The exchange goes to the
/// log when the body ends, fails, or is dropped by a client that went away.
pub(crate) struct TeeBody {
    inner: Inner,
    rec: Option<(Exchange, Arc<Shared>)>,
}

impl TeeBody {
    pub(crate) fn fixed(b: Bytes) -> TeeBody {
        TeeBody {
            inner: Inner::Fixed(Some(b)),
            rec: None,
        }
    }

    fn finish(&mut self, error: Option<String>) {
        if let Some((mut x, shared)) = self.rec.take() {
            x.end_ns = shared.clock.now_ns();
            if x.error.is_none() {
                x.error = error;
            }
            let _ = shared.log.send(x);
        }
    }
}

impl Drop for TeeBody {
    fn drop(&mut self) {
        let ended = match &self.inner {
            Inner::Stream(s) => s.is_end_stream(),
            Inner::Fixed(_) => true,
        };
        let error = (!ended).then(|| "the client closed the stream before its end".to_string());
        self.finish(error);
    }
}

impl Body for TeeBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let inner = match &mut this.inner {
            Inner::Fixed(b) => return Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Inner::Stream(s) => s,
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(d), Some((x, shared))) = (frame.data_ref(), this.rec.as_mut()) {
                    x.chunks.push((shared.clock.now_ns(), d.clone()));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.finish(Some(format!("upstream body: {e}")));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.finish(None);
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Fixed(b) => b.is_none(),
            Inner::Stream(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Fixed(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Inner::Fixed(None) => SizeHint::with_exact(0),
            Inner::Stream(s) => s.size_hint(),
        }
    }
}
