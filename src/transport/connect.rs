//! Opening one connection, each phase timed on its own: DNS, TCP connect (with the emulated
//! SYN round trip), the proxy's `CONNECT` tunnel, TLS. The WebSocket upgrade is timed in [`super::ws`].
//!
//! Owns: the socket options (`TCP_NODELAY`, so Nagle never adds ~40 ms to a small request),
//! where the link emulation sits (between TCP and TLS, so the handshake pays the RTT), and
//! giving each connection its id (numbered per run by the run's [`crate::link::Emulator`]).
//! Owns the connect timeout too ([`dial_within`]): every phase of opening is bounded by it,
//! and the error names the phase that ran out.
//! Does not own: the request's deadline and cancellation (the caller races this future
//! against them).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncBufRead, ReadBuf};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::io::{IoStats, MeteredIo};
use super::sockstate::SockProbe;
use super::Setup;
use crate::clock::tap::{Tap, Tapped};
use crate::clock::Clock;
use crate::link::{BoxIo, Emulator, Link};
use crate::sys::errno;
use crate::vocab::{BaseUrl, Proxy};

/// An open connection, before any HTTP or WebSocket protocol ran on it.
pub struct Dialed {
    /// The stream (TLS when the endpoint is https), metered.
    pub io: MeteredIo,
    /// Its counters.
    pub stats: Arc<IoStats>,
    /// What opening it cost.
    pub setup: Setup,
    /// The kernel's view of the TCP socket (idle liveness, resets).
    pub probe: Option<Arc<SockProbe>>,
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// DNS or TCP connect failed.
    #[error("{0}")]
    Connect(String),
    /// The TLS handshake failed.
    #[error("{0}")]
    Tls(String),
    /// This machine ran out of a local resource (file descriptors, ephemeral ports): not
    /// the target's fault.
    #[error("{0}")]
    Local(String),
}

/// True when `e` is this process or machine running out of a resource (`EMFILE`, `ENFILE`,
/// `EADDRNOTAVAIL`, `ENOBUFS`, `ENOMEM`) rather than the target refusing.
pub fn is_local_exhaustion(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(errno::EMFILE | errno::ENFILE | errno::EADDRNOTAVAIL | errno::ENOBUFS | errno::ENOMEM)
    )
}

/// Opens a connection to `ep`: DNS (skipped for IP literals), TCP connect + one emulated RTT,
/// the link delay line, the `CONNECT` tunnel when `proxy` is given, then TLS when `tls` is
/// given. Through a proxy, DNS and TCP connect are those of the proxy (the proxy resolves
/// the target's name) and TLS runs inside the tunnel. The link's delay line runs on
/// `emulator`, and the connection counts into its run's provenance counters.
pub async fn dial(
    ep: &BaseUrl,
    tls: Option<&TlsConnector>,
    proxy: Option<&Proxy>,
    link: &Link,
    emulator: &Emulator,
    clock: Clock,
    seed: u64,
) -> Result<Dialed, DialError> {
    let timeout = crate::plan::DEFAULT_CONNECT_TIMEOUT;
    dial_within(ep, tls, proxy, link, emulator, clock, seed, timeout).await
}

/// `fut`, one phase of opening a connection, unless `deadline` comes first: then a
/// [`DialError::Connect`] that names the phase (`what`) and the connect timeout.
async fn phase<F: std::future::Future>(
    deadline: tokio::time::Instant,
    timeout: std::time::Duration,
    what: impl FnOnce() -> String,
    fut: F,
) -> Result<F::Output, DialError> {
    tokio::time::timeout_at(deadline, fut).await.map_err(|_| {
        DialError::Connect(format!(
            "connect timeout: {} did not complete within {} (--connect-timeout / [load] connect_timeout)",
            what(),
            crate::units::fmt_duration_spec(timeout)
        ))
    })
}

/// [`dial`] with a connect timeout: DNS, TCP connect, the link's connect delay, the proxy's
/// `CONNECT` and the TLS handshake must all be done within `timeout`, else the connection
/// fails with a [`DialError::Connect`] that names the phase it was in.
#[allow(clippy::too_many_arguments)]
pub async fn dial_within(
    ep: &BaseUrl,
    tls: Option<&TlsConnector>,
    proxy: Option<&Proxy>,
    link: &Link,
    emulator: &Emulator,
    clock: Clock,
    seed: u64,
    timeout: std::time::Duration,
) -> Result<Dialed, DialError> {
    let deadline = tokio::time::Instant::from_std(crate::clock::now() + timeout);
    let connection_id = emulator.next_connection_id();
    let mut setup = Setup {
        connection_id,
        ..Setup::default()
    };
    let (host, port) = match proxy {
        Some(p) => (p.host(), p.port()),
        None => (ep.host.as_str(), ep.port),
    };
    let via = |what: &str| match proxy {
        Some(p) => format!("{what} (proxy {})", p.url()),
        None => what.to_string(),
    };
    let addr = if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        std::net::SocketAddr::new(ip, port)
    } else {
        let t0 = crate::clock::now();
        let lookup = tokio::net::lookup_host((host, port));
        let mut addrs = phase(
            deadline,
            timeout,
            || format!("the DNS lookup of {}", via(host)),
            lookup,
        )
        .await?
        .map_err(|e| DialError::Connect(format!("DNS lookup of {}: {e}", via(host))))?;
        let addr = addrs.next().ok_or_else(|| {
            DialError::Connect(format!("DNS lookup of {} returned no address", via(host)))
        })?;
        setup.dns_ns = Some(crate::clock::since(t0).as_nanos() as u64);
        addr
    };

    let t0 = crate::clock::now();
    let what = || format!("the TCP connect to {}", via(&addr.to_string()));
    let tcp = phase(deadline, timeout, what, super::tcp::connect(addr)).await?;
    let tcp = tcp.map_err(|e| {
        let what = format!("TCP connect to {}: {e}", via(&addr.to_string()));
        if is_local_exhaustion(&e) {
            DialError::Local(format!(
                "{what}: this machine ran out of file descriptors or ports; lower the \
                 concurrency or raise `ulimit -n`"
            ))
        } else {
            DialError::Connect(what)
        }
    })?;
    tcp.set_nodelay(true)
        .map_err(|e| DialError::Connect(format!("setting TCP_NODELAY: {e}")))?;
    phase(deadline, timeout, what, link.connect_delay()).await?;
    setup.tcp_connect_ns = Some(crate::clock::since(t0).as_nanos() as u64);
    let probe = SockProbe::new(&tcp).map(Arc::new);
    // Reads carry the kernel's receive stamps; an emulated link turns them into the instants
    // the bytes arrive on the emulated path.
    let (io, arrivals) = link
        .wrap_tcp(
            emulator,
            tcp,
            seed ^ connection_id.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        )
        .map_err(|e| DialError::Connect(format!("setting up the emulated link: {e}")))?;

    let io = match proxy {
        None => io,
        Some(p) => {
            let mut io = io;
            let t0 = crate::clock::now();
            let what = || format!("the proxy's CONNECT ({}) to {}", p.url(), ep.authority());
            let tunnel = super::proxy::tunnel(&mut io, p, &ep.host, ep.port);
            phase(deadline, timeout, what, tunnel)
                .await?
                .map_err(DialError::Connect)?;
            setup.proxy_connect_ns = Some(crate::clock::since(t0).as_nanos() as u64);
            io
        }
    };

    let (io, cert_asked) = match tls {
        None => (io, 0),
        Some(connector) => {
            let what = || format!("the TLS handshake with {}", ep.authority());
            let handshake = tls_handshake(connector, ep, io, &mut setup);
            phase(deadline, timeout, what, handshake).await??
        }
    };
    let (io, stats) = MeteredIo::new(io, clock, Some(arrivals));
    stats.client_cert_asked.store(cert_asked, Ordering::Relaxed);
    let _ = stats.counters.set(emulator.counters().clone());
    Ok(Dialed {
        io,
        stats,
        setup,
        probe,
    })
}

/// The TLS handshake with `ep` over `io`, timed into `setup` with what it negotiated (ALPN,
/// version). Returns the stream (read one record at a time) and whether the server asked
/// for a client certificate (see [`IoStats::client_cert_asked`]).
async fn tls_handshake(
    connector: &TlsConnector,
    ep: &BaseUrl,
    io: BoxIo,
    setup: &mut Setup,
) -> Result<(BoxIo, u8), DialError> {
    let name = rustls::pki_types::ServerName::try_from(ep.host.clone())
        .map_err(|e| DialError::Tls(format!("invalid TLS server name {:?}: {e}", ep.host)))?;
    // This connection's own resolver in front of the configured one notes whether
    // the server asked for a client certificate that is not there.
    let probe = Arc::new(CertRequestProbe {
        inner: connector.config().client_auth_cert_resolver.clone(),
        asked: AtomicU8::new(0),
    });
    let mut cfg = (**connector.config()).clone();
    cfg.client_auth_cert_resolver = probe.clone();
    let connector = TlsConnector::from(Arc::new(cfg));
    let t0 = crate::clock::now();
    let stream = connector.connect(name, io).await.map_err(|e| {
        let hint = if e.to_string().contains("NoApplicationProtocol") {
            "; the server accepts none of the offered ALPN protocols \
                 (the http2 transport offers only h2: use http-pooled for this target)"
                .to_string()
        } else {
            super::io::client_cert_refusal(&e)
                .map(|m| format!("; {m}"))
                .unwrap_or_default()
        };
        DialError::Tls(format!("TLS handshake with {}: {e}{hint}", ep.host))
    })?;
    setup.tls_handshake_ns = Some(crate::clock::since(t0).as_nanos() as u64);
    let conn = stream.get_ref().1;
    setup.alpn = conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    setup.tls_version = conn.protocol_version().map(|v| format!("{v:?}"));
    let cert_asked = probe.asked.load(Ordering::Relaxed);
    Ok((Box::pin(RecordAtATime::wrap(stream, OneRecord)), cert_asked))
}

/// Notes whether the server asked for a client certificate, and whether one was sent
/// (see [`IoStats::client_cert_asked`]).
#[derive(Debug)]
struct CertRequestProbe {
    inner: Arc<dyn rustls::client::ResolvesClientCert>,
    asked: AtomicU8,
}

impl rustls::client::ResolvesClientCert for CertRequestProbe {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let got = self.inner.resolve(root_hint_subjects, sigschemes);
        self.asked
            .store(if got.is_some() { 2 } else { 1 }, Ordering::Relaxed);
        got
    }

    fn only_raw_public_keys(&self) -> bool {
        self.inner.only_raw_public_keys()
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}

/// A client TLS stream read one record's plaintext at a time.
///
/// tokio-rustls's `poll_read` fills the caller's buffer: it decrypts a record, then goes on
/// reading from below while records keep coming. Several records that arrived at different
/// times then leave in one read, and [`MeteredIo`] can only stamp that read with the latest
/// arrival. Read through the buffered interface instead, a read returns the plaintext of one
/// record, and reads from below only when no plaintext is waiting. On the emulated link,
/// which hands over one segment per read, each read's stamp is then the arrival of the
/// segment that completed its record. On a plain socket, records that waited in the kernel
/// together still come up in one read from below and share its (the latest) stamp.
type RecordAtATime = Tapped<OneRecord>;

/// The tap of a [`RecordAtATime`] stream: reads through the buffered interface, writes pass
/// through.
struct OneRecord;

impl Tap for OneRecord {
    type Io = TlsStream<BoxIo>;

    fn poll_read(
        &mut self,
        tls: &mut TlsStream<BoxIo>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let inner = Pin::new(&mut *tls);
        let data = ready!(inner.poll_fill_buf(cx))?;
        let n = data.len().min(buf.remaining());
        buf.put_slice(&data[..n]);
        Pin::new(tls).consume(n);
        Poll::Ready(Ok(()))
    }
}
