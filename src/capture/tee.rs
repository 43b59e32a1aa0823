//! The response body the recording proxy hands to its client, and its error answers.
//!
//! Owns: [`TeeBody`], which stamps each upstream frame on arrival, copies it into the
//! [`Exchange`] and hands it on in the same poll, then sends the exchange to the log when
//! the body ends; and the proxy's JSON error response. Used by the HTTP relay (`relay`) and
//! the WebSocket upgrade (`ws`). Does not own: opening the upstream (`upstream`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode};
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::reqbody::Capture;
use super::{Exchange, Shared};

/// A proxy error as the client sees it: `status` with an OpenAI-style JSON error body.
pub(crate) fn error_response(status: StatusCode, msg: &str) -> Response<TeeBody> {
    let body = serde_json::json!({"error": {"message": msg, "type": "proxy_error"}}).to_string();
    let mut r = Response::new(TeeBody::fixed(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    // The request's body may be unread (refused before it was read, or its upstream failed):
    // close the connection after the answer, so a client that never finishes that body
    // cannot hold it (HTTP/2 drops the header and ends the stream only).
    r.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    r
}

/// The exchange's error when its client hung up before the body's end (see
/// [`super::parse::parse`] for when that still leaves the response whole).
pub(crate) const CLIENT_LEFT: &str = "the client closed the stream before its end";

/// Where a [`TeeBody`]'s bytes come from: the upstream's body, or one fixed chunk.
enum Inner {
    Stream(Incoming),
    Fixed(Option<Bytes>),
}

/// The response body handed to the client: each upstream frame is stamped, copied into the
/// exchange and returned in the same poll (no queue, no extra task). The exchange goes to the
/// log when the body ends, fails, or is dropped by a client that went away.
pub(crate) struct TeeBody {
    inner: Inner,
    rec: Option<(Exchange, Arc<Shared>)>,
    /// The request body's bounded copy, moved into the exchange when it ends.
    req: Option<Arc<std::sync::Mutex<Capture>>>,
}

impl TeeBody {
    /// The upstream's `body`, teed into `x`, which goes to `shared`'s log when it ends with
    /// the request body kept in `req` (an upstream may answer before the request is sent).
    pub(crate) fn stream(
        body: Incoming,
        x: Exchange,
        req: Arc<std::sync::Mutex<Capture>>,
        shared: Arc<Shared>,
    ) -> TeeBody {
        TeeBody {
            inner: Inner::Stream(body),
            rec: Some((x, shared)),
            req: Some(req),
        }
    }

    /// One fixed chunk, recorded nowhere (the proxy's own answers).
    pub(crate) fn fixed(b: Bytes) -> TeeBody {
        TeeBody {
            inner: Inner::Fixed(Some(b)),
            rec: None,
            req: None,
        }
    }

    fn finish(&mut self, error: Option<String>) {
        if let Some((mut x, shared)) = self.rec.take() {
            x.end_ns = shared.clock.now_ns();
            if let Some(req) = self.req.take() {
                x.body = req.lock().unwrap_or_else(|p| p.into_inner()).take();
            }
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
        let error = (!ended).then(|| {
            let stopped = self.rec.as_ref().is_some_and(|(_, s)| *s.stop.borrow());
            if stopped {
                "interrupted: the recording stopped before the response ended".to_string()
            } else {
                CLIENT_LEFT.to_string()
            }
        });
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
