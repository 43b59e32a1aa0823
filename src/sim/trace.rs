//! Ground truth: what the simulator did for each response, and exactly when.
//!
//! Owns: `Trace` (a shared, bounded map from response id to `ResponseTrace`) and its JSON
//! form for `GET /v1/sim/trace/{id}`. Does not own: deciding the timings (see `model`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Responses kept; older ones are forgotten first.
const MAX_TRACES: usize = 20_000;

/// One chunk of content handed to the connection.
#[derive(Debug, Clone)]
pub struct ChunkWrite {
    /// When the chunk's bytes left: the kernel's transmit stamp of the write that carried
    /// them when the socket gives one (`SO_TIMESTAMPING`), else the instant just before
    /// the connection wrote them (SSE: when hyper took the frame to encode and write it;
    /// WebSocket: just before the frame's send).
    pub at: Instant,
    /// Output tokens in the chunk.
    pub tokens: u32,
    /// The chunk's text (text delta, or function-call arguments delta).
    pub text: String,
    /// Filled with the transmit stamp once the kernel reports it.
    pub(crate) sent: Option<crate::clock::tx::Sent>,
}

impl ChunkWrite {
    /// With `at` moved to the transmit stamp, when one arrived.
    fn resolved(mut self) -> Self {
        if let Some(t) = self.sent.as_ref().and_then(|s| s.get()) {
            self.at = *t;
        }
        self
    }
}

impl ResponseTrace {
    fn resolved(mut self) -> Self {
        self.chunk_writes = self
            .chunk_writes
            .into_iter()
            .map(ChunkWrite::resolved)
            .collect();
        self
    }
}

/// Everything the simulator knows about one response.
#[derive(Debug, Clone)]
pub struct ResponseTrace {
    /// `resp_…` (Responses API) or `chatcmpl-…` (chat completions).
    pub response_id: String,
    /// When the request was fully read (HTTP body complete, or WebSocket frame received).
    pub received_at: Instant,
    /// Content chunks only (role preludes and lifecycle events carry no tokens and are not
    /// listed), in write order.
    pub chunk_writes: Vec<ChunkWrite>,
    /// Output tokens sent (equals the sum over `chunk_writes`).
    pub output_tokens: u32,
    /// Input tokens (instructions + the whole conversation).
    pub input_tokens: u32,
    /// Input tokens served from cached state (not prefilled again).
    pub cached_input_tokens: u32,
    /// API overhead before the model started.
    pub api_overhead: Duration,
    /// Time waiting for a free generation slot.
    pub queue: Duration,
    /// Prefill time.
    pub prefill: Duration,
    /// Session initialisation time (zero when continuing cached state).
    pub session_init: Duration,
    /// Injected fault, if any (its spec, e.g. `reset-after=3`).
    pub fault: Option<String>,
}

impl ResponseTrace {
    /// The trace as JSON with times as nanoseconds since `origin` (the server start).
    pub fn to_json(&self, origin: Instant) -> serde_json::Value {
        let ns = |t: Instant| t.saturating_duration_since(origin).as_nanos() as u64;
        let d = |d: Duration| d.as_nanos() as u64;
        serde_json::json!({
            "response_id": self.response_id,
            "received_at_ns": ns(self.received_at),
            "chunk_writes": self.chunk_writes.iter().map(|c| serde_json::json!({
                "at_ns": ns(c.at), "tokens": c.tokens, "text": c.text,
            })).collect::<Vec<_>>(),
            "output_tokens": self.output_tokens,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "api_overhead_ns": d(self.api_overhead),
            "queue_ns": d(self.queue),
            "prefill_ns": d(self.prefill),
            "session_init_ns": d(self.session_init),
            "fault": self.fault,
        })
    }
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, ResponseTrace>,
    /// Response ids in the order they were published, each with its sequence number.
    order: VecDeque<(u64, String)>,
    /// The sequence number the next published response gets (never reset).
    next: u64,
}

/// The simulator's ground truth, shared and cheap to clone.
#[derive(Clone)]
pub struct Trace {
    inner: Arc<Mutex<Inner>>,
    origin: Instant,
}

impl Trace {
    pub(crate) fn new(origin: Instant) -> Trace {
        Trace {
            inner: Arc::new(Mutex::new(Inner::default())),
            origin,
        }
    }

    /// The server's start instant (the zero of the JSON form).
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// The trace of one response: published once its last content chunk (or the fault that
    /// broke it) was written, before the terminal event, so a client that has read the
    /// terminal event always finds it.
    pub fn get(&self, response_id: &str) -> Option<ResponseTrace> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.map.get(response_id).cloned().map(ResponseTrace::resolved)
    }

    /// All kept traces, oldest first.
    pub fn all(&self) -> Vec<ResponseTrace> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.order
            .iter()
            .filter_map(|(_, id)| g.map.get(id).cloned().map(ResponseTrace::resolved))
            .collect()
    }

    /// The server's own time to first token of each response published at or after
    /// sequence number `since` that wrote a content chunk, in publishing order: from the
    /// request fully read to its first chunk's write (the kernel's transmit stamp when the
    /// socket gave one). Under load this includes the wait for a generation slot and for the
    /// simulator's own CPU, which the timing model's figures leave out. Also returns the
    /// sequence number the next response will get (pass it as `since` to see only what
    /// comes after now).
    pub fn ttfts_since(&self, since: u64) -> (Vec<Duration>, u64) {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let ttfts = g
            .order
            .iter()
            .filter(|(seq, _)| *seq >= since)
            .filter_map(|(_, id)| g.map.get(id))
            .filter_map(|t| {
                let first = t.chunk_writes.first()?;
                let at = first
                    .sent
                    .as_ref()
                    .and_then(|s| s.get())
                    .unwrap_or(&first.at);
                Some(at.saturating_duration_since(t.received_at))
            })
            .collect();
        (ttfts, g.next)
    }

    pub(crate) fn insert(&self, t: ResponseTrace) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if !g.map.contains_key(&t.response_id) {
            let seq = g.next;
            g.next += 1;
            g.order.push_back((seq, t.response_id.clone()));
        }
        g.map.insert(t.response_id.clone(), t);
        while g.order.len() > MAX_TRACES {
            if let Some((_, old)) = g.order.pop_front() {
                g.map.remove(&old);
            }
        }
    }
}
