//! Kernel timestamps on the process's monotonic clock.
//!
//! Owns: converting a `CLOCK_REALTIME` stamp the kernel attached to a packet (receive stamps
//! in [`crate::rxstamp`], the simulator's transmit stamps) into an [`Instant`]. Shared by the
//! client and the simulator; it holds no state of either.

use std::time::{Duration, Instant, SystemTime};

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
