//! The request body the recording proxy streams to the upstream, keeping a bounded copy for
//! the recording.
//!
//! Owns: [`ReqBody`], which hands each client body frame on as it arrives and copies it into
//! a [`Capture`] up to the proxy's request-body limit; past the limit it fails the body (the
//! upstream request is aborted, never sent in full) and the relay answers 413. Memory per
//! request is at most the limit, whatever the body's size. A client that sends no byte of its
//! body for the header timeout fails it too ([`Stalled`]), so an unfinished body cannot
//! hold a connection after its answer. Does not own: the limit's value
//! ([`super::Bounds`]), the 413 answer (`relay`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// What the recording keeps of one request body.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    /// The body's bytes so far (at most the limit).
    pub buf: BytesMut,
    /// Body bytes seen (forwarded or refused).
    pub total: u64,
    /// The body went past the limit: refused.
    pub over: bool,
}

impl Capture {
    /// The kept body, leaving the capture empty.
    pub fn take(&mut self) -> Bytes {
        std::mem::take(&mut self.buf).freeze()
    }
}

/// The error a body past the limit fails with.
#[derive(Debug)]
pub(crate) struct TooLarge(pub u64);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body is over the proxy's limit of {} bytes",
            self.0
        )
    }
}

impl std::error::Error for TooLarge {}

/// The client's body, streamed on frame by frame and copied into `cap` up to `limit` bytes.
pub(crate) struct ReqBody {
    inner: Incoming,
    cap: Arc<Mutex<Capture>>,
    limit: u64,
    /// How long the client may go without sending a byte of its body.
    idle: std::time::Duration,
    /// Armed while the body is pending; reset by every frame.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// A client that stopped sending its request body (`--header-timeout` without a byte).
#[derive(Debug)]
pub(crate) struct Stalled(pub std::time::Duration);

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the client sent no byte of its request body for {:?}",
            self.0
        )
    }
}

impl std::error::Error for Stalled {}

impl ReqBody {
    pub(crate) fn new(
        inner: Incoming,
        limit: u64,
        idle: std::time::Duration,
    ) -> (ReqBody, Arc<Mutex<Capture>>) {
        let cap = Arc::new(Mutex::new(Capture::default()));
        (
            ReqBody {
                inner,
                cap: cap.clone(),
                limit,
                idle,
                timer: None,
            },
            cap,
        )
    }
}

impl Body for ReqBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                let idle = this.idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(Stalled(idle))))),
                    Poll::Pending => Poll::Pending,
                }
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(Some(Ok(frame))) => {
                this.timer = None;
                if let Some(d) = frame.data_ref() {
                    let mut cap = this.cap.lock().unwrap_or_else(|p| p.into_inner());
                    cap.total += d.len() as u64;
                    if cap.total > this.limit {
                        cap.over = true;
                        cap.buf = BytesMut::new();
                        return Poll::Ready(Some(Err(Box::new(TooLarge(this.limit)))));
                    }
                    cap.buf.extend_from_slice(d);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
