//! Raw clock calls that `std` does not offer: the process's CPU time and the kernel's estimate
//! of the wall clock's error.
//!
//! Owns: `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)` and `adjtimex`.
//! Does not own: reading the clock for the rest of the crate: only [`crate::clock`] calls
//! these (`tests/integration/architecture.rs`, `only_clock_reads_the_clock`, checks it).

use std::time::Duration;

/// CPU time this process has used so far (user + system, every thread), from
/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`; `None` if the kernel refused.
pub fn process_cpu_time() -> Option<Duration> {
    // SAFETY: timespec is a plain C struct; all-zero is a valid value.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime writes one timespec, which `ts` is, and reads nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// The kernel's estimated error of the wall clock (`adjtimex`'s `esterror`), ns, when NTP
/// keeps it synchronised; `None` when the clock is unsynchronised or the call fails.
pub fn ntp_estimated_error_ns() -> Option<u64> {
    // SAFETY: timex is a plain C struct; all-zero (`modes = 0`) asks adjtimex to read, not
    // change, the clock state.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: adjtimex with `modes = 0` only writes into `tx`, which we own.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 || state == libc::TIME_ERROR || tx.esterror < 0 {
        return None;
    }
    Some(tx.esterror as u64 * 1000)
}
