//! Could the harness have been the bottleneck? Every run's `harness` section: dispatch lag,
//! requested vs achieved request rate, timer lateness, the process's CPU share, the chunk
//! rate against this machine's ingest ceiling, and a verdict with its reasons.
//!
//! Owns: the section's shape (`summary.json` → `harness`), the thresholds of the verdict
//! ([`Thresholds::DEFAULT`], the one place they are defined; `docs/measurements.md` says
//! why each is where it is), the folding of measured records into [`DispatchStats`], and
//! the footer lines the table and the report show. Pure: the timer and CPU figures come in
//! as a [`ProbeReport`] (taken by `clock::selfwatch`), the ceiling as a number.
//! Does not own: taking those figures (`clock::selfwatch`, `runner`), the calibration file
//! (`store`), or `spark-bench calibrate` (`runner::calibrate`).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::clock::selfwatch::ProbeReport;
use crate::vocab::RequestRecord;

/// The limits past which a run is judged `harness-bound`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Driver lag p99 (dispatch lag less any wait for a concurrency slot) above this, ms.
    pub driver_lag_p99_ms: f64,
    /// Achieved request rate below this share of the requested one (open loop).
    pub min_achieved_share: f64,
    /// Timer lateness p99 above this, ms: a note (the machine is busy), not by itself a
    /// reason; the dispatch figures say whether it cost the schedule.
    pub timer_late_p99_ms: f64,
    /// The process's mean CPU use above this share of the machine's cores.
    pub max_cpu_share: f64,
    /// The run's chunk rate above this share of the calibrated ingest ceiling.
    pub max_ingest_share: f64,
    /// The rate check needs at least this many measured requests (fewer: too noisy).
    pub min_requests_for_rate: u64,
    /// The driver-lag check also needs at least this many requests past its limit: on a
    /// small run p99 is the maximum, and one late request is not a harness that fell behind.
    #[serde(default = "two")]
    pub min_late_requests: u64,
}

fn two() -> u64 {
    2
}

impl Thresholds {
    /// The thresholds every run is judged by (see `docs/measurements.md`, "Can the harness
    /// keep up?").
    pub const DEFAULT: Thresholds = Thresholds {
        driver_lag_p99_ms: 5.0,
        min_achieved_share: 0.98,
        timer_late_p99_ms: 2.0,
        max_cpu_share: 0.90,
        max_ingest_share: 0.50,
        min_requests_for_rate: 20,
        min_late_requests: 2,
    };
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds::DEFAULT
    }
}

/// The measured requests' send times, folded as they arrive.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchStats {
    /// Dispatch lag (dispatch − intended), ns.
    lag: Histogram<u64>,
    /// Dispatch lag less the wait for a concurrency slot, ns.
    driver_lag: Histogram<u64>,
    requests: u64,
    slot_waits: u64,
    intended: (u64, u64),
    dispatched: (u64, u64),
    /// Chunks received by measured requests, and the latest end among them.
    chunks: u64,
    last_end: u64,
}

impl Default for DispatchStats {
    fn default() -> Self {
        DispatchStats {
            lag: super::new_histogram(),
            driver_lag: super::new_histogram(),
            requests: 0,
            slot_waits: 0,
            intended: (u64::MAX, 0),
            dispatched: (u64::MAX, 0),
            chunks: 0,
            last_end: 0,
        }
    }
}

impl DispatchStats {
    /// Folds one request (warm-ups are ignored).
    pub fn add(&mut self, r: &RequestRecord) {
        self.add_with(r, r.chunks.len() as u64 + r.chunks_dropped);
    }

    /// [`DispatchStats::add`] for a request whose chunks are counted, not listed.
    pub fn add_with(&mut self, r: &RequestRecord, chunks: u64) {
        if r.warmup {
            return;
        }
        let lag = r.dispatch_lag_ns();
        let wait = r.slot_wait_ns.unwrap_or(0).min(lag);
        // The histograms resize to fit (recording only fails past u64 range).
        let _ = self.lag.record(lag);
        let _ = self.driver_lag.record(lag - wait);
        self.requests += 1;
        self.slot_waits += u64::from(wait > 0);
        self.intended = (
            self.intended.0.min(r.intended_ns),
            self.intended.1.max(r.intended_ns),
        );
        self.dispatched = (
            self.dispatched.0.min(r.dispatch_ns),
            self.dispatched.1.max(r.dispatch_ns),
        );
        self.chunks += chunks;
        self.last_end = self.last_end.max(r.end_ns.unwrap_or(r.dispatch_ns));
    }

    /// Measured requests folded so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }
}

crate::vocab::names! {
    /// Whether the harness kept up.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum Verdict ("harness verdict") {
        /// Every figure was inside its threshold: the latencies are the target's.
        #[default]
        Ok = "ok",
        /// At least one was not: the harness may have shaped the numbers (see `reasons`).
        HarnessBound = "harness-bound",
    }
}

crate::vocab::names! {
    /// Which threshold a `harness-bound` run crossed: one per entry of `reasons`, in the
    /// same order, so readers (the gate) need not parse the sentences.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Bound ("harness bound") {
        /// Driver lag p99 over [`Thresholds::driver_lag_p99_ms`].
        DispatchLag = "dispatch-lag",
        /// Achieved request rate under [`Thresholds::min_achieved_share`] of the requested.
        AchievedRate = "achieved-rate",
        /// The process's CPU share over [`Thresholds::max_cpu_share`].
        CpuShare = "cpu-share",
        /// The chunk rate over [`Thresholds::max_ingest_share`] of the ingest ceiling.
        IngestCeiling = "ingest-ceiling",
    }
}

/// p50 / p99 / max of a lag, ms.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Lag {
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
}

impl Lag {
    fn of(h: &Histogram<u64>) -> Lag {
        if h.is_empty() {
            return Lag::default();
        }
        let ms = |v: u64| v as f64 / 1e6;
        Lag {
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }
}

/// This machine's calibrated ingest ceiling, as the run found it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Ceiling {
    /// Content chunks per second the harness ingested on this machine.
    pub chunks_s: f64,
    /// True when `calibrate` found it (the harness fell behind there): only then does the
    /// verdict judge against it. False: the highest rate measured, which the harness kept up
    /// with (a lower bound of the ceiling): at most a note.
    #[serde(default)]
    pub found: bool,
    /// When `spark-bench calibrate` measured it (RFC 3339 UTC).
    pub measured_at: String,
}

/// `summary.json` → `harness`: could the harness have been the bottleneck?
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Harness {
    /// `ok` or `harness-bound`.
    pub verdict: Verdict,
    /// Why `harness-bound`: one sentence per figure over its threshold.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// The threshold behind each reason, in the same order (empty in runs written before
    /// it was recorded: readers then treat the run as bound for every reason).
    #[serde(default)]
    pub bound_by: Vec<Bound>,
    /// Things worth knowing that are not the harness's fault (e.g. waits for a slot).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Measured requests the figures cover.
    pub requests: u64,
    /// Dispatch lag (actual send − intended send) of every measured request.
    pub dispatch_lag: Lag,
    /// Dispatch lag less any wait for a concurrency slot (that wait is the load exceeding
    /// `concurrency`, not the harness being slow): what the verdict judges.
    pub driver_lag: Lag,
    /// Measured requests that waited for a concurrency slot after their intended start.
    pub slot_waits: u64,
    /// Requested request rate: measured requests over the span of their intended starts,
    /// req/s (`None` under 2 requests or a zero span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_rate: Option<f64>,
    /// Achieved request rate: the same count over the span of their actual dispatches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rate: Option<f64>,
    /// How late the runtime woke a sleeper (a 10 ms sleep loop beside the driver).
    pub timer_late_us: TimerLate,
    /// The process's CPU use (harness and any embedded simulator), in cores.
    pub cpu: Cpu,
    /// Content chunks the measured requests received per second of the measured span.
    pub chunk_rate: f64,
    /// Socket reads that returned bytes, over the whole run (warm-ups and probes included);
    /// `None` where not counted (a merged run, or one written before it was). Content
    /// chunks over reads is how many chunks a read carried: near 1 when the harness wakes
    /// for every chunk, more when chunks queue in the socket between its reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    /// The calibrated ingest ceiling, or `None`: not calibrated (`spark-bench calibrate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_ceiling: Option<Ceiling>,
    /// The limits the verdict used.
    pub thresholds: Thresholds,
}

/// Timer lateness, µs.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct TimerLate {
    /// Samples.
    pub samples: u64,
    /// Median, µs.
    pub p50: f64,
    /// 99th percentile, µs.
    pub p99: f64,
    /// Largest, µs.
    pub max: f64,
}

/// CPU use of the process.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Cpu {
    /// Logical CPUs available.
    pub cores: u32,
    /// CPU time over wall time for the whole run, in cores (`None`: not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_cores: Option<f64>,
    /// The busiest one-second window, in cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_cores: Option<f64>,
    /// `mean_cores / cores`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
}

/// Rate of `n` events spread over `(first, last)` ns: `(n − 1) / span`.
/// Content chunks per second over the span from the first dispatch to the last end.
fn chunk_rate(stats: &DispatchStats) -> f64 {
    let span = stats.last_end.saturating_sub(stats.dispatched.0);
    if stats.requests > 0 && span > 0 {
        stats.chunks as f64 * 1e9 / span as f64
    } else {
        0.0
    }
}

fn rate(n: u64, (first, last): (u64, u64)) -> Option<f64> {
    (n >= 2 && last > first).then(|| (n - 1) as f64 * 1e9 / (last - first) as f64)
}

impl Harness {
    /// Judges a run from its measured requests, the probe's figures and the ceiling.
    pub fn judge(
        stats: &DispatchStats,
        probe: Option<&ProbeReport>,
        ceiling: Option<Ceiling>,
        t: Thresholds,
    ) -> Harness {
        let (mut reasons, mut notes) = (Vec::new(), Vec::new());
        let mut bound_by = Vec::new();
        let dispatch_lag = Lag::of(&stats.lag);
        let driver_lag = Lag::of(&stats.driver_lag);
        let limit_ns = (t.driver_lag_p99_ms * 1e6) as u64;
        let late = stats.requests - stats.driver_lag.count_between(0, limit_ns);
        if driver_lag.p99_ms > t.driver_lag_p99_ms && late >= t.min_late_requests {
            reasons.push(format!(
                "dispatch lag p99 {:.2} ms > {} ms ({late} of {} requests later than that): requests left later than planned",
                driver_lag.p99_ms, t.driver_lag_p99_ms, stats.requests
            ));
            bound_by.push(Bound::DispatchLag);
        }
        if stats.slot_waits > 0 {
            notes.push(format!(
                "{} of {} requests waited for a concurrency slot past their intended start (the load exceeded `concurrency`; their latency counts from the intended start)",
                stats.slot_waits, stats.requests
            ));
        }
        let requested_rate = rate(stats.requests, stats.intended);
        let achieved_rate = rate(stats.requests, stats.dispatched);
        if let (Some(req), Some(ach)) = (requested_rate, achieved_rate) {
            if stats.requests >= t.min_requests_for_rate && ach < req * t.min_achieved_share {
                let text = format!(
                    "achieved {ach:.1} req/s < {:.0}% of the requested {req:.1} req/s",
                    t.min_achieved_share * 100.0
                );
                if stats.slot_waits > 0 && driver_lag.p99_ms <= t.driver_lag_p99_ms {
                    // The schedule slipped because slots were full, not because the
                    // driver was late.
                    notes.push(format!("{text} because requests waited for a slot"));
                } else {
                    reasons.push(text);
                    bound_by.push(Bound::AchievedRate);
                }
            }
        }
        let timer_late_us = probe.map_or_else(TimerLate::default, |p| TimerLate {
            samples: p.timer_samples,
            p50: p.timer_late_p50_us,
            p99: p.timer_late_p99_us,
            max: p.timer_late_max_us,
        });
        // A busy machine, not by itself a late schedule: the dispatch figures above say
        // whether it cost the run its schedule, and arrival stamps come from the kernel.
        if timer_late_us.samples > 0 && timer_late_us.p99 > t.timer_late_p99_ms * 1e3 {
            notes.push(format!(
                "timer lateness p99 {:.2} ms > {} ms: the runtime woke sleepers late (a busy or starved machine; other jobs on it make every figure noisier)",
                timer_late_us.p99 / 1e3,
                t.timer_late_p99_ms
            ));
        }
        let cpu = probe.map_or_else(Cpu::default, |p| {
            let mean = p.cpu_s.filter(|_| p.wall_s > 0.0).map(|c| c / p.wall_s);
            Cpu {
                cores: p.cores,
                mean_cores: mean,
                peak_cores: p.cpu_peak_cores,
                share: mean.map(|m| m / f64::from(p.cores.max(1))),
            }
        });
        if let Some(share) = cpu.share.filter(|s| *s > t.max_cpu_share) {
            reasons.push(format!(
                "the process used {:.0}% of the {} cores (> {:.0}%): the harness may have been CPU-starved",
                share * 100.0,
                cpu.cores,
                t.max_cpu_share * 100.0
            ));
            bound_by.push(Bound::CpuShare);
        }
        let chunk_rate = chunk_rate(stats);
        if let Some(c) = ceiling.as_ref().filter(|c| c.chunks_s > 0.0) {
            if chunk_rate > c.chunks_s * t.max_ingest_share && c.found {
                reasons.push(format!(
                    "{chunk_rate:.0} chunks/s is over {:.0}% of this machine's ingest ceiling ({:.0} chunks/s)",
                    t.max_ingest_share * 100.0,
                    c.chunks_s
                ));
                bound_by.push(Bound::IngestCeiling);
            } else if chunk_rate > c.chunks_s * t.max_ingest_share {
                // A lower bound of the ceiling says nothing about a rate near or past it.
                notes.push(format!(
                    "{chunk_rate:.0} chunks/s: `calibrate` did not reach this machine's ingest ceiling; below {:.0} chunks/s, the highest measured, the harness kept up",
                    c.chunks_s
                ));
            }
        }
        Harness {
            verdict: if reasons.is_empty() {
                Verdict::Ok
            } else {
                Verdict::HarnessBound
            },
            reasons,
            bound_by,
            notes,
            requests: stats.requests,
            dispatch_lag,
            driver_lag,
            slot_waits: stats.slot_waits,
            requested_rate,
            achieved_rate,
            timer_late_us,
            cpu,
            chunk_rate,
            reads: None,
            ingest_ceiling: ceiling,
            thresholds: t,
        }
    }

    /// True when the run is harness-bound for its dispatch lag alone (recorded as such):
    /// the gate then judges that lag against the rows it can move, not the whole verdict.
    pub fn bound_by_lag_only(&self) -> bool {
        self.verdict == Verdict::HarnessBound
            && !self.bound_by.is_empty()
            && self.bound_by.len() == self.reasons.len()
            && self.bound_by.iter().all(|b| *b == Bound::DispatchLag)
    }

    /// The footer lines under the table (and in the report): the figures, then the verdict.
    pub fn lines(&self) -> Vec<String> {
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
        let rates = match (self.requested_rate, self.achieved_rate) {
            (Some(r), Some(a)) => format!(
                "requested {r:.1} req/s, achieved {a:.1} ({:+.1}%)",
                (a / r - 1.0) * 100.0
            ),
            _ => "request rate: too few requests".to_string(),
        };
        let cpu = opt(self.cpu.mean_cores, &|m| {
            format!(
                "CPU {m:.2} of {} cores (peak {})",
                self.cpu.cores,
                opt(self.cpu.peak_cores, &|p| format!("{p:.2}"))
            )
        });
        let ceiling = match &self.ingest_ceiling {
            Some(c) if c.found => format!(
                "{:.0} chunks/s vs ceiling {:.0}",
                self.chunk_rate, c.chunks_s
            ),
            Some(c) => format!(
                "{:.0} chunks/s vs ceiling not reached (kept up at {:.0})",
                self.chunk_rate, c.chunks_s
            ),
            None => format!("{:.0} chunks/s (not calibrated)", self.chunk_rate),
        };
        let mut out = vec![format!(
            "harness: dispatch lag p50/p99/max {:.2}/{:.2}/{:.2} ms; {rates}; timer late p99 {:.2} ms; {cpu}; {ceiling}",
            self.dispatch_lag.p50_ms,
            self.dispatch_lag.p99_ms,
            self.dispatch_lag.max_ms,
            self.timer_late_us.p99 / 1e3
        )];
        match self.verdict {
            Verdict::Ok => out.push("harness: ok (kept up with the load)".to_string()),
            Verdict::HarnessBound => out.push(format!(
                "harness: HARNESS-BOUND, these figures may be the harness's, not the target's: {}",
                self.reasons.join("; ")
            )),
        }
        out.extend(self.notes.iter().map(|n| format!("harness note: {n}")));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(intended_ms: u64, lag_ms: u64, slot_wait_ms: Option<u64>) -> RequestRecord {
        let ms = 1_000_000;
        RequestRecord {
            intended_ns: intended_ms * ms,
            dispatch_ns: (intended_ms + lag_ms) * ms,
            end_ns: Some((intended_ms + lag_ms + 10) * ms),
            slot_wait_ns: slot_wait_ms.map(|w| w * ms),
            ..Default::default()
        }
    }

    #[test]
    fn rates_lags_and_the_verdict() {
        // 101 requests planned 10 ms apart (100 req/s), each sent 1 ms late: ok.
        let mut s = DispatchStats::default();
        for i in 0..101 {
            s.add(&rec(i * 10, 1, None));
        }
        s.add(&RequestRecord {
            warmup: true,
            ..rec(0, 500, None)
        });
        let h = Harness::judge(&s, None, None, Thresholds::DEFAULT);
        assert_eq!(h.requests, 101);
        assert!((h.requested_rate.unwrap() - 100.0).abs() < 1e-9, "{h:?}");
        assert!((h.achieved_rate.unwrap() - 100.0).abs() < 1e-9, "{h:?}");
        assert!((h.dispatch_lag.p99_ms - 1.0).abs() < 0.01, "{h:?}");
        assert_eq!(h.verdict, Verdict::Ok, "{h:?}");
        assert!(h.lines()[0].contains("not calibrated"), "{:?}", h.lines());

        // The same plan, each request 3 ms later than the one before: the driver falls
        // behind (lag up to 300 ms, achieved 1/13 ms = 76.9 req/s): harness-bound, twice.
        let mut s = DispatchStats::default();
        for i in 0..101 {
            s.add(&rec(i * 10, i * 3, None));
        }
        let h = Harness::judge(&s, None, None, Thresholds::DEFAULT);
        assert!(
            (h.achieved_rate.unwrap() - 1000.0 / 13.0).abs() < 1e-6,
            "{h:?}"
        );
        assert_eq!(h.verdict, Verdict::HarnessBound);
        assert_eq!(h.reasons.len(), 2, "{:?}", h.reasons);
        assert_eq!(h.bound_by, [Bound::DispatchLag, Bound::AchievedRate]);
        assert!(!h.bound_by_lag_only());
        assert!(h.lines()[1].contains("HARNESS-BOUND"));

        // The same lateness, all of it a wait for a concurrency slot: not the harness.
        let mut s = DispatchStats::default();
        for i in 0..101 {
            s.add(&rec(i * 10, i * 3, Some(i * 3)));
        }
        let h = Harness::judge(&s, None, None, Thresholds::DEFAULT);
        assert_eq!(h.verdict, Verdict::Ok, "{h:?}");
        assert_eq!(h.slot_waits, 100);
        assert_eq!(h.driver_lag.max_ms, 0.0);
        assert_eq!(h.notes.len(), 2, "{:?}", h.notes);
    }

    #[test]
    fn one_late_request_of_a_small_run_is_not_a_harness_that_fell_behind() {
        // 40 requests 25 ms apart: p99 is the maximum, so one 6 ms outlier would read as
        // p99 > 5 ms. It takes two late requests to judge the harness behind.
        let mut s = DispatchStats::default();
        for i in 0..40 {
            s.add(&rec(i * 25, u64::from(i == 7) * 6, None));
        }
        let h = Harness::judge(&s, None, None, Thresholds::DEFAULT);
        assert!(h.driver_lag.p99_ms > 5.0, "{h:?}");
        assert_eq!(h.verdict, Verdict::Ok, "{h:?}");
        s.add(&rec(40 * 25, 6, None));
        let h = Harness::judge(&s, None, None, Thresholds::DEFAULT);
        assert_eq!(h.verdict, Verdict::HarnessBound, "{h:?}");
        assert!(h.reasons[0].contains("2 of 41 requests"), "{:?}", h.reasons);
        assert_eq!(h.bound_by, [Bound::DispatchLag]);
        assert!(h.bound_by_lag_only());
        // A run written before `bound_by` was recorded is not taken for lag-only.
        let old = Harness {
            bound_by: Vec::new(),
            ..h
        };
        assert!(!old.bound_by_lag_only());
    }

    #[test]
    fn probe_and_ceiling_reasons() {
        let mut s = DispatchStats::default();
        for i in 0..10 {
            s.add(&RequestRecord {
                chunks: vec![
                    crate::vocab::Chunk {
                        at_ns: 0,
                        tokens: 1,
                        text_bytes: 1
                    };
                    100
                ],
                ..rec(i * 100, 0, None)
            });
        }
        // 1,000 chunks from 0 to 910 ms: 1,099 chunks/s.
        let probe = ProbeReport {
            timer_samples: 1000,
            timer_late_p50_us: 50.0,
            timer_late_p99_us: 2500.0,
            timer_late_max_us: 9000.0,
            wall_s: 2.0,
            cpu_s: Some(3.8),
            cores: 2,
            cpu_peak_cores: Some(2.0),
        };
        let ceiling = Ceiling {
            chunks_s: 2000.0,
            found: true,
            measured_at: "2026-11-25T10:00:00Z".into(),
        };
        // The same ceiling, not reached by `calibrate`: a note, not a reason.
        let lower = Ceiling {
            found: false,
            ..ceiling.clone()
        };
        let h = Harness::judge(&s, Some(&probe), Some(lower), Thresholds::DEFAULT);
        assert_eq!(h.reasons.len(), 1, "{:?}", h.reasons);
        assert!(!h.reasons[0].contains("ceiling"), "{:?}", h.reasons);
        assert!(
            h.notes.iter().any(|n| n.contains(
                "did not reach this machine's ingest ceiling; below 2000 chunks/s, the highest measured, the harness kept up"
            )),
            "{:?}",
            h.notes
        );
        assert!(h.lines()[0].contains("ceiling not reached (kept up at 2000)"));
        let h = Harness::judge(&s, Some(&probe), Some(ceiling), Thresholds::DEFAULT);
        assert!((h.chunk_rate - 1000.0 / 0.91).abs() < 1e-6, "{h:?}");
        assert_eq!(h.cpu.share, Some(0.95));
        assert_eq!(h.reasons.len(), 2, "{:?}", h.reasons);
        assert!(h.reasons[0].contains("95% of the 2 cores"));
        assert!(h.reasons[1].contains("ingest ceiling (2000 chunks/s)"));
        assert_eq!(h.bound_by, [Bound::CpuShare, Bound::IngestCeiling]);
        assert!(
            h.notes[0].contains("timer lateness p99 2.50 ms"),
            "{:?}",
            h.notes
        );
        // JSON round trip, and an old summary without the section still loads.
        let back: Harness = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }
}
