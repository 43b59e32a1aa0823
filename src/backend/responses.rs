//! Responses API decoder, for both SSE (`event:` + `data:` JSON) and WebSocket text
//! messages (the same JSON objects, one per message).
//!
//! Owns: content (`response.output_text.delta`; reasoning and function-call argument deltas
//! count as output), function calls (`response.output_item.done` items of type
//! `function_call`, falling back to the terminal event's `output`), usage, the terminal events
//! (`response.completed`, `response.incomplete`, `response.failed`, `response.done`), both
//! error shapes (SSE flat `{"type":"error","code","message"}` and the WebSocket envelope
//! `{"type":"error","status":N,"error":{…}}`), and `responsesapi.websocket_timing`.
//! A `response.created` (or `queued`, `in_progress`) whose response already has a terminal
//! status (`completed`, `incomplete`, `failed`) ends the response too: llmsim answers a
//! warm-up that way, with no `response.completed` after it. Unknown event types are ignored.
//!
//! Stale frames: a server may send `response.done` after `response.completed`. On a
//! persistent WebSocket that trailing frame is read at the start of the *next* turn, so
//! terminal and delta events that arrive before this turn's `response.created` are ignored
//! (and do not count as its first event). Error envelopes and timing are never stale. The
//! rule is the WebSocket's: an SSE stream is one response on its own, so there a stream
//! without `response.created` is read as it comes. Once a response id is known (from
//! `response.created`), an event naming another response id is a protocol error: events of
//! two responses are never folded into one record.

use std::borrow::Cow;

use serde::Deserialize;

use super::scan::{self, once, Cursor, TokenDetails};
use super::timing::WsTimingMetrics;
use super::{error_message, ContentKind, StreamEvent, ToolCall};
use crate::transport::WireEvent;
use crate::vocab::OutcomeKind;

/// Decoder state for one response.
#[derive(Debug, Default)]
pub struct ResponsesDecoder {
    /// Answer text so far.
    pub text: String,
    calls: Vec<ToolCall>,
    started: bool,
    first_sent: bool,
    finished: bool,
    status: Option<u16>,
    /// This turn's response id (from `response.created`).
    id: Option<String>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Event<'a> {
    /// Empty when absent (an `{"error":{…}}` object without a type is an error event).
    #[serde(borrow, rename = "type", default)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow)]
    response: Option<Response<'a>>,
    item: Option<OutputItem>,
    status: Option<u16>,
    status_code: Option<u16>,
    error: Option<serde_json::Value>,
    code: Option<serde_json::Value>,
    message: Option<String>,
    timing_metrics: Option<WsTimingMetrics>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Response<'a> {
    /// Borrowed from the event: only `response.created`'s is kept.
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    /// The response's own status.
    status: Option<Status>,
    usage: Option<Usage>,
    error: Option<serde_json::Value>,
    #[serde(default)]
    output: Vec<OutputItem>,
}

/// A response object's `status`, as far as the decoder needs it: over (and how), or not.
#[derive(Deserialize, Clone, Copy, PartialEq)]
#[cfg_attr(test, derive(Debug))]
#[serde(rename_all = "snake_case")]
enum Status {
    Completed,
    Incomplete,
    Failed,
    /// `in_progress`, `queued` and any other: the response goes on.
    #[serde(other)]
    Going,
}

impl Status {
    /// The status a `status` text names, by the same rule serde's path reads it with.
    fn of(text: &str) -> Status {
        use serde::de::IntoDeserializer;
        let text: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
            text.into_deserializer();
        Status::deserialize(text).unwrap_or(Status::Going)
    }
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct OutputItem {
    #[serde(rename = "type")]
    kind: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Usage {
    input_tokens: Option<u32>,
    output_tokens: Option<u32>,
    input_tokens_details: Option<TokenDetails>,
}

/// The event serde would read from `data` when it has only a type, a delta and fields the
/// decoder ignores (the deltas that are most of a stream), or `None`: then serde_json reads
/// it. See [`super::scan`] for why what this takes serde takes too.
fn fast_event(data: &[u8]) -> Option<Event<'_>> {
    fast_event_at(Cursor::new(data)?)
}

/// [`fast_event`] from a cursor at the start of the text.
fn fast_event_at(mut c: Cursor<'_>) -> Option<Event<'_>> {
    let mut ev = Event {
        kind: Cow::Borrowed(""),
        delta: None,
        response: None,
        item: None,
        status: None,
        status_code: None,
        error: None,
        code: None,
        message: None,
        timing_metrics: None,
    };
    let (mut kind, mut delta, mut response, mut item, mut timing) =
        (false, false, false, false, false);
    c.object(|c, key| match key {
        "type" => {
            once(&mut kind)?;
            ev.kind = c.text()?;
            Some(())
        }
        "delta" => {
            once(&mut delta)?;
            ev.delta = c.opt_text()?;
            Some(())
        }
        "response" => {
            ev.response = c.nullable(&mut response, fast_response)?;
            Some(())
        }
        "item" => {
            ev.item = c.nullable(&mut item, fast_item)?;
            Some(())
        }
        "timing_metrics" => {
            ev.timing_metrics = c.nullable(&mut timing, WsTimingMetrics::scan)?;
            Some(())
        }
        "status" | "status_code" | "error" | "code" | "message" => None,
        _ => c.skip(),
    })?;
    c.end()?;
    Some(ev)
}

/// A `response` object: its id, usage and output items; an error is serde's to read.
fn fast_response<'a>(c: &mut Cursor<'a>) -> Option<Response<'a>> {
    let mut r = Response {
        id: None,
        status: None,
        usage: None,
        error: None,
        output: Vec::new(),
    };
    let mut seen = [false; 4];
    c.object(|c, key| match key {
        "id" => {
            once(&mut seen[0])?;
            r.id = c.opt_text()?;
            Some(())
        }
        "status" => {
            once(&mut seen[3])?;
            r.status = c.opt_text()?.map(|t| Status::of(&t));
            Some(())
        }
        "usage" => {
            r.usage = c.nullable(&mut seen[1], fast_usage)?;
            Some(())
        }
        // `null` is no list to serde (the default covers only a missing one).
        "output" => {
            once(&mut seen[2])?;
            c.array(|c| {
                r.output.push(fast_item(c)?);
                Some(())
            })
        }
        "error" => c.null()?.then_some(()),
        _ => c.skip(),
    })?;
    Some(r)
}

fn fast_usage(c: &mut Cursor<'_>) -> Option<Usage> {
    let keys = ["input_tokens", "output_tokens", "input_tokens_details"];
    let n = scan::usage_counts(c, keys, &[])?;
    Some(Usage {
        input_tokens: n.input,
        output_tokens: n.output,
        input_tokens_details: n.details,
    })
}

fn fast_item(c: &mut Cursor<'_>) -> Option<OutputItem> {
    let mut item = OutputItem {
        kind: None,
        call_id: None,
        name: None,
        arguments: None,
    };
    let mut seen = [false; 4];
    c.object(|c, key| {
        let (i, field) = match key {
            "type" => (0, &mut item.kind),
            "call_id" => (1, &mut item.call_id),
            "name" => (2, &mut item.name),
            "arguments" => (3, &mut item.arguments),
            _ => return c.skip(),
        };
        once(&mut seen[i])?;
        *field = c.opt_text()?.map(Cow::into_owned);
        Some(())
    })?;
    Some(item)
}

impl ResponsesDecoder {
    /// Decodes one wire event.
    pub fn decode(&mut self, ev: &WireEvent, out: &mut dyn FnMut(StreamEvent)) {
        if self.finished
            || super::decode_http_envelope(ev, &mut self.status, &mut self.finished, out)
        {
            return;
        }
        match ev {
            WireEvent::Sse { data, .. } => {
                if data.trim_ascii() == b"[DONE]" {
                    return; // not part of the Responses API; tolerated
                }
                // One SSE stream is one response: nothing in it is a stale frame.
                self.started = true;
                self.json(data, None, out)
            }
            WireEvent::WsText { text, .. } => self.json(text.as_bytes(), Some(text), out),
            // Headers, error bodies and the end of the stream: `decode_http_envelope`.
            WireEvent::Headers { .. } | WireEvent::ErrorBody { .. } | WireEvent::End { .. } => {}
        }
    }

    fn first(&mut self, out: &mut dyn FnMut(StreamEvent)) {
        if !self.first_sent {
            self.first_sent = true;
            out(StreamEvent::FirstEvent);
        }
    }

    /// Decodes one event's JSON; `checked` is the same text when the transport already
    /// found it UTF-8 (a WebSocket text message), so the fast path does not check it again.
    fn json(&mut self, data: &[u8], checked: Option<&str>, out: &mut dyn FnMut(StreamEvent)) {
        let parsed = match checked {
            Some(text) => fast_event_at(Cursor::of_str(text)),
            None => fast_event(data),
        }
        .map(Ok);
        let ev: Event = match parsed.unwrap_or_else(|| serde_json::from_slice(data)) {
            Ok(e) => e,
            Err(e) => {
                self.first(out);
                self.finished = true;
                out(StreamEvent::Error {
                    kind: OutcomeKind::ProtocolError,
                    status: None,
                    message: format!(
                        "unparsable Responses event ({e}): {}",
                        crate::vocab::redact::excerpt(data, 200)
                    ),
                });
                return;
            }
        };
        if ev.kind == "error" || (ev.kind.is_empty() && ev.error.is_some()) {
            return self.error(ev, out);
        }
        if ev.kind.is_empty() {
            return self.fail(
                OutcomeKind::ProtocolError,
                format!(
                    "a Responses event without a type: {}",
                    crate::vocab::redact::excerpt(data, 200)
                ),
                out,
            );
        }
        if let Some(why) = self.foreign(&ev) {
            return self.fail(OutcomeKind::ProtocolError, why, out);
        }
        match ev.kind.as_ref() {
            "responsesapi.websocket_timing" => {
                if let Some(t) = &ev.timing_metrics {
                    out(StreamEvent::ServerTiming(t.timing()));
                }
            }
            "response.created" | "response.queued" | "response.in_progress" => {
                self.started = true;
                self.first(out);
                let mut response = ev.response;
                if let Some(id) = response.as_mut().and_then(|r| r.id.take()) {
                    if ev.kind == "response.created" && self.id.is_none() {
                        let id = id.into_owned();
                        self.id = Some(id.clone());
                        out(StreamEvent::ResponseId(id));
                    }
                }
                // A lifecycle event whose response is already over ends it: llmsim 0.6
                // answers a `generate:false` warm-up with one `response.created` carrying
                // `status: "completed"`, and no `response.completed` follows.
                match response.as_ref().and_then(|r| r.status) {
                    Some(Status::Completed | Status::Incomplete) => self.complete(response, out),
                    Some(Status::Failed) => self.failed(response, out),
                    Some(Status::Going) | None => {}
                }
            }
            _ if !self.started => {} // stale frame of an earlier response
            "response.output_text.delta" => self.delta(ContentKind::Text, ev.delta, out),
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                self.delta(ContentKind::Reasoning, ev.delta, out)
            }
            "response.function_call_arguments.delta" => {
                self.delta(ContentKind::ToolArguments, ev.delta, out)
            }
            "response.output_item.done" => {
                if let Some(call) = ev.item.and_then(as_call) {
                    self.calls.push(call);
                }
            }
            "response.completed" | "response.incomplete" | "response.done" => {
                self.complete(ev.response, out)
            }
            "response.failed" => self.failed(ev.response, out),
            _ => {} // unknown or uninteresting event types
        }
    }

    /// Ends the response as done: its usage, its function calls (from the items seen, or
    /// else from the terminal `response`'s output), then `Done`.
    fn complete(&mut self, response: Option<Response<'_>>, out: &mut dyn FnMut(StreamEvent)) {
        self.first(out);
        self.finished = true;
        if let Some(r) = response {
            if self.calls.is_empty() {
                self.calls.extend(r.output.into_iter().filter_map(as_call));
            }
            if let Some(u) = r.usage {
                out(StreamEvent::Usage {
                    input: u.input_tokens,
                    cached: u.input_tokens_details.and_then(|d| d.cached_tokens),
                    output: u.output_tokens,
                });
            }
        }
        for call in self.calls.drain(..) {
            out(StreamEvent::ToolCall(call));
        }
        out(StreamEvent::Done { ok: true });
    }

    /// Ends the response as failed by the server, with its error's message.
    fn failed(&mut self, response: Option<Response<'_>>, out: &mut dyn FnMut(StreamEvent)) {
        let message = response
            .and_then(|r| r.error)
            .map(|e| error_message(&e))
            .unwrap_or_else(|| "response.failed".into());
        self.fail(OutcomeKind::ServerError, message, out)
    }

    /// Ends the response with `kind` and `message`.
    fn fail(&mut self, kind: OutcomeKind, message: String, out: &mut dyn FnMut(StreamEvent)) {
        self.first(out);
        self.finished = true;
        out(StreamEvent::Error {
            kind,
            status: None,
            message,
        });
    }

    /// Why `ev` belongs to another response than this turn's (its `response.id` differs
    /// from the one `response.created` gave), if it does. Before `response.created` nothing
    /// is foreign: a stale frame there is ignored by the stale-frame rule.
    fn foreign(&self, ev: &Event<'_>) -> Option<String> {
        let mine = self.id.as_deref()?;
        let theirs = ev.response.as_ref()?.id.as_deref()?;
        (theirs != mine).then(|| {
            format!(
                "a {} event of response {} inside response {}: events of two responses in one turn",
                crate::vocab::redact::excerpt(ev.kind.as_bytes(), 60),
                crate::vocab::redact::excerpt(theirs.as_bytes(), 80),
                crate::vocab::redact::excerpt(mine.as_bytes(), 80),
            )
        })
    }

    /// An error event: the flat SSE shape (`code`, `message`), the WebSocket envelope
    /// (`status`, `error`), or a bare `{"error":{…}}`. An envelope's status is an HTTP
    /// status only when it is one of an error (4xx/5xx); any other (200 in an error
    /// envelope) is the API's own error, `server-error`, with the status in the message.
    fn error(&mut self, ev: Event<'_>, out: &mut dyn FnMut(StreamEvent)) {
        self.first(out);
        self.finished = true;
        let status = ev.status.or(ev.status_code);
        let code = ev
            .error
            .as_ref()
            .and_then(|e| e.get("code"))
            .or(ev.code.as_ref());
        if code.and_then(|c| c.as_str()) == Some(super::WS_CONNECTION_LIMIT) {
            out(StreamEvent::ConnectionExpired);
        }
        let message = match (&ev.error, &ev.message) {
            (Some(e), _) => error_message(e),
            (None, Some(m)) if !m.trim().is_empty() => {
                match ev.code.as_ref().and_then(|c| c.as_str()) {
                    Some(c) => format!("{c}: {m}"),
                    None => m.clone(),
                }
            }
            (None, _) => "error event without a message".into(),
        };
        // An error envelope with an HTTP error status (the WebSocket mode's way of saying
        // 4xx/5xx) is the kind the same answer to a POST gets.
        match status {
            Some(s) if (400..600).contains(&s) => out(StreamEvent::Error {
                kind: OutcomeKind::HttpStatus,
                status,
                message,
            }),
            Some(s) => out(StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status: None,
                message: format!("{message} (an error envelope with status {s})"),
            }),
            None => out(StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status: None,
                message,
            }),
        }
    }

    fn delta(
        &mut self,
        kind: ContentKind,
        delta: Option<Cow<'_, str>>,
        out: &mut dyn FnMut(StreamEvent),
    ) {
        let Some(d) = delta.filter(|d| !d.is_empty()) else {
            return;
        };
        self.first(out);
        if kind == ContentKind::Text {
            super::push_text(&mut self.text, &d);
        }
        out(StreamEvent::Content {
            kind,
            text_len: d.len() as u32,
            cumulative_usage: None,
        });
    }
}

fn as_call(item: OutputItem) -> Option<ToolCall> {
    (item.kind.as_deref() == Some("function_call")).then(|| ToolCall {
        call_id: item.call_id.unwrap_or_default(),
        name: item.name.unwrap_or_default(),
        arguments: item.arguments.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn ws(d: &mut ResponsesDecoder, frames: &[&str]) -> Vec<StreamEvent> {
        let mut got = Vec::new();
        for f in frames {
            d.decode(
                &WireEvent::WsText {
                    at_ns: 0,
                    text: (*f).into(),
                },
                &mut |e| got.push(e),
            );
        }
        got
    }

    const TEXT_STREAM: &[&str] = &[
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1741487325,"status":"in_progress","model":"m","output":[],"usage":null}}"#,
        r#"{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","status":"in_progress"}}"#,
        r#"{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}"#,
        r#"{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}"#,
        r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"fn","logprobs":[]}"#,
        r#"{"type":"codex.rate_limits","whatever":1}"#,
        r#"{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" main","logprobs":[]}"#,
        r#"{"type":"response.output_text.done","sequence_number":6,"text":"fn main"}"#,
        r#"{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"fn main"}]}}"#,
        r#"{"type":"response.completed","sequence_number":8,"response":{"id":"resp_1","status":"completed","output":[{"type":"message","content":[]}],"usage":{"input_tokens":9261,"input_tokens_details":{"cached_tokens":7},"output_tokens":405,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":9666}}}"#,
    ];

    fn text(n: u32) -> StreamEvent {
        StreamEvent::Content {
            kind: ContentKind::Text,
            text_len: n,
            cumulative_usage: None,
        }
    }

    #[test]
    fn text_stream_over_ws_with_unknown_events() {
        let mut d = ResponsesDecoder::default();
        let got = ws(&mut d, TEXT_STREAM);
        assert_eq!(
            got,
            vec![
                StreamEvent::FirstEvent,
                StreamEvent::ResponseId("resp_1".into()),
                text(2),
                text(5),
                StreamEvent::Usage {
                    input: Some(9261),
                    cached: Some(7),
                    output: Some(405)
                },
                StreamEvent::Done { ok: true },
            ]
        );
        assert_eq!(d.text, "fn main");
    }

    #[test]
    fn same_stream_over_sse() {
        let mut d = ResponsesDecoder::default();
        let mut got = Vec::new();
        d.decode(
            &WireEvent::Headers {
                at_ns: 0,
                status: 200,
                headers: Default::default(),
            },
            &mut |e| got.push(e),
        );
        for f in TEXT_STREAM {
            let name = f.split('"').nth(3).unwrap().to_string();
            d.decode(
                &WireEvent::Sse {
                    at_ns: 0,
                    event: Some(Bytes::from(name)),
                    data: Bytes::copy_from_slice(f.as_bytes()),
                },
                &mut |e| got.push(e),
            );
        }
        assert_eq!(got.len(), 6);
        assert_eq!(got.last(), Some(&StreamEvent::Done { ok: true }));
    }

    #[test]
    fn response_done_after_completed_is_tolerated_and_stale_on_the_next_turn() {
        let mut d = ResponsesDecoder::default();
        let mut frames = TEXT_STREAM.to_vec();
        frames.push(r#"{"type":"response.done","response":{"id":"resp_1"}}"#);
        let got = ws(&mut d, &frames);
        assert_eq!(got.iter().filter(|e| e.is_terminal()).count(), 1);
        // The next turn reads the trailing frame first: ignored, not a first event.
        let mut next = ResponsesDecoder::default();
        let got = ws(
            &mut next,
            &[r#"{"type":"response.done","response":{"id":"resp_1"}}"#],
        );
        assert!(got.is_empty());
        let got = ws(&mut next, TEXT_STREAM);
        assert_eq!(got.first(), Some(&StreamEvent::FirstEvent));
        assert_eq!(got.last(), Some(&StreamEvent::Done { ok: true }));
    }

    #[test]
    fn created_with_a_terminal_status_ends_the_response() {
        // llmsim 0.6's answer to a `generate:false` warm-up: this one frame, nothing after.
        let warm = r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_w","object":"response","status":"completed","model":"m","output":[],"usage":null}}"#;
        let mut d = ResponsesDecoder::default();
        assert_eq!(
            ws(&mut d, &[warm]),
            [
                StreamEvent::FirstEvent,
                StreamEvent::ResponseId("resp_w".into()),
                StreamEvent::Done { ok: true }
            ]
        );
        // A server that also sends `response.completed` has it read as the next turn's
        // stale frame.
        let mut next = ResponsesDecoder::default();
        let late = r#"{"type":"response.completed","response":{"id":"resp_w","status":"completed","output":[]}}"#;
        assert!(ws(&mut next, &[late]).is_empty());
        assert_eq!(
            ws(&mut next, TEXT_STREAM).last(),
            Some(&StreamEvent::Done { ok: true })
        );
        // `failed` is the server's error; `in_progress` goes on; serde's path reads the same.
        let failed = r#"{"type":"response.created","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"no"}}}"#;
        let got = ws(&mut ResponsesDecoder::default(), &[failed]);
        assert!(matches!(
            got.last(),
            Some(StreamEvent::Error { kind: OutcomeKind::ServerError, message, .. }) if message.contains("no")
        ));
        let going = r#"{"type":"response.created","response":{"id":"r","status":"in_progress","extra":{"a":[1]}}}"#;
        assert!(!ws(&mut ResponsesDecoder::default(), &[going])
            .iter()
            .any(|e| e.is_terminal()));
        let escaped =
            r#"{"type":"response.created","response":{"id":"r","status":"compl\u0065ted"}}"#;
        assert_eq!(
            ws(&mut ResponsesDecoder::default(), &[escaped]).last(),
            Some(&StreamEvent::Done { ok: true })
        );
    }

    #[test]
    fn response_done_alone_is_terminal() {
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                TEXT_STREAM[0],
                TEXT_STREAM[4],
                r#"{"type":"response.done","response":{"id":"resp_1","usage":{"input_tokens":1,"output_tokens":1}}}"#,
            ],
        );
        assert_eq!(got.last(), Some(&StreamEvent::Done { ok: true }));
    }

    #[test]
    fn ws_error_envelope_and_sse_error_event() {
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                r#"{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"previous_response_not_found","message":"Previous response with id 'resp_abc' not found.","param":"previous_response_id"}}"#,
            ],
        );
        assert_eq!(
            got,
            vec![
                StreamEvent::FirstEvent,
                StreamEvent::Error {
                    kind: OutcomeKind::HttpStatus,
                    status: Some(400),
                    message: "previous_response_not_found: Previous response with id 'resp_abc' not found.".into()
                }
            ]
        );
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                TEXT_STREAM[0],
                r#"{"type":"error","code":"ERR_SOMETHING","message":"boom","param":null,"sequence_number":1}"#,
            ],
        );
        assert_eq!(
            got.last(),
            Some(&StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status: None,
                message: "ERR_SOMETHING: boom".into()
            })
        );
    }

    #[test]
    fn connection_limit_envelope_says_the_socket_expires() {
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                r#"{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"websocket_connection_limit_reached","message":"Responses websocket connection limit reached (60 minutes)."}}"#,
            ],
        );
        let n = got.len();
        assert!(n >= 2, "{got:?}");
        assert_eq!(got[n - 2], StreamEvent::ConnectionExpired);
        assert!(
            matches!(&got[n - 1], StreamEvent::Error { status: Some(400), message, .. } if message.starts_with("websocket_connection_limit_reached: "))
        );
        // Another code is only an error.
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[r#"{"type":"error","code":"ERR_SOMETHING","message":"boom"}"#],
        );
        assert!(!got.contains(&StreamEvent::ConnectionExpired));
    }

    #[test]
    fn failed_and_incomplete() {
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                TEXT_STREAM[0],
                r#"{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"engine died"}}}"#,
            ],
        );
        assert_eq!(
            got.last(),
            Some(&StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status: None,
                message: "server_error: engine died".into()
            })
        );
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                TEXT_STREAM[0],
                r#"{"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":16}}}"#,
            ],
        );
        assert!(got.contains(&StreamEvent::Usage {
            input: Some(3),
            cached: None,
            output: Some(16)
        }));
        assert_eq!(got.last(), Some(&StreamEvent::Done { ok: true }));
    }

    #[test]
    fn function_calls_and_websocket_timing() {
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                TEXT_STREAM[0],
                r#"{"type":"responsesapi.websocket_timing","timing_metrics":{"responses_duration_excl_engine_and_client_tool_time_ms":124,"engine_service_total_ms":457,"engine_iapi_ttft_total_ms":211,"engine_service_ttft_total_ms":233,"engine_iapi_tbt_across_engine_calls_ms":377,"engine_service_tbt_across_engine_calls_ms":399}}"#,
                r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_9","name":"run_tests","arguments":""}}"#,
                r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"x\":1}"}"#,
                r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_9","name":"run_tests","arguments":"{\"x\":1}","status":"completed"}}"#,
                r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":5,"output_tokens":4}}}"#,
            ],
        );
        let t = got
            .iter()
            .find_map(|e| match e {
                StreamEvent::ServerTiming(t) => Some(t.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(t.source, "websocket-timing");
        assert_eq!(t.ttft_ms, Some(233.0));
        assert_eq!(t.api_overhead_ms, Some(124.0));
        assert_eq!(t.total_ms, Some(581.0));
        assert!(got.contains(&StreamEvent::ToolCall(ToolCall {
            call_id: "call_9".into(),
            name: "run_tests".into(),
            arguments: "{\"x\":1}".into()
        })));
        assert!(got.contains(&StreamEvent::Content {
            kind: ContentKind::ToolArguments,
            text_len: 7,
            cumulative_usage: None
        }));
    }

    #[test]
    fn http_error_status_and_garbage() {
        let mut d = ResponsesDecoder::default();
        let mut got = Vec::new();
        d.decode(
            &WireEvent::Headers {
                at_ns: 0,
                status: 500,
                headers: Default::default(),
            },
            &mut |e| got.push(e),
        );
        d.decode(
            &WireEvent::ErrorBody {
                at_ns: 0,
                data: Bytes::from_static(
                    b"{\"error\":{\"message\":\"injected\",\"type\":\"server_error\"}}",
                ),
            },
            &mut |e| got.push(e),
        );
        assert_eq!(
            got,
            vec![StreamEvent::Error {
                kind: OutcomeKind::HttpStatus,
                status: Some(500),
                message: "injected".into()
            }]
        );
        let mut d = ResponsesDecoder::default();
        let got = ws(&mut d, &["nope"]);
        assert!(matches!(
            got.last(),
            Some(StreamEvent::Error {
                kind: OutcomeKind::ProtocolError,
                ..
            })
        ));
    }

    fn sse(d: &mut ResponsesDecoder, frames: &[&str]) -> Vec<StreamEvent> {
        let mut got = Vec::new();
        for f in frames {
            d.decode(
                &WireEvent::Sse {
                    at_ns: 0,
                    event: None,
                    data: Bytes::copy_from_slice(f.as_bytes()),
                },
                &mut |e| got.push(e),
            );
        }
        got
    }

    #[test]
    fn an_sse_stream_without_response_created_is_read_as_it_comes() {
        let mut d = ResponsesDecoder::default();
        let got = sse(&mut d, &[TEXT_STREAM[4], TEXT_STREAM[6], TEXT_STREAM[9]]);
        assert_eq!(got[0], StreamEvent::FirstEvent);
        assert_eq!(got[1], text(2));
        assert_eq!(got.last(), Some(&StreamEvent::Done { ok: true }));
        // Over WebSocket the same frames before `response.created` stay stale.
        let mut d = ResponsesDecoder::default();
        assert!(ws(&mut d, &[TEXT_STREAM[4], TEXT_STREAM[9]]).is_empty());
    }

    #[test]
    fn events_of_another_response_id_are_a_protocol_error() {
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                TEXT_STREAM[0],
                TEXT_STREAM[4],
                r#"{"type":"response.created","response":{"id":"resp_2"}}"#,
                r#"{"type":"response.completed","response":{"id":"resp_3"}}"#,
            ],
        );
        match got.last() {
            Some(StreamEvent::Error { kind, message, .. }) => {
                assert_eq!(*kind, OutcomeKind::ProtocolError);
                assert!(
                    message.contains("resp_2") && message.contains("resp_1"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(!got.contains(&StreamEvent::Done { ok: true }));
        // The same id again is fine.
        let mut d = ResponsesDecoder::default();
        let got = ws(&mut d, TEXT_STREAM);
        assert_eq!(got.last(), Some(&StreamEvent::Done { ok: true }));
    }

    #[test]
    fn an_error_envelope_with_status_200_is_a_server_error_not_http_status() {
        let mut d = ResponsesDecoder::default();
        let got = ws(
            &mut d,
            &[
                r#"{"type":"error","status":200,"error":{"code":"overloaded","message":"try later"}}"#,
            ],
        );
        assert_eq!(
            got.last(),
            Some(&StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status: None,
                message: "overloaded: try later (an error envelope with status 200)".into()
            })
        );
        // A bare `{"error":{…}}` SSE event (no type) is the same error.
        let mut d = ResponsesDecoder::default();
        let got = sse(
            &mut d,
            &[r#"{"error":{"code":"rate_limit_exceeded","message":"slow down"}}"#],
        );
        assert_eq!(
            got.last(),
            Some(&StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status: None,
                message: "rate_limit_exceeded: slow down".into()
            })
        );
        // No type and no error: not the API's shape.
        let mut d = ResponsesDecoder::default();
        let got = sse(&mut d, &[r#"{"delta":"x"}"#]);
        assert!(matches!(
            got.last(),
            Some(StreamEvent::Error {
                kind: OutcomeKind::ProtocolError,
                ..
            })
        ));
    }

    #[test]
    fn the_fast_path_reads_what_serde_reads_or_leaves_it_to_serde() {
        const SHAPES: &[&str] = &[
            r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"    ","logprobs":[]}"#,
            r#"{"type":"response.reasoning_text.delta","delta":"hm","obfuscation":"x1"}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc","delta":"{\"a\""}"#,
            r#"{"type":"response.content_part.added","part":{"annotations":[],"text":"","type":"output_text"},"sequence_number":3}"#,
            r#"{"type":"response.created","response":{"id":"resp_1","output":[]}}"#,
            r#"{"type":"error","error":{"code":"websocket_connection_limit_reached"},"status":400}"#,
            r#"{"type":"response.output_item.done","item":{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}}"#,
            r#"{"type":null,"delta":"x"}"#,
            r#"{"delta":"x"}"#,
            r#"{"type":"response.completed","response":{"id":"resp_1","error":null,"output":[{"type":"message","content":[{"text":"hi","type":"output_text"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":4},"output_tokens":7,"total_tokens":19}}}"#,
            r#"{"type":"response.in_progress","response":{"id":"resp_1","output":[],"usage":null,"status":"in_progress","metadata":{}},"sequence_number":1}"#,
            r#"{"type":"response.failed","response":{"id":"resp_1","error":{"code":"server_error","message":"boom"}}}"#,
            r#"{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1.5}}}"#,
            r#"{"timing_metrics":{"engine_iapi_ttft_total_ms":0.5012000000000001,"engine_service_total_ms":1.501498,"engine_service_ttft_total_ms":0.0014980000000000002,"responses_duration_excl_engine_and_client_tool_time_ms":2e-1,"engine_queue_max_ms":-3},"type":"responsesapi.websocket_timing"}"#,
            r#"{"type":"responsesapi.websocket_timing","timing_metrics":null}"#,
            r#"{"type":"responsesapi.websocket_timing","timing_metrics":{"engine_service_total_ms":1,"engine_service_total_ms":2}}"#,
            r#"{"type":"responsesapi.websocket_timing","timing_metrics":{"engine_service_total_ms":1e400}}"#,
        ];
        let alphabet = b"{}[]\",:0123456789.-eE nul\\xtypedeltaoutputusage";
        let (fast, total) = scan::mutants(SHAPES, alphabet, 13, |t| scan::agrees(t, fast_event(t)));
        for (i, shape) in SHAPES.iter().enumerate() {
            let expect = matches!(i, 0 | 1 | 2 | 3 | 4 | 6 | 8 | 9 | 10 | 13 | 14);
            assert_eq!(fast_event(shape.as_bytes()).is_some(), expect, "{shape}");
        }
        assert!(fast > total / 20, "{fast} of {total} on the fast path");
    }
}
