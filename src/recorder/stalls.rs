//! Stall windows: moments when every stream in flight went quiet together. A machine that
//! stops the benchmark for a moment (a CI neighbour, a swap storm, a VM steal, SIGSTOP) does
//! not slow one request: it delays every chunk of every stream at once, then the backlog
//! arrives in a burst. One such window can move a run's p99 by hundreds of percent, so the
//! gate must not believe it; it is found here, written to `stalls.json`, shown in the report
//! and left out of the gate's latency samples (see `compare::samples`).
//!
//! Owns: the detection rule, the bounded [`StallDetector`] that applies it one request at a
//! time (its memory grows with the run's duration, not its requests), and the [`Stalls`]
//! shape (`stalls.json`). Pure: records in, windows out; no clocks, no I/O.
//!
//! # The rule
//! Take every chunk arrival of every request (warm-up included) on the run's clock and sort
//! them. A gap between two consecutive arrivals is a *stall window* when
//!
//! * it is at least `max(50 ms, 20 × the median gap between a stream's own chunks)`: twenty
//!   times the run's ordinary pace, so a slow model (long per-token gaps) does not look
//!   stalled, and never under 50 ms, below which scheduler jitter on a busy host lives; and
//! * at least two streams were decoding across it (their first chunk before it, their last
//!   after it): all of them were silent together, which one slow request cannot produce.
//!
//! A window's `late_dispatches` counts requests intended inside it that left at least half
//! the window late: that is the harness itself being stopped (cause `harness`). Without them
//! the cause is `unknown`: the server may have paused every stream (a GC pause, a
//! rescheduling); the gate still leaves the window out, but says so, and a run in which such
//! windows cover a large share of requests is not excused (see `compare`).

use serde::{Deserialize, Serialize};

use crate::vocab::RequestRecord;

/// Shortest gap ever called a stall, ns.
pub const MIN_STALL_NS: u64 = 50_000_000;
/// A stall is at least this many times the median gap between a stream's chunks.
pub const PACE_MULTIPLE: u64 = 20;

/// One window in which every decoding stream was silent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallWindow {
    /// Start (the last chunk before the silence), run clock, ns.
    pub start_ns: u64,
    /// End (the first chunk after it), run clock, ns.
    pub end_ns: u64,
    /// Length, ms.
    pub duration_ms: f64,
    /// Streams decoding across the whole window (all silent).
    pub streams: u32,
    /// Requests intended inside the window that were dispatched at least half the window
    /// late (the harness itself was stopped).
    pub late_dispatches: u32,
    /// `harness` (late dispatches corroborate it) or `unknown` (every stream paused, but
    /// the harness sent on time: possibly the server).
    pub cause: String,
}

/// The stall windows of one run (`stalls.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stalls {
    /// Version of this shape.
    pub schema_version: u32,
    /// The gap that counted as a stall in this run, ms.
    pub threshold_ms: f64,
    /// Median gap between a stream's own chunks, ms (the run's pace).
    pub median_chunk_gap_ms: f64,
    /// Windows, in time order.
    pub windows: Vec<StallWindow>,
}

impl Stalls {
    /// The windows as (start, end) ns pairs.
    pub fn spans(&self) -> Vec<(u64, u64)> {
        self.windows
            .iter()
            .map(|w| (w.start_ns, w.end_ns))
            .collect()
    }

    /// One line for tables and reports, e.g. `1 stall window (212 ms at 1.48 s, cause harness)`.
    pub fn line(&self) -> String {
        if self.windows.is_empty() {
            return format!(
                "no stall windows (no gap ≥ {:.0} ms with every decoding stream silent)",
                self.threshold_ms
            );
        }
        let shown: Vec<String> = self
            .windows
            .iter()
            .take(5)
            .map(|w| {
                format!(
                    "{:.0} ms at {:.2} s, {} streams silent, cause {}",
                    w.duration_ms,
                    w.start_ns as f64 / 1e9,
                    w.streams,
                    w.cause
                )
            })
            .collect();
        let more = self.windows.len().saturating_sub(5);
        format!(
            "{} stall window{} ({}{})",
            self.windows.len(),
            if self.windows.len() == 1 { "" } else { "s" },
            shown.join("; "),
            if more > 0 {
                format!("; {more} more")
            } else {
                String::new()
            }
        )
    }
}

/// Width of the detector's time buckets, ns. A gap between two arrivals in the same bucket
/// is below `MIN_STALL_NS`, so below every threshold; a gap that crosses buckets runs from
/// one non-empty bucket's last arrival to the next non-empty bucket's first. Keeping each
/// bucket's first and last arrival therefore finds every gap that can be a stall, exactly.
pub const BUCKET_NS: u64 = MIN_STALL_NS;

/// One [`BUCKET_NS`] of the run clock: its first and last arrival (offsets into the
/// bucket), and how many streams had their first and their last chunk in it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bucket {
    min: u32,
    max: u32,
    firsts: u32,
    lasts: u32,
}

/// The stall rule, fed one request at a time, in bounded memory: a histogram of the
/// streams' own chunk gaps (for the median) and one `Bucket` per non-empty
/// [`BUCKET_NS`] of the run (≈ 20 a second, ≈ 72,000 an hour, a few MB an hour at most),
/// whatever the number of requests. Requests may arrive in any order.
#[derive(Debug, Clone)]
pub struct StallDetector {
    buckets: std::collections::BTreeMap<u64, Bucket>,
    gaps: hdrhistogram::Histogram<u64>,
}

impl Default for StallDetector {
    fn default() -> Self {
        StallDetector {
            buckets: std::collections::BTreeMap::new(),
            gaps: super::new_histogram(),
        }
    }
}

impl StallDetector {
    /// Adds the chunk arrivals of one request (any outcome, warm-up included).
    pub fn add_request(&mut self, r: &RequestRecord) {
        if r.chunks.windows(2).all(|w| w[0].at_ns <= w[1].at_ns) {
            self.add_stream(r.chunks.iter().map(|c| c.at_ns));
        } else {
            let mut times: Vec<u64> = r.chunks.iter().map(|c| c.at_ns).collect();
            times.sort_unstable();
            self.add_stream(times.into_iter());
        }
    }

    /// Adds one stream's chunk arrivals, ns, in ascending order.
    pub fn add_stream(&mut self, times: impl Iterator<Item = u64>) {
        let mut times = times.peekable();
        let Some(&first) = times.peek() else {
            return;
        };
        let mut prev: Option<u64> = None;
        // Runs of arrivals in the same bucket touch the map once.
        let mut run: Option<(u64, u32, u32)> = None;
        for t in times {
            if let Some(p) = prev {
                // A gap the histogram cannot hold (over u64's range) is impossible here.
                let _ = self.gaps.record(t - p);
            }
            prev = Some(t);
            let (b, off) = (t / BUCKET_NS, (t % BUCKET_NS) as u32);
            run = match run {
                Some((rb, lo, _)) if rb == b => Some((rb, lo, off)),
                Some(done) => {
                    self.touch(done.0, done.1, done.2);
                    Some((b, off, off))
                }
                None => Some((b, off, off)),
            };
        }
        if let Some(done) = run {
            self.touch(done.0, done.1, done.2);
        }
        self.bucket(first).firsts += 1;
        if let Some(last) = prev {
            self.bucket(last).lasts += 1;
        }
    }

    fn touch(&mut self, b: u64, lo: u32, hi: u32) {
        let e = self.buckets.entry(b).or_insert(Bucket {
            min: lo,
            max: hi,
            firsts: 0,
            lasts: 0,
        });
        e.min = e.min.min(lo);
        e.max = e.max.max(hi);
    }

    fn bucket(&mut self, t: u64) -> &mut Bucket {
        // Only called for arrivals already touched.
        let off = (t % BUCKET_NS) as u32;
        self.buckets.entry(t / BUCKET_NS).or_insert(Bucket {
            min: off,
            max: off,
            firsts: 0,
            lasts: 0,
        })
    }

    /// Folds another detector (another shard of the same clock) into this one.
    pub fn merge(&mut self, other: &StallDetector) {
        let _ = self.gaps.add(&other.gaps);
        for (&b, o) in &other.buckets {
            let e = self.buckets.entry(b).or_insert(*o);
            if e != o {
                e.min = e.min.min(o.min);
                e.max = e.max.max(o.max);
                e.firsts += o.firsts;
                e.lasts += o.lasts;
            }
        }
    }

    /// Buckets held (the detector's memory is about 48 bytes each).
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The median gap between a stream's own chunks, ns: the (n/2)th smallest (0-based)
    /// gap, to the histogram's 0.1 % (the middle of its bucket).
    fn median_gap(&self) -> u64 {
        let n = self.gaps.len();
        if n == 0 {
            return 0;
        }
        let mut seen = 0u64;
        for v in self.gaps.iter_recorded() {
            seen += v.count_at_value();
            if seen > n / 2 {
                return self.gaps.median_equivalent(v.value_iterated_to());
            }
        }
        self.gaps.max()
    }

    /// The windows under the rule, with `late_dispatches` 0 and cause `unknown` (see
    /// [`count_late`] for those).
    pub fn stalls(&self) -> Stalls {
        let median = self.median_gap();
        let threshold = MIN_STALL_NS.max(median.saturating_mul(PACE_MULTIPLE));
        let mut windows = Vec::new();
        // Streams open after a bucket's last arrival: firsts so far less lasts so far.
        let mut open = 0i64;
        let mut prev_end: Option<u64> = None;
        for (&b, k) in &self.buckets {
            let lo = b * BUCKET_NS + u64::from(k.min);
            if let Some(a) = prev_end {
                if lo - a >= threshold && open >= 2 {
                    windows.push(StallWindow {
                        start_ns: a,
                        end_ns: lo,
                        duration_ms: (lo - a) as f64 / 1e6,
                        streams: open as u32,
                        late_dispatches: 0,
                        cause: "unknown".to_string(),
                    });
                }
            }
            open += i64::from(k.firsts) - i64::from(k.lasts);
            prev_end = Some(b * BUCKET_NS + u64::from(k.max));
        }
        Stalls {
            schema_version: 1,
            threshold_ms: threshold as f64 / 1e6,
            median_chunk_gap_ms: median as f64 / 1e6,
            windows,
        }
    }
}

/// Counts each window's late dispatches from every request's (intended, dispatch) times,
/// ns, and sets its cause: one pass, nothing kept.
pub fn count_late(stalls: &mut Stalls, requests: impl Iterator<Item = (u64, u64)>) {
    if stalls.windows.is_empty() {
        return;
    }
    for (intended, dispatch) in requests {
        // Windows are in time order and do not overlap.
        let i = stalls.windows.partition_point(|w| w.end_ns <= intended);
        if let Some(w) = stalls.windows.get_mut(i) {
            let half = (w.end_ns - w.start_ns) / 2;
            if intended >= w.start_ns && dispatch.saturating_sub(intended) >= half {
                w.late_dispatches += 1;
            }
        }
    }
    for w in &mut stalls.windows {
        w.cause = if w.late_dispatches > 0 {
            "harness"
        } else {
            "unknown"
        }
        .to_string();
    }
}

/// Finds the stall windows of a run from its records (see the module doc).
pub fn detect(records: &[RequestRecord]) -> Stalls {
    let mut d = StallDetector::default();
    for r in records {
        d.add_request(r);
    }
    let mut s = d.stalls();
    count_late(
        &mut s,
        records.iter().map(|r| (r.intended_ns, r.dispatch_ns)),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Chunk;

    const MS: u64 = 1_000_000;

    /// A request streaming a chunk every 4 ms from `from` to `to` (ms), skipping arrivals
    /// inside `pause` and delivering them at its end instead.
    fn stream(from: u64, to: u64, pause: Option<(u64, u64)>) -> RequestRecord {
        let mut at: Vec<u64> = (from..to).step_by(4).collect();
        if let Some((a, b)) = pause {
            for t in &mut at {
                if *t > a && *t < b {
                    *t = b;
                }
            }
        }
        RequestRecord {
            intended_ns: from.saturating_sub(80) * MS,
            dispatch_ns: from.saturating_sub(80) * MS,
            chunks: at
                .into_iter()
                .map(|t| Chunk {
                    at_ns: t * MS,
                    tokens: 1,
                    text_bytes: 1,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_pause_of_every_stream_is_one_window_and_a_quiet_run_has_none() {
        let quiet: Vec<RequestRecord> = (0..8).map(|i| stream(100 + i, 900 + i, None)).collect();
        let s = detect(&quiet);
        assert!(s.windows.is_empty(), "{s:?}");
        // The median is the histogram's (0.1 %), the threshold 20 times it.
        assert!((s.median_chunk_gap_ms - 4.0).abs() < 0.004, "{s:?}");
        assert!((s.threshold_ms - 80.0).abs() < 0.08, "{s:?}");

        let mut paused: Vec<RequestRecord> = (0..8)
            .map(|i| stream(100 + i, 900 + i, Some((400, 600))))
            .collect();
        // A request intended during the pause left when it ended: the harness was stopped.
        paused.push(RequestRecord {
            intended_ns: 450 * MS,
            dispatch_ns: 601 * MS,
            ..Default::default()
        });
        let s = detect(&paused);
        assert_eq!(s.windows.len(), 1, "{s:?}");
        let w = &s.windows[0];
        assert!(w.start_ns <= 400 * MS && w.end_ns == 600 * MS, "{w:?}");
        assert!(w.duration_ms >= 190.0 && w.duration_ms <= 200.0, "{w:?}");
        assert_eq!(w.streams, 8);
        assert_eq!((w.late_dispatches, w.cause.as_str()), (1, "harness"));
        assert!(s.line().starts_with("1 stall window ("), "{}", s.line());
    }

    #[test]
    fn one_slow_stream_or_idle_time_is_not_a_stall() {
        // One stream pauses alone while another keeps going: not every stream was silent.
        let recs = vec![stream(0, 1000, Some((300, 600))), stream(0, 1000, None)];
        assert!(detect(&recs).windows.is_empty());
        // A lone stream pausing: one stream cannot show the machine stopped.
        let recs = vec![stream(0, 1000, Some((300, 600))), stream(2000, 2100, None)];
        assert!(detect(&recs).windows.is_empty());
        // Idle time between requests (nothing decoding) is not a stall either.
        let recs = vec![
            stream(0, 100, None),
            stream(0, 100, None),
            stream(500, 600, None),
        ];
        assert!(detect(&recs).windows.is_empty());
        assert!(detect(&[]).windows.is_empty());
    }

    /// The rule as it was written before the bounded detector: every arrival sorted, every
    /// span kept (the reference the detector must equal).
    fn detect_exact(records: &[RequestRecord]) -> (u64, Vec<StallWindow>) {
        let mut arrivals: Vec<u64> = Vec::new();
        let mut own_gaps: Vec<u64> = Vec::new();
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for r in records {
            let mut times: Vec<u64> = r.chunks.iter().map(|c| c.at_ns).collect();
            times.sort_unstable();
            own_gaps.extend(times.windows(2).map(|w| w[1] - w[0]));
            if let (Some(&first), Some(&last)) = (times.first(), times.last()) {
                spans.push((first, last));
            }
            arrivals.extend(times);
        }
        arrivals.sort_unstable();
        let median = if own_gaps.is_empty() {
            0
        } else {
            let mid = own_gaps.len() / 2;
            *own_gaps.select_nth_unstable(mid).1
        };
        let threshold = MIN_STALL_NS.max(median.saturating_mul(PACE_MULTIPLE));
        let mut windows = Vec::new();
        for w in arrivals.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b - a < threshold {
                continue;
            }
            let streams = spans.iter().filter(|(f, l)| *f <= a && *l >= b).count() as u32;
            if streams < 2 {
                continue;
            }
            let half = (b - a) / 2;
            let late_dispatches = records
                .iter()
                .filter(|r| r.intended_ns >= a && r.intended_ns < b)
                .filter(|r| r.dispatch_ns.saturating_sub(r.intended_ns) >= half)
                .count() as u32;
            let cause = if late_dispatches > 0 {
                "harness"
            } else {
                "unknown"
            };
            windows.push(StallWindow {
                start_ns: a,
                end_ns: b,
                duration_ms: (b - a) as f64 / 1e6,
                streams,
                late_dispatches,
                cause: cause.to_string(),
            });
        }
        (median, windows)
    }

    /// Streams with irregular pace (xorshift), paused together twice (one pause cut at a
    /// bucket edge, one spanning several), a lone stream's own pause, late dispatches, and
    /// records handed over in a shuffled order with some chunks out of order.
    fn messy_run(seed: u64) -> Vec<RequestRecord> {
        let mut x = seed | 1;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let pauses = [
            (1_230 * MS + 7, 1_377 * MS + 11),
            (2_050 * MS, 2_400 * MS - 1),
        ];
        let mut recs = Vec::new();
        for i in 0..40u64 {
            let start = next(3_000) * MS + next(MS);
            let len = (200 + next(1_500)) * MS;
            let mut t = start;
            let mut at = Vec::new();
            while t < start + len {
                let mut v = t;
                for &(a, b) in &pauses {
                    if v > a && v < b {
                        v = b + next(3 * MS);
                    }
                }
                if i == 7 && v > 500 * MS && v < 900 * MS {
                    v = 900 * MS;
                }
                at.push(v);
                t += 1 + next(9 * MS);
            }
            if i % 5 == 0 && at.len() > 3 {
                at.swap(1, 2);
            }
            let intended = start.saturating_sub(next(100) * MS);
            let late = if i % 3 == 0 { next(300) * MS } else { 0 };
            recs.push(RequestRecord {
                intended_ns: intended,
                dispatch_ns: intended + late,
                chunks: at
                    .into_iter()
                    .map(|at_ns| Chunk {
                        at_ns,
                        tokens: 1,
                        text_bytes: 1,
                    })
                    .collect(),
                ..Default::default()
            });
        }
        // Requests without chunks (failed before any) still count as late dispatches.
        recs.push(RequestRecord {
            intended_ns: 1_300 * MS,
            dispatch_ns: 1_390 * MS,
            ..Default::default()
        });
        for i in (1..recs.len()).rev() {
            let j = next(i as u64 + 1) as usize;
            recs.swap(i, j);
        }
        recs
    }

    #[test]
    fn the_bounded_detector_finds_the_windows_the_exact_rule_finds() {
        let mut found = 0;
        for seed in 1..40u64 {
            let recs = messy_run(seed * 7_919);
            let (median, exact) = detect_exact(&recs);
            let s = detect(&recs);
            let m = s.median_chunk_gap_ms * 1e6;
            assert!(
                (m - median as f64).abs() <= median as f64 * 0.001 + 1.0,
                "seed {seed}: median {m} vs {median}"
            );
            // The threshold (50 ms here) is not within 0.1 % of any gap, so the windows
            // are exactly the same.
            assert_eq!(s.windows, exact, "seed {seed}");
            found += exact.len();
        }
        assert!(found >= 40, "the fixture must produce windows: {found}");
    }

    #[test]
    fn the_detector_holds_one_bucket_per_50_ms_whatever_the_requests() {
        // 10,000 requests over the same 10 s: the detector's size depends on the span.
        let mut d = StallDetector::default();
        for i in 0..10_000u64 {
            let from = (i % 9_000) * MS;
            d.add_request(&stream(from / MS, from / MS + 1_000, None));
        }
        assert!(d.buckets() <= 10_000 / 50 + 1, "{}", d.buckets());
        // Shards merge bucket by bucket.
        let mut a = StallDetector::default();
        let mut b = StallDetector::default();
        let recs = messy_run(3);
        for (i, r) in recs.iter().enumerate() {
            if i % 2 == 0 {
                a.add_request(r)
            } else {
                b.add_request(r)
            }
        }
        a.merge(&b);
        let mut whole = StallDetector::default();
        recs.iter().for_each(|r| whole.add_request(r));
        assert_eq!(a.stalls(), whole.stalls());
    }
}
