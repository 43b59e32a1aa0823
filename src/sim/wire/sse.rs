//! The SSE body: a response whose frames a generating task feeds through a channel, and the
//! sinks the model writes into ([`SseSink`] for streams, [`NullSink`] for whole answers).
//!
//! The ground-truth instant of a chunk is taken here, when hyper's connection task takes the
//! frame to encode and write it.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Frame;
use tokio::sync::{mpsc, oneshot};

use super::{Body, Conn, Ctx};
use crate::clock::tx::{Chain, TxLog};
use crate::sim::model::{Break, Sink, Written};

/// SSE frames buffered between the generator and hyper.
const SSE_BUFFER: usize = 64;

impl Ctx {
    /// An SSE response whose body is fed by the returned sink.
    pub fn sse(&self) -> (Response<Body>, SseSink) {
        let (tx, rx) = mpsc::channel(SSE_BUFFER);
        let mut r = self.respond(
            StatusCode::OK,
            "text/event-stream; charset=utf-8",
            ChannelBody {
                rx,
                tx: self.conn.tx.clone().map(|log| (log, Chain::None)),
            }
            .boxed(),
        );
        r.headers_mut().insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        );
        (
            r,
            SseSink {
                tx,
                conn: self.conn.clone(),
            },
        )
    }
}

/// A frame for the body, and where to report the instant hyper took it.
type Queued = (Bytes, Option<oneshot::Sender<Written>>);

/// An SSE body fed from a channel; ends when the sender is dropped.
///
/// The ground-truth instant of an SSE chunk is when hyper's connection task takes it from
/// here to encode and write it, not when the generating task queued it: the two are one task
/// wake-up apart (~70 µs median on the 2-core test machine, more under load).
struct ChannelBody {
    rx: mpsc::Receiver<Queued>,
    /// The socket's transmit stamps, and this response's chain in them.
    tx: Option<(Arc<TxLog>, Chain)>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        this.rx.poll_recv(cx).map(|o| {
            o.map(|(b, stamp)| {
                if let Some(tx) = stamp {
                    let _ = tx.send(Written {
                        at: crate::clock::now(),
                        sent: this
                            .tx
                            .as_mut()
                            .map(|(log, chain)| log.watch(b.len(), chain)),
                    });
                }
                Ok(Frame::data(b))
            })
        })
    }
}

/// Writes SSE frames into the hyper body channel.
pub(crate) struct SseSink {
    tx: mpsc::Sender<Queued>,
    conn: Arc<Conn>,
}

impl SseSink {
    /// Queues one frame and waits until hyper takes it; returns that instant.
    async fn push(&mut self, frame: String) -> Result<Written, ()> {
        let (stamp_tx, stamp_rx) = oneshot::channel();
        self.tx
            .send((Bytes::from(frame), Some(stamp_tx)))
            .await
            .map_err(|_| ())?;
        stamp_rx.await.map_err(|_| ())
    }
}

impl Sink for SseSink {
    async fn send(&mut self, event: &str, data: String) -> Result<Written, ()> {
        let mut frame = String::with_capacity(event.len() + data.len() + 16);
        sse_event(&mut frame, event, &data);
        self.push(frame).await
    }

    async fn send_group(&mut self, events: Vec<(String, String)>) -> Result<Vec<Written>, ()> {
        // One body frame: hyper writes it (chunk-size line, events, CRLF) in one write.
        let mut frame = String::new();
        for (event, data) in &events {
            sse_event(&mut frame, event, data);
        }
        let w = self.push(frame).await?;
        Ok(vec![w; events.len()])
    }

    async fn send_raw(&mut self, data: String) -> Result<Written, ()> {
        self.push(format!("data: {data}\n\n")).await
    }

    async fn break_stream(&mut self, how: Break) {
        if how == Break::Reset {
            // Let hyper take the frames already queued, so the client sees the N chunks
            // before the reset, then abort the whole connection.
            let _ = self.tx.reserve_many(SSE_BUFFER).await;
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.conn.reset.store(true, Ordering::SeqCst);
            self.conn.kill.cancel();
            // Keep the body open until the connection is gone, or hyper could still end
            // the body cleanly when this sender is dropped.
            self.tx.closed().await;
        }
    }
}

/// Appends one SSE event (`event:` line when named, then `data:`).
fn sse_event(out: &mut String, event: &str, data: &str) {
    if !event.is_empty() {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
}

/// A sink for non-streaming requests: paces the model but writes nothing.
pub(crate) struct NullSink;

impl Sink for NullSink {
    async fn send(&mut self, _event: &str, _data: String) -> Result<Written, ()> {
        Ok(Written::now())
    }
    async fn send_group(&mut self, events: Vec<(String, String)>) -> Result<Vec<Written>, ()> {
        Ok(vec![Written::now(); events.len()])
    }
    async fn send_raw(&mut self, _data: String) -> Result<Written, ()> {
        Ok(Written::now())
    }
    async fn break_stream(&mut self, _how: Break) {}
}
