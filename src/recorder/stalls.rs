//! Stall windows: moments when every stream in flight went quiet together. A machine that
//! stops the benchmark for a moment (a CI neighbour, a swap storm, a VM steal, SIGSTOP) does
//! not slow one request: it delays every chunk of every stream at once, then the backlog
//! arrives in a burst. One such window can move a run's p99 by hundreds of percent, so the
//! gate must not believe it; it is found here, written to `stalls.json`, shown in the report
//! and left out of the gate's latency samples (see `compare::samples`).
//!
//! Owns: the detection rule and the [`Stalls`] shape (`stalls.json`). Pure: records in,
//! windows out; no clocks, no I/O.
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

/// Finds the stall windows of a run from its records (see the module doc).
pub fn detect(records: &[RequestRecord]) -> Stalls {
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
        windows.push(StallWindow {
            start_ns: a,
            end_ns: b,
            duration_ms: (b - a) as f64 / 1e6,
            streams,
            late_dispatches,
            cause: if late_dispatches > 0 {
                "harness"
            } else {
                "unknown"
            }
            .to_string(),
        });
    }
    Stalls {
        schema_version: 1,
        threshold_ms: threshold as f64 / 1e6,
        median_chunk_gap_ms: median as f64 / 1e6,
        windows,
    }
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
        assert_eq!(s.threshold_ms, 80.0);
        assert_eq!(s.median_chunk_gap_ms, 4.0);

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
}
