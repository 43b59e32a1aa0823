//! What a run can hold open and what holding it costs: the open-file limit (raised as far
//! as the process may), resident memory before and at the peak, read from
//! `/proc/self/status` (0 where it has no answer), and the threads of the async runtime.
//!
//! Owns: how far `RLIMIT_NOFILE` is raised or lowered, the memory reads, and which runtime
//! every command runs on ([`runtime`]; `examples/read_floor.rs` uses it too). Does not own:
//! the `getrlimit`/`setrlimit` calls ([`crate::sys::rlimit`]), counting sessions (the
//! driver's [`crate::driver::SessionGauge`]).

use crate::sys::rlimit::{get_nofile, set_nofile};

/// The open-file limit before and after [`raise_nofile`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FdLimit {
    /// Soft limit before.
    pub before: u64,
    /// Soft limit granted.
    pub granted: u64,
    /// Hard limit after.
    pub hard: u64,
}

/// Raises `RLIMIT_NOFILE`: first the hard limit to the kernel's `fs.nr_open` (allowed for
/// root or `CAP_SYS_RESOURCE`; refused quietly otherwise), then the soft limit to the hard
/// one. Every WebSocket session and HTTP connection holds a descriptor, so the default soft
/// limit (often 1024) would cap a shard at about a thousand sessions.
pub fn raise_nofile() -> FdLimit {
    let Some(mut lim) = get_nofile() else {
        return FdLimit::default();
    };
    // The soft limit the process started with: a second call (`run` raises it before
    // checking the plan, the runner again) still reports the first one.
    static FIRST: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let before = *FIRST.get_or_init(|| lim.cur);
    let nr_open: Option<u64> = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if let Some(n) = nr_open.filter(|n| *n > lim.max) {
        // Refused (EPERM) without the privilege.
        lim = set_nofile(n, n).unwrap_or(lim);
    }
    if lim.cur < lim.max {
        // Raising the soft limit up to the hard one is always allowed.
        lim = set_nofile(lim.max, lim.max).unwrap_or(lim);
    }
    FdLimit {
        before,
        granted: lim.cur,
        hard: lim.max,
    }
}

/// Lowers the soft `RLIMIT_NOFILE` to `n` (never above the hard limit): a process that
/// should run out of descriptors early, e.g. `serve --max-open-files` reproducing a server
/// at its limit.
pub fn cap_nofile(n: u64) -> FdLimit {
    let Some(mut lim) = get_nofile() else {
        return FdLimit::default();
    };
    let before = lim.cur;
    // Lowering the soft limit is always allowed.
    lim = set_nofile(n.min(lim.max), lim.max).unwrap_or(lim);
    FdLimit {
        before,
        granted: lim.cur,
        hard: lim.max,
    }
}

/// (resident now, peak resident) of this process, KiB; zeros where `/proc` has no answer.
pub fn rss_kib() -> (u64, u64) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The async runtime: one thread when the process may run on one CPU only (`taskset -c 0`,
/// a one-CPU container), where a worker thread beside the main one brings no parallelism,
/// only hand-offs between the two and the work-stealing scheduler's bookkeeping on every
/// wake-up (together ~3% of the client's CPU per chunk, `scripts/cpu-per-chunk.sh`,
/// docs/measurements.md); a worker per CPU otherwise.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let one_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let mut b = if one_cpu {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    b.enable_all().build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_never_lowered_and_memory_is_read() {
        let l = raise_nofile();
        assert!(l.granted >= l.before, "{l:?}");
        assert!(l.hard >= l.granted, "{l:?}");
        let (now, peak) = rss_kib();
        assert!(now > 0 && peak >= now, "{now} {peak}");
    }
}
