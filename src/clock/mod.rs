//! Time: every timestamp source of the client and the simulator (the system calls behind them
//! are [`crate::sys`]'s).
//!
//! Owns: reading the clocks. Outside this module no code calls `Instant::now`,
//! `SystemTime::now` or the kernel's timestamping; it asks a function or type here.
//! Does not own: what a timestamp means for a request (the driver and transport decide which
//! instant is a dispatch, a first byte or an end), nor when anything should happen.
//!
//! The sources, and who uses each:
//!
//! * [`Clock`]: the run's monotonic clock, nanoseconds since the run start. Made once per
//!   run (`commands`), handed to the driver, which stamps dispatch and end through it, and to
//!   transport, which stamps bytes through it.
//! * [`rx`]: the kernel's receive stamp of each read (`SO_TIMESTAMPNS`), published as
//!   [`rx::Arrivals`]. Transport's sockets and the link emulator use it, so a chunk is stamped
//!   when it arrived, not when a busy task got round to reading it.
//! * [`tx`]: the kernel's transmit stamp of each write (`SO_TIMESTAMPING`), the simulator's
//!   ground truth of when a chunk left.
//! * [`realtime_to_instant`]: a kernel stamp (`CLOCK_REALTIME`) on the monotonic clock; used
//!   by [`rx`] and [`tx`].
//! * [`timer`]: sub-millisecond sleeps to a monotonic deadline, for the driver's pacing, the
//!   link emulator and the simulator's token schedule.
//! * [`selfwatch`]: the harness watching itself during a run: the timer's lateness (a 1 ms
//!   sleep loop) and the process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`).
//! * [`now`], [`since`] and [`wall_now`]: plain reads for everyone else (the simulator's
//!   trace, link and transport phase timings, progress, file names and ids).
//!
//! The system calls (socket timestamping options, `recvmsg` with its control-message walk,
//! the timer thread's slack, `CLOCK_PROCESS_CPUTIME_ID`, `adjtimex`) are [`crate::sys`]'s;
//! this module is the only caller of its raw clock reads ([`crate::sys::time`]). Which read
//! delivered which HTTP response byte is transport's (`transport::bytelog`): it reads no
//! clock. The byte streams that stamp or count what passes through them (here, in transport,
//! the link emulator and the simulator) share one forwarding wrapper, [`tap::Tapped`].

pub mod rx;
pub mod selfwatch;
pub mod tap;
pub mod timer;
pub mod tx;

use std::time::{Duration, Instant, SystemTime};

/// The run's monotonic clock: every timestamp is nanoseconds since `origin`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// The run start.
    pub origin: Instant,
}

impl Clock {
    /// A clock whose origin is now.
    pub fn start() -> Self {
        Clock {
            origin: Instant::now(),
        }
    }

    /// Nanoseconds since the run start.
    pub fn now_ns(&self) -> u64 {
        self.ns(Instant::now())
    }

    /// `t` as nanoseconds since the run start (0 for instants before it).
    pub fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// The instant `ns` nanoseconds after the run start.
    pub fn instant(&self, ns: u64) -> Instant {
        self.origin + Duration::from_nanos(ns)
    }
}

/// The monotonic clock, now.
#[inline]
pub fn now() -> Instant {
    Instant::now()
}

/// How long ago `t` was (zero if it is in the future): `t.elapsed()`.
#[inline]
pub fn since(t: Instant) -> Duration {
    t.elapsed()
}

/// The wall clock, now: for file names, ids and seeds, never for a measured interval.
#[inline]
pub fn wall_now() -> SystemTime {
    SystemTime::now()
}

/// Where a run's monotonic origin sits on the wall clock, and how sure that is: what lets
/// `merge` put shards that never shared a monotonic clock on one axis.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Anchor {
    /// The origin (ns 0 of every `*_ns` instant) as nanoseconds since the Unix epoch.
    pub origin_unix_ns: u64,
    /// Half the width of the bracket the wall clock was read in (between two monotonic
    /// reads), plus the kernel's estimated error of the wall clock when it is NTP
    /// synchronised, ns: the origin is `origin_unix_ns` ± this.
    pub uncertainty_ns: u64,
    /// How the anchor was taken, in words.
    pub how: String,
}

impl Clock {
    /// This clock's origin on the wall clock: the best of five reads of `CLOCK_REALTIME`
    /// bracketed by two monotonic reads (the narrowest bracket wins).
    pub fn anchor(&self) -> Anchor {
        let mut best: Option<(u64, u64)> = None;
        for _ in 0..5 {
            let before = Instant::now();
            let wall = SystemTime::now();
            let after = Instant::now();
            let width = after.saturating_duration_since(before).as_nanos() as u64;
            let mid_ns = self.ns(before) + width / 2;
            let wall_ns = wall
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let origin = wall_ns.saturating_sub(mid_ns);
            if best.is_none_or(|(_, w)| width < w) {
                best = Some((origin, width));
            }
        }
        let (origin_unix_ns, width) = best.unwrap_or_default();
        let ntp = crate::sys::time::ntp_estimated_error_ns();
        let how = match ntp {
            Some(e) => format!(
                "CLOCK_REALTIME read between two monotonic reads ({} ns apart); the kernel says the wall clock is NTP-synchronised with an estimated error of {} µs",
                width,
                e / 1000
            ),
            None => format!(
                "CLOCK_REALTIME read between two monotonic reads ({width} ns apart); the wall clock is not known to be synchronised (no NTP estimate), so shards on different machines may be offset by more than this uncertainty"
            ),
        };
        Anchor {
            origin_unix_ns,
            uncertainty_ns: width.div_ceil(2) + ntp.unwrap_or(0),
            how,
        }
    }
}

/// The monotonic instant of a `CLOCK_REALTIME` stamp: now, minus the stamp's age.
pub fn realtime_to_instant(realtime: Duration) -> Instant {
    let now = Instant::now();
    let wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    // A stamp "from the future" (a wall-clock step backwards) counts as now.
    let age = wall.saturating_sub(realtime);
    now.checked_sub(age).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_converts_both_ways() {
        let c = Clock::start();
        let t = c.origin + Duration::from_micros(1500);
        assert_eq!(c.ns(t), 1_500_000);
        assert_eq!(c.instant(1_500_000), t);
        assert_eq!(c.ns(c.origin - Duration::from_secs(1)), 0);
    }
}
