//! User-space link emulation: make a loopback path cost what a WAN path costs.
//!
//! Owns: the `--link` spec (`rtt=40ms,jitter=2ms,bandwidth=100mbit`), and a delay line that
//! wraps any byte stream so that every byte reaches the other side one one-way delay
//! (RTT/2, plus jitter, plus serialisation at the link bandwidth) after it was written.
//! Does not own: timestamps (callers take them), protocols, or sockets.
//!
//! Kernel netem is not available on these machines, so the emulation lives in user space and
//! is applied on one side of the connection:
//!
//! * **Client side (the embedded default of `spark-bench run`).** The client wraps its own
//!   socket. Bytes it writes are held for RTT/2 before they reach the kernel; bytes the server
//!   sends are held for RTT/2 before the client reads them. A new TCP connection additionally
//!   costs one RTT after `connect()` returns ([`Link::connect_delay`]), which stands for the
//!   SYN/SYN-ACK exchange the loopback kernel completes instantly. Every phase then costs what
//!   it costs on a real path: TCP connect 1 RTT, TLS 1.3 handshake 1 RTT, WebSocket upgrade
//!   1 RTT, request → first byte 1 RTT + server time.
//! * **Server side (`spark-bench serve --link`).** The simulator wraps each accepted socket the
//!   same way, so any third-party client sees the TLS handshake, the upgrade and every request
//!   cost one RTT more. What it cannot emulate is the client's TCP handshake: the kernel answers
//!   the SYN before the simulator ever sees the connection, so a third-party client's TCP
//!   connect still takes loopback time (~50 µs) instead of 1 RTT.
//!
//! Apply the link on one side only; on both, the delays add up.
//!
//! Byte order is preserved (a segment is never delivered before an earlier one, as on TCP),
//! so jitter can delay a segment but never reorder it. A reset or read error on the real
//! socket reaches the wrapped side as end-of-stream, which callers treat as a truncated stream.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::rx::{Arrivals, KernelStamped};
use crate::clock::tap::{Tap, Tapped};
use crate::clock::timer;
use crate::provenance::Counters;
use crate::rng::Rng;

/// Any async byte stream that can be boxed and moved between tasks.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A boxed byte stream.
pub type BoxIo = Pin<Box<dyn Io>>;

/// Link emulation parameters. `Link::default()` is a perfect link (no emulation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Link {
    /// Round-trip time added to every exchange.
    #[serde(with = "crate::units::serde_duration")]
    pub rtt: Duration,
    /// Each one-way segment is delayed by a uniformly random extra amount in `[0, jitter]`.
    #[serde(with = "crate::units::serde_duration")]
    pub jitter: Duration,
    /// Link bandwidth in bits per second, per direction; `None` is unlimited.
    pub bandwidth_bps: Option<u64>,
}

/// A `--link` value that could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("invalid link spec {spec:?}: {reason}. Expected e.g. \"rtt=40ms,jitter=2ms,bandwidth=100mbit\" or \"none\"")]
pub struct LinkParseError {
    spec: String,
    reason: String,
}

impl FromStr for Link {
    type Err = LinkParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| LinkParseError {
            spec: s.to_string(),
            reason,
        };
        let mut link = Link::default();
        let trimmed = s.trim();
        if trimmed.is_empty() || trimmed == "none" || trimmed == "off" {
            return Ok(link);
        }
        for part in trimmed.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| err(format!("{part:?} is not key=value")))?;
            let v = v.trim();
            match k.trim() {
                "rtt" => link.rtt = parse_duration(v).map_err(err)?,
                "jitter" => link.jitter = parse_duration(v).map_err(err)?,
                "bandwidth" | "bw" => link.bandwidth_bps = Some(parse_bandwidth(v).map_err(err)?),
                other => {
                    return Err(err(format!(
                        "unknown key {other:?} (known: rtt, jitter, bandwidth)"
                    )))
                }
            }
        }
        Ok(link)
    }
}

/// No emulated delay may exceed this (a larger one is a typo, and would overflow deadlines).
const MAX_LINK_DELAY: Duration = Duration::from_secs(3600);

fn parse_duration(v: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(v).map_err(|e| format!("bad duration {v:?}: {e}"))?;
    if d > MAX_LINK_DELAY {
        return Err(format!("{v:?} is longer than the 1h a link may delay"));
    }
    Ok(d)
}

fn parse_bandwidth(v: &str) -> Result<u64, String> {
    let lower = v.to_ascii_lowercase();
    let units: [(&str, f64); 8] = [
        ("gbit", 1e9),
        ("mbit", 1e6),
        ("kbit", 1e3),
        ("bit", 1.0),
        ("gbps", 1e9),
        ("mbps", 1e6),
        ("kbps", 1e3),
        ("bps", 1.0),
    ];
    for (suffix, mult) in units {
        if let Some(num) = lower.strip_suffix(suffix) {
            let n: f64 = num
                .trim()
                .parse()
                .map_err(|_| format!("bad bandwidth {v:?}"))?;
            if !(n > 0.0 && n.is_finite()) {
                return Err(format!("bandwidth must be positive, got {v:?}"));
            }
            let bps = (n * mult) as u64;
            if bps == 0 {
                return Err(format!("bandwidth must be at least 1bit, got {v:?}"));
            }
            return Ok(bps);
        }
    }
    Err(format!(
        "bad bandwidth {v:?}: use a unit such as 100mbit, 1gbit or 500kbit"
    ))
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_none() {
            return f.write_str("none");
        }
        write!(f, "rtt={}", crate::units::fmt_duration_spec(self.rtt))?;
        if !self.jitter.is_zero() {
            write!(
                f,
                ",jitter={}",
                crate::units::fmt_duration_spec(self.jitter)
            )?;
        }
        if let Some(bw) = self.bandwidth_bps {
            // Exact, so the spec reads back as the same link (1500 bit/s was "1kbit").
            if bw % 1_000_000 == 0 {
                write!(f, ",bandwidth={}mbit", bw / 1_000_000)?;
            } else if bw % 1_000 == 0 {
                write!(f, ",bandwidth={}kbit", bw / 1_000)?;
            } else {
                write!(f, ",bandwidth={bw}bit")?;
            }
        }
        Ok(())
    }
}

impl Link {
    /// True when the link adds nothing, so streams need no wrapping.
    pub fn is_none(&self) -> bool {
        self.rtt.is_zero() && self.jitter.is_zero() && self.bandwidth_bps.is_none()
    }

    /// The delay before a fresh TCP connection can carry data: one RTT (SYN, SYN-ACK).
    /// Client side only; call it right after `connect()` returns.
    pub async fn connect_delay(&self) {
        if !self.rtt.is_zero() {
            timer::sleep(self.rtt).await;
        }
    }

    /// Wraps `io` in the delay line, both directions delayed by RTT/2 (+ jitter, + bandwidth).
    /// A perfect link returns `io` unchanged. `seed` makes the jitter reproducible.
    ///
    /// `below` is the arrival clock of `io`'s reads (the kernel's receive stamps, see
    /// [`crate::clock::rx`]), used as the instant inbound bytes entered the emulated wire; the
    /// returned [`Arrivals`] gives, for the wrapped side's reads, the instant the bytes arrive
    /// on the emulated path (entry + one-way delay + jitter + serialisation). A perfect link
    /// passes `below` through.
    pub fn wrap(&self, io: BoxIo, seed: u64, below: Option<Arrivals>) -> (BoxIo, Option<Arrivals>) {
        if self.is_none() {
            return (io, below);
        }
        self.spawn_pumps(&tokio::runtime::Handle::current(), io, seed, below)
    }

    /// Wraps a client's freshly connected TCP stream: its reads carry the kernel's receive
    /// stamps ([`KernelStamped`], counted in the run's counters), and with an emulated link
    /// the delay line runs on the `emulator`'s own thread (its own runtime and socket
    /// reactor), so that the harness's and the simulator's tasks never delay the emulator's
    /// reads. Returns the stream to use and the arrival clock of its reads.
    pub fn wrap_tcp(
        &self,
        emulator: &Emulator,
        tcp: TcpStream,
        seed: u64,
    ) -> io::Result<(BoxIo, Arrivals)> {
        if self.is_none() {
            let (tcp, arrivals) = KernelStamped::new(tcp, emulator.counters.clone());
            return Ok((Box::pin(tcp), arrivals));
        }
        let rt = &emulator.runtime()?;
        let std = tcp.into_std()?;
        let tcp = {
            // Registers the socket with the link thread's reactor.
            let _entered = rt.enter();
            TcpStream::from_std(std)?
        };
        let (tcp, kernel) = KernelStamped::new(tcp, emulator.counters.clone());
        let (io, arrivals) = self.spawn_pumps(rt, Box::pin(tcp), seed, Some(kernel));
        Ok((io, arrivals.unwrap_or_default()))
    }

    fn spawn_pumps(
        &self,
        rt: &tokio::runtime::Handle,
        io: BoxIo,
        seed: u64,
        below: Option<Arrivals>,
    ) -> (BoxIo, Option<Arrivals>) {
        // The app side talks to `near`: it writes into a pipe the outbound pump drains, and
        // reads the inbound segments one at a time, each stamped with its emulated arrival.
        let (near_out, far) = tokio::io::duplex(256 * 1024);
        let inbound = Arc::new(Inbound::default());
        let arrivals = Arrivals::new();
        let near = NearIo::wrap(
            near_out,
            Near {
                inbound: inbound.clone(),
                arrivals: arrivals.clone(),
            },
        );
        let (sock_r, sock_w) = tokio::io::split(io);
        let one_way = self.rtt / 2;
        let pumps = [
            spawn_direction(
                far,
                Dest::Stream(sock_w),
                one_way,
                *self,
                seed ^ 0x5eed_0001,
                None,
            ),
            spawn_direction(
                sock_r,
                Dest::<DuplexStream>::Near(inbound),
                one_way,
                *self,
                seed ^ 0x5eed_0002,
                below,
            ),
        ];
        for pump in pumps {
            for task in pump {
                rt.spawn(task);
            }
        }
        (Box::pin(near), Some(arrivals))
    }
}

/// The client side's link emulation for one run (or one standalone connector): the runtime
/// of its delay lines, one worker thread started on first use and stopped when the emulator
/// is dropped; the run's provenance counters that its stamped sockets add to; and the
/// numbering of the run's connections. Every connection of a run goes through it (one
/// delay-line thread per run, as the cells start together).
#[derive(Default)]
pub struct Emulator {
    /// Built under this lock, so concurrent first connections cannot race to build two (a
    /// spare runtime could not even be dropped there: this is called from async code).
    rt: Mutex<Option<tokio::runtime::Runtime>>,
    counters: Arc<Counters>,
    /// Connections numbered so far.
    dialed: AtomicU64,
}

impl Emulator {
    /// An emulator whose sockets count into `counters`.
    pub fn new(counters: Arc<Counters>) -> Self {
        Emulator {
            rt: Mutex::new(None),
            counters,
            dialed: AtomicU64::new(0),
        }
    }

    /// A fresh id for a new connection, unique within the run (the first is 1).
    pub fn next_connection_id(&self) -> u64 {
        self.dialed.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The counters its connections add to.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// The delay lines' runtime, started on first use. Its threads ask for real-time
    /// priority when the process wants it ([`crate::priority`]), and a refusal is counted.
    fn runtime(&self) -> io::Result<tokio::runtime::Handle> {
        let mut slot = self.rt.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rt) = slot.as_ref() {
            return Ok(rt.handle().clone());
        }
        let counters = self.counters.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("spark-bench-link")
            .on_thread_start(move || {
                if crate::priority::on_emulator_thread_start() == Some(false) {
                    counters.realtime_refused();
                }
            })
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        *slot = Some(rt);
        Ok(handle)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which async code may not do; its tasks (the delay
        // lines of connections already closed) are dropped without waiting.
        if let Some(rt) = self.rt.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            rt.shutdown_background();
        }
    }
}

/// Where a delay line delivers: a byte stream (outbound, and the server side), or the
/// wrapped side's inbound queue.
enum Dest<W> {
    Stream(W),
    Near(Arc<Inbound>),
}

impl<W: AsyncWrite + Unpin> Dest<W> {
    /// Delivers one segment due at `due`; false once the other side is gone.
    async fn deliver(&mut self, due: Instant, bytes: Bytes) -> bool {
        match self {
            Dest::Stream(w) => w.write_all(&bytes).await.is_ok() && w.flush().await.is_ok(),
            Dest::Near(q) => q.push(due, bytes),
        }
    }

    async fn close(&mut self) {
        match self {
            Dest::Stream(w) => {
                let _ = w.shutdown().await;
            }
            Dest::Near(q) => q.close(),
        }
    }
}

/// Segments delivered to the wrapped side and not read yet, with their emulated arrivals.
#[derive(Default)]
struct Inbound {
    state: Mutex<InboundState>,
    /// Cancelled when the wrapped side is dropped.
    gone: CancellationToken,
}

#[derive(Default)]
struct InboundState {
    segments: VecDeque<(Instant, Bytes)>,
    eof: bool,
    reader_gone: bool,
    waker: Option<Waker>,
}

impl Inbound {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboundState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, due: Instant, bytes: Bytes) -> bool {
        let mut st = self.lock();
        if st.reader_gone {
            return false;
        }
        st.segments.push_back((due, bytes));
        if let Some(w) = st.waker.take() {
            w.wake();
        }
        true
    }

    fn close(&self) {
        let mut st = self.lock();
        st.eof = true;
        if let Some(w) = st.waker.take() {
            w.wake();
        }
    }
}

/// The wrapped side of a delay line. A read returns bytes of one segment at most and notes
/// that segment's emulated arrival, so a layer above that reads late (several segments
/// waiting) still learns each segment's own arrival: TLS pulls the segments one at a time
/// until a record is complete, and the plaintext is stamped with the segment that completed
/// it, not with the latest one waiting.
type NearIo = Tapped<Near>;

/// The tap of a [`NearIo`]: reads come from the inbound segments, writes go into the pipe
/// to the outbound pump (each through `poll_write`, as before the tap: no vectored writes).
struct Near {
    inbound: Arc<Inbound>,
    arrivals: Arrivals,
}

impl Tap for Near {
    type Io = DuplexStream;

    const VECTORED: bool = false;

    fn on_drop(&mut self, _out: &mut DuplexStream) {
        {
            let mut st = self.inbound.lock();
            st.reader_gone = true;
            st.segments.clear();
        }
        self.inbound.gone.cancel();
    }

    fn poll_read(
        &mut self,
        _out: &mut DuplexStream,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut st = self.inbound.lock();
        if let Some((due, bytes)) = st.segments.front_mut() {
            let n = bytes.len().min(buf.remaining());
            buf.put_slice(&bytes[..n]);
            let due = *due;
            if n == bytes.len() {
                st.segments.pop_front();
            } else {
                bytes.advance(n);
            }
            drop(st);
            self.arrivals.note(due);
            return Poll::Ready(Ok(()));
        }
        if !st.eof {
            st.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }
}

/// One task of a delay line.
type Pump = Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

enum Segment {
    /// [arrived at the socket, read returned], due at, bytes.
    Data([Instant; 2], Instant, Bytes),
    Eof(Instant),
}

/// One direction of the delay line: a reader task stamps each segment as it arrives and
/// computes its delivery time; a writer task delivers it then. Two tasks, so that bytes
/// arriving while an earlier segment waits are stamped when they really arrive.
fn spawn_direction<R, W>(
    mut src: R,
    mut dst: Dest<W>,
    one_way: Duration,
    link: Link,
    seed: u64,
    src_arrivals: Option<Arrivals>,
) -> [Pump; 2]
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<Segment>();
    // Inbound, the reader stops as soon as the wrapped side is dropped: nothing will read
    // what it would deliver, and the socket should not wait for the peer to close it.
    let stop = match &dst {
        Dest::Near(q) => Some(q.gone.clone()),
        Dest::Stream(_) => None,
    };
    let reader: Pump = Box::pin(async move {
        let mut rng = Rng::new(seed);
        let mut buf = vec![0u8; 64 * 1024];
        // When the (emulated) wire is next free, for bandwidth serialisation.
        let mut wire_free = crate::clock::now();
        // Deliveries never overtake each other.
        let mut last_delivery = crate::clock::now();
        loop {
            let read = match &stop {
                Some(stop) => tokio::select! {
                    r = src.read(&mut buf) => r,
                    _ = stop.cancelled() => return,
                },
                None => src.read(&mut buf).await,
            };
            let n = match read {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Segment::Eof(
                        last_delivery.max(crate::clock::now() + one_way),
                    ));
                    return;
                }
                Ok(n) => n,
            };
            // When the bytes reached the socket (the kernel's stamp), else when the read
            // returned.
            let now = crate::clock::now();
            let arrived = src_arrivals
                .as_ref()
                .and_then(Arrivals::latest)
                .filter(|t| *t <= now)
                .unwrap_or(now);
            let mut depart = arrived;
            if let Some(bps) = link.bandwidth_bps {
                let start = wire_free.max(arrived);
                let ser =
                    Duration::from_nanos((n as u128 * 8 * 1_000_000_000 / bps as u128) as u64);
                depart = start + ser;
                wire_free = depart;
            }
            let jitter = if link.jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_nanos(rng.below(link.jitter.as_nanos() as u64 + 1))
            };
            let deliver = (depart + one_way + jitter).max(last_delivery);
            last_delivery = deliver;
            if tx
                .send(Segment::Data(
                    [arrived, now],
                    deliver,
                    Bytes::copy_from_slice(&buf[..n]),
                ))
                .is_err()
            {
                return;
            }
        }
    });
    let writer: Pump = Box::pin(async move {
        while let Some(seg) = rx.recv().await {
            match seg {
                Segment::Data(read, at, bytes) => {
                    timer::sleep_until(at).await;
                    // Off (a load) unless a test or benchmark started the log.
                    if matches!(dst, Dest::Near(_)) && segment_log::on() {
                        segment_log::record(read, at, crate::clock::now(), bytes.len());
                    }
                    if !dst.deliver(at, bytes).await {
                        return;
                    }
                }
                Segment::Eof(at) => {
                    timer::sleep_until(at).await;
                    dst.close().await;
                    return;
                }
            }
        }
        // The reader ended without an end-of-stream segment (it stopped or failed): the
        // other side still learns that nothing more will come.
        dst.close().await;
    });
    [reader, writer]
}

/// Diagnostics for tests and benchmarks (the delay line's per-segment timing), off unless
/// one starts it.
pub mod segment_log;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays_specs() {
        let l: Link = "rtt=40ms,jitter=2ms,bandwidth=100mbit".parse().unwrap();
        assert_eq!(l.rtt, Duration::from_millis(40));
        assert_eq!(l.jitter, Duration::from_millis(2));
        assert_eq!(l.bandwidth_bps, Some(100_000_000));
        assert_eq!(l.to_string(), "rtt=40ms,jitter=2ms,bandwidth=100mbit");
        assert!("none".parse::<Link>().unwrap().is_none());
        assert_eq!("rtt=50ms".parse::<Link>().unwrap().to_string(), "rtt=50ms");
    }

    #[test]
    fn rejects_bad_specs_with_a_hint() {
        for bad in [
            "rtt",
            "rtt=fast",
            "latency=4ms",
            "bandwidth=100",
            "bandwidth=-1mbit",
            "bandwidth=0.5bit",
            "rtt=2h",
            "jitter=100000000000000s",
        ] {
            let e = bad.parse::<Link>().unwrap_err().to_string();
            assert!(e.contains("rtt=40ms"), "{bad}: {e}");
        }
    }

    #[tokio::test]
    async fn delays_each_direction_by_half_the_rtt_and_keeps_order() {
        let (a, b) = tokio::io::duplex(1024);
        let link: Link = "rtt=20ms".parse().unwrap();
        let (mut wrapped, _) = link.wrap(Box::pin(a), 1, None);
        let mut b = b;
        let t0 = crate::clock::now();
        wrapped.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        b.read_exact(&mut buf).await.unwrap();
        let up = crate::clock::since(t0);
        assert_eq!(&buf, b"ping");
        assert!(up >= Duration::from_millis(10), "uplink took {up:?}");
        b.write_all(b"pong").await.unwrap();
        wrapped.read_exact(&mut buf).await.unwrap();
        let rtt = crate::clock::since(t0);
        assert_eq!(&buf, b"pong");
        assert!(rtt >= Duration::from_millis(20), "round trip took {rtt:?}");
        drop(b);
        let mut rest = Vec::new();
        wrapped.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    }

    /// Many first connections at once (the cells of a run start together) share one delay
    /// line thread; none may fail or panic.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_connections_share_one_link_thread() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 4];
                    if s.read_exact(&mut b).await.is_ok() {
                        let _ = s.write_all(&b).await;
                    }
                });
            }
        });
        let link: Link = "rtt=2ms".parse().unwrap();
        let emulator = Arc::new(Emulator::default());
        let mut tasks = Vec::new();
        for i in 0..8u64 {
            let emulator = emulator.clone();
            tasks.push(tokio::spawn(async move {
                let tcp = TcpStream::connect(addr).await.unwrap();
                let (mut io, arrivals) = link.wrap_tcp(&emulator, tcp, i).unwrap();
                io.write_all(b"ping").await.unwrap();
                let mut b = [0u8; 4];
                io.read_exact(&mut b).await.unwrap();
                assert_eq!(&b, b"ping");
                assert!(arrivals.latest().is_some(), "no arrival noted");
            }));
        }
        for t in tasks {
            t.await.expect("a connection task panicked");
        }
    }

    /// Dropping the wrapped side releases the socket even when the peer stays silent: the
    /// peer's next write is answered with a reset instead of being read by a pump that
    /// waits for the peer to close.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_app_side_releases_the_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let link: Link = "rtt=2ms".parse().unwrap();
        let client = tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let emulator = Emulator::default();
            let (mut io, _) = link.wrap_tcp(&emulator, tcp, 7).unwrap();
            io.write_all(b"ping").await.unwrap();
            let mut b = [0u8; 4];
            io.read_exact(&mut b).await.unwrap();
            drop(io);
        });
        let (mut server, _) = listener.accept().await.unwrap();
        let mut b = [0u8; 4];
        server.read_exact(&mut b).await.unwrap();
        server.write_all(b"pong").await.unwrap();
        client.await.unwrap();
        // The client's end of stream (its FIN) arrives one one-way delay after the drop.
        let n = tokio::time::timeout(Duration::from_secs(5), server.read(&mut b))
            .await
            .expect("no end of stream from the dropped side")
            .unwrap();
        assert_eq!(n, 0);
        // Once the socket is closed, a write draws a reset, which fails a later write. A
        // socket still held open by a waiting pump would take these writes without error.
        let reset = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                if server.write_all(b"late").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(reset.is_ok(), "the dropped side's socket stayed open");
    }

    #[tokio::test]
    async fn bandwidth_serialises_large_writes() {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        // 8 Mbit/s: 100 kB takes 100 ms on the wire.
        let link: Link = "rtt=0ms,bandwidth=8mbit".parse().unwrap();
        let (mut wrapped, _) = link.wrap(Box::pin(a), 1, None);
        let t0 = crate::clock::now();
        let payload = vec![7u8; 100_000];
        tokio::spawn(async move {
            wrapped.write_all(&payload).await.unwrap();
            wrapped.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), 100_000);
        assert!(
            crate::clock::since(t0) >= Duration::from_millis(95),
            "{:?}",
            crate::clock::since(t0)
        );
    }
}
