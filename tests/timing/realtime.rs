//! Real-time scheduling for the timing tests that measure against the emulated link.

/// Real-time scheduling while the test runs, where permitted (root or CAP_SYS_NICE), as a
/// latency measurement on a shared machine would be run (`chrt -f 1 spark-bench run
/// --realtime`): the emulator's threads (delay line, timer) at SCHED_FIFO 2, this process's
/// other threads (the simulator and the harness share the test's runtime) at 1. Everything
/// goes back to normal on drop, so the tests that follow run as before. Without it, with two
/// CPU hogs on the 2-core machine, 1–6% of chunks were 1 ms or more off (the simulator's and
/// the delay line's tasks waiting for a time slice).
pub struct Realtime(pub Result<usize, String>);

impl Realtime {
    /// Raises the threads; see the type.
    pub fn new() -> Realtime {
        let emulator = spark_bench::priority::raise_emulator_threads();
        for_other_threads(libc::SCHED_FIFO, 1);
        Realtime(emulator)
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        spark_bench::priority::lower_emulator_threads();
        for_other_threads(libc::SCHED_OTHER, 0);
    }
}

/// Sets the policy of this process's threads other than the emulator's.
fn for_other_threads(policy: libc::c_int, priority: libc::c_int) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.starts_with("spark-bench-") {
            continue;
        }
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        let param = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: changes the scheduling policy of one of this process's threads.
        unsafe { libc::sched_setscheduler(tid, policy, &param) };
    }
}
