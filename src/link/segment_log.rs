//! Diagnostics for tests and benchmarks: when started, every segment the delay line hands to
//! the wrapped (application) side is logged with when it was read from the socket, when it
//! was due, and when it was handed over, so an error against ground truth can be split into
//! the link's own lateness and the reader's. Off unless a test or benchmark starts it: the
//! delay line then pays one atomic load per segment.
//!
//! Owns: the per-segment timing log (`start`, `take`) and the delay line's hook into it.
//! Does not own: the delay line itself (`link`), or judging the timings (the timing tests).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// One inbound segment.
#[derive(Debug, Clone, Copy)]
pub struct SegmentTiming {
    /// When it reached the socket (the kernel's stamp when available, else the read).
    pub read: Instant,
    /// When the delay line's read of it returned.
    pub returned: Instant,
    /// When it was due at the application side (read + one-way delay).
    pub due: Instant,
    /// When the delay line woke to hand it to the application side.
    pub delivered: Instant,
    /// Its length in bytes.
    pub len: usize,
}

static ON: AtomicBool = AtomicBool::new(false);
static LOG: Mutex<Vec<SegmentTiming>> = Mutex::new(Vec::new());

/// Starts logging (and clears the log).
pub fn start() {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    ON.store(true, Ordering::SeqCst);
}

/// Stops logging and returns the log.
pub fn take() -> Vec<SegmentTiming> {
    ON.store(false, Ordering::SeqCst);
    std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The log keeps at most this many segments (a `start` without a `take` stays bounded).
const CAP: usize = 1 << 20;

/// Whether the log is on (the delay line asks before it reads the clock for [`record`]).
pub(super) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

pub(super) fn record([read, returned]: [Instant; 2], due: Instant, delivered: Instant, len: usize) {
    if ON.load(Ordering::Relaxed) {
        let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= CAP {
            return;
        }
        log.push(SegmentTiming {
            read,
            returned,
            due,
            delivered,
            len,
        });
    }
}
