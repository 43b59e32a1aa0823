//! The recorder: request and session records in, one HdrHistogram per metric × cell out,
//! plus counters by outcome, token source and overhead source.
//!
//! Owns: what goes into which histogram (warm-up and failed requests never do), the
//! counters, feeding every request to the stall detector, merging recorders (shards,
//! repeated runs), and the live snapshot for the progress display. Holds nothing per
//! request, nor per session outside `merge` (see docs/measurements.md, "Memory").
//! Does not own: clocks or I/O (every time arrives on a record), percentiles for people
//! (see `summary`), or files (see `store`).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::metrics::Metric;
use super::timeline::SessionTimeline;
use crate::vocab::{OutcomeKind, RequestKind, RequestRecord, SessionRecord};

/// Significant decimal digits kept by every histogram (0.1 % value resolution).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A new empty, auto-resizing histogram with [`SIGNIFICANT_DIGITS`].
pub fn new_histogram() -> Histogram<u64> {
    // `new` only fails for sigfig > 5; 3 is a constant, so this cannot fail at run time.
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid configuration")
}

/// One target × transport combination: the unit every statistic is kept per.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellKey {
    /// Target name (`sim-wafer`, `openai`, …).
    pub target: String,
    /// Transport name (`http`, `http-pooled`, `http2`, `ws`).
    pub transport: String,
}

impl CellKey {
    /// A key from borrowed names.
    pub fn new(target: &str, transport: &str) -> Self {
        CellKey {
            target: target.to_string(),
            transport: transport.to_string(),
        }
    }
}

/// A cell's two names, borrowed: what [`CellKey`] compares by, so that a map keyed by it can
/// be searched without building (allocating) a key for every record.
trait CellNames {
    fn names(&self) -> (&str, &str);
}

impl CellNames for CellKey {
    fn names(&self) -> (&str, &str) {
        (&self.target, &self.transport)
    }
}

impl CellNames for (&str, &str) {
    fn names(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

// `Borrow` requires the borrowed form to order as the key does: the derived order of
// `CellKey` is by target, then transport, as a tuple's is.
impl<'a> std::borrow::Borrow<dyn CellNames + 'a> for CellKey {
    fn borrow(&self) -> &(dyn CellNames + 'a) {
        self
    }
}

impl PartialEq for dyn CellNames + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for dyn CellNames + '_ {}

impl PartialOrd for dyn CellNames + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn CellNames + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.names().cmp(&other.names())
    }
}

/// The value of cell `target` × `transport` in `map`, made by `make` if absent; a key is
/// built (two strings) only then.
fn cell_entry<'m, V>(
    map: &'m mut BTreeMap<CellKey, V>,
    target: &str,
    transport: &str,
    make: impl FnOnce() -> V,
) -> &'m mut V {
    let names: &dyn CellNames = &(target, transport);
    if !map.contains_key(names) {
        map.insert(CellKey::new(target, transport), make());
    }
    map.get_mut(names)
        .expect("the cell was just found or inserted")
}

/// Adds `value` to `h`; a value the histogram cannot hold is counted in `unrecordable`.
fn put(h: &mut Histogram<u64>, value: u64, unrecordable: &mut u64) {
    if h.record(value).is_err() {
        *unrecordable += 1;
    }
}

/// Adds one to `counts[name]`, building the name's `String` only the first time.
fn count_name(counts: &mut BTreeMap<String, u64>, name: &str) {
    match counts.get_mut(name) {
        Some(n) => *n += 1,
        None => {
            counts.insert(name.to_string(), 1);
        }
    }
}

impl std::fmt::Display for CellKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} × {}", self.target, self.transport)
    }
}

/// Everything recorded for one cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellStats {
    /// One histogram per metric that received at least one sample (stored units, see
    /// [`Metric::storage`]). Only measured (non-warm-up), successful requests and measured
    /// sessions without failures contribute.
    pub histograms: BTreeMap<Metric, Histogram<u64>>,
    /// Measured requests, every outcome.
    pub requests: u64,
    /// Measured requests by outcome (`ok` included).
    pub by_outcome: BTreeMap<OutcomeKind, u64>,
    /// Warm-up requests: every request of a warm-up session (any outcome), plus successful
    /// `generate:false` WebSocket warm-ups in measured sessions (whose connection setup is
    /// still recorded; a failed one counts as a failed request). Never in latency histograms.
    pub warmup_requests: u64,
    /// Measured sessions.
    pub sessions: u64,
    /// Measured sessions with at least one request that did not end `ok`; their wall time
    /// is not in `session_wall`.
    pub failed_sessions: u64,
    /// Warm-up sessions.
    pub warmup_sessions: u64,
    /// Successful measured requests by token source (`server-usage`, `chunk-count`).
    pub token_sources: BTreeMap<String, u64>,
    /// Successful measured requests by overhead source (`server-timing`, `first-event-estimate`).
    pub overhead_sources: BTreeMap<String, u64>,
    /// Output tokens of successful measured requests.
    pub output_tokens: u64,
    /// Content chunks of successful measured requests.
    pub chunks: u64,
    /// Input tokens of successful measured requests whose server reported both input and
    /// cached input tokens.
    pub cache_input_tokens: u64,
    /// Of which the server answered from its prefix cache.
    pub cached_input_tokens: u64,
    /// The same two counts over requests that re-sent their whole history
    /// (`full-history`): a `previous-response-id` request sends only its new input, and the
    /// server's stored conversation it continues counts as cached, salt or not.
    pub unchained_cache_input_tokens: u64,
    /// Of which the server answered from its prefix cache.
    pub unchained_cached_input_tokens: u64,
    /// Input (prompt) tokens of successful measured requests whose server reported them.
    pub input_tokens: u64,
    /// Successful measured requests whose server reported input tokens.
    pub input_token_requests: u64,
    /// Earliest intended start of any measured request, ns since run start.
    pub first_intended_ns: Option<u64>,
    /// Latest end (or last token) of any measured request, ns since run start.
    pub last_end_ns: Option<u64>,
    /// The union of the successful measured requests' `[intended start, end]` intervals:
    /// the time the cell itself was working (see `busy`).
    pub busy: super::busy::BusyTime,
    /// Samples a histogram refused (cannot happen with auto-resize unless a value
    /// overflows `u64`); reported so nothing is dropped silently.
    pub unrecordable: u64,
    /// Measured requests that were good under the recorder's SLOs (see
    /// `plan::Slo::request_is_good`); 0 when it has none.
    pub good_requests: u64,
    /// Output tokens (as the request recorded them: server-reported usage, or the chunk
    /// count when the server reported none) of those good requests.
    pub good_output_tokens: u64,
    /// Successful measured requests that ran on a connection opened for them.
    pub fresh_connection_requests: u64,
    /// Successful measured requests that ran on a connection opened for an earlier one
    /// (a pooled HTTP/1.1 connection, the cell's HTTP/2 connection, the session's WebSocket).
    pub reused_connection_requests: u64,
    /// What the cell's connector learnt about its server's connections (a server that
    /// closes each one after its response), when it learnt anything.
    pub connection_note: Option<String>,
    /// Successful measured requests whose `decode_tok_s` or `output_tok_s` was withheld
    /// because its span was below `vocab::MIN_RATE_SPAN_NS` (see
    /// `RequestRecord::rate_span_unresolved`): they are in every other metric, not in those.
    pub rate_span_unresolved: u64,
    /// Successful measured requests with enough chunks for the buffering check, and of them
    /// those that arrived in bursts (see `buffering`).
    pub burst_checked_requests: u64,
    /// Of [`CellStats::burst_checked_requests`], the bursty ones.
    pub bursty_requests: u64,
    /// The server's documented chunks per write (a simulator profile's `chunks_per_write`);
    /// 0 or 1: one chunk per write.
    pub chunks_per_write: u32,
}

impl CellStats {
    /// Measured requests that failed, not counting `cancelled` (cut off by Ctrl-C or the
    /// deadline, which is not the server's fault).
    pub fn failed(&self) -> u64 {
        self.by_outcome
            .iter()
            .filter(|(k, _)| !matches!(k, OutcomeKind::Ok | OutcomeKind::Cancelled))
            .map(|(_, n)| n)
            .sum()
    }

    /// Measured requests that completed `ok`.
    pub fn ok(&self) -> u64 {
        self.by_outcome.get(&OutcomeKind::Ok).copied().unwrap_or(0)
    }

    /// Measured requests cancelled by Ctrl-C or the run deadline.
    pub fn cancelled(&self) -> u64 {
        self.by_outcome
            .get(&OutcomeKind::Cancelled)
            .copied()
            .unwrap_or(0)
    }

    /// The histogram of `metric`, if it has any samples.
    pub fn histogram(&self, metric: Metric) -> Option<&Histogram<u64>> {
        self.histograms.get(&metric).filter(|h| !h.is_empty())
    }

    fn record(&mut self, metric: Metric, value: u64) {
        let h = self.histograms.entry(metric).or_insert_with(new_histogram);
        put(h, value, &mut self.unrecordable);
    }

    /// Records the samples of [`request_statistics`], with no `Vec` and one histogram
    /// lookup per metric (an ITL sample per chunk).
    fn record_request(&mut self, r: &RequestRecord) {
        let metrics = request_metrics(r);
        if metrics.is_empty() {
            return;
        }
        let phases = super::metrics::phases_ns(r);
        let (histograms, unrecordable) = (&mut self.histograms, &mut self.unrecordable);
        for &m in metrics {
            // A metric's histogram is made at its first sample (one with none stays absent).
            match histograms.get_mut(&m) {
                Some(h) => m.each_request_sample(r, &phases, |v| put(h, v, unrecordable)),
                None => m.each_request_sample(r, &phases, |v| {
                    let h = histograms.entry(m).or_insert_with(new_histogram);
                    put(h, v, unrecordable)
                }),
            }
        }
    }

    fn extend_span(&mut self, start: u64, end: Option<u64>) {
        self.first_intended_ns = Some(self.first_intended_ns.map_or(start, |s| s.min(start)));
        if let Some(e) = end {
            self.last_end_ns = Some(self.last_end_ns.map_or(e, |l| l.max(e)));
        }
    }

    fn merge(&mut self, other: &CellStats) {
        for (m, h) in &other.histograms {
            let mine = self.histograms.entry(*m).or_insert_with(new_histogram);
            if mine.add(h).is_err() {
                self.unrecordable += h.len();
            }
        }
        self.requests += other.requests;
        for (k, n) in &other.by_outcome {
            *self.by_outcome.entry(*k).or_default() += n;
        }
        self.warmup_requests += other.warmup_requests;
        self.sessions += other.sessions;
        self.failed_sessions += other.failed_sessions;
        self.warmup_sessions += other.warmup_sessions;
        for (k, n) in &other.token_sources {
            *self.token_sources.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &other.overhead_sources {
            *self.overhead_sources.entry(k.clone()).or_default() += n;
        }
        self.output_tokens += other.output_tokens;
        self.chunks += other.chunks;
        self.input_tokens += other.input_tokens;
        self.input_token_requests += other.input_token_requests;
        self.cache_input_tokens += other.cache_input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.unchained_cache_input_tokens += other.unchained_cache_input_tokens;
        self.unchained_cached_input_tokens += other.unchained_cached_input_tokens;
        self.fresh_connection_requests += other.fresh_connection_requests;
        self.reused_connection_requests += other.reused_connection_requests;
        if self.connection_note.is_none() {
            self.connection_note.clone_from(&other.connection_note);
        }
        self.good_requests += other.good_requests;
        self.good_output_tokens += other.good_output_tokens;
        self.rate_span_unresolved += other.rate_span_unresolved;
        self.burst_checked_requests += other.burst_checked_requests;
        self.bursty_requests += other.bursty_requests;
        self.chunks_per_write = self.chunks_per_write.max(other.chunks_per_write);
        if let Some(s) = other.first_intended_ns {
            self.extend_span(s, other.last_end_ns);
        }
        self.busy.merge(&other.busy);
        self.unrecordable += other.unrecordable;
    }
}

/// The metrics one request contributes samples to, under the recorder's rules: none for
/// warm-up sessions or failed requests, only `connection_setup` for a `generate:false`
/// WebSocket warm-up, every metric otherwise.
fn request_metrics(r: &RequestRecord) -> &'static [Metric] {
    if r.warmup || !r.is_ok() {
        &[]
    } else if r.kind == RequestKind::Warmup {
        &[Metric::ConnectionSetup]
    } else {
        &Metric::ALL
    }
}

/// The histogram samples (metric, stored value) one request contributes, under the
/// recorder's rules (`request_metrics`). Shared with readers that want raw samples (e.g.
/// `compare`'s resampling), so both see exactly the same population.
pub fn request_statistics(r: &RequestRecord) -> Vec<(Metric, u64)> {
    let phases = super::metrics::phases_ns(r);
    let mut out = Vec::new();
    for &m in request_metrics(r) {
        m.each_request_sample(r, &phases, |v| out.push((m, v)));
    }
    out
}

/// The `session_wall` sample of a session, ns: `None` for warm-up sessions and sessions
/// with a failed request.
pub fn session_statistics(s: &SessionRecord) -> Option<u64> {
    if s.warmup || s.failed > 0 || s.interrupted {
        return None;
    }
    Metric::SessionWall.session_sample(s)
}

/// Records → histograms and counters, per cell. Pure and mergeable.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    cells: BTreeMap<CellKey, CellStats>,
    /// One sampled session per cell (see `timeline`): bounded, for the report's timeline.
    timelines: BTreeMap<CellKey, SessionTimeline>,
    /// The SLOs goodput is counted against (empty: no goodput).
    slo: crate::plan::Slo,
    /// Every measured request's send times, for the run's `harness` section.
    dispatch: super::harness::DispatchStats,
    /// Every session's (start, end), ns, for the most sessions in progress at once: kept
    /// only by a [`Recorder::counts_only`] recorder (`merge`, offline); a run's recorder
    /// keeps nothing per session (the driver counts the sessions in progress).
    session_spans: Vec<(u64, u64)>,
    /// The stall rule fed every request's chunk arrivals, in bounded memory (see
    /// [`super::stalls::StallDetector`]).
    stalls: super::stalls::StallDetector,
    /// Counters only: no histogram samples (`merge` takes the histograms from the shards'
    /// logs and counts from their rows).
    counts_only: bool,
    /// Targets whose server writes several chunks at once by design (target → chunks per
    /// write), for the buffering check.
    write_groups: BTreeMap<String, u32>,
}

/// A snapshot for the progress display.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct LiveStats {
    /// Requests finished so far, warm-up included, any outcome.
    pub requests_done: u64,
    /// Measured requests that failed (cancelled ones excluded).
    pub failures: u64,
    /// Median TTFT of successful measured requests so far, ms.
    pub ttft_p50_ms: Option<f64>,
    /// Output tokens of successful measured requests over the span from the first intended
    /// start to the last end seen, tokens/s.
    pub output_tok_s: Option<f64>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty recorder that counts good requests against `slo` (the plan's `[slo]`).
    pub fn with_slo(slo: crate::plan::Slo) -> Self {
        Recorder {
            slo,
            ..Self::default()
        }
    }

    /// An empty recorder that keeps counters but records no histogram samples: for
    /// `merge`, which adds the shards' histograms with [`Recorder::add_histogram`].
    pub fn counts_only(slo: crate::plan::Slo) -> Self {
        Recorder {
            slo,
            counts_only: true,
            ..Self::default()
        }
    }

    /// Tells the buffering check that `target`'s server writes `chunks_per_write` chunks at
    /// once by design (a simulator profile's `chunks_per_write`), so reads of up to two such
    /// writes are its cadence, not a middlebox's (see `buffering`).
    pub fn expect_write_groups(&mut self, target: &str, chunks_per_write: u32) {
        self.write_groups
            .insert(target.to_string(), chunks_per_write.max(1));
    }

    /// Adds `h` (stored units) to the histogram of `metric` in cell `key`.
    pub fn add_histogram(&mut self, key: &CellKey, metric: Metric, h: &Histogram<u64>) {
        let cell = self.cells.entry(key.clone()).or_default();
        let mine = cell.histograms.entry(metric).or_insert_with(new_histogram);
        if mine.add(h).is_err() {
            cell.unrecordable += h.len();
        }
    }

    /// Most sessions in progress at once (from each session's start to its end), over
    /// every cell, warm-up sessions included; only a [`Recorder::counts_only`] recorder
    /// keeps the sessions' spans (0 otherwise).
    pub fn peak_sessions(&self) -> u64 {
        let mut edges: Vec<(u64, i8)> = Vec::with_capacity(self.session_spans.len() * 2);
        for &(s, e) in &self.session_spans {
            edges.push((s, 1));
            edges.push((e.max(s), -1));
        }
        // Ends before starts at the same instant: a slot handed over is not two sessions.
        edges.sort_unstable();
        let (mut now, mut peak) = (0i64, 0i64);
        for (_, d) in edges {
            now += i64::from(d);
            peak = peak.max(now);
        }
        peak as u64
    }

    /// The SLOs goodput is counted against.
    pub fn slo(&self) -> &crate::plan::Slo {
        &self.slo
    }

    /// The stall windows of every request added so far (see [`super::stalls`]), without
    /// their late dispatches: [`super::stalls::count_late`] counts those from the rows.
    pub fn stalls(&self) -> super::stalls::Stalls {
        self.stalls.stalls()
    }

    /// The stall detector (its size, for tests and docs).
    pub fn stall_detector(&self) -> &super::stalls::StallDetector {
        &self.stalls
    }

    /// The measured requests' send times (see [`super::harness`]).
    pub fn dispatch(&self) -> &super::harness::DispatchStats {
        &self.dispatch
    }

    /// Makes sure `key` appears in summaries even if none of its requests completed.
    pub fn ensure_cell(&mut self, key: CellKey) {
        self.cells.entry(key).or_default();
    }

    /// Adds one finished request.
    pub fn add_request(&mut self, r: &RequestRecord) {
        self.add_request_with(r, r.chunks.len() as u64 + r.chunks_dropped);
    }

    /// Adds one finished request whose chunks are counted, not listed (`chunks`: the
    /// `chunk_count` column); for a [`Recorder::counts_only`] recorder reading rows.
    pub fn add_request_with(&mut self, r: &RequestRecord, chunks: u64) {
        self.dispatch.add_with(r, chunks);
        self.stalls.add_request(r);
        let counts_only = self.counts_only;
        let cell = cell_entry(
            &mut self.cells,
            &r.target,
            r.transport.as_str(),
            CellStats::default,
        );
        if r.warmup {
            cell.warmup_requests += 1;
            return;
        }
        if !counts_only {
            let tl = cell_entry(&mut self.timelines, &r.target, r.transport.as_str(), || {
                SessionTimeline::first_of(r)
            });
            if tl.session == r.session {
                tl.push(r);
            }
        }
        if r.kind == RequestKind::Warmup {
            // A `generate:false` warm-up inside a measured session: it produces no output,
            // so it stays out of the latency histograms, but the connection it opened is a
            // real cost of the session, and a failed warm-up is a real failure.
            if r.is_ok() {
                cell.warmup_requests += 1;
                if !counts_only {
                    cell.record_request(r);
                }
                return;
            }
        }
        cell.requests += 1;
        *cell.by_outcome.entry(r.outcome).or_default() += 1;
        if !r.is_ok() {
            return;
        }
        cell.extend_span(r.intended_ns, r.end_ns.or(r.last_token_ns));
        if let Some(end) = r.end_ns.or(r.last_token_ns) {
            cell.busy.add(r.intended_ns, end);
        }
        cell.output_tokens += u64::from(r.output_tokens);
        if r.connection_reused {
            cell.reused_connection_requests += 1;
        } else {
            cell.fresh_connection_requests += 1;
        }
        if !self.slo.is_empty() && self.slo.request_is_good(r) {
            cell.good_requests += 1;
            cell.good_output_tokens += u64::from(r.output_tokens);
        }
        cell.chunks += chunks;
        let group = self.write_groups.get(&r.target).copied().unwrap_or(1);
        cell.chunks_per_write = cell.chunks_per_write.max(group);
        if let Some(bursty) = super::buffering::classify(r, group) {
            cell.burst_checked_requests += 1;
            cell.bursty_requests += u64::from(bursty);
        }
        if r.rate_span_unresolved(chunks) {
            cell.rate_span_unresolved += 1;
        }
        if let Some(input) = r.input_tokens {
            cell.input_tokens += u64::from(input);
            cell.input_token_requests += 1;
        }
        if let (Some(input), Some(cached)) = (r.input_tokens, r.cached_input_tokens) {
            cell.cache_input_tokens += u64::from(input);
            cell.cached_input_tokens += u64::from(cached.min(input));
            if r.chaining == crate::vocab::Chaining::FullHistory {
                cell.unchained_cache_input_tokens += u64::from(input);
                cell.unchained_cached_input_tokens += u64::from(cached.min(input));
            }
        }
        count_name(&mut cell.token_sources, r.token_source.as_str());
        if let Some((_, src)) = r.overhead_ns() {
            count_name(&mut cell.overhead_sources, src.as_str());
        }
        if !counts_only {
            cell.record_request(r);
        }
    }

    /// Adds one finished session.
    pub fn add_session(&mut self, s: &SessionRecord) {
        let counts_only = self.counts_only;
        if counts_only {
            self.session_spans.push((s.start_ns, s.end_ns));
        }
        let cell = cell_entry(
            &mut self.cells,
            &s.target,
            s.transport.as_str(),
            CellStats::default,
        );
        if s.warmup {
            cell.warmup_sessions += 1;
            return;
        }
        if let Some(tl) = self
            .timelines
            .get_mut(&(s.target.as_str(), s.transport.as_str()) as &dyn CellNames)
            .filter(|tl| tl.session == s.session)
        {
            tl.record = Some(s.clone());
        }
        cell.sessions += 1;
        if s.failed > 0 {
            cell.failed_sessions += 1;
            return;
        }
        if let Some(v) = session_statistics(s).filter(|_| !counts_only) {
            cell.record(Metric::SessionWall, v);
        }
    }

    /// Notes what a cell's connector learnt about its server's connections (see
    /// [`CellStats::connection_note`]).
    pub fn note_connections(&mut self, target: &str, transport: &str, note: &str) {
        let cell = self
            .cells
            .entry(CellKey::new(target, transport))
            .or_default();
        cell.connection_note = Some(note.to_string());
    }

    /// Folds another recorder (a shard, or another run of the same plan) into this one.
    pub fn merge(&mut self, other: &Recorder) {
        for (k, c) in &other.cells {
            self.cells.entry(k.clone()).or_default().merge(c);
        }
        for (k, t) in &other.timelines {
            self.timelines.entry(k.clone()).or_insert_with(|| t.clone());
        }
        self.session_spans.extend_from_slice(&other.session_spans);
        self.stalls.merge(&other.stalls);
    }

    /// The sampled session of every cell that has one, in key order.
    pub fn timelines(&self) -> impl Iterator<Item = &SessionTimeline> {
        self.timelines.values()
    }

    /// The sampled session of one cell.
    pub fn timeline(&self, key: &CellKey) -> Option<&SessionTimeline> {
        self.timelines.get(key)
    }

    /// All cells, in key order.
    pub fn cells(&self) -> &BTreeMap<CellKey, CellStats> {
        &self.cells
    }

    /// One cell.
    pub fn cell(&self, key: &CellKey) -> Option<&CellStats> {
        self.cells.get(key)
    }

    /// Every non-empty histogram, keyed by cell and metric (what `store` writes).
    pub fn histograms(&self) -> impl Iterator<Item = (&CellKey, Metric, &Histogram<u64>)> {
        self.cells.iter().flat_map(|(k, c)| {
            c.histograms
                .iter()
                .filter(|(_, h)| !h.is_empty())
                .map(move |(m, h)| (k, *m, h))
        })
    }

    /// A snapshot over every cell.
    pub fn live(&self) -> LiveStats {
        live_of(self.cells.values())
    }

    /// A snapshot of one cell (all zeros when the cell has no records yet).
    pub fn live_cell(&self, key: &CellKey) -> LiveStats {
        live_of(self.cells.get(key))
    }
}

fn live_of<'a>(cells: impl IntoIterator<Item = &'a CellStats>) -> LiveStats {
    let mut live = LiveStats::default();
    let mut ttft = new_histogram();
    let (mut tokens, mut first, mut last) = (0u64, None::<u64>, None::<u64>);
    for c in cells {
        live.requests_done += c.requests + c.warmup_requests;
        live.failures += c.failed();
        if let Some(h) = c.histogram(Metric::Ttft) {
            let _ = ttft.add(h);
        }
        tokens += c.output_tokens;
        if let Some(s) = c.first_intended_ns {
            first = Some(first.map_or(s, |f| f.min(s)));
        }
        if let Some(e) = c.last_end_ns {
            last = Some(last.map_or(e, |l| l.max(e)));
        }
    }
    if !ttft.is_empty() {
        live.ttft_p50_ms = Some(Metric::Ttft.to_natural(ttft.value_at_quantile(0.5) as f64));
    }
    if let (Some(f), Some(l)) = (first, last) {
        if l > f && tokens > 0 {
            live.output_tok_s = Some(tokens as f64 * 1e9 / (l - f) as f64);
        }
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Chunk, TokenSource};

    pub(crate) fn ok_request(
        target: &str,
        transport: &str,
        ttft_ms: u64,
        tokens: u32,
    ) -> RequestRecord {
        let ms = 1_000_000;
        let first = ttft_ms * ms;
        let last = first + u64::from(tokens.saturating_sub(1)) * 10 * ms;
        RequestRecord {
            target: target.into(),
            transport: transport.parse().unwrap(),
            intended_ns: 0,
            dispatch_ns: 0,
            first_event_ns: Some(first / 2),
            first_token_ns: Some(first),
            last_token_ns: Some(last),
            end_ns: Some(last),
            output_tokens: tokens,
            token_source: TokenSource::ServerUsage,
            chunks: (0..tokens)
                .map(|i| Chunk {
                    at_ns: first + u64::from(i) * 10 * ms,
                    tokens: 1,
                    text_bytes: 4,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn warmup_and_failures_are_counted_but_not_in_histograms() {
        let mut rec = Recorder::new();
        rec.add_request(&ok_request("sim", "http", 100, 11));
        rec.add_request(&RequestRecord {
            warmup: true,
            ..ok_request("sim", "http", 5, 11)
        });
        rec.add_request(&RequestRecord {
            outcome: OutcomeKind::HttpStatus,
            http_status: Some(500),
            ..ok_request("sim", "http", 1, 11)
        });
        rec.add_request(&RequestRecord {
            outcome: OutcomeKind::Cancelled,
            ..ok_request("sim", "http", 1, 2)
        });
        let c = rec.cell(&CellKey::new("sim", "http")).unwrap();
        assert_eq!(c.requests, 3);
        assert_eq!(c.warmup_requests, 1);
        assert_eq!(c.ok(), 1);
        assert_eq!(c.failed(), 1);
        assert_eq!(c.cancelled(), 1);
        let ttft = c.histogram(Metric::Ttft).unwrap();
        assert_eq!(ttft.len(), 1);
        assert!(ttft.equivalent(100_000_000, ttft.max()));
        assert_eq!(c.histogram(Metric::Itl).unwrap().len(), 10);
        assert_eq!(c.token_sources.get("server-usage"), Some(&1));
        assert_eq!(c.overhead_sources.get("first-event-estimate"), Some(&1));
        let live = rec.live();
        assert_eq!(live.requests_done, 4);
        assert_eq!(live.failures, 1);
        assert!((live.ttft_p50_ms.unwrap() - 100.0).abs() < 0.1);
        // 11 tokens over 0 .. 200 ms
        assert!((live.output_tok_s.unwrap() - 55.0).abs() < 1e-9);
    }

    /// The recorder folds each request without building `request_statistics`' list: its
    /// histograms must still hold exactly that list's samples, metric by metric and cell by
    /// cell (the population `compare` resamples), and a metric without samples no histogram.
    #[test]
    fn histograms_hold_exactly_the_request_statistics() {
        let records = [
            ok_request("a", "http", 100, 11),
            ok_request("a", "http", 40, 1),
            ok_request("b", "ws", 7, 30),
            RequestRecord {
                kind: RequestKind::Warmup,
                ws_upgrade_ns: Some(2_000_000),
                ..ok_request("b", "ws", 3, 1)
            },
            RequestRecord {
                outcome: OutcomeKind::HttpStatus,
                ..ok_request("a", "http", 1, 5)
            },
        ];
        let mut rec = Recorder::new();
        let mut want: BTreeMap<(String, Metric), Vec<u64>> = BTreeMap::new();
        for r in &records {
            rec.add_request(r);
            for (m, v) in request_statistics(r) {
                want.entry((r.target.clone(), m)).or_default().push(v);
            }
        }
        for (target, transport) in [("a", "http"), ("b", "ws")] {
            let c = rec.cell(&CellKey::new(target, transport)).unwrap();
            for m in Metric::ALL {
                let samples = want.get(&(target.to_string(), m));
                match (c.histogram(m), samples) {
                    (None, None) => {}
                    (Some(h), Some(v)) => {
                        assert_eq!(h.len(), v.len() as u64, "{target} {m:?}");
                        let mut one = new_histogram();
                        v.iter().for_each(|&x| one.record(x).unwrap());
                        assert_eq!(h, &one, "{target} {m:?}");
                    }
                    (h, v) => panic!("{target} {m:?}: histogram {h:?}, samples {v:?}"),
                }
            }
            assert!(c.histograms.values().all(|h| !h.is_empty()), "{target}");
        }
        assert!(want.contains_key(&("a".to_string(), Metric::Itl)));
        assert_eq!(want[&("b".to_string(), Metric::ConnectionSetup)].len(), 1);
    }

    #[test]
    fn ws_warmup_requests_only_contribute_connection_setup() {
        let mut rec = Recorder::new();
        let warm = RequestRecord {
            target: "sim".into(),
            transport: crate::vocab::TransportKind::Ws,
            kind: RequestKind::Warmup,
            tcp_connect_ns: Some(40_000_000),
            ws_upgrade_ns: Some(40_000_000),
            first_event_ns: Some(41_000_000),
            end_ns: Some(42_000_000),
            ..Default::default()
        };
        rec.add_request(&warm);
        rec.add_request(&RequestRecord {
            outcome: OutcomeKind::UpgradeError,
            ..warm.clone()
        });
        let c = rec.cell(&CellKey::new("sim", "ws")).unwrap();
        assert_eq!((c.warmup_requests, c.requests, c.failed()), (1, 1, 1));
        assert_eq!(c.histogram(Metric::ConnectionSetup).unwrap().len(), 1);
        assert!(c.histogram(Metric::E2e).is_none());
        assert!(c.histogram(Metric::FirstEvent).is_none());
    }

    #[test]
    fn sessions_with_failures_stay_out_of_session_wall() {
        let mut rec = Recorder::new();
        let s = SessionRecord {
            target: "t".into(),
            transport: crate::vocab::TransportKind::Ws,
            start_ns: 10,
            end_ns: 2_000_010,
            requests: 3,
            ..Default::default()
        };
        rec.add_session(&s);
        rec.add_session(&SessionRecord {
            failed: 1,
            ..s.clone()
        });
        rec.add_session(&SessionRecord { warmup: true, ..s });
        let c = rec.cell(&CellKey::new("t", "ws")).unwrap();
        assert_eq!(
            (c.sessions, c.failed_sessions, c.warmup_sessions),
            (2, 1, 1)
        );
        let h = c.histogram(Metric::SessionWall).unwrap();
        assert_eq!(h.len(), 1);
        assert!(h.equivalent(h.max(), 2_000_000));
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let reqs: Vec<RequestRecord> = (1..=20u32)
            .map(|i| {
                let mut r = ok_request(
                    "a",
                    if i % 2 == 0 { "http" } else { "ws" },
                    u64::from(i) * 7,
                    5,
                );
                r.input_tokens = Some(100 + i);
                r.cached_input_tokens = Some(i * 3);
                r.connection_reused = i % 3 != 0;
                r
            })
            .collect();
        let mut whole = Recorder::new();
        reqs.iter().for_each(|r| whole.add_request(r));
        let (mut left, mut right) = (Recorder::new(), Recorder::new());
        reqs[..7].iter().for_each(|r| left.add_request(r));
        reqs[7..].iter().for_each(|r| right.add_request(r));
        left.merge(&right);
        // Every field, so a counter added later that `merge` forgets fails here (the
        // prefix-cache counters were once left out, and merged shards lost `cached in`).
        for (k, c) in whole.cells() {
            assert_eq!(c, left.cell(k).unwrap(), "cell {k:?}");
            assert!(c.cached_input_tokens > 0 && c.reused_connection_requests > 0);
        }
    }

    #[test]
    fn a_run_recorder_keeps_nothing_per_request_or_session() {
        // 20,000 requests and sessions over the same 10 s of run clock: what the recorder
        // retains depends on the run's span, not on how many finished.
        let mut rec = Recorder::new();
        let ms = 1_000_000u64;
        for i in 0..20_000u64 {
            let mut r = ok_request("t", "http", 5 + i % 7, 8);
            let shift = (i % 9_000) * ms;
            r.intended_ns += shift;
            r.session = i as u32;
            for c in &mut r.chunks {
                c.at_ns += shift;
            }
            rec.add_request(&r);
            rec.add_session(&SessionRecord {
                target: "t".into(),
                transport: crate::vocab::TransportKind::Http,
                session: i as u32,
                start_ns: shift,
                end_ns: shift + 100 * ms,
                requests: 1,
                ..Default::default()
            });
        }
        assert!(rec.session_spans.is_empty(), "{}", rec.session_spans.len());
        assert!(
            rec.stall_detector().buckets() <= 10_000 / 50 + 1,
            "{}",
            rec.stall_detector().buckets()
        );
        assert_eq!(
            rec.cell(&CellKey::new("t", "http")).unwrap().requests,
            20_000
        );
        // `merge`'s counts-only recorder still has every span, for its peak.
        let mut merged = Recorder::counts_only(crate::plan::Slo::default());
        merged.add_session(&SessionRecord {
            start_ns: 0,
            end_ns: 10,
            ..Default::default()
        });
        merged.add_session(&SessionRecord {
            start_ns: 5,
            end_ns: 20,
            ..Default::default()
        });
        assert_eq!(merged.peak_sessions(), 2);
    }
}
