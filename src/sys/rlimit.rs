//! The process's open-file limit (`RLIMIT_NOFILE`).
//!
//! Owns: `getrlimit` and `setrlimit` for it.
//! Does not own: how far to raise or lower it (`runner::resources`).

/// A resource limit: the soft limit (`cur`, what the kernel enforces) and the hard one
/// (`max`, the ceiling of the soft one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The soft limit.
    pub cur: u64,
    /// The hard limit.
    pub max: u64,
}

/// The process's `RLIMIT_NOFILE`; `None` when the kernel refused.
// `rlim_t` is u64 on 64-bit Linux targets and narrower on some 32-bit ones.
#[allow(clippy::unnecessary_cast)]
pub fn get_nofile() -> Option<Limit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit, which `lim` is.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    ok.then_some(Limit {
        cur: lim.rlim_cur as u64,
        max: lim.rlim_max as u64,
    })
}

/// Sets `RLIMIT_NOFILE` to (`cur`, `max`); the new limit, or `None` when the kernel refused.
#[allow(clippy::unnecessary_cast)]
pub fn set_nofile(cur: u64, max: u64) -> Option<Limit> {
    let want = libc::rlimit {
        rlim_cur: cur as libc::rlim_t,
        rlim_max: max as libc::rlim_t,
    };
    // SAFETY: setrlimit reads one rlimit, which `want` is.
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0;
    ok.then_some(Limit { cur, max })
}
