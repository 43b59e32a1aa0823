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
//! each due deadline. A caller that need not be exact (the self-watch sampler) asks for an
//! unspun deadline instead: it sits on a heap of its own, and the thread wakes for it from
//! the kernel without spinning. `cargo run --release --example timer_precision` measures the lateness
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

/// The pending deadlines: those the thread spins before (`spun`) and those it wakes for in
/// the kernel (`unspun`), each a min-heap; `seq` breaks ties in arrival order; `sleep` is
/// what the thread is doing, so that a caller wakes it only when its deadline comes first.
struct Heaps {
    spun: BinaryHeap<Reverse<Entry>>,
    unspun: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    sleep: Sleep,
}

/// The timer thread's state, as a caller adding a deadline sees it.
#[derive(Clone, Copy)]
enum Sleep {
    /// Running or spinning: it looks at the heaps again before it sleeps.
    Awake,
    /// Asleep in the kernel until this instant.
    Until(Instant),
    /// Asleep with nothing pending.
    Forever,
}

impl Heaps {
    /// Completes every deadline at or before `now`, in both heaps.
    fn fire(&mut self, now: Instant) {
        for heap in [&mut self.spun, &mut self.unspun] {
            while heap.peek().is_some_and(|Reverse(e)| e.deadline <= now) {
                let Reverse(e) = heap.pop().expect("peeked");
                let _ = e.tx.send(());
            }
        }
    }

    /// When the thread must be awake next: `margin` before the earliest spun deadline (the
    /// spin window, or zero over the spin budget), or at the earliest unspun one, whichever
    /// comes first; `None` with nothing pending.
    fn next(&self, margin: Duration) -> Option<Instant> {
        let spun = self
            .spun
            .peek()
            .map(|Reverse(e)| wake_for(e.deadline, margin));
        let unspun = self.unspun.peek().map(|Reverse(e)| e.deadline);
        match (spun, unspun) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// `margin` before `deadline` (the deadline itself where the clock cannot go that far back).
fn wake_for(deadline: Instant, margin: Duration) -> Instant {
    deadline.checked_sub(margin).unwrap_or(deadline)
}

struct Wheel {
    heaps: Mutex<Heaps>,
    cv: Condvar,
}

fn wheel() -> &'static Wheel {
    static WHEEL: OnceLock<&'static Wheel> = OnceLock::new();
    WHEEL.get_or_init(|| {
        let w: &'static Wheel = Box::leak(Box::new(Wheel {
            heaps: Mutex::new(Heaps {
                spun: BinaryHeap::new(),
                unspun: BinaryHeap::new(),
                seq: 0,
                sleep: Sleep::Awake,
            }),
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
        let mut guard = w.heaps.lock().unwrap_or_else(|e| e.into_inner());
        guard.sleep = Sleep::Awake;
        let now = Instant::now();
        if now.duration_since(period_start) > BUDGET_PERIOD {
            period_start = now;
            spun = Duration::ZERO;
        }
        guard.fire(now);
        // Sleep in the kernel until shortly before the next spun deadline (or, over the
        // spin budget, until the deadline itself) or until the next unspun one.
        let margin = if spun >= SPIN_BUDGET {
            Duration::ZERO
        } else {
            SPIN_WINDOW
        };
        match guard.next(margin) {
            None => {
                guard.sleep = Sleep::Forever;
                drop(w.cv.wait(guard).unwrap_or_else(|e| e.into_inner()));
            }
            Some(wake) if wake > now => {
                guard.sleep = Sleep::Until(wake);
                drop(
                    w.cv.wait_timeout(guard, wake - now)
                        .unwrap_or_else(|e| e.into_inner()),
                );
            }
            Some(_) => {
                // Within a spun deadline's window (every due deadline has fired, so the one
                // at hand is spun): release the lock, so new, earlier deadlines can be
                // added, and check again in a moment.
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
    wait_on_thread(deadline, true).await
}

/// Sleeps until `deadline`, woken by the timer thread from the kernel, without the spin
/// before it: tens of µs later than [`sleep_until`] (the futex's wake-up), for none of its
/// CPU. For a sampler that wakes often and need not be exact; never returns before
/// `deadline`.
pub async fn sleep_until_unspun(deadline: Instant) {
    if deadline <= Instant::now() {
        return;
    }
    wait_on_thread(deadline, false).await
}

/// Puts `deadline` on the timer thread's heap (the spun one or the other), wakes the thread
/// if it sleeps past the instant this deadline needs it, and waits to be fired.
async fn wait_on_thread(deadline: Instant, spin: bool) {
    let (tx, rx) = oneshot::channel();
    let w = wheel();
    {
        let mut g = w.heaps.lock().unwrap_or_else(|e| e.into_inner());
        let seq = g.seq;
        g.seq += 1;
        let entry = Reverse(Entry { deadline, seq, tx });
        let needed = if spin {
            g.spun.push(entry);
            wake_for(deadline, SPIN_WINDOW)
        } else {
            g.unspun.push(entry);
            deadline
        };
        let wake = match g.sleep {
            Sleep::Awake => false,
            Sleep::Until(at) => needed < at,
            Sleep::Forever => true,
        };
        if wake {
            g.sleep = Sleep::Awake;
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unspun_deadlines_fire_beside_spun_ones_and_never_early() {
        // Interleaved, out of order, some within each other's spin window: an unspun
        // deadline added while the thread sleeps toward a later spun one (and the reverse)
        // must wake it, or it fires late by the gap.
        let start = Instant::now() + Duration::from_millis(2);
        let mut handles = Vec::new();
        for i in (0..60u64).rev() {
            let deadline = start + Duration::from_micros(97 * i);
            let spin = i % 3 != 0;
            handles.push(tokio::spawn(async move {
                if spin {
                    sleep_until(deadline).await;
                } else {
                    sleep_until_unspun(deadline).await;
                }
                (deadline, Instant::now())
            }));
        }
        // One far-off spun deadline first, then an unspun one well before it: the thread,
        // asleep toward the first, must be woken for the second.
        let far = Instant::now() + Duration::from_millis(400);
        let far_task = tokio::spawn(async move { sleep_until(far).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let near = Instant::now() + Duration::from_millis(5);
        sleep_until_unspun(near).await;
        let woke = Instant::now();
        assert!(woke >= near, "woke early");
        assert!(
            woke < far,
            "the unspun deadline waited for the spun one after it"
        );
        for h in handles {
            let (deadline, woke) = h.await.unwrap();
            assert!(woke >= deadline, "woke early");
        }
        far_task.await.unwrap();
        assert!(Instant::now() >= far);
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
