//! One request: ties a session's transport to its backend and fills one [`RequestRecord`].
//!
//! Owns: the order of one exchange (dispatch stamp → one transport turn
//! ([`SessionTransport::turn`], which asks the backend's [`TurnRequest`] for the body once it
//! knows the connection) with its wire events through the decoder → record), the mapping of
//! transport endings and stream events to outcomes, per-chunk tokens (a server usage that is
//! impossible for the bytes and time is not trusted: `usage-rejected`), and updating the
//! conversation with the reply (so chaining state always matches what was sent).
//! Does not own: pacing, think time, tool execution or what the next turn says (the driver),
//! nor connections, re-sends or JSON (transport, backend).
//!
//! Never panics and never returns an error: every failure is a record with an outcome.

use tokio_util::sync::CancellationToken;

use crate::backend::request::{RequestSpec as Spec, TurnRequest};
use crate::backend::tokens::{self, ChunkInfo};
use crate::backend::{Decoder, StreamEvent};
use crate::plan::Target;
use crate::transport::limits::CHUNKS_KEPT;
use crate::transport::{Ending, Exchanged, Flow, Limits, WireEvent};
use crate::vocab::{
    Chaining, Chunk, OutcomeKind, RequestKind, RequestRecord, ServerTiming, TokenSource,
    TransportKind,
};

pub use crate::backend::conversation::{Conversation, Reply};
pub use crate::backend::request::RequestSpec;
pub use crate::backend::{ToolCall, ToolChoice};
pub use crate::clock::Clock;
pub use crate::transport::{Connector, SessionTransport, Trust};

/// Chunks a response's list has room for at its first (16 bytes each).
const FIRST_CHUNKS: usize = 128;

/// Identity and schedule of one request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordMeta {
    /// Sequence number in the run.
    pub id: u64,
    /// Session index within its cell.
    pub session: u32,
    /// The scenario turn the request belongs to (0-based, after `repeat`): the same on every
    /// transport, since a WebSocket warm-up and an agent loop's tool-result requests carry
    /// the turn they serve.
    pub turn: u32,
    /// Request index within its session (0-based, counting every request).
    pub request: u32,
    /// Request index within its turn: 0 for the user's request (and a warm-up), 1, 2, … for
    /// the tool-result requests that follow it.
    pub step: u32,
    /// Intended send time, ns since run start.
    pub intended_ns: u64,
    /// Warm-up session (excluded from statistics).
    pub warmup: bool,
}

/// What the decoder said, collected with arrival times.
#[derive(Default)]
struct Acc {
    headers_ns: Option<u64>,
    first_event_ns: Option<u64>,
    end_ns: Option<u64>,
    /// The first [`CHUNKS_KEPT`] content chunks.
    chunks: Vec<(u64, ChunkInfo)>,
    /// Content chunks past [`CHUNKS_KEPT`]: counted, not kept ...
    dropped: u64,
    /// ... but for the last one (its time ends the stream's tokens, its cumulative usage
    /// counts them).
    dropped_last: Option<(u64, ChunkInfo)>,
    input: Option<u32>,
    cached: Option<u32>,
    output: Option<u32>,
    timing: Option<ServerTiming>,
    response_id: Option<String>,
    tool_calls: Vec<ToolCall>,
    terminal: Option<StreamEvent>,
    /// The server said it closes the connection after this response.
    connection_expired: bool,
}

impl Acc {
    fn apply(&mut self, at_ns: u64, ev: StreamEvent) {
        match ev {
            StreamEvent::FirstEvent => {
                self.first_event_ns.get_or_insert(at_ns);
            }
            StreamEvent::Content {
                text_len,
                cumulative_usage,
                ..
            } => {
                let info = ChunkInfo {
                    text_bytes: text_len,
                    cumulative: cumulative_usage,
                };
                if self.chunks.len() < CHUNKS_KEPT {
                    if self.chunks.capacity() == 0 {
                        // Room for a short answer at once, not six steps of growth to it.
                        self.chunks.reserve(FIRST_CHUNKS);
                    }
                    self.chunks.push((at_ns, info));
                } else {
                    // A flood of events must not grow memory without bound (nor chunks.csv).
                    self.dropped += 1;
                    self.dropped_last = Some((at_ns, info));
                }
            }
            StreamEvent::ToolCall(c) => self.tool_calls.push(c),
            StreamEvent::Usage {
                input,
                cached,
                output,
            } => {
                self.input = input.or(self.input);
                self.cached = cached.or(self.cached);
                self.output = output.or(self.output);
            }
            StreamEvent::ServerTiming(t) => {
                // Body timing (provider fields) beats the header, which only covers the time
                // until the response headers of a stream.
                let keep_old = self.timing.as_ref().is_some_and(|old| {
                    old.source != "openai-processing-ms" && t.source == "openai-processing-ms"
                });
                if !keep_old {
                    self.timing = Some(t);
                }
            }
            StreamEvent::ResponseId(id) => self.response_id = Some(id),
            StreamEvent::ConnectionExpired => self.connection_expired = true,
            ev @ (StreamEvent::Done { .. } | StreamEvent::Error { .. }) => {
                if self.terminal.is_none() {
                    self.end_ns = Some(at_ns);
                    self.terminal = Some(ev);
                }
            }
        }
    }
}

impl Acc {
    /// Takes one wire event: notes its arrival where it marks one, decodes it, and says
    /// whether the transport should keep delivering.
    fn take(&mut self, decoder: &mut Decoder, ev: WireEvent) -> Flow {
        let at = ev.at_ns();
        match &ev {
            WireEvent::Headers { .. } => self.headers_ns = Some(at),
            WireEvent::End { .. } => {
                self.end_ns.get_or_insert(at);
            }
            _ => {}
        }
        decoder.decode(&ev, &mut |se| self.apply(at, se));
        if self.terminal.is_some() {
            Flow::Stop
        } else {
            Flow::Continue
        }
    }
}

/// Runs one request on `conn` and returns its record and the reply. The conversation is
/// updated with the reply (`on_reply`, or `on_new_socket` when a WebSocket was opened); the
/// caller adds the next user message or tool outputs.
///
/// `spec.kind == Warmup` sends a `generate:false` warm-up; it needs the `ws` transport.
pub async fn exchange(
    conn: &mut SessionTransport,
    target: &Target,
    conv: &mut Conversation,
    spec: &Spec,
    meta: &RecordMeta,
    cancel: &CancellationToken,
) -> (RequestRecord, Reply) {
    let clock = conn.clock();
    let dispatch_ns = clock.now_ns();
    let limits = Limits {
        deadline: clock.instant(dispatch_ns) + target.request_timeout,
        stall: target.stall_timeout,
    };
    let kind = conn.kind();
    let mut rec = new_record(meta, target, spec, kind, dispatch_ns);
    let mut decoder = Decoder::new(target.api);
    let mut acc = Acc::default();
    let on_warmup = conv.chains_on_warmup();
    let exchanged = if cancel.is_cancelled() {
        Err((OutcomeKind::Cancelled, "cancelled before dispatch".into()))
    } else {
        let mut req = TurnRequest::new(target, conv, spec);
        let mut sink = |ev: WireEvent| acc.take(&mut decoder, ev);
        let turned = conn.turn(&mut req, limits, cancel, &mut sink).await;
        // How the history went in the body that was sent (built after any `on_new_socket`).
        if let Some(chaining) = req.chaining {
            rec.chaining = chaining;
        }
        turned.map_err(|e| (OutcomeKind::ProtocolError, e))
    };

    fill_ending(&mut rec, exchanged, &acc, target, clock.now_ns());
    if on_warmup && rec.chaining == Chaining::PreviousResponseId {
        warmup_not_kept(&mut rec);
    }
    fill_tokens(&mut rec, &mut acc);
    scrub_server_texts(&mut rec, target, conn.connector().proxy());

    let reply = Reply {
        ok: rec.outcome == OutcomeKind::Ok,
        response_id: acc.response_id,
        tool_calls: acc.tool_calls,
        text: decoder.take_text(),
        warmup: spec.kind == RequestKind::Warmup,
    };
    if kind == TransportKind::Ws && acc.connection_expired {
        // The server closes the socket after this envelope (60-minute limit): reconnect on
        // the next turn instead of failing it on a dead socket.
        conn.close_ws();
    }
    conv.on_reply(&reply);
    if reply.ok && spec.kind == RequestKind::Warmup {
        conn.set_ws_warmed();
    }
    (rec, reply)
}

/// A request chained on a warm-up's response id that the server says it does not hold: the
/// server kept no state for the `generate:false` warm-up (llmsim 0.6 keeps none). The error
/// says what to change, since every session's first turn will fail the same way.
fn warmup_not_kept(rec: &mut RequestRecord) {
    if let Some(e) = rec.error.as_mut() {
        if rec.outcome == OutcomeKind::ServerError && e.starts_with("previous_response_not_found") {
            e.push_str(
                " (it chained on the warm-up's response, which this server did not keep: set \
                 `ws_warmup = false` in the target)",
            );
        }
    }
}

/// The record of a request dispatched at `dispatch_ns`, before anything happened to it.
fn new_record(
    meta: &RecordMeta,
    target: &Target,
    spec: &Spec,
    kind: TransportKind,
    dispatch_ns: u64,
) -> RequestRecord {
    RequestRecord {
        id: meta.id,
        target: target.name.clone(),
        transport: kind,
        session: meta.session,
        turn: meta.turn,
        request: meta.request,
        step: meta.step,
        kind: spec.kind,
        warmup: meta.warmup,
        intended_ns: meta.intended_ns,
        dispatch_ns,
        protocol: kind.wire_protocol(),
        ..RequestRecord::default()
    }
}

/// Fills what the transport reported and how the request ended (`now`: when the exchange
/// returned). `Err` is a request that never went out: its outcome and message.
fn fill_ending(
    rec: &mut RequestRecord,
    exchanged: Result<Exchanged, (OutcomeKind, String)>,
    acc: &Acc,
    target: &Target,
    now: u64,
) {
    match exchanged {
        Err((outcome, msg)) => {
            rec.outcome = outcome;
            rec.error = Some(msg);
            rec.end_ns = Some(now);
        }
        Ok(x) => {
            rec.dns_ns = x.setup.dns_ns;
            rec.tcp_connect_ns = x.setup.tcp_connect_ns;
            rec.proxy_connect_ns = x.setup.proxy_connect_ns;
            rec.reconnects = x.reconnects;
            rec.tls_handshake_ns = x.setup.tls_handshake_ns;
            rec.ws_upgrade_ns = x.setup.ws_upgrade_ns;
            rec.connection_reused = x.setup.reused;
            rec.connection_id = x.setup.connection_id;
            rec.alpn = x.setup.alpn.clone();
            rec.protocol = x.protocol;
            rec.request_written_ns = x.request_written_ns;
            rec.bytes_sent = x.bytes_sent;
            rec.bytes_received = x.bytes_received;
            let (outcome, status, error) = outcome_of(acc.terminal.as_ref(), &x.ending, target);
            rec.outcome = outcome;
            rec.http_status = status;
            rec.error = error;
            // The terminal event's arrival; a failure ends when the stream ended or we gave up.
            rec.end_ns = Some(acc.end_ns.unwrap_or(now));
        }
    }
}

/// Fills the decoder's findings: event times, per-chunk tokens, usage, timing, ids.
fn fill_tokens(rec: &mut RequestRecord, acc: &mut Acc) {
    rec.response_headers_ns = acc.headers_ns;
    rec.first_event_ns = acc.first_event_ns;
    let infos: Vec<ChunkInfo> = acc.chunks.iter().map(|c| c.1).collect();
    // Past the cap, the last dropped chunk's cumulative usage (when the server sends one)
    // still counts every token; without usage every dropped chunk counts one.
    let dropped_cumulative = acc.dropped_last.and_then(|(_, i)| i.cumulative);
    let (mut per_chunk, mut total, mut source) =
        tokens::split(&infos, acc.output.or(dropped_cumulative));
    let chunks_seen = infos.len() as u64 + acc.dropped;
    if source == TokenSource::ServerUsage && !plausible_usage(total, chunks_seen, rec) {
        // A count the bytes and the time could not have carried is not trusted.
        per_chunk = vec![1; infos.len()];
        total = infos.len() as u32;
        source = TokenSource::UsageRejected;
    }
    if acc.dropped > 0 && source != TokenSource::ServerUsage {
        total = total.saturating_add(u32::try_from(acc.dropped).unwrap_or(u32::MAX));
    }
    rec.chunks = acc
        .chunks
        .iter()
        .zip(per_chunk)
        .map(|((at, info), t)| Chunk {
            at_ns: *at,
            tokens: t,
            text_bytes: info.text_bytes,
        })
        .collect();
    rec.first_token_ns = rec.chunks.first().map(|c| c.at_ns);
    rec.last_token_ns = acc
        .dropped_last
        .map(|(at, _)| at)
        .or(rec.chunks.last().map(|c| c.at_ns));
    rec.chunks_dropped = acc.dropped;
    rec.output_tokens = total;
    rec.token_source = source;
    rec.input_tokens = acc.input;
    rec.cached_input_tokens = acc.cached;
    rec.server_timing = acc.timing.take();
    rec.response_id = acc.response_id.clone();
    rec.tool_calls = acc.tool_calls.len() as u32;
}

/// Output tokens faster than this, per request, are impossible (the fastest engines stream a
/// few thousand per second; hidden reasoning tokens are counted but never sent, so the bound
/// is on time, not only on bytes).
pub const MAX_TOKENS_PER_SECOND: u64 = 1_000_000;

/// Whether a server-reported output count is possible for what the server sent: at most one
/// token per byte received, per content chunk, plus [`MAX_TOKENS_PER_SECOND`] over the time
/// from dispatch to the end (so hidden reasoning tokens still fit).
fn plausible_usage(total: u32, chunks: u64, rec: &RequestRecord) -> bool {
    let end = rec.end_ns.or(rec.last_token_ns).unwrap_or(rec.dispatch_ns);
    let elapsed_ns = end.saturating_sub(rec.dispatch_ns);
    let by_time = (elapsed_ns as u128 * MAX_TOKENS_PER_SECOND as u128 / 1_000_000_000) as u64;
    u64::from(total)
        <= rec
            .bytes_received
            .saturating_add(chunks)
            .saturating_add(by_time)
}

/// Scrubs every text of the record that the server had a say in (error, response id,
/// ALPN, server-timing source) with the target's one redaction set
/// ([`crate::backend::request::secrets`]) and its proxy's credentials
/// ([`crate::vocab::Proxy::secrets`]) before it is written: a server may echo a key
/// (a 401 body, a refused upgrade quoting the header, the key as the response id), and a
/// proxy its `Proxy-Authorization` (a 407, or the far end of a tunnel). The
/// excerpts in those texts were cut with [`crate::vocab::redact::excerpt`], which never
/// cuts a key in two; a key cut anyway is caught by its 8+ byte start.
fn scrub_server_texts(
    rec: &mut RequestRecord,
    target: &Target,
    proxy: Option<&crate::vocab::Proxy>,
) {
    let mut secrets = crate::backend::request::secrets(target);
    if let Some(p) = proxy {
        secrets.extend(&p.secrets());
    }
    for t in [&mut rec.error, &mut rec.response_id, &mut rec.alpn] {
        if let Some(v) = t.as_mut() {
            secrets.scrub_in_place(v);
        }
    }
    if let Some(t) = rec.server_timing.as_mut() {
        secrets.scrub_in_place(&mut t.source);
    }
}

fn outcome_of(
    terminal: Option<&StreamEvent>,
    ending: &Ending,
    target: &Target,
) -> (OutcomeKind, Option<u16>, Option<String>) {
    match terminal {
        Some(StreamEvent::Done { ok: true }) => (OutcomeKind::Ok, None, None),
        Some(StreamEvent::Done { ok: false }) => (
            OutcomeKind::ServerError,
            None,
            Some("the response ended unsuccessfully".into()),
        ),
        Some(StreamEvent::Error {
            kind,
            status,
            message,
        }) => (*kind, *status, Some(message.clone())),
        _ => match ending {
            Ending::Finished => (
                OutcomeKind::Truncated,
                None,
                Some("the stream ended before its terminal event".into()),
            ),
            Ending::Connect(m) => (OutcomeKind::ConnectError, None, Some(m.clone())),
            Ending::Tls(m) => (OutcomeKind::TlsError, None, Some(m.clone())),
            // An error status on the upgrade is what the same server says to a POST: the
            // same kind on every transport. 426 (and a non-101 success) is about the upgrade.
            Ending::Upgrade(Some(s), m) if *s >= 400 && *s != 426 => {
                (OutcomeKind::HttpStatus, Some(*s), Some(m.clone()))
            }
            Ending::Upgrade(s, m) => (OutcomeKind::UpgradeError, *s, Some(m.clone())),
            Ending::Protocol(m) => (OutcomeKind::ProtocolError, None, Some(m.clone())),
            Ending::TooLarge(m) => (OutcomeKind::TooLarge, None, Some(m.clone())),
            Ending::Local(m) => (OutcomeKind::LocalError, None, Some(m.clone())),
            Ending::Stall => (
                OutcomeKind::Timeout,
                None,
                Some(format!(
                    "no bytes for {} (stall timeout)",
                    crate::units::fmt_duration_spec(target.stall_timeout)
                )),
            ),
            Ending::Deadline => (
                OutcomeKind::Timeout,
                None,
                Some(format!(
                    "request exceeded {} (request timeout)",
                    crate::units::fmt_duration_spec(target.request_timeout)
                )),
            ),
            Ending::Cancelled => (OutcomeKind::Cancelled, None, Some("cancelled".into())),
            Ending::Io(m) => (OutcomeKind::Truncated, None, Some(m.clone())),
            Ending::Stale(m) | Ending::Unread(m) => {
                (OutcomeKind::StaleConnection, None, Some(m.clone()))
            }
            Ending::WsClose(1011, r) => (
                OutcomeKind::ServerError,
                None,
                Some(format!(
                    "WebSocket closed by the server with 1011 (internal error) {r}"
                )),
            ),
            Ending::WsClose(code, r) => (
                OutcomeKind::Truncated,
                None,
                Some(format!(
                    "WebSocket closed with code {code} before the terminal event {r}"
                )),
            ),
        },
    }
}
