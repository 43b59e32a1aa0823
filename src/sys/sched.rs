//! Thread scheduling: the policy and priority of one of this process's threads, and the
//! calling thread's timer slack.
//!
//! Owns: `sched_setscheduler`, `sched_getscheduler`, `sched_getparam`, `gettid` and
//! `prctl(PR_SET_TIMERSLACK)`.
//! Does not own: which threads are real-time or when ([`crate::priority`]), or which thread
//! sleeps precisely (`clock::timer`).

/// `SCHED_FIFO`: real-time, first in first out.
pub const SCHED_FIFO: i32 = libc::SCHED_FIFO;
/// `SCHED_OTHER`: the normal time-sharing scheduler.
pub const SCHED_OTHER: i32 = libc::SCHED_OTHER;

/// Puts thread `tid` of this process (0 = the caller) under `SCHED_FIFO` at the given
/// priority, or under `SCHED_OTHER` for `None`; false when the kernel refused.
pub fn set_policy(tid: i32, fifo: Option<i32>) -> bool {
    let (policy, priority) = match fifo {
        Some(p) => (libc::SCHED_FIFO, p),
        None => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: changes the scheduling policy of one of this process's threads (0 = caller);
    // `param` is a valid sched_param that outlives the call.
    unsafe { libc::sched_setscheduler(tid, policy, &param) == 0 }
}

/// A thread's scheduling policy and priority, as read by [`current`].
#[derive(Debug, Clone, Copy)]
pub struct Saved {
    policy: i32,
    priority: i32,
}

/// The calling thread's scheduling policy and priority; `None` when the kernel refused.
pub fn current() -> Option<Saved> {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: reads the calling thread's own policy; no pointers.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // SAFETY: sched_getparam writes one sched_param, which `param` is.
    if policy < 0 || unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return None;
    }
    Some(Saved {
        policy,
        priority: param.sched_priority,
    })
}

/// Puts the calling thread back under `saved`; false when the kernel refused.
pub fn restore(saved: Saved) -> bool {
    let param = libc::sched_param {
        sched_priority: saved.priority,
    };
    // SAFETY: changes the calling thread's own policy; `param` outlives the call.
    unsafe { libc::sched_setscheduler(0, saved.policy, &param) == 0 }
}

/// Thread `tid`'s scheduling policy ([`SCHED_FIFO`], [`SCHED_OTHER`], …), or -1 when the
/// kernel refused.
pub fn policy_of(tid: i32) -> i32 {
    // SAFETY: reads a thread's scheduling policy; no pointers.
    unsafe { libc::sched_getscheduler(tid) }
}

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Sets the calling thread's timer slack to 1 ns (the default is 50 µs), so that its timed
/// sleeps wake when asked.
pub fn set_thread_timer_slack_1ns() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}
