//! Chat Completions streaming decoder: `data:` JSON chunks ending in `data: [DONE]`.
//!
//! Owns: what counts as content (non-empty `delta.content`, reasoning deltas and tool-call
//! argument deltas; the `role` prelude and empty strings are not tokens), tool-call assembly
//! by `index`, usage (final chunk, or cumulative on every chunk for vLLM
//! `continuous_usage_stats`), provider timing (Cerebras `time_info`, llama.cpp `timings`,
//! Groq `usage.*_time` / `x_groq.usage`), and errors (`{"error":…}` data → server error).
//! Does not own: clocks (times are on the wire events).

use std::borrow::Cow;

use serde::Deserialize;

use super::scan::{self, once, Cursor, TokenDetails};
use super::timing::{CerebrasTimeInfo, GroqUsageTimes, LlamaTimings};
use super::{error_message, ContentKind, StreamEvent, ToolCall};
use crate::transport::WireEvent;
use crate::vocab::OutcomeKind;

/// Decoder state for one chat completion.
#[derive(Debug, Default)]
pub struct ChatDecoder {
    /// Answer text so far.
    pub text: String,
    calls: Vec<ToolCall>,
    started: bool,
    finished: bool,
    status: Option<u16>,
    id_sent: bool,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Chunk<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    /// `null` (a usage-only chunk of some servers) is no choices.
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    usage: Option<Usage>,
    error: Option<serde_json::Value>,
    time_info: Option<CerebrasTimeInfo>,
    timings: Option<LlamaTimings>,
    x_groq: Option<XGroq>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Choice<'a> {
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "reasoning")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: usize,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct FunctionDelta<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct Usage {
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    prompt_tokens_details: Option<TokenDetails>,
    #[serde(flatten)]
    times: GroqUsageTimes,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct XGroq {
    usage: Option<Usage>,
}

/// The chunk serde would read from `data`, for the common shape (an object of plain strings,
/// numbers and containers whose choices carry text, reasoning or nothing), or `None`:
/// then serde_json reads it (usage, errors, tool calls, timing fields and escapes go
/// that way). See [`super::scan`] for why what this takes serde takes too.
fn fast_chunk(data: &[u8]) -> Option<Chunk<'_>> {
    let mut c = Cursor::new(data)?;
    let mut chunk = Chunk {
        id: None,
        choices: None,
        usage: None,
        error: None,
        time_info: None,
        timings: None,
        x_groq: None,
    };
    let (mut id, mut choices, mut usage) = (false, false, false);
    c.object(|c, key| match key {
        "id" => {
            once(&mut id)?;
            chunk.id = c.opt_text()?;
            Some(())
        }
        "choices" => {
            chunk.choices = c.nullable(&mut choices, |c| {
                let mut all = Vec::with_capacity(1);
                c.array(|c| {
                    all.push(fast_choice(c)?);
                    Some(())
                })?;
                Some(all)
            })?;
            Some(())
        }
        // Continuous usage (vLLM's `continuous_usage_stats`, which spark-bench asks for) puts
        // it on every chunk.
        "usage" => {
            chunk.usage = c.nullable(&mut usage, fast_usage)?;
            Some(())
        }
        "error" | "time_info" | "timings" | "x_groq" => None,
        _ => c.skip(),
    })?;
    c.end()?;
    Some(chunk)
}

/// Token counts; Groq's timing fields (flattened into the same object) are serde's to read.
fn fast_usage(c: &mut Cursor<'_>) -> Option<Usage> {
    let keys = [
        "prompt_tokens",
        "completion_tokens",
        "prompt_tokens_details",
    ];
    let n = scan::usage_counts(c, keys, &["queue_time", "prompt_time", "total_time"])?;
    Some(Usage {
        prompt_tokens: n.input,
        completion_tokens: n.output,
        prompt_tokens_details: n.details,
        times: GroqUsageTimes::default(),
    })
}

fn fast_choice<'a>(c: &mut Cursor<'a>) -> Option<Choice<'a>> {
    let (mut choice, mut seen) = (Choice { delta: None }, false);
    c.object(|c, key| match key {
        "delta" => {
            choice.delta = c.nullable(&mut seen, fast_delta)?;
            Some(())
        }
        _ => c.skip(),
    })?;
    Some(choice)
}

fn fast_delta<'a>(c: &mut Cursor<'a>) -> Option<Delta<'a>> {
    let mut delta = Delta {
        content: None,
        reasoning_content: None,
        tool_calls: None,
    };
    let (mut content, mut reasoning) = (false, false);
    c.object(|c, key| match key {
        "content" => {
            once(&mut content)?;
            delta.content = c.opt_text()?;
            Some(())
        }
        // `reasoning` is an alias: the two together are a duplicate field to serde.
        "reasoning_content" | "reasoning" => {
            once(&mut reasoning)?;
            delta.reasoning_content = c.opt_text()?;
            Some(())
        }
        "tool_calls" => None,
        _ => c.skip(),
    })?;
    Some(delta)
}

impl ChatDecoder {
    /// Decodes one wire event.
    pub fn decode(&mut self, ev: &WireEvent, out: &mut dyn FnMut(StreamEvent)) {
        if self.finished
            || super::decode_http_envelope(ev, &mut self.status, &mut self.finished, out)
        {
            return;
        }
        match ev {
            WireEvent::Sse { data, .. } => self.data(data, out),
            WireEvent::WsText { .. } => {
                self.finished = true;
                out(StreamEvent::Error {
                    kind: OutcomeKind::ProtocolError,
                    status: None,
                    message: "chat completions has no WebSocket mode".into(),
                });
            }
            // Headers, error bodies and the end of the stream: `decode_http_envelope`.
            WireEvent::Headers { .. } | WireEvent::ErrorBody { .. } | WireEvent::End { .. } => {}
        }
    }

    fn data(&mut self, data: &[u8], out: &mut dyn FnMut(StreamEvent)) {
        if !self.started {
            self.started = true;
            out(StreamEvent::FirstEvent);
        }
        if data.trim_ascii() == b"[DONE]" {
            self.finish(out, true);
            return;
        }
        let parsed = fast_chunk(data).map(Ok);
        let chunk: Chunk = match parsed.unwrap_or_else(|| serde_json::from_slice(data)) {
            Ok(c) => c,
            Err(e) => {
                self.finished = true;
                out(StreamEvent::Error {
                    kind: OutcomeKind::ProtocolError,
                    status: None,
                    message: format!(
                        "unparsable chat chunk ({e}): {}",
                        crate::vocab::redact::excerpt(data, 200)
                    ),
                });
                return;
            }
        };
        if let Some(err) = chunk.error {
            self.finished = true;
            // A numeric `code` is an HTTP status only when it is one of an error: an error
            // object inside a 200 stream is the API's own error, never `http-status 200`.
            let status = err
                .get("code")
                .and_then(|c| c.as_u64())
                .filter(|c| (400..600).contains(c))
                .map(|c| c as u16);
            out(StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status,
                message: error_message(&err),
            });
            return;
        }
        if let Some(id) = chunk.id.as_deref() {
            if !self.id_sent {
                // Same id on every chunk; reported once, from the first chunk that has it.
                out(StreamEvent::ResponseId(id.to_string()));
                self.id_sent = true;
            }
        }
        let cumulative = chunk.usage.as_ref().and_then(|u| u.completion_tokens);
        for choice in chunk.choices.iter().flatten() {
            let Some(delta) = &choice.delta else { continue };
            if let Some(t) = delta.reasoning_content.as_deref().filter(|t| !t.is_empty()) {
                out(StreamEvent::Content {
                    kind: ContentKind::Reasoning,
                    text_len: t.len() as u32,
                    cumulative_usage: cumulative,
                });
            }
            if let Some(t) = delta.content.as_deref().filter(|t| !t.is_empty()) {
                super::push_text(&mut self.text, t);
                out(StreamEvent::Content {
                    kind: ContentKind::Text,
                    text_len: t.len() as u32,
                    cumulative_usage: cumulative,
                });
            }
            for tc in delta.tool_calls.iter().flatten() {
                while self.calls.len() <= tc.index.min(64) {
                    self.calls.push(ToolCall::default());
                }
                let call = &mut self.calls[tc.index.min(64)];
                if let Some(id) = &tc.id {
                    call.call_id = id.to_string();
                }
                if let Some(f) = &tc.function {
                    if let Some(n) = &f.name {
                        call.name.push_str(n);
                    }
                    if let Some(a) = f.arguments.as_deref().filter(|a| !a.is_empty()) {
                        call.arguments.push_str(a);
                        out(StreamEvent::Content {
                            kind: ContentKind::ToolArguments,
                            text_len: a.len() as u32,
                            cumulative_usage: cumulative,
                        });
                    }
                }
            }
        }
        let groq = chunk.x_groq.as_ref().and_then(|x| x.usage.as_ref());
        for u in chunk.usage.iter().chain(groq) {
            // With continuous usage every chunk carries it; the last one wins.
            out(StreamEvent::Usage {
                input: u.prompt_tokens,
                cached: u
                    .prompt_tokens_details
                    .as_ref()
                    .and_then(|d| d.cached_tokens),
                output: u.completion_tokens,
            });
            if let Some(t) = u.times.timing() {
                out(StreamEvent::ServerTiming(t));
            }
        }
        if let Some(t) = &chunk.time_info {
            out(StreamEvent::ServerTiming(t.timing()));
        }
        if let Some(t) = &chunk.timings {
            out(StreamEvent::ServerTiming(t.timing()));
        }
    }

    fn finish(&mut self, out: &mut dyn FnMut(StreamEvent), ok: bool) {
        self.finished = true;
        for call in self.calls.drain(..) {
            if !call.name.is_empty() {
                out(StreamEvent::ToolCall(call));
            }
        }
        out(StreamEvent::Done { ok });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    pub(crate) fn run(frames: &[&str]) -> Vec<StreamEvent> {
        let mut d = ChatDecoder::default();
        let mut got = Vec::new();
        d.decode(
            &WireEvent::Headers {
                at_ns: 0,
                status: 200,
                headers: Default::default(),
            },
            &mut |e| got.push(e),
        );
        for f in frames {
            d.decode(
                &WireEvent::Sse {
                    at_ns: 1,
                    event: None,
                    data: Bytes::copy_from_slice(f.as_bytes()),
                },
                &mut |e| got.push(e),
            );
        }
        got
    }

    fn text(n: u32) -> StreamEvent {
        StreamEvent::Content {
            kind: ContentKind::Text,
            text_len: n,
            cumulative_usage: None,
        }
    }

    #[test]
    fn openai_reference_stream() {
        let got = run(&[
            r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"r4N7vQ2m"}"#,
            r#"{"id":"chatcmpl-123","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            r#"{"id":"chatcmpl-123","choices":[{"index":0,"delta":{"content":" w\u00f6rld"},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-123","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"obfuscation":""}"#,
            r#"{"id":"chatcmpl-123","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}"#,
            "[DONE]",
        ]);
        assert_eq!(
            got,
            vec![
                StreamEvent::FirstEvent,
                StreamEvent::ResponseId("chatcmpl-123".into()),
                text(5),
                text(7),
                StreamEvent::Usage {
                    input: Some(9),
                    cached: Some(0),
                    output: Some(12)
                },
                StreamEvent::Done { ok: true },
            ]
        );
    }

    #[test]
    fn error_data_is_a_server_error_and_ends_the_stream() {
        let got = run(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"a"}}]}"#,
            r#"{"error":{"message":"overloaded","type":"server_error","code":null}}"#,
            "[DONE]",
        ]);
        assert_eq!(got.len(), 4);
        assert!(
            matches!(&got[3], StreamEvent::Error { kind: OutcomeKind::ServerError, message, .. } if message == "overloaded")
        );
    }

    #[test]
    fn non_2xx_status_uses_the_error_body() {
        let mut d = ChatDecoder::default();
        let mut got = Vec::new();
        d.decode(
            &WireEvent::Headers {
                at_ns: 0,
                status: 429,
                headers: Default::default(),
            },
            &mut |e| got.push(e),
        );
        d.decode(
            &WireEvent::ErrorBody {
                at_ns: 1,
                data: Bytes::from_static(
                    br#"{"error":{"message":"slow down","code":"rate_limit"}}"#,
                ),
            },
            &mut |e| got.push(e),
        );
        d.decode(&WireEvent::End { at_ns: 2 }, &mut |e| got.push(e));
        assert_eq!(
            got,
            vec![StreamEvent::Error {
                kind: OutcomeKind::HttpStatus,
                status: Some(429),
                message: "rate_limit: slow down".into()
            }]
        );
    }

    #[test]
    fn cerebras_time_info_is_in_seconds() {
        let got = run(&[
            r#"{"choices":[],"usage":{"prompt_tokens":69,"completion_tokens":45,"total_tokens":114,"prompt_tokens_details":{"cached_tokens":32}},"time_info":{"queue_time":0.001,"prompt_time":0.006,"completion_time":0.014,"total_time":0.09,"created":1782514735.28}}"#,
            "[DONE]",
        ]);
        let t = got
            .iter()
            .find_map(|e| match e {
                StreamEvent::ServerTiming(t) => Some(t.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(t.source, "cerebras-time-info");
        assert!((t.ttft_ms.unwrap() - 7.0).abs() < 1e-9);
        assert!((t.total_ms.unwrap() - 90.0).abs() < 1e-9);
        assert!((t.queue_ms.unwrap() - 1.0).abs() < 1e-9);
        assert!(got.contains(&StreamEvent::Usage {
            input: Some(69),
            cached: Some(32),
            output: Some(45)
        }));
    }

    #[test]
    fn llamacpp_timings_are_in_ms() {
        let got = run(&[
            r#"{"choices":[],"created":1758108431,"id":"chatcmpl-x","model":"m","object":"chat.completion.chunk","usage":{"completion_tokens":31,"prompt_tokens":75,"total_tokens":106},"timings":{"cache_n":0,"prompt_n":75,"prompt_ms":180.025,"prompt_per_token_ms":2.40,"prompt_per_second":416.6,"predicted_n":31,"predicted_ms":875.429,"predicted_per_token_ms":28.24,"predicted_per_second":35.41}}"#,
            "[DONE]",
        ]);
        let t = got
            .iter()
            .find_map(|e| match e {
                StreamEvent::ServerTiming(t) => Some(t.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(t.source, "llamacpp-timings");
        assert_eq!(t.ttft_ms, Some(180.025));
        assert!((t.total_ms.unwrap() - 1055.454).abs() < 1e-9);
    }

    #[test]
    fn groq_x_groq_usage_and_vllm_continuous_usage() {
        let got = run(&[
            r#"{"id":"g","choices":[],"x_groq":{"id":"req_1","usage":{"queue_time":0.02,"prompt_tokens":10,"prompt_time":0.005,"completion_tokens":3,"completion_time":0.01,"total_time":0.035}}}"#,
        ]);
        let t = got
            .iter()
            .find_map(|e| match e {
                StreamEvent::ServerTiming(t) => Some(t.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(t.source, "groq-usage");
        assert!((t.ttft_ms.unwrap() - 25.0).abs() < 1e-9);
        let got = run(&[
            r#"{"id":"v","choices":[{"index":0,"delta":{"content":"ab"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
        ]);
        assert!(got.contains(&StreamEvent::Content {
            kind: ContentKind::Text,
            text_len: 2,
            cumulative_usage: Some(2)
        }));
    }

    #[test]
    fn tool_calls_assemble_by_index() {
        let mut d = ChatDecoder::default();
        let mut got = Vec::new();
        for f in [
            r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.rs\"}"}}]}}]}"#,
            "[DONE]",
        ] {
            d.decode(
                &WireEvent::Sse {
                    at_ns: 0,
                    event: None,
                    data: Bytes::copy_from_slice(f.as_bytes()),
                },
                &mut |e| got.push(e),
            );
        }
        assert!(got.contains(&StreamEvent::ToolCall(ToolCall {
            call_id: "call_1".into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"a.rs\"}".into()
        })));
        let args = got
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    StreamEvent::Content {
                        kind: ContentKind::ToolArguments,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(args, 2);
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let got = run(&["{not json"]);
        assert!(matches!(
            got.last(),
            Some(StreamEvent::Error {
                kind: OutcomeKind::ProtocolError,
                ..
            })
        ));
    }

    #[test]
    fn null_choices_in_a_usage_chunk_are_no_choices() {
        let got = run(&[
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
            r#"{"id":"c1","choices":null,"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
            "[DONE]",
        ]);
        assert!(got.contains(&StreamEvent::Usage {
            input: Some(3),
            cached: None,
            output: Some(1)
        }));
        assert_eq!(got.last(), Some(&StreamEvent::Done { ok: true }));
    }

    #[test]
    fn an_error_object_with_code_200_is_no_http_status() {
        let got = run(&[r#"{"error":{"code":200,"message":"engine overloaded"}}"#]);
        assert_eq!(
            got.last(),
            Some(&StreamEvent::Error {
                kind: OutcomeKind::ServerError,
                status: None,
                message: "engine overloaded".into()
            })
        );
    }

    /// Chunks as servers send them (OpenAI, vLLM, llama.cpp, reasoning models, tool calls,
    /// usage, errors), for the fast-path agreement test.
    const SHAPES: &[&str] = &[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795761413,"model":"sim","system_fingerprint":"fp_sim","choices":[{"index":0,"delta":{"content":"asse"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1,"id":"c","model":"m","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop","index":0}],"id":"c"}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hm","content":null}}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning":"hm"}}]}"#,
        r#"{"id":"c","choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#,
        r#"{"id":null,"choices":null,"usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
        r#"{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        r#"{"error":{"message":"overloaded","code":503}}"#,
        r#"{"id":"c","choices":[{"delta":{"content":"line\nnext \u00e9"}}]}"#,
        r#"{"id":"c","choices":[],"timings":{"prompt_ms":1.5,"predicted_ms":2.0}}"#,
        r#"{"id":"c","choices":[{"delta":{"content":"x"},"extra":{"a":[1,2,{"b":null}]}}]}"#,
        r#"  {"choices":[{"delta":{"content":"ünï ✓"}}]}  "#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":28,"total_tokens":30,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":16}}}"#,
        r#"{"id":"c","choices":[],"usage":{"prompt_tokens":28,"completion_tokens":2,"queue_time":0.01,"total_time":0.2}}"#,
    ];

    #[test]
    fn the_fast_path_reads_what_serde_reads_or_leaves_it_to_serde() {
        let alphabet = b"{}[]\",:0123456789.-eE nul\\xcontentdeltausage_tokens";
        let (fast, total) = scan::mutants(SHAPES, alphabet, 11, |t| scan::agrees(t, fast_chunk(t)));
        // The common shapes must take the fast path (else it saves nothing).
        for (i, shape) in SHAPES.iter().enumerate() {
            let expect = !matches!(i, 7 | 8 | 10 | 14);
            assert_eq!(fast_chunk(shape.as_bytes()).is_some(), expect, "{shape}");
        }
        assert!(fast > total / 20, "{fast} of {total} on the fast path");
    }
}
