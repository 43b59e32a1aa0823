//! The simulator's server: the accept loop and its lifecycle.
//!
//! Owns: accepting (TCP_NODELAY → optional server-side [`Link`](crate::link::Link) → optional TLS → hyper
//! HTTP/1.1 + HTTP/2 with upgrades), the per-connection state handed to the [`router`], the
//! socket wrapper that turns the `reset-after=N` fault into a TCP RST and feeds transmit
//! stamps, and the public entry points ([`serve`], [`spawn`], [`SimHandle`]). Does not own:
//! routing (`router`) or what a request means (`api`).
//!
//! [`router`]: super::router

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::AsyncWrite;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::config::SimConfig;
use super::model;
use super::router;
use super::trace::Trace;
use super::wire::Conn;
use crate::clock::tap::{Tap, Tapped};
use crate::clock::tx;
use crate::link::BoxIo;
use crate::tls::SelfSigned;

/// An accepted TCP socket that closes with a RST when its connection's reset flag is set
/// (the `reset-after=N` fault): SO_LINGER 0 is set just before the socket is dropped.
///
/// With transmit stamps on, every byte must go through `poll_write` (which counts it): the
/// tap takes no vectored writes ([`Tap::VECTORED`] is false).
type ConnIo = Tapped<ConnTap>;

/// The tap of a [`ConnIo`]: counts written bytes and reads their transmit stamps.
struct ConnTap {
    reset: Arc<AtomicBool>,
    /// Transmit stamps, when switched on.
    tx: Option<Arc<tx::TxLog>>,
}

impl Tap for ConnTap {
    type Io = TcpStream;

    const VECTORED: bool = false;

    fn on_drop(&mut self, tcp: &mut TcpStream) {
        if self.reset.load(Ordering::SeqCst) {
            let _ = tcp.set_zero_linger();
        }
    }

    fn poll_write(
        &mut self,
        tcp: &mut TcpStream,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut *tcp).poll_write(cx, buf);
        if let (Poll::Ready(Ok(n)), Some(log)) = (&r, &self.tx) {
            log.wrote(*n);
            tx::drain(raw_fd(tcp), log);
        }
        r
    }

    fn poll_flush(
        &mut self,
        tcp: &mut TcpStream,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        // A stamp the kernel took after its write returned (it sent the bytes later).
        if let Some(log) = &self.tx {
            tx::drain(raw_fd(tcp), log);
        }
        Pin::new(tcp).poll_flush(cx)
    }
}

fn raw_fd(tcp: &TcpStream) -> std::os::fd::RawFd {
    use std::os::fd::AsRawFd;
    tcp.as_raw_fd()
}

/// Serves until `shutdown` completes, then stops accepting and cancels open connections.
pub async fn serve(
    listener: TcpListener,
    cfg: SimConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let trace = Trace::new(crate::clock::now());
    serve_with_trace(listener, cfg, shutdown, trace).await
}

async fn serve_with_trace(
    listener: TcpListener,
    cfg: SimConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    trace: Trace,
) -> anyhow::Result<()> {
    cfg.profile.validate()?;
    let mut engine = model::Engine::new(cfg.profile.clone(), cfg.seed, trace.origin());
    engine.trace = trace;
    let engine = Arc::new(engine);
    let acceptor = match &cfg.tls {
        Some(cert) => Some(tokio_rustls::TlsAcceptor::from(cert.server_config()?)),
        None => None,
    };
    let root = CancellationToken::new();
    let conn_no = AtomicU64::new(0);
    // Accept errors since the last connection accepted (a burst), and in all.
    let (mut burst, mut accept_errors) = (0u64, 0u64);
    tokio::pin!(shutdown);
    loop {
        let (tcp, _peer) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(x) => {
                    burst = 0;
                    x
                }
                // A client that reset before its connection was accepted: nothing waits.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                // Accept errors (e.g. too many open files) are transient: keep serving. But
                // a connection that waits in the listen backlog waits in the client's figures
                // too (its WebSocket upgrade or first byte comes late), so say so: on the
                // first error of each burst and about once a second while it goes on.
                Err(e) => {
                    if burst % ACCEPT_WARN_EVERY == 0 {
                        errln!(
                            "simulator: cannot accept a connection: {e} ({} so far); new connections wait in the listen backlog, and their clients' latencies include that wait{}",
                            accept_errors + 1,
                            if e.raw_os_error() == Some(crate::sys::errno::EMFILE) {
                                " (raise the open-file limit, or run more `serve --reuse-port` processes on this port)"
                            } else {
                                ""
                            }
                        );
                    }
                    burst += 1;
                    accept_errors += 1;
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        // Transmit stamps key on byte offsets at the socket; a server-side delay line between
        // the connection and the socket would hold the bytes back, so they stay off with one.
        let tx = (cfg.tx_stamps && cfg.link.is_none() && tx::enable(raw_fd(&tcp)))
            .then(|| Arc::new(tx::TxLog::default()));
        let n = conn_no.fetch_add(1, Ordering::Relaxed);
        let reset = Arc::new(AtomicBool::new(false));
        let conn = Arc::new(Conn {
            engine: engine.clone(),
            ws_lifetime: cfg.ws_lifetime,
            ws_busy: cfg.ws_busy_policy,
            reset: reset.clone(),
            kill: root.child_token(),
            tx: tx.clone(),
        });
        let link = cfg.link;
        let seed = cfg.seed;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let io: BoxIo = Box::pin(ConnIo::wrap(tcp, ConnTap { reset, tx }));
            let (io, _) = link.wrap(io, seed ^ n.wrapping_mul(0x9e37_79b9), None);
            let io: BoxIo = match acceptor {
                Some(acc) => match acc.accept(io).await {
                    Ok(tls) => Box::pin(tls),
                    Err(_) => return,
                },
                None => io,
            };
            let kill = conn.kill.clone();
            let svc = hyper::service::service_fn(move |req| router::handle(conn.clone(), req));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let served = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
            tokio::select! {
                biased;
                _ = kill.cancelled() => {}
                _ = served => {}
            }
        });
    }
    root.cancel();
    Ok(())
}

/// Wait before accepting again after an accept error.
const ACCEPT_RETRY: Duration = Duration::from_millis(5);
/// Accept errors between two warnings (about a second of retries).
const ACCEPT_WARN_EVERY: u64 = 200;

/// A simulator running in a background task. Dropping it stops the server.
pub struct SimHandle {
    /// The bound address (127.0.0.1 and a free port).
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT/v1`, or `https://…` with TLS.
    pub base_url: String,
    /// The certificate clients must trust, with TLS.
    pub cert: Option<SelfSigned>,
    /// Ground truth of every response served.
    pub trace: Trace,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl SimHandle {
    /// The WebSocket URL of the Responses endpoint (`ws://…/v1/responses` or `wss://…`).
    pub fn ws_url(&self) -> String {
        let scheme = if self.cert.is_some() { "wss" } else { "ws" };
        format!("{scheme}://{}/v1/responses", self.addr)
    }

    /// Stops the server and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// Binds 127.0.0.1:0 and runs [`serve`] in a task.
pub async fn spawn(cfg: SimConfig) -> anyhow::Result<SimHandle> {
    cfg.profile.validate()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    let trace = Trace::new(crate::clock::now());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let cert = cfg.tls.clone();
    let task = tokio::spawn(serve_with_trace(
        listener,
        cfg,
        async move {
            let _ = rx.await;
        },
        trace.clone(),
    ));
    Ok(SimHandle {
        addr,
        base_url: format!("{scheme}://{addr}/v1"),
        cert,
        trace,
        stop: Some(tx),
        task: Some(task),
    })
}
