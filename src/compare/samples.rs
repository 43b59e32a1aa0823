//! The per-request samples the gate resamples, per target × transport, built from records
//! one at a time (the caller streams them from `requests.csv`/`sessions.csv`).
//!
//! Owns: which requests feed which gate metric. Only measured (non-warm-up) requests that
//! completed `ok` feed latencies and throughput; every measured request except cancelled
//! ones counts towards the error rate; sessions feed `session_wall` only when measured and
//! free of failures; requests and sessions overlapping a stall window of the harness
//! (`stalls.json`) are left out of latencies (not of the error rate). Samples are keyed by
//! run and by (session, turn, step), so repeats can be resampled run by run and two sides
//! that replayed the same conversation can be paired request by request. These are the
//! recorder's rules, and the values come from the
//! recorder's metric catalogue, so the gate and `summary.json` never disagree on a
//! definition.
//! Does not own: I/O (see `compare::runs`).

use std::collections::BTreeMap;

use super::gate::GateMetric;
use super::stats::Sample;
use crate::recorder::{request_statistics, session_statistics, CellKey, Metric};
use crate::vocab::{OutcomeKind, RequestKind, RequestRecord, SessionRecord};

/// Which request a sample came from: the run (repeat) of its side, and its place in the
/// conversation. Two sides that replayed the same conversation hold the same keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// Run index within the side (0 for a single run).
    pub run: u32,
    /// Session index.
    pub session: u32,
    /// Turn within the session.
    pub turn: u32,
    /// Step within the turn (tool-call round trips).
    pub step: u32,
}

/// Samples of one cell, in natural units (ms, tok/s), over every run of a side.
#[derive(Debug, Clone, Default)]
pub struct CellSamples {
    per_request: BTreeMap<GateMetric, Vec<(RequestKey, Vec<f64>)>>,
    session_wall: Vec<(RequestKey, f64)>,
    /// Runs this side holds (the highest run index seen + 1).
    pub runs: u32,
    /// Measured requests that count towards the error rate (cancelled excluded).
    pub counted: u64,
    /// Of those, the ones that failed.
    pub failed: u64,
    /// Successful measured requests left out of latencies because they overlapped a stall
    /// window of the harness (they still count towards the error rate).
    pub stalled: u64,
}

impl CellSamples {
    /// Adds one request of run 0 (see [`CellSamples::add_request_in`]).
    pub fn add_request(&mut self, r: &RequestRecord) {
        self.add_request_in(0, r, false);
    }

    /// Adds one request of run `run`. The inclusion rule is the recorder's
    /// ([`request_statistics`]): warm-up sessions never count; a successful `generate:false`
    /// warm-up request only pays connection setup; cancelled requests are not the
    /// server's fault and stay out of the error rate. `stalled`: the request overlapped a
    /// stall window, so its latencies say how late the harness was, not the target; it
    /// still counts for the error rate.
    pub fn add_request_in(&mut self, run: u32, r: &RequestRecord, stalled: bool) {
        self.runs = self.runs.max(run + 1);
        if r.warmup || r.outcome == OutcomeKind::Cancelled {
            return;
        }
        let key = RequestKey {
            run,
            session: r.session,
            turn: r.turn,
            step: r.step,
        };
        // A successful `generate:false` warm-up only feeds connection setup; a failed one
        // is a failure like any other.
        let warmup_kind = r.kind == RequestKind::Warmup && r.is_ok();
        if !warmup_kind {
            self.counted += 1;
            if !r.is_ok() {
                self.failed += 1;
                return;
            }
        }
        if stalled {
            self.stalled += u64::from(!warmup_kind);
            return;
        }
        let mut values: BTreeMap<GateMetric, Vec<f64>> = BTreeMap::new();
        for (m, v) in request_statistics(r) {
            if let Some(gm) = gate_metric(m) {
                values.entry(gm).or_default().push(m.to_natural(v as f64));
            }
        }
        for (gm, v) in values {
            self.per_request.entry(gm).or_default().push((key, v));
        }
    }

    /// Adds one session of run 0.
    pub fn add_session(&mut self, s: &SessionRecord) {
        self.add_session_in(0, s, false);
    }

    /// Adds one session of run `run` (left out when it overlapped a stall window).
    pub fn add_session_in(&mut self, run: u32, s: &SessionRecord, stalled: bool) {
        self.runs = self.runs.max(run + 1);
        if stalled {
            return;
        }
        if let Some(v) = session_statistics(s) {
            let key = RequestKey {
                run,
                session: s.session,
                turn: 0,
                step: 0,
            };
            self.session_wall
                .push((key, Metric::SessionWall.to_natural(v as f64)));
        }
    }

    fn keyed(&self, metric: GateMetric) -> Vec<(RequestKey, Vec<f64>)> {
        match metric {
            GateMetric::SessionWall => self
                .session_wall
                .iter()
                .map(|(k, v)| (*k, vec![*v]))
                .collect(),
            GateMetric::ErrorRate => Vec::new(),
            _ => self.per_request.get(&metric).cloned().unwrap_or_default(),
        }
    }

    /// The resampling sample of a metric, grouped by run (`error_rate` has none: it is a
    /// proportion).
    pub fn sample(&self, metric: GateMetric) -> Sample {
        by_run(self.keyed(metric), self.runs)
    }

    /// Both sides' samples of a metric restricted to the requests present in both (same
    /// run index, session, turn and step), in the same order, so that cluster i of one is
    /// the same request as cluster i of the other. Returns the samples and how many
    /// requests matched.
    pub fn paired(&self, other: &CellSamples, metric: GateMetric) -> (Sample, Sample, usize) {
        let mine: BTreeMap<RequestKey, Vec<f64>> = self
            .keyed(metric)
            .into_iter()
            .filter(|(_, v)| !v.is_empty() && v.iter().all(|x| x.is_finite()))
            .collect();
        let theirs: BTreeMap<RequestKey, Vec<f64>> = other
            .keyed(metric)
            .into_iter()
            .filter(|(_, v)| !v.is_empty() && v.iter().all(|x| x.is_finite()))
            .collect();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (k, v) in &mine {
            if let Some(w) = theirs.get(k) {
                a.push((*k, v.clone()));
                b.push((*k, w.clone()));
            }
        }
        let n = a.len();
        let runs = self.runs.max(other.runs);
        (by_run(a, runs), by_run(b, runs), n)
    }
}

fn by_run(keyed: Vec<(RequestKey, Vec<f64>)>, runs: u32) -> Sample {
    let mut grouped: Vec<Vec<Vec<f64>>> = vec![Vec::new(); runs.max(1) as usize];
    for (k, v) in keyed {
        if let Some(g) = grouped.get_mut(k.run as usize) {
            g.push(v);
        }
    }
    Sample::with_runs(grouped)
}

/// The per-request gate metric a recorder metric feeds, if any.
fn gate_metric(m: Metric) -> Option<GateMetric> {
    match m {
        Metric::Ttft => Some(GateMetric::Ttft),
        Metric::Tpot => Some(GateMetric::Tpot),
        Metric::Itl => Some(GateMetric::Itl),
        Metric::E2e => Some(GateMetric::E2e),
        Metric::Overhead => Some(GateMetric::Overhead),
        Metric::OutputTokS => Some(GateMetric::OutputTokS),
        Metric::DecodeTokS => Some(GateMetric::DecodeTokS),
        Metric::ConnectionSetup => Some(GateMetric::ConnectionSetup),
        _ => None,
    }
}

/// A time window (run clock, ns) in which the harness stalled; requests and sessions
/// overlapping one are left out of the latency samples.
pub type Window = (u64, u64);

/// Samples of one side (one run, or the repeats of one), per cell.
#[derive(Debug, Clone, Default)]
pub struct RunSamples {
    /// By cell.
    pub cells: BTreeMap<CellKey, CellSamples>,
    run: u32,
    stalls: Vec<Window>,
    /// Runs begun so far.
    pub runs: u32,
}

impl RunSamples {
    /// An empty set; records added go to run 0 until [`RunSamples::begin_run`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the next run of this side: its records go to a new run index, and those
    /// overlapping `stalls` are left out of latencies.
    pub fn begin_run(&mut self, stalls: Vec<Window>) {
        if self.runs > 0 {
            self.run += 1;
        }
        self.runs = self.run + 1;
        self.stalls = stalls;
        for c in self.cells.values_mut() {
            c.runs = c.runs.max(self.runs);
        }
    }

    /// Makes sure a cell exists even if it recorded nothing (so "no samples" is reported
    /// instead of the cell vanishing).
    pub fn ensure_cell(&mut self, key: CellKey) {
        let runs = self.runs.max(1);
        let c = self.cells.entry(key).or_default();
        c.runs = c.runs.max(runs);
    }

    fn overlaps(&self, from: u64, to: u64) -> bool {
        self.stalls.iter().any(|&(a, b)| from < b && to > a)
    }

    /// Adds one request to its cell.
    pub fn add_request(&mut self, r: &RequestRecord) {
        let end = r.end_ns.or(r.last_token_ns).unwrap_or(r.dispatch_ns);
        let stalled = self.overlaps(r.intended_ns.min(r.dispatch_ns), end.max(r.dispatch_ns));
        self.runs = self.runs.max(1);
        self.cells
            .entry(CellKey::new(&r.target, r.transport.as_str()))
            .or_default()
            .add_request_in(self.run, r, stalled);
    }

    /// Adds one session to its cell.
    pub fn add_session(&mut self, s: &SessionRecord) {
        let stalled = self.overlaps(s.start_ns, s.end_ns.max(s.start_ns));
        self.runs = self.runs.max(1);
        self.cells
            .entry(CellKey::new(&s.target, s.transport.as_str()))
            .or_default()
            .add_session_in(self.run, s, stalled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Chunk;

    fn req(outcome: OutcomeKind, warmup: bool) -> RequestRecord {
        let ms = 1_000_000;
        RequestRecord {
            target: "t".into(),
            transport: crate::vocab::TransportKind::Http,
            warmup,
            intended_ns: 0,
            dispatch_ns: 0,
            first_event_ns: Some(5 * ms),
            first_token_ns: Some(10 * ms),
            last_token_ns: Some(30 * ms),
            output_tokens: 3,
            chunks: [10, 20, 30]
                .map(|t| Chunk {
                    at_ns: t * ms,
                    tokens: 1,
                    text_bytes: 1,
                })
                .to_vec(),
            outcome,
            ..Default::default()
        }
    }

    #[test]
    fn only_measured_successes_feed_latencies() {
        let mut s = RunSamples::new();
        s.add_request(&req(OutcomeKind::Ok, false));
        s.add_request(&req(OutcomeKind::Ok, true));
        s.add_request(&req(OutcomeKind::Timeout, false));
        s.add_request(&req(OutcomeKind::Cancelled, false));
        let c = &s.cells[&CellKey::new("t", "http")];
        assert_eq!((c.counted, c.failed), (2, 1));
        let ttft = c.sample(GateMetric::Ttft);
        assert_eq!(ttft.len(), 1);
        assert_eq!(ttft.point(super::super::stats::Stat::Mean), Some(10.0));
        let itl = c.sample(GateMetric::Itl);
        assert_eq!((itl.len(), itl.clusters()), (2, 1));
        assert_eq!(
            c.sample(GateMetric::OutputTokS)
                .point(super::super::stats::Stat::Mean),
            Some(100.0)
        );
        s.add_session(&SessionRecord {
            target: "t".into(),
            transport: crate::vocab::TransportKind::Http,
            start_ns: 0,
            end_ns: 2_000_000_000,
            ..Default::default()
        });
        s.add_session(&SessionRecord {
            target: "t".into(),
            transport: crate::vocab::TransportKind::Http,
            failed: 1,
            ..Default::default()
        });
        let c = &s.cells[&CellKey::new("t", "http")];
        assert_eq!(c.sample(GateMetric::SessionWall).len(), 1);
    }

    #[test]
    fn runs_are_kept_apart_stalled_requests_left_out_and_pairs_matched() {
        let ms = 1_000_000;
        let at = |session: u32, start: u64, ttft: u64| RequestRecord {
            target: "t".into(),
            transport: crate::vocab::TransportKind::Http,
            session,
            intended_ns: start * ms,
            dispatch_ns: start * ms,
            first_token_ns: Some((start + ttft) * ms),
            end_ns: Some((start + ttft + 5) * ms),
            ..Default::default()
        };
        let mut s = RunSamples::new();
        s.begin_run(Vec::new());
        for i in 0..4 {
            s.add_request(&at(i, 100 * u64::from(i), 10));
        }
        // Run 2: a stall from 110 to 260 ms catches the requests of sessions 1 and 2.
        s.begin_run(vec![(110 * ms, 260 * ms)]);
        for i in 0..4 {
            s.add_request(&at(i, 100 * u64::from(i), 20));
        }
        let c = &s.cells[&CellKey::new("t", "http")];
        assert_eq!((c.runs, c.counted, c.failed, c.stalled), (2, 8, 0, 2));
        let ttft = c.sample(GateMetric::Ttft);
        assert_eq!((ttft.runs(), ttft.shape()), (2, vec![4, 2]));
        // Pairing with itself matches every request that survived, run by run.
        let (a, b, n) = c.paired(c, GateMetric::Ttft);
        assert_eq!((n, a.shape(), b.shape()), (6, vec![4, 2], vec![4, 2]));
    }
}
