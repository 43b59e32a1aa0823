//! How one run's timestamps were taken: counted while the run goes, reported as a value.
//!
//! Owns: [`Counters`], the run's tallies (connections that got kernel receive stamps or were
//! refused them, reads that came back unstamped, HTTP body frames placed exactly or on the
//! connection's latest read, whether the delay line ran at real-time priority), and
//! [`Provenance`], their value at the end of the run with the manifest's `timestamps` line.
//! Does not own: taking the stamps ([`crate::clock::rx`], [`crate::transport::bytelog`]) or
//! the scheduling ([`crate::priority`]).
//!
//! Each run creates its own [`Counters`] and hands an `Arc` of them down to whatever counts
//! (the link emulator and its stamped sockets, each connection's byte meter, the emulator's
//! threads), so two runs in one process never see each other's counts. Imports nothing of
//! the crate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One run's tallies, shared by the tasks and threads that count.
#[derive(Debug, Default)]
pub struct Counters {
    opened: AtomicU64,
    refused: AtomicU64,
    unstamped: AtomicU64,
    reads: AtomicU64,
    frames_exact: AtomicU64,
    frames_latest: AtomicU64,
    realtime_granted: AtomicBool,
    realtime_refused: AtomicBool,
}

impl Counters {
    /// A connection was opened for kernel receive stamps; `kernel` is false when the kernel
    /// refused them (its reads use the read time).
    pub fn connection(&self, kernel: bool) {
        self.opened.fetch_add(1, Ordering::Relaxed);
        if !kernel {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A read on a client socket returned bytes.
    pub fn read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// A read on a stamping socket came back without a stamp (and used the read time).
    pub fn unstamped_read(&self) {
        self.unstamped.fetch_add(1, Ordering::Relaxed);
    }

    /// An HTTP body frame was stamped from the connection's byte log (`exact`), or with the
    /// connection's latest read.
    pub fn frame(&self, exact: bool) {
        if exact {
            &self.frames_exact
        } else {
            &self.frames_latest
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// The run's emulator threads were put under real-time priority as it started.
    pub fn realtime_granted(&self) {
        self.realtime_granted.store(true, Ordering::SeqCst);
    }

    /// One of the run's emulator threads asked for real-time priority and was refused.
    pub fn realtime_refused(&self) {
        self.realtime_refused.store(true, Ordering::SeqCst);
    }

    /// The tallies so far.
    pub fn snapshot(&self) -> Provenance {
        Provenance {
            connections: self.opened.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            unstamped_reads: self.unstamped.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            frames_exact: self.frames_exact.load(Ordering::Relaxed),
            frames_latest: self.frames_latest.load(Ordering::Relaxed),
            realtime: self.realtime_granted.load(Ordering::SeqCst)
                && !self.realtime_refused.load(Ordering::SeqCst),
        }
    }
}

/// How one run's arrival timestamps were taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Provenance {
    /// Connections opened for kernel receive stamps.
    pub connections: u64,
    /// Of those, the ones the kernel refused stamps for.
    pub refused: u64,
    /// Reads on stamping sockets that came back without a stamp.
    pub unstamped_reads: u64,
    /// Reads on client sockets that returned bytes (how many chunks each read carried is
    /// the harness's `chunks_per_read`).
    pub reads: u64,
    /// HTTP body frames stamped with the read that delivered them.
    pub frames_exact: u64,
    /// HTTP body frames stamped with the connection's latest read.
    pub frames_latest: u64,
    /// The link emulator's threads ran at real-time priority.
    pub realtime: bool,
}

impl Provenance {
    /// The manifest's `timestamps` line: how received bytes were stamped, how HTTP body
    /// frames were placed, and the emulator's priority.
    pub fn timestamps(&self) -> String {
        let mut how = self.stamp_source();
        if let Some(frames) = self.frame_source() {
            how.push_str("; ");
            how.push_str(&frames);
        }
        if self.realtime {
            how.push_str("; link emulator at real-time priority");
        }
        how
    }

    /// How received bytes were stamped.
    fn stamp_source(&self) -> String {
        let (opened, refused, unstamped) = (self.connections, self.refused, self.unstamped_reads);
        let how = match (opened, refused) {
            (0, _) => "no connections".into(),
            (_, 0) => "kernel receive time (SO_TIMESTAMPNS)".into(),
            (o, r) if r >= o => "read time (kernel receive stamps unavailable)".into(),
            (o, r) => format!(
                "kernel receive time (SO_TIMESTAMPNS) on {} of {o} connections, read time on the rest",
                o - r
            ),
        };
        if unstamped > 0 && refused < opened {
            format!("{how}; {unstamped} reads came without a kernel stamp and used the read time")
        } else {
            how
        }
    }

    /// How HTTP body frames were stamped; `None` when the run read none.
    fn frame_source(&self) -> Option<String> {
        match (self.frames_exact, self.frames_latest) {
            (0, 0) => None,
            (_, 0) => Some("HTTP body frames stamped with the read that delivered them".into()),
            (e, l) => Some(format!(
                "HTTP body frames stamped with the read that delivered them ({e}), else with the \
                 connection's latest read ({l})"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timestamps_line_says_what_the_counts_say() {
        let c = Counters::default();
        assert_eq!(c.snapshot().timestamps(), "no connections");
        c.connection(true);
        c.connection(false);
        c.frame(true);
        c.frame(false);
        c.unstamped_read();
        c.realtime_granted();
        assert_eq!(
            c.snapshot().timestamps(),
            "kernel receive time (SO_TIMESTAMPNS) on 1 of 2 connections, read time on the rest; \
             1 reads came without a kernel stamp and used the read time; HTTP body frames \
             stamped with the read that delivered them (1), else with the connection's latest \
             read (1); link emulator at real-time priority"
        );
        c.realtime_refused();
        assert!(!c.snapshot().realtime);
        let refused = Counters::default();
        refused.connection(false);
        assert_eq!(
            refused.snapshot().timestamps(),
            "read time (kernel receive stamps unavailable)"
        );
    }
}
