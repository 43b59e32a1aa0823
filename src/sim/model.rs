//! The timing model and the generation runner shared by every API and transport.
//!
//! Owns: turning a request into a schedule (API overhead, queue, prefill, session init,
//! output tokens and their chunk deadlines) and running it against a [`Sink`], recording the
//! ground truth into the [`Trace`]. Does not own: wire formats (the encoders in `chat` and
//! `responses`) or connections (`http`, `ws`).
//!
//! Chunks are paced by absolute deadlines computed from the decode start, so sleep error
//! never accumulates: the mean decode rate over a response is the profile's by construction
//! (the per-step durations are drawn, then scaled so that they add up to exactly
//! `(tokens after the first chunk) / decode_tok_s`).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::fault::Fault;
use super::profile::Profile;
use super::text::{self, Style};
use super::trace::{ChunkWrite, ResponseTrace, Trace};
use crate::rng::Rng;

/// Responses kept for `previous_response_id` over HTTP (`store=true`).
const MAX_STORED: usize = 2_000;

/// A stored response: the whole conversation up to and including its output.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub history: Vec<serde_json::Value>,
}

/// Server-wide state shared by all connections.
pub(crate) struct Engine {
    pub profile: Profile,
    pub seed: u64,
    pub trace: Trace,
    slots: Semaphore,
    counter: AtomicU64,
    nonce: u64,
    store: Mutex<(HashMap<String, Stored>, VecDeque<String>)>,
}

impl Engine {
    pub fn new(profile: Profile, seed: u64, origin: Instant) -> Engine {
        let nanos = crate::clock::wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Engine {
            slots: Semaphore::new(profile.capacity.max(1) as usize),
            profile,
            seed,
            trace: Trace::new(origin),
            counter: AtomicU64::new(1),
            nonce: Rng::derive(seed, nanos).next_u64(),
            store: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    /// A fresh id such as `resp_3f…`.
    pub fn next_id(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}{:016x}{n:08x}", self.nonce)
    }

    pub fn store_put(&self, id: &str, s: Stored) {
        let mut g = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if g.0.insert(id.to_string(), s).is_none() {
            g.1.push_back(id.to_string());
        }
        while g.1.len() > MAX_STORED {
            if let Some(old) = g.1.pop_front() {
                g.0.remove(&old);
            }
        }
    }

    pub fn store_get(&self, id: &str) -> Option<Stored> {
        let g = self.store.lock().unwrap_or_else(|e| e.into_inner());
        g.0.get(id).cloned()
    }
}

/// What a request asks of the model, as the API layer worked it out.
#[derive(Debug, Clone)]
pub(crate) struct TurnSpec {
    pub received_at: Instant,
    /// Tokens the API layer must (re)process (whole input over HTTP, the increment on a
    /// WebSocket continuing from its cache).
    pub api_tokens: u32,
    /// Instructions + whole conversation.
    pub input_tokens: u32,
    /// Of which already held in cached state (not prefilled again).
    pub cached_tokens: u32,
    /// Whether session initialisation is paid.
    pub session_init: bool,
    pub max_output: u32,
    /// Hash of the request content: with the server seed it fixes every random draw.
    pub content_hash: u64,
    pub style: Style,
    /// `Some(name)`: answer with a call of this function instead of text.
    pub tool: Option<String>,
    pub fault: Option<Fault>,
    /// `generate:false`: no output at all.
    pub generate: bool,
    /// `ignore_eos: true` (chat completions): exactly `max_output` tokens, no early stop.
    pub ignore_eos: bool,
}

/// One content chunk of the plan.
#[derive(Debug, Clone)]
pub(crate) struct PlannedChunk {
    pub text: String,
    pub tokens: u32,
    /// Offset from the decode start (the first chunk is at zero).
    pub offset: Duration,
}

/// The timings a finished (or broken) run reports to its encoder.
#[derive(Debug, Clone, Default)]
pub(crate) struct Done {
    pub output_tokens: u32,
    pub input_tokens: u32,
    pub cached_tokens: u32,
    pub text: String,
    pub api_overhead: Duration,
    pub queue: Duration,
    pub prefill: Duration,
    pub session_init: Duration,
    /// From the decode start to the last content chunk.
    pub decode: Duration,
    pub chunks: u32,
}

impl Done {
    /// Model time to the first token (queue + session init + prefill), excluding API overhead.
    pub fn engine_ttft(&self) -> Duration {
        self.queue + self.session_init + self.prefill
    }
}

/// How a stream is broken on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Break {
    /// Abort the connection (RST if possible).
    Reset,
    /// WebSocket close frame 1011.
    Close1011,
}

/// Where a run writes its frames: an SSE body channel or a WebSocket.
/// When a frame was handed to the connection: the instant just before its write, and, when
/// the socket reports transmit stamps, a slot the kernel's stamp of the write fills.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub at: Instant,
    pub sent: Option<crate::clock::tx::Sent>,
}

impl Written {
    /// Handed over now, with no transmit stamp to come.
    pub fn now() -> Self {
        Written {
            at: crate::clock::now(),
            sent: None,
        }
    }
}

pub(crate) trait Sink: Send {
    /// Sends one event (`event` is the SSE event name, or empty for `data:`-only framing).
    /// Returns when the bytes were handed to the connection, or `Err` if it is gone.
    fn send(
        &mut self,
        event: &str,
        data: String,
    ) -> impl Future<Output = Result<Written, ()>> + Send;
    /// Sends several events in one write; returns, for each, when it was handed over.
    fn send_group(
        &mut self,
        events: Vec<(String, String)>,
    ) -> impl Future<Output = Result<Vec<Written>, ()>> + Send;
    /// Sends raw bytes that are not a valid event (the `malformed-after` fault).
    fn send_raw(&mut self, data: String) -> impl Future<Output = Result<Written, ()>> + Send;
    /// Breaks the stream on purpose.
    fn break_stream(&mut self, how: Break) -> impl Future<Output = ()> + Send;
}

/// The wire format of one API (chat chunks, Responses events).
pub(crate) trait Encoder: Send {
    /// Events sent once API overhead is paid, before queueing and prefill.
    fn start(&mut self) -> Vec<(String, String)>;
    /// Events sent right before the first content chunk.
    fn before_first(&mut self) -> Vec<(String, String)>;
    /// One content chunk; `cumulative` counts the tokens sent so far including this one.
    fn delta(&mut self, text: &str, tokens: u32, cumulative: u32) -> (String, String);
    /// Events that end the stream.
    fn finish(&mut self, done: &Done) -> Vec<(String, String)>;
}

/// How a run ended.
pub(crate) enum RunEnd {
    Completed(Done),
    /// The client went away or a fault broke the stream.
    Broken,
}

/// Plans the output: token texts and their chunk offsets from the decode start.
pub(crate) fn plan_chunks(profile: &Profile, spec: &TurnSpec, rng: &mut Rng) -> Vec<PlannedChunk> {
    if !spec.generate {
        return Vec::new();
    }
    let tokens = match &spec.tool {
        Some(name) => text::tool_arguments(rng, name),
        None => {
            let max = spec.max_output.max(1) as f64;
            // The draw stands in for the model's end-of-sequence; `ignore_eos` skips it.
            let stop = rng.range_f64(0.7, 1.0);
            let n = if spec.ignore_eos { 1.0 } else { stop };
            let n = (n * max).round().clamp(1.0, max) as u32;
            text::generate(rng, n, spec.style)
        }
    };
    let weight_sum: f64 = profile.chunk_tokens.iter().sum();
    let mut sizes = Vec::new();
    let mut left = tokens.len();
    while left > 0 {
        let mut u = rng.f64() * weight_sum;
        let mut k = profile.chunk_tokens.len();
        for (i, w) in profile.chunk_tokens.iter().enumerate() {
            if u < *w {
                k = i + 1;
                break;
            }
            u -= w;
        }
        let k = k.clamp(1, left);
        sizes.push(k);
        left -= k;
    }
    // Raw step durations for chunks 1.. (the first chunk comes out of prefill).
    let raw: Vec<f64> = sizes
        .iter()
        .skip(1)
        .map(|&k| {
            let r = if rng.f64() < profile.burst_prob {
                profile.burst_tok_s
            } else {
                profile.decode_tok_s
            };
            k as f64 / r * rng.lognormal(1.0, profile.step_jitter)
        })
        .collect();
    let after_first = (tokens.len() - sizes.first().copied().unwrap_or(0)) as f64;
    let total = after_first / profile.decode_tok_s;
    let sum: f64 = raw.iter().sum();
    let scale = if sum > 0.0 { total / sum } else { 0.0 };
    let mut out = Vec::with_capacity(sizes.len());
    let mut pos = 0;
    let mut acc = 0.0;
    for (i, k) in sizes.iter().enumerate() {
        if i > 0 {
            acc += raw[i - 1] * scale;
        }
        out.push(PlannedChunk {
            text: tokens[pos..pos + k].concat(),
            tokens: *k as u32,
            offset: Duration::try_from_secs_f64(acc)
                .unwrap_or(MAX_DELAY)
                .min(MAX_DELAY),
        });
        pos += k;
    }
    // Written in groups: every chunk of a group is due with the group's last chunk.
    let group = profile.chunks_per_write.max(1) as usize;
    if group > 1 {
        for g in out.chunks_mut(group) {
            let due = g.last().map(|c| c.offset).unwrap_or_default();
            for c in g {
                c.offset = due;
            }
        }
    }
    out
}

/// The API overhead of a request.
pub(crate) fn api_overhead(profile: &Profile, spec: &TurnSpec) -> Duration {
    let per_token = profile
        .api_per_input_token
        .checked_mul(spec.api_tokens)
        .unwrap_or(MAX_DELAY);
    profile.api_base.saturating_add(per_token).min(MAX_DELAY)
}

/// No simulated delay exceeds this (keeps deadline arithmetic far from overflow).
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(3600);

/// Prefill time of a request.
pub(crate) fn prefill(profile: &Profile, spec: &TurnSpec) -> Duration {
    let uncached = spec.input_tokens.saturating_sub(spec.cached_tokens);
    Duration::try_from_secs_f64(uncached as f64 / profile.prefill_tok_s)
        .unwrap_or(MAX_DELAY)
        .min(MAX_DELAY)
}

/// Runs one generation: pays the API overhead, queues for a slot, prefills, then writes the
/// chunks at their deadlines. Records the trace whatever happens.
pub(crate) async fn run<S: Sink, E: Encoder>(
    engine: &Engine,
    spec: &TurnSpec,
    response_id: &str,
    sink: &mut S,
    enc: &mut E,
) -> RunEnd {
    let profile = &engine.profile;
    let mut rng = Rng::derive(engine.seed, spec.content_hash);
    let chunks = plan_chunks(profile, spec, &mut rng);
    let mut trace = ResponseTrace {
        response_id: response_id.to_string(),
        received_at: spec.received_at,
        chunk_writes: Vec::new(),
        output_tokens: 0,
        input_tokens: spec.input_tokens,
        cached_input_tokens: spec.cached_tokens,
        api_overhead: api_overhead(profile, spec),
        queue: Duration::ZERO,
        prefill: prefill(profile, spec),
        session_init: if spec.session_init {
            profile.session_init
        } else {
            Duration::ZERO
        },
        fault: spec.fault.map(|f| f.spec()),
    };
    let end = run_inner(engine, spec, chunks, sink, enc, &mut trace).await;
    // Published again at the end (it may have been published before the last write).
    engine.trace.insert(trace);
    end
}

async fn run_inner<S: Sink, E: Encoder>(
    engine: &Engine,
    spec: &TurnSpec,
    chunks: Vec<PlannedChunk>,
    sink: &mut S,
    enc: &mut E,
    trace: &mut ResponseTrace,
) -> RunEnd {
    crate::clock::timer::sleep_until(spec.received_at + trace.api_overhead).await;
    for (ev, data) in enc.start() {
        if sink.send(&ev, data).await.is_err() {
            return RunEnd::Broken;
        }
    }
    let waiting = crate::clock::now();
    // The semaphore is never closed, so acquire only fails if it were; treat that as no wait.
    let _permit = engine.slots.acquire().await.ok();
    trace.queue = crate::clock::since(waiting);
    let stall = match spec.fault {
        Some(Fault::Stall(d)) => d.min(MAX_DELAY),
        _ => Duration::ZERO,
    };
    let decode_start = crate::clock::now() + trace.session_init + trace.prefill + stall;
    crate::clock::timer::sleep_until(decode_start).await;
    let mut done = Done {
        input_tokens: spec.input_tokens,
        cached_tokens: spec.cached_tokens,
        api_overhead: trace.api_overhead,
        queue: trace.queue,
        prefill: trace.prefill,
        session_init: trace.session_init,
        ..Done::default()
    };
    let break_after = spec
        .fault
        .and_then(|f| f.after_chunks())
        .map(|n| n as usize);
    let group = engine.profile.chunks_per_write.max(1) as usize;
    let mut i = 0;
    while i < chunks.len() {
        if break_after == Some(i) {
            engine.trace.insert(trace.clone());
            return break_stream(spec, sink).await;
        }
        if i == 0 {
            for (ev, data) in enc.before_first() {
                if sink.send(&ev, data).await.is_err() {
                    return RunEnd::Broken;
                }
            }
        }
        // This write's chunks: up to a group, cut short where a fault breaks the stream.
        let mut end = (i + group).min(chunks.len());
        if let Some(n) = break_after.filter(|n| (i + 1..end).contains(n)) {
            end = n;
        }
        let these = &chunks[i..end];
        let due = these.last().map(|c| c.offset).unwrap_or_default();
        crate::clock::timer::sleep_until(decode_start + due).await;
        if let [c] = these {
            // One chunk per write (the default): no group to build.
            let (ev, data) = enc.delta(&c.text, c.tokens, done.output_tokens + c.tokens);
            let Ok(w) = sink.send(&ev, data).await else {
                return RunEnd::Broken;
            };
            wrote(&mut done, trace, c, w);
        } else {
            let mut events = Vec::with_capacity(these.len());
            let mut cumulative = done.output_tokens;
            for c in these {
                cumulative += c.tokens;
                events.push(enc.delta(&c.text, c.tokens, cumulative));
            }
            let Ok(written) = sink.send_group(events).await else {
                return RunEnd::Broken;
            };
            for (c, w) in these.iter().zip(written) {
                wrote(&mut done, trace, c, w);
            }
        }
        i = end;
    }
    // The ground truth is complete once the last content chunk is written: publish it before
    // the terminal event, so a client that has read that event always finds the trace.
    engine.trace.insert(trace.clone());
    if break_after.is_some_and(|n| n >= chunks.len()) {
        return break_stream(spec, sink).await;
    }
    done.decode = chunks.last().map(|c| c.offset).unwrap_or_default();
    for (ev, data) in enc.finish(&done) {
        if sink.send(&ev, data).await.is_err() {
            return RunEnd::Broken;
        }
    }
    RunEnd::Completed(done)
}

/// Counts a content chunk that was handed over, and records its ground truth.
fn wrote(done: &mut Done, trace: &mut ResponseTrace, c: &PlannedChunk, w: Written) {
    done.output_tokens += c.tokens;
    done.chunks += 1;
    done.text.push_str(&c.text);
    trace.output_tokens = done.output_tokens;
    trace.chunk_writes.push(ChunkWrite {
        at: w.at,
        tokens: c.tokens,
        text: c.text.clone(),
        sent: w.sent,
    });
}

async fn break_stream<S: Sink>(spec: &TurnSpec, sink: &mut S) -> RunEnd {
    match spec.fault {
        Some(Fault::ResetAfter(_)) => sink.break_stream(Break::Reset).await,
        Some(Fault::WsClose1011After(_)) => sink.break_stream(Break::Close1011).await,
        Some(Fault::MalformedAfter(_)) => {
            let _ = sink
                .send_raw("{\"type\":\"response.output_text.delta\",\"delta\":".to_string())
                .await;
        }
        _ => {}
    }
    RunEnd::Broken
}

/// FNV-1a over the parts of a request that fix its random draws.
pub(crate) fn content_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.iter() {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Shared engine handle.
pub(crate) type EngineRef = Arc<Engine>;

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(max: u32) -> TurnSpec {
        TurnSpec {
            received_at: crate::clock::now(),
            api_tokens: 10,
            input_tokens: 10,
            cached_tokens: 0,
            session_init: true,
            max_output: max,
            content_hash: 42,
            style: Style::Code,
            tool: None,
            fault: None,
            generate: true,
            ignore_eos: false,
        }
    }

    #[test]
    fn ignore_eos_generates_exactly_max_output() {
        let p = Profile::builtin("fast").unwrap();
        let mut exact = spec(300);
        exact.ignore_eos = true;
        let tokens = |s: &TurnSpec| -> u32 {
            plan_chunks(&p, s, &mut Rng::new(9))
                .iter()
                .map(|c| c.tokens)
                .sum()
        };
        assert_eq!(tokens(&exact), 300);
        let early = tokens(&spec(300));
        assert!((210..=300).contains(&early), "{early}");
    }

    #[test]
    fn plan_holds_the_mean_rate_exactly_and_is_seeded() {
        for name in Profile::builtin_names() {
            let p = Profile::builtin(name).unwrap();
            let a = plan_chunks(&p, &spec(2000), &mut Rng::new(5));
            let b = plan_chunks(&p, &spec(2000), &mut Rng::new(5));
            assert_eq!(a.len(), b.len());
            let n: u32 = a.iter().map(|c| c.tokens).sum();
            assert!((1400..=2000).contains(&n), "{name}: {n}");
            let after_first = (n - a[0].tokens) as f64;
            let rate = after_first / a.last().unwrap().offset.as_secs_f64();
            assert!((rate / p.decode_tok_s - 1.0).abs() < 1e-6, "{name}: {rate}");
            assert!(a.windows(2).all(|w| w[0].offset <= w[1].offset));
        }
        let p = Profile::builtin("wafer").unwrap();
        let a = plan_chunks(&p, &spec(2000), &mut Rng::new(5));
        assert!(
            a.iter().any(|c| c.tokens >= 3),
            "wafer sends several tokens per chunk"
        );
    }

    #[test]
    fn a_group_is_due_with_its_last_chunk_and_keeps_every_chunk() {
        let one = Profile::builtin("wafer").unwrap();
        let four = Profile {
            chunks_per_write: 4,
            ..one.clone()
        };
        // A seed whose plan ends with a short group.
        let seed = (1..50)
            .find(|&s| plan_chunks(&one, &spec(300), &mut Rng::new(s)).len() % 4 != 0)
            .expect("a plan with a short last group");
        let a = plan_chunks(&one, &spec(300), &mut Rng::new(seed));
        let b = plan_chunks(&four, &spec(300), &mut Rng::new(seed));
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!((&x.text, x.tokens), (&y.text, y.tokens));
            let last = (i / 4 * 4 + 3).min(a.len() - 1);
            assert_eq!(y.offset, a[last].offset, "chunk {i}");
        }
    }

    /// Records what each write carried: the events of a group, or one event.
    #[derive(Default)]
    struct Writes(Vec<Vec<String>>, Option<Break>);

    impl Sink for Writes {
        async fn send(&mut self, _event: &str, data: String) -> Result<Written, ()> {
            self.0.push(vec![data]);
            Ok(Written::now())
        }
        async fn send_group(&mut self, events: Vec<(String, String)>) -> Result<Vec<Written>, ()> {
            let n = events.len();
            self.0.push(events.into_iter().map(|(_, d)| d).collect());
            Ok(vec![Written::now(); n])
        }
        async fn send_raw(&mut self, data: String) -> Result<Written, ()> {
            self.send("", data).await
        }
        async fn break_stream(&mut self, how: Break) {
            self.1 = Some(how);
        }
    }

    /// Content chunks are `d<cumulative tokens>`; everything else is `x`.
    struct Enc;

    impl Encoder for Enc {
        fn start(&mut self) -> Vec<(String, String)> {
            vec![(String::new(), "x".into())]
        }
        fn before_first(&mut self) -> Vec<(String, String)> {
            vec![(String::new(), "x".into())]
        }
        fn delta(&mut self, _text: &str, _tokens: u32, cumulative: u32) -> (String, String) {
            (String::new(), format!("d{cumulative}"))
        }
        fn finish(&mut self, _done: &Done) -> Vec<(String, String)> {
            vec![(String::new(), "x".into())]
        }
    }

    #[tokio::test]
    async fn groups_go_out_in_one_write_each_and_a_fault_cuts_the_group_short() {
        let profile = Profile {
            chunks_per_write: 4,
            ..Profile::builtin("fast").unwrap()
        };
        let engine = Engine::new(profile, 3, crate::clock::now());
        let cases = [
            (None, vec![]),
            (Some(Fault::ResetAfter(6)), vec![4, 2]),
            (Some(Fault::ResetAfter(4)), vec![4]),
            (Some(Fault::ResetAfter(1)), vec![1]),
            (Some(Fault::MalformedAfter(6)), vec![4, 2]),
            (Some(Fault::WsClose1011After(7)), vec![4, 3]),
        ];
        for (fault, cut) in cases {
            let mut sp = spec(40);
            sp.fault = fault;
            let mut sink = Writes::default();
            let end = run(&engine, &sp, "resp_t", &mut sink, &mut Enc).await;
            let deltas: Vec<&Vec<String>> =
                sink.0.iter().filter(|w| w[0].starts_with('d')).collect();
            let sizes: Vec<usize> = deltas.iter().map(|w| w.len()).collect();
            let trace = engine.trace.get("resp_t").expect("trace");
            let chunks = trace.chunk_writes.len();
            // The cumulative counts run on across groups, with no gap or repeat.
            let cum: Vec<u32> = trace
                .chunk_writes
                .iter()
                .scan(0, |acc, w| {
                    *acc += w.tokens;
                    Some(*acc)
                })
                .collect();
            let sent: Vec<String> = deltas.iter().flat_map(|w| w.iter().cloned()).collect();
            assert_eq!(
                sent,
                cum.iter().map(|c| format!("d{c}")).collect::<Vec<_>>()
            );
            match fault {
                None => {
                    assert!(matches!(end, RunEnd::Completed(_)));
                    assert!(chunks > 8, "{chunks}");
                    assert!(
                        sizes[..sizes.len() - 1].iter().all(|&n| n == 4),
                        "{sizes:?}"
                    );
                    assert_eq!(sizes.iter().sum::<usize>(), chunks);
                    assert_eq!(sink.1, None);
                }
                Some(f) => {
                    assert!(matches!(end, RunEnd::Broken), "{f:?}");
                    assert_eq!(sizes, cut, "{f:?}");
                    assert_eq!(chunks, cut.iter().sum::<usize>(), "{f:?}");
                    let (brk, raw) = match f {
                        Fault::ResetAfter(_) => (Some(Break::Reset), false),
                        Fault::WsClose1011After(_) => (Some(Break::Close1011), false),
                        _ => (None, true),
                    };
                    assert_eq!(sink.1, brk, "{f:?}");
                    // malformed-after: the last write is the broken event, after the chunks.
                    let last = &sink.0.last().unwrap()[0];
                    assert_eq!(last.starts_with("{\"type\""), raw, "{f:?}: {last}");
                }
            }
        }
    }
}
