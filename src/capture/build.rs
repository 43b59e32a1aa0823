//! Recorded exchanges → sessions → turns: the shape a scenario replays.
//!
//! Owns: the rules that group requests into sessions (a `previous_response_id` joins its
//! response's session; a full-history request joins the latest session with the same system
//! prompt and first user message; a request whose only input is one user message starts a
//! session), split sessions into turns (a request ending in a user message starts a turn, one
//! ending in tool outputs answers the previous response's calls), and the timings between
//! them (think time: previous response end → the next user turn's request; tool time:
//! response end → the request carrying its tool result), the output lengths (usage, else the
//! provider's timing fields, else the stream's deltas), the recorded answers, and parallel
//! calls (every call of one response, grouped). `generate:false` warm-ups are counted, not
//! replayed as turns.

use std::collections::HashMap;

use super::parse::{In, Parsed};
use super::Exchange;
use crate::vocab::{ApiFlavour, Chaining, WireProtocol};

/// One recorded request, parsed, in its session.
#[derive(Debug, Clone)]
pub struct Req {
    /// The exchange.
    pub x: Exchange,
    /// What it says.
    pub p: Parsed,
    /// Turn index in the session (warm-ups: the turn they precede).
    pub turn: u32,
    /// Step within the turn (0 = the user message).
    pub step: u32,
    /// A tool-result request.
    pub tool_result: bool,
    /// History sent as `previous_response_id`.
    pub chained: bool,
}

/// One tool call as the scenario replays it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Function name.
    pub name: String,
    /// Response end → the request carrying the result (ns).
    pub tool_time_ns: u64,
    /// The result's text (for its size; never written).
    pub output: String,
    /// Made in the same response as the call before it (parallel tool calls).
    pub parallel: bool,
    /// Output length of the response that made the call (first call of a response only).
    pub max_output: Option<u32>,
}

/// One user turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The user's message.
    pub prompt: String,
    /// Previous response end → this turn's request (ns); 0 for the first turn.
    pub think_ns: u64,
    /// Output tokens of the turn's answer.
    pub max_output: Option<u32>,
    /// The turn's final answer text (resent as history by the replay).
    pub answer: Option<String>,
    /// Tool calls, in order.
    pub calls: Vec<Call>,
}

/// One recorded session.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// System prompt.
    pub system: String,
    /// API used.
    pub api: Option<ApiFlavour>,
    /// Model asked for.
    pub model: String,
    /// Its requests in order (warm-ups included).
    pub reqs: Vec<Req>,
    /// Its turns.
    pub turns: Vec<Turn>,
}

impl Session {
    /// The downstream protocol of most of its requests.
    pub fn wire(&self) -> WireProtocol {
        self.reqs.last().map(|r| r.x.wire).unwrap_or_default()
    }

    /// Whether history went by `previous_response_id` (any request after the first).
    pub fn chaining(&self) -> Chaining {
        if self.reqs.iter().any(|r| r.chained) {
            Chaining::PreviousResponseId
        } else {
            Chaining::FullHistory
        }
    }

    /// Whether a `generate:false` warm-up opened a WebSocket.
    pub fn ws_warmup(&self) -> bool {
        self.reqs.iter().any(|r| r.p.warmup)
    }

    /// Requests that generate (warm-ups excluded).
    pub fn generating(&self) -> impl Iterator<Item = &Req> {
        self.reqs.iter().filter(|r| !r.p.warmup)
    }
}

/// Groups `exchanges` (in arrival order) into sessions.
pub fn sessions(exchanges: &[Exchange]) -> Vec<Session> {
    let mut out: Vec<Session> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    // A WebSocket warm-up's session: the next request on the same connection joins it.
    let mut warm_on_conn: HashMap<u64, usize> = HashMap::new();
    for x in exchanges {
        let p = super::parse::parse(x);
        let first_user = p.input.iter().find_map(|i| match i {
            In::User(u) => Some(u.clone()),
            _ => None,
        });
        let fresh = p.previous_response_id.is_none()
            && p.input.iter().filter(|i| **i != In::Other).count() <= 1;
        let joined = p
            .previous_response_id
            .as_ref()
            .and_then(|id| by_id.get(id).copied())
            .or_else(|| warm_on_conn.remove(&x.conn))
            .or_else(|| {
                if fresh {
                    return None;
                }
                out.iter().rposition(|s| {
                    s.system == p.system
                        && s.reqs.iter().any(|r| {
                            r.p.input.iter().find_map(|i| match i {
                                In::User(u) => Some(u),
                                _ => None,
                            }) == first_user.as_ref()
                        })
                })
            });
        let si = match joined {
            Some(i) => i,
            None => {
                out.push(Session {
                    system: p.system.clone(),
                    api: p.api,
                    model: p.model.clone(),
                    ..Default::default()
                });
                out.len() - 1
            }
        };
        if let Some(id) = &p.response_id {
            by_id.insert(id.clone(), si);
        }
        if p.warmup {
            warm_on_conn.insert(x.conn, si);
        }
        let chained = p.previous_response_id.is_some()
            && !out[si]
                .reqs
                .iter()
                .any(|r| r.p.warmup && r.p.response_id == p.previous_response_id);
        out[si].reqs.push(Req {
            x: x.clone(),
            p,
            turn: 0,
            step: 0,
            tool_result: false,
            chained,
        });
    }
    for s in &mut out {
        turns(s);
    }
    out
}

/// Splits a session's requests into turns and fills their timings.
fn turns(s: &mut Session) {
    let mut turns: Vec<Turn> = Vec::new();
    let mut prev_end: Option<u64> = None;
    // The calls of the previous response and its output length.
    let mut pending: (Vec<(String, String)>, u32) = (Vec::new(), 0);
    for r in &mut s.reqs {
        if r.p.warmup {
            r.turn = turns.len() as u32;
            prev_end = Some(r.x.end_ns);
            continue;
        }
        let last = r.p.input.iter().rev().find(|i| **i != In::Other).cloned();
        match last {
            Some(In::ToolOutput(..)) if !turns.is_empty() => {
                r.tool_result = true;
                let t = turns.last_mut().expect("checked");
                let gap = prev_end.map_or(0, |e| r.x.start_ns.saturating_sub(e));
                answered_calls(t, &pending, &r.p.input, gap);
                r.step = t.calls.iter().filter(|c| !c.parallel).count() as u32;
                r.turn = turns.len() as u32 - 1;
            }
            _ => {
                let prompt = match last {
                    Some(In::User(u)) => u,
                    _ => String::new(),
                };
                let think = if turns.is_empty() {
                    0
                } else {
                    prev_end.map_or(0, |e| r.x.start_ns.saturating_sub(e))
                };
                turns.push(Turn {
                    prompt,
                    think_ns: think,
                    max_output: None,
                    answer: None,
                    calls: Vec::new(),
                });
                r.turn = turns.len() as u32 - 1;
                r.step = 0;
            }
        }
        let (out_len, _) = r.p.output_length();
        pending = (r.p.calls.clone(), out_len);
        if r.p.calls.is_empty() {
            if let Some(t) = turns.last_mut() {
                t.max_output = Some(out_len);
                t.answer = Some(r.p.text.clone());
            }
        }
        prev_end = Some(r.x.end_ns);
    }
    s.turns = turns;
}

/// The calls of the previous response (`pending`: its calls and output length), answered
/// by a request whose input ends in tool outputs `gap` ns after that response ended: one
/// [`Call`] each, with the output sent for its call id (else the last one sent).
fn answered_calls(t: &mut Turn, pending: &(Vec<(String, String)>, u32), input: &[In], gap: u64) {
    let outputs: Vec<(&str, &str)> = input
        .iter()
        .filter_map(|i| match i {
            In::ToolOutput(id, o) => Some((id.as_str(), o.as_str())),
            _ => None,
        })
        .collect();
    let last = outputs.last().map_or("", |o| o.1);
    for (i, (id, name)) in pending.0.iter().enumerate() {
        let output = outputs
            .iter()
            .rev()
            .find(|o| !id.is_empty() && o.0 == id)
            .map_or(last, |o| o.1);
        t.calls.push(Call {
            name: name.clone(),
            tool_time_ns: gap,
            output: output.to_string(),
            parallel: i > 0,
            max_output: (i == 0).then_some(pending.1),
        });
    }
}

/// The most requests of `sessions` in flight at once (by their request intervals).
pub fn peak_concurrency(sessions: &[Session]) -> u32 {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for s in sessions {
        let (Some(a), Some(b)) = (s.reqs.first(), s.reqs.last()) else {
            continue;
        };
        edges.push((a.x.start_ns, 1));
        edges.push((b.x.end_ns.max(a.x.start_ns), -1));
    }
    edges.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        peak = peak.max(now);
    }
    peak.max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// A Responses SSE exchange sending `body`, answered by a completed `output`.
    fn x(start_ms: u64, end_ms: u64, body: &str, output: &str, out_tokens: u32) -> Exchange {
        let done = format!(
            r#"data: {{"type":"response.completed","response":{{"id":"r{start_ms}","status":"completed","output":{output},"usage":{{"input_tokens":10,"output_tokens":{out_tokens}}}}}}}"#
        );
        Exchange {
            conn: 1,
            path: "/v1/responses".into(),
            body: Bytes::from(body.to_string()),
            start_ns: start_ms * 1_000_000,
            status: Some(200),
            chunks: vec![(end_ms * 1_000_000, Bytes::from(done + "\n\n"))],
            end_ns: end_ms * 1_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn parallel_calls_of_one_response_are_kept_together_with_their_own_outputs() {
        let user = r#"{"type":"message","role":"user","content":"fix it"}"#;
        let calls = r#"[{"type":"function_call","call_id":"c1","name":"read_file","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"run_tests","arguments":"{}"}]"#;
        let answer = r#"[{"type":"message","content":[{"type":"output_text","text":"Fixed."}]}]"#;
        let a = x(0, 100, &format!(r#"{{"input":[{user}]}}"#), calls, 30);
        let b = x(
            250,
            300,
            &format!(
                r#"{{"input":[{user},{{"type":"function_call","call_id":"c1","name":"read_file"}},{{"type":"function_call","call_id":"c2","name":"run_tests"}},{{"type":"function_call_output","call_id":"c1","output":"file text"}},{{"type":"function_call_output","call_id":"c2","output":"test output, longer"}}]}}"#
            ),
            answer,
            12,
        );
        let s = sessions(&[a, b]);
        assert_eq!(s.len(), 1);
        let t = &s[0].turns[0];
        assert_eq!(t.calls.len(), 2);
        assert_eq!(
            (t.calls[0].parallel, t.calls[1].parallel),
            (false, true),
            "{t:?}"
        );
        assert_eq!(t.calls[0].output, "file text");
        assert_eq!(t.calls[1].output, "test output, longer");
        assert_eq!(t.calls[0].tool_time_ns, 150_000_000);
        assert_eq!(t.calls[0].max_output, Some(30));
        assert_eq!(t.max_output, Some(12));
        assert_eq!(t.answer.as_deref(), Some("Fixed."));
        assert_eq!(s[0].reqs[1].step, 1);
    }
}
