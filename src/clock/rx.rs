//! When received bytes arrived, as the kernel saw it.
//!
//! Owns: asking the kernel to timestamp every received TCP segment (`SO_TIMESTAMPNS`), reading
//! those timestamps with each `recvmsg`, and publishing the arrival time of the latest read
//! ([`Arrivals`]) to the layers above (the link emulator, the transport's byte meter).
//! Does not own: what the bytes mean, or which chunk they belong to.
//!
//! A timestamp taken by the reading task when its read returns includes the time the task
//! waited to be scheduled: on a busy 2-core machine that is tens of microseconds typically
//! and a scheduler time slice (3–4 ms) at worst, and it grows with the harness's own load.
//! The kernel stamps a segment when it is received, before any task is woken, so the latency
//! figures do not depend on how busy the harness is. For TCP, `recvmsg` reports the stamp of
//! the last segment it consumed, so the stamp of a read is never earlier than the arrival of
//! any byte it returned (a chunk is never stamped early), and it is never later than the read.
//!
//! The kernel's stamp is `CLOCK_REALTIME`; it is moved to the monotonic clock by its age at
//! the moment of the read (both clocks read back to back), so a wall-clock step cannot move a
//! measured latency by more than the read's own delay. Where the kernel gives no stamp (the
//! option was refused), the time the read returned is used instead. The system calls are
//! [`crate::sys::stamp`]'s.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::ReadBuf;
use tokio::net::TcpStream;

use super::tap::{Tap, Tapped};
use crate::provenance::Counters;
use crate::sys::stamp;

/// Keeps the kernel's receive stamping switched on for the life of the process.
///
/// Linux stamps received packets only while some socket asks for it, and it switches the
/// stamping on asynchronously (from a work queue) when the first socket asks, and off again
/// when the last one closes. Without a socket that stays open, the first segments of each
/// new connection (after a quiet moment with none open, e.g. `http`'s connection per
/// request) could arrive unstamped and fall back to the read time. This opens one idle
/// loopback TCP pair with the option set, before the first connection, and returns once a
/// byte sent over it comes back stamped (at most 100 ms, once per process).
pub fn keep_enabled() {
    type Pair = (std::net::TcpStream, std::net::TcpStream);
    static KEEPER: OnceLock<Option<Pair>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
        let rx = std::net::TcpStream::connect(listener.local_addr().ok()?).ok()?;
        let (tx, _) = listener.accept().ok()?;
        if !enable_fd(&rx) {
            return None;
        }
        wait_until_stamping(&tx, &rx);
        Some((tx, rx))
    });
}

/// Sends single bytes over the pair until one arrives with a kernel stamp.
fn wait_until_stamping(mut tx: &std::net::TcpStream, rx: &std::net::TcpStream) {
    use std::io::Write;
    let deadline = Instant::now() + Duration::from_millis(100);
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 64];
    while Instant::now() < deadline {
        if tx.write_all(b".").is_err() {
            return;
        }
        // Loopback delivers inside the write, so the byte is already queued.
        if let Ok((_, Some(_))) = stamp::recv_stamped(rx.as_raw_fd(), &mut buf) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The instant all [`Arrivals`] count from.
fn anchor() -> Instant {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    *ANCHOR.get_or_init(Instant::now)
}

/// The arrival time of the latest read on one byte stream, shared with the layers above it.
#[derive(Debug, Clone, Default)]
pub struct Arrivals(Arc<AtomicU64>);

impl Arrivals {
    /// No arrival yet.
    pub fn new() -> Self {
        anchor();
        Self::default()
    }

    /// Records that the latest read's bytes arrived at `at`.
    pub fn note(&self, at: Instant) {
        // +1 so that 0 keeps meaning "none" even for an arrival at the anchor itself.
        let ns = at.saturating_duration_since(anchor()).as_nanos() as u64 + 1;
        self.0.store(ns, Ordering::Release);
    }

    /// The arrival time of the latest read, if any.
    pub fn latest(&self) -> Option<Instant> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            ns => Some(anchor() + Duration::from_nanos(ns - 1)),
        }
    }
}

/// A TCP stream whose reads carry the kernel's receive timestamp.
pub type KernelStamped = Tapped<Receive>;

/// The tap of a [`KernelStamped`] stream: reads with `recvmsg`, writes pass through.
pub struct Receive {
    arrivals: Arrivals,
    kernel: bool,
    counters: Arc<Counters>,
}

impl KernelStamped {
    /// Turns on receive timestamps for `tcp`. The returned [`Arrivals`] follows its reads;
    /// the connection and its unstamped reads are counted in the run's `counters`.
    pub fn new(tcp: TcpStream, counters: Arc<Counters>) -> (Self, Arrivals) {
        let kernel = enable(&tcp);
        counters.connection(kernel);
        let arrivals = Arrivals::new();
        (
            Tapped::wrap(
                tcp,
                Receive {
                    arrivals: arrivals.clone(),
                    kernel,
                    counters,
                },
            ),
            arrivals,
        )
    }

    /// Whether the kernel accepted the option (reads fall back to the read's own time if not).
    pub fn kernel_timestamps(&self) -> bool {
        self.tap().kernel
    }
}

fn enable(tcp: &TcpStream) -> bool {
    keep_enabled();
    enable_fd(tcp)
}

fn enable_fd(socket: &impl AsRawFd) -> bool {
    stamp::enable_receive(socket.as_raw_fd())
}

/// A write straight to `tcp`'s socket (see the [`Tap`] impl of [`Receive`]).
fn send_now(tcp: &TcpStream, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
    match crate::sys::socket::send_nonblocking(tcp.as_raw_fd(), bufs) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        r => Poll::Ready(r),
    }
}

/// Writes go to tokio first; where tokio answers `Pending`, the socket itself is asked
/// (non-blocking). tokio knows a socket is writable only once its reactor has reported it, so
/// on a socket it has not seen an event for yet (every new connection: see
/// [`crate::transport::tcp`]) its first write would wait for a trip through the reactor and a
/// task wake-up with the request unsent: tens of microseconds on an idle machine and
/// milliseconds on a busy one, all in the request's TTFT. The kernel's answer is the truth; a
/// `Pending` after it (a full send buffer) still has tokio's waker registered.
impl Tap for Receive {
    type Io = TcpStream;

    fn poll_write(
        &mut self,
        tcp: &mut TcpStream,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        use tokio::io::AsyncWrite;
        match std::pin::Pin::new(&mut *tcp).poll_write(cx, buf) {
            Poll::Pending => send_now(tcp, &[io::IoSlice::new(buf)]),
            r => r,
        }
    }

    fn poll_write_vectored(
        &mut self,
        tcp: &mut TcpStream,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        use tokio::io::AsyncWrite;
        match std::pin::Pin::new(&mut *tcp).poll_write_vectored(cx, bufs) {
            Poll::Pending => send_now(tcp, bufs),
            r => r,
        }
    }

    fn poll_read(
        &mut self,
        tcp: &mut TcpStream,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            std::task::ready!(tcp.poll_read_ready(cx))?;
            let fd = tcp.as_raw_fd();
            // SAFETY: recvmsg only writes initialised bytes into the unfilled part, and we mark
            // exactly the `n` it reports as initialised and filled.
            let unfilled = unsafe { buf.unfilled_mut() };
            let room = unfilled.len();
            // A short read emptied the socket. Its readiness is cleared in the same `try_io`
            // as the read (the closure answers `WouldBlock` and hands the bytes out on the
            // side), so tokio clears it with the readiness tick it saw *before* the read, as
            // its own TcpStream does: an edge the reactor records after the read (new bytes,
            // possibly on another worker thread) has a newer tick and survives. Clearing in
            // a second `try_io` after the read could erase that newer edge and leave the
            // bytes unread until more arrive. It saves the `recvmsg` that would otherwise
            // answer EAGAIN after every read.
            let mut short = None;
            let read = tcp.try_io(tokio::io::Interest::READABLE, || {
                let (n, stamp) = stamp::recv_stamped(fd, unfilled)?;
                if n > 0 && n < room {
                    short = Some((n, stamp));
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok((n, stamp))
            });
            match short.map_or(read, Ok) {
                Ok((n, stamp)) => {
                    // SAFETY: the kernel wrote `n` bytes into the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    if n > 0 {
                        self.counters.read();
                        let at = match stamp {
                            Some(s) => super::realtime_to_instant(s),
                            None => {
                                if self.kernel {
                                    self.counters.unstamped_read();
                                }
                                Instant::now()
                            }
                        };
                        self.arrivals.note(at);
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes that sat in the socket for 30 ms before the read are stamped when they arrived,
    /// not when they were read.
    #[tokio::test]
    async fn a_late_read_is_stamped_with_the_arrival_time() {
        // As a run does before its first connection: returns once the kernel stamps.
        keep_enabled();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (mut client, arrivals) = KernelStamped::new(client, Default::default());
        assert!(arrivals.latest().is_none());

        server.write_all(b"first").await.unwrap();
        let written = Instant::now();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut buf = [0u8; 64];
        let n = client.read(&mut buf).await.unwrap();
        let read_at = Instant::now();
        assert_eq!(&buf[..n], b"first");
        let at = arrivals.latest().expect("an arrival");
        assert!(at <= read_at, "an arrival after the read returned");
        assert!(client.kernel_timestamps(), "SO_TIMESTAMPNS refused");
        if client.kernel_timestamps() {
            // Stamped at the write (loopback delivers inside the write), not 30 ms later.
            let off = if at >= written {
                at - written
            } else {
                written - at
            };
            assert!(
                off < Duration::from_millis(5),
                "stamp {off:?} from the write"
            );
        } else {
            assert!(read_at - at < Duration::from_millis(5));
        }

        // The next read follows the next segment.
        server.write_all(b"second").await.unwrap();
        let n = client.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"second");
        assert!(arrivals.latest().unwrap() > at);

        // Writes pass through; end of stream reads as 0 bytes.
        client.write_all(b"ping").await.unwrap();
        let n = server.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"ping");
        drop(server);
        assert_eq!(client.read(&mut buf).await.unwrap(), 0);
    }

    /// A short read clears the socket's readiness; bytes that land while the reader handles
    /// that read (the reactor may record their edge on another worker thread) must still
    /// wake it. Each round the server writes two pieces back to back and waits for the
    /// reader to acknowledge both: a lost wake-up leaves the second piece unread and the
    /// round stuck until the timeout. (The narrowest form of that race, an edge recorded
    /// between the read and a clear done after it, did not show in 3 × 3,000 rounds with
    /// such a clear; the clear now happens inside the read's own `try_io`.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bytes_landing_after_a_short_read_still_wake_the_reader() {
        const ROUNDS: usize = 3_000;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        client.set_nodelay(true).unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        server.set_nodelay(true).unwrap();
        let (mut client, _) = KernelStamped::new(client, Default::default());
        let writer = tokio::spawn(async move {
            let mut ack = [0u8; 1];
            for _ in 0..ROUNDS {
                server.write_all(b"first piece;").await.unwrap();
                for _ in 0..200 {
                    std::hint::spin_loop();
                }
                server.write_all(b"second piece").await.unwrap();
                server.read_exact(&mut ack).await.unwrap();
            }
        });
        let reader = async move {
            let mut buf = [0u8; 4096];
            for round in 0..ROUNDS {
                let mut got = 0;
                while got < 24 {
                    let n = client.read(&mut buf).await.unwrap();
                    assert!(n > 0, "end of stream in round {round}");
                    got += n;
                }
                assert_eq!(got, 24, "round {round}");
                client.write_all(b"k").await.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(60), reader)
            .await
            .expect("a round stuck: the reader was not woken for bytes in its socket");
        writer.await.unwrap();
    }
}
