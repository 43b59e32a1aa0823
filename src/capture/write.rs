//! The recorder's two outputs: the scenario TOML that replays a session, and the live
//! session's results directory (the usual `results/<run-id>/` contract, target
//! `as-recorded`), so the real session's latencies sit beside its replays in `report` and
//! `compare`.
//!
//! Owns: the TOML text (every string through [`Privacy`]), tool output sizes chosen so the
//! replay's tool results have the recorded token counts, and one [`RequestRecord`] per
//! recorded request. Does not own: the files' format (`store`), the plan (`plan`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::build::{Req, Session};
use super::privacy::Privacy;
use crate::sim::text;
use crate::vocab::{
    ApiFlavour, Chaining, Chunk, OutcomeKind, RequestKind, RequestRecord, SessionRecord,
    TransportKind, WireProtocol,
};

/// The target name of the live session in its results directory and scenario.
pub const AS_RECORDED: &str = "as-recorded";

/// What the scenario is written from.
pub struct ScenarioOut<'a> {
    /// Scenario name.
    pub name: &'a str,
    /// The upstream base URL (written redacted).
    pub upstream: &'a str,
    /// Sessions seen (the first as `[[turns]]`, the others as `[[sessions]]`).
    pub sessions: &'a [Session],
    /// Peak sessions in flight.
    pub concurrency: u32,
}

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn dur(ns: u64) -> String {
    // Whole microseconds: exact to the 5 ms the replay must hold, and humantime reads it back.
    crate::units::fmt_duration_spec(Duration::from_micros(ns / 1000))
}

/// The transport a session's requests used, as a run names it.
pub fn transport_of(s: &Session) -> TransportKind {
    match s.wire() {
        WireProtocol::WebSocket => TransportKind::Ws,
        WireProtocol::Http2 => TransportKind::Http2,
        WireProtocol::Http1 => {
            if s.generating().any(|r| r.x.conn_request > 0) {
                TransportKind::HttpPooled
            } else {
                TransportKind::Http
            }
        }
    }
}

/// The byte size of the driver's tool output whose token count (simulator rule) is `tokens`.
pub fn output_bytes_for(name: &str, tokens: u32) -> u32 {
    let count = |b: u32| text::count(&crate::driver::tool_output(name, b));
    let (mut lo, mut hi) = (1u32, tokens.saturating_mul(8).max(16));
    while count(hi) < tokens && hi < 1 << 26 {
        hi *= 2;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if count(mid) < tokens {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The scenario TOML of every session of `out` (options, API and transport: the first's).
pub fn scenario_toml(out: &ScenarioOut<'_>, pv: &Privacy) -> String {
    let s = &out.sessions[0];
    let transport = transport_of(s);
    let api = s.api.unwrap_or(ApiFlavour::Responses);
    let reqs = s.generating().count();
    let tool_calls: usize = s.turns.iter().map(|t| t.calls.len()).sum();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Recorded by `spark-bench record` from {} ({} API over {}).",
        pv.clean(out.upstream),
        api,
        transport
    );
    let _ = writeln!(
        t,
        "# Session 1 of {}: {} requests, {} turns, {} tool calls; history sent as {}{}.",
        out.sessions.len(),
        reqs,
        s.turns.len(),
        tool_calls,
        match (s.chaining(), transport) {
            (Chaining::PreviousResponseId, TransportKind::Ws) =>
                "previous_response_id on one WebSocket (continuation)",
            (Chaining::PreviousResponseId, _) => "previous_response_id with store=true",
            _ => "the full history every request",
        },
        if pv.synthesizing() {
            "; message text synthesized from the simulator's corpus (same token lengths)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        t,
        "# Replay: spark-bench run THIS.toml (the embedded simulator, exact output lengths), or\n\
         # --target NAME --transport T for any other; `--target {AS_RECORDED}` replays against the\n\
         # recorded upstream (its key from $OPENAI_API_KEY)."
    );
    let _ = writeln!(t, "name = {}", q(out.name));
    let _ = writeln!(
        t,
        "description = {}",
        q(&format!(
            "A recorded session: {} turns, {} tool calls, {} requests.",
            s.turns.len(),
            tool_calls,
            reqs
        ))
    );
    let _ = writeln!(t, "seed = 1");
    let _ = writeln!(t, "system_prompt = {}", q(&pv.text(&s.system, 0)));
    let _ = writeln!(t, "# The recorded timings already hold the real network.");
    let _ = writeln!(t, "link = \"none\"\n");
    let _ = writeln!(t, "[load]");
    let _ = writeln!(
        t,
        "# Each recorded session once ([[turns]] is session 1, each [[sessions]] one more), the\n\
         # prompts as recorded (no cache salt: the recorded conversation's own prefix reuse)."
    );
    let _ = writeln!(t, "sessions = {}", out.sessions.len().max(1));
    let _ = writeln!(t, "concurrency = {}", out.concurrency.max(1));
    let _ = writeln!(t, "cache = \"as-is\"\n");
    let _ = writeln!(t, "[matrix]");
    let _ = writeln!(t, "targets = [\"sim-gpu\"]");
    let _ = writeln!(t, "transports = [\"{transport}\"]\n");
    targets_toml(&mut t, out, pv, api, transport);
    turns_toml(&mut t, s, pv, "turns", 0);
    for (k, other) in out.sessions.iter().enumerate().skip(1) {
        let _ = writeln!(
            t,
            "# Session {}: {} turns, {} API over {}{}.\n[[sessions]]",
            k + 1,
            other.turns.len(),
            other.api.unwrap_or(ApiFlavour::Responses),
            transport_of(other),
            if other.system == s.system {
                ""
            } else {
                "; its own system prompt is not replayed (session 1's is sent)"
            }
        );
        turns_toml(&mut t, other, pv, "sessions.turns", k as u64 * 0x1_0000);
    }
    t
}

/// The scenario's two targets: the simulator (generating exactly the recorded lengths) and
/// [`AS_RECORDED`] (the recorded upstream), each with the session's API and history options.
fn targets_toml(
    t: &mut String,
    out: &ScenarioOut<'_>,
    pv: &Privacy,
    api: ApiFlavour,
    transport: TransportKind,
) {
    let s = &out.sessions[0];
    let store = s.chaining() == Chaining::PreviousResponseId && transport != TransportKind::Ws;
    for name in ["sim-gpu", AS_RECORDED] {
        let _ = writeln!(t, "[targets.{name}]");
        if name == AS_RECORDED {
            let _ = writeln!(t, "base_url = {}", q(&pv.clean(out.upstream)));
            let _ = writeln!(t, "model = {}", q(&pv.clean(&s.model)));
            let _ = writeln!(t, "api_key_env = \"OPENAI_API_KEY\"");
        } else {
            let _ = writeln!(
                t,
                "# Generate exactly max_output_tokens, as recorded (Responses: this header; chat: ignore_eos)."
            );
            if api == ApiFlavour::ChatCompletions {
                let _ = writeln!(t, "ignore_eos = true");
            } else {
                let _ = writeln!(t, "headers = {{ \"x-sim-ignore-eos\" = \"true\" }}");
            }
        }
        let _ = writeln!(t, "api = \"{api}\"");
        if store {
            let _ = writeln!(t, "store = true");
        }
        if s.ws_warmup() {
            let _ = writeln!(t, "ws_warmup = true");
        }
        t.push('\n');
    }
}

/// A session's turns (`[[header]]` each): prompt, think time, output lengths, the recorded
/// answer and tool calls; `salt` keeps synthesized text distinct between sessions.
fn turns_toml(t: &mut String, s: &Session, pv: &Privacy, header: &str, salt: u64) {
    for (i, turn) in s.turns.iter().enumerate() {
        let i = salt + i as u64;
        let _ = writeln!(t, "[[{header}]]");
        let _ = writeln!(t, "prompt = {}", q(&pv.text(&turn.prompt, i + 1)));
        if turn.think_ns > 0 {
            let _ = writeln!(t, "think_time = \"{}\"", dur(turn.think_ns));
        }
        if let Some(m) = turn.max_output {
            let _ = writeln!(t, "max_output_tokens = {}", m.max(1));
        }
        if let Some(a) = turn.answer.as_deref().filter(|a| !a.is_empty()) {
            let _ = writeln!(t, "answer = {}", q(&pv.text(a, 0x8000 + i)));
        }
        if !turn.calls.is_empty() {
            let _ = writeln!(t, "tool_calls = [");
            for c in &turn.calls {
                let tokens = text::count(&c.output);
                let mut extra = String::new();
                if c.parallel {
                    extra.push_str(", parallel = true");
                }
                if let Some(m) = c.max_output {
                    let _ = write!(extra, ", max_output_tokens = {}", m.max(1));
                }
                let _ = writeln!(
                    t,
                    "  {{ name = {}, tool_time = \"{}\", output_bytes = {}{extra} }}, # output: {} bytes, {} tokens",
                    q(&pv.clean(&c.name)),
                    dur(c.tool_time_ns),
                    output_bytes_for(&c.name, tokens),
                    c.output.len(),
                    tokens
                );
            }
            let _ = writeln!(t, "]");
        }
        t.push('\n');
    }
}

/// The size of an HTTP/1.1 head whose first line (with its CRLF) is `first_line` bytes: each
/// header `name: value` CRLF, and the blank line. How `run` counts bytes on HTTP/1.1 (its
/// socket counters see exactly this); over HTTP/2 `run` counts HPACK-compressed headers, so
/// a recorded HTTP/2 row counts a little more than a replayed one.
pub fn head_len(first_line: usize, headers: &http::HeaderMap) -> u64 {
    let fields: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + 2 + v.len() + 2)
        .sum();
    (first_line + fields + 2) as u64
}

/// Response body bytes as they crossed the wire: the frames, plus HTTP/1.1 chunked framing
/// (`SIZE CRLF … CRLF` each, and the last `0 CRLF CRLF`) when the body had no length.
fn body_wire_bytes(x: &super::Exchange) -> u64 {
    let body: u64 = x.chunks.iter().map(|c| c.1.len() as u64).sum();
    if !x.chunked || x.wire != WireProtocol::Http1 {
        return body;
    }
    let framing: u64 = x
        .chunks
        .iter()
        .filter(|c| !c.1.is_empty())
        .map(|c| format!("{:x}", c.1.len()).len() as u64 + 4)
        .sum();
    body + framing + 5
}

/// The records of the live sessions: requests and sessions, target [`AS_RECORDED`].
pub fn records(sessions: &[Session], pv: &Privacy) -> (Vec<RequestRecord>, Vec<SessionRecord>) {
    let mut reqs = Vec::new();
    let mut sess = Vec::new();
    let mut id = 0u64;
    let targets = super::live::target_names(sessions, AS_RECORDED);
    for (si, s) in sessions.iter().enumerate() {
        let transport = transport_of(s);
        let mut failed = 0;
        let mut n = 0;
        for (ri, r) in s.reqs.iter().enumerate() {
            id += 1;
            let mut rec = record(r, id, si as u32, ri as u32, transport, pv);
            rec.target = targets[si].clone();
            if !rec.is_ok() {
                failed += 1;
            }
            n += 1;
            reqs.push(rec);
        }
        let start = s.reqs.first().map_or(0, |r| r.x.start_ns);
        let end = s.reqs.last().map_or(0, |r| r.x.end_ns);
        sess.push(SessionRecord {
            target: targets[si].clone(),
            transport,
            session: si as u32,
            warmup: false,
            start_ns: start,
            end_ns: end,
            requests: n,
            failed,
            interrupted: false,
        });
    }
    (reqs, sess)
}

fn record(
    r: &Req,
    id: u64,
    session: u32,
    index: u32,
    t: TransportKind,
    pv: &Privacy,
) -> RequestRecord {
    let p = &r.p;
    let chunks: Vec<Chunk> = p
        .deltas
        .iter()
        .map(|&(at_ns, tokens, text_bytes)| Chunk {
            at_ns,
            tokens,
            text_bytes,
        })
        .collect();
    let (output_tokens, token_source) = p.output_length();
    RequestRecord {
        id,
        target: AS_RECORDED.into(),
        transport: t,
        session,
        turn: r.turn,
        request: index,
        step: r.step,
        kind: if p.warmup {
            RequestKind::Warmup
        } else if r.tool_result {
            RequestKind::ToolResult
        } else {
            RequestKind::User
        },
        warmup: false,
        chaining: if r.chained {
            Chaining::PreviousResponseId
        } else {
            Chaining::FullHistory
        },
        response_id: p.response_id.as_deref().map(|s| pv.clean(s)),
        intended_ns: r.x.start_ns,
        dispatch_ns: r.x.start_ns,
        request_written_ns: Some(r.x.sent_ns),
        response_headers_ns: r.x.headers_ns,
        first_event_ns: r.x.chunks.first().map(|c| c.0),
        first_token_ns: chunks.first().map(|c| c.at_ns),
        last_token_ns: chunks.last().map(|c| c.at_ns),
        end_ns: Some(r.x.end_ns),
        chunks,
        connection_reused: r.x.conn_request > 0,
        connection_id: r.x.conn,
        protocol: r.x.wire,
        // Headers and body, as `run` counts them.
        bytes_sent: r.x.head_sent + r.x.body.len() as u64,
        bytes_received: r.x.head_received + body_wire_bytes(&r.x),
        input_tokens: p.input_length(),
        cached_input_tokens: p.cached_tokens,
        output_tokens,
        token_source,
        tool_calls: p.calls.len() as u32,
        server_timing: p.server_timing.clone(),
        outcome: if p.ok {
            OutcomeKind::Ok
        } else if r.x.status.is_some_and(|s| s >= 400) {
            OutcomeKind::HttpStatus
        } else if r.x.error.is_some() {
            OutcomeKind::Truncated
        } else {
            OutcomeKind::ServerError
        },
        http_status: r.x.status,
        error: p.error.as_deref().map(|e| pv.clean(e)),
        ..Default::default()
    }
}

/// Writes the live session's results directory under `root` for the scenario at
/// `scenario_path` (text `toml_text`); returns its path.
pub fn results_dir(
    root: &Path,
    scenario_path: &Path,
    toml_text: &str,
    sessions: &[Session],
    pv: &Privacy,
    command_line: &[String],
) -> anyhow::Result<PathBuf> {
    let mut scenario: crate::scenario::Scenario = toml::from_str(toml_text)
        .map_err(|e| anyhow::anyhow!("the recorded scenario does not parse (a bug): {e}"))?;
    // Every session's target × transport, whatever mix of APIs the recording holds.
    let transports: Vec<TransportKind> = sessions.iter().map(transport_of).collect();
    super::live::declare(&mut scenario, sessions, &transports, AS_RECORDED, pv);
    // The live session is what the agent sent, nothing salted: its cache mode is `as-is`
    // (the default for real endpoints, `cold`, would claim salts it never had and warn
    // about the agent's own conversation being cached).
    let overrides = crate::plan::Overrides {
        load: crate::scenario::LoadKnobs {
            cache: Some(crate::vocab::CacheMode::AsIs),
            ..Default::default()
        },
        ..Default::default()
    };
    let plan = crate::plan::build(
        &scenario,
        &scenario_path.display().to_string(),
        toml_text.as_bytes(),
        &overrides,
    )?;
    let cmd: Vec<String> = command_line.iter().map(|a| pv.clean(a)).collect();
    let mut w = crate::store::RunWriter::create(root, &plan, &cmd)?;
    let mut recorder = crate::recorder::Recorder::with_slo(plan.slo);
    let (reqs, sess) = records(sessions, pv);
    for r in &reqs {
        recorder.add_request(r);
        w.write_request(r)?;
    }
    for s in &sess {
        recorder.add_session(s);
        w.write_session(s)?;
    }
    w.set_timestamps(
        "recorded by the proxy: user-space arrival stamps of each upstream frame".into(),
    );
    let dir = w.dir().to_path_buf();
    let summary = crate::recorder::Summary::from_recorder(&recorder);
    w.finish(crate::store::RunStatus::Complete, &recorder, &summary)?;
    Ok(dir)
}
