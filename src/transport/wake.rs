//! A turn's side futures (its cancel and its timer), polled when one of them woke the task
//! rather than on every wake-up.
//!
//! Owns: knowing whether a side future may be ready: they are polled with a waker of their
//! own, which notes that it was woken and then wakes the task.
//! Does not own: the futures, or what their completion means (the turn that holds them).
//!
//! Why: a turn wakes once per chunk, for its socket. Polling the cancel there took the
//! cancellation token's lock (tokio-util's `is_cancelled`) and polled its `Notified`, and
//! polling the timer went through tokio's timer entry: about a tenth of a microsecond a
//! chunk, spent finding out that nothing had happened (docs/measurements.md, session 37).
//! A registered future keeps its waker until it fires, so it needs no poll until then; one
//! that was changed (a timer reset) is polled again ([`Sides::due`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The side futures' own waker.
struct Flag {
    /// Set when a side future woke (or may have to be polled again); taken by each poll.
    due: AtomicBool,
    /// The task to wake.
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted before the task runs, so its next poll sees it.
        self.due.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// One turn's side futures: polled at the first call, after [`Sides::due`], and after one
/// of them woke; otherwise not at all.
pub struct Sides {
    flag: Arc<Flag>,
    waker: Waker,
}

impl Default for Sides {
    fn default() -> Self {
        Self::new()
    }
}

impl Sides {
    /// Side futures not yet polled (the first [`Sides::poll`] polls them).
    pub fn new() -> Self {
        let flag = Arc::new(Flag {
            due: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        let waker = Waker::from(flag.clone());
        Sides { flag, waker }
    }

    /// Marks the side futures as due: one was changed (a timer reset) and must be polled
    /// again to be registered.
    pub fn due(&self) {
        self.flag.due.store(true, Ordering::Release);
    }

    /// Runs `poll_sides` with the sides' waker when they are due, else returns `Pending`:
    /// their wake-ups reach the task through that waker, which notes them first.
    pub fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll_sides: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        // The task's waker first: a side that fires from here on wakes it.
        self.flag.task.register(cx.waker());
        if !self.flag.due.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        poll_sides(&mut Context::from_waker(&self.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::{poll_fn, Future};
    use std::time::Duration;

    /// Which side completed, if one did.
    fn which(
        cancelled: std::pin::Pin<&mut tokio_util::sync::WaitForCancellationFuture<'_>>,
        timer: std::pin::Pin<&mut tokio::time::Sleep>,
        cx: &mut Context<'_>,
    ) -> Poll<&'static str> {
        if cancelled.poll(cx).is_ready() {
            return Poll::Ready("cancel");
        }
        timer.poll(cx).map(|()| "timer")
    }

    /// A turn-like loop: a never-ready "socket" beside a cancel and a timer. The sides are
    /// polled once up front, not again on spurious wake-ups, and each completion is seen.
    #[tokio::test]
    async fn the_sides_are_polled_once_then_only_when_they_woke() {
        let cancel = tokio_util::sync::CancellationToken::new();
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        let timer = tokio::time::sleep(Duration::from_millis(20));
        tokio::pin!(timer);
        let mut sides = Sides::new();
        let mut polls = 0;
        let mut wakes = 0;
        let fired = poll_fn(|cx| {
            wakes += 1;
            if wakes < 5 {
                // Spurious wake-ups of the task: the sides are not polled for them.
                cx.waker().wake_by_ref();
            }
            sides.poll(cx, |scx| {
                polls += 1;
                which(cancelled.as_mut(), timer.as_mut(), scx)
            })
        })
        .await;
        assert_eq!(fired, "timer");
        assert_eq!(
            polls, 2,
            "once up front, once when the timer woke ({wakes} wake-ups)"
        );
        assert!(wakes >= 5);

        // A reset timer is polled again once marked due; a cancel wakes the task at once.
        timer
            .as_mut()
            .reset((crate::clock::now() + Duration::from_secs(60)).into());
        sides.due();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            c.cancel();
        });
        let t0 = crate::clock::now();
        let fired =
            poll_fn(|cx| sides.poll(cx, |scx| which(cancelled.as_mut(), timer.as_mut(), scx)))
                .await;
        assert_eq!(fired, "cancel");
        assert!(crate::clock::since(t0) < Duration::from_secs(30));
    }
}
