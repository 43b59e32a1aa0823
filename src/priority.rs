//! Real-time scheduling for the emulator's own threads.
//!
//! Owns: putting the client-side delay line's thread (`spark-bench-link`) and the precise
//! timer's thread (`spark-bench-timer`) under `SCHED_FIFO` priority 2 when asked
//! (`spark-bench run --realtime`) and permitted (root or `CAP_SYS_NICE`).
//! Does not own: the harness's or the simulator's threads, which stay under the normal
//! scheduler unless the user runs spark-bench under `chrt` (or a benchmark asks for
//! [`fifo_current_thread`] on its own threads); the system calls ([`crate::sys::sched`]).
//!
//! Why only these two: arrival stamps come from the kernel, so the harness's own scheduling
//! does not move them; but when the delay line's reader is late, several segments arrive in
//! one read and an earlier chunk is stamped with a later segment's time, and when its timer
//! is late the emulated path is late. Both threads do little work and block between events.
//! Priority 2 keeps them above the rest of the process when that runs under `chrt -f 1`
//! (equal-priority FIFO threads are not time-sliced, so at one level a worker busy with a
//! long task would hold the delay line off a core).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::sys::sched;

/// Whether this process wants its emulator threads real-time: those running when it was asked
/// and those started later (the process's one timer thread, each run's delay-line threads).
/// A setting of the process's threads, like `chrt`, not of a run: whether a run's threads got
/// the priority is counted in that run's provenance counters.
static WANTED: AtomicBool = AtomicBool::new(false);

/// The SCHED_FIFO priority of the emulator's threads.
pub const EMULATOR_PRIORITY: i32 = 2;

/// The name prefixes (as `/proc` shows them, 15 bytes at most) of the emulator's threads.
const EMULATOR_THREADS: [&str; 2] = ["spark-bench-lin", "spark-bench-tim"];

/// Asks for real-time priority for the emulator's threads: those running now and those
/// started later. Returns how many running threads were changed, or why it was refused
/// (not permitted, or refused for some running thread).
pub fn raise_emulator_threads() -> Result<usize, String> {
    WANTED.store(true, Ordering::SeqCst);
    // Probe on this thread first: if the kernel refuses, say so plainly.
    if !permitted() {
        WANTED.store(false, Ordering::SeqCst);
        return Err(
            "real-time priority not permitted (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO of \
             at least 2); the emulator runs under the normal scheduler"
                .into(),
        );
    }
    let refused = AtomicBool::new(false);
    let n = for_each_emulator_thread(|tid| {
        let ok = set(tid, true);
        if !ok {
            refused.store(true, Ordering::Relaxed);
        }
        ok
    });
    if refused.load(Ordering::Relaxed) {
        return Err(format!(
            "real-time priority refused for some of the emulator's threads ({n} raised)"
        ));
    }
    Ok(n)
}

/// Returns the emulator's threads to the normal scheduler (and stops raising new ones).
pub fn lower_emulator_threads() -> usize {
    WANTED.store(false, Ordering::SeqCst);
    for_each_emulator_thread(|tid| set(tid, false))
}

/// Called by an emulator thread as it starts: `None` when real-time priority is not wanted,
/// else whether the thread got it.
pub(crate) fn on_emulator_thread_start() -> Option<bool> {
    WANTED.load(Ordering::SeqCst).then(|| set(0, true))
}

/// Puts the calling thread under SCHED_FIFO at `priority` (1 is just above every normal
/// thread, and below the emulator's [`EMULATOR_PRIORITY`]), as `chrt -f` would. False when
/// refused (not root, no CAP_SYS_NICE).
pub fn fifo_current_thread(priority: i32) -> bool {
    sched::set_policy(0, Some(priority))
}

/// An emulator thread to its real-time priority, or back to the normal scheduler.
fn set(tid: i32, realtime: bool) -> bool {
    sched::set_policy(tid, realtime.then_some(EMULATOR_PRIORITY))
}

/// Whether this process may use SCHED_FIFO: tries it on the calling thread and puts the
/// thread's own policy back at once.
fn permitted() -> bool {
    let Some(before) = sched::current() else {
        return false;
    };
    let ok = set(0, true);
    if ok && !sched::restore(before) {
        // Could not put the caller back as it was: at least not real-time.
        set(0, false);
    }
    ok
}

fn for_each_emulator_thread(f: impl Fn(i32) -> bool) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut n = 0;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !EMULATOR_THREADS
            .iter()
            .any(|p| comm.trim_end().starts_with(p))
        {
            continue;
        }
        if let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) {
            if f(tid) {
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::sched::{gettid, policy_of, SCHED_FIFO, SCHED_OTHER};

    #[test]
    fn raises_and_lowers_only_the_emulator_threads() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let emulator = std::thread::Builder::new()
            .name("spark-bench-link-test".into())
            .spawn(move || {
                tid_tx.send(gettid()).unwrap();
                let _ = stop_rx.recv();
            })
            .unwrap();
        let tid = tid_rx.recv().unwrap();
        let me = gettid();
        match raise_emulator_threads() {
            Ok(n) => {
                assert!(n >= 1, "the emulator thread was not raised");
                assert_eq!(policy_of(tid), SCHED_FIFO);
                assert_eq!(policy_of(me), SCHED_OTHER, "the caller was changed");
                assert!(lower_emulator_threads() >= 1);
                assert_eq!(policy_of(tid), SCHED_OTHER);
            }
            Err(why) => {
                assert!(why.contains("CAP_SYS_NICE"), "{why}");
                assert_eq!(policy_of(tid), SCHED_OTHER);
            }
        }
        stop_tx.send(()).unwrap();
        emulator.join().unwrap();
    }
}
