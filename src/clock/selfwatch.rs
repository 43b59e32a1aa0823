//! The harness watching itself during a run: how late the runtime wakes a sleeper, and how
//! much CPU the process used.
//!
//! Owns: the sampler task (a sleep of [`SAMPLE_PERIOD`] through [`super::timer`], the same
//! sub-millisecond timer the driver paces requests with, over and over; each wake-up's
//! overshoot past its deadline is one sample) and the process's CPU time over the run's
//! wall time (`CLOCK_PROCESS_CPUTIME_ID`: user + system, every thread, embedded simulators
//! included), with the busiest one-second window.
//! Does not own: judging the figures (`recorder::harness` has the thresholds) or the
//! records' dispatch lag (the driver stamps it; the recorder folds it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The sampler's sleep: one sample per period. 10 ms gives 100 samples a second (a p99
/// from 10 s of run time) at a cost of 100 timer wake-ups a second. At 1 ms the probe's
/// wake-ups, with the timer thread's spin before each, cost the harness about a tenth of
/// its CPU in a run of 30,000 chunks a second (`scripts/cpu-per-chunk.sh`).
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(10);

/// The window the peak CPU share is taken over.
const CPU_WINDOW: Duration = Duration::from_secs(1);

/// What the probe saw over a run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ProbeReport {
    /// Timer samples taken.
    pub timer_samples: u64,
    /// Median overshoot of a wake-up past its deadline, µs.
    pub timer_late_p50_us: f64,
    /// 99th percentile of the overshoot, µs.
    pub timer_late_p99_us: f64,
    /// Largest overshoot, µs.
    pub timer_late_max_us: f64,
    /// Wall time the probe ran, s.
    pub wall_s: f64,
    /// CPU time the process used meanwhile (user + system, all threads), s; `None` where
    /// the kernel does not say.
    pub cpu_s: Option<f64>,
    /// Logical CPUs available to the process.
    pub cores: u32,
    /// Busiest one-second window's CPU time over its wall time, in cores.
    pub cpu_peak_cores: Option<f64>,
}

struct Shared {
    late_ns: hdrhistogram::Histogram<u64>,
    peak_cores: Option<f64>,
}

/// A running probe: started before the driver, finished after it.
pub struct Probe {
    started: Instant,
    cpu_start: Option<Duration>,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

/// The process's CPU time so far (user + system, all threads), where the kernel says.
pub fn process_cpu_time() -> Option<Duration> {
    crate::sys::time::process_cpu_time()
}

impl Probe {
    /// Starts the sampler on the current tokio runtime (the one the driver runs on, so its
    /// lateness is the driver's).
    pub fn start() -> Probe {
        let shared = Arc::new(Mutex::new(Shared {
            // 1 ns to 1 hour, 3 significant digits.
            late_ns: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds"),
            peak_cores: None,
        }));
        let s = shared.clone();
        let task = tokio::spawn(async move {
            let (mut window_start, mut window_cpu) = (Instant::now(), process_cpu_time());
            loop {
                let deadline = Instant::now() + SAMPLE_PERIOD;
                super::timer::sleep_until(deadline).await;
                let late = Instant::now().saturating_duration_since(deadline);
                let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
                g.late_ns.saturating_record(late.as_nanos().max(1) as u64);
                let now = Instant::now();
                let wall = now.duration_since(window_start);
                if wall >= CPU_WINDOW {
                    let cpu = process_cpu_time();
                    if let (Some(a), Some(b)) = (window_cpu, cpu) {
                        let share = b.saturating_sub(a).as_secs_f64() / wall.as_secs_f64();
                        g.peak_cores = Some(g.peak_cores.map_or(share, |p: f64| p.max(share)));
                    }
                    (window_start, window_cpu) = (now, cpu);
                }
            }
        });
        Probe {
            started: Instant::now(),
            cpu_start: process_cpu_time(),
            shared,
            task,
        }
    }

    /// Stops the sampler and reports.
    pub fn finish(self) -> ProbeReport {
        self.task.abort();
        let wall = self.started.elapsed();
        let cpu = match (self.cpu_start, process_cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a).as_secs_f64()),
            _ => None,
        };
        let g = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let us = |ns: u64| ns as f64 / 1e3;
        let h = &g.late_ns;
        let empty = h.is_empty();
        let q = |p: f64| {
            if empty {
                0.0
            } else {
                us(h.value_at_quantile(p))
            }
        };
        ProbeReport {
            timer_samples: h.len(),
            timer_late_p50_us: q(0.5),
            timer_late_p99_us: q(0.99),
            timer_late_max_us: if empty { 0.0 } else { us(h.max()) },
            wall_s: wall.as_secs_f64(),
            cpu_s: cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            cpu_peak_cores: g.peak_cores,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn samples_the_timer_and_the_cpu() {
        let p = Probe::start();
        // Burn 100 ms of CPU on this thread (however long a loaded machine takes to give
        // it) so the process's CPU time moves.
        let (t, cpu0) = (Instant::now(), process_cpu_time().unwrap());
        let mut x = 0u64;
        while process_cpu_time().unwrap() < cpu0 + Duration::from_millis(100)
            && t.elapsed() < Duration::from_secs(10)
        {
            for _ in 0..1000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
        }
        std::hint::black_box(x);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let r = p.finish();
        // One sample per SAMPLE_PERIOD (10 ms) over at least 400 ms: 40 on time, and at
        // least 10 even if every wake-up came 30 ms late on a loaded machine.
        assert!(r.timer_samples >= 10, "{r:?}");
        assert!(r.timer_late_p50_us <= r.timer_late_p99_us);
        assert!(r.timer_late_p99_us <= r.timer_late_max_us);
        // At least the 100 ms sleep (the CPU time is process-wide: other tests add to it).
        assert!(r.wall_s >= 0.1, "{r:?}");
        let cpu = r.cpu_s.expect("CLOCK_PROCESS_CPUTIME_ID on Linux");
        assert!(
            cpu >= 0.1 && cpu <= r.wall_s * f64::from(r.cores) + 0.05,
            "{r:?}"
        );
    }
}
