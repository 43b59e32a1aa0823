//! A byte-stream wrapper that counts bytes and stamps reads and writes.
//!
//! Owns: per-connection counters (`bytes_read`, `bytes_written`) and the time of the latest
//! read that returned bytes / the latest write, in ns since run start.
//! Does not own: framing. hyper and tungstenite parse on top of it. Each read's bytes are
//! also fed, with their arrival, to the connection's [`ByteClock`] when HTTP set one up, so a
//! frame hyper hands up later can be stamped with the read that delivered it even if hyper's
//! connection task read further meanwhile; without one (WebSocket, driven by the reader
//! itself), the latest read time is the arrival of the frame's last byte.
//!
//! The counters are relaxed atomics: one writer (the task polling the I/O), no locks.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::io::ReadBuf;

use super::bytelog::ByteClock;
use crate::clock::rx::Arrivals;
use crate::clock::tap::{Tap, Tapped};
use crate::clock::Clock;
use crate::link::BoxIo;

/// Counters of one connection.
#[derive(Debug, Default)]
pub struct IoStats {
    /// Plaintext bytes read.
    pub bytes_read: AtomicU64,
    /// Plaintext bytes written.
    pub bytes_written: AtomicU64,
    /// ns since run start of the latest read that returned at least one byte.
    pub last_read_ns: AtomicU64,
    /// ns since run start of the latest write that accepted at least one byte.
    pub last_write_ns: AtomicU64,
    /// Which read delivered which response byte, when the HTTP layer set one up (before
    /// its first read).
    pub byte_clock: OnceLock<Arc<ByteClock>>,
    /// The run's provenance counters this connection adds to (set as it is opened).
    pub counters: OnceLock<Arc<crate::provenance::Counters>>,
    /// Set when a read failed with a TLS alert refusing the client certificate (see
    /// [`client_cert_refusal`]): requests failing on this connection say so
    /// even when their own error lost the cause.
    pub client_cert_refusal: OnceLock<String>,
    /// What the server asked of the client during the handshake: 0 no certificate, 1 a
    /// certificate that none was configured for, 2 a certificate that was sent.
    pub client_cert_asked: std::sync::atomic::AtomicU8,
}

impl IoStats {
    /// Why requests on this connection failed, when the server's side of TLS says so: an
    /// alert refusing the client certificate, or a certificate asked for, none sent, and the
    /// connection failing before any response byte (the alert itself can be lost when the
    /// server's close resets the connection).
    pub fn tls_refusal(&self) -> Option<String> {
        if let Some(why) = self.client_cert_refusal.get() {
            return Some(why.clone());
        }
        if self.read() > 0 {
            return None;
        }
        match self.client_cert_asked.load(Ordering::Relaxed) {
            1 => Some("the server asked for a client certificate, none is configured, and the connection failed before any response; set client_cert and client_key for this target".to_string()),
            2 => Some("the server asked for a client certificate and the connection failed before any response: it likely refused the certificate; check client_cert and client_key and that the server trusts their CA".to_string()),
            _ => None,
        }
    }
}

impl IoStats {
    /// Plaintext bytes read so far.
    pub fn read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }
    /// Plaintext bytes written so far.
    pub fn written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }
    /// Time of the latest read that returned bytes.
    pub fn last_read(&self) -> u64 {
        self.last_read_ns.load(Ordering::Relaxed)
    }
    /// Time of the latest write.
    pub fn last_write(&self) -> u64 {
        self.last_write_ns.load(Ordering::Relaxed)
    }
}

/// The metered stream.
pub type MeteredIo = Tapped<Meter>;

/// The tap of a [`MeteredIo`]: counts and stamps reads and writes.
pub struct Meter {
    stats: Arc<IoStats>,
    clock: Clock,
    /// When the bytes of the latest read below arrived (kernel stamp or link hand-over).
    arrivals: Option<Arrivals>,
}

impl MeteredIo {
    /// Wraps `inner`; the returned stats are shared with whoever records the request.
    ///
    /// With `arrivals` (the arrival clock of the stream below, see [`crate::clock::rx`]), a
    /// read is stamped with when its bytes arrived rather than when the read returned: the
    /// latest arrival below, which is never earlier than the arrival of the bytes this read
    /// returns (they came in that read or an earlier one) and never later than now.
    pub fn new(inner: BoxIo, clock: Clock, arrivals: Option<Arrivals>) -> (Self, Arc<IoStats>) {
        let stats = Arc::new(IoStats::default());
        (
            Tapped::wrap(
                inner,
                Meter {
                    stats: stats.clone(),
                    clock,
                    arrivals,
                },
            ),
            stats,
        )
    }
}

impl Tap for Meter {
    type Io = BoxIo;

    fn poll_read(
        &mut self,
        inner: &mut BoxIo,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = inner.as_mut().poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let n = (buf.filled().len() - before) as u64;
            if n > 0 {
                // Stamp first: this is the moment the bytes reached us.
                let now = self.clock.now_ns();
                let at = self
                    .arrivals
                    .as_ref()
                    .and_then(Arrivals::latest)
                    .map(|t| self.clock.ns(t).min(now))
                    .unwrap_or(now);
                self.stats.last_read_ns.store(at, Ordering::Relaxed);
                self.stats.bytes_read.fetch_add(n, Ordering::Relaxed);
                if let Some(bc) = self.stats.byte_clock.get() {
                    bc.feed(&buf.filled()[before..], at);
                }
            }
        }
        if let Poll::Ready(Err(e)) = &r {
            if let Some(why) = client_cert_refusal(e) {
                let _ = self.stats.client_cert_refusal.set(why);
            }
        }
        r
    }

    fn poll_write(
        &mut self,
        inner: &mut BoxIo,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = inner.as_mut().poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.note_write(n);
        }
        r
    }

    fn poll_write_vectored(
        &mut self,
        inner: &mut BoxIo,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = inner.as_mut().poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.note_write(n);
        }
        r
    }
}

impl Meter {
    fn note_write(&self, n: usize) {
        if n > 0 {
            self.stats
                .last_write_ns
                .store(self.clock.now_ns(), Ordering::Relaxed);
            self.stats
                .bytes_written
                .fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// True when `e` or one of its sources is an I/O error saying the peer reset the connection
/// (`ECONNRESET`, or `EPIPE` on a write after the reset).
pub fn is_reset(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = src {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) {
                return true;
            }
        }
        src = err.source();
    }
    false
}

/// When `err` or one of its causes is a TLS alert about the client's certificate, what it
/// means and what to do. A TLS 1.3 server checks the client certificate after the client
/// finished its handshake, so its refusal arrives with the first read, as a request error.
pub fn client_cert_refusal(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rustls::AlertDescription as A;
    let mut cur = Some(err);
    while let Some(e) = cur {
        let tls = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(rustls::Error::AlertReceived(alert)) = tls {
            return match alert {
                A::CertificateRequired => Some(format!(
                    "the server sent TLS alert {alert:?}: it requires a client certificate; set client_cert and client_key for this target"
                )),
                A::BadCertificate
                | A::UnknownCA
                | A::CertificateUnknown
                | A::UnsupportedCertificate
                | A::CertificateExpired
                | A::CertificateRevoked
                | A::AccessDenied => Some(format!(
                    "the server sent TLS alert {alert:?}: it refused the client certificate; check client_cert and client_key and that the server trusts their CA"
                )),
                _ => None,
            };
        }
        cur = e.source();
    }
    None
}
