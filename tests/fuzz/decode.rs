//! Fuzz targets for the chat completions and Responses event parsers: near-valid JSON events
//! (wrong types, huge and negative numbers, escapes, missing fields) in a scripted stream of
//! wire events, and the invariants every decoded stream keeps.
//!
//! An input is lines; the first byte of each names the wire event: `H<status> name: value`
//! headers, `S` an SSE event's data, `V<name> <data>` an SSE event with a name, `E` an error
//! body, `W` a WebSocket text, `X` the end of the stream; any other line is SSE data.

use bytes::Bytes;
use spark_bench::backend::{ContentKind, Decoder, StreamEvent};
use spark_bench::rng::Rng;
use spark_bench::transport::{Utf8Bytes, WireEvent};
use spark_bench::vocab::ApiFlavour;

use super::engine::{pick, Target};

const DICT: &[&[u8]] = &[
    b"\"type\":",
    b"\"delta\":",
    b"\"response\":",
    b"\"usage\":",
    b"\"error\":",
    b"null",
    b"-1",
    b"4294967296",
    b"1e400",
    b"\"\\ud800\"",
    b"\"\\u0000\"",
    b"[]",
    b"{}",
    b",",
    b"\"choices\":[",
    b"\"tool_calls\":[{\"index\":",
    b"18446744073709551616",
    b"\nX",
    b"\nH500",
    b"\nE{\"error\":{\"message\":\"m\",\"code\":429}}",
    b"[DONE]",
];

pub const CHAT: Target = Target {
    name: "chat",
    dict: DICT,
    generate: |r| script(r, chat_event),
    run: |b, _| run(ApiFlavour::ChatCompletions, b),
};

pub const RESPONSES: Target = Target {
    name: "responses",
    dict: DICT,
    generate: |r| script(r, responses_event),
    run: |b, _| run(ApiFlavour::Responses, b),
};

/// A JSON-ish scalar: mostly valid, sometimes of the wrong type or out of range.
fn scalar(r: &mut Rng) -> String {
    match r.below(14) {
        0 => "null".into(),
        1 => "-1".into(),
        2 => "4294967296".into(),
        3 => "1.5e308".into(),
        4 => "true".into(),
        5 => "[1,\"a\"]".into(),
        6 => "{\"k\":{}}".into(),
        7 => "\"\\ud83d\\ude00 \\\"q\\\" \\n\"".into(),
        8 => "\"\\ud800\"".into(),
        9 => format!("{}", r.below(70000)),
        _ => text(r),
    }
}

fn text(r: &mut Rng) -> String {
    let words: &[&str] = &["fn", " main", "é", "日本", "🦀", "", " ", "\\n", "x"];
    let mut s = String::from("\"");
    for _ in 0..r.below(5) {
        s.push_str(pick(r, words));
    }
    s.push('"');
    s
}

fn num_or(r: &mut Rng) -> String {
    if r.below(5) == 0 {
        scalar(r)
    } else {
        format!("{}", r.below(5000))
    }
}

/// One chat completions chunk (or `[DONE]`, or an error envelope).
pub fn chat_event(r: &mut Rng) -> Vec<u8> {
    let s = match r.below(10) {
        0 => "[DONE]".to_string(),
        1 => format!("{{\"error\":{{\"message\":{},\"code\":{}}}}}", scalar(r), num_or(r)),
        2 => format!(
            "{{\"id\":\"c1\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{},\"completion_tokens\":{},\"prompt_tokens_details\":{{\"cached_tokens\":{}}}}}}}",
            num_or(r), num_or(r), num_or(r)
        ),
        3 => format!(
            "{{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{},\"id\":{},\"function\":{{\"name\":{},\"arguments\":{}}}}}]}}}}]}}",
            num_or(r), scalar(r), text(r), text(r)
        ),
        4 => format!(
            "{{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":{}}}]}}",
            pick(r, &["\"stop\"", "\"length\"", "null", "\"tool_calls\"", "7"])
        ),
        5 => format!("{{\"choices\":[{{\"delta\":{{\"reasoning_content\":{}}}}}]}}", scalar(r)),
        6 => format!("{{\"x_groq\":{{\"usage\":{{\"completion_tokens\":{}}}}}}}", num_or(r)),
        _ => format!(
            "{{\"id\":{},\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":{}}}}}]}}",
            if r.below(6) == 0 { scalar(r) } else { "\"c1\"".into() },
            if r.below(6) == 0 { scalar(r) } else { text(r) }
        ),
    };
    s.into_bytes()
}

/// One Responses API event.
pub fn responses_event(r: &mut Rng) -> Vec<u8> {
    let kind = pick(
        r,
        &[
            "response.created",
            "response.in_progress",
            "response.queued",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.reasoning_summary_text.delta",
            "response.function_call_arguments.delta",
            "response.output_item.done",
            "response.completed",
            "response.incomplete",
            "response.done",
            "response.failed",
            "error",
            "responsesapi.websocket_timing",
            "response.unknown_kind",
        ],
    );
    let usage = format!(
        "{{\"input_tokens\":{},\"output_tokens\":{},\"input_tokens_details\":{{\"cached_tokens\":{}}}}}",
        num_or(r), num_or(r), num_or(r)
    );
    let item = format!(
        "{{\"type\":{},\"call_id\":{},\"name\":{},\"arguments\":{}}}",
        pick(r, &["\"function_call\"", "\"message\"", "null", "3"]),
        text(r),
        text(r),
        text(r)
    );
    let body = match r.below(8) {
        0 => format!(",\"delta\":{}", scalar(r)),
        1 => format!(
            ",\"response\":{{\"id\":{},\"usage\":{usage},\"output\":[{item}]}}",
            text(r)
        ),
        2 => format!(",\"item\":{item}"),
        3 => format!(
            ",\"status\":{},\"error\":{{\"message\":{},\"code\":{}}}",
            num_or(r),
            scalar(r),
            scalar(r)
        ),
        4 => format!(",\"code\":{},\"message\":{}", scalar(r), scalar(r)),
        5 => format!(
            ",\"timing_metrics\":{{\"server_ms\":{}}},\"response\":{{\"error\":{}}}",
            num_or(r),
            scalar(r)
        ),
        _ => format!(",\"delta\":{}", text(r)),
    };
    let ty = if r.below(20) == 0 {
        scalar(r)
    } else {
        format!("\"{kind}\"")
    };
    format!("{{\"type\":{ty}{body}}}").into_bytes()
}

fn script(r: &mut Rng, event: fn(&mut Rng) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    if r.below(4) != 0 {
        let status = pick(r, &["200", "200", "429", "500", "503", "302", "0", "999"]);
        out.extend_from_slice(
            format!("H{status} openai-processing-ms: {}\n", scalar(r)).as_bytes(),
        );
    }
    for _ in 0..r.below(12) {
        match r.below(14) {
            0 => out.push(b'E'),
            1 => out.push(b'W'),
            2 => out.extend_from_slice(b"Vresponse.output_text.delta "),
            _ => out.push(b'S'),
        }
        out.extend_from_slice(&event(r));
        out.push(b'\n');
    }
    if r.below(3) != 0 {
        out.extend_from_slice(b"X\n");
    }
    out
}

fn wire_events(b: &[u8]) -> Vec<WireEvent> {
    let mut out = Vec::new();
    for line in b.split(|&c| c == b'\n') {
        let Some((&tag, rest)) = line.split_first() else {
            continue;
        };
        let rest = Bytes::copy_from_slice(rest);
        out.push(match tag {
            b'H' => {
                let text = String::from_utf8_lossy(&rest).into_owned();
                let (status, hdr) = text.split_once(' ').unwrap_or((&text, ""));
                let mut headers = http::HeaderMap::new();
                if let Some((k, v)) = hdr.split_once(':') {
                    if let (Ok(k), Ok(v)) = (
                        http::HeaderName::from_bytes(k.trim().as_bytes()),
                        http::HeaderValue::from_str(v.trim()),
                    ) {
                        headers.insert(k, v);
                    }
                }
                WireEvent::Headers {
                    at_ns: 1,
                    status: status.trim().parse().unwrap_or(200),
                    headers,
                }
            }
            b'V' => {
                let cut = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
                WireEvent::Sse {
                    at_ns: 2,
                    event: Some(rest.slice(..cut)),
                    data: rest.slice((cut + 1).min(rest.len())..),
                }
            }
            b'E' => WireEvent::ErrorBody {
                at_ns: 3,
                data: rest,
            },
            // The WebSocket transport hands on UTF-8 only.
            b'W' => match Utf8Bytes::try_from(rest) {
                Ok(text) => WireEvent::WsText { at_ns: 4, text },
                Err(_) => continue,
            },
            b'X' => WireEvent::End { at_ns: 5 },
            b'S' => WireEvent::Sse {
                at_ns: 2,
                event: None,
                data: rest,
            },
            _ => WireEvent::Sse {
                at_ns: 2,
                event: None,
                data: Bytes::copy_from_slice(line),
            },
        });
    }
    out
}

fn run(api: ApiFlavour, b: &[u8]) -> Result<(), String> {
    let mut d = Decoder::new(api);
    let mut evs = Vec::new();
    for ev in wire_events(b) {
        d.decode(&ev, &mut |e| evs.push(e));
    }
    check_stream(&evs, &d)
}

/// What every decoded response keeps: at most one first event and one terminal event,
/// nothing after the terminal one, error kinds and messages present, and the answer text's
/// length equal to the text deltas reported.
pub fn check_stream(evs: &[StreamEvent], d: &Decoder) -> Result<(), String> {
    let firsts = evs
        .iter()
        .filter(|e| matches!(e, StreamEvent::FirstEvent))
        .count();
    if firsts > 1 {
        return Err(format!("{firsts} FirstEvents"));
    }
    if let Some(t) = evs.iter().position(|e| e.is_terminal()) {
        if t + 1 != evs.len() {
            return Err(format!(
                "{} events after the terminal {:?}",
                evs.len() - t - 1,
                evs[t]
            ));
        }
        if let StreamEvent::Error { message, .. } = &evs[t] {
            if message.trim().is_empty() {
                return Err("an error event without a message".into());
            }
        }
    }
    let text: u64 = evs
        .iter()
        .map(|e| match e {
            StreamEvent::Content {
                kind: ContentKind::Text,
                text_len,
                ..
            } => u64::from(*text_len),
            _ => 0,
        })
        .sum();
    if text != d.text().len() as u64 {
        return Err(format!(
            "text deltas sum to {text} bytes, the answer has {}",
            d.text().len()
        ));
    }
    if evs
        .iter()
        .any(|e| matches!(e, StreamEvent::Content { text_len: 0, .. }))
    {
        return Err("an empty content event".into());
    }
    Ok(())
}
