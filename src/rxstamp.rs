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
//! measured latency by more than the read's own delay. Where the kernel gives no stamp (not
//! Linux, or the option was refused), the time the read returned is used instead.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::provenance::Counters;

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
#[cfg(target_os = "linux")]
fn wait_until_stamping(mut tx: &std::net::TcpStream, rx: &std::net::TcpStream) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let deadline = Instant::now() + Duration::from_millis(100);
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 64];
    while Instant::now() < deadline {
        if tx.write_all(b".").is_err() {
            return;
        }
        // Loopback delivers inside the write, so the byte is already queued.
        if let Ok((_, Some(_))) = recv_stamped(rx.as_raw_fd(), &mut buf) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(not(target_os = "linux"))]
fn wait_until_stamping(_tx: &std::net::TcpStream, _rx: &std::net::TcpStream) {}

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
pub struct KernelStamped {
    tcp: TcpStream,
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
            KernelStamped {
                tcp,
                arrivals: arrivals.clone(),
                kernel,
                counters,
            },
            arrivals,
        )
    }

    /// Whether the kernel accepted the option (reads fall back to the read's own time if not).
    pub fn kernel_timestamps(&self) -> bool {
        self.kernel
    }
}

fn enable(tcp: &TcpStream) -> bool {
    keep_enabled();
    enable_fd(tcp)
}

#[cfg(target_os = "linux")]
fn enable_fd(socket: &impl std::os::fd::AsRawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: a plain setsockopt on a socket we own, with a correctly sized int.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn enable_fd<T>(_socket: &T) -> bool {
    false
}

/// One `recvmsg` into `buf`; returns the byte count and the kernel's `CLOCK_REALTIME` stamp
/// of the last segment consumed, when it gave one.
#[cfg(target_os = "linux")]
fn recv_stamped(
    fd: std::os::fd::RawFd,
    buf: &mut [std::mem::MaybeUninit<u8>],
) -> io::Result<(usize, Option<Duration>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one or two control messages; u64 elements keep it aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is a plain C struct; all-zero is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the iovec points at `buf` (valid for writes of its length) and the control
    // buffer at `control`; both outlive the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the kernel filled `msg`'s control area; CMSG_* walk it within its length, and
    // the timespec is read unaligned from a control message of the right level and type.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET
                && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
                && (*cmsg).cmsg_len as usize
                    >= libc::CMSG_LEN(std::mem::size_of::<libc::timespec>() as u32) as usize
            {
                let ts: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                if ts.tv_sec > 0 && ts.tv_nsec >= 0 {
                    stamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, stamp))
}

/// One non-blocking `sendmsg` of `bufs` on `tcp`'s socket: `Pending` when the kernel would
/// block (the caller's tokio poll registered the waker), never `SIGPIPE`.
#[cfg(target_os = "linux")]
fn send_now(tcp: &TcpStream, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
    use std::os::fd::AsRawFd;
    let bufs = &bufs[..bufs.len().min(libc::UIO_MAXIOV as usize)];
    // SAFETY: all-zero is a valid `msghdr` (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `iovec` on Unix; sendmsg only reads through it.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len() as _;
    loop {
        // SAFETY: `msg` points at `bufs`, which outlive the call; the socket is non-blocking.
        let n = unsafe {
            libc::sendmsg(
                tcp.as_raw_fd(),
                &msg,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Poll::Ready(Ok(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Poll::Pending,
            _ => return Poll::Ready(Err(e)),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn send_now(_: &TcpStream, _: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
    Poll::Pending
}

impl AsyncRead for KernelStamped {
    #[cfg(target_os = "linux")]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        use std::os::fd::AsRawFd;
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            std::task::ready!(this.tcp.poll_read_ready(cx))?;
            let fd = this.tcp.as_raw_fd();
            // SAFETY: recvmsg only writes initialised bytes into the unfilled part, and we mark
            // exactly the `n` it reports as initialised and filled.
            let unfilled = unsafe { buf.unfilled_mut() };
            match this
                .tcp
                .try_io(tokio::io::Interest::READABLE, || recv_stamped(fd, unfilled))
            {
                Ok((n, stamp)) => {
                    // SAFETY: the kernel wrote `n` bytes into the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    if n > 0 {
                        let at = match stamp {
                            Some(s) => crate::kclock::realtime_to_instant(s),
                            None => {
                                if this.kernel {
                                    this.counters.unstamped_read();
                                }
                                Instant::now()
                            }
                        };
                        this.arrivals.note(at);
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.tcp).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.arrivals.note(Instant::now());
        }
        r
    }
}

/// Writes go to tokio first; where tokio answers `Pending`, the socket itself is asked
/// (non-blocking). tokio knows a socket is writable only once its reactor has reported it, so
/// on a socket it has not seen an event for yet (every new connection: see
/// [`crate::transport::tcp`]) its first write would wait for a trip through the reactor and a
/// task wake-up, with the request unsent: tens of microseconds on an idle machine and
/// milliseconds on a busy one, in the request's TTFT. The kernel's answer is the truth; a
/// `Pending` after it (a full send buffer) still has tokio's waker registered.
impl AsyncWrite for KernelStamped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.tcp).poll_write(cx, buf) {
            Poll::Pending => send_now(&this.tcp, &[io::IoSlice::new(buf)]),
            r => r,
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs) {
            Poll::Pending => send_now(&this.tcp, bufs),
            r => r,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
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
        #[cfg(target_os = "linux")]
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
}
