//! A sub-millisecond async sleep.
//!
//! Owns: waking async tasks at precise monotonic deadlines.
//! Does not own: deciding *when* anything should happen (callers pass deadlines).
//!
//! tokio's timer wheel has a resolution of one millisecond, so `tokio::time::sleep_until`
//! fires up to 1 ms late. That is too coarse for a network emulator that must place a chunk
//! within a few hundred microseconds of its due time, and for a simulator that paces 4000
//! tokens per second. This module runs one dedicated thread that sleeps on a condition
//! variable with a timeout (a futex with an hrtimer on Linux; the thread sets its timer slack
//! to 1 ns, down from the default 50 µs) until 60 µs before the next deadline, spins
//! (yielding) the rest of the way within a CPU budget, and completes a oneshot channel for
//! each due deadline. `cargo run --release --example timer_precision` measures the lateness
//! (deadline → the woken task running); the figures, and why the spin has a CPU budget, are
//! in `docs/measurements.md` ("The sub-millisecond timer").

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Deadlines closer than this are waited for in the caller (spinning): the round trip through
/// the timer thread costs more.
const SPIN_FLOOR: Duration = Duration::from_micros(30);

/// The timer thread spins (instead of sleeping in the kernel) for the last stretch before a
/// deadline, which trades a little CPU for wake-ups within a few microseconds.
const SPIN_WINDOW: Duration = Duration::from_micros(60);

/// The spin budget: at most this much spinning per [`BUDGET_PERIOD`]. When deadlines are
/// dense (thousands of chunks per second across many streams) every instant is within some
/// deadline's spin window, and an unbudgeted spinner would take a whole core from the
/// simulator and the client; over budget, the thread sleeps in the kernel to the deadline
/// itself (its timer slack is 1 ns, so the futex wakes within a few tens of µs).
const SPIN_BUDGET: Duration = Duration::from_millis(2);
const BUDGET_PERIOD: Duration = Duration::from_millis(10);

struct Entry {
    deadline: Instant,
    seq: u64,
    tx: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

struct Wheel {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    cv: Condvar,
}

fn wheel() -> &'static Wheel {
    static WHEEL: OnceLock<&'static Wheel> = OnceLock::new();
    WHEEL.get_or_init(|| {
        let w: &'static Wheel = Box::leak(Box::new(Wheel {
            heap: Mutex::new((BinaryHeap::new(), 0)),
            cv: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("spark-bench-timer".into())
            .spawn(move || {
                crate::sys::sched::set_thread_timer_slack_1ns();
                crate::priority::on_emulator_thread_start();
                run(w)
            })
            .expect("spawning the timer thread");
        w
    })
}

fn run(w: &'static Wheel) {
    let mut period_start = Instant::now();
    let mut spun = Duration::ZERO;
    loop {
        let mut guard = w.heap.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if now.duration_since(period_start) > BUDGET_PERIOD {
            period_start = now;
            spun = Duration::ZERO;
        }
        // Fire everything that is due.
        while let Some(Reverse(top)) = guard.0.peek() {
            if top.deadline <= now {
                let Reverse(e) = guard.0.pop().expect("peeked");
                let _ = e.tx.send(());
            } else {
                break;
            }
        }
        match guard.0.peek().map(|Reverse(e)| e.deadline) {
            None => drop(w.cv.wait(guard).unwrap_or_else(|e| e.into_inner())),
            Some(next) if next > now + SPIN_WINDOW || spun >= SPIN_BUDGET => {
                // Sleep in the kernel until shortly before the deadline (or, over the spin
                // budget, until the deadline itself), then spin the rest of the way.
                let margin = if spun >= SPIN_BUDGET {
                    Duration::ZERO
                } else {
                    SPIN_WINDOW
                };
                let wait = next.saturating_duration_since(now + margin);
                drop(
                    w.cv.wait_timeout(guard, wait)
                        .unwrap_or_else(|e| e.into_inner()),
                );
            }
            Some(_) => {
                // Within the spin window: release the lock (so new, earlier deadlines can be
                // added) and check again in a moment.
                drop(guard);
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                std::thread::yield_now();
                spun += now.elapsed();
            }
        }
    }
}

/// Sleeps until `deadline` with sub-millisecond precision, and never returns before it (a
/// request dispatched at its intended instant must not leave early). Returns at once if it
/// has passed.
pub async fn sleep_until(deadline: Instant) {
    if deadline <= Instant::now() + SPIN_FLOOR {
        // Closer than a trip through the timer thread: spin the few microseconds here (on
        // the caller's worker thread, at most SPIN_FLOOR; no budget needed for that).
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
        return;
    }
    let (tx, rx) = oneshot::channel();
    let w = wheel();
    {
        let mut g = w.heap.lock().unwrap_or_else(|e| e.into_inner());
        let seq = g.1;
        g.1 += 1;
        let earliest = g.0.peek().map(|Reverse(e)| e.deadline);
        g.0.push(Reverse(Entry { deadline, seq, tx }));
        if earliest.is_none_or(|e| deadline < e) {
            w.cv.notify_one();
        }
    }
    let _ = rx.await;
}

/// Sleeps for `d` with sub-millisecond precision.
pub async fn sleep(d: Duration) {
    sleep_until(Instant::now() + d).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fires_in_deadline_order_and_never_early() {
        let start = Instant::now();
        let mut handles = Vec::new();
        for i in (1..=20u64).rev() {
            let deadline = start + Duration::from_micros(500 * i);
            handles.push(tokio::spawn(async move {
                sleep_until(deadline).await;
                (deadline, Instant::now())
            }));
        }
        for h in handles {
            let (deadline, woke) = h.await.unwrap();
            assert!(woke >= deadline, "woke early");
        }
    }

    #[tokio::test]
    async fn deadlines_closer_than_the_floor_are_not_early_either() {
        for i in 0..2_000u64 {
            let deadline = Instant::now() + Duration::from_nanos(i * 15 % 30_000);
            sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "returned early (deadline +{i})");
        }
    }

    #[tokio::test]
    async fn past_deadline_returns_immediately() {
        let past = Instant::now() - Duration::from_millis(5);
        sleep_until(past).await;
    }
}
