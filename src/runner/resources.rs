//! What a run can hold open and what holding it costs: the open-file limit (raised as far
//! as the process may), and resident memory before and at the peak, read from
//! `/proc/self/status` (Linux; elsewhere the figures are 0).
//!
//! Owns: `setrlimit(RLIMIT_NOFILE)` and the memory reads. Does not own: counting sessions
//! (the recorder's [`crate::recorder::Recorder::peak_sessions`]).

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
#[cfg(unix)]
pub fn raise_nofile() -> FdLimit {
    let Some(mut lim) = get_nofile() else {
        return FdLimit::default();
    };
    // The soft limit the process started with: a second call (`run` raises it before
    // checking the plan, the runner again) still reports the first one.
    static FIRST: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let before = *FIRST.get_or_init(|| lim.rlim_cur);
    let nr_open: Option<libc::rlim_t> = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if let Some(n) = nr_open.filter(|n| *n > lim.rlim_max) {
        // Refused (EPERM) without the privilege.
        lim = set_nofile(n, n).unwrap_or(lim);
    }
    if lim.rlim_cur < lim.rlim_max {
        // Raising the soft limit up to the hard one is always allowed.
        lim = set_nofile(lim.rlim_max, lim.rlim_max).unwrap_or(lim);
    }
    FdLimit {
        before,
        granted: lim.rlim_cur,
        hard: lim.rlim_max,
    }
}

/// No limit to raise off Unix.
#[cfg(not(unix))]
pub fn raise_nofile() -> FdLimit {
    FdLimit::default()
}

/// Lowers the soft `RLIMIT_NOFILE` to `n` (never above the hard limit): a process that
/// should run out of descriptors early, e.g. `serve --max-open-files` reproducing a server
/// at its limit.
#[cfg(unix)]
pub fn cap_nofile(n: u64) -> FdLimit {
    let Some(mut lim) = get_nofile() else {
        return FdLimit::default();
    };
    let before = lim.rlim_cur;
    // Lowering the soft limit is always allowed.
    lim = set_nofile((n as libc::rlim_t).min(lim.rlim_max), lim.rlim_max).unwrap_or(lim);
    FdLimit {
        before,
        granted: lim.rlim_cur,
        hard: lim.rlim_max,
    }
}

/// No limit to lower off Unix.
#[cfg(not(unix))]
pub fn cap_nofile(_n: u64) -> FdLimit {
    FdLimit::default()
}

/// The process's `RLIMIT_NOFILE`.
#[cfg(unix)]
fn get_nofile() -> Option<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit, which `lim` is.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0).then_some(lim)
}

/// Sets `RLIMIT_NOFILE` to (`cur`, `max`); the new limit, or None when the kernel refused.
#[cfg(unix)]
fn set_nofile(cur: libc::rlim_t, max: libc::rlim_t) -> Option<libc::rlimit> {
    let want = libc::rlimit {
        rlim_cur: cur,
        rlim_max: max,
    };
    // SAFETY: setrlimit reads one rlimit, which `want` is.
    (unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0).then_some(want)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_never_lowered_and_memory_is_read() {
        let l = raise_nofile();
        assert!(l.granted >= l.before, "{l:?}");
        assert!(l.hard >= l.granted, "{l:?}");
        #[cfg(target_os = "linux")]
        {
            let (now, peak) = rss_kib();
            assert!(now > 0 && peak >= now, "{now} {peak}");
        }
    }
}
