//! Backend: protocol adapters for the OpenAI-compatible APIs.
//!
//! Owns: per-session conversation state and the chaining rule ([`conversation`]), what a
//! request asks for ([`RequestSpec`]), its headers ([`request`]) and its body (`body.rs`),
//! decoders that turn stamped wire events into [`StreamEvent`]s ([`chat`], [`responses`], with
//! [`scan`] their fast path), provider timing ([`timing`]) and the per-chunk token split
//! ([`tokens`]).
//! Does not own: sockets, clocks or sleeps. Times come from the transport on the wire
//! events; decoders never read a clock.

mod body;
pub mod chat;
pub mod conversation;
pub mod request;
pub mod responses;
pub mod scan;
pub mod timing;
pub mod tokens;

use serde::{Deserialize, Serialize};

pub use conversation::{Conversation, Item};

use crate::transport::WireEvent;
use crate::vocab::{ApiFlavour, OutcomeKind, RequestKind, ServerTiming};

/// Which function the model is asked to call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    #[default]
    Auto,
    /// No tool calls (`"none"`).
    None,
    /// Force this function.
    Function(String),
    /// Parallel tool calls: one call of each function listed, in one response
    /// (`allowed_tools` with mode `required`; the embedded simulator makes exactly these).
    Parallel(Vec<String>),
}

/// What one request asks for.
#[derive(Debug, Clone, Default)]
pub struct RequestSpec {
    /// User prompt, tool result or warm-up.
    pub kind: RequestKind,
    /// `max_output_tokens` / `max_tokens`.
    pub max_output_tokens: u32,
    /// Tool choice for this request.
    pub tool_choice: ToolChoice,
    /// Function tools offered (one per name).
    pub tools: Vec<String>,
    /// Simulator fault spec (`status=500`, `stall=5s`, `reset-after=3`).
    pub fault: Option<String>,
    /// Chat: ask for cumulative usage on every chunk (vLLM `continuous_usage_stats`).
    pub continuous_usage_stats: bool,
}

/// A function call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ToolCall {
    /// `call_…` id to answer with.
    pub call_id: String,
    /// Function name.
    pub name: String,
    /// JSON arguments as sent by the model.
    pub arguments: String,
}

/// What a content chunk carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    /// Answer text.
    Text,
    /// Reasoning text (counted as output, not part of the reply).
    Reasoning,
    /// Tool-call argument text (counted as output: the model generated it).
    ToolArguments,
}

/// One thing a response said, in protocol-neutral terms.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The first protocol event of this response (not stale frames of an earlier one).
    FirstEvent,
    /// A token-bearing delta.
    Content {
        /// What it was.
        kind: ContentKind,
        /// UTF-8 bytes of the delta.
        text_len: u32,
        /// Cumulative output tokens reported on this chunk (vLLM `continuous_usage_stats`).
        cumulative_usage: Option<u32>,
    },
    /// A completed function call.
    ToolCall(ToolCall),
    /// Server token counts.
    Usage {
        /// Input tokens.
        input: Option<u32>,
        /// Cached input tokens.
        cached: Option<u32>,
        /// Output tokens.
        output: Option<u32>,
    },
    /// Server-reported timing.
    ServerTiming(ServerTiming),
    /// The response id.
    ResponseId(String),
    /// The server will close the connection after this response (a WebSocket error envelope
    /// with code `websocket_connection_limit_reached`): the next request needs a new one.
    ConnectionExpired,
    /// Terminal event.
    Done {
        /// True for a successful completion (`incomplete` for a token limit counts as ok).
        ok: bool,
    },
    /// The response failed (terminal).
    Error {
        /// Outcome to record.
        kind: OutcomeKind,
        /// HTTP status (or the WS error envelope's status).
        status: Option<u16>,
        /// Message from the server.
        message: String,
    },
}

impl StreamEvent {
    /// True for events that end the response.
    pub fn is_terminal(&self) -> bool {
        matches!(self, StreamEvent::Done { .. } | StreamEvent::Error { .. })
    }
}

/// A decoder for one response.
#[derive(Debug)]
pub enum Decoder {
    /// Chat completions SSE.
    Chat(chat::ChatDecoder),
    /// Responses API (SSE or WebSocket).
    Responses(responses::ResponsesDecoder),
}

impl Decoder {
    /// A decoder for `api`.
    pub fn new(api: ApiFlavour) -> Self {
        match api {
            ApiFlavour::ChatCompletions => Decoder::Chat(chat::ChatDecoder::default()),
            ApiFlavour::Responses => Decoder::Responses(responses::ResponsesDecoder::default()),
        }
    }

    /// Decodes one wire event; stream events go to `out`.
    pub fn decode(&mut self, ev: &WireEvent, out: &mut dyn FnMut(StreamEvent)) {
        match self {
            Decoder::Chat(d) => d.decode(ev, out),
            Decoder::Responses(d) => d.decode(ev, out),
        }
    }

    /// The answer text accumulated so far.
    pub fn text(&self) -> &str {
        match self {
            Decoder::Chat(d) => &d.text,
            Decoder::Responses(d) => &d.text,
        }
    }

    /// Takes the answer text.
    pub fn take_text(&mut self) -> String {
        match self {
            Decoder::Chat(d) => std::mem::take(&mut d.text),
            Decoder::Responses(d) => std::mem::take(&mut d.text),
        }
    }
}

/// The HTTP envelope every API shares: response headers (server timing from a 2xx, or the
/// error status to remember), the body of a non-2xx response, and a stream that ends after
/// an error status without a body. Returns true when `ev` was one of these (the caller then
/// has nothing left to do with it); false for SSE and WebSocket payloads.
pub(crate) fn decode_http_envelope(
    ev: &WireEvent,
    status: &mut Option<u16>,
    finished: &mut bool,
    out: &mut dyn FnMut(StreamEvent),
) -> bool {
    match ev {
        WireEvent::Headers {
            status: code,
            headers,
            ..
        } => {
            if (200..300).contains(code) {
                if let Some(t) = timing::from_headers(headers) {
                    out(StreamEvent::ServerTiming(t));
                }
            } else {
                *status = Some(*code);
            }
            true
        }
        WireEvent::ErrorBody { data, .. } => {
            *finished = true;
            out(error_from_body(status.unwrap_or(0), data));
            true
        }
        WireEvent::End { .. } => {
            if let Some(code) = *status {
                *finished = true;
                out(error_from_body(code, b""));
            }
            true
        }
        WireEvent::Sse { .. } | WireEvent::WsText { .. } => false,
    }
}

/// The error event for a non-2xx HTTP response with body `data`.
pub(crate) fn error_from_body(status: u16, data: &[u8]) -> StreamEvent {
    #[derive(Deserialize)]
    struct Env {
        error: Option<serde_json::Value>,
    }
    let message = serde_json::from_slice::<Env>(data)
        .ok()
        .and_then(|e| e.error)
        .map(|e| error_message(&e))
        .unwrap_or_else(|| crate::vocab::redact::excerpt(data, 300));
    // An empty body (or an empty `message`) still gets a readable error.
    let message = if message.trim().is_empty() {
        format!("HTTP status {status} with no error message in the body")
    } else {
        message
    };
    StreamEvent::Error {
        kind: OutcomeKind::HttpStatus,
        status: Some(status),
        message,
    }
}

/// The error code that says the server ends a WebSocket at its connection lifetime.
pub const WS_CONNECTION_LIMIT: &str = "websocket_connection_limit_reached";

/// Appends a delta to a response's text, which starts with room for a short answer (a few
/// hundred tokens): growing from nothing one delta at a time took half a dozen allocations a
/// response.
fn push_text(text: &mut String, delta: &str) {
    if text.capacity() == 0 {
        text.reserve(delta.len().max(1024));
    }
    text.push_str(delta);
}

/// `message` (and `code`) of an OpenAI-style error object, or the JSON itself.
pub(crate) fn error_message(v: &serde_json::Value) -> String {
    let text = |k: &str| {
        v.get(k)
            .and_then(|m| m.as_str())
            .filter(|m| !m.trim().is_empty())
    };
    match (text("message"), text("code")) {
        (Some(m), Some(c)) => format!("{c}: {m}"),
        (Some(m), None) => m.to_string(),
        (None, Some(c)) => c.to_string(),
        (None, None) => match v.as_str() {
            Some(s) if !s.trim().is_empty() => s.to_string(),
            Some(_) => "an error without a message".to_string(),
            None => v.to_string(),
        },
    }
}
