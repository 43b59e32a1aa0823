//! The per-request samples the gate resamples, per target × transport, built from records
//! one at a time (the caller streams them from `requests.csv`/`sessions.csv`).
//!
//! Owns: which requests feed which gate metric. Only measured (non-warm-up) requests that
//! completed `ok` feed latencies and throughput; every measured request except cancelled
//! ones counts towards the error rate; sessions feed `session_wall` only when measured and
//! free of failures. These are the recorder's rules, and the values come from the
//! recorder's metric catalogue, so the gate and `summary.json` never disagree on a
//! definition.
//! Does not own: I/O (see `commands::compare`).

use std::collections::BTreeMap;

use super::gate::GateMetric;
use super::stats::Sample;
use crate::recorder::{request_statistics, session_statistics, CellKey, Metric};
use crate::vocab::{OutcomeKind, RequestKind, RequestRecord, SessionRecord};

/// Samples of one cell, in natural units (ms, tok/s).
#[derive(Debug, Clone, Default)]
pub struct CellSamples {
    per_request: BTreeMap<GateMetric, Vec<Vec<f64>>>,
    session_wall: Vec<f64>,
    /// Measured requests that count towards the error rate (cancelled excluded).
    pub counted: u64,
    /// Of those, the ones that failed.
    pub failed: u64,
}

impl CellSamples {
    /// Adds one request. The inclusion rule is the recorder's
    /// ([`request_statistics`]): warm-up sessions never count; a successful `generate:false`
    /// warm-up request only pays connection setup (not gated); cancelled requests are not
    /// the server's fault and stay out of the error rate.
    pub fn add_request(&mut self, r: &RequestRecord) {
        if r.warmup || r.outcome == OutcomeKind::Cancelled {
            return;
        }
        if r.kind == RequestKind::Warmup && r.is_ok() {
            return;
        }
        self.counted += 1;
        if !r.is_ok() {
            self.failed += 1;
            return;
        }
        let mut values: BTreeMap<GateMetric, Vec<f64>> = BTreeMap::new();
        for (m, v) in request_statistics(r) {
            if let Some(gm) = gate_metric(m) {
                values.entry(gm).or_default().push(m.to_natural(v as f64));
            }
        }
        for (gm, v) in values {
            self.per_request.entry(gm).or_default().push(v);
        }
    }

    /// Adds one session.
    pub fn add_session(&mut self, s: &SessionRecord) {
        if let Some(v) = session_statistics(s) {
            self.session_wall
                .push(Metric::SessionWall.to_natural(v as f64));
        }
    }

    /// The resampling sample of a metric (`error_rate` has none: it is a proportion).
    pub fn sample(&self, metric: GateMetric) -> Sample {
        match metric {
            GateMetric::SessionWall => Sample::independent(self.session_wall.iter().copied()),
            GateMetric::ErrorRate => Sample::default(),
            _ => Sample::new(self.per_request.get(&metric).cloned().unwrap_or_default()),
        }
    }
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
        _ => None,
    }
}

/// Samples of a whole run, per cell.
#[derive(Debug, Clone, Default)]
pub struct RunSamples {
    /// By cell.
    pub cells: BTreeMap<CellKey, CellSamples>,
}

impl RunSamples {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes sure a cell exists even if it recorded nothing (so "no samples" is reported
    /// instead of the cell vanishing).
    pub fn ensure_cell(&mut self, key: CellKey) {
        self.cells.entry(key).or_default();
    }

    /// Adds one request to its cell.
    pub fn add_request(&mut self, r: &RequestRecord) {
        self.cells
            .entry(CellKey::new(&r.target, r.transport.as_str()))
            .or_default()
            .add_request(r);
    }

    /// Adds one session to its cell.
    pub fn add_session(&mut self, s: &SessionRecord) {
        self.cells
            .entry(CellKey::new(&s.target, s.transport.as_str()))
            .or_default()
            .add_session(s);
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
}
