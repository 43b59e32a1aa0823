//! The floor under the harness's CPU per chunk: the same streams from the same `serve`
//! process, read the same way (`recvmsg` with the kernel's receive stamp through
//! [`spark_bench::clock::rx::KernelStamped`], plus the run clock's stamp of each read as the
//! transport's byte meter takes it), and nothing else: no HTTP or WebSocket parser, no JSON,
//! no recording. What the harness spends per chunk above this is its own work.
//!
//! ```sh
//! taskset -c 1 spark-bench serve --profile fast --listen 127.0.0.1:18190 &
//! taskset -c 0 cargo run --release --example read_floor -- \
//!     --addr 127.0.0.1:18190 --transport http-pooled --requests 20000 --concurrency 64
//! ```
//!
//! `scripts/cpu-per-chunk.sh` runs it beside the harness. Transports: `http-pooled`
//! (keep-alive connections, one per worker), `http` (a new connection per request), `ws`
//! (the Responses API's WebSocket mode, a new socket per request, as a one-turn session
//! uses, with the `generate:false` warm-up the harness sends first on each new socket by
//! default for a Responses target, its response read the same way: the same exchanges per
//! socket, though the harness's warm-up carries no input and its request chains on the
//! warm-up's id, where the floor's both carry the prompt; its upgrade carries the harness's
//! headers, so the server sends the same events, the timing event included unless
//! `--ws-timing off`, for a target with `request_timing = false`), and `ws-tungstenite`: the same
//! exchanges with each frame read through tokio-tungstenite, as the harness read them before
//! it read frames itself (`transport::wsframe`), to price that read path against the bare one.
//! The runtime is the harness's (`runner::resources::runtime`: one thread when the process has one
//! CPU); `FLOOR_RT=multi` takes tokio's multi-thread one instead, to price that choice. The request is the
//! one a one-turn `run` sends (64 output tokens at most). It prints CPU-µs per chunk and per
//! read (per message for `ws-tungstenite`), chunks per read, and the process's CPU seconds.
//! Chunks are counted as the harness counts them: events carrying output text.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use spark_bench::clock::rx::KernelStamped;
use spark_bench::clock::{self, Clock};
use spark_bench::provenance::Counters;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PROMPT: &str = "Write a Python function that reverses a string.";

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Http,
    HttpPooled,
    Ws,
    WsTung,
}

struct Args {
    addr: String,
    kind: Kind,
    requests: u64,
    concurrency: usize,
    max_tokens: u32,
    /// `ws`: ask for the server's timing event on the upgrade, as a Responses target does
    /// unless it sets `request_timing = false`.
    ws_timing: bool,
}

fn args() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:18190".into(),
        kind: Kind::HttpPooled,
        requests: 20_000,
        concurrency: 64,
        max_tokens: 64,
        ws_timing: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--addr" => a.addr = val,
            "--transport" => {
                a.kind = match val.as_str() {
                    "http" => Kind::Http,
                    "http-pooled" => Kind::HttpPooled,
                    "ws" => Kind::Ws,
                    "ws-tungstenite" => Kind::WsTung,
                    _ => panic!("--transport http|http-pooled|ws|ws-tungstenite"),
                }
            }
            "--requests" => a.requests = val.parse().expect("--requests N"),
            "--concurrency" => a.concurrency = val.parse().expect("--concurrency N"),
            "--max-tokens" => a.max_tokens = val.parse().expect("--max-tokens N"),
            "--ws-timing" => {
                a.ws_timing = match val.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => panic!("--ws-timing on|off"),
                }
            }
            _ => panic!("unknown flag {flag}"),
        }
    }
    a
}

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    reads: AtomicU64,
    chunks: AtomicU64,
    bytes: AtomicU64,
    /// Sum of the stamps, so no stamp is optimised away.
    stamps: AtomicU64,
}

/// The `n`th request's prompt. The simulator draws a response's length from a hash of the
/// request, so one fixed prompt would give every response the same length (57 of 64 tokens)
/// where the harness's sessions, whose requests differ, get the draw's spread (about 54 on
/// average): numbering the prompts gives the floor the same spread, so both divide the same
/// per-request work by the same chunks.
fn prompt(n: u64) -> String {
    format!("{PROMPT} (#{n})")
}

fn chat_request(host: &str, max_tokens: u32, n: u64) -> Vec<u8> {
    let prompt = prompt(n);
    let body = format!(
        r#"{{"model":"sim","messages":[{{"role":"user","content":"{prompt}"}}],"stream":true,"stream_options":{{"include_usage":true}},"max_tokens":{max_tokens}}}"#
    );
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The upgrade with the headers the harness sends on its own (`backend::request::ws_headers`),
/// so that the server sends the same events: with `timing`, one
/// `responsesapi.websocket_timing` message more per response.
fn ws_upgrade(host: &str, timing: bool) -> Vec<u8> {
    let timing = if timing {
        "x-responsesapi-include-timing-metrics: true\r\n"
    } else {
        ""
    };
    format!(
        "GET /v1/responses HTTP/1.1\r\nhost: {host}\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\nopenai-beta: responses_websockets=2026-02-06\r\n{timing}\r\n"
    )
    .into_bytes()
}

/// A masked client text frame (mask key 0: the payload goes as is) carrying a
/// `response.create` for the `n`th request; with `warm_up`, the `generate:false` one that
/// only warms the socket.
fn ws_frame(max_tokens: u32, warm_up: bool, n: u64) -> Vec<u8> {
    let body = ws_body(max_tokens, warm_up, n);
    let mut f = vec![0x81u8];
    let n = body.len();
    if n < 126 {
        f.push(0x80 | n as u8);
    } else {
        f.push(0x80 | 126);
        f.extend_from_slice(&(n as u16).to_be_bytes());
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(body.as_bytes());
    f
}

fn ws_body(max_tokens: u32, warm_up: bool, n: u64) -> String {
    let generate = if warm_up { r#","generate":false"# } else { "" };
    let prompt = prompt(n);
    format!(
        r#"{{"type":"response.create","model":"sim","store":false,"input":[{{"role":"user","content":"{prompt}"}}],"max_output_tokens":{max_tokens}{generate}}}"#
    )
}

struct Reader {
    clock: Clock,
    counters: Arc<Counters>,
    tally: Arc<Tally>,
    chunk: memchr::memmem::Finder<'static>,
    end: &'static [u8],
    buf: Vec<u8>,
}

impl Reader {
    async fn connect(&self, addr: &str) -> (KernelStamped, spark_bench::clock::rx::Arrivals) {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).ok();
        KernelStamped::new(tcp, self.counters.clone())
    }

    /// Reads one response: every read stamped, chunks counted, until the bytes of a read end
    /// with the response's last bytes. Returns false when the connection closed first.
    async fn response(
        &mut self,
        io: &mut KernelStamped,
        arrivals: &spark_bench::clock::rx::Arrivals,
    ) -> bool {
        let mut pass = Pass::default();
        let done = loop {
            let n = io.read(&mut self.buf).await.unwrap_or(0);
            if n == 0 {
                break false;
            }
            let got = &self.buf[..n];
            if self.take(arrivals, got, &mut pass) {
                break true;
            }
        };
        self.add(&pass);
        done
    }

    /// Stamps one read (or message) as the byte meter does (the kernel's arrival, never
    /// later than now) and counts its chunks. True when it ends the response.
    fn take(&self, arrivals: &spark_bench::clock::rx::Arrivals, got: &[u8], p: &mut Pass) -> bool {
        let now = self.clock.now_ns();
        let at = arrivals
            .latest()
            .map(|t| self.clock.ns(t).min(now))
            .unwrap_or(now);
        p.stamps = p.stamps.wrapping_add(at);
        p.reads += 1;
        p.bytes += got.len() as u64;
        p.chunks += self.chunk.find_iter(got).count() as u64;
        got.ends_with(self.end)
    }

    fn add(&self, p: &Pass) {
        let t = &self.tally;
        t.reads.fetch_add(p.reads, Ordering::Relaxed);
        t.chunks.fetch_add(p.chunks, Ordering::Relaxed);
        t.bytes.fetch_add(p.bytes, Ordering::Relaxed);
        t.stamps.fetch_add(p.stamps, Ordering::Relaxed);
    }
}

/// One response's reads, chunks, bytes and stamp sum.
#[derive(Default)]
struct Pass {
    reads: u64,
    chunks: u64,
    bytes: u64,
    stamps: u64,
}

/// `ws-tungstenite`: the `ws` exchanges, with every frame read through tokio-tungstenite
/// (one stamp per message), to price its read path against the bare one.
async fn worker_tung(a: Arc<Args>, r: Reader, left: Arc<AtomicU64>) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{protocol::Role, protocol::WebSocketConfig, Message};
    let upgrade = ws_upgrade(&a.addr, a.ws_timing);
    let mut buf = vec![0u8; 4096];
    while let Ok(n) = left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
    {
        let (mut io, arrivals) = r.connect(&a.addr).await;
        io.write_all(&upgrade).await.expect("upgrade");
        let got = io.read(&mut buf).await.expect("101");
        assert!(buf[..got].starts_with(b"HTTP/1.1 101"), "no upgrade");
        // The harness's read buffer (`transport::ws::ws_config`).
        let config = WebSocketConfig::default().read_buffer_size(8 * 1024);
        let mut ws =
            tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Client, Some(config))
                .await;
        for body in [
            ws_body(a.max_tokens, true, 0),
            ws_body(a.max_tokens, false, n),
        ] {
            ws.send(Message::text(body)).await.expect("send");
            let mut pass = Pass::default();
            while let Some(Ok(m)) = ws.next().await {
                let Message::Text(t) = m else { continue };
                if r.take(&arrivals, t.as_bytes(), &mut pass) {
                    break;
                }
            }
            r.add(&pass);
        }
        r.tally.requests.fetch_add(1, Ordering::Relaxed);
    }
}

async fn worker(a: Arc<Args>, mut r: Reader, left: Arc<AtomicU64>) {
    if a.kind == Kind::WsTung {
        return worker_tung(a, r, left).await;
    }
    let (upgrade, warm_up) = match a.kind {
        Kind::Ws => (
            ws_upgrade(&a.addr, a.ws_timing),
            ws_frame(a.max_tokens, true, 0),
        ),
        _ => (Vec::new(), Vec::new()),
    };
    let mut conn = None;
    while let Ok(n) = left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
    {
        let req = match a.kind {
            Kind::Ws => ws_frame(a.max_tokens, false, n),
            _ => chat_request(&a.addr, a.max_tokens, n),
        };
        if conn.is_none() || a.kind != Kind::HttpPooled {
            let (mut io, arrivals) = r.connect(&a.addr).await;
            if a.kind == Kind::Ws {
                io.write_all(&upgrade).await.expect("upgrade");
                let n = io.read(&mut r.buf).await.expect("101");
                assert!(r.buf[..n].starts_with(b"HTTP/1.1 101"), "no upgrade");
                io.write_all(&warm_up).await.expect("warm-up");
                assert!(r.response(&mut io, &arrivals).await, "warm-up");
            }
            conn = Some((io, arrivals));
        }
        let (io, arrivals) = conn.as_mut().unwrap();
        io.write_all(&req).await.expect("write");
        let ok = r.response(io, arrivals).await;
        r.tally.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            conn = None;
        }
    }
}

fn main() {
    let a = Arc::new(args());
    // The harness's runtime (one thread when the process has one CPU), so that the floor
    // differs from the harness only in the work on the bytes.
    let rt = if std::env::var("FLOOR_RT").as_deref() == Ok("multi") {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime")
    } else {
        spark_bench::runner::resources::runtime().expect("runtime")
    };
    let tally = Arc::new(Tally::default());
    let clock = Clock::start();
    let counters = Arc::new(Counters::default());
    let (pattern, end): (&'static [u8], &'static [u8]) = match a.kind {
        Kind::Ws | Kind::WsTung => (
            b"\"response.output_text.delta\"",
            b"\"response.completed\"}",
        ),
        _ => (b"\"delta\":{\"content\":\"", b"0\r\n\r\n"),
    };
    let cpu0 = clock::selfwatch::process_cpu_time().unwrap_or_default();
    let t0 = clock::now();
    rt.block_on(async {
        let left = Arc::new(AtomicU64::new(a.requests));
        let mut tasks = Vec::new();
        for _ in 0..a.concurrency {
            let r = Reader {
                clock,
                counters: counters.clone(),
                tally: tally.clone(),
                chunk: memchr::memmem::Finder::new(pattern),
                end,
                buf: vec![0u8; 16 << 10],
            };
            tasks.push(tokio::spawn(worker(a.clone(), r, left.clone())));
        }
        for t in tasks {
            t.await.expect("worker");
        }
    });
    let wall = clock::since(t0).as_secs_f64();
    let cpu = (clock::selfwatch::process_cpu_time().unwrap_or_default() - cpu0).as_secs_f64();
    let t = &tally;
    let (req, reads, chunks) = (
        t.requests.load(Ordering::Relaxed),
        t.reads.load(Ordering::Relaxed),
        t.chunks.load(Ordering::Relaxed),
    );
    // The role event carries an empty content string: not a chunk.
    let chunks = if matches!(a.kind, Kind::Ws | Kind::WsTung) {
        chunks
    } else {
        chunks.saturating_sub(req)
    };
    println!(
        "floor transport={} requests={req} chunks={chunks} reads={reads} bytes={} cpu_s={cpu:.3} wall_s={wall:.2} us_per_chunk={:.3} us_per_read={:.3} chunks_per_read={:.3} (stamp sum {})",
        match a.kind {
            Kind::Http => "http",
            Kind::HttpPooled => "http-pooled",
            Kind::Ws => "ws",
            Kind::WsTung => "ws-tungstenite",
        },
        t.bytes.load(Ordering::Relaxed),
        cpu * 1e6 / chunks.max(1) as f64,
        cpu * 1e6 / reads.max(1) as f64,
        chunks as f64 / reads.max(1) as f64,
        t.stamps.load(Ordering::Relaxed) % 1000,
    );
}
