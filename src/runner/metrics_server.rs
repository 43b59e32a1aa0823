//! `run --metrics-listen ADDR`: a plain HTTP/1.1 endpoint serving the run's live measurements
//! at `/metrics` (OpenMetrics when the scraper asks for it, as Prometheus does; the 0.0.4
//! text format otherwise), and the run's `metrics.om` file.
//!
//! Owns: binding the address (before the run starts, so a taken port fails the run before any
//! request), answering scrapes from the last published snapshot, the [`Feed`] the recorder
//! task publishes to (at least once a second, and once more when the run ends, with
//! `complete="true"`), staying up `--metrics-linger` after the run, and writing `metrics.om`.
//! Does not own: what the exposition says (`report::openmetrics`) or the measurements
//! (`recorder`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::recorder::Recorder;
use crate::report::openmetrics::{Exposition, Format, RunInfo, FILE};

/// `--metrics-listen` and `--metrics-linger`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsOptions {
    /// `HOST:PORT` to listen on (port 0: any free port; the run prints the one it got).
    pub listen: String,
    /// How long `/metrics` stays up after the run ended, serving its final values.
    pub linger: Duration,
}

/// Where the recorder task publishes the run's measurements; cheap to clone.
#[derive(Clone)]
pub struct Feed {
    shared: Arc<RwLock<Exposition>>,
    run: RunInfo,
}

impl Feed {
    /// Replaces what `/metrics` serves with `recorder`'s measurements now.
    pub fn publish(&self, recorder: &Recorder) {
        let e = Exposition::of(recorder, &self.run);
        if let Ok(mut s) = self.shared.write() {
            *s = e;
        }
    }
}

/// Starts the endpoint when the run asked for one (`--metrics-listen`).
pub async fn start(options: Option<&MetricsOptions>) -> anyhow::Result<Option<MetricsServer>> {
    match options {
        Some(o) => Ok(Some(MetricsServer::start(o).await?)),
        None => Ok(None),
    }
}

/// The listening endpoint of one run.
pub struct MetricsServer {
    addr: SocketAddr,
    shared: Arc<RwLock<Exposition>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    linger: Duration,
}

impl MetricsServer {
    /// Binds `options.listen` and starts answering (an empty exposition until [`Self::feed`]).
    pub async fn start(options: &MetricsOptions) -> anyhow::Result<MetricsServer> {
        let listener = tokio::net::TcpListener::bind(&options.listen)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "--metrics-listen {}: cannot listen there: {e} (give HOST:PORT, e.g. 127.0.0.1:9464; port 0 picks a free one)",
                    options.listen
                )
            })?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(RwLock::new(Exposition::empty(&RunInfo {
            run_id: String::new(),
            scenario: String::new(),
            complete: false,
        })));
        let stop = CancellationToken::new();
        let task = tokio::spawn(accept(listener, shared.clone(), stop.clone()));
        Ok(MetricsServer {
            addr,
            shared,
            stop,
            task,
            linger: options.linger,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The feed for the run `run` (its first snapshot: no requests yet).
    pub fn feed(&self, run: RunInfo) -> Feed {
        let feed = Feed {
            shared: self.shared.clone(),
            run,
        };
        feed.publish(&Recorder::new());
        feed
    }

    /// Serves `last` (the run's final values) for the linger time, then stops.
    pub async fn finish(self, last: Exposition) {
        if let Ok(mut s) = self.shared.write() {
            *s = last;
        }
        if !self.linger.is_zero() {
            tokio::time::sleep(self.linger).await;
        }
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// After the run: writes `metrics.om` into `dir` from the final recorder and, with a server,
/// serves the same values for its linger time; a file that cannot be written is a warning.
pub async fn finish(
    server: Option<MetricsServer>,
    dir: &Path,
    recorder: &Recorder,
    scenario: &str,
) {
    let run = RunInfo {
        complete: true,
        ..run_info(dir, scenario)
    };
    let last = Exposition::of(recorder, &run);
    let text = last.render(Format::OpenMetrics);
    if let Err(e) = crate::store::write_atomic(&dir.join(FILE), text.as_bytes()) {
        errln!("warning: {FILE} could not be written: {e}");
    }
    if let Some(server) = server {
        server.finish(last).await;
    }
}

/// The run info of a run writing into `dir`.
pub fn run_info(dir: &Path, scenario: &str) -> RunInfo {
    RunInfo {
        run_id: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        scenario: scenario.to_string(),
        complete: false,
    }
}

async fn accept(
    listener: tokio::net::TcpListener,
    shared: Arc<RwLock<Exposition>>,
    stop: CancellationToken,
) {
    let mut conns = JoinSet::new();
    loop {
        let (io, _) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors or similar: try again shortly rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let shared = shared.clone();
        let svc = hyper::service::service_fn(move |req| {
            let reply = answer(&req, &shared);
            async move { Ok::<_, std::convert::Infallible>(reply) }
        });
        conns.spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(io), svc)
                .await;
        });
        while conns.try_join_next().is_some() {}
    }
    conns.abort_all();
}

fn answer<B>(req: &hyper::Request<B>, shared: &RwLock<Exposition>) -> hyper::Response<Full<Bytes>> {
    let reply = |status: u16, ctype: &str, body: String| {
        hyper::Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, ctype)
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    if req.uri().path() != "/metrics" {
        return reply(
            404,
            "text/plain",
            "spark-bench serves /metrics only\n".into(),
        );
    }
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        return reply(405, "text/plain", "GET /metrics\n".into());
    }
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let body = match shared.read() {
        Ok(e) => e.render(format),
        Err(_) => return reply(500, "text/plain", "poisoned\n".into()),
    };
    reply(200, format.content_type(), body)
}
